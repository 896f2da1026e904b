"""Matrix decompositions (jax 0.10.2: jax/_src/lax/linalg.py): qr, eigh and
svd -- the primitives that `jnp.linalg.qr`, `jnp.linalg.eigh`,
`jnp.linalg.svd`, `jnp.linalg.norm(x, 2)` / `"nuc"`,
`jax.random.orthogonal` and `jax.nn.initializers.orthogonal` bind.
(`qr` is one primitive in a jaxpr: geqrf and householder_product appear
only in its lowering, so they are not modelled.)

As in spec/prims_linalg.py, every rule is JAX's, in JAX's shape: a JVP rule
emits the primitives its JAX rule emits (jnp's `@`, slicing, the
diagonal's integer indexing and `.at[].set` written below with the
primitives they bind in 0.10.2), so that what a backward pass saves under
remat is what JAX saves. Batching is JAX's `expand_dims_batcher`.
Evaluation is numpy's LAPACK (geqrf/orgqr, syevd, gesdd, as JAX's CPU
lowering calls) in float64, rounded to the operand dtype; real dtypes only.
The signs of eigenvectors and singular vectors are those of the float64
LAPACK routines: JAX on CPU computes float32 operands in single precision,
whose signs can differ (those of qr cannot: Householder's convention fixes them).

    >>> import spec
    >>> prog = spec.trace(lambda a: eigh(a), spec.f32[2, 2])
    >>> [e.primitive.name for e in prog.eqns]           # lax.linalg.eigh: symmetrize, then eigh
    ['transpose', 'add', 'div', 'eigh']
    >>> for r in spec.saved_residuals(prog):            # as jax's saved_residuals lists them
    ...     print(r)
    f32[] from a literal
    f32[2,2] output of eigh
    f32[2,2] output of sub
    f32[2,2] output of transpose
    i32[2,2] output of concatenate

The residuals: symmetrize's 2, the eigenvectors V, the reciprocal gaps F,
V^T (for V^T dA V) and the diagonal's gather indices.
"""
from __future__ import annotations

import numpy as np

from spec.core import (Example, JaxFacts, PrimitiveError, batch_rules, bind, cost_rules, eval_rules, examples,
                       jax_facts, jvp_rules, primitive, shape_rules)
from spec.ir import ArrayType
from spec.prims_elementwise import add, convert_element_type, div, eq, integer_pow, lt, mul, select_n, sub
from spec.prims_indexing import GatherDimensionNumbers, ScatterDimensionNumbers, gather, iota, scatter
from spec.prims_linalg import (_HIGHEST, _LAPACK_DTYPES, _T, _batch_matmul, _check_matrix, _expand_dims_batch,
                               _eye, _float64, _per_matrix, _take_rows, _tril, _vmapped, lu,
                               triangular_solve)
from spec.prims_call import call
from spec.prims_reductions import sort
from spec.prims_structural import broadcast_in_dim, concatenate, dot_general
from spec.prims_structural import slice as slice_op


# ==========================================================================
# shared pieces: the jnp operations JAX's rules use, as the primitives they bind

def _matmul(x, y, precision=None):
    """jnp.matmul (`x @ y`) on batches of matrices with equal batch dims:
    one dot_general, preferred_element_type the result dtype; precision
    HIGHEST under default_matmul_precision("float32")."""
    batch = tuple(range(x.ndim - 2))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), (batch, batch)), precision=precision,
                       preferred_element_type=x.dtype)


def _slice(x, rows=(None, None), cols=(None, None)):
    """jnp's x[..., r0:r1, c0:c1]: one slice, or nothing when it keeps all."""
    *batch, m, n = x.shape
    (r0, r1), (c0, c1) = rows, cols
    start = (0,) * len(batch) + (r0 or 0, c0 or 0)
    limit = tuple(batch) + (m if r1 is None else r1, n if c1 is None else c1)
    if start == (0,) * x.ndim and limit == tuple(x.shape):
        return x
    return slice_op(x, start, limit)


