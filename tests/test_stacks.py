"""Transformation stacks (oracle/stacks.py).

The spec side of every layer kind, and of compositions, against a numpy
reference built independently: float64 central differences for jvp,
finite-difference gradients for vjp and grad, a loop over the batch
members (np.take / np.stack) for vmap with any in_axes / out_axes. Then
oracle.check of each stack through JAX (pristine JAX agrees: no false
alarm), and the reproducer of a stack is runnable Python that spells the
same stack.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import spec
from spec import ops, policies as sp
from spec.ir import is_float

from oracle.errors import InvalidArgument
from oracle import divergences, stacks as S


def _program():
    """Two outputs of different ranks, a checkpoint, an integer input and output."""
    def f(x, y, n):
        h = ops.checkpoint(lambda a, b: ops.sin(a) * b, policy=sp.nothing_saveable)(x, y)
        m = ops.convert_element_type(n, np.float32)
        return h * m, ops.reduce_sum(ops.tanh(x) * x, (1,)), n
    return spec.trace(f, spec.f32[2, 3], spec.f32[2, 3], spec.i32[2, 3])


def _args(prog, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, t.shape).astype(t.dtype) if is_float(t.dtype)
            else rng.integers(1, 4, t.shape).astype(t.dtype) for t in prog.in_types]


# --------------------------------------------------------------------------
# a numpy reference of each layer (float64), from the base program's values

EPS = 1e-4


def _ref_layer(fn, level: S.Level, layer: S.Layer):
    n = len(level.in_types)
    d = S.differentiated(level, layer) if layer.kind in S.AD_KINDS else []
    fl = level.float_outputs

    def shifted(a, t, s):
        x = [np.asarray(v, np.float64) if is_float(np.asarray(v).dtype) else v for v in a[:n]]
        for k, i in enumerate(d):
            x[i] = x[i] + s * t[k]
        return [np.asarray(fn(x)[j], np.float64) for j in fl]

    if layer.kind in S.FORWARD_KINDS:
        def g(a):
            t = a[n:]
            up, dn = shifted(a, t, EPS), shifted(a, t, -EPS)
            tangents = [(u - v) / (2 * EPS) for u, v in zip(up, dn)]
            # jax.jvp returns the outputs too (a linearized function only the tangents)
            return (list(fn(a[:n])) if layer.kind == "jvp" else []) + tangents
        return g
    if layer.kind in S.REVERSE_KINDS:
        def g(a):
            w = a[n:]
            out = []
            for i in d:
                grad = np.zeros(np.shape(a[i]))
                for idx in np.ndindex(grad.shape):
                    e = np.zeros_like(grad)
                    e[idx] = 1.0
                    t = [e if k == i else np.zeros(np.shape(a[k])) for k in d]
                    up, dn = shifted(a, t, EPS), shifted(a, t, -EPS)
                    grad[idx] = sum(np.sum(c * (u - v)) for c, u, v in zip(w, up, dn)) / (2 * EPS)
                out.append(grad)
            return out
        return g

    def g(a):
        members = [fn([np.take(x, b, axis=ax) if ax is not None else x for x, ax in zip(a, layer.in_axes)])
                   for b in range(layer.size)]
        return [np.stack([np.asarray(m[j]) for m in members], axis=ax % (np.ndim(members[0][j]) + 1))
                for j, ax in enumerate(layer.out_axes)]
    return g


def numpy_reference(prog, stack, operands):
    fn = lambda a: spec.evaluate(prog, *[np.asarray(v, t.dtype) for v, t in zip(a, prog.in_types)])
    for level, layer in zip(S.levels(prog, stack), stack.layers):
        fn = _ref_layer(fn, level, layer)
    return fn(operands)


def _up(prog):
    from oracle.upcast import upcast
    return upcast(prog)


def _vmap(in_axes, out_axes, size=2):
    return S.Layer("vmap", in_axes, out_axes, size)


STACKS = {
    "grad": (S.Layer("grad"),),
    "vjp": (S.Layer("vjp"),),
    "jvp": (S.Layer("jvp"),),
    "linearize": (S.Layer("linearize"),),
    "vmap mixed": (_vmap((1, -1, None), (-1, 0, 1), 3),),
    "vmap all None but one": (_vmap((None, 2, None), (0, 1, 0)),),
    "vmap o grad": (S.Layer("grad"), _vmap((0, 1, None, -1, None), (1, -1))),
    "grad o vmap": (_vmap((1, 0, None), (2, 1, 0)), S.Layer("grad")),
    "grad o grad": (S.Layer("grad"), S.Layer("grad")),
    "jvp o grad": (S.Layer("grad"), S.Layer("jvp")),
    "vjp o jvp": (S.Layer("jvp"), S.Layer("vjp")),
    "linearize o vmap": (_vmap((-1, 0, 0), (0, -1, 0)), S.Layer("linearize")),
    # an inner layer closing over the input the outer one differentiates
    "grad(argnums=(0,)) o grad(argnums=(1,))": (S.Layer("grad", argnums=(1,)), S.Layer("grad", argnums=(0,))),
    "jvp(argnums=(0,)) o jvp(argnums=(1,))": (S.Layer("jvp", argnums=(1,)), S.Layer("jvp", argnums=(0,))),
    "vjp o jvp(argnums=(0,))": (S.Layer("jvp", argnums=(0,)), S.Layer("vjp")),
    "linearize(argnums=(1,)) o vmap": (_vmap((-1, 0, 0), (0, -1, 0)), S.Layer("linearize", argnums=(1,))),
    "vmap o vmap o jvp": (S.Layer("jvp"), _vmap((0, 1, None, 0, 2), (1, 0, 1, 1, 0)),
                          _vmap((2, 0, 1, None, 0), (0, 2, 1, 3, 0))),
}


@pytest.mark.parametrize("name", sorted(STACKS))
def test_spec_side_matches_a_numpy_reference(name):
    prog = _program()
    stack = S.Stack(STACKS[name])
    args = _args(prog)
    operands = S.operands(prog, stack, args, seed=3)
    p64 = S.spec_program(_up(prog), stack)
    got = spec.evaluate(p64, *[np.asarray(o, np.float64) if is_float(np.asarray(o).dtype) else o
                               for o in operands])
    want = numpy_reference(_up(prog), stack, [np.asarray(o, np.float64) if is_float(np.asarray(o).dtype)
                                              else o for o in operands])
    assert len(got) == len(want)
    tol = 1e-5 if stack.ad_depth < 2 else 1e-3
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=tol, atol=tol)


def test_levels_reject_what_does_not_apply():
    prog = _program()
    with pytest.raises(InvalidArgument, match="in_axes / out_axes"):
        S.levels(prog, S.Stack((_vmap((0,), (0, 0, 0)),)))
    with pytest.raises(InvalidArgument, match="no batched input"):
        S.levels(prog, S.Stack((_vmap((None, None, None), (0, 0, 0)),)))
    with pytest.raises(InvalidArgument, match="out of range"):
        S.levels(prog, S.Stack((_vmap((3, 0, 0), (0, 0, 0)),)))
    with pytest.raises(InvalidArgument, match="outermost"):
        S.Stack((S.Layer("linearize"), S.Layer("grad")))
    ints = spec.trace(lambda n: n * 2, spec.i32[3])
    with pytest.raises(InvalidArgument, match="no differentiated input"):
        S.levels(ints, S.Stack((S.Layer("grad"),)))


# --------------------------------------------------------------------------
# through JAX

jax = pytest.importorskip("jax")


@pytest.mark.parametrize("name", sorted(STACKS))
def test_pristine_jax_agrees_on_every_stack(name):
    import oracle
    prog = _program()
    stack = S.Stack(STACKS[name])
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                          properties=(S.stack_property(stack, prog),))
    assert [r.status for r in report.results] == ["ok", "ok"], str(report)


_PLANT = """
import runpy, sys
from jax import lax
from jax._src.interpreters import batching
original = batching.fancy_primitive_batchers[lax.tanh_p]
def wrong(axis_data, args, dims, **params):
    out, d = original(axis_data, args, dims, **params)
    return out * 1.01, d
