"""Known divergences of jax 0.10.2 from the spec.

Each entry has a predicate as narrow as the defect: it holds only when
JAX's answer is *exactly* what the named defect produces (computed by the
spec with the defect modelled), never just "they differ". A check that
matches one is reported in the Report as a known divergence, never hidden;
anything else is a Mismatch. docs/divergences.md is generated from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import spec
from spec import policies as sp
from spec.ir import Eqn, Program, Var, subprograms
from spec.remat import remat_p


@dataclass
class Context:
    """What a divergence predicate may look at."""
    implementation: str
    property: str
    policy: Any                      # the spec policy checked (None: as written)
    program: Program                 # the spec program
    jax_residuals: list | None = None
    spec_residuals: list | None = None
    error: BaseException | None = None
    barriers: tuple | None = None    # (spec predicts, JAX has)

    def residuals_with(self, transform: Callable, opaque_checkpoints: bool = False) -> list:
        """The spec's residual list after mapping every checkpoint's policy
        (and, with opaque_checkpoints, making every checkpoint output read
        every input tangent of its checkpoint). Under remat3, values saved
        out of a nested checkpoint are named by their producer (see
        `producer_sources`)."""
        prog = map_policies(self.program, transform)
        if opaque_checkpoints:
            prog = _reading_all_input_tangents(prog)
        if self.implementation == "remat3":
            return producer_sources(prog)
        return [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]


def producer_sources(prog: Program) -> list:
    """The spec's residuals with each "output of remat2" (a value saved out
    of a checkpoint nested in a checkpoint, forwarded through the inner
    checkpoint's known half) named by the equation that produced it inside
    the nested checkpoint, or by the argument it forwards."""
    from spec.partial_eval import source_of
    lin = spec.linearize(prog)

    def resolve(atom, p: Program):
        for e in p.eqns:
            for k, v in enumerate(e.outputs):
                if v is atom and e.primitive is remat_p and k < len(e.outputs) - e.residual_outputs:
                    # the nested checkpoint's own output: remat3 names its hi-primitive
                    from spec.partial_eval import Source
                    return Source("output", primitive="call_hi_primitive")
                if v is atom and e.primitive is remat_p:
                    body = e.params["jaxpr"]
                    inner = body.outputs[k]
                    for i, bv in enumerate(body.inputs):
                        if bv is inner:
                            return resolve(e.inputs[i], p)
                    return resolve(inner, body)
        return source_of(atom, p)
    out = []
    for r in lin.residuals:
        src = r.source
        if src.kind == "output" and src.primitive == "remat2":
            src = resolve(r.var, lin.forward)
        out.append((str(r.type), str(src)))
    return out


@dataclass(frozen=True)
class Normalization:
    """A naming difference of one implementation, undone before comparing
    (and reported as a known divergence whenever it changed something)."""
    name: str
    reason: str
    apply: Callable   # (implementation, jax residuals, spec residuals, program) -> jax residuals


def _remat3_arg_names(impl, jax_res, spec_res, prog):
    import re
    if impl != "remat3" or not prog.input_names:
        return jax_res
    out = []
    for t, s in jax_res:
        m = re.fullmatch(r"from the argument args\[(\d+)\]", s)
        if m and int(m.group(1)) < len(prog.input_names):
            s = f"from the argument {prog.input_names[int(m.group(1))]}"
        out.append((t, s))
    return out


def _remat3_jit_names(impl, jax_res, spec_res, prog):
    if impl != "remat3":
        return jax_res
    out = []
    for i, (t, s) in enumerate(jax_res):
        if s == "output of jitted function '_remat3'" and i < len(spec_res) and spec_res[i][0] == t \
                and spec_res[i][1].startswith("output of jitted function "):
            s = spec_res[i][1]
        out.append((t, s))
    return out


NORMALIZATIONS = [
    Normalization("remat3-names-arguments-args[i]",
                  "Under jax_remat3 (jax 0.10.2) saved_residuals names the arguments of a "
                  "checkpointed function `args[i]` (jax.checkpoint returns a functools.partial "
                  "without the function's signature); the spec uses the parameter names.",
                  _remat3_arg_names),
    Normalization("remat3-names-jitted-checkpoints-_remat3",
                  "Under jax_remat3 (jax 0.10.2) jax.jit(jax.checkpoint(f)) is a jitted function "
                  "named '_remat3' (the partial's function), not 'f'; same value, same memory.",
                  _remat3_jit_names),
]


def _reading_all_input_tangents(prog: Program) -> Program:
    """`prog` with every (top-level) checkpoint output o replaced by
    o + sum_x (sum(x) - sum(x)) over the checkpoint's float inputs x: the
    value is exactly o and nothing new needs saving (add, sub, reduce_sum
    are linear), but the output tangent reads every input tangent and is
    never a symbolic zero, as with a linearizer that treats the checkpoint
    as opaque (remat3)."""
    from spec import ops
    from spec.core import Tracer, bind
    from spec.ir import is_float

    def fn(*xs):
        env = {v.id: x for v, x in zip(prog.inputs, xs)}
        read = lambda a: env[a.id] if isinstance(a, Var) else a.value
        for e in prog.eqns:
            outs = bind(e.primitive, *map(read, e.inputs), **e.params)
            outs = outs if e.primitive.multiple_results else [outs]
            ins = [read(a) for a in e.inputs]
            ins = [x for x in ins if isinstance(x, Tracer) and is_float(x.dtype)]
            if e.primitive is remat_p and ins:
                zero = None
                for x in ins:     # (sum(x) - sum(x)) reads x's tangent, adds exactly 0
                    s = ops.reduce_sum(x, tuple(range(x.ndim))) if x.ndim else x
                    d = ops.sub(s, s)
                    zero = d if zero is None else ops.add(zero, ops.convert_element_type(d, zero.dtype))
                outs = [ops.add(o, ops.convert_element_type(zero, o.dtype))
                        if is_float(o.dtype) else o for o in outs]
            for v, o in zip(e.outputs, outs):
                env[v.id] = o
        return [read(a) for a in prog.outputs]
    return spec.trace(fn, *prog.in_types)


def map_policies(prog: Program, transform: Callable) -> Program:
    """`prog` with every checkpoint's policy p replaced by transform(p)."""
    return map_params(prog, lambda e, params: dict(params, policy=transform(params["policy"]))
                      if e.primitive is remat_p else params)