def _expand_dims(x, ndim):
    """lax.expand_dims(x, range(ndim - x.ndim)): broadcast_in_dim adding
    leading 1s, nothing when there are none to add."""
    if ndim == x.ndim:
        return x
    lead = ndim - x.ndim
    return broadcast_in_dim(x, (1,) * lead + tuple(x.shape), tuple(range(lead, ndim)))


def _symmetrize(x):
    """linalg.symmetrize: (x + _H(x)) / 2."""
    return div(add(x, _T(x)), np.asarray(2, x.dtype))


def _normalized_index(i, size):
    """jnp's integer-array index normalization: i < 0 ? i + size : i."""
    return select_n(lt(i, np.int32(0)), i, add(i, np.int32(size)))


def _diagonal_indices(i, shape):
    """The index array of s[..., i, i] / .at[..., i, i] for i = iota(k):
    i normalized for each of the last two dims, stacked as columns (k, 2)."""
    k = i.shape[0]
    rows, cols = _normalized_index(i, shape[-2]), _normalized_index(i, shape[-1])
    rows, cols = (broadcast_in_dim(v, (k, 1), (0,)) for v in (rows, cols))
    return concatenate((rows, cols), 1)


def _extract_diagonal(s):
    """linalg._extract_diagonal: s[..., i, i], i = iota(min(m, n)) -- jnp's
    gather of the two index arrays, the batch dims kept as offset dims."""
    nb = s.ndim - 2
    i = iota(np.int32, (min(s.shape[-2:]),))
    dn = GatherDimensionNumbers(offset_dims=tuple(range(nb)), collapsed_slice_dims=(nb, nb + 1),
                                start_index_map=(nb, nb + 1))
    return gather(s, _diagonal_indices(i, s.shape), dn, tuple(s.shape[:-2]) + (1, 1), mode="promise_in_bounds")


def _construct_diagonal(s):
    """linalg._construct_diagonal: lax.full((..., k, k), 0).at[..., i, i].set(s)
    -- jnp's scatter (FILL_OR_DROP) of s into zeros, s's batch dims its window dims."""
    nb, k = s.ndim - 1, s.shape[-1]
    i = iota(np.int32, (k,))
    zeros = broadcast_in_dim(np.zeros((), s.dtype), tuple(s.shape) + (k,), ())
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(nb)), inserted_window_dims=(nb, nb + 1),
                                 scatter_dims_to_operand_dims=(nb, nb + 1))
    return scatter(zeros, _diagonal_indices(i, zeros.shape), s, dn, mode="fill")


def _real64(prim, x):
    """An operand in float64 for evaluation; complex values are refused
    (the spec models real dtypes only; astype would drop the imaginary part)."""
    if np.iscomplexobj(x):
        raise PrimitiveError(prim, f"complex operands are not modelled, got {np.asarray(x).dtype}")
    return _float64(prim, x)


def _each_matrix(one, a, out_shapes):
    """_per_matrix, and for empty matrices (m or n zero, where the batch
    cannot be flattened) `one`'s answer for the empty matrix broadcast."""
    if 0 not in a.shape[-2:]:
        return _per_matrix(one, a, out_shapes)
    return [np.broadcast_to(o, a.shape[:-2] + o.shape).copy() for o in one(np.zeros(a.shape[-2:]))]


def _lapack_only(prim, x):
    """JAX's dtype rule (real and complex floats) and the CPU/GPU lowering's
    (float32, float64): real float32 / float64 batches of matrices."""
    _check_matrix(prim, x, _LAPACK_DTYPES, square=False)


# ==========================================================================
# qr

# pivoting=True (jax.scipy.linalg.qr(pivoting=True): geqp3) is not modelled,
# use_magma only chooses a GPU implementation: both are JaxFacts.ignored
qr_p = primitive("qr", ["full_matrices"], multiple_results=True)


def qr(x, full_matrices=True):
    """lax.linalg.qr (pivoting=False): (q, r) with x = q r, q (..., m, k)
    with orthonormal columns, r (..., k, n) upper triangular, k = m if
    `full_matrices` else min(m, n). LAPACK's Householder signs: r's
    diagonal entry j is minus the sign of the column's pivot entry."""
    return bind(qr_p, x, full_matrices=bool(full_matrices))


