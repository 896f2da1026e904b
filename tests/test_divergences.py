"""Every known divergence's repro runs on the installed JAX and shows it:
the snippet (with oracle.divergences.REPRO_PREAMBLE) is run; where it ends
with `# <expected>`, that text is in its output; a repro of an error must
raise it. The repros run in one process (`_batch`: each in a fresh
namespace, JAX's flags restored and its caches cleared after each: a
fresh interpreter per repro cost a second each), and a repro whose result
there is not the one expected runs again in a fresh process, whose result
is the one asserted."""
import inspect
import importlib.util
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("jax")   # only the import may skip

from oracle.divergences import DIVERGENCES, REPRO_PREAMBLE  # noqa: E402

RAISES = {"remat3-checkpoint-name-has-no-batching-rule": "NotImplementedError",
          "a-policy-asked-about-equinox-s-vprim-raises": "got multiple values for argument 'prim'",
          "remat-transpose-prevent-cse-misses-the-transposed-body-s-constants": "AssertionError",
          "grad-of-grad-of-an-offloaded-residual-gets-a-host-cotangent": "<host>",
          "custom-vjp-of-an-instantiated-zero-tangent-fails": "can't apply forward-mode autodiff (jvp)",
          "custom-vjp-of-an-instantiated-zero-tangent-fails-in-a-checkpoint": "can't apply forward-mode autodiff (jvp)",
          "remat3-grad-raises-for-an-unused-scanned-checkpoint-input": "Expected cotangent type",
          "remat3-grad-raises-for-an-unused-scanned-checkpoint-output": "Expected cotangent type",
          "remat3-transposes-unread-checkpoint-outputs-with-zero-cotangents": "'Zero' object has no attribute",
          "jit-transposes-with-zero-cotangents-before-direct-linearization": "'Zero' object has no attribute",
          "remat3-pulls-cotangents-into-undifferentiated-checkpoint-inputs":
              "VJP not implemented for select_and_gather",
          "remat3-linearizes-checkpoint-bodies-per-equation": "Linearization failed to produce known values",
          "optimization-barrier-not-differentiable": "Differentiation rule for 'optimization_barrier'",
          "remat2-rounds-complex-residuals": "reduce_precision does not accept dtype",
          "remat3-rounds-complex-saved-values": "reduce_precision does not accept dtype",
          "random-gamma-grad-not-differentiable": "Differentiation rule for 'random_gamma_grad'",
          "custom-vjp-under-vmap-of-a-batched-cond-miscounts-its-outputs":
              "safe_zip() argument 2 is longer than argument 1",
          "optimization-barrier-not-batchable": "Batching rule for 'optimization_barrier'",
          "ragged-dot-batched-twice-vmaps-with-numpy-axes": "vmap in_axes must be an int",
          "ragged-dot-transposes-a-symbolic-zero-cotangent": "is not a valid JAX type",
          "remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes": "object has no attribute 'val'",
          "saved-residuals-counts-a-value-saved-beside-its-rounding-once": "assert len(results) == len(jaxpr.outvars)",
          "pad-cannot-be-transposed-for-its-padding-value-alone":
              ("Error interpreting argument to reduce_sum", "Value None with type <class 'NoneType'>",
               "Argument 'None' of type '<class 'NoneType'>' is not a valid JAX type"),   # 0.6.2
          "linearized-function-with-a-zero-output-fails-under-jit":
              ("UnexpectedTracerError", "unhashable type: 'Literal'")}   # 0.4.x, 0.6.x


def _shown(d, proc) -> bool:
    """The repro's output shows the divergence: it raises the error, or has
    every part of the `# <expected>` comment of its last line."""
    out = proc.stdout + proc.stderr
    if d.name in RAISES:
        wanted = RAISES[d.name] if isinstance(RAISES[d.name], tuple) else (RAISES[d.name],)
        return proc.returncode != 0 and any(w in out for w in wanted)
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


def _remat3_expected(report, prop: str, status: str, divergence: str | None = None, shown: bool = False):
    """remat3's result for `prop`: `status` (and `divergence` named exactly when
    `shown`) on a release with remat3; on one without it (before 0.10.2) the check
    reports remat3 not checked, saying why, and names no remat3 divergence."""
    import oracle
    why = oracle.jax_api.unavailable("remat3")
    if why:
        assert report.status(prop, "remat3") == "not checked"
        assert any(r.implementation == "remat3" and why in r.detail for r in report.results)
        assert not [k for k in report.known_divergences if k[2] == "remat3"]
        return
    assert report.status(prop, "remat3") == status
    if divergence is not None:
        assert ((divergence, prop, "remat3") in report.known_divergences) == shown


def _checked(known: list) -> list:
    """The (divergence, property, implementation) entries a check names on the
    installed release: those of implementations it has."""
    import oracle
    return [k for k in known if not oracle.jax_api.unavailable(k[2])]


KEEPS = "linearize-keeps-unused-outputs-of-staged-equations"


def _keeps_unused() -> bool:
    """The installed JAX linearizes with pe.JaxprTrace (before 0.7.0's direct
    linearization), which keeps the residuals of unused outputs (KEEPS)."""
    return next(d for d in DIVERGENCES if d.name == KEEPS).active()


def _remat2_expected(report, prop: str, unused_output: bool):
    """remat2 agrees with the spec; where an output of a checkpoint (jit, scan,
    cond) outside any checkpoint is unused, not on releases that keep it (KEEPS)."""
    if unused_output and _keeps_unused():
        assert report.status(prop, "remat2") == "known divergence"
        assert (KEEPS, prop, "remat2") in report.known_divergences
    else:
        assert report.status(prop, "remat2") == "ok"


BATCH_RUNNER = r'''
import contextlib, io, json, sys, traceback
import jax
repros = json.load(open(sys.argv[1]))
flags = dict(jax.config.values)
results = {}
for name, text in repros.items():
    out, err, rc = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(text, f"<repro {name}>", "exec"), {"__name__": "__main__"})
    except BaseException as e:
        rc = e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1
        err.write(traceback.format_exc())
    for flag, value in flags.items():
        if jax.config.values.get(flag) != value:
            jax.config.update(flag, value)
    jax.clear_caches()
    results[name] = dict(stdout=out.getvalue(), stderr=err.getvalue(), returncode=rc)
json.dump(results, open(sys.argv[2], "w"))
'''


def _runnable(d) -> str | None:
    """Why the repro of `d` is not run here, or None."""
    import jax
    if "jax_remat3" in d.repro and not hasattr(jax.config, "jax_remat3"):
        return f"the repro needs jax_remat3, which jax {jax.__version__} does not have"
    if "equinox" in d.repro and importlib.util.find_spec("equinox") is None:
        return "the repro needs equinox, which this environment does not have"
    return None


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> dict:
    """Every runnable repro, run in one process: name -> its output and
    return code (as a CompletedProcess has them)."""
    folder = tmp_path_factory.mktemp("divergence_repros")
    repros = {d.name: REPRO_PREAMBLE + d.repro for d in DIVERGENCES if _runnable(d) is None}
    (folder / "repros.json").write_text(json.dumps(repros))
    (folder / "runner.py").write_text(BATCH_RUNNER)
    proc = subprocess.run([sys.executable, str(folder / "runner.py"), str(folder / "repros.json"),
                           str(folder / "results.json")], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"the batch runner failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return {name: SimpleNamespace(**r) for name, r in json.loads((folder / "results.json").read_text()).items()}


def _shown_in_batch(d, batch) -> bool | None:
    """Whether the batch run shows `d` (None where its output broke `_shown`'s assertion)."""
    try:
        return _shown(d, batch[d.name])
    except AssertionError:
        return None


@pytest.mark.parametrize("d", DIVERGENCES, ids=lambda d: d.name)
def test_repro_shows_the_divergence_exactly_on_its_releases(d, batch):
    """Where the divergence is active (a release in its range, its flag on)
    its repro shows it; elsewhere it does not (a repro that needs
    jax_remat3 is not run where the flag does not exist)."""
    import jax
    if _runnable(d) is not None:
        pytest.skip(_runnable(d))
    if _shown_in_batch(d, batch) == d.active():
        return
    proc = subprocess.run([sys.executable, "-c", REPRO_PREAMBLE + d.repro], capture_output=True,
                          text=True, timeout=300)
    if not d.active() and "memory_kind to device_put via Shardings is not supported" in proc.stderr:
        pytest.skip(f"the repro offloads, which jax {jax.__version__} cannot on this platform")
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
    _remat3_expected(report, "residuals", "known divergence" if triggers else "ok", name, triggers)
    prog = trace_jax(f, *args)
    _, exposed, _ = dv.float0_tangent_outputs(prog, [True] * len(prog.outputs))
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
    _remat3_expected(report, "residuals", "known divergence",
                     "literal-residuals-depend-on-the-constant-s-python-type", True)
    recorded = [("f32[]", "from the argument a")]   # args[0], normalised to the program's name
    spec = [("f32[]", "from a literal"), ("f32[]", "output of cos")]
    ctx = lambda impl, res: dv.Context(impl, "residuals", None, prog, jax_residuals=res, spec_residuals=spec)
    assert dv._constant_type_literals(ctx("remat3", recorded))
    assert not dv._constant_type_literals(ctx("remat2", recorded))      # remat2 has no such view
    assert not dv._constant_type_literals(ctx("remat3", recorded + [("f32[]", "output of cos")]))


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
    _remat3_expected(report, "residuals", "known divergence", name, True)
    _remat3_expected(report, "vjp_leaves", "known divergence", name, True)
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
    top = lambda a, b: inner(a * b)[1]
    for f in (top, lambda a, b: jax.checkpoint(lambda j: inner(j)[1])(a * b)):
        report = oracle.check(f, oracle.AS_IS, x, x)
        _remat3_expected(report, "residuals", "known divergence", "remat3-saves-for-unused-checkpoint-outputs", True)
        _remat3_expected(report, "prevent_cse", "known divergence",
                         "remat3-barrier-iff-backward-reads-checkpoint-inputs", True)
        if not oracle.jax_api.unavailable("remat3"):
            assert {n for n, _, i in report.known_divergences if i == "remat3"} == {
                "remat3-saves-for-unused-checkpoint-outputs", "remat3-barrier-iff-backward-reads-checkpoint-inputs"}
        nested = f is not top      # inside the outer checkpoint JAX drops the unused output on every release
        _remat2_expected(report, "residuals", not nested)
        assert all(report.status(p, "remat2") == "ok" for p in ("prevent_cse", "vjp"))


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
    assert report.status("vjp", "remat2") == "ok"
    _remat3_expected(report, "vjp", "known divergence" if dilated else "ok", name, dilated)
    if dilated:
        prog = trace_jax(f, *args)
        error = NotImplementedError("VJP not implemented for select_and_gather (MaxPool) with window "
                                    "dilation, got window_dilation=(1, 2).")
        ctx = lambda impl: dv.Context(impl, "vjp", None, prog, error=error)
        assert dv._remat3_reverse_raises_as_modelled(ctx("remat3"))
        assert not dv._remat3_reverse_raises_as_modelled(ctx("remat2"))


def _jit_in_checkpoint(closes_over: bool):
    """A checkpoint of a jitted function multiplying by `w`: closed over
    (a const of the jit's jaxpr), or passed to it as an argument."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    w = np.array([0.5, 1.5, -2.0], np.float32)
    if closes_over:
        return lambda x: jax.checkpoint(lambda x: jax.jit(lambda x: jnp.sin(x) * w)(x))(x)
    return lambda x, w: jax.checkpoint(lambda x, w: jax.jit(lambda x, w: jnp.sin(x) * w)(x, w))(x, w)


@pytest.mark.parametrize("closes_over", [True, False], ids=["constant", "argument"])
def test_remat3_jit_constant_divergence_needs_a_constant_of_the_jit(closes_over):
    """Found by the fuzzer (finding_jit_residual_remat2, minimized): under remat3 a jit
    inside a checkpoint saves the array it closes over ("output of jitted function",
    recorded by running it); remat2 (tests/recordings/residuals_remat.json,
    jit_constant_in_checkpoint) and the spec save only the input. Passed to the jit as
    an argument instead, remat3 agrees with the spec and nothing is matched."""
    import numpy as np

    import oracle
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    f = _jit_in_checkpoint(closes_over)
    x = np.full(3, 0.7, np.float32)
    args = (x,) if closes_over else (x, np.array([0.5, 1.5, -2.0], np.float32))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2", "remat3"),
                          properties=("residuals",))
    name = "remat3-jit-in-checkpoint-saves-its-constants"
    assert report.status("residuals", "remat2") == "ok"
    _remat3_expected(report, "residuals", "known divergence" if closes_over else "ok", name, closes_over)
    if closes_over:
        prog = trace_jax(f, *args)
        remat3 = [("f32[3]", "from the argument x"),
                  ("f32[3]", "output of jitted function '<lambda>'")]   # jax 0.10.2, measured
        ctx = lambda impl, res: dv.Context(impl, "residuals", None, prog, jax_residuals=res)
        assert ctx("remat3", remat3).remat3_defect_mattered("jit_rule")
        assert not ctx("remat2", remat3).remat3_defect_mattered("jit_rule")
        assert not ctx("remat3", remat3[:1]).remat3_defect_mattered("jit_rule")   # the spec's own list


def _unused_output_in(where: str, used: bool):
    """A checkpoint returning (named(t) * 2, sin(t)), its second output unused (or
    used), at the top level, in a cond branch, in a scan body, or in a cond inside a
    checkpoint."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    def ck(x):
        a, b = jax.checkpoint(lambda r: (checkpoint_name(r, "c") * 2.0, jnp.sin(r)))(x)
        return a * b if used else a
    if where == "top":
        return lambda x, y: ck(x)
    if where == "cond":
        return lambda x, y: lax.cond(jnp.sum(y) > 0, lambda x: 2.0 - x, ck, x)
    if where == "scan":
        return lambda x, y: lax.scan(lambda c, _: (ck(c), None), x, None, length=2)[0]
    return lambda x, y: jax.checkpoint(lambda x: lax.cond(jnp.sum(y) > 0, lambda x: 2.0 - x, ck, x))(x)


@pytest.mark.parametrize("used", [False, True], ids=["unused", "used"])
@pytest.mark.parametrize("where", ["top", "cond", "scan", "checkpoint-cond"])
def test_unused_checkpoint_output_divergence_reaches_into_cond_branches_and_scan_bodies(where, used):
    """Found by the fuzzer (finding_jit_residual_remat2's cond half, minimized): remat3
    saves the checkpoint's input for the unused sin output's backward pass also where the
    checkpoint sits in a cond branch ("output of cond") or a scan body ("output of scan"),
    measured by running it; the predicate threads the unused output out through the cond
    (its other branches return zeros) and the scan (stacked). With the output used,
    remat3 agrees with the spec and nothing is matched."""
    import numpy as np

    import oracle

    f = _unused_output_in(where, used)
    args = (np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2", "remat3"),
                          properties=("residuals",))
    name = "remat3-saves-for-unused-checkpoint-outputs"
    _remat2_expected(report, "residuals", not used and where != "checkpoint-cond")
    _remat3_expected(report, "residuals", "ok" if used else "known divergence", name, not used)


@pytest.mark.parametrize("first_used", [False, True], ids=["unused", "used"])
def test_a_name_nothing_reads_is_saved_only_for_an_unused_output(first_used):
    """Finding finding_remat3_dead_name, minimized: checkpoint(f,
    save_only_these_names('a')) with f(t, u) = (cos(checkpoint_name(t, 'a')), sin(u)) and
    the first output unused. remat3 (jax 0.10.2, measured) saves u and the value named
    'a' (the unused cos output's backward pass runs: sin(t) reads it); remat2 and the spec
    save u only. The name is incidental (without it remat3 saves t), so this is
    remat3-saves-for-unused-checkpoint-outputs; with both outputs used, remat3 agrees."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    import oracle
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    def f(t, u):
        c, s = jax.checkpoint(lambda t, u: (jnp.cos(checkpoint_name(t, "a")), jnp.sin(u)),
                              policy=jax.checkpoint_policies.save_only_these_names("a"))(t, u)
        return c * s if first_used else s
    args = (np.float32(0.3), np.float32(0.6))
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2", "remat3"),
                          properties=("residuals",))
    name = "remat3-saves-for-unused-checkpoint-outputs"
    _remat2_expected(report, "residuals", not first_used)
    _remat3_expected(report, "residuals", "ok" if first_used else "known divergence", name, not first_used)
    if not first_used:
        prog = trace_jax(f, *args)
        remat3 = [("f32[]", "from the argument u"), ("f32[]", "named 'a'")]   # jax 0.10.2, measured
        ctx = lambda impl, res: dv.Context(impl, "residuals", None, prog, jax_residuals=res)
        assert dv._remat3_unused_outputs_read(ctx("remat3", remat3))
        assert not dv._remat3_unused_outputs_read(ctx("remat2", remat3))
        assert not dv._remat3_unused_outputs_read(ctx("remat3", remat3[:1]))   # the spec's own list


@pytest.mark.parametrize("jit", [False, True], ids=["as-is", "jit"])
@pytest.mark.parametrize("closes_over_constant", [True, False], ids=["constant", "no-constant"])
def test_checkpoint_closing_over_a_constant_under_an_outer_jit(jit, closes_over_constant):
    """Found by the fuzzer (spelling jit=True): a checkpoint that closes over
    a constant, the whole function under jax.jit. The constant is a const of
    the jit, which pjit's linearization forwards ("from a constant", as
    without the jit); the spec named it an output of the jitted function.
    remat2 agrees with the spec either way; remat3 saves the checkpoint's
    argument too, as it does without the jit (its instantiated zero tangent
    for the constant operand reads it): the same known divergence, matched
    with and without the jit, and not on the variant without the constant."""
    import numpy as np

    import oracle
    import spec
    from oracle.spellings import Spelling
    from spec import ops
    from spec.ir import ArrayType, Literal
    from spec.remat import checkpoint

    const = Literal.of(np.array([1.5, 2.0, 3.0], np.float32))

    def f(a):
        c = checkpoint(lambda e: [ops.mul(e, const) if closes_over_constant else ops.mul(e, e)],
                       prevent_cse=False)(a)
        return [c[0], ops.sin(a)]
    prog = spec.trace(f, ArrayType((3,), np.float32))
    fn = oracle.to_jax(prog, spelling=Spelling(jit=jit))
    report = oracle.check(fn, oracle.AS_IS, np.linspace(0.1, 0.9, 3, dtype=np.float32),
                          properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    if closes_over_constant:
        assert report.known_divergences == _checked([
            ("remat3-instantiates-zero-tangents-into-checkpoints", "residuals", "remat3")])
    else:
        _remat3_expected(report, "residuals", "ok")


@pytest.mark.parametrize("literal", [True, False], ids=["literal", "no-literal"])
def test_literal_divergence_composes_with_unused_checkpoint_outputs(literal):
    """Found by the fuzzer (minimized by hand): a literal JAX does not save
    (`x * 0.5`, written with a Python float) next to a checkpoint with an
    output nothing reads. Under remat3 JAX's list is the unused-outputs
    model's without the literal: both known divergences at once, which the
    literal predicate matches. Without the literal only the unused-outputs
    divergence holds (remat2 agrees)."""
    import numpy as np

    import oracle
    import spec
    from spec import ops
    from spec.ir import ArrayType
    from spec.remat import checkpoint

    def f(a, b):
        outs = checkpoint(lambda x, y: [ops.sin(x), ops.sin(y)])(a, b)
        return [ops.mul(a, 0.5) if literal else ops.mul(a, a), outs[0]]
    prog = spec.trace(f, ArrayType((3,), np.float32), ArrayType((3,), np.float32))
    x = np.linspace(0.1, 0.9, 3, dtype=np.float32)
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, x, x, properties=("residuals",))
    lit = "literal-residuals-depend-on-the-constant-s-python-type"
    if literal:
        assert report.known_divergences == _checked([(lit, "residuals", "remat2"), (lit, "residuals", "remat3")])
    else:
        _remat2_expected(report, "residuals", True)
        assert [k for k in report.known_divergences if k[2] == "remat3"] == _checked([
            ("remat3-saves-for-unused-checkpoint-outputs", "residuals", "remat3")])


def _three_nested(outer: str):
    """inner forwards its input x to an output nothing reads; mid returns inner's
    first output; the outer checkpoint applies sin to mid's output (its linearization
    needs mid's primal output) or doubles it (it does not)."""
    import jax
    import jax.numpy as jnp

    inner = jax.checkpoint(lambda x, w: (jnp.sin(w), x))
    mid = jax.checkpoint(lambda x, w: inner(x, w)[0])
    body = (lambda x, w: jnp.sin(mid(x, w))) if outer == "sin" else (lambda x, w: mid(x, w) * 2.0)
    return jax.checkpoint(body)


@pytest.mark.parametrize("outer", ["sin", "double"])
def test_remat3_reads_every_input_of_a_grandchild_whose_output_the_outer_linearization_needs(outer):
    """remat3 (jax 0.10.2, measured: the RematTraced dce of the outer checkpoint's
    linearization reads [x, w] for sin, [w] for doubling) saves x, which only the
    grandchild forwards, where the outer checkpoint's linearization needs mid's primal
    output; where it does not, remat3 agrees with the spec."""
    import numpy as np

    import oracle

    args = (np.float32(0.3), np.float32(0.6))
    report = oracle.check(lambda a, w: _three_nested(outer)(a, w), oracle.AS_IS, *args,
                          implementations=("remat2", "remat3"), properties=("residuals",))
    name = "remat3-reads-every-input-of-an-opaque-grandchild-checkpoint"
    assert report.status("residuals", "remat2") == "ok"
    _remat3_expected(report, "residuals", "known divergence" if outer == "sin" else "ok", name, outer == "sin")


