"""The same program in float64: the reference that measures conditioning.

`upcast(prog)` maps every floating type to f64 and every complex type to
c128 (literals, dtype params and sub-programs included). Evaluating it gives the exact answer up to f64
rounding; the distance of the spec's own low-precision evaluation from it
says how much rounding this program at this point amplifies (its
conditioning), which oracle.tolerances uses to bound JAX's error."""
from __future__ import annotations

import numpy as np

from spec.core import bind, building
from spec.ir import ArrayType, Program, Var, is_complex, is_float, map_subprograms
from spec.core import PrimitiveError
from spec.prims_elementwise import convert_element_type

F64 = np.dtype("float64")
C128 = np.dtype("complex128")


def wide(dtype) -> np.dtype:
    """The reference's dtype for an inexact dtype: complex128 for a complex
    one, float64 for a real one."""
    return C128 if is_complex(dtype) else F64


def _up_type(t: ArrayType) -> ArrayType:
    return ArrayType(t.shape, wide(t.dtype), t.memory_space) if is_float(t.dtype) else t


def _up_params(params: dict) -> dict:
    out = dict(params)
    for k in ("new_dtype", "preferred_element_type", "dtype", "input_dtype"):   # (iota's `dtype`, conj's `input_dtype`)
        if out.get(k) is not None and not isinstance(out[k], str) and is_float(out[k]):
            out[k] = wide(out[k])
    return map_subprograms(out, upcast)


def upcast(prog: Program) -> Program:
    with building() as b:
        ins = [b.new_input(_up_type(v.type)) for v in prog.inputs]
        env = {v.id: t for v, t in zip(prog.inputs, ins)}

        def read(a):
            if isinstance(a, Var):
                return env[a.id]
            return a.value.astype(wide(a.type.dtype)) if is_float(a.type.dtype) else a.value
        for e in prog.eqns:
            outs = _bind_up(e, [read(a) for a in e.inputs])
            for v, o in zip(e.outputs, outs if e.primitive.multiple_results else [outs]):
                env[v.id] = o
        return b.build(ins, [read(a) for a in prog.outputs], input_names=prog.input_names)


def _bind_up(e, ins):
    """The equation in float64; one whose rule refuses float64 (a bitcast
    of u32 to f32 keeps its width) computes in its own dtypes, its float
    operands rounded to them and its float results widened. A float result
    whose type a param gives that _up_params does not widen (a
    pure_callback's result_avals: found by a pristine campaign, 9aa1baaed4)
    is widened after it: every float value of the program is f64."""
    try:
        outs = bind(e.primitive, *ins, **_up_params(e.params))
    except PrimitiveError:
        ins = [convert_element_type(x, a.type.dtype) if is_float(a.type.dtype) and not isinstance(x, np.ndarray)
               else (np.asarray(x, a.type.dtype) if isinstance(x, np.ndarray) else x)
               for x, a in zip(ins, e.inputs)]
        outs = bind(e.primitive, *ins, **e.params)
    widen = lambda o: convert_element_type(o, wide(o.dtype)) if is_float(o.dtype) and o.dtype != wide(o.dtype) else o  # noqa: E731
    return [widen(o) for o in outs] if e.primitive.multiple_results else widen(outs)


def up(values):
    return [np.asarray(v, wide(np.asarray(v).dtype)) if is_float(np.asarray(v).dtype) else np.asarray(v)
            for v in values]
