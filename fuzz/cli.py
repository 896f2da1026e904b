"""`remat-oracle fuzz`: a fuzz campaign of spec programs against JAX.

    remat-oracle fuzz [--minutes M] [--examples N] [--seed S] [--jobs J]
                      [--jax-impl remat2,remat3] [--out DIR] [--fail-fast] [--no-corpus] [--novelty]
                      [--backend NAME] [--ray ADDRESS|auto|local [--gpus-per-worker G]]
                      [--repro-seconds S]

Each job is a worker (a local process, or with --ray a Ray task on a
cluster: fuzz/cluster.py). Half of them first check the JAX-derived
corpus (fuzz/corpus.py: JAX's own remat tests, restated; --no-corpus
skips it); then each runs Hypothesis on `fuzz.stacks.checked_programs()`
(a program, its spelling and a transformation stack, as `pytest fuzz/`;
with --novelty only the drawn programs that bring something new,
fuzz/novelty.py) with the differential property (oracle.check: values, JVP, VJP, vmap,
second order, residual sets, vjp leaves, prevent_cse). A failing program is
shrunk by Hypothesis, and every distinct finding (property +
implementation + the shrunk program's shape) gets DIR/<id>/ with
repro.py (standalone jax + numpy), program.txt (spec IR) and report.md;
at the end each repro.py is run in a fresh interpreter and its report says
whether it fails there (`_reproducers_checked`).
Exit status: 1 if a discrepancy that is not a known divergence was found,
0 otherwise. Every run replays from its seed.

The driver is one loop whatever starts the workers: a transport (`_Processes`
here, `fuzz.cluster.RayWorkers`) starts and ends them and carries their
messages (job, kind, payload) to the driver, which de-duplicates the
findings and writes them, and owns the Hypothesis example database.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import hashlib
import multiprocessing as mp
import os
import re
import queue as queue_mod
import socket
import sys
import time


def _shape_key(prog) -> str:
    """The shrunk program's shape: its primitives, nested, in order."""
    from spec.ir import subprograms

    def walk(p):
        out = []
        for e in p.eqns:
            subs = subprograms(e.params)
            out.append(e.primitive.name + ("{" + ",".join(walk(subs[0][1])) + "}" if subs else ""))
        return out
    return ",".join(walk(prog))


def _worker(job: int, seed: int, deadline: float, max_examples: int, impls: tuple, database,
            fail_fast: bool, results, control_flow: bool = True, first_round: int = 0,
            corpus: tuple = (), novelty: bool = False, finish_by: float | None = None,
            reduce_seconds: float | None = None, driver_pid: int | None = None):
    """One campaign worker: first its share `corpus` of the corpus cases
    (`_corpus_phase`), then rounds of ROUND_DRAWS drawn programs, checking
    every one, or with `novelty` those fuzz/novelty.py selects (each round its own
    Hypothesis seed, so that every finding replays from `seed`, its job and
    its round) until `deadline` or `max_examples`; a finding is shrunk and
    reduced until `finish_by` at the latest (the driver's grace; each
    reduction `reduce_seconds` at most, `reduction_budget`). It tells the driver
    (`results.put`) the JAX it checks against, when it starts checking a
    program (the heartbeat), what each check found, the first failure of a
    round at once (unshrunk) and the shrunk finding. `database` opens the
    Hypothesis example database (`_DirectoryDatabase`, or the driver's copy
    `fuzz.cluster.MirroredDatabase`). A worker on this machine
    (`driver_pid`) ends when its driver does (`_exit_with_driver`)."""
    if driver_pid is not None:
        _exit_with_driver(driver_pid)
    import warnings
    warnings.filterwarnings("ignore")
    from oracle import jax_api

    results.put(("hello", job, dict(host=socket.gethostname(), **jax_api.environment())))
    _report_native_hangs(job, results, impls)
    db = database.open(results, job)
    from fuzz.novelty import Novelty
    checked, found = _corpus_phase(job, corpus, deadline, max_examples, results, fail_fast)
    round_, novelty = first_round, Novelty() if novelty else None
    while time.time() < deadline and checked < max_examples and not (found and fail_fast):
        round_ += 1
        failures: list = []
        test = _round(job, seed, round_, max_examples - checked, deadline, impls, db,
                      results, control_flow, failures, novelty, finish_by, reduce_seconds)
        try:
            checked += test()
        except Exception as e:   # a Mismatch, a hang or an error of ours (or JAX's): never hidden
            if not failures:
                results.put(("error", job, f"{type(e).__name__}: {e}"))
                break
            prog, err, how = _reduced_finding(*failures[-1], finish_by or deadline, reduce_seconds)
            results.put(("finding", job, _finding(prog, err, seed, round_, impls, how)))
            if fail_fast:
                break
    results.put(("done", job, checked))


