"""One-line mutants of the installed jax's Python source, as data.

Each Mutant names a file of the jax package (relative to the package
directory, e.g. "_src/ad_checkpoint.py"), an ANCHOR (the exact original
text, which must occur exactly once in the pristine file; it may span a few
lines for context) and its REPLACEMENT (which changes exactly one of those
lines). They were written by reading JAX's code, one plausible slip each
(a flipped condition, a wrong operand, a dropped term, an off-by-one
direction), not from what the fuzzer draws. Every mutant has a witness of
the same name in benchmarks/mutation/witnesses.py: a tiny check that fails
under the mutant and passes on pristine jax.

CLASSES orders the classes; `by_name`/`select` look mutants up.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    cls: str
    file: str          # relative to the jax package directory
    anchor: str        # exact original text, exactly once in the file
    replacement: str   # the same text with one line changed
    description: str

    @property
    def witness(self) -> str:
        return self.name


CLASSES = ("remat2", "remat3", "partial_eval", "ad", "batching", "primitive",
           "control_flow", "pjit")

ADC = "_src/ad_checkpoint.py"
REMAT = "_src/interpreters/remat.py"
PE = "_src/interpreters/partial_eval.py"
AD = "_src/interpreters/ad.py"
BATCHING = "_src/interpreters/batching.py"
LAX = "_src/lax/lax.py"
LOOPS = "_src/lax/control_flow/loops.py"
COND = "_src/lax/control_flow/conditionals.py"
PJIT = "_src/pjit.py"

M = Mutant

REMAT2 = [
    M("r2_dots_saveable_drops_conv", "remat2", ADC,
      "ps = {lax_internal.dot_general_p, lax_convolution.conv_general_dilated_p}",
      "ps = {lax_internal.dot_general_p}",
      "dots_saveable no longer saves conv_general_dilated outputs"),
    M("r2_no_batch_dims_inverted", "remat2", ADC,
      "        if not lhs_b and not rhs_b:\n          return True",
      "        if lhs_b and rhs_b:\n          return True",
      "dots_with_no_batch_dims_saveable saves only the dots WITH batch dims"),
    M("r2_everything_saveable_false", "remat2", ADC,
      'without any use of jax.remat."""\n  return True',
      'without any use of jax.remat."""\n  return False',
      "everything_saveable answers False (saves nothing)"),
    M("r2_names_but_these_inverted", "remat2", ADC,
      "return params['name'] not in self.names",
      "return params['name'] in self.names",
      "save_any_names_but_these saves exactly the excluded names"),
    M("r2_both_policies_and", "remat2", ADC,
      "return out1 or out2",
      "return out1 and out2",
      "save_from_both_policies is an AND instead of an OR"),
    M("r2_default_policy_saves_all", "remat2", ADC,
      "policy = params['policy'] or nothing_saveable",
      "policy = params['policy'] or everything_saveable",
      "a checkpoint without a policy saves everything (remat_partial_eval default)"),
    M("r2_residual_half_precision", "remat2", ADC,
      "params = dict(exponent_bits=finfo.nexp, mantissa_bits=finfo.nmant)",
      "params = dict(exponent_bits=finfo.nexp, mantissa_bits=finfo.nmant // 2)",
      "residuals are rounded to half their mantissa by _insert_reduce_precision"),
    M("r2_staged_not_differentiated", "remat2", ADC,
      "new_params = dict(params, jaxpr=jaxpr_unknown, differentiated=True,",
      "new_params = dict(params, jaxpr=jaxpr_unknown, differentiated=False,",
      "the staged (backward) remat is not marked differentiated: no optimization barrier"),
    M("r2_jvp_tangents_unbarriered", "remat2", ADC,
      "prevent_cse += (True,) * len(nonzero_tangents)",
      "prevent_cse += (False,) * len(nonzero_tangents)",
      "remat_jvp with a tuple prevent_cse leaves the tangent inputs out of the barrier"),
    M("r2_name_jvp_drops_name", "remat2", ADC,
      "return name_p.bind(x, name=name), xdot",
      "return x, xdot",
      "name_p's JVP drops the name (policies by name stop matching under autodiff)"),
    M("r2_name_batcher_drops_name", "remat2", ADC,
      "return name_p.bind(x, name=name), d",
      "return x, d",
      "name_p's batching rule drops the name (policies by name stop matching under vmap)"),
    M("r2_saved_residuals_no_subst", "remat2", ADC,
      "res_vars = {subst.get(v, v) for v in res_vars}",
      "res_vars = {v for v in res_vars}",
      "saved_residuals reports the inserted reduce_precision instead of the value's origin"),
    M("r2_vmap_unbatched_claimed", "remat2", ADC,
      "  out_dims = [0 if b else None for b in out_batched]\n  return remat_p.bind",
      "  out_dims = [0 for b in out_batched]\n  return remat_p.bind",
      "remat_vmap claims every output batched at 0, unbatched ones too"),
]

