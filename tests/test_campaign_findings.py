"""What the campaign found on pristine jax 0.10.2 once it checked the
drawn programs that bring something new (fuzz/novelty.py), each a known
divergence now, tested on its class and its neighbours:

* remat3 reverse mode raises `Expected cotangent type` for a checkpoint's
  unused value computed from a scan's stacked output (an input, found
  before; an output, new): the predicates hold for the class and not for
  the neighbours JAX differentiates (measured in the tests below);
* a cond branch's linearization saves a zero a JVP rule instantiated
  (pad's padding value, as in reduce_prod's product tree), as a jit's
  does: the residual check names the divergence for a cond, and finds
  nothing to explain at top level, where JAX and the spec agree."""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.ad_checkpoint import checkpoint_name  # noqa: E402

import oracle  # noqa: E402
import oracle.jax_api.flags  # noqa: E402
import spec  # noqa: E402
from spec.semantics import following  # noqa: E402
from oracle.checker import implementation  # noqa: E402
from oracle.divergences import _unused_scanned_checkpoint_inputs, _unused_scanned_checkpoint_outputs  # noqa: E402
from oracle.from_jax import from_jaxpr, trace_jax  # noqa: E402
from oracle.stacks import _without_direct_linearization  # noqa: E402


def _jax_raises(call, error: type, says: str) -> bool:
    """Whether JAX raises `error` saying `says` (its message contains it;
    an empty `says`: a bare exception) running `call()`; it returning is
    False, any other exception fails the test. The independent answer each
    class test checks the oracle against."""
    try:
        call()
    except error as e:
        assert says in str(e) if says else not str(e), str(e)
        return True
    return False


def _second_order_misses_igamma_grad(f, x: tuple, cotangent) -> bool:
    """Whether JAX raises igamma_grad_a's missing differentiation rule for
    jax.jvp of f's pullback of `cotangent` at x (what the second_order
    property computes), read off JAX."""
    return _jax_raises(lambda: jax.jvp(lambda *d: jax.vjp(f, *d)[1](cotangent), x, x),
                       NotImplementedError, "Differentiation rule for 'igamma_grad_a' not implemented")


def _second_order_follows_jax(f, x: tuple, raises: bool):
    """oracle.check's second_order of f at x: a known divergence where JAX
    raised, ok where it computed (as the spec does)."""
    report = oracle.check(f, oracle.AS_IS, *x, implementations=("remat2",), properties=("second_order",))
    assert report.status("second_order", "remat2") == ("known divergence" if raises else "ok"), str(report)


def _divergence_active(name: str) -> bool:
    """The known divergence `name` can hold on the installed JAX."""
    return next(d for d in oracle.divergences.DIVERGENCES if d.name == name).active()


def _scanned(a):
    c, ys = lax.scan(lambda c, _: (jnp.sin(c), jnp.sin(c)), a, None, length=1)
    return c, ys


BODIES = {      # body -> whether its first output, unused, is computed from a scan's ys
    "ys element": (lambda a: (_scanned(a)[1][0], a * 2), True),
    "ys itself": (lambda a: (_scanned(a)[1], a), True),
    "carry": (lambda a: (_scanned(a)[0], a * 2), False),
    "no scan": (lambda a: (jnp.sin(a)[None], a * 2), False),
}


def _second_output_only(body, jitted=False):
    """The checkpoint's second output alone; `jitted`: a jit returns both
    and the first goes unread outside it (jax's lax_control_flow_test
    testScanGrad with jit_scan; a pristine nightly, 4f852903ac)."""
    if jitted:
        return lambda a: jax.jit(jax.checkpoint(body))(a)[1]
    return lambda a: jax.checkpoint(body)(a)[1]


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("label", sorted(BODIES))
def test_unused_scanned_output_predicate(label, jitted):
    body, expected = BODIES[label]
    prog = trace_jax(_second_output_only(body, jitted), np.float32(-0.5))
    assert _unused_scanned_checkpoint_outputs(prog) is expected
    assert not _unused_scanned_checkpoint_inputs(prog)


def test_a_used_scanned_output_is_not_the_class():
    body = BODIES["ys element"][0]
    prog = trace_jax(lambda a: sum(jax.checkpoint(body)(a)), np.float32(-0.5))
    assert not _unused_scanned_checkpoint_outputs(prog)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("label", sorted(BODIES))
def test_remat3_raises_exactly_for_the_class(label, jitted):
    body, expected = BODIES[label]
    f = _second_output_only(body, jitted)
    with implementation("remat3"):
        assert _jax_raises(lambda: jax.grad(f)(np.float32(-0.5)), ValueError, "Expected cotangent type") is expected


SCANNED_INPUTS = {     # f -> whether a checkpoint input from a scan's ys is read only for unused outputs
    "forwarded to an unused output": (lambda a: jax.checkpoint(lambda i, j: (i, j))(a, _scanned(a)[1])[0], True),
    "read by an unused output": (lambda a: jax.checkpoint(lambda i, j: (i, jnp.sin(j)))(a, _scanned(a)[1])[0], True),
    "read by the used output": (lambda a: jax.checkpoint(lambda i, j: (i * j[0], j))(a, _scanned(a)[1])[0], False),
    # the scan outside the jit the checkpoint is in (pristine nightly finding 64423aad57)
    "passed into a jit, unread": (lambda a: jax.jit(lambda a, ys: jax.checkpoint(lambda i, j: (i, i))(a, ys))(
        a, _scanned(a)[1])[0], True),
    "passed into a jit, read": (lambda a: jax.jit(lambda a, ys: jax.checkpoint(lambda i, j: (i * j[0], i))(a, ys))(
        a, _scanned(a)[1])[0], False),
}


@pytest.mark.parametrize("label", sorted(SCANNED_INPUTS))
def test_unused_scanned_input_predicate_and_jax(label):
    """A checkpoint input computed from a scan's ys that only outputs
    nothing reads need is the class remat3's grad raises for (pristine
    nightly finding 19a80242a3: the input was returned as it is, so the
    predicate, which asked whether the body read it at all, said no).
    Whether JAX raises is read off JAX."""
    f, expected = SCANNED_INPUTS[label]
    assert _unused_scanned_checkpoint_inputs(trace_jax(f, np.float32(-0.5))) is expected
    if not oracle.jax_api.unavailable("remat3"):
        with implementation("remat3"):
            assert _jax_raises(lambda: jax.grad(f)(np.float32(-0.5)), ValueError, "Expected cotangent type") \
                is expected


def _pad_then_scale(x):
    return lax.pad(x, np.float32(1.0), ((0, 1, 0),)).sum() * x


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
def test_a_cond_branch_saves_an_instantiated_zero():
    x = np.ones(3, np.float32)
    in_cond = lambda x: lax.cond(x.sum() > 0, _pad_then_scale, lambda x: x, x)   # noqa: E731
    report = oracle.check(in_cond, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    assert [n for n, _, _ in report.known_divergences] == ["cond-linearize-saves-an-instantiated-zero"]
    top = oracle.check(_pad_then_scale, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    assert not top.known_divergences and {r.status for r in top.results} == {"ok"}


def _window_product(a):
    return lax.reduce_window(a, 1.0, lax.mul, (1, 3), (1, 1), "VALID")   # generic: no linearization


def test_a_modelled_program_without_linearization_explains_nothing():
    """A predicate's model may make a generic reduce_window live (the float
    outputs of a checkpoint with a bool output, for the remat3 float0
    predicate): its linearization fails as JAX's does, and the model then
    explains no residuals; `find` goes on (it raised, found by the campaign)."""
    from oracle import divergences as D
    x, b = np.ones((2, 5), np.float32), np.ones((2, 3), bool)
    ck = jax.checkpoint(lambda x, b: (_window_product(x), jnp.sin(x), b & b))
    prog = trace_jax(lambda x, b: ck(x, b)[1:], x, b)
    ctx = D.Context("remat3", "residuals", None, prog, jax_residuals=[("f32[2,5]", "x")], spec_residuals=[])
    with pytest.raises(ValueError, match="Linearization failed"):
        D._remat3_float0_tangents(ctx)
    assert D.find(ctx) is None


_inner_sin = {cse: jax.checkpoint(jnp.sin, prevent_cse=cse) for cse in [(True,), True]}
PREVENT_CSE_CLASS = {   # label -> (f, whether remat2's grad raises): measured on jax 0.10.2
    "per-argument flags nested, saving outer":
        (lambda x: jax.checkpoint(lambda a: _inner_sin[(True,)](a) * 2.0,
                                  policy=jax.checkpoint_policies.everything_saveable)(x), True),
    "per-argument flags nested, saving nothing":
        (lambda x: jax.checkpoint(lambda a: _inner_sin[(True,)](a) * 2.0)(x), False),
    "a bool nested, saving outer":
        (lambda x: jax.checkpoint(lambda a: _inner_sin[True](a) * 2.0,
                                  policy=jax.checkpoint_policies.everything_saveable)(x), False),
    "per-argument flags at top level": (lambda x: _inner_sin[(True,)](x) * 2.0, False),
}


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
@pytest.mark.parametrize("label", sorted(PREVENT_CSE_CLASS))
def test_nested_per_argument_prevent_cse(label):
    """JAX's remat2 raises exactly for the class (a tuple prevent_cse staged
    with residuals by an enclosing checkpoint); the check names the known
    divergence there, and agrees on the neighbours."""
    f, raises = PREVENT_CSE_CLASS[label]
    x = np.float32(0.7)
    assert _jax_raises(lambda: jax.grad(f)(x), ValueError, "safe_zip() argument 1 has length") is raises
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat2",))
    names = {n for n, _, _ in report.known_divergences}
    assert names == ({"nested-per-argument-prevent-cse-loses-its-residual-flags"} if raises else set())


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
def test_remat3_jvps_a_checkpoint_in_a_while_body():
    """remat3 JVPs a checkpoint met through a JVP (a while body), so a
    generic reduce_window there (no linearization) does not stop it; the
    remat3 model then JVPs the bodies too, and the unrecognised policy's
    divergence explains JAX's residuals (a campaign's finding: the model
    raised, and another divergence was named or none)."""
    from spec import policies as sp
    def body(l, m):     # the checkpoints are made per call: under remat3 when it is checked
        inner = jax.checkpoint(lambda v, m: (checkpoint_name(_window_product(m), "b"), jnp.sin(v)))
        t = lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, inner(c[1], m)[1]),
                           (0, checkpoint_name(l, "b")))[1]
        return t, jnp.tanh(l)
    policy = sp.save_from_both_policies(sp.save_anything_except_these_names("b"),
                                        sp.save_anything_except_these_names("c"))
    l, m = np.linspace(0.1, 0.9, 3, dtype=np.float32), np.linspace(-1, 1, 10, dtype=np.float32).reshape(2, 5)
    report = oracle.check(body, policy, l, m, implementations=("remat3",), properties=("residuals",))
    assert [n for n, _, _ in report.known_divergences] == ["remat3-unrecognised-policy-is-full-remat"]


def _constant_branch_program(prevent_cse, constant):
    """A checkpoint over a cond whose second branch adds a constant (an
    array: a non-scalar Literal, a ClosedJaxpr const where oracle.to_jax
    binds it, as JAX's own rules bind a staged branch, not as lax.cond
    makes it; or a scalar), and returns its input too."""
    import spec
    from spec import ops
    from spec.prims_control import cond_eqn

    def body(x):
        p = ops.convert_element_type(ops.gt(ops.reduce_sum(x, (0,)), np.float32(0.0)), np.int32)
        branches = [spec.trace(b, spec.f32[3]) for b in (ops.sin, lambda v: ops.add(constant, v))]
        return cond_eqn(p, x, branches=branches)[0], x
    return spec.trace(lambda x: ops.checkpoint(body, prevent_cse=prevent_cse)(x)[0], spec.f32[3])


ARRAY = np.array([0.5, 0.75, 1.0], np.float32)
CLOSED_CONSTANT_CLASS = {   # label -> (prevent_cse, constant, whether remat2's vmap raises): measured on 0.10.2
    "per-argument flags, array constant": ((False,), ARRAY, True),
    "per-argument flags, scalar constant": ((False,), np.float32(0.5), False),
    "a bool, array constant": (False, ARRAY, False),
}


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
@pytest.mark.parametrize("label", sorted(CLOSED_CONSTANT_CLASS))
def test_vmap_of_per_argument_prevent_cse_with_closed_constants(label):
    """remat2's vmap raises a bare AssertionError exactly for the class (a
    per-argument prevent_cse over a body whose cond branch closes over an
    array constant); the check names the known divergence there (and only
    under vmap), and agrees on the neighbours and under remat3."""
    prevent_cse, constant, raises = CLOSED_CONSTANT_CLASS[label]
    prog = _constant_branch_program(prevent_cse, constant)
    f = oracle.to_jax(prog)
    assert _jax_raises(lambda: jax.jit(jax.vmap(f))(np.ones((2, 3), np.float32)), AssertionError, "") is raises
    report = oracle.check(f, oracle.AS_IS, np.linspace(-1, 1, 3, dtype=np.float32))
    name = "vmap-of-per-argument-prevent-cse-drops-the-batched-body-s-constants"
    known = {(prop, impl) for n, prop, impl in report.known_divergences if n == name}
    assert known == ({("vmap", "remat2")} if raises else set()), str(report)


def _checkpoint_into_a_while_const(body_reads_const: bool):
    """A checkpoint (a policy remat3 does not recognise) whose output a
    while loop takes as a body const, and a forwarded input (found reducing
    a campaign finding; the loop never runs past the check of residuals)."""
    import spec
    from spec import policies as P
    from spec.core import bind
    from spec.prims_elementwise import lt
    from spec.prims_math import cbrt
    from spec.prims_structural import broadcast_in_dim, reduce_sum
    from spec.remat import remat_p

    def fn(a, b):
        body = spec.trace(lambda e, g: (cbrt(g), e), spec.f32[3], spec.f32[2, 3])
        c, d = bind(remat_p, a, b, jaxpr=body, prevent_cse=False, differentiated=False,
                    policy=P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("a")))
        zeros = broadcast_in_dim(spec.Literal.of(np.float32(0.0)), (2, 3), ())
        step = (lambda const, carry: const + carry) if body_reads_const else (lambda const, carry: carry)
        i = spec.while_loop(lambda j: lt(reduce_sum(j, (0, 1)), 3.0), step, zeros, body_consts=(c,))
        return i, d
    return spec.trace(fn, spec.f32[3], spec.f32[2, 3])


@pytest.mark.parametrize("body_reads_const", [False, True], ids=["unread", "read"])
def test_a_checkpoint_output_only_an_unread_while_const_takes_is_unused_under_remat3(body_reads_const):
    """remat3 (jax 0.10.2) runs a checkpoint's backward pass whole, so the
    tangent of an output that only a while loop's unread body const takes is
    computed, and the input it needs saved (JAX: `f32[2,3] from the
    argument`): the divergence remat3-saves-for-unused-checkpoint-outputs,
    once the while's tangent reads are its JVP's (the body's reads), not
    every operand. remat2 agrees with the spec; a body reading the const
    needs the input anyway, and agrees under both."""
    from fuzz import properties
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    prog = _checkpoint_into_a_while_const(body_reads_const)
    report = properties.oracle_agrees(prog, only=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    if body_reads_const:
        assert report.status("residuals", "remat3") == "ok"
    else:
        assert ("remat3-saves-for-unused-checkpoint-outputs", "residuals", "remat3") in report.known_divergences


@pytest.mark.parametrize("body_reads_carry", [False, True])
def test_a_scan_keeps_the_tangent_of_a_carry_its_body_replaces(body_reads_carry):
    """A checkpoint's output initialises a scan carry whose body replaces
    it with a const (and its unused square): JAX's scan DCE keeps a used
    carry's input whether the body reads it or not (_scan_dce_rule's
    `instantiate=... used_carry_out`), so under remat3 the checkpoint's
    linearization is live and runs whole, saving its input for the unused
    square (JAX: `from the argument`): the divergence
    remat3-saves-for-unused-checkpoint-outputs, once the scan's carries
    are kept as JAX keeps them (found by a pristine nightly, 48ce33e916;
    the model took the carry's tangent for unread). A body that reads the
    carry agrees the same way. JAX's residuals are read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def f(a):
        _, square, same = jax.checkpoint(lambda c, g: (c, g * g, g))(np.ones(1, np.float32), a)
        body = (lambda carry, x: (carry * a, x)) if body_reads_carry else (lambda carry, x: (a, x))
        return lax.scan(body, same, np.ones(2, np.float32))[0]
    a = np.float32(0.7)
    with implementation("remat3"):
        sources = [src.split(" from ")[0] for _, src in saved_residuals(f, a)]
    assert "from the argument a" in sources or "from the argument args[0]" in sources, sources
    report = oracle.check(f, oracle.AS_IS, a, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", str(report)
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), str(report)


@pytest.mark.parametrize("second_policy", ["none", "save_from_both"])
def test_remat3_names_an_output_returned_through_a_nested_identity_checkpoint(second_policy):
    """A checkpoint returning its input through a nested identity
    checkpoint, its output saved for a later checkpoint: remat3 reads the
    primals of its backward pass through an optimization barrier outside
    every checkpoint, so the value saved is the outer hi-primitive's
    output ("output of call_hi_primitive", read off JAX), not a forward of
    the argument, which the spec's known half simplifies it to: the
    divergence remat3-names-nested-checkpoint-values-by-producer (found by
    a pristine nightly, 823a348773). With the later checkpoint's policy a
    save_from_both_policies, which remat3 does not recognise (nothing
    saved), that divergence is the one named: the barrier that renames the
    value was taken for the first defect, which no divergence claims."""
    from jax._src.ad_checkpoint import saved_residuals
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    cp = jax.checkpoint_policies
    policy = None if second_policy == "none" else cp.save_from_both_policies(
        cp.save_only_these_names("a", "c"), cp.dots_saveable)

    def f(a):
        b = jax.checkpoint(lambda c: jax.checkpoint(lambda e: e)(c), policy=cp.dots_with_no_batch_dims_saveable)(a)
        h = jax.checkpoint(lambda g: lax.dot_general(g, g, (((), ()), ((), ()))) ** 2, policy=policy)(b)
        return h
    a = np.array([0.3, -0.5, 0.9], np.float32)
    with implementation("remat3"):
        sources = [src.split(" from ")[0] for _, src in saved_residuals(f, a)]
    assert sources == ["output of call_hi_primitive"], sources
    report = oracle.check(f, oracle.AS_IS, a, properties=("residuals",), implementations=("remat3",))
    expected = {"none": "remat3-names-nested-checkpoint-values-by-producer",
                "save_from_both": "remat3-unrecognised-policy-is-full-remat"}[second_policy]
    assert report.known_divergences == [(expected, "residuals", "remat3")], str(report)


def test_remat3_float0_tangents_compose_with_an_unused_computed_output():
    """A cond branch holding a checkpoint whose integer output the branch
    returns (its float0 tangent keeps the checkpoint's linearization live
    under remat3) beside a checkpoint with an unused computed output (its
    cos, whose backward pass remat3 runs anyway), on a value without a
    tangent (a while loop of constants): JAX saves the branch index, the
    dot's operand and the cosine's (read off JAX). The predicate of
    remat3-non-float-checkpoint-output-keeps-its-tangents-live composes
    the exposed float0 tangents with the unused computed outputs alone,
    not threading out again an output the exposure returns already (found
    by a pristine nightly, 01778ea6f4: one "output of cond" too many)."""
    from jax._src.ad_checkpoint import saved_residuals
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    cp = jax.checkpoint_policies
    weights = np.array([[2.0, 2.25], [2.5, 2.75], [3.0, 3.25]], np.float32)

    def f(c, fv, index):
        def body(v):
            s = lax.dot_general(weights, jnp.sin(v), (((0,), (0,)), ((1,), (1,))))
            return v + (1.0 + 0.1 * jnp.tanh(jnp.sum(-s)))
        j = lax.while_loop(lambda v: jnp.sum(v) < 9.0, body, jnp.zeros((3, 2), np.float32))

        def second(al, fv):
            _, _, u = jax.checkpoint(lambda k, y: (k, jnp.einsum("ij,ij->i", y, y), np.uint32(1)),
                                     policy=cp.offload_dot_with_no_batch_dims("device", "pinned_host"))(
                np.ones((2, 3), np.float32), al)
            _, _, al = jax.checkpoint(lambda k, y, z: (k, jnp.cos(z), y), policy=cp.nothing_saveable)(
                np.ones(7, np.float32), al, fv)
            return al, u
        a, u = lax.switch(index, (lambda al, fv: (al, np.uint32(0)), second), j, fv)
        return u, a + c
    args = (np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), np.array([0.1, 0.2, 0.3], np.float32),
            np.int32(1))
    with implementation("remat3"):
        listed = [(str(a.shape), src.split(" from ")[0]) for a, src in saved_residuals(f, *args)]
    assert listed == [("()", "output of clamp"), ("(3, 2)", "output of cond"), ("(3,)", "output of cond")], listed
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",), implementations=("remat3",))
    assert report.known_divergences == [
        ("remat3-non-float-checkpoint-output-keeps-its-tangents-live", "residuals", "remat3")], str(report)


@pytest.mark.parametrize("stop_gradient", [True, False])
def test_a_scan_s_known_body_in_a_checkpoint_is_split_again_by_its_hoisting(stop_gradient):
    """A checkpoint around a scan whose body checkpoints its carry: the
    scan's partial eval in the checkpoint (_scan_partial_eval_custom)
    hoists loop-invariant residuals by splitting the known body again with
    its consts known (pe.partial_eval_jaxpr_nounits), which splits the
    nested checkpoint reading the carry, its staged half differentiated,
    and remat_lowering barriers it in the forward pass. The backward pass
    of `stop_gradient(f(a)) * a` has no other barrier: JAX's HLO has that
    one (read off JAX), which the spec missed (pristine nightly finding
    bb0c634c1b); without the stop_gradient the backward pass has its own."""
    from oracle.properties import jax_barriers
    cp = jax.checkpoint_policies

    def f(a):
        inner = jax.checkpoint(lambda g: g)
        b = jax.checkpoint(lambda c: lax.scan(lambda e, _: (inner(e), None), c, None, length=1)[0],
                           policy=cp.nothing_saveable, prevent_cse=False)(a)
        return (lax.stop_gradient(b) if stop_gradient else b) * a
    a = np.float32(0.7)
    assert jax_barriers(lambda a: (f(a),), (a,)) > 0
    report = oracle.check(f, oracle.AS_IS, a, properties=("prevent_cse",), implementations=("remat2",))
    assert report.status("prevent_cse", "remat2") == "ok", str(report)


def _printing_checkpoint(x, used: bool, in_cond: bool):
    """cos(x) beside a checkpoint that prints its input and returns its sin,
    the sin added to the result where `used`; in a cond branch where
    `in_cond`."""
    def branch(x):
        s = jax.checkpoint(lambda y: jax.debug.print("{y}", y=y) or jnp.sin(y))(x)
        return jnp.cos(x) + (s if used else 0.0)
    return (lax.cond(x.sum() > 0, branch, lambda x: x, x) if in_cond else branch(x)).sum()


@pytest.mark.parametrize("used", [True, False])
@pytest.mark.parametrize("in_cond", [False, True])
def test_remat3_replays_a_checkpoint_s_effects_only_with_a_cotangent(used, in_cond):
    """remat3 linearizes a checkpoint as a hi-primitive whose equation has no
    effect of its own: reached by no cotangent it is dead code in the linear
    program, its print is not run again and nothing is saved for it; remat2
    transposes it for its effect, saving the input the print reads (found by
    a pristine campaign, 53b64b11f1, in a cond branch). Whether remat3 saves
    otherwise than remat2 is read off JAX: exactly then the oracle names the
    divergence, and otherwise agrees."""
    from jax._src.ad_checkpoint import saved_residuals
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    fn = functools.partial(_printing_checkpoint, used=used, in_cond=in_cond)
    x = np.full(3, 0.5, np.float32)
    lists = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            lists[impl] = [(str(a), s.split(" from ")[0]) for a, s in saved_residuals(fn, x)]
    report = oracle.check(fn, oracle.AS_IS, x, implementations=("remat2", "remat3"), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", str(report)
    name = "remat3-replays-a-checkpoint-s-effects-only-with-a-cotangent"
    if lists["remat3"] != lists["remat2"]:
        assert [n for n, _, _ in report.known_divergences] == [name], str(report)
    else:
        assert report.status("residuals", "remat3") == "ok", str(report)
    assert (lists["remat3"] != lists["remat2"]) is not used     # the class: unused outputs only


@jax.custom_vjp
def _identity_vjp(x):
    return x


_identity_vjp.defvjp(lambda x: (x, x), lambda x, ct: (ct * x,))


@jax.custom_jvp
def _identity_jvp(x):
    return x


_identity_jvp.defjvp(lambda primals, tangents: (primals[0], tangents[0]))


@pytest.mark.parametrize("custom", ["custom_vjp", "custom_jvp"])
@pytest.mark.parametrize("used", [False, True])
def test_remat3_s_backward_pass_of_an_unused_custom_vjp_output_is_live(custom, used):
    """remat3 bars the checkpoint inputs its backward pass reads
    (remat3-barrier-iff-backward-reads-checkpoint-inputs, prevent_cse=False
    here); the backward pass of an unused output is dead code, except where
    its zero cotangent reaches a custom_vjp's bwd rule, which JAX calls with
    a zero array (pristine campaign finding 2f662fefa7: the barrier model
    left that output out). Whether JAX's HLO has a barrier is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    rule = _identity_vjp if custom == "custom_vjp" else _identity_jvp

    def f(a):
        e, h = jax.checkpoint(lambda g: (g, rule(g)), prevent_cse=False)(a)
        return jnp.sin(a) + e + (h if used else 0.0)
    barrier = _remat3_barrier_explained(f)
    assert barrier is (custom == "custom_vjp")      # an identity custom_jvp reads no residual


def _remat3_barrier_explained(f) -> bool:
    """Whether JAX's HLO of jit(grad(f)) at 0.5 has a barrier under remat3
    (read off JAX), asserting that oracle.check's prevent_cse agrees: the
    barrier model's divergence where it has one, ok where not."""
    x = np.float32(0.5)
    with implementation("remat3"):
        barrier = "optimization_barrier" in jax.jit(jax.grad(f)).lower(x).as_text()
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat3",), properties=("prevent_cse",))
    if barrier:
        assert ("remat3-barrier-iff-backward-reads-checkpoint-inputs", "prevent_cse", "remat3") in \
            report.known_divergences, report
    else:
        assert report.status("prevent_cse", "remat3") == "ok", report
    return barrier


def _squaring_scan(x):
    return lax.scan(lambda c, _: (c * c, None), x, None, length=1)[0]


def _doubled_and(unused):
    return lambda x: (x * 2.0, unused(x))


_UNUSED_OUTPUTS = {                 # the second output of each is unused
    "scan": _doubled_and(_squaring_scan),
    "scan with a linear carry": _doubled_and(lambda x: lax.scan(lambda c, _: (c * 2.0, None), x, None, length=1)[0]),
    "scan in a jit": _doubled_and(jax.jit(_squaring_scan)),
    "custom_vjp in a jit": _doubled_and(jax.jit(_identity_vjp)),
    "scan beside a used output of a jit": jax.jit(_doubled_and(_squaring_scan)),
    "custom_vjp beside a used output of a jit": jax.jit(_doubled_and(_identity_vjp)),
    "scan beside a used output of a cond": lambda x: lax.cond(
        x > 0, _doubled_and(_squaring_scan), lambda y: (y * 3.0, y), x),
    "mul": _doubled_and(lambda x: x * x),
}


@pytest.mark.parametrize("body", sorted(_UNUSED_OUTPUTS))
def test_remat3_s_backward_pass_of_an_unused_output_is_live_where_jax_makes_its_zero_an_array(body):
    """The zero cotangent of a checkpoint output nothing reads is made an
    array by scan's transpose (its carry) and by a custom_vjp's bwd rule,
    and reaches into a jit or cond only beside a nonzero cotangent; what is
    computed from it stays live, reading the checkpoint's inputs behind
    remat3's barrier (pristine nightly finding 8a9d13bc39: a scan's unused
    carry; the model kept only custom_vjp's zeros, at any depth). Whether
    JAX's HLO has a barrier is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def f(a):
        used, _ = jax.checkpoint(_UNUSED_OUTPUTS[body], prevent_cse=False)(a)
        return jnp.sin(a) + used
    _remat3_barrier_explained(f)


@pytest.mark.parametrize("jitted", [False, True])
def test_remat3_s_float0_liveness_through_a_jit_moves_the_jit_s_residuals(jitted):
    """A checkpoint whose bool output is returned keeps its float outputs'
    tangents live under remat3 (remat3-non-float-checkpoint-output-keeps-
    its-tangents-live); in a jitted program the model threads those outputs
    out through the jit, whose residuals then come in another order, so the
    lists are compared up to order there (pristine nightly finding
    1ddf79ad84). That remat3 saves otherwise than remat2 is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    limit = np.array([0.1, 0.2, 0.3], np.float32)

    def fn(c, e):
        f = jnp.sin(c)
        i = lax.select_n(f > limit, f, jnp.cos(f))
        _, _, ands = jax.checkpoint(lambda m, n: (jnp.sin(m), m, lax.reduce_and(n, (1,))), prevent_cse=False)(f, e)
        return jnp.sin(f), ands, i
    fn = jax.jit(fn) if jitted else fn
    args = (np.array([0.5, -0.2, 0.9], np.float32), np.ones((3, 4), bool))
    lists = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            lists[impl] = sorted(str(a.dtype) for a, _ in saved_residuals(fn, *args))
    assert lists["remat3"] != lists["remat2"], lists
    report = oracle.check(fn, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert [n for n, _, _ in report.known_divergences] == \
        ["remat3-non-float-checkpoint-output-keeps-its-tangents-live"], report


@pytest.mark.parametrize("dead_window", [False, True])
def test_remat3_linearizes_a_checkpoint_s_body_without_its_dead_code(dead_window):
    """remat3 linearizes a checkpoint's rematerialization, traced with
    auto_dce: a generic reduce_window (no linearization) that a cond branch
    inside computes and drops is never linearized, and the checkpoint's
    bool output keeps its float tangents live (remat3-non-float-checkpoint-
    output-keeps-its-tangents-live). The model linearized the body as
    written and failed (pristine nightly finding 6bb6b14f48). That remat3
    saves otherwise than remat2 is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def other(j, d):
        if dead_window:
            _generic_window(d)
        return j < 0

    def body(j, d):
        return jnp.sin(j), lax.cond(j > 0, lambda j, d: j > 0.5, other, j, d)

    def f(a, d):
        return jnp.cos(a), jax.checkpoint(body, prevent_cse=False)(a, d)[1]
    args = (np.float32(0.5), np.ones((2, 5), np.float32))
    _assert_float0_liveness_explains(f, *args)


def _assert_float0_liveness_explains(f, *args):
    """remat3's residuals of f differ from remat2's (read off JAX), and the
    one divergence naming them is remat3-non-float-checkpoint-output-keeps-
    its-tangents-live."""
    lists = _saved_per_implementation(f, *args)
    assert lists["remat3"] != lists["remat2"], lists
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert [n for n, _, _ in report.known_divergences] == \
        ["remat3-non-float-checkpoint-output-keeps-its-tangents-live"], report


def test_remat3_s_float0_tangent_of_a_checkpoint_in_a_cond_branch():
    """A checkpoint in a cond branch inside a checkpoint, its u32 output
    returned through the cond: remat3 gives it a float0 tangent, so the
    nested checkpoint's backward pass runs and reads what its float
    outputs' tangents need (`b`, read off JAX below); the model made only
    the cond's float outputs live (pristine nightly finding 80d7b1a02a).
    Open: with the u32 output dropped JAX saves `b` too (the outer
    checkpoint's backward pass runs whole, its unused non-float output's
    float0 tangent included), which no variant models yet."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def f(a, b):
        def br0(v, w):
            _, ab = jax.checkpoint(lambda ad, ae: (jnp.sin(ae).sum(0), lax.iota(np.uint32, 3)),
                                   prevent_cse=False)(v, w)
            return jnp.cos(v), ab
        return jax.checkpoint(lambda a, b: lax.cond(a > 0, br0, lambda v, w: (v, jnp.zeros(3, np.uint32)), a, b),
                              prevent_cse=False)(a, b)
    args = (np.float32(0.5), np.ones((2, 3), np.float32))
    _assert_float0_liveness_explains(f, *args)


def test_remat3_names_a_checkpoint_output_by_the_body_as_written():
    """A checkpoint of reduce_prod scanned over: remat3 names the saved
    checkpoint output by the body's own equation, remat2 (and the spec) by
    reduce_prod's JVP's last one (both read off JAX); the normalisation
    remat3-names-checkpoint-outputs-by-the-body-as-written takes the one for
    the other (pristine nightly finding 13fe70c2ad)."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def f(x):
        return lax.scan(lambda c, y: (c * y, None), np.float32(1.0), jax.checkpoint(lambda b: jnp.prod(b, 0))(x))[0]
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    names = _saved_per_implementation(f, x)
    assert "output of reduce_prod" in names["remat3"] and "output of reduce_prod" not in names["remat2"], names
    report = oracle.check(f, oracle.AS_IS, x, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") == "ok", report
    assert ("remat3-names-checkpoint-outputs-by-the-body-as-written", "residuals", "remat3") in \
        report.normalizations, report


@pytest.mark.parametrize("policy", ["everything_saveable", "nothing_saveable"])
def test_remat3_s_second_order_never_sees_a_checkpoint_s_dead_residual(policy):
    """jax.jvp of the pullback of a scan whose body's checkpoint of igammac
    is never read: saving everything, remat2 computes igamma_grad_a in the
    forward pass and its jvp raises (the spec too); remat3 runs the body as
    written and computes (pristine nightly finding 3f72b1ac83); recomputing
    everything, both compute. Which raises is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    def f(a, b, c):     # the checkpoint made per call: remat2 or remat3 as selected then
        ck = jax.checkpoint(lax.igammac, policy=getattr(jax.checkpoint_policies, policy))
        lax.scan(lambda h, _: (h, ck(b, c)), a, None, length=1)
        return a
    x = (np.float32(1.0), np.full((2, 3), 0.5, np.float32), np.full((2, 3), 0.7, np.float32))
    raises = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            raises[impl] = _jax_raises(lambda: jax.jvp(lambda *d: jax.vjp(f, *d)[1](np.float32(1.0)), x, x),
                                       NotImplementedError, "igamma_grad_a")
    assert raises == {"remat2": policy == "everything_saveable", "remat3": False}, raises
    report = oracle.check(f, oracle.AS_IS, *x, properties=("second_order",))
    assert report.status("second_order", "remat2") == ("not applicable" if raises["remat2"] else "ok"), report
    if raises["remat2"]:
        assert [n for n, _, _ in report.known_divergences] == \
            ["remat3-second-order-skips-a-checkpoint-s-dead-forward-code"], report
    else:
        assert report.status("second_order", "remat3") == "ok", report


def _inner_unused_output_of_nested_checkpoint(a, b):
    """An inner checkpoint whose `arccos` output nothing reads, its forwarded
    input an output of the outer checkpoint that nothing reads either."""
    inner = jax.checkpoint(lambda i, j: (jnp.arccos(j), i), prevent_cse=False)

    def outer(e, f):
        _, h = inner(e, f)
        return e, h
    c, _ = jax.checkpoint(outer, prevent_cse=False)(a, b)
    return c


def _integer_output_only_read(a, c, d, e):
    """A checkpoint whose integer output alone is read; inside, a checkpoint
    whose `cbrt` output nothing reads."""
    def outer(i, k, m, n):
        _, p = jax.checkpoint(lambda q, r: (jnp.cbrt(r), q), prevent_cse=False)(i, n)
        return checkpoint_name(p, "c"), k ^ m
    _, h = jax.checkpoint(outer, policy=jax.checkpoint_policies.save_only_these_names("c"),
                          prevent_cse=False)(a, c, d, e)
    return a * a, h


@pytest.mark.parametrize("case", ["nested_unused", "integer_output"])
def test_remat3_runs_a_live_checkpoint_s_nested_backward_pass_whole(case):
    """remat3 (jax 0.10.2, measured: `f32[2,3] from the argument`, the
    input the unused output's derivative needs) runs a live checkpoint's
    backward pass whole, a nested checkpoint's too: where the outer
    checkpoint is live through an output nothing reads but the program's
    float output (nested_unused), or through its integer output alone read
    (integer_output: composed with the float0-tangent defect). Found by
    campaigns under injected bugs, reproduced on pristine JAX. remat2
    agrees with the spec."""
    b = np.linspace(-0.9, 0.9, 6, dtype=np.float32).reshape(2, 3)
    if case == "nested_unused":
        fn, args, name = (_inner_unused_output_of_nested_checkpoint, (np.float32(0.3), b),
                          "remat3-saves-for-unused-checkpoint-outputs")
    else:
        u = np.arange(6, dtype=np.uint32).reshape(2, 3)
        fn, args, name = (_integer_output_only_read, (np.float32(0.3), u, u + 1, b),
                          "remat3-non-float-checkpoint-output-keeps-its-tangents-live")
    report = oracle.check(fn, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    if oracle.jax_api.unavailable("remat3"):
        return
    assert (name, "residuals", "remat3") in report.known_divergences, report


def test_a_jit_constant_in_a_nested_checkpoint_is_no_residual_of_the_enclosing_one():
    """remat3 (jax 0.10.2, measured: only the outer checkpoint's input) saves
    a jit's constant as an output of the forward jit only where the jit's
    own checkpoint is split (`_pjit_remat`); nested in a checkpoint whose
    policy it does not recognise, the inner checkpoint is rebound whole and
    the constant recomputed. The model split the nested jit as its own
    (found by a pristine campaign: `output of jitted function` saved)."""
    h = np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)

    def make():     # built under each implementation (jax.checkpoint picks it when called)
        f2 = jax.jit(lambda i: i - h)
        inner = jax.checkpoint(lambda x: jnp.cos(f2(x)))
        outer = jax.checkpoint(lambda d: jnp.sin(inner(d)),
                               policy=lambda prim, *_, **__: prim.name in ("cos", "sin"))
        return lambda a: outer(jnp.broadcast_to(a, (2, 2)))
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, np.float32(0.7), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    if not oracle.jax_api.unavailable("remat3"):
        assert report.status("residuals", "remat3") == "known divergence", str(report)


@pytest.mark.parametrize("body", ["square_plus_sum", "select_on_sum"])
def test_nested_scans_vjp_is_what_finite_differences_say(body):
    """The spec's VJP against central differences of the spec's own float64
    evaluation (no JAX): d/dc of sum(ys), ys from a scan (carry b, const c)
    whose body runs a scan with carry c and const b. Found by a pristine
    campaign (seed 2), where JAX agreed with finite differences (-21.34) and
    the spec dropped the cotangent: re-staging the known loop body
    (`_restaged_by_hoisting`) split the inner scan, whose carry the
    loop-varying const made unknown, as a linearization does, and gave it
    the zero init of a tangent (spec/prims_scan.py `_RESTAGING_PRIMALS`)."""
    import spec
    from spec import ops
    from spec.prims_elementwise import gt, select_n
    from spec.prims_structural import reduce_sum

    def step(l, k):
        if body == "square_plus_sum":
            return ops.add(ops.mul(l, l), reduce_sum(k, (0, 1)))
        return select_n(gt(reduce_sum(k, (0, 1)), 0.0), ops.mul(l, l), l)

    def fn(b, c):
        def outer(cb, _, cc):
            return cb, spec.scan(lambda l, _, k: (step(l, k),) * 2, cc, None, consts=(cb,), length=1)[1]
        return (spec.scan(outer, b, None, consts=(c,), length=1)[1],)
    prog = spec.trace(fn, spec.f64[2, 3], spec.f64[()])
    b = np.array([[1.3132702, -1.4127556, 1.1066358], [-1.2294966, 1.043625, -1.4350724]])
    c = 1.363179
    total = lambda v: float(np.sum(spec.evaluate(prog, b, np.array(v))[0]))   # noqa: E731
    want = (total(c + 1e-5) - total(c - 1e-5)) / 2e-5
    got = spec.evaluate(spec.vjp_program(prog), b, np.array(c), np.ones((1, 1)))[1]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _concatenate_stacks():
    import spec
    from spec import ops
    from oracle import stacks as S
    grad, vjp0 = S.Layer("grad"), S.Layer("vjp", argnums=(0,))
    return {
        "grad of concatenate(a, sin a)": (
            lambda a, b, c: (ops.concatenate([a, ops.sin(a)], 0),), (spec.f32[3], spec.f32[()], spec.f32[()]),
            S.Stack((grad,))),
        "grad o vjp(argnums=(0,)) of concatenate(a, c)": (
            lambda a, b, c: (ops.concatenate([a, c], 0),), (spec.f32[3], spec.f32[()], spec.f32[3]),
            S.Stack((vjp0, grad))),
    }


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
@pytest.mark.parametrize("name", sorted(_concatenate_stacks()))
def test_concatenate_transposes_by_one_split(name):
    """JAX's saved residuals of second-order programs through concatenate's
    transpose, measured live. lax._concatenate_transpose_rule splits the
    cotangent with one `split` for every operand (jax 0.4.38 on), so a
    second-order program saves an `output of split` where the spec, which
    sliced out each undefined operand's piece, saved an `output of slice`,
    and where an unused piece's zero is broadcast, not a scalar literal
    (found by a pristine campaign on 0.10.2, seed 2)."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from oracle.spellings import Spelling
    fn, types, stack = _concatenate_stacks()[name]
    report = properties.oracle_agrees(spec.trace(fn, *types), implementations=("remat2",), stack=stack,
                                      spelling=Spelling(), only=(S.STACK_RESIDUALS,))
    assert [(r.property, r.status) for r in report.results] == [(S.STACK_RESIDUALS, "ok")], str(report)


def _checkpoint_over(kind: str, prevent_cse):
    """A spec program: a checkpoint (prevent_cse as given) of sin(c) * K, K
    a constant array, computed in a scan body, a jit (the checkpoint saving
    everything), a cond branch or inline."""
    import spec
    from spec import ops
    from spec.prims_elementwise import gt
    k = np.array([0.5, 0.75, 1.0], np.float32)

    def scaled(f):
        return ops.mul(ops.sin(f), k)

    bodies = {"scan": lambda c: spec.scan(lambda f, _: (scaled(f), None), c, None, length=1)[0],
              "jit": lambda c: ops.call(spec.trace(scaled, c.type), c)[0],
              "cond": lambda c: spec.cond(gt(ops.reduce_sum(c, (0,)), 0.0), scaled, lambda f: f, c),
              "inline": scaled}
    # (a jit's constant reaches the transposed body where the policy saves its values)
    policy = spec.policies.everything_saveable if kind == "jit" else None
    return spec.trace(lambda a: (ops.checkpoint(bodies[kind], prevent_cse=prevent_cse, policy=policy)(a),),
                      spec.f32[3])


@pytest.mark.parametrize("kind, prevent_cse, crashes", [
    ("scan", (False,), True), ("scan", True, False), ("jit", (False,), True), ("jit", True, False),
    ("cond", (False,), False), ("inline", (False,), False)])
def test_remat_transpose_crashes_on_a_scan_constant_under_tuple_prevent_cse(kind, prevent_cse, crashes):
    """JAX's remat_transpose (from 0.7.2) gives the transposed checkpoint a
    prevent_cse tuple without its constants' entries: reverse mode of a
    checkpoint with a per-argument prevent_cse over a scan that keeps a
    constant array in its closed jaxpr raises a bare AssertionError
    (found by a pristine campaign, 670d63a880). The known divergence names
    exactly that class; its neighbours (a bool prevent_cse, the constant in
    a cond branch or inline) agree with the spec, measured live."""
    from fuzz import properties
    from oracle.jax_api.versions import Releases, holds
    if isinstance(prevent_cse, tuple) and not holds(Releases("0.7.2")):
        pytest.skip(f"per-argument prevent_cse is an API of jax 0.7.2 on, not {jax.__version__}")
    name = "remat-transpose-prevent-cse-misses-the-transposed-body-s-constants"
    report = properties.oracle_agrees(_checkpoint_over(kind, prevent_cse), implementations=("remat2",))
    shown = any(k[0] == name for k in report.known_divergences)
    active = _divergence_active(name)
    assert shown == (crashes and active), str(report)
    assert {r.status for r in report.results} <= {"ok", "known divergence", "not applicable"}, str(report)


def test_a_prevent_cse_reproducer_counts_jax_s_barriers(tmp_path):
    """A prevent_cse reproducer lowers jit of the pullback and counts JAX's
    barriers (it compared saved residuals, and ended with the message: the
    crash of 670d63a880 did not reproduce); and it binds a scan whose body
    holds a constant array as oracle.to_jax does (lax.scan would hoist the
    array, a program JAX computes). On the crashing program it raises
    JAX's AssertionError; on a program where JAX and the spec agree it
    runs to agreement."""
    import subprocess
    import sys

    from oracle.jax_api.versions import Releases, holds
    from oracle.repro import write_repro
    if not holds(Releases("0.7.2")):
        pytest.skip(f"per-argument prevent_cse is an API of jax 0.7.2 on, not {jax.__version__}")
    x = np.array([-1.1, 0.8, 0.5], np.float32)
    crash = write_repro(_checkpoint_over("scan", (False,)), None, [x], "prevent_cse", "remat2",
                        "JAX raised AssertionError where the spec computes a result:\n  ")
    agree = write_repro(_checkpoint_over("scan", True), None, [x], "prevent_cse", "remat2",
                        "optimization barriers in the backward pass: spec predicts 1, JAX's HLO has 0")
    runs = {}
    for name, repro in (("crash", crash), ("agree", agree)):
        path = tmp_path / f"{name}.py"
        path.write_text(repro.text)
        runs[name] = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert runs["crash"].returncode != 0 and "AssertionError" in runs["crash"].stderr, runs["crash"].stderr[-2000:]
    assert runs["agree"].returncode == 0, runs["agree"].stdout + runs["agree"].stderr[-2000:]
    assert "JAX barriers:" in runs["agree"].stdout


@pytest.mark.parametrize("where", ["known in a checkpoint", "linear in a checkpoint"])
def test_remat_transpose_asks_a_known_nested_checkpoint_s_policy(where):
    """save_from_both_policies of two offload policies raises JAX's
    ValueError whenever it is asked. A checkpoint using it inside another
    checkpoint, its output only compared (no tangent): the forward pass
    never asks it, but the enclosing checkpoint's transposition partially
    evaluates the body with a JaxprTrace, which runs remat_partial_eval on
    the known checkpoint too and asks its policy (found by a pristine
    campaign, b6a0087fd3: JAX raised where the spec computed). Both raise
    now, as where the nested checkpoint's output has a tangent."""
    from jax import lax
    cp = jax.checkpoint_policies
    older = "save-from-both-policies-answers-either-answer"
    if _divergence_active(older):
        pytest.skip(f"jax {jax.__version__}'s save_from_both_policies takes either answer ({older})")

    def make():
        pol = cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
                                         cp.offload_dot_with_no_batch_dims("device", "pinned_host"))
        inner = jax.checkpoint(jnp.sin, policy=pol)
        if where == "known in a checkpoint":
            return lambda a: jax.checkpoint(lambda c: lax.select_n(c > inner(c), c, c))(a)
        return lambda a: jax.checkpoint(lambda c: inner(c) * c)(a)
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, np.float32(0.3), implementations=("remat2",))
    assert report.status("vjp", "remat2") == "not applicable", str(report)     # both raise the same
    assert {r.status for r in report.results} <= {"ok", "not applicable"}, str(report)


