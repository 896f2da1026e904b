"""Bugs planted into jax 0.10.2 by monkeypatching, for the fuzzer's power
check (tests/test_fuzz_power.py).

Each entry of BUGS is a context manager that replaces one JAX rule for the
duration and restores it afterwards, clearing JAX's tracing and compilation
caches after patching and after restoring (JAX caches are not keyed on the
rules). Only remat2 (JAX's default checkpoint implementation) is targeted.

This module is importable on its own, so that a reproducer can be run with a
bug planted:

    PYTHONPATH=tests python -m planted_bugs BUG repro.py

runs repro.py (as __main__) with BUG planted; with BUG `none`, on pristine JAX.
"""
from __future__ import annotations

import contextlib
import os
import runpy
import sys

import jax
from jax import lax
from jax._src import ad_checkpoint as jax_adc
from jax._src import ad_util
from jax._src.interpreters import ad as jax_ad
from jax._src.interpreters import batching as jax_batching
from jax._src.interpreters import partial_eval as jax_pe
from jax._src.lax import lax as lax_internal
from jax._src.lax import slicing as lax_slicing


@contextlib.contextmanager
def _replaced(table, key, make):
    """table[key] (a rule table, or a class's / module's namespace via
    setattr when `table` is not a dict) becomes make(original)."""
    is_dict = isinstance(table, dict)
    original = table[key] if is_dict else getattr(table, key)
    new = make(original)
    if is_dict:
        table[key] = new
    else:
        setattr(table, key, new)
    jax.clear_caches()
    try:
        yield
    finally:
        if is_dict:
            table[key] = original
        else:
            setattr(table, key, original)
        jax.clear_caches()


# -- 1. a policy ignored for one primitive ---------------------------------

def _policy_ignores(prim):
    """remat2's partial evaluation never saves the output of `prim`, whatever
    the checkpoint's policy says (every other primitive asks the policy).

    Planted in remat_partial_eval (pe.custom_partial_eval_rules[remat_p]),
    which both jax.vjp (direct linearization falls back to the JVP rule plus
    partial evaluation for remat_p) and saved_residuals go through; a
    checkpoint nested in a checkpoint is split with the outer (wrapped)
    policy, as JAX does."""
    def wrap(policy):
        policy = policy or jax_adc.nothing_saveable

        def ignoring(p, *args, **params):
            if p is prim:
                return False
            return policy(p, *args, **params)
        return ignoring

    def make(original):
        def rule(trace, *tracers, **params):
            return original(trace, *tracers, **dict(params, policy=wrap(params["policy"])))
        return rule
    return _replaced(jax_pe.custom_partial_eval_rules, jax_adc.remat_p, make)


def policy_ignores_sin():
    """The policy is ignored for `sin`: remat2 never saves a sine (e.g. the
    sin(x) of cos's derivative under everything_saveable)."""
    return _policy_ignores(lax.sin_p)


# -- 2. a wrong derivative sign for one primitive, only at negative inputs --

@contextlib.contextmanager
def cos_jvp_sign_at_negative_inputs():
    """cos's JVP rule returns +sin(x)*t instead of -sin(x)*t where x < 0.

    cos has no linearization rule in jax 0.10.2 (sin has one), so jax.jvp,
    jax.vjp (direct linearization falls back to the JVP rule) and
    checkpointed bodies all use the planted rule."""
    def make(original):
        def rule(primals, tangents, **params):
            out, t = original(primals, tangents, **params)
            if type(t) is ad_util.Zero:
                return out, t
            x, = primals
            return out, lax.select(lax.lt(x, lax_internal._zero(x)), lax.neg(t), t)
        return rule
    with _replaced(jax_ad.primitive_jvps, lax.cos_p, make):
        yield


# -- 3. a batching rule that drops a dimension ------------------------------

@contextlib.contextmanager
def reduce_sum_batcher_drops_batch_dim():
    """reduce_sum's batching rule drops the batch dimension of its result: it
    returns batch member 0 as an unbatched value (vmap then broadcasts it,
    so shapes stay right and every member gets member 0's sum)."""
    def make(original):
        def rule(axis_data, batched_args, batch_dims, **params):
            out, dim = original(axis_data, batched_args, batch_dims, **params)
            if dim is None:
                return out, dim
            return lax_slicing.index_in_dim(out, 0, dim, keepdims=False), None
        return rule
    with _replaced(jax_batching.fancy_primitive_batchers, lax_internal.reduce_sum_p, make):
        yield


# -- 4. a name policy that saves the wrong names ----------------------------

@contextlib.contextmanager
def save_only_these_names_inverted():
    """jax.checkpoint_policies.save_only_these_names(*names) saves the names
    it was NOT given (and not the ones it was): the membership test is
    inverted. Also reaches save_from_both_policies(..., save_only_these_names(...))."""
    def make(original):
        def __call__(self, prim, *_, **params):
            if prim is jax_adc.name_p:
                return params["name"] not in self.saveable_names
            return False
        return __call__
    with _replaced(jax_adc.SaveOnlyTheseNames, "__call__", make):
        yield


# -- 5. a transpose that forgets an accumulation ----------------------------

@contextlib.contextmanager
def add_any_transpose_forgets_second_operand():
    """add_any (ad_util.add_jaxvals_p, the primitive that accumulates two
    tangent contributions, e.g. the two terms of mul's JVP) transposes to
    (ct, 0) instead of (ct, ct): the second contribution's cotangent is
    forgotten."""
    def make(original):
        def rule(ct, x, y, **params):
            cx, _ = original(ct, x, y, **params)
            return [cx, jax_ad.Zero(y.aval.to_ct_aval()) if jax_ad.is_undefined_primal(y) else None]
        return rule
    with _replaced(jax_ad.primitive_transposes, ad_util.add_jaxvals_p, make):
        yield


BUGS = {
    "policy_ignores_sin": policy_ignores_sin,
    "cos_jvp_sign_at_negative_inputs": cos_jvp_sign_at_negative_inputs,
    "reduce_sum_batcher_drops_batch_dim": reduce_sum_batcher_drops_batch_dim,
    "save_only_these_names_inverted": save_only_these_names_inverted,
    "add_any_transpose_forgets_second_operand": add_any_transpose_forgets_second_operand,
}


_PLANTED: list = []       # the bugs planted for the life of this process


def plant_from_environment() -> None:
    """Plant the bug named by $PLANTED_BUG (if any) for the rest of this
    process's life: a Ray `worker_process_setup_hook`, so that the workers
    of a Ray campaign run on the planted JAX (tests/test_ray_campaign.py).
    The context manager is kept (a collected generator would restore the rule)."""
    bug = os.environ.get("PLANTED_BUG", "none")
    if bug != "none" and not _PLANTED:
        plant = BUGS[bug]()
        plant.__enter__()
        _PLANTED.append(plant)


def main(argv=None) -> None:
    bug, path = (argv if argv is not None else sys.argv[1:])
    plant = contextlib.nullcontext if bug == "none" else BUGS[bug]
    with plant():
        runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    main()
