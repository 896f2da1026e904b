"""Reductions, cumulative reductions and sorting (jax/_src/lax/lax.py,
jax/_src/lax/control_flow/loops.py): reduce_min, reduce_prod, reduce_and,
reduce_or, cumsum, cumprod, cummax, cummin, cumlogsumexp, sort, top_k.

One block per primitive, as in spec/prims_special.py. Several JVP rules
of JAX are *programs*: reduce_prod's (`_reduce_prod_jvp_rule`) is the JVP
of a tree of pairwise products, and cumprod/cummax/cummin/cumlogsumexp's
(`_cumulative_jvp_rule`) the JVP of `lax.associative_scan` -- the primal
is recomputed by that scan, not by the primitive. The spec writes the same
programs with its ops (`_reduce_tree`, `associative_scan` below) and emits
their JVP with spec.jvp.jvp_traced, so the equations (and hence what a
backward pass saves) are JAX's:

    >>> import spec
    >>> prog = spec.trace(lambda x: cumprod(x, 0), spec.f32[4])
    >>> res = [str(r) for r in spec.saved_residuals(prog)]   # as jax's saved_residuals lists them
    >>> res[:2], res[4:]
    (['f32[] from a literal', 'f32[] from a literal'], ['f32[2] output of slice', 'f32[2] output of slice', 'f32[1] output of slice', 'f32[1] output of slice', 'f32[0] output of slice', 'f32[0] output of slice', 'f32[1] output of slice', 'f32[1] output of slice'])
"""
from __future__ import annotations

import numpy as np

from spec.arrays import namespace
from spec.batching import moveaxis
from spec.core import (complex_rules, Example, JaxFacts, PrimitiveError, Tracer, Zero, batch_rules, bind, building,
                       eval_rules, examples, jax_facts, jvp_rules, primitive, shape_rules, trace,
                       transpose_rules)
from spec.ir import ArrayType, is_float
from spec.jvp import jvp_traced
from spec.prims_custom import custom_jvp
from spec.prims_elementwise import (_full_like, _lit_like, abs, add, convert_element_type, div, eq, exp,
                                    log1p, lt, max, min, mul, ne, neg, select_n, sub)
from spec.prims_structural import (_reducer_batcher, broadcast_in_dim, concatenate, pad, reduce_sum,
                                   reshape, slice, squeeze, transpose)
from spec.prims_indexing import GatherDimensionNumbers, gather, iota, rev
from spec.prims_call import call
from spec.prims_structural import expand_dims
from spec.semantics import semantics

# --------------------------------------------------------------------------
# shared pieces: the lax helpers JAX's rules are written with


def _axes_shape(prim, kinds):
    """A reduction over distinct `axes`; operand kinds among "float", "int", "bool"."""
    def rule(x: ArrayType, *, axes):
        axes = tuple(axes)
        if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
            raise PrimitiveError(prim, f"axes {axes} must be distinct dims of {x}")
        kind = "float" if is_float(x.dtype) else ("bool" if x.dtype == np.bool_ else "int")
        if kind not in kinds:
            raise PrimitiveError(prim, f"operand dtype {x.dtype} not supported; supported kinds: {kinds}")
        return [ArrayType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]
    return rule


def _lax_reshape(x, new_sizes, dimensions=None):
    """lax.reshape: nothing for the same shape in the same order; otherwise
    one `reshape[dimensions=perm]` (the operand read in the order
    `dimensions`, then reshaped)."""
    perm = tuple(range(x.ndim)) if dimensions is None else tuple(int(d) for d in dimensions)
    if tuple(x.shape) == tuple(new_sizes) and perm == tuple(range(x.ndim)):
        return x
    return reshape(x, new_sizes, perm)


def _slice_in_dim(x, start, limit, stride=1, axis=0):
    """lax.slicing.slice_in_dim: [start:limit:stride] along `axis` (negative
    indices count from the end, None is the end), strides written out."""
    n = x.shape[axis]
    start = 0 if start is None else (start + n if start < 0 else start)
    limit = n if limit is None else (limit + n if limit < 0 else limit)
    lo, hi, st = [0] * x.ndim, list(x.shape), [1] * x.ndim
    lo[axis], hi[axis], st[axis] = start, limit, stride
    return slice(x, lo, hi, st)


def _emit_jvp(fn, primals, tangents):
    """api.jvp(fn, primals, tangents) inside a rule: fn traced at the primals'
    types, its JVP emitted here. Returns (primal outs, tangent outs or None)."""
    with building() as b:
        ins = [b.new_input(p.type) for p in primals]
        out = fn(*ins)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        prog = b.build(ins, outs)
    outs, out_ts = jvp_traced(prog, list(primals), list(tangents))
    return outs, [None if isinstance(t, Zero) else t for t in out_ts]


# ==========================================================================
# reduce_min

reduce_min_p = primitive("reduce_min", ["axes"])


def reduce_min(x, axes):
    """The minimum over `axes`."""
    return bind(reduce_min_p, x, axes=tuple(int(a) for a in axes))


def _reduce_min_eval(x, *, axes):
    xp = namespace(x)
    return xp.result(xp.reduce_min(x, tuple(axes)), x.dtype)


def _reduce_min_jvp(primals, tangents, *, axes):
    """The tangent averaged over the locations of the minimum. JAX
    (ad.defjvp2(reduce_min_p, _reduce_chooser_jvp_rule)):
    shape = [1 if i in axes else d for i, d in enumerate(operand.shape)]
    location_indicators = convert_element_type(_eq_meet(operand, reshape(ans, shape)), g.dtype)
    counts = reduce_sum(location_indicators, axes)
    return div(reduce_sum(mul(g, location_indicators), axes), counts)"""
    (x,), (g,) = primals, tangents
    ans = reduce_min(x, axes)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    location_indicators = convert_element_type(eq(x, reshape(ans, shape)), g.dtype)
    counts = reduce_sum(location_indicators, axes)
    return ans, div(reduce_sum(mul(g, location_indicators), axes), counts)


