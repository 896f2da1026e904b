"""A campaign on Ray (`remat-oracle fuzz --ray`, fuzz/cluster.py).

* `test_ray_campaign_finds_and_deduplicates_a_planted_bug`: a local Ray
  with two CPUs, whose worker processes run on a JAX with a bug planted
  (tests/planted_bugs.py, planted by a Ray worker_process_setup_hook that
  reads $PLANTED_BUG: the driver's own JAX stays pristine). The bug, cos's
  JVP sign at negative inputs, is met by the simplest program Hypothesis
  draws (`sin a` under `grad`: its second order derivative goes through
  cos's JVP, at the input -1.14), so each worker meets it in its first
  round and shrinks it to that program: the driver must write one finding
  directory for it, whose report counts the hits of both workers, and
  records the JAX the workers checked against; the failures the workers
  saved reach the driver's example database.
* `test_the_example_database_replays_through_the_driver`: without Ray, the
  database path itself: a worker's saves, sent as messages and applied by
  the driver to DIR/.hypothesis, are what a later worker (another seed,
  another machine) replays first.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

pytest.importorskip("jax")     # only the imports may skip
pytest.importorskip("ray")    # the campaign itself runs in a subprocess

from hypothesis import given, settings  # noqa: E402
from hypothesis import seed as hyp_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402

from fuzz import cli, cluster  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUG = "cos_jvp_sign_at_negative_inputs"
# property/implementation/shape: the shrunk `sin a` (tests: the planted bug
# fails exactly this on the simplest drawn program, nothing else of it)
PLANTED_KEY = "second_order/remat2/sin"


def _finding_dirs(out):
    return {d.name: d for d in out.iterdir() if d.is_dir() and not d.name.startswith(".")}


# The driver, run in a fresh interpreter: a Ray runtime that dies takes its
# driver process with it (Ray's core worker exits the process when it loses
# its GCS), and in the test process that would be pytest-xdist's worker, with
# nothing said (CI, 2026-12-07: "worker 'gw0' crashed"). In a subprocess the
# test sees the exit status, the output and Ray's own logs.
_DRIVER = """
import json, os, sys
import ray
from fuzz import cli
ray.init(num_cpus=2, include_dashboard=False, _temp_dir=os.environ["RAY_TMP"],
         runtime_env=json.loads(os.environ["RAY_RUNTIME_ENV"]))
try:
    rc = cli.main(sys.argv[1:])
finally:
    ray.shutdown()
