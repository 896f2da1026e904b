"""Known divergences of jax 0.10.2 from the spec.

Each entry has a predicate as narrow as the defect: it holds only when
JAX's answer is *exactly* what the named defect produces (computed by the
spec with the defect modelled), never just "they differ". A check that
matches one is reported in the Report as a known divergence, never hidden;
anything else is a Mismatch. docs/divergences.md is generated from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import re

import numpy as np

import spec
from spec import policies as sp
from spec.ir import ArrayType, Literal, Program, Var, is_complex, is_float, subprograms
from spec.jvp import LINEARIZATION_ERROR
from spec.partial_eval import looked_through_value
from spec.remat import COMPLEX_RESIDUAL_ERROR, remat_p

from oracle.errors import Unsupported
from oracle.jax_api.versions import ALL, REMAT3, Releases, holds
from oracle.normalizations import NORMALIZATIONS, normalize
from oracle.program_variants import (all_eqns, checkpoint_dead_code_live, dead_code_hoisted, constant_transposes_bitcast, effectful_loops_held_constant, jits_inlined, float_round_trips_out, has_primitive, tangents_read, unread_operands_out, zero_tangents, inline_checkpoints, map_policies, policies_in,
                                     unread_effectful_checkpoints_emptied, unused_checkpoint_outputs_out,
                                     unused_linearize_outputs_out)
from oracle.remat3_model import (REMAT3_DEFECTS, float0_tangent_outputs, producer_sources, remat3_barrier_model,
                                 remat3_model, remat3_recognises, remat3_variants, remats)
from oracle.conventions import AS_IS
from oracle.jax_api.flags import flags
from spec.barriers import known_checkpoint_barriers, optimization_barriers
from spec.core import PrimitiveError, has_effects, jax_facts
from spec.partial_eval import dce, source_of
from spec.prims_call import call_p
from spec.prims_control import WHILE_TRANSPOSE_ERROR, BranchTypesError, cond_p
from spec.prims_equinox import BATCHED_AS_VPRIMS
from spec.prims_scan import scan_p
from spec.remat import names_in
from spec.semantics import following
import collections
import operator
import itertools
import functools
import dataclasses


@dataclass
class Context:
    """What a divergence predicate may look at."""
    implementation: str
    property: str
    policy: Any                      # the spec policy checked (None: as written)
    program: Program                 # the spec program
    jax_residuals: list | None = None     # (type, source); for vjp_leaves JAX's (shape, dtype) leaves
    jax_names: list | None = None         # JAX's residual list as saved_residuals names it (not normalised)
    spec_residuals: list | None = None
    error: BaseException | None = None
    barriers: tuple | None = None    # (spec predicts, JAX has)
    diff: list | None = None         # stack_barriers: the inputs the linearize layer differentiates
    spec_error: BaseException | None = None   # the spec raised where JAX computed
    spec_error_too: BaseException | None = None   # the spec raised too, for another reason than JAX's `error`
    without_dead_code: Callable | None = None     # a stack's: () -> its spec program, each level's dead code removed
    checked_program: Program | None = None   # where `program` is a stack level's: the checked function's own
    linear_barriers_of: Callable | None = None   # stack_barriers: checked program -> the spec's count for it
    values_agree_for: Callable | None = None     # vjp: (variant, outputs gained) -> JAX's values are its
    numbers_agree_for: Callable | None = None    # a numeric property's: variant -> JAX's numbers are its
    numeric_program: Callable | None = None      # a numeric property's: checked program -> the spec program compared
    ad_depth: int = 1                # how many differentiation levels the property's program nests

    @property
    def user_program(self) -> Program:
        """The program of the checked function itself (a stack level's
        program is built from it, and may have lost what JAX still traced)."""
        return self.program if self.checked_program is None else self.checked_program

    def residuals_with(self, transform: Callable | None = None, **model) -> list:
        """The spec's residual list for a modelled program: every
        checkpoint's policy mapped by `transform`, or, with `model` flags,
        `remat3_model(program, **model)`. Under remat3, values saved out of
        a nested checkpoint are named by their producer (see
        `producer_sources`)."""
        prog = remat3_model(self.program, **model) if model else map_policies(self.program, transform)
        if self.implementation == "remat3":
            return producer_sources(prog)
        return _listed_residuals(prog)

    def baselines(self) -> list:
        """The residual lists that an additive divergence (a literal left
        out, a zero or a factor saved, entries out of order) is measured
        against: the spec's, and under remat3 the remat3 model's (every
        defect on) of the program and of each of its remat3 variants
        (`remat3_variants`). So an additive divergence composes with
        remat3's modelled defects (found by the fuzzer: a jit's saved zero
        beside a checkpoint whose non-float output keeps its tangents
        live), and under remat2 with jax 0.10.2's stub
        save_anything_except_these_names (found by a pristine campaign,
        05909e1ead: a jit's saved zero beside it)."""
        if "_baselines" not in self.__dict__:
            lists = [self.spec_residuals] + (self.remat3_lists() if self.implementation == "remat3" else
                                             self._kept_outputs_lists() + self._stubbed_lists())
            lists = [b for b in lists if b is not None]
            self._baselines = [b for i, b in enumerate(lists) if b not in lists[:i]]
        return self._baselines

    def baselines_with_python_type_literals(self) -> list:
        """The baselines, and each composed with literal-residuals-depend-on-
        the-constant-s-python-type: without the `from a literal` entries
        JAX's list lacks (for a divergence that says nothing about literals:
        found on 0.6.2, a scan's saved zero carry, its unused output's
        residuals and a numpy scalar at once)."""
        lists = self.baselines() + [self._literals_jax_lacks_dropped(b) for b in self.baselines()]
        return [b for i, b in enumerate(lists) if b not in lists[:i]]

    def _literals_jax_lacks_dropped(self, residuals: list) -> list:
        """`residuals` without the `from a literal` entries JAX's list lacks."""
        spare = collections.Counter(r for r in self.jax_residuals or () if r[1] == "from a literal")
        out = []
        for r in residuals:
            if r[1] == "from a literal":
                if spare[r] <= 0:
                    continue
                spare[r] -= 1
            out.append(r)
        return out

    def _stubbed_lists(self) -> list:
        """The spec's list with every save_anything_except_these_names
        policy jax 0.10.2's stub (save-anything-except-these-names-is-a-stub
        active and such a policy in the program), else none."""
        if (not any(_as_stubbed(p) != p for p in policies_in(self.program))
                or not _active("save-anything-except-these-names-is-a-stub")):
            return []
        return [self.residuals_with(_as_stubbed)]

    def _kept_outputs_lists(self) -> list:
        """Before direct linearization (linearize-keeps-unused-outputs-of-
        staged-equations and linearize-computes-tangents-of-unread-operands
        active), the spec's lists of the program with its staged equations'
        unused outputs used, with their unread operands, and both (found on
        jax 0.4.25: an unread operand's tangent beside integer_pow's factor)."""
        if self.spec_residuals is None or not _active("linearize-keeps-unused-outputs-of-staged-equations"):
            return []
        kept, n = unused_linearize_outputs_out(self.program)
        programs = [kept] if n else []
        if _active("linearize-computes-tangents-of-unread-operands"):
            programs += [v for v, m in (unread_operands_out(p) for p in [self.program] + programs) if m]
        return [dataclasses.replace(self, program=p).residuals_with(lambda q: q) for p in programs]

    def jvp_bodies_where_needed(self, flags: dict) -> list:
        """residuals_with(**flags); where the model's linearized checkpoint
        bodies have no linearization (a generic reduce_window) though JAX
        computed, with the bodies JVP'd instead: remat3 JVPs a checkpoint it
        meets through a JVP (RematTraced.jvp; a while body, which
        _while_loop_jvp JVPs as a jaxpr: found by the fuzzer), and only
        linearizes one it meets through a linearization."""
        try:
            return self.residuals_with(**flags)
        except ValueError as e:
            if str(e) != LINEARIZATION_ERROR or not flags.get("linearized_body"):
                raise
            return self.residuals_with(**dict(flags, linearized_body=False))

    def remat3_lists(self) -> list:
        """The remat3 model's residual lists (every defect on) of the
        program and of each of its `remat3_variants` (a variant whose
        modelled policy is refused has none)."""
        if "_remat3_lists" not in self.__dict__:
            flags = dict.fromkeys(REMAT3_DEFECTS, True)
            self._remat3_lists = []
            for variant in remat3_variants(self.program):
                try:
                    self._remat3_lists.append(dataclasses.replace(self, program=variant).jvp_bodies_where_needed(flags))
                except sp.PolicyCombinationError:
                    pass
        return self._remat3_lists

    def remat3_defect_mattered(self, defect: str) -> bool:
        """JAX's residuals are exactly remat3's modelled ones
        (`remat3_model`), and `defect` (one of its flags) is the one that
        explains the difference from the spec: the first, in
        REMAT3_DEFECTS order, whose removal (together with the removal of
        those before it) changes the modelled answer. One defect alone
        explains most differences; where two each would (say remat3's
        policy view and its treatment of custom rules, which both leave a
        custom rule's values unsaved), the earlier one is named."""
        if self.implementation != "remat3" or self.property != "residuals":
            return False
        if "_remat3_attribution" not in self.__dict__:
            self._remat3_attribution = self._attribute_remat3()
        return self._remat3_attribution == defect

    def _attribute_remat3(self):
        try:
            return self._attribute_remat3_defect()
        except ValueError as e:     # a model with no linearization: no defect explains residuals
            if str(e) != LINEARIZATION_ERROR:
                raise
            return None

    def _attribute_remat3_defect(self):
        # in a jit, up to order where the full model's list is not JAX's
        # exactly: remat3's residuals in a jit come in the order its jit
        # rule's tangent trace first reads them, which the model may not
        # reproduce (found by a pristine nightly, 3c7806fedf: a name saved by
        # everything_saveable after the jit's own residual); where it does,
        # exactly, so that a defect that moves them (rounded_copies) is found
        # (a pristine campaign, ee6dbe7c25). JAX's
        # list is renamed against each modelled one, as the check renamed it
        # against the spec's, which may lack the entry: a checkpoint's output
        # that remat3's forward pass computes by its body as written (`output
        # of cummax`, where the model names its JVP's primal, `output of rev`),
        # saved by a later checkpoint whose policy remat3 does not ask (found
        # by a pristine campaign, 24ae1a588d)
        if self.jax_residuals is None:     # JAX raised: no list to compare
            return None
        flags = dict.fromkeys(REMAT3_DEFECTS, True)
        full = self.jvp_bodies_where_needed(flags)
        exactly = _normalised_against(self, full) == full
        same = lambda model: _as_threaded_out(  # noqa: E731
            *(_constants_by_type(lst) if not exactly else lst for lst in (_normalised_against(self, model), model)),
            not exactly and has_primitive(self.program, "call"))
        if not same(full):
            return None
        for d in REMAT3_DEFECTS:
            flags[d] = False
            try:
                if not same(self.jvp_bodies_where_needed(flags)):
                    if d in _UNATTRIBUTED_REMAT3_DEFECTS:
                        flags[d] = True
                        continue
                    return d
            except sp.PolicyCombinationError:   # without the defect the policy is refused,
                return d                        # as JAX refuses it: JAX did not, so d explains it
        return None


# the remat3 defects no first-order residual list is attributed to, kept on
# where removing them changes it: barriered_primals, the barrier remat3's
# backward pass reads its primals through (`rem(*optimization_barrier(
# primals))`), whose effect on which values are saved is at the next order;
# at the first it only decides that a checkpoint's output is read outside
# every checkpoint, which names it (remat3-names-nested-checkpoint-values-
# by-producer: found by a pristine nightly, 823a348773, where removing it
# renamed a residual and no divergence claimed it). Where removing it
# changes nothing it stays removed, so that inputs_first, whose order its
# barrier imposes too, is found.
_UNATTRIBUTED_REMAT3_DEFECTS = ("barriered_primals",)


def _remat3_float0_tangents(ctx):
    """JAX's residuals are the full remat3 model's (`remat3_model`, every
    defect on) of the program whose checkpoints' float outputs are live as
    above, and that liveness changes the model's answer."""
    if ctx.implementation != "remat3" or ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    exposed, n, _ = float0_tangent_outputs(ctx.program, [True] * len(ctx.program.outputs))
    if not n:
        return False
    plain = producer_sources(remat3_model(ctx.program))
    # and, the exposed outputs making a checkpoint live, with its nested checkpoints'
    # unused outputs used (remat3-saves-for-unused-checkpoint-outputs; found by a campaign),
    # those it forwards from its inputs or not, as that divergence's predicate tries them
    # (found by a pristine nightly, 01778ea6f4)
    variants = [exposed] + [used for used, n in (unused_checkpoint_outputs_out(exposed, forwarded=forwarded)
                                                 for forwarded in (True, False)) if n]
    # exposed through a jit, the jit returns them, and its residuals move (`_as_threaded_out`:
    # found by a pristine nightly, 1ddf79ad84, a jitted program)
    through_calls = has_primitive(ctx.program, "call")
    return any(_as_threaded_out(ctx.jax_residuals, m, through_calls) and m != plain
               for m in [producer_sources(remat3_model(p)) for p in variants])


def _remat3_reverse_raises_as_modelled(ctx):
    """JAX raised NotImplementedError in reverse mode under remat3 where the
    spec computes, and the remat3 model's reverse pass raises the same
    error, word for word: remat3 pulls an instantiated (zero) cotangent back
    into every float input of a checkpoint (RematTraced.vjp_bwd writes into
    every input's accumulator; RematTraced.linearized instantiates the
    tangents), so the upstream transposes run even for inputs the body never
    differentiates, and one JAX lacks (select_and_gather_add with window
    dilation: _select_and_gather_add_transpose) raises."""
    if (ctx.implementation != "remat3" or ctx.property not in ("vjp", "prevent_cse", "second_order")
            or not isinstance(ctx.error, NotImplementedError) or ctx.spec_error is not None):
        return False
    # and with its checkpoints' unused outputs used: remat3's backward pass of
    # a checkpoint runs whole, for an unused output too (a nested checkpoint's
    # unused reduce_window_max: found by a pristine nightly, 8cc0be00a1)
    used, n_unused = unused_checkpoint_outputs_out(ctx.program)
    return any(_model_reverse_raises(p, ctx.error) for p in [ctx.program] + ([used] if n_unused else []))


def _model_reverse_raises(prog: Program, error: BaseException) -> bool:
    """The remat3 model's reverse pass of `prog` raises `error`, word for
    word, and its forward pass does not (that would be another defect's)."""
    model = remat3_model(prog)
    try:
        spec.jvp(model)
    except NotImplementedError:
        return False
    try:
        spec.vjp_program(model)
    except NotImplementedError as e:
        return str(e) == str(error)
    return False


def _remat3_perturbs_what_the_spec_holds_zero(ctx):
    """The spec refused a rule (PrimitiveError) where JAX computed under
    remat3, and the remat3 model computes that property's program: remat3
    marks every output tangent of a checkpoint nonzero
    (hijax._call_hi_primitive_linearize: `nzs_out = ... else True`), a zero
    one too, so a rule downstream that the spec meets with a symbolic-zero
    operand (pad transposed for its padding value alone) meets a perturbed
    one (found by a pristine nightly, 1201bbdba3: a pad of a checkpoint's
    stop_gradient'ed output). JAX's values are not compared then."""
    if (ctx.implementation != "remat3" or ctx.error is not None
            or not isinstance(ctx.spec_error, PrimitiveError)):
        return False
    program_of = ctx.numeric_program or spec.vjp_program
    try:
        program_of(remat3_model(ctx.user_program))
    except Exception:       # noqa: BLE001 -- the model refuses too: not this defect
        return False
    return True


def _remat3_differentiates_constants_as_modelled(ctx):
    """JAX raised NotImplementedError (or the while loop's transpose error:
    at third order, through the barrier of a checkpoint's backward pass,
    found by a pristine nightly, f2a46224f0) under remat3 where the spec
    computes, and the remat3 model's JVP raises it word for word (every property:
    reverse mode and saved_residuals linearize through it): remat3
    differentiates a checkpoint's body with respect to the constants it
    closes over too, and instantiates the tangents of the operands it never
    reads, so a rule declared unimplemented for a perturbed operand runs
    (scatter-mul's updates with duplicate indices; at second order, the
    forward mode of a pullback: gammainc(a, x) with a constant, whose
    pullback holds igamma_grad_a(a, x), which has no derivative; a
    numeric property's own program too: a stack's linearize o grad of
    igamma's output passed to a checkpoint that never reads it, found by a
    pristine campaign, ed68629a1a; or of the program with the checkpoint
    outputs nothing reads made outputs, whose backward remat3 runs: also
    where only a cond branch's integer output, the checkpoint's, keeps its
    linearization live, found by a pristine nightly, 63dc385fd3)."""
    refused = isinstance(ctx.error, NotImplementedError) or (isinstance(ctx.error, ValueError)
                                                            and str(ctx.error) == WHILE_TRANSPOSE_ERROR)
    if ctx.implementation != "remat3" or not refused or ctx.spec_error is not None:
        return False
    return _remat3_model_raises(ctx, lambda e: type(e) is type(ctx.error) and str(e) == str(ctx.error))


def _remat3_model_raises(ctx, raised: Callable) -> bool:
    """Building the property's program of the remat3 model raises an error
    `raised` accepts: its JVP, and a numeric property's own program (a
    stack's), also of the program with the checkpoint outputs nothing
    reads made outputs."""
    differentiated = [lambda: spec.jvp(remat3_model(ctx.program))]
    if ctx.numeric_program is not None:
        differentiated.append(lambda: ctx.numeric_program(remat3_model(ctx.user_program)))
        # remat3 runs a checkpoint's backward whole, an unread output's too
        # (remat3-saves-for-unused-checkpoint-outputs): a stack's second
        # order then differentiates what that output's backward computes
        # (igamma_grad_a; found by a pristine nightly, b2c4742027)
        used, n = unused_checkpoint_outputs_out(ctx.user_program)
        if n:
            differentiated.append(lambda: ctx.numeric_program(remat3_model(used)))
    for differentiate in differentiated:
        try:
            differentiate()
        except Exception as e:  # noqa: BLE001 -- the model's refusal, judged by `raised`
            if raised(e):
                return True
    return False


def _remat3_second_order_skips_dead_forward_code(ctx):
    """The spec's second-order program raised a primitive's missing JVP
    rule under remat3 where JAX computed, and the program built from the
    pullback without its dead code computes: remat3's forward pass runs a
    checkpoint's body as written, so the dead residual a JVP rule makes for
    an unread tangent (igammac's igamma_grad_a) is never in it for
    jax.jvp of the pullback to differentiate, where remat2's and the
    spec's are (found by a pristine nightly, 3f72b1ac83: a checkpoint of
    igammac in a scan body, its output unread). JAX's values are not
    compared then."""
    error = ctx.spec_error
    if (ctx.implementation != "remat3" or ctx.property != "second_order" or ctx.error is not None
            or not isinstance(error, NotImplementedError) or not str(error).startswith("Differentiation rule for")):
        return False
    prog = ctx.user_program
    nonzeros = [is_float(t.dtype) for t in prog.in_types] + [False] * sum(is_float(t.dtype) for t in prog.out_types)
    try:
        spec.jvp_program(spec.vjp_program(prog), nonzeros=nonzeros)
    except NotImplementedError:
        return False
    return True


def _jit_keeps_dead_jvp_residuals(ctx):
    """JAX raised a primitive's missing differentiation rule, or a vectorized
    batcher's bare AssertionError, where the spec computes a numeric
    property (or the stack a barrier count linearizes), and the spec raises
    it word for word for the program with its jits inlined: before jax
    0.7.0 a jit's linearization keeps its body's dead code in its known
    half, the value a JVP rule makes for a tangent nothing reads
    (igammac's igamma_grad_a), which a second differentiation meets, as it
    does (and the spec does) outside jits (found by a campaign on 0.4.36,
    5d4701406b); or a dead tie of two values a vmap of the gradient batches
    along different axes (found by a release campaign on 0.4.25,
    015127e148, vmap o grad)."""
    return _dead_code_raises_as_jax(ctx, lambda: jits_inlined(ctx.user_program))


def _cond_keeps_dead_jvp_residuals(ctx):
    """... a cond branch's, or a vectorized batcher's AssertionError (a later
    vmap batching that dead code: a tie of an unbatched and a batched value,
    found by a campaign on 0.4.25, aced9745e1, vmap o grad): the spec
    raises it word for word for the program with its branches' dead code
    hoisted out of the conds (jits inlined too): before jax 0.7.1 cond's
    partial evaluation (partial_eval_jaxpr_nounits) keeps a branch's dead
    code, the values a JVP rule makes for it in the known branch (found by
    a campaign on 0.6.2, da8efa446b: an igammac a branch computes unread)."""
    return _dead_code_raises_as_jax(ctx, lambda: _control_flow_dead_code_hoisted(ctx.user_program))


def _scan_keeps_dead_jvp_residuals(ctx):
    """... a scan body's: the spec raises it word for word for the program
    with its scan bodies' dead code hoisted out of the scans (jits inlined
    too): before jax 0.7.0 scan's partial evaluation (_scan_partial_eval,
    partial_eval_jaxpr_nounits on the JVP'd body) keeps the body's dead
    code, the values a JVP rule makes for it in the known body (found by a
    release campaign on 0.4.25, b16d1a014e: an igamma of a scan's consts
    nothing reads)."""
    return _dead_code_raises_as_jax(ctx, lambda: _control_flow_dead_code_hoisted(ctx.user_program))


def _control_flow_dead_code_hoisted(prog: Program) -> tuple[Program, int]:
    """`prog` with its jits inlined and the dead code of its conds' branches
    and scans' bodies hoisted out of them (`dead_code_hoisted`), innermost
    first, so dead code nested in both reaches the top level (a dead
    igammac in a scan in a cond branch in a scan: found by a release
    campaign on 0.4.25, 20ae3a20e7, linearize o grad), and how many places
    changed (none: the variant changes nothing)."""
    inlined, n = jits_inlined(prog)
    hoisted, m = dead_code_hoisted(inlined, out_of=(cond_p, scan_p))
    return hoisted, m and n + m


def _remat3_forward_runs_dead_checkpoint_code(ctx) -> bool:
    """Under remat3 JAX raised where the spec computes, and the spec raises
    it word for word building the property's program for the checked
    program with its checkpoints' dead code made live
    (`checkpoint_dead_code_live`): remat3 runs a checkpoint's body as
    written, its dead code and that code's derivative too, so an outer
    vmap batches them (a ragged_dot_general: found by a pristine nightly,
    410783b9f9)."""
    build = ctx.numeric_program
    if ctx.implementation != "remat3" or ctx.error is None or ctx.spec_error is not None or build is None:
        return False
    return _variant_raises(checkpoint_dead_code_live(ctx.user_program), build, type(ctx.error), str(ctx.error))


def _dead_code_raises_as_jax(ctx, variant: Callable) -> bool:
    """JAX raised a primitive's missing differentiation rule or a bare
    AssertionError where the spec computes, and the spec raises it word for
    word building the property's program (a numeric property's, or the
    stack a barrier count linearizes: linearize o grad, found by a campaign
    on 0.6.2, 4ef9b2d59c) for `variant()`, the program with the dead code
    JAX keeps made live (`_variant_raises`)."""
    e = ctx.error
    missing_rule = isinstance(e, NotImplementedError) and str(e).startswith("Differentiation rule for")
    build = ctx.numeric_program or ctx.linear_barriers_of
    if not ((missing_rule or type(e) is AssertionError) and ctx.spec_error is None and build is not None):
        return False
    return _variant_raises(variant(), build, type(e), str(e))


def _variant_raises(variant: tuple, build: Callable, error: type, message: str) -> bool:
    """A program variant (program, how many places it changed) that changed
    something, whose program `build` refuses with `error` saying `message`
    (refusing otherwise, it does not explain JAX's error: the spec's
    batcher refusing a jits-inlined variant where JAX raised a missing
    rule, found by a release campaign on 0.4.25, 29a0207e7b)."""
    prog, n = variant
    if not n:
        return False
    try:
        build(prog)
    except Exception as e:      # noqa: BLE001  (any refusal; only JAX's own explains)
        return isinstance(e, error) and str(e) == message
    return False


def _differentiates_sub_programs_whole(ctx):
    """JAX raised a primitive's missing differentiation rule where the spec
    raised something else first, and the spec following linearization by
    JVP then partial evaluation (spec.semantics: direct_linearization=False)
    raises JAX's word for word: before direct linearization a jit's, cond's
    or scan's JVP rule differentiates its sub-programs whole, so a missing
    derivative there raises before an earlier equation's policy is asked
    (found on 0.6.2 by the test of pristine campaign finding 17239663d5)."""
    e = ctx.error
    if not (isinstance(e, NotImplementedError) and str(e).startswith("Differentiation rule for")
            and ctx.spec_error_too is not None):
        return False
    with following(direct_linearization=False):
        return any(_variant_raises((ctx.user_program, 1), build, NotImplementedError, str(e))
                   for build in _spec_answers(ctx))


def _spec_answers(ctx) -> list:
    """How the spec answers the property, as functions of the checked
    program: its numeric program (a stack's too), and for the residuals
    property the saved residuals of the property's program."""
    builds = [ctx.numeric_program] if ctx.numeric_program is not None else []
    if ctx.property == "residuals":
        builds.append(lambda _: spec.saved_residuals(ctx.program))
    return builds


def _remat3_linearizes_checkpoint_bodies(ctx):
    """JAX raised its linearization error in reverse mode under remat3 where
    the spec computes, and the remat3 model's reverse pass raises it word
    for word: remat3 linearizes a checkpoint's body equation by equation
    (direct linearize), so an equation whose JVP has no linearization (the
    generic reduce_window's) fails even where nothing reads its outputs;
    remat2 partially evaluates the body's JVP, and the unused equation is
    dead code. Any property that linearizes, a stack of transformations
    with a grad, vjp or linearize layer included (found by a pristine
    campaign, 32fae7ca1b). At second order, the outer differentiation
    meets a checkpoint's body inline (RematTraced's linearize rule emits
    it), so the property's program of the checked function with its
    checkpoints inlined raising it word for word explains it too (a dead
    window in a scan, which a first-order remat3 computes; pristine nightly
    finding 6acf366983, linearize o grad)."""
    if (ctx.implementation != "remat3" or ctx.spec_error is not None
            or ctx.property not in ("residuals", "vjp_leaves", "prevent_cse", "vjp", "second_order", "stack")
            or not isinstance(ctx.error, ValueError) or str(ctx.error) != LINEARIZATION_ERROR):
        return False
    linearized = [lambda: spec.vjp_program(remat3_model(ctx.program))]
    if ctx.numeric_program is not None and ctx.ad_depth >= 2:
        linearized.append(lambda: ctx.numeric_program(inline_checkpoints(ctx.user_program, keep_top_level=False)))
    for linearize in linearized:
        try:
            linearize()
        except ValueError as e:
            if str(e) == LINEARIZATION_ERROR:
                return True
    return False


def _xla_folds_constant_transposes_as_bitcasts(ctx) -> bool:
    """JAX's numbers are the spec's for the program with every transpose of
    a constant read as a reshape of it (`constant_transposes_bitcast`)."""
    if ctx.numbers_agree_for is None:
        return False
    variant, n = constant_transposes_bitcast(ctx.user_program)
    return n > 0 and ctx.numbers_agree_for(variant)


def _xla_drops_float_round_trips(ctx) -> bool:
    """JAX's numbers are the spec's for the program with every cast of a
    float to a narrower float and straight back removed
    (`float_round_trips_out`)."""
    if ctx.numbers_agree_for is None:
        return False
    variant, n = float_round_trips_out(ctx.user_program)
    return n > 0 and ctx.numbers_agree_for(variant)


def _cond_tangent_zeros_on_device(ctx):
    """The spec refused a cond whose branches return types that differ in
    memory spaces only (BranchTypesError), and JAX computed: its cond JVP
    instantiates a host output's zero tangent on the device, and
    _cond_abstract_eval takes branch 0's types unchecked."""
    if not isinstance(ctx.spec_error, BranchTypesError):
        return False
    first, other = ctx.spec_error.types
    plain = lambda types: [t.with_memory_space(None) for t in types]
    return first != other and plain(first) == plain(other)


@dataclass(frozen=True)
class Divergence:
    """`repro` is a snippet run after the preamble REPRO_PREAMBLE."""
    name: str
    reason: str
    repro: str
    applies: Callable[[Context], bool] = field(compare=False)
    releases: Releases = ALL   # the JAX releases it holds for (verified by its repro on each)
    flag: str | None = None    # a JAX flag it needs (a semantics switch, e.g. direct linearize)
    flag_value: bool = True    # ... with this value (a flag the release lacks is off)

    def active(self) -> bool:
        """It can hold on the installed JAX: its release, its flag as needed."""
        return holds(self.releases) and (self.flag is None or flags().get(self.flag, False) == self.flag_value)


REPRO_PREAMBLE = ("import jax, jax.numpy as jnp\n"
                  "from jax.ad_checkpoint import checkpoint_name, print_saved_residuals\n")


def _residuals_equal_to(ctx: Context, transform) -> bool:
    return ctx.jax_residuals == ctx.residuals_with(transform)


def _remat3_opaque_zeros(ctx):
    """remat3 does not see that a checkpoint's output tangent is zero when
    the body computes it from primals alone (e.g. integer_pow y=0): it
    saves what a nonzero tangent would need."""
    return ctx.remat3_defect_mattered("opaque_outputs")


def _remat3_nested_opaque(ctx):
    return ctx.remat3_defect_mattered("nested_opaque")


def _remat3_restricted(ctx):
    return (all(remat3_recognises(p) for p in policies_in(ctx.program))
            and ctx.remat3_defect_mattered("view"))


def _remat3_unrecognised(ctx):
    return (any(not remat3_recognises(p) for p in policies_in(ctx.program))
            and (ctx.remat3_defect_mattered("view") or _remat3_never_asks_refused_policy(ctx)))


def _remat3_never_asks_refused_policy(ctx):
    """The spec refuses a save_from_both_policies of a non-boolean policy
    (as remat2 does) on any property, and remat3, which never asks a policy
    it does not recognise, computes: it applied nothing_saveable instead
    (for the residuals property: exactly the list of the remat3 model,
    which has that view, or, where a checkpoint output is unused, of the
    model composed with remat3-saves-for-unused-checkpoint-outputs: found
    by the fuzzer, an offloading combination in one cond branch and an
    unused output of a nested checkpoint in another cond's branch; either
    composed with an active additive divergence: scalar literals JAX does
    not save, as `_constant_type_literals`, found by the fuzzer; a zero a
    jit's linearization saves, found by a campaign: a pad's padding value
    in a jit beside the checkpoint). Where JAX raised too, for another
    reason, the spec has no answer to compare it with either (found by a
    campaign: the pad transpose's TypeError of a differentiated padding
    value, which the spec's remat2 view never reached)."""
    refused = ctx.spec_error if ctx.spec_error is not None else ctx.spec_error_too
    if ctx.implementation != "remat3" or not isinstance(refused, sp.PolicyCombinationError):
        return False
    if ctx.property != "residuals" or ctx.jax_residuals is None:     # (JAX raised: no list to compare)
        return True
    modelled = remat3_modelled(ctx)
    # JAX's list renamed against each modelled one (the spec, having raised,
    # had none to normalise it against: a checkpoint's output named by its
    # body's own equation, found by a pristine nightly, b673803d3a)
    if any(_normalised_against(ctx, m) == m for m in modelled):
        return True
    explains = [d.applies.explains for d in DIVERGENCES if hasattr(d.applies, "explains") and d.active()]
    return any(e(ctx.jax_residuals, m, ctx) for e in explains for m in modelled)


def _unchecked_or(policy):
    """save_from_both_policies before jax 0.4.38: `policy_1(...) or
    policy_2(...)`, Python's `or` of the two answers, bools or not."""
    if not isinstance(policy, sp._SaveFromBoth):
        return policy
    first, second = _unchecked_or(policy.policy_1), _unchecked_or(policy.policy_2)

    def either(prim, *in_types, **params):
        return (sp._answer(first, prim, in_types, params)
                or sp._answer(second, prim, in_types, params))
    either.__name__ = f"unchecked_or({sp.policy_name(first)}, {sp.policy_name(second)})"
    return either


def _save_from_both_unchecked(ctx):
    """The spec refused a save_from_both_policies of a non-boolean answer
    (PolicyCombinationError) where JAX computed; for the residuals, JAX's are
    the spec's with every such policy Python's `or` of its two answers."""
    if not isinstance(ctx.spec_error, sp.PolicyCombinationError) or ctx.implementation != "remat2":
        return False
    if ctx.property != "residuals":
        return True
    want = ctx.residuals_with(_unchecked_or)
    return _normalised_against(ctx, want) == want


def _remat3_zero_input_tangents(ctx):
    """remat3 instantiates the tangents of a checkpoint's inputs
    (RematTraced.jvp/linearized: `map(ad_util.instantiate, tangents)`), so a
    checkpoint input with a zero tangent is still saved when the body's
    derivative reads it."""
    return ctx.remat3_defect_mattered("instantiated_inputs")


def _listed_residuals(prog: Program) -> list:
    """The spec's residual list of `prog` as (type, source) strings, as
    JAX's saved_residuals list is compared."""
    return [(str(r.type), str(r.source)) for r in spec.saved_residuals(prog)]


def _remat3_nested_provenance(ctx):
    """JAX's residuals are the spec's renamed by `producer_sources`: of the
    program, or of its remat3 model where that saves the same list. The
    model keeps a checkpoint's nested checkpoints as remat3's forward
    binds them, whole, so an outer checkpoint that returns its input
    through a nested identity checkpoint returns the hi-primitive's output,
    not a forward of its input, which the spec's known half simplifies it
    to (found by a pristine nightly, 823a348773: "output of
    call_hi_primitive", not "from the argument")."""
    if ctx.implementation != "remat3" or ctx.property != "residuals":
        return False
    listed = _listed_residuals(ctx.program)
    if ctx.jax_residuals == listed:
        return False
    if ctx.jax_residuals == producer_sources(ctx.program):
        return True
    model = remat3_model(ctx.program)
    return (_listed_residuals(model) == listed
            and ctx.jax_residuals == producer_sources(model))


def _anything_except_stub(ctx):
    """JAX's residuals are those of the program with the stub's policies; a
    stack level's built from the checked function with them (each level's
    linearization asks them: found by a pristine nightly, 377ffb8cda)."""
    if ctx.implementation != "remat2" or not any(_as_stubbed(p) != p for p in policies_in(ctx.user_program)):
        return False
    if isinstance(ctx.spec_error, sp.PolicyCombinationError):
        return _stub_asks_no_refused_policy(ctx)
    if ctx.property != "residuals":
        return False
    if ctx.checked_program is None or ctx.numeric_program is None:
        return _residuals_equal_to(ctx, _as_stubbed)
    level = ctx.numeric_program(map_policies(ctx.user_program, _as_stubbed))
    return ctx.jax_residuals == dataclasses.replace(ctx, program=level).residuals_with(lambda policy: policy)


def _stub_asks_no_refused_policy(ctx) -> bool:
    """The spec refused a policy (PolicyCombinationError) where JAX
    computed, and builds the property's program (a stack level's, or the
    reverse pass) for the program with the stub's policies: excluding a
    name, the documented policy recomputes it inside an enclosing
    checkpoint's backward pass, whose partial evaluation asks a nested
    checkpoint's policy about it (`spec.remat.ask_policies`), an offloading
    save_from_both_policies there raising; the stub saves the name, so no
    policy is asked (found by a pristine campaign, b0ade09585)."""
    stubbed = map_policies(ctx.user_program, _as_stubbed)
    build = ctx.numeric_program or ctx.linear_barriers_of or spec.vjp_program
    try:
        build(stubbed)
    except sp.PolicyCombinationError:
        return False
    return True


def _as_stubbed(policy):
    """`policy` with every save_anything_except_these_names in it, one that
    save_from_both_policies combines too, jax 0.10.2's stub:
    everything_saveable (found by a pristine campaign, 091e92e752)."""
    if isinstance(policy, sp.save_anything_except_these_names):
        return sp.everything_saveable
    if isinstance(policy, sp._SaveFromBoth):
        return dataclasses.replace(policy, policy_1=_as_stubbed(policy.policy_1),
                                   policy_2=_as_stubbed(policy.policy_2))
    return policy


def _has_name(prog: Program) -> bool:
    return bool(names_in(prog))


def _remat3_name_no_batching(ctx):
    """Any property: the vmap may be the check's own or one in the user's
    function (then tracing raises, for every property)."""
    return (ctx.implementation == "remat3"
            and isinstance(ctx.error, NotImplementedError) and "CheckpointName" in str(ctx.error)
            and _has_name(ctx.program))


def _constant_checkpoint_output(prog: Program) -> bool:
    """Some checkpoint returns a scalar constant (a Literal) as an output."""
    return any(e.primitive is remat_p and any(isinstance(a, spec.ir.Literal) and a.is_scalar
                                              for a in e.params["jaxpr"].outputs)
               for e in _eqns(prog))


def _remat3_constant_output_under_jit_vmap(ctx):
    """remat3, a checkpoint with a constant output, and JAX's error is one
    its batched, lowered program raises: pe.lower_jaxpr reading `.val` of a
    weak-typed Python scalar (`'TypedFloat' object has no attribute 'val'`,
    any property: the vmap may be in the user's function), or, on the
    check's own vmap, MLIR lowering's bare `assert isinstance(v, core.Var)`
    (interpreters/mlir.py `read`; JAX filters its frames from the
    traceback, so the predicate sees only the class and the empty message)."""
    if ctx.implementation != "remat3" or ctx.error is None or not _constant_checkpoint_output(ctx.program):
        return False
    if isinstance(ctx.error, AttributeError):
        return re.fullmatch(r"'(Typed(Float|Int|Complex|Bool)|bool)' object has no attribute 'val'",
                            str(ctx.error)) is not None
    return type(ctx.error) is AssertionError and not str(ctx.error) and ctx.property == "vmap"


def _computed_from_scanned(prog: Program, scanned_inputs: frozenset = frozenset()) -> set:
    """The ids of `prog`'s vars that are, or are computed from, a stacked
    output (a ys) of a scan of `prog`, or of a scan in a nested checkpoint
    or jit that returns it (found by a pristine campaign, d3914ce803: a
    checkpoint's unused output a nested checkpoint's scan stacked), or one
    of the inputs `scanned_inputs` (ids: what the enclosing program passed
    in from a scan's ys)."""
    ys_of_scan = set(scanned_inputs)
    for e in prog.eqns:
        if e.primitive.name == "scan":
            ys_of_scan.update(v.id for v in e.outputs[e.params["num_carry"]:])
        elif any(isinstance(a, Var) and a.id in ys_of_scan for a in e.inputs):
            ys_of_scan.update(v.id for v in e.outputs)
        elif e.primitive in (remat_p, call_p):
            body = e.params["jaxpr"]
            inner = _computed_from_scanned(body)
            ys_of_scan.update(v.id for v, o in zip(e.outputs, body.outputs)
                              if isinstance(o, Var) and o.id in inner)
    return ys_of_scan


def _unused_scanned_checkpoint_inputs(prog: Program, scanned_inputs: frozenset = frozenset(),
                                      roots: list | None = None) -> bool:
    """Some checkpoint (at any depth) has an input its body never reads, or
    reads only for outputs whose tangent nothing reads (`tangents_read`: one
    it returns as it is, unused; found by a pristine nightly, 19a80242a3),
    that is, or is computed from, a stacked output (a ys) of a scan (one
    outside the jit the checkpoint is in too: found by a pristine nightly,
    64423aad57). `scanned_inputs`, `roots`: which inputs of `prog` are such
    values, which outputs are read (default all)."""
    ys_of_scan = _computed_from_scanned(prog, scanned_inputs)
    read = tangents_read(prog if roots is None else Program(prog.inputs, prog.eqns,
                                                            [o for o, r in zip(prog.outputs, roots) if r]))
    for e in prog.eqns:
        if e.primitive is remat_p:
            _, used = dce(e.params["jaxpr"], [v.id in read for v in e.outputs])
            if any(not u and isinstance(a, Var) and a.id in ys_of_scan for a, u in zip(e.inputs, used)):
                return True
        scanned_in = [isinstance(a, Var) and a.id in ys_of_scan for a in e.inputs]
        used_out = [v.id in read for v in e.outputs]
        for _, b in subprograms(e.params):
            inner = (frozenset(v.id for v, s in zip(b.inputs[len(b.inputs) - len(e.inputs):], scanned_in) if s)
                     if e.primitive is call_p else frozenset())
            if _unused_scanned_checkpoint_inputs(b, inner, _outputs_read_in(e, used_out)):
                return True
    return False


def _unused_scanned_checkpoint_outputs(prog: Program, roots: list | None = None) -> bool:
    """Some checkpoint (at any depth) has an output whose tangent nothing
    reads (`tangents_read`: one only a cond's index takes, found by a
    pristine campaign, 6876483497; an integer output of the program, which a
    stack's AD layers do not differentiate, 0a48bf1b19; one a jit returns
    and nothing reads, found by a pristine nightly, 4f852903ac) that its
    body computes from a stacked output (a ys) of a scan in the body.
    `roots`: which outputs of `prog` are read (default all)."""
    rooted = prog if roots is None else Program(prog.inputs, prog.eqns,
                                                [o for o, r in zip(prog.outputs, roots) if r])
    read = tangents_read(rooted)
    for e in prog.eqns:
        if e.primitive is remat_p:
            body = e.params["jaxpr"]
            scanned = _computed_from_scanned(body)
            if any(v.id not in read and isinstance(o, Var) and o.id in scanned
                   for v, o in zip(e.outputs, body.outputs)):
                return True
        used = [v.id in read for v in e.outputs]
        if any(_unused_scanned_checkpoint_outputs(b, _outputs_read_in(e, used)) for _, b in subprograms(e.params)):
            return True
    return False


def _outputs_read_in(e: Eqn, used: list) -> list | None:
    """Which outputs of the body of a jit, a cond's branches or a scan `e`
    are read, its own outputs read as `used` (a scan body's carries
    always: the next iteration reads them); None (all) for another's."""
    if e.primitive in (call_p, cond_p):
        return used
    if e.primitive is scan_p:
        return [True] * e.params["num_carry"] + used[e.params["num_carry"]:]
    return None


def _zero_cotangent_rejecters_for_unread_outputs(prog: Program) -> bool:
    """Some checkpoint (at any depth) has outputs whose tangents nothing reads
    (`tangents_read`: a stack's AD layers differentiate float outputs only)
    that need an equation whose JAX transpose rule rejects a symbolic zero
    cotangent (JaxFacts.transpose_rejects_zero_cotangent), one the outputs
    read do not need: its cotangent is a symbolic zero. Or an input its body
    never reads is computed by such an equation: remat3 pulls a zero
    cotangent into every input (remat3-pulls-cotangents-into-undifferentiated-
    checkpoint-inputs; found by a pristine nightly, fd902c4b7e: a vmapped
    maybe_set's output passed to a checkpoint that ignores it)."""
    read = tangents_read(prog)
    for e in prog.eqns:
        if e.primitive is remat_p:
            body = e.params["jaxpr"]
            used = [v.id in read for v in e.outputs]
            if _zero_cotangent_rejecters(dce(body)[0]) > _zero_cotangent_rejecters(dce(body, used)[0]):
                return True
            unread = [a for a, u in zip(e.inputs, dce(body, prune_inputs=True)[1]) if not u and isinstance(a, Var)]
            if unread and _computed_by_a_zero_cotangent_rejecter(prog, unread):
                return True
        if any(_zero_cotangent_rejecters_for_unread_outputs(b) for _, b in subprograms(e.params)):
            return True
    return False


def _computed_by_a_zero_cotangent_rejecter(prog: Program, atoms: list) -> bool:
    """Some equation of `prog` whose JAX transpose rejects a zero cotangent
    computes one of `atoms`, directly or through other equations."""
    cone = {a.id for a in atoms}
    for e in reversed(prog.eqns):
        if any(v.id in cone for v in e.outputs):
            if getattr(jax_facts.get(e.primitive), "transpose_rejects_zero_cotangent", False):
                return True
            cone |= {a.id for a in e.inputs if isinstance(a, Var)}
    return False


def _zero_cotangent_rejecters(prog: Program) -> int:
    return sum(getattr(jax_facts.get(e.primitive), "transpose_rejects_zero_cotangent", False) for e in _eqns(prog))


# the properties that run a reverse pass (a stack's reverse layer too: found
# by a campaign finding re-checked on 0.10.2)
_REVERSE_PROPERTIES = ("prevent_cse", "vjp", "second_order", "stack")
# ... and those whose JAX run may transpose: a stack_barriers' stack
# may hold grad or vjp layers below its linearize (a transpose rule's
# error there: linearize o grad o grad of a jitted select_if_vmap, found by
# a release campaign on 0.6.2, ef57b602d9)
_TRANSPOSING_PROPERTIES = _REVERSE_PROPERTIES + ("stack_barriers",)


def _remat3_transposes_with_zero_cotangents(ctx) -> bool:
    return (ctx.implementation == "remat3" and ctx.property in _TRANSPOSING_PROPERTIES
            and isinstance(ctx.error, AttributeError)
            and any(f"'{zero}' object has no attribute" in str(ctx.error) for zero in ("Zero", "NoneType"))
            and _zero_cotangent_rejecters_for_unread_outputs(ctx.program))


def _jit_transposes_with_zero_cotangents(ctx) -> bool:
    """JAX raised the error of a transpose rule that rejects a symbolic
    zero cotangent (equinox's select_if_vmap: `'Zero' object has no
    attribute 'shape'`), in reverse mode, where the spec computes, and a
    jit's body (at any depth) has such an equation: without direct
    linearization a jit's transpose runs its body's backward pass with the
    zero cotangents of the outputs nothing differentiates (grad o jvp of a
    jitted select_if_vmap: the primal output's; found by a release campaign
    on 0.4.25, 6ce804760e; a stack_barriers' grad layers, ef57b602d9)."""
    return (ctx.property in _TRANSPOSING_PROPERTIES and ctx.spec_error is None
            and isinstance(ctx.error, AttributeError)
            and any(f"'{zero}' object has no attribute" in str(ctx.error) for zero in ("Zero", "NoneType"))
            and any(_zero_cotangent_rejecters(e.params["jaxpr"]) for e in _eqns(ctx.user_program)
                    if e.primitive is call_p))


def _remat3_scanned_cotangent_error(ctx) -> bool:
    return (ctx.implementation == "remat3" and ctx.property in _REVERSE_PROPERTIES
            and isinstance(ctx.error, ValueError) and "Expected cotangent type" in str(ctx.error))


def _remat3_unused_scanned_input(ctx):
    return _remat3_scanned_cotangent_error(ctx) and _unused_scanned_checkpoint_inputs(ctx.program)


def _remat3_unused_scanned_output(ctx):
    return _remat3_scanned_cotangent_error(ctx) and _unused_scanned_checkpoint_outputs(ctx.program)


def _remat3_barriers(ctx):
    return (ctx.implementation == "remat3" and ctx.property == "prevent_cse" and ctx.barriers is not None
            and (ctx.barriers[1] > 0) == remat3_barrier_model(ctx.program))


def additive(explains: Callable, *, literals_apart: bool = False, levels_literals_apart: bool = False) -> Callable:
    """The predicate of an additive divergence: `explains(got, want, ctx)`
    holds of JAX's residual list `got` against one of the context's
    baselines `want` (`Context.baselines`: the spec's, or under remat3 the
    remat3 model's); with `literals_apart` (a divergence whose entries are
    never literals) also against those baselines without the literals JAX
    lacks (`Context.baselines_with_python_type_literals`); with
    `levels_literals_apart`, so at a stack's level (a level's scalar
    constants are numpy scalars in JAX's trace:
    literal-residuals-depend-on-the-constant-s-python-type)."""
    def applies(ctx):
        if ctx.property != "residuals" or ctx.jax_residuals is None or ctx.spec_residuals is None:
            return False
        apart = literals_apart or (levels_literals_apart and ctx.checked_program is not None)
        wants = ctx.baselines_with_python_type_literals() if apart else ctx.baselines()
        # JAX's names normalised against each baseline (the check normalised
        # them against the spec's, which may lack a modelled baseline's
        # entries: found on 0.4.25, a kept jit output named `output of pjit`)
        return any(explains(ctx.jax_residuals, want, ctx) or explains(_normalised_against(ctx, want), want, ctx)
                   for want in wants)
    applies.__doc__, applies.__name__ = explains.__doc__, explains.__name__
    applies.explains = explains     # for composing two additive divergences (`_composed`)
    return applies


def _difference(got: list, want: list):
    """(entries only `got` has, entries only `want` has), as Counters."""
    return collections.Counter(got) - collections.Counter(want), collections.Counter(want) - collections.Counter(got)


def _custom_closure_constants(prog: Program, inside: bool = False) -> collections.Counter:
    """The types of the arrays custom_jvp / custom_vjp functions inside a
    checkpoint close over (their first num_consts operands), counted."""
    out = collections.Counter()
    for e in prog.eqns:
        if inside and e.primitive.name in ("custom_jvp_call", "custom_vjp_call"):
            out.update(str(a.type) for a in e.inputs[:e.params.get("num_consts") or 0])
        for _, sub in subprograms(e.params):
            out += _custom_closure_constants(sub, inside or e.primitive is remat_p)
    return out


@additive
def _remat3_custom_closure_constants(got, want, ctx):
    """Under remat3, JAX's list is the baseline's with "from a constant"
    entries left out, each of the type of an array a custom function inside
    a checkpoint closes over."""
    if ctx.implementation != "remat3":
        return False
    only_got, only_want = _difference(got, want)
    closed = _custom_closure_constants(ctx.program)
    return (not only_got and bool(only_want) and all(src == "from a constant" for _, src in only_want)
            and not (collections.Counter(t for t, _ in only_want.elements()) - closed))


def _linearize_saved_zero(source: str, through_jits: bool = False):
    """The predicate of a divergence where linearizing a sub-jaxpr (a jit's
    body, a cond's branches) saves a zero a JVP rule instantiated: the only
    entries JAX has and the baseline lacks are scalar `source` outputs
    ("output of jitted function", "output of cond"; with `through_jits`, in
    a program with a cond in a jit, outputs of the jit too: found on 0.4.36;
    in a program with a cond in a scan body, outputs of the scan stacking
    the scalar: found by a pristine campaign, 7194b3833c), and the only ones
    the baseline has and JAX lacks are scalar literals, at most one per such
    output of their type (the zero the spec reads as a literal where JAX's
    known half returns it). Of a stack's residuals too, composed with
    literal-residuals-depend-on-the-constant-s-python-type: differentiating
    again, each jit's (and each transposed jit's) zero is saved so, and the
    spec's literals JAX has no entry for go (found by a pristine campaign,
    d536c5ca6d and c80cd1d416: grad o grad of pad and eigh in a jit)."""
    @functools.partial(additive, levels_literals_apart=True)
    def explains(got, want, ctx):
        only_jax, only_spec = _difference(got, want)
        out_of_jit = through_jits and any(e.primitive.name == "call" and any(
            c.primitive.name == "cond" for c in _eqns(e.params["jaxpr"])) for e in _eqns(ctx.program))
        lengths = _lengths_of_scans_around(ctx.program, source.split()[-1]) if through_jits else set()

        def element(t, s):
            """The scalar type `t` saves, named as the divergence does, or None."""
            if t.endswith("[]") and (s.startswith(source) or (out_of_jit and _is_jit_output(s))):
                return t
            dtype, dims = t[:-1].split("[")
            stacked = dims and all(int(d) in lengths for d in dims.split(","))
            return f"{dtype}[]" if stacked and (s.startswith("output of scan") or _is_jit_output(s)) else None
        if not only_jax or any(element(t, s) is None for t, s in only_jax):
            return False
        outputs = collections.Counter(element(t, s) for t, s in only_jax.elements())
        literals = collections.Counter(t for t, s in only_spec.elements() if s == "from a literal")
        return sum(only_spec.values()) == sum(literals.values()) and not (literals - outputs)
    return explains


def _lengths_of_scans_around(prog: Program, primitive: str) -> set:
    """The lengths of the scans (at any depth) whose bodies hold a
    `primitive` equation at any depth."""
    return {e.params["length"] for e in _eqns(prog) if e.primitive.name == "scan"
            and any(c.primitive.name == primitive for c in _eqns(e.params["jaxpr"]))}


_jit_linearize_zero = _linearize_saved_zero("output of jitted function")
_cond_linearize_zero = _linearize_saved_zero("output of cond", through_jits=True)


def _checkpoint_in_cond_branch(prog: Program) -> bool:
    """Some cond branch of `prog` (at any depth) holds a checkpoint."""
    for e in prog.eqns:
        if e.primitive.name == "cond" and any(True for b in e.params["branches"] for _ in remats(b)):
            return True
        if any(_checkpoint_in_cond_branch(sub) for _, sub in subprograms(e.params)):
            return True
    return False


def _remat3_float0_residual(ctx):
    """remat3, a residual list that the oracle cannot read for its float0
    entry (or residual leaves with a float0 one), and a checkpoint in a
    cond branch."""
    if ctx.implementation != "remat3" or not _checkpoint_in_cond_branch(ctx.program):
        return False
    if ctx.property == "residuals":
        return isinstance(ctx.error, Unsupported) and "float0" in str(ctx.error)
    return ctx.property == "vjp_leaves" and any("float0" in dtype for _, dtype in ctx.jax_residuals or ())


# the unused outputs inside cond branches kept too, or not (a cond in a
# cond's branch: found by a campaign on 0.4.36), or those of the top-level
# equations alone (nested jits: found on 0.4.36)
_KEPT_OUTPUTS_THROUGH = ({}, dict(through_conds=False), dict(top_level=True))


def _linearize_keeps_unused_outputs(ctx):
    """remat2 (the one implementation before 0.10.2), and JAX's residuals are
    the spec's of the program with the unused outputs JAX's linearization
    keeps made program outputs (`unused_linearize_outputs_out`), and not
    those of the program itself."""
    if ctx.implementation == "remat2" and ctx.property == "prevent_cse" and ctx.barriers is not None:
        return _unused_outputs_barriers(ctx)
    if ctx.implementation == "remat2" and ctx.property == "stack_barriers" and ctx.linear_barriers_of is not None:
        return _unused_outputs_linear_barriers(ctx)
    if ctx.implementation == "remat2" and ctx.values_agree_for is not None:
        return _unused_outputs_values(ctx)
    if ctx.implementation == "remat2" and ctx.error is not None:
        return _unused_outputs_raise(ctx)
    if ctx.implementation != "remat2" or ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    as_written = lambda policy: policy
    if ctx.jax_residuals == ctx.residuals_with(as_written):
        return False
    # (where pjit's staging forwarded a jit's inputs, the traced program may
    # have lost a jit output whose tangent made the jit live)
    hidden = (dict(forwarded_hidden=True),) if holds(Releases("0.4.29", "0.6.0")) else ()
    for through in _KEPT_OUTPUTS_THROUGH + hidden:
        kept, n = unused_linearize_outputs_out(ctx.program, **through)
        if not n:
            continue
        want = dataclasses.replace(ctx, program=kept).residuals_with(as_written)
        got = _normalised_against(ctx, want)
        # in a jit, as multisets: the added output moves the residuals it needs
        # in the jit's residual order (jit-residuals-in-another-order; found by a
        # campaign on 0.4.25)
        if got == want or (has_primitive(ctx.program, "call")
                           and collections.Counter(got) == collections.Counter(want)):
            return True
    return False


def _unused_outputs_raise(ctx) -> bool:
    """JAX raised a primitive's missing differentiation rule (or a bare
    AssertionError) where the spec computes, and the spec raises it word for
    word for the program with the unused outputs JAX keeps made outputs: a
    checkpoint's unused igammac is staged with its tangent, whose
    igamma_grad_a a second derivative meets (found by a release campaign
    on 0.4.25, 865586636f)."""
    return any(_dead_code_raises_as_jax(ctx, lambda t=through: unused_linearize_outputs_out(ctx.user_program, **t))
               for through in _KEPT_OUTPUTS_THROUGH)


def _unused_outputs_barriers(ctx) -> bool:
    """The barriers of the program with the unused outputs JAX keeps made
    outputs agree with JAX's (`_barriers_of_a_variant`): a checkpoint in a
    cond branch whose outputs nothing needs is staged with its tangents,
    and its recomputation barriered (found by a campaign on 0.4.36)."""
    return _barriers_of_a_variant(ctx, [unused_linearize_outputs_out(ctx.program, **through)
                                        for through in _KEPT_OUTPUTS_THROUGH])


def _unused_outputs_linear_barriers(ctx) -> bool:
    """The barriers of a stack's called linear function agree with JAX's
    for the checked program with the unused outputs JAX keeps made outputs:
    grad's linearization keeps a scan's unused stacked output, a
    checkpoint's output, live, so the checkpoint is differentiated in the
    grad program, and the next layer's linearization stages it barriered
    (found by a campaign on 0.4.25, aca32be65a: linearize o grad)."""
    return _barriers_of_a_variant(ctx, [unused_linearize_outputs_out(ctx.user_program, **through)
                                        for through in _KEPT_OUTPUTS_THROUGH], count=ctx.linear_barriers_of)


def _unused_outputs_values(ctx) -> bool:
    """JAX's pullback values are the spec's for the program with the unused
    outputs JAX keeps made outputs, their cotangents zero: the cotangent of
    a kept loop carry is carried back from an instantiated zero, so a
    factor that overflowed gives 0 * inf = nan where the spec, which prunes
    the carry, is finite (found by a campaign on 0.4.25: a scan carry
    squared each step, unused)."""
    return any(n and ctx.values_agree_for(kept, n)
               for kept, n in (unused_linearize_outputs_out(ctx.program, **through)
                               for through in _KEPT_OUTPUTS_THROUGH))


def _barriers_of_a_variant(ctx, variants, count=optimization_barriers) -> bool:
    """JAX's barriers (of the backward pass; with `count`, of whatever it
    counts) where the spec's has none, or the other way round, and the
    spec's count for one of the `variants` ((program, how many outputs it
    gained) pairs) agrees with JAX (a count of None: not comparable). No
    counts (JAX or the spec raised: an error's context of a barrier
    property): nothing to compare."""
    if ctx.barriers is None:
        return False
    want, got = ctx.barriers
    if (want > 0) == (got > 0):
        return False
    counts = (count(v) for v, n in variants if n)
    return any(c is not None and (c > 0) == (got > 0) for c in counts)


def _remat_of_jit_returns_its_inputs(ctx):
    """remat2, and JAX's residuals are the spec's following the choice of
    releases whose remat-of-jit forwards no input (spec.semantics:
    remat_of_jit_forwards_inputs=False), and not the spec's own
    (`_follows_an_older_choice`: against that spec's baselines, or in an
    order-only divergence's order)."""
    if ctx.implementation != "remat2" or ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    if not has_primitive(ctx.program, "call") or not has_primitive(ctx.program, "remat"):
        return False
    # from 0.4.29 to 0.5.3 pjit's staging rule forwarded the inputs of the
    # jits a checkpoint hoists (spec.semantics: jit_staging_forwards_inputs)
    return _follows_an_older_choice(ctx, remat_of_jit_forwards_inputs=False,
                                    jit_staging_forwards_inputs=holds(Releases("0.4.29", "0.6.0")))


def _linearize_keeps_tangents_of_unread_operands(ctx):
    """remat2, and JAX's residuals are the spec's of the program with the
    unread operands of its conds, calls and scans made outputs
    (`unread_operands_out`), in some order, and not the spec's own."""
    if ctx.implementation == "remat2" and ctx.property == "prevent_cse" and ctx.barriers is not None:
        return _unread_operands_barriers(ctx)
    if ctx.implementation == "remat2" and ctx.property == "stack_barriers" and ctx.linear_barriers_of is not None:
        return _unread_operands_linear_barriers(ctx)
    if ctx.implementation == "remat2" and ctx.property == "vjp_leaves" and ctx.jax_residuals is not None:
        return _unread_operands_leaves(ctx)
    if ctx.implementation == "remat2" and isinstance(ctx.error, ValueError) and str(ctx.error) == WHILE_TRANSPOSE_ERROR:
        return _unread_operands_refuse_reverse(ctx)
    if ctx.implementation != "remat2" or ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    for variant, _ in _unread_operands_variants(ctx.program):
        want = dataclasses.replace(ctx, program=variant).residuals_with(lambda policy: policy)
        # as multisets: an output added to a jit moves the residuals it needs in
        # the jit's residual order (found by a campaign on 0.6.2)
        got = collections.Counter(_normalised_against(ctx, want))
        if collections.Counter(want) != collections.Counter(ctx.spec_residuals) and got == collections.Counter(want):
            return True
    return False


def _unread_operands_variants(prog: Program) -> list:
    """The programs (with how many outputs each added) that
    `unread_operands_out` makes of `prog`, and of `prog` with the unused
    outputs the same staging of whole equations keeps made outputs
    (linearize-keeps-unused-outputs-of-staged-equations; both at once found
    by a campaign on 0.4.25); where pjit's staging forwarded a jit's
    inputs (jax 0.4.29 to 0.5.3), with a top-level jit live for an output
    the traced program may have lost too (found by a release campaign on
    0.4.36, 927ac9c8b9, a jit returning its input beside a while loop's
    output). Distinct, each changing something."""
    hidden = (False, True) if holds(Releases("0.4.29", "0.6.0")) and has_primitive(prog, "call") else (False,)
    kept = [k for k, n in (unused_linearize_outputs_out(prog, forwarded_hidden=h) for h in hidden) if n]
    variants, seen = [], set()
    for p, h in ((p, h) for p in [prog] + kept for h in hidden):
        variant, n = unread_operands_out(p, forwarded_hidden=h)
        if n and str(variant) not in seen:
            seen.add(str(variant))
            variants.append((variant, n))
    return variants


def _unread_operands_barriers(ctx) -> bool:
    """JAX's backward pass has barriers where the spec's has none, or the
    other way round, and the spec's for the program with the unread
    operands made outputs agrees with JAX: the tangent of a checkpoint's
    output that only an unread operand takes is computed, and its
    recomputation barriered (found by a campaign on 0.4.25)."""
    return _barriers_of_a_variant(ctx, _unread_operands_variants(ctx.program))


def _unread_operands_linear_barriers(ctx) -> bool:
    """The called linear function has barriers where the spec's has none,
    or the other way round, and the spec's count for the checked program
    with its unread operands made outputs agrees with JAX: the tangent of
    an unread scan const is computed in the linear function, and with it a
    cond's other branch's checkpoint and its barrier (found by a campaign
    on 0.4.25). The variant is of the checked program: the stack's own
    differentiation (spec.vjp) prunes the unread operand."""
    return _barriers_of_a_variant(ctx, _unread_operands_variants(ctx.user_program), count=ctx.linear_barriers_of)


def _linearize_inlines_known_checkpoints(ctx) -> bool:
    """The called linear function's barriers: JAX has none where the spec's
    come from known differentiated checkpoints of the forward pass alone
    (spec.barriers.known_checkpoint_barriers), which this release's
    linearization inlines."""
    if ctx.property != "stack_barriers" or ctx.barriers is None:
        return False
    want, got = ctx.barriers
    known = known_checkpoint_barriers(ctx.program, diff=ctx.diff)
    return want > 0 and got == 0 and known > 0 and want - known == 0


def _partial_eval_binds_known_checkpoints(ctx) -> bool:
    """remat2's barriers (of the backward pass, or of a stack's called
    linear function) where the spec's has none, or the other way round,
    and the spec's count following releases before stackless tracing
    (spec.semantics: partial_eval_inlines_known_checkpoints=False) agrees
    with JAX's."""
    if ctx.implementation != "remat2" or ctx.barriers is None:
        return False
    if ctx.property == "prevent_cse":
        count = optimization_barriers
    elif ctx.property == "stack_barriers" and ctx.linear_barriers_of is not None:
        count = ctx.linear_barriers_of
    else:
        return False
    with following(partial_eval_inlines_known_checkpoints=False):
        return _barriers_of_a_variant(ctx, [(ctx.user_program, 1)], count=count)


def _unread_operands_refuse_reverse(ctx) -> bool:
    """JAX refused to transpose a while loop where the spec computed, and the
    spec refuses too for the program with the unread operands made outputs:
    the loop's output reaches only an unread operand, whose tangent JAX
    computes (found by a campaign on 0.4.25)."""
    return any(_variant_raises(v, spec.vjp_program, ValueError, WHILE_TRANSPOSE_ERROR)
               for v in _unread_operands_variants(ctx.program))


def _unread_operands_leaves(ctx) -> bool:
    """jax.vjp's residual leaves are those of the spec's residuals for the
    program with the unread operands made outputs, and not those for the
    program itself (found by a campaign on 0.4.25: a cond branch's while
    loop whose output only a scan's unread operand takes)."""
    return any(sorted(ctx.jax_residuals) == _leaves(v) != _leaves(ctx.program)
               for v, _ in _unread_operands_variants(ctx.program))


def _leaves(prog: Program) -> list:
    """The (shape, dtype) of the spec's residuals of `prog`, sorted: jax.vjp's residual leaves."""
    return sorted((str(r.type.shape), str(r.type.dtype)) for r in spec.saved_residuals(prog))


def _linearize_drops_unread_effectful_checkpoints(ctx) -> bool:
    """remat2, and JAX's residuals (or jax.vjp's leaves, or the backward
    pass's barriers) are the spec's for the program with its unread
    effectful checkpoints emptied (`unread_effectful_checkpoints_emptied`),
    and not the spec's own."""
    if ctx.implementation != "remat2":
        return False
    variant, n = unread_effectful_checkpoints_emptied(ctx.program)
    return n > 0 and _saves_as_a_variant(ctx, [(variant, n)])


def _saves_as_a_variant(ctx, variants: list) -> bool:
    """JAX's residuals (or jax.vjp's leaves, or the backward pass's
    barriers) are the spec's for one of the `variants` of the program
    ((program, count) pairs, as `_barriers_of_a_variant` takes them), and
    not the spec's own."""
    if ctx.property == "prevent_cse" and ctx.barriers is not None:
        return bool(variants) and _barriers_of_a_variant(ctx, variants)
    if ctx.property == "vjp_leaves" and ctx.jax_residuals is not None:
        return any(sorted(ctx.jax_residuals) == _leaves(v) != _leaves(ctx.program) for v, _ in variants)
    if ctx.property == "residuals" and ctx.jax_residuals is not None:
        for v, _ in variants:
            want = dataclasses.replace(ctx, program=v).residuals_with(lambda policy: policy)
            if want != ctx.spec_residuals and _normalised_against(ctx, want) == want:
                return True
    return False


def _linearize_drops_effectful_loops_staged_without_outputs(ctx) -> bool:
    """remat2, and JAX's residuals (or jax.vjp's leaves, or the backward
    pass's barriers) are the spec's for the program with each effectful
    loop whose carries have no tangent held constant
    (`effectful_loops_held_constant`, everywhere outside checkpoints or in
    jits only), and not the spec's own; or the spec refused reverse mode
    with the while loop's transpose error where JAX computed, and does not
    for such a program (JAX's values are not compared then)."""
    if ctx.implementation != "remat2":
        return False
    if ctx.spec_error is not None:
        return (ctx.error is None and str(ctx.spec_error) == WHILE_TRANSPOSE_ERROR
                and any(_builds(ctx, effectful_loops_held_constant(ctx.user_program, in_jits_only=j)[0])
                        for j in (False, True)))
    variants = [effectful_loops_held_constant(ctx.program, in_jits_only=j) for j in (False, True)]
    return _saves_as_a_variant(ctx, [(v, 0) for v, n in variants if n])


def _builds(ctx, prog: Program) -> bool:
    """The spec builds the property's program of `prog` (its reverse pass
    where the property has no program of its own) without a ValueError."""
    try:
        ctx.numeric_program(prog) if ctx.numeric_program is not None else spec.vjp_program(prog)
    except ValueError:
        return False
    return True


def _normalised_against(ctx, want: list) -> list:
    """JAX's list with the installed release's naming normalisations applied
    again, against the modelled list `want` (the check normalised it against
    the spec's, which lacks the modelled entries: `output of pjit` for an
    unused output of a jit before 0.4.34); or, where that is `want` and
    this is not, from JAX's own names (a name the check gave against the
    spec's list may be another's in `want`: found by the real-model suite
    on 0.6.2, a jit's rounded copy of its input named by the spec's
    `output of sin`)."""
    again = normalize(ctx.implementation, ctx.jax_residuals, want, ctx.program)[0]
    if again != want and ctx.jax_names is not None:
        own = normalize(ctx.implementation, ctx.jax_names, want, ctx.program)[0]
        if own == want:
            return own
    return again


def _remat3_unused_outputs_read(ctx):
    """JAX's residuals are the remat3 model's of the program with every
    unused checkpoint output used, and not those of the program itself."""
    if ctx.implementation != "remat3" or ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    flags = dict.fromkeys(REMAT3_DEFECTS, True)
    if ctx.jax_residuals == ctx.residuals_with(**flags):
        return False
    # the outputs a checkpoint forwards from its inputs threaded out too, or
    # not (their backward passes save nothing; threading one out of a cond
    # branch saves the other branches' zero for it)
    for forwarded in (True, False):
        used, n = unused_checkpoint_outputs_out(ctx.program, forwarded=forwarded)
        if n and _as_threaded_out(ctx.jax_residuals, dataclasses.replace(ctx, program=used).residuals_with(**flags),
                                  has_primitive(ctx.program, "call")):
            return True
    return False


def _constants_by_type(residuals: list) -> list:
    """`residuals` (type, source) with its constants, which saved_residuals
    lists first, in one order (by type): the order in which remat3's trace
    captures them, as primals the rematerialized checkpoint reads or as
    residuals of its linearization, the remat3 model does not reproduce (a
    checkpoint's closed-over constant is a leading operand in both, and JAX
    captures it after an argument that is a constant too: found by a
    pristine nightly, e5790aba5d)."""
    constants = sorted(r for r in residuals if r[1] == "from a constant")
    it = iter(constants)
    return [next(it) if r[1] == "from a constant" else r for r in residuals]


def _as_threaded_out(got: list, want: list, through_calls: bool) -> bool:
    """`got` is the residual list `want` of a program whose unused outputs
    were threaded out: equal, or, where they were threaded through a jit,
    equal up to order. A residual that is the threaded value is then one of
    the jit's outputs, which _pjit_linearize's output-to-output forwarding
    makes it, and saved_residuals lists a jit's residuals in its outvars'
    order, primal outputs first (found by a pristine campaign, 04eaf2c191:
    a checkpoint's forwarded input, saved by a jitted scan's neighbour, moved
    ahead of the scan's residual)."""
    return got == want or (through_calls and collections.Counter(got) == collections.Counter(want))


def _nested_checkpoints(prog: Program, as_written: bool) -> bool:
    """The checked function itself holds a checkpoint (as written: any; under
    the check's own checkpoint: one inside it)."""
    remats = [e for e in _eqns(prog) if e.primitive is remat_p]
    return len(remats) > (0 if as_written else 1)


def _remat3_inlined_derivatives(ctx):
    """JAX's residuals (or barriers) are those of the program with the
    checkpoints inside the checked function inlined (the check's own
    checkpoint kept), under the spec or the full remat3 model, up to
    scalar literals JAX leaves out (literal-residuals-depend-on-the-
    constant-s-python-type composes with this)."""
    if ctx.implementation != "remat3":
        return False
    as_written = ctx.policy is AS_IS
    if not _nested_checkpoints(ctx.program, as_written):
        return False
    inlined = inline_checkpoints(ctx.program, keep_top_level=not as_written)
    if ctx.property == "prevent_cse":
        return ctx.barriers is not None and ctx.barriers[1] == 0 and optimization_barriers(inlined) == 0
    if ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    modelled = dataclasses.replace(ctx, program=inlined)
    candidates = [_listed_residuals(inlined),
                  modelled.residuals_with(**dict.fromkeys(REMAT3_DEFECTS, True))]
    # as multisets where the inlined derivative is a linearization: remat3
    # computes its coefficients before its linear equations, the inlined JVP
    # body interleaves them (found through jax's api_test test_remat_basic,
    # jax.linearize of a checkpoint inside the checked function)
    multiset = any(e.primitive is remat_p and e.params["differentiated"] for e in _eqns(ctx.program))
    same = (lambda a, b: collections.Counter(a) == collections.Counter(b)) if multiset else operator.eq
    return any(same(ctx.jax_residuals, m) or _literals_left_out(ctx.jax_residuals, m, same) for m in candidates)


_MODEL_PREDICATE = ("The predicate: JAX's residuals are exactly those of the remat3 model (the "
                    "spec with every remat3 defect below modelled, `remat3_model`), and this is "
                    "the first defect, in the model's order, whose removal changes them.")


def _literals_left_out(got: list, want: list, same: Callable = operator.eq) -> bool:
    """`got` is `want` with some "from a literal" entries left out (the rest
    compared by `same`)."""
    strip = lambda rs: [r for r in rs if r[1] != "from a literal"]
    lits = lambda rs: collections.Counter(r for r in rs if r[1] == "from a literal")
    return same(strip(got), strip(want)) and not (lits(got) - lits(want)) and bool(lits(want) - lits(got))


@additive
def _constant_type_literals(got, want, ctx):
    """The lists differ only in scalar literals the baseline saves and JAX
    does not: JAX's list is the baseline's with some "from a literal"
    entries left out. (The baseline may be the remat3 model's: found by the
    fuzzer, a literal of an equation outside a checkpoint whose policy
    remat3 does not apply, and one beside a checkpoint's unused output; or,
    before direct linearization, the spec's of the program with its staged
    equations' unused outputs used: found on jax 0.4.25.)"""
    return _literals_left_out(got, want)


def remat3_modelled(ctx) -> list:
    """The remat3 model's residual lists (every defect on) of the program
    and of its remat3 variants (`remat3_variants`: a finding composed with
    remat3-saves-for-unused-checkpoint-outputs, or with the float0-tangent
    defect, shows one of those)."""
    return ctx.remat3_lists()


def _active(name: str) -> bool:
    """The divergence `name` can hold on the installed JAX (Divergence.active)."""
    return next(d for d in DIVERGENCES if d.name == name).active()


def _integer_pow_one_factor(ctx):
    """JAX's residuals are the spec's following the old rule (spec.semantics:
    integer_pow_small_y_jvp=False; found on 0.4.25: a checkpoint
    recomputing the factor saves x instead; on 0.4.36: for y=2 a policy
    naming integer_pow saves the rule's `integer_pow[y=1]`), or, composing with the other
    additive divergences, a factor saved beside a baseline
    (`_integer_pow_one_factor_saved`)."""
    if _integer_pow_one_factor_saved(ctx):
        return True
    return (any(e.primitive.name == "integer_pow" and e.params["y"] in (1, 2) for e in _eqns(ctx.program))
            and _follows_an_older_choice(ctx, integer_pow_small_y_jvp=False))


def _acosh_old_jvp(ctx):
    """JAX's residuals are the spec's following the old rule (spec.semantics:
    acosh_jvp_squares=False), not the spec's own; or JAX computed where the
    spec, asking a release's policy about the new rule's `square`, met none
    in JAX's program (found on 0.4.25)."""
    return has_primitive(ctx.program, "acosh") and _follows_an_older_choice(ctx, acosh_jvp_squares=False)


def _square_binds_integer_pow(ctx):
    """JAX's residuals are the spec's following the releases before 0.4.36,
    where `lax.square` bound integer_pow[y=2] (spec.semantics:
    square_is_a_primitive=False): the square a rule like acos's binds is an
    integer_pow a policy may save (found on 0.4.25)."""
    return _follows_an_older_choice(ctx, square_is_a_primitive=False)


# The spec.semantics choices that are one primitive's JVP (or linearize) rule,
# and the releases that make the older one. A release makes all its older
# choices at once: where no divergence alone (nor `_composed`'s additive
# forms) explains a program, `_older_rules_together` tries them all.
OLDER_RULES = {
    # cond's linearize rule (a scalar zero tangent saved): a release campaign
    # on 0.4.36 met it beside integer_pow's old factor, 9e4552fb2b
    "cond_saves_scalar_zero_tangents": Releases("0.4.25", "0.7.1"),
    "integer_pow_small_y_jvp": Releases("0.4.25", "0.10.1"),
    "acosh_jvp_squares": Releases("0.4.25", "0.8.0"),
    "square_is_a_primitive": Releases("0.4.25", "0.4.36"),
    "atan2_jvp_divides_first": Releases("0.4.25", "0.5.3"),
    "sort_jvp_gathers_along_its_dimension": Releases("0.4.25", "0.4.38"),
    "top_k_jvp_batches_its_gather": Releases("0.4.25", "0.4.35"),
    "approx_top_k_jvp_takes_along_axis": Releases("0.4.25", "0.7.1"),
    "lu_jvp_vmaps_its_inner_rule": Releases("0.4.25", "0.5.3"),
}


def _older_rules_of_the_release() -> dict:
    """The older rule choices the installed release makes (OLDER_RULES)."""
    return {name: False for name, releases in OLDER_RULES.items() if holds(releases)}


def _older_rules_together(ctx) -> bool:
    """JAX's residuals are the spec's following every older rule choice the
    release makes (OLDER_RULES), two or more of which change its residuals:
    rules whose changes overlap, which no divergence alone explains (acos's
    square an integer_pow a policy saves beside atan2's old factors)."""
    older = _older_rules_of_the_release()
    return len(older) >= 2 and _follows_an_older_choice(ctx, **older)


_older_rules_together.last_resort = True    # find() asks it after _composed and _reordered


def _follows_an_older_choice(ctx, **choices) -> bool:
    """JAX's residuals are those of the spec following `choices` (fields of
    spec.semantics: a rule JAX changed on purpose): equal to one of that
    spec's baselines (`Context.baselines`) that the choices change (a
    program variant's too: found on 0.6.2, integer_pow's old factor x ** 0
    saved for a checkpoint's unused output, which the release's
    linearization keeps), or in an order-only divergence's order (found on
    0.6.2: approx_top_k's old indices beside a scan's unused output kept,
    in 0.6.2's order); each baseline also without the literals JAX lacks
    (literal-residuals-depend-on-the-constant-s-python-type: found by a
    release campaign on 0.6.2, dbabf8fd92, integer_pow[y=1]'s old rule
    saving x beside a Python float divisor JAX left unsaved)."""
    if ctx.property != "residuals" or ctx.jax_residuals is None or ctx.spec_residuals is None:
        return False
    current = ctx.baselines_with_python_type_literals()
    older = dataclasses.replace(ctx, spec_residuals=_older_list(ctx, choices))
    with following(**choices):      # (JAX's names normalised as that spec orders them too)
        return any(_normalised_against(older, want) == want
                   or _in_another_order(_normalised_against(older, want), want, ctx)
                   for want in older.baselines_with_python_type_literals() if want not in current)


def _older_choice_moves(got, want, ctx, **choices) -> bool:
    """The entries `got` adds to and drops from `want` are among those the
    spec's own list gains and loses following `choices` (fields of
    spec.semantics: a rule JAX changed on purpose): an older rule's moves in
    their additive form, whatever the rule saves, so they compose with the
    other additive divergences (`_composed`; found by a release campaign on
    0.4.36, 913246c3cf: sort's old indices, their wrapping `add` saved by a
    policy, beside the named value a custom_vjp in the checkpoint keeps)."""
    extra, missing = _difference(got, want)
    if not (extra or missing):
        return False
    older_extra, older_missing = _difference(_older_list(ctx, choices), ctx.spec_residuals)
    return not (extra - older_extra) and not (missing - older_missing)


def _older_list(ctx, choices: dict) -> list:
    """The spec's residual list for `ctx` following `choices` (cached)."""
    cache = ctx.__dict__.setdefault("_older_lists", {})
    key = tuple(sorted(choices.items()))
    if key not in cache:
        with following(**choices):
            cache[key] = ctx.residuals_with(lambda policy: policy)
    return cache[key]


def _or_older_moves(explains: Callable, **choices) -> Callable:
    """`explains`, or the older choices' moves (`_older_choice_moves`)."""
    return lambda got, want, ctx: explains(got, want, ctx) or _older_choice_moves(got, want, ctx, **choices)


@additive
def _integer_pow_one_factor_saved(got, want, ctx):
    """JAX's list is the baseline's plus, at most once per integer_pow[y=1]
    equation of that type, an `output of mul` (the factor 1 * x**0; in a
    jit an output of the jit, in a cond branch an `output of cond`, in a scan body an `output of scan`, stacked,
    or of a jit around the scan: found by campaigns on 0.6.2 and 0.4.25; in a
    checkpoint an `output of closed_call`: found on 0.4.36)."""
    extra, missing = _difference(got, want)
    powers = collections.Counter()
    in_branches = {id(c) for e in _eqns(ctx.program) if e.primitive.name == "cond"
                   for b in e.params["branches"] for c in _eqns(b)}
    for e, lengths in _eqns_in_loops(ctx.program):
        if e.primitive.name == "integer_pow" and e.params["y"] == 1:
            t = e.outputs[0].type
            powers.update([(str(t), "output of mul"), (str(t), _JIT_OUTPUT)])   # in a jit: its output
            if id(e) in in_branches:    # in a cond branch: an output of the cond (found on 0.6.2)
                powers.update([(str(t), "output of cond")])
            if lengths:     # in a scan body: stacked, an output of the scan, or of a jit
                stacked = str(ArrayType(tuple(lengths) + t.shape, t.dtype))    # around it (a kept
                powers.update([(stacked, "output of scan"), (stacked, _JIT_OUTPUT)])   # unused ys: 0.4.25)
                # in a checkpoint, the known half of the scan's split: an `output of
                # closed_call`, unstacked where the factor is loop invariant (found by a
                # release campaign on 0.4.36, 1af91f8f3f, beside a custom_vjp's output)
                powers.update([(stacked, "output of closed_call"), (str(t), "output of closed_call")])
    return not missing and bool(extra) and not (_jit_outputs_alike(extra) - powers)


_integer_pow_one_factor.explains = _or_older_moves(_integer_pow_one_factor_saved.explains,  # composes as the
                                                    integer_pow_small_y_jvp=False)   # additive form


def _eqns_in_loops(prog: Program, lengths=()):
    """Every equation of `prog` at any depth, with the lengths of the scans
    around it (outermost first)."""
    for e in prog.eqns:
        yield e, lengths
        inner = lengths + (e.params["length"],) if e.primitive.name == "scan" else lengths
        for _, sub in subprograms(e.params):
            yield from _eqns_in_loops(sub, inner)


# moves no literal, so also against baselines without the literals JAX
# lacks (a scan's entries reordered beside a literal left out: found on 0.4.25)
@functools.partial(additive, literals_apart=True)
def _scan_residual_order(got, want, ctx):
    """Same residuals as the baseline, and only `output of scan` / `output
    of cond` entries are out of place."""
    return (got != want and collections.Counter(got) == collections.Counter(want)
            and all(g[1] in _LOOP_OUTPUTS and w[1] in _LOOP_OUTPUTS for g, w in zip(got, want) if g != w))


_LOOP_OUTPUTS = ("output of scan", "output of cond")


# moves no literal, so also against baselines without the literals JAX
# lacks (a scan's entries reordered beside a literal left out: found on 0.4.25)
@functools.partial(additive, literals_apart=True)
def _jit_residual_order(got, want, ctx):
    """Same residuals as the baseline, in a program with a jit, and only
    what a jit's known half returns out of place: outputs of jitted
    functions (and of scans and conds, `_scan_residual_order`'s), and the
    constants it closes over (found on 0.4.25: two constants saved in the
    order of the jit outputs reading them)."""
    moved = [(g, w) for g, w in zip(got, want) if g != w]
    return (bool(moved) and collections.Counter(got) == collections.Counter(want)
            and any(e.primitive.name == "call" for e in _eqns(ctx.program))
            and all(_returned_by_a_jit(g[1]) and _returned_by_a_jit(w[1]) for g, w in moved))


@functools.partial(additive, literals_apart=True)
def _instantiated_zeros_earlier(got, want, ctx):
    """Same residuals as the baseline, and only `output of broadcast_in_dim`
    entries (zeros a JVP rule instantiated) out of place: without them the
    lists are equal."""
    zero = lambda r: r[1] == "output of broadcast_in_dim"
    return (got != want and collections.Counter(got) == collections.Counter(want)
            and [r for r in got if not zero(r)] == [r for r in want if not zero(r)])


def _returned_by_a_jit(source: str) -> bool:
    """A residual source a jit's known half can return: an output of the
    jit (or of a loop in it), or a constant it closes over."""
    return _is_jit_output(source) or source == "from a constant" or source in _LOOP_OUTPUTS


# The divergences that move residuals and change nothing else, each with
# the entries it moves.
_ORDER_ONLY = {
    "jit-residuals-in-another-order": (_jit_residual_order, lambda r: _returned_by_a_jit(r[1])),
    "scan-residuals-in-another-order": (_scan_residual_order, lambda r: r[1] in _LOOP_OUTPUTS),
    "jvp-partial-eval-saves-instantiated-zeros-in-another-order": (
        _instantiated_zeros_earlier, lambda r: r[1] == "output of broadcast_in_dim"),
}


def _orders_explaining(got, want, ctx) -> tuple:
    """The active order-only divergences, one or two, whose moves make
    `want` into `got`: one alone, or a first one's moves then a second's
    on top (found on 0.4.36: a JVP's instantiated zero listed earlier and a
    scan's outputs in another order at once). The list between them is
    `want` with the first's entries laid out as in `got`, or `got` with the
    others laid out as in `want`. () if none do."""
    if got == want or collections.Counter(got) != collections.Counter(want):
        return ()
    active = {name: entry for name, entry in _ORDER_ONLY.items() if _active(name)}
    for name, (order, _) in active.items():
        if order.explains(got, want, ctx):
            return (name,)
    for (first, (first_order, moves)), (second, (second_order, _)) in itertools.permutations(active.items(), 2):
        for middle in (_laid_out(want, got, moves), _laid_out(got, want, lambda r: not moves(r))):
            if first_order.explains(middle, want, ctx) and second_order.explains(got, middle, ctx):
                return first, second
    return ()


def _laid_out(base: list, order: list, selected: Callable) -> list:
    """`base` with its `selected` entries in the places they had, but in the
    order `order` lists them (two lists equal as multisets)."""
    taken = iter([r for r in order if selected(r)])
    return [next(taken) if selected(r) else r for r in base]


def _in_another_order(got, want, ctx) -> bool:
    """`got` is `want` in the order active order-only divergences explain
    (for a divergence that replaces entries in place: found on 0.6.2,
    approx_top_k's old indices beside a scan's residuals in 0.6.2's
    order)."""
    return bool(_orders_explaining(got, want, ctx))


def _reordered(ctx: Context) -> Divergence | None:
    """Two order-only divergences that together explain JAX's residual
    list against a baseline (`_orders_explaining`), as one divergence."""
    if ctx.property != "residuals" or ctx.jax_residuals is None or ctx.spec_residuals is None:
        return None
    for want in ctx.baselines_with_python_type_literals():
        for got in (ctx.jax_residuals, _normalised_against(ctx, want)):
            names = _orders_explaining(got, want, ctx)
            if len(names) == 2:
                return _together([next(d for d in DIVERGENCES if d.name == n) for n in names])
    return None


def _atan2_old_jvp(ctx):
    """JAX's residuals are the spec's following atan2's JVP in y before jax
    0.5.3, `(g * -x) / d` (spec.semantics: atan2_jvp_divides_first=False:
    under any policy, e.g. one saving div, found writing a test on 0.4.36),
    or, composing with other additive divergences, its factors saved beside
    a baseline (`_atan2_old_factors`)."""
    return _atan2_old_factors(ctx) or (has_primitive(ctx.program, "atan2")
                                       and _follows_an_older_choice(ctx, atan2_jvp_divides_first=False))


@additive
def _atan2_old_factors(got, want, ctx):
    """Per atan2 equation of a type: the baseline's `output of div` (y's
    tangent factor) replaced by an `output of neg` and an `output of add`;
    for one whose saved values all take the name of an equation around it
    (`_atan2s_named_around`), one more of that name."""
    extra, missing = _difference(got, want)
    atan2s = collections.Counter(str(e.outputs[0].type) for e in _eqns(ctx.program) if e.primitive.name == "atan2")
    if not (missing or extra) or any(s != "output of div" or n > atan2s[t] for (t, s), n in missing.items()):
        return False
    want = collections.Counter()
    for (t, _), n in missing.items():
        want[(t, "output of neg")] += n
        want[(t, "output of add")] += n
    named_around_extra = _jit_outputs_alike(extra) - want
    return not (want - _jit_outputs_alike(extra)) and not (named_around_extra - _atan2s_named_around(ctx.program))


_atan2_old_jvp.explains = _or_older_moves(_atan2_old_factors.explains,     # composes as the additive form
                                          atan2_jvp_divides_first=False)


def _atan2s_named_around(prog: Program, in_checkpoint: bool = False) -> "collections.Counter":
    """(type, name) per atan2 equation inside a jit body (its saved values
    are outputs of the jitted function: found on 0.4.25), a cond branch
    (outputs of the cond: found on 0.4.36) or a checkpoint nested in a
    checkpoint (saved out of the enclosing one's known half, outputs of
    remat2: found by a campaign on 0.4.36), named by the outermost one."""
    out = collections.Counter()
    for e in prog.eqns:
        name = {"call": _JIT_OUTPUT, "cond": "output of cond"}.get(e.primitive.name)
        if e.primitive.name == "remat" and in_checkpoint:
            name = "output of remat2"
        for _, sub in subprograms(e.params):
            if name is None:
                out += _atan2s_named_around(sub, in_checkpoint or e.primitive.name == "remat")
                continue
            out.update((str(q.outputs[0].type), name) for q in _eqns(sub) if q.primitive.name == "atan2")
    return out


CUSTOM_VJP_JVP_ERROR = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."
CUSTOM_LIN_JVP_ERROR = "Differentiation rule for 'custom_lin' not implemented"


# _custom_vjp_call_jaxpr_vmap's miscount (jax 0.4.25 to 0.6.0), in safe_zip's words
CUSTOM_VJP_VMAP_ZIP_ERROR = "safe_zip() argument 2 is longer than argument 1"


def _custom_vjp_in_a_batched_cond_miscounts(ctx) -> bool:
    """JAX raised safe_zip's ValueError (CUSTOM_VJP_VMAP_ZIP_ERROR) where
    the spec computes, for a stack (two vmaps and an AD layer outside them
    are what reach the bug), and a cond branch of the checked function
    holds a custom_vjp call, at any depth."""
    if not (isinstance(ctx.error, ValueError) and str(ctx.error) == CUSTOM_VJP_VMAP_ZIP_ERROR
            and ctx.spec_error is None and ctx.property == "stack"):
        return False
    return any(e.primitive is cond_p and any(has_primitive(b, "custom_vjp_call") for b in e.params["branches"])
               for e in all_eqns(ctx.user_program))


def _custom_vjp_of_an_instantiated_zero(ctx) -> bool:
    """JAX raised custom_lin's TypeError (CUSTOM_VJP_JVP_ERROR), and a
    custom_vjp call of the checked function takes a float operand whose
    tangent the spec's linearization knows is zero (`zero_tangents`), in a
    program with an integer_pow(x, 0): JAX's rule for it returns
    instantiated zeros, a known value, so partial evaluation evaluates the
    custom_vjp's custom_lin, whose impl raises (found by a campaign on
    0.6.2: such a custom_vjp in a cond branch)."""
    return _custom_vjp_reads_a_zero_tangent(ctx, _eqns)


def _custom_vjp_in_a_checkpoint_of_an_instantiated_zero(ctx) -> bool:
    """As `_custom_vjp_of_an_instantiated_zero`, for a custom_vjp call in a
    checkpoint's body (remat_jvp's jvp_jaxpr instantiates the zero there
    still: found by a pristine nightly on 0.10.2, 76ea18f422)."""
    in_checkpoints = lambda prog: (q for e in _eqns(prog) if e.primitive.name == "remat"
                                   for q in _eqns(e.params["jaxpr"]))
    if (isinstance(ctx.error, NotImplementedError) and str(ctx.error) == CUSTOM_LIN_JVP_ERROR
            and isinstance(ctx.spec_error_too, TypeError) and str(ctx.spec_error_too) == CUSTOM_VJP_JVP_ERROR):
        # differentiating the pullback again (second order), JAX meets that
        # custom_lin in forward mode, where the spec refuses the custom_vjp's
        ctx = dataclasses.replace(ctx, error=ctx.spec_error_too)
    return _custom_vjp_reads_a_zero_tangent(ctx, in_checkpoints)


def _custom_vjp_reads_a_zero_tangent(ctx, eqns_of: Callable) -> bool:
    """JAX raised custom_lin's TypeError, the checked function has an
    integer_pow(x, 0), and a custom_vjp call among eqns_of(program) takes a
    float operand whose tangent the spec knows is zero (`zero_tangents`)."""
    prog = ctx.user_program
    if not (isinstance(ctx.error, TypeError) and str(ctx.error) == CUSTOM_VJP_JVP_ERROR
            and any(e.primitive.name == "integer_pow" and e.params["y"] == 0 for e in _eqns(prog))):
        return False
    zero = zero_tangents(prog)
    return any(isinstance(a, Var) and is_float(a.type.dtype) and a.id in zero
               for e in eqns_of(prog) if e.primitive.name == "custom_vjp_call" for a in e.inputs)


def _ragged_dot_impl_vmap_axes(ctx) -> bool:
    """JAX raised its vmap's TypeError for numpy integer in_axes, and the
    checked program has a ragged_dot_general (see the divergence)."""
    return (isinstance(ctx.error, TypeError)
            and "vmap in_axes must be an int, None, or (nested) container" in str(ctx.error)
            and has_primitive(ctx.user_program, "ragged_dot_general"))


def _ragged_dot_zero_cotangent(ctx) -> bool:
    """JAX raised TypeError for a symbolic Zero passed as an array, and the
    checked program has a ragged_dot_general (see the divergence)."""
    return (isinstance(ctx.error, TypeError) and "Argument 'Zero(" in str(ctx.error)
            and "is not a valid JAX type" in str(ctx.error)
            and has_primitive(ctx.user_program, "ragged_dot_general"))


def _missing_rule(kind: str, rule_of: str = "optimization_barrier", beside: str | None = None):
    """JAX raised NotImplementedError: "<kind> rule for '<rule_of>' not
    implemented", and the checked function has a `beside` equation (by
    default `rule_of` itself; a dead one too, which a stack level's spec
    program drops and JAX differentiates: found on 0.4.36, linearize o grad)."""
    def applies(ctx):
        return (isinstance(ctx.error, NotImplementedError)
                and f"{kind} rule for '{rule_of}' not implemented" in str(ctx.error)
                and has_primitive(ctx.user_program, beside or rule_of))
    return applies


def _custom_vjp_outputs_as_saved(prog: Program, top_level: bool) -> "collections.Counter":
    """The entries saved_residuals gives a custom_vjp_call's primal outputs
    saved as residuals (lax.tie_p ties them to the tangents): per output of
    one in a scan body an `output of scan` (stacked; or, in a jit, an
    output of the jit: found on 0.4.25; or hoisted where it is loop
    invariant, as its rule computes it), in a jit body an
    `output of jitted function 'f'`, in a cond branch an `output of cond`;
    with `top_level`, of one at the top level, what the forward rule
    (inlined) computes it with."""
    out = collections.Counter()
    for e in prog.eqns if top_level else ():
        if e.primitive.name == "custom_vjp_call":
            body = e.params["jaxpr"]
            out.update((str(v.type), str(source_of(b, body))) for v, b in zip(e.outputs, body.outputs))
    for e in _eqns(prog):
        if e.primitive.name == "cond":      # in a cond branch: an output of the cond (found on 0.4.36),
            # stacked by the scans around it in the branch
            out.update((str(ArrayType(tuple(lengths) + v.type.shape, v.type.dtype)), "output of cond")
                       for b in e.params["branches"] for c, lengths in _eqns_in_loops(b)
                       if c.primitive.name == "custom_vjp_call" for v in c.outputs)
        if e.primitive.name in ("scan", "call"):
            calls = [c for c in _eqns(e.params["jaxpr"]) if c.primitive.name == "custom_vjp_call"]
            ties = [v for c in calls for v in c.outputs]
            if e.primitive.name == "scan":
                # loop-invariant (a call on the scan's consts): hoisted, named by
                # what its rule computes it with (found on 0.4.36)
                out.update((str(v.type), str(source_of(b, c.params["jaxpr"]))) for c in calls
                           for v, b in zip(c.outputs, c.params["jaxpr"].outputs))
            else:
                out.update((str(v.type), _JIT_OUTPUT) for v in ties)
                # the jit's output named after it: saved_residuals gives the
                # residual that name (found by a release campaign on 0.4.36,
                # f66bf52fa5)
                returned = {id(v) for v in ties}
                outs = {id(o) for o, b in zip(e.outputs, e.params["jaxpr"].outputs) if id(b) in returned}
                out.update((str(q.outputs[0].type), f"named '{q.params['name']}'") for q in _eqns(prog)
                           if q.primitive.name == "name" and id(q.inputs[0]) in outs)
    # stacked by every scan around it (a scan in a scan: found on 0.4.25), or
    # by those it varies in alone, the others hoisting it (an inner scan on
    # an outer scan's const: found on 0.4.25; a call on an inner scan's
    # const: found by a campaign on 0.4.36): an output of the outermost scan,
    # or of a jit around
    for c, lengths in _eqns_in_loops(prog):
        if c.primitive.name == "custom_vjp_call" and lengths:
            stacked = _stacked_types(c, lengths)
            out.update([(t, "output of scan") for t in stacked] + [(t, _JIT_OUTPUT) for t in stacked])
    # in a checkpoint's body a scan is split by partial_eval_jaxpr_custom, whose
    # known half is a closed_call: the stacked output an `output of
    # closed_call` (found by a campaign on 0.4.36, finding 19982c283c); that
    # checkpoint nested in another's body is one more known half, the outer
    # split names it by the nested checkpoint: `output of remat2` (found by a
    # campaign on 0.4.36, 7f4241c512)
    for e in _eqns(prog):
        if e.primitive.name == "remat":
            body = e.params["jaxpr"]
            stacked = [t for c, lengths in _eqns_in_loops(body)
                       if c.primitive.name == "custom_vjp_call" and lengths for t in _stacked_types(c, lengths)]
            out.update((t, "output of closed_call") for t in stacked)
            out.update((t, "output of remat2") for inner in _eqns(body) if inner.primitive.name == "remat"
                       for c, lengths in _eqns_in_loops(inner.params["jaxpr"])
                       if c.primitive.name == "custom_vjp_call" and lengths for t in _stacked_types(c, lengths))
    return out


def _stacked_types(call, lengths) -> list:
    """The types of `call`'s outputs stacked by some of the scans around it
    (`lengths`, outermost first), at least one: by all, or by those it
    varies in alone where the others hoist it."""
    varying_in = [kept for n in range(1, len(lengths) + 1) for kept in itertools.combinations(lengths, n)]
    return [str(ArrayType(tuple(kept) + v.type.shape, v.type.dtype)) for v in call.outputs for kept in varying_in]


_JIT_OUTPUT = "output of a jitted function"    # `output of jitted function 'f'`, `output of pjit`


def _is_jit_output(source: str) -> bool:
    """saved_residuals' name for an output of a jitted function, either
    spelling (`output of pjit` before jax 0.4.34)."""
    return source.startswith("output of jitted function ") or source == "output of pjit"


def _jit_outputs_alike(entries) -> "collections.Counter":
    out = collections.Counter()
    for (t, s), n in entries.items():
        out[(t, _JIT_OUTPUT if _is_jit_output(s) else s)] += n
    return out


def _custom_vjp_outputs_saved(got, want, ctx, top_level: bool) -> bool:
    """JAX's list `got` is the baseline `want` plus some of the entries of
    custom_vjp outputs saved as residuals (`_custom_vjp_outputs_as_saved`),
    at least one."""
    extra, missing = _difference(got, want)
    return not missing and bool(extra) and not (_jit_outputs_alike(extra)
                                                - _custom_vjp_outputs_as_saved(ctx.program, top_level))


@additive
def _custom_vjp_output_in_scan(got, want, ctx):
    """JAX's list is the baseline's plus entries of the outputs of
    custom_vjp calls in scan or jit bodies saved as residuals."""
    return _custom_vjp_outputs_saved(got, want, ctx, top_level=False)


@additive
def _custom_vjp_output_anywhere(got, want, ctx):
    """... of a custom_vjp call at the top level too (not only in bodies)."""
    return (_custom_vjp_outputs_saved(got, want, ctx, top_level=True)
            and not _custom_vjp_outputs_saved(got, want, ctx, top_level=False))


@additive
def _custom_vjp_in_checkpoint_saves_checkpoint_inputs(got, want, ctx):
    """JAX's list is the baseline's plus entries of checkpoints whose bodies
    call a custom_vjp (`_custom_vjp_checkpoint_entries`), at least one."""
    extra, missing = _difference(got, want)
    return not missing and bool(extra) and not (_jit_outputs_alike(extra)
                                                - _or_rounded(_custom_vjp_checkpoint_entries(ctx.program)))


def _custom_vjp_checkpoint_entries(prog: Program, nested: bool = False, source=None) -> "collections.Counter":
    """For each checkpoint whose body calls a custom_vjp, at most one entry
    per: its input, name there of the custom_vjp's output, or that output
    as its rule computes it (in a checkpoint, an input or output saved out
    of the enclosing one's known half: an `output of remat2`, found on
    0.4.25 and 0.4.36). A checkpoint in a jit counts too: what it saves is
    an output of the jit, or the jit's operand where it saves an argument
    (pjit's partial evaluation forwards it: found by a campaign on 0.4.36)."""
    source = source or (lambda a: str(source_of(a, prog)))
    allowed = collections.Counter()
    for e in prog.eqns:
        if e.primitive.name == "call":
            body = e.params["jaxpr"]
            operand = {v.id: a for v, a in zip(body.inputs, e.inputs)}
            inner = _custom_vjp_checkpoint_entries(body, nested, lambda a: (
                source(operand[a.id]) if isinstance(a, Var) and a.id in operand else _JIT_OUTPUT))
            allowed.update(inner)   # each also as what the jit returns
            allowed.update({(t, _JIT_OUTPUT): n for (t, _), n in inner.items()})
        body = e.params["jaxpr"] if e.primitive.name == "remat" else None
        if body is None:
            continue
        allowed.update(_custom_vjp_checkpoint_entries(body, nested=True))
        # (one in a jit in the body too: found by a campaign on 0.4.25)
        calls = [c for c in _eqns(body) if c.primitive.name == "custom_vjp_call"]
        if not calls:
            continue
        allowed.update({(str(a.type), "output of remat2" if nested else source(a))
                        for a in e.inputs if isinstance(a, Var)})
        outs = {v.id for c in calls for v in c.outputs}
        allowed.update({(str(c.outputs[0].type), f"named '{c.params['name']}'") for c in body.eqns
                        if c.primitive.name == "name" and getattr(c.inputs[0], "id", None) in outs})
        # or the outputs themselves where the policy saves what computes them
        # (`output of sin` under save_only_these(sin): found on 0.4.36), in
        # a nested checkpoint saved out of the enclosing one (found on 0.4.25
        # and 0.4.36)
        allowed.update({(str(v.type), "output of remat2" if nested else str(source_of(b, c.params["jaxpr"])))
                        for c in calls for v, b in zip(c.outputs, c.params["jaxpr"].outputs)})
        if not nested:
            allowed.update(_operand_ancestry_entries(body, calls))
    return allowed


def _operand_ancestry_entries(body: Program, calls: list) -> set:
    """The entries of the values a checkpoint body computes its custom_vjp
    calls' operands from (JAX recomputes the operands, and saves what the
    policy lets it on the way: a named value, found by a release campaign
    on 0.4.36, 913246c3cf, and on 0.4.25 named by its name, as
    saved_residuals names a checkpoint_name's input there)."""
    needed = {a.id for c in calls for a in c.inputs if isinstance(a, Var)}
    entries = set()
    for e in reversed(body.eqns):
        if not any(v.id in needed for v in e.outputs):
            continue
        needed.update(a.id for a in e.inputs if isinstance(a, Var))
        for v in e.outputs:
            entries.add((str(v.type), str(source_of(v, body))))
            if e.primitive.name == "name":
                entries.add((str(v.type), f"named '{e.params['name']}'"))
    return entries


def _or_rounded(allowed: "collections.Counter") -> "collections.Counter":
    """`allowed`, where the release names a value remat rounds `output of
    reduce_precision` (the normalisation saved-residuals-names-reduce_precision:
    it renames only entries the spec's list has, not a divergence's extra
    ones), with each float entry also under that name (found on 0.4.36: a
    custom_vjp's output a checkpoint saves, rounded)."""
    rounding = next(n for n in NORMALIZATIONS if n.name == "saved-residuals-names-reduce_precision")
    if not holds(rounding.releases):
        return allowed
    out = collections.Counter(allowed)
    for (t, s), n in allowed.items():
        if t.startswith(("f", "bf")) and s != "from a literal":
            out[(t, "output of reduce_precision")] += n
    return out


def _sort_old_jvp(ctx):
    """JAX's residuals are the spec's following the old rule (spec.semantics:
    sort_jvp_gathers_along_its_dimension=False; whatever a policy saves of
    the old indices: a policy saving `add` saves their wrapping, found by a
    campaign on 0.4.36, 5423eff2fe), or, composing with the other additive
    divergences, the baseline's with the old permutation in place of the
    new (`_sort_jvp_int32_permutation`)."""
    return _sort_jvp_int32_permutation(ctx) or (
        has_primitive(ctx.program, "sort") and _follows_an_older_choice(ctx, sort_jvp_gathers_along_its_dimension=False))


@additive
def _sort_jvp_int32_permutation(got, want, ctx):
    """JAX's list is the baseline's with each `u32[s..., 1]` entry (the
    permutation sort's JVP gathers with, s a sort operand's shape) replaced
    by the old rule's indices, one per sorted operand: `i32` instead, same
    provenance, for an operand of rank 1; for rank r >= 2 the indices of
    every dimension, `i32[s..., r]`, an `output of concatenate` (t[idx]
    with a tuple of index arrays), or in a jit, a cond or a scan its output."""
    extra, missing = _difference(got, want)
    operands = collections.Counter()
    for e in _eqns(ctx.program):
        if e.primitive.name == "sort":
            operands[e.inputs[0].type.shape] = max(operands[e.inputs[0].type.shape], len(e.inputs))
    allowed = collections.Counter()
    for (wt, ws), m in missing.items():
        shape = _parse_shape(wt)[:-1] if wt.startswith("u32[") else None
        if shape not in operands or _parse_shape(wt)[-1] != 1:
            return False
        if len(shape) == 1:
            allowed[("i32" + wt[len("u32"):], ws)] += m * operands[shape]
        else:
            indices = str(ArrayType(shape + (len(shape),), np.int32))
            jit = _jit_outputs_alike({(wt, ws): 1})
            allowed[(indices, "output of concatenate")] += m * operands[shape]
            if (wt, _JIT_OUTPUT) in jit:        # in a jit: the jit's output (found on 0.4.36)
                allowed[(indices, _JIT_OUTPUT)] += m * operands[shape]
            if ws in _LOOP_OUTPUTS:     # in a cond branch or a scan: its output (found on 0.4.25, ee786fb53a)
                allowed[(indices, ws)] += m * operands[shape]
    return (bool(missing) and sum(extra.values()) >= sum(missing.values())
            and not (_jit_outputs_alike(extra) - _jit_outputs_alike(allowed)))


_sort_old_jvp.explains = _or_older_moves(_sort_jvp_int32_permutation.explains,     # composes as the additive
                                         sort_jvp_gathers_along_its_dimension=False)   # form


def _top_k_old_jvp(ctx):
    """JAX's residuals are the spec's following the old rule (spec.semantics:
    top_k_jvp_batches_its_gather=False; whatever a policy saves of the old
    indices), or, composing with the other additive divergences, the
    baseline's with the old indices in place of the new
    (`_top_k_old_indices`)."""
    return _top_k_old_indices(ctx) or (has_primitive(ctx.program, "top_k")
                                       and _follows_an_older_choice(ctx, top_k_jvp_batches_its_gather=False))


@additive
def _top_k_old_indices(got, want, ctx):
    """JAX's list is the baseline's with `i32[s, 1]` entries (the indices
    top_k's JVP gathers the tangent with, s a top_k output's shape) those
    of every dimension, `i32[s, r]` an `output of concatenate` (r the
    operand's rank), in the same place; in a jit both outputs of the jit
    (found on 0.4.25)."""
    return _old_gather_indices(got, want, ctx, "top_k", lambda source: source == "output of reshape")


_top_k_old_jvp.explains = _or_older_moves(_top_k_old_indices.explains,     # composes as the additive form
                                          top_k_jvp_batches_its_gather=False)


def _approx_top_k_old_jvp(ctx):
    """As `_top_k_old_jvp`, for approx_top_k (spec.semantics:
    approx_top_k_jvp_takes_along_axis=False; found on 0.6.2: a policy
    saving `add` saves the old rule's normalised indices)."""
    return _approx_top_k_old_indices(ctx) or (
        has_primitive(ctx.program, "approx_top_k")
        and _follows_an_older_choice(ctx, approx_top_k_jvp_takes_along_axis=False))


@additive
def _approx_top_k_old_indices(got, want, ctx):
    """As `_top_k_old_indices`, for approx_top_k, whose new indices are an
    output of the jitted take_along_axis (found on 0.4.25)."""
    return _old_gather_indices(got, want, ctx, "approx_top_k", _is_jit_output)


_approx_top_k_old_jvp.explains = _or_older_moves(_approx_top_k_old_indices.explains,
                                                 approx_top_k_jvp_takes_along_axis=False)


def _lu_old_jvp(ctx):
    """JAX's residuals are the spec's following lu's JVP rule before jax
    0.5.3 (spec.semantics: lu_jvp_vmaps_its_inner_rule=False: the tangent's
    rows permuted first, with the indices of every batch dimension; whatever
    a policy saves of them: one saving select_n saves the permutation's
    wrapping before the triangular masks, release campaign finding
    b91e39e751 on 0.4.25), or the baseline's with the old indices in place
    of the new (`_lu_old_indices`), the form that composes with the other
    additive divergences (measured on 0.4.25 and 0.4.36: a jitted
    custom_vjp's saved output beside a batched lu's indices, which neither
    the older rule alone nor `_older_rules_together` explains)."""
    return _lu_old_indices(ctx) or (has_primitive(ctx.program, "lu")
                                    and _follows_an_older_choice(ctx, lu_jvp_vmaps_its_inner_rule=False))


@additive
def _lu_old_indices(got, want, ctx):
    """The lists are the same but for lu's row indices: JAX's those of every
    batch dimension and the row (`i32[..., m, r - 1]`, an output of
    concatenate, computed before the rule's products, so listed first) where
    the baseline has the row's alone (`i32[..., m, 1]`, an output of
    broadcast_in_dim), as many of each, for an lu of such a permutation
    shape (found by a campaign on 0.4.36); in a jit, both outputs of the
    jit (found by a release campaign on 0.4.36, 32563e1dfd)."""
    widths = {e.outputs[2].type.shape: len(e.inputs[0].type.shape) - 1 for e in _eqns(ctx.program)
              if e.primitive.name == "lu"}
    old = lambda r: r[0].startswith("i32[") and (r[1] == "output of concatenate" or _is_jit_output(r[1])) and \
        _parse_shape(r[0])[:-1] in widths and _parse_shape(r[0])[-1] == widths[_parse_shape(r[0])[:-1]]  # noqa: E731
    new = lambda r: r[0].startswith("i32[") and (r[1] == "output of broadcast_in_dim" or _is_jit_output(r[1])) and \
        _parse_shape(r[0])[:-1] in widths and _parse_shape(r[0])[-1:] == (1,)  # noqa: E731  (a scalar: a campaign, 7adaa5c246)
    got_old, want_new = [r for r in got if old(r)], [r for r in want if new(r)]
    if not got_old or sorted(_parse_shape(r[0])[:-1] for r in got_old) != sorted(
            _parse_shape(r[0])[:-1] for r in want_new):
        return False
    # each old entry in its place as the new one (in a jit, in the order an
    # order-only divergence gives the jit's outputs: found on 0.4.36)
    by_shape = collections.defaultdict(list)
    for r in want_new:
        by_shape[_parse_shape(r[0])[:-1]].append(r)
    replaced = [by_shape[_parse_shape(r[0])[:-1]].pop(0) if old(r) else r for r in got]
    return replaced == want or _in_another_order(replaced, want, ctx)


_lu_old_jvp.explains = _or_older_moves(_lu_old_indices.explains,       # composes as the additive form
                                       lu_jvp_vmaps_its_inner_rule=False)


def _old_gather_indices(got, want, ctx, prim: str, new_source: Callable) -> bool:
    """The lists differ only where the baseline has the `i32[s, 1]` indices
    `prim`'s JVP gathers its tangent with (s the shape of an output of a
    `prim` equation; their source `new_source`) and JAX those of every
    dimension (`i32[s, r]`, an `output of concatenate`, r the operand's
    rank), or, in a jit, both outputs of the jit: in the same place, or
    where an order-only divergence moves residuals, in its order (a jit's
    outputs: found on 0.6.2, approx_top_k's indices listed first)."""
    shapes = {e.outputs[0].type.shape: len(e.inputs[0].type.shape) for e in _eqns(ctx.program)
              if e.primitive.name == prim}
    extra, missing = _difference(got, want)
    if not missing or sum(extra.values()) != sum(missing.values()):
        return False
    new_of = {}         # an old-indices entry of JAX's -> the baseline's entries it stands for
    for w in missing.elements():
        old = next((g for g in extra if extra[g] > 0 and _old_indices_for(g, w, shapes, new_source)), None)
        if old is None:
            return False
        extra[old] -= 1
        new_of.setdefault(old, []).append(w)
    replaced = [new_of[g].pop(0) if new_of.get(g) else g for g in got]
    return replaced == want or _in_another_order(replaced, want, ctx)


def _old_indices_for(old, new, shapes: dict, new_source: Callable) -> bool:
    """JAX's entry `old` is the old rule's indices where the baseline has
    the new rule's `new` (see _old_gather_indices)."""
    (gt, gs), (wt, ws) = old, new
    if not (wt.startswith("i32[") and gt.startswith("i32[")
            and ((new_source(ws) and gs == "output of concatenate") or (_is_jit_output(ws) and _is_jit_output(gs)))):
        return False
    w_shape, g_shape = _parse_shape(wt), _parse_shape(gt)
    # (a scalar, a cond's index that a jit returns, is no gather's indices: found on 0.4.25, ce3dd944e1)
    return (bool(w_shape) and w_shape[-1] == 1 and w_shape[:-1] in shapes
            and g_shape == w_shape[:-1] + (shapes[w_shape[:-1]],))


def _parse_shape(printed_type: str) -> tuple:
    """The shape of a printed spec type (`u32[3,5,1]` -> (3, 5, 1))."""
    dims = printed_type[printed_type.index("[") + 1:-1]
    return tuple(int(d) for d in dims.split(",") if d)


def _linearized_zero_output_leaks(ctx):
    """A transformation stack's numbers (the stack ends in linearize: its
    jit returns the linear function, a second jit calls it), and JAX raised
    the error the known output of such a function raises there: an escaped
    tracer (before 0.6), an unhashable Literal in its static data, or a
    compiled call one argument short."""
    e = ctx.error
    return (ctx.property == "stack" and e is not None and (
        (type(e).__name__ == "UnexpectedTracerError" and "DynamicJaxprTracer" in str(e))
        or (isinstance(e, TypeError) and "unhashable type: 'Literal'" in str(e))
        # 0.4.36: the known output is a constant of the compiled call, one
        # argument short (found by a campaign on 0.4.36)
        or (isinstance(e, TypeError) and re.search(r"Computation compiled for \d+ inputs but called with", str(e)))))


@additive
def _zero_power_literal(got, want, ctx):
    """JAX's list is the baseline's plus at most one zero per
    integer_pow[y=0]: a scalar `from a literal` of its dtype, or (an array
    power) an `output of broadcast_in_dim` of its type, or in a scan body
    an `output of scan` of its stacked type, or a later equation's product
    with it; or a cond branch's zero the spec saves and JAX does not, or a
    scan body's the spec saves once where JAX saves a stacked product."""
    extra, missing = _difference(got, want)
    zeros = collections.Counter()
    factor_types = collections.Counter()    # a type -> how many later equations make one
    for e, lengths in _eqns_in_loops(ctx.program):
        if e.primitive.name == "integer_pow" and e.params["y"] == 0:
            t = e.outputs[0].type
            zeros[(str(t).split("[")[0] + "[]", "from a literal")] += 1
            zeros[(str(t).split("[")[0] + "[]", _JIT_OUTPUT)] += 1   # in a jit: its output (found on 0.6.2)
            if t.shape:
                zeros[(str(t), "output of broadcast_in_dim")] += 1
                zeros[(str(t), _JIT_OUTPUT)] += 1       # the broadcast zero, a jit's output (found on 0.4.36)
            if lengths:     # in a scan body: stacked, an output of the scan (found on 0.4.25)
                zeros[(str(ArrayType(tuple(lengths) + t.shape, t.dtype)), "output of scan")] += 1
            # the known zero times a primal in a later equation's JVP (mul(a, 0)
            # in a * x**0's, a dot_general's, through a checkpoint: found on
            # 0.4.25 and 0.4.36), its product saved instead
            # (one entry of its type per later equation: its product with the
            # zero, `output of mul` or of that equation's primitive, or its
            # JVP's factor, whatever makes it: cos's `neg` of sin, in a scan
            # body reading the zero as a const, found on 0.4.36)
            for r in _downstream(ctx.program, e.outputs[0]):
                factor_types[str(r.outputs[0].type)] += 1
    # in a jit whatever it saves is the jit's output (a scan's stacked one too: found on 0.4.36)
    zeros |= collections.Counter({(t, _JIT_OUTPUT): n for (t, _), n in zeros.items()})
    # at most the zero itself and, in each later equation's JVP, its product
    # (a + a**0 and a * a**0 at once save both: found on 0.4.25)
    n_zeros = sum(1 + len(_downstream(ctx.program, e.outputs[0])) for e in _eqns(ctx.program)
                  if e.primitive.name == "integer_pow" and e.params["y"] == 0)
    # a cond branch's zero power: the spec's cond saves its instantiated zero
    # tangent, JAX's partial evaluation knows it (found on 0.4.25)
    branch_zeros = collections.Counter(
        (str(p.outputs[0].type), "output of cond") for c in _eqns(ctx.program) if c.primitive.name == "cond"
        for b in c.params["branches"] for p in _eqns(b) if p.primitive.name == "integer_pow" and p.params["y"] == 0)
    # in a scan body, the zero the spec saves once (loop invariant) where JAX
    # saves a stacked product of it instead (found on 0.4.36): one change; in
    # a jit, what the jit returns (found by a campaign on 0.6.2)
    missing = _jit_outputs_alike(missing)
    swapped = missing & collections.Counter(
        (str(e.outputs[0].type), source) for e, lengths in _eqns_in_loops(ctx.program)
        if lengths and e.primitive.name == "integer_pow" and e.params["y"] == 0
        for source in ("output of broadcast_in_dim", _JIT_OUTPUT))
    missing = missing - swapped
    unexplained = _jit_outputs_alike(extra) - zeros
    for (t, src), n in list(unexplained.items()):   # one per later equation of its type
        # (in a jit, what the jit returns: a dot_general's product with a
        # zero power, found by a campaign on 0.6.2)
        if src.startswith("output of ") and (src != _JIT_OUTPUT or has_primitive(ctx.program, "call")):
            taken = min(n, factor_types[t])
            factor_types[t] -= taken
            unexplained[(t, src)] -= taken
    unexplained = +unexplained
    return (bool(extra or missing) and not (missing - branch_zeros) and not unexplained
            and sum(extra.values()) + sum(missing.values()) <= n_zeros)


def _zero_power(ctx) -> bool:
    """JAX's residuals are the spec's linearizing by JVP then partial
    evaluation (spec.semantics: direct_linearization=False:
    a zero power's zero tangent one known value, saved once however many
    tangent equations read it; found on 0.4.36: concatenate([b, c, b]) of
    b = a ** 0 saves one zero, the spec two), or, composing with the other
    additive divergences, a zero or its products saved beside a baseline
    (`_zero_power_literal`)."""
    if _zero_power_literal(ctx):
        return True
    return (any(e.primitive.name == "integer_pow" and e.params["y"] == 0 for e in _eqns(ctx.program))
            and _follows_an_older_choice(ctx, direct_linearization=False))


_zero_power.explains = _zero_power_literal.explains     # composes as the additive form


def _cond_drops_an_effectful_staged_half(ctx) -> bool:
    """The spec's answer differs from JAX's, and the spec following the
    older choice (spec.semantics: cond_stages_effects_alone=False: a cond
    in a checkpoint whose staged half returns nothing is dropped, its
    print not run again) gives JAX's: the spec raised where JAX computed
    and computes so (a nested checkpoint's policy raising when asked), or
    JAX's residuals are that spec's."""
    if not has_primitive(ctx.user_program, "cond") or not any(
            has_effects(e) for e in _eqns(ctx.user_program) if e.primitive.name == "cond"):
        return False
    if ctx.error is None and ctx.spec_error is not None:
        builds = _spec_answers(ctx)
        with following(cond_stages_effects_alone=False):
            try:
                for build in builds:
                    build(ctx.user_program)
            except Exception:       # noqa: BLE001 -- the older spec refuses too: not this
                return False
        return bool(builds)
    return _follows_an_older_choice(ctx, cond_stages_effects_alone=False)


def _cond_scalar_zero_inline(ctx) -> bool:
    """JAX's residuals are the spec's linearizing a cond by its JVP and
    partial evaluation, a branch's scalar zero tangent output inline
    (spec.semantics: cond_saves_scalar_zero_tangents=False)."""
    return has_primitive(ctx.program, "cond") and _follows_an_older_choice(ctx, cond_saves_scalar_zero_tangents=False)


def _downstream(prog: Program, v: Var) -> list:
    """The equations of `prog` (at any depth) whose outputs depend on `v`:
    readers, their readers, and an equation whose sub-program holds one; a
    sub-program's output that is `v` (or depends on it) taints the
    equation's output in its place (x ** 0 returned by a checkpoint and
    multiplied after it: found on 0.4.36 and 0.6.2)."""
    tainted, found = {v.id}, []

    def walk(p: Program) -> bool:
        any_here = False
        for e in p.eqns:
            inner = False
            for _, sub in subprograms(e.params):
                offset = len(e.inputs) - len(sub.inputs)
                if offset >= 0:
                    tainted.update(x.id for x, a in zip(sub.inputs, e.inputs[offset:])
                                   if isinstance(a, Var) and a.id in tainted)
                inner = walk(sub) or inner
                if len(sub.outputs) == len(e.outputs):
                    tainted.update(o.id for o, s in zip(e.outputs, sub.outputs)
                                   if isinstance(s, Var) and s.id in tainted)
            if inner or any(isinstance(a, Var) and a.id in tainted for a in e.inputs):
                found.append(e)
                tainted.update(o.id for o in e.outputs)
                any_here = True
        return any_here
    walk(prog)
    return [e for e in found if not any(o is v for o in e.outputs)]


@functools.partial(additive, literals_apart=True)
def _scan_zero_carry_tangent(got, want, ctx):
    """JAX's list is the baseline's plus at most one entry per float carry
    of each scan or while loop at top level or in a top-level jit: the zero
    its JVP instantiates, a scalar `from a literal` or an array `output of
    broadcast_in_dim` of the carry's type (in a jit, an output of the jit:
    found by a release campaign on 0.6.2, 6a3e4af576)."""
    extra, missing = _difference(got, want)
    return not missing and bool(extra) and not (_jit_outputs_alike(extra) - _zero_carry_tangents(ctx.program))


def _zero_carry_tangents(prog: Program, in_jit: bool = False) -> "collections.Counter":
    """The entries `_scan_zero_carry_tangent` allows for `prog`'s scans and
    while loops (and those of the jits it calls)."""
    zeros = collections.Counter()
    for e in prog.eqns:
        if e.primitive is call_p:
            zeros.update(_zero_carry_tangents(e.params["jaxpr"], in_jit=True))
        if e.primitive.name in ("scan", "while"):
            carries = (e.inputs[e.params["num_consts"]:e.params["num_consts"] + e.params["num_carry"]]
                       if e.primitive.name == "scan" else e.inputs[e.params["cond_nconsts"] + e.params["body_nconsts"]:])
            for a in carries:
                if np.issubdtype(np.dtype(a.type.dtype), np.floating):
                    array = _JIT_OUTPUT if in_jit else "output of broadcast_in_dim"
                    zeros[(str(a.type), "from a literal" if not a.type.shape else array)] += 1
    return zeros


@additive
def _cond_weak_residual_slots(got, want, ctx):
    """JAX's list is the baseline's plus `output of cond` entries (in a jit,
    outputs of the jit: found on 0.6.2 and 0.10.2), per type at most as many
    as the weakly typed float values of that type computed in cond branches
    (`_weak_values`)."""
    extra, missing = _difference(got, want)
    extra = _jit_outputs_alike(extra)
    if missing or not extra or any(src not in ("output of cond", _JIT_OUTPUT) for _, src in extra):
        return False
    weak = collections.Counter()
    for e in _eqns(ctx.program):
        if e.primitive.name == "cond":
            for branch in e.params["branches"]:
                weak.update(str(t) for t in _weak_values(branch))
    return all(n <= weak[t] for (t, _), n in extra.items())


def _weak_values(prog: Program) -> list:
    """The types of the float values `prog` computes (at any depth) that JAX
    types weakly: made from Python float literals only (oracle.to_jax binds
    a scalar f32 Literal as a Python float), a convert_element_type with
    weak_type=True, a loop carry started from one."""
    weak, types = set(), []

    def is_weak(a):
        return (isinstance(a, Literal) and a.is_scalar and is_float(a.type.dtype)) or (
            isinstance(a, Var) and a.id in weak)
    for e in prog.eqns:
        if e.primitive.name == "convert_element_type":
            made = [e.params.get("weak_type", False)] * len(e.outputs)
        elif e.primitive.name == "while":
            n_consts = e.params["cond_nconsts"] + e.params["body_nconsts"]
            made = [is_weak(a) for a in e.inputs[n_consts:]]
        else:
            made = [bool(e.inputs) and all(is_weak(a) for a in e.inputs)] * len(e.outputs)
        for v, w in zip(e.outputs, made):
            if w and is_float(v.type.dtype):
                weak.add(v.id)
                types.append(v.type)
        for _, sub in subprograms(e.params):
            types += _weak_values(sub)
    return types


def _forwarded_input(prog: Program, atom) -> int | None:
    """The input of `prog` that `atom` is, passed through checkpoint and
    call outputs that return their own inputs; None if it is none."""
    producers = {v.id: (e, k) for e in prog.eqns for k, v in enumerate(e.outputs)}
    while isinstance(atom, Var):
        for i, v in enumerate(prog.inputs):
            if v.id == atom.id:
                return i
        if atom.id not in producers or producers[atom.id][0].primitive.name not in ("remat", "call"):
            return None
        e, k = producers[atom.id]
        j = _forwarded_input(e.params["jaxpr"], e.params["jaxpr"].outputs[k])
        if j is None:
            return None
        atom = e.inputs[j]
    return None


def _forwards_an_input(prog: Program) -> bool:
    """Some output of `prog`, or of a program nested in it, is one of its
    inputs, passed through checkpoints or calls (`_forwarded_input`)."""
    return (any(_forwarded_input(prog, a) is not None for a in prog.outputs)
            or any(_forwards_an_input(sub) for e in prog.eqns for _, sub in subprograms(e.params)))


def _stack_program(ctx) -> Program:
    """The program a stack's levels build (dead code removed), or an empty
    one where there is no stack or the spec cannot build it (a level it
    refuses, as a pad transposed for its padding value alone: found by a
    campaign on 0.4.25; or a vmap batching a tie of values batched along
    different axes, vmap o grad, found by a release campaign on 0.4.25,
    29a0207e7b)."""
    empty = Program([], [], [])
    if ctx.without_dead_code is None:
        return empty
    try:
        return ctx.without_dead_code()
    except (ValueError, spec.PrimitiveError, spec.BatchingError):
        return empty


def _batched_dynamic_slice_gradient(ctx) -> bool:
    """A reverse-mode numeric property (vjp, second order, a stack) whose
    values differ, the checked program has a dynamic_slice, and the program
    the spec differentiates for it (a stack's levels) has a gather a vmap
    makes of one with batched start indices: CLIP mode, every sliced
    dimension kept (`_dynamic_slice_batch`). Its indices are unique and
    sorted only until a second vmap batches them beside an unbatched
    operand (`_gather_batch` drops both marks, as JAX's rule does: found by
    a campaign on 0.4.25, dfad72a4a5, grad o vmap o vmap with the operand
    unbatched by the outer vmap), so they are not looked at. Nor are the
    index values: any such program's reverse-mode values may differ on
    these releases. Where the gather's values are dead (vmap o grad o
    vmap: found by a campaign on 0.4.36, df719984dc), the program keeps
    its transpose alone: a scatter-add in CLIP mode, no window dimension
    inserted."""
    if ctx.error is not None or ctx.property not in ("vjp", "second_order", "stack"):
        return False
    if not any(e.primitive.name == "dynamic_slice" for e in _eqns_seen(ctx)):
        return False
    return any(e.params.get("mode") == "clip" and (
        e.primitive.name == "gather" and not e.params["collapsed_slice_dims"]
        or e.primitive.name == "scatter-add" and not e.params["inserted_window_dims"])
        for e in _eqns(_stack_program(ctx)))


QR_JVP_ERROR = "Unimplemented case of QR decomposition derivative"


def _qr_jvp_unimplemented(ctx) -> bool:
    """JAX raised qr_jvp_rule's NotImplementedError, the spec computed, and
    the program factors a wide matrix (m < n) or a non-square one with
    full_matrices: the cases that rule refused before jax 0.10.0."""
    if not (isinstance(ctx.error, NotImplementedError) and str(ctx.error) == QR_JVP_ERROR
            and ctx.spec_error is None):
        return False
    return any(e.primitive.name == "qr" and (e.inputs[0].type.shape[-2] < e.inputs[0].type.shape[-1]
                                             or (e.params["full_matrices"]
                                                 and e.inputs[0].type.shape[-2] != e.inputs[0].type.shape[-1]))
               for e in _eqns_seen(ctx))


SVD_JVP_ERROR = "Singular value decomposition JVP not implemented for full matrices"


def _svd_jvp_of_square_complete_unimplemented(ctx) -> bool:
    """JAX raised _svd_jvp_rule's NotImplementedError, the spec computed, and
    the program factors a square matrix with full_matrices and compute_uv:
    the case that rule refused before jax 0.8.1 (a non-square one it still
    refuses, and so does the spec)."""
    if not (isinstance(ctx.error, NotImplementedError) and str(ctx.error) == SVD_JVP_ERROR
            and ctx.spec_error is None):
        return False
    return any(e.primitive.name == "svd" and e.params["full_matrices"] and e.params["compute_uv"]
               and e.inputs[0].type.shape[-2] == e.inputs[0].type.shape[-1]
               for e in _eqns_seen(ctx))


def _eqns_seen(ctx):
    """The equations of the property's program and of the checked program
    (a stack level's program may have lost one JAX still differentiates: a
    full svd whose JVP binds the reduced one, found on 0.4.36)."""
    yield from _eqns(ctx.program)
    if ctx.user_program is not ctx.program:
        yield from _eqns(ctx.user_program)


def _pjit_residual_forwarding(ctx):
    """A program with an output that forwards an input (`_forwards_an_input`),
    and JAX's reverse pass failed: the IndexError of _pjit_partial_eval's
    `subs_list2`, or a shape rule's TypeError (each states the shapes or
    dimensions it met: concatenate's, add's, and transpose's permutation
    under grad o jvp of a jit returning its input, found on 0.4.25,
    bbb0b9317d), or the lowering's verifier
    error of a jit called with a wrong residual; or reverse-mode values (or
    the residuals it saves) that differ. For a stack, the program its
    levels build (a JVP's tangent passed through is forwarded: found by a
    campaign on 0.4.25, linearize o jvp o jvp of a jitted function)."""
    if ctx.implementation != "remat2":
        return False
    if not (_forwards_an_input(ctx.program) or _forwards_an_input(_stack_program(ctx))):
        return False
    if ctx.error is not None:   # or a wrong residual meets a cotangent of another shape (found on 0.4.25)
        e = str(ctx.error)
        return (isinstance(ctx.error, IndexError) and "list index out of range" in e
                or isinstance(ctx.error, TypeError) and re.search(r"shape|dimension", e)
                or isinstance(ctx.error, ValueError) and "'func.call' op operand type mismatch" in e)
    return ctx.property in ("residuals", "vjp_leaves", "vjp", "second_order", "stack")


def _generic_reduce_window_refused_otherwise(ctx):
    """A program with a generic reduce_window, and JAX has no JVP rule for it
    (NotImplementedError: any derivative, forward mode too, where the spec
    computes one); or both sides refuse to linearize it, the spec with
    JAX's later linearization error and JAX with a bare AssertionError. The
    checked function's program (a stack level's spec program may have
    dropped it, where JAX still differentiates it: found on 0.4.25,
    linearize o grad)."""
    e, spec_error = ctx.error, ctx.spec_error_too
    if not has_primitive(ctx.user_program, "reduce_window"):
        return False
    if isinstance(e, NotImplementedError) and "Differentiation rule for 'reduce_window' not implemented" in str(e):
        return True     # no JVP rule at all (< 0.4.28): forward mode too, where the spec computes
    return (isinstance(spec_error, ValueError) and str(spec_error) == LINEARIZATION_ERROR
            and isinstance(e, AssertionError))


def _generic_reduce_window_jvp_of_a_symbolic_zero(ctx):
    """A program with a generic reduce_window, and JAX raised the pytree
    error of its JVP rule meeting a symbolic zero operand tangent. The
    checked function's program: a stack level's spec program may have
    dropped it as dead code, where JAX still differentiates it (found by a
    pristine nightly, f0141b7324, under grad o jvp o jvp)."""
    e = ctx.error
    return (isinstance(e, ValueError) and has_primitive(ctx.user_program, "reduce_window")
            and "must have the same tree structure as init_values" in str(e) and "Zero" in str(e))


def _checkpointed_while_extra_operand(ctx):
    """JAX's lowering raised the AssertionError of an equation whose jaxpr
    takes fewer inputs than it is given (`(jaxpr, [BlockArgument ...])`), or
    evaluating that equation raised safe_zip's ValueError (saved_residuals
    runs the known half: found on 0.4.25, a checkpointed scan whose body
    holds the loop), and the program has a while loop inside a checkpoint."""
    e = ctx.error
    return ((isinstance(e, AssertionError) and "BlockArgument" in str(e)
             or isinstance(e, ValueError) and "safe_zip() argument 2 is longer than argument 1" in str(e))
            and any(e2.primitive.name == "while" for r in remats(ctx.program) for e2 in _eqns(r.params["jaxpr"])))


def _dead_primal_unlinearizable(ctx):
    """The spec raised its linearization error where JAX computed, and the
    program without its dead code (spec.dce: a scan's unused outputs too)
    linearizes; for a stack, the stack built with each level's dead code
    removed (found on 0.6.2: grad o vmap o grad(argnums=(0,)), whose inner
    grad leaves a reduce_window of an input it holds constant dead). Or
    JAX, having linearized, raised the missing transpose of the generic
    reduce_window its linear program keeps (a dead one's, in a cond branch
    it stages whole: found by a campaign on 0.6.2, beaee60703). Or the
    spec linearizing by JVP then partial evaluation, as JAX did then
    (spec.semantics: direct_linearization=False), does: the primal is
    live but no output depends on it (a scan carry that only a while body
    const the loop never reads takes: found by a campaign on 0.4.36,
    9b7516a386)."""
    spec_error = ctx.spec_error if ctx.error is None else ctx.spec_error_too
    if not (isinstance(spec_error, ValueError) and str(spec_error) == LINEARIZATION_ERROR
            and (ctx.error is None or _transposes_an_unknown_primal(ctx.error, ctx.program))):
        return False
    build = ctx.without_dead_code or (lambda: spec.linearize(dce(ctx.program)[0]))
    try:
        build()
        return True
    except ValueError as e:
        if str(e) != LINEARIZATION_ERROR:
            raise
    with following(direct_linearization=False):
        try:
            build()
        except Exception:       # noqa: BLE001  (refused there too: not explained)
            return False
    return True


def _transposes_an_unknown_primal(error, prog: Program) -> bool:
    """`error` is JAX's missing transpose rule of a primitive that
    linearization by JVP and partial evaluation leaves in the linear
    program: a generic reduce_window, whose primal output is computed from
    its tangents and so unknown, or an equation reading that output at any
    depth (a `name` of it, in a checkpoint's body too: found by a campaign
    on 0.4.36, c74c94350f). backward_pass looks each one's rule up, dead or
    not."""
    said = re.fullmatch(r"Transpose rule \(for reverse-mode differentiation\) for '(\w+)' not implemented",
                        str(error))
    return (isinstance(error, NotImplementedError) and said is not None
            and said.group(1) in {e.primitive.name for e in _reading_generic_windows(prog)})


def _reading_generic_windows(prog: Program) -> list:
    """The generic reduce_windows of `prog` and the equations reading their
    outputs, directly or not, with every equation of the bodies of those."""
    unknown, out = set(), []
    for e in prog.eqns:
        if e.primitive.name == "reduce_window" or any(isinstance(a, Var) and a.id in unknown for a in e.inputs):
            unknown.update(v.id for v in e.outputs)
            out += [e] + [c for _, sub in subprograms(e.params) for c in _eqns(sub)]
        else:
            out += [c for _, sub in subprograms(e.params) for c in _reading_generic_windows(sub)]
    return out


def _threefry_batched_beside_an_unbatched_operand(ctx):
    """A program with threefry2x32, and JAX raised the loop's carry-type
    TypeError under vmap (a batched and an unbatched operand)."""
    return (isinstance(ctx.error, TypeError) and "carry output must have equal types" in str(ctx.error)
            and has_primitive(ctx.program, "threefry2x32"))


def _non_partitionable_threefry(ctx):
    """A numeric property of a program that splits, folds or draws bits
    from a key (the key derivations both algorithms define differently;
    every derivative of a value drawn from those bits differs too: found
    by a campaign on 0.4.36); random_gamma splits its key per element and
    per try of its sampler too (jax.random.gamma on 0.4.36)."""
    return (ctx.property in ("values", "vmap", "jvp", "vjp", "second_order", "stack") and ctx.error is None
            and any(e.primitive.name in THREEFRY_DERIVATIONS for e in _eqns(ctx.program)))


# the primitives whose values derive bits from a threefry key (random_gamma
# splits its key per element and per try of its sampler)
THREEFRY_DERIVATIONS = ("random_split", "random_fold_in", "random_bits", "random_gamma")


def _residual_counted_once(ctx):
    """JAX's saved_residuals raised its bare AssertionError
    (`len(results) == len(jaxpr.outvars)`), and the spec's residual list
    names one value twice once looked through reduce_precision: JAX's
    `_saved_residuals` collects the looked-through residuals in a set, so a
    value saved beside its rounded copy is listed once. Under jax 0.10.2's
    stub of save_anything_except_these_names, the list of the program (a
    stack level's: built from the checked function) as the stub saves
    (found by a pristine nightly, 83663ce011, grad o grad o grad); under
    remat3, the remat3 model's list, whose rounded copies sit beside the
    values a checkpoint returns (found by a pristine campaign, acefcc9a2a: a
    name saved and returned). jax.vjp's leaves, which JAX's list cannot be
    read to explain, are that list's."""
    if ctx.property == "vjp_leaves" and ctx.jax_residuals is not None:
        return any(_saves_a_value_twice(p) and sorted(ctx.jax_residuals) == _leaves(p)
                   for p in _programs_as_saved(ctx))
    if type(ctx.error) is not AssertionError or str(ctx.error) or ctx.property not in (
            "residuals", "stack_residuals"):
        return False
    return any(_saves_a_value_twice(p) for p in _programs_as_saved(ctx))


def _programs_as_saved(ctx) -> list:
    """The program, and the programs whose spec residuals are what JAX
    saves where a modelled defect or stub holds: jax 0.10.2's stub of
    save_anything_except_these_names (`_as_stubbed`), and under remat3
    the remat3 model (every defect on) of each remat3 variant."""
    programs = [ctx.program]
    if _active("save-anything-except-these-names-is-a-stub") and any(
            _as_stubbed(p) != p for p in policies_in(ctx.user_program)):
        stubbed = map_policies(ctx.user_program, _as_stubbed)
        programs.append(ctx.numeric_program(stubbed) if ctx.numeric_program is not None else stubbed)
    if ctx.implementation == "remat3" and ctx.checked_program is None:
        flags = dict.fromkeys(REMAT3_DEFECTS, True)
        programs += [remat3_model(v, **flags) for v in remat3_variants(ctx.program)]
    return programs


def _saves_a_value_twice(prog: Program) -> bool:
    """The spec's residual list of `prog`, looked through reduce_precision,
    names one value twice."""
    lin = spec.linearize(prog)
    producers = {v.id: e for e in lin.forward.eqns for v in e.outputs}
    saved = [looked_through_value(r.var, producers) for r in lin.residuals if isinstance(r.var, Var)]
    return len({v.id for v in saved if isinstance(v, Var)}) < len(saved)


def _residuals_unrounded(ctx):
    """JAX's residuals are the spec's with each value saved once, however
    many of its roundings are saved beside it (before jax 0.4.31 remat's
    partial evaluation rounds nothing, at any order of differentiation)."""
    if ctx.property != "residuals" or ctx.jax_residuals is None:
        return False
    lin = spec.linearize(ctx.program)
    producers = {v.id: e for e in lin.forward.eqns for v in e.outputs}
    seen, unrounded = set(), []
    for r in lin.residuals:
        value = r.var
        while (inner := looked_through_value(value, producers)) is not value:
            value = inner
        if isinstance(value, Var) and value.id in seen:
            continue
        seen.add(getattr(value, "id", None))
        unrounded.append((str(r.type), str(r.source)))
    return len(unrounded) < len(lin.residuals) and ctx.jax_residuals == unrounded


def _policy_asked_about_a_vprim(ctx):
    """JAX raised the TypeError of a checkpoint policy called with a second
    `prim` (JAX asks a policy `policy(prim, *avals, **params)`, and equinox's
    vprim has a param named `prim`: DotsSaveable.__call__() got multiple
    values for argument 'prim') where the spec computes, and a checkpoint of
    the program holds a vprim (a vmapped equinox maybe_set): the checked
    function's, or a stack level's, made by the stack's vmap (found by a pristine
    campaign, 440af618a3: linearize o vmap of a checkpoint holding a
    maybe_set), or one a vmap makes a vprim (a maybe_set a checkpoint
    holds unread, which the spec prunes before a stack's vmap: found by a
    pristine campaign, 33013cd266, grad o vmap o grad)."""
    return (isinstance(ctx.error, TypeError) and "got multiple values for argument 'prim'" in str(ctx.error)
            and ctx.spec_error is None
            and any(_vprim_in_a_checkpoint(p()) for p in (
                lambda: ctx.user_program, lambda: ctx.program,
                lambda: ctx.numeric_program(ctx.user_program) if ctx.numeric_program else ctx.program)))


def _maybe_set_indexes_a_numpy_buffer(ctx):
    """JAX raised TracerArrayConversionError where the spec computes, and
    the program (the checked function's, or a stack level's) has an equinox
    maybe_set, or a vprim of one, whose buffer (operand 1) is a constant:
    the JAX function holds it as a numpy array, and equinox's `_maybe_set`
    sizes its update with `jax.eval_shape(lambda: xs[i])`, numpy indexing
    by a traced index (found by a release campaign on 0.6.2, fe982b4ec3:
    grad of a jitted vprim of maybe_set writing into a constant buffer;
    0.10.2 raises too)."""
    if ctx.spec_error is not None or type(ctx.error).__name__ != "TracerArrayConversionError":
        return False
    return any(e.primitive in BATCHED_AS_VPRIMS and len(e.inputs) > 1 and isinstance(e.inputs[1], Literal)
               and (e.primitive.name == "maybe_set" or e.params["primitive"] == "maybe_set")
               for e in _eqns_seen(ctx))


def _vprim_in_a_checkpoint(prog: Program, inside: bool = False) -> bool:
    """A checkpoint of `prog` holds a vprim, or a primitive equinox batches
    as one (spec.prims_equinox.BATCHED_AS_VPRIMS), at any depth."""
    return any((inside and e.primitive in BATCHED_AS_VPRIMS)
               or any(_vprim_in_a_checkpoint(sub, inside or e.primitive is remat_p) for _, sub in subprograms(e.params))
               for e in prog.eqns)


def _pad_transposed_for_its_padding_value_alone(ctx):
    """JAX raised its TypeError from `_pad_transpose` (jax/_src/lax/lax.py:
    `t_operand = t_op() if ad.is_undefined_primal(operand) else None`, then
    `total(t_operand)`: reduce_sum of None) where the spec refuses that
    transpose by name (spec/prims_structural.py); under remat3, or where
    the remat3 model's program does (RematTraced.jvp instantiates a
    checkpoint's zero input tangents as constants, so grad o jvp transposes
    a pad of such a zero for its padding value alone: found by a pristine
    campaign, 718facfa78)."""
    refusal = lambda e: "pad: transpose with respect to the padding value alone" in str(e)  # noqa: E731
    return (isinstance(ctx.error, TypeError) and "NoneType" in str(ctx.error)   # its wording varies by release
            and ((ctx.spec_error_too is not None and refusal(ctx.spec_error_too))
                 or (ctx.implementation == "remat3" and ctx.spec_error is None
                     and _remat3_model_raises(ctx, lambda e: isinstance(e, PrimitiveError) and refusal(e)))))


# remat_dce's zip of a checkpoint's prevent_cse flags with its used inputs
# JAX caps a long argument's length in the message: "has length 17+" (found by a campaign)
SAFE_ZIP_LENGTHS = re.compile(r"safe_zip\(\) argument 1 has length (\d+)\+? but argument 0 has length (\d+)")


def _nested_per_argument_prevent_cse(ctx):
    """remat2 reverse mode raised JAX's safe_zip length error (more inputs
    than flags) where the spec computes, and a checkpoint with a
    per-argument prevent_cse sits in another checkpoint's body (at any
    depth): the enclosing partial evaluation stages it with residual
    inputs that get no flags."""
    m = SAFE_ZIP_LENGTHS.search(str(ctx.error)) if isinstance(ctx.error, ValueError) else None
    if ctx.implementation != "remat2" or ctx.spec_error is not None or m is None or int(m[1]) <= int(m[2]):
        return False
    return any(isinstance(inner.params["prevent_cse"], tuple)    # the checked function's (a stack level's
               for outer in _eqns(ctx.user_program) if outer.primitive is remat_p     # checkpoints are staged:
               for inner in _eqns(outer.params["jaxpr"]) if inner.primitive is remat_p)   # 9a4fe03557)


def _vmapped_per_argument_prevent_cse_with_closed_constants(ctx):
    """remat2, a property that batches (vmap, or a stack), JAX raised a bare
    AssertionError where the spec computes, and a checkpoint with a
    per-argument prevent_cse has, at any depth of its body, a control-flow
    equation whose sub-program reads an array constant (a non-scalar
    Literal: its ClosedJaxpr has consts, which batching the body hoists)."""
    if (ctx.implementation != "remat2" or ctx.spec_error is not None or ctx.property not in ("vmap", "stack")
            or not isinstance(ctx.error, AssertionError) or str(ctx.error)):
        return False
    return any(isinstance(outer.params["prevent_cse"], tuple)
               and any(_reads_array_constant(sub) for e in _eqns(outer.params["jaxpr"])
                       if e.primitive.name in ("cond", "while", "scan") for _, sub in subprograms(e.params))
               for outer in _eqns(ctx.program) if outer.primitive is remat_p)


def _reads_array_constant(prog: Program) -> bool:
    return any(isinstance(a, spec.ir.Literal) and not a.is_scalar for e in _eqns(prog) for a in e.inputs)


_eqns = all_eqns


HOST_COTANGENT = re.compile(r"Expected cotangent type (\w+)(\[[^\]]*\]) but got \1<host>\2")


def _offloads(policy) -> bool:
    """The policy may answer Offload (an offload policy, a combination
    holding one, or a user's policy, which may answer Offloadable: found
    by a pristine campaign, 570daba7ef, a drawn user policy offloading sin)."""
    if isinstance(policy, sp._SaveFromBoth):
        return _offloads(policy.policy_1) or _offloads(policy.policy_2)
    return isinstance(policy, sp._OFFLOAD) or (policy is not None and type(policy).__module__ != sp.__name__)


def _offloaded_residual_cotangent_on_host(ctx):
    """remat2 raised JAX's cotangent type check with the host memory space
    the only difference (`Expected cotangent type f32[] but got
    f32<host>[]`), where the spec computes, and a checkpoint of the
    program has an offloading policy."""
    if (ctx.implementation != "remat2" or ctx.spec_error is not None or not isinstance(ctx.error, ValueError)
            or HOST_COTANGENT.search(str(ctx.error)) is None):
        return False
    return any(_offloads(p) for p in policies_in(ctx.program))


def _scans_with_constants(prog: Program) -> bool:
    """A scan or a jit of `prog`, at any depth, whose body holds a constant
    array of its own (a non-scalar literal, at any depth of the body): its
    closed jaxpr keeps it, and the transposed body takes it as a constant."""
    def holds_constant(body: Program) -> bool:
        return any(isinstance(a, Literal) and not a.is_scalar for e in _eqns(body) for a in e.inputs)
    return any(e.primitive.name in ("scan", "call") and holds_constant(e.params["jaxpr"]) for e in _eqns(prog))


def _tuple_prevent_cse_over_scan_constants(ctx):
    """remat2 raised _remat_bind's bare AssertionError, and a checkpoint
    with a per-argument prevent_cse runs a scan or a jit with constants of
    its own (a jit's: found by a pristine nightly, 0e86027b80)."""
    if ctx.implementation != "remat2" or type(ctx.error) is not AssertionError or str(ctx.error):
        return False
    return any(e.primitive is remat_p and isinstance(e.params["prevent_cse"], tuple)
               and _scans_with_constants(e.params["jaxpr"]) for e in _eqns(ctx.program))


def _remat2_rounds_complex_residuals(ctx) -> bool:
    """remat2's `_insert_reduce_precision` rounds a complex residual the
    checkpoint's hoisted part reads, and reduce_precision refuses complex
    dtypes: JAX raises its TypeError where the spec (which leaves a complex
    residual unrounded, spec.remat.COMPLEX_RESIDUAL_ERROR) computes. Holds
    where JAX's error is that one word for word and the program holds a
    complex value."""
    if ctx.implementation != "remat2" or ctx.spec_error is not None or not isinstance(ctx.error, TypeError):
        return False
    words = {COMPLEX_RESIDUAL_ERROR.format(dtype=d) for d in ("complex64", "complex128")}
    return str(ctx.error) in words and _holds_complex(ctx.program)


def _remat3_rounds_complex_saved_values(ctx) -> bool:
    """remat3 rounds every value it saves (remat_transform's
    `map(reduce_precision, res)`), complex ones too: JAX raises that
    TypeError where the spec computes. Holds where JAX's error is that one
    word for word and the program holds a complex value."""
    if ctx.implementation != "remat3" or ctx.spec_error is not None or not isinstance(ctx.error, TypeError):
        return False
    words = {COMPLEX_RESIDUAL_ERROR.format(dtype=d) for d in ("complex64", "complex128")}
    return str(ctx.error) in words and _holds_complex(ctx.program)


def _holds_complex(prog) -> bool:
    return any(is_complex(v.type.dtype) or any(_holds_complex(b) for _, b in subprograms(e.params))
               for e in prog.eqns for v in e.outputs)


DIVERGENCES = [
    Divergence(
        "remat2-rounds-complex-residuals",
        "A checkpoint that saves a complex value its hoisted part also reads: remat2's "
        "`_insert_reduce_precision` (jax/_src/ad_checkpoint.py, from 0.4.31) rounds every "
        "np.inexact residual so read, complex ones too, and lax.reduce_precision accepts only "
        "real floats: JAX raises TypeError ('reduce_precision does not accept dtype complex64'). "
        "remat3 has no such step and computes; the spec leaves complex residuals unrounded. "
        "Measured: 0.4.25 to 0.4.28 compute, 0.4.31, 0.4.34, 0.4.36, 0.6.2 and 0.10.2 raise.",
        "f = jax.checkpoint(lambda x: jnp.real(jnp.exp(1j * x)).sum(), "
        "policy=jax.checkpoint_policies.everything_saveable)\n"
        "jax.grad(f)(jnp.ones(3))  # TypeError: reduce_precision does not accept dtype complex64",
        _remat2_rounds_complex_residuals, releases=Releases("0.4.31")),
    Divergence(
        "remat3-rounds-complex-saved-values",
        "A checkpoint under jax_remat3 (jax 0.10.2) whose policy saves a complex value (a "
        "complex dot under dots_saveable): remat_transform (interpreters/remat.py) rounds every "
        "saved value, `map(reduce_precision, res)`, and lax.reduce_precision accepts only real "
        "floats: JAX raises TypeError ('reduce_precision does not accept dtype complex64'). "
        "The spec saves the complex value unrounded (rounding is the identity on values); "
        "remat2, which rounds only a saved value its hoisted part reads, computes here.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.dot(x, 1j * x), policy=jax.checkpoint_policies.dots_saveable)\n"
        "jax.grad(lambda x: jnp.abs(f(x)) ** 2)(jnp.ones(3))  # TypeError: reduce_precision does not accept "
        "dtype complex64 (remat2: 12.)",
        _remat3_rounds_complex_saved_values, releases=REMAT3),
    Divergence(
        "remat3-names-nested-checkpoint-values-by-producer",
        "A value saved out of a checkpoint nested in a checkpoint: remat2 forwards it through "
        "the inner checkpoint's known half, so saved_residuals (and the spec) call it "
        "\"output of remat2\"; remat3 (jax 0.10.2) has no such half and names the equation "
        "that produced it, or calls a nested checkpoint's own output \"output of "
        "call_hi_primitive\". Same value, same memory. The predicate: JAX's list equals the "
        "spec's with every \"output of remat2\" renamed so.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x, w: jnp.sum(jax.checkpoint(jnp.sin)(x @ w) ** 2), "
        "policy=jax.checkpoint_policies.dots_saveable)\n"
        "print_saved_residuals(f, jnp.ones((2, 3)), jnp.ones((3, 3)))",
        _remat3_nested_provenance, releases=REMAT3),
    Divergence(
        "remat3-custom-rules-are-full-remat",
        "Under jax_remat3 (jax 0.10.2) a custom_jvp or custom_vjp function inside a checkpoint "
        "is rebound whole in the recomputation (RematTrace.process_custom_jvp_call / "
        "process_custom_vjp_call): the policy is never asked about what its rules compute, so "
        "e.g. a checkpoint_name inside a custom_vjp's fwd, or a dot inside a custom_jvp's rule, "
        "is not saved where remat2 (and the spec) save it. " + _MODEL_PREDICATE,
        "@jax.custom_vjp\n"
        "def named(x):\n"
        "    return jnp.sin(x)\n"
        "named.defvjp(lambda x: (jnp.sin(x), checkpoint_name(jnp.cos(x), 'r')), lambda r, g: (g * r,))\n"
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(named(x))), "
        "policy=jax.checkpoint_policies.save_only_these_names('r'))\n"
        "print_saved_residuals(f, jnp.ones(3))  # only the input",
        lambda ctx: ctx.remat3_defect_mattered("custom_opaque"), releases=REMAT3),
    Divergence(
        "remat3-rebinds-custom-rules-with-their-closed-over-constants",
        "Under jax_remat3 (jax 0.10.2) a custom_jvp or custom_vjp function inside a checkpoint "
        "is rebound whole in the recomputation with its Python closure "
        "(RematTrace.process_custom_jvp_call), so an array it closes over is a constant of the "
        "backward pass, not a residual; remat2 and the spec take it as the call's constant "
        "operand (num_consts), read by the backward pass and saved (\"from a constant\"). A "
        "checkpoint's own closed-over array is saved under both (found checking "
        "jax.scipy.special.erfcx, whose coefficients its custom_jvp closes over). The "
        "predicate: remat3, and JAX's list is the spec's (or the remat3 model's) with \"from a "
        "constant\" entries left out, each of the type of an array a custom function inside a "
        "checkpoint closes over.",
        "import numpy as np\n"
        "C = np.array([1., 2., 3.], np.float32)\n"
        "f = jax.custom_jvp(lambda y: jnp.sin(y) * C)\n"
        "f.defjvp(lambda p, t: (f(p[0]), jnp.cos(p[0]) * C * t[0]))\n"
        "jax.config.update('jax_remat3', True)\n"
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "sources = [s for _, s in saved_residuals(jax.checkpoint(lambda x: jnp.sum(f(x))), jnp.ones(3))]\n"
        "print('constant saved:', 'from a constant' in sources)  # constant saved: False",
        _remat3_custom_closure_constants, releases=REMAT3),
    Divergence(
        "remat3-ignores-enclosing-policy-in-nested-checkpoints",
        "Under jax_remat3 (jax 0.10.2) a checkpoint nested in a checkpoint is a hi-primitive "
        "whose remat rule is the default full remat (hijax.VJPHiPrimitive.remat): the "
        "enclosing checkpoint's policy is not consulted inside it, so nothing inside is saved "
        "by the enclosing checkpoint (its own policy acts later, inside the enclosing "
        "backward pass). remat2, and the spec, split a nested checkpoint by the enclosing "
        "policy (found by the fuzzer). " + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "inner = jax.checkpoint(lambda k: jnp.sin(checkpoint_name(jnp.sin(k), 'a')))\n"
        "f = jax.checkpoint(lambda x: inner(x), "
        "policy=jax.checkpoint_policies.save_only_these_names('a'))\n"
        "print_saved_residuals(f, 1.0)  # only the input",
        _remat3_nested_opaque, releases=REMAT3),
    Divergence(
        "remat3-reads-every-input-of-an-opaque-grandchild-checkpoint",
        "Under jax_remat3 (jax 0.10.2) a checkpoint saves the inputs that pe.dce_jaxpr finds "
        "read by its linearization (RematTraced.vjp_fwd: `used, rem = dce(...)`), and there a "
        "checkpoint nested two levels down is one opaque call (a child's primal outputs are "
        "computed by remat_transform of its body, which rebinds the child's own checkpoints "
        "whole: hijax.VJPHiPrimitive.remat, full remat) whose dce rule "
        "(VJPHiPrimitive.dce) reads every input when any output is used. So where the "
        "checkpoint's linearization needs a grandchild's primal output, every input of that "
        "grandchild is saved, one it only forwards to an output nothing reads too (found by "
        "the fuzzer: three nested checkpoints). remat2, and the spec, read what the values "
        "needed are computed from. Wasted memory; gradients are right. " + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "inner = jax.checkpoint(lambda x, w: (jnp.sin(w), x))\n"
        "mid = jax.checkpoint(lambda x, w: inner(x, w)[0])\n"
        "f = jax.checkpoint(lambda x, w: jnp.sin(mid(x, w)))\n"
        "print_saved_residuals(lambda a, w: f(jnp.cos(a), w), 1.0, 2.0)  # f32[] output of cos",
        lambda ctx: ctx.remat3_defect_mattered("grandchildren_opaque"), releases=REMAT3),
    Divergence(
        "remat3-replays-a-checkpoint-s-effects-only-with-a-cotangent",
        "Under jax_remat3 (jax 0.10.2) a checkpoint is linearized as a hi-primitive "
        "(RematTraced.lin and `linearized`), whose equation in the linear program has no effect "
        "of its own: where no cotangent reaches the checkpoint (its outputs unused, or read by "
        "nothing differentiable) it is dead code, and an effect of its body (a debug print) runs "
        "in the forward pass only, nothing saved for it. remat2 (remat_transpose: the backward "
        "pass transposes an equation with an effect whatever its cotangents), and the spec, run "
        "the effect again in the backward pass, saving what it reads (found by a pristine "
        "campaign: a checkpoint printing its input inside a cond branch). " + _MODEL_PREDICATE,
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "def f(x):\n"
        "    jax.checkpoint(lambda y: jax.debug.print('{y}', y=y) or jnp.sin(y))(x)\n"
        "    return jnp.cos(x)\n"
        "print('remat2:', len(saved_residuals(f, 1.0)))\n"
        "jax.config.update('jax_remat3', True)\n"
        "print('remat3:', len(saved_residuals(f, 1.0)))  # remat2: 2, remat3: 1",
        lambda ctx: ctx.remat3_defect_mattered("effects_sealed"), releases=REMAT3),
    Divergence(
        "remat3-recomputes-a-saved-value-without-tangent",
        "Under jax_remat3 (jax 0.10.2) a dot or named value the policy saves is rematerialized "
        "as primal_left_tangent_right(saved, recomputed) (lax._dot_general_remat, "
        "CheckpointName.remat), a custom_jvp whose rule reads `recomputed` only for its tangent. "
        "Where the value has no tangent (computed from integers, a PRNG key, constants or "
        "stop_gradient: jax.random.multivariate_normal's noise @ L), linearization binds that "
        "custom_jvp whole, so the backward pass recomputes the value it saved, and the "
        "checkpoint also saves what the recomputation reads (an integer argument). remat2, and "
        "the spec, save the value alone. Wasted memory and compute; gradients are right. "
        + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda w, n: jnp.sum((n.astype(jnp.float32) @ jnp.ones((3, 3))) * w), "
        "policy=jax.checkpoint_policies.dots_saveable)\n"
        "print_saved_residuals(f, jnp.ones((2, 3)), jnp.ones((2, 3), jnp.int32))  "
        "# i32[2,3] from the argument args[1]",
        lambda ctx: ctx.remat3_defect_mattered("zero_tangent_recomputed"), releases=REMAT3),
    Divergence(
        "remat3-policy-only-for-dots-and-names",
        "Under jax_remat3 (jax 0.10.2, interpreters/remat.py) only dot_general, jit, scan, cond "
        "and hi-primitives such as checkpoint_name have rules that consult the policy, and only "
        "about the equations of the checkpoint's body as written: every other equation is "
        "recomputed, so e.g. everything_saveable saves only the checkpoint's inputs, dot "
        "outputs and named values, and a dot that a JVP rule computes (qr's, with "
        "full_matrices) is recomputed where remat2 offers it to the policy. " + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), "
        "policy=jax.checkpoint_policies.everything_saveable)\n"
        "print_saved_residuals(f, jnp.ones(3))  # only the input",
        _remat3_restricted, releases=REMAT3),
    Divergence(
        "remat3-unrecognised-policy-is-full-remat",
        "Under jax_remat3 (jax 0.10.2) a policy that is not one of the built-in data policies "
        "(a user callable, save_from_both_policies, the offload policies, "
        "save_anything_except_these_names) is silently treated as nothing_saveable. "
        + _MODEL_PREDICATE + " Where the spec refuses the policy (save_from_both_policies of an "
        "offload policy: remat2's ValueError, PolicyCombinationError) and remat3 computes: remat3, "
        "the spec's PolicyCombinationError, and for the residuals JAX's list is the model's, or the "
        "model's composed with remat3-saves-for-unused-checkpoint-outputs, either less scalar literals "
        "JAX does not save (literal-residuals-depend-on-the-constant-s-python-type; found by the fuzzer).",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), "
        "policy=lambda prim, *_, **__: prim.name == 'sin')\n"
        "print_saved_residuals(f, jnp.ones(3))  # only the input",
        _remat3_unrecognised, releases=REMAT3),
    Divergence(
        "remat3-misses-zero-tangents-out-of-checkpoints",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's linearization is opaque to the enclosing "
        "computation: an output tangent that is zero because the body computes it from primals "
        "alone (e.g. x ** 0) is a value there, so the backward pass saves what a nonzero "
        "tangent would need (found by the fuzzer: `cos` of an input of the checkpoint). Wasted "
        "memory; gradients are right. " + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "g = lambda a: jax.checkpoint(lambda h: h ** 0)(jnp.sin(a))\n"
        "print_saved_residuals(g, 1.0)  # f32[] output of cos",
        _remat3_opaque_zeros, releases=REMAT3),
    Divergence(
        "remat3-instantiates-zero-tangents-into-checkpoints",
        "Under jax_remat3 (jax 0.10.2) the tangents of a checkpoint's inputs are instantiated "
        "(`map(ad_util.instantiate, tangents)  # TODO` in RematTraced), so an input whose "
        "tangent is zero (e.g. x ** 0) still has its value saved when the body's derivative "
        "reads it (found by the fuzzer). Wasted memory; gradients are right. " + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "g = lambda a: jax.checkpoint(lambda h, a: jnp.cos(h))(a ** 0, a)\n"
        "print_saved_residuals(g, 1.0)  # f32[] output of integer_pow",
        _remat3_zero_input_tangents, releases=REMAT3),
    Divergence(
        "remat3-linearized-checkpoint-reads-inputs-first",
        "Under jax_remat3 (jax 0.10.2) a linearized checkpoint reads its saved inputs before "
        "its residuals (RematTraced.linearized takes (used primals, rem's residuals)); remat2's "
        "staged checkpoint reads the residuals first. Where the order of first reads is the "
        "order of the residuals (a checkpoint in a scan or jit body: the body's residuals are "
        "stacked or returned in that order) the lists differ in order only. "
        + _MODEL_PREDICATE,
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "cell = jax.checkpoint(lambda c, w: (jnp.sin(c @ w) @ w.T, None), "
        "policy=jax.checkpoint_policies.dots_saveable)\n"
        "f = lambda c, ws: lax.scan(cell, c, ws)[0].sum()\n"
        "print_saved_residuals(f, jnp.ones(3), jnp.ones((2, 3, 4)))  "
        "# f32[2,3] output of scan",
        lambda ctx: ctx.remat3_defect_mattered("inputs_first"), releases=REMAT3),
    Divergence(
        "remat3-scan-in-checkpoint-saves-scan-outputs",
        "Under jax_remat3 (jax 0.10.2) a scan inside a checkpoint is split by `_scan_remat`: "
        "the forward scan returns every residual as an extra stacked output (\"output of "
        "scan\"), loop-invariant ones included. remat2's `_scan_partial_eval_custom` hoists "
        "loop-invariant residuals out of the loop and wraps the known half in a closed_call "
        "(\"output of closed_call\"). " + _MODEL_PREDICATE,
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "g = jax.checkpoint(lambda xs, w: lax.scan(lambda c, x: (jnp.sin(c @ w) + x, None), "
        "xs[0], xs)[0].sum(), policy=jax.checkpoint_policies.dots_saveable)\n"
        "print_saved_residuals(g, jnp.ones((2, 3)), jnp.ones((3, 3)))  # f32[2,3] output of scan",
        lambda ctx: ctx.remat3_defect_mattered("scan_rule"), releases=REMAT3),
    Divergence(
        "remat3-jit-in-checkpoint-saves-its-constants",
        "Under jax_remat3 (jax 0.10.2) a jit inside a checkpoint is split by `_pjit_remat`: "
        "remat.remat_jaxpr makes every constant of the jitted function that the "
        "rematerialization reads (an array it closes over, e.g. a weight matrix) an output of "
        "the forward jit, so it is saved (\"output of jitted function\"). remat2's "
        "closed_call_partial_eval_custom_rule closes both halves over the jaxpr's consts "
        "(`ClosedJaxpr(jaxpr_staged_, jaxpr.consts)`) and saves nothing for them (found by the "
        "fuzzer). `_cond_remat` does the same to a cond branch's consts (a ClosedJaxpr with "
        "consts, as JAX's own rules and oracle.to_jax bind it; lax.cond makes them operands), "
        "where remat2's _cond_partial_eval_custom shares them (found by the campaign). "
        "A copy of a constant: wasted memory, gradients are right. The same split names a "
        "residual that is both an input and an output of the jit by the input (the forward jit "
        "is staged with `_pjit_forwarding`), where remat2's rule forwards the output first "
        "(the same value, named \"output of jitted function\"). " + _MODEL_PREDICATE,
        "import numpy as np\n"
        "w = np.ones((2, 3), np.float32)\n"
        "f = jax.checkpoint(lambda x: jax.jit(lambda x: jnp.sin(x) * w)(x))\n"
        "print_saved_residuals(f, jnp.ones((2, 3)))  # remat2: the input\n"
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jax.jit(lambda x: jnp.sin(x) * w)(x))\n"
        "print_saved_residuals(f, jnp.ones((2, 3)))  # output of jitted function '<lambda>'",
        lambda ctx: ctx.remat3_defect_mattered("jit_rule")),
    Divergence(
        "remat3-linearizes-checkpoint-bodies",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's body is linearized (RematTraced.lin: "
        "api.linearize of the rematerialized function), so a tangent a JVP rule computes from "
        "primals alone (integer_pow's zeros for y == 0) is a symbolic zero and nothing is saved "
        "for it; remat2 JVPs the body as a jaxpr (remat_jvp), where that tangent is an array of "
        "zeros that later equations multiply, so what they read is saved (found by the fuzzer). "
        + _MODEL_PREDICATE,
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "f = jax.checkpoint(lambda x: x + (x ** 0) * (x ** 0))\n"
        "print('remat2:', len(saved_residuals(f, 1.0)))\n"
        "jax.config.update('jax_remat3', True)\n"
        "print('remat3:', len(saved_residuals(jax.checkpoint(lambda x: x + (x ** 0) * (x ** 0)), 1.0)))"
        "  # remat2: 1, remat3: 0",
        lambda ctx: ctx.remat3_defect_mattered("linearized_body"), releases=REMAT3),
    Divergence(
        "remat3-rounds-saved-values-into-copies",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's saved values are rounded into copies of "
        "their own (remat_transform returns `Partial(f_rem, map(reduce_precision, res))`), "
        "which only the rematerialization reads; remat2's `_insert_reduce_precision` rounds a "
        "saved value in place for every reader, the checkpoint's outputs too. So a value a "
        "checkpoint saves and returns is one of its outputs under remat2, and a jit's "
        "linearization forwards the residual to that output's place among the jit's outputs; "
        "under remat3 the rounded copy is a residual output of its own, in the order the jit's "
        "tangent trace reads it (found by a pristine campaign: a name saved and returned "
        "beside a jit's own residual). Same values, another order. " + _MODEL_PREDICATE,
        "jax.config.update('jax_remat3', True)\n"
        "def f(a, b):\n"
        "    c = jnp.arccos(b)\n"
        "    g, h = jax.checkpoint(lambda i: (lambda j: (jnp.sin(j), j))(checkpoint_name(i, 'a')),\n"
        "                          policy=jax.checkpoint_policies.save_only_these_names('a'))(a)\n"
        "    return g, c, h\n"
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "print(' then '.join(a.str_short(short_dtypes=True) for a, _ in "
        "saved_residuals(jax.jit(f), 0.5, jnp.full((2, 3), 0.5))))  # f32[2,3] then f32[]",
        lambda ctx: ctx.remat3_defect_mattered("rounded_copies"), releases=REMAT3),
    Divergence(
        "remat3-non-float-checkpoint-output-keeps-its-tangents-live",
        "Under jax_remat3 (jax 0.10.2) the tangent of a checkpoint's non-float (bool, integer) "
        "output is a float0 value, not a symbolic zero (hijax._call_hi_primitive_linearize: "
        "RematTraced.lin returns no output nonzeros, so `nzs_out = ... else True`). Where that "
        "output is an output of the differentiated function, passed on unchanged through jit, "
        "checkpoint or scan outputs (found by the fuzzer: a checkpoint's `and` of two bools "
        "stacked by a scan), the checkpoint's linearized equation stays live, and what the "
        "tangents of its float outputs need is saved, though their cotangents are zeros: the "
        "backward pass reads it only in dead code (the rematerialization under "
        "optimization_barrier). Wasted memory; gradients are right. The predicate: JAX's "
        "residuals are exactly those of the remat3 model of the program with those float "
        "outputs made outputs too (up to order where they pass out through a jit, whose "
        "residuals then move: found by a pristine nightly), and that changes the model's answer.",
        "jax.config.update('jax_remat3', True)\n"
        "ck = jax.checkpoint(lambda x, b: (jnp.sin(x), ~b))\n"
        "f = lambda a, b: (jnp.cos(a), ck(3.0 * jnp.sin(a), b)[1])\n"
        "print_saved_residuals(f, 1.0, jnp.ones(2, bool))  # output of mul",
        _remat3_float0_tangents, releases=REMAT3),
    Divergence(
        "save-anything-except-these-names-is-a-stub",
        "jax 0.10.2 defines save_anything_except_these_names(*names) as `lambda *_, **__: True` "
        "(a TODO in ad_checkpoint.py), so it saves the excluded names too. The spec implements "
        "the documented meaning. The predicate: JAX's residuals equal the spec's with the "
        "policy replaced by everything_saveable; or the spec refused an offloading "
        "save_from_both_policies asked about a value the documented policy recomputes, and "
        "with the stub's policies the spec asks no policy that refuses.",
        "from jax._src.ad_checkpoint import name_p\n"
        "p = jax.checkpoint_policies.save_anything_except_these_names('h')\n"
        "print('it saves h' if p(name_p, name='h') else 'it excludes h')  # it saves h",
        _anything_except_stub, releases=REMAT3),
    Divergence(
        "remat3-checkpoint-name-has-no-batching-rule",
        "Under jax_remat3 (jax 0.10.2) checkpoint_name's hi-primitive has no batching rule: "
        "jax.vmap of a function that names a value raises NotImplementedError (the check's own "
        "vmap property, or every property when the user's function has a vmap inside).",
        "jax.config.update('jax_remat3', True)\n"
        "jax.vmap(jax.checkpoint(lambda x: checkpoint_name(x, 'h') * 2))(jnp.ones((2, 3)))",
        _remat3_name_no_batching, releases=REMAT3),
    Divergence(
        "remat3-grad-raises-for-an-unused-scanned-checkpoint-input",
        "Under jax_remat3 (jax 0.10.2) reverse mode raises `ValueError: Expected cotangent "
        "type float32[] but got float32[n]` when a checkpoint has an input its body never "
        "reads that is (or is computed from) a stacked output of a scan (found by the fuzzer); "
        "remat2 and the spec "
        "differentiate it (its cotangent is zero). The predicate: remat3, that error, and such "
        "an input in the program.",
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "def f(a):\n"
        "    c, ys = lax.scan(lambda c, _: (c * c, c * c), a, None, length=3)\n"
        "    return jax.checkpoint(lambda unused, a: jnp.sin(a))(ys, a)\n"
        "jax.grad(f)(0.5)  # ValueError",
        _remat3_unused_scanned_input, releases=REMAT3),
    Divergence(
        "remat3-transposes-unread-checkpoint-outputs-with-zero-cotangents",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's backward pass transposes the equations "
        "that only its unread outputs need, handing their rules a symbolic zero cotangent "
        "(ad.Zero); remat2's remat_transpose drops them first. JAX's own rules accept a Zero; "
        "equinox's select_if_vmap transpose asserts `ct.shape` before testing for one, and "
        "jax 0.10.2's Zero has no shape: `AttributeError: 'Zero' object has no attribute "
        "'shape'` (found by a pristine campaign, 2917f8e612); equinox's vprim hands the "
        "vmapped rule None for a Zero, and maybe_set's rule tests for a Zero only: "
        "`'NoneType' object has no attribute 'at'` (a pristine nightly, 8a667a0b1a). The same "
        "zero reaches such a rule outside the checkpoint through an input its body never reads "
        "(remat3 pulls a cotangent into every input; fd902c4b7e). The predicate: remat3, "
        "reverse mode, such an error, and a checkpoint whose unread outputs alone need an "
        "equation whose rule rejects a Zero (spec.core.JaxFacts.transpose_rejects_zero_cotangent), "
        "or one of whose unread inputs such an equation computes.",
        "from equinox.internal._loop.common import select_if_vmap_p\n"
        "jax.config.update('jax_remat3', True)\n"
        "def f(a, p, x, y):\n"
        "    return jax.checkpoint(lambda a, p, x, y: (a * 2, select_if_vmap_p.bind(p, x, y)))(a, p, x, y)[0]\n"
        "x = jnp.ones(3)\n"
        "jax.grad(f, argnums=(0, 2))(1.0, True, x, x)  # AttributeError",
        _remat3_transposes_with_zero_cotangents, releases=REMAT3),
    Divergence(
        "jit-transposes-with-zero-cotangents-before-direct-linearization",
        "Without direct linearization (jax_use_direct_linearize off: every release before "
        "0.7.0) a jit's transpose runs its body's backward pass with a symbolic zero cotangent "
        "for each output nothing differentiates, and hands it to the rules there; equinox's "
        "select_if_vmap transpose asserts `ct.shape` before testing for a Zero: grad o jvp of a "
        "jitted select_if_vmap (its primal output's cotangent is zero) raises `AttributeError: "
        "'Zero' object has no attribute 'shape'` (found by a release campaign on 0.4.25; "
        "measured on 0.4.25, 0.4.36 and 0.6.2; 0.6.2 with direct linearization on, and 0.10.2 "
        "either way, compute, as the spec does; 0.7.0-0.10.1 with it off not measured). The "
        "predicate: reverse mode, JAX raised such an error where the spec computes, and a jit's "
        "body has an equation whose rule rejects a Zero (spec.core.JaxFacts."
        "transpose_rejects_zero_cotangent).",
        "from equinox.internal._loop.common import select_if_vmap_p\n"
        "import numpy as np\n"
        "f = jax.jit(lambda p, c: select_if_vmap_p.bind(p, c, c))\n"
        "c = np.ones((2, 2), np.float32)\n"
        "g = lambda c: jax.jvp(lambda c: f(True, c), (c,), (c,))[1].sum()\n"
        "jax.grad(g)(c)  # AttributeError",
        _jit_transposes_with_zero_cotangents, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "remat3-grad-raises-for-an-unused-scanned-checkpoint-output",
        "Under jax_remat3 (jax 0.10.2) reverse mode raises `ValueError: Expected cotangent "
        "type float32[] but got float32[n]` when a checkpoint has an output nothing reads that "
        "its body computes from a stacked output of a scan (found by the fuzzer, with the "
        "campaign's coverage-guided selection); remat2 and the spec differentiate it (its "
        "cotangent is zero). A used output, or an unused scan carry, differentiates. The "
        "predicate: remat3, that error, and such an output in the program.",
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "def body(a):\n"
        "    c, ys = lax.scan(lambda c, _: (jnp.sin(c), jnp.sin(c)), a, None, length=1)\n"
        "    return ys[0], a * 2\n"
        "jax.grad(lambda a: jax.checkpoint(body)(a)[1])(-0.5)  # ValueError",
        _remat3_unused_scanned_output, releases=REMAT3),
    Divergence(
        "remat3-pulls-cotangents-into-undifferentiated-checkpoint-inputs",
        "Under jax_remat3 (jax 0.10.2) reverse mode pulls an instantiated (zero) cotangent back "
        "into every float input of a checkpoint, read by its body's derivative or not "
        "(RematTraced.vjp_bwd / linearized), so the transposes upstream of an input the body "
        "never differentiates run; where one is not implemented in JAX (a reduce_window_max "
        "with window dilation: _select_and_gather_add_transpose) reverse mode raises "
        "NotImplementedError, and remat2 and the spec compute the gradient (the cotangent is a "
        "symbolic zero; found by the fuzzer). Likewise a checkpoint's backward pass runs whole, "
        "transposing what computes an unused output too (one of a nested checkpoint: found by a "
        "pristine nightly). The predicate: remat3, reverse mode, JAX's NotImplementedError, and "
        "the remat3 model's reverse pass (of the program, or of it with its checkpoints' unused "
        "outputs used) raises it word for word, its forward pass not.",
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "def f(x, e):\n"
        "    pooled = lax.reduce_window(e, -jnp.inf, lax.max, (2, 2), (1, 1), 'VALID', "
        "window_dilation=(1, 2))\n"
        "    return jax.checkpoint(lambda x, unused: jnp.sum(x * 2.0))(x, pooled)\n"
        "jax.grad(f, argnums=(0, 1))(jnp.ones(3), jnp.ones((4, 5)))  # NotImplementedError",
        _remat3_reverse_raises_as_modelled, releases=REMAT3),
    Divergence(
        "remat3-perturbs-checkpoint-outputs-the-spec-holds-zero",
        "Under jax_remat3 (jax 0.10.2) every output tangent of a checkpoint is marked nonzero "
        "(hijax._call_hi_primitive_linearize: `nzs_out = ... else True`), a zero one (the "
        "checkpoint's output is a stop_gradient'ed value) too, so a rule downstream meets a "
        "perturbed operand where remat2 and the spec meet a symbolic zero: pad's transpose, "
        "which the spec refuses for the padding value alone (and remat2 raises JAX's TypeError: "
        "pad-cannot-be-transposed-for-its-padding-value-alone), runs for both operands and "
        "remat3 computes a gradient (found by a pristine nightly, 1201bbdba3). The predicate: "
        "remat3, the spec refused a rule (PrimitiveError) where JAX computed, and the remat3 "
        "model computes the property's program; JAX's values are not compared.",
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "def f(a, b):\n"
        "    c = jax.checkpoint(lambda d: lax.stop_gradient(d).max(0))(b)\n"
        "    return lax.pad(c, a, ((0, 0, 0),)).sum()\n"
        "print(jax.grad(f, argnums=(0, 1))(0.5, jnp.ones((3, 4)))[0])  # 0.0",
        _remat3_perturbs_what_the_spec_holds_zero, releases=REMAT3),
    Divergence(
        "remat3-differentiates-a-checkpoint-s-constants",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's body is differentiated with respect to "
        "the constants its function closes over as well (lifted to inputs, their tangents "
        "instantiated), so a rule JAX declares unimplemented for a perturbed operand runs: "
        "x.at[i].multiply(c) with duplicate indices and constant factors c raises scatter-mul's "
        "NotImplementedError (its updates' derivative needs unique indices) in forward mode, "
        "reverse mode and saved_residuals, where remat2, no checkpoint and the spec compute: "
        "the factors have no tangent (found while adding scatter-mul); and at second order "
        "gammainc(a, x) with a constant a, whose pullback then holds igamma_grad_a(a, x), which "
        "has no derivative (found while adding igamma); the tangents of operands the body never "
        "reads are instantiated too, so linearize o grad differentiates igamma_grad_a for "
        "igamma's output passed to a checkpoint that ignores it (found by a pristine campaign), "
        "and grad o grad differentiates the backward of a checkpoint's igamma output nothing "
        "reads, which remat3 runs whole (found by a pristine nightly). Its backward pass reads the "
        "checkpoint's inputs through an optimization_barrier (`rem(*optimization_barrier(primals))`), "
        "whose JVP instantiates a constant's zero tangent at the next order: grad o grad o grad of "
        "random.gamma(key, a) with a constant a differentiates gamma_grad's while loops in a and "
        "raises the while loop's transpose error, where grad o grad computes (found by a pristine "
        "nightly, f2a46224f0). "
        "The predicate: remat3, JAX's NotImplementedError (or the while loop's transpose "
        "ValueError), and the remat3 model's JVP (or the "
        "numeric property's own spec program of the model, of the program itself or with the "
        "checkpoint outputs nothing reads made outputs: a pullback's JVP, a stack) raises "
        "it word for word.",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sin(x.at[jnp.array([0, 1, 0])].multiply(jnp.array([2., 3., .5]))).sum())\n"
        "try:\n"
        "    jax.grad(f)(jnp.ones(3))\n"
        "except NotImplementedError as e:\n"
        "    print(e)  # scatter_mul gradients are only implemented if `unique_indices=True`",
        _remat3_differentiates_constants_as_modelled, releases=REMAT3),
    Divergence(
        "remat3-second-order-skips-a-checkpoint-s-dead-forward-code",
        "jax.jvp of a pullback differentiates every equation jax.vjp's forward pass ran, a "
        "residual a JVP rule makes for a tangent nothing reads too: under remat2 (and the spec) "
        "igammac's JVP puts igamma_grad_a, which has no derivative, into the forward pass, and "
        "JAX raises. Under jax_remat3 (jax 0.10.2) a checkpoint's forward pass runs its body as "
        "written, so that residual is never in it, and JAX computes (found by a pristine "
        "nightly: a checkpoint of igammac saving everything, in a scan body, its output "
        "unread). The predicate: "
        "remat3, the second_order property, the spec raised a missing JVP rule where JAX "
        "computed, and the pullback without its dead code differentiates; JAX's values are "
        "not compared then.",
        "import numpy as np\n"
        "jax.config.update('jax_remat3', True)\n"
        "def f(a, b, c):\n"
        "    ck = jax.checkpoint(jax.lax.igammac, policy=jax.checkpoint_policies.everything_saveable)\n"
        "    ys = jax.lax.scan(lambda h, _: (h, ck(b, c)), a, None, length=1)[1]\n"
        "    return a\n"
        "x = (np.float32(1.0), np.full((2, 3), 0.5, np.float32), np.full((2, 3), 0.7, np.float32))\n"
        "pull = lambda *d: jax.vjp(f, *d)[1](np.float32(1.0))\n"
        "jax.jvp(pull, x, x)\n"
        "print('computes')  # computes",
        _remat3_second_order_skips_dead_forward_code, releases=REMAT3),
    Divergence(
        "a-jit-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative",
        "jax.jvp of a pullback differentiates every equation jax.vjp's forward pass ran, a value "
        "a JVP rule makes for a tangent nothing reads too: igammac's JVP computes igamma_grad_a, "
        "which has no derivative, and JAX raises (as the spec does). Inside a jit, jax 0.7.0 on "
        "(direct linearization; 0.10.2, and the spec) linearizes the jit's body without that "
        "dead value, and the second derivative computes; before (0.4.25, 0.4.36 and 0.6.2 "
        "measured, and 0.6.2 with direct linearization on; 0.7.0 with it off too) the jit's "
        "known half keeps it, and JAX raises there as well. Found by a campaign on 0.4.36 "
        "(an igammac read only for a cond's index). A vmap of the gradient batches that dead "
        "code too: a dead tie of two values the vmap batches along different axes raises the "
        "vectorized batcher's bare AssertionError (found by a release campaign on 0.4.25, "
        "vmap o grad; measured raising on 0.4.25, 0.4.36 and 0.6.2, with direct linearization "
        "on too, and on 0.7.0 with it off; computing on 0.7.0, 0.7.2, 0.8.0, 0.8.1, 0.9.0 and "
        "0.10.2; the same function without the jit raises on every release, its dead code run "
        "eagerly). The predicate: JAX raised the missing differentiation rule (or a bare "
        "AssertionError) where the spec computes, and the spec raises it word for word for the "
        "program with its jits inlined.",
        "import numpy as np\n"
        "f = jax.jit(lambda a, b, c: a * (jnp.sum(jax.lax.igammac(b, c)) > 0).astype(jnp.float32))\n"
        "x = tuple(np.full((2, 3), v, np.float32) for v in (0.3, 0.5, 0.7))\n"
        "try:\n"
        "    jax.jvp(lambda *d: jax.vjp(f, *d)[1](np.ones((2, 3), np.float32)), x, x)\n"
        "    print('computes')\n"
        "except NotImplementedError:\n"
        "    print('raises')  # raises",
        _jit_keeps_dead_jvp_residuals, releases=Releases("0.4.25", "0.7.0")),
    Divergence(
        "a-cond-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative",
        "The same in a cond branch: its partial evaluation before jax 0.7.1 (cond's "
        "_cond_partial_eval, partial_eval_jaxpr_nounits on each branch) keeps the branch's "
        "dead code, so the known branch computes igammac's igamma_grad_a for a tangent nothing "
        "reads, and jax.jvp of the pullback raises; 0.7.1 (cond's linearize rule, direct "
        "linearization; 0.10.2 and the spec) drops it and computes (measured on 0.4.25, 0.4.36, "
        "0.6.2, 0.7.0 with direct linearization on or off, 0.7.1-0.10.1 with it off; 0.7.1 on "
        "and 0.10.2 either way compute). Found by a campaign on 0.6.2. A vmap of the grad "
        "batches that dead code too: a tie of an unbatched and a batched value in the branch "
        "raises the vectorized batcher's bare AssertionError (found by a campaign on 0.4.25; "
        "measured raising on 0.4.25, 0.6.2, 0.7.0, computing on 0.7.1 and 0.10.2). The "
        "predicate: JAX raised the missing differentiation rule (or an AssertionError) where "
        "the spec computes, and the spec raises it word for word for the program with its "
        "branches' dead code hoisted out of the conds (a copy before each cond, on its "
        "operands; its jits inlined; scan bodies' too, innermost first, for dead code nested "
        "in both: found by a release campaign on 0.4.25, linearize o grad).",
        "import numpy as np\n"
        "f = lambda a, b, c: jax.lax.cond(a > 0, lambda m, n, o: (jax.lax.igammac(n, o), m)[1],\n"
        "                                 lambda m, n, o: m, a, b, c)\n"
        "x = (np.float32(0.3),) + tuple(np.full((2, 3), v, np.float32) for v in (0.5, 0.7))\n"
        "try:\n"
        "    jax.jvp(lambda *d: jax.vjp(f, *d)[1](np.float32(1.0)), x, x)\n"
        "    print('computes')\n"
        "except NotImplementedError:\n"
        "    print('raises')  # raises",
        _cond_keeps_dead_jvp_residuals, releases=Releases("0.4.25", "0.7.1")),
    Divergence(
        "a-scan-keeps-the-dead-values-of-jvp-rules-for-a-second-derivative",
        "The same in a scan body: before direct linearization (the default from jax 0.7.0) "
        "scan's partial evaluation (_scan_partial_eval, partial_eval_jaxpr_nounits on the JVP'd "
        "body) keeps the body's dead code, so the known body computes igamma's igamma_grad_a "
        "for a tangent nothing reads, and jax.jvp of the pullback raises; direct linearization "
        "(0.10.2 and the spec) drops it and computes. Measured: 0.4.25, 0.4.36 and 0.6.2 raise "
        "(0.6.2 with jax_use_direct_linearize on too), as 0.7.0 does with it off; 0.7.0 and "
        "0.10.2 compute. That is for dead code of the scan's consts (its residuals are loop "
        "invariants, hoisted out of the scan); of the carry or the xs it depends on the release "
        "(0.4.25 computes both, 0.6.2 raises for the carry). Found by a release campaign on "
        "0.4.25 (an igamma of the scan's consts nothing reads). The predicate: JAX raised the missing differentiation rule (or a bare "
        "AssertionError) where the spec computes, and the spec raises it word for word for the "
        "program with its scan bodies' dead code hoisted out of the scans (a copy before each "
        "scan, on its consts, its carries' initial values and its xs' first slices; its jits "
        "inlined; cond branches' too, innermost first: a dead igammac in a scan in a cond "
        "branch in a scan, found by a release campaign on 0.4.25).",
        "import numpy as np\n"
        "def f(a, b, c):\n"
        "    def body(h, _):\n"
        "        jax.lax.igamma(b, c)\n"
        "        return h, None\n"
        "    return jax.lax.scan(body, a, None, length=2)[0] * a\n"
        "x = (np.float32(0.3),) + tuple(np.full((2, 3), v, np.float32) for v in (0.5, 0.7))\n"
        "try:\n"
        "    jax.jvp(lambda *d: jax.vjp(f, *d)[1](np.float32(1.0)), x, x)\n"
        "    print('computes')\n"
        "except NotImplementedError:\n"
        "    print('raises')  # raises",
        _scan_keeps_dead_jvp_residuals, releases=Releases("0.4.25", "0.7.0")),
    Divergence(
        "a-missing-derivative-in-a-sub-program-raises-first-before-direct-linearization",
        "Before direct linearization (off by default before jax 0.7.0, jax_use_direct_linearize) a "
        "jit's, cond's or scan's JVP rule differentiates its sub-programs whole before anything "
        "is partially evaluated, so a missing differentiation rule there (igamma_grad_a's) raises "
        "before an earlier checkpoint's policy is asked; direct linearization (0.10.2 and the "
        "spec) linearizes them equation by equation, and a policy that raises when asked "
        "(save_from_both_policies of an offload policy) raises first. The predicate: JAX raised "
        "the missing differentiation rule where the spec raised otherwise, and the spec "
        "linearizing by JVP then partial evaluation (spec.semantics: direct_linearization=False) "
        "raises it word for word.",
        "import numpy as np\n"
        "cp = jax.checkpoint_policies\n"
        "policy = cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims('device', 'pinned_host'),\n"
        "                                    cp.save_only_these_names('a'))\n"
        "f = jax.jit(lambda a, b, c: jax.checkpoint(jnp.sin, policy=policy)(a)\n"
        "            + jnp.sum(jax.lax.igamma_grad_a(b, c)))\n"
        "try:\n"
        "    jax.grad(f, argnums=(0, 1, 2))(np.float32(0.3), np.full(2, 1.5, np.float32), np.full(2, 0.7, np.float32))\n"
        "except (ValueError, NotImplementedError) as e:\n"
        "    print(type(e).__name__)  # NotImplementedError",
        _differentiates_sub_programs_whole, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "remat3-linearizes-checkpoint-bodies-per-equation",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's body is linearized equation by equation "
        "(direct linearize, ad.linearize_from_jvp), so an equation whose JVP makes its primal "
        "outputs from its tangents (the generic reduce_window's reduce_window_jvp) raises "
        "\"Linearization failed to produce known values for all output primals\" even where "
        "nothing reads it; remat2 (and the spec) partially evaluate the body's JVP, where the "
        "unused equation is dead code, and compute the gradient. At second order the outer "
        "differentiation meets a checkpoint's body inline, so a dead window in a scan, which a "
        "first-order remat3 computes, fails there. The predicate: remat3, reverse mode, JAX's "
        "ValueError, and the remat3 model's reverse pass raises it word for word, or, at second "
        "order, the property's program of the checked function with its checkpoints inlined does.",
        "from jax import lax\n"
        "jax.config.update('jax_remat3', True)\n"
        "def f(x):\n"
        "    lax.reduce_window(x, 1.0, lambda a, b: a * b, (2,), (1,), 'VALID')\n"
        "    return jnp.sum(jnp.sin(x))\n"
        "jax.grad(jax.checkpoint(f))(jnp.ones(5))  # ValueError",
        _remat3_linearizes_checkpoint_bodies, releases=REMAT3),
    Divergence(
        "remat3-forward-pass-runs-a-checkpoint-s-dead-code",
        "Under jax_remat3 (jax 0.10.2) a checkpoint's body runs as written, its dead "
        "equations and their derivatives included, where remat2 partially evaluates it and "
        "removes them (remat_partial_eval's pe.dce_jaxpr): an outer transformation meets that "
        "dead code, an outer vmap batching a ragged_dot_general (or its transpose, reading a "
        "batched cotangent), which its batching rule refuses (NotImplementedError \"ragged_dot "
        "vmap over any dim but 0 - NYI\"), where remat2 and the spec compute (found by a "
        "pristine nightly, 410783b9f9, vmap o grad). The predicate: remat3, JAX raised where "
        "the spec computes, and the spec raises it word for word building the property's "
        "program for the checked program with its checkpoints' dead values made live (each "
        "added, times zero, to its body's first float output).",
        "jax.config.update('jax_remat3', True)\n"
        "gs = jnp.array([2, 2, 2], jnp.int32)\n"
        "def f(a, b, c):\n"
        "    def body(a, b, c):\n"
        "        jax.lax.ragged_dot(b, c, gs)   # dead\n"
        "        return jnp.sin(a)\n"
        "    return jax.checkpoint(body)(a, b, c).sum()\n"
        "try:\n"
        "    jax.vmap(jax.grad(f), in_axes=(0, 1, None))(jnp.ones((2, 3)), jnp.ones((6, 2, 3)), jnp.ones((3, 3, 2)))\n"
        "    print('computes')\n"
        "except NotImplementedError as e:\n"
        "    print(e)  # ragged_dot vmap over any dim but 0 - NYI",
        _remat3_forward_runs_dead_checkpoint_code, releases=REMAT3),
    Divergence(
        "remat3-barrier-iff-backward-reads-checkpoint-inputs",
        "Under jax_remat3 (jax 0.10.2) prevent_cse is not consulted: the backward pass of a "
        "checkpoint puts an optimization barrier on exactly those checkpoint inputs it reads "
        "(RematTraced.vjp_bwd: rem(*optimization_barrier(primals))). So there is a barrier "
        "with prevent_cse=False, and none when the backward reads only saved values (e.g. a "
        "name the policy saves) or nothing (a linear body), where remat2 and the spec's "
        "staged checkpoint with prevent_cse=True have one. The predicate: JAX has a barrier "
        "iff some checkpoint, linearized alone with remat3's view of its policy, saves one "
        "of its own inputs and has a live backward pass (one XLA does not remove as dead code, "
        "as it does where the checkpoint's input or output cotangents are symbolic zeros; "
        "found by the fuzzer).",
        "jax.config.update('jax_remat3', True)\n"
        "f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))), prevent_cse=False)\n"
        "print('optimization_barrier' in jax.jit(jax.grad(f)).lower(jnp.ones(3)).as_text())  # True",
        _remat3_barriers, releases=REMAT3),
    Divergence(
        "cond-residual-slots-differ-by-weak-type",
        "JAX's cond partial evaluation lets the branches share residual slots of equal avals "
        "(`_merge_branch_residuals`, jax/_src/lax/control_flow/conditionals.py), and an aval's "
        "equality includes its weak type: a weakly typed residual of one branch (a value made "
        "from Python float literals, e.g. a while loop's carry started from "
        "broadcast(0.0)) takes a slot of its own beside the other branch's strong one of the "
        "same shape. The spec's types carry no weak type, so it shares the slot. Measured on "
        "0.10.2 and 0.4.36 (found by a campaign on 0.4.36). One more saved value of that type. "
        "In a jit the slots are outputs of the jit (found by a campaign on 0.6.2; 0.10.2 "
        "too). The predicate: JAX's list is the spec's plus `output of cond` entries (or "
        "outputs of a jitted function), per type at most as many as the weakly typed float "
        "values of that type the cond's branches compute.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "loop = lambda v, z: jax.lax.while_loop(lambda c: c.sum() < 1.5, lambda c: c + jnp.tanh(c.sum() * v.sum()) + 1.0,\n"
        "                                       jax.lax.broadcast_in_dim(z, (3,), ()))\n"
        "f = lambda z: lambda a: jax.lax.cond(a.sum() > 0, lambda v: jnp.sin(jnp.sin(v)), lambda v: loop(v, z), a)\n"
        "import numpy as np\n"
        "n = [len(saved_residuals(f(z), jnp.ones(3))) for z in (0.0, np.float32(0.0))]\n"
        "print('weak takes a slot of its own' if n[0] > n[1] else 'shared')  # weak takes a slot of its own",
        _cond_weak_residual_slots),
    Divergence(
        "literal-residuals-depend-on-the-constant-s-python-type",
        "JAX (0.10.2) saves a scalar constant that a tangent equation reads (\"from a literal\") "
        "when the user's code wrote it as a Python float or a jax Array, and not when it was a "
        "numpy scalar (np.float32(0.5) * x: linearization binds it inline); both trace to the "
        "same jaxpr literal, and the spec (which sees only the jaxpr) saves it. jax.nn.gelu's "
        "sqrt(2/pi) is such a numpy scalar. The predicate: the lists differ only in \"from a "
        "literal\" entries the spec has and JAX lacks (under remat3: or that the remat3 model, "
        "every defect on, has and JAX lacks).",
        "import numpy as np\n"
        "print_saved_residuals(lambda x: jnp.sum(np.float32(0.5) * jnp.tanh(x)), jnp.ones(3))\n"
        "print_saved_residuals(lambda x: jnp.sum(0.5 * jnp.tanh(x)), jnp.ones(3))  "
        "# from a literal",
        _constant_type_literals),
    Divergence(
        "jit-linearize-saves-an-instantiated-zero",
        "Linearizing a jit body (pjit's linearize rule, jax 0.10.2; direct linearization, the "
        "default from jax 0.7.0, jax-ml/jax a7ed048afa: 0.6.2 does not show it) saves a zero tangent that a "
        "JVP rule instantiated as a known scalar (e.g. select_n's for a constant branch of "
        "jnp.where) as an output of the jitted function. The spec keeps such zeros inline and "
        "saves nothing, or, where the zero is a literal read outside the jit, saves that literal "
        "(found by the fuzzer: a jit forwarding its input, under jvp of grad). Differentiating "
        "again (grad o grad), each jit's and each transposed jit's zero is saved so (found by a "
        "pristine campaign: pad and eigh in a jit). The predicate: of the residuals, or a "
        "stack's, the only ones JAX has and the spec lacks are scalar outputs of jitted "
        "functions, and the only ones the spec has and JAX lacks are scalar literals, at most one "
        "per such output of their type, besides those literal-residuals-depend-on-the-constant-"
        "s-python-type explains.",
        "f = lambda x: jnp.where(x > 1.0, x * x, 0.0)\n"
        "print_saved_residuals(f, 2.0)  # f32[] output of jitted function '_where'",
        _jit_linearize_zero, releases=Releases("0.4.36"), flag="jax_use_direct_linearize"),
    Divergence(
        "cond-linearize-saves-an-instantiated-zero",
        "Linearizing a cond's branches (cond's linearize rule, ad.linearize_jaxpr of each branch, "
        "with direct linearization; cond's partial-eval rule before it: measured on jax 0.4.25 and "
        "0.10.2) saves a zero tangent that a JVP rule instantiated "
        "as a known scalar (pad's padding value under ad.deflinear2, as in reduce_prod's product "
        "tree) as an output of the known cond, as jit's linearize does "
        "(jit-linearize-saves-an-instantiated-zero). The spec keeps such zeros inline and saves "
        "nothing (found by the fuzzer, with the campaign's coverage-guided selection: reduce_prod "
        "in a cond branch). Wasted memory (a scalar); gradients are right. The predicate: the "
        "only residuals JAX has and the spec lacks are scalar outputs of cond (in a program with a "
        "cond in a jit, outputs of the jit: found on 0.4.36; with a cond in a scan body, the "
        "scalars stacked, outputs of the scan: found by a campaign), and the only ones the spec has and "
        "JAX lacks are scalar literals, at most one per such output of their type.",
        "from jax import lax\n"
        "f = lambda x: lax.cond(x.sum() > 0, lambda x: lax.pad(x, 1.0, ((0, 1, 0),)).sum() * x,\n"
        "                       lambda x: x, x)\n"
        "print_saved_residuals(f, jnp.ones(3))  # f32[] output of cond",
        _cond_linearize_zero),
    Divergence(
        "remat3-saves-for-unused-checkpoint-outputs",
        "Under jax_remat3 (jax 0.10.2) the backward pass of a checkpoint runs whole "
        "(RematTraced.vjp_bwd instantiates a zero cotangent for every output), so what an "
        "output nothing reads would need is saved too: a checkpoint returning its input and "
        "sin of it, of which only the input is used, saves the input (found by the fuzzer). "
        "remat2 and the spec drop the unused output's backward. Wasted memory; gradients are "
        "right; also in a cond branch or a scan body (found by the fuzzer). The predicate: JAX's "
        "residuals are exactly the remat3 model's for the program with every unused output of a "
        "live checkpoint (or every one its body computes rather than returns as an input) made a "
        "program output (threaded out through the calls, checkpoints, cond "
        "branches, whose other branches return zeros, and scan bodies, stacked, around it; a "
        "checkpoint no output of which is needed is dead code, dropped with its backward by "
        "JAX's partial evaluation: found by the fuzzer), and not for the program itself.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "f = lambda a, b: jax.checkpoint(lambda r: (jnp.sin(r), r))(a * b)[1]\n"
        "print('remat2:', len(saved_residuals(f, jnp.ones(3), jnp.ones(3))))\n"
        "jax.config.update('jax_remat3', True)\n"
        "print('remat3:', len(saved_residuals(f, jnp.ones(3), jnp.ones(3))))  # remat2: 2, remat3: 3",
        _remat3_unused_outputs_read, releases=REMAT3),
    Divergence(
        "remat-of-jit-saves-its-inputs-again",
        "Inside a checkpoint, a jit whose backward half reads one of the jit's known inputs "
        "returns that input from its known half as a residual output of its own (no input "
        "forwarding in closed_call_partial_eval_custom_rule: `in_fwd`, added by jax-ml/jax "
        "8224ddd4d0, \"add input-to-output forwarding optimization to remat-of-jit\", in jax "
        "0.9.1), so the value is saved as `output of pjit` (`output of jitted function`), once "
        "per jit reading it, instead of once, as itself: two jits closing over sin(x) save it "
        "twice (found by the corpus case jit_closures_everything_saveable on 0.4.25; JAX's "
        "test_remat_of_jit_input_to_output_forwarding). Wasted memory; gradients are right. "
        "Releases (measured with tools/releases.py): 0.4.25 to 0.9.0, for every jit in the "
        "checkpoint up to 0.4.28 and from 0.6.0; from 0.4.29 to 0.5.3 pjit's staging rule forwarded a jit's outputs that are its inputs "
        "(jax-ml/jax 0a693faf48, \"add pjit forwarding rule\") where remat_partial_eval stages "
        "the hoisted equations again (core.eval_jaxpr of the known jaxpr), so a jit directly in "
        "the checkpoint saved nothing twice, but one in a scan body, a cond branch or another "
        "jit did (found by the real-model suite on 0.4.36: jnp.linalg.norm twice in a "
        "lax.fori_loop body); e8038501d0 (a donation fix, jax 0.6.0) kept that forwarding for "
        "dynamic shapes only. The predicate: remat2, a jit in a checkpoint, and JAX's residuals "
        "are exactly the spec's following those choices (spec.semantics: "
        "remat_of_jit_forwards_inputs=False, and jit_staging_forwards_inputs from 0.4.29 to "
        "0.5.3) and not the spec's own.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "def f(x):\n"
        "    def body(c, _):\n"
        "        y = jnp.sin(c)\n"
        "        c = jax.jit(lambda: c * y)()\n"
        "        return jax.jit(lambda: c * y)(), None\n"
        "    return jax.lax.scan(body, x, None, length=2)[0]\n"
        "f = jax.checkpoint(f, policy=jax.checkpoint_policies.everything_saveable)\n"
        "print('saved:', len(saved_residuals(f, 3.)))  # saved: 6",
        _remat_of_jit_returns_its_inputs, releases=Releases("0.4.25", "0.9.1")),
    Divergence(
        "linearize-computes-tangents-of-unread-operands",
        "Without direct linearization (jax_use_direct_linearize off: every release before 0.7.0) "
        "linearization is JVP followed by pe.JaxprTrace partial evaluation, which stages a cond, "
        "jit, scan, while loop (its body's consts) or checkpoint with the tangents of all its "
        "operands, read by its body or not (or only by dead code: found on 0.4.36 and 0.6.2; a "
        "checkpoint's operand read only through a comparison: found by a release campaign on "
        "0.4.25, 2d4a42de7b, measured on 0.4.36 and 0.6.2), so the "
        "tangent of an operand nothing reads is computed and the residuals it needs are saved: "
        "acos(c) passed to a cond whose branches ignore it saves acos's derivative factor "
        "(`output of neg`; found by a campaign on 0.4.36). Direct linearization (and the spec) "
        "prunes the unread operand. Wasted memory; gradients are right. The predicate: remat2, "
        "and JAX's residuals are the spec's (as a multiset: in a jit the added output moves them "
        "in the jit's residual order) for the program with every float operand of a cond, call, "
        "scan, while or checkpoint whose tangent the body's linearization does not read (for a checkpoint, one "
        "its live body's JVP reads: not one read only through stop_gradient, found by a release campaign on "
        "0.6.2, d413219730; not a carry; not one whose "
        "tangent is a symbolic zero, a constant passed in through an outer cond, which the JVP rule prunes: found by "
        "a release campaign on 0.6.2, 87914f9e56; threaded out of "
        "the jits around it; of an equation whose tangent is live: the partial evaluation stages "
        "only what the outputs' tangents reach, so a nested cond whose float outputs nothing reads "
        "adds nothing, found on 0.4.25 and 0.4.36) made a program output, and not for the program "
        "itself; or so for "
        "the program with the unused outputs linearize-keeps-unused-outputs-of-staged-equations "
        "keeps made outputs too; or, for the barriers of the backward pass, the spec's count "
        "for that program agrees with JAX's where its own does not (a checkpoint whose output "
        "only an unread operand takes is differentiated and its recomputation barriered); or, for "
        "the barriers of a called linear function (linearize over a stack), the spec's count for "
        "the checked function's program with its unread operands made outputs agrees with JAX's "
        "(an unread scan const's tangent computed in the linear function brings a cond's other "
        "branch's checkpoint with it, barriered: found on 0.4.25, measured on 0.4.36 and 0.6.2). "
        "From 0.4.29 to 0.5.3 pjit's staging drops a jit output that returns an input "
        "(pjit_staging_rule, _pjit_forwarding), which JAX's linearization still binds, its "
        "tangent making the jit's operands' tangents computed: there a top-level jit counts as "
        "live too where one of its inputs' tangents is read (found by a release campaign on "
        "0.4.36, 927ac9c8b9: a jit returning its input beside a while loop's output).",
        "f = lambda x, c: jax.lax.cond(x > 0, lambda x, d: jnp.sin(x), lambda x, d: -x, x, jnp.arccos(c))\n"
        "print_saved_residuals(f, 1.0, 0.5)  # output of neg",
        _linearize_keeps_tangents_of_unread_operands, flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "linearize-keeps-unused-outputs-of-staged-equations",
        "Before direct linearization (the default from jax 0.7.0, jax-ml/jax a7ed048afa; verified "
        "on 0.4.25, 0.4.36 and 0.6.2, and gone there with jax_use_direct_linearize on) "
        "linearization is jvp + pe.JaxprTrace partial evaluation, which stages the tangent of a "
        "checkpoint, jit, scan or cond as one equation computing every output's tangent, so a "
        "float output nothing reads keeps the residuals its tangent needs: "
        "checkpoint(lambda r: (sin(r), r))(a * b)[1] saves a * b, jit(lambda r: (sin(r), 2 * r))"
        "[1] saves cos(r), a scan's unused stacked output its cos. Inside a checkpoint nothing is "
        "kept (remat_partial_eval DCEs its body as a jaxpr). Wasted memory; gradients are right. "
        "0.10.2 (and the spec) drop them. The predicate: remat2, and JAX's residuals are exactly "
        "the spec's for the program with every unused float output of such an equation that the "
        "outputs depend on made a program output (threaded out through calls, cond branches, "
        "whose other branches return zeros, and scan bodies, stacked, not through checkpoints), "
        "and not for the program itself; for the backward pass's barriers, the spec's count for "
        "that program agrees with JAX's where the program's does not (a checkpoint in a branch "
        "of an unused cond output, barriered: found on 0.4.25 and 0.4.36); for a pullback's values, "
        "JAX's are the spec's for that program, the added outputs' cotangents zero (a kept loop "
        "carry's cotangent is carried back from an instantiated zero: 0 * inf = nan where a factor "
        "overflowed, found on 0.4.25). An equation none of whose read outputs has a nonzero "
        "tangent stages nothing (a scan whose ys read only floor's output: found on 0.6.2), and "
        "an unused output whose tangent is a symbolic zero is no output of the staged equation "
        "(a checkpoint's unread round in a cond branch: found by a release campaign on 0.4.36, "
        "0fef3f486a). From "
        "0.4.29 to 0.5.3 pjit's staging drops a jit output that returns an input, so the traced "
        "program may lack an output whose tangent made the jit live: there a jit none of whose "
        "outputs' tangents is read counts as staged whole where one of its inputs' tangents is "
        "read (found on 0.4.36); a top-level jit alone, a nested one being staged, its output "
        "dropped, before linearization sees it (measured on 0.4.36). A second derivative differentiates what such an output's "
        "tangent computes: a checkpoint's unused igammac keeps igamma_grad_a, whose missing "
        "rule raises where the spec computes (found by a release campaign on 0.4.25; measured "
        "raising on 0.4.25, 0.4.36 and 0.6.2, computing on 0.7.0 and 0.10.2): the spec raises "
        "it word for word for the program with those outputs made outputs.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "f = lambda a, b: jax.checkpoint(lambda r: (jnp.sin(r), r))(a * b)[1]\n"
        "print('saved:', len(saved_residuals(f, jnp.ones(3), jnp.ones(3))))  # saved: 3",
        _linearize_keeps_unused_outputs, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "remat3-cond-saves-float0-tangents-of-integer-outputs",
        "Under jax_remat3 (jax 0.10.2) a cond whose branch holds a checkpoint with an integer "
        "output saves that output's float0 tangent as a residual (\"output of cond\"), with the "
        "branch index and a float residual the spec (and remat2) do not save, even when no float "
        "output of the cond is used (found by the fuzzer). A float0 array has no data: wasted "
        "residual slots, gradients are right. The predicate: remat3, JAX's residual list (or "
        "the residual leaves of its vjp) holds a float0 value, and a cond branch of the program "
        "holds a checkpoint.",
        "from jax import lax\n"
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "jax.config.update('jax_remat3', True)\n"
        "f = lambda x, i: lax.cond(x.sum() > 0, lambda x, i: jax.checkpoint(lambda x, i: "
        "(jnp.sin(x), i + 1))(x, i), lambda x, i: (x, i), x, i)[1]\n"
        "print([str(a) for a, _ in saved_residuals(f, jnp.ones(3), jnp.ones(3, 'int32'))])  # float0[3]",
        _remat3_float0_residual, releases=REMAT3),
    Divergence(
        "linearize-drops-unread-effectful-checkpoints",
        "Linearizing a whole traced function with a JaxprTrace (jax.linearize and jax.vjp "
        "without direct linearization, the default before 0.7.0), tracers_to_jaxpr keeps only "
        "the recipes the outputs reach, and remat_partial_eval registers no effect handle for "
        "its staged checkpoint. So a checkpoint with an effect (a jax.debug.print) whose outputs "
        "nothing reads is dropped from the backward pass: its effect runs once, in the forward "
        "pass, and what it reads is not saved. With direct linearization each equation's own "
        "tangents are staged and the checkpoint is kept for its effect, replayed in the "
        "backward pass (which the spec models). Measured on 0.4.25, 0.4.36 and 0.6.2 with the "
        "flag off; 0.10.2 keeps it with the flag off too. Not modelled: with the flag on before "
        "cond's direct-linearize rule (jax-ml/jax 45a3fe62d6, first in 0.7.1) a cond's branches "
        "are still partially evaluated whole and drop it there (measured on 0.6.2). The "
        "predicate: remat2, and JAX's residuals, jax.vjp's leaves or the backward pass's "
        "barriers are the spec's for the program with each such checkpoint made one with no "
        "outputs (program_variants.unread_effectful_checkpoints_emptied).",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "def f(a, b):\n"
        "    jax.checkpoint(lambda b: (jax.debug.print('b={b}', b=b), b * 2.0)[1])(b)\n"
        "    return a * 2.0\n"
        "saved = [s for _, s in saved_residuals(f, 0.7, 1.0)]\n"
        "print('kept' if any('argument b' in s for s in saved) else 'dropped')  # dropped",
        _linearize_drops_unread_effectful_checkpoints, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "linearize-drops-an-effectful-loop-it-stages-without-outputs",
        "Linearizing a while loop whose carries have no tangent but some operand has one (a body "
        "const), _while_partial_eval runs the known loop and stages the whole loop beside it "
        "for the unknown operands (default_process_primitive), an equation none of whose outputs "
        "anything reads. Before jax 0.6.2 (jax-ml/jax 859e120fdd, 'Avoid doing DCE of effectful "
        "ops and reordering in partial eval') tracers_to_jaxpr keeps only the recipes the "
        "outputs reach, so that loop is dropped even where it has an effect (a jax.debug.print "
        "in its body): the effect runs once, nothing is saved for it, and reverse mode works. "
        "From 0.6.2 the trace's effect handles keep it (the spec models that): its effect runs "
        "again when the linear function is called, it saves every known operand, and reverse "
        "mode meets the loop's transpose error. Measured on 0.4.25 and 0.4.36 (dropped), 0.6.2 "
        "and 0.10.2 (kept). In a jit, pjit's partial evaluation (partial_eval_jaxpr_nounits) "
        "still drops it on 0.6.2; direct linearization (the default from 0.7.0) keeps it. Inside "
        "a checkpoint every release keeps it (partial_eval_jaxpr_custom stages the loop whole, "
        "and dce_jaxpr keeps effects). The predicate: remat2, and JAX's residuals, jax.vjp's "
        "leaves or the backward pass's barriers are the spec's for the program with the "
        "operands with a tangent of each such loop passed through stop_gradient, outside "
        "checkpoints or in jits only (program_variants.effectful_loops_held_constant), and not "
        "the spec's own; or the spec raised the loop's transpose error where JAX computed, and "
        "does not for such a program.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "loop = jax.jit(lambda x: jax.lax.while_loop(lambda n: n < 3, lambda n: (jax.debug.print('{}', x), n + 1)[1], 0))\n"
        "saved = [s for _, s in saved_residuals(lambda x: jnp.sin(x) * loop(x), 0.7)]\n"
        "print('kept' if len(saved) == 3 else 'dropped')  # dropped",
        _linearize_drops_effectful_loops_staged_without_outputs, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "partial-eval-binds-known-checkpoints-as-they-are",
        "Before stackless tracing (jax 0.4.36), a partial evaluation handed known values to "
        "the traced function unwrapped (trace_to_subjaxpr_nounits), so a checkpoint whose "
        "inputs are all known bypassed the JaxprTrace: bind found the enclosing trace among its "
        "arguments' and bound the checkpoint there as it is, where from 0.4.36 the JaxprTrace "
        "runs remat_partial_eval, which evaluates it inline (`core.eval_jaxpr(jaxpr_known, "
        "...)`). So a scan's loop-invariant checkpoint, which the hoisting of grad's scan "
        "evaluates with its consts known, stays a checkpoint that an outer linearization "
        "differentiates, its recomputation barriered; and a checkpoint nested in a checkpoint's "
        "body that reads no cotangent, which remat_transpose's partial evaluation replays, is "
        "lowered with its barrier. No value changes (measured on 0.4.25; 0.4.36 to 0.10.2 "
        "inline). The predicate: remat2's barriers, and the spec's count following the old "
        "tracing (spec.semantics: partial_eval_inlines_known_checkpoints=False) agrees with "
        "JAX's where its own does not.",
        "from jax import lax\n"
        "import numpy as np\n"
        "f = lambda x, b: lax.scan(lambda c, _: (c * jax.checkpoint(jnp.sin)(b), None), x, None, length=2)[0] * x\n"
        "g = jax.grad(f)\n"
        "hlo = jax.jit(lambda x, b: jax.linearize(g, x, b)[1](x, b)).lower(0.5, 0.7).as_text()\n"
        "print('barrier' if 'optimization_barrier' in hlo else 'inlined')  # barrier",
        _partial_eval_binds_known_checkpoints, releases=Releases("0.4.25", "0.4.36")),
    Divergence(
        "integer-pow-one-jvp-saves-its-factor",
        "Before jax 0.10.1 integer_pow's JVP rule is `g * (y * x**(y-1))` for every y != 0 "
        "(jax/_src/lax/lax.py _integer_pow_jvp), so for y=1 linearization saves the constant "
        "factor `1 * x**0` (an `output of mul`), and for y=2 binds an `integer_pow[y=1]` that "
        "a policy saving integer_pow saves (found on 0.4.36); jax-ml/jax 30f4c93c00 made y=1 "
        "return g and y=2 `g * (2 * x)`. The spec has 0.10.2's rule. Same derivative; one extra "
        "residual (in a checkpoint that recomputes the factor, x instead). The predicate: JAX's residuals are the spec's "
        "following the old rule (spec.semantics: integer_pow_small_y_jvp=False), or "
        "(composing with other divergences) the spec's plus at most one `output of mul` of each "
        "integer_pow[y=1]'s type.",
        "print_saved_residuals(lambda x: jax.lax.integer_pow(x, 1), 2.0)  # f32[] output of mul",
        _integer_pow_one_factor, releases=OLDER_RULES["integer_pow_small_y_jvp"]),
    Divergence(
        "acosh-jvp-multiplies-x-minus-one-by-x-plus-one",
        "Before jax 0.8.0 acosh's JVP rule was g * rsqrt((x - 1) * (x + 1)); from 0.8.0 it is "
        "g * rsqrt(square(x) - 1) (jax/_src/lax/lax.py: \"We use x^2-1 rather than "
        "(x+1)(x-1)\"), which the spec models (spec.semantics: acosh_jvp_squares). A "
        "checkpoint policy that saves `mul` saves the old rule's product, one that saves "
        "`square` nothing there, and the residuals differ. Measured on 0.6.2, 0.7.0 and 0.7.2 "
        "(the product) and 0.8.0 to 0.10.2 (the square); found by a campaign on 0.6.2. The "
        "predicate: the program has an acosh, and JAX's residuals are the spec's following "
        "the old rule and not its own.",
        "j = str(jax.make_jaxpr(lambda x: jax.jvp(jax.lax.acosh, (x,), (x,)))(2.0))\n"
        "print('the product' if 'square' not in j else 'the square')  # the product",
        _acosh_old_jvp, releases=OLDER_RULES["acosh_jvp_squares"]),
    Divergence(
        "square-is-integer-pow",
        "Before jax 0.4.36 `lax.square` bound integer_pow[y=2]; jax-ml/jax 4d0a007d57 (\"Add "
        "square_p\", first in 0.4.36) gave it a primitive of its own, which the spec models "
        "(spec.semantics: square_is_a_primitive). The JVP rules written with `square` (asin, "
        "acos, atan, asinh, tan, atan2, erf, erfc, erf_inv) bound an integer_pow then: a policy "
        "that saves integer_pow saves it, one that saves `square` nothing there. Measured: "
        "0.4.25 binds integer_pow, 0.4.36 square; found by a campaign on 0.4.25. The predicate: "
        "JAX's residuals are the spec's following those releases' square (and their "
        "integer_pow JVP rule) and not its own.",
        "print(jax.make_jaxpr(jax.grad(jax.lax.acos))(0.5))  # integer_pow[y=2]",
        _square_binds_integer_pow, releases=OLDER_RULES["square_is_a_primitive"]),
    Divergence(
        "scan-residuals-in-another-order",
        "Before jax 0.10 (verified on 0.4.25, 0.4.36 and 0.6.2; not bisected between 0.6.2 and "
        "0.10.2) a scan's (and a cond's) partial evaluation orders the residual outputs of the "
        "known half differently from 0.10.2 (which the spec models: in the order the body "
        "computes them), so saved_residuals lists the same `output of scan` (`output of cond`) "
        "entries in another order. Same values, same memory. The predicate: the lists are equal "
        "as multisets and only `output of scan` / `output of cond` entries are out of place.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "def body(d, e):\n"
        "    f_ = jnp.sin(e)\n"
        "    return jnp.sin(d), f_\n"
        "shapes = [a.shape for a, _ in saved_residuals(lambda a: jax.lax.scan(body, a, a)[::-1], jnp.ones(3))]\n"
        "print('stacked first' if shapes == [(3, 3), (3,)] else 'in the order the body computes them')  "
        "# stacked first",
        _scan_residual_order, releases=Releases("0.4.25", "0.10.2")),
    Divergence(
        "jvp-partial-eval-saves-instantiated-zeros-in-another-order",
        "Before direct linearization (the default from jax 0.7.0; gone on 0.6.2 with "
        "jax_use_direct_linearize on) a zero tangent that a JVP rule instantiates (integer_pow's "
        "for y == 0, `_zeros(g)`) is a known value of the partial evaluator from the moment the "
        "rule makes it, and saved_residuals lists it before residuals the linear program reads "
        "first (the spec models 0.10.2: in the order the linear program first reads them). "
        "Measured on 0.4.25, 0.4.30, 0.4.35, 0.4.36, 0.5.0 and 0.6.2 (0.7.0, 0.9.1 and 0.10.2 "
        "as the spec; found by a campaign on 0.4.36). Same values, same memory. The predicate: "
        "the lists are equal as multisets, and equal without their `output of "
        "broadcast_in_dim` entries.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "def f(a):\n"
        "    b = jax.lax.integer_pow(a, 0)\n"
        "    return jax.lax.select_n(a > b, a, b)\n"
        "names = [s.split(' from')[0] for _, s in saved_residuals(f, jnp.ones(3))]\n"
        "print('the zero first' if names[0] == 'output of broadcast_in_dim' else 'as the spec')  "
        "# the zero first",
        _instantiated_zeros_earlier, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "jit-residuals-in-another-order",
        "Before direct linearization (the default from jax 0.7.0; verified on 0.4.25, 0.4.36 "
        "and 0.6.2, gone there with jax_use_direct_linearize on) a jit's partial evaluation "
        "(pe.JaxprTrace) orders the residual outputs of its known half by the outputs that "
        "need them, not in the order the body computes them (0.10.2, which the spec models): "
        "jit(lambda a, b: (sin(a), sin(b))[::-1]) saves cos(b) before cos(a) (found by the "
        "fuzzer on 0.4.25; so are the constants it closes over). Same values, same memory. The "
        "predicate: the program has a jit, the lists are equal as multisets, and only what a "
        "jit returns is out of place: outputs of jitted functions (and of scans and conds) "
        "and constants.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "f = jax.jit(lambda a, b: (jnp.sin(a), jnp.sin(b))[::-1])\n"
        "shapes = [a.shape for a, _ in saved_residuals(f, 0.5, jnp.ones(3))]\n"
        "print('by the outputs' if shapes == [(3,), ()] else 'in the order the body computes them')  "
        "# by the outputs",
        _jit_residual_order, releases=Releases("0.4.25", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "linearize-inlines-a-known-differentiated-checkpoint",
        "A checkpoint that an earlier differentiation made (grad's transposed checkpoint, "
        "`differentiated=True`) and whose inputs are all known is bound as it is when the "
        "function is linearized, and remat_lowering puts an optimization barrier on its "
        "inputs whenever `differentiated and prevent_cse` (jax 0.10.2, which the spec models; "
        "measured the same on 0.4.25-0.4.35 and 0.7.0-0.9.1). So is a user's checkpoint on a "
        "scan's carry that has no tangent: it is known, but the scan's hoisting re-traces the "
        "known body with only its consts known and remat_partial_eval stages it "
        "differentiated (found by a campaign on 0.4.25, finding e2fad985e3). From jax 0.4.36 until direct "
        "linearization became the default (0.7.0; gone on 0.6.2 with jax_use_direct_linearize "
        "on), linearization by JVP and partial evaluation inlines its body into the forward "
        "pass: the jit of jax.linearize(jax.grad(f)) whose linear function is then called "
        "has no barrier for it. No value changes (found by a campaign on 0.4.25, where the "
        "spec predicted no barrier, and measured on every release from 0.4.26 to 0.10.1). "
        "The predicate: JAX's HLO has no barrier, and every barrier the spec predicts comes "
        "from such a known checkpoint of the forward pass "
        "(spec.barriers.known_checkpoint_barriers).",
        "import numpy as np\n"
        "w = np.ones(3, np.float32)\n"
        "g = jax.grad(lambda b: jnp.sum(jax.checkpoint(lambda o: o)(jnp.sin(b)) * w))\n"
        "hlo = jax.jit(lambda b, t: jax.linearize(g, b)[1](t)).lower(w, w).as_text()\n"
        "print('inlined' if 'optimization_barrier' not in hlo else 'barrier')  # inlined",
        _linearize_inlines_known_checkpoints, releases=Releases("0.4.36", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "custom-vjp-in-scan-or-jit-saves-its-output",
        "From jax 0.4.16 (jax-ml/jax 70b58bbd30) to 0.6.0 a custom_vjp function's JVP ties its "
        "primal outputs to the tangents (`lax.tie_p.bind(primals_out, tangents_out)`), so "
        "linearizing one inside a scan body saves its primal output as a residual the backward "
        "pass never needs (an extra stacked `output of scan`), and inside a jit body as well "
        "(an extra `output of jitted function`: measured on 0.4.25 and 0.4.36, not on 0.6.2), "
        "and inside a cond branch (an extra `output of cond`: found by a campaign on 0.4.36); "
        "jax-ml/jax 74938be845 (0.6.1) removed the tie. docs/historic_bugs.md has the "
        "reproducer. The predicate: JAX's list is the spec's plus such entries, at most one per "
        "output of a custom_vjp in a scan or jit body or a cond branch (stacked by every scan around it, or by the inner "
        "ones alone where the outer ones hoist it, or of its own type; in a checkpoint's body an "
        "`output of closed_call`, the known half of the scan's split: found by a campaign on 0.4.36).",
        "@jax.custom_vjp\n"
        "def s(x):\n"
        "    return jnp.sin(x)\n"
        "s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))\n"
        "f = lambda a: jax.lax.scan(lambda c, _: (lambda e: (e, e))(s(c)), a, None, length=1)\n"
        "n = len(jax._src.ad_checkpoint.saved_residuals(f, 1.0))\n"
        "print('saves its output too' if n == 2 else 'saves only its residual')  # saves its output too",
        _custom_vjp_output_in_scan, releases=Releases("0.4.25", "0.6.1")),
    Divergence(
        "linearized-function-with-a-zero-output-fails-under-jit",
        "Before jax 0.7.0 (0.4.25, 0.4.36 and 0.6.2 measured; 0.7.0 passes with direct "
        "linearization on or off) the linear function jax.linearize returns inside a jit, when "
        "one of its outputs has a zero tangent (an output that does not depend on the "
        "linearized inputs: the gradient of an input the function never reads), keeps that "
        "output as a known value in its static data (api._lift_linearized's out_pvals): "
        "returned from the jit and called under another jit it raises UnexpectedTracerError "
        "(an escaped DynamicJaxprTracer, 0.4.x) or TypeError: unhashable type: 'Literal' "
        "(0.6.2), or, where its output is all the function returns (integer_pow(x, 0) on "
        "0.4.36: found by a campaign), TypeError: Computation compiled for 2 inputs but called "
        "with 1. docs/historic_bugs.md has the reproducer (found by a campaign on 0.4.25: "
        "stack `linearize o grad`). The spec computes the tangents. The predicate: the stack "
        "property (only a stack ending in linearize returns a linear function from its jit), "
        "and JAX raised exactly one of these errors.",
        "f_lin = jax.jit(lambda x: jax.linearize(lambda x: (jnp.sin(x), jnp.zeros(())), x)[1])(1.0)\n"
        "jax.jit(lambda f, t: f(t))(f_lin, 1.0)  # raises",
        _linearized_zero_output_leaks, releases=Releases("0.4.25", "0.7.0")),
    Divergence(
        "custom-vjp-under-vmap-of-a-batched-cond-miscounts-its-outputs",
        "From jax 0.4.25 to 0.6.0 (measured: 0.4.25, 0.4.36, 0.4.38, 0.5.0, 0.5.1, 0.5.3 and "
        "0.6.0 raise; 0.6.1, 0.6.2 and 0.10.2 compute) grad of vmap of vmap of a cond whose "
        "predicate the inner vmap batches, with a custom_vjp (whose fwd returns a residual) in "
        "a branch applied to a value the outer vmap batches, raises ValueError: safe_zip() "
        "argument 2 is longer than argument 1. cond's batching rule, for a batched predicate, "
        "evaluates both branches eagerly on the outer traces, so _custom_vjp_call_jaxpr_vmap "
        "(jax/_src/custom_derivatives.py) runs with the JVP trace below it, which calls the "
        "memoized batched fwd thunk during the bind; the rule then returns `out_dims2[0]`, the "
        "batch dims of the fwd's outputs, residuals included, as the dims of the primal outputs "
        "alone. jax-ml/jax 74938be845 (0.6.1, PR #28589) removed that rule. docs/historic_bugs.md "
        "has the reproducer (found by a campaign on 0.4.25: grad o vmap o vmap of a cond "
        "branch's dead custom_vjp of tanh). The predicate: JAX raised exactly that ValueError for "
        "a stack where the spec computes, and a cond branch of the checked function holds a "
        "custom_vjp call.",
        "@jax.custom_vjp\n"
        "def g(x):\n"
        "    return jnp.tanh(x)\n"
        "g.defvjp(lambda x: (jnp.tanh(x), 1 - jnp.tanh(x) ** 2), lambda r, c: (c * r,))\n"
        "f = lambda p, x: jax.lax.cond(p > 0, lambda x: x, g, x)\n"
        "loss = lambda x, p: jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(None, 0))(p, x).sum()\n"
        "jax.grad(loss)(jnp.ones(2), jnp.array([1., -1., 1.]))  # raises",
        _custom_vjp_in_a_batched_cond_miscounts, releases=Releases("0.4.25", "0.6.1")),
    Divergence(
        "custom-vjp-of-an-instantiated-zero-tangent-fails",
        "Before jax 0.7.1 (0.4.25, 0.4.36, 0.6.2 and 0.7.0 measured in a cond branch, 0.7.0 "
        "passing outside one; 0.7.1 passes) "
        "differentiating a custom_vjp function applied to integer_pow(x, 0) (`x ** 0`) raises "
        "TypeError: can't apply forward-mode autodiff (jvp) to a custom_vjp function. "
        "integer_pow's JVP rule returns instantiated zeros for y == 0, a value partial "
        "evaluation knows, so the custom_vjp's tangent half (custom_lin) has only known "
        "operands and is evaluated, and custom_lin's impl raises that error. 0.7.1 (and the "
        "spec) take the tangent as the symbolic zero it is: the custom_vjp contributes nothing. "
        "docs/historic_bugs.md has the reproducer. The predicate: JAX raised exactly that "
        "TypeError, the checked function has an integer_pow with y == 0, and a custom_vjp call "
        "in it takes a float operand whose tangent the spec's linearization knows is zero.",
        "s = jax.custom_vjp(jnp.sin)\n"
        "s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (c * g,))\n"
        "jax.grad(lambda a: jax.lax.cond(a > 0, lambda h: s(jax.lax.integer_pow(h, 0)), jnp.sin, a))(0.5)  # raises",
        _custom_vjp_of_an_instantiated_zero, releases=Releases("0.4.25", "0.7.1")),
    Divergence(
        "custom-vjp-of-an-instantiated-zero-tangent-fails-in-a-checkpoint",
        "In a checkpoint's body the same failure holds on every release (0.4.25 to 0.10.2 "
        "measured, remat2 and remat3): remat_jvp differentiates the body with jvp_jaxpr, where "
        "integer_pow(x, 0)'s JVP rule still instantiates its zero tangent, so partial "
        "evaluation evaluates the custom_vjp's custom_lin, which raises TypeError: can't apply "
        "forward-mode autodiff (jvp) to a custom_vjp function. Found by a pristine nightly on "
        "0.10.2 (a custom_vjp in a cond branch in a checkpoint). The spec takes the tangent as "
        "the symbolic zero it is. Differentiating the pullback again, remat2 raises "
        "NotImplementedError: Differentiation rule for 'custom_lin' not implemented, where the "
        "spec refuses forward mode through the custom_vjp. The predicate: as custom-vjp-of-an-"
        "instantiated-zero-tangent-fails, for a custom_vjp call in a checkpoint's body (JAX's "
        "error either, the spec refusing the second).",
        "s = jax.custom_vjp(jnp.sin)\n"
        "s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (c * g,))\n"
        "jax.grad(jax.checkpoint(lambda a: s(jax.lax.integer_pow(a, 0))))(0.5)  # raises",
        _custom_vjp_in_a_checkpoint_of_an_instantiated_zero, releases=Releases("0.4.25")),
    Divergence(
        "save-from-both-policies-answers-either-answer",
        "Before jax 0.4.38 save_from_both_policies(p1, p2) is `p1(...) or p2(...)`: Python's "
        "`or` of the two answers, bools or not, so combined with an offload policy (whose "
        "answers are pe.Recompute / pe.Saveable / pe.Offloadable) it answers the first truthy "
        "one; from 0.4.38 (the release wheels' ad_checkpoint.py: 0.4.37 has no check, 0.4.38 "
        "has it) it raises ValueError for a non-bool answer, as the spec does "
        "(PolicyCombinationError; found by a campaign on 0.4.36). The predicate: remat2, the "
        "spec raised PolicyCombinationError where JAX computed, and for the residuals JAX's "
        "list is the spec's with every such combination Python's `or` of its answers.",
        "from jax import checkpoint_policies as cp\n"
        "p = cp.save_from_both_policies(cp.nothing_saveable, cp.save_and_offload_only_these_names(\n"
        "    names_which_can_be_saved=['a'], names_which_can_be_offloaded=[], offload_src='device', "
        "offload_dst='pinned_host'))\n"
        "f = jax.checkpoint(lambda x: jnp.sin(checkpoint_name(jnp.sin(x), 'a')), policy=p)\n"
        "try:\n"
        "    computed = jax.grad(f)(1.0) is not None\n"
        "except ValueError:   # The return value of the policies should be a boolean\n"
        "    computed = False\n"
        "print('computed:', computed)  # computed: True",
        _save_from_both_unchecked, releases=Releases("0.4.25", "0.4.38")),
    Divergence(
        "nested-per-argument-prevent-cse-loses-its-residual-flags",
        "jax.checkpoint's prevent_cse may be one flag per argument (a tuple, from jax 0.7.2: "
        "jax-ml/jax eb92beb6c6). A checkpoint with such flags nested in another checkpoint is "
        "split by the enclosing partial evaluation (pe.partial_eval_jaxpr_custom, "
        "call_partial_eval_custom_rule), and its staged half reads the residuals first; but "
        "remat_partial_eval_custom_params_updater (jax/_src/ad_checkpoint.py) gives it only "
        "the flags of its instantiated inputs, none for the residuals, so remat_dce's "
        "safe_zip of flags and used inputs raises `safe_zip() argument 1 has length N but "
        "argument 0 has length M` and reverse mode fails (found by the fuzzer once it drew "
        "per-argument flags; the same code at jax-ml/jax HEAD of 2026-08). The spec gives the "
        "staged half a True flag per residual, as remat_partial_eval does for its own "
        "(`(True,) * len(res_tracers)`). The predicate: remat2, JAX raised that ValueError "
        "(more inputs than flags) where the spec computes, and a checkpoint with per-argument "
        "flags sits in another checkpoint's body.",
        "inner = jax.checkpoint(jnp.sin, prevent_cse=(True,))\n"
        "f = jax.checkpoint(lambda x: inner(x) * 2.0, policy=jax.checkpoint_policies.everything_saveable)\n"
        "try:\n"
        "    raised = jax.grad(f)(1.0) is None\n"
        "except ValueError:   # safe_zip() argument 1 has length 2 but argument 0 has length 1\n"
        "    raised = True\n"
        "print('raised:', raised)  # raised: True",
        _nested_per_argument_prevent_cse, releases=Releases("0.7.2")),
    Divergence(
        "vmap-of-per-argument-prevent-cse-drops-the-batched-body-s-constants",
        "remat_vmap (jax/_src/ad_checkpoint.py) batches a checkpoint's body with "
        "batching.batch_jaxpr_axes; where that hoists constants out of the body (an array "
        "constant a cond branch, while body or scan body closes over: its ClosedJaxpr's "
        "consts, a form JAX's own transformations build and oracle.to_jax binds as the spec "
        "program has it), it binds remat_p with the constants as leading arguments but keeps "
        "the per-argument prevent_cse tuple (jax 0.7.2+) as it was, one flag short per "
        "constant, and _remat_bind's `assert isinstance(prevent_cse, bool) or "
        "len(prevent_cse) == len(args)` fails: vmap raises a bare AssertionError (found by "
        "the fuzzer; the same code at jax-ml/jax HEAD of 2026-08). A bool prevent_cse, or "
        "remat3, batches it. The spec batches it (the constants stay in the body). The "
        "predicate: remat2, a batching property (vmap, or a stack), JAX raised a bare "
        "AssertionError where the spec computes, and a checkpoint with per-argument flags "
        "has in its body a cond, while or scan whose sub-program reads an array constant.",
        "from jax._src.lax.control_flow import conditionals\n"
        "c = jnp.array([0.5, 0.75, 1.0], jnp.float32)\n"
        "branches = (jax.make_jaxpr(jnp.sin)(c), jax.make_jaxpr(lambda u: c + u)(c))  # the second has consts\n"
        "def body(x):\n"
        "    index = (jnp.sum(x) > 0).astype(jnp.int32)\n"
        "    try:\n"
        "        return conditionals.cond_p.bind(index, x, branches=branches)[0]\n"
        "    except TypeError:   # before jax 0.4.3x cond_p also takes `linear`\n"
        "        return conditionals.cond_p.bind(index, x, branches=branches, linear=(False,))[0]\n"
        "try:\n"
        "    raised = jax.jit(jax.vmap(jax.checkpoint(body, prevent_cse=(False,))))(jnp.ones((2, 3))) is None\n"
        "except AssertionError:   # _remat_bind: len(prevent_cse) == len(args)\n"
        "    raised = True\n"
        "print('raised:', raised)  # raised: True",
        _vmapped_per_argument_prevent_cse_with_closed_constants, releases=Releases("0.7.2")),
    Divergence(
        "sort-jvp-permutation-is-int32",
        "Before jax 0.4.38 sort's JVP rule (jax/_src/lax/lax.py _sort_jvp) sorts an int64 iota "
        "along (int32 without x64) to gather the tangents with; from 0.4.38 (and in the spec, "
        "as 0.10.2) a uint64 one (uint32), so the saved permutation is `i32[..., 1]` where the "
        "spec saves `u32[..., 1]` (found checking jnp.sort on 0.4.36; the release wheels' "
        "lax.py: np.int64 in 0.4.37, np.uint64 in 0.4.38). Same values, same memory. The "
        "predicate: each `u32[s, 1]` entry of the spec's (s a sort operand's shape) is in JAX's "
        "list replaced by up to one entry per sorted operand (each tangent gathered on its "
        "own): `i32[s, 1]` of the same provenance, or for an operand of rank r >= 2, whose "
        "tangent is gathered with every dimension's indices, `i32[s, r]` an `output of "
        "concatenate` (in a jit the jit's output; found by campaigns on 0.4.25 and 0.4.36); "
        "or JAX's residuals are the spec's following the old rule (spec.semantics: "
        "sort_jvp_gathers_along_its_dimension=False: int32 iotas, `t[idx]` lowered by jnp "
        "indexing, whose index wrapping a policy saving `add` saves; found by a campaign on 0.4.36).",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "dtypes = [str(a.dtype) for a, _ in saved_residuals(lambda x: jnp.sin(jnp.sort(x)), jnp.ones(4))]\n"
        "print('the permutation is int32:', 'int32' in dtypes)  # the permutation is int32: True",
        _sort_old_jvp, releases=OLDER_RULES["sort_jvp_gathers_along_its_dimension"]),
    Divergence(
        "top-k-jvp-gathers-with-every-index",
        "Before jax 0.4.35 top_k's JVP rule (jax/_src/lax/lax.py _top_k_jvp) gathers the "
        "tangent with the indices of every dimension, concatenated (`i32[..., k, r]`, an "
        "`output of concatenate`, r the operand's rank); from 0.4.35 (and in the spec, as "
        "0.10.2) with the last dimension's alone (`i32[..., k, 1]`, an `output of reshape`). "
        "Measured on every release with tools/releases.py (found by a campaign on 0.4.25). "
        "More memory, same values. The predicate: JAX's residuals are the spec's following the "
        "old rule (spec.semantics: top_k_jvp_batches_its_gather=False: a policy may save the "
        "old indices' parts), or the lists differ only in such entries, in the same place.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "r = saved_residuals(lambda b: jax.lax.top_k(b, 2)[0], jnp.ones((3, 5)))\n"
        "print('indices:', [s.split(' from ')[0] for a, s in r if 'int' in str(a.dtype)])  "
        "# indices: ['output of concatenate']",
        _top_k_old_jvp, releases=OLDER_RULES["top_k_jvp_batches_its_gather"]),
    Divergence(
        "lu-jvp-gathers-with-every-index",
        "Before jax 0.5.3 lu's JVP rule (jax/_src/lax/linalg.py _lu_jvp_rule) is one batched "
        "rule that first permutes the tangent's rows, `a_dot[(*iotas[:-1], permutation, :)]` "
        "with an iota per batch dimension, through jnp indexing (each index wrapped with lt, "
        "add and select_n, broadcast, and for a batch concatenated: `i32[..., m, r - 1]`, an "
        "`output of concatenate`, r the operand's rank), then builds L and U (_tril, _triu, "
        "eye) and solves; from 0.5.3 (jax-ml/jax 62530d5922; and in the spec, as 0.10.2) "
        "`_lu_jvp_inner` on one matrix, vmapped, permutes after building L and U, with the "
        "row's indices alone (`i32[..., m, 1]`, an `output of broadcast_in_dim`). So what a "
        "policy saves of the rule comes in another order, or is the old indices' parts: one "
        "saving select_n saves a matrix's wrapped permutation (`i32[m]`) before the two "
        "masked factors, where the spec saves it after (release campaign finding b91e39e751 "
        "on 0.4.25). Measured on 0.4.25 and 0.4.36 (the old rule) and 0.6.2, 0.10.2 (the "
        "new), the change read off JAX's history (0.5.2 has the old rule); the spec's old "
        "rule is 0.4.36's jvp jaxpr equation for equation (0.4.38, 0.5.0 and 0.5.1 too; for a "
        "batch 0.4.25 indexes with jnp.ix_, not modelled). More memory, same values. The "
        "predicate: JAX's residuals are the spec's following the old rule (spec.semantics: "
        "lu_jvp_vmaps_its_inner_rule=False), or the lists are the same but for such index "
        "entries, JAX's listed first (composing with other additive divergences).",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "import numpy as np\n"
        "r = saved_residuals(lambda b: jax.lax.linalg.lu(b)[0], np.random.RandomState(0).randn(2, 3, 3).astype(np.float32))\n"
        "print('indices:', [s.split(' from ')[0] for a, s in r if 'int' in str(a.dtype)])  "
        "# indices: ['output of concatenate']",
        _lu_old_jvp, releases=OLDER_RULES["lu_jvp_vmaps_its_inner_rule"]),
    Divergence(
        "xla-cpu-folds-a-constant-s-transpose-into-a-jit-as-a-bitcast",
        "With jaxlib 0.5.3 to 0.8.0, XLA:CPU computes a jitted function applied to a transpose "
        "of a constant (inside an outer jit) as if the transpose were a reshape: the compiled "
        "module folds `sin(transpose(c))` to one constant whose values are sin of c's buffer read "
        "in the transposed shape. JAX's own HLO is right (transpose, then a call of sin); the "
        "optimized module has the wrong constant. Wrong values, forward and reverse. Measured on "
        "CPU: 0.5.1 right, 0.5.3, 0.6.0, 0.6.1, 0.6.2, 0.7.0, 0.7.2, 0.8.0 wrong, 0.8.1, 0.8.2, "
        "0.9.0, 0.10.2 right (jaxlib 0.5.2 does not exist); a unary elementwise op in the inner "
        "jit (sin, neg) shows it, mul by a literal does not; rev and reshape of a constant do not. "
        "Found by a release campaign on 0.6.2 (573c84e45d). The predicate: JAX's numbers are the "
        "spec's for the program with every transpose of a constant read as a reshape of it.",
        "import numpy as np\n"
        "x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)\n"
        "got = jax.jit(lambda: jax.jit(jnp.sin)(jax.lax.transpose(x, (0, 2, 1))))()\n"
        "print('wrong' if not np.allclose(got, np.sin(x.transpose(0, 2, 1)), atol=1e-6) else 'right')  # wrong",
        _xla_folds_constant_transposes_as_bitcasts, releases=Releases("0.5.3", "0.8.1")),
    Divergence(
        "xla-drops-float-round-trips",
        "jax 0.4.25's XLA:CPU removes a cast of a float to a narrower float and straight back "
        "(f32 -> bf16, f16 or an fp8 type -> f32) as a no-op, so the value is not rounded: "
        "jax.jit(lambda v: v.astype(jnp.bfloat16).astype(jnp.float32))(100.3) is 100.3, and a "
        "float8_e4m3fnuz fake quantisation of 450.0 stays finite where the type overflows to "
        "NaN. From jax 0.4.36 it rounds (100.5), as the spec does. Measured on 0.4.25, 0.4.36, "
        "0.6.2 and 0.10.2 (releases between 0.4.25 and 0.4.36 not measured). The predicate: a "
        "numeric property whose JAX numbers are the spec's for the program with every such "
        "round trip removed.",
        "import numpy as np\n"
        "f = jax.jit(lambda v: v.astype(jnp.bfloat16).astype(jnp.float32))\n"
        "print('rounded' if float(f(np.float32(100.3))) == 100.5 else 'dropped')  # dropped",
        _xla_drops_float_round_trips, releases=Releases("0.4.25", "0.4.36")),
    Divergence(
        "approx-top-k-jvp-gathers-with-every-index",
        "Before jax 0.7.1 approx_top_k's JVP rule (jax/_src/lax/ann.py _approx_top_k_jvp) "
        "gathers the tangent with `tangent[idx]`, idx the indices of every dimension "
        "(broadcasted iotas beside the arg-max output: `i32[..., k, r]`, an `output of "
        "concatenate`, r the operand's rank); from 0.7.1 (jax-ml/jax 504ef48401, and in the "
        "spec, as 0.10.2) with jnp.take_along_axis along the reduction dimension alone "
        "(`i32[..., k, 1]`, an output of the jitted take_along_axis). Measured on 0.4.25, "
        "0.4.36 and 0.6.2 (tests/test_prims_approx_top_k.py). More memory, same values. The "
        "predicate: JAX's residuals are the spec's following the old rule (spec.semantics: "
        "approx_top_k_jvp_takes_along_axis=False: a policy may save the old indices' parts, "
        "say their normalising `add`s), or the lists differ only in such entries, in the same "
        "place or in an order-only divergence's order.",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "r = saved_residuals(lambda b: jax.lax.approx_max_k(b, 2)[0], jnp.ones((3, 5)))\n"
        "print('indices:', [s.split(' from ')[0] for a, s in r if 'int' in str(a.dtype)])  "
        "# indices: ['output of concatenate']",
        _approx_top_k_old_jvp, releases=OLDER_RULES["approx_top_k_jvp_takes_along_axis"]),
    Divergence(
        "custom-vjp-saves-its-output",
        "Before jax 0.4.36 (0.4.25, 0.4.30, 0.4.33 to 0.4.35 measured; 0.4.36 not) the tie of a custom_vjp's primal outputs to its "
        "tangents (`lax.tie_p`, jax-ml/jax 70b58bbd30; see custom-vjp-in-scan-or-jit-saves-its-output) "
        "makes linearization save the primal output also where the custom_vjp is called at the "
        "top level: s(x) = sin(x) with fwd (sin(x), cos(x)) saves `output of sin` and `output of "
        "cos`, where the backward pass reads only cos(x) (found checking a custom_vjp on "
        "0.4.25). Wasted memory; gradients are right. The predicate: JAX's list is the spec's "
        "plus entries, at most one per output of a custom_vjp at the top level (named as the "
        "forward rule computes it) or in a scan or jit body, at least one at the top level.",
        "@jax.custom_vjp\n"
        "def s(x):\n"
        "    return jnp.sin(x)\n"
        "s.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (g * c,))\n"
        "n = len(jax._src.ad_checkpoint.saved_residuals(s, 1.0))\n"
        "print('saves its output too' if n == 2 else 'saves only its residual')  # saves its output too",
        _custom_vjp_output_anywhere, releases=Releases("0.4.25", "0.4.36")),
    Divergence(
        "custom-vjp-in-a-checkpoint-saves-the-checkpoint-s-inputs",
        "Before jax 0.6.1 (every release from 0.4.25 measured with tools/releases.py; fixed with "
        "custom-vjp-in-scan-or-jit-saves-its-output by 74938be845, which removed lax.tie_p's "
        "tie of a custom_vjp's primal outputs to its tangents) a custom_vjp called inside a "
        "checkpoint makes the checkpoint save its inputs besides what its policy saves: "
        "checkpoint(s, policy=save_only_these_names('cos')) of a custom_vjp s whose forward rule "
        "names cos(x) saves x and cos(x), where the backward pass reads only cos(x); two nested "
        "custom_vjp identities with symbolic zeros save x where nothing is needed (found by the "
        "corpus cases after JAX's test_custom_vjp_with_checkpoint_name_in_fwd and "
        "test_symbolic_zeros_remat, on 0.4.25). Wasted memory; gradients are right. The "
        "predicate: JAX's list is the spec's plus entries, at most one per input of a "
        "checkpoint whose body calls a custom_vjp, or per custom_vjp output there (of a nested "
        "one, saved out of the enclosing checkpoint: an `output of remat2`), or per name there of "
        "the custom_vjp's output "
        "(saved where a names policy saves it: found by a campaign on 0.4.36), or per value the "
        "body computes the custom_vjp's operands from (the checkpoint recomputes them, saving "
        "what the policy lets it on the way: a named value, found by a release campaign on "
        "0.4.36, 913246c3cf), or per custom_vjp "
        "output (named `output of reduce_precision` where the release rounds what remat saves), "
        "at least one; a checkpoint in a jit counts too, its entries named as what the jit returns "
        "or, for its input, the jit's operand (the jit forwards it: found by a campaign on 0.4.36).",
        "s = jax.custom_vjp(jnp.sin)\n"
        "s.defvjp(lambda x: (jnp.sin(x), checkpoint_name(jnp.cos(x), 'cos')), lambda c, g: (c * g,))\n"
        "f = jax.checkpoint(s, policy=jax.checkpoint_policies.save_only_these_names('cos'))\n"
        "print(len(jax._src.ad_checkpoint.saved_residuals(f, 1.0)), 'saved')  # 2 saved",
        _custom_vjp_in_checkpoint_saves_checkpoint_inputs, releases=Releases("0.4.25", "0.6.1")),
    Divergence(
        "jvp-partial-eval-saves-a-zero-power-s-literal",
        "Without direct linearization (jax_use_direct_linearize off: every release before 0.7.0, "
        "where it is the default since jax-ml/jax a7ed048afa, or absent before 0.4.36) "
        "linearization is JVP followed by partial evaluation, and the zero tangent of "
        "integer_pow(x, 0) (`_zeros(g)`, a broadcast literal 0) becomes a saved scalar `from a "
        "literal`; direct linearization (which the spec models) keeps it a symbolic zero. The "
        "predicate: JAX's list is the spec's plus, per integer_pow[y=0], its zero and its products "
        "(at most one per later equation): a scalar "
        "`from a literal` of its dtype, for an array power an `output of broadcast_in_dim` of "
        "its type, in a scan body an `output of scan`, stacked, in a jit an output of the jit, or "
        "the zero's product with a "
        "primal in a later equation's JVP, an `output of mul` (or of that equation's primitive, or "
        "the factor its JVP makes, e.g. cos's `output of neg` in a scan body; in a jit, what the "
        "jit returns: a dot_general's product, found on 0.6.2) of its type; or, for a power in a "
        "cond branch, the spec's saved `output of cond` zero that JAX's partial evaluation knows; "
        "or, in a scan body, the zero the spec saves once where JAX saves a stacked product (found "
        "by campaigns on 0.4.25, 0.4.36 and 0.6.2); or JAX's residuals are exactly the spec's "
        "linearizing by JVP then partial evaluation (spec.semantics: "
        "direct_linearization=False), where the zero is one known value, saved "
        "once however many tangent equations read it, and direct linearization instantiates "
        "a symbolic zero for each (found on 0.4.36: concatenate([b, c, b]) of b = a ** 0).",
        "print_saved_residuals(lambda a: a + jax.lax.integer_pow(a, 0), 1.0)  # from a literal",
        _zero_power, flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "jvp-partial-eval-saves-a-scan-s-zero-carry-tangent",
        "Without direct linearization (jax_use_direct_linearize off: every release before 0.7.0, "
        "where it is the default since jax-ml/jax a7ed048afa) a scan (or while loop) whose carry has a zero "
        "tangent at the start that the loop makes nonzero gets that zero instantiated by "
        "_scan_jvp outside the loop (`ad.instantiate_zeros`: a scalar literal 0, or a "
        "broadcast_in_dim of one), and partial evaluation saves it as a residual the staged "
        "scan reads as its initial carry; direct linearization (which the spec models) makes "
        "it in the tangent function, never saved (found by the corpus cases after JAX's "
        "test_remat_checkpoint_dots_inside_scan and test_dce_jaxpr_scan_overpruning on 0.4.25, "
        "0.4.36 and 0.6.2). A saved zero: wasted memory, gradients are right. The predicate: "
        "JAX's list is the spec's plus at most one zero (a scalar `from a literal`, an array "
        "`output of broadcast_in_dim`) per float carry of a top-level scan or while loop, of its type; "
        "for one in a top-level jit an array zero is an output of the jit (found by a release campaign "
        "on 0.6.2, 6a3e4af576).",
        "f = lambda w: jax.lax.scan(lambda c, _: (jnp.sin(c + w), None), 1.0, None, length=3)[0]\n"
        "print_saved_residuals(f, 2.0)  # from a literal",
        _scan_zero_carry_tangent, flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "jit-residual-forwarding-gives-wrong-gradients",
        "In jax 0.4.25 pjit's partial evaluation (_pjit_partial_eval) forwards a jitted "
        "function's residuals that are its inputs or its known outputs, and maps them back "
        "wrongly when an output of the jit is one of its inputs passed through (here through "
        "checkpoints that return their input): the reverse pass of jax.jit(f) reads the wrong "
        "residuals, so jax.vjp's cotangents are wrong (0.4.25: 3.1451 where 3.5704 is right), "
        "or partial evaluation fails with an IndexError in `subs_list2`. jax-ml/jax#20267, fixed "
        "by c515f15e01 (\"fix residual forwarding bug\", 2024-03-15) in jax 0.4.26 (found by a "
        "campaign on 0.4.25: a jitted pair of nested checkpoints returning their input). The "
        "predicate: remat2, a program (or a jit or checkpoint in it; for a stack, the program its "
        "levels build, where a JVP's tangent passed through is such an output: found by a "
        "campaign on 0.4.25, linearize o jvp o jvp) with an output that is one "
        "of its inputs passed through, and either that IndexError, a TypeError of lax's shape "
        "rules, which states the shapes or dimensions it met (a wrong residual meets a cotangent "
        "of another shape: found on 0.4.25, e.g. transpose's \"isn't a permutation of operand "
        "dimensions\" under grad o jvp), the "
        "lowering's verifier error of a jit called with a residual of another type "
        "(\"'func.call' op operand type mismatch\"), or "
        "reverse-mode values (vjp, second order, a stack) or residuals that differ.",
        "def outer(f):\n"
        "    h, _ = jax.checkpoint(lambda j: (j + jnp.sin(j), j), prevent_cse=False)(f)\n"
        "    return f + h, f\n"
        "fn = jax.jit(lambda a: (*jax.checkpoint(outer)(a), jnp.exp(jnp.tanh(a))))\n"
        "x = jnp.float32(-1.1369617)\n"
        "ct = jax.vjp(fn, x)[1]((jnp.float32(1.), jnp.float32(1.), jnp.float32(1.)))[0]\n"
        "t = jnp.tanh(x)\n"
        "print('wrong' if abs(ct - (3 + jnp.cos(x) + jnp.exp(t) * (1 - t * t))) > 1e-4 else 'right')  # wrong",
        _pjit_residual_forwarding, releases=Releases("0.4.25", "0.4.26")),
    Divergence(
        "linearize-ignores-an-unlinearizable-dead-primal",
        "Without direct linearization (jax_use_direct_linearize off: every release before 0.7.0) "
        "linearization is JVP followed by partial evaluation, which fails only where a primal "
        "output the function returns is unknown; a primal no output reads may be unknown. "
        "Direct linearization (0.10.2, and the spec) linearizes a scan body whole and refuses "
        "it when any of its primals depends on tangents: a generic reduce_window (whose JVP "
        "computes the primal from the tangents) with its stacked output unused (found by a "
        "campaign on 0.6.2; from 0.4.28, when the generic rule was added), or one a derivative "
        "leaves dead (found on 0.6.2: grad o vmap o grad of a reduce_window of an input the "
        "inner grad holds constant); in reverse mode JAX may then meet the missing transpose of "
        "such a reduce_window its linear program keeps (a dead one in a cond branch, staged "
        "whole: found by a campaign on 0.6.2), or of an equation reading its unknown primal (a "
        "`name` of it a checkpoint returns unused: found by a campaign on 0.4.36). The "
        "predicate: the spec raised its linearization error where JAX computed or raised such "
        "a transpose's NotImplementedError, and the "
        "program without its dead code linearizes (a stack: built with each level's dead code "
        "removed), or the spec linearizing by JVP then partial evaluation does (a live primal no "
        "output depends on, a scan carry only a while loop's unread const takes: found by a "
        "campaign on 0.4.36).",
        "f = lambda a, b: jax.lax.scan(lambda c, _: (jnp.sin(c), jax.lax.reduce_window(\n"
        "    b, 1.0, jax.lax.mul, (1, 3), (1, 1), 'VALID')), a, None, length=1)[0]\n"
        "try:\n"
        "    jax.linearize(f, 1.0, jnp.ones((2, 5)))\n"
        "    print('linearized')\n"
        "except (ValueError, NotImplementedError) as e:   # no JVP rule before 0.4.28\n"
        "    print(type(e).__name__)  # linearized",
        _dead_primal_unlinearizable, releases=Releases("0.4.28", "0.7.0"),
        flag="jax_use_direct_linearize", flag_value=False),
    Divergence(
        "generic-reduce-window-refuses-linearization-otherwise",
        "A generic reduce_window (a window reduction with a jaxpr of its own, lax.reduce_window "
        "with a Python function) has no linearization: its JVP computes the primal output from "
        "the tangents. Both JAX and the spec refuse to differentiate it in reverse mode, the "
        "spec with the error of jax 0.4.38 on (`Linearization failed to produce known values for "
        "all output primals`); before, JAX refused with other errors: no JVP rule at all "
        "(NotImplementedError, before 0.4.28, when the generic rule was added), then a bare "
        "AssertionError (0.4.28 to 0.4.36; every release measured with tools/releases.py; found by a campaign on 0.4.36). The predicate: a program "
        "with a reduce_window, and JAX raised its missing-rule NotImplementedError (for a forward-mode "
        "derivative too, which the spec computes: found by a campaign on 0.4.25), or the spec raised "
        "that ValueError and JAX the AssertionError.",
        "f = lambda b: jax.lax.reduce_window(b, 1.0, jax.lax.mul, (1, 3), (1, 1), 'VALID')\n"
        "try:\n"
        "    jax.linearize(f, jnp.ones((2, 5)))\n"
        "except ValueError:\n"
        "    print('the linearization error')\n"
        "except (AssertionError, NotImplementedError):\n"
        "    print('another error')  # another error",
        _generic_reduce_window_refused_otherwise, releases=Releases("0.4.25", "0.4.38")),
    Divergence(
        "generic-reduce-window-jvp-fails-on-a-symbolic-zero-tangent",
        "The JVP rule of a generic reduce_window (lax.reduce_window with a Python function; "
        "reduce_window_jvp, jax/_src/lax/windowed_reductions.py) instantiates the init values' "
        "symbolic zero tangents but not the operands': where an operand's tangent is a symbolic "
        "zero it binds reduce_window on a Zero and fails with `ValueError: Operands must have the "
        "same tree structure as init_values`. An operand's tangent is a symbolic zero in a "
        "derivative of a derivative whose inner tangent the outer one holds constant: "
        "jvp(lambda b: jvp(f, (b,), (t,))[1]) with t closed over, whose inner JVP reduce_window "
        "takes (b, t) and the outer differentiates b alone. The spec computes it (a zero "
        "tangent is a zero), or, in reverse mode, refuses it as JAX would with the rule fixed "
        "(the generic reduce_window has no linearization). A JAX bug from jax 0.4.28 (when the "
        "rule was added; NotImplementedError before) to 0.10.2 (measured on every release "
        "between with tools/releases.py; found by a campaign on 0.6.2, under "
        "linearize(argnums=(1,)) o jvp). The predicate: a program with a reduce_window, and JAX "
        "raised that ValueError naming a Zero.",
        "f = lambda b: jax.lax.reduce_window(b, 1.0, jax.lax.mul, (1, 3), (1, 1), 'VALID')\n"
        "b, t = jnp.linspace(0.5, 1.5, 10).reshape(2, 5), jnp.ones((2, 5))\n"
        "try:\n"
        "    jax.jvp(lambda b: jax.jvp(f, (b,), (t,))[1], (b,), (b,))\n"
        "    print('computed')\n"
        "except Exception as e:   # NotImplementedError before 0.4.28: no rule\n"
        "    print('the pytree error' if 'same tree structure' in str(e) else 'another error')  "
        "# the pytree error",
        _generic_reduce_window_jvp_of_a_symbolic_zero, releases=Releases("0.4.28")),
    Divergence(
        "checkpointed-while-s-known-half-takes-an-extra-operand",
        "Before jax 0.6.0, the partial evaluation of a checkpoint around a while loop that "
        "reads a closed-over value keeps the loop whole in the known half with one operand "
        "too many (its constant, the primal carry and the carry's zero tangent, for a body and "
        "a cond that take one carry). Lowering that jaxpr, as jax.jit of jax.vjp does, fails "
        "with a bare AssertionError from mlir.jaxpr_subcomp; evaluating it, as saved_residuals "
        "does, with `ValueError: safe_zip() argument 2 is longer than argument 1` (a "
        "checkpointed scan whose body holds the loop; 0.4.25 to 0.5.3 fail, 0.6.0 on compute). "
        "The spec computes. A JAX bug: "
        "historic bug 16 in docs/historic_bugs.md. Measured on every release from 0.4.25 to "
        "0.6.2 with tools/releases.py; found by campaigns on 0.4.25. The predicate: JAX "
        "raised that AssertionError, naming IR block arguments, or that ValueError, for a "
        "program with a while loop inside a checkpoint.",
        "import numpy as np\n"
        "loop = lambda l: jax.lax.while_loop(lambda n: n < 0.5, lambda q: q + (1.0 + 0.1 * "
        "jnp.tanh(jnp.sum(l))), 0.0)\n"
        "f = lambda a, h: a * jax.checkpoint(loop)(h)\n"
        "try:\n"
        "    jax.jit(lambda a, h: jax.vjp(f, a, h)[0])(np.float32(0.3), np.full(3, 0.1, np.float32))\n"
        "    print('compiled')\n"
        "except AssertionError:\n"
        "    print('the lowering assertion')  # the lowering assertion",
        _checkpointed_while_extra_operand, releases=Releases("0.4.25", "0.6.0")),
    Divergence(
        "threefry-vmap-beside-an-unbatched-operand-fails",
        "JAX's threefry2x32 batching rule (batching.defbroadcasting, "
        "jax/_src/random/threefry2x32.py in 0.10.2, prng.py before) leaves an unbatched operand "
        "unbroadcast, and the rolled loop it lowers to (a fori_loop over the rounds) then has "
        "a carry whose type changes: vmap with in_axes None for one of its four operands "
        "raises a TypeError (`carry input and carry output must have equal types`). The spec "
        "batches it (every operand broadcast). Measured on 0.4.25, 0.4.36, 0.6.2 and 0.10.2 "
        "(found by a campaign on 0.4.36). The predicate: a program with threefry2x32, and JAX "
        "raised that TypeError.",
        "p = __import__('jax.extend.random', fromlist=['random']).threefry2x32_p\n"
        "try:\n"
        "    jax.vmap(p.bind, in_axes=(0, None, 0, 0))(jnp.ones(2, jnp.uint32), jnp.uint32(3),\n"
        "                                              jnp.ones((2, 5), jnp.uint32), jnp.ones((2, 5), jnp.uint32))\n"
        "    print('computed')\n"
        "except TypeError:\n"
        "    print('TypeError')  # TypeError",
        _threefry_batched_beside_an_unbatched_operand),
    Divergence(
        "batched-dynamic-slice-drops-out-of-bounds-gradients",
        "Before jax 0.9.0 dynamic_slice's batching rule (`_dynamic_slice_batching_rule`, "
        "jax/_src/lax/slicing.py) made a gather with mode=PROMISE_IN_BOUNDS, though dynamic_slice "
        "clamps out-of-bounds start indices: the values are right, but the gather's transpose "
        "drops the window of a start index that was clamped, so the gradient of vmap of a "
        "dynamic_slice whose batched start index is out of bounds is zero there "
        "(jax-ml/jax#34228, fixed by jax-ml/jax#34229, 2026-01-08, which clamps the indices "
        "explicitly; found by a campaign on 0.6.2: grad o vmap of a scan whose body slices a "
        "const at batched indices, one of them clamped; bisected with tools/releases.py: 0.4.25 "
        "to 0.8.3 wrong, 0.9.0 right). Wrong gradients. The spec models the fixed rule (a gather "
        "in CLIP mode). The predicate: a reverse-mode numeric property (vjp, second order, a "
        "stack) whose values differ, the checked program has a dynamic_slice, and the program "
        "the spec differentiates for it has a gather that batching one with batched start "
        "indices makes (CLIP mode, no sliced dimension collapsed) or, where its values are dead, "
        "that gather's transpose (a scatter-add, CLIP mode, no window dimension inserted); it "
        "does not look at the index values.",
        "import numpy as np\n"
        "g = np.arange(20, dtype=np.float32).reshape(5, 4)\n"
        "f = lambda g, i, j: jnp.sum(jax.lax.dynamic_slice(g, (i, j), (3, 2)))\n"
        "i, j = np.array([2, 2], np.int32), np.array([3, 3], np.int32)   # j is clamped to 2\n"
        "batched = jax.grad(lambda gs: jnp.sum(jax.vmap(f)(gs, i, j)))(np.stack([g, g]))\n"
        "print('dropped' if float(batched[0].sum()) == 0.0 else 'kept (6.0)')  # dropped",
        _batched_dynamic_slice_gradient, releases=Releases("0.4.25", "0.9.0")),
    Divergence(
        "qr-derivative-of-wide-or-complete-is-unimplemented",
        "Before jax 0.10.0 qr's JVP rule (qr_jvp_rule, jax/_src/lax/linalg.py) raised "
        "NotImplementedError('Unimplemented case of QR decomposition derivative') for a wide "
        "matrix (m < n) and for full_matrices of a non-square one; 0.10.0 differentiates both "
        "(the [X1 X2] split and an LU solve for the completing columns), as the spec does "
        "(found by running the new qr on 0.6.2; measured with the wheels' sources: 0.4.25 to "
        "0.9.2 raise, 0.10.0 computes). A derivative JAX lacks, not a wrong one. The predicate: "
        "JAX raised that error, the spec computed, and the program factors such a matrix.",
        "x = jnp.arange(6.0).reshape(2, 3) + jnp.eye(2, 3)\n"
        "try:\n"
        "    jax.jacfwd(lambda x: jnp.linalg.qr(x)[1])(x)\n"
        "    print('differentiated')\n"
        "except NotImplementedError as e:\n"
        "    print(e)  # Unimplemented case of QR decomposition derivative",
        _qr_jvp_unimplemented, releases=Releases("0.4.25", "0.10.0")),
    Divergence(
        "svd-derivative-of-square-complete-is-unimplemented",
        "Before jax 0.8.1 svd's JVP rule (_svd_jvp_rule, jax/_src/lax/linalg.py) raised "
        "NotImplementedError('Singular value decomposition JVP not implemented for full "
        "matrices') whenever compute_uv and full_matrices, a square matrix too; jax-ml/jax "
        "d79c1c43fe (\"If the matrix is square, do not assert ...\", first in 0.8.1) "
        "differentiates the square case, whose full and reduced factors are the same, as the "
        "spec does (found by a campaign on 0.6.2; the wheels' sources: 0.4.25 to 0.8.0 raise). "
        "A derivative JAX lacks, not a wrong one. The predicate: JAX raised that error, the "
        "spec computed, and the program factors a square matrix with full vectors.",
        "x = jnp.arange(9.0).reshape(3, 3) + 4 * jnp.eye(3)\n"
        "try:\n"
        "    jax.jacfwd(lambda x: jnp.linalg.svd(x)[0])(x)\n"
        "    print('differentiated')\n"
        "except NotImplementedError as e:\n"
        "    print(e)  # Singular value decomposition JVP not implemented for full matrices",
        _svd_jvp_of_square_complete_unimplemented, releases=Releases("0.4.25", "0.8.1")),
    Divergence(
        "threefry-not-partitionable",
        "Before jax 0.5.0 jax_threefry_partitionable is off by default (jax-ml/jax a60ead6fd1 "
        "turned it on): random_split, random_fold_in, random_bits and random_gamma (which splits its "
        "key) derive other bits from a "
        "threefry key than the partitionable algorithm the spec models (0.10.2's default). An "
        "intended change of semantics behind a flag, so keyed on the flag, not the release. "
        "The predicate: the values (or vmap, or a derivative) of a program with one of those equations differ, "
        "with the flag off.",
        "import numpy as np\n"
        "k = jax.random.wrap_key_data(np.array([1, 2], np.uint32), impl='threefry2x32')\n"
        "print(jax.random.key_data(jax.random.split(k, 2))[0])  # 4128513521",
        _non_partitionable_threefry, flag="jax_threefry_partitionable", flag_value=False),
    Divergence(
        "older-jvp-rules-together",
        "A release before jax 0.10.1 makes several of the older JVP rule choices the spec "
        "models one at a time (spec.semantics; OLDER_RULES in oracle/divergences.py: integer_pow's "
        "factor, acosh's product, square as integer_pow, atan2's scaling, sort's, top_k's and "
        "approx_top_k's indices, lu's batched rule, and cond's linearization keeping a scalar "
        "zero tangent inline). Where their changes to the residuals overlap, no divergence "
        "naming one of them explains JAX's list, nor their additive forms together. The "
        "predicate, asked last: JAX's residuals are the spec's following every older rule the "
        "release makes, and not its own (measured on 0.4.25: acos and atan2 under a policy "
        "saving integer_pow and div; found by a release campaign on 0.4.36: a checkpointed "
        "square under a policy saving integer_pow beside a cond whose branch computes x ** 0). "
        "Releases: while two older choices hold (to 0.8.0: integer_pow's and acosh's).",
        "j = str(jax.make_jaxpr(lambda x: jax.jvp(lambda y: jax.lax.integer_pow(jax.lax.acosh(y), 1),\n"
        "                                         (x,), (x,)))(2.0))\n"
        "print('two older rules' if 'square' not in j and 'integer_pow[y=0]' in j else 'one at most')  # two older rules",
        _older_rules_together, releases=Releases("0.4.25", "0.8.0")),
    Divergence(
        "atan2-jvp-divides-the-product",
        "Before jax 0.5.3 atan2's JVP rule for its second operand is `g * -x / (x**2 + y**2)` "
        "((g * -x) / d: linearization saves -x and d); jax-ml/jax 4eada56027 wrote it "
        "`mul(g, div(neg(x), d))`, which saves the quotient, as the spec does (spec.semantics: "
        "atan2_jvp_divides_first). Same derivative. The predicate: JAX's residuals are the "
        "spec's following the old rule (under any policy: one saving div saves no quotient "
        "then), or per atan2 equation, the spec's `output of div` is JAX's `output of neg` "
        "and `output of add` of the same type (for one in a jit body, a cond branch or a checkpoint "
        "nested in a checkpoint, whose saved values all take the jit's, the cond's or remat2's "
        "name, one more of that name: found on 0.4.25 and 0.4.36), and nothing else differs.",
        "print_saved_residuals(lambda x, y: jax.lax.atan2(x, y), 1.0, 2.0)  # output of neg, output of add",
        _atan2_old_jvp, releases=OLDER_RULES["atan2_jvp_divides_first"]),
    Divergence(
        "cond-jvp-instantiates-host-tangents-on-device",
        "JAX's cond JVP (jax 0.10.2, lax/control_flow/conditionals.py _cond_jvp: ad.jvp_jaxpr "
        "with instantiate) makes the zero tangent of an output that one branch knows is zero "
        "with ad.instantiate_zeros -> zeros_like_shaped_array (lax/lax.py:3627), a device "
        "broadcast that drops the aval's memory space; where another branch's tangent of that "
        "output is in host memory (an offloaded residual of a cond in a checkpoint, differentiated "
        "twice: found by the fuzzer) the branches return different types. _cond_abstract_eval "
        "(conditionals.py:432) takes branch 0's types unchecked, so forward-over-reverse computes "
        "(right values); _cond_typecheck (conditionals.py:917) refuses the jaxpr under "
        "jax_enable_checks (JaxprTypeError), and reverse-over-reverse raises 'Expected cotangent "
        "type float32<host>[2] but got float32[2]'. The spec instantiates zeros as JAX does and its "
        "cond requires equal branch types. The predicate: the spec's cond refused branches whose "
        "output types differ in memory spaces only, and JAX computed. (Checked on jax 0.10.2 only.)",
        "import numpy as np\n"
        "pol = jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        "names_which_can_be_offloaded=['h'], offload_src='device', offload_dst='pinned_host')\n"
        "f = jax.checkpoint(lambda x: jax.lax.cond(jnp.sum(x) > 0, lambda v: jnp.sum(checkpoint_name("
        "jnp.sin(v), 'h') ** 2), lambda v: jnp.sum(-v), x), policy=pol)\n"
        "x = np.array([0.3, 0.4], np.float32)\n"
        "jax.config.update('jax_enable_checks', True)\n"
        "try:\n"
        "    jax.jacfwd(jax.grad(f))(x)\n"
        "except Exception as e:\n"
        "    print(type(e).__name__ + ': ' + str(e).splitlines()[0])\n"
        "jax.config.update('jax_enable_checks', False)\n"
        "print(jax.jacfwd(jax.grad(f))(x))  # JaxprTypeError: cond branches 0 and 1 have mismatching output types",
        _cond_tangent_zeros_on_device, releases=Releases("0.10.2")),
    Divergence(
        "optimization-barrier-not-differentiable",
        "Before jax 0.5.3 lax.optimization_barrier has no JVP or transpose rule (jax-ml/jax "
        "dadc68b6c1 added them): every derivative of a program with one raises "
        "`NotImplementedError: Differentiation rule for 'optimization_barrier' not implemented`. "
        "The spec has 0.10.2's rules. The predicate: that error, and the program has an "
        "optimization_barrier.",
        "barrier = getattr(jax.lax, 'optimization_barrier', None) or jax._src.ad_checkpoint._optimization_barrier\n"
        "print(jax.grad(lambda x: barrier(x) * 2.0)(1.0))",
        _missing_rule("Differentiation"), releases=Releases("0.4.25", "0.5.3")),
    Divergence(
        "a-checkpoint-drops-a-cond-staged-for-its-effect-alone",
        "Inside a checkpoint, jax 0.6.2 and later (measured on 0.6.2 and 0.10.2) keep a cond's "
        "staged half that returns nothing for an effect in its branches "
        "(_cond_partial_eval_custom returns its staged cond whatever it returns; DCE keeps one "
        "with an effect), as the spec does: the print runs again in the backward pass, and an "
        "enclosing checkpoint's backward pass traces it, asking a nested checkpoint's policy, "
        "which raises where it refuses to be asked (save_from_both_policies of offload "
        "policies). 0.4.25 and 0.4.36 drop it (0.5.x not measured): nothing is asked. The "
        "predicate: the program has a cond with an effect, and the spec following the older "
        "choice (spec.semantics: cond_stages_effects_alone=False) computes where it raised, or "
        "saves JAX's residuals.",
        "import numpy as np\n"
        "cp = jax.checkpoint_policies\n"
        "bad = cp.save_from_both_policies(cp.offload_dot_with_no_batch_dims('device', 'pinned_host'),\n"
        "                                 cp.offload_dot_with_no_batch_dims('device', 'pinned_host'))\n"
        "def outer(d, e):\n"
        "    jax.checkpoint(lambda f, g: jax.lax.cond(jnp.sum(g) > 0, lambda y: jax.debug.print('{}', y),\n"
        "                                             lambda y: None, g), policy=bad)(d, e)\n"
        "    return d\n"
        "a = np.ones((2, 3), np.float32)\n"
        "try:\n"
        "    jax.grad(lambda a, b: jnp.sum(jax.checkpoint(outer)(a, b)))(a, a)\n"
        "    print('computes')\n"
        "except ValueError:\n"
        "    print('raises')  # computes",
        _cond_drops_an_effectful_staged_half, releases=Releases("0.4.25", "0.6.2")),
    Divergence(
        "cond-partial-eval-keeps-a-scalar-zero-tangent-inline",
        "Before cond's linearize rule (_cond_linearize, jax-ml/jax 45a3fe62d6, first in jax 0.7.1; "
        "measured with tools/releases.py: 0.7.0 keeps it inline, 0.7.1 and 0.8.0 save it) a cond "
        "is linearized by its JVP and partial evaluation: a branch's scalar zero tangent output, "
        "instantiated because another branch's is nonzero (a branch returning a constant, or a "
        "while loop whose output does not depend on the operands), stays a literal inline in "
        "the staged branch; from 0.7.1 (the spec) it is a known value of the branch, saved as a "
        "scalar `output of cond`. An array zero is saved on every release. The predicate: a "
        "program with a cond, and JAX's residuals are exactly the spec's following that older "
        "choice (spec.semantics: cond_saves_scalar_zero_tangents=False). Found by a release "
        "campaign on 0.4.36 (4ab0fe69f7: a while loop in a cond branch).",
        "from jax import lax\n"
        "f = lambda a: lax.cond(a > 0, lambda q: 0.5 + q, lambda q: jnp.float32(2.0), a)\n"
        "n = len(jax._src.ad_checkpoint.saved_residuals(f, 0.3))\n"
        "print('the zero inline' if n == 1 else 'the zero saved')  # the zero inline",
        _cond_scalar_zero_inline, releases=OLDER_RULES["cond_saves_scalar_zero_tangents"]),
    Divergence(
        "random-gamma-grad-not-differentiable",
        "Before jax 0.6.0 lax.random_gamma_grad, which random_gamma's JVP rule binds (the "
        "derivative of a Gamma sample in its shape parameter), is a primitive with no JVP "
        "rule: a second derivative of a program drawing jax.random.gamma (or beta, dirichlet, "
        "loggamma) raises `NotImplementedError: Differentiation rule for 'random_gamma_grad' "
        "not implemented`. From 0.6.0 random_gamma_grad traces its series and continued "
        "fraction inline (jax/_src/lax/special.py), differentiable, as the spec has it. The "
        "predicate: that error, and the program has a random_gamma.",
        "key = jax.random.PRNGKey(0)\n"
        "print(jax.grad(jax.grad(lambda a: jax.random.gamma(key, a)))(2.0))",
        _missing_rule("Differentiation", "random_gamma_grad", beside="random_gamma"),
        releases=Releases("0.4.25", "0.6.0")),
    Divergence(
        "ragged-dot-batched-twice-vmaps-with-numpy-axes",
        "vmap of a ragged_dot_general that has a prefix dim already (a batch dim, or a vmap of "
        "a vmap of lax.ragged_dot) raises TypeError when lowered: _dot_general_batch_dim_nums "
        "bumps the dims with np.add (numpy integers in the new RaggedDotDimensionNumbers), and "
        "_ragged_dot_general_impl (the CPU lowering) passes them to api.vmap as in_axes, which "
        "takes Python ints only. The spec computes the batched product. Measured on 0.6.2 and "
        "0.10.2 (0.4.36 has no ragged_dot_general; from its first release, 0.5.0, assumed). "
        "The predicate: that TypeError, and the program has a ragged_dot_general (found by a "
        "pristine nightly, 6023d0e998).",
        "if not hasattr(jax.lax, 'ragged_dot_general'):\n"
        "    print('jax', jax.__version__, 'has no lax.ragged_dot_general')\n"
        "else:\n"
        "    x, w, gs = jnp.ones((2, 2, 4, 3)), jnp.ones((2, 2, 2, 3, 2)), jnp.full((2, 2, 2), 2, jnp.int32)\n"
        "    dims = jax.lax.RaggedDotDimensionNumbers((((2,), (2,)), ((0,), (1,))), (1,), (0,))\n"
        "    print(jax.vmap(lambda x, w, g: jax.lax.ragged_dot_general(x, w, g, dims))(x, w, gs).shape)"
        "  # TypeError: vmap in_axes must be an int",
        _ragged_dot_impl_vmap_axes, releases=Releases("0.5.0")),
    Divergence(
        "ragged-dot-transposes-a-symbolic-zero-cotangent",
        "The reverse pass of a ragged_dot_general whose output's cotangent is a symbolic zero "
        "(the output passed through a jit that returns it unused) hands that Zero to "
        "_ragged_dot_general_transpose_rule, which computes with it as an array and raises "
        "TypeError (\"Argument 'Zero(float32[6,2])' ... is not a valid JAX type\"); every other "
        "transpose rule it meets skips or instantiates a zero. The spec's transpose is given no "
        "cotangent there, and computes the gradient. Measured on 0.6.2 (raises) and 0.10.2 "
        "(computes); 0.4.36 has no ragged_dot_general, so from its first release, 0.5.0, "
        "assumed, and up to 0.10.2, where it was first seen computing. The predicate: that "
        "TypeError, and the program has a ragged_dot_general (found by a campaign on 0.6.2, "
        "f366075906).",
        "if not hasattr(jax.lax, 'ragged_dot_general'):\n"
        "    print('jax', jax.__version__, 'has no lax.ragged_dot_general')\n"
        "else:\n"
        "    gs = jnp.array([2, 2, 2], jnp.int32)\n"
        "    f = lambda x, w: jax.jit(lambda r, s: (s, r))(jax.lax.ragged_dot(x, w, gs), x.sum())[0]\n"
        "    print(jax.grad(f, argnums=(0, 1))(jnp.ones((6, 3)), jnp.ones((3, 3, 2)))[1].shape)"
        "  # TypeError: Argument 'Zero(float32[6,2])' ... is not a valid JAX type",
        _ragged_dot_zero_cotangent, releases=Releases("0.5.0", "0.10.2")),
    Divergence(
        "optimization-barrier-not-batchable",
        "Before jax 0.4.38 lax.optimization_barrier has no batching rule (jax-ml/jax 944d822ce6 "
        "added a no-op one): vmap of a program with one raises `NotImplementedError: Batching "
        "rule for 'optimization_barrier' not implemented`. The predicate: that error, and the "
        "program has an optimization_barrier.",
        "barrier = getattr(jax.lax, 'optimization_barrier', None) or jax._src.ad_checkpoint._optimization_barrier\n"
        "print(jax.vmap(lambda x: barrier(x) * 2.0)(jnp.ones(3)))",
        _missing_rule("Batching"), releases=Releases("0.4.25", "0.4.38")),
    Divergence(
        "remat3-derivative-of-a-checkpoint-is-not-a-checkpoint",
        "Under jax_remat3 (jax 0.10.2) differentiating a checkpoint inside the checked "
        "function (jax.grad, jax.jvp, jax.jacfwd, jax.jacrev of a checkpoint) stages the "
        "derivative as plain equations (RematTraced's jvp and linearize rules inline the "
        "body's derivative), so differentiating that function again saves the derivative's "
        "intermediates, and a JVP'd checkpoint leaves no optimization barrier. remat2 "
        "(ad_checkpoint.remat_jvp, remat_partial_eval) and the spec keep a checkpoint around "
        "the derivative. JAX's tests expect the checkpoint to survive "
        "(tests/api_test.py test_remat_higher_order_ad_preserves_remat_primitive, after "
        "0.10.2). Wasted memory; gradients are right. The predicate: JAX's residuals are "
        "exactly those of the program with the function's own checkpoints inlined (the "
        "check's own checkpoint kept), under the spec or the full remat3 model, up to scalar "
        "literals JAX leaves out (and up to order for a jax.linearize inside, whose "
        "coefficients remat3 computes before its linear equations); for prevent_cse, JAX has no barrier and that program "
        "predicts none (found by the JAX-derived corpus: fuzz/corpus.py).",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "f = lambda x: jax.jacrev(jax.checkpoint(lambda y: jnp.sin(jnp.sin(y))))(x)\n"
        "print('remat2:', len(saved_residuals(f, jnp.ones(3))))\n"
        "jax.config.update('jax_remat3', True)\n"
        "print('remat3:', len(saved_residuals(f, jnp.ones(3))))  # remat2: 2, remat3: 6",
        _remat3_inlined_derivatives, releases=REMAT3),
    Divergence(
        "pad-cannot-be-transposed-for-its-padding-value-alone",
        "JAX's pad transpose rule (`_pad_transpose`, jax/_src/lax/lax.py, every release checked) "
        "assumes the operand is linear: where only the padding value is (the operand holds no "
        "tangent, e.g. an integer dot_general made float), it sums a None cotangent and raises "
        "a TypeError. The spec refuses that transpose by name. Found by the fuzzer (grad of a "
        "pad of a constant operand with a differentiated padding value). The predicate: JAX "
        "raised that TypeError and the spec its refusal.",
        "jax.grad(lambda v: jax.lax.pad(jnp.ones(2), v, ((1, 1, 0),)).sum())(1.0)  # TypeError",
        _pad_transposed_for_its_padding_value_alone),
    Divergence(
        "a-policy-asked-about-equinox-s-vprim-raises",
        "JAX asks a checkpoint policy `policy(prim, *avals, **params)` about each equation, and "
        "equinox's vprim (what a vmapped maybe_set of equinox's loops binds: "
        "equinox/internal/_primitive.py) has a param named `prim`: a policy whose signature names "
        "its first argument `prim` (dots_saveable, save_only_these_names, ...) raises TypeError "
        "`got multiple values for argument 'prim'`; nothing_saveable and everything_saveable "
        "take anything. The spec, whose vprim param is `primitive`, computes (found by the "
        "fuzzer's branch cover). The predicate: JAX raised that TypeError where the spec "
        "computes, and a checkpoint holds a vprim.",
        "from equinox.internal._loop.common import maybe_set_p\n"
        "def set_row(p, x, i):\n"
        "    return maybe_set_p.bind(p, jnp.zeros((4, 3)), x, i, i_static=None, "
        "i_treedef=jax.tree_util.tree_structure(0), kwargs=(), makes_false_steps=False)[0]\n"
        "f = jax.checkpoint(jax.vmap(set_row), policy=jax.checkpoint_policies.dots_saveable)\n"
        "jax.grad(lambda x: f(jnp.array([True, False]), x, jnp.array([1, 2])).sum())(jnp.ones((2, 3)))"
        "  # TypeError",
        _policy_asked_about_a_vprim),
    Divergence(
        "equinox-maybe-set-indexes-a-numpy-buffer-with-a-tracer",
        "equinox's `_maybe_set` (equinox/internal/_loop/common.py) sizes the value it writes "
        "with `jax.eval_shape(lambda: xs[i])`: where the buffer xs is a numpy array (a constant "
        "of the JAX function) and the index a tracer (vmapped: equinox's vprim batches the rule), "
        "numpy indexes by the tracer and JAX raises TracerArrayConversionError; equinox's own "
        "loops always hand it a traced buffer. The spec, whose maybe_set indexes any buffer, "
        "computes (found by a release campaign on 0.6.2, fe982b4ec3: grad of a jitted vprim of "
        "maybe_set writing into a constant buffer; measured on 0.6.2 with equinox 0.13.0 and "
        "0.10.2 with 0.13.8). The predicate: JAX raised that error where the spec computes, and "
        "a maybe_set or a vprim of one writes into a constant buffer.",
        "from equinox.internal._loop.common import maybe_set_p\n"
        "import numpy as np\n"
        "def set_row(p, x, i):\n"
        "    return maybe_set_p.bind(p, np.ones((4, 3), np.float32), x, i, i_static=None, "
        "i_treedef=jax.tree_util.tree_structure(0), kwargs=(), makes_false_steps=False)\n"
        "f = lambda x: jax.vmap(set_row, in_axes=(0, 0, 0))(jnp.array([True, False]), x, "
        "jnp.array([1, 2])).sum()\n"
        "try:\n"
        "    jax.grad(f)(jnp.ones((2, 3)))\n"
        "    print('computed')\n"
        "except jax.errors.TracerArrayConversionError:\n"
        "    print('TracerArrayConversionError')  # TracerArrayConversionError",
        _maybe_set_indexes_a_numpy_buffer),
    Divergence(
        "checkpoint-residuals-are-not-rounded",
        "Before jax 0.4.31 (jax-ml/jax f498d7a3ba, #22244) remat's partial evaluation does not "
        "round the residuals its hoisted part reads through reduce_precision (the spec's Rule 1 "
        "does, as `_insert_reduce_precision` does from 0.4.31). Differentiated once, the names "
        "are the same; differentiated again, a rule that reads its own output (tanh, exp, ...) "
        "and the staged remat save one value where later releases save it and its rounding. "
        "The predicate: JAX's residuals are the spec's with each value saved once (a rounding "
        "looked through to the value it rounds).",
        "f = jax.checkpoint(lambda x: jnp.exp(jnp.tanh(x)), policy=lambda prim, *_, **__: prim.name == 'tanh')\n"
        "g = jax.grad(lambda x: f(x).sum())\n"
        "print('reduce_precision:', sum(e.primitive.name == 'reduce_precision' "
        "for e in jax.make_jaxpr(g)(jnp.ones(3)).eqns))  # reduce_precision: 0",
        _residuals_unrounded, releases=Releases("0.4.25", "0.4.31")),
    Divergence(
        "saved-residuals-counts-a-value-saved-beside-its-rounding-once",
        "From jax 0.10.2 (bf1e6d9b49) `_saved_residuals` looks through reduce_precision and "
        "collects the residuals in a set, then asserts there are as many as the residual "
        "jaxpr's outputs. A checkpoint's partial evaluation rounds each residual its hoisted "
        "part reads (`_insert_reduce_precision`): the producer writes u, v = reduce_precision(u). "
        "Differentiated again (grad of grad, or a stack), a rule that reads its own output "
        "(tanh, exp, ...) saves u and the staged remat saves v: two residuals, one value once "
        "looked through, and saved_residuals raises a bare AssertionError (found by the fuzzer: "
        "a checkpoint saving tanh, under grad). The values saved are the spec's; only the "
        "report fails. The predicate: JAX raised that AssertionError for residuals, and the "
        "spec's residual list, looked through reduce_precision, names one value twice (under "
        "save-anything-except-these-names-is-a-stub, the list as the stub saves).",
        "from jax._src.ad_checkpoint import saved_residuals\n"
        "f = jax.checkpoint(lambda x: jnp.exp(jnp.tanh(x)), policy=lambda prim, *_, **__: prim.name == 'tanh')\n"
        "saved_residuals(jax.grad(lambda x: f(x).sum()), jnp.ones(3))  # AssertionError",
        _residual_counted_once, releases=Releases("0.10.2")),
    Divergence(
        "remat3-jit-of-vmap-of-a-constant-checkpoint-output-crashes",
        "Under jax_remat3 (jax 0.10.2) jax.jit of jax.vmap of a checkpoint one of whose outputs "
        "is a scalar constant (a Python float, `jnp.float32(3.)`, `jnp.array(False)` as "
        "equinox's BatchNorm returns its state's first_time, found by a sweep of model code, or "
        "a derivative that is a constant, `jax.grad(lambda y: y)`) raises: the batched "
        "hi-primitive's lowered program returns the constant as a Literal, and pe.lower_jaxpr "
        "reads `.val` of the Python scalar (AttributeError: 'TypedFloat' (or 'bool') object has "
        "no attribute 'val') or MLIR "
        "lowering asserts that the equation's input is a Var (AssertionError, "
        "interpreters/mlir.py `read`). Without jit, or under remat2, it computes (found by the "
        "JAX-derived corpus: tests/api_test.py test_remat_basic's `return lax.sin(lax.sin(x)), 3.`). "
        "The predicate: remat3, a checkpoint of the program returns a scalar Literal, and "
        "JAX raised that AttributeError, or (on the check's vmap) a bare AssertionError.",
        "jax.config.update('jax_remat3', True)\n"
        "g = jax.checkpoint(lambda x: (jnp.sin(x), 3.))\n"
        "jax.jit(jax.vmap(g))(jnp.ones(2))  # AttributeError",
        _remat3_constant_output_under_jit_vmap, releases=REMAT3),
    Divergence(
        "remat-transpose-prevent-cse-misses-the-transposed-body-s-constants",
        "remat_transpose (jax/_src/ad_checkpoint.py, from jax 0.7.2, jax-ml/jax eb92beb6c6 "
        "\"add prototype partial cse prevention for remat\"; unchanged at the newest source "
        "checked) binds the transposed checkpoint on `*consts, *flat_args` but builds a "
        "per-argument prevent_cse tuple for flat_args only, so _remat_bind's `assert "
        "isinstance(prevent_cse, bool) or len(prevent_cse) == len(args)` fails (a bare "
        "AssertionError) whenever the transposed body has constants of its own. A scan whose "
        "closed jaxpr keeps a constant array (lax.scan hoists a closed-over array into an "
        "operand; a scan bound on a ClosedJaxpr with consts, as JAX's own transformations make "
        "them, keeps it) inside a checkpoint with a tuple prevent_cse is such a body: reverse "
        "mode crashes where the spec computes (found by a pristine campaign, 670d63a880); so "
        "is a jit whose jaxpr closes over a constant array (found by a pristine nightly, "
        "0e86027b80). The predicate: remat2, JAX raised that bare AssertionError, and a "
        "checkpoint of the program has a tuple prevent_cse and runs a scan or a jit with a "
        "constant of its own (`_scans_with_constants`).",
        "import numpy as np\n"
        "from jax._src.lax.control_flow.loops import scan_p\n"
        "k = np.array([0.5, 0.75, 1.0], np.float32)\n"
        "body = jax.make_jaxpr(lambda c: jnp.sin(c) * k)(k)  # k stays a const of the closed jaxpr\n"
        "probe = jax.make_jaxpr(lambda c: jax.lax.scan(lambda c, _: (c, None), c, None, length=1))(k)\n"
        "f = jax.checkpoint(lambda c: scan_p.bind(c, **{**probe.eqns[0].params, 'jaxpr': body})[0],\n"
        "                   prevent_cse=(False,))\n"
        "jax.grad(lambda x: f(x).sum())(k)  # AssertionError",
        _tuple_prevent_cse_over_scan_constants, releases=Releases("0.7.2")),
    Divergence(
        "grad-of-grad-of-an-offloaded-residual-gets-a-host-cotangent",
        "Differentiating a checkpoint a second time where its policy offloads a residual to "
        "host memory (save_and_offload_only_these_names, offload_dot_with_no_batch_dims): the "
        "first derivative reads the offloaded value back, and the second one's backward pass "
        "meets a cotangent in host memory where it expects one in device memory, and raises "
        "`Expected cotangent type float32[] but got float32<host>[]` (jax 0.10.2; jax 0.6.2 "
        "computes jax.jit of it: -sin(x), as the spec does; the releases between are not "
        "checked). Found by a pristine campaign (f8be1365d7, grad o grad). The predicate: "
        "remat2, JAX raised that ValueError (the types differ in the host memory space alone) "
        "where the spec computes, and a checkpoint of the program has an offloading policy.",
        "from jax.ad_checkpoint import checkpoint_name\n"
        "pol = jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        "names_which_can_be_offloaded=['a'], offload_src='device', offload_dst='pinned_host')\n"
        "f = jax.checkpoint(lambda d: jnp.sin(checkpoint_name(d, 'a')), policy=pol)\n"
        "jax.jit(jax.grad(jax.grad(f)))(0.5)  # ValueError",
        _offloaded_residual_cotangent_on_host, releases=Releases("0.10.2")),
]


