"""Checkpoint policies: which known values a checkpoint may save.

A policy is asked about each *known* equation of a checkpointed program's
JVP while it is partially evaluated, exactly as JAX asks
`policy(prim, *in_avals, **params)`: here `policy(prim, *in_types, **params)`
with the spec's Primitive, ArrayTypes and params. It answers

* ``Saveable`` (or True)   -> the outputs may be residuals;
* ``Recompute`` (or False) -> the equation is recomputed in the backward pass;
* ``Offload(src, dst)``    -> saved, but moved to memory `dst` and back.

Built-in policies are frozen dataclasses (data, so other code can inspect
them), one per entry of `jax.checkpoint_policies`, with the same names and
arguments. Any plain callable with the same signature is a user policy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


class _Answer:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


Saveable = _Answer("Saveable")
Recompute = _Answer("Recompute")


@dataclass(frozen=True)
class Offload:
    """Save the value in memory space `dst` (e.g. 'pinned_host'), moved from `src`."""
    src: str
    dst: str


class PolicyError(TypeError):
    """A user's policy raised, or answered something that is not an answer."""


class PolicyCombinationError(ValueError):
    """save_from_both_policies was asked to combine an answer that is not a
    Python bool: JAX raises this ValueError (ad_checkpoint.py,
    `save_from_both_policies`), whose message this one repeats."""


def _answer(policy: Callable, prim, in_types, params) -> Any:
    """`policy`'s raw answer about one equation (a user policy's exception
    wrapped in PolicyError, naming the equation)."""
    try:
        return policy(prim, *in_types, **params)
    except (PolicyError, PolicyCombinationError):
        raise
    except Exception as e:
        raise PolicyError(f"checkpoint policy {policy_name(policy)} raised {type(e).__name__}: {e} "
                          f"when asked about {prim.name}{list(map(str, in_types))}") from e


def ask(policy: Callable, prim, in_types, params) -> Any:
    """Ask `policy` about one equation; normalise the answer."""
    answer = _answer(policy, prim, in_types, params)
    if answer is True or answer is Saveable:
        return Saveable
    if answer is False or answer is Recompute:
        return Recompute
    if isinstance(answer, Offload):
        return answer
    raise PolicyError(f"checkpoint policy {policy_name(policy)} returned {answer!r} for "
                      f"{prim.name}; a policy must return True/Saveable, False/Recompute "
                      f"or Offload(src, dst)")


def policy_name(policy) -> str:
    if isinstance(policy, _Policy):
        return repr(policy)
    return getattr(policy, "__name__", repr(policy))


# what dots_saveable saves: ad_checkpoint.DotsSaveable(False), `prim in
# {dot_general_p, conv_general_dilated_p}`
DOT_PRIMITIVES = frozenset({"dot_general", "conv_general_dilated"})


def _is_dot(prim) -> bool:
    return prim.name == "dot_general"


def _is_name(prim) -> bool:
    return prim.name == "name"


class _Policy:
    """Base of the built-in policies (frozen dataclasses, callable)."""

    def __repr__(self):
        # name sets print sorted: the same policy prints the same in every process
        fields = []
        for k, v in vars(self).items():
            fields.append(f"{k}={sorted(v)!r}" if isinstance(v, frozenset) else f"{k}={v!r}")
        return f"{type(self).__name__}({', '.join(fields)})"


@dataclass(frozen=True, repr=False)
class _EverythingSaveable(_Policy):
    """Save every known value: as if there were no checkpoint."""
    def __call__(self, prim, *in_types, **params):
        return True

    def __repr__(self):
        return "everything_saveable"


@dataclass(frozen=True, repr=False)
class _NothingSaveable(_Policy):
    """Save nothing: recompute everything (the default of jax.checkpoint)."""
    def __call__(self, prim, *in_types, **params):
        return False

    def __repr__(self):
        return "nothing_saveable"


@dataclass(frozen=True, repr=False)
class _DotsSaveable(_Policy):
    """Save the outputs of matrix multiplications (dot_general)."""
    def __call__(self, prim, *in_types, **params):
        return prim.name in DOT_PRIMITIVES

    def __repr__(self):
        return "dots_saveable"


@dataclass(frozen=True, repr=False)
class _DotsWithNoBatchDimsSaveable(_Policy):
    """Save dot_general outputs that have no batch dimensions."""
    def __call__(self, prim, *in_types, **params):
        if _is_dot(prim):
            (_, _), (lhs_b, rhs_b) = params["dimension_numbers"]
            return not lhs_b and not rhs_b
        return False

    def __repr__(self):
        return "dots_with_no_batch_dims_saveable"


everything_saveable = _EverythingSaveable()
nothing_saveable = _NothingSaveable()
dots_saveable = _DotsSaveable()
checkpoint_dots = dots_saveable
dots_with_no_batch_dims_saveable = _DotsWithNoBatchDimsSaveable()
checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def _names(names, who):
    for n in names:
        if not isinstance(n, str):
            raise PolicyError(f"{who}: names must be strings, got {n!r}")
    return frozenset(names)


@dataclass(frozen=True, repr=False)
class offload_dot_with_no_batch_dims(_Policy):
    """Like dots_with_no_batch_dims_saveable, but offload those values to
    `offload_dst` instead of keeping them in device memory."""
    offload_src: str
    offload_dst: str

    def __call__(self, prim, *in_types, **params):
        if _is_dot(prim):
            (_, _), (lhs_b, rhs_b) = params["dimension_numbers"]
            if not lhs_b and not rhs_b:
                return Offload(self.offload_src, self.offload_dst)
        return Recompute