@pytest.mark.parametrize("dead_window", [True, False])
def test_remat3_grad_stack_through_a_dead_generic_reduce_window(dead_window):
    """remat3 linearizes a checkpoint's body equation by equation, so a
    generic reduce_window nothing reads makes jax.grad of a stack raise
    JAX's linearization error (found by a pristine campaign, 32fae7ca1b: the
    stack property was not among the predicate's properties); without the
    window both agree with the spec."""
    from fuzz import properties
    from oracle import stacks as S
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def body(d, e):
        if dead_window:
            lax.reduce_window(e, 1.0, lambda g, h: g, (1, 3), (1, 1), "VALID")
        return jnp.sin(d)
    prog = trace_jax(lambda a, b: jax.checkpoint(body)(a, b), np.float32(0.5), np.ones((2, 5), np.float32))
    report = properties.oracle_agrees(prog, implementations=("remat3",), stack=S.Stack((S.Layer("grad"),)),
                                      only=(S.STACK,))
    name = "remat3-linearizes-checkpoint-bodies-per-equation"
    assert report.status(S.STACK, "remat3") == ("known divergence" if dead_window else "ok"), str(report)
    assert any(k[0] == name for k in report.known_divergences) == dead_window


@pytest.mark.parametrize("window", ["unused ys", "dead in the body", "none"])
def test_remat3_keeps_a_scan_whole_in_a_cond_branch_its_unused_ys_too(window):
    """remat3 traces a cond branch in a checkpoint again with auto_dce,
    which drops only equations none of whose outputs is used: a scan whose
    carry the branch returns is kept whole, its ys nothing reads too, so a
    generic reduce_window computing them is linearized and raises; one
    dead inside the scan's own body is gone (pristine nightly finding
    697ee69f53: the model pruned the scan's unused ys by its DCE rule).
    Whether JAX raises is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def step(c, q):
        if window == "dead in the body":
            _generic_window(q)
        return jnp.sin(c), (_generic_window(q) if window == "unused ys" else c)

    def f(a, q):
        def body(a, q):
            return lax.cond(a > 0, lambda a, q: -a, lambda a, q: lax.scan(
                lambda c, _: step(c, q), a, None, length=2)[0], a, q)
        return jax.checkpoint(body)(a, q)
    args = (np.float32(0.5), np.ones((2, 5), np.float32))
    with implementation("remat3"):
        raises = _jax_raises(lambda: jax.grad(f)(*args), ValueError, "Linearization failed")
    assert raises == (window == "unused ys")
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals", "vjp"))
    name = "remat3-linearizes-checkpoint-bodies-per-equation"
    assert report.status("residuals", "remat3") == ("known divergence" if raises else "ok"), report
    assert any(k[0] == name for k in report.known_divergences) == raises


@pytest.mark.parametrize("prints", [True, False])
def test_a_cond_kept_in_a_checkpoint_for_its_effect_alone(prints):
    """_cond_partial_eval_custom returns its staged cond whatever it
    returns, and DCE keeps one with an effect: a cond without outputs whose
    branch prints runs again in the backward pass, so inside a nested
    checkpoint whose policy raises when asked, the enclosing checkpoint's
    backward pass traces it and asks (pristine nightly finding 7f69def811:
    the spec dropped a staged cond without outputs). Without the print both
    compute. 0.4.25 and 0.4.36 drop it and compute: a known divergence.
    JAX's outcome read live."""
    cp = jax.checkpoint_policies
    bad = cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
                                     cp.offload_dot_with_no_batch_dims("device", "pinned_host"))

    def effect(g):
        branch = (lambda y: jax.debug.print("p {y}", y=y)) if prints else (lambda y: None)
        lax.cond(jnp.sum(g) > 0, branch, lambda y: None, g)

    def f(a, b):
        def outer(d, e):
            jax.checkpoint(lambda f, g: effect(g), policy=bad, prevent_cse=False)(d, e)
            return d
        return jnp.sum(jax.checkpoint(outer, prevent_cse=False)(a, b))
    a = np.ones((2, 3), np.float32)
    raises = _jax_raises(lambda: jax.grad(f)(a, a), ValueError, "policies should be a boolean")
    name = "a-checkpoint-drops-a-cond-staged-for-its-effect-alone"
    older = next(d for d in oracle.divergences.DIVERGENCES if d.name == name).active()
    assert raises == (prints and not older)
    report = oracle.check(f, oracle.AS_IS, a, a, properties=("vjp",), implementations=("remat2",))
    want = "ok" if not prints else "known divergence" if older else "not applicable"
    assert report.status("vjp", "remat2") == want, report


@pytest.mark.parametrize("layers", [("grad",), ("grad", "linearize"), ("grad", "grad"), ("grad", "jvp")])
@pytest.mark.parametrize("dead_window", [True, False])
def test_remat3_second_order_meets_a_dead_generic_reduce_window_in_a_scan(dead_window, layers):
    """A generic reduce_window nothing reads, in a scan in a checkpoint:
    remat3's grad computes, but an outer grad or linearize meets the
    checkpoint's body inline and raises JAX's linearization error, which
    the spec (remat2's semantics) does not (pristine nightly finding
    6acf366983: the predicate looked at first order only). Which stacks
    raise is read off JAX."""
    from fuzz import properties
    from oracle import stacks as S
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def body(m, q):
        def step(y, _):
            if dead_window:
                _generic_window(q)
            return y + jnp.sin(y), y
        return jnp.sin(m), lax.scan(step, m, None, length=3)[0]
    args = (np.array([0.1, 0.2, 0.3], np.float32), np.ones((2, 5), np.float32))
    stack = S.Stack(tuple(S.Layer(k) for k in layers))
    checked = lambda m, q: jax.checkpoint(body, prevent_cse=False)(m, q)  # noqa: E731
    prog = trace_jax(checked, *args)
    stacked, call_linear = S.jax_functions(stack, S.base_level(prog))

    def run():
        out = stacked(checked)(*S.operands(prog, stack, args, 0))
        return call_linear(*out) if stack.linearized else out
    with implementation("remat3"):
        raises = _jax_raises(run, ValueError, "Linearization failed")
    report = properties.oracle_agrees(prog, implementations=("remat3",), stack=stack, only=(S.STACK,))
    name = "remat3-linearizes-checkpoint-bodies-per-equation"
    assert report.status(S.STACK, "remat3") == ("known divergence" if raises else "ok"), str(report)
    assert any(k[0] == name for k in report.known_divergences) == raises
    assert raises == (dead_window and len(layers) == 2 and layers[1] != "jvp")


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("argnums", [(0,), (0, 1, 2)])
def test_remat3_s_forward_mode_differentiates_a_checkpoint_s_body_as_written(jitted, argnums):
    """remat3's JVP of a checkpoint (RematTraced.jvp) differentiates the
    body as written, inline, its input tangents instantiated: an igammac
    nothing reads, in a jit, gets a tangent holding igamma_grad_a, which an
    outer linearize meets and cannot differentiate. The model JVP'd the
    body as remat3 linearizes it, the jit's dead code gone (pristine
    nightly finding c6bff7c126). Which stacks raise is read off JAX."""
    from fuzz import properties
    from oracle import stacks as S
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def inner(k, a, x):
        lax.igammac(a, x)
        return k, k
    inner = jax.jit(inner) if jitted else inner

    def checked(k, a, x):
        return jax.checkpoint(inner, prevent_cse=False)(k, a, x)[0]
    args = (np.float32(0.5), np.full((2, 3), 2.0, np.float32), np.ones((2, 3), np.float32))
    stack = S.Stack((S.Layer("jvp", argnums=argnums), S.Layer("linearize")))
    prog = trace_jax(checked, *args)
    stacked, call_linear = S.jax_functions(stack, S.base_level(prog))
    with implementation("remat3"):
        raises = _jax_raises(lambda: call_linear(*stacked(checked)(*S.operands(prog, stack, args, 0))),
                             NotImplementedError, "igamma_grad_a")
    report = properties.oracle_agrees(prog, implementations=("remat2", "remat3"), stack=stack, only=(S.STACK,))
    assert report.status(S.STACK, "remat3") in (("known divergence", "not applicable") if raises else ("ok",)), \
        str(report)
    assert raises


@pytest.mark.parametrize("reads", ["const", "carry"])
def test_a_scan_s_loop_invariant_checkpoint_is_inlined_where_jax_hoists_it(reads):
    """A checkpoint in a scan body reading only a const the inner grad does
    not differentiate: _scan_known_hoisting evaluates it before the loop
    with a JaxprTrace, which inlines a known checkpoint, so the outer
    linearize of linearize o grad meets its body, not a checkpoint, and
    the called linear function has no barrier for it (pristine nightly
    finding cf078ee83e: the spec kept it, differentiated at the outer
    level). One reading the carry is staged again, differentiated, barrier
    and all. Before stackless tracing (jax 0.4.36) the hoisting bound the
    known checkpoint as it is, and the outer linearize barriers it too
    (partial-eval-binds-known-checkpoints-as-they-are). JAX's count is read
    off JAX."""
    from oracle import stacks as S

    def body(c, w, _):
        k = jax.checkpoint(lambda v: jnp.sin(v))(w if reads == "const" else c)
        return c * k, k

    def checked(x, b):
        return (lax.scan(lambda c, xs: body(c, b, xs), x, None, length=2)[0] * x,)
    args = (np.float32(0.5), np.float32(0.7))
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad", argnums=(0,)), S.Layer("linearize")))
    stacked, call_linear = S.jax_functions(stack, S.base_level(prog))
    barriers = jax.jit(lambda *a: call_linear(*stacked(checked)(*a))).lower(
        *S.operands(prog, stack, args, 0)).as_text().count("optimization_barrier")
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_barriers_property(stack, prog),))
    bound_as_is = _divergence_active("partial-eval-binds-known-checkpoints-as-they-are")
    assert (barriers > 0) == (reads == "carry" or bound_as_is)
    if bound_as_is and reads == "const":
        assert [k[0] for k in report.known_divergences] == ["partial-eval-binds-known-checkpoints-as-they-are"]
    else:
        assert report.status(S.STACK_BARRIERS, "remat2") == "ok", str(report)


def test_a_dead_custom_lin_in_a_grad_s_forward_pass_is_never_evaluated():
    """A checkpoint's JVP of integer_pow[y=0] makes known zeros, so the
    custom_vjp it feeds gets a custom_lin whose inputs are all known: it
    lands, dead, in the grad's forward pass, and evaluating it raises
    JAX's forward-mode error. jit never runs dead code (pxla's
    _dce_jaxpr), and neither may the spec's numbers (pristine nightly
    finding 9e3ed30815: the spec raised where JAX computed). JAX's answer
    is read off JAX."""
    from oracle import stacks as S

    def checked(x):
        return (jax.checkpoint(lambda c: _identity_vjp(lax.integer_pow(c, 0)), prevent_cse=False)(x),)
    args = (np.float32(0.5),)
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad"),))
    assert "custom_lin" in str(S.spec_program(prog, stack))         # the class: a dead custom_lin
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    got = jax.jit(stacked(checked))(*S.operands(prog, stack, args, 0))
    assert np.asarray(got[0]) == 0.0
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_property(stack, prog),))
    assert report.status(S.STACK, "remat2") == "ok", str(report)


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
def test_a_weakly_typed_output_s_second_order_residuals_are_the_spec_s():
    """`.at[i].set(x)` on zeros made from a Python float (a scatter) keeps
    the operand's weak type though it reads x; jnp's `*` in the stack's loss
    promoted such an output with a convert_element_type, whose transpose
    JAX then saved under saved_residuals of grad, a value the spec (no
    weak types) names by its mul (pristine nightly finding 18d8ab3799,
    through equinox's maybe_set). The loss multiplies with lax.mul. That
    the output is weakly typed is read off JAX."""
    from oracle import stacks as S

    def checked(x, i):
        buffer = lax.broadcast_in_dim(0.0, (4, 3), ()).at[i].set(x)
        return (jax.checkpoint(lambda b: b + jnp.sin(b), prevent_cse=False)(buffer),)
    args = (np.array([0.5, -0.2, 0.9], np.float32), np.int32(1))
    assert jax.make_jaxpr(checked)(*args).out_avals[0].weak_type
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad", argnums=(0,)),))
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_residuals_property(stack, prog),))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "ok", str(report)


def test_a_scan_transposes_a_residual_offloaded_per_iteration():
    """A checkpoint in a scan body offloading its named input: the scan
    stacks the host residual, and its transpose reads one iteration's slice
    of it, in host memory still (pristine nightly finding 200d4f9252: the
    spec's transposed body took it in device memory and refused its own
    program). JAX's values and residuals are oracle.check's comparison."""
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host")

    def f(x):
        step = jax.checkpoint(lambda c: jnp.sin(checkpoint_name(c, "a")), policy=policy)
        return lax.scan(lambda c, _: (step(c), None), x, None, length=2)[0]
    try:
        report = oracle.check(f, oracle.AS_IS, np.float32(0.5), implementations=("remat2",))
    except oracle.Unsupported as e:
        if "does not address" not in str(e):
            raise
        pytest.skip(f"jax {jax.__version__}: {e}")      # the release's CPU has no host memory kind
    assert report.status("vjp", "remat2") == "ok", str(report)
    assert report.status("residuals", "remat2") in ("ok", "known divergence"), str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2; jax 0.4.25 orders these residuals otherwise, not modelled")
def test_a_vmapped_transposition_moves_the_batch_axis_where_jax_s_transient_broadcast_does():
    """broadcast_in_dim's transpose ends in lax.expand_dims with no new dims,
    an identity broadcast_in_dim that staging forwards away: no program
    holds it, but a vmap tracing the transposition (vmap of a vjp, the
    cotangent batched on its last axis) meets it, and its batching rule
    moves the batch axis to the front right after the reduce_sum, ahead of
    the residuals computed later (pristine nightly finding 1c7c535ba7: the
    spec moved it where the mul reads it, and its residuals came in
    another order). The order is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    from oracle import stacks as S

    def checked(a, b):
        return (b, jnp.square(b), jnp.log(a))
    args = (np.float32(0.7), np.array([0.5, -0.2, 0.9], np.float32))
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("vmap", in_axes=(0, None), out_axes=(0, 0, 0), size=2), S.Layer("vjp"),
                     S.Layer("vmap", in_axes=(0, 0, 0, -1, 0), out_axes=(0, 0), size=2)))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    got = [s.split(" from ")[0] for _, s in saved_residuals(stacked(checked), *S.operands(prog, stack, args, 0))]
    assert got.index("output of transpose") < got.index("output of integer_pow"), got
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_residuals_property(stack, prog),))
    assert report.status(S.STACK_RESIDUALS, "remat2") in ("ok", "known divergence"), str(report)
    assert all(k[0] == "literal-residuals-depend-on-the-constant-s-python-type" for k in report.known_divergences)


@pytest.mark.parametrize("effect", [False, True])
@pytest.mark.parametrize("used", [False, True])
def test_a_checkpoint_replayed_for_its_effect_keeps_its_nested_checkpoints(effect, used):
    """A checkpoint whose outputs nothing reads is staged for its effect
    alone (a print in a nested checkpoint) and replayed forward as it is in
    the backward pass, so the nested checkpoint is lowered with its barrier;
    one whose output is read is transposed by remat_transpose, which
    inlines the known nested one (pristine nightly finding c1ae4873a9: the
    spec counted the nested one as inlined both ways). Before direct
    linearization the unread one is dropped, print and all
    (linearize-drops-unread-effectful-checkpoints); before stackless
    tracing (0.4.36) the known nested one is replayed as it is, barrier and
    all (partial-eval-binds-known-checkpoints-as-they-are). JAX's count is
    read off JAX."""
    def nested(v):
        if effect:
            jax.debug.print("x={x}", x=v)
        return ()

    def outer(a, b):
        jax.checkpoint(nested)(b)
        return jnp.sin(a) * b

    def f(a, b):
        o = jax.checkpoint(outer, prevent_cse=False)(a, b)
        return jnp.sum(o) if used else jnp.sin(a)
    args = (np.float32(0.5), np.ones(3, np.float32))

    def backward(a, b):
        out, pullback = jax.vjp(f, a, b)
        return pullback(jnp.ones_like(out))
    barriers = jax.jit(backward).lower(*args).as_text().count("optimization_barrier")
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("prevent_cse",))
    dropped = not used and _divergence_active("linearize-drops-unread-effectful-checkpoints")
    bound_as_is = used and _divergence_active("partial-eval-binds-known-checkpoints-as-they-are")
    assert (barriers > 0) == (effect and (bound_as_is or not used and not dropped))
    if effect and (dropped or bound_as_is):
        assert report.status("prevent_cse", "remat2") == "known divergence", str(report)
    else:
        assert report.status("prevent_cse", "remat2") == "ok", str(report)


def test_saved_residuals_counts_a_value_twice_as_jax_s_stub_policy_saves():
    """jax 0.10.2's save_anything_except_these_names saves everything (a
    stub); at third order a value and its reduce_precision copy are both
    saved, and saved_residuals' bare AssertionError is explained by the
    residual list as the stub saves, not as the policy's documented
    meaning does (pristine nightly finding 83663ce011). That JAX raises is
    read off JAX."""
    from fuzz import properties
    from jax._src.ad_checkpoint import saved_residuals
    from oracle import stacks as S
    from spec import policies as sp
    if not _divergence_active("save-anything-except-these-names-is-a-stub"):
        pytest.skip(f"jax {jax.__version__}: save_anything_except_these_names is no stub")

    def checked(a, policy):
        c = jax.checkpoint(lambda d: d * checkpoint_name(d, "a"), policy=policy, prevent_cse=False)(a)
        return (jnp.cos(c),)
    args = (np.float32(0.5),)
    prog = trace_jax(lambda a: checked(a, sp.save_anything_except_these_names("a")), *args)
    stack = S.Stack((S.Layer("grad"), S.Layer("grad"), S.Layer("grad")))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    stub = jax.checkpoint_policies.save_anything_except_these_names("a")
    assert _jax_raises(lambda: saved_residuals(stacked(lambda a: checked(a, stub)), *S.operands(prog, stack, args, 0)),
                       AssertionError, "")
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK_RESIDUALS,))
    assert ("saved-residuals-counts-a-value-saved-beside-its-rounding-once", S.STACK_RESIDUALS, "remat2") in \
        report.known_divergences, str(report)


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
@pytest.mark.parametrize("mul_first", [True, False])
def test_constants_are_saved_in_the_order_the_trace_first_reads_them(mul_first):
    """saved_residuals lists constants in jaxpr.constvars order, the order
    the trace first captures them: the forward pass's first reader first,
    though grad's backward pass reads them the other way round (pristine
    nightly finding 85523c4c91: the spec listed them by the backward pass's
    first use). The order is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    from oracle import stacks as S
    scale, weights = np.array([0.5], np.float32), np.array([0.5, 0.75, 1.0], np.float32)

    def checked(c):
        if mul_first:
            d = scale * c
            return jnp.dot(c, weights), c, d
        e = jnp.dot(c, weights)
        return e, c, scale * c
    args = (np.array([0.3, -0.2, 0.9], np.float32),)
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad"),))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    constants = [str(a.shape) for a, s in saved_residuals(stacked(checked), *S.operands(prog, stack, args, 0))
                 if s.startswith("from a constant")]
    assert constants == (["(1,)", "(3,)"] if mul_first else ["(3,)", "(1,)"]), constants
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_residuals_property(stack, prog),))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "ok", str(report)


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
@pytest.mark.parametrize("outer", ["none", "jvp", "vmap"])
def test_an_outer_linearization_s_error_in_a_grad_s_forward_pass_comes_first(outer):
    """saved_residuals of grad(f), f padding with a differentiated padding
    value alone (pad's transpose refuses that) beside a nested checkpoint
    whose save_from_both of offload policies raises when asked: JAX runs
    grad's forward pass under the outer linearization, which re-linearizes
    the nested checkpoint's known half and asks its policy, before grad's
    backward pass reaches pad (pristine nightly finding aa3c697824: the spec
    built the grad whole first and raised pad's refusal). So it does with
    a jvp or a vmap of the grad between them: the forward pass runs under
    those traces too, then under the linearization (pristine nightly
    finding 014e09ed49, `jvp o grad`). JAX's error is read off JAX."""
    from oracle import stacks as S
    offload = jax.checkpoint_policies.save_and_offload_only_these_names
    policy = jax.checkpoint_policies.save_from_both_policies(
        offload(names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
                offload_src="device", offload_dst="pinned_host"),
        offload(names_which_can_be_saved=[], names_which_can_be_offloaded=["c"],
                offload_src="device", offload_dst="pinned_host"))

    def checked(a, b):
        padded = lax.pad(b, a, ((0, 0, 0), (0, 0, 0)))
        inner = jax.checkpoint(lambda g: checkpoint_name(g, "c"), policy=policy, prevent_cse=False)
        return jax.checkpoint(inner, prevent_cse=False)(a), a, padded
    args = (np.float32(-1.1), np.ones((2, 3), np.float32))
    prog = trace_jax(checked, *args)
    layers = {"none": (), "jvp": (S.Layer("jvp", argnums=(0,)),),
              "vmap": (S.Layer("vmap", in_axes=(0, 0, None, None, 0), out_axes=(0,), size=2),)}[outer]
    stack = S.Stack((S.Layer("grad", argnums=(0,)),) + layers)
    _assert_both_raise_under_saved_residuals(checked, args, prog, stack, ValueError,
                                             "The return value of the policies should be a boolean")


def _assert_both_raise_under_saved_residuals(checked, args, prog, stack, error, message):
    """JAX's saved_residuals of the stacked function raises `error` with
    `message` (read off JAX), and the oracle's stack residuals property
    finds the spec raising the same: not applicable."""
    from jax._src.ad_checkpoint import saved_residuals
    from oracle import stacks as S
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    assert _jax_raises(lambda: saved_residuals(stacked(checked), *S.operands(prog, stack, args, 0)), error, message)
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_residuals_property(stack, prog),))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "not applicable", str(report)


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="third-order residuals: direct linearization")
def test_two_outer_linearizations_of_a_grad_s_forward_pass_come_first():
    """saved_residuals of grad(grad(f, argnums=0)), f a jitted function
    padding igamma(d, e) with the differentiated value a alone (pad's
    transpose refuses that):
    JAX runs the inner grad's forward pass under both outer linearizations
    (the outer grad's, saved_residuals' vjp), and the second differentiates
    the igamma_grad_a that the first computes for igamma's tangent in d,
    which has no rule: JAX raises that before the inner backward pass
    reaches pad (pristine nightly finding 3c3ad4f168: the spec linearized
    the forward pass once and raised pad's refusal). JAX's error is read
    off JAX."""
    from oracle import stacks as S

    @jax.jit
    def checked(a, b, c, d, e):
        return lax.pad(lax.igamma(d, e), a, ((0, 0, 0), (0, 0, 0)))
    args = (np.float32(0.5), np.float32(0.2), np.float32(0.3), np.full((2, 3), 1.5, np.float32),
            np.full((2, 3), 0.7, np.float32))
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad", argnums=(0,)), S.Layer("grad")))
    _assert_both_raise_under_saved_residuals(checked, args, prog, stack, NotImplementedError,
                                             "Differentiation rule for 'igamma_grad_a' not implemented")


@pytest.mark.parametrize("jitted", [False, True])
def test_a_while_loop_whose_carries_are_known_stages_nothing(jitted):
    """A while loop reading a differentiated body const its body ignores,
    its carry a constant: no carry has a tangent, and the whole loop JAX
    stages beside the known one reaches no tangent output, so
    linearize_from_jvp keeps nothing of it; in a jit, the const is no
    residual there, and the residuals come in the order the rest reads
    them (pristine nightly finding e35a82cb42: the spec staged the dead
    loop, whose const then came first). JAX's residuals are oracle.check's
    comparison."""
    import dataclasses
    from fuzz import properties
    from oracle.spellings import CANONICAL
    from spec import ops
    from spec.prims_control import while_loop
    from spec.remat import checkpoint

    def f(a, b):
        c = ops.add(b, b)
        zeros = ops.broadcast_in_dim(np.float32(0.0), (3,), ())
        e = while_loop(lambda x: ops.lt(ops.reduce_sum(x, (0,)), np.float32(-1.0)), lambda _, j: j, zeros,
                       body_consts=(c,))
        k = ops.sin(a)          # read (its cosine) before the checkpoint's c
        l, m = checkpoint(lambda n: (ops.sin(n), ops.sin(n)), prevent_cse=False)(c)
        return l, e, k, m
    import spec
    if oracle.jax_api.unavailable("remat3"):    # remat3 saves c itself, for the checkpoint
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    prog = spec.trace(f, spec.f32[()], spec.f32[3])
    report = properties.oracle_agrees(prog, implementations=("remat3",), only=("residuals",),
                                      spelling=dataclasses.replace(CANONICAL, jit=jitted))
    assert report.status("residuals", "remat3") == "ok", str(report)


