"""BOTS inside SkyRL-train's RayPPOTrainer: the real training loop (``RayPPOTrainer.train``), the
real dynamic-sampling filter, PromptDataset, config, data loader and checkpoint code, on CPU.

Faked, because they need GPUs, vLLM or a Ray cluster: the generator (a ``GeneratorInterface``
whose rewards come from a table: some tasks always pass, some always fail, some are mixed), the
policy workers (``policy_model``: dp size 1, saves nothing), the forward pass and the PPO update
(``fwd_logprobs_values_reward``, ``train_critic_and_policy``), weight sync, ``ray.get`` inside
the trainer module, and the experiment tracker (records what it is asked to log); Ray-worker log formatting is skipped
(it replaces the root logger's handlers).

skyrl-train 0.3.1 declares Python 3.12 only but is pure Python; the Makefile installs it with
``--python-version 3.12 --no-deps``. It imports ``PlacementGroupSchedulingStrategy`` from
``ray.util.placement_group``, which ray 2.60 no longer re-exports; importing the adapter first
puts it back, as the docs' snippet does.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, CheckpointError, ConfigError, DataError
from checkpoint_files import is_codec_bytes
from packed_state import packed_entry

pytest.importorskip("ray")
pytest.importorskip("datasets")
# isort: off
# The adapter first: it lets skyrl-train 0.3.1 (built against ray 2.51) import with ray >= 2.52.
from bots_rft.integrations.skyrl import with_bots  # noqa: E402

skyrl_trainer = pytest.importorskip("skyrl_train.trainer")
from skyrl_train.config.utils import get_default_config  # noqa: E402
from skyrl_train.dataset import PromptDataset  # noqa: E402
from skyrl_train.generators.base import GeneratorInterface  # noqa: E402

from bots_rft.integrations.batches import BOTSBatchSampler  # noqa: E402

pytestmark = pytest.mark.slow

# isort: on

N_PASS, N_FAIL, N_MIXED = 6, 6, 12
N = N_PASS + N_FAIL + N_MIXED
GROUP = 4
BATCH = 4
PASS = set(range(N_PASS))
FAIL = set(range(N_PASS, N_PASS + N_FAIL))
MIXED = set(range(N_PASS + N_FAIL, N))


def _reward(task: int, repetition: int) -> float:
    if task in PASS:
        return 1.0
    if task in FAIL:
        return 0.0
    return float(repetition % 2)  # half right: the group always carries a learning signal


class TableGenerator(GeneratorInterface):
    """SkyRL's generator interface; rewards from the table above (no model, no environment)."""

    def __init__(self) -> None:
        self.groups: list[int] = []  # task id of every group generated, in order

    async def generate(self, input_batch: Any) -> Any:
        ids = [int(e["task_id"]) for e in input_batch["env_extras"]]
        reps = [t.repetition_id for t in input_batch["trajectory_ids"]]
        self.groups.extend(ids[::GROUP])
        return {
            "prompt_token_ids": [[1, 2, 3] for _ in ids],
            "response_ids": [[4, 5] for _ in ids],
            "rewards": [_reward(t, r) for t, r in zip(ids, reps)],
            "loss_masks": [[1, 1] for _ in ids],
            "stop_reasons": None,
            "rollout_metrics": None,
            "rollout_logprobs": None,
        }


class Tracker:
    def __init__(self) -> None:
        self.logged: list[tuple[int, dict[str, Any]]] = []

    def log(self, data: dict[str, Any], step: int, commit: bool = False) -> None:
        self.logged.append((step, dict(data)))


