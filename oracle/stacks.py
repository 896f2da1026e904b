"""Transformation stacks: the checked function under jax.grad, jax.vjp,
jax.jvp, jax.linearize (the linear function called on its own, in a jit
of its own) and jax.vmap with any in_axes / out_axes, composed, against
the spec's transformations of the spec program (spec.jvp_program,
spec.vjp_program, spec.vmap).

A Stack is plain data: its layers, innermost first. Each layer maps a
*level* (a function of a flat list of arrays returning a tuple of arrays,
and the spec program computing the same) to the next:

  jvp        (x, t)  -> the outputs, then the tangents of the float outputs (t: one
             per differentiated x): what jax.jvp returns, both checked (an
             outer layer's primal outputs are the inner layer's tangents)
  linearize  the tangents of the float outputs; outermost only: jax.linearize
             in the checked jit, the returned linear function called by a
             second jit
  vjp        (x, ct) -> the cotangents of the differentiated x (ct: one per float output)
  grad       (x, w)  -> jax.grad of sum_k sum(y_k * w_k) over the float outputs y_k,
             w.r.t. the differentiated x (the spec: vjp with cotangents w)
  vmap       every input batched along in_axes[i] (None: not batched), every
             output along out_axes[j] (jax.vmap, spec.vmap)

Differentiated inputs: the float inputs of the checked program, and the
tangents and cotangents that jvp and vjp add (the weights grad adds are
held constant by any outer AD layer). An AD layer differentiates all of
them, or those its `argnums` name; it closes over the rest, so an outer
AD layer differentiating one of those reaches the inner transformation
through a closure, as in `jax.grad(lambda x: jax.grad(lambda y: f(x, y))(y0))(x0)`.

The JAX side is Python source (`stack_source`), executed to check and
written verbatim into reproducers: the reproducer spells the same stack.
`stack_property(stack)` is the stack as an oracle.properties.Property of
the compiled tier (one jit per stack, with every other compiled property).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

import spec
from spec.ir import ArrayType, Program, is_float, is_key, subprograms

from oracle.conventions import jax_value_of
from oracle.repro import FLOAT_OUTPUTS_SOURCE
from oracle.errors import InvalidArgument
from spec import ops
from spec.barriers import linear_optimization_barriers
from spec.partial_eval import dce
from spec.core import building, eval_program_traced
from oracle import divergences, jax_api, properties as P
from oracle.jax_api.flags import flags

AD_KINDS = ("jvp", "linearize", "vjp", "grad")
KINDS = AD_KINDS + ("vmap",)
FORWARD_KINDS = ("jvp", "linearize")
REVERSE_KINDS = ("vjp", "grad")


@dataclass(frozen=True)
class Layer:
    kind: str
    in_axes: tuple = ()               # vmap: one entry (int or None) per input of the level below
    out_axes: tuple = ()              # vmap: one int per output of the level below
    size: int = 2                     # vmap: the batch size
    argnums: tuple | None = None      # AD: the level's inputs it differentiates (None: every
                                      # differentiated one); the others are closed over

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InvalidArgument(f"unknown stack layer {self.kind!r}; supported: {KINDS}")
        if self.argnums is not None and (self.kind not in AD_KINDS or not self.argnums):
            raise InvalidArgument(f"argnums={self.argnums!r} for a {self.kind} layer: an AD layer "
                                  "differentiates a non-empty tuple of input positions")

    def __str__(self):
        if self.kind != "vmap":
            return self.kind if self.argnums is None else f"{self.kind}(argnums={self.argnums!r})"
        return f"vmap(in_axes={self.in_axes!r}, out_axes={self.out_axes!r}, size={self.size})"


@dataclass(frozen=True)
class Stack:
    layers: tuple                     # Layer, innermost first

    def __post_init__(self):
        if not self.layers:
            raise InvalidArgument("a transformation stack needs at least one layer")
        if any(l.kind == "linearize" for l in self.layers[:-1]):
            raise InvalidArgument(f"linearize is the outermost layer only, got {self}")

    def __str__(self):
        return " o ".join(str(l) for l in reversed(self.layers))

    @property
    def ad_depth(self) -> int:
        return sum(l.kind in AD_KINDS for l in self.layers)

    @property
    def linearized(self) -> bool:
        return self.layers[-1].kind == "linearize"



# --------------------------------------------------------------------------
# levels: what each layer sees

@dataclass(frozen=True)
class Level:
    """Types of a level's inputs and outputs, and which inputs an outer AD layer differentiates."""
    in_types: tuple
    out_types: tuple
    diff: tuple                       # bool per input

    @property
    def diff_positions(self) -> list[int]:
        return [i for i, d in enumerate(self.diff) if d]

    @property
    def float_outputs(self) -> list[int]:
        return [j for j, t in enumerate(self.out_types) if is_float(t.dtype)]


