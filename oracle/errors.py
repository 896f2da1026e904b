"""The oracle's errors."""


class Unsupported(Exception):
    """A JAX program uses something the spec does not model. The message
    names it, says where it occurs in the user's code, and what is supported."""


class Mismatch(AssertionError):
    """JAX disagrees with the spec on a checked property (not a known divergence)."""

    def __init__(self, message, report=None, repro=None):
        super().__init__(message)
        self.report = report
        self.repro = repro