def _policies_in(prog: Program) -> list:
    out = []
    for e in prog.eqns:
        if e.primitive is remat_p:
            out.append(e.params["policy"])
        for _, sub in subprograms(e.params):
            out += _policies_in(sub)
    return out


# -- how remat3 (jax/_src/interpreters/remat.py, 0.10.2) treats policies -----
# Only two rules consult the policy (every other primitive is recomputed):
#   dot_general (lax._dot_general_remat): saved iff the policy is a
#       DotsSaveable object and says yes;
#   checkpoint_name (CheckpointName.remat): saved iff the policy is a
#       SaveOnlyTheseNames / SaveAnyNamesButThese object and says yes, or
#       is everything_saveable itself.
# Any other policy object (user callables, save_from_both_policies, the
# offload policies, save_anything_except_these_names) is consulted by no one.

def _remat3_recognises(policy) -> bool:
    return policy is None or isinstance(policy, (
        sp._NothingSaveable, sp._EverythingSaveable, sp._DotsSaveable, sp._DotsWithNoBatchDimsSaveable,
        sp.save_only_these_names, sp.save_any_names_but_these))


@dataclass(frozen=True)
class _Remat3View(sp._Policy):
    """The policy remat3 effectively applies (see above)."""
    policy: Any

    def __call__(self, prim, *in_types, **params):
        p = self.policy
        if prim.name == "dot_general" and isinstance(p, (sp._DotsSaveable, sp._DotsWithNoBatchDimsSaveable)):
            return sp.ask(p, prim, in_types, params) is sp.Saveable
        if prim.name == "name":
            if isinstance(p, (sp.save_only_these_names, sp.save_any_names_but_these)):
                return sp.ask(p, prim, in_types, params) is sp.Saveable
            return p is sp.everything_saveable
        return False


def _remat3_effective(policy):
    return _Remat3View(policy)


@dataclass(frozen=True)
class Divergence:
    """`repro` is a snippet run after the preamble REPRO_PREAMBLE."""
    name: str
    reason: str
    repro: str
    applies: Callable[[Context], bool] = field(compare=False)


REPRO_PREAMBLE = ("import jax, jax.numpy as jnp\n"
                  "from jax.ad_checkpoint import checkpoint_name, print_saved_residuals\n")


