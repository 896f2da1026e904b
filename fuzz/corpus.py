"""A corpus of checkpoint (remat) calls derived from JAX's own test suite.

Each case re-states, in this project's words, the call pattern of one JAX
test (jax-ml/jax tests/api_test.py RematTest and Remat3Test,
tests/custom_api_test.py, tests/lax_control_flow_test.py,
tests/memories_test.py, ...): the same kinds of functions, arguments,
shapes and policies, small. The JAX test a case comes from is named in
`source` (`file::Class.test`).

A case is what `oracle.check(fn, policy, *args, **kwargs)` is given and
the outcome it must have on jax 0.10.2 (a correct JAX but for the defects
listed in oracle/divergences.py):

* `passes(...)`: a Report with no Mismatch; the known divergences it
  names are exactly those given, and the properties given as
  `not_applicable` are those both sides refuse (JAX's own refusals:
  reverse mode through a while loop, forward mode through a custom_vjp);
* `raises(error, pattern)`: oracle.check raises `error` (a named oracle
  error, or the user's own exception passed through unchanged) whose
  message matches `pattern`.

`residuals`, where the JAX test asserts how many residuals JAX saves
(under remat2, the default), is that number: the spec's
`oracle.expected_residuals` must agree with it (an independent source:
JAX's test authors' statement, not the code under test).

The corpus is also every campaign's first programs (`seeds`, run by
fuzz/cli.py before it draws any): JAX's own tests reach JAX by the paths
users take (decorators, omitted policies, pytrees, static arguments,
vmap/jit/grad around a checkpoint), and checked by the oracle on every
property they find in seconds what drawn programs reach in minutes. On
any release a case is a finding when it raises a Mismatch, hangs, or
raises anything but what it expects or a named refusal
(`seed_outcome`); `fuzz/test_corpus.py` also holds each case to its
exact 0.10.2 outcome there.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

import oracle
from oracle.jax_api import capabilities, internals

cp = jax.checkpoint_policies
f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)  # noqa: E731
bf16 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.bfloat16)  # noqa: E731
HIGHEST = lax.Precision.HIGHEST


def save_nothing(*_, **__):
    """A callable policy that answers False for every equation."""
    return False


def save_everything(*_, **__):
    """A callable policy that answers True for every equation."""
    return True


def saving_primitive(name: str) -> Callable:
    """A callable policy saving the outputs of one primitive, by name."""
    def policy(prim, *_, **__):
        return str(prim) == name
    policy.__name__ = f"save_{name}"
    return policy


@dataclass(frozen=True)
class Expect:
    error: type | None = None               # raises: the exception class
    pattern: str = ""                       # raises: a regex its message matches
    divergences: frozenset = frozenset()    # passes: the known divergences named
    not_applicable: frozenset = frozenset()  # passes: the properties both sides refuse


def passes(*divergences: str, not_applicable=()) -> Expect:
    return Expect(divergences=frozenset(divergences), not_applicable=frozenset(not_applicable))


def raises(error: type, pattern: str) -> Expect:
    return Expect(error=error, pattern=pattern)


@dataclass
class JaxCase:
    name: str
    source: str                 # the JAX test the call pattern comes from
    fn: Any                     # the function, or an oracle.Factory
    policy: Any
    args: tuple
    expect: Expect
    kwargs: dict = field(default_factory=dict)
    static_argnums: tuple = ()
    static_argnames: tuple = ()
    residuals: int | None = None    # the count JAX's test asserts (remat2)
    slow: bool = False
    needs: str = ""                 # a capability (oracle.jax_api.Capabilities) the call pattern needs

    def check(self, **options):
        return oracle.check(self.fn, self.policy, *self.args, static_argnums=self.static_argnums,
                            static_argnames=self.static_argnames, **options, **self.kwargs)


CASES: list[JaxCase] = []


OPTIONS = ("static_argnums", "static_argnames", "residuals", "slow", "needs")


def case(name, source, fn, policy, *args, expect=None, **kwargs) -> JaxCase:
    """Add a case: `kwargs` go to `fn`, but for the JaxCase fields in OPTIONS."""
    options = {k: kwargs.pop(k) for k in OPTIONS if k in kwargs}
    c = JaxCase(name, source, fn, policy, args, expect or passes(), kwargs=kwargs, **options)
    assert name not in {k.name for k in CASES}, name
    CASES.append(c)
    return c


API = "tests/api_test.py::RematTest"
API3 = "tests/api_test.py::Remat3Test"
APIT = "tests/api_test.py::APITest"
CUSTOM_JVP = "tests/custom_api_test.py::CustomJVPTest"
CUSTOM_VJP = "tests/custom_api_test.py::CustomVJPTest"
CONTROL = "tests/lax_control_flow_test.py::LaxControlFlowTest"
MEMORIES = "tests/memories_test.py::ActivationOffloadingTest"


# --------------------------------------------------------------------------
# basics: tuples with Python constants, closures, static arguments

def twice_sin_and_a_constant(x):
    return lax.sin(lax.sin(x)), 3.


case("basic_pair_with_python_float", f"{API}.test_remat_basic", twice_sin_and_a_constant, None, 2.)
case("basic_pair_callable_policy", f"{API}.test_remat_basic_policy", twice_sin_and_a_constant,
     save_nothing, 2.)


def closes_over_a_traced_value(x):
    scale = 2. * jnp.sin(x)
    return jax.checkpoint(lambda x: jnp.cos(x) * jnp.sin(scale))(x)


case("closure_over_traced_value", f"{API}.test_remat_freevars", closes_over_a_traced_value,
     oracle.AS_IS, 2.)
case("closure_over_traced_value_policy", f"{API}.test_remat_freevars_policy",
     lambda x: (lambda s: jax.checkpoint(lambda x: jnp.cos(x) * jnp.sin(s), policy=save_nothing)(x))(
         2. * jnp.sin(x)), oracle.AS_IS, 2.)
case("closure_checked_whole", f"{API}.test_remat_freevars", closes_over_a_traced_value, None, 2.)


def branch_on_static(flag, x):
    if flag > 0:
        return lax.sin(x), 3.
    return lax.cos(x), 4.


case("python_control_flow_static_argnum", f"{API}.test_remat_grad_python_control_flow_static_argnums",
     branch_on_static, None, 2., 0.5, static_argnums=(0,))
case("python_control_flow_static_negative", f"{API}.test_remat_grad_python_control_flow_static_argnums",
     branch_on_static, None, -2., 0.5, static_argnums=(0,))


class Unhashable:
    """A static argument JAX cannot hash (jax.checkpoint closes over it)."""

    def __init__(self, val):
        self.val = val

    def __hash__(self):
        raise TypeError("unhashable")


def branch_on_attribute(holder, x):
    if holder.val > 0:
        return lax.sin(x * holder.val)
    return lax.cos(x)


case("unhashable_static_argument",
     f"{API}.test_remat_grad_python_control_flow_unhashable_static_argnums",
     branch_on_attribute, None, Unhashable(2.), 0.5, static_argnums=(0,))


def scaled_by_config(x, config):
    return x * config["scale"] + jnp.sin(x)


case("static_dict_argnum", f"{API3}.test_remat_unhashable_static_argnums", scaled_by_config, None,
     f32(4), {"scale": 2.}, static_argnums=(1,))
case("static_dict_argname", f"{API3}.test_remat_unhashable_static_argnums", scaled_by_config, None,
     f32(4), config={"scale": 3.}, static_argnames=("config",))


def branch_on_value_inside(x):
    if x > 0:        # a tracer's truth value: the user's code raises
        return x
    return jnp.sin(x)


case("concrete_python_control_flow_on_tracer", f"{API}.test_concreteness_error_includes_user_code",
     branch_on_value_inside, None, 3., expect=raises(jax.errors.ConcretizationTypeError, "x > 0|bool"))
# (TracerBoolConversionError, a ConcretizationTypeError, on 0.10.2; a plain one on 0.4.25)


# --------------------------------------------------------------------------
# jit, vmap, jacobians, higher order

case("jit_inside_checkpoint", f"{API}.test_remat_jit",
     jax.jit(lambda x: lax.sin(lax.sin(x))), None, 2.)
case("checkpoint_inside_jit", f"{API}.test_remat_jit_new",
     jax.jit(lambda x: jax.checkpoint(lambda y: lax.sin(lax.sin(y)), policy=save_nothing)(x)),
     oracle.AS_IS, 2.)
case("vmap_of_checkpoint", f"{API}.test_remat_vmap",
     lambda x: jax.vmap(jax.checkpoint(lambda y: lax.sin(lax.sin(y))))(x), oracle.AS_IS, f32(3))
case("jacfwd_of_checkpoint", f"{API}.test_remat_vmap",
     lambda x: jax.jacfwd(jax.checkpoint(lambda y: lax.sin(lax.sin(y))))(x), oracle.AS_IS, f32(3))
case("jacrev_of_checkpoint", f"{API}.test_remat_vmap",
     lambda x: jax.jacrev(jax.checkpoint(lambda y: lax.sin(lax.sin(y)), policy=save_nothing))(x),
     oracle.AS_IS, f32(3))
case("vmap_not_leading_axis", f"{API}.test_remat_vmap_not_leading_dim",
     lambda x: jax.vmap(jax.checkpoint(lambda y: lax.sin(lax.sin(y))), 1, 0)(x), oracle.AS_IS, f32(3, 5))
case("grad_of_grad_of_checkpoint", f"{API}.test_remat_higher_order_autodiff",
     lambda x: jax.grad(jax.grad(jax.checkpoint(lambda y: lax.cos(lax.sin(y)))))(x), oracle.AS_IS, 3.)
case("cos_of_sin_second_order", f"{API}.test_remat_higher_order_autodiff",
     lambda x: lax.cos(lax.sin(x)), save_nothing, 3.)
case("cond_on_input_sign", f"{API}.test_remat_higher_order_ad_preserves_remat_primitive",
     lambda x: lax.cond(x > 0, jnp.sin, jnp.cos, x), None, 0.3)


def sin_times(x, y):
    return jnp.sin(x) * y


case("python_scalar_first_argument", f"{API}.test_remat_no_redundant_flops", sin_times, save_nothing, 2., 3.)
case("jit_calls_checkpoint_with_constant", f"{API}.test_remat_no_redundant_flops",
     jax.jit(lambda y: jax.checkpoint(sin_times)(2., y)), oracle.AS_IS, 3.)


def binomial(funs):
    if len(funs) == 1:
        return funs[0]
    first, second = binomial(funs[:len(funs) // 2]), binomial(funs[len(funs) // 2:])
    return jax.checkpoint(lambda x: first(second(x)), policy=save_nothing)


case("binomial_nested_checkpoints", f"{API}.test_remat_binomial_checkpointing",
     lambda x: binomial([jnp.sin] * 4)(x), oracle.AS_IS, 4.)


def recursive_checkpoints(funs):
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        return lambda x: funs[0](funs[1](x))
    left, right = recursive_checkpoints(funs[:len(funs) // 2]), recursive_checkpoints(funs[len(funs) // 2:])
    return lambda x: left(jax.checkpoint(right)(x))


case("recursive_checkpoints_of_eight", f"{API}.test_remat_recursive_checkpoint_recompute_counts",
     lambda x: recursive_checkpoints([jnp.sin] * 8)(x), oracle.AS_IS, 1.)


def doubled_by_a_zero_argument_checkpoint(x):
    doubled = 2 * x
    return jax.checkpoint(lambda: doubled)()


case("zero_argument_checkpoint_int", f"{API}.test_remat_jit2", doubled_by_a_zero_argument_checkpoint,
     oracle.AS_IS, 3)
case("zero_argument_checkpoint_float", f"{API}.test_remat_jit2", doubled_by_a_zero_argument_checkpoint,
     oracle.AS_IS, 3.)


def attention_like(w, x):
    a = jnp.dot(x, w)
    b = jnp.einsum("btd,bTd->btT", a, a)
    return jnp.sum(jnp.einsum("btT,btd->btd", b, a))


case("einsum_chain", f"{API}.test_remat_jit3", attention_like, save_nothing, f32(1, 1), f32(1, 1, 1))
case("jitted_multiplies", f"{API}.test_remat_jit3",
     lambda w, x: (lambda a: jax.jit(lambda p, q: p * q)(a, a))(jax.jit(lambda p, q: p * q)(w, x)),
     None, 1., 1.)
case("dot_general_precision_highest_jit_outside", f"{API}.test_remat_checkpoint_dots_jit",
     jax.jit(lambda x: jax.checkpoint(lambda x: jnp.sin(jnp.dot(x, x, precision=HIGHEST) * 1e-3),
                                      policy=cp.checkpoint_dots)(x)), oracle.AS_IS, f32(2, 2))


def dropped_pair_from_jit(x):
    _, y = jax.jit(lambda: (x, x))()
    return y


case("jit_returns_a_pair_one_dropped", f"{API}.test_checkpoint_dropvars", dropped_pair_from_jit, save_nothing, 3.)
case("jit_of_constant_only", f"{API}.test_dce_keeps_eqns_with_used_outputs_but_no_used_inputs",
     lambda x: jax.jit(lambda: 3.)() * x, None, 3.)
case("jit_with_static_flag", f"{API}.test_vjp_caching_static_argnums",
     lambda x, flag: jax.jit(lambda x: 2 * x if flag else x)(x), None, 1., True, static_argnums=(1,))
case("checkpoint_of_jit_double", f"{API}.test_linearize_caching", jax.jit(lambda x: 2 * x), None, 1.)
case("relu_of_scaled", f"{APIT}.test_leak_checker_internal_error", lambda x: jax.nn.relu(1.0 * x), None, 1.)
case("integer_input_plus_one", f"{APIT}.test_leak_checker_avoids_false_positives_remat3_jit",
     lambda x: x + 1, None, np.arange(3, dtype=np.int32))
case("stop_gradient_auxiliary_output", f"{APIT}.test_leak_checker_remat3_zero_tangent_output_stays_concrete",
     lambda x: (jnp.sin(x), lax.stop_gradient(x) * 2.0), None, 3.)


def permuted_forwarding(perm_in, perm_out, n_forwarded, n_exp):
    @jax.jit
    def f(inputs):
        inputs = [inputs[i] for i in perm_in]
        outputs = inputs[:n_forwarded] + [jnp.exp(inputs[i]) if i < n_exp else jnp.sin(inputs[i])
                                          for i in range(len(inputs) - n_forwarded)]
        return [outputs[i] for i in perm_out]
    return f


case("jit_forwards_inputs_permuted", f"{APIT}.test_jit_forwarding_correctness",
     permuted_forwarding([2, 0, 1], [1, 2, 0], 1, 1), None, [f32(), f32(), f32()])
case("jit_forwards_two_inputs", f"{APIT}.test_jit_forwarding_correctness",
     permuted_forwarding([0, 2, 1], [2, 1, 0], 2, 0), None, [f32(), f32(), f32()])


def jit_closures_of_a_constant(x):
    y = jnp.ones(2, "float32")
    x = jax.jit(lambda: x * y)()
    return jax.jit(lambda: x * y)()


case("jit_closures_everything_saveable", f"{APIT}.test_remat_of_jit_input_to_output_forwarding",
     jit_closures_of_a_constant, save_everything, np.float32(3.), residuals=1)


# --------------------------------------------------------------------------
# prevent_cse

def sin_sin_checkpointed_without_cse(x):
    return jax.checkpoint(lambda y: (lax.sin(lax.sin(y)), 3.), prevent_cse=False)(x)[0]


case("prevent_cse_false", f"{API}.test_no_cse_widget_with_prevent_cse_false", sin_sin_checkpointed_without_cse,
     oracle.AS_IS, 2.)
case("prevent_cse_false_factory", f"{API}.test_no_cse_widget_with_prevent_cse_false",
     oracle.Factory(lambda: jax.checkpoint(lambda y: lax.sin(lax.sin(y)), prevent_cse=False)), oracle.AS_IS, 2.)
case("decorated_before_the_check", f"{API}.test_no_cse_widget_on_primals",
     jax.checkpoint(lambda y: lax.sin(lax.sin(y))), oracle.AS_IS, 2.)


def layers_with_partial_cse(ws, x, prevent_cse):
    layer = jax.checkpoint(lambda w, x: x @ w + jnp.array([1.0, 2.0, 3.0]), prevent_cse=prevent_cse)
    for w in ws:
        x = layer(w, x)
    return jnp.sum(x ** 2)


case("prevent_cse_per_argument", f"{API}.test_remat_partial_cse_prevention",
     functools.partial(layers_with_partial_cse, prevent_cse=(False, True)), oracle.AS_IS,
     [f32(3, 3), f32(3, 3)], f32(3), needs="per_argument_prevent_cse")
case("prevent_cse_all_false_tuple", f"{API}.test_remat_partial_cse_prevention_all_false",
     functools.partial(layers_with_partial_cse, prevent_cse=(False, False)), oracle.AS_IS,
     [f32(3, 3), f32(3, 3)], f32(3), needs="per_argument_prevent_cse")


def dict_layers(ws, x):
    layer = jax.checkpoint(lambda d: d["x"] @ d["W"], prevent_cse=({"W": False, "x": True},))
    for w in ws:
        x = layer({"W": w, "x": x})
    return jnp.sum(x ** 2)


case("prevent_cse_pytree_prefix", f"{API}.test_remat_partial_cse_prevention_pytree", dict_layers, oracle.AS_IS,
     [f32(3, 3), f32(3, 3)], f32(3), needs="per_argument_prevent_cse")
case("prevent_cse_false_with_dots_saveable", f"{API3}.test_remat_computed_residuals_cse_prevention",
     lambda w, x: jnp.sum(jax.checkpoint(lambda w, x: jnp.tanh(x @ w), policy=cp.dots_saveable,
                                         prevent_cse=(False, False))(w, x)), oracle.AS_IS, f32(3, 3), f32(3),
     needs="per_argument_prevent_cse")


# --------------------------------------------------------------------------
# policies: callables, names, dots

def named_sin(x):
    return checkpoint_name(jnp.sin(x), "sin")


for label, policy in [("everything", cp.everything_saveable), ("nothing", None),
                      ("names", cp.save_only_these_names("sin"))]:
    case(f"named_sin_square_{label}", f"{API}.test_remat_custom_policy",
         lambda x: named_sin(named_sin(x) * named_sin(x)), policy, 1.)
case("named_sin_jitted_square_names", f"{API}.test_remat_custom_policy",
     lambda x: named_sin(jax.jit(lambda y: y * y)(named_sin(x))), cp.save_only_these_names("sin"), 1.)
case("save_cos_callable", f"{API}.test_remat_custom_policy_save_cos",
     lambda x: jnp.sin(jnp.sin(x)), saving_primitive("cos"), 3.)


def three_dots(x):
    for _ in range(3):
        x = jnp.sin(jnp.dot(x, x, precision=HIGHEST))
    return x


def three_einsums(spec):
    def f(x):
        for _ in range(3):
            x = jnp.sin(jnp.einsum(spec, x, x, precision=HIGHEST))
        return x
    return f


case("checkpoint_dots", f"{API}.test_remat_checkpoint_dots", three_dots, cp.checkpoint_dots, f32(2, 2))
case("dots_with_no_batch_dims", f"{API}.test_remat_checkpoint_dots_with_no_batch_dims",
     three_einsums("ij,jk->ik"), cp.checkpoint_dots_with_no_batch_dims, f32(2, 2))
case("dots_with_batch_dims_not_saved", f"{API}.test_remat_checkpoint_dots_with_no_batch_dims2",
     three_einsums("nij,njk->nik"), cp.checkpoint_dots_with_no_batch_dims, f32(3, 2, 2), slow=True)


def grad_inside(x):
    return jax.grad(lambda y: (y, y)[0])(x)


case("grad_inside_checkpoint", f"{API}.test_remat_dropvar_policy", grad_inside, cp.checkpoint_dots, 3.)


def constant_products(x):
    y = checkpoint_name(jnp.multiply(2., 2.), "y")
    z = checkpoint_name(jnp.multiply(2., 2.), "z")
    w = checkpoint_name(jnp.multiply(2., 2.), "w")
    u = jnp.multiply(2., 2.)
    return (((x * y) * z) * w) * u


for excluded, saved in [(("y", "z", "w"), 0), (("z", "w"), 1), (("w",), 2), ((), 3)]:
    case(f"denylist_{''.join(excluded) or 'none'}", "tests/api_test.py::RematTest.test_name_denylist",
         constant_products, cp.save_any_names_but_these(*excluded), 1., residuals=saved,
         slow=len(excluded) in (1, 2))
for allowed, saved in [(("y", "z", "w"), 3), (("w",), 1), ((), 0)]:
    case(f"allowlist_{''.join(allowed) or 'none'}", "tests/api_test.py::RematTest.test_name_allowlist",
         constant_products, cp.save_only_these_names(*allowed), 1., residuals=saved, slow=len(allowed) == 1)

case("einsum_diagonal_saves_nothing", "tests/api_test.py::RematTest.test_constants_not_hoisted",
     lambda x: jnp.einsum("ii->i", x), save_nothing, f32(2, 2), residuals=0)
case("zeros_like_times_input", "tests/api_test.py::RematTest.test_constants_not_hoisted",
     lambda x: jnp.zeros_like(x) * x, save_nothing, f32(2, 2), residuals=0)
case("zeros_like_times_sin", "tests/api_test.py::RematTest.test_constants_not_hoisted",
     lambda x: jnp.zeros_like(x) * jnp.sin(x), save_nothing, f32(2, 2), residuals=1)
case("named_dot_saved", "tests/api_test.py::RematTest.test_name_saveable_input",
     lambda x: (lambda named: jnp.dot(named, named))(checkpoint_name(jnp.dot(x, x), "foo")),
     cp.save_only_these_names("foo"), f32(3, 3), residuals=2)
case("named_pytree", "tests/api_test.py::RematTest.test_name_pytree",
     lambda x: (lambda a: jnp.dot(a, a))(checkpoint_name({"a": jnp.dot(x, x)}, "foo")["a"]),
     cp.save_only_these_names("foo"), f32(3, 3), residuals=2)
case("vmap_of_named_checkpoint", "tests/api_test.py::RematTest.test_checkpoint_name_vmap",
     lambda x: jax.vmap(jax.checkpoint(lambda v: checkpoint_name(v * 2., "y") + 1.,
                                       policy=cp.save_only_these_names("y")))(x), oracle.AS_IS, f32(2, 3),
     expect=passes("remat3-checkpoint-name-has-no-batching-rule"))


def residual_utility(x, y):
    x1, x2 = x
    z = checkpoint_name(jnp.sin(3.), "z")
    return z * ((x1 * x2) * y) * np.array([3.])


case("saved_residuals_pytree_and_keyword", "tests/api_test.py::RematTest.test_saved_residuals_utility",
     residual_utility, oracle.AS_IS, (2., 3.), y=4., residuals=6)
case("saved_residuals_pytree_and_keyword_jit", "tests/api_test.py::RematTest.test_saved_residuals_utility_jit",
     jax.jit(residual_utility), oracle.AS_IS, (2., 3.), y=4., residuals=6)


def forwarded_named_constant(x):
    y = checkpoint_name(jnp.sin(jnp.ones(2, "float32")), "y")
    x = jax.jit(lambda: x * y)()
    return jax.jit(lambda: x * y)()


case("jit_residual_forwarding_named", "tests/api_test.py::RematTest.test_remat_of_jit_residual_forwarding",
     forwarded_named_constant, cp.save_only_these_names("y"), np.float32(3.), residuals=1)


def sin_then_cos_of_sum(x):
    return jnp.cos(jnp.sin(x).sum())


for label, policy in [("default", None), ("save_all", save_everything), ("save_cos", saving_primitive("cos"))]:
    case(f"residual_logging_{label}", f"{API}.test_remat_residual_logging", sin_then_cos_of_sum, policy, f32(3),
         slow=label != "save_cos")


# --------------------------------------------------------------------------
# offloading (CPU has device / pinned_host memories in jax 0.10.2)

OFFLOAD_YZW = cp.save_and_offload_only_these_names(
    names_which_can_be_saved=["y"], names_which_can_be_offloaded=["z", "w"],
    offload_src="device", offload_dst="pinned_host")


def three_named_sins(x):
    y = checkpoint_name(jnp.sin(x), "y")
    z = checkpoint_name(jnp.sin(y), "z")
    w = checkpoint_name(jnp.sin(z), "w")
    return jnp.sum(w * z)


case("offload_names", "tests/api_test.py::RematTest.test_remat_offload_names_jaxpr", three_named_sins,
     OFFLOAD_YZW, f32(16))


def named_sins_in_scan(x):
    def body(y, _):
        y = checkpoint_name(jnp.sin(y), "y")
        z = checkpoint_name(jnp.sin(y), "z")
        w = checkpoint_name(jnp.sin(z), "w")
        return w, jnp.sum(w * z)
    return jnp.sum(lax.scan(body, x, None, length=3)[1])


case("offload_names_in_scan", "tests/api_test.py::RematTest.test_remat_offload_names_of_scan_jaxpr",
     named_sins_in_scan, OFFLOAD_YZW, f32(4), slow=True)


def unbatched_and_batched_dots(x, b):
    x = jnp.einsum("ij,jk->ik", x, x)
    b = jnp.einsum("bij,bjk->bik", b, b)
    return jnp.sum(jnp.sin(x)) + jnp.sum(jnp.sin(b))


case("offload_dots_with_no_batch_dims", "tests/api_test.py::RematTest.test_remat_offload_dot_with_no_batch_dims_jaxpr",
     unbatched_and_batched_dots, cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
     f32(4, 4), f32(2, 4, 4))
case("offload_only_names_abc", "tests/memories_test.py::ActivationOffloadingTest.test_remat_jaxpr_offloadable",
     lambda x: jnp.sum(checkpoint_name(jnp.sin(checkpoint_name(jnp.sin(checkpoint_name(jnp.sin(x), "a")), "b")), "c")),
     cp.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["a", "b", "c"],
                                          offload_src="device", offload_dst="pinned_host"), f32(16))
case("save_from_both_dots_and_names", "tests/api_test.py::RematTest (save_from_both_policies)",
     three_named_sins, cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("z")), f32(4))
case("save_from_both_with_offload", "tests/api_test.py::RematTest (save_from_both_policies)",
     three_named_sins, cp.save_from_both_policies(cp.save_only_these_names("y"), OFFLOAD_YZW), f32(4))


# --------------------------------------------------------------------------
# custom_jvp / custom_vjp inside checkpoints

@jax.custom_jvp
def sin_doubled_jvp(x):
    return jnp.sin(x)


sin_doubled_jvp.defjvp(lambda primals, tangents: (sin_doubled_jvp(primals[0]),
                                                  2 * jnp.cos(primals[0]) * tangents[0]))


@jax.custom_vjp
def sin_doubled_vjp(x):
    return jnp.sin(x)


sin_doubled_vjp.defvjp(lambda x: (sin_doubled_vjp(x), jnp.cos(x)), lambda cos_x, g: (2 * cos_x * g,))

case("custom_jvp_twice", f"{CUSTOM_JVP}.test_remat", lambda x: sin_doubled_jvp(sin_doubled_jvp(x)), None, 2.)
case("grad_inside_checkpoint_custom_jvp", f"{CUSTOM_JVP}.test_remat_higher_order",
     jax.grad(lambda x: sin_doubled_jvp(sin_doubled_jvp(x))), None, 2.)
case("custom_vjp_twice", f"{CUSTOM_VJP}.test_remat", lambda x: sin_doubled_vjp(sin_doubled_vjp(x)), None, 2.,
     expect=passes(not_applicable=("jvp", "second_order")))
case("grad_inside_checkpoint_custom_vjp", f"{CUSTOM_VJP}.test_remat_higher_order",
     jax.grad(lambda x: sin_doubled_vjp(sin_doubled_vjp(x))), None, 2.,
     expect=passes(not_applicable=("jvp", "second_order")))


@jax.custom_vjp
def product_of_dict(xy):
    return xy["a"] * xy["b"]


product_of_dict.defvjp(lambda xy: (product_of_dict(xy), xy),
                       lambda xy, g: ({"a": g * xy["b"], "b": g * xy["a"]},))
case("custom_vjp_dict_argument", f"{CUSTOM_VJP}.test_remat_pytree_arg",
     lambda xy: jnp.sin(product_of_dict(xy)), None, {"a": 2., "b": 3.},
     expect=passes(not_applicable=("jvp", "second_order")))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def scaled_sin(k, x):
    return jnp.sin(k * x)


scaled_sin.defvjp(lambda k, x: (scaled_sin(k, x), jnp.cos(k * x)), lambda k, c, g: (k * c * g,))
case("custom_vjp_nondiff_argnums", f"{CUSTOM_VJP}.test_remat_nondiff_argnums",
     lambda x: scaled_sin(2., x) * 3., None, 0.5, expect=passes(not_applicable=("jvp", "second_order")))


@jax.custom_vjp
def identity_symbolic(x):
    return x


identity_symbolic.defvjp(lambda x: (identity_symbolic(x.value), None), lambda _, g: (g,), symbolic_zeros=True)
case("custom_vjp_symbolic_zeros", f"{CUSTOM_VJP}.test_symbolic_zeros_remat",
     lambda x: identity_symbolic(identity_symbolic(x)), None, 3.,
     expect=passes(not_applicable=("jvp", "second_order")))


@jax.custom_vjp
def tan_with_wrong_fwd(x):
    return jnp.tan(x)


if capabilities().optimize_remat:     # a release that has it (not 0.4.25)
    tan_with_wrong_fwd.defvjp(lambda x: (jnp.sin(x), (x,)), lambda res, g: (jnp.cos(res[0]) * g,),
                              optimize_remat=True)
    # optimize_remat=True wraps the fwd rule in a `remat_opt` primitive (spec/prims_remat_opt.py):
    # a checkpoint's forward pass runs the primal function (tan), not the wrong rule (sin)
    case("custom_vjp_optimize_remat", "tests/custom_api_test.py::CustomVJPTest.test_optimize_remat_gh21303",
         lambda x: jax.checkpoint(tan_with_wrong_fwd)(x) ** 2, oracle.AS_IS, 3.2,
         expect=passes(not_applicable=("jvp",)))


@jax.custom_jvp
def sin_jvp_rule(x):
    return jnp.sin(x)


sin_jvp_rule.defjvp(lambda p, t: (sin_jvp_rule(p[0]), jnp.cos(p[0]) * t[0]))


def dots_then_custom_sin(x):
    for _ in range(3):
        x = sin_jvp_rule(jnp.dot(x, x, precision=HIGHEST) * 1e-3)
    return x


case("custom_jvp_under_checkpoint_dots", f"{API}.test_remat_custom_jvp_policy", dots_then_custom_sin,
     cp.checkpoint_dots, 3.)
case("custom_jvp_under_checkpoint_dots_in_scan", f"{API}.test_remat_custom_jvp_policy",
     lambda x: lax.scan(lambda c, _: (jax.checkpoint(dots_then_custom_sin, policy=cp.checkpoint_dots)(c), None),
                        x, None, length=2)[0], oracle.AS_IS, 3., slow=True)


@jax.custom_vjp
def sin_vjp_rule(x):
    return jnp.sin(x)


sin_vjp_rule.defvjp(lambda x: (sin_vjp_rule(x), x), lambda x, g: (jnp.cos(x) * g,))


def named_call_dots_then_custom_sin(x):
    @functools.partial(jax.named_call, name="dot")
    def dot2(y, z):
        return jnp.dot(x, jnp.dot(y, z, precision=HIGHEST), precision=HIGHEST)
    for _ in range(3):
        x = sin_vjp_rule(dot2(x, x) * 1e-3)
    return x


case("custom_vjp_named_call_dots", f"{API}.test_remat_custom_vjp_policy", named_call_dots_then_custom_sin,
     cp.checkpoint_dots, 3., expect=passes(not_applicable=("jvp", "second_order")))


@jax.custom_jvp
def sum_rows(x):
    return jnp.sum(x, axis=0)


sum_rows.defjvp(lambda p, t: (sum_rows(p[0]), sum_rows(t[0])))
case("custom_jvp_linear_rule", f"{API}.test_remat_custom_jvp_linear_policy", sum_rows, cp.checkpoint_dots, f32(3))
case("custom_jvp_linear_rule_scanned", f"{API}.test_remat_custom_jvp_linear_policy",
     lambda xs: lax.scan(lambda _, x: (None, jax.checkpoint(sum_rows, policy=cp.checkpoint_dots)(x)), None, xs)[1],
     oracle.AS_IS, f32(2, 3), slow=True)


sin_named_cos_fwd = jax.custom_vjp(jnp.sin)
sin_named_cos_fwd.defvjp(lambda x: (jnp.sin(x), checkpoint_name(jnp.cos(x), "cos")), lambda c, g: (c * g,))
case("custom_vjp_fwd_names_a_residual", f"{API3}.test_custom_vjp_with_checkpoint_name_in_fwd",
     sin_named_cos_fwd, cp.save_only_these_names("cos"), f32(3),
     expect=passes("remat3-custom-rules-are-full-remat", not_applicable=("jvp", "second_order")))

sin_with_tag = jax.custom_vjp(lambda _, x: jnp.sin(x), nondiff_argnums=(0,))
sin_with_tag.defvjp(lambda _, x: (jnp.sin(x), checkpoint_name(jnp.cos(x), "cos")), lambda _, c, g: (c * g,))
case("custom_vjp_fwd_names_nondiff_string", f"{API3}.test_custom_vjp_with_checkpoint_name_in_fwd_static_argnums",
     functools.partial(sin_with_tag, "hi"), cp.save_only_these_names("cos"), f32(3),
     expect=passes("remat3-custom-rules-are-full-remat", not_applicable=("jvp", "second_order")))


@jax.custom_vjp
def dot_self(x):
    return jnp.dot(x, x)


dot_self.defvjp(lambda x: (dot_self(x), None), lambda _, g: (g,))


@jax.custom_vjp
def to_f32(x):
    return jnp.float32(1.) * x.astype("float32")


to_f32.defvjp(lambda x: (to_f32(x), x), lambda x, _: (jnp.float32(1.) * x.astype("float32"),))
case("bf16_excess_precision", f"{API}.test_excess_precision_hell",
     jax.jit(lambda x: to_f32(dot_self(x))), save_everything, bf16(2, 2),
     expect=passes(not_applicable=("jvp", "second_order")))


# --------------------------------------------------------------------------
# scan

def sin_carry_no_outputs(c, _):
    return jnp.sin(c), None


case("scan_of_checkpointed_body", f"{API}.test_remat_scan",
     lambda x: lax.scan(jax.checkpoint(sin_carry_no_outputs), x, np.arange(3.))[0], oracle.AS_IS, 4.)
case("checkpoint_of_scan_with_outputs", f"{API}.test_remat_of_scan",
     lambda x: lax.scan(lambda c, _: (jnp.sin(c), jnp.sin(c)), x, None, length=3), None, 3.)
case("checkpoint_of_scan_save_cos", f"{API}.test_remat_of_scan_policy",
     lambda x: lax.scan(lambda c, _: (jnp.sin(c), jnp.sin(c)), x, None, length=3), saving_primitive("cos"), 3.,
     slow=True)


def random_initial_positions(d0):
    key = jax.random.split(jax.random.key(0))[1]
    start = jax.random.uniform(key, (5, 3), minval=0.0, maxval=5.0, dtype=jnp.float32)

    def move(r, _):
        return r + 0.001 * (d0 * r), jnp.array([0.])
    r, _ = lax.scan(jax.checkpoint(move), start, jnp.arange(2))
    return r[0, 0]


case("scan_from_a_random_start", f"{API}.test_remat_symbolic_zeros", random_initial_positions, oracle.AS_IS, 5.)


def wave_step(state, dt=0.5, c=1):
    u, u_t = state
    return u, u_t + c ** 2 * u * dt


def wave_loss(u0, target, steps, dt):
    step = jax.checkpoint(wave_step)
    (uf, _), _ = lax.scan(lambda s, _: (step(s, dt, 1), None), (u0, jnp.zeros_like(u0)), None, steps)
    return ((uf - target) ** 2).mean()


case("scan_tuple_state_keyword_defaults", f"{API}.test_remat_nontrivial_env", wave_loss, oracle.AS_IS,
     f32(4, 4), f32(4, 4), 3, 1 / np.sqrt(2), static_argnums=(2,))


def scan_in_scan(x0):
    inner = lambda x, _: (x + 1, None)
    def outer(x, _):
        return lax.scan(inner, x, xs=None, length=1)[0], None
    return jax.checkpoint(outer)(x0, None)[0]


case("checkpointed_scan_with_none_argument", f"{API}.test_remat_scan2", scan_in_scan, oracle.AS_IS, 1.)


def scan_with_unused_stacked_output(c, xs):
    def body(c, a):
        b = jnp.sin(a).sum() + jnp.sin(c).sum()
        return jnp.sin(c * b), b
    return lax.scan(body, c, xs)[0].sum()


case("scan_unused_stacked_output", f"{API}.test_remat_of_scan_unused_extensive_output_grad",
     scan_with_unused_stacked_output, cp.nothing_saveable, f32(4), f32(5, 3))


@jax.custom_jvp
def times_range(x):
    return x * jnp.arange(3.)


times_range.defjvp(lambda p, t: (times_range(p[0]), t[0] * jnp.arange(3.)))
case("custom_jvp_constant_in_scan", f"{API}.test_const_in_jvp_scan",
     lambda x: lax.scan(lambda c, _: (times_range(c), None), x, None, length=1)[0].sum(), None, f32(3))


def dots_in_scan(w, remat_inside):
    def layer(x):
        for _ in range(3):
            x = jnp.sin(jnp.dot(x, w, precision=HIGHEST))
        return x
    layer = jax.checkpoint(layer, policy=cp.checkpoint_dots) if remat_inside else layer
    return lax.scan(lambda x, _: (layer(x), None), jnp.ones(5), None, length=2)[0]


case("checkpoint_dots_inside_scan", f"{API}.test_remat_checkpoint_dots_inside_scan",
     functools.partial(dots_in_scan, remat_inside=True), oracle.AS_IS, f32(5, 5), slow=True)
case("checkpoint_dots_outside_scan", f"{API}.test_remat_checkpoint_dots_outside_scan",
     functools.partial(dots_in_scan, remat_inside=False), cp.checkpoint_dots, f32(5, 5))


def scan_apply(f, x):
    return lax.scan(lambda x, _: (f(x), None), x, None, length=1)[0]


@jax.custom_jvp
def sin_jit_in_rule(x):
    return jnp.sin(x)


def _sin_jit_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    y, c = jax.jit(lambda: (jnp.sin(x), jnp.cos(x)))()
    return y, c * t


sin_jit_in_rule.defjvp(_sin_jit_rule)

for label, policy in [("save_cos", saving_primitive("cos")), ("save_sin", saving_primitive("sin")),
                      ("everything", cp.everything_saveable), ("nothing", cp.nothing_saveable)]:
    case(f"scan_custom_jvp_jit_rule_{label}", f"{API}.test_remat_of_scan_funky_custom_jvp",
         functools.partial(scan_apply, sin_jit_in_rule), policy, 3., slow=label != "save_sin")
case("scan_custom_jvp_jit_rule_twice", f"{API}.test_remat_of_scan_funky_custom_jvp",
     lambda x: scan_apply(sin_jit_in_rule, scan_apply(sin_jit_in_rule, x)), cp.nothing_saveable, 3., slow=True)


@jax.custom_jvp
def sin_scan_in_rule(x):
    return jnp.sin(x)


def _sin_scan_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    y, c = scan_apply(lambda xs: (jnp.sin(xs[0]), jnp.cos(xs[1])), (x, x))
    return y, c * t


sin_scan_in_rule.defjvp(_sin_scan_rule)
case("scan_custom_jvp_scan_rule_save_cos", f"{API}.test_remat_of_scan_funky_custom_jvp2",
     functools.partial(scan_apply, sin_scan_in_rule), saving_primitive("cos"), 3.)
case("scan_custom_jvp_scan_rule_nothing", f"{API}.test_remat_of_scan_funky_custom_jvp2",
     functools.partial(scan_apply, sin_scan_in_rule), cp.nothing_saveable, 3., slow=True)


def scanned_tanh(xs):
    cell = jax.checkpoint(lambda c, x: (lambda o: (o, o))(jnp.tanh(c * x)))
    return lax.scan(cell, jnp.array(1., "float32"), xs)


case("scan_of_checkpointed_tanh_cell", "tests/api_test.py::DCETest.test_dce_jaxpr_scan_overpruning",
     scanned_tanh, oracle.AS_IS, f32(6))


def scan_block_named_outside(x, w):
    def body(c, w):
        c = jax.checkpoint(lambda h, w: h * jnp.sin(w), policy=cp.save_only_these_names("block"))(c, w)
        return checkpoint_name(c, "block"), None
    return jnp.sum(lax.scan(body, x, w)[0])


case("scan_checkpoint_then_name", f"{APIT}.test_leak_checker_avoids_false_positives_remat3_scan_transpose",
     scan_block_named_outside, oracle.AS_IS, f32(3), f32(2, 3))


def cumulative_product(x):
    start = jnp.ones((2, 4), jnp.float32)
    return lax.scan(lambda s, x: (x * s, s), start, x)


case("scan_forwards_extensive_residuals", f"{CONTROL}.test_scan_vjp_forwards_extensive_residuals",
     cumulative_product, None, f32(3, 2, 4))
case("scan_everything_saveable", f"{CONTROL} (scan_with_new_checkpoint2)",
     lambda c, xs: lax.scan(lambda c, x: (jnp.cos(c) * x, jnp.sin(c + x)), c, xs), cp.everything_saveable,
     f32(2), f32(3, 2))


# --------------------------------------------------------------------------
# cond and switch

case("cond_same_branches", f"{API}.test_remat_of_cond",
     lambda x: lax.cond(x > 0., lambda c: (jnp.sin(c), jnp.sin(c)), lambda c: (jnp.sin(c), jnp.sin(c)), x),
     None, 3.)
case("cond_identity_branch", f"{API}.test_remat_of_cond",
     lambda x: lax.cond(x > 0., lambda c: jnp.sin(jnp.sin(c)), lambda c: c, x), None, 3.)


@jax.custom_jvp
def times_range_in_cond(x):
    return x * jnp.arange(3.)


times_range_in_cond.defjvp(lambda p, t: (times_range_in_cond(p[0]), t[0] * jnp.arange(3.)))
case("custom_jvp_constant_in_cond", f"{API}.test_const_in_jvp_cond",
     lambda x: lax.cond(x.sum() > 0, times_range_in_cond, lambda x: x, x).sum(), None, f32(3))


def dots_in_cond(w):
    x = jnp.ones((5,))

    def layer(x):
        for _ in range(3):
            x = jnp.sin(jnp.dot(x, w, precision=HIGHEST))
        return x
    return lax.cond(x.sum() > 0, layer, lambda x: x, x)


case("checkpoint_dots_around_cond", f"{API}.test_remat_checkpoint_dots_inside_cond", dots_in_cond,
     cp.checkpoint_dots, f32(5, 5))
case("cond_save_cos", f"{API}.test_remat_of_cond_policy",
     lambda x: lax.cond(x > 0, jnp.sin, lambda x: x, x), saving_primitive("cos"), 3.)


def cond_apply(f, x):
    return lax.cond(x.sum() > -jnp.inf, f, lambda x: x, x)


for label, policy in [("save_cos", saving_primitive("cos")), ("nothing", cp.nothing_saveable)]:
    case(f"cond_custom_jvp_jit_rule_{label}", f"{API}.test_remat_of_cond_funky_custom_jvp",
         functools.partial(cond_apply, sin_jit_in_rule), policy, 3., slow=label == "nothing")
case("cond_custom_jvp_jit_rule_twice", f"{API}.test_remat_of_cond_funky_custom_jvp",
     lambda x: cond_apply(sin_jit_in_rule, cond_apply(sin_jit_in_rule, x)), cp.nothing_saveable, 3., slow=True)


@jax.custom_jvp
def sin_cond_in_rule(x):
    return jnp.sin(x)


def _sin_cond_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    y, c = lax.cond(True, lambda xs: (jnp.sin(xs[0]), jnp.cos(xs[1])), lambda xs: xs, (x, x))
    return y, c * t


sin_cond_in_rule.defjvp(_sin_cond_rule)
case("cond_custom_jvp_cond_rule_save_sin", f"{API}.test_remat_of_cond_funky_custom_jvp2",
     lambda x: lax.cond(True, sin_cond_in_rule, lambda x: x, x), saving_primitive("sin"), 3.)


def switch_on_index(index, x):
    return lax.switch(index, [lambda x: jnp.cos(x) * 2., lambda x: jnp.sin(x) ** 2], x)


case("switch_with_integer_index", f"{CONTROL}.testCondGrad2 (cond_with_new_checkpoint)", switch_on_index, None,
     np.int32(1), f32(3))


# --------------------------------------------------------------------------
# while loops

def three_sins_by_while(x):
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, x))[1]


case("while_loop_counted", f"{API}.test_remat_of_while_loop", three_sins_by_while, None, 3.,
     expect=passes(not_applicable=("vjp", "second_order", "prevent_cse", "vjp_leaves", "residuals")))
case("while_loop_save_cos", f"{API}.test_remat_of_while_loop_policy", three_sins_by_while,
     saving_primitive("cos"), 3.,
     expect=passes(not_applicable=("vjp", "second_order", "prevent_cse", "vjp_leaves", "residuals")), slow=True)
case("while_loop_never_runs_swap", f"{CONTROL}.test_grad_remat_while_fixpoint",
     lambda x, y: (lambda c: c[0] + c[1])(lax.while_loop(lambda _: False, lambda c: (c[1], c[0]), (x, y))),
     None, 1., 2., expect=passes(not_applicable=("vjp", "second_order", "prevent_cse", "vjp_leaves", "residuals")))


# --------------------------------------------------------------------------
# pytrees, keywords, named tuples, integer and mixed inputs

class Layer(NamedTuple):
    w: Any
    b: Any


def mlp(params, x, *, scale=1.0):
    for layer in params:
        x = jnp.tanh(x @ layer.w + layer.b) * scale
    return {"out": x, "norm": jnp.sum(x ** 2)}


case("namedtuple_params_dict_output", f"{API}.test_remat_basic (pytree arguments and outputs)", mlp,
     cp.dots_saveable, [Layer(f32(3, 4), f32(4)), Layer(f32(4, 2), f32(2))], f32(3), scale=0.5)


def mixed_int_float(x, n):
    return jnp.sin(x) * n, n * 2


case("integer_input_and_output", f"{CUSTOM_JVP}.test_float0 (integer inputs: float0 tangents)", mixed_int_float,
     None, f32(3), i32(3))


def names_stacked(x, ws):
    for i, w in enumerate(ws):
        with jax.named_scope("g1" if i % 2 else "g"):
            x = x @ w
            if i % 2:
                x = checkpoint_name(x, "save_me")
        x = jnp.tanh(x)
    return jnp.sum(x)


case("named_scope_and_named_call", f"{API}.test_name_stack_annotation",
     lambda x, ws: jax.named_call(jax.jit(names_stacked), name="per_shard")(x, ws), None,
     f32(4, 4), [f32(4, 8), f32(8, 4)])


# --------------------------------------------------------------------------
# more of JAX's test files: control flow, debug prints, offloading, custom rules

def scan_sin_sums(c, a):
    b = jnp.sum(jnp.sin(a)) + jnp.sum(jnp.sin(c))
    return jnp.sin(c * b), b


case("scan_grad_jitted_checkpoint", f"{CONTROL}.testScanGrad (jit_scan, scan_with_new_checkpoint)",
     lambda c, a: jax.jit(jax.checkpoint(lambda c, a: lax.scan(scan_sin_sums, c, a)))(c, a)[0].sum(),
     oracle.AS_IS, f32(4), f32(5, 3))


def names_printed(x):
    y = checkpoint_name(x + 1., "y")
    z = checkpoint_name(y * 2., "z")
    jax.debug.print("y: {}, z: {}", y, z)
    return checkpoint_name(jnp.exp(z), "w")


DEBUG = "tests/debugging_primitives_test.py::DebugPrintTransformationTest"
case("debug_print_of_names_everything", f"{DEBUG}.test_remat_of_debug_print", names_printed,
     cp.everything_saveable, 2.)
case("debug_print_of_names_but_z", f"{DEBUG}.test_remat_of_debug_print", names_printed,
     cp.save_any_names_but_these("z"), 2.)


def offload_multiple_results(prim, *_, **__):
    """memories_test's policy: offload the outputs of a primitive with several."""
    return jax.ad_checkpoint.Offloadable("device", "pinned_host") if prim.multiple_results else \
        jax.ad_checkpoint.Recompute


