"""Invariants of remat (issue 3, item 5) and its error messages.

Reference values come from the program *without* checkpoint evaluated by
numpy and from float64 central finite differences, never from the
checkpointed program itself."""
import numpy as np
import pytest

import spec
from spec import ops, policies as P, prims_call

# Test programs: each a function of spec values plus its input types. Each
# binds names 'h' and 'a' so every name policy applies.
def mlp(x, W1, W2):
    h = ops.checkpoint_name(ops.sin(x @ W1), "h")
    a = ops.checkpoint_name(ops.tanh(h @ W2), "a")
    return ops.reduce_sum(a * a, (0,))


def attention_like(q, k):
    s = ops.dot_general(q, k, (((2,), (2,)), ((0,), (0,))), preferred_element_type=np.float64)
    h = ops.checkpoint_name(ops.exp(s), "h")
    a = ops.checkpoint_name(ops.logistic(h), "a")
    return ops.reduce_sum(a * h, (0, 1, 2))


def chain(x, y):
    h = ops.checkpoint_name(ops.sin(x) * y, "h")
    a = ops.checkpoint_name(ops.log1p(ops.square(h)), "a")
    return ops.reduce_sum(ops.max(a, y) + ops.cos(a), (0,))


PROGRAMS = {
    "mlp": (mlp, (spec.f64[3], spec.f64[3, 4], spec.f64[4, 2])),
    "attention_like": (attention_like, (spec.f64[2, 3, 4], spec.f64[2, 5, 4])),
    "chain": (chain, (spec.f64[5], spec.f64[5])),
}


def user_saves_sin(prim, *in_types, **params):
    return prim.name == "sin"


POLICIES = {
    "none": None,
    "nothing_saveable": P.nothing_saveable,
    "everything_saveable": P.everything_saveable,
    "dots_saveable": P.dots_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "save_only_h": P.save_only_these_names("h"),
    "save_any_names_but_a": P.save_any_names_but_these("a"),
    "save_anything_except_a": P.save_anything_except_these_names("a"),
    "both(dots, only_h)": P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("h")),
    "user_saves_sin": user_saves_sin,
    "offload_names": P.save_and_offload_only_these_names(
        names_which_can_be_saved=["h"], names_which_can_be_offloaded=["a"],
        offload_src="device", offload_dst="pinned_host"),
    "offload_dots": P.offload_dot_with_no_batch_dims("device", "pinned_host"),
}


def checkpointed(fn, policy):
    return lambda *xs: ops.checkpoint(fn, policy=policy)(*xs)


def inputs(types, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.2, 1.0, t.shape).astype(t.dtype) for t in types]


def fd_grad(prog, args, eps=1e-6):
    """float64 central differences: truncation O(eps^2), rounding O(1e-16/eps)
    ~1e-10, so 1e-6 relative agreement is a safe bound for these smooth
    programs of O(1) values."""
    grads = []
    for i, x in enumerate(args):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            up, dn = [a.copy() for a in args], [a.copy() for a in args]
            up[i][idx] += eps
            dn[i][idx] -= eps
            g[idx] = (spec.evaluate(prog, *up)[0] - spec.evaluate(prog, *dn)[0]) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("pname", POLICIES)
@pytest.mark.parametrize("name", PROGRAMS)
def test_remat_leaves_values_and_gradients_unchanged(name, pname):
    fn, types = PROGRAMS[name]
    plain = spec.trace(fn, *types)
    remat = spec.trace(checkpointed(fn, POLICIES[pname]), *types)
    spec.check_program(remat)
    args = inputs(types)
    np.testing.assert_allclose(spec.evaluate(remat, *args)[0], spec.evaluate(plain, *args)[0], rtol=1e-12)
    _, vjp_fn, _ = spec.vjp(remat, *args)
    got = vjp_fn(np.ones((), np.float64))
    for g, ref in zip(got, fd_grad(plain, args)):
        np.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-8)
    # JVP along a random direction equals the directional finite difference
    rng = np.random.default_rng(1)
    ts = [rng.standard_normal(t.shape) for t in types]
    out, out_t = spec.evaluate(spec.jvp(remat), *args, *ts)
    eps = 1e-6
    up = spec.evaluate(plain, *[a + eps * t for a, t in zip(args, ts)])[0]
    dn = spec.evaluate(plain, *[a - eps * t for a, t in zip(args, ts)])[0]
    np.testing.assert_allclose(out_t, (up - dn) / (2 * eps), rtol=1e-6, atol=1e-8)


