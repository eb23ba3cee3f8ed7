"""The report of a ``bots compare``, rebuilt from the run logs under OUT: OUT/summary.md (the
paper-style tables: TTB/BSF against Random, ETR, <1/>0 ratios, rollouts per step; with several
seeds the seed and paired tables; the primary metric and a decision rule's verdict; the implicit
evidence's quality when the pool has reference columns; timing), OUT/held_out.csv, and the curves
OUT/curves.png and OUT/held_out.png.

The runs themselves are :mod:`bots_rft.train.compare_run`'s; this module reads what they logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BotsError, ConfigError
from ..train.compare_plan import ComparePlan
from ..train.comparison import SECTION
from ..train.config import TrainConfig
from .trial import Contrast, ContrastRule, DecisionRule

__all__ = ["decision_rule", "write_summary", "reading_references"]

_SINGLE = ("method", "baseline", "control", "refute_within")


def decision_rule(plan: ComparePlan) -> DecisionRule | ContrastRule | None:
    """The ``compare.decision`` rule (None without one): with ``contrasts``, a
    :class:`ContrastRule` over them (each contrast's methods by their canonical names, every one
    among the compared methods), else a :class:`DecisionRule`; a rule that names one method twice
    is refused here, before any run."""
    if plan.decision is None:
        return None
    if plan.decision.get("contrasts") is None:
        return DecisionRule(**{k: v for k, v in plan.decision.items() if k in _SINGLE})
    from ..selector.registry import method, method_names

    contrasts = []
    for i, c in enumerate(plan.decision["contrasts"]):
        names = {}
        for role in ("method", "baseline"):
            name = str(c[role])
            canonical = method(name.lower()).name if name.lower() in method_names(aliases=True) else name
            if canonical not in plan.methods:
                raise ConfigError(
                    f"{SECTION}.decision.contrasts.{i}.{role}: expected one of the compared methods {plan.methods}, "
                    f"got {name!r}"
                )
            names[role] = canonical
        try:
            contrasts.append(Contrast(names["method"], names["baseline"], c.get("name")))
        except BotsError as exc:
            raise ConfigError(f"{SECTION}.decision.contrasts.{i}.{exc}") from None
    keys = ("alpha", "equivalence", "correction", "learning_check", "etr_margin")
    try:
        return ContrastRule(tuple(contrasts), **{k: plan.decision[k] for k in keys if k in plan.decision})
    except BotsError as exc:
        raise ConfigError(f"{SECTION}.decision.{exc}") from None


def reading_references(methods: list[str], cfg: TrainConfig) -> list[str]:
    """The methods that see the reference pass rates (none without both columns)."""
    from ..selector.registry import method

    refs = bool(cfg.weak_column and cfg.strong_column)
    return [m for m in methods if refs and method(m).references != "unused"]


def _information(methods: list[str], cfg: TrainConfig) -> str:
    """What each method saw besides its own rollouts (a comparison states it)."""
    from ..selector.registry import method

    seen = reading_references(methods, cfg)
    blind = [m for m in methods if m not in seen]
    parts = []
    if seen:
        parts.append(f"{', '.join(seen)}: the reference pass rates ({cfg.weak_column}, {cfg.strong_column})")
    embedded = [m for m in blind if method(m).reads_embeddings]
    if embedded:
        parts.append(f"{', '.join(embedded)}: task embeddings ({cfg.embeddings}) and their own rollouts")
    blind = [m for m in blind if m not in embedded]
    if blind:
        parts.append(f"{', '.join(blind)}: no reference pass rates, only their own rollouts")
    return "What each method saw besides its rollouts: " + "; ".join(parts) + "."


def _evidence_section(cfg: TrainConfig, groups: Any) -> str:
    """The implicit-evidence quality table, when the pool carries both reference columns (with a
    Random arm, also an estimator's that replays Random's uniform batches)."""
    if not (cfg.weak_column and cfg.strong_column):
        return ""
    from ..data import TaskPool
    from .training import evidence_markdown

    pool = TaskPool.load(cfg.pool)
    weak, strong = pool.pass_rate(cfg.weak_column), pool.pass_rate(cfg.strong_column)
    table = evidence_markdown(groups, weak, strong, shadow="random" if "random" in groups else None)
    if table is None:
        return ""
    return (
        f"Implicit evidence ({cfg.weak_column} → {cfg.strong_column}), predicted before each batch "
        f"was rolled out:\n\n{table}\n\n"
    )


def _embedding_evidence_section(cfg: TrainConfig, plan: ComparePlan, groups: Any) -> str:
    """The mechanism check of bots-embed's implicit evidence: its regression's p̃ against each next
    batch, replayed on its own runs' batches and on Random's (a shadow estimator), with the
    embeddings its runs used (the first run's ``embeddings.safetensors``, or the config's file)."""
    from ..data import TaskPool
    from ..data.embeddings import embeddings_for
    from ..selector.registry import method
    from ..train.run_embeddings import RUN_FILE
    from .training import regression_evidence_markdown

    learners = [m for m in plan.methods if method(m).name == "bots-embed"]
    if not learners:
        return ""
    files = [plan.run_dir(m, s) / RUN_FILE for m in learners for s in plan.run_seeds]
    found = next((f for f in files if f.exists()), None)
    source = found if found is not None else (cfg.embeddings if cfg.embeddings not in (None, "policy") else None)
    if source is None:
        return ""
    pool = TaskPool.load(cfg.pool)
    emb = embeddings_for(source, pool.ids)
    table = regression_evidence_markdown(
        groups,
        emb,
        learners,
        cfg.param("lam"),
        cfg.param("prior_precision"),
        shadow="random" if "random" in groups else None,
    )
    cost = _embedding_cost(plan, learners)
    if table is None:
        return cost
    return (
        cost
        + "Implicit evidence of bots-embed (its regression on the task embeddings), predicted before each batch was "
        f"rolled out; an AUC at or below 0.55 on Random's batches means the estimator failed to learn:\n\n{table}\n\n"
    )


def _embedding_cost(plan: ComparePlan, learners: list[str]) -> str:
    """What computing the task embeddings cost each run (its first record's ``embeddings``): prompt
    tokens prefilled (the compute axis) and seconds, not rollouts."""
    from ..train.logger import read_metrics

    tokens, seconds = [], []
    for m in learners:
        for s in plan.run_seeds:
            path = plan.run_dir(m, s) / "metrics.jsonl"
            first = next((r for r in read_metrics(path) if r.get("kind") == "config"), None) if path.exists() else None
            got = (first or {}).get("embeddings")
            if got:
                tokens.append(int(got["prompt_tokens"]))
                seconds.append(float(got["seconds"]))
    if not tokens:
        return ""
    return (
        f"Task embeddings ({', '.join(learners)}): each run prefilled {max(tokens):,} prompt tokens once (every training "
        f"prompt through the starting policy, no generation, no backward; {min(seconds):.1f}-{max(seconds):.1f} s), "
        "charged on the compute axis, not in rollouts.\n\n"
    )


def _trial_section(
    cfg: TrainConfig, plan: ComparePlan, groups: Any, rule: DecisionRule | ContrastRule | None
) -> tuple[str, str]:
    """The primary-metric table (and the rule's outcome) for summary.md, and the outcome line
    printed last (empty without a rule)."""
    from ..data import TaskPool
    from ..errors import InvalidArgumentError
    from ..selector.registry import method
    from .training import mean_etr
    from .trial import decide, decide_contrasts, held_out_rows, reference_cost, trial_markdown

    spec = plan.spec
    reading = reading_references(plan.methods, cfg)
    cost = 0
    text = ""
    if spec.references is not None:
        tasks = len(TaskPool.load(cfg.pool))
        cost = reference_cost(spec.references, tasks)
        charged = f", charged to {', '.join(reading)}" if reading else ""
        text = f"references: 2 × {tasks} tasks × {spec.references.rollouts} samples = {cost:,} rollouts{charged}.\n\n"
    rows = held_out_rows(groups)
    caveat = "(smoke run, not a result) " if plan.smoke else ""
    try:
        embedded = [m for m in plan.methods if method(m).reads_embeddings]
        etr = mean_etr(groups)
        table = trial_markdown(
            rows,
            rule,
            reads_references=reading,
            reference_rollouts=cost,
            caveat=caveat,
            reads_embeddings=embedded,
            etr=etr,
        )
        if rule is None:
            outcome = ""
        elif isinstance(rule, ContrastRule):
            outcome = caveat + decide_contrasts(rows, rule, etr=etr).line()
        else:
            outcome = caveat + decide(rows, rule).line()
    except InvalidArgumentError as exc:  # runs on different evaluation schedules: no common metric
        return text + f"The primary metric is not computed: {exc}\n\n", ""
    return text + table + "\n\n", outcome


def write_summary(plan: ComparePlan, cfg: TrainConfig, rule: DecisionRule | ContrastRule | None) -> tuple[str, str]:
    """Write OUT/summary.md, OUT/held_out.csv, OUT/curves.png and OUT/held_out.png from the run
    logs of ``plan`` (``cfg``: the config the runs started from); the summary's text and the
    decision rule's outcome line (empty without a rule)."""
    from .training import (
        average_runs,
        budget_markdown,
        comparison_markdown,
        load_run,
        paired_markdown,
        plot_held_out,
        plot_runs,
        seeds_markdown,
        selection_markdown,
        timing_markdown,
    )
    from .trial import write_held_out_csv

    out, methods, seeds = plan.out, plan.methods, plan.seeds
    groups = {m: [load_run(m, plan.run_dir(m, seed)) for seed in plan.run_seeds] for m in methods}
    runs = [average_runs(m, g) for m, g in groups.items()]
    csv_path = write_held_out_csv(groups, out / "held_out.csv")
    trial_text, outcome = _trial_section(cfg, plan, groups, rule)
    seed_text = f"seeds {', '.join(map(str, seeds))} (warm-up from seed {cfg.seed})" if seeds else f"seed {cfg.seed}"
    title = f"{Path(cfg.pool).parent.name or cfg.pool}, model {cfg.model}, B={cfg.batch_size}, n={cfg.rollouts}, {seed_text}"
    plot = plot_runs(groups, out / "curves.png", title)
    metric = f"mean of {cfg.eval_samples} samples at temperature {cfg.temperature:g}" if cfg.eval_samples else "greedy"
    held = plot_held_out(groups, out / "held_out.png", title, metric)
    over = bool(seeds and len(seeds) > 1)
    curve = "each method's mean held-out accuracy curve over seeds" if over else "the held-out accuracy curve"
    text = (
        f"# bots compare: {', '.join(methods)}\n\n{title}\n\n"
        f"Held-out accuracy: {metric}, on {cfg.eval_limit or 'every'} held-out task(s). "
        f"{_information(methods, cfg)}\n\n"
        f"TTB/BSF are on {curve}, against the first of: random, "
        "else the first method; per training step, and per rollout spent in the '(rollouts)' "
        "columns (dynamic sampling pays there for the groups it rolls out and drops).\n\n"
        f"{comparison_markdown(runs)}\n\n"
        + (f"Over seeds (mean ± 95% half-width):\n\n{seeds_markdown(groups)}\n\n" if over else "")
        + (
            "Paired by seed (each seed's run minus the baseline's run of the same seed; mean ± 95% "
            f"half-width, * where the interval excludes 0):\n\n{paired_markdown(groups)}\n\n"
            if over
            else ""
        )
        + f"The same rollout budget for every method (mean ± 95% half-width over seeds):\n\n{budget_markdown(groups)}\n\n"
        + f"Every held-out evaluation of every run: {csv_path.name}.\n\n"
        + trial_text
        + (
            "How each method selected (over seeds, mean ± 95% half-width; a re-selection is a pick of a task "
            f"the run had trained on before):\n\n{selection_markdown(groups)}\n\n"
            if any(r.train for g in groups.values() for r in g)
            else ""
        )
        + _evidence_section(cfg, groups)
        + _embedding_evidence_section(cfg, plan, groups)
        + f"Medians over steps:\n\n{timing_markdown(runs)}\n\n![held-out]({held.name})\n\n![curves]({plot.name})\n"
    )
    (out / "summary.md").write_text(text, encoding="utf-8")
    return text, outcome
