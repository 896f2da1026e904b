"""Record what JAX saves for the backward pass of each control-flow program
in tests/jax_control_programs.py (lax.cond, lax.while_loop).

    python tests/record_jax_control_residuals.py   # rewrites tests/recordings/residuals_cond.json

The file holds, for the installed `jax.__version__` (format of
tests/record_jax_remat_residuals.py):

* "residuals": program name -> [[type, source], ...] in JAX's order, from
  `jax._src.ad_checkpoint.saved_residuals` (which linearizes: for a while
  loop, too, since jax 0.10.2 linearizes it by JVP + partial eval);
* "errors": program name -> "ExceptionType: message" where JAX raised;
* "jaxprs": program name -> the equations of `jax.make_jaxpr(fn)`, with
  bodies nested: a cond as "cond{branch 0 | branch 1}", a while as
  "while{cond | body}";
* "grad_errors": program name -> the error `jax.grad` raises (while loops).

tests/test_recorded_cond_residuals.py compares the spec against this file
without importing jax.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_cond.json")

if HERE not in sys.path:
    sys.path.insert(0, HERE)

import record_jax_remat_residuals as _remat  # noqa: E402
from record_jax_remat_residuals import dumps  # noqa: E402


def record() -> dict:
    """The remat recorder's record of these programs, plus each while
    program's jax.grad error."""
    import jax
    import jax.numpy as jnp

    from jax_control_programs import PROGRAMS

    rec = _remat.record(PROGRAMS, generated_by="python tests/record_jax_control_residuals.py")
    grad_errors = {}
    for p in PROGRAMS:
        if p.name.startswith("while") and p.name in rec["residuals"]:
            try:
                jax.grad(p.jax_fn)(*[jnp.asarray(a) for a in p.example_inputs()])
                grad_errors[p.name] = None
            except Exception as e:
                grad_errors[p.name] = f"{type(e).__name__}: {e}"
    rec["grad_errors"] = grad_errors
    return rec


def main():
    rec = record()
    os.makedirs(os.path.dirname(RECORDING), exist_ok=True)
    with open(RECORDING, "w") as f:
        f.write(dumps(rec))
    print(f"wrote {os.path.relpath(RECORDING, ROOT)}: {len(rec['residuals'])} programs, "
          f"{len(rec['errors'])} errors, jax {rec['jax_version']}")


if __name__ == "__main__":
    main()
