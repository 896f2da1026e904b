"""tests/jax_corpus: `slow` corpus cases are skipped unless asked for.

The default run checks the cases that together cover every pattern of the
corpus within about two minutes on two cores; the others (scans and conds
under several policies, the larger programs) are marked `slow`:

    pytest tests/jax_corpus -m slow             # the slow cases only
    RUN_SLOW_JAX_CORPUS=1 pytest tests/jax_corpus  # every case
"""
from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _slow_selected(config) -> bool:
    if os.environ.get("RUN_SLOW_JAX_CORPUS", "") not in ("", "0"):
        return True
    expr = config.getoption("markexpr", default="") or ""
    return "slow" in expr and "not slow" not in expr


def pytest_collection_modifyitems(config, items):
    if _slow_selected(config):
        return
    skip = pytest.mark.skip(reason="slow corpus case (run with -m slow or RUN_SLOW_JAX_CORPUS=1)")
    for item in items:
        if item.get_closest_marker("slow") is not None and str(item.path).startswith(HERE + os.sep):
            item.add_marker(skip)
