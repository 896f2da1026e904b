"""remat_opt (jax/_src/custom_derivatives.py): the forward rule of a
`jax.custom_vjp` defined with `defvjp(fwd, bwd, optimize_remat=True)`.

JAX wraps such a forward rule (`optimize_remat_of_custom_vjp_fwd`) so that
it binds one equation

    remat_opt[num_consts, num_res, fwd_jaxpr, fun_jaxpr] consts, primals
        -> residuals (num_res of them), outs

that evaluates `fwd_jaxpr` (residuals that are inputs themselves are not
among its outputs: the wrapper forwards them). What it buys is its DCE
rule: where no residual is read (the forward pass of a checkpoint, whose
residuals are recomputed in the backward pass), the equation becomes a
closed_call of `fun_jaxpr`, the primal function, which is cheaper than the
forward rule. JAX holds `fun_jaxpr` as a thunk; the spec traces it at once.

Rules (JAX 0.10.2):
* JVP (`_remat_opt_jvp`): a remat_opt of the JVPs of both programs, every
  primal tangent instantiated, outputs (res, res_dot, outs, outs_dot).
* transpose: JAX raises NotImplementedError ("does not support
  higher-order AD"); so does the spec.
* batching (`_remat_opt_vmap`): both programs batched, operands at axis 0.
* partial evaluation: JAX has no rule, so the generic one (a policy
  decides about its outputs as about any primitive's).

    >>> import spec
    >>> from spec import ops
    >>> from spec.prims_custom import custom_vjp
    >>> f = custom_vjp(ops.sin, lambda x: (ops.sin(x), ops.cos(x)), lambda c, g: (ops.mul(g, c),),
    ...                optimize_remat=True)
    >>> prog = spec.trace(lambda x: ops.mul(f(x), 2.), spec.f32[3])
    >>> [str(r) for r in spec.saved_residuals(prog)]
    ['f32[] from a literal', 'f32[3] output of remat_opt']
    >>> ckpt = spec.trace(lambda x: spec.remat.checkpoint(lambda y: ops.mul(f(y), 2.))(x), spec.f32[3])
    >>> print(spec.linearize(ckpt).forward)     # the primal alone: remat_opt DCE'd to a closed_call
    { lambda ; a:f32[3]. let
        b:f32[3] = call[jaxpr={ lambda ; c:f32[3]. let
                d:f32[3] = sin c
              in (d,) }] a
        e:f32[3] = mul b 2.0:f32[]
      in (e, a) }
"""
from __future__ import annotations

from spec.batching import moveaxis, vmap_program
from spec.core import (JaxFacts, PrimitiveError, Zero, batch_rules, bind, building, dce_rules, eval_rules,
                       instantiate, jax_facts, jvp_rules, primitive, shape_rules, transpose_rules)
from spec.evaluate import evaluate
from spec.ir import Eqn, Program, Var, is_float
from spec.jvp import jvp_program
from spec.partial_eval import dce
from spec.prims_call import call_p

remat_opt_p = primitive("remat_opt", ["num_consts", "num_res", "fwd_jaxpr", "fun_jaxpr"], multiple_results=True)
jax_facts[remat_opt_p] = JaxFacts("remat_opt", "")      # bound structurally (oracle/to_jax.py)

HIGHER_ORDER_ERROR = "remat optimization for custom_vjp does not support higher-order AD"


def remat_opt(*args, num_consts: int, num_res: int, fwd_jaxpr: Program, fun_jaxpr: Program):
    """remat_opt_p.bind: fwd_jaxpr(*args) -> (*residuals, *outs)."""
    return bind(remat_opt_p, *args, num_consts=num_consts, num_res=num_res, fwd_jaxpr=fwd_jaxpr,
                fun_jaxpr=fun_jaxpr)


def optimized_fwd(fwd: Program, n_out: int, body: Program) -> Program:
    """optimize_remat_of_custom_vjp_fwd: a forward rule's program
    (primals -> outs, residuals) as one remat_opt equation; the residuals
    that are primals themselves are forwarded around it."""
    outs, res = fwd.outputs[:n_out], fwd.outputs[n_out:]
    inputs = {v.id: i for i, v in enumerate(fwd.inputs)}
    fwds = [inputs.get(r.id) if isinstance(r, Var) else None for r in res]
    computed = [r for r, f in zip(res, fwds) if f is None]
    inner = Program(fwd.inputs, fwd.eqns, computed + list(outs))
    with building() as b:
        primals = [b.new_input(t) for t in fwd.in_types]
        results = remat_opt(*primals, num_consts=0, num_res=len(computed), fwd_jaxpr=inner, fun_jaxpr=body)
        it = iter(results[:len(computed)])
        return b.build(primals, results[len(computed):] + [next(it) if f is None else primals[f] for f in fwds])


def _remat_opt_shape(*in_types, num_consts, num_res, fwd_jaxpr, fun_jaxpr):
    """_remat_opt_abstract_eval: fwd_jaxpr's outputs; fun_jaxpr takes the
    primals and returns the outputs after the residuals."""
    if list(in_types) != fwd_jaxpr.in_types or fun_jaxpr.in_types != list(in_types[num_consts:]) \
            or fun_jaxpr.out_types != fwd_jaxpr.out_types[num_res:]:
        raise PrimitiveError(remat_opt_p, f"operands {list(in_types)}: fwd_jaxpr takes {fwd_jaxpr.in_types} "
                                          f"and returns {fwd_jaxpr.out_types} ({num_res} residuals first); "
                                          f"fun_jaxpr maps {fun_jaxpr.in_types} to {fun_jaxpr.out_types}")
    return fwd_jaxpr.out_types


shape_rules[remat_opt_p] = _remat_opt_shape


