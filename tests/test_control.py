"""cond and while (spec/prims_control.py): evaluation against numpy, JVP and
grad against float64 finite differences, cond's transpose adjoint identity,
vmap against a Python loop, while's reverse-mode error, the spec -> JAX ->
spec round trip, and oracle.check on cond programs (the last two need jax).
"""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec import ops
from spec import policies as sp
from spec.prims_control import WHILE_TRANSPOSE_ERROR

import jax_control_programs as JCP

RNG = np.random.default_rng(0)
f64 = spec.f64


def two_branch(p, x, y):
    return spec.cond(p, lambda a, b: ops.sin(a) * b, lambda a, b: ops.exp(a) - ops.square(b), x, y)


def two_branch_np(p, x, y):
    return np.sin(x) * y if p else np.exp(x) - y * y


def loop(x):
    return spec.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, ops.sin(c[1]) * 1.5), (0, x))[1]


def loop_np(x):
    for _ in range(3):
        x = np.sin(x) * 1.5
    return x


COND = spec.trace(two_branch, spec.bool_[()], f64[3], f64[3])
LOOP = spec.trace(loop, f64[3])


def fd_jvp(f, xs, ts, eps=1e-6):
    plus = f(*[x + eps * t for x, t in zip(xs, ts)])
    minus = f(*[x - eps * t for x, t in zip(xs, ts)])
    return (plus - minus) / (2 * eps)


@pytest.mark.parametrize("p", [True, False])
def test_cond_eval_matches_numpy(p):
    x, y = RNG.normal(size=3), RNG.normal(size=3)
    (got,) = spec.evaluate(COND, np.bool_(p), x, y)
    np.testing.assert_allclose(got, two_branch_np(p, x, y), rtol=1e-12)


INDICES = np.array([-4, -1, 0, 1, 2, 3, 9], np.int32)


def test_an_out_of_range_index_runs_the_last_branch_and_a_vmapped_one_the_nearest():
    """cond_p's index out of range: JAX lowers cond to HLO's `case`, which
    runs the last branch (for a negative index too), and a vmapped cond to
    select_n, whose lowering clamps. Measured live on the installed JAX."""
    jax = pytest.importorskip("jax")
    from jax._src.lax.control_flow import conditionals
    from oracle.jax_api.internals import cond_params
    fns = [ops.sin, ops.cos, ops.exp]
    prog = spec.trace(lambda i, x: spec.switch(i, fns, x), spec.i32[()], spec.f32[2])
    x = np.array([0.3, 0.7], np.float32)
    branches = tuple(jax.make_jaxpr(f)(x) for f in (jax.numpy.sin, jax.numpy.cos, jax.numpy.exp))
    bound = lambda i, x: conditionals.cond_p.bind(i, x, branches=branches, **cond_params(1))[0]  # noqa: E731 (no clamp)
    for i in INDICES:
        np.testing.assert_allclose(spec.evaluate(prog, i, x)[0], jax.jit(bound)(i, x), rtol=1e-6)
    xs = np.tile(x, (len(INDICES), 1))
    vmapped = spec.vmap(prog, in_axes=0, out_axes=0, axis_size=len(INDICES))
    np.testing.assert_allclose(spec.evaluate(vmapped, INDICES, xs)[0], jax.vmap(bound)(INDICES, xs), rtol=1e-6)


def test_while_eval_matches_numpy():
    x = RNG.normal(size=3)
    np.testing.assert_allclose(spec.evaluate(LOOP, x)[0], loop_np(x), rtol=1e-12)


@pytest.mark.parametrize("p", [True, False])
def test_cond_jvp_matches_finite_differences(p):
    x, y, tx, ty = (RNG.normal(size=3) for _ in range(4))
    _, tout = spec.evaluate(spec.jvp(COND), np.bool_(p), x, y, tx, ty)
    np.testing.assert_allclose(tout, fd_jvp(lambda a, b: two_branch_np(p, a, b), [x, y], [tx, ty]),
                               rtol=1e-6, atol=1e-8)


