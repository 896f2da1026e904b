"""Scores of a mutation run: per-mutant table, kill rate and median
time-to-kill per class and overall, and a side-by-side markdown table of
several runs (for the README).

    python -m benchmarks.mutation.report RUN.json [RUN2.json ...]   # markdown
    python -m benchmarks.mutation.report --mutants                   # the mutants, markdown
"""
from __future__ import annotations

import json
import re
import statistics
import sys

from benchmarks.mutation.mutants import CLASSES

SCORED = ("killed", "survived", "timeout")
FAILED = r"^FAILED (\S+?)(?: - .*)?$"
DIFFERS = r"\b(\w+ differs under \w+)"
OTHER = (r"^finding: .*", r"^error in job .*", r"^E +[\w.]*(Error|Exception|Failure)\b.*")


def evidence(output: str) -> str:
    """What killed the mutant, from the command's output: the failing test
    and/or the property that differed (else an error line, else the last line)."""
    parts = [m.group(1).split("::")[-1] for m in [re.search(FAILED, output, re.M)] if m]
    parts += [m.group(1) for m in [re.search(DIFFERS, output)] if m]
    if not parts:
        parts = [m.group(0).strip() for pat in OTHER for m in [re.search(pat, output, re.M)] if m][:1]
    if not parts:
        lines = [ln for ln in output.splitlines() if ln.strip()]
        parts = lines[-1:]
    return ": ".join(parts)[:160]


def kill_time(r: dict) -> float | None:
    """Seconds to kill: the exit, or the first finding when the run was cut
    off while shrinking it."""
    if r["status"] != "killed":
        return None
    return r.get("detect_s") if r.get("pending") else r["seconds"]


def summarize(results: list[dict]) -> dict:
    """{class or 'all': {n, killed, rate, median_s}} over scored mutants."""
    out = {}
    for cls in (*CLASSES, "all"):
        rows = [r for r in results if r["status"] in SCORED and (cls == "all" or r["cls"] == cls)]
        if not rows:
            continue
        times = [t for t in map(kill_time, rows) if t is not None]
        killed = sum(r["status"] == "killed" for r in rows)
        out[cls] = dict(n=len(rows), killed=killed, rate=round(killed / len(rows), 3),
                        median_s=round(statistics.median(times), 1) if times else None)
    return out


def table(results: list[dict]) -> str:
    lines = [f"{'mutant':42s} {'class':13s} {'result':9s} {'seconds':>8s}  evidence"]
    for r in results:
        t = kill_time(r) if r["status"] == "killed" else r.get("seconds")
        shown = f"{t:8.1f}" if isinstance(t, (int, float)) else f"{'-':>8s}"
        ev = evidence(r["tail"]) if r["status"] == "killed" and r.get("tail") else r.get("why", "")
        lines.append(f"{r['mutant']:42s} {r['cls']:13s} {r['status']:9s} {shown}  {ev[:90]}")
    return "\n".join(lines)


def summary_text(summary: dict) -> str:
    lines = [f"{'class':13s} {'killed':>7s} {'rate':>6s} {'median s':>9s}"]
    for cls, s in summary.items():
        med = f"{s['median_s']:9.1f}" if s["median_s"] is not None else f"{'-':>9s}"
        lines.append(f"{cls:13s} {s['killed']:>3d}/{s['n']:<3d} {s['rate']:6.0%} {med}")
    return "\n".join(lines)


def _what(r: dict) -> str:
    """' (property)' that differed, from the run's output, if it says."""
    m = re.search(DIFFERS, r.get("tail") or "")
    return f" ({m.group(1).split()[0]})" if m else ""


def markdown(runs: list[dict]) -> str:
    """Per-class scores of several runs side by side, then every mutant."""
    heads = [r.get("label") or r["command"] for r in runs]
    sums = [r.get("summary") or summarize(r["results"]) for r in runs]
    out = ["| class | " + " | ".join(f"{h}: killed (median s)" for h in heads) + " |",
           "|---|" + "---|" * len(runs)]
    for cls in (*CLASSES, "all"):
        cells = [f"{s[cls]['killed']}/{s[cls]['n']} = {s[cls]['rate']:.0%} ({s[cls]['median_s']})"
                 if cls in s else "-" for s in sums]
        out.append(f"| {'**all**' if cls == 'all' else cls} | " + " | ".join(cells) + " |")
    out += ["", "| mutant | class | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(runs)]
    by = [{r["mutant"]: r for r in run["results"]} for run in runs]
    for name in dict.fromkeys(n for b in by for n in b):
        cls = next(b[name]["cls"] for b in by if name in b)
        cells = []
        for b in by:
            r = b.get(name)
            t = kill_time(r) if r else None
            cells.append("-" if r is None else f"killed {t:.0f}s{_what(r)}" if t is not None else r["status"])
        out.append(f"| `{name}` | {cls} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def mutant_lines() -> str:
    """Every mutant as a markdown table row: class, name, file:line, what it does."""
    from benchmarks.mutation.mutants import MUTANTS
    from benchmarks.mutation.overlay import pristine_text
    out = ["| class | mutant | where | the slip |", "|---|---|---|---|"]
    for m in MUTANTS:
        text = pristine_text(m)
        start = text.index(m.anchor)
        old, new = m.anchor.split("\n"), m.replacement.split("\n")
        k = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
        line = text[:start].count("\n") + 1 + k
        out.append(f"| {m.cls} | `{m.name}` | `jax/{m.file}:{line}` | {m.description} |")
    return "\n".join(out)


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if paths == ["--mutants"]:
        print(mutant_lines())
        return 0
    runs = []
    for p in paths:
        with open(p) as fh:
            runs.append(json.load(fh))
    print(markdown(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
