"""custom_linear_solve (jax 0.10.2: jax/_src/lax/control_flow/solves.py):
`lax.custom_linear_solve`, and through it `jnp.linalg.solve`, `inv` and
the JVP of `slogdet` (which reuse one LU factorization for the solve and
its derivatives).

    x = custom_linear_solve[const_lengths, jaxprs] *consts, *b
      = solve(*solve_consts, *b)                     (then its aux outputs)

`jaxprs` holds four sub-programs, each taking its consts then one value per
leaf of b: matvec (x -> A x), vecmat (y -> A^T y), solve (b -> A^{-1} b,
then any aux outputs) and transpose_solve (b -> A^{-T} b, then aux);
vecmat and transpose_solve are None when no transpose_solve was given.
`const_lengths` says how many of the leading operands each one takes, in
that order. Only `solve` runs; the others define the derivatives:

* JVP (`_custom_linear_solve_jvp`): A x = b gives dx = A^{-1}(db - dA x):
  dA x is the JVP of matvec in its consts (x's tangent zero), emitted
  inline as JAX's `ad.jvp` emits it (matvec's primal equations too), then
  `neg`, `add_any` with db, and a second custom_linear_solve on the same
  consts. Tangents of the other programs' consts are ignored (jnp.linalg.
  solve factors `stop_gradient(a)` for its solves). Aux outputs have zero
  tangents.
* transpose (`_linear_solve_transpose_rule`): linear in b only; the
  cotangent of b is a custom_linear_solve with the roles swapped
  (vecmat <-> matvec, transpose_solve <-> solve, consts reordered alike).
* batching (`_linear_solve_batching_rule`): a fixpoint over which parts of
  x and b are batched, consistent across all four programs.
* partial evaluation and DCE: JAX registers none, so the generic rules
  (all outputs unknown if any operand is; the equation kept whole if any
  output is read); under linearization a staged custom_linear_solve
  reads its consts as residuals.

    >>> import spec
    >>> from spec import ops
    >>> f = lambda a, b: custom_linear_solve(lambda a, x: a * x, b, lambda a, y: y / a, symmetric=True,
    ...                                      matvec_consts=(a,), solve_consts=(a,))
    >>> prog = spec.trace(f, spec.f32[3], spec.f32[3])
    >>> [e.primitive.name for e in spec.jvp(prog).eqns]   # x; dA x (matvec's primal too); -; dx
    ['custom_linear_solve', 'mul', 'mul', 'neg', 'add_any', 'custom_linear_solve']
    >>> [str(r) for r in spec.saved_residuals(prog)]
    ['f32[3] from the argument a', 'f32[3] output of custom_linear_solve']
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from spec.batching import broadcast_at, moveaxis, vmap_program
from spec.core import (JaxFacts, PrimitiveError, Tracer, Zero, batch_rules, bind, building, cost_rules,
                       current_builder, eval_rules, instantiate, is_undefined, jax_facts, jvp_rules,
                       primitive, shape_rules, to_atom, transpose_rules)
from spec.evaluate import evaluate
from spec.explain import eqn_flops, opaque_bodies
from spec.ir import Program
from spec.jvp import dependence_rules, jvp_traced
from spec.prims_elementwise import neg
from spec.transpose import add_tangents_or_zero


class LinearSolveTuple(NamedTuple):
    """solves._LinearSolveTuple: one entry (a const count, a Program or
    None) per function, in JAX's order."""
    matvec: Any
    vecmat: Any
    solve: Any
    transpose_solve: Any

    def transpose(self) -> "LinearSolveTuple":
        """The roles of the transposed system: (vecmat, matvec, transpose_solve, solve)."""
        return type(self)(self.vecmat, self.matvec, self.transpose_solve, self.solve)


linear_solve_p = primitive("custom_linear_solve", ["const_lengths", "jaxprs"], multiple_results=True)
jax_facts[linear_solve_p] = JaxFacts("custom_linear_solve", "")    # bound structurally (oracle/to_jax.py)

TRANSPOSE_SOLVE_REQUIRED = ("transpose_solve required for backwards mode automatic differentiation of "
                            "custom_linear_solve")