REMAT3 = [
    M("r3_names_but_these_inverted", "remat3", ADC,
      "saveable = (self.name not in policy.names if isinstance(policy, SaveAnyNamesButThese)",
      "saveable = (self.name in policy.names if isinstance(policy, SaveAnyNamesButThese)",
      "remat3 CheckpointName: save_any_names_but_these saves exactly the excluded names"),
    M("r3_everything_saveable_names_recomputed", "remat3", ADC,
      "elif policy is everything_saveable:",
      "elif policy is nothing_saveable:",
      "remat3 CheckpointName: names are recomputed under everything_saveable"),
    M("r3_saved_name_tangent_from_residual", "remat3", ADC,
      "(x, _), (_, t) = primals, tangents",
      "(x, _), (t, _) = primals, tangents",
      "primal_left_tangent_right takes the tangent of the saved value (zero) instead of the recomputed one"),
    M("r3_saved_dot_tangent_swapped", "remat3", LAX,
      "return out, lambda lhs, rhs: primal_left_tangent_right(out, dot(lhs, rhs))",
      "return out, lambda lhs, rhs: primal_left_tangent_right(dot(lhs, rhs), out)",
      "remat3 dot_general rule: saved dot's primal and tangent sides swapped"),
    M("r3_bwd_without_barrier", "remat3", ADC,
      "bwd = rem(*lax_internal.optimization_barrier(primals))",
      "bwd = rem(*primals)",
      "remat3 vjp_bwd recomputes without an optimization barrier"),
    M("r3_recompute_reads_forward", "remat3", REMAT,
      "out_primal2 = prim.bind(*in_vals2, **params)",
      "out_primal2 = prim.bind(*in_vals, **params)",
      "RematTrace's recomputation binds the forward values, not the recompute tracers"),
    M("r3_batch_unbatched_claimed", "remat3", ADC,
      "    out_dims = [0 if b else None for b in out_batched]\n    return RematTraced",
      "    out_dims = [0 for b in out_batched]\n    return RematTraced",
      "RematTraced.batch claims every output batched at 0, unbatched ones too"),
]

PARTIAL_EVAL = [
    M("pe_policy_inverted", "partial_eval", PE,
      "if has_effects(eqn.effects) or isinstance(policy, SaveableType):",
      "if has_effects(eqn.effects) or not isinstance(policy, SaveableType):",
      "partial_eval_jaxpr_custom saves what the policy says to recompute"),
    M("pe_recompute_not_available", "partial_eval", PE,
      "        foreach(partial(write, False, True), eqn.outvars)\n  unzipped",
      "        foreach(partial(write, False, False), eqn.outvars)\n  unzipped",
      "a recomputed known value is marked unavailable in the staged jaxpr (becomes a residual)"),
    M("pe_literal_unknown", "partial_eval", PE,
      "    return (False, True)",
      "    return (True, True)",
      "partial_eval_jaxpr_custom reads literals as unknown"),
    M("pe_dce_last_use_wins", "partial_eval", PE,
      "env[x] = read(x) or b",
      "env[x] = b",
      "dce_jaxpr: a dead use of a variable overrides a live one"),
    M("pe_call_rule_saves_everything", "partial_eval", PE,
      "partial_eval_jaxpr_custom(jaxpr, unks_in, inst_in, False, False, saveable)",
      "partial_eval_jaxpr_custom(jaxpr, unks_in, inst_in, False, False, everything_saveable)",
      "call_partial_eval_custom_rule splits a nested checkpoint/call saving everything, not by the policy"),
    M("pe_default_dce_drops_partly_used", "partial_eval", PE,
      "  if not any(used_outs) and not has_effects(eqn):\n    return [False] * len(eqn.invars), None\n"
      "  return [True] * len(eqn.invars), eqn",
      "  if not all(used_outs) and not has_effects(eqn):\n    return [False] * len(eqn.invars), None\n"
      "  return [True] * len(eqn.invars), eqn",
      "the default DCE rule deletes a multi-output equation whose outputs are only partly used"),
]

