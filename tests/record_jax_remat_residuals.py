"""Record what JAX saves for the backward pass of each checkpointed program
in tests/jax_remat_programs.py (jax.checkpoint = remat2).

    python tests/record_jax_remat_residuals.py   # rewrites tests/recordings/residuals_remat.json

The file holds, for the installed `jax.__version__`:

* "residuals": program name -> [[type, source], ...] in JAX's order, from
  `jax._src.ad_checkpoint.saved_residuals`. Types are written as the spec
  writes them ("f32[3,4]", "f32[]", and "f32<host>[3]" for a value JAX
  keeps in host memory, as JAX prints it); sources lose JAX's
  " from <file>:<line> (<fn>)" suffix (for device_put JAX prints an empty
  " from ").
* "errors": program name -> "ExceptionType: message" where JAX raised
  instead (then "residuals" has no entry for it). Empty with jax 0.10.2.
* "jaxprs": program name -> the equations of `jax.make_jaxpr(fn)`, one
  string each ("prim in_types -> out_types"; literals "lit:T", constants
  "const:T"; a jit as "jit<name>{...}", a checkpoint as "remat2{...}", a
  checkpoint_name as "name<h>"), so the test can check that the spec's
  version of a program is the same program.

tests/test_recorded_remat_residuals.py compares the spec against this file
without importing jax.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_remat.json")

if HERE not in sys.path:   # when imported by the tests; a script run has it already
    sys.path.insert(0, HERE)

from record_jax_residuals import _SHORT, strip_source  # noqa: E402


def type_str(aval) -> str:
    """f32[3,4], f32[] and f32<host>[3] (memory space as JAX prints it)."""
    dt = str(aval.dtype)
    space = ""
    ms = getattr(aval, "memory_space", None)
    if ms is not None and "host" in str(ms).lower():
        space = "<host>"
    return f"{_SHORT.get(dt, dt)}{space}[{','.join(str(int(d)) for d in aval.shape)}]"


def jaxpr_signature(jaxpr) -> list[str]:
    """One string per equation; jit, checkpoint, scan, cond, while and
    custom-call bodies nested (the format every recorder uses)."""
    from jax._src import core
    consts = set(jaxpr.constvars)

    def atom(a):
        if isinstance(a, core.Literal):
            return "lit:" + type_str(a.aval)
        if a in consts:
            return "const:" + type_str(a.aval)
        return type_str(a.aval)

    def body_of(j):
        return jaxpr_signature(j.jaxpr if hasattr(j, "jaxpr") else j)

    out = []
    for e in jaxpr.eqns:
        name = e.primitive.name
        if name in ("jit", "pjit"):
            name = f"jit<{e.params['name']}>{{{'; '.join(body_of(e.params['jaxpr']))}}}"
        elif name in ("remat2", "checkpoint"):
            name = f"remat2{{{'; '.join(body_of(e.params['jaxpr']))}}}"
        elif name == "name":
            name = f"name<{e.params['name']}>"
        elif name == "scan":
            p = e.params
            name = (f"scan<length={p['length']},reverse={p['reverse']},consts={p['num_consts']},"
                    f"carry={p['num_carry']}>{{{'; '.join(body_of(p['jaxpr']))}}}")
        elif name == "closed_call":
            name = f"closed_call{{{'; '.join(body_of(e.params['call_jaxpr']))}}}"
        elif name == "cond":
            name = "cond{" + " | ".join("; ".join(body_of(b)) for b in e.params["branches"]) + "}"
        elif name == "while":
            name = (f"while<{e.params['cond_nconsts']},{e.params['body_nconsts']}>"
                    f"{{{'; '.join(body_of(e.params['cond_jaxpr']))} | {'; '.join(body_of(e.params['body_jaxpr']))}}}")
        elif name in ("custom_jvp_call", "custom_vjp_call"):
            cj = e.params["call_jaxpr"]
            name = f"{name}<{cj.jaxpr.debug_info.func_name}>{{{'; '.join(body_of(cj))}}}"
        ins = " ".join(atom(a) for a in e.invars)
        outs = " ".join(type_str(v.aval) for v in e.outvars)
        out.append(f"{name} {ins} -> {outs}")
    return out


def record(programs=None, generated_by="python tests/record_jax_remat_residuals.py") -> dict:
    """Run JAX on every program (default: tests/jax_remat_programs.py);
    returns the recording (a JSON-able dict)."""
    import jax
    import jax.numpy as jnp
    from jax._src.ad_checkpoint import saved_residuals

    if programs is None:
        from jax_remat_programs import PROGRAMS as programs
    PROGRAMS = programs

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
        "generated_by": generated_by,
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