sys.exit(rc)
"""


def _ray_logs(ray_tmp, limit=6000):
    """The tail of every error log Ray wrote: why a Ray runtime died."""
    tails = []
    for path in sorted(ray_tmp.glob("session_*/logs/*.err")) + sorted(
            ray_tmp.glob("session_*/logs/raylet.out")):
        text = path.read_text(errors="replace").strip()
        if text:
            tails.append(f"--- {path.name}\n{text[-limit:]}")
    return "\n".join(tails)[-4 * limit:]


def _ray_campaign(tmp_path, out):
    """Run `remat-oracle fuzz --ray local` in a fresh interpreter on a local
    Ray whose workers run a JAX with BUG planted: (returncode, output)."""
    # Ray's own folder: short (its socket paths must fit AF_UNIX's 107 bytes)
    ray_tmp = pathlib.Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    runtime_env = {
        "worker_process_setup_hook": "planted_bugs.plant_from_environment",
        "env_vars": {"PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "tests")]),
                     "PLANTED_BUG": BUG, "JAX_PLATFORMS": "cpu"}}
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu", RAY_TMP=str(ray_tmp),
               RAY_RUNTIME_ENV=json.dumps(runtime_env))
    argv = ["fuzz", "--ray", "local", "--minutes", "0.6", "--seed", "0",
            "--jax-impl", "remat2", "--no-corpus", "--out", str(out)]
    try:
        done = subprocess.run([sys.executable, "-c", _DRIVER, *argv], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=600)
        logs = _ray_logs(ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    log = done.stdout + done.stderr
    # cli.main answers 0 (nothing found), 1 (findings) or 2 (usage): anything
    # else is the driver dying, and Ray's logs say why
    assert done.returncode in (0, 1, 2), (
        f"the campaign's driver died (exit status {done.returncode}):\n{log[-6000:]}\n"
        f"Ray's logs:\n{logs}")
    return done.returncode, done.stdout, log


@pytest.mark.slow      # a whole campaign in subprocesses (40 s); `make test-slow`
def test_ray_campaign_finds_and_deduplicates_a_planted_bug(tmp_path):
    out = tmp_path / "findings"
    rc, stdout, log = _ray_campaign(tmp_path, out)
    assert rc == 1, log
    assert re.search(r"\d+ programs in [\d.]+ s", stdout), log          # the summary
    assert f"{PLANTED_KEY} -> " in stdout, log
    planted = hashlib.sha1(PLANTED_KEY.encode()).hexdigest()[:10]
    dirs = _finding_dirs(out)
    assert planted in dirs, log
    report = (dirs[planted] / "report.md").read_text()
    assert "# Finding " + planted + ": second_order differs under remat2" in report
    # found by both workers, written once
    hits = re.search(r"Hit (\d+) time\(s\) in this campaign, by (.*)\.", report)
    assert hits and "job 0 (" in hits.group(2) and "job 1 (" in hits.group(2), report
    # every round of both workers failed first on that program: nothing else
    assert list(dirs) == [planted], log
    # each worker recorded the JAX it checked against
    assert re.search(r"checking against jax=[\d.]+, jaxlib=[\d.]+, backend=cpu", report), report
    assert (dirs[planted] / "repro.py").read_text().strip()
    # the workers' saved failures reached the driver's database
    saved = cluster.snapshot(DirectoryBasedExampleDatabase(str(out / ".hypothesis")))
    assert any(saved.values()), saved


class _Messages:
    """A worker's message queue, read back in order."""

    def __init__(self):
        self.sent = []

    def put(self, message):
        self.sent.append(message)


def _driver(tmp_path):
    args = argparse.Namespace(out=str(tmp_path), fail_fast=False, seed=0)
    return cli._Campaign(args, (), 0.0, 0.0, workers=None,
                         database=DirectoryBasedExampleDatabase(str(tmp_path / ".hypothesis")))


def _run(seed, database, tried):
    """A Hypothesis test keyed as every round of a campaign is (the same
    source: here, one function), failing on x >= 1000."""
    @settings(database=database, print_blob=False, max_examples=200)
    @hyp_seed(seed)
    @given(st.integers())
    def prop(x):
        tried.append(x)
        assert x < 1000
    try:
        prop()
    except AssertionError:
        return True
    return False


def test_the_example_database_replays_through_the_driver(tmp_path):
    driver = _driver(tmp_path)
    first_worker = _Messages()
    tried: list = []
    assert _run(1, cluster.MirroredDatabase({}).open(first_worker, 0), tried)
    shrunk = tried[-1]
    assert shrunk == 1000                                     # Hypothesis shrank it
    changes = [m for m in first_worker.sent if m[0] == "db"]
    assert changes and all(job == 0 for _, job, _ in changes)
    for kind, job, payload in changes:
        driver.handle(kind, job, payload)
    # nothing on disk was written by the worker: the driver wrote DIR/.hypothesis
    entries = cluster.snapshot(DirectoryBasedExampleDatabase(str(tmp_path / ".hypothesis")))
    assert any(entries.values()), entries
    # a later worker, another seed, starts from the driver's copy: the failure first
    tried_again: list = []
    later_worker = _Messages()
    assert _run(2, cluster.MirroredDatabase(entries).open(later_worker, 1), tried_again)
    assert tried_again[0] == shrunk
    # and without the copy, that seed does not start there
    tried_fresh: list = []
    _run(2, cluster.MirroredDatabase({}).open(_Messages(), 2), tried_fresh)
    assert tried_fresh[0] != shrunk


def test_gpus_per_worker_needs_ray(tmp_path, capsys):
    assert cli.main(["fuzz", "--gpus-per-worker", "1", "--out", str(tmp_path)]) == 2
    assert "--gpus-per-worker needs --ray" in capsys.readouterr().err
