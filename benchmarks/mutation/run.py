"""Score a fuzzing command against the mutants.

    python -m benchmarks.mutation.run --command "<cmd>" [--mutants a,b|class] [--timeout S]
                                      [--jobs N] [--rev REV | --workdir DIR] [--json PATH]

The command runs first on pristine jax (a pristine overlay): if it fails
there, that is a false alarm; it is reported and the run stops. Then, per
mutant, it runs with jax imported from that mutant's overlay (checked), under
a wall-clock timeout: a nonzero exit is KILLED, a zero exit SURVIVED, and
running out of time TIMEOUT (counted as surviving, unless the run had already
started writing a finding: then KILLED at the moment the finding's first file
appeared, marked pending). `{out}` in the command is a fresh empty directory
per run (give it to `remat-oracle fuzz --out`: its first file, Hypothesis's
saved failing example, times the first detection). --stop-after-detection S
ends the command S seconds after that (the score needs the detection, not
the shrinking).

--rev REV runs the command in a snapshot of that commit (git archive, .venv
linked), so that the fuzzer scored is a committed one, not the working tree;
the default runs it in the working tree (--workdir, default the repository).
Results are written as JSON after every mutant (--resume continues one).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.mutation import mutants as M
from benchmarks.mutation import report
from benchmarks.mutation.overlay import Overlay, check_anchor, jax_package_dir, pristine_text

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def snapshot(rev: str, base: str) -> str:
    """A checkout of `rev` (git archive) with the repository's .venv linked."""
    dest = tempfile.mkdtemp(prefix=f"snapshot-{rev[:12]}-", dir=base)
    archive = subprocess.run(["git", "-C", REPO, "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    if os.path.isdir(os.path.join(REPO, ".venv")):
        os.symlink(os.path.join(REPO, ".venv"), os.path.join(dest, ".venv"))
    return dest


def first_file(path: str) -> bool:
    for _, _, files in os.walk(path):
        if files:
            return True
    return False


def _stop(proc: subprocess.Popen) -> None:
    """End the command's process group (the processes this runner started)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def run_command(command: str, env: dict, cwd: str, timeout: float, base: str,
                stop_after_detection: float | None = None) -> dict:
    """Run once; exit code, wall seconds, first-finding seconds, output tail.
    With `stop_after_detection`, the command is ended that many seconds
    after its first finding appeared (then classified killed, pending):
    scoring needs the detection, not the shrinking after it."""
    out_dir = tempfile.mkdtemp(prefix="out-", dir=base)
    log = tempfile.TemporaryFile(mode="w+")
    t0 = time.time()
    proc = subprocess.Popen(command.replace("{out}", shlex.quote(out_dir)), shell=True, cwd=cwd, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    detect, timed_out = None, False
    while proc.poll() is None:
        if detect is None and first_file(out_dir):
            detect = time.time() - t0
        stop_detected = (detect is not None and stop_after_detection is not None
                         and time.time() - t0 > detect + stop_after_detection)
        if time.time() - t0 > timeout or stop_detected:
            timed_out = True
            _stop(proc)
            break
        time.sleep(0.5)
    seconds = time.time() - t0
    if detect is None and first_file(out_dir):
        detect = seconds
    log.seek(0)
    output = log.read()
    log.close()
    subprocess.run(["rm", "-rf", out_dir])
    return dict(rc=proc.returncode, seconds=round(seconds, 1), timed_out=timed_out,
                detect_s=None if detect is None else round(detect, 1), tail=output[-4000:])


def classify(run: dict) -> dict:
    if run["timed_out"]:
        status, pending = ("killed", True) if run["detect_s"] is not None else ("timeout", False)
    else:
        status, pending = ("killed" if run["rc"] != 0 else "survived"), False
    return dict(status=status, pending=pending, evidence=report.evidence(run["tail"]) if status == "killed" else "")


def score_mutant(m: M.Mutant, args, cwd: str, base: str) -> dict:
    row = dict(mutant=m.name, cls=m.cls, description=m.description)
    problem = check_anchor(m, pristine_text(m))
    if problem:
        return dict(row, status="invalid", why=problem)
    with Overlay(m, base=base) as ov:
        env = ov.env(extra_paths=[cwd])
        try:
            ov.verify(env=env)
        except RuntimeError as e:
            return dict(row, status="import-broken", why=str(e).splitlines()[-1][:200])
        run = run_command(args.command, env, cwd, args.timeout, base, args.stop_after_detection)
    return dict(row, **run, **classify(run))


def pristine(args, cwd: str, base: str) -> dict:
    with Overlay(None, base=base) as ov:
        env = ov.env(extra_paths=[cwd])
        where = ov.verify(env=env)
        run = run_command(args.command, env, cwd, args.pristine_timeout or args.timeout, base)
    return dict(run, jax_file=where, ok=(run["rc"] == 0 and not run["timed_out"]))


def write(path: str, doc: dict) -> None:
    doc["summary"] = report.summarize(doc["results"])
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--command", required=True, help="shell command; {out}: a fresh directory per run")
    ap.add_argument("--mutants", default=None, help="comma-separated names or classes (default: all)")
    ap.add_argument("--timeout", type=float, default=150.0, help="wall-clock seconds per mutant")
    ap.add_argument("--pristine-timeout", type=float, default=None, help="for the pristine run (default: --timeout)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once")
    ap.add_argument("--stop-after-detection", type=float, default=None, metavar="S",
                    help="end a command S seconds after its first finding appeared (killed, pending): "
                         "saves the shrinking time when only the score is wanted")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--rev", default=None, help="run in a snapshot of this commit")
    where.add_argument("--workdir", default=REPO, help="run here (default: the repository)")
    ap.add_argument("--label", default=None, help="a name for this run in reports")
    ap.add_argument("--json", default=None, help="results file (default: results/<label>.json)")
    ap.add_argument("--resume", action="store_true", help="keep the results already in --json")
    return ap.parse_args(argv)


def new_doc(args, rev_sha):
    return dict(label=args.label, command=args.command, rev=args.rev, rev_sha=rev_sha,
                workdir=None if args.rev else args.workdir, timeout=args.timeout,
                jax_dir=jax_package_dir(), started=datetime.datetime.now().isoformat(timespec="seconds"),
                pristine=None, results=[])


def setup(args, base):
    args.label = args.label or re.sub(r"\W+", "-", args.command.split("--out")[0]).strip("-")[-40:]
    args.json = args.json or os.path.join(HERE, "results", f"{args.label}.json")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    sha = None
    if args.rev:
        sha = subprocess.run(["git", "-C", REPO, "rev-parse", args.rev], capture_output=True, text=True,
                             check=True).stdout.strip()
        cwd = snapshot(sha, base)
    else:
        cwd = os.path.abspath(args.workdir)
    doc = new_doc(args, sha)
    if args.resume and os.path.exists(args.json):
        with open(args.json) as fh:
            doc = json.load(fh)
    return cwd, doc


def main(argv=None) -> int:
    args = parse(argv)
    base = tempfile.mkdtemp(prefix="mutation-run-")
    try:
        return _main(args, base)
    finally:
        subprocess.run(["rm", "-rf", base])


def _main(args, base) -> int:
    cwd, doc = setup(args, base)
    print(f"running in {cwd}; results -> {args.json}", flush=True)
    if not (doc.get("pristine") or {}).get("ok"):
        doc["pristine"] = pristine(args, cwd, base)
        write(args.json, doc)
        p = doc["pristine"]
        if not p["ok"]:
            print(f"FALSE ALARM: the command fails on pristine jax (rc={p['rc']}, timed out: {p['timed_out']}, "
                  f"{p['seconds']}s); not scoring mutants.\n{p['tail'][-3000:]}", flush=True)
            return 2
        print(f"pristine jax: passed in {p['seconds']}s", flush=True)
    done = {r["mutant"] for r in doc["results"]}
    todo = [m for m in M.select(args.mutants) if m.name not in done]
    lock = threading.Lock()

    def one(m):
        row = score_mutant(m, args, cwd, base)
        with lock:
            doc["results"].append(row)
            write(args.json, doc)
            print(f"{m.name:42s} {m.cls:13s} {row['status']:9s} {row.get('seconds', '-')}s  "
                  f"{row.get('evidence') or row.get('why') or ''}"[:200], flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        list(ex.map(one, todo))
    print("\n" + report.table(doc["results"]) + "\n\n" + report.summary_text(doc["summary"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
