"""The properties `oracle.check` compares, one object each.

A Property says what it computes on the spec side (`spec_side`, from the
spec program), on the JAX side (`jax_side` for the jaxpr tier, traced
without compilation; `jax_term` for the compiled tier: a term of the ONE
jitted function per implementation), and how the two answers compare
(`compare`, returning None when they agree or a `Disagreement`). Either
side may raise; `oracle.checker.judge` turns the pair of outcomes into a
status, the same way for every property.

  residuals    jax.ad_checkpoint.saved_residuals vs spec.saved_residuals
  prevent_cse  optimization barriers in the lowered HLO of the backward pass
  vjp_leaves   the residual leaves of the function jax.vjp returns
  values, jvp, vjp, vmap, second_order
               numbers, vs the spec evaluated with numpy (oracle.tolerances)
"""
from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import spec
from spec.barriers import optimization_barriers
from spec.ir import DTYPES, Program, is_float, real_dtype, subprograms
from spec.prims_elementwise import add_p

from oracle import divergences, normalizations, tolerances
from oracle.conventions import Call, spec_value_of
from oracle.errors import Unsupported
from oracle.jax_params import spec_type
from oracle.upcast import up, upcast
from oracle.jax_api.internals import saved_residuals

BATCH = 2
NOISE_SAMPLES = 3   # float64 runs with modelled rounding noise (oracle.tolerances); at least an antithetic pair
# more noisy runs where the first antithetic pair shows the outputs are not
# linear in the rounding noise (`_nonlinear_in_noise`)
NONLINEAR_NOISE_SAMPLES = 8


@dataclass
class Case:
    """One check: the call, the spec program and the drawn operands."""
    call: Call
    policy: Any                       # the spec policy (None: the function as written)
    jax_policy: Any                   # what jax.checkpoint is given (oracle.AS_IS: no checkpoint)
    prog: Program
    seed: int
    rtol_scale: float
    tangents: list = field(default_factory=list)
    cts: list = field(default_factory=list)
    batched: list = field(default_factory=list)
    cache: dict = field(default_factory=dict)
    functions: dict = field(default_factory=dict)   # implementation -> the JAX function checked
    backend: Any = None               # the oracle.backends.Backend JAX runs on (None: JAX's default, as CPU)

    @property
    def arithmetic(self):
        """The backend's oracle.backends.Arithmetic (None: float32 as on CPU)."""
        return None if self.backend is None else self.backend.arithmetic

    @property
    def args(self) -> list[np.ndarray]:
        return self.call.leaves

    def __post_init__(self):
        rng = np.random.default_rng(self.seed + 1)
        self.tangents = [rng.standard_normal(a.shape).astype(a.dtype) if is_float(a.dtype) else
                         np.zeros(a.shape, a.dtype) for a in self.args]
        self.cts = [rng.standard_normal(t.shape).astype(t.dtype) for t in self.prog.out_types
                    if is_float(t.dtype)]
        # batch members beyond the first: the given values perturbed by up to 10%,
        # so their scale (and conditioning) is that of the arguments
        self.batched = [np.stack([a] + [(a * (1 + 0.1 * rng.uniform(-1, 1, a.shape))).astype(a.dtype)
                                        if is_float(a.dtype) else a for _ in range(BATCH - 1)])
                        for a in self.args]

    def context(self, impl, prop, **kw) -> divergences.Context:
        return divergences.Context(impl, prop, self.policy, self.prog, **kw)

    def diff_tangents(self):
        return [t for t, a in zip(self.tangents, self.prog.in_types) if is_float(a.dtype)]


class Disagreement(Exception):
    """JAX's answer is not the spec's: the message says how; `context`
    holds what a known-divergence predicate may look at."""

    def __init__(self, message: str, context=None, numeric: dict | None = None):
        super().__init__(message)
        self.message = message
        self.context = context
        self.numeric = numeric


