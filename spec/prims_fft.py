"""The fast Fourier transform (jax/_src/lax/fft.py): fft.

`fft[fft_type, fft_lengths]` transforms the last len(fft_lengths) axes:

    FFT    complex -> complex   X_k = sum_n x_n exp(-2 pi i k.n / N)
    IFFT   complex -> complex   x_n = (1/N) sum_k X_k exp(+2 pi i k.n / N)
    RFFT   real -> complex      FFT of a real x, the last axis cut to N//2 + 1
    IRFFT  complex -> real      the inverse of RFFT (the spectrum taken
                                Hermitian: the imaginary parts of the zero
                                and Nyquist frequencies do not count)

It is linear (`ad.deflinear2`): a backward pass saves nothing of it.

    >>> import spec
    >>> prog = spec.trace(lambda x: fft(x, FftType.RFFT, (8,)), spec.f32[8])
    >>> print(prog.out_types[0])
    c64[5]
"""
from __future__ import annotations

import enum
import math

import numpy as np

from spec.batching import moveaxis
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, complex_rules, eval_rules,
                       examples, jax_facts, jvp_rules, linear_jvp, primitive, shape_rules, trace, transpose_rules)
from spec.ir import ArrayType, complex_dtype, is_complex, real_dtype
from spec.prims_complex import COMPLEX_PART_DTYPES, complex, conj, imag, real
from spec.prims_elementwise import div, mul
from spec.prims_call import call
from spec.prims_indexing import dynamic_update_slice
from spec.prims_structural import broadcast_in_dim


class FftType(enum.IntEnum):
    """jax.lax.FftType (jax/_src/lax/fft.py), value for value."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


fft_p = primitive("fft", ["fft_type", "fft_lengths"])


def fft(x, fft_type, fft_lengths):
    """lax.fft's primitive: the `fft_type` transform of x's last
    len(fft_lengths) axes (the operand's dtype as the type wants it)."""
    return bind(fft_p, x, fft_type=FftType(fft_type), fft_lengths=tuple(int(n) for n in fft_lengths))


def _fft_shape(x: ArrayType, *, fft_type, fft_lengths):
    """fft_abstract_eval: RFFT takes float32/float64 whose minor dims are
    fft_lengths and gives the last one as n//2 + 1, complex; IRFFT takes
    complex whose minor dims but the last are fft_lengths[:-1] and gives
    fft_lengths, real; FFT and IFFT keep a complex type."""
    k = len(fft_lengths)
    if not fft_lengths or k > x.ndim:
        raise PrimitiveError(fft_p, f"fft_lengths {fft_lengths} must be 1 to {x.ndim} lengths for {x}")
    batch = x.shape[:-k]
    if fft_type == FftType.RFFT:
        if x.dtype not in COMPLEX_PART_DTYPES or x.shape[-k:] != fft_lengths:
            raise PrimitiveError(fft_p, f"RFFT takes float32/float64 with minor dims {fft_lengths}, got {x}")
        return [ArrayType(batch + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,), complex_dtype(x.dtype))]
    if not is_complex(x.dtype):
        raise PrimitiveError(fft_p, f"{fft_type.name} takes a complex operand, got {x}")
    if fft_type == FftType.IRFFT:
        if x.shape[-k:-1] != fft_lengths[:-1]:
            raise PrimitiveError(fft_p, f"IRFFT operand {x}: minor dims but the last must be {fft_lengths[:-1]}")
        return [ArrayType(batch + fft_lengths, real_dtype(x.dtype))]
    if x.shape[-k:] != fft_lengths:
        raise PrimitiveError(fft_p, f"{fft_type.name} operand {x}: minor dims must be {fft_lengths}")
    return [x]


def _fft_eval(x, *, fft_type, fft_lengths):
    """numpy's fftn/ifftn/rfftn/irfftn over the last len(fft_lengths) axes."""
    x = np.asarray(x)
    if x.dtype == object:
        raise TypeError("fft: no symbolic evaluation")
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == FftType.FFT:
        return np.fft.fftn(x, axes=axes).astype(x.dtype)
    if fft_type == FftType.IFFT:
        return np.fft.ifftn(x, axes=axes).astype(x.dtype)
    if fft_type == FftType.RFFT:
        return np.fft.rfftn(x, s=fft_lengths, axes=axes).astype(complex_dtype(x.dtype))
    return np.fft.irfftn(x, s=fft_lengths, axes=axes).astype(real_dtype(x.dtype))


