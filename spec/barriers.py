"""Optimization barriers in the backward pass (and in the called linear
function) of a checkpointed program.

remat2 lowers a differentiated checkpoint whose `prevent_cse` is set with
an XLA optimization barrier around the recomputation (jax
`ad_checkpoint.remat_partial_eval` -> `_remat_translation_using_opt_barrier`),
so that XLA cannot merge the recomputed values with the forward pass's.

    >>> import spec
    >>> from spec import ops
    >>> prog = spec.trace(lambda x: ops.checkpoint(ops.sin)(ops.sin(x)), spec.f32[3])
    >>> optimization_barriers(prog)
    1
"""
from __future__ import annotations

from spec.ir import Program, Var, subprograms
from spec.partial_eval import dce
from spec.semantics import semantics
from spec.transpose import transpose
from spec.vjp import linearize


def _prevents_cse(params) -> bool:
    """prevent_cse is True, or a per-input tuple with some True."""
    flag = params["prevent_cse"]
    return flag is True or (isinstance(flag, tuple) and any(flag))


def optimization_barriers(prog: Program) -> int:
    """The number of barriers the spec's backward pass has: one per staged
    remat equation with prevent_cse set that reads a linear value (a
    tangent or cotangent). One that only recomputes primal values (a nested
    checkpoint whose tangent is not needed) is replayed forward when JAX
    transposes the enclosing body, which evaluates a known remat by
    inlining its body: no barrier."""
    lin = linearize(prog)
    linear_inputs = [False] * len(lin.residuals) + [True] * (len(lin.linear.inputs) - len(lin.residuals))
    backward = transpose(lin.linear, linear_inputs)  # exists: raises as JAX does (while_loop)
    # the program's own lax.optimization_barrier equations, forward and
    # backward, lower to barriers too, where the jit of the backward pass
    # needs them: its lowering removes dead equations (pxla's `_dce_jaxpr`),
    # so the forward pass keeps what computes the residuals the backward
    # pass reads (found by a pristine campaign, 976d4c78e8: a barrier whose
    # outputs only a ceil reads, whose derivative is zero); and the known
    # differentiated checkpoints the forward pass keeps so (a scan's known
    # body, split again by its hoisting, in a checkpoint whose output the
    # backward pass reads through a stop_gradient: found by a pristine
    # nightly, bb0c634c1b)
    backward, reads = dce(backward)
    n_out = len(lin.forward.outputs) - len(lin.residuals)
    forward, _ = dce(lin.forward, [False] * n_out + reads[:len(lin.residuals)])
    return (_count(lin.linear, linear_inputs) + _explicit(forward) + _explicit(backward)
            + _known_differentiated_checkpoints(forward))


def linear_optimization_barriers(prog: Program, diff=None) -> int:
    """The number of barriers in a jit of `jax.linearize(f, *x)` whose
    linear function is then called (not transposed): one per staged remat
    equation of the linear program with prevent_cse set that reads a
    tangent (its flags for the tangents are those remat_jvp appends, True
    for a per-input tuple), plus the program's own optimization_barrier
    equations, forward and linear, where the linear function's outputs need
    them, and one per known checkpoint of the forward pass that an earlier
    differentiation made (`_known_differentiated_checkpoints`). `diff`: as
    `linearize`'s.

        >>> import spec
        >>> from spec import ops
        >>> body = ops.checkpoint(lambda x: ops.mul(x, 2.0), prevent_cse=(False,))
        >>> linear_optimization_barriers(spec.trace(body, spec.f32[3]))
        1
    """
    forward, linear, linear_inputs = _called_linear(prog, diff)
    return (_count(linear, linear_inputs, transposed=False) + _explicit(forward) + _explicit(linear)
            + _known_differentiated_checkpoints(forward))


def known_checkpoint_barriers(prog: Program, diff=None) -> int:
    """The part of `linear_optimization_barriers` that known differentiated
    checkpoints of the forward program make (`_known_differentiated_checkpoints`)."""
    return _known_differentiated_checkpoints(_called_linear(prog, diff)[0])


def _called_linear(prog: Program, diff):
    """(forward, linear, linear_inputs) of `prog` linearized, each left with
    what the called linear function needs."""
    lin = linearize(prog, diff)
    linear_inputs = [False] * len(lin.residuals) + [True] * (len(lin.linear.inputs) - len(lin.residuals))
    # only what the called linear function needs is left in the jit: jit's
    # lowering removes dead equations (pxla's `_dce_jaxpr`), barriers too, so
    # the forward pass keeps what computes the residuals the linear program
    # reads (found by a campaign: grad's barrier on cotangents, forward only)
    linear, reads = dce(lin.linear)
    n_out = len(lin.forward.outputs) - len(lin.residuals)
    forward, _ = dce(lin.forward, [False] * n_out + reads[:len(lin.residuals)])
    return forward, linear, linear_inputs


