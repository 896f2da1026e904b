"""A campaign's workers end with their driver (fuzz/cli.py): stopped by
SIGTERM (`pkill`, a CI timeout) the driver ends them itself
(`_stopped_by_signals`, `_Processes.close`); killed outright (SIGKILL,
a crash) it cannot, and each worker notices it was re-parented
(`_exit_with_driver`). Before, a driver stopped either way left its
workers checking programs on both cores for hours."""
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[1])     # a zombie has ended


def _workers(driver: int) -> list[int]:
    """The driver's multiprocessing workers (not its resource tracker)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if b"spawn_main" in cmdline and _parent(int(pid)) == driver:
            out.append(int(pid))
    return out


def _wait(predicate, seconds: float):
    end = time.time() + seconds
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def _campaign(tmp_path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fuzz.cli", "fuzz", "--minutes", "10", "--jobs", "2",
                             "--no-corpus", "--out", str(tmp_path / "out")], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_the_workers_end_with_their_driver(tmp_path, stop):
    driver, workers = _campaign(tmp_path), []
    try:
        workers = _wait(lambda: len(_workers(driver.pid)) == 2 and _workers(driver.pid), 120)
        assert workers, f"no two workers started: {driver.poll()=}"
        os.kill(driver.pid, stop)
        driver.wait(timeout=30)
        left = _wait(lambda: [w for w in workers if _parent(w) is None] == workers or None, 20)
        assert left, f"workers still running 20 s after the driver got {stop.name}: " \
                     f"{[w for w in workers if _parent(w) is not None]}"
        if stop == signal.SIGTERM:
            assert driver.returncode == 128 + signal.SIGTERM, driver.stderr.read()[-2000:]
    finally:
        for w in workers or _workers(driver.pid):
            if _parent(w) is not None:
                os.kill(w, signal.SIGKILL)
        if driver.poll() is None:
            driver.kill()
