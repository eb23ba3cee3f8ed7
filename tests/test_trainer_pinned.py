"""The trainer's results pinned: a few CPU steps of the tiny model per selection mode, each
step's selected task ids, successes, extra rollouts and losses, and the final weights, compared
with values recorded from the trainer before its stages were rewritten (tests/data/
trainer_pinned.json). Restructuring the trainer must not change what it selects or learns.

Regenerate (only when a change of results is intended, e.g. a torch upgrade that moves the
tiny model's numbers): ``python tests/test_trainer_pinned.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft.train.toy import toy_config, write_toy_pool  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer  # noqa: E402

PINNED = Path(__file__).parent / "data" / "trainer_pinned.json"

# Each run: 3 steps of 4 tasks x 4 rollouts; mini-batches of 2 tasks (2 optimizer updates a
# step), micro-batches of 4 sequences (2 accumulated backward passes an update).
RUNS: dict[str, dict[str, Any]] = {
    "bots": dict(method="bots"),
    "random": dict(method="random"),
    "dynamic": dict(method="dynamic"),  # DAPO's baseline: epoch order + the filter
    "bots+dynamic_sampling": dict(method="bots", dynamic_sampling=True),
    "bots+kl+epochs": dict(method="bots", kl_coef=0.1, ppo_epochs=2),  # old and reference log-probs
}
STEP_EXACT = ("task_ids", "successes", "rollouts", "extra_rollouts", "cum_rollouts", "optimizer_updates")
STEP_CLOSE = ("reward_mean", "loss", "pg_loss", "kl", "grad_norm", "clip_frac", "ratio_mean")


def _config(pool: Path, out: Path, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        steps=3,
        batch_size=4,
        rollouts=4,
        mini_batch_size=2,
        micro_batch_size=4,
        max_new_tokens=6,
        lr=1e-3,
        warmup_steps=2,
        weak_column="weak_pass_rate",
        strong_column="strong_pass_rate",
        eval_every=0,
        oversample=2.0,
        max_rounds=2,
    )
    return toy_config(pool, out, **{**base, **kw})


def _run(pool: Path, out: Path, **kw: Any) -> dict[str, Any]:
    trainer = GRPOTrainer(_config(pool, out, **kw))
    try:
        res = trainer.run()
        weights = sum(float(p.detach().double().sum()) for p in trainer.model.parameters())
    finally:
        trainer.close()
    steps = [{k: rec[k] for k in STEP_EXACT + STEP_CLOSE} for rec in res.history]
    return {"steps": steps, "weights": weights}


def _pool(directory: Path) -> Path:
    train_path, _ = write_toy_pool(directory, num_tasks=12, eval_tasks=3)
    return train_path


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _pool(tmp_path_factory.mktemp("pinned"))


@pytest.mark.parametrize("name", list(RUNS))
def test_trainer_results_are_the_pinned_ones(name: str, pool: Path, tmp_path: Path) -> None:
    want = json.loads(PINNED.read_text())[name]
    got = _run(pool, tmp_path, **RUNS[name])
    assert len(got["steps"]) == len(want["steps"]) == 3
    for step, (g, w) in enumerate(zip(got["steps"], want["steps"]), start=1):
        for key in STEP_EXACT:
            assert g[key] == w[key], f"{name} step {step}: {key}"
        for key in STEP_CLOSE:
            assert g[key] == pytest.approx(w[key], rel=1e-6, abs=1e-9), f"{name} step {step}: {key}"
    assert got["weights"] == pytest.approx(want["weights"], rel=1e-6)


if __name__ == "__main__":  # regenerate the pinned values
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        toy = _pool(Path(tmp) / "pool")
        pinned = {name: _run(toy, Path(tmp) / name.replace("+", "_"), **kw) for name, kw in RUNS.items()}
    lines = []  # one line a step, to read and diff
    for name, run in pinned.items():
        steps = ",\n".join(f"   {json.dumps(step)}" for step in run["steps"])
        lines.append(f' {json.dumps(name)}: {{\n  "steps": [\n{steps}\n  ],\n  "weights": {run["weights"]!r}\n }}')
    PINNED.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    sys.stdout.write(f"wrote {PINNED}\n")
