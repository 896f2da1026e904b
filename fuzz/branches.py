"""Rule branches as a measured target: the parameter classes that take
different code paths in JAX's rules (jax 0.10.2), as data.

Each `Branch` names a primitive or a transformation, the JAX rule whose
path it is (with where that rule is in JAX's source), the class, and a
predicate over one equation in its context (`Site`) that says whether a
drawn program takes that path. `branches_hit(prog)` is the set of
branches a program takes; fuzz/test_branches.py asserts that the ci
profile's programs take every one, and runs JAX on a set of drawn
programs that together take them all.

The classes were read off JAX's rules, e.g. `_integer_pow_jvp` has
separate returns for y == 0, 1, 2 and the rest; `_balanced_eq` splits a
max/min tangent at ties; `_dot_general_transpose_lhs` reorders by the
other side's contracting dims (`np.argsort(y_contract)`); add/sub/mul's
JVPs skip a symbolic-zero tangent (an operand that does not depend on
the inputs) and their transposes `_unbroadcast` scalars and size-1 dims.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from spec import policies as P
from spec.ir import Literal, Program, Var, is_float, subprograms
from spec.jvp import output_dependence
from spec.vjp import linearize


@dataclass(frozen=True)
class Site:
    """One equation of a drawn program, in context."""
    eqn: object
    within: tuple       # the enclosing equations, outermost first
    const: tuple        # per input: independent of the program's inputs (JAX: a symbolic-zero tangent)
    defs: dict          # var id -> the equation defining it, in the same (sub-)program
    used: frozenset     # ids of the vars the same (sub-)program reads (or returns)
    program: Program    # the whole drawn program
    live: bool = True   # a float output's tangent reaches a float output of the program

    @property
    def prim(self) -> str:
        return self.eqn.primitive.name

    @property
    def params(self) -> dict:
        return self.eqn.params

    @property
    def in_types(self) -> list:
        return [a.type for a in self.eqn.inputs]

    def defined_by(self, i: int):
        a = self.eqn.inputs[i]
        return self.defs.get(a.id) if isinstance(a, Var) else None


@dataclass(frozen=True)
class Branch:
    target: str         # a primitive's name, or a transformation's ("policy", "second_order")
    rule: str           # the JAX rule ("jvp", "transpose", "partial_eval", "dce", ...)
    cls: str            # the class of parameters
    source: str         # jax/_src/...: the function whose branch it is
    hit: Callable       # Site -> bool
    shown_by: tuple = ()    # the properties whose verdict shows the branch ran (default: its rule's)

    @property
    def key(self) -> tuple:
        return (self.target, self.rule, self.cls)

    @property
    def properties(self) -> tuple:
        """The properties (fuzz.properties.oracle_agrees) of which one
        coming out `ok` shows JAX ran this branch and agreed: a known
        divergence on them (JAX raising earlier, say) shows nothing."""
        return self.shown_by or RULE_PROPERTIES[self.rule]


# the properties that run a rule of each kind through JAX; "P:KIND" is the
# stack property P of the one-layer stack KIND (fuzz/test_branches.py
# checks each program under `linearize` too)
RULE_PROPERTIES = {
    "jvp": ("jvp", "second_order", "stack:linearize"),
    "transpose": ("vjp", "second_order"),
    "vjp": ("vjp", "second_order"),
    "policy": ("residuals", "vjp_leaves"),
    "partial_eval": ("residuals", "vjp_leaves"),
    "dce": ("residuals", "vjp_leaves"),
    "batch": ("vmap",),
}


# --------------------------------------------------------------------------
# predicates

def _is(prim, pred=lambda s: True):
    return lambda s: s.prim == prim and pred(s)


def _const(i):
    return lambda s: s.const[i] and not s.const[1 - i]


def _both_vary(s):
    return not s.const[0] and not s.const[1]


def _scalar_broadcast(s):
    shapes = [t.shape for t in s.in_types]
    return any(not sh for sh in shapes) and any(sh for sh in shapes)


def _size1_broadcast(s):
    a, b = (t.shape for t in s.in_types[:2])
    return len(a) == len(b) and a != b and bool(a)


def _dn(s):
    return s.params["dimension_numbers"]


def _barrier_of_tangents_alone(s) -> bool:
    """A per-input prevent_cse with every flag False, on a checkpoint whose
    body needs no residual to be linearized: the staged remat of a called
    linear function (jax.linearize) has a barrier only for the flags
    remat_jvp appends for the tangents (`prevent_cse += (True,) *
    len(nonzero_tangents)`); residuals would bring their own True flags."""
    prevent_cse = s.params["prevent_cse"]
    if not isinstance(prevent_cse, tuple) or any(prevent_cse):
        return False
    try:
        return not linearize(s.params["jaxpr"]).residuals
    except Exception:       # noqa: BLE001 -- a body the spec cannot linearize (a while loop): not this branch
        return False


def _other_side_contract_unsorted(s):
    """A side is transposed (not a constant) whose other side's contracting
    dims, two or more, are not increasing: `_dot_general_transpose_lhs`
    then permutes the transposed side's contracting dims
    (`x_contract_sorted_by_y = np.take(x_contract, np.argsort(y_contract))`);
    the rhs is transposed by the same function with the sides swapped."""
    (lc, rc), _ = _dn(s)
    unsorted = lambda c: len(c) >= 2 and list(c) != sorted(c)
    return not s.const[0] and unsorted(rc) or not s.const[1] and unsorted(lc)


def _batch_not_leading(s):
    _, (lb, rb) = _dn(s)
    return bool(lb) and (tuple(lb) != tuple(range(len(lb))) or tuple(rb) != tuple(range(len(rb))))


def _kept(s, side):
    (lc, rc), (lb, rb) = _dn(s)
    nd = s.in_types[side].ndim
    return nd - len((lc, rc)[side]) - len((lb, rb)[side])


PERM_CLASSES = ("identity", "involution", "non-involutive")


def perm_class(perm) -> str:
    """A permutation's class in PERM_CLASSES: _transpose_transpose_rule
    applies its inverse, which differs from it only when non-involutive."""
    perm = tuple(perm)
    if perm == tuple(range(len(perm))):
        return "identity"
    return "involution" if tuple(np.argsort(perm)) == perm else "non-involutive"


def _unit_dims_expanded(s):
    shape, dims = s.params["shape"], s.params["broadcast_dimensions"]
    return any(d == 1 and shape[b] != 1 for d, b in zip(s.in_types[0].shape, dims))


def _new_dims(s):
    return len(s.params["shape"]) > s.in_types[0].ndim


def _interior_new_dim(s):
    """A new output dim with kept dims on both sides of it."""
    dims = s.params["broadcast_dimensions"]
    return any(i not in dims and min(dims) < i < max(dims) for i in range(len(s.params["shape"])))


def _tied_reduction(s):
    """reduce_max of an operand that repeats values along a reduced axis
    (a concatenate of one operand with itself, or a broadcast's new dim)."""
    e = s.defined_by(0)
    axes = set(s.params["axes"])
    if e is None:
        return False
    if e.primitive.name == "concatenate":
        ids = [a.id for a in e.inputs if isinstance(a, Var)]
        return e.params["dimension"] in axes and len(ids) != len(set(ids))
    if e.primitive.name == "broadcast_in_dim":
        kept = set(e.params["broadcast_dimensions"])
        return any(i not in kept and e.params["shape"][i] > 1 for i in axes)
    return False


def _pad(s, pred):
    return any(pred(lo, hi, i) for lo, hi, i in s.params["padding_config"])


def _strides(s):
    return s.params.get("strides")


def _policy(s):
    return s.params.get("policy")


def _policy_kind(policy) -> str:
    """The POLICY_KINDS entry (fuzz/strategies.py) a spec policy is."""
    from fuzz.strategies import SavePrimitives
    kinds = {id(P.nothing_saveable): "nothing", id(P.everything_saveable): "everything",
             id(P.dots_saveable): "dots", id(P.dots_with_no_batch_dims_saveable): "dots_no_batch"}
    if policy is None:
        return "none"
    if id(policy) in kinds:
        return kinds[id(policy)]
    return {P.save_only_these_names: "only", P.save_any_names_but_these: "any_but",
            P.save_anything_except_these_names: "except", P.save_and_offload_only_these_names: "offload_names",
            P.offload_dot_with_no_batch_dims: "offload_dots", P._SaveFromBoth: "both",
            SavePrimitives: "user"}.get(type(policy), "other")


def _part_family(policy) -> str:
    kind = _policy_kind(policy)
    return {"only": "names", "any_but": "names", "except": "names", "dots": "dots", "dots_no_batch": "dots",
            "offload_names": "offload", "offload_dots": "offload"}.get(kind, kind)


def _both_pair(a, b):
    def pred(s):
        pol = _policy(s)
        if _policy_kind(pol) != "both":
            return False
        return {_part_family(pol.policy_1), _part_family(pol.policy_2)} == {a, b}
    return _is("remat", pred)


def _body(s):
    return s.params["jaxpr"]


def _names_bound(prog: Program) -> set:
    out = set()
    for e in prog.eqns:
        if e.primitive.name == "name":
            out.add(e.params["name"])
        for _, b in subprograms(e.params):
            out |= _names_bound(b)
    return out


def _names_read(s):
    """Names the remat's policy mentions and its body binds."""
    from fuzz.strategies import mentioned_names
    return mentioned_names(_policy(s)) & _names_bound(_body(s))


def _eqns(prog: Program):
    for e in prog.eqns:
        yield e
        for _, b in subprograms(e.params):
            yield from _eqns(b)


def _inner(s, pred):
    """Some equation inside this one's sub-programs satisfies pred(eqn)."""
    return any(pred(e) for _, b in subprograms(s.params) for e in _eqns(b))


def _within(s, *prims):
    """The enclosing equations, innermost last, end with `prims` (in
    order, not necessarily adjacent)."""
    names = [e.primitive.name for e in s.within] + [s.prim]
    it = iter(names)
    return all(any(n == p for n in it) for p in prims)


def _float_outs(s):
    return [v for v in s.eqn.outputs if is_float(v.type.dtype)]


def _forwards_input(s):
    body = _body(s)
    ins = {v.id for v in body.inputs}
    return any(isinstance(o, Var) and o.id in ins for o in body.outputs)


def _unused_output(s):
    return any(v.id not in s.used for v in s.eqn.outputs)


def _carries_all_promoted(s):
    """A while loop whose every carry is float and starts constant (a zero
    tangent) while a body const varies: _while_loop_jvp's fixpoint promotes
    them, and needs its last pass after the promotion (no int counter that
    never promotes leaves it a spare one)."""
    nc, nb = s.params["cond_nconsts"], s.params["body_nconsts"]
    carries = range(nc + nb, len(s.in_types))
    return (all(is_float(s.in_types[i].dtype) and s.const[i] for i in carries)
            and any(not s.const[i] for i in range(nc, nc + nb)))


def _scan_consts(s):
    return s.params["num_consts"] > 0


def _scan_xs(s):
    return len(s.eqn.inputs) > s.params["num_consts"] + s.params["num_carry"]


def _second_order(s):
    """A checkpoint with a policy in a program whose second order (grad of
    grad, jvp of vjp) oracle_agrees checks (no custom_vjp, no while)."""
    from fuzz.strategies import has_custom_vjp, has_while
    return s.prim == "remat" and _policy(s) is not None and not has_custom_vjp(s.program) \
        and not has_while(s.program)


def _literal_input(s):
    return any(isinstance(a, Literal) for a in s.eqn.inputs)


# --------------------------------------------------------------------------
# the branches

L = "jax/_src/lax/lax.py"
AC = "jax/_src/ad_checkpoint.py"
PE = "jax/_src/interpreters/partial_eval.py"


def _binary(prim, jvp_src, transpose_src):
    return [
        Branch(prim, "jvp", "lhs tangent a symbolic zero", f"{L}:{jvp_src}", _is(prim, _const(0))),
        Branch(prim, "jvp", "rhs tangent a symbolic zero", f"{L}:{jvp_src}", _is(prim, _const(1))),
        Branch(prim, "jvp", "both tangents", f"{L}:{jvp_src}", _is(prim, _both_vary)),
        Branch(prim, "transpose", "scalar operand broadcast", f"{L}:{transpose_src}/_unbroadcast",
               _is(prim, _scalar_broadcast)),
        Branch(prim, "transpose", "size-1 dims broadcast", f"{L}:{transpose_src}/_unbroadcast",
               _is(prim, _size1_broadcast)),
    ]


def _minmax(prim):
    src = f"{L}:ad.defjvp2({prim}_p)/_balanced_eq"
    return [
        Branch(prim, "jvp", "tie (same operand twice)", src,
               _is(prim, lambda s: isinstance(s.eqn.inputs[0], Var) and s.eqn.inputs[0] is s.eqn.inputs[1])),
        Branch(prim, "jvp", "one operand constant", src, _is(prim, lambda s: s.const[0] != s.const[1])),
        Branch(prim, "jvp", "distinct operands", src,
               _is(prim, lambda s: _both_vary(s) and s.eqn.inputs[0] is not s.eqn.inputs[1])),
        Branch(prim, "jvp", "broadcast operand", src, _is(prim, lambda s: s.in_types[0].shape != s.in_types[1].shape)),
    ]


def _pow(cls, pred):
    return Branch("integer_pow", "jvp", cls, f"{L}:_integer_pow_jvp", _is("integer_pow", lambda s: pred(s.params["y"])))


def _unary_jvp(prim):
    """A unary elementwise primitive's JVP rule (ad.defjvp / defjvp2 in
    lax.py: one formula each, run where the operand's tangent is not a
    symbolic zero)."""
    return Branch(prim, "jvp", "operand varies", f"{L}:ad.defjvp({prim}_p)", _is(prim, lambda s: not s.const[0]))


# the unary elementwise primitives the program steps draw
UNARY = ("sin", "cos", "tanh", "logistic", "exp", "log", "log1p", "sqrt", "rsqrt", "neg", "square", "abs")


# a unary or binary primitive whose JVP reads its operands' values: what it
# reads of a checkpoint's equation is a residual, as the policy decides
_NONLINEAR = frozenset(UNARY) - {"neg"} | {"mul", "div", "integer_pow", "max", "min"}


def _decided_by_policy(kind, prim, batch=None):
    """A checkpoint with a `kind` policy whose body has a `prim` equation
    (a dot_general with batch dims or without, as `batch` says) whose output
    a nonlinear equation there reads: whether the policy saves it changes
    the residuals (dots_saveable's `prim in (dot_general_p,
    conv_general_dilated_p)`, dots_with_no_batch_dims_saveable's batch-dims
    test)."""
    def pred(s):
        if _policy_kind(_policy(s)) != kind:
            return False
        body = _body(s)
        read = {a.id for e in body.eqns if e.primitive.name in _NONLINEAR for a in e.inputs if isinstance(a, Var)}
        return any(e.primitive.name == prim and e.outputs[0].id in read
                   and (batch is None or bool(e.params["dimension_numbers"][1][0]) == batch) for e in body.eqns)
    return Branch("remat", "policy", f"{kind}: a {prim}{'' if batch is None else ' with' if batch else ' without'}"
                  f"{'' if batch is None else ' batch dims'} read nonlinearly", f"{AC}:{kind}_saveable", _is("remat", pred))


def _policy_branch(kind):
    return Branch("remat", "policy", f"policy {kind}", f"{AC}:checkpoint_policies/remat_partial_eval",
                  _is("remat", lambda s: _policy_kind(_policy(s)) == kind))


BRANCHES: tuple[Branch, ...] = tuple(
    [_unary_jvp(p) for p in UNARY]
    + [_pow("y = 0", lambda y: y == 0), _pow("y = 1", lambda y: y == 1), _pow("y = 2", lambda y: y == 2),
     _pow("y > 2", lambda y: y > 2), _pow("y < 0", lambda y: y < 0)]
    + _binary("add", "_add_jvp", "_add_transpose")
    + _binary("sub", "_sub_jvp", "_sub_transpose")
    + _binary("mul", "ad.defjvp(mul_p)", "_mul_transpose_left/right")
    + [Branch("div", "jvp", "numerator constant", f"{L}:ad.defjvp(div_p)", _is("div", _const(0))),
       Branch("div", "jvp", "divisor constant", f"{L}:ad.defjvp(div_p)", _is("div", _const(1))),
       Branch("div", "jvp", "both tangents", f"{L}:ad.defjvp(div_p)", _is("div", _both_vary)),
       Branch("div", "transpose", "broadcast operand", f"{L}:_div_transpose_rule/_unbroadcast",
              _is("div", lambda s: s.in_types[0].shape != s.in_types[1].shape))]
    + _minmax("max") + _minmax("min")
    + [Branch("select_n", "jvp", "bool predicate, 2 cases", f"{L}:_select_jvp/_select_transpose_rule",
              _is("select_n", lambda s: s.in_types[0].dtype == np.bool_)),
       Branch("select_n", "jvp", "int32 predicate, >= 3 cases", f"{L}:_select_jvp/_select_transpose_rule",
              _is("select_n", lambda s: len(s.eqn.inputs) >= 4)),
       Branch("select_n", "batch", "scalar predicate", f"{L}:_select_batch_rule",
              _is("select_n", lambda s: s.in_types[0].ndim == 0 and s.in_types[1].ndim > 0)),
       Branch("select_n", "transpose", "a constant case", f"{L}:_select_transpose_rule",
              _is("select_n", lambda s: any(s.const[1:]) and not all(s.const[1:])))]
    + [Branch("broadcast_in_dim", "transpose", "new dims", f"{L}:_broadcast_in_dim_transpose_rule",
              _is("broadcast_in_dim", _new_dims)),
       Branch("broadcast_in_dim", "transpose", "size-1 dims expanded (unit_dims)",
              f"{L}:_broadcast_in_dim_transpose_rule", _is("broadcast_in_dim", _unit_dims_expanded)),
       Branch("broadcast_in_dim", "transpose", "new dim between kept dims", f"{L}:_broadcast_in_dim_transpose_rule",
              _is("broadcast_in_dim", lambda s: s.in_types[0].ndim > 1 and _interior_new_dim(s))),
       Branch("broadcast_in_dim", "transpose", "scalar operand", f"{L}:_broadcast_in_dim_transpose_rule",
              _is("broadcast_in_dim", lambda s: s.in_types[0].ndim == 0 and not s.const[0]))]
    + [Branch("transpose", "transpose", f"{c} permutation", f"{L}:_transpose_transpose_rule",
              _is("transpose", (lambda c: lambda s: perm_class(s.params["permutation"]) == c)(c)))
       for c in ("involution", "non-involutive")]
    + [Branch("dot_general", "transpose", "a transposed side's other side has >= 2 contracting dims, not increasing",
              f"{L}:_dot_general_transpose_lhs", _is("dot_general", _other_side_contract_unsorted)),
       Branch("dot_general", "transpose", "batch dims", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", lambda s: bool(_dn(s)[1][0]))),
       Branch("dot_general", "transpose", "batch dims not leading", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", _batch_not_leading)),
       Branch("dot_general", "transpose", "no contracting dims", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", lambda s: not _dn(s)[0][0])),
       Branch("dot_general", "transpose", "lhs constant (rhs transposed only)", f"{L}:_dot_general_transpose_rhs",
              _is("dot_general", _const(0))),
       Branch("dot_general", "transpose", "rhs constant (lhs transposed only)", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", _const(1))),
       Branch("dot_general", "transpose", "same operand on both sides", f"{L}:_dot_general_transpose_lhs/rhs",
              _is("dot_general", lambda s: s.eqn.inputs[0] is s.eqn.inputs[1])),
       Branch("dot_general", "transpose", "lhs has no kept dims", f"{L}:_dot_general_transpose_rhs",
              _is("dot_general", lambda s: _kept(s, 0) == 0)),
       Branch("dot_general", "transpose", "rhs has no kept dims", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", lambda s: _kept(s, 1) == 0)),
       Branch("dot_general", "jvp", "preferred_element_type None", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", lambda s: s.params.get("preferred_element_type") is None)),
       Branch("dot_general", "jvp", "preferred_element_type given", f"{L}:_dot_general_transpose_lhs",
              _is("dot_general", lambda s: s.params.get("preferred_element_type") is not None))]
    + [Branch("reduce_sum", "transpose", "all axes", f"{L}:_reduce_sum_transpose_rule",
              _is("reduce_sum", lambda s: len(s.params["axes"]) == s.in_types[0].ndim > 0)),
       Branch("reduce_sum", "transpose", "some axes", f"{L}:_reduce_sum_transpose_rule",
              _is("reduce_sum", lambda s: 0 < len(s.params["axes"]) < s.in_types[0].ndim)),
       Branch("reduce_max", "jvp", "ties along a reduced axis", f"{L}:_reduce_chooser_jvp_rule",
              _is("reduce_max", _tied_reduction)),
       Branch("reduce_max", "jvp", "some axes", f"{L}:_reduce_chooser_jvp_rule",
              _is("reduce_max", lambda s: 0 < len(s.params["axes"]) < s.in_types[0].ndim))]
    + [Branch("concatenate", "transpose", "a constant operand", f"{L}:_concatenate_transpose_rule",
              _is("concatenate", lambda s: any(s.const) and not all(s.const))),
       Branch("concatenate", "transpose", ">= 3 operands", f"{L}:_concatenate_transpose_rule",
              _is("concatenate", lambda s: len(s.eqn.inputs) >= 3)),
       Branch("concatenate", "transpose", "operand sizes differ", f"{L}:_concatenate_transpose_rule",
              _is("concatenate", lambda s: len({t.shape for t in s.in_types}) > 1)),
       Branch("concatenate", "transpose", "dimension > 0", f"{L}:_concatenate_transpose_rule",
              _is("concatenate", lambda s: s.params["dimension"] > 0))]
    + [Branch("pad", "transpose", "negative padding", f"{L}:_pad_transpose",
              _is("pad", lambda s: _pad(s, lambda lo, hi, i: lo < 0 or hi < 0))),
       Branch("pad", "transpose", "interior padding", f"{L}:_pad_transpose",
              _is("pad", lambda s: _pad(s, lambda lo, hi, i: i > 0))),
       Branch("pad", "transpose", "padding value varies", f"{L}:_pad_transpose",
              _is("pad", lambda s: not s.const[1] and not s.const[0])),
       Branch("pad", "transpose", "padding value constant", f"{L}:_pad_transpose",
              _is("pad", lambda s: s.const[1] and not s.const[0]))]
    + [Branch("slice", "transpose", "strides > 1", "jax/_src/lax/slicing.py:_slice_transpose_rule",
              _is("slice", lambda s: _strides(s) is not None and any(st > 1 for st in _strides(s)))),
       Branch("slice", "transpose", "strides None", "jax/_src/lax/slicing.py:_slice_transpose_rule",
              _is("slice", lambda s: _strides(s) is None)),
       Branch("slice", "transpose", "limit below the size", "jax/_src/lax/slicing.py:_slice_transpose_rule",
              _is("slice", lambda s: any(h < d for h, d in zip(s.params["limit_indices"], s.in_types[0].shape))))]
    + [Branch("cumsum", "transpose", "reverse", "jax/_src/lax/control_flow/loops.py:_cumsum_transpose_rule",
              _is("cumsum", lambda s: bool(s.params["reverse"]))),
       Branch("cumsum", "transpose", "axis > 0", "jax/_src/lax/control_flow/loops.py:_cumsum_transpose_rule",
              _is("cumsum", lambda s: s.params["axis"] > 0))]
    + [Branch("name", "partial_eval", "bound and read by the enclosing policy", f"{AC}:name_p/remat_partial_eval",
              lambda s: s.prim == "name" and any(e.primitive.name == "remat" and s.params["name"] in
                                                 _names_mentioned(e) for e in s.within))]
    + [_decided_by_policy("dots", "dot_general", False), _decided_by_policy("dots", "dot_general", True),
       _decided_by_policy("dots", "conv_general_dilated"), _decided_by_policy("dots_no_batch", "dot_general", False),
       _decided_by_policy("dots_no_batch", "dot_general", True)]
    + [_policy_branch(k) for k in ("none", "nothing", "everything", "dots", "dots_no_batch", "only", "any_but",
                                   "except", "offload_names", "offload_dots", "both", "user")]
    + [Branch("remat", "policy", f"save_from_both_policies({a}, {b})", f"{AC}:save_from_both_policies",
              _both_pair(a, b))
       for a, b in (("names", "names"), ("names", "dots"), ("names", "user"), ("dots", "user"),
                    ("names", "offload"), ("user", "offload"))]
    + [Branch("remat", "policy", "user policy offloads", f"{AC}:remat_partial_eval/pe.Offloadable",
              _is("remat", lambda s: bool(getattr(_policy(s), "offload", ())))),
       Branch("remat", "policy", ">= 2 names mentioned, bound and read", f"{AC}:save_only_these_names/remat_partial_eval",
              _is("remat", lambda s: len(_names_read(s)) >= 2)),
       Branch("remat", "partial_eval", "multiple outputs", f"{AC}:remat_partial_eval",
              _is("remat", lambda s: len(_float_outs(s)) >= 2)),
       Branch("remat", "partial_eval", "an input forwarded to an output", f"{AC}:remat_partial_eval",
              _is("remat", _forwards_input)),
       Branch("remat", "dce", "an output unused", f"{AC}:remat_dce", _is("remat", _unused_output)),
       Branch("remat", "partial_eval", "prevent_cse False", f"{AC}:remat_partial_eval",
              _is("remat", lambda s: not s.params["prevent_cse"])),
       Branch("remat", "jvp", "per-input prevent_cse all False, no residuals: a linear function's barrier "
              "is the tangents' alone", f"{AC}:remat_jvp", _is("remat", _barrier_of_tangents_alone),
              shown_by=("stack_barriers:linearize",)),
       Branch("remat", "partial_eval", "a literal operand in the body", f"{PE}:partial_eval_jaxpr_custom",
              lambda s: _literal_input(s) and any(e.primitive.name == "remat" for e in s.within)),
       Branch("remat", "partial_eval", "nested checkpoint with another policy", f"{PE}:call_partial_eval_custom_rule",
              _is("remat", lambda s: _inner(s, lambda e: e.primitive.name == "remat"
                                            and e.params["policy"] is not _policy(s)))),
       Branch("remat", "partial_eval", "inside a scan body", "jax/_src/lax/control_flow/loops.py:_scan_partial_eval",
              lambda s: _within(s, "scan", "remat")),
       Branch("remat", "partial_eval", "around a scan", f"{AC}:remat_partial_eval",
              lambda s: _within(s, "remat", "scan")),
       Branch("remat", "partial_eval", "inside a cond branch", "jax/_src/lax/control_flow/conditionals.py",
              lambda s: _within(s, "cond", "remat")),
       Branch("call", "partial_eval", "jit inside checkpoint inside jit", "jax/_src/pjit.py:_pjit_partial_eval",
              lambda s: _within(s, "call", "remat", "call")),
       Branch("call", "partial_eval", "an input forwarded to an output", "jax/_src/pjit.py:_pjit_partial_eval",
              _is("call", _forwards_input)),
       Branch("call", "dce", "an output unused", "jax/_src/pjit.py:dce_jaxpr_pjit_rule", _is("call", _unused_output)),
       Branch("call", "partial_eval", "multiple outputs", "jax/_src/pjit.py:_pjit_partial_eval",
              _is("call", lambda s: len(_float_outs(s)) >= 2)),
       Branch("scan", "partial_eval", "loop-invariant consts (hoisted residuals)",
              "jax/_src/lax/control_flow/loops.py:_scan_partial_eval", _is("scan", _scan_consts)),
       Branch("scan", "partial_eval", "scanned xs (stacked residuals)",
              "jax/_src/lax/control_flow/loops.py:_scan_partial_eval", _is("scan", _scan_xs)),
       Branch("scan", "dce", "stacked outputs unused", "jax/_src/lax/control_flow/loops.py:_scan_dce_rule",
              _is("scan", _unused_output)),
       Branch("while", "jvp", "every carry promoted from a zero tangent (the fixpoint's last pass)",
              "jax/_src/lax/control_flow/loops.py:_while_loop_jvp", _is("while", _carries_all_promoted)),
       Branch("scan", "transpose", "reverse", "jax/_src/lax/control_flow/loops.py:_scan_transpose",
              _is("scan", lambda s: bool(s.params["reverse"]))),
       Branch("second_order", "vjp", "grad of grad through a checkpoint with a policy",
              f"{AC}:remat_jvp/remat_partial_eval", _second_order)]
)


def _names_mentioned(remat_eqn) -> set:
    from fuzz.strategies import mentioned_names
    return mentioned_names(remat_eqn.params.get("policy"))


BY_KEY = {b.key: b for b in BRANCHES}
assert len(BY_KEY) == len(BRANCHES), "branch keys repeat"


# --------------------------------------------------------------------------
# walking a program

def sites(prog: Program, varies=None, within=(), top=None, live=True):
    """Every equation of `prog` and its sub-programs as a Site. `varies`:
    per input, whether it depends on the outer program's float inputs
    (default: float inputs do, others do not); `live`: whether `prog`'s
    outputs reach the drawn program's, for all of them or per output (a
    sub-program's outputs do where its equation's do)."""
    top = prog if top is None else top
    if varies is None:
        varies = [is_float(v.type.dtype) for v in prog.inputs]
    dep = {v.id: bool(d) for v, d in zip(prog.inputs, varies)}
    defs = {v.id: e for e in prog.eqns for v in e.outputs}
    used = frozenset(a.id for e in prog.eqns for a in e.inputs if isinstance(a, Var)) | \
        frozenset(a.id for a in prog.outputs if isinstance(a, Var))
    live_outputs = [live] * len(prog.outputs) if isinstance(live, bool) else live
    reaching = _reaching_outputs(prog, live_outputs)
    for e in prog.eqns:
        in_dep = [isinstance(a, Var) and dep.get(a.id, False) for a in e.inputs]
        outs_live = [v.id in reaching for v in e.outputs]
        yield Site(e, within, tuple(not d for d in in_dep), defs, used, top, any(outs_live))
        for _, body in subprograms(e.params):
            n = len(body.inputs)
            inner = in_dep if n == len(in_dep) else in_dep[1:] if n == len(in_dep) - 1 else [True] * n
            body_live = outs_live if len(body.outputs) == len(e.outputs) else any(outs_live)
            yield from sites(body, inner, within + (e,), top, body_live)
        out_dep = any(in_dep) and e.primitive.name != "stop_gradient"
        for v in e.outputs:
            dep[v.id] = out_dep and is_float(v.type.dtype)


def _reaching_outputs(prog: Program, live_outputs) -> frozenset:
    """The ids of `prog`'s float values whose tangent can reach a float
    output of `prog` that `live_outputs` flags (through float values; not
    through stop_gradient; through an equation with a sub-program, from
    the inputs its reaching outputs depend on: a checkpoint's input that
    only an unread output depends on is not reached, found by a covering
    program whose dot_general fed a scan's dead carry)."""
    live = {a.id for a, l in zip(prog.outputs, live_outputs)
            if l and isinstance(a, Var) and is_float(a.type.dtype)}
    for e in reversed(prog.eqns):
        outs_live = [v.id in live for v in e.outputs]
        if e.primitive.name == "stop_gradient" or not any(outs_live):
            continue
        for k, a in enumerate(e.inputs):
            if isinstance(a, Var) and is_float(a.type.dtype) and a.id not in live and _reaches(e, k, outs_live):
                live.add(a.id)
    return frozenset(live)


def _reaches(e, k: int, outs_live: list) -> bool:
    """Some output of `e` that `outs_live` flags depends on its input `k`."""
    if not subprograms(e.params):
        return True
    depends = output_dependence(e, [i == k for i in range(len(e.inputs))])
    return any(d and l for d, l in zip(depends, outs_live))


# the rules whose branch a program takes only where the equation's tangent
# reaches an output: elsewhere JAX's answer does not show which path it took
# (a checkpoint whose tangents reach no output saves nothing: its policy's
# answers show in no residual, found by a mutant of dots_saveable surviving)
NEEDS_LIVE = ("jvp", "transpose", "vjp", "policy", "partial_eval", "dce")


def branches_hit(prog: Program) -> set:
    """The keys of the branches `prog` takes. A program with a while loop
    anywhere takes no transpose rule's: nothing checks its reverse mode
    (fuzz.properties.oracle_agrees; JAX refuses it, as the spec does)."""
    out = set()
    all_sites = list(sites(prog))
    reverse = not any(s.prim == "while" for s in all_sites)
    for s in all_sites:
        for b in BRANCHES:
            if (b.key not in out and (s.live or b.rule not in NEEDS_LIVE) and (reverse or b.rule != "transpose")
                    and b.hit(s)):
                out.add(b.key)
    return out
