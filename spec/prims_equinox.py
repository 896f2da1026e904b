"""equinox's primitives: those `eqx.error_if` and `equinox.internal`'s loops
(`while_loop(kind="checkpointed" | "bounded" | "lax")`, `scan(kind=
"checkpointed")`, diffrax's checkpointed adjoint) put into jaxprs, each
mirroring equinox's own impl, abstract eval and rules (equinox 0.13,
equinox/_unvmap.py, equinox/internal/_nontraceable.py,
equinox/internal/_loop/common.py):

* unvmap_any, unvmap_all, unvmap_max: `jnp.any` / `jnp.all` / `jnp.max`
  of the whole operand that ignore batch dimensions: their batching rule
  reduces the batched operand, batch included, to an unbatched scalar.
  `eqx.error_if` reduces its predicate with unvmap_any (and a traced
  index with unvmap_max), a loop's cond_fun its predicate, so that a
  vmapped loop steps in lockstep. equinox registers no JVP rule: a
  nonzero tangent raises JAX's "Differentiation rule ... not implemented".
* nonbatchable[msg, allow_constant_across_batch]: the identity, which
  must not be batched: batched, it raises ValueError(msg); with
  allow_constant_across_batch it checks (an error_if) that the batch is
  constant and keeps member 0, unbatched. No JVP rule (as above).
* select_if_vmap: `lax.select(pred, x, y)` where pred is batched, else
  `x` (an unbatched loop predicate is known true inside the body); linear
  in x and y.
* maybe_set[makes_false_steps]: a write-once buffer's `buffer.at[i].set(x)`
  (a checkpointed scan's ys, `buffers=` of the loops), at an integer
  scalar index; its transpose relies on the write-once promise (the
  buffer's cotangent passes through whole). Batched, equinox binds its
  generic `vprim` (below), as the spec does.

and `empty2`, JAX's own, which equinox's loops bring along (the backward
rule of a checkpointed loop whose body holds a cond binds it).

They run in pure numpy here; their JAX emitters bind equinox's own
primitives (equinox is imported only when one is bound).

    >>> import spec
    >>> prog = spec.trace(lambda p, x, y: select_if_vmap(p, x, y), spec.bool_[()], spec.f32[2], spec.f32[2])
    >>> print(spec.vmap(prog, (0, None, None), 0, axis_size=3))
    { lambda ; a:bool[3] b:f32[2] c:f32[2]. let
        d:f32[3,2] = broadcast_in_dim[shape=(3, 2) broadcast_dimensions=(1,)] c
        e:f32[3,2] = broadcast_in_dim[shape=(3, 2) broadcast_dimensions=(1,)] b
        f:bool[3,2] = broadcast_in_dim[shape=(3, 2) broadcast_dimensions=(0,)] a
        g:f32[3,2] = select_n f d e
      in (g,) }
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, Tracer, UndefinedPrimal, Zero, axis_batch_rules,
                       batch_rules, bind, eval_rules, examples, instantiate, is_undefined, jax_facts, jvp_rules,
                       primitive, primitives, shape_rules, to_atom, transpose_rules, zeros_like_type)
from spec.ir import ArrayType
from spec.prims_callback import pure_callback
from spec.prims_control import cond
from spec.prims_conv import copy
from spec.prims_elementwise import add, convert_element_type, eq, lt, ne, select_n
from spec.prims_reductions import _slice_in_dim, reduce_min
from spec.prims_structural import broadcast_in_dim, reduce_max, squeeze


def _no_jvp(prim):
    """JAX's JVPTrace for a primitive without a JVP rule (equinox registers
    none): NotImplementedError, word for word; reached only for a nonzero
    tangent (with every tangent zero JAX binds the primitive on the primals)."""
    def jvp(primals, tangents, **params):
        raise NotImplementedError(f"Differentiation rule for '{prim.name}' not implemented")
    return jvp


# --------------------------------------------------------------------------
# unvmap_any, unvmap_all, unvmap_max (equinox/_unvmap.py)

def _unvmap(name, reduce, bool_out, doc):
    prim = primitive(name)

    def apply(x):
        return bind(prim, x)
    apply.__name__, apply.__doc__ = name, doc

    def shape(x):
        """_{name}_abstract_eval: a scalar, bool (any, all) or x's dtype (max);
        the operand's dtype is not checked."""
        return [ArrayType((), np.dtype(np.bool_) if bool_out else x.dtype)]

    def evaluate(x):
        """_{name}_impl: jnp.{reduce} of the whole operand."""
        if not bool_out and np.size(x) == 0:
            raise PrimitiveError(prim, "the maximum of an empty array has no value")
        return np.asarray(reduce(x), dtype=np.bool_ if bool_out else np.asarray(x).dtype)

    def batch(args, dims):
        """_{name}_batch: the batched operand reduced whole (its batch axis
        included); the result is unbatched."""
        return apply(args[0]), None

    shape_rules[prim] = shape
    eval_rules[prim] = evaluate
    jvp_rules[prim] = _no_jvp(prim)      # equinox registers none
    batch_rules[prim] = batch
    jax_facts[prim] = JaxFacts(
        name, f"lambda x: __import__('equinox._unvmap', fromlist=['_']).{name}_p.bind(x)")
    return prim, apply


