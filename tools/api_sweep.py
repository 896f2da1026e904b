"""A sweep of the user-level API surface through oracle.check: about 140
jax.numpy / jax.nn / jax.scipy / jax.random / lax / optax functions, each
inside a small loss, checked under jax.checkpoint with the given policies
(remat2 and remat3, every property), so that what a model author calls
and the oracle does not handle shows up in one table.

    python tools/api_sweep.py [NAME ...] [--policies none,dots_saveable]

Each line: the function's name, then per policy `ok` (only ok, known
divergence or not applicable), `UNSUPPORTED <what>`, `MISMATCH <first line>`
or `ERROR <type: message>` (an exception from the oracle that is not one of
its named errors is a bug of ours). The last line counts them. Needs jax
and optax (the test extra).
"""
from __future__ import annotations

import argparse
import collections

import jax
import jax.numpy as jnp
import jax.scipy as jsp
import optax
from jax import lax

import oracle

k = jax.random.key(0)
x = jnp.linspace(-1.5, 1.7, 12).reshape(3, 4).astype(jnp.float32)
sq = jnp.array([[2., .3, .1], [.3, 1.5, .2], [.1, .2, 1.2]], jnp.float32)
lbl = jnp.array([1, 0, 3])


@jax.custom_vjp
def _tan(v):
    return jnp.tan(v)


_tan.defvjp(lambda v: (jnp.tan(v), (v,)), lambda r, g: (g / jnp.cos(r[0]) ** 2,), optimize_remat=True)

