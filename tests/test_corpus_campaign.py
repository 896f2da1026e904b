"""The corpus phase of a campaign (fuzz/cli.py `_corpus_phase`): each
worker checks its share of fuzz/corpus.py before drawing programs. On
pristine JAX it reports every case checked or refused as expected and no
finding; with a bug planted it reports the first failing case as a
finding whose repro.py is valid Python and names the case."""
from __future__ import annotations

import ast

import pytest

jax = pytest.importorskip("jax")

from planted_bugs import BUGS  # noqa: E402

from fuzz import cli  # noqa: E402
from fuzz.corpus import CASES, by_name, seeds  # noqa: E402

FAR = 1e12          # a deadline that never comes


class _Messages(list):
    def put(self, message):
        self.append(message)


def _phase(names, *, fail_fast=True, max_examples=10 ** 9):
    results = _Messages()
    checked, found = cli._corpus_phase(0, tuple(names), FAR, max_examples, results, fail_fast)
    return checked, found, results


def test_seeds_are_every_case_fast_first():
    order = seeds()
    assert sorted(c.name for c in order) == sorted(c.name for c in CASES)
    slow = [c.slow for c in order]
    assert slow == sorted(slow)                 # no fast case after a slow one
    assert by_name(order[0].name) is order[0]
    with pytest.raises(KeyError, match="no corpus case"):
        by_name("no-such-case")


def test_pristine_cases_are_checked_without_a_finding():
    names = [c.name for c in seeds()[:6]]
    checked, found, messages = _phase(names)
    assert not found
    kinds = [k for k, _, _ in messages]
    assert kinds.count("start") == len(names)
    assert checked == kinds.count("checked") and checked + kinds.count("idle") == len(names)
    # a result's status, or a naming normalisation, or the name of a known
    # divergence or normalisation met (fuzz.cli.KNOWN_AS)
    assert all(status in ("ok", "known divergence", "not compared", "not applicable", "naming normalised")
               or status.startswith(cli.KNOWN_AS)
               for k, _, payload in messages if k == "checked" for _, _, status in payload)


def test_the_phase_stops_at_max_examples():
    checked, _, messages = _phase([c.name for c in seeds()[:5]], max_examples=2)
    assert checked == 2 and [k for k, _, _ in messages].count("start") == 2


# slow (over 10 s): `make test-slow` runs it (CI does), keeping `make test` within its ten minutes
@pytest.mark.slow
def test_a_planted_bug_is_a_finding_of_a_corpus_case():
    """policy_ignores_sin: remat2 never saves a sine; some fast case whose
    policy saves one fails, and the phase stops there (fail-fast)."""
    with BUGS["policy_ignores_sin"]():
        checked, found, messages = _phase([c.name for c in seeds() if not c.slow])
    assert found
    findings = [payload for k, _, payload in messages if k == "finding"]
    assert len(findings) == 1 and messages[-1][0] == "finding"
    f = findings[0]
    case_name = f["key"].split("corpus:", 1)[1]
    assert by_name(case_name).name in f["program"] and "after jax-ml/jax tests/" in f["program"]
    assert f["property"] != "error" and f["implementation"] == "remat2", f
    ast.parse(f["repro"])
    assert "jax" in f["repro"]


def test_the_campaign_summary_names_the_known_divergences_it_met(capsys):
    """The summary lists the known divergences by name, most met first (on
    an old release: the historic bugs the campaign rediscovered), from the
    `known as NAME` statuses the workers send; none where there were none."""
    import collections

    from fuzz import cli

    counts = collections.Counter({("residuals", "remat2", "ok"): 5,
                                  ("residuals", "remat2", "known divergence"): 3,
                                  ("residuals", "remat2", cli.KNOWN_AS + "atan2-jvp-divides-the-product"): 1,
                                  ("vjp", "remat2", cli.KNOWN_AS + "custom-vjp-saves-its-output"): 2})
    cli._summary(counts, 8, 1.0, {}, [])
    out = capsys.readouterr().out
    assert ("known divergences and naming normalisations by name:\n       2  custom-vjp-saves-its-output\n"
            "       1  atan2-jvp-divides-the-product\n") in out
    cli._summary(collections.Counter({("vjp", "remat2", "ok"): 1}), 1, 1.0, {}, [])
    assert "by name" not in capsys.readouterr().out


@pytest.mark.slow
def test_each_reproducer_is_run_in_a_fresh_interpreter(tmp_path):
    """A campaign runs each finding's repro.py in a fresh interpreter and
    says in the report whether it fails there: a finding that depended on
    the worker's state (its reproducer passes) is told apart (a nightly
    finding, a5d9afc3be, did not fail alone)."""
    scripts = {"fails": "raise AssertionError('values differ from the spec')\n", "passes": "print('ok')\n",
               "slow": "import time\ntime.sleep(30)\n"}
    for name, text in scripts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "repro.py").write_text(text)
        (tmp_path / name / "report.md").write_text("# Finding\n")
    (tmp_path / "hang").mkdir()                      # a hang: no reproducer, nothing said
    (tmp_path / "hang" / "report.md").write_text("# Finding\n")
    cli._reproducers_checked([str(tmp_path / n) for n in ("fails", "passes", "hang", "slow")], budget_s=8)
    report = {n: (tmp_path / n / "report.md").read_text() for n in ("fails", "passes", "hang", "slow")}
    assert "fresh interpreter: fails (exit 1: AssertionError: values differ from the spec)" in report["fails"]
    assert "fresh interpreter: PASSES" in report["passes"]
    assert report["hang"] == "# Finding\n"
    assert "fresh interpreter: no exit within" in report["slow"] or "not run" in report["slow"]


def test_a_long_campaign_gives_each_reduction_more_time():
    """A finding's reduction gets 60 s (fuzz/focus.py REDUCE_SECONDS) in a
    short campaign and 3% of a long one, up to 4 minutes: a nightly's
    reductions under a transformation stack ran out of 60 s at 10-12
    equations."""
    from fuzz.focus import REDUCE_SECONDS
    assert cli.reduction_budget(2) == REDUCE_SECONDS
    assert cli.reduction_budget(95) == pytest.approx(171.0)
    assert cli.reduction_budget(600) == 240.0
