"""What a ``bots compare`` will do, settled before any work: the training config every run shares,
the ``compare:`` section, the methods (canonical names), the RL seeds, how many runs go side by
side and where each run goes (OUT/<method>/, or OUT/<method>/seed<k>/ with seeds).

:func:`plan_comparison` reads the config file and its ``compare:`` section, applies the command
line's values over them and refuses what cannot run (two ways of giving the pool or the reference
columns, fewer than two methods, an unknown one, ``--out`` and ``out_dir`` disagreeing), each as
one :class:`~bots_rft.errors.ConfigError` line; ``smoke`` shrinks everything to a check that the
pipeline runs (:func:`smoke_sized`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config_files import read_mapping
from ..errors import ConfigError
from .comparison import SECTION, CompareSpec, ReferenceSpec, read_compare_section
from .config import TrainConfig, load_config

__all__ = ["ComparePlan", "plan_comparison", "smoke_sized", "run_dir", "DEFAULT_METHODS", "DEFAULT_OUT"]

DEFAULT_METHODS = "bots,random"
DEFAULT_OUT = "runs/compare"


def run_dir(out: Path, method: str, seed: int | None) -> Path:
    """Where one run goes: OUT/<method>/, or OUT/<method>/seed<k>/ when seeds are given."""
    return out / method if seed is None else out / method / f"seed{seed}"


@dataclass(frozen=True)
class ComparePlan:
    """A comparison settled before any work (:func:`plan_comparison`).

    ``cfg`` is the config every run shares (its ``pool`` and reference columns already those of
    ``compare.pool`` and ``compare.references`` under ``out``); ``seeds`` None means one run per
    method with the config's seed; ``decision`` holds the ``compare.decision`` rule's fields with
    canonical method names (None without a rule)."""

    cfg: TrainConfig
    spec: CompareSpec
    methods: list[str]
    seeds: list[int] | None
    jobs: int
    out: Path
    reuse: bool
    smoke: bool
    decision: dict[str, Any] | None

    @property
    def run_seeds(self) -> list[int | None]:
        """The seed of each run per method (None: the config's seed, into OUT/<method>/)."""
        return list(self.seeds) if self.seeds else [None]

    def run_dir(self, method: str, seed: int | None) -> Path:
        return run_dir(self.out, method, seed)


def plan_comparison(
    config: str | None,
    overrides: dict[str, Any],
    *,
    methods: str | None = None,
    seeds: list[int] | None = None,
    jobs: int | None = None,
    out: str | None = None,
    reuse: bool = False,
    smoke: bool = False,
) -> ComparePlan:
    """The comparison that the config file ``config`` (with its ``compare:`` section), the
    ``key=value`` ``overrides`` and the command line's ``methods`` (comma-separated), ``seeds``,
    ``jobs`` and ``out`` ask for; each of those four wins over the config."""
    from ..selector.registry import METHODS, method, method_names

    override = overrides.get("out_dir")
    spec = read_compare_section(config)
    extra = dict(overrides)
    if spec.pool is not None:
        if "pool" in _file_keys(config) or "pool" in extra:
            raise ConfigError(f"pool: {SECTION}.pool builds the training pool; give one of them")
        extra["pool"] = "OUT/pool/train.parquet"  # placed under the output directory below
    cfg = load_config(config, extra, skip_sections=(SECTION,))
    if spec.references is not None and cfg.sft_steps < 1:
        raise ConfigError(
            f"sft_steps: {SECTION}.references are checkpoints of the warm-up; needs sft_steps >= 1, got {cfg.sft_steps}"
        )
    if smoke:
        cfg, spec = smoke_sized(cfg, spec)
    methods_text = methods or (",".join(spec.methods) if spec.methods else DEFAULT_METHODS)
    names = [m.strip().lower() for m in methods_text.split(",") if m.strip()]
    bad = [m for m in names if m not in method_names(aliases=True)]
    if len(names) < 2 or bad:
        raise ConfigError(f"--methods: expected two or more of {list(METHODS)}, got {methods_text!r}")
    names = [method(m).name for m in names]  # canonical names: run directories and labels
    decision = _decision_fields(spec, names)
    if seeds is None and spec.seeds:
        seeds = list(spec.seeds)
    jobs = spec.jobs if jobs is None else jobs
    if jobs < 1:
        raise ConfigError(f"--jobs: expected an integer >= 1, got {jobs}")
    where = _output_dir(out, cfg, None if override is None else str(override))
    if spec.pool is not None:
        cfg = cfg.replace(pool=str(where / "pool" / "train.parquet"))
    if spec.references is not None:
        if cfg.weak_column or cfg.strong_column:
            raise ConfigError(f"weak_column: {SECTION}.references measures the reference columns; give one of them")
        cfg = cfg.replace(weak_column=spec.references.weak_column, strong_column=spec.references.strong_column)
    return ComparePlan(
        cfg=cfg,
        spec=spec,
        methods=names,
        seeds=seeds or None,
        jobs=jobs,
        out=where,
        reuse=reuse,
        smoke=smoke,
        decision=decision,
    )


def _file_keys(path: str | None) -> set[str]:
    """The training keys the config file at ``path`` sets (those under ``train:``, when that is
    its only section)."""
    if path is None:
        return set()
    data = read_mapping(path)
    if set(data) == {"train"} and isinstance(data["train"], dict):
        data = data["train"]
    return set(data)


def _decision_fields(spec: CompareSpec, methods: list[str]) -> dict[str, Any] | None:
    """The ``compare.decision`` rule's fields with canonical method names, every one among
    ``methods``."""
    from ..selector.registry import method, method_names

    if spec.decision is None:
        return None
    names = {}
    for key in ("method", "baseline", "control", "learning_check"):
        name = getattr(spec.decision, key)
        if name is None:
            continue
        canonical = method(name.lower()).name if name.lower() in method_names(aliases=True) else name
        if canonical not in methods:
            raise ConfigError(f"{SECTION}.decision.{key}: expected one of the compared methods {methods}, got {name!r}")
        names[key] = canonical
    return {**spec.decision.to_dict(), **names}


def _output_dir(out: str | None, cfg: TrainConfig, override: str | None) -> Path:
    """``--out``, else ``out_dir=`` on the command line, else the config file's ``out_dir``, else
    runs/compare."""
    if out is not None and override is not None and Path(out) != Path(override):
        raise ConfigError(f"--out: {out!r} and out_dir={override!r} disagree; give one")
    chosen = out or override
    if chosen is None and cfg.out_dir != TrainConfig.defaults()["out_dir"]:
        chosen = cfg.out_dir  # set in the config file
    return Path(chosen or DEFAULT_OUT)


def smoke_sized(cfg: TrainConfig, spec: CompareSpec) -> tuple[TrainConfig, CompareSpec]:
    """The same pipeline at a size that runs in about a minute: a check that every stage works
    (pool, warm-up, references, every method, the report), not a result."""
    cfg = cfg.replace(
        steps=min(cfg.steps, 2),
        batch_size=4,
        rollouts=4,
        mini_batch_size=4,
        sft_steps=min(cfg.sft_steps, 20),
        eval_every=0,
        eval_limit=min(cfg.eval_limit or 16, 16),
        eval_samples=min(cfg.eval_samples, 2),
        save_every=0,
    )
    if spec.pool is not None:
        subset = None if spec.pool.train_subset is None else min(spec.pool.train_subset, 60)
        spec = spec.replace(pool=spec.pool.replace(tasks=120, eval_tasks=16, train_subset=subset))
    if spec.references is not None and cfg.sft_steps > 0:
        spec = spec.replace(
            references=ReferenceSpec(
                weak_sft_steps=max(1, cfg.sft_steps // 2),
                strong_sft_steps=cfg.sft_steps * 2,
                rollouts=2,
                seed=spec.references.seed,
            )
        )
    if spec.seeds is not None:
        spec = spec.replace(seeds=spec.seeds[:2])
    return cfg, spec
