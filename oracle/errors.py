"""The oracle's errors: every exception that leaves `oracle.check` is one
of these, or the user's own code (function or policy) raising."""


class InvalidArgument(Exception):
    """oracle.check was called wrongly (a junk policy, arguments that do not
    fit the function, an unknown property, ...). The message says what was
    given and what is accepted."""


class Unsupported(Exception):
    """A JAX program uses something the spec does not model. The message
    names it, says where it occurs in the user's code, and what is supported."""


class Mismatch(AssertionError):
    """JAX disagrees with the spec on a checked property (not a known
    divergence). `failed` lists every (property, implementation) that
    differs, the first one's reproducer in `repro`."""

    def __init__(self, message, report=None, repro=None, failed=()):
        super().__init__(message)
        self.report = report
        self.repro = repro
        self.failed = tuple(failed)
