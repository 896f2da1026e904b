"""oracle.check on the README's and docs/oracle.md's examples (and one
function per structure: names, policies, custom rules, scan, cond, jit)
passes on the installed JAX release, whichever from 0.4.25 to 0.10.2: the
checks the release matrix (`make test-jax JAX=<release>`) must pass.
Known divergences and naming normalisations of the release are allowed
(reported in the Report); a Mismatch is not."""
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import oracle  # noqa: E402
from oracle import jax_api  # noqa: E402
from spec import policies as P  # noqa: E402

f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)


def mlp(x, w1, w2):
    return jnp.sum(jnp.tanh(x @ w1) @ w2)


def mlp_loss(params, batch, *, temperature=1.0):
    x, y = batch
    h = jnp.tanh(x @ params["dense1"]["w"] + params["dense1"]["b"])
    logits = h @ params["dense2"]["w"] / temperature
    return jnp.mean((logits - y) ** 2)


def stack(x, n_layers, activation="tanh"):
    for _ in range(n_layers):
        x = getattr(jnp, activation)(x) * 0.9
    return jnp.sum(x)


@jax.custom_vjp
def clip_gradient(x):
    return x
clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


def loss(x):
    return jnp.sum(clip_gradient(jnp.sin(x)) ** 2)


def named(x, w):
    from jax.ad_checkpoint import checkpoint_name
    h = checkpoint_name(jnp.sin(x @ w), "h")
    return jnp.sum(jnp.cos(h) * h)


def scanned(x):
    return jnp.sum(jax.lax.scan(lambda c, y: (jnp.sin(c) * y, c), x[0], x)[1])


def conded(x):
    return jnp.sum(jax.lax.cond(x[0] > 0, jnp.sin, jnp.cos, x))


def jitted(x):
    return jnp.sum(jax.jit(lambda y: jnp.sin(y) * 2)(x) ** 2)


def with_constants(x):
    """jnp.asarray of numpy constants: a device_put that places nothing
    before jax 0.7 (tests/test_oracle_calls.py checks its import)."""
    mask = jnp.asarray(np.tril(np.ones((3, 3), bool)))
    scale = jnp.asarray(np.arange(3.0, dtype=np.float32))
    return jnp.sum(jnp.where(mask, jnp.sin(x), 0.0) * scale)


def device_put_unplaced(x):
    return jnp.sum(jnp.sin(jax.device_put(x)) * jax.device_put(jnp.cos(x)))


def _save_sin():
    """A user's own spec policy (not one of JAX's): JAX asks it through the
    oracle's translation of each equation."""
    from fuzz.strategies import SavePrimitives
    return SavePrimitives(frozenset({"sin"}))


params = {"dense1": {"w": f32(4, 8), "b": f32(8)}, "dense2": {"w": f32(8, 2)}}


CASES = [
    ("readme mlp dots", lambda: oracle.check(mlp, jax.checkpoint_policies.dots_saveable, f32(8), f32(8, 16), f32(16, 4))),
    ("mlp_loss", lambda: oracle.check(mlp_loss, jax.checkpoint_policies.dots_saveable, params, (f32(3, 4), f32(3, 2)), temperature=0.5)),
    ("stack static", lambda: oracle.check(stack, None, f32(3), 2, static_argnums=(1,), activation="sin", static_argnames=("activation",))),
    ("decorated AS_IS", lambda: oracle.check(jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x)))), oracle.AS_IS, f32(3), properties=("residuals",))),
    ("custom_vjp", lambda: oracle.check(loss, None, f32(3))),
    ("names save_only", lambda: oracle.check(named, jax.checkpoint_policies.save_only_these_names("h"), f32(4), f32(4, 4))),
    ("names spec policy", lambda: oracle.check(named, P.save_any_names_but_these("h"), f32(4), f32(4, 4))),
    ("save_from_both", lambda: oracle.check(named, jax.checkpoint_policies.save_from_both_policies(jax.checkpoint_policies.dots_saveable, jax.checkpoint_policies.save_only_these_names("h")), f32(4), f32(4, 4))),
    ("relu custom_jvp", lambda: oracle.check(lambda x: jnp.sum(jax.nn.relu(x) ** 2), jax.checkpoint_policies.everything_saveable, f32(5))),
    ("scan", lambda: oracle.check(scanned, None, f32(3))),
    ("cond", lambda: oracle.check(conded, None, f32(3))),
    ("asarray constants", lambda: oracle.check(with_constants, jax.checkpoint_policies.everything_saveable, f32(3, 3))),
    ("device_put unplaced", lambda: oracle.check(device_put_unplaced, None, f32(3))),
    # a spec policy JAX asks about a dot_general (its out_type param before 0.4.3x)
    ("spec policy asked by JAX", lambda: oracle.check(lambda x: jnp.sin(jax.lax.dot_general(x, x, (((0,), (0,)), ((), ())))),
                                                      _save_sin(), f32(3))),
    # a custom_jvp of an int input without symbolic zeros (jnp.logaddexp before it promotes)
    ("custom_jvp int input", lambda: oracle.check(lambda x: jnp.sum(jnp.logaddexp(jnp.sin(x), 1)),
                                                  jax.checkpoint_policies.dots_saveable, f32(3))),
    ("jit inside", lambda: oracle.check(jitted, jax.checkpoint_policies.everything_saveable, f32(3))),
]