def test_remat3_names_a_value_a_jit_forwards_in_a_nested_checkpoint_by_its_producer():
    """remat3 saves the outer checkpoint's named input; the model saves the
    nested checkpoint's output that a jit inside forwards from that input,
    and names it by following the jit's forwarding back to the name
    (remat3-names-nested-checkpoint-values-by-producer; pristine nightly
    finding 00adf2850a: the model stopped at the jit's output). What JAX
    saves is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    names = jax.checkpoint_policies.save_only_these_names

    def inner(j, k):
        l, _ = jax.jit(lambda n: (n + jnp.sin(n), n))(j)
        return checkpoint_name(l, "c"), j

    def outer(e, f):
        h, _ = jax.checkpoint(inner, policy=names("a", "b", "c"), prevent_cse=False)(checkpoint_name(e, "a"), e)
        return h, e

    def fn(a):
        return jax.checkpoint(outer, policy=names("a"), prevent_cse=False)(a, a)[0]
    with implementation("remat3"):
        sources = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(fn, np.float32(0.3))]
    assert sources == ["named 'a'"], sources
    report = oracle.check(fn, oracle.AS_IS, np.float32(0.3), implementations=("remat3",), properties=("residuals",))
    assert ("remat3-names-nested-checkpoint-values-by-producer", "residuals", "remat3") in report.known_divergences, \
        str(report)


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
def test_an_outer_linearization_after_a_failing_transposition_reads_a_forward_pass_s_names():
    """Where vjp's transposition fails (max pooling with window dilation
    has no VJP, in JAX and the spec) and saved_residuals follows, the
    spec linearizes the forward pass, whose input names a partial
    evaluation left a list: the check names the shared error instead of
    failing inside (pristine nightly finding c4d22302ae, `can only
    concatenate list (not "tuple") to list`)."""
    from fuzz import properties
    from oracle import stacks as S

    def checked(a, b):
        return (lax.reduce_window(b, -jnp.inf, lax.max, (2, 2), (1, 2), ((0, 1), (1, 0)), (2, 1), (1, 2)),)
    args = (np.float32(0.5), np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5))
    prog = trace_jax(checked, *args)
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((S.Layer("vjp"),)),
                                      only=(S.STACK_RESIDUALS,))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "not applicable", str(report)


def test_a_stack_level_of_jax_s_stub_policy_saves_as_the_stub_does():
    """jax 0.10.2's save_anything_except_these_names saves everything: the
    saved residuals of grad of a checkpoint under it are those of the grad
    built from the checked function with the stub's policy, each level's
    linearization asking it (save-anything-except-these-names-is-a-stub;
    pristine nightly finding 83663ce011's sibling 377ffb8cda: the level's
    policies were mapped after the level was built). That JAX saves the
    excluded name is read off JAX."""
    from fuzz import properties
    from jax._src.ad_checkpoint import saved_residuals
    from oracle import stacks as S
    from spec import policies as sp
    if not _divergence_active("save-anything-except-these-names-is-a-stub"):
        pytest.skip(f"jax {jax.__version__}: save_anything_except_these_names is no stub")

    def checked(a, policy):
        return (jax.checkpoint(lambda c: c * checkpoint_name(c, "a"), policy=policy, prevent_cse=False)(a),)
    args = (np.float32(0.5),)
    prog = trace_jax(lambda a: checked(a, sp.save_anything_except_these_names("a")), *args)
    stack = S.Stack((S.Layer("grad"),))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    stub = jax.checkpoint_policies.save_anything_except_these_names("a")
    got = [s.split(" from ")[0] for _, s in saved_residuals(stacked(lambda a: checked(a, stub)),
                                                           *S.operands(prog, stack, args, 0))]
    assert "named 'a'" in got, got
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK_RESIDUALS,))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "known divergence", str(report)
    assert report.results[0].detail == "save-anything-except-these-names-is-a-stub", str(report)


@pytest.mark.parametrize("sharding", ["named", "single device"])
def test_second_order_residuals_of_a_named_sharding_are_not_compared(sharding):
    """jax.grad of a program whose value is constrained to a NamedSharding
    seeds its cotangent with a `reshard` (sharding in types), and the
    transposes after it bind reduce_sum over no axes, which grad's own
    linearization saves where the spec saves the literal 1.0 (found by a
    pristine campaign, 6146d5a872): not modelled, so not compared, saying
    why; the numbers are compared. A single-device sharding is compared."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec.prims_conv import sharding_constraint
    if not hasattr(jax.sharding, "AxisType"):
        pytest.skip(f"the emitter binds sharding constraints in jax 0.6's API, not {jax.__version__}'s")
    kind = jax.devices()[0].default_memory().kind     # "device" (0.7 on), "unpinned_host" before
    sh = (("NamedSharding", ("Mesh", (0,), (1,), ("x",), ("Auto",)), ("x", None), kind)
          if sharding == "named" else ("SingleDeviceSharding", 0, kind))
    prog = spec.trace(lambda a, b: (a, sharding_constraint(b, sh)), spec.f32[()], spec.f32[4, 2])
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((S.Layer("grad"),)),
                                      only=(S.STACK_RESIDUALS, S.STACK))
    direct = S._without_direct_linearization() is None
    want = "not compared" if sharding == "named" or not direct else "ok"
    assert report.status(S.STACK_RESIDUALS, "remat2") == want, str(report)
    assert report.status(S.STACK, "remat2") == "ok", str(report)


def test_remat3_never_asks_a_refused_policy_where_jax_raises_for_another_reason():
    """A save_from_both_policies of an offload policy, which the spec (as
    remat2) refuses when asked, and remat3 never asks; beside it a pad of a
    non-differentiable operand with a differentiated padding value, whose
    transpose JAX cannot run (a TypeError). Under a grad stack remat3 raises
    that TypeError where the spec raised the policy's refusal: both fail,
    for different reasons, and the refused policy is the known divergence
    (found by a pristine campaign, 4a1ae57152)."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec import ops, policies as sp
    from spec.prims_math import ceil
    from spec.prims_structural import pad
    from spec.remat import checkpoint_name
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    pol = sp.save_from_both_policies(sp.save_and_offload_only_these_names(
        names_which_can_be_saved=(), names_which_can_be_offloaded=("a",), offload_src="device", offload_dst="pinned_host"),
                                     sp.save_only_these_names("a", "b"))

    def fn(a, d):
        padded = pad(ceil(d), a, ((0, 0, 0),))
        return (ops.checkpoint(lambda h: checkpoint_name(ops.sin(checkpoint_name(h, "a")), "b"), policy=pol)(a), padded)
    prog = spec.trace(fn, spec.f32[()], spec.f32[6])
    report = properties.oracle_agrees(prog, implementations=("remat3",), stack=S.Stack((S.Layer("grad"),)),
                                      only=(S.STACK,))
    assert report.status(S.STACK, "remat3") == "known divergence", str(report)


@pytest.mark.parametrize("message", [
    "safe_zip() argument 1 has length 2 but argument 0 has length 1",
    "safe_zip() argument 1 has length 17+ but argument 0 has length 6. All lengths: (6, 17+) "
    "(Note: length capped for argument(s) 1)"])
def test_nested_per_argument_prevent_cse_names_jax_s_capped_lengths_too(message):
    """JAX caps a long argument's length in its safe_zip message ("17+"):
    the predicate of nested-per-argument-prevent-cse-loses-its-residual-flags
    read only plain numbers, and a campaign's program with a long nested
    checkpoint was a finding (da1d6fec31, under jax.linearize)."""
    import spec
    from oracle import divergences
    from spec import ops
    prog = spec.trace(lambda x: (ops.checkpoint(lambda y: ops.mul(ops.checkpoint(ops.sin, prevent_cse=(True,))(y), 2.0),
                                                policy=spec.policies.everything_saveable)(x),), spec.f32[3])
    ctx = divergences.Context("remat2", "stack", None, prog, error=ValueError(message))
    assert divergences._nested_per_argument_prevent_cse(ctx)


@pytest.mark.parametrize("offload", [True, False])
def test_grad_of_grad_of_an_offloaded_residual(offload):
    """jax.grad of jax.grad of a checkpoint offloading a named value to host
    memory: jax 0.10.2 raises `Expected cotangent type float32[] but got
    float32<host>[]` (found by a pristine campaign, f8be1365d7); the known
    divergence names exactly that; saving the name instead agrees."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec import ops, policies as sp
    from spec.remat import checkpoint_name
    name = "grad-of-grad-of-an-offloaded-residual-gets-a-host-cotangent"
    if not _divergence_active(name):
        pytest.skip(f"{name} is declared for jax 0.10.2, not {jax.__version__}")
    pol = (sp.save_and_offload_only_these_names(names_which_can_be_saved=(), names_which_can_be_offloaded=("a",),
                                                offload_src="device", offload_dst="pinned_host")
           if offload else sp.save_only_these_names("a"))
    prog = spec.trace(lambda a, b: (ops.checkpoint(lambda d: ops.sin(checkpoint_name(d, "a")), policy=pol)(a),),
                      spec.f32[()], spec.f32[()])
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((S.Layer("grad"), S.Layer("grad"))),
                                      only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == ("known divergence" if offload else "ok"), str(report)


@pytest.mark.parametrize("fn", ["igamma", "betainc", "igamma of arrays"])
def test_second_order_residuals_of_a_folded_literal_operand_are_not_compared(fn):
    """lax.igamma(1.5, x) and lax.betainc(2.5, 1.5, x) with Python floats:
    JAX's JVP rules apply Python operators to the primals, promoting a
    weakly typed `a - 1` (convert_element_type) or folding `b - 1` to a
    literal, which grad's own linearization names differently from the
    spec (found by pristine campaigns, aad1d61dc9 and 2087fb15dc): not
    compared, saying why; the numbers are. With array operands, compared."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec.prims_elementwise import _lit_like
    from spec.prims_special import betainc, igamma
    if fn == "igamma":
        prog = spec.trace(lambda x: (igamma(_lit_like(x, 1.5), x),), spec.f32[4])
    elif fn == "betainc":
        prog = spec.trace(lambda x: (betainc(_lit_like(x, 2.5), _lit_like(x, 1.5), x),),
                          spec.f32[2, 3])
    else:
        prog = spec.trace(lambda a, x: (igamma(a, x),), spec.f32[4], spec.f32[4])
    grad = S.Layer("grad", argnums=(1,)) if fn == "igamma of arrays" else S.Layer("grad")   # (a's: igamma_grad_a)
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((grad,)),
                                      only=(S.STACK_RESIDUALS, S.STACK))
    direct = S._without_direct_linearization() is None
    want = "ok" if fn == "igamma of arrays" and direct else "not compared"
    assert report.status(S.STACK_RESIDUALS, "remat2") == want, str(report)
    assert report.status(S.STACK, "remat2") == "ok", str(report)


def test_nested_per_argument_prevent_cse_under_a_grad_stack():
    """The known JAX bug nested-per-argument-prevent-cse-loses-its-residual-
    flags under a grad stack's second-order residuals: the predicate looks
    at the checked function's checkpoints, not at the stack level's program,
    where the outer checkpoint is already staged (found by a pristine
    campaign, 9a4fe03557)."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec import ops, policies as sp
    name = "nested-per-argument-prevent-cse-loses-its-residual-flags"
    if not _divergence_active(name):
        pytest.skip(f"{name} is declared for jax 0.7.2 on, not {jax.__version__}")
    body = lambda d: (d, ops.checkpoint(ops.sin, prevent_cse=(False,))(d))    # noqa: E731
    prog = spec.trace(lambda a: (ops.checkpoint(body, policy=sp.everything_saveable,
                                                prevent_cse=False)(a)[0],), spec.f32[()])
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((S.Layer("grad"),)),
                                      only=(S.STACK_RESIDUALS,))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "known divergence", str(report)


def test_refused_policy_predicate_where_both_raise_on_the_residuals_property():
    """remat3-unrecognised-policy-is-full-remat where JAX raised too, on the
    residuals property: there is no JAX list to compare, and the predicate
    read one (TypeError: 'NoneType' object is not iterable, which the
    checker reports as a RuntimeError of the predicate: found by a pristine
    campaign, 6ae657106f, a while loop beside the refused policy)."""
    import spec
    from oracle import divergences
    from spec import ops, policies as sp
    from spec.remat import checkpoint_name
    pol = sp.save_from_both_policies(sp.save_only_these_names("b"), sp.save_only_these_names("a"))
    body = lambda x: ops.sin(checkpoint_name(checkpoint_name(x, "a"), "b"))     # noqa: E731
    prog = spec.trace(lambda x: (ops.checkpoint(body, policy=pol)(x),), spec.f32[3])
    refusal = sp.PolicyCombinationError("The return value of the policies should be a boolean.")
    ctx = divergences.Context("remat3", "residuals", pol, prog, error=ValueError("Reverse-mode differentiation "
                              "does not work for lax.while_loop"), spec_error_too=refusal)
    assert divergences._remat3_never_asks_refused_policy(ctx)


def _generic_window(a):
    """lax.reduce_window with a computation that is no monoid: the generic
    reduce_window primitive, whose JVP computes primals and tangents in one
    equation."""
    return lax.reduce_window([a], [1.0], lambda acc, elem: [acc[0]], (1, 3), (1, 1), ((0, 0), (0, 0)))[0]


UNUSED_WINDOW = {   # c, d -> c.sum(), with a generic reduce_window of d nobody reads
    "checkpoint": lambda c, d: jax.checkpoint(lambda c, d: (c, _generic_window(d)),
                                              policy=jax.checkpoint_policies.everything_saveable)(c, d)[0].sum(),
    "checkpoint of a scan": lambda c, d: jax.checkpoint(lambda c, d: (c, lax.scan(
        lambda _, __: ((), _generic_window(d)), (), None, length=2)[1]))(c, d)[0].sum(),
    "jit": lambda c, d: jax.jit(lambda c, d: (c, _generic_window(d)))(c, d)[0].sum(),
    "top level": lambda c, d: (_generic_window(d), c.sum())[1],
}


@pytest.mark.parametrize("label", sorted(UNUSED_WINDOW))
@pytest.mark.parametrize("argnums", [(0, 1), (0,)])
def test_an_unused_output_that_cannot_be_linearized(label, argnums):
    """JAX linearizes one equation at a time (ad.linearize_from_jvp): a
    checkpoint whose body holds a generic reduce_window of a differentiated
    value has a primal output that depends on tangents, and JAX raises
    there though nothing reads it; the spec raised only for an output of
    the whole program (found by a pristine campaign, 468ab22284). Whether
    JAX raises is read off JAX; the spec must raise alike (no Mismatch)."""
    fn = UNUSED_WINDOW[label]
    c, d = np.ones(3, np.float32), np.ones((2, 5), np.float32)
    if argnums == (0,):
        fn = (lambda f: lambda c: f(c, d))(fn)
    args = (c, d) if argnums == (0, 1) else (c,)
    try:
        raises = _jax_raises(lambda: jax.grad(fn, argnums=tuple(range(len(args))))(*args), ValueError,
                             "Linearization failed")
    except NotImplementedError as e:    # jax 0.4.25: no JVP rule; 0.4.36, 0.6.2: no transpose rule
        pytest.skip(f"jax {jax.__version__} cannot differentiate the generic reduce_window: "
                    f"{str(e).splitlines()[0]}")
    report = oracle.check(fn, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals", "vjp"))
    want = {"not applicable" if raises else "ok"}
    dead_primal = "linearize-ignores-an-unlinearizable-dead-primal"     # before direct linearization
    if _divergence_active(dead_primal):
        want.add("known divergence")
    assert report.status("residuals", "remat2") in want, str(report)
    assert report.status("vjp", "remat2") in want, str(report)


def _offload_or_dots():
    """save_from_both_policies of an offload policy and dots_saveable: asked
    about a `mul`, one answers Offloadable, the other False, and JAX raises
    (an Offloadable cannot be combined)."""
    cp = jax.checkpoint_policies
    return cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims("device", "pinned_host"), cp.dots_saveable)


@pytest.mark.parametrize("reads", ["a const", "an xs"])
def test_a_scan_s_hoisting_asks_a_known_checkpoint_s_policy(reads):
    """A scan's linearization re-traces its known loop body with only its
    consts known (_scan_known_hoisting, a JaxprTrace), which runs
    remat_partial_eval on a checkpoint reading only consts, and that asks
    the checkpoint's policy about its body: a policy raising when asked
    raises, though the checkpoint has no tangent. A checkpoint reading an
    xs is unknown there and unasked (found by a pristine campaign,
    c95dd0b0b0). Whether JAX raises is read off JAX."""
    if _without_direct_linearization() is not None:
        # JAX's linearization is then JVP and a JaxprTrace, which asks every
        # known checkpoint's policy (the xs case raises on 0.6.2 too): not
        # modelled; and before 0.4.38 save_from_both_policies takes either answer
        pytest.skip(f"jax {jax.__version__} linearizes without direct linearization")
    c = np.ones(3, np.float32)
    ys = np.full((2, 3), 2.0, np.float32)

    def f(xs):
        def body(carry, x_y):
            x, y = x_y
            v = jax.checkpoint(lambda a: a * a, policy=_offload_or_dots())(c if reads == "a const" else y)
            return carry + v * x, jnp.sin(x)
        return lax.scan(body, jnp.zeros(3), (xs, ys))[0].sum()
    xs = np.ones((2, 3), np.float32)
    raises = _jax_raises(lambda: jax.grad(f)(xs), ValueError, "policies should be a boolean")
    assert raises is (reads == "a const")
    report = oracle.check(f, oracle.AS_IS, xs, implementations=("remat2",), properties=("residuals", "vjp"))
    want = "not applicable" if raises else "ok"
    assert report.status("residuals", "remat2") == want, str(report)
    assert report.status("vjp", "remat2") == want, str(report)


@pytest.mark.parametrize("checkpoint_branch", [0, 1])
def test_a_cond_s_branches_are_linearized_in_order(checkpoint_branch):
    """A cond with a checkpoint whose policy raises when asked about its
    name in one branch, a generic reduce_window (no linearization) in the
    other: _cond_linearize linearizes branch 0 first, so the error of the
    first branch comes first (pristine nightly finding ae0271da1c, where the
    spec raised the linearization error whichever branch came first).
    Which error JAX raises is read off JAX; the spec must raise it too."""
    if _without_direct_linearization() is not None:
        pytest.skip(f"jax {jax.__version__}: a cond is linearized by JVP and partial evaluation")
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.save_only_these_names("a"), cp.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["b"], offload_src="device",
        offload_dst="pinned_host"))
    named = lambda a, b: jax.checkpoint(lambda x: checkpoint_name(x, "b"), policy=policy)(a)    # noqa: E731
    window = lambda a, b: jnp.cos(a) + 0 * _generic_window(b).sum()                          # noqa: E731
    branches = (named, window) if checkpoint_branch == 0 else (window, named)

    def f(a, b):
        return lax.switch((a > 0).astype(np.int32), branches, a, b)   # branches in index order
    args = (np.float32(0.5), np.ones((2, 5), np.float32))
    grad = jax.grad(f, argnums=(0, 1))
    try:
        grad(*args)
        raise AssertionError("JAX differentiated it")
    except ValueError as e:
        policy_first = "policies should be a boolean" in str(e)
        assert policy_first or "Linearization failed" in str(e), str(e)
    assert policy_first is (checkpoint_branch == 0)
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == "not applicable", str(report)


def _saved_per_implementation(f, *args) -> dict:
    """What saved_residuals says of f under remat2 and under remat3, each
    entry cut at ' from': the JAX side of the remat3 tests below."""
    from jax._src.ad_checkpoint import saved_residuals
    lists = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            lists[impl] = [s.split(" from")[0] for _, s in saved_residuals(f, *args)]
    return lists


def _asked(a):
    """A checkpoint whose policy raises when asked (_offload_or_dots) about
    the sin of a value that has no tangent."""
    return jax.checkpoint(lambda a: jnp.sin(lax.stop_gradient(a)), policy=_offload_or_dots())(a)


def _in_a_checkpoint(container):
    """grad's function: a checkpoint whose body holds `container` reading
    its linear input and a primal, and _asked of the primal inside."""
    def outer(x):
        if container == "a scan":
            return lax.scan(lambda c, _: (c * _asked(c), None), x, None, length=2)[0]
        if container == "a scan reading a const":     # its hoisting asks, in the forward pass
            c = jnp.cos(x)
            return lax.scan(lambda a, _: (jax.checkpoint(lambda a, c: a * jnp.sin(c), policy=_offload_or_dots())(a, c),
                                          None), x, None, length=2)[0]
        if container == "a scan's dead known code":   # max's JVP rule's constants, which only the tangent reads
            return lax.scan(lambda a, _: (jax.checkpoint(lambda g: lax.max(g, g), policy=_offload_or_dots())(a),
                                          None), x, None, length=1)[0]
        if container == "a jit":
            return jax.jit(lambda a, b: a * _asked(b))(x, jnp.cos(x))
        if container == "a cond":
            return lax.cond(x.sum() > 0, lambda a, b: a * _asked(b), lambda a, b: a, x, jnp.cos(x))
        if container == "a known while":
            return x * lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + _asked(c[1])),
                                      (0, lax.stop_gradient(x)))[1]
        if container == "a known custom_jvp":
            return x * _custom_jvp_of_asked(lax.stop_gradient(x))
        raise AssertionError(container)
    return lambda x: jax.checkpoint(outer)(x).sum()


@jax.custom_jvp
def _custom_jvp_of_asked(a):
    return _asked(a)


_custom_jvp_of_asked.defjvp(lambda primals, tangents: (_custom_jvp_of_asked(primals[0]), 2.0 * tangents[0]))


def _in_a_linearization(container):
    """grad's function: `container` linearized, reading the argument,
    _asked of a constant inside."""
    c = jnp.ones(3)
    if container == "a jit in a scan":
        def body(carry, x):
            return carry + jax.jit(lambda a, b: _asked(a) * b)(c, x) * x, None
        return lambda xs: lax.scan(body, jnp.zeros(3), xs)[0].sum()
    if container == "a while":
        return lambda x: lax.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] * _asked(c)), (0, x))[1].sum()
    raise AssertionError(container)


@pytest.mark.parametrize("container", ["a scan", "a scan reading a const", "a scan's dead known code", "a jit",
                                       "a cond", "a known while",
                                       "a known custom_jvp",
                                       "a jit in a scan", "a while"])
def test_a_jaxpr_trace_asks_the_policies_of_checkpoints_inside_what_it_traces(container):
    """A JaxprTrace (remat_transpose's partial evaluation of a checkpoint's
    body; a scan's hoisting and a while's linearization) runs each custom
    partial-eval rule whatever its inputs: a jit's, scan's, cond's and
    while's trace their bodies, and a checkpoint met there asks its policy
    about its body (remat_partial_eval): a policy raising when asked raises,
    though the checkpoint has no tangent. A custom_jvp call with every
    input known is bound whole, its body unasked. The spec asked only the
    checkpoints of equations reading no unknown value (found by a pristine
    campaign, 9ca57f4501, in a scan; and in the forward pass, where a
    scan's partial evaluation inside a checkpoint hoists its loop-invariant
    residuals, _scan_partial_eval_custom's `pe.partial_eval_jaxpr_nounits`,
    of its known body as partial_eval_jaxpr_custom left it, dead code too:
    57f43d1872). Whether JAX raises is read off JAX."""
    if _without_direct_linearization() is not None:
        pytest.skip(f"jax {jax.__version__}: save_from_both_policies of an offload policy is checked "
                    "on releases with direct linearization")
    transposed = container not in ("a jit in a scan", "a while")
    fn = _in_a_checkpoint(container) if transposed else _in_a_linearization(container)
    x = np.ones((2, 3) if container == "a jit in a scan" else 3, np.float32)
    raises = _jax_raises(lambda: jax.grad(fn)(x), ValueError, "policies should be a boolean")
    assert raises is (container != "a known custom_jvp")
    report = oracle.check(fn, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals", "vjp"))
    assert report.status("vjp", "remat2") == ("not applicable" if raises else "ok"), str(report)
    forward_raises = _jax_raises(lambda: jax.vjp(fn, x), ValueError, "policies should be a boolean")
    assert report.status("residuals", "remat2") == ("not applicable" if forward_raises else "ok"), str(report)


def _igamma_decides(a, b, c):
    return lax.cond(lax.igamma(b, c).sum() > 0, lambda x: x, lambda x: -x, a)


@pytest.mark.parametrize("spelled", ["plainly", "in a jit", "around a jit"])
def test_jvp_of_a_pullback_differentiates_its_dead_forward_code(spelled):
    """jax.jvp of a pullback runs jax.vjp's forward pass under jvp's trace,
    which differentiates each equation of it, also one the pullback never
    reads: igamma's JVP rule computes igamma_grad_a for a tangent only a
    comparison reads, and igamma_grad_a has no JVP rule (JAX raises). A
    jit's linearization leaves its dead code out of the forward jit. The
    spec's second-order program was the pullback without its dead code
    (found by a pristine campaign, 4edfa774e4). Whether JAX raises is read
    off JAX."""
    if spelled == "in a jit" and _without_direct_linearization() is not None:
        # JVP and a JaxprTrace: _pjit_partial_eval's known jit keeps the
        # dead igamma_grad_a (prune_closed_jaxpr_outputs, no DCE), which
        # jvp then differentiates, and JAX raises: not modelled
        pytest.skip(f"jax {jax.__version__}: a jit's linearization without direct linearization "
                    "keeps its dead forward code, not modelled")
    fn = {"plainly": _igamma_decides, "in a jit": jax.jit(_igamma_decides),
          "around a jit": lambda a, b, c: lax.cond(jax.jit(lax.igamma)(b, c).sum() > 0,
                                                   lambda x: x, lambda x: -x, a)}[spelled]
    args = (np.float32(-1.1), np.full((2, 3), 0.5, np.float32), np.full((2, 3), 0.7, np.float32))
    raises = _jax_raises(lambda: jax.jvp(lambda *d: jax.vjp(fn, *d)[1](np.float32(1.0)), args, args),
                         NotImplementedError, "igamma_grad_a")
    report = oracle.check(fn, oracle.AS_IS, *args, implementations=("remat2",), properties=("second_order",))
    assert report.status("second_order", "remat2") == ("not applicable" if raises else "ok"), str(report)


@pytest.mark.parametrize("second_case", ["the input", "a constant"])
def test_select_n_s_jvp_makes_its_zero_whether_or_not_a_case_needs_it(second_case):
    """lax._select_jvp makes a zero like the first nonzero case tangent
    whenever one is nonzero, used or not: a dead broadcast_in_dim in a
    checkpoint body's JVP, which remat_partial_eval asks the policy about.
    A policy raising when asked about broadcast_in_dim (one answering
    Offloadable, the other False) raises in JAX with either second case
    (found by a pristine campaign, dee03d6bcc, where the spec made the zero
    only for a zero case tangent and computed)."""
    import spec
    from fuzz import properties
    from fuzz.strategies import SavePrimitives
    from spec import ops, policies as sp
    from spec.prims_elementwise import select_n
    if _without_direct_linearization() is not None:
        pytest.skip(f"jax {jax.__version__}: save_from_both_policies of an offload policy is checked "
                    "on releases with direct linearization")
    pol = sp.save_from_both_policies(SavePrimitives(frozenset()),
                                     SavePrimitives(frozenset(), offload=frozenset({"broadcast_in_dim"})))

    def body(c):
        other = c if second_case == "the input" else spec.Literal(np.full(3, 2.0, np.float32), spec.f32[3])
        return select_n(ops.gt(ops.reduce_sum(c, axes=(0,)), np.float32(0)), c, other)
    prog = spec.trace(lambda c: (ops.checkpoint(body, policy=pol)(c),), spec.f32[3])
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("residuals",))
    assert report.status("residuals", "remat2") == "not applicable", str(report)


def test_a_callback_s_result_is_float64_in_the_reference():
    """oracle/upcast.py widens every float value: a pure_callback's result
    type comes from its result_avals param, which stayed f32, so the
    float64 reference program took an f64 cotangent for an f32 output and
    the spec raised EvaluationError where JAX differentiates (found by a
    pristine campaign, 9aa1baaed4: grad of a callback of stop_gradient)."""
    import spec
    from fuzz import properties
    from oracle.upcast import upcast
    from spec.prims_callback import numpy_sin, pure_callback
    from spec.prims_elementwise import stop_gradient
    prog = spec.trace(lambda a, b: (pure_callback(numpy_sin, [b.type], stop_gradient(b), vmap_method="sequential")[0],
                                    a), spec.f32[()], spec.f32[2, 3])
    assert [str(t.dtype) for t in upcast(prog).out_types] == ["float64", "float64"]
    try:
        jax.make_jaxpr(oracle.to_jax(prog))(np.float32(1), np.ones((2, 3), np.float32))
    except TypeError as e:     # 0.4.25: no vmap_method; 0.4.36: `vectorized` too
        pytest.skip(f"jax {jax.__version__}: pure_callback's primitive is not the spec's: {e}")
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("vjp", "values", "second_order"))
    assert report.status("vjp", "remat2") == "ok", str(report)


def _offloads_both(checkpoint, body):
    """`body` in a checkpoint whose policy, save_from_both_policies of two
    offload policies, raises when asked about a `mul` (both answer Recompute)."""
    from spec import policies as sp
    offload = sp.offload_dot_with_no_batch_dims("device", "pinned_host")
    return checkpoint(body, policy=sp.save_from_both_policies(offload, offload), prevent_cse=False)


def _raising_then_unlinearizable(where):
    """A program whose linearization raises twice: a checkpoint's policy is
    asked about a `mul`, and a generic reduce_window makes a primal
    unknown, in that checkpoint or after it (in a cond's branch before)."""
    import spec
    from spec import ops
    from spec.prims_elementwise import stop_gradient
    from spec.prims_window import reduce_window
    window = lambda e: reduce_window(e, np.float32(1.0), lambda a, b: a, (1, 3))    # noqa: E731
    if where == "in the checkpoint":
        def body(d, e):
            ops.mul(stop_gradient(d), d)        # unused: the policy is asked about it
            return window(e)
        return spec.trace(lambda a, b: (_offloads_both(ops.checkpoint, body)(a, b),), spec.f32[()], spec.f32[2, 5])
    if where == "in a while body, before a cond branch holding the window":
        def looped(a, b):
            step = _offloads_both(ops.checkpoint, lambda k: ops.add(k, np.float32(0.5)))
            _, d = ops.while_loop(lambda c: ops.lt(c[0], np.int32(1)), lambda c: (ops.add(c[0], np.int32(1)), step(c[1])),
                                  (np.int32(0), a))
            return (spec.cond(ops.gt(d, np.float32(0)), lambda t, v: (window(v), ops.cos(t))[1], lambda t, v: t, a, b),)
        return spec.trace(looped, spec.f32[()], spec.f32[2, 5])

    def f(b, g):
        squares = _offloads_both(ops.checkpoint, lambda u: ops.reduce_sum(ops.mul(u, u), (0,)))
        n = spec.cond(ops.gt(ops.reduce_sum(b, (0,)), np.float32(0)), lambda t: ops.sin(squares(t)),
                      lambda t: ops.reduce_sum(t, (0,)), b)
        return n, window(g)
    return spec.trace(f, spec.f32[2], spec.f32[2, 5])


@pytest.mark.parametrize("where", ["in the checkpoint", "after a cond holding the checkpoint",
                                   "in a while body, before a cond branch holding the window"])
def test_a_policy_raising_comes_before_a_later_linearization_error(where):
    """linearize_from_jvp partially evaluates a checkpoint's JVP (which asks
    its policy) before checking its primal outputs, and JAX linearizes the
    equations in order: where the policy raises when asked and a generic
    reduce_window makes a primal unknown, in the checkpoint or after it
    (in a later cond's branch too), JAX raises the policy's error, as the
    spec must (found by pristine campaigns, c1fdeb0562, 2904291a57 and
    2a521d8404, when the spec's check came first)."""
    from fuzz import properties
    if _without_direct_linearization() is not None:
        pytest.skip(f"jax {jax.__version__} linearizes without direct linearization")
    report = properties.oracle_agrees(_raising_then_unlinearizable(where), implementations=("remat2",),
                                      only=("residuals",))
    assert report.status("residuals", "remat2") == "not applicable", str(report)
    assert "policies should be a boolean" in report.results[0].detail, str(report)


def test_a_third_derivative_of_a_user_policy_s_offload():
    """grad o grad o grad of a checkpoint whose user policy offloads `sin`:
    JAX binds `device_put[devices=(MemorySpace.Device,)]` to bring a value
    back, which the importer refused (Unsupported where JAX computes), and
    then raises the known host-cotangent bug, which named only the built-in
    offload policies (found by a pristine campaign, 570daba7ef)."""
    import spec
    from fuzz import properties
    from fuzz.strategies import SavePrimitives
    from oracle import stacks as S
    from spec import ops
    from spec.remat import _device_put_from_jax
    name = "grad-of-grad-of-an-offloaded-residual-gets-a-host-cotangent"
    space = type("MemorySpace", (), {"__str__": lambda self: "MemorySpace.Device"})()
    assert _device_put_from_jax(dict(devices=(space,), srcs=(None,), copy_semantics=())) == dict(
        memory_space="device")
    if not _divergence_active(name):
        pytest.skip(f"{name} is declared for jax 0.10.2, not {jax.__version__}")

    def body(c):
        return ops.add(c, ops.add(c, ops.sin(c)))
    pol = SavePrimitives(frozenset(), offload=frozenset({"sin"}))
    prog = spec.trace(lambda a: (ops.checkpoint(body, policy=pol, prevent_cse=(False,))(a),), spec.f32[()])
    report = properties.oracle_agrees(prog, implementations=("remat2",),
                                      stack=S.Stack((S.Layer("grad"),) * 3), only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == "known divergence", str(report)


def test_the_transpose_of_a_reload_imports():
    """JAX's transpose of a device_put that reloads a Host value binds
    `devices=(MemorySpace.Host,), srcs=(MemorySpace.Device,)` (its
    _device_put_transpose swaps the two and names the operand's Host space
    as the source): the cotangent goes back to the host. The importer
    refused the source (Unsupported where JAX computes, under vmap o grad
    o grad of an offloading checkpoint: found by a pristine campaign,
    547413e987); imported, it is the spec's copy to `pinned_host`."""
    from jax._src import core, dispatch
    from jax._src.interpreters import ad
    from oracle.from_jax import from_jaxpr
    from spec.remat import device_put_p
    if not hasattr(core, "MemorySpace") or not hasattr(dispatch, "ArrayCopySemantics"):
        pytest.skip(f"jax {jax.__version__}'s device_put names no memory spaces")
    host = core.ShapedArray((2,), np.float32, memory_space=core.MemorySpace.Host)

    def transposed(ct):
        return dispatch._device_put_transpose(
            [ct], ad.UndefinedPrimal(host), devices=(core.MemorySpace.Device,), srcs=(None,),
            copy_semantics=(dispatch.ArrayCopySemantics.ALWAYS_COPY,))
    closed = jax.make_jaxpr(transposed)(np.ones(2, np.float32))
    assert [str(s) for s in closed.eqns[0].params["srcs"]] == ["MemorySpace.Device"], closed
    (eqn,) = from_jaxpr(closed).eqns
    assert eqn.primitive is device_put_p and eqn.params == dict(memory_space="pinned_host"), eqn


@pytest.mark.parametrize("saved", [("add", "sin"), ("sub",), (), ("sin",)])
def test_betainc_of_literal_parameters_under_a_policy_saving_arithmetic(saved):
    """JAX's betainc_gradx writes `a + b` and `b - 1` with Python operators:
    numpy folds them for lax.betainc(2.5, 1.5, x), lax binds them for
    jax.scipy.special.betainc(2.5, 1.5, x), one jaxpr: under a policy saving
    `add` the two spellings save different lists (read off JAX below), so
    the residuals are not compared there, and are where the policy does not
    (found by a pristine campaign, a174bd5065)."""
    import jax.scipy.special as jss
    import spec
    from fuzz import properties
    from fuzz.strategies import SavePrimitives
    from spec import ops
    from spec.prims_special import betainc
    x = np.float32([[0.3, 0.6, 0.7], [0.2, 0.5, 0.9]])
    policy = lambda prim, *_, **__: prim.name in saved     # noqa: E731
    lists = [[str(aval) for aval, _ in oracle.jax_api.internals.saved_residuals(
        jax.checkpoint(lambda c: fn(2.5, 1.5, c), policy=policy, prevent_cse=False), x)]
        for fn in (lax.betainc, jss.betainc)]
    assert (lists[0] != lists[1]) is ("add" in saved), lists     # (`b - 1` is not saved either way)
    pol = SavePrimitives(frozenset(saved))
    prog = spec.trace(lambda a: (ops.checkpoint(lambda c: betainc(np.float32(2.5), np.float32(1.5), c), policy=pol,
                                                prevent_cse=False)(a),), spec.f32[2, 3])
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("residuals", "vjp_leaves", "vjp"))
    want = "not compared" if lists[0] != lists[1] else "ok"
    assert report.status("residuals", "remat2") == want, str(report)
    assert report.status("vjp_leaves", "remat2") == want, str(report)
    assert report.status("vjp", "remat2") == "ok", str(report)


