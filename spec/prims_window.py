"""The generic `reduce_window` (jax 0.10.2: jax/_src/lax/windowed_reductions.py
`reduce_window_p`): windows of one or more operands reduced with a user
computation, a sub-program `jaxpr` taking (accumulators..., elements...)
scalars to new accumulators. `lax.reduce_window` binds it when the
computation is not lax.add / max / min on their identity (those bind
spec/prims_conv.py's monoid primitives).

* eval: each window is folded from the init values over the operand
  elements it covers, in row-major window order, `acc = jaxpr(acc,
  element)`; padding and base-dilation holes are skipped, as XLA:CPU's
  ReduceWindow does (for a computation of which init is an identity, the
  same as padding with init; XLA leaves the order unspecified, so a
  computation that is not associative and commutative has no single answer).
* JVP: `reduce_window_jvp` — one reduce_window of the operands and their
  tangents whose computation is the JVP of `jaxpr`; a tangent of an init
  value is refused (JAX's TypeError). Its primal outputs come from the
  same equation as its tangents, so linearization (grad, vjp) fails in
  JAX (spec/jvp.py's `_primal_outputs_known`, from the dependence rule
  below), and no transpose rule exists.
* batching: `_generic_reduce_window_batch_rule` — batch axes to the front,
  a unit window there; batched init values are refused.

    >>> import spec
    >>> from spec.prims_window import reduce_window
    >>> prog = spec.trace(lambda x: reduce_window(x, 1.0, lambda a, b: a * b, (2,)), spec.f32[4])
    >>> spec.evaluate(prog, np.array([1., 2., 3., 4.], np.float32))[0]
    array([ 2.,  6., 12.], dtype=float32)
"""
from __future__ import annotations

import itertools

import numpy as np

from spec.batching import bdim_at_front
from spec.core import (Example, JaxFacts, PrimitiveError, Zero, batch_rules, bind, building, eval_rules,
                       examples, jax_facts, jvp_rules, primitive, shape_rules, to_atom, trace)
from spec.evaluate import evaluate
from spec.ir import ArrayType, Program
from spec.prims_conv import _WINDOW, _ref_windows, _window_from_jax, _window_out_shape, _window_params, _window_views
from spec.jvp import dependence_rules, jvp_traced
from spec.partial_eval import instantiate_tangent

reduce_window_p = primitive("reduce_window", ["jaxpr"] + _WINDOW, multiple_results=True)


def reduce_window(operands, init_values, computation, window_dimensions, window_strides=None, padding="VALID",
                  base_dilation=None, window_dilation=None):
    """lax.reduce_window with a computation `(accs, elems) -> accs` on
    scalars (one operand: `(a, b) -> c`); operands and init_values are one
    array each or equal-length sequences."""
    single = not isinstance(operands, (tuple, list))
    operands = [operands] if single else list(operands)
    inits = [init_values] if single else list(init_values)
    if len(operands) != len(inits) or not operands:
        raise PrimitiveError(reduce_window_p, f"needs as many init_values as operands (at least one), got "
                                              f"{len(operands)} operands and {len(inits)} init_values")
    n = len(operands)
    scalars = [ArrayType((), x.dtype) for x in operands]

    def body(*xs):
        out = computation(xs[0], xs[1]) if single else computation(list(xs[:n]), list(xs[n:]))
        return [out] if single else list(out)

    jaxpr = trace(body, *scalars, *scalars)
    init_atoms = [to_atom(v, dtype=x.dtype) if not hasattr(v, "atom") else v for v, x in zip(inits, operands)]
    outs = bind(reduce_window_p, *operands, *init_atoms, jaxpr=jaxpr,
                **_window_params(operands[0].shape, window_dimensions, window_strides, padding, base_dilation,
                                 window_dilation))
    return outs[0] if single else outs


def _reduce_window_shape(*types, jaxpr: Program, **window):
    """_reduce_window_abstract_eval_rule: operands and init values pair up
    by dtype, init values are scalars; every output has the window shape."""
    n = len(types) // 2
    operands, inits = types[:n], types[n:]
    if len(types) % 2 or not n:
        raise PrimitiveError(reduce_window_p, f"takes operands and as many init values, got {len(types)} inputs")
    if any(o.dtype != i.dtype for o, i in zip(operands, inits)):
        raise PrimitiveError(reduce_window_p, "reduce_window got inconsistent dtypes for operands and "
                                              f"init_values: got operand dtypes {[o.dtype for o in operands]} "
                                              f"and init_value dtypes {[i.dtype for i in inits]}.")
    if any(i.shape != () for i in inits):
        raise PrimitiveError(reduce_window_p, "reduce_window expected init_values to be scalars but "
                                              f"init_values have shapes {[i.shape for i in inits]}.")
    scalars = [ArrayType((), o.dtype) for o in operands]
    if [t.with_memory_space(None) for t in jaxpr.in_types] != scalars * 2 or \
            [t.with_memory_space(None) for t in jaxpr.out_types] != scalars:
        raise PrimitiveError(reduce_window_p, f"computation must take {scalars * 2} to {scalars}, "
                                              f"got {jaxpr.in_types} -> {jaxpr.out_types}")
    out = _window_out_shape(reduce_window_p, operands[0].shape, **window)
    return [ArrayType(out, o.dtype) for o in operands]


shape_rules[reduce_window_p] = _reduce_window_shape