def _exit_with_driver(driver_pid: int, poll_s: float = 1.0) -> None:
    """Start the worker's thread that ends the worker once its driver is
    gone (killed, SIGKILL included, or crashed): the worker is then
    re-parented, so its parent's pid changes. Without it a driver stopped
    by a signal left its workers checking programs on every core for
    hours. `os._exit`: nobody is left to report to, and the main thread
    may be inside native code (an XLA compile)."""
    import threading

    def watch():
        while os.getppid() == driver_pid:
            time.sleep(poll_s)
        os._exit(3)
    threading.Thread(target=watch, name="driver-watch", daemon=True).start()


# the program a worker is checking: {program, since, reported} (`_report_native_hangs`)
_CHECKING: dict = {}


@contextlib.contextmanager
def _checking(prog):
    """The worker checks `prog` for the duration (`_CHECKING`)."""
    _CHECKING.update(program=prog, since=time.time(), reported=False)
    try:
        yield
    finally:
        _CHECKING.clear()


def _report_native_hangs(job: int, results, impls: tuple) -> None:
    """Start the worker's thread that writes a hang's reproducer: when the
    program being checked has run a few seconds past the per-example limit
    (SIGALRM did not end it: it is inside native code, an XLA compile), the
    thread, which runs while the main thread waits in C++, sends the
    driver the program's hang reproducer (`oracle.repro.write_hang_repro`),
    which the driver writes if it then ends the silent worker. A hang
    caught in Python ends before that and is shrunk as any failure."""
    import threading
    from fuzz import watchdog

    def watch():
        while True:
            time.sleep(1.0)
            checking = dict(_CHECKING)
            if (not checking or checking["reported"]
                    or time.time() - checking["since"] < watchdog.example_seconds() + 5):
                continue
            _CHECKING["reported"] = True
            prog, seconds = checking["program"], round(time.time() - checking["since"])
            message = (f"a hang: checking this program took longer than {seconds} s, inside native code "
                       "(no Python stack)")
            results.put(("hang_repro", job, (str(prog), _hang_repro(prog, watchdog.ExampleTimeout(
                seconds, "native code"), impls))))
            print(message, file=sys.stderr)
    threading.Thread(target=watch, name="hang-reproducer", daemon=True).start()


def _corpus_phase(job: int, names: tuple, deadline: float, max_examples: int, results,
                  fail_fast: bool) -> tuple[int, bool]:
    """Check the corpus cases `names` (fuzz/corpus.py), as the campaign's
    first programs: (how many were checked, whether one was a finding).
    A case's finding is reported as it is (a case does not shrink)."""
    from fuzz import corpus
    checked, found = 0, False
    for name in names:
        if time.time() >= deadline or checked >= max_examples or (found and fail_fast):
            break
        case = corpus.by_name(name)
        results.put(("start", job, (f"corpus case {name}", 0, None, "")))
        try:
            report = corpus.seed_outcome(case)
        except Exception as e:          # a Mismatch, a hang or an error: a finding
            results.put(("finding", job, _corpus_finding(case, e)))
            found = True
            continue
        if report is None:               # refused, or raised as the case expects
            results.put(("idle", job, None))
            continue
        checked += 1
        results.put(("checked", job, _statuses(report)))
    return checked, found


def _corpus_finding(case, err) -> dict:
    """What the driver writes for a corpus case that failed: the Mismatch's
    reproducer, or a script that checks the case again."""
    import oracle
    from fuzz import corpus, watchdog
    program = f"corpus case {case.name} (fuzz/corpus.py), after jax-ml/jax {case.source}"
    if isinstance(err, oracle.Mismatch):
        prop_name, impl = err.failed[0] if err.failed else _property_of(err)
        repro = err.repro.text if err.repro else corpus.replay_script(case)
        return dict(key=f"{prop_name}/{impl}/corpus:{case.name}", property=prop_name, implementation=impl,
                    program=program, message=str(err).split("\nreproducer:\n")[0], repro=repro,
                    seed=0, round=0)
    kind = ("hang", "-") if isinstance(err, watchdog.ExampleTimeout) else ("error", type(err).__name__)
    return dict(key=f"{kind[0]}/{kind[1]}/corpus:{case.name}", property=kind[0], implementation="-",
                program=program, message=f"{type(err).__name__}: {err}", repro=corpus.replay_script(case),
                seed=0, round=0)


@dataclasses.dataclass(frozen=True)
class _DirectoryDatabase:
    """The example database of workers on the driver's machine: its
    directory itself (DIR/.hypothesis), which every worker reads and writes."""
    path: str

    def open(self, results, job):
        from hypothesis.database import DirectoryBasedExampleDatabase
        return DirectoryBasedExampleDatabase(self.path)


# programs drawn per round (with --novelty, fuzz/novelty.py selects about one in five to check)
ROUND_DRAWS = 20
NOVELTY_ROUND_DRAWS = 100


