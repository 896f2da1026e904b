"""`remat-oracle fuzz`: a fuzz campaign of spec programs against JAX.

    remat-oracle fuzz [--minutes M] [--examples N] [--seed S] [--jobs J]
                      [--jax-impl remat2,remat3] [--out DIR] [--fail-fast]

Each job is a process running Hypothesis on `fuzz.strategies.programs()`
with the differential property (oracle.check: values, JVP, VJP, vmap,
second order, residual sets, vjp leaves, prevent_cse). A failing program is
shrunk by Hypothesis, and every distinct finding (property +
implementation + the shrunk program's shape) gets DIR/<id>/ with
repro.py (standalone jax + numpy), program.txt (spec IR) and report.md.
Exit status: 1 if a discrepancy that is not a known divergence was found,
0 otherwise. Every run replays from its seed.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import multiprocessing as mp
import os
import queue as queue_mod
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


def _worker(job: int, seed: int, deadline: float, max_examples: int, impls: tuple, out_dir: str,
            fail_fast: bool, results: "mp.Queue", control_flow: bool = True):
    import warnings
    warnings.filterwarnings("ignore")
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hyp_seed
    from hypothesis.database import DirectoryBasedExampleDatabase

    import oracle
    from fuzz import properties
    from fuzz.strategies import programs

    checked = 0
    last_failure = []
    db = DirectoryBasedExampleDatabase(os.path.join(out_dir, ".hypothesis"))
    round_ = 0
    while time.time() < deadline and checked < max_examples:
        batch = min(20, max_examples - checked)
        round_ += 1

        @hyp_seed(seed * 100003 + job * 1009 + round_)
        @settings(max_examples=batch, deadline=None, database=db, print_blob=False,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  phases=[Phase.reuse, Phase.generate, Phase.shrink])
        @given(programs(partial_ad=True, control_flow=control_flow))
        def prop(prog):
            nonlocal checked
            if time.time() > deadline and not last_failure:
                return                # out of time: let Hypothesis finish the batch quickly
            if time.time() > deadline + 600:      # never shrink forever
                return
            try:
                report = properties.oracle_agrees(prog, implementations=impls)
            except oracle.Unsupported:
                return
            except Exception as e:      # a Mismatch, or an error of ours (or JAX's): shrink it too
                last_failure[:] = [(prog, e)]
                raise
            checked += 1
            results.put(("checked", job, [(r.property, r.implementation, r.status) for r in report.results]
                         + [(p, i, "naming normalised") for _, p, i in report.normalizations]))
        try:
            prop()
        except oracle.Mismatch:
            prog, e = last_failure[0]
            prop_name, impl = _property_of(e)
            results.put(("finding", job, dict(
                key=f"{prop_name}/{impl}/{_shape_key(prog)}", property=prop_name, implementation=impl,
                program=str(prog), message=str(e).split("\nreproducer:\n")[0],
                repro=e.repro.text if e.repro else "", seed=seed, round=round_)))
            if fail_fast:
                break
        except Exception as e:   # an error of ours: report it with its (shrunk) program, never hide it
            if not last_failure:
                results.put(("error", job, f"{type(e).__name__}: {e}"))
                break
            prog, err = last_failure[0]
            message = f"{type(err).__name__}: {err}"
            results.put(("finding", job, dict(
                key=f"error/{type(err).__name__}/{_shape_key(prog)}", property="error",
                implementation="-", program=str(prog), message=message, repro="", seed=seed,
                round=round_)))
            last_failure.clear()
            if fail_fast:
                break
    results.put(("done", job, checked))


def _property_of(e):
    import re
    m = re.search(r": (\w+) differs under (\w+)", str(e))
    return (m.group(1), m.group(2)) if m else ("unknown", "unknown")


def _write_finding(out_dir: str, f: dict) -> str:
    fid = hashlib.sha1(f["key"].encode()).hexdigest()[:10]
    d = os.path.join(out_dir, fid)
    os.makedirs(d, exist_ok=True)
    if f["repro"]:
        with open(os.path.join(d, "repro.py"), "w") as fh:
            fh.write(f["repro"])
    with open(os.path.join(d, "program.txt"), "w") as fh:
        fh.write(f["program"] + "\n")
    title = (f"an error while checking" if f["property"] == "error"
             else f"{f['property']} differs under {f['implementation']}")
    rerun = ("Run `python repro.py` (needs only jax and numpy) to see it fail.\n" if f["repro"] else
             "An exception, not a disagreement: replay the program with "
             "`fuzz.properties.oracle_agrees` to see it.\n")
    with open(os.path.join(d, "report.md"), "w") as fh:
        fh.write(f"# Finding {fid}: {title}\n\n"
                 f"Found by `remat-oracle fuzz --seed {f['seed']}` (round {f['round']}); "
                 f"program shape `{f['key'].split('/', 2)[2]}`.\n\n"
                 f"```\n{f['message']}\n```\n\n## Program (spec IR)\n\n```\n{f['program']}\n```\n\n"
                 + rerun)
    return d


def fuzz_main(args) -> int:
    impls = tuple(i.strip() for i in args.jax_impl.split(",") if i.strip())
    for i in impls:
        if i not in ("remat2", "remat3"):
            print(f"unknown --jax-impl {i!r}; supported: remat2, remat3", file=sys.stderr)
            return 2
    from oracle import jax_api
    env = jax_api.environment()
    print("checking against " + ", ".join(f"{k}={v}" for k, v in env.items()), file=sys.stderr)
    for i in impls:
        if jax_api.unavailable(i):
            print(f"{i}: not checked ({jax_api.unavailable(i)})", file=sys.stderr)
    impls = tuple(i for i in impls if not jax_api.unavailable(i))
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    deadline = start + 60 * args.minutes
    per_job = -(-args.examples // args.jobs)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(j, args.seed, deadline, per_job, impls, args.out,
                                               args.fail_fast, results, not args.no_control_flow),
                         daemon=True)
             for j in range(args.jobs)]
    for p in procs:
        p.start()
    counts = collections.Counter()
    programs = 0
    findings: dict[str, str] = {}
    errors = []
    done = 0
    last_print = 0.0
    tty = sys.stderr.isatty()
    while done < len(procs):
        try:
            kind, job, payload = results.get(timeout=0.5)
        except queue_mod.Empty:
            if not any(p.is_alive() for p in procs):
                break
            kind = None
        if kind == "checked":
            programs += 1
            counts.update(payload)
        elif kind == "finding":
            if payload["key"] not in findings:
                findings[payload["key"]] = _write_finding(args.out, payload)
                print(f"\nfinding: {payload['property']} differs under {payload['implementation']} "
                      f"-> {findings[payload['key']]}", file=sys.stderr)
            if args.fail_fast:
                for p in procs:
                    p.terminate()
                break
        elif kind == "error":
            errors.append(payload)
            print(f"\nerror in job {job}: {payload}", file=sys.stderr)
        elif kind == "done":
            done += 1
        now = time.time()
        if now - last_print > 0.5 or kind == "done":
            last_print = now
            rate = programs / max(now - start, 1e-9)
            known = sum(n for (p, i, s), n in counts.items() if s == "known divergence")
            renamed = sum(n for (p, i, s), n in counts.items() if s == "naming normalised")
            line = (f"[{int(now - start) // 60:02d}:{int(now - start) % 60:02d}] programs {programs} "
                    f"({rate:.2f}/s) findings {len(findings)} known divergences {known} "
                    f"naming normalised {renamed}")
            print(("\r" + line) if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
    for p in procs:
        p.join(timeout=5)
    elapsed = time.time() - start
    print(file=sys.stderr)
    _summary(counts, programs, elapsed, findings, errors)
    return 1 if findings or errors else 0


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
    f.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    f.add_argument("--jax-impl", default="remat2,remat3")
    f.add_argument("--out", default="fuzz-findings")
    f.add_argument("--fail-fast", action="store_true", help="stop at the first (shrunk) finding")
    f.add_argument("--no-control-flow", action="store_true",
                   help="leave scan, cond, while and custom_jvp/custom_vjp out of the programs")
    args = parser.parse_args(argv)
    if args.command == "fuzz":
        return fuzz_main(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
