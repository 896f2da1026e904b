"""Spellings (oracle/spellings.py): each jax.numpy spelling binds exactly
the lax call's equation (the jaxprs are compared, for every entry of the
table), each checkpoint spelling gives the canonical jaxpr where JAX says
it does and, where it does not (a policy that saves nothing given as None
or as nothing_saveable), the same saved residuals in JAX and in the spec;
oracle.check agrees on pristine JAX under every spelling; reproducers
written in a spelling are runnable and spell it."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import spec
from spec import ops, policies as sp

from oracle.errors import InvalidArgument
from oracle.spellings import CHECKPOINT_FORMS, JNP, SAVE_NOTHING, Spelling, jnp_source

jax = pytest.importorskip("jax")

import oracle  # noqa: E402
from oracle.from_jax import from_jaxpr  # noqa: E402
from oracle.to_jax import to_jax  # noqa: E402

F = spec.f32

# one program per jnp spelling, binding the primitive where its guard holds
JNP_CASES = {
    "sin": (lambda x: ops.sin(x), [F[2, 3]]),
    "cos": (lambda x: ops.cos(x), [F[3]]),
    "tanh": (lambda x: ops.tanh(x), [F[2, 3]]),
    "exp": (lambda x: ops.exp(x), [F[2]]),
    "log": (lambda x: ops.log(x), [F[2]]),
    "log1p": (lambda x: ops.log1p(x), [F[2]]),
    "sqrt": (lambda x: ops.sqrt(x), [F[2]]),
    "logistic": (lambda x: ops.logistic(x), [F[2, 3]]),
    "neg": (lambda x: ops.neg(x), [F[3]]),
    "square": (lambda x: ops.square(x), [F[3]]),
    "abs": (lambda x: ops.abs(x), [F[3]]),
    "add": (lambda x, y: ops.add(x, y), [F[2, 3], F[2, 3]]),
    "sub": (lambda x, y: ops.sub(x, y), [F[2, 3], F[2, 3]]),
    "mul": (lambda x, y: ops.mul(x, y), [F[3], F[3]]),
    "max": (lambda x, y: ops.max(x, y), [F[3], F[3]]),
    "min": (lambda x, y: ops.min(x, y), [F[3], F[3]]),
    "integer_pow": (lambda x: ops.integer_pow(x, -2) + ops.integer_pow(x, 3), [F[3]]),
    "dot_general": (lambda x, y: ops.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.float32),
                    [F[2, 3], F[3, 4]]),
    "reduce_sum": (lambda x: ops.reduce_sum(x, (0, 2)), [F[2, 2, 3]]),
    "reduce_max": (lambda x: ops.reduce_max(x, (1,)), [F[2, 3]]),
    "transpose": (lambda x: ops.transpose(x, (2, 0, 1)), [F[2, 2, 3]]),
}


def _args(prog, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, t.shape).astype(t.dtype) for t in prog.in_types]


def test_every_jnp_spelling_has_a_case():
    assert set(JNP_CASES) == set(JNP)


@pytest.mark.parametrize("name", sorted(JNP_CASES))
def test_jnp_spelling_binds_the_same_equation(name):
    fn, types = JNP_CASES[name]
    prog = spec.trace(fn, *types)
    spelled = [e for e in prog.eqns if e.primitive.name == name]
    assert spelled and all(jnp_source(e, [f"x{i}" for i in range(len(e.inputs))]) for e in spelled)
    args = _args(prog)
    lax_jaxpr = jax.make_jaxpr(to_jax(prog))(*args)
    jnp_jaxpr = jax.make_jaxpr(to_jax(prog, spelling=Spelling(jnp=True)))(*args)
    assert str(jnp_jaxpr) == str(lax_jaxpr)


def test_jnp_guards_refuse_what_would_bind_something_else():
    """A literal operand, operands of two shapes, a matmul that is not
    (1,)·(0,): no jnp spelling (jnp would promote, broadcast or transpose)."""
    def refused(fn, *types):
        prog = spec.trace(fn, *types)
        return [jnp_source(e, ["a"] * len(e.inputs)) for e in prog.eqns]
    assert refused(lambda x: ops.add(x, np.float32(2.0)), F[3]) == [None]
    assert refused(lambda x, y: ops.mul(x, y), F[3], F[()]) == [None]
    assert refused(lambda x, y: ops.dot_general(x, y, (((0,), (0,)), ((), ())),
                                                preferred_element_type=np.float32), F[3, 2], F[3, 2]) == [None]
    assert refused(lambda x: ops.integer_pow(x, 1), F[3]) == [None]


# --------------------------------------------------------------------------
# checkpoint spellings

def _checkpointed(policy, prevent_cse):
    def f(x, y):
        h = ops.checkpoint(lambda a, b: (ops.sin(ops.sin(a)) * b, ops.cos(b)), policy=policy,
                           prevent_cse=prevent_cse)(x, y)
        return ops.reduce_sum(ops.tanh(h[0]) * h[1], (0, 1))
    return spec.trace(f, F[2, 3], F[2, 3])


CHECKPOINT_SPELLINGS = [Spelling(checkpoint=c, save_nothing=s, default_prevent_cse=d, static_argnums=st)
                        for c, s, d, st in itertools.product(CHECKPOINT_FORMS, SAVE_NOTHING, (True, False),
                                                             (False, True))]
POLICIES = {"none": None, "nothing": sp.nothing_saveable, "dots": sp.dots_saveable,
            "everything": sp.everything_saveable}


def _changes_policy(spelling, policy) -> bool:
    """The spelling passes another (equivalent) policy object than the program's."""
    if policy is None:
        return spelling.save_nothing == "nothing_saveable"
    return policy is sp.nothing_saveable and spelling.save_nothing in ("omitted", "none")