shape_rules[reduce_min_p] = _axes_shape(reduce_min_p, ("float", "int"))
eval_rules[reduce_min_p] = _reduce_min_eval
jvp_rules[reduce_min_p] = _reduce_min_jvp
batch_rules[reduce_min_p] = _reducer_batcher(reduce_min)        # batching.defreducer
jax_facts[reduce_min_p] = JaxFacts("reduce_min", "lambda x, axes: lax_internal.reduce_min(x, axes)")
examples[reduce_min_p] = [
    Example("reduce_min-axis1", (((3, 4), "f32", "distinct"),), lambda x: reduce_min(x, (1,)),
            lambda x: np.min(x, axis=1)),
    Example("reduce_min-all", (((2, 3), "f32", "distinct"),), lambda x: reduce_min(x, (0, 1)), np.min),
    Example("reduce_min-i32", (((2, 5), "i32", "ints"),), lambda x: reduce_min(x, (0,)),
            lambda x: np.min(x, axis=0)),
]


# ==========================================================================
# reduce_prod

reduce_prod_p = primitive("reduce_prod", ["axes"])


def reduce_prod(x, axes):
    """The product over `axes`."""
    return bind(reduce_prod_p, x, axes=tuple(int(a) for a in axes))


def _reduce_prod_eval(x, *, axes):
    xp = namespace(x)
    return xp.result(xp.reduce_prod(xp.compute(x), tuple(axes)), x.dtype)


def _reduce_tree(x, init, n_out_shape):
    """lax._reduce_jvp's _reduce_tree for one operand and the reducer mul:
    halve axis 0 until it has one element, padding an odd second half with
    the identity `init`, and multiply the halves."""
    while x.shape[0] > 1:
        n = x.shape[0]
        n1 = (n + 1) // 2
        x1, x2 = _slice_in_dim(x, 0, n1), _slice_in_dim(x, n1, None)
        if n - n1 != n1:
            paddings = [(0, 0, 0)] * x.ndim
            paddings[0] = (0, 1, 0)
            x2 = pad(x2, init, paddings)
        x = mul(x1, x2)          # the reducer, vmapped over the kept dims: one mul
    if x.shape[0] == 0:
        return init if not n_out_shape else broadcast_in_dim(init, n_out_shape, ())
    return squeeze(x, (0,))


def _reduce_prod_jvp(primals, tangents, *, axes):
    """JAX (lax.py), the JVP of a product tree:
    _reduce_prod_jvp_rule = _reduce_jvp(lambda x, y: [mul(x, y)], [_const(operand, 1)], ...)
    _reduce_jvp: move the reduced axes to the front, flattened to one
    (reshape(x, (n,) + kept, permutation)), then api.jvp(_reduce_tree, ...)."""
    (x,), (g,) = primals, tangents
    axes = tuple(axes)
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    new_shape = (n,) + tuple(x.shape[i] for i in kept)
    xr, gr = _lax_reshape(x, new_shape, axes + kept), _lax_reshape(g, new_shape, axes + kept)
    out_shape = new_shape[1:]
    (ans,), (t,) = _emit_jvp(lambda a: _reduce_tree(a, _lit_like(x, 1), out_shape), [xr], [gr])
    return ans, t


shape_rules[reduce_prod_p] = _axes_shape(reduce_prod_p, ("float", "int"))
eval_rules[reduce_prod_p] = _reduce_prod_eval
jvp_rules[reduce_prod_p] = _reduce_prod_jvp
batch_rules[reduce_prod_p] = _reducer_batcher(reduce_prod)
jax_facts[reduce_prod_p] = JaxFacts("reduce_prod", "lambda x, axes: lax_internal.reduce_prod(x, axes)")
examples[reduce_prod_p] = [
    Example("reduce_prod-axis0-odd", (((5, 3), "f32", "away_from_zero"),), lambda x: reduce_prod(x, (0,)),
            lambda x: np.prod(x, axis=0), cond=5),
    Example("reduce_prod-middle-axis", (((2, 4, 3), "f32", "away_from_zero"),),
            lambda x: reduce_prod(x, (1,)), lambda x: np.prod(x, axis=1), cond=4),
    Example("reduce_prod-two-axes", (((2, 1, 3), "f32", "normal"),), lambda x: reduce_prod(x, (0, 2)),
            lambda x: np.prod(x, axis=(0, 2)), cond=6),
    Example("reduce_prod-size1-axis", (((1, 3), "f32", "normal"),), lambda x: reduce_prod(x, (0,)),
            lambda x: np.prod(x, axis=0)),
    Example("reduce_prod-i32", (((3, 2), "i32", "ints"),), lambda x: reduce_prod(x, (0,)),
            lambda x: np.prod(x, axis=0)),
]


# ==========================================================================
# reduce_and, reduce_or

reduce_and_p = primitive("reduce_and", ["axes"])
reduce_or_p = primitive("reduce_or", ["axes"])


def reduce_and(x, axes):
    """Logical (bool) or bitwise (int) and over `axes`."""
    return bind(reduce_and_p, x, axes=tuple(int(a) for a in axes))


def reduce_or(x, axes):
    """Logical (bool) or bitwise (int) or over `axes`."""
    return bind(reduce_or_p, x, axes=tuple(int(a) for a in axes))


def _logical_eval(op):
    def rule(x, *, axes):
        return np.asarray(getattr(namespace(x), op)(np.asarray(x), tuple(axes))).astype(x.dtype)
    return rule


def _no_tangent_jvp(fn):
    """Bool or integer outputs carry no tangent (reduce_or's _reduce_or_lin
    gives a zero; reduce_and has no rule: never called on such operands)."""
    def rule(primals, tangents, **params):
        return fn(*primals, **params), None
    return rule


shape_rules[reduce_and_p] = _axes_shape(reduce_and_p, ("bool", "int"))   # _reduce_logical_shape_rule
eval_rules[reduce_and_p] = _logical_eval("reduce_and")
jvp_rules[reduce_and_p] = _no_tangent_jvp(reduce_and)
batch_rules[reduce_and_p] = _reducer_batcher(reduce_and)
jax_facts[reduce_and_p] = JaxFacts("reduce_and", "lambda x, axes: lax.reduce_and(x, axes)")
examples[reduce_and_p] = [
    Example("reduce_and-bools", (((3, 4), "bool", "bools"),), lambda x: reduce_and(x, (1,)),
            lambda x: np.all(x, axis=1)),
    Example("reduce_and-i32-bitwise", (((3, 2), "i32", "ints"),), lambda x: reduce_and(x, (0,)),
            lambda x: np.bitwise_and.reduce(x, axis=0)),
]

