"""Test programs, each written twice: with JAX (jax.numpy / jax.lax) and with
the spec's builder API (spec.ops), plus the types of their inputs.

The two versions of a program must trace to the *same* primitives, in the
same order, with the same types (jit <-> spec `call`); the recorder stores
JAX's equations (`tests/recordings/residuals_core.json`, key "jaxprs") and
`tests/test_recorded_residuals.py` checks the spec's program against them,
so a residual disagreement is never just two different programs.

Importing this module does not import jax: `jax`, `jnp` and `lax` below are
lazy stand-ins that import the real modules on first attribute access (only
when a JAX function is called), so the jax-free tests can use the table.

Notes on matching JAX's tracing:
* `x @ W` in jax.numpy is `dot_general[preferred_element_type=float32]`,
  as is the spec's `@` (`ops.matmul`).
* jax.numpy makes ranks equal with `broadcast_in_dim` (f32[4] -> f32[1,4])
  and lets the binary primitive broadcast size-1 dims, so the spec versions
  do the same.
* `jnp.where` is a jitted function named `_where` (convert_element_type,
  broadcast_in_dim and select_n of its arguments), so the spec version is a
  `call` of the same body named '_where'.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

import spec
from spec import ops


class _LazyModule:
    """Imports module `name` on first attribute access."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self):
        return f"<lazy module {self._name}>"


jax = _LazyModule("jax")
jnp = _LazyModule("jax.numpy")
lax = _LazyModule("jax.lax")


@dataclass(frozen=True)
class TestProgram:
    name: str
    jax_fn: Callable          # takes jax arrays, calls jax.numpy / jax.lax
    spec_fn: Callable         # takes spec tracers, calls spec.ops
    in_types: tuple           # ((dtype name, shape), ...), dtype names as in spec: "f32", "i32"
    note: str = ""

    __test__ = False          # not a pytest test class

    def spec_types(self):
        return [spec.ir.ArrayType(shape, spec.ir.DTYPES[dt]) for dt, shape in self.in_types]

    def trace_spec(self) -> spec.Program:
        return spec.trace(self.spec_fn, *self.spec_types())

    def example_inputs(self) -> list[np.ndarray]:
        """Simple numpy inputs of the right types: positive arange-based floats
        (so log/sqrt/rsqrt are defined), arange-based ints."""
        out = []
        for dt, shape in self.in_types:
            n = int(np.prod(shape, dtype=np.int64))
            base = np.arange(n).reshape(shape)
            if dt in ("i32",):
                out.append(base.astype(np.int32))
            elif dt == "bool":
                out.append((base % 2).astype(bool))
            else:
                out.append(((base + 1) * 0.25).astype(spec.ir.DTYPES[dt]))
        return out


F32 = "f32"
I32 = "i32"

# a non-scalar numpy constant captured by both versions ("from a constant")
CONST3 = np.array([0.5, 1.0, 2.0], dtype=np.float32)


# --------------------------------------------------------------------------
# the programs: JAX version, then spec version

def sin_chain_jax(x):
    return jnp.sin(jnp.sin(jnp.sin(x)))


def sin_chain_spec(x):
    return ops.sin(ops.sin(ops.sin(x)))


def mlp_layer_jax(x, W, b):
    return jnp.tanh(x @ W + b)


def mlp_layer_spec(x, W, b):
    # jnp makes b's rank match (f32[4] -> f32[1,4]); add broadcasts the size-1 dim
    return ops.tanh(x @ W + ops.broadcast_in_dim(b, (1, 4), (1,)))


def unused_input_jax(x, unused):
    return jnp.sin(x) * x


def unused_input_spec(x, unused):
    return ops.sin(x) * x


def int_input_jax(x, n):
    return x * lax.convert_element_type(n, jnp.float32)


def int_input_spec(x, n):
    return x * ops.convert_element_type(n, np.float32)


def stop_gradient_jax(x):
    return jnp.sin(lax.stop_gradient(x)) * x


