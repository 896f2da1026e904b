"""Tolerances for comparing JAX's numbers with the spec's, in one place.

Three values are compared for each output: JAX's (in the program's
dtype), the spec's evaluation in the same dtype, and the spec's evaluation
of the same program upcast to float64 (`reference`, see oracle/upcast.py),
which is exact to ~1e-16 relative.

The spec's distance from the reference, `spec_err`, is what rounding in
this dtype costs *this program at this point*: it grows with the
program's conditioning (cancellation in a softmax, a large pre-activation
under sin) and with its depth. One evaluation can be lucky, so a second
estimate, `noise_err`, reruns the float64 program NOISE_SAMPLES times with
every result perturbed as rounding in the low dtype could
(`rounding_noise_hook`: eps/2 relative per result, and for sums and dots
eps/2 * sqrt(terms) * sum of |terms|, the size of an accumulation's
rounding error however much the terms cancel); the larger of the two is
used. The runs come in antithetic pairs (the same perturbations, negated),
whose errors are equal and opposite while the outputs are linear in the
noise; where the first pair's are not (sin of a value rounding moves by
radians, a comparison rounding decides), a few runs can err by little by
chance, and NONLINEAR_NOISE_SAMPLES more runs follow. JAX computes the same operations in the
same dtype with different but equally accurate rounding (XLA fuses and
reorders; its transcendental functions are accurate to a few ulps), so its
distance from the reference is of the same size. JAX passes when

    |jax - reference| <= SAFETY * max(spec_err, noise_err) + BASE

normwise (largest absolute error over the array), with

    BASE = ULPS_PER_EQN * eps(dtype) * (depth + 1) * max(1, |reference|)

a floor for outputs the spec happens to round exactly (spec_err ~ 0) and
for the ulp-level differences of XLA's polynomial approximations
(ULPS_PER_EQN = 8 covers tanh/exp/log at up to ~4 ulps and one
reassociation per reduction). SAFETY = 8: rounding errors of two
implementations of the same computation are random in sign and size; a
factor 8 keeps false alarms away while a wrong rule (an O(1) error) still
fails by orders of magnitude. `rtol_scale` (an oracle.check option)
multiplies both terms.

Non-finite values are compared exactly, never with a tolerance: JAX's
NaNs must be where the spec's are, its infinities where the spec's are
with the same signs (the spec evaluates in the same dtype with IEEE
arithmetic: inf * 0 = nan, 1 / inf = 0, ...). They take no part in the
tolerance: the spec's error, the scale and the noise estimate are
measured over the finite values only, and a noise estimate that is not
finite (a noisy run that overflowed) counts as none rather than making
the tolerance infinite (which would pass anything).

Backends (oracle/backends.py says which device rounds what). The bounds,
for a dot of length K, operands a, b, unit roundoff u of the format a step
rounds to (2^-24 float32, 2^-11 TF32 rounded to nearest, 2^-10 truncated,
2^-8 bfloat16; Higham, Accuracy and Stability of Numerical Algorithms,
2nd ed., sec. 3.1):

  accumulation in a format of unit roundoff u, any order:
      |fl(a.b) - a.b| <= gamma_K * sum |a_i||b_i|,   gamma_K = K u / (1 - K u)
  with independent rounding errors (Higham & Mary 2019, Thm 3.1), with
  high probability, in any order too:
      |fl(a.b) - a.b| <~ sqrt(K) u * sum |a_i||b_i|
  operands rounded first (TF32, bf16: a_i (1 + d_i), b_i (1 + e_i),
  |d_i| <= u_a, |e_i| <= u_b), products and sums then in float32:
      err = sum a_i b_i (d_i + e_i)  (+ u_a u_b terms, + the float32 bound)
      |err| <= (u_a + u_b) * sum |a_i||b_i|          (worst case, any K)
  and, the d_i, e_i independent, with high probability
      |err| <~ (u_a + u_b) * (sqrt(sum a_i^2 b_i^2) + |a.b|)
  the first term their spread, the second their mean: rounding to nearest
  has none, truncation (tensor cores fed float32 bits drop the low ones)
  shrinks every operand, a bias of up to u of the product itself.

So a float32 dot or convolution that the backend runs at a narrower level
(`Arithmetic.operand_roundoff`: the op's precision param, else
jax_default_matmul_precision, on the device's kind, or as measured there)
gets, in the noise runs, on top of its accumulation noise, that operand
term, (u_a + u_b) * (sqrt(rule(a^2, b^2)) + |result|), with a random sign
per result rather than a uniform factor (which could make it small by
chance: unlike float32 rounding this error is not covered by BASE, whose
ulps are the program dtype's). A HIGHEST dot on a GPU, or any dot on CPU,
keeps float32's model exactly as before (the same random draws).

Reduction order. The probabilistic bound above holds for every order, so
reductions modelled as accumulations need nothing more when the backend
adds in an order of its own, or a different one each run. What the model
took as fixed is scatter-add: its updates land on a result one after the
other, in index order in XLA:CPU and in the spec (one rounding per
result); XLA:GPU adds them with atomics, in any order. On a backend whose
reductions are not deterministic (`Arithmetic.deterministic`), each
scatter-add result with T updates landing on it gets an accumulation's
noise, eps/2 * sqrt(T + 1) * (|operand| + sum |updates|).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from spec.ir import real_dtype
from spec.core import eval_rules

ULPS_PER_EQN = 8
SAFETY = 8.0

# JAX's float32 special functions (series, recurrences and rational
# approximations in jax.lax and XLA) are less accurate than the few ulps
# BASE allows: each one's largest error, in units of eps/2 of max(1,
# |value|), over a dense grid of the inputs the fuzzer draws (`python -m
# tools.special_accuracy`, jax 0.10.2 on CPU; polygamma per order, an order
# not measured taking the worst). A noise run perturbs their float32 results
# by that much instead of eps/2 (`rounding_noise_hook`), so their error,
# amplified by what follows (sin of a polygamma: found by a pristine nightly,
# 1f9b59046c, JAX's polygamma(2) off by 1e-6 relative under a cosine's
# conditioning), is inside the tolerance. A wrong rule is still an O(1) error.
IMPLEMENTATION_ERROR = {
    "lgamma": 57,
    "digamma": 21,
    "polygamma": {1: 7, 2: 70, 3: 22, 4: 4592},
    "erf": 5,
    "erfc": 2,
    "erf_inv": 19,
    "bessel_i0e": 6,
    "bessel_i1e": 2,
    "igamma": 26,
    "igammac": 26,
    "igamma_grad_a": 307,
    "regularized_incomplete_beta": 85,
}


def eps(dtype) -> float:
    """The machine epsilon of a float dtype; of a complex dtype, its parts'
    (complex64: float32's)."""
    return float(ml_dtypes.finfo(real_dtype(np.dtype(dtype))).eps)


def _is_inexact(dtype) -> bool:
    dt = np.dtype(dtype)
    return (np.issubdtype(dt, np.floating) or np.issubdtype(dt, np.complexfloating)
            or dt == np.dtype(ml_dtypes.bfloat16))


def widened(x) -> np.ndarray:
    """x in float64, or complex128 where it is complex (both parts kept: a
    float64 cast would drop the imaginary one)."""
    return np.asarray(x, np.complex128 if np.iscomplexobj(x) else np.float64)


def compare(got, spec_value, reference, dtype, depth: int, scale: float = 1.0, noise_err: float = 0.0):
    """(ok, max_abs_err, max_rel_err, worst_index, tolerance)."""
    got_a, spec_a, ref_a = (np.asarray(x) for x in (got, spec_value, reference))
    if got_a.shape != spec_a.shape:
        return False, np.inf, np.inf, None, 0.0
    if not _is_inexact(dtype):
        # exactly, but where rounding noise decided otherwise (noise_err: the
        # mask of those positions, oracle.properties._noise)
        bad = (got_a != spec_a) & ~noise_err if isinstance(noise_err, np.ndarray) else got_a != spec_a
        return (not bad.any(), float(bad.sum()), float(bad.sum()),
                tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None, 0.0)
    g, s, r = (widened(x) for x in (got_a, spec_a, ref_a))
    nan_g, nan_s, inf_g, inf_s = np.isnan(g), np.isnan(s), np.isinf(g), np.isinf(s)
    # exactly: the same NaN positions, the same infinities (signs included)
    differs = (nan_g != nan_s) | (inf_g != inf_s) | (inf_g & inf_s & (g != s))
    if differs.any():
        return False, np.inf, np.inf, tuple(int(i) for i in np.argwhere(differs)[0]), 0.0
    finite = np.isfinite(s) & np.isfinite(r)      # JAX's is finite there too
    if not finite.any():
        return True, 0.0, 0.0, None, 0.0
    with np.errstate(invalid="ignore"):         # inf - inf where masked out
        err_jax = np.where(finite, np.abs(g - r), 0.0)
        spec_err = float(np.max(np.where(finite, np.abs(s - r), 0.0)))
    scale_ref = max(1.0, float(np.max(np.abs(r[finite]))))
    noise = float(noise_err) if np.isfinite(noise_err) else 0.0
    base = ULPS_PER_EQN * eps(dtype) * (depth + 1) * scale_ref
    tol = scale * (SAFETY * max(spec_err, noise) + base)
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(err_jax), err_jax.shape)) if err_jax.ndim else ()
    max_abs = float(err_jax.max())
    return max_abs <= tol, max_abs, max_abs / scale_ref, worst, tol


