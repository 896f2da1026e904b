"""Record what JAX saves for the backward pass of each program in
tests/jax_programs.py (no checkpoint: plain jax.vjp residuals).

    python tests/record_jax_residuals.py     # rewrites tests/recordings/residuals_core.json

The file holds, for the installed `jax.__version__`:

* "residuals": program name -> [[type, source], ...] in JAX's order, from
  `jax._src.ad_checkpoint.saved_residuals` (the function behind the public
  `jax.ad_checkpoint.print_saved_residuals`; jax 0.10.2 exports only the
  printer). Types are written as the spec writes them ("f32[3,4]", "f32[]");
  sources lose JAX's " from <file>:<line> (<fn>)" suffix.
* "jaxprs": program name -> the equations of `jax.make_jaxpr(fn)`, one
  string each ("prim in_types -> out_types", literals "lit:T", constants
  "const:T", a jit as "jit<name>{...}"), so the test can check that the
  spec's version of a program is the same program.

tests/test_recorded_residuals.py compares the spec against this file
without importing jax.
"""
from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_core.json")

if HERE not in sys.path:   # when imported by the tests; a script run has it already
    sys.path.insert(0, HERE)

_SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
          "int32": "i32", "bool": "bool"}

# "output of sin from /path/file.py:12:3 (fn)" -> "output of sin"
_SOURCE_RE = re.compile(r"^(output of jitted function '[^']*'|output of \S+|named '[^']*') from .*$", re.S)


def type_str(aval) -> str:
    """The spec's spelling of an aval's type: f32[3,4], f32[] (no weak-type mark)."""
    dt = str(aval.dtype)
    return f"{_SHORT.get(dt, dt)}[{','.join(str(int(d)) for d in aval.shape)}]"


def strip_source(src: str) -> str:
    m = _SOURCE_RE.match(src)
    return m.group(1) if m else src


def jaxpr_signature(jaxpr) -> list[str]:
    """One string per equation: primitive, input types (literals and
    constants marked), output types; jit bodies nested."""
    consts = set(jaxpr.constvars)
    from jax._src import core

    def atom(a):
        if isinstance(a, core.Literal):
            return "lit:" + type_str(a.aval)
        if a in consts:
            return "const:" + type_str(a.aval)
        return type_str(a.aval)

    out = []
    for e in jaxpr.eqns:
        name = e.primitive.name
        if name in ("jit", "pjit"):
            body = e.params["jaxpr"]
            inner = jaxpr_signature(body.jaxpr if hasattr(body, "jaxpr") else body)
            name = f"jit<{e.params['name']}>{{{'; '.join(inner)}}}"
        ins = " ".join(atom(a) for a in e.invars)
        outs = " ".join(type_str(v.aval) for v in e.outvars)
        out.append(f"{name} {ins} -> {outs}")
    return out


def record() -> dict:
    """Run JAX on every program; returns the recording (a JSON-able dict)."""
    import jax
    import jax.numpy as jnp
    from jax._src.ad_checkpoint import saved_residuals

    from jax_programs import PROGRAMS

    residuals, jaxprs = {}, {}
    for p in PROGRAMS:
        args = [jnp.asarray(a) for a in p.example_inputs()]
        closed = jax.make_jaxpr(p.jax_fn)(*args)
        # constants captured by the program are constvars of the jaxpr
        jaxprs[p.name] = jaxpr_signature(closed.jaxpr)
        residuals[p.name] = [[type_str(aval), strip_source(src)]
                             for aval, src in saved_residuals(p.jax_fn, *args)]
    return {
        "jax_version": jax.__version__,
        "generated_by": "python tests/record_jax_residuals.py",
        "residuals": residuals,
        "jaxprs": jaxprs,
    }


def dumps(recording: dict) -> str:
    """JSON with one residual (or one equation) per line."""
    d = json.dumps
    lines = ["{"]
    for key in ("jax_version", "generated_by"):
        lines.append(f" {d(key)}: {d(recording[key])},")
    for i, key in enumerate(("residuals", "jaxprs")):
        lines.append(f" {d(key)}: {{")
        progs = list(recording[key].items())
        for j, (name, items) in enumerate(progs):
            body = ",\n".join(f"   {d(x)}" for x in items)
            sep = "," if j < len(progs) - 1 else ""
            lines.append(f"  {d(name)}: [\n{body}\n  ]{sep}" if items else f"  {d(name)}: []{sep}")
        lines.append(" }" + ("," if i == 0 else ""))
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == recording
    return text


def main():
    rec = record()
    os.makedirs(os.path.dirname(RECORDING), exist_ok=True)
    with open(RECORDING, "w") as f:
        f.write(dumps(rec))
    n = len(rec["residuals"])
    print(f"wrote {os.path.relpath(RECORDING, ROOT)}: {n} programs, jax {rec['jax_version']}")


if __name__ == "__main__":
    main()
