"""Checkpoint policies across the bridge: JAX <-> spec.

JAX's built-in policies become the spec's (data) policies with the same
meaning, so the spec answers from its own definitions; any other callable
is honoured by asking it, exactly as JAX does, with JAX's primitive object,
avals and params (`JaxCallablePolicy`). In the other direction a spec policy
becomes the JAX policy of the same name, or an adapter that asks the spec
policy with the spec's view of the equation.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from spec import policies as sp
from oracle.errors import Unsupported
from oracle.jax_api import internals as jx
from oracle.jax_api.flags import flags as jax_flags
from oracle.jax_params import spec_params, spec_type
from oracle.jax_names import JAX_NAME, SPEC_NAME, emitters
from spec.core import jax_facts, primitives


# JAX policies made by to_jax_policy, by id, with the spec policy they came
# from (both kept alive, so ids are not reused): lets a spec policy survive a
# trip through JAX even when JAX's object forgets its arguments.
_MADE_FROM_SPEC: dict[int, tuple] = {}


def from_jax_policy(policy):
    """The spec policy for a JAX policy (None stays None)."""
    import jax
    if policy is None or isinstance(policy, (sp._Policy, JaxCallablePolicy)):
        return policy
    if id(policy) in _MADE_FROM_SPEC and _MADE_FROM_SPEC[id(policy)][0] is policy:
        return _MADE_FROM_SPEC[id(policy)][1]
    cp = jax.checkpoint_policies
    if policy is cp.everything_saveable:
        return sp.everything_saveable
    if policy is cp.nothing_saveable:
        return sp.nothing_saveable
    if policy is cp.dots_saveable:      # plain functions before 0.8, DotsSaveable instances after
        return sp.dots_saveable
    if policy is cp.dots_with_no_batch_dims_saveable:
        return sp.dots_with_no_batch_dims_saveable
    if isinstance(policy, SpecPolicyForJax):
        return policy.spec_policy
    builtin = jx.builtin_policy(policy)
    if builtin is not None:
        return _spec_builtin(*builtin)
    if callable(policy):
        return JaxCallablePolicy(policy)
    raise Unsupported(f"checkpoint policy {policy!r} is not callable")


def _spec_builtin(kind: str, c: dict):
    """The spec policy of a JAX built-in policy (jax_api.builtin_policy's reading of it)."""
    if kind in ("dots_saveable", "dots_with_no_batch_dims_saveable"):
        return getattr(sp, kind)
    if kind in ("save_only_these_names", "save_any_names_but_these"):
        return getattr(sp, kind)(*sorted(c["names"]))
    if kind == "save_anything_except_these_names":
        if c["names"] is None:
            raise Unsupported(
                "jax.checkpoint_policies.save_anything_except_these_names(...) in this release returns "
                "`lambda *_, **__: True`, which does not keep the names it was given, so the oracle "
                "cannot know its documented meaning. Pass spec.policies.save_anything_except_these_names"
                "(*names) to oracle.check instead (it is turned into JAX's policy for JAX's side).")
        return sp.save_anything_except_these_names(*sorted(c["names"]))
    if kind == "offload_dot_with_no_batch_dims":
        return sp.offload_dot_with_no_batch_dims(c["offload_src"], c["offload_dst"])
    if kind == "save_and_offload_only_these_names":
        return sp.save_and_offload_only_these_names(
            names_which_can_be_saved=c["names_which_can_be_saved"],
            names_which_can_be_offloaded=c["names_which_can_be_offloaded"],
            offload_src=c["offload_src"], offload_dst=c["offload_dst"])
    return sp.save_from_both_policies(from_jax_policy(c["policy_1"]), from_jax_policy(c["policy_2"]))


@dataclass(frozen=True)
class JaxCallablePolicy:
    """A user's JAX policy, asked exactly as JAX asks it: with JAX's
    primitive object, avals and params for the equation."""
    fn: Callable

    def __call__(self, prim, *in_types, **params):
        pe = jx.partial_eval()
        jprim, avals, jparams = jax_view(prim.name, tuple(in_types), _freeze(params), _freeze(jax_flags()))
        answer = self.fn(jprim, *avals, **jparams)
        if isinstance(answer, pe.Offloadable):
            return sp.Offload(answer.src, answer.dst)
        if answer is pe.Saveable:
            return sp.Saveable
        if answer is pe.Recompute:
            return sp.Recompute
        return answer

    def __repr__(self):
        return getattr(self.fn, "__name__", repr(self.fn))


def _freeze(params: dict):
    return tuple(sorted(params.items()))


@functools.lru_cache(maxsize=4096)
def jax_view(spec_prim_name: str, in_types: tuple, frozen_params: tuple, frozen_flags: tuple = ()):
    """JAX's (primitive, avals, params) for one spec equation, found by
    tracing the corresponding jax.lax call under the JAX flags given (what
    it traces to depends on them: checkpoint_name under jax_remat3 is a
    call_hi_primitive), which key the cache."""
    import jax
    params = dict(frozen_params)
    if spec_prim_name == "name":
        from jax.ad_checkpoint import checkpoint_name
        fn = lambda x: checkpoint_name(x, params["name"])
    else:
        emit = emitters().get(spec_prim_name)
        if emit is None:
            return _structural_view(spec_prim_name, in_types)
        fn = lambda *xs: emit(*xs, **params)
    structs = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in in_types]
    jaxpr = jax.make_jaxpr(fn)(*structs)
    want = JAX_NAME.get(spec_prim_name, spec_prim_name)
    for e in jaxpr.jaxpr.eqns:
        if e.primitive.name == want or (spec_prim_name == "name" and e.primitive.name == "call_hi_primitive"):
            return e.primitive, tuple(v.aval for v in e.invars), dict(e.params)
    if len(jaxpr.jaxpr.eqns) == 1:
        # the release spells the operation with another primitive: what its
        # policy is asked about (square as integer_pow[y=2] before jax had
        # square_p: found on 0.4.25, acosh's JVP under a closure policy)
        e = jaxpr.jaxpr.eqns[0]
        return e.primitive, tuple(v.aval for v in e.invars), dict(e.params)
    return _elided_view(spec_prim_name, want, fn, structs)