# --------------------------------------------------------------------------
# a model of rounding, for the conditioning estimate

# primitives whose results are exact in any dtype (they select or move
# values): no rounding noise; perturbing them would also break the equality
# tests some JVP rules make (reduce_max's location mask)
EXACT = frozenset({"neg", "abs", "max", "min", "reduce_max", "select_n", "stop_gradient", "name",
                   "device_put", "broadcast_in_dim", "reshape", "transpose", "squeeze", "concatenate",
                   "slice", "pad", "gt", "lt", "ge", "le", "eq", "ne",
                   "reduce_window_max", "reduce_window_min", "select_and_gather_add",
                   "optimization_barrier", "copy", "sharding_constraint",
                   "reduce_min", "cummax", "cummin", "sort", "top_k", "approx_top_k", "sign", "floor", "ceil", "round",
                   "gather", "scatter", "dynamic_slice", "dynamic_update_slice", "rev", "split", "clamp",
                   "iota", "argmax", "argmin", "is_finite"})

# Precision. dot_general and conv_general_dilated carry a `precision`
# (spec/prims_structural.py: None, a lax.Precision pair, a DotAlgorithmPreset
# name). On CPU (where the oracle runs) None and every Precision compute
# float32 operands in float32, so the program's dtype is the right model.
# Presets can round the operands to a narrower type: XLA:CPU honours
# F16_F16_F16 (float16 operands, ~1e-3 relative, measured in jax 0.10.2) and
# refuses most others; the noise of such a dot/conv uses the preset's operand
# type (`PRESET_OPERAND_DTYPE`), so the tolerance covers what the precision
# allows on any backend. The levels of lax.Precision (None, DEFAULT, HIGH,
# HIGHEST) round float32 operands on accelerators: `_operand_noise`, from the
# backend's Arithmetic (oracle/backends.py).
PRESET_OPERAND_DTYPE = {"F16_F16_F16": "float16", "F16_F16_F32": "float16", "BF16_BF16_BF16": "bfloat16",
                        "BF16_BF16_F32": "bfloat16", "TF32_TF32_F32": None}
