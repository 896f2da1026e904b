"""docs/divergences.md: oracle/divergences.py's DIVERGENCES and NORMALIZATIONS
(imported without jax: the repros are text)."""
from __future__ import annotations

from tools.gen_docs.markdown import header

INTRO = [
    "Where jax 0.10.2 does not do what the spec says, and the difference is understood, it is "
    "recorded in [oracle/divergences.py](../oracle/divergences.py). `oracle.check` reports a "
    "disagreement that matches one of them as a *known divergence* in its `Report` (never "
    "hidden), and raises `Mismatch` for anything else (see [oracle.md](oracle.md)).", "",
    "Each divergence has a predicate as narrow as the defect: it holds only when JAX's answer "
    "is *exactly* what the named defect produces (computed by the spec with the defect "
    "modelled), never merely when the two differ. Each repro below is standalone: it runs "
    "with jax alone (a test runs them all). "
    "Part of the [documentation](index.md).",
]


def render_divergences() -> str:
    from oracle import divergences as dv
    out = [header("oracle/divergences.py (DIVERGENCES and NORMALIZATIONS)"),
           "# Known divergences of JAX from the spec", "", *INTRO, "",
           f"## Divergences ({len(dv.DIVERGENCES)})", ""]
    for d in dv.DIVERGENCES:
        out += [f"### `{d.name}`", "", d.reason, "",
                f"Predicate: `{d.applies.__name__}`.", "",
                "```python", dv.REPRO_PREAMBLE + d.repro.rstrip(), "```", ""]
    out += [f"## Normalizations ({len(dv.NORMALIZATIONS)})", "",
            "Naming differences of one implementation, undone before residual lists are compared "
            "(and reported as known divergences whenever they changed something).", ""]
    for n in dv.NORMALIZATIONS:
        out += [f"### `{n.name}`", "", n.reason, "", f"Applied by `{n.apply.__name__}`.", ""]
    return "\n".join(out).rstrip() + "\n"