unvmap_any_p, unvmap_any = _unvmap("unvmap_any", np.any, True, "As `jnp.any`, but ignores batch dimensions.")
unvmap_all_p, unvmap_all = _unvmap("unvmap_all", np.all, True, "As `jnp.all`, but ignores batch dimensions.")
unvmap_max_p, unvmap_max = _unvmap("unvmap_max", np.max, False, "As `jnp.max`, but ignores batch dimensions.")

examples[unvmap_any_p] = [
    # error_if(x, jnp.isnan(x)): a predicate that holds for no member
    Example("any-nan", (((2, 3), "f32", "normal"),), lambda x: unvmap_any(ne(x, x)),
            lambda x: np.any(x != x), tangent="zero"),
    Example("guards-a-select", (((3,), "f32", "normal"),),
            lambda x: select_n(unvmap_any(x > 1e4), x, x * 0.0), lambda x: x),
]
examples[unvmap_all_p] = [
    Example("all-finite", (((4,), "f32", "normal"),), lambda x: unvmap_all(eq(x, x)),
            lambda x: np.all(x == x), tangent="zero"),
]
examples[unvmap_max_p] = [
    # branched_error_if's index: a result code, 0 ("successful") for every member
    Example("result-code", (((3,), "i32", "ints:0:1"),), lambda i: unvmap_max(i), lambda i: np.max(i)),
    Example("constant-index", (((2, 2), "i32", "ints:2:3"),), lambda i: unvmap_max(i) + i,
            lambda i: np.max(i) + i),
]


# --------------------------------------------------------------------------
# error_if, as equinox binds it (its pure_callback raising)

@dataclass(frozen=True)
class RaiseError:
    """The flat callback of `error_if`'s raising branch (equinox's
    `_error.<locals>.raises`): it raises RuntimeError(msg)."""
    msg: str

    def __call__(self, *_):
        raise RuntimeError(self.msg)

    def __repr__(self):
        return f"RaiseError({self.msg!r})"


def error_if(x, pred, msg: str):
    """eqx.error_if(x, pred, msg) (on_error="raise", equinox/_errors.py):
    `unvmap_any(pred)`, then a cond whose true branch calls a pure_callback
    that raises (on index 0, with vmap_method None), the false branch x.
    equinox wraps the cond in a custom_jvp whose rule passes x's tangent
    through and the whole in a jit; the values are the same."""
    def raises(v):
        return pure_callback(RaiseError(msg), [v.type], np.int32(0))[0]
    return cond(unvmap_any(pred), raises, lambda v: v, x)


# --------------------------------------------------------------------------
# nonbatchable (equinox/internal/_nontraceable.py)

nonbatchable_p = primitive("nonbatchable", ["msg", "allow_constant_across_batch"])


def nonbatchable(x, *, msg: str | None = None, name: str | None = None, allow_constant_across_batch=False):
    """equinox.internal.nonbatchable on one array: the identity, which may
    not be batched. `msg` defaults to equinox's."""
    if msg is None:
        name = name or "This operation"
        msg = (f"Nonconstant batch. {name} has received a batch of values that were expected to be constant. "
               "This is probably an internal error in the library you are using." if allow_constant_across_batch
               else f"Unexpected batch tracer. {name} cannot be vmap'd. This is probably an internal error in "
                    "the library you are using.")
    return bind(nonbatchable_p, x, msg=str(msg), allow_constant_across_batch=bool(allow_constant_across_batch))


def _nonbatchable_shape(x, *, msg, allow_constant_across_batch):
    """def_abstract_eval(lambda x, *, msg, allow_constant_across_batch: x)"""
    return [x]


shape_rules[nonbatchable_p] = _nonbatchable_shape


def _nonbatchable_eval(x, *, msg, allow_constant_across_batch):
    """def_impl(lambda x, *, msg, allow_constant_across_batch: x)"""
    return x


eval_rules[nonbatchable_p] = _nonbatchable_eval
jvp_rules[nonbatchable_p] = _no_jvp(nonbatchable_p)     # equinox registers none


