import fuzz.profiles  # noqa: F401  (registers and loads the Hypothesis profiles)