shape_rules[reduce_or_p] = _axes_shape(reduce_or_p, ("bool", "int"))
eval_rules[reduce_or_p] = _logical_eval("reduce_or")
jvp_rules[reduce_or_p] = _no_tangent_jvp(reduce_or)
batch_rules[reduce_or_p] = _reducer_batcher(reduce_or)
jax_facts[reduce_or_p] = JaxFacts("reduce_or", "lambda x, axes: lax.reduce_or(x, axes)")
examples[reduce_or_p] = [
    Example("reduce_or-bools", (((3, 4), "bool", "bools"),), lambda x: reduce_or(x, (0, 1)), np.any),
    Example("reduce_or-of-comparison", (((2, 5), "f32", "normal"),), lambda x: reduce_or(x > 1.0, (1,)),
            lambda x: np.any(x > 1.0, axis=1), tangent="zero"),
    Example("reduce_or-i32-bitwise", (((3, 2), "i32", "ints"),), lambda x: reduce_or(x, (0,)),
            lambda x: np.bitwise_or.reduce(x, axis=0)),
]


# ==========================================================================
# the cumulative reductions: shared type, evaluation and batching

def _cumulative_shape(prim, kinds=("float", "int")):
    """loops._cumred_shape_rule and _cumred_dtype_rule: a number operand,
    0 <= axis < ndim; the output has its type."""
    def rule(x: ArrayType, *, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise PrimitiveError(prim, f"axis {axis} is out of bounds for {x}")
        kind = "float" if is_float(x.dtype) else ("bool" if x.dtype == np.bool_ else "int")
        if kind not in kinds:
            raise PrimitiveError(prim, f"{prim.name} does not accept dtype {x.dtype}; supported kinds: {kinds}")
        return [x]
    return rule


def _cumulative_eval(name):
    def rule(x, *, axis, reverse):
        xp = namespace(x)
        return xp.result(xp.cumulative(name, xp.compute(x), int(axis), bool(reverse)), x.dtype)
    return rule


def _cumulative_batch(fn):
    """loops._cumred_batch_rule: the axis past the batch axis shifts by one."""
    def rule(args, dims, *, axis, reverse):
        (x,), (bd,) = args, dims
        return fn(x, axis if axis < bd else axis + 1, reverse), bd
    return rule


def _cumulative_rules(prim, combine, kinds=("float", "int")):
    """The tables a cumulative reduction fills alike: shape, evaluation,
    JAX's associative-scan JVP with `combine()` as combine_fn, and the
    batching rule (the reduction axis shifts past the batch axis)."""
    op = prim.name
    shape_rules[prim] = _cumulative_shape(prim, kinds)
    eval_rules[prim] = _cumulative_eval(op)
    jvp_rules[prim] = _cumulative_jvp(combine)
    batch_rules[prim] = _cumulative_batch(lambda x, axis=0, reverse=False: bind(prim, x, axis=int(axis),
                                                                               reverse=bool(reverse)))


def _cumulative_reference(ufunc):
    def make(axis, reverse=False):
        def ref(x):
            x = np.flip(x, axis) if reverse else x
            out = ufunc.accumulate(x, axis=axis)
            return np.flip(out, axis) if reverse else out
        return ref
    return make


# ==========================================================================
# cumsum

cumsum_p = primitive("cumsum", ["axis", "reverse"])


def cumsum(x, axis=0, reverse=False):
    """Inclusive prefix sums along `axis` (suffix sums if reverse)."""
    return bind(cumsum_p, x, axis=int(axis), reverse=bool(reverse))


def _cumsum_jvp(primals, tangents, *, axis, reverse):
    """Linear: ad.deflinear2(cumsum_p, _cumsum_transpose_rule), the tangent summed alike."""
    (x,), (t,) = primals, tangents
    return cumsum(x, axis, reverse), cumsum(t, axis, reverse)


def _cumsum_transpose(ct, x, *, axis, reverse):
    """loops._cumsum_transpose_rule: [cumsum(t, axis=axis, reverse=not reverse)]."""
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    return [cumsum(ct, axis, not reverse)]


_cumsum_ref = _cumulative_reference(np.add)
shape_rules[cumsum_p] = _cumulative_shape(cumsum_p)
eval_rules[cumsum_p] = _cumulative_eval("cumsum")
jvp_rules[cumsum_p] = _cumsum_jvp
transpose_rules[cumsum_p] = _cumsum_transpose
batch_rules[cumsum_p] = _cumulative_batch(cumsum)
jax_facts[cumsum_p] = JaxFacts("cumsum", "lambda x, axis, reverse: lax.cumsum(x, axis, reverse)")
examples[cumsum_p] = [
    Example(f"cumsum-axis{a}{'-reverse' if r else ''}", (((3, 4), "f32", "normal"),),
            (lambda a, r: lambda x: cumsum(x, a, r))(a, r), _cumsum_ref(a, r), linear=((True,),), cond=4)
    for a in (0, 1) for r in (False, True)
] + [Example("cumsum-i32", (((5,), "i32", "ints"),), lambda x: cumsum(x, 0), _cumsum_ref(0))]


# ==========================================================================
# the JVP of cumprod, cummax, cummin, cumlogsumexp: associative_scan

def _interleave(a, b, axis):
    """loops._interleave: a's and b's elements alternating along `axis`
    (a first), as two interior-padded arrays added."""
    same = a.shape[axis] == b.shape[axis]
    a_pad, b_pad = [(0, 0, 0)] * a.ndim, [(0, 0, 0)] * b.ndim
    a_pad[axis] = (0, 1 if same else 0, 1)
    b_pad[axis] = (1, 0 if same else 1, 1)
    return add(pad(a, _lit_like(a, 0), a_pad), pad(b, _lit_like(b, 0), b_pad))


def associative_scan(fn, x, axis=0, reverse=False):
    """lax.associative_scan(fn, x, reverse, axis) for one array (Blelloch's
    recursion, as JAX writes it): the odd prefixes are the scan of the
    combined adjacent pairs, the even ones combine those with the elements;
    reverse scans the reversed array (lax.rev) and reverses the result."""
    if reverse:
        x = rev(x, (axis,))

    def scan(e):
        n = e.shape[axis]
        if n < 2:
            return e
        reduced = fn(_slice_in_dim(e, 0, -1, 2, axis), _slice_in_dim(e, 1, None, 2, axis))
        odd = scan(reduced)
        if n % 2 == 0:
            even = fn(_slice_in_dim(odd, 0, -1, axis=axis), _slice_in_dim(e, 2, None, 2, axis))
        else:
            even = fn(odd, _slice_in_dim(e, 2, None, 2, axis))
        even = concatenate([_slice_in_dim(e, 0, 1, axis=axis), even], axis)
        return _interleave(even, odd, axis)
    out = scan(x)
    return rev(out, (axis,)) if reverse else out


def _cumulative_jvp(combine):
    """loops._cumulative_jvp_rule: api.jvp(partial(associative_scan, combine_fn,
    axis=axis, reverse=reverse), primals, tangents) -- the primal too is the scan's."""
    def rule(primals, tangents, *, axis, reverse):
        (ans,), (t,) = _emit_jvp(lambda a: associative_scan(combine(), a, axis, reverse), primals, tangents)
        return ans, t
    return rule


# ==========================================================================
# cumprod

cumprod_p = primitive("cumprod", ["axis", "reverse"])


def cumprod(x, axis=0, reverse=False):
    """Inclusive prefix products along `axis` (suffix products if reverse)."""
    return bind(cumprod_p, x, axis=int(axis), reverse=bool(reverse))


_cumprod_ref = _cumulative_reference(np.multiply)
_cumulative_rules(cumprod_p, lambda: mul)      # combine_fn=lax.mul
jax_facts[cumprod_p] = JaxFacts("cumprod", "lambda x, axis, reverse: lax.cumprod(x, axis, reverse)")
examples[cumprod_p] = [
    Example("cumprod-odd-length", (((5,), "f32", "away_from_zero"),), lambda x: cumprod(x, 0),
            _cumprod_ref(0), cond=5),
    Example("cumprod-axis1-even-reverse", (((2, 4), "f32", "away_from_zero"),),
            lambda x: cumprod(x, 1, True), _cumprod_ref(1, True), cond=4),
    Example("cumprod-axis0-reverse-odd", (((3, 2), "f32", "normal"),), lambda x: cumprod(x, 0, True),
            _cumprod_ref(0, True), cond=3),
    Example("cumprod-i32", (((4,), "i32", "ints"),), lambda x: cumprod(x, 0), _cumprod_ref(0)),
]


# ==========================================================================
# cummax, cummin

cummax_p = primitive("cummax", ["axis", "reverse"])
cummin_p = primitive("cummin", ["axis", "reverse"])


def cummax(x, axis=0, reverse=False):
    """Running maxima along `axis` (from the end if reverse)."""
    return bind(cummax_p, x, axis=int(axis), reverse=bool(reverse))


def cummin(x, axis=0, reverse=False):
    """Running minima along `axis` (from the end if reverse)."""
    return bind(cummin_p, x, axis=int(axis), reverse=bool(reverse))


_cummax_ref, _cummin_ref = _cumulative_reference(np.maximum), _cumulative_reference(np.minimum)
_cumulative_rules(cummax_p, lambda: max)       # combine_fn=lax.max
jax_facts[cummax_p] = JaxFacts("cummax", "lambda x, axis, reverse: lax.cummax(x, axis, reverse)")
examples[cummax_p] = [
    Example("cummax-axis0", (((5, 2), "f32", "distinct"),), lambda x: cummax(x, 0), _cummax_ref(0)),
    Example("cummax-axis1-reverse", (((2, 4), "f32", "distinct"),), lambda x: cummax(x, 1, True),
            _cummax_ref(1, True)),
    Example("cummax-i32", (((6,), "i32", "ints"),), lambda x: cummax(x, 0), _cummax_ref(0)),
]

_cumulative_rules(cummin_p, lambda: min)       # combine_fn=lax.min
jax_facts[cummin_p] = JaxFacts("cummin", "lambda x, axis, reverse: lax.cummin(x, axis, reverse)")
examples[cummin_p] = [
    Example("cummin-axis1", (((2, 5), "f32", "distinct"),), lambda x: cummin(x, 1), _cummin_ref(1)),
    Example("cummin-axis0-reverse", (((4, 2), "f32", "distinct"),), lambda x: cummin(x, 0, True),
            _cummin_ref(0, True)),
]


# ==========================================================================
# cumlogsumexp, and jnp.logaddexp (the custom_jvp function its JVP scans with)

def _replace_inf(x):
    """jnp ufuncs' _replace_inf: lax.select(isposinf(x), lax._zeros(x), x)."""
    pred = eq(x, _lit_like(x, np.inf))
    return select_n(pred, x, _full_like(x, 0))


def _logaddexp(x1, x2):
    """jnp.logaddexp's primal (real floats): log(exp(x1) + exp(x2)) as
    max + log1p(exp(-|x1 - x2|)), or x1 + x2 where x1 - x2 is nan."""
    amax = max(x1, x2)
    delta = sub(x1, x2)
    isnan = ne(delta, delta)
    same_infinities = add(x1, x2)
    return select_n(isnan, add(amax, log1p(exp(neg(abs(delta))))), same_infinities)


def _logaddexp_jvp(primals, tangents):
    """jnp.logaddexp's custom JVP (jax/_src/numpy/ufuncs.py):
    primal_out = logaddexp(x1, x2)
    tangent_out = lax.add(lax.mul(t1, exp(lax.sub(_replace_inf(x1), _replace_inf(primal_out)))),
                          lax.mul(t2, exp(lax.sub(_replace_inf(x2), _replace_inf(primal_out)))))"""
    (x1, x2), (t1, t2) = primals, tangents
    out = logaddexp(x1, x2)
    d1 = mul(t1, exp(sub(_replace_inf(x1), _replace_inf(out))))
    return out, add(d1, mul(t2, exp(sub(_replace_inf(x2), _replace_inf(out)))))


_logaddexp.__name__ = "logaddexp"
logaddexp = custom_jvp(_logaddexp, _logaddexp_jvp)     # jax.custom_jvp, as jnp.logaddexp is

cumlogsumexp_p = primitive("cumlogsumexp", ["axis", "reverse"])


def cumlogsumexp(x, axis=0, reverse=False):
    """log(cumsum(exp(x))) along `axis` (from the end if reverse), stably."""
    return bind(cumlogsumexp_p, x, axis=int(axis), reverse=bool(reverse))


def _cumlogsumexp_ref(axis, reverse=False):
    return lambda x: np.log(_cumsum_ref(axis, reverse)(np.exp(x)))


_cumulative_rules(cumlogsumexp_p, lambda: logaddexp, kinds=("float",))     # combine_fn=logaddexp
jax_facts[cumlogsumexp_p] = JaxFacts("cumlogsumexp",
                                     "lambda x, axis, reverse: lax.cumlogsumexp(x, axis, reverse)")
examples[cumlogsumexp_p] = [
    Example("cumlogsumexp-odd-length", (((5,), "f32", "normal"),), lambda x: cumlogsumexp(x, 0),
            _cumlogsumexp_ref(0), cond=5),
    Example("cumlogsumexp-axis1-reverse", (((2, 4), "f32", "normal"),),
            lambda x: cumlogsumexp(x, 1, True), _cumlogsumexp_ref(1, True), cond=4),
]



# ==========================================================================
# top_k

top_k_p = primitive("top_k", ["k", "axis"], multiple_results=True)


def top_k(x, k, axis=-1):
    """The k largest entries along `axis` in decreasing order (the earlier
    index first among equals), and their int32 indices."""
    axis = int(axis) + (x.ndim if int(axis) < 0 else 0)
    return bind(top_k_p, x, k=int(k), axis=axis)


def _top_k_shape(x: ArrayType, *, k, axis):
    """lax._top_k_abstract_eval: rank >= 1, 0 <= axis < rank, 0 <= k <= shape[axis]."""
    if x.ndim == 0:
        raise PrimitiveError(top_k_p, f"operand must have >= 1 dimension, got {x}")
    if not 0 <= axis < x.ndim:
        raise PrimitiveError(top_k_p, f"axis argument out of range: axis={axis} for {x}")
    if not 0 <= k <= x.shape[axis]:
        raise PrimitiveError(top_k_p, f"k={k} must be in [0, {x.shape[axis]}] (the size along axis {axis})")
    if x.dtype == np.bool_:
        raise PrimitiveError(top_k_p, f"operand must be numeric, got {x}")
    shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
    return [ArrayType(shape, x.dtype), ArrayType(shape, np.int32)]


def _top_k_eval(x, *, k, axis):
    values, indices = namespace(x).top_k(x, k, axis)
    return [_as_dtype(values, x.dtype), np.asarray(indices, np.int32)]


def _top_k_jvp(primals, tangents, *, k, axis):
    """The tangent gathered at the top-k indices. JAX (lax.py, _top_k_jvp):
    primals_out = top_k(operand, k, axis=axis)
    gather_indices = reshape(k_idxs, idx_shape + (1,))
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
        operand_batching_dims=tuple(i for i in range(rank) if i != axis),
        start_indices_batching_dims=tuple(i for i in range(rank) if i != axis), start_index_map=(axis,))
    tangent_out = slicing.gather(tangent, gather_indices, dnums, (1,) * rank)
    return primals_out, (tangent_out, ad_util.p2tz(primals_out[1]))"""
    (x,), (t,) = primals, tangents
    values, idxs = top_k(x, k, axis)
    if not semantics().top_k_jvp_batches_its_gather:
        return [values, idxs], [_gather_at_every_index(t, _top_k_old_indices(idxs, axis)), None]
    rank = idxs.ndim
    gather_indices = reshape(idxs, tuple(idxs.shape) + (1,))
    others = tuple(i for i in range(rank) if i != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                   operand_batching_dims=others, start_indices_batching_dims=others)
    return [values, idxs], [gather(t, gather_indices, dnums, (1,) * rank), None]


def _top_k_old_indices(idxs, axis: int):
    """Before jax 0.4.35 (spec.semantics: top_k_jvp_batches_its_gather;
    jax 0.4.25's lax.py _top_k_jvp, whose top_k reduces the last axis):
    for i < rank - 1: broadcast_in_dim(iota(idx_shape[i]), idx_shape + (1,), (i,))
    then reshape(k_idxs, idx_shape + (1,)), concatenated along the last dim."""
    shape = tuple(idxs.shape) + (1,)
    return [reshape(idxs, shape) if i == axis else broadcast_in_dim(iota(np.int32, (idxs.shape[i],)), shape, (i,))
            for i in range(idxs.ndim)]


def _gather_at_every_index(t, indices: list):
    """t[concatenate(indices, -1)]: one element per index tuple, every
    dimension collapsed (gather's PROMISE_IN_BOUNDS, as the old top_k and
    approx_top_k JVP rules bind it)."""
    rank = t.ndim
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(rank)),
                                   start_index_map=tuple(range(rank)))
    # (one index array is not concatenated: lax.concatenate returns a single operand as it is)
    at = indices[0] if len(indices) == 1 else concatenate(indices, rank)
    return gather(t, at, dnums, (1,) * rank, mode="promise_in_bounds")


