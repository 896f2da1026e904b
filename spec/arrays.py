"""The small array namespace the evaluation rules are written against.

Each evaluation rule is written once, as `xp.sin(x)`, `xp.maximum(x, y)`,
..., where `xp = namespace(*operands)` is

* NUMERIC for numpy arrays: numpy, computing f16/bf16 in f32 and rounding
  the result once to the declared dtype (as XLA:CPU does), or
* SYMBOLIC for numpy object arrays of sympy expressions: the same
  operations on expressions, exactly, with no rounding.

So `spec.evaluate(prog, *symbolic_args)` evaluates a program symbolically
with the very rules that evaluate it numerically. Operations with no
symbolic meaning (comparisons, max/min, abs, rounding to int) are decided
at a concrete point when the caller supplies one (`assume`, a dict from
symbols to numbers, see spec.evaluate), and otherwise raise SymbolicError
naming the operation.
"""
from __future__ import annotations

import contextvars
import functools
import math

import numpy as np

from spec.ir import DTYPES


class SymbolicError(TypeError):
    """An operation that has no symbolic meaning met symbolic operands."""


def namespace(*xs):
    return SYMBOLIC if any(np.asarray(x).dtype == object for x in xs) else NUMERIC


class _Numeric:
    name = "numeric"

    @staticmethod
    def compute(x):
        """x in the dtype to compute with (f16/bf16 in f32)."""
        if x.dtype in (DTYPES["f16"], DTYPES["bf16"]):
            return x.astype(np.float32)
        return x

    @staticmethod
    def result(value, dtype):
        return np.asarray(value).astype(dtype)

    sin, cos, tanh, exp, log, log1p, sqrt = np.sin, np.cos, np.tanh, np.exp, np.log, np.log1p, np.sqrt
    square, negative, abs = np.square, np.negative, np.abs
    add, subtract, multiply, divide = np.add, np.subtract, np.multiply, np.divide
    maximum, minimum = np.maximum, np.minimum
    greater, less, greater_equal, less_equal = np.greater, np.less, np.greater_equal, np.less_equal
    equal, not_equal = np.equal, np.not_equal

    @staticmethod
    def logistic(x):
        with np.errstate(over="ignore"):
            return 1 / (1 + np.exp(-x))

    @staticmethod
    def rsqrt(x):
        return 1 / np.sqrt(x)

    @staticmethod
    def power(x, y: int):
        return np.power(x, y) if y > 0 else 1 / np.power(x, -y)

    @staticmethod
    def reduce_max(x, axes):
        return np.max(x, axis=axes)

    erf = staticmethod(np.vectorize(__import__("math").erf, otypes=[np.float64]))
    erfc = staticmethod(np.vectorize(__import__("math").erfc, otypes=[np.float64]))

    # -- spec/prims_math.py: more elementwise functions (numpy's kernels) --
    tan, sinh, cosh = np.tan, np.sinh, np.cosh
    asinh, acosh, atanh = np.arcsinh, np.arccosh, np.arctanh
    asin, acos, atan, atan2 = np.arcsin, np.arccos, np.arctan, np.arctan2
    exp2, expm1, cbrt = np.exp2, np.expm1, np.cbrt
    is_finite, floor, ceil = np.isfinite, np.floor, np.ceil

    @staticmethod
    def sign(x):
        """-1, 0, 1 (and nan); a zero keeps its sign, as XLA's sign (numpy's gives +0)."""
        return np.where(x == 0, x, np.sign(x))
    nextafter = np.nextafter
    rem = np.fmod            # C's fmod: the sign of the dividend, |rem| < |divisor|
    round_even = np.rint     # halves to the even neighbour

    @staticmethod
    def round_away(x):
        """Halves away from zero (XLA's round_nearest_afz), keeping the sign of 0."""
        a = np.abs(x)
        r = np.floor(a)
        with np.errstate(invalid="ignore"):      # inf - inf where a is infinite (r is kept)
            return np.copysign(np.where(a - r >= 0.5, r + 1, r), x)

    @staticmethod
    def pow(x, y):
        """x ** y elementwise, C's pow (a negative base needs an integer exponent)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.power(x, y)

    @staticmethod
    def erf_inv(y):
        """The inverse of erf on (-1, 1) (+-inf at +-1, nan outside): Winitzki's
        closed-form estimate refined by Newton steps on erf(x) - y in float64."""
        y = np.asarray(y, np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = np.abs(y) < 1
            yc = np.where(inside, y, 0.0)
            a, ln = 0.147, np.log1p(-yc * yc)
            t = 2 / (np.pi * a) + ln / 2
            x = np.sign(yc) * np.sqrt(np.sqrt(t * t - ln / a) - t)
            erf = np.vectorize(__import__("math").erf, otypes=[np.float64])
            for _ in range(6):
                x = x - (erf(x) - yc) / (2 / np.sqrt(np.pi) * np.exp(-x * x))
            return np.where(inside, x, np.where(np.abs(y) == 1, np.sign(y) * np.inf, np.nan))

    # -- spec/prims_special.py: the gamma family (float64; poles as XLA has them) --
    @staticmethod
    def lgamma(x):
        """log|Gamma(x)|: +inf at the poles (non-positive integers) and at +-inf."""
        x = np.asarray(x, np.float64)
        pole = (x <= 0) & (x == np.floor(x))
        safe = np.where(pole | ~np.isfinite(x), 1.0, x)
        out = np.vectorize(math.lgamma, otypes=[np.float64])(safe)
        return np.where(pole | np.isinf(x), np.inf, np.where(np.isnan(x), np.nan, out))

    @staticmethod
    def digamma(x):
        """psi(x) = Gamma'(x)/Gamma(x): reflection psi(1-x) - pi/tan(pi x) below
        1/2, recurrence psi(x) = psi(x+1) - 1/x up to 10, then the asymptotic
        series; nan at the poles and at -inf, +inf at +inf."""
        x = np.asarray(x, np.float64)
        pole = (x <= 0) & (x == np.floor(x))
        finite = np.isfinite(x) & ~pole
        z = np.where(finite, x, 1.0)
        reflect = z < 0.5
        with np.errstate(divide="ignore", invalid="ignore"):
            shift = np.where(reflect, -np.pi / np.tan(np.pi * z), 0.0)
        z = np.where(reflect, 1.0 - z, z)
        acc = np.zeros_like(z)
        while np.any(z < 10):
            small = z < 10
            acc = acc - np.where(small, 1.0 / z, 0.0)
            z = np.where(small, z + 1, z)
        inv2 = 1.0 / (z * z)
        series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
        out = np.log(z) - 0.5 / z - series + acc + shift
        return np.where(finite, out, np.where(x == np.inf, np.inf, np.nan))

    @staticmethod
    def polygamma(m, x):
        """psi^(m)(x): digamma for m = 0; for integer m >= 1,
        (-1)^(m+1) m! sum_k 1/(x+k)^(m+1) (the Hurwitz zeta series: first terms
        summed until x+k >= 10 + 2m, the rest by Euler-Maclaurin). As XLA: nan for a
        non-integer or negative m and at +inf; at a pole (and -inf) +inf for odd
        m, nan for even m."""
        m, x = np.broadcast_arrays(np.asarray(m, np.float64), np.asarray(x, np.float64))
        valid = (m >= 0) & (m == np.floor(m))
        order = np.where(valid & np.isfinite(m) & (m >= 1), m, 1.0)   # m = 0: digamma, below
        pole = ((x <= 0) & (x == np.floor(x))) | (x == -np.inf)
        finite = np.isfinite(x) & ~pole
        q = np.where(finite, x, 1.0)
        s = order + 1
        total = np.zeros_like(q)
        start = 10 + 2 * order            # where the Euler-Maclaurin tail below is float64-exact
        while np.any(q < start):
            small = q < start
            total = total + np.where(small, q ** -s, 0.0)
            q = np.where(small, q + 1, q)
        # Euler-Maclaurin: q^(1-s)/(s-1) + q^-s/2 + sum_j B_2j/(2j)! s(s+1)..(s+2j-2) q^(-s-2j+1)
        total = total + q ** (1 - s) / (s - 1) + 0.5 * q ** -s
        rising, power, top = s, q ** (-s - 1), s
        for b2j_over_fact in (1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160):
            total = total + b2j_over_fact * rising * power
            rising, power, top = rising * (top + 1) * (top + 2), power / (q * q), top + 2
        sign = np.where(order % 2 == 1, 1.0, -1.0)
        value = sign * np.vectorize(math.factorial, otypes=[np.float64])(order.astype(np.int64)) * total
        at_pole = np.where(order % 2 == 1, np.inf, np.nan)
        out = np.where(finite, value, np.where(pole, at_pole, np.nan))
        out = np.where(m == 0, _Numeric.digamma(x), out)
        return np.where(valid, out, np.nan)

    # -- spec/prims_special.py: Bessel i0e/i1e, incomplete gamma and beta (float64;
    #    the special points -- 0, infinities, NaN, the domain's edges -- as XLA has them) --
    @staticmethod
    def bessel_i0e(x):
        """exp(-|x|) I0(x): even, 1 at 0, 0 at +-inf."""
        return _bessel_ie(0, x)

    @staticmethod
    def bessel_i1e(x):
        """exp(-|x|) I1(x): odd (-0 at -0 and -inf), 0 at +inf."""
        return _bessel_ie(1, x)

    @staticmethod
    def igamma(a, x):
        """P(a, x) = gamma(a, x) / Gamma(a), the regularized lower incomplete gamma."""
        return _igamma(a, x, "igamma")

    @staticmethod
    def igammac(a, x):
        """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma."""
        return _igamma(a, x, "igammac")

    @staticmethod
    def igamma_grad_a(a, x):
        """dP(a, x)/da."""
        return _igamma(a, x, "igamma_grad_a")

    @staticmethod
    def regularized_incomplete_beta(a, b, x):
        """I_x(a, b) = B(x; a, b) / B(a, b)."""
        return _betainc(a, b, x)

    # -- spec/prims_reductions.py: reductions, cumulative ops, sort --
    @staticmethod
    def reduce_min(x, axes):
        return np.min(x, axis=axes)

    @staticmethod
    def reduce_prod(x, axes):
        return np.prod(x, axis=axes)

    @staticmethod
    def reduce_and(x, axes):
        return np.bitwise_and.reduce(x, axis=axes) if x.dtype != np.bool_ else np.all(x, axis=axes)

    @staticmethod
    def reduce_or(x, axes):
        return np.bitwise_or.reduce(x, axis=axes) if x.dtype != np.bool_ else np.any(x, axis=axes)

    @staticmethod
    def cumulative(op, x, axis, reverse):
        """op in (cumsum, cumprod, cummax, cummin, cumlogsumexp) along `axis`;
        reverse accumulates from the end."""
        ufunc = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum,
                 "cummin": np.minimum, "cumlogsumexp": np.logaddexp}[op]
        x = np.flip(x, axis) if reverse else x
        with np.errstate(over="ignore", invalid="ignore"):
            out = ufunc.accumulate(x, axis=axis, dtype=x.dtype)
        return np.flip(out, axis) if reverse else out

    @staticmethod
    def sort(operands, dimension, num_keys):
        """Stable lexicographic sort of all operands by the first num_keys
        (floats in the total order -inf < ... < -0 == 0 < ... < inf < nan)."""
        return _sort(operands, dimension, num_keys, _numeric_key_order)

    @staticmethod
    def top_k(x, k, axis):
        """The k largest along `axis`, in decreasing order, and their indices."""
        return _top_k(x, k, axis, _numeric_key_order)


# -- numerical helpers of spec/prims_special.py's Bessel and incomplete gamma/beta
#    functions (float64; written after Numerical Recipes' and Cephes' algorithms) --

_EPS64 = float(np.finfo(np.float64).eps)
_LOG_MAX64 = float(np.log(np.finfo(np.float64).max))
_BESSEL_SERIES_MAX = 30.0      # |x| up to which the power series is summed (beyond: the asymptotic series)


def _bessel_ie(nu: int, x):
    """exp(-|x|) I_nu(x), nu in (0, 1). For |x| <= 30 the power series
    sum_k (x/2)^(2k+nu) / (k! (k+nu)!) (positive terms: no cancellation)
    times exp(-|x|); beyond, Hankel's asymptotic expansion
    (2 pi |x|)^(-1/2) sum_k (-1)^k prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! (8|x|)^k),
    whose 40th term is below 1e-23 there. I1 is odd (the sign of x, -0 and
    -inf included); NaN stays NaN."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    small = ax <= _BESSEL_SERIES_MAX
    z = np.where(small, ax, 0.0)
    q = (z / 2) ** 2
    term = z / 2 if nu == 1 else np.ones_like(z)
    total = term.copy()
    k = 0
    while True:
        k += 1
        term = term * q / (k * (k + nu))
        total = total + term
        if np.all(term <= 1e-17 * total):
            break
    series = total * np.exp(-z)
    w = np.where(small | np.isnan(ax), 2 * _BESSEL_SERIES_MAX, ax)
    mu = 4.0 * nu * nu
    term = np.ones_like(w)
    total = term.copy()
    with np.errstate(invalid="ignore"):
        for j in range(1, 41):
            term = term * -(mu - (2 * j - 1) ** 2) / (j * 8 * w)
            total = total + term
        asymptotic = total / np.sqrt(2 * np.pi * w)
    out = np.where(small, series, asymptotic)
    if nu == 1:
        out = np.copysign(out, x)
    return np.where(np.isnan(x), np.nan, out)


