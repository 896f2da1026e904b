"""pure_callback (spec/prims_callback.py) against jax.pure_callback: values,
the result checks, the missing JVP, batching per vmap_method, dead code,
reproducers, and oracle.check on a user's callback made differentiable
with jax.custom_jvp. Every expected value, error and batched program
comes from JAX (or numpy), never from the spec.
"""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import spec
from spec import f32
from spec.prims_callback import JVP_ERROR, numpy_add, numpy_sin, pure_callback

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import oracle  # noqa: E402
from oracle.errors import Unsupported  # noqa: E402
from oracle.repro import write_repro  # noqa: E402

cp = jax.checkpoint_policies
RNG = np.random.default_rng(0)
X = RNG.normal(size=(3,)).astype(np.float32)
XB = RNG.normal(size=(4, 3)).astype(np.float32)


def _close(got, want, tol=1e-6):
    got, want = list(got), list(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)


def _names(prog):
    return [e.primitive.name for e in prog.eqns]


def _struct(x):
    return jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype if not hasattr(x, "dtype") else x.dtype)


def jax_sin(x, vmap_method="sequential"):
    return jax.pure_callback(np.sin, _struct(x), x, vmap_method=vmap_method)


def add(x, y):
    return np.add(x, y)


# --------------------------------------------------------------------------
# values

def test_eval_calls_the_callback():
    prog = spec.trace(lambda x: pure_callback(numpy_sin, [x.type], x)[0] * 2.0, f32[3])
    _close(spec.evaluate(prog, X), [jax.jit(lambda x: jax_sin(x) * 2.0)(X)])


def test_imported_callback_with_pytrees_and_several_results():
    """JAX's _FlatCallback unflattens the operands into the user's pytrees
    (keyword arguments included) and flattens the results: the imported
    program evaluates to JAX's values."""
    def cb(pair, scale=None):
        a, b = pair
        return {"sum": a + b * scale, "prod": (a * b).astype(np.float32)}

    def f(a, b, s):
        out = jax.pure_callback(cb, {"sum": _struct(a), "prod": _struct(a)}, (a, b), scale=s,
                                vmap_method="sequential")
        return out["sum"] - out["prod"]
    args = (X, X[::-1].copy(), np.float32(0.5))
    prog = oracle.from_jaxpr(jax.make_jaxpr(f)(*args))
    assert "pure_callback" in _names(prog)
    _close(spec.evaluate(prog, *args), [jax.jit(f)(*args)])


@pytest.mark.parametrize("bad,message", [
    (lambda x: [x[:2]], "Incorrect output shape for return value #0: Expected: (3,), Actual: (2,)"),
    (lambda x: [x.astype(np.int32)], "Incorrect output dtype for return value #0: Expected: float32, Actual: int32"),
    (lambda x: [x, x], "Mismatched number of outputs from callback. Expected: 1, Actual: 2"),
])
def test_results_are_checked_as_jax_checks_them(bad, message):
    def f(x):
        return jax.pure_callback(lambda v: tuple(bad(np.asarray(v))), (_struct(x),), x)[0]
    with pytest.raises(Exception, match=re.escape(message)):
        jax.block_until_ready(jax.jit(f)(X))
    prog = spec.trace(lambda x: pure_callback(lambda v: bad(v), [x.type], x)[0], f32[3])
    with pytest.raises(RuntimeError, match=re.escape(message)):
        spec.evaluate(prog, X)


class UsersError(Exception):
    pass


def test_what_the_callback_raises_is_the_users_own():
    def cb(x):
        raise UsersError("refused")
    prog = spec.trace(lambda x: pure_callback(cb, [x.type], x)[0], f32[3])
    with pytest.raises(UsersError, match="refused"):
        spec.evaluate(prog, X)


def test_a_64_bit_result_is_narrowed_as_without_x64():
    """dtypes.canonicalize_value: a float64 result where float32 is declared."""
    wide = lambda x: [np.asarray(x, np.float64) * 2]     # noqa: E731
    f = lambda x: jax.pure_callback(lambda v: wide(v)[0], _struct(x), x)      # noqa: E731
    prog = spec.trace(lambda x: pure_callback(wide, [x.type], x)[0], f32[3])
    got = spec.evaluate(prog, X)[0]
    assert got.dtype == np.float32
    _close([got], [jax.jit(f)(X)])


# --------------------------------------------------------------------------
# differentiation

def test_no_jvp_jaxs_error_word_for_word():
    with pytest.raises(ValueError) as theirs:
        jax.jvp(jax_sin, (X,), (X,))
    assert str(theirs.value) == JVP_ERROR
    prog = spec.trace(lambda x: pure_callback(numpy_sin, [x.type], x)[0], f32[3])
    with pytest.raises(ValueError) as mine:
        spec.jvp(prog)
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(ValueError, match=re.escape(str(theirs.value))):
        spec.grad(spec.trace(lambda x: spec.ops.reduce_sum(pure_callback(numpy_sin, [x.type], x)[0], (0,)),
                             f32[3]))


def test_a_callback_on_a_constant_differentiates_around_it():
    """Every tangent zero: no rule runs (JAX binds the callback on the primals)."""
    f = lambda x: jax_sin(jax.lax.stop_gradient(x)) * x       # noqa: E731
    prog = spec.trace(lambda x: pure_callback(numpy_sin, [x.type], spec.ops.stop_gradient(x))[0] * x, f32[3])
    t = np.ones(3, np.float32)
    _close(spec.evaluate(spec.jvp(prog), X, t), jax.jvp(f, (X,), (t,)))