TF32_EPS = 2.0 ** -10

# accumulations: their rounding noise grows with the number of terms summed
ACCUMULATIONS = frozenset({"dot_general", "reduce_sum", "conv_general_dilated", "reduce_window_sum",
                           "select_and_scatter_add"})


def _operand_noise(eqn, dtype, arithmetic):
    """u_a + u_b of a dot_general / conv_general_dilated whose float32
    operands the backend rounds to a narrower format, or 0.0."""
    if arithmetic is None or eqn.primitive.name not in ("dot_general", "conv_general_dilated"):
        return 0.0
    roundoffs = arithmetic.operand_roundoff(eqn.params.get("precision"), dtype)
    return float(sum(roundoffs)) if roundoffs else 0.0


def _operand_spread(eqn, ins):
    """sqrt(sum a_i^2 b_i^2) per result of a dot / convolution: its rule
    evaluated on the squared operands."""
    squares = [np.square(x) for x in ins]
    return np.sqrt(np.abs(np.asarray(eval_rules[eqn.primitive](*squares, **eqn.params))))


def _scatter_accumulation(eqn, ins):
    """(|operand| + the sum of |updates| landing on each result, the number
    of terms each result sums) of a scatter-add."""
    rule, params = eval_rules[eqn.primitive], eqn.params
    operand, indices, updates = ins
    magnitude = np.abs(np.asarray(rule(np.abs(operand), indices, np.abs(updates), **params)))
    landed = np.asarray(rule(np.zeros_like(operand), indices, np.ones_like(updates), **params))
    return magnitude, landed + 1