def _igamma_series(ax, x, a, enabled, derivative: bool):
    """XLA's _igamma_series (jax/_src/lax/special.py, after Cephes' igam):
    P(a, x) = ax / a * sum_n x^n / ((a+1)...(a+n)), ax = x^a e^-x / Gamma(a);
    with `derivative` dP/da from the series' a-derivative summed alongside.
    Elements not `enabled` keep the initial values (as XLA's selects do)."""
    r, xs = a.copy(), np.where(enabled, x, 1.0)
    c, ans = np.ones_like(a), np.ones_like(a)
    dc_da, dans_da = np.zeros_like(a), np.zeros_like(a)
    active = enabled.copy()
    for _ in range(100000):
        if not np.any(active):
            break
        r_n = r + 1
        dc_da_n = dc_da * (xs / r_n) - (c * xs) / (r_n * r_n)
        dans_da_n = dans_da + dc_da_n
        c_n = c * (xs / r_n)
        ans_n = ans + c_n
        r, c, ans = np.where(active, r_n, r), np.where(active, c_n, c), np.where(active, ans_n, ans)
        dc_da, dans_da = np.where(active, dc_da_n, dc_da), np.where(active, dans_da_n, dans_da)
        going = c / ans > _EPS64
        if derivative:
            going = going | (np.abs(dc_da / dans_da) > _EPS64)
        active = active & going
    if not derivative:
        return ans * ax / a
    dlogax_da = np.log(x) - _Numeric.digamma(a + 1)
    return ax * (ans * dlogax_da + dans_da) / a