def _cpu_only(trainer_cls: type) -> type:
    """The GPU/Ray parts of the trainer replaced; everything else is SkyRL's own code."""

    class CPUTrainer(trainer_cls):  # type: ignore[misc,valid-type]
        def init_weight_sync_state(self) -> None:
            pass

        def sync_policy_weights_to_inference_engines(self) -> list[Any]:
            return []

        def fwd_logprobs_values_reward(self, training_input: Any) -> Any:
            training_input["values"] = None  # GRPO: no critic
            return training_input

        def train_critic_and_policy(self, data: Any) -> dict[str, float]:
            return {}

        def _cleanup_old_checkpoints(self) -> None:
            pass

    return CPUTrainer


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from bots_rft.llm.models import byte_tokenizer

    return byte_tokenizer()


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skyrl_trainer, "ray", SimpleNamespace(get=lambda refs, **kw: refs))
    # Ray-worker log formatting: it would replace the root logger's handlers for the whole session.
    monkeypatch.setattr(skyrl_trainer, "configure_ray_worker_logging", lambda: None)


def _dataset(tmp_path: Any, tokenizer: Any, order: list[int] | None = None) -> Any:
    path = tmp_path / "pool.jsonl"
    with open(path, "w") as f:
        for t in order if order is not None else range(N):
            f.write(
                json.dumps({"prompt": [{"role": "user", "content": f"task {t}"}], "env_class": "gsm8k", "task_id": t})
                + "\n"
            )
    return PromptDataset(datasets=[str(path)], tokenizer=tokenizer, max_prompt_length=64, num_workers=1)


def _cfg(tmp_path: Any, **trainer: Any) -> Any:
    cfg = get_default_config()
    cfg.trainer.placement.colocate_all = False
    cfg.trainer.train_batch_size = BATCH
    cfg.trainer.eval_interval = -1
    cfg.trainer.hf_save_interval = -1
    cfg.trainer.ckpt_interval = -1
    cfg.trainer.resume_mode = "none"
    cfg.trainer.ckpt_path = str(tmp_path / "ckpt")
    cfg.trainer.epochs = 1
    cfg.generator.n_samples_per_prompt = GROUP
    cfg.trainer.algorithm.dynamic_sampling.type = "filter"
    cfg.trainer.algorithm.dynamic_sampling.max_sample_batches = 30
    for key, value in trainer.items():
        node, _, leaf = key.rpartition(".")
        target = cfg
        for part in node.split(".") if node else []:
            target = target[part]
        target[leaf] = value
    return cfg


def _trainer(
    tmp_path: Any, tokenizer: Any, cfg: Any, selector: BOTS, **kwargs: Any
) -> tuple[Any, TableGenerator, Tracker]:
    from skyrl_train.trainer import RayPPOTrainer

    gen, tracker = TableGenerator(), Tracker()
    trainer = _cpu_only(with_bots(RayPPOTrainer))(
        cfg=cfg,
        tracker=tracker,
        tokenizer=tokenizer,
        train_dataset=kwargs.pop("dataset", None) or _dataset(tmp_path, tokenizer),
        inference_engine_client=None,
        generator=gen,
        bots=selector,
        **kwargs,
    )
    trainer.policy_model = SimpleNamespace(
        actor_infos=[SimpleNamespace(rank=SimpleNamespace(dp_size=1))], async_run_ray_method=lambda *a, **k: []
    )
    return trainer, gen, tracker


def test_loader_is_built_on_bots_with_no_workers(tmp_path: Any, tokenizer: Any) -> None:
    trainer, _, _ = _trainer(tmp_path, tokenizer, _cfg(tmp_path), BOTS(N, n_rollouts=GROUP))
    loader = trainer.train_dataloader
    assert isinstance(loader.sampler, BOTSBatchSampler) and loader.num_workers == 0
    assert trainer.total_training_steps == N // BATCH == len(loader)