def _nonbatchable_batch(args, dims, *, msg, allow_constant_across_batch):
    """_cannot_batch: batched, ValueError(msg); with
    allow_constant_across_batch, `error_if(x, jnp.min(x, axis=b) !=
    jnp.max(x, axis=b), msg)` and member 0 (equinox's jnp.take(x, 0,
    axis=b), a gather; here the slice it reads), unbatched."""
    (x,), (b,) = args, dims
    if not allow_constant_across_batch:
        raise ValueError(msg)
    x = error_if(x, ne(reduce_min(x, (b,)), reduce_max(x, (b,))), msg)
    return squeeze(_slice_in_dim(x, 0, 1, 1, b), (b,)), None


batch_rules[nonbatchable_p] = _nonbatchable_batch
jax_facts[nonbatchable_p] = JaxFacts(
    "nonbatchable",
    "lambda x, msg, allow_constant_across_batch: __import__('equinox.internal._nontraceable', "
    "fromlist=['_']).nonbatchable_p.bind(x, msg=msg, allow_constant_across_batch=allow_constant_across_batch)")
examples[nonbatchable_p] = [
    # a loop's step counter: the same for every member
    Example("step-counter", (((), "i32", "ints:3:4"),), lambda i: nonbatchable(i, allow_constant_across_batch=True) + 1,
            lambda i: i + 1),
    Example("saved-steps", (((4,), "i32", "ints:0:1"),),
            lambda i: nonbatchable(i, name="checkpointed_while_loop", allow_constant_across_batch=True),
            lambda i: i),
]


# --------------------------------------------------------------------------
# select_if_vmap (equinox/internal/_loop/common.py)

select_if_vmap_p = primitive("select_if_vmap")


def select_if_vmap(pred, x, y):
    """_select_if_vmap(pred, x, y, makes_false_steps=False): lax.select(pred,
    x, y) where pred is batched, else x (pred a bool scalar, x and y of one type)."""
    return bind(select_if_vmap_p, pred, x, y)


def _select_if_vmap_shape(pred, x, y):
    """_select_if_vmap_abstract: x's type (pred a bool scalar, y x's type:
    _select_if_vmap's asserts)."""
    if pred.shape != () or pred.dtype != np.bool_:
        raise PrimitiveError(select_if_vmap_p, f"pred must be a bool scalar, got {pred}")
    if x != y:
        raise PrimitiveError(select_if_vmap_p, f"x and y must have one type, got {x} and {y}")
    return [x]


shape_rules[select_if_vmap_p] = _select_if_vmap_shape


def _select_if_vmap_eval(pred, x, y):
    """_select_if_vmap_impl: x (an unbatched pred is assumed true)."""
    return x


eval_rules[select_if_vmap_p] = _select_if_vmap_eval


def _fixed_asarray(v):
    """equinox's fixed_asarray (jnp.array): a traced value is copied (a
    `copy` equation), a constant stays one."""
    return copy(v) if isinstance(v, Tracer) else v


def _select_if_vmap_rebound(pred, x, y):
    """_select_if_vmap(pred, x, y, makes_false_steps=False), as equinox's
    rules call it: its operands through fixed_asarray, then the primitive."""
    return select_if_vmap(_fixed_asarray(pred), _fixed_asarray(x), _fixed_asarray(y))


def _select_if_vmap_jvp(primals, tangents):
    """_select_if_vmap_jvp: the primal and the tangent each through
    _select_if_vmap (so each reads a copy of pred: the residual); the
    tangent is zero if both are, else a zero one is instantiated
    (jnp.zeros)."""
    (pred, x, y), (_, tx, ty) = primals, tangents
    out = _select_if_vmap_rebound(pred, x, y)
    if isinstance(tx, Zero) and isinstance(ty, Zero):
        return out, None
    return out, _select_if_vmap_rebound(pred, instantiate(tx), instantiate(ty))


jvp_rules[select_if_vmap_p] = _select_if_vmap_jvp


def _select_if_vmap_transpose(ct, pred, x, y):
    """_select_if_vmap_transpose: ct to x as _select_if_vmap(pred, ct, 0),
    to y as _select_if_vmap(pred, 0, ct) (jnp.zeros of ct's type)."""
    if is_undefined(pred):
        raise PrimitiveError(select_if_vmap_p, "pred is not linear")
    if isinstance(ct, Zero):
        return [None, None, None]
    zero = zeros_like_type(ct.type)
    return [None, _select_if_vmap_rebound(pred, ct, zero) if is_undefined(x) else None,
            _select_if_vmap_rebound(pred, zero, ct) if is_undefined(y) else None]


transpose_rules[select_if_vmap_p] = _select_if_vmap_transpose