@dataclass(frozen=True)
class Property:
    name: str
    tier: str                                  # "jaxpr" or "compiled"
    spec_side: Callable[[Case], Any]
    compare: Callable                          # (case, impl, jax answer, spec answer) -> detail str
    jax_side: Callable | None = None           # jaxpr tier: (case, f) -> answer
    jax_term: Callable | None = None           # compiled tier: (f, case operands, diff) -> answer
    needs: str = "none"                        # "inputs": skipped for a program without inputs
    weight: int = 1                            # tolerance depth factor: 2 ** the differentiation levels nested
    operands: Callable | None = None           # case -> the property's own operands (compiled tier: jax_term's; reproducers)
    after: Callable | None = None              # compiled tier: the jit's answer -> JAX's answer
    repro_code: str | None = None              # a reproducer's code computing `got` (oracle.repro)
    description: str = ""
    implementations: tuple | None = None       # those it is compared under (None: every one)
    program: Callable | None = None            # case -> the program its answers are of (None: the case's)
    unmodelled: Callable | None = None         # case -> why JAX's answers for it are not modelled, or None
    without_dead_code: Callable | None = None  # case -> its spec program built with every level's dead code removed
    spec_program: Callable | None = None       # checked program -> the spec program whose values (residuals) it compares
    linear_barriers_of: Callable | None = None  # stack_barriers: checked program -> the spec's barrier count

    def context(self, case: Case, impl: str, **kw) -> divergences.Context:
        """What a known divergence may look at, of this property's program."""
        prog = case.prog
        if self.program is not None:
            try:
                prog = self.program(case)
            except (ValueError, spec.PrimitiveError):
                # the spec refuses to build this level (a lower layer of a stack
                # it cannot differentiate, where JAX raised otherwise: found on
                # 0.4.25); the divergences look at the program itself
                prog = case.prog
            kw.setdefault("checked_program", case.prog)
        if self.without_dead_code is not None:
            kw.setdefault("without_dead_code", lambda: self.without_dead_code(case))
        kw.setdefault("numeric_program", self.spec_program)
        kw.setdefault("linear_barriers_of", self.linear_barriers_of)
        kw.setdefault("ad_depth", self.weight.bit_length() - 1)
        return divergences.Context(impl, self.name, case.policy, prog, **kw)

    def applies(self, case: Case, impl: str | None = None) -> str | None:
        """Why the property is not compared for this program (under `impl`), or None."""
        if self.needs == "inputs" and not case.prog.inputs:
            return "no inputs to batch (jax.vmap needs an argument with an axis)"
        if impl is not None and self.implementations is not None and impl not in self.implementations:
            return f"compared under {', '.join(self.implementations)} only"
        return self.unmodelled(case) if self.unmodelled is not None else None


# --------------------------------------------------------------------------
# residuals (jaxpr tier)

# " from <file>:<line>[:<col>] (<function>)" that saved_residuals appends
# (file paths may contain spaces), or " from " with an empty location
_LOCATION = re.compile(r" from .*?:\d+(?::\d+)? \(.*\)$| from $")


def jax_residuals(f, args, kwargs=None) -> list[tuple[str, str]]:
    """jax.ad_checkpoint.saved_residuals as (type, source) strings."""
    return [(str(spec_type(aval)), _LOCATION.sub("", src))
            for aval, src in saved_residuals(f, *args, **(kwargs or {}))]


# a printed spec type: dtype (key<fry> included), an optional <memory space>, shape
_TYPE = re.compile(r"(key<fry>|[a-z0-9]+)(?:<[a-z_]+>)?\[([0-9,]*)\]")


def _parse_type(t: str):
    """(numpy dtype, shape) of a printed spec type, or None."""
    m = _TYPE.fullmatch(t)
    if not m or m.group(1) not in DTYPES:
        return None
    return DTYPES[m.group(1)], tuple(int(d) for d in m.group(2).split(",") if d)


def _bytes(t: str) -> int:
    parsed = _parse_type(t)
    if parsed is None:
        return 0
    dtype, shape = parsed
    return int(np.prod(shape or [1])) * dtype.itemsize


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


def _spec_residuals(case):
    return [(str(r.type), str(r.source)) for r in spec.saved_residuals(case.prog)]


def _jax_residuals(case, f):
    args, kwargs = case.call.dynamic(case.call.jax_leaves)
    return jax_residuals(f, args, kwargs)


