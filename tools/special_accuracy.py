"""How accurate JAX's float32 special functions are: the table
`oracle.tolerances.IMPLEMENTATION_ERROR` is this script's output.

    python -m tools.special_accuracy          # prints the table's entries

For each primitive, JAX's float32 result is compared with JAX's float64
result at the same (float32) inputs, over a dense grid of the inputs the
fuzzer draws and beyond (poles and branch points avoided by 1e-3). The
error is counted in units of eps/2 of max(1, |float64 value|): relative
for large values, absolute below 1 (near a zero of the function, where the
relative error of any implementation grows without bound); the largest
over the grid, rounded up, is printed (polygamma's per order: its order 4
is off by 2.7e-4 near its zero at -0.5, its orders 1-3 far less). Runs in a subprocess of its own
(jax_enable_x64 is process-wide)."""
from __future__ import annotations

import math

import numpy as np

HALF_EPS = 2.0 ** -24      # float32


def _grid(lo, hi, n=200_001, poles=False):
    x = np.linspace(lo, hi, n)
    if poles:                                   # 0, -1, -2, ... avoided
        x = x[(x > 0) | (np.abs(x - np.round(x)) > 1e-3)]
    return x.astype(np.float32)


def _pairs(a_lo, a_hi, x_lo, x_hi, n=600):
    a, x = np.meshgrid(np.linspace(a_lo, a_hi, n), np.linspace(x_lo, x_hi, n))
    return a.ravel().astype(np.float32), x.ravel().astype(np.float32)


def cases():
    """(primitive name, function of float arrays, its float32 inputs)."""
    from jax import lax
    gamma_args = _grid(-4, 4, poles=True)
    a, x = _pairs(0.05, 5, 0.01, 5)
    ba, bb = _pairs(0.1, 5, 0.1, 5, n=200)
    bx = np.float32(0.37)
    return [
        ("lgamma", lax.lgamma, (gamma_args,)),
        ("digamma", lax.digamma, (gamma_args,)),
        *[(f"polygamma({m})", lambda v, m=m: lax.polygamma(v.dtype.type(m), v), (gamma_args,)) for m in (1, 2, 3, 4)],
        ("erf", lax.erf, (_grid(-4, 4),)),
        ("erfc", lax.erfc, (_grid(-4, 4),)),
        ("erf_inv", lax.erf_inv, (_grid(-0.999, 0.999),)),
        ("bessel_i0e", lax.bessel_i0e, (_grid(-6, 6),)),
        ("bessel_i1e", lax.bessel_i1e, (_grid(-6, 6),)),
        ("igamma", lax.igamma, (a, x)),
        ("igammac", lax.igammac, (a, x)),
        ("igamma_grad_a", lax.igamma_grad_a, (a, x)),
        ("regularized_incomplete_beta", lambda p, q: lax.betainc(p, q, np.full_like(p, bx)), (ba, bb)),
    ]


def error_units(fn, args) -> float:
    """The largest |f32 - f64| / (eps/2 * max(1, |f64|)) over the inputs."""
    import jax.numpy as jnp
    lo = np.asarray(fn(*[jnp.asarray(a) for a in args]), np.float64)
    hi = np.asarray(fn(*[jnp.asarray(a.astype(np.float64)) for a in args]), np.float64)
    finite = np.isfinite(lo) & np.isfinite(hi)
    units = np.abs(lo - hi)[finite] / (HALF_EPS * np.maximum(1.0, np.abs(hi[finite])))
    return float(units.max())


def main():
    import jax
    jax.config.update("jax_enable_x64", True)
    table: dict = {}
    for name, fn, args in cases():
        units = math.ceil(error_units(fn, args))
        if "(" in name:              # polygamma(m): per order, its first operand
            prim, order = name.rstrip(")").split("(")
            table.setdefault(prim, {})[int(order)] = units
        else:
            table[name] = units
    print(f"# jax {jax.__version__}, {jax.default_backend()}")
    for prim, units in table.items():
        print(f'    "{prim}": {units},')


if __name__ == "__main__":
    main()
