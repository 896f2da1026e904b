"""Run a snippet on many JAX releases: how a divergence's release range is
verified, and how a behaviour change is bisected.

    python -m tools.releases SCRIPT.py [--releases 0.4.25,0.4.36,...]
                                       [--between 0.4.25 0.6.2]

Each release gets a bare venv (jax, jaxlib, numpy < 2 before 0.4.26) under
$REMAT_ORACLE_RELEASES (default ~/.cache/remat-oracle/releases), made
once. The script runs there with plain python (it must not need this
repository: a divergence's repro does not), and its last line of output is
printed per release, with its exit status. `--between A B` takes every
release pip offers from A to B, both included.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from oracle.jax_api.versions import parse

ROOT = os.environ.get("REMAT_ORACLE_RELEASES", os.path.expanduser("~/.cache/remat-oracle/releases"))


def available() -> list[str]:
    """The jaxlib releases pip can install, oldest first."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "jaxlib"],
                         capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("Available versions:"))
    return sorted((v.strip() for v in line.split(":", 1)[1].split(",")), key=parse)


def venv(release: str) -> str:
    """The python of a bare venv with jax `release` (made on first use)."""
    home = os.path.join(ROOT, release)
    python = os.path.join(home, "bin", "python")
    if not os.path.exists(os.path.join(home, ".installed")):
        subprocess.run([sys.executable, "-m", "venv", "--clear", home], check=True)
        numpy = "numpy<2" if parse(release) < parse("0.4.26") else "numpy"
        subprocess.run([python, "-m", "pip", "install", "-q", f"jax=={release}", f"jaxlib=={release}", numpy,
                        "ml_dtypes"], check=True)
        open(os.path.join(home, ".installed"), "w").close()
    return python


def run(script: str, release: str) -> tuple[int, str]:
    """(exit status, last line of output) of `script` on `release`."""
    proc = subprocess.run([venv(release), script], capture_output=True, text=True, timeout=600)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode, lines[-1] if lines else ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("script")
    ap.add_argument("--releases", default=None, help="comma-separated releases")
    ap.add_argument("--between", nargs=2, metavar=("FIRST", "LAST"), default=None)
    args = ap.parse_args(argv)
    if args.releases:
        releases = args.releases.split(",")
    elif args.between:
        lo, hi = (parse(v) for v in args.between)
        releases = [v for v in available() if lo <= parse(v) <= hi]
    else:
        ap.error("give --releases or --between")
    for release in releases:
        status, last = run(args.script, release)
        print(f"{release:>8}  exit {status}  {last}", flush=True)


if __name__ == "__main__":
    main()