def normalized(case, impl, got, spec_res) -> tuple[list, list[str]]:
    """JAX's residual list with the naming normalisations of `impl` undone,
    and the names of those that changed something."""
    aliases = dict(zip(case.call.remat3_names(), case.prog.input_names or ()))
    return normalizations.normalize(impl, got, spec_res, case.prog, aliases)


def residual_verdict(case, impl) -> tuple[str | None, object]:
    """(the known divergence that explains JAX's residuals under `impl`, or
    None, and the residuals' context it was found in: JAX's normalised list
    and its own names), whichever properties are checked."""
    key = ("residual verdict", impl)
    if key not in case.cache:
        want = _spec_residuals(case)
        try:
            raw = _jax_residuals(case, case.functions[impl])
            got, _ = normalized(case, impl, raw, want)
        except Exception:       # JAX raised: reported by the residuals property, if checked
            case.cache[key] = (None, None)
            return case.cache[key]
        ctx = case.context(impl, "residuals", jax_residuals=got, spec_residuals=want, jax_names=raw)
        found = None if got == want else divergences.find(ctx)
        case.cache[key] = (found.name if found else None, ctx)
    return case.cache[key]


def _compare_residuals(case, impl, got, want):
    raw = got
    got, _ = normalized(case, impl, got, want)
    if got != want:
        raise Disagreement("saved residuals differ:\n" + residual_diff(got, want),
                           case.context(impl, "residuals", jax_residuals=got, spec_residuals=want, jax_names=raw))
    return f"{len(want)} residuals"


def _may_save_scalar_add(policy) -> bool:
    """Whether a checkpoint policy may save an `add` of scalars (asked, as
    partial evaluation asks it; a policy raising when asked may)."""
    if policy is None:
        return False
    scalar = spec.ir.ArrayType((), np.dtype(np.float32))
    try:
        return spec.policies.ask(policy, add_p, [scalar, scalar], {}) is not spec.policies.Recompute
    except Exception:  # noqa: BLE001 -- a policy raising when asked (save_from_both of an offload policy)
        return True


def folded_literal_operand(e) -> bool:
    """`e` is of a primitive whose JAX JVP rule applies Python operators to
    its primals (JaxFacts.literal_operands_folded) and has a scalar literal
    operand: how JAX's rule treats it depends on how the literal was
    spelled, which the program does not record."""
    facts = spec.core.jax_facts.get(e.primitive)
    return bool(facts is not None and facts.literal_operands_folded
                and any(isinstance(a, spec.ir.Literal) and a.is_scalar for a in e.inputs))


def _folded_literal_arithmetic_saved(case) -> str | None:
    """JAX's rule for a primitive with JaxFacts.literal_operands_folded
    (betainc_gradx: `a + b`, `b - 1`) writes Python operators, which numpy
    folds where the operand is a numpy or Python scalar
    (`lax.betainc(2.5, 1.5, x)`) and lax binds where it is a jax Array
    (`jax.scipy.special.betainc(2.5, 1.5, x)`): one jaxpr, two residual
    lists where a checkpoint's policy saves `add` (`a + b`; `b - 1` is not
    saved either way: measured in tests/test_campaign_findings.py; found by
    a pristine campaign, a174bd5065). Not compared there."""
    def walk(prog, saving):
        for e in prog.eqns:
            if saving and folded_literal_operand(e):
                return e.primitive.name
            inner = saving or (e.primitive.name == "remat" and _may_save_scalar_add(e.params["policy"]))
            found = next((n for _, sub in subprograms(e.params) if (n := walk(sub, inner))), None)
            if found:
                return found
        return None
    name = walk(case.prog, False)
    return None if name is None else (
        f"{name} with a literal operand in a checkpoint whose policy may save add: JAX folds or binds "
        f"its rule's Python arithmetic by how the literal was spelled (numpy or jax value), which the "
        f"program does not record")


RESIDUALS = Property("residuals", "jaxpr", _spec_residuals, _compare_residuals, jax_side=_jax_residuals,
                     unmodelled=_folded_literal_arithmetic_saved)


# --------------------------------------------------------------------------
# prevent_cse: optimization barriers in the backward pass