@pytest.mark.parametrize("k_is", ["a constant", "an argument"])
def test_remat3_reads_what_a_grandchild_is_called_with_even_a_constant(k_is):
    """Three nested checkpoints pass k down to the innermost, which never
    reads it. remat3 (jax 0.10.2, measured: print_saved_residuals lists `f32[3]
    from a constant` for a closed-over array, `from the argument k` for an
    argument) saves k with x; the spec, and remat2, x only. Found by a
    pristine campaign (the model read a grandchild's Var inputs only)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle

    def nested(k, x):   # built when called: jax.checkpoint picks remat2 or remat3 then
        c = jax.checkpoint
        return c(lambda k, d: jnp.sin(c(lambda k, e: c(lambda k, g: g)(k, e))(k, d)))(k, x)
    x = np.array([-1.1, 0.8, 0.5], np.float32)
    k = np.array([0.5, 0.75, 1.0], np.float32)
    fn, args = ((lambda x: nested(k, x)), (x,)) if k_is == "a constant" else (lambda x, k: nested(k, x), (x, k))
    report = oracle.check(fn, oracle.AS_IS, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    _remat3_expected(report, "residuals", "known divergence",
                     "remat3-reads-every-input-of-an-opaque-grandchild-checkpoint", True)


@pytest.mark.parametrize("linear_in_mid", [False, True], ids=["cos", "linear"])
def test_grandchild_opacity_is_relative_to_the_outer_linearization(linear_in_mid):
    """The fuzzer's finding minimized (three nested checkpoints, the innermost
    forwarding an input to an output nothing reads): remat3 (jax 0.10.2) saves the
    forwarded `output of max` (measured lists below); with the outer checkpoint linear
    in mid's output it does not, and the model does not predict it."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    ck17 = jax.checkpoint(lambda v18, v19, v20: (jnp.arctan2(v19, v20), v18))

    def ck10(v11, v12, v13, v14):
        v15, _ = ck17(v11, v13, v14)
        return v15[0:1], v15, v12

    def ck2(v3, v4, v5, v6):
        v7, _, _ = jax.checkpoint(ck10)(v3, v3, v5, v6)
        return v7 * 2.0 if linear_in_mid else jnp.cos(v7)

    def f(a2, a3, a4):
        v0 = jnp.maximum(np.array([0.5, .75, 1.], np.float32), a2)
        return jax.checkpoint(ck2)(v0, v0, a3, a4)
    args = (np.array([1.1, 0.8, -0.6], np.float32), np.full((2, 3), 0.4, np.float32),
            np.full((2, 3), -0.7, np.float32))
    prog = trace_jax(f, *args)
    jax_res = [("f32[2,3]", "from the argument a3"), ("f32[2,3]", "from the argument a4"),
               ("f32[3]", "output of max"), ("f32[3]", "output of div")]   # jax 0.10.2, measured
    if linear_in_mid:
        jax_res = jax_res[:2] + jax_res[3:]      # measured: not the output of max
    ctx = dv.Context("remat3", "residuals", None, prog, jax_residuals=jax_res)
    assert ctx.residuals_with(**dict.fromkeys(dv.REMAT3_DEFECTS, True)) == jax_res
    assert ctx.remat3_defect_mattered("grandchildren_opaque") == (not linear_in_mid)


def test_an_additive_divergence_composes_with_remat3_s_model():
    """Found by the ci draws (pristine jax 0.10.2), minimized: a scan over a
    checkpoint whose non-float output is live (remat3 then also saves what
    its float outputs' tangents need: a stacked `output of scan`), beside a
    jit whose pad saves its padding value's zero tangent (`f32[] output of
    jitted function`). Each alone is a known divergence; together JAX's list
    is the remat3 model's (of the variant with the float outputs live) plus
    the jit's zero, which the additive divergence sees against that
    baseline. It does not over-match: one more non-scalar entry is not
    explained."""
    import oracle
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    from fuzz import properties
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    def f(a, d, e):
        def body(carry, _):
            def outer(u, y, z):
                _, bits = jax.checkpoint(lambda x, p, q: (jnp.sin(x), lax.bitwise_xor(p, q)))(u, y, z)
                return u * 2.0, bits
            r, t = jax.checkpoint(outer)(carry, d, e)
            return r, (r, t)
        carry, (_, bits) = lax.scan(body, a, None, length=1)
        padded = jax.jit(lambda x: lax.pad(x, jnp.float32(0.5), ((0, 0, 0), (0, 0, 0))))(a)
        return bits, carry, padded
    ones = np.ones((2, 3), np.float32)
    prog = trace_jax(f, ones, np.ones((2, 3), np.uint32), np.ones((2, 3), np.uint32))
    report = properties.oracle_agrees(prog, implementations=("remat3",), properties=("residuals",))
    assert report.known_divergences == [("jit-linearize-saves-an-instantiated-zero", "residuals", "remat3")]

    spec_res = [(str(r.type), str(r.source)) for r in __import__("spec").saved_residuals(prog)]
    ctx = dv.Context("remat3", "residuals", None, prog, spec_residuals=spec_res)
    modelled = ctx.baselines()[-1]
    assert modelled != spec_res                       # the live float outputs save something
    zero = [("f32[]", "output of jitted function '<lambda>'")]
    holds = lambda res: dv._jit_linearize_zero(dv.Context("remat3", "residuals", None, prog,
                                                          jax_residuals=res, spec_residuals=spec_res))
    assert holds(modelled + zero)
    assert not holds(modelled + zero + [("f32[2,3]", "output of sin")])
    assert not holds(spec_res)                         # nothing added: no divergence


def test_a_jit_s_saved_zero_may_stand_for_the_spec_s_literal():
    """Found by the ci draws (pristine jax 0.10.2): under jvp of grad, a jit
    forwarding its input saves a scalar zero as an output of the jitted
    function where the spec reads it as a literal: JAX's list is the spec's
    with that literal replaced. Not over-matched: a literal JAX lacks with no
    jitted output in its place, or a non-scalar one, is not explained."""
    from oracle import divergences as dv_
    if not dv_._active("jit-linearize-saves-an-instantiated-zero"):
        pytest.skip("jit-linearize-saves-an-instantiated-zero holds only with direct linearization (jax >= 0.4.36)")
    import jax
    import jax.numpy as jnp
    import numpy as np

    from fuzz import properties
    from oracle import divergences as dv
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    def f(a, b):
        d, e = jax.jit(lambda v: (jnp.sin(v), v))(a)
        return d, jnp.sin(a), e
    prog = trace_jax(f, np.float32(0.5), np.int32(1))
    stack = S.Stack(layers=(S.Layer(kind="grad", in_axes=(), out_axes=(), size=2),
                            S.Layer(kind="jvp", in_axes=(), out_axes=(), size=2)))
    report = properties.oracle_agrees(prog, implementations=("remat2",), stack=stack,
                                      only=(S.STACK_RESIDUALS,))
    (result,) = [r for r in report.results if r.property == S.STACK_RESIDUALS]
    assert (result.status, result.detail) == ("known divergence", "jit-linearize-saves-an-instantiated-zero")
    base = [("f32[]", "from the argument a")]
    holds = lambda got, want: dv._jit_linearize_zero(dv.Context("remat2", "residuals", None, prog,
                                                                jax_residuals=got, spec_residuals=want))
    jitted, literal = ("f32[]", "output of jitted function 'f0'"), ("f32[]", "from a literal")
    assert holds(base + [jitted], base + [literal])
    assert holds(base + [jitted], base)
    assert not holds(base, base + [literal])
    assert not holds(base + [jitted], base + [literal, literal])
    assert not holds(base + [jitted], base + [("f32[2]", "from a literal")])
def _refused_and_unused(unused: bool, literal: bool = False):
    """A checkpoint whose policy the spec refuses (an offload policy in
    save_from_both_policies: PolicyCombinationError, remat2's ValueError)
    beside a checkpoint of which only the forwarded input is read
    (`unused`: remat3 saves for the backward of sin of it too) or both
    outputs; with `literal`, a scalar literal the spec saves (the result's
    sin times 0.5) and JAX, which gets a Python float, does not."""
    import numpy as np

    import spec
    from spec import ops, policies as sp
    from spec.ir import ArrayType
    from spec.remat import checkpoint

    refused = sp.save_from_both_policies(sp.offload_dot_with_no_batch_dims("device", "pinned_host"),
                                         sp.dots_saveable)

    def f(a, b):
        u = checkpoint(lambda x: ops.sin(ops.sin(x)), policy=refused)(a)
        outs = checkpoint(lambda y: [ops.sin(y), y])(ops.mul(a, b))
        out = ops.add(u, outs[1] if unused else ops.mul(outs[0], outs[1]))
        return [ops.mul(ops.sin(out), 0.5) if literal else out]
    return spec.trace(f, ArrayType((3,), np.float32), ArrayType((3,), np.float32))


@pytest.mark.parametrize("unused", [True, False], ids=["unused-output", "all-used"])
def test_refused_policy_divergence_composes_with_unused_checkpoint_outputs(unused):
    """Found by the fuzzer (fuzz/test_branches.py's cover, minimized by hand):
    remat3 never asks a save_from_both_policies that offloads, where the
    spec and remat2 refuse it; elsewhere in the program a checkpoint output
    nothing reads, for whose backward remat3 saves too. JAX's list (measured
    here) is the remat3 model's of the program with that output used, not
    of the program: the refused-policy predicate takes both lists, and holds
    for nothing else."""
    import numpy as np

    import oracle
    from oracle import divergences as dv
    from oracle.jax_api.flags import implementation
    from oracle.properties import jax_residuals
    from spec import policies as sp

    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    prog = _refused_and_unused(unused)
    x = np.linspace(0.1, 0.9, 3, dtype=np.float32)
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, x, x, properties=("residuals",))
    assert report.known_divergences == [("remat3-unrecognised-policy-is-full-remat", "residuals", "remat3")]
    assert report.status("residuals", "remat2") == "not applicable"     # both raise ValueError
    with implementation("remat3"):     # remat3 names the arguments args[i]: the spec's are a, b
        measured = [(t, src.replace("args[0]", "a").replace("args[1]", "b"))
                    for t, src in jax_residuals(oracle.to_jax(prog), [x, x])]
    refused = sp.PolicyCombinationError("refused")
    ctx = lambda impl, res, err=refused: dv.Context(impl, "residuals", None, prog, jax_residuals=res,
                                                    spec_error=err)
    plain, *composed = dv.remat3_modelled(ctx("remat3", measured))
    assert (measured == plain) != unused and bool(composed) == unused
    assert dv._remat3_never_asks_refused_policy(ctx("remat3", measured))
    assert not dv._remat3_never_asks_refused_policy(ctx("remat2", measured))
    assert not dv._remat3_never_asks_refused_policy(ctx("remat3", measured, None))
    assert not dv._remat3_never_asks_refused_policy(ctx("remat3", measured + [("f32[3]", "output of sin")]))


@pytest.mark.parametrize("dead", [False, True], ids=["live-only", "with-a-dead-checkpoint"])
def test_unused_checkpoint_outputs_of_dead_checkpoints_are_not_saved(dead):
    """Found by the fuzzer (with the case above): in a cond branch, a live
    checkpoint of which only the forwarded input is read (remat3 saves what
    its unused sin output's backward needs) and, `dead`, a checkpoint none
    of whose outputs is needed. JAX's partial evaluation of the branch drops
    the dead one with its backward (no residual for it, measured): the
    remat3 model threads out the unused outputs of live checkpoints only,
    and the divergence is named in both cases (before, the dead one's were
    threaded out too, and the check reported a mismatch)."""
    import oracle
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    import numpy as np

    import oracle
    import spec
    from oracle import divergences as dv
    from spec import ops
    from spec.ir import ArrayType
    from spec.remat import checkpoint

    def branch_true(x, y):
        live = checkpoint(lambda u: [ops.sin(u), u])(ops.mul(x, y))
        if dead:
            ops.add(checkpoint(lambda v: [ops.sin(v), v])(ops.mul(y, y))[1], y)
        return ops.mul(live[1], np.float32(2))

    def f(a, b):
        pred = ops.gt(ops.reduce_sum(b, (0,)), np.float32(0))
        return spec.cond(pred, branch_true, lambda x, y: ops.cos(x), a, b)
    prog = spec.trace(f, ArrayType((3,), np.float32), ArrayType((3,), np.float32))
    assert dv.unused_checkpoint_outputs_out(prog)[1] == 1     # the live checkpoint's sin output only
    x = np.linspace(0.1, 0.9, 3, dtype=np.float32)
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, x, x, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    assert report.known_divergences == [("remat3-saves-for-unused-checkpoint-outputs", "residuals", "remat3")]


def test_host_tangent_divergence_is_a_memory_space_only_branch_difference():
    """The predicate holds where the spec's cond refused branch types that
    differ in memory spaces only (what JAX's cond JVP makes), and not for
    branch types that differ otherwise, nor for another error."""
    import numpy as np

    import spec
    from oracle import divergences as dv
    from spec.ir import ArrayType
    from spec.prims_control import BranchTypesError

    host, dev = ArrayType((2,), np.float32, "pinned_host"), ArrayType((2,), np.float32)
    prog = spec.trace(lambda x: x, dev)
    ctx = lambda err: dv.Context("remat2", "second_order", None, prog, spec_error=err)
    assert dv._cond_tangent_zeros_on_device(ctx(BranchTypesError(1, [dev, host], [dev, dev])))
    assert not dv._cond_tangent_zeros_on_device(ctx(BranchTypesError(1, [dev, host], [dev, ArrayType((3,), np.float32)])))
    assert not dv._cond_tangent_zeros_on_device(ctx(spec.core.PrimitiveError("cond", "different output types")))
    assert not dv._cond_tangent_zeros_on_device(ctx(None))


def test_refused_policy_divergence_composes_with_literals_jax_does_not_save():
    """Found by the fuzzer (fuzz/test_branches.py's cover at 2000 draws): a
    refused policy, an unused checkpoint output and a scalar literal JAX
    does not save: JAX's list is the composed model's less that literal."""
    import oracle
    if oracle.jax_api.unavailable("remat3"):
        pytest.skip(oracle.jax_api.unavailable("remat3"))
    import numpy as np

    import oracle
    prog = _refused_and_unused(True, literal=True)
    x = np.linspace(0.1, 0.9, 3, dtype=np.float32)
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, x, x, properties=("residuals",))
    assert report.known_divergences == [("remat3-unrecognised-policy-is-full-remat", "residuals", "remat3")]