def _reduce_window_eval(*args, jaxpr: Program, **window):
    """Fold each window from the init values, `acc = jaxpr(acc, element)`,
    taps in row-major order, skipping padding and dilation holes."""
    n = len(args) // 2
    xs, inits = [np.asarray(a) for a in args[:n]], [np.asarray(a) for a in args[n:]]
    taps = [list(_window_views(x, init, **window)[1]) for x, init in zip(xs, inits)]
    covered = [view for _, view in _window_views(np.ones(xs[0].shape, bool), False, **window)[1]]
    out = _window_out_shape(None, xs[0].shape, **window)
    accs = [np.full(out, init, dtype=x.dtype) for x, init in zip(xs, inits)]
    for t in range(len(taps[0])):
        views = [tap[t][1] for tap in taps]
        for pos in zip(*np.nonzero(covered[t])):
            new = evaluate(jaxpr, *[np.asarray(a[pos]) for a in accs], *[np.asarray(v[pos]) for v in views])
            for a, v in zip(accs, new):
                a[pos] = v
    return accs


eval_rules[reduce_window_p] = _reduce_window_eval


INIT_TANGENT_ERROR = "reduce_window jvp does not support non-zero init_value_tangent."


def _jvp_computation(jaxpr: Program) -> Program:
    """ad.jvp_jaxpr of the computation, all tangents nonzero, arranged as
    reduce_window_jvp's `wrapper`: ((primals, tangents) of the accumulators,
    (primals, tangents) of the elements) -> (primal outs, tangent outs)."""
    n = len(jaxpr.outputs)
    types = jaxpr.in_types[:n]
    with building() as b:
        pl, tl, pr, tr = ([b.new_input(t) for t in types] for _ in range(4))
        outs, out_ts = jvp_traced(jaxpr, pl + pr, tl + tr)
        return b.build(pl + tl + pr + tr, list(outs) + [instantiate_tangent(t) for t in out_ts])


def _reduce_window_jvp(primals, tangents, *, jaxpr: Program, **window):
    """reduce_window_jvp: one reduce_window of [operands, tangents] with
    init values [inits, zeros] and the JVP of the computation."""
    n = len(primals) // 2
    operands, inits = primals[:n], primals[n:]
    if not all(isinstance(t, Zero) for t in tangents[n:]):
        raise TypeError(INIT_TANGENT_ERROR)
    op_tangents = [instantiate_tangent(t) for t in tangents[:n]]
    init_tangents = [np.zeros((), t.type.dtype) for t in tangents[n:]]
    outs = bind(reduce_window_p, *operands, *op_tangents, *inits, *init_tangents,
                jaxpr=_jvp_computation(jaxpr), **window)
    return outs[:n], outs[n:]


jvp_rules[reduce_window_p] = _reduce_window_jvp


def _reduce_window_dependence(eqn, in_flags):
    """Every output depends on every input: the `jaxpr` param is the window
    computation, not a body applied to the operands (which the default
    dependence would look through), and JAX's partial evaluation has no
    rule of its own for reduce_window, so one unknown operand makes every
    output unknown: the JVP's primal outputs, computed jointly with the
    tangents, too. A while loop whose body holds it then has unknown primal
    carries, and its linearization fails (found by a campaign on 0.6.2;
    0.10.2 alike)."""
    return [any(in_flags)] * len(eqn.outputs)


dependence_rules[reduce_window_p] = _reduce_window_dependence


INIT_BATCH_ERROR = "reduce_window batching is not implemented for initial values"


def _reduce_window_batch(args, dims, *, jaxpr, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation):
    """_generic_reduce_window_batch_rule: operands batched at the front
    (unbatched ones broadcast), a unit window there."""
    n = len(args) // 2
    if any(d is not None for d in dims[n:]):
        raise NotImplementedError(INIT_BATCH_ERROR)
    size = next(x.shape[d] for x, d in zip(args[:n], dims[:n]) if d is not None)
    operands = [bdim_at_front(x, d, size) for x, d in zip(args[:n], dims[:n])]
    outs = bind(reduce_window_p, *operands, *args[n:], jaxpr=jaxpr, window_dimensions=(1,) + window_dimensions,
                window_strides=(1,) + window_strides, padding=((0, 0),) + padding,
                base_dilation=(1,) + base_dilation, window_dilation=(1,) + window_dilation)
    return outs, [0] * n


batch_rules[reduce_window_p] = _reduce_window_batch
# bound structurally (oracle/to_jax.py: lax.reduce_window with the sub-program
# as a Python computation); oracle/from_jax.py converts the jaxpr param
jax_facts[reduce_window_p] = JaxFacts("reduce_window", "", from_jax=_window_from_jax)


def _ref_fold(combine, x, init, window):
    """Reference: each window's covered elements folded from `init`."""
    out = None
    for pos, shape, covered in _ref_windows(x, *window):
        if out is None:
            out = np.full(shape, init, dtype=np.float64)
        acc = init
        for c in covered:
            acc = combine(acc, x[c])
        out[pos] = acc
    return out


def _example(name, shape, domain, init, combine, *window):
    return Example(name, ((shape, "f32", domain),),
                   lambda x: reduce_window(x, init, combine, *window),
                   lambda x: _ref_fold(combine, x, init, window), cond=float(np.prod(window[0])))


examples[reduce_window_p] = [
    _example("window-product", (2, 5), "positive", 1.0, lambda a, b: a * b,
             (1, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    _example("sum-of-squares-padded-dilated", (5, 4), "normal", 0.0, lambda a, b: a + b * b,
             (3, 2), (2, 1), ((1, 1), (1, 0)), (2, 1), (1, 2)),
]
