"""oracle.check on code as people write it, and on calls that are wrong.

* Real-world-shaped calls: pytree parameters, keyword and static
  arguments, Python floats, NamedTuples, pytree outputs, a custom_vjp
  layer, a while loop, a function decorated with jax.checkpoint before the
  check. Each passes (every status in STATUSES, no Mismatch) under remat2
  and remat3; residual names are checked against JAX's own
  `saved_residuals` (the independent source), statuses against what JAX
  itself does (it raises, or it does not).
* A table of bad calls: each gives a named oracle error (or the user's
  own exception, unchanged), or a correct result — never a raw internal
  exception, never a false Mismatch.
* Regression tests for the false alarms of issue 12, each on a program of
  the same shape as the one reported, not the same program.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax._src.ad_checkpoint import saved_residuals  # noqa: E402

import oracle  # noqa: E402
from oracle import checker  # noqa: E402
from spec import policies as sp  # noqa: E402

cp = jax.checkpoint_policies
f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
STATUSES = set(checker.STATUSES)


def _statuses(report):
    return {(r.implementation, r.property): r.status for r in report.results}


def _assert_passes(report):
    assert {r.status for r in report.results} <= STATUSES
    assert {r.implementation for r in report.results} == {"remat2", "remat3"}


# --------------------------------------------------------------------------
# real-world-shaped calls

def mlp_loss(params, batch, *, temperature=1.0):
    x, y = batch
    h = jnp.tanh(x @ params["dense1"]["kernel"] + params["dense1"]["bias"])
    logits = h @ params["dense2"]["kernel"] / temperature
    return jnp.mean((logits - y) ** 2)


PARAMS = {"dense1": {"kernel": f32(4, 8), "bias": f32(8)}, "dense2": {"kernel": f32(8, 2)}}
BATCH = (f32(3, 4), f32(3, 2))


def test_nested_dict_params_and_a_keyword_float():
    report = oracle.check(mlp_loss, cp.dots_saveable, PARAMS, BATCH, temperature=0.5)
    _assert_passes(report)
    assert set(_statuses(report).values()) == {"ok"}


def test_residual_names_are_jax_pytree_paths():
    """The spec's names are the ones JAX's saved_residuals gives the same call."""
    concrete = jax.tree.map(lambda s: np.ones(s.shape, s.dtype), (PARAMS, BATCH))
    with checker.implementation("remat2"):
        jax_names = [s.split(" from ")[0] for _, s in saved_residuals(
            jax.checkpoint(mlp_loss, policy=cp.dots_saveable), *concrete, temperature=0.5)]
    spec_names = [f"from the argument {d}" if kind == "argument" else f"output of {d}"
                  for _, _, kind, d in oracle.expected_residuals(mlp_loss, cp.dots_saveable, *concrete,
                                                                 temperature=0.5)]
    assert spec_names == jax_names
    assert "from the argument params['dense1']['kernel']" in spec_names
    text = str(oracle.explain(mlp_loss, cp.dots_saveable, PARAMS, BATCH, temperature=0.5))
    assert "params['dense2']['kernel']" in text


class Linear(NamedTuple):
    w: jax.ShapeDtypeStruct
    b: jax.ShapeDtypeStruct


def test_namedtuple_and_list_params_with_pytree_outputs():
    def loss(layers, x):
        for layer in layers:
            x = jnp.sin(x @ layer.w + layer.b)
        return {"loss": jnp.sum(x ** 2), "aux": {"mean": jnp.mean(x)}}
    layers = [Linear(f32(3, 3), f32(3)), Linear(f32(3, 2), f32(2))]
    _assert_passes(oracle.check(loss, cp.everything_saveable, layers, f32(2, 3)))


def test_equinox_modules_are_taken_as_eqx_filter_grad_takes_them():
    """An equinox Module passed whole (eqx.filter_value_and_grad(loss)(model,
    x)): its arrays are the inputs, its other leaves (the MLP's activation
    functions, the Dropout's Python p and inference, which equinox branches
    on) are static. The inputs are what eqx.partition(model, eqx.is_array)
    keeps, named by their paths as JAX's saved_residuals names the same
    arrays passed as a pytree; a plain dict with a string leaf is still
    refused, as jax.jit refuses it."""
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(3, 2, width_size=4, depth=1, key=jax.random.PRNGKey(0))
    model = eqx.nn.Sequential([model, eqx.nn.Dropout(0.5)])

    def loss(model, x, key):
        keys = jax.random.split(key, x.shape[0])
        return jnp.sum(jax.vmap(lambda x, k: model(x, key=k))(x, keys) ** 2)
    x, key = np.ones((2, 3), np.float32), jax.random.key(0)
    _assert_passes(oracle.check(loss, cp.dots_saveable, model, x, key))
    arrays, static = eqx.partition(model, eqx.is_array)
    with checker.implementation("remat2"):
        jax_names = [s for _, s in saved_residuals(jax.checkpoint(
            lambda arrays, x, key: loss(eqx.combine(arrays, static), x, key), policy=cp.dots_saveable),
            arrays, x, key) if "argument" in s]
    spec_names = [d for _, _, kind, d in oracle.expected_residuals(loss, cp.dots_saveable, model, x, key)
                  if kind == "argument"]
    assert [n.replace("from the argument ", "").replace("arrays", "model", 1) for n in jax_names] == spec_names
    assert "model.layers[0].layers[0].weight" in spec_names
    with pytest.raises(oracle.InvalidArgument):
        oracle.check(lambda p: jnp.sum(p["w"]), None, {"w": f32(3), "name": "dense"})


def test_static_argnums_and_argnames():
    def stack(x, n_layers, scale, activation="tanh"):
        for _ in range(n_layers):
            x = getattr(jnp, activation)(x) * scale
        return jnp.sum(x)
    r1 = oracle.check(stack, cp.nothing_saveable, f32(3), 3, 0.9, static_argnums=(1,),
                      activation="sin", static_argnames="activation")
    r2 = oracle.check(stack, None, f32(3), 2, 0.5, static_argnums=(-3 + 1,), static_argnames=("activation",))
    for r in (r1, r2):
        _assert_passes(r)
        assert set(_statuses(r).values()) == {"ok"}


def test_python_floats_are_weak_typed_inputs():
    """A Python float keeps bf16 arithmetic in bf16, as in JAX (a float32
    scalar would promote): the checked program is JAX's own."""
    def scaled(x, alpha, beta):
        return jnp.sum(jnp.sin(x * alpha) + beta)
    report = oracle.check(scaled, None, jax.ShapeDtypeStruct((4,), jnp.bfloat16), 2.0, 1.5)
    _assert_passes(report)
    case = checker.make_case(scaled, None, (jax.ShapeDtypeStruct((4,), jnp.bfloat16), 2.0, 1.5), {})
    want = jax.make_jaxpr(scaled)(jnp.ones(4, jnp.bfloat16), 2.0, 1.5)
    assert str(case.prog.out_types[0].dtype) == str(want.out_avals[0].dtype) == "bfloat16"