batching.fancy_primitive_batchers[lax.tanh_p] = wrong
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def _fails_planted_passes_pristine(tmp_path, text, plant, message):
    """The reproducer `text` fails with `message` under plain python with
    the bug planted (by the runner script `plant`), and passes without."""
    import subprocess
    import sys
    (tmp_path / "repro.py").write_text(text)
    (tmp_path / "plant.py").write_text(plant)
    run = subprocess.run([sys.executable, str(tmp_path / "plant.py"), str(tmp_path / "repro.py")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and message in run.stderr, run.stderr[-2000:]
    run = subprocess.run([sys.executable, str(tmp_path / "repro.py")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def test_a_batching_bug_is_a_mismatch_with_a_runnable_reproducer(tmp_path):
    """tanh's batching rule made 1% off (planted, as the reproducer's
    runner plants it): the stack vmap o grad differs, the reproducer
    spells the stack, and it fails under plain python with the bug
    planted, and passes on pristine JAX."""
    import oracle
    from jax import lax
    from jax._src.interpreters import batching
    prog = _program()
    stack = S.Stack(STACKS["vmap o grad"])
    original = batching.fancy_primitive_batchers[lax.tanh_p]

    def wrong(axis_data, args, dims, **params):
        out, d = original(axis_data, args, dims, **params)
        return out * 1.01, d
    batching.fancy_primitive_batchers[lax.tanh_p] = wrong
    jax.clear_caches()
    try:
        with pytest.raises(oracle.Mismatch) as info:
            oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                         properties=(S.stack_property(stack, prog),), implementations=("remat2",))
    finally:
        batching.fancy_primitive_batchers[lax.tanh_p] = original
        jax.clear_caches()
    assert "stack differs under remat2 [vmap(in_axes=(0, 1, None, -1, None), out_axes=(1, -1), size=2) o grad]" \
        in str(info.value)
    text = info.value.repro.text
    assert "jax.vmap(level1, in_axes=(0, 1, None, -1, None), out_axes=(1, -1))" in text
    assert "jax.grad(loss" in text
    _fails_planted_passes_pristine(tmp_path, text, _PLANT, "stack differs from the spec")


def test_reproducer_of_an_agreeing_stack_runs_to_agreement(tmp_path):
    """The same reproducer with the spec's own program agrees under JAX."""
    import subprocess
    import sys
    from oracle.repro import write_repro
    prog = _program()
    for name in ("linearize o vmap", "jvp o grad"):
        stack = S.Stack(STACKS[name])
        prop = S.stack_property(stack, prog)
        args = _args(prog)
        ops_ = S.operands(prog, stack, args, 0)
        expected = spec.evaluate(S.spec_program(prog, stack), *ops_)
        repro = write_repro(prog, None, args, "stack", "remat2", "msg",
                            numeric=dict(expected=expected, atol=1e-4, operands=ops_), code=prop.repro_code)
        path = tmp_path / f"{name.replace(' ', '_')}.py"
        path.write_text(repro.text)
        run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]


RESIDUAL_STACKS = sorted(n for n in STACKS if "linearize" not in n)


@pytest.mark.parametrize("name", RESIDUAL_STACKS)
def test_pristine_jax_saves_the_spec_residuals_of_every_stack(name):
    """saved_residuals of the stacked function (second-order programs for
    an AD layer) is the spec's list for the stack's program."""
    import oracle
    prog = _program()
    stack = S.Stack(STACKS[name])
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                          properties=(S.stack_residuals_property(stack, prog),))
    assert [(r.implementation, r.status) for r in report.results] == [
        ("remat2", "ok"), ("remat3", "not compared")], str(report)


def test_a_partial_eval_bug_in_a_second_order_program_is_found_with_a_runnable_reproducer(tmp_path):
    """remat2's policy made to save the outputs of cos too (planted): the
    residuals of grad o grad of a checkpointed program differ from the
    spec's, and the reproducer (saved_residuals of the same stack) fails
    with the bug planted and passes on pristine JAX."""
    import oracle
    from jax._src import ad_checkpoint as adc
    prog = _program()
    stack = S.Stack(STACKS["grad o grad"])
    original = adc.nothing_saveable

    def saves_cos(prim, *_, **__):
        return prim.name == "cos"
    plant = ("import runpy, sys\nfrom jax._src import ad_checkpoint as adc\nimport jax\n"
             "saves_cos = lambda prim, *_, **__: prim.name == 'cos'\n"
             "adc.nothing_saveable = saves_cos\njax.checkpoint_policies.nothing_saveable = saves_cos\n"
             "runpy.run_path(sys.argv[1], run_name='__main__')\n")
    adc.nothing_saveable = jax.checkpoint_policies.nothing_saveable = saves_cos
    jax.clear_caches()
    try:
        with pytest.raises(oracle.Mismatch) as info:
            oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                         properties=(S.stack_residuals_property(stack, prog),), implementations=("remat2",))
    finally:
        adc.nothing_saveable = jax.checkpoint_policies.nothing_saveable = original
        jax.clear_caches()
    assert "stack_residuals differs under remat2 [grad o grad]" in str(info.value)
    _fails_planted_passes_pristine(tmp_path, info.value.repro.text, plant, "saved residuals differ from the spec")


