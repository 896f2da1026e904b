"""Dense linear algebra (jax 0.10.2: jax/_src/lax/linalg.py): cholesky,
triangular_solve, lu and lu_pivots_to_permutation -- the primitives that
`jnp.linalg.cholesky`, `jax.scipy.linalg.cho_factor` / `cho_solve` /
`solve_triangular` and the LU behind `jnp.linalg.solve` / `inv` / `det` /
`slogdet` bind.

Every rule is JAX's, in JAX's shape: a JVP rule emits the primitives its
JAX rule emits (the lax helpers `_tril`, `_triu`, `_eye`, `lax._tri`,
`batch_matmul` and jnp's integer indexing are written below with the
primitives they bind in 0.10.2), so that what a backward pass saves under
remat is what JAX saves. Batching is JAX's `expand_dims_batcher` (batch
axes moved to the front) except for triangular_solve's own rule.
Evaluation is numpy in float64, rounded to the operand dtype; real dtypes
only (complex ones are refused).

    >>> import spec
    >>> prog = spec.trace(lambda a: cholesky(a), spec.f32[2, 2])
    >>> [e.primitive.name for e in prog.eqns]           # lax.linalg.cholesky: symmetrize, factor, _tril
    ['transpose', 'add', 'div', 'cholesky', 'iota', 'add', 'iota', 'ge', 'broadcast_in_dim', 'select_n']
    >>> for r in spec.saved_residuals(prog):            # as jax's saved_residuals lists them
    ...     print(r)
    f32[] from a literal
    f32[2,2] output of select_n
    bool[2,2] output of ge
    f32[2,2] output of broadcast_in_dim
    f32[2,2] output of add
    bool[2,2] output of ge
    f32[2,2] output of broadcast_in_dim

The residuals: the factor L (for both triangular solves and the product),
_tril's masks and zeros and phi's 1 + I, each saved as JAX saves them.
"""
from __future__ import annotations

import numpy as np

from spec.arrays import SymbolicError
from spec.batching import bdim_at_front, moveaxis
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, cost_rules,
                       eval_program_traced, eval_rules, examples, is_undefined, jax_facts, jvp_rules,
                       primitive, shape_rules, trace, transpose_rules)
from spec.ir import ArrayType, DTYPES
from spec.prims_elementwise import (_full_like, add, add_tangents, convert_element_type, div, eq, ge,
                                    lt, neg, select_n)
from spec.prims_indexing import GatherDimensionNumbers, gather, iota
from spec.prims_reductions import _jnp_indices
from spec.prims_structural import (broadcast_in_dim, concatenate, dot_general, expand_dims, pad, reshape, squeeze,
                                   transpose)
from spec.prims_structural import slice as slice_op
from spec.semantics import semantics

_HIGHEST = ("HIGHEST", "HIGHEST")
# LAPACK (CPU) and cuSOLVER (GPU) factor float32 and float64 only: JAX's
# dtype rule accepts float16/bfloat16 but no CPU/GPU lowering binds them
_LAPACK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_FLOAT_DTYPES = tuple(np.dtype(DTYPES[n]) for n in ("f16", "bf16", "f32", "f64"))


# ==========================================================================
# shared pieces: JAX's shape checks and the lax helpers its rules call

def _check_matrix(prim, x: ArrayType, dtypes, what="operand", square=True):
    """linalg_shape_rule with rank 2 and the primitive's dtype rule: a
    batch of (square) matrices of one of `dtypes`."""
    if x.dtype not in dtypes:
        raise PrimitiveError(prim, f"{what} dtype {x.dtype} is not supported; supported: "
                                   f"{[str(d) for d in dtypes]} (complex dtypes are not modelled)")
    if x.ndim < 2:
        raise PrimitiveError(prim, f"{what} must have rank at least 2, got {x}")
    if square and x.shape[-1] != x.shape[-2]:
        raise PrimitiveError(prim, f"{what} must be a batch of square matrices, got {x}")


def _per_matrix(fn, a, out_shapes):
    """`fn` (one matrix -> a tuple of arrays of the core shapes `out_shapes`)
    on each matrix of a (..., m, n), the results stacked back on a's batch dims."""
    batch = a.shape[:-2]
    results = [fn(x) for x in a.reshape((-1,) + a.shape[-2:])]
    return [np.stack([r[i] for r in results]).reshape(batch + tuple(s)) if results
            else np.zeros(batch + tuple(s)) for i, s in enumerate(out_shapes)]


def _float64(prim, x):
    """The operand in float64 (SymbolicError for symbolic operands: these
    factorizations have no symbolic evaluation here)."""
    x = np.asarray(x)
    if x.dtype == object:
        raise SymbolicError(f"{prim.name}: no symbolic evaluation (a LAPACK factorization)")
    return x.astype(np.float64)


