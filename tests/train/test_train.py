"""GRPO trainer on CPU with the tiny random model and the toy pool: the loss arithmetic against
hand-computed values, a few steps of every selection method, exact resume, config errors."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft import BOTS  # noqa: E402
from bots_rft.cli import main as cli_main  # noqa: E402
from bots_rft.errors import BotsError, CheckpointError, ConfigError  # noqa: E402
from bots_rft.train import load_config  # noqa: E402
from bots_rft.train.grpo import group_advantages, grpo_loss, token_logprobs  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.rollout import completion_mask  # noqa: E402
from bots_rft.train.toy import toy_config  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer, train  # noqa: E402

pytestmark = pytest.mark.slow


def cfg(pool: Path, out: Path, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        steps=2,
        batch_size=4,
        rollouts=4,
        mini_batch_size=2,
        micro_batch_size=8,
        max_new_tokens=6,
        lr=1e-3,
        warmup_steps=2,
        weak_column="weak_pass_rate",
        strong_column="strong_pass_rate",
        eval_every=2,
    )
    return toy_config(pool, out, **{**base, **kw})


# ----------------------------------------------------------------------------- arithmetic
def test_group_advantages_by_hand() -> None:
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    adv = group_advantages(r, eps=0.0)
    std1 = math.sqrt(4 * 0.25 / 3)  # unbiased std of (1,0,0,1)
    assert torch.allclose(adv[0], torch.tensor([0.5, -0.5, -0.5, 0.5]) / std1)
    assert torch.equal(adv[1], torch.zeros(4))  # zero variance: no signal
    std3 = math.sqrt((3 * 0.25**2 + 0.75**2) / 3)
    assert torch.allclose(adv[2], torch.tensor([-0.25, -0.25, -0.25, 0.75]) / std3)
    assert torch.equal(group_advantages(torch.ones(2, 1)), torch.zeros(2, 1))


def test_clipped_surrogate_by_hand() -> None:
    # Two sequences, three token slots; the second sequence has two tokens.
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]))
    old = torch.log(torch.tensor([[0.25, 0.5, 0.5], [0.5, 1.0, 0.5]]))  # ratios 2, 1, 1 | 1, 0.5, -
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    loss, st = grpo_loss(logp, old, adv, mask, clip_eps=0.2)
    # seq 1 (A=1): -min(2, 1.2) = -1.2, -1, -1;  seq 2 (A=-2): -min(-2, -2) = 2, -min(-1, -1.6) = 1.6
    per_token = [-1.2, -1.0, -1.0, 2.0, 1.6]
    assert loss.item() == pytest.approx(sum(per_token) / 5)
    assert st.clip_frac == pytest.approx(2 / 5)  # ratios 2 and 0.5 are outside [0.8, 1.2]
    assert st.tokens == 5
    loss_seq, _ = grpo_loss(logp, old, adv, mask, clip_eps=0.2, loss_agg="seq-mean-token-mean")
    assert loss_seq.item() == pytest.approx(((-1.2 - 1 - 1) / 3 + (2 + 1.6) / 2) / 2)
    # k3 KL: exp(d) - d - 1 with d = ref - logp
    ref = logp + torch.log(torch.tensor(2.0))
    loss_kl, st_kl = grpo_loss(logp, logp, torch.zeros(2), mask, ref_logp=ref, kl_coef=0.5)
    k3 = 2 - math.log(2) - 1
    assert st_kl.kl == pytest.approx(k3, rel=1e-5) and loss_kl.item() == pytest.approx(0.5 * k3, rel=1e-5)


def test_gradient_of_on_policy_loss_is_the_policy_gradient() -> None:
    # ratio = 1 on-policy: d/dθ of the surrogate is -A * d logp / dθ (no clipping at 1).
    logits = torch.randn(1, 3, 5, requires_grad=True)
    targets = torch.tensor([[1, 2, 3]])
    logp = token_logprobs(logits, targets)
    loss, _ = grpo_loss(logp, logp.detach(), torch.tensor([2.0]), torch.ones(1, 3))
    loss.backward()
    expected = torch.autograd.grad((-2.0 * token_logprobs(logits, targets)).mean(), logits)[0]
    assert torch.allclose(logits.grad, expected, atol=1e-6)


def test_completion_mask_keeps_first_eos_only() -> None:
    comp = torch.tensor([[5, 6, 9, 9, 9], [5, 5, 5, 5, 5], [9, 1, 9, 2, 2]])
    assert completion_mask(comp, [9]).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]


# ---------------------------------------------------------------------------------- runs
@pytest.mark.parametrize("method", ["bots", "random", "offline", "mopps", "dots", "dynamic"])
def test_each_method_trains(method: str, toy_pool: Path, tmp_path: Path) -> None:
    res = train(cfg(toy_pool, tmp_path, method=method, oversample=2.0, max_rounds=2))
    assert res.steps_done == 2 and not res.interrupted
    recs = read_metrics(res.metrics_path)
    steps = [r for r in recs if r["kind"] == "train"]
    evals = [r for r in recs if r["kind"] == "eval"]
    assert [r["step"] for r in steps] == [1, 2] and [r["step"] for r in evals] == [0, 2]
    for r in steps:
        assert len(r["task_ids"]) == 4 and len(set(r["task_ids"])) == 4
        assert all(0 <= s <= 4 for s in r["successes"])
        assert 0.0 <= r["etr"] <= 1.0 and math.isfinite(r["loss"]) and r["gen_tokens"] > 0
        assert r["optimizer_updates"] == 2  # batch 4 / mini-batch 2
        assert 0.0 <= r["zero_variance_share"] <= 1.0  # calibration of the picks (bots_rft.metrics.calibration)
    assert evals[-1]["tasks"] == 3 and "toy/first_char" in evals[-1]["by_source"]
    if method == "dynamic":
        assert all(r["rollouts"] == 16 + r["extra_rollouts"] for r in steps)
        assert sum(r["extra_rollouts"] for r in steps) > 0  # oversampling 2x costs rollouts
    if method == "bots":
        assert steps[-1]["capability"] is not None  # interpolation evidence on
    if method in ("bots", "mopps", "dots"):  # what BOTS drew for its picks, as distributions
        for r in steps:
            assert r["pick_mean_p10"] <= r["pick_mean_p50"] <= r["pick_mean_p90"]
            assert 0.0 <= r["pick_theta_p50"] <= 1.0
            assert 0.0 <= r["calibration_brier"] <= 1.0 and 0.0 <= r["calibration_ece"] <= 1.0
    else:
        assert "pick_theta_p50" not in steps[-1]
        assert "calibration_brier" not in steps[-1]  # no posterior, no prediction
    assert (tmp_path / "checkpoints" / "latest").exists()


def test_kl_and_multiple_epochs(toy_pool: Path, tmp_path: Path) -> None:
    res = train(
        cfg(
            toy_pool,
            tmp_path,
            steps=1,
            kl_coef=0.1,
            ppo_epochs=2,
            gradient_checkpointing=True,
            loss_agg="seq-mean-token-mean",
        )
    )
    rec = res.history[0]
    assert rec["optimizer_updates"] == 4 and rec["kl"] >= 0.0


def _weights(out: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    ckpt = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    return load_file(ckpt / "model.safetensors")


@pytest.mark.parametrize("method", ["bots", "dynamic"])
def test_resume_is_exact(method: str, toy_pool: Path, tmp_path: Path) -> None:
    straight = train(cfg(toy_pool, tmp_path / "a", steps=4, method=method, oversample=2.0))
    first = train(cfg(toy_pool, tmp_path / "b", steps=2, method=method, oversample=2.0))
    assert first.steps_done == 2
    resumed = train(cfg(toy_pool, tmp_path / "b", steps=4, method=method, oversample=2.0, resume=True))
    assert resumed.steps_done == 4
    a = [r for r in read_metrics(straight.metrics_path) if r["kind"] == "train"]
    b = [r for r in read_metrics(resumed.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["task_ids"] == rb["task_ids"] and ra["successes"] == rb["successes"]
        assert ra["loss"] == rb["loss"]
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_sigterm_checkpoints_and_stops(toy_pool: Path, tmp_path: Path) -> None:
    import os
    import signal

    trainer = GRPOTrainer(cfg(toy_pool, tmp_path, steps=5))
    real_step = trainer.train_step

    def step_then_term() -> dict[str, Any]:
        rec = real_step()
        if rec["step"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return rec

    trainer.train_step = step_then_term  # type: ignore[method-assign]
    res = trainer.run()
    trainer.close()
    assert res.interrupted and res.steps_done == 2
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "step_000002"


def test_building_a_trainer_trains_nothing_and_run_warms_up_first(toy_pool: Path, tmp_path: Path) -> None:
    """The constructor builds policy, optimizer and selector; the supervised warm-up is run()'s
    first stage, and its losses reach the run's first record. The KL reference is the warmed-up
    policy."""
    trainer = GRPOTrainer(cfg(toy_pool, tmp_path, steps=1, sft_steps=2, sft_batch_size=2, kl_coef=0.1))
    try:
        built = [p.detach().clone() for p in trainer.model.parameters()]
        assert trainer.sft_losses == [] and trainer.step == 0
        assert len(trainer.warm_up()) == 2
        warmed = [p.detach().clone() for p in trainer.model.parameters()]
        assert not all(torch.equal(a, b) for a, b in zip(built, warmed))
        assert trainer.ref_model is not None
        assert all(torch.equal(a, b) for a, b in zip(warmed, trainer.ref_model.parameters()))
        res = trainer.run()  # the warm-up already ran: run() does not repeat it
    finally:
        trainer.close()
    assert res.steps_done == 1 and len(trainer.sft_losses) == 2
    first = read_metrics(tmp_path / "metrics.jsonl")[0]
    assert first["kind"] == "config" and first["sft_losses"] == trainer.sft_losses


def test_corrupt_checkpoint_is_refused(toy_pool: Path, tmp_path: Path) -> None:
    train(cfg(toy_pool, tmp_path, steps=1))
    ckpt = tmp_path / "checkpoints" / "step_000001"
    (ckpt / "optimizer.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="optimizer.safetensors"):
        GRPOTrainer(cfg(toy_pool, tmp_path, steps=2, resume=True))
    with pytest.raises(ConfigError, match="method"):
        (ckpt / "optimizer.safetensors").unlink()
        train(cfg(toy_pool, tmp_path / "c", steps=1))
        GRPOTrainer(cfg(toy_pool, tmp_path / "c", steps=2, resume=True, method="random"))


# ------------------------------------------------------------------------- config and CLI
def test_config_files_and_overrides(tmp_path: Path, toy_pool: Path) -> None:
    y = tmp_path / "c.yaml"
    y.write_text(f"pool: {toy_pool}\nsteps: 3\nmethod: random\nverifiers: {{toy: 'bots_rft.train.toy:toy_reward'}}\n")
    c = load_config(y, ["steps=7", "lr=1e-5", "system_prompt=null", "thompson=false"])
    assert (c.steps, c.lr, c.method, c.system_prompt, c.thompson) == (7, 1e-5, "random", None, False)
    t = tmp_path / "c.toml"
    t.write_text(f'[train]\npool = "{toy_pool}"\nbatch_size = 2\nmini_batch_size = 1\n')
    assert load_config(t).batch_size == 2


@pytest.mark.parametrize(
    ("text", "overrides", "match"),
    [
        ("steps: 0\n", [], r"steps: must be an integer >= 1, got 0"),
        ("method: greedy\n", [], r"method: expected one of .* got 'greedy'"),
        ("lam: 2\n", [], r"lam: must lie in \[0, 1\], got 2"),
        ("", ["min_gap=-0.5"], r"min_gap: must lie in \(0, 1\), got -0.5"),
        ("bogus: 1\n", [], r"unknown key\(s\) \['bogus'\]"),
        ("", ["steps=ten"], r"steps: expected int, got 'ten'"),
        ("", ["nokey"], r"expected KEY=VALUE"),
        ("batch_size: 4\nmini_batch_size: 3\n", [], r"mini_batch_size: must divide batch_size=4"),
        ("method: offline\n", [], r"offline.*weak_column"),
        ("- a\n- b\n", [], r"must hold a mapping"),
        ("steps: [1\n", [], r"cannot parse"),
    ],
)
def test_config_errors_name_key_and_value(tmp_path: Path, text: str, overrides: list[str], match: str) -> None:
    y = tmp_path / "bad.yaml"
    y.write_text("pool: p.parquet\n" + text if not text.startswith("-") else text)
    with pytest.raises(ConfigError, match=match):
        load_config(y, overrides)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_a_config_is_valid_once_built_and_hands_the_leaves_their_part() -> None:
    """Building, loading and replacing all validate; an alias resolves to the canonical method;
    errors are one line naming key and value; the leaves' views carry the config's values."""
    from bots_rft.train.config import GRPOUpdate, PolicyAdaptation, SFTWarmup, TrainConfig

    c = load_config(None, {"pool": "p.parquet", "method": "dapo", "sft_steps": "3", "lora_r": 4})
    assert c.method == "dynamic" and c.sft_steps == 3
    with pytest.raises(ConfigError, match=r"^lr: must be a finite number > 0, got -1$"):
        c.replace(lr=-1)
    with pytest.raises(ConfigError, match=r"^eval_limit: must be an integer >= 1 or null, got 0$"):
        TrainConfig(pool="p.parquet", eval_limit=0)
    with pytest.raises(ConfigError, match=r"^steps: expected int, got True"):
        TrainConfig(pool="p.parquet", steps=True)
    assert isinstance(c.grpo, GRPOUpdate) and (c.grpo.mini_batch, c.grpo.clip_eps) == (c.batch_size, c.clip_eps)
    assert isinstance(c.sft, SFTWarmup) and (c.sft.steps, c.sft.lr, c.sft.seed) == (3, c.sft_lr, c.seed)
    assert c.adaptation == PolicyAdaptation(lora_r=4)


def test_cli_train(toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    y = tmp_path / "c.yaml"
    y.write_text(
        f"pool: {toy_pool}\nverifiers: {{toy: 'bots_rft.train.toy:toy_reward'}}\nsteps: 1\nbatch_size: 2\n"
        "rollouts: 2\nmax_new_tokens: 4\ndevice: cpu\ntensorboard: false\n"
    )
    assert (
        cli_main(
            [
                "train",
                "--config",
                str(y),
                "--model",
                "tiny",
                "--out",
                str(tmp_path / "o"),
                "--no-progress",
                "method=random",
            ]
        )
        == 0
    )
    assert "done after step 1" in capsys.readouterr().out
    assert cli_main(["train", "--config", str(y), "steps=-1"]) == 2
    assert "steps: must be an integer >= 1, got -1" in capsys.readouterr().err


def test_unknown_model_is_a_config_error(toy_pool: Path, tmp_path: Path) -> None:
    with pytest.raises(BotsError, match="model"):
        GRPOTrainer(cfg(toy_pool, tmp_path, model=str(tmp_path / "nope")))


def test_system_prompt_replacement(toy_pool: Path) -> None:
    from bots_rft.data import TaskPool

    pool = TaskPool.load(toy_pool)
    assert pool.prompts(system_prompt="S")[0][0] == {"role": "system", "content": "S"}
    assert all(m["role"] != "system" for m in pool.prompts(system_prompt="")[0])
    assert np.all([c == p for c, p in zip(pool.prompts(system_prompt=None), pool.prompts())])


def test_selector_gets_the_configured_estimator(toy_pool: Path) -> None:
    """momentum and min_gap reach the interpolation estimator the trainer builds."""
    from bots_rft import Interpolation
    from bots_rft.train import load_config
    from bots_rft.train.run_selector import make_selector

    # dots needs the reference columns named (make_selector takes their rates as given here).
    refs = {"weak_column": "weak", "strong_column": "strong"}
    cfg = load_config(None, {"pool": str(toy_pool), "momentum": 0.5, "min_gap": 0.05, **refs})
    weak, strong = np.array([0.1, 0.2]), np.array([0.3, 0.4])
    sel = make_selector(cfg, 2, weak, strong)
    ev = sel.evidence  # type: ignore[attr-defined]
    assert isinstance(ev, Interpolation) and (ev.momentum, ev.min_gap) == (0.5, 0.05)
    assert make_selector(cfg.replace(method="dots"), 2, weak, strong).evidence.min_gap == 0.05  # type: ignore[attr-defined]


def _scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_tensorboard_scalars_and_resume_purge(toy_pool: Path, tmp_path: Path) -> None:
    """TensorBoard gets every numeric field of the JSONL records; a resumed run purges the events
    the interrupted run logged after its checkpoint, as it does the JSONL records."""
    pytest.importorskip("tensorboard")
    out = tmp_path / "tb"
    kw: dict[str, Any] = dict(tensorboard=True, save_every=2, keep_checkpoints=5)
    train(cfg(toy_pool, out, steps=3, **kw))
    rewards = _scalars(out, "train/reward_mean")
    jsonl = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert [s for s, _ in rewards] == [1, 2, 3]
    assert [v for _, v in rewards] == pytest.approx([r["reward_mean"] for r in jsonl])
    assert [s for s, _ in _scalars(out, "eval/accuracy")] == [0, 2, 3]
    # Pretend the run died after step 3 but before its final checkpoint: resume from step 2.
    (out / "checkpoints" / "latest").write_text("step_000002")
    train(cfg(toy_pool, out, steps=4, resume=True, **kw))
    steps = [s for s, _ in _scalars(out, "train/reward_mean")]
    assert steps == [1, 2, 3, 4]  # step 3 once: the interrupted run's event was purged


def test_print_config_is_a_config_file(toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--print-config`` shows every key as resolved (file + overrides) and reads back as the
    same config; nothing is trained."""
    src = tmp_path / "c.yaml"
    src.write_text(f"pool: {toy_pool}\nsteps: 7\nmethod: mopps\n")
    assert cli_main(["train", "--config", str(src), "--print-config", "lr=3e-5", "min_gap=0.05"]) == 0
    text = capsys.readouterr().out
    printed = tmp_path / "printed.yaml"
    printed.write_text(text)
    cfg = load_config(printed)
    assert (cfg.steps, cfg.method, cfg.lr, cfg.min_gap) == (7, "mopps", 3e-5, 0.05)
    assert cfg == load_config(src, ["lr=3e-5", "min_gap=0.05"])
    assert all(f"\n{f}:" in "\n" + text for f in type(cfg).model_fields)
    assert not (Path(cfg.out_dir) / "metrics.jsonl").exists()