def _select_if_vmap_batch(args, dims):
    """_select_if_vmap_batch: an unbatched pred stays a _select_if_vmap of x
    and y with their batch axes at 0 (the unbatched one broadcast,
    jnp.broadcast_to); a batched pred is `jax.vmap(lax.select, in_axes=(bp,
    bx, by))`: select_n(pred, y, x) batched by select_n's rule."""
    from spec.batching import broadcast, moveaxis
    from spec.prims_elementwise import select_n_p
    (pred, x, y), (bp, bx, by) = args, dims
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    if bp is None:
        x = broadcast(x, size) if bx is None else moveaxis(x, bx, 0)
        y = broadcast(y, size) if by is None else moveaxis(y, by, 0)
        return _select_if_vmap_rebound(pred, x, y), 0
    return batch_rules[select_n_p]([pred, y, x], [bp, by, bx])


batch_rules[select_if_vmap_p] = _select_if_vmap_batch
jax_facts[select_if_vmap_p] = JaxFacts(
    "select_if_vmap",
    "lambda pred, x, y: __import__('equinox.internal._loop.common', fromlist=['_']).select_if_vmap_p.bind(pred, x, y)",
    # _select_if_vmap_transpose asserts `ct.shape == x.aval.shape` before it
    # tests `type(ct) is ad.Zero`, and jax 0.10.2's Zero has no shape
    transpose_rejects_zero_cotangent=True)
examples[select_if_vmap_p] = [
    # inside a loop body: the (batched) predicate holds for every member still stepping
    Example("stepping", (((), "bool", "ints:1:2"), ((3,), "f32", "normal"), ((3,), "f32", "normal")),
            lambda p, x, y: select_if_vmap(p, x, y), lambda p, x, y: x, linear=((False, True, True),)),
    Example("carry-update", (((), "bool", "ints:1:2"), ((2, 2), "f32", "normal")),
            lambda p, x: select_if_vmap(p, x * 2.0, x), lambda p, x: x * 2.0, linear=((False, True),)),
]


# --------------------------------------------------------------------------
# maybe_set (equinox/internal/_loop/common.py): a write-once buffer's update

maybe_set_p = primitive("maybe_set", ["makes_false_steps"], multiple_results=True)


def maybe_set(pred, xs, x, i, *, makes_false_steps=False):
    """_maybe_set(pred, xs, x, i, kwargs={}, makes_false_steps): as
    `lax.select(pred, xs.at[i].set(x), xs)`, for a buffer written at most
    once per location, at an integer scalar index i (the form equinox's
    loops bind: `buffer.at[step].set(y)`; a static or multi-part index is
    not modelled). Returns the updated buffer."""
    return bind(maybe_set_p, pred, xs, x, i, makes_false_steps=bool(makes_false_steps))[0]


def _maybe_set_shape(pred, xs, x, i, *, makes_false_steps):
    """_maybe_set_abstract: [xs] (x is one row of xs, as _maybe_set
    broadcasts and casts it; pred a bool scalar; i an integer scalar)."""
    if pred.shape != () or pred.dtype != np.bool_:
        raise PrimitiveError(maybe_set_p, f"pred must be a bool scalar, got {pred}")
    if i.shape != () or not np.issubdtype(i.dtype, np.integer):
        raise PrimitiveError(maybe_set_p, f"the index must be an integer scalar, got {i}")
    if xs.ndim == 0 or x != ArrayType(xs.shape[1:], xs.dtype):
        raise PrimitiveError(maybe_set_p, f"x must be one row of xs: xs {xs}, x {x}")
    return [xs]


shape_rules[maybe_set_p] = _maybe_set_shape


def _maybe_set_eval(pred, xs, x, i, *, makes_false_steps):
    """_maybe_set_impl: x = _select_if_vmap(pred, x, xs.at[i].get(),
    makes_false_steps) (lax.select where it makes false steps, else x);
    xs.at[i].set(x). A negative i counts from the end (jnp's indexing);
    the get clamps (a dynamic_slice), the set drops an index out of
    bounds (a FILL_OR_DROP scatter)."""
    n = xs.shape[0]
    k = int(i) + n if int(i) < 0 else int(i)
    if makes_false_steps and not bool(pred):
        x = xs[min(max(k, 0), n - 1)]
    out = np.array(xs, copy=True)
    if 0 <= k < n:
        out[k] = x
    return [out]


eval_rules[maybe_set_p] = _maybe_set_eval


def _index(i, n: int):
    """jnp's normalisation of an integer index: i + n where i < 0."""
    return select_n(lt(i, 0), i, add(i, n))


def _buffer_get(xs, i):
    """xs.at[i].get() (jnp indexing by an integer scalar: a dynamic_slice of
    one row, squeezed). jnp's `_attempt_rewriting_take_via_slice` makes every
    start index int32 and lax.dynamic_slice normalises each, the zeros of
    the other axes too (`select_n(0 < 0, 0, 0 + n)`, equations JAX binds:
    found by a pristine campaign, 18c4a0aaf6, where a grad saved them)."""
    from spec.prims_indexing import dynamic_slice
    if to_atom(i).type.dtype != np.int32:
        i = convert_element_type(i, np.int32)
    starts = [_index(s, n) for s, n in zip([i] + [np.int32(0)] * (xs.ndim - 1), xs.shape)]
    return squeeze(dynamic_slice(xs, starts, (1,) + tuple(xs.shape[1:])), (0,))


