"""`explain`: what a backward pass saves, why, who reads it, what it recomputes.

    >>> import spec
    >>> from spec import ops, policies
    >>> layer = lambda x, W: ops.reduce_sum(ops.tanh(x @ W), (0,))
    >>> prog = spec.trace(lambda x, W: ops.checkpoint(layer, policy=policies.dots_saveable)(x, W),
    ...                   spec.f32[8], spec.f32[8, 16])
    >>> print(spec.explain(prog))          # doctest: +NORMALIZE_WHITESPACE
    saved residuals (3, 608 bytes):
      #  type       source                 why                                     read by (backward)
      0  f32[8]     from the argument x    input of the checkpoint                 dot_general
      1  f32[8,16]  from the argument W    input of the checkpoint                 dot_general
      2  f32[16]    output of dot_general  policy dots_saveable answered Saveable  tanh
    recomputed in the backward pass (2 equations, 32 FLOPs):
      tanh f32[16] <- f32[16]
      sub f32[16] <- f32[], f32[16]
"""
from __future__ import annotations

from dataclasses import dataclass, field

from spec.core import cost_rules
from spec.ir import Eqn, Program, Var, subprograms
from spec.partial_eval import Residual, looked_through_value
from spec.remat import device_put_p, remat_p
from spec.vjp import linearize
from spec.partial_eval import eqn_source


# Primitives whose sub-programs are not applied to the equation's operands
# one to one (custom_linear_solve: four programs, each on its own consts
# and b): explain names such an equation itself rather than a body's.
opaque_bodies: set = set()


def _bodies(e: Eqn) -> list:
    return [] if e.primitive in opaque_bodies else subprograms(e.params)


@dataclass
class ResidualExplanation:
    residual: Residual
    why: str
    read_by: list[str]

    @property
    def nbytes(self) -> int:
        return self.residual.type.nbytes


@dataclass
class Explanation:
    residuals: list[ResidualExplanation]
    recomputed: list[Eqn] = field(default_factory=list)
    recompute_flops: int = 0

    @property
    def saved_bytes(self) -> int:
        return sum(r.nbytes for r in self.residuals)

    def __str__(self):
        rows = [("#", "type", "source", "why", "read by (backward)")]
        for i, r in enumerate(self.residuals):
            rows.append((str(i), str(r.residual.type), str(r.residual.source), r.why,
                         ", ".join(r.read_by) or "-"))
        widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
        lines = [f"saved residuals ({len(self.residuals)}, {self.saved_bytes} bytes):"]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        lines.append(f"recomputed in the backward pass ({len(self.recomputed)} equations, "
                     f"{self.recompute_flops} FLOPs):")
        for e in self.recomputed:
            ins = ", ".join(str(a.type) for a in e.inputs)
            lines.append(f"  {e.primitive.name} {', '.join(str(v.type) for v in e.outputs)} <- {ins}")
        return "\n".join(lines)


def eqn_flops(e: Eqn) -> int:
    rule = cost_rules.get(e.primitive)
    if rule is not None:
        return rule(*[a.type for a in e.inputs], **e.params)
    return sum(v.type.size for v in e.outputs)


def _why_inside(eqn: Eqn, var) -> str | None:
    """Why an output of an equation with a body (a scan, a call) is saved:
    the decision about the body value it returns, e.g. "stacked over the 3
    iterations of a scan: named 'q', policy ... answered Saveable"."""
    subs = _bodies(eqn)
    if eqn.why or not subs:
        return eqn.why
    k = next(i for i, v in enumerate(eqn.outputs) if v is var)
    body = subs[0][1]
    is_scan = eqn.primitive.name == "scan"
    if k >= len(body.outputs) or not isinstance(body.outputs[k], Var) or (
            is_scan and k < eqn.params["num_carry"]):    # a final carry: saved for what reads it
        return None
    producers = {v.id: e for e in body.eqns for v in e.outputs}
    inner = looked_through_value(body.outputs[k], producers)
    producer = producers.get(inner.id) if isinstance(inner, Var) else None
    if producer is None:
        j = next((i for i, v in enumerate(body.inputs) if v is inner), None)
        nc, nk = eqn.params.get("num_consts", 0), eqn.params.get("num_carry", 0)
        what = ("the carry entering each iteration" if is_scan and j is not None and nc <= j < nc + nk
                else "the input of the body" if not is_scan else "the slice of xs of each iteration")
        why = None
    else:
        what, why = str(eqn_source(producer, inner)), _why_inside(producer, inner)
    what = f"{what}: {why}" if why else what
    if is_scan:
        return f"stacked over the {eqn.params['length']} iterations of a scan: {what}"
    return what


