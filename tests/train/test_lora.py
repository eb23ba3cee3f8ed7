"""Parameter-efficient GRPO on CPU with the tiny model and the toy pool: LoRA adapters (peft)
and training only the top layers train only what they should, checkpoint only that (an
adapter-only safetensors checkpoint for LoRA), resume exactly, and refuse bad settings by key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from safetensors.torch import load_file  # noqa: E402

from bots_rft.errors import ConfigError  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.lora import is_adapter_model  # noqa: E402
from bots_rft.train.policy import load_policy  # noqa: E402
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
        lr=1e-2,
        warmup_steps=0,
        eval_every=0,
    )
    return toy_config(pool, out, **{**base, **kw})


LORA: dict[str, Any] = dict(lora_r=4, lora_alpha=8, rollout_engine="fast")


def _checkpoint(out: Path) -> Path:
    root = out / "checkpoints"
    return root / (root / "latest").read_text().strip()


def _run(config: Any) -> tuple[GRPOTrainer, Any]:
    trainer = GRPOTrainer(config)
    try:
        return trainer, trainer.run()
    finally:
        trainer.close()


def test_lora_trains_only_the_adapter(toy_pool: Path, tmp_path: Path) -> None:
    trainer, _ = _run(cfg(toy_pool, tmp_path, **LORA))
    assert is_adapter_model(trainer.model)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    optimised = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert optimised == {id(p) for p in trainer.model.parameters() if p.requires_grad}
    # The base weights are the freshly loaded model's; the adapter moved off its zero start.
    base = load_policy("tiny", "cpu", "auto", 0)[0].state_dict()
    policy: Any = trainer.model
    frozen = {n: p for n, p in policy.get_base_model().named_parameters() if ".lora_" not in n}
    assert frozen and all(torch.equal(p, base[n.replace(".base_layer", "")]) for n, p in frozen.items())
    assert any(float(p.detach().abs().sum()) > 0 for n, p in trainer.model.named_parameters() if ".lora_B." in n)


def test_lora_checkpoint_holds_only_the_adapter(toy_pool: Path, tmp_path: Path) -> None:
    train(cfg(toy_pool, tmp_path, **LORA))
    ckpt = _checkpoint(tmp_path)
    assert not (ckpt / "model.safetensors").exists() and not (ckpt / "model.json").exists()
    adapter = ckpt / "adapter"
    assert (adapter / "adapter_config.json").is_file()
    tensors = load_file(str(adapter / "adapter_model.safetensors"))
    assert tensors and all(".lora_A." in k or ".lora_B." in k for k in tensors)
    assert not list(ckpt.rglob("*.bin")) and not list(ckpt.rglob("*.pt"))  # no pickles


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(LORA, id="lora+fast"),
        pytest.param(dict(lora_r=4, train_top_layers=1), id="lora-top-layer"),
        pytest.param(dict(train_top_layers=1, rollout_engine="fast"), id="top-layer"),
        pytest.param(dict(LORA, rollout_precision="int8"), id="lora+fast+int8"),
    ],
)
def test_resume_is_exact(mode: dict[str, Any], toy_pool: Path, tmp_path: Path) -> None:
    straight, _ = _run(cfg(toy_pool, tmp_path / "a", steps=4, **mode))
    _run(cfg(toy_pool, tmp_path / "b", steps=2, **mode))
    resumed, res = _run(cfg(toy_pool, tmp_path / "b", steps=4, resume=True, **mode))
    assert res.steps_done == 4
    a = [r for r in read_metrics(tmp_path / "a" / "metrics.jsonl") if r["kind"] == "train"]
    b = [r for r in read_metrics(res.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["task_ids"] == rb["task_ids"] and ra["successes"] == rb["successes"]
        assert ra["loss"] == rb["loss"] and ra["grad_norm"] == rb["grad_norm"]
    wa, wb = dict(straight.model.named_parameters()), dict(resumed.model.named_parameters())
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    sa, sb = straight.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k]["exp_avg"], sb[k]["exp_avg"]) for k in sa)


def test_top_layers_train_and_checkpoint_alone(toy_pool: Path, tmp_path: Path) -> None:
    trainer, _ = _run(cfg(toy_pool, tmp_path, train_top_layers=1))
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.layers.1.", "model.norm.")) for n in trainable)
    base, _ = load_policy("tiny", "cpu", "auto", 0)
    params = dict(trainer.model.named_parameters())
    assert all(torch.equal(params[n], p) for n, p in base.named_parameters() if n not in trainable)
    assert any(not torch.equal(params[n], p) for n, p in base.named_parameters() if n in trainable)
    saved = load_file(str(_checkpoint(tmp_path) / "model.safetensors"))
    assert len(saved) == len(trainable)


def test_resume_with_another_lora_rank_is_refused(toy_pool: Path, tmp_path: Path) -> None:
    train(cfg(toy_pool, tmp_path, **LORA))
    with pytest.raises(ConfigError, match=r"lora_r: .*4.*8"):
        GRPOTrainer(cfg(toy_pool, tmp_path, steps=3, resume=True, **{**LORA, "lora_r": 8}))


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(lora_r=-1), r"lora_r: .*-1"),
        (dict(lora_r=4, lora_alpha=0), r"lora_alpha: .*0"),
        (dict(lora_r=4, lora_dropout=1.0), r"lora_dropout: .*1\.0"),
        (dict(lora_r=4, lora_target_modules="q_proj;v_proj"), r"lora_target_modules: .*q_proj;v_proj"),
        (dict(train_top_layers=0), r"train_top_layers: .*0"),
        (dict(rollout_engine="vllm"), r"rollout_engine: .*vllm"),
        (dict(rollout_precision="fp16"), r"rollout_precision: .*fp16"),
        (dict(rollout_precision="int8"), r"rollout_precision: .*lora_r or train_top_layers.*int8"),
    ],
)
def test_bad_settings_name_their_key(overrides: dict[str, Any], match: str, toy_pool: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=match):
        cfg(toy_pool, tmp_path, **overrides)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(lora_r=4, lora_target_modules="q_proj,qkv"), r"lora_target_modules: .*qkv"),
        (dict(lora_r=4, train_top_layers=3), r"train_top_layers: .*2 decoder layers, got 3"),
        (dict(train_top_layers=5), r"train_top_layers: .*2 decoder layers, got 5"),
    ],
)
def test_settings_the_model_lacks_name_their_key(
    overrides: dict[str, Any], match: str, toy_pool: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=match):
        GRPOTrainer(cfg(toy_pool, tmp_path, **overrides))


def test_int8_twin_shares_the_trainable_weights_and_quantizes_the_frozen(toy_pool: Path, tmp_path: Path) -> None:
    """rollout_precision=int8 samples with a twin whose frozen linear layers are int8 and whose
    adapter tensors are the policy's own (so it follows every update); the policy, which the loss
    uses, keeps its float32 layers; the twin's next-token distribution stays close to the policy's."""
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear

    trainer, _ = _run(cfg(toy_pool, tmp_path, **LORA, rollout_precision="int8"))
    twin = trainer._int8_twin()
    assert twin is trainer._int8_twin()  # built once
    policy = dict(trainer.model.named_parameters())
    mine = dict(twin.named_parameters())
    trainable = [n for n, p in policy.items() if p.requires_grad]
    assert trainable and all(mine[n] is policy[n] for n in trainable)
    assert any(isinstance(m, Int8Linear) for m in twin.modules())
    assert not any(isinstance(m, Int8Linear) for m in trainer.model.modules())
    ids = torch.randint(0, 200, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        p = torch.softmax(trainer.model(input_ids=ids).logits, -1)
        q = torch.softmax(twin(input_ids=ids).logits, -1)
    assert float((p - q).abs().sum(-1).max()) / 2 < 0.05  # total variation per position


def test_a_trained_adapter_loads_merged_from_any_of_its_paths(toy_pool: Path, tmp_path: Path) -> None:
    """``load_model(base, adapter=...)`` gives the trained policy's logits with the adapter merged
    into plain weights; the adapter is found from the run directory, its checkpoints/, one
    checkpoint, or the adapter directory itself."""
    from bots_rft.llm.models import load_model
    from bots_rft.train.run_checkpoint import resolve_adapter

    trainer, _ = _run(cfg(toy_pool, tmp_path, **LORA))
    adapter = _checkpoint(tmp_path) / "adapter"
    for path in (tmp_path, tmp_path / "checkpoints", _checkpoint(tmp_path), adapter):
        assert resolve_adapter(path) == adapter
    merged, _tok = load_model("tiny", device="cpu", adapter=adapter)
    assert not is_adapter_model(merged) and not any(".lora_" in n for n, _ in merged.named_parameters())
    base, _tok = load_model("tiny", device="cpu")
    ids = torch.randint(0, 200, (2, 9), generator=torch.Generator().manual_seed(0))
    trainer.model.eval()
    with torch.no_grad():
        want = trainer.model(input_ids=ids).logits
        got = merged(input_ids=ids).logits
        untrained = base(input_ids=ids).logits
    assert float((want - untrained).abs().max()) > 1e-3  # the adapter changed something
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_refeval_measures_a_lora_run(toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``bots refeval --adapter RUN`` writes the trained policy's pass rates as a column."""
    from bots_rft.cli import main
    from bots_rft.data import TaskPool

    _run(cfg(toy_pool, tmp_path / "run", **LORA))
    out = tmp_path / "pool.parquet"
    argv = ["refeval", "--model", "tiny", "--adapter", str(tmp_path / "run"), "--pool", str(toy_pool)]
    argv += ["--out", str(out), "--column", "lora_pass_rate", "--rollouts", "2", "--max-new-tokens", "4"]
    assert main([*argv, "--device", "cpu", "--workers", "0"]) == 0
    assert "wrote column 'lora_pass_rate'" in capsys.readouterr().out
    rates = TaskPool.load(out).pass_rate("lora_pass_rate")
    assert len(rates) == len(TaskPool.load(toy_pool)) and ((rates >= 0) & (rates <= 1)).all()


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda d: d / "missing", "--adapter: "),
        (lambda d: d, "adapter: .* is neither a peft adapter directory"),
        (lambda d: d / "pickled", "adapter: .* is not a peft adapter directory"),
    ],
    ids=["missing", "not-an-adapter", "pickle-only"],
)
def test_refeval_refuses_what_is_not_an_adapter(
    make: Any, text: str, toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path that is not an adapter exits 2 naming --adapter, writes nothing, leaves the pool as
    it was; an adapter stored only as a pickle (adapter_model.bin) is refused, not loaded."""
    from bots_rft.cli import main

    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "adapter_config.json").write_text("{}", encoding="utf-8")
    (pickled / "adapter_model.bin").write_bytes(b"\x80\x04N.")
    pool_bytes = toy_pool.read_bytes()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = ["refeval", "--model", "tiny", "--adapter", str(make(tmp_path)), "--pool", str(toy_pool)]
    assert main([*argv, "--column", "x_pass_rate", "--rollouts", "1", "--device", "cpu", "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert re.search(text, err), err
    assert toy_pool.read_bytes() == pool_bytes
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
