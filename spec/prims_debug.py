"""debug_print and debug_callback: `jax.debug.print` and
`jax.debug.callback` (jax/_src/debugging.py), primitives with an effect
and no outputs.

They compute nothing the program returns; what matters is where they stay
and how often they run. Their equations are never dead code
(spec.core.effectful). JAX gives both the same rules (debugging.py
registers `debug_batching_rule` and `_debug_partial_eval_custom` for each
with `partial(..., primitive=...)`); so does this module (the rule
factories below). Under a checkpoint, `_debug_partial_eval_custom`
decides, measured in tests/recordings/debug_print.json
(tests/record_jax_debug_print.py):

* an operand unknown (a tangent): staged only;
* all operands known, and the policy does not save the equation (None,
  dots_saveable, names policies): it runs in the forward pass *and*
  again in the backward pass, where its operands are recomputed or read
  as residuals (so printing a saved dot output makes it a residual);
* all known, the policy saves it (everything_saveable): forward only --
  unless all its operands are available to the backward pass anyway.

Their JVP binds them on the primals and has no tangents; their transpose
gives their operands no cotangent; vmap unrolls them, one effect per
batch member. The spec never runs the effect: `count_effects` counts it.

    >>> import spec
    >>> prog = spec.trace(lambda x: (debug_print(x, fmt="x={}"), spec.ops.sin(x))[1], spec.f32[2])
    >>> grad = spec.grad(spec.trace(lambda x: spec.ops.reduce_sum(
    ...     spec.ops.checkpoint(lambda y: spec.core.eval_program_traced(prog, y)[0])(x), (0,)), spec.f32[2]))
    >>> count_prints(grad)     # forward, and again in the checkpoint's backward pass
    2
"""
from __future__ import annotations

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, batch_rules, bind, effectful, eval_rules,
                       examples, jax_facts, jvp_rules, partial_eval_rules, primitive, shape_rules,
                       transpose_rules)
from spec.policies import Recompute
from spec.prims_reductions import _slice_in_dim
from spec.prims_structural import squeeze
from spec.evaluate import evaluate

# --------------------------------------------------------------------------
# the rules debug_print and debug_callback share (jax/_src/debugging.py)


def _no_outputs(*xs, **params):
    """Nothing numerical: the effect is all there is (counted by count_effects)."""
    return []


def _debug_jvp(primitive):
    """debug_print_jvp_rule / debug_callback_jvp_rule: return
    primitive.bind(*primals, **params), [] -- the effect sees the primals,
    and there is no tangent."""
    def jvp(primals, tangents, **params):
        return bind(primitive, *primals, **params), []
    return jvp


def _debug_transpose(cts, *xs, **params):
    """debug_print_transpose_rule / debug_callback_transpose_rule:
    return [None for _ in args]"""
    return [None] * len(xs)


def _debug_batch(primitive):
    """debug_batching_rule: unrolled over the batch, one effect per member
    (lax.index_in_dim(arg, i, axis=dim, keepdims=False) of each batched
    operand; unbatched operands as they are)."""
    def batch(args, dims, **params):
        size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
        for i in range(size):
            bind(primitive, *[x if d is None else squeeze(_slice_in_dim(x, i, i + 1, 1, d), (d,))
                              for x, d in zip(args, dims)], **params)
        return [], []
    return batch


def _debug_partial_eval(eqn, in_unknowns, in_inst, *, saveable, linearize):
    """JAX's _debug_partial_eval_custom: an unknown operand stages it (its
    known operands become residuals); all known and the policy saves it:
    staged too only if every operand is instantiated; all known and not
    saved: known and staged (it runs again in the backward pass)."""
    if any(in_unknowns):
        return [], [eqn], [], [], [], {}
    if saveable(eqn) is not Recompute and not all(in_inst):
        return [eqn], [], [], [], [], {}
    return [eqn], [eqn], [], [], [eqn], {}


