"""BOTS inside AReaL's PPOTrainer: the real training loop (``PPOTrainer.train``), the real
asynchronous rollout machinery (``RemoteInfEngine.prepare_batch`` → ``WorkflowExecutor`` with its
staleness manager, ``GroupedRolloutWorkflow``, ``should_accept_fn`` filtering) and the real recover
checkpoint (``RecoverHandler``), on CPU in SPMD mode with a one-process gloo group.

Faked, because they need GPUs or inference servers: in most tests ``PPOTrainer.__init__`` (it
creates the training engines, the inference servers and a scheduler; the test base class sets the
attributes ``train`` reads instead; one test runs AReaL's real constructor on a CPU ``PPOConfig``
with only its two engine factories, ``_create_train_engine`` and ``_init_rollout``, standing in),
the train engine (``actor``: its ``prepare_batch`` calls the rollout
engine as AReaL's single-rank ``DistRolloutCoordinator`` does; the PPO update, weight update and
model save do nothing), the inference server (no server is started: the workflow never calls
one; its rewards come from a table: some tasks always pass, some always fail, some are mixed),
and the HF saver / evaluator / stats logger (the logger records what it is asked to commit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, CheckpointError, ConfigError, DataError, InvalidTypeError
from checkpoint_files import is_codec_bytes
from packed_state import packed_entry

pytest.importorskip("datasets")
# Importing AReaL installs uvloop as the process-wide asyncio policy (areal/api/cli_args.py);
# the rest of the test session keeps the policy it had.
_policy = asyncio.get_event_loop_policy()
rl_trainer = pytest.importorskip("areal.trainer.rl_trainer")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from areal.api import FinetuneSpec, RolloutWorkflow  # noqa: E402
from areal.api.cli_args import InferenceEngineConfig, RecoverConfig  # noqa: E402
from areal.infra.remote_inf_engine import RemoteInfEngine  # noqa: E402
from areal.infra.workflow_executor import WorkflowExecutor  # noqa: E402
from areal.utils import stats_tracker  # noqa: E402
from areal.utils.recover import RecoverHandler  # noqa: E402
from datasets import Dataset  # noqa: E402

from bots_rft.integrations.areal import TASK_ID_KEY, RecordingFilter, TaskIdWorkflow, with_bots  # noqa: E402
from bots_rft.integrations.batches import BOTSBatchSampler, EvidenceBuffer  # noqa: E402

pytestmark = pytest.mark.slow

asyncio.set_event_loop_policy(_policy)

N_PASS, N_FAIL, N_MIXED = 6, 6, 12
N = N_PASS + N_FAIL + N_MIXED
GROUP = 4
BATCH = 4
PASS = set(range(N_PASS))
FAIL = set(range(N_PASS, N_PASS + N_FAIL))
MIXED = set(range(N_PASS + N_FAIL, N))


def mixed_groups_only(traj: dict[str, Any]) -> bool:
    """DAPO's dynamic sampling as an AReaL ``dynamic_filter_fn``: drop zero-variance groups."""
    return bool(traj["rewards"].std() > 0)


class TableWorkflow(RolloutWorkflow):
    """A user's workflow: one trajectory per episode, reward from the table (no model call)."""

    def __init__(self) -> None:
        self.episodes: dict[int, int] = {}
        self.groups: list[int] = []  # task id of each group, in the order groups started

    async def arun_episode(self, engine: Any, data: dict[str, Any]) -> dict[str, Any]:
        t = int(data["task_id"])
        k = self.episodes.get(t, 0)
        self.episodes[t] = k + 1
        if k % GROUP == 0:
            self.groups.append(t)
        reward = 1.0 if t in PASS else 0.0 if t in FAIL else float(k % 2)
        seq = torch.tensor([[1, 2, 3, 4]], dtype=torch.int32)
        return {
            "input_ids": seq,
            "loss_mask": torch.tensor([[0, 0, 1, 1]], dtype=torch.int32),
            "attention_mask": torch.ones_like(seq, dtype=torch.bool),
            "rewards": torch.tensor([reward], dtype=torch.float32),
        }