CASES = {
 "logsumexp": lambda x: jsp.special.logsumexp(x),
 "softmax": lambda x: jax.nn.softmax(x).sum(),
 "log_softmax": lambda x: jax.nn.log_softmax(x).sum(),
 "gelu_exact": lambda x: jax.nn.gelu(x, approximate=False).sum(),
 "gelu": lambda x: jax.nn.gelu(x).sum(),
 "silu": lambda x: jax.nn.silu(x).sum(),
 "softplus": lambda x: jax.nn.softplus(x).sum(),
 "elu": lambda x: jax.nn.elu(x).sum(),
 "selu": lambda x: jax.nn.selu(x).sum(),
 "celu": lambda x: jax.nn.celu(x).sum(),
 "glu": lambda x: jax.nn.glu(x).sum(),
 "mish": lambda x: jax.nn.mish(x).sum(),
 "sparse_plus": lambda x: jax.nn.sparse_plus(x).sum(),
 "squareplus": lambda x: jax.nn.squareplus(x).sum(),
 "hard_tanh": lambda x: jax.nn.hard_tanh(x).sum(),
 "relu6": lambda x: jax.nn.relu6(x).sum(),
 "standardize": lambda x: jax.nn.standardize(x).sum(),
 "one_hot": lambda x: (jax.nn.one_hot(lbl, 4) * x).sum(),
 "dpa": lambda x: jax.nn.dot_product_attention(x.reshape(1,3,1,4), x.reshape(1,3,1,4), x.reshape(1,3,1,4)).sum(),
 "dpa_causal": lambda x: jax.nn.dot_product_attention(x.reshape(1,3,1,4), x.reshape(1,3,1,4), x.reshape(1,3,1,4), is_causal=True).sum(),
 "optax_ce_int": lambda x: optax.softmax_cross_entropy_with_integer_labels(x, lbl).sum(),
 "optax_ce": lambda x: optax.softmax_cross_entropy(x, jax.nn.one_hot(lbl, 4)).sum(),
 "optax_sigmoid_bce": lambda x: optax.sigmoid_binary_cross_entropy(x, (x > 0).astype(x.dtype)).sum(),
 "optax_huber": lambda x: optax.huber_loss(x).sum(),
 "optax_l2": lambda x: optax.l2_loss(x).sum(),
 "optax_cosine": lambda x: optax.cosine_similarity(x, x[::-1]).sum(),
 "optax_kl": lambda x: optax.kl_divergence(jax.nn.log_softmax(x), jax.nn.softmax(x[::-1])).sum(),
 "optax_hinge": lambda x: optax.hinge_loss(x, jnp.sign(x[::-1])).sum(),
 "optax_log_cosh": lambda x: optax.log_cosh(x).sum(),
 "optax_smooth_labels": lambda x: optax.smooth_labels(jax.nn.softmax(x), 0.1).sum(),
 "optax_focal": lambda x: optax.sigmoid_focal_loss(x, (x > 0).astype(x.dtype)).sum(),
 "optax_ctc": lambda x: optax.ctc_loss(x.reshape(1,3,4), jnp.zeros((1,3)), jnp.array([[1,2]]), jnp.zeros((1,2))).sum(),
 "optax_ntxent": lambda x: optax.ntxent(x, jnp.array([0,0,1])),
 "optax_global_norm": lambda x: optax.global_norm({"a": x, "b": x * 2}),
 "optax_clip": lambda x: optax.clip_by_global_norm(1.0).update({"a": x}, optax.clip_by_global_norm(1.0).init({"a": x}))[0]["a"].sum(),
 "optax_adam_step": lambda x: optax.apply_updates(x, optax.adam(1e-3).update(x, optax.adam(1e-3).init(x), x)[0]).sum(),
 "take_along_axis": lambda x: jnp.take_along_axis(x, lbl[:, None], axis=1).sum(),
 "argsort": lambda x: (x[0][jnp.argsort(x[1])]).sum(),
 "sort": lambda x: jnp.sort(x, axis=1).sum(),
 "median": lambda x: jnp.median(x),
 "percentile": lambda x: jnp.percentile(x, 30.),
 "top_k": lambda x: lax.top_k(x, 2)[0].sum(),
 "cumsum": lambda x: jnp.cumsum(x, axis=1).sum(),
 "cumprod": lambda x: jnp.cumprod(x, axis=1).sum(),
 "cummax": lambda x: lax.cummax(x, axis=1).sum(),
 "roll": lambda x: jnp.roll(x, 1, axis=1).sum() * x.sum(),
 "tril": lambda x: jnp.tril(sq * x[0, 0]).sum(),
 "pad_reflect": lambda x: jnp.pad(x, 1, mode="reflect").sum() * x[0,0],
 "pad_edge": lambda x: (jnp.pad(x, 1, mode="edge")**2).sum(),
 "einsum": lambda x: jnp.einsum("ij,kj->ik", x, x).sum(),
 "linalg_norm": lambda x: jnp.linalg.norm(x),
 "linalg_norm_fro": lambda x: jnp.linalg.norm(x, "fro"),
 "linalg_norm_2": lambda x: jnp.linalg.norm(x, 2),
 "linalg_solve": lambda x: jnp.linalg.solve(sq * x[0,0], x[:, :3].T).sum(),
 "linalg_inv": lambda x: jnp.linalg.inv(sq * x[0,0]).sum(),
 "linalg_slogdet": lambda x: jnp.linalg.slogdet(sq * x[1,1])[1],
 "linalg_det": lambda x: jnp.linalg.det(sq * x[1,1]),
 "cholesky": lambda x: jnp.linalg.cholesky(sq + x[0,0]**2).sum(),
 "cho_solve": lambda x: jsp.linalg.cho_solve(jsp.linalg.cho_factor(sq + x[0,0]**2), x[:, 0]).sum(),
 "solve_triangular": lambda x: jsp.linalg.solve_triangular(jnp.tril(sq) + x[0,0]**2, x[:, 0], lower=True).sum(),
 "qr": lambda x: jnp.linalg.qr(x)[1].sum(),
 "svd": lambda x: jnp.linalg.svd(x, compute_uv=False).sum(),
 "eigh": lambda x: jnp.linalg.eigh(sq * x[0,0])[0].sum(),
 "fft": lambda x: jnp.abs(jnp.fft.rfft(x)).sum(),
 "complex": lambda x: jnp.real(jnp.exp(1j * x)).sum(),
 "lgamma": lambda x: jsp.special.gammaln(x + 3.).sum(),
 "digamma": lambda x: jsp.special.digamma(x + 3.).sum(),
 "xlogy": lambda x: jsp.special.xlogy(x, x * x + 1).sum(),
 "entr": lambda x: jsp.special.entr(jnp.abs(x)).sum(),
 "norm_logpdf": lambda x: jsp.stats.norm.logpdf(x).sum(),
 "norm_cdf": lambda x: jsp.stats.norm.cdf(x).sum(),
 "random_normal": lambda x: (x * jax.random.normal(k, x.shape)).sum(),
 "random_uniform": lambda x: (x * jax.random.uniform(k, x.shape)).sum(),
 "dropout_bernoulli": lambda x: jnp.where(jax.random.bernoulli(k, .5, x.shape), x, 0.).sum(),
 "random_categorical": lambda x: (x * jax.random.categorical(k, x)[:, None]).sum(),
 "random_gumbel": lambda x: (x * jax.random.gumbel(k, x.shape)).sum(),
 "random_trunc_normal": lambda x: (x * jax.random.truncated_normal(k, -2., 2., x.shape)).sum(),
 "random_split_fold": lambda x: (x * jax.random.normal(jax.random.fold_in(jax.random.split(k)[1], 3), x.shape)).sum(),
 "random_perm": lambda x: x[jax.random.permutation(k, 3)].sum() * x[0,0],
 "random_gamma": lambda x: (x * jax.random.gamma(k, 2., x.shape)).sum(),
 "segment_sum": lambda x: jax.ops.segment_sum(x, jnp.array([0, 1, 0]), 2).sum() ** 2,
 "segment_max": lambda x: jax.ops.segment_max(x, jnp.array([0, 1, 0]), 2).sum(),
 "at_max": lambda x: x.at[lbl].max(x * 2).sum(),
 "at_mul": lambda x: x.at[0].multiply(x[1]).sum(),
 "at_set": lambda x: x.at[:, 1].set(x[:, 2] ** 2).sum(),
 "at_add": lambda x: x.at[lbl, 1].add(x[:, 2] ** 2).sum(),
 "where_isnan": lambda x: jnp.where(jnp.isnan(x), 0., x).sum(),
 "nan_to_num": lambda x: jnp.nan_to_num(x).sum(),
 "clip": lambda x: jnp.clip(x, -1, 1).sum(),
 "maximum": lambda x: jnp.maximum(x, 0.).sum(),
 "var": lambda x: jnp.var(x, axis=0).sum(),
 "std": lambda x: jnp.std(x),
 "mean_where": lambda x: jnp.mean(x, where=x > 0),
 "interp": lambda x: jnp.interp(x[0], jnp.arange(4.), x[1]).sum(),
 "searchsorted": lambda x: x[0][jnp.searchsorted(jnp.arange(4.), x[1])].sum(),
 "conv_transpose": lambda x: lax.conv_transpose(x.reshape(1,3,4,1), jnp.ones((2,2,1,1)), (2,2), "SAME", dimension_numbers=("NHWC","HWIO","NHWC")).sum() * x[0,0],
 "avg_pool": lambda x: lax.reduce_window(x, 0., lax.add, (2,2), (1,1), "VALID").sum() * x[0,0],
 "max_pool": lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2,2), (1,1), "VALID").sum(),
 "image_resize": lambda x: jax.image.resize(x, (6, 8), "bilinear").sum() * x[0,0],
 "map": lambda x: lax.map(jnp.sin, x).sum(),
 "fori": lambda x: lax.fori_loop(0, 3, lambda i, c: c * x[0], x[1]).sum(),
 "associative_scan": lambda x: lax.associative_scan(jnp.add, x, axis=1).sum() * x[0,0],
 "reduce_precision": lambda x: lax.reduce_precision(x, 5, 10).sum() * x[0,0],
 "bf16": lambda x: (x.astype(jnp.bfloat16) ** 2).astype(jnp.float32).sum(),
 "expm1_log1p": lambda x: jnp.log1p(jnp.expm1(x * .1)).sum(),
 "logaddexp": lambda x: jnp.logaddexp(x, x[::-1]).sum(),
 "sinc": lambda x: jnp.sinc(x).sum(),
 "hypot": lambda x: jnp.hypot(x, 1.).sum(),
 "cbrt": lambda x: jnp.cbrt(x).sum(),
 "arctan2": lambda x: jnp.arctan2(x, 1.5).sum(),
 "round_ste": lambda x: (x + lax.stop_gradient(jnp.round(x) - x)).sum(),
 "polyval": lambda x: jnp.polyval(jnp.array([1., 2., 3.]), x).sum(),
 "kron": lambda x: jnp.kron(x[:2, :2], x[1:, 2:]).sum(),
 "outer": lambda x: jnp.outer(x[0], x[1]).sum(),
 "tile": lambda x: jnp.tile(x, (2, 1)).sum() * x[0,0],
 "repeat": lambda x: jnp.repeat(x, 2, axis=0).sum() * x[0,0],
 "meshgrid": lambda x: jnp.meshgrid(x[0], x[1])[0].sum() * x[0,0],
 "diag": lambda x: jnp.diag(x[:, :3]).sum() * x[0,0],
 "trace": lambda x: jnp.trace(x[:, :3] * x[0,0]),
 "triu_indices": lambda x: x[:, :3][jnp.triu_indices(3)].sum() * x[0,0],
 "flip": lambda x: jnp.flip(x).sum() * x[0,0],
 "moveaxis": lambda x: jnp.moveaxis(x, 0, 1)[0].sum() * x[0,0],
 "argmax_gather": lambda x: x[jnp.arange(3), jnp.argmax(x, axis=1)].sum(),
 "unique_size": lambda x: jnp.unique(lbl, size=3).sum() * x.sum(),
 "bincount": lambda x: (jnp.bincount(lbl, length=4) * x).sum(),
 "histogram": lambda x: x.sum() * jnp.histogram(x, bins=3, range=(-2, 2))[0].sum(),
 "lax_scan_remat": lambda x: lax.scan(jax.checkpoint(lambda c, r: (jnp.tanh(c * r), c)), x[0], x)[0].sum(),
}
CASES["custom_vjp_optimize_remat"] = lambda x: _tan(x).sum()

