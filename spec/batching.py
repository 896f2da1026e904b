"""Batching: `vmap(prog, in_axes)` is the program applied to a stack of inputs.

Every value of the batched program is either *unbatched* (the same for
every batch member) or carries the batch along one axis, its *batch
dimension* (`bdim`). An equation whose inputs are all unbatched is copied as
it is; otherwise its primitive's batching rule (`batch_rules` in
spec/core.py) emits the batched computation and says where the batch
dimension of each output is. Rules follow jax 0.10.2's (`batching.py` and
each primitive's `_batch_rule`), so the batched program has JAX's shape:
for instance elementwise ops only move batch dimensions when operands
disagree, and unbatched operands get a size-1 axis rather than a copy.

A vmapped axis may have a name (`vmap(..., axis_name="i")`, as
`jax.vmap(f, axis_name="i")`): collectives over that name (psum, ...,
spec/prims_collective.py) see it through their `axis_batch_rules`, which
turn them into reductions over the batch axis. Sub-programs (a checkpoint's
body, a scan's) are batched along the same, named, axis.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Hashable, NamedTuple, Sequence

import numpy as np

from spec.core import Tracer, axis_batch_rules, batch_rules, bind, building, current_builder, persistent_whys
from spec.ir import ArrayType, Program, Var


class BatchingError(TypeError):
    pass


class AxesRefused(BatchingError):
    """A JAX batching rule refuses the batch dims it is given; the spec's
    rule raises this mixed with JAX's error class, in JAX's words (a tie:
    both refuse)."""


class OutAxisError(BatchingError, ValueError):
    """An output that must be unbatched (out_axes None) is batched: JAX's
    vmap raises ValueError, in these words (api._mapped_axis_spec's check,
    `got axis spec None but output was batched on axis d`)."""


# --------------------------------------------------------------------------
# helpers used by the rules (JAX's batching.moveaxis, bdim_at_front, broadcast)

def moveaxis(x, src: int, dst: int):
    """Move axis `src` of x to position `dst` (a transpose, or nothing)."""
    from spec.prims_structural import transpose  # a cycle: prims_structural batches with this module
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def broadcast(x, size: int):
    """A new leading axis of `size` (lax.broadcast(x, (size,)))."""
    from spec.prims_structural import broadcast_in_dim  # a cycle: prims_structural batches with this module
    shape = getattr(x, "shape", np.shape(x))
    return broadcast_in_dim(x, (size,) + tuple(shape), tuple(range(1, len(shape) + 1)))


def broadcast_at(x, size: int, axis: int):
    """A new axis of `size` at position `axis` (batching.broadcast)."""
    from spec.prims_structural import broadcast_in_dim  # a cycle: prims_structural batches with this module
    shape = list(x.shape)
    shape.insert(axis, size)
    return broadcast_in_dim(x, shape, [i for i in range(len(shape)) if i != axis])


def bdim_at_front(x, bdim, size: int):
    """x with its batch axis first; an unbatched x is broadcast to `size`."""
    return broadcast(x, size) if bdim is None else moveaxis(x, bdim, 0)


# The `why` of an equation whose output JAX passes through an identity
# broadcast_in_dim that staging then forwards away (_broadcast_in_dim_fwd_rule):
# lax.expand_dims with no new dims, as broadcast_in_dim's transpose applies
# to its reduce_sum (jax 0.10.2). So no program holds it, but a vmap tracing
# the transposition meets it, and its batching rule moves a batched value's
# axis to the front (_broadcast_in_dim_batch_rule), then binds another
# identity, which an enclosing vmap meets in turn (found by a pristine
# nightly, 1c7c535ba7: vmap(in_axes=-1) of a vjp, JAX's transpose right after
# the reduce_sum).
IDENTITY_BROADCAST_FOLLOWS = "an identity broadcast_in_dim follows, forwarded away when staged"
persistent_whys.add(IDENTITY_BROADCAST_FOLLOWS)


def _through_identity_broadcast(outs, dims):
    """`outs` (batched along `dims`) passed through JAX's transient identity
    broadcast_in_dim (IDENTITY_BROADCAST_FOLLOWS): batched ones with their
    batch axis first; the equations making them marked again, for an
    enclosing vmap."""
    moved = [o if d in (None, 0) else moveaxis(o, d, 0) for o, d in zip(outs, dims)]
    made = {id(o.atom) for o in moved if isinstance(o, Tracer)}
    for e in current_builder().eqns:
        if any(id(v) in made for v in e.outputs):
            e.why = IDENTITY_BROADCAST_FOLLOWS
    return moved, [None if d is None else 0 for d in dims]


def ndim(x) -> int:
    return x.ndim if isinstance(x, Tracer) else np.ndim(x)


def vectorized_batcher(prim):
    """Unary elementwise primitives: apply to the batched operand as is."""
    def rule(args, dims, **params):
        return bind(prim, *args, **params), dims[0]
    return rule


def broadcast_batcher(prim):
    """JAX's `broadcast_batcher` for n-ary elementwise primitives: if all
    non-scalar operands agree in shape and batch dimension, apply the
    primitive; otherwise move batch axes to the front, give unbatched
    operands a size-1 leading axis and rely on size-1 broadcasting."""
    from spec.prims_structural import expand_dims  # a cycle: prims_structural batches with this module

    def rule(args, dims, **params):
        shape, dim = next((a.shape, d) for a, d in zip(args, dims) if d is not None)
        if all(tuple(a.shape) == tuple(shape) and d == dim
               for a, d in zip(args, dims) if ndim(a)):
            return bind(prim, *args, **params), dim
        args = [bdim_at_front(a, d, 1) if ndim(a) else a for a, d in zip(args, dims)]
        nd = max(ndim(a) for a in args)
        args = [a if d is None or ndim(a) == nd else expand_dims(a, tuple(range(ndim(a), nd)))
                for a, d in zip(args, dims)]
        return bind(prim, *args, **params), 0
    return rule


# --------------------------------------------------------------------------
# the vmapped axis (JAX's batching.AxisData)

class AxisData(NamedTuple):
    """The axis being vmapped: its name (None: unnamed) and size."""
    name: Hashable | None
    size: int


_AXIS = contextvars.ContextVar("vmapped_axis", default=None)


def current_axis() -> AxisData | None:
    """The axis of the innermost vmap being traced (None outside any)."""
    return _AXIS.get()


@contextlib.contextmanager
def _vmapping(axis_name, axis_size: int):
    """Bind the vmapped axis; with no name given, a sub-program batched
    inside a vmap (by a batching rule) keeps the enclosing axis's name."""
    enclosing = _AXIS.get()
    if axis_name is None and enclosing is not None:
        axis_name = enclosing.name
    token = _AXIS.set(AxisData(axis_name, axis_size))
    try:
        yield
    finally:
        _AXIS.reset(token)


