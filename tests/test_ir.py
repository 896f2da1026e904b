"""The IR: printing, type checking of every transformation's output, type
strings, tangent bookkeeping (int inputs, symbolic zeros), and grad-of-grad.
Expected values come from hand-written jaxpr text, counts derived from the
JVP rules' definitions, numpy formulas and finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import spec
from spec import ops
from spec.ir import ArrayType, Eqn, Literal, Program, TypeCheckError, Var, is_float
from spec.prims_elementwise import add_p, sin_p

f32, f64, i32 = spec.f32, spec.f64, spec.i32


# ==========================================================================
# printing reads like a jaxpr

def test_print_single_primitive():
    prog = spec.trace(ops.sin, f32[3])
    assert str(prog) == ("{ lambda ; a:f32[3]. let\n"
                         "    b:f32[3] = sin a\n"
                         "  in (b,) }")


def test_print_literal_and_chain():
    text = str(spec.trace(lambda x: ops.sin(x) * 2.0, f32[3]))
    assert "b:f32[3] = sin a" in text
    assert "c:f32[3] = mul b 2.0:f32[]" in text
    assert text.endswith("in (c,) }")


def test_print_params_and_multiple_inputs_outputs():
    prog = spec.trace(lambda x, y: (ops.reduce_sum(x, (0,)), ops.add(x, y)), f32[3, 4], f32[3, 4])
    assert str(prog) == ("{ lambda ; a:f32[3,4] b:f32[3,4]. let\n"
                         "    c:f32[4] = reduce_sum[axes=(0,)] a\n"
                         "    d:f32[3,4] = add a b\n"
                         "  in (c, d) }")


def test_print_constvar():
    text = str(spec.trace(lambda x: x + np.ones(3, np.float32), f32[3]))
    assert text == ("{ lambda a:f32[3]; b:f32[3]. let\n"
                    "    c:f32[3] = add b a\n"
                    "  in (c,) }")


def test_print_empty_program():
    # (JAX puts two spaces between `let` and `in` here; whitespace is not the point)
    text = str(spec.trace(lambda x: x, f32[2]))
    assert " ".join(text.split()) == "{ lambda ; a:f32[2]. let in (a,) }"


def test_print_call_shows_sub_program():
    body = spec.trace(ops.sin, f32[3])
    text = str(spec.trace(lambda x: ops.call(body, x, name="f")[0], f32[3]))
    assert text.startswith("{ lambda ; a:f32[3]. let\n    b:f32[3] = call[jaxpr={ lambda ; c:f32[3]. let")
    assert "d:f32[3] = sin c" in text and "in (d,) }" in text and "name=f] a" in text
    assert text.endswith("  in (b,) }")


def test_print_jvp_program():
    text = str(spec.jvp(spec.trace(ops.sin, f32[3])))
    assert text == ("{ lambda ; a:f32[3] b:f32[3]. let\n"
                    "    c:f32[3] = sin a\n"
                    "    d:f32[3] = cos a\n"
                    "    e:f32[3] = mul b d\n"
                    "  in (c, e) }")


# ==========================================================================
# type strings

@pytest.mark.parametrize("t,s", [
    (f32[3, 4], "f32[3,4]"), (f32[()], "f32[]"), (f64[3], "f64[3]"), (i32[2], "i32[2]"),
    (spec.bool_[2, 1], "bool[2,1]"), (spec.f16[5], "f16[5]"), (spec.bf16[1], "bf16[1]"),
], ids=lambda x: str(x) if isinstance(x, str) else None)
def test_type_strings(t, s):
    assert str(t) == s and repr(t) == s


def test_type_fields():
    t = f32[3, 4]
    assert t == ArrayType((3, 4), np.float32)
    assert t.shape == (3, 4) and t.dtype == np.dtype("float32") and t.ndim == 2
    assert t.size == 12 and t.nbytes == 48
    assert f32[()].shape == () and f32[()].size == 1
    assert f32[3] == f32[(3,)] and f32[3] != f64[3]


# ==========================================================================
# check_program accepts every transformation's output

def _mlp(x, W, b):
    return ops.reduce_sum(ops.tanh(x @ W + ops.broadcast_in_dim(b, (2, 4), (1,))), (0, 1))


def _call_prog(x, y):
    body = spec.trace(lambda a, b: ops.sin(a) * b, x.type, y.type)
    return ops.reduce_sum(ops.call(body, x, y, name="f")[0], (0,))


PROGRAMS = {
    "sin-chain": (lambda x: ops.reduce_sum(ops.sin(ops.sin(x)), (0,)), [f64[3]]),
    "mlp": (_mlp, [f64[2, 3], f64[3, 4], f64[4]]),
    "reduce_max": (lambda x: ops.reduce_max(ops.exp(x), (0, 1)), [f64[2, 3]]),
    "broadcasting": (lambda x, y, s: ops.reduce_sum((x * y + s) / s, (0, 1)), [f64[3, 1], f64[1, 4], f64[()]]),
    "call": (_call_prog, [f64[3], f64[3]]),
    "structural": (lambda x: ops.reduce_sum(ops.pad(ops.slice(ops.concatenate([x, ops.neg(x)], 0),
                                                              (1, 0), (4, 3), (2, 1)),
                                                     np.asarray(0.5, np.float64), ((1, 0, 1), (0, 2, 0))), (0, 1)),
                   [f64[2, 3]]),
    "select-int": (lambda x, n: ops.reduce_sum(ops.select_n(ops.gt(x, 0.0), x * x, ops.logistic(x))
                                               * ops.convert_element_type(n, np.float64), (0,)),
                   [f64[4], i32[4]]),
    "dot-batch-pow": (lambda x, y: ops.reduce_sum(ops.integer_pow(ops.dot_general(
        x, y, (((2,), (1,)), ((0,), (0,)))), 3), (0, 1, 2)), [f64[2, 3, 4], f64[2, 4, 5]]),
    "stop_gradient-max": (lambda x, y: ops.reduce_sum(ops.max(x, ops.stop_gradient(y)) * ops.sqrt(y), (0,)),
                          [f64[3], f64[3]]),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_check_program_accepts_transformation_outputs(name):
    fn, types = PROGRAMS[name]
    prog = spec.trace(fn, *types)
    spec.check_program(prog)
    jp = spec.jvp(prog)
    spec.check_program(jp)
    spec.check_program(spec.jvp(jp))                      # jvp of jvp
    lin = spec.linearize(prog)
    spec.check_program(lin.forward)
    spec.check_program(lin.linear)
    n_res = len(lin.residuals)
    back = spec.transpose(lin.linear, [False] * n_res + [True] * sum(lin.diff_inputs))
    spec.check_program(back)
    float_args = [i for i, t in enumerate(types) if is_float(t.dtype)]
    for i in float_args:
        g = spec.grad(prog, argnums=i)
        spec.check_program(g)
        spec.check_program(spec.jvp(g))
        assert g.out_types == [types[i]]
    g_all = spec.grad(prog, argnums=tuple(float_args))
    spec.check_program(g_all)
    # the transposed programs are runnable and well-typed on values
    rng = np.random.default_rng(0)
    vals = [rng.uniform(0.5, 1.5, size=t.shape).astype(t.dtype) for t in types]
    outs = spec.evaluate(g_all, *vals)
    assert [ArrayType(o.shape, o.dtype) for o in outs] == [types[i] for i in float_args]


def test_check_program_accepts_transpose_of_linear_program():
    prog = spec.trace(lambda x, y: ops.reduce_sum(ops.transpose(x, (1, 0)) * 3.0 - y, (0,)),
                      f64[2, 3], f64[3, 2])
    spec.check_program(spec.transpose(prog, [True, True]))
    spec.check_program(spec.transpose(prog, [True, False]))


# ==========================================================================
# check_program rejects malformed programs

def _sin_eqn(x, out):
    return Eqn(sin_p, [x], [out], {"accuracy": None})


def test_reject_var_used_before_definition():
    a, b, c = Var(f32[3]), Var(f32[3]), Var(f32[3])
    prog = Program([a], [_sin_eqn(b, c), _sin_eqn(a, b)], [c])
    with pytest.raises(TypeCheckError, match="used before"):
        spec.check_program(prog)


def test_reject_undefined_output():
    a, b = Var(f32[3]), Var(f32[3])
    with pytest.raises(TypeCheckError, match="used before"):
        spec.check_program(Program([a], [], [b]))


@pytest.mark.parametrize("bad", [f32[4], f64[3], f32[3, 1]], ids=str)
def test_reject_wrong_declared_output_type(bad):
    a = Var(f32[3])
    out = Var(bad)
    with pytest.raises(TypeCheckError, match="shape rule"):
        spec.check_program(Program([a], [_sin_eqn(a, out)], [out]))


def test_reject_variable_defined_twice():
    a, b = Var(f32[3]), Var(f32[3])
    prog = Program([a], [_sin_eqn(a, b), _sin_eqn(a, b)], [b])
    with pytest.raises(TypeCheckError, match="defined twice"):
        spec.check_program(prog)


def test_reject_mistyped_literal():
    a, b = Var(f32[3]), Var(f32[3])
    lit = Literal(np.asarray(1.0, np.float64), f32[()])
    with pytest.raises(TypeCheckError, match="literal"):
        spec.check_program(Program([a], [Eqn(add_p, [a, lit], [b])], [b]))


def test_reject_ill_typed_equation():
    a, c, d = Var(f32[3]), Var(f32[4]), Var(f32[3])
    with pytest.raises(TypeError, match="^add"):
        spec.check_program(Program([a, c], [Eqn(add_p, [a, c], [d])], [d]))


def test_reject_malformed_sub_program():
    a, b, c = Var(f32[3]), Var(f32[3]), Var(f32[3])
    body = Program([a], [_sin_eqn(b, c)], [c])        # b undefined inside the body
    x, y = Var(f32[3]), Var(f32[3])
    outer = Program([x], [Eqn(spec.primitives["call"], [x], [y], {"jaxpr": body, "name": "f"})], [y])
    with pytest.raises(TypeCheckError, match="used before"):
        spec.check_program(outer)


# ==========================================================================
# tangent bookkeeping

def test_int_inputs_get_no_tangent():
    prog = spec.trace(lambda x, n, b: (x * ops.convert_element_type(n, np.float32), n, b),
                      f32[3], i32[3], spec.bool_[3])
    jp = spec.jvp(prog)
    spec.check_program(jp)
    assert jp.in_types == [f32[3], i32[3], spec.bool_[3], f32[3]]
    # only the float output has a tangent
    assert jp.out_types == [f32[3], i32[3], spec.bool_[3], f32[3]]
    x, n, t = np.float32([1, 2, 3]), np.int32([4, 5, -6]), np.float32([0.5, 1, 2])
    out, n_out, b_out, dout = spec.evaluate(jp, x, n, np.array([True, False, True]), t)
    np.testing.assert_array_equal(dout, t * n.astype(np.float32))
    np.testing.assert_array_equal(n_out, n)


def test_only_int_inputs_give_zero_float_tangent():
    prog = spec.trace(lambda n: ops.convert_element_type(n, np.float64) * 2.0, i32[3])
    jp = spec.jvp(prog)
    assert jp.in_types == [i32[3]]
    _, dout = spec.evaluate(jp, np.int32([1, 2, 3]))
    np.testing.assert_array_equal(dout, np.zeros(3))


def _reads(prog, var):
    return [e for e in prog.eqns if any(a is var for a in e.inputs)]


def test_unused_float_input_creates_no_tangent_equations():
    # jvp of sin: sin x, cos x, mul t (cos x) -- 3 equations, however many unused inputs there are
    jp = spec.jvp(spec.trace(lambda x, y: ops.sin(x), f64[3], f64[3]))
    y_dot = jp.inputs[3]
    assert [e.primitive.name for e in jp.eqns] == ["sin", "cos", "mul"]
    assert not _reads(jp, y_dot)


def test_stop_gradient_creates_no_tangent_equations():
    # x * stop_gradient(y): stop_gradient y; mul x s; mul x_dot s. Nothing reads y_dot.
    jp = spec.jvp(spec.trace(lambda x, y: x * ops.stop_gradient(y), f64[3], f64[3]))
    y_dot = jp.inputs[3]
    assert len(jp.eqns) == 3
    assert sorted(e.primitive.name for e in jp.eqns) == ["mul", "mul", "stop_gradient"]
    assert not _reads(jp, y_dot) and all(o is not y_dot for o in jp.outputs)
    x, y, tx, ty = (np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]),
                    np.array([1.0, -1.0, 0.5]), np.array([9.0, 9.0, 9.0]))
    _, dout = spec.evaluate(jp, x, y, tx, ty)
    np.testing.assert_array_equal(dout, tx * y)


def test_tangent_of_only_stopped_input_is_instantiated_zero():
    jp = spec.jvp(spec.trace(lambda x: ops.sin(ops.stop_gradient(x)), f64[3]))
    x_dot = jp.inputs[1]
    assert not _reads(jp, x_dot)
    assert "cos" not in [e.primitive.name for e in jp.eqns]
    _, dout = spec.evaluate(jp, np.ones(3), np.ones(3))
    np.testing.assert_array_equal(dout, np.zeros(3))


def test_integer_path_creates_no_tangent_equations():
    # comparisons and the select predicate carry no tangent: only select_n of the tangents
    jp = spec.jvp(spec.trace(lambda x: ops.select_n(ops.gt(x, 0.0), ops.neg(x), x), f64[3]))
    names = [e.primitive.name for e in jp.eqns]
    assert names.count("gt") == 1 and names.count("select_n") == 2 and names.count("neg") == 2


# ==========================================================================
# grad of grad against finite differences of grad and against calculus

FD_STEP = 1e-5   # second differences of a first derivative: error ~ h**2 + eps/h ~ 1e-10
FD_TOL = 1e-7


def _fd(f, x, h=FD_STEP):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("fn,d2,x", [
    (ops.sin, lambda x: -np.sin(x), 0.7),
    (ops.tanh, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2), -0.4),
    (lambda x: ops.sin(x) * ops.tanh(x * x), None, 0.9),
    (lambda x: ops.logistic(x) * ops.exp(-x), None, 0.3),
], ids=["sin", "tanh", "sin-times-tanh", "logistic-exp"])
def test_grad_of_grad_scalar(fn, d2, x):
    prog = spec.trace(fn, f64[()])
    g = spec.grad(prog)
    gg = spec.grad(g)
    spec.check_program(gg)
    grad_at = lambda v: float(spec.evaluate(g, np.float64(v))[0])
    got = float(spec.evaluate(gg, np.float64(x))[0])
    np.testing.assert_allclose(got, _fd(grad_at, x), rtol=FD_TOL, atol=FD_TOL)
    if d2 is not None:
        np.testing.assert_allclose(got, d2(x), rtol=1e-12, atol=1e-14)


def test_grad_of_grad_mul():
    # f = x * x * y: df/dx = 2xy; d2f/dx2 = 2y; d2f/dxdy = 2x
    prog = spec.trace(lambda x, y: x * x * y, f64[()], f64[()])
    gx = spec.grad(prog, argnums=0)
    x, y = np.float64(1.3), np.float64(-0.7)
    np.testing.assert_allclose(spec.evaluate(gx, x, y)[0], 2 * x * y, rtol=1e-15)
    gxx, gxy = spec.grad(gx, argnums=0), spec.grad(gx, argnums=1)
    for p in (gxx, gxy):
        spec.check_program(p)
    got_xx, got_xy = float(spec.evaluate(gxx, x, y)[0]), float(spec.evaluate(gxy, x, y)[0])
    fd_xx = _fd(lambda v: float(spec.evaluate(gx, np.float64(v), y)[0]), x)
    fd_xy = _fd(lambda v: float(spec.evaluate(gx, x, np.float64(v))[0]), y)
    np.testing.assert_allclose([got_xx, got_xy], [fd_xx, fd_xy], rtol=FD_TOL, atol=FD_TOL)
    np.testing.assert_allclose([got_xx, got_xy], [2 * y, 2 * x], rtol=1e-15)


def test_grad_of_grad_of_grad_sin():
    g3 = spec.grad(spec.grad(spec.grad(spec.trace(ops.sin, f64[()]))))
    spec.check_program(g3)
    np.testing.assert_allclose(spec.evaluate(g3, np.float64(0.4))[0], -np.cos(0.4), rtol=1e-14)
