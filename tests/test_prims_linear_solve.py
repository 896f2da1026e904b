"""custom_linear_solve (spec/prims_linear_solve.py): lax.custom_linear_solve,
and through it jnp.linalg.solve, inv and slogdet's JVP.

Expected values come from independent sources:

* evaluation: numpy.linalg.solve (and the closed-form inverse of a 2x2
  upper triangular system);
* derivatives: float64 central finite differences of the evaluated
  program; the transpose rule by the adjoint identity <ybar, A^{-1} b> ==
  <A^{-T} ybar, b>, exactly with sympy where the program evaluates
  symbolically (the exact proofs of the JVP and transpose rules are in
  tests/test_rules_exact.py), else to float64 rounding;
* vmap: a loop over the batch (every combination of batched operands);
* JAX itself: the spec's JVP program binds JAX's equations (jax.jvp of
  oracle.to_jax of the same program), its vmap program is jax.vmap's, the
  residuals outside a checkpoint are saved_residuals', programs round-trip through
  oracle.to_jax / oracle.from_jaxpr, reproducers run under plain python,
  and `oracle.check` passes for user functions under jax.checkpoint with
  policies None, dots_saveable and everything_saveable on remat2 and remat3.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import sympy

import spec
from spec import ops
from spec.core import PrimitiveError
from spec.ir import subprograms
from spec.prims_linear_solve import LinearSolveTuple, custom_linear_solve, linear_solve
from spec.symbolic import array

RNG = np.random.default_rng(0)
f64 = spec.f64


# --------------------------------------------------------------------------
# spec programs binding custom_linear_solve (also used by test_batching and test_rules_exact)

def diag_solve(a, b):
    """x = b / a for the symmetric operator x -> a * x (solve is its own transpose)."""
    return custom_linear_solve(lambda a, x: a * x, b, lambda a, y: y / a, symmetric=True,
                               matvec_consts=(a,), solve_consts=(a,))


def upper_solve(p, q, r, b0, b1):
    """(x0, x1) = A^{-1} (b0, b1) for A = [[p, q], [0, r]] acting elementwise
    on two leaves: not symmetric; vecmat is matvec transposed by the spec,
    transpose_solve solves A^T = [[p, 0], [q, r]]."""
    return custom_linear_solve(
        lambda p, q, r, x: (p * x[0] + q * x[1], r * x[1]), (b0, b1),
        lambda p, q, r, b: ((b[0] - q * (b[1] / r)) / p, b[1] / r),
        lambda p, q, r, c: (c[0] / p, (c[1] - q * (c[0] / p)) / r),
        matvec_consts=(p, q, r), solve_consts=(p, q, r), transpose_solve_consts=(p, q, r))


def no_transpose_solve(a, b):
    """diag_solve without transpose_solve: vecmat and transpose_solve are None."""
    return custom_linear_solve(lambda a, x: a * x, b, lambda a, y: y / a, matvec_consts=(a,), solve_consts=(a,))


def with_aux(a, b):
    """diag_solve whose solve also returns an aux value (the sum of b)."""
    x, aux = custom_linear_solve(lambda a, x: a * x, b, lambda a, y: (y / a, ops.reduce_sum(y, (0,))),
                                 symmetric=True, has_aux=True, matvec_consts=(a,), solve_consts=(a,))
    return x, aux


def _trace(fn, *types):
    prog = spec.trace(fn, *types)
    assert "custom_linear_solve" in {e.primitive.name for e in prog.eqns}
    return prog


def _upper_inputs(dtype=np.float64, shape=(3,)):
    p, r = (RNG.uniform(1, 2, shape).astype(dtype) for _ in range(2))
    q, b0, b1 = (RNG.normal(size=shape).astype(dtype) for _ in range(3))
    return [p, q, r, b0, b1]


# --------------------------------------------------------------------------
# evaluation and the shape rule

def test_upper_solve_evaluates_to_numpy_solve():
    args = _upper_inputs()
    prog = _trace(upper_solve, *[f64[3]] * 5)
    x0, x1 = spec.evaluate(prog, *args)
    p, q, r, b0, b1 = args
    for i in range(3):
        want = np.linalg.solve(np.array([[p[i], q[i]], [0, r[i]]]), [b0[i], b1[i]])
        np.testing.assert_allclose([x0[i], x1[i]], want, rtol=1e-13)


def test_aux_outputs_follow_x():
    prog = _trace(with_aux, f64[3], f64[3])
    assert prog.out_types == [f64[3], f64[()]]
    a, b = RNG.uniform(1, 2, 3), RNG.normal(size=3)
    x, aux = spec.evaluate(prog, a, b)
    np.testing.assert_allclose(x, b / a, rtol=1e-15)
    np.testing.assert_allclose(aux, b.sum(), rtol=1e-15)


def test_no_transpose_solve_holds_none():
    prog = _trace(no_transpose_solve, f64[3], f64[3])
    e, = prog.eqns
    assert e.params["const_lengths"] == LinearSolveTuple(1, 0, 1, 0)
    assert e.params["jaxprs"].vecmat is None and e.params["jaxprs"].transpose_solve is None
    assert [k for k, _ in subprograms(e.params)] == [("jaxprs", 0), ("jaxprs", 2)]
    assert "None" in str(prog)


def _jax_program(fn, *args):
    jax = pytest.importorskip("jax")
    import oracle
    return oracle.from_jaxpr(jax.make_jaxpr(fn)(*args))


@pytest.mark.parametrize("b_shape", [(4,), (4, 2)])
def test_jnp_linalg_solve_program_evaluates_to_numpy_solve(b_shape):
    """jnp.linalg.solve's program (one custom_linear_solve, vmapped by JAX
    over the columns of a matrix b) evaluated by the spec."""
    jnp = pytest.importorskip("jax.numpy")
    a = (RNG.normal(size=(4, 4)) + 4 * np.eye(4)).astype(np.float32)
    b = RNG.normal(size=b_shape).astype(np.float32)
    prog = _jax_program(jnp.linalg.solve, a, b)
    got, = spec.evaluate(prog, a, b)
    np.testing.assert_allclose(got, np.linalg.solve(a.astype(np.float64), b), rtol=2e-5, atol=2e-6)


def test_shape_rule_refusals():
    mv = spec.trace(lambda a, x: a * x, f64[3], f64[3])
    sv = spec.trace(lambda a, y: y / a, f64[3], f64[3])
    ok = dict(const_lengths=LinearSolveTuple(1, 0, 1, 0), jaxprs=LinearSolveTuple(mv, None, sv, None))
    spec.trace(lambda a, b: linear_solve(a, a, b, **ok), f64[3], f64[3])
    bad = {
        "const_lengths must be": dict(ok, const_lengths=(1, 0, 1, -1)),
        "jaxprs must be": dict(ok, jaxprs=LinearSolveTuple(None, None, sv, None)),
        "matvec takes": dict(ok, jaxprs=LinearSolveTuple(spec.trace(lambda a, x: a * x, f64[2], f64[2]),
                                                          None, sv, None)),
        "vecmat is None but has 1 consts": dict(ok, const_lengths=(1, 1, 0, 0)),
        "matvec must return b's types": dict(ok, jaxprs=LinearSolveTuple(
            spec.trace(lambda a, x: ops.reduce_sum(a * x, (0,)), f64[3], f64[3]), None, sv, None)),
    }
    for what, params in bad.items():
        with pytest.raises(PrimitiveError, match=what):
            spec.trace(lambda a, b, params=params: linear_solve(a, a, b, **params), f64[3], f64[3])


# --------------------------------------------------------------------------
# JVP, transpose, vmap

def _fd_jvp(prog, args, tangents, eps=1e-6):
    plus = spec.evaluate(prog, *[a + eps * t for a, t in zip(args, tangents)])
    minus = spec.evaluate(prog, *[a - eps * t for a, t in zip(args, tangents)])
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def test_jvp_matches_float64_finite_differences():
    prog = _trace(upper_solve, *[f64[3]] * 5)
    args = _upper_inputs()
    ts = [RNG.normal(size=3) for _ in args]
    outs = spec.evaluate(spec.jvp(prog), *args, *ts)
    for got, want in zip(outs[2:], _fd_jvp(prog, args, ts)):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)


def test_jvp_with_a_zero_leaf_of_b_raises_as_jax_binds_a_zero():
    """JAX's _custom_linear_solve_jvp binds its rhs as it is: a b leaf with a
    symbolic zero tangent beside a perturbed one (and matvec's consts
    unperturbed) is no JAX value (TypeError at bind); the spec raises too."""
    prog = _trace(upper_solve, *[f64[3]] * 5)
    with pytest.raises(PrimitiveError, match="symbolic zero"):
        spec.jvp_program(prog, [False, False, False, True, False])
    spec.jvp_program(prog, [True, False, False, True, False])       # matvec's tangent fills the other leaf


def test_transpose_is_the_exact_adjoint():
    """<ybar, A^{-1} b> == <A^{-T} ybar, b> exactly, A symbolic."""
    prog = _trace(upper_solve, *[f64[2]] * 5)
    tp = spec.transpose(prog, [False, False, False, True, True])
    p, q, r, b0, b1 = (array(n, (2,)) for n in ("p", "q", "r", "b0", "b1"))
    y0, y1 = array("y0", (2,)), array("y1", (2,))
    x0, x1 = spec.evaluate(prog, p, q, r, b0, b1)
    c0, c1 = spec.evaluate(tp, p, q, r, y0, y1)
    lhs = sum(sympy.sympify(u) * v for u, v in zip(np.concatenate([y0, y1]), np.concatenate([x0, x1])))
    rhs = sum(sympy.sympify(u) * v for u, v in zip(np.concatenate([c0, c1]), np.concatenate([b0, b1])))
    assert sympy.simplify(lhs - rhs) == 0


def test_transpose_of_jnp_linalg_solve_is_the_adjoint_in_float64():
    """jnp.linalg.solve's program (LU in its solve and transpose_solve),
    upcast to float64 and transposed in b: the adjoint identity to float64
    rounding, and A^{-T} ybar equals numpy's."""
    from oracle.upcast import up, upcast
    a = (RNG.normal(size=(4, 4)) + 4 * np.eye(4)).astype(np.float32)
    prog = upcast(_jax_program(pytest.importorskip("jax.numpy").linalg.solve, a, np.ones(4, np.float32)))
    tp = spec.transpose(prog, [False, True])
    b, ybar = RNG.normal(size=4), RNG.normal(size=4)
    a64, = up([a])
    x, = spec.evaluate(prog, a64, b)
    ct, = spec.evaluate(tp, a64, ybar)
    np.testing.assert_allclose(ybar @ x, ct @ b, rtol=1e-13)
    np.testing.assert_allclose(ct, np.linalg.solve(a64.T, ybar), rtol=1e-12)