def _res(prog):
    return [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]


@pytest.mark.parametrize("name", PROGRAMS)
def test_nothing_saveable_saves_only_checkpoint_inputs(name):
    fn, types = PROGRAMS[name]
    for policy in (None, P.nothing_saveable):
        res = spec.saved_residuals(spec.trace(checkpointed(fn, policy), *types))
        assert res and all(r.source.kind == "argument" for r in res)


@pytest.mark.parametrize("name", PROGRAMS)
def test_everything_saveable_equals_no_remat(name):
    fn, types = PROGRAMS[name]
    plain = sorted(_res(spec.trace(lambda *xs: fn(*xs), *types)))   # same argument names
    every = sorted(_res(spec.trace(checkpointed(fn, P.everything_saveable), *types)))
    assert every == plain


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("a,b", [("dots_saveable", "save_only_h"), ("user_saves_sin", "save_any_names_but_a"),
                                 ("dots_with_no_batch_dims_saveable", "user_saves_sin")])
def test_save_from_both_saves_the_union(name, a, b):
    """save_from_both_policies(a, b) answers Saveable exactly where a or b
    does, on every equation a checkpoint's partial evaluation asks about;
    so it never recomputes more than either."""
    fn, types = PROGRAMS[name]
    pa, pb = POLICIES[a], POLICIES[b]
    both = P.save_from_both_policies(pa, pb)
    body = spec.jvp(spec.trace(fn, *types))
    for e in body.eqns:
        ask = lambda pol: P.ask(pol, e.primitive, [x.type for x in e.inputs], e.params)
        assert (ask(both) is P.Saveable) == (ask(pa) is P.Saveable or ask(pb) is P.Saveable), e
    flops = lambda pol: spec.explain(spec.trace(checkpointed(fn, pol), *types)).recompute_flops
    assert flops(both) <= min(flops(pa), flops(pb))
    saved = lambda pol: {s for s in _res(spec.trace(checkpointed(fn, pol), *types)) if "argument" not in s[1]}
    assert saved(both) <= saved(pa) | saved(pb)


BOOLEAN = ["nothing_saveable", "dots_saveable", "save_only_h", "save_any_names_but_a",
           "user_saves_sin", "everything_saveable"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_saving_more_never_recomputes_more(name):
    fn, types = PROGRAMS[name]
    flops = {}
    for pname in BOOLEAN:
        flops[pname] = spec.explain(spec.trace(checkpointed(fn, POLICIES[pname]), *types)).recompute_flops
    # a policy's saved set contains another's when it says yes to all the other says yes to
    for small, big in [("nothing_saveable", p) for p in BOOLEAN] + [(p, "everything_saveable") for p in BOOLEAN]:
        assert flops[big] <= flops[small], (small, big, flops)
    both = P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("h"))
    f_both = spec.explain(spec.trace(checkpointed(fn, both), *types)).recompute_flops
    assert f_both <= min(flops["dots_saveable"], flops["save_only_h"])
    assert flops["everything_saveable"] == 0


def test_offload_residuals_live_in_host_memory():
    fn, types = PROGRAMS["mlp"]
    prog = spec.trace(checkpointed(fn, POLICIES["offload_names"]), *types)
    res = _res(prog)
    assert ("f64<host>[2]", "output of device_put") in res or any("<host>" in t for t, _ in res)
    lin = spec.linearize(prog)
    text = str(lin.forward) + str(lin.linear)
    assert text.count("device_put") >= 2


def test_explain_table_for_mlp_under_dots_saveable():
    layer = lambda x, W, b: ops.reduce_sum(ops.tanh(x @ W + b), (0,))
    prog = spec.trace(lambda *a: ops.checkpoint(layer, policy=P.dots_saveable)(*a),
                      spec.f32[8], spec.f32[8, 16], spec.f32[16])
    ex = spec.explain(prog)
    table = str(ex)
    assert "policy dots_saveable answered Saveable" in table
    assert "input of the checkpoint" in table
    # b is saved too: recomputing tanh(x @ W + b) needs it
    assert [str(r.residual.source) for r in ex.residuals] == [
        "from the argument a[0]", "from the argument a[1]", "from the argument a[2]",
        "output of dot_general"]
    assert ex.saved_bytes == 8 * 4 + 8 * 16 * 4 + 16 * 4 + 16 * 4
    # add, tanh, sub are recomputed: 16 elements each
    assert [e.primitive.name for e in ex.recomputed] == ["add", "tanh", "sub"]
    assert ex.recompute_flops == 3 * 16