@pytest.mark.parametrize("name, run", CASES, ids=[c[0] for c in CASES])
def test_example_checks_on_this_release(name, run):
    report = run()
    statuses = {(r.implementation, r.status) for r in report.results}
    assert ("remat2", "ok") in statuses
    for r in report.results:
        if r.implementation == "remat3" and jax_api.unavailable("remat3"):
            assert r.status == "not checked" and "no remat3" in r.detail
    assert report.environment["jax"] == jax.__version__


def test_every_example_binds_on_the_recorded_release():
    """The fuzzer leaves out what the installed JAX cannot bind (an API the
    release lacks, probed per release by fuzz.strategies.usable); on jax
    0.10.2, the release the spec is written against, that is nothing. On
    0.4.25 the probe leaves out lax.split, lax.stack, lax.unstack,
    jax.debug.print's and random_clone's spellings, and eigh and svd, whose
    JVP rules there (jnp.diagonal, a jit) the spec does not model; qr binds
    without the params its primitive lacks there (pivoting, use_magma:
    oracle/jax_api/source.py), where the emitter's TypeError was a finding
    of a campaign on 0.4.25."""
    from fuzz.strategies import unbindable_primitives
    from oracle.jax_api.versions import Releases, holds
    missing = unbindable_primitives()
    if holds(Releases("0.10.2")):
        assert missing == {}
    elif holds(Releases("0.4.25", "0.4.26")):
        assert {"eigh", "svd"} <= set(missing) and "qr" not in missing, missing
    else:
        assert all(why.startswith(f"jax {jax.__version__}:") for why in missing.values()), missing


def test_a_precision_pair_binds_on_this_release():
    """A dot_general's precision pair is emitted through getattr: lax.Precision
    takes no [] before jax 0.4.3x (found by a campaign on 0.4.25)."""
    import numpy as np

    import spec
    from spec.ir import ArrayType
    from spec.prims_structural import dot_general
    prog = spec.trace(lambda x, y: dot_general(x, y, (((1,), (0,)), ((), ())), precision=("HIGHEST", "HIGHEST")),
                      ArrayType((2, 3), np.float32), ArrayType((3, 2), np.float32))
    eqn = jax.make_jaxpr(oracle.to_jax(prog))(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)).eqns[0]
    assert [p.name for p in eqn.params["precision"]] == ["HIGHEST", "HIGHEST"]


def test_a_stack_over_a_layer_the_spec_cannot_differentiate_reports():
    """A generic reduce_window under linearize o grad: the spec cannot build
    the grad level, JAX raises its own error (on 0.4.25 a missing rule):
    the check reports (both refuse, or a known divergence) instead of the
    oracle raising while looking the disagreement up (found on 0.4.25)."""
    import numpy as np

    from oracle import stacks as S
    from oracle.from_jax import trace_jax
    prog = trace_jax(lambda a, b: jax.lax.reduce_window(b, 1.0, jax.lax.mul, (1, 3), (1, 1), "VALID"),
                     np.float32(1), np.ones((2, 5), np.float32))
    stack = S.Stack((S.Layer("grad"), S.Layer("linearize")))
    report = oracle.check(oracle.to_jax(prog), oracle.AS_IS, np.float32(1), np.ones((2, 5), np.float32),
                          implementations=("remat2",), properties=(S.stack_property(stack, prog),))
    assert report.results[0].status in ("not applicable", "known divergence"), str(report)


def test_per_argument_prevent_cse_only_where_jax_has_it():
    """jax.checkpoint takes prevent_cse per argument from jax 0.7.2; before,
    a tuple is no API (JAX crashes or misreads it: campaigns on 0.4.25,
    0.4.36 and 0.6.2). The oracle refuses it there, and the fuzzer draws a
    bool instead."""
    import numpy as np
    from hypothesis import given, settings

    from fuzz.strategies import programs
    from oracle.jax_api import capabilities
    from spec.ir import subprograms

    per_argument = capabilities().per_argument_prevent_cse
    f = lambda x: jnp.sum(jax.checkpoint(jnp.sin, prevent_cse=(False,))(x))
    if per_argument:
        assert oracle.check(f, None, np.ones(3, np.float32)).status("residuals", "remat2") == "ok"
    else:
        with pytest.raises(oracle.Unsupported, match="per argument"):
            oracle.check(f, None, np.ones(3, np.float32))

    flags = []

    def walk(prog):
        for e in prog.eqns:
            if e.primitive.name == "remat":
                flags.append(e.params["prevent_cse"])
            for _, sub in subprograms(e.params):
                walk(sub)

    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(programs())
    def draw(prog):
        walk(prog)
    draw()
    assert flags and (per_argument or not any(isinstance(p, tuple) for p in flags))


def test_capabilities_are_the_release_s_whichever_implementation_the_user_selected():
    """The probes read the release, not the user's flags: with jax_remat3
    switched on (as a remat3 reproducer does) the per-argument prevent_cse
    probe still reads remat2's equation."""
    from oracle.jax_api import capabilities
    expected = capabilities()
    if not expected.remat3:
        pytest.skip(f"jax {jax.__version__} has no jax_remat3")
    capabilities.cache_clear()
    jax.config.update("jax_remat3", True)
    try:
        assert capabilities() == expected
    finally:
        jax.config.update("jax_remat3", False)
        capabilities.cache_clear()
