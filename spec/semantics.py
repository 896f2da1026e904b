"""JAX's choices that changed on purpose between releases.

The spec follows jax 0.10.2. Where an older release made another choice
that JAX later changed deliberately (an optimisation added, not a defect
fixed), the spec can follow the older one inside `following(...)`; the
oracle uses that to model the older release's residuals for the known
divergence each choice names (oracle/divergences.py, docs/divergences.md
has the version table). Each field says what it switches and cites the
change.

>>> semantics().remat_of_jit_forwards_inputs
True
>>> with following(remat_of_jit_forwards_inputs=False):
...     semantics().remat_of_jit_forwards_inputs
False
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Semantics:
    # Inside a checkpoint, a jit's residual that is one of its known inputs
    # is read from outside the jit, not returned by the known jit as an
    # output of its own (closed_call_partial_eval_custom_rule's `in_fwd`,
    # jax/_src/interpreters/partial_eval.py; added in jax 0.9.1 by
    # jax-ml/jax 8224ddd4d0, "add input-to-output forwarding optimization to
    # remat-of-jit"). Before, each jit reading a saved value returned a copy,
    # saved as `output of pjit`, once per jit.
    remat_of_jit_forwards_inputs: bool = True
    # The hoisted equations of a checkpoint's known part are staged again
    # (remat_partial_eval evaluates jaxpr_known with core.eval_jaxpr under
    # the enclosing trace, jax/_src/ad_checkpoint.py), and pjit's staging
    # rule drops a jit's outputs that are its inputs, the caller reading the
    # input (`_pjit_forwarding`, added in jax 0.4.29 by jax-ml/jax
    # 0a693faf48, "add pjit forwarding rule"; from jax 0.6.0, e8038501d0,
    # only with dynamic shapes). Only those hoisted jits: one in a scan
    # body, a cond branch, another jit or a nested checkpoint is not staged
    # again (spec.core.staging_rules).
    jit_staging_forwards_inputs: bool = False
    # integer_pow's JVP for y == 1 is the tangent itself, and for y == 2
    # `g * (2 * x)` (jax-ml/jax 30f4c93c00, jax 0.10.1); before, `g * (y *
    # x**(y-1))` for every y != 0: for y == 1 a factor `1 * x**0` that
    # linearization saves (or recomputes from x), for y == 2 an
    # `integer_pow[y=1]` a policy naming integer_pow saves.
    integer_pow_small_y_jvp: bool = True
    # acosh's JVP is g * rsqrt(x**2 - 1), with `square` (jax 0.8.0 on:
    # "We use x^2-1 rather than (x+1)(x-1)", jax/_src/lax/lax.py; measured:
    # 0.7.2 has the product, 0.8.0 the square); before, g * rsqrt((x - 1) *
    # (x + 1)), whose product a policy saving `mul` saves.
    acosh_jvp_squares: bool = True
    # `lax.square` binds its own primitive, square_p (jax 0.4.36 on:
    # jax-ml/jax 4d0a007d57, "Add square_p"); before, integer_pow[y=2]. The
    # JVP rules written with `square` (asin, acos, atan, asinh, tan, atan2,
    # erf_inv, erf, erfc) bound integer_pow then, which a policy naming
    # integer_pow saves and one naming square does not (found on 0.4.25).
    square_is_a_primitive: bool = True
    # atan2's JVP in y is g * (-x / (x**2 + y**2)), the quotient a primal
    # (jax 0.5.3 on: jax-ml/jax 4eada56027, "Avoid using array operations
    # within lax.py operations"); before, `g * -x / (square(x) + square(y))`,
    # Python's left-to-right (g * -x) / d: -x and d are residuals apart,
    # which a policy naming div saves as two values, not one.
    atan2_jvp_divides_first: bool = True
    # A JaxprTrace runs a checkpoint's partial-eval rule whatever its
    # inputs, so a checkpoint whose inputs are all known is evaluated inline
    # (remat_partial_eval's `core.eval_jaxpr(jaxpr_known, ...)`): an
    # enclosing trace meets its body's equations (`inlined_when_known`).
    # Before "stackless" tracing (jax 0.4.36: every bind goes to the current
    # trace), trace_to_subjaxpr_nounits handed known values in unwrapped and
    # bind found the enclosing trace among its arguments', so such a
    # checkpoint bypassed the JaxprTrace and stayed a checkpoint there: a
    # scan's hoisted loop-invariant one, or one nested in a checkpoint body
    # that remat_transpose replays (measured on 0.4.25: barriers).
    partial_eval_inlines_known_checkpoints: bool = True
    # top_k's JVP gathers the tangent with the top-k indices alone, the
    # other dimensions gather batching dims (jax 0.4.35 on; jax/_src/lax/
    # lax.py _top_k_jvp); before, with the indices of every dimension
    # concatenated: an iota per leading dimension broadcast beside the
    # reshaped indices (`i32[..., k, r]`), which linearization saves.
    top_k_jvp_batches_its_gather: bool = True
    # sort's JVP gathers each tangent with the sorted iota alone (jax 0.4.38
    # on; jax/_src/lax/lax.py _sort_jvp, a uint32 iota); before, `t[idx]`,
    # idx the sorted int32 iota for the sorted dimension and an int32 iota
    # for each other one, which jnp indexing lowers per tangent to each
    # index normalised (lt, add, select_n), broadcast and concatenated
    # (measured on 0.4.25 and 0.4.36): what a policy may save.
    sort_jvp_gathers_along_its_dimension: bool = True
    # approx_top_k's JVP takes the tangent along the reduction dimension
    # with jnp.take_along_axis (jax 0.7.1 on, jax-ml/jax 504ef48401;
    # jax/_src/lax/ann.py _approx_top_k_jvp); before, `tangent[idx]`, idx
    # an iota per other dimension beside the indices, each normalised by
    # jnp's indexing (lt, add, select_n) and concatenated.
    approx_top_k_jvp_takes_along_axis: bool = True
    # Linearization is direct (ad.LinearizeTrace: jax_use_direct_linearize,
    # the default from jax 0.7.0, jax-ml/jax a7ed048afa). Two consequences:
    # a tangent a JVP rule computes without reading an input tangent
    # (integer_pow's zeros for y == 0) is a symbolic zero
    # (`linearize_from_jvp`), instantiated by each rule that reads it; and a
    # jit's, cond's or scan's sub-programs are linearized equation by
    # equation (`spec.core.linearizes_in_order`), so an error there comes in
    # program order. Before, linearization was the JVP followed by partial
    # evaluation: that tangent is one known value, saved once however many
    # tangent equations read it (a scalar one `from a literal`), and such an
    # equation's JVP rule differentiates its sub-programs whole, so a
    # missing derivative in them raises first.
    direct_linearization: bool = True
    # A cond branch's zero tangent output, instantiated because another
    # branch's is nonzero, is a known value of the branch that the tangent
    # cond reads as a residual output of the known cond, a scalar one too,
    # as any literal tangent output (cond's linearize rule, _cond_linearize,
    # jax-ml/jax 45a3fe62d6, first in jax 0.7.1). Before, partial
    # evaluation of the JVP'd cond keeps a scalar zero (any literal output)
    # inline in the staged branch (JaxprTrace's new_instantiated_literal):
    # nothing saved (measured on 0.4.25, 0.4.36, 0.6.2 and 0.7.0; an array
    # zero is saved on every release).
    cond_saves_scalar_zero_tangents: bool = True
    # Inside a checkpoint a cond's staged half is kept for an effect in its
    # branches even where it returns nothing (_cond_partial_eval_custom
    # returns its staged cond whatever it returns, and DCE keeps one with an
    # effect): the print runs again in the backward pass, where an
    # enclosing checkpoint's transposition traces it (asking a nested
    # checkpoint's policy). Measured on 0.6.2 and 0.10.2; on 0.4.25 and
    # 0.4.36 it is dropped (0.5.x not measured).
    cond_stages_effects_alone: bool = True
    # lu's JVP is `_lu_jvp_inner` on one matrix, vmapped over the batch
    # dims (jax 0.5.3 on: jax-ml/jax 62530d5922, "Update JVP rule for
    # lax.linalg.lu to use vmap instead of broadcasted_iotas"; 0.5.2 has the
    # old rule). Before, one batched rule that permutes the tangent's rows
    # first, `a_dot[(*iotas[:-1], permutation, :)]` with an iota per batch
    # dim, through jnp indexing (lt, add, select_n, broadcast, concatenate):
    # the permutation's wrapping comes before the triangular masks, in
    # what a policy saves, and a batched lu gathers with every index
    # (measured on 0.4.25 and 0.4.36). The spec models 0.4.36's rule (jax
    # 0.4.32 on, jax-ml/jax 7b41583414); 0.4.25's calls jnp.tril/triu,
    # jitted there, and indexes a batch with jnp.ix_ (not modelled).
    lu_jvp_vmaps_its_inner_rule: bool = True


_current = contextvars.ContextVar("semantics", default=Semantics())


def semantics() -> Semantics:
    """The choices the spec follows now."""
    return _current.get()


@contextlib.contextmanager
def following(**choices):
    """The spec follows `choices` (fields of Semantics) for the duration."""
    token = _current.set(replace(semantics(), **choices))
    try:
        yield
    finally:
        _current.reset(token)
