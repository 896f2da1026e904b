"""What the campaign found on pristine jax 0.10.2 once it checked the
drawn programs that bring something new (fuzz/novelty.py), each a known
divergence now, tested on its class and its neighbours:

* remat3 reverse mode raises `Expected cotangent type` for a checkpoint's
  unused value computed from a scan's stacked output (an input, found
  before; an output, new): the predicates hold for the class and not for
  the neighbours JAX differentiates (measured in the tests below);
* a cond branch's linearization saves a zero a JVP rule instantiated
  (pad's padding value, as in reduce_prod's product tree), as a jit's
  does: the residual check names the divergence for a cond, and finds
  nothing to explain at top level, where JAX and the spec agree."""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import oracle  # noqa: E402
from oracle.checker import implementation  # noqa: E402
from oracle.divergences import _unused_scanned_checkpoint_inputs, _unused_scanned_checkpoint_outputs  # noqa: E402
from oracle.from_jax import trace_jax  # noqa: E402


def _scanned(a):
    c, ys = lax.scan(lambda c, _: (jnp.sin(c), jnp.sin(c)), a, None, length=1)
    return c, ys


BODIES = {      # body -> whether its first output, unused, is computed from a scan's ys
    "ys element": (lambda a: (_scanned(a)[1][0], a * 2), True),
    "ys itself": (lambda a: (_scanned(a)[1], a), True),
    "carry": (lambda a: (_scanned(a)[0], a * 2), False),
    "no scan": (lambda a: (jnp.sin(a)[None], a * 2), False),
}


def _second_output_only(body):
    return lambda a: jax.checkpoint(body)(a)[1]


@pytest.mark.parametrize("label", sorted(BODIES))
def test_unused_scanned_output_predicate(label):
    body, expected = BODIES[label]
    prog = trace_jax(_second_output_only(body), np.float32(-0.5))
    assert _unused_scanned_checkpoint_outputs(prog) is expected
    assert not _unused_scanned_checkpoint_inputs(prog)


def test_a_used_scanned_output_is_not_the_class():
    body = BODIES["ys element"][0]
    prog = trace_jax(lambda a: sum(jax.checkpoint(body)(a)), np.float32(-0.5))
    assert not _unused_scanned_checkpoint_outputs(prog)


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
@pytest.mark.parametrize("label", sorted(BODIES))
def test_remat3_raises_exactly_for_the_class(label):
    body, expected = BODIES[label]
    f = _second_output_only(body)
    with implementation("remat3"):
        try:
            jax.grad(f)(np.float32(-0.5))
            raised = False
        except ValueError as e:
            assert "Expected cotangent type" in str(e)
            raised = True
    assert raised is expected


def _pad_then_scale(x):
    return lax.pad(x, np.float32(1.0), ((0, 1, 0),)).sum() * x


@pytest.mark.skipif(jax.__version__ != "0.10.2", reason="measured on jax 0.10.2")
def test_a_cond_branch_saves_an_instantiated_zero():
    x = np.ones(3, np.float32)
    in_cond = lambda x: lax.cond(x.sum() > 0, _pad_then_scale, lambda x: x, x)   # noqa: E731
    report = oracle.check(in_cond, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    assert [n for n, _, _ in report.known_divergences] == ["cond-linearize-saves-an-instantiated-zero"]
    top = oracle.check(_pad_then_scale, oracle.AS_IS, x, implementations=("remat2",), properties=("residuals",))
    assert not top.known_divergences and {r.status for r in top.results} == {"ok"}