class Rollout:
    """The real RemoteInfEngine (no server behind it) plus what the SGLang/vLLM wrappers add."""

    def __init__(self, engine: RemoteInfEngine) -> None:
        self.engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def export_stats(self) -> dict[str, float]:
        return {}

    def save_perf_tracer(self, step: int | None = None, force: bool = False) -> None:
        pass


class Actor:
    cpu_group = None  # the default (gloo) group

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.batches: list[list[dict[str, Any]]] = []

    def prepare_batch(
        self,
        dataloader: Any,
        workflow: Any,
        workflow_kwargs: Any = None,
        should_accept_fn: Any = None,
        group_size: int = 1,
        dynamic_bs: bool = False,
    ) -> list[dict[str, Any]]:
        batch = self.rollout.engine.prepare_batch(
            dataloader,
            workflow=workflow,
            workflow_kwargs=workflow_kwargs,
            should_accept_fn=should_accept_fn,
            group_size=group_size,
            dynamic_bs=dynamic_bs,
        )
        self.batches.append(batch)
        return batch

    def compute_advantages(self, batch: Any) -> Any:
        return batch

    def get_device_stats(self) -> Any:
        return SimpleNamespace(log=lambda *a, **k: None)

    def export_stats(self) -> dict[str, float]:
        return stats_tracker.export_all()

    def __getattr__(self, name: str) -> Any:  # ppo_update, update_weights, save, load, ...: no-ops
        return lambda *a, **k: None


class Committed:
    def __init__(self) -> None:
        self.stats: list[dict[str, float]] = []

    def commit(self, epoch: int, step: int, global_step: int, stats: dict[str, float]) -> None:
        self.stats.append(dict(stats))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Any) -> None:
        pass


class _Null:
    is_async = False

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: {}


class CPUPPOTrainer(rl_trainer.PPOTrainer):  # type: ignore[misc]
    """``PPOTrainer.__init__`` replaced: the attributes ``train`` reads, fakes where GPUs would be."""

    def __init__(self, config: Any, train_dataset: Any = None, valid_dataset: Any = None) -> None:
        self.config = config
        engine = RemoteInfEngine(
            InferenceEngineConfig(consumer_batch_size=BATCH, max_head_offpolicyness=0), backend=None
        )
        # What RemoteInfEngine.initialize does once its servers answer (there are none here).
        engine.logger = logging.getLogger("bots-test-rollout")
        engine.workflow_executor = WorkflowExecutor(config=engine.config, inference_engine=engine)
        engine.workflow_executor.initialize(logger=engine.logger, train_data_parallel_size=1)
        self.rollout = Rollout(engine)
        self.actor = Actor(self.rollout)
        self.critic = self.ref = self.teacher = self.eval_rollout = self.valid_dataloader = None
        self._should_offload_rollout = self._should_offload_actor = self._should_offload_critic = False
        self._should_offload_ref = self._should_offload_teacher = False
        self.tokenizer = self.processor = None
        self.weight_update_meta = SimpleNamespace(with_version=lambda v: v)
        self.saver, self.evaluator = _Null(), _Null()
        self.stats_logger = Committed()
        self.train_dataloader = self._create_dataloader(train_dataset, config.train_dataset, rank=0, world_size=1)
        ft_spec = FinetuneSpec(
            total_train_epochs=config.total_train_epochs, dataset_size=len(train_dataset), train_batch_size=BATCH
        )
        self.recover_handler = RecoverHandler(config.recover, ft_spec)
        self.recover_info = (
            self.recover_handler.load(self.actor, self.saver, self.evaluator, self.stats_logger, self.train_dataloader)
            if config.resume
            else None
        )

    def close(self) -> None:
        self.rollout.engine.destroy()