def find(ctx: Context) -> Divergence | None:
    """The first divergence (in DIVERGENCES' order) whose predicate holds,
    else two additive ones together (`_composed`), or two order-only ones
    (`_reordered`). Where several remat3
    defects changed one residual list, the first that mattered names the
    finding; the model they share explains all of it."""
    return _first_that_applies(ctx) or _composed(ctx) or _reordered(ctx) or _last_resort(ctx)


# the most entries a residual difference may have for `_composed` to split it
# (2**n splits, each asked of every additive divergence)
COMPOSED_DIFFERENCE_LIMIT = 8


def _composed(ctx: Context) -> Divergence | None:
    """Two or three active additive divergences that together explain JAX's
    residual list: the difference between a baseline and JAX's list splits
    into a part the first explains against the baseline and the rest the
    others explain on top, in turn (e.g. on 0.4.25 a custom_vjp's saved
    output beside atan2's old JVP factors: found by a campaign; on 0.4.36
    atan2's, approx_top_k's and integer_pow's older rules in one program:
    found by a release campaign, 17bb52afb7). The split moves entries, as
    multisets; the order-only divergences take no part. JAX's names are
    also normalised against the baseline, as `additive` does (an `output of
    pjit` the spec's list lacks: found by a campaign on 0.4.25)."""
    if ctx.property != "residuals" or ctx.jax_residuals is None or ctx.spec_residuals is None:
        return None
    parts = [d for d in DIVERGENCES if hasattr(d.applies, "explains") and d.active()]
    for n in range(2, MOST_COMPOSED + 1):
        for want in ctx.baselines_with_python_type_literals():
            normalised = _normalised_against(ctx, want)
            for got in [ctx.jax_residuals] + ([normalised] if normalised != ctx.jax_residuals else []):
                found = _split_between(parts, got, want, ctx, n)
                if found:
                    return _together(found)
    return None