def _unused_output_of(kind: str):
    """A checkpoint, jit, scan or cond (or a checkpoint in a checkpoint) with
    a float output nothing reads."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    two = lambda r: (jnp.sin(r), r * 2.0)
    if kind == "checkpoint":
        return lambda a: jax.checkpoint(two)(a)[1]
    if kind == "jit":
        return lambda a: jax.jit(two)(a)[1]
    if kind == "scan":
        return lambda a: lax.scan(lambda c, _: (c * 2.0, jnp.sin(c)), a, None, length=2)[0]
    if kind == "cond":
        return lambda a: lax.cond(jnp.sum(a) > 0, two, lambda r: (r, r), a)[1]
    return lambda a: jax.checkpoint(lambda a: jax.checkpoint(two)(a)[1])(a)


# saved_residuals of _unused_output_of(kind) at a = [0.1, 0.5, 0.9] on jax 0.4.25, 0.4.36 and
# 0.6.2, measured (0.4.25 names the jit's `output of pjit`, normalised by the check); 0.10.2
# (and the spec) save only the cond's index, dropping the sin output's tangent
KEPT_0425 = {"checkpoint": [("f32[3]", "from the argument a")],
             "jit": [("f32[3]", "output of jitted function '<lambda>'")],
             "scan": [("f32[2,3]", "output of scan")],
             "cond": [("i32[]", "output of convert_element_type"), ("f32[3]", "output of cond")]}


@pytest.mark.parametrize("kind", ["checkpoint", "jit", "scan", "cond", "nested"])
def test_linearize_keeps_unused_outputs_predicate(kind):
    """The predicate holds for remat2 and exactly JAX 0.4.25's list (recorded
    above), not for the spec's own list nor for remat3; inside a checkpoint
    nothing is kept (no list differs, nothing is modelled)."""
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    prog = trace_jax(_unused_output_of(kind), np.array([0.1, 0.5, 0.9], np.float32))
    kept, n = dv.unused_linearize_outputs_out(prog)
    assert n == (0 if kind == "nested" else 1)
    if kind == "nested":
        return
    ctx = lambda impl, res: dv.Context(impl, "residuals", None, prog, jax_residuals=res)
    recorded = KEPT_0425[kind]
    spec_list = ctx("remat2", None).residuals_with(lambda p: p)
    assert dv._linearize_keeps_unused_outputs(ctx("remat2", recorded)), spec_list
    assert not dv._linearize_keeps_unused_outputs(ctx("remat2", spec_list))
    assert not dv._linearize_keeps_unused_outputs(ctx("remat3", recorded))


@pytest.mark.parametrize("kind", ["checkpoint", "jit", "scan", "cond", "nested"])
def test_linearize_keeps_unused_outputs_on_the_installed_release(kind):
    """oracle.check names the divergence for each equation kind exactly on the
    releases that keep unused outputs (before 0.7.0's direct linearization),
    never for a checkpoint inside a checkpoint; remat2 agrees elsewhere."""
    import numpy as np

    import oracle

    report = oracle.check(_unused_output_of(kind), oracle.AS_IS, np.array([0.1, 0.5, 0.9], np.float32),
                          implementations=("remat2",), properties=("residuals", "vjp_leaves"))
    _remat2_expected(report, "residuals", kind != "nested")
    assert report.status("vjp_leaves", "remat2") in (("known divergence", "ok") if kind != "nested" else ("ok",))


def test_jit_residual_order_predicate():
    """jit(lambda a, b: (sin(a), sin(b))[::-1]): jax 0.4.25-0.6.2 save cos(b) before
    cos(a) (measured; the fuzzer's finding c36a1459eb), 0.10.2 and the spec cos(a) first.
    The predicate holds for that order only, not for a list with another entry moved."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    prog = trace_jax(jax.jit(lambda a, b: (jnp.sin(a), jnp.sin(b))[::-1]), np.float32(0.5), np.ones(3, np.float32))
    jit = "output of jitted function '<lambda>'"
    spec_list = [("f32[]", jit), ("f32[3]", jit)]
    ctx = lambda got, want: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    assert dv._jit_residual_order(ctx(spec_list[::-1], spec_list))
    assert not dv._jit_residual_order(ctx(spec_list, spec_list))
    args = [("f32[]", "from the argument a"), ("f32[3]", "from the argument b")]
    assert not dv._jit_residual_order(ctx(args[::-1], args))
    # the constants a jit closes over, in the order of the outputs reading them
    # (found on 0.4.25: finding ac5bd5de82, two constants of a jitted pair of muls)
    consts = [("f32[2,3]", "from a constant"), ("f32[1,3]", "from a constant")]
    assert dv._jit_residual_order(ctx(consts[::-1], consts))
    no_jit = trace_jax(lambda a, b: (jnp.sin(a), jnp.sin(b))[::-1], np.float32(0.5), np.ones(3, np.float32))
    assert not dv._jit_residual_order(dv.Context("remat2", "residuals", None, no_jit,
                                                 jax_residuals=consts[::-1], spec_residuals=consts))


def test_atan2_old_jvp_predicate_in_a_jit():
    """Found on 0.4.25 (finding 7dc87d88d2): jit(lambda b, c: atan2(b, c) * 2) saves
    three f32[4] outputs of the jitted function (measured: `output of pjit` x3), the
    spec two; the predicate takes one more jit output per atan2 in a jit body, not two,
    and not without an atan2 in the jit."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    args = (np.linspace(0.1, 0.9, 4).astype(np.float32), np.float32(0.7))
    jit = "output of jitted function '<lambda>'"
    spec_list = [("f32[4]", jit), ("f32[4]", jit)]
    ctx = lambda f, got: dv.Context("remat2", "residuals", None, trace_jax(f, *args), jax_residuals=got,
                                    spec_residuals=spec_list)
    atan2 = jax.jit(lambda b, c: jax.lax.atan2(b, c) * 2.0)
    assert dv._atan2_old_jvp(ctx(atan2, spec_list + [("f32[4]", "output of pjit")]))
    assert not dv._atan2_old_jvp(ctx(atan2, spec_list + [("f32[4]", "output of pjit")] * 2))
    assert not dv._atan2_old_jvp(ctx(jax.jit(lambda b, c: jnp.sin(b) * c), spec_list + [("f32[4]", jit)]))


def test_save_from_both_policies_unchecked_predicate():
    """A campaign on 0.4.36 (finding eb57715452, minimized): save_from_both_policies of
    nothing_saveable and an offload policy. Before 0.4.38 JAX answers `p1 or p2` and saves
    the name (measured on 0.4.25: [x, named 'a']); the spec raises as 0.10.2 does. The
    predicate holds for that list with the spec's PolicyCombinationError, not for a list
    without the name, and not for remat3 or without the spec's error."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import checkpoint_policies as cp
    from jax.ad_checkpoint import checkpoint_name

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    from spec import policies as sp

    p = cp.save_from_both_policies(cp.nothing_saveable, cp.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=[], offload_src="device",
        offload_dst="pinned_host"))
    f = jax.checkpoint(lambda x: jnp.sin(checkpoint_name(jnp.sin(x), "a")) * x, policy=p)
    prog = trace_jax(f, np.linspace(0.1, 0.9, 3).astype(np.float32))
    refused = sp.PolicyCombinationError("The return value of the policies should be a boolean.")
    measured = [("f32[3]", "from the argument x"), ("f32[3]", "named 'a'")]
    ctx = lambda impl, got, err=refused: dv.Context(impl, "residuals", None, prog, jax_residuals=got, spec_error=err)
    assert dv._save_from_both_unchecked(ctx("remat2", measured))
    assert not dv._save_from_both_unchecked(ctx("remat2", measured[:1]))
    assert not dv._save_from_both_unchecked(ctx("remat3", measured))
    assert not dv._save_from_both_unchecked(ctx("remat2", measured, None))


def test_a_value_saved_beside_its_rounding_is_the_saved_residuals_assertion():
    """Found by the fuzzer (pristine jax 0.10.2): saved_residuals of grad of a
    checkpoint saving tanh raises a bare AssertionError; the divergence
    names it where the spec saves tanh's output and its rounding, and not
    for the same stack of a checkpoint that saves nothing. Before 0.4.31
    JAX rounds nothing and saves the value once."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle
    from oracle import stacks as S
    from oracle.jax_api.versions import holds, Releases

    if holds(Releases("0.10.2")):
        divergence = "saved-residuals-counts-a-value-saved-beside-its-rounding-once"
    elif holds(Releases("0.4.25", "0.4.31")):
        divergence = "checkpoint-residuals-are-not-rounded"    # JAX saves tanh's output once
    else:
        pytest.skip("between 0.4.31 and 0.10.2 JAX rounds but does not look through the rounding: not checked on those releases")
    saves_tanh = lambda prim, *_, **__: prim.name == "tanh"
    stack = S.Stack((S.Layer("grad"),))
    x = np.ones(3, np.float32)
    from oracle.jax_api.flags import flags
    direct = flags().get("jax_use_direct_linearize", False)
    for policy, expected in ((saves_tanh, "known divergence"), (None, "ok")):
        prog = oracle.trace_jax(jax.checkpoint(lambda y: (jnp.exp(jnp.tanh(y)), jnp.sin(y)), policy=policy), x)
        report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, x, implementations=("remat2",),
                              properties=(S.stack_residuals_property(stack, prog),))
        result, = report.results
        if not direct:      # second-order residual sets are compared under direct linearization only
            assert result.status == "not compared" and "direct linearization" in result.detail, str(report)
            continue
        assert result.status == expected, str(report)
        if expected != "ok":
            assert divergence in str(report)


def test_pad_transposed_for_its_padding_value_alone_is_named():
    """Found by the ci draws: grad of pad(constant operand, differentiated
    padding value): JAX's _pad_transpose sums a None cotangent (TypeError),
    the spec refuses; the divergence names exactly that pair of errors."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle
    report = oracle.check(lambda v: jnp.sum(jax.lax.pad(jnp.ones(2, jnp.float32), v, ((1, 1, 0),))),
                          oracle.AS_IS, np.float32(1.0), implementations=("remat2",), properties=("vjp",))
    result, = report.results
    assert result.status == "known divergence", str(report)
    assert "pad-cannot-be-transposed-for-its-padding-value-alone" in str(report)


def test_jit_staging_forwarding_model_matches_measured_releases():
    """spec.semantics' remat-of-jit choices against saved_residuals counts
    measured with tools/releases.py on jax 0.4.25 to 0.10.2 (the
    divergence's repro is the `in scan` one): two jits reading sin(x), directly in a checkpoint
    (`plain`) and in a scan body (`in scan`), under everything_saveable.
    0.4.25-0.4.28 and 0.6.0-0.9.0: plain 5, in scan 6; 0.4.29-0.5.3: plain
    4, in scan 6 (pjit's staging rule forwards the hoisted jits' inputs);
    0.9.1 on: plain 4, in scan 5."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import spec
    from oracle.from_jax import trace_jax
    from spec.semantics import following

    def plain(x):
        y = jnp.sin(x)
        x = jax.jit(lambda: x * y)()
        return jax.jit(lambda: x * y)()

    def in_scan(x):
        def body(c, _):
            y = jnp.sin(c)
            c = jax.jit(lambda: c * y)()
            return jax.jit(lambda: c * y)(), None
        return jax.lax.scan(body, x, None, length=2)[0]

    ev = jax.checkpoint_policies.everything_saveable
    progs = [trace_jax(jax.checkpoint(f, policy=ev), np.float32(3.0)) for f in (plain, in_scan)]
    counts = lambda: [len(spec.saved_residuals(p)) for p in progs]
    assert counts() == [4, 5]
    with following(remat_of_jit_forwards_inputs=False):
        assert counts() == [5, 6]
    with following(remat_of_jit_forwards_inputs=False, jit_staging_forwards_inputs=True):
        assert counts() == [4, 6]


def test_a_rounded_residual_takes_the_name_of_the_value_at_its_place():
    """jax 0.4.36's saved_residuals for checkpoint(gelu) under
    everything_saveable (measured): the argument, `output of mul`,
    `output of reduce_precision`, `output of sub`, `output of
    reduce_precision`; the spec's: the argument, mul, tanh, sub, mul. The
    rounded values are tanh's and the second mul's, in their places: the
    first mul, which JAX names itself, is not free to be taken."""
    from oracle.normalizations import _misnamed
    t = "f32[3]"
    jax_res = [(t, "from the argument x"), (t, "output of mul"), (t, "output of reduce_precision"),
               (t, "output of sub"), (t, "output of reduce_precision")]
    spec_res = [(t, "from the argument x"), (t, "output of mul"), (t, "output of tanh"),
                (t, "output of sub"), (t, "output of mul")]
    from spec.ir import Program
    renamed = _misnamed("output of reduce_precision")("remat2", jax_res, spec_res, Program([], [], []), {})
    assert renamed == spec_res


def test_a_predicate_meeting_the_specs_own_error_explains_nothing(monkeypatch):
    """A predicate that models the program and meets the error the spec
    itself raised on it (found by the model suite on 0.4.25) does not apply:
    the spec's error is the finding. Any other failure is the oracle's bug."""
    from oracle import divergences as dv
    from spec.ir import Program

    def raises(ctx):
        raise TypeError("boom")
    monkeypatch.setattr(dv, "DIVERGENCES", [dv.Divergence("raises", "", "", raises)])
    ctx = dv.Context("remat2", "values", None, Program([], [], []), spec_error=TypeError("boom"))
    assert dv.find(ctx) is None
    with pytest.raises(RuntimeError, match="predicate raises failed"):
        dv.find(dv.Context("remat2", "values", None, Program([], [], [])))


def test_a_name_of_a_checkpoint_input_names_the_value_passed_in():
    """jax 0.6.2 (measured, campaign finding 6a3f6fc4e3): a checkpoint saving
    its input, which its body names 'b', reports `named 'b'`; the spec names
    the value by its producer outside, exp."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    from oracle.from_jax import trace_jax
    from oracle.normalizations import _name_inputs_named

    prog = trace_jax(lambda a: jax.checkpoint(lambda f: checkpoint_name(f, "b") * 2.0)(jnp.exp(a)), np.float32(1.0))
    got = _name_inputs_named("remat2", [("f32[]", "named 'b'")], [("f32[]", "output of exp")], prog, {})
    assert got == [("f32[]", "output of exp")]
    assert _name_inputs_named("remat2", [("f32[]", "named 'b'")], [("f32[]", "output of sin")], prog, {}) == [
        ("f32[]", "named 'b'")]


def test_a_zero_power_in_a_jit_is_saved_as_the_jits_output():
    """jax 0.6.2 (campaign finding 57698e3c80): jit(scan of integer_pow(d, 0))
    saves the zero tangent as `output of jitted function`; at most the zero
    and one product per later equation (mul's, sin's and the jit's own
    here, named as the jit's outputs too: a dot_general's product, finding
    b5a35a9b83), not more."""
    import jax
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    prog = trace_jax(jax.jit(lambda a: jax.numpy.sin(jax.lax.integer_pow(a, 0) * a)), np.float32(1.0))
    base = [("f32[]", "output of cos")]
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=base)
    jit_zero = ("f32[]", "output of jitted function '<lambda>'")
    assert dv._zero_power_literal(ctx(base + [jit_zero]))
    assert dv._zero_power_literal(ctx(base + [jit_zero] * 4))
    assert not dv._zero_power_literal(ctx(base + [jit_zero] * 5))
    # in a scan in a jit: the stacked zero, the jit's output (c328521c56 on 0.4.36)
    scanned = trace_jax(jax.jit(lambda a: jax.lax.scan(lambda d, _: (jax.numpy.sin(jax.lax.integer_pow(d, 0)),) * 2,
                                                          a, None, length=1)[0]), np.float32(1.0))
    stacked = ("f32[1]", "output of jitted function '<lambda>'")
    assert dv._zero_power_literal(dv.Context("remat2", "residuals", None, scanned, jax_residuals=[stacked],
                                             spec_residuals=[]))


def test_a_dead_unlinearizable_primal_is_the_divergence_only_when_dead():
    """Campaign finding 36620aaf66 (jax 0.6.2): a scan body's generic
    reduce_window with its stacked output unused. Dead, the program without
    it linearizes; used, it does not, and the predicate does not hold."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    from spec.jvp import LINEARIZATION_ERROR

    window = lambda b: jax.lax.reduce_window(b, 1.0, jax.lax.mul, (1, 3), (1, 1), "VALID")
    dead = lambda a, b: jax.lax.scan(lambda c, _: (jnp.sin(c), window(b)), a, None, length=1)[0]
    used = lambda a, b: jax.lax.scan(lambda c, _: (jnp.sin(c) * window(b).sum(), None), a, None, length=1)[0]
    args = (np.float32(1.0), np.ones((2, 5), np.float32))
    ctx = lambda f: dv.Context("remat2", "residuals", None, trace_jax(f, *args),
                               spec_error=ValueError(LINEARIZATION_ERROR))
    assert dv._dead_primal_unlinearizable(ctx(dead))
    assert not dv._dead_primal_unlinearizable(ctx(used))


def test_two_additive_divergences_compose(monkeypatch):
    """Campaign findings 405de95b02 and 77eaaa5bc0 (jax 0.4.25): a custom_vjp
    saving its output beside integer_pow(a, 1)'s factor `1 * a**0` (each a
    known divergence of 0.4.25 alone). Together they explain JAX's list;
    neither alone does, and an entry neither explains is still a Mismatch."""
    import jax
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active", lambda self: True)   # both hold on 0.4.25 only

    @jax.custom_vjp
    def s(x):
        return jax.numpy.sin(x)
    s.defvjp(lambda x: (jax.numpy.sin(x), jax.numpy.cos(x)), lambda c, g: (g * c,))
    prog = trace_jax(lambda a: (jax.lax.integer_pow(a, 1), s(a)), np.float32(1.0))
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    both = want + [("f32[]", "output of sin"), ("f32[]", "output of mul")]
    found = dv.find(ctx(both))
    assert found is not None and " + " in found.name
    assert {"integer-pow-one-jvp-saves-its-factor", "custom-vjp-saves-its-output"} == set(found.name.split(" + "))
    assert dv.find(ctx(both + [("f32[]", "output of exp")])) is None


def test_integer_pow_two_under_a_policy_saving_integer_pow_follows_the_old_rule(monkeypatch):
    """Campaign finding f5867ddee0 (jax 0.4.36): a checkpoint whose policy
    saves integer_pow, around integer_pow(x, 2). Before 0.10.1 the JVP binds
    `integer_pow(x, 1)` for the factor, which the policy saves (JAX's list
    as the campaign's report recorded it); the spec's rule multiplies by x,
    which it saves from the argument."""
    import jax
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active", lambda self: True)
    policy = jax.checkpoint_policies.save_from_both_policies(
        jax.checkpoint_policies.save_only_these_names("z"),
        lambda prim, *_, **__: prim.name == "integer_pow")
    prog = trace_jax(jax.checkpoint(lambda x: jax.lax.integer_pow(x, 2), policy=policy), np.float32(1.5))
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    assert want == [("f32[]", "from the argument x")]
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    found = dv.find(ctx([("f32[]", "output of integer_pow")]))
    assert found is not None and found.name == "integer-pow-one-jvp-saves-its-factor"
    assert dv.find(ctx([("f32[]", "output of sin")])) is None


def test_unread_operands_explain_a_barrier_the_spec_does_not_predict():
    """Campaign finding 14cedb5730 (jax 0.4.25): a checkpoint's output passed
    to a cond whose branches ignore it. Without direct linearization its
    tangent is computed, and the checkpoint's recomputation barriered (JAX's
    HLO: 1); the spec, as 0.10.2, prunes it (0)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    from spec.barriers import optimization_barriers

    f = lambda a: jax.lax.cond(a > 0, lambda o, p: jnp.sin(o), lambda o, p: jnp.cos(o), a, jax.checkpoint(jnp.sin)(a))
    prog = trace_jax(f, np.float32(1.0))
    assert optimization_barriers(prog) == 0
    ctx = lambda barriers: dv.Context("remat2", "prevent_cse", None, prog, barriers=barriers)
    assert dv._linearize_keeps_tangents_of_unread_operands(ctx((0, 1)))
    assert not dv._linearize_keeps_tangents_of_unread_operands(ctx((1, 0)))


def test_old_rule_entries_in_jits_and_cond_branches():
    """Campaign findings on jax 0.4.36: a rank-2 sort in a jit saves the old
    rule's concatenated i32 indices as the jit's output (8c96eaa515); a
    custom_vjp in a cond branch saves its output as the cond's (2fdcc71fce);
    an operand a branch reads only in dead code is unread (44a454716d)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    from oracle.program_variants import unread_operands_out

    ctx = lambda prog, got, want: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    sort = trace_jax(jax.jit(lambda b: jax.lax.sort(b, dimension=1)), np.ones((3, 5), np.float32))
    jit = "output of jitted function '<lambda>'"
    assert dv._sort_jvp_int32_permutation.explains([("i32[3,5,2]", jit)], [("u32[3,5,1]", jit)], ctx(sort, [], []))
    assert not dv._sort_jvp_int32_permutation.explains([("i32[3,5,3]", jit)], [("u32[3,5,1]", jit)], ctx(sort, [], []))

    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
    cond = trace_jax(lambda a: jax.lax.cond(a.sum() > 0, jnp.sin, s, a), np.ones(3, np.float32))
    assert dv._custom_vjp_outputs_as_saved(cond, top_level=False)[("f32[3]", "output of cond")] == 1

    window = lambda x: jax.lax.reduce_window(x, 1.0, jax.lax.mul, (3,), (1,), "VALID")
    dead = trace_jax(lambda a, e, d: jax.lax.cond(a > 0, lambda j, k, l: jnp.sin(j),
                                                    lambda j, k, l: (window(l), jnp.cos(j))[1], a, e, d),
                     np.float32(1.0), np.float32(2.0), np.ones(5, np.float32))
    assert unread_operands_out(dead)[1] == 2     # e: read by neither branch, d only by dead code


def test_a_weak_typed_residual_of_a_cond_branch_takes_a_slot_of_its_own():
    """Campaign finding f527f3a9b3 (jax 0.4.36; 0.10.2 too): a while loop
    started from broadcast(0.0) in one cond branch: the weakly typed carry
    is saved in a slot of its own. Bounded by the weak values computed."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    loop = lambda v: jax.lax.while_loop(lambda c: c.sum() < 1.5, lambda c: c + jnp.tanh(c.sum() * v.sum()) + 1.0,
                                        jax.lax.broadcast_in_dim(0.0, (3,), ()))
    prog = trace_jax(lambda a: jax.lax.cond(a.sum() > 0, lambda v: jnp.sin(jnp.sin(v)), loop, a),
                     np.ones(3, np.float32))
    assert [str(t) for t in dv._weak_values(prog.eqns[-1].params["branches"][0])].count("f32[3]") >= 1   # the false branch
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    assert dv._cond_weak_residual_slots(ctx(want + [("f32[3]", "output of cond")]))
    assert not dv._cond_weak_residual_slots(ctx(want + [("f32[5]", "output of cond")]))


def test_campaign_findings_of_the_last_round_on_old_releases():
    """Campaign findings at 74d4eb4: top_k's old indices (988169516b, jax
    0.4.25); a cond branch's while loop whose output only a scan's unread
    operand takes (f6cfc8a9f7: threaded out of the branch, and JAX's refusal
    to transpose the loop); threefry2x32 batched beside an unbatched operand
    (cb2d3bc9d6, every release)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    from oracle.program_variants import unread_operands_out
    from spec.prims_control import WHILE_TRANSPOSE_ERROR

    ctx = lambda prog, **kw: dv.Context("remat2", "residuals", None, prog, **kw)
    top = trace_jax(lambda b: jax.lax.top_k(b, 2)[0], np.ones((3, 5), np.float32))
    old, new = [("i32[3,2,2]", "output of concatenate")], [("i32[3,2,1]", "output of reshape")]
    assert dv._top_k_old_indices.explains(old, new, ctx(top))
    assert not dv._top_k_old_indices.explains([("i32[3,2,3]", "output of concatenate")], new, ctx(top))

    def branch(h):
        k = jax.lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, jnp.sin(c[1])), (0, h))[1]
        return jax.lax.scan(lambda u, v: (jnp.sin(u), u), jnp.sin(h), k)[0]
    prog = trace_jax(lambda a: jax.lax.cond(a.sum() > 0, jnp.sin, branch, a), np.ones(3, np.float32))
    variant, n = unread_operands_out(prog)
    assert n == 1 and variant.outputs[-1].type.shape == (3,)
    assert dv._linearize_keeps_tangents_of_unread_operands(
        dv.Context("remat2", "vjp", None, prog, error=ValueError(WHILE_TRANSPOSE_ERROR)))
    spec.vjp_program(prog)      # the spec's own: the loop's tangent is never needed

    tf = trace_jax(lambda a, b: __import__("jax.extend.random", fromlist=["r"]).threefry2x32_p.bind(a, b, a, b),
                   np.uint32(1), np.uint32(2))
    carry = TypeError("scan body function carry input and carry output must have equal types")
    assert dv._threefry_batched_beside_an_unbatched_operand(dv.Context("remat2", "vmap", None, tf, error=carry))
    assert not dv._threefry_batched_beside_an_unbatched_operand(dv.Context("remat2", "vmap", None, top, error=carry))


def test_old_sort_indices_per_operand_and_a_zero_powers_dot():
    """Campaign findings: a two-operand rank-2 sort on jax 0.4.25 gathers each
    tangent with its own concatenated indices (8c96eaa515, x2 for the spec's
    one u32 entry); on 0.4.36 dot(a, a**0) saves the product of the known
    zero tangent, an `output of dot_general` (2a82ce53f1)."""
    import jax
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    ctx = lambda prog, got, want: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    sort = trace_jax(lambda b, c: jax.lax.sort((b, c), dimension=1, num_keys=1), *[np.ones((2, 5), np.float32)] * 2)
    want = [("u32[2,5,1]", "output of broadcast_in_dim")]
    old = ("i32[2,5,2]", "output of concatenate")
    assert dv._sort_jvp_int32_permutation.explains([old, old], want, ctx(sort, [], []))
    assert not dv._sort_jvp_int32_permutation.explains([old, old, old], want, ctx(sort, [], []))

    dot = trace_jax(lambda a: jax.lax.dot(a, jax.lax.integer_pow(a, 0)), np.ones(3, np.float32))
    base = [("f32[3]", "from the argument a")]
    assert dv._zero_power_literal(ctx(dot, base + [("f32[]", "output of dot_general")], base))


def test_a_zero_powers_later_products_and_a_cond_branchs_zero():
    """Campaign findings on jax 0.4.25: dot(a, checkpoint(sin(a**0))) saves
    the dot's product with the known zero (5ffa00ac13); cond(..., a**0)
    saves nothing where the spec saves the branch's zero tangent
    (ee786fb53a). At most one entry per power either way."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    ctx = lambda prog, got, want: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    dot = trace_jax(lambda a: jnp.dot(a, jax.checkpoint(lambda d: jnp.sin(jax.lax.integer_pow(d, 0)))(a)),
                    np.ones(3, np.float32))
    product = ("f32[]", "output of dot_general")
    assert dv._zero_power_literal(ctx(dot, [product], []))
    assert not dv._zero_power_literal(ctx(dot, [product, product], []))
    cond = trace_jax(lambda a: jax.lax.cond(a > 0, lambda f: 0.5 + f, lambda h: jax.lax.integer_pow(h, 0), a),
                     np.float32(1.0))
    assert dv._zero_power_literal(ctx(cond, [], [("f32[]", "output of cond")]))
    assert not dv._zero_power_literal(ctx(cond, [], [("f32[]", "output of cond")] * 2))


def test_kept_unused_outputs_of_a_jitted_scan_in_the_jits_order():
    """Campaign finding 99691c7214 (jax 0.4.25): a jitted scan whose stacked
    output is unused; JAX keeps its residual, in the jit's residual order
    (another than the spec's for the kept-output program): same multiset."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    from oracle.program_variants import unused_linearize_outputs_out

    prog = trace_jax(jax.jit(lambda a: jax.lax.scan(lambda d, e: (jnp.sin(d), jnp.sin(e)), a, a)[0]),
                     np.ones(3, np.float32))
    kept, n = unused_linearize_outputs_out(prog)
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(kept)]
    assert n == 1 and len(want) == 2
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got,
                                 spec_residuals=[(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)])
    assert dv._linearize_keeps_unused_outputs(ctx(want[::-1]))
    assert not dv._linearize_keeps_unused_outputs(ctx(want[:1]))


def test_an_additive_divergence_composes_with_unread_operands(monkeypatch):
    """Campaign finding 1a20fa64f7 (jax 0.4.25): sin(a) passed to a cond
    whose branches ignore it (its tangent computed: cos saved) beside
    integer_pow(a, 1)'s factor. The unread-operands program is a baseline
    the additive divergence is measured against."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active", lambda self: True)
    prog = trace_jax(lambda a: (jax.lax.cond(jnp.sin(a) > 0, lambda i, j: jnp.sin(i), lambda l, m: jnp.sin(l),
                                             a, jnp.sin(a)), jax.lax.integer_pow(a, 1)), np.float32(1.0))
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    got = want + [("f32[]", "output of cos"), ("f32[]", "output of mul")]
    found = dv.find(dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want))
    assert found is not None and "integer-pow-one-jvp-saves-its-factor" in found.name


