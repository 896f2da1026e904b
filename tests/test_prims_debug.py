"""jax.debug.print and jax.debug.callback under remat (spec/prims_debug.py),
against what jax 0.10.2 does, recorded by tests/record_jax_debug_print.py
in tests/recordings/debug_print.json: how many times the print (the
callback) runs in grad(checkpoint(f, policy)), under remat2 and remat3,
and how many of their equations the forward pass and the differentiated
checkpoint (the backward pass) hold.

The spec-level tests import no jax: the recorded programs are written here
with spec ops. With jax: oracle.check of losses that print or call back,
under every standard policy, remat2 and remat3, and vmap's unrolled
effects.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import spec
from spec import ops, policies as P
from spec.prims_debug import (count_effects, count_prints, debug_callback, debug_callback_p, debug_print,
                              debug_print_p)

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "recordings", "debug_print.json")) as f:
    RECORDED = json.load(f)

f32 = spec.f32
X = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
M, W = np.ones((2, 3), np.float32), np.full((3, 2), 0.5, np.float32)


def never_called(*xs):
    """The user's callback: the spec must never run it."""
    raise AssertionError("the spec called a debug_callback's callable")


def printing(name, value):
    debug_print(value, fmt=f"{name}={{{name}}}", kwarg_names=(name,))


def calling_back(ordered):
    return lambda name, value: debug_callback(never_called, value, ordered=ordered)


# the recorder's programs; `effect(name, value)` prints or calls back
def print_intermediate(effect):
    def f(x):
        s = ops.checkpoint_name(ops.sin(x), "s")
        effect("s", s)
        return ops.reduce_sum(s * x, (0,))
    return f


def print_input(effect):
    def f(x):
        effect("x", x)
        return ops.reduce_sum(ops.sin(x), (0,))
    return f


def print_dot(effect):
    def f(x, w):
        y = x @ w
        effect("y", y)
        return ops.reduce_sum(y, (0, 1))
    return f


PROGRAMS = {"print_intermediate": (print_intermediate, (X,)), "print_input": (print_input, (X,)),
            "print_dot": (print_dot, (M, W))}
POLICIES = {"none": None, "dots_saveable": P.dots_saveable, "everything_saveable": P.everything_saveable,
            "save_s": P.save_only_these_names("s")}


def _checkpointed(name, policy, effect):
    make, args = PROGRAMS[name]
    types = [spec.ArrayType(a.shape, a.dtype) for a in args]
    pol = POLICIES[policy]
    if policy == "save_s" and name != "print_intermediate":
        pol = P.nothing_saveable    # what JAX's save_only_these_names('s') is without an 's' (the
                                    # spec's builder refuses a policy naming an unbound name)
    return spec.trace(lambda *xs: ops.checkpoint(make(effect), policy=pol)(*xs), *types), args


def _grad(name, policy, effect=printing):
    prog, args = _checkpointed(name, policy, effect)
    return spec.grad(prog, tuple(range(len(args)))), args


def _placement(prog, primitive=debug_print_p, inside=False):
    """(`primitive` equations outside any differentiated remat, inside one)."""
    out = [0, 0]
    for e in prog.eqns:
        if e.primitive is primitive:
            out[inside] += 1
        for _, sub in spec.ir.subprograms(e.params):
            a, b = _placement(sub, primitive,
                              inside or (e.primitive.name == "remat" and e.params.get("differentiated")))
            out[0] += a
            out[1] += b
    return out


@pytest.mark.parametrize("case", sorted(RECORDED["programs"]))
def test_prints_as_jax_does_under_remat(case):
    name, policy = case.split("/")
    grad, args = _grad(name, policy)
    want = RECORDED["programs"][case]
    assert count_prints(grad, *args) == want["prints"]
    assert _placement(grad) == [want["forward"], want["backward"]]


