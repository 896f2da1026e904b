"""Fuzzing throughput: programs fully checked per second, and where the time goes.

    python -m benchmarks.bench_fuzz [--programs N] [--seed S] [--scaling K] [--jobs N]

Draws N programs with Hypothesis (timed), then runs on each, one process:
  full      oracle.check, remat2 and remat3, every property (both implementations
            compiled in one XLA computation)
  naive     the baseline (benchmarks/naive_check.py): the same properties,
            each its own jax.jit per implementation, against the spec
            evaluated eagerly
  jaxpr     oracle.check restricted to the jaxpr tier (residuals,
            prevent_cse): no XLA compilation of the numbers
  spec      the spec-only fuzz properties (no JAX at all)
and prints programs/second for each, full against naive on the same
programs, with the split of the full check's time between Hypothesis
generation, the spec, JAX tracing/lowering, XLA compilation and execution.
With --scaling K it also draws K programs of each size (max_steps 2, 6, 24)
and prints how full and naive grow with the number of equations.
With --jobs N (default 2) the full check also runs in N processes, the same
programs shared out among them (as `remat-oracle fuzz --jobs N` runs its
workers), and the wall-clock rate is printed beside the others.
"""
from __future__ import annotations

import argparse
import collections
import time
import warnings

import numpy as np


def draw_programs(n: int, seed: int, dtype=np.float32, max_steps: int = 6):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hyp_seed
    from fuzz.strategies import programs
    out = []

    @hyp_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs(dtype=dtype, max_steps=max_steps))
    def collect(p):
        out.append(p)
    collect()
    return out[:n]


def main(argv=None):
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scaling", type=int, default=0, help="programs per size for the scaling table (0: none)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="also run the full check in this many processes, the programs shared out (1: not)")
    args = ap.parse_args(argv)

    import oracle
    from fuzz import properties
    from oracle.checker import PROPERTIES

    t0 = time.perf_counter()
    progs = draw_programs(args.programs, args.seed)
    t_gen = time.perf_counter() - t0
    n = len(progs)

    progs64 = draw_programs(args.programs, args.seed, np.float64)

    def run(label, fn, progs=progs):
        split = collections.Counter()
        t = time.perf_counter()
        for p in progs:
            r = fn(p)
            if r is not None:
                split.update(r.timings)
        dt = time.perf_counter() - t
        return label, dt, split

    full = run("full", lambda p: properties.oracle_agrees(p))
    naive = run("naive", _naive)
    jaxpr = run("jaxpr", lambda p: properties.oracle_agrees(p, properties=("residuals", "prevent_cse")))
    spec_only = run("spec", lambda p: (properties.vjp_is_transpose_of_jvp(p),
                                       properties.vmap_matches_loop(p)) and None, progs64)
    print(f"{n} programs (generation: {t_gen:.2f} s, {n / t_gen:.1f} programs/s)")
    for label, dt, split in (full, naive, jaxpr, spec_only):
        print(f"{label:6} {n / dt:7.2f} programs/s  ({dt:.1f} s)")
    print(f"full / naive: {naive[1] / full[1]:.2f}x")
    if args.jobs > 1:
        wall = full_in_jobs(args.jobs, args.programs, args.seed)
        print(f"full, --jobs {args.jobs}: {n / wall:.2f} programs/s  ({wall:.1f} s; "
              f"{naive[1] / wall:.2f}x naive's one process)")
    label, dt, split = full
    other = dt - sum(split.values())
    print("full check time split (per program):")
    gen_pp = t_gen / n
    total = dt / n + gen_pp
    for k, v in [("hypothesis generation", gen_pp)] + [(k, v / n) for k, v in sorted(split.items())] + [
            ("other (policies, comparisons, reports)", other / n)]:
        print(f"  {k:40} {v * 1e3:8.1f} ms  {100 * v / total:5.1f} %")
    if args.scaling:
        scaling(args.scaling, args.seed)


def _check_share(job: int, jobs: int, n: int, seed: int, barrier, results):
    """One --jobs worker: the same drawn programs, every `jobs`-th checked
    once all workers have drawn them and warmed up (as a campaign's
    long-lived workers are)."""
    warnings.filterwarnings("ignore")
    from fuzz import properties
    progs = draw_programs(n, seed)
    properties.oracle_agrees(progs[0])
    barrier.wait()
    t = time.perf_counter()
    for p in progs[job::jobs]:
        properties.oracle_agrees(p)
    results.put(time.perf_counter() - t)


def full_in_jobs(jobs: int, n: int, seed: int) -> float:
    """Wall seconds for `jobs` processes to check the n programs, shared out."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(jobs + 1), ctx.Queue()
    workers = [ctx.Process(target=_check_share, args=(j, jobs, n, seed, barrier, results)) for j in range(jobs)]
    for w in workers:
        w.start()
    try:    # a worker that dies leaves the barrier or the queue waiting: time out, not hang
        barrier.wait(timeout=600)
        t = time.perf_counter()
        for _ in workers:
            results.get(timeout=1800)
        wall = time.perf_counter() - t
    finally:
        for w in workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()
    return wall


def _naive(p):
    from benchmarks.naive_check import naive_check
    from fuzz.strategies import inputs
    naive_check(p, inputs(p))


def equations(prog) -> int:
    """Equations at every depth."""
    from spec.ir import subprograms
    return sum(1 + sum(equations(b) for _, b in subprograms(e.params)) for e in prog.eqns)


def scaling(k: int, seed: int):
    """Full and naive programs/s for programs of three sizes."""
    from fuzz import properties
    print("size (max_steps)  equations (mean)  full programs/s  naive programs/s  full / naive")
    for max_steps in (2, 6, 24):
        progs = draw_programs(k, seed, max_steps=max_steps)
        t = time.perf_counter()
        for p in progs:
            properties.oracle_agrees(p)
        full = time.perf_counter() - t
        t = time.perf_counter()
        for p in progs:
            _naive(p)
        naive = time.perf_counter() - t
        eqns = np.mean([equations(p) for p in progs])
        print(f"{max_steps:16d}  {eqns:16.1f}  {len(progs) / full:15.2f}  {len(progs) / naive:16.2f}  "
              f"{naive / full:11.2f}x")


if __name__ == "__main__":
    main()