def _jitted_fft(x, fft_type, fft_lengths):
    """lax.fft as the transpose rules call it: `@jit(static_argnums=(1, 2))
    def fft(...)` (jax/_src/lax/fft.py), a jit named fft of the primitive."""
    body = trace(lambda x: fft(x, fft_type, fft_lengths), x.type)
    return call(body, x, name="fft")[0]


def _hermitian_mask(t, fft_lengths, dtype):
    """The mask of _rfft_transpose / _irfft_transpose as JAX computes it:
    `full_like(t, 2.0, shape=(m,))` with 1 written at the zero and (even n)
    Nyquist frequencies by dynamic_update_slice, then `lax.expand_dims`
    along t's leading axes (none for a 1-D t), of `dtype`."""
    m = fft_lengths[-1] // 2 + 1
    one = lambda: broadcast_in_dim(np.asarray(1, dtype), (1,), ())    # noqa: E731
    mask = dynamic_update_slice(broadcast_in_dim(np.asarray(2, dtype), (m,), ()), one(), [np.int32(0)])
    if fft_lengths[-1] % 2 == 0:
        mask = dynamic_update_slice(mask, one(), [np.int32(m - 1)])
    if t.ndim == 1:
        return mask
    return broadcast_in_dim(mask, (1,) * (t.ndim - 1) + (m,), (t.ndim - 1,))


def _rfft_transpose(ct, fft_lengths):
    """`@jit(static_argnums=1) def _rfft_transpose(t, fft_lengths)`: out =
    N * fft(lax.conj(t) / mask, FftType.IRFFT, fft_lengths), N =
    prod(fft_lengths), a jit of its own (its mask is an output of that jit
    where a higher order saves it). jax 0.6.2 and before transposed a naive
    RFFT there (`linear_transpose(_naive_rfft)`) and built IRFFT's mask by
    concatenate: the same values, another structure, which shows only in
    the names of second-order residuals (compared on 0.10.2 alone)."""
    def body(t):
        mask = _hermitian_mask(t, fft_lengths, t.dtype)
        out = _jitted_fft(div(conj(t), mask), FftType.IRFFT, fft_lengths)
        return mul(np.asarray(math.prod(fft_lengths), out.dtype), out)
    return call(trace(body, ct.type), ct, name="_rfft_transpose")[0]


def _irfft_transpose(ct, fft_lengths):
    # x = fft(t, FftType.RFFT, fft_lengths); scale = 1 / prod(fft_lengths)
    # out = scale * lax.expand_dims(mask, range(x.ndim - 1)) * x
    # return lax.conj(out)       # JAX's convention for complex gradients (issue 6223)
    x = _jitted_fft(ct, FftType.RFFT, fft_lengths)
    scale = np.asarray(1 / math.prod(fft_lengths), x.dtype)
    return conj(mul(mul(scale, _hermitian_mask(x, fft_lengths, x.dtype)), x))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    # def _fft_transpose_rule(t, operand, fft_type, fft_lengths):
    #   if fft_type == FftType.RFFT: result = _rfft_transpose(t, fft_lengths)
    #   elif fft_type == FftType.IRFFT: result = _irfft_transpose(t, fft_lengths)
    #   else: result = fft(t, fft_type, fft_lengths)
    # (the DFT matrix is symmetric: FFT's transpose is FFT, IFFT's IFFT)
    if isinstance(ct, Zero):
        return [Zero(x.type)]
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [_jitted_fft(ct, fft_type, fft_lengths)]


def _fft_batch(args, dims, *, fft_type, fft_lengths):
    # def _fft_batching_rule(batched_args, batch_dims, fft_type, fft_lengths):
    #   x = batching.moveaxis(x, bd, 0); return fft(x, fft_type, fft_lengths), 0
    (x,), (bd,) = args, dims
    return fft(moveaxis(x, bd, 0), fft_type, fft_lengths), 0