def test_transpose_without_transpose_solve_raises_jaxs_error():
    prog = _trace(no_transpose_solve, f64[3], f64[3])
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        spec.transpose(prog, [False, True])
    with pytest.raises(TypeError, match="transpose_solve required"):
        spec.grad(spec.trace(lambda a, b: ops.reduce_sum(no_transpose_solve(a, b), (0,)), f64[3], f64[3]))


def test_explain_names_the_equation_that_reads_a_residual():
    """spec.explain treats the equation as opaque (its four programs each
    take their own consts and b): the consts are read by the tangent's
    custom_linear_solve, x by matvec's JVP (mul), nothing is recomputed."""
    prog = _trace(lambda p, q, r, b0, b1: [ops.sin(x) for x in upper_solve(p, q, r, b0, b1)], *[f64[3]] * 5)
    ex = spec.explain(prog)
    assert [(str(r.residual.source), r.read_by) for r in ex.residuals[:5]] == [
        ("from the argument p", ["custom_linear_solve"]), ("from the argument q", ["custom_linear_solve"]),
        ("from the argument r", ["custom_linear_solve"]),
        ("output of custom_linear_solve", ["mul"]), ("output of custom_linear_solve", ["mul"])]
    assert ex.recomputed == []


BATCH_AXES = [[0, 0, 0, 0, 0], [None, None, None, 0, None], [None, None, None, None, -1], [0, None, None, None, None],
              [None, 1, None, 0, None], [None, None, 0, None, None], [-1, 0, None, None, 1]]


