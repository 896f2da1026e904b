"""docs/divergences.md: oracle/divergences.py's DIVERGENCES and NORMALIZATIONS
(imported without jax: the repros are text)."""
from __future__ import annotations

from tools.gen_docs.markdown import header

INTRO = [
    "Where JAX (0.10.2, or an older release from 0.4.25 on) does not do what the spec says, and the difference is understood, it is "
    "recorded in [oracle/divergences.py](../oracle/divergences.py). `oracle.check` reports a "
    "disagreement that matches one of them as a *known divergence* in its `Report` (never "
    "hidden), and raises `Mismatch` for anything else (see [oracle.md](oracle.md)).", "",
    "Each divergence has a predicate as narrow as the defect: it holds only when JAX's answer "
    "is *exactly* what the named defect produces (computed by the spec with the defect "
    "modelled), never merely when the two differ. Each repro below is standalone: it runs "
    "with jax alone (a test runs them all). "
    "Part of the [documentation](index.md).",
]


RELEASES_INTRO = [
    "Each entry holds for a range of JAX releases (`releases` in oracle/divergences.py; the "
    "upstream commits that introduced and fixed it are named in its reason) and is applied "
    "only there; one that also needs a JAX flag on (a semantics switch, such as direct "
    "linearization, on by default from 0.7.0) says so. tests/test_divergences.py runs each "
    "repro on the installed release and checks both directions: it shows the divergence "
    "exactly where the entry is active (`make test-jax JAX=<release>` runs it per release; "
    "checked on 0.4.25, 0.4.36, 0.6.2 and 0.10.2).",
]


def _flag(d) -> str:
    return "" if d.flag is None else f"{d.flag} {'on' if d.flag_value else 'off (or absent)'}"


def _releases_table(dv, normalizations) -> list[str]:
    rows = ["| entry | kind | JAX releases | flag |", "|---|---|---|---|"]
    rows += [f"| `{d.name}` | divergence | {d.releases} | {_flag(d)} |" for d in dv.DIVERGENCES]
    rows += [f"| `{n.name}` | normalization | {n.releases} | |" for n in normalizations.NORMALIZATIONS]
    return rows


def render_divergences() -> str:
    from oracle import divergences as dv, normalizations
    out = [header("oracle/divergences.py (DIVERGENCES) and oracle/normalizations.py (NORMALIZATIONS)"),
           "# Known divergences of JAX from the spec", "", *INTRO, "",
           "## Releases", "", *RELEASES_INTRO, "", *_releases_table(dv, normalizations), "",
           f"## Divergences ({len(dv.DIVERGENCES)})", ""]
    for d in dv.DIVERGENCES:
        out += [f"### `{d.name}`", "", d.reason, "",
                f"JAX releases: {d.releases}" + (f", with {_flag(d)}" if d.flag else "") + ".", "",
                f"Predicate: `{d.applies.__name__}`.", "",
                "```python", dv.REPRO_PREAMBLE + d.repro.rstrip(), "```", ""]
    out += [f"## Normalizations ({len(normalizations.NORMALIZATIONS)})", "",
            "Naming differences of one implementation, undone before residual lists are compared "
            "(and reported as known divergences whenever they changed something).", ""]
    for n in normalizations.NORMALIZATIONS:
        out += [f"### `{n.name}`", "", n.reason, "", f"JAX releases: {n.releases}.", "",
                f"Applied by `{n.apply.__name__}`.", ""]
    return "\n".join(out).rstrip() + "\n"