def base_level(prog: Program) -> Level:
    return Level(tuple(prog.in_types), tuple(prog.out_types),
                 tuple(is_float(t.dtype) for t in prog.in_types))


def _batched(t: ArrayType, axis, size) -> ArrayType:
    if axis is None:
        return t
    shape = list(t.shape)
    shape.insert(axis % (t.ndim + 1), size)
    return ArrayType(tuple(shape), t.dtype)


def differentiated(level: Level, layer: Layer) -> list[int]:
    """The positions of `level`'s inputs an AD layer differentiates: its
    argnums, or every differentiated input. The level's other inputs are
    closed over by the layer's function (`lambda *dd: f(*with_diff(a, d,
    dd))`), so an outer AD layer that differentiates one of them reaches
    the inner transformation as a tracer of its own, not an argument: the
    setting of perturbation confusion (Siskind & Pearlmutter 2005), which
    JAX's JVPTrace tells apart by its tag."""
    return list(layer.argnums) if layer.argnums is not None else level.diff_positions


def _mask(level: Level, positions) -> list[bool]:
    return [i in positions for i in range(len(level.in_types))]


def next_level(level: Level, layer: Layer) -> Level:
    """The level a layer makes of `level` (types only: no program is built)."""
    d = differentiated(level, layer) if layer.kind in AD_KINDS else []
    fl = [level.out_types[j] for j in level.float_outputs]
    if layer.kind in FORWARD_KINDS:
        outs = level.out_types + tuple(fl) if layer.kind == "jvp" else tuple(fl)
        return Level(level.in_types + tuple(level.in_types[i] for i in d), outs,
                     level.diff + (True,) * len(d))
    if layer.kind in REVERSE_KINDS:
        held = layer.kind == "vjp"
        return Level(level.in_types + tuple(fl), tuple(level.in_types[i] for i in d),
                     level.diff + (held,) * len(fl))
    return Level(tuple(_batched(t, a, layer.size) for t, a in zip(level.in_types, layer.in_axes)),
                 tuple(_batched(t, a, layer.size) for t, a in zip(level.out_types, layer.out_axes)),
                 level.diff)


def applicable(level: Level, layer: Layer) -> str | None:
    """Why `layer` cannot be applied to `level`, or None."""
    if any(is_key(t.dtype) for t in level.in_types + level.out_types):
        return "key-typed values"
    if layer.kind in AD_KINDS:
        if not level.diff_positions:
            return "no differentiated input"
        if not level.float_outputs:
            return "no float output"
        if layer.argnums is not None and not set(layer.argnums) <= set(level.diff_positions):
            return f"argnums {layer.argnums!r} not among the differentiable inputs {level.diff_positions!r}"
        return None
    if len(layer.in_axes) != len(level.in_types) or len(layer.out_axes) != len(level.out_types):
        return "in_axes / out_axes do not match the level"
    if all(a is None for a in layer.in_axes):
        return "no batched input"
    for t, a in zip(level.in_types, layer.in_axes):
        if a is not None and not -(t.ndim + 1) <= a <= t.ndim:
            return f"in_axes entry {a} out of range for {t}"
    for t, a in zip(level.out_types, layer.out_axes):
        if a is None or not -(t.ndim + 1) <= a <= t.ndim:
            return f"out_axes entry {a} out of range for {t}"
    return None


