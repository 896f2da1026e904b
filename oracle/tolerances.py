"""Tolerances for comparing JAX's numbers with the spec's, in one place.

Both sides compute in the program's dtype with correctly rounded basic
operations and transcendental functions accurate to a few ulps (numpy on
the spec's side, XLA on JAX's; XLA may fuse and reorder, numpy does not).
Each equation on a path from inputs to an output can add a relative error
of a few ulps to what it reads, so for a program of `depth` equations the
two sides can differ by about

    rtol = ULPS_PER_EQN * eps(dtype) * (depth + 1)

relative to the size of the values involved (normwise: the largest
magnitude of the expected array, at least 1, so that values that cancel to
near zero are compared on the scale of the computation that produced
them). ULPS_PER_EQN = 8 covers XLA:CPU's polynomial approximations of
tanh/exp/log (up to ~4 ulps) and one reassociation per reduction. Checks run
with inputs drawn well inside every domain (see oracle.check), where the
programs are well conditioned; a program that is ill conditioned at the
drawn point can need `rtol_scale` > 1, which oracle.check accepts as an
option and prints in its report. NaN and Inf positions must agree exactly.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

ULPS_PER_EQN = 8


def eps(dtype) -> float:
    return float(ml_dtypes.finfo(np.dtype(dtype)).eps)


def rtol(dtype, depth: int, scale: float = 1.0) -> float:
    return ULPS_PER_EQN * eps(dtype) * (depth + 1) * scale


def compare(got, want, dtype, depth: int, scale: float = 1.0):
    """(ok, max_abs_err, max_rel_err, worst_index, tol) for two arrays."""
    got = np.asarray(got, dtype=np.float64) if np.asarray(got).dtype != np.bool_ else np.asarray(got)
    want = np.asarray(want, dtype=np.float64) if np.asarray(want).dtype != np.bool_ else np.asarray(want)
    if got.shape != want.shape:
        return False, np.inf, np.inf, None, 0.0
    if not np.issubdtype(np.dtype(dtype), np.floating) and np.dtype(dtype) != ml_dtypes.bfloat16:
        bad = got != want
        return (not bad.any(), float(bad.sum()), float(bad.sum()),
                tuple(np.argwhere(bad)[0]) if bad.any() else None, 0.0)
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    inf_g, inf_w = np.isinf(got), np.isinf(want)
    if (nan_g != nan_w).any() or (inf_g != inf_w).any() or (got[inf_g] != want[inf_w]).any():
        idx = np.argwhere((nan_g != nan_w) | (inf_g != inf_w))
        return False, np.inf, np.inf, tuple(idx[0]) if len(idx) else None, 0.0
    finite = ~(nan_w | inf_w)
    if not finite.any():
        return True, 0.0, 0.0, None, 0.0
    diff = np.where(finite, np.abs(got - want), 0.0)
    scale_ref = max(1.0, float(np.max(np.abs(want[finite]))))
    tol = rtol(dtype, depth, scale)
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape)) if diff.ndim else ()
    max_abs = float(diff.max())
    return max_abs <= tol * scale_ref, max_abs, max_abs / scale_ref, worst, tol