# --------------------------------------------------------------------------
# the eighth session's campaign findings on 0.4.25 and 0.4.36, written as a
# user would: each is a known divergence on the releases that save more, and
# agrees with the spec on 0.10.2 (jax's lists measured with saved_residuals on
# each release: EIGHTH_ROUND_RECORDED)

def _csin():
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def csin(x):     # sin, saving cos
        return jnp.sin(x)
    csin.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, t: (t * c,))
    return csin


def _stacked_factor_in_jit(a):
    """finding efb0da9e3a (0.4.25): a jitted scan's unused ys is integer_pow(x, 1):
    its old JVP's factor, stacked, returned by the jit."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f0(e):
        c, _ = lax.scan(lambda c, x: (jnp.sin(c), lax.integer_pow(x, 1)), e, e)
        return c
    return jax.jit(f0)(a), a + jnp.sin(a)


def _custom_vjp_output_saved_by_policy(a):
    """finding 3c2466faa6 (0.4.36): the custom_vjp output tied to its tangent
    is an `output of sin` the policy saves."""
    import jax
    return jax.checkpoint(_csin(), policy=lambda prim, *_, **__: prim.name == "sin", prevent_cse=False)(a)


def _custom_vjp_in_a_checkpoint_in_a_jit(a):
    """finding 92f3d271e5 (0.4.36, round x): a custom_vjp in a checkpoint in
    a jit saves the checkpoint's input besides the residual its policy saves
    (2x, an output of the jit), and the jit forwards the input: `from the
    argument a` (historic bug 14 through a jit)."""
    import jax
    from jax.ad_checkpoint import checkpoint_name

    @jax.custom_vjp
    def square(x):    # saving 2x
        return jax.lax.square(x)
    square.defvjp(lambda x: (jax.lax.square(x), 2.0 * x), lambda r, t: (t * r,))

    def body(d):
        checkpoint_name(d, "a")
        return square(d), d
    policy = jax.checkpoint_policies.save_from_both_policies(
        lambda prim, *_, **__: prim.name == "mul", jax.checkpoint_policies.save_only_these_names("a"))

    def f0(d):
        return jax.checkpoint(body, policy=policy, prevent_cse=False)(d)[0]
    return jax.jit(f0)(a)


def _zero_power_carry_of_nested_scans_in_jit(a):
    """finding 923d1e1a90 (0.6.2, round x): in a jit, a scan in a scan whose
    innermost scan starts from c ** 0 and squares (a custom_vjp) a value
    invariant in it: JAX before direct linearization saves the zero power's
    stacked product where the spec saves the zero (what the jit returns),
    the unused ys' residuals of the custom_vjp, hoisted out of the inner scan
    (and before 0.6.1 its output too)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    @jax.custom_vjp
    def square(x):    # saving 2x
        return lax.square(x)
    square.defvjp(lambda x: (lax.square(x), 2.0 * x), lambda r, t: (t * r,))

    def middle(c, _):
        padded = lax.pad(c, 2.0, ((-1, -1, 1), (0, 2, 0), (-1, -1, 0)))
        return lax.scan(lambda h, _: (jnp.sin(h), square(padded)), c ** 0, None, length=3)

    def f0(v):
        start = lax.stop_gradient(v) * v
        return lax.scan(lambda c, x: (lax.scan(middle, c, c, length=2)[0], None), start, v, length=2)[0]
    return jax.jit(f0)(a)


def _zero_power_times_a_dot_in_jit(a):
    """finding b5a35a9b83 (0.6.2, round y): in a jit, a dot_general of
    x ** 0 with tanh(x): JAX before direct linearization saves the product
    of the instantiated zero tangent with tanh(x), an f32[3] the jit
    returns."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f0(v):
        return lax.dot_general(v ** 0, jnp.tanh(v), (((0, 1), (0, 1)), ((2,), (2,))))
    return jax.jit(f0)(a)


def _checkpoint_of_a_rounded_input_in_jit(b):
    """finding 66c2c1b5a8 (0.6.2, round AA; 0.10.2 too, a spec bug): in a
    jit, a checkpoint saving its input, a reduce_precision of the jit's
    argument: the residual is the rounding's output, which the jit returns
    (pjit forwards only a residual that is the input itself), though
    saved_residuals names a rounded value by its operand at top level."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f0(v):
        rounded = lax.reduce_precision(v, exponent_bits=11, mantissa_bits=52)
        return jax.checkpoint(lambda f: (jnp.sin(f), f))(rounded)[0]
    return jax.jit(f0)(b)


def _atan2_in_a_nested_checkpoint(x, y):
    """finding c8658db0be (0.4.36, round AA): atan2 in a checkpoint nested
    in a checkpoint: its old JVP's extra factor (historic bug 6) is saved
    out of the enclosing checkpoint's known half, an `output of remat2`."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    everything = jax.checkpoint_policies.everything_saveable
    inner = jax.checkpoint(lambda c, d: lax.atan2(c, d), policy=everything)
    return jax.checkpoint(lambda a, b: jnp.sin(inner(a, b)), policy=everything)(x, y)


def _custom_vjp_in_a_jit_in_a_checkpoint_in_a_jit(a):
    """finding 1621876741 (0.4.25, round AB): a custom_vjp in a jit in a
    checkpoint (whose policy saves names and sin) in a jit."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    @jax.custom_vjp
    def ctanh(x):
        return jnp.tanh(x)
    ctanh.defvjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda t, g: (g * (1 - t * t),))

    def body(f):
        g, _ = jax.jit(lambda i: (ctanh(i), jnp.sin(i)))(f)
        checkpoint_name(f, "a")
        return checkpoint_name(f, "b"), g
    policy = jax.checkpoint_policies.save_from_both_policies(
        lambda prim, *_, **__: prim.name == "sin", jax.checkpoint_policies.save_only_these_names("a", "b"))

    def f0(c):
        d, _ = jax.checkpoint(body, policy=policy, prevent_cse=False)(c)
        return jnp.where(c > d, c, d)
    return jax.jit(f0)(a)


def _custom_vjp_output_saved_rounded(a):
    """finding 0ab2b8b28a (0.4.36, tenth session): everything_saveable
    saves a custom_vjp's output in a checkpoint, rounded by remat, so named
    `output of reduce_precision` (0.4.31-0.6.2): an entry the spec lacks."""
    import jax
    from jax import lax
    body = lambda d: (lax.sin(_csin()(d)), d)
    return jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable, prevent_cse=False)(a)[0]


def _custom_vjp_in_a_nested_checkpoint(a):
    """findings 550b7e08a7 (0.4.25) and bba19a4258 (0.4.36), tenth session:
    a checkpoint calling a custom_vjp, inside another, saves its input out
    of the outer one's known half (`output of remat2`)."""
    import jax
    from jax.ad_checkpoint import checkpoint_name
    pol = jax.checkpoint_policies
    inner = jax.checkpoint(lambda g: 0.5 + _csin()(g), policy=pol.save_only_these_names("a"), prevent_cse=False)
    outer = lambda d: checkpoint_name(inner(d), "b")
    return jax.checkpoint(outer, policy=pol.everything_saveable, prevent_cse=False)(a)


def _name_of_a_checkpoint_s_forwarded_input(a):
    """finding 988bd78b6e (0.6.2, tenth session): a checkpoint returns its
    input, which a name outside names; the saved value is the one passed
    in, `named 'b'` (0.4.26-0.6.2), the spec's `output of sin`."""
    import jax
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name
    h, j = jax.checkpoint(lambda k: (lax.cos(k), k), prevent_cse=False)(lax.sin(a))
    return h * checkpoint_name(j, "b")


def _name_of_an_input_beside_a_rounding(a):
    """finding f27ebafbf8 (0.4.36, tenth session): a checkpoint's input, a
    sine outside, which a name in it names, and a value its policy saves:
    JAX names them `named 'a'` and `output of reduce_precision`
    (0.4.31-0.6.2), the spec `output of sin` and `named 'a'`, in place.
    Neither renaming alone makes the lists equal."""
    import jax
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    def body(f):
        k = checkpoint_name(f, "a")
        return lax.fori_loop(0, 1, lambda i, r: lax.sin(r), k), f
    d, e = jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"),
                          prevent_cse=False)(lax.sin(a))
    return d, e * e


def _custom_vjp_in_a_scan_in_a_scan(a):
    """finding aa1c932490 (0.4.25, tenth session): a custom_vjp's output in
    a scan in a scan, tied to its tangent, saved stacked by both scans."""
    from jax import lax
    csin = _csin()
    twice = lambda v: (v, v)
    inner = lambda f, _: twice(lax.scan(lambda i, _: twice(csin(i)), f, None, length=1)[0])
    return lax.scan(inner, a, None, length=1)[0]


def _loop_reading_a_checkpointed_value_in_dead_code(a):
    """finding cc59f4125b (0.4.36 and 0.6.2, tenth session): a while loop's
    body reads a checkpoint's output only in dead code; before direct
    linearization its tangent is computed anyway, so the checkpoint's input
    is saved for the loop inside it."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    inner = lambda f: lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, jnp.exp(jnp.tanh(c[1]))), (0, f))[1]
    d, h = jax.checkpoint(lambda f: (f * 2.0, inner(f)), prevent_cse=False)(a)

    def body(c):
        jnp.sin(h)      # dead
        return c + 1.0
    return d, lax.while_loop(lambda c: jnp.sum(c) < 4.5, body, jnp.zeros(3, jnp.float32))


def _name_of_a_jit_s_forwarded_input(a, b):
    """finding 46d932d530 (0.6.2, tenth session): a jit returns its input,
    a slice, which a name in a checkpoint names and a product outside
    saves: `named 'a'` (0.4.26-0.6.2), the spec's `output of slice`."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name
    def f0(l, m):
        return jnp.sin(l), m
    i, k = jax.jit(f0)(a, lax.slice(b, (0,), (1,)))
    d = jax.checkpoint(lambda q: checkpoint_name(q, "a") * 2.0, prevent_cse=False)(k)
    return i, k * k, d


def _custom_vjp_output_in_a_nested_checkpoint(a):
    """findings a0510189a4 (0.4.25) and 2c3d198c82 (0.4.36), tenth session:
    a checkpoint calling a custom_vjp, inside another, saves the
    custom_vjp's output (tied to its tangent) out of the outer one's known
    half: an extra `output of remat2`."""
    import jax
    import jax.numpy as jnp
    inner = jax.checkpoint(lambda g: jnp.concatenate([_csin()(jnp.concatenate([g, g]))] * 2), prevent_cse=False,
                           policy=jax.checkpoint_policies.everything_saveable)
    return jax.checkpoint(lambda d: jnp.sin(inner(d)), prevent_cse=False,
                          policy=jax.checkpoint_policies.everything_saveable)(a)


def _cond_zero_out_of_a_jit(a):
    """finding ac68cc13ba (0.4.36, tenth session): a cond saves a zero its
    branch's linearization instantiated (cond-linearize-saves-an-
    instantiated-zero), and in a jit it is an output of the jit."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f0(x):
        body = lambda g: lax.cond(g > 0, lambda m: jax.jit(jnp.sin)(-m), jnp.sin, g)
        return jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable, prevent_cse=False)(x)
    return jax.jit(f0)(a)


def _nested_jits_unused_outputs(a, b):
    """finding f44cfd33fd (0.4.36): the top-level jit's unused output is kept,
    not those of the jits in its body."""
    import jax
    import jax.numpy as jnp

    def f2(r, s, t):
        return -jnp.sin(r), r, jnp.isfinite(t)

    def f1(l, m, n):
        _, _, q = jax.jit(f2)(l, l, n)
        return jnp.sin(l), l, q

    def f0(f, g):
        i, _, k = jax.jit(f1)(f, f, g)
        return i, jnp.sin(f), k
    c, _, e = jax.jit(f0)(a, b)
    return c, e


def _custom_vjp_in_jitted_scan(a):
    """finding d2d38f4742 (0.4.25): a custom_vjp output in a scan body, stacked,
    returned by the jit around the scan."""
    import jax
    from jax import lax
    csin = _csin()

    def prog(a):
        def body(c, x):
            e = csin(c)
            return e, e
        return lax.scan(body, a, None, length=1)[0]
    return jax.jit(prog)(a)


def _scan_zero_carry_in_jit(b):
    """finding 8dac043f01 (0.4.25): a jitted scan whose carry's tangent is an
    instantiated zero (floor's), saved as an output of the jit."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def prog(b):
        return lax.scan(lambda c, x: (jnp.floor(c), None), b, None, length=1)[0]
    return jax.jit(prog)(b)


def _cond_with_a_loop_in_jit(a, b):
    """finding 17e4a7dc07 (0.6.2, 0.10.2 too): a jitted cond whose branch runs a
    loop from a weakly typed zero: the branches' residuals of one type are
    not merged into shared slots (weak and strong avals differ), outputs of the jit."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loop(a, b):
        step = 1.0 + 0.1 * jnp.tanh(jnp.sum(jnp.arccos(b)))
        return lax.while_loop(lambda p: jnp.sum(p) < 1.5, lambda u: u + step, lax.broadcast_in_dim(0.0, (3,), ()))

    def prog(a, b):
        return lax.cond(jnp.sum(a) > 0, lambda a, b: jnp.log(jnp.square(a) + 1.0), loop, a, b)
    return jax.jit(prog)(a, b)


def _scan_ys_only_a_checkpoint_s_dead_code_reads(a):
    """finding 41cfeed405 (0.6.2): a scan's ys is an operand of a checkpoint
    whose body reads it in dead code only; the scan's tangent computes it
    (before direct linearization), so the dot's residual is saved."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    c, ys = lax.scan(lambda d, _: (jnp.sin(d), jnp.vdot(d, d)), a, None, length=1)

    def body(h, i):
        jnp.cos(h)
        return checkpoint_name(i, "a")
    return jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"),
                          prevent_cse=False)(ys, a), c