def _half_eps(eqn, dtype) -> float:
    """Half the eps of the type `eqn` rounds in: the program's dtype, a
    narrower preset operand type, or the format reduce_precision rounds to."""
    half = eps(dtype) / 2
    preset = eqn.params.get("precision")
    if eqn.primitive.name in ("dot_general", "conv_general_dilated") and preset in PRESET_OPERAND_DTYPE:
        narrow = PRESET_OPERAND_DTYPE[preset]
        half = max(half, (eps(ml_dtypes.bfloat16 if narrow == "bfloat16" else narrow) if narrow else TF32_EPS) / 2)
    if eqn.primitive.name == "reduce_precision":
        half = max(half, 2.0 ** -(eqn.params["mantissa_bits"] + 1))
    return half


def _accumulation(eqn, ins, out):
    """(the sum of |terms| per output element, the number of terms) of an
    accumulation: its rule evaluated on |operands| (a selection's operand
    as it is), and its contracted / windowed size."""
    name, params = eqn.primitive.name, eqn.params
    absolute = [np.abs(x) for x in ins] if name != "select_and_scatter_add" else [np.abs(ins[0]), ins[1]]
    magnitude = np.abs(np.asarray(eval_rules[eqn.primitive](*absolute, **params)))
    if name == "dot_general":
        (lc, _), _ = params["dimension_numbers"]
        terms = int(np.prod([np.shape(ins[0])[d] for d in lc]))
    elif name == "conv_general_dilated":       # input features per group x window
        terms = int(np.prod([np.shape(ins[1])[d] for d in params["rhs_spec"][1:]]))
    elif name in ("reduce_window_sum", "select_and_scatter_add"):
        terms = int(np.prod(params["window_dimensions"]))
    else:
        terms = max(max(np.size(ins[0]), 1) // max(out.size, 1), 1)
    return magnitude, max(terms, 1)


# LAPACK's factorizations and triangular solves are backward stable: their
# result is the exact one of an operand off by about eps of its size
# (Higham, Accuracy and Stability of Numerical Algorithms, chs. 8, 10, 19;
# Demmel, Applied Numerical Linear Algebra, 5.2 and 5.4 for eigh and svd).
# Where the result is ill-conditioned in the operand (a repeated or zero
# singular value or eigenvalue: its vectors, their signs and so the
# derivative's choice among subgradients; a near-tie between pivots) that,
# not a rounding of the result, is what rounding costs: the noisy run
# factors an operand perturbed so (found by a sweep of user code: the
# singular values of a rank-2 matrix, whose third is zero).
BACKWARD_STABLE = frozenset({"cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"})


def _refactored(eqn, ins, half_eps, rng) -> list:
    """The equation's results for its float operands perturbed by up to
    half_eps of their magnitude (a backward error)."""
    perturbed = [np.asarray(x) * (1 + half_eps * rng.uniform(-1, 1, np.shape(x)))
                 if np.asarray(x).dtype == np.float64 else x for x in ins]
    outs = eval_rules[eqn.primitive](*perturbed, **eqn.params)
    return list(outs) if eqn.primitive.multiple_results else [outs]


def _implementation_units(name: str, ins) -> float:
    """IMPLEMENTATION_ERROR's entry for an equation of `name` reading `ins`
    (polygamma's: the worst of the orders its first operand holds)."""
    units = IMPLEMENTATION_ERROR[name]
    if not isinstance(units, dict):
        return units
    worst = max(units.values())
    return max(units.get(int(m), worst) if float(m).is_integer() else worst for m in np.unique(np.asarray(ins[0])))


def _held_exactly(values, dtype):
    """Which float64 `values` `dtype` represents exactly: a correctly rounded
    operation producing one rounds nothing. (Perturbing them made 2.0 + 1.0,
    a polygamma order, 2.9999999, and polygamma of that NaN: every noise
    run of a polygamma's derivative was NaN, its noise estimate none; found
    by a pristine nightly, 1f9b59046c.)"""
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dtype).astype(np.float64) == values


