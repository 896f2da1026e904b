"""A hang is a finding, not a stall (fuzz/watchdog.py, fuzz/cli.py).

A bug that makes JAX loop (planted here: remat's partial-eval rule never
returns) must end the check of that program within its wall-clock limit,
through any `except Exception` on the way (oracle.check records JAX's
exceptions as outcomes), and a campaign must report it as a finding with a
runnable reproducer, and still stop on time (--minutes within 10%)."""
from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

jax = pytest.importorskip("jax")   # only the import may skip

import numpy as np  # noqa: E402

import oracle  # noqa: E402
from fuzz import watchdog  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# plants the hang in whatever imports it (the campaign's spawned workers too)
PLANT = textwrap.dedent("""
    import time
    import jax._src.ad_checkpoint as adc

    def remat_partial_eval_that_never_returns(*args, **kwargs):
        while True:
            time.sleep(0.01)

    adc.pe.custom_partial_eval_rules[adc.remat_p] = remat_partial_eval_that_never_returns
""")


def test_time_limit_interrupts_through_except_exception():
    t0 = time.monotonic()
    with pytest.raises(watchdog.ExampleTimeout) as info:
        with watchdog.time_limit(0.5):
            while True:
                try:
                    time.sleep(0.01)
                except Exception:        # the checked code's own handlers must not swallow it
                    pass
    assert 0.4 < time.monotonic() - t0 < 5
    assert "test_time_limit_interrupts_through_except_exception" in info.value.where
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)   # no alarm left armed


def test_time_limit_lets_a_quick_body_finish():
    previous = signal.getsignal(signal.SIGALRM)
    with watchdog.time_limit(5.0):
        x = sum(range(1000))
    assert x == 499500
    assert signal.getsignal(signal.SIGALRM) is previous
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_hang_inside_jax_ends_oracle_check(monkeypatch):
    import jax._src.ad_checkpoint as adc
    namespace: dict = {}
    exec(PLANT.replace("adc.pe.custom_partial_eval_rules[adc.remat_p] = "
                       "remat_partial_eval_that_never_returns", ""), namespace)
    monkeypatch.setitem(adc.pe.custom_partial_eval_rules, adc.remat_p,
                        namespace["remat_partial_eval_that_never_returns"])
    f = lambda x: jax.checkpoint(lambda x: jax.numpy.sin(x) * x)(x)
    with pytest.raises(watchdog.ExampleTimeout) as info:
        with watchdog.time_limit(2.0):
            oracle.check(f, oracle.AS_IS, np.ones(3, np.float32), implementations=("remat2",))
    assert "remat_partial_eval_that_never_returns" in info.value.where


def _campaign(tmp_path, minutes: float):
    driver = tmp_path / "campaign_with_a_hang.py"
    driver.write_text(PLANT + textwrap.dedent("""
        import sys
        from fuzz import watchdog
        watchdog.EXAMPLE_SECONDS = watchdog.SHRINK_SECONDS = 4.0
        if __name__ == "__main__":
            from fuzz.cli import main
            sys.exit(main(sys.argv[1:]))
    """))
    out = tmp_path / "findings"
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(driver), "fuzz", "--minutes", str(minutes), "--jobs", "1",
                           "--jax-impl", "remat2", "--no-corpus", "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    return proc, out, time.time() - t0


@pytest.mark.slow      # a whole campaign in subprocesses (40 s); `make test-slow`
def test_a_campaign_reports_a_hang_and_stops_on_time(tmp_path):
    minutes = 0.5
    proc, out, wall = _campaign(tmp_path, minutes)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    elapsed = float(re.search(r"programs in ([\d.]+) s", proc.stdout).group(1))
    assert elapsed <= 1.1 * 60 * minutes, proc.stdout
    dirs = [d for d in out.iterdir() if d.is_dir() and not d.name.startswith(".")]
    assert dirs, proc.stderr
    report = (dirs[0] / "report.md").read_text()
    assert "a hang while checking" in report and "remat_partial_eval_that_never_returns" in report
    repro = (dirs[0] / "repro.py").read_text()
    ast.parse(repro)                                # valid Python
    # under the planted hang the reproducer exits non-zero on its own watchdog
    planted = tmp_path / "run_with_hang.py"
    planted.write_text(PLANT + f"\nimport runpy\nrunpy.run_path({str(dirs[0] / 'repro.py')!r}, run_name='__main__')\n")
    rc = subprocess.run([sys.executable, str(planted)], capture_output=True, text=True,
                        env=dict(os.environ, JAX_PLATFORMS="cpu"), timeout=300)
    assert rc.returncode != 0 and "no hang" not in rc.stdout, rc.stdout + rc.stderr
    assert "remat_partial_eval_that_never_returns" in rc.stderr


# plants a hang inside native code, where SIGALRM cannot end it: remat's
# partial-eval rule locks a pthread mutex it already holds (ctypes releases
# the GIL, so the worker's other threads run; the main thread never returns)
PLANT_NATIVE = textwrap.dedent("""
    import ctypes
    import jax._src.ad_checkpoint as adc

    def remat_partial_eval_stuck_in_native_code(*args, **kwargs):
        libc = ctypes.CDLL(None)
        mutex = ctypes.create_string_buffer(64)
        libc.pthread_mutex_init(mutex, None)
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)

    adc.pe.custom_partial_eval_rules[adc.remat_p] = remat_partial_eval_stuck_in_native_code
""")


