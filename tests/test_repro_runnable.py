"""Every reproducer oracle.repro writes is valid Python that runs on
pristine JAX, and reports agreement where the spec agrees with JAX.

For every recorded program of every family (tests/jax_*programs.py) two
reproducers are written with `write_repro`: "residuals" (JAX's
saved_residuals of the written-out program against the spec's list) and
"values" (jax.jit of it against spec.evaluate). Each must compile, and run
under plain python to agreement, except where the recorded tests document
that the spec and JAX differ (their known divergences, DIVERGENT below):
there the residuals reproducer must still run to its comparison, and show
the divergence where it lies in the program itself rather than in how JAX
transformed the user's code into that program. Programs the recorded tests
xfail (their GAPS) are skipped with that reason.

Also written and run: programs the tables do not have (extra_programs:
scan, cond and a custom_jvp inside a checkpoint, with a checkpoint inside
the scan body; literals of every dtype, nan and infinities; a jit with no
outputs, a closed_call and a three-branch switch; a custom_jvp whose rule
calls the function, from JAX; arguments that are pytree leaves, from JAX;
inputs without names), and the source of the programs a linearization makes: custom_lin (transposed by
JAX) and device_put (an offloading policy's forward program).

The reproducers run in two python processes that run their share each in
a fresh namespace (runpy), not in one process each: importing jax alone
takes a second.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import spec  # noqa: E402
from spec import ops  # noqa: E402
from spec import policies as sp  # noqa: E402
from spec.ir import is_float, subprograms  # noqa: E402

import jax_composed_programs  # noqa: E402
import jax_control_programs  # noqa: E402
import jax_custom_programs  # noqa: E402
import jax_programs  # noqa: E402
import jax_remat_programs  # noqa: E402
import jax_scan_programs  # noqa: E402
import test_recorded_cond_residuals  # noqa: E402
import test_recorded_remat_residuals  # noqa: E402
import test_recorded_residuals  # noqa: E402
import test_recorded_scan_residuals  # noqa: E402

from oracle.jax_names import EMITTERS_SOURCE  # noqa: E402
from oracle.jax_api.source import emitter_table_source  # noqa: E402
from oracle.repro import program_source, write_repro  # noqa: E402

FAMILIES = {m.__name__: m for m in (jax_programs, jax_remat_programs, jax_scan_programs,
                                    jax_control_programs, jax_custom_programs, jax_composed_programs)}
PROPS = ("residuals", "values")
DIFFERS = "AssertionError: saved residuals differ from the spec"

# The recorded tests' known divergences, and what the reproducer of the
# spec's program shows: "differs" where JAX's answer for that very program
# differs, "agrees" where the divergence lies in JAX's transformation of the
# user's code, which the written-out program no longer contains.
DIVERGENT = {
    ("jax_programs", "scalar_where"): "differs",      # JAX's jit linearization saves a zero
    ("jax_remat_programs", "save_anything_except_these_names"): "differs",   # JAX's stub policy
    ("jax_control_programs", "vmap_cond"): "agrees",  # JAX's vmap of the cond inlines the literal
}
# Programs whose reproducer does not rebuild them exactly: the writer
# (oracle/repro.py) spells each constant Literal as its own array, so a
# constant the program reads twice (one array, one residual in JAX and the
# spec) becomes two arrays in the script, and JAX saves it twice. The
# reproducer shows that difference until the writer names shared constants.
SHARED_CONSTANTS = {("jax_programs", n) for n in ("jit_shared_constant", "constant_read_twice",
                                                  "jit_constant_read_twice")}
GAPS = {("jax_scan_programs", n): r for n, r in test_recorded_scan_residuals.GAPS.items()}
GAPS.update({("jax_control_programs", n): r for n, r in test_recorded_cond_residuals.GAPS.items()})


def recorded_divergences() -> set:
    return ({("jax_programs", n) for n in test_recorded_residuals.KNOWN_DIFFERENCES}
            | {("jax_remat_programs", n) for n in test_recorded_remat_residuals.KNOWN_DIVERGENCES}
            | {("jax_control_programs", n) for n in test_recorded_cond_residuals.KNOWN_DIVERGENCES})


# --------------------------------------------------------------------------
# programs the tables do not have

def _relu():
    """A custom_jvp whose rule calls the function itself."""
    def relu(x):
        return ops.max(x, 0.0)

    def relu_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return relu(x), ops.select_n(ops.gt(x, 0.0), ops.mul(t, 0.0), t)
    return spec.custom_jvp(relu, relu_jvp)


RELU = _relu()


def nested_spec(xs, w):
    """checkpoint(scan(body)) whose body has a checkpoint, a cond and a custom_jvp."""
    def body(c, x, w):
        h = ops.checkpoint(lambda a: ops.sin(ops.sin(a)))(c * x)
        h = spec.cond(ops.gt(ops.reduce_sum(h, (0,)), 0.0), ops.cos, lambda a: ops.sin(a) * 2.0, h)
        h = RELU(h @ w)
        return h, ops.tanh(h)

    def outer(xs, w):
        c, ys = spec.scan(body, ops.squeeze(ops.slice(xs, (0, 0), (1, 3)), (0,)), xs, consts=(w,))
        return ops.reduce_sum(c, (0,)) + ops.reduce_sum(ys, (0, 1))
    return ops.checkpoint(outer, policy=sp.dots_saveable)(xs, w)


def literals_spec(x):
    """Literals of every dtype, scalars and arrays, nan and infinities."""
    import ml_dtypes
    h = ops.convert_element_type(x, ml_dtypes.bfloat16) * ml_dtypes.bfloat16(1.5)
    h = ops.convert_element_type(h, np.float32) + ops.convert_element_type(
        ops.convert_element_type(x, np.float16) * np.float16(0.25), np.float32)
    h = ops.max(h, np.array([-np.inf, -np.inf, -np.inf], np.float32))
    h = ops.select_n(np.array([False, False, False]), h, np.array([np.nan, np.inf, -0.0], np.float32))
    n = ops.convert_element_type(ops.gt(x, np.float32(0.5)), np.int32) + np.array([1, 2, 3], np.int32)
    b = ops.select_n(ops.eq(n, np.int32(2)), h, h * 2.0)
    return (ops.reduce_sum(b, (0,)), ops.convert_element_type(x, np.float64) * np.float64(1 / 3),
            n, ops.ne(n, 3))


def calls_spec(x, i):
    """A jit with no outputs, a closed_call, a three-branch switch on an int."""
    ops.call(spec.trace(lambda a: (), spec.f32[3]), x, name="nothing")
    s, c = ops.call(spec.trace(lambda a: (ops.sin(a), ops.cos(a)), spec.f32[3]), x, name=None)
    y = spec.switch(i, [ops.sin, lambda a: ops.cos(a) * 3.0, lambda a: a * a], s * c)
    return ops.reduce_sum(y, (0,))


def recursive_rule_jax(x):
    """jnp.sum(g(g(x))) for a jax.custom_jvp g whose rule calls g."""
    import jax.numpy as jnp

    @jax.custom_jvp
    def g(x):
        return jnp.sin(x)

    @g.defjvp
    def g_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return g(x), jnp.cos(x) * g(t)
    return jnp.sum(g(g(x)))


def pytree_args_jax(params, x, *rest):
    import jax.numpy as jnp
    h = jnp.tanh(x @ params["w"] + params["b"])
    return jnp.sum(jax.checkpoint(lambda h: jnp.sin(jnp.sin(h)))(h) * rest[0])


def unnamed_spec():
    """A program whose inputs have no names (JAX then names the reproducer's)."""
    prog = spec.trace(lambda x, w: ops.sin(ops.sin(x) * w), spec.f32[3], spec.f32[3])
    return spec.Program(prog.inputs, prog.eqns, prog.outputs, input_names=None)


def _from_jax(fn, *args):
    from oracle.from_jax import from_jaxpr
    return from_jaxpr(jax.make_jaxpr(fn)(*args)), jax.tree.leaves(args)


def extra_programs() -> dict:
    """name -> (program, inputs, values tolerance)."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.uniform(0.5, 1.5, s).astype(np.float32)
    params = {"w": f32(3, 2), "b": f32(2)}
    return {
        "nested": (spec.trace(nested_spec, spec.f32[4, 3], spec.f32[3, 3]), [f32(4, 3), f32(3, 3)], 1e-4),
        "literals": (spec.trace(literals_spec, spec.f32[3]), [f32(3)], 2e-2),      # bfloat16 rounding
        "calls": (spec.trace(calls_spec, spec.f32[3], spec.i32[()]), [f32(3), np.int32(1)], 1e-5),
        "recursive_rule": (*_from_jax(recursive_rule_jax, f32(3)), 1e-5),
        "pytree_args": (*_from_jax(pytree_args_jax, params, f32(4, 3), f32(4, 2)), 1e-4),
        "unnamed": (unnamed_spec(), [f32(3), f32(3)], 1e-5),
    }


# --------------------------------------------------------------------------
# writing and running

def table_cases() -> list[tuple]:
    return [(fam, p.name, prop) for fam, m in FAMILIES.items() for p in m.PROGRAMS for prop in PROPS]


def _numeric(prog, args, atol=None):
    """The spec's values, and a tolerance: 1e-4 of their scale plus ten times
    their own rounding error (their distance from the float64 program's: some
    programs amplify rounding a lot at the tables' arange-based inputs)."""
    from oracle.upcast import up, upcast
    expected = spec.evaluate(prog, *args)
    exact = spec.evaluate(upcast(prog), *up(args))
    scale = max([float(np.max(np.abs(np.asarray(e, np.float64)), initial=0.0)) for e in expected] + [1.0])
    rounding = max([float(np.max(np.abs(np.asarray(e, np.float64) - x), initial=0.0))
                    for e, x in zip(expected, exact)] + [0.0])
    return dict(expected=expected, atol=atol if atol is not None else 1e-4 * scale + 10 * rounding)


def _repro(prog, args, prop, atol=None) -> str:
    numeric = _numeric(prog, args, atol) if prop == "values" else None
    return write_repro(prog, None, args, prop, "remat2", "written by tests/test_repro_runnable.py",
                       numeric=numeric).text


def _linearization_scripts() -> dict:
    """Scripts running the source of programs a linearization makes."""
    head = ("import jax, ml_dtypes\nimport jax.numpy as jnp\nimport numpy as np\n"
            "from jax.ad_checkpoint import checkpoint_name\n" + emitter_table_source(EMITTERS_SOURCE) + "\n")
    p = jax_custom_programs.BY_NAME["custom_vjp_top"]
    prog, args = p.trace_spec(), p.example_inputs()
    lin = spec.linearize(prog)
    res = spec.evaluate(lin.forward, *args)[len(prog.outputs):]
    ct = np.ones(prog.out_types[0].shape, np.float32)
    want = spec.vjp(prog, *args)[1](ct)
    arr = lambda a: f"np.array({np.asarray(a).tolist()!r}, dtype=np.{np.asarray(a).dtype.name})"
    types = ", ".join(f"jax.ShapeDtypeStruct({t.shape!r}, np.{np.dtype(t.dtype).name})"
                      for t in lin.linear.in_types[len(res):])
    custom_lin = head + program_source(lin.linear, "tangent_map") + f"""

res = [{', '.join(arr(r) for r in res)}]
tangent_types = [{types}]
got = jax.linear_transpose(lambda *t: tangent_map(*res, *t), *tangent_types)(({arr(ct)},))
assert np.allclose(got[0], {arr(want[0])}, atol=1e-6), (got, 'the spec transposes custom_lin to', {arr(want[0])})
try:
    tangent_map(*res, *[jnp.ones(t.shape, t.dtype) for t in tangent_types])
    raise SystemExit('evaluating custom_lin should raise')
except TypeError as e:
    assert 'forward-mode' in str(e), e
"""
    offload = spec.trace(lambda x, W: ops.checkpoint(
        lambda x, W: ops.reduce_sum(ops.sin(x @ W), (0, 1)),
        policy=sp.offload_dot_with_no_batch_dims("device", "pinned_host"))(x, W), spec.f32[2, 3], spec.f32[3, 4])
    forward = spec.linearize(offload).forward
    assert "device_put" in str(forward)
    xs = [np.full((2, 3), 0.5, np.float32), np.full((3, 4), 0.25, np.float32)]
    return {"custom_lin": custom_lin, "device_put": _repro(forward, xs, "values")}


RUNNER = r'''
import contextlib, io, json, runpy, sys, traceback
import jax
results = {}
for path in sys.argv[2:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        status = "ok"
    except BaseException as e:
        status = f"{type(e).__name__}: {e}"[:3000]
        if not isinstance(e, AssertionError):
            status += "\n" + traceback.format_exc()[-3000:]
    finally:
        jax.config.update("jax_remat3", False)
        jax.config.update("jax_enable_x64", False)
    results[path] = dict(status=status, stdout=out.getvalue()[-3000:])
with open(sys.argv[1], "w") as fh:
    json.dump(results, fh)
'''


def run_scripts(scripts: dict, directory, processes: int = 2) -> dict:
    """Write each script, run them all in `processes` python processes;
    key -> dict(status="ok" or the exception, stdout=...)."""
    paths = {}
    for i, (key, text) in enumerate(scripts.items()):
        compile(text, f"<reproducer {key}>", "exec")          # valid Python, or a SyntaxError here
        paths[key] = os.path.join(directory, f"repro_{i:04d}.py")
        with open(paths[key], "w") as fh:
            fh.write(text)
    runner = os.path.join(directory, "runner.py")
    with open(runner, "w") as fh:
        fh.write(RUNNER)
    shares = [list(paths.values())[k::processes] for k in range(processes)]
    outs = [os.path.join(directory, f"results_{k}.json") for k in range(processes)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, runner, out, *share], env=env, cwd=directory,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for share, out in zip(shares, outs)]
    for p in procs:
        log = p.communicate(timeout=600)[0]
        assert p.returncode == 0, f"the runner failed:\n{log[-3000:]}"
    results = {}
    for out in outs:
        with open(out) as fh:
            results.update(json.load(fh))
    return {key: results[path] for key, path in paths.items()}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every reproducer, written and run once: key -> result."""
    scripts = {}
    for fam, name, prop in table_cases():
        p = FAMILIES[fam].BY_NAME[name]
        scripts[(fam, name, prop)] = _repro(p.trace_spec(), p.example_inputs(), prop)
    for name, (prog, args, atol) in extra_programs().items():
        for prop in PROPS:
            scripts[("extra", name, prop)] = _repro(prog, args, prop, atol)
    for name, text in _linearization_scripts().items():
        scripts[("linearization", name, "run")] = text
    return run_scripts(scripts, str(tmp_path_factory.mktemp("reproducers")))


def _show(result) -> str:
    return f"{result['status']}\n--- its output:\n{result['stdout']}"


# --------------------------------------------------------------------------
# the tests

def _case(fam, name, prop):
    if (fam, name) in GAPS:
        return pytest.param(fam, name, prop, marks=pytest.mark.skip(reason=GAPS[(fam, name)]))
    return pytest.param(fam, name, prop, id=f"{fam}-{name}-{prop}")


@pytest.mark.parametrize("fam, name, prop", [_case(*c) for c in table_cases()])
def test_recorded_program_reproducer_runs(ran, fam, name, prop):
    result = ran[(fam, name, prop)]
    if prop == "residuals" and (DIVERGENT.get((fam, name)) == "differs" or (fam, name) in SHARED_CONSTANTS):
        assert result["status"] == DIFFERS, _show(result)
    else:
        assert result["status"] == "ok", _show(result)


@pytest.mark.parametrize("name", ["nested", "literals", "calls", "recursive_rule", "pytree_args", "unnamed"])
@pytest.mark.parametrize("prop", PROPS)
def test_extra_program_reproducer_runs(ran, name, prop):
    assert ran[("extra", name, prop)]["status"] == "ok", _show(ran[("extra", name, prop)])


@pytest.mark.parametrize("name", ["custom_lin", "device_put"])
def test_linearization_program_source_runs(ran, name):
    assert ran[("linearization", name, "run")]["status"] == "ok", _show(ran[("linearization", name, "run")])


def test_divergences_are_those_of_the_recorded_tests():
    assert set(DIVERGENT) == recorded_divergences()


def test_every_reproducer_was_run(ran):
    assert len(table_cases()) >= 300
    assert {k for k in ran if k[0] in FAMILIES} == set(table_cases())


def _nestings(prog, outer="top") -> set:
    """(enclosing primitive, primitive) pairs of the program, sub-programs included."""
    found = set()
    for e in prog.eqns:
        found.add((outer, e.primitive.name))
        for _, sub in subprograms(e.params):
            found |= _nestings(sub, e.primitive.name)
    return found


def test_nestings_are_covered():
    """The reproducers run include scan, cond and custom calls inside a
    checkpoint, and a checkpoint inside a scan body and a cond branch."""
    found = set()
    for m in FAMILIES.values():
        for p in m.PROGRAMS:
            found |= _nestings(p.trace_spec())
    nested = _nestings(spec.trace(nested_spec, spec.f32[4, 3], spec.f32[3, 3]))
    want = {("remat", "scan"), ("remat", "cond"), ("remat", "custom_jvp_call"), ("scan", "remat"),
            ("cond", "remat"), ("call", "cond"), ("remat", "call"), ("call", "custom_vjp_call")}
    assert want <= found
    assert {("remat", "scan"), ("scan", "remat"), ("scan", "cond"), ("scan", "custom_jvp_call")} <= nested
    assert {("top", "custom_vjp_call"), ("remat", "custom_vjp_call"), ("top", "while")} <= found


def test_float_inputs_are_differentiated():
    """A reproducer's `diff` lists the float inputs (bfloat16 too)."""
    import ml_dtypes
    prog = spec.trace(lambda x, n: ops.convert_element_type(x, np.float32) * 2.0,
                      spec.bf16[3], spec.i32[()])
    text = _repro(prog, [np.ones(3, ml_dtypes.bfloat16), np.int32(2)], "values")
    assert "diff = [0]" in text and is_float(np.dtype(ml_dtypes.bfloat16))


def test_a_numeric_reproducer_agrees_where_both_sides_are_nan():
    """The comparison a numeric reproducer ends with treats a nan (or an
    infinity) where the spec has the same as agreement, as oracle.tolerances
    does, and fails where only one side has it (campaign finding e9a2170ea9:
    a reproducer failed on a correct JAX for a nan output)."""
    from oracle.repro import _flat_name, _numeric_check

    prog = spec.trace(lambda x: ops.log(x), spec.f32[2])
    name = _flat_name(prog)
    with np.errstate(invalid="ignore"):
        jax_log = np.log(np.array([-1.0, 2.0]))        # JAX's answer: nan, log 2
    for expected, fails in ((jax_log, False), (np.array([0.0, np.log(2.0)]), True)):
        code = _numeric_check(prog, [np.array([-1.0, 2.0], np.float32)], "values",
                              {"expected": [expected], "atol": 1e-6})
        ns = {"np": np, "args": [np.array([-1.0, 2.0], np.float32)], name: lambda x: [jax_log]}
        try:
            exec(code.replace(f"jax.jit({name})", name), ns)
            failed = False
        except AssertionError:
            failed = True
        assert failed == fails


def test_a_cond_with_passthrough_outputs_is_written_as_the_primitive_the_check_binds():
    """A two-branch cond on convert_element_type(pred) is written as
    lax.cond(pred, ...), unless a branch output is an operand every branch
    returns: lax.cond prunes that (jax 0.6.0 on), so the reproducer's
    program would not be the checked one, which oracle.to_jax binds as the
    cond primitive (release campaign finding c86d6c6549 on 0.6.2: a
    reproducer of nested passthrough conds saved nothing where the check's
    JAX saved an index and a value). JAX's jaxprs of both are compared."""
    import jax
    from oracle.to_jax import to_jax
    from spec.prims_control import cond_eqn
    f32 = spec.f32
    second = spec.trace(lambda a, b: (b,), f32[3], f32[3])

    def fn(a, b):
        index = ops.convert_element_type(ops.gt(ops.reduce_sum(ops.sin(b), (0,)), 0.0), np.int32)
        return cond_eqn(index, a, b, branches=(second, second))
    prog = spec.trace(fn, f32[3], f32[3])
    head = ("import jax, ml_dtypes\nimport jax.numpy as jnp\nimport numpy as np\n"
            "from jax.ad_checkpoint import checkpoint_name\n" + emitter_table_source(EMITTERS_SOURCE) + "\n")
    ns = {}
    exec(head + program_source(prog, "f"), ns)
    x = np.ones(3, np.float32)
    outs = lambda g: [len(e.outvars) for e in jax.make_jaxpr(g)(x, x).jaxpr.eqns if e.primitive.name == "cond"]  # noqa: E731
    assert outs(ns["f"]) == outs(to_jax(prog)) == [1]


def test_a_while_with_an_unread_const_is_written_as_the_primitive_the_check_binds():
    """lax.while_loop closes over only the values its functions read, so a
    while whose body ignores a const is written as the while primitive
    oracle.to_jax binds, const and all (release campaign finding 927ac9c8b9
    on 0.4.36: a reproducer whose while lost its const saved nothing where
    the check's JAX saved the const's derivative factor). JAX's jaxprs of
    both are compared; one reading its consts stays lax.while_loop."""
    import jax
    from oracle.to_jax import to_jax
    from spec.prims_control import while_loop
    f32 = spec.f32
    for reads in (False, True):
        def fn(a, reads=reads):
            return while_loop(lambda c: ops.lt(c, 0.5), lambda k, c: ops.add(c, ops.sin(k) if reads else 1.0),
                              ops.mul(a, 0.0), body_consts=(ops.sin(a),))
        prog = spec.trace(fn, f32[()])
        head = ("import jax, ml_dtypes\nimport jax.numpy as jnp\nimport numpy as np\n"
                "from jax.ad_checkpoint import checkpoint_name\n" + emitter_table_source(EMITTERS_SOURCE) + "\n")
        source = program_source(prog, "f")
        ns = {}
        exec(head + source, ns)
        x = np.float32(0.3)
        nconsts = lambda g: [e.params["body_nconsts"] for e in jax.make_jaxpr(g)(x).jaxpr.eqns  # noqa: E731
                             if e.primitive.name == "while"]
        assert nconsts(ns["f"]) == nconsts(to_jax(prog)) == [1], source
        assert ("jax.lax.while_loop(" in source) == reads