if hasattr(jax.ad_checkpoint, "Offloadable"):
    case("offload_both_outputs_of_top_k", f"{MEMORIES}.test_primitive_with_multiple_outputs",
         lambda x: jnp.sum(lax.top_k(x, k=2)[0]), offload_multiple_results, f32(8))


case("linearize_of_checkpoint_called", f"{API}.test_remat_basic (jax.linearize inside the checked function)",
     lambda x: jax.linearize(jax.checkpoint(lambda y: jnp.sin(jnp.sin(y))), x)[1](1.), oracle.AS_IS, 3.)


@jax.custom_vjp
def sin_times_by_rule(x, y):
    return jnp.sin(x) * y


if capabilities().optimize_remat:
    sin_times_by_rule.defvjp(lambda x, y: (sin_times_by_rule(x, y), (jnp.cos(x), jnp.sin(x), y)),
                             lambda res, g: (res[0] * g * res[2], res[1] * g), optimize_remat=True)
    case("custom_vjp_optimize_remat_two_arguments", f"{CUSTOM_VJP}.test_optimize_remat_multiple_args",
         lambda x, y: jax.remat(sin_times_by_rule)(x, y), oracle.AS_IS, 3.2, 1.0,
         expect=passes(not_applicable=("jvp",)))


# --------------------------------------------------------------------------
# out of scope: what the oracle must refuse by name

