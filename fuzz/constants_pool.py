"""The fuzzer's draws replay from the seed alone: Hypothesis' pool of local
constants is pinned empty.

Hypothesis (6.131 on; 6.170.17 pinned here) answers one integer, float or
string choice in twenty with a constant from a pool: its own global
constants and those found in the source of every *local* module (not
site-packages, not the standard library) imported at draw time
(`hypothesis.internal.conjecture.providers._get_local_constants`, rescanned
whenever `sys.modules` grows). So a derandomised draw depended on which
modules the process had imported: `pytest fuzz/` drew a dots-policy region
with a batched dot in 0 of fuzz/test_branches.py's 1,025 programs, where
`pytest tests fuzz`, having imported tests/, drew it in 7; a campaign seed
replayed under pytest drew other programs than under `remat-oracle fuzz`.
The fuzzer's strategies draw dtypes, shapes and parameters from its own
tables, so the local pool adds nothing it needs; with it pinned empty, a
seed (and the ci profile's derandomised run) draws the same programs in
every process. The pin is process-wide: other Hypothesis tests in a
process that imports the fuzzer draw without local constants too.
"""
from __future__ import annotations

from hypothesis.internal.conjecture import providers


def _empty_pool() -> providers.Constants:
    return providers.Constants()


# Hypothesis' own pool function, kept so that fuzz/test_constants_pool.py can
# show what pinning changes
hypothesis_local_constants = providers._get_local_constants


def pin_local_constants_empty() -> None:
    """Make Hypothesis' local-constant pool empty for the rest of the
    process (its global constants stay), dropping the permitted values it
    cached from the old pool."""
    providers._get_local_constants = _empty_pool
    providers.CONSTANTS_CACHE.cache.clear()
