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

# The differential property is the one that finds JAX's bugs: each example
# is a whole oracle.check (every property, both implementations, a drawn
# spelling and stack of transformations; ~2 s on 2 cores), so it gets 2.5x
# the profile's examples: 150 in ci, where the spec-only properties take
# 60 of a few milliseconds each.
DIFFERENTIAL_FACTOR = 2.5


def differential_examples() -> int:
    return max(10, round(settings.default.max_examples * DIFFERENTIAL_FACTOR))
