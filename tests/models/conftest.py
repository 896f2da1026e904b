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

from slow_marks import skip_slow_items

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    skip_slow_items(config, items, HERE, "RUN_SLOW_MODEL_CHECKS", "model check")