def _residuals_equal_to(ctx: Context, transform, opaque_checkpoints=False) -> bool:
    return ctx.jax_residuals == ctx.residuals_with(transform, opaque_checkpoints)


def _remat3_opaque_zeros(ctx):
    """remat3 does not see that a checkpoint's output tangent is zero when
    the body computes it from primals alone (e.g. integer_pow y=0): it
    saves what a nonzero tangent would need. Combined with remat3's policy
    view, since both act at once."""
    return (ctx.implementation == "remat3" and ctx.property == "residuals"
            and not _residuals_equal_to(ctx, _remat3_effective)
            and _residuals_equal_to(ctx, _remat3_effective, opaque_checkpoints=True))


def _remat3_restricted(ctx):
    return (ctx.implementation == "remat3" and ctx.property == "residuals"
            and all(_remat3_recognises(p) for p in _policies_in(ctx.program))
            and _residuals_equal_to(ctx, _remat3_effective))


def _remat3_unrecognised(ctx):
    return (ctx.implementation == "remat3" and ctx.property == "residuals"
            and any(not _remat3_recognises(p) for p in _policies_in(ctx.program))
            and _residuals_equal_to(ctx, _remat3_effective))


def _checkpoint_input_sources(prog: Program) -> set:
    """The provenance (as saved_residuals words it) of every input of every
    checkpoint in `prog`."""
    from spec.partial_eval import source_of
    out = set()

    def walk(p):
        for e in p.eqns:
            if e.primitive is remat_p:
                for a in e.inputs:
                    try:
                        out.add((str(a.type), str(source_of(a, p))))
                    except ValueError:
                        pass
            for _, sub in subprograms(e.params):
                walk(sub)
    walk(prog)
    return out


def _remat3_zero_input_tangents(ctx):
    """remat3 instantiates the tangents of a checkpoint's inputs
    (RematTraced.jvp/linearized: `map(ad_util.instantiate, tangents)`), so a
    checkpoint input with a zero tangent is still saved when the body's
    derivative reads it. The predicate: JAX saves everything the spec does
    (up to remat3's policy view) plus only values that are inputs of some
    checkpoint."""
    import collections
    if ctx.implementation != "remat3" or ctx.property != "residuals":
        return False
    base = collections.Counter(ctx.residuals_with(_remat3_effective))
    got = collections.Counter(ctx.jax_residuals)
    extra = got - base
    return bool(extra) and not (base - got) and set(extra) <= _checkpoint_input_sources(ctx.program)


def _remat3_nested_provenance(ctx):
    return (ctx.implementation == "remat3" and ctx.property == "residuals"
            and ctx.jax_residuals != [(str(r.type), str(r.source)) for r in spec.saved_residuals(ctx.program)]
            and ctx.jax_residuals == producer_sources(ctx.program))


def _anything_except_stub(ctx):
    pols = _policies_in(ctx.program)
    return (ctx.implementation == "remat2" and ctx.property == "residuals"
            and any(isinstance(p, sp.save_anything_except_these_names) for p in pols)
            and _residuals_equal_to(ctx, lambda p: sp.everything_saveable
                                    if isinstance(p, sp.save_anything_except_these_names) else p))


def _has_name(prog: Program) -> bool:
    from spec.remat import names_in
    return bool(names_in(prog))


def _remat3_name_no_batching(ctx):
    return (ctx.implementation == "remat3" and ctx.property == "vmap"
            and isinstance(ctx.error, NotImplementedError) and "CheckpointName" in str(ctx.error)
            and _has_name(ctx.program))


def remat3_barrier_model(prog: Program) -> bool:
    """remat3 (RematTraced.vjp_bwd/linearized, jax 0.10.2) puts an
    optimization barrier on the checkpoint's inputs that its backward pass
    reads, whatever prevent_cse says: a barrier exists iff some checkpoint,
    linearized on its own under remat3's view of its policy, saves one of
    its own inputs."""
    from spec.core import Tracer, bind
    from spec.partial_eval import dce
    for e in _remats(dce(prog)[0]):     # dead checkpoints have no backward pass
        body = e.params["jaxpr"]
        alone = spec.trace(lambda *xs, e=e: bind(remat_p, *xs, **dict(
            e.params, policy=_remat3_effective(e.params["policy"]))), *body.in_types)
        if any(r.source.kind == "argument" for r in spec.saved_residuals(alone)):
            return True
    return False