def test_cond_jvp_tangent_is_union_of_branches():
    """The false branch ignores y, the true one reads it: y's tangent flows out."""
    prog = spec.trace(lambda p, x, y: spec.cond(p, lambda a, b: b * 2.0, lambda a, b: ops.sin(a), x, y),
                      spec.bool_[()], f64[2], f64[2])
    jp, out_nz = spec.jvp_program(prog, [False, False, True], instantiate_zeros=False)
    assert out_nz == [True]
    _, t = spec.evaluate(jp, np.bool_(False), np.ones(2), np.ones(2), np.ones(2))
    np.testing.assert_array_equal(t, 0.0)


def test_while_jvp_matches_finite_differences():
    x, t = RNG.normal(size=3), RNG.normal(size=3)
    _, tout = spec.evaluate(spec.jvp(LOOP), x, t)
    np.testing.assert_allclose(tout, fd_jvp(loop_np, [x], [t]), rtol=1e-6, atol=1e-8)


def test_while_linearize_works():
    lin = spec.linearize(LOOP)
    x, t = RNG.normal(size=3), RNG.normal(size=3)
    vals = spec.evaluate(lin.forward, x)
    np.testing.assert_allclose(vals[0], loop_np(x))
    (tout,) = spec.evaluate(lin.linear, *vals[1:], t)
    np.testing.assert_allclose(tout, fd_jvp(loop_np, [x], [t]), rtol=1e-6, atol=1e-8)
    assert [str(r) for r in lin.residuals] == ["f64[3] from the argument x"]