def linear_solve(*args, const_lengths: LinearSolveTuple, jaxprs: LinearSolveTuple):
    """linear_solve_p.bind: solve(*solve_consts, *b) (then its aux outputs)."""
    return bind(linear_solve_p, *args, const_lengths=LinearSolveTuple(*const_lengths),
                jaxprs=LinearSolveTuple(*jaxprs))


def _split(args, const_lengths):
    """solves._split_linear_solve_args: (the four const groups, b)."""
    groups, start = [], 0
    for n in const_lengths:
        groups.append(list(args[start:start + n]))
        start += n
    return LinearSolveTuple(*groups), list(args[start:])


def _flatten(groups) -> list:
    return [x for g in groups for x in g]


# ==========================================================================
# the lax.custom_linear_solve wrapper (closed-over values made explicit)

def custom_linear_solve(matvec: Callable, b, solve: Callable, transpose_solve: Callable | None = None, *,
                        symmetric=False, has_aux=False, matvec_consts=(), solve_consts=(),
                        transpose_solve_consts=()):
    """lax.custom_linear_solve: x = solve(b) with derivatives by implicit
    differentiation of matvec(x) = b. `b` is one value or a tuple (the
    leaves of JAX's pytree); matvec(*matvec_consts, x), solve(*solve_consts,
    b) and transpose_solve(*transpose_solve_consts, b) take and return that
    structure (solve and transpose_solve (x, aux) with `has_aux`). The values
    JAX's tracing closes over are passed as the consts (the spec's traces
    cannot close over another trace's values). As JAX: with `symmetric`,
    transpose_solve defaults to solve and vecmat is matvec; otherwise vecmat
    is matvec transposed (spec.transpose, its consts matvec's)."""
    multiple = isinstance(b, (tuple, list))
    leaves = list(b) if multiple else [b]
    builder = next((a.builder for a in (*leaves, *matvec_consts, *solve_consts, *transpose_solve_consts)
                    if isinstance(a, Tracer)), None) or current_builder()
    pack = lambda xs: tuple(xs) if multiple else xs[0]             # noqa: E731

    def traced(fn, consts, aux=False):
        """fn(*consts, b-like) as a program of (consts, b's leaves)."""
        n = len(consts)
        types = [to_atom(x, builder).type for x in (*consts, *leaves)]
        return _trace(lambda *a: fn(*a[:n], pack(a[n:])), types, aux)
    if transpose_solve is None and symmetric:
        transpose_solve, transpose_solve_consts = solve, solve_consts
    consts = [list(matvec_consts), [], list(solve_consts), []]
    mv, vm, sv, tsv = traced(matvec, matvec_consts), None, traced(solve, solve_consts, has_aux), None
    if transpose_solve is not None:
        # symmetric: matvec again (JAX holds its one jaxpr twice; traced anew, the
        # two share no variables, as two imported jaxprs do)
        vm = traced(matvec, matvec_consts) if symmetric else _transposed(mv, len(matvec_consts))
        tsv = traced(transpose_solve, transpose_solve_consts, has_aux)
        consts[1], consts[3] = list(matvec_consts), list(transpose_solve_consts)
    outs = linear_solve(*_flatten(consts), *leaves, const_lengths=LinearSolveTuple(*map(len, consts)),
                        jaxprs=LinearSolveTuple(mv, vm, sv, tsv))
    x, aux = pack(outs[:len(leaves)]), outs[len(leaves):]
    return (x, aux[0] if len(aux) == 1 else tuple(aux)) if has_aux else x


def _trace(fn, in_types, has_aux) -> Program:
    """fn's program; its outputs the leaves of x (then of aux with has_aux)."""
    with building() as bld:
        ins = [bld.new_input(t) for t in in_types]
        out = fn(*ins)
        if has_aux:
            out, aux = out
            aux = list(aux) if isinstance(aux, (tuple, list)) else [aux]
        leaves = list(out) if isinstance(out, (tuple, list)) else [out]
        return bld.build(ins, leaves + (aux if has_aux else []))