# the most additive divergences `_composed` puts together
MOST_COMPOSED = 3


def _split_between(parts: list, got: list, want: list, ctx: Context, n: int) -> list | None:
    """`n` of `parts` of which the first explains some of the moves from
    `want` to `got` and the others the rest on top, in turn."""
    extra, missing = _difference(got, want)
    moves = [(r, +1) for r in extra.elements()] + [(r, -1) for r in missing.elements()]
    if len(moves) < n or len(moves) > COMPOSED_DIFFERENCE_LIMIT:
        return None
    for chosen in itertools.product((False, True), repeat=len(moves)):
        if all(chosen) or not any(chosen):
            continue
        # the list between them: `want` with the first's moves made (added
        # entries last), or `got` with the others' undone (in JAX's places:
        # an entry the first replaces in place, found on 0.4.25: approx_top_k's
        # old indices beside a custom_vjp's saved output)
        undone = [(r, -sign) for (r, sign), c in zip(moves, chosen) if not c]
        for middle in (_moved(want, [m for m, c in zip(moves, chosen) if c]), _moved(got, undone)):
            first = next((d for d in parts if d.applies.explains(middle, want, ctx)), None)
            if first is None:
                continue
            others = [d for d in parts if d is not first]
            if n == 2:
                rest = next(([d] for d in others if d.applies.explains(got, middle, ctx)), None)
            else:
                rest = _split_between(others, got, middle, ctx, n - 1)
            if rest:
                return [first] + rest
    return None


