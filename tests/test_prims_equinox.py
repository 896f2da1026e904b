"""equinox's primitives (spec/prims_equinox.py) against equinox's own
behaviour, run through JAX: each expected value, error and batched
program comes from equinox/JAX (or numpy), never from the spec. Then
oracle.check on losses as equinox users write them: eqx.error_if in an MLP
loss, equinox.internal.while_loop (checkpointed, bounded) and
equinox.internal.scan (checkpointed, its ys a write-once buffer).
"""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec import f32, i32, bool_
from spec.prims_equinox import (error_if, maybe_set, nonbatchable, select_if_vmap, unvmap_all, unvmap_any,
                                unvmap_max)

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
import equinox.internal as eqxi  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from equinox._unvmap import unvmap_all as eqx_unvmap_all, unvmap_any as eqx_unvmap_any  # noqa: E402
from equinox._unvmap import unvmap_max as eqx_unvmap_max  # noqa: E402
from equinox.internal._loop.common import maybe_set_p, select_if_vmap_p  # noqa: E402
from equinox.internal._nontraceable import nonbatchable as eqx_nonbatchable  # noqa: E402

import oracle  # noqa: E402

cp = jax.checkpoint_policies
RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3)).astype(np.float32)


def _close(got, want, tol=1e-6):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)


def _names(prog):
    return [e.primitive.name for e in prog.eqns]


def eqx_select_if_vmap(pred, x, y):
    return select_if_vmap_p.bind(pred, x, y)


def eqx_maybe_set(pred, xs, x, i, makes_false_steps=False):
    return maybe_set_p.bind(pred, xs, x, i, i_static=None, i_treedef=jax.tree_util.tree_structure(0),
                            kwargs=(), makes_false_steps=makes_false_steps)[0]


# --------------------------------------------------------------------------
# unvmap_any / unvmap_all / unvmap_max

UNVMAP = [(unvmap_any, eqx_unvmap_any, lambda x: x > 0.5), (unvmap_all, eqx_unvmap_all, lambda x: x > -0.5),
          (unvmap_max, eqx_unvmap_max, lambda x: (x * 4).astype(np.int32))]


@pytest.mark.parametrize("mine,theirs,arg", UNVMAP, ids=["any", "all", "max"])
def test_unvmap_eval_and_vmap_ignore_the_batch(mine, theirs, arg):
    """Unbatched: jnp.any/all/max; vmapped: one scalar over the whole batch
    (equinox's batching rule), the same for every member."""
    a = np.asarray(arg(X))
    prog = spec.trace(lambda v: mine(v), spec.ir.ArrayType(a.shape[1:], a.dtype))
    for member in a:
        _close(spec.evaluate(prog, member), [jax.jit(theirs)(member)])
    batched = spec.vmap(prog, 0, 0, axis_size=2)
    _close(spec.evaluate(batched, a), [jax.vmap(theirs)(a)])
    theirs_prog = oracle.from_jaxpr(jax.make_jaxpr(jax.vmap(theirs))(a))
    assert _names(batched) == _names(theirs_prog)     # the reduction of the batch, then its broadcast


def test_unvmap_max_of_floats_has_no_jvp_as_in_jax():
    x = np.float32([1.0, 2.0])
    with pytest.raises(NotImplementedError) as theirs:
        jax.jvp(eqx_unvmap_max, (x,), (x,))
    prog = spec.trace(unvmap_max, f32[2])
    with pytest.raises(NotImplementedError) as mine:
        spec.evaluate(spec.jvp(prog), x, x)
    assert str(mine.value) == str(theirs.value)


def test_unvmap_any_of_a_bool_differentiates_around_it():
    """A bool operand has a zero tangent: no rule runs (JAX: the primitive
    is bound on the primals)."""
    f = lambda x: jnp.where(eqx_unvmap_any(x > 5.0), 0.0, x * x)   # noqa: E731
    prog = spec.trace(lambda x: spec.ops.select_n(unvmap_any(x > 5.0), x * x, x * 0.0), f32[3])
    x, t = X[0], np.ones(3, np.float32)
    _close(spec.evaluate(spec.jvp(prog), x, t), jax.jvp(f, (x,), (t,)))


# --------------------------------------------------------------------------
# nonbatchable