@pytest.mark.parametrize("in_axes", BATCH_AXES, ids=lambda a: "-".join(map(str, a)))
def test_vmap_equals_a_loop(in_axes):
    """Every pattern of batched consts and b leaves (the batching rule's
    fixpoint broadcasts an unbatched b leaf the others batch)."""
    prog = _trace(upper_solve, *[f64[3]] * 5)
    members = [_upper_inputs() for _ in range(4)]
    for m in members[1:]:
        for i, ax in enumerate(in_axes):
            if ax is None:
                m[i] = members[0][i]
    stacked = [members[0][i] if ax is None else np.stack([m[i] for m in members], ax)
               for i, ax in enumerate(in_axes)]
    vp = spec.vmap(prog, in_axes=in_axes, out_axes=0, axis_size=4)
    spec.check_program(vp)
    got = spec.evaluate(vp, *stacked)
    for k, g in enumerate(got):
        np.testing.assert_allclose(g, np.stack([spec.evaluate(prog, *m)[k] for m in members]), rtol=1e-14)


def test_vmap_of_jnp_linalg_solve_equals_a_loop():
    jnp = pytest.importorskip("jax.numpy")
    a = (RNG.normal(size=(3, 3)) + 4 * np.eye(3)).astype(np.float32)
    prog = _jax_program(jnp.linalg.solve, a, np.ones(3, np.float32))
    xs = [(RNG.normal(size=(3, 3)) + 4 * np.eye(3)).astype(np.float32) for _ in range(3)]
    bs = [RNG.normal(size=3).astype(np.float32) for _ in range(3)]
    for in_axes in ([0, 0], [None, 0], [0, None]):
        ms = [[xs[i] if in_axes[0] is not None else xs[0], bs[i] if in_axes[1] is not None else bs[0]]
              for i in range(3)]
        stacked = [np.stack([m[j] for m in ms]) if ax is not None else ms[0][j] for j, ax in enumerate(in_axes)]
        got, = spec.evaluate(spec.vmap(prog, in_axes=in_axes, axis_size=3), *stacked)
        np.testing.assert_allclose(got, np.stack([spec.evaluate(prog, *m)[0] for m in ms]), rtol=1e-6)