def _fft_from_jax(params):
    """JAX's FftType enum member and lengths -> the spec's."""
    return {"fft_type": FftType(int(params["fft_type"])),
            "fft_lengths": tuple(int(n) for n in params["fft_lengths"])}


shape_rules[fft_p] = _fft_shape
eval_rules[fft_p] = _fft_eval
jvp_rules[fft_p] = linear_jvp(fft)                 # ad.deflinear2(fft_p, _fft_transpose_rule)
transpose_rules[fft_p] = _fft_transpose
batch_rules[fft_p] = _fft_batch
complex_rules.add(fft_p)
jax_facts[fft_p] = JaxFacts(
    "fft", "lambda x, fft_type, fft_lengths: lax.fft_p.bind(x, fft_type=lax.FftType(int(fft_type)), "
           "fft_lengths=tuple(fft_lengths))",
    from_jax=_fft_from_jax)


# --------------------------------------------------------------------------
# examples: real operands and results (complex ones through complex / real /
# imag); the references are DFT sums written out, not numpy.fft

def _dft(z, inverse=False):
    """The DFT of the last axis as a matrix product: X_k = sum_n z_n w^(kn),
    w = exp(-2 pi i / N) (the inverse: w conjugated, divided by N)."""
    n = z.shape[-1]
    k = np.arange(n)
    w = np.exp((2j if inverse else -2j) * np.pi * np.outer(k, k) / n)
    return (z @ w.T) / (n if inverse else 1)


def _rfft_reference(x):
    spectrum = _dft(x.astype(np.complex128))[..., :x.shape[-1] // 2 + 1]
    return spectrum.real, spectrum.imag


def _irfft_reference(n):
    """irfft of a half spectrum of length n//2 + 1: the full Hermitian
    spectrum (imaginary parts of the zero and Nyquist terms dropped), its
    inverse DFT's real part."""
    def reference(a, b):
        half = a + 1j * b
        half[..., 0] = half[..., 0].real
        if n % 2 == 0:
            half[..., -1] = half[..., -1].real
        full = np.concatenate([half, np.conj(half[..., 1:(n + 1) // 2][..., ::-1])], axis=-1)
        return _dft(full, inverse=True).real
    return reference


def _fft_reference(inverse):
    def reference(a, b):
        out = _dft(a + 1j * b, inverse)
        return out.real, out.imag
    return reference


def _on_parts(fft_type, lengths):
    """fft of complex(a, b), its real and imaginary parts."""
    return lambda a, b: (real(fft(complex(a, b), fft_type, lengths)), imag(fft(complex(a, b), fft_type, lengths)))


_X8 = ((2, 8), "f32", "normal")
_X5 = ((2, 5), "f32", "normal")
_X6 = ((3, 6), "f32", "normal")
examples[fft_p] = [
    Example("rfft", (_X8,), lambda x: (real(fft(x, FftType.RFFT, (8,))), imag(fft(x, FftType.RFFT, (8,)))),
            _rfft_reference, linear=((True,),), cond=8),
    Example("rfft-odd", (((4, 7), "f32", "normal"),),
            lambda x: (real(fft(x, FftType.RFFT, (7,))), imag(fft(x, FftType.RFFT, (7,)))),
            _rfft_reference, linear=((True,),), cond=7),
    Example("irfft", (_X5, _X5), lambda a, b: fft(complex(a, b), FftType.IRFFT, (8,)), _irfft_reference(8),
            linear=((True, True),), cond=8),
    Example("irfft-odd", (((2, 4), "f32", "normal"),) * 2, lambda a, b: fft(complex(a, b), FftType.IRFFT, (7,)),
            _irfft_reference(7), linear=((True, True),), cond=7),
    Example("fft", (_X6, _X6), _on_parts(FftType.FFT, (6,)), _fft_reference(False),
            linear=((True, True),), cond=6),
    Example("ifft", (_X6, _X6), _on_parts(FftType.IFFT, (6,)), _fft_reference(True),
            linear=((True, True),), cond=6),
]