AD_RULES = [
    M("ad_add_tangents_doubles", "ad", AD,
      "    return add_jaxvals(x, y)",
      "    return add_jaxvals(x, x)",
      "add_tangents adds the first tangent twice"),
    M("ad_add_tangents_drops_left", "ad", AD,
      "  elif type(y) is Zero:\n    return x",
      "  elif type(y) is Zero:\n    return y",
      "add_tangents(x, Zero) returns the Zero"),
    M("ad_standard_jvp_first_operand_only", "ad", AD,
      "                  if rule is not None and type(t) is not Zero]\n"
      "  return val_out, functools.reduce(add_tangents, tangents_out, p2tz(val_out))",
      "                  if rule is not None and type(t) is not Zero]\n"
      "  return val_out, functools.reduce(add_tangents, tangents_out[:1], p2tz(val_out))",
      "standard_jvp keeps only the first nonzero operand's contribution"),
    M("ad_jvp_skips_partly_zero", "ad", AD,
      "tracers))\n    if (all(type(t) is Zero for t in tangents_in) and",
      "tracers))\n    if (any(type(t) is Zero for t in tangents_in) and",
      "JVPTrace skips differentiation when ANY input tangent is zero"),
    M("ad_linearize_skips_partly_zero", "ad", AD,
      "tangent_nzs = [type(t) is not Zero for t in tangents_in]\n"
      "    if (all(type(t) is Zero for t in tangents_in) and",
      "tangent_nzs = [type(t) is not Zero for t in tangents_in]\n"
      "    if (any(type(t) is Zero for t in tangents_in) and",
      "LinearizeTrace skips linearization when ANY input tangent is zero"),
    M("ad_accum_overwrites", "ad", AD,
      "self.val = add_tangents(self.val, x)",
      "self.val = x",
      "ValAccum keeps only the last cotangent contribution"),
    M("ad_backward_in_forward_order", "ad", AD,
      "for eqn in lin_eqns[::-1]:",
      "for eqn in lin_eqns:",
      "backward_pass3 transposes the linear equations in forward order"),
    M("ad_perturbation_confusion", "ad", AD,
      "if isinstance(val, JVPTracer) and val._trace.tag is self.tag:",
      "if isinstance(val, JVPTracer):",
      "JVPTrace treats another JVP trace's tracers as its own (perturbation confusion)"),
    M("ad_linear_jvp_any_zero", "ad", AD,
      "if all(type(tangent) is Zero for tangent in tangents):",
      "if any(type(tangent) is Zero for tangent in tangents):",
      "linear_jvp returns a zero tangent when any operand's tangent is zero"),
]

BATCHING_RULES = [
    M("b_broadcast_ignores_bdim", "batching", BATCHING,
      "if all(core.definitely_equal_shape(shape, x.shape) and d == dim",
      "if all(core.definitely_equal_shape(shape, x.shape)",
      "broadcast_batcher binds operands of equal shape with different batch dims as they are"),
    M("b_broadcast_wrong_out_dim", "batching", BATCHING,
      "    return (out, (0,) * len(out)) if prim.multiple_results else (out, 0)\n\ndef _handle_scalar",
      "    return (out, (0,) * len(out)) if prim.multiple_results else (out, dim)\n\ndef _handle_scalar",
      "broadcast_batcher's general path reports the first operand's batch dim, not 0"),
    M("b_reducer_shifts_equal_axis", "batching", BATCHING,
      "axes = tuple(np.where(np.less(axes, bdim), axes, np.add(axes, 1)))",
      "axes = tuple(np.where(np.less_equal(axes, bdim), axes, np.add(axes, 1)))",
      "reducer_batcher does not shift a reduced axis equal to the batch dim"),
    M("b_matchaxis_moves_backwards", "batching", BATCHING,
      "return moveaxis(x, src, dst)",
      "return moveaxis(x, dst, src)",
      "matchaxis moves the batch axis from dst to src"),
    M("b_matchaxis_broadcast_negative_axis", "batching", BATCHING,
      "canonicalize_axis(dst, np.ndim(x) + 1),",
      "canonicalize_axis(dst, np.ndim(x)),",
      "matchaxis canonicalizes a negative out_axes of an unbatched output against the wrong rank"),
    M("b_add_batched_moves_wrong_operand", "batching", BATCHING,
      "    x = moveaxis(x, bdx, bdy)\n    return add_jaxvals(x, y), bdy",
      "    y = moveaxis(y, bdy, bdx)\n    return add_jaxvals(x, y), bdy",
      "add_any's batching rule moves y to x's batch dim but reports y's"),
]