def levels(prog: Program, stack: Stack) -> list[Level]:
    """The base level and the level after each layer; InvalidArgument where
    a layer does not apply."""
    out = [base_level(prog)]
    for layer in stack.layers:
        why = applicable(out[-1], layer)
        if why is not None:
            raise InvalidArgument(f"stack {stack}: {layer} does not apply ({why})")
        out.append(next_level(out[-1], layer))
    return out


# --------------------------------------------------------------------------
# the spec side: programs

def _select(prog: Program, outputs) -> Program:
    """`prog` returning only `outputs`, its equations as they are: the
    stack's JAX function drops outputs by not returning them, and tracing
    removes no dead code, so the next layer sees (and a checkpoint's policy
    is asked about) every equation, dead ones included (found by the ci
    draws: a dead jit's `sin` in a checkpoint is still offered to a
    save_from_both_policies that refuses it)."""
    return Program(prog.inputs, prog.eqns, [prog.outputs[j] for j in outputs], input_names=prog.input_names)


def _loss_program(prog: Program, level: Level) -> Program:
    """(x, w) -> sum_k sum(y_k * w_k) over the float outputs y_k, as the
    stack's source writes it (`total(jax.lax.mul(y, w))`: a mul, a
    reduce_sum over every axis of an array, the terms added in order).
    lax.mul, not `*`: jnp's `*` would promote a weakly typed output (one
    made from Python scalars) with a convert_element_type the spec, which
    has no weak types, does not make, and whose transpose, a convert of
    the cotangent, JAX then saves at second order (found by a pristine
    nightly, 18d8ab3799)."""
    with building() as b:
        xs = [b.new_input(t) for t in level.in_types]
        ws = [b.new_input(level.out_types[j]) for j in level.float_outputs]
        outs = eval_program_traced(prog, *xs)
        ys = [outs[j] for j in level.float_outputs]      # a Var, or a Literal (a constant output)
        shapes = [level.out_types[j].shape for j in level.float_outputs]
        terms = [ops.reduce_sum(ops.mul(y, w), tuple(range(len(shape)))) if shape else ops.mul(y, w)
                 for y, w, shape in zip(ys, ws, shapes)]
        total = terms[0]
        for t in terms[1:]:
            total = ops.add(total, t)
        return b.build(xs + ws, [total])


def _spec_layer(prog: Program, level: Level, layer: Layer) -> Program:
    n = len(prog.outputs)
    if layer.kind == "vmap":
        return spec.vmap(prog, list(layer.in_axes), list(layer.out_axes), axis_size=layer.size)
    d = differentiated(level, layer)
    if layer.kind in FORWARD_KINDS:
        if layer.kind == "linearize":
            # jax.linearize partially evaluates the JVP, so every checkpoint's
            # policy is asked (and may refuse, as a save_from_both_policies of
            # an offload policy does: ci-draw finding); its values are the JVP's
            spec.linearize(prog, diff=_mask(level, d))
        jp, _ = spec.jvp_program(prog, nonzeros=_mask(level, d))     # outputs, then float tangents
        return jp if layer.kind == "jvp" else _select(jp, range(n, len(jp.outputs)))
    if layer.kind == "grad":
        return spec.traced_grad(_loss_program(prog, level), argnums=tuple(d))
    if layer.kind in REVERSE_KINDS:
        # the level's other inputs are closed over by the stack's jax.vjp, so
        # held constant: linearized with zero tangents, not differentiated
        # and their cotangents dropped (which would leave the tangent
        # equations they need in the program as dead code, and change which
        # values the next layer's linearization saves, and in what order)
        return spec.traced_vjp_program(_select(prog, level.float_outputs), diff=_mask(level, d))