def test_grad_of_grad_of_a_constant_output():
    """grad of a function whose gradient is a constant (integer_pow y=0:
    its derivative is the literal 0) is taken again: the second layer's
    loss reads a Literal output (found by the fuzzer). The spec's value is
    0 (d/dx of x**0 twice) and JAX agrees."""
    import numpy as np

    import spec
    from spec import ops
    from spec.ir import ArrayType
    from fuzz import properties
    from oracle.spellings import CANONICAL
    from oracle.stacks import Layer, Stack, spec_program

    prog = spec.trace(lambda a: ops.integer_pow(a, 0), ArrayType((), np.float32))
    stack = Stack(layers=(Layer(kind="grad", in_axes=(), out_axes=(), size=2),) * 2)
    twice = spec_program(prog, stack)
    assert [float(v) for v in spec.evaluate(twice, *[np.float32(1.5)] * len(twice.inputs))] == [0.0]
    report = properties.oracle_agrees(prog, stack=stack, spelling=CANONICAL)
    assert {r.status for r in report.results} <= {"ok", "not compared"}


@pytest.mark.parametrize("kind, status", [("vjp", "not applicable"), ("grad", "not applicable"),
                                          ("jvp", "ok")])
def test_a_layer_keeps_dead_code_its_policy_is_asked_about(kind, status):
    """Found by the ci draws: a checkpoint holding a dead jit whose `sin` a
    save_from_both_policies of an offload policy refuses. JAX traces the
    stacked function without removing dead code, so the policy is asked
    about that `sin` and JAX raises ValueError (measured here); the spec's
    stack program keeps the dead jit too and raises the same refusal, so
    the stack's properties are 'not applicable' (both raise), never a
    Mismatch. Forward mode asks no policy: both compute."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax._src.interpreters.partial_eval import Offloadable

    from fuzz import properties
    from oracle.from_jax import trace_jax

    offload_sin = lambda prim, *_, **__: Offloadable("device", "pinned_host") if prim.name == "sin" else False
    save_sin = lambda prim, *_, **__: prim.name == "sin"
    policy = jax.checkpoint_policies.save_from_both_policies(save_sin, offload_sin)

    def body(x):
        jax.jit(lambda v: (jnp.sin(v), v))(x)           # dead
        return jnp.tanh(x), x
    f = lambda x: jax.checkpoint(body, policy=policy)(x)[0]
    with pytest.raises(ValueError, match="should be a boolean"):
        jax.grad(f)(np.float32(0.3))
    prog = trace_jax(f, np.float32(0.3))
    stack = S.Stack(layers=(S.Layer(kind=kind, in_axes=(), out_axes=(), size=2),))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack)
    assert report.status(S.STACK, "remat2") == status


def test_a_reproducer_of_a_raising_side_runs_jax_s_side(monkeypatch, tmp_path):
    """Where one side raised, no answers were compared: the reproducer
    still carries the stack's operands and runs JAX's side (a planted raise
    in the oracle's JAX side here, so the pristine JAX of the reproducer
    computes, and the script, where JAX raised, passes: JAX computes as the
    spec does). It once wrote `operands = []` and failed on an IndexError."""
    pytest.importorskip("jax")
    import subprocess
    import sys

    import oracle
    from fuzz import properties
    from oracle import properties as P

    def planted(*_):
        raise ValueError("planted: saved_residuals refused")
    monkeypatch.setattr(P, "jax_residuals", planted)
    prog = _program()
    stack = S.Stack(layers=(S.Layer(kind="vjp", in_axes=(), out_axes=(), size=2),))
    with pytest.raises(oracle.Mismatch) as info:
        properties.oracle_agrees(prog, implementations=("remat2",), stack=stack,
                                 only=(S.STACK_RESIDUALS,))
    path = tmp_path / "repro.py"
    path.write_text(info.value.repro.text)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert "JAX raised ValueError where the spec computes a result" in info.value.repro.text
    assert run.returncode == 0, run.stderr[-2000:]
    assert "JAX computes, as the spec does" in run.stdout, run.stdout[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]


# --------------------------------------------------------------------------
# a reverse layer holds the level's other inputs constant

def _weighted_program():
    """(x, w) -> sin(x) * w: x differentiated, w held constant."""
    return spec.trace(lambda x, w: ops.sin(x) * w, spec.f32[3], spec.f32[3])


def test_vjp_program_of_the_differentiated_inputs_only():
    """vjp_program(diff=...) returns the cotangents of the marked inputs
    only, with the values of numpy's d/dx sum(ct * sin(x) * w) = ct * cos(x) * w."""
    prog = _weighted_program()
    x, w, ct = (np.array([0.3, -0.7, 1.2], np.float32), np.array([1.5, -0.5, 2.0], np.float32),
                np.array([0.25, 1.0, -3.0], np.float32))
    back = spec.vjp_program(prog, diff=[True, False])
    (ct_x,) = spec.evaluate(back, x, w, ct)
    np.testing.assert_allclose(ct_x, ct * np.cos(x.astype(np.float64)) * w, rtol=1e-6)
    assert len(spec.vjp_program(prog).outputs) == 2