# --------------------------------------------------------------------------
# the transformation

def vmap_traced(prog: Program, args, dims, axis_size: int):
    """Emit the batched `prog` into the current trace. Returns (outs, out dims)."""
    env: dict[int, tuple] = {}

    def read(a):
        return env[a.id] if isinstance(a, Var) else (a.value, None)

    for v, x, d in zip(prog.inputs, args, dims):
        env[v.id] = (x, d)
    for e in prog.eqns:
        xs, ds = zip(*map(read, e.inputs)) if e.inputs else ((), ())
        if e.primitive in axis_batch_rules:
            axis = current_axis() or AxisData(None, axis_size)
            outs, out_dims = axis_batch_rules[e.primitive](axis, list(xs), list(ds), **e.params)
            if not e.primitive.multiple_results:
                outs, out_dims = [outs], [out_dims]
        elif all(d is None for d in ds):
            outs = bind(e.primitive, *xs, **e.params)
            out_dims = [None] * len(e.outputs)
            outs = outs if e.primitive.multiple_results else [outs]
        else:
            rule = batch_rules.get(e.primitive)
            if rule is None:
                raise BatchingError(f"primitive {e.primitive.name!r} has no batching rule")
            outs, out_dims = rule(list(xs), list(ds), **e.params)
            if not e.primitive.multiple_results:
                outs, out_dims = [outs], [out_dims]
        if e.why == IDENTITY_BROADCAST_FOLLOWS:
            outs, out_dims = _through_identity_broadcast(outs, out_dims)
        for v, o, d in zip(e.outputs, outs, out_dims):
            env[v.id] = (o, d)
    outs = [read(a) for a in prog.outputs]
    return [o for o, _ in outs], [d for _, d in outs]


def move_to(x, d, target, size: int):
    """Put x's batch axis at `target` (batching.matchaxis); target None
    means x must be unbatched. An unbatched x is broadcast with its new
    axis at `target` at once (`batching.broadcast`, one broadcast_in_dim:
    no transpose, whose transpose a reverse pass would then apply; found by
    a pristine campaign on 0.10.2, fd2f1425cf, vmap(out_axes=1) of an
    unbatched output under a vjp under a vmap)."""
    if target is None:
        if d is not None:
            raise OutAxisError(f"got axis spec None but output was batched on axis {d}")
        return x
    if d is None:
        return broadcast_at(x, size, target % (np.ndim(x) + 1))
    return moveaxis(x, d, target)