def _buffer_set(xs, i, x):
    """xs.at[i].set(x) (jnp's scatter of one row, FILL_OR_DROP, its index
    sorted and unique)."""
    from spec.prims_indexing import ScatterDimensionNumbers, scatter
    dn = ScatterDimensionNumbers(tuple(range(x.ndim)), (0,), (0,))
    return scatter(xs, broadcast_in_dim(_index(i, xs.shape[0]), (1,), ()), x, dn, indices_are_sorted=True,
                   unique_indices=True, mode="fill")


def _select_if_vmap_or_select(pred, x, y, makes_false_steps):
    """_select_if_vmap(pred, x, y, makes_false_steps): lax.select where the
    loop makes false steps, else select_if_vmap."""
    return select_n(pred, y, x) if makes_false_steps else _select_if_vmap_rebound(pred, x, y)


def _maybe_set_rebound(pred, xs, x, i, makes_false_steps):
    """_maybe_set as equinox's rules call it: x through fixed_asarray, then
    the primitive."""
    return maybe_set(pred, xs, _fixed_asarray(x), i, makes_false_steps=makes_false_steps)


def _maybe_set_jvp(primals, tangents, *, makes_false_steps):
    """_maybe_set_jvp: the primal and the tangent each a _maybe_set (of the
    tangents, a zero one instantiated); zero if both are."""
    (pred, xs, x, i), (_, t_xs, t_x, _) = primals, tangents
    out = _maybe_set_rebound(pred, xs, x, i, makes_false_steps)
    if isinstance(t_xs, Zero) and isinstance(t_x, Zero):
        return [out], [None]
    t_out = _maybe_set_rebound(pred, instantiate(t_xs), instantiate(t_x), i, makes_false_steps)
    return [out], [t_out]


jvp_rules[maybe_set_p] = _maybe_set_jvp


def _maybe_set_transpose(cts, pred, xs, x, i, *, makes_false_steps):
    """_maybe_set_transpose: xs's cotangent is the output's as it is (each
    location is written once, so read once backwards: no zero is placed at
    i); x's is the output's row i, through _select_if_vmap(pred, ., 0)."""
    if is_undefined(pred) or is_undefined(i):
        raise PrimitiveError(maybe_set_p, "pred and the index are not linear")
    (ct,) = cts
    ct_xs = ct if is_undefined(xs) else None
    ct_x = None
    if is_undefined(x) and not isinstance(ct, Zero):
        row = _buffer_get(ct, i)
        ct_x = _select_if_vmap_or_select(pred, row, zeros_like_type(row.type), makes_false_steps)
    return [None, ct_xs, ct_x, None]


transpose_rules[maybe_set_p] = _maybe_set_transpose




def _maybe_set_from_jax(p):
    """The form equinox's loops bind: one dynamic integer leaf as the index
    (i_static None, i_treedef a leaf), no indexing kwargs."""
    tree, static, kwargs = p.pop("i_treedef"), p.pop("i_static"), p.pop("kwargs")
    if static is not None or tuple(kwargs) or getattr(tree, "num_leaves", None) != 1 \
            or getattr(tree, "num_nodes", None) != 1:
        raise PrimitiveError(maybe_set_p, f"buffer.at[i].set(...) with i_static={static!r}, i_treedef={tree}, "
                                          f"kwargs={kwargs!r} is not modelled (one integer scalar index, "
                                          "no kwargs, is)")
    return p


jax_facts[maybe_set_p] = JaxFacts(
    "maybe_set",
    # kwargs as the installed equinox's _maybe_set passes them: a tuple of
    # items where its params are hashable (its `_to_hashable_slice`), a
    # dict before (0.11.3, whose impl spreads `**kwargs`)
    "lambda pred, xs, x, i, makes_false_steps: (lambda m: m.maybe_set_p.bind(pred, xs, x, i, i_static=None, "
    "i_treedef=jax.tree_util.tree_structure(0), kwargs=() if hasattr(m, '_to_hashable_slice') else {}, "
    "makes_false_steps=makes_false_steps))(__import__('equinox.internal._loop.common', fromlist=['_']))",
    from_jax=_maybe_set_from_jax)
# --------------------------------------------------------------------------
# vprim (equinox/internal/_primitive.py): how equinox batches its primitives

vprim_p = primitive("vprim", ["primitive", "axis_size", "axis_name", "batch_axes", "params"], multiple_results=True)