def _igammac_continued_fraction(ax, x, a, enabled, derivative: bool):
    """XLA's _igammac_continued_fraction (after Cephes' igamc): Q(a, x) =
    ax * CF(a, x) by the convergents p_k / q_k, with their a-derivatives
    for dQ/da (`derivative`); rescaled by eps when |p_k| > 1/eps. At most
    2000 steps; elements not `enabled` keep the initial values."""
    y = 1 - a
    z = x + y + 1
    pkm2, qkm2 = np.ones_like(x), x.copy()
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x), -x
    dans = (dpkm1 - ans * dqkm1) / qkm1
    active = enabled.copy()
    c = 0.0
    while c < 2000 and np.any(active):
        c += 1
        y_n, z_n = y + 1, z + 2
        yc = y_n * c
        pk = pkm1 * z_n - pkm2 * yc
        qk = qkm1 * z_n - qkm2 * yc
        nonzero = qk != 0
        r = pk / np.where(nonzero, qk, 1.0)
        t = np.where(nonzero, np.abs((ans - r) / r), 1.0)
        ans_n = np.where(nonzero, r, ans)
        dpk = dpkm1 * z_n - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z_n - qkm1 - dqkm2 * yc + qkm2 * c
        dans_n = np.where(nonzero, (dpk - ans_n * dqk) / np.where(nonzero, qk, 1.0), dans)
        dt = np.where(nonzero, np.abs(dans_n - dans), 1.0)
        n_pkm2, n_pkm1, n_qkm2, n_qkm1 = pkm1, pk, qkm1, qk
        n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1 = dpkm1, dqkm1, dpk, dqk
        rescale = np.abs(pk) > 1 / _EPS64
        scale = np.where(rescale, _EPS64, 1.0)
        n_pkm2, n_pkm1, n_qkm2, n_qkm1 = n_pkm2 * scale, n_pkm1 * scale, n_qkm2 * scale, n_qkm1 * scale
        n_dpkm2, n_dqkm2 = n_dpkm2 * scale, n_dqkm2 * scale
        n_dpkm1, n_dqkm1 = n_dpkm1 * scale, n_dqkm1 * scale
        keep = lambda new, old: np.where(active, new, old)  # noqa: E731
        ans, y, z = keep(ans_n, ans), keep(y_n, y), keep(z_n, z)
        pkm2, pkm1, qkm2, qkm1 = keep(n_pkm2, pkm2), keep(n_pkm1, pkm1), keep(n_qkm2, qkm2), keep(n_qkm1, qkm1)
        dpkm2, dqkm2 = keep(n_dpkm2, dpkm2), keep(n_dqkm2, dqkm2)
        dpkm1, dqkm1 = keep(n_dpkm1, dpkm1), keep(n_dqkm1, dqkm1)
        dans = keep(dans_n, dans)
        going = t > _EPS64
        if derivative:      # XLA stops on |d ans| <= eps; relative here, for float64 accuracy at any scale
            going = going | (dt > _EPS64 * np.abs(dans_n))
        active = active & going
    if not derivative:
        return ans * ax
    return ax * (ans * (np.log(x) - _Numeric.digamma(a)) + dans)