def _tri(shape, k):
    """lax._tri(bool, shape, k): i + k >= j, as iota, add, iota, ge."""
    return ge(add(iota(np.int32, shape, 0), np.int32(k)), iota(np.int32, shape, 1))


def _eye(dtype, shape, offset=0):
    """lax._eye: (i + offset == j) converted to `dtype`."""
    return convert_element_type(eq(add(iota(np.int32, shape, 0), np.int32(offset)),
                                   iota(np.int32, shape, 1)), dtype)


def _broadcast_mask(mask, shape):
    """lax.broadcast(mask, batch dims): nothing without batch dims."""
    if len(shape) == mask.ndim:
        return mask
    return broadcast_in_dim(mask, shape, tuple(range(len(shape) - mask.ndim, len(shape))))


def _tril(m, k=0):
    """linalg._tril: select(broadcast(_tri(k)), m, full_like(m, 0))."""
    mask = _broadcast_mask(_tri(m.shape[-2:], k), m.shape)
    return select_n(mask, _full_like(m, 0), m)


def _triu(m, k=0):
    """linalg._triu: select(broadcast(_tri(k - 1)), full_like(m, 0), m)."""
    mask = _broadcast_mask(_tri(m.shape[-2:], k - 1), m.shape)
    return select_n(mask, m, _full_like(m, 0))


def _T(x):
    """linalg._T: the last two axes swapped (_H on real values: .conj() binds nothing)."""
    return transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _batch_matmul(x, y, precision=_HIGHEST):
    """lax.batch_matmul (lax.dot for matrices): contract x's last axis with
    y's second-to-last, leading axes batch dims; preferred_element_type None."""
    batch = tuple(range(x.ndim - 2))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), (batch, batch)), precision=precision)


def _jnp_matmul_highest(x, y):
    """`x @ y` under default_matmul_precision("highest"), x and y of equal
    batch dims: jnp.matmul's dot_general contracting x's last axis with y's
    second-to-last, the leading axes batch dims, preferred_element_type the
    result dtype."""
    batch = tuple(range(x.ndim - 2))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), (batch, batch)), precision=_HIGHEST,
                       preferred_element_type=x.dtype)