@pytest.mark.parametrize("case", sorted(RECORDED["callbacks"]))
def test_callbacks_as_jax_does_under_remat(case):
    """jax.debug.callback(fn, x, ordered=...): fn's calls counted by a
    Python counter in JAX, the spec's debug_callback equations run."""
    name, policy, effect = case.split("/")
    grad, args = _grad(name, policy, calling_back(effect == "ordered"))
    want = RECORDED["callbacks"][case]
    assert count_effects(grad, *args) == want["calls"]
    assert count_prints(grad, *args) == 0
    assert _placement(grad, debug_callback_p) == [want["forward"], want["backward"]]


REMAT3_CASES = ([("programs", c, "prints_remat3") for c in sorted(RECORDED["programs"])]
                + [("callbacks", c, "calls_remat3") for c in sorted(RECORDED["callbacks"])])


@pytest.mark.parametrize("table,case,field", REMAT3_CASES, ids=[f"{t}-{c}" for t, c, _ in REMAT3_CASES])
def test_remat3_runs_effects_as_the_policy_it_sees(table, case, field):
    """Under remat3 only dot_general's and checkpoint_name's remat rules
    consult the policy (oracle/divergences.py `_Remat3View`); a debug
    effect, asked by no one, is recomputed (RematTrace.process_primitive's
    default, jax/_src/interpreters/remat.py:98-102): it runs in the
    forward and again in the backward pass under every policy, so under
    everything_saveable twice where remat2 runs it once. The spec's rule
    under the policy remat3 effectively applies gives the recorded count."""
    from oracle.remat3_model import remat3_viewed
    name, policy, *ordered = case.split("/")
    effect = calling_back(ordered == ["ordered"]) if ordered else printing
    prog, args = _checkpointed(name, policy, effect)
    viewed = remat3_viewed(prog)
    assert count_effects(spec.grad(viewed, tuple(range(len(args)))), *args) == RECORDED[table][case][field]


def test_no_checkpoint_prints_once():
    prog = spec.trace(print_intermediate(printing), f32[3])
    assert count_prints(spec.grad(prog), X) == 1
    assert count_prints(spec.vjp_program(prog), X, np.float32(1.0)) == 1


def test_dce_keeps_the_print_and_only_it():
    prog = spec.trace(lambda x: (debug_print(ops.sin(x), fmt="{}"), ops.cos(x) * 0.0 + x)[1], f32[2])
    pruned, _ = spec.dce(prog)
    assert [e.primitive.name for e in pruned.eqns] == ["sin", "debug_print", "cos", "mul", "add"]
    unused = spec.trace(lambda x: (debug_print(x, fmt="{}"), ops.exp(x), x)[2], f32[2])
    assert [e.primitive.name for e in spec.dce(unused)[0].eqns] == ["debug_print"]


def test_printing_a_saved_dot_makes_it_a_residual():
    """Under dots_saveable the backward pass prints the dot output, which
    reduce_sum's transpose would not need: the print makes it a residual
    (JAX: the differentiated remat reads it, recorded above)."""
    grad, _ = _grad("print_dot", "dots_saveable")
    fn = lambda x, w: ops.checkpoint(print_dot(printing), policy=P.dots_saveable)(x, w)
    res = spec.saved_residuals(spec.trace(fn, f32[2, 3], f32[3, 2]))
    assert "f32[2,2] output of dot_general" in [str(r) for r in res]
    quiet = lambda x, w: ops.checkpoint(lambda a, b: ops.reduce_sum(a @ b, (0, 1)), policy=P.dots_saveable)(x, w)
    assert "f32[2,2] output of dot_general" not in [str(r) for r in spec.saved_residuals(
        spec.trace(quiet, f32[2, 3], f32[3, 2]))]


def test_vmap_unrolls_one_print_per_member():
    prog = spec.trace(lambda x, c: (debug_print(x, c, fmt="{} {}"), x * c)[1], f32[2], f32[2])
    batched = spec.vmap(prog, in_axes=(0, None), axis_size=3)
    assert [e.primitive.name for e in batched.eqns].count("debug_print") == 3
    assert count_prints(batched, np.ones((3, 2), np.float32), np.ones(2, np.float32)) == 3