add_one_p = internals.new_primitive("add_one_corpus")
add_one_p.def_impl(lambda x: x + 1)
add_one_p.def_abstract_eval(lambda x: x)
jax.interpreters.ad.primitive_jvps[add_one_p] = lambda p, t: (add_one_p.bind(p[0]), add_one_p.bind(p[0]) * t[0])

case("user_defined_primitive", f"{API}.test_remat_eval_counter",
     lambda x: add_one_p.bind(jax.checkpoint(add_one_p.bind)(x)), None, f32(1),
     expect=raises(oracle.Unsupported, "add_one_corpus"))
case("all_arguments_static", f"{API}.test_remat_static_agnums_retracing",
     branch_on_static, None, 2., 1., static_argnums=(0, 1))   # a constant program: no vmap to compare


# --------------------------------------------------------------------------
# the outcomes on jax 0.10.2: the known divergences each case shows (every one
# a triaged JAX defect, oracle/divergences.py) and the properties both sides
# refuse (JAX's own refusals: reverse mode through a while loop, forward mode
# through a custom_vjp)

OUTCOMES_0_10_2 = {
    'basic_pair_with_python_float': (('remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes',), ()),
    'basic_pair_callable_policy': (('remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes',), ()),
    'closure_over_traced_value': (('literal-residuals-depend-on-the-constant-s-python-type',), ()),
    'closure_over_traced_value_policy': (('literal-residuals-depend-on-the-constant-s-python-type',), ()),
    'python_control_flow_static_argnum': (('remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes',), ()),
    'python_control_flow_static_negative': (('remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes',), ()),
    'jacfwd_of_checkpoint': (('remat3-derivative-of-a-checkpoint-is-not-a-checkpoint',), ()),
    'jacrev_of_checkpoint': (('remat3-derivative-of-a-checkpoint-is-not-a-checkpoint',), ()),
    'grad_of_grad_of_checkpoint': (('remat3-derivative-of-a-checkpoint-is-not-a-checkpoint',), ()),
    'jit_calls_checkpoint_with_constant': (('remat3-instantiates-zero-tangents-into-checkpoints',), ()),
    'zero_argument_checkpoint_float': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'jit_returns_a_pair_one_dropped': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'jit_of_constant_only': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'jit_with_static_flag': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'checkpoint_of_jit_double': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'jit_closures_everything_saveable': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-unrecognised-policy-is-full-remat'), ()),
    'prevent_cse_false': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'prevent_cse_false_factory': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'named_sin_square_everything': (('remat3-checkpoint-name-has-no-batching-rule', 'remat3-policy-only-for-dots-and-names'), ()),
    'named_sin_square_nothing': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'named_sin_square_names': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'named_sin_jitted_square_names': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'save_cos_callable': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'grad_inside_checkpoint': (('remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes',), ()),
    'denylist_yzw': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'denylist_zw': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'denylist_w': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'denylist_none': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'allowlist_yzw': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'allowlist_w': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'allowlist_none': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'einsum_diagonal_saves_nothing': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'zeros_like_times_input': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'named_dot_saved': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'named_pytree': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'vmap_of_named_checkpoint': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'saved_residuals_pytree_and_keyword': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'saved_residuals_pytree_and_keyword_jit': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'jit_residual_forwarding_named': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'residual_logging_save_all': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'residual_logging_save_cos': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'offload_names': (('remat3-checkpoint-name-has-no-batching-rule', 'remat3-unrecognised-policy-is-full-remat'), ()),
    'offload_names_in_scan': (('remat3-checkpoint-name-has-no-batching-rule', 'remat3-unrecognised-policy-is-full-remat'), ()),
    'offload_dots_with_no_batch_dims': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'offload_only_names_abc': (('remat3-checkpoint-name-has-no-batching-rule', 'remat3-unrecognised-policy-is-full-remat'), ()),
    'save_from_both_dots_and_names': (('remat3-checkpoint-name-has-no-batching-rule', 'remat3-unrecognised-policy-is-full-remat'), ()),
    'save_from_both_with_offload': (('remat3-checkpoint-name-has-no-batching-rule', 'remat3-unrecognised-policy-is-full-remat'), ('prevent_cse', 'residuals', 'second_order', 'vjp', 'vjp_leaves')),
    'custom_vjp_twice': ((), ('jvp', 'second_order')),
    'grad_inside_checkpoint_custom_vjp': ((), ('jvp', 'second_order')),
    'custom_vjp_dict_argument': ((), ('jvp', 'second_order')),
    'custom_vjp_nondiff_argnums': ((), ('jvp',)),
    'custom_vjp_symbolic_zeros': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ('jvp',)),
    'custom_vjp_named_call_dots': ((), ('jvp', 'second_order')),
    'custom_jvp_linear_rule': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'custom_jvp_linear_rule_scanned': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'custom_vjp_fwd_names_a_residual': (('remat3-custom-rules-are-full-remat',), ('jvp',)),
    'custom_vjp_fwd_names_nondiff_string': (('remat3-custom-rules-are-full-remat',), ('jvp',)),
    'bf16_excess_precision': (('remat3-unrecognised-policy-is-full-remat',), ('jvp', 'second_order')),
    'checkpoint_of_scan_save_cos': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'scan_tuple_state_keyword_defaults': (('literal-residuals-depend-on-the-constant-s-python-type',), ()),
    'checkpointed_scan_with_none_argument': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'custom_jvp_constant_in_scan': (('remat3-barrier-iff-backward-reads-checkpoint-inputs',), ()),
    'checkpoint_dots_outside_scan': (('remat3-scan-in-checkpoint-saves-scan-outputs',), ()),
    'scan_custom_jvp_jit_rule_save_cos': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'scan_custom_jvp_jit_rule_save_sin': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'scan_custom_jvp_jit_rule_everything': (('remat3-policy-only-for-dots-and-names',), ()),
    'scan_custom_jvp_scan_rule_save_cos': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'scan_checkpoint_then_name': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'scan_everything_saveable': (('remat3-policy-only-for-dots-and-names',), ()),
    'cond_save_cos': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'cond_custom_jvp_jit_rule_save_cos': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'while_loop_counted': ((), ('prevent_cse', 'second_order', 'vjp')),
    'while_loop_save_cos': ((), ('prevent_cse', 'second_order', 'vjp')),
    'while_loop_never_runs_swap': ((), ('prevent_cse', 'second_order', 'vjp')),
    'named_scope_and_named_call': (('remat3-checkpoint-name-has-no-batching-rule',), ()),
    'scan_grad_jitted_checkpoint': (('remat3-grad-raises-for-an-unused-scanned-checkpoint-output',), ()),
    'debug_print_of_names_everything': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule', 'remat3-policy-only-for-dots-and-names'), ()),
    'debug_print_of_names_but_z': (('remat3-barrier-iff-backward-reads-checkpoint-inputs', 'remat3-checkpoint-name-has-no-batching-rule'), ()),
    'offload_both_outputs_of_top_k': (('remat3-unrecognised-policy-is-full-remat',), ()),
    'linearize_of_checkpoint_called': (('literal-residuals-depend-on-the-constant-s-python-type', 'remat3-derivative-of-a-checkpoint-is-not-a-checkpoint'), ()),
}