def _remats(prog: Program):
    for e in prog.eqns:
        if e.primitive is remat_p:
            yield e
        for _, sub in subprograms(e.params):
            yield from _remats(sub)


def _remat3_barriers(ctx):
    return (ctx.implementation == "remat3" and ctx.property == "prevent_cse" and ctx.barriers is not None
            and (ctx.barriers[1] > 0) == remat3_barrier_model(ctx.program))


def map_params(prog: Program, fn) -> Program:
    """Apply fn(eqn, params) -> params to every equation, sub-programs too."""
    eqns = []
    for e in prog.eqns:
        params = dict(e.params)
        for k, sub in subprograms(params):
            params[k] = map_params(sub, fn)
        eqns.append(Eqn(e.primitive, e.inputs, e.outputs, fn(e, params)))
    return Program(prog.inputs, eqns, prog.outputs, input_names=prog.input_names)


def _jit_linearize_zero(ctx):
    if ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    import collections
    only_jax = collections.Counter(ctx.jax_residuals) - collections.Counter(ctx.spec_residuals)
    only_spec = collections.Counter(ctx.spec_residuals) - collections.Counter(ctx.jax_residuals)
    return (not only_spec and only_jax and all(
        t.endswith("[]") and s.startswith("output of jitted function") for t, s in only_jax))