def test_a_held_input_is_no_reason_to_save_anything():
    """With w held constant, mul's tangent is x_dot' * w only (JAX's mul
    JVP, jax/_src/lax/lax.py `defjvp(mul_p, lambda xdot, x, y: mul(xdot, y),
    lambda ydot, x, y: mul(x, ydot))`: the second term is not built for a
    zero ydot), so sin(x), which only w's term reads, is no residual; with
    w differentiated it is. grad holds the inputs outside argnums constant
    the same way (jax.grad closes over them)."""
    prog = _weighted_program()
    held = [str(r) for r in spec.linearize(prog, [True, False]).residuals]
    both = [str(r) for r in spec.linearize(prog).residuals]
    assert "f32[3] output of sin" not in held and "f32[3] output of sin" in both
    loss = spec.trace(lambda x, w: ops.reduce_sum(ops.sin(x) * w, (0,)), spec.f32[3], spec.f32[3])
    assert "sin" not in {e.primitive.name for e in spec.grad(loss, argnums=0).eqns}


def test_vjp_layer_over_vmapped_grad_saves_in_jax_s_order():
    """Found by the ci draws (pristine jax 0.10.2): under an outer jit,
    vjp o vmap o grad of (sin(a) * a, b / c), a batched along its last axis.
    JAX's vjp layer closes over the grad layer's weights (zero tangents), so
    the batched backward jit's `mul(transpose(b'), w')` saves only w' there
    and transpose(b') becomes a residual of saved_residuals' own
    linearization, listed after that jit's outputs. The spec's vjp layer
    differentiated the weights too and dropped their cotangents, which made
    transpose(b') a residual of the layer, listed one place earlier. The
    stack's saved residuals are JAX's, measured live."""
    pytest.importorskip("jax")
    from fuzz import properties
    from oracle.spellings import Spelling

    prog = spec.trace(lambda a, b, c: (ops.sin(a) * a, b / c), spec.f32[3], spec.f32[()], spec.f32[()])
    stack = S.Stack((S.Layer("grad"), _vmap((-1, None, 0, 1, None), (0, 0, 0)), S.Layer("vjp")))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack,
                                      spelling=Spelling(jit=True), only=(S.STACK_RESIDUALS, S.STACK))
    assert [(r.property, r.status) for r in report.results] == [
        (S.STACK, "ok"), (S.STACK_RESIDUALS, "ok")], str(report)