def _transposed(matvec: Program, n_consts: int) -> Program:
    """solves._transpose_one_output: vecmat(*consts, y) = A^T y, matvec
    transposed in its x inputs (api.linear_transpose)."""
    from spec.transpose import transpose     # a cycle: transpose reads rules registered by spec/__init__
    return transpose(matvec, [False] * n_consts + [True] * (len(matvec.inputs) - n_consts))


# ==========================================================================
# shape, eval, cost

def _linear_solve_shape(*in_types, const_lengths, jaxprs):
    """_linear_solve_abstract_eval: the b operands' types, then solve's aux
    outputs' types. Checked as well (JAX's tracing in custom_linear_solve
    ensures it): each program takes its consts then b's types; matvec and
    vecmat return b's types, solve and transpose_solve b's types then one
    aux list."""
    p = linear_solve_p
    if not (isinstance(const_lengths, tuple) and len(const_lengths) == 4
            and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
                    for n in const_lengths)):
        raise PrimitiveError(p, f"const_lengths must be 4 non-negative ints (matvec, vecmat, solve, "
                                f"transpose_solve), got {const_lengths!r}")
    if not (isinstance(jaxprs, tuple) and len(jaxprs) == 4
            and isinstance(jaxprs[0], Program) and isinstance(jaxprs[2], Program)
            and all(j is None or isinstance(j, Program) for j in jaxprs)):
        raise PrimitiveError(p, "jaxprs must be (matvec, vecmat, solve, transpose_solve) Programs, vecmat "
                                f"and transpose_solve may be None; got {jaxprs!r}")
    if len(in_types) < sum(const_lengths):
        raise PrimitiveError(p, f"{len(in_types)} operands for {sum(const_lengths)} consts {const_lengths!r}")
    consts, b = _split(list(in_types), const_lengths)
    names = LinearSolveTuple._fields
    for name, prog, c in zip(names, jaxprs, consts):
        if prog is None:
            if c:
                raise PrimitiveError(p, f"{name} is None but has {len(c)} consts")
            continue
        if prog.in_types != c + b:
            raise PrimitiveError(p, f"{name} takes {prog.in_types}, called with consts {c} and b {b}")
        outs = prog.out_types
        if outs[:len(b)] != b or (name in ("matvec", "vecmat") and len(outs) != len(b)):
            raise PrimitiveError(p, f"{name} must return b's types {b}"
                                    f"{'' if name in ('matvec', 'vecmat') else ' then aux'}, returns {outs}")
    aux = jaxprs[2].out_types[len(b):]
    if jaxprs[3] is not None and jaxprs[3].out_types[len(b):] != aux:
        raise PrimitiveError(p, f"solve's aux outputs {aux} differ from transpose_solve's "
                                f"{jaxprs[3].out_types[len(b):]}")
    return b + aux


shape_rules[linear_solve_p] = _linear_solve_shape


def _custom_linear_solve_impl(*args, const_lengths, jaxprs):
    """_custom_linear_solve_impl: solve(*solve_consts, *b)."""
    params, b = _split(args, const_lengths)
    return evaluate(jaxprs.solve, *params.solve, *b)


eval_rules[linear_solve_p] = _custom_linear_solve_impl
# only `solve` runs (the lowering is _custom_linear_solve_impl's)
cost_rules[linear_solve_p] = lambda *types, const_lengths, jaxprs: sum(eqn_flops(e) for e in jaxprs.solve.eqns)
# a JaxprTrace has no partial-eval rule for it (default_process_primitive):
# every output is unknown as soon as one operand is, whatever solve reads
dependence_rules[linear_solve_p] = lambda eqn, in_flags: [any(in_flags)] * len(eqn.outputs)
# its programs each take their own consts and b: spec.explain names the equation
opaque_bodies.add(linear_solve_p)


# ==========================================================================
# JVP

def _tangent_linear_map(matvec: Program, params, params_dot, x):
    """solves._tangent_linear_map: dA x, the JVP of matvec(*params, *x) with
    the params' tangents and x's zero (`ad.jvp`, inlined: matvec's primal
    equations are emitted too), zeros instantiated (ad.jvp's instantiate=True)."""
    zeros = [Zero(to_atom(v, current_builder()).type) for v in x]
    _, out_ts = jvp_traced(matvec, list(params) + list(x), list(params_dot) + zeros)
    return [instantiate(t) for t in out_ts]