# --------------------------------------------------------------------------
# with JAX

def _jax():
    return pytest.importorskip("jax")


def _sym(a):
    import jax.numpy as jnp
    from jax import lax
    m = a @ a.T + 3 * jnp.eye(3)
    return lax.custom_linear_solve(lambda x: m @ x, jnp.sin(a[:, 0]), lambda mv, b: jnp.linalg.solve(m, b),
                                   symmetric=True).sum()


def _transpose_solve(a):
    import jax.numpy as jnp
    from jax import lax
    m = a + 4 * jnp.eye(3)
    return jnp.tanh(lax.custom_linear_solve(lambda x: m @ x, jnp.sin(a[:, 0]), lambda mv, b: jnp.linalg.solve(m, b),
                                            transpose_solve=lambda vm, b: jnp.linalg.solve(m.T, b))).sum()


def _user_functions():
    jnp = pytest.importorskip("jax.numpy")
    spd = lambda a: a @ a.T + 3 * jnp.eye(3)        # noqa: E731
    return {
        "solve": lambda a: jnp.linalg.solve(spd(a), jnp.sin(a[:, 0])).sum(),
        "inv": lambda a: jnp.linalg.inv(spd(a)).sum(),
        "slogdet": lambda a: jnp.linalg.slogdet(spd(a))[1],
        "symmetric": _sym,
        "transpose_solve": _transpose_solve,
    }