def _expand_dims_batch(prim):
    """batching.expand_dims_batcher: every operand's batch axis moved to the
    front (unbatched ones broadcast), the primitive bound, outputs batched at 0."""
    def rule(args, dims, **params):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        out = bind(prim, *[bdim_at_front(a, d, size) for a, d in zip(args, dims)], **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    rule.__doc__ = f"batching.expand_dims_batcher for {prim.name}: batch axes to the front."
    return rule


# ==========================================================================
# cholesky

cholesky_p = primitive("cholesky")


def cholesky(x, symmetrize_input=True):
    """lax.linalg.cholesky: L with x = L L^T, L lower triangular. With
    `symmetrize_input`, x is first (x + x^T) / 2 (so that the JVP, which
    assumes a symmetric tangent, is the derivative); the factor is _tril'd."""
    if symmetrize_input:
        x = div(add(x, _T(x)), np.asarray(2, x.dtype))
    return _tril(cholesky_raw(x))


def cholesky_raw(x):
    """cholesky_p.bind(x): the factor in the lower triangle, the operand's
    strictly upper triangle left as it is (LAPACK potrf)."""
    return bind(cholesky_p, x)


def _cholesky_shape(x):
    """_cholesky_shape_rule: a batch of square float matrices; the output's type."""
    _check_matrix(cholesky_p, x, _LAPACK_DTYPES)
    return [x]


shape_rules[cholesky_p] = _cholesky_shape


def _cholesky_eval(x):
    """Per matrix: L of the symmetric matrix read from x's lower triangle
    (float64, rounded), x's strictly upper triangle kept (potrf works in
    place); a matrix that is not positive definite gives all NaN (JAX's
    `_replace_not_ok_with_nan` on potrf's info)."""
    a = _float64(cholesky_p, x)

    def one(m):
        lower = np.tril(m)
        try:
            factor = np.linalg.cholesky(lower + np.tril(m, -1).T)
        except np.linalg.LinAlgError:
            return np.full_like(m, np.nan)
        out = factor + np.triu(m, 1)
        return out if np.all(np.isfinite(np.diagonal(factor))) else np.full_like(m, np.nan)
    return _per_matrix(lambda m: (one(m),), a, [a.shape[-2:]])[0].astype(x.dtype)


eval_rules[cholesky_p] = _cholesky_eval


def _cholesky_jvp(primals, tangents):
    """linalg._cholesky_jvp_rule (arXiv:1602.07527): L = _tril(cholesky(x));
    L_dot = L phi(L^{-1} sigma_dot L^{-T}), phi(X) = _tril(X) / (1 + I)
    (the diagonal halved), two triangular solves and a HIGHEST batch_matmul."""
    (x,), (sigma_dot,) = primals, tangents
    L = _tril(cholesky_raw(x))

    def phi(X):
        l = _tril(X)
        d = add(np.asarray(1, X.dtype), _eye(X.dtype, (X.shape[-1], X.shape[-1])))
        if l.ndim > 2:                      # lax.expand_dims(..., range(l.ndim - 2))
            d = broadcast_in_dim(d, (1,) * (l.ndim - 2) + d.shape, (l.ndim - 2, l.ndim - 1))
        return div(l, d)

    tmp = triangular_solve(L, sigma_dot, left_side=False, transpose_a=True, conjugate_a=True, lower=True)
    L_dot = _batch_matmul(L, phi(triangular_solve(L, tmp, left_side=True, transpose_a=False, lower=True)))
    return L, L_dot


jvp_rules[cholesky_p] = _cholesky_jvp
# FLOPs for spec.explain's recompute cost: n^3 / 3 per matrix (potrf)
cost_rules[cholesky_p] = lambda x: int(np.prod(x.shape[:-2])) * x.shape[-1] ** 3 // 3
batch_rules[cholesky_p] = _expand_dims_batch(cholesky_p)
jax_facts[cholesky_p] = JaxFacts("cholesky", "lambda x: lax.linalg.cholesky_p.bind(x)")


def _sym(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


examples[cholesky_p] = [
    Example("spd", (((3, 3), "f32", "spd"),), cholesky, lambda x: np.linalg.cholesky(_sym(x))),
    Example("batched-spd", (((2, 4, 4), "f32", "spd"),), cholesky, lambda x: np.linalg.cholesky(_sym(x))),
]
# (no Example with symmetrize_input=False: JAX's JVP rule is the derivative
# only along symmetric tangents, which finite differences of a function
# reading one triangle do not take; tests/test_prims_linalg.py checks it)


# ==========================================================================
# triangular_solve

_TRSM_PARAMS = ("left_side", "lower", "transpose_a", "conjugate_a", "unit_diagonal")
triangular_solve_p = primitive("triangular_solve", _TRSM_PARAMS)


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
    """lax.linalg.triangular_solve: X with op(A) X = B (left_side) or
    X op(A) = B, op(A) = A or A^T (`transpose_a`), A read from its `lower`
    or upper triangle, its diagonal taken as ones with `unit_diagonal`.
    As the wrapper: conjugate_a is dropped for real A (every dtype here), a
    b of one rank less is a vector (a trailing/penultimate axis added and
    taken off again)."""
    del conjugate_a                         # `conjugate_a and issubdtype(a.dtype, complexfloating)`
    singleton = np.ndim(b) == np.ndim(a) - 1
    if singleton:
        b = broadcast_in_dim(b, _insert(b.shape, -1 if left_side else -2), _kept_dims(b.ndim, left_side))
    out = triangular_solve_raw(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                               conjugate_a=False, unit_diagonal=unit_diagonal)
    if singleton:                           # out[..., 0] or out[..., 0, :]: one squeeze
        out = squeeze(out, (out.ndim - 1,) if left_side else (out.ndim - 2,))
    return out


def _insert(shape, axis):
    shape = list(shape)
    shape.insert(len(shape) + 1 + axis if axis < 0 else axis, 1)
    return tuple(shape)


def _kept_dims(ndim, left_side):
    """lax.expand_dims(b, (-1,)) or (-2,): the dims b keeps."""
    return tuple(range(ndim)) if left_side else tuple(range(ndim - 1)) + (ndim,)


def triangular_solve_raw(a, b, *, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                         unit_diagonal=False):
    """triangular_solve_p.bind, the params as given (conjugate_a changes
    nothing on real values)."""
    return bind(triangular_solve_p, a, b, left_side=bool(left_side), lower=bool(lower),
                transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                unit_diagonal=bool(unit_diagonal))


def _triangular_solve_shape(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """_triangular_solve_shape_rule and the dtype rule (one float dtype):
    a (..., m, m), b (..., m, n) if left_side else (..., n, m), the same
    batch dims (JAX's shape rule checks only their number; XLA needs them
    equal); the output has b's type."""
    p = triangular_solve_p
    for name, v in zip(_TRSM_PARAMS, (left_side, lower, transpose_a, conjugate_a, unit_diagonal)):
        if not isinstance(v, (bool, np.bool_)):
            raise PrimitiveError(p, f"{name} must be a bool, got {v!r}")
    _check_matrix(p, a, _FLOAT_DTYPES, "a")
    _check_matrix(p, b, _FLOAT_DTYPES, "b", square=False)
    if a.dtype != b.dtype:
        raise PrimitiveError(p, f"a and b must have one dtype, got {a} and {b}")
    if a.shape[:-2] != b.shape[:-2]:
        raise PrimitiveError(p, f"a and b must have the same batch dims, got {a} and {b}")
    if a.shape[-1] != b.shape[-2 if left_side else -1]:
        raise PrimitiveError(p, f"incompatible shapes {a} and {b} (left_side={left_side})")
    return [b]


shape_rules[triangular_solve_p] = _triangular_solve_shape


def _op_a(a, lower, transpose_a, unit_diagonal):
    """op(A) as a dense float64 matrix batch, and whether it is lower triangular."""
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = t * (1 - np.eye(n)) + np.eye(n)
    return (np.swapaxes(t, -1, -2), not lower) if transpose_a else (t, lower)


def _substitute(t, b, lower):
    """X with T X = B by forward (lower T) or back substitution, row by row
    as trsm does (a zero diagonal gives inf/nan, as LAPACK)."""
    n = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(b.shape, t.shape[:-2] + b.shape[-2:]))
    rows = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in rows:
            acc = b[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, :], x)
            x[..., i, :] = acc / t[..., i, i][..., None]
    return x


def _triangular_solve_eval(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """Substitution in float64 on op(A) (only its triangle read); the right
    side X op(A) = B is op(A)^T X^T = B^T."""
    t, t_lower = _op_a(_float64(triangular_solve_p, a), lower, transpose_a, unit_diagonal)
    rhs = _float64(triangular_solve_p, b)
    if left_side:
        x = _substitute(t, rhs, t_lower)
    else:
        x = np.swapaxes(_substitute(np.swapaxes(t, -1, -2), np.swapaxes(rhs, -1, -2), not t_lower), -1, -2)
    return x.astype(np.asarray(b).dtype)


eval_rules[triangular_solve_p] = _triangular_solve_eval


def _triangular_solve_jvp_a(g_a, ans, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """linalg._triangular_solve_jvp_rule_a: -op(triangle(dA)) pushed through
    A^{-1} and multiplied with the answer, in the cheaper order:
    left: m > n: A^{-1}(dA X), else (A^{-1} dA) X; right: m < n:
    (X dA) A^{-1}, else X (dA A^{-1}) (dots at HIGHEST precision)."""
    m, n = b.shape[-2:]
    k = 1 if unit_diagonal else 0
    g_a = _tril(g_a, k=-k) if lower else _triu(g_a, k=k)
    g_a = neg(g_a)
    g_a = _T(g_a) if transpose_a else g_a          # .conj() on real values binds nothing
    kw = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
              unit_diagonal=unit_diagonal)

    def a_inverse(rhs):
        return triangular_solve(a, rhs, **kw)

    if left_side:
        return a_inverse(_batch_matmul(g_a, ans)) if m > n else _batch_matmul(a_inverse(g_a), ans)
    return a_inverse(_batch_matmul(ans, g_a)) if m < n else _batch_matmul(ans, a_inverse(g_a))


def _triangular_solve_jvp(primals, tangents, **params):
    """ad.defjvp2: the answer bound once; the rule for a (above) and for b
    (linear: triangular_solve(a, g_b)) on the nonzero tangents, summed with add_any."""
    (a, b), (g_a, g_b) = primals, tangents
    ans = triangular_solve_raw(a, b, **params)
    terms = []
    if not isinstance(g_a, Zero):
        terms.append(_triangular_solve_jvp_a(g_a, ans, a, b, **params))
    if not isinstance(g_b, Zero):
        terms.append(triangular_solve(a, g_b, **params))
    return ans, add_tangents(terms)


jvp_rules[triangular_solve_p] = _triangular_solve_jvp
# FLOPs: m^2 per right-hand side per matrix (trsm)
cost_rules[triangular_solve_p] = lambda a, b, *, left_side, **_: (
    int(np.prod(b.shape)) // a.shape[-1] * a.shape[-1] ** 2)


def _triangular_solve_transpose(ct, a, b, *, transpose_a, **params):
    """linalg._triangular_solve_transpose_rule: linear in b only; its
    cotangent solves with op(A) transposed: triangular_solve(a, ct,
    transpose_a=not transpose_a)."""
    if is_undefined(a) or not is_undefined(b):
        raise PrimitiveError(triangular_solve_p, "transpose is only with respect to b (nonlinear in a)")
    if isinstance(ct, Zero):
        return [None, Zero(b.type)]
    return [None, triangular_solve(a, ct, transpose_a=not transpose_a, **params)]


transpose_rules[triangular_solve_p] = _triangular_solve_transpose


def _triangular_solve_batch(args, dims, **params):
    """linalg._triangular_solve_batching_rule: with a unbatched, b's batch
    axis joins its free dim (left: columns, right: rows) of one solve;
    otherwise both batch axes go to the front."""
    (x, y), (bx, by) = args, dims
    left_side = params["left_side"]
    if bx is None:
        if left_side:
            y = moveaxis(y, by, y.ndim - 1)
            y_flat = reshape(y, y.shape[:-2] + (y.shape[-2] * y.shape[-1],))
            bdim_out = y.ndim - 1
        else:
            y = moveaxis(y, by, y.ndim - 2)
            y_flat = reshape(y, y.shape[:-3] + (y.shape[-3] * y.shape[-2], y.shape[-1]))
            bdim_out = y.ndim - 2
        return reshape(triangular_solve(x, y_flat, **params), y.shape), bdim_out
    size = x.shape[bx]
    return triangular_solve(bdim_at_front(x, bx, size), bdim_at_front(y, by, size), **params), 0


batch_rules[triangular_solve_p] = _triangular_solve_batch
jax_facts[triangular_solve_p] = JaxFacts(
    "triangular_solve",
    "lambda a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal: "
    "lax.linalg.triangular_solve_p.bind(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a, "
    "conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)")


def _solve_reference(left_side=False, lower=False, transpose_a=False, unit_diagonal=False):
    """numpy: np.linalg.solve on op(A) built from A's triangle."""
    def ref(a, b):
        t = np.tril(a) if lower else np.triu(a)
        if unit_diagonal:
            t = t * (1 - np.eye(a.shape[-1])) + np.eye(a.shape[-1])
        t = np.swapaxes(t, -1, -2) if transpose_a else t
        if left_side:
            return np.linalg.solve(t, b)
        return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    return ref


def _trsm_example(name, a_shape, b_shape, **kw):
    fn = lambda a, b: triangular_solve_raw(a, b, **kw)     # noqa: E731
    return Example(name, ((a_shape, "f32", "dominant"), (b_shape, "f32", "normal")), fn,
                   _solve_reference(**{k: v for k, v in kw.items() if k != "conjugate_a"}),
                   linear=((False, True),))


examples[triangular_solve_p] = [
    _trsm_example("left-lower", (3, 3), (3, 2), left_side=True, lower=True),
    _trsm_example("left-upper-transposed-tall", (4, 4), (4, 2), left_side=True, transpose_a=True),
    _trsm_example("right-lower-unit-wide", (3, 3), (2, 3), lower=True, unit_diagonal=True),
    _trsm_example("right-upper-transposed", (3, 3), (4, 3), transpose_a=True, conjugate_a=True),
    _trsm_example("left-upper-unit-transposed-wide", (2, 2), (2, 3), left_side=True, transpose_a=True,
                  unit_diagonal=True),
    _trsm_example("batched-left-lower", (2, 3, 3), (2, 3, 2), left_side=True, lower=True),
]


# ==========================================================================
# lu

lu_p = primitive("lu", multiple_results=True)


def lu(x):
    """lax.linalg.lu: (lu, pivots, permutation) with P x = L U, partial
    pivoting; L (unit diagonal, not stored) below the diagonal of `lu`, U on
    and above it; pivots (..., min(m, n)) int32 row swaps; permutation
    (..., m) int32 (row i of P x is row permutation[i] of x)."""
    return bind(lu_p, x)


def _lu_shape(x):
    """_lu_shape_rule and _lu_dtype_rule: x (..., m, n) -> x's type,
    i32[..., min(m, n)], i32[..., m]."""
    _check_matrix(lu_p, x, _LAPACK_DTYPES, square=False)
    *batch, m, n = x.shape
    return [x, ArrayType(tuple(batch) + (min(m, n),), np.int32), ArrayType(tuple(batch) + (m,), np.int32)]


shape_rules[lu_p] = _lu_shape


def _getrf(a):
    """LAPACK getrf on one float64 matrix: column j pivots on the first
    largest |a[i, j]|, i >= j (rows swapped, multipliers scaled unless the
    pivot is zero), then the trailing update. Returns (lu, pivots, perm)."""
    a = a.copy()
    m, n = a.shape
    pivots, perm = np.zeros(min(m, n), np.int32), np.arange(m, dtype=np.int32)
    for j in range(min(m, n)):
        p = j + int(np.argmax(np.abs(a[j:, j])))
        pivots[j] = p
        a[[j, p]], perm[[j, p]] = a[[p, j]], perm[[p, j]]
        if a[j, j] != 0:
            a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    return a, pivots, perm


def _lu_eval(x):
    a = _float64(lu_p, x)
    m, n = a.shape[-2:]
    out, pivots, perm = _per_matrix(_getrf, a, [(m, n), (min(m, n),), (m,)])
    return [out.astype(x.dtype), pivots.astype(np.int32), perm.astype(np.int32)]


eval_rules[lu_p] = _lu_eval


def _lu_jvp_inner(lu_, a_dot, permutation):
    """linalg._lu_jvp_inner (De Hoog, Anderssen, Lukas) on one matrix:
    X = L^{-1} P dA U^{-1}; d(lu) = L tril(X, -1) + triu(X) U, L padded to
    (m, m) with an identity, U to (n, n) with an identity block."""
    m, n = a_dot.shape
    k = min(m, n)
    zero = np.asarray(0, lu_.dtype)
    left = lu_ if k == n else slice_op(lu_, (0, 0), (m, k))
    l = pad(_tril(left, -1), zero, ((0, 0, 0), (0, m - k, 0)))
    l = add(l, _eye(lu_.dtype, (m, m)))
    u_eye = pad(_eye(lu_.dtype, (n - k, n - k)), zero, ((k, 0, 0), (k, 0, 0)))
    top = lu_ if k == m else slice_op(lu_, (0, 0), (k, n))
    u = add(pad(_triu(top), zero, ((0, n - k, 0), (0, 0, 0))), u_eye)
    la = triangular_solve(l, _take_rows(a_dot, permutation), left_side=True, transpose_a=False, lower=True,
                          unit_diagonal=True)
    lau = triangular_solve(u, la, left_side=False, transpose_a=False, lower=False)
    l_dot = _jnp_matmul_highest(l, _tril(lau, -1))
    u_dot = _jnp_matmul_highest(_triu(lau), u)
    return add(l_dot, u_dot)


def _take_rows(x, idx):
    """jnp's x[idx] for a 1-D int32 idx: negative indices wrapped
    (lt, add, select_n), a column of start indices, one gather of rows
    (PROMISE_IN_BOUNDS)."""
    m = x.shape[0]
    idx = select_n(lt(idx, np.int32(0)), idx, add(idx, np.int32(m)))
    starts = broadcast_in_dim(idx, idx.shape + (1,), (0,))
    dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    return gather(x, starts, dn, (1,) + tuple(x.shape[1:]), mode="promise_in_bounds")


def _lu_jvp(primals, tangents):
    """linalg._lu_jvp_rule: lu bound once; d(lu) is _lu_jvp_inner vmapped
    over each batch dim (spec.vmap of the traced inner rule, inlined, as
    JAX's api.vmap traces it); pivots and permutation have zero tangents.
    Before jax 0.5.3 (spec.semantics: lu_jvp_vmaps_its_inner_rule) the
    batched rule `_lu_old_jvp`."""
    if not semantics().lu_jvp_vmaps_its_inner_rule:
        return _lu_old_jvp(primals, tangents)
    (a,), (a_dot,) = primals, tangents
    lu_, pivots, permutation = lu(a)
    batch = a.shape[:-2]
    inner = _vmapped(_lu_jvp_inner, [lu_.type, a_dot.type, permutation.type], len(batch))
    (lu_dot,) = eval_program_traced(inner, lu_, a_dot, permutation)
    return [lu_, pivots, permutation], [lu_dot, None, None]


def _lu_old_jvp(primals, tangents):
    """Before jax 0.5.3 (spec.semantics: lu_jvp_vmaps_its_inner_rule; jax
    0.4.36's linalg._lu_jvp_rule, 0.5.2's the same), the batched rule
    written directly, the tangent's rows permuted first:
    x = a_dot[(*iotas[:-1], permutation, slice(None))]   # _broadcasted_iotas(*batch, 1)
    l = pad(_tril(lu[..., :, :k], -1), zero, l_padding) + expand_dims(_eye(m, m), batch)
    u = pad(_triu(lu[..., :k, :]), zero, u_padding) + expand_dims(pad(_eye(n-k, n-k), (k, k)), batch)
    X = L^{-1} x U^{-1} (two triangular solves); d(lu) = L tril(X, -1) + triu(X) U,
    the products jnp.matmul at HIGHEST precision. Same values as 0.10.2's."""
    (a,), (a_dot,) = primals, tangents
    lu_, pivots, permutation = lu(a)
    *batch, m, n = a.shape
    k, nd, zero = min(m, n), a.ndim, np.asarray(0, lu_.dtype)
    x = _lu_old_rows(a_dot, permutation)
    l_padding = ((0, 0, 0),) * (nd - 1) + ((0, m - k, 0),)
    l = pad(_tril(_old_static_slice(lu_, nd - 1, k), -1), zero, l_padding)
    l = add(l, expand_dims(_eye(lu_.dtype, (m, m)), range(nd - 2)))
    u_eye = pad(_eye(lu_.dtype, (n - k, n - k)), zero, ((k, 0, 0), (k, 0, 0)))
    u_padding = ((0, 0, 0),) * (nd - 2) + ((0, n - k, 0), (0, 0, 0))
    u = add(pad(_triu(_old_static_slice(lu_, nd - 2, k)), zero, u_padding), expand_dims(u_eye, range(nd - 2)))
    la = triangular_solve(l, x, left_side=True, transpose_a=False, lower=True, unit_diagonal=True)
    lau = triangular_solve(u, la, left_side=False, transpose_a=False, lower=False)
    lu_dot = add(_jnp_matmul_highest(l, _tril(lau, -1)), _jnp_matmul_highest(_triu(lau), u))
    return [lu_, pivots, permutation], [lu_dot, None, None]


def _broadcasted_iotas(*sizes):
    """linalg._broadcasted_iotas: iota i of shape (1, ..., sizes[i], ..., 1)
    (rank len(sizes)) along dimension i, int32."""
    return [iota(np.int32, tuple(s if j == i else 1 for j in range(len(sizes))), i) for i, s in enumerate(sizes)]


def _lu_old_rows(a_dot, permutation):
    """The old rule's `a_dot[(*iotas[:-1], permutation, slice(None))]`
    (iotas = _broadcasted_iotas(*batch, 1), the last one dead) as jnp
    indexing lowers it (measured on 0.4.36): the indices of every batch
    dimension and the row (`_jnp_indices`: wrapped, broadcast to the
    permutation's shape (..., m), a trailing unit dim each), concatenated
    (one alone is not), one gather of rows (PROMISE_IN_BOUNDS):
    x[b..., i, :] = a_dot[b..., permutation[b..., i], :]."""
    iotas = _broadcasted_iotas(*a_dot.shape[:-2], 1)
    ids = _jnp_indices(a_dot, iotas[:-1] + [permutation])
    at = ids[0] if len(ids) == 1 else concatenate(ids, permutation.ndim)
    rank = permutation.ndim
    dn = GatherDimensionNumbers(offset_dims=(rank,), collapsed_slice_dims=tuple(range(rank)),
                                start_index_map=tuple(range(rank)))
    return gather(a_dot, at, dn, (1,) * rank + (a_dot.shape[-1],), mode="promise_in_bounds")


def _old_static_slice(x, axis: int, size: int):
    """jax 0.4.36's jnp `x[..., :, :size]` (axis -1) or `x[..., :size, :]`
    (axis -2) of the old lu rule: nothing when it keeps the whole axis; a
    `slice` where the index (3 entries) fits x's rank (batched); for a
    matrix (`_attempt_rewriting_take_via_slice` refuses more entries than
    dims) jnp's gather: start 0 (`broadcast_in_dim` of a literal 0 to
    i32[1]) along `axis`, every dim an offset dim, sorted and unique."""
    if x.shape[axis] == size:
        return x
    sizes = tuple(size if d == axis else s for d, s in enumerate(x.shape))
    if x.ndim > 2:
        return slice_op(x, (0,) * x.ndim, sizes)
    dn = GatherDimensionNumbers(offset_dims=tuple(range(x.ndim)), collapsed_slice_dims=(), start_index_map=(axis,))
    return gather(x, broadcast_in_dim(np.int32(0), (1,), ()), dn, sizes, mode="promise_in_bounds",
                  indices_are_sorted=True, unique_indices=True)


def _vmapped(fn, types, nbatch):
    """The program of `fn` vmapped (axis 0 of every operand) over the first
    `nbatch` dims of `types`: api.vmap applied nbatch times."""
    from spec.batching import vmap
    core = [ArrayType(t.shape[nbatch:], t.dtype) for t in types]
    prog = trace(fn, *core)
    for i in reversed(range(nbatch)):
        prog = vmap(prog, in_axes=0, out_axes=0, axis_size=types[0].shape[i])
    return prog


jvp_rules[lu_p] = _lu_jvp
# FLOPs: about m n min(m, n) per matrix (getrf)
cost_rules[lu_p] = lambda x: int(np.prod(x.shape)) * min(x.shape[-2:])
batch_rules[lu_p] = _expand_dims_batch(lu_p)
jax_facts[lu_p] = JaxFacts("lu", "lambda x: list(lax.linalg.lu_p.bind(x))")


def _doolittle_lu(a):
    """An independent reference: the row order from partial pivoting
    (computed by elimination with the largest remaining pivot), then the
    unpivoted Doolittle factors of the permuted matrix, packed as LAPACK
    packs them; pivots as the swaps that produce that order."""
    def one(x):
        m, n = x.shape
        k = min(m, n)
        order, work = list(range(m)), x.copy()
        for j in range(k):                           # pivot choice on the Schur complements
            p = j + int(np.argmax(np.abs(work[j:, j])))
            order[j], order[p] = order[p], order[j]
            work[[j, p]] = work[[p, j]]
            if work[j, j] != 0:
                work[j + 1:] -= np.outer(work[j + 1:, j] / work[j, j], work[j])
        px = x[order]
        lower, upper = np.eye(m)[:, :k], np.zeros((k, n))
        for j in range(k):                           # Doolittle on P x
            upper[j, j:] = px[j, j:] - lower[j, :j] @ upper[:j, j:]
            lower[j + 1:, j] = (px[j + 1:, j] - lower[j + 1:, :j] @ upper[:j, j]) / upper[j, j]
        packed = np.zeros((m, n))
        packed[:, :k] += np.tril(lower, -1)
        packed[:k] += np.triu(upper)
        return packed, _swaps_of(order, k), np.asarray(order)
    outs = [one(x) for x in a.reshape((-1,) + a.shape[-2:])]
    return [np.stack([o[i] for o in outs]).reshape(a.shape[:-2] + outs[0][i].shape) for i in range(3)]


def _swaps_of(order, k):
    """Pivots (row swaps, LAPACK's ipiv - 1) that turn arange(m) into `order`."""
    perm, swaps = list(range(len(order))), []
    for j in range(k):
        p = perm.index(order[j])
        swaps.append(p)
        perm[j], perm[p] = perm[p], perm[j]
    return np.asarray(swaps)


examples[lu_p] = [
    Example("square-pivoted", (((4, 4), "f32", "pivoted"),), lu, _doolittle_lu),
    Example("tall", (((4, 3), "f32", "pivoted"),), lu, _doolittle_lu),
    Example("wide", (((3, 4), "f32", "pivoted"),), lu, _doolittle_lu),
    Example("batched", (((2, 3, 3), "f32", "pivoted"),), lu, _doolittle_lu),
]


# ==========================================================================
# lu_pivots_to_permutation

lu_pivots_to_permutation_p = primitive("lu_pivots_to_permutation", ["permutation_size"])


def lu_pivots_to_permutation(pivots, permutation_size):
    """lax.linalg.lu_pivots_to_permutation: arange(permutation_size) with
    the row swaps (i, pivots[i]) applied in order, per batch member."""
    return bind(lu_pivots_to_permutation_p, pivots, permutation_size=int(permutation_size))


def _pivots_shape(pivots, *, permutation_size):
    """_lu_pivots_to_permutation_shape_rule: int32 pivots (..., k),
    permutation_size >= k; output i32[..., permutation_size]."""
    p = lu_pivots_to_permutation_p
    if pivots.dtype != np.int32:
        raise PrimitiveError(p, f"pivots must be int32, got {pivots}")
    if pivots.ndim < 1:
        raise PrimitiveError(p, f"pivots must have rank at least 1, got {pivots}")
    if not isinstance(permutation_size, (int, np.integer)) or permutation_size < pivots.shape[-1]:
        raise PrimitiveError(p, f"permutation_size {permutation_size!r} must be an int >= the pivots' "
                                f"last dim {pivots.shape[-1]}")
    return [ArrayType(pivots.shape[:-1] + (int(permutation_size),), np.int32)]


shape_rules[lu_pivots_to_permutation_p] = _pivots_shape


def _pivots_eval(pivots, *, permutation_size):
    """_generic_lu_pivots_to_permutation (the CPU lowering, a fori_loop):
    swap entries i and j = pivots[i] in turn; a negative j counts from the
    end (jnp indexing); out of range, the read clamps and the write drops."""
    pivots = np.asarray(pivots)
    m = int(permutation_size)
    flat = pivots.reshape(-1, pivots.shape[-1])
    out = np.broadcast_to(np.arange(m, dtype=np.int32), (flat.shape[0], m)).copy()
    for b in range(flat.shape[0]):
        perm = out[b]
        for i, j in enumerate(flat[b]):
            j = int(j) + m if j < 0 else int(j)
            x, y = perm[i], perm[min(max(j, 0), m - 1)] if m else 0
            perm[i] = y
            if 0 <= j < m:
                perm[j] = x
    return out.reshape(pivots.shape[:-1] + (m,))


eval_rules[lu_pivots_to_permutation_p] = _pivots_eval
# integer in and out: JAX registers no JVP rule (the tangent is always a
# symbolic zero, so no rule is ever called); this one says so
jvp_rules[lu_pivots_to_permutation_p] = lambda primals, tangents, **params: (
    bind(lu_pivots_to_permutation_p, *primals, **params), None)
batch_rules[lu_pivots_to_permutation_p] = _expand_dims_batch(lu_pivots_to_permutation_p)
jax_facts[lu_pivots_to_permutation_p] = JaxFacts(
    "lu_pivots_to_permutation",
    "lambda pivots, permutation_size: lax.linalg.lu_pivots_to_permutation(pivots, permutation_size)",
    from_jax=lambda p: {**p, "permutation_size": int(p["permutation_size"])})


def _swaps_reference(size):
    def ref(pivots):
        flat = pivots.reshape(-1, pivots.shape[-1])
        outs = []
        for row in flat:
            perm = list(range(size))
            for i, j in enumerate(row):
                perm[i], perm[j] = perm[j], perm[i]
            outs.append(perm)
        return np.asarray(outs, np.int32).reshape(pivots.shape[:-1] + (size,))
    return ref


examples[lu_pivots_to_permutation_p] = [
    Example("square", (((4,), "i32", "indices:4"),), lambda p: lu_pivots_to_permutation(p, 4),
            _swaps_reference(4), tangent="zero"),
    Example("larger", (((2, 3), "i32", "indices:3"),), lambda p: lu_pivots_to_permutation(p, 5),
            _swaps_reference(5), tangent="zero"),
]
