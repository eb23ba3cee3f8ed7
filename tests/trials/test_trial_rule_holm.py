"""A pre-registered decision rule over several contrasts (``compare.decision.contrasts``): the
two-sided paired t-test's p-value (Student's t CDF written out, scipy not being a runtime
dependency), Holm's step-down, each verdict, the config's checks, the report's text from
synthetic held-out records, and the single-comparison rule's report left as it was."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bots_rft.errors import InvalidArgumentError
from bots_rft.report.compare_summary import _trial_section, decision_rule
from bots_rft.report.trial import (
    DOES_NOT_MATTER,
    HARMFUL,
    SUPPORTED,
    UNDECIDED,
    Contrast,
    ContrastOutcome,
    ContrastRule,
    decide,
    decide_contrasts,
    held_out_rows,
    holm,
    read_held_out_csv,
    t_test_p,
    trial_markdown,
    write_held_out_csv,
)
from bots_rft.train.compare_plan import plan_comparison
from test_trial_report import RULE, arms, curves, rows_of

ROOT = Path(__file__).resolve().parents[2]
TRIAL = ROOT / "configs" / "trial_strings_cpu.yaml"
DECISION = """  decision:                # the decision rule above
    method: bots
    baseline: random
    control: reference-filter
    refute_within: 0.005
