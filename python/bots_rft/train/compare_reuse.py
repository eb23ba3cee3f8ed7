"""What ``bots compare --reuse`` may reuse. Before any work, every run directory (and the built pool
and the warm-up) that holds something is refused without ``--reuse``, and with it must have been
made with the same settings as it would be now; the keys that differ are named otherwise.

A run's settings are the config in its metrics.jsonl; the warm-up's are OUT/warmup/
:data:`WARMUP_RECORD` (the :data:`WARMUP_KEYS` and the reference checkpoints it also made), the
pool's OUT/pool/:data:`POOL_RECORD` (the ``compare.pool`` section). A finished run (its last
evaluation logged) is reused as it is; an interrupted one resumes from its latest checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .comparison import CompareSpec, ReferenceSpec
from .config import TrainConfig
from .logger import read_metrics

__all__ = [
    "REUSE_IGNORED",
    "WARMUP_KEYS",
    "WARMUP_RECORD",
    "POOL_RECORD",
    "differences",
    "recorded_config",
    "reference_record",
    "finished",
    "check_existing",
]

# Settings that do not change what a run computes (where it writes, how it reports, how many CPU
# threads or scoring processes it uses): a run that differs only in these may be reused.
# How a run is driven, not what it learns: never a reason to redo a run.
REUSE_IGNORED = frozenset(
    {
        "out_dir",
        "resume",
        "overwrite",
        "extend_pool",
        "resume_params",
        "progress",
        "tensorboard",
        "save_every",
        "keep_checkpoints",
        "threads",
        "reward_workers",
        "reward_timeout",
        "verifier_error_stop",
    }
)
# What the shared supervised warm-up depends on.
WARMUP_KEYS = (
    "model",
    "pool",
    "seed",
    "system_prompt",
    "dtype",
    "max_prompt_tokens",
    "grad_clip",
    "sft_steps",
    "sft_lr",
    "sft_batch_size",
    "sft_template",
)
WARMUP_RECORD = "bots_compare_warmup.json"
# How a pool built from the config's compare.pool was made (compared on --reuse).
POOL_RECORD = "bots_compare_pool.json"


def differences(recorded: dict[str, Any], current: dict[str, Any], keys: Iterable[str]) -> list[str]:
    """``key=then, now`` for every key whose value differs. A key the recorded config lacks was
    added to the trainer after that run started; it differs only when it is now set to something
    other than its default (at its default a key computes what the run without it computed)."""
    defaults = TrainConfig.defaults()
    out = []
    for k in keys:
        then = recorded[k] if k in recorded else defaults.get(k)
        if then != current.get(k):
            out.append(f"{k}={recorded.get(k)!r} then, {current.get(k)!r} now")
    return out


def recorded_config(run_dir: Path) -> dict[str, Any] | None:
    """The config a run in ``run_dir`` was (last) started with, from its metrics.jsonl."""
    path = run_dir / "metrics.jsonl"
    configs = [r["config"] for r in read_metrics(path) if r.get("kind") == "config"] if path.exists() else []
    return configs[-1] if configs and isinstance(configs[-1], dict) else None


def reference_record(refs: ReferenceSpec, seed: int) -> list[int]:
    """What the reference checkpoints depend on besides the warm-up keys: their steps, and the
    stream's seed when it is not the policy's (a record without it is the policy's stream)."""
    steps = [refs.weak_sft_steps, refs.strong_sft_steps]
    return steps if refs.seed is None or refs.seed == seed else [*steps, refs.seed]


def finished(run_dir: Path, steps: int) -> bool:
    """Whether the run in ``run_dir`` logged its evaluation after step ``steps`` (its last)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return False
    return any(r.get("kind") == "eval" and r.get("step") == steps for r in read_metrics(path))


def check_existing(
    out: Path,
    runs: list[tuple[Path, TrainConfig]],
    warmup: tuple[Path, TrainConfig] | None,
    reuse: bool,
    spec: CompareSpec | None = None,
) -> None:
    """Before any work: every run directory (and the built pool and warm-up) that holds something
    is either refused (no --reuse) or was made with the same settings as it would be now."""
    pool = out / "pool"
    if spec is not None and spec.pool is not None and pool.exists() and any(pool.iterdir()):
        if not reuse:
            raise ConfigError(
                f"--out: {str(pool)!r} already holds a pool; pass --reuse to use it, or choose another --out"
            )
        try:
            saved_pool = json.loads((pool / POOL_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved_pool = None
        if saved_pool != json.loads(json.dumps(spec.pool.record())):
            raise ConfigError(
                f"--reuse: the pool in {str(pool)!r} was built from other settings ({saved_pool!r}); "
                "remove it or choose another --out"
            )

    if warmup is not None:
        dest, cfg = warmup
        record = dest / WARMUP_RECORD
        if dest.exists() and any(dest.iterdir()):
            if not reuse:
                raise ConfigError(
                    f"--out: {str(dest)!r} already holds a warm-up; pass --reuse to use it, or choose another --out"
                )
            try:
                saved = json.loads(record.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                saved = None
            if not isinstance(saved, dict):
                raise ConfigError(
                    f"--reuse: {str(dest)!r} has no readable {WARMUP_RECORD}; remove it or choose another --out"
                )
            diff = differences(saved, cfg.to_dict(), WARMUP_KEYS)
            refs = None if spec is None or spec.references is None else spec.references
            wanted = None if refs is None else reference_record(refs, cfg.seed)
            if saved.get("references") != wanted:
                diff.append(f"references={saved.get('references')!r} then, {wanted!r} now")
            if diff:
                raise ConfigError(
                    f"--reuse: the warm-up in {str(dest)!r} was made with other settings ({'; '.join(diff)}); "
                    "remove it or choose another --out"
                )
    for run_dir, cfg in runs:
        if not (run_dir.exists() and any(run_dir.iterdir())):
            continue
        if not reuse:
            raise ConfigError(
                f"--out: {str(run_dir)!r} already holds a run; pass --reuse to reuse or resume it, "
                "or choose another --out"
            )
        recorded = recorded_config(run_dir)
        if recorded is None:
            continue  # started but never got as far as its first record: resumed from nothing
        now = cfg.to_dict()
        diff = differences(recorded, now, sorted((set(recorded) | set(now)) - REUSE_IGNORED))
        if diff:
            raise ConfigError(
                f"--reuse: {str(run_dir)!r} was trained with other settings ({'; '.join(diff)}); "
                "remove it, choose another --out, or run with its settings"
            )
