"""Wall-clock limits: a hang is a finding, not a stall.

A drawn program is checked in about a second; one that takes minutes means
that something loops (a fixpoint that never converges, a shrinking rule
that grows, a compile that never ends) in JAX or in the spec. Both the
pytest property and the campaign check each program under `time_limit`,
which raises `ExampleTimeout` in the checking thread when the limit passes:
Hypothesis then treats it as any other failure (reports the program, shrinks
it), and the message says where the check was when time ran out.

`time_limit` uses SIGALRM, so it interrupts Python code (JAX's tracing,
partial evaluation and the spec are Python). A hang inside C++ (an XLA
compile) is caught one level up: the campaign's driver watches each
worker's heartbeat and ends a worker that is silent past the limit
(fuzz/cli.py).
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
import traceback

# a drawn program is checked in ~0.3-3 s on this machine (compile-bound);
# the limit is two orders of magnitude above that, so that a loaded machine
# never trips it while a real hang is reported within a minute
EXAMPLE_SECONDS = 60.0
# once a program has hung, Hypothesis shrinks it: each smaller program that
# still hangs would cost the full limit, so later examples of the process
# get a shorter one (still ~5x a normal check); Hypothesis ends shrinking
# after 300 s in any case (engine.MAX_SHRINKING_SECONDS)
SHRINK_SECONDS = 15.0
_hangs = 0


class ExampleTimeout(Exception):
    """Checking one drawn program took longer than its wall-clock limit."""

    def __init__(self, seconds: float, where: str):
        self.seconds, self.where = seconds, where
        super().__init__(f"a hang: checking this program took longer than {seconds:g} s; "
                         f"it was here when time ran out:\n{where}")


class _Alarm(BaseException):
    """The alarm, on its way out of the checked code: a BaseException, so
    that no `except Exception` on the way (oracle.check records JAX's
    exceptions as outcomes; JAX has handlers of its own) can swallow it.
    time_limit turns it into ExampleTimeout at the boundary."""


def _where(frame, depth: int = 6) -> str:
    """The innermost `depth` frames of the interrupted stack."""
    stack = traceback.extract_stack(frame)[-depth:]
    return "".join(traceback.format_list(stack)).rstrip()


def example_seconds() -> float:
    """The limit for the next example: EXAMPLE_SECONDS, or SHRINK_SECONDS
    once this process has seen a hang."""
    return SHRINK_SECONDS if _hangs else EXAMPLE_SECONDS


@contextlib.contextmanager
def time_limit(seconds: float | None = None):
    """Run the body under a wall-clock limit of `seconds` (default
    example_seconds(); <= 0: no limit; off the main thread, or without
    SIGALRM, also no limit: signals reach only the main thread)."""
    seconds = example_seconds() if seconds is None else seconds
    usable = (seconds is not None and seconds > 0 and hasattr(signal, "SIGALRM")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return
    start = time.monotonic()

    def on_alarm(signum, frame):
        global _hangs
        _hangs += 1
        raise _Alarm(_where(frame))

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Alarm as alarm:
        raise ExampleTimeout(round(time.monotonic() - start, 1), alarm.args[0]) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
