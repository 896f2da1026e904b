"""tests/models: `slow` model checks are skipped unless asked for.

The full matrix (every model under every policy) takes many minutes on a
2-core machine (XLA:CPU compiles each check's programs, a convolution's
derivatives and batched forms separately); the default run checks every
model under one policy (test_models.DEFAULT_POLICY rotates them, so every
policy is covered by default) and marks the other pairs `slow`. Run them with

    pytest tests/models -m slow          # the slow pairs only
    RUN_SLOW_MODEL_CHECKS=1 pytest tests/models      # everything
"""
from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _slow_selected(config) -> bool:
    if os.environ.get("RUN_SLOW_MODEL_CHECKS", "") not in ("", "0"):
        return True
    expr = config.getoption("markexpr", default="") or ""
    return "slow" in expr and "not slow" not in expr


def pytest_collection_modifyitems(config, items):
    if _slow_selected(config):
        return
    skip = pytest.mark.skip(reason="slow model check (run with -m slow or RUN_SLOW_MODEL_CHECKS=1)")
    for item in items:
        if item.get_closest_marker("slow") is not None and str(item.path).startswith(HERE + os.sep):
            item.add_marker(skip)