def _qr_shape(x, *, full_matrices):
    """_qr_shape_rule and _qr_dtype_rule (pivoting=False): x (..., m, n)
    -> q (..., m, k), r (..., k, n), k = m if full_matrices else min(m, n)."""
    if not isinstance(full_matrices, (bool, np.bool_)):
        raise PrimitiveError(qr_p, f"full_matrices must be a bool, got {full_matrices!r}")
    _lapack_only(qr_p, x)
    *batch, m, n = x.shape
    k = m if full_matrices else min(m, n)
    return [ArrayType(tuple(batch) + (m, k), x.dtype), ArrayType(tuple(batch) + (k, n), x.dtype)]


shape_rules[qr_p] = _qr_shape


def _qr_eval(x, *, full_matrices):
    """_qr_lowering on CPU: geqrf then orgqr (householder_product), r's
    lower part zeroed -- numpy's qr calls the same LAPACK routines, here
    in float64 per matrix; an empty matrix gives q = eye, r = 0 as JAX."""
    a = _real64(qr_p, x)
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)

    def one(mat):
        if m == 0 or n == 0:
            return np.eye(m, k), np.zeros((k, n))
        return np.linalg.qr(mat, mode="complete" if full_matrices else "reduced")
    q, r = _each_matrix(one, a, [(m, k), (k, n)])
    return [q.astype(x.dtype), r.astype(x.dtype)]


eval_rules[qr_p] = _qr_eval


def _thin_qr_jvp(q, r, dx):
    """linalg._thin_qr_jvp (m >= n; j-towns.github.io/papers/qr-derivative.pdf):
    with C = Q^T dX R^{-1}, dO = tril(C, -1) - tril(C, -1)^T (skew), plus
    I * (C - C.real) (zero for real values, but bound as JAX binds it);
    dQ = Q (dO - C) + dX R^{-1}, dR = (C - dO) R."""
    dx_rinv = triangular_solve(r, dx)
    qt_dx_rinv = _matmul(_T(q), dx_rinv)
    qt_dx_rinv_lower = _tril(qt_dx_rinv, -1)
    do = sub(qt_dx_rinv_lower, _T(qt_dx_rinv_lower))
    n = r.shape[-1]
    eye = _expand_dims(_eye(do.dtype, (n, n)), qt_dx_rinv.ndim)
    do = add(do, mul(eye, sub(qt_dx_rinv, qt_dx_rinv)))     # .real.astype(dtype): nothing on real values
    dq = add(_matmul(q, sub(do, qt_dx_rinv)), dx_rinv)
    dr = _matmul(sub(qt_dx_rinv, do), r)
    return dq, dr


def _qr_jvp(primals, tangents, *, full_matrices):
    """linalg.qr_jvp_rule (pivoting=False): qr bound once. Wide (m < n):
    X = [X1 X2], the square X1 = Q R1 by _thin_qr_jvp, dR2 = dQ^T X2 +
    Q^T dX2, dR = [dR1 dR2]. Otherwise _thin_qr_jvp on Q[:, :n], R[:n, :n];
    with full_matrices and m > n, the extra columns of dQ by
    arXiv:2409.13374 (_qr_full_extra) and dR padded with zero rows."""
    (x,), (dx,) = primals, tangents
    q, r = qr(x, full_matrices)
    *batch, m, n = x.shape
    if m < n:
        x2 = _slice(x, cols=(m, None))
        dx1, dx2 = _slice(dx, cols=(None, m)), _slice(dx, cols=(m, None))
        r1 = _slice(r, cols=(None, m))
        dq, dr1 = _thin_qr_jvp(q, r1, dx1)
        dr2 = add(_matmul(_T(dq), x2), _matmul(_T(q), dx2))
        return [q, r], [dq, concatenate((dr1, dr2), dr1.ndim - 1)]
    q_mn = _slice(q, cols=(None, n)) if full_matrices else q
    r_nn = _slice(r, rows=(None, n), cols=(None, n)) if full_matrices else r
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, r_nn, dx)
    if not full_matrices or m == n:
        return [q, r], [dq_mn, dr_nn]
    dq = _qr_full_extra(q, q_mn, dq_mn, n)
    zeros = broadcast_in_dim(np.zeros((), dr_nn.dtype), tuple(batch) + (m - n, n), ())
    return [q, r], [dq, concatenate((dr_nn, zeros), dr_nn.ndim - 2)]


