"""`oracle.check` on functions written the ways users write them: 56 small
losses over the public jax / jax.numpy / jax.nn / jax.scipy / lax surface
(einsum, cumulative ops, sorting, scatter-style `.at[]` updates, resize,
FFT, activations, linear algebra, attention, random draws inside the loss,
loops, switch, nested checkpoints, static arguments, ...) and 22 calling
conventions (dict and (loss, aux) returns, Python scalars, None and bool
arguments, float64 arguments without x64, closures, an already-jitted
function, partials, keyword pytrees, bf16/f16/int8/uint32 arguments,
empty arrays, namedtuples, static_argnames, complex numbers, typed and raw
keys). Each is checked under no policy and under dots_saveable, on remat2
and remat3: every status must be ok, a known divergence, not applicable or
not compared; a Mismatch, an Unsupported or any other exception fails.
JAX's own answers are the reference (`oracle.check` compares with them).
First run in session 37: all 156 checks passed. Slow (35 s on 2 cores):
`make test-slow`."""
import collections
import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import oracle  # noqa: E402

pytestmark = pytest.mark.slow

rng = np.random.default_rng(0)
x = rng.standard_normal((4, 6)).astype(np.float32)
w = rng.standard_normal((6, 6)).astype(np.float32)
v = rng.standard_normal((6,)).astype(np.float32)
idx = np.array([0, 3, 5, 1], np.int32)
spd = (w @ w.T + 6 * np.eye(6)).astype(np.float32)
img = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
CASES = {}     # name -> (function, args, kwargs, check's keyword options)


def probe(name, *args):
    def register(f):
        CASES[name] = (f, args, {}, {})
        return f
    return register


@probe("einsum", x, w)
def einsum(x, w): return jnp.einsum("bi,ij,bj->b", x, w, x).sum()
@probe("cumsum_rev_cumprod", x)
def cumsum_rev_cumprod(x): return (jnp.cumsum(x[:, ::-1], axis=1) * jnp.cumprod(1 + 0.1 * x, axis=0)).sum()
@probe("assoc_scan", x)
def assoc_scan(x): return lax.associative_scan(jnp.add, jnp.tanh(x), axis=1).sum()
@probe("sort_argsort", x)
def sort_argsort(x): return (jnp.sort(x, axis=1) * jnp.argsort(x, axis=1)).sum()
@probe("softmax_where", x)
def softmax_where(x): return jax.nn.softmax(x, where=x > -0.5).sum()
@probe("at_max_mul_min", x, idx)
def at_max_mul_min(x, i): return (x.at[i].max(1.0) + x.at[i].mul(2.0) + x.at[i].min(0.0)).sum()
@probe("take_clip", x, idx)
def take_clip(x, i): return jnp.take(x, i + 3, axis=1, mode="clip").sum()
@probe("interp", v)
def interp(v): return jnp.interp(v, jnp.linspace(-2, 2, 5), jnp.sin(jnp.linspace(-2, 2, 5)) * v[:5].sum()).sum()
@probe("image_resize", img)
def image_resize(a): return jax.image.resize(a, (2, 4, 4, 3), "bilinear").sum()
@probe("rfft", x)
def rfft(x): return jnp.abs(jnp.fft.rfft(x, axis=1)).sum()
@probe("nn_acts", x)
def nn_acts(x): return (jax.nn.glu(x) .sum() + jax.nn.silu(x).sum() + jax.nn.celu(x).sum() + jax.nn.elu(x).sum()
                  + jax.nn.softplus(x).sum() + jax.nn.log_sigmoid(x).sum() + jax.nn.gelu(x, approximate=False).sum()
                  + jax.nn.mish(x).sum() + jax.nn.hard_tanh(x).sum() + jax.nn.selu(x).sum())
@probe("clip_round", x)
def clip_round(x): return (jnp.clip(x, -0.5, 0.5) * jnp.round(x * 3)).sum()
@probe("linalg_solve", spd, v)
def linalg_solve(a, b): return jnp.linalg.solve(a, b).sum()
@probe("cholesky_tri", spd, v)
def cholesky_tri(a, b): return jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(a), b, lower=True).sum()
@probe("slogdet", spd)
def slogdet(a): return jnp.linalg.slogdet(a)[1]
@probe("logsumexp_b", x)
def logsumexp_b(x): return jax.scipy.special.logsumexp(x, axis=1, b=jnp.abs(x) + 0.1).sum()
@probe("fori_scan", x)
def fori_scan(x): return lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * (i + 1.0), x).sum()
@probe("lax_map", x)
def lax_map(x): return lax.map(lambda r: jnp.tanh(r) @ r, x).sum()
@probe("one_hot", x, idx)
def one_hot(x, i): return (jax.nn.one_hot(i, 6) * x).sum()
@probe("convolve", v)
def convolve(v): return jnp.convolve(v, jnp.array([0.25, 0.5, 0.25]) * v[0], mode="same").sum()
@probe("kv_cache", x)
def kv_cache(x):
    def body(c, i):
        return lax.dynamic_update_slice(c, jnp.tanh(lax.dynamic_slice_in_dim(x, i, 1)), (i, 0)), None
    return lax.scan(body, jnp.zeros_like(x), jnp.arange(4))[0].sum()