@pytest.fixture(scope="module", autouse=True)
def _spmd(tmp_path_factory: pytest.TempPathFactory) -> Any:
    previous = os.environ.get("AREAL_SPMD_MODE")
    os.environ["AREAL_SPMD_MODE"] = "1"
    created = not dist.is_initialized()
    if created:
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path_factory.mktemp('pg')}/store", rank=0, world_size=1
        )
    yield
    if previous is None:
        os.environ.pop("AREAL_SPMD_MODE", None)
    else:
        os.environ["AREAL_SPMD_MODE"] = previous
    if created:
        dist.destroy_process_group()


def _config(tmp_path: Any, epochs: int = 1, *, resume: bool = False, steps: int | None = None) -> Any:
    recover = RecoverConfig(experiment_name="bots", trial_name="t", fileroot=str(tmp_path), mode="auto", freq_steps=1)
    return SimpleNamespace(
        total_train_epochs=epochs,
        total_train_steps=steps,
        gconfig=SimpleNamespace(n_samples=GROUP),
        dynamic_bs=False,
        actor=SimpleNamespace(should_compute_prox_logp=lambda: False),
        memory_profiler=None,
        teacher=None,
        train_dataset=SimpleNamespace(batch_size=BATCH),
        recover=recover,
        resume=resume,
    )


def _dataset(order: list[int] | None = None) -> Dataset:
    return Dataset.from_list(
        [{"task_id": t, "messages": f"task {t}"} for t in (order if order is not None else range(N))]
    )


def _trainer(config: Any, selector: BOTS, dataset: Dataset | None = None) -> Any:
    return with_bots(CPUPPOTrainer)(config, train_dataset=dataset if dataset is not None else _dataset(), bots=selector)


def _train(trainer: Any, workflow: TableWorkflow, **kwargs: Any) -> None:
    try:
        trainer.train(workflow=workflow, **kwargs)
    finally:
        trainer.close()


def test_loader_is_built_on_bots_with_no_workers(tmp_path: Any) -> None:
    trainer = _trainer(_config(tmp_path), BOTS(N, n_rollouts=GROUP))
    try:
        loader = trainer.train_dataloader
        assert isinstance(loader.sampler, BOTSBatchSampler) and loader.num_workers == 0
        assert len(loader) == N // BATCH and loader.batch_size == BATCH
    finally:
        trainer.close()


