"""A reasoning-gym pool sized to a small model's frontier (``bots data spread --config FILE``).

BOTS learns from tasks whose success rate lies strictly between 0 and 1: a pool on which a small
model fails everything (or solves everything) gives every GRPO group zero variance and the
selector nothing to choose between. A *spread spec* names the generators and curriculum levels
where the model's reference pass rates (measured with ``bots refeval``) are spread over (0, 1),
the prompt it is asked in, and how its answer is read: ``answer_mode`` (``last_number`` reads a
prose answer such as "6 + 9 = 15." as 15; ``tag`` is the strict ``<answer>`` format) and
``format_weight`` (the share of the reward paid for the strict format itself).

The spec is a YAML or TOML mapping::

    families:                   # generator -> curriculum levels
      chain_sum: [0, 1]
      basic_arithmetic: [0]
    per_level: 24               # tasks per generator and level
    eval_fraction: 0.25         # held out per generator and level (disjoint questions)
    seed: 0
    system_prompt: "Reply with only the final answer."
    answer_mode: last_number
    format_weight: 0.0

Tasks are generated offline by reasoning-gym's seeded generators, so the same spec always builds
the same pool. :func:`pass_rate_histogram` draws the histogram of a measured column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, Field, field_validator, model_validator

from ..config_files import ConfigModel, Float, Int, Invalid, read_mapping
from ..errors import ConfigError, InvalidArgumentError
from ..rewards.extract import ANSWER_MODE_KEY, FORMAT_WEIGHT_KEY, answer_mode_of, format_weight_of
from .gym import gym_rows
from .pool import TaskPool
from .split import PoolPaths, split_rows, write_split

__all__ = ["SpreadSpec", "load_spread_spec", "spread_rows", "build_spread_pool", "pass_rate_histogram"]


def _levels(levels: Any) -> list[int]:
    if (
        not isinstance(levels, Sequence)
        or isinstance(levels, str)
        or not levels
        or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in levels)
    ):
        raise Invalid("expected a non-empty list of levels >= 0")
    return list(levels)


class SpreadSpec(ConfigModel):
    """What a spread pool is made of (see the module docstring). Built from a mapping, it is
    validated; a bad value is one :class:`~bots_rft.errors.ConfigError` line naming key and value."""

    families: dict[str, Annotated[list[int], BeforeValidator(_levels)]] = Field(
        default_factory=dict, validate_default=True
    )
    per_level: Annotated[Int, Field(ge=1)] = 24
    eval_fraction: Annotated[Float, Field(gt=0, lt=1)] = 0.25
    seed: Annotated[Int, Field(ge=0)] = 0
    system_prompt: str | None = "Reply with only the final answer."
    answer_mode: str = "last_number"
    format_weight: float = 0.0
    item_timeout: float | None = 5.0

    @field_validator("families", mode="before")
    @classmethod
    def _some_families(cls, families: Any) -> Any:
        if not isinstance(families, Mapping) or not families:
            raise Invalid("expected a mapping of generator name -> list of levels")
        return {str(k): v for k, v in families.items()}

    @model_validator(mode="after")
    def _verifier_reads_it(self) -> SpreadSpec:
        try:  # the verifier's own checks, as the config's error class
            answer_mode_of({ANSWER_MODE_KEY: self.answer_mode})
            format_weight_of({FORMAT_WEIGHT_KEY: self.format_weight})
        except InvalidArgumentError as exc:
            raise ConfigError(str(exc)) from None
        return self


def load_spread_spec(path: str | Path) -> SpreadSpec:
    """A validated :class:`SpreadSpec` from a YAML (``.yaml``/``.yml``) or TOML file; unknown
    keys and bad values are :class:`ConfigError` naming the key and value."""
    p = Path(path)
    data = read_mapping(p)
    unknown = sorted(set(data) - set(SpreadSpec.model_fields))
    if unknown:
        raise ConfigError(f"config {p.name}: unknown key(s) {unknown}; known keys: {sorted(SpreadSpec.model_fields)}")
    return SpreadSpec(**data)


def spread_rows(spec: SpreadSpec) -> list[dict[str, Any]]:
    """The pool's rows (split not yet set), generator by generator in the spec's order, each
    row's ``extra_info`` carrying the answer mode and format weight its verifier reads."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name, levels in spec.families.items():
        for row in gym_rows(
            [name], list(levels), spec.per_level, spec.seed, spec.system_prompt, item_timeout=spec.item_timeout
        ):
            question = row["prompt"][-1]["content"]
            if question in seen:  # a question two generators share would leak across the split
                continue
            seen.add(question)
            row["extra_info"]["index"] = len(rows)
            row["extra_info"][ANSWER_MODE_KEY] = spec.answer_mode
            row["extra_info"][FORMAT_WEIGHT_KEY] = float(spec.format_weight)
            rows.append(row)
    return rows


