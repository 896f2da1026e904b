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


def test_predicates_walk_a_custom_jvp_that_calls_itself_in_its_rule():
    """A custom_jvp defined with defjvps (jax.nn.relu is one) computes its
    primal output by calling itself, so each traced JVP rule holds the call
    again, imported with a new Rule: the name walk (spec.remat.names_in) of
    the batching divergence's predicate recursed without end, and
    divergences.find raised RuntimeError(RecursionError) instead of naming
    the divergence. Here a different function of that shape, with a name
    that remat3's vmap cannot batch."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    import oracle
    from spec import policies as sp

    @jax.custom_jvp
    def soft_clip(x):
        return 2.0 * jnp.tanh(x / 2.0)
    soft_clip.defjvps(lambda g, ans, x: g * (1.0 - ans * ans / 4.0))

    def layer(x, w):
        z = checkpoint_name(x @ w, "z")
        return jnp.sum(soft_clip(z) * jnp.cos(z))

    report = oracle.check(layer, sp.save_only_these_names("z"), jax.ShapeDtypeStruct((4,), np.float32),
                          jax.ShapeDtypeStruct((4, 2), np.float32), implementations=("remat3",),
                          properties=("residuals", "vmap"))
    assert report.status("residuals", "remat3") == "ok"
    assert ("remat3-checkpoint-name-has-no-batching-rule", "vmap", "remat3") in report.known_divergences


def test_names_in_ends_on_rules_that_hold_their_own_call():
    """The walk itself: the imported program of jax.nn.relu (its JVP rule
    holds relu's custom_jvp_call again) has no names and the walk ends; a
    name bound in a rule is still found."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    from oracle.from_jax import trace_jax
    from spec.remat import names_in

    assert names_in(trace_jax(lambda x: jax.nn.relu(x) * 2.0, jnp.ones(3))) == set()

    @jax.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvps(lambda g, ans, x: g * checkpoint_name(jnp.cos(x), "slope"))
    assert names_in(trace_jax(lambda x: f(f(x)), jnp.ones(3))) == {"slope"}


def test_remat3_float0_residual_of_a_checkpoint_in_a_cond_is_named():
    """A checkpoint with an integer output in a cond branch: remat3 saves
    a float0 residual; the check names the divergence (residuals and vjp
    leaves) under remat3, and remat2 agrees with the spec."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    import oracle

    def f(x, i):
        return lax.cond(x.sum() > 0, lambda x, i: jax.checkpoint(lambda x, i: (jnp.sin(x), i + 1))(x, i),
                        lambda x, i: (x, i), x, i)[1]
    report = oracle.check(f, oracle.AS_IS, np.full((2, 3), 0.7, np.float32), np.ones((2, 3), np.int32))
    name = "remat3-cond-saves-float0-tangents-of-integer-outputs"
    assert report.status("residuals", "remat3") == "known divergence"
    assert report.status("vjp_leaves", "remat3") == "known divergence"
    assert any(n == name for n, _, _ in report.known_divergences)
    assert report.status("residuals", "remat2") == "ok"


def test_remat3_residuals_for_an_unused_checkpoint_output_are_named():
    """A checkpoint returning its input and sin of it, only the input used
    (directly and nested in a checkpoint): remat3 saves the input for the
    unused output's backward pass, which XLA then removes (no barrier);
    the check names both divergences, and remat2 agrees with the spec."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle
    inner = lambda x: jax.checkpoint(lambda r: (jnp.sin(r), r))(x)   # built when called (per implementation)
    x = np.full((2, 3), 0.7, np.float32)
    for f in (lambda a, b: inner(a * b)[1], lambda a, b: jax.checkpoint(lambda j: inner(j)[1])(a * b)):
        report = oracle.check(f, oracle.AS_IS, x, x)
        assert report.status("residuals", "remat3") == "known divergence"
        assert report.status("prevent_cse", "remat3") == "known divergence"
        assert {n for n, _, _ in report.known_divergences} == {
            "remat3-saves-for-unused-checkpoint-outputs", "remat3-barrier-iff-backward-reads-checkpoint-inputs"}
        assert all(report.status(p, "remat2") == "ok" for p in ("residuals", "prevent_cse", "vjp"))