def stop_gradient_spec(x):
    return ops.sin(ops.stop_gradient(x)) * x


def x_times_x_jax(x):
    return x * x


def x_times_x_spec(x):
    return x * x


def mul_literal_jax(x):
    return jnp.sin(x * 2.0)


def mul_literal_spec(x):
    return ops.sin(x * 2.0)


def numpy_constant_jax(x):
    return jnp.sin(x) * CONST3


def numpy_constant_spec(x):
    return ops.sin(x) * CONST3


def max_plus_sum_exp_jax(x):
    return jnp.max(x) + jnp.sum(jnp.exp(x))


def max_plus_sum_exp_spec(x):
    return ops.reduce_max(x, (0, 1)) + ops.reduce_sum(ops.exp(x), (0, 1))


def pow_max_logistic_jax(x):
    return lax.logistic(jnp.maximum(x ** 3, 0.0))


def pow_max_logistic_spec(x):
    return ops.logistic(ops.max(ops.integer_pow(x, 3), 0.0))


def log_family_jax(x, y):
    return jnp.log(x) * jnp.sqrt(y) + lax.rsqrt(x) / jnp.log1p(y)


def log_family_spec(x, y):
    return ops.log(x) * ops.sqrt(y) + ops.rsqrt(x) / ops.log1p(y)


def abs_jax(x):
    return jnp.sin(jnp.abs(x))


def abs_spec(x):
    return ops.sin(ops.abs(x))


def shapes_mix_jax(x):
    t = lax.transpose(x, (1, 0))                               # f32[3,2]
    r = lax.reshape(t, (6,))                                   # f32[6]
    s = lax.slice(r, (1,), (5,))                               # f32[4]
    b = lax.broadcast_in_dim(s, (2, 4), (1,))                  # f32[2,4]
    c = lax.concatenate([b, jnp.sin(b)], 0)                    # f32[4,4]
    return c * jnp.cos(c)


def shapes_mix_spec(x):
    t = ops.transpose(x, (1, 0))
    r = ops.reshape(t, (6,))
    s = ops.slice(r, (1,), (5,))
    b = ops.broadcast_in_dim(s, (2, 4), (1,))
    c = ops.concatenate([b, ops.sin(b)], 0)
    return c * ops.cos(c)


_BATCH_DN = (((2,), (1,)), ((0,), (0,)))


def batched_dot_jax(a, b):
    out = lax.dot_general(a, b, _BATCH_DN, preferred_element_type=jnp.float32)   # f32[2,3,5]
    return jnp.sin(out)


def batched_dot_spec(a, b):
    out = ops.dot_general(a, b, _BATCH_DN, preferred_element_type=np.float32)
    return ops.sin(out)


def scaled_sin(x):                 # the jitted inner function (its name is recorded)
    return jnp.sin(x) * 2.0


def scaled_sin_spec(x):
    return ops.sin(x) * 2.0


def jit_inner_jax(x):
    return jnp.cos(jax.jit(scaled_sin)(x))


def jit_inner_spec(x):
    inner = spec.trace(scaled_sin_spec, x.type)
    (y,) = ops.call(inner, x, name="scaled_sin")
    return ops.cos(y)


def x_plus_x_pow0(x):
    return x + x ** 0


def jit_zero_tangent_jax(x):
    # found by the fuzzer: inside a jit, x ** 0 has a zero tangent known from
    # primals alone; linearizing the jit's body must not save it
    return jax.jit(x_plus_x_pow0)(x)


def jit_zero_tangent_spec(x):
    inner = spec.trace(lambda g: g + ops.integer_pow(g, 0), x.type)
    (y,) = ops.call(inner, x, name="x_plus_x_pow0")
    return y