def test_nonbatchable_is_the_identity_and_has_no_jvp():
    prog = spec.trace(lambda x: nonbatchable(x), f32[3])
    _close(spec.evaluate(prog, X[0]), [jax.jit(eqx_nonbatchable)(X[0])])
    with pytest.raises(NotImplementedError) as theirs:
        jax.jvp(eqx_nonbatchable, (X[0],), (X[0],))
    with pytest.raises(NotImplementedError) as mine:
        spec.jvp(prog)
    assert str(mine.value) == str(theirs.value)


def test_nonbatchable_batched_raises_equinox_message():
    prog = spec.trace(lambda x: nonbatchable(x, name="my loop"), f32[3])
    with pytest.raises(ValueError) as theirs:
        jax.vmap(lambda x: eqx_nonbatchable(x, name="my loop"))(X)
    with pytest.raises(ValueError) as mine:
        spec.vmap(prog, 0, 0, axis_size=2)
    assert str(mine.value) == str(theirs.value)


def test_nonbatchable_constant_across_batch_keeps_member_zero():
    """allow_constant_across_batch: a constant batch gives the unbatched
    value; a varying one fails equinox's error_if at run time (JAX: its
    callback raises; the spec: its pure_callback raises)."""
    f = lambda x: eqx_nonbatchable(x, allow_constant_across_batch=True) * 2   # noqa: E731
    prog = spec.trace(lambda x: nonbatchable(x, allow_constant_across_batch=True) * 2, i32[2])
    batched = spec.vmap(prog, 0, 0, axis_size=3)
    const = np.tile(np.int32([4, 5]), (3, 1))
    _close(spec.evaluate(batched, const), [jax.vmap(f)(const)])
    varying = np.arange(6, dtype=np.int32).reshape(3, 2)
    with pytest.raises(Exception, match="Nonconstant batch"):
        jax.block_until_ready(jax.jit(jax.vmap(f))(varying))
    with pytest.raises(RuntimeError, match="Nonconstant batch"):
        spec.evaluate(batched, varying)


def test_error_if_is_the_identity_until_its_predicate_holds():
    """The spec's error_if (nonbatchable's check) against eqx.error_if:
    the value, and the same message once the predicate holds."""
    prog = spec.trace(lambda x: error_if(x, x > 10.0, "too big"), f32[3])
    f = jax.jit(lambda x: eqx.error_if(x, x > 10.0, "too big"))
    _close(spec.evaluate(prog, X[0]), [f(X[0])])
    big = np.float32([1.0, 20.0, 3.0])
    with pytest.raises(Exception, match="too big"):
        jax.block_until_ready(f(big))
    with pytest.raises(RuntimeError, match="too big"):
        spec.evaluate(prog, big)


# --------------------------------------------------------------------------
# select_if_vmap

def test_select_if_vmap_eval_jvp_and_transpose():
    x, y = X[0], X[1]
    prog = spec.trace(lambda p, a, b: select_if_vmap(p, a, b), bool_[()], f32[3], f32[3])
    for p in (True, False):         # unbatched: x either way (equinox's impl)
        _close(spec.evaluate(prog, np.bool_(p), x, y), [jax.jit(eqx_select_if_vmap)(p, x, y)])
    tx, ty = np.ones(3, np.float32), np.full(3, 2.0, np.float32)
    # (equinox's rules read tracers' avals: JAX's side runs under jit)
    want = jax.jit(lambda *v: jax.jvp(lambda a, b: eqx_select_if_vmap(True, a, b), v[:2], v[2:]))(x, y, tx, ty)
    _close(spec.evaluate(spec.jvp(prog), np.bool_(True), x, y, tx, ty), want)
    ct = np.float32([1.0, -2.0, 3.0])
    want = jax.jit(lambda a, b, c: jax.vjp(lambda a, b: eqx_select_if_vmap(True, a, b), a, b)[1](c))(x, y, ct)
    grads = spec.evaluate(spec.vjp_program(prog), np.bool_(True), x, y, ct)
    _close(grads, want)


def test_select_if_vmap_jvp_saves_equinoxs_copy_of_pred():
    """equinox's JVP rule passes pred through jnp.array (a copy): the copy
    is what linearization saves."""
    f = lambda p, a, b: jnp.sum(eqx_select_if_vmap(p, jnp.sin(a), b))   # noqa: E731
    report = oracle.check(f, None, True, X[0], X[1])
    assert all(r.status == "ok" for r in report.results), report