def _top_k_batch(args, dims, *, k, axis):
    """lax._top_k_batch_rule: the axis shifts past the batch axis; both outputs keep it."""
    (x,), (bd,) = args, dims
    return top_k(x, k, axis + 1 if bd <= axis else axis), [bd, bd]


shape_rules[top_k_p] = _top_k_shape
eval_rules[top_k_p] = _top_k_eval
jvp_rules[top_k_p] = _top_k_jvp
batch_rules[top_k_p] = _top_k_batch
jax_facts[top_k_p] = JaxFacts("top_k", "lambda x, k, axis: lax.top_k(x, k, axis=axis)")


def _top_k_ref(k, axis):
    def ref(x):
        order = np.argsort(-np.moveaxis(x, axis, -1), axis=-1, kind="stable")[..., :k]
        vals = np.take_along_axis(np.moveaxis(x, axis, -1), order, axis=-1)
        return np.moveaxis(vals, -1, axis), np.moveaxis(order, -1, axis).astype(np.int32)
    return ref


examples[top_k_p] = [
    Example("top_k-last-axis", (((3, 5), "f32", "distinct"),), lambda x: top_k(x, 2), _top_k_ref(2, 1)),
    Example("top_k-axis0", (((4, 3), "f32", "distinct"),), lambda x: top_k(x, 3, axis=0), _top_k_ref(3, 0)),
    Example("top_k-1d-all", (((4,), "f32", "distinct"),), lambda x: top_k(x, 4), _top_k_ref(4, 0)),
    Example("top_k-i32-ties-first-index", (((2, 6), "i32", "ints"),), lambda x: top_k(x, 3),
            _top_k_ref(3, 1)),
]