JIT_RETURNS = {     # what a jit inside a checkpoint returns -> whether JAX saves its output for sin's input
    "sin and its input": (lambda h: (jnp.sin(h), h), True),
    "its input twice": (lambda h: (jnp.sin(h), h, h), True),
    "its input first": (lambda h: (h, jnp.sin(h)), True),
    "sin only": (lambda h: (jnp.sin(h),), False),
}


@pytest.mark.parametrize("label", sorted(JIT_RETURNS))
def test_a_jit_residual_that_is_its_input_and_its_output_is_the_output(label):
    """Inside a checkpoint, remat2 splits a jit with
    closed_call_partial_eval_custom_rule, which forwards a residual that is
    one of the jit's known outputs before one that is its input: the input
    of sin is saved as the jit's output where the jit also returns it,
    used or not (read off JAX below), named 'a' where it does not (found by
    a pristine campaign, 4bbc9ecb62). remat3 forwards the input."""
    ret, saves_output = JIT_RETURNS[label]
    policy = jax.checkpoint_policies.save_only_these_names("a")

    def body(d):
        return jax.jit(ret)(checkpoint_name(d, "a"))[-1 if label == "its input first" else 0], d
    fn = lambda x: jax.checkpoint(body, policy=policy)(x)[0]    # noqa: E731
    with implementation("remat2"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(fn, np.float32(0.3))]
    report = oracle.check(fn, oracle.AS_IS, np.float32(0.3), properties=("residuals",))
    if jax.__version__ != "0.10.2":     # before, remat of a jit forwarded no input (a versioned divergence)
        assert report.status("residuals", "remat2") in ("ok", "known divergence"), report
        return
    assert [s.startswith("output of jitted function") for s in sources] == [saves_output], sources
    assert report.status("residuals", "remat2") == "ok", report
    if not oracle.jax_api.unavailable("remat3"):
        assert report.status("residuals", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
def test_a_linearized_jit_s_residual_that_is_several_outputs_is_the_last():
    """_pjit_linearize's output-to-output forwarding maps a residual to the
    last primal output it equals (`idx_map = {id(v): i for i, v in
    enumerate(out_vars)}`), and so does closed_call_partial_eval_custom_rule:
    taking the first kept another output of a third-order jit alive, one
    residual fewer than JAX saves (pristine campaign findings 6379f1684c and
    7cce6ba647: jvp o grad o vjp of a jitted dot(a, log1p(a**2)))."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from oracle.spellings import Spelling
    from spec.prims_elementwise import log1p, square
    from spec.prims_structural import dot_general
    prog = spec.trace(lambda a: (dot_general(a, log1p(square(a)), (((0,), (0,)), ((), ()))),), spec.f32[3])
    stack = S.Stack((S.Layer("vjp"), S.Layer("grad"), S.Layer("jvp")))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack,
                                      only=(S.STACK_RESIDUALS,), spelling=Spelling(jit=True))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "ok", str(report)


def test_remat3_saving_for_an_unused_output_inside_a_jit_is_the_class():
    """remat3 saves the input of a checkpoint whose only use is an unused
    output's tangent (remat3-saves-for-unused-checkpoint-outputs); inside a
    jit, the model's variant threads the unused outputs out through the jit,
    where a second checkpoint's forwarded input becomes an output and moves
    ahead in saved_residuals' order: the predicate compares up to order
    there (pristine campaign finding 04eaf2c191; JAX's list read below)."""
    def f(a):
        unused_cos = jax.checkpoint(lambda q, r: (q, jnp.cos(q), q), prevent_cse=False)(a, a)[0]
        scanned = lax.scan(lambda c, _: (c + jnp.sin(c),) * 2, a, None, length=1)[0]
        forwarding = jax.checkpoint(lambda k: (k + jnp.sin(k), k), prevent_cse=False)(a + jnp.sin(a))[0]
        return unused_cos, scanned, forwarding
    report = oracle.check(jax.jit(f), oracle.AS_IS, np.float32(0.4), properties=("residuals",))
    # (before 0.10.2 remat2's own versioned divergences may hold)
    assert report.status("residuals", "remat2") in (("ok",) if jax.__version__ == "0.10.2" else
                                                    ("ok", "known divergence")), report
    if not oracle.jax_api.unavailable("remat3"):
        assert ("remat3-saves-for-unused-checkpoint-outputs", "residuals", "remat3") in report.known_divergences, report


def _scanned_argmax_checkpoint(a):
    def body(c, x):
        sin, index = jax.checkpoint(lambda z: (jnp.sin(z), jnp.argmax(z)))(x)
        return c + sin.sum(), index
    return jax.checkpoint(lambda a: lax.scan(body, np.float32(0), a))(a)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_a_stack_s_grad_leaves_a_scanned_integer_output_unread():
    """A stack's grad differentiates the float outputs only, so a
    checkpoint's scanned integer output, an output of the program, is
    unread there, and remat3 raises its scanned-cotangent error
    (remat3-grad-raises-for-an-unused-scanned-checkpoint-output; read off
    JAX below; pristine campaign finding 0a48bf1b19)."""
    from fuzz import properties
    from oracle import stacks as S
    a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    with implementation("remat3"):
        assert _jax_raises(lambda: jax.grad(lambda a: _scanned_argmax_checkpoint(a)[0])(a),
                           ValueError, "Expected cotangent type")
    prog = trace_jax(_scanned_argmax_checkpoint, a)
    report = properties.oracle_agrees(prog, implementations=("remat3",), stack=S.Stack((S.Layer("grad"),)),
                                      only=(S.STACK,))
    assert ("remat3-grad-raises-for-an-unused-scanned-checkpoint-output", S.STACK, "remat3") in report.known_divergences


def _equinox_checkpoint(rule: str, read: bool):
    """(f, args, JAX's error message) of a checkpoint returning 2a and an
    equinox rule's output, read by f or not: select_if_vmap, or maybe_set
    under jax.vmap (equinox's vprim)."""
    from equinox.internal._loop.common import _maybe_set, select_if_vmap_p
    if rule == "select_if_vmap":
        other, message = select_if_vmap_p.bind, "'Zero' object"
        x = np.float32([1.0, 2.0, 3.0])
        args = (np.float32(1.0), np.bool_(True), x, x * 2)
    else:
        other, message = jax.vmap(lambda p, x, i: _maybe_set(p, jnp.zeros((4, 3)), x, i, kwargs={},
                                                             makes_false_steps=False)), "'NoneType' object"
        args = (np.float32(1.0), np.array([True, True]), np.ones((2, 3), np.float32), np.array([1, 2], np.int32))

    def f(a, *xs):
        doubled, out = jax.checkpoint(lambda a, *xs: (a * 2, other(*xs)))(a, *xs)
        return doubled + jnp.sum(out) if read else doubled
    return f, args, message


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("rule", ["select_if_vmap", "vmapped maybe_set"])
@pytest.mark.parametrize("read", [False, True])
def test_remat3_hands_a_zero_cotangent_to_an_equinox_rule(rule, read):
    """remat3 transposes what only a checkpoint's unread output needs with a
    symbolic zero cotangent, which equinox's select_if_vmap transpose
    rejects (`'Zero' object has no attribute 'shape'`: pristine campaign
    finding 2917f8e612), and which equinox's vprim hands the vmapped
    maybe_set rule as None, which it rejects (`'NoneType' object has no
    attribute 'at'`: pristine nightly finding 8a667a0b1a; the divergence
    was named for a Zero alone). Where the output is read both compute.
    That JAX raises is read off JAX."""
    pytest.importorskip("equinox")
    f, args, message = _equinox_checkpoint(rule, read)
    with implementation("remat3"):
        raises = _jax_raises(lambda: jax.grad(f, argnums=(0, 2))(*args), AttributeError, message)
    assert raises is not read
    report = oracle.check(f, oracle.AS_IS, *args, properties=("vjp",))
    assert report.status("vjp", "remat2") == "ok", report
    assert report.status("vjp", "remat3") == ("ok" if read else "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_pulls_a_zero_cotangent_into_an_equinox_rule_through_an_unread_input():
    """A vmapped maybe_set's output passed to a checkpoint whose body never
    reads it: remat3 pulls a zero cotangent into that input too, which
    equinox's vprim hands the maybe_set rule as None (`'NoneType' object
    has no attribute 'at'`; read off JAX below; pristine nightly finding
    fd902c4b7e). remat2 drops the unread input."""
    pytest.importorskip("equinox")
    from equinox.internal._loop.common import _maybe_set
    write = jax.vmap(lambda p, x, i: _maybe_set(p, jnp.zeros((4, 3)), x, i, kwargs={}, makes_false_steps=False))

    def f(a, p, x, i):
        return jax.checkpoint(lambda w, b: jnp.sin(b), prevent_cse=False)(write(p, x, i), a)
    args = (np.float32(1.0), np.array([True, True]), np.ones((2, 3), np.float32), np.array([1, 2], np.int32))
    with implementation("remat3"):
        assert _jax_raises(lambda: jax.grad(f, argnums=(0, 2))(*args), AttributeError, "'NoneType' object")
    report = oracle.check(f, oracle.AS_IS, *args, properties=("vjp",))
    assert report.status("vjp", "remat2") == "ok", report
    assert report.status("vjp", "remat3") == "known divergence", report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_remat3_names_a_value_saved_through_nested_checkpoints_by_its_producer(depth):
    """remat3 names a value saved out of nested checkpoints by what made it
    (remat3-names-nested-checkpoint-values-by-producer): through two or more
    checkpoints too, where the value is an input the inner ones forward
    (read off JAX below; pristine campaign finding b5c7023ba6)."""
    def make():
        inner = jnp.sin
        for _ in range(depth):
            inner = jax.checkpoint(inner, prevent_cse=False)
        return jax.checkpoint(lambda c: inner(checkpoint_name(c, "a")),
                              policy=jax.checkpoint_policies.save_only_these_names("a"))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(make(), np.float32(0.3))]
    assert [s.startswith("named 'a'") for s in sources] == [True], sources
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, np.float32(0.3), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("reader", ["checkpoint not reading it", "nothing"])
def test_remat3_instantiates_the_tangent_of_an_operand_a_checkpoint_never_reads(reader):
    """remat3 linearizes a checkpoint with every input tangent instantiated,
    so an earlier checkpoint whose output only reaches an operand the later
    body never reads still runs its backward pass whole, and saves what its
    unused output needs (remat3-saves-for-unused-checkpoint-outputs); where
    nothing reads that output, nothing is saved for it (both read off JAX
    below; pristine campaign finding 6a79fea13c)."""
    def f(a, b):
        _, forwarded = jax.checkpoint(lambda g: (g + jnp.sin(g), g), prevent_cse=False)(a)
        out = b
        if reader != "nothing":
            out = jax.checkpoint(lambda m, n: n, prevent_cse=False)(a + forwarded, b)
        return out, a + jnp.sin(a)
    args = (np.float32(0.3), np.ones((2, 3), np.float32))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert any(s.startswith("from the argument") for s in sources) is (reader != "nothing"), sources
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") == ("ok" if reader == "nothing" else "known divergence"), report


@pytest.mark.parametrize("combined", [False, True])
def test_the_save_anything_except_stub_inside_save_from_both_policies(combined):
    """jax 0.10.2's save_anything_except_these_names saves everything
    (save-anything-except-these-names-is-a-stub), combined by
    save_from_both_policies too: the divergence's predicate looks inside
    the combination (pristine campaign finding 091e92e752: a named value a
    while loop carries, saved by JAX, recomputed from the argument by the
    spec)."""
    import spec
    from fuzz import properties
    from fuzz.strategies import SavePrimitives
    from spec import ops
    from spec import policies as sp
    policy = sp.save_anything_except_these_names("a")
    if combined:
        policy = sp.save_from_both_policies(policy, SavePrimitives(frozenset(["sin"]), names=frozenset()))

    def body(c):
        _, carried = ops.while_loop(lambda carry: carry[0] < np.int32(1), lambda carry: carry,
                                    (np.int32(0), ops.checkpoint_name(c, "a")))
        return (carried,)
    prog = spec.trace(lambda a: ops.checkpoint(body, policy=policy, prevent_cse=False)(a), spec.f32[()])
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("residuals",))
    stub = _divergence_active("save-anything-except-these-names-is-a-stub")
    assert report.status("residuals", "remat2") == ("known divergence" if stub else "ok"), str(report)


@pytest.mark.parametrize("other_branch", ["sin", "neg"])
def test_a_jit_s_dead_code_in_a_cond_branch_keeps_its_residual_slot(other_branch):
    """Inside a checkpoint a jit's split is not DCE'd
    (closed_call_partial_eval_custom_rule), so its known half returns what
    only its dead code needs; in a cond branch that residual takes a merged
    slot another branch fills, and stays saved. Where the other branch
    saves nothing, the enclosing DCE prunes it. Both read off JAX below
    (pristine campaign finding 791dc1fea2)."""
    def dead_sin(n):
        jnp.sin(n)
        return jnp.sin(n)
    other = jnp.sin if other_branch == "sin" else jnp.negative
    f = jax.checkpoint(lambda d: lax.cond(jnp.sum(d) > 0, other, jax.jit(dead_sin), d),
                       policy=jax.checkpoint_policies.everything_saveable, prevent_cse=False)
    x = np.float32([0.3, -0.2, 0.5])
    with implementation("remat2"):
        saved = [s for _, s in oracle.jax_api.internals.saved_residuals(f, x) if s.startswith("output of cond")]
    assert len(saved) == (2 if other_branch == "sin" else 1), saved
    report = oracle.check(f, oracle.AS_IS, x, properties=("residuals",), implementations=("remat2",))
    assert report.status("residuals", "remat2") == "ok", report


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="second-order residuals: direct linearization")
@pytest.mark.parametrize("row", [(3,), (3, 2)])
def test_maybe_set_s_transpose_reads_its_row_as_jnp_indexing_does(row):
    """equinox's maybe_set transposes to `ct.at[i].get()`, whose
    dynamic_slice start indices jnp normalises one by one, the other axes'
    zeros too: a grad saves those select_n outputs (pristine campaign
    finding 18c4a0aaf6, where the spec had a literal 0)."""
    pytest.importorskip("equinox")
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec import ops
    from spec.prims_equinox import maybe_set
    buffer = ops.broadcast_in_dim
    prog = spec.trace(lambda a, b, c, d: (maybe_set(b, buffer(np.float32(0), (4,) + row, ()), c, d),),
                      spec.f32[()], spec.bool_[()], spec.f32[row], spec.i32[()])
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((S.Layer("grad"),)),
                                      only=(S.STACK_RESIDUALS, S.STACK))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "ok", str(report)
    assert report.status(S.STACK, "remat2") == "ok", str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("other_returns", ["the constant", "an argument"])
def test_remat3_unused_output_in_a_cond_beside_a_constant_operand(other_returns):
    """remat3 saves a conv's inputs for a checkpoint's unused output in a
    cond branch (remat3-saves-for-unused-checkpoint-outputs; read off JAX
    below). The model threads that output out, the other branch returning
    zeros read from an operand whose tangent is not a symbolic zero: the
    cond's first operand is a constant here (pristine campaign finding
    adaec2e930), whose zeros the cond's linearization would save."""
    def conv(t, u):
        return lax.conv_general_dilated(t, u, (1, 1), "VALID")

    def branch(m, n, o, p):
        return jax.checkpoint(lambda s, t, u: (s, conv(t, u)), policy=jax.checkpoint_policies.dots_saveable,
                              prevent_cse=False)(n, o, p)[0]

    def f(b, c, d):
        other = (lambda m, n, o, p: m) if other_returns == "the constant" else (lambda m, n, o, p: n)
        return lax.cond(jnp.sum(b) > 0, branch, other, np.float32([0.5, 0.75, 1.0]), b, c, d)
    args = (np.float32([0.1, 0.2, 0.3]), np.ones((2, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32))
    with implementation("remat3"):
        saved = [str(a) for a, _ in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert "float32[2,3,5,5]" in saved and "float32[4,3,3,3]" in saved, saved
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert ("remat3-saves-for-unused-checkpoint-outputs", "residuals", "remat3") in report.known_divergences, report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_differentiates_an_operand_a_checkpoint_never_reads_under_a_stack():
    """remat3 instantiates the tangent of igamma's output passed to a
    checkpoint that never reads it, so linearize o grad differentiates
    igamma_grad_a, which has no derivative; remat2 and the spec compute
    (JAX's answers: remat2's agrees, remat3 raises, the only error the
    divergence's predicate accepts). The predicate builds the stack's own
    spec program of the remat3 model (pristine campaign finding
    ed68629a1a)."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from oracle.spellings import Spelling
    from spec import ops
    from spec.prims_special import igamma
    prog = spec.trace(lambda a, b, c: (ops.checkpoint(lambda g, h: (g,), prevent_cse=False)(a, igamma(b, c))[0],
                                       ops.sin(a)), spec.f32[()], spec.f32[2, 3], spec.f32[2, 3])
    report = properties.oracle_agrees(prog, stack=S.Stack((S.Layer("grad"), S.Layer("linearize"))), only=(S.STACK,),
                                      spelling=Spelling(jit=True))
    assert report.status(S.STACK, "remat2") == "ok", str(report)
    assert ("remat3-differentiates-a-checkpoint-s-constants", S.STACK, "remat3") in report.known_divergences


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("ys_read_by", ["a cond's index", "sin"])
def test_a_scanned_checkpoint_output_only_a_cond_index_reads_has_no_tangent_read(ys_read_by):
    """A checkpoint's scanned output that only decides a cond's index has
    no tangent anything reads, so remat3 raises its scanned-cotangent error
    (remat3-grad-raises-for-an-unused-scanned-checkpoint-output), as for an
    unread output; read by sin, it differentiates (both read off JAX below;
    pristine campaign finding 6876483497)."""
    def f(a):
        ys, carry = jax.checkpoint(lambda d: lax.scan(lambda g, _: (2 * g, g), d, None, length=1)[::-1],
                                   prevent_cse=False)(a)
        if ys_read_by == "sin":
            return jnp.sin(ys).sum(), carry
        return lax.cond(jnp.sum(ys) > 0, lambda x: x, lambda x: x, a), carry

    def backward(a):
        outs, pullback = jax.vjp(f, a)
        return pullback(tuple(jnp.ones_like(o) for o in outs))
    with implementation("remat3"):
        raises = _jax_raises(lambda: jax.jit(backward).lower(np.float32(0.5)), ValueError, "Expected cotangent type")
    assert raises is (ys_read_by != "sin")
    report = oracle.check(f, oracle.AS_IS, np.float32(0.5), properties=("vjp",))
    assert report.status("vjp", "remat2") == "ok", report
    assert report.status("vjp", "remat3") == ("ok" if ys_read_by == "sin" else "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("operands", ["constants first", "argument first", "closed over"])
def test_remat3_s_linearized_checkpoint_reads_its_constant_operands_in_operand_order(operands):
    """remat3's linearized checkpoint takes its operands, constants too,
    before its residuals, in operand order, which is the order a jit
    around it returns them (read off JAX below: jit of jit, where every
    saved value is the outer jit's output; pristine campaign finding
    143be815af)."""
    c1 = np.float32([[0.5, 0.75, 1.0]])
    c2 = np.float32([[0.5, 0.75, 1.0], [1.25, 1.5, 1.75]])
    ck = {"constants first": lambda x: jax.checkpoint(lambda a, b, v: b * (a + v), prevent_cse=False)(c1, c2, x),
          "argument first": lambda x: jax.checkpoint(lambda v, a, b: b * (a + v), prevent_cse=False)(x, c1, c2),
          "closed over": lambda x: jax.checkpoint(lambda v: c2 * (c1 + v), prevent_cse=False)(x)}[operands]
    f = jax.jit(lambda x: jax.jit(ck)(x + 1))
    x = np.ones((2, 3), np.float32)
    with implementation("remat3"):
        shapes = [a.shape for a, _ in oracle.jax_api.internals.saved_residuals(f, x)]
    assert shapes == ([(2, 3), (1, 3), (2, 3)] if operands == "argument first" else [(1, 3), (2, 3), (2, 3)]), shapes
    report = oracle.check(f, oracle.AS_IS, x, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") == "known divergence", report


@pytest.mark.parametrize("length", [1, 3])
def test_a_cond_s_saved_zero_in_a_scan_body_is_stacked(length):
    """A cond branch's linearization saves the zero pad's JVP instantiated
    for its padding value (cond-linearize-saves-an-instantiated-zero); in a
    scan body the scan stacks it, one per iteration (read off JAX below:
    a [length] output of scan the spec does not save; pristine campaign
    finding 7194b3833c)."""
    def f(a):
        def body(c, _):
            return lax.cond(jnp.sum(c) > 0, lambda x: lax.pad(x, np.float32(0.5), ((0, 0, 0),)), lambda x: x, c), None
        return lax.scan(body, a, None, length=length)[0]
    a = np.float32([0.3, 0.2, 0.1])
    with implementation("remat2"):
        shapes = [a.shape for a, s in oracle.jax_api.internals.saved_residuals(f, a) if s.startswith("output of scan")]
    assert (length,) in shapes, shapes
    report = oracle.check(f, oracle.AS_IS, a, properties=("residuals",), implementations=("remat2",))
    if jax.__version__ != "0.10.2":     # (older releases: other versioned divergences may name it)
        assert report.status("residuals", "remat2") in ("ok", "known divergence"), report
        return
    assert ("cond-linearize-saves-an-instantiated-zero", "residuals", "remat2") in report.known_divergences, report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("cond_outputs", ["a checkpoint's bool", "a checkpoint's bool beside a float",
                                          "a comparison's bool beside a float"])
def test_remat3_recomputes_the_index_of_a_cond_a_float0_tangent_reaches(cond_outputs):
    """remat3 runs the backward pass of a checkpoint whose non-float output
    is live (remat3-non-float-checkpoint-output-keeps-its-tangents-live),
    and of a cond in it that such a tangent reaches from a nested
    checkpoint, which reads the cond's index: the checkpoint saves what
    recomputes it, whether the cond has float outputs or not; a comparison's
    bool has a symbolic zero tangent, and nothing is saved for it (read off
    JAX below; pristine campaign findings 62409626bb, 99399c0536)."""
    compare = (lambda b, c: b <= c) if "comparison" in cond_outputs else \
        (lambda b, c: jax.checkpoint(lambda o, p: o <= p)(b, c))

    def body(a, b, c):
        index = jnp.sum(a) > 0
        if "beside" not in cond_outputs:
            return lax.cond(index, compare, lambda b, c: jnp.zeros(b.shape, bool), b, c)
        _, bools = lax.cond(index, lambda b, c: (b * 2, compare(b, c)), lambda b, c: (b, jnp.zeros(b.shape, bool)),
                            b, c)
        return jnp.sin(b), bools

    def f(a, b, c):
        return jax.checkpoint(body, policy=jax.checkpoint_policies.save_any_names_but_these("c"),
                              prevent_cse=False)(a, b, c)
    args = (np.float32([0.1, 0.2, 0.3]), np.ones((4, 5), np.float32), np.zeros((4, 5), np.float32))
    saves_index = "comparison" not in cond_outputs
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert any(s.startswith("from the argument a") for s in sources) is saves_index, sources
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") == ("known divergence" if saves_index else "ok"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("use", ["forwarded", "an index"])
def test_remat3_saves_no_integer_input_a_grandchild_only_forwards(use):
    """remat3 reads every input of an opaque grandchild checkpoint whose
    primal output the linearization needs, but not one the grandchild only
    returns as it is; one it reads as an index is saved by remat2 too (both
    read off JAX below; pristine campaign finding 1191f46a4f, where the
    model saved a forwarded integer)."""
    def grandchild(u, v):
        y = jnp.sin(jnp.broadcast_to(u.reshape(2, 1), (2, 2)))
        return (lax.dynamic_slice(y, (v[0], 0), (1, 2)) if use == "an index" else y), v
    child = lambda q, r: jax.checkpoint(grandchild)(q, r)        # noqa: E731

    def body(l, m, n):
        o, p = jax.checkpoint(child)(l, m)
        return lax.scan(lambda c, _: (c * 2, None), o, None, length=2)[0], p
    f = lambda a, b, c: jax.checkpoint(body)(lax.stop_gradient(a), b, c)[::-1]     # noqa: E731
    args = (np.float32([0.1, 0.2]), np.arange(6, dtype=np.int32), np.ones(6, np.float32))
    with implementation("remat3"):
        dtypes = [str(a.dtype) for a, _ in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert ("int32" in dtypes) is (use == "an index"), dtypes
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") == "known divergence", report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("dtype", [np.bool_, np.int32])
@pytest.mark.parametrize("grandchild", ["identity", "sin beside"])
@pytest.mark.parametrize("consumer", ["sin", "a scan of 2 * c"])
def test_remat3_reads_a_grandchild_s_inputs_where_a_primal_of_it_is_needed(consumer, grandchild, dtype):
    """Three nested checkpoints, the innermost returning its float input (or
    its sin) beside a non-float one it forwards: remat3 saves the non-float
    one where the outermost linearization needs the float's primal (sin of
    it), not where its tangent reads no primal (a scan of 2 * c), whichever
    the grandchild forwards (read off JAX below). The model coloured every
    input of a JVP'd scan as needed whenever one output was a tangent (and
    made up for it by exempting forwarded non-floats: pristine campaign
    finding 2546d7b751 then, a bool forwarded by an identity checkpoint)."""
    def f(a, b):
        g = jax.checkpoint((lambda m, n: (m, n)) if grandchild == "identity" else (lambda m, n: (jnp.sin(m), n)))
        k = jax.checkpoint(lambda i, j: g(i, j))

        def body(e, f_):
            x, n = k(e, f_)
            y = jnp.sin(x) if consumer == "sin" else lax.scan(lambda c, _: (2 * c, None), x, None, length=2)[0]
            return y, n
        return jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"))(a, b)
    args = (np.float32([0.1, 0.2]), np.ones((2, 3), dtype))
    with implementation("remat3"):
        saved = [str(a.dtype) for a, _ in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert (np.dtype(dtype).name in saved) is (consumer == "sin"), saved
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    if consumer == "sin":
        assert [n for n, _, _ in report.known_divergences] == \
            ["remat3-reads-every-input-of-an-opaque-grandchild-checkpoint"], report
    else:
        assert report.status("residuals", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_reads_every_input_of_an_opaque_grandchild_but_those_it_forwards():
    """A grandchild checkpoint returning its first input twice beside a
    comparison of two others, its remaining inputs ignored: remat3 saves
    every input of it the linearization reaches, the integer one it ignores
    too (read off JAX below), but not through the outputs it forwards
    (remat3-reads-every-input-of-an-opaque-grandchild-checkpoint; pristine
    campaign finding d476af5467, which the model missed while it counted a
    forwarded input as read)."""
    policy = jax.checkpoint_policies.save_from_both_policies(
        lambda prim, *_, **__: prim.name == "sin", jax.checkpoint_policies.dots_with_no_batch_dims_saveable)

    def mid(u, v, w, x, y, z, aa):
        ab, _, ad = jax.checkpoint(lambda ae, af, ag, ah, ai, aj: (ae, ae, ai != aj), policy=policy,
                                   prevent_cse=False)(u, w, x, y, z, aa)
        return ab[:1], u, ad

    def outer(k, l, m, n, o, p, q):
        r, _, t = jax.checkpoint(mid, prevent_cse=False)(k, k, m, n, o, p, q)
        return jnp.log(jnp.square(r) + 1), k, t

    def f(a, c, d, e, f_, g):
        h, _, j = jax.checkpoint(outer, prevent_cse=False)(a, a, c, d, e, f_, g)
        return h, j
    args = (np.float32([0.1, 0.2, 0.3]), np.ones((5, 3), np.float32), np.zeros((6, 1), np.int32),
            np.ones((6, 3), np.float32), np.ones((4, 5), np.float32), np.zeros((4, 5), np.float32))
    with implementation("remat3"):
        saved = [str(a.dtype) for a, _ in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert len(saved) == len(args) and "int32" in saved, saved
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert ("remat3-reads-every-input-of-an-opaque-grandchild-checkpoint", "residuals", "remat3") in \
        report.known_divergences, report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_names_a_value_an_identity_checkpoint_returns_by_its_producer():
    """remat3 saves for a checkpoint's unused output (remat3-saves-for-
    unused-checkpoint-outputs) the value a nested identity checkpoint
    returns, named by what made it, `named 'a'` (read off JAX below), not
    as the nested checkpoint's output (pristine campaign finding
    c8af8a5faa)."""
    def body(e, f):
        g = checkpoint_name(e, "a")
        h = jax.checkpoint(lambda i: i, policy=jax.checkpoint_policies.save_only_these_names("a", "b"),
                           prevent_cse=False)(g)
        return g, h * h

    def fn(a):
        named, _ = jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"),
                                  prevent_cse=False)(a, a)
        return named, jnp.sin(a)
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(fn, np.float32(0.3))]
    assert any(s.startswith("named 'a'") for s in sources), sources
    report = oracle.check(fn, oracle.AS_IS, np.float32(0.3), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert report.status("residuals", "remat3") == "known divergence", report


def test_the_save_anything_except_stub_composes_with_a_jit_s_saved_zero():
    """In a jit, a pad's linearization saves the zero its JVP instantiated
    (jit-linearize-saves-an-instantiated-zero) beside a checkpoint whose
    save_anything_except_these_names policy jax 0.10.2 stubs
    (save-anything-except-these-names-is-a-stub): the additive divergence is
    measured against the stubbed list too (pristine campaign finding
    05909e1ead)."""
    import spec
    from fuzz import properties
    from oracle.spellings import Spelling
    from spec import ops
    from spec import policies as sp

    def f(a):
        c = ops.checkpoint(lambda d: (ops.mul(ops.checkpoint_name(d, "a"), ops.checkpoint_name(d, "a")),),
                           policy=sp.save_anything_except_these_names("a"), prevent_cse=False)(a)
        return c[0] if isinstance(c, (list, tuple)) else c, ops.pad(a, np.float32(0.5), ((0, 0, 0),) * 3)
    prog = spec.trace(f, spec.f32[2, 2, 3])
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("residuals",),
                                      spelling=Spelling(jit=True))
    stub = _divergence_active("save-anything-except-these-names-is-a-stub")
    assert report.status("residuals", "remat2") == ("known divergence" if stub else "ok"), str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("primal", ["sin", "identity"])
def test_remat3_names_a_custom_call_s_output_by_its_primal_run_inline(primal):
    """remat3's forward pass runs a custom_vjp call inside a checkpoint as
    its primal function, inline (RematTrace.process_custom_vjp_call), so
    the checkpoint's output, saved by a product outside, is named by the
    primal's own equation (`output of sin`, or the argument it returns),
    read off JAX below; under save_from_both_policies of two offload
    policies, which the spec refuses and remat3 does not ask (pristine
    nightly finding ab97f5437e)."""
    fn = {"sin": jnp.sin, "identity": lambda x: x}[primal]
    custom = jax.custom_vjp(fn)
    custom.defvjp(lambda x: (fn(x), jnp.cos(x)), lambda c, g: (c * g,))
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(
        cp.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
                                             offload_src="device", offload_dst="pinned_host"),
        cp.offload_dot_with_no_batch_dims("device", "pinned_host"))

    def f(x):
        return x * jax.checkpoint(lambda y: custom(jnp.cos(y)), policy=policy)(x)
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, np.float32(0.7))]
    assert sources[-1].startswith({"sin": "output of sin", "identity": "output of cos"}[primal]), sources
    report = oracle.check(f, oracle.AS_IS, np.float32(0.7), properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") == "known divergence", report


def _erfc_tie_program(a, c):
    """The pristine nightly finding cf0ec56a2c: a checkpoint of a jit
    computing erfc, its result duplicated and reduced by max (a tie at every
    index)."""
    def body(a, c):
        e = jax.jit(lambda a, c: (lax.erfc(c), a))(a, c)[0]
        return lax.sin(a), e
    d, e = jax.checkpoint(body, prevent_cse=False)(a, c)
    return jnp.max(lax.transpose(lax.broadcast_in_dim(e, (2, 4), (1,)), (1, 0)), axis=1), d


def test_a_disagreement_under_the_fast_cpu_options_is_confirmed_under_xla_s_defaults():
    """The oracle compiles its check functions with fast XLA:CPU options
    (oracle.jax_api.cpu_compiler_options), whose code is not bit-exact with
    XLA's default: there erfc, fused into the reduce_max and into the
    comparison its JVP makes with the maximum, rounds differently in each,
    the tie mask matches nothing and the linear function of jax.linearize
    returns 0/0 = NaN. A disagreement seen so is checked again under XLA's
    defaults, where JAX is right, before it is reported."""
    from oracle.stacks import Layer, Stack, stack_property
    args = (np.float32(-1.1369617), np.array([-0.5356694, 0.36159506, 1.304, 0.94708097], np.float32))
    prog = trace_jax(_erfc_tie_program, *args)
    stack = Stack((Layer("linearize"),))
    report = oracle.check(_erfc_tie_program, oracle.AS_IS, *args, properties=(stack_property(stack, prog),),
                          implementations=("remat2",))
    assert report.status("stack", "remat2") == "ok", report
    # under XLA's defaults, jax.linearize's linear function has no NaN
    tangents = (np.float32(0.3), np.array([-0.27, -0.89, -0.45, -0.99], np.float32))

    def linearized_then_called(*a):
        _, f_lin = jax.linearize(_erfc_tie_program, *a[:2])
        return f_lin(*a[2:])
    run = lambda opts: jax.jit(linearized_then_called).lower(*args, *tangents).compile(  # noqa: E731
        compiler_options=opts)(*args, *tangents)[0]
    assert not np.isnan(np.asarray(run({}))).any()


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_transposes_a_pad_of_a_checkpoint_s_zero_tangent_output():
    """A pad of a checkpoint's stop_gradient'ed output, differentiated for
    its padding value: remat3 marks the checkpoint's output tangent nonzero,
    so pad's transpose runs for both operands and JAX computes (read off
    JAX below), where the spec refuses the padding value alone and remat2
    raises (pristine nightly finding 1201bbdba3)."""
    def f(a, b):
        c = jax.checkpoint(lambda d: lax.stop_gradient(d).max(0), prevent_cse=False)(b)
        return lax.pad(c, a, ((0, 0, 0),))
    args = (np.float32(0.5), np.arange(12, dtype=np.float32).reshape(3, 4))
    with implementation("remat3"):
        grad_a, grad_b = jax.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(*args)
    assert grad_a == 0.0 and not grad_b.any()
    report = oracle.check(f, oracle.AS_IS, *args, properties=("vjp", "prevent_cse"), implementations=("remat3",))
    assert ("remat3-perturbs-checkpoint-outputs-the-spec-holds-zero", "vjp", "remat3") in report.known_divergences


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_a_user_policy_is_asked_with_the_primitive_of_the_implementation_in_force():
    """A user's JAX policy is asked with JAX's primitive for the equation
    (oracle.policies.jax_view, cached): checkpoint_name traces to a
    call_hi_primitive under jax_remat3 and to name_p under remat2, so the
    cache is keyed on the flags; keyed on the equation alone, a view traced
    under remat3 (a divergence predicate of one program) was what the next
    program's remat2 side asked its policy with (in-process state that
    made campaign findings not replay in a fresh interpreter)."""
    import spec
    from oracle.policies import JaxCallablePolicy
    asked = []
    policy = JaxCallablePolicy(lambda prim, *avals, **params: asked.append(prim.name) or False)
    for impl in ("remat3", "remat2", "remat3"):
        with implementation(impl):
            policy(spec.core.primitives["name"], spec.f32[()], name="a")
    assert asked == ["call_hi_primitive", "name", "call_hi_primitive"]


@pytest.mark.skipif(_without_direct_linearization() is not None, reason="direct linearization: equation by equation")
def test_a_policy_raising_comes_before_a_later_equation_without_a_derivative():
    """JAX's direct linearization linearizes the equations in order, each
    one's JVP partially evaluated before the next one's JVP runs: a
    checkpoint whose policy raises when asked (save_from_both_policies of
    an offload policy) raises before a later igamma_grad_a's missing
    derivative does (the spec differentiated the whole program first:
    pristine campaign finding 084625a3cb, under grad o jvp)."""
    cp = jax.checkpoint_policies

    def f(a, b, c):
        policy = cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
                                            cp.save_only_these_names("a"))
        return jax.checkpoint(jnp.sin, policy=policy)(a) + jnp.sum(lax.igamma_grad_a(b, c))
    args = (np.float32(0.3), np.full((2,), 1.5, np.float32), np.full((2,), 0.7, np.float32))
    with pytest.raises(ValueError, match="policies should be a boolean"):
        jax.grad(f, argnums=(0, 1, 2))(*args)
    report = oracle.check(f, oracle.AS_IS, *args, properties=("vjp", "residuals"), implementations=("remat2",))
    for prop in ("vjp", "residuals"):
        assert report.status(prop, "remat2") == "not applicable", report


@pytest.mark.parametrize("where", ["jit", "cond", "scan"])
def test_a_policy_raising_in_a_sub_program_comes_before_a_later_missing_derivative(where):
    """Direct linearization linearizes a jit's body, a cond's branches and
    a scan's body equation by equation too (pjit's, cond's and scan's
    linearize rules: ad.linearize_jaxpr), so the checkpoint's policy raises
    first there as well (the spec differentiated the sub-program whole
    first: pristine campaign finding 17239663d5, in a jit under linearize o
    vmap o jvp). Without direct linearization the sub-program's JVP runs
    whole first and the missing derivative raises: a known divergence, JAX's
    error read live on each release."""
    cp = jax.checkpoint_policies

    def inner(a, b, c):
        policy = cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
                                            cp.save_only_these_names("a"))
        return jax.checkpoint(jnp.sin, policy=policy)(a) + jnp.sum(lax.igamma_grad_a(b, c))
    f = {"jit": jax.jit(inner),
         "cond": lambda a, b, c: lax.cond(a > 0, inner, lambda a, b, c: a, a, b, c),
         "scan": lambda a, b, c: lax.scan(lambda k, _: (inner(k, b, c), None), a, None, length=2)[0]}[where]
    args = (np.float32(0.3), np.full((2,), 1.5, np.float32), np.full((2,), 0.7, np.float32))
    direct = _without_direct_linearization() is None
    with pytest.raises(ValueError if direct else NotImplementedError,
                       match="policies should be a boolean" if direct else "igamma_grad_a"):
        jax.grad(f, argnums=(0, 1, 2))(*args)
    report = oracle.check(f, oracle.AS_IS, *args, properties=("vjp", "residuals"), implementations=("remat2",))
    for prop in ("vjp", "residuals"):
        assert report.status(prop, "remat2") == ("not applicable" if direct else "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("body", ["inner identity", "sin then inner identity", "inner sin"])
def test_remat3_names_a_checkpoint_output_a_nested_checkpoint_returns_by_its_hi_primitive(body):
    """A checkpoint's output that a nested checkpoint returns, read outside
    (by a product): remat3's forward binds the nested checkpoint as written,
    so the saved value is its hi-primitive's output even where the nested
    body is the identity (read off JAX below); only where a checkpoint's
    own backward pass reads it is it recomputed from what the policy saved
    (c8af8a5faa). Pristine nightly finding 741433da06."""
    inner = {"inner identity": lambda c: jax.checkpoint(lambda e: e)(c),
             "sin then inner identity": lambda c: jax.checkpoint(lambda e: e)(jnp.sin(c)),
             "inner sin": lambda c: jax.checkpoint(jnp.sin)(c)}[body]

    def f(a):
        return a * jax.checkpoint(inner, prevent_cse=False)(a)
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, np.float32(0.3))]
    assert sources[-1].startswith("output of call_hi_primitive"), sources
    report = oracle.check(f, oracle.AS_IS, np.float32(0.3), properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("inner_checkpoint", [True, False])
def test_remat3_s_checkpoint_in_a_scan_body_takes_the_tangent_of_an_element_it_never_reads(inner_checkpoint):
    """A checkpoint (sin d, d) whose second output a scan takes as xs, its
    body's checkpoint reading the element but not using it: remat3's
    checkpoint takes every input's tangent, so the scan reads the xs
    tangent, the outer checkpoint's backward pass is live and runs whole,
    saving what its unused sin output's tangent needs (read off JAX below);
    without the inner checkpoint nothing is saved. Pristine nightly finding
    aa3e22028c."""
    def f(a):
        _, c = jax.checkpoint(lambda d: (jnp.sin(d), d), prevent_cse=False)(a)

        def body(i, j):
            k = jax.checkpoint(lambda l, m: l, prevent_cse=False)(i, j) if inner_checkpoint else i
            return k, k
        return lax.scan(body, a, c, length=3)[0]
    a = np.ones(3, np.float32)
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert len(sources) == (1 if inner_checkpoint else 0), sources
    report = oracle.check(f, oracle.AS_IS, a, properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("printed", ["an input", "sin of an input", "a constant"])
@pytest.mark.parametrize("output", ["floor", "linear"])
def test_remat3_s_backward_pass_replays_a_print_of_an_input_behind_a_barrier(printed, output):
    """A checkpoint printing (a function of) an input: remat3's backward
    pass, which a cotangent reaches whatever the output's derivative
    (floor's is zero), replays the print and so reads that input, behind
    an optimization barrier (counted in JAX's HLO below; none for a printed
    constant). Pristine nightly finding 8ef5d41d3e."""
    def body(d, e):
        shown = {"an input": d, "sin of an input": jnp.sin(d), "a constant": jnp.float32(1.0)}[printed]
        jax.debug.print("x={x}", x=shown)
        return jnp.floor(e) if output == "floor" else e * 2.0

    def f(a, b):
        return jax.checkpoint(body, prevent_cse=(False, False))(a, b)
    args = (np.ones((2, 3), np.float32), np.ones(6, np.float32))
    with implementation("remat3"):
        hlo = jax.jit(jax.grad(lambda a, b: jnp.sum(f(a, b)), argnums=(0, 1))).lower(*args).as_text()
    assert (hlo.count("optimization_barrier") > 0) == (printed != "a constant"), hlo
    report = oracle.check(f, oracle.AS_IS, *args, properties=("prevent_cse",), implementations=("remat3",))
    assert report.status("prevent_cse", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_transposes_what_computes_a_nested_checkpoint_s_unused_output():
    """A nested checkpoint returning its input (used) and a dilated
    max-pooling of another (unused): remat3's backward pass of it runs
    whole, transposing the pooling, which JAX has no rule for with window
    dilation (NotImplementedError, read off JAX below); the spec and remat2
    compute the gradient. Pristine nightly finding 8cc0be00a1."""
    def inner(s, u):
        pooled = lax.reduce_window(u, -jnp.inf, lax.max, (2, 2), (1, 2), "VALID", window_dilation=(1, 2))
        return pooled, s

    def f(m, o):
        return jax.checkpoint(lambda m, o: jax.checkpoint(inner)(m, o)[1] * 2.0)(m, o)
    args = (np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    with implementation("remat3"), pytest.raises(NotImplementedError, match="window dilation"):
        jax.grad(lambda m, o: jnp.sum(f(m, o)), argnums=(0, 1))(*args)
    report = oracle.check(f, oracle.AS_IS, *args, properties=("vjp",), implementations=("remat3",))
    assert ("remat3-pulls-cotangents-into-undifferentiated-checkpoint-inputs", "vjp", "remat3") in \
        report.known_divergences, report


def test_select_n_s_jvp_takes_a_constant_tangent():
    """integer_pow's JVP for y == 0 is a constant zero array (`_zeros(g)`,
    no equation), and select_n's JVP read `.type` off its first nonzero case
    tangent: an AttributeError inside the spec (pristine nightly finding
    098609ce6a, a select of x ** 0 and x in a checkpoint under grad). The
    derivative of select(x > 0, x ** 0, x) is 0 where x > 0, else 1."""
    import spec
    from spec import ops
    prog = spec.trace(lambda x: ops.select_n(ops.gt(x, np.float32(0.0)), ops.integer_pow(x, 0), x), spec.f32[()])
    for x, want in ((-1.0, 0.0), (0.5, 1.0)):
        _, tangent = spec.evaluate(spec.jvp(prog), np.float32(x), np.float32(1.0))
        assert tangent == want


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_threads_a_cond_branch_s_unused_checkpoint_output_without_new_residuals():
    """A cond whose branch 0 holds a checkpoint with an unused conv output
    (remat3 saves its operands, out of the cond, read off JAX below) and
    whose branch 1 passes an operand on; sin(a), an operand neither branch
    reads, is passed too. The model threads the unused output out of the
    cond, branch 1 returning zeros read linearly from an input: one the
    branch reads itself, not sin(a), whose tangent would need cos(a) saved
    (pristine nightly finding 05f0d47a5d)."""
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("a", "b", "c"))

    def f(a, b, c):
        def branch0(s, t, u, v):
            out, _ = jax.checkpoint(lambda o, p, q: (o, lax.conv(p, q, (1, 1), "VALID")), policy=policy)(t, u, v)
            return out
        return lax.switch((a > 0).astype(jnp.int32), [branch0, lambda s, t, u, v: t], jnp.sin(a), a, b, c)
    args = (np.float32(0.7), np.ones((2, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert sum(s.startswith("output of cond") for s in sources) == 2 and not any("cos" in s for s in sources), sources
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") == "known divergence", report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_names_a_named_value_without_tangent_by_its_name():
    """A checkpoint returning the name of a stop_gradient'ed input, read
    outside: remat3 saves it `named 'c'` (read off JAX below); the model
    computes it through its primal_left_tangent_right, bound whole where
    nothing has a tangent, whose output is the saved operand (pristine
    nightly finding 1d125142a8, under an offload save_from_both policy)."""
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(
        cp.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
                                             offload_src="device", offload_dst="pinned_host"),
        cp.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["c"],
                                             offload_src="device", offload_dst="pinned_host"))

    def f(a):
        b = jax.checkpoint(lambda c: checkpoint_name(lax.stop_gradient(c), "c"), policy=policy,
                           prevent_cse=False)(a)
        return b * b * a
    a = np.ones(4, np.float32)
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert any(s.startswith("named 'c'") for s in sources), sources
    report = oracle.check(f, oracle.AS_IS, a, properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") == "known divergence", report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("in_a_jit", [True, False])
def test_remat3_drops_an_output_less_printing_checkpoint_in_a_jit_when_rematerializing(in_a_jit):
    """A checkpoint whose body prints its input and returns nothing, in a
    checkpoint: in a jit there, remat3's rematerialization (the jit's body
    traced with auto_dce) drops it, the hi-primitive having no effect of its
    own, so the input is not saved and grad prints once; written in the
    outer body itself it is replayed (read off JAX below). Pristine nightly
    finding a747b6cca7."""
    def f(a, b):
        def body(d, e):
            def inner(x):
                jax.checkpoint(lambda g: jax.debug.print("x={x}", x=g))(x)
                return ()
            (jax.jit(inner) if in_a_jit else inner)(e)
            return jnp.sin(d)
        return jax.checkpoint(body)(a, b)
    args = (np.float32(0.3), np.ones((2, 3), np.float32))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert len(sources) == (1 if in_a_jit else 2), sources
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), report


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_saves_what_a_jit_forwards_past_a_custom_call_by_its_name():
    """A checkpoint (saving names 'a') whose jit applies a custom_jvp sin to
    the named value and also returns it: remat3 runs the custom call inline,
    so what its derivative needs is the jit's forwarded input, saved as
    `named 'a'` (read off JAX below); the model's custom-call wrapper made
    the jit return it as an output of its own (pristine nightly finding
    5d9f5eff73)."""
    sin = jax.custom_jvp(jnp.sin)
    sin.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0]))

    def f(a, b):
        def body(d, e):
            g, _ = jax.jit(lambda i: (sin(i), i))(checkpoint_name(d, "a"))
            return g
        return jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"),
                              prevent_cse=False)(a, b)
    args = (np.float32(0.4), np.float32(0.4))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert [s.split(" from ")[0] for s in sources] == ["named 'a'"], sources
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",), implementations=("remat3",))
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), report



@pytest.mark.skipif(_without_direct_linearization() is not None, reason="the generic reduce_window's JVP: jax 0.4.36 on")
def test_a_dead_generic_reduce_window_under_a_stack_still_names_its_jvp_bug():
    """A checkpoint whose generic reduce_window is dead code, under grad o
    jvp o jvp: JAX still differentiates it and its JVP rule meets a
    symbolic zero (generic-reduce-window-jvp-fails-on-a-symbolic-zero-
    tangent), while the stack level's spec program has dropped it: the
    predicate reads the checked function's program (pristine nightly
    finding f0141b7324)."""
    from oracle.stacks import Layer, Stack, stack_residuals_property

    def f(a, b, c, d):
        def body(g, h, i):
            lax.reduce_window(i, 1.0, lambda l, m: l, (1, 3), (1, 1), "VALID")
            return jnp.sin(g), g
        return jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"),
                              prevent_cse=False)(a, a, d)[0]
    args = (np.float32(0.3), np.float32(0.5), np.float32(0.7), np.ones((2, 5), np.float32))
    stack = Stack((Layer("jvp"), Layer("jvp"), Layer("grad", argnums=(3,))))
    prop = stack_residuals_property(stack, trace_jax(f, *args))
    report = oracle.check(f, oracle.AS_IS, *args, properties=(prop,), implementations=("remat2",))
    assert report.status("stack_residuals", "remat2") == "known divergence", report


@pytest.mark.skipif(oracle.jax_api.unavailable("remat3") is not None, reason="remat3 is jax 0.10.2's")
def test_remat3_s_refused_policy_meets_a_value_named_by_its_checkpoint_s_own_equation():
    """A save_from_both_policies of an offload policy, which the spec (as
    remat2) refuses and remat3, not recognising it, never asks (full
    remat), reading a checkpoint's cummax: remat3 names that value by the
    body's own equation (`output of cummax`), remat2 and the spec by the
    JVP rule's primal half (`output of add`). The modelled list was
    compared with JAX's unrenamed (pristine nightly finding b673803d3a).
    JAX's names are read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    both = jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=["b"],
            offload_src="device", offload_dst="pinned_host"),
        jax.checkpoint_policies.save_only_these_names("b"))

    def f(x):
        v = jax.checkpoint(lambda v: lax.cummax(v, axis=0),
                           policy=jax.checkpoint_policies.save_only_these_names("a"))(x)
        return jax.checkpoint(lambda v: v + jnp.sin(v), policy=both)(v)
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    with implementation("remat3"):
        names = [s.split(" from ")[0] for _, s in saved_residuals(f, x)]
    assert names[-1] == "output of cummax", names
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat3",), properties=("residuals",))
    assert report.status("residuals", "remat3") == "known divergence", str(report)