@pytest.mark.parametrize("kind, status", [("linearize", "not applicable"), ("jvp", "ok")])
def test_a_linearize_layer_asks_the_checkpoint_s_policy(kind, status):
    """Found by the ci draws: jax.linearize partially evaluates, so a
    save_from_both_policies of an offload policy refuses (JAX raises
    ValueError, measured here), where jax.jvp asks no policy. The spec's
    linearize layer asks it too: 'not applicable' (both raise), never a
    Mismatch."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    from fuzz import properties
    from oracle.from_jax import trace_jax

    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.save_only_these_names("a"),
                                        cp.offload_dot_with_no_batch_dims("device", "pinned_host"))

    def body(d):
        checkpoint_name(d, "a")
        return jnp.sin(d), d
    f = lambda a: jax.checkpoint(body, policy=policy)(a)[0]
    with pytest.raises(ValueError, match="should be a boolean"):
        jax.linearize(f, np.float32(0.5))
    stack = S.Stack(layers=(S.Layer(kind=kind, in_axes=(), out_axes=(), size=2),))
    report = properties.oracle_agrees(trace_jax(f, np.float32(0.5)), implementations=("remat2",), stack=stack,
                                      only=(S.STACK,))
    assert report.status(S.STACK, "remat2") == status


def test_add_any_instantiates_a_zero_tangent_beside_a_nonzero_one():
    """Found by the ci draws: under jvp of vmap of grad, the grad's
    add_any of the two outputs' cotangents has one tangent zero (the
    identity output's) and one not; add_any's JVP is JAX's linear_jvp
    (ad.deflinear2), which instantiates the zero (`broadcast_in_dim 0.0`,
    a known array the linearization saves: measured here). The spec's
    add_any once skipped the zero and saved nothing for it."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from fuzz import properties
    from oracle.from_jax import trace_jax

    prog = trace_jax(lambda a: (a, jnp.sin(a)), np.ones(2, np.float32))
    stack = S.Stack(layers=(S.Layer(kind="grad", in_axes=(), out_axes=(), size=2),
                            S.Layer(kind="vmap", in_axes=(0, 0, 0), out_axes=(0,), size=2),
                            S.Layer(kind="jvp", in_axes=(), out_axes=(), size=2)))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack,
                                      only=(S.STACK_RESIDUALS,))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "ok"
    assert any("broadcast_in_dim" in s for _, s in
               [(str(r.type), str(r.source)) for r in spec.saved_residuals(S.spec_program(prog, stack))])


# --------------------------------------------------------------------------
# barriers of a linearized function, its linear function called

def _linear_body(x):
    return ops.mul(x, 2.0)


# (checkpoint's prevent_cse, body) -> barriers in the called linear function,
# by JAX's rules: remat_jvp appends a True flag per nonzero tangent to a
# per-input tuple, and remat_partial_eval's staged remat is lowered with a
# barrier on its inputs flagged True; a bool applies to every input
BARRIER_CASES = {
    "linear body, tuple (False,)": ((False,), _linear_body, 1),
    "linear body, tuple (True,)": ((True,), _linear_body, 1),
    "linear body, True": (True, _linear_body, 1),
    "linear body, False": (False, _linear_body, 0),
    "sin body, tuple (False,)": ((False,), ops.sin, 1),
    "sin body, False": (False, ops.sin, 0),
}