# ==========================================================================
# approx_top_k (lax.approx_max_k, lax.approx_min_k)

approx_top_k_p = primitive("approx_top_k", ["k", "reduction_dimension", "recall_target", "is_max_k",
                                            "reduction_input_size_override", "aggregate_to_topk"],
                           multiple_results=True)


def approx_max_k(x, k, reduction_dimension=-1, recall_target=0.95, reduction_input_size_override=-1,
                 aggregate_to_topk=True):
    """lax.approx_max_k: the k largest entries along `reduction_dimension`
    and their int32 indices. Approximate on TPU only; on CPU and GPU XLA
    computes it exactly (ApproxTopK's fallback: a sort), in decreasing
    order, the earlier index first among equals, as top_k."""
    return bind(approx_top_k_p, x, k=int(k), reduction_dimension=int(reduction_dimension),
                recall_target=float(recall_target), is_max_k=True,
                reduction_input_size_override=int(reduction_input_size_override),
                aggregate_to_topk=bool(aggregate_to_topk))


def approx_min_k(x, k, reduction_dimension=-1, recall_target=0.95, reduction_input_size_override=-1,
                 aggregate_to_topk=True):
    """lax.approx_min_k: the k smallest entries, in increasing order (exact off TPU)."""
    return bind(approx_top_k_p, x, k=int(k), reduction_dimension=int(reduction_dimension),
                recall_target=float(recall_target), is_max_k=False,
                reduction_input_size_override=int(reduction_input_size_override),
                aggregate_to_topk=bool(aggregate_to_topk))