@dataclass(frozen=True, init=False, repr=False)
class save_anything_except_these_names(_Policy):
    """Save any value (not just named ones) except values named with one of
    `names`. (jax 0.10.2 implements this as `lambda *_, **__: True`, saving
    the excluded names too: a recorded known divergence; the spec follows the
    documented meaning.)"""
    names: frozenset

    def __init__(self, *names_not_to_save):
        object.__setattr__(self, "names", _names(names_not_to_save, "save_anything_except_these_names"))

    def __call__(self, prim, *in_types, **params):
        return not (_is_name(prim) and params["name"] in self.names)


@dataclass(frozen=True, init=False, repr=False)
class save_any_names_but_these(_Policy):
    """Save only named values (outputs of checkpoint_name), except `names`."""
    names: frozenset

    def __init__(self, *names_not_to_save):
        object.__setattr__(self, "names", _names(names_not_to_save, "save_any_names_but_these"))

    def __call__(self, prim, *in_types, **params):
        return _is_name(prim) and params["name"] not in self.names


@dataclass(frozen=True, init=False, repr=False)
class save_only_these_names(_Policy):
    """Save only values named with one of `names`."""
    names: frozenset

    def __init__(self, *names_which_can_be_saved):
        object.__setattr__(self, "names", _names(names_which_can_be_saved, "save_only_these_names"))

    def __call__(self, prim, *in_types, **params):
        return _is_name(prim) and params["name"] in self.names


@dataclass(frozen=True, repr=False)
class save_and_offload_only_these_names(_Policy):
    """Save values named in `names_which_can_be_saved`, offload those named in
    `names_which_can_be_offloaded`, recompute the rest."""
    names_which_can_be_saved: frozenset
    names_which_can_be_offloaded: frozenset
    offload_src: str
    offload_dst: str

    def __init__(self, *, names_which_can_be_saved, names_which_can_be_offloaded,
                 offload_src, offload_dst):
        saved = _names(names_which_can_be_saved, "save_and_offload_only_these_names")
        offloaded = _names(names_which_can_be_offloaded, "save_and_offload_only_these_names")
        if saved & offloaded:
            raise PolicyError("save_and_offload_only_these_names: names_which_can_be_saved and "
                              f"names_which_can_be_offloaded intersect: {sorted(saved & offloaded)}")
        for k, v in (("names_which_can_be_saved", saved), ("names_which_can_be_offloaded", offloaded),
                     ("offload_src", offload_src), ("offload_dst", offload_dst)):
            object.__setattr__(self, k, v)

    def __call__(self, prim, *in_types, **params):
        if _is_name(prim) and params["name"] in self.names_which_can_be_saved:
            return Saveable
        if _is_name(prim) and params["name"] in self.names_which_can_be_offloaded:
            return Offload(self.offload_src, self.offload_dst)
        return Recompute


@dataclass(frozen=True)
class _SaveFromBoth(_Policy):
    policy_1: Callable
    policy_2: Callable

    def __call__(self, prim, *in_types, **params):
        out1 = _answer(self.policy_1, prim, in_types, params)
        out2 = _answer(self.policy_2, prim, in_types, params)
        # JAX: `if not (isinstance(out1, bool) and isinstance(out2, bool)): raise ValueError`
        # (an offload policy answers pe.Recompute / pe.Offloadable, never a bool)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise PolicyCombinationError(
                f"The return value of the policies should be a boolean. Got: {out1} and {out2}. "
                "Please write a custom policy function directly, rather than using this helper function.")
        return out1 or out2

    def __repr__(self):
        return f"save_from_both_policies({policy_name(self.policy_1)}, {policy_name(self.policy_2)})"


_OFFLOAD = (offload_dot_with_no_batch_dims, save_and_offload_only_these_names)


def save_from_both_policies(policy_1, policy_2):
    """Logical OR: a value is saveable iff either policy saves it. Both must
    answer Python bools (JAX raises ValueError otherwise, e.g. for an offload
    policy, at the first equation asked about)."""
    if isinstance(policy_1, _OFFLOAD) or isinstance(policy_2, _OFFLOAD):
        return _SaveFromBoth(policy_1, policy_2)
    if policy_1 is everything_saveable or policy_2 is everything_saveable:
        return everything_saveable
    if policy_1 is nothing_saveable:
        return policy_2
    if policy_2 is nothing_saveable:
        return policy_1
    return _SaveFromBoth(policy_1, policy_2)


checkpoint_policies = {
    "everything_saveable": everything_saveable,
    "nothing_saveable": nothing_saveable,
    "dots_saveable": dots_saveable,
    "checkpoint_dots": checkpoint_dots,
    "dots_with_no_batch_dims_saveable": dots_with_no_batch_dims_saveable,
    "checkpoint_dots_with_no_batch_dims": checkpoint_dots_with_no_batch_dims,
    "offload_dot_with_no_batch_dims": offload_dot_with_no_batch_dims,
    "save_anything_except_these_names": save_anything_except_these_names,
    "save_any_names_but_these": save_any_names_but_these,
    "save_only_these_names": save_only_these_names,
    "save_from_both_policies": save_from_both_policies,
    "save_and_offload_only_these_names": save_and_offload_only_these_names,
}