# a jitted function closing over an array (a constvar of its jaxpr) that its
# tangent reads: pjit's linearize rule forwards the constant itself ("from a
# constant"); one the inner jit forwarded is no const of the outer jit's
# jaxpr, so the outer one returns it ("output of jitted function"), unless
# the outer jit closes over the same array too
SCALE = np.array([0.5, 1.5, -2.0], np.float32)


def scaled_by_constant(x):
    return jnp.sin(x) * SCALE


def jit_constant_jax(x):
    return jax.jit(scaled_by_constant)(x)


def _scaled_by_constant_call(x):
    (y,) = ops.call(spec.trace(lambda g: ops.sin(g) * SCALE, x.type), x, name="scaled_by_constant")
    return y


def jit_constant_spec(x):
    return _scaled_by_constant_call(x)


def outer_of_constant(x):
    return jnp.cos(jax.jit(scaled_by_constant)(x))


def jit_constant_in_jit_jax(x):
    return jax.jit(outer_of_constant)(x)


def jit_constant_in_jit_spec(x):
    (y,) = ops.call(spec.trace(lambda g: ops.cos(_scaled_by_constant_call(g)), x.type), x,
                    name="outer_of_constant")
    return y


def outer_sharing_constant(x):
    return jax.jit(scaled_by_constant)(x) * SCALE


def jit_shared_constant_jax(x):
    return jax.jit(outer_sharing_constant)(x)


def jit_shared_constant_spec(x):
    (y,) = ops.call(spec.trace(lambda g: _scaled_by_constant_call(g) * SCALE, x.type), x,
                    name="outer_sharing_constant")
    return y


ROW = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], np.float32)    # closed over by a jit
GRID = np.arange(12, dtype=np.float32).reshape(3, 4)   # closed over outside it, read after it


def scaled_by_row(x):
    return ROW * x


def jit_constant_then_outer_constant_jax(x):
    return jax.jit(scaled_by_row)(x), jnp.sum(x @ GRID)


def jit_constant_then_outer_constant_spec(x):
    (y,) = ops.call(spec.trace(lambda g: ROW * g, x.type), x, name="scaled_by_row")
    return y, ops.reduce_sum(x @ GRID, (0, 1))


def max_times_sum(k, l):
    return jax.lax.reduce_max(k, (0,)) * jnp.sum(l)


def tanh_of_max_with_cos(d):            # jitted: its output is also a residual (tanh's)
    return jnp.tanh(jax.lax.select(d > jnp.cos(d), d, jnp.cos(d)))


def jit_output_residual_jax(x):
    # found by the fuzzer: a residual that is also the jit's output is returned
    # once, in the output's place (saved_residuals lists it there, before
    # the bool predicate that select_n's JVP reads first)
    return jnp.sum(jax.jit(tanh_of_max_with_cos)(jnp.sin(x)))


def jit_output_residual_spec(x):
    def inner(d):
        return ops.tanh(ops.select_n(ops.gt(d, ops.cos(d)), ops.cos(d), d))
    (y,) = ops.call(spec.trace(inner, x.type), ops.sin(x), name="tanh_of_max_with_cos")
    return ops.reduce_sum(y, (0,))


def identity(x):                         # jitted: its output is its input
    return x


def jit_identity_jax(x):
    # found by the fuzzer: a jit's output that is just its input is that
    # input (pjit's linearization forwards it), so it is saved as the input
    return jnp.sum(x * jax.jit(identity)(x))


def jit_identity_spec(x):
    (y,) = ops.call(spec.trace(lambda c: c, x.type), x, name="identity")
    return ops.reduce_sum(x * y, (0,))


def jit_residual_order_jax(x):
    # found by the fuzzer: a linearized jit returns its residuals in the
    # order its tangent program first reads them
    return jax.jit(max_times_sum)(jnp.sin(x), x)


def jit_residual_order_spec(x):
    inner = spec.trace(lambda k, l: ops.mul(ops.reduce_max(k, (0,)), ops.reduce_sum(l, (0,))), x.type, x.type)
    (y,) = ops.call(inner, ops.sin(x), x, name="max_times_sum")
    return y