def _round(job, seed, round_, at_most, deadline, impls, db, results, control_flow, failures, novelty,
           finish_by=None, reduce_seconds=None):
    """The Hypothesis test of one round; calling it returns how many
    programs it checked. It draws ROUND_DRAWS programs and checks each, or
    NOVELTY_ROUND_DRAWS and checks those `novelty` (fuzz/novelty.py, the
    worker's; None: every one) wants; `at_most` of them, and every shrink
    step.
    `failures` keeps the last failing (program, error) for the caller (the
    shrunk one when Hypothesis re-raises). The driver hears of the first
    failure at once, and again once it is reduced (fuzz/reduce.py, by
    `finish_by` at the latest): what it writes if time runs out while
    Hypothesis shrinks (a late finding of 38 equations was written so)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hyp_seed

    import oracle
    from fuzz.focus import Focus
    from fuzz.stacks import checked_programs
    checked, focus = 0, Focus(impls)
    # the failures saved in the example database (DIR/.hypothesis) are
    # replayed once per campaign, first, by job 0; every round saves its own.
    # (Every round's test has one database key: Hypothesis keys it on the
    # test's source, hypothesis/internal/reflection.py function_digest.)
    replay = [Phase.reuse] if job == 0 and round_ == 1 else []

    # `settings` above `seed`: @seed sets database=None for the test
    # (hypothesis/core.py, seed.accept); settings applied after it keep ours
    @settings(max_examples=ROUND_DRAWS if novelty is None else NOVELTY_ROUND_DRAWS, deadline=None, database=db, print_blob=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=replay + [Phase.generate, Phase.shrink])
    @hyp_seed(seed * 100003 + job * 1009 + round_)
    @given(checked_programs(control_flow=control_flow))
    def prop(checked_program):
        nonlocal checked
        prog, spelling, stack = checked_program
        if time.time() > deadline and not failures:
            return                # out of time: let Hypothesis finish the round quickly
        if not failures and (checked >= at_most
                             or (novelty is not None and not novelty.wanted(prog, spelling, stack))):
            return                # nothing new in it (or enough checked): draw the next one
        results.put(("start", job, (str(prog), round_, _pickled(prog), f"# spelling: {spelling}\n# stack: {stack}")))
        try:
            with _checking(prog):
                report = focus.check(prog, stack=stack, spelling=spelling)
        except oracle.Unsupported:
            results.put(("idle", job, None))
            return
        except Exception as e:      # shrink it; the driver hears of the first failure at once
            how = f"# spelling: {spelling}\n# stack: {stack}"
            first = not failures
            failures[:] = [(prog, e, how, stack, spelling)]
            if first:
                results.put(("failure", job, _finding(prog, e, seed, round_, impls, how)))
                smaller, err, note = _reduced_finding(prog, e, how, stack, spelling, finish_by or deadline,
                                                      reduce_seconds)
                if smaller is not prog:
                    results.put(("failure", job, _finding(smaller, err, seed, round_, impls, note)))
            raise
        if failures or report is None:      # a shrink step: not a new program checked
            results.put(("idle", job, None))
            return
        checked += 1
        results.put(("checked", job, _statuses(report)))

    def run() -> int:
        prop()
        return checked
    return run


def _reduced_finding(prog, err, how: str, stack, spelling, deadline: float, budget_s: float | None = None):
    """The shrunk finding's program reduced further (fuzz/focus.py
    `reduced_failure`), within `budget_s` (default REDUCE_SECONDS) and never
    past the campaign's deadline: (program, error, how)."""
    import oracle
    from fuzz.focus import REDUCE_SECONDS, reduced_failure
    if not isinstance(err, oracle.Mismatch):
        return prog, err, how
    r = reduced_failure(prog, err, stack=stack, spelling=spelling,
                        budget_s=min(budget_s or REDUCE_SECONDS, deadline - time.time()))
    if r.program is prog:
        return prog, err, how
    if not r.stack_kept:      # checked without it
        how = "\n".join(line for line in how.splitlines() if not line.startswith("# stack:"))
    return r.program, r.mismatch, f"{how}\n# {r.note}"


def _finding(prog, err, seed: int, round_: int, impls=("remat2", "remat3"), how: str = "") -> dict:
    """What the driver writes for a failing program: a Mismatch with its
    reproducer, a hang with a reproducer that times every stage, or an
    error of ours (or JAX's) with its message."""
    import oracle
    from fuzz import watchdog
    shape = _shape_key(prog)
    program = f"{prog}\n{how}" if how else str(prog)
    if isinstance(err, oracle.Mismatch):
        prop_name, impl = err.failed[0] if err.failed else _property_of(err)
        return dict(key=f"{prop_name}/{impl}/{shape}", property=prop_name, implementation=impl,
                    program=program, message=str(err).split("\nreproducer:\n")[0],
                    repro=err.repro.text if err.repro else "", seed=seed, round=round_)
    if isinstance(err, watchdog.ExampleTimeout):
        return dict(key=f"hang/-/{shape}", property="hang", implementation="-", program=program,
                    message=str(err), repro=_hang_repro(prog, err, impls), seed=seed, round=round_)
    return dict(key=f"error/{type(err).__name__}/{shape}", property="error", implementation="-",
                program=program, message=f"{type(err).__name__}: {err}", repro="", seed=seed,
                round=round_)