def _together(divergences: list) -> Divergence:
    """Divergences that explain one answer together, as one."""
    first = divergences[0]
    return dataclasses.replace(first, name=" + ".join(d.name for d in divergences),
                               reason="\n\nAnd: ".join(d.reason for d in divergences))


def _moved(residuals: list, moves: list) -> list:
    """`residuals` with each (entry, +1) appended and each (entry, -1) removed once."""
    out = list(residuals)
    for r, sign in moves:
        if sign > 0:
            out.append(r)
        else:
            out.remove(r)
    return out


def _last_resort(ctx: Context) -> Divergence | None:
    """The first divergence asked only after the others, alone and
    composed, explained nothing (`applies.last_resort`)."""
    return _first_that_applies(ctx, last_resort=True)


def _first_that_applies(ctx: Context, last_resort: bool = False) -> Divergence | None:
    for d in DIVERGENCES:
        if not d.active() or getattr(d.applies, "last_resort", False) != last_resort:
            continue
        try:
            if d.applies(ctx):
                return d
        except sp.PolicyCombinationError:   # the modelled policy is refused as JAX refuses it:
            continue                        # JAX did not refuse, so this model does not explain it
        except Unsupported:     # the model met what the spec does not model: the oracle's refusal
            raise
        except Exception as e:   # a predicate that fails is our bug: never hide it
            if ctx.spec_error is not None and type(e) is type(ctx.spec_error) and str(e) == str(ctx.spec_error):
                continue    # the spec's own error again, modelling the program: that error is the finding
            if isinstance(e, ValueError) and str(e) == LINEARIZATION_ERROR:
                continue    # the modelled program has no linearization (found by the fuzzer: a
                #             generic reduce_window made live): this model explains no residuals
            if isinstance(e, NotImplementedError):
                continue    # the model differentiates what a rule declares it cannot, as JAX
                #             does (remat3's instantiated tangents into scatter-mul's updates):
                #             this model explains no residuals; the error itself is the finding
            raise RuntimeError(f"known-divergence predicate {d.name} failed: {e!r}") from e
    return None