# cases over two seconds each on the 2-core machine (jax 0.10.2, XLA:CPU): `slow`
SLOW = {'closure_over_traced_value_policy', 'jacfwd_of_checkpoint', 'jacrev_of_checkpoint', 'vmap_not_leading_axis', 'grad_of_grad_of_checkpoint', 'cond_on_input_sign', 'python_scalar_first_argument', 'einsum_chain', 'prevent_cse_per_argument', 'prevent_cse_all_false_tuple', 'prevent_cse_pytree_prefix', 'prevent_cse_false_with_dots_saveable', 'named_sin_square_everything', 'named_sin_square_nothing', 'named_sin_square_names', 'named_sin_jitted_square_names', 'checkpoint_dots', 'dots_with_no_batch_dims', 'dots_with_batch_dims_not_saved', 'denylist_w', 'allowlist_yzw', 'named_dot_saved', 'named_pytree', 'saved_residuals_pytree_and_keyword', 'offload_names_in_scan', 'custom_jvp_under_checkpoint_dots_in_scan', 'custom_vjp_named_call_dots', 'scan_from_a_random_start', 'scan_unused_stacked_output', 'checkpoint_dots_inside_scan', 'checkpoint_dots_outside_scan', 'namedtuple_params_dict_output', 'named_scope_and_named_call'}