@pytest.mark.parametrize("name", sorted(BARRIER_CASES))
def test_barriers_of_the_called_linear_function(name):
    """The spec's count is JAX's rules' (above), and JAX's HLO agrees
    (oracle.check of the stack_barriers property, linearize alone and over
    a vmap)."""
    import oracle
    from spec.barriers import linear_optimization_barriers
    prevent_cse, body, want = BARRIER_CASES[name]
    prog = spec.trace(ops.checkpoint(body, prevent_cse=prevent_cse), spec.f32[3])
    assert linear_optimization_barriers(prog) == want
    for layers in [(S.Layer("linearize"),), (_vmap((0,), (0,)), S.Layer("linearize"))]:
        stack = S.Stack(layers)
        report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                              properties=(S.stack_barriers_property(stack, prog),))
        assert [r.status for r in report.results] == ["ok", "not compared"], str(report)
        assert f"spec {want}," in report.results[0].detail


def test_a_barrier_only_the_primal_outputs_need_is_dead_in_the_called_linear_function():
    """jit(linearize-then-call) returns the linear function's outputs only:
    a program's own optimization_barrier on a value only a primal output
    reads is dead code there, removed before lowering (JAX's HLO: none;
    campaign finding 068b60410e on 0.6.2, a false alarm on 0.10.2 too). One
    on a value the linear function reads through a residual stays, and its
    JVP's barrier on the tangents."""
    import oracle
    from spec.barriers import linear_optimization_barriers
    from spec.prims_conv import optimization_barrier
    dead = spec.trace(lambda x, w: (ops.sin(x), optimization_barrier(w)[0]), spec.f32[3], spec.f32[3])
    live = spec.trace(lambda x: ops.sin(optimization_barrier(x)[0]), spec.f32[3])
    for prog, diff, want in ((dead, [True, False], 0), (live, None, 2)):   # live: forward and tangent
        assert linear_optimization_barriers(prog, diff=diff) == want
    stack = S.Stack((S.Layer("linearize", argnums=(0,)),))
    report = oracle.check(oracle.to_jax(dead), oracle.AS_IS, *_args(dead),
                          properties=(S.stack_barriers_property(stack, dead),))
    assert report.results[0].status == "ok", str(report)


def test_a_known_checkpoint_an_outer_grad_made_is_barriered_in_the_forward_pass():
    """linearize o grad(argnums of the primal only) of sin(b) through
    checkpoint(identity): grad's transposed checkpoint (differentiated,
    prevent_cse) reads only the closed-over weights, so it is known, bound
    as it is in the forward pass, and lowered with a barrier (JAX's rule,
    remat_lowering; campaign finding 20a99d6e3f on 0.4.25, a false alarm on
    0.10.2 too). JAX agrees (0.4.36-0.6.2 inline it: a known divergence)."""
    import oracle
    from spec.barriers import known_checkpoint_barriers, linear_optimization_barriers
    prog = spec.trace(lambda b: ops.checkpoint(lambda o: o, prevent_cse=True)(ops.sin(b)), spec.f32[3])
    level1 = S.spec_program(prog, S.Stack((S.Layer("grad"),)))
    assert linear_optimization_barriers(level1, diff=[True, False]) == 1
    assert known_checkpoint_barriers(level1, diff=[True, False]) == 1
    # differentiated with respect to the weights too, the checkpoint is
    # staged in the linear function (its barrier there), none known
    assert linear_optimization_barriers(level1) == 1 and known_checkpoint_barriers(level1) == 0
    assert known_checkpoint_barriers(prog) == 0            # a user's checkpoint: not differentiated
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize", argnums=(0,))))
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                          properties=(S.stack_barriers_property(stack, prog),))
    inlines = next(d for d in divergences.DIVERGENCES
                   if d.name == "linearize-inlines-a-known-differentiated-checkpoint").active()
    assert report.results[0].status == ("known divergence" if inlines else "ok"), str(report)


def test_a_checkpoint_in_a_scan_is_barriered_in_a_third_order_linear_function():
    """linearize o grad o grad of sin(checkpoint(neg)(h)) in a scan: the
    linear function's scan runs the JVP of grad's recomputed checkpoint on
    a carry that starts at a literal zero and is a tangent from then on, so
    the checkpoint is barriered (JAX's HLO on every release; campaign
    finding faee1e5490 on 0.6.2, a false alarm on 0.10.2 too: the spec took
    the carry for a primal value). First and second order: one as well."""
    import oracle
    from spec.barriers import linear_optimization_barriers
    ck = ops.checkpoint(ops.neg, prevent_cse=True)
    prog = spec.trace(lambda a: spec.scan(lambda h, _: (ops.sin(ck(h)), None), a, None, length=1)[0], spec.f32[()])
    for layers in ((S.Layer("linearize"),), (S.Layer("grad"), S.Layer("linearize")),
                   (S.Layer("grad"), S.Layer("grad"), S.Layer("linearize"))):
        stack = S.Stack(layers)
        below = S.spec_program(prog, S.Stack(layers[:-1])) if layers[:-1] else prog
        assert linear_optimization_barriers(below) == 1
        report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, np.float32(0.3),
                              properties=(S.stack_barriers_property(stack, prog),))
        assert report.results[0].status == "ok", str(report)