def _known_differentiated_checkpoints(forward: Program) -> int:
    """Remat equations of the forward program, at any depth, that an outer
    differentiation already made (differentiated, prevent_cse set: a
    transposed or JVP'd checkpoint of a derivative program) and whose
    inputs are all known. Linearization binds such an equation as it is
    (LinearizeTrace.process_primitive with every tangent a symbolic zero,
    jax/_src/interpreters/ad.py), and remat_lowering barriers its inputs
    whenever `differentiated and prevent_cse`, known or not (a residual of
    the linear function computed through grad's transposed checkpoint:
    found by a campaign on 0.4.25, a false alarm on 0.10.2 too). A
    user's checkpoint in the forward program is not differentiated: no
    barrier."""
    n = 0
    for e in forward.eqns:
        n += e.primitive.name == "remat" and e.params["differentiated"] and _prevents_cse(e.params)
        n += sum(_known_differentiated_checkpoints(sub) for _, sub in subprograms(e.params))
    return n


def _explicit(prog: Program) -> int:
    """optimization_barrier equations, at any depth."""
    n = 0
    for e in prog.eqns:
        n += e.primitive.name == "optimization_barrier"
        n += sum(_explicit(sub) for _, sub in subprograms(e.params))
    return n


def _count(prog: Program, linear_inputs, in_checkpoint: bool = False, transposed: bool = True) -> int:
    """Staged remat equations, at any depth, with prevent_cse set that read
    a linear value: anything but the residuals (the inputs not in
    `linear_inputs`) and what is computed from them alone. A value made of
    literals alone is linear: an instantiated zero tangent (a scan's carry
    from a literal zero, whose body makes it a tangent: found by a campaign,
    linearize o grad o grad of a checkpoint in a scan, on every release).

    One that reads no linear value is a barrier too outside a checkpoint's
    body: backward_pass replays it forward with `eqn.primitive.bind`, as it
    is (a staged checkpoint kept for its effect, a jax.debug.print of known
    values, whose tangent nothing reads: found by a pristine campaign), and
    so is every such checkpoint nested in it (the checkpoint of an effect
    in a checkpoint whose outputs nothing reads: found by a pristine
    nightly, c1ae4873a9). In a checkpoint's body that remat_transpose
    transposes, it is replayed by partial evaluation, which inlines a known
    checkpoint (see `optimization_barriers`), except before stackless
    tracing (spec.semantics: partial_eval_inlines_known_checkpoints); the
    checkpoints nested in it are bound as they are, barriered (found by a
    release campaign on 0.4.36, 6dc18efcf5, a false alarm on 0.10.2 too). A
    linear function that is called, not `transposed`, replays nothing: a
    checkpoint's body is lowered as it is, a nested checkpoint of known
    values in it too, barriered (remat_lowering; found by a pristine
    campaign, 749009e12b: linearize o grad of a checkpoint in one whose
    prevent_cse is False)."""
    forward = {v.id for v, is_linear in zip(prog.inputs, linear_inputs) if not is_linear}
    inlined = in_checkpoint and transposed and semantics().partial_eval_inlines_known_checkpoints
    count = 0
    for e in prog.eqns:
        reads = [isinstance(a, Var) and a.id not in forward for a in e.inputs]
        is_remat = e.primitive.name == "remat"
        replayed_as_is = not any(reads) and not inlined
        if is_remat and e.params["differentiated"] and (any(reads) or replayed_as_is) \
                and _prevents_cse(e.params):
            count += 1
        # an inlined checkpoint's body is bound as it is (remat_partial_eval's
        # core.eval_jaxpr of its known half, in the enclosing trace), nested
        # checkpoints and all
        body_replayed_as_is = replayed_as_is or is_remat and not any(reads)
        for _, sub in subprograms(e.params):
            offset = len(e.inputs) - len(sub.inputs)
            if offset >= 0:     # a literal operand of a body is linear there (a zero tangent)
                count += _count(sub, [r or not isinstance(a, Var) for r, a in zip(reads, e.inputs)][offset:],
                                (in_checkpoint or is_remat) and not body_replayed_as_is, transposed)
        if not any(reads) and any(isinstance(a, Var) for a in e.inputs):
            forward.update(v.id for v in e.outputs)
    return count