DIVERGENCES = [
    Divergence(
        "remat3-names-nested-checkpoint-values-by-producer",
        "A value saved out of a checkpoint nested in a checkpoint: remat2 forwards it through "
        "the inner checkpoint's known half, so saved_residuals (and the spec) call it "
        "\"output of remat2\"; remat3 (jax 0.10.2) has no such half and names the equation "
        "that produced it, or calls a nested checkpoint's own output \"output of "
        "call_hi_primitive\". Same value, same memory. The predicate: JAX's list equals the "
        "spec's with every \"output of remat2\" renamed so.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x, w: jnp.sum(jax.checkpoint(jnp.sin)(x @ w) ** 2), "
        "policy=jax.checkpoint_policies.dots_saveable)\n"
        "print_saved_residuals(f, jnp.ones((2, 3)), jnp.ones((3, 3)))",
        _remat3_nested_provenance),
    Divergence(
        "remat3-policy-only-for-dots-and-names",
        "Under jax_remat3 (jax 0.10.2, interpreters/remat.py) only dot_general, jit, scan, cond "
        "and hi-primitives such as checkpoint_name have rules that consult the policy; every "
        "other equation is recomputed, so e.g. everything_saveable saves only the checkpoint's "
        "inputs, dot outputs and named values. The predicate: JAX's residuals equal the spec's "
        "for the same policy asked only about dot_general and name equations.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), "
        "policy=jax.checkpoint_policies.everything_saveable)\n"
        "print_saved_residuals(f, jnp.ones(3))  # only the input",
        _remat3_restricted),
    Divergence(
        "remat3-unrecognised-policy-is-full-remat",
        "Under jax_remat3 (jax 0.10.2) a policy that is not one of the built-in data policies "
        "(a user callable, save_from_both_policies, the offload policies, "
        "save_anything_except_these_names) is silently treated as nothing_saveable. The "
        "predicate: JAX's residuals equal the spec's with every unrecognised policy replaced "
        "by nothing_saveable.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), "
        "policy=lambda prim, *_, **__: prim.name == 'sin')\n"
        "print_saved_residuals(f, jnp.ones(3))  # only the input",
        _remat3_unrecognised),
    Divergence(
        "remat3-misses-zero-tangents-out-of-checkpoints",
        "Under jax_remat3 (jax 0.10.2) a checkpoint whose output tangent is zero because the "
        "body computes it from primals alone (e.g. x ** 0) is linearized as if the tangent "
        "were nonzero, so the backward pass saves what that tangent would need (found by the "
        "fuzzer: `cos` of an input of the checkpoint). Wasted memory; gradients are right. "
        "The predicate: JAX's residuals equal the spec's for the program whose checkpoint "
        "outputs are made to read every input tangent and never be symbolic zeros "
        "(o + sum(x) - sum(x)), with remat3's policy view, and differ from the spec's for the "
        "program as it is.",
        "jax.config.update('jax_remat3', True)\n"
        "g = lambda a: jax.checkpoint(lambda h: h ** 0)(jnp.sin(a))\n"
        "print_saved_residuals(g, 1.0)  # f32[] output of cos",
        _remat3_opaque_zeros),
    Divergence(
        "remat3-instantiates-zero-tangents-into-checkpoints",
        "Under jax_remat3 (jax 0.10.2) the tangents of a checkpoint's inputs are instantiated "
        "(`map(ad_util.instantiate, tangents)  # TODO` in RematTraced), so an input whose "
        "tangent is zero (e.g. x ** 0) still has its value saved when the body's derivative "
        "reads it (found by the fuzzer). Wasted memory; gradients are right. The predicate: "
        "JAX saves what the spec saves (with remat3's policy view) plus only values that are "
        "inputs of some checkpoint.",
        "jax.config.update('jax_remat3', True)\n"
        "g = lambda a: jax.checkpoint(lambda h, a: jnp.cos(h))(a ** 0, a)\n"
        "print_saved_residuals(g, 1.0)  # f32[] output of integer_pow",
        _remat3_zero_input_tangents),
    Divergence(
        "save-anything-except-these-names-is-a-stub",
        "jax 0.10.2 defines save_anything_except_these_names(*names) as `lambda *_, **__: True` "
        "(a TODO in ad_checkpoint.py), so it saves the excluded names too. The spec implements "
        "the documented meaning. The predicate: JAX's residuals equal the spec's with the "
        "policy replaced by everything_saveable.",
        "p = jax.checkpoint_policies.save_anything_except_these_names('h')\n"
        "f = jax.checkpoint(lambda x: jnp.sum(checkpoint_name(jnp.sin(x), 'h') * x), policy=p)\n"
        "print_saved_residuals(f, jnp.ones(3))  # named 'h'",
        _anything_except_stub),
    Divergence(
        "remat3-checkpoint-name-has-no-batching-rule",
        "Under jax_remat3 (jax 0.10.2) checkpoint_name's hi-primitive has no batching rule: "
        "jax.vmap of a function that names a value raises NotImplementedError.",
        "jax.config.update('jax_remat3', True)\n"
        "jax.vmap(jax.checkpoint(lambda x: checkpoint_name(x, 'h') * 2))(jnp.ones((2, 3)))",
        _remat3_name_no_batching),
    Divergence(
        "remat3-barrier-iff-backward-reads-checkpoint-inputs",
        "Under jax_remat3 (jax 0.10.2) prevent_cse is not consulted: the backward pass of a "
        "checkpoint puts an optimization barrier on exactly those checkpoint inputs it reads "
        "(RematTraced.vjp_bwd: rem(*optimization_barrier(primals))). So there is a barrier "
        "with prevent_cse=False, and none when the backward reads only saved values (e.g. a "
        "name the policy saves) or nothing (a linear body), where remat2 and the spec's "
        "staged checkpoint with prevent_cse=True have one. The predicate: JAX has a barrier "
        "iff some checkpoint, linearized alone with remat3's view of its policy, saves one "
        "of its own inputs.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), prevent_cse=False)\n"
        "print('optimization_barrier' in jax.jit(jax.grad(f)).lower(jnp.ones(3)).as_text())  # True",
        _remat3_barriers),
    Divergence(
        "jit-linearize-saves-an-instantiated-zero",
        "Linearizing a jit body (pjit's linearize rule, jax 0.10.2) saves a zero tangent that a "
        "JVP rule instantiated as a known scalar (e.g. select_n's for a constant branch of "
        "jnp.where) as an output of the jitted function. The spec keeps such zeros inline and "
        "saves nothing. The predicate: the only residuals JAX has and the spec lacks are "
        "scalar outputs of jitted functions, and the spec has none JAX lacks.",
        "f = lambda x: jnp.where(x > 1.0, x * x, 0.0)\n"
        "print_saved_residuals(f, 2.0)  # f32[] output of jitted function '_where'",
        _jit_linearize_zero),
]


def find(ctx: Context) -> Divergence | None:
    for d in DIVERGENCES:
        try:
            if d.applies(ctx):
                return d
        except Exception as e:   # a predicate that fails is our bug: never hide it
            raise RuntimeError(f"known-divergence predicate {d.name} failed: {e!r}") from e
    return None