def test_a_checkpoint_on_a_carry_without_tangent_is_barriered_by_the_scan_s_hoisting():
    """linearize(argnums=(0,)) of a scan whose carry has no tangent and
    whose body checkpoints the carry: the checkpoint is known, but
    _scan_known_hoisting re-traces the known body with only its consts
    known, and remat_partial_eval stages the checkpoint on the carry as
    `differentiated=True`, lowered with a barrier in the forward pass (JAX's
    HLO on 0.4.25 and 0.10.2; campaign finding e2fad985e3, a false alarm on
    0.10.2 too). 0.4.36-0.6.2 inline it earlier: a known divergence. On a
    const, the checkpoint is hoisted out of the loop whole: no barrier."""
    import oracle
    from spec.barriers import linear_optimization_barriers
    ck = ops.checkpoint(lambda l: ops.reduce_sum(ops.sin(l), (0,)), prevent_cse=True)

    def on_carry(d, b):
        return spec.scan(lambda h, _, c: (ops.sin(h), ops.tanh(ops.add(c, ck(h)))), b, None, consts=(d,), length=1)[1]

    def on_const(d, b):
        return spec.scan(lambda h, _, c: (ops.sin(h), ops.tanh(ops.add(h, ck(c)))), d, None, consts=(b,), length=1)[1]
    stack = S.Stack((S.Layer("linearize", argnums=(0,)),))
    inlines = next(d for d in divergences.DIVERGENCES
                   if d.name == "linearize-inlines-a-known-differentiated-checkpoint").active()
    for fn, want in ((on_carry, 1), (on_const, 0)):
        prog = spec.trace(fn, spec.f32[3], spec.f32[3])
        assert linear_optimization_barriers(prog, diff=[True, False]) == want
        report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                              properties=(S.stack_barriers_property(stack, prog),))
        assert report.results[0].status == ("known divergence" if inlines and want else "ok"), str(report)


def test_a_checkpoint_input_only_an_unread_output_passes_on_is_differentiated_by_the_next_level():
    """linearize o grad(argnums=(0, 2)) o vjp(argnums=(2,)) of a checkpoint
    returning (name(b), a), the second output unread: the vjp level holds a
    and b constant, so JAX binds the checkpoint as it is, both inputs kept
    (a trace binds the forward pass whole); the grad level differentiates
    it through a, and its linearization inlines the checkpoint's primal
    part, so the linear function of the last level has no checkpoint on b
    and no barrier (JAX's HLO on 0.4.25-0.10.2; campaign finding
    93195250e7, 0.4.25: the spec's forward pass had dropped the unread
    output and with it the input a, and kept the checkpoint for b)."""
    import oracle
    from spec import policies as sp
    from spec.barriers import linear_optimization_barriers
    from spec.remat import checkpoint_name
    ck = ops.checkpoint(lambda i, j: (checkpoint_name(j, "c"), i), policy=sp.save_only_these_names("c"),
                        prevent_cse=True)

    def f(a, b, e):
        return ops.tanh(ops.add(e, ck(a, b)[0]))
    prog = spec.trace(f, spec.f32[()], spec.f32[()], spec.f32[2, 3])
    layers = (S.Layer("vjp", argnums=(2,)), S.Layer("grad", argnums=(0, 2)))
    assert linear_optimization_barriers(S.spec_program(prog, S.Stack(layers))) == 0
    stack = S.Stack(layers + (S.Layer("linearize"),))
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, *_args(prog),
                          properties=(S.stack_barriers_property(stack, prog),))
    assert report.results[0].status == "ok", str(report)