def _remat_opt_eval(*args, fwd_jaxpr, **_):
    """_remat_opt_impl: the forward rule."""
    return evaluate(fwd_jaxpr, *args)


eval_rules[remat_opt_p] = _remat_opt_eval


def _reordered(prog: Program, inputs: list[int], outputs: list[int]) -> Program:
    return Program([prog.inputs[i] for i in inputs], prog.eqns, [prog.outputs[i] for i in outputs])


def _remat_opt_jvp(primals, tangents, *, num_consts, num_res, fwd_jaxpr, fun_jaxpr):
    """_remat_opt_jvp: the consts' zero tangents stay zero, the primals' are
    instantiated; the new equation takes (consts, nonzero consts_dot,
    primals, tangents) and returns (res, res_dot, outs, outs_dot)
    (ad.rearrange_binders), fun_jaxpr's JVP taking (primals, tangents)."""
    if not all(is_float(t.dtype) for t in fwd_jaxpr.in_types + fwd_jaxpr.out_types):
        raise PrimitiveError(remat_opt_p, "the JVP of a forward rule with integer inputs or outputs "
                                          "(float0 tangents) is not modelled")
    consts_nz = [not isinstance(t, Zero) for t in tangents[:num_consts]]
    n_in, n_out = len(primals), len(fwd_jaxpr.outputs)
    in_nz = consts_nz + [True] * (n_in - num_consts)
    jvp, _ = jvp_program(fwd_jaxpr, in_nz)
    dots = [n_in + i for i in range(sum(in_nz))]
    n_cd = sum(consts_nz)
    inputs = list(range(num_consts)) + dots[:n_cd] + list(range(num_consts, n_in)) + dots[n_cd:]
    res, outs = list(range(num_res)), list(range(num_res, n_out))
    fwd_jvp = _reordered(jvp, inputs, res + [n_out + i for i in res] + outs + [n_out + i for i in outs])
    fun_jvp, _ = jvp_program(fun_jaxpr)
    consts_dot = [t for t in tangents[:num_consts] if not isinstance(t, Zero)]
    results = remat_opt(*primals[:num_consts], *consts_dot, *primals[num_consts:],
                        *[instantiate(t) for t in tangents[num_consts:]], num_consts=num_consts + n_cd,
                        num_res=2 * num_res, fwd_jaxpr=fwd_jvp, fun_jaxpr=fun_jvp)
    n_prim_out = n_out - num_res
    r, r_dot = results[:num_res], results[num_res:2 * num_res]
    o, o_dot = results[2 * num_res:2 * num_res + n_prim_out], results[2 * num_res + n_prim_out:]
    return r + o, r_dot + o_dot


jvp_rules[remat_opt_p] = _remat_opt_jvp


def _remat_opt_transpose(cts, *args, **params):
    """_remat_opt_transpose: JAX raises."""
    raise NotImplementedError(HIGHER_ORDER_ERROR)


transpose_rules[remat_opt_p] = _remat_opt_transpose


def _remat_opt_batch(args, dims, *, num_consts, num_res, fwd_jaxpr, fun_jaxpr):
    """_remat_opt_vmap: operands moved to axis 0, fwd_jaxpr batched
    (batch_jaxpr, instantiate=False), fun_jaxpr batched alike (its outputs
    where the forward rule's primal outputs are: JAX batches it on its own,
    which agrees wherever fwd and fun compute the same function)."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    args = [moveaxis(a, d, 0) if d is not None else a for a, d in zip(args, dims)]
    in_dims = [0 if d is not None else None for d in dims]
    fwd_b, out_dims = vmap_program(fwd_jaxpr, in_dims, "zero_if_mapped", size)
    fun_b, _ = vmap_program(fun_jaxpr, in_dims[num_consts:], out_dims[num_res:], size)
    return remat_opt(*args, num_consts=num_consts, num_res=num_res, fwd_jaxpr=fwd_b, fun_jaxpr=fun_b), out_dims


batch_rules[remat_opt_p] = _remat_opt_batch


def _remat_opt_dce(eqn: Eqn, used_outputs):
    """_remat_opt_dce. A residual read: the forward rule, pruned (every
    primal kept: a later DCE may still make it the primal function), and
    the primal function's unread outputs with it (JAX keeps its thunk
    whole, and its abstract eval never compares the two: the spec's shape
    rule does, found through jax's custom_api_test
    test_optimize_remat_multiple_args, whose backward pass reads the
    residuals alone). No residual read: a closed_call of the primal
    function, pruned."""
    p = eqn.params
    nc, nr = p["num_consts"], p["num_res"]
    outs = [v for v, u in zip(eqn.outputs, used_outputs) if u]
    if any(used_outputs[:nr]):
        fwd, read = dce(p["fwd_jaxpr"], used_outputs)
        used_ins = read[:nc] + [True] * (len(eqn.inputs) - nc)
        fwd = Program([v for v, u in zip(fwd.inputs, used_ins) if u], fwd.eqns, fwd.outputs)
        fun, _ = dce(p["fun_jaxpr"], used_outputs[nr:])
        params = dict(p, num_consts=sum(read[:nc]), num_res=sum(used_outputs[:nr]), fwd_jaxpr=fwd, fun_jaxpr=fun)
        return Eqn(remat_opt_p, [a for a, u in zip(eqn.inputs, used_ins) if u], outs, params,
                   why=eqn.why), used_ins
    fun, read = dce(p["fun_jaxpr"], used_outputs[nr:], prune_inputs=True)
    ins = [a for a, u in zip(eqn.inputs[nc:], read) if u]
    return Eqn(call_p, ins, outs, dict(jaxpr=fun, name=None), why=eqn.why), [False] * nc + list(read)


dce_rules[remat_opt_p] = _remat_opt_dce