def spec_program(prog: Program, stack: Stack, *, dead_code_removed: bool = False,
                 then_linearized: bool = False) -> Program:
    """The spec program of the stacked function (inputs: the operands of
    `operands`, named as JAX names the stack function's, `a[i]`; outputs:
    what the stack's JAX function returns). `dead_code_removed`: each
    level's dead code removed before the next layer (what linearization by
    JVP and partial evaluation, before direct linearization, never looks at:
    the divergence linearize-ignores-an-unlinearizable-dead-primal).
    `then_linearized`: the caller linearizes the result (saved_residuals,
    a called linear function's barriers), which matters for which error a
    reverse layer's failing transposition raises (`_outer_error_first`)."""
    all_levels = levels(prog, stack)
    for k, (level, layer) in enumerate(zip(all_levels, stack.layers)):
        prog = dce(prog)[0] if dead_code_removed else prog
        try:
            next_prog = _spec_layer(prog, level, layer)
        except Exception:
            if layer.kind not in REVERSE_KINDS:
                raise
            _outer_error_first(prog, level, layer, list(zip(all_levels[k + 1:], stack.layers[k + 1:])),
                               then_linearized)
            raise
        prog = next_prog
    return Program(prog.inputs, prog.eqns, prog.outputs,
                   input_names=tuple(f"a[{i}]" for i in range(len(prog.inputs))))


def _outer_error_first(prog: Program, level: Level, layer: Layer, outers: list, then_linearized: bool) -> None:
    """Raise what the outer layers (`outers`: (level, layer) pairs, innermost
    first) meet first where building the reverse `layer` of `prog` failed
    in its transposition: JAX runs the layer's forward pass under the outer
    traces before its backward pass, so an error the forward pass meets
    there comes first. An outer vmap batches it (its batching rule may
    refuse the axes: ragged_dot_general's outside axis 0, found by a
    pristine nightly, 829cf0d24a, where the spec's grad met the
    contracting mode's transpose refusal), an outer jvp differentiates it
    (and a linearization beyond sees that: found by a pristine nightly,
    014e09ed49, `jvp o grad` under saved_residuals); an outer linearization (the
    next reverse or linearize layer, or, with `then_linearized`, the
    caller's) linearizes it (a nested checkpoint's policy, asked when the
    outer linearization re-linearizes the known half a checkpoint's
    partial evaluation evaluated inline: found by a pristine nightly,
    aa3c697824, pad's transpose refusal in the spec, the policy's error in
    JAX), and the next outer layer sees that linearization's forward pass
    (grad o grad of a jitted igamma under saved_residuals differentiates
    the igamma_grad_a the first computes: found by a pristine nightly,
    3c3ad4f168). Returns where the forward pass goes through, or where
    the layer's linearization fails itself (the error is then not the
    transposition's)."""
    d = differentiated(level, layer)
    inner = _loss_program(prog, level) if layer.kind == "grad" else _select(prog, level.float_outputs)
    mask = [i in d for i in range(len(inner.inputs))] if layer.kind == "grad" else _mask(level, d)
    try:
        forward = spec.linearize(inner, diff=mask).forward_traced
    except Exception:      # noqa: BLE001 -- the layer's own linearization fails: not this order
        return
    for outer_level, outer in outers:
        if outer.kind == "vmap":
            in_axes = list(outer.in_axes)[:len(forward.inputs)]
            if any(a is not None for a in in_axes):    # (else the forward pass is not batched)
                forward = spec.vmap(forward, in_axes, [0] * len(forward.outputs), axis_size=outer.size)
            continue
        if outer.kind == "jvp" and len(forward.inputs) == len(outer_level.in_types):
            # (its tangent inputs follow the level's: the outer layers see them in place)
            nonzeros = _mask(outer_level, differentiated(outer_level, outer))
            forward, _ = spec.jvp_program(forward, nonzeros=nonzeros)
            continue
        if outer.kind in ("linearize",) + REVERSE_KINDS:
            diff = _mask(outer_level, differentiated(outer_level, outer))
            linearized = spec.linearize(forward, diff=diff[:len(forward.inputs)])
            if len(forward.inputs) != len(outer_level.in_types):
                return
            # (what a linearization beyond sees of it: its forward pass, whose
            # inputs are the level's, as the layer's own function's are)
            forward = linearized.forward_traced
            continue
        return
    if then_linearized:
        spec.linearize(forward, diff=None)


# --------------------------------------------------------------------------
# operands