def test_float64_is_canonicalised_as_jax_does():
    x = np.linspace(0.5, 1.5, 6, dtype=np.float64).reshape(2, 3)
    report = oracle.check(lambda x: jnp.sum(jnp.exp(x) * x), cp.dots_saveable, x)
    _assert_passes(report)
    case = checker.make_case(lambda x: jnp.sum(x), None, (x,), {})
    assert case.args[0].dtype == jnp.asarray(x).dtype == np.float32


@jax.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.5, 0.5),))


def test_custom_vjp_layer_forward_mode_is_not_applicable():
    def loss(w, x):
        return jnp.sum(jnp.tanh(clip_gradient(x @ w)) ** 2)
    report = oracle.check(loss, cp.dots_saveable, f32(3, 2), f32(4, 3))
    _assert_passes(report)
    with pytest.raises(TypeError):            # JAX itself refuses forward mode
        jax.jvp(loss, (np.ones((3, 2), np.float32), np.ones((4, 3), np.float32)),
                (np.ones((3, 2), np.float32), np.ones((4, 3), np.float32)))
    for impl in ("remat2", "remat3"):
        assert report.status("jvp", impl) == "not applicable"
        # forward over reverse differentiates the bwd rule, an ordinary function: both compute
        assert report.status("second_order", impl) == report.status("vjp", impl) == "ok"
        assert "custom_vjp" in next(r.detail for r in report.results
                                    if (r.property, r.implementation) == ("jvp", impl))


