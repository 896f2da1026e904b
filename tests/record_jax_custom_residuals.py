"""Record what JAX saves for the backward pass of each program with custom
derivatives in tests/jax_custom_programs.py.

    python tests/record_jax_custom_residuals.py   # rewrites tests/recordings/residuals_custom.json

The file holds, for the installed `jax.__version__` (remat2, JAX's default):

* "residuals": program name -> [[type, source], ...] in JAX's order, from
  `jax._src.ad_checkpoint.saved_residuals` (sources without JAX's
  " from <file>:<line> (<fn>)" suffix);
* "errors": program name -> "ExceptionType: message" where JAX raised;
* "jaxprs": program name -> the equations of `jax.make_jaxpr(fn)`, as
  tests/record_jax_remat_residuals.py writes them, and a custom call as
  "custom_jvp_call<name>{...}" / "custom_vjp_call<name>{...}" with its
  primal body (the rules are not in a jaxpr: they are traced lazily).

tests/test_recorded_custom_residuals.py compares the spec against this
file without importing jax.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_custom.json")

if HERE not in sys.path:
    sys.path.insert(0, HERE)

from record_jax_residuals import strip_source  # noqa: E402
from record_jax_remat_residuals import type_str  # noqa: E402


def jaxpr_signature(jaxpr) -> list[str]:
    """One string per equation; jit, checkpoint and custom-call bodies nested."""
    from jax._src import core
    consts = set(jaxpr.constvars)

    def atom(a):
        if isinstance(a, core.Literal):
            return "lit:" + type_str(a.aval)
        if a in consts:
            return "const:" + type_str(a.aval)
        return type_str(a.aval)

    def body_of(j):
        return "; ".join(jaxpr_signature(j.jaxpr if hasattr(j, "jaxpr") else j))

    out = []
    for e in jaxpr.eqns:
        name = e.primitive.name
        if name in ("jit", "pjit"):
            name = f"jit<{e.params['name']}>{{{body_of(e.params['jaxpr'])}}}"
        elif name in ("remat2", "checkpoint"):
            name = f"remat2{{{body_of(e.params['jaxpr'])}}}"
        elif name in ("custom_jvp_call", "custom_vjp_call"):
            cj = e.params["call_jaxpr"]
            name = f"{name}<{cj.jaxpr.debug_info.func_name}>{{{body_of(cj)}}}"
        elif name == "name":
            name = f"name<{e.params['name']}>"
        ins = " ".join(atom(a) for a in e.invars)
        outs = " ".join(type_str(v.aval) for v in e.outvars)
        out.append(f"{name} {ins} -> {outs}")
    return out


def record() -> dict:
    import jax
    import jax.numpy as jnp
    from jax._src.ad_checkpoint import saved_residuals

    from jax_custom_programs import PROGRAMS

    residuals, errors, jaxprs = {}, {}, {}
    for p in PROGRAMS:
        args = [jnp.asarray(a) for a in p.example_inputs()]
        jaxprs[p.name] = jaxpr_signature(jax.make_jaxpr(p.jax_fn)(*args).jaxpr)
        try:
            res = saved_residuals(p.jax_fn, *args)
        except Exception as e:       # recorded, not hidden: the test reports it
            errors[p.name] = f"{type(e).__name__}: {e}"
            continue
        residuals[p.name] = [[type_str(aval), strip_source(src)] for aval, src in res]
    return {
        "jax_version": jax.__version__,
        "generated_by": "python tests/record_jax_custom_residuals.py",
        "residuals": residuals,
        "errors": errors,
        "jaxprs": jaxprs,
    }


def dumps(recording: dict) -> str:
    return json.dumps(recording, indent=1) + "\n"


def main():
    rec = record()
    os.makedirs(os.path.dirname(RECORDING), exist_ok=True)
    with open(RECORDING, "w") as f:
        f.write(dumps(rec))
    print(f"wrote {os.path.relpath(RECORDING, ROOT)}: {len(rec['residuals'])} programs, "
          f"{len(rec['errors'])} errors, jax {rec['jax_version']}")


if __name__ == "__main__":
    main()
