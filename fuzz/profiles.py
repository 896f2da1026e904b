"""Hypothesis profiles: `ci` (the default under `pytest fuzz/`: derandomised,
the whole fuzz directory in a few minutes on 2 cores), `dev` and `nightly`
(thousands of examples). Select with `--hypothesis-profile NAME` (or the
HYPOTHESIS_PROFILE environment variable). Failing examples are kept in
Hypothesis' example database (.hypothesis/) in dev and nightly."""
import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])

settings.register_profile("ci", max_examples=60, derandomize=True, database=None, **_COMMON)
settings.register_profile("dev", max_examples=200, **_COMMON)
settings.register_profile("nightly", max_examples=5000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# the differential properties compile with XLA (one jit per example and
# implementation, and a second for a linearize stack): as many examples as
# the others; about 2 s each on 2 cores
DIFFERENTIAL_FRACTION = 1


def differential_examples() -> int:
    return max(10, settings.default.max_examples // DIFFERENTIAL_FRACTION)
