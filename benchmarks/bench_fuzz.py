"""Fuzzing throughput: programs fully checked per second, and where the time goes.

    python benchmarks/bench_fuzz.py [--programs N] [--seed S]

Draws N programs with Hypothesis (timed), then runs on each, one process:
  full      oracle.check, remat2 and remat3, every property (one XLA
            compilation per implementation)
  jaxpr     oracle.check restricted to the jaxpr tier (residuals,
            prevent_cse): no XLA compilation of the numbers
  spec      the spec-only fuzz properties (no JAX at all)
and prints programs/second for each with the split of the full check's
time between Hypothesis generation, the spec, JAX tracing/lowering, XLA
compilation and execution. `remat-oracle fuzz --jobs 2` runs two such
processes, so its rate is about twice the "full" figure on 2 cores.
"""
from __future__ import annotations

import argparse
import collections
import time
import warnings

import numpy as np


def draw_programs(n: int, seed: int, dtype=np.float32):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hyp_seed
    from fuzz.strategies import programs
    out = []

    @hyp_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs(dtype=dtype))
    def collect(p):
        out.append(p)
    collect()
    return out[:n]


def main(argv=None):
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
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
    jaxpr = run("jaxpr", lambda p: properties.oracle_agrees(p, properties=("residuals", "prevent_cse")))
    spec_only = run("spec", lambda p: (properties.vjp_is_transpose_of_jvp(p),
                                       properties.vmap_matches_loop(p)) and None, progs64)
    print(f"{n} programs (generation: {t_gen:.2f} s, {n / t_gen:.1f} programs/s)")
    for label, dt, split in (full, jaxpr, spec_only):
        print(f"{label:6} {n / dt:7.2f} programs/s  ({dt:.1f} s)")
    label, dt, split = full
    other = dt - sum(split.values())
    print("full check time split (per program):")
    gen_pp = t_gen / n
    total = dt / n + gen_pp
    for k, v in [("hypothesis generation", gen_pp)] + [(k, v / n) for k, v in sorted(split.items())] + [
            ("other (policies, comparisons, reports)", other / n)]:
        print(f"  {k:40} {v * 1e3:8.1f} ms  {100 * v / total:5.1f} %")


if __name__ == "__main__":
    main()
