"""Witnesses: one tiny jax-only check per mutant (same name as the mutant).

A witness passes on pristine jax and fails (AssertionError, or any error)
under its mutant: it proves the mutant is observable, so that a mutant the
fuzzer does not kill is a real miss, not an equivalent mutant. Witnesses use
jax and numpy only (no spec, no oracle), in float64, against closed-form
answers, finite differences, numpy loops, or what pristine jax saves as
residuals (`kinds`). Helpers are in witness_lib.py.

    python -m benchmarks.mutation.witnesses NAME     # exit 0: passed, 1: failed,
                                                     # 3: jax itself does not import
"""
from __future__ import annotations

import sys
import traceback

import numpy as np

from benchmarks.mutation.witness_lib import (WITNESSES, _grad_hlo, _jax, _np, barrier_operands, close,
                                             kinds, remat3, witness, xs)


# -- remat2 -------------------------------------------------------------------

@witness
def r2_dots_saveable_drops_conv():
    jax, jnp, lax, _, cp = _np()
    x, w = jnp.ones((1, 1, 4, 4)) * 0.3, jnp.ones((1, 1, 2, 2)) * 0.2
    f = lambda x, w: jnp.sin(lax.conv(x, w, (1, 1), "VALID"))
    assert "conv_general_dilated" in kinds(jax.checkpoint(f, policy=cp.dots_saveable), x, w)


@witness
def r2_no_batch_dims_inverted():
    jax, jnp, _, _, cp = _np()
    a, b = jnp.ones((2, 3)) * 0.3, jnp.ones((3, 4)) * 0.2
    f = jax.checkpoint(lambda a, b: jnp.sin(a @ b), policy=cp.dots_with_no_batch_dims_saveable)
    assert "dot_general" in kinds(f, a, b)


@witness
def r2_everything_saveable_false():
    jax, jnp, _, _, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)), policy=cp.everything_saveable)
    assert "cos" in kinds(f, xs())


def _two_names(x):
    _, jnp, _, name, _ = _np()
    return jnp.sin(name(jnp.sin(x), "a")) * jnp.cos(name(jnp.cos(x), "b"))


@witness
def r2_names_but_these_inverted():
    jax, _, _, _, cp = _np()
    got = kinds(jax.checkpoint(_two_names, policy=cp.save_any_names_but_these("b")), xs())
    assert "name:a" in got and "name:b" not in got, got


@witness
def r2_both_policies_and():
    jax, jnp, _, name, cp = _np()
    pol = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("a"))
    f = jax.checkpoint(lambda x, w: jnp.sin(name(jnp.sin(x @ w), "a")), policy=pol)
    got = kinds(f, jnp.ones((2, 3)) * 0.2, jnp.ones((3, 2)) * 0.3)
    assert "dot_general" in got and "name:a" in got, got


@witness
def r2_default_policy_saves_all():
    jax, jnp, _, _, _ = _np()
    assert kinds(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x))), xs()) == ["arg"]


@witness
def r2_residual_half_precision():
    jax, jnp, _, _, cp = _np()
    f = lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x))
    g = jax.grad(jax.checkpoint(f, policy=cp.everything_saveable))
    close(g(xs()), jax.grad(f)(xs()), 1e-12)


@witness
def r2_staged_not_differentiated():
    jax, jnp, _, _, _ = _np()
    assert "optimization_barrier" in _grad_hlo(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x))), xs())


def _linearized_hlo(f, x):
    jax = _jax()
    return jax.jit(lambda x, t: jax.linearize(f, x)[1](t)).lower(x, x).as_text()


@witness
def r2_jvp_tangents_unbarriered():
    jax, jnp, _, _, _ = _np()
    body = lambda x: jnp.sin(jnp.sin(x))   # linearized (not transposed): the tangents are staged
    whole = barrier_operands(_linearized_hlo(jax.checkpoint(body, prevent_cse=True), xs()))
    tupled = barrier_operands(_linearized_hlo(jax.checkpoint(body, prevent_cse=(True,)), xs()))
    assert whole == 2 and tupled == whole, (whole, tupled)


@witness
def r2_name_jvp_drops_name():
    jax, jnp, _, name, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sin(name(jnp.sin(x), "a")), policy=cp.save_only_these_names("a"))
    assert "name:a" in kinds(f, xs())


@witness
def r2_name_batcher_drops_name():
    jax, jnp, _, name, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sin(name(jnp.sin(x), "a")), policy=cp.save_only_these_names("a"))
    assert "name:a" in kinds(jax.vmap(f), jnp.ones((2, 3)) * 0.7)


@witness
def r2_saved_residuals_no_subst():
    jax, jnp, _, _, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sin(x) * jnp.cos(x), policy=cp.everything_saveable)
    got = kinds(f, xs())
    assert "reduce_precision" not in got and "sin" in got, got


def _vmap_two_outputs(checkpoint):
    jax, jnp, _, _, _ = _np()
    f = checkpoint(lambda x, y: (jnp.sin(x), jnp.cos(y)))
    X, y = jnp.ones((2, 3)) * 0.4, xs(4)
    a, b = jax.vmap(f, in_axes=(0, None))(X, y)
    close(a, np.sin(X))
    close(b, np.broadcast_to(np.cos(y), (2, 4)))


@witness
def r2_vmap_unbatched_claimed():
    _vmap_two_outputs(_jax().checkpoint)


# -- remat3 -------------------------------------------------------------------

@witness
def r3_names_but_these_inverted():
    remat3()
    jax, _, _, _, cp = _np()
    got = kinds(jax.checkpoint(_two_names, policy=cp.save_any_names_but_these("b")), xs())
    assert "name:a" in got and "name:b" not in got, got


@witness
def r3_everything_saveable_names_recomputed():
    remat3()
    jax, _, _, _, cp = _np()
    got = kinds(jax.checkpoint(_two_names, policy=cp.everything_saveable), xs())
    assert "name:a" in got and "name:b" in got, got


@witness
def r3_saved_name_tangent_from_residual():
    remat3()
    jax, jnp, _, name, cp = _np()
    f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(name(jnp.sin(x), "a"))),
                       policy=cp.save_only_these_names("a"))
    close(jax.grad(f)(xs()), np.cos(np.sin(xs())) * np.cos(xs()))


@witness
def r3_saved_dot_tangent_swapped():
    remat3()
    jax, jnp, _, _, cp = _np()
    w = jnp.ones((3, 2)) * 0.3
    f = lambda x: jnp.sum(jnp.sin(x @ w))
    close(jax.grad(jax.checkpoint(f, policy=cp.dots_saveable))(xs()), jax.grad(f)(xs()))


@witness
def r3_bwd_without_barrier():
    remat3()
    jax, jnp, _, _, _ = _np()
    assert "optimization_barrier" in _grad_hlo(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x))), xs())


@witness
def r3_recompute_reads_forward():
    remat3()
    jax, jnp, _, _, _ = _np()
    f = jax.checkpoint(lambda x: jnp.sum(jnp.sin(jnp.sin(x))))
    close(jax.grad(f)(xs()), np.cos(np.sin(xs())) * np.cos(xs()))


@witness
def r3_batch_unbatched_claimed():
    remat3()
    _vmap_two_outputs(_jax().checkpoint)


from benchmarks.mutation import witnesses_rules  # noqa: E402,F401  (registers the other classes)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name, = argv
    try:
        import jax
        print(f"jax from {jax.__file__}")
    except Exception:
        traceback.print_exc()
        return 3
    try:
        WITNESSES[name]()
    except Exception:
        traceback.print_exc()
        print(f"witness {name}: FAILED")
        return 1
    print(f"witness {name}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