def operands(prog: Program, stack: Stack, args, seed: int) -> list[np.ndarray]:
    """The stacked function's operands for the checked program's `args`:
    each layer's tangents, cotangents and weights standard normal, each
    vmap's batch members beyond the first the values perturbed by up to
    10% (as oracle.properties.Case.batched)."""
    rng = np.random.default_rng(seed + 7)
    ops = list(args)
    for level, layer in zip(levels(prog, stack), stack.layers):
        if layer.kind in FORWARD_KINDS:
            ops += [_normal(rng, level.in_types[i]) for i in differentiated(level, layer)]
        elif layer.kind in REVERSE_KINDS:
            ops += [_normal(rng, level.out_types[j]) for j in level.float_outputs]
        else:
            ops = [_batch(rng, x, a, layer.size) for x, a in zip(ops, layer.in_axes)]
    return ops


def _normal(rng, t: ArrayType) -> np.ndarray:
    return rng.standard_normal(t.shape).astype(t.dtype)


def _batch(rng, x, axis, size):
    if axis is None:
        return x
    x = np.asarray(x)
    members = [x] + [(x * (1 + 0.1 * rng.uniform(-1, 1, x.shape))).astype(x.dtype) if is_float(x.dtype)
                     else x for _ in range(size - 1)]
    return np.stack(members, axis=axis % (x.ndim + 1))


# --------------------------------------------------------------------------
# the JAX side: source

_PRELUDE = FLOAT_OUTPUTS_SOURCE + '''

def total(v):
    """The sum of v's elements (a scalar as it is: jnp.sum would bind a
    reduce_sum over no axes, whose transpose JAX skips for a concrete
    cotangent; the spec's models no such shortcut)."""
    return jnp.sum(v) if jnp.ndim(v) else v


def with_diff(full, positions, values):
    """`full` with the values at `positions` replaced by `values`."""
    full = list(full)
    for i, v in zip(positions, values):
        full[i] = v
    return full
'''


def _layer_source(k: int, level: Level, layer: Layer) -> list[str]:
    prev, head = f"level{k - 1}", [f"    def level{k}(*a):"]
    if layer.kind == "vmap":
        return [f"    level{k} = jax.vmap(level{k - 1}, in_axes={tuple(layer.in_axes)!r}, "
                f"out_axes={tuple(layer.out_axes)!r})"]
    n, d = len(level.in_types), differentiated(level, layer)
    at = f"lambda *dd: {prev}(*with_diff(a[:{n}], {d!r}, dd))"
    primals = f"[a[i] for i in {d!r}]"
    if layer.kind == "jvp":
        return head + [f"        outs, tangents = jax.jvp({at}, {primals}, list(a[{n}:]))",
                       "        return tuple(outs) + tuple(t for o, t in zip(outs, tangents) if is_float(o))"]
    if layer.kind == "linearize":
        return head + [f"        outs, f_lin = jax.linearize({at}, *{primals})",
                       f"        return f_lin, tuple(a[{n}:])"]
    if layer.kind == "vjp":
        return head + [f"        _, pullback = jax.vjp(lambda *dd: floats({prev}(*with_diff(a[:{n}], {d!r}, dd))), "
                       f"*{primals})",
                       f"        return tuple(pullback(tuple(a[{n}:])))"]
    return head + ["        def loss(*dd):",
                   f"            ys = floats({prev}(*with_diff(a[:{n}], {d!r}, dd)))",
                   f"            value = total(jax.lax.mul(ys[0], a[{n}]))",
                   "            for y, w in zip(ys[1:], a[" + str(n + 1) + ":]):",
                   "                value = value + total(jax.lax.mul(y, w))",
                   "            return value",
                   f"        return tuple(jax.grad(loss, argnums={tuple(range(len(d)))!r})(*{primals}))"]


def _levels_of_types(stack: Stack, types: Level) -> list[Level]:
    out = [types]
    for layer in stack.layers:
        out.append(next_level(out[-1], layer))
    return out