def test_filtered_groups_still_reach_bots(tmp_path: Any) -> None:
    """The evidence-loss regression: AReaL's dynamic filter rejects every all-pass and all-fail
    group, yet BOTS learns them and stops choosing them."""
    sel = BOTS(N, n_rollouts=GROUP, seed=1)
    trainer, wf = _trainer(_config(tmp_path, epochs=4), sel), TableWorkflow()
    _train(trainer, wf, dynamic_filter_fn=mixed_groups_only)
    batches = trainer.actor.batches
    assert batches and all(float(t["rewards"].std()) > 0 for b in batches for t in b)  # the filter worked
    assert all(TASK_ID_KEY not in t for b in batches for t in b)  # training never sees our key
    mean = sel.mean()
    seen_pass, seen_fail = sorted(set(wf.groups) & PASS), sorted(set(wf.groups) & FAIL)
    assert seen_pass and seen_fail
    # Every one of them on the right side of the prior mean 0.5, the recently seen ones far from it
    # (λ pulls a posterior back toward the prior a little every step).
    assert np.all(mean[seen_pass] > 0.55) and np.all(mean[seen_fail] < 0.45), (mean[seen_pass], mean[seen_fail])
    recent = set(wf.groups[len(wf.groups) // 2 :])
    assert np.all(mean[sorted(recent & PASS)] > 0.75), mean[sorted(recent & PASS)]
    assert np.all(mean[sorted(recent & FAIL)] < 0.25), mean[sorted(recent & FAIL)]
    # One update per training step; every finished group was fed (a few may still be running).
    assert sel.num_updates == len(batches)
    fed = sum(s.get("bots/groups", 0.0) for s in trainer.stats_logger.stats)
    assert len(wf.groups) - 2 * BATCH <= fed <= len(wf.groups)
    third = len(wf.groups) // 3
    early = np.mean([g not in MIXED for g in wf.groups[:third]])
    late = np.mean([g not in MIXED for g in wf.groups[-third:]])
    # Half the pool and about a third of the first picks; at most a quarter at the end (refills
    # within a step come from the same posterior and skip tasks in flight, so some return).
    assert early >= 0.3 and late <= 0.25, (early, late)


def test_metrics_reach_areal_stats(tmp_path: Any) -> None:
    sel = BOTS(N, n_rollouts=GROUP, seed=2)
    trainer = _trainer(_config(tmp_path, epochs=1), sel)
    _train(trainer, TableWorkflow())
    stats = trainer.stats_logger.stats
    assert len(stats) == N // BATCH
    assert all("bots/etr" in s and "bots/select_ms" in s and "bots/update_ms" in s for s in stats)


def test_tasks_in_flight_are_not_chosen_again(tmp_path: Any) -> None:
    sel = BOTS(N, n_rollouts=GROUP, seed=3)
    trainer = _trainer(_config(tmp_path, epochs=2), sel)
    sampler = trainer.bots_sampler
    chosen: list[tuple[np.ndarray, np.ndarray]] = []
    original = sampler.select_batch

    def spy() -> np.ndarray:
        flying = sampler.in_flight()
        ids = original()
        chosen.append((ids, flying))
        return ids

    sampler.select_batch = spy
    _train(trainer, TableWorkflow())
    assert chosen
    for ids, flying in chosen:
        assert not set(ids.tolist()) & set(flying.tolist())


def test_resume_from_areal_recover_checkpoint(tmp_path: Any) -> None:
    """AReaL's recover checkpoint (data loader state) carries the selector with the step's update."""
    sel = BOTS(N, n_rollouts=GROUP, seed=4)
    first = _trainer(_config(tmp_path, epochs=1, steps=3), sel)
    _train(first, TableWorkflow())
    sel2 = BOTS(N, n_rollouts=GROUP, seed=4)
    second = _trainer(_config(tmp_path, epochs=1, resume=True), sel2)
    try:
        assert second.recover_info is not None and second.recover_info.last_step_info.global_step == 2
        assert sel.num_updates == 3
        iter(second.train_dataloader)  # torchdata applies a loaded state when iteration starts
        np.testing.assert_array_equal(sel2.alpha, sel.alpha)
        np.testing.assert_array_equal(sel2.beta, sel.beta)
        np.testing.assert_array_equal(second.bots_sampler.in_flight(), first.bots_sampler.in_flight())
    finally:
        second.close()


class _NoGlobals(pickle.Unpickler):
    """An unpickler that loads builtin containers and scalars only: no class, no function."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}")


def test_recover_file_holds_the_selector_in_our_format_and_a_tampered_one_is_refused(tmp_path: Any) -> None:
    first = _trainer(_config(tmp_path, epochs=1, steps=2), BOTS(N, n_rollouts=GROUP, seed=4))
    _train(first, TableWorkflow())
    (path,) = list(tmp_path.rglob("dataloader_info.pkl"))  # AReaL's own pickle of the loader state
    with open(path, "rb") as f:
        state = _NoGlobals(f).load()
    packed = packed_entry(state, "bots-rft/batch-sampler")
    assert set(packed) == {"format", "checkpoint"} and is_codec_bytes(packed["checkpoint"])
    good = dict(packed)

    def resumed_with(entry: dict[str, Any]) -> Any:
        packed.clear()
        packed.update(entry)
        with open(path, "wb") as f:
            pickle.dump(state, f)
        trainer = _trainer(_config(tmp_path, epochs=1, resume=True), BOTS(N, n_rollouts=GROUP, seed=4))
        trainer.close()
        return trainer

    flipped = bytearray(good["checkpoint"])
    flipped[-40] ^= 0x01
    with pytest.raises(CheckpointError, match="checksum"):
        iter(resumed_with({**good, "checkpoint": bytes(flipped)}).train_dataloader)
    with pytest.raises(CheckpointError, match="not a 'bots-rft/batch-sampler' state"):
        iter(resumed_with({"format": "something-else", "checkpoint": good["checkpoint"]}).train_dataloader)
    resumed = resumed_with(good)
    iter(resumed.train_dataloader)
    np.testing.assert_array_equal(resumed.bots_selector.alpha, first.bots_selector.alpha)


def test_task_ids_come_from_the_column_not_the_row(tmp_path: Any) -> None:
    sel = BOTS(N + 3, n_rollouts=GROUP, seed=5)
    trainer, wf = _trainer(_config(tmp_path), sel, _dataset(list(reversed(range(N))))), TableWorkflow()
    _train(trainer, wf)
    assert not set(wf.groups) & {N, N + 1, N + 2}
    a = sel.alpha
    for t in set(wf.groups) & PASS:
        assert a[t] > 1.0 + 0.5 * GROUP


def test_filter_and_workflow_refuse_bad_input(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = EvidenceBuffer(BOTS(N))
    with pytest.raises(DataError, match="TaskIdWorkflow"):
        RecordingFilter(ev)({"rewards": torch.ones(2)})
    with pytest.raises(DataError, match="rewards"):
        RecordingFilter(ev)({TASK_ID_KEY: 1})
    with pytest.raises(DataError, match="outside"):
        RecordingFilter(ev)({TASK_ID_KEY: N, "rewards": torch.ones(2)})
    assert ev.pending() == 0
    with pytest.raises(InvalidTypeError):
        RecordingFilter(ev, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        TaskIdWorkflow(object())
    with pytest.raises(ConfigError):
        with_bots(object)
    trainer = _trainer(_config(tmp_path), BOTS(N, n_rollouts=GROUP))
    try:
        monkeypatch.setenv("AREAL_SPMD_MODE", "0")
        with pytest.raises(ConfigError, match="single-controller"):
            trainer.train(workflow=TableWorkflow())
    finally:
        trainer.close()


# ------------------------------------------------------------------- AReaL's own constructor


class TrainEngine(Actor):
    """What ``_create_train_engine`` builds (an FSDP actor on GPUs): one data-parallel rank; it
    reaches the rollout engine through ``connect_engine``, as AReaL's actors do."""

    data_parallel_rank = 0
    data_parallel_world_size = 1

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        pass

    def connect_engine(self, rollout: Any, meta: Any) -> None:
        self.rollout = rollout


class CPUEnginesPPOTrainer(rl_trainer.PPOTrainer):  # type: ignore[misc]
    """AReaL's real ``PPOTrainer.__init__`` (config checks, tokenizer, data loaders, engine
    initialisation order, weight-update meta, evaluator, saver, recover handler, stats logger),
    with its two engine factories standing in: the train engine (FSDP on GPUs) and the rollout
    engine (a real ``RemoteInfEngine`` with no inference server behind it)."""

    def _create_train_engine(self, actor_config: Any, alloc: Any) -> Any:
        return TrainEngine()

    def _init_rollout(self, rollout_config: Any, is_eval: bool = False, lora_path: str | None = None) -> Any:
        engine = RemoteInfEngine(
            InferenceEngineConfig(consumer_batch_size=BATCH, max_head_offpolicyness=0), backend=None
        )
        engine.logger = logging.getLogger("bots-test-rollout")
        engine.workflow_executor = WorkflowExecutor(config=engine.config, inference_engine=engine)
        engine.workflow_executor.initialize(logger=engine.logger, train_data_parallel_size=1)
        return Rollout(engine)

    def close(self) -> None:
        self.rollout.engine.destroy()
        self.eval_rollout.engine.destroy()


def _ppo_config(tmp_path: Any) -> Any:
    """An AReaL ``PPOConfig`` for this CPU run, with the fields AReaL's launcher would fill."""
    from areal.api.cli_args import PPOConfig

    from bots_rft.llm.models import byte_tokenizer

    tokenizer = tmp_path / "tokenizer"
    byte_tokenizer().save_pretrained(tokenizer)
    cfg = PPOConfig(experiment_name="bots", trial_name="cpu", tokenizer_path=str(tokenizer), total_train_epochs=2)
    cfg.actor.backend, cfg.rollout.backend = "fsdp:d1", "sglang:d1"
    cfg.actor.path = str(tokenizer)
    cfg.gconfig.n_samples = GROUP
    cfg.train_dataset.batch_size = BATCH
    cfg.cluster.fileroot = str(tmp_path)
    for part in (cfg.stats_logger, cfg.recover, cfg.saver, cfg.evaluator):
        part.experiment_name, part.trial_name, part.fileroot = cfg.experiment_name, cfg.trial_name, str(tmp_path)
    return cfg


def test_areals_own_constructor_builds_the_bots_loader_and_trains(tmp_path: Any) -> None:
    sel = BOTS(N, n_rollouts=GROUP, seed=6)
    trainer = with_bots(CPUEnginesPPOTrainer)(_ppo_config(tmp_path), train_dataset=_dataset(), bots=sel)
    loader = trainer.train_dataloader
    assert isinstance(loader.sampler, BOTSBatchSampler) and loader.num_workers == 0
    wf = TableWorkflow()
    _train(trainer, wf, dynamic_filter_fn=mixed_groups_only)
    assert sel.num_updates == len(trainer.actor.batches) == 2 * (N // BATCH)
    mean = sel.mean()
    seen_pass, seen_fail = sorted(set(wf.groups) & PASS), sorted(set(wf.groups) & FAIL)
    assert np.all(mean[seen_pass] > 0.5) and np.all(mean[seen_fail] < 0.5)


def _picks(trainer: Any) -> list[list[int]]:
    """Every batch the BOTS sampler chooses from now on, in order."""
    sampler, chosen = trainer.bots_sampler, []
    original = sampler.select_batch

    def spy() -> np.ndarray:
        ids = original()
        chosen.append(ids.tolist())
        return ids

    sampler.select_batch = spy
    return chosen


def test_a_resumed_run_chooses_what_an_uninterrupted_one_chooses(tmp_path: Any) -> None:
    """No filter and no staleness window (every group of a step finishes within it): a run
    stopped after 3 steps and recovered from AReaL's checkpoint picks the same batches, in the
    same order, as one that never stopped, and ends with the same posterior."""
    whole_sel = BOTS(N, n_rollouts=GROUP, seed=7)
    whole = _trainer(_config(tmp_path / "whole", epochs=1), whole_sel)
    whole_picks = _picks(whole)
    _train(whole, TableWorkflow())

    first_sel = BOTS(N, n_rollouts=GROUP, seed=7)
    first = _trainer(_config(tmp_path / "split", epochs=1, steps=3), first_sel)
    first_picks = _picks(first)
    _train(first, TableWorkflow())
    resumed_sel = BOTS(N, n_rollouts=GROUP, seed=7)
    resumed = _trainer(_config(tmp_path / "split", epochs=1, resume=True), resumed_sel)
    resumed_picks = _picks(resumed)
    _train(resumed, TableWorkflow())

    assert len(first_picks) >= 3 and resumed_picks  # both halves chose batches
    assert first_picks == whole_picks[: len(first_picks)]
    assert first_picks + resumed_picks == whole_picks
    np.testing.assert_array_equal(resumed_sel.alpha, whole_sel.alpha)
    np.testing.assert_array_equal(resumed_sel.beta, whole_sel.beta)