def vmap_program(prog: Program, in_dims: Sequence[int | None], out_dims="any",
                 axis_size: int | None = None, *, axis_name: Hashable | None = None):
    """The batched program for inputs batched along `in_dims` (None:
    unbatched). `out_dims` is a list of target axes (None: must be
    unbatched), or "any" to keep the rules' choice, or "zero_if_mapped" to
    move batched outputs to axis 0 and keep unbatched ones (as JAX batches a
    checkpoint's body). `axis_name` names the new axis for collectives
    (default: the enclosing vmap's, when batching a sub-program).
    Returns (program, out dims)."""
    in_dims = list(in_dims)
    if len(in_dims) != len(prog.inputs):
        raise BatchingError(f"in_axes has {len(in_dims)} entries for {len(prog.inputs)} inputs")
    for t, d in zip(prog.in_types, in_dims):
        if d is not None and (not isinstance(d, (int, np.integer)) or not -(t.ndim + 1) <= d <= t.ndim):
            raise BatchingError(f"in_axes entry {d!r} out of range for an input of type {t} "
                                f"(the batched input has {t.ndim + 1} dims)")
    if axis_size is None:
        raise BatchingError("vmap of a program needs axis_size: the size of the new batch axis "
                            "(a program's input types do not carry it)")
    # in_dims index the *batched* input arrays
    in_types = []
    canon = []
    for t, d in zip(prog.in_types, in_dims):
        if d is None:
            in_types.append(t)
            canon.append(None)
        else:
            d = d % (t.ndim + 1)
            shape = list(t.shape)
            shape.insert(d, axis_size)
            in_types.append(ArrayType(shape, t.dtype, t.memory_space))
            canon.append(d)
    if axis_name is not None and (isinstance(axis_name, (int, np.integer)) or not isinstance(axis_name, Hashable)):
        raise BatchingError(f"axis_name must be a hashable non-integer (a name such as 'batch'), got {axis_name!r}")
    with building() as b, _vmapping(axis_name, axis_size):
        ins = [b.new_input(t) for t in in_types]
        outs, dims = vmap_traced(prog, ins, canon, axis_size)
        if out_dims == "any":
            final = dims
        elif out_dims == "zero_if_mapped":
            outs = [move_to(o, d, 0, axis_size) if d is not None else o for o, d in zip(outs, dims)]
            final = [0 if d is not None else None for d in dims]
        else:
            final = []
            for o_t, target in zip(prog.out_types, out_dims):
                if target is not None:
                    if not isinstance(target, (int, np.integer)) or not -(o_t.ndim + 1) <= target <= o_t.ndim:
                        raise BatchingError(f"out_axes entry {target!r} out of range for an output of "
                                            f"type {o_t} (the batched output has {o_t.ndim + 1} dims)")
                    target = target % (o_t.ndim + 1)
                final.append(target)
            outs = [move_to(o, d, t, axis_size) for o, d, t in zip(outs, dims, final)]
        return b.build(ins, outs, input_names=prog.input_names), final


def vmap(prog: Program, in_axes=0, out_axes=0, axis_size: int | None = None, *,
         axis_name: Hashable | None = None) -> Program:
    """`jax.vmap` as a program transformation.

    in_axes: an int (every input batched along that axis), None, or one
    entry (int or None) per input; negative axes count from the end of the
    batched input. out_axes: the same, per output. axis_size (the size of
    the new axis) is required: a program's input types do not carry it.
    axis_name names the axis for the collectives over it (psum, pmean, ...).
    Unbatched inputs stay unbatched as far as possible."""
    n = len(prog.inputs)
    in_axes = [in_axes] * n if in_axes is None or isinstance(in_axes, (int, np.integer)) else list(in_axes)
    if len(in_axes) != n:
        raise BatchingError(f"in_axes has {len(in_axes)} entries for {n} inputs")
    m = len(prog.outputs)
    out_axes = [out_axes] * m if out_axes is None or isinstance(out_axes, (int, np.integer)) else list(out_axes)
    if len(out_axes) != m:
        raise BatchingError(f"out_axes has {len(out_axes)} entries for {m} outputs")
    return vmap_program(prog, in_axes, out_axes, axis_size, axis_name=axis_name)[0]
