"""fuzz/reduce.py: a failing program reduced step by step, each step kept
only where the failure stays. The failures here are predicates on the
program's structure (what a JAX bug would need to be visible); the
expected programs are written out by hand."""
import numpy as np

import spec
from fuzz.reduce import candidates, equation_count, reduced
from spec import ops
from spec.remat import checkpoint, checkpoint_name
from spec.prims_call import call

P = spec.policies
f32 = spec.f32


def _names(prog) -> list:
    """Primitive names, depth first (sub-programs right after their equation)."""
    out = []
    for e in prog.eqns:
        out.append(e.primitive.name)
        for _, sub in spec.ir.subprograms(e.params):
            out += _names(sub)
    return out


def _named_residual_program():
    """A shrunk finding's shape: a names-policy checkpoint that matters,
    and a jit, a second checkpoint, dead code and outputs that do not."""
    def named(x):
        return ops.sin(checkpoint_name(ops.sin(x), "b"))

    def other(x, w):
        return ops.cos(x) * w

    def fn(x, w, z):
        dead = ops.exp(z)                                            # noqa: F841
        jitted, = call(spec.trace(lambda a: ops.tanh(a) + a, f32[3]), x)
        a = checkpoint(named, policy=P.save_any_names_but_these("b"))(jitted)
        b = checkpoint(other, policy=P.dots_saveable)(x, w)
        return a, b, ops.neg(z)
    return spec.trace(fn, f32[3], f32[3], f32[3])


def _fails(prog) -> bool:
    """The 'bug': a save_any_names_but_these checkpoint naming a value."""
    def has(p, inside=False):
        for e in p.eqns:
            here = inside or (e.primitive.name == "remat"
                              and isinstance(e.params["policy"], P.save_any_names_but_these))
            if here and e.primitive.name == "name":
                return True
            if any(has(sub, here) for _, sub in spec.ir.subprograms(e.params)):
                return True
        return False
    return has(prog)


def test_reduces_to_the_checkpoint_and_the_name_that_fail():
    prog = _named_residual_program()
    assert equation_count(prog) == 12
    small = reduced(prog, _fails, budget_s=30)
    assert _fails(small)
    assert _names(small) == ["remat", "name"]
    assert len(small.inputs) == 1 and len(small.outputs) == 1


def test_every_kept_step_still_fails_and_is_smaller():
    kept = []

    def fails(p):
        ok = _fails(p)
        if ok:
            kept.append(p)
        return ok
    prog = _named_residual_program()
    reduced(prog, fails, budget_s=30)
    sizes = [equation_count(p) for p in [prog] + kept]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]


def test_keep_signature_keeps_inputs_and_outputs():
    prog = _named_residual_program()
    small = reduced(prog, _fails, budget_s=30, keep_signature=True)
    assert [v.type for v in small.inputs] == [v.type for v in prog.inputs]
    assert [a.type for a in small.outputs] == [a.type for a in prog.outputs]
    assert equation_count(small) < equation_count(prog)


def test_values_are_kept_by_dce_and_inlining():
    """Dead code removal and inlining keep the values (the bypass does not:
    it is kept only where the failure stays)."""
    prog = _named_residual_program()
    args = [np.linspace(0.1, 0.9, 3, dtype=np.float32) * k for k in (1, 2, 3)]
    want = spec.evaluate(prog, *args)
    dce_only, *rest = candidates(prog)
    for got, w in zip(spec.evaluate(dce_only, *args), want):
        np.testing.assert_array_equal(got, w)
    from fuzz.reduce import _inlined
    for k, e in enumerate(prog.eqns):
        if e.primitive.name in ("call", "remat"):
            for got, w in zip(spec.evaluate(_inlined(prog, k), *args), want):
                np.testing.assert_array_equal(got, w)


def test_a_check_that_raises_or_no_budget_keeps_the_program():
    prog = _named_residual_program()
    assert reduced(prog, _fails, budget_s=0) is prog

    def raises(p):
        raise RuntimeError("the check cannot take this candidate")
    assert reduced(prog, raises, budget_s=30) is prog


def test_inside_a_cond_branch_the_branch_signature_stays():
    def fn(p, x):
        return spec.cond(p, lambda v: ops.sin(ops.cos(v)), lambda v: ops.exp(v), x)
    prog = spec.trace(fn, spec.bool_[()], f32[3])
    small = reduced(prog, lambda q: "cos" in _names(q) and "exp" in _names(q), budget_s=30)
    assert _names(small) == ["cond", "exp", "cos"]          # the index's conversion cut: an input
    assert [str(t) for t in small.in_types] == ["f32[3]", "i32[]"]
    spec.evaluate(small, np.ones(3, np.float32), np.int32(1))    # still a valid program