def _qr_full_extra(q, q_mn, dq_mn, n):
    """qr_jvp_rule's full_matrices block (m > n; arXiv:2409.13374 eqs 32-33):
    Z_pn = Q_pn (Q_nn - I)^{-1} by lu and lu_solve(trans=2);
    dQ_mp = dQ_mn Z_pn^T - (Q_mn + Q_mp Z_pn) (dQ_pn - Z_pn dQ_nn)^T;
    dQ = [dQ_mn dQ_mp]."""
    q_nn, q_pn = _slice(q_mn, rows=(None, n)), _slice(q_mn, rows=(n, None))
    q_mp = _slice(q, cols=(n, None))
    dq_nn, dq_pn = _slice(dq_mn, rows=(None, n)), _slice(dq_mn, rows=(n, None))
    eye = _expand_dims(_eye(q_nn.dtype, (n, n)), q_nn.ndim)
    lu_factor, _, perm = lu(sub(q_nn, eye))
    z_pn_h = _lu_solve_trans2(lu_factor, perm, _T(q_pn))
    z_pn = _T(z_pn_h)
    dq_mp = sub(_matmul(dq_mn, z_pn_h),
                _matmul(add(q_mn, _matmul(q_mp, z_pn)), _T(sub(dq_pn, _matmul(z_pn, dq_nn)))))
    return concatenate((dq_mn, dq_mp), dq_mn.ndim - 1)


def _lu_solve_core_trans2(lu_, permutation, b):
    """linalg._lu_solve_core with trans=2 on one matrix: A^H X = B as
    U^H then L^H (unit) triangular solves, then rows taken by the inverse
    permutation (sort_key_val(permutation, iota)); its reshapes of b to
    (m, prod(rest)) and back bind nothing for a matrix b."""
    x = triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    x = triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True, transpose_a=True,
                         conjugate_a=True)
    _, ind = sort([permutation, iota(np.int32, (permutation.shape[0],))], dimension=0, num_keys=1)
    return _take_rows(x, ind)


def _lu_solve_trans2(lu_, permutation, b):
    """linalg.lu_solve(lu, permutation, b, trans=2): the jitted `_lu_solve`
    -- one `call` named _lu_solve of _lu_solve_core vmapped over each
    batch dim (the operands already share their batch shape, so
    _broadcast_to binds nothing)."""
    nbatch = lu_.ndim - 2
    body = _vmapped(_lu_solve_core_trans2, [lu_.type, permutation.type, b.type], nbatch)
    return call(body, lu_, permutation, b, name="_lu_solve")[0]


jvp_rules[qr_p] = _qr_jvp
# FLOPs: Householder QR, about 2 m n^2 - 2/3 n^3 per matrix (geqrf), as much again for orgqr
cost_rules[qr_p] = lambda x, *, full_matrices: int(np.prod(x.shape)) * 4 * min(x.shape[-2:])
batch_rules[qr_p] = _expand_dims_batch(qr_p)
jax_facts[qr_p] = JaxFacts(
    "qr", "lambda x, full_matrices: list(lax.linalg.qr_p.bind(x, pivoting=False, full_matrices=full_matrices, "
    "use_magma=None))",
    ignored=(("pivoting", False), ("use_magma", None)))


