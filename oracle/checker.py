"""`oracle.check`: does jit-compiled JAX do what the spec says?

    report = oracle.check(fn, policy, *args)

checks `jax.checkpoint(fn, policy=policy)` (or `fn` as written, with
`policy=oracle.AS_IS`) against the spec program imported from its jaxpr,
for each implementation (remat2, remat3), property by property:

  residuals    jax.ad_checkpoint.saved_residuals vs spec.saved_residuals
               (jaxpr tier: no compilation)
  prevent_cse  optimization barriers in the lowered HLO of the backward pass
  values, jvp, vjp, vmap, second_order, vjp_leaves
               numbers, and the residual leaves of the function that
               jax.jit(jax.vjp) returns (what XLA materialises), from ONE
               jitted function per implementation, vs the spec evaluated
               with numpy (compiled tier)

Agreement returns a Report; a disagreement that is not a known divergence
(oracle/divergences.py) raises Mismatch with the numbers, the residual diff
and a standalone reproducer.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import re
import time
from dataclasses import dataclass, field

import numpy as np

import spec
from spec import policies as sp
from spec.ir import Var, Program, is_float, subprograms

from oracle import divergences, tolerances
from oracle.errors import Mismatch
from oracle.from_jax import from_jaxpr

AS_IS = type("AS_IS", (), {"__repr__": lambda self: "oracle.AS_IS"})()

IMPLEMENTATIONS = ("remat2", "remat3")
PROPERTIES = ("residuals", "vjp_leaves", "prevent_cse", "values", "jvp", "vjp", "vmap", "second_order")
JAXPR_TIER = ("residuals", "prevent_cse")
BATCH = 2
DEFAULT_REPRO_DIR = None   # set by the pytest plugin's --oracle-repro-dir
# XLA:CPU's backend optimisation level 0 halves compile time for these small
# check functions; it changes no semantics (only scheduling/vectorisation
# of the same HLO), and numbers stay within oracle.tolerances.
COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}


@dataclass
class Result:
    property: str
    implementation: str
    status: str                 # "ok", "known divergence", "not compared"
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
    environment: dict = field(default_factory=dict)
    timings: dict = field(default_factory=lambda: collections.Counter())   # seconds per phase

    def __str__(self):
        lines = [f"oracle.check({self.function}, policy={self.policy})  "
                 + " ".join(f"{k}={v}" for k, v in self.environment.items())]
        for r in self.results:
            err = "" if r.max_abs is None else f" max_abs={r.max_abs:.3g} max_rel={r.max_rel:.3g}"
            lines.append(f"  {r.implementation:7} {r.property:13} {r.status}{err} ({r.seconds * 1e3:.0f} ms)"
                         + (f": {r.detail}" if r.detail else ""))
        return "\n".join(lines)

    def status(self, prop, impl) -> str:
        return next(r.status for r in self.results if r.property == prop and r.implementation == impl)


def _policy_label(policy) -> str:
    if policy is None or policy is AS_IS or not callable(policy) or isinstance(policy, sp._Policy):
        return repr(policy)
    return getattr(policy, "__qualname__", None) or getattr(policy, "__name__", None) or repr(policy)


def environment() -> dict:
    import jax
    import jaxlib
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "backend": jax.default_backend(),
            "jax_remat3": bool(jax.config.jax_remat3),
            "jax_use_direct_linearize": bool(jax.config.jax_use_direct_linearize)}


@contextlib.contextmanager
def implementation(name: str):
    """Select remat2 or remat3 for the duration."""
    import jax
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {name!r}; supported: {IMPLEMENTATIONS}")
    old = jax.config.jax_remat3
    # jax's tracing caches are not keyed on jax_remat3: clear them on a switch
    if old != (name == "remat3"):
        jax.clear_caches()
    jax.config.update("jax_remat3", name == "remat3")
    try:
        yield
    finally:
        if jax.config.jax_remat3 != old:
            jax.clear_caches()
        jax.config.update("jax_remat3", old)


# --------------------------------------------------------------------------
# inputs

def draw_inputs(args, seed: int = 0) -> list[np.ndarray]:
    """Arrays are used as given; jax.ShapeDtypeStruct entries are drawn from
    a seeded generator, well inside every domain the spec's primitives have
    (floats uniform in [0.5, 1.5]: positive for log/sqrt/rsqrt, away from 0
    for div, without ties for max/min; ints in [1, 4])."""
    import jax
    rng = np.random.default_rng(seed)
    out = []
    for i, a in enumerate(args):
        if isinstance(a, jax.ShapeDtypeStruct):
            dt = np.dtype(a.dtype)
            if np.issubdtype(dt, np.integer):
                out.append(rng.integers(1, 5, a.shape).astype(dt))
            elif dt == np.bool_:
                out.append(rng.integers(0, 2, a.shape).astype(bool))
            else:
                out.append(rng.uniform(0.5, 1.5, a.shape).astype(dt))
        elif isinstance(a, (np.ndarray, np.generic, jax.Array, float, int, bool)):
            out.append(np.asarray(a))
        else:
            raise TypeError(f"oracle.check: argument {i} must be an array or a jax.ShapeDtypeStruct, "
                            f"got {type(a).__name__} (pytrees of arrays are not supported: pass leaves)")
    return out


# --------------------------------------------------------------------------
# the function under test and the spec program

def _jax_policy(policy):
    from oracle.policies import to_jax_policy
    if policy is None or policy is AS_IS:
        return policy
    if isinstance(policy, sp._Policy):
        return to_jax_policy(policy)
    return policy


def target(fn, policy):
    """The function JAX runs: jax.checkpoint(fn, policy) or fn as is; it
    returns a flat tuple of arrays."""
    import jax

    @functools.wraps(fn)     # keeps the parameter names JAX reports residuals by
    def flat(*args):
        out = fn(*args)
        leaves = jax.tree.leaves(out)
        if not leaves:
            raise TypeError("oracle.check: the function returns no arrays")
        return tuple(leaves)
    if policy is AS_IS:
        return flat
    return jax.checkpoint(flat, policy=_jax_policy(policy))


def spec_program(fn, policy, args) -> Program:
    """The spec's program for the function under test (from remat2's jaxpr,
    with the spec meaning of the policy)."""
    import jax
    with implementation("remat2"):
        closed = jax.make_jaxpr(target(fn, policy))(*args)
    names = _arg_names(fn, len(args))
    return from_jaxpr(closed, input_names=names)


def _arg_names(fn, n):
    from spec.core import _arg_names as names
    return names(fn, n)


# --------------------------------------------------------------------------
# residuals (jaxpr tier)

# " from <file>:<line>[:<col>] (<function>)" that saved_residuals appends
# (file paths may contain spaces), or " from " with an empty location
_LOCATION = re.compile(r" from .*?:\d+(?::\d+)? \(.*\)$| from $")


def jax_residuals(f, args) -> list[tuple[str, str]]:
    from jax._src.ad_checkpoint import saved_residuals
    from oracle.from_jax import spec_type
    return [(str(spec_type(aval)), _LOCATION.sub("", src)) for aval, src in saved_residuals(f, *args)]


def _bytes(t: str) -> int:
    m = re.fullmatch(r"([a-z0-9]+)(?:<[a-z]+>)?\[([0-9,]*)\]", t)
    if not m:
        return 0
    from spec.ir import DTYPES
    size = int(np.prod([int(d) for d in m.group(2).split(",") if d] or [1]))
    return size * DTYPES[m.group(1)].itemsize


def residual_diff(jax_res, spec_res) -> str:
    only_jax = collections.Counter(jax_res) - collections.Counter(spec_res)
    only_spec = collections.Counter(spec_res) - collections.Counter(jax_res)
    lines = []
    for (t, s), n in only_jax.items():
        lines.append(f"  + JAX saves  {t} {s}" + (f" (x{n})" if n > 1 else "") + f"  [{_bytes(t)} bytes]")
    for (t, s), n in only_spec.items():
        lines.append(f"  - spec saves {t} {s}" + (f" (x{n})" if n > 1 else "") + f"  [{_bytes(t)} bytes]")
    if not lines:
        lines.append("  same residuals, different order:")
        lines += [f"    JAX:  {t} {s}" for t, s in jax_res]
        lines += [f"    spec: {t} {s}" for t, s in spec_res]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# numbers (compiled tier): one jitted function per implementation

def _float_mask(types):
    return [is_float(t.dtype) for t in types]


def _depth(prog: Program) -> int:
    n = 0
    for e in prog.eqns:
        subs = subprograms(e.params)
        n += sum(_depth(s) for _, s in subs) if subs else 1
    return n


def spec_programs(prog: Program, props) -> dict:
    """The spec program computing each numeric property."""
    out = {}
    if "values" in props:
        out["values"] = prog
    if "jvp" in props:
        out["jvp"] = spec.jvp(prog)
    if "vjp" in props or "second_order" in props:
        vp = spec.vjp_program(prog)
        out["vjp"] = vp
        if "second_order" in props:
            out["second_order"] = spec.jvp(vp)
    if "vmap" in props:
        out["vmap"] = spec.vmap(prog, 0, 0, axis_size=BATCH)
    return out


def spec_numbers(prog: Program, progs: dict, args, tangents, cts, batched, props, hook=None):
    """Evaluate the property programs (`progs`, from spec_programs)."""
    out = {}
    diff_t = [t for t, f in zip(tangents, _float_mask(prog.in_types)) if f]
    if "values" in props:
        out["values"] = spec.evaluate(progs["values"], *args, hook=hook)
    if "jvp" in props:
        out["jvp"] = spec.evaluate(progs["jvp"], *args, *diff_t, hook=hook)[len(prog.outputs):]
    if "vjp" in props:
        out["vjp"] = spec.evaluate(progs["vjp"], *args, *cts, hook=hook)
    if "second_order" in props:
        zero_ct = [np.zeros_like(c) for c in cts]
        res = spec.evaluate(progs["second_order"], *args, *cts, *diff_t, *zero_ct, hook=hook)
        out["second_order"] = res[len(progs["vjp"].outputs):]
    if "vmap" in props:
        out["vmap"] = spec.evaluate(progs["vmap"], *batched, hook=hook)
    return out


NOISE_SAMPLES = 3   # float64 runs with modelled rounding noise (oracle.tolerances)


def jax_numbers(f, prog: Program, args, tangents, cts, batched, props, timings=None):
    """All numeric properties from one jax.jit-compiled function."""
    import jax
    fmask = _float_mask(prog.in_types)
    diff_idx = [i for i, m in enumerate(fmask) if m]

    def together(args, tangents, cts, batched):
        out = {}
        if "values" in props:
            out["values"] = list(f(*args))
        if "jvp" in props:
            def g(*d):
                full = list(args)
                for i, x in zip(diff_idx, d):
                    full[i] = x
                return f(*full)
            out["jvp"] = list(jax.jvp(g, [args[i] for i in diff_idx], [tangents[i] for i in diff_idx])[1])

        def pullback(*d):
            full = list(args)
            for i, x in zip(diff_idx, d):
                full[i] = x
            outs, fn = jax.vjp(lambda *dd: _sub(f, args, diff_idx, dd), *d)
            return fn(tuple(cts))
        if "vjp" in props:
            out["vjp"] = list(pullback(*[args[i] for i in diff_idx]))
        if "second_order" in props:
            out["second_order"] = list(jax.jvp(pullback, [args[i] for i in diff_idx],
                                               [tangents[i] for i in diff_idx])[1])
        if "vmap" in props:
            out["vmap"] = list(jax.vmap(f)(*batched))
        if "vjp_leaves" in props:
            out["vjp_leaves"] = jax.tree.leaves(jax.vjp(f, *args)[1])
        return out
    operands = (list(args), list(tangents), list(cts), list(batched))
    t0 = time.perf_counter()
    lowered = jax.jit(together).lower(*operands)
    t1 = time.perf_counter()
    compiled = lowered.compile(compiler_options=COMPILER_OPTIONS)
    t2 = time.perf_counter()
    out = jax.block_until_ready(compiled(*operands))
    t3 = time.perf_counter()
    if timings is not None:
        timings["jax_trace"] += t1 - t0
        timings["xla_compile"] += t2 - t1
        timings["execute"] += t3 - t2
    return out


def _sub(f, args, diff_idx, d):
    full = list(args)
    for i, x in zip(diff_idx, d):
        full[i] = x
    return f(*full)


# --------------------------------------------------------------------------
# prevent_cse: optimization barriers in the backward pass

def spec_predicts_barrier(prog: Program) -> int:
    """remat2 lowers a differentiated checkpoint with prevent_cse=True with
    an optimization barrier: the spec's backward pass has one per staged
    remat equation with prevent_cse set that reads a linear value (a
    tangent or cotangent). One that only recomputes primal values (a nested
    checkpoint whose tangent is not needed) is replayed forward when JAX
    transposes the enclosing body, which evaluates a known remat by
    inlining its body: no barrier."""
    lin = spec.linearize(prog)
    count = 0

    def walk(p, linear_inputs):
        nonlocal count
        linear = {v.id for v, l in zip(p.inputs, linear_inputs) if l}
        for e in p.eqns:
            reads = [isinstance(a, Var) and a.id in linear for a in e.inputs]
            if e.primitive.name == "remat" and e.params["differentiated"] and any(reads) and \
                    e.params["prevent_cse"] not in (False, ()):
                if e.params["prevent_cse"] is True or any(e.params["prevent_cse"]):
                    count += 1
            for _, sub in subprograms(e.params):
                offset = len(e.inputs) - len(sub.inputs)
                if offset >= 0:
                    walk(sub, reads[offset:])
            if any(reads):
                linear.update(v.id for v in e.outputs)
    n_res = len(lin.residuals)
    walk(lin.linear, [False] * n_res + [True] * (len(lin.linear.inputs) - n_res))
    return count


def jax_barriers(f, args) -> int:
    import jax
    def backward(*a):
        outs, pullback = jax.vjp(f, *a)
        return pullback(tuple(jax.numpy.ones_like(o) for o in outs))
    text = jax.jit(backward).lower(*args).as_text()
    return text.count("optimization_barrier")


# --------------------------------------------------------------------------
# the check

def check(fn, policy=None, *args, implementations=IMPLEMENTATIONS, properties=PROPERTIES,
          seed: int = 0, rtol_scale: float = 1.0, repro_dir: str | None = None) -> Report:
    """Check jax.checkpoint(fn, policy) (or fn with policy=AS_IS) against the
    spec on every property in `properties`, for every implementation.
    Returns a Report; raises Mismatch on a disagreement that is not a known
    divergence, Unsupported for programs the spec does not model."""
    unknown = set(properties) - set(PROPERTIES)
    if unknown:
        raise ValueError(f"unknown properties {sorted(unknown)}; supported: {PROPERTIES}")
    if not callable(fn):
        raise TypeError(f"oracle.check: fn must be callable, got {fn!r}")
    args = draw_inputs(args, seed)
    t_start = time.perf_counter()
    prog = spec_program(fn, policy, args)
    report = Report(getattr(fn, "__name__", repr(fn)), _policy_label(policy), environment=environment())
    report.timings["jax_trace"] += time.perf_counter() - t_start
    t_spec = time.perf_counter()
    rng = np.random.default_rng(seed + 1)
    out_types = prog.out_types
    tangents = [rng.standard_normal(a.shape).astype(a.dtype) if is_float(a.dtype) else
                np.zeros(a.shape, a.dtype) for a in args]
    cts = [rng.standard_normal(t.shape).astype(t.dtype) for t in out_types if is_float(t.dtype)]
    # batch members beyond the first: the given values perturbed by up to 10%,
    # so their scale (and conditioning) is that of the arguments
    batched = [np.stack([a] + [(a * (1 + 0.1 * rng.uniform(-1, 1, a.shape))).astype(a.dtype)
                               if is_float(a.dtype) else a for _ in range(BATCH - 1)]) for a in args]
    spec_res = [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]
    numeric = [p for p in properties if p not in JAXPR_TIER]
    if any(not is_float(t.dtype) for t in out_types):
        numeric = [p for p in numeric if p not in ("vjp", "second_order")]
    from oracle.upcast import up, upcast
    expected = spec_numbers(prog, spec_programs(prog, numeric), args, tangents, cts, batched, numeric)
    prog64 = upcast(prog)
    progs64 = spec_programs(prog64, numeric)
    ups = (up(args), up(tangents), up(cts), up(batched))
    reference = spec_numbers(prog64, progs64, *ups, numeric)
    noise = {p: [0.0] * len(v) for p, v in reference.items()}
    low = np.result_type(*[t.dtype for t in prog.in_types if is_float(t.dtype)] or [np.float32])
    for k in range(NOISE_SAMPLES):
        hook = tolerances.rounding_noise_hook(low, np.random.default_rng(seed + 100 + k))
        noisy = spec_numbers(prog64, progs64, *ups, numeric, hook=hook)
        for p, vals in noisy.items():
            noise[p] = [max(n, float(np.max(np.abs(np.asarray(a, np.float64) - r), initial=0.0)))
                        if is_float(np.asarray(r).dtype) else 0.0
                        for n, a, r in zip(noise[p], vals, reference[p])]
    depth = _depth(prog)
    report.timings["spec"] += time.perf_counter() - t_spec

    def fail(prop, impl, message, ctx=None, numeric=None):
        from oracle.repro import write_repro
        d = divergences.find(ctx) if ctx is not None else None
        if d is not None:
            report.known_divergences.append((d.name, prop, impl))
            report.results.append(Result(prop, impl, "known divergence", d.name))
            return
        repro = write_repro(prog, policy, args, prop, impl, message, repro_dir or DEFAULT_REPRO_DIR,
                            numeric=numeric)
        raise Mismatch(f"oracle.check({report.function}, policy={report.policy}): {prop} differs "
                       f"under {impl}\n{message}\n{_env_line(report)}\nreproducer:\n{repro.text}",
                       report=report, repro=repro)

    jax_saved = {}
    for impl in implementations:
        with implementation(impl):
            f = target(fn, policy)      # made afresh under each implementation
            if "residuals" in properties:
                t0 = time.perf_counter()
                got = jax_residuals(f, args)
                jax_saved[impl] = got
                report.timings["jax_trace"] += time.perf_counter() - t0
                renamed = got
                for norm in divergences.NORMALIZATIONS:
                    new = norm.apply(impl, renamed, spec_res, prog)
                    if new != renamed:
                        report.known_divergences.append((norm.name, "residuals", impl))
                        renamed = new
                if renamed != spec_res:
                    ctx = divergences.Context(impl, "residuals", policy, prog, renamed, spec_res)
                    fail("residuals", impl, "saved residuals differ:\n" + residual_diff(renamed, spec_res), ctx)
                else:
                    report.results.append(Result("residuals", impl, "ok", f"{len(spec_res)} residuals",
                                                 seconds=time.perf_counter() - t0))
            if "prevent_cse" in properties:
                t0 = time.perf_counter()
                if not all(is_float(t.dtype) for t in out_types):
                    report.results.append(Result("prevent_cse", impl, "not compared", "non-float outputs"))
                else:
                    want = spec_predicts_barrier(prog)
                    t1 = time.perf_counter()
                    try:
                        got_b = jax_barriers(f, args)
                    except Exception as e:       # JAX raised where the spec differentiates
                        got_b = e
                    report.timings["jax_trace"] += time.perf_counter() - t1
                    report.timings["spec"] += t1 - t0
                    if isinstance(got_b, Exception):
                        ctx = divergences.Context(impl, "prevent_cse", policy, prog, error=got_b)
                        fail("prevent_cse", impl, _raised(got_b), ctx)
                    elif (want > 0) != (got_b > 0):
                        ctx = divergences.Context(impl, "prevent_cse", policy, prog, barriers=(want, got_b))
                        fail("prevent_cse", impl, f"optimization barriers in the backward pass: spec predicts "
                                                  f"{want}, JAX's HLO has {got_b}", ctx)
                    else:
                        report.results.append(Result("prevent_cse", impl, "ok",
                                                     f"barriers: spec {want}, HLO {got_b}",
                                                     seconds=time.perf_counter() - t0))
            if numeric:
                t0 = time.perf_counter()
                props = list(numeric)
                try:
                    got = jax_numbers(f, prog, args, tangents, cts, batched, props, report.timings)
                except Exception as e:
                    # JAX raised: find which properties raise (each alone), report
                    # each (a known divergence, else a Mismatch), compare the rest
                    got, raised = {}, {}
                    for prop in list(props):
                        try:
                            got.update(jax_numbers(f, prog, args, tangents, cts, batched, [prop],
                                                   report.timings))
                        except Exception as e_prop:
                            raised[prop] = e_prop
                    if not raised:
                        raise e
                    for prop, err in raised.items():
                        props.remove(prop)
                        shown = "vjp" if prop == "vjp_leaves" else prop
                        fail(prop, impl, _raised(err),
                             divergences.Context(impl, shown, policy, prog, error=err))
                secs = (time.perf_counter() - t0) / max(len(props), 1)
                if "vjp_leaves" in props:
                    props.remove("vjp_leaves")
                    leaves = [(str(tuple(np.shape(l))), str(np.asarray(l).dtype)) for l in got["vjp_leaves"]]
                    want = _leaf_expectation(prog)
                    residual_divergence = next((r.detail for r in report.results
                                                if r.property == "residuals" and r.implementation == impl
                                                and r.status == "known divergence"), None)
                    if sorted(leaves) != sorted(want) and residual_divergence and \
                            impl in jax_saved and sorted(leaves) == sorted(_leaves_of(jax_saved[impl])):
                        # the leaves are JAX's own saved residuals, whose difference from the
                        # spec's is a known divergence already reported for `residuals`
                        report.results.append(Result("vjp_leaves", impl, "known divergence",
                                                     residual_divergence))
                    elif sorted(leaves) != sorted(want):
                        fail("vjp_leaves", impl, f"residual leaves of jax.jit(jax.vjp)'s function:\n"
                                                 f"  JAX:  {leaves}\n  spec: {want}",
                             divergences.Context(impl, "vjp_leaves", policy, prog))
                    else:
                        report.results.append(Result("vjp_leaves", impl, "ok", f"{len(leaves)} leaves",
                                                     seconds=secs))
                for prop in props:
                    numeric_ctx = dict(tangents=tangents, cts=cts, batched=batched, expected=reference[prop])
                    _compare(prop, impl, got[prop], expected[prop], reference[prop], noise[prop],
                             depth * (2 if prop in ("vjp", "jvp") else 4 if prop == "second_order" else 1),
                             rtol_scale, report, fail, secs, numeric_ctx)
    return report


def _raised(e: Exception) -> str:
    return (f"JAX raised {type(e).__name__} where the spec computes a result:\n  "
            + str(e).split("\n--------------------")[0].strip())


def _leaves_of(residuals):
    """(shape, dtype) of residual entries ("f32[3,4]", source)."""
    from spec.ir import DTYPES
    out = []
    for t, _ in residuals:
        m = re.fullmatch(r"([a-z0-9]+)(?:<[a-z_]+>)?\[([0-9,]*)\]", t)
        shape = tuple(int(d) for d in m.group(2).split(",") if d)
        out.append((str(shape), str(DTYPES[m.group(1)])))
    return out


def _leaf_expectation(prog):
    return [(str(r.type.shape), str(r.type.dtype)) for r in spec.saved_residuals(prog)]


def _compare(prop, impl, got, want, ref, noise, depth, scale, report, fail, secs, numeric_ctx):
    """JAX's arrays against the spec's (same dtype) and the float64
    reference, with oracle.tolerances."""
    got, want, ref = list(got), list(want), list(ref)
    if len(got) != len(want):
        fail(prop, impl, f"JAX gives {len(got)} arrays, the spec {len(want)}")
        return
    worst = (0.0, 0.0)
    for i, (g, w, r, n) in enumerate(zip(got, want, ref, noise)):
        g = np.asarray(g)
        ok, max_abs, max_rel, idx, tol = tolerances.compare(g, w, r, np.asarray(w).dtype, depth, scale, n)
        if not ok:
            numeric_ctx["atol"] = tol
            at = lambda a: np.asarray(a)[idx] if idx is not None and np.ndim(a) else a
            fail(prop, impl, f"output {i} ({np.asarray(w).dtype}{list(np.shape(w))}): max abs error "
                             f"{max_abs:.4g} from the float64 reference (rel {max_rel:.4g}) > tolerance "
                             f"{tol:.3g}; worst index {idx}: JAX {at(g)}, spec {at(w)}, "
                             f"float64 reference {at(r)}",
                 numeric=numeric_ctx)
            return
        worst = (max(worst[0], max_abs), max(worst[1], max_rel))
    report.results.append(Result(prop, impl, "ok", max_abs=worst[0], max_rel=worst[1], seconds=secs))


def _env_line(report) -> str:
    return "environment: " + ", ".join(f"{k}={v}" for k, v in report.environment.items())


# --------------------------------------------------------------------------
# the spec's answers in JAX's terms

def expected_residuals(fn, policy, *args) -> list[tuple]:
    """The spec's residuals for jax.checkpoint(fn, policy) at `args`, as
    (shape, dtype, kind, detail) entries in JAX's terms."""
    args = draw_inputs(args)
    prog = spec_program(fn, policy, args)
    out = []
    for r in spec.saved_residuals(prog):
        s = r.source
        detail = {"argument": s.name if s.name else s.index, "named": s.name, "literal": None,
                  "constant": None}.get(s.kind, s.name if s.primitive == "call" else s.primitive)
        out.append((r.type.shape, r.type.dtype, s.kind, detail))
    return out


def explain(fn, policy, *args):
    """The spec's explanation (spec.explain) for jax.checkpoint(fn, policy)."""
    args = draw_inputs(args)
    return spec.explain(spec_program(fn, policy, args))