def test_in_tree_must_fit_the_operands():
    with pytest.raises(spec.PrimitiveError, match="in_tree"):
        spec.trace(lambda x: spec.core.bind(debug_print_p, x, fmt="{}", ordered=False, partitioned=False,
                                            in_tree=(2, ()), static_args=(), np_printoptions=(),
                                            has_placeholders=True), f32[2])


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


def test_vmap_matches_jaxs_unrolled_prints():
    jax = _jax()
    import oracle

    def f(x, c):
        jax.debug.print("{} {}", x, c)
        return x * c
    x, c = np.ones((3, 2), np.float32), np.ones(2, np.float32)
    theirs = oracle.from_jaxpr(jax.make_jaxpr(jax.vmap(f, in_axes=(0, None)))(x, c))
    if not any(e.primitive.name == "debug_print" for e in theirs.eqns):
        pytest.skip(f"jax {jax.__version__} prints by debug_callback (debug_print_p is jax 0.7's)")
    prog = spec.trace(lambda x, c: (debug_print(x, c, fmt="{} {}"), x * c)[1], f32[2], f32[2])
    mine = spec.vmap(prog, in_axes=(0, None), axis_size=3)
    assert [e.primitive.name for e in mine.eqns] == [e.primitive.name for e in theirs.eqns]


def _losses():
    jax = _jax()
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    def mlp(w1, w2, x):
        h = checkpoint_name(jnp.tanh(x @ w1), "h")
        jax.debug.print("h mean {m}, first {f}", m=jnp.mean(h), f=h[0, 0])
        out = h @ w2
        jax.debug.print("loss parts {}", out)
        return jnp.sum(jnp.sin(out))
    return mlp