def build_spread_pool(spec: SpreadSpec, out_dir: str | Path) -> PoolPaths:
    """Write ``out_dir/train.parquet`` and ``out_dir/eval.parquet``: ``eval_fraction`` of every
    (generator, level) held out, no question in both."""
    rows = spread_rows(spec)
    train, evaluation = split_rows(
        rows, spec.eval_fraction, spec.seed, group=lambda r: (r["data_source"], r["extra_info"]["rg_level"])
    )
    return write_split(train, evaluation, out_dir)


def _group_label(source: str, info: Mapping[str, Any]) -> str:
    return f"{source.removeprefix('reasoning_gym/')} L{info.get('rg_level', 0)}"


def pass_rate_table(pool: TaskPool, columns: Sequence[str]) -> str:
    """Markdown: per (generator, level) and overall, the mean of each column and the share of
    tasks with a pass rate in (0, 1)."""
    labels = np.asarray([_group_label(str(s), i) for s, i in zip(pool.data_sources(), pool.extra_infos())])
    rates = {c: pool.pass_rate(c) for c in columns}
    head = "| generator, level | tasks | " + " | ".join(f"{c} mean | {c} in (0,1)" for c in columns) + " |"
    lines = [head, "|---|---:|" + "---:|---:|" * len(columns)]
    for label in [*dict.fromkeys(labels.tolist()), None]:
        mask = np.ones(len(pool), dtype=bool) if label is None else labels == label
        cells = []
        for c in columns:
            r = rates[c][mask]
            r = r[~np.isnan(r)]
            cells.append(f"{r.mean():.3f} | {np.mean((r > 0) & (r < 1)):.2f}" if r.size else "- | -")
        name = "**all**" if label is None else label
        lines.append(f"| {name} | {int(mask.sum())} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pass_rate_histogram(pool: TaskPool, columns: Sequence[str], path: str | Path, title: str = "") -> Path:
    """A PNG histogram of each difficulty column's pass rates (NaN rows left out), one panel
    per column, with the shares at exactly 0, in (0, 1) and at exactly 1 in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not columns:
        raise InvalidArgumentError("columns: expected at least one difficulty column, got none", "columns")
    fig, axes = plt.subplots(1, len(columns), figsize=(4.6 * len(columns), 3.4), squeeze=False)
    for ax, col in zip(axes[0], columns):
        rates = pool.pass_rate(col)
        known = rates[~np.isnan(rates)]
        ax.hist(known, bins=np.linspace(0, 1, 11), color="tab:blue", edgecolor="white")
        ax.set_title(
            f"{col}\n=0: {np.mean(known == 0):.2f}, in (0,1): {np.mean((known > 0) & (known < 1)):.2f}, "
            f"=1: {np.mean(known == 1):.2f} (n={known.size})",
            fontsize=9,
        )
        ax.set_xlabel("pass rate")
        ax.set_ylabel("tasks")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
