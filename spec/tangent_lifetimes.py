"""When a linearized jit's residuals are captured: tangent lifetimes.

`ad.linearize_jaxpr` (pjit's and scan's linearize rules, direct
linearization) evaluates the body with `core.eval_jaxpr` under a
LinearizeTrace whose tangents are staged into a DynamicJaxprTrace with
`auto_dce` (jax/_src/interpreters/partial_eval.py, JaxprStackFrame). The
residuals are that tangent trace's constants, in the order it makes them:

* a tangent equation reading a known value makes it a constant
  (`new_const`) unless a live one exists: `constid_to_tracer` is a
  WeakValueDictionary, and `finalize_const` drops the constant from
  `constvar_to_val` when its tracer dies;
* with auto_dce the frame holds its equations weakly (`add_eqn`'s
  `ref(eqn)`): an equation lives while a tracer it produced lives, and it
  holds its input tracers;
* eval_jaxpr's env holds a value's tangent until the value's last reader
  has run (`clean_up_dead_vars`), a JVP rule's intermediates die when the
  rule returns, the outputs live to the end.

So a constant whose readers all died is dropped, and read again it is made
again, after every constant made in between: the residual's place is its
last capture's (found by a pristine nightly, 36736d4f48: a checkpoint that
ignores an input whose tangent read `e`, and a later `e * e`).

`TangentHolds` records, while the JVP program is emitted
(spec.jvp._jvp_traced), how long eval_jaxpr's env holds each tangent and
where each primal equation's JVP ends; `capture_order` replays the
captures of a partial evaluation with those lifetimes.
"""
from __future__ import annotations

from typing import NamedTuple

from spec.ir import Literal, Program, Var


class TangentHolds(NamedTuple):
    """Of a JVP program: `released[v]` the equation index before which the
    env drops tangent Var v (its primal's last reader has run; absent:
    held by no primal value), `step_end[i]` the index after the last
    equation emitted by the same primal equation's JVP as equation i, and
    `eqn_ids` the program's equations these hold for (by identity: a
    rewritten program has none)."""
    released: dict
    step_end: tuple
    eqn_ids: tuple


def holds_of(prog: Program) -> TangentHolds | None:
    """prog's TangentHolds where they describe its equations as they are."""
    holds = prog.tangent_holds
    if holds is None or holds.eqn_ids != tuple(id(e) for e in prog.eqns):
        return None
    return holds


def last_readers(prog: Program) -> dict:
    """Var id -> the index of the last equation of `prog` reading it
    (len(eqns) for an output: held to the end)."""
    last = {}
    for j, e in enumerate(prog.eqns):
        for a in e.inputs:
            if isinstance(a, Var):
                last[a.id] = j
    for a in prog.outputs:
        if isinstance(a, Var):
            last[a.id] = len(prog.eqns)
    return last


def _alive_until(staged, staged_at, holds: TangentHolds, out_ids: set, end: int) -> list[int]:
    """For each staged (tangent) equation, the index before which it dies:
    at least its JVP rule's end, as long as the env holds an output of it,
    or a live equation reads one, or forever (`end`) for an output."""
    consumers: dict = {}
    for k, e in enumerate(staged):
        for a in e.inputs:
            if isinstance(a, Var):
                consumers.setdefault(a.id, []).append(k)
    alive = [0] * len(staged)
    for k in reversed(range(len(staged))):
        until = holds.step_end[staged_at[k]]
        for v in staged[k].outputs:
            until = max(until, end if v.id in out_ids else 0, holds.released.get(v.id, 0),
                        *(alive[c] for c in consumers.get(v.id, ()) if c > k))
        alive[k] = until
    return alive


def capture_order(uses, readers, staged, staged_at, staged_outs, keys, key_of, holds: TangentHolds) -> list[int]:
    """The residuals (`keys`, keyed by `key_of(atom)`) in the order the
    tangent trace last captured them. `uses[i]` is read at equation index
    `readers[i][0]` by staged equation `readers[i][1]`; the staged outputs
    are read at the end."""
    end = len(holds.step_end) + 1
    out_ids = {a.id for a in staged_outs if isinstance(a, Var)}
    alive = _alive_until(staged, staged_at, holds, out_ids, end)
    index = {id(e): k for k, e in enumerate(staged)}
    live: dict = {}         # key -> the index before which its constant dies
    captured: dict = {}     # key -> when its constant was last made
    reads = list(zip(uses, readers)) + [(a, (end - 1, None)) for a in staged_outs]
    for n, (a, (at, reader)) in enumerate(reads):
        if not isinstance(a, (Var, Literal)):
            continue
        k = key_of(a)
        until = end if reader is None or id(reader) not in index else alive[index[id(reader)]]
        if live.get(k, -1) > at:
            live[k] = max(live[k], until)
        else:       # made (again): after every constant made so far
            live[k], captured[k] = until, n
    return sorted(range(len(keys)), key=lambda i: captured.get(keys[i], float("inf")))