def _register_debug_rules(primitive):
    """Register the shared rules for `primitive` (its shape rule is its own)."""
    effectful.add(primitive)
    eval_rules[primitive] = _no_outputs
    jvp_rules[primitive] = _debug_jvp(primitive)
    transpose_rules[primitive] = _debug_transpose
    batch_rules[primitive] = _debug_batch(primitive)
    partial_eval_rules[primitive] = _debug_partial_eval


# --------------------------------------------------------------------------
# debug_print

debug_print_p = primitive("debug_print", ["fmt", "ordered", "partitioned", "in_tree", "static_args",
                                          "np_printoptions", "has_placeholders"], multiple_results=True)


def debug_print(*args, fmt: str, ordered=False, partitioned=False, kwarg_names=(), static_args=(),
                np_printoptions=(), has_placeholders=True):
    """jax.debug.print(fmt, *positional, **kwargs): the last
    len(kwarg_names) operands are the keyword arguments, in sorted name
    order (JAX's flattening). `in_tree` is (number of positional leaves,
    keyword names), JAX's PyTreeDef of (args, kwargs) written as plain data."""
    n_leaves = len(args) + len(static_args)
    in_tree = (n_leaves - len(kwarg_names), tuple(kwarg_names))
    return bind(debug_print_p, *args, fmt=fmt, ordered=bool(ordered), partitioned=bool(partitioned),
                in_tree=in_tree, static_args=tuple(static_args), np_printoptions=tuple(np_printoptions),
                has_placeholders=bool(has_placeholders))


def _debug_print_shape(*xs, in_tree, static_args, **params):
    """debug_print_abstract_eval: no outputs (its effect is the print)."""
    n_positional, names = in_tree
    if n_positional + len(names) != len(xs) + len(static_args) or list(names) != sorted(names):
        raise PrimitiveError(debug_print_p, f"in_tree {in_tree} (positional count, sorted keyword names) "
                                            f"does not fit {len(xs)} operands and {len(static_args)} static args")
    return []
shape_rules[debug_print_p] = _debug_print_shape
_register_debug_rules(debug_print_p)


def _debug_print_from_jax(p):
    """JAX's in_tree (a PyTreeDef of (args, kwargs), one leaf each) as plain
    data; logging_record must be None."""
    tree = p["in_tree"]
    positional, keywords = tree.unflatten(list(range(tree.num_leaves)))
    if not all(isinstance(i, int) for i in (*positional, *keywords.values())):
        raise PrimitiveError(debug_print_p, "jax.debug.print of nested pytree arguments is not modelled "
                                            "(one array or static value per argument)")
    in_tree = (len(positional), tuple(sorted(keywords)))
    return {k: in_tree if k == "in_tree" else v for k, v in p.items()}     # in JAX's param order


jax_facts[debug_print_p] = JaxFacts(
    "debug_print",
    "lambda *xs, fmt, ordered, partitioned, in_tree, static_args, np_printoptions, has_placeholders: "
    "jax._src.debugging.debug_print_p.bind(*xs, fmt=fmt, ordered=ordered, partitioned=partitioned, "
    "in_tree=jax.tree_util.tree_structure(((0,) * in_tree[0], {k: 0 for k in in_tree[1]})), "
    "static_args=static_args, np_printoptions=np_printoptions, has_placeholders=has_placeholders, "
    "logging_record=None)",
    from_jax=_debug_print_from_jax, ignored=(("logging_record", None),))
examples[debug_print_p] = [
    Example("print-then-square", (((2, 3), "f32", "normal"),),
            lambda x: (debug_print(x, fmt="x={x}", kwarg_names=("x",)), x * x)[1], lambda x: x * x),
    Example("two-operands", (((3,), "f32", "normal"), ((3,), "f32", "normal")),
            lambda x, y: (debug_print(x, y, fmt="{} {}"), x + y)[1], lambda x, y: x + y, linear=((True, True),)),
]


# --------------------------------------------------------------------------
# debug_callback

debug_callback_p = primitive("debug_callback", ["callback", "effect", "partitioned"], multiple_results=True)
EFFECTS = ("unordered", "ordered")     # JAX's debug_effect, ordered_debug_effect


