"""`oracle.check`: does jit-compiled JAX do what the spec says?

    report = oracle.check(fn, policy, *args, static_argnums=(), static_argnames=(), backend=None, **kwargs)

checks `jax.checkpoint(fn, policy=policy)` (or `fn` as written, with
`policy=oracle.AS_IS`), called as `fn(*args, **kwargs)` with JAX's calling
conventions (oracle/conventions.py: pytrees, Python scalars, static
arguments), against the spec program imported from its jaxpr, for each
implementation (remat2, remat3), property by property (oracle/properties.py).
JAX runs on `backend`'s device (oracle/backends.py: a platform name such
as 'gpu', a jax.Device, or None for the default); the spec computes in
numpy, and the tolerances take the backend's arithmetic into account.

Each (property, implementation) gets a status:

  ok                 JAX and the spec agree
  known divergence   they differ exactly as a known JAX defect predicts
                     (oracle/divergences.py); the Report names it
  not applicable     both raise the same error for the same reason (e.g.
                     forward mode through a custom_vjp, reverse mode
                     through a while_loop): the property has no answer
  not compared       the property does not apply to the program (e.g. vmap
                     of a program without inputs)
  not checked        the implementation could not be checked honestly (the
                     function's checkpoints were built under the other one)

Any other disagreement — different answers, or only one side raising —
raises one Mismatch after all properties are checked, with the numbers,
the residual diff and a standalone reproducer of the first.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

import spec
from spec import policies as sp
from spec.ir import Literal, Program, is_float, subprograms
from spec.prims_platform import lowering_platform

from oracle import backends, divergences, jax_api
from oracle.conventions import AS_IS, Call, Factory, bind, draw, jax_value_of
from oracle.errors import InvalidArgument, Mismatch, Unsupported
from oracle.from_jax import from_jaxpr, subjaxprs
from oracle.policies import to_jax_policy
from oracle.repro import write_repro
from oracle.spellings import CANONICAL
from oracle.properties import (PROPERTIES as _PROPERTIES, Case, Disagreement, Property, jax_residuals,
                               normalized, residual_diff)

IMPLEMENTATIONS = ("remat2", "remat3")
PROPERTIES = tuple(_PROPERTIES)
DEFAULT_REPRO_DIR = None   # set by the pytest plugin's --oracle-repro-dir
STATUSES = ("ok", "known divergence", "not applicable", "not compared", "not checked")

__all__ = ["AS_IS", "Factory", "Report", "Result", "check", "expected_residuals", "explain",
           "jax_residuals", "residual_diff", "draw_inputs"]
draw_inputs = draw


@dataclass
class Result:
    property: str
    implementation: str
    status: str                 # one of STATUSES
    detail: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    seconds: float = 0.0


@dataclass
class Report:
    """What oracle.check checked, per property and implementation."""
    function: str
    policy: str
    results: list[Result] = field(default_factory=list)
    known_divergences: list[tuple[str, str, str]] = field(default_factory=list)  # (name, property, impl)
    normalizations: list[tuple[str, str, str]] = field(default_factory=list)     # naming only
    environment: dict = field(default_factory=dict)
    timings: dict = field(default_factory=lambda: collections.Counter())   # seconds per phase

    def __str__(self):
        lines = [f"oracle.check({self.function}, policy={self.policy})  "
                 + " ".join(f"{k}={v}" for k, v in self.environment.items())]
        for r in self.results:
            err = "" if r.max_abs is None else f" max_abs={r.max_abs:.3g} max_rel={r.max_rel:.3g}"
            lines.append(f"  {r.implementation:7} {r.property:13} {r.status}{err} ({r.seconds * 1e3:.0f} ms)"
                         + (f": {r.detail}" if r.detail else ""))
        if self.normalizations:
            lines.append("  naming normalised: " + ", ".join(sorted({n for n, _, _ in self.normalizations})))
        return "\n".join(lines)

    def status(self, prop, impl) -> str:
        return next(r.status for r in self.results if r.property == prop and r.implementation == impl)


def _policy_label(policy) -> str:
    if policy is None or policy is AS_IS or not callable(policy) or isinstance(policy, sp._Policy):
        return repr(policy)
    return getattr(policy, "__qualname__", None) or getattr(policy, "__name__", None) or repr(policy)


environment = jax_api.environment     # jax, jaxlib, backend and the remat flags the release has
implementation = jax_api.implementation   # select remat2 or remat3 for the duration


# --------------------------------------------------------------------------
# the function under test and the spec program

def _jax_policy(policy):
    if policy is None or policy is AS_IS:
        return policy
    if isinstance(policy, sp._Policy):
        return to_jax_policy(policy)
    return policy


def target(call: Call, jax_policy):
    """The function JAX runs, of the dynamic (args, kwargs):
    jax.checkpoint(fn, policy) or fn as is, returning a flat tuple of
    arrays. Made afresh on each call (under the implementation in force)."""
    import jax
    fn = call.function()
    if jax_policy is AS_IS:
        return fn
    return jax.checkpoint(fn, policy=jax_policy)


def _trace(call: Call, jax_policy):
    import jax
    args, kwargs = call.dynamic(call.jax_leaves)
    return jax.make_jaxpr(target(call, jax_policy))(*args, **kwargs)


def spec_program(call: Call, jax_policy) -> Program:
    """The spec's program for the function under test (from remat2's jaxpr,
    with the spec meaning of the policy)."""
    with implementation("remat2"):
        closed = _trace(call, jax_policy)
        names = None
        if jax_api.internals.arg_names(closed.jaxpr) is None:    # a release whose jaxprs keep no names
            args, kwargs = call.dynamic(call.jax_leaves)
            names = jax_api.internals.signature_names(target(call, jax_policy), args, kwargs)
        return from_jaxpr(closed, input_names=names)


def _foreign_checkpoints(jaxpr, impl: str) -> bool:
    """The jaxpr holds checkpoints built by the other implementation
    (`remat2` equations under remat3, RematTraced hi-primitives under remat2)."""
    for e in jaxpr.eqns:
        name = e.primitive.name
        hi = type(e.params.get("_prim")).__name__ if name == "call_hi_primitive" else None
        if (impl == "remat3" and name == "remat2") or (impl == "remat2" and hi == "RematTraced"):
            return True
        if any(_foreign_checkpoints(sub, impl) for sub in subjaxprs(e)):
            return True
    return False


def _honest(call: Call, jax_policy, impl: str) -> str | None:
    """Why `impl` cannot be checked honestly, or None."""
    if isinstance(call.fn, Factory):
        return None
    if _foreign_checkpoints(_trace(call, jax_policy).jaxpr, impl):
        other = "remat2" if impl == "remat3" else "remat3"
        return (f"the function's checkpoints were built under {other} (jax.checkpoint picks the "
                f"implementation when it is called): pass oracle.Factory(make) with a function "
                f"that builds it")
    return None


# --------------------------------------------------------------------------
# judging one property: the two outcomes -> a status

def _first_line(e: BaseException) -> str:
    return str(e).split("\n--------------------")[0].strip().split("\n")[0]


def _same_reason(spec_error: BaseException, jax_error: BaseException) -> bool:
    """Both raise the same error class, and the spec's message (its first
    sentence) is JAX's: the spec raises JAX's exact errors where JAX's
    rules refuse (spec/prims_custom.py FWD_ERROR, spec/prims_control.py
    WHILE_TRANSPOSE_ERROR, save_from_both_policies' ValueError)."""
    if not isinstance(spec_error, type(jax_error)):
        return False
    sentence = _first_line(spec_error).split(". ")[0].rstrip(".:")
    return bool(sentence) and (sentence in _first_line(jax_error) or any(
        sentence.startswith(now) and before in _first_line(jax_error) for now, before in _EARLIER_WORDINGS))


# the same refusal in an earlier release's words: (the spec's wording, JAX's
# before it changed); vmap's out_axes=None check raised in
# batching.matchaxis on jax 0.4.25 ('vmap has mapped output but out_axes is
# None'), in api.vmap_f (SpecMatchError) from 0.4.36
_EARLIER_WORDINGS = (("got axis spec None but output was batched on axis", "vmap has mapped output but out_axes is None"),)


def _refusal_like(prop: Property, prog, jax_error: BaseException) -> str | None:
    """Where the spec refuses to build `prop`'s program of part of `prog`
    for JAX's reason, or None: the first k equations (each one's float
    outputs made outputs, so that none is dead), else one equation alone.
    Of two refusals JAX may meet another one first than the spec: it
    transforms a program equation by equation (a jvp of a vjp
    differentiates each forward equation as it is traced: pristine
    campaign finding d0c2f5901e, igammac's igamma_grad_a at second order
    before a later checkpoint's refused policy combination), and before
    direct linearization it differentiates every equation before it asks
    a checkpoint's policy (so on 0.4.25 the same igammac after the
    checkpoint), where the spec builds each level of a stack whole."""
    if prop.spec_program is None:
        return None
    floats = lambda eqns: [v for e in eqns for v in e.outputs if is_float(v.type.dtype)]  # noqa: E731
    parts = [(f"the first {k} equations", Program(prog.inputs, prog.eqns[:k], floats(prog.eqns[:k]),
                                                  input_names=prog.input_names))
             for k in range(1, len(prog.eqns) + 1)]
    parts += [(f"equation {k} alone", Program(list(dict.fromkeys(a for a in e.inputs if not isinstance(a, Literal))),
                                              [e], floats([e])))
              for k, e in enumerate(prog.eqns, 1)]
    for where, part in parts:
        try:
            prop.spec_program(part)
        except Exception as e:    # noqa: BLE001 -- the refusal compared with JAX's
            if _same_reason(e, jax_error):
                return where
    return None


def _raised(e: Exception, who: str = "JAX", other: str = "the spec") -> str:
    return f"{who} raised {type(e).__name__} where {other} computes a result:\n  {_first_line(e)}"


def judge(prop: Property, case: Case, impl: str, jax_outcome, spec_outcome) -> Result:
    """The status of one property: raises Disagreement when the outcomes
    differ in a way no status covers."""
    (jax_value, jax_error), (spec_value, spec_error) = jax_outcome, spec_outcome
    if jax_error is not None and spec_error is not None:
        if _same_reason(spec_error, jax_error):
            return Result(prop.name, impl, "not applicable",
                          f"both raise {type(jax_error).__name__}: {_first_line(jax_error)[:120]}")
        where = _refusal_like(prop, case.prog, jax_error)
        if where is not None:
            return Result(prop.name, impl, "not applicable",
                          f"both raise: JAX {type(jax_error).__name__} first (the spec refuses {where} so), "
                          f"the spec {type(spec_error).__name__}: {_first_line(jax_error)[:120]}")
        raise Disagreement(f"JAX raised {type(jax_error).__name__}: {_first_line(jax_error)}\n"
                           f"the spec raised {type(spec_error).__name__}: {_first_line(spec_error)}",
                           prop.context(case, impl, error=jax_error, spec_error_too=spec_error))
    if jax_error is not None:
        raise Disagreement(_raised(jax_error), prop.context(case, impl, error=jax_error))
    if spec_error is not None:
        seen = dict(jax_residuals=normalized(case, impl, jax_value, [])[0]) if prop.name == "residuals" else {}
        raise Disagreement(_raised(spec_error, "the spec", "JAX"),
                           prop.context(case, impl, spec_error=spec_error, **seen))
    detail = prop.compare(case, impl, jax_value, spec_value)
    if isinstance(detail, tuple):
        return Result(prop.name, impl, "ok", max_abs=detail[0], max_rel=detail[1])
    return Result(prop.name, impl, "ok", detail)


def _outcome(fn, *args):
    """(value, None) or (None, the exception) of fn(*args); the user's
    policy raising is the user's error and leaves at once."""
    try:
        return fn(*args), None
    except sp.PolicyError:
        raise
    except Exception as e:
        return None, e


# --------------------------------------------------------------------------
# JAX's answers: the jaxpr tier traced one by one; the compiled tier traced
# under each implementation's flag, then every implementation's compiled in
# one XLA computation (one compilation per check)

def jaxpr_outcomes(case: Case, f, props, timings) -> dict:
    """property name -> (value, error) of JAX's side, for the jaxpr tier."""
    out = {}
    for p in props:
        if p.tier == "jaxpr":
            t0 = time.perf_counter()
            out[p.name] = _outcome(p.jax_side, case, f)
            timings["jax_trace"] += time.perf_counter() - t0
    return out


@dataclass
class Traced:
    """One implementation's compiled-tier properties, traced under its flag
    (so no later flag changes them) and waiting to be compiled: `jaxpr`
    (None where every term raised) takes the `operands`' leaves and returns
    the leaves of `out_shape`, the terms of the properties not in `errors`."""
    case: Case
    impl: str
    f: object
    props: list
    jaxpr: object = None
    operands: list = field(default_factory=list)
    out_shape: object = None
    errors: dict = field(default_factory=dict)     # property name -> the error its term raised tracing


def trace_compiled(case: Case, impl: str, f, props, timings) -> Traced:
    """The compiled-tier terms of `props` as one jaxpr. A property whose
    term raises while tracing keeps its error and leaves the others their
    compilation (JAX raises a transformation's refusal, e.g. vmap of a
    user's name subclass, at trace time)."""
    import jax
    flat = case.call.flat(f)
    diff = [i for i, t in enumerate(case.prog.in_types) if is_float(t.dtype)]
    traced = Traced(case, impl, f, props)

    def together(*operands):
        terms = {}
        for p in props:
            term, error = _outcome(p.jax_term, flat, operands, diff)
            if error is None:
                terms[p.name] = term
            else:
                traced.errors[p.name] = error
        return terms
    # a key's tangent is never read (keys are not differentiated); its batch is a key array
    operands = (list(case.call.jax_leaves), [t if is_float(t.dtype) else np.zeros(t.shape, np.int32)
                                             for t in case.tangents],
                list(case.cts), [jax_value_of(b) for b in case.batched],
                {p.name: [jax_value_of(a) for a in p.operands(case)] for p in props if p.operands})
    if case.backend is not None and len(_mesh_devices(case.prog)) <= 1:
        # committed to the backend's device: the jit runs there (not where the
        # program constrains a value to a mesh of several devices: operands
        # committed to one would clash with it, "incompatible devices";
        # found through jax's memories_test on a 2-device CPU)
        operands = jax.device_put(operands, case.backend.device)
    t0 = time.perf_counter()
    jaxpr, out_shape = jax.make_jaxpr(together, return_shape=True)(*operands)
    timings["jax_trace"] += time.perf_counter() - t0
    if len(traced.errors) < len(props):
        traced.jaxpr, traced.out_shape, traced.operands = jaxpr, out_shape, jax.tree.leaves(operands)
    return traced


def _mesh_devices(prog: Program) -> set:
    """The ids of the devices of the meshes `prog`'s sharding constraints
    name, at any depth (spec/prims_conv.py: a NamedSharding's mesh is
    ("Mesh", device ids, ...))."""
    ids = set()
    for e in prog.eqns:
        sharding = e.params.get("sharding") if e.primitive.name == "sharding_constraint" else None
        if isinstance(sharding, tuple) and sharding[0] == "NamedSharding":
            ids.update(sharding[1][1])
        for _, sub in subprograms(e.params):
            ids |= _mesh_devices(sub)
    return ids


def _platform(backend) -> str:
    return "cpu" if backend is None else backend.platform


def run_compiled(traced: list[Traced], timings) -> list[dict]:
    """The traced implementations' jaxprs in one jax.jit-compiled function,
    run: for each, property name -> (value, None), or (None, the error its
    term raised tracing). Compiling or running raising leaves."""
    import jax
    live = [t for t in traced if t.jaxpr is not None]
    as_fun = jax_api.internals.core().jaxpr_as_fun

    def together(*leaves):
        outs, at = [], 0
        for t in live:
            outs.append(as_fun(t.jaxpr)(*leaves[at:at + len(t.operands)]))
            at += len(t.operands)
        return outs
    backend = traced[0].case.backend
    options = jax_api.compiler_options(_platform(backend))
    results = [{name: (None, e) for name, e in t.errors.items()} for t in traced]
    if live:
        t0 = time.perf_counter()
        lowered = jax.jit(together).lower(*[x for t in live for x in t.operands])
        t1 = time.perf_counter()
        compiled = lowered.compile(compiler_options=options)
        t2 = time.perf_counter()
        outs = iter(jax.block_until_ready(compiled(*[x for t in live for x in t.operands])))
        timings["jax_trace"] += t1 - t0
        timings["xla_compile"] += t2 - t1
        timings["execute"] += time.perf_counter() - t2
        for t, result in zip(traced, results):
            if t.jaxpr is not None:
                values = jax.tree.unflatten(jax.tree.structure(t.out_shape), next(outs))
                result.update({p.name: (p.after(values[p.name]) if p.after is not None else values[p.name], None)
                               for p in t.props if p.name in values})
    return results


def compiled_outcomes(traced: list[Traced], timings) -> list[dict]:
    """run_compiled of them all; where compiling or running raises, each
    implementation alone, and where one raises alone, each of its
    properties alone (traced again under its flag)."""
    together, error = _outcome(run_compiled, traced, timings)
    if error is None:
        return together
    out = []
    for t in traced:
        alone, error = _outcome(run_compiled, [t], timings)
        if error is None:
            out.append(alone[0])
        elif len(t.props) == 1:
            out.append({t.props[0].name: (None, error)})
        else:
            with _selected(t.impl):
                each = [_outcome(lambda p: run_compiled([trace_compiled(t.case, t.impl, t.f, [p], timings)],
                                                        timings)[0][p.name], p) for p in t.props]
            out.append({p.name: (None, e) if e is not None else v for p, (v, e) in zip(t.props, each)})
    return out


# --------------------------------------------------------------------------
# the check

def _validate(fn, policy, implementations, properties):
    if not (callable(fn) or isinstance(fn, Factory)):
        raise InvalidArgument(f"oracle.check: fn must be callable (or an oracle.Factory), got {fn!r}")
    if isinstance(implementations, str) or isinstance(properties, str):
        raise InvalidArgument("oracle.check: implementations= and properties= take tuples of names, "
                              f"got {implementations!r}, {properties!r}")
    unknown = sorted({p for p in properties if not isinstance(p, Property)} - set(PROPERTIES))
    if unknown:
        raise InvalidArgument(f"unknown properties {unknown}; supported: {PROPERTIES}")
    unknown = sorted(set(implementations) - set(IMPLEMENTATIONS))
    if unknown:
        raise InvalidArgument(f"unknown implementation {unknown[0]!r}; supported: {IMPLEMENTATIONS}")
    if not (policy is None or policy is AS_IS or callable(policy)):
        raise InvalidArgument(f"oracle.check: policy must be None, oracle.AS_IS, a jax.checkpoint_policies "
                              f"entry, a spec policy or a callable policy(prim, *avals, **params); got {policy!r}")


def make_case(fn, policy, args, kwargs, *, static_argnums=(), static_argnames=(), seed=0,
              rtol_scale=1.0, backend=None) -> Case:
    """The Case of one oracle.check call (the spec program traced once);
    `backend` an oracle.backends.Backend, or None."""
    call = bind(fn, args, kwargs, static_argnums=static_argnums, static_argnames=static_argnames, seed=seed)
    jax_policy = _jax_policy(policy)
    prog = spec_program(call, jax_policy)
    return Case(call, policy, jax_policy, prog, seed, rtol_scale, backend=backend)


@contextlib.contextmanager
def _on(backend: backends.Backend):
    """JAX's default device is the backend's for the duration, and the spec
    lowers for its platform (lax.platform_dependent's branch)."""
    import jax
    with jax.default_device(backend.device), lowering_platform(backend.lowering_platform):
        yield


def _check_memory_kinds(case: Case) -> None:
    """Unsupported when the spec's residuals go to a memory the backend's
    device lacks (only asked where it lacks pinned_host, the kind JAX's
    offloading targets: oracle/backends.py), or where the device tells no
    memory kinds at all (jax 0.4.25 on CPU: its device_put to a memory
    kind raises NotImplementedError)."""
    b = case.backend
    if "pinned_host" in b.memory_kinds:
        return
    try:
        spaces = {r.type.memory_space for r in spec.saved_residuals(case.prog)}
    except Exception:        # the residuals property reports the spec's error; the
        spaces = _offload_destinations(case.prog)   # policies' own answers decide
    backends.check_memory_kinds(b, spaces)


def _offload_destinations(prog: Program) -> set:
    """The memory spaces the program's checkpoint policies (each part of a
    save_from_both_policies on its own) answer Offload to, asked about the
    equations of their checkpoint's body (at any depth)."""
    out = set()

    def parts(policy):
        if isinstance(policy, sp._SaveFromBoth):
            return parts(policy.policy_1) + parts(policy.policy_2)
        return [policy] if callable(policy) else []

    def eqns(p):
        for e in p.eqns:
            yield e
            for _, sub in spec.ir.subprograms(e.params):
                yield from eqns(sub)
    for e in eqns(prog):
        if e.primitive.name != "remat":
            continue
        for policy in parts(e.params.get("policy")):
            for q in eqns(e.params["jaxpr"]):
                try:
                    answer = sp._answer(policy, q.primitive, [a.type for a in q.inputs], q.params)
                except Exception:    # noqa: BLE001 -- the check reports a policy that raises
                    continue
                if isinstance(answer, sp.Offload):
                    out.add(answer.dst)
    return out


def check(fn, policy=None, *args, implementations=IMPLEMENTATIONS, properties=PROPERTIES,
          static_argnums=(), static_argnames=(), seed: int = 0, rtol_scale: float = 1.0,
          repro_dir: str | None = None, backend=None, **kwargs) -> Report:
    """Check jax.checkpoint(fn, policy) (or fn with policy=AS_IS), called as
    fn(*args, **kwargs), against the spec on every property in `properties`,
    for every implementation, with JAX on `backend` (a platform name, a
    jax.Device, or None: oracle.backends.DEFAULT_BACKEND, else JAX's
    default device). Returns a Report; raises Mismatch on a disagreement
    that is not a known divergence, Unsupported for programs the spec does
    not model, InvalidArgument for a call that is wrong (a backend without
    devices here included)."""
    _validate(fn, policy, implementations, properties)
    on = backends.resolve(backend)
    with _on(on):
        return _check(fn, policy, args, kwargs, implementations, properties, static_argnums,
                      static_argnames, seed, rtol_scale, repro_dir, on)


def _check(fn, policy, args, kwargs, implementations, properties, static_argnums, static_argnames, seed,
           rtol_scale, repro_dir, on) -> Report:
    t_start = time.perf_counter()
    case = make_case(fn, policy, args, kwargs, static_argnums=static_argnums,
                     static_argnames=static_argnames, seed=seed, rtol_scale=rtol_scale, backend=on)
    _check_memory_kinds(case)
    report = Report(case.call.name, _policy_label(policy), environment={**environment(), **on.environment})
    report.timings["jax_trace"] += time.perf_counter() - t_start
    # a Property object (an oracle.stacks stack, ...) is checked after the named ones
    props = [_PROPERTIES[p] for p in PROPERTIES if p in properties] + [
        p for p in properties if isinstance(p, Property)]
    spec_outcomes = {}
    t_spec = time.perf_counter()
    for p in props:
        if p.applies(case) is None:
            spec_outcomes[p.name] = _outcome(p.spec_side, case)
            _refuse_unmodelled(spec_outcomes[p.name][1])
    report.timings["spec"] += time.perf_counter() - t_spec
    sides = []
    for impl in implementations:
        with _selected(impl):
            sides.append(_jax_side(case, impl, props, report.timings))
    mismatches = _compiled_and_judged(sides, spec_outcomes, report)
    compiled = {p.name for p in props if p.tier == "compiled"}
    if any(name in compiled for name, _, _ in mismatches) and jax_api.compiler_options(_platform(on)):
        # seen under the fast XLA:CPU options: confirmed under XLA's defaults
        # before it is reported (oracle/jax_api/capabilities.py, _FAST_CPU_COMPILE)
        report = dataclasses.replace(report, results=[], known_divergences=[], normalizations=[])
        with jax_api.default_compilation():
            mismatches = _compiled_and_judged(sides, spec_outcomes, report)
    if mismatches:
        raise _mismatch(case, report, mismatches, repro_dir, props)
    return report


def _compiled_and_judged(sides: list, spec_outcomes: dict, report: Report) -> list:
    """The compiled tier of every side run, then every side judged into
    `report`; returns the mismatches."""
    t0 = time.perf_counter()
    pending = [side for side in sides if side.traced is not None]
    if pending:
        for side, outcomes in zip(pending, compiled_outcomes([s.traced for s in pending], report.timings)):
            side.outcomes.update(outcomes)
    shared = (time.perf_counter() - t0) / max(len(pending), 1)
    mismatches = []
    for side in sides:
        with _selected(side.impl):     # comparisons and divergence predicates may trace JAX again
            _judge_side(side, spec_outcomes, report, mismatches, shared)
    return mismatches


def _refuse_what_jax_cannot_run(outcomes: dict):
    """JAX refused to run the program on this platform (jax 0.4.25 cannot
    offload to host memory on CPU: `device_put` with a memory kind raises
    NotImplementedError), so there is nothing to compare: Unsupported."""
    for _, error in outcomes.values():
        if isinstance(error, NotImplementedError) and "memory_kind" in str(error):
            import jax
            raise Unsupported(f"jax {jax.__version__} cannot run this program on this platform: "
                              f"{_first_line(error)}")


def _refuse_unmodelled(spec_error):
    """The spec met something it does not model only when a property needed
    it (a custom_vjp's fwd rule is converted on first use): that is the
    oracle's own refusal, raised as it is (Unsupported), not a difference
    from JAX."""
    if isinstance(spec_error, Unsupported):
        raise spec_error


def _selected(impl):
    """implementation(impl), or nothing where the release lacks it (then
    _jax_side reports it not checked)."""
    return contextlib.nullcontext() if jax_api.unavailable(impl) else implementation(impl)


@dataclass
class _Side:
    """JAX's side of one implementation: the results settled before any
    comparison (not checked, not compared), the properties checked, their
    outcomes, and the compiled tier waiting for its compilation."""
    case: Case
    impl: str
    settled: list
    checked: list = field(default_factory=list)
    outcomes: dict = field(default_factory=dict)
    traced: Traced | None = None
    seconds: float = 0.0


def _jax_side(case, impl, props, timings) -> _Side:
    missing = jax_api.unavailable(impl)
    if missing is not None:
        return _Side(case, impl, [Result(p.name, impl, "not checked", missing) for p in props])
    reason, error = _outcome(_honest, case.call, case.jax_policy, impl)
    if reason is not None:
        return _Side(case, impl, [Result(p.name, impl, "not checked", reason) for p in props])
    f = case.functions[impl] = target(case.call, case.jax_policy)
    checked = [p for p in props if p.applies(case, impl) is None]
    side = _Side(case, impl, [Result(p.name, impl, "not compared", p.applies(case, impl))
                              for p in props if p not in checked], checked)
    t0 = time.perf_counter()
    if error is not None:       # tracing the function under `impl` raised: so does every property
        side.outcomes = {p.name: (None, error) for p in checked}
    else:
        side.outcomes = jaxpr_outcomes(case, f, checked, timings)
        compiled = [p for p in checked if p.tier == "compiled"]
        if compiled:
            side.traced, error = _outcome(trace_compiled, case, impl, f, compiled, timings)
            if error is not None:
                side.outcomes.update({p.name: (None, error) for p in compiled})
    side.seconds = time.perf_counter() - t0
    return side


def _judge_side(side: _Side, spec_outcomes, report, mismatches, shared_seconds: float):
    case, impl, outcomes = side.case, side.impl, side.outcomes
    report.results += side.settled
    if not side.checked:
        return
    _refuse_what_jax_cannot_run(outcomes)
    secs = (side.seconds + (shared_seconds if side.traced is not None else 0.0)) / len(side.checked)
    for p in side.checked:
        if p.name == "residuals" and outcomes[p.name][1] is None and spec_outcomes[p.name][1] is None:
            _, applied = normalized(case, impl, outcomes[p.name][0], spec_outcomes[p.name][0])
            report.normalizations += [(n, p.name, impl) for n in applied]
        try:
            result = judge(p, case, impl, outcomes[p.name], spec_outcomes[p.name])
        except Disagreement as d:
            found = divergences.find(d.context) if d.context is not None else None
            if found is None:
                mismatches.append((p.name, impl, d))
                continue
            if d.context.property == p.name:   # (vjp_leaves echoing the residuals' divergence is not new)
                report.known_divergences.append((found.name, p.name, impl))
            result = Result(p.name, impl, "known divergence", found.name)
        result.seconds = secs
        report.results.append(result)


def _inputs_of(case, prop) -> dict:
    """What a reproducer needs to run JAX's side of `prop` where no answers
    were compared (one side raised): the drawn tangents, cotangents and
    batches and the property's own operands; `raised` makes the reproducer
    end with the disagreement's message once JAX's side has run."""
    ops = prop.operands(case) if prop is not None and prop.operands is not None else []
    return dict(tangents=case.tangents, cts=case.cts, batched=case.batched, operands=ops, raised=True)


def _mismatch(case, report, mismatches, repro_dir, props=()) -> Mismatch:
    prop, impl, first = mismatches[0]
    prop_obj = next((p for p in props if p.name == prop), None)
    code = prop_obj.repro_code if prop_obj is not None else None
    numeric = first.numeric if first.numeric is not None else _inputs_of(case, prop_obj)
    try:
        repro = write_repro(case.prog, case.policy, case.args, prop, impl, first.message,
                            repro_dir or DEFAULT_REPRO_DIR, numeric=numeric, code=code,
                            spelling=getattr(case.call.fn, "spelling", CANONICAL))
        repro_text = repro.text
    except Unsupported as e:    # a program the reproducer cannot write (a local callback): the Mismatch stands
        repro, repro_text = None, f"(none: {e})"
    others = "".join(f"\nalso: {p} under {i}: {d.message.splitlines()[0]}" for p, i, d in mismatches[1:])
    what = next((f" [{p.description}]" for p in props if p.name == prop and p.description), "")
    return Mismatch(f"oracle.check({report.function}, policy={report.policy}): {prop} differs under {impl}{what}\n"
                    f"{first.message}{others}\n{_env_line(report)}\nreproducer:\n{repro_text}",
                    report=report, repro=repro, failed=[(p, i) for p, i, _ in mismatches])


def _env_line(report) -> str:
    return "environment: " + ", ".join(f"{k}={v}" for k, v in report.environment.items())


# --------------------------------------------------------------------------
# the spec's answers in JAX's terms

def expected_residuals(fn, policy, *args, static_argnums=(), static_argnames=(), **kwargs) -> list[tuple]:
    """The spec's residuals for jax.checkpoint(fn, policy) at `args`, as
    (shape, dtype, kind, detail) entries in JAX's terms."""
    _validate(fn, policy, IMPLEMENTATIONS, PROPERTIES)
    case = make_case(fn, policy, args, kwargs, static_argnums=static_argnums, static_argnames=static_argnames)
    out = []
    for r in spec.saved_residuals(case.prog):
        s = r.source
        detail = {"argument": s.name if s.name else s.index, "named": s.name, "literal": None,
                  "constant": None}.get(s.kind, s.name if s.primitive == "call" else s.primitive)
        out.append((r.type.shape, r.type.dtype, s.kind, detail))
    return out


def explain(fn, policy, *args, static_argnums=(), static_argnames=(), **kwargs):
    """The spec's explanation (spec.explain) for jax.checkpoint(fn, policy)."""
    _validate(fn, policy, IMPLEMENTATIONS, PROPERTIES)
    case = make_case(fn, policy, args, kwargs, static_argnums=static_argnums, static_argnames=static_argnames)
    return spec.explain(case.prog)