def test_while_loop_reverse_mode_is_not_applicable():
    def newton_sqrt(x):
        def body(c):
            i, y = c
            return i + 1, 0.5 * (y + x / y)
        return jnp.sum(jax.lax.while_loop(lambda c: c[0] < 4, body, (0, x))[1])
    report = oracle.check(newton_sqrt, None, f32(3))
    _assert_passes(report)
    with pytest.raises(ValueError):           # JAX itself refuses reverse mode
        jax.grad(newton_sqrt)(np.ones(3, np.float32))
    for impl in ("remat2", "remat3"):
        assert report.status("vjp", impl) == "not applicable"
        assert report.status("values", impl) == report.status("jvp", impl) == "ok"


def _sin_sin(x):
    return jnp.sum(jnp.sin(jnp.cos(x)) * x)


def test_predecorated_function_is_not_checked_under_the_other_implementation():
    decorated = jax.checkpoint(_sin_sin, policy=cp.everything_saveable)    # built under remat2
    report = oracle.check(decorated, oracle.AS_IS, f32(3))
    assert {s for (i, _), s in _statuses(report).items() if i == "remat3"} == {"not checked"}
    assert "Factory" in next(r.detail for r in report.results if r.implementation == "remat3")
    assert {s for (i, _), s in _statuses(report).items() if i == "remat2"} == {"ok"}
    with checker.implementation("remat3"):
        built_under_remat3 = jax.checkpoint(_sin_sin)
    report = oracle.check(built_under_remat3, None, f32(3), properties=("residuals", "values"))
    assert report.status("residuals", "remat2") == "not checked"
    assert report.status("residuals", "remat3") == "ok"


def test_factory_rebuilds_under_each_implementation():
    made = []

    def make():
        made.append(jax.config.jax_remat3)
        return jax.checkpoint(_sin_sin, policy=cp.everything_saveable)
    report = oracle.check(oracle.Factory(make), oracle.AS_IS, f32(3))
    _assert_passes(report)
    assert "not checked" not in set(_statuses(report).values())
    assert report.status("residuals", "remat3") == "known divergence"   # remat3 saves only the input
    assert {False, True} <= set(made)


# --------------------------------------------------------------------------
# bad calls: a named error, the user's own exception, or a correct result

class UsersOwnError(Exception):
    pass


def _raises_own(x):
    raise UsersOwnError("the user's function refuses")


def _sum(x):
    return jnp.sum(jnp.sin(x))


def _escaped_tracer(x):
    """jax's api_test RematTest.test_escaped_tracer_remat: the first call's
    traced result is kept in a Python list and read by the second."""
    seq = [jnp.zeros([])]

    def g():
        seq[0] += 1
        return seq[0]
    jax.remat(g)()
    return jax.remat(lambda: g())() * x


