"""`slow` tests of a folder, skipped unless asked for: by `-m slow` (a
marker expression selecting them) or an environment variable set to 1."""
from __future__ import annotations

import os

import pytest


def slow_selected(config, env_var: str) -> bool:
    if os.environ.get(env_var, "") not in ("", "0"):
        return True
    expr = config.getoption("markexpr", default="") or ""
    return "slow" in expr and "not slow" not in expr


def skip_slow_items(config, items, directory: str, env_var: str, what: str) -> None:
    """Mark every `slow` item under `directory` skipped, unless selected."""
    if slow_selected(config, env_var):
        return
    skip = pytest.mark.skip(reason=f"slow {what} (run with -m slow or {env_var}=1)")
    for item in items:
        if item.get_closest_marker("slow") is not None and str(item.path).startswith(directory + os.sep):
            item.add_marker(skip)
