"""Shrink on what failed: after the first Mismatch of a Hypothesis run,
check only the (property, implementation) pairs that differed.

Each example of the differential property is a whole oracle.check: every
property, both implementations, mostly XLA compiles (about a second).
Hypothesis shrinks a failing program by trying hundreds of smaller ones, so
shrinking on the whole check takes minutes (it hit Hypothesis' five-minute
cap). Once a program has failed, only what failed decides whether a smaller
one still shows the bug: checking just that is several times faster (a
residual set needs no compile at all) and keeps the shrinker from sliding
to a different failure.
"""
from __future__ import annotations

import oracle

from fuzz import properties, watchdog


class Focus:
    """The checks of one Hypothesis run: everything until a Mismatch, then
    only the pairs that failed (a fresh Focus per run)."""

    def __init__(self, implementations=("remat2", "remat3")):
        self.implementations = tuple(implementations)
        self.failed: tuple = ()

    def check(self, prog, *, stack=None, spelling=None):
        """oracle_agrees (of prog, written in `spelling`, with its `stack`)
        under the wall-clock limit; its report, or None when nothing of
        what failed before applies to `prog`."""
        only, impls = None, self.implementations
        if self.failed:
            only = tuple(sorted({p for p, _ in self.failed}))
            impls = tuple(i for i in self.implementations if i in {i for _, i in self.failed})
        try:
            with watchdog.time_limit():
                return properties.oracle_agrees(prog, implementations=impls, only=only, stack=stack,
                                                spelling=spelling)
        except oracle.Mismatch as e:
            if not self.failed:
                self.failed = e.failed
            raise
