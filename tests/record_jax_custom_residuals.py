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

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_custom.json")

if HERE not in sys.path:
    sys.path.insert(0, HERE)

import record_jax_remat_residuals as _remat  # noqa: E402
from record_jax_remat_residuals import dumps  # noqa: E402


def record() -> dict:
    from jax_custom_programs import PROGRAMS
    return _remat.record(PROGRAMS, generated_by="python tests/record_jax_custom_residuals.py")


def main():
    rec = record()
    os.makedirs(os.path.dirname(RECORDING), exist_ok=True)
    with open(RECORDING, "w") as f:
        f.write(dumps(rec))
    print(f"wrote {os.path.relpath(RECORDING, ROOT)}: {len(rec['residuals'])} programs, "
          f"{len(rec['errors'])} errors, jax {rec['jax_version']}")


if __name__ == "__main__":
    main()
