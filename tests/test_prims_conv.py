"""Convolution, pooling and the identity-like primitives (spec/prims_conv.py),
and precision on dot_general and conv_general_dilated.

The registered Examples (tests/test_primitive_examples.py) check every
primitive against an independent numpy reference. Here:

* spec only: reduce_precision's rounding against ml_dtypes' casts and its
  edge cases; the conv batching rule with one operand unbatched (groups
  too) against a loop; select_and_gather_add's transpose refusing window
  dilation with JAX's message; precision canonicalisation;
* with JAX: reduce_precision bit for bit against XLA:CPU; oracle.check of
  a small CNN (conv -> relu -> max pool -> conv -> relu -> avg pool ->
  dense, as flax's MNIST example), a depthwise convolution, flax-style
  average pooling, `jnp.dot(..., precision="highest")` and a function
  under `jax.default_matmul_precision("float32")`, under jax.checkpoint
  with policies None, dots_saveable and everything_saveable (each ok or a
  known divergence, never a Mismatch); preferred_element_type; precision
  and dimension numbers through the jaxpr round trip; the limitations
  as strict xfails.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import spec
from spec import prims_conv as pc
from spec.prims_structural import canonicalize_precision

RNG = np.random.default_rng(0)


def _normal(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


# ==========================================================================
# spec only

def _round(x, e, m):
    prog = spec.trace(lambda v: pc.reduce_precision(v, e, m), spec.ArrayType(x.shape, x.dtype))
    return spec.evaluate(prog, x)[0]


@pytest.mark.parametrize("fmt,e,m", [(np.float16, 5, 10), (ml_dtypes.bfloat16, 8, 7)])
def test_reduce_precision_is_the_cast_to_that_format(fmt, e, m):
    """On normal-range values, rounding to (5, 10) / (8, 7) is the cast to
    float16 / bfloat16 (round to nearest even), overflow included."""
    x = np.concatenate([_normal(500) * 10.0 ** RNG.integers(-3, 4, 500),
                        [1 + 2 ** -11, 1 + 3 * 2 ** -11, 65504, 65519, 65520, 1e6, -1e6]]).astype(np.float32)
    if fmt is np.float16:
        x = x[np.abs(x) >= 2 ** -14]        # the cast keeps denormals; XLA flushes them (next test)
    with np.errstate(over="ignore"):
        want = x.astype(fmt).astype(np.float32)
    np.testing.assert_array_equal(_round(x, e, m), want)


def test_reduce_precision_flushes_denormals_and_keeps_specials():
    x = np.array([2 ** -15, -2 ** -20, 2 ** -14, np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    got = _round(x, 5, 10)
    np.testing.assert_array_equal(got[:3], [0.0, -0.0, 2 ** -14])
    assert np.signbit(got[1]) and np.signbit(got[7])
    np.testing.assert_array_equal(got[3:5], [np.inf, -np.inf])
    assert np.isnan(got[5])
    np.testing.assert_array_equal(_round(x, 11, 52)[:5], x[:5])     # a wider format: the identity


def _vmap_vs_loop(fn, args, in_axes):
    prog = spec.trace(fn, *[spec.ArrayType(np.delete(a.shape, d) if d is not None else a.shape, a.dtype)
                            for a, d in zip(args, in_axes)])
    size = next(a.shape[d] for a, d in zip(args, in_axes) if d is not None)
    got = spec.evaluate(spec.vmap(prog, in_axes=list(in_axes), out_axes=[0], axis_size=size), *args)[0]
    want = np.stack([spec.evaluate(prog, *[np.take(a, i, axis=d) if d is not None else a
                                           for a, d in zip(args, in_axes)])[0] for i in range(size)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


CONV_BATCH_CASES = {
    "plain": dict(lhs=(2, 3, 5, 5), rhs=(4, 3, 3, 3), kw={}),
    "feature-groups": dict(lhs=(2, 4, 5, 5), rhs=(6, 2, 3, 3), kw=dict(feature_group_count=2)),
    "batch-groups": dict(lhs=(4, 3, 5, 5), rhs=(6, 3, 3, 3), kw=dict(batch_group_count=2)),
    "nhwc": dict(lhs=(2, 5, 5, 3), rhs=(3, 3, 3, 4), kw=dict(dimension_numbers=("NHWC", "HWIO", "NHWC"))),
}


@pytest.mark.parametrize("in_axes", [(0, None), (2, None), (None, 0), (None, 3), (1, 2)])
@pytest.mark.parametrize("case", list(CONV_BATCH_CASES))
def test_conv_batching_rule_each_operand(case, in_axes):
    """_conv_general_dilated_batch_rule's three branches (lhs only, rhs
    only, both; groups folded around the batch) against a loop."""
    c = CONV_BATCH_CASES[case]
    shapes = [list(c["lhs"]), list(c["rhs"])]
    args = []
    for s, d in zip(shapes, in_axes):
        if d is not None:
            s.insert(d, 3)
        args.append(RNG.normal(size=s))
    _vmap_vs_loop(lambda x, w: pc.conv_general_dilated(x, w, (1, 2), "SAME", **c["kw"]), args, in_axes)


def test_select_and_gather_add_transpose_refuses_window_dilation():
    """JAX's _select_and_gather_add_transpose raises NotImplementedError for
    window dilation (the gradient of a window-dilated max pool); so does the spec."""
    prog = spec.trace(lambda x: pc.reduce_window_max(x, (2, 2), (1, 1), "VALID", window_dilation=(2, 1)),
                      spec.f32[5, 4])
    with pytest.raises(NotImplementedError, match="VJP not implemented for select_and_gather"):
        spec.vjp_program(prog)


def test_precision_canonicalisation():
    """lax.canonicalize_precision's forms, as plain data."""
    assert canonicalize_precision("highest") == ("HIGHEST", "HIGHEST")
    assert canonicalize_precision("tensorfloat32") == ("HIGH", "HIGH")
    assert canonicalize_precision(("high", "DEFAULT")) == ("HIGH", "DEFAULT")
    assert canonicalize_precision("BF16_BF16_F32") == "BF16_BF16_F32"
    with pytest.raises(spec.PrimitiveError, match="is not a precision"):
        spec.trace(lambda x: pc.conv_general_dilated(x, x, (1,), "VALID", precision="bogus"), spec.f32[1, 1, 3])