@pytest.mark.parametrize("impl", ["remat2", "remat3"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_checkpoint_spellings_give_the_canonical_jaxpr_or_the_same_residuals(policy, impl):
    from jax._src.ad_checkpoint import saved_residuals
    from oracle.checker import implementation
    for prevent_cse in (True, False):
        prog = _checkpointed(POLICIES[policy], prevent_cse)
        args = _args(prog)
        with implementation(impl):
            canonical = jax.make_jaxpr(to_jax(prog))(*args)
            jax_res = [(str(a), s) for a, s in saved_residuals(to_jax(prog), *args)]
            for spelling in CHECKPOINT_SPELLINGS:
                fn = to_jax(prog, spelling=spelling)
                jaxpr = jax.make_jaxpr(fn)(*args)
                if not _changes_policy(spelling, POLICIES[policy]) or impl == "remat3":
                    # remat3's jax.checkpoint makes nothing_saveable None itself
                    assert str(jaxpr) == str(canonical), spelling
                    continue
                assert str(jaxpr) != str(canonical), spelling       # the policy param differs ...
                assert [(str(a), s) for a, s in saved_residuals(fn, *args)] == jax_res, spelling  # ... not what JAX saves
                with implementation("remat2"):
                    assert spec.saved_residuals(from_jaxpr(jaxpr)) == spec.saved_residuals(
                        from_jaxpr(canonical)), spelling


def test_invalid_spelling_is_refused():
    with pytest.raises(InvalidArgument, match="unknown spelling"):
        Spelling(checkpoint="decorated")
    with pytest.raises(InvalidArgument, match="spelling must be"):
        to_jax(_checkpointed(None, True), spelling="jnp")


SPELLINGS = [Spelling(), Spelling(checkpoint="decorator", save_nothing="omitted", default_prevent_cse=False),
             Spelling(checkpoint="remat", save_nothing="nothing_saveable", static_argnums=True, jnp=True),
             Spelling(save_nothing="none", jnp=True, jit=True),
             Spelling(checkpoint="decorator", static_argnums=True, jit=True)]


@pytest.mark.parametrize("k", range(len(SPELLINGS)))
def test_pristine_jax_agrees_under_every_spelling(k):
    prog = _checkpointed(None, False)
    report = oracle.check(to_jax(prog, spelling=SPELLINGS[k]), oracle.AS_IS, *_args(prog),
                          properties=("residuals", "values", "vjp", "vmap", "second_order"))
    assert {r.status for r in report.results} == {"ok"}, str(report)


def test_reproducers_spell_it_and_run(tmp_path):
    import subprocess
    import sys
    from oracle.repro import write_repro
    prog = _checkpointed(sp.dots_saveable, False)
    args = _args(prog)
    scripts = []
    for k, spelling in enumerate(SPELLINGS):
        # as oracle.check writes it: the program JAX traced the spelled function to
        traced = from_jaxpr(jax.make_jaxpr(to_jax(prog, spelling=spelling))(*args))
        text = write_repro(traced, None, args, "residuals", "remat2", "msg", spelling=spelling).text
        if spelling.checkpoint == "decorator":
            assert "@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_saveable" in text
        if spelling.checkpoint == "remat":
            assert "jax.remat(" in text
        if spelling.jnp:
            assert "jnp.sin(" in text and "E['sin'](" not in text
        if spelling.jit:
            assert "= jax.jit(jitted" in text
        path = tmp_path / f"repro_{k}.py"
        path.write_text(text)
        scripts.append(str(path))
    runner = "import runpy, sys\nfor p in sys.argv[1:]:\n    runpy.run_path(p, run_name='__main__')\n"
    run = subprocess.run([sys.executable, "-c", runner, *scripts], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


# scans lax.scan over a closure would not make as written: a const no
# equation reads (found by a campaign on 0.4.25: the reproducer's lax.scan
# dropped it, and with it JAX's barrier), a carry passed through, an xs
# returned as a ys, a const read after another, a literal const; and one it
# makes (the reproducer then writes lax.scan)
def _scan_case(body, consts_from=lambda x, y: (x, ops.cos(x))):
    def fn(x, y):
        return ops.scan(body, x, y, consts=consts_from(x, y))
    return spec.trace(fn, F[3], F[2, 3])


SCAN_CASES = {
    "unread_const": (_scan_case(lambda c, x, a, b: (ops.sin(c) * b, x)), "bind_scan("),
    "carry_passed_through": (_scan_case(lambda c, x, a, b: (c, ops.sin(x) * a * b)), "bind_scan("),
    "xs_returned": (_scan_case(lambda c, x, a, b: (ops.sin(c) * a * b, x)), "bind_scan("),
    "consts_read_out_of_order": (_scan_case(lambda c, x, a, b: (ops.sin(c) * b * a, x * 2.0)), "bind_scan("),
    "literal_const": (_scan_case(lambda c, x, a: (ops.sin(c) * a, x * 2.0),
                                 lambda x, y: (2.0,)), "bind_scan("),
    "closed_over": (_scan_case(lambda c, x, a, b: (ops.sin(c) * a * b, x * 2.0)), "jax.lax.scan("),
}


@pytest.mark.parametrize("name", sorted(SCAN_CASES))
def test_a_reproducer_makes_the_scan_equation_the_check_ran(name):
    """The reproducer's function traces to the jaxpr oracle.to_jax's does
    (the function oracle.check runs), writing lax.scan where that makes
    the same equation and binding JAX's scan primitive where it does not."""
    from oracle.jax_names import EMITTERS_SOURCE
    from oracle.jax_api.source import emitter_table_source
    from oracle.repro import program_source
    prog, spelled = SCAN_CASES[name]
    args = _args(prog)
    source = program_source(prog)
    assert spelled in source
    namespace = {}
    exec("import jax, ml_dtypes\nimport jax.numpy as jnp\nimport numpy as np\n"
         "from jax.ad_checkpoint import checkpoint_name\n" + emitter_table_source(EMITTERS_SOURCE) + "\n"
         + source, namespace)
    written = jax.make_jaxpr(namespace["f"])(*args)
    assert str(written) == str(jax.make_jaxpr(to_jax(prog))(*args))


@pytest.mark.parametrize("who, passes", [("JAX", True), ("the spec", False)])
def test_a_reproducer_of_one_side_raising_passes_where_jax_computes(who, passes):
    """A reproducer for "JAX raised ... where the spec computes" runs JAX's
    side and, reaching its end, JAX computed too: it passes (on a release
    that fixed the error; found on 0.4.25, a reproducer that failed on
    0.10.2 as well). One for "the spec raised" exits with the message."""
    import subprocess
    import sys
    from oracle.repro import _one_side_raised_ending
    other = "the spec" if who == "JAX" else "JAX"
    ending = _one_side_raised_ending(f"{who} raised ValueError where {other} computes a result:\n  detail")
    run = subprocess.run([sys.executable, "-c", "got = [1.0]\n" + ending], capture_output=True, text=True)
    assert (run.returncode == 0) == passes, run.stdout + run.stderr
