"""Rule tables, `bind`, and the tracing builder.

Every primitive registers its rules in the tables below, in the module that
defines it (``spec/prims_*.py``); transformations look rules up here and
never special-case a primitive by name:

    shape_rules[p](*in_types, **params)        -> [out types]
    eval_rules[p](*arrays, **params)           -> array | [arrays]
    jvp_rules[p](primals, tangents, **params)  -> (primal outs, tangent outs)
    transpose_rules[p](cts, *inputs, **params) -> [input cotangents]
    batch_rules[p](args, dims, **params)       -> (out | [outs], out dim(s));
                                                  dims[i] is args[i]'s batch
                                                  axis, or None (unbatched)
    axis_batch_rules[p](axis, args, dims, **params) -> the same, for the
                                                  collectives: `axis` is the
                                                  vmapped axis (name, size);
                                                  called even when no input
                                                  is batched (JAX's
                                                  fancy_primitive_batchers)
    partial_eval_rules[p], dce_rules[p]        -> only for primitives with
                                                  sub-programs (call, remat)
                                                  or effects (debug_print, debug_callback)
    effectful                                  -> primitives with an effect
                                                  (JAX's eqn.effects): DCE
                                                  keeps their equations

Programs are built by *tracing*: a transformation (or a user's `spec.trace`)
opens a :class:`Builder`, calls ops on :class:`Tracer` values, and every op
appends one equation. JVP and transpose rules are themselves written with
ops, so a rule's output is a piece of program that can be printed and read.
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from spec.ir import (ArrayType, Eqn, Literal, Primitive, Program, Var,
                     canonical_dtype, is_complex, is_float, subprograms, type_of)

# --------------------------------------------------------------------------
# primitives and their rule tables

shape_rules: dict[Primitive, Callable] = {}
eval_rules: dict[Primitive, Callable] = {}
jvp_rules: dict[Primitive, Callable] = {}
transpose_rules: dict[Primitive, Callable] = {}
batch_rules: dict[Primitive, Callable] = {}
axis_batch_rules: dict[Primitive, Callable] = {}
partial_eval_rules: dict[Primitive, Callable] = {}
dce_rules: dict[Primitive, Callable] = {}
# JAX's custom staging rules that rewrite an equation when it is staged again
# (pe.custom_staging_rules): `rule(eqn) -> (eqn, {output id: the atom it is})`,
# applied where a release's semantics stage equations again (spec/semantics.py)
staging_rules: dict[Primitive, Callable] = {}
param_specs: dict[Primitive, tuple[str, ...]] = {}
# primitives declared outside spec (not in `primitives`), whose rules are in
# the tables: the oracle's models of JAX's implementations (oracle/divergences.py)
extension_primitives: set = set()
# What JAX's JaxprTrace (pe.partial_eval_jaxpr_nounits: remat_transpose
# partially evaluates a checkpoint's body with it, a scan's linearization its
# known loop body) does to an equation with sub-programs, as far as it shows:
# the checkpoint policies it asks (spec.remat.ask_policies). `rule(eqn,
# in_unknowns, ask)` calls `ask(program, unknowns)` for each sub-program the
# primitive's rule in pe.custom_partial_eval_rules traces with a JaxprTrace.
# A primitive without one is staged or bound whole (default_process_primitive):
# nothing in its sub-programs is asked.
jaxpr_trace_rules: dict[Primitive, Callable] = {}
# FLOPs of one equation (for spec.explain's recompute cost). Default: one
# operation per output element; data movement registers 0, dot_general 2*M*N*K.
cost_rules: dict[Primitive, Callable] = {}

# primitives whose sub-programs keep the constants they read closed over
# (pjit's ClosedJaxpr: its body's consts stay in it when staged), where JAX
# hoists other bodies' constants into operands of the equation (a
# checkpoint's, a cond's, a loop's): an enclosing trace first meets such a
# constant where something outside reads it, not at the equation
keeps_constants_closed: set[Primitive] = set()

# primitives whose direct linearization rule (ad.primitive_linearizations:
# pjit's _pjit_linearize, _cond_linearize, _scan_linearize, jax 0.7 on)
# linearizes their sub-programs equation by equation (ad.linearize_jaxpr)
# instead of differentiating them whole first: an equation in a sub-program
# whose linearization raises raises before a later one's missing derivative
# (spec.vjp._jvp_in_order). Each sub-program's inputs are mapped as its
# `jaxpr_trace_rules` entry maps them.
linearizes_in_order: set[Primitive] = set()

# primitives that run a sub-program until a value it computes says stop
# (while): how often is a value, so a changed sub-program can run forever
# (the fuzzer's reducer changes only what keeps their sub-programs' values)
loops_until_a_value: set[Primitive] = set()

# primitives with an effect (a debug print): an equation of one, or one whose
# sub-programs hold one, is never dead code (JAX's pe.has_effects)
effectful: set[Primitive] = set()

# primitives whose equation has no effect of its own though a sub-program
# holds one: an opaque call, as JAX's hi-primitives are (hijax: the
# equation's effects are the primitive's, none). Such an equation is dead
# code when nothing reads it, and without a cotangent it is not transposed.
# (The oracle's remat3 model: the linearized checkpoint.)
effects_sealed: set[Primitive] = set()

# the `why` marks of an equation that say something of its value wherever it
# goes, so that re-emitting a program (eval_program_traced) keeps them (most
# marks are of one transformation's program only, e.g. a tangent-side zero)
persistent_whys: set[str] = set()

# primitives whose rules (evaluation, JVP, transpose, batching) are JAX's
# for complex operands and results too: `bind` refuses a complex operand or
# result of any other primitive (PrimitiveError), so that a rule written for
# real floats never computes something wrong on complex values
complex_rules: set[Primitive] = set()

primitives: dict[str, Primitive] = {}


def has_effects(eqn: Eqn) -> bool:
    """Whether `eqn` has an effect: its primitive's, or one in a sub-program
    (not through a primitive in `effects_sealed`)."""
    return eqn.primitive not in effects_sealed and (eqn.primitive in effectful or any(
        has_effects(e) for _, sub in subprograms(eqn.params) for e in sub.eqns))


# --------------------------------------------------------------------------
# facts other layers need, registered in the primitive's block beside its rules

@dataclass(frozen=True)
class JaxFacts:
    """How a primitive appears in JAX (read by oracle/; the spec never imports jax).

    name      JAX's primitive name in a jaxpr
    emitter   Python source of a function `(*jax values, **spec params) ->
              output(s)` calling jax (`lax`, `lax_internal`, `jnp`, `np` in
              scope): oracle.to_jax binds with it, reproducers embed it
    from_jax  JAX's params -> the spec's params (duck-typed: JAX's
              dimension-number dataclasses are read by attribute); None:
              the params are the spec's, by name
    ignored   JAX params the spec leaves out, with the one value accepted
    literal_operands_folded
              JAX's JVP rule applies Python operators to the primal
              operands, so a scalar literal among them (a Python float,
              weakly typed) is folded or promoted there as jnp does, which
              the spec (no weak types) does not model: the names of
              second-order residuals differ (the oracle does not compare them)
    transpose_rejects_zero_cotangent
              JAX's transpose rule fails when handed a symbolic zero
              cotangent (ad.Zero) instead of an array, which JAX's own rules
              accept: what a backward pass that transposes equations whose
              outputs get no cotangent (jax_remat3's) runs into
    """
    name: str
    emitter: str
    from_jax: Callable[[dict], dict] | None = None
    ignored: tuple = ()          # ((param name, accepted value), ...)
    literal_operands_folded: bool = False
    transpose_rejects_zero_cotangent: bool = False


jax_facts: dict[Primitive, JaxFacts] = {}


@dataclass(frozen=True)
class Example:
    """A use of a primitive with an independent numpy reference. The docs
    show it; tests/test_primitive_examples.py checks evaluation, the JVP
    (float64 finite differences), transposition (where `linear`), vmap
    (against a loop) and JAX against it.

    operands  one (shape, dtype name, domain) per input; domains are those
              of `spec.examples.DOMAINS` ("normal", "positive", "indices:4", ...)
    fn        spec ops on tracers -> tracer(s)
    reference numpy on the same values (float64 for float inputs)
    linear    masks of inputs in which `fn` is linear (transpose checked)
    cond      number of summed terms (the evaluation tolerance grows with it)
    tangent   "fd" (finite differences), or "zero" (a piecewise-constant
              function: the JVP is zero)
    abs_scale the evaluation error is measured at the scale of
              reference(|operands|), i.e. sum|terms| for sums and dots
              (otherwise at max(1, |reference|))
    kept      indices of float operands whose dtype the tests keep (not
              cast to the float dtype a test draws in: a mixed-precision use)
    """
    name: str
    operands: tuple
    fn: Callable
    reference: Callable
    linear: tuple = ()
    cond: float = 1.0
    tangent: str = "fd"
    abs_scale: bool = False
    kept: tuple = ()


examples: dict[Primitive, list[Example]] = {}


def primitive(name: str, params: Sequence[str] = (), multiple_results=False) -> Primitive:
    """Declare a primitive and the names of its params (JAX's names)."""
    if name in primitives:
        raise ValueError(f"primitive {name!r} declared twice")
    p = Primitive(name, multiple_results)
    primitives[name] = p
    param_specs[p] = tuple(params)
    return p


class PrimitiveError(TypeError):
    """Bad input to a primitive: the message names the primitive and the problem."""

    def __init__(self, prim: Primitive | str, problem: str):
        name = prim.name if isinstance(prim, Primitive) else prim
        super().__init__(f"{name}: {problem}")


class MemorySpaceError(ValueError):
    """Operands in different memory spaces, which JAX's standard primitives
    refuse in these words (`_default_memory_space_rule`,
    jax/_src/lax/utils.py)."""


def check_memory_spaces(prim: Primitive, *types) -> None:
    """_default_memory_space_rule: the operands of rank 1 or more all live in
    one memory space."""
    previous = None
    for t in types:
        if not t.ndim:
            continue
        if previous is not None and previous.memory_space != t.memory_space:
            raise MemorySpaceError(f"memory_space of all inputs passed to `{prim.name}` must be the same. Got one "
                                   f"operand with type: {previous} and another operand with type: {t}")
        previous = t


def check_complex(prim: Primitive, in_types, out_types) -> None:
    """Refuse complex operands or results of a primitive outside
    `complex_rules` (its rules are written for real values)."""
    if prim in complex_rules:
        return
    for t in [*in_types, *out_types]:
        if is_complex(t.dtype):
            raise PrimitiveError(prim, f"complex operands and results are not modelled, got {t}")


def check_params(prim: Primitive, params: dict) -> None:
    expected = set(param_specs[prim])
    got = set(params)
    if got - expected:
        raise PrimitiveError(prim, f"unknown param(s) {sorted(got - expected)}; "
                                   f"{prim.name} takes {sorted(expected) or 'no params'}")
    if expected - got:
        raise PrimitiveError(prim, f"missing param(s) {sorted(expected - got)}")


# --------------------------------------------------------------------------
# symbolic zeros and undefined primals

@dataclass(frozen=True)
class Zero:
    """A symbolic zero tangent or cotangent of the given type: it creates no
    equations. Integer and bool values only ever have Zero tangents."""
    type: ArrayType


@dataclass(frozen=True)
class UndefinedPrimal:
    """In a transpose rule, marks a linear input (whose cotangent is wanted)."""
    type: ArrayType


def is_undefined(x) -> bool:
    return isinstance(x, UndefinedPrimal)


# --------------------------------------------------------------------------
# tracing

class Builder:
    """Collects the equations of a program being traced."""

    def __init__(self):
        self.eqns: list[Eqn] = []
        # a JVP's tangent lifetimes (spec.jvp._Lifetimes, spec.tangent_lifetimes):
        # tangent var id -> eqn index it is released before; eqn index -> its rule's end
        self.tangent_released: dict = {}
        self.step_end: dict = {}

    def new_input(self, type: ArrayType) -> "Tracer":
        return Tracer(self, Var(type))

    def add_eqn(self, prim: Primitive, inputs, params, out_types) -> list[Var]:
        outs = [Var(t) for t in out_types]
        self.eqns.append(Eqn(prim, list(inputs), outs, dict(params)))
        return outs

    def build(self, inputs: Sequence["Tracer"], outputs: Sequence[Any],
              input_names=None) -> Program:
        outs = [to_atom(o, self) for o in outputs]
        return Program([t.atom for t in inputs], self.eqns, outs,
                       input_names=tuple(input_names) if input_names else None)


_builders: list[Builder] = []


@contextlib.contextmanager
def building():
    """Open a fresh builder: ops called inside append to it."""
    b = Builder()
    _builders.append(b)
    try:
        yield b
    finally:
        _builders.pop()


def current_builder() -> Builder:
    if not _builders:
        raise RuntimeError("spec ops can only be called while tracing "
                           "(inside spec.trace or a transformation)")
    return _builders[-1]


class Tracer:
    """A value of a program being built: wraps a Var or a Literal."""
    __slots__ = ("builder", "atom")
    __array_priority__ = 1000   # numpy scalars defer to our operators

    def __init__(self, builder: Builder, atom):
        self.builder, self.atom = builder, atom

    type = property(lambda self: self.atom.type)
    shape = property(lambda self: self.atom.type.shape)
    dtype = property(lambda self: self.atom.type.dtype)
    ndim = property(lambda self: self.atom.type.ndim)

    def __repr__(self):
        return f"Tracer<{self.type}>"

    # operator overloading: each maps to one primitive (see spec/ops.py)
    def __neg__(self): return _ops().neg(self)
    def __add__(self, o): return _ops().add(self, o)
    def __radd__(self, o): return _ops().add(o, self)
    def __sub__(self, o): return _ops().sub(self, o)
    def __rsub__(self, o): return _ops().sub(o, self)
    def __mul__(self, o): return _ops().mul(self, o)
    def __rmul__(self, o): return _ops().mul(o, self)
    def __truediv__(self, o): return _ops().div(self, o)
    def __rtruediv__(self, o): return _ops().div(o, self)
    def __matmul__(self, o): return _ops().matmul(self, o)
    def __rmatmul__(self, o): return _ops().matmul(o, self)
    def __gt__(self, o): return _ops().gt(self, o)
    def __lt__(self, o): return _ops().lt(self, o)
    def __ge__(self, o): return _ops().ge(self, o)
    def __le__(self, o): return _ops().le(self, o)
    def __pow__(self, y): return _ops().integer_pow(self, y)
    __hash__ = object.__hash__

    @property
    def T(self):
        return _ops().transpose(self, tuple(reversed(range(self.ndim))))

    def sum(self, axis=None):
        axes = tuple(range(self.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        return _ops().reduce_sum(self, axes)


def _ops():
    import spec.ops as ops  # a cycle: every prims module ops gathers registers into this one
    return ops


def to_atom(x, builder: Builder | None = None, dtype=None):
    """A Var/Literal for `x`: a Tracer's atom, or a Literal for a constant."""
    if isinstance(x, Tracer):
        if builder is not None and x.builder is not builder:
            raise RuntimeError("a value of another trace leaked into this one "
                               f"({x!r}); pass it as an input instead")
        return x.atom
    if isinstance(x, (Var, Literal)):
        return x
    if isinstance(x, (bool, int, float, np.ndarray, np.generic)):
        if dtype is None and type(x) in (bool, int, float):   # numpy scalars keep their dtype
            dtype = {bool: np.bool_, int: np.int32, float: np.float32}[type(x)]
        value = np.asarray(x, dtype=dtype)
        canonical_dtype(value.dtype)
        return Literal(value, type_of(value))
    raise TypeError(f"expected an array value (Tracer, numpy array or Python scalar), got {type(x).__name__}: {x!r}")


def bind(prim: Primitive, *args, **params):
    """Apply `prim` in the current trace: type-check, append one equation,
    and return the output Tracer(s)."""
    check_params(prim, params)
    builder = next((a.builder for a in args if isinstance(a, Tracer)), None) or current_builder()
    atoms = [to_atom(a, builder) for a in args]
    out_types = shape_rules[prim](*[a.type for a in atoms], **params)
    check_complex(prim, [a.type for a in atoms], out_types)
    outs = [Tracer(builder, v) for v in builder.add_eqn(prim, atoms, params, out_types)]
    return outs if prim.multiple_results else outs[0]


def eval_program_traced(prog: Program, *args) -> list:
    """Re-emit `prog`'s equations on traced `args` (inlining it)."""
    if len(args) != len(prog.inputs):
        raise TypeError(f"program takes {len(prog.inputs)} inputs, got {len(args)}")
    env: dict[int, Any] = {}

    def read(a):
        return env[a.id] if isinstance(a, Var) else a

    for v, x in zip(prog.inputs, args):
        env[v.id] = x
    for e in prog.eqns:
        outs = bind(e.primitive, *map(read, e.inputs), **e.params)
        if e.why in persistent_whys:
            current_builder().eqns[-1].why = e.why
        for v, o in zip(e.outputs, outs if e.primitive.multiple_results else [outs]):
            env[v.id] = o
    return [read(a) for a in prog.outputs]


def trace(fn: Callable, *types: ArrayType) -> Program:
    """Trace `fn` (which calls spec.ops on its arguments) into a Program.

    >>> import spec
    >>> print(spec.trace(lambda x: spec.ops.sin(x) * 2.0, spec.f32[3]))
    { lambda ; a:f32[3]. let
        b:f32[3] = sin a
        c:f32[3] = mul b 2.0:f32[]
      in (c,) }
    """
    for t in types:
        if not isinstance(t, ArrayType):
            raise TypeError(f"spec.trace takes array types such as spec.f32[3], got {t!r}")
    names = _arg_names(fn, len(types))
    with building() as b:
        ins = [b.new_input(t) for t in types]
        out = fn(*ins)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return b.build(ins, outs, input_names=names)


def _arg_names(fn, n: int):
    """Argument names as JAX's debug info gives them: parameter names, and
    `args[i]` for the i-th value of a `*args` parameter."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    names = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}[{i}]" for i in range(n - len(names))]
    return names[:n] if len(names) >= n else None


def zeros_like_type(t: ArrayType):
    """Instantiate a zero of type `t` as JAX does (`broadcast_in_dim 0.0`)."""
    ops = _ops()
    zero = np.zeros((), t.dtype)
    if t.ndim == 0:
        return zero          # a scalar zero is a literal
    return ops.broadcast_in_dim(zero, t.shape, ())


def instantiate(t):
    return zeros_like_type(t.type) if isinstance(t, Zero) else t


def linear_jvp(fn):
    """JAX's ad.linear_jvp (deflinear, deflinear2): the tangent of a linear
    primitive is the primitive applied to the tangents, every zero among
    them instantiated unless all are zero."""
    def rule(primals, tangents, **params):
        ans = fn(*primals, **params)
        if all(isinstance(t, Zero) for t in tangents):
            return ans, None
        return ans, fn(*[instantiate(t) for t in tangents], **params)
    return rule


def is_differentiable(t: ArrayType) -> bool:
    return is_float(t.dtype)
