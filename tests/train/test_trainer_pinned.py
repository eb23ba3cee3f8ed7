"""The trainer's results pinned: a few CPU steps of the tiny model per selection mode, each
step's selected task ids, successes, extra rollouts and losses, and the final weights, compared
with pinned values (tests/data/trainer_pinned.json). Restructuring the trainer must not change
what it selects or learns.

What is pinned, and how close a result must be (the tolerance rule):

- Task ids, successes, rollout counts and optimizer updates are compared exactly. They come from
  the Rust core and from seeded draws; the tiny model's weights are drawn on an integer grid
  (``portable_init``), so they are the same on every CPU.
- The pins are the results of a **float64** run (``dtype: float64``). float64 results must equal
  them to ``2**-40 * max(1, |pin|)``: the differences between CPU kernels (vector widths change
  the order of sums) were at most 7e-16 across AVX-512, AVX2 and the scalar default kernels,
  and 2**-40 (9.1e-13) leaves room for other BLAS builds while a change of one float32 ulp
  (2**-23 relative) in the loss is still ~1e5 times too large to pass
  (``test_a_one_ulp_change_in_the_loss_fails_the_pins``).
- A **float32** run (the trainer's default) must match the same float64 pins to
  ``2**-16 * max(1, |pin|)``: every kernel's float32 result lies within rounding error of the
  exact one, for which the float64 run stands in, so one bound covers every instruction set. The
  bound is 256 float32 unit roundoffs (2**-24 each) scaled by max(1, |value|) because losses
  are means of terms of size ~1 that cancel; the largest |float32 - float64| seen was 8.0e-7
  (a grad norm), 19 times inside it.

``test_pins_hold_under_each_instruction_set`` reruns these checks in a fresh process per CPU
instruction set the host supports (``ATEN_CPU_CAPABILITY`` default, avx2, avx512, with MKL and
oneDNN held to the same set), so a value that depends on one CPU fails on the machine that
recorded it. ``test_pins_hold_under_each_numpy_level`` does the same per numpy SIMD level
(``NPY_DISABLE_CPU_FEATURES``, down to the build's baseline), with torch on its native set.

Regenerate (only when a change of results is intended, e.g. a torch upgrade that moves the
tiny model's numbers): ``python tests/train/test_trainer_pinned.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft.train import optimise  # noqa: E402
from bots_rft.train.toy import toy_config, write_toy_pool  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer  # noqa: E402
from numpy_levels import Level, check_expected, level_env, levels  # noqa: E402
from torch_levels import ISA_LADDER, isa_env, skip_reason  # noqa: E402
from torch_levels import check_expected as check_expected_isa  # noqa: E402

pytestmark = pytest.mark.slow

PINNED = Path(__file__).parents[1] / "data" / "trainer_pinned.json"

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
#: Relative tolerance (of max(1, |pin|)) per precision of the run; the module docstring says why.
TOLERANCE = {"float64": 2.0**-40, "float32": 2.0**-16}


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


def mismatches(got: dict[str, Any], want: dict[str, Any], tol: float) -> list[str]:
    """Every field of ``got`` that differs from the pinned ``want``: exact fields at all, float
    fields by more than ``tol * max(1, |pin|)``."""
    out = []
    if len(got["steps"]) != len(want["steps"]):
        return [f"steps: {len(got['steps'])} != {len(want['steps'])}"]
    for step, (g, w) in enumerate(zip(got["steps"], want["steps"]), start=1):
        out += [f"step {step} {k}: {g[k]} != {w[k]}" for k in STEP_EXACT if g[k] != w[k]]
        out += [
            f"step {step} {k}: {g[k]!r} vs pinned {w[k]!r} (|diff| {abs(g[k] - w[k]):.3g} > {tol * max(1.0, abs(w[k])):.3g})"
            for k in STEP_CLOSE
            if abs(g[k] - w[k]) > tol * max(1.0, abs(w[k]))
        ]
    if abs(got["weights"] - want["weights"]) > tol * max(1.0, abs(want["weights"])):
        out.append(f"weights: {got['weights']!r} vs pinned {want['weights']!r}")
    return out


def _pool(directory: Path) -> Path:
    train_path, _ = write_toy_pool(directory, num_tasks=12, eval_tasks=3)
    return train_path


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _pool(tmp_path_factory.mktemp("pinned"))


@pytest.fixture(scope="module", autouse=True)
def _expected_isa() -> None:
    """In a per-instruction-set or per-numpy-level run, the process really runs at that level."""
    check_expected_isa()
    check_expected()


@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("name", list(RUNS))
def test_trainer_results_are_the_pinned_ones(name: str, dtype: str, pool: Path, tmp_path: Path) -> None:
    want = json.loads(PINNED.read_text())[name]
    got = _run(pool, tmp_path, dtype=dtype, **RUNS[name])
    bad = mismatches(got, want, TOLERANCE[dtype])
    assert not bad, f"{name} ({dtype}, {torch.backends.cpu.get_cpu_capability()}):\n" + "\n".join(bad)


def test_a_one_ulp_change_in_the_loss_fails_the_pins(
    pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The float64 tolerance is tight enough to see the smallest change a float32 loss formula
    can make: the loss scaled by 1 + 2**-23."""
    real = optimise.grpo_loss

    def one_ulp_more(*args: Any, **kwargs: Any) -> Any:
        loss, stats = real(*args, **kwargs)
        return loss * (1.0 + 2.0**-23), stats

    monkeypatch.setattr(optimise, "grpo_loss", one_ulp_more)
    want = json.loads(PINNED.read_text())["bots+kl+epochs"]
    got = _run(pool, tmp_path, dtype="float64", **RUNS["bots+kl+epochs"])
    bad = mismatches(got, want, TOLERANCE["float64"])
    assert any(" loss:" in line for line in bad), bad