def test_a_dead_equation_the_failure_needs_stays():
    """Dead code goes one equation at a time where the failure needs some
    of it (JAX before direct linearization differentiates dead code: a
    release campaign's finding on 0.4.36, 0fef3f486a, needed a dead
    scatter, whose every candidate the reducer had DCE'd whole)."""
    def fn(x, y):
        ops.exp(x)                   # dead, needed
        ops.tanh(ops.cos(y))         # dead, not needed
        return (ops.sin(x) * y,)
    prog = spec.trace(fn, f32[3], f32[3])
    small = reduced(prog, lambda q: "exp" in _names(q), budget_s=30)
    assert _names(small) == ["exp"]
    assert equation_count(small) == 1


def test_an_equation_is_cut_to_an_input_and_a_cond_to_a_branch():
    """An equation whose output no operand can stand in for (a reshape's)
    is cut: its output read as a new input; a cond gives way to a branch."""
    def fn(p, x):
        r = ops.reshape(x, (3,))
        return (spec.cond(p, lambda v: ops.sin(v), lambda v: ops.exp(ops.cos(v)), r),)
    prog = spec.trace(fn, spec.bool_[()], f32[1, 3])
    small = reduced(prog, lambda q: "cos" in _names(q), budget_s=30)
    assert _names(small) == ["cos"]
    assert [str(t) for t in small.in_types] == ["f32[3]"]
    np.testing.assert_array_equal(spec.evaluate(small, np.zeros(3, np.float32))[0], np.ones(3, np.float32))


def test_pytest_fuzz_reports_the_reduced_failure_in_hypothesis_final_replay():
    """fuzz/focus.py: in Hypothesis' final replay of a failing example the
    Mismatch raised is the reduced program's (a bug planted into JAX:
    save_only_these_names saves exactly the other names; the dead `exp`
    and the unread output `cos` go, the names checkpoint stays)."""
    import pytest
    pytest.importorskip("jax")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import oracle
    import planted_bugs
    from fuzz.focus import Focus

    def fn(x, y):
        dead = ops.exp(y)                                            # noqa: F841
        named = checkpoint(lambda v: ops.sin(checkpoint_name(ops.sin(v), "a")),
                           policy=P.save_only_these_names("a"))(x)
        return named, ops.cos(y)
    prog = spec.trace(fn, f32[3], f32[3])
    focus = Focus(("remat2",))

    @settings(max_examples=1, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.just(prog))
    def check(p):
        focus.check(p)
    with planted_bugs.BUGS["save_only_these_names_inverted"]():
        with pytest.raises(oracle.Mismatch) as excinfo:
            check()
    msg = str(excinfo.value)
    assert msg.startswith(f"(reduced from {equation_count(prog)} to "), msg[:300]
    assert "residuals differs under remat2" in msg
    assert msg.startswith(f"(reduced from {equation_count(prog)} to 4 equations"), msg[:300]  # remat, sin, name, sin


def test_a_custom_call_body_stays_the_function_its_rules_differentiate():
    """A custom_vjp call's body is not reduced on its own (its fwd and bwd
    rules are traced from Python functions and would still compute the
    original): a nightly finding (ab97f5437e) was reduced to a custom_vjp
    whose primal was the identity and whose fwd computed sin."""
    f = spec.custom_vjp(lambda v: ops.sin(ops.cos(v)), lambda v: (ops.sin(ops.cos(v)), ops.cos(v)),
                        lambda r, ct: (ct * r,))
    prog = spec.trace(lambda x: ops.exp(f(x)), f32[3])
    body_sizes = {equation_count(e.params["jaxpr"]) for c in candidates(prog) for e in c.eqns
                  if e.primitive.name == "custom_vjp_call"}
    assert body_sizes == {2}
    # the call itself may still go: bypassed by its operand
    assert any("custom_vjp_call" not in _names(c) for c in candidates(prog))


