"""The pytest plugin: a Mismatch prints as its report and, with
--oracle-repro-dir, leaves a standalone reproducer that fails the same way."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")   # only the import may skip: the plugin needs JAX

PLANTED = textwrap.dedent('''
    import jax, jax.numpy as jnp, numpy as np
    from jax import lax
    from jax._src.interpreters import ad

    def test_planted_wrong_sin_jvp(oracle_check):
        good = ad.primitive_jvps[lax.sin_p]
        # a planted bug: sin's JVP doubled
        ad.primitive_jvps[lax.sin_p] = lambda p, t, **params: (lax.sin(p[0]), 2 * t[0] * lax.cos(p[0]))
        jax.clear_caches()
        try:
            oracle_check(lambda x: jnp.sum(jnp.sin(x)), None,
                         jax.ShapeDtypeStruct((3,), jnp.float32),
                         implementations=("remat2",), properties=("jvp",))
        finally:
            ad.primitive_jvps[lax.sin_p] = good
            jax.clear_caches()
''')


def test_mismatch_prints_report_and_saves_reproducer(tmp_path):
    test_file = tmp_path / "test_planted.py"
    test_file.write_text(PLANTED)
    repro_dir = tmp_path / "repros"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file),
                           f"--oracle-repro-dir={repro_dir}"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "oracle.Mismatch in" in out and "jvp differs under remat2" in out, out
    assert "reproducer written to" in out, out
    files = os.listdir(repro_dir)
    assert len(files) == 1 and files[0].startswith("repro_jvp_remat2_"), files
    text = (repro_dir / files[0]).read_text()
    assert "import jax" in text and "jax.checkpoint(" in text
    # the reproducer is standalone (jax + numpy only): on pristine JAX it
    # passes, and with the same planted bug it fails naming the property
    env = {**os.environ, "PYTHONPATH": ""}
    clean = subprocess.run([sys.executable, str(repro_dir / files[0])], capture_output=True, text=True,
                           cwd=tmp_path, timeout=300, env=env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    planted = tmp_path / "planted_run.py"
    planted.write_text(
        "import runpy, jax\nfrom jax import lax\nfrom jax._src.interpreters import ad\n"
        "ad.primitive_jvps[lax.sin_p] = lambda p, t, **k: (lax.sin(p[0]), 2 * t[0] * lax.cos(p[0]))\n"
        f"runpy.run_path({str(repro_dir / files[0])!r}, run_name='__main__')\n")
    bad = subprocess.run([sys.executable, str(planted)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300, env=env)
    assert bad.returncode != 0 and "jvp differs from the spec" in bad.stderr, bad.stdout + bad.stderr