def test_string_padding_with_lhs_dilation_is_refused_as_lax_does():
    with pytest.raises(spec.PrimitiveError, match="String padding is not implemented for transposed"):
        spec.trace(lambda x: pc.conv_general_dilated(x, x, (1,), "SAME", lhs_dilation=(2,)), spec.f32[1, 1, 3])


# ==========================================================================
# with JAX

def _jax():
    return pytest.importorskip("jax")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_reduce_precision_bit_for_bit_as_xla_cpu(dtype):
    jax = _jax()
    vals = np.concatenate([RNG.normal(size=300) * 10.0 ** RNG.integers(-12, 12, size=300),
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520, 6e-5, 1e-40, 1 + 2 ** -11]])
    with np.errstate(over="ignore"):
        x = vals.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    for e, m in [(5, 10), (8, 7), (4, 3), (5, 2), (6, 0), (2, 1), (11, 52)]:
        want = np.asarray(jax.jit(lambda v: jax.lax.reduce_precision(v, e, m))(x))
        got = _round(x, e, m)
        nbits = 8 * x.dtype.itemsize
        same = (got.view(f"uint{nbits}") == want.view(f"uint{nbits}")) | (np.isnan(got.astype(np.float32))
                                                                           & np.isnan(want.astype(np.float32)))
        assert same.all(), (e, m, x[~same][:5], got[~same][:5], want[~same][:5])


def _cnn(params, x):
    """flax's MNIST CNN in miniature, with jax.lax: conv -> relu -> max pool ->
    conv -> relu -> avg pool -> dense -> log_softmax (NHWC, HWIO kernels)."""
    jax = _jax()
    lax, jnp = jax.lax, jax.numpy
    w1, b1, w2, wd = params
    dn = ("NHWC", "HWIO", "NHWC")
    y = jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn) + b1)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = jax.nn.relu(lax.conv_general_dilated(y, w2, (1, 1), "SAME", dimension_numbers=dn))
    y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    y = y.reshape(y.shape[0], -1) @ wd
    return jnp.sum(jax.nn.log_softmax(y))


def _depthwise(x, w):
    jax = _jax()
    y = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), feature_group_count=x.shape[1])
    return jax.numpy.sum(jax.numpy.tanh(y))


def _avg_pool(x):
    """flax.linen.avg_pool(x, (3, 3), strides=(2, 2), padding="SAME"): a window sum / window size."""
    jax = _jax()
    y = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") / 9.0
    return jax.numpy.sum(jax.numpy.sin(y) * y)


def _dot_highest(a, b):
    jnp = _jax().numpy
    return jnp.sum(jnp.tanh(jnp.dot(a, b, precision="highest")))


