"""Write the generated pages, or check that they are fresh (`--check`).

ROOT and DOCS are read when called (tests/test_docs.py points them at a
copy of the pages)."""
from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

import tools.gen_docs as package
from tools.gen_docs.divergences import render_divergences
from tools.gen_docs.policies import policy_sections
from tools.gen_docs.rules import render_rules
from tools.gen_docs.sections import fill_sections

ROOT = package.ROOT
DOCS = ROOT / "docs"


def outputs() -> dict[Path, str]:
    """The new contents of every generated file."""
    policies_path = DOCS / "policies.md"
    return {
        DOCS / "rules.md": render_rules(),
        DOCS / "divergences.md": render_divergences(),
        policies_path: fill_sections(policies_path.read_text(), policy_sections()),
    }


def stale() -> list[tuple[Path, str]]:
    """(path, unified diff) for every generated file that differs from its output."""
    out = []
    for path, text in outputs().items():
        old = path.read_text() if path.exists() else ""
        if old != text:
            diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                str(path.relative_to(ROOT)), "generated", n=1))
            out.append((path, diff))
    return out


def check() -> int:
    bad = stale()
    for path, diff in bad:
        print(f"stale: {path.relative_to(ROOT)}", file=sys.stderr)
        print(diff[:4000], file=sys.stderr)
    if bad:
        print("run `python tools/gen_docs.py` to regenerate", file=sys.stderr)
        return 1
    print("docs are up to date")
    return 0


def write() -> int:
    for path, text in outputs().items():
        old = path.read_text() if path.exists() else None
        if old != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/gen_docs.py",
                                     description=package.__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated page is stale")
    args = parser.parse_args(argv)
    return check() if args.check else write()