def _approx_top_k_axis(x: ArrayType, reduction_dimension: int) -> int:
    return reduction_dimension + (x.ndim if reduction_dimension < 0 else 0)


def _approx_top_k_shape(x: ArrayType, *, k, reduction_dimension, recall_target, is_max_k,
                        reduction_input_size_override, aggregate_to_topk):
    """ann._approx_top_k_abstract_eval: k > 0, rank >= 1, k <= the reduced
    dim's size, a floating operand; the reduced dim becomes k. With
    aggregate_to_topk=False its size is XLA's
    ApproxTopKReductionOutputSize (the TPU algorithm's bins), which the
    spec does not model."""
    p = approx_top_k_p
    if k <= 0:
        raise PrimitiveError(p, f"k must be positive, got {k}")
    if x.ndim == 0:
        raise PrimitiveError(p, f"approx_top_k operand must have >= 1 dimension, got {x}")
    axis = _approx_top_k_axis(x, reduction_dimension)
    if not 0 <= axis < x.ndim:
        raise PrimitiveError(p, f"reduction_dimension={reduction_dimension} out of range for {x}")
    if x.shape[axis] < k:
        raise PrimitiveError(p, f"k must be smaller than the size of reduction_dim {x.shape[axis]}, got {k}")
    if not is_float(x.dtype):
        raise PrimitiveError(p, f"operand must be a floating type, got {x}")
    if not aggregate_to_topk:
        raise PrimitiveError(p, "aggregate_to_topk=False (an output of XLA's approximate bin size) is not modelled")
    shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
    return [ArrayType(shape, x.dtype), ArrayType(shape, np.int32)]


def _approx_top_k_eval(x, *, k, reduction_dimension, is_max_k, **_):
    """top_k's order, of -x for the smallest (the earlier index first among equals)."""
    axis = _approx_top_k_axis(x, reduction_dimension)
    _, indices = namespace(x).top_k(x if is_max_k else -np.asarray(x), k, axis)
    values = np.take_along_axis(np.asarray(x), np.asarray(indices), axis)
    return [_as_dtype(values, x.dtype), np.asarray(indices, np.int32)]


def _take_along_axis(arr, indices, axis: int):
    """jnp.take_along_axis(arr, indices, axis) where `indices` has arr's
    shape but along `axis` (jax 0.10.2, jax/_src/numpy/indexing.py): a jit
    named take_along_axis that wraps negative indices (lt, add, select_n),
    appends a unit index dim, and gathers one element per index with the
    other dims as batching dims, out of bounds filled (FILL_OR_DROP, NaN)."""
    def body(a, i):
        size = np.int32(a.shape[axis])
        wrapped = select_n(lt(i, np.int32(0)), i, add(i, size))
        others = tuple(d for d in range(a.ndim) if d != axis)
        dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                       operand_batching_dims=others, start_indices_batching_dims=others)
        return gather(a, reshape(wrapped, tuple(i.shape) + (1,)), dnums, (1,) * a.ndim, mode="fill")
    return call(trace(body, arr.type, indices.type), arr, indices, name="take_along_axis")[0]


def _approx_top_k_jvp(primals, tangents, **params):
    """JAX (ann.py, _approx_top_k_jvp), which binds the primitive again:
    val_out, arg_out = approx_max_k(operand, ...)   # or approx_min_k
    tangent_out = p2tz(val_out) if tangent is Zero else
                  take_along_axis(tangent, arg_out, axis=reduction_dimension)
    return (val_out, arg_out), (tangent_out, p2tz(arg_out))"""
    (x,), (t,) = primals, tangents
    values, indices = bind(approx_top_k_p, x, **params)
    axis = _approx_top_k_axis(x.type, params["reduction_dimension"])
    if not semantics().approx_top_k_jvp_takes_along_axis:
        return [values, indices], [_gather_at_every_index(t, _approx_top_k_old_indices(t, indices, axis)), None]
    return [values, indices], [_take_along_axis(t, indices, axis), None]


