"""Drawn float32 programs, run by JAX (remat2 and remat3) and checked
against the spec by oracle.check: values, JVP, VJP, vmap, second order,
residual sets, vjp leaves and prevent_cse barriers."""
import pytest
from hypothesis import given, settings

pytest.importorskip("jax")   # only the import may skip

from fuzz import profiles, properties  # noqa: E402
from fuzz.strategies import programs  # noqa: E402


@settings(max_examples=profiles.differential_examples())
@given(programs())
def test_jax_agrees_with_the_spec(prog):
    properties.oracle_agrees(prog)
