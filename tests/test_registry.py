"""Registry completeness: every primitive is one block with every rule and
every fact other layers need (spec/core.py's registries).

* rules: shape, eval, JVP and batching (tests/test_batching.py), transpose
  for the linear ones (ditto);
* JaxFacts: JAX's name, and an emitter whose source compiles, except for the
  primitives the oracle binds structurally (sub-programs: call, remat,
  scan, cond, while, custom rules);
* examples: registered Examples (checked by tests/test_primitive_examples.py
  and tests/test_batching.py), or the primitive's own test module
  (OWN_TESTS: sub-programs, names, offloading).
"""
from __future__ import annotations

import pytest

import spec
from spec.core import examples, jax_facts

STRUCTURAL = {"call", "remat", "scan", "cond", "while", "custom_jvp_call", "custom_vjp_call",
              "custom_lin", "reduce_window", "remat_opt", "custom_linear_solve"}
OWN_TESTS = {"remat": "test_remat.py", "scan": "test_scan.py",
             "cond": "test_control.py", "while": "test_control.py", "custom_jvp_call": "test_custom_rules.py",
             "custom_vjp_call": "test_custom_rules.py", "custom_lin": "test_custom_rules.py",
             "remat_opt": "test_custom_rules.py", "custom_linear_solve": "test_prims_linear_solve.py",
             "device_put": "test_batching.py", "name": "test_remat.py",
             # named collectives: defined only under spec.vmap(..., axis_name=...), which no
             # Example (evaluated, and run by JAX, unbatched) can express
             "all_gather": "test_prims_collective.py", "reduce_scatter": "test_prims_collective.py",
             "axis_index": "test_prims_collective.py"}


@pytest.mark.parametrize("name", sorted(spec.primitives))
def test_every_primitive_has_jax_facts(name):
    p = spec.primitives[name]
    assert p in jax_facts, f"primitive {name!r} has no JaxFacts (spec.core.jax_facts)"
    facts = jax_facts[p]
    if name in STRUCTURAL:
        assert facts.emitter == "", f"{name} is bound structurally: its emitter is not used"
    else:
        assert facts.emitter, f"primitive {name!r} has no JAX emitter"
        compile(facts.emitter, f"<emitter of {name}>", "eval")


@pytest.mark.parametrize("name", sorted(spec.primitives))
def test_every_primitive_has_examples_or_own_tests(name):
    p = spec.primitives[name]
    assert p in examples or name in OWN_TESTS, (
        f"primitive {name!r} has no Example (spec.core.examples) and no own test module (OWN_TESTS)")


def test_own_tests_are_not_stale():
    """A primitive with Examples needs no OWN_TESTS entry."""
    assert not [n for n in OWN_TESTS if spec.primitives[n] in examples]