def _approx_top_k_old_indices(t, indices, axis: int):
    """Before jax 0.7.1 (spec.semantics: approx_top_k_jvp_takes_along_axis;
    jax 0.6.2's ann.py _approx_top_k_jvp): `tangent[idx]`, which jnp
    indexing lowers (measured on 0.4.25, 0.4.36, 0.6.2) to
    iotas = [broadcasted_iota(int32, arg_shape, i) for i in range(rank)]
    idx_i = arg_out if i == reduction_dimension else iotas[i]
    select_n(lt(idx_i, 0), idx_i, add(idx_i, t.shape[i]))      # each i in turn
    broadcast_in_dim(., arg_shape + (1,), range(rank))          # each i in turn
    (the reduction dimension's iota is dead)."""
    shape = tuple(indices.shape)
    iotas = [iota(np.int32, shape, i) for i in range(len(shape))]
    return _jnp_indices(t, [indices if i == axis else iotas[i] for i in range(len(shape))])


def _jnp_indices(t, ids: list) -> list:
    """The index arrays `ids` (one per leading dimension k of t) as jnp
    indexing `t[tuple(ids)]` makes them gather indices: each wrapped
    (`select_n(lt(i, 0), i, add(i, t.shape[k]))`), then those not of the
    broadcast shape s broadcast to it (jnp.broadcast_arrays, trailing dims
    aligned; measured on 0.4.36 with lu's old JVP), then each broadcast to
    s + (1,)."""
    shape = tuple(np.broadcast_shapes(*(tuple(d.shape) for d in ids)))
    wrapped = [select_n(lt(d, np.int32(0)), d, add(d, np.int32(t.shape[i]))) for i, d in enumerate(ids)]
    common = [w if tuple(w.shape) == shape else
              broadcast_in_dim(w, shape, tuple(range(len(shape) - w.ndim, len(shape)))) for w in wrapped]
    return [broadcast_in_dim(w, shape + (1,), tuple(range(len(shape)))) for w in common]


def _approx_top_k_batch(args, dims, *, reduction_dimension, **params):
    """ann._approx_top_k_batch_rule: reduction_dimension indexes the dims
    other than the batch dim (`dim_map[reduction_dimension]`, a negative
    one from the end); both outputs keep the batch dim."""
    (x,), (bd,) = args, dims
    dim_map = [d for d in range(x.ndim) if d != bd]
    return bind(approx_top_k_p, x, reduction_dimension=dim_map[reduction_dimension], **params), [bd, bd]


shape_rules[approx_top_k_p] = _approx_top_k_shape
eval_rules[approx_top_k_p] = _approx_top_k_eval
jvp_rules[approx_top_k_p] = _approx_top_k_jvp
batch_rules[approx_top_k_p] = _approx_top_k_batch
jax_facts[approx_top_k_p] = JaxFacts(
    "approx_top_k", "lambda x, k, reduction_dimension, recall_target, is_max_k, reduction_input_size_override, "
    "aggregate_to_topk: (lax.approx_max_k if is_max_k else lax.approx_min_k)(x, k, reduction_dimension, "
    "recall_target, reduction_input_size_override=reduction_input_size_override, "
    "aggregate_to_topk=aggregate_to_topk)")


def _approx_top_k_ref(k, axis, largest):
    def ref(x):
        moved = np.moveaxis(x, axis, -1)
        order = np.argsort(-moved if largest else moved, axis=-1, kind="stable")[..., :k]
        vals = np.take_along_axis(moved, order, axis=-1)
        return np.moveaxis(vals, -1, axis), np.moveaxis(order, -1, axis).astype(np.int32)
    return ref


examples[approx_top_k_p] = [
    Example("approx_max_k-last-axis", (((3, 5), "f32", "distinct"),), lambda x: approx_max_k(x, 2),
            _approx_top_k_ref(2, 1, True)),
    Example("approx_min_k-axis0", (((4, 3), "f32", "distinct"),),
            lambda x: approx_min_k(x, 3, reduction_dimension=0), _approx_top_k_ref(3, 0, False)),
    Example("approx_max_k-3d-middle", (((2, 4, 3), "f32", "distinct"),),
            lambda x: approx_max_k(x, 2, reduction_dimension=-2), _approx_top_k_ref(2, 1, True)),
]


# ==========================================================================
# sort

sort_p = primitive("sort", ["dimension", "is_stable", "num_keys"], multiple_results=True)


def sort(operands, dimension=-1, is_stable=True, num_keys=1):
    """lax.sort: every operand permuted along `dimension` by the order that
    sorts the first `num_keys` lexicographically (ties keep their order).
    One operand gives one array, a sequence a list."""
    single = isinstance(operands, (Tracer, np.ndarray))
    ops = [operands] if single else list(operands)
    dimension = int(dimension) + (ops[0].ndim if int(dimension) < 0 else 0)
    outs = bind(sort_p, *ops, dimension=dimension, is_stable=bool(is_stable), num_keys=int(num_keys))
    return outs[0] if single else outs


def _sort_shape(*xs: ArrayType, dimension, is_stable, num_keys):
    """lax._sort_abstract_eval: equal shapes; and 0 <= dimension < rank,
    1 <= num_keys <= len(operands) (lax.sort's checks)."""
    if not xs:
        raise PrimitiveError(sort_p, "needs at least one operand")
    if any(x.shape != xs[0].shape for x in xs):
        raise PrimitiveError(sort_p, f"Arguments to sort must have equal shapes, got {list(xs)}")
    if not 0 <= dimension < xs[0].ndim:
        raise PrimitiveError(sort_p, f"dimension {dimension} out of range for {xs[0]}")
    if not 1 <= num_keys <= len(xs):
        raise PrimitiveError(sort_p, f"num_keys={num_keys} must be in [1, {len(xs)}]")
    return list(xs)