def test_filtered_groups_still_reach_bots(tmp_path: Any, tokenizer: Any) -> None:
    """The evidence-loss regression: SkyRL's DAPO filter (dynamic_sampling.type=filter) drops
    every all-pass and all-fail group, yet BOTS learns them and stops choosing them."""
    sel = BOTS(N, n_rollouts=GROUP, seed=1)
    cfg = _cfg(tmp_path, **{"trainer.epochs": 4})
    trainer, gen, tracker = _trainer(tmp_path, tokenizer, cfg, sel)
    trainer.train()
    mean = sel.mean()
    seen = set(gen.groups)
    seen_pass, seen_fail = sorted(seen & PASS), sorted(seen & FAIL)
    assert seen_pass and seen_fail  # the filter dropped these groups
    assert np.all(mean[seen_pass] > 0.7), mean[seen_pass]  # far from the prior mean 0.5
    assert np.all(mean[seen_fail] < 0.3), mean[seen_fail]
    # One update per training step (not per generation batch), and it held every group.
    steps = [m for _, m in tracker.logged if "bots/groups" in m]
    assert sel.num_updates == len(steps) == trainer.global_step - 1
    assert sum(m["bots/groups"] for m in steps) == len(gen.groups)
    assert all(m["bots/rollouts"] == GROUP * m["bots/groups"] for m in steps)
    # Once learned, the all-pass / all-fail tasks stop being chosen: they are half the pool and
    # about half the first picks, but rare at the end (λ forgets slowly, so they may come back).
    third = len(gen.groups) // 3
    early = np.mean([g not in MIXED for g in gen.groups[:third]])
    late = np.mean([g not in MIXED for g in gen.groups[-third:]])
    assert early >= 0.35 and late <= 0.2, (early, late)


def test_refill_batches_never_repeat_a_task_within_a_step(tmp_path: Any, tokenizer: Any) -> None:
    sel = BOTS(N, n_rollouts=GROUP, seed=2)
    trainer, gen, tracker = _trainer(tmp_path, tokenizer, _cfg(tmp_path), sel)
    per_step: list[list[int]] = []
    original = trainer.handle_dynamic_sampling

    def spy(out: Any, uids: list[str]) -> Any:
        if not per_step or per_step[-1] is None:
            per_step.append([])
        per_step[-1].extend(int(u) for u in uids[::GROUP])
        result = original(out, uids)
        if not result[2]:
            per_step.append(None)  # type: ignore[arg-type]
        return result

    trainer.handle_dynamic_sampling = spy
    trainer.train()
    steps = [s for s in per_step if s is not None]
    assert any(len(s) > BATCH for s in steps)  # refills happened
    for rows in steps:
        assert len(rows) == len(set(rows))


def test_no_dynamic_sampling_feeds_from_postprocess(tmp_path: Any, tokenizer: Any) -> None:
    sel = BOTS(N, n_rollouts=GROUP, seed=3)
    cfg = _cfg(tmp_path, **{"trainer.algorithm.dynamic_sampling.type": None})
    trainer, gen, tracker = _trainer(tmp_path, tokenizer, cfg, sel)
    trainer.train()
    assert sel.num_updates == N // BATCH
    logged = [m for _, m in tracker.logged]
    assert all("bots/etr" in m and "bots/select_ms" in m and "bots/pick_mean_p50" in m for m in logged)


def test_task_ids_come_from_the_column_not_the_row(tmp_path: Any, tokenizer: Any) -> None:
    """Rows in another order than task ids (and a pool with tasks missing from the dataset)."""
    order = list(reversed(range(N)))
    sel = BOTS(N + 5, n_rollouts=GROUP, seed=4)
    cfg = _cfg(tmp_path, **{"trainer.algorithm.dynamic_sampling.type": None})
    trainer, gen, _ = _trainer(tmp_path, tokenizer, cfg, sel, dataset=_dataset(tmp_path, tokenizer, order))
    trainer.train()
    a = sel.alpha
    for t in set(gen.groups) & PASS:
        assert a[t] > 1.0 + 0.5 * GROUP  # the rollouts of task t (its row is N-1-t) landed on t
    assert not set(gen.groups) & set(range(N, N + 5))


