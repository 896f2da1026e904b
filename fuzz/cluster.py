"""`remat-oracle fuzz --ray ADDRESS`: the campaign's workers as Ray tasks.

The campaign is fuzz/cli.py's, unchanged: the same worker (`cli._worker`:
rounds of drawn programs, seeded from --seed, the job and the round), the
same driver loop (heartbeats, the watchdog, findings de-duplicated by
property, implementation and shrunk shape, DIR/<id>/ written as they
arrive). This module is only the transport, `RayWorkers`:

* a worker is one Ray task (`max_retries=0`: a worker is never re-run
  behind the driver's back), asking for one CPU, or `--gpus-per-worker`
  GPUs; by default as many workers as the cluster has CPUs (or GPUs /
  gpus-per-worker);
* messages travel on a `ray.util.queue.Queue` (an actor) in place of the
  multiprocessing queue, so the driver hears of every heartbeat and finding
  while the campaign runs;
* the watchdog ends a silent worker with `ray.cancel(force=True)` (its
  process is killed) and starts a fresh task for the next round;
* the Hypothesis example database is the driver's DIR/.hypothesis, and
  only the driver writes it: each worker starts with a copy of it
  (`MirroredDatabase`) and sends every change Hypothesis makes to its copy
  (a failing example saved, a stale one deleted) back to the driver as a
  message. No storage needs to be shared between the nodes, and
  `remat-oracle fuzz --seed S --out DIR` on any machine later replays the
  failures first.

Ray is an optional dependency (`pip install 'remat-oracle[cluster]'`);
every node of the cluster needs the same jax and remat-oracle installed.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sys


class ClusterUnavailable(Exception):
    """--ray could not be used: Ray is not installed, the cluster cannot be
    reached, or it has no resources for a worker. The message says which."""


def snapshot(database) -> dict:
    """Every (key, values) of a DirectoryBasedExampleDatabase. Its keys are
    stored hashed; the database keeps the list of its keys as the values of
    one meta key (hypothesis/database.py, DirectoryBasedExampleDatabase
    ._metakeys_name), which is how they are found here."""
    meta = getattr(database, "_metakeys_name", None)
    if meta is None:            # a Hypothesis without the meta key: workers start empty
        return {}
    return {key: sorted(database.fetch(key)) for key in database.fetch(meta)}


@dataclasses.dataclass(frozen=True)
class MirroredDatabase:
    """A worker's example database: an in-memory copy of the driver's
    entries; each save and delete Hypothesis makes goes to the copy and, as
    a ("db", job, (op, key, value)) message, to the driver, which applies
    it to DIR/.hypothesis (cli._Campaign.handle)."""
    entries: dict

    def open(self, results, job: int):
        from hypothesis.database import InMemoryExampleDatabase
        db = InMemoryExampleDatabase()
        for key, values in self.entries.items():
            for value in values:
                db.save(key, value)

        def forward(event):
            op, (key, value) = event
            if op in ("save", "delete"):
                results.put(("db", job, (op, key, value)))
        db.add_listener(forward)
        return db


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ClusterUnavailable(f"--ray needs Ray ({e}): pip install 'remat-oracle[cluster]'") from None
    return ray


class RayWorkers:
    """The --ray transport (see the module docstring). `address` is what
    ray.init takes ('auto', host:port, ray://host:port), or 'local': a
    Ray started in this process. A Ray this process already joined is
    used as it is (its runtime_env, e.g. env vars for the workers, holds)."""

    def __init__(self, address: str, gpus_per_worker: float = 0.0):
        self.address, self.gpus_per_worker = address, gpus_per_worker
        self.started_ray = False
        self.queue = None
        self.task = None                # cli._worker as a Ray remote function
        self.tasks: dict = {}           # job -> its task's ObjectRef
        self.killed: set = set()        # refs ended by the driver (watchdog, end of campaign)
        self.reaped: set = set()
        self.pending: list = []         # messages made by the driver about failed tasks

    def connect(self, jobs: int | None) -> int:
        """Join (or start) Ray; how many workers: `jobs`, or one per CPU (per
        gpus_per_worker GPUs) of the cluster."""
        ray = _ray()
        if not ray.is_initialized():
            try:
                ray.init(**self._init_options())
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise ClusterUnavailable(f"no Ray cluster at {self.address!r}: {e}") from None
            self.started_ray = True
        from ray.util.queue import Queue
        self.queue = Queue()
        resources = ray.cluster_resources()
        jobs = jobs or self._fitting(resources)
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        print(f"{jobs} workers as Ray tasks on {nodes} node(s) ({resources.get('CPU', 0):g} CPUs, "
              f"{resources.get('GPU', 0):g} GPUs), each with {self.gpus_per_worker:g} GPUs", file=sys.stderr)
        return jobs

    def _fitting(self, resources: dict) -> int:
        """One worker per CPU, or per gpus_per_worker GPUs."""
        if not self.gpus_per_worker:
            return max(1, int(resources.get("CPU", 1)))
        jobs = int(resources.get("GPU", 0) // self.gpus_per_worker)
        if not jobs:
            raise ClusterUnavailable(f"the cluster has {resources.get('GPU', 0):g} GPUs: "
                                     f"none for a worker of {self.gpus_per_worker:g}")
        return jobs

    def _init_options(self) -> dict:
        """ray.init's arguments: a local Ray without its dashboard; a
        cluster's address (Ray Client, ray://, takes nothing else)."""
        if self.address == "local":
            return dict(include_dashboard=False, logging_level=logging.WARNING)
        if self.address.startswith("ray://"):
            return dict(address=self.address)
        return dict(address=self.address, logging_level=logging.WARNING)

    def database(self, driver_database) -> MirroredDatabase:
        return MirroredDatabase(snapshot(driver_database))

    def _options(self) -> dict:
        """One CPU (or the GPUs) per worker; JAX on the CPU for a CPU worker
        (else every worker of a GPU node would take the GPUs' memory), or as
        the driver's JAX_PLATFORMS says; the backend --backend chose."""
        env = {}
        if "JAX_PLATFORMS" in os.environ or not self.gpus_per_worker:
            env["JAX_PLATFORMS"] = os.environ.get("JAX_PLATFORMS", "cpu")
        from oracle.backends import ENV as BACKEND_ENV
        if BACKEND_ENV in os.environ:          # --backend: the workers check on the same backend
            env[BACKEND_ENV] = os.environ[BACKEND_ENV]
        if 0 < self.gpus_per_worker < 1:       # workers share a GPU: none takes 75% of it up front
            env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        return dict(num_cpus=1, num_gpus=self.gpus_per_worker, max_retries=0,
                    runtime_env={"env_vars": env})

    def start(self, **worker_args) -> None:
        """A task running cli._worker(**worker_args) on the cluster."""
        if self.task is None:
            from fuzz.cli import _worker
            self.task = _ray().remote(_worker).options(**self._options())
        self.tasks[worker_args["job"]] = self.task.remote(**worker_args, results=self.queue)

    def receive(self, timeout: float):
        from ray.util.queue import Empty
        self._reap()
        if self.pending:
            return self.pending.pop(0)
        try:
            return tuple(self.queue.get(timeout=timeout))
        except Empty:
            return None

    def _reap(self) -> None:
        """A task that ended by an exception (a node without remat-oracle, a
        worker process that died) is an error of the campaign: never hidden."""
        ray = _ray()
        ended = [ref for ref in self.tasks.values() if ref not in self.reaped]
        ended, _ = ray.wait(ended, num_returns=len(ended), timeout=0) if ended else ([], [])
        for ref in ended:
            self.reaped.add(ref)
            if ref in self.killed:
                continue
            try:
                ray.get(ref)
            except Exception as e:
                job = next(j for j, r in self.tasks.items() if r == ref)
                self.pending.append(("error", job, f"the worker's Ray task failed: {type(e).__name__}: {e}"))

    def alive(self) -> bool:
        ray = _ray()
        refs = list(self.tasks.values())
        _, running = ray.wait(refs, num_returns=len(refs), timeout=0)
        return bool(running)

    def kill(self, job: int) -> None:
        self.killed.add(self.tasks[job])
        _ray().cancel(self.tasks[job], force=True)

    def terminate(self) -> None:
        ray = _ray()
        refs = list(self.tasks.values())
        _, running = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        for ref in running:
            self.killed.add(ref)
            ray.cancel(ref, force=True)

    def join(self, timeout: float) -> None:
        refs = list(self.tasks.values())
        if refs:
            _ray().wait(refs, num_returns=len(refs), timeout=timeout)

    def close(self) -> None:
        """Tasks still running are ended; the queue's actor too; a Ray
        started here is shut down."""
        ray = _ray()
        if not ray.is_initialized():
            return
        self.terminate()
        if self.queue is not None:
            self.queue.shutdown(force=True)
        if self.started_ray:
            ray.shutdown()
