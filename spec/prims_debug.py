"""debug_print: `jax.debug.print` (jax/_src/debugging.py), a primitive with
an effect and no outputs.

It computes nothing the program returns; what matters is where it stays
and how often it runs. Its equation is never dead code (spec.core.effectful).
Under a checkpoint, JAX's `_debug_partial_eval_custom` decides, measured
in tests/recordings/debug_print.json (tests/record_jax_debug_print.py):

* an operand unknown (a tangent): staged only;
* all operands known, and the policy does not save debug_print (None,
  dots_saveable, names policies): the print runs in the forward pass *and*
  again in the backward pass, where its operands are recomputed or read
  as residuals (so printing a saved dot output makes it a residual);
* all known, the policy saves it (everything_saveable): forward only --
  unless all its operands are available to the backward pass anyway.

Its JVP prints the primals and has no tangents; its transpose gives its
operands no cotangent; vmap unrolls it, one print per batch member.

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

debug_print_p = primitive("debug_print", ["fmt", "ordered", "partitioned", "in_tree", "static_args",
                                          "np_printoptions", "has_placeholders"], multiple_results=True)
effectful.add(debug_print_p)


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


def _debug_print_eval(*xs, **params):
    """Nothing numerical: the print is the effect (counted by count_prints)."""
    return []
eval_rules[debug_print_p] = _debug_print_eval


def _debug_print_jvp(primals, tangents, **params):
    """debug_print_jvp_rule: return debug_print_p.bind(*primals, **params), []"""
    return bind(debug_print_p, *primals, **params), []
jvp_rules[debug_print_p] = _debug_print_jvp


def _debug_print_transpose(cts, *xs, **params):
    """debug_print_transpose_rule: return [None for _ in args]"""
    return [None] * len(xs)
transpose_rules[debug_print_p] = _debug_print_transpose


def _debug_print_batch(args, dims, **params):
    """debug_batching_rule: unrolled over the batch, one print per member
    (lax.index_in_dim(arg, i, axis=dim, keepdims=False) of each batched
    operand; unbatched operands as they are)."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    for i in range(size):
        bind(debug_print_p, *[x if d is None else squeeze(_slice_in_dim(x, i, i + 1, 1, d), (d,))
                              for x, d in zip(args, dims)], **params)
    return [], []
batch_rules[debug_print_p] = _debug_print_batch


def _debug_print_partial_eval(eqn, in_unknowns, in_inst, *, saveable, linearize):
    """JAX's _debug_partial_eval_custom: an unknown operand stages it (its
    known operands become residuals); all known and the policy saves it:
    staged too only if every operand is instantiated; all known and not
    saved: known and staged (it runs again in the backward pass)."""
    if any(in_unknowns):
        return [], [eqn], [], [], [], {}
    if saveable(eqn) is not Recompute and not all(in_inst):
        return [eqn], [], [], [], [], {}
    return [eqn], [eqn], [], [], [eqn], {}
partial_eval_rules[debug_print_p] = _debug_print_partial_eval


def count_prints(prog, *args) -> int:
    """How many times `prog` prints: its debug_print equations, run (sub-
    programs included) by spec.evaluate on `args` (zeros of the input
    types if none are given)."""
    from spec.evaluate import evaluate
    seen = []

    def hook(eqn, ins, outs):
        if eqn.primitive is debug_print_p:
            seen.append(eqn)
        return outs
    if not args:
        args = [np.zeros(t.shape, t.dtype) for t in prog.in_types]
    evaluate(prog, *args, hook=hook)
    return len(seen)


def _debug_print_from_jax(p):
    """JAX's in_tree (a PyTreeDef of (args, kwargs), one leaf each) as plain
    data; logging_record must be None."""
    tree = p.pop("in_tree")
    positional, keywords = tree.unflatten(list(range(tree.num_leaves)))
    if not all(isinstance(i, int) for i in (*positional, *keywords.values())):
        raise PrimitiveError(debug_print_p, "jax.debug.print of nested pytree arguments is not modelled "
                                            "(one array or static value per argument)")
    return {**p, "in_tree": (len(positional), tuple(sorted(keywords)))}


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