def _policy_and_arguments(jax, policy: str):
    """The JAX policy named `policy` ("None", "save_h", or a checkpoint_policies
    name) and the losses' arguments w1, w2, x."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    pol = {"None": None, "save_h": jax.checkpoint_policies.save_only_these_names("h")}.get(
        policy) or getattr(jax.checkpoint_policies, policy, None)
    return pol, (w1, w2, x)


def _implementations() -> set:
    """remat2, and remat3 where the installed release has it."""
    import oracle
    return {"remat2"} | (set() if oracle.jax_api.unavailable("remat3") else {"remat3"})


@pytest.mark.parametrize("policy", ["None", "dots_saveable", "dots_with_no_batch_dims_saveable",
                                    "everything_saveable", "save_h"])
def test_oracle_check_loss_that_prints(policy, capsys):
    jax = _jax()
    import oracle
    pol, (w1, w2, x) = _policy_and_arguments(jax, policy)
    report = oracle.check(_losses(), pol, w1, w2, x)
    assert {r.implementation for r in report.results if r.status == "ok"} == _implementations(), str(report)


def _callback_loss(ordered):
    """A loss calling back on an intermediate (keyword and static
    arguments: JAX's _flat_callback rebuilds them), on a dot output, and on
    a dot output `g` that the backward pass reads only to call back on it
    (under dots_saveable the callback makes it a residual)."""
    jax = _jax()
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name
    seen = []

    def mlp(w1, w2, x):
        h = checkpoint_name(jnp.tanh(x @ w1), "h")
        jax.debug.callback(lambda v, *, tag: seen.append((tag, v.shape)), h, tag="h", ordered=ordered)
        out = h @ w2
        jax.debug.callback(lambda v: seen.append(("out", v.shape)), out, ordered=ordered)
        g = x @ x.T
        jax.debug.callback(lambda v: seen.append(("g", v.shape)), g, ordered=ordered)
        return jnp.sum(jnp.sin(out)) + jnp.sum(g)
    return mlp, seen


CALLBACK_CHECKS = [(p, False) for p in ("None", "dots_saveable", "everything_saveable", "save_h")] + [
    (p, True) for p in ("None", "everything_saveable")]     # ordered: tokens threaded through the jit


@pytest.mark.parametrize("policy,ordered", CALLBACK_CHECKS,
                         ids=[f"{p}-{'ordered' if o else 'unordered'}" for p, o in CALLBACK_CHECKS])
def test_oracle_check_loss_that_calls_back(policy, ordered):
    jax = _jax()
    import oracle
    try:    # a keyword argument that is no array: static, from jax 0.4.3x on
        jax.make_jaxpr(lambda v: jax.debug.callback(lambda v, *, tag: None, v, tag="h"))(1.0)
    except TypeError:
        pytest.skip(f"jax {jax.__version__}'s debug.callback takes only array arguments")
    pol, (w1, w2, x) = _policy_and_arguments(jax, policy)
    loss, seen = _callback_loss(ordered)
    report = oracle.check(loss, pol, w1, w2, x)
    assert {r.implementation for r in report.results if r.status == "ok"} == _implementations(), str(report)
    assert {r.status for r in report.results if r.implementation == "remat2"} <= {"ok", "not compared"}, str(report)
    assert ("h", (2, 4)) in seen and ("out", (2, 2)) in seen     # JAX ran the user's callbacks


def test_from_jax_keeps_the_callable_and_the_effect():
    jax = _jax()
    import oracle

    def f(x):
        jax.debug.callback(never_called, x, ordered=True)
        jax.debug.callback(never_called, x * 2.0)
        return x
    prog = oracle.from_jaxpr(jax.make_jaxpr(f)(X))
    calls = [e for e in prog.eqns if e.primitive is debug_callback_p]
    assert [e.params["effect"] for e in calls] == ["ordered", "unordered"]
    assert all(callable(e.params["callback"]) and e.params["partitioned"] is False for e in calls)
    assert count_effects(spec.grad(spec.trace(lambda x: ops.reduce_sum(
        spec.core.eval_program_traced(prog, x)[0], (0,)), f32[3])), X) == 2    # never_called not called


def test_vmap_matches_jaxs_unrolled_callbacks():
    jax = _jax()
    import oracle

    def f(x, c):
        jax.debug.callback(never_called, x, c)
        return x * c
    x, c = np.ones((3, 2), np.float32), np.ones(2, np.float32)
    theirs = oracle.from_jaxpr(jax.make_jaxpr(jax.vmap(f, in_axes=(0, None)))(x, c))
    prog = spec.trace(lambda x, c: (debug_callback(never_called, x, c), x * c)[1], f32[2], f32[2])
    mine = spec.vmap(prog, in_axes=(0, None), axis_size=3)
    assert [e.primitive.name for e in mine.eqns] == [e.primitive.name for e in theirs.eqns]
    assert count_effects(mine, x, c) == 3


def test_reproducer_binds_a_stand_in_that_shows_each_call(tmp_path):
    """The reproducer of a program calling back cannot hold the user's
    callable: it binds debug_callback with a stand-in printing the operands'
    shapes, once per call (here: the forward pass of a jitted value check)."""
    _jax()
    from oracle.repro import write_repro
    prog = spec.trace(lambda x, w: (debug_callback(never_called, x @ w, ordered=True), x @ w)[1],
                      f32[2, 3], f32[3, 2])
    expected = spec.evaluate(prog, M, W)
    path = write_repro(prog, None, [M, W], "values", "remat2", "test", directory=str(tmp_path),
                       numeric=dict(expected=expected, atol=1e-5)).path
    run = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("debug_callback (2, 2)") == 1, run.stdout


@pytest.mark.parametrize("effect", ["print", "callback"])
def test_an_effect_reading_the_carry_stays_in_the_scan(effect):
    """A checkpointed scan body printing (or calling back with) its carry:
    linearizing the scan hoists its loop-invariant residual computations
    (_scan_known_hoisting), and the spec's hoisted part once kept the
    effect, reading a carry it does not have (a KeyError inside oracle.check).
    JAX agrees with the spec on every property."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import oracle

    def emit(c):
        if effect == "print":
            jax.debug.print("{}", c)
        else:
            jax.debug.callback(lambda v: None, c)

    def loss(x):
        def body(c, xi):
            emit(c)
            return jnp.sin(c) * xi, c
        c, ys = jax.lax.scan(jax.checkpoint(body), x, jnp.ones((2, 3), jnp.float32))
        return jnp.sum(c) + jnp.sum(ys)
    report = oracle.check(loss, None, np.linspace(-1, 1, 3, dtype=np.float32))
    unchecked = {"not checked"} if oracle.jax_api.unavailable("remat3") else set()   # a release without remat3
    assert {r.status for r in report.results} <= {"ok", "known divergence", "not compared"} | unchecked, str(report)


# --------------------------------------------------------------------------
# a checkpoint kept for its effect alone (found by a pristine campaign)

def _print_in_checkpoint(where: str, outputs: str):
    """A checkpoint that prints b (known: b's tangent reaches no output),
    with no float output or with one nothing reads, placed at top level or
    in a jit, a scan body or a cond branch; built when called (remat2 or
    remat3)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def printing(f):
        jax.debug.print("x={x}", x=f)
        return () if outputs == "none" else f * 2.0

    def use(f):
        jax.checkpoint(printing)(f)
        return 0.0

    if where == "top":
        return lambda a, b: use(b) + a * 2.0
    if where == "jit":
        return lambda a, b: jax.jit(lambda a, b: use(b) + a * 2.0)(a, b)
    if where == "scan":
        return lambda a, b: lax.scan(lambda c, x: (jnp.sin(c) + use(x), None), a, b)[0]
    return lambda a, b: lax.cond(a > 0, lambda a, b: use(b) + a * 2.0, lambda a, b: a, a, b)


@pytest.mark.parametrize("outputs", ["none", "unused"])
@pytest.mark.parametrize("where", ["top", "jit", "scan", "cond"])
def test_a_checkpoint_kept_for_its_effect_alone(where, outputs, capsys):
    """remat_partial_eval stages the checkpoint's unknown half without an
    effect handle, so a staged checkpoint with no output is dropped: the
    print does not run again in the backward pass, and b is not saved
    (spec.remat._staged_if_reached). With an output nothing reads it is
    kept for its effect, its tangent input pruned: the backward pass binds
    it as it is, one optimization barrier (spec.barriers._count). Without
    direct linearization (before 0.7.0) JAX drops that one too (linearize-drops-unread-effectful-checkpoints): nothing of b's shape is saved. JAX
    measured live, every property."""
    jax = pytest.importorskip("jax")
    import oracle
    from jax._src.ad_checkpoint import saved_residuals
    name = "linearize-drops-unread-effectful-checkpoints"
    dropped = outputs == "unused" and next(d for d in oracle.divergences.DIVERGENCES if d.name == name).active()
    a, b = np.float32(0.7), np.ones((2, 3), np.float32)
    f = _print_in_checkpoint(where, outputs)
    saves_b = any(r.shape == b.shape for r, _ in saved_residuals(lambda a, b: (f(a, b),), a, b))
    assert saves_b == (outputs == "unused" and not dropped)
    report = oracle.check(oracle.Factory(lambda: _print_in_checkpoint(where, outputs)), oracle.AS_IS, a, b)
    statuses = {r.status for r in report.results if r.implementation == "remat2"}
    if dropped:
        assert statuses == {"ok", "known divergence"}, str(report)
        assert {k[0] for k in report.known_divergences} == {name}
    else:
        assert statuses == {"ok"}, str(report)


def _print_in_loop(where):
    """A while loop printing x, whose carry (a counter) has no tangent, `where`."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loop(x):
        return lax.while_loop(lambda n: n < 3, lambda n: (jax.debug.print("{}", x), n + 1)[1], 0)
    counted = {"top": loop, "jit": jax.jit(loop), "checkpoint": jax.checkpoint(loop)}.get(where, loop)
    if where == "cond":
        return lambda a, x: lax.cond(a > 0, lambda a, x: jnp.sin(a) * loop(x), lambda a, x: a, a, x)
    return lambda a, x: jnp.sin(a) * counted(x)


@pytest.mark.parametrize("where", ["top", "jit", "cond", "checkpoint"])
def test_a_loop_staged_for_its_effect_alone(where):
    """Linearizing a while loop whose carries have no tangent while x, which
    it prints, has one, JAX stages the whole loop beside the known one
    (_while_partial_eval); nothing reads its outputs, and with direct
    linearization it is kept for its effect, saving x and meeting the
    loop's transpose error in reverse mode (campaign finding 9164e12ae9).
    JaxprTrace linearization drops it outside checkpoints before 0.6.2 and
    in jits before 0.7.0 (linearize-drops-an-effectful-loop-it-stages-
    without-outputs). In a checkpoint every release keeps the loop and
    saves nothing for it. JAX measured live, every property; on 0.6.2 the
    cond's residuals come in another order (a known divergence too)."""
    jax = pytest.importorskip("jax")
    import oracle
    from jax._src.ad_checkpoint import saved_residuals
    name = "linearize-drops-an-effectful-loop-it-stages-without-outputs"
    active = next(d for d in oracle.divergences.DIVERGENCES if d.name == name).active()
    from oracle.jax_api.versions import Releases, holds
    kept_at_top = not active or not holds(Releases("0.4.25", "0.6.2"))
    dropped = active and (where == "jit" or (where != "checkpoint" and not kept_at_top))
    a, x = np.float32(0.7), np.ones((2, 3), np.float32)
    f = _print_in_loop(where)
    saves_x = any(r.shape == x.shape for r, _ in saved_residuals(lambda a, x: (f(a, x),), a, x))
    assert saves_x == (where != "checkpoint" and not dropped)
    report = oracle.check(oracle.Factory(lambda: _print_in_loop(where)), oracle.AS_IS, a, x)
    statuses = {r.status for r in report.results if r.implementation == "remat2"}
    if dropped:
        assert statuses == {"ok", "known divergence"}, str(report)
        assert {k[0] for k in report.known_divergences} == {name}
    elif active and where == "cond":
        assert report.status("residuals", "remat2") == "known divergence", str(report)
    else:
        assert statuses <= {"ok", "not applicable"}, str(report)


@pytest.mark.parametrize("x", [1.0, -1.0])
@pytest.mark.parametrize("policy", ["none", "dots_saveable", "everything_saveable"])
def test_a_cond_printing_in_a_checkpoint_prints_as_jax_does_under_grad(policy, x):
    """grad of a checkpoint of a cond whose taken branch prints (or not):
    the spec's backward pass recomputes the cond inside the transposed
    checkpoint and drops the copy its transposition hoisted to replay it
    (spec.transpose._without_hoisted_effects), which printed a third time
    where JAX prints forward and backward. JAX's calls counted live."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax
    jax_policy = {"none": None, "dots_saveable": jax.checkpoint_policies.dots_saveable,
                  "everything_saveable": jax.checkpoint_policies.everything_saveable}[policy]
    calls = []

    def jax_branch(v):
        jax.debug.callback(lambda *a: calls.append(1), v)
        return jnp.sin(v)
    jax.grad(jax.checkpoint(lambda y: lax.cond(y > 0, jax_branch, jnp.cos, y), policy=jax_policy))(np.float32(x))
    jax.effects_barrier()

    def branch(v):
        debug_callback(never_called, v)
        return ops.sin(v)
    prog = spec.trace(lambda y: ops.checkpoint(lambda v: spec.cond(ops.gt(v, 0.0), branch, ops.cos, v),
                                               policy=POLICIES[policy])(y), f32[()])
    assert count_effects(spec.grad(prog), np.float32(x)) == len(calls)
