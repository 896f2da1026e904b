"""`evaluate`: run a program on numpy arrays, one equation at a time."""
from __future__ import annotations

import numpy as np

from spec.core import eval_rules
from spec.ir import Program, Var, type_of


class EvaluationError(TypeError):
    pass


def evaluate(prog: Program, *args) -> list[np.ndarray]:
    """Evaluate `prog` on concrete arrays with each primitive's numpy rule.

    Arguments must have exactly the program's input types (no implicit
    casts); every equation's result is checked against its declared type."""
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
        out = rule(*map(read, e.inputs), **e.params)
        outs = out if e.primitive.multiple_results else [out]
        for v, x in zip(e.outputs, outs):
            x = np.asarray(x)
            if type_of(x) != v.type.with_memory_space(None):   # values don't know their memory
                raise EvaluationError(f"{e.primitive.name} produced {type_of(x)}, declared {v.type}")
            env[v.id] = x
    return [read(a) for a in prog.outputs]