def stack_source(stack: Stack, level0: Level) -> str:
    """Python source of `stack(f)`: the stacked function of f (a function of
    a flat list of arrays returning a tuple), for a base level `level0`
    (the positions each layer differentiates are written out); with a
    linearize layer, the function returning (the linear function, its
    tangents), which `call_linear` calls. Reads `jax` and `jnp`."""
    lines = [_PRELUDE.strip("\n"), "", "", "def stack(f):",
             f"    \"\"\"{stack} of f.\"\"\"",
             "    def level0(*a):", "        return tuple(f(*a))"]
    for k, (level, layer) in enumerate(zip(_levels_of_types(stack, level0), stack.layers), 1):
        lines += _layer_source(k, level, layer)
    lines.append(f"    return level{len(stack.layers)}")
    lines += ["", "", "def call_linear(f_lin, tangents):",
              "    \"\"\"The tangents of the float outputs of a linear function jax.linearize returned.\"\"\"",
              "    return tuple(t for t in f_lin(*tangents) if t.dtype != jax.dtypes.float0)"]
    return "\n".join(lines) + "\n"


def jax_functions(stack: Stack, level0: Level):
    """(stack, call_linear) from executing the stack's source."""
    import jax
    import jax.numpy as jnp
    env = {"jax": jax, "jnp": jnp}
    exec(compile(stack_source(stack, level0), f"<stack {stack}>", "exec"), env)
    return env["stack"], env["call_linear"]


# --------------------------------------------------------------------------
# the stack as a Property of oracle.properties

STACK = "stack"


def _case_operands(stack: Stack):
    """case -> the stacked function's operands for the case's program and arguments."""
    return lambda case: operands(case.prog, stack, case.args, case.seed)


def stack_property(stack: Stack, prog: Program):
    """The Property comparing the stacked function's values with the spec's
    (tolerances as the other numeric properties, deeper per AD layer)."""
    levels(prog, stack)            # InvalidArgument where a layer does not apply
    level0 = base_level(prog)
    numeric = P.Numeric(lambda p: spec_program(p, stack),
                        _case_operands(stack))
    fn, call_linear = jax_functions(stack, level0)

    def term(f, all_operands, diff):
        out = fn(f)(*all_operands[4][STACK])
        return out if stack.linearized else list(out)

    after = None
    if stack.linearized:
        def after(value):
            import jax
            f_lin, tangents = value
            linear = jax.jit(call_linear).lower(f_lin, tangents).compile(
                compiler_options=jax_api.compiler_options(jax.default_backend()))
            return list(jax.block_until_ready(linear(f_lin, tangents)))
    call = ("lin, tans = jax.jit(stack({f}))(*operands)\ngot = list(jax.jit(call_linear)(lin, tans))"
            if stack.linearized else "got = list(jax.jit(stack({f}))(*operands))")
    code = stack_source(stack, level0).rstrip("\n") + "\n\n\n" + call
    return P.numeric_property(STACK, numeric, term, weight=2 ** stack.ad_depth, after=after,
                              repro_code=code, description=str(stack),
                              without_dead_code=lambda case: spec_program(case.prog, stack, dead_code_removed=True),
                              # one grad or vjp: its operands end with the outputs' cotangents
                              zero_cotangents_gained=len(stack.layers) == 1 and stack.layers[0].kind in REVERSE_KINDS)


STACK_RESIDUALS = "stack_residuals"


