"""Every known divergence's repro runs on the installed JAX and shows it:
the snippet (with oracle.divergences.REPRO_PREAMBLE) is run in a fresh
process; where it ends with `# <expected>`, that text is in its output; a
repro of an error must raise it."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("jax")   # only the import may skip

from oracle.divergences import DIVERGENCES, REPRO_PREAMBLE  # noqa: E402

RAISES = {"remat3-checkpoint-name-has-no-batching-rule": "NotImplementedError",
          "remat3-grad-raises-for-an-unused-scanned-checkpoint-input": "Expected cotangent type"}


@pytest.mark.parametrize("d", DIVERGENCES, ids=lambda d: d.name)
def test_repro_shows_the_divergence(d):
    proc = subprocess.run([sys.executable, "-c", REPRO_PREAMBLE + d.repro], capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    if d.name in RAISES:
        assert proc.returncode != 0 and RAISES[d.name] in out, out
        return
    assert proc.returncode == 0, out
    m = re.search(r"#\s*(.+)$", d.repro.strip().splitlines()[-1])
    if m:
        for part in re.split(r",\s*", m.group(1).strip()):
            part = part.strip()
            if part in ("only the input",):
                assert len([l for l in proc.stdout.splitlines() if l.startswith("f32")]) == 1, out
            else:
                assert part in out, f"{part!r} not in:\n{out}"