PRIMITIVE = [
    M("p_tanh_jvp", "primitive", LAX,
      "else mul(add(g, mul(g, ans)), sub(_one(x), ans)),",
      "else mul(add(g, mul(g, ans)), add(_one(x), ans)),",
      "tanh's JVP uses (1+y)(1+y) instead of (1+y)(1-y)"),
    M("p_logistic_jvp", "primitive", LAX,
      "else mul(g, mul(ans, sub(_one(ans), ans))),",
      "else mul(g, sub(_one(ans), ans)),",
      "logistic's JVP drops the factor y (uses 1-y)"),
    M("p_integer_pow_jvp", "primitive", LAX,
      "return mul(g, mul(_const(x, y), integer_pow(x, y - 1)))",
      "return mul(g, mul(_const(x, y - 1), integer_pow(x, y - 1)))",
      "integer_pow's JVP (|y| > 2 or y < 0) uses the coefficient y-1"),
    M("p_max_jvp_to_loser", "primitive", LAX,
      "ad.defjvp2(max_p,\n           lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),",
      "ad.defjvp2(max_p,\n           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)),",
      "max's JVP routes the first operand's tangent where the second one wins"),
    M("p_div_jvp_sign", "primitive", LAX,
      "lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))",
      "lambda g, x, y: mul(mul(g, x), integer_pow(y, -2)))",
      "div's JVP wrt the divisor has the wrong sign"),
    M("p_dot_transpose_contract_order", "primitive", LAX,
      "x_contract_sorted_by_y = list(np.take(x_contract, np.argsort(y_contract)))",
      "x_contract_sorted_by_y = list(x_contract)",
      "dot_general's transpose ignores the order of the other side's contracting dims"),
    M("p_transpose_transpose_perm", "primitive", LAX,
      "lambda t, _, permutation: [transpose(t, np.argsort(permutation))])",
      "lambda t, _, permutation: [transpose(t, permutation)])",
      "transpose's transpose applies the permutation instead of its inverse"),
    M("p_select_transpose_swapped", "primitive", LAX,
      "ct0 = select(which, zeros, ct) if ad.is_undefined_primal(cases[0]) else None",
      "ct0 = select(which, ct, zeros) if ad.is_undefined_primal(cases[0]) else None",
      "select_n's (boolean) transpose routes case 0's cotangent where case 1 was chosen"),
    M("p_chooser_jvp_ties_summed", "primitive", LAX,
      "return div(reduce_sum(mul(g, location_indicators), axes), counts)",
      "return reduce_sum(mul(g, location_indicators), axes)",
      "reduce_max/min's JVP sums tied tangents instead of averaging them"),
    M("p_unbroadcast_scalar", "primitive", LAX,
      "    return reduce_sum(x, list(range(len(x_shape))))",
      "    return reduce_sum(x, list(range(1, len(x_shape))))",
      "_unbroadcast to a scalar keeps the leading axis"),
    M("p_sub_transpose_sign", "primitive", LAX,
      "return [_unbroadcast(x_aval, t), _unbroadcast(y_aval, neg(t))]",
      "return [_unbroadcast(x_aval, t), _unbroadcast(y_aval, t)]",
      "sub's transpose forgets to negate the subtrahend's cotangent"),
]