def _neg(t):
    """operator.neg: a scalar zero instantiated by ad.jvp is a concrete
    array in JAX (lax.broadcast to shape () returns it), negated at once."""
    return -np.asarray(t) if isinstance(t, (np.ndarray, np.generic)) else neg(t)


def _custom_linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs):
    """_custom_linear_solve_jvp: A x - b = 0, so dA x + A dx - db = 0 and
    dx = A^{-1}(db - dA x). x = the equation again; rhs = db if matvec's
    consts have zero tangents, else add_tangents(db, neg(dA x)) per leaf
    (_tangent_linear_map); dx = custom_linear_solve(*consts, *rhs) with the
    same params. A symbolic zero in rhs is no JAX value: JAX's bind raises
    (a b leaf with a zero tangent beside a nonzero one); so does the spec.
    Aux outputs get zero tangents (ad_util.p2tz)."""
    kwargs = dict(const_lengths=const_lengths, jaxprs=jaxprs)
    x = linear_solve(*primals, **kwargs)
    params, _ = _split(primals, const_lengths)
    params_dot, b_dot = _split(tangents, const_lengths)
    x_leaves = x[:len(b_dot)]
    if all(isinstance(t, Zero) for t in params_dot.matvec):
        rhs = b_dot
    else:
        matvec_tangents = _tangent_linear_map(jaxprs.matvec, params.matvec, params_dot.matvec, x_leaves)
        rhs = [add_tangents_or_zero(d, m) for d, m in zip(b_dot, [_neg(t) for t in matvec_tangents])]
    zero = next((i for i, r in enumerate(rhs) if isinstance(r, Zero)), None)
    if zero is not None:
        raise PrimitiveError(linear_solve_p, "Error interpreting argument to custom_linear_solve as a JAX "
                                             "value: a symbolic zero (ad_util.Zero) tangent of b passed at "
                                             f"position {sum(const_lengths) + zero} (JAX's bind raises this "
                                             "TypeError too)")
    x_dot = linear_solve(*_flatten(params), *rhs, **kwargs)
    return x, x_dot[:len(b_dot)] + [None] * (len(x_dot) - len(b_dot))


jvp_rules[linear_solve_p] = _custom_linear_solve_jvp


# ==========================================================================
# transpose

def _linear_solve_transpose_rule(cts, *primals, const_lengths, jaxprs):
    """_linear_solve_transpose_rule: linear in b only (an undefined const
    raises NotImplementedError; every b leaf must be linear: JAX asserts it);
    aux cotangents must be zero. cotangent_b = custom_linear_solve of the
    transposed system (params.transpose(), const_lengths.transpose(),
    jaxprs.transpose()) on the instantiated x cotangents: A^{-T} ct.
    Without transpose_solve JAX raises TypeError; so does the spec."""
    if jaxprs.transpose_solve is None:
        raise TypeError(TRANSPOSE_SOLVE_REQUIRED)
    params, b = _split(primals, const_lengths)
    if any(is_undefined(x) for xs in params for x in xs):
        raise NotImplementedError("open an issue at https://github.com/google/jax !! (custom_linear_solve "
                                  "is not linear in its consts)")
    if not all(is_undefined(x) for x in b):
        raise PrimitiveError(linear_solve_p, "transpose needs every b operand linear (JAX asserts it)")
    x_cotangent, other_cotangents = cts[:len(b)], cts[len(b):]
    if any(not isinstance(ct, Zero) for ct in other_cotangents):
        raise NotImplementedError("open an issue at https://github.com/google/jax !! (a nonzero "
                                  "cotangent of custom_linear_solve's aux outputs)")
    cotangent_b_full = linear_solve(*_flatten(params.transpose()), *[instantiate(c) for c in x_cotangent],
                                    const_lengths=const_lengths.transpose(), jaxprs=jaxprs.transpose())
    return [None] * sum(const_lengths) + list(cotangent_b_full[:len(b)])


transpose_rules[linear_solve_p] = _linear_solve_transpose_rule


# ==========================================================================
# batching