def stack_residuals_property(stack: Stack, prog: Program):
    """The Property comparing what JAX saves to differentiate the stacked
    function (jax.ad_checkpoint.saved_residuals of it: the residuals of a
    second-order program for a stack with an AD layer) with the spec's
    saved_residuals of the stack's spec program, normalised and judged by
    the known divergences as the residuals property is; under remat2 (see
    below). Not for a linearize stack (its function returns a linear
    function)."""
    if stack.linearized:
        raise InvalidArgument(f"stack {stack}: no residuals of a function returning a linear function")
    levels(prog, stack)
    fn, _ = jax_functions(stack, base_level(prog))

    def level_of(checked: Program) -> Program:
        return spec_program(checked, stack, then_linearized=True)

    def level_program(case):
        key = ("stack program", stack)
        if key not in case.cache:
            case.cache[key] = level_of(case.prog)
        return case.cache[key]

    def spec_side(case):
        return [(str(r.type), str(r.source)) for r in spec.saved_residuals(level_program(case))]

    def jax_side(case, f):
        ops_ = [jax_value_of(a) for a in _case_operands(stack)(case)]
        return P.jax_residuals(fn(case.call.flat(f)), ops_)

    def compare(case, impl, got, want):
        raw = got
        got, _ = P.normalized(case, impl, got, want)
        if got != want:
            raise P.Disagreement(f"saved residuals of {stack} differ:\n" + P.residual_diff(got, want),
                                 divergences.Context(impl, "residuals", case.policy, level_program(case),
                                                     jax_residuals=got, spec_residuals=want, jax_names=raw,
                                                     checked_program=case.prog, numeric_program=level_of),
                                 numeric=dict(residuals=want,
                                              operands=_case_operands(stack)(case)))
        return f"{len(want)} residuals of {stack}"
    code = stack_source(stack, base_level(prog)).rstrip("\n") + "\n\n\n" + (
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "got = [f\"{a.str_short(short_dtypes=True).replace(' ', '')} {re.sub(r' from .*$', '', s)}\" "
        "for a, s in saved_residuals(stack({f}), *operands)]")
    # remat2 only: under remat3 a checkpoint differentiated a second time is
    # re-traced by its RematTraced rules, which the spec models for first
    # order only (oracle.divergences' remat3 model)
    return P.Property(STACK_RESIDUALS, "jaxpr", spec_side, compare, jax_side=jax_side, repro_code=code,
                      description=str(stack), implementations=("remat2",), program=level_program,
                      operands=_case_operands(stack), unmodelled=_second_order_unmodelled,
                      spec_program=level_of)


def _second_order_unmodelled(case) -> str | None:
    """Why JAX's second-order residuals of this case are not compared (see
    below), or None."""
    return _without_direct_linearization() or _named_sharding(case.prog) or _folded_literal_operand(case.prog)


def _named_sharding(prog: Program) -> str | None:
    """A program constraining a value to a NamedSharding: its outputs carry
    that sharding in their types, so jax.grad seeds the cotangent with a
    `reshard` of 1.0 and the transposes after it bind no-op reductions
    (reduce_sum over no axes), which a second-order program saves where the
    spec, which models shardings as the identity on values, saves the
    literal (found by a pristine campaign, 6146d5a872)."""
    for e in _all_eqns(prog):
        if e.primitive.name == "sharding_constraint" and str(e.params["sharding"][0]) == "NamedSharding":
            return ("second-order residuals of a program with a NamedSharding constraint are not modelled "
                    "(sharding in types: grad reshards its seed cotangent)")
    return None


def _folded_literal_operand(prog: Program) -> str | None:
    """A scalar literal operand of a primitive whose JAX JVP rule applies
    Python operators to its primals (JaxFacts.literal_operands_folded:
    lax.igamma(1.5, x)'s rule promotes `a - 1` with convert_element_type,
    betainc's folds `b - 1` to a literal: found by pristine campaigns,
    aad1d61dc9 and 2087fb15dc)."""
    for e in _all_eqns(prog):
        if P.folded_literal_operand(e):
            return (f"second-order residuals of {e.primitive.name} with a literal operand are not modelled "
                    f"(JAX's rule folds or promotes a weakly typed Python scalar; the spec has no weak types)")
    return None


def _all_eqns(prog: Program):
    for e in prog.eqns:
        yield e
        for _, sub in subprograms(e.params):
            yield from _all_eqns(sub)


def _without_direct_linearization() -> str | None:
    """Why a release's second-order residuals are not compared: the spec
    models direct linearization (jax_use_direct_linearize, on from jax
    0.7.0). Without it JAX linearizes a differentiated program by JVP and
    partial evaluation of the whole traced function, whose second order
    also saves what the tangents of the first order's discarded values
    read (jax.grad of cos saves sin(x) twice on 0.4.25 and 0.6.2, once
    with the flag on)."""
    if flags().get("jax_use_direct_linearize", False):
        return None
    return ("second-order residuals are modelled for direct linearization only "
            "(jax_use_direct_linearize is off or absent in this release)")


