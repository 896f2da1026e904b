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

# Each differential example is a whole oracle.check (every property, both
# implementations, a drawn spelling and stack of transformations; ~0.4-1 s
# of CPU): 2.5 times the others, 150 in ci (issue 14's budget: at least 150
# differential programs in `pytest fuzz/`; measured 100 s for the test alone
# on pristine jax 0.10.2, beside other work; the nightly profile draws
# thousands).
DIFFERENTIAL_FACTOR = 2.5


def differential_examples() -> int:
    return max(10, round(settings.default.max_examples * DIFFERENTIAL_FACTOR))