# -- errors --------------------------------------------------------------

def test_policy_with_invalid_result_is_a_clear_error():
    bad = lambda prim, *_, **__: "yes"
    prog = spec.trace(checkpointed(mlp, bad), spec.f32[3], spec.f32[3, 4], spec.f32[4, 2])
    with pytest.raises(P.PolicyError, match="returned 'yes'"):
        spec.saved_residuals(prog)


def test_policy_that_raises_is_a_clear_error():
    def boom(prim, *_, **__):
        raise KeyError("oops")
    prog = spec.trace(checkpointed(mlp, boom), spec.f32[3], spec.f32[3, 4], spec.f32[4, 2])
    with pytest.raises(P.PolicyError, match="raised KeyError"):
        spec.saved_residuals(prog)


def test_unknown_name_in_policy_is_a_clear_error():
    with pytest.raises(P.PolicyError, match=r"\['typo'\]"):
        spec.trace(checkpointed(mlp, P.save_only_these_names("typo")),
                   spec.f32[3], spec.f32[3, 4], spec.f32[4, 2])
    with pytest.raises(P.PolicyError, match="strings"):
        P.save_only_these_names(3)


def test_non_array_input_to_checkpoint_is_a_clear_error():
    with pytest.raises(TypeError, match="checkpoint: argument 1"):
        spec.trace(lambda x: ops.checkpoint(lambda a, b: a * b)(x, "two"), spec.f32[3])
    with pytest.raises(TypeError, match="array types"):
        spec.trace(lambda x: x, [3])


def test_static_argnums():
    f = lambda x, n: ops.integer_pow(ops.sin(x), n)
    prog = spec.trace(lambda x: ops.checkpoint(f, static_argnums=(1,))(x, 3), spec.f64[4])
    x = np.linspace(0.1, 1.0, 4)
    np.testing.assert_allclose(spec.evaluate(prog, x)[0], np.sin(x) ** 3, rtol=1e-14)


def _exp_of_tanh_saving_tanh():
    """checkpoint(lambda x: exp(tanh(x)), policy=save tanh) under grad."""
    saves_tanh = lambda prim, *_, **__: prim.name == "tanh"
    return spec.trace(lambda x: ops.reduce_sum(
        ops.checkpoint(lambda y: ops.exp(ops.tanh(y)), policy=saves_tanh)(x), (0,)), spec.f32[3])


def test_a_saved_value_the_hoisted_part_reads_is_rounded_as_jax_rounds_it():
    """JAX 0.10.2's grad of checkpoint(exp o tanh, save tanh) (jax.make_jaxpr,
    recorded by hand for jax-ml/jax's _insert_reduce_precision):
        b = tanh a; c = reduce_precision[exponent_bits=8 mantissa_bits=23] b
        d = exp c; ...; remat2[differentiated=True] c ...
    the producer writes b, read by the rounding alone; the hoisted exp and
    the staged remat read the rounded c."""
    grad = spec.grad(_exp_of_tanh_saving_tanh())
    names = [e.primitive.name for e in grad.eqns]
    tanh = grad.eqns[names.index("tanh")]
    rounding = grad.eqns[names.index("tanh") + 1]
    assert rounding.primitive.name == "reduce_precision"
    assert rounding.params == dict(exponent_bits=8, mantissa_bits=23)
    assert rounding.inputs == tanh.outputs
    readers = [e.primitive.name for e in grad.eqns if any(a is tanh.outputs[0] for a in e.inputs)]
    assert readers == ["reduce_precision"]
    remat = grad.eqns[names.index("remat")]
    assert rounding.outputs[0] in remat.inputs


def test_a_value_and_its_rounding_are_both_saved_a_second_time():
    """Differentiated again, tanh's JVP reads tanh's own output and the staged
    remat the rounded copy: two residuals, both named `output of tanh`
    (saved_residuals looks through reduce_precision)."""
    twice = spec.saved_residuals(spec.grad(_exp_of_tanh_saving_tanh()))
    assert [str(r.source) for r in twice].count("output of tanh") == 2
    once = spec.saved_residuals(_exp_of_tanh_saving_tanh())
    assert [str(r.source) for r in once] == ["output of tanh"]