def _top_k_in_jit(a, b):
    """finding 30aa3c588d (0.4.25): top_k's old JVP indices, outputs of a jit."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f0(e, f):
        jnp.cos(e)
        return lax.top_k(f, 2)
    return jax.jit(f0)(a, b)


def _checkpoint_output_only_a_comparison_reads(a, b):
    """finding e87b8eeec4 (0.4.25): a checkpoint's output read only by a
    comparison (a select's predicate) has no tangent read, but the staged
    checkpoint computes it, and saves what that needs."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name
    names = jax.checkpoint_policies.save_only_these_names("a")
    f, g = jax.checkpoint(lambda h: (jnp.sin(h), checkpoint_name(h, "a")),
                          policy=jax.checkpoint_policies.save_from_both_policies(names, names),
                          prevent_cse=False)(a)
    return lax.select_n(f > 0, a, b), jnp.sin(a), g


def _zero_power_beside_a_predicate(a):
    """finding af1a5299da (0.4.36): x ** 0's instantiated zero tangent saved
    before the select's predicate."""
    from jax import lax
    b = lax.integer_pow(a, 0)
    return lax.select_n(a > b, a, b)


def _custom_vjp_on_a_scan_constant(b, z):
    """finding 9f1df10184 (0.4.36): a custom_vjp call on a scan's constant, its
    ys unused: kept, loop-invariant, hoisted, saved as its rule computes it."""
    from jax import lax
    import jax.numpy as jnp
    csin = _csin()
    return lax.scan(lambda c, x: (jnp.sin(c), csin(b)), z, None, length=3)[0]


def _name_of_a_custom_jvp_output(a):
    """finding 25f4da98ad (0.6.2): a checkpoint_name of a custom_jvp's output
    passed into a checkpoint; JAX names the saved value `named 'b'`, the
    spec by what the rule computes it with (`output of sin`)."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    @jax.custom_jvp
    def s(x):
        return jnp.sin(x)
    s.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.cos(p[0]) * t[0]))
    names = jax.checkpoint_policies.save_only_these_names("a", "b")
    g, h = jax.checkpoint(lambda i: (checkpoint_name(i, "b"), i), prevent_cse=False,
                          policy=jax.checkpoint_policies.save_from_both_policies(
                              names, jax.checkpoint_policies.dots_saveable))(s(a))
    return g, jnp.sin(a), h * h


def _acosh_under_a_policy_saving_mul(a, b):
    """finding 7ce66fc78c (0.6.2): acosh's JVP before 0.8.0 multiplies
    (x - 1) by (x + 1), a product a policy saving `mul` saves; 0.4.25's
    policy (a closure) is asked about the rule's square as integer_pow."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name

    def body(e, f):
        checkpoint_name(e, "a")
        return jnp.arccosh(f + 1.0), e
    policy = (lambda prim, *_, **params: params.get("name") in ["a"] if prim.name == "name"
              else prim.name in ["mul", "sin"])
    return jax.checkpoint(body, policy=policy, prevent_cse=False)(a, b)[0]


def _a_name_of_a_name(b):
    """finding d681480a61 (0.6.2): checkpoint_name 'c' of checkpoint_name 'a'
    of a checkpoint's input; JAX names the two saved values `named 'a'` and
    `named 'c'`, the spec `output of div` and `named 'a'`."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    def body(m):
        n = checkpoint_name(m, "a")
        q = lax.stop_gradient(n) * n
        checkpoint_name(q, "b")
        return checkpoint_name(n, "c"), q, m
    first = lambda prim, *_, **params: (params.get("name") in ["a"] if prim.name == "name"
                                        else prim.name in ["add", "tanh"])
    second = lambda prim, *_, **params: (params.get("name") in ["a", "b", "c"] if prim.name == "name"
                                         else prim.name in ["mul"])
    j, k, l = jax.checkpoint(body, policy=jax.checkpoint_policies.save_from_both_policies(first, second),
                             prevent_cse=False)(jnp.sin(b) / (b * b + 1.0))
    return j, k, l * l


def _name_of_a_checkpoint_output(a):
    """finding 555684c92b (0.6.2): checkpoint_name of a checkpoint's output
    (a sin), read again: JAX names the saved value `named 'a'`, the spec
    `output of sin`."""
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name
    b = jax.checkpoint(jnp.sin, prevent_cse=False)(a)
    return b * b, checkpoint_name(b, "a")


def _zero_power_then_a_first_power_in_a_scan(a):
    """finding 255e44caa6 (0.4.36): x ** 0 then ** 1 in a scan body: JAX saves
    the old rule's factor stacked, where the spec saves the zero once."""
    from jax import lax

    def body(d, _):
        f = lax.integer_pow(lax.integer_pow(d, 0), 1)
        return f, f
    return lax.scan(body, a, None, length=1)[0]


def _while_in_a_checkpoint(a, h):
    """finding 781b998cd7 (0.4.25): historic bug 16, jit(vjp) of a
    checkpointed while loop that reads a closed-over value."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    loop = lambda l: lax.while_loop(lambda n: n < 0.5, lambda q: q + (1.0 + 0.1 * jnp.tanh(jnp.sum(l))), 0.0)
    return a * jax.checkpoint(loop)(h)


def _while_from_a_constant(a):
    """finding a53ac742be (0.4.36 and 0.10.2, tenth session; a spec bug): a
    loop whose carry starts at a Python float and becomes differentiated
    saves its zero initial tangent, computed in the primal trace."""
    import jax.numpy as jnp
    from jax import lax
    return lax.while_loop(lambda c: c < 0.5, lambda c: c + (1.0 + 0.1 * jnp.tanh(jnp.sin(a))), 0.0)


def _rounding_beside_a_checkpoint_saving_tanh(a, b):
    """finding 29a20f31dd (0.4.36, tenth session): a program's own
    reduce_precision beside a checkpoint whose policy saves tanh, which
    remat's rounding names `output of reduce_precision` (0.4.31-0.6.2)."""
    import jax
    from jax import lax
    t = jax.checkpoint(lax.tanh, policy=jax.checkpoint_policies.everything_saveable, prevent_cse=False)(a)
    return t, lax.reduce_precision(b, exponent_bits=11, mantissa_bits=52)


def _rounded_argument_beside_two_sines(a, c):
    """finding f4fa9b4878 (0.4.36, tenth session): a program's own
    reduce_precision of an argument, saved; before 0.10.2 JAX lists it as
    `output of reduce_precision` after the outputs of cos, the spec (as
    0.10.2) as the argument, before them."""
    from jax import lax
    d, e = lax.sin(a), lax.sin(a)
    r = lax.reduce_precision(c, exponent_bits=11, mantissa_bits=52)
    return lax.dot_general(r, r.T, (((0, 1), (1, 0)), ((), ()))), d, e


def _name_of_an_input_beside_a_python_float(a):
    """finding 7c8ec56c71 (0.6.2, ninth session): a name of a checkpoint's
    input, and a product with a Python float outside: JAX (0.4.31-0.6.2)
    names the saved name `output of reduce_precision`, which the
    normalisation renamed to the spec's `from a literal` (JAX saves no
    literal for a Python float)."""
    import jax
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name
    b = jax.checkpoint(lambda c: lax.mul(c, checkpoint_name(c, "a")),
                       policy=jax.checkpoint_policies.save_only_these_names("a"), prevent_cse=False)(a)
    return lax.mul(0.5, a), b


def _zero_power_read_by_an_add_and_a_mul(a):
    """finding 24ebec2e58 (0.4.25, ninth session): a ** 0 read by an add and a
    mul: without direct linearization JAX saves the zero and its product."""
    from jax import lax
    b = lax.integer_pow(a, 0)
    return a * b, a + b


def _unread_operand_beside_a_nested_cond_s_dead_tangent(a, c):
    """findings 9c7ee1ddb6 (0.4.25) and c00fe4aedb (0.4.36), ninth session:
    a cond's operand no branch reads, whose tangent JAX computes before
    direct linearization, and in a branch a nested cond with an operand it
    does not read, whose float output nothing reads (its bool one is): the
    branch's partial evaluation stages nothing of the nested cond, so its
    unread operand's tangent is not computed."""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    d = np.array([0.5, -0.25, 1.0], np.float32)
    left = jnp.concatenate([d, a, d])

    def reads_the_mask(w, x):
        s = jnp.sin(w)
        _, mask = lax.cond(jnp.sum(w) > 0.0, lambda u, s: (jnp.cos(u), u > 0.5),
                           lambda u, s: (u * 2.0, u < 0.0), w, s)
        return jnp.where(mask, jnp.cos(w), w)
    return lax.cond(jnp.sum(left) > 0.0, reads_the_mask, lambda w, x: jnp.cos(w), c, left)


def _zero_power_read_in_a_scan_body(a):
    """finding 50a06245e8 (0.4.36, ninth session): a ** 0 a scan body reads
    as a constant, through cos: without direct linearization JAX saves the
    factor of cos's JVP (`output of neg`) for the instantiated zero."""
    import jax.numpy as jnp
    from jax import lax
    b = lax.integer_pow(a, 0)
    return lax.scan(lambda c, _: (jnp.cos(b), jnp.cos(b)), a, None, length=1)[0]


def _checkpoint_output_only_a_stop_gradient_reads(a):
    """finding 1b91103ba3 (0.6.2, ninth session): a checkpoint's output
    read only through stop_gradient: its tangent is unused, and JAX before
    direct linearization still computes it and saves what it needs."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    m, n = jax.checkpoint(lambda o: (jnp.sin(o), o * 2.0), prevent_cse=False)(a)
    return lax.stop_gradient(m) * n


def _atan2_whose_output_only_a_nested_cond_s_pred_reads(a, b, c, d):
    """finding 2fdcc71fce (0.4.36, round t): atan2 in a cond branch whose
    output a nested cond takes as an operand its branches do not read (only
    its predicate reads it): before direct linearization its tangent is
    computed, saving atan2's old JVP factors, all named `output of cond`."""
    import jax.numpy as jnp
    from jax import lax

    def inner(n, o, p, q):
        r = lax.atan2(p, q)
        return lax.cond(jnp.sum(r) > 0, lambda w, x: jnp.sin(w), lambda z, y: jnp.sin(z), n, r)
    return lax.cond(b > 0, inner, lambda i, j, k, l: jnp.sin(i), a, b, c, d)


def _dead_carry_of_a_scan_whose_ys_have_zero_tangents(c, l):
    """finding 1ed27537b9 (0.6.2, round t): a scan body runs a scan whose
    carry only feeds itself (unused at the end) and whose ys read only
    floor's output (a zero tangent); the outer scan's ys are unused. Before
    direct linearization the outer ys' tangent factor is kept, and nothing
    of the inner carry: no tangent equation reaches the inner scan. In a
    jit, as the campaign wrote it: its saved values are all outputs of the
    jit, so only their number tells."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def prog(c, l):
        m = jnp.floor(l)

        def outer(carry, x):
            inner = lambda c, y: (jnp.sin(c), lax.integer_pow(jnp.square(y) + 1.0, -1))
            return lax.scan(inner, carry, m)[1], jnp.sin(x)
        return lax.scan(outer, c, l)[0]
    return jax.jit(prog)(c, l)


def _custom_vjp_in_a_scan_on_an_outer_scan_s_const(a):
    """finding 0487788b2e (0.4.25, round u): a custom_vjp function in a scan
    that runs on an outer scan's const (the outer carry unread): the
    custom_vjp's output is saved stacked by the inner scan alone, hoisted
    out of the outer one."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda cos_x, g: (cos_x * g,))

    def inner(h, _):
        y = f(h)
        return y, y

    def outer(carry, _):
        h = lax.scan(inner, a, None, length=1)[0]
        return h, h
    return lax.scan(outer, a, None, length=1)[0]


def _zero_power_out_of_a_checkpoint_times_its_input(a):
    """finding 16458c5e30 (0.6.2, round v): a checkpoint returns d ** 0
    (and d), and its input is multiplied by it after the checkpoint: before
    direct linearization the known zero tangent's product is saved."""
    import jax
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    def region(d):
        checkpoint_name(d, "a")
        return lax.integer_pow(d, 0), d
    b, _ = jax.checkpoint(region, policy=jax.checkpoint_policies.save_only_these_names("a"))(a)
    return a * b


def _name_of_a_scan_slice_in_a_checkpoint(a):
    """finding 6ca4cfaa20 (0.4.36, round v): a checkpoint in a scan body
    names a value the body closes over (a scan const: the stacked output of
    an earlier scan), whose known part the scan hoists: 0.4.26 to 0.10.1
    call it `named 'a'`, and the earlier scan's other saved output too."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    g, h = lax.scan(lambda k, x: (jnp.sin(k), jnp.sin(x)), a[0], a)

    def region(v, c):
        return jnp.vdot(jnp.square(checkpoint_name(v, "a")), v) * c

    def body(c, _):
        return c * 0.9, jax.checkpoint(region, policy=jax.checkpoint_policies.dots_saveable)(h, c)
    return lax.scan(body, jnp.cos(a[1]), None, length=2)[1], g


def _name_of_a_checkpoint_input_a_jit_returns(a):
    """finding c195b3d415 (0.6.2, round w): in a scan body, a checkpoint
    names (by 'b') what a jit returns of its input; the input is saved:
    0.4.26 to 0.10.1 call it `named 'b'`, the spec by its producer."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    def region(i):
        j = jax.jit(lambda k: k)(i)
        checkpoint_name(i, "a")
        jnp.sin(i)
        return checkpoint_name(j, "b"), i
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(cp.save_only_these_names("a"), cp.save_only_these_names("a", "b"))

    def body(c, _):
        g = jax.checkpoint(region, policy=policy)(jnp.tanh(a))[0]
        return g, g
    return lax.scan(body, a, None, length=1)[0]


def _rounded_output_of_a_nested_checkpoint(a):
    """finding 676d570056 (0.6.2, round w): nested checkpoints, the outer
    everything_saveable; the middle one's scalar output, saved and read by
    a product, is rounded right after the middle checkpoint, so 0.4.31 to
    0.10.1 list it after that checkpoint's other saved outputs."""
    import jax
    import jax.numpy as jnp

    def outer(c):
        def mid(e):
            fe, _ = jax.checkpoint(lambda h: (jnp.sin(h), h))(e)
            return jnp.vdot(e, fe)
        return jax.checkpoint(mid)(c) * c
    return jax.checkpoint(outer, policy=jax.checkpoint_policies.everything_saveable)(a)


EIGHTH_ROUND = {       # and the ninth and eleventh sessions'
    "rounded_output_of_a_nested_checkpoint": (_rounded_output_of_a_nested_checkpoint,
                                              lambda np: (np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3),)),
    "name_of_a_checkpoint_input_a_jit_returns": (_name_of_a_checkpoint_input_a_jit_returns,
                                                 lambda np: (np.float32(0.6),)),
    "name_of_a_scan_slice_in_a_checkpoint": (_name_of_a_scan_slice_in_a_checkpoint,
                                             lambda np: (np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3),)),
    "zero_power_out_of_a_checkpoint_times_its_input": (_zero_power_out_of_a_checkpoint_times_its_input,
                                                       lambda np: (np.float32(0.7),)),
    "custom_vjp_in_a_scan_on_an_outer_scan_s_const": (_custom_vjp_in_a_scan_on_an_outer_scan_s_const,
                                                      lambda np: (np.float32(0.7),)),
    "dead_carry_of_a_scan_whose_ys_have_zero_tangents": (
        _dead_carry_of_a_scan_whose_ys_have_zero_tangents,
        lambda np: (np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(2, 2, 3),
                    np.linspace(0.5, 2.5, 12, dtype=np.float32).reshape(2, 2, 3))),
    "atan2_whose_output_only_a_nested_cond_s_pred_reads": (
        _atan2_whose_output_only_a_nested_cond_s_pred_reads,
        lambda np: (np.float32(0.4), np.float32(0.9), np.array([[0.3, -0.2, 0.5], [1.1, 0.4, -0.7]], np.float32),
                    np.array([[0.6, 0.8, -0.3], [0.2, -1.3, 0.9]], np.float32))),
    "checkpoint_output_only_a_stop_gradient_reads": (_checkpoint_output_only_a_stop_gradient_reads,
                                                      lambda np: (np.array([0.3, -0.2, 0.5], np.float32),)),
    "zero_power_read_in_a_scan_body": (_zero_power_read_in_a_scan_body, lambda np: (np.float32(0.7),)),
    "unread_operand_beside_a_nested_cond_s_dead_tangent": (
        _unread_operand_beside_a_nested_cond_s_dead_tangent,
        lambda np: (np.array([0.3, 0.2, -0.1], np.float32), np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], np.float32))),
    "name_of_an_input_beside_a_python_float": (_name_of_an_input_beside_a_python_float,
                                               lambda np: (np.float32(-1.1),)),
    "zero_power_read_by_an_add_and_a_mul": (_zero_power_read_by_an_add_and_a_mul, lambda np: (np.float32(0.7),)),
    "stacked_factor_in_jit": (_stacked_factor_in_jit, lambda np: (np.array([-1.1, 0.7, 0.5], np.float32),)),
    "custom_vjp_output_saved_by_policy": (_custom_vjp_output_saved_by_policy, lambda np: (np.float32(-1.1),)),
    "nested_jits_unused_outputs": (_nested_jits_unused_outputs,
                                   lambda np: (np.float32(0.3), np.ones((2, 3), np.float32))),
    "custom_vjp_in_jitted_scan": (_custom_vjp_in_jitted_scan, lambda np: (np.float32(0.4),)),
    "scan_zero_carry_in_jit": (_scan_zero_carry_in_jit, lambda np: (np.full((2, 3), 1.7, np.float32),)),
    "scan_ys_only_a_checkpoint_s_dead_code_reads": (_scan_ys_only_a_checkpoint_s_dead_code_reads,
                                                    lambda np: (np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 2, 3),)),
    "top_k_in_jit": (_top_k_in_jit, lambda np: (np.float32(0.3), np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5))),
    "checkpoint_output_only_a_comparison_reads": (_checkpoint_output_only_a_comparison_reads,
                                                  lambda np: (np.float32(0.4), np.float32(-0.2))),
    "zero_power_beside_a_predicate": (_zero_power_beside_a_predicate,
                                      lambda np: (np.array([0.5, 1.5, 2.0], np.float32),)),
    "custom_vjp_on_a_scan_constant": (_custom_vjp_on_a_scan_constant,
                                      lambda np: (np.float32(0.3), np.array([0.1, 0.2, 0.3], np.float32))),
    "name_of_a_custom_jvp_output": (_name_of_a_custom_jvp_output, lambda np: (np.float32(0.7),)),
    "acosh_under_a_policy_saving_mul": (_acosh_under_a_policy_saving_mul,
                                        lambda np: (np.float32(0.3), np.linspace(0.5, 1.5, 6, dtype=np.float32).reshape(2, 3))),
    "a_name_of_a_name": (_a_name_of_a_name, lambda np: (np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2),)),
    "name_of_a_checkpoint_output": (_name_of_a_checkpoint_output, lambda np: (np.float32(0.6),)),
    "zero_power_then_a_first_power_in_a_scan": (_zero_power_then_a_first_power_in_a_scan,
                                                lambda np: (np.array([0.5, 1.5, 2.0], np.float32),)),
    "while_in_a_checkpoint": (_while_in_a_checkpoint, lambda np: (np.float32(0.3), np.full(3, 0.1, np.float32))),
    "cond_with_a_loop_in_jit": (_cond_with_a_loop_in_jit,
                                lambda np: (np.array([0.1, -0.5, 0.2], np.float32), np.full((2, 3), 0.3, np.float32))),
    "while_from_a_constant": (_while_from_a_constant, lambda np: (np.float32(-1.13),)),
    "custom_vjp_in_a_checkpoint_in_a_jit": (_custom_vjp_in_a_checkpoint_in_a_jit, lambda np: (np.float32(-1.1),)),
    "zero_power_carry_of_nested_scans_in_jit": (_zero_power_carry_of_nested_scans_in_jit,
                                                lambda np: (np.linspace(-1.2, 1.3, 12, dtype=np.float32).reshape(2, 2, 3),)),
    "zero_power_times_a_dot_in_jit": (_zero_power_times_a_dot_in_jit,
                                      lambda np: (np.linspace(-1.2, 1.3, 12, dtype=np.float32).reshape(2, 2, 3),)),
    "checkpoint_of_a_rounded_input_in_jit": (_checkpoint_of_a_rounded_input_in_jit,
                                             lambda np: (np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),)),
    "atan2_in_a_nested_checkpoint": (_atan2_in_a_nested_checkpoint,
                                     lambda np: (np.array([0.3, -0.5, 1.2, 0.8], np.float32), np.float32(0.7))),
    "custom_vjp_output_saved_rounded": (_custom_vjp_output_saved_rounded, lambda np: (np.float32(-1.1),)),
    "cond_zero_out_of_a_jit": (_cond_zero_out_of_a_jit, lambda np: (np.float32(0.3),)),
    "custom_vjp_output_in_a_nested_checkpoint": (_custom_vjp_output_in_a_nested_checkpoint,
                                                 lambda np: (np.array([0.3, -0.2, 0.5], np.float32),)),
    "name_of_a_jit_s_forwarded_input": (_name_of_a_jit_s_forwarded_input,
                                        lambda np: (np.float32(0.3), np.array([0.4, 0.5], np.float32))),
    "loop_reading_a_checkpointed_value_in_dead_code": (_loop_reading_a_checkpointed_value_in_dead_code,
                                                       lambda np: (np.array([0.3, -0.2, 0.5], np.float32),)),
    "custom_vjp_in_a_scan_in_a_scan": (_custom_vjp_in_a_scan_in_a_scan, lambda np: (np.float32(0.4),)),
    "name_of_an_input_beside_a_rounding": (_name_of_an_input_beside_a_rounding, lambda np: (np.float32(0.3),)),
    "name_of_a_checkpoint_s_forwarded_input": (_name_of_a_checkpoint_s_forwarded_input,
                                               lambda np: (np.float32(0.7),)),
    "custom_vjp_in_a_nested_checkpoint": (_custom_vjp_in_a_nested_checkpoint, lambda np: (np.float32(0.4),)),
    "rounded_argument_beside_two_sines": (_rounded_argument_beside_two_sines,
                                          lambda np: (np.float32(0.4), np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))),
    "rounding_beside_a_checkpoint_saving_tanh": (_rounding_beside_a_checkpoint_saving_tanh,
                                                 lambda np: (np.float32(-1.13), np.full((3, 4), 0.6, np.float32))),
}
_F0, _PROG = "output of jitted function 'f0'", "output of jitted function 'prog'"
EIGHTH_ROUND_RECORDED = {      # saved_residuals, names as 0.4.36 on gives them
    "rounded_output_of_a_nested_checkpoint": {
        **{r: [("f32[2,3]", "from the argument a"), ("f32[]", "output of remat2"), ("f32[2,3]", "output of remat2"),
               ("f32[6]", "output of remat2"), ("f32[6]", "output of remat2")] for r in ("0.4.25", "0.10.2")},
        **{r: [("f32[2,3]", "from the argument a"), ("f32[2,3]", "output of remat2"), ("f32[6]", "output of remat2"),
               ("f32[6]", "output of remat2"), ("f32[]", "output of reduce_precision")] for r in ("0.4.36", "0.6.2")}},
    "name_of_a_checkpoint_input_a_jit_returns": {
        r: [("f32[]", first), ("f32[]", "output of sub")]
        for r, first in (("0.4.25", "output of tanh"), ("0.4.36", "named 'b'"), ("0.6.2", "named 'b'"),
                         ("0.10.2", "output of tanh"))},
    "name_of_a_scan_slice_in_a_checkpoint": {
        **{r: [("f32[4,3]", first)] * 3 + [("f32[3]", "output of sin"), ("f32[]", dot), ("f32[2,3]", "output of scan")]
           for r, first, dot in (("0.4.25", "output of scan", "output of dot_general"),
                                 ("0.4.36", "named 'a'", "output of reduce_precision"),
                                 ("0.6.2", "named 'a'", "output of reduce_precision"),
                                 ("0.10.2", "output of scan", "output of dot_general"))}},
    "zero_power_out_of_a_checkpoint_times_its_input": {
        **{r: [("f32[]", "output of integer_pow"), ("f32[]", "output of mul")] for r in ("0.4.25", "0.4.36", "0.6.2")},
        "0.10.2": [("f32[]", "output of integer_pow")]},
    "custom_vjp_in_a_scan_on_an_outer_scan_s_const": {
        **{r: [("f32[1]", "output of scan")] * 2 for r in ("0.4.25", "0.4.36")},
        **{r: [("f32[1]", "output of scan")] for r in ("0.6.2", "0.10.2")}},
    "dead_carry_of_a_scan_whose_ys_have_zero_tangents": {
        **{r: [("f32[2,2,3]", _PROG)] * 2 for r in ("0.4.25", "0.4.36", "0.6.2")}, "0.10.2": [("f32[2,2,3]", _PROG)]},
    "atan2_whose_output_only_a_nested_cond_s_pred_reads": {
        **{r: [("i32[]", "output of convert_element_type"), ("f32[]", "output of cond"), ("i32[]", "output of cond")]
           + [("f32[2,3]", "output of cond")] * n for r, n in (("0.4.25", 3), ("0.4.36", 3), ("0.6.2", 2))},
        "0.10.2": [("i32[]", "output of convert_element_type"), ("f32[]", "output of cond"),
                   ("i32[]", "output of cond")]},
    "checkpoint_output_only_a_stop_gradient_reads": {
        **{r: [("f32[3]", "from the argument a"), ("f32[3]", "output of stop_gradient")]
           for r in ("0.4.25", "0.4.36", "0.6.2")},
        "0.10.2": [("f32[3]", "output of stop_gradient")]},
    "zero_power_read_in_a_scan_body": {**{r: [("f32[]", "output of neg")] for r in ("0.4.25", "0.4.36", "0.6.2")},
                                       "0.10.2": []},
    "unread_operand_beside_a_nested_cond_s_dead_tangent": {
        **{r: [("f32[3]", "output of broadcast_in_dim"), ("f32[3]", "output of broadcast_in_dim"),
               ("i32[]", "output of convert_element_type"), ("f32[2,3]", "output of cond"),
               ("bool[2,3]", "output of cond")] for r in ("0.4.25", "0.4.36", "0.6.2")},
        "0.10.2": [("i32[]", "output of convert_element_type"), ("f32[2,3]", "output of cond"),
                   ("bool[2,3]", "output of cond")]},
    "name_of_an_input_beside_a_python_float": {
        "0.4.25": [("f32[]", "from the argument a"), ("f32[]", "named 'a'")],
        "0.4.36": [("f32[]", "from the argument a"), ("f32[]", "output of reduce_precision")],
        "0.6.2": [("f32[]", "from the argument a"), ("f32[]", "output of reduce_precision")],
        "0.10.2": [("f32[]", "from the argument a"), ("f32[]", "named 'a'")]},
    "zero_power_read_by_an_add_and_a_mul": {
        **{r: [("f32[]", "from a literal"), ("f32[]", "output of integer_pow"), ("f32[]", "output of mul")]
           for r in ("0.4.25", "0.4.36", "0.6.2")},
        "0.10.2": [("f32[]", "output of integer_pow")]},
    "stacked_factor_in_jit": {
        "0.4.25": [("f32[3,3]", _F0), ("f32[3]", _F0), ("f32[3]", "output of cos")],
        "0.4.36": [("f32[3,3]", _F0), ("f32[3]", _F0), ("f32[3]", "output of cos")],
        "0.6.2": [("f32[3,3]", _F0), ("f32[3]", _F0), ("f32[3]", "output of cos")],
        "0.10.2": [("f32[3,3]", _F0), ("f32[3]", "output of cos")]},
    "custom_vjp_output_saved_by_policy": {
        "0.4.25": [("f32[]", "from the argument a"), ("f32[]", "output of sin")],
        "0.4.36": [("f32[]", "from the argument a"), ("f32[]", "output of sin")],
        "0.6.2": [("f32[]", "from the argument a")],
        "0.10.2": [("f32[]", "from the argument a")]},
    "nested_jits_unused_outputs": {
        "0.4.25": [("f32[]", _F0), ("f32[]", _F0)],
        "0.4.36": [("f32[]", _F0), ("f32[]", _F0)],
        "0.6.2": [("f32[]", _F0), ("f32[]", _F0)],
        "0.10.2": [("f32[]", _F0)]},
    "custom_vjp_in_jitted_scan": {
        "0.4.25": [("f32[1]", _PROG)] * 2,       # the tied output too (historic bug 4)
        "0.4.36": [("f32[1]", _PROG)] * 2,
        "0.6.2": [("f32[1]", _PROG)],
        "0.10.2": [("f32[1]", _PROG)]},
    "scan_zero_carry_in_jit": {r: [("f32[2,3]", _PROG)] for r in ("0.4.25", "0.4.36", "0.6.2", "0.10.2")},
    "scan_ys_only_a_checkpoint_s_dead_code_reads": {
        r: [("f32[1,2,2,3]", "output of scan")] + [("f32[1,12]", "output of scan")] * 2
        for r in ("0.4.25", "0.4.36", "0.6.2")} | {"0.10.2": [("f32[1,2,2,3]", "output of scan")]},
    "top_k_in_jit": {"0.4.25": [("i32[3,2,2]", _F0)]} | {
        r: [("i32[3,2,1]", _F0)] for r in ("0.4.36", "0.6.2", "0.10.2")},
    "checkpoint_output_only_a_comparison_reads": {
        r: [("f32[]", "from the argument a"), ("bool[]", "output of gt"), ("f32[]", "output of cos")]
        for r in ("0.4.25", "0.4.36", "0.6.2")} | {
        "0.10.2": [("bool[]", "output of gt"), ("f32[]", "output of cos")]},
    "zero_power_beside_a_predicate": {
        r: [("f32[3]", "output of broadcast_in_dim"), ("bool[3]", "output of gt")]
        for r in ("0.4.25", "0.4.36", "0.6.2")} | {
        "0.10.2": [("bool[3]", "output of gt"), ("f32[3]", "output of broadcast_in_dim")]},
    "custom_vjp_on_a_scan_constant": {
        r: [("f32[]", "output of sin"), ("f32[]", "output of cos"), ("f32[3,3]", "output of scan")]
        for r in ("0.4.25", "0.4.36")} | {
        "0.6.2": [("f32[]", "output of cos"), ("f32[3,3]", "output of scan")],
        "0.10.2": [("f32[3,3]", "output of scan")]},
    "name_of_a_custom_jvp_output": {
        r: [("f32[]", first), ("f32[]", "output of cos"), ("f32[]", "output of cos")]
        for r, first in (("0.4.25", "output of sin"), ("0.4.36", "named 'b'"), ("0.6.2", "named 'b'"),
                         ("0.10.2", "output of sin"))},
    "acosh_under_a_policy_saving_mul": {      # 0.4.25: `output of pjit`, not recorded
        r: [("f32[2,3]", "output of jitted function 'arccosh'")] for r in ("0.4.36", "0.6.2")} | {
        "0.10.2": [("f32[2,3]", "from the argument b")]},
    "a_name_of_a_name": {
        r: [("f32[3,2]", "from the argument b"), ("f32[3,2]", "output of sin"), ("f32[3,2]", "output of cos"),
            ("f32[3,2]", "output of add"), ("f32[3,2]", fifth), ("f32[3,2]", "output of integer_pow"),
            ("f32[3,2]", last)]
        for r, fifth, last in (("0.4.25", "output of div", "named 'a'"), ("0.4.36", "named 'a'", "named 'c'"),
                               ("0.6.2", "named 'a'", "named 'c'"), ("0.10.2", "output of div", "named 'a'"))},
    "name_of_a_checkpoint_output": {
        r: [("f32[]", "from the argument a"), ("f32[]", last)]
        for r, last in (("0.4.25", "output of sin"), ("0.4.36", "named 'a'"), ("0.6.2", "named 'a'"),
                        ("0.10.2", "output of sin"))},
    "zero_power_then_a_first_power_in_a_scan": {
        r: [("f32[1,3]", "output of scan")] for r in ("0.4.25", "0.4.36", "0.6.2")} | {
        "0.10.2": [("f32[3]", "output of broadcast_in_dim")]},
    "while_in_a_checkpoint": {
        r: [("f32[]", "from the argument a"), ("f32[3]", "from the argument h"), ("f32[]", "output of while")]
        for r in ("0.4.25", "0.4.36", "0.6.2", "0.10.2")},
    "cond_with_a_loop_in_jit": {   # 0.10.2's own list: 4 f32[3], 2 more than merged slots would be
        r: [(t, _PROG) for t in ["i32[]", "f32[]", "f32[2,3]", "f32[]", "f32[]"] + ["f32[3]"] * 4]
        for r in ("0.4.25", "0.4.36", "0.6.2")} | {
        "0.10.2": [(t, _PROG) for t in ["i32[]", "f32[2,3]", "f32[]", "f32[]", "f32[]"] + ["f32[3]"] * 4]},
    "custom_vjp_output_saved_rounded": {
        r: ([("f32[]", first)] if first else []) + [("f32[]", "output of cos")] * 2
        for r, first in (("0.4.25", "output of sin"), ("0.4.36", "output of reduce_precision"), ("0.6.2", None),
                         ("0.10.2", None))},
    "name_of_an_input_beside_a_rounding": {
        r: [("f32[]", "output of sin"), ("f32[]", "output of cos"), ("f32[]", "named 'a'")]
        for r in ("0.4.25", "0.10.2")} | {
        r: [("f32[]", "named 'a'"), ("f32[]", "output of cos"), ("f32[]", "output of reduce_precision")]
        for r in ("0.4.36", "0.6.2")},
    "name_of_a_checkpoint_s_forwarded_input": {
        r: [("f32[]", first), ("f32[]", "output of cos"), ("f32[]", "output of cos"), ("f32[]", "named 'b'")]
        for r, first in (("0.4.25", "output of sin"), ("0.4.36", "named 'b'"), ("0.6.2", "named 'b'"),
                         ("0.10.2", "output of sin"))},
    "loop_reading_a_checkpointed_value_in_dead_code": {
        **{r: [("f32[3]", "from the argument a")] for r in ("0.4.25", "0.4.36", "0.6.2")}, "0.10.2": []},
    "name_of_a_jit_s_forwarded_input": {
        r: [("f32[1]", first), ("f32[]", _F0)]
        for r, first in (("0.4.25", "output of slice"), ("0.4.36", "named 'a'"), ("0.6.2", "named 'a'"),
                         ("0.10.2", "output of slice"))},
    "custom_vjp_in_a_scan_in_a_scan": {r: [("f32[1,1]", "output of scan")] * n for r, n in (
        ("0.4.25", 2), ("0.4.36", 2), ("0.6.2", 1), ("0.10.2", 1))},
    "custom_vjp_output_in_a_nested_checkpoint": {
        r: [("f32[6]", "output of remat2")] * n + [("f32[12]", "output of cos")]
        for r, n in (("0.4.25", 2), ("0.4.36", 2), ("0.6.2", 1), ("0.10.2", 1))},
    "cond_zero_out_of_a_jit": {r: [(t, _F0) for t in ("i32[]", "f32[]", "f32[]")]
                               for r in ("0.4.25", "0.4.36", "0.6.2", "0.10.2")},
    "custom_vjp_in_a_nested_checkpoint": {r: [("f32[]", "output of remat2")] * n for r, n in (
        ("0.4.25", 2), ("0.4.36", 2), ("0.6.2", 1), ("0.10.2", 1))},
    "rounded_argument_beside_two_sines": {
        **{r: [("f32[]", "output of cos"), ("f32[]", "output of cos"), ("f32[3,4]", "output of reduce_precision"),
               ("f32[4,3]", "output of transpose")] for r in ("0.4.25", "0.4.36", "0.6.2")},
        "0.10.2": [("f32[3,4]", "from the argument c"), ("f32[]", "output of cos"), ("f32[]", "output of cos"),
                   ("f32[4,3]", "output of transpose")]},
    "while_from_a_constant": {r: [("f32[]", "from a literal"), ("f32[]", "from the argument a")]
                              for r in ("0.4.25", "0.4.36", "0.6.2", "0.10.2")},
    "rounding_beside_a_checkpoint_saving_tanh": {
        r: [("f32[]", first), ("f32[]", "output of sub")]
        for r, first in (("0.4.25", "output of tanh"), ("0.4.36", "output of reduce_precision"),
                         ("0.6.2", "output of reduce_precision"), ("0.10.2", "output of tanh"))},
    "custom_vjp_in_a_checkpoint_in_a_jit": {
        **{r: [("f32[]", "from the argument a"), ("f32[]", _F0)] for r in ("0.4.25", "0.4.36")},
        **{r: [("f32[]", _F0)] for r in ("0.6.2", "0.10.2")}},
    "zero_power_carry_of_nested_scans_in_jit": {
        **{r: [("f32[2,2,3]", _F0), ("f32[2,2,2,2,3]", _F0), ("f32[2,2,1,4,1]", _F0), ("f32[2,2,1,4,1]", _F0)]
           for r in ("0.4.25", "0.4.36")},
        "0.6.2": [("f32[2,2,3]", _F0), ("f32[2,2,2,2,3]", _F0), ("f32[2,2,1,4,1]", _F0)],
        "0.10.2": [("f32[2,2,3]", _F0), ("f32[2,2,3]", _F0)]},
    "zero_power_times_a_dot_in_jit": {
        **{r: [("f32[3]", _F0)] + [("f32[2,2,3]", _F0)] * 3 for r in ("0.4.25", "0.4.36", "0.6.2")},
        "0.10.2": [("f32[2,2,3]", _F0)] * 3},
    "checkpoint_of_a_rounded_input_in_jit": {r: [("f32[3,4]", _F0)] for r in ("0.4.25", "0.4.36", "0.6.2", "0.10.2")},
    "atan2_in_a_nested_checkpoint": {
        **{r: [("f32[4]", "output of remat2")] * 3 + [("f32[4]", "output of cos")] for r in ("0.4.25", "0.4.36")},
        **{r: [("f32[4]", "output of remat2")] * 2 + [("f32[4]", "output of cos")] for r in ("0.6.2", "0.10.2")}},
}