def jax_barriers(f, args) -> int:
    import jax

    def backward(*a):
        outs, pullback = jax.vjp(lambda *a: _floats(f(*a)), *a)
        return pullback(tuple(jax.numpy.ones_like(o) for o in outs))
    return jax.jit(backward).lower(*args).as_text().count("optimization_barrier")


def _compare_barriers(case, impl, got, want):
    if (want > 0) != (got > 0):
        raise Disagreement(f"optimization barriers in the backward pass: spec predicts {want}, "
                           f"JAX's HLO has {got}", case.context(impl, "prevent_cse", barriers=(want, got)))
    return f"barriers: spec {want}, HLO {got}"


PREVENT_CSE = Property("prevent_cse", "jaxpr", lambda case: optimization_barriers(case.prog),
                       _compare_barriers, jax_side=lambda case, f: jax_barriers(case.call.flat(f),
                                                                                case.call.jax_leaves))


# --------------------------------------------------------------------------
# vjp_leaves: what XLA materialises for the backward pass

def _leaves_of(residuals):
    """(shape, dtype) of residual entries ("f32[3,4]", source)."""
    out = []
    for t, _ in residuals:
        dtype, shape = _parse_type(t)
        out.append((str(shape), str(dtype)))
    return out


def _spec_leaves(case):
    return [(str(r.type.shape), str(r.type.dtype)) for r in spec.saved_residuals(case.prog)]


def _vjp_leaves_term(f, operands, diff):
    import jax
    return jax.tree.leaves(jax.vjp(f, *operands[0])[1])


def _compare_leaves(case, impl, got, want):
    leaves = sorted((str(tuple(np.shape(v))), str(v.dtype)) for v in map(spec_value_of, got))
    if leaves == sorted(want):
        return f"{len(leaves)} leaves"
    # the leaves are JAX's own saved residuals, whose difference from the
    # spec's is a known divergence: the same divergence explains the leaves
    residual_divergence, residuals = residual_verdict(case, impl)
    if residual_divergence is not None and leaves == sorted(_leaves_of(residuals.jax_residuals)):
        raise Disagreement(f"residual leaves are JAX's saved residuals ({residual_divergence})", residuals)
    raise Disagreement(f"residual leaves of jax.jit(jax.vjp)'s function:\n  JAX:  {leaves}\n"
                       f"  spec: {sorted(want)}", case.context(impl, "vjp_leaves", jax_residuals=leaves))


VJP_LEAVES = Property("vjp_leaves", "compiled", _spec_leaves, _compare_leaves, jax_term=_vjp_leaves_term,
                      unmodelled=_folded_literal_arithmetic_saved)


# --------------------------------------------------------------------------
# numbers (compiled tier)

def _depth(prog: Program) -> int:
    n = 0
    for e in prog.eqns:
        subs = subprograms(e.params)
        n += sum(_depth(s) for _, s in subs) if subs else 1
    return n


@dataclass(frozen=True)
class Numeric:
    """A numeric property's spec program and how to evaluate it."""
    program: Callable[[Program], Program]              # the spec program from the checked one
    operands: Callable[[Case], list]                   # its operands (spec dtypes)
    outputs: Callable[[Program, list], list] = lambda prog, out: out   # the compared part


def _second_order_program(prog):
    """jvp of the pullback in the primals, the cotangents held constant (as
    JAX's `jax.jvp(pullback, primals, tangents)` with `cts` closed over: a
    cotangent tangent of explicit zeros would add 0 * inf = nan terms). The
    pullback as JAX traces it, dead forward code included: jax.vjp runs
    the forward pass under jvp's trace, which differentiates every equation
    of it, one the pullback never reads too (a JVP rule's residual for a
    tangent nothing uses: igamma's igamma_grad_a, which has no JVP rule of
    its own, raises; found by a pristine campaign, 4edfa774e4). Where the
    spec cannot differentiate a dead equation JAX differentiates eagerly (a
    custom_jvp rule closing over a value of a trace that is over, which the
    spec re-traces: oracle/from_jax.py), only an error could show: the
    pullback without its dead code is differentiated instead."""
    n_cts = sum(is_float(t.dtype) for t in prog.out_types)
    nonzeros = [is_float(t.dtype) for t in prog.in_types] + [False] * n_cts
    try:
        return spec.dce(spec.jvp_program(spec.traced_vjp_program(prog), nonzeros=nonzeros)[0])[0]
    except Unsupported:
        return spec.jvp_program(spec.vjp_program(prog), nonzeros=nonzeros)[0]