@probe("pad_reflect_edge", x)
def pad_reflect_edge(x): return (jnp.pad(x, 2, mode="reflect") ** 2).sum() + (jnp.pad(x, 1, mode="edge") ** 2).sum()
@probe("median_percentile", x)
def median_percentile(x): return jnp.median(x, axis=1).sum() + jnp.percentile(x, 30.0)
@probe("random_in_loss", x)
def random_in_loss(x): return (x * jax.random.normal(jax.random.key(0), x.shape)).sum() + (x * jax.random.uniform(jax.random.PRNGKey(1), x.shape)).sum()
@probe("var_ddof", x)
def var_ddof(x): return jnp.var(x, axis=0, ddof=1).sum() + jnp.std(x)
@probe("dpa_causal", rng.standard_normal((2, 4, 2, 8)).astype(np.float32))
def dpa_causal(q): return jax.nn.dot_product_attention(q, q, q, is_causal=True, implementation="xla").sum()
@probe("tril_triu", w)
def tril_triu(w): return (jnp.tril(w) @ jnp.triu(w, 1)).sum()
@probe("max_initial_where", x)
def max_initial_where(x): return jnp.max(x, axis=1, initial=-1.0, where=x < 1.0).sum()
@probe("complex_abs", x)
def complex_abs(x): return jnp.abs(x + 1j * jnp.roll(x, 1)).sum()
@probe("switch", x)
def switch(x): return lax.switch(2, [jnp.sin, jnp.cos, lambda y: y ** 2], x).sum()
@probe("bf16_mixed", x, w)
def bf16_mixed(x, w): return (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32).sum()
@probe("custom_jvp_user", x)
def custom_jvp_user(x):
    @jax.custom_jvp
    def safe_log(y): return jnp.log(jnp.maximum(y, 1e-6))
    @safe_log.defjvp
    def _j(p, t): return safe_log(p[0]), t[0] / jnp.maximum(p[0], 1e-6)
    return safe_log(x ** 2).sum()