def _igamma(a, x, which: str):
    """igamma, igammac or igamma_grad_a as XLA computes them (special.py's
    igamma_impl, igammac_impl, igamma_grad_a_impl), in float64: the series
    or the continued fraction where XLA chooses it, XLA's guards (domain,
    underflow of x^a e^-x / Gamma(a), x = 0, x = inf, a = 0) and its selects
    at the special points (so igamma(0, 0.5) is NaN there, as in XLA)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    a, x = a.copy(), x.copy()
    with np.errstate(all="ignore"):
        is_nan = np.isnan(a) | np.isnan(x)
        x_inf, a_zero, x_zero = x == np.inf, a == 0, x == 0
        if which == "igamma_grad_a":
            domain = (x < 0) | (a <= 0)
        else:
            domain = (x < 0) | (a < 0) | (a_zero & x_zero) | is_nan
        logax = a * np.log(x) - x - _Numeric.lgamma(a)
        underflow = logax < -_LOG_MAX64
        ax = np.exp(logax)
        if which == "igamma":
            use_cf = (x >= 1) & (x > a)
            enabled = ~(x_zero | domain | underflow | x_inf)
            out = np.where(use_cf, 1 - _igammac_continued_fraction(ax, x, a, enabled & use_cf, False),
                           _igamma_series(ax, x, a, enabled & ~use_cf, False))
            out = np.where(x_zero, 0.0, out)
            out = np.where(x_inf, 1.0, out)
            return np.where(domain, np.nan, out)
        if which == "igammac":
            use_series = (x < 1) | (x < a)
            enabled = ~(domain | underflow | x_inf | a_zero)
            out = np.where(use_series, 1 - _igamma_series(ax, x, a, enabled & use_series, False),
                           _igammac_continued_fraction(ax, x, a, enabled & ~use_series, False))
            out = np.where(x_inf | a_zero, 0.0, out)
            return np.where(domain, np.nan, out)
        use_cf = (x > 1) & (x > a)
        enabled = ~(x_zero | domain | underflow | is_nan)
        out = np.where(use_cf, -_igammac_continued_fraction(ax, x, a, enabled & use_cf, True),
                       _igamma_series(ax, x, a, enabled & ~use_cf, True))
        out = np.where(x_zero, 0.0, out)
        return np.where(domain | is_nan, np.nan, out)


def _betacf(a, b, x):
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf,
    modified Lentz; DLMF 8.17.22): converges fast for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c = np.ones_like(x)
    d = 1 - qab * x / qap
    d = 1 / np.where(np.abs(d) < tiny, tiny, d)
    h = d.copy()
    active = np.ones(x.shape, bool)
    for m in range(1, 3000):
        if not np.any(active):
            break
        m2 = 2 * m
        h_n = h
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                    -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + num * d
            d = np.where(np.abs(d) < tiny, tiny, d)
            c = 1 + num / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            d = 1 / d
            delta = d * c
            h_n = h_n * delta
        h = np.where(active, h_n, h)
        active = active & (np.abs(delta - 1) > _EPS64)
    return h


def _betainc(a, b, x):
    """I_x(a, b) as XLA computes it (special.py's regularized_incomplete_beta_impl),
    in float64: the continued fraction at x < (a+1)/(a+b+2), else 1 - I_{1-x}(b, a),
    times x^a (1-x)^b / (a B(a, b)) (a Gamma(a) -> 1 for a below 2 tiny); XLA's
    selects at the special points: a = 0 or b = inf gives 1 (0 at x = 0), b = 0
    or a = inf gives 0 (1 at x = 1), NaN outside a, b >= 0, 0 <= x <= 1."""
    a, b, x = (v.copy() for v in np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, x))))
    with np.errstate(all="ignore"):
        a_zero = (a == 0) | (b == np.inf)
        b_zero = (b == 0) | (a == np.inf)
        x_zero, x_one = x == 0, x == 1
        is_nan = np.isnan(a) | np.isnan(b) | np.isnan(x)
        result_zero = (b_zero & ~x_one) | (a_zero & x_zero)
        result_one = (a_zero & ~x_zero) | (b_zero & x_one)
        result_nan = (a < 0) | (b < 0) | (x < 0) | (x > 1) | (a_zero & b_zero) | is_nan
        special = result_zero | result_one | result_nan
        a, b, x = np.where(special, 1.0, a), np.where(special, 1.0, b), np.where(special, 0.5, x)
        rapid = x < (a + 1) / (a + b + 2)
        a, b, x = np.where(rapid, a, b), np.where(rapid, b, a), np.where(rapid, x, 1 - x)
        lbeta_small_a = _Numeric.lgamma(b) - _Numeric.lgamma(a + b)
        lbeta = _Numeric.lgamma(a) + lbeta_small_a
        factor = np.where(a < 2 * np.finfo(np.float64).tiny, np.exp(np.log1p(-x) * b - lbeta_small_a),
                          np.exp(np.log(x) * a + np.log1p(-x) * b - lbeta) / a)
        out = _betacf(a, b, x) * factor
        out = np.where(rapid, out, 1 - out)
    out = np.where(result_zero, 0.0, out)
    out = np.where(result_one, 1.0, out)
    return np.where(result_nan, np.nan, out)


# -- symbolic ----------------------------------------------------------------

_ASSUME = contextvars.ContextVar("assume", default=None)


def _sympy():
    import sympy  # imported when a symbolic value is met: slow to import, unused by numeric runs
    return sympy


def _elementwise(fn):
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: np.asarray(ufunc(x), dtype=object)


def _decide(name, relation):
    """A comparison on expressions: decided by sympy, or at the caller's
    concrete point (`assume`), else an error naming it."""
    sympy = _sympy()

    def decide(a, b):
        r = relation(a, b)
        if r in (sympy.true, sympy.false, True, False):
            return bool(r)
        point = _ASSUME.get()
        if point:
            r = relation(sympy.sympify(a).subs(point), sympy.sympify(b).subs(point))
            if r in (sympy.true, sympy.false, True, False):
                return bool(r)
        raise SymbolicError(f"{name}: cannot decide {relation.__name__}({a}, {b}) symbolically; "
                            "pass assume={symbol: value} to evaluate to take the branch at that point")
    ufunc = np.frompyfunc(decide, 2, 1)
    return lambda a, b: np.asarray(ufunc(a, b), dtype=bool)


class _Symbolic:
    name = "sympy"

    @staticmethod
    def compute(x):
        """Numbers (literals, integer inputs) become exact sympy numbers: a
        float literal is the rational it denotes (0.5 -> 1/2)."""
        x = np.asarray(x)
        if x.dtype == object:
            return x
        sympy = _sympy()
        exact = np.frompyfunc(lambda v: sympy.Rational(v) if isinstance(v, float) else sympy.Integer(int(v)), 1, 1)
        return np.asarray(exact(x.astype(np.float64) if x.dtype.kind == "f" else x), dtype=object)

    @staticmethod
    def result(value, dtype):
        return np.asarray(value, dtype=object)

    def __getattr__(self, name):
        return _symbolic_op(name)


@functools.lru_cache(maxsize=None)
def _symbolic_op(name):
    sympy = _sympy()
    unary = {"sin": sympy.sin, "cos": sympy.cos, "tanh": sympy.tanh, "exp": sympy.exp,
             "log": sympy.log, "sqrt": sympy.sqrt, "log1p": lambda x: sympy.log(1 + x),
             "square": lambda x: x ** 2, "negative": lambda x: -x,
             "logistic": lambda x: 1 / (1 + sympy.exp(-x)), "rsqrt": lambda x: 1 / sympy.sqrt(x),
             "erf": sympy.erf, "erfc": sympy.erfc}
    if name in unary:
        return _elementwise(unary[name])
    binary = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
              "divide": lambda a, b: np.asarray(np.frompyfunc(lambda p, q: p / q, 2, 1)(a, b), dtype=object)}
    if name in binary:
        f = binary[name]
        return lambda a, b: np.asarray(f(SYMBOLIC.compute(a), SYMBOLIC.compute(b)), dtype=object)
    rel = {"greater": sympy.Gt, "less": sympy.Lt, "greater_equal": sympy.Ge, "less_equal": sympy.Le,
           "equal": lambda a, b: sympy.true if sympy.simplify(a - b) == 0 else (
               sympy.false if (a - b).is_nonzero else sympy.Eq(a, b)),
           "not_equal": lambda a, b: sympy.false if sympy.simplify(a - b) == 0 else (
               sympy.true if (a - b).is_nonzero else sympy.Ne(a, b))}
    if name in rel:
        r = rel[name]
        r.__name__ = getattr(r, "__name__", name) if name not in ("equal", "not_equal") else name
        return _decide(name, r)
    if name in ("maximum", "minimum"):
        pick = _decide(name, sympy.Ge if name == "maximum" else sympy.Le)
        return lambda a, b: np.where(pick(a, b), np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    if name == "abs":
        nonneg = _decide("abs", sympy.Ge)
        return lambda x: np.where(nonneg(x, 0), np.asarray(x, dtype=object), -np.asarray(x, dtype=object))
    if name == "power":
        return lambda x, y: np.asarray(np.frompyfunc(lambda v: v ** y, 1, 1)(x), dtype=object)
    if name == "reduce_max":
        def reduce_max(x, axes):
            x = np.asarray(x, dtype=object)
            keep = [i for i in range(x.ndim) if i not in axes]
            moved = np.transpose(x, keep + list(axes)).reshape([x.shape[i] for i in keep] + [-1])
            ge = _decide("reduce_max", sympy.Ge)
            out = np.empty(moved.shape[:-1], dtype=object)
            for idx in np.ndindex(*moved.shape[:-1]):
                best = moved[idx + (0,)]
                for v in moved[idx][1:]:
                    if not ge(best, v):
                        best = v
                out[idx] = best
            return out
        return reduce_max
    extra = _symbolic_math_op(name)
    if extra is not None:
        return extra
    raise AttributeError(f"the symbolic namespace has no operation {name!r}")


# -- symbolic meanings of the operations of spec/prims_math.py and
#    spec/prims_reductions.py ---------------------------------------------

def _at_point(name, e):
    """An expression's exact value at the caller's point (a sympy number)."""
    sympy = _sympy()
    e = sympy.sympify(e)
    if e.is_number:
        return e
    point = _ASSUME.get()
    v = e.subs(point) if point else e
    if not v.is_number:
        raise SymbolicError(f"{name}: {e} is piecewise constant; pass assume={{symbol: value}} "
                            "to evaluate to take its value at that point")
    return sympy.nsimplify(v) if v.is_Float else v


def _locally_constant(name, value, jumps):
    """A piecewise-constant function: near the caller's point it is the
    constant value(v) at v = the argument there. At a jump (jumps(v)) it
    is constant on neither side, so a symbolic argument raises there."""
    sympy = _sympy()

    def one(e):
        v = _at_point(name, e)
        if not sympy.sympify(e).is_number and jumps(v):
            raise SymbolicError(f"{name}: {e} = {v} at the given point, where {name} jumps")
        return value(v)
    return _elementwise(one)


def _round_half(v, away):
    sympy = _sympy()
    f = sympy.floor(v)
    d = v - f
    if d != sympy.Rational(1, 2):
        return f + (1 if d > sympy.Rational(1, 2) else 0)
    if away:
        return f + 1 if v > 0 else f
    return f if f % 2 == 0 else f + 1


def _fold(x, axes, step):
    """Reduce `axes` of an object array with step(acc, value), in index order."""
    x = np.asarray(x, dtype=object)
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes)).reshape([x.shape[i] for i in keep] + [-1])
    out = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(*moved.shape[:-1]):
        acc = moved[idx + (0,)]
        for v in moved[idx][1:]:
            acc = step(acc, v)
        out[idx] = acc
    return out


def _scan(x, axis, reverse, step):
    """Inclusive prefix combination of an object array along `axis`."""
    x = np.moveaxis(np.asarray(x, dtype=object), axis, -1)
    x = x[..., ::-1] if reverse else x
    out = np.empty(x.shape, dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        acc = None
        for j, v in enumerate(x[idx]):
            acc = v if j == 0 else step(acc, v)
            out[idx + (j,)] = acc
    out = out[..., ::-1] if reverse else out
    return np.moveaxis(out, -1, axis)


def _numeric_key_order(keys):
    """Row permutations (last axis) sorting numeric keys lexicographically, stably."""
    cols = [np.where(k == 0, 0.0, k.astype(np.float64)) if k.dtype.kind == "f" or k.dtype == object
            else k.astype(np.int64) for k in keys]
    flat = [c.reshape(-1, c.shape[-1]) for c in cols]
    perm = np.stack([np.lexsort([f[r] for f in reversed(flat)]) for r in range(flat[0].shape[0])])
    return perm.reshape(cols[0].shape)


def _symbolic_key_order(keys):
    """Row permutations sorting expressions lexicographically, stably, with
    each comparison decided by sympy or at the caller's point."""
    sympy = _sympy()
    lt = _decide("sort", sympy.Lt)
    perm = np.empty(keys[0].shape, dtype=np.int64)
    for idx in np.ndindex(*keys[0].shape[:-1]):
        rows = [np.asarray(k[idx], dtype=object) for k in keys]

        def cmp(i, j):
            for r in rows:
                if lt(r[i], r[j]):
                    return -1
                if lt(r[j], r[i]):
                    return 1
            return 0
        perm[idx] = sorted(range(len(rows[0])), key=functools.cmp_to_key(cmp))
    return perm


def _sort(operands, dimension, num_keys, order):
    """Sort every operand along `dimension` by the permutation that `order`
    gives for the first num_keys operands (moved to the last axis)."""
    moved = [np.moveaxis(np.asarray(o), dimension, -1) for o in operands]
    perm = order(moved[:num_keys])
    return [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dimension) for m in moved]