BAD_CALLS = {
    # name: (fn, policy, args, kwargs, expected: an exception class or "ok")
    "junk policy int": (_sum, 42, (f32(3),), {}, oracle.InvalidArgument),
    "junk policy str": (_sum, "dots_saveable", (f32(3),), {}, oracle.InvalidArgument),
    "junk policy list": (_sum, [cp.dots_saveable], (f32(3),), {}, oracle.InvalidArgument),
    "fn not callable": (3, None, (f32(3),), {}, oracle.InvalidArgument),
    "too many args": (_sum, None, (f32(3), f32(3)), {}, oracle.InvalidArgument),
    "too few args": (lambda x, y: jnp.sum(x * y), None, (f32(3),), {}, oracle.InvalidArgument),
    "unknown keyword": (_sum, None, (f32(3),), {"scale": 2.0}, oracle.InvalidArgument),
    "static_argnums out of range": (_sum, None, (f32(3),), {"static_argnums": (3,)}, oracle.InvalidArgument),
    "unknown property": (_sum, None, (f32(3),), {"properties": ("residuals", "bogus")}, oracle.InvalidArgument),
    "properties as a string": (_sum, None, (f32(3),), {"properties": "values"}, oracle.InvalidArgument),
    "unknown implementation": (_sum, None, (f32(3),), {"implementations": ("remat4",)}, oracle.InvalidArgument),
    "string leaf": (lambda p: jnp.sum(p["w"]), None, ({"w": f32(3), "name": "dense"},), {}, oracle.InvalidArgument),
    "object leaf": (_sum, None, (object(),), {}, oracle.InvalidArgument),
    "returns nothing": (lambda x: (), None, (f32(3),), {}, oracle.InvalidArgument),
    "returns a string": (lambda x: "loss", None, (f32(3),), {}, oracle.InvalidArgument),
    "factory of a non-function": (oracle.Factory(lambda: 3), None, (f32(3),), {}, oracle.InvalidArgument),
    "complex input": (lambda z: jnp.sum(jnp.abs(z) * jnp.real(z * z)), None,
                      (np.array([1 + 2j, 3 - 1j, -0.5j], np.complex64),), {}, "ok"),
    "uint32 input": (lambda u: jnp.sum(u), None, (np.ones(3, np.uint32),), {}, "ok"),
    "typed PRNG key": (lambda k, x: jnp.sum(x * jax.random.uniform(k, x.shape)), None,
                       (jax.random.key(0), f32(3)), {}, "ok"),
    "raw uint32 PRNG key": (lambda k, x: jnp.sum(x * jax.random.uniform(k, x.shape)), None,
                            (jax.random.PRNGKey(0), f32(3)), {}, "ok"),
    "dot with precision": (lambda a, b: jnp.sum(jnp.dot(a, b, precision="highest")), None,
                           (f32(2, 2), f32(2, 2)), {}, "ok"),
    "key outputs": (lambda k, x: (jnp.sum(x * jax.random.uniform(k, x.shape)), jax.random.split(k)), None,
                    (jax.random.key(0), f32(3)), {}, "ok"),
    "user's own error": (_raises_own, None, (f32(3),), {}, UsersOwnError),
    # ours, or JAX's own where its tracing rejects the leak (0.4.25)
    "an escaped tracer": (_escaped_tracer, None, (f32(),), {},
                          (oracle.InvalidArgument, jax.errors.UnexpectedTracerError)),
    "NaN input": (lambda x: jnp.sum(jnp.sin(x) * x), cp.everything_saveable,
                  (np.array([1.0, np.nan, 2.0], np.float32),), {}, "ok"),
    "Inf input": (lambda x: jnp.sum(jnp.tanh(x) * 2.0), None, (np.array([1.0, np.inf, -np.inf], np.float32),), {}, "ok"),
    "int-only function": (lambda n, m: n * 3 + m, None, (np.array([1, 2], np.int32), np.array([4, 5], np.int32)), {}, "ok"),
    "bool-only function": (lambda a, b: a == b, None, (np.array([True, False]), np.array([True, True])), {}, "ok"),
    "zero-size array": (lambda x: jnp.sum(jnp.sin(x)), cp.dots_saveable, (f32(0, 3),), {}, "ok"),
    "float64 with x64 off": (_sum, None, (np.ones(3, np.float64),), {}, "ok"),
    "python int argument": (lambda x, n: jnp.sum(x ** 2) * n, None, (f32(3), 3), {}, "ok"),
    "None in the pytree": (lambda p: jnp.sum(p["w"] ** 2), None, ({"w": f32(2), "unused": None},), {}, "ok"),
    "empty dict argument": (lambda x, opts: jnp.sum(jnp.cos(x)), None, (f32(2), {}), {}, "ok"),
    "offload in save_from_both": (_sum, cp.save_from_both_policies(
        cp.save_only_these_names("a"), cp.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=["b"], offload_src="device",
            offload_dst="pinned_host")), (f32(3),), {}, "ok"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_call(name):
    fn, policy, args, kwargs, expected = BAD_CALLS[name]
    if expected == "ok":
        _assert_passes(oracle.check(fn, policy, *args, **kwargs))
        return
    with pytest.raises(expected) as excinfo:
        oracle.check(fn, policy, *args, **kwargs)
    assert not isinstance(excinfo.value, oracle.Mismatch)
    assert str(excinfo.value)


def test_bad_call_table_is_large():
    assert len(BAD_CALLS) >= 25


def test_messages_say_what_was_given_and_what_is_accepted():
    with pytest.raises(oracle.Unsupported, match=r"argument key is a PRNG key of dtype key<rbg>"):
        oracle.check(lambda key, x: jnp.sum(x), None, jax.random.key(1, impl="rbg"), f32(2))
    with pytest.raises(oracle.InvalidArgument, match=r"argument p\['name'\] is a str.*static"):
        oracle.check(lambda p: jnp.sum(p["w"]), None, {"w": f32(3), "name": "dense"})
    with pytest.raises(oracle.InvalidArgument, match=r"supported: \('residuals'"):
        oracle.check(_sum, None, f32(3), properties=("bogus",))


def test_save_from_both_with_an_offload_policy_both_refuse():
    """JAX's save_from_both_policies raises ValueError for a non-bool answer
    (an offload policy's); so does the spec: not applicable under remat2,
    where JAX asks the policy (remat3 never asks it: a known divergence)."""
    policy = cp.save_from_both_policies(cp.dots_saveable, cp.offload_dot_with_no_batch_dims("device", "pinned_host"))
    with pytest.raises(ValueError, match="should be a boolean"):
        jax.grad(jax.checkpoint(lambda w, x: jnp.sum(jnp.tanh(x @ w)), policy=policy))(
            np.ones((3, 3), np.float32), np.ones(3, np.float32))
    report = oracle.check(lambda w, x: jnp.sum(jnp.tanh(x @ w)), policy, f32(3, 3), f32(3))
    assert report.status("residuals", "remat2") == "not applicable"
    assert report.status("vjp", "remat2") == "not applicable"
    assert report.status("values", "remat2") == "ok"
    assert report.status("residuals", "remat3") == "known divergence"


# --------------------------------------------------------------------------
# false alarms of issue 12 (same shape, other programs)

def test_vjp_leaves_alone_under_remat3():
    """properties=("vjp_leaves",) without "residuals": the leaves still
    match the known divergence of remat3's residuals."""
    fn = lambda w, x: jnp.sum(jnp.cos(jnp.exp(x @ w)))  # noqa: E731
    report = oracle.check(fn, cp.everything_saveable, f32(3, 3), f32(3), properties=("vjp_leaves",))
    assert report.status("vjp_leaves", "remat2") == "ok"
    assert report.status("vjp_leaves", "remat3") == "known divergence"


def test_checkpoint_name_under_the_users_own_vmap_under_remat3():
    from jax.ad_checkpoint import checkpoint_name

    def per_example(row, w):
        return jnp.sum(checkpoint_name(jnp.cos(row @ w), "act") ** 2)

    def loss(xs, w):
        return jnp.mean(jax.vmap(per_example, in_axes=(0, None))(xs, w))
    report = oracle.check(loss, cp.save_any_names_but_these("other"), f32(2, 3), f32(3, 3))
    assert {s for (i, _), s in _statuses(report).items() if i == "remat2"} == {"ok"}
    assert ("remat3-checkpoint-name-has-no-batching-rule", "residuals", "remat3") in report.known_divergences


def test_int_outputs_and_float_inputs_jvp():
    """An integer output has a float0 tangent in JAX and none in the spec's
    JVP program: only the float outputs' tangents are compared."""
    def f(x, n):
        return jnp.sum(jnp.sin(x)), n * 2 + 1
    report = oracle.check(f, None, f32(3), np.array([1, 2], np.int32), properties=("values", "jvp", "vmap"))
    assert set(_statuses(report).values()) == {"ok"}


def test_remat3_names_with_pytree_arguments_are_normalised():
    report = oracle.check(mlp_loss, cp.dots_saveable, PARAMS, BATCH, properties=("residuals",))
    assert report.status("residuals", "remat3") == "ok"
    assert report.normalizations == [("remat3-names-arguments-args[i]", "residuals", "remat3")]
    assert report.known_divergences == []


def test_partial_functions_and_methods():
    class Model:
        def __init__(self, depth):
            self.depth = depth

        def loss(self, w, x):
            for _ in range(self.depth):
                x = jnp.tanh(x @ w)
            return jnp.sum(x)
    _assert_passes(oracle.check(Model(2).loss, cp.dots_saveable, f32(3, 3), f32(3)))
    _assert_passes(oracle.check(functools.partial(mlp_loss, temperature=2.0), None, PARAMS, BATCH,
                                properties=("residuals", "values", "vjp")))


def test_spec_policy_objects_are_accepted():
    _assert_passes(oracle.check(mlp_loss, sp.dots_with_no_batch_dims_saveable, PARAMS, BATCH,
                                properties=("residuals", "vjp")))


def test_to_jax_of_a_closed_call_round_trips():
    """A call with name=None is JAX's closed_call (bound with its subfuns)."""
    import spec
    from spec import ops
    from spec.prims_call import call
    inner = spec.trace(lambda x: ops.cos(x) * x, spec.f32[3])
    prog = spec.trace(lambda x: call(inner, x, name=None), spec.f32[3])
    fn = oracle.to_jax(prog)
    closed = jax.make_jaxpr(fn)(np.ones(3, np.float32))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["closed_call"]
    assert [e.primitive.name for e in oracle.from_jaxpr(closed).eqns] == ["call"]
    _assert_passes(oracle.check(fn, oracle.AS_IS, f32(3), properties=("residuals", "values", "vjp")))


def test_policies_asked_about_a_custom_jvp_call():
    """remat2 asks a policy about the custom_jvp_call that jax.nn.relu's
    defjvps rule binds: a JAX user policy is shown JAX's primitive (no
    params), and a spec policy handed to JAX is asked with the spec's."""
    def loss(w, x):
        return jnp.sum(jnp.cos(jax.nn.relu(x @ w)) * x[0])

    def saves_cos(prim, *_, **__):
        return prim.name == "cos"
    for policy in (saves_cos, sp.save_from_both_policies(sp.dots_saveable, saves_cos)):
        report = oracle.check(loss, policy, f32(3, 3), f32(3), properties=("residuals", "vjp"))
        assert report.status("residuals", "remat2") == "ok"

    class SavesCustomCalls(sp._Policy):      # a spec-side user policy (as the fuzzer draws them)
        def __call__(self, prim, *in_types, **params):
            return prim.name in ("custom_jvp_call", "cos")
    report = oracle.check(loss, SavesCustomCalls(), f32(3, 3), f32(3), properties=("residuals", "vjp"))
    assert report.status("residuals", "remat2") == "ok"


def test_a_device_put_that_places_nothing_is_imported_as_a_copy():
    """jax.device_put(x) (and, before jax 0.7, jnp.asarray of a numpy
    constant) binds a device_put naming no device: a copy where the value
    is. One naming a device is refused, naming the param."""
    from oracle.from_jax import from_jaxpr
    prog = from_jaxpr(jax.make_jaxpr(lambda x: jax.device_put(x) * 2.0)(np.ones(3, np.float32)))
    puts = [e for e in prog.eqns if e.primitive.name == "device_put"]
    assert [e.params for e in puts] == [{"memory_space": "device"}]
    assert puts[0].outputs[0].type == puts[0].inputs[0].type
    with pytest.raises(oracle.Unsupported, match=r"device_put.*param devices?="):
        from_jaxpr(jax.make_jaxpr(lambda x: jax.device_put(x, jax.devices()[0]) * 2.0)(np.ones(3, np.float32)))


@pytest.mark.parametrize("constant", ["jax bool", "jax float", "numpy float", "python bool"])
def test_a_closed_over_0d_jax_array_is_saved_from_a_constant(constant):
    """A closed-over 0-d jax Array is a jaxpr constvar (saved_residuals:
    "from a constant"); a numpy or Python scalar is written inline ("from a
    literal", or not saved). The spec named every 0-d constant a literal
    (found through diffrax's diffeqsolve: its error checks close over
    jnp.array(True)). What JAX saves is read off JAX; oracle.check compares
    the lists."""
    from jax._src.ad_checkpoint import saved_residuals
    c = {"jax bool": jnp.array(True), "jax float": jnp.array(0.5, jnp.float32), "numpy float": np.float32(0.5),
         "python bool": True}[constant]
    scale = c * 1.0 if constant.endswith("bool") else c

    def f(x):
        return jnp.sum(jnp.where(c, jnp.sin(x), x) * scale)
    x = np.ones(3, np.float32)
    from_constant = any("from a constant" in s for _, s in saved_residuals(f, x))
    report = oracle.check(f, None, x, implementations=("remat2",), properties=("residuals", "vjp_leaves"))
    assert report.status("residuals", "remat2") == "ok", report
    if jax.__version__ == "0.10.2":     # measured there (jax 0.4.25 inlines a 0-d bool Array too)
        assert from_constant == constant.startswith("jax")