@probe("nan_to_num", x)
def nan_to_num(x): return jnp.nan_to_num(jnp.log(x)).sum()
@probe("eigh", spd)
def eigh(a): return jnp.linalg.eigh(a)[0].sum()
@probe("scan_rev_unroll", x)
def scan_rev_unroll(x): return lax.scan(lambda c, r: (jnp.tanh(c + r), c * r), jnp.zeros(6), x, reverse=True, unroll=2)[1].sum()
@probe("vmap_dict", x)
def vmap_dict(x): return jax.vmap(lambda d: jnp.sin(d["a"]) * d["b"], in_axes=({"a": 0, "b": None},))({"a": x, "b": x[0]}).sum()
@probe("repeat_tile", x)
def repeat_tile(x): return (jnp.repeat(x, 2, axis=0, total_repeat_length=8) * jnp.tile(x, (2, 1))).sum()
@probe("array_split", x)
def array_split(x): return sum((p ** 2).sum() * (k + 1) for k, p in enumerate(jnp.array_split(x, 3, axis=1)))
@probe("standardize", x)
def standardize(x): return (jax.nn.standardize(x, axis=-1) ** 3).sum()
@probe("moveaxis_expand", img)
def moveaxis_expand(a): return (jnp.moveaxis(a, -1, 1)[:, :, None] ** 2).sum()
@probe("argmax_in_loss", x)
def argmax_in_loss(x): return (x * (jnp.argmax(x, axis=1)[:, None] == jnp.arange(6))).sum()
@probe("while_forward", x)
def while_forward(x): return lax.while_loop(lambda c: c[1] < 3, lambda c: (jnp.sin(c[0]), c[1] + 1), (x, 0))[0].sum()
@probe("logaddexp_hypot", x)
def logaddexp_hypot(x): return (jnp.logaddexp(x, 2 * x) + jnp.hypot(x, x + 1) + jnp.arctan2(x, x + 2)).sum()
@probe("cdist", x)
def cdist(x): return jnp.sqrt(((x[:, None] - x[None]) ** 2).sum(-1) + 1e-6).sum()
@probe("categorical_gumbel", x)
def categorical_gumbel(x): return (jax.nn.log_softmax(x) * jax.nn.one_hot(jax.random.categorical(jax.random.key(2), x), 6)).sum()
@probe("reduce_window_avg", img)
def reduce_window_avg(a): return lax.reduce_window(a, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum() / 4
@probe("lax_cond_pytree", x)
def lax_cond_pytree(x): return lax.cond(x.sum() > 0, lambda d: d["a"] * 2, lambda d: jnp.sin(d["a"]), {"a": x}).sum()
@probe("polyval", v)
def polyval(v): return jnp.polyval(v, v).sum()
@probe("qr", w)
def qr(w): return jnp.linalg.qr(w)[1].sum()
@probe("svd_norm", w)
def svd_norm(w): return jnp.linalg.norm(w, ord=2) + jnp.linalg.norm(w, "nuc")
@probe("expm", w)
def expm(w): return jax.scipy.linalg.expm(0.1 * w).sum()
@probe("top_k", x)
def top_k(x): return lax.top_k(x, 2)[0].sum()
@probe("cummax_logcumsumexp", x)
def cummax_logcumsumexp(x): return (lax.cummax(x, axis=1) + lax.cumlogsumexp(x, axis=1)).sum()
@probe("searchsorted", v)
def searchsorted(v): return (jnp.searchsorted(jnp.sort(v), v * 0.5) * v).sum()
@probe("checkpoint_static", x)
def checkpoint_static(x): return jax.checkpoint(lambda y, n: jnp.sin(y) ** n, static_argnums=(1,))(x, 3).sum()
@probe("remat_nested_policy", x, w)
def remat_nested_policy(x, w):
    inner = jax.checkpoint(lambda y: jnp.tanh(y @ w), policy=jax.checkpoint_policies.nothing_saveable)
    return jax.checkpoint(lambda y: inner(jnp.sin(y @ w)).sum(), policy=jax.checkpoint_policies.dots_saveable)(x)


NT = collections.namedtuple("NT", "w b")


def call(name, f, *args, check_options=None, **kwargs):
    CASES[name] = (f, args, kwargs, check_options or {})


call("returns_dict", lambda x: {"a": jnp.sin(x).sum(), "b": x * 2}, x)
call("returns_loss_aux", lambda x: (jnp.sin(x).sum(), {"acc": (x > 0).mean(), "n": 3}), x)
call("int_bool_none_args", lambda x, n, flag, z: (jnp.sin(x) * n).sum() if z is None else 0.0, x, 3, True, None)
call("f64_args_no_x64", lambda x: jnp.sin(x).sum(), x.astype(np.float64))
call("python_float", lambda x, s: (jnp.sin(x) * s).sum(), x, 0.5)
call("closure_const", lambda x: (jnp.tanh(x @ jnp.asarray(w))).sum(), x)
call("jax_array_args", lambda x: (jnp.tanh(x)).sum(), jnp.asarray(x))
call("already_jitted", jax.jit(lambda x, w: jnp.tanh(x @ w).sum()), x, w)
call("partial_fn", functools.partial(lambda x, w, s: (jnp.tanh(x @ w) * s).sum(), s=2.0), x, w)
call("kwargs_pytree", lambda x, *, p: jnp.tanh(x @ p["w"] + p["b"]).sum(), x, p={"w": w, "b": w[0]})
call("bf16_args", lambda x, w: (x @ w).astype(jnp.float32).sum(), x.astype(jnp.bfloat16), w.astype(jnp.bfloat16))
call("f16_args", lambda x: jnp.exp(x).sum(), x.astype(np.float16))
call("int8_uint32", lambda x, a, b: (x * a.astype(jnp.float32)).sum() + (b >> 1).sum(), x, np.arange(6, dtype=np.int8), np.arange(3, dtype=np.uint32))
call("empty_array", lambda x, e: jnp.sin(x).sum() + e.sum(), x, np.zeros((0, 3), np.float32))
call("scalar_arg", lambda s: jnp.sin(s) * s, np.float32(0.3))
call("namedtuple_arg", lambda p, x: jnp.tanh(x @ p.w + p.b).sum(), NT(w, w[0]), x)
call("list_tuple_nested", lambda ps, x: sum(jnp.tanh(x @ a).sum() * b for a, b in ps), [(w, 1.0), (w.T, 2.0)], x)
call("static_argnames", lambda x, mode: jnp.sin(x).sum() if mode == "sin" else jnp.cos(x).sum(), x,
     mode="sin", check_options=dict(static_argnames=("mode",)))
call("complex_arg", lambda z: jnp.abs(z * z).sum(), (x + 1j * x).astype(np.complex64))
call("returns_int_too", lambda x: (jnp.sin(x).sum(), jnp.argmax(x)), x)
call("key_arg", lambda x, k: (x * jax.random.normal(k, x.shape)).sum(), x, jax.random.key(0))
call("raw_key_arg", lambda x, k: (x * jax.random.uniform(k, x.shape)).sum(), x, jax.random.PRNGKey(0))


@pytest.mark.parametrize("policy", ["none", "dots_saveable"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_user_call_checks(name, policy):
    f, args, kwargs, options = CASES[name]
    pol = None if policy == "none" else jax.checkpoint_policies.dots_saveable
    report = oracle.check(f, pol, *args, **options, **kwargs)
    statuses = {r.status for r in report.results}
    assert statuses <= {"ok", "known divergence", "not applicable", "not compared"}, str(report)
    assert "ok" in statuses, str(report)
