"""complex, real, imag, conj, fft and abs on complex values (spec/prims_complex.py,
spec/prims_fft.py): values against numpy, JVPs against float64 finite
differences (real and imaginary parts perturbed), transposes by the
dot-product identity under JAX's pairing Re(sum(ct * v)) (no conjugation),
vmap against a loop, and oracle.check of complex-valued losses against JAX."""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec import ops
from spec.prims_complex import complex, conj, imag, real
from spec.prims_fft import FftType, fft

C128, C64 = np.dtype(np.complex128), np.dtype(np.complex64)
RNG = np.random.default_rng(0)


def _cnormal(rng, shape, dtype=C128):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)


def _draw(rng, t):
    return _cnormal(rng, t.shape, t.dtype) if np.issubdtype(t.dtype, np.complexfloating) else \
        rng.normal(size=t.shape).astype(t.dtype)


# (name, spec function, input types, numpy reference)
FUNCTIONS = [
    ("real", real, [spec.ArrayType((3, 4), C128)], np.real),
    ("imag", imag, [spec.ArrayType((3, 4), C128)], np.imag),
    ("conj", conj, [spec.ArrayType((3, 4), C128)], np.conj),
    ("complex", complex, [spec.f64[3, 4], spec.f64[3, 4]], lambda x, y: x + 1j * y),
    ("abs", ops.abs, [spec.ArrayType((3, 4), C128)], np.abs),
    ("exp", ops.exp, [spec.ArrayType((5,), C128)], np.exp),
    ("mul", ops.mul, [spec.ArrayType((5,), C128)] * 2, np.multiply),
    ("div", ops.div, [spec.ArrayType((5,), C128)] * 2, np.divide),
    ("sin", ops.sin, [spec.ArrayType((5,), C128)], np.sin),
    ("tanh", ops.tanh, [spec.ArrayType((5,), C128)], np.tanh),
    ("sqrt", ops.sqrt, [spec.ArrayType((5,), C128)], np.sqrt),
    ("fft", lambda x: fft(x, FftType.FFT, (6,)), [spec.ArrayType((2, 6), C128)], lambda x: np.fft.fft(x)),
    ("ifft", lambda x: fft(x, FftType.IFFT, (6,)), [spec.ArrayType((2, 6), C128)], lambda x: np.fft.ifft(x)),
    ("rfft", lambda x: fft(x, FftType.RFFT, (8,)), [spec.f64[2, 8]], lambda x: np.fft.rfft(x)),
    ("irfft", lambda x: fft(x, FftType.IRFFT, (8,)), [spec.ArrayType((2, 5), C128)],
     lambda x: np.fft.irfft(x, 8)),
    ("rfft2", lambda x: fft(x, FftType.RFFT, (4, 6)), [spec.f64[4, 6]], lambda x: np.fft.rfft2(x)),
]
LINEAR = {"real", "imag", "conj", "complex", "fft", "ifft", "rfft", "irfft", "rfft2"}
IDS = [f[0] for f in FUNCTIONS]


@pytest.mark.parametrize("name,fn,types,reference", FUNCTIONS, ids=IDS)
def test_values_match_numpy(name, fn, types, reference):
    prog = spec.trace(fn, *types)
    xs = [_draw(np.random.default_rng(1), t) for t in types]
    got, = spec.evaluate(prog, *xs)
    np.testing.assert_allclose(got, reference(*xs), rtol=1e-12, atol=1e-12)


def _fd(reference, xs, ts, h=1e-6):
    plus = reference(*[x + h * t for x, t in zip(xs, ts)])
    minus = reference(*[x - h * t for x, t in zip(xs, ts)])
    return (plus - minus) / (2 * h)


@pytest.mark.parametrize("name,fn,types,reference", FUNCTIONS, ids=IDS)
def test_jvp_matches_finite_differences(name, fn, types, reference):
    rng = np.random.default_rng(2)
    prog = spec.trace(fn, *types)
    xs = [_draw(rng, t) for t in types]
    ts = [_draw(rng, t) for t in types]       # complex directions move real and imaginary parts
    _, tangent = spec.evaluate(spec.jvp(prog), *xs, *ts)
    np.testing.assert_allclose(tangent, _fd(reference, xs, ts), rtol=1e-6, atol=1e-6)


def _pairing(a, b) -> float:
    """JAX's: Re(sum(a * b)), no conjugation (jax issue 6223)."""
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


@pytest.mark.parametrize("name,fn,types,reference", [f for f in FUNCTIONS if f[0] in LINEAR],
                         ids=[i for i in IDS if i in LINEAR])
def test_transpose_dot_product_identity(name, fn, types, reference):
    rng = np.random.default_rng(3)
    prog = spec.trace(fn, *types)
    ts = [_draw(rng, t) for t in types]
    out, = spec.evaluate(prog, *ts)
    ct = _draw(rng, prog.out_types[0])
    cts = spec.evaluate(spec.transpose(prog, [True] * len(types)), ct)
    assert [c.dtype for c in cts] == [t.dtype for t in types]
    lhs, rhs = _pairing(ct, out), sum(_pairing(c, t) for c, t in zip(cts, ts))
    assert abs(lhs - rhs) <= 1e-10 * (1 + abs(lhs)), (lhs, rhs)