_PRINTED_NAME_POLICIES = {     # label -> (policy, whether remat3 saves the printed name y)
    "nothing_saveable": (jax.checkpoint_policies.nothing_saveable, False),
    "everything_saveable": (jax.checkpoint_policies.everything_saveable, True),
    "save_any_names_but_these z": (jax.checkpoint_policies.save_any_names_but_these("z"), True),
    "save_only_these_names y": (jax.checkpoint_policies.save_only_these_names("y"), True),
    "save_only_these_names z": (jax.checkpoint_policies.save_only_these_names("z"), False),
}


@pytest.mark.parametrize("label", sorted(_PRINTED_NAME_POLICIES))
def test_remat3_replays_a_print_of_a_saved_name_without_a_barrier(label, capsys):
    """remat3's backward pass replays a checkpoint's print; where the printed
    value is a name its policy saves, the replay reads that residual, not
    the checkpoint's input, and there is no barrier (jax's
    debugging_primitives_test test_remat_of_debug_print: the barrier model
    counted any print reading a value computed from an input). Whether
    JAX's HLO has a barrier is read off JAX."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    policy, saved = _PRINTED_NAME_POLICIES[label]

    def body(x):
        y = checkpoint_name(x + 1.0, "y")
        jax.debug.print("y={y}", y=y)
        return y * 2.0
    f = lambda x: jax.checkpoint(body, policy=policy)(x)  # noqa: E731
    with implementation("remat3"):
        barrier = "optimization_barrier" in jax.jit(jax.grad(f)).lower(np.float32(0.5)).as_text()
    assert barrier is not saved
    report = oracle.check(body, policy, np.float32(0.5), implementations=("remat3",), properties=("prevent_cse",))
    # remat2 (prevent_cse) has its barrier either way: where remat3 has none, the divergence
    assert report.status("prevent_cse", "remat3") == ("known divergence" if saved else "ok"), report


def test_a_vmapped_select_of_an_offloaded_residual_is_refused_by_both():
    """vmap o grad of a checkpoint offloading its named input in a nested
    cond's branch: the batched cond's select_n meets the offloaded residual
    in host memory beside device operands, and JAX's default memory-space
    rule refuses it; the spec refused it in other words (pristine nightly
    finding 9eaa39b677). Both refusing is not applicable; that JAX refuses
    is read off JAX (oracle.check runs it)."""
    from oracle import stacks as S
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["a"], offload_src="device",
        offload_dst="pinned_host")
    inner = lambda k: jax.checkpoint(lambda m: jnp.sin(checkpoint_name(m, "a")), policy=policy,   # noqa: E731
                                     prevent_cse=False)(k)

    def f(a, b):
        return (lax.cond(a > 0, lambda p: p, lambda g: lax.cond(g > 0, inner, lambda j: j, g), a),)
    args = (np.float32(0.5), np.float32(0.7))
    prog = trace_jax(f, *args)
    stack = S.Stack((S.Layer("grad"), S.Layer("vmap", in_axes=(0, 0, 0), out_axes=(0, 0), size=2)))
    try:
        report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",),
                              properties=(S.stack_property(stack, prog),))
    except oracle.Unsupported as e:
        if "does not address" not in str(e):
            raise
        pytest.skip(f"jax {jax.__version__}: {e}")      # the release's CPU has no host memory kind
    assert report.status(S.STACK, "remat2") == "not applicable", str(report)


@pytest.mark.skipif(oracle.jax_api.unavailable("remat3") is not None, reason="remat3 is jax 0.10.2's")
def test_remat3_s_residuals_in_a_jit_are_compared_up_to_order():
    """A jitted program whose checkpoint saves a name under
    everything_saveable beside the jit's own residual: remat3's list is the
    remat3 model's up to order (its jit rule's tangent trace reads them in
    another order than the model's), and the view defect explains it
    (pristine nightly finding 3c7806fedf). That remat3 saves one residual
    fewer than remat2 is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals

    def body(e):
        g = checkpoint_name(lax.reshape(e, (1,)), "a")
        return lax.tanh(g), g

    def f(a):
        b = lax.sin(a)
        c, d = jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable, prevent_cse=(False,))(a)
        return c, b, d
    f = jax.jit(f)
    x = np.float32(-1.1369617)
    with implementation("remat3"):
        remat3 = saved_residuals(f, x)
    assert len(remat3) == len(saved_residuals(f, x)) - 1
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat3",), properties=("residuals",))
    assert report.status("residuals", "remat3") == "known divergence", str(report)


def test_a_triangular_solve_s_mask_is_named_as_the_release_names_it():
    """triangular_solve's JVP builds a triangular mask and zeros, which
    jax 0.4.25's jnp.tril/triu compute in jitted functions (saved_residuals:
    `output of pjit`), and later releases inline as the spec does (found by
    a campaign on 0.4.25; linalg-jvp-masks-are-jit-outputs). JAX's names
    are read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    a = np.tril(np.random.RandomState(0).randn(3, 3).astype(np.float32)) + 3 * np.eye(3, dtype=np.float32)
    b = np.random.RandomState(1).randn(3, 2).astype(np.float32)
    f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True)   # noqa: E731
    pjit = any(s.startswith("output of pjit") for _, s in saved_residuals(f, a, b))
    report = oracle.check(f, oracle.AS_IS, a, b, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") in ("ok", "known divergence"), str(report)
    assert pjit == jax.__version__.startswith("0.4.25")


def test_lu_s_row_indices_are_the_release_s():
    """lu's JVP permutes the tangent's rows: before jax 0.5.3 with the
    indices of every batch dimension and the row, computed first, from
    0.5.3 with the row's alone (found by a campaign on 0.4.36;
    lu-jvp-gathers-with-every-index). JAX's indices are read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    a = np.random.RandomState(0).randn(2, 3, 3).astype(np.float32)
    f = lambda b: (lax.linalg.lu(b)[0],)   # noqa: E731
    indices = [a.shape for a, _ in saved_residuals(f, a) if "int" in str(a.dtype)]
    old = _divergence_active("lu-jvp-gathers-with-every-index")
    assert indices == [(2, 3, 2 if old else 1)]
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)


def test_a_matrix_lu_s_wrapped_permutation_saved_before_its_masks():
    """Release campaign finding b91e39e751 on 0.4.25: an lu of one matrix in
    a checkpoint whose policy saves select_n. Before jax 0.5.3 the JVP rule
    permutes the tangent's rows first, so the permutation's wrapping
    (`i32[4] output of select_n`) is saved before the two triangular
    masks' select_n; from 0.5.3 after them, as the spec. The spec
    following the old rule (spec.semantics: lu_jvp_vmaps_its_inner_rule
    =False) explains it; JAX's own saved_residuals order decides which
    status is expected."""
    from jax._src.ad_checkpoint import saved_residuals
    a = np.array([[1.1369617, 0.7697867, -0.54097354, -0.51652765], [-1.3132702, -1.4127556, 1.1066358, 1.2294966],
                  [1.043625, -1.4350724, 1.3158536, 0.5027385], [1.3574042, 0.53358555, 1.2296555, -0.6756556]],
                 dtype=np.float32)
    policy = jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.dots_saveable, lambda prim, *_, **__: prim.name in ("cos", "select_n", "sin"))
    checkpointed = jax.checkpoint(lambda y: (lax.linalg.lu(y)[0],), policy=policy, prevent_cse=False)
    f = lambda x: (checkpointed(x)[0],)    # noqa: E731
    dtypes = [str(r.dtype) for r, _ in saved_residuals(f, a)]
    assert sorted(dtypes) == ["float32", "float32", "int32"], dtypes
    old = dtypes[0] == "int32"
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)
    if old:
        assert report.results[0].detail == "lu-jvp-gathers-with-every-index", str(report)
    assert old == _divergence_active("lu-jvp-gathers-with-every-index")


def test_remat3_second_order_differentiates_an_unread_checkpoint_output_s_backward():
    """Pristine nightly finding b2c4742027 (jax 0.10.2): a checkpoint
    returning (igamma(m, n), sin(j)), its igamma read by nothing, under
    grad o grad. remat3 runs the checkpoint's backward whole, the unread
    output's too, so the second derivative meets igamma_grad_a, which has
    no derivative: JAX raises (checked here), and the oracle names the
    remat3 divergence instead of reporting a Mismatch; remat2 drops the
    unread output's backward and computes (checked here too)."""
    import spec
    from spec import ops
    from spec import policies as sp
    from spec.core import bind
    from spec.ir import ArrayType
    from spec.prims_special import igamma
    from spec.remat import remat_p
    from fuzz import properties
    from oracle import stacks as S
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    t = ArrayType((2, 3), np.float32)

    def program(policy):
        def fn(a, o, p):
            body = spec.trace(lambda j, m, n: (igamma(m, n), ops.sin(j)), t, t, t)
            _, q = bind(remat_p, a, o, p, jaxpr=body, policy=policy, prevent_cse=False, differentiated=False)
            return ops.sin(q)
        return spec.trace(fn, t, t, t)

    def second(jax_policy):
        def loss(a, o, p):
            return jnp.sum(jnp.sin(jax.checkpoint(lambda j, m, n: (lax.igamma(m, n), jnp.sin(j)),
                                                  policy=jax_policy)(a, o, p)[1]))
        ones = jnp.ones((2, 3), jnp.float32)
        return lambda: jax.grad(lambda *a: jnp.sum(sum(jax.grad(loss, argnums=(0, 1, 2))(*a))),
                                argnums=(0, 1, 2))(ones, ones, ones)
    with implementation("remat3"):
        assert _jax_raises(second(jax.checkpoint_policies.nothing_saveable), NotImplementedError,
                           "Differentiation rule for 'igamma_grad_a' not implemented")
    with implementation("remat2"):
        second(jax.checkpoint_policies.nothing_saveable)()
    stack = S.Stack((S.Layer("grad"), S.Layer("grad")))
    report = properties.oracle_agrees(program(sp.nothing_saveable), implementations=("remat3",), stack=stack)
    assert ("remat3-differentiates-a-checkpoint-s-constants", "stack", "remat3") in report.known_divergences


def test_of_two_refusals_jax_meets_the_earlier_equation_s_first():
    """Pristine campaign finding d0c2f5901e: at second order JAX raised
    igammac's missing igamma_grad_a JVP (the jvp of the vjp differentiates
    each forward equation as it is traced), the spec the policy combination
    error of the later checkpoint (it builds the vjp program whole, then
    its jvp). Both refuse; the spec's refusal for the program's first
    equation is JAX's, so it is not applicable, not a Mismatch. Before
    direct linearization (0.4.25) JAX differentiates every equation before
    it asks the policy, so it meets igammac first when it comes second too.
    JAX measured live."""
    import spec
    from fuzz import properties
    from spec import policies as P
    from spec.core import bind
    from spec.prims_special import igammac
    from spec.remat import remat_p
    pol = P.save_from_both_policies(
        P.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["a"],
                                            offload_src="device", offload_dst="pinned_host"),
        P.save_only_these_names("a"))
    body = spec.trace(lambda f: spec.ops.sin(f), spec.f32[()])

    def checkpoint(a):
        return bind(remat_p, a, jaxpr=body, policy=pol, prevent_cse=False, differentiated=False)[0]

    def igammac_first(a, b, c):
        d = igammac(b, c)
        return checkpoint(a), d

    def checkpoint_first(a, b, c):
        e = checkpoint(a)
        return e, igammac(b, c)
    for fn in (igammac_first, checkpoint_first):
        prog = spec.trace(fn, spec.f32[()], spec.f32[2, 3], spec.f32[2, 3])
        report = properties.oracle_agrees(prog, implementations=("remat2",), only=("second_order",))
        [result] = report.results
        assert result.status == "not applicable", str(report)


def test_of_two_refusals_in_a_stack_jax_meets_the_earlier_equation_s_first():
    """Release-round finding 6b527e3aa6 (0.4.25, linearize o grad; so on
    0.10.2 too): JAX raised igammac's missing igamma_grad_a JVP, met first,
    where the spec's grad level refused a later generic reduce_window (no
    linearization). The spec refuses the first equation alone so too: not
    applicable. JAX measured live."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec.prims_special import igammac
    from spec.prims_window import reduce_window

    def fn(c, d, e):
        h = igammac(c, d)
        return h, reduce_window(e, np.float32(0.0), lambda j, k: j, (3, 2), (2, 1), ((1, 1), (1, 0)), (2, 1), (1, 2))
    prog = spec.trace(fn, spec.f32[2, 3], spec.f32[2, 3], spec.f32[5, 4])
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK,))
    [result] = report.results
    assert result.status == "not applicable" and "the first 1 equations" in result.detail, str(report)


def test_a_custom_vjp_s_tied_tangents_in_a_checkpoint():
    """Release-round finding 1a67021f93 (0.4.25): before stackless, a
    custom_vjp's JVP ties each output tangent to its primal output
    (lax.tie_p), which remat's partial evaluation of the JVP body shows:
    the oracle raised Unsupported importing JAX's `tie`. Now agreed on
    every property, JAX measured live (on later releases no tie appears)."""
    import spec
    from fuzz import properties
    from fuzz.strategies import SavePrimitives
    from spec.core import bind
    from spec.remat import remat_p
    f = spec.custom_vjp(lambda v: spec.ops.sin(v), lambda v: (spec.ops.sin(v), spec.ops.cos(v)),
                        lambda r, ct: (ct * r,))
    body = spec.trace(lambda c: f(spec.ops.integer_pow(c, 0)), spec.f32[()])
    prog = spec.trace(lambda a: bind(remat_p, a, jaxpr=body, policy=SavePrimitives(frozenset({"sin"})),
                                     prevent_cse=False, differentiated=False)[0], spec.f32[()])
    report = properties.oracle_agrees(prog, implementations=("remat2",))
    assert {r.status for r in report.results} <= {"ok", "not applicable"}, str(report)



def test_remat3_unrecognised_policy_saves_a_checkpoint_output_named_as_written():
    """A checkpoint of cummax[reverse] feeding a checkpoint of sin whose
    policy remat3 never asks (save_from_both_policies of a names policy and
    save_anything_except_these_names): remat3 saves the sin checkpoint's
    input, the cummax checkpoint's output, which its forward pass computes
    by the body as written (`output of cummax`: remat.py's
    RematTrace.process_primitive binds each equation on the parent trace),
    where the remat3 model names it by cummax's JVP (`output of rev`).
    JAX's list is renamed against the model's, and the divergence is
    remat3-unrecognised-policy-is-full-remat (pristine campaign finding
    24ae1a588d). JAX measured live; the oracle checks the spec program
    (jax 0.10.2's save_anything_except_these_names is a stub, which the
    spec's policy models under remat2)."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    import spec
    from fuzz import properties
    from spec import policies as P
    from spec.core import bind
    from spec.prims_reductions import cummax
    from spec.remat import remat_p
    cp = jax.checkpoint_policies

    def f(x):
        y = jax.checkpoint(lambda c: lax.cummax(c, axis=1, reverse=True), prevent_cse=False)(x)
        pol = cp.save_from_both_policies(cp.save_only_these_names("a"), cp.save_anything_except_these_names("a", "b"))
        return jax.checkpoint(jnp.sin, policy=pol, prevent_cse=False)(y)
    x = np.array([[1.1, 0.8, 0.5, -0.5], [1.3, -1.4, 1.1, -1.2]], np.float32)
    names = _saved_per_implementation(f, x)
    assert names["remat3"] == ["from the argument x", "output of cummax"], names
    assert names["remat2"] == ["from the argument x", "output of cos"], names

    pol = P.save_from_both_policies(P.save_only_these_names("a"), P.save_anything_except_these_names("a", "b"))
    first = spec.trace(lambda c: cummax(c, axis=1, reverse=True), spec.f32[2, 4])
    second = spec.trace(spec.ops.sin, spec.f32[2, 4])

    def fn(a):
        b, = bind(remat_p, a, jaxpr=first, policy=None, prevent_cse=(False,), differentiated=False)
        return bind(remat_p, b, jaxpr=second, policy=pol, prevent_cse=(False,), differentiated=False)[0]
    report = properties.oracle_agrees(spec.trace(fn, spec.f32[2, 4]), implementations=("remat2", "remat3"),
                                      only=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert [n for n, _, i in report.known_divergences if i == "remat3"] == \
        ["remat3-unrecognised-policy-is-full-remat"], report


def test_remat3_nested_identity_checkpoint_s_output_is_recomputed_not_saved():
    """A scanned everything_saveable checkpoint naming its input, passing
    the name through an identity checkpoint and comparing the two: remat3
    saves the name alone (one f32[1]; the nested checkpoint, a hi-primitive
    rebound whole in the rematerialization, recomputes its forwarded
    output), remat2 the comparison (bool[1]). The remat3 model recomputes
    every output of a nested checkpoint in the staged half, one its body
    forwards from an input too; it saved that one again (stacked, so not
    recognised as the name) before (pristine campaign finding 5f735dae97).
    JAX measured live."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def body(e):
        f = checkpoint_name(e, "a")
        g = jax.checkpoint(lambda h: h, prevent_cse=False)(f)
        return lax.select(f > g, e, f)

    def f(x):
        step = jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable, prevent_cse=False)
        return lax.scan(lambda c, _: (step(c), None), x, None, length=1)[0]
    x = np.float32(-1.1)
    from jax._src.ad_checkpoint import saved_residuals
    lists = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            lists[impl] = [a.str_short(short_dtypes=True) for a, _ in saved_residuals(f, x)]
    assert lists == {"remat2": ["bool[1]"], "remat3": ["f32[1]"]}, lists
    report = oracle.check(f, oracle.AS_IS, x, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert [n for n, _, i in report.known_divergences if i == "remat3"] == \
        ["remat3-ignores-enclosing-policy-in-nested-checkpoints"], report


def test_remat3_checkpoint_output_taken_by_an_inner_cond_s_checkpoint_is_live():
    """In a cond branch, a checkpoint (its sin output unused) returns its
    input, which an inner cond passes to a checkpoint that never reads it:
    remat3's inner checkpoint instantiates that input's tangent and writes
    a zero cotangent back, so the outer checkpoint's backward pass runs,
    whole, and its input is saved (f32[3], an output of the outer cond);
    remat2 saves only the two indices. The liveness the remat3 model's
    unused-output variant uses now counts a branch checkpoint's unread
    input as read (pristine campaign finding 2c65b96caf). JAX measured live."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def branch(v4, v5):
        _, v7 = jax.checkpoint(lambda v: (jnp.sin(v), v), prevent_cse=False)(v4)
        inner = lambda q, r: jax.checkpoint(lambda u, v: (u, u), prevent_cse=False)(q, r)[0]  # noqa: E731
        return lax.cond(v7.sum() > 0, lambda w, x: w, inner, v4, v7)

    def f(a, b):
        return lax.cond(a > 0, lambda y, z: y, branch, b, a)
    args = (np.float32(-1.1), np.array([0.5, 0.5, 1.3], np.float32))
    from jax._src.ad_checkpoint import saved_residuals
    lists = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            lists[impl] = [a.str_short(short_dtypes=True) for a, _ in saved_residuals(f, *args)]
    assert lists == {"remat2": ["i32[]", "i32[]"], "remat3": ["i32[]", "f32[3]", "i32[]"]}, lists
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert [n for n, _, i in report.known_divergences if i == "remat3"] == \
        ["remat3-saves-for-unused-checkpoint-outputs"], report


@pytest.mark.parametrize("with_sibling", [False, True])
def test_remat3_rounds_a_saved_value_into_a_copy_of_its_own(with_sibling):
    """A jitted program computing arccos, then a checkpoint that saves a
    name and returns it (and, `with_sibling`, a checkpoint of sin before it
    that saves its input): remat3 rounds the saved name into a copy of its
    own (remat_transform's `map(reduce_precision, res)`), so the jit
    returns it as a residual output in its tangent trace's order, after
    arccos's factor; remat2 rounds it in place, the checkpoint's output
    too, and the jit forwards it to that output's place, before the factor
    (both read off JAX). The remat3 model's rounded_copies defect explains
    the order (pristine campaign finding ee6dbe7c25); the model's list is
    compared exactly where it is JAX's exactly."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    from jax._src.ad_checkpoint import saved_residuals

    def f(a, b):
        c = jnp.arccos(b)
        d = jax.checkpoint(jnp.sin, prevent_cse=False)(a) if with_sibling else a
        g, h = jax.checkpoint(lambda i: (lambda j: (jnp.sin(j), j))(checkpoint_name(i, "a")),
                              policy=jax.checkpoint_policies.save_only_these_names("a", "b"), prevent_cse=False)(a)
        return g, c, d, h
    f = jax.jit(f)
    args = (np.float32(-1.1), np.full((2, 3), 0.5, np.float32))
    lists = {}
    for impl in ("remat2", "remat3"):
        with implementation(impl):
            lists[impl] = [a.str_short(short_dtypes=True) for a, s in saved_residuals(f, *args)
                           if "output of jitted function" in s]
    assert lists == {"remat2": ["f32[]", "f32[2,3]"], "remat3": ["f32[2,3]", "f32[]"]}, lists
    report = oracle.check(f, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", report
    assert [n for n, _, i in report.known_divergences if i == "remat3"] == \
        ["remat3-rounds-saved-values-into-copies"], report


@pytest.mark.parametrize("in_axes", [(0, 1), (0, None), (1, 1)])
def test_tie_is_batched_only_along_one_axis_for_both_operands(in_axes):
    """Pristine campaign findings 4e44e2d2af and d3295aebcb (0.10.2): lax's
    tie_p is batched by batching.defvectorized, which asserts that both
    operands are batched along the same axis; the spec batched any pair.
    Now both raise JAX's bare AssertionError (not applicable), and agree
    where the axes are equal. JAX measured live."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec.prims_custom import tie
    prog = spec.trace(lambda x, y: tie(x * x, y), spec.f32[3, 3], spec.f32[3, 3])
    stack = S.Stack((S.Layer("vmap", in_axes, (0,), 2),))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK,))
    [result] = report.results
    assert result.status == ("ok" if in_axes[0] == in_axes[1] else "not applicable"), str(report)


