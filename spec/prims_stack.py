"""stack and unstack (jax/_src/lax/lax.py): `jnp.stack([a, b])` and
`lax.unstack(x)` are primitives of their own in jax 0.10.2, each the
other's transpose.

    >>> import spec
    >>> prog = spec.trace(lambda a, b: stack([a, b], 1), spec.f32[3], spec.f32[3])
    >>> print(spec.transpose(prog, [True, True]))       # the transpose: unstack
    { lambda ; a:f32[3,2]. let
        b:f32[3] c:f32[3] = unstack[axis=1] a
      in (b, c) }
"""
from __future__ import annotations

import numpy as np

from spec.batching import broadcast, moveaxis
from spec.core import (complex_rules, Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, eval_rules,
                       examples, instantiate, is_undefined, jax_facts, jvp_rules, primitive,
                       shape_rules, transpose_rules)
from spec.ir import ArrayType


# ==========================================================================
# stack

stack_p = primitive("stack", ["axis"])


def stack(operands, axis=0):
    """lax.stack: the operands (one shape, one dtype) along a new axis."""
    return bind(stack_p, *operands, axis=int(axis))


def _stack_shape(*xs, axis):
    """_stack_shape_rule and _stack_dtype_rule."""
    if not xs:
        raise PrimitiveError(stack_p, "needs at least one operand")
    if len({(x.shape, x.dtype) for x in xs}) != 1:
        raise PrimitiveError(stack_p, f"operands {list(xs)} must have one shape and one dtype")
    if not 0 <= axis <= xs[0].ndim:
        raise PrimitiveError(stack_p, f"axis {axis} out of range for stacking {xs[0]}")
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    return [ArrayType(shape, xs[0].dtype)]


shape_rules[stack_p] = _stack_shape


def _stack_eval(*xs, axis):
    return np.stack(xs, axis=axis)


eval_rules[stack_p] = _stack_eval


def _stack_jvp(primals, tangents, *, axis):
    """ad.deflinear2 (linear_jvp): the tangents stacked, zeros instantiated."""
    out = stack(primals, axis)
    if all(isinstance(t, Zero) for t in tangents):
        return out, None
    return out, stack([instantiate(t) for t in tangents], axis)


jvp_rules[stack_p] = _stack_jvp


def _stack_transpose(ct, *xs, axis):
    """JAX: if type(ct) is Zero: [Zero(o.aval) if ad.is_undefined_primal(o) else None ...]
    else: return unstack_p.bind(ct, axis=axis) (one unstack, every piece)."""
    if isinstance(ct, Zero):
        return [Zero(x.type) if is_undefined(x) else None for x in xs]
    return [c if is_undefined(x) else None for c, x in zip(unstack(ct, axis), xs)]


transpose_rules[stack_p] = _stack_transpose


def _stack_batch(args, dims, *, axis):
    """lax._stack_batch_rule: operands batched alike stack as they are (the
    batch axis after the new one if it is not before it); otherwise batch
    axes move to the front, unbatched operands are broadcast."""
    bdim = dims[0]
    if bdim is not None and all(d == bdim for d in dims):
        return (stack(args, axis), bdim + 1) if axis <= bdim else (stack(args, axis + 1), bdim)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    operands = [moveaxis(a, d, 0) if d is not None else broadcast(a, size) for a, d in zip(args, dims)]
    return stack(operands, axis + 1), 0


batch_rules[stack_p] = _stack_batch
jax_facts[stack_p] = JaxFacts("stack", "lambda *xs, axis: lax.stack(list(xs), axis)",
                              from_jax=lambda p: {**p, "axis": int(p["axis"])})
examples[stack_p] = [
    Example("pair-new-leading", (((3,), "f32", "normal"), ((3,), "f32", "normal")),
            lambda a, b: stack([a, b], 0), lambda a, b: np.stack([a, b]), linear=((True, True),)),
    Example("three-last-axis", (((2, 1), "f32", "normal"),) * 3,
            lambda a, b, c: stack([a, b, c], 2), lambda a, b, c: np.stack([a, b, c], 2),
            linear=((True, True, True),)),
    Example("ints", (((2,), "i32", "ints"), ((2,), "i32", "ints")), lambda a, b: stack([a, b], 1),
            lambda a, b: np.stack([a, b], 1)),
]


# ==========================================================================
# unstack

unstack_p = primitive("unstack", ["axis"], multiple_results=True)


def unstack(x, axis=0):
    """lax.unstack: the slices of x along `axis`, that axis removed."""
    return bind(unstack_p, x, axis=int(axis))


def _unstack_shape(x, *, axis):
    """_unstack_shape_rule: one output per index of `axis`."""
    if x.ndim == 0 or not 0 <= axis < x.ndim:
        raise PrimitiveError(unstack_p, f"axis {axis} must be a dim of {x} (rank > 0)")
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return [ArrayType(shape, x.dtype)] * x.shape[axis]


shape_rules[unstack_p] = _unstack_shape


def _unstack_eval(x, *, axis):
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


eval_rules[unstack_p] = _unstack_eval


def _unstack_jvp(primals, tangents, *, axis):
    """ad.deflinear2 (linear_jvp): the tangent unstacked alike, or all zeros."""
    (x,), (t,) = primals, tangents
    outs = unstack(x, axis)
    return outs, ([None] * len(outs) if isinstance(t, Zero) else unstack(t, axis))


jvp_rules[unstack_p] = _unstack_jvp


def _unstack_transpose(cts, x, *, axis):
    """JAX: all Zero -> [Zero(operand.aval)]; else the cotangents (zeros
    instantiated) stacked: [stack_p.bind(*cotangents, axis=axis)]."""
    if all(isinstance(c, Zero) for c in cts):
        return [Zero(x.type)]
    return [stack([instantiate(c) for c in cts], axis)]


transpose_rules[unstack_p] = _unstack_transpose


def _unstack_batch(args, dims, *, axis):
    """lax._unstack_batch_rule: the batch axis stays, `axis` shifts past it."""
    (x,), (bdim,) = args, dims
    if axis < bdim:
        return unstack(x, axis), [bdim - 1] * x.shape[axis]
    return unstack(x, axis + 1), [bdim] * x.shape[axis + 1]


batch_rules[unstack_p] = _unstack_batch
jax_facts[unstack_p] = JaxFacts("unstack", "lambda x, axis: list(lax.unstack(x, axis))",
                                from_jax=lambda p: {**p, "axis": int(p["axis"])})
examples[unstack_p] = [
    Example("rows", (((3, 2), "f32", "normal"),), lambda x: unstack(x, 0), lambda x: list(x),
            linear=((True,),)),
    Example("last-axis", (((2, 1, 2), "f32", "normal"),), lambda x: unstack(x, 2),
            lambda x: [x[..., 0], x[..., 1]], linear=((True,),)),
]


# data movement holds for complex values
complex_rules.update({stack_p, unstack_p})
