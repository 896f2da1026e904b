"""`evaluate`: run a program on numpy arrays, one equation at a time."""
from __future__ import annotations

import contextvars

import numpy as np

from spec.core import eval_rules
from spec.ir import Program, Var, type_of
from spec.arrays import _ASSUME


class EvaluationError(TypeError):
    pass


_HOOK = contextvars.ContextVar("evaluate_hook", default=None)


def _has_type(x: np.ndarray, t) -> bool:
    """A value has type t: shape and dtype (values don't know their memory
    space); a symbolic value (an object array of expressions) only the shape."""
    if x.dtype == object:
        return x.shape == t.shape
    return type_of(x) == t.with_memory_space(None)


def evaluate(prog: Program, *args, hook=None, assume=None) -> list[np.ndarray]:
    """Evaluate `prog` on concrete arrays with each primitive's numpy rule.

    Arguments must have exactly the program's input types (no implicit
    casts); every equation's result is checked against its declared type.
    `hook(eqn, inputs, outputs) -> outputs`, if given, sees (and may
    replace) every equation's results, in sub-programs too: an observer
    for tools (e.g. the oracle's rounding-error model).

    Arguments may be numpy object arrays of sympy expressions (see
    spec.symbolic): the same rules then compute exact expressions. A
    comparison (or max, abs, ...) that sympy cannot decide is taken at the
    point `assume` ({symbol: number}) if given, else raises SymbolicError."""
    if assume is not None:
        token = _ASSUME.set(assume)
        try:
            return evaluate(prog, *args, hook=hook)
        finally:
            _ASSUME.reset(token)
    if hook is not None:
        token = _HOOK.set(hook)
        try:
            return evaluate(prog, *args)
        finally:
            _HOOK.reset(token)
    hook = _HOOK.get()
    if len(args) != len(prog.inputs):
        raise EvaluationError(f"program takes {len(prog.inputs)} inputs, got {len(args)}")
    env: dict[int, np.ndarray] = {}

    def read(a):
        return env[a.id] if isinstance(a, Var) else a.value

    for i, (v, x) in enumerate(zip(prog.inputs, args)):
        if not isinstance(x, (np.ndarray, np.generic, int, float, bool)):
            raise EvaluationError(f"input {i}: expected a numpy array, got {type(x).__name__}")
        x = np.asarray(x)
        if not _has_type(x, v.type):
            raise EvaluationError(f"input {i}: expected {v.type}, got {x.dtype}{list(x.shape)}")
        env[v.id] = x
    for e in prog.eqns:
        rule = eval_rules.get(e.primitive)
        if rule is None:
            raise EvaluationError(f"primitive {e.primitive.name!r} has no evaluation rule")
        ins = [read(a) for a in e.inputs]
        out = rule(*ins, **e.params)
        outs = out if e.primitive.multiple_results else [out]
        if hook is not None:
            outs = hook(e, ins, list(outs))
        for v, x in zip(e.outputs, outs):
            x = np.asarray(x)
            if not _has_type(x, v.type):
                raise EvaluationError(f"{e.primitive.name} produced {x.dtype}{list(x.shape)}, declared {v.type}")
            env[v.id] = x
    return [read(a) for a in prog.outputs]