@pytest.mark.parametrize("in_axes", [(0, 0, 0), (0, None, 0), (None, 0, None), (None, None, 1)])
def test_select_if_vmap_batched_as_equinox(in_axes):
    """A batched pred selects per member (jax.vmap(lax.select)); an
    unbatched one stays a select_if_vmap of batch-leading operands."""
    p = np.array([True, False, True])
    x, y = RNG.normal(size=(3, 2)).astype(np.float32), RNG.normal(size=(3, 2)).astype(np.float32)
    args = [p if in_axes[0] == 0 else np.bool_(True), x if in_axes[1] == 0 else x[0],
            y if in_axes[2] is not None else y[0]]
    if in_axes[2] == 1:
        args[2] = y.T
    prog = spec.trace(lambda q, a, b: select_if_vmap(q, a, b), bool_[()], f32[2], f32[2])
    mine = spec.vmap(prog, list(in_axes), 0, axis_size=3)
    theirs = jax.vmap(eqx_select_if_vmap, in_axes=in_axes)
    _close(spec.evaluate(mine, *args), [theirs(*args)])
    assert _names(mine) == _names(oracle.from_jaxpr(jax.make_jaxpr(theirs)(*args)))


# --------------------------------------------------------------------------
# maybe_set

@pytest.mark.parametrize("makes_false_steps", [False, True])
def test_maybe_set_eval_jvp_vjp_vmap(makes_false_steps):
    xs, x = RNG.normal(size=(4, 3)).astype(np.float32), X[0]
    prog = spec.trace(lambda p, b, v, i: maybe_set(p, b, v, i, makes_false_steps=makes_false_steps),
                      bool_[()], f32[4, 3], f32[3], i32[()])
    f = lambda p, b, v, i: eqx_maybe_set(p, b, v, i, makes_false_steps)   # noqa: E731
    for p, i in [(True, 1), (False, 2), (True, -1)]:
        args = (np.bool_(p), xs, x, np.int32(i))
        _close(spec.evaluate(prog, *args), [jax.jit(f)(*args)])
        t_xs, t_x = np.ones_like(xs), np.full_like(x, 3.0)
        # (equinox's rules read tracers' avals: JAX's side runs under jit)
        want = jax.jit(lambda p, b, v, i, tb, tv: jax.jvp(lambda b, v: f(p, b, v, i), (b, v), (tb, tv)))(
            *args, t_xs, t_x)
        _close(spec.evaluate(spec.jvp(prog), *args, t_xs, t_x), want)
        ct = RNG.normal(size=xs.shape).astype(np.float32)
        want = jax.jit(lambda p, b, v, i, c: jax.vjp(lambda b, v: f(p, b, v, i), b, v)[1](c))(*args, ct)
        _close(spec.evaluate(spec.vjp_program(prog), *args, ct), want)
    ps, bs, vs, js = np.array([True, False, True]), np.stack([xs] * 3), RNG.normal(size=(3, 3)).astype(
        np.float32), np.int32([0, 3, -2])
    batched = spec.vmap(prog, [0, 0, 0, 0], 0, axis_size=3)     # JAX: equinox's vprim
    _close(spec.evaluate(batched, ps, bs, vs, js), [jax.vmap(f)(ps, bs, vs, js)])


@pytest.mark.parametrize("buffer_batched", [False, True])
def test_a_vmapped_maybe_set_is_equinox_s_vprim(buffer_batched):
    """Batched, maybe_set is equinox's generic `vprim[prim=maybe_set]`
    (create_vprim's batch rule), whose rules vmap maybe_set's own: JAX's
    residuals of a vmapped maybe_set (its predicate and index, the unbatched
    zero it instantiates for a buffer without tangent) are the spec's only
    if the spec binds the same (pristine nightly finding 18c4a0aaf6: the
    spec batched the impl's operations); vmapped again, a vprim of vprims."""
    def f(a, p, v, i):
        buffer = jnp.zeros((4, 3), jnp.float32) + (a if buffer_batched else 0.0)
        return eqx_maybe_set(p, buffer, v, i, False)
    args = (np.float32([0.5, 1.0]), np.array([True, False]), RNG.normal(size=(2, 3)).astype(np.float32),
            np.int32([2, 1]))
    jaxpr = jax.make_jaxpr(jax.vmap(f))(*args)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns][-1] == "vprim"
    prog = spec.trace(lambda a, p, v, i: maybe_set(p, spec.ops.add(spec.ops.broadcast_in_dim(
        np.float32(0.0), (4, 3), ()), a if buffer_batched else np.float32(0.0)), v, i), f32[()], bool_[()],
        f32[3], i32[()])
    batched = spec.vmap(prog, [0, 0, 0, 0], 0, axis_size=2)
    assert [e.primitive.name for e in batched.eqns][-1] == "vprim"
    report = oracle.check(jax.vmap(f), oracle.AS_IS, *args)     # vmap of the vmap too: a vprim of vprims
    _assert_passes(report)


