"""The generic reduce_window (spec/prims_window.py).

* spec only: evaluation against an independent numpy fold (padding, base
  and window dilation, strides; two operands), the JVP against float64
  finite differences, vmap (one operand unbatched) against a loop, JAX's
  refusals word for word (a tangent or a batch axis on an init value,
  reverse mode: linearization fails);
* with JAX: values against XLA:CPU (a computation that is not
  commutative, so the fold order is checked too); the jaxpr round trip
  (oracle.from_jax reads the computation, oracle.to_jax rebinds it);
  oracle.check under remat2 / remat3 with several policies, and of a
  traced init value (JAX's refusals met by the spec's); a reproducer of a
  program using it runs.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import spec
from spec.prims_window import INIT_BATCH_ERROR, INIT_TANGENT_ERROR, reduce_window

RNG = np.random.default_rng(0)
WINDOW = ((3, 2), (2, 1), ((1, 1), (1, 0)), (2, 1), (1, 2))     # dims, strides, padding, base, window dilation


def _fold(combine, x, init, dims, strides, padding, base, wdil):
    """Independent reference: the base-dilated, padded operand as an
    explicit array (NaN at holes and padding), each window's operand
    elements folded in row-major order from init (XLA:CPU's ReduceWindow
    skips padding and holes rather than folding init in)."""
    size = [(d - 1) * b + 1 + lo + hi for d, b, (lo, hi) in zip(x.shape, base, padding)]
    full = np.full(size, np.nan, dtype=np.float64)
    full[tuple(slice(lo, lo + (d - 1) * b + 1, b) for d, b, (lo, _) in zip(x.shape, base, padding))] = x
    out_shape = [(s - (w - 1) * r - 1) // st + 1 for s, w, r, st in zip(size, dims, wdil, strides)]
    out = np.empty(out_shape)
    for pos in itertools.product(*map(range, out_shape)):
        acc = init
        for tap in itertools.product(*map(range, dims)):
            v = full[tuple(p * st + k * r for p, st, k, r in zip(pos, strides, tap, wdil))]
            acc = acc if np.isnan(v) else combine(acc, v)
        out[pos] = acc
    return out


def _prog(combine, init, shape, window=WINDOW):
    return spec.trace(lambda x: reduce_window(x, init, combine, *window), spec.f32[shape])


@pytest.mark.parametrize("combine,init", [(lambda a, b: a * b, 1.0), (lambda a, b: 0.5 * a + b, 0.0),
                                          (lambda a, b: a + b * b, 0.0)])
def test_eval_is_the_row_major_fold(combine, init):
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    got = spec.evaluate(_prog(combine, init, (5, 4)), x)[0]
    np.testing.assert_allclose(got, _fold(combine, x.astype(np.float64), init, *WINDOW), rtol=1e-5, atol=1e-6)


def test_two_operands_argmax_style():
    """A variadic reduction: (value, index) pairs keep the larger value."""
    x = RNG.normal(size=(7,)).astype(np.float32)
    idx = np.arange(7, dtype=np.float32)

    def comp(acc, e):
        take = spec.ops.gt(e[0], acc[0])
        return [spec.ops.select_n(take, acc[0], e[0]), spec.ops.select_n(take, acc[1], e[1])]

    prog = spec.trace(lambda v, i: reduce_window([v, i], [-np.inf, -1.0], comp, (3,), (2,)), spec.f32[7],
                      spec.f32[7])
    vals, where = spec.evaluate(prog, x, idx)
    windows = [x[s:s + 3] for s in range(0, 5, 2)]
    np.testing.assert_array_equal(vals, [w.max() for w in windows])
    np.testing.assert_array_equal(where, [s + int(np.argmax(w)) for s, w in zip(range(0, 5, 2), windows)])


def test_jvp_is_the_finite_difference():
    combine = lambda a, b: a * b + b          # noqa: E731
    x = (RNG.uniform(0.5, 1.5, size=(5, 4))).astype(np.float32)
    t = RNG.normal(size=(5, 4)).astype(np.float32)
    prog = _prog(combine, 0.0, (5, 4))
    _, tangent = spec.evaluate(spec.jvp(prog), x, t)
    x64, t64, eps = x.astype(np.float64), t.astype(np.float64), 1e-6
    fd = (_fold(combine, x64 + eps * t64, 0.0, *WINDOW) - _fold(combine, x64 - eps * t64, 0.0, *WINDOW)) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-4, atol=1e-5)


def test_jvp_refuses_an_init_value_tangent():
    prog = spec.trace(lambda x, i: reduce_window(x, i, lambda a, b: a * b, (2,)), spec.f32[4], spec.f32[()])
    with pytest.raises(TypeError, match=INIT_TANGENT_ERROR):
        spec.jvp(prog)


def test_reverse_mode_fails_as_jax_linearization_does():
    with pytest.raises(ValueError, match="Linearization failed to produce known values"):
        spec.vjp_program(_prog(lambda a, b: a * b, 1.0, (5, 4)))


def test_vmap_is_the_loop():
    prog = spec.trace(lambda x, y: reduce_window([x, y], [0.0, 1.0],
                                                 lambda a, e: [a[0] + e[0] * e[1], a[1] * e[1]], (2, 2),
                                                 (1, 1), "SAME"), spec.f32[3, 4], spec.f32[3, 4])
    xs = RNG.normal(size=(3, 2, 4)).astype(np.float32)           # batched at axis 1
    y = RNG.normal(size=(3, 4)).astype(np.float32)               # unbatched
    batched = spec.vmap(prog, in_axes=(1, None), axis_size=2)
    got = spec.evaluate(batched, xs, y)
    for k in range(2):
        want = spec.evaluate(prog, xs[:, k], y)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g[k], w)


def test_vmap_refuses_a_batched_init_value():
    prog = spec.trace(lambda x, i: reduce_window(x, i, lambda a, b: a * b, (2,)), spec.f32[4], spec.f32[()])
    with pytest.raises(NotImplementedError, match=INIT_BATCH_ERROR):
        spec.vmap(prog, in_axes=(0, 0), axis_size=2)


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


def test_values_and_round_trip_against_jax():
    jax = _jax()
    from jax import lax
    from oracle.from_jax import trace_jax
    from oracle.to_jax import to_jax

    def f(x):
        return lax.reduce_window(x, 0.0, lambda a, b: 0.5 * a + b, (3, 2), (2, 1), ((1, 1), (1, 0)), (2, 1), (1, 2))

    x = RNG.normal(size=(5, 4)).astype(np.float32)
    prog = trace_jax(f, x)
    assert [e.primitive.name for e in prog.eqns] == ["reduce_window"]
    np.testing.assert_allclose(spec.evaluate(prog, x)[0], np.asarray(f(x)), rtol=1e-6, atol=1e-6)
    rebuilt = jax.make_jaxpr(to_jax(prog))(x)
    assert [e.primitive.name for e in rebuilt.jaxpr.eqns] == ["reduce_window"]
    np.testing.assert_allclose(np.asarray(to_jax(prog)(x)[0]), np.asarray(f(x)), rtol=1e-6)


@pytest.mark.parametrize("policy", ["None", "dots_saveable", "everything_saveable", "nothing_saveable"])
def test_oracle_check(policy):
    jax = _jax()
    import jax.numpy as jnp
    from jax import lax
    import oracle

    def f(x, w):
        y = jnp.sin(x @ w)
        return lax.reduce_window(y, 1.0, lambda a, b: a * b, (2, 2), (1, 1), "SAME").sum() + jnp.cos(y).sum()

    pol = None if policy == "None" else getattr(jax.checkpoint_policies, policy)
    report = oracle.check(f, pol, RNG.normal(size=(4, 3)).astype(np.float32),
                          RNG.normal(size=(3, 5)).astype(np.float32))
    assert {r.implementation for r in report.results} == {"remat2", "remat3"}
    for impl in ("remat2", "remat3"):
        assert report.status("values", impl) == "ok"
        assert report.status("jvp", impl) == "ok"
        assert report.status("vmap", impl) == "ok"
        assert report.status("vjp", impl) == "not applicable"   # both refuse: linearization fails


def test_traced_init_value_binds_the_generic_reduce_window():
    """lax.max on a traced init value is not the monoid reducer: the generic
    reduce_window, whose JVP refuses the init value's tangent and whose
    batching refuses a batched init value, in JAX and the spec alike."""
    jax = _jax()
    import oracle

    def f(x, init):
        return jax.numpy.sum(jax.lax.reduce_window(x, init, jax.lax.max, (2,), (1,), "VALID"))
    report = oracle.check(f, None, RNG.normal(size=5).astype(np.float32), np.float32(0.0))
    for impl in ("remat2", "remat3"):
        assert report.status("values", impl) == "ok"
        assert report.status("jvp", impl) == "not applicable"
        assert report.status("vmap", impl) == "not applicable"


def test_unused_reduce_window_in_a_checkpoint():
    """Nothing reads the reduce_window: remat2 and the spec differentiate the
    checkpoint (dead code), remat3 linearizes its body equation by equation
    and raises: a known divergence."""
    _jax()
    import jax.numpy as jnp
    from jax import lax
    import oracle

    def f(x):
        lax.reduce_window(x, 1.0, lambda a, b: a * b, (2,), (1,), "VALID")
        return jnp.sum(jnp.sin(x))
    report = oracle.check(f, None, RNG.normal(size=5).astype(np.float32))
    assert report.status("vjp", "remat2") == "ok"
    assert report.status("vjp", "remat3") == "known divergence"


def test_reproducer_runs():
    _jax()
    import subprocess
    import sys
    from oracle.repro import write_repro
    prog = _prog(lambda a, b: a * b, 1.0, (5, 4))
    x = RNG.uniform(0.5, 1.5, size=(5, 4)).astype(np.float32)
    repro = write_repro(prog, None, [x], "values", "remat2", "written by tests/test_prims_window.py")
    run = subprocess.run([sys.executable, "-c", repro.text], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