# --------------------------------------------------------------------------
# batching: ffi_batching_rule per vmap_method

METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized"]


@pytest.mark.parametrize("in_axes", [(0, None), (0, 0), (None, 1)])
@pytest.mark.parametrize("method", METHODS)
def test_vmap_per_method_as_jax(method, in_axes):
    y = RNG.normal(size=(3,)).astype(np.float32)
    args = [XB if in_axes[0] == 0 else X, {None: y, 0: XB[::-1].copy(), 1: XB.T.copy()}[in_axes[1]]]

    def f(a, b):
        return jax.pure_callback(add, _struct(a), a, b, vmap_method=method) * 2.0
    theirs = jax.vmap(f, in_axes=in_axes)
    prog = spec.trace(lambda a, b: pure_callback(numpy_add, [a.type], a, b, vmap_method=method)[0] * 2.0,
                      f32[3], f32[3])
    mine = spec.vmap(prog, list(in_axes), 0, axis_size=4)
    _close(spec.evaluate(mine, *args), [theirs(*args)])
    jaxs = oracle.from_jaxpr(jax.make_jaxpr(theirs)(*args))
    assert _names(mine) == _names(jaxs)
    for m, j in zip(mine.eqns, jaxs.eqns):
        if m.primitive.name == "scan":          # the unbatched operand a const, the unroll
            assert [m.params[k] for k in ("length", "num_consts", "num_carry", "unroll")] == \
                   [j.params[k] for k in ("length", "num_consts", "num_carry", "unroll")]
        if m.primitive.name == "pure_callback":
            assert m.params["result_avals"] == j.params["result_avals"]


def test_vmap_without_a_method_is_jaxs_error():
    with pytest.raises(NotImplementedError) as theirs:
        jax.vmap(lambda x: jax_sin(x, vmap_method=None))(XB)
    prog = spec.trace(lambda x: pure_callback(numpy_sin, [x.type], x)[0], f32[3])
    with pytest.raises(NotImplementedError) as mine:
        spec.vmap(prog, 0, 0, axis_size=4)
    assert str(mine.value) == str(theirs.value)


# --------------------------------------------------------------------------
# effects and dead code

def test_pure_means_no_effect_and_dead_code_goes():
    def f(x):
        jax_sin(x)              # unused: dead
        return x * 2.0
    closed = jax.make_jaxpr(f)(X)
    assert not closed.effects
    from jax._src.interpreters import partial_eval as pe
    jaxs, _ = pe.dce_jaxpr(closed.jaxpr, [True])
    prog = spec.trace(lambda x: (pure_callback(numpy_sin, [x.type], x), x * 2.0)[1], f32[3])
    assert _names(spec.dce(prog)[0]) == [e.primitive.name for e in jaxs.eqns] == ["mul"]


# --------------------------------------------------------------------------
# reproducers

def test_reproducer_imports_the_callback(tmp_path):
    prog = oracle.from_jaxpr(jax.make_jaxpr(lambda x: jax_sin(x) * 3.0)(X))
    expected = spec.evaluate(prog, X)
    repro = write_repro(prog, None, [X], "values", "remat2", "test", directory=str(tmp_path),
                        numeric=dict(expected=expected, atol=1e-5))
    assert "import_module('numpy').sin" in repro.text
    run = subprocess.run([sys.executable, repro.path], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_reproducer_of_a_local_callback_is_unsupported():
    prog = oracle.from_jaxpr(jax.make_jaxpr(
        lambda x: jax.pure_callback(lambda v: np.cos(v), _struct(x), x))(X))
    assert spec.evaluate(prog, X)[0].shape == (3,)       # the check itself runs it
    with pytest.raises(Unsupported, match="cannot write pure_callback's callback .* inside a function"):
        write_repro(prog, None, [X], "values", "remat2", "test")


# --------------------------------------------------------------------------
# oracle.check on a user's callback, differentiable through jax.custom_jvp

@jax.custom_jvp
def np_sin(x):
    return jax.pure_callback(np.sin, _struct(x), x, vmap_method="sequential")


@np_sin.defjvp
def _np_sin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return np_sin(x), jax.pure_callback(np.cos, _struct(x), x, vmap_method="sequential") * t


def loss(w, x):
    h = np_sin(x @ w)
    h = jax.checkpoint(lambda v: np_sin(v) * v)(h)      # a checkpoint of its own (oracle.AS_IS)
    return jnp.sum(h ** 2)


@pytest.mark.parametrize("policy", [None, cp.dots_saveable, oracle.AS_IS], ids=["none", "dots_saveable", "as_is"])
def test_oracle_check_user_callback(policy):
    w, x = (RNG.normal(size=(3, 2)) * 0.5).astype(np.float32), RNG.normal(size=(4, 3)).astype(np.float32)
    report = oracle.check(loss, policy, w, x)
    bad = [r for r in report.results if r.status not in ("ok", "known divergence")
           and not (r.property == "second_order" and r.status == "not applicable")]
    assert not bad, report
    assert report.status("vjp", "remat2") == "ok"
    # forward over reverse differentiates the rule's own callback (np.cos): JAX
    # refuses, and the spec with JAX's error
    second = next(r for r in report.results if r.property == "second_order")
    assert second.status == "not applicable" and "Pure callbacks do not support JVP" in second.detail