def test_remat3_saves_a_returned_name_beside_its_rounded_copy():
    """remat3 saves a named value's rounded copy for the rematerialization
    and the value itself for the checkpoint's output a later dot reads:
    saved_residuals, looking through reduce_precision, lists the value once
    and asserts (read off JAX below); the remat3 model's list names it
    twice, which explains the AssertionError and jax.vjp's three leaves
    (pristine campaign finding acefcc9a2a)."""
    from jax._src.ad_checkpoint import saved_residuals
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    contract = (((0, 1), (0, 1)), ((), ()))

    def body(d):
        e = checkpoint_name(d, "a")
        return lax.dot_general(d, e, contract), e

    def f(a):
        b, c = jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"), prevent_cse=False)(a)
        return lax.dot_general(a, c, contract), b
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    with implementation("remat3"):
        assert _jax_raises(lambda: saved_residuals(f, x), AssertionError, "")
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat3",), properties=("residuals", "vjp_leaves"))
    assert [r.status for r in report.results] == ["known divergence"] * 2, str(report)


def test_two_order_only_divergences_at_once():
    """A scan whose carry's JVP instantiates a zero (integer_pow y=0) and
    whose checkpoint keeps a cond output nothing reads: before direct
    linearization JAX lists the zero before the hoisted residuals and the
    scan's outputs in its own order, two order-only divergences at once
    (campaign finding 910bb04eac on 0.4.36); from 0.7.0 the spec's order."""
    def checkpointed(w, x):
        u = lax.cond(jnp.sum(w) > 0, lambda a, b: jnp.cos(a), lambda a, b: b, w, w)
        return jnp.sin(x), u

    def f(p0, x):
        def body(p, _):
            r = lax.stop_gradient(p) * p
            one = lax.integer_pow(r, 0)
            t, _ = jax.checkpoint(checkpointed, policy=lambda *_, **__: True)(r, x)
            return one, t
        return lax.scan(body, p0, None, length=3)
    rng = np.random.default_rng(0)
    args = (rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 4, 3)).astype(np.float32))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    composed = "scan-residuals-in-another-order + jvp-partial-eval-saves-instantiated-zeros-in-another-order"
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    if (_divergence_active("jvp-partial-eval-saves-instantiated-zeros-in-another-order")
            and not _divergence_active("jit-residual-forwarding-gives-wrong-gradients")):   # 0.4.25: named first
        # (or the zero power's JVP-then-partial-evaluation spec, in those orders)
        assert report.results[0].detail in (composed, "jvp-partial-eval-saves-a-zero-power-s-literal"), str(report)


def test_remat3_jvp_instantiates_zero_input_tangents_as_constants():
    """RematTraced.jvp instantiates a checkpoint's zero input tangents
    (ad_util.instantiate: constants) and JVPs the body inline, so grad o
    jvp(argnums=(1,)) of a checkpoint padding its input with a sum of it
    transposes the tangent pad, whose operand is that constant zero, for
    its padding value alone: JAX's TypeError, which the remat3 model's
    program refuses as the spec's pad transpose does (pristine campaign
    finding 718facfa78)."""
    import spec
    from fuzz import properties
    from oracle import stacks as S
    from spec import ops, policies as sp
    from spec.core import bind
    from spec.prims_structural import pad
    from spec.remat import remat_p
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

    def body(g, h):
        return pad(g, ops.reduce_sum(ops.sin(g), (0,)), ((0, 0, 0),)), g

    def fn(a, b):
        inner = spec.trace(body, a.type, b.type)
        e, _ = bind(remat_p, a, b, jaxpr=inner, policy=sp.dots_saveable, prevent_cse=(False, False),
                    differentiated=False)
        return e, ops.sin(a)
    prog = spec.trace(fn, spec.f32[3], spec.f32[2])
    stack = S.Stack((S.Layer("jvp", argnums=(1,)), S.Layer("grad")))
    report = properties.oracle_agrees(prog, implementations=("remat3",), stack=stack, only=(S.STACK,))
    assert ("pad-cannot-be-transposed-for-its-padding-value-alone", S.STACK, "remat3") in \
        report.known_divergences, str(report)


def test_a_dead_generic_reduce_window_in_a_cond_branch_meets_its_missing_transpose():
    """A generic reduce_window in a checkpointed cond branch whose output
    nothing reads: jax 0.10.2 refuses to linearize it (as the spec does);
    before direct linearization JAX linearizes (the dead primal may be
    unknown) and then raises the reduce_window's missing transpose, staged
    with the branch (campaign finding beaee60703 on 0.6.2); before 0.4.28
    it has no JVP rule at all. JAX's errors are read off JAX below."""
    def window(v):
        return lax.reduce_window(v, 1.0, lambda a, b: a, (1, 3), (1, 1), "VALID")

    def body(t, u, v):
        return u, lax.cond(jnp.sum(t) > 0, lambda a, b: window(b), lambda a, b: a, t, v)

    def f(t, u, v):
        return jnp.sum(jnp.sin(jax.checkpoint(body)(jnp.sin(t), u, v)[0]))
    args = (np.ones((2, 3), np.float32), np.ones((2, 3), np.float32), np.ones((2, 5), np.float32))
    with pytest.raises((ValueError, NotImplementedError)) as raised:
        jax.grad(f, argnums=(0, 1, 2))(*args)
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",))
    vjp = report.status("vjp", "remat2")
    if "Transpose rule" in str(raised.value):
        assert ("linearize-ignores-an-unlinearizable-dead-primal", "vjp", "remat2") in report.known_divergences, \
            str(report)
    else:
        assert vjp in ("not applicable", "known divergence"), str(report)


@pytest.mark.parametrize("jitted", [False, True])
def test_a_jit_s_dead_jvp_value_at_second_order(jitted):
    """igammac read only for a cond's index: its JVP's igamma_grad_a (no
    derivative) is dead code that jax.jvp of the pullback meets outside a
    jit on every release (both refuse), and inside one before jax 0.7.0
    only (campaign finding 5d4701406b on 0.4.36). JAX's outcome is read
    off JAX below."""
    def f(a, b, c):
        return lax.cond(jnp.sum(lax.igammac(b, c)) > 0, lambda i: i, lambda i: -i, a)
    fn = jax.jit(f) if jitted else f
    args = tuple(np.full((2, 3), v, np.float32) for v in (0.3, 0.5, 0.7))
    raises = _jax_raises(lambda: jax.jvp(lambda *x: jax.vjp(fn, *x)[1](np.ones((2, 3), np.float32)), args, args),
                         NotImplementedError, "Differentiation rule for 'igamma_grad_a' not implemented")
    report = oracle.check(fn, oracle.AS_IS, *args, implementations=("remat2",), properties=("second_order",))
    status = report.results[0].status
    if not jitted:
        assert raises and status == "not applicable", str(report)
    elif raises:
        assert report.results[0].detail == "a-jit-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative", \
            str(report)
    else:
        assert status == "ok", str(report)


@pytest.mark.parametrize("saved, consumer", [(True, "sin"), (False, "sin"), (True, "2 * a")])
def test_remat3_reads_every_input_of_a_grandchild_whose_output_a_child_saves(saved, consumer):
    """Three nested checkpoints C (nothing_saveable) ⊃ K ⊃ G, G returning
    its first input beside a product of two others nothing uses, a third
    input unread: K's linearization, run in C's (RematTraced.lin), computes
    the residuals K's policy saves by K's forward pass on C's trace, where
    G is one hi-primitive reading every input (VJPHiPrimitive.dce). So C
    saves every input it passes G where K's policy saves a name of G's
    output that K's linearization reads (sin of it), not where the policy
    does not save it, nor where only its tangent is read (2 * a): read off
    JAX below; the model saved only the first (pristine campaign finding
    4ff150362a)."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    policies = jax.checkpoint_policies

    def grandchild(w, x, y, z):
        return y * z[:, None].astype(jnp.float32), w

    def child(p, q, r, s):
        a = checkpoint_name(jax.checkpoint(grandchild, policy=policies.save_only_these_names("a"))(p, q, r, s)[1], "a")
        return checkpoint_name(jnp.sin(a) if consumer == "sin" else 2 * a, "c")

    names = ("a", "c") if saved else ("c",)

    def f(*a):      # jax.checkpoint reads jax_remat3 when it wraps: wrap inside
        return jax.checkpoint(lambda *b: jax.checkpoint(child, policy=policies.save_only_these_names(*names))(*b),
                              policy=None)(*a)
    args = (np.float32(0.5), np.array([True, False]), np.ones((2, 3), np.float32), np.int32([1, 2]))
    from jax._src.ad_checkpoint import saved_residuals
    with implementation("remat3"):
        sources = [s for _, s in saved_residuals(f, *args)]
    extra = {"from the argument a[1]", "from the argument a[2]"}
    assert extra.issubset(sources) is (saved and consumer == "sin"), sources
    assert not extra & set(sources) or extra.issubset(sources), sources
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    if saved and consumer == "sin":
        assert report.results[0].detail == "remat3-reads-every-input-of-an-opaque-grandchild-checkpoint", str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("acos", ["unused", "returned"])
@pytest.mark.parametrize("call", ["cond", "jit"])
def test_remat3_s_float0_tangent_through_a_cond_leaves_its_unread_float_outputs_dead(call, acos):
    """A checkpoint C whose body has a cond (or jit) holding a checkpoint K
    of `b`, K's integer output returned through it as C's output, beside an
    acos of `c`: K's float0 tangent keeps K's backward pass live
    (remat3-non-float-checkpoint-output-keeps-its-tangents-live), so C
    saves `b`; but the cond's linearization is pruned to the outputs whose
    tangents are read, so `c` is saved only where C returns the acos (read
    off JAX below). The model's variant made every float output of the
    cond live, saving `c` (pristine campaign finding e1a10509a2, a cond)."""
    def kid(x, b):
        return jnp.sin(b), x, jnp.floor(b).astype(jnp.int32)

    def body(a, b, c):
        def branch(a, b, c):
            return jnp.acos(c), jax.checkpoint(kid)(a, b)[2]
        if call == "jit":
            o, p = jax.jit(branch)(a, b, c)
        else:
            o, p = lax.cond(jnp.sum(a) > 0, branch, lambda a, b, c: (c, jnp.zeros(b.shape, jnp.int32)), a, b, c)
        return (jnp.sin(a), p) + ((o,) if acos == "returned" else ())

    def f(a, b, c):     # jax.checkpoint reads jax_remat3 when it wraps: wrap inside
        return jax.checkpoint(body)(a, b, c)[:2]
    args = (np.ones((2, 3), np.float32), np.eye(4, dtype=np.float32) + 0.1, np.full((2, 3), 0.5, np.float32))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    assert sorted(sources) == ["from the argument a", "from the argument b"] + (
        ["from the argument c"] if acos == "returned" else []), sources
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert report.results[0].status == "known divergence", str(report)
    assert report.results[0].detail == "remat3-non-float-checkpoint-output-keeps-its-tangents-live", str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("consumer", ["sin", "2 *"])
@pytest.mark.parametrize("call", ["cond", "jit", "scan"])
def test_remat3_reads_every_input_of_a_grandchild_in_a_jit_cond_or_scan(call, consumer):
    """Three nested checkpoints C ⊃ K ⊃ G, G in a jit, a cond or a scan of
    K's body, returning its first input beside a product of two others
    nothing uses: where C's linearization needs K's output (sin of it), C
    saves every input it passes G (G is one hi-primitive in the jit's,
    cond's or scan's rematerialized body, VJPHiPrimitive.dce reading every
    input), not where only its tangent is read (2 * it): read off JAX
    below; the model read the jit's, cond's or scan's dependence through
    G's body."""
    def grandchild(w, x, y, z):
        return y * z[:, None].astype(jnp.float32), w

    def child(p, q, r, s):
        inner = lambda *a: jax.checkpoint(grandchild)(*a)[1]     # noqa: E731
        if call == "jit":
            return jax.jit(inner)(p, q, r, s)
        if call == "cond":
            return lax.cond(q[0], inner, lambda *a: a[0] * 2, p, q, r, s)
        return lax.scan(lambda c, _: (inner(c, q, r, s), None), p, None, length=2)[0]

    def f(*a):      # jax.checkpoint reads jax_remat3 when it wraps: wrap inside
        return jax.checkpoint(lambda *b: (jnp.sin if consumer == "sin" else lambda v: 2 * v)(
            jax.checkpoint(child)(*b)))(*a)
    args = (np.float32(0.5), np.array([True, False]), np.ones((2, 3), np.float32), np.int32([1, 2]))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    extra = {"from the argument a[1]", "from the argument a[2]"} - (
        {"from the argument a[1]"} if call == "cond" else set())     # the cond's index, saved anyway
    assert extra.issubset(sources) is (consumer == "sin"), sources
    assert not extra & set(sources) or extra.issubset(sources), sources
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    if consumer == "sin":
        assert report.results[0].detail == "remat3-reads-every-input-of-an-opaque-grandchild-checkpoint", str(report)


def test_a_jit_s_rounded_copy_of_its_input_is_named_against_the_older_spec():
    """A checkpoint saving everything over a jit closing over sin(a): before
    jax 0.9.1 the jit returns its input as a residual of its own
    (remat-of-jit-saves-its-inputs-again), which from 0.4.31 remat rounds
    (`output of reduce_precision`, listed after the jit's other outputs).
    JAX's names are normalised against the older spec's list from JAX's own
    names, not from those the check gave against the spec's (found by the
    real-model suite on 0.6.2: optax losses under everything_saveable)."""
    def f(x, z):
        def body(a, b):
            y = jnp.sin(a)
            u, v = jax.jit(lambda p, q: (jnp.sin(p) * y, jnp.sin(q) * y))(a, b)
            return u * v
        return jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable)(x, z)
    report = oracle.check(f, oracle.AS_IS, np.float32(0.3), np.float32(0.7), implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


@pytest.mark.parametrize("prop", ["residuals", "vjp_leaves"])
def test_the_residual_leaves_share_the_residuals_verdict(prop):
    """A gradient step inside the loss, checkpointed saving everything: before
    jax 0.10.1 the integer_pow JVP saves a factor for `** 2`
    (integer-pow-one-jvp-saves-its-factor), which is found only when JAX's
    residual names are normalised from JAX's own list. The residual leaves
    of jax.vjp's function are those residuals, and the divergence is looked
    up for them in the residuals' own context, JAX's names included (found
    by the real-model suite on 0.6.2: optax_train_step under
    everything_saveable)."""
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = np.linspace(-0.5, 0.7, 6, dtype=np.float32).reshape(2, 3)

    def loss(w, x):
        def inner(w):
            return (jnp.tanh(x @ w) ** 2).mean()
        return inner(w - 0.1 * jax.grad(inner)(w))
    report = oracle.check(loss, jax.checkpoint_policies.everything_saveable, w, x, implementations=("remat2",),
                          properties=(prop,))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


def test_two_calls_of_one_jit_keep_their_own_rounded_outputs():
    """Two batch norms through one jitted jax.nn.standardize, checkpointed
    saving everything: from jax 0.4.31 to 0.10.1 the rounded copy of the
    first call's output is named `output of reduce_precision`. JAX's
    entries equal to the spec's are matched to the nearest equal one, so
    the second call's outputs do not take the first's and leave its rounded
    output to take another value's name (`output of sin`: found by the
    real-model suite on 0.6.2 and 0.4.36, stax_resnet under
    everything_saveable)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 4, 3), dtype=np.float32)
    g, w, w2 = (rng.standard_normal(s, dtype=np.float32) for s in ((3,), (3, 3), (3, 3)))

    def batch_norm(x, g):
        return jax.nn.standardize(x, axis=(0, 1, 2)) * g

    def f(x, g, w, w2):
        return jnp.sum(jnp.sin(jnp.sin(batch_norm(x @ w2, g)) @ w + batch_norm(x @ w, g)))
    report = oracle.check(f, jax.checkpoint_policies.everything_saveable, x, g, w, w2,
                          implementations=("remat2",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("saved", ["a", "b"])
@pytest.mark.parametrize("call", ["jit", "jit of jit", "cond", "scan"])
def test_remat3_reads_every_input_of_a_grandchild_whose_output_a_child_saves_in_a_body(call, saved):
    """Three nested checkpoints C ⊃ K ⊃ G, G in a jit, a jit of a jit, a
    cond or a scan of K's body, its output named 'a' there and K saving
    `saved` (C's linearization reads only K's output's tangent): where K's
    policy saves the name, asked inside the jit's, cond's or scan's body,
    C saves every input it passes G, not where it does not: read off JAX
    below. The model asked K's policy of K's own equations only, and the
    DCE of a jit's body inside a jit pruned G's unread inputs."""
    def grandchild(w, x, y, z):
        return y * z[:, None].astype(jnp.float32), w

    def child(p, q, r, s):
        inner = lambda *a: checkpoint_name(jax.checkpoint(grandchild)(*a)[1], "a")     # noqa: E731
        if call == "jit":
            v = jax.jit(inner)(p, q, r, s)
        elif call == "jit of jit":
            v = jax.jit(lambda *a: jax.jit(inner)(*a))(p, q, r, s)
        elif call == "cond":
            v = lax.cond(q[0], inner, lambda *a: a[0] * 2, p, q, r, s)
        else:
            v = lax.scan(lambda c, _: (inner(c, q, r, s), None), p, None, length=2)[0]
        return jnp.sin(v)

    def f(*a):      # jax.checkpoint reads jax_remat3 when it wraps: wrap inside
        policy = jax.checkpoint_policies.save_only_these_names(saved)
        return jax.checkpoint(lambda *b: 2 * jax.checkpoint(child, policy=policy)(*b))(*a)
    args = (np.float32(0.5), np.array([True, False]), np.ones((2, 3), np.float32), np.int32([1, 2]))
    with implementation("remat3"):
        sources = [s for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    extra = {"from the argument a[2]", "from the argument a[3]"}
    assert extra.issubset(sources) is (saved == "a"), sources
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


def _zero_power_read_twice(a):
    b = lax.integer_pow(a, 0)
    return lax.concatenate([b, a[:1], b], 0)


_ZERO_POWER_READERS = {     # a = a ** 0 read by tangent equations in several ways
    "concatenated twice": _zero_power_read_twice,
    "concatenated with itself": lambda a: (lambda b: lax.concatenate([b, b], 0))(lax.integer_pow(a, 0)),
    "by two concatenates": lambda a: (lambda b: (lax.concatenate([b, a], 0), lax.concatenate([a, b], 0)))(
        lax.integer_pow(a, 0)),
    "times sin and cos": lambda a: (lambda b: (b * jnp.sin(a), b * jnp.cos(a)))(lax.integer_pow(a, 0)),
    "by an add and a sub": lambda a: (lambda b: (b + a, b - a))(lax.integer_pow(a, 0)),
    "padded and concatenated": lambda a: (lambda b: (lax.pad(b, np.float32(0), [(1, 1, 0)]),
                                                     lax.concatenate([b, a], 0)))(lax.integer_pow(a, 0)),
}


@pytest.mark.parametrize("reader", sorted(_ZERO_POWER_READERS))
def test_a_zero_power_s_tangent_is_one_known_value_before_direct_linearization(reader):
    """Before direct linearization (jax < 0.7.0) linearization is the JVP
    then partial evaluation: the zero tangent of a ** 0 is one known value,
    saved once however many tangent equations read it, and a tangent output
    computed from it alone is returned as it is, not saved; direct
    linearization (the spec) instantiates a symbolic zero in each reader.
    The spec following that older choice gives JAX's list on such a
    release, read off JAX (found on 0.4.36: concatenate([b, c, b]), the spec
    saving two zeros, JAX one)."""
    f = _ZERO_POWER_READERS[reader]
    a = np.array([0.3, 0.7], np.float32)
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    if oracle.jax_api.flags.flags().get("jax_use_direct_linearize", False):
        return      # (jax 0.10.2 ignores the flag switched off: nothing older to compare)
    prog = from_jaxpr(jax.make_jaxpr(f)(a))
    with following(direct_linearization=False):
        older = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    got = [(f"{str(t.dtype).replace('float32', 'f32')}{list(t.shape)}".replace(" ", ""), s.split(" from ")[0])
           for t, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert got == older, (got, older)


def test_an_in_place_replacement_composes_with_an_additive_divergence():
    """approx_top_k beside a custom_vjp of sin: before jax 0.7.1 the JVP's
    old indices replace the new ones in their place, and before 0.4.36 the
    custom_vjp saves its output too; the two compose, the list between them
    being JAX's with the custom_vjp's entry taken out (in JAX's places), not
    the spec's with the old indices appended (release campaign finding
    6a89b19e3f on 0.4.25)."""
    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))

    def f(a, b):
        top = lax.approx_max_k(b, 2)[0]
        return s(a), top
    b = np.array([[0.54, -0.52, -1.31, -1.41, -1.11], [1.23, 1.04, 1.44, -1.32, 0.5],
                  [1.36, 0.53, 1.23, 0.68, -1.36]], np.float32)
    report = oracle.check(f, oracle.AS_IS, np.float32(-1.14), b, implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


def test_a_gamma_sample_s_loss_on_every_release():
    """jax.random.gamma in a loss differentiated in its shape parameter:
    before jax 0.5.0 its key splits follow the non-partitionable threefry
    (threefry-not-partitionable, random_gamma splitting its key too), and
    before 0.6.0 random_gamma_grad has no JVP rule, so a second derivative
    raises (random-gamma-grad-not-differentiable); no Mismatch anywhere
    (found checking jax.random.gamma, added to the spec, on 0.4.36)."""
    key = jax.random.PRNGKey(0)

    def loss(a, x):
        return jnp.sum(x * jax.random.gamma(key, a, (3,)))
    a, x = np.float32([2.0, 0.5, 7.0]), np.float32([1.0, -0.5, 0.25])
    report = oracle.check(loss, jax.checkpoint_policies.nothing_saveable, a, x, implementations=("remat2",),
                          properties=("values", "jvp", "second_order", "residuals"))
    assert {r.status for r in report.results} <= {"ok", "known divergence"}, str(report)


def _while_in_a_branch(a):
    def loop(e):
        return lax.while_loop(lambda g: g < 0.5, lambda j: j + (1.0 + 0.1 * jnp.tanh(-j)), 0.0)
    return lax.cond(a > 0, lambda q: 0.5 + q, loop, a)


@pytest.mark.parametrize("f", [_while_in_a_branch,
                               lambda a: lax.cond(a > 0, lambda q: 0.5 + q, lambda q: jnp.float32(2.0), a)],
                         ids=["a while loop", "a constant"])
def test_a_cond_branch_s_scalar_zero_tangent_before_cond_s_linearize_rule(f):
    """A cond one of whose branches returns a value that does not depend on
    the operands: its zero tangent, instantiated because the other branch's
    is nonzero, is a scalar. Before jax 0.7.1 partial evaluation keeps it a
    literal inline, nothing saved; from 0.7.1 (the spec) cond's linearize
    rule saves it as an `output of cond`. Read off JAX; the spec following
    the older choice gives JAX's list there (release campaign finding
    4ab0fe69f7 on 0.4.36)."""
    a = np.float32(0.3)
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals", "vjp_leaves"))
    assert {r.status for r in report.results} <= {"ok", "known divergence"}, str(report)
    saved = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert ("output of cond" in saved) is (report.results[0].status == "ok"), (saved, str(report))


def test_a_checkpoint_s_operand_whose_tangent_its_body_does_not_read():
    """A checkpoint returning tanh(x) to a second checkpoint that reads it
    only through a comparison: before direct linearization the second is
    staged with the tangents of all its operands, so tanh's is computed and
    its residuals saved (`output of tanh`, `output of sub`), which 0.10.2
    (and the spec) prunes: read off JAX (release campaign finding
    2d4a42de7b on 0.4.25)."""
    es = jax.checkpoint_policies.everything_saveable

    def f(x):
        a, b = jax.checkpoint(lambda m: (jnp.sin(m), jnp.tanh(m)), policy=es)(x)
        return jax.checkpoint(lambda v, w: w * (jnp.sum(v) > 0).astype(jnp.float32), policy=es)(b, a)
    x = np.float32([0.3, -0.4])
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals", "vjp_leaves"))
    assert {r.status for r in report.results} <= {"ok", "known divergence"}, str(report)
    saved = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(f, x)]
    assert ("output of sub" in saved) is (report.results[0].status == "known divergence"), (saved, str(report))


def test_a_scan_s_forwarded_xs_is_named_by_its_operand():
    """A scan whose ys are its xs unchanged, into a checkpoint saving its
    input: before jax 0.7.0 the saved value is named as the scan's operand
    (`from the argument a`), the spec's `output of scan` (release campaign
    finding f61a674385 on 0.4.36; on 0.4.25 another divergence took it)."""
    def f(a):
        b = lax.scan(lambda c, x: (c, x), None, a, reverse=True)[1]
        return jax.checkpoint(lambda y: jnp.sin(y).sum(), policy=jax.checkpoint_policies.dots_saveable)(b)
    report = oracle.check(f, oracle.AS_IS, np.ones((2, 3), np.float32), implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status == "ok", str(report)


def test_an_older_rule_in_a_checkpoint_s_unused_output():
    """A checkpoint whose policy saves integer_pow, an unused output
    x ** 1 of it: before jax 0.7.0 linearization keeps the unused output's
    tangent (linearize-keeps-unused-outputs-of-staged-equations), and
    before 0.10.1 its JVP is the old rule's `g * (1 * x ** 0)`, so the
    policy saves x ** 0. The older rule is looked for in the baselines it
    changes, the kept output's program among them, not only in the spec's
    own list (release campaign finding 1a7d9cdbe7 on 0.6.2)."""
    def policy(prim, *_, **__):
        return prim.name == "integer_pow"

    def f(x):
        a, _ = jax.checkpoint(lambda m: (m * 2.0, lax.integer_pow(jnp.sin(m), 1)), policy=policy)(x)
        return a * a
    report = oracle.check(f, oracle.AS_IS, np.float32([0.3, -0.4]), implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


def test_lu_s_old_row_indices_in_a_jit():
    """lu in a jit: before jax 0.5.3 its JVP's row indices are those of every
    dimension, a jit output listed where the jit's residual order puts it
    (release campaign finding 32563e1dfd on 0.4.36: the predicate took only
    the names outside a jit, in the spec's places)."""
    a = np.linspace(-1, 1, 18, dtype=np.float32).reshape(2, 3, 3) + 2 * np.eye(3, dtype=np.float32)
    report = oracle.check(jax.jit(lambda x: jax.lax.linalg.lu(x)[0]), oracle.AS_IS, a, implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


def test_a_custom_vjp_s_tied_output_in_a_scan_in_a_checkpoint():
    """A custom_vjp call in a scan body in a checkpoint: before jax 0.6.1
    the tie saves its stacked output too, and in a checkpoint's body the
    scan's known half is a closed_call, so the extra entry is an `output of
    closed_call` (release campaign finding 19982c283c on 0.4.36; the
    predicate took only `output of scan` and a jit's output)."""
    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))

    def body(c):
        return lax.scan(lambda c, _: (lambda e: (e, e))(s(c)), c, None, length=1)[1]
    f = jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable)
    a = np.float32(-1.14)
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    saved = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert (saved.count("output of closed_call") == 2) is (report.results[0].status == "known divergence"), saved


def test_a_custom_vjp_s_tied_output_in_a_scan_in_a_nested_checkpoint():
    """The same in a checkpoint nested in another's body: the outer split
    names the nested checkpoint's known half, so the extra entry is an
    `output of remat2`, beside the nested checkpoint's own saved output
    (release campaign finding 7f4241c512 on 0.4.36). JAX's own list decides
    whether the divergence is expected."""
    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))

    def body(c):
        return lax.scan(lambda c, _: (s(c), None), c, None, length=1)[0]
    f = jax.checkpoint(jax.checkpoint(body, prevent_cse=False), prevent_cse=False,
                       policy=jax.checkpoint_policies.everything_saveable)
    a = np.float32(-1.14)
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    saved = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert (saved.count("output of remat2") == 2) is (report.results[0].status == "known divergence"), saved


def test_a_name_of_an_unknown_primal_in_a_checkpoint_s_unused_output():
    """A checkpoint naming a generic reduce_window's output it returns
    unused, beside a used one: without direct linearization the window's
    primal is unknown, linearization ignores it (dead), and the linear
    program keeps the checkpoint's `name` of it, whose missing transpose
    rule JAX raises; the spec (direct linearization) refuses to linearize
    the window (release campaign finding c74c94350f on 0.4.36: the
    predicate took only reduce_window's own missing transpose)."""
    def f(a, b):
        w = lax.reduce_window(b, 1.0, lambda x, y: x, (1, 3), (1, 1), "VALID")
        return jax.checkpoint(lambda v, c: (checkpoint_name(v, "w"), jnp.sin(c)))(w, a)[1]
    a, b = np.float32(0.5), np.ones((2, 5), np.float32)
    report = oracle.check(f, oracle.AS_IS, a, b, implementations=("remat2",), properties=("vjp",))
    try:    # name's missing transpose (before 0.7.0), or reduce_window's missing JVP (before 0.4.28)
        jax.grad(f, argnums=(0, 1))(a, b)
        refused = False
    except NotImplementedError:
        refused = True
    except ValueError as e:     # direct linearization refuses the window, as the spec does
        assert "Linearization failed to produce known values" in str(e), str(e)
        refused = None
    want = {True: "known divergence", None: "not applicable", False: "ok"}[refused]
    assert report.results[0].status == want, str(report)


def test_a_cond_branch_s_dead_jvp_value_at_second_order():
    """A cond branch computing an igammac it never reads: before jax 0.7.1
    cond's partial evaluation keeps the branch's dead code, so the known
    branch computes igamma_grad_a and jax.jvp of the pullback raises its
    missing derivative; the spec drops it and computes (release campaign
    finding da8efa446b on 0.6.2)."""
    def f(a, b, c):
        return lax.cond(a > 0, lambda m, n, o: (lax.igammac(n, o), jnp.sin(m))[1], lambda m, n, o: m, a, b, c)
    x = (np.float32(0.3),) + tuple(np.full((2, 3), v, np.float32) for v in (0.5, 0.7))
    report = oracle.check(f, oracle.AS_IS, *x, implementations=("remat2",), properties=("second_order",))
    raises = _second_order_misses_igamma_grad(f, x, np.float32(1.0))
    assert report.results[0].status == ("known divergence" if raises else "ok"), str(report)