# where a release diverges though its list is 0.10.2's: jax 0.10.2 itself
# saves more than the spec (a known divergence there too), or jit(vjp) fails
# to compile (historic bug 16, the vjp_leaves property)
OTHERWISE_DIVERGENT = {"cond_with_a_loop_in_jit", "while_in_a_checkpoint", "cond_zero_out_of_a_jit",
                       "name_of_an_input_beside_a_python_float"}   # (the Python float: JAX saves no literal)


@pytest.mark.parametrize("label", sorted(EIGHTH_ROUND))
def test_eighth_round_findings_on_the_installed_release(label):
    """JAX's list is the one recorded for the installed release (where one
    is), and oracle.check raises no Mismatch: ok where the list is 0.10.2's
    (the spec's), a known divergence where JAX saves more."""
    import jax
    import numpy as np

    import oracle
    from oracle.properties import jax_residuals

    fn, args = EIGHTH_ROUND[label]
    args = args(np)
    recorded = EIGHTH_ROUND_RECORDED[label]
    got = [(t, s.replace("output of pjit", _PROG if "jit(prog)" in inspect.getsource(fn) else _F0))
           for t, s in jax_residuals(fn, args)]
    if jax.__version__ in recorded:
        assert got == recorded[jax.__version__]
    report = oracle.check(fn, oracle.AS_IS, *args, implementations=("remat2",),
                          properties=("residuals", "vjp_leaves"))
    expected = ("ok",) if got == recorded["0.10.2"] and label not in OTHERWISE_DIVERGENT \
        else ("ok", "known divergence")
    assert report.status("residuals", "remat2") in expected
    assert report.status("vjp_leaves", "remat2") in expected


def test_residual_order_divergences_compose_with_a_literal_left_out():
    """finding b4d72ce3d3 (0.4.25): a scan in a scan whose unused ys JAX keeps
    saves the stacked entries in another order and lacks the literal the
    spec saves; the order divergences move no literal, so they are measured
    against the baseline without it, and hold; not where an entry differs."""
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax
    import jax.numpy as jnp

    prog = trace_jax(lambda a: jnp.sin(a), np.float32(0.5))
    tail = [("f32[2,3]", "output of tanh"), ("f32[2,3]", "output of sub"), ("f32[2,3]", "output of neg")]
    spec_list = [("f32[]", "from a literal"), ("f32[1,1,1]", "output of scan"), ("f32[1]", "output of scan")] + tail
    jax_list = [("f32[1]", "output of scan"), ("f32[1,1,1]", "output of scan")] + tail
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=spec_list)
    assert dv._scan_residual_order(ctx(jax_list))
    assert not dv._scan_residual_order(ctx(jax_list[:1] + [("f32[1,1,2]", "output of scan")] + tail))
    assert not dv._scan_residual_order(ctx(spec_list))      # nothing moved


def test_generic_reduce_window_jvp_of_a_symbolic_zero_on_the_installed_release():
    """jvp(argnums=(0,)) o jvp of a generic reduce_window: the outer JVP holds
    the inner tangent constant, so reduce_window's JVP meets a symbolic zero
    operand tangent; JAX (0.4.28 on) raises its pytree error where the spec
    computes, a known divergence; not where the release raises another error
    or computes (campaign finding e3a04bf18d on 0.6.2)."""
    import jax
    import numpy as np

    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    prog = trace_jax(lambda b: jax.lax.reduce_window(b, 1.0, jax.lax.mul, (1, 3), (1, 1), "VALID"),
                     np.linspace(0.5, 1.5, 10, dtype=np.float32).reshape(2, 5))
    stack = S.Stack((S.Layer("jvp"), S.Layer("jvp", argnums=(0,))))
    report = oracle_agrees(prog, stack=stack, implementations=("remat2",), properties=())
    d = next(d for d in DIVERGENCES if d.name == "generic-reduce-window-jvp-fails-on-a-symbolic-zero-tangent")
    if d.active():
        assert report.status("stack", "remat2") == "known divergence", str(report)
        assert any(name == d.name for name, *_ in report.known_divergences), str(report)


def test_jit_residual_forwarding_in_a_stack_on_the_installed_release():
    """linearize o jvp(argnums=(0, 2, 3)) o jvp of jit(lambda a, c, e: (a + c,
    tan(e))): the second-order tangent of a + c is a tangent passed through,
    which 0.4.25's pjit partial evaluation forwards and maps back wrongly
    (historic bug 12): the linear function's tan output is wrong there
    (489.6 where 280.8 is right), a known divergence seen in the program
    the stack's levels build; ok from 0.4.26 (campaign finding a95e2b8727
    on 0.4.25, where the same stack of a bigger program fails to lower:
    'func.call' op operand type mismatch)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    args = (np.full((2, 2, 3), 0.3, np.float32), np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 2, 3),
            np.full((2, 3), 0.4, np.float32))
    prog = trace_jax(jax.jit(lambda a, c, e: (a + c, jnp.tan(e))), *args)
    stack = S.Stack((S.Layer("jvp"), S.Layer("jvp", argnums=(0, 2, 3)), S.Layer("linearize")))
    report = oracle_agrees(prog, stack=stack, implementations=("remat2",), properties=())
    d = next(d for d in DIVERGENCES if d.name == "jit-residual-forwarding-gives-wrong-gradients")
    assert report.status("stack", "remat2") == ("known divergence" if d.active() else "ok"), str(report)


def test_a_stack_the_spec_cannot_build_leaves_the_forwarding_predicate_alone():
    """grad(argnums=(1,)) of pad(a, b): the spec refuses to transpose a pad
    for its padding value alone, so it cannot build the stack's program;
    the jit-residual-forwarding predicate, which looks at that program,
    answers no instead of raising, and the check reports JAX's TypeError as
    the known divergence it is (campaign round z on 0.4.25: the predicate
    raised, two findings)."""
    import jax
    import numpy as np

    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    prog = trace_jax(lambda a, b: jax.lax.pad(a, b, ((0, 0, 0), (0, 0, 0))), np.ones((2, 3), np.float32),
                     np.float32(0.5))
    report = oracle_agrees(prog, stack=S.Stack((S.Layer("grad", argnums=(1,)),)), implementations=("remat2",),
                           properties=())
    assert report.status("stack", "remat2") == "known divergence", str(report)
    assert {name for name, *_ in report.known_divergences} == {"pad-cannot-be-transposed-for-its-padding-value-alone"}


def test_a_batched_dynamic_slice_s_gradient_on_the_installed_release():
    """grad o vmap of a sum of dynamic_slice(g, (i, j), (3, 2)) with j = 3
    clamped to 2 in both batch members: before jax 0.9.0 the gradient of
    the clamped window is dropped (zeros, historic bug 19), a known
    divergence; right from 0.9.0, and in range, right everywhere (campaign
    finding e9a2170ea9 on 0.6.2)."""
    import jax
    import numpy as np

    import oracle
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    g = np.arange(20, dtype=np.float32).reshape(5, 4)
    vmap = S.Layer("vmap", in_axes=(0, 0, 0), out_axes=(0,), size=2)
    # the second: the outer vmap leaves g unbatched, so it batches the inner
    # gather's indices alone and they lose their unique and sorted marks
    # (finding dfad72a4a5 on 0.4.25)
    # the third: vmap o grad o vmap, where the gather's values are dead and
    # the program the spec differentiates keeps only its transpose, a
    # scatter-add (finding df719984dc on 0.4.36)
    stacks = (S.Stack((vmap, S.Layer("grad", argnums=(0,)))),
              S.Stack((vmap, S.Layer("vmap", in_axes=(None, 0, 0), out_axes=(0,), size=2),
                       S.Layer("grad", argnums=(0,)))),
              S.Stack((vmap, S.Layer("grad", argnums=(0,)),
                       S.Layer("vmap", in_axes=(0, 0, 0, 0), out_axes=(0,), size=2))))
    d = next(d for d in DIVERGENCES if d.name == "batched-dynamic-slice-drops-out-of-bounds-gradients")
    for stack in stacks:
        for j, clamped in ((3, True), (1, False)):
            fn = lambda g, i, j: jax.lax.dynamic_slice(g, (i, j), (3, 2))
            prog = trace_jax(fn, g, np.int32(2), np.int32(j))
            report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, g, np.int32(2), np.int32(j),
                                  properties=(S.stack_property(stack, prog),))
            want = "known divergence" if clamped and d.active() else "ok"
            assert report.results[0].status == want, str(report)


def test_a_custom_vjp_in_a_jit_in_a_checkpoint_counts_for_the_checkpoint_s_inputs():
    """Historic bug 14 (a custom_vjp in a checkpoint makes it save its
    inputs) with the custom_vjp in a jit in the checkpoint, the checkpoint
    in a jit: the checkpoint's input, forwarded by the outer jit, is one of
    the entries the divergence allows (finding 1621876741, 0.4.25, round AB,
    where JAX saved it beside the kept unused output's residual)."""
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    prog = trace_jax(_custom_vjp_in_a_jit_in_a_checkpoint_in_a_jit, np.float32(-1.1))
    assert ("f32[]", "from the argument a") in dv._custom_vjp_checkpoint_entries(prog)


def _reduce_window_beside_a_sine(a, d):
    """finding 67722d7f2e (0.6.2, ninth session): a generic reduce_window of
    an input the inner grad of grad o vmap o grad(argnums=(0,)) holds
    constant, so its output is dead code of the inner derivative."""
    from jax import lax
    return lax.reduce_window(d, 1.0, lax.mul, (1, 3), (1, 1), "VALID"), lax.sin(a)


def test_a_reduce_window_a_derivative_leaves_dead():
    """The spec (direct linearization, as jax 0.10.2) refuses to linearize
    the inner derivative's dead reduce_window; built with each level's dead
    code removed, the stack's program exists, and oracle.check raises no
    Mismatch on the installed release: JAX before direct linearization
    computes it (the divergence), 0.10.2 refuses too."""
    import numpy as np

    from fuzz.properties import oracle_agrees
    from oracle.from_jax import trace_jax
    from oracle.stacks import Layer, Stack, spec_program
    from spec.jvp import LINEARIZATION_ERROR

    args = (np.float32(0.3), np.linspace(0.5, 1.5, 10, dtype=np.float32).reshape(2, 5))
    prog = trace_jax(_reduce_window_beside_a_sine, *args)
    stack = Stack((Layer("grad", argnums=(0,)), Layer("vmap", in_axes=(0,) * 4, out_axes=(0,), size=2),
                   Layer("grad")))
    with pytest.raises(ValueError, match="Linearization failed"):
        spec_program(prog, stack)
    assert LINEARIZATION_ERROR.startswith("Linearization failed")
    assert spec_program(prog, stack, dead_code_removed=True).outputs
    oracle_agrees(prog, stack=stack)


def _while_in_a_checkpointed_scan(a):
    """finding 39821c280f (0.4.25, ninth session): historic bug 16 seen
    through saved_residuals: a checkpointed scan whose body runs a while
    loop reading the carry; before 0.6.0 evaluating the known half raises
    safe_zip's ValueError."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def body(g, _):
        h = lax.while_loop(lambda i: i < 0.5, lambda l: l + (1.0 + 0.1 * jnp.tanh(-g)), 0.0)
        return h, h
    return jax.checkpoint(lambda d: lax.scan(body, d, None, length=1)[0], prevent_cse=False)(a)


def test_a_while_in_a_checkpointed_scan():
    """JAX before 0.6.0 raises (the divergence, the predicate's ValueError
    branch); from 0.6.0 it saves what the spec saves."""
    import jax
    import numpy as np

    import oracle
    from oracle.jax_api.versions import parse

    report = oracle.check(_while_in_a_checkpointed_scan, oracle.AS_IS, np.float32(0.3),
                          implementations=("remat2",), properties=("residuals",))
    if parse(jax.__version__) < parse("0.6.0"):
        assert ("checkpointed-while-s-known-half-takes-an-extra-operand", "residuals", "remat2") \
            in report.known_divergences
    else:
        assert report.status("residuals", "remat2") == "ok"


def test_a_dead_optimization_barrier_under_a_linearized_gradient():
    """finding 999b77c3e1 (0.4.36, tenth session): linearize o grad of a
    checkpoint holding an optimization_barrier whose outputs nothing reads.
    The grad level's spec program has lost the barrier, and JAX (before
    0.5.3) still differentiates it and raises; the divergence looks at the
    checked function's program. On a release with the rules, all agree."""
    import jax
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    barrier = getattr(jax.lax, "optimization_barrier", None) or jax._src.ad_checkpoint._optimization_barrier

    def body(a, b):
        barrier((b, b))
        return checkpoint_name(a, "a") * 2.0

    pol = jax.checkpoint_policies.save_only_these_names("a")
    prog = trace_jax(lambda a, b: jax.checkpoint(body, policy=pol)(a, b), np.float32(0.3),
                     np.ones(3, np.float32))
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = oracle_agrees(prog, stack=stack, implementations=("remat2",), properties=())
    d = next(d for d in DIVERGENCES if d.name == "optimization-barrier-not-differentiable")
    want = "known divergence" if d.active() else "ok"
    assert report.status("stack_barriers", "remat2") == want, str(report)


