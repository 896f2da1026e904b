"""Record what JAX saves for the backward pass of each scan program in
tests/jax_scan_programs.py (the same format as
tests/record_jax_remat_residuals.py, which does the work).

    python tests/record_jax_scan_residuals.py   # rewrites tests/recordings/residuals_scan.json
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDING = os.path.join(HERE, "recordings", "residuals_scan.json")

if HERE not in sys.path:
    sys.path.insert(0, HERE)

import record_jax_remat_residuals as _remat  # noqa: E402


def record() -> dict:
    from jax_scan_programs import PROGRAMS
    return _remat.record(PROGRAMS, generated_by="python tests/record_jax_scan_residuals.py")


def main():
    rec = record()
    with open(RECORDING, "w") as f:
        f.write(_remat.dumps(rec))
    print(f"wrote {os.path.relpath(RECORDING, ROOT)}: {len(rec['residuals'])} programs, "
          f"{len(rec['errors'])} errors, jax {rec['jax_version']}")


if __name__ == "__main__":
    main()