def test_a_cond_branch_s_dead_tie_of_mixed_batching_under_vmap_of_grad():
    """A cond branch tying an unbatched value to a batched one and never
    reading the tie: before jax 0.7.1 cond's partial evaluation keeps the
    branch's dead code, so vmap of grad batches the tie, whose vectorized
    batcher asserts its operands' batch dims equal (a bare AssertionError,
    `(0, None)`); the spec drops it and computes (release campaign finding
    aced9745e1 on 0.4.25: the same divergence as the missing derivative
    above, met by batching instead)."""
    from jax._src.lax import lax as lax_internal

    from fuzz import properties
    from oracle import stacks as S

    def f(a, d, e):
        return lax.cond(a.sum() > 0, lambda a, d, e: (lax_internal.tie_p.bind(d * d, e), jnp.cos(a))[1],
                        lambda a, d, e: a, a, d, e)
    x = (np.float32([0.5, 0.2]), np.ones(2, np.float32), np.ones(2, np.float32))
    raises = _jax_raises(lambda: jax.vmap(jax.grad(lambda a, d, e: f(a, d, e).sum()), in_axes=(None, 0, None))(
        x[0], np.ones((2, 2), np.float32), x[2]), AssertionError, "(0, None)")
    stack = S.Stack((S.Layer("grad", argnums=(0,)), S.Layer("vmap", in_axes=(None, 0, None, 0), out_axes=(0,))))
    report = properties.oracle_agrees(trace_jax(f, *x), implementations=("remat2",), stack=stack, only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == ("known divergence" if raises else "ok"), str(report)


def test_a_checkpoint_s_output_only_an_unused_scan_output_stacks_under_linearize_of_grad():
    """A checkpoint's output passed to a scan as the xs its unused ys stack:
    before direct linearization grad's linearization keeps the scan's
    unused output's tangent, so the checkpoint is differentiated in the
    grad program and the called linear function of linearize o grad has
    its barrier (JAX's StableHLO counted here); 0.10.2 and the spec prune
    it: no barrier (release campaign finding aca32be65a on 0.4.25)."""
    from fuzz import properties
    from oracle import stacks as S

    def f(a):
        h, _ = lax.scan(lambda c, x: (c, x), a, jax.checkpoint(jnp.sin)(a))
        return h, jnp.sin(a)

    def grad_of_loss(a, w1, w2):
        return jax.grad(lambda a, w1, w2: jnp.sum(f(a)[0] * w1) + jnp.sum(f(a)[1] * w2), argnums=(0, 1, 2))(a, w1, w2)

    def linearized_then_called(*x):
        return jax.linearize(grad_of_loss, *x[:3])[1](*x[3:])
    x = np.float32([0.3, 0.5, 0.7])
    barriers = jax.jit(linearized_then_called).lower(*[x] * 6).as_text().count("optimization_barrier")
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = properties.oracle_agrees(trace_jax(f, x), implementations=("remat2",), stack=stack,
                                      only=(S.STACK, "stack_barriers"))
    assert report.status("stack_barriers", "remat2") == ("known divergence" if barriers else "ok"), str(report)


def test_a_batched_cond_s_custom_vjp_under_grad_of_vmap_of_vmap():
    """grad of vmap of vmap of a cond whose predicate the inner vmap batches,
    a custom_vjp with a residual in a branch, its operand batched by the
    outer vmap: before jax 0.6.1 _custom_vjp_call_jaxpr_vmap returns the
    fwd's output dims, residuals included, and JAX raises safe_zip's
    ValueError (measured here); the spec computes: the known divergence
    custom-vjp-under-vmap-of-a-batched-cond-miscounts-its-outputs, historic
    bug 20 (release campaign findings a759553a5f and bbe1395b6e on 0.4.25)."""
    from fuzz import properties
    from oracle import stacks as S
    from oracle.divergences import CUSTOM_VJP_VMAP_ZIP_ERROR

    @jax.custom_vjp
    def g(x):
        return jnp.tanh(x)
    g.defvjp(lambda x: (jnp.tanh(x), 1 - jnp.tanh(x) ** 2), lambda r, c: (c * r,))

    def f(p, x):
        return lax.cond(p > 0, lambda x: x, g, x)
    loss = lambda x, p: jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(p, x).sum()  # noqa: E731
    raises = _jax_raises(lambda: jax.grad(loss)(np.float32([0.5, -0.3]), np.float32([1., -1., 1.])),
                         ValueError, CUSTOM_VJP_VMAP_ZIP_ERROR)
    stack = S.Stack((S.Layer("vmap", in_axes=(0, None), out_axes=(0,), size=3),
                     S.Layer("vmap", in_axes=(None, 0), out_axes=(0,), size=2), S.Layer("grad", argnums=(1,))))
    report = properties.oracle_agrees(trace_jax(f, np.float32(0.5), np.float32(0.3)), implementations=("remat2",),
                                      stack=stack, only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == ("known divergence" if raises else "ok"), str(report)


def test_a_cond_branch_s_dead_jvp_value_under_linearize_of_grad():
    """The cond branch's unread igammac of the test above under a stack,
    linearize o grad: before jax 0.7.1 JAX raises igamma_grad_a's missing
    derivative (measured here) for the stack's values and for the barriers
    of its called linear function alike; the barrier count's known
    divergence is judged on the stack the count linearizes (release
    campaign finding 4ef9b2d59c on 0.6.2)."""
    from fuzz import properties
    from oracle import stacks as S

    def f(a, b, c):
        return lax.cond(a > 0, lambda m, n, o: (lax.igammac(n, o), jnp.cos(m))[1], lambda m, n, o: m, a, b, c)
    x = (np.float32(0.3),) + tuple(np.full((2, 3), v, np.float32) for v in (0.5, 0.7))
    grad = jax.grad(lambda *a: f(*a), argnums=(0, 1, 2))
    raises = _jax_raises(lambda: jax.linearize(grad, *x)[1](*x), NotImplementedError,
                         "Differentiation rule for 'igamma_grad_a' not implemented")
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = properties.oracle_agrees(trace_jax(f, *x), implementations=("remat2",), stack=stack,
                                      only=(S.STACK, "stack_barriers"))
    for prop in (S.STACK, "stack_barriers"):
        assert report.status(prop, "remat2") == ("known divergence" if raises else "ok"), str(report)


def test_a_cond_branch_s_dead_code_hoisted_with_what_it_reads():
    """The variant the divergence above builds: a copy of each branch's dead
    code before the cond, on the cond's operands, with the live equations
    it reads (a dead cos of a returned sin: both copied; the other branch
    has none)."""
    from oracle.program_variants import dead_code_hoisted
    from oracle.from_jax import trace_jax

    def live_and_dead(m):
        s = jnp.sin(m)
        jnp.cos(s)
        return s
    prog = trace_jax(lambda a: lax.cond(a > 0, live_and_dead, jnp.tanh, a), np.float32(0.3))
    hoisted, copied = dead_code_hoisted(prog)
    assert copied == 2
    assert [e.primitive.name for e in hoisted.eqns][-3:] == ["sin", "cos", "cond"]
    assert hoisted.eqns[-3].inputs[0] is prog.inputs[0]


def test_a_scan_body_s_dead_code_hoisted_on_its_first_iteration():
    """The scan variant: a body's dead code copied before the scan, reading
    the consts as they are, the carry's initial value and the xs' first
    slice (slice and reshape), which the program then computes: the copied
    equation's value is numpy's on those."""
    from oracle.program_variants import dead_code_hoisted
    from oracle.from_jax import trace_jax

    def f(c, h0, xs):
        def body(h, x):
            jnp.exp(c * h + x)              # dead
            return h + x, None
        return (lax.scan(body, h0, xs)[0],)
    args = (np.float32(0.5), np.float32(0.25), np.array([1.0, 2.0, 3.0], np.float32))
    prog = trace_jax(f, *args)
    hoisted, copied = dead_code_hoisted(prog, out_of=(spec.prims_scan.scan_p,))
    assert copied == 3                      # mul, add, exp
    exp = next(e for e in hoisted.eqns if e.primitive.name == "exp")
    shown = spec.ir.Program(hoisted.inputs, hoisted.eqns, list(hoisted.outputs) + exp.outputs)
    np.testing.assert_allclose(spec.evaluate(shown, *args)[-1], np.exp(0.5 * 0.25 + 1.0), rtol=1e-6)


@pytest.mark.parametrize("body", [lambda k, l: l * 2.0, lambda k, l: (jnp.sin(k), l * 2.0)[1]],
                         ids=["unread", "read by dead code"])
def test_a_checkpoint_s_unread_operand_beside_a_jit_s(body):
    """A jit ignoring its operand cos(a), beside a checkpoint ignoring its
    operand sin(a): before direct linearization the jit's unread operand
    has its tangent computed (cos's JVP saves sin(a)), the checkpoint's
    does not (remat_partial_eval passes its staged body only what it
    reads), so the variant making unread operands outputs takes the jit's
    alone (release campaign finding 06cbfe2920 on 0.6.2: it took the
    checkpoint's too, which saves cos(a) as well)."""
    def f(a):
        return jax.checkpoint(body)(jnp.sin(a), a), jax.jit(lambda h, i: h * 3.0)(a, jnp.cos(a))
    a = np.float32(0.3)
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    saved = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(f, a)]
    assert ("output of sin" in saved) is (report.results[0].status == "known divergence"), (saved, str(report))


def test_three_older_rules_in_one_program():
    """atan2, approx_top_k and integer_pow(x, 1) in one program: before jax
    0.7.0 each JVP rule is an older one, and the three divergences compose
    (release campaign finding 17bb52afb7 on 0.4.36: two composed only)."""
    d = np.array([[0.54, -0.52, -1.31, -1.41, -1.11], [1.23, 1.04, 1.44, -1.32, 0.5],
                  [1.36, 0.53, 1.23, 0.68, -1.36]], np.float32)
    b = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

    def f(a, b, c, d):
        return lax.integer_pow(a, 1), lax.atan2(b, c), lax.approx_max_k(d, 2)[0]
    report = oracle.check(f, oracle.AS_IS, np.float32(0.7), b, b[::-1] + 2, d, implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)
    if _divergence_active("atan2-jvp-divides-the-product") and _divergence_active("approx-top-k-jvp-gathers-with-every-index"):
        assert report.results[0].detail.count(" + ") >= 1, str(report)


def test_a_policy_asked_about_the_vprim_of_an_unread_maybe_set():
    """A checkpoint under save_from_both_policies holding an equinox
    maybe_set it never reads, under grad o vmap o grad: JAX's vmap makes it
    a vprim whose `prim` param the policy's call collides with (TypeError),
    while the spec prunes the unread maybe_set before the vmap, so no level
    of its stack holds a vprim; the predicate takes a primitive equinox
    batches as a vprim too (pristine campaign finding 33013cd266)."""
    pytest.importorskip("equinox")
    from equinox.internal._loop.common import maybe_set_p
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    P = jax.checkpoint_policies
    pol = P.save_from_both_policies(P.save_only_these_names("a"), P.save_only_these_names("b", "c"))

    def body(r, t, u, v):
        maybe_set_p.bind(t, jnp.zeros((4, 3)), u, v, i_static=None, i_treedef=jax.tree_util.tree_structure(0),
                         kwargs=() if hasattr(__import__("equinox.internal._loop.common", fromlist=["_"]),
                                              "_to_hashable_slice") else {}, makes_false_steps=False)
        return checkpoint_name(jnp.sin(r), "c")
    args = np.ones((2, 3), np.float32), np.bool_(True), np.ones(3, np.float32), np.int32(1)
    with_set = trace_jax(lambda x, t, u, v: jax.checkpoint(body, policy=pol)(jnp.sin(x), t, u, v), *args)
    without = trace_jax(lambda x, t, u, v: jax.checkpoint(lambda r: checkpoint_name(jnp.sin(r), "c"),
                                                          policy=pol)(jnp.sin(x)), *args)
    error = TypeError("save_from_both_policies.<locals>.policy() got multiple values for argument 'prim'")
    ctx = lambda prog: dv.Context("remat2", "stack", None, prog, error=error)  # noqa: E731
    assert dv._policy_asked_about_a_vprim(ctx(with_set))
    assert not dv._policy_asked_about_a_vprim(ctx(without))


def test_a_jitted_select_if_vmap_under_grad_of_jvp():
    """grad o jvp of a jitted equinox select_if_vmap: without direct
    linearization the jit's transpose hands the rule its primal output's
    zero cotangent, which equinox's rule rejects (AttributeError); with it,
    and in the spec, the gradient computes (release campaign finding
    6ce804760e on 0.4.25; with 0.6.2's equinox the stack computes too).
    JAX's outcome is read off the stack's own JAX function."""
    pytest.importorskip("equinox")
    from equinox.internal._loop.common import select_if_vmap_p
    from fuzz.properties import oracle_agrees
    from oracle.stacks import Layer, Stack
    from oracle import stacks as S
    f = jax.jit(lambda a, p, c: select_if_vmap_p.bind(p, c, c))
    args = (np.float32(-1.1), np.bool_(True), np.ones((2, 2), np.float32))
    prog, stack = trace_jax(f, *args), Stack((Layer("jvp"), Layer("grad")))
    report = oracle_agrees(prog, stack=stack, implementations=("remat2",), only=("stack",))
    status = next(r.status for r in report.results if r.property == "stack")
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    operands = S.operands(prog, stack, args, 0)
    raises = _jax_raises(lambda: stacked(lambda *x: (f(*x),))(*operands), AttributeError,
                         "'Zero' object has no attribute 'shape'")
    assert status == ("known divergence" if raises else "ok"), str(report)


def test_a_jitted_select_if_vmap_under_linearize_of_grad_of_grad():
    """linearize o grad o grad of a jitted select_if_vmap beside a square:
    the stack_barriers property's run transposes too, so the jit's zero
    cotangent reaches equinox's rule there as under grad (release campaign
    finding ef57b602d9 on 0.6.2)."""
    pytest.importorskip("equinox")
    from equinox.internal._loop.common import select_if_vmap_p
    from fuzz.properties import oracle_agrees
    from oracle.stacks import Layer, Stack
    f = jax.jit(lambda a, p, c, d: (select_if_vmap_p.bind(p, c, d), jnp.square(a)))
    a, p = np.float32(-1.1369617), np.bool_(True)
    c, d = np.float32([1.3132702, 1.4127556, 1.1066358]), np.float32([-1.3158536, 0.5027385, -1.3574042])
    report = oracle_agrees(trace_jax(f, a, p, c, d), stack=Stack((Layer("grad"), Layer("grad"), Layer("linearize"))),
                           implementations=("remat2",), only=("stack_barriers",))
    status = next(r.status for r in report.results if r.property == "stack_barriers")

    def grad_of_grad(a, c, d):
        inner = lambda a, c, d: sum(jnp.sum(y) for y in f(a, True, c, d))  # noqa: E731
        return sum(jnp.sum(y) for y in jax.grad(inner, argnums=(0, 1, 2))(a, c, d))
    outer = lambda a, c, d: jax.grad(grad_of_grad, argnums=(0, 1, 2))(a, c, d)  # noqa: E731
    raises = _jax_raises(lambda: jax.linearize(outer, a, c, d), AttributeError,
                         "'Zero' object has no attribute 'shape'")
    assert status == ("known divergence" if raises else "ok"), str(report)


def test_sort_s_old_indices_out_of_a_cond_branch():
    """A cond branch sorting a matrix it reads linearly: before jax 0.4.36
    sort's JVP gathers with int32 indices of every dimension, saved as an
    output of the cond (release campaign finding ee786fb53a on 0.4.25: the
    predicate took an output of concatenate or of a jit only)."""
    def f(a, b):
        return lax.cond(a > 0, lambda g, h: g * 2, lambda j, k: (jnp.sort(k, axis=1) * j).sum(), a, b)
    b = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)[:, ::-1]
    report = oracle.check(f, oracle.AS_IS, np.float32(-0.5), b, implementations=("remat2",),
                          properties=("residuals",))
    assert report.results[0].status in ("ok", "known divergence"), str(report)


def test_the_barrier_predicates_take_an_error_s_context_of_a_barrier_property():
    """Every context of a stack's barrier property carries the spec's count
    function (Property.linear_barriers_of), an error's too, which has no
    counts: the predicates comparing counts say no instead of crashing
    (release campaign findings a66b55a1fa and cb363cd5d4 on 0.4.25: linearize
    of an optimization_barrier, linearize o grad of a pad, where JAX raised;
    `divergences.find` turned the crash into a RuntimeError)."""
    from oracle import divergences as dv
    prog = spec.trace(lambda a, b: [spec.ops.sin(a) * b], spec.f32[3], spec.f32[3])
    ctx = dv.Context("remat2", "stack_barriers", None, prog, error=ValueError("JAX refused"),
                     linear_barriers_of=lambda checked: 0)
    for predicate in (dv._linearize_keeps_tangents_of_unread_operands, dv._linearize_keeps_unused_outputs,
                      dv._cond_keeps_dead_jvp_residuals):
        assert predicate(ctx) is False


def test_old_gather_indices_take_a_scalar_int_jit_output():
    """The old-indices predicates of top_k and approx_top_k compare JAX's
    int32 entries with the baseline's: a scalar one (a cond's index a jit
    returns) is no gather's indices, and says no instead of crashing
    (release campaign finding ce3dd944e1 on 0.4.25: IndexError, turned into
    a RuntimeError by divergences.find)."""
    from oracle import divergences as dv
    jit_out = "output of jitted function 'spec_program'"
    shapes = {(3, 2): 2}
    assert not dv._old_indices_for(("i32[3,2,2]", jit_out), ("i32[]", jit_out), shapes, dv._is_jit_output)
    assert dv._old_indices_for(("i32[3,2,2]", jit_out), ("i32[3,2,1]", jit_out), shapes, dv._is_jit_output)


def test_a_jit_returning_its_input_misroutes_a_residual_under_grad_o_jvp():
    """grad o jvp of a jit returning its input beside a cond's output that
    a dot_general reads: jax 0.4.25's _pjit_partial_eval maps the residual
    forwarded from that output with the pruned index, so the rhs transpose
    of dot_general meets a residual of another shape and lax's transpose
    shape rule raises (release campaign finding bbb0b9317d on 0.4.25;
    jax-ml/jax#20267, fixed in 0.4.26). The TypeError was one the
    divergence's predicate did not know. Whether JAX raises is read off JAX."""
    from fuzz import properties
    from oracle import stacks as S
    dims = (((0, 2), (0, 2)), ((), ()))

    @jax.jit
    def inner(f):
        j = lax.cond((f.sum() > 0).astype(jnp.int32), lambda k: k, lambda k: k, f)
        return lax.dot_general(j, f, dims), j, f

    def checked(a):
        return (inner(a)[0],)
    args = (np.random.default_rng(0).normal(size=(2, 2, 3)).astype(np.float32),)
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("jvp"), S.Layer("grad")))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    raises = _jax_raises(lambda: stacked(checked)(*S.operands(prog, stack, args, 0)),
                         TypeError, "isn't a permutation of operand dimensions")
    assert raises == _divergence_active("jit-residual-forwarding-gives-wrong-gradients")
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == ("known divergence" if raises else "ok"), str(report)


_CONSTANT = np.array([[0.5, 0.75], [1.0, 1.25], [1.5, 1.75]], np.float32)


def _constant_and_sine_unread(x):
    """A cond whose taken branch passes a constant (the outer cond's operand:
    its tangent a symbolic zero) and sin(x) to an inner cond that reads
    neither."""
    def outer(c, x):
        return lax.cond(x.sum() > 0, lambda c, s, x: x, lambda c, s, x: 2. * x, c, jnp.sin(x), x)
    return lax.cond(x.sum() > 0, outer, lambda c, x: x, _CONSTANT, x).sum()


@pytest.mark.parametrize("jitted", [False, True], ids=["top level", "in a jit"])
def test_an_unread_operand_with_a_zero_tangent_has_no_tangent_computed(jitted):
    """Before direct linearization, a cond's JVP takes a tangent for every
    operand whose tangent is not a symbolic zero, read or not, and the
    partial evaluation stages it (linearize-computes-tangents-of-unread-
    operands: sin(x)'s tangent computed, cos(x) saved); one that is a
    symbolic zero (a constant passed in through an outer cond) is pruned
    (jax/_src/lax/control_flow/conditionals.py, _cond_jvp: _prune_zeros), so
    nothing is computed or saved for it. The variant made it a program
    output as well, and its instantiated zero a residual (found by a release
    campaign on 0.6.2, 87914f9e56). Whether JAX's residuals differ from the
    spec's own is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    fn = jax.jit(_constant_and_sine_unread) if jitted else _constant_and_sine_unread
    x = np.ones((3, 2), np.float32)
    with implementation("remat2"):
        jax_types = sorted(a.str_short(short_dtypes=True) for a, _ in saved_residuals(fn, x))
    spec_types = sorted(str(r.type) for r in spec.saved_residuals(trace_jax(fn, x)))
    differs = jax_types != spec_types
    report = oracle.check(fn, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if differs else "ok"), str(report)
    if differs:
        assert [n for n, _, _ in report.known_divergences] == ["linearize-computes-tangents-of-unread-operands"]


def _jit_forwarding_its_input(zero_tangent: str, forwarded_use: str):
    """sin(a) passed to a jit whose body ignores it but for an output with a
    symbolic-zero tangent (a while loop from a literal carry, sin(a) an
    unread body const; or its sign), and which returns its other input
    a: the forwarded output returned as it is or shifted after the jit."""
    from spec import ops
    from spec.prims_call import call
    from spec.prims_control import while_loop
    from spec.prims_math import sign
    f32 = spec.f32

    def inner(e, f):
        if zero_tangent == "while":
            step = lambda k, c: ops.add(c, ops.add(1.0, ops.mul(0.1, ops.tanh(ops.sin(c)))))  # noqa: E731
            return while_loop(lambda c: ops.lt(c, 0.5), step, 0.0, body_consts=(e,)), f
        return sign(e), f

    def fn(a):
        w, f = call(spec.trace(inner, f32[()], f32[()]), ops.sin(a), a, name="inner")
        return w, (f if forwarded_use == "returned" else ops.add(f, 1.0))
    return spec.trace(fn, f32[()])


@pytest.mark.parametrize("zero_tangent,forwarded_use", [("while", "returned"), ("sign", "shifted")])
def test_a_jit_s_operands_tangents_are_computed_for_an_output_staging_forwarded(zero_tangent, forwarded_use):
    """A jit returning its input a beside an output whose tangent is a
    symbolic zero, sin(a) its operand that no live tangent reads. Before
    direct linearization JAX's linearization binds the jit with the
    forwarded output (jax/_src/interpreters/ad.py: linearize, JVP then
    pe.trace_to_jaxpr_nounits): _pjit_jvp gives it a's tangent, and
    _pjit_partial_eval stages the jit's tangent part with every operand's
    tangent, sin(a)'s too, so cos(a) is saved
    (linearize-computes-tangents-of-unread-operands). From 0.4.29 to 0.5.3
    the program make_jaxpr traces has lost that output (pjit_staging_rule,
    _pjit_forwarding: the jit's output that is its input dropped, readers
    reading the input), so the jit looked dead to the divergence's variant
    (found by a release campaign on 0.4.36, 927ac9c8b9). Whether JAX's
    residuals differ from the spec's own is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    from fuzz import properties
    prog = _jit_forwarding_its_input(zero_tangent, forwarded_use)
    fn, x = oracle.to_jax(prog), np.float32(0.3)
    with implementation("remat2"):
        jax_types = sorted(a.str_short(short_dtypes=True) for a, _ in saved_residuals(fn, x))
    spec_types = sorted(str(r.type) for r in spec.saved_residuals(trace_jax(fn, x)))
    differs = jax_types != spec_types
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if differs else "ok"), str(report)
    if differs:
        assert [n for n, _, _ in report.known_divergences] == ["linearize-computes-tangents-of-unread-operands"]


def test_a_jit_of_a_constant_s_transpose_where_xla_folds_it_as_a_bitcast():
    """jax.jit(sin) of lax.transpose(constant) inside an outer jit: with
    jaxlib 0.5.3 to 0.8.0 XLA:CPU folds it to sin of the constant's buffer
    read in the transposed shape (release campaign finding 573c84e45d on
    0.6.2, through a custom_jvp in the inner jit). Whether the installed
    JAX is wrong is read off numpy; the oracle names the divergence exactly
    there, and agrees elsewhere."""
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3) * 0.25 + 0.5

    def f(a):
        return (jax.jit(jnp.sin)(lax.transpose(x, (0, 2, 1))) * a,)
    got = np.asarray(jax.jit(f)(np.float32(1.0))[0])
    wrong = not np.allclose(got, np.sin(x.transpose(0, 2, 1)), atol=1e-6)
    assert wrong == _divergence_active("xla-cpu-folds-a-constant-s-transpose-into-a-jit-as-a-bitcast")
    report = oracle.check(f, oracle.AS_IS, np.float32(1.5), implementations=("remat2",), properties=("values", "vjp"))
    for prop in ("values", "vjp"):
        assert report.status(prop, "remat2") == ("known divergence" if wrong else "ok"), str(report)


def test_barriers_of_a_stack_whose_inner_grad_leaves_a_generic_reduce_window_dead():
    """linearize o grad o grad(argnums=(0,)) of a generic reduce_window of
    an input the inner grad holds constant: JAX (linearizing by JVP and
    partial evaluation before direct linearization) never looks at that
    dead reduce_window and computes; the spec's barrier count for the
    stack raised its linearization error, and the divergence that explains
    it (linearize-ignores-an-unlinearizable-dead-primal) had no dead-code
    free build of the barrier count to try (release campaign finding
    e0b2327498 on 0.6.2). JAX computing is read off JAX."""
    from fuzz import properties
    from oracle import stacks as S

    def checked(a, b, c):
        return lax.reduce_window(c, 1.0, lambda e, f: e, (1, 3), (1, 1), "VALID"), b
    args = (np.float32(0.3), np.ones((2, 3), np.float32), np.arange(10, dtype=np.float32).reshape(2, 5))
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad", argnums=(0,)), S.Layer("grad"), S.Layer("linearize")))
    stacked, call_linear = S.jax_functions(stack, S.base_level(prog))
    try:
        call_linear(*stacked(checked)(*S.operands(prog, stack, args, 0)))
        computes = True
    except (ValueError, NotImplementedError):   # direct linearization (and before 0.4.28, no JVP rule) refuses
        computes = False
    assert computes == _divergence_active("linearize-ignores-an-unlinearizable-dead-primal")
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK_BARRIERS,))
    status = report.status(S.STACK_BARRIERS, "remat2")
    assert status in (("known divergence",) if computes else ("not applicable", "known divergence")), str(report)
    if computes:     # (refusing where the spec refuses is not applicable: both raise; before 0.4.28 JAX's own error)
        assert [k[0] for k in report.known_divergences] == ["linearize-ignores-an-unlinearizable-dead-primal"]


@pytest.mark.parametrize("jitted", [True, False])
def test_vmap_of_the_gradient_of_a_jit_holding_a_dead_tie(jitted):
    """vmap o grad of a function whose dead code ties two values the vmap
    batches along different axes: without a jit JAX runs the dead tie
    eagerly and its batcher raises a bare AssertionError on every release,
    as the spec does (both raise: not applicable); with a jit, JAX before
    0.7.0 keeps the dead tie in the forward jit and raises, while 0.7.0 on
    and the spec drop it (release campaign finding 015127e148 on 0.4.25).
    Whether JAX raises is read off JAX."""
    from jax._src.lax import lax as lax_internal

    from fuzz import properties
    from oracle import stacks as S

    def f(a, c, d):
        lax_internal.tie_p.bind(c * c, d)
        return (a,)
    checked = jax.jit(f) if jitted else f
    args = (np.float32(0.3), np.ones(3, np.float32), np.ones(3, np.float32))
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad"), S.Layer("vmap", in_axes=(0, 0, 1, 0), out_axes=(0, 0, 0), size=2)))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    raises = _jax_raises(lambda: stacked(checked)(*S.operands(prog, stack, args, 0)), AssertionError, "(0, 1)")
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK,))
    want = "not applicable" if not jitted else "known divergence" if raises else "ok"
    assert raises == (not jitted or _divergence_active("a-jit-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative"))
    assert report.status(S.STACK, "remat2") == want, str(report)


def test_a_jitted_custom_vjp_s_saved_output_named_after_the_jit():
    """A jit returning a custom_vjp's output, named by checkpoint_name after
    the jit: before jax 0.6.1 the custom_vjp's tie saves that output, and
    saved_residuals gives it the name (release campaign finding f66bf52fa5
    on 0.4.36: `f32[] named 'c'`, which the divergence's jit entry, an
    output of the jitted function, did not cover). JAX's own list decides
    which status is expected."""
    from jax._src.ad_checkpoint import saved_residuals

    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
    jitted = jax.jit(s)

    def f(a):
        return (checkpoint_name(jitted(a), "c"),)
    saved = [src for _, src in saved_residuals(f, np.float32(0.5))]
    old = len(saved) == 2       # cos(x) the bwd reads, and the tied output sin(x) (named 'c' on 0.4.36)
    report = oracle.check(f, oracle.AS_IS, np.float32(0.5), implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)
    assert old == _divergence_active("custom-vjp-in-scan-or-jit-saves-its-output")


def test_vmap_of_the_gradient_of_a_jitted_dead_barrier_beside_a_tie():
    """vmap o grad of a jit whose cond branch holds a dead
    optimization_barrier, its index read off a tie of values the vmap
    batches along different axes (release campaign finding 29a0207e7b on
    0.4.25): before jax 0.5.3 JAX raises the barrier's missing
    differentiation rule, from 0.5.3 the batcher's bare AssertionError, as
    the spec does. The spec's batcher refusing the stack's program is no
    predicate failure (jit-residual-forwarding-gives-wrong-gradients read
    it): the missing rule is a known divergence, the AssertionError not
    applicable. Which error JAX raises is read off JAX."""
    from jax._src.lax import lax as lax_internal

    from fuzz import properties
    from oracle import stacks as S
    barrier = getattr(lax, "optimization_barrier", None) or jax._src.ad_checkpoint._optimization_barrier

    def f(a, b, c):
        index = (jnp.sum(lax_internal.tie_p.bind(b * b, c)) > 0).astype(np.int32)

        def keeps(x, y):
            barrier((y,))
            return jnp.cos(x)
        return (lax.switch(index, [keeps, lambda x, y: jnp.sin(x)], a, b),)
    checked = jax.jit(f)
    args = (np.float32(0.7), np.arange(1, 4, dtype=np.float32), np.full(3, 0.5, np.float32))
    prog = trace_jax(checked, *args)
    stack = S.Stack((S.Layer("grad"), S.Layer("vmap", in_axes=(0, 0, 1, 0), out_axes=(0, 0, 0), size=2)))
    stacked, _ = S.jax_functions(stack, S.base_level(prog))
    call = lambda: stacked(checked)(*S.operands(prog, stack, args, 0))   # noqa: E731
    missing = "Differentiation rule for 'optimization_barrier' not implemented"
    old = _divergence_active("optimization-barrier-not-differentiable")
    assert _jax_raises(call, NotImplementedError if old else AssertionError, missing if old else "(0, 1)")
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack, only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == ("known divergence" if old else "not applicable"), str(report)


def test_a_checkpoint_s_unread_round_in_a_cond_branch_stages_no_tangent():
    """A jitted cond whose one branch checkpoints a round nothing reads and
    whose other checkpoints a select_and_scatter_add nothing reads (release
    campaign finding 0fef3f486a on 0.4.36): before direct linearization
    JAX keeps the scatter's operand as the cond's residual (its staged
    checkpoint keeps the unread output), but stages nothing of the round,
    whose tangent is a symbolic zero. The divergence's variant made the
    round's output a program output too, and saved its instantiated zero,
    which JAX does not: the residual check named no divergence. Which
    residuals JAX saves is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    from jax._src.lax import lax as lax_internal
    from jax._src.lax import windowed_reductions

    def scatter(source, operand):
        return windowed_reductions.select_and_scatter_add_p.bind(
            source, operand, select_prim=lax_internal.le_p, window_dimensions=(3, 3), window_strides=(1, 1),
            padding=((1, 1), (1, 1)))

    def rounds(x, y, source, operand):
        _, kept = jax.checkpoint(lambda a, b: (jnp.round(b), a), policy=jax.checkpoint_policies.dots_saveable)(x, y)
        return kept * kept

    def scatters(x, y, source, operand):
        kept, _ = jax.checkpoint(lambda a, s, o: (a, scatter(s, o)))(x, source, operand)
        return kept * 0.5

    def f(x, y, source, operand):
        return (lax.cond(jnp.sum(y) > 0, scatters, rounds, x, y, source, operand),)
    checked = jax.jit(f)
    args = (np.float32(-1.1), np.ones(1, np.float32), np.ones((5, 4), np.float32),
            np.arange(20, dtype=np.float32).reshape(5, 4))
    saved = sorted(a.str_short(short_dtypes=True) for a, _ in saved_residuals(checked, *args))
    old = saved == ["f32[5,4]", "f32[]", "i32[]"]       # the scatter's operand beside x and the index
    assert old or saved == ["f32[]", "i32[]"], saved
    assert old == _divergence_active("linearize-computes-tangents-of-unread-operands")
    report = oracle.check(checked, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)


@pytest.mark.parametrize("reads", ["consts", "carry", "xs"])
def test_a_scan_body_s_dead_igamma_under_a_second_derivative(reads):
    """jax.jvp of the pullback of a scan whose body computes an igamma
    nothing reads, of the scan's consts, its carry or its xs (release
    campaign finding b16d1a014e on 0.4.25, of its consts): before direct
    linearization (jax 0.7.0) the known body keeps the dead igamma's
    igamma_grad_a and JAX raises its missing differentiation rule (of the
    consts; of the carry or xs on some releases), as the spec does for the
    program with the dead code hoisted before the scan; from 0.7.0 JAX
    computes, as the spec does. Whether JAX raises is read off JAX."""
    def f(a, b, c):
        def body(h, x):
            lax.igamma(*{"consts": (b, c), "carry": (h, h), "xs": (x, x)}[reads])
            return h, None
        return (lax.scan(body, a, b * c)[0] * a[0, 0],)
    x = (np.full((2, 3), 0.3, np.float32), np.full((2, 2, 3), 0.5, np.float32), np.full((2, 2, 3), 0.7, np.float32))
    raises = _second_order_misses_igamma_grad(f, x, (np.ones((2, 3), np.float32),))
    # of the consts, hoisted as loop invariants, JAX raises on every release the divergence
    # holds for; of the carry or the xs it depends on the release (0.4.25 computes both, 0.6.2
    # raises for the carry), and the predicate follows JAX's error
    if reads == "consts":
        assert raises == _divergence_active("a-scan-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative")
    _second_order_follows_jax(f, x, raises)


def test_a_checkpoint_s_unused_igammac_under_a_second_derivative():
    """jax.jvp of the pullback of a checkpoint returning an igammac nothing
    reads beside its input (release campaign finding 865586636f on 0.4.25):
    before direct linearization JAX stages the checkpoint's tangent for
    every output, the unused one's too, whose igamma_grad_a a second
    derivative meets, and raises its missing rule; the spec raises it for
    the program with that output made an output
    (linearize-keeps-unused-outputs-of-staged-equations). From 0.7.0 JAX
    computes, as the spec does. Whether JAX raises is read off JAX."""
    def f(a, b, c):
        return (jax.checkpoint(lambda a, b, c: (lax.igammac(b, c), a),
                               policy=jax.checkpoint_policies.save_only_these_names("a"))(a, b, c)[1],)
    x = (np.float32(0.3), np.full((2, 3), 0.5, np.float32), np.full((2, 3), 0.7, np.float32))
    raises = _second_order_misses_igamma_grad(f, x, (np.float32(1.0),))
    assert raises == _divergence_active("linearize-keeps-unused-outputs-of-staged-equations")
    _second_order_follows_jax(f, x, raises)


def test_a_dead_igammac_in_a_scan_in_a_cond_branch_in_a_scan():
    """jax.jvp of the pullback of a scan whose body's cond holds, in one
    branch, a scan computing an igammac of its consts nothing reads
    (release campaign finding 20ae3a20e7 on 0.4.25, under linearize o
    grad): before direct linearization JAX keeps that dead code at every
    level and raises igamma_grad_a's missing rule; the spec raises it for
    the program with the dead code hoisted out of every cond and scan,
    innermost first (one kind of hoisting alone leaves it nested). From
    0.7.1 JAX computes, as the spec does. Whether JAX raises is read off
    JAX."""
    def f(a, b, c):
        def inner(h, _):
            lax.igammac(b, c)
            return h, None

        def outer(h, _):
            return lax.cond(h > 0, lambda v: lax.scan(inner, v, None, length=2)[0], lambda v: v * 2.0, h), None
        return (lax.scan(outer, a, None, length=2)[0] * a,)
    x = (np.float32(0.3), np.full((2, 3), 0.5, np.float32), np.full((2, 3), 0.7, np.float32))
    raises = _second_order_misses_igamma_grad(f, x, (np.float32(1.0),))
    assert raises == _divergence_active("a-scan-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative")
    _second_order_follows_jax(f, x, raises)


def test_a_named_cumlogsumexp_saved_by_a_while_loop():
    """A cumlogsumexp's output named by checkpoint_name (the name unused)
    and carried by a while loop (release campaign finding 1a094739e5 on
    0.4.36): linearization saves the value cumlogsumexp's JVP rule
    computes anew (its associative scan ends in an `add`), which JAX's
    saved_residuals calls by the name from 0.4.26 to 0.10.1
    (saved-residuals-names-the-input-of-a-name); the normalization knows
    the rule's name for it too. The residual check agrees on every
    release."""
    from jax.ad_checkpoint import checkpoint_name

    def f(a):
        b = lax.cumlogsumexp(a, axis=0)
        checkpoint_name(b, "a")
        _, e = lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, c[1] + jnp.sin(c[1])), (0, b))
        return (e,)
    report = oracle.check(f, oracle.AS_IS, np.linspace(-1.0, 1.0, 5).astype(np.float32),
                          implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", str(report)


def _scan_ignoring(const, carry, xs):
    """A scan binding `const` as a const its body never reads (lax.scan would
    drop it; the scan primitive keeps it, as the fuzzer's programs do)."""
    from jax._src.lax.control_flow import loops
    from oracle.jax_api.internals import scan_params
    body = jax.make_jaxpr(lambda g, h, i: (h, h))(const, carry, xs[0])
    outs = loops.scan_p.bind(const, carry, xs, jaxpr=body, length=xs.shape[0], reverse=False, num_consts=1,
                             num_carry=1, unroll=1, **scan_params(3))
    return outs[0], outs[1]


def test_a_checkpoint_s_operand_read_only_through_stop_gradient():
    """A scan's unread const sin(a) beside a checkpoint reading its operand
    sin(a) only through stop_gradient (release campaign finding d413219730
    on 0.6.2): before direct linearization the scan's const has its tangent
    computed (cos(a) saved once), the checkpoint's operand not:
    stop_gradient's JVP reads no tangent, and remat_partial_eval passes its
    staged body only the tangents its JVP reads. The variant made both
    outputs (two cos). JAX's own list says whether cos is saved."""
    def f(a, b):
        c, d = jnp.sin(a), jnp.sin(a)
        e, _ = _scan_ignoring(c, a, b)
        return (jax.checkpoint(lambda l, m: lax.stop_gradient(m) * l)(a, d), e)
    args = (np.float32(0.3), np.ones(3, np.float32))
    saved = [s.split(" from ")[0] for _, s in oracle.jax_api.internals.saved_residuals(f, *args)]
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if "output of cos" in saved else "ok"), \
        (saved, str(report))


def test_a_linalg_jvp_s_masks_and_a_jit_s_outputs_named_alike_are_told_apart():
    """A qr, then a jit of abs(sin(q)). Before 0.4.34 saved_residuals names
    both qr's JVP masks (jnp.tril is jitted there) and the jit's outputs
    `output of pjit`, of the same two types (bool and float32), and before
    direct linearization the jit lists its two in another order
    (jit-residuals-in-another-order). Renamed one renaming after the other,
    the first took the masks for the jit's outputs, and the order looked
    like no known divergence; renamed together, each to the nearest entry,
    it is (release campaign finding 896ff3091c on 0.4.25). Expected: read
    off JAX's list, the jit's residuals as the last two."""
    from jax._src.ad_checkpoint import saved_residuals

    def f(x):
        q, _ = lax.linalg.qr(x, full_matrices=False)
        return jax.jit(lambda v: jnp.abs(jnp.sin(v)))(q)
    x = np.array([[1.1369617, 0.7697867, -0.54097354], [0.51652765, -1.3132702, 1.4127556],
                  [-1.1066358, 1.2294966, 1.043625]], np.float32)
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    jit_order = [str(a.dtype) for a, _ in saved_residuals(f, x)][-2:]
    assert report.status("residuals", "remat2") == ("ok" if jit_order == ["float32", "bool"] else
                                                    "known divergence"), report