NUMERIC = {
    "values": Numeric(lambda p: p, lambda c: list(c.args)),
    "jvp": Numeric(spec.jvp, lambda c: list(c.args) + c.diff_tangents(),
                   lambda prog, out: out[len(prog.outputs):]),
    "vjp": Numeric(spec.vjp_program, lambda c: list(c.args) + list(c.cts)),
    "second_order": Numeric(_second_order_program,
                            lambda c: list(c.args) + list(c.cts) + c.diff_tangents(),
                            # jvp of the pullback: its primal outputs are the float inputs' cotangents
                            lambda prog, out: out[sum(is_float(t.dtype) for t in prog.in_types):]),
    "vmap": Numeric(lambda p: spec.vmap(p, 0, 0, axis_size=BATCH), lambda c: list(c.batched)),
}


def _spec_numbers(numeric: Numeric):
    """The spec's answer: (in the program's dtypes, the float64 reference,
    the modelled rounding noise of each output)."""

    def side(case):
        return spec_numbers(case.prog, numeric, numeric.operands(case), case.seed, case.arithmetic)
    return side


def spec_numbers(prog: Program, numeric: Numeric, operands: list, seed: int = 0, arithmetic=None):
    """(the spec's answer in the program's dtypes, the float64 reference,
    the largest modelled rounding noise of each output) of `numeric` on
    `prog` at `operands`; `arithmetic` (oracle.backends.Arithmetic, None:
    float32 as on CPU) says what the backend rounds beyond the dtypes."""
    prog64 = upcast(prog)
    # jit lowers the program without its dead code (pxla's `_dce_jaxpr`): a
    # dead equation that raises when evaluated never runs (a custom_vjp's
    # custom_lin left in a grad's forward pass by a checkpoint's JVP of an
    # integer_pow[y=0], whose tangent zeros are known: found by a pristine
    # nightly, 9e3ed30815)
    p, p64 = (spec.dce(numeric.program(q))[0] for q in (prog, prog64))
    expected = numeric.outputs(prog, spec.evaluate(p, *operands))
    ops64 = up(operands)
    reference = numeric.outputs(prog, spec.evaluate(p64, *ops64))
    noise = [0.0] * len(reference)
    low = np.result_type(*[t.dtype for t in prog.in_types if is_float(t.dtype)] or [np.float32])
    low = real_dtype(low)      # a complex input's: its parts'

    def noisy_run(k):
        # runs 2j and 2j + 1 are antithetic: the same draws, negated
        hook = tolerances.rounding_noise_hook(low, np.random.default_rng(seed + 100 + k // 2), arithmetic,
                                              sign=-1.0 if k % 2 else 1.0)
        return numeric.outputs(prog, spec.evaluate(p64, *ops64, hook=hook))
    pair = [noisy_run(0), noisy_run(1)]
    runs = NOISE_SAMPLES + (NONLINEAR_NOISE_SAMPLES if _nonlinear_in_noise(*pair, reference) else 0)
    for noisy in pair + [noisy_run(k) for k in range(2, runs)]:
        noise = [_noise(n, a, r) for n, a, r in zip(noise, noisy, reference)]
    return expected, reference, noise


def _nonlinear_in_noise(plus, minus, reference) -> bool:
    """Whether an antithetic pair of noisy runs (the same perturbations,
    negated) shows outputs that are not linear in the rounding noise: to
    first order their errors are equal and opposite, so a float output
    whose two errors do not cancel to within half their size (or another
    output flipped in one run only) is past that regime. There the error of
    a few runs may be small by chance and says little of the error rounding
    can make: sin of a value whose rounding moves it by radians, which any
    rounding (JAX's) sets anywhere in [-1, 1] (found by a release campaign,
    aa428f63e8 on 0.4.36: sin of a convolution to the 8th power, where the
    first three runs erred by 0.1 and JAX by 1.7, and later runs by 1.8)."""
    for p, m, r in zip(plus, minus, reference):
        p, m, r = np.asarray(p), np.asarray(m), np.asarray(r)
        if not is_float(r.dtype):
            if np.any((p != r) != (m != r)):
                return True
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            ep, em = tolerances.widened(p) - r, tolerances.widened(m) - r
            size = np.maximum(np.abs(ep), np.abs(em))
            if np.any(np.isfinite(size) & (size > 0) & (np.abs(ep + em) > 0.5 * size)):
                return True
    return False


def _noise(so_far, noisy, reference):
    """The noise of one output with one more noisy float64 run: for a float
    output the largest finite difference from the reference (non-finite
    positions are compared exactly, not with noise); for another (a bool a
    comparison of a near-tie decides, an index) the mask of positions some
    noisy run decided otherwise (oracle.tolerances.compare accepts either
    value there: found by a pristine nightly, 84d0b733ea, a cond decided by
    `gt` of a sum that is 0 up to rounding)."""
    reference = np.asarray(reference)
    if not is_float(reference.dtype):
        flipped = np.asarray(np.asarray(noisy) != reference)
        return flipped if isinstance(so_far, float) else so_far | flipped
    d = np.abs(tolerances.widened(noisy) - reference)
    return max(so_far, float(np.max(d[np.isfinite(d)], initial=0.0)))


def _numbers_compare(name, weight, numeric: Numeric | None = None, zero_cotangents_gained: bool = False,
                     without_dead_code: Callable | None = None):
    """The compare of a numeric property; with `zero_cotangents_gained` (its
    operands end with the program outputs' cotangents) a known divergence
    may ask whether JAX's answer is the spec's for a variant program
    (`_values_agree_for`); with `without_dead_code` (a stack's) it may look
    at the program the stack's levels build."""
    def compare(case, impl, got, want):
        expected, reference, noise = want
        got = list(got)
        if len(got) != len(expected):
            raise Disagreement(f"JAX gives {len(got)} arrays, the spec {len(expected)}", case.context(impl, name))
        depth = _depth(case.prog) * weight
        worst = (0.0, 0.0)
        for i, (g, w, r, n) in enumerate(zip(got, expected, reference, noise)):
            g = spec_value_of(g)      # (a key array as the spec's key<fry> array)
            ok, max_abs, max_rel, idx, tol = tolerances.compare(g, w, r, np.asarray(w).dtype, depth,
                                                                case.rtol_scale, n)
            if not ok:
                at = lambda a: np.asarray(a)[idx] if idx is not None and np.ndim(a) else a
                raise Disagreement(
                    f"output {i} ({np.asarray(w).dtype}{list(np.shape(w))}): max abs error {max_abs:.4g} "
                    f"from the float64 reference (rel {max_rel:.4g}) > tolerance {tol:.3g}; worst index "
                    f"{idx}: JAX {at(g)}, spec {at(w)}, float64 reference {at(r)}",
                    case.context(impl, name, values_agree_for=_values_agree_for(case, numeric, got, depth)
                                 if zero_cotangents_gained else None,
                                 numbers_agree_for=_values_agree_for(case, numeric, got, depth),
                                 without_dead_code=without_dead_code and (lambda: without_dead_code(case))),
                    numeric=dict(tangents=case.tangents, cts=case.cts, batched=case.batched,
                                 expected=reference, atol=tol,
                                 operands=case.cache.get(("operands", name), [])))
            worst = (max(worst[0], max_abs), max(worst[1], max_rel))
        return worst
    return compare


def _values_agree_for(case, numeric: Numeric, got: list, depth: int):
    """For a known divergence: (variant program, how many outputs it
    gained) -> whether JAX's answer `got` is the spec's for the variant at
    the case's operands and a zero cotangent for each gained output."""
    def agree(variant: Program, gained: int = 0) -> bool:
        zeros = [np.zeros(t.shape, t.dtype) for t in variant.out_types[len(variant.outputs) - gained:]
                 if is_float(t.dtype)]
        expected, reference, noise = spec_numbers(variant, numeric, numeric.operands(case) + zeros, case.seed,
                                                  case.arithmetic)
        return len(got) == len(expected) and all(
            tolerances.compare(spec_value_of(g), w, r, np.asarray(w).dtype, depth, case.rtol_scale, n)[0]
            for g, w, r, n in zip(got, expected, reference, noise))
    return agree


def _with(f, args, diff, d):
    full = list(args)
    for i, x in zip(diff, d):
        full[i] = x
    return f(*full)


def _values_term(f, operands, diff):
    return list(f(*operands[0]))


def _float_tangents(primals, tangents) -> list:
    """The tangents of the float outputs (an integer output's tangent is a
    float0 zero in JAX; the spec's JVP program has none)."""
    return [t for p, t in zip(primals, tangents) if _is_float_value(p)]


def _is_float_value(x) -> bool:
    # jax.jvp may return a constant output as a Python scalar (a checkpoint
    # returning jnp.array(False), as equinox's BatchNorm returns its state's
    # first_time: found by a sweep of model code), which has no dtype
    dtype = getattr(x, "dtype", None)
    try:
        return is_float(np.dtype(dtype) if dtype is not None else np.result_type(x))
    except TypeError:           # a typed key's dtype is no numpy dtype
        return False


def _jvp_term(f, operands, diff):
    import jax
    args, tangents = operands[0], operands[1]
    return _float_tangents(*jax.jvp(lambda *d: _with(f, args, diff, d), [args[i] for i in diff],
                                    [tangents[i] for i in diff]))


def _floats(outs) -> tuple:
    """The float outputs: the ones reverse mode pulls cotangents back from
    (an integer output's cotangent is float0, and the spec's VJP takes none)."""
    return tuple(o for o in outs if _is_float_value(o))


def _pullback(f, operands, diff):
    import jax
    args, cts = operands[0], operands[2]
    return lambda *d: jax.vjp(lambda *dd: _floats(_with(f, args, diff, dd)), *d)[1](tuple(cts))


def _vjp_term(f, operands, diff):
    return list(_pullback(f, operands, diff)(*[operands[0][i] for i in diff]))


def _second_order_term(f, operands, diff):
    import jax
    args, tangents = operands[0], operands[1]
    return list(jax.jvp(_pullback(f, operands, diff), [args[i] for i in diff], [tangents[i] for i in diff])[1])


def _vmap_term(f, operands, diff):
    import jax
    return list(jax.vmap(f)(*operands[3]))


def _numeric(name, term, weight=1, needs="none"):
    return Property(name, "compiled", _spec_numbers(NUMERIC[name]),
                    _numbers_compare(name, weight, NUMERIC[name], zero_cotangents_gained=name == "vjp"),
                    jax_term=term, needs=needs, weight=weight, spec_program=NUMERIC[name].program)


def numeric_property(name: str, numeric: Numeric, term, *, weight: int = 1, after=None,
                     repro_code: str | None = None, description: str = "",
                     without_dead_code: Callable | None = None, zero_cotangents_gained: bool = False) -> Property:
    """A numeric property of the compiled tier with operands of its own
    (`numeric.operands`: the jit gets them as `operands[4][name]`); `after`
    maps the jit's answer to JAX's (a second jit: a linear function that
    jax.linearize returned, called on its own); `zero_cotangents_gained`:
    its operands end with a cotangent per float output of the program
    (see `_numbers_compare`)."""
    def own(case):
        key = ("operands", name)
        if key not in case.cache:
            case.cache[key] = numeric.operands(case)
        return case.cache[key]
    cached = Numeric(numeric.program, own, numeric.outputs)
    return Property(name, "compiled", _spec_numbers(cached),
                    _numbers_compare(name, weight, cached, zero_cotangents_gained, without_dead_code), jax_term=term,
                    weight=weight, operands=own, after=after, repro_code=repro_code, description=description,
                    without_dead_code=without_dead_code, spec_program=numeric.program)


VALUES = _numeric("values", _values_term)
JVP = _numeric("jvp", _jvp_term, weight=2)
VJP = _numeric("vjp", _vjp_term, weight=2)
SECOND_ORDER = _numeric("second_order", _second_order_term, weight=4)
VMAP = _numeric("vmap", _vmap_term, needs="inputs")

PROPERTIES = {p.name: p for p in (RESIDUALS, VJP_LEAVES, PREVENT_CSE, VALUES, JVP, VJP, VMAP, SECOND_ORDER)}