CONTROL_FLOW = [
    M("cf_scan_transpose_same_direction", "control_flow", LOOPS,
      "*trans_in, reverse=not reverse, length=length, jaxpr=jaxpr_trans,",
      "*trans_in, reverse=reverse, length=length, jaxpr=jaxpr_trans,",
      "the transposed scan runs in the same direction as the forward scan"),
    M("cf_scan_linearize_tangent_reversed", "control_flow", LOOPS,
      "*int_res, *nz_tangents, *ext_res, jaxpr=tangent_jaxpr, reverse=reverse,",
      "*int_res, *nz_tangents, *ext_res, jaxpr=tangent_jaxpr, reverse=not reverse,",
      "scan's linearization runs the tangent scan in the opposite direction"),
    M("cf_scan_batched_ys_dim", "control_flow", LOOPS,
      "ys_bdims = [1 if b else None for b in ys_batched]",
      "ys_bdims = [0 if b else None for b in ys_batched]",
      "scan's batching rule reports the stacked outputs batched at 0 (they are at 1)"),
    M("cf_scan_no_hoisting", "control_flow", LOOPS,
      "consts + others, instantiate=[True] * num_known_outs + [False] * num_res)",
      "consts + others, instantiate=[True] * num_known_outs + [True] * num_res)",
      "loop-invariant scan residuals are no longer hoisted (stacked per iteration)"),
    M("cf_while_jvp_fixpoint_short", "control_flow", LOOPS,
      "  for _ in range(1 + len(carry_nz)):\n    body_nonzeros = bconst_nz + carry_nz",
      "  for _ in range(len(carry_nz)):\n    body_nonzeros = bconst_nz + carry_nz",
      "while_loop's JVP fixpoint has one iteration too few (no last pass after a promotion)"),
    M("cf_cond_jvp_all_branches", "control_flow", COND,
      "out_nz = [any(nz) for nz in zip(*branches_out_nz)]",
      "out_nz = [all(nz) for nz in zip(*branches_out_nz)]",
      "cond's JVP: an output's tangent is nonzero only if nonzero in every branch"),
    M("cf_cond_linearize_all_branches", "control_flow", COND,
      "nzs_out = map(any, zip(*nzs_out))",
      "nzs_out = map(all, zip(*nzs_out))",
      "cond's linearization: an output's tangent is nonzero only if nonzero in every branch"),
    M("cf_cond_vmap_selects_inactive", "control_flow", COND,
      "predicate = lax.eq(index, lax._const(index, i))",
      "predicate = lax.ne(index, lax._const(index, i))",
      "vmap of cond with a batched index feeds live operands to the branches NOT taken"),
]

PJIT_RULES = [
    M("j_linearize_no_input_forwarding", "pjit", PJIT,
      "in_fwd = pe._jaxpr_forwarding(primal_jaxpr.jaxpr)",
      "in_fwd = [None] * len(primal_jaxpr.out_avals)",
      "jit's linearization no longer forwards inputs returned as outputs"),
    M("j_partial_eval_no_input_forwarding", "pjit", PJIT,
      "in_fwd: list[int | None] = pe._jaxpr_forwarding(known_jaxpr.jaxpr)",
      "in_fwd: list[int | None] = [None] * len(known_jaxpr.out_avals)",
      "jit's partial eval no longer forwards inputs returned as outputs"),
    M("j_linearize_no_output_forwarding", "pjit", PJIT,
      "out_fwd = [None] * num_primals_out + [idx_map.get(id(v)) for v in res_vars]",
      "out_fwd = [None] * num_primals_out + [None for v in res_vars]",
      "jit's linearization returns residuals that are primal outputs a second time"),
    M("j_dce_drops_partly_used", "pjit", PJIT,
      "  if not any(used_outputs) and not pe.has_effects(eqn):\n    return [False] * len(eqn.invars), None\n\n  dced",
      "  if not all(used_outputs) and not pe.has_effects(eqn):\n    return [False] * len(eqn.invars), None\n\n  dced",
      "jit's DCE rule deletes a jit whose outputs are only partly used"),
]

MUTANTS: list[Mutant] = (REMAT2 + REMAT3 + PARTIAL_EVAL + AD_RULES + BATCHING_RULES + PRIMITIVE
                         + CONTROL_FLOW + PJIT_RULES)


def by_name() -> dict[str, Mutant]:
    table = {m.name: m for m in MUTANTS}
    assert len(table) == len(MUTANTS), "duplicate mutant names"
    return table


def select(names: str | None) -> list[Mutant]:
    """Mutants named in a comma-separated list (None or "all": every one);
    a class name selects its whole class."""
    if not names or names == "all":
        return list(MUTANTS)
    table = by_name()
    out = []
    for n in (s.strip() for s in names.split(",") if s.strip()):
        if n in CLASSES:
            out += [m for m in MUTANTS if m.cls == n and m not in out]
        elif n in table:
            out.append(table[n])
        else:
            raise KeyError(f"unknown mutant or class {n!r}")
    return out