def _householder_qr(full_matrices=False):
    """An independent reference: Householder QR as LAPACK's dgeqr2/dlarfg
    define it (beta = -sign(alpha) |x|, no reflection where the column
    below the pivot is zero), Q accumulated from the reflectors (dorg2r)."""
    def one(a):
        m, n = a.shape
        r, q = a.copy(), np.eye(m)
        for j in range(min(m - 1, n)):
            alpha, rest = r[j, j], r[j + 1:, j]
            if not np.any(rest):
                continue
            beta = -np.copysign(np.hypot(alpha, np.linalg.norm(rest)), alpha)
            v = np.concatenate([[1.0], rest / (alpha - beta)])
            tau = (beta - alpha) / beta
            r[j:] -= tau * np.outer(v, v @ r[j:])
            q[:, j:] -= tau * np.outer(q[:, j:] @ v, v)
        k = m if full_matrices else min(m, n)
        return q[:, :k], np.triu(r)[:k]

    def ref(x):
        outs = [one(a) for a in x.reshape((-1,) + x.shape[-2:])]
        return [np.stack([o[i] for o in outs]).reshape(x.shape[:-2] + outs[0][i].shape) for i in range(2)]
    return ref


def _qr_example(name, shape, full_matrices=False):
    return Example(name, ((shape, "f32", "dominant"),), lambda x: qr(x, full_matrices),
                   _householder_qr(full_matrices))


examples[qr_p] = [
    _qr_example("square", (3, 3)),
    _qr_example("tall", (4, 3)),
    _qr_example("wide", (3, 4)),
    _qr_example("square-full-matrices", (3, 3), full_matrices=True),
    _qr_example("batched-tall", (2, 4, 3)),
]
# (no tall full_matrices Example: under a checkpoint with dots_saveable its
# JVP's primal-only dot meets a gap of the oracle's remat3 model, which the
# fuzzer would draw; tests/test_prims_decompositions.py checks that case)


# ==========================================================================
# eigh

# subset_by_index (CPU and GPU: None or (0, n) only) and algorithm (CPU:
# None or QR, both syevd) are JaxFacts.ignored at None
eigh_p = primitive("eigh", ["lower", "sort_eigenvalues"], multiple_results=True)


def eigh(x, lower=True, symmetrize_input=True, sort_eigenvalues=True):
    """lax.linalg.eigh: (v, w), x = v diag(w) v^T, w ascending, v's
    columns the eigenvectors. With `symmetrize_input`, x is first
    (x + x^T) / 2; the primitive reads only x's `lower` (or upper) triangle."""
    if symmetrize_input:
        x = _symmetrize(x)
    return eigh_raw(x, lower=lower, sort_eigenvalues=sort_eigenvalues)


def eigh_raw(x, lower=True, sort_eigenvalues=True):
    """eigh_p.bind(x, lower, sort_eigenvalues, subset_by_index=None, algorithm=None)."""
    return bind(eigh_p, x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))


def _eigh_shape(x, *, lower, sort_eigenvalues):
    """_eigh_shape_rule and _eigh_dtype_rule: x (..., n, n) -> v of x's
    type, w (..., n) (the real base type: x's dtype for real x)."""
    for name, v in (("lower", lower), ("sort_eigenvalues", sort_eigenvalues)):
        if not isinstance(v, (bool, np.bool_)):
            raise PrimitiveError(eigh_p, f"{name} must be a bool, got {v!r}")
    _check_matrix(eigh_p, x, _LAPACK_DTYPES)
    return [x, ArrayType(x.shape[:-1], x.dtype)]


shape_rules[eigh_p] = _eigh_shape


def _eigh_eval(x, *, lower, sort_eigenvalues):
    """_eigh_cpu_gpu_lowering on CPU: LAPACK syevd on the `lower` (or
    upper) triangle, eigenvalues ascending whatever sort_eigenvalues says
    (CPU always sorts); numpy's eigh calls syevd too, here in float64 per
    matrix. A failure (info != 0) gives all NaN for that matrix."""
    a = _real64(eigh_p, x)
    n = a.shape[-1]

    def one(mat):
        try:
            w, v = np.linalg.eigh(mat, UPLO="L" if lower else "U")
        except np.linalg.LinAlgError:
            return np.full((n, n), np.nan), np.full(n, np.nan)
        return v, w
    v, w = _each_matrix(one, a, [(n, n), (n,)])
    return [v.astype(x.dtype), w.astype(x.dtype)]