def _sort_eval(*xs, dimension, is_stable, num_keys):
    """A stable sort in both cases (with is_stable=False XLA may order ties otherwise)."""
    outs = namespace(*xs[:num_keys]).sort([np.asarray(x) for x in xs], dimension, num_keys)
    return [_as_dtype(o, x.dtype) for o, x in zip(outs, xs)]


def _as_dtype(value, dtype):
    """A numeric result in `dtype`; symbolic expressions stay as they are."""
    value = np.asarray(value)
    return value if value.dtype == object else value.astype(dtype)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    """Sort an iota along, and gather each tangent with the permutation. JAX (lax.py, _sort_jvp):
    index_dtype = lax_utils.int_dtype_for_shape(shape, signed=False)       # uint32
    sorted_primals_and_idx = sort_p.bind(*primals, broadcasted_iota(index_dtype, shape, dimension), ...)
    batch_dims = tuple(np.delete(np.arange(len(shape)), dimension))
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(dimension,),
        start_index_map=(dimension,), operand_batching_dims=batch_dims, start_indices_batching_dims=batch_dims)
    idx = expand_dims(sorted_primals_and_idx[-1], (len(shape),))
    tangents_out = [t if type(t) is ad_util.Zero else gather(t, idx, dnums, (1,) * len(shape),
                    mode=GatherScatterMode.PROMISE_IN_BOUNDS) for t in tangents]"""
    shape = tuple(primals[0].shape)
    if not semantics().sort_jvp_gathers_along_its_dimension:
        return _sort_old_jvp(primals, tangents, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    *outs, perm = bind(sort_p, *primals, iota(np.uint32, shape, dimension), dimension=dimension,
                       is_stable=is_stable, num_keys=num_keys)
    batch_dims = tuple(i for i in range(len(shape)) if i != dimension)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(dimension,),
                                   start_index_map=(dimension,), operand_batching_dims=batch_dims,
                                   start_indices_batching_dims=batch_dims)
    idx = expand_dims(perm, (len(shape),))
    return outs, [None if isinstance(t, Zero) else
                  gather(t, idx, dnums, (1,) * len(shape), mode="promise_in_bounds") for t in tangents]


def _sort_old_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    """Before jax 0.4.38 (spec.semantics: sort_jvp_gathers_along_its_dimension;
    jax 0.4.36's lax.py _sort_jvp):
    iotas = [broadcasted_iota(np.int64, shape, dim) for dim in range(rank)]   # int32 without x64
    sorted_primals_and_idx = sort_p.bind(*primals, iotas[dimension], ...)
    idx = tuple(sorted_primals_and_idx[-1] if i == dimension else iotas[i] for i in range(rank))
    tangents_out = tuple(t if type(t) is ad_util.Zero else t[idx] for t in tangents)
    with `t[idx]` lowered by jnp indexing for each tangent as approx_top_k's
    old rule is (`_jnp_indices`, `_gather_at_every_index`)."""
    shape = tuple(primals[0].shape)
    iotas = [iota(np.int32, shape, i) for i in range(len(shape))]
    *outs, perm = bind(sort_p, *primals, iotas[dimension], dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)
    ids = [perm if i == dimension else iotas[i] for i in range(len(shape))]
    return outs, [None if isinstance(t, Zero) else _gather_at_every_index(t, _jnp_indices(t, ids))
                  for t in tangents]


def _sort_batch(args, dims, *, dimension, is_stable, num_keys):
    """lax._sort_batch_rule: every operand takes the first batched operand's
    batch axis (unbatched ones broadcast to its shape), the sorted dimension
    shifts past it."""
    proto, bd = next((a, d) for a, d in zip(args, dims) if d is not None)
    new = [broadcast_in_dim(a, proto.shape, [i for i in range(proto.ndim) if i != bd]) if d is None
           else moveaxis(a, d, bd) for a, d in zip(args, dims)]
    outs = sort(new, dimension + (bd <= dimension), is_stable, num_keys)
    return outs, [bd] * len(outs)


shape_rules[sort_p] = _sort_shape
eval_rules[sort_p] = _sort_eval
jvp_rules[sort_p] = _sort_jvp
batch_rules[sort_p] = _sort_batch
jax_facts[sort_p] = JaxFacts("sort", "lambda *xs, dimension, is_stable, num_keys: lax.sort(xs, "
                                     "dimension=dimension, is_stable=is_stable, num_keys=num_keys)")


def _sort_ref(dimension, num_keys=1):
    """numpy's stable lexsort (the last key of np.lexsort is the primary one)."""
    def ref(*xs):
        moved = [np.moveaxis(x, dimension, -1) for x in xs]
        flat = [m.reshape(-1, m.shape[-1]) for m in moved]
        perm = np.stack([np.lexsort([f[r] for f in reversed(flat[:num_keys])])
                         for r in range(flat[0].shape[0])]).reshape(moved[0].shape)
        outs = [np.moveaxis(np.take_along_axis(m, perm, -1), -1, dimension) for m in moved]
        return outs if len(xs) > 1 else outs[0]
    return ref


examples[sort_p] = [
    Example("sort-last-dim", (((3, 5), "f32", "distinct"),), lambda x: sort(x), _sort_ref(1)),
    Example("sort-dim0", (((4, 3), "f32", "distinct"),), lambda x: sort(x, dimension=0), _sort_ref(0)),
    Example("sort-two-operands-one-key", (((2, 5), "f32", "distinct"), ((2, 5), "f32", "normal")),
            lambda k, v: tuple(sort((k, v), dimension=1)), _sort_ref(1)),
    # ties in the first key (i32) broken by the second (f32), stably
    Example("sort-two-keys-i32-first", (((6,), "i32", "ints"), ((6,), "f32", "distinct")),
            lambda k, v: tuple(sort((k, v), num_keys=2)), _sort_ref(0, 2)),
    Example("sort-key-i32-carries-f32", (((6,), "i32", "ints"), ((6,), "f32", "normal")),
            lambda k, v: tuple(sort((k, v))), _sort_ref(0)),
    Example("sort-unstable-distinct", (((5,), "f32", "distinct"),), lambda x: sort(x, is_stable=False),
            _sort_ref(0)),
]


# cumsum is linear and holds for complex values (its transpose does not conjugate)
complex_rules.add(cumsum_p)