@pytest.mark.parametrize("p", [True, False])
def test_cond_grad_matches_finite_differences(p):
    prog = spec.trace(lambda p, x, y: ops.reduce_sum(two_branch(p, x, y), (0,)),
                      spec.bool_[()], f64[3], f64[3])
    x, y = RNG.normal(size=3), RNG.normal(size=3)
    gx, gy = spec.evaluate(spec.grad(prog, (1, 2)), np.bool_(p), x, y)
    f = lambda a, b: np.sum(two_branch_np(p, a, b))
    for i, g in enumerate((gx, gy)):
        e = np.zeros(3)
        for k in range(3):
            e[:] = 0
            e[k] = 1
            want = fd_jvp(f, [x, y], [e, 0 * e] if i == 0 else [0 * e, e])
            np.testing.assert_allclose(g[k], want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("index", [0, 1])
def test_cond_transpose_adjoint_identity(index):
    prog = spec.trace(lambda i, x, y: spec.switch(
        i, [lambda a, b: a * 2.0 - b, lambda a, b: b * 3.0 + a], x, y), spec.i32[()], f64[3], f64[3])
    t = [RNG.normal(size=3), RNG.normal(size=3)]
    ct = RNG.normal(size=3)
    (lt,) = spec.evaluate(prog, np.int32(index), *t)
    tbar = spec.evaluate(spec.transpose(prog, [False, True, True]), np.int32(index), ct)
    np.testing.assert_allclose(np.dot(ct, lt), sum(np.dot(a, b) for a, b in zip(tbar, t)), rtol=1e-12)


@pytest.mark.parametrize("in_axes", [(0, 0, 0), (None, 0, 0), (0, None, 0)], ids=["batched-pred", "unbatched-pred",
                                                                                 "batched-pred-x-unbatched"])
def test_cond_vmap_matches_loop(in_axes):
    B = 4
    preds = np.array([True, False, False, True])
    x, y = RNG.normal(size=(B, 3)), RNG.normal(size=(B, 3))
    args = [preds if in_axes[0] is not None else np.bool_(True),
            x if in_axes[1] is not None else x[0], y]
    vp = spec.vmap(COND, list(in_axes), 0, axis_size=B)
    (got,) = spec.evaluate(vp, *args)
    for b in range(B):
        member = [a[b] if d is not None else a for a, d in zip(args, in_axes)]
        np.testing.assert_allclose(got[b], two_branch_np(*member), rtol=1e-12)
    names = {e.primitive.name for e in vp.eqns}
    assert ("select_n" in names and "cond" not in names) == (in_axes[0] is not None)


def test_while_vmap_batched_predicate_matches_loop():
    prog = spec.trace(lambda x: spec.while_loop(lambda c: ops.reduce_sum(c, (0,)) < 10.0,
                                                lambda c: ops.abs(c) * 1.5 + 1.0, x), f64[3])
    xs = RNG.normal(size=(4, 3)) * 3
    (got,) = spec.evaluate(spec.vmap(prog, 0, 0, axis_size=4), xs)
    for b in range(4):
        np.testing.assert_allclose(got[b], spec.evaluate(prog, xs[b])[0])


def test_while_grad_raises_jax_error():
    prog = spec.trace(lambda x: ops.reduce_sum(loop(x), (0,)), f64[3])
    with pytest.raises(ValueError) as info:
        spec.grad(prog)
    assert str(info.value) == WHILE_TRANSPOSE_ERROR


def test_dce_prunes_cond_operands_no_branch_reads():
    prog = spec.trace(lambda p, x, y: spec.cond(p, lambda a, b: ops.sin(a), lambda a, b: ops.cos(a), x, y),
                      spec.bool_[()], f64[2], f64[2])
    eqn = next(e for e in prog.eqns if e.primitive.name == "cond")
    new, used = spec.core.dce_rules[eqn.primitive](eqn, [True])
    assert used == [True, True, False]
    assert all(len(b.inputs) == 1 for b in new.params["branches"])


def test_checkpointed_cond_policies():
    """Policy None recomputes everything (the checkpoint's arguments are saved);
    everything_saveable saves the index and the merged residual slots."""
    def f(p, x):
        return ops.reduce_sum(spec.cond(p, JCP.sin_sin_spec, JCP.cos_twice_spec, x), (0,))
    for policy, want in [(None, ["bool[] from the argument p", "f32[3] from the argument x"]),
                         (sp.everything_saveable, ["i32[] output of convert_element_type",
                                                   "f32[3] output of cond", "f32[3] output of cond"])]:
        prog = spec.trace(lambda p, x: ops.checkpoint(f, policy=policy)(p, x), spec.bool_[()], spec.f32[3])
        assert [str(r) for r in spec.saved_residuals(prog)] == want


def test_printing_and_check_program():
    for prog in (COND, LOOP, spec.linearize(COND).forward, spec.vmap(COND, [0, 0, 0], 0, axis_size=2)):
        spec.check_program(prog)
        assert str(prog)


# --------------------------------------------------------------------------
# with JAX

ROUND_TRIP = [p for p in JCP.PROGRAMS]


@pytest.mark.parametrize("program", ROUND_TRIP, ids=[p.name for p in ROUND_TRIP])
def test_round_trip(program):
    jax = pytest.importorskip("jax")
    import oracle
    prog = program.trace_spec()
    closed = jax.make_jaxpr(oracle.to_jax(prog))(*[jax.ShapeDtypeStruct(t.shape, t.dtype)
                                                   for t in prog.in_types])
    back = oracle.from_jaxpr(closed, input_names=prog.input_names)
    assert str(back) == str(prog)
    xs = program.example_inputs()
    for got, want in zip(jax.jit(oracle.to_jax(prog))(*xs), spec.evaluate(prog, *xs)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def _oracle_cases():
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name
    import jax
    cp = jax.checkpoint_policies
    x = np.random.default_rng(0).normal(size=(3,)).astype(np.float32)
    W = (np.random.default_rng(1).normal(size=(3, 4)) / 2).astype(np.float32)

    def cond_fn(p, x):
        return jnp.sum(lax.cond(p, lambda x: jnp.sin(jnp.sin(x)), lambda x: jnp.cos(x) * 2.0, x))

    def dot_cond(x, W):
        h = x @ W
        return jnp.sum(lax.cond(jnp.sum(h) > 0, lambda h: jnp.tanh(h) @ W.T, lambda h: jnp.sin(h) @ W.T, h))

    def named(x):
        return jnp.sum(lax.cond(x[0] > 0, lambda x: jnp.sin(checkpoint_name(jnp.sin(x), "h")), jnp.cos, x))
    return [("cond-none", cond_fn, None, (np.bool_(True), x), {"remat3-names-arguments-args[i]"}),
            ("cond-everything", cond_fn, cp.everything_saveable, (np.bool_(False), x),
             {"remat3-names-arguments-args[i]", "remat3-policy-only-for-dots-and-names"}),
            ("cond-dots", dot_cond, cp.dots_saveable, (x, W), {"remat3-names-arguments-args[i]"}),
            ("cond-names", named, cp.save_only_these_names("h"), (x,),
             {"remat3-names-arguments-args[i]", "remat3-checkpoint-name-has-no-batching-rule"})]


@pytest.mark.parametrize("i", range(4))
def test_oracle_check_passes_on_cond(i):
    pytest.importorskip("jax")
    import oracle
    name, fn, policy, args, expected = _oracle_cases()[i]
    report = oracle.check(fn, policy, *args)
    assert {d[0] for d in report.known_divergences + report.normalizations} == expected, name


def _offloading_cond(x):
    """A checkpoint that offloads `h` (sin, in one branch) and saves `g`
    (cos, in the other) on the device: the merged residual slots of the
    cond are f32<host> for one branch and device for the other."""
    policy = sp.save_and_offload_only_these_names(
        names_which_can_be_saved=["g"], names_which_can_be_offloaded=["h"],
        offload_src="device", offload_dst="pinned_host")

    def body(v):
        h = lambda u: ops.checkpoint_name(ops.sin(u), "h")
        g = lambda u: ops.cos(ops.checkpoint_name(ops.cos(u), "g"))
        pred = ops.gt(ops.reduce_sum(v, (0,)), np.zeros((), v.dtype))
        return spec.cond(pred, lambda u: h(u) * h(u), g, v)
    return ops.checkpoint(body, policy=policy)(x)


def test_cond_fills_an_offloaded_residual_slot_in_its_memory_space():
    """Found by the fuzzer: each branch of the known cond fills the merged
    residual slots it has no value for with an empty value of the slot's
    type, its memory space included (JAX: ad_util.empty_like_aval,
    `empty2(dtype, memory_space=aval.memory_space)`, measured: the true
    branch returns `f32<host>` empties, the false a device one), so every
    branch has the same output types; the spec filled host slots with
    device zeros and refused the cond. The gradient is float64 finite
    differences'."""
    prog = spec.trace(_offloading_cond, f64[2])
    known = next(e for e in spec.linearize(prog).forward.eqns if e.primitive.name == "cond")
    types = [[str(t) for t in b.out_types] for b in known.params["branches"]]
    assert types[0] == types[1] == ["f64[2]", "f64[2]", "f64<host>[2]", "f64<host>[2]"]
    x = np.array([0.3, 0.4])
    _, pullback, _ = spec.vjp(prog, x)
    eps = 1e-6
    fd = [(spec.evaluate(prog, x + eps * e)[0].sum() - spec.evaluate(prog, x - eps * e)[0].sum()) / (2 * eps)
          for e in np.eye(2)]
    np.testing.assert_allclose(pullback(np.ones(2))[0], fd, rtol=1e-7)


def test_oracle_check_passes_on_an_offloading_cond():
    """JAX computes the same program (remat2: the same residuals, host ones
    included, and gradients). Differentiated twice, JAX's cond JVP makes
    the zero tangent of a host residual on the device, in one branch only
    (a known divergence: its own typecheck refuses that cond)."""
    pytest.importorskip("jax")
    import oracle
    prog = spec.trace(_offloading_cond, spec.f32[2])
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, np.array([0.3, 0.4], np.float32),
                          properties=("residuals", "vjp", "second_order"))
    assert {report.status(p, "remat2") for p in ("residuals", "vjp")} == {"ok"}
    assert ("cond-jvp-instantiates-host-tangents-on-device", "second_order", "remat2") in report.known_divergences


def test_linearizing_a_while_asks_the_policies_of_its_body_checkpoints():
    """JAX's carry fixpoint partially evaluates the loop body
    (`_while_partial_eval`: pe.partial_eval_jaxpr_nounits), so a checkpoint
    in the body is split by its own policy even though the whole loop is
    then staged: a save_from_both_policies of a bool policy and an offload
    policy raises JAX's ValueError (measured on jax 0.10.2; found by the
    fuzzer). The spec asks the same questions and raises too."""
    from spec import policies as SP
    pol = SP.save_from_both_policies(SP.nothing_saveable, SP.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"], offload_src="device",
        offload_dst="pinned_host"))

    def f(x):
        def body(i, v):
            w = ops.checkpoint(lambda u: ops.add(u, ops.checkpoint_name(u, "a")), policy=pol)(v)
            return ops.add(i, np.int32(1)), w
        return spec.while_loop(lambda carry: ops.lt(carry[0], np.int32(1)), lambda carry: body(*carry),
                               (np.int32(0), x))[1]
    prog = spec.trace(f, spec.f32[3])
    with pytest.raises(SP.PolicyCombinationError):
        spec.saved_residuals(prog)