# --------------------------------------------------------------------------
# oracle.check on user code

POLICIES = [None, cp.dots_saveable, oracle.AS_IS]
POLICY_IDS = ["none", "dots_saveable", "as_is"]


def _assert_passes(report):
    bad = [r for r in report.results if r.status not in ("ok", "known divergence", "not applicable")]
    assert not bad, report


def _check(fn, policy, *args):
    """The whole check (both implementations, every property) for policy
    None; for the others remat2's residuals, values, vjp and vmap (each
    further property is a further XLA compile: the file stays fast)."""
    kw = {} if policy is None else dict(implementations=("remat2",),
                                        properties=("residuals", "values", "vjp", "vmap"))
    report = oracle.check(fn, policy, *args, **kw)
    _assert_passes(report)
    return report


def _mlp():
    model = eqx.nn.MLP(in_size=3, out_size=2, width_size=4, depth=2, key=jax.random.PRNGKey(0))
    return eqx.filter(model, eqx.is_array), eqx.filter(model, eqx.is_array, inverse=True)


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
def test_error_if_in_an_mlp_loss(policy):
    params, static = _mlp()

    def loss(params, x, y):
        model = eqx.combine(params, static)
        pred = jax.vmap(model)(x)
        pred = eqx.error_if(pred, jnp.any(jnp.isnan(pred)), "the model diverged")    # never holds here
        return jnp.mean((y - pred) ** 2)
    x, y = RNG.normal(size=(4, 3)).astype(np.float32), RNG.normal(size=(4, 2)).astype(np.float32)
    report = _check(loss, policy, params, x, y)
    assert report.status("values", "remat2") == "ok"


def _while_loss(kind, **kw):
    def loss(w, x):
        def cond(c):
            return c[0] < 3

        def body(c):
            i, h = c
            return i + 1, jnp.tanh(h @ w)
        _, h = eqxi.while_loop(cond, body, (0, x), kind=kind, **kw)
        return jnp.sum(h ** 2)
    loss.__name__ = f"while_{kind}_loss"
    return loss


W = (RNG.normal(size=(3, 3)) * 0.5).astype(np.float32)


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
def test_checkpointed_while_loop(policy):
    """kind="checkpointed": a custom_vjp whose backward pass recomputes from
    its own checkpoints (unvmap_any, nonbatchable, select_if_vmap inside)."""
    report = _check(_while_loss("checkpointed", max_steps=4, checkpoints=2), policy, W, X[0])
    assert report.status("vjp", "remat2") == "ok"


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
def test_bounded_while_loop(policy):
    """kind="bounded": nested scans of conds, checkpointed above the lowest
    level (max_steps 4 > base 2): under AS_IS its own jax.checkpoints."""
    loss = _while_loss("bounded", max_steps=4, base=2)
    assert "remat2[" in str(jax.make_jaxpr(loss)(W, X[0]))
    report = _check(loss, policy, W, X[0])
    assert report.status("vjp", "remat2") == "ok"


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
def test_checkpointed_scan(policy):
    """equinox.internal.scan(kind="checkpointed"): a checkpointed while loop
    writing its ys into a buffer (maybe_set)."""
    def loss(w, x, xs):
        def body(h, inp):
            h = jnp.tanh(h @ w + inp)
            return h, h * 2.0
        h, ys = eqxi.scan(body, x, xs, kind="checkpointed", checkpoints=2)
        return jnp.sum(h) + jnp.sum(ys ** 2)
    report = _check(loss, policy, W, X[0], RNG.normal(size=(3, 3)).astype(np.float32))
    assert report.status("vjp", "remat2") == "ok"


# --------------------------------------------------------------------------
# empty2 (JAX's), met in the backward rules of equinox's loops