def _pickled(prog) -> bytes | None:
    """`prog` pickled for the driver, which writes its hang reproducer itself
    where the worker's hang-reproducer thread never runs (native code that
    holds the GIL); None where it does not pickle."""
    import pickle
    try:
        return pickle.dumps(prog)
    except Exception:       # noqa: BLE001 -- a param that does not pickle: program.txt still has it
        return None


def _hang_repro(prog, err, impls) -> str:
    from fuzz.strategies import inputs
    from oracle.repro import write_hang_repro
    try:
        return write_hang_repro(prog, inputs(prog, 0), impls, err.seconds, str(err)).text
    except Exception:     # a program the reproducer writer refuses: program.txt still has it
        return ""


def _property_of(e):
    import re
    m = re.search(r": (\w+) differs under (\w+)", str(e))
    return (m.group(1), m.group(2)) if m else ("unknown", "unknown")


def _write_finding(out_dir: str, f: dict, note: str = "") -> str:
    fid = hashlib.sha1(f["key"].encode()).hexdigest()[:10]
    d = os.path.join(out_dir, fid)
    os.makedirs(d, exist_ok=True)
    if f["repro"]:
        with open(os.path.join(d, "repro.py"), "w") as fh:
            fh.write(f["repro"])
    with open(os.path.join(d, "program.txt"), "w") as fh:
        fh.write(f["program"] + "\n")
    title = _title(f)
    rerun = ("Run `python repro.py` (needs only jax and numpy) to see it fail.\n" if f["repro"] else
             "An exception, not a disagreement: replay the program with "
             "`fuzz.properties.oracle_agrees` to see it.\n")
    with open(os.path.join(d, "report.md"), "w") as fh:
        fh.write(f"# Finding {fid}: {title}\n\n"
                 f"Found by `remat-oracle fuzz --seed {f['seed']}` ({_where_found(f)}); "
                 f"program shape `{f['key'].split('/', 2)[2]}`.\n\n"
                 f"```\n{f['message']}\n```\n\n## Program (spec IR)\n\n```\n{f['program']}\n```\n\n"
                 + rerun + (f"\n{note}\n" if note else ""))
    return d


def _where_found(f: dict) -> str:
    """Job and round (the job's seed stream: `--jobs` above the job draws
    it again), and the machine and JAX the worker checked against."""
    where = f"job {f['job']}, round {f['round']}" if "job" in f else f"round {f['round']}"
    env = dict(f.get("environment") or {})
    host = env.pop("host", None)
    return (where + (f", on {host}" if host else "")
            + (", checking against " + ", ".join(f"{k}={v}" for k, v in env.items()) if env else ""))


def reduction_budget(minutes: float) -> float:
    """How long a finding's reduction may take: REDUCE_SECONDS (fuzz/focus.py),
    or in a long campaign 3% of it, up to 4 minutes (a nightly's reduction
    under a transformation stack ran out of 60 s at 10 to 12 equations, the
    acceptance's bound being 8)."""
    from fuzz.focus import REDUCE_SECONDS
    return min(max(REDUCE_SECONDS, 0.03 * 60 * minutes), 240.0)


# the share of --minutes a finding still shrinking (and being reduced) is given
# past the deadline
GRACE_SHARE = 0.08

# the driver ends a worker whose current program has run this long past the
# per-example limit: a hang inside C++ (XLA), where SIGALRM cannot reach
SILENT_SECONDS = 30.0


class _Processes:
    """The --jobs transport: each worker a process on this machine (spawned:
    a fresh interpreter, JAX initialised in it alone), messages on a
    multiprocessing queue, the example database DIR/.hypothesis read and
    written by every worker as a directory."""

    def __init__(self):
        self.context = mp.get_context("spawn")
        self.queue = self.context.Queue()
        self.procs: dict = {}

    def connect(self, jobs: int | None) -> int:
        return jobs or max(1, min(2, os.cpu_count() or 1))

    def database(self, driver_database):
        return _DirectoryDatabase(str(driver_database.path))

    def start(self, **worker_args) -> None:
        p = self.context.Process(target=_worker, daemon=True,
                                 kwargs=dict(worker_args, results=self.queue, driver_pid=os.getpid()))
        p.start()
        self.procs[worker_args["job"]] = p

    def receive(self, timeout: float):
        try:
            return self.queue.get(timeout=timeout)
        except queue_mod.Empty:
            return None

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.procs.values())

    def kill(self, job: int) -> None:
        self.procs[job].kill()

    def terminate(self) -> None:
        for p in self.procs.values():
            p.terminate()

    def join(self, timeout: float) -> None:
        for p in self.procs.values():
            p.join(timeout=timeout)

    def close(self) -> None:
        """Kill the workers still running: the driver is stopping early (an
        error, Ctrl-C, SIGTERM: `_stopped_by_signals`); after a whole campaign
        they are joined already. The Ray transport (fuzz/cluster.py) shuts
        its queue and tasks down here."""
        for p in self.procs.values():
            if p.is_alive():
                p.kill()
                p.join(timeout=5)