def test_a_while_body_holding_a_generic_reduce_window_has_no_linearization():
    """JAX (0.6.2 and 0.10.2 measured; asserted below on the installed one)
    refuses jax.linearize of this loop: the generic reduce_window's JVP
    computes its primal output jointly with the tangents, so partial
    evaluation makes the loop's primal carry unknown. The spec computed it,
    looking through the window computation as if it were a body applied to
    the operands (found by a campaign on 0.6.2)."""
    from spec.jvp import LINEARIZATION_ERROR
    from spec.prims_window import reduce_window

    def f(x, p):
        def body(p_, q):
            s = reduce_window(p_, np.float32(0.0), lambda t, u: ops.add(t, ops.mul(u, u)), (2, 2), (1, 1))
            return ops.add(q, ops.tanh(ops.reduce_sum(s, (0, 1))))
        return ops.while_loop(lambda q: ops.lt(ops.reduce_sum(q, (0,)), np.float32(3.0)), body, x,
                              body_consts=(p,))
    prog = spec.trace(f, spec.f32[3], spec.f32[3, 3])
    with pytest.raises(ValueError, match=LINEARIZATION_ERROR[:40]):
        spec.linearize(prog)

    jax = pytest.importorskip("jax")
    from jax import lax

    def jax_f(x, p):
        def body(q):
            s = lax.reduce_window(p, 0.0, lambda t, u: t + u * u, (2, 2), (1, 1), "VALID")
            return q + jax.numpy.tanh(s.sum())
        return lax.while_loop(lambda q: q.sum() < 3.0, body, x)
    with pytest.raises(ValueError, match=LINEARIZATION_ERROR[:40]):
        jax.linearize(jax_f, np.zeros(3, np.float32), np.ones((3, 3), np.float32))