POLICIES = {"none": None, "dots_saveable": jax.checkpoint_policies.dots_saveable,
            "everything_saveable": jax.checkpoint_policies.everything_saveable}


def outcome(fn, policy) -> str:
    try:
        report = oracle.check(fn, policy, x)          # jax.checkpoint(fn, policy), remat2 and remat3
    except oracle.Unsupported as e:
        return "UNSUPPORTED " + str(e).split(" (")[0][:120]
    except oracle.Mismatch as e:
        return "MISMATCH " + str(e).splitlines()[0][:160]
    except Exception as e:      # noqa: BLE001 -- reported: an unnamed exception is ours to fix
        return f"ERROR {type(e).__name__}: {str(e)[:160]}"
    bad = [r for r in report.results if r.status not in ("ok", "known divergence", "not applicable")]
    return "ok" if not bad else "NOT COMPARED " + ", ".join(f"{r.property}/{r.implementation}: {r.status}" for r in bad)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="functions to check (default: all)")
    parser.add_argument("--policies", default="none,dots_saveable", help="comma-separated: " + ", ".join(POLICIES))
    args = parser.parse_args(argv)
    counts = collections.Counter()
    for name, fn in CASES.items():
        if args.names and name not in args.names:
            continue
        results = [outcome(fn, POLICIES[p]) for p in args.policies.split(",")]
        counts.update(r.split(" ")[0] for r in results)
        print(f"{name:26} " + " | ".join(results), flush=True)
    print(dict(counts))


if __name__ == "__main__":
    main()
