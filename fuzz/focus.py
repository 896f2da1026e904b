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

Shrinking also has a budget (`SHRINK_SECONDS` from the first failure):
past it, a program not seen failing passes unchecked, so Hypothesis' shrink
passes run out at once and it reports the smallest failure found so far
(programs seen failing are still checked, and fail again: Hypothesis'
final replay of the shrunk one is such a program). Under an injected bug
whose programs shrink slowly, `pytest fuzz/` otherwise spent Hypothesis'
whole five minutes shrinking (a 400 s mutation-benchmark timeout).

Once Hypothesis has shrunk a failure, `reduced_failure` reduces the
program further (fuzz/reduce.py), keeping a smaller one only where the same
pair still fails: the campaign does it for each finding, and `pytest fuzz/`
in Hypothesis' final replay of the shrunk example, so that the Mismatch it
reports (and its reproducer) is the reduced program's.
"""
from __future__ import annotations

import time
from typing import Any, NamedTuple

import oracle

from fuzz import properties, watchdog


# seconds of shrinking, from a run's first failure: Hypothesis' own cap is
# 300 s (engine.MAX_SHRINKING_SECONDS); most of what shrinking removes goes
# in its first passes, and fuzz/reduce.py then reduces the shrunk program
SHRINK_SECONDS = 60.0


class Focus:
    """The checks of one Hypothesis run: everything until a Mismatch, then
    only the pairs that failed, for at most `shrink_seconds` (a fresh Focus
    per run)."""

    def __init__(self, implementations=("remat2", "remat3"), *, shrink_seconds: float = SHRINK_SECONDS):
        self.implementations = tuple(implementations)
        self.shrink_seconds = shrink_seconds
        self.failed: tuple = ()
        self.failing: set[str] = set()          # the programs seen failing (_key)
        self.first_failure_at: float | None = None

    def check(self, prog, *, stack=None, spelling=None):
        """oracle_agrees (of prog, written in `spelling`, with its `stack`)
        under the wall-clock limit; its report, or None when nothing of
        what failed before applies to `prog`, or when the shrink budget is
        spent and `prog` was not seen failing."""
        key = _key(prog, stack, spelling)
        if self._shrinking_spent() and key not in self.failing:
            return None
        try:
            return self._check(prog, stack, spelling)
        except oracle.Unsupported:
            raise
        except Exception:
            self.failing.add(key)
            if self.first_failure_at is None:
                self.first_failure_at = time.monotonic()
            raise

    def _shrinking_spent(self) -> bool:
        return (self.first_failure_at is not None
                and time.monotonic() - self.first_failure_at > self.shrink_seconds)

    def _check(self, prog, stack, spelling):
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
            if _final_replay():
                r = reduced_failure(prog, e, stack=stack, spelling=spelling, budget_s=REDUCE_SECONDS)
                if r.program is not prog:
                    raise oracle.Mismatch(f"({r.note})\n{r.mismatch}", r.mismatch.report, r.mismatch.repro,
                                          r.mismatch.failed) from e
            raise


REDUCE_SECONDS = 60      # at most, per failure


def _key(prog, stack, spelling) -> str:
    """What a drawn example is, as text: equal for Hypothesis' replays of it."""
    return f"{prog}\n{spelling}\n{stack}"


def _final_replay() -> bool:
    """Hypothesis is replaying the shrunk example, to report it."""
    try:
        from hypothesis.control import current_build_context
        return bool(current_build_context().is_final)
    except Exception:       # not inside a Hypothesis test
        return False


class Reduction(NamedTuple):
    program: Any             # the smallest program found failing so
    mismatch: oracle.Mismatch    # its Mismatch (with its reproducer)
    note: str                # how much smaller ("" where not)
    stack_kept: bool         # a stack property failed: the program kept its stack


def reduced_failure(prog, err, *, stack=None, spelling=None, budget_s: float = REDUCE_SECONDS) -> Reduction:
    """`prog`, which failed with the Mismatch `err`, reduced (fuzz/reduce.py)
    while every (property, implementation) that failed still fails (one of
    them alone could be another failure, a smaller program sliding into a
    known false alarm: found reducing a finding under an injected bug that
    failed under remat2 and remat3), checked as the
    fuzzer checks (in its spelling; with its stack where a stack property
    failed, whose inputs and outputs then stay). The program is `prog`
    itself where nothing smaller fails so or the budget is spent."""
    from fuzz.reduce import equation_count, reduced
    failed = set(err.failed)
    only = tuple(sorted({p for p, _ in failed}))
    impls = tuple(sorted({i for _, i in failed}))
    on_stack = stack is not None and any(p.startswith("stack") for p in only)
    if not failed or budget_s <= 0:
        return Reduction(prog, err, "", on_stack)
    last = [err]

    def fails(candidate) -> bool:
        try:
            with watchdog.time_limit():
                properties.oracle_agrees(candidate, implementations=impls, only=only,
                                         stack=stack if on_stack else None, spelling=spelling)
        except oracle.Mismatch as e:
            if failed <= set(e.failed):     # each pair still fails: not another failure slid into
                last[0] = e
                return True
        return False

    smaller = reduced(prog, fails, budget_s=budget_s, keep_signature=on_stack)
    if smaller is prog:
        return Reduction(prog, err, "", on_stack)
    note = f"reduced from {equation_count(prog)} to {equation_count(smaller)} equations by fuzz/reduce.py"
    return Reduction(smaller, last[0], note, on_stack)