def _vprim_batcher(prim):
    """create_vprim's batch rule: with every operand unbatched the primitive
    as it is; else `vprim[prim=...]` of the operands as they are (the batch
    axes a param), its outputs batched at axis 0. vprim is a vprim too: a
    vprim batched again is a vprim of vprims."""
    def batch(axis, args, dims, **params):
        if all(d is None for d in dims):
            outs = bind(prim, *args, **params)
            return outs, [None] * len(outs)
        outs = bind(vprim_p, *args, primitive=prim.name, axis_size=axis.size, axis_name=axis.name,
                    batch_axes=tuple(dims), params=tuple(params.items()))
        return outs, [0] * len(outs)
    return batch


def _member_type(t: ArrayType, d) -> ArrayType:
    """One member's type of an operand batched at d (None: as it is)."""
    return t if d is None else ArrayType(t.shape[:d] + t.shape[d + 1:], t.dtype)


def _vprim_shape(*xs, primitive, axis_size, axis_name, batch_axes, params):
    """_vprim_abstract_eval: the primitive's abstract eval of one member,
    each output batched at axis 0."""
    outs = shape_rules[primitives[primitive]](*[_member_type(x, d) for x, d in zip(xs, batch_axes)], **dict(params))
    return [ArrayType((axis_size,) + o.shape, o.dtype) for o in outs]


def _maybe_set_ops(pred, xs, x, i, *, makes_false_steps):
    """_maybe_set_impl in spec ops (what jax.vmap batches: under vmap its
    select_if_vmap meets a batched pred and selects, so a vmapped
    maybe_set is not the member-wise one)."""
    x = _select_if_vmap_or_select(pred, x, _buffer_get(xs, i), makes_false_steps)
    return [_buffer_set(xs, i, x)]


def _vprim_ops(*xs, primitive, axis_size, axis_name, batch_axes, params):
    """_vprim_impl in spec ops: jax.vmap(impl, in_axes=batch_axes) of the
    primitive's impl (a vprim's own for a vprim of vprims)."""
    member = [_member_type(to_atom(x).type, d) for x, d in zip(xs, batch_axes)]
    impl = _VPRIM_IMPLS[primitive]
    return _vmapped_rule(lambda *m: impl(*m, **dict(params)), member, list(xs), list(batch_axes), axis_size,
                         axis_name)


# equinox's vprims: the impl each one's vprim batches
_VPRIM_IMPLS = {"maybe_set": _maybe_set_ops, "vprim": _vprim_ops}


def _vprim_eval(*xs, **params):
    """_vprim_impl, evaluated (numbers only: no symbolic evaluation)."""
    from spec.core import trace
    from spec.evaluate import evaluate
    if any(np.asarray(x).dtype == object for x in xs):
        raise TypeError("vprim has no symbolic evaluation")
    types = [ArrayType(np.shape(x), np.asarray(x).dtype) for x in xs]
    return evaluate(trace(lambda *a: _vprim_ops(*a, **params), *types), *xs)


def _vmapped_rule(fn, types, args, dims, axis_size, axis_name, out_axes=None):
    """fn (member values -> outputs, None where a symbolic zero) traced over
    one member's `types` and batched: jax.vmap(fn, in_axes=dims,
    out_axes=out_axes) of args: each output at its out axis (default 0;
    broadcast where unbatched; an out axis None must stay unbatched), None
    as it was."""
    from spec.batching import _vmapping, move_to, vmap_traced
    from spec.core import trace
    nones = []

    def traced(*xs):
        outs = fn(*xs)
        nones[:] = [o is None for o in outs]
        return [o for o in outs if o is not None]
    prog = trace(traced, *types)
    with _vmapping(axis_name, axis_size):
        outs, out_dims = vmap_traced(prog, args, dims, axis_size)
    targets = iter([a for a, n in zip(out_axes or [0] * len(nones), nones) if not n])
    it = iter(move_to(o, d, next(targets), axis_size) for o, d in zip(outs, out_dims))
    return [None if n else next(it) for n in nones]


def _vprim_jvp(primals, tangents, *, primitive, axis_size, axis_name, batch_axes, params):
    """_vprim_jvp: jax.vmap of the primitive's JVP rule, in_axes=(batch_axes,
    batch axes of the tangents), a symbolic-zero tangent unbatched (its
    batch axis None, its type one member's: _resolve_zeros_t/_b)."""
    inner, n = primitives[primitive], len(primals)
    member = [_member_type(to_atom(x).type, d) for x, d in zip(primals, batch_axes)]
    nonzero = [not isinstance(t, Zero) for t in tangents]

    def rule(*xs):
        it = iter(xs[n:])
        ts = [next(it) if nz else Zero(m) for nz, m in zip(nonzero, member)]
        outs, touts = jvp_rules[inner](list(xs[:n]), ts, **dict(params))
        return list(outs) + list(touts)
    types = member + [m for m, nz in zip(member, nonzero) if nz]
    args = list(primals) + [t for t in tangents if not isinstance(t, Zero)]
    dims = list(batch_axes) + [d for d, nz in zip(batch_axes, nonzero) if nz]
    outs = _vmapped_rule(rule, types, args, dims, axis_size, axis_name)
    k = len(outs) // 2
    return outs[:k], outs[k:]