eval_rules[eigh_p] = _eigh_eval


def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues):
    """linalg._eigh_jvp_rule (distinct eigenvalues; Giles, NA-08-01): eigh
    bound on symmetrize(a); F = 1 / (I + w_j - w_i) - I (the reciprocal
    gaps, zero diagonal), with rank promotion's broadcasts of I;
    C = V^T dA V (HIGHEST dots); dV = V (F * C), dw = diag(C)."""
    (a,), (a_dot,) = primals, tangents
    n = a.shape[-1]
    v, w = eigh_raw(_symmetrize(a), lower=lower, sort_eigenvalues=sort_eigenvalues)
    eye_n = _eye(a.dtype, (n, n))
    w_row = _newaxis(w, -2)
    gaps = add(_expand_dims(eye_n, w.ndim + 1), w_row)      # jnp's rank promotion of eye_n comes second
    fmat = sub(integer_pow(sub(gaps, _newaxis(w, -1)), -1), _expand_dims(eye_n, w.ndim + 1))
    vdag_adot_v = _batch_matmul(_batch_matmul(_T(v), a_dot), v)
    dv = _batch_matmul(v, mul(fmat, vdag_adot_v))
    return [v, w], [dv, _extract_diagonal(vdag_adot_v)]


def _newaxis(w, axis):
    """jnp's w[..., np.newaxis, :] (axis -2) or w[..., np.newaxis] (axis -1):
    one broadcast_in_dim inserting a 1."""
    shape = list(w.shape)
    shape.insert(len(shape) + 1 + axis, 1)
    kept = tuple(d for d in range(w.ndim + 1) if d != w.ndim + 1 + axis)
    return broadcast_in_dim(w, tuple(shape), kept)


jvp_rules[eigh_p] = _eigh_jvp
# FLOPs: about 9 n^3 per matrix (tridiagonalization and eigenvectors)
cost_rules[eigh_p] = lambda x, **_: int(np.prod(x.shape[:-2])) * 9 * x.shape[-1] ** 3
batch_rules[eigh_p] = _expand_dims_batch(eigh_p)
jax_facts[eigh_p] = JaxFacts(
    "eigh", "lambda x, lower, sort_eigenvalues: list(lax.linalg.eigh_p.bind(x, lower=lower, "
    "sort_eigenvalues=sort_eigenvalues, subset_by_index=None, algorithm=None))",
    ignored=(("subset_by_index", None), ("algorithm", None)))


