"""Check the mutants themselves: each anchor applies exactly once to the
installed jax, and each witness passes on pristine jax and fails under its
mutant (in an overlay). A mutant whose witness passes under it is not shown
observable (maybe equivalent) and is reported as such.

    python -m benchmarks.mutation.validate [--mutants a,b|class] [--jobs N] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.mutation import mutants as M
from benchmarks.mutation.overlay import Overlay, check_anchor, pristine_text

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def run_witness(name: str, env=None, python=sys.executable, timeout=600) -> tuple[int, str]:
    """Run one witness in a fresh interpreter; (exit code, output tail)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), REPO) if p)
    env.setdefault("JAX_PLATFORMS", "cpu")
    try:
        p = subprocess.run([python, "-m", "benchmarks.mutation.witnesses", name], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timeout"
    return p.returncode, (p.stdout + p.stderr)[-3000:]


def last_error(output: str) -> str:
    """The exception line of a traceback (or the last line)."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Mismatch)\b", ln)]
    pick = errors[-1] if errors else (lines[-1] if lines else "")
    return pick[:200]


def validate_one(m: M.Mutant, python=sys.executable) -> dict:
    t0 = time.time()
    row = dict(mutant=m.name, cls=m.cls)
    problem = check_anchor(m, pristine_text(m))
    if problem:
        return dict(row, status="invalid", why=problem)
    rc0, out0 = run_witness(m.witness, python=python)
    if rc0 != 0:
        return dict(row, status="witness fails on pristine jax", why=last_error(out0))
    with Overlay(m) as ov:
        rc1, out1 = run_witness(m.witness, env=ov.env(), python=python)
        if f"jax from {ov.package}" not in out1 and rc1 != 3:
            return dict(row, status="overlay not imported", why=out1[-300:])
    status = {0: "equivalent? (witness passes under the mutant)", 3: "mutant breaks `import jax`"}.get(
        rc1, "ok")
    return dict(row, status=status, why=last_error(out1), seconds=round(time.time() - t0, 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", default=None, help="comma-separated names or classes (default: all)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    chosen = M.select(args.mutants)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        rows = []
        for row in ex.map(validate_one, chosen):
            rows.append(row)
            print(f"{row['mutant']:42s} {row['cls']:13s} {row['status']}  {row.get('why', '')[:110]}",
                  flush=True)
    bad = [r for r in rows if r["status"] != "ok"]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} mutants valid and observable")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
