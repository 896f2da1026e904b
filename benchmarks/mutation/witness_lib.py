"""Helpers and the registry for benchmarks/mutation/witnesses.py."""
from __future__ import annotations

import re

import numpy as np

WITNESSES = {}


def witness(fn):
    WITNESSES[fn.__name__] = fn
    return fn


# -- helpers ------------------------------------------------------------------

def _jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax


def xs(n=3, lo=0.5, hi=1.5):
    _jax()
    import jax.numpy as jnp
    return jnp.linspace(lo, hi, n)


def close(got, want, rtol=1e-9, what=""):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=rtol, err_msg=what)


def fd_jvp(f, x, t, eps=1e-6):
    """Central finite difference of f at x along t (float64)."""
    return (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)


def kinds(f, *args):
    """What jax.ad_checkpoint saves for f, one word per residual: 'arg',
    'name:N', 'jit' or the primitive whose output it is."""
    from jax._src.ad_checkpoint import saved_residuals
    out = []
    for _, src in saved_residuals(f, *args):
        if src.startswith("from the argument"):
            out.append("arg")
        elif m := re.match(r"named '([^']*)'", src):
            out.append(f"name:{m.group(1)}")
        elif src.startswith("output of jitted function"):
            out.append("jit")
        else:
            out.append(re.match(r"output of (\S+)", src).group(1))
    return out


def residual_shapes(f, *args):
    from jax._src.ad_checkpoint import saved_residuals
    return [tuple(a.shape) for a, _ in saved_residuals(f, *args)]


def grad_vs_fd(f, x, rtol=1e-6):
    jax = _jax()
    t = np.linspace(0.3, 1.1, np.size(x)).reshape(np.shape(x))
    got = np.sum(np.asarray(jax.grad(f)(x)) * t)
    close(got, fd_jvp(f, x, t), rtol, "grad . t vs finite differences")


def jvp_vs_fd(f, x, rtol=1e-6):
    jax = _jax()
    t = np.linspace(0.3, 1.1, np.size(x)).reshape(np.shape(x))
    _, got = jax.jvp(f, (x,), (t,))
    close(got, fd_jvp(f, x, t), rtol, "jvp vs finite differences")


def barrier_operands(hlo: str) -> int:
    """Operands of all optimization barriers in (StableHLO) text."""
    total = 0
    for line in hlo.splitlines():
        if "optimization_barrier" in line:
            args = line.split("optimization_barrier", 1)[1].split(":", 1)[0]
            total += args.count("%")
    return total


def remat3():
    _jax().config.update("jax_remat3", True)


def _np():
    jax = _jax()
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name as name
    return jax, jnp, lax, name, jax.checkpoint_policies


def _grad_hlo(f, x):
    jax = _jax()
    return jax.jit(jax.grad(lambda x: jax.numpy.sum(f(x)))).lower(x).as_text()