STACK_BARRIERS = "stack_barriers"


def _linearized_inputs(prog: Program, stack: Stack) -> list[bool]:
    """Which inputs of the level below a linearize layer it differentiates."""
    top = levels(prog, stack)[-2]
    return _mask(top, differentiated(top, stack.layers[-1]))


def stack_barriers_property(stack: Stack, prog: Program):
    """For a linearize stack: whether the jit of the linearized function with
    its linear function called (not transposed) has optimization barriers
    (StableHLO, before XLA) where the spec's linear program has a staged
    remat with prevent_cse set (spec.barriers.linear_optimization_barriers):
    the barrier flags remat_jvp gives the tangents are seen only here, as
    the backward pass's transpose gives the cotangents flags of its own.
    Under remat2 only: remat3 puts a barrier on a checkpoint's inputs when
    the linear function reads them (the known divergence
    remat3-barrier-iff-backward-reads-checkpoint-inputs, backward only)."""
    if not stack.linearized:
        raise InvalidArgument(f"stack {stack}: barriers of the called linear function need a linearize layer")
    below = Stack(stack.layers[:-1]) if stack.layers[:-1] else None
    diff = _linearized_inputs(prog, stack)
    fn, call_linear = jax_functions(stack, base_level(prog))

    def level_program(case):
        return case.prog if below is None else spec_program(case.prog, below, then_linearized=True)

    def spec_side(case):
        return linear_optimization_barriers(level_program(case), diff=diff)

    def without_dead_code(case):
        """The program the count linearizes, built with each level's dead
        code removed before the next layer, its own too, once its count is
        taken (so it raises where that does not linearize either):
        linearization by JVP and partial evaluation never looks at dead
        code (found by a release campaign on 0.6.2, e0b2327498, linearize o
        grad o grad(argnums=(0,)) of a generic reduce_window of an input
        the inner grad holds constant)."""
        level = case.prog if below is None else spec_program(case.prog, below, then_linearized=True,
                                                             dead_code_removed=True)
        level = dce(level)[0]
        linear_optimization_barriers(level, diff=diff)
        return level

    def barriers_of(checked: Program) -> int | None:
        """The spec's count for another checked program (a known divergence's
        variant); None where the stack does not apply to it (a vmap layer's
        out_axes, given per output of the checked program: found on 0.4.36)."""
        try:
            level = checked if below is None else spec_program(checked, below, then_linearized=True)
            return linear_optimization_barriers(level, diff=_linearized_inputs(checked, stack))
        except InvalidArgument:
            return None

    def jax_side(case, f):
        import jax
        ops_ = [jax_value_of(a) for a in _case_operands(stack)(case)]
        linearized_then_called = jax.jit(lambda *a: call_linear(*fn(case.call.flat(f))(*a)))
        return linearized_then_called.lower(*ops_).as_text().count("optimization_barrier")

    def compare(case, impl, got, want):
        if (want > 0) != (got > 0):
            raise P.Disagreement(f"optimization barriers of {stack}, its linear function called: "
                                 f"spec predicts {want}, JAX's HLO has {got}",
                                 divergences.Context(impl, STACK_BARRIERS, case.policy, level_program(case),
                                                     barriers=(want, got), diff=diff, checked_program=case.prog,
                                                     linear_barriers_of=barriers_of),
                                 numeric=dict(barriers=want,
                                              operands=_case_operands(stack)(case)))
        return f"barriers of {stack}: spec {want}, HLO {got}"
    code = stack_source(stack, base_level(prog)).rstrip("\n") + "\n\n\n" + (
        "got = jax.jit(lambda *a: call_linear(*stack({f})(*a))).lower(*operands).as_text()"
        ".count('optimization_barrier')")
    return P.Property(STACK_BARRIERS, "jaxpr", spec_side, compare, jax_side=jax_side, repro_code=code,
                      description=str(stack), implementations=("remat2",), program=level_program,
                      operands=_case_operands(stack), linear_barriers_of=barriers_of,
                      without_dead_code=without_dead_code)