def test_resume_from_skyrl_checkpoint_continues_exactly(tmp_path: Any, tokenizer: Any) -> None:
    cfg = _cfg(tmp_path, **{"trainer.epochs": 2, "trainer.ckpt_interval": 3})
    full, gen_full, _ = _trainer(tmp_path, tokenizer, cfg, BOTS(N, n_rollouts=GROUP, seed=5))
    full.train()
    # SkyRL saved global_step_3 (data.pt holds the loader, hence the selector, after step 3).
    cfg2 = _cfg(
        tmp_path,
        **{
            "trainer.epochs": 2,
            "trainer.ckpt_interval": 3,
            "trainer.resume_mode": "from_path",
            "trainer.resume_path": str(tmp_path / "ckpt" / "global_step_3"),
        },
    )
    sel2 = BOTS(N, n_rollouts=GROUP, seed=5)
    resumed, gen_resumed, _ = _trainer(tmp_path, tokenizer, cfg2, sel2)
    resumed.train()
    tail = len(gen_resumed.groups)
    assert tail and gen_resumed.groups == gen_full.groups[-tail:]
    np.testing.assert_array_equal(sel2.alpha, full.bots_selector.alpha)
    np.testing.assert_array_equal(sel2.beta, full.bots_selector.beta)


def test_data_pt_holds_the_selector_in_our_format_and_a_tampered_one_is_refused(tmp_path: Any, tokenizer: Any) -> None:
    import torch

    cfg = _cfg(tmp_path, **{"trainer.epochs": 1, "trainer.ckpt_interval": 2})
    first, _, _ = _trainer(tmp_path, tokenizer, cfg, BOTS(N, n_rollouts=GROUP, seed=5))
    first.train()
    data_pt = tmp_path / "ckpt" / "global_step_2" / "data.pt"
    # weights_only: torch's restricted unpickler, which loads no class of ours (nor any other).
    state = torch.load(data_pt, map_location="cpu", weights_only=True)
    packed = packed_entry(state, "bots-rft/batch-sampler")
    assert set(packed) == {"format", "checkpoint"} and is_codec_bytes(packed["checkpoint"])
    good = dict(packed)
    resume = {"trainer.resume_mode": "from_path", "trainer.resume_path": str(data_pt.parent)}

    def resumed_with(entry: dict[str, Any]) -> Any:
        packed.clear()
        packed.update(entry)
        torch.save(state, data_pt)
        trainer, _, _ = _trainer(tmp_path, tokenizer, _cfg(tmp_path, **resume), BOTS(N, n_rollouts=GROUP, seed=5))
        return trainer

    flipped = bytearray(good["checkpoint"])
    flipped[-40] ^= 0x01
    with pytest.raises(CheckpointError, match="checksum"):
        resumed_with({**good, "checkpoint": bytes(flipped)}).train()
    with pytest.raises(CheckpointError, match="truncated"):
        resumed_with({**good, "checkpoint": good["checkpoint"][:100]}).train()
    with pytest.raises(CheckpointError, match="not a 'bots-rft/batch-sampler' state"):
        resumed_with({"selector": {"alpha": [1.0] * N}, "since": [-1] * N}).train()


def test_bad_inputs_are_refused(tmp_path: Any, tokenizer: Any) -> None:
    with pytest.raises(ConfigError):
        with_bots(object)
    from skyrl_train.fully_async_trainer import FullyAsyncRayPPOTrainer

    with pytest.raises(ConfigError, match="FullyAsync"):
        with_bots(FullyAsyncRayPPOTrainer)
    with pytest.raises(DataError, match="outside"):
        _trainer(tmp_path, tokenizer, _cfg(tmp_path), BOTS(N - 1))
    trainer, _, _ = _trainer(tmp_path, tokenizer, _cfg(tmp_path), BOTS(N, n_rollouts=GROUP))
    out = {"rewards": [1.0, 0.0]}
    with pytest.raises(DataError, match="row numbers"):
        trainer._bots_record(out, ["a", "b"])
    with pytest.raises(DataError, match="not a row"):
        trainer._bots_record(out, ["0", str(N)])
    with pytest.raises(DataError, match="2 rewards for 3"):
        trainer._bots_record(out, ["0", "1", "2"])
    assert trainer.bots_evidence.pending() == 0