def test_a_value_rounded_for_a_checkpoint_keeps_its_exact_value():
    """The rounding is to the value's own format: an identity on values."""
    prog = _exp_of_tanh_saving_tanh()
    x = np.array([0.3, -1.2, 2.5], np.float32)
    got, = spec.evaluate(spec.grad(prog), x)
    want = np.exp(np.tanh(x.astype(np.float64))) * (1 - np.tanh(x.astype(np.float64)) ** 2)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _two_jits_closing_over_sin():
    """jax.checkpoint(f, policy=everything_saveable) of f(x): y = sin(x),
    x1 = jit(lambda: x * y)(), jit(lambda: x1 * y)() (JAX's
    test_remat_of_jit_input_to_output_forwarding)."""
    def mul_jit(a, b):
        body = spec.trace(lambda u, v: ops.mul(u, v), spec.f32[()], spec.f32[()])
        return prims_call.call(body, a, b, name="<lambda>")[0]

    def f(x):
        y = ops.sin(x)
        return mul_jit(mul_jit(x, y), y)
    return spec.trace(ops.checkpoint(f, policy=P.everything_saveable), spec.f32[()])


def test_remat_of_jit_forwards_inputs_as_jax_0_10_2_does():
    # recorded with tools/releases.py: jax 0.4.29..0.5.x and 0.9.1.. save 4
    # (x, sin, cos, the first jit's output), 0.4.25..0.4.28 and 0.6.x..0.9.0
    # save sin(x) again from each jit: 5
    from spec.semantics import following
    prog = _two_jits_closing_over_sin()
    assert [str(r.source) for r in spec.saved_residuals(prog)] == [
        "from the argument args[0]", "output of sin", "output of cos", "output of jitted function '<lambda>'"]
    with following(remat_of_jit_forwards_inputs=False):
        sources = [str(r.source) for r in spec.saved_residuals(prog)]
    assert sorted(sources) == sorted(["from the argument args[0]", "output of cos"]
                                     + ["output of jitted function '<lambda>'"] * 3)


@pytest.mark.parametrize("prevent_cse", [True, (True,)])
def test_checkpoint_passes_the_arrays_its_body_closes_over_as_leading_operands(prevent_cse):
    """jax.checkpoint's fun_remat binds remat with the traced body's consts
    (first use first) before the arguments, their prevent_cse flags False;
    spec.checkpoint makes the same equation. JAX's jaxpr is the independent
    answer (found through a pristine campaign, adaec2e930: remat3 gives a
    closed-over array's zero tangent to the checkpoint, as an operand)."""
    jax = pytest.importorskip("jax")
    from oracle import jax_api
    if isinstance(prevent_cse, tuple) and not jax_api.capabilities().per_argument_prevent_cse:
        pytest.skip(f"jax {jax.__version__}: prevent_cse is a bool only")
    k1, k2 = np.arange(3, dtype=np.float32), np.arange(3, dtype=np.float32) + 5

    def body(mul, add, y):
        return add(mul(y, k2), mul(k1, y)), k2
    prog = spec.trace(lambda x: ops.checkpoint(lambda y: body(ops.mul, ops.add, y), prevent_cse=prevent_cse)(x),
                      spec.f32[3])
    jaxpr = jax.make_jaxpr(lambda x: jax.checkpoint(lambda y: body(jax.lax.mul, jax.lax.add, y),
                                                    prevent_cse=prevent_cse)(x))(np.ones(3, np.float32))
    eqn, = prog.eqns
    jax_eqn, = jaxpr.jaxpr.eqns
    flags = lambda p: tuple(p) if isinstance(p, tuple) else p     # noqa: E731
    assert flags(eqn.params["prevent_cse"]) == flags(jax_eqn.params["prevent_cse"])
    consts = dict(zip(jaxpr.jaxpr.constvars, jaxpr.consts))
    want = [consts[v] if v in consts else "argument" for v in jax_eqn.invars]
    got = [a.value if isinstance(a, spec.Literal) else "argument" for a in eqn.inputs]
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        assert (isinstance(g, str) and g == w) or np.array_equal(g, w)
    assert not any(isinstance(a, spec.Literal) for e in eqn.params["jaxpr"].eqns for a in e.inputs)
