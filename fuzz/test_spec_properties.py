"""Spec self-consistency on drawn float64 programs (no JAX)."""
import numpy as np
from hypothesis import given

from fuzz import properties
from fuzz.strategies import policies, programs

F64 = programs(dtype=np.float64)


@given(programs(dtype=np.float64, stop_gradient=False))   # finite differences see through stop_gradient
def test_jvp_matches_finite_differences(prog):
    properties.jvp_matches_finite_differences(prog)


@given(F64)
def test_vjp_is_transpose_of_jvp(prog):
    properties.vjp_is_transpose_of_jvp(prog)


@given(F64)
def test_vmap_matches_loop(prog):
    properties.vmap_matches_loop(prog)


@given(F64, policies())
def test_remat_is_invariant(prog, policy):
    properties.remat_is_invariant(prog, policy)
