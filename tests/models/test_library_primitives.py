"""The model libraries' own primitives (equinox's), bound as the spec's
emitters bind them, against the library version installed beside the
release: values against the examples' numpy references, the jaxpr's round
trip, and oracle.check. A library whose primitives take their params in
another form (equinox 0.11.3's dicts, 0.13's tuples of items) shows here
(found by a campaign on jax 0.4.25 with equinox 0.11.3: maybe_set's impl
spread a tuple)."""
from __future__ import annotations

import pytest

pytest.importorskip("equinox", reason="the real-model suite needs equinox (pip install -e '.[test]')")

from spec.core import jax_facts  # noqa: E402
import test_primitive_examples as examples  # noqa: E402

LIBRARY = [(i, (p, ex)) for i, (p, ex) in zip(examples.IDS, examples.EXAMPLES)
           if p in jax_facts and "equinox" in jax_facts[p].emitter]


def test_the_library_primitives_have_examples():
    assert {p.name for _, (p, _) in LIBRARY} >= {"maybe_set", "vprim", "select_if_vmap"}, LIBRARY


@pytest.mark.parametrize("prim,ex", [pe for _, pe in LIBRARY], ids=[i for i, _ in LIBRARY])
def test_library_primitive_agrees(prim, ex):
    examples.test_jax_agrees(prim, ex)