"""


# ------------------------------------------------------------------------------ the arithmetic
def test_t_test_p_against_the_t_table_and_closed_forms() -> None:
    # Two-sided 5% critical values from the t table: p = 0.05 at t(0.975, df).
    for t, df in ((2.093, 19), (12.706, 1), (2.228, 10), (3.182, 3), (2.042, 30)):
        assert t_test_p(t, df) == pytest.approx(0.05, abs=2e-4)
        assert t_test_p(-t, df) == t_test_p(t, df)  # two-sided
    # 1% critical values: t(0.995, 19) = 2.861, t(0.995, 9) = 3.250.
    assert t_test_p(2.861, 19) == pytest.approx(0.01, abs=1e-4)
    assert t_test_p(3.250, 9) == pytest.approx(0.01, abs=1e-4)
    # Closed forms: df = 1 (Cauchy) and df = 2, at several t (both tails of the continued fraction).
    for t in (0.05, 0.5, 1.0, 2.0, 7.5, 40.0):
        assert t_test_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-10)
        assert t_test_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-10)
    assert t_test_p(0.0, 7) == 1.0 and t_test_p(math.inf, 7) == 0.0
    assert math.isnan(t_test_p(math.nan, 7)) and math.isnan(t_test_p(1.0, 0))


def test_t_test_p_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 5, 9, 19, 29, 60, 500):
        for t in (0.0, 0.3, 1.0, 2.0, 2.5, 4.0, 8.0, 25.0):
            assert t_test_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-300)


def test_one_contrast_by_hand() -> None:
    diffs = [0.01, 0.03, 0.02, 0.04]
    # mean 0.025, SD sqrt(0.0005 / 3), t = mean / (SD / 2) on 3 df; the df = 3 closed form:
    # p = 1 - (2/π)(x / (1 + x²) + atan x), x = t / sqrt(3); interval mean ± 3.182 SD / 2.
    sd = math.sqrt(0.0005 / 3)
    t = 0.025 / (sd / 2)
    x = t / math.sqrt(3)
    p = 1 - 2 / math.pi * (x / (1 + x * x) + math.atan(x))
    rows = arms(diffs, [0.0] * 4)
    rule = ContrastRule((Contrast("bots", "random"),))
    (r,) = decide_contrasts(rows, rule).results
    assert r.name == "C1" and (r.method, r.baseline) == ("bots", "random")
    assert r.n == 4 and r.interval.mean == pytest.approx(0.025) and r.sd == pytest.approx(sd)
    assert r.t == pytest.approx(t) and r.p == pytest.approx(p, rel=1e-9) and p == pytest.approx(0.0305, abs=1e-4)
    assert r.interval.half == pytest.approx(3.182 * sd / 2)
    assert r.level == 0.05 and r.rejected and r.verdict == SUPPORTED  # one contrast: Holm is the plain test
    assert (
        r.text()
        == "C1 bots − random = +0.0250 [+0.0045, +0.0455] (4 paired seeds, p = 0.0305, Holm level 0.05): supported"
    )
    assert r.text(decided=False) == "C1 bots − random = +0.0250 [+0.0045, +0.0455] (4 paired seeds, p = 0.0305)"
    # At alpha 0.01 the same differences are not rejected: inconclusive.
    (strict,) = decide_contrasts(rows, ContrastRule((Contrast("bots", "random"),), alpha=0.01)).results
    assert not strict.rejected and strict.verdict == UNDECIDED


# ------------------------------------------------------------------------------ Holm's step-down
def test_holm_step_down() -> None:
    # The smaller p (0.03) fails its level alpha/2 = 0.025, so 0.04 is not rejected either,
    # though it would pass at 0.05 unadjusted.
    assert holm([0.04, 0.03], 0.05) == [(0.05, False), (0.025, False)]
    # Both rejected: 0.01 <= 0.025, then 0.04 <= 0.05.
    assert holm([0.01, 0.04], 0.05) == [(0.025, True), (0.05, True)]
    # Three: 0.001 <= 0.05/3, then 0.03 > 0.025 stops the rest (0.04 <= 0.05 notwithstanding).
    assert holm([0.04, 0.001, 0.03], 0.05) == [(0.05, False), (0.05 / 3, True), (0.025, False)]
    assert holm([0.03, 0.001, 0.02], 0.05) == [(0.05, True), (0.05 / 3, True), (0.025, True)]
    # A p-value exactly at its level is rejected; NaN (no test) is never, and is tested last.
    assert holm([0.025, math.nan, 0.05], 0.05) == [(0.05 / 3, False), (0.05, False), (0.025, False)]
    assert holm([0.01, math.nan], 0.05) == [(0.025, True), (0.05, False)]
    assert holm([0.025, 0.05], 0.05) == [(0.025, True), (0.05, True)]


def with_t(t: float, n: int, scale: float = 0.02) -> list[float]:
    """``n`` paired differences whose t statistic is ``t``: a spread pattern plus a mean."""
    pattern = np.linspace(-1.0, 1.0, n) * scale
    mean = t * float(np.std(pattern, ddof=1)) / math.sqrt(n)
    return [mean + float(e) for e in pattern]


def two_arms(a: list[float], b: list[float]) -> list[dict[str, Any]]:
    """Random at 0.30, 0.31, ...; bots-embed that plus ``a``, bots that plus ``b``, seed by seed."""
    random = [0.30 + 0.01 * i for i in range(len(a))]
    return rows_of(
        {
            "random": random,
            "bots-embed": [r + d for r, d in zip(random, a)],
            "bots": [r + d for r, d in zip(random, b)],
        }
    )


TWO = ContrastRule((Contrast("bots-embed", "random"), Contrast("bots", "random")))


def test_holm_through_the_rule_second_blocked_after_first_fails() -> None:
    # Ten seeds (9 df): t = 2.35 gives p ≈ 0.043 and t = 2.6 p ≈ 0.029; both below 0.05.
    rows = two_arms(with_t(2.35, 10), with_t(2.6, 10))
    c1, c2 = decide_contrasts(rows, TWO).results
    assert c1.t == pytest.approx(2.35) and c2.t == pytest.approx(2.6)
    assert 0.025 < c2.p < c1.p < 0.05
    # The smaller p (C2's) is tested at 0.025 and fails; C1 at 0.05 is then not rejected.
    assert (c2.level, c2.rejected) == (0.025, False) and (c1.level, c1.rejected) == (0.05, False)
    # Both intervals exclude 0, but Holm rejected neither and they are wider than ±0.0075.
    assert c1.interval.low > 0 and c2.interval.low > 0
    assert c1.verdict == UNDECIDED and c2.verdict == UNDECIDED
    # Alone, C1 would have been supported.
    alone = ContrastRule((Contrast("bots-embed", "random"),))
    assert decide_contrasts(rows, alone).results[0].verdict == SUPPORTED


def test_holm_through_the_rule_both_rejected() -> None:
    # t = 6 (p ≈ 0.0002) is rejected at 0.025; then t = 2.6 (p ≈ 0.029) at 0.05.
    rows = two_arms(with_t(6.0, 10), with_t(-2.6, 10))
    outcome = decide_contrasts(rows, TWO)
    c1, c2 = outcome.results
    assert (c1.level, c1.rejected, c1.verdict) == (0.025, True, SUPPORTED)
    assert (c2.level, c2.rejected, c2.verdict) == (0.05, True, HARMFUL)
    assert 0.025 < c2.p < 0.05
    assert outcome.line() == "C1 bots-embed − random: supported; C2 bots − random: harmful"


@pytest.mark.parametrize(
    ("diffs", "verdict"),
    [
        ([0.02, 0.03, 0.025, 0.035], SUPPORTED),
        ([-0.02, -0.03, -0.025, -0.035], HARMFUL),
        ([0.001, -0.001, 0.002, -0.002], DOES_NOT_MATTER),
        ([0.03, -0.02, 0.01, -0.01], UNDECIDED),
        # Rejected comes first: a small but consistent difference inside the margin is supported.
        ([0.001, 0.0012, 0.0011, 0.0013], SUPPORTED),
        # Identical differences: no spread, t infinite, rejected.
        ([0.01, 0.01, 0.01, 0.01], SUPPORTED),
        ([0.03], UNDECIDED),  # one paired seed tests nothing
    ],
)
def test_each_verdict(diffs: list[float], verdict: str) -> None:
    rule = ContrastRule((Contrast("bots", "random"),))
    outcome = decide(arms(diffs, [0.0] * len(diffs)), rule)
    assert isinstance(outcome, ContrastOutcome) and outcome.column == "avg_at_4"
    (r,) = outcome.results
    assert r.verdict == verdict and outcome.text == f"C1 bots − random: {verdict}"
    assert r.text().endswith(f": {verdict}")
    if len(diffs) < 2:
        assert math.isnan(r.p) and r.text() == "C1 bots − random = +0.0300 (1 paired seed, no test): inconclusive"
    # A wider margin makes "inconclusive" "does not matter", a narrower one the reverse.
    if verdict == UNDECIDED and len(diffs) > 1:
        wide = ContrastRule((Contrast("bots", "random"),), equivalence=0.1)
        assert decide_contrasts(arms(diffs, [0.0] * 4), wide).results[0].verdict == DOES_NOT_MATTER
    if verdict == DOES_NOT_MATTER:
        narrow = ContrastRule((Contrast("bots", "random"),), equivalence=0.001)
        assert decide_contrasts(arms(diffs, [0.0] * 4), narrow).results[0].verdict == UNDECIDED


def test_contrast_rule_checks_its_arguments() -> None:
    one = (Contrast("bots", "random"),)
    with pytest.raises(InvalidArgumentError, match=r"baseline: expected a method other than 'bots'"):
        Contrast("bots", "bots")
    with pytest.raises(InvalidArgumentError, match=r"contrasts: expected at least one contrast"):
        ContrastRule(())
    for alpha in (0.0, 1.0, -0.1, 1.5, math.nan):
        with pytest.raises(InvalidArgumentError, match=r"alpha: expected a number in \(0, 1\)"):
            ContrastRule(one, alpha=alpha)
    with pytest.raises(InvalidArgumentError, match=r"equivalence: expected a finite number >= 0, got -0.01"):
        ContrastRule(one, equivalence=-0.01)
    with pytest.raises(InvalidArgumentError, match=r"correction: expected 'holm', got 'bonferroni'"):
        ContrastRule(one, correction="bonferroni")
    with pytest.raises(InvalidArgumentError, match=r"the name\(s\) \['C2'\] are given to more than one"):
        ContrastRule((Contrast("bots", "random", "C2"), Contrast("mopps", "random")))
    with pytest.raises(InvalidArgumentError, match=r"rule: the method 'mopps' of C2 has no runs"):
        decide_contrasts(arms([0.01, 0.02], [0.0, 0.0]), ContrastRule((*one, Contrast("mopps", "random"))))
    named = ContrastRule((Contrast("bots-embed", "random", "C4"), Contrast("bots", "random", "C5")))
    assert named.names == ("C4", "C5")


# ------------------------------------------------------------------------------ the config
def contrast_config(tmp_path: Path, decision: str, name: str = "c.yaml") -> Path:
    base = TRIAL.read_text(encoding="utf-8")
    assert DECISION in base
    path = tmp_path / name
    path.write_text(base.replace(DECISION, "  decision:\n" + decision), encoding="utf-8")
    return path


CONTRASTS = """    contrasts:
      - {method: bots, baseline: random, name: C4}
      - {method: Reference-Filter, baseline: random, name: C5}
    alpha: 0.05
    equivalence: 0.0075
    correction: holm