@pytest.mark.parametrize("isa", ISA_LADDER)
def test_pins_hold_under_each_instruction_set(isa: str) -> None:
    reason = skip_reason(isa)
    if reason:
        pytest.skip(reason)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "results_are_the_pinned"]
    cmd += ["-m", ""]  # every tier: this module is marked slow, which a bare pytest leaves out
    done = subprocess.run(cmd, env=isa_env(isa), capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, f"pinned results under ATEN_CPU_CAPABILITY={isa}:\n{done.stdout[-6000:]}"
    assert f"{len(RUNS) * len(TOLERANCE)} passed" in done.stdout, done.stdout[-2000:]


_NUMPY_LEVELS = levels()


@pytest.mark.parametrize("level", _NUMPY_LEVELS, ids=[lv.name for lv in _NUMPY_LEVELS])
def test_pins_hold_under_each_numpy_level(level: Level) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "results_are_the_pinned"]
    cmd += ["-m", ""]  # every tier: this module is marked slow, which a bare pytest leaves out
    done = subprocess.run(cmd, env=level_env(level), capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, (
        f"pinned results with NPY_DISABLE_CPU_FEATURES={level.disable!r}:\n{done.stdout[-6000:]}"
    )
    assert f"{len(RUNS) * len(TOLERANCE)} passed" in done.stdout, done.stdout[-2000:]


if __name__ == "__main__":  # regenerate the pinned values (from a float64 run)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        toy = _pool(Path(tmp) / "pool")
        pinned = {
            name: _run(toy, Path(tmp) / name.replace("+", "_"), dtype="float64", **kw) for name, kw in RUNS.items()
        }
    lines = []  # one line a step, to read and diff
    for name, run in pinned.items():
        steps = ",\n".join(f"   {json.dumps(step)}" for step in run["steps"])
        lines.append(f' {json.dumps(name)}: {{\n  "steps": [\n{steps}\n  ],\n  "weights": {run["weights"]!r}\n }}')
    PINNED.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    sys.stdout.write(f"wrote {PINNED}\n")