def _default_matmul_precision(a, b):
    jax = _jax()
    with jax.default_matmul_precision("float32"):
        return jax.numpy.sum(jax.numpy.tanh(a @ b) @ b.T)


FUNCTIONS = {
    "cnn": (_cnn, lambda: ((_normal(3, 3, 1, 4, scale=0.5), _normal(4, scale=0.1), _normal(3, 3, 4, 4, scale=0.3),
                            _normal(16, 3, scale=0.3)), _normal(2, 8, 8, 1))),
    "depthwise": (_depthwise, lambda: (_normal(2, 3, 6, 6), _normal(6, 1, 3, 3))),
    "avg_pool": (_avg_pool, lambda: (_normal(2, 7, 7, 2),)),
    "dot_highest": (_dot_highest, lambda: (_normal(3, 4), _normal(4, 2))),
    "default_matmul_precision": (_default_matmul_precision, lambda: (_normal(3, 4), _normal(4, 4))),
}
POLICIES = ["None", "dots_saveable", "everything_saveable"]
PASSING = {"ok", "known divergence", "not applicable", "not compared", "not checked"}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_oracle_check_passes(name, policy):
    jax = _jax()
    import oracle
    fn, make_args = FUNCTIONS[name]
    pol = None if policy == "None" else getattr(jax.checkpoint_policies, policy)
    report = oracle.check(fn, pol, *make_args())
    assert {r.status for r in report.results} <= PASSING
    assert {r.implementation for r in report.results} == {"remat2", "remat3"}
    if policy == "dots_saveable" and name in ("cnn", "depthwise"):
        assert report.status("residuals", "remat2") == "ok"    # conv outputs saved, as JAX's DotsSaveable does


def test_dots_saveable_saves_conv_outputs():
    jax = _jax()
    import oracle
    x, w = _normal(2, 3, 6, 6), _normal(6, 1, 3, 3)
    want = oracle.expected_residuals(_depthwise, jax.checkpoint_policies.dots_saveable, x, w)
    assert ("output", "conv_general_dilated") in [(kind, detail) for _, _, kind, detail in want]


def test_preferred_element_type_bf16_inputs_f32_result():
    jax = _jax()
    import oracle
    x, w = (a.astype(ml_dtypes.bfloat16) for a in (_normal(1, 2, 5, 5), _normal(3, 2, 3, 3)))

    def f(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=np.float32)
        return jax.numpy.sum(y * y)
    report = oracle.check(f, None, x, w)
    assert {r.status for r in report.results} <= PASSING


@pytest.mark.parametrize("precision", ["highest", ("high", "default"), "F32_F32_F32", "BF16_BF16_F32_X3"])
def test_precision_round_trip(precision):
    """Precision and conv dimension numbers survive JAX -> spec -> JAX."""
    jax = _jax()
    import oracle
    lax = jax.lax

    def f(x, w, a):
        y = lax.conv_general_dilated(x, w, (1, 2), ((1, 0), (2, 1)), (1, 1), (2, 1), ("NHWC", "HWIO", "NCHW"),
                                     precision=precision)
        return y.reshape(-1)[:4] @ lax.dot(a, a, precision=precision)
    args = (_normal(1, 6, 5, 2), _normal(3, 2, 2, 3), _normal(4, 4))
    jaxpr = jax.make_jaxpr(f)(*args)
    prog = oracle.from_jaxpr(jaxpr)
    again = jax.make_jaxpr(oracle.to_jax(prog))(*args)
    params = lambda j: [(e.primitive.name, e.params.get("precision"), e.params.get("dimension_numbers"))
                        for e in j.jaxpr.eqns if e.primitive.name in ("conv_general_dilated", "dot_general")]
    assert params(again) == params(jaxpr)


def test_window_dilated_max_pool_gradient_both_refuse():
    """JAX cannot transpose select_and_gather_add with window dilation; the
    spec raises the same error: reverse-mode properties are not applicable."""
    jax = _jax()
    import oracle

    def f(x):
        return jax.numpy.sum(jax.lax.reduce_window(x, -jax.numpy.inf, jax.lax.max, (2, 2), (1, 1), "VALID",
                                                   window_dilation=(2, 1)))
    report = oracle.check(f, oracle.AS_IS, _normal(5, 4))
    assert report.status("vjp", "remat2") == "not applicable"
    assert report.status("values", "remat2") == "ok"