def _apply_outcomes():
    for c in CASES:
        c.slow = c.slow or c.name in SLOW
        if c.expect.error is None and c.name in OUTCOMES_0_10_2:
            divergences, not_applicable = OUTCOMES_0_10_2[c.name]
            c.expect = passes(*divergences, not_applicable=not_applicable)


_apply_outcomes()


# --------------------------------------------------------------------------
# the corpus as a campaign's seeds

def seeds() -> list[JaxCase]:
    """The cases a campaign checks before it draws programs: the fast ones,
    then the slow ones, each in the corpus's order (fixed: a finding
    replays from its case's name)."""
    return [c for c in CASES if not c.slow] + [c for c in CASES if c.slow]


def by_name(name: str) -> JaxCase:
    """The case called `name` (a finding's replay)."""
    found = [c for c in CASES if c.name == name]
    if not found:
        raise KeyError(f"no corpus case {name!r} (fuzz/corpus.py has {len(CASES)})")
    return found[0]


def seed_outcome(case: JaxCase):
    """oracle.check of `case` under the campaign's wall-clock limit: its
    Report, or None where it raised what the case expects or one of the
    oracle's named refusals (another release may refuse a call 0.10.2
    takes). A Mismatch, a hang (watchdog.ExampleTimeout) or any other
    error propagates: each is a finding."""
    from fuzz import watchdog
    from oracle.jax_api import capabilities
    if case.needs and not getattr(capabilities(), case.needs):
        return None     # an API the release lacks (a per-argument prevent_cse before jax 0.7.2)
    try:
        with watchdog.time_limit():
            return case.check()
    except (oracle.Unsupported, oracle.InvalidArgument):
        return None
    except oracle.Mismatch:
        raise
    except Exception as e:
        if case.expect.error is not None and isinstance(e, case.expect.error):
            return None
        if raises_under_plain_jax(case):    # the user's code, on a release without an API it calls
            return None
        raise