@pytest.mark.slow      # a whole campaign in subprocesses (40 s); `make test-slow`
def test_a_hang_in_native_code_gets_a_reproducer(tmp_path, monkeypatch):
    """A worker stuck inside native code (no Python stack for SIGALRM to
    interrupt) is ended by the driver, and its finding still has a
    reproducer: the worker's hang-reproducer thread wrote it while the main
    thread waited (fuzz/cli.py, `_report_native_hangs`)."""
    driver = tmp_path / "campaign_with_a_native_hang.py"
    driver.write_text(PLANT_NATIVE + textwrap.dedent("""
        import sys
        from fuzz import cli, watchdog
        watchdog.EXAMPLE_SECONDS = watchdog.SHRINK_SECONDS = 3.0
        cli.SILENT_SECONDS = 10.0
        if __name__ == "__main__":
            sys.exit(cli.main(sys.argv[1:]))
    """))
    out = tmp_path / "findings"
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, str(driver), "fuzz", "--minutes", "0.6", "--jobs", "1", "--fail-fast",
                           "--jax-impl", "remat2", "--no-corpus", "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    dirs = [d for d in out.iterdir() if d.is_dir() and not d.name.startswith(".")]
    assert dirs, proc.stdout + proc.stderr
    report = (dirs[0] / "report.md").read_text()
    assert "a hang while checking" in report and "inside native code" in report, report
    repro = (dirs[0] / "repro.py").read_text()
    ast.parse(repro)
    assert "faulthandler.dump_traceback_later" in repro



def test_the_driver_writes_the_reproducer_of_a_worker_that_never_could():
    """A worker stuck in native code that holds the GIL never runs its
    hang-reproducer thread; the driver then writes the reproducer itself,
    from the program the worker sent, pickled, when it started checking it
    (fuzz/cli.py `_pickled`, `_Campaign._hang_repro_of`). The reproducer
    is valid Python with its own watchdog; None (a program that does not
    pickle) gives none."""
    from fuzz import cli
    import spec
    from spec import ops
    prog = spec.trace(lambda x: spec.remat.checkpoint(lambda y: ops.sin(y))(ops.mul(x, 2.0)), spec.f32[3])
    campaign = cli._Campaign.__new__(cli._Campaign)
    campaign.impls = ("remat2",)
    repro = campaign._hang_repro_of(cli._pickled(prog), 90)
    ast.parse(repro)
    assert "faulthandler.dump_traceback_later" in repro
    assert campaign._hang_repro_of(None, 90) == ""


class _Workers:
    """A transport whose workers the driver can only end."""

    def __init__(self):
        self.killed = []

    def kill(self, job):
        self.killed.append(job)


def test_a_worker_silent_while_shrinking_a_failure_reports_the_failure(tmp_path, monkeypatch):
    """A worker silent in native code while it shrinks (or reduces) a
    failure was on a program shrinking made, which can loop forever where
    the failure did not (campaign finding 9164e12ae9: a "hang" that was a
    reduced while loop whose carry update was gone). The driver writes the
    failure it was shrinking, saying where it hung, and no hang finding."""
    import argparse
    from fuzz import cli, watchdog
    args = argparse.Namespace(out=str(tmp_path), fail_fast=True, seed=3)
    campaign = cli._Campaign(args, ("remat2",), 0.0, 0.0, workers=_Workers())
    failure = dict(key="residuals/remat2/while,debug_print", property="residuals", implementation="remat2",
                   program="{ the failing program }", message="saved residuals differ", repro="",
                   seed=3, round=128)
    campaign.handle("failure", 0, failure)
    campaign.handle("start", 0, ("{ a smaller program }", 128, None, "# stack: grad o grad"))
    since, *rest = campaign.busy[0]
    campaign.busy[0] = (since - watchdog.EXAMPLE_SECONDS - cli.SILENT_SECONDS - 1, *rest)
    assert campaign.watch() is True            # fail-fast: the failure ends the campaign
    assert campaign.workers.killed == [0] and not campaign.unshrunk
    assert list(campaign.findings) == [failure["key"]]
    report = open(os.path.join(campaign.findings[failure["key"]], "report.md")).read()
    assert "saved residuals differ" in report and "{ a smaller program }\n# stack: grad o grad" in report, report
    assert "a hang while checking" not in report


def test_a_worker_silent_on_a_program_of_its_own_is_a_hang_finding(tmp_path):
    import argparse
    from fuzz import cli, watchdog
    args = argparse.Namespace(out=str(tmp_path), fail_fast=True, seed=3)
    campaign = cli._Campaign(args, ("remat2",), 0.0, 0.0, workers=_Workers())
    campaign.handle("start", 0, ("{ a drawn program }", 7, None, "# stack: linearize"))
    since, *rest = campaign.busy[0]
    campaign.busy[0] = (since - watchdog.EXAMPLE_SECONDS - cli.SILENT_SECONDS - 1, *rest)
    assert campaign.watch() is True
    [key] = campaign.findings
    assert key.startswith("hang/")
    report = open(os.path.join(campaign.findings[key], "report.md")).read()
    assert "a hang while checking" in report and "{ a drawn program }\n# stack: linearize" in report, report


def test_a_hang_reproducer_goes_on_past_a_stage_that_raises(tmp_path):
    """A stage that raises did not hang (a while loop refuses reverse mode):
    the reproducer says so and runs the next stages, to its end, on any
    release (no jax_remat3 line where the flag does not exist)."""
    from oracle.repro import write_hang_repro
    import spec
    from spec import ops
    prog = spec.trace(lambda x: spec.while_loop(lambda v: ops.reduce_sum(v, (0,)) < 4.5,
                                                lambda v: v + 1.0, x), spec.f32[3])
    path = tmp_path / "repro.py"
    path.write_text(write_hang_repro(prog, [np.zeros(3, np.float32)], ("remat2",), 60, "a hang").text)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "remat2 vjp raised ValueError" in run.stdout and "no hang: every stage finished" in run.stdout