def _elided_view(spec_prim_name: str, want: str, fn, structs):
    """JAX's view of an equation that JAX drops when it is bound on the
    spec's types: a same-dtype convert_element_type is the identity on a
    strongly typed value (convert_element_type_p's bind returns its operand,
    jax/_src/lax/lax.py `_convert_element_type_bind_with_trace`) and is
    kept only on a weak-typed one, which it makes strong; the spec's types
    carry no weak type. Traced again on weak-typed avals."""
    import jax
    weak = [jx.weak_typed(s.shape, s.dtype) for s in structs]
    for e in jax.make_jaxpr(fn)(*weak).jaxpr.eqns:
        if e.primitive.name == want:
            return e.primitive, tuple(v.aval for v in e.invars), dict(e.params)
    raise Unsupported(f"could not find JAX's {want} equation for spec {spec_prim_name}")


def _structural_view(spec_prim_name: str, in_types: tuple):
    """A primitive with sub-programs (custom_jvp_call inside jax.nn.relu, a
    jit, a scan...) shown to a JAX policy: JAX's primitive object and the
    avals, without params (JAX's would hold jaxprs the oracle does not
    rebuild; a policy that reads them raises, which is reported)."""
    import jax
    prim = jx.primitives().get(JAX_NAME.get(spec_prim_name, spec_prim_name))
    if prim is None:
        raise Unsupported(f"cannot show primitive {spec_prim_name!r} to a JAX policy")
    return prim, tuple(jax.core.ShapedArray(t.shape, t.dtype) for t in in_types), {}


@dataclass(frozen=True)
class SpecPolicyForJax:
    """A spec policy handed to JAX: JAX's questions are translated to the spec's."""
    spec_policy: Callable

    def __call__(self, prim, *avals, **params):
        pe = jx.partial_eval()
        # as the import reads an equation: 0.10.2's names (dot_general's
        # out_type is out_sharding before 0.4.3x; found by a campaign on 0.4.36)
        name, params = jx.canonical_eqn(prim.name, params, avals)
        sprim, sparams = _spec_view(name, params)
        answer = sp.ask(self.spec_policy, sprim, [spec_type(a) for a in avals], sparams)
        if isinstance(answer, sp.Offload):
            return pe.Offloadable(answer.src, answer.dst)
        return answer is sp.Saveable


def _spec_view(jax_name: str, params: dict):
    """(spec primitive, spec params) of the equation JAX asks about; a
    primitive with sub-programs is shown without params (see _structural_view)."""
    prim = primitives.get(SPEC_NAME.get(jax_name, jax_name))
    if prim is not None and prim in jax_facts and not jax_facts[prim].emitter and prim.name != "name":
        return prim, {}
    return spec_params(jax_name, params)


def to_jax_policy(policy):
    """The JAX policy for a spec policy (None stays None)."""
    out = _to_jax_policy(policy)
    if out is not None and not isinstance(policy, JaxCallablePolicy):
        _MADE_FROM_SPEC[id(out)] = (out, policy)
    return out


def _to_jax_policy(policy):
    import jax
    cp = jax.checkpoint_policies
    if policy is None:
        return None
    if isinstance(policy, JaxCallablePolicy):
        return policy.fn
    if policy is sp.everything_saveable:
        return cp.everything_saveable
    if policy is sp.nothing_saveable:
        return cp.nothing_saveable
    if policy is sp.dots_saveable:
        return cp.dots_saveable
    if policy is sp.dots_with_no_batch_dims_saveable:
        return cp.dots_with_no_batch_dims_saveable
    if isinstance(policy, sp.save_only_these_names):
        return cp.save_only_these_names(*sorted(policy.names))
    if isinstance(policy, sp.save_any_names_but_these):
        return cp.save_any_names_but_these(*sorted(policy.names))
    if isinstance(policy, sp.save_anything_except_these_names):
        return cp.save_anything_except_these_names(*sorted(policy.names))
    if isinstance(policy, sp.offload_dot_with_no_batch_dims):
        return cp.offload_dot_with_no_batch_dims(policy.offload_src, policy.offload_dst)
    if isinstance(policy, sp.save_and_offload_only_these_names):
        return cp.save_and_offload_only_these_names(
            names_which_can_be_saved=sorted(policy.names_which_can_be_saved),
            names_which_can_be_offloaded=sorted(policy.names_which_can_be_offloaded),
            offload_src=policy.offload_src, offload_dst=policy.offload_dst)
    if isinstance(policy, sp._SaveFromBoth):
        return cp.save_from_both_policies(to_jax_policy(policy.policy_1), to_jax_policy(policy.policy_2))
    if callable(policy):
        return SpecPolicyForJax(policy)
    raise Unsupported(f"checkpoint policy {policy!r} is not callable")