def test_a_forwarded_residual_meets_a_cotangent_of_another_shape():
    """finding ce46fe96aa (0.4.25, tenth session): historic bug 12 (pjit's
    residual forwarding, jax-ml/jax#20267) as a TypeError: in a jit, a
    checkpoint returns its input, and the reverse pass multiplies exp2's
    cotangent by a residual of another shape. 0.4.26 computes the right
    gradients (measured with tools/releases.py on 0.4.25, 0.4.26, 0.4.36
    and 0.10.2); oracle.check reports the known divergence where it holds."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    import oracle

    def f(a, c):
        def body(h):
            return lax.integer_pow(h, 0), checkpoint_name(h, "a"), h
        e, _, g = jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("a"),
                                 prevent_cse=False)(a)
        return lax.integer_pow(a, 0), e, g, jnp.exp2(c)
    report = oracle.check(jax.jit(f), oracle.AS_IS, np.array([0.5, 1.0, 1.5], np.float32),
                          np.ones((2, 3), np.float32), implementations=("remat2",), properties=("vjp",))
    d = next(d for d in DIVERGENCES if d.name == "jit-residual-forwarding-gives-wrong-gradients")
    assert report.status("vjp", "remat2") == ("known divergence" if d.active() else "ok"), str(report)


def test_an_unused_output_kept_by_linearization_barriers_a_checkpoint_in_a_branch():
    """finding 023890d4ec (0.4.25 and 0.4.36, tenth session): a checkpoint's
    unused output is a cond whose branch holds a prevent_cse checkpoint.
    Before direct linearization JAX keeps the unused output, stages its
    tangent, and barriers the branch's recomputation (1 barrier; 0.10.2:
    none, as the spec). The known divergence where it holds, else ok."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    import oracle

    def f(x):
        def outer(m):
            unused = lax.cond(jnp.sum(m) > 0, jax.checkpoint(jnp.sin, prevent_cse=True), lambda v: -v, m)
            return m * 2.0, unused
        return jax.checkpoint(outer, prevent_cse=False)(x)[0]
    report = oracle.check(f, oracle.AS_IS, np.array([0.3, 0.2, 0.1], np.float32), implementations=("remat2",),
                          properties=("prevent_cse",))
    d = next(d for d in DIVERGENCES if d.name == "linearize-keeps-unused-outputs-of-staged-equations")
    assert report.status("prevent_cse", "remat2") == ("known divergence" if d.active() else "ok"), str(report)


def _unread_scan_const_beside_a_checkpoint(a, b):
    """finding dd34df8fff (0.4.25, tenth session's round t): a scan whose
    body holds a cond; one branch runs a scan whose body reads a value it
    closes over (q) only in dead code, the other a checkpoint."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.ad_checkpoint import checkpoint_name

    def branch0(m, n, o):
        q = m + jnp.sin(m)

        def inner(carry, w):
            _ = q * 2.0
            return jnp.arccos(carry), jnp.arccos(carry)
        return lax.scan(inner, o, m)[0]

    def branch1(m, n, o):
        policy = jax.checkpoint_policies.save_only_these_names("a", "b")
        return jax.checkpoint(lambda x: (checkpoint_name(x, "b"), x), policy=policy)(n)[0]

    def body(c, _):
        c = lax.cond(jnp.sum(a) > 0, branch1, branch0, c, a, b)
        return c, c
    return lax.scan(body, a, None, length=1)[0]


# the barriers in jax.jit of linearize o grad of it, its linear function called (recorded
# by running test_an_unread_scan_const_barriers_a_checkpoint_in_the_linear_function)
UNREAD_SCAN_CONST_BARRIERS = {"0.4.25": 1, "0.4.36": 1, "0.6.2": 1, "0.10.2": 0}


def test_an_unread_scan_const_barriers_a_checkpoint_in_the_linear_function():
    """Before direct linearization the linear function of linearize o grad
    computes the tangent of the scan's unread const and, with it, the cond's
    other branch's checkpoint, barriered; 0.10.2 (and the spec) have no
    barrier. oracle.check's stack_barriers is ok on 0.10.2 and a known
    divergence (linearize-computes-tangents-of-unread-operands) before."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    a = np.array([[1.14, 0.77, 0.54], [0.52, 1.31, -1.41]], np.float32)
    b = np.array([[0.64, -0.84, 0.41], [-0.58, 0.65, 0.07]], np.float32)
    w, t1, t2 = (np.full((2, 3), 0.3, np.float32),) * 3

    def linear_called(a, b, w, t1, t2):
        grad = jax.grad(lambda a, b: jnp.sum(_unread_scan_const_beside_a_checkpoint(a, b) * w), argnums=(0, 1))
        return jax.linearize(grad, a, b)[1](t1, t2)
    got = jax.jit(linear_called).lower(a, b, w, t1, t2).as_text().count("optimization_barrier")
    if jax.__version__ in UNREAD_SCAN_CONST_BARRIERS:
        assert got == UNREAD_SCAN_CONST_BARRIERS[jax.__version__]
    prog = trace_jax(_unread_scan_const_beside_a_checkpoint, a, b)
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = oracle_agrees(prog, stack=stack, implementations=("remat2",), only=(S.STACK_BARRIERS,))
    status = report.status(S.STACK_BARRIERS, "remat2")
    if got == UNREAD_SCAN_CONST_BARRIERS["0.10.2"]:
        assert status == "ok", str(report)
    else:
        assert status == "known divergence", str(report)
        assert [n for n, *_ in report.known_divergences] == ["linearize-computes-tangents-of-unread-operands"]


def _carry_squared_each_step_unused(a):
    """finding 170afbb1de (0.4.25, eleventh session's round u): a scan whose
    carry is squared each step (stop_gradient(h) * h: its factor is the
    carry itself, which overflows) and unused at the end."""
    from jax import lax
    return lax.scan(lambda h, i: (lax.stop_gradient(h) * h, lax.stop_gradient(i) * i), a, a)[1]


# whether jax.grad of its sum has a nan (recorded by running
# test_an_unused_overflowing_carry_gives_nan_cotangents_before_direct_linearization)
UNUSED_OVERFLOWING_CARRY_NAN = {"0.4.25": True, "0.4.36": True, "0.6.2": True, "0.10.2": False}


def test_an_unused_overflowing_carry_gives_nan_cotangents_before_direct_linearization():
    """Before direct linearization JAX keeps the unused carry's tangent, and
    its transpose carries the carry's cotangent back from an instantiated
    zero: 0 * inf = nan in every input cotangent. 0.10.2 (and the spec)
    prune the carry: the cotangents are the xs' own, finite. oracle.check's
    vjp is ok on 0.10.2 and the known divergence
    linearize-keeps-unused-outputs-of-staged-equations before (JAX's values
    are the spec's for the program with the carry made an output, its
    cotangent zero)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle

    a = np.linspace(-3.0, 3.0, 12, dtype=np.float32)
    grad = jax.grad(lambda a: jnp.sum(_carry_squared_each_step_unused(a)))(a)
    if jax.__version__ in UNUSED_OVERFLOWING_CARRY_NAN:
        assert bool(np.isnan(grad).any()) == UNUSED_OVERFLOWING_CARRY_NAN[jax.__version__]
    report = oracle.check(_carry_squared_each_step_unused, oracle.AS_IS, a, implementations=("remat2",),
                          properties=("vjp",))
    if not np.isnan(grad).any():
        assert report.status("vjp", "remat2") == "ok", str(report)
    else:
        assert report.status("vjp", "remat2") == "known divergence", str(report)
        assert [n for n, *_ in report.known_divergences] == ["linearize-keeps-unused-outputs-of-staged-equations"]


@pytest.mark.parametrize("name", ["values", "jvp", "vjp", "vmap"])
def test_a_numeric_disagreement_asks_for_a_variant_s_values_of_a_pullback_only(name):
    """A numeric property's Disagreement carries `values_agree_for` for the
    vjp alone (its operands end with the outputs' cotangents; None for the
    others, which a known divergence's predicate then skips: a bool there
    crashed every predicate on 0.4.36). For the vjp it answers whether
    JAX's values are the spec's for a variant: yes for the program itself
    with a gained output (its cotangent zero adds nothing), no for wrong
    values."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle
    from oracle import properties as P
    from oracle.checker import make_case
    from oracle.program_variants import unused_linearize_outputs_out

    def f(a):
        y, _ = jax.checkpoint(lambda r: (jnp.sin(r), r * 2.0))(a)
        return y
    case = make_case(f, oracle.AS_IS, (np.array([0.3, -1.2, 0.8], np.float32),), {})
    prop = getattr(P, name.upper())
    want = prop.spec_side(case)
    wrong = [np.asarray(w) + 1.0 for w in want[0]]
    with pytest.raises(P.Disagreement) as raised:
        prop.compare(case, "remat2", wrong, want)
    agree = raised.value.context.values_agree_for
    if name != "vjp":
        assert agree is None
        return
    kept, gained = unused_linearize_outputs_out(case.prog)
    assert gained == 1
    assert not agree(kept, gained)
    raised.value.context.values_agree_for = P._values_agree_for(case, P.NUMERIC["vjp"], list(want[0]), 1)
    assert raised.value.context.values_agree_for(kept, gained)


def _custom_vjp_of_x_to_the_zero_in_a_cond(a):
    """finding f6cfc8a9f7 (0.6.2, round u): a cond branch applies a
    custom_vjp function to integer_pow(h, 0)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda cos_x, g: (cos_x * g,))
    return lax.cond(a > 0, lambda h: s(lax.integer_pow(h, 0)), jnp.sin, a)


def test_a_custom_vjp_of_an_instantiated_zero_tangent():
    """Before jax 0.7.1 jax.grad raises custom_lin's TypeError (integer_pow's
    instantiated zero tangent is known, so the custom_vjp's tangent half is
    evaluated); 0.10.2 and the spec compute. oracle.check is ok where JAX
    computes and reports the known divergence where it raises, for every
    property that differentiates."""
    import jax
    import numpy as np

    import oracle
    from oracle import divergences as dv

    a = np.float32(0.5)
    try:
        jax.grad(_custom_vjp_of_x_to_the_zero_in_a_cond)(a)
        raised = False
    except TypeError as e:
        assert str(e) == dv.CUSTOM_VJP_JVP_ERROR
        raised = True
    assert raised == (jax.__version__ in ("0.4.25", "0.4.36", "0.6.2")) or jax.__version__ not in (
        "0.4.25", "0.4.36", "0.6.2", "0.10.2")
    report = oracle.check(_custom_vjp_of_x_to_the_zero_in_a_cond, oracle.AS_IS, a, implementations=("remat2",),
                          properties=("residuals", "vjp", "vjp_leaves", "prevent_cse"))
    # (saved_residuals computes there: it partially evaluates without running the custom_lin)
    pullbacks = {report.status(p, "remat2") for p in ("vjp", "vjp_leaves", "prevent_cse")}
    if raised:
        assert pullbacks == {"known divergence"}, str(report)
        assert {n for n, *_ in report.known_divergences} == {"custom-vjp-of-an-instantiated-zero-tangent-fails"}
        assert report.status("residuals", "remat2") in ("ok", "known divergence")
    else:
        assert pullbacks | {report.status("residuals", "remat2")} == {"ok"}, str(report)


def test_a_dead_generic_reduce_window_in_a_checkpoint_under_linearize_of_grad():
    """finding 7d8cc1532a (0.4.25, round w): a dead generic reduce_window in
    a checkpoint; linearize o grad differentiates the checkpoint's
    recomputation, reduce_window included, which has no JVP rule before
    0.4.28. The stack's spec program has dropped it: the predicate looks at
    the checked function's program. Where the divergence is active the
    barriers property reports it, elsewhere it is ok."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from fuzz.properties import oracle_agrees
    from oracle import stacks as S
    from oracle.from_jax import trace_jax

    def f(a, d):
        def region(h, l):
            jax.lax.reduce_window(l, 1.0, jax.lax.mul, (1, 3), (1, 1), "VALID")
            return jnp.sin(h)
        return jax.checkpoint(region)(a, d)
    prog = trace_jax(f, np.float32(0.5), np.linspace(0.5, 1.5, 10, dtype=np.float32).reshape(2, 5))
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = oracle_agrees(prog, stack=stack, implementations=("remat2",), only=(S.STACK_BARRIERS,))
    x = np.ones((2, 5), np.float32)
    try:        # the installed JAX: a JVP rule for the generic reduce_window?
        jax.jvp(lambda l: jax.lax.reduce_window(l, 1.0, jax.lax.mul, (1, 3), (1, 1), "VALID"), (x,), (x,))
        want = "ok"
    except NotImplementedError:
        want = "known divergence"
    assert report.status(S.STACK_BARRIERS, "remat2") == want, str(report)


def _zero_tangent_cases():
    import jax
    import jax.numpy as jnp
    from jax.ad_checkpoint import checkpoint_name
    pol = jax.checkpoint_policies
    conv = lambda n: jnp.sin(n.astype(jnp.float32))
    return {   # (policy, loss, whether the saved value has no tangent)
        "dot_of_integers": (pol.dots_saveable, lambda w, n: jnp.sum((conv(n) @ n.T.astype(jnp.float32)) @ w), True),
        "dot_of_integer_and_constant": (pol.dots_saveable,
                                        lambda w, n: jnp.sum((conv(n) @ jnp.ones((3, 3))) * w), True),
        "name_of_integers": (pol.save_only_these_names("a"),
                             lambda w, n: jnp.sum(checkpoint_name(conv(n), "a") * w), True),
        "name_of_integers_everything": (pol.everything_saveable,
                                        lambda w, n: jnp.sum(checkpoint_name(conv(n), "a") * w), True),
        "dot_of_integers_and_weights": (pol.dots_saveable, lambda w, n: jnp.sum(jnp.tanh(conv(n) @ w.T)), False),
        "name_of_weights": (pol.save_only_these_names("a"),
                            lambda w, n: jnp.sum(checkpoint_name(jnp.sin(w), "a") * w), False),
        "dot_of_stopped_and_weights": (pol.dots_saveable,
                                       lambda w, n: jnp.sum(jnp.tanh(jax.lax.stop_gradient(jnp.sin(w)) @ w.T)), False),
    }


@pytest.mark.parametrize("case", sorted(_zero_tangent_cases()))
def test_remat3_recomputes_a_saved_value_only_where_it_has_no_tangent(case):
    """remat3 (jax 0.10.2; measured with print_saved_residuals: the integer
    argument beside the saved dot or named value) rematerializes a saved
    value as primal_left_tangent_right(saved, recomputed), bound whole
    where the value has no tangent: it saves the integer argument the
    recomputation reads. With a tangent it does not (measured: the spec's
    list). remat2 agrees with the spec in every case."""
    import numpy as np

    import oracle
    policy, loss, no_tangent = _zero_tangent_cases()[case]
    args = (np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(2, 3))
    report = oracle.check(loss, policy, *args, properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    _remat3_expected(report, "residuals", "known divergence" if no_tangent else "ok",
                     "remat3-recomputes-a-saved-value-without-tangent", no_tangent)


@pytest.mark.parametrize("closure", ["custom_jvp", "checkpoint"])
def test_remat3_saves_no_constant_a_custom_rule_closes_over(closure):
    """remat3 (jax 0.10.2, measured with print_saved_residuals) rebinds a
    custom_jvp inside a checkpoint with its closure: the array it closes
    over is no residual (remat2 and the spec save it "from a constant");
    an array the checkpoint's own body closes over is saved under both."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle
    c = np.array([1.0, 2.0, 3.0], np.float32)
    f = jax.custom_jvp(lambda y: jnp.sin(y) * c)
    f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * c * t[0]))
    loss = (lambda x: jnp.sum(f(x))) if closure == "custom_jvp" else (lambda x: jnp.sum(jnp.sin(x * c)))
    report = oracle.check(loss, None, np.linspace(0.1, 0.9, 3, dtype=np.float32), properties=("residuals",))
    assert report.status("residuals", "remat2") == "ok"
    name = "remat3-rebinds-custom-rules-with-their-closed-over-constants"
    _remat3_expected(report, "residuals", "known divergence" if closure == "custom_jvp" else "ok",
                     name, closure == "custom_jvp")


def test_remat3_refused_policy_composes_with_a_jit_s_saved_zero():
    """A checkpoint under save_from_both_policies of an offload policy (the
    spec refuses it, as remat2 does; remat3 applies nothing_saveable) in a
    jit beside a pad whose padding value's zero tangent the jit's
    linearization saves (`~float32[] output of jitted function`, measured):
    remat3-unrecognised-policy-is-full-remat composed with that additive
    divergence (found by a pristine campaign)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.ad_checkpoint import checkpoint_name

    import oracle
    cp = jax.checkpoint_policies
    both = cp.save_from_both_policies(cp.save_only_these_names("a"),
                                      cp.offload_dot_with_no_batch_dims("device", "pinned_host"))

    @jax.jit
    def f(a):
        named = jax.checkpoint(lambda d: checkpoint_name(d, "a"), policy=both)(a)
        return named, jax.lax.pad(a, 0.5, [(0, 0, 0), (0, 0, 0)])
    report = oracle.check(f, oracle.AS_IS, np.linspace(0.1, 0.6, 6, dtype=np.float32).reshape(2, 3),
                          properties=("residuals",))
    # both raise; before jax 0.4.38 save_from_both_policies takes either answer (Python's `or`)
    assert ((report.status("residuals", "remat2") == "not applicable")
            or ("save-from-both-policies-answers-either-answer", "residuals", "remat2") in report.known_divergences)
    _remat3_expected(report, "residuals", "known divergence", "remat3-unrecognised-policy-is-full-remat", True)


def test_svd_derivative_of_a_square_complete_factorisation_is_a_release_divergence(monkeypatch):
    """Campaign finding 4ecd9b499c (jax 0.6.2): grad through svd(x,
    full_matrices=True) of a square x. Before 0.8.1 JAX's rule raised
    (the message as 0.6.2's _svd_jvp_rule words it); the spec computes. A
    non-square one is still a Mismatch (JAX refuses it on every release), and an error of another rule is
    not explained."""
    import jax
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active", lambda self: True)
    error = NotImplementedError("Singular value decomposition JVP not implemented for full matrices")
    square = trace_jax(lambda x: jax.numpy.linalg.svd(x)[0], np.eye(3, dtype=np.float32))
    wide = trace_jax(lambda x: jax.numpy.linalg.svd(x)[0], np.eye(2, 3, dtype=np.float32))
    ctx = lambda prog, err: dv.Context("remat2", "vjp", None, prog, error=err)
    found = dv.find(ctx(square, error))
    assert found is not None and found.name == "svd-derivative-of-square-complete-is-unimplemented"
    assert dv.find(ctx(wide, error)) is None
    assert dv.find(ctx(square, NotImplementedError("Unimplemented case of QR decomposition derivative"))) is None


def test_integer_pow_one_in_a_cond_branch_saves_its_factor_as_an_output_of_the_cond(monkeypatch):
    """Campaign finding e5f9b03234 (jax 0.6.2): integer_pow(h, 1) in a cond
    branch, beside an operand the branches never read (sin(a): its tangent
    computed, cos saved). Under the old rule the branch's factor leaves the
    cond as a residual: JAX's list (as the report recorded it) is the
    spec's plus `output of cos` and `output of cond`; one more unexplained
    entry is still a Mismatch."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import spec
    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active",      # 0.4.25's forwarding bug explains any list
                        lambda self: self.name != "jit-residual-forwarding-gives-wrong-gradients")
    prog = trace_jax(lambda a: jax.lax.cond(jnp.sum(jnp.sin(a)) > 0, lambda h, i: jax.lax.integer_pow(h, 1),
                                            lambda k, l: k, a, jnp.sin(a)), np.ones(3, np.float32))
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    got = want + [("f32[3]", "output of cos"), ("f32[3]", "output of cond")]
    ctx = lambda got: dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    found = dv.find(ctx(got))
    assert found is not None and "integer-pow-one-jvp-saves-its-factor" in found.name
    assert dv.find(ctx(got + [("f32[3]", "output of exp")])) is None


def test_old_gather_indices_compose_with_a_jit_s_residual_order(monkeypatch):
    """Campaign findings 9ec78d0297 and 5c3acbdcbd (jax 0.6.2, 0.4.25, 0.4.36):
    approx_top_k in a jit beside sin. JAX (as the reports recorded it) lists
    the old rule's indices `i32[3,2,2]` first, the spec its `i32[3,2,1]`
    last: the indices divergence explains the entry, the jit's residual
    order (active on the same releases) the place; without the latter the
    lists are a Mismatch."""
    import jax
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    jit_out = "output of jitted function 'f'"
    f = jax.jit(lambda a, b: (jax.lax.approx_max_k(b, 2)[0], jax.numpy.sin(a)))
    f.__name__ = "f"
    prog = trace_jax(f, np.float32(0.5), np.ones((3, 5), np.float32))
    want = [("f32[]", jit_out), ("i32[3,2,1]", jit_out)]
    got = [("i32[3,2,2]", jit_out), ("f32[]", jit_out)]
    ctx = dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    monkeypatch.setattr(dv.Divergence, "active", lambda self: self.name in (
        "approx-top-k-jvp-gathers-with-every-index", "jit-residuals-in-another-order"))
    assert dv._approx_top_k_old_indices(ctx)
    monkeypatch.setattr(dv.Divergence, "active", lambda self: self.name == "approx-top-k-jvp-gathers-with-every-index")
    assert not dv._approx_top_k_old_indices(ctx)
    assert dv._approx_top_k_old_indices(dv.Context("remat2", "residuals", None, prog, jax_residuals=got[::-1],
                                                   spec_residuals=want))


def test_svd_derivative_divergence_looks_at_the_checked_program_of_a_stack(monkeypatch):
    """Campaign findings 40e94e3ce3 (jax 0.4.36) and 0c78252df4 (0.6.2):
    under `linearize o grad` the property's program is the grad level's,
    whose full svd the JVP replaced by the reduced one; JAX raised on the
    checked program's full svd, which the predicate reads too."""
    import jax
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active", lambda self: True)
    error = NotImplementedError("Singular value decomposition JVP not implemented for full matrices")
    square = trace_jax(lambda x: jax.numpy.linalg.svd(x)[0], np.eye(3, dtype=np.float32))
    reduced = trace_jax(lambda x: jax.numpy.linalg.svd(x, full_matrices=False)[0], np.eye(3, dtype=np.float32))
    level = lambda checked: dv.Context("remat2", "stack_barriers", None, reduced, error=error,
                                       checked_program=checked)
    found = dv.find(level(square))
    assert found is not None and found.name == "svd-derivative-of-square-complete-is-unimplemented"
    assert dv.find(level(None)) is None


def test_a_jit_whose_forwarded_output_staging_dropped_is_staged_whole(monkeypatch):
    """Campaign finding 6d0d1c2064 (jax 0.4.36): jit(lambda e, f: (sin(f),
    e)) whose sin only a comparison reads. JAX's linearization sees the
    jit's second output (b's tangent is read) and stages the jit whole,
    saving cos (JAX's list as the report recorded it); make_jaxpr's staging
    forwarded that output away, so the traced program's jit has sin alone.
    From 0.4.29 to 0.5.3 the divergence counts such a jit as staged whole;
    on other releases it does not."""
    import numpy as np

    import spec
    from spec import ops
    from spec.ir import ArrayType
    from spec.prims_call import call
    from oracle import divergences as dv

    def traced(a, b):       # as make_jaxpr stages it on 0.4.36: the forwarded output dropped
        (c,) = call(spec.trace(lambda e, f: [ops.sin(f)], b.type, a.type), b, a, name="f0")
        return ops.select_n(ops.gt(a, c), a, a), b
    prog = spec.trace(traced, ArrayType((), np.float32), ArrayType((3,), np.float32))
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    assert want == [("bool[]", "output of gt")]
    got = [("f32[]", "output of jitted function 'f0'")] + want
    ctx = dv.Context("remat2", "residuals", None, prog, jax_residuals=got, spec_residuals=want)
    monkeypatch.setattr(dv.Divergence, "active", lambda self: self.name == "linearize-keeps-unused-outputs-of-staged-equations")
    monkeypatch.setattr(dv, "holds", lambda releases: releases.first == "0.4.29")
    assert dv.find(ctx) is not None
    monkeypatch.setattr(dv, "holds", lambda releases: False)
    assert dv.find(ctx) is None


def test_custom_vjp_of_an_instantiated_zero_in_a_checkpoint_fails_on_every_release(monkeypatch):
    """Pristine nightly finding 76ea18f422 (jax 0.10.2): a custom_vjp of
    integer_pow(a, 0) in a checkpoint. JAX raises custom_lin's TypeError
    (the divergence's repro, run on every release by
    test_repro_shows_the_divergence_exactly_on_its_releases), and
    differentiating the pullback again its NotImplementedError where the
    spec refuses too; outside a checkpoint the divergence does not apply
    (0.7.1 fixed that)."""
    import dataclasses

    import jax
    import jax.numpy as jnp
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    monkeypatch.setattr(dv.Divergence, "active", lambda self: self.name == (
        "custom-vjp-of-an-instantiated-zero-tangent-fails-in-a-checkpoint"))
    s = jax.custom_vjp(jnp.sin)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (c * g,))
    inside = trace_jax(jax.checkpoint(lambda a: s(jax.lax.integer_pow(a, 0)) + a), np.float32(0.5))
    outside = trace_jax(lambda a: s(jax.lax.integer_pow(a, 0)) + a, np.float32(0.5))
    type_error = TypeError(dv.CUSTOM_VJP_JVP_ERROR)
    assert dv.find(dv.Context("remat2", "vjp", None, inside, error=type_error)) is not None
    assert dv.find(dv.Context("remat2", "vjp", None, outside, error=type_error)) is None
    second = dv.Context("remat2", "second_order", None, inside,
                        error=NotImplementedError(dv.CUSTOM_LIN_JVP_ERROR), spec_error_too=type_error)
    assert dv.find(second) is not None
    assert dv.find(dataclasses.replace(second, spec_error_too=None)) is None