def test_grad_of_a_bounded_loop_imports_with_jaxs_empty2():
    """JAX's partial evaluation of a cond fills unwritten residual slots with
    empty2: jax.grad of a bounded loop holds it, and imports."""
    f = jax.grad(_while_loss("bounded", max_steps=4, base=2))
    closed = jax.make_jaxpr(f)(W, X[0])
    assert "empty2[" in str(closed)
    prog = oracle.from_jaxpr(closed)
    _close(spec.evaluate(prog, W, X[0]), [jax.jit(f)(W, X[0])], tol=1e-5)


def test_checkpointed_loop_with_a_cond_in_its_body():
    """The loop's backward rule (traced by JAX) differentiates the body's
    cond: empty2 in the rule's program."""
    def loss(w, x):
        def body(c):
            i, h = c
            return i + 1, jax.lax.cond(jnp.sum(h) > 0, jnp.sin, jnp.cos, h @ w)
        return jnp.sum(eqxi.while_loop(lambda c: c[0] < 3, body, (0, x), max_steps=4, kind="checkpointed")[1])
    report = oracle.check(loss, cp.dots_saveable, W, X[0], implementations=("remat2",),
                          properties=("residuals", "values", "vjp"))
    _assert_passes(report)


def test_a_mismatch_in_an_error_if_program_is_a_mismatch_without_reproducer():
    """eqx.error_if's callbacks are local functions (`_error.<locals>.raises`):
    no reproducer can import them. A disagreement there is still reported
    as the Mismatch it is (a bug planted into JAX: cos's JVP has the wrong
    sign at negative inputs), saying why it has no reproducer."""
    import planted_bugs
    x = np.linspace(-1.5, -0.5, 3, dtype=np.float32)
    loss = lambda v: jnp.sum(jnp.cos(eqx.error_if(v, v > 10, "too big")))  # noqa: E731
    with planted_bugs.BUGS["cos_jvp_sign_at_negative_inputs"]():
        with pytest.raises(oracle.Mismatch) as excinfo:
            oracle.check(loss, None, x, implementations=("remat2",), properties=("jvp",))
    assert excinfo.value.repro is None
    assert "jvp differs under remat2" in str(excinfo.value)
    assert "reproducer:\n(none: " in str(excinfo.value), str(excinfo.value)[-600:]


def test_a_policy_asked_about_a_vprim_raises_in_jax():
    """JAX asks a checkpoint's policy `policy(prim, *avals, **params)`, and
    vprim has a param named `prim`: dots_saveable raises TypeError there
    (read off JAX below), where the spec computes; a known divergence, not
    a Mismatch (found by the fuzzer's branch cover once vprim was drawn)."""
    def f(p, x, i):
        return jax.vmap(lambda p, x, i: eqx_maybe_set(p, jnp.zeros((4, 3), jnp.float32), x, i))(p, x, i)
    args = (np.array([True, False]), RNG.normal(size=(2, 3)).astype(np.float32), np.int32([1, 2]))
    checkpointed = lambda p, x, i: jax.checkpoint(f, policy=cp.dots_saveable)(p, x, i)   # noqa: E731
    with pytest.raises(TypeError, match="multiple values for argument 'prim'"):
        jax.grad(lambda x: jnp.sum(checkpointed(args[0], x, args[2])))(args[1])
    report = oracle.check(f, cp.dots_saveable, *args, implementations=("remat2",), properties=("vjp",))
    assert ("a-policy-asked-about-equinox-s-vprim-raises", "vjp", "remat2") in report.known_divergences, report


def test_a_policy_asked_about_a_vprim_a_stack_s_vmap_makes():
    """The checked function's checkpoint holds an unbatched maybe_set; the
    stack's vmap makes it a vprim, which JAX's linearization then asks the
    policy about (found by a pristine campaign, 440af618a3): the same
    known divergence at the stack's level."""
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    def f(p, x, i):
        return eqx_maybe_set(p, jnp.zeros((4, 3), jnp.float32), jnp.sin(x), i)
    g = jax.checkpoint(f, policy=cp.dots_saveable)
    args = (np.array(True), RNG.normal(size=3).astype(np.float32), np.int32(1))
    prog = trace_jax(g, *args)
    stack = S.Stack((S.Layer("vmap", (None, 0, None), (0,), 2), S.Layer("linearize")))
    report = oracle.check(g, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_property(stack, prog), S.stack_barriers_property(stack, prog)))
    assert [d[0] for d in report.known_divergences] == ["a-policy-asked-about-equinox-s-vprim-raises"] * 2, report
