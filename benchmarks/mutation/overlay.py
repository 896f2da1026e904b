"""Applying a mutant in a temporary overlay, never in site-packages.

`Overlay(mutant)` copies the installed jax package (jax/ only, not jaxlib;
__pycache__ included, so that unchanged modules import from their bytecode)
into a fresh temporary directory, rewrites the one mutated file there (and
drops its stale bytecode), and gives the environment that puts the overlay
first on PYTHONPATH. `Overlay(None)` is a pristine copy (to test the
mechanism). `verify()` checks that `import jax` really resolves to the
overlay in a fresh interpreter.
"""
from __future__ import annotations

import difflib
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from benchmarks.mutation.mutants import Mutant


def jax_package_dir() -> str:
    """The installed jax package directory (found without importing jax)."""
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("jax is not installed")
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def pristine_text(m: Mutant, jax_dir: str | None = None) -> str:
    with open(os.path.join(jax_dir or jax_package_dir(), m.file)) as fh:
        return fh.read()


def check_anchor(m: Mutant, text: str) -> str | None:
    """None if the mutant applies to `text`: its anchor occurs exactly once
    and the replacement changes exactly one line of it; else why not."""
    n = text.count(m.anchor)
    if n != 1:
        return f"anchor occurs {n} times in {m.file} (must be exactly once)"
    old, new = m.anchor.split("\n"), m.replacement.split("\n")
    if len(old) != len(new):
        return "replacement changes the number of lines"
    changed = sum(a != b for a, b in zip(old, new))
    if changed != 1:
        return f"replacement changes {changed} lines (must be exactly one)"
    return None


def mutate(m: Mutant, text: str) -> str:
    problem = check_anchor(m, text)
    if problem:
        raise ValueError(f"mutant {m.name} is invalid: {problem}")
    return text.replace(m.anchor, m.replacement, 1)


def diff(m: Mutant, jax_dir: str | None = None) -> str:
    """The one-line unified diff the mutant makes."""
    text = pristine_text(m, jax_dir)
    lines = difflib.unified_diff(text.splitlines(), mutate(m, text).splitlines(),
                                 f"a/jax/{m.file}", f"b/jax/{m.file}", n=0, lineterm="")
    return "\n".join(lines)


class Overlay:
    """A temporary copy of jax with (at most) one mutant applied."""

    def __init__(self, mutant: Mutant | None, base: str | None = None):
        self.mutant = mutant
        self.jax_dir = jax_package_dir()
        self.root = tempfile.mkdtemp(prefix=f"mutant-{mutant.name if mutant else 'pristine'}-", dir=base)
        self.package = os.path.join(self.root, "jax")

    def __enter__(self) -> "Overlay":
        shutil.copytree(self.jax_dir, self.package, symlinks=True)
        if self.mutant is not None:
            path = os.path.join(self.package, self.mutant.file)
            with open(path) as fh:
                text = mutate(self.mutant, fh.read())
            with open(path, "w") as fh:
                fh.write(text)
            stem = os.path.splitext(os.path.basename(path))[0]
            for pyc in glob.glob(os.path.join(os.path.dirname(path), "__pycache__", f"{stem}.*.pyc")):
                os.remove(pyc)
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def env(self, base_env=None, extra_paths=()) -> dict:
        env = dict(os.environ if base_env is None else base_env)
        paths = [self.root, *extra_paths]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.setdefault("JAX_PLATFORMS", "cpu")
        return env

    def verify(self, python: str = sys.executable, env=None) -> str:
        """Where `import jax` resolves under this overlay; raises unless the
        overlay's copy."""
        out = subprocess.run([python, "-c", "import jax; print(jax.__file__)"], env=env or self.env(),
                             capture_output=True, text=True, timeout=300)
        where = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        if out.returncode != 0 or not os.path.realpath(where).startswith(os.path.realpath(self.package)):
            raise RuntimeError(f"jax does not import from the overlay {self.package}: rc={out.returncode} "
                               f"jax.__file__={where!r}\n{out.stderr[-2000:]}")
        return where
