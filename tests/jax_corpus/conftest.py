"""tests/jax_corpus: `slow` corpus cases are skipped unless asked for.

The default run checks the cases that together cover every pattern of the
corpus within about two minutes on two cores; the others (scans and conds
under several policies, the larger programs) are marked `slow`:

    pytest tests/jax_corpus -m slow             # the slow cases only
    RUN_SLOW_JAX_CORPUS=1 pytest tests/jax_corpus  # every case
"""
from __future__ import annotations

import os

from slow_marks import skip_slow_items

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    skip_slow_items(config, items, HERE, "RUN_SLOW_JAX_CORPUS", "corpus case")