def _vprim_transpose(cts, *xs, primitive, axis_size, axis_name, batch_axes, params):
    """_vprim_transpose: jax.vmap of the primitive's transpose rule,
    in_axes=(0 for the cotangents, the defined operands' batch axes; an
    undefined operand unbatched, one member's type), out_axes=batch_axes."""
    transpose = transpose_rules[primitives[primitive]]
    member = [_member_type(x.type if is_undefined(x) else to_atom(x).type, d) for x, d in zip(xs, batch_axes)]
    defined = [not is_undefined(x) for x in xs]
    ct_nonzero = [not isinstance(c, Zero) for c in cts]

    def rule(*vals):
        it_ct, it_x = iter(vals[:sum(ct_nonzero)]), iter(vals[sum(ct_nonzero):])
        member_cts = [next(it_ct) if nz else Zero(_member_type(c.type, 0)) for c, nz in zip(cts, ct_nonzero)]
        args = [next(it_x) if df else UndefinedPrimal(m) for df, m in zip(defined, member)]
        return [None if isinstance(o, Zero) else o for o in transpose(member_cts, *args, **dict(params))]
    types = ([_member_type(to_atom(c).type, 0) for c, nz in zip(cts, ct_nonzero) if nz]
             + [m for m, df in zip(member, defined) if df])
    args = [c for c, nz in zip(cts, ct_nonzero) if nz] + [x for x, df in zip(xs, defined) if df]
    dims = [0] * sum(ct_nonzero) + [d for d, df in zip(batch_axes, defined) if df]
    return _vmapped_rule(rule, types, args, dims, axis_size, axis_name, out_axes=list(batch_axes))


def _vprim_from_jax(p):
    """JAX's params (prim: a Primitive, __axis_size, __axis_name,
    __batch_axes, params: the primitive's params as items) in the spec's
    terms: the primitive by name, its params through its own from_jax."""
    prim = primitives[getattr(p["prim"], "name", p["prim"])]
    facts = jax_facts.get(prim)
    inner = dict(p["params"])
    inner = facts.from_jax(inner) if facts is not None and facts.from_jax is not None else inner
    return dict(primitive=prim.name, axis_size=int(p["__axis_size"]), axis_name=p["__axis_name"],
                batch_axes=tuple(p["__batch_axes"]), params=tuple(inner.items()))


shape_rules[vprim_p] = _vprim_shape
eval_rules[vprim_p] = _vprim_eval
jvp_rules[vprim_p] = _vprim_jvp
transpose_rules[vprim_p] = _vprim_transpose
# the primitives equinox batches as vprims (create_vprim): a vmapped one binds a vprim
BATCHED_AS_VPRIMS = (vprim_p, maybe_set_p)
for _p in BATCHED_AS_VPRIMS:
    axis_batch_rules[_p] = _vprim_batcher(_p)
# the JAX primitive and params of the batched one: those it binds for one member, traced
# (params a tuple of items where equinox's params are hashable, a dict before: maybe_set's emitter)
jax_facts[vprim_p] = JaxFacts(
    "vprim",
    "lambda *xs, primitive, axis_size, axis_name, batch_axes, params: (lambda e: __import__("
    "'equinox.internal._primitive', fromlist=['_'])._vprim_p.bind(*xs, prim=e.primitive, "
    "__axis_size=axis_size, __axis_name=axis_name, __batch_axes=batch_axes, params=(tuple if hasattr(__import__("
    "'equinox.internal._loop.common', fromlist=['_']), '_to_hashable_slice') else dict)(e.params.items())))("
    "jax.make_jaxpr(lambda *a: E[primitive](*a, **dict(params)))(*[jax.ShapeDtypeStruct(x.shape if b is None else "
    "tuple(n for k, n in enumerate(x.shape) if k != b), x.dtype) for x, b in zip(xs, batch_axes)])"
    ".jaxpr.eqns[-1])",
    from_jax=_vprim_from_jax,
    # _vprim_transpose hands the batched rule None for a symbolic zero
    # cotangent, and maybe_set's rule tests for ad.Zero only: `None.at[i]`
    transpose_rejects_zero_cotangent=True)
