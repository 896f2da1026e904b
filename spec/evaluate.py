"""`evaluate`: run a program on numpy arrays, one equation at a time."""
from __future__ import annotations

import contextvars

import numpy as np

from spec.core import eval_rules
from spec.ir import Program, Var, type_of


class EvaluationError(TypeError):
    pass


_HOOK = contextvars.ContextVar("evaluate_hook", default=None)


def evaluate(prog: Program, *args, hook=None) -> list[np.ndarray]:
    """Evaluate `prog` on concrete arrays with each primitive's numpy rule.

    Arguments must have exactly the program's input types (no implicit
    casts); every equation's result is checked against its declared type.
    `hook(eqn, inputs, outputs) -> outputs`, if given, sees (and may
    replace) every equation's results, in sub-programs too: an observer
    for tools (e.g. the oracle's rounding-error model)."""
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
        if type_of(x) != v.type.with_memory_space(None):
            raise EvaluationError(f"input {i}: expected {v.type}, got {type_of(x)}")
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
            if type_of(x) != v.type.with_memory_space(None):   # values don't know their memory
                raise EvaluationError(f"{e.primitive.name} produced {type_of(x)}, declared {v.type}")
            env[v.id] = x
    return [read(a) for a in prog.outputs]
