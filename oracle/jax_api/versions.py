"""JAX release ranges: the releases a known divergence or a naming
normalisation holds for. Ranges annotate catalogue entries (each verified
by running its repro on the releases); code never branches on a version
number to reach an API (that is what capabilities are for)."""
from __future__ import annotations

import re
from dataclasses import dataclass


def parse(version: str) -> tuple:
    """'0.4.36' -> (0, 4, 36); a suffix (.dev, rc) is dropped."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("rc")[0].split(".dev")[0])[:3])


@dataclass(frozen=True)
class Releases:
    """The releases from `first` up to, not including, `fixed` (None: still
    present in the newest release checked); and those of `again`, a later
    range where a behaviour that went came back (a regression)."""
    first: str = "0.4.25"
    fixed: str | None = None
    again: "Releases | None" = None

    def __contains__(self, version: str) -> bool:
        v = parse(version)
        return (parse(self.first) <= v and (self.fixed is None or v < parse(self.fixed))
                or self.again is not None and version in self.again)

    def __str__(self):
        return (f">= {self.first}" + (f", < {self.fixed}" if self.fixed else "")
                + (f"; {self.again}" if self.again is not None else ""))


ALL = Releases()
REMAT3 = Releases("0.10.2")      # jax_remat3 exists from 0.10.2 (jax-ml/jax bf1e6d9b49)


def installed() -> str:
    import jax
    return jax.__version__


def holds(releases: Releases) -> bool:
    """The installed release is in `releases`."""
    return installed() in releases