def test_remat3_unused_output_read_only_by_a_branch_s_stop_gradient(monkeypatch):
    """Pristine nightly finding 68fb4a7b0c (jax 0.10.2, twice): a checkpoint
    returning (d, sin d), whose sin only a comparison and a cond branch's
    stop_gradient read. No cotangent reaches it, yet remat3 runs the
    checkpoint's backward whole and saves d, the argument (JAX's list as the
    report recorded it): the output counts as unused."""
    import numpy as np

    import spec
    from spec import ops
    from spec import policies as sp
    from spec.core import bind
    from spec.ir import ArrayType
    from spec.prims_control import cond_eqn
    from spec.remat import remat_p
    from oracle import divergences as dv

    def fn(a):
        body = spec.trace(lambda d: (d, ops.sin(d)), a.type)
        b, c = bind(remat_p, a, jaxpr=body, policy=sp.save_only_these_names("a"), prevent_cse=False,
                    differentiated=False)
        index = ops.convert_element_type(ops.gt(c, np.float32(0.0)), np.int32)
        branches = [spec.trace(lambda i, j: [i], a.type, a.type),
                    spec.trace(lambda k, l: [ops.stop_gradient(l)], a.type, a.type)]
        (h,) = cond_eqn(index, a, c, branches=branches)
        return h, b
    prog = spec.trace(fn, ArrayType((), np.float32))
    prog.input_names = ("args[0]",)
    want = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    got = [("f32[]", "from the argument args[0]")] + want
    monkeypatch.setattr(dv.Divergence, "active", lambda self: self.name == "remat3-saves-for-unused-checkpoint-outputs")
    found = dv.find(dv.Context("remat3", "residuals", None, prog, jax_residuals=got, spec_residuals=want))
    assert found is not None


def test_top_k_s_old_indices_under_policies_that_save_their_parts():
    """Before jax 0.4.35 top_k's JVP concatenates an iota per leading
    dimension (broadcast_in_dim) beside the reshaped indices; a policy
    saving broadcast_in_dim saves that broadcast iota, which the residual
    list's old-indices form does not describe: the spec following the old
    rule (spec.semantics: top_k_jvp_batches_its_gather=False) does, on
    every release before (measured on 0.4.25), and 0.4.35 on agrees with
    the spec's own rule."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import oracle
    x = np.random.default_rng(3).normal(size=(3, 5)).astype(np.float32)
    for saved in ("broadcast_in_dim", "concatenate", "iota", "reshape"):
        policy = lambda prim, *_, _saved=saved, **__: prim.name == _saved    # noqa: E731
        report = oracle.check(lambda a: jnp.sin(jax.lax.top_k(a, 2)[0]), policy, x)
        assert report.status("residuals", "remat2") in ("ok", "known divergence"), str(report)


@pytest.mark.parametrize("saved", ["add", "select_n", "broadcast_in_dim", "iota", "concatenate"])
def test_sort_s_old_indices_under_policies_that_save_their_parts(saved):
    """Before jax 0.4.38 sort's JVP gathers each tangent with `t[idx]`, an
    int32 iota per dimension, the sorted one's sorted, each wrapped by jnp
    indexing (lt, add, select_n), broadcast and concatenated: a policy
    saving `add` saves the wrapping (release campaign finding 5423eff2fe on
    0.4.36, `i32[3,5] output of add` twice). The spec following the old
    rule (spec.semantics: sort_jvp_gathers_along_its_dimension=False)
    describes whatever such a policy saves; from 0.4.38 JAX agrees with the
    spec's own rule. JAX's own list decides which is expected here."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.ad_checkpoint import saved_residuals

    import oracle
    x = np.random.default_rng(5).normal(size=(3, 5)).astype(np.float32)
    policy = lambda prim, *_, **__: prim.name == saved    # noqa: E731
    f = lambda a: jnp.sin(jax.lax.sort(a, dimension=1))    # noqa: E731
    old = any(str(a.dtype) == "int32" for a, _ in saved_residuals(jax.checkpoint(f, policy=policy), x))
    report = oracle.check(f, policy, x)
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)


@pytest.mark.parametrize("saved", ["integer_pow", "square"])
@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "tan", "atan2", "erf", "erfc", "erf_inv"])
def test_rules_written_with_square_under_policies_that_save_it(name, saved):
    """Before jax 0.4.36 `lax.square` bound integer_pow[y=2], so the JVP
    rules written with it (asin's `rsqrt(1 - square(x))`, ...) bound an
    integer_pow a policy naming integer_pow saves (release campaign finding
    1eac1097dc on 0.4.25, `f32[2,3] output of integer_pow` under acos). The
    spec following those releases (spec.semantics:
    square_is_a_primitive=False) describes what either policy saves; a
    release whose `lax.square` is square_p agrees with the spec's own rule.
    Which one the installed JAX is, JAX's own jaxpr of `lax.square` says."""
    import jax
    import numpy as np

    import oracle
    x = np.random.default_rng(7).uniform(-0.8, 0.8, size=(2, 3)).astype(np.float32)
    op = getattr(jax.lax, name)
    f = (lambda a: jax.numpy.sin(op(a, a + 1.5))) if name == "atan2" else (lambda a: jax.numpy.sin(op(a)))
    policy = lambda prim, *_, **__: prim.name == saved    # noqa: E731
    old = "square" not in str(jax.make_jaxpr(jax.lax.square)(1.0))
    report = oracle.check(f, policy, x)
    assert report.status("residuals", "remat2") in (("ok", "known divergence") if old else ("ok",)), str(report)


@pytest.mark.parametrize("saved", ["div", "mul", "neg", "add", "integer_pow", "square"])
def test_atan2_s_old_rule_under_policies_that_save_its_parts(saved):
    """Before jax 0.5.3 atan2's JVP in y was `(g * -x) / d`: a policy naming
    div saves no quotient then, and what it can of d (spec.semantics:
    atan2_jvp_divides_first=False, with the release's square: measured on
    0.4.25; on 0.4.36 the old rule's additive form alone missed the div
    policy). JAX's own jaxpr of that JVP says which rule the installed
    release has; on a new one the spec's own rule agrees."""
    import jax
    import numpy as np

    import oracle
    x = np.random.default_rng(11).uniform(-0.8, 0.8, size=(2, 3)).astype(np.float32)
    policy = lambda prim, *_, **__: prim.name == saved    # noqa: E731
    jvp = jax.make_jaxpr(lambda y: jax.jvp(lambda b: jax.lax.atan2(2.0, b), (y,), (y,)))(3.0)
    old = jvp.eqns[-1].primitive.name == "div"
    report = oracle.check(lambda a: jax.numpy.sin(jax.lax.atan2(a, a + 1.5)), policy, x)
    assert report.status("residuals", "remat2") in (("ok", "known divergence") if old else ("ok",)), str(report)


def test_older_rules_whose_changes_overlap_explain_together():
    """acos and atan2 under a policy saving integer_pow and div: before jax
    0.4.36 acos's square is an integer_pow the policy saves, and before
    0.5.3 atan2's old rule saves no quotient; neither divergence alone, nor
    their additive forms, explains both (measured on 0.4.25), the spec
    following every older rule of the release does
    (older-jvp-rules-together). From 0.5.3 the spec's own rules agree
    (atan2's JVP jaxpr says which the installed JAX has)."""
    import jax
    import numpy as np

    import oracle
    x = np.random.default_rng(7).uniform(-0.8, 0.8, size=(2, 3)).astype(np.float32)
    policy = lambda prim, *_, **__: prim.name in ("integer_pow", "div")    # noqa: E731
    jvp = jax.make_jaxpr(lambda y: jax.jvp(lambda b: jax.lax.atan2(2.0, b), (y,), (y,)))(3.0)
    old = jvp.eqns[-1].primitive.name == "div"
    report = oracle.check(lambda a: jax.numpy.sin(jax.lax.acos(a)) + jax.lax.atan2(a, a + 1.5), policy, x,
                          properties=("residuals",))
    assert report.status("residuals", "remat2") in (("ok", "known divergence") if old else ("ok",)), str(report)


def test_integer_pow_s_old_factor_beside_a_cond_s_scalar_zero_kept_inline():
    """A checkpointed x ** 2 under a policy saving integer_pow, beside a
    cond whose other branch computes h ** 0 (release campaign finding
    9e4552fb2b on 0.4.36): before jax 0.10.1 integer_pow's JVP saves
    integer_pow(x, 1), and before 0.7.1 the cond's linearization keeps its
    scalar zero tangent inline; neither divergence alone explains the list,
    the spec following every older rule of the release does
    (older-jvp-rules-together). JAX's own list says whether the installed
    release differs from the spec at all."""
    import jax
    import numpy as np
    from jax._src.ad_checkpoint import saved_residuals

    import oracle
    policy = lambda prim, *_, **__: prim.name == "integer_pow"    # noqa: E731

    def f(i, b):
        c = jax.checkpoint(lambda d: jax.lax.integer_pow(d, 2), policy=policy)(b)
        return jax.lax.switch(i, [lambda g: g, lambda h: jax.lax.integer_pow(h, 0)], c)
    args = (np.int32(1), np.float32(0.7))
    old = sorted(s.split(" from ")[0] for _, s in saved_residuals(f, *args)) == [
        "output of clamp", "output of integer_pow"]   # (0.10.2: the argument b, the cond's zero)
    report = oracle.check(f, oracle.AS_IS, *args, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)


def test_sort_s_old_indices_compose_with_another_additive_divergence():
    """sort's old indices beside integer_pow(a, 1)'s saved factor (before
    jax 0.4.38 and 0.10.1): the two additive divergences compose, sort's
    through its additive form (release campaign finding 1b790d145b on
    0.4.36: the predicate wrapping it had lost it). JAX's own list decides
    whether any divergence is expected (on 0.6.2 integer_pow's factor alone,
    `output of mul`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.ad_checkpoint import saved_residuals

    import oracle
    x = np.random.default_rng(7).normal(size=(3, 5)).astype(np.float32)
    f = lambda a, b: (jax.lax.integer_pow(a, 1), jnp.sin(jax.lax.sort(b, dimension=1)))    # noqa: E731
    old = any(str(a.dtype) == "int32" or "output of mul" in s for a, s in saved_residuals(f, np.float32(0.5), x))
    report = oracle.check(f, oracle.AS_IS, np.float32(0.5), x, properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if old else "ok"), str(report)


def _lu_jvp_permutes_first():
    """JAX's jvp jaxpr of a matrix's lu gathers the tangent's rows before it
    pads its first factor (`pad`): the rule before jax 0.5.3."""
    import jax
    import numpy as np
    lu = lambda b: jax.lax.linalg.lu(b)[0]     # noqa: E731
    jaxpr = jax.make_jaxpr(lambda a: jax.jvp(lu, (a,), (a,)))(np.eye(3, dtype=np.float32))
    names = [e.primitive.name for e in jaxpr.eqns]
    return names.index("gather") < names.index("pad")


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("saved", ["select_n", "add", "lt", "broadcast_in_dim", "concatenate", "gather"])
def test_lu_s_old_rule_under_policies_that_save_its_parts(saved, shape):
    """Before jax 0.5.3 lu's JVP permutes the tangent's rows first, with an
    iota per batch dimension through jnp indexing (release campaign finding
    b91e39e751 on 0.4.25: the wrapped permutation saved before the masks):
    the spec following the old rule (spec.semantics:
    lu_jvp_vmaps_its_inner_rule=False) describes what a policy saving any
    of its parts saves. JAX's own jvp jaxpr says which rule the installed
    release has; on a new one the spec's own rule agrees (not every policy
    saves something the rules order differently: `ok` on an old release too)."""
    import jax
    import numpy as np

    import oracle
    a = np.random.default_rng(13).normal(size=shape).astype(np.float32)
    policy = lambda prim, *_, **__: prim.name == saved    # noqa: E731
    f = lambda x: jax.checkpoint(lambda y: jax.numpy.sin(jax.lax.linalg.lu(y)[0]), policy=policy)(x)   # noqa: E731
    report = oracle.check(f, oracle.AS_IS, a, implementations=("remat2",), properties=("residuals",))
    status = report.status("residuals", "remat2")
    assert status in (("ok", "known divergence") if _lu_jvp_permutes_first() else ("ok",)), str(report)


def test_lu_s_old_indices_compose_with_another_additive_divergence():
    """A batched lu's old row indices (before jax 0.5.3) beside a jitted
    custom_vjp's saved output (before 0.6.1): neither divergence alone, nor
    the older rules together (the custom_vjp's is no rule choice), explain
    JAX's list; lu's additive form (`_lu_old_indices`) composes with the
    other's (measured on 0.4.25 and 0.4.36, where the older rule alone left
    a Mismatch). JAX's own list decides whether a divergence is expected
    (on 0.6.2 none)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.ad_checkpoint import saved_residuals

    import oracle

    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))
    jitted = jax.jit(s)
    f = lambda a, b: (jitted(a), jax.lax.linalg.lu(b)[0])    # noqa: E731
    b = np.random.RandomState(0).randn(2, 3, 3).astype(np.float32)
    saved = [(r.shape, s.split(" from ")[0]) for r, s in saved_residuals(f, np.float32(0.5), b)]
    lu_old, tied = ((2, 3, 2), "output of concatenate") in saved, sum(shape == () for shape, _ in saved) == 2
    report = oracle.check(f, oracle.AS_IS, np.float32(0.5), b, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if lu_old or tied else "ok"), str(report)
    if lu_old and tied:
        assert report.results[0].detail == ("lu-jvp-gathers-with-every-index + "
                                            "custom-vjp-in-scan-or-jit-saves-its-output"), str(report)


def test_two_order_only_divergences_compose_and_nothing_else_does(monkeypatch):
    """`_orders_explaining`: a zero moved first and two scan outputs swapped
    are the two divergences' moves one after the other; a scan output
    swapped with a non-loop entry is neither's."""
    from oracle import divergences as dv
    import spec
    monkeypatch.setattr(dv, "_active", lambda name: True)
    prog = spec.trace(lambda a: a * 2.0, spec.f32[3])
    ctx = dv.Context("remat2", "residuals", None, prog)
    zero, hoisted = ("f32[2,3]", "output of broadcast_in_dim"), ("f32[2,4,3]", "output of cos")
    i, f = ("i32[3]", "output of scan"), ("f32[3,2,3]", "output of scan")
    want = [hoisted, zero, f, i]
    assert dv._orders_explaining([zero, hoisted, i, f], want, ctx) == (
        "scan-residuals-in-another-order", "jvp-partial-eval-saves-instantiated-zeros-in-another-order")
    assert dv._orders_explaining([hoisted, zero, i, f], want, ctx) == ("scan-residuals-in-another-order",)
    assert dv._orders_explaining([zero, i, hoisted, f], want, ctx) == ()
    assert dv._orders_explaining([zero, hoisted, i, i], want, ctx) == ()


def test_lu_s_old_indices_predicate_takes_a_scalar_int_jit_output():
    """A jit returning an int32 scalar residual, no lu anywhere: the
    predicate of lu-jvp-gathers-with-every-index says no, and does not fail
    (release campaign finding 7adaa5c246 on 0.4.36: it read the last
    dimension of a scalar's shape)."""
    import jax
    import numpy as np

    from oracle import divergences as dv
    from oracle.from_jax import trace_jax

    prog = trace_jax(jax.jit(lambda a: (a > 0).astype(np.int32)), np.float32(1.0))
    ctx = dv.Context("remat2", "residuals", None, prog, jax_residuals=[], spec_residuals=[])
    jit = "output of jitted function '<lambda>'"
    assert not dv._lu_old_indices.explains([("i32[]", jit), ("f32[]", jit)], [("f32[]", jit), ("i32[]", jit)], ctx)


def test_a_variant_refused_otherwise_does_not_explain_jax_s_error():
    """_variant_raises: a variant whose build raises another error than
    JAX's (the spec's batcher refusing where JAX raised a missing rule)
    explains nothing, and the predicate says no instead of failing
    (release campaign finding 29a0207e7b on 0.4.25: the predicate of
    a-jit-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative failed
    with the spec's VectorizedBatchingError)."""
    import spec
    from oracle import divergences as dv
    from spec.prims_custom import VectorizedBatchingError

    def refuses(_):
        raise VectorizedBatchingError("(0, 1)")
    prog = spec.trace(lambda x: x, spec.f32[()])
    assert not dv._variant_raises((prog, 1), refuses, NotImplementedError, "Differentiation rule for 'x'")
    assert dv._variant_raises((prog, 1), refuses, AssertionError, "(0, 1)")
    assert not dv._variant_raises((prog, 0), refuses, AssertionError, "(0, 1)")


def test_integer_pow_s_old_factor_in_a_checkpointed_scan_beside_a_custom_vjp():
    """A checkpoint calling a custom_vjp sin, then a scan whose body takes
    integer_pow(h, 1) of the scan's const (release campaign finding
    1af91f8f3f on 0.4.36): before jax 0.10.1 the old factor 1 * h**0, loop
    invariant, is saved as the known half of the scan's split (`output of
    closed_call`), beside the custom_vjp's output the checkpoint saves
    before 0.6.1 (`output of reduce_precision`); the two additive
    divergences compose. JAX's own list says what the installed release
    saves beyond cos."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.ad_checkpoint import saved_residuals

    import oracle

    @jax.custom_vjp
    def s(x):
        return jnp.sin(x)
    s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))

    def body(c):
        d = s(c)
        return jax.lax.scan(lambda h, _: (jax.lax.integer_pow(h, 1) + d, None), c, None, length=3)[0]
    f = jax.checkpoint(body, policy=jax.checkpoint_policies.everything_saveable)
    x = np.linspace(0.1, 0.3, 3).astype(np.float32)
    extra = sorted(s.split(" from ")[0] for _, s in saved_residuals(f, x) if "output of cos" not in s)
    report = oracle.check(f, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    assert report.status("residuals", "remat2") == ("known divergence" if extra else "ok"), (extra, str(report))
