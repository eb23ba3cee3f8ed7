"""What every run of a ``bots compare`` starts from, made once before the runs: the procedural pool
of ``compare.pool`` (OUT/pool), the shared supervised warm-up (OUT/warmup; every method starts
from its weights) and the weak and strong reference models of ``compare.references`` (checkpoints
of the warm-up stream in OUT/references/sft<k>) with their pass rates measured on every training
task into the pool's reference columns.

Each leaves a record of what it was made from (:mod:`.compare_reuse`), so that ``--reuse`` keeps
it only when it would be made the same way now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .compare_reuse import POOL_RECORD, WARMUP_KEYS, WARMUP_RECORD, reference_record
from .comparison import CompareSpec, ReferenceSpec
from .config import TrainConfig

__all__ = ["build_pool", "shared_warmup", "measure_references", "FULL_TRAIN", "warmup_config"]

# With ``compare.pool.train_subset``: the whole built training pool, which the warm-up and the
# reference models learn from (train.parquet holds the subset the runs train on).
FULL_TRAIN = "full_train.parquet"


def warmup_config(cfg: TrainConfig, spec: CompareSpec) -> TrainConfig:
    """The config the shared warm-up runs with: ``cfg``, on the whole built training pool when the
    runs train on a subset of it."""
    if spec.pool is None or spec.pool.train_subset is None:
        return cfg
    return cfg.replace(pool=str(Path(cfg.pool).parent / FULL_TRAIN))


def build_pool(spec: CompareSpec, dest: Path) -> None:
    """The ``compare.pool`` pool in ``dest`` (kept when it is there and was built from the same
    spec, which :func:`.compare_reuse.check_existing` has verified)."""
    from ..data.strings import build_string_pool

    if (dest / "train.parquet").exists() and (dest / POOL_RECORD).exists():
        return
    p = spec.pool
    assert p is not None
    subset = p.subset_rows()
    build_string_pool(
        dest,
        tasks=p.tasks,
        eval_tasks=p.eval_tasks,
        seed=p.seed,
        min_length=p.min_length,
        max_length=p.max_length,
        ops=p.ops,
    )
    if subset is not None:
        from ..data import TaskPool

        full = dest / FULL_TRAIN
        (dest / "train.parquet").replace(full)
        TaskPool.load(full).take(subset).to_parquet(dest / "train.parquet")
    (dest / POOL_RECORD).write_text(json.dumps(p.record(), indent=1), encoding="utf-8")
    kept = "" if subset is None else f"; the runs train on {len(subset)} of them ({dest / 'train.parquet'})"
    print(f"bots compare: built a pool of {p.tasks} + {p.eval_tasks} held-out string tasks in {dest}{kept}")


def measure_references(cfg: TrainConfig, refs: ReferenceSpec, models: Path) -> None:
    """Both references' pass rates on every training task, sampled as training samples (the
    config's temperature, system prompt and token limit), into the pool's reference columns.
    Interrupted measurements resume from ``bots refeval``'s progress file."""
    import torch

    from ..data import TaskPool
    from .refeval import RefEvalConfig, run_refeval

    if cfg.threads:
        torch.set_num_threads(cfg.threads)  # as the runs use; more threads than cores only spin
    have = set(TaskPool.load(cfg.pool).difficulty_columns)
    for column, steps in ((refs.weak_column, refs.weak_sft_steps), (refs.strong_column, refs.strong_sft_steps)):
        if column in have:
            continue
        summary = run_refeval(
            RefEvalConfig(
                model=str(models / f"sft{steps}"),
                pool=cfg.pool,
                column=column,
                rollouts=refs.rollouts,
                max_new_tokens=cfg.max_new_tokens,
                max_prompt_tokens=cfg.max_prompt_tokens,
                system_prompt=cfg.system_prompt,
                temperature=cfg.temperature,
                batch_size=cfg.generation_batch_size,
                engine=cfg.rollout_engine,
                seed=cfg.seed,
                device=None if cfg.device == "auto" else cfg.device,
                workers=0,
            ),
            progress=cfg.progress,
        )
        print("\n".join(f"bots compare: {line}" for line in summary.lines()))


def shared_warmup(
    cfg: TrainConfig, dest: Path, reuse: bool, refs: ReferenceSpec | None = None, ref_dir: Path | None = None
) -> TrainConfig:
    """Run the supervised warm-up once; every method then starts from ``dest`` (the config
    returned: ``model`` is ``dest``, no warm-up of its own). With ``refs``, the same warm-up
    stream also yields the reference models: its model after ``refs.weak_sft_steps`` and
    ``refs.strong_sft_steps`` steps, saved to ``ref_dir/sft<k>``. With ``reuse``, a warm-up (and
    references) already there is kept."""
    import torch

    from ..data import TaskPool
    from .policy import load_policy
    from .sft import sft_warmup

    # Per warm-up stream (by seed): step -> the directories the model after that step goes to (a
    # reference may be the policy's own starting point).
    streams: dict[int, dict[int, list[Path]]] = {cfg.seed: {cfg.sft_steps: [dest]}}
    if refs is not None and ref_dir is not None:
        ref_seed = cfg.seed if refs.seed is None else refs.seed
        for k in (refs.weak_sft_steps, refs.strong_sft_steps):
            streams.setdefault(ref_seed, {}).setdefault(k, []).append(ref_dir / f"sft{k}")
    every = [d for targets in streams.values() for dirs in targets.values() for d in dirs]
    ready = all((d / "config.json").exists() for d in every) and (dest / WARMUP_RECORD).exists()
    if not (reuse and ready):
        from ..llm.models import resolve_device

        device = resolve_device(None if cfg.device == "auto" else cfg.device)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        pool = TaskPool.load(cfg.pool)
        shown = []
        for seed, targets in streams.items():
            stream_cfg = cfg.replace(seed=seed)
            model, tok = load_policy(cfg.model, str(device), cfg.dtype, seed)

            def saver(where: list[Path], model: Any = model, tok: Any = tok) -> Any:
                def save() -> None:
                    for d in where:
                        model.save_pretrained(str(d))
                        tok.save_pretrained(str(d))

                return save

            # One stream to the last checkpoint asked for; the learning rate is constant, so the
            # model after k steps is what a warm-up of k steps gives.
            last = max(targets)
            losses = sft_warmup(
                model,
                tok,
                pool,
                pool.prompts(system_prompt=cfg.system_prompt),
                stream_cfg.replace(sft_steps=last).sft,
                device,
                snapshots={k: saver(d) for k, d in targets.items()},
            )
            label = "" if seed == cfg.seed else f" (reference stream, seed {seed})"
            shown.append(
                f"warm-up{label} loss {losses[0]:.3f} at step 1; "
                + ", ".join(f"{k}: {losses[k - 1]:.3f}" for k in sorted(targets))
            )
        # What --reuse compares before it uses this warm-up again.
        record: dict[str, Any] = {k: v for k, v in cfg.to_dict().items() if k in WARMUP_KEYS}
        record["references"] = None if refs is None else reference_record(refs, cfg.seed)
        (dest / WARMUP_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        print(f"bots compare: {'; '.join(shown)}; saved to {', '.join(map(str, every))}")
    return cfg.replace(model=str(dest), sft_steps=0)