def raises_under_plain_jax(case: JaxCase) -> bool:
    """Whether the case's function, called by plain JAX (jax.eval_shape:
    no oracle), raises on the installed release: `checkpoint_name` of a
    pytree on 0.4.25 does. An error the case expects is not such a one."""
    fn = case.fn.build() if isinstance(case.fn, oracle.Factory) else case.fn
    static = set(case.static_argnums)
    dynamic = [i for i in range(len(case.args)) if i not in static]

    def call(*dyn):
        args = list(case.args)
        for i, a in zip(dynamic, dyn):
            args[i] = a
        return fn(*args, **case.kwargs)
    try:
        jax.eval_shape(call, *[case.args[i] for i in dynamic])
    except Exception as e:
        return not (case.expect.error is not None and isinstance(e, case.expect.error))
    return False


def replay_script(case: JaxCase) -> str:
    """A runnable script that checks `case` again (a finding's repro.py
    where oracle.check raised no Mismatch with a reproducer of its own)."""
    return (f"# corpus case {case.name} (fuzz/corpus.py, after jax-ml/jax {case.source}):\n"
            f"# oracle.check of it, as the campaign ran it (needs this repository installed)\n"
            f"from fuzz.corpus import by_name\n\n"
            f"print(by_name({case.name!r}).check())\n")
