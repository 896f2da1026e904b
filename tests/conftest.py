"""The test helpers in tests/ (program tables, recorders, recording_format)
import each other by module name: make tests/ importable whatever the
rootdir and import mode."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def skip_unless_recorded_release(recording: dict):
    """A recording (tests/recordings/*.json) holds JAX's answers on the
    release it names (`jax_version`): re-recording it on another release
    (the release matrix, `make test-jax`) answers for that release, so a
    freshness test skips there, saying why. Every test that compares the
    spec with the recorded answers still runs (they need no JAX)."""
    import pytest
    jax = pytest.importorskip("jax")
    if jax.__version__ != recording["jax_version"]:
        pytest.skip(f"the recording is of jax {recording['jax_version']}; jax {jax.__version__} is "
                    f"installed (re-record on that release to compare)")


def pytest_collection_modifyitems(config, items):
    """`slow` tests directly in tests/ (whole campaigns in subprocesses) are
    skipped unless asked for: `make test-slow` (CI runs it), `-m slow` or
    RUN_SLOW_TESTS=1. tests/models has its own (tests/models/conftest.py)."""
    from slow_marks import skip_slow_items
    skip_slow_items(config, [i for i in items if os.path.dirname(str(i.path)) == HERE], HERE,
                    "RUN_SLOW_TESTS", "test")