BRANCH_CONSTANT = np.array([0.5, 0.75, 1.0], np.float32)


def _checkpointed_cond_reading_a_constant(f, form="lax.cond"):
    """A checkpoint (names policy, no name bound inside the cond) whose cond
    has a branch reading a closed-over array: as lax.cond makes it (the
    array a leading operand of the cond, `_merge_common_consts`), or bound
    with the array a const of that branch's ClosedJaxpr (as JAX's own rules
    bind a staged branch, and from_jax reads it)."""
    from spec.prims_control import cond_eqn

    def masked(n):
        return ops.select_n(ops.gt(n, BRANCH_CONSTANT), n, n + ops.sin(n))

    def body(f):
        pred = ops.gt(ops.reduce_sum(f, (0,)), np.float32(0.0))
        if form == "lax.cond":
            out = spec.cond(pred, lambda s: s + ops.sin(s), masked, f)
        else:
            branches = [spec.trace(b, spec.f32[3]) for b in (lambda s: s + ops.sin(s), masked)]
            out, = cond_eqn(ops.convert_element_type(pred, np.int32), f, branches=branches)
        return ops.checkpoint_name(f, "c"), out
    return ops.checkpoint(body, policy=sp.save_only_these_names("c"), prevent_cse=False)(f)


# what the spec saves, by the cond's form: lax.cond's hoisted constant is a
# known operand of the cond, saved ("f32[3] from a constant"; jax 0.10.2's
# print_saved_residuals of the same function written with lax.cond lists
# it, and the oracle check below compares with JAX on the installed release)
CONSTANT_BRANCH_RESIDUALS = {"lax.cond": ["constant", "argument"], "branch const": ["argument"]}