def _saved_selector(out: Path) -> BOTS:
    ckpt = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    return BOTS.load(ckpt / "selector.bots")


def test_resume_with_other_selection_parameters_is_an_explicit_choice(toy_pool: Path, tmp_path: Path) -> None:
    train(cfg(toy_pool, tmp_path, steps=1, eval_every=0))
    before = (tmp_path / "checkpoints" / "latest").read_text()
    # Refused by default, naming the parameter and both values; nothing written.
    with pytest.raises(ConfigError, match=r"lam: .*0\.1.*0\.3.*resume_params"):
        train(cfg(toy_pool, tmp_path, steps=2, eval_every=0, resume=True, lam=0.3))
    assert (tmp_path / "checkpoints" / "latest").read_text() == before
    with pytest.raises(ConfigError, match="resume_params"):
        cfg(toy_pool, tmp_path, resume_params="sometimes")
    # resume_params=checkpoint keeps the saved value ...
    keep = tmp_path / "keep"
    shutil.copytree(tmp_path, keep, ignore=shutil.ignore_patterns("keep"))
    train(cfg(toy_pool, keep, steps=2, eval_every=0, resume=True, lam=0.3, resume_params="checkpoint"))
    assert _saved_selector(keep).lam == 0.1
    # ... resume_params=config applies the new one from the resumed step on, and checkpoints it.
    res = train(
        cfg(toy_pool, tmp_path, steps=2, eval_every=0, resume=True, lam=0.3, target=0.4, resume_params="config")
    )
    assert res.steps_done == 2
    sel = _saved_selector(tmp_path)
    assert sel.lam == 0.3 and sel.target == 0.4 and sel.rho == 0.1
