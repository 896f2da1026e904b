"""The spec is an independent oracle: it must never import jax."""
from __future__ import annotations

import ast
import os
import pathlib
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


def _jax_imports(path: pathlib.Path) -> list[str]:
    """Every import of jax/jaxlib in a file, found on its syntax tree (so a
    docstring that merely mentions jax does not count, but `import numpy, jax`,
    `from jax import lax`, `importlib.import_module("jax")` and imports nested
    in functions do)."""
    def is_jax(name):
        return bool(name) and name.split(".")[0] in ("jax", "jaxlib")
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if is_jax(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_jax(node.module):
            found.append(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            arg = node.args[0].value
            if fname in ("import_module", "__import__") and isinstance(arg, str) and is_jax(arg):
                found.append(arg)
    return [f"{path.relative_to(ROOT)}:{name}" for name in found]


def test_no_file_under_spec_imports_jax():
    files = sorted(p for p in SPEC.rglob("*.py") if "__pycache__" not in p.parts)
    assert len(files) >= 10
    offenders = [hit for p in files for hit in _jax_imports(p)]
    assert not offenders, offenders


def test_static_check_detects_jax_imports(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    cases = {"a.py": "import numpy, jax\n", "b.py": "def f():\n    from jax.numpy import sin\n",
             "c.py": "import importlib\nimportlib.import_module('jaxlib')\n",
             "d.py": '"""We never import jax here."""\nimport numpy\n'}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    hits = {name: bool(_jax_imports(tmp_path / name)) for name in cases}
    assert hits == {"a.py": True, "b.py": True, "c.py": True, "d.py": False}