@pytest.mark.parametrize("form", sorted(CONSTANT_BRANCH_RESIDUALS))
def test_a_cond_branch_s_constant_inside_a_checkpoint(form):
    """Found by the campaign (jax 0.4.25, round k, finding 0953d98a80; a
    spec bug, 0.10.2 too): inside a checkpoint JAX splits each branch with
    partial_eval_jaxpr_custom, which writes the branch's constvars known and
    instantiated, and gives both halves the branch's consts
    (`core.ClosedJaxpr(jaxpr_staged, jaxpr.consts)`, _cond_partial_eval_custom):
    the staged branch reads the constant itself. The spec made it a residual
    of the known cond (an extra `output of cond`). A cond made as lax.cond
    makes it has no branch consts: the constant is an operand, and saved.
    JAX's list, on the installed release, is the independent answer."""
    prog = spec.trace(lambda f: _checkpointed_cond_reading_a_constant(f, form), spec.f32[3])
    assert [r.source.kind for r in spec.saved_residuals(prog)] == CONSTANT_BRANCH_RESIDUALS[form]
    pytest.importorskip("jax")
    import oracle
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, np.array([0.54, 0.52, 1.31], np.float32),
                          properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    # remat3's _cond_remat saves the constant (remat.remat_jaxpr), as its _pjit_remat does
    assert {d[0] for d in report.known_divergences} <= {"remat3-jit-in-checkpoint-saves-its-constants"}


def _checkpointed_cond_with_a_loop_from_a_literal(x):
    """A cond (in a checkpoint saving everything) whose branch runs a while
    loop started from broadcast(0.0): oracle.to_jax binds the literal as a
    Python float, so the loop's init is weakly typed where the body was
    traced strong."""
    def loop(i):
        start = ops.broadcast_in_dim(np.float32(0.0), (3,), ())
        step = lambda p: p + ops.broadcast_in_dim(
            np.float32(1.0) + np.float32(0.1) * ops.tanh(ops.reduce_sum(ops.sin(p), (0,))), (3,), ())
        return spec.while_loop(lambda l: ops.lt(ops.reduce_sum(l, (0,)), np.float32(1.5)), step, start)

    def body(d):
        pred = ops.gt(ops.reduce_sum(d, (0,)), np.float32(0.0))
        return spec.cond(pred, ops.sin, loop, d)
    return ops.checkpoint(body, policy=sp.everything_saveable, prevent_cse=False)(x)


def test_a_weakly_typed_loop_init_is_bound_as_lax_while_loop_binds_it():
    """Found by a campaign on 0.6.2 (72792ff43b; 0.10.2 too): bound directly
    into while_p with a weakly typed init, JAX's partial evaluation saved
    one residual slot less than for the same program written with
    lax.while_loop, which converts the init to the body's strong type (as
    the reproducer writes it; the spec's types have no weak type).
    oracle.to_jax now converts such operands (`_strong`); JAX on the
    installed release is the independent answer."""
    pytest.importorskip("jax")
    import oracle
    prog = spec.trace(_checkpointed_cond_with_a_loop_from_a_literal, spec.f32[3])
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, np.array([-0.5, 0.2, 0.1], np.float32),
                          properties=("residuals",), implementations=("remat2",))
    assert report.status("residuals", "remat2") == "ok"


def _while_from_a_literal_reading_a_constant(a):
    """A while loop whose init is a scalar literal and whose body reads `a`."""
    step = lambda k, f: f + (np.float32(1.0) + np.float32(0.1) * ops.tanh(ops.sin(k)))
    return spec.while_loop(lambda c: ops.lt(c, np.float32(0.5)), step, np.float32(0.0), body_consts=(a,))