def debug_callback(callback, *args, ordered=False, partitioned=False):
    """jax.debug.callback(callback, *args, ordered=..., partitioned=...)
    with array operands. `callback` is opaque: the spec keeps it as a param
    and never calls it (from JAX it is debugging.py's `_flat_callback`,
    which unflattens the operands into the user's pytrees and static
    arguments). `effect` is 'ordered' (JAX's ordered_debug_effect) or
    'unordered' (debug_effect).

    Emitted for JAX (oracle.to_jax, reproducers) it binds debug_callback_p
    with a stand-in callback printing its operands' shapes, with the same
    effect and `partitioned`: what the callback does is the user's
    business; where it is placed and how often it runs -- what remat
    decides, and what the oracle checks -- stay as they are."""
    return bind(debug_callback_p, *args, callback=callback, effect=EFFECTS[bool(ordered)],
                partitioned=bool(partitioned))


def _debug_callback_shape(*xs, callback, effect, partitioned):
    """debug_callback_abstract_eval: no outputs, the effect {effect}."""
    if effect not in EFFECTS:
        raise PrimitiveError(debug_callback_p, f"effect {effect!r} is not one of {EFFECTS}")
    if not callable(callback):
        raise PrimitiveError(debug_callback_p, f"callback {callback!r} is not callable")
    return []
shape_rules[debug_callback_p] = _debug_callback_shape
_register_debug_rules(debug_callback_p)


def _debug_callback_from_jax(p):
    """JAX's effect object as plain data ('ordered' for OrderedDebugEffect,
    'unordered' for DebugEffect, by their names: jax/_src/debugging.py:58-65);
    the callable stays as it is (opaque)."""
    names = {"Debug": "unordered", "OrderedDebug": "ordered"}
    if str(p["effect"]) not in names:
        raise PrimitiveError(debug_callback_p, f"effect {p['effect']} is not a debug effect")
    return {**p, "effect": names[str(p["effect"])]}


# The emitter cannot call the user's callable (a reproducer is source
# text; the spec holds whatever JAX handed over): it binds a stand-in (see
# `debug_callback`), whose output shows in a reproducer where and how often
# the callback runs.
jax_facts[debug_callback_p] = JaxFacts(
    "debug_callback",
    "lambda *xs, callback, effect, partitioned: debugging.debug_callback_p.bind(*xs, "
    "callback=lambda *vs: print('debug_callback', *(tuple(v.shape) for v in vs)) or (), "
    "effect={'unordered': debugging.debug_effect, "
    "'ordered': debugging.ordered_debug_effect}[effect], partitioned=partitioned)",
    from_jax=_debug_callback_from_jax)


def _show_shapes(*xs):
    print("debug_callback", *(np.shape(x) for x in xs))


examples[debug_callback_p] = [
    Example("callback-then-square", (((2, 3), "f32", "normal"),),
            lambda x: (debug_callback(_show_shapes, x), x * x)[1], lambda x: x * x),
    Example("ordered-two-operands", (((3,), "f32", "normal"), ((3,), "f32", "normal")),
            lambda x, y: (debug_callback(_show_shapes, x, y, ordered=True), x + y)[1], lambda x, y: x + y,
            linear=((True, True),)),
]


# --------------------------------------------------------------------------
# counting the effects

DEBUG_PRIMITIVES = (debug_print_p, debug_callback_p)


def count_effects(prog, *args, primitives=DEBUG_PRIMITIVES) -> int:
    """How many times `prog` runs an effect of `primitives` (prints,
    callbacks): their equations, run (sub-programs included) by
    spec.evaluate on `args` (zeros of the input types if none are given)."""
    seen = []

    def hook(eqn, ins, outs):
        if eqn.primitive in primitives:
            seen.append(eqn)
        return outs
    if not args:
        args = [np.zeros(t.shape, t.dtype) for t in prog.in_types]
    evaluate(prog, *args, hook=hook)
    return len(seen)


def count_prints(prog, *args) -> int:
    """count_effects of debug_print alone."""
    return count_effects(prog, *args, primitives=(debug_print_p,))