USER = ["solve", "inv", "slogdet", "symmetric", "transpose_solve"]
POLICIES = ["none", "dots_saveable", "everything_saveable"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", USER)
def test_oracle_check_passes(name, policy):
    jax = _jax()
    import oracle
    fn = _user_functions()[name]
    a = RNG.normal(size=(3, 3)).astype(np.float32)
    report = oracle.check(fn, None if policy == "none" else getattr(jax.checkpoint_policies, policy), a)
    statuses = [(r.property, r.implementation, r.status) for r in report.results]
    assert {impl for _, impl, _ in statuses} >= {"remat2", "remat3"}
    assert all(s in ("ok", "known divergence", "not applicable") for _, _, s in statuses), statuses


def _names(eqns_of, subs_of, prog) -> list:
    """Primitive names at every depth (a spec `call` is JAX's `jit`)."""
    return [("jit" if n == "call" else n, [_names(eqns_of, subs_of, s) for s in subs_of(e)])
            for e in eqns_of(prog) for n in [e.primitive.name]]


def _spec_names(prog):
    return _names(lambda p: p.eqns, lambda e: [s for _, s in subprograms(e.params)], prog)


def _jax_names(jaxpr):
    from oracle.from_jax import subjaxprs
    return _names(lambda j: j.eqns, subjaxprs, jaxpr)


JVP_FUNCTIONS = ["solve", "inv", "transpose_solve", "diag", "upper"]


def _jvp_subject(name):
    """(program, its arguments) for a JVP comparison."""
    if name == "diag":
        return _trace(lambda a, b: ops.sin(diag_solve(a, b)), spec.f32[3], spec.f32[3]), [
            RNG.uniform(1, 2, 3).astype(np.float32), RNG.normal(size=3).astype(np.float32)]
    if name == "upper":
        prog = _trace(upper_solve, *[spec.f32[3]] * 5)
        return prog, _upper_inputs(np.float32)
    a = RNG.normal(size=(3, 3)).astype(np.float32)
    return _jax_program(_user_functions()[name], a), [a]


@pytest.mark.parametrize("name", JVP_FUNCTIONS)
def test_jvp_program_binds_jaxs_equations(name):
    """spec.jvp of the program has the equations (names, at every depth,
    in order) of JAX's jax.jvp of the same program (oracle.to_jax)."""
    jax = _jax()
    import oracle
    prog, args = _jvp_subject(name)
    fn = oracle.to_jax(prog)
    jaxpr = jax.make_jaxpr(lambda xs, ts: jax.jvp(fn, xs, ts))(args, args)
    assert _jax_names(jaxpr.jaxpr) == _spec_names(spec.jvp(prog))
    assert "custom_linear_solve" in str(spec.jvp(prog))


ROUND_TRIP = ["diag", "upper", "no_transpose_solve", "with_aux", "solve", "inv"]


def _round_trip_subject(name):
    f32 = spec.f32
    if name in ("solve", "inv"):
        a = RNG.normal(size=(3, 3)).astype(np.float32)
        return _jax_program(_user_functions()[name], a), [a]
    fn, types = {"diag": (diag_solve, [f32[3]] * 2), "upper": (upper_solve, [f32[3]] * 5),
                 "no_transpose_solve": (no_transpose_solve, [f32[3]] * 2),
                 "with_aux": (with_aux, [f32[3]] * 2)}[name]
    prog = _trace(fn, *types)
    return prog, [RNG.uniform(1, 2, t.shape).astype(np.float32) for t in types]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_round_trip_through_jax(name):
    jax = _jax()
    import oracle
    prog, args = _round_trip_subject(name)
    back = oracle.from_jaxpr(jax.make_jaxpr(oracle.to_jax(prog))(*args))
    assert str(back) == str(prog)
    for got, want in zip(oracle.to_jax(prog)(*args), spec.evaluate(prog, *args)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_axes", BATCH_AXES[:5], ids=lambda a: "-".join(map(str, a)))
def test_vmap_program_is_jaxs(in_axes):
    """spec.vmap of the program is jax.vmap's jaxpr of it, equation for
    equation (the batched sub-programs, broadcasts and moved axes included)."""
    jax = _jax()
    import oracle
    prog, args = _round_trip_subject("upper")
    batched = [a if ax is None else np.stack([a] * 4, ax) for a, ax in zip(args, in_axes)]
    want = oracle.from_jaxpr(jax.make_jaxpr(jax.vmap(oracle.to_jax(prog), in_axes=in_axes))(*batched))
    assert str(spec.vmap(prog, in_axes=in_axes, axis_size=4)) == str(want)


RUNNER = r'''
import runpy, sys, traceback
failed = []
for path in sys.argv[1:]:
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException as e:
        failed.append(f"{path}: {type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}")
print("\n".join(failed) or "all ran")
sys.exit(1 if failed else 0)
'''


def test_reproducers_run_under_plain_python(tmp_path):
    """Reproducers (oracle.repro) of programs binding custom_linear_solve,
    with and without transpose_solve, run to agreement."""
    _jax()
    from oracle.repro import write_repro
    paths = []
    for name in ("upper", "no_transpose_solve", "solve"):
        prog, args = _round_trip_subject(name)
        for prop in ("residuals", "values"):
            numeric = dict(expected=spec.evaluate(prog, *args), atol=1e-4) if prop == "values" else None
            text = write_repro(prog, None, args, prop, "remat2", "written by tests/test_prims_linear_solve.py",
                               numeric=numeric).text
            assert "custom_linear_solve(" in text
            paths.append(tmp_path / f"repro_{name}_{prop}.py")
            paths[-1].write_text(text)
    (tmp_path / "runner.py").write_text(RUNNER)
    run = subprocess.run([sys.executable, str(tmp_path / "runner.py"), *map(str, paths)], capture_output=True,
                         text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_saved_residuals_match_jax_under_linearize():
    """Outside any checkpoint the spec's residual list is JAX's
    saved_residuals of the program (the second solve reads the consts)."""
    _jax()
    import oracle
    from oracle.properties import jax_residuals
    prog, args = _round_trip_subject("upper")
    fn = oracle.to_jax(prog)
    want = jax_residuals(lambda p, q, r, b0, b1: fn(p, q, r, b0, b1), args)
    assert [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)] == want
    assert ("f32[3]", "output of custom_linear_solve") in want