def test_a_while_s_literal_init_is_bound_as_user_code_binds_it():
    """Found by a campaign on 0.4.36 (a53ac742be) right after weak operands
    were made strong: converted with lax, a while's literal init became a
    jax Array at trace time, which linearization saved once more than the
    same loop written with lax.while_loop and a Python float. oracle.to_jax
    leaves a literal a Python scalar (`_strong`). The independent answer is
    JAX's own list for the user-level program on the installed release.
    (That list has a `from a literal` the spec does not save: a while's
    literal init, left open.)"""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle
    from oracle.properties import jax_residuals
    prog = spec.trace(_while_from_a_literal_reading_a_constant, spec.f32[()])
    user = lambda a: jax.lax.while_loop(lambda c: c < 0.5, lambda f: f + (1.0 + 0.1 * jnp.tanh(jnp.sin(a))), 0.0)
    kinds = lambda res: [(t, s.split(" ")[0] + " " + s.split(" ")[1]) for t, s in res]
    assert kinds(jax_residuals(oracle.to_jax(prog), [np.float32(0.3)])) == kinds(jax_residuals(user, [np.float32(0.3)]))


@pytest.mark.parametrize("init", [0.0, np.float32(0.0)], ids=["python_float", "numpy_scalar"])
def test_a_loop_from_a_constant_saves_its_zero_initial_tangent(init):
    """Found by the campaign (finding a53ac742be, jax 0.4.36 and 0.10.2; a
    spec bug): a carry that starts at a constant and becomes differentiated
    gets a zero initial tangent (`ad.instantiate_zeros` in _while_loop_jvp),
    computed in the primal trace, so when linearizing the staged loop reads
    it as a residual (`from a literal`), while the loop's own literals stay
    inline. The spec kept the zero inline too. JAX's list, on the installed
    release, is the independent answer (tests/recordings/residuals_cond.json:
    while_from_constant, for 0.10.2)."""
    pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    import oracle

    def loop(a):
        step = lambda c: c + (1.0 + 0.1 * jnp.tanh(jnp.sin(a)))
        return lax.while_loop(lambda c: c < 0.5, step, init)
    report = oracle.check(loop, oracle.AS_IS, np.float32(-1.13), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"


def _loop_invariant_while_ignoring_a_const(a):
    """A checkpointed scan whose body runs a while loop from a constant, with
    the scan's carry as a body const the loop never reads (campaign finding
    1f84c27f81, 0.4.36): the loop is loop-invariant, and so is the
    derivative factor of sin of its result."""
    def region(f):
        def body(k, _):
            j = spec.while_loop(lambda n: ops.lt(n, 0.5),
                                lambda k_unread, n: ops.add(n, ops.add(1.0, ops.mul(0.1, ops.tanh(ops.sin(n))))),
                                0.0, body_consts=(k,))
            u = ops.sin(j)
            return u, u
        return ops.scan(body, f, None, length=1)
    return ops.checkpoint(region, policy=sp.everything_saveable)(ops.sin(a))


def test_a_loop_invariant_while_that_ignores_a_const_is_hoisted():
    """The scan's partial evaluation hoists the loop (its known half binds
    the known consts only, as _while_partial_eval does) and saves cos of
    its result once: what JAX saves (recorded by running the test on 0.4.25,
    0.6.2 and 0.10.2). The spec read the unread carry in its hoisted
    program and raised KeyError; oracle.check agrees on the installed JAX."""
    prog = spec.trace(_loop_invariant_while_ignoring_a_const, spec.f32[()])
    assert [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)] == [("f32[]", "output of cos")]
    pytest.importorskip("jax")
    import oracle
    from oracle.to_jax import to_jax
    report = oracle.check(to_jax(prog), oracle.AS_IS, np.float32(0.3), implementations=("remat2",),
                          properties=("residuals", "vjp", "values"))
    assert {r.status for r in report.results} == {"ok"}, str(report)
