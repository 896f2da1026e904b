"""The spec is an independent oracle: it must never import jax."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec"

SCRIPT = """
import importlib, pkgutil, sys
import spec
names = [m.name for m in pkgutil.walk_packages(spec.__path__, "spec.")]
for name in names:
    importlib.import_module(name)
assert len(names) >= 10, names
loaded = sorted(m for m in sys.modules if m == "jax" or m.startswith(("jax.", "jaxlib")))
assert not loaded, loaded
print("ok", len(names))
"""


def test_importing_spec_and_all_submodules_does_not_import_jax():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


IMPORT_JAX = re.compile(r"^\s*(import\s+jax|from\s+jax[\w.]*\s+import)", re.MULTILINE)


def test_no_file_under_spec_imports_jax():
    files = [p for p in SPEC.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert any(p.suffix == ".py" for p in files)
    offenders = []
    for p in files:
        text = p.read_text(errors="replace")
        if "import jax" in text or IMPORT_JAX.search(text):
            offenders.append(str(p.relative_to(ROOT)))
    assert not offenders, offenders