examples[vprim_p] = [
    # a vmapped write-once buffer, its index and predicate batched, the buffer not
    Example("vmapped-write-once-row", (((2,), "bool", "ints:1:2"), ((2, 3), "f32", "normal"),
                                       ((2,), "i32", "indices:4")),
            lambda p, x, i: bind(vprim_p, p, _zero_buffer((4, 3), x.dtype), x, i, primitive="maybe_set", axis_size=2,
                                 axis_name=None, batch_axes=(0, None, 0, 0),
                                 params=(("makes_false_steps", False),))[0],
            lambda p, x, i: np.stack([_np_set(np.zeros((4, 3)), i[b], x[b]) for b in range(2)]),
            linear=((False, True, False),)),
]


def _zero_buffer(shape, dtype):
    """A buffer as equinox's loops make one (jnp.zeros): its tangent is zero,
    as the write-once promise needs (a location's first write replaces a
    zero; the transpose passes the buffer's cotangent through whole)."""
    return broadcast_in_dim(np.zeros((), dtype), shape, ())


examples[maybe_set_p] = [
    # a checkpointed scan's ys buffer, written once per step
    Example("write-once-row", (((), "bool", "ints:1:2"), ((3,), "f32", "normal"), ((), "i32", "indices:4")),
            lambda p, x, i: maybe_set(p, _zero_buffer((4, 3), x.dtype), x, i),
            lambda p, x, i: _np_set(np.zeros((4, 3)), i, x), linear=((False, True, False),)),
    Example("false-steps-negative-index", (((), "bool", "bools"), ((2,), "f32", "normal"), ((), "i32", "ints:-3:0")),
            lambda p, x, i: maybe_set(p, _zero_buffer((3, 2), x.dtype), x, i, makes_false_steps=True) * 2.0,
            lambda p, x, i: _np_set(np.zeros((3, 2)), i, x if p else np.zeros(2)) * 2.0,
            linear=((False, True, False),)),
]


def _np_set(xs, i, x):
    out = np.array(xs, copy=True)
    out[int(i)] = x
    return out


# --------------------------------------------------------------------------
# empty2: JAX's own (jax/_src/lax/lax.py), declared here because equinox's
# loops are where imported programs meet it: JAX's partial evaluation of a
# cond fills the residual slots a branch does not write with
# `empty_like_shaped_array` (empty2, broadcast), so the backward rule of a
# checkpointed while loop whose body holds a cond binds it (the spec's own
# cond partial evaluation writes zeros there: spec/prims_control.py
# _empty_like_type), as does a user's jax.grad of a bounded loop.

empty2_p = primitive("empty2", ["dtype", "memory_space"])
MEMORY_SPACES = {"Device": "device", "Host": "pinned_host", "Any": "any"}     # JAX's MemorySpace names


def empty2(dtype, memory_space="device"):
    """lax_internal.empty2(dtype, memory_space=...): a scalar whose value is never read."""
    return bind(empty2_p, dtype=np.dtype(dtype), memory_space=memory_space)


def _empty2_shape(*, dtype, memory_space):
    """_empty2_abstract_eval: a scalar of `dtype` in `memory_space`."""
    if memory_space not in MEMORY_SPACES.values():
        raise PrimitiveError(empty2_p, f"memory_space {memory_space!r} is not one of {list(MEMORY_SPACES.values())}")
    return [ArrayType((), dtype, "pinned_host" if memory_space == "pinned_host" else None)]


shape_rules[empty2_p] = _empty2_shape


def _empty2_eval(*, dtype, memory_space):
    """_empty2_lower: a zero constant (the value is never read)."""
    return np.zeros((), dtype)


eval_rules[empty2_p] = _empty2_eval


def _empty2_jvp(primals, tangents, *, dtype, memory_space):
    """Nullary: no tangent (JAX registers no rule; none is ever asked for)."""
    return empty2(dtype, memory_space), None


jvp_rules[empty2_p] = _empty2_jvp


def _empty2_batch(args, dims, *, dtype, memory_space):
    """Nullary, so never batched."""
    return empty2(dtype, memory_space), None


batch_rules[empty2_p] = _empty2_batch
jax_facts[empty2_p] = JaxFacts(
    "empty2",
    "lambda dtype, memory_space: lax_internal.empty2_p.bind(dtype=dtype, memory_space=getattr("
    "jax._src.core.MemorySpace, {'device': 'Device', 'pinned_host': 'Host', 'any': 'Any'}[memory_space]))",
    from_jax=lambda p: {"dtype": np.dtype(p["dtype"]), "memory_space": MEMORY_SPACES[p["memory_space"].name]})
examples[empty2_p] = [
    Example("unread-residual-slot", (((3,), "f32", "normal"),),
            lambda x: x + broadcast_in_dim(empty2(x.dtype), x.shape, ()), lambda x: x, linear=((True,),)),
]
