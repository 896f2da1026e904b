"""Record what JAX saves for the backward pass of each *transformed*
checkpointed program in tests/jax_composed_programs.py (vmap of a
checkpointed function, grad of one: the residuals of differentiating the
gradient, and vmap of grad).

    python tests/record_jax_composed_residuals.py   # rewrites tests/recordings/residuals_composed.json

The file has the format of tests/recordings/residuals_remat.json (see
tests/record_jax_remat_residuals.py), for the installed `jax.__version__`:

* "residuals": program name -> [[type, source], ...] in JAX's order, from
  `jax._src.ad_checkpoint.saved_residuals(transformed_fn, *args)`;
* "errors": program name -> "ExceptionType: message" where JAX raised;
* "jaxprs": program name -> the equations of
  `jax.make_jaxpr(transformed_fn)` (checkpoint and jit bodies nested);

and one more key:

* "jaxprs_dce": the same jaxpr after `pe.dce_jaxpr` (every output used).
  `make_jaxpr(jax.grad(f))` keeps the forward equations that computed f's
  value, which grad drops; `spec.grad` ends with a DCE, so the spec's
  gradient program is compared with this one. For the vmap programs it
  equals "jaxprs".

tests/test_recorded_composed_residuals.py compares the spec against this
file without importing jax.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_composed.json")

if HERE not in sys.path:   # when imported by the tests; a script run has it already
    sys.path.insert(0, HERE)

from record_jax_residuals import strip_source  # noqa: E402
from record_jax_remat_residuals import dumps, jaxpr_signature, type_str  # noqa: E402


def record() -> dict:
    """Run JAX on every program; returns the recording (a JSON-able dict)."""
    import jax
    import jax.numpy as jnp
    from jax._src.ad_checkpoint import saved_residuals
    from jax._src.interpreters import partial_eval as pe

    from jax_composed_programs import PROGRAMS

    residuals, errors, jaxprs, jaxprs_dce = {}, {}, {}, {}
    for p in PROGRAMS:
        args = [jnp.asarray(a) for a in p.example_inputs()]
        fn = p.jax_fn()
        jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
        jaxprs[p.name] = jaxpr_signature(jaxpr)
        jaxprs_dce[p.name] = jaxpr_signature(pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))[0])
        try:
            res = saved_residuals(fn, *args)
        except Exception as e:       # recorded, not hidden: the test reports it
            errors[p.name] = f"{type(e).__name__}: {e}"
            continue
        residuals[p.name] = [[type_str(aval), strip_source(src)] for aval, src in res]
    return {
        "jax_version": jax.__version__,
        "generated_by": "python tests/record_jax_composed_residuals.py",
        "residuals": residuals,
        "errors": errors,
        "jaxprs": jaxprs,
        "jaxprs_dce": jaxprs_dce,
    }


def main():
    rec = record()
    os.makedirs(os.path.dirname(RECORDING), exist_ok=True)
    with open(RECORDING, "w") as f:
        f.write(dumps(rec))
    print(f"wrote {os.path.relpath(RECORDING, ROOT)}: {len(rec['residuals'])} programs, "
          f"{len(rec['errors'])} errors, jax {rec['jax_version']}")


if __name__ == "__main__":
    main()
