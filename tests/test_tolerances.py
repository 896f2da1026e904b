"""The tolerance model's noise runs (oracle/tolerances.py): what a float32
rounding perturbs, and JAX's special functions' own error."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import oracle  # noqa: E402
import spec  # noqa: E402
from oracle import tolerances  # noqa: E402
from spec.prims_special import polygamma  # noqa: E402


def _noisy(fn, *types, args):
    """One noise run (float32 rounding modelled) of the traced float64 program."""
    prog = spec.trace(fn, *types)
    hook = tolerances.rounding_noise_hook(np.float32, np.random.default_rng(0))
    return spec.evaluate(prog, *[np.asarray(a, np.float64) for a in args], hook=hook)


def test_a_result_float32_holds_exactly_is_not_perturbed():
    """2.0 + 1.0 rounds nothing in float32; 0.1 + 0.2 does. (Perturbing the
    first made a polygamma order 2.9999999, and polygamma of it NaN: every
    noise run of a polygamma's derivative failed, its noise estimate none.)"""
    exact, = _noisy(lambda a, b: (spec.ops.add(a, b),), spec.f64[()], spec.f64[()], args=(2.0, 1.0))
    assert float(exact) == 3.0
    inexact, = _noisy(lambda a, b: (spec.ops.add(a, b),), spec.f64[()], spec.f64[()], args=(0.1, 0.2))
    assert float(inexact) != 0.1 + 0.2
    assert abs(float(inexact) - 0.3) <= 2.0 ** -24 * 0.31


def test_polygamma_s_noise_is_its_order_s_measured_error():
    """A polygamma result is perturbed by its order's entry, up to
    IMPLEMENTATION_ERROR * eps/2 of max(1, |value|), not by eps/2."""
    x = np.array([0.7, 1.3, -1.2294966, 2.5])
    ref = np.asarray(spec.evaluate(spec.trace(lambda m, v: (polygamma(m, v),), spec.f64[()], spec.f64[4]),
                                   np.float64(2.0), x)[0])
    noisy, = _noisy(lambda m, v: (polygamma(m, v),), spec.f64[()], spec.f64[4], args=(2.0, x))
    units = np.abs(np.asarray(noisy) - ref) / (2.0 ** -24 * np.maximum(1.0, np.abs(ref)))
    assert units.max() <= tolerances.IMPLEMENTATION_ERROR["polygamma"][2]
    assert units.max() > 1.0


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="the table was measured on jax 0.10.2")
def test_the_implementation_error_table_bounds_jax_s_special_functions():
    """A fresh measurement (tools/special_accuracy.py, a subprocess: float64
    is process-wide) is within the table: the table bounds JAX's error."""
    out = subprocess.run([sys.executable, "-m", "tools.special_accuracy"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    measured = {}
    for line in out.splitlines():
        if line.startswith('    "'):
            name, value = line.strip().rstrip(",").split(": ", 1)
            measured[name.strip('"')] = eval(value)     # an int, or {order: int}
    assert set(measured) == set(tolerances.IMPLEMENTATION_ERROR)
    for name, units in measured.items():
        table = tolerances.IMPLEMENTATION_ERROR[name]
        pairs = [(units[k], table[k]) for k in units] if isinstance(units, dict) else [(units, table)]
        assert all(m <= t for m, t in pairs), (name, units, table)


def test_jax_s_polygamma_under_a_cosine_is_no_mismatch():
    """vjp of sin(polygamma(2, c)) at c = -1.2294966: JAX's float32
    polygamma is off by ~3 eps/2, which the cosine's conditioning turns into
    0.05 on a cotangent of -109 (pristine nightly finding 1f9b59046c: a
    Mismatch on a correct JAX). The float64 reference decides."""
    c = np.array([1.3132702, 1.4127556, 1.1066358, -1.2294966], np.float32)
    report = oracle.check(lambda c: jnp.sin(lax.polygamma(np.float32(2.0), c)), oracle.AS_IS, c,
                          implementations=("remat2",), properties=("vjp", "second_order"))
    assert report.status("vjp", "remat2") == "ok", report


def test_a_comparison_rounding_decides_accepts_either_answer():
    """gt(sum(concatenate(b, -b)), 0) is 0 > 0 in exact arithmetic, but a
    float32 sum in another order is a rounding error away from 0 either
    way: the antithetic noise runs decide it both ways, so the output's
    noise is the mask of that position and compare accepts JAX's True
    there, and nowhere else (pristine nightly finding 84d0b733ea: XLA's
    sum decided it, the spec's exact one did not)."""
    from oracle.properties import NUMERIC, spec_numbers

    def f(b, c):
        tie = spec.ops.gt(spec.ops.reduce_sum(spec.ops.concatenate([b, spec.ops.neg(b)], 0), (0,)), 0.0)
        return spec.ops.broadcast_in_dim(tie, (2,), ()), spec.ops.gt(c, 0.0)
    prog = spec.trace(f, spec.f32[3], spec.f32[2])
    b, c = np.array([0.1, 0.7, 0.3], np.float32), np.array([0.5, -0.5], np.float32)
    expected, reference, noise = spec_numbers(prog, NUMERIC["values"], [b, c])
    assert not expected[0].any() and not reference[0].any()     # exactly 0 > 0: False
    assert noise[0].tolist() == [True, True]                    # a noise run decided True
    assert not noise[1].any()                                   # c's signs are far from a tie
    ok = lambda got, i: tolerances.compare(got, expected[i], reference[i], np.dtype(bool), 3,  # noqa: E731
                                           1.0, noise[i])[0]
    assert ok(np.array([True, False]), 0) and ok(np.array([True, True]), 0)
    assert not ok(np.array([True, True]), 1)     # c's comparison is exact