def _fft_noise(eqn, ins, o, half_eps):
    """An FFT's rounding, as an accumulation's: every output element sums
    N = prod(fft_lengths) terms of modulus |x_n| (|w| = 1), so eps/2 *
    sqrt(N) * sum|x| over the transformed axes, broadcast along them."""
    k = len(eqn.params["fft_lengths"])
    axes = tuple(range(-k, 0))
    n = int(np.prod(eqn.params["fft_lengths"]))
    total = np.sum(np.abs(np.asarray(ins[0])), axis=axes, keepdims=True)
    return half_eps * np.sqrt(n) * np.broadcast_to(total, o.shape)


def _perturbed_complex(eqn, ins, o, dtype, half_eps, rng, sign, accumulation: bool):
    """A complex128 result perturbed as rounding in `dtype`'s parts could:
    the real and the imaginary part each by up to eps/2 of |o| (an
    accumulation's by eps/2 * sqrt(terms) * the sum of |terms|)."""
    if eqn.primitive.name == "fft":
        noise = _fft_noise(eqn, ins, o, half_eps)
    elif accumulation:
        magnitude, terms = _accumulation(eqn, ins, o)
        noise = half_eps * np.sqrt(terms) * np.abs(magnitude)
    else:
        noise = half_eps * np.abs(o)
    unit = rng.uniform(-1, 1, o.shape) + 1j * rng.uniform(-1, 1, o.shape)
    return o + sign * noise * unit


def rounding_noise_hook(dtype, rng, arithmetic=None, sign: float = 1.0):
    """A spec.evaluate hook for float64 runs that perturbs every float
    result as rounding in `dtype` could: by up to eps/2 of its magnitude,
    and for accumulations (dot_general, reduce_sum, convolutions, window
    sums) by eps/2 * sqrt(terms) * the sum of the absolute values of the
    terms (the size of an accumulation's rounding error, which a cancelling
    sum does not shrink). eps is that of a narrower type where the
    equation's precision or format rounds to one (`_half_eps`).
    `arithmetic` (an oracle.backends.Arithmetic; None: float32 as on CPU)
    adds the backend's terms (the module docstring): the rounding of a
    dot's or convolution's operands, and scatter-add's order. `sign` -1
    negates the random perturbations: with the same `rng` seed, the
    antithetic run, which rounds a tie at zero the other way (a comparison
    that rounding decides shows in one of the two)."""
    def hook(eqn, ins, outs):
        name = eqn.primitive.name
        if name in EXACT:        # selections and data movement round nothing
            return outs
        half_eps = _half_eps(eqn, dtype)
        if name in BACKWARD_STABLE:
            outs = _refactored(eqn, ins, half_eps, rng)
        operand_u = _operand_noise(eqn, dtype, arithmetic)
        unordered = name == "scatter-add" and arithmetic is not None and not arithmetic.deterministic
        new = []
        for o in outs:
            o = np.asarray(o)
            if o.dtype == np.complex128:      # each part perturbed as a float64 result is
                new.append(_perturbed_complex(eqn, ins, o, dtype, half_eps, rng, sign, name in ACCUMULATIONS))
                continue
            if o.dtype != np.float64:
                new.append(o)
                continue
            if name == "fft":        # an IRFFT's real result
                noise = _fft_noise(eqn, ins, o, half_eps)
            elif name in ACCUMULATIONS:
                magnitude, terms = _accumulation(eqn, ins, o)
                noise = half_eps * np.sqrt(terms) * magnitude
            elif unordered:
                magnitude, terms = _scatter_accumulation(eqn, ins)
                noise = half_eps * np.sqrt(terms) * magnitude
            elif name in IMPLEMENTATION_ERROR and np.dtype(dtype) == np.float32:
                noise = half_eps * _implementation_units(name, ins) * np.maximum(np.abs(o), 1.0)
            else:       # a result the dtype holds exactly is not rounded (2.0 + 1.0, a polygamma order)
                noise = np.where(_held_exactly(o, dtype), 0.0, half_eps * np.abs(o))
            perturbed = o + sign * noise * rng.uniform(-1, 1, o.shape)
            if operand_u:            # spread and mean of the operands' rounding, a random sign
                spread = _operand_spread(eqn, ins)
                perturbed = perturbed + sign * operand_u * (spread + np.abs(o)) * rng.choice([-1.0, 1.0], o.shape)
            new.append(perturbed)
        return new
    return hook