def constant_read_twice_jax(x, y):
    # one constant read by two tangent equations is one residual
    return jnp.sin(x * CONST3) + jnp.sin(y * CONST3)


def constant_read_twice_spec(x, y):
    return ops.sin(x * CONST3) + ops.sin(y * CONST3)


def jit_constant_read_twice_jax(x, y):
    return jax.jit(constant_read_twice_jax)(x, y)


def jit_constant_read_twice_spec(x, y):
    (z,) = ops.call(spec.trace(constant_read_twice_spec, x.type, y.type), x, y, name="constant_read_twice_jax")
    return z


def where_relu_jax(x):
    return jnp.where(x > 0.0, x, 0.0) * x


def _where_spec(condition, x, y):
    # jnp.where's jitted `_where(condition, x, y)` for (bool[3], f32[3], 0.0)
    y = ops.convert_element_type(y, np.float32)
    y = ops.broadcast_in_dim(y, condition.shape, ())
    return ops.select_n(condition, y, x)


def where_relu_spec(x):
    cond = x > 0.0
    body = spec.trace(_where_spec, cond.type, x.type, spec.f32[()])
    (w,) = ops.call(body, cond, x, np.float32(0.0), name="_where")
    return w * x


def int_output_jax(x):
    return jnp.sin(x), lax.convert_element_type(x, jnp.int32)


def int_output_spec(x):
    return ops.sin(x), ops.convert_element_type(x, np.int32)


def softmax_rows_jax(x):
    m = lax.stop_gradient(jnp.max(x, axis=1, keepdims=True))
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=1, keepdims=True)


def softmax_rows_spec(x):
    # keepdims=True is a broadcast_in_dim f32[2] -> f32[2,1]; sub/div broadcast the size-1 dim
    m = ops.stop_gradient(ops.broadcast_in_dim(ops.reduce_max(x, (1,)), (2, 1), (0,)))
    e = ops.exp(x - m)
    return e / ops.broadcast_in_dim(ops.reduce_sum(e, (1,)), (2, 1), (0,))


def select_n_direct_jax(x, y):
    return lax.select_n(lax.lt(x, y), jnp.sin(x), jnp.cos(y))


def select_n_direct_spec(x, y):
    return ops.select_n(ops.lt(x, y), ops.sin(x), ops.cos(y))


def scalar_where_jax(x):
    return jnp.where(x > 1.0, x * x, 0.0)


def _where_scalar_spec(condition, x, y):
    # for scalar operands `_where` converts y and selects (no broadcast)
    y = ops.convert_element_type(y, np.float32)
    return ops.select_n(condition, y, x)


def scalar_where_spec(x):
    cond = x > 1.0
    xx = x * x
    body = spec.trace(_where_scalar_spec, cond.type, xx.type, spec.f32[()])
    (w,) = ops.call(body, cond, xx, np.float32(0.0), name="_where")
    return w


def integer_pows_jax(x):
    return x ** 1 + x ** 2 + x ** 3 + x ** -2 + x ** 0


def integer_pows_spec(x):
    return (ops.integer_pow(x, 1) + ops.integer_pow(x, 2) + ops.integer_pow(x, 3)
            + ops.integer_pow(x, -2) + ops.integer_pow(x, 0))


def min_sub_neg_square_jax(x, y):
    return lax.min(x, y) - (-lax.square(x)) + jnp.tanh(y)


def min_sub_neg_square_spec(x, y):
    return ops.min(x, y) - (-ops.square(x)) + ops.tanh(y)


