"""A primitive's `spec.core.Example`, run: the program it traces, and what
differentiating it saves inside `checkpoint(policy=everything_saveable)`."""
from __future__ import annotations

import functools

import spec
from spec import ops, policies
from spec.core import Example
from spec.ir import DTYPES, ArrayType
from spec.vjp import LINEARIZATION_ERROR

from tools.gen_docs.markdown import code, fence


def types_of(example: Example) -> list[ArrayType]:
    return [ArrayType(tuple(shape), DTYPES[dtype]) for shape, dtype, _ in example.operands]


def operands(example: Example) -> str:
    """`f32[2,3]` (normal), ... as the example draws them."""
    return ", ".join(f"{code(str(t))} ({domain})"
                     for t, (_, _, domain) in zip(types_of(example), example.operands))


def saved(example: Example) -> str:
    """What spec.saved_residuals reports for the example under
    everything_saveable (its parameter names kept), or the error it raises
    where differentiating it is an error by design; any other error is a bug."""
    @functools.wraps(example.fn)
    def checkpointed(*args):
        return ops.checkpoint(example.fn, policy=policies.everything_saveable)(*args)
    try:
        residuals = spec.saved_residuals(spec.trace(checkpointed, *types_of(example)))
    except (TypeError, NotImplementedError, ValueError) as e:   # by design (a PrimitiveError is a TypeError;
        if isinstance(e, ValueError) and str(e) != LINEARIZATION_ERROR:   # a JVP with no linearization)
            raise
        return f"differentiating it raises {type(e).__name__}: {e}"
    return ", ".join(code(str(r)) for r in residuals) if residuals else "nothing"


def example_lines(example: Example, others: list[Example]) -> list[str]:
    """The example's section of a primitive's entry in rules.md."""
    more = (f" ({len(others)} more in the block: {', '.join(code(e.name) for e in others)})"
            if others else "")
    prog = spec.trace(example.fn, *types_of(example))
    return [f"**Example** {code(example.name)}{more}, on {operands(example)}:", "",
            *fence(str(prog)), "",
            f"Saves under `everything_saveable`: {saved(example)}.", ""]
