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
          "remat3-pulls-cotangents-into-undifferentiated-checkpoint-inputs":
              "VJP not implemented for select_and_gather",
          "remat3-linearizes-checkpoint-bodies-per-equation": "Linearization failed to produce known values",
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


def _bool_output_scan(route):
    """The fuzzer's finding, minimized: a checkpoint in a scan body with a float output
    nobody reads and a bool output that `route` passes on to the scan's stacked outputs."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f(x, b):
        ck = jax.checkpoint(lambda x, b: (jnp.sin(x), b & b))
        def body(c, _):
            _, bb = ck(c, b)
            return jnp.sin(c), (2.0 * c, route(bb))
        return lax.scan(body, x, None, length=1)[1]
    return f


@pytest.mark.parametrize("route, triggers", [
    (lambda bb: bb, True),                                       # passed on: the float0 tangent is live
    (lambda bb: __import__("jax").jit(lambda v: v)(bb), True),   # through a jit: still passed on
    (lambda bb: ~bb, False),                                     # any primitive makes it a symbolic zero
    (lambda bb: bb.reshape(2, 1), False),
], ids=["forwarded", "through-jit", "not", "reshape"])
def test_non_float_checkpoint_output_divergence_is_exactly_the_forwarded_case(route, triggers):
    """remat3 (jax 0.10.2) saves the scan carry the checkpoint reads (its float output's
    tangent would need it) exactly when the bool output reaches the function's outputs
    unchanged; remat2 and the spec save only cos(c). JAX's recorded answer: an extra
    'f32[1] output of scan' (finding_scan_remat3, minimized). Where the bool passes
    through a primitive, remat3 agrees with the spec, and the predicate finds nothing."""
    import numpy as np

    import oracle
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    f = _bool_output_scan(route)
    args = (np.float32(0.5), np.array([True, False]))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2", "remat3"),
                          properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    name = "remat3-non-float-checkpoint-output-keeps-its-tangents-live"
    assert ((name, "residuals", "remat3") in report.known_divergences) == triggers
    assert report.status("residuals", "remat3") == ("known divergence" if triggers else "ok")
    prog = trace_jax(f, *args)
    _, exposed, _ = dv._float0_tangent_outputs(prog, [True] * len(prog.outputs))
    assert (exposed > 0) == triggers


def test_non_float_checkpoint_output_divergence_needs_remat3_and_its_exact_list():
    """The predicate holds for remat3's list only: not for remat2, and not for a list that
    differs from the modelled one (here the spec's own, with one residual more)."""
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    prog = trace_jax(_bool_output_scan(lambda bb: bb), np.float32(0.5), np.array([True, False]))
    remat3 = [("f32[1]", "output of scan"), ("f32[1]", "output of scan")]   # jax 0.10.2, measured
    ctx = lambda impl, res: dv.Context(impl, "residuals", None, prog, jax_residuals=res)
    assert dv._remat3_float0_tangents(ctx("remat3", remat3))
    assert not dv._remat3_float0_tangents(ctx("remat2", remat3))
    assert not dv._remat3_float0_tangents(ctx("remat3", remat3 + [("f32[1]", "output of scan")]))


def test_literal_divergence_composes_with_remat3s_policy_view():
    """Found by the fuzzer (seed 515): a spec program run by JAX as written, a
    literal outside the checkpoint (b * 2.0) that JAX's remat3 run does not save, and an
    everything_saveable checkpoint that remat3 reads as full remat. JAX's list (recorded,
    jax 0.10.2): only the argument, where the spec saves the literal and cos(a); the
    remat3 model saves the literal and the argument. Each divergence alone explains part
    of it; the literal one now compares with the remat3 model's list too."""
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

    from fuzz import properties
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    def g(a, b):
        ck = jax.checkpoint(jnp.sin, policy=jax.checkpoint_policies.everything_saveable)
        return ck(a), b * 2.0
    prog = trace_jax(g, np.float32(0.5), np.ones((2, 3), np.float32))
    report = properties.oracle_agrees(prog, implementations=("remat3",), properties=("residuals",))
    assert report.known_divergences == [
        ("literal-residuals-depend-on-the-constant-s-python-type", "residuals", "remat3")]
    recorded = [("f32[]", "from the argument a")]   # args[0], normalised to the program's name
    spec = [("f32[]", "from a literal"), ("f32[]", "output of cos")]
    ctx = lambda impl, res: dv.Context(impl, "residuals", None, prog, jax_residuals=res, spec_residuals=spec)
    assert dv._constant_type_literals(ctx("remat3", recorded))
    assert not dv._constant_type_literals(ctx("remat2", recorded))      # remat2 has no such view
    assert not dv._constant_type_literals(ctx("remat3", recorded + [("f32[]", "output of cos")]))


@pytest.mark.parametrize("window_dilation", [(1, 2), (1, 1)])
def test_remat3_cotangent_into_an_undifferentiated_input_of_a_dilated_pool(window_dilation):
    """Found by the fuzzer (seed 515), minimized: a checkpoint whose body never
    differentiates its input `pooled`, a dilated max-pool upstream. remat3 (jax 0.10.2)
    pulls a zero cotangent into `pooled` and raises JAX's NotImplementedError for the
    dilated pool's VJP (seen by running it); remat2 and the spec compute the gradient.
    Without dilation JAX implements the VJP: every property agrees, nothing is matched."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    import oracle
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    def f(x, e):
        pooled = lax.reduce_window(e, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID",
                                   window_dilation=window_dilation)
        return jax.checkpoint(lambda x, unused: jnp.sum(x * 2.0))(x, pooled)
    args = (np.ones(3, np.float32), np.arange(20, dtype=np.float32).reshape(4, 5))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2", "remat3"),
                          properties=("vjp",))
    name = "remat3-pulls-cotangents-into-undifferentiated-checkpoint-inputs"
    dilated = window_dilation != (1, 1)
    assert ((name, "vjp", "remat3") in report.known_divergences) == dilated
    assert report.status("vjp", "remat2") == "ok"
    assert report.status("vjp", "remat3") == ("known divergence" if dilated else "ok")
    if dilated:
        prog = trace_jax(f, *args)
        error = NotImplementedError("VJP not implemented for select_and_gather (MaxPool) with window "
                                    "dilation, got window_dilation=(1, 2).")
        ctx = lambda impl: dv.Context(impl, "vjp", None, prog, error=error)
        assert dv._remat3_reverse_raises_as_modelled(ctx("remat3"))
        assert not dv._remat3_reverse_raises_as_modelled(ctx("remat2"))
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