PROGRAMS: list[TestProgram] = [
    TestProgram("sin_chain", sin_chain_jax, sin_chain_spec, ((F32, (3,)),)),
    TestProgram("mlp_layer", mlp_layer_jax, mlp_layer_spec,
                ((F32, (2, 3)), (F32, (3, 4)), (F32, (4,)))),
    TestProgram("unused_input", unused_input_jax, unused_input_spec, ((F32, (3,)), (F32, (5,)))),
    TestProgram("int_input", int_input_jax, int_input_spec, ((F32, (3,)), (I32, (3,)))),
    TestProgram("stop_gradient", stop_gradient_jax, stop_gradient_spec, ((F32, (3,)),)),
    TestProgram("x_times_x", x_times_x_jax, x_times_x_spec, ((F32, (3,)),)),
    TestProgram("mul_literal", mul_literal_jax, mul_literal_spec, ((F32, (3,)),)),
    TestProgram("numpy_constant", numpy_constant_jax, numpy_constant_spec, ((F32, (3,)),)),
    TestProgram("max_plus_sum_exp", max_plus_sum_exp_jax, max_plus_sum_exp_spec, ((F32, (2, 3)),)),
    TestProgram("pow_max_logistic", pow_max_logistic_jax, pow_max_logistic_spec, ((F32, (3,)),)),
    TestProgram("log_family", log_family_jax, log_family_spec, ((F32, (3,)), (F32, (3,)))),
    TestProgram("abs", abs_jax, abs_spec, ((F32, (3,)),)),
    TestProgram("shapes_mix", shapes_mix_jax, shapes_mix_spec, ((F32, (2, 3)),)),
    TestProgram("batched_dot", batched_dot_jax, batched_dot_spec, ((F32, (2, 3, 4)), (F32, (2, 4, 5)))),
    TestProgram("jit_inner", jit_inner_jax, jit_inner_spec, ((F32, (3,)),)),
    TestProgram("jit_zero_tangent", jit_zero_tangent_jax, jit_zero_tangent_spec, ((F32, (3,)),)),
    TestProgram("jit_constant", jit_constant_jax, jit_constant_spec, ((F32, (3,)),)),
    TestProgram("jit_constant_in_jit", jit_constant_in_jit_jax, jit_constant_in_jit_spec, ((F32, (3,)),)),
    TestProgram("jit_constant_then_outer_constant", jit_constant_then_outer_constant_jax,
                jit_constant_then_outer_constant_spec, ((F32, (2, 3)),),
                "the outer constant, read after the jit, is listed before the jit's (nightly finding)"),
    TestProgram("jit_shared_constant", jit_shared_constant_jax, jit_shared_constant_spec, ((F32, (3,)),)),
    TestProgram("jit_residual_order", jit_residual_order_jax, jit_residual_order_spec, ((F32, (3,)),)),
    TestProgram("jit_output_residual", jit_output_residual_jax, jit_output_residual_spec, ((F32, (3,)),)),
    TestProgram("jit_identity", jit_identity_jax, jit_identity_spec, ((F32, (3,)),)),
    TestProgram("constant_read_twice", constant_read_twice_jax, constant_read_twice_spec,
                ((F32, (3,)), (F32, (3,)))),
    TestProgram("jit_constant_read_twice", jit_constant_read_twice_jax, jit_constant_read_twice_spec,
                ((F32, (3,)), (F32, (3,)))),
    TestProgram("where_relu", where_relu_jax, where_relu_spec, ((F32, (3,)),)),
    TestProgram("int_output", int_output_jax, int_output_spec, ((F32, (3,)),)),
    TestProgram("softmax_rows", softmax_rows_jax, softmax_rows_spec, ((F32, (2, 3)),)),
    TestProgram("select_n_direct", select_n_direct_jax, select_n_direct_spec, ((F32, (3,)), (F32, (3,)))),
    TestProgram("scalar_where", scalar_where_jax, scalar_where_spec, ((F32, ()),)),
    TestProgram("integer_pows", integer_pows_jax, integer_pows_spec, ((F32, (3,)),)),
    TestProgram("min_sub_neg_square", min_sub_neg_square_jax, min_sub_neg_square_spec,
                ((F32, (3,)), (F32, (3,)))),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "duplicate program names"