def test_integer_pow_one_s_old_factor_beside_a_python_float_divisor_jax_leaves_unsaved():
    """A checkpoint of integer_pow(x, 1) beside lax.div(b, 2.0): before jax
    0.10.1 the old JVP rule makes the checkpoint save x, and 0.6.2 leaves
    the Python float divisor unsaved (literal-residuals-depend-on-the-
    constant-s-python-type); the two at once are known, not a mismatch
    (release campaign finding dbabf8fd92 on 0.6.2)."""
    from jax._src.ad_checkpoint import saved_residuals

    def f(a, b):
        c = jax.checkpoint(lambda d: lax.integer_pow(d, 1), policy=None, prevent_cse=False)(a)
        return c, lax.div(b, 2.0)
    args = np.float32(-1.1), np.ones((3, 3), np.float32)
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    jax_list = sorted(s for _, s in saved_residuals(lambda a, b: sum(jnp.sum(y) for y in f(a, b)), *args))
    want = "ok" if jax_list == ["from a literal"] else "known divergence"
    assert report.results[0].status == want, (str(report), jax_list)


def test_a_vmapped_maybe_set_writing_into_a_numpy_buffer_under_grad():
    """grad of a jitted vmap of equinox's maybe_set whose buffer is a numpy
    constant: equinox's _maybe_set indexes the buffer with the traced index
    by numpy (TracerArrayConversionError), a known divergence wherever JAX
    raises it; the spec computes (release campaign finding fe982b4ec3 on
    0.6.2)."""
    pytest.importorskip("equinox")
    from equinox.internal._loop.common import maybe_set_p
    from fuzz.properties import oracle_agrees
    from oracle import divergences as dv
    from oracle.stacks import Layer, Stack

    def set_row(p, x, i):
        return maybe_set_p.bind(p, np.ones((4, 3), np.float32), x, i, i_static=None,
                                i_treedef=jax.tree_util.tree_structure(0), kwargs=(), makes_false_steps=False)
    f = jax.jit(jax.vmap(set_row))
    p, x, i = np.array([True, False]), np.ones((2, 3), np.float32), np.array([1, 2], np.int32)
    prog = trace_jax(f, p, x, i)
    assert any(e.primitive.name == "vprim" for e in dv._eqns(prog)), prog
    report = oracle_agrees(prog, stack=Stack((Layer("grad"),)), implementations=("remat2",), only=("stack",))
    status = next(r.status for r in report.results if r.property == "stack")
    raises = _jax_raises(lambda: jax.grad(lambda x: f(p, x, i).sum())(x), jax.errors.TracerArrayConversionError,
                         "__array__()")
    assert status == ("known divergence" if raises else "ok"), str(report)
    if raises:
        assert {n for n, *_ in report.known_divergences} == {"equinox-maybe-set-indexes-a-numpy-buffer-with-a-tracer"}


def test_sort_s_old_indices_beside_a_custom_vjp_s_kept_named_value():
    """A checkpoint sorting (g, h), naming the sorted h `a` and passing it
    twice to a custom_vjp sine, under a policy saving the name, `cos` and
    `add`: before jax 0.4.38 sort's old JVP wraps its indices with an `add`
    the policy saves, and before 0.6.1 the custom_vjp keeps the named value;
    each alone is a known divergence, and so are both at once (release
    campaign finding 913246c3cf on 0.4.36)."""
    from jax._src.ad_checkpoint import saved_residuals

    @jax.custom_vjp
    def csin(x):
        return jnp.sin(x)
    csin.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda r, g: (g * r,))
    pol = jax.checkpoint_policies.save_from_both_policies(
        lambda prim, *_, **params: params.get("name") == "a" if prim.name == "name" else prim.name == "cos",
        lambda prim, *_, **params: prim.name == "add")

    def body(g, h):
        k = checkpoint_name(lax.sort((g, h), num_keys=1)[1], "a")
        return csin(jnp.concatenate([k, k]))
    f = jax.checkpoint(body, policy=pol)
    args = np.array([3, 2, 2, 1, 1, 1], np.int32), np.linspace(-1, 1, 6).astype(np.float32)
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    jax_list = [s for _, s in saved_residuals(lambda g, h: f(g, h).sum(), *args)]
    old_indices = any(s.startswith("output of add") for s in jax_list)
    kept = any(s.startswith("output of reduce_precision") for s in jax_list)
    want = "known divergence" if old_indices or kept else "ok"
    assert report.results[0].status == want, (str(report), jax_list)
    if old_indices and kept:     # the two together: "first + second"
        assert len(report.known_divergences[0][0].split(" + ")) == 2, str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_an_unused_checkpoint_output_a_nested_checkpoint_s_scan_stacked():
    """A checkpoint returning, unused, what a nested checkpoint's scan
    stacked (its carry changes: lax.scan makes an unchanged one a const):
    remat3's reverse pass raises `Expected cotangent type`, as for a scan in
    the checkpoint's own body, a known divergence (pristine campaign
    finding d3914ce803); read off JAX below."""
    def inner(j):
        k, ys = lax.scan(lambda c, _: (c * 2.0, c), j, None, length=1)
        return ys, j

    policy = jax.checkpoint_policies.save_only_these_names("a")

    def outer(f, g):
        h, i = jax.checkpoint(inner, policy=policy, prevent_cse=False)(f)
        return i, h

    def f(a):     # jax.checkpoint reads jax_remat3 when it wraps: wrap inside
        return jax.checkpoint(outer, policy=policy, prevent_cse=False)(a, a)[0]
    args = np.float32(0.5),
    with implementation("remat3"):
        raises = _jax_raises(lambda: jax.grad(f)(*args), ValueError, "Expected cotangent type")
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("vjp",))
    assert report.results[0].status == ("known divergence" if raises else "ok"), str(report)
    assert raises, "the expected JAX error is gone: the divergence may not hold"


def test_a_jitted_scan_s_zero_carry_tangent():
    """jit of a scan whose carry, computed from a constant, is replaced by
    the differentiated input: before direct linearization the scan's JVP
    saves the zero tangent of the carry, named as an output of the jit
    (release campaign finding 6a3e4af576 on 0.6.2); read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals

    def f(a):
        c = jnp.zeros(3, jnp.float32) + 1.0
        return lax.scan(lambda t, _: (a * 2.0, None), c, None, length=1)[0]
    args = (np.ones(3, np.float32),)
    report = oracle.check(jax.jit(f), oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    saved = saved_residuals(jax.jit(f), *args)
    assert report.results[0].status == ("known divergence" if saved else "ok"), (str(report), saved)


def test_the_stub_saves_what_a_nested_offloading_policy_would_be_asked_about():
    """A checkpoint excluding name c holds a checkpoint naming c under an
    offloading save_from_both_policies: the documented policy recomputes c
    in the backward pass, whose partial evaluation asks the inner policy,
    which refuses (PolicyCombinationError); jax 0.10.2's stub saves c and
    asks nothing (pristine campaign finding b0ade09585). Whether JAX
    computes is read off JAX."""
    from fuzz import properties
    from spec import policies as sp
    if not _divergence_active("save-anything-except-these-names-is-a-stub"):
        pytest.skip(f"jax {jax.__version__}: save_anything_except_these_names is no stub")
    cp = jax.checkpoint_policies

    def checked(a, outer_policy, inner_policy):
        def body(p):
            q = jax.checkpoint(lambda r: checkpoint_name(r, "c"), policy=inner_policy, prevent_cse=False)(p)
            return jnp.dot(q, p)
        return jax.checkpoint(body, policy=outer_policy, prevent_cse=False)(a)
    args = (np.array([0.5, -1.5], np.float32),)
    inner = dict(names_which_can_be_saved=[], names_which_can_be_offloaded=["c"],
                 offload_src="device", offload_dst="pinned_host")
    prog = trace_jax(lambda a: checked(a, sp.save_anything_except_these_names("c"), sp.save_from_both_policies(
        sp.save_and_offload_only_these_names(**inner), sp.nothing_saveable)), *args)
    jax_inner = cp.save_from_both_policies(cp.save_and_offload_only_these_names(**inner), cp.nothing_saveable)
    raises = _jax_raises(lambda: jax.grad(lambda a: checked(a, cp.save_anything_except_these_names("c"), jax_inner))(
        *args), ValueError, "The return value of the policies should be a boolean")
    report = properties.oracle_agrees(prog, implementations=("remat2",), only=("vjp", "prevent_cse"))
    for prop in ("vjp", "prevent_cse"):
        want = "ok" if raises else "known divergence"
        assert report.status(prop, "remat2") == want, str(report)
    assert not raises, "JAX asks the inner policy: the stub may be gone"


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("reader", ["jit", "scan"])
def test_remat3_a_checkpoint_output_only_a_jit_of_a_zero_derivative_reads(reader):
    """A checkpoint output read only by a jit (or a scan) whose body's
    derivative is zero (integer_pow[y=0]) has no tangent read: remat3 still
    runs the checkpoint's backward pass whole and saves what square's
    derivative needs, as for an output nothing reads, a known divergence
    (pristine campaign finding a7964d40fc); JAX's list is read off JAX."""
    from jax._src.ad_checkpoint import saved_residuals
    c = np.array([-1.25, -1.0, -0.75], np.float32)

    def f(x):
        g, e = jax.checkpoint(lambda e: (lax.concatenate([c, jnp.square(e)], 0), e))(x)
        if reader == "scan":
            return lax.scan(lambda k, gi: (k + lax.integer_pow(gi, 0), None), np.float32(0), g)[0], e
        return jax.jit(lambda g: lax.integer_pow(g, 0))(g), e
    args = (np.array([0.5, -0.25, 1.5], np.float32),)
    with implementation("remat3"):
        saved = saved_residuals(f, *args)
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert report.results[0].status == ("known divergence" if saved else "ok"), (str(report), saved)
    assert saved, "remat3 saves nothing: the divergence may not hold"


# Two pristine-round findings on jax 0.10.2 (round s65, session 34):
# second-order residuals (the stack `grad`, whose function is then
# linearized by saved_residuals) of a jit inside a checkpoint.

def _second_order_residuals_agree(prog):
    """The stack `grad`'s residuals agree, where they are compared (on the
    release at hand); JAX and the spec disagreeing raise Mismatch."""
    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    report = oracle_agrees(prog, implementations=("remat2",), stack=S.Stack((S.Layer("grad"),)),
                           only=("stack_residuals",))
    status = report.status("stack_residuals", "remat2")
    if status == "not compared":
        pytest.skip(f"stack residuals not compared on this release: {report}")
    assert status == "ok", str(report)


def _print_in_a_jit_in_a_checkpoint(a, b):
    def body(x, y):
        jax.jit(lambda y: jax.debug.print("x={x}", x=y))(y)
        return (x,)
    return jax.checkpoint(body, policy=jax.checkpoint_policies.dots_saveable)(a, b)


def _constant_in_a_jit_in_a_checkpoint(a):
    scale = np.array([0.5, 0.75, 1.0], np.float32)
    return jax.checkpoint(lambda x: jax.jit(lambda x: lax.mul(scale, x))(x),
                          policy=jax.checkpoint_policies.save_only_these_names("a"))(a)


def test_second_order_residuals_of_a_print_in_a_jit_in_a_checkpoint():
    """Finding 54f2840b6b: transposing the staged checkpoint replays the
    print in its jit (JAX's transposed checkpoint has it: jax.make_jaxpr of
    the grad), so the print's operand b is saved when the gradient is
    linearized; the spec had dropped the jit's copy of the print as a
    hoisted duplicate (spec/transpose.py `_without_hoisted_effects`)."""
    a, b = np.array([-1.1, 0.7, 0.5], np.float32), np.ones((2, 3), np.float32)
    prog = trace_jax(_print_in_a_jit_in_a_checkpoint, a, b)
    _second_order_residuals_agree(prog)


def test_second_order_residuals_of_a_constant_in_a_jit_in_a_checkpoint():
    """Finding 4e2b1ed9f8: remat_transpose splits the staged checkpoint's
    body with JaxprTrace, where `_pjit_partial_eval` returns the jit's
    array constant from a known jit (`jit{lambda d; . (d,)}()` in JAX's
    transposed checkpoint: jax.make_jaxpr of the grad), which the policy
    recomputes at second order, so nothing is saved; the spec had forwarded
    the constant, as pjit's linearize rule does, making it an operand of
    the transposed checkpoint, saved `from a constant`."""
    prog = trace_jax(_constant_in_a_jit_in_a_checkpoint, np.array([-1.1, 0.7, 0.5], np.float32))
    _second_order_residuals_agree(prog)


def test_an_unbatched_output_moved_to_its_out_axis_is_broadcast_there():
    """Finding fd2f1425cf (pristine 0.10.2): vmap(out_axes=1) of an output
    that does not depend on the batched inputs broadcasts it with the new
    axis at 1 at once (batching.matchaxis -> batching.broadcast), so under
    vjp o vmap, batched again, the cotangent is reduced where its outer
    batch axis is and then moved for the mul: JAX saves the moved value
    (`output of transpose`); the spec, which broadcast to axis 0 and then
    transposed, had saved the reduce_sum's. Expected read off JAX."""
    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    x = np.array([-1.1, 0.7, 0.5], np.float32)
    prog = trace_jax(lambda a, b: (jnp.sin(a), b), x, x)
    stack = S.Stack((S.Layer("vmap", (None, 0), (1, 0), 2), S.Layer("vjp"),
                     S.Layer("vmap", (0, 0, 1, 0), (0, 0), 2)))
    report = oracle_agrees(prog, implementations=("remat2",), stack=stack, only=("stack", "stack_residuals"))
    assert report.status("stack_residuals", "remat2") in ("ok", "not compared"), str(report)
    assert report.status("stack", "remat2") == "ok", str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("returned", ["as it is", "plus one"])
def test_remat3_linearizes_a_branch_checkpoint_whose_integer_output_the_branch_returns(returned):
    """Finding 63dc385fd3 (pristine nightly, 0.10.2): a cond branch returns
    a checkpoint's integer output, the checkpoint reads igammac's output and
    nothing reads its float output. remat3 still linearizes the checkpoint
    (the integer output's float0 tangent is the branch's), so igammac's
    JVP residual igamma_grad_a stays in the forward pass and jax.jvp of the
    pullback raises its missing derivative, a known divergence the remat3
    model shows; where the branch returns that output plus one, JAX
    computes and so does the spec. JAX's behaviour read off JAX: the
    pullback's JVP under remat3 raises exactly in the first case."""
    u = np.array([3, 2], np.uint32)
    c, d = np.array([1.2, 0.7], np.float32), np.array([0.9, 1.4], np.float32)

    def f(c, d):
        def branch(c, d):
            k = jax.checkpoint(lambda q, r: (r, q))(u, lax.igammac(c, d))[1]
            return k if returned == "as it is" else k + 1
        return lax.cond(True, branch, lambda c, d: u, c, d)
    with implementation("remat3"):
        try:
            jax.jvp(lambda c, d: jax.vjp(lambda c, d: (f(c, d),)[:0], c, d)[1](()), (c, d), (c, d))
            raises = False
        except NotImplementedError:
            raises = True
    assert raises == (returned == "as it is")
    report = oracle.check(f, oracle.AS_IS, c, d, implementations=("remat3",), properties=("second_order",))
    if raises:
        assert report.known_divergences == [("remat3-differentiates-a-checkpoint-s-constants", "second_order",
                                             "remat3")], str(report)
    else:
        assert report.status("second_order", "remat3") == "ok", str(report)


@pytest.mark.parametrize("fft_type", ["RFFT", "IRFFT"])
def test_second_order_residuals_of_an_fft_transpose(fft_type):
    """Finding 1f427c74bb (pristine nightly, 0.10.2): fft_p's transpose
    rule calls JAX's jitted helpers, `_rfft_transpose` (a jit whose mask,
    built by broadcast_in_dim and dynamic_update_slice, then expand_dims,
    is its output where linearizing the gradient saves it: `c64[1,5] output
    of jitted function '_rfft_transpose'`) and `fft` (a jit of the
    primitive); the spec had a constant mask broadcast to the cotangent's
    shape and a bare fft, and saved the literal N and the broadcast."""
    import spec
    from spec.prims_complex import complex as complex_, real
    from spec.prims_fft import FftType, fft
    if fft_type == "RFFT":
        prog = spec.trace(lambda a, c: (a, real(fft(c, FftType.RFFT, (8,)))), spec.f32[2, 5], spec.f32[2, 8])
    else:
        prog = spec.trace(lambda a, b: fft(complex_(a, b), FftType.IRFFT, (8,)), spec.f32[2, 5], spec.f32[2, 5])
    _second_order_residuals_agree(prog)


_CK = functools.partial(jax.checkpoint, prevent_cse=False)
# where an inner checkpoint ignores v4 = v3 * v3, which an outer checkpoint of
# v3 computes (JAX's barrier or not: read off JAX's HLO, asserted below)
_IGNORED_BY_AN_INNER_CHECKPOINT = {
    "straight": (False, lambda v3, v4: _CK(lambda a, b: b)(v4, v3)),
    "scan constant": (True, lambda v3, v4: lax.scan(
        lambda c, _: (_CK(lambda a, b: b)(v4, c),) * 2, v3, None, length=1)[0]),
    "scan constant through the body": (True, lambda v3, v4: lax.scan(
        lambda c, _: (_CK(lambda a, b: b)(v4 * 2.0, c),) * 2, v3, None, length=2)[0]),
    "scanned over": (True, lambda v3, v4: lax.scan(
        lambda c, x: (_CK(lambda a, b: b)(x, c),) * 2, v3, jnp.stack([v4, v4]))[0]),
    "scan carry": (False, lambda v3, v4: lax.scan(
        lambda c, _: ((_CK(lambda a, b: b)(c[0], c[1]), c[1]),) * 2, (v4, v3), None, length=1)[0][1]),
    "cond": (True, lambda v3, v4: lax.cond(v3 > 0, lambda a, b: _CK(lambda p, q: q)(a, b), lambda a, b: b, v4, v3)),
    "jit": (False, lambda v3, v4: jax.jit(lambda a, b: _CK(lambda p, q: q)(a, b))(v4, v3)),
}


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("where", list(_IGNORED_BY_AN_INNER_CHECKPOINT))
def test_remat3_barrier_of_an_outer_checkpoint_whose_scan_constant_an_inner_checkpoint_ignores(where):
    """Finding a6d63c894e (pristine nightly, 0.10.2), and variants: remat3's
    linearized inner checkpoint takes v4's tangent though it ignores it, and
    its transpose gives it a symbolic zero cotangent, which a scan's or
    cond's transpose makes an array: mul's transpose then reads the outer
    checkpoint's input, a barrier (`rem(*optimization_barrier(primals))`)
    though every prevent_cse is False. Straight-line, or in a jit, the zero
    stays symbolic and XLA drops the barrier. The model's answer is JAX's."""
    from oracle.properties import jax_barriers
    from oracle.remat3_model import remat3_barrier_model
    barrier, inner = _IGNORED_BY_AN_INNER_CHECKPOINT[where]
    x = np.float32(-1.13)

    def f(x):
        def body(v3):
            return inner(v3, v3 * v3), v3
        return (_CK(body)(x)[0],)
    with implementation("remat3"):
        assert (jax_barriers(f, (x,)) > 0) == barrier
    assert remat3_barrier_model(trace_jax(f, x)) == barrier
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat3",), properties=("prevent_cse",))
    assert report.status("prevent_cse", "remat3") in ("ok", "known divergence"), str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_names_a_saved_dot_a_jit_forwards_by_the_dot():
    """Finding 2e70fb8063 (pristine nightly, 0.10.2), with both checkpoint
    outputs used: JAX's list read off JAX (saved_residuals under remat3):
    a, b and `output of dot_general`. remat3's forward jit is bound on the
    linearization's trace, which forwards an output that is an input
    (`_pjit_linearize`); the model's jit did not (`output of jitted
    function`)."""
    from jax._src.ad_checkpoint import saved_residuals
    a, b = np.array([0.3, -0.2, 0.5], np.float32), np.full((2, 3), 0.25, np.float32)

    def f(a, b):
        def body(e, x):
            h, i = jax.jit(lambda j, k: (jnp.arccos(k), j))(jnp.dot(e, e), x)
            return h, i * i
        return jax.checkpoint(body, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)(a, b)
    with implementation("remat3"):
        saved = [src for _, src in saved_residuals(f, a, b)]
    assert saved[-1].startswith("output of dot_general"), saved
    report = oracle.check(f, oracle.AS_IS, a, b, implementations=("remat3",), properties=("residuals",))
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
def test_remat3_saves_for_an_unused_output_beside_a_branch_checkpoint_forwarding_its_input():
    """Finding f4ee7f5ef1 (pristine nightly, 0.10.2): remat3 saves what an
    unused checkpoint output (square's) needs, a known divergence; a cond
    branch's checkpoint with an unused output it forwards from its input
    had made the predicate thread that output out too, and the cond's zero
    for it in the other branch was then saved by the model. JAX's list read
    off JAX: the argument a and the cond's index."""
    from jax._src.ad_checkpoint import saved_residuals
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 2, 3)

    def f(a, b):
        c, _ = jax.checkpoint(lambda e: (1.0, jnp.square(e)))(a)
        branch = lambda h: jax.checkpoint(lambda k, l: (l, k), policy=jax.checkpoint_policies.everything_saveable,
                                          prevent_cse=False)(h, h)[0]
        return lax.cond(b, branch, lambda m: m, c)
    with implementation("remat3"):
        saved = [src for _, src in saved_residuals(f, a, np.int32(1))]
    assert [s.split(" from ")[0] if s.startswith("output") else s for s in saved] == [
        "from the argument a", "output of convert_element_type"], saved
    report = oracle.check(f, oracle.AS_IS, a, np.int32(1), implementations=("remat3",), properties=("residuals",))
    assert report.known_divergences == [("remat3-saves-for-unused-checkpoint-outputs", "residuals", "remat3")], \
        str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="remat3: jax 0.10.2")
@pytest.mark.parametrize("printed, expected", [
    ("s + v, t", ["from a constant", "from the argument y", "from the argument z", "from the argument s",
                  "from the argument t"]),
    ("s, t", ["from the argument s", "from the argument t"]),
    ("jit: s + v, t", ["from a constant", "from the argument y", "from the argument z", "from the argument s",
                       "from the argument t"]),
    ("w.sum() + s", ["from the argument y", "from the argument s"]),
])
def test_remat3_saves_what_a_replayed_print_of_a_nested_checkpoint_s_output_recomputes(printed, expected):
    """Finding 3104dd2138 (pristine nightly, 0.10.2), its program written
    smaller, and variants. The backward pass replays the print; where it
    reads the middle checkpoint's output v, remat3 recomputes it by
    rebinding that checkpoint whole, reading every input: the constant and
    y and z are saved, besides the print's operands s and t (the model had
    saved the print's operands alone). Where the print reads w, an input
    the middle checkpoint returns as it is, only that input is saved.
    `expected`: JAX's lists, read off JAX (saved_residuals under remat3)
    and asserted here; the model's must be the same."""
    from jax._src.ad_checkpoint import saved_residuals
    from oracle.remat3_model import producer_sources, remat3_model
    cp = jax.checkpoint_policies
    k = np.full((2, 4, 3), 0.5, np.float32)

    def f(y, z, s, t, u):
        def outer(m, y, z, s, t, u):
            def middle(x, y, z):
                return jax.checkpoint(lambda ad, ae, ag: (1.0, ad), policy=cp.dots_saveable)(x, y, z)[0], y
            v, w = jax.checkpoint(middle, policy=cp.save_only_these_names("a"), prevent_cse=False)(m, y, z)
            operands = {"s + v, t": (s + v, t), "s, t": (s, t), "jit: s + v, t": (s + v, t),
                        "w.sum() + s": (w.sum() + s,)}[printed]
            show = lambda *xs: jax.debug.print(" ".join(["{}"] * len(xs)), *xs)
            (jax.jit(show) if printed.startswith("jit") else show)(*operands)
            return u * 2.0
        return jax.checkpoint(outer, policy=cp.save_only_these_names("a"))(k, y, z, s, t, u)
    args = (np.ones((4, 5), np.float32), np.ones((2, 3), np.float32), np.ones(3, np.float32),
            np.ones(3, np.float32), np.ones(3, np.float32))
    with implementation("remat3"):
        assert [src for _, src in saved_residuals(f, *args)] == expected
    assert [src for _, src in producer_sources(remat3_model(trace_jax(f, *args)))] == expected
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat3",), properties=("residuals",))
    assert report.status("residuals", "remat3") in ("ok", "known divergence"), str(report)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="a linearized jit's tangent trace: measured on jax 0.10.2")
@pytest.mark.parametrize("dead_log", [True, False])
def test_a_dead_reader_in_a_jit_keeps_its_value_the_first_residual(dead_log):
    """Finding bebee5b131 (pristine nightly, 0.10.2): a jit's residuals are
    its linearization's tangent constants in the order they were made, and
    eval_jaxpr's env keeps a value no equation reads to the end
    (core.last_used has no entry for it), so the tangent of a dead `log j`
    keeps j's constant, made first, alive: j is the first residual, before
    sin's cos; without the dead log, cos comes first. JAX's order read off
    JAX (saved_residuals); the spec's must be the same."""
    from jax._src.ad_checkpoint import saved_residuals

    def body(g):
        j = lax.broadcast_in_dim(g, (2, 2, 2), ())
        if dead_log:
            jnp.log(j)
        s = jnp.sin(g)
        return lax.dot_general(j, j, (((2, 0), (1, 2)), ((), ()))), s
    f = jax.jit(body)
    jax_shapes = [tuple(a.shape) for a, _ in saved_residuals(f, np.float32(0.5))]
    assert jax_shapes == ([(2, 2, 2), ()] if dead_log else [(), (2, 2, 2)])
    prog = trace_jax(f, np.float32(0.5))
    assert [tuple(r.type.shape) for r in spec.saved_residuals(prog)] == jax_shapes


def test_a_printing_cond_whose_index_sums_a_printing_jit_s_output_in_a_checkpoint():
    """Finding b11c33dfcd (pristine nightly, 0.10.2): transposing the
    checkpoint, the spec drops the hoisted copy of the printing jit and of
    the printing cond (the staged checkpoint replays them) but kept the sum
    and comparison between them, which read the dropped jit's output: the
    spec raised KeyError in vjp, second_order and prevent_cse."""
    def f(a, b, c):
        def body(e, f_, g):
            h = lax.dot_general(e, e, (((1,), (1,)), ((0,), (0,))))
            i = jax.jit(lambda j: (jax.debug.print("x={x}", x=j), j)[1])(f_)
            m = (jnp.sum(i) > 0).astype(jnp.int32)
            lax.cond(m, lambda o: None, lambda o: jax.debug.print("x={x}", x=o), g)
            return h
        return jax.checkpoint(body, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
                              prevent_cse=False)(a, b, c)
    args = [np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) * k for k in (1.0, 2.0, -1.0)]
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=("vjp", "prevent_cse"))
    assert {r.status for r in report.results} == {"ok"}, str(report)


@pytest.mark.parametrize("k_axis, raised", [(None, "(1, None)"), (0, "(1, 0)"), (1, None)])
def test_vmap_of_vjp_batches_a_scan_s_loop_invariant_primal_outside_the_loop(k_axis, raised):
    """JAX's _scan_known_hoisting traces the known loop body with its consts
    known (pe.trace_to_jaxpr_nounits), so a known computation reading consts
    only runs once, before the loop, in the enclosing trace: under an outer
    vmap, its batching rule sees the batch dims the consts arrive with, not
    the scan body's (batched consts at axis 0). `tie`'s batching rule
    asserts its operands' dims are equal, and says them: (1, None) outside
    the loop, (0, None) inside it (found by a nightly, 73222c7014): both
    must raise it ("not applicable"). With both consts batched along one
    axis, JAX computes: the spec must too, and agree."""
    from fuzz import properties
    from oracle import stacks as S
    from oracle.spellings import Spelling
    from spec.prims_custom import tie

    def fn(j, k):
        return (spec.scan(lambda _c, _x, s, t: (None, tie(s, t)), None, None, consts=(j, k), length=2)[1],)
    vmap = S.Layer("vmap", in_axes=(1, k_axis, None), out_axes=(0, 0), size=2)
    stack = S.Stack((S.Layer("vjp"), vmap))
    report = properties.oracle_agrees(spec.trace(fn, spec.f32[3], spec.f32[3]), implementations=("remat2",),
                                      stack=stack, spelling=Spelling(), only=(S.STACK,))
    status = "ok" if raised is None else "not applicable"
    assert [(r.property, r.status) for r in report.results] == [(S.STACK, status)], str(report)
    if raised is not None:
        assert f"both raise AssertionError: {raised}" in str(report)


def test_a_threaded_output_s_zero_in_another_cond_branch_reads_a_live_operand():
    """remat3 saves what an unused checkpoint output's backward pass reads
    (here the operands of a dot, whose zero tangents it instantiates), and
    the oracle models it by threading the output out of its cond branch,
    the other branch returning 0 * sum(x) for it. x must be an operand
    that branch's live code reads: the other operand, read only by dead
    code, would need its own tangent, and so sin's cos (found by a
    nightly, 00592ff8de: the model saved the cos, JAX did not)."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    r, s = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    policy = jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.save_only_these_names("a"), jax.checkpoint_policies.dots_saveable)

    def dead_code_then_other(e, a):
        e * a
        return a

    def make():     # built under each implementation (jax.checkpoint picks it when called)
        body = jax.checkpoint(lambda r, s, t: (t, jnp.dot(r, s)), policy=policy)
        return jax.jit(lambda a, i: lax.cond(i > 0, dead_code_then_other, lambda e, a: body(r, s, a)[0],
                                             jnp.sin(a), a))
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, np.float32(0.7), np.int32(0),
                          properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    assert report.status("residuals", "remat3") == "known divergence", str(report)


def test_a_generic_reduce_window_no_output_depends_on_through_a_while_loop():
    """A generic reduce_window's output is a scan's carry that the body
    passes only through a while loop, unchanged, beside the carry the loop
    returns (the finding's: a while body const the body never reads): no
    output depends on it, yet it is live (dead-code removal keeps it).
    Linearizing by JVP then partial evaluation (before direct
    linearization) the while's outputs are known whatever that const, so
    JAX computes; the spec, linearizing directly, refuses the window, and
    following JAX's older linearization (direct_linearization=False)
    computes (release campaign finding 9b7516a386 on 0.4.36). JAX computing
    is read off JAX."""
    ones = np.ones((2, 3), np.float32)

    def f(a):
        b = lax.reduce_window(a, 0.0, lambda c, d: c, (3, 2), (2, 1), ((1, 1), (1, 0)))

        def step(h, _):
            i = lax.while_loop(lambda k: jnp.sum(k[0]) < 37.5, lambda k: (k[0] + 1.0 - 0.0 * ones, k[1]),
                               (ones, h))[0]
            return h, i
        return lax.scan(step, b, None, length=2)[1]
    x = np.arange(20, dtype=np.float32).reshape(5, 4) / 10
    try:
        jax.vjp(f, x)[1](np.ones((2, 2, 3), np.float32))
        computes = True
    except (ValueError, NotImplementedError):   # direct linearization (and before 0.4.28, no JVP rule) refuses
        computes = False
    assert computes == _divergence_active("linearize-ignores-an-unlinearizable-dead-primal")
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals", "vjp"))
    for prop in ("residuals", "vjp"):
        status = report.status(prop, "remat2")
        assert status in (("known divergence",) if computes else ("not applicable", "known divergence")), str(report)


@pytest.mark.parametrize("inner_cse, innermost_cse", [(False, True), (True, True), (False, False)])
def test_a_checkpoint_nested_in_a_replayed_checkpoint_is_barriered(inner_cse, innermost_cse):
    """The backward pass of a checkpoint recomputes a nested checkpoint
    whose tangent nothing reads (its output only decides a `where`):
    remat_transpose's partial evaluation evaluates that known checkpoint
    inline (no barrier of its own), binding the equations of its body as
    they are, so a checkpoint nested in it, differentiated, is lowered
    with its barrier where its prevent_cse is set (found by a release
    campaign on 0.4.36, 6dc18efcf5, a false alarm on 0.10.2 too: the spec
    counted 0, the HLO 1). JAX's count is read off its HLO."""
    def make():     # built under each implementation (jax.checkpoint picks it when called)
        def outer(c):
            inner = jax.checkpoint(lambda e: jnp.sum(e * jax.checkpoint(lambda g: g, prevent_cse=innermost_cse)(e)),
                                   prevent_cse=inner_cse)
            return jnp.where(inner(c) > 0, c, 2.0 * c)
        return jax.checkpoint(outer, prevent_cse=False)
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, np.ones((2, 3), np.float32),
                          implementations=("remat2",), properties=("prevent_cse",))
    assert report.status("prevent_cse", "remat2") == "ok", str(report)


@pytest.mark.skipif(not hasattr(lax, "ragged_dot"), reason="no lax.ragged_dot on this release")
@pytest.mark.parametrize("dead, b_axis", [("ragged_dot", 1), ("ragged_dot", None), ("sin", 1)])
def test_remat3_batches_a_checkpoint_s_dead_code(dead, b_axis):
    """vmap o grad of a checkpoint whose body computes a ragged_dot nothing
    reads: remat3 runs the body as written, the dead ragged_dot and its
    derivative too, so the vmap batches them (even with the ragged_dot's
    operands unbatched: its transpose reads a batched cotangent), and its
    batching rule raises NotImplementedError; remat2 removes the dead code
    (found by a pristine nightly, 410783b9f9). The known divergence names
    exactly that: a dead `sin` batches, and remat3 computes and agrees."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    from fuzz import properties
    from oracle import stacks as S
    gs = np.array([2, 2, 2], np.int32)

    def f(a, b, c):
        def body(a, b, c):
            lax.ragged_dot(b, c, gs) if dead == "ragged_dot" else jnp.sin(b)
            return jnp.sin(a)
        return jax.checkpoint(body)(a, b, c)
    args = (np.ones(3, np.float32), np.ones((6, 3), np.float32), np.ones((3, 3, 2), np.float32))
    prog = trace_jax(f, *args)
    stack = S.Stack((S.Layer("grad"), S.Layer("vmap", in_axes=(0, b_axis, None, 0), out_axes=(0, 0, 0), size=2)))
    report = properties.oracle_agrees(prog, implementations=("remat2", "remat3"), stack=stack, only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == "ok", str(report)
    want = "known divergence" if dead == "ragged_dot" else "ok"
    assert report.status(S.STACK, "remat3") == want, str(report)
    if dead == "ragged_dot":
        assert [k[0] for k in report.known_divergences] == ["remat3-forward-pass-runs-a-checkpoint-s-dead-code"]


def test_remat3_captures_a_checkpoint_s_closed_over_constant_after_a_constant_argument():
    """A checkpoint closing over a constant array (a while loop's initial
    carry) and given another as an argument (the loop's body const), whose
    tangents remat3 instantiates: JAX lists the argument's constant first,
    the model the closed-over one (a leading operand of the checkpoint in
    both); the order in which remat3's trace captures constants is not
    modelled, and the attribution compares the constants in one order
    (found by a pristine nightly, e5790aba5d, reduced). JAX's list is
    read off JAX inside oracle.check."""
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    carry0, step = np.full((2, 3), 0.5, np.float32), np.full((2, 1), 0.25, np.float32)

    def make():     # built under each implementation (jax.checkpoint picks it when called)
        def body(h, j):
            return lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + h), (0, carry0))[1] + 0 * j
        ck = jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"))
        return lambda j: jnp.sum(ck(step, j) ** 2)
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, np.ones((2, 3), np.float32),
                          properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok", str(report)
    assert report.status("residuals", "remat3") == "known divergence", str(report)