def test_the_barrier_reproducer_fails_when_remat_jvp_leaves_tangents_unbarriered(tmp_path):
    """A reproducer of the stack_barriers property (the spec's count
    embedded) runs to agreement on pristine JAX, and fails under the
    one-line mutant of jax's remat_jvp that gives the tangents False flags
    (benchmarks/mutation: r2_jvp_tangents_unbarriered)."""
    import subprocess
    import sys
    from oracle.repro import write_repro
    from spec.barriers import linear_optimization_barriers
    prog = spec.trace(ops.checkpoint(_linear_body, prevent_cse=(False,)), spec.f32[3])
    stack = S.Stack((S.Layer("linearize"),))
    args = _args(prog)
    repro = write_repro(prog, None, args, S.STACK_BARRIERS, "remat2", "msg",
                        numeric=dict(barriers=linear_optimization_barriers(prog),
                                     operands=S.operands(prog, stack, args, 0)),
                        code=S.stack_barriers_property(stack, prog).repro_code)
    path = tmp_path / "repro.py"
    path.write_text(repro.text)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    mutated = subprocess.run([sys.executable, "-m", "benchmarks.mutation.shell", "r2_jvp_tangents_unbarriered",
                              "--", sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert mutated.returncode != 0 and "optimization barriers differ from the spec" in mutated.stderr, \
        mutated.stderr[-2000:]


def test_an_optimization_barrier_s_zero_tangents_are_made_before_its_primal_barrier():
    """Found by a pristine campaign (0.10.2, finding 89e5bf76ab): JAX's
    `_opt_barrier_jvp` (jax/_src/lax/lax.py) instantiates the zero tangents
    first and binds the primal barrier after them, so a third order
    linearization saves the zeros (broadcast_in_dim) before the primal
    barrier's outputs. The stack's saved residuals are JAX's, measured live."""
    pytest.importorskip("jax")
    from fuzz import properties
    from spec.prims_conv import optimization_barrier

    prog = spec.trace(lambda a, b, c: (lambda d, e: (d + ops.sin(d), e, a))(*optimization_barrier(b, c)),
                      spec.f32[3], spec.f32[2, 3], spec.f32[4])
    stack = S.Stack((S.Layer("grad"), S.Layer("vjp", argnums=(0, 1)), S.Layer("grad")))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack,
                                      only=(S.STACK_RESIDUALS,))
    assert report.status(S.STACK_RESIDUALS, "remat2") == "ok", str(report)


def _pad_in_a_jit_read_twice():
    """Pristine campaign finding d536c5ca6d (0.10.2), as reduced: pad in a
    jit, its padding value's zero tangent instantiated (ad.deflinear2)."""
    body = spec.trace(lambda e: ops.pad(e, np.float32(0.5), ((0, 0, 0), (0, 0, 0))), spec.f32[2, 3])

    def f(a):
        d, = ops.call(body, a, name="f0")
        return ops.log(ops.square(d)), ops.log(ops.square(a))
    return spec.trace(f, spec.f32[2, 3])


def _eigh_in_a_jit():
    """Pristine campaign finding c80cd1d416 (0.10.2), as reduced: eigh in a jit."""
    from spec.prims_decompositions import eigh_raw

    def g(e):
        f, w = eigh_raw(e, lower=True, sort_eigenvalues=True)
        return w, f * ops.slice(f, (0, 0), (1, 3))
    body = spec.trace(g, spec.f32[3, 3])

    def f(a, b):
        c, d = ops.call(body, b, name="f0")
        return ops.sqrt(ops.square(a)), c, d
    return spec.trace(f, spec.f32[()], spec.f32[3, 3])


@pytest.mark.parametrize("finding", [_pad_in_a_jit_read_twice, _eigh_in_a_jit])
def test_grad_of_grad_saves_each_jit_s_instantiated_zero(finding):
    """Under grad o grad, linearizing a jit (and the transposed jit of the
    first grad) saves each zero a JVP rule instantiated as an output of that
    jit, where the spec reads a literal: jit-linearize-saves-an-instantiated-
    zero at a stack level (composed with the literals JAX has no entry for).
    The stack's saved residuals are JAX's, measured live."""
    pytest.importorskip("jax")
    from fuzz import properties
    stack = S.Stack((S.Layer("grad"), S.Layer("grad")))
    report = properties.oracle_agrees(finding(), implementations=("remat2",), stack=stack,
                                      only=(S.STACK_RESIDUALS,))
    name = "jit-linearize-saves-an-instantiated-zero"
    import oracle
    if next(d for d in oracle.divergences.DIVERGENCES if d.name == name).active():
        [result] = report.results
        assert result.status == "known divergence" and result.detail == name, str(report)
    else:
        assert report.status(S.STACK_RESIDUALS, "remat2") in ("ok", "not compared"), str(report)


@pytest.mark.parametrize("inner_cse", [False, (False,), True, (True,)], ids=str)
@pytest.mark.parametrize("outer_cse", [False, True], ids=str)
def test_a_nested_checkpoint_of_known_values_in_a_called_linear_function(inner_cse, outer_cse):
    """linearize o grad of a checkpoint nested in another: grad's
    transposed inner checkpoint reads only the cotangent, a known value in
    the linear function's staged outer checkpoint, which is called, not
    transposed, so the inner one is lowered as it is, barriered where its
    prevent_cse (remat_jvp's True flags for a tuple) says so, whatever the
    outer's (pristine campaign finding 749009e12b). JAX's HLO is the
    independent count."""
    import oracle
    from oracle.from_jax import trace_jax
    from oracle.jax_api.versions import Releases, holds
    if isinstance(inner_cse, tuple) and not holds(Releases("0.7.2")):
        pytest.skip(f"per-argument prevent_cse is an API of jax 0.7.2 on, not {jax.__version__}")

    def f(a, b):
        def outer(v):
            return jax.checkpoint(lambda u: jax.numpy.reshape(u, (1,))[0], prevent_cse=inner_cse)(v * v)
        return jax.checkpoint(outer, prevent_cse=outer_cse)(a) + b
    args = (np.float32(-1.13), np.float32(-0.54))
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=(S.stack_barriers_property(stack, trace_jax(f, *args)),))
    assert [r.status for r in report.results] == ["ok"], str(report)
