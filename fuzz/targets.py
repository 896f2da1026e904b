"""Hypothesis targeting (issue 14): in the nightly profile only, each
differential example reports three scores that Hypothesis' targeted
phase then pushes up: the nesting depth of its sub-programs (checkpoints
in jits in scans...), the number of residuals its backward pass saves
(the spec's count), and how many more or fewer residuals JAX saves under
remat2 than under remat3 (where the two implementations part, bugs in
one of them hide). In ci, targeting costs examples (Hypothesis spends
some on mutating the best ones) and the remat2/remat3 count costs JAX
traces, so it is off."""
from __future__ import annotations

from hypothesis import settings

import spec
from spec.ir import subprograms

TARGETED_PROFILES = frozenset({"nightly"})


def targeting() -> bool:
    """Whether the loaded Hypothesis profile is one that targets."""
    return getattr(settings, "_current_profile", None) in TARGETED_PROFILES


def nesting_depth(prog: spec.Program) -> int:
    """How deep sub-programs nest in `prog` (0: none)."""
    return max((1 + nesting_depth(body) for e in prog.eqns for _, body in subprograms(e.params)), default=0)


def residual_count(prog: spec.Program) -> int:
    """The number of residuals the spec's backward pass of `prog` saves
    (0 where it has no reverse mode)."""
    try:
        return len(spec.saved_residuals(prog))
    except NotImplementedError:     # a while loop: no reverse mode
        return 0


def remat_residual_difference(prog: spec.Program, args) -> int:
    """|#residuals JAX saves under remat2 - under remat3| for `prog` run
    by JAX (jax.ad_checkpoint.saved_residuals); 0 where JAX raises (what
    the differential properties report, not a score)."""
    import oracle
    from oracle.checker import implementation
    from oracle.properties import jax_residuals
    counts = []
    fn = oracle.to_jax(prog)
    for impl in ("remat2", "remat3"):
        try:
            with implementation(impl):
                counts.append(len(jax_residuals(fn, args)))
        except Exception:       # reported by the properties, if it matters
            return 0
    return abs(counts[0] - counts[1])


def aim(prog: spec.Program, args) -> dict:
    """Report the three scores to hypothesis.target (where `targeting()`);
    returns them (empty where not targeting)."""
    if not targeting():
        return {}
    from hypothesis import target
    scores = {"nesting depth": nesting_depth(prog), "residuals": residual_count(prog),
              "remat2 vs remat3 residuals": remat_residual_difference(prog, args)}
    for label, value in scores.items():
        target(float(value), label=label)
    return scores
