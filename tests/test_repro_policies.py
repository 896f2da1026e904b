"""Reproducers write a fuzzer user policy (fuzz.strategies.SavePrimitives)
out as JAX source that answers as the spec policy does."""
import pytest

jax = pytest.importorskip("jax")

from jax import lax  # noqa: E402
from jax._src.ad_checkpoint import name_p  # noqa: E402

from fuzz.strategies import SavePrimitives  # noqa: E402
from oracle.repro import _policy_source  # noqa: E402


def test_save_primitives_policy_is_written_out():
    policy = SavePrimitives(frozenset({"sin", "dot_general"}), names=frozenset({"h"}))
    src = _policy_source(policy)
    assert "user_policy" not in src
    jax_policy = eval(src)
    assert jax_policy(lax.sin_p) is True
    assert jax_policy(lax.dot_general_p) is True
    assert jax_policy(lax.cos_p) is False
    assert jax_policy(name_p, name="h") is True
    assert jax_policy(name_p, name="g") is False
