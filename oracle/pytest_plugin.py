"""pytest integration: `oracle.check` failures print as their report,
`pytest --oracle-repro-dir DIR` saves a reproducer for each of them, and
`pytest --oracle-backend NAME` runs JAX on that backend (cpu, gpu, tpu, ...)
in every oracle.check that names none.

Installed as a pytest11 entry point, so any test suite that has
remat-oracle installed gets it; the fixture `oracle_check` is
`oracle.check` with the repro directory filled in.
"""
from __future__ import annotations

import pytest

from oracle import backends as _backends
from oracle import checker as _check
from oracle.errors import InvalidArgument, Mismatch


def pytest_addoption(parser):
    group = parser.getgroup("oracle", "remat-oracle")
    group.addoption("--oracle-repro-dir", default=None, metavar="DIR",
                    help="write a standalone reproducer for every oracle.check Mismatch to DIR")
    group.addoption("--oracle-backend", default=None, metavar="NAME",
                    help="run JAX on this backend (cpu, gpu, tpu, ...) in oracle.check calls that name none")


def pytest_configure(config):
    directory = config.getoption("--oracle-repro-dir", default=None)
    if directory:
        _check.DEFAULT_REPRO_DIR = directory
    backend = config.getoption("--oracle-backend", default=None)
    if backend:
        try:
            _backends.resolve(backend)
        except InvalidArgument as e:
            raise pytest.UsageError(f"--oracle-backend {backend}: {e}") from None
        _backends.DEFAULT_BACKEND = backend


@pytest.fixture
def oracle_check(request):
    """oracle.check, saving reproducers to --oracle-repro-dir."""
    directory = request.config.getoption("--oracle-repro-dir", default=None)

    def run(fn, policy=None, *args, **options):
        options.setdefault("repro_dir", directory)
        return _check.check(fn, policy, *args, **options)
    return run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and isinstance(call.excinfo.value, Mismatch):
        mismatch = call.excinfo.value
        lines = [f"oracle.Mismatch in {item.nodeid}", str(mismatch).split("\nreproducer:\n")[0]]
        if mismatch.repro is not None and mismatch.repro.path:
            lines.append(f"reproducer written to {mismatch.repro.path}")
        else:
            lines.append("(run with --oracle-repro-dir DIR to save a standalone reproducer)")
        lines += list(getattr(mismatch, "__notes__", ()))   # e.g. Hypothesis' falsifying example
        report.longrepr = "\n".join(lines)