def _readers(prog: Program, var, linear_ids: set[int]) -> list[str]:
    """Primitives of the backward pass that read `var` (looking into
    checkpoint and call bodies)."""
    out = []
    for e in prog.eqns:
        for i, a in enumerate(e.inputs):
            if a is var:
                subs = _bodies(e)
                if subs:
                    out += _readers(subs[0][1], subs[0][1].inputs[i], set())
                else:
                    out.append(e.primitive.name)
    return list(dict.fromkeys(out))


def _recomputed(prog: Program, linear: set[int]) -> list[Eqn]:
    """Equations of a linear program that do not depend on its linear inputs
    (the transpose replays them forward: they are recomputation)."""
    out = []
    for e in prog.eqns:
        subs = _bodies(e)
        if subs:
            body = subs[0][1]
            inner = {v.id for v, a in zip(body.inputs, e.inputs) if isinstance(a, Var) and a.id in linear}
            out += _recomputed(body, inner)
            linear.update(v.id for v in e.outputs)
        elif any(isinstance(a, Var) and a.id in linear for a in e.inputs):
            linear.update(v.id for v in e.outputs)
        elif e.primitive is not device_put_p:   # copying an offloaded value back is no recomputation
            out.append(e)
    return out


def _checkpoint_readers(prog: Program) -> set[int]:
    """Ids of the vars of `prog` that a checkpoint reads, directly or through
    the body of a scan, call or cond that passes them to one."""
    out = set()
    for e in prog.eqns:
        if e.primitive is remat_p:
            out.update(a.id for a in e.inputs if isinstance(a, Var))
            continue
        for _, body in subprograms(e.params):
            inner = _checkpoint_readers(body)
            offset = len(e.inputs) - len(body.inputs)      # cond: the index is not a body input
            if offset not in (0, 1) or (offset == 1 and e.primitive.name != "cond"):
                continue                                    # inputs not passed one to one (while)
            out.update(a.id for a, v in zip(e.inputs[offset:], body.inputs)
                       if isinstance(a, Var) and v.id in inner)
    return out


def explain(prog: Program, *types) -> Explanation:
    """Explain the backward pass of `prog`: each residual's provenance, why
    it is saved, which backward equations read it, its bytes; and the
    equations recomputed in the backward pass with their FLOPs."""
    if types and list(types) != prog.in_types:
        raise TypeError(f"program takes {prog.in_types}, got {list(types)}")
    lin = linearize(prog)
    producers = {v.id: e for e in lin.forward.eqns for v in e.outputs}
    n_res = len(lin.residuals)
    linear_ids = {v.id for v in lin.linear.inputs[n_res:]}
    remat_readers = _checkpoint_readers(lin.linear)
    out = []
    for r, res_var in zip(lin.residuals, lin.linear.inputs[:n_res]):
        kind = r.source.kind
        value = looked_through_value(r.var, producers)
        producer = producers.get(value.id) if isinstance(value, Var) else None
        inside = _why_inside(producer, value) if producer is not None else None
        if inside:
            why = inside
        elif kind == "argument" and res_var.id in remat_readers:
            why = "input of the checkpoint"
        elif kind in ("literal", "constant"):
            why = f"a {kind} read by a tangent equation"
        else:
            why = "outside any checkpoint: every value the backward pass reads is saved"
        out.append(ResidualExplanation(r, why, _readers(lin.linear, res_var, linear_ids)))
    recomputed = _recomputed(lin.linear, set(linear_ids))
    return Explanation(out, recomputed, sum(eqn_flops(e) for e in recomputed))