@dataclasses.dataclass
class _Campaign:
    """The driver's state: the workers, what they report, the findings."""
    args: argparse.Namespace
    impls: tuple
    start: float
    deadline: float                       # --minutes after start: the driver stops here
    workers: object                       # the transport: _Processes, fuzz.cluster.RayWorkers
    jobs: int = 0                         # how many workers
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    programs: int = 0
    findings: dict = dataclasses.field(default_factory=dict)       # key -> directory
    hits: dict = dataclasses.field(default_factory=dict)           # key -> [(job, round)]
    unshrunk: dict = dataclasses.field(default_factory=dict)       # job -> first failure of its round
    busy: dict = dataclasses.field(default_factory=dict)           # job -> (since, program, round, pickled, how)
    hang_repros: dict = dataclasses.field(default_factory=dict)    # job -> (program, its hang reproducer)
    environments: dict = dataclasses.field(default_factory=dict)   # job -> its host and JAX
    errors: list = dataclasses.field(default_factory=list)
    database: object = None                                        # the driver's example database
    done: int = 0

    def spawn(self, job: int, first_round: int = 0, corpus: bool = True):
        """Start worker `job`. The first half of the workers (at least one)
        share the corpus cases (with `corpus`: none after a hang, a fresh
        worker goes on with drawn programs) and then draw programs; the
        others draw programs from the start, so that both kinds of check
        begin at once."""
        a = self.args
        per_job = -(-a.examples // self.jobs)
        share, corpus_jobs = (), max(1, self.jobs // 2)
        if corpus and not a.no_corpus and job < corpus_jobs:
            from fuzz.corpus import seeds
            share = tuple(c.name for c in seeds()[job::corpus_jobs])
        # workers stop drawing 2 s early, so that the last checks end by the deadline
        self.workers.start(job=job, seed=a.seed, deadline=self.deadline - 2.0, finish_by=self.finish_by - 2.0,
                           max_examples=per_job,
                           impls=self.impls, database=self.workers.database(self.database),
                           fail_fast=a.fail_fast, control_flow=not a.no_control_flow,
                           first_round=first_round, corpus=share, novelty=a.novelty,
                           reduce_seconds=reduction_budget(a.minutes))

    @property
    def finish_by(self) -> float:
        """The deadline and a grace for findings still shrinking: 8% of
        --minutes (the campaign ends within 10% of it)."""
        return self.deadline + GRACE_SHARE * (self.deadline - self.start)

    def running(self) -> bool:
        """Time is not up: before the deadline, or within the grace while a
        finding is still being shrunk and reduced."""
        now = time.time()
        return now < self.deadline or (bool(self.unshrunk) and now < self.finish_by)

    def record(self, job: int, payload: dict, note: str = "") -> None:
        """Write a finding the first time its key is seen; count every hit."""
        payload = dict(payload, job=job, environment=self.environments.get(job))
        self.hits.setdefault(payload["key"], []).append((job, payload["round"]))
        if payload["key"] not in self.findings:
            self.findings[payload["key"]] = _write_finding(self.args.out, payload, note)
            print(f"\nfinding: {_title(payload)} -> {self.findings[payload['key']]}", file=sys.stderr)

    def handle(self, kind: str, job: int, payload) -> bool:
        """Take one message; True when the campaign should stop (fail-fast)."""
        if kind == "start":
            self.busy[job] = (time.time(), *payload)
        elif kind == "hang_repro":       # the reproducer of the program the worker is stuck in
            self.hang_repros[job] = payload
        elif kind in ("checked", "idle"):
            self.busy.pop(job, None)
            if kind == "checked":
                self.programs += 1
                self.counts.update(payload)
        elif kind == "hello":
            self.greet(job, payload)
        elif kind == "db":               # a worker's change to its copy of the example database
            op, key, value = payload
            getattr(self.database, op)(key, value)
        elif kind == "failure":
            self.unshrunk[job] = payload
        elif kind == "finding":
            self.unshrunk.pop(job, None)
            self.record(job, payload)
            return self.args.fail_fast
        elif kind == "error":
            self.errors.append(payload)
            print(f"\nerror in job {job}: {payload}", file=sys.stderr)
        elif kind == "done":
            self.busy.pop(job, None)
            self.done += 1
        return False

    def greet(self, job: int, environment: dict) -> None:
        """Keep the worker's host and JAX (each finding names them); say so
        when a worker checks against another JAX than the driver's."""
        from oracle import jax_api
        self.environments[job] = environment
        theirs = {k: v for k, v in environment.items() if k != "host"}
        if theirs != jax_api.environment():
            print(f"\njob {job} on {environment.get('host')} checks against another JAX: "
                  + ", ".join(f"{k}={v}" for k, v in theirs.items()), file=sys.stderr)

    def watch(self) -> bool:
        """End a worker silent past the per-example limit (a hang in C++):
        its program is a hang finding; a fresh worker goes on with the next
        round. True when the campaign should stop (fail-fast)."""
        from fuzz import watchdog
        for job, (since, program, round_, pickled, how) in list(self.busy.items()):
            if time.time() - since < watchdog.EXAMPLE_SECONDS + SILENT_SECONDS:
                continue
            self.workers.kill(job)
            del self.busy[job]
            seconds = round(time.time() - since)
            reproduced, repro = self.hang_repros.pop(job, ("", ""))
            pending = self.unshrunk.pop(job, None)
            if pending is not None:         # it hung on a smaller program while shrinking a failure
                self.record(job, pending, note=_hung_while_shrinking(f"{program}\n{how}" if how else program, seconds))
            else:
                if reproduced != program:   # the worker's thread never ran: the driver writes it
                    repro = self._hang_repro_of(pickled, seconds)
                self.record(job, dict(key=f"hang/-/{hashlib.sha1(program.encode()).hexdigest()[:10]}",
                                      property="hang", implementation="-",
                                      program=f"{program}\n{how}" if how else program,
                                      repro=repro,
                                      message=f"a hang: the worker checking this program was silent for "
                                              f"{seconds} s (inside native code: no Python stack)",
                                      seed=self.args.seed, round=round_))
            if self.args.fail_fast:
                return True
            self.spawn(job, first_round=round_, corpus=False)
        return False

    def _hang_repro_of(self, pickled: bytes | None, seconds: int) -> str:
        """The hang reproducer of the program a silent worker was checking
        (pickled with its "start" message), or "" where it has none."""
        import pickle
        from fuzz import watchdog
        if pickled is None:
            return ""
        return _hang_repro(pickle.loads(pickled), watchdog.ExampleTimeout(seconds, "native code"), self.impls)

    def finish(self) -> None:
        """Findings still shrinking are written as they are; each report
        says how often the campaign hit its finding, and by which jobs."""
        for job, payload in list(self.unshrunk.items()):     # time ran out (or fail-fast) while shrinking
            self.record(job, payload, note="Not shrunk: the campaign ended while Hypothesis was shrinking it "
                                           "(the first failure, reduced where the program says so).")
        for key, d in self.findings.items():
            by_job = collections.Counter(job for job, _ in self.hits[key])
            with open(os.path.join(d, "report.md"), "a") as fh:
                fh.write(f"\nHit {len(self.hits[key])} time(s) in this campaign, by "
                         + ", ".join(f"job {j} ({n})" for j, n in sorted(by_job.items())) + ".\n")


def _hung_while_shrinking(program: str, seconds: int) -> str:
    """The note of a failure whose worker went silent while shrinking or
    reducing it. The hang is on a program shrinking made (Hypothesis' shrink
    step, or one it checks before the reducer's candidates), and a smaller
    program can loop forever where the failing one did not (a while loop's
    carry update replaced): the failure is what was found, the hang is said
    of that program only."""
    return (f"Not shrunk: while it was being shrunk, the worker was silent for {seconds} s inside native "
            f"code on a smaller program (last started: below), and was ended. A smaller program can loop "
            f"forever where this one did not, so that is no hang finding of its own.\n\n"
            f"```\n{program}\n```")


def _reproducers_checked(dirs, *, budget_s: float) -> None:
    """Each finding's repro.py run in a fresh interpreter, as a user runs
    it, its report told whether it fails there. A shrunk finding can depend
    on the state of the worker that found it (what earlier programs left in
    JAX's caches or config): its reproducer then passes, and the report
    says so, so that nobody takes it for a reproduced bug. Reproducers run
    one at a time, each given what is left of `budget_s` (--repro-seconds);
    those the budget does not reach say they were not run."""
    until = time.time() + budget_s
    for d in dirs:
        path = os.path.join(d, "repro.py")
        if not os.path.exists(path):
            continue
        left = until - time.time()
        verdict = (_repro_verdict(path, left) if left > 1 else
                   "not run (the campaign's time was up: --repro-seconds gives it more)")
        with open(os.path.join(d, "report.md"), "a") as fh:
            fh.write(f"\nReproducer, run in a fresh interpreter: {verdict}.\n")


def _repro_verdict(path: str, timeout_s: float) -> str:
    import subprocess
    try:
        run = subprocess.run([sys.executable, os.path.basename(path)], cwd=os.path.dirname(path),
                             capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"no exit within {timeout_s:.0f} s"
    if run.returncode == 0:
        return ("PASSES: it does not fail in a fresh interpreter, so the finding depended on the "
                "state of the worker's process; replay it from its seed")
    lines = run.stderr.strip().splitlines() or ["?"]
    # the exception's own line (JAX prints a note on its filtered frames after it)
    last = next((line for line in reversed(lines) if re.match(r"[\w.]+(Error|Exception)\b", line)), lines[-1])
    return f"fails (exit {run.returncode}: {last[:200]})"


def _title(f: dict) -> str:
    return {"error": "an error while checking", "hang": "a hang while checking"}.get(
        f["property"], f"{f['property']} differs under {f['implementation']}")


def _transport(args):
    """How the workers start and talk to the driver: local processes, or
    Ray tasks (--ray)."""
    if args.ray is None:
        return _Processes()
    from fuzz import cluster
    return cluster.RayWorkers(args.ray, args.gpus_per_worker)


def fuzz_main(args) -> int:
    impls = tuple(i.strip() for i in args.jax_impl.split(",") if i.strip())
    for i in impls:
        if i not in ("remat2", "remat3"):
            print(f"unknown --jax-impl {i!r}; supported: remat2, remat3", file=sys.stderr)
            return 2
    if args.gpus_per_worker and args.ray is None:
        print("--gpus-per-worker needs --ray", file=sys.stderr)
        return 2
    from hypothesis.database import DirectoryBasedExampleDatabase

    from oracle import jax_api
    env = jax_api.environment()
    print("checking against " + ", ".join(f"{k}={v}" for k, v in env.items()), file=sys.stderr)
    for i in impls:
        if jax_api.unavailable(i):
            print(f"{i}: not checked ({jax_api.unavailable(i)})", file=sys.stderr)
    impls = tuple(i for i in impls if not jax_api.unavailable(i))
    os.makedirs(args.out, exist_ok=True)
    from fuzz.cluster import ClusterUnavailable
    workers = _transport(args)
    try:
        jobs = workers.connect(args.jobs)
    except ClusterUnavailable as e:       # no Ray, no cluster, no GPUs
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 2
    start = time.time()
    c = _Campaign(args, impls, start, start + 60 * args.minutes, workers, jobs,
                  database=DirectoryBasedExampleDatabase(os.path.join(args.out, ".hypothesis")))
    with _stopped_by_signals():
        try:
            for j in range(jobs):
                c.spawn(j)
            _drive(c)
            workers.terminate()
            c.finish()
            workers.join(timeout=5)
        finally:
            workers.close()
    elapsed = time.time() - start
    _reproducers_checked(c.findings.values(), budget_s=args.repro_seconds if args.repro_seconds is not None
                         else start + 1.1 * 60 * args.minutes - time.time())
    print(file=sys.stderr)
    _summary(c.counts, c.programs, elapsed, c.findings, c.errors)
    return 1 if c.findings or c.errors else 0


@contextlib.contextmanager
def _stopped_by_signals():
    """SIGTERM (`kill`, `pkill`, a CI's timeout) stops the driver as Ctrl-C
    does: SystemExit(143) unwinds it, so that its `finally` ends the workers
    (`workers.close`). Python's default for SIGTERM ends the process at
    once, which left the workers running. Only the main thread may set a
    handler: elsewhere (a driver run in a thread) nothing changes."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _drive(c: _Campaign) -> None:
    """The driver's loop: take the workers' messages, watch their
    heartbeats, print progress, until every worker is done or time is up."""
    last_print = 0.0
    while c.done < c.jobs and c.running():
        message = c.workers.receive(timeout=0.5)
        if message is None and not c.workers.alive():
            break
        kind, job, payload = message or (None, None, None)
        if (kind and c.handle(kind, job, payload)) or c.watch():
            break
        if time.time() - last_print > 0.5 or kind == "done":
            last_print = time.time()
            _progress(c)


def _progress(c: _Campaign) -> None:
    now = time.time()
    rate = c.programs / max(now - c.start, 1e-9)
    known = sum(n for (p, i, s), n in c.counts.items() if s == "known divergence")
    renamed = sum(n for (p, i, s), n in c.counts.items() if s == "naming normalised")
    line = (f"[{int(now - c.start) // 60:02d}:{int(now - c.start) % 60:02d}] programs {c.programs} "
            f"({rate:.2f}/s) findings {len(c.findings)} known divergences {known} "
            f"naming normalised {renamed}")
    tty = sys.stderr.isatty()
    print(("\r" + line) if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)


KNOWN_AS = "known as "     # a count's status naming the known divergence it was


def _statuses(report) -> list:
    """What a worker tells the driver of a checked program: (property,
    implementation, status) per result, per naming normalisation, and per
    known divergence or normalisation by name (`KNOWN_AS`)."""
    return ([(r.property, r.implementation, r.status) for r in report.results]
            + [(p, i, "naming normalised") for _, p, i in report.normalizations]
            + [(p, i, KNOWN_AS + name) for name, p, i in report.known_divergences + report.normalizations])


def _divergences_by_name(counts) -> str:
    """The known divergences and naming normalisations the campaign met,
    each with how many times a checked program's report named it, most
    first: on an old release, the historic bugs it rediscovered
    (docs/historic_bugs.md)."""
    by_name = collections.Counter()
    for (_, _, status), n in counts.items():
        if status.startswith(KNOWN_AS):
            by_name[status[len(KNOWN_AS):]] += n
    return "".join(f"\n  {n:>6}  {name}" for name, n in sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0])))


def _summary(counts, programs, elapsed, findings, errors):
    props = sorted({p for p, _, _ in counts})
    impls = sorted({i for _, i, _ in counts})
    print(f"\n{programs} programs in {elapsed:.1f} s ({programs / max(elapsed, 1e-9):.2f} programs/s)")
    header = f"{'property':14}" + "".join(f"{i:>34}" for i in impls)
    print(header)
    for p in props:
        cells = []
        for i in impls:
            ok = counts[(p, i, "ok")]
            kd = counts[(p, i, "known divergence")]
            nc = counts[(p, i, "not compared")] + counts[(p, i, "not applicable")]
            cells.append(f"{ok:>6} ok {kd:>6} known {nc:>6} n/c")
        print(f"{p:14}" + "".join(f"{c:>34}" for c in cells))
    by_name = _divergences_by_name(counts)
    if by_name:
        print("known divergences and naming normalisations by name:" + by_name)
    print(f"findings: {len(findings)}" + "".join(f"\n  {k} -> {d}" for k, d in findings.items()))
    if errors:
        print(f"errors: {len(errors)}" + "".join(f"\n  {e}" for e in errors))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="remat-oracle", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fuzz", help="run a fuzz campaign against the installed JAX")
    f.add_argument("--minutes", type=float, default=1.0)
    f.add_argument("--examples", type=int, default=10 ** 9, help="stop after this many programs")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--jobs", type=int, default=None,
                   help="workers (default: min(2, CPUs); with --ray one per CPU of the cluster, "
                        "or per --gpus-per-worker GPUs)")
    f.add_argument("--jax-impl", default="remat2,remat3")
    f.add_argument("--out", default="fuzz-findings")
    f.add_argument("--fail-fast", action="store_true", help="stop at the first (shrunk) finding")
    f.add_argument("--no-corpus", action="store_true",
                   help="draw programs from the start (by default the workers first check the "
                        "JAX-derived corpus, fuzz/corpus.py, split among them)")
    f.add_argument("--novelty", action="store_true",
                   help="check only the drawn programs that bring a rule branch, primitive, stack layer "
                        "or spelling field not yet checked often (fuzz/novelty.py): reaches rare programs "
                        "sooner, and with them the cases the spec does not model yet")
    f.add_argument("--no-control-flow", action="store_true",
                   help="leave scan, cond, while and custom_jvp/custom_vjp out of the programs")
    f.add_argument("--backend", default=None, metavar="NAME",
                   help="the JAX backend programs run on (cpu, gpu, tpu, ...; default: JAX's default)")
    f.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="run the workers as Ray tasks: on the cluster at ADDRESS (host:port, ray://...), "
                        "'auto' (the cluster this node belongs to) or 'local' (a Ray started here)")
    f.add_argument("--gpus-per-worker", type=float, default=0.0,
                   help="with --ray: GPUs each worker asks Ray for (0: CPU workers, one CPU each)")
    f.add_argument("--repro-seconds", type=float, default=None, metavar="S",
                   help="time to run the findings' reproducers in fresh interpreters at the end "
                        "(default: what is left of --minutes plus 10%%, so that the campaign still "
                        "ends on time)")
    args = parser.parse_args(argv)
    if args.command == "fuzz":
        if args.backend is not None and not _use_backend(args.backend):
            return 2
        return fuzz_main(args)
    return 2


def _use_backend(name: str) -> bool:
    """Make `name` the backend of every check (oracle.backends.DEFAULT_BACKEND,
    here and, through the environment, in the workers); False, with the
    reason printed, when it has no devices here."""
    from oracle import backends
    from oracle.errors import InvalidArgument
    try:
        backends.resolve(name)
    except InvalidArgument as e:
        print(f"--backend {name}: {e}", file=sys.stderr)
        return False
    os.environ[backends.ENV] = backends.DEFAULT_BACKEND = name
    return True


if __name__ == "__main__":
    sys.exit(main())