@pytest.mark.parametrize("name,fn,types,reference", FUNCTIONS, ids=IDS)
def test_vmap_equals_loop(name, fn, types, reference):
    rng = np.random.default_rng(4)
    prog = spec.trace(fn, *types)
    members = [[_draw(rng, t) for t in types] for _ in range(3)]
    stacked = [np.stack([m[i] for m in members], axis=1) for i in range(len(types))]
    got, = spec.evaluate(spec.vmap(prog, in_axes=[1] * len(types), out_axes=[0], axis_size=3), *stacked)
    want = np.stack([spec.evaluate(prog, *m)[0] for m in members])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_abs_jvp_reads_what_jax_saves():
    """_abs_jvp_rule's complex branch: the backward pass saves conj(x) / |x|
    (the div), as JAX's saved_residuals lists it."""
    prog = spec.trace(lambda x, y: ops.abs(complex(x, y)).sum(), spec.f32[3], spec.f32[3])
    assert [str(r) for r in spec.saved_residuals(prog)] == ["c64[3] output of div"]


@pytest.mark.parametrize("fn", [lambda x: ops.lt(x, x), lambda x: ops.max(x, x), lambda x: ops.reduce_max(x, (0,))],
                         ids=["lt", "max", "reduce_max"])
def test_primitives_jax_refuses_for_complex_are_refused(fn):
    with pytest.raises(spec.PrimitiveError, match="complex"):
        spec.trace(fn, spec.ArrayType((3,), C64))


# --------------------------------------------------------------------------
# oracle.check against live JAX

def _losses():
    jnp = pytest.importorskip("jax.numpy")
    from jax import lax

    def rope(x, freqs):
        xc = lax.complex(x[:, 0::2], x[:, 1::2])
        out = xc * jnp.exp(1j * freqs)
        return jnp.stack([jnp.real(out), jnp.imag(out)], axis=-1).reshape(x.shape)
    def layers(ws, x, f):           # a scanned stack of checkpointed rope layers
        def body(h, w):
            return jax.checkpoint(lambda h, w: jnp.tanh(rope(h @ w, f)))(h, w), None
        return (lax.scan(body, x, ws)[0] ** 2).sum()

    def rotations(x, f):            # a complex carry, and a cond and a while on complex values
        z = lax.complex(x[:, 0::2], x[:, 1::2])
        z, ys = lax.scan(lambda z, g: (z * jnp.exp(1j * g), jnp.real(z).sum()), z, jnp.stack([f, -f]))
        z = lax.cond(ys.sum() > 0, lambda z: z * jnp.exp(1j * f), jnp.conj, z)
        _, z = lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] * jnp.exp(1j * f)), (0, z))
        return (jnp.abs(z) ** 2 + jnp.real(z) * jnp.imag(z)).sum()
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(5)
    x, f = rng.normal(size=(4, 6)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    y, w = rng.normal(size=8).astype(np.float32), rng.normal(size=5).astype(np.float32)
    ws = (rng.normal(size=(3, 6, 6)) / 3).astype(np.float32)
    return {
        "scanned-rope": (layers, (ws, x, f)),
        "complex-control-flow": (rotations, (x, f)),
        "rope": (lambda x, f: (rope(x, f) ** 2).sum(), (x, f)),
        "exp-1j": (lambda x: jnp.real(jnp.exp(1j * x)).sum(), (y,)),
        "abs-rfft": (lambda x: jnp.abs(jnp.fft.rfft(x)).sum(), (y,)),
        "irfft-rfft": (lambda x, w: jnp.fft.irfft(jnp.fft.rfft(x) * w).sum(), (y, w)),
        "abs-fft-sq": (lambda x: (jnp.abs(jnp.fft.fft(x.astype(jnp.complex64))) ** 2).sum(), (y,)),
        # a real matrix by a complex signal: dot_general of mixed operands
        "real-by-complex": (lambda m, x, f: (jnp.abs(m @ lax.complex(x, f)) ** 2).sum(), (ws[0][:4, :4], x[:, :3], f)),
        # complex outputs, whose cotangents are complex
        "complex-valued": (lambda x, f: jnp.exp(1j * x[:, :3]) * lax.complex(f, -f), (x, f)),
    }


LOSS_NAMES = ["rope", "exp-1j", "abs-rfft", "irfft-rfft", "abs-fft-sq", "scanned-rope", "complex-control-flow",
              "real-by-complex", "complex-valued"]
POLICIES = ["none", "dots_saveable", "everything_saveable"]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("loss", LOSS_NAMES)
def test_oracle_check_complex_losses(loss, policy):
    jax = pytest.importorskip("jax")
    import oracle
    fn, args = _losses()[loss]
    pol = None if policy == "none" else getattr(jax.checkpoint_policies, policy)
    report = oracle.check(fn, pol, *args)
    checked = [impl for impl in ("remat2", "remat3") if not oracle.jax_api.unavailable(impl)]   # remat3: jax 0.10.2
    for prop in ("residuals", "values", "vjp_leaves", "jvp", "vjp", "second_order"):
        for impl in checked:
            assert report.status(prop, impl) in ("ok", "known divergence", "not applicable"), (prop, impl, report)
    if loss == "complex-valued":    # reverse mode is compared for complex outputs (complex cotangents)
        assert all(report.status("vjp", impl) in ("ok", "known divergence") for impl in checked), report
        assert policy != "none" or report.status("vjp", "remat2") == "ok", report