def test_a_while_loop_s_body_and_condition_keep_their_values():
    """Inside a while loop only value-keeping steps: the campaign's driver
    reported a "hang" (finding 9164e12ae9) that was the reducer's own, a
    loop body whose carry update `x + step` it had bypassed by `x`, which
    then ran forever inside XLA. Outside the loop the bypass still applies.
    Every candidate's loop body computes numpy's step (x + 1 + 0.1 tanh(x))
    and its condition numpy's test (sum(x) < 4.5)."""
    def body(w, x):
        dead = ops.exp(w)                                            # noqa: F841
        return x + (1.0 + 0.1 * ops.tanh(x))

    def fn(w, x):
        out = spec.while_loop(lambda v: ops.reduce_sum(v, (0,)) < 4.5, body, x, body_consts=(w,))
        return ops.sin(out), ops.cos(w)
    prog = spec.trace(fn, f32[3], f32[3])
    w, x = np.ones(3, np.float32), np.array([0.5, 1.0, 1.5], np.float32)
    loops = 0
    for c in candidates(prog):
        for e in c.eqns:
            if e.primitive.name == "while":
                loops += 1
                step, = spec.evaluate(e.params["body_jaxpr"], *([w] * e.params["body_nconsts"]), x)
                np.testing.assert_allclose(step, x + 1.0 + 0.1 * np.tanh(x), rtol=1e-6)
                assert spec.evaluate(e.params["cond_jaxpr"], x)[0] == (x.sum() < 4.5)
    assert loops >= 3      # the whole program, its outputs dropped one at a time, the body's dead exp gone
    assert any("while" not in _names(c) for c in candidates(prog))      # bypassed as a whole


def _nested_passthrough_conds():
    """An outer cond whose branches return operand b, one of them through an
    inner cond whose branches both return it: what a reduction step leaves
    of a nested cond once the branches' own equations are bypassed."""
    from spec.prims_control import cond_eqn
    second = spec.trace(lambda a, b: (b,), f32[3], f32[3])

    def index_of(x):
        return ops.convert_element_type(ops.gt(ops.reduce_sum(x, (0,)), 0.0), np.int32)

    def inner(a, b):
        return cond_eqn(index_of(b), a, b, branches=(second, second))

    def fn(a, b):
        return cond_eqn(index_of(ops.sin(b)), a, b, branches=(second, spec.trace(inner, f32[3], f32[3])))
    return spec.trace(fn, f32[3], f32[3])


def test_a_candidate_s_passthrough_cond_outputs_are_pruned_as_lax_cond_does():
    """lax.cond (from jax 0.6.0) prunes an output every branch forwards from
    the same operand, and an inner cond pruned makes its branch forward
    too: the program JAX stages for the reproducer of a reduced nested
    cond returns the operand itself (release campaign finding c86d6c6549
    on 0.6.2: JAX saved nothing where the candidate's spec saved two
    indices). The reducer's candidates are pruned so; on a release that
    prunes, JAX's own jaxpr of the same function is the independent
    answer."""
    import jax
    import jax.numpy as jnp
    from fuzz.reduce import passthroughs_pruned
    prog = _nested_passthrough_conds()
    pruned = passthroughs_pruned(prog)
    assert pruned.outputs == [pruned.inputs[1]]
    assert [len(e.outputs) for e in pruned.eqns if e.primitive.name == "cond"] == [0]
    assert _names(pruned).count("cond") == 2 and _names(prog).count("cond") == 2

    def index_of(x):
        return (jnp.sum(x) > 0).astype(jnp.int32)

    def fn(a, b):
        inner = lambda a, b: jax.lax.switch(index_of(b), [lambda a, b: b] * 2, a, b)    # noqa: E731
        return jax.lax.switch(index_of(jnp.sin(b)), [lambda a, b: b, inner], a, b)
    jaxpr = jax.make_jaxpr(fn)(np.ones(3, np.float32), np.ones(3, np.float32)).jaxpr
    if jaxpr.outvars[0] is jaxpr.invars[1]:        # this release prunes passthroughs (jax 0.6.0 on)
        assert [len(e.outvars) for e in jaxpr.eqns if e.primitive.name == "cond"] == [0]


def test_inside_a_branch_an_index_chain_is_made_a_constant():
    """In a sub-program, whose inputs stay, an equation is cut by making its
    output a constant: a nested cond's index chain (reduce_sum, gt, its
    conversion) goes, the index a literal (a release campaign's finding on
    0.6.2, 87914f9e56, reduced from 25 to 4 equations so)."""
    def inner(v):
        return spec.cond(ops.gt(ops.reduce_sum(v, (0,)), 0.0), lambda u: ops.sin(u), lambda u: ops.cos(u), v)
    prog = spec.trace(lambda p, x: (spec.cond(p, inner, lambda v: v * 2.0, x),), spec.bool_[()], f32[3])
    small = reduced(prog, lambda q: _names(q).count("cond") == 2 and "sin" in _names(q), budget_s=30)
    assert _names(small) == ["cond", "cond", "sin"]
    nested = small.eqns[0].params["branches"][1].eqns[0]
    assert isinstance(nested.inputs[0], spec.ir.Literal) and int(nested.inputs[0].value) == 1
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(spec.evaluate(small, *[x if t.shape else np.int32(1) for t in small.in_types])[0],
                               np.sin(x))