def _batch_jaxpr(prog: Program | None, in_bat, instantiate_out, size):
    """batching.batch_jaxpr: prog batched at axis 0 for the flagged inputs;
    an output is batched (at 0) if the rules batch it or `instantiate_out`
    flags it. Returns (program, out batched); (None, []) for None."""
    if prog is None:
        return None, []
    in_dims = [0 if f else None for f in in_bat]
    _, dims = vmap_program(prog, in_dims, "zero_if_mapped", size)
    out_bat = [d is not None or bool(i) for d, i in zip(dims, instantiate_out)]
    batched, _ = vmap_program(prog, in_dims, [0 if f else None for f in out_bat], size)
    return batched, out_bat


def _batch_fixpoint(jaxprs, params_bat, orig_b_bat, size):
    """The fixpoint of _linear_solve_batching_rule: which leaves of x and b
    are batched, consistent across solve/vecmat (-> x) and
    matvec/transpose_solve (-> b); aux outputs batched with vecmat."""
    matvec, vecmat, solve, solve_t = jaxprs
    n_op, n_sol = len(matvec.outputs), len(solve.outputs)
    num_aux = n_sol - n_op
    b_bat, x_bat = list(orig_b_bat), [False] * n_sol
    for _ in range(1 + len(orig_b_bat) + n_sol):
        solve_b, solve_x_bat = _batch_jaxpr(solve, params_bat.solve + b_bat, x_bat, size)
        vecmat_b, vecmat_x_bat = _batch_jaxpr(vecmat, params_bat.vecmat + b_bat, b_bat, size)
        x_bat_out = solve_x_bat if vecmat is None else [
            a or s for a, s in zip(vecmat_x_bat + [True] * num_aux, solve_x_bat)]
        x_bat_noaux = x_bat_out[:n_op]
        matvec_b, matvec_b_bat = _batch_jaxpr(matvec, params_bat.matvec + x_bat_noaux, b_bat, size)
        solve_t_b, solve_t_bat = _batch_jaxpr(solve_t, params_bat.transpose_solve + x_bat_noaux, x_bat_out, size)
        if solve_t is None:
            b_bat_out = [m or o for m, o in zip(matvec_b_bat, orig_b_bat)]
        else:
            b_bat_out = [m or s or o for m, s, o in zip(matvec_b_bat, solve_t_bat[:len(orig_b_bat)], orig_b_bat)]
        if x_bat_out == x_bat and b_bat_out == b_bat:
            return LinearSolveTuple(matvec_b, vecmat_b, solve_b, solve_t_b), b_bat, solve_x_bat
        x_bat, b_bat = x_bat_out, b_bat_out
    raise AssertionError("Fixedpoint not reached")


def _linear_solve_batching_rule(args, dims, *, const_lengths, jaxprs):
    """_linear_solve_batching_rule: the four programs batched where a
    fixpoint (`_batch_fixpoint`) finds x's and b's leaves batched,
    consistently across them; batched consts moved to axis 0; a b leaf
    batched there broadcast (if it was not) or moved to axis 0; outputs at
    axis 0 where solve's are batched."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    params, b = _split(args, const_lengths)
    params_dims, b_dims = _split(dims, const_lengths)
    params_bat = LinearSolveTuple(*[[d is not None for d in g] for g in params_dims])
    orig_b_bat = [d is not None for d in b_dims]
    batched, b_bat, solve_x_bat = _batch_fixpoint(jaxprs, params_bat, orig_b_bat, size)
    new_params = [moveaxis(x, d, 0) if d is not None and d != 0 else x
                  for x, d in zip(_flatten(params), _flatten(params_dims))]
    new_b = [broadcast_at(x if isinstance(x, Tracer) else np.asarray(x), size, 0) if now and not was else
             moveaxis(x, d, 0) if now and d != 0 else x
             for x, d, was, now in zip(b, b_dims, orig_b_bat, b_bat)]
    outs = linear_solve(*new_params, *new_b, const_lengths=const_lengths, jaxprs=batched)
    return outs, [0 if f else None for f in solve_x_bat]


batch_rules[linear_solve_p] = _linear_solve_batching_rule
# partial evaluation and DCE: JAX registers no rule (pe.partial_eval_jaxpr_custom_rules,
# pe.dce_rules), so the spec has none: the generic split and DCE apply