"""


def test_config_gives_the_rule(tmp_path: Path) -> None:
    plan = plan_comparison(str(contrast_config(tmp_path, CONTRASTS)), {}, smoke=True, out=str(tmp_path / "out"))
    rule = decision_rule(plan)
    assert rule == ContrastRule(
        (Contrast("bots", "random", "C4"), Contrast("reference-filter", "random", "C5")), 0.05, 0.0075, "holm"
    )
    # The defaults, and C1, C2, ... without names.
    plain = (
        "    contrasts:\n      - {method: bots, baseline: random}\n      - {method: reference-filter, baseline: bots}\n"
    )
    plan = plan_comparison(str(contrast_config(tmp_path, plain, "p.yaml")), {}, smoke=True, out=str(tmp_path / "o"))
    rule = decision_rule(plan)
    assert isinstance(rule, ContrastRule) and rule.names == ("C1", "C2")
    assert (rule.alpha, rule.equivalence, rule.correction) == (0.05, 0.0075, "holm")


def test_trial_config_rule_is_unchanged(tmp_path: Path) -> None:
    plan = plan_comparison(str(TRIAL), {}, smoke=True, out=str(tmp_path / "out"))
    assert decision_rule(plan) == RULE


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (
            CONTRASTS.replace("method: bots,", "method: mopps,"),
            "compare.decision.contrasts.0.method: expected one of the compared methods "
            "['random', 'bots', 'reference-filter'], got 'mopps'",
        ),
        (
            CONTRASTS.replace("method: bots,", "method: no-such-method,"),
            "compare.decision.contrasts.0.method: expected one of the compared methods "
            "['random', 'bots', 'reference-filter'], got 'no-such-method'",
        ),
        (
            CONTRASTS.replace("baseline: random, name: C5", "baseline: Reference-Filter, name: C5"),
            "compare.decision.contrasts.1.baseline: expected a method other than method (Reference-Filter), "
            "got 'Reference-Filter'",
        ),
        (
            CONTRASTS.replace("baseline: random, name: C5", "baseline: REFERENCE-FILTER, name: C5"),
            "compare.decision.contrasts.1.baseline: expected a method other than 'reference-filter'",
        ),
        (
            CONTRASTS + "    method: bots\n",
            "compare.decision.method: not with contrasts (give contrasts, or method/baseline/control/refute_within), "
            "got 'bots'",
        ),
        (CONTRASTS + "    baseline: random\n", "compare.decision.baseline: not with contrasts"),
        (CONTRASTS + "    control: reference-filter\n", "compare.decision.control: not with contrasts"),
        (CONTRASTS + "    refute_within: 0.005\n", "compare.decision.refute_within: not with contrasts"),
        (CONTRASTS.replace("alpha: 0.05", "alpha: 1.5"), "compare.decision.alpha: must lie in (0, 1), got 1.5"),
        (CONTRASTS.replace("alpha: 0.05", "alpha: 0"), "compare.decision.alpha: must lie in (0, 1), got 0"),
        (
            CONTRASTS.replace("equivalence: 0.0075", "equivalence: -0.01"),
            "compare.decision.equivalence: must be a finite number >= 0, got -0.01",
        ),
        (
            CONTRASTS.replace("correction: holm", "correction: bonferroni"),
            "compare.decision.correction: expected one of ['holm'], got 'bonferroni'",
        ),
        ("    contrasts: []\n", "compare.decision.contrasts: expected a list of one or more {method: A, baseline: B}"),
        (
            CONTRASTS.replace("name: C5", "name: C4"),
            "compare.decision.contrasts: expected one name per contrast (C4 named twice)",
        ),
        (
            CONTRASTS.replace("name: C5}", "nme: C5}"),
            "compare.decision.contrasts: contrast 1 has unknown key(s) ['nme']; known keys: ['baseline', 'method', 'name']",
        ),
        (
            DECISION.removeprefix("  decision:                # the decision rule above\n") + "    alpha: 0.01\n",
            "compare.decision.alpha: only with contrasts",
        ),
    ],
)
def test_bad_contrasts_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], decision: str, message: str
) -> None:
    from bots_rft.cli import main

    cfg = contrast_config(tmp_path, decision)
    out = tmp_path / "out"
    assert main(["compare", "--config", str(cfg), "--out", str(out), "--smoke"]) == 2, message
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


# ------------------------------------------------------------------------------ the report
def test_summary_section_from_held_out_records(tmp_path: Path) -> None:
    """The decision section and the outcome line as ``bots compare`` writes them, from runs'
    held-out records (through held_out.csv and back)."""
    a, b = with_t(6.0, 6, 0.01), with_t(0.5, 6, 0.01)
    groups: dict[str, list[Any]] = {"random": [], "bots-embed": [], "bots": []}
    for i in range(6):
        base = 0.30 + 0.01 * i
        for method, value in (("random", base), ("bots-embed", base + a[i]), ("bots", base + b[i])):
            evals = [
                {"step": s, "cum_rollouts": 128 * s, "accuracy": value + o, "greedy_accuracy": value + o - 0.1}
                for s, o in ((0, -0.01), (10, 0.0), (20, 0.01))
            ]
            groups[method].append(curves(method, 10 + i, evals))
    rows = held_out_rows(groups)
    back = read_held_out_csv(write_held_out_csv(groups, tmp_path / "held_out.csv"))
    rule = ContrastRule((Contrast("bots-embed", "random", "C4"), Contrast("bots", "random", "C5")))
    outcome = decide(rows, rule)
    assert decide(back, rule) == outcome
    c4, c5 = outcome.results
    assert c4.t == pytest.approx(6.0) and c5.t == pytest.approx(0.5)
    assert c4.verdict == SUPPORTED and c5.verdict == UNDECIDED and c4.level == 0.025 and c5.level == 0.05

    plan = SimpleNamespace(spec=SimpleNamespace(references=None), methods=list(groups), smoke=True)
    cfg = SimpleNamespace(weak_column=None, strong_column=None)
    text, line = _trial_section(cfg, plan, groups, rule)  # type: ignore[arg-type]
    caveat = "(smoke run, not a result) "
    assert line == caveat + "C4 bots-embed − random: supported; C5 bots − random: inconclusive"
    assert text == trial_markdown(rows, rule, caveat=caveat, reads_embeddings=["bots-embed"]) + "\n\n"
    # bots-embed read the task embeddings: said so, not "nothing" / "own rollouts only".
    assert "task embeddings for bots-embed (one prefill of every training prompt; no rollouts charged)" in text
    assert "| bots-embed | task embeddings | 6 |" in text and "| random | own rollouts only | 6 |" in text
    assert "| bots-embed − random | 6 |" in text and "| bots − random | 6 |" in text
    assert (
        f"{caveat}Outcome under the rule (avg@4 over the run, the primary metric; each contrast's differences "
        "paired by seed with a 95% Student-t interval and a two-sided paired t-test, Holm's step-down over the 2 "
        'contrasts at family-wise α = 0.05; "does not matter at this scale" where the interval lies inside ±0.0075):'
    ) in text
    for r in (c4, c5):
        assert f"\n- {r.text()}\n" in text
        assert f"{r.interval.mean:+.4f} [{r.interval.low:+.4f}, {r.interval.high:+.4f}] (6 paired seeds, " in r.text()
    assert f"\n{caveat}Outcome: C4 bots-embed − random: supported; C5 bots − random: inconclusive.\n" in text
    # Greedy over the run is described with the same arithmetic, not decided.
    greedy = decide_contrasts(rows, rule, "greedy").results
    assert f"\n{caveat}Secondary (greedy over the run; described, not decided):\n\n" in text
    assert text.rstrip("\n").endswith("\n".join(f"- {r.text(decided=False)}" for r in greedy))
    assert "Holm level" not in text.split("Secondary")[1] and "supported" not in text.split("Secondary")[1]


# The report of the trial's single-comparison rule, as it was before rules over contrasts.
SINGLE = (
    "Primary metric: each run's mean held-out avg@4 over its 2 evaluations (steps 0, 10; every run on the same "
    "schedule), mean ± 95% Student-t half-width over seeds. What each method had besides its rollouts: the reference "
    "pass rates for bots, reference-filter (96,000 reference rollouts charged to each); nothing for random.\n\n"
    "| Method | information | seeds | avg@4 over the run (primary) | greedy over the run | final avg@4 | rollouts "
    "spent | reference rollouts charged | charged total |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
    "| random | own rollouts only | 4 | 0.330 ± 0.041 | 0.230 ± 0.041 | 0.340 ± 0.041 | 1,280 ± 0 | 0 | 1,280 ± 0 |\n"
    "| bots | reference pass rates | 4 | 0.357 ± 0.050 | 0.258 ± 0.050 | 0.367 ± 0.050 | 1,280 ± 0 | 96,000 "
    "| 97,280 ± 0 |\n"
    "| reference-filter | reference pass rates | 4 | 0.343 ± 0.050 | 0.243 ± 0.050 | 0.353 ± 0.050 | 1,280 ± 0 "
    "| 96,000 | 97,280 ± 0 |\n\n"
    "Paired by seed (each seed's run minus the other method's run of the same seed; mean ± 95% half-width, * where "
    "the interval excludes 0):\n\n"
    "| Difference | paired seeds | avg@4 over the run (primary) | greedy over the run | final avg@4 |\n"
    "|---|---:|---:|---:|---:|\n"
    "| bots − random | 4 | +0.028 ± 0.010 * | +0.028 ± 0.010 * | +0.028 ± 0.010 * |\n"
    "| reference-filter − random | 4 | +0.013 ± 0.010 * | +0.013 ± 0.010 * | +0.013 ± 0.010 * |\n"
    "| bots − reference-filter | 4 | +0.014 ± 0.007 * | +0.014 ± 0.007 * | +0.014 ± 0.007 * |\n\n"
    "(smoke run, not a result) Outcome under the rule (avg@4 over the run, the primary metric): bots − random = "
    "+0.028 ± 0.010 (4 paired seeds); bots − reference-filter = +0.014 ± 0.007 (4 paired seeds) → bots: saves "
    "rollouts given these references; the online part matters.\n"
    "(smoke run, not a result) Secondary (greedy over the run): bots − random = +0.028 ± 0.010 (4 paired seeds); "
    "bots − reference-filter = +0.014 ± 0.007 (4 paired seeds) → bots: saves rollouts given these references; the "
    "online part matters."
)


def test_single_rule_report_is_unchanged(tmp_path: Path) -> None:
    rows = arms([0.02, 0.03, 0.025, 0.035], [0.01, 0.02, 0.015, 0.012])
    caveat = "(smoke run, not a result) "
    text = trial_markdown(
        rows, RULE, reads_references={"bots", "reference-filter"}, reference_rollouts=96_000, caveat=caveat
    )
    assert text == SINGLE
    # The trial config's rule gives that text and outcome line through the report.
    rule = decision_rule(plan_comparison(str(TRIAL), {}, smoke=True, out=str(tmp_path / "out")))
    assert rule == RULE
    assert (
        trial_markdown(
            rows, rule, reads_references={"bots", "reference-filter"}, reference_rollouts=96_000, caveat=caveat
        )
        == SINGLE
    )
    assert decide(rows, RULE).line() == (
        "bots − random = +0.028 ± 0.010 (4 paired seeds); bots − reference-filter = +0.014 ± 0.007 (4 paired seeds) "
        "→ bots: saves rollouts given these references; the online part matters"
    )