def _top_k(x, k, axis, order):
    """The k largest values along `axis` (earlier index first among equals) and their int32 indices."""
    moved = np.moveaxis(np.asarray(x), axis, -1)
    neg = -moved if moved.dtype != object else np.asarray(-moved, dtype=object)
    perm = order([neg])[..., :k]
    vals = np.take_along_axis(moved, perm, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(perm.astype(np.int32), -1, axis)


def _symbolic_math_op(name):
    """The symbolic operation `name` of prims_math / prims_reductions, or None."""
    sympy = _sympy()
    unary = {"tan": sympy.tan, "sinh": sympy.sinh, "cosh": sympy.cosh, "asinh": sympy.asinh,
             "acosh": sympy.acosh, "atanh": sympy.atanh, "asin": sympy.asin, "acos": sympy.acos,
             "atan": sympy.atan, "exp2": lambda x: 2 ** x, "expm1": lambda x: sympy.exp(x) - 1,
             "cbrt": sympy.cbrt, "erf_inv": sympy.erfinv, "lgamma": sympy.loggamma,
             "digamma": sympy.digamma}
    if name in unary:
        return _elementwise(unary[name])
    const = {"sign": (sympy.sign, lambda v: v == 0),
             "floor": (sympy.floor, lambda v: v.is_integer),
             "ceil": (sympy.ceiling, lambda v: v.is_integer),
             "round_even": (lambda v: _round_half(v, False), lambda v: (2 * v).is_integer and not v.is_integer),
             "round_away": (lambda v: _round_half(v, True), lambda v: (2 * v).is_integer and not v.is_integer)}
    if name in const:
        return _locally_constant(name, *const[name])
    pair = lambda f: lambda a, b: np.asarray(np.frompyfunc(f, 2, 1)(SYMBOLIC.compute(a), SYMBOLIC.compute(b)),
                                             dtype=object)
    if name == "atan2":
        return pair(sympy.atan2)
    if name == "polygamma":
        return pair(sympy.polygamma)
    if name == "pow":
        return pair(lambda a, b: a ** b)
    if name == "rem":
        # x - y * trunc(x / y), the quotient decided at the point (constant near it)
        trunc = _locally_constant("rem", lambda v: sympy.sign(v) * sympy.floor(abs(v)), lambda v: v.is_integer)
        return pair(lambda a, b: a - b * trunc(np.asarray(a / b, dtype=object)).item())
    if name == "is_finite":
        def finite(e):
            r = sympy.sympify(e).is_finite
            return bool(r) if r is not None else bool(_at_point("is_finite", e).is_finite)
        return lambda x: np.asarray(np.frompyfunc(finite, 1, 1)(x), dtype=bool)
    if name == "nextafter":
        def nextafter(*_):
            raise SymbolicError("nextafter: the next representable number has no exact symbolic meaning")
        return nextafter
    if name in ("bessel_i0e", "bessel_i1e", "igamma", "igammac", "igamma_grad_a", "regularized_incomplete_beta"):
        def numeric_only(*_):
            raise SymbolicError(f"{name}: evaluated numerically only (series and continued fractions, with "
                                "XLA's selects at the special points)")
        return numeric_only
    if name in ("reduce_min", "reduce_prod"):
        le = _decide("reduce_min", sympy.Le)
        step = (lambda a, v: a if le(a, v) else v) if name == "reduce_min" else (lambda a, v: a * v)
        return lambda x, axes: _fold(x, tuple(axes), step)
    if name == "cumulative":
        ge, le = _decide("cummax", sympy.Ge), _decide("cummin", sympy.Le)
        steps = {"cumsum": lambda a, v: a + v, "cumprod": lambda a, v: a * v,
                 "cummax": lambda a, v: a if ge(a, v) else v, "cummin": lambda a, v: a if le(a, v) else v,
                 "cumlogsumexp": None}

        def cumulative(op, x, axis, reverse):
            if op == "cumlogsumexp":     # log(cumsum(exp(x))), exactly
                e = _elementwise(sympy.exp)(SYMBOLIC.compute(x))
                return _elementwise(sympy.log)(_scan(e, axis, reverse, steps["cumsum"]))
            return _scan(SYMBOLIC.compute(x), axis, reverse, steps[op])
        return cumulative
    if name == "sort":
        return lambda operands, dimension, num_keys: _sort(
            [SYMBOLIC.compute(o) if np.asarray(o).dtype.kind == "f" else np.asarray(o) for o in operands],
            dimension, num_keys, _symbolic_key_order)
    if name == "top_k":
        return lambda x, k, axis: _top_k(SYMBOLIC.compute(x), k, axis, _symbolic_key_order)
    return None


NUMERIC = _Numeric()
SYMBOLIC = _Symbolic()
