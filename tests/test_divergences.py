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
          "remat3-grad-raises-for-an-unused-scanned-checkpoint-input": "Expected cotangent type",
          "optimization-barrier-not-differentiable": "Differentiation rule for 'optimization_barrier'",
          "optimization-barrier-not-batchable": "Batching rule for 'optimization_barrier'"}


def _shown(d, proc) -> bool:
    """The repro's output shows the divergence: it raises the error, or has
    every part of the `# <expected>` comment of its last line."""
    out = proc.stdout + proc.stderr
    if d.name in RAISES:
        return proc.returncode != 0 and RAISES[d.name] in out
    assert proc.returncode == 0, out
    m = re.search(r"#\s*(.+)$", d.repro.strip().splitlines()[-1])
    if not m:
        return True
    for part in re.split(r",\s*", m.group(1).strip()):
        part = part.strip()
        if part in ("only the input",):
            if len([line for line in proc.stdout.splitlines() if line.startswith("f32")]) != 1:
                return False
        elif part not in out:
            return False
    return True


@pytest.mark.parametrize("d", DIVERGENCES, ids=lambda d: d.name)
def test_repro_shows_the_divergence_exactly_on_its_releases(d):
    """Where the divergence is active (a release in its range, its flag on)
    its repro shows it; elsewhere it does not (a repro that needs
    jax_remat3 is not run where the flag does not exist)."""
    import jax
    if "jax_remat3" in d.repro and not hasattr(jax.config, "jax_remat3"):
        pytest.skip(f"the repro needs jax_remat3, which jax {jax.__version__} does not have")
    proc = subprocess.run([sys.executable, "-c", REPRO_PREAMBLE + d.repro], capture_output=True,
                          text=True, timeout=300)
    shown = _shown(d, proc)
    where = f"jax {jax.__version__}, {d.name} declared for releases {d.releases} (flag {d.flag})"
    assert shown == d.active(), f"{where}: repro shows it: {shown}\n{proc.stdout + proc.stderr}"


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
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))

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