def _sym(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


def _signless(v):
    """Each column of v times its first entry: the same for v and for v
    with any column negated (spec's float64 LAPACK signs vs JAX's float32)."""
    return v * v[..., :1, :]


def _signless_ops(v):
    return mul(v, _slice(v, rows=(None, 1)))


def _eigh_reference(lower=True):
    def ref(x):
        w, v = np.linalg.eigh(_sym(x), UPLO="L" if lower else "U")
        return [_signless(v), w]
    return ref


def _eigh_example(name, shape, dtype="f32", lower=True):
    """The eigenvectors compared sign-free: JAX on CPU runs ssyevd on
    float32 operands, whose signs can differ from the float64 routine's
    (and so in every program the fuzzer builds from these examples);
    tests/test_prims_decompositions.py compares raw vectors in float64."""
    def fn(x):
        v, w = eigh(x, lower=lower)
        return [_signless_ops(v), w]
    return Example(name, ((shape, dtype, "separated"),), fn, _eigh_reference(lower),
                   kept=(0,) if dtype == "f64" else ())


examples[eigh_p] = [
    _eigh_example("symmetrized", (3, 3)),
    _eigh_example("upper", (4, 4), lower=False),
    _eigh_example("batched", (2, 3, 3)),
    _eigh_example("f64-batched-upper", (2, 3, 3), dtype="f64", lower=False),
]


# ==========================================================================
# svd

# subset_by_index (CPU and GPU: None or (0, min(m, n)) only) and algorithm
# (None: gesdd; QR would be gesvd) are JaxFacts.ignored at None
svd_p = primitive("svd", ["full_matrices", "compute_uv"], multiple_results=True)


def svd(x, full_matrices=True, compute_uv=True):
    """lax.linalg.svd: (u, s, vt) with x = u diag(s) vt, s descending and
    nonnegative (`compute_uv`), else s alone; u (..., m, m) and vt
    (..., n, n) with `full_matrices`, else (..., m, k) and (..., k, n)."""
    out = svd_raw(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if compute_uv:
        s, u, vt = out
        return u, s, vt
    return out[0]


def svd_raw(x, full_matrices=True, compute_uv=True):
    """svd_p.bind(x, ..., subset_by_index=None, algorithm=None): [s, u, vt] or [s]."""
    return bind(svd_p, x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))


def _svd_shape(x, *, full_matrices, compute_uv):
    """_svd_shape_rule and _svd_dtype_rule: x (..., m, n) -> s (..., k)
    (the real base type), then u (..., m, m or k), vt (..., n or k, n) of
    x's dtype with compute_uv; k = min(m, n)."""
    for name, v in (("full_matrices", full_matrices), ("compute_uv", compute_uv)):
        if not isinstance(v, (bool, np.bool_)):
            raise PrimitiveError(svd_p, f"{name} must be a bool, got {v!r}")
    _lapack_only(svd_p, x)
    *batch, m, n = x.shape
    k, batch = min(m, n), tuple(batch)
    out = [ArrayType(batch + (k,), x.dtype)]
    if compute_uv:
        out += [ArrayType(batch + (m, m if full_matrices else k), x.dtype),
                ArrayType(batch + (n if full_matrices else k, n), x.dtype)]
    return out


shape_rules[svd_p] = _svd_shape


def _svd_eval(x, *, full_matrices, compute_uv):
    """_svd_cpu_gpu_lowering on CPU: LAPACK gesdd (numpy's svd calls it
    too, with the same job: values only, reduced or full vectors), here in
    float64 per matrix; a failure (info != 0) gives all NaN for that
    matrix; an empty matrix is _empty_svd's (no s, identity vectors)."""
    a = _real64(svd_p, x)
    m, n = a.shape[-2:]
    k = min(m, n)
    shapes = [(k,), (m, m if full_matrices else k), (n if full_matrices else k, n)][:3 if compute_uv else 1]

    def one(mat):
        if k == 0:
            return (np.zeros(0), np.eye(*shapes[1]), np.eye(*shapes[2]))[:len(shapes)]
        try:
            out = np.linalg.svd(mat, full_matrices=full_matrices, compute_uv=compute_uv)
        except np.linalg.LinAlgError:
            return tuple(np.full(sh, np.nan) for sh in shapes)
        return (out.S, out.U, out.Vh) if compute_uv else (out,)
    return [o.astype(x.dtype) for o in _each_matrix(one, a, shapes)]


eval_rules[svd_p] = _svd_eval


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    """linalg._svd_jvp_rule (under default_matmul_precision("float32"): its
    `@`s are HIGHEST): the reduced svd bound whatever was asked; refused
    for full vectors of a non-square matrix, as JAX (NotImplementedError).
    dS = U^T dA V, ds = diag(dS); without vectors, that is all. Otherwise
    _svd_jvp_vectors."""
    (a,), (da,) = primals, tangents
    s, u, vt = svd_raw(a, full_matrices=False, compute_uv=True)
    m, n = a.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise PrimitiveError(svd_p, "Singular value decomposition JVP not implemented for full matrices "
                                    "(JAX raises NotImplementedError)")
    ut, v = _T(u), _T(vt)
    s_dim = _newaxis(s, -2)
    ds_mat = _matmul(_matmul(ut, da, _HIGHEST), v, _HIGHEST)
    ds = _extract_diagonal(ds_mat)
    if not compute_uv:
        return [s], [ds]
    du, dv = _svd_jvp_vectors(a, da, s, u, ut, v, vt, s_dim, ds_mat)
    return [s, u, vt], [ds, du, _T(dv)]


def _svd_jvp_vectors(a, da, s, u, ut, v, vt, s_dim, ds_mat):
    """_svd_jvp_rule's dU, dV: F = 1 / (s_j^2 - s_i^2) off the diagonal (the
    identity added and taken off again), 1/s with zeros kept at zero on a
    _construct_diagonal; dU = U (F * (dS S + (dS S)^T) + (dS - dS^T)/2 * S^-1),
    dV = V (F * (S dS + (S dS)^T)), plus the parts outside U's (m > n) or
    V's (n > m) span."""
    def mm(x, y):
        return _matmul(x, y, _HIGHEST)
    s_diffs = mul(add(s_dim, _T(s_dim)), sub(s_dim, _T(s_dim)))
    s_diffs_zeros = _expand_dims(_eye(s.dtype, (s.shape[-1], s.shape[-1])), s_diffs.ndim)
    f = sub(div(1.0, add(s_diffs, s_diffs_zeros)), s_diffs_zeros)
    dss, sds = mul(s_dim, ds_mat), mul(_T(s_dim), ds_mat)
    s_zeros = convert_element_type(eq(s, 0.0), s.dtype)
    s_inv_mat = _construct_diagonal(sub(div(1.0, add(s, s_zeros)), s_zeros))
    dudv_diag = mul(mul(0.5, sub(ds_mat, _T(ds_mat))), s_inv_mat)
    du = mm(u, add(mul(f, add(dss, _T(dss))), dudv_diag))
    dv = mm(v, mul(f, add(sds, _T(sds))))
    m, n = a.shape[-2:]
    if m > n:
        dav = mm(da, v)
        du = add(du, div(sub(dav, mm(u, mm(ut, dav))), s_dim))
    if n > m:
        dahu = mm(_T(da), u)
        dv = add(dv, div(sub(dahu, mm(v, mm(vt, dahu))), s_dim))
    return du, dv


jvp_rules[svd_p] = _svd_jvp
# FLOPs: about 4 m n k + 8 k^3 per matrix (bidiagonalization and the vectors), k = min(m, n)
cost_rules[svd_p] = lambda x, **_: int(np.prod(x.shape[:-2])) * (4 * x.shape[-2] * x.shape[-1] + 8 * min(
    x.shape[-2:]) ** 2) * min(x.shape[-2:])
batch_rules[svd_p] = _expand_dims_batch(svd_p)
jax_facts[svd_p] = JaxFacts(
    "svd", "lambda x, full_matrices, compute_uv: list(lax.linalg.svd_p.bind(x, full_matrices=full_matrices, "
    "compute_uv=compute_uv, subset_by_index=None, algorithm=None))",
    ignored=(("subset_by_index", None), ("algorithm", None)))


def _svd_reference(full_matrices=False, compute_uv=True):
    def ref(x):
        if not compute_uv:
            return [np.linalg.svd(x, compute_uv=False)]
        u, s, vt = np.linalg.svd(x, full_matrices=full_matrices)
        return [s, _signless(u), _signless(np.swapaxes(vt, -1, -2))]
    return ref


def _svd_example(name, shape, dtype="f32", full_matrices=False, compute_uv=True):
    """As eigh's: vectors compared sign-free (u's columns, vt's rows, each
    times its first entry); JAX runs sgesdd on float32 operands."""
    def fn(x):
        out = svd_raw(x, full_matrices, compute_uv)
        return [out[0], _signless_ops(out[1]), _signless_ops(_T(out[2]))] if compute_uv else out
    return Example(name, ((shape, dtype, "separated_sv"),), fn, _svd_reference(full_matrices, compute_uv),
                   kept=(0,) if dtype == "f64" else ())


examples[svd_p] = [
    _svd_example("tall", (4, 3)),
    _svd_example("wide", (3, 4)),
    _svd_example("square-full-matrices", (3, 3), full_matrices=True),
    _svd_example("batched", (2, 4, 3)),
    _svd_example("values-only", (4, 3), full_matrices=True, compute_uv=False),
    _svd_example("f64-batched-wide", (2, 3, 4), dtype="f64"),
    _svd_example("batched-values-only", (2, 3, 3), compute_uv=False),
]