def test_sharding_constraint_named_sharding_through_the_oracle():
    jax = _jax()
    import oracle
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

    def f(x):
        y = jax.lax.with_sharding_constraint(jax.numpy.cos(x), NamedSharding(mesh, P("x", None)))
        return jax.numpy.sum(jax.numpy.sin(y) * x)
    for policy in (oracle.AS_IS, jax.checkpoint_policies.everything_saveable):
        assert {r.status for r in oracle.check(f, policy, _normal(4, 3)).results} <= PASSING


def test_explicit_optimization_barrier_prevent_cse():
    """A program's own optimization_barrier lowers to an HLO barrier: spec/barriers.py counts it."""
    jax = _jax()
    import oracle

    def f(x):
        return jax.numpy.sum(jax.numpy.sin(jax.lax.optimization_barrier((x, jax.numpy.cos(x)))[1]) * x)
    oracle.check(f, oracle.AS_IS, _normal(4, 3), properties=("prevent_cse",))


@pytest.mark.parametrize("after", ["ceil", "sin"])
def test_an_explicit_barrier_the_backward_pass_does_not_need(after):
    """A barrier whose outputs only a ceil reads (derivative zero): the jit
    of the backward pass needs nothing of the forward pass, and its lowering
    drops the barrier (pristine campaign finding 976d4c78e8); behind a sin
    the backward pass reads the barrier's output, and keeps it. JAX's HLO
    is the independent count."""
    jax = _jax()
    import oracle
    from oracle.properties import jax_barriers

    def f(a, b, c):
        d, _ = jax.lax.optimization_barrier((a, b))
        return getattr(jax.numpy, after)(c + d)
    args = (_normal(2, 3), _normal(4), _normal(2, 3))
    report = oracle.check(f, oracle.AS_IS, *args, properties=("prevent_cse",), implementations=("remat2",))
    assert report.results[0].status == "ok", str(report)
    assert report.results[0].detail.startswith("barriers: spec 0,") == (after == "ceil"), str(report)
    assert (jax_barriers(lambda *a: (f(*a),), args) > 0) == (after == "sin")


def test_reduce_precision_residual_named_through():
    """saved_residuals (jax 0.10.2) names a residual a user's reduce_precision
    made by its operand's producer; so does the spec (spec/partial_eval.py
    `looked_through`)."""
    jax = _jax()
    import oracle

    def f(x):
        return jax.numpy.sum(jax.lax.reduce_precision(jax.numpy.cos(x), 8, 7) * x)
    oracle.check(f, oracle.AS_IS, _normal(4, 3), properties=("residuals",))


@pytest.mark.parametrize("op", ["dot", "conv"])
def test_precision_preset_that_rounds_operands_passes(op):
    """XLA:CPU honours F16_F16_F16 (float16 operands: ~1e-3 relative where
    float32 gives ~1e-7); the tolerance model takes the preset's operand
    type for that equation (oracle/tolerances.py), so JAX passes."""
    jax = _jax()
    import oracle
    lax, jnp = jax.lax, jax.numpy
    if op == "dot":
        fn = lambda a, b: jnp.sum(jnp.tanh(lax.dot(a, b, precision="F16_F16_F16")))
        args = (_normal(3, 8), _normal(8, 2))
    else:
        fn = lambda x, w: jnp.sum(jnp.tanh(lax.conv_general_dilated(x, w, (1, 1), "SAME", precision="F16_F16_F16")))
        args = (_normal(2, 3, 6, 6), _normal(4, 3, 3, 3))
    assert {r.status for r in oracle.check(fn, None, *args).results} <= PASSING


def test_per_example_kernel_gradients_reshape_in_a_permuted_order():
    """vmap of a convolution kernel's gradient (DP-SGD's per-example
    clipped gradients, jax's examples/differentially_private_sgd.py): JAX's
    conv batching rule binds `reshape` with `dimensions` (the operand read
    in a permuted order), which the spec refused. That JAX binds it is read
    off JAX's jaxpr; values and residuals are oracle.check's comparison."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import oracle

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def per_example_grads(w, xs):
        return jax.vmap(jax.grad(lambda w, x: jnp.sum(jnp.sin(conv(x, w)))), (None, 0))(w, xs)
    w = np.random.RandomState(0).randn(2, 2, 1, 2).astype(np.float32)
    xs = np.random.RandomState(1).randn(2, 1, 3, 3, 1).astype(np.float32)
    reshapes = [e for e in jax.make_jaxpr(per_example_grads)(w, xs).eqns if e.primitive.name == "reshape"]
    assert any(e.params["dimensions"] is not None for e in reshapes)
    report = oracle.check(per_example_grads, None, w, xs, implementations=("remat2",))
    assert {r.status for r in report.results} == {"ok"}, report
