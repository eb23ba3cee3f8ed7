"""BOTS for verl 0.9 (the default V1 trainer): BOTS chooses every prompt, every finished group feeds it.

Run verl through this module instead of ``verl.trainer.main_ppo``; everything else stays as it was::

    python -m bots_rft.integrations.verl <your usual verl overrides> \\
        bots.weak_column=qwen2.5_7b_pass_rate bots.strong_column=qwen3_30b_pass_rate   # optional

The entry point composes verl's own ``ppo_trainer`` config plus a ``bots`` section and sets
``trainer.v1.trainer_mode=bots_sync``; ``bots_colocate_async`` and ``bots_separate_async`` select the
async modes. Those names are put into verl's ``TRAINER_REGISTRY`` by :func:`register`, which the entry
point (:func:`main`) and its Ray task runner (:class:`BOTSTaskRunner`, inside the Ray actor where verl
looks the trainer up) call; importing this module registers nothing. That is why
``python -m verl.trainer.main_ppo`` cannot be used as is.

What the BOTS trainers change, and nothing else:

- **Prompt choice.** The training data loader's sampler is a :class:`BOTSPromptSampler`, with
  ``num_workers=0`` so no prompt is drawn ahead from a stale posterior. verl fetches one prompt at a
  time under DAPO and in the async modes (``gen_batch_size=1``); the sampler still selects
  ``train_batch_size`` tasks at once (one Thompson draw per chunk, as the method intends) and hands
  them out row by row. Tasks in flight (fetched, evidence not yet folded into the posterior) are
  excluded from selection; only when every task is in flight is the exclusion lifted.
- **Evidence.** The replay buffer (:class:`BOTSReplayBuffer`, :class:`BOTSReplayBufferAsync`, verl's
  own buffers with two methods extended) reads ``index`` and ``rm_scores`` of **every** finished
  training group just before verl deletes or hands it on: the kept ones, and the ones DAPO filtering
  evicts (all-pass / all-fail), the refills, the surplus a sync DAPO step discards, failed groups and,
  in the async modes, groups dropped as stale (their rollouts are real attempts by a policy at most
  ``max_off_policy_threshold`` versions old; dropping them would again lose evidence selectively).
  A rollout's reward is its ``rm_scores`` summed (one value per session, as DAPO reads it), turned
  into a success by clipping into [0, 1] (counted in ``bots/clipped_rewards``, the first one logged as
  a warning) or by ``bots.success_threshold``. The evidence of a step is
  folded into the posterior once, at the end of the step, before the checkpoint is written.
- **Checkpoints.** The sampler's state (posterior, random stream position, prompts in flight,
  evidence not yet folded) rides in verl's ``data.pt``; the selector alone is also written as
  ``global_step_<n>/bots_selector.bots`` (:meth:`bots_rft.BOTS.load`). Resume with verl's usual
  ``trainer.resume_mode``: a resumed run selects exactly what an uninterrupted one would.
- **Metrics** (verl's logger, every step): the ``bots/*`` set every integration logs
  (:mod:`bots_rft.metrics.step`: ``etr``, ``pick_mean_p50``, ``capability``,
  ``select_ms``, ...) over the step's finished groups, and ``bots/kept_groups``
  ``bots/evicted_groups`` (what DAPO kept and dropped) ``bots/groups_without_rollouts``
  ``bots/inflight_tasks``.

The selector's task ids are the dataset's ``extra_info.index`` (verl's ``index`` field); they must
be distinct integers in ``[0, bots.num_tasks)`` (default: the largest id + 1; ids without a row,
e.g. prompts verl filtered as too long, are never selected). Configuration (``bots.*``): the BOTS
parameters ``lam rho target n_rollouts thompson seed threads`` (``n_rollouts`` defaults to
``actor_rollout_ref.rollout.n``), ``weak_column`` / ``strong_column`` / ``momentum`` / ``min_gap`` for
interpolation evidence, or ``embeddings`` (a ``bots embed`` file) / ``estimator`` (``regression``, the
default, or ``similarity``) / ``prior_precision`` for evidence learnt from task embeddings without
reference models, ``task_id_column``, ``num_tasks``, ``success_threshold`` and ``checkpoint`` (a
``BOTS.save`` file to start from).

Supported: verl 0.9.x with ``trainer.use_v1=true`` (tested with 0.9.1). Older verl releases, the
legacy ``RayPPOTrainer`` (``trainer.use_v1=false``), a ``trainer.v1.sampler.custom_sampler`` and a
colocated reward model that scores only after sampling are refused with a :class:`ConfigError`.
Tested (``tests/integrations/test_integrations_verl.py``) against verl's real ``PPOTrainerSync`` object,
``RLHFDataset``, ``StatefulDataLoader``, ``ReplayBuffer``/``ReplayBufferAsync`` and checkpoint code, on a
real TransferQueue on a local Ray instance; faked there: the GPU worker groups, vLLM and the agent
loop (a stand-in writes each group's rollouts to TransferQueue as verl's ``AgentLoopWorkerTQ``
does, with rewards from a fixed per-task table).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

from .._validation import rates_or_nan
from ..checkpoint import read_checkpoint
from ..data.embeddings import embeddings_for
from ..errors import (
    BotsError,
    CheckpointError,
    CheckpointNotFoundError,
    ConfigError,
    DataError,
    InvalidArgumentError,
    InvalidTypeError,
)
from ..estimators import EmbeddingRegression, Estimator, Interpolation, Similarity
from ..metrics.step import calibration_step_metrics, capability_metrics, outcome_metrics, pick_metrics
from ..parameters import BOTS_PARAMS, LAM, MIN_GAP, MOMENTUM, PRIOR_PRECISION, Parameter
from ..selector.bots import BOTS
from ..selector.bots.state import check_state_header, pool_fingerprint
from .batches import pack_state, unpack_state
from .gates import Seam, Window, check_framework, installed_version
from .inflight import InFlight
from .tasks import (
    RewardClip,
    bind_pool,
    check_rollouts,
    column_values,
    load_selector_state,
    missing_extra,
    references_by_id,
    rows_of_tasks,
)

SUPPORTED_VERL = "verl 0.9.x (tested with 0.9.1) with its V1 trainer (trainer.use_v1=true)"


def _require_supported_verl(version: str) -> None:
    """Refuse verl releases whose trainer has not the seams this module extends."""
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        raise ConfigError(f"verl: cannot read its version {version!r}; bots_rft supports {SUPPORTED_VERL}") from None
    if (major, minor) < (0, 9):
        raise ConfigError(
            f"verl: version {version} is installed; bots_rft.integrations.verl supports {SUPPORTED_VERL}. "
            "The verl <= 0.7 curriculum-sampler hook and the verl 0.8 RayPPOTrainer path are not supported."
        )


try:
    import verl as _verl
except ImportError as exc:  # pragma: no cover - verl is installed wherever this module is used
    raise ConfigError(f"verl: not installed; bots_rft.integrations.verl supports {SUPPORTED_VERL}") from exc
_require_supported_verl(str(getattr(_verl, "__version__", "0")))

# verl does not declare TransferQueue, and both import packages they do not declare: a missing
# one is named with the extra that brings them all, on one line from the entry point.
try:
    import transfer_queue as tq  # noqa: E402  (after the version check: older verl lacks it)
    from omegaconf import DictConfig, OmegaConf, open_dict  # noqa: E402
    from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402
    from verl.trainer.main_ppo import TaskRunnerV1 as _TaskRunnerV1  # noqa: E402
    from verl.trainer.ppo.v1 import (  # noqa: E402
        PPOTrainerColocateAsync,
        PPOTrainerSeparateAsync,
        PPOTrainerSync,
        register_trainer,
    )
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync  # noqa: E402
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY  # noqa: E402
    from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402
except ModuleNotFoundError as _exc:
    _missing = missing_extra(_exc, "bots_rft.integrations.verl", "verl")
    if __name__ == "__main__":
        print(f"python -m bots_rft.integrations.verl: error: {_missing}", file=sys.stderr)
        raise SystemExit(2) from None
    raise _missing from None

__all__ = [
    "SUPPORTED_VERL",
    "TESTED_VERL",
    "VERL_SEAMS",
    "check_verl",
    "BOTS_MODES",
    "SELECTOR_FILE",
    "BOTSPromptSampler",
    "BOTSReplayBuffer",
    "BOTSReplayBufferAsync",
    "BOTSPPOTrainerSync",
    "BOTSPPOTrainerColocateAsync",
    "BOTSPPOTrainerSeparateAsync",
    "BOTSTaskRunner",
    "build_sampler",
    "check_config",
    "register",
    "main",
    "preflight",
    "describe_selector",
    "check_ray_capacity",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: The selector alone, written into every ``global_step_<n>`` checkpoint folder.
SELECTOR_FILE = "bots_selector.bots"
#: Keys of ``bots`` passed straight to :class:`bots_rft.BOTS`.
_BOTS_KEYS = ("lam", "rho", "target", "n_rollouts", "thompson", "seed", "threads")
_OTHER_KEYS = (
    "weak_column",
    "strong_column",
    "momentum",
    "min_gap",
    "embeddings",
    "estimator",
    "prior_precision",
    "task_id_column",
    "num_tasks",
    "success_threshold",
    "checkpoint",
    "checkpoint_params",
)
#: Defaults of the ``bots`` config section the entry point adds (None: derived, see the module doc).
#: The BOTS parameters are null here: unset, a run takes BOTS's defaults (λ = ρ = 0.1, p* = 0.5,
#: Thompson, seed 0), or with ``bots.checkpoint`` the checkpoint's; set, they must agree with it.
BOTS_DEFAULTS: dict[str, Any] = {
    "lam": None,
    "rho": None,
    "target": None,
    "n_rollouts": None,
    "thompson": None,
    "seed": None,
    "threads": None,
    "weak_column": None,
    "strong_column": None,
    "momentum": None,
    "min_gap": None,
    "embeddings": None,
    "estimator": None,
    "prior_precision": None,
    "task_id_column": "extra_info.index",
    "num_tasks": None,
    "success_threshold": None,
    "checkpoint": None,
    "checkpoint_params": "error",
}
#: How each ``bots.*`` number or flag is checked: the catalogue's parameter of that name (one range
#: and one default for every way BOTS is configured), and two counts only this adapter reads.
_PARAMETERS: dict[str, Parameter] = {
    **{p.name: p for p in (*BOTS_PARAMS, PRIOR_PRECISION) if p.name in _BOTS_KEYS + _OTHER_KEYS},
    "threads": Parameter("threads", "int", None, "threads of the selector's core (default: every core)", 1),
    "num_tasks": Parameter("num_tasks", "int", None, "the selector's pool size (default: the largest id + 1)", 1),
}
#: The BOTS parameters a verl run cannot set; with ``bots.checkpoint`` they are the checkpoint's.
_STATE_ONLY = ("prior_alpha", "prior_beta", "adaptive_rho", "tau", "adaptive_lam", "lag_discount")
_STATE_FORMAT = "bots-rft/verl-prompt-sampler"


#: The verl releases this module was tested with (both ends tested).
TESTED_VERL = Window("verl", "0.9.1", "0.9.1", "bots_rft.integrations.verl")
#: The packages under verl whose release the adapter's tests ran with (tests/constraints.txt):
#: verl's own pin allows older transformers than these, and such a run is said, not refused.
TESTED_UNDER_VERL = (Window("transformers", "5.25.0", "5.25.0", "bots_rft.integrations.verl"),)


def untested_under_verl() -> list[str]:
    """One phrase per package in :data:`TESTED_UNDER_VERL` installed outside its tested window
    (``"transformers 5.10.4, OUTSIDE the tested window (5.25.0)"``); empty when every one is inside."""
    out = []
    for window in TESTED_UNDER_VERL:
        version = installed_version(window.framework)
        if not window.contains(version):
            out.append(f"{window.framework} {version}, OUTSIDE the tested window ({window})")
    return out


#: The verl methods the BOTS trainers, replay buffers and task runner override (all but ``step``, ``run``
#: and ``__init__`` private).
VERL_SEAMS = (
    Seam(
        ReplayBuffer,
        "__init__",
        "(self, trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy, sampler_kwargs, "
        "poll_interval=, refill_fn=, filter_groups_metric=, train_batch_size=, gen_batch_size=, "
        "max_inflight_gen_batches=, sync_refill_failed_groups=)",
        "34790114ebe5992e",
    ),
    Seam(ReplayBuffer, "_clear_groups", "(self, partition_id, uids)", "809ffb8a43c28b69"),
    Seam(
        ReplayBuffer,
        "_materialize_batch",
        "(self, partition_id, selected_prompt_uids, partition_snapshot)",
        "f0ddb65cd5c3f065",
    ),
    Seam(ReplayBufferAsync, "_clear_groups", "(self, partition_id, uids)", "809ffb8a43c28b69"),
    Seam(
        ReplayBufferAsync,
        "_materialize_batch",
        "(self, partition_id, selected_prompt_uids, partition_snapshot)",
        "f0ddb65cd5c3f065",
    ),
    Seam(PPOTrainerSync, "_build_replay_buffer", "(self)", "e0a1b665f5d73bc1"),
    Seam(PPOTrainerSync, "_init_dataloader", "(self)", "f11797ad84a4ba8a"),
    Seam(PPOTrainerSync, "_fetch_one_gen_batch", "(self)", "37a980de651f5fd6"),
    Seam(PPOTrainerSync, "_save_checkpoint", "(self)", "1ceb1e087ce91c92"),
    Seam(PPOTrainerSync, "_load_checkpoint", "(self)", "52b412c5395b2cae"),
    Seam(PPOTrainerSync, "step", "(self, metrics, timing_raw)", "c583b34f7e91cacd"),
    Seam(PPOTrainerColocateAsync, "step", "(self, metrics, timing_raw)", "c583b34f7e91cacd"),
    Seam(PPOTrainerSeparateAsync, "step", "(self, metrics, timing_raw)", "c583b34f7e91cacd"),
    # The replay buffer's evidence is read from TransferQueue (verl V1's rollout store) by key.
    Seam(tq, "kv_batch_get", "(keys, partition_id, select_fields=)", "1c0529258bdfac9d"),
    # BOTSTaskRunner extends the class behind verl's @ray.remote TaskRunnerV1 (Ray keeps it as
    # __ray_actor_class__); Ray's wrapper adds the _ray_trace_ctx keyword.
    Seam(
        _TaskRunnerV1.__ray_actor_class__,  # type: ignore[attr-defined]
        "run",
        "(self, config, *, _ray_trace_ctx=)",
        "69dc336177c55680",
    ),
)


def check_verl() -> list[str]:
    """:data:`VERL_SEAMS` against the installed verl (:func:`bots_rft.integrations.gates.check_framework`)."""
    return check_framework(TESTED_VERL, VERL_SEAMS)


# ------------------------------------------------------------------------------------ sampler


class BOTSPromptSampler(Sampler[int]):
    """The training data loader's sampler: yields dataset rows chosen by BOTS, and keeps what the
    selection depends on between steps (prompts in flight, evidence not yet folded).

    ``row_task_ids[r]`` is the task id of dataset row ``r``; ``chunk_size`` tasks are selected at a
    time (verl's ``train_batch_size``). The iterator never ends: verl draws as many prompts as
    its refills need, and BOTS samples with replacement over time, so a "pass" means nothing here.

    The trainer reports each fetched prompt's ``uid`` (:meth:`dispatched`) and the replay buffer
    each finished group (:meth:`observe`, :meth:`observe_empty`); :meth:`fold` makes the step's one
    posterior update and returns its metrics. A task stays excluded from selection from the moment
    it is yielded until the evidence of its group has been folded.
    """

    def __init__(
        self,
        selector: BOTS,
        row_task_ids: Any,
        chunk_size: int,
        success_threshold: float | None = None,
        task_id_column: str = "extra_info.index",
    ) -> None:
        if not isinstance(selector, BOTS):
            raise InvalidArgumentError(f"selector: must be a bots_rft.BOTS, got {type(selector).__name__}", "selector")
        n = int(selector.num_tasks)
        ids = list(row_task_ids)
        if not ids:
            raise DataError(f"{task_id_column}: the training dataset has no rows")
        self.rows_of_task = rows_of_tasks(ids, n, task_id_column)
        self.task_of_row = np.asarray([int(v) for v in ids], dtype=np.int64)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise InvalidArgumentError(f"chunk_size: must be a positive integer, got {chunk_size!r}", "chunk_size")
        self.selector = selector
        self.chunk_size = int(chunk_size)
        self.success_threshold = None if success_threshold is None else float(success_threshold)
        self._successes = RewardClip(self.success_threshold, "bots_rft.integrations.verl (rm_scores summed)")
        self.task_id_column = task_id_column
        self._no_row = self.rows_of_task < 0
        # The task ids alone, fingerprinted: the selector's pool fingerprint covers the prompts too,
        # so only this tells "other prompts under the same ids" from "other ids" on resume.
        self.pool_ids = pool_fingerprint(np.flatnonzero(~self._no_row))
        #: What a resumed ``data.pt`` whose selector differs (parameters, references, pool) does:
        #: ``"error"``, ``"checkpoint"`` or ``"current"`` (``bots.checkpoint_params``).
        self.resume_params = "error"
        self._reset_dynamic_state()

    def _reset_dynamic_state(self) -> None:
        self._chunk: list[int] = []  # selected, not yet yielded (dropped when the posterior changes)
        self._yielded: list[int] = []  # yielded, not yet matched to a uid by the trainer
        self._inflight = InFlight(self._no_row)  # groups per task yielded and not yet folded
        self._uid_task: dict[str, int] = {}  # dispatched prompts whose group has not finished
        # Evidence waiting for the step's fold: one entry per finished group.
        self._ev_tasks: list[int] = []
        self._ev_successes: list[float] = []
        self._ev_trials: list[float] = []
        self._ev_kept: list[bool] = []
        self._released: list[int] = []  # tasks whose group ended (with or without evidence)
        self._empty_groups = 0
        self._select_s = 0.0
        self._picked_means: list[float] = []
        # Each task in flight's posterior mean when picked (for bots/calibration_*); metrics only.
        self._predicted: dict[int, float] = {}

    # ---------------------------------------------------------------------------- selection
    def __len__(self) -> int:
        # Nominal only (verl counts steps from the dataset size): the iterator never ends.
        return len(self.task_of_row)

    def __iter__(self) -> Iterator[int]:
        # All state lives on the sampler, so a restored sampler continues where it was saved.
        while True:
            if not self._chunk:
                self._chunk = self._select_chunk()
            task = self._chunk.pop(0)
            self._inflight.hand_out(task)
            self._yielded.append(task)
            yield int(self.rows_of_task[task])

    def _select_chunk(self) -> list[int]:
        exclude = self._inflight.exclusion.copy()
        available = self._inflight.free
        if available == 0:  # everything is in flight: repeat tasks rather than stall the trainer
            exclude = self._no_row
            available = int(np.count_nonzero(~exclude))
        start = time.perf_counter()
        chosen = self.selector.select(min(self.chunk_size, available), exclude=exclude)
        self._select_s += time.perf_counter() - start
        alpha, beta = self.selector.posterior(chosen)
        self._picked_means.extend((alpha / (alpha + beta)).tolist())
        self._predicted.update(zip((int(t) for t in chosen), (alpha / (alpha + beta)).tolist()))
        return [int(t) for t in chosen]

    # ---------------------------------------------------------------------------- bookkeeping
    def dispatched(self, uids: Any) -> None:
        """The trainer turned the rows yielded since the last call into prompts ``uids`` (in order)."""
        uids = [str(u) for u in uids]
        if len(uids) != len(self._yielded):
            raise DataError(
                f"uids: {len(uids)} prompts fetched but the sampler yielded {len(self._yielded)} rows since the "
                "last fetch (the data loader must use this sampler with num_workers=0)"
            )
        self._uid_task.update(zip(uids, self._yielded, strict=True))
        self._yielded = []

    def task_of_uid(self, uid: str) -> int | None:
        return self._uid_task.get(uid)

    def observe(self, uid: str, task_id: int, rewards: Any, kept: bool) -> None:
        """One finished group: its rollouts' rewards (NaN: not a trial). ``task_id`` is the group's
        ``index``; a uid the sampler dispatched must agree with it."""
        known = self._uid_task.pop(uid, None)
        if known is not None and known != task_id:
            raise DataError(f"index: group {uid} reports task {task_id} but was fetched for task {known}")
        if not 0 <= task_id < self.selector.num_tasks:
            raise DataError(f"index: task id {task_id} is outside [0, {self.selector.num_tasks})")
        succ = self._successes(rewards)
        ok = ~np.isnan(succ)
        self._released.append(task_id)
        if not np.any(ok):
            self._empty_groups += 1
            return
        self._ev_tasks.append(task_id)
        self._ev_successes.append(float(succ[ok].sum()))
        self._ev_trials.append(float(np.count_nonzero(ok)))
        self._ev_kept.append(bool(kept))

    def observe_empty(self, uid: str) -> None:
        """A group ended with no rollout to read (e.g. every session failed)."""
        task = self._uid_task.pop(uid, None)
        self._empty_groups += 1
        if task is not None:
            self._released.append(task)

    @property
    def inflight_tasks(self) -> int:
        return len(self._inflight)

    def fold(self) -> dict[str, float]:
        """The step's one posterior update from every group finished since the last fold; the
        step's metrics (``bots/...``)."""
        metrics: dict[str, float] = {}
        ids = np.asarray(self._ev_tasks, dtype=np.int64)
        if ids.size:
            succ = np.asarray(self._ev_successes, dtype=np.float64)
            trials = np.asarray(self._ev_trials, dtype=np.float64)
            start = time.perf_counter()
            self.selector.update(ids, succ, trials)
            self.selector.flush()
            metrics["bots/update_ms"] = 1e3 * (time.perf_counter() - start)
            kept = np.asarray(self._ev_kept, dtype=bool)
            metrics.update(outcome_metrics(ids, succ, trials))
            metrics.update(calibration_step_metrics(ids, succ, trials, self._predicted))
            for task in ids.tolist():
                self._predicted.pop(task, None)
            # Entries here are groups (a task lifted out of the in-flight exclusion can finish
            # twice in one step): count groups, not distinct tasks.
            metrics["bots/groups"] = float(ids.size)
            metrics["bots/kept_groups"] = float(np.count_nonzero(kept))
            metrics["bots/evicted_groups"] = float(np.count_nonzero(~kept))
            self._chunk = []  # drawn from the old posterior: draw again
        released = np.asarray(self._released, dtype=np.int64)
        if released.size:
            self._inflight.come_back(released.tolist())  # a group restored without a fetch record stays at 0
        metrics.update(pick_metrics(self._picked_means))
        metrics["bots/select_ms"] = 1e3 * self._select_s
        metrics["bots/groups_without_rollouts"] = float(self._empty_groups)
        metrics["bots/inflight_tasks"] = float(self.inflight_tasks)
        metrics.update(capability_metrics(self.selector))
        metrics.update(self._successes.metrics())
        self._ev_tasks, self._ev_successes, self._ev_trials, self._ev_kept = [], [], [], []
        self._released, self._empty_groups, self._select_s, self._picked_means = [], 0, 0.0, []
        return metrics

    # ---------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything the next selections depend on, packed in the package's checkpoint format
        (:func:`~bots_rft.integrations.batches.pack_state`); verl saves it inside ``data.pt``."""
        return pack_state(
            _STATE_FORMAT,
            {
                "selector": self.selector.state_dict(),
                "chunk": list(self._chunk),
                "yielded": list(self._yielded),
                "inflight": self._inflight.state(),
                "uid_task": dict(self._uid_task),
                "evidence": [
                    list(self._ev_tasks),
                    list(self._ev_successes),
                    list(self._ev_trials),
                    list(self._ev_kept),
                ],
                "released": list(self._released),
                "empty_groups": self._empty_groups,
                "pool_ids": self.pool_ids,
            },
        )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (validated first; on error nothing changes). A state of
        another sampler, or one altered or truncated, raises :class:`CheckpointError`."""
        state = unpack_state(_STATE_FORMAT, state, "data.pt sampler state (BOTSPromptSampler)")
        try:
            inflight = np.asarray(state["inflight"], dtype=np.int64)
            tasks, succ, trials, kept = state["evidence"]
            chunk, yielded = [int(t) for t in state["chunk"]], [int(t) for t in state["yielded"]]
            uid_task = {str(k): int(v) for k, v in dict(state["uid_task"]).items()}
            released, empty = [int(t) for t in state["released"]], int(state["empty_groups"])
            selector_state = state["selector"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: not a BOTSPromptSampler state ({exc!r})") from None
        if inflight.shape != self._inflight.counts.shape:
            raise CheckpointError(f"state: has {inflight.size} tasks, this sampler {self._inflight.counts.size}")
        try:
            load_selector_state(  # validates before changing anything
                self.selector,
                selector_state,
                params=self.resume_params,
                knob="bots.checkpoint_params",
                source="data.pt (the BOTS sampler's state)",
            )
        except CheckpointError as exc:
            # Name the keys that set the evidence (embeddings or references), as bots.checkpoint does.
            text = re.sub(
                r"((?<=[(; ])evidence: .*? in the state)", rf"\1, set by {_KEY_OF['evidence']}", str(exc), count=1
            )
            text = _pool_difference(text, self.pool_ids, state.get("pool_ids"))
            raise CheckpointError(text) from None
        self._chunk, self._yielded, self._uid_task = chunk, yielded, uid_task
        self._inflight.load(inflight)
        self._ev_tasks, self._ev_successes = [int(t) for t in tasks], [float(s) for s in succ]
        self._ev_trials, self._ev_kept = [float(t) for t in trials], [bool(k) for k in kept]
        self._released, self._empty_groups = released, empty
        self._select_s, self._picked_means = 0.0, []


def _bots_options(config: Any) -> dict[str, Any]:
    """The ``bots`` section's set (non-null) options; unknown keys are refused."""
    bots = config.get("bots", None) if hasattr(config, "get") else None
    if bots is None:
        return {}
    cfg = dict(OmegaConf.to_container(bots, resolve=True)) if OmegaConf.is_config(bots) else dict(bots)  # type: ignore[arg-type]
    unknown = set(cfg) - set(_BOTS_KEYS) - set(_OTHER_KEYS)
    if unknown:
        raise ConfigError(f"bots: unknown keys {sorted(unknown)} (known: {sorted(_BOTS_KEYS + _OTHER_KEYS)})")
    try:
        return {
            k: _PARAMETERS[k].check(v, f"bots.{k}") if k in _PARAMETERS else v for k, v in cfg.items() if v is not None
        }
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise ConfigError(str(exc)) from None  # a key of the run's config, as every other refusal here


def _renamed(exc: BotsError, key: str, *, keep: bool = False) -> BotsError:
    """``exc`` again (its class kept, so callers catch it as before), its text starting with the
    ``bots.*`` key the user typed instead of the name the library called it (``threshold``,
    ``path``), or, with ``keep``, before that name (a column's name says which column)."""
    text = str(exc)
    _, sep, rest = text.partition(": ")
    said = f"{key}: {text if keep or not sep else rest}"
    if isinstance(exc, CheckpointNotFoundError):
        return CheckpointNotFoundError(said, str(exc.filename))
    if isinstance(exc, (InvalidArgumentError, InvalidTypeError)):
        return type(exc)(said, key)
    if isinstance(exc, (CheckpointError, DataError)):
        return type(exc)(said)
    return ConfigError(said)


#: ``bots.estimator``: what learns from the task embeddings of ``bots.embeddings``.
ESTIMATORS = ("regression", "similarity")


def _evidence_keys(cfg: Mapping[str, Any]) -> str | None:
    """Which implicit evidence the ``bots`` section asks for: ``"references"`` (weak/strong
    columns), ``"embeddings"`` (an embeddings file) or None; keys that go with neither, or with
    the other, are refused naming them."""
    weak, strong = cfg.get("weak_column"), cfg.get("strong_column")
    if (weak is None) != (strong is None):
        given = "bots.weak_column" if weak is not None else "bots.strong_column"
        raise ConfigError(
            f"bots.weak_column and bots.strong_column go together: the interpolation needs both reference "
            f"pass-rate columns, got {given} alone"
        )
    if cfg.get("embeddings") is not None:
        if weak is not None:
            raise ConfigError(
                "bots.embeddings and bots.weak_column / bots.strong_column: implicit evidence comes either from "
                "reference pass-rate columns or from task embeddings; set one of them"
            )
        estimator = cfg.get("estimator", "regression")
        if estimator not in ESTIMATORS:
            raise ConfigError(f"bots.estimator: must be regression or similarity, got {estimator!r}")
        if estimator != "regression" and cfg.get("prior_precision") is not None:
            raise ConfigError(
                f"bots.prior_precision: only bots.estimator=regression reads it (bots.estimator is {estimator})"
            )
        return "embeddings"
    for key in ("estimator", "prior_precision"):
        if cfg.get(key) is not None:
            raise ConfigError(f"bots.{key}: set without bots.embeddings (the task embeddings file it applies to)")
    return None if weak is None else "references"


def _evidence(
    frame: Any, cfg: dict[str, Any], column: str, num_tasks: int, rows_of_task: Any, lam: Any
) -> Estimator | None:
    """The implicit evidence the ``bots`` section configures, or None: interpolation from the
    ``bots.weak_column`` / ``bots.strong_column`` pass rates, read by task id
    (:func:`~bots_rft.integrations.tasks.references_by_id`), or an estimator on the task
    embeddings of ``bots.embeddings`` (``bots.estimator``: :class:`EmbeddingRegression`, which
    forgets at the selector's λ ``lam``, or :class:`Similarity`). ``rows_of_task[k]`` is the
    dataset row of task ``k`` (-1: none)."""
    kind = _evidence_keys(cfg)
    if kind is None:
        return None
    if kind == "references":
        columns = {"bots.weak_column": str(cfg["weak_column"]), "bots.strong_column": str(cfg["strong_column"])}
        rates = []
        for key, name in columns.items():  # one at a time, so an error names the key that chose the column
            try:
                (values,) = references_by_id(frame, [name], task_id_column=column, num_tasks=num_tasks)
                rates.append(rates_or_nan(values, f"column {name!r}"))
            except BotsError as exc:
                raise _renamed(exc, key, keep=True) from None
        return Interpolation(
            rates[0],
            rates[1],
            cfg.get("momentum", MOMENTUM.default),
            min_gap=cfg.get("min_gap", MIN_GAP.default),
        )
    matrix = _embedding_matrix(str(cfg["embeddings"]), np.asarray(rows_of_task), num_tasks)
    if cfg.get("estimator", "regression") == "similarity":
        return Similarity(matrix)
    try:
        forgetting = LAM.check(lam, "bots.lam")
        precision = PRIOR_PRECISION.check(cfg.get("prior_precision", PRIOR_PRECISION.default), "bots.prior_precision")
    except (InvalidArgumentError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    # The regression forgets at the selector's own λ, so its evidence fades as the posteriors' does.
    return EmbeddingRegression(matrix, forgetting=forgetting, prior_precision=precision)


def _embedding_matrix(path: str, rows_of_task: IntArray, num_tasks: int) -> npt.NDArray[np.float32]:
    """[num_tasks, d]: row k the embedding of task id k, read from ``path`` for every id the
    training data holds (a missing one, or a bad file, is a :class:`DataError` starting with
    ``bots.embeddings``)."""
    present = np.flatnonzero(rows_of_task >= 0)
    rows = embeddings_for(path, present, argument="bots.embeddings")
    # Ids in [0, num_tasks) without a row in the data (prompts verl filtered as too long, or a
    # bots.num_tasks above the largest id) are never selected and never rolled out: they get the
    # mean row of the tasks present, so they need no row in the file and leave the regression's
    # column means as they are. (Similarity normalises rows: a zero mean takes the first row.)
    fill = rows.mean(axis=0, dtype=np.float64)
    if not np.any(fill):
        fill = rows[0]
    out = np.empty((num_tasks, rows.shape[1]), dtype=np.float32)
    out[:] = fill
    out[present] = rows
    return out


def _pool_difference(text: str, here: str, saved: Any) -> str:
    """``text`` with the selector's "pool: task ids A here, B in the state" said as what differs:
    the task ids, or (same ids, ``here`` = ``saved``, the fingerprints of the ids alone) the
    prompts under them. The selector's fingerprint covers both, so without ``saved`` (a
    ``bots.checkpoint`` file) it cannot be told which, and the text says so."""
    match = re.search(r"pool: task ids (\S+) here, (\S+) in the state \(another pool of tasks\)", text)
    if match is None:
        return text
    ours, theirs = match.groups()
    if saved is None:
        what = "its task ids, or the prompts under them, differ from the checkpoint's"
    elif saved == here:
        what = "the same task ids as the checkpoint's, with other prompts under them"
    else:
        what = "other task ids than the checkpoint's"
    said = f"pool: {what} (pool fingerprint {ours} here, {theirs} in the checkpoint)"
    return text[: match.start()] + said + text[match.end() :]


#: What each parameter a checkpoint can differ in is set by, in a verl command.
_KEY_OF = {
    "n_rollouts": "bots.n_rollouts (default: actor_rollout_ref.rollout.n)",
    "evidence": "bots.embeddings or bots.weak_column / bots.strong_column",
    "pool": f"the training data (its prompts and task ids, {BOTS_DEFAULTS['task_id_column']} or bots.task_id_column)",
}


def _resumed(
    path: str,
    cfg: dict[str, Any],
    kwargs: dict[str, Any],
    evidence_for: Any,
    num_tasks: int,
    column: str,
    ids: list[Any],
    frame: Any,
) -> BOTS:
    """The selector of ``bots.checkpoint``: built from this run's config (unset BOTS keys take the
    checkpoint's values), bound to this run's pool, then loaded with the checkpoint's state. A
    key the config sets to another value than the checkpoint's (``rollout.n`` included), other
    reference columns or embeddings, or another pool is refused naming the key, unless
    ``bots.checkpoint_params`` is ``checkpoint`` (the checkpoint's win) or ``current`` (the
    config's win). ``evidence_for(lam)`` builds this run's estimator for the selector's λ."""
    choice = _checkpoint_params(cfg)
    try:
        state = read_checkpoint(path)
    except CheckpointError as exc:
        raise _renamed(exc, "bots.checkpoint") from None
    check_state_header(state)
    saved = dict(state.get("params") or {})
    for key in ("lam", "rho", "target", "thompson", "seed"):
        if key not in kwargs and key in saved:
            kwargs[key] = saved[key]
    for key in _STATE_ONLY:
        source = state if key.startswith("prior_") else saved
        if key in source:
            kwargs[key] = source[key]
    if int(state.get("num_tasks", -1)) != num_tasks:
        raise ConfigError(
            f"bots.checkpoint: {path} holds {state.get('num_tasks')} tasks, this run's pool {num_tasks} "
            "(bots.num_tasks, or the largest task id + 1)"
        )
    selector = BOTS(num_tasks, evidence=evidence_for(kwargs.get("lam", LAM.default)), **kwargs)
    bind_pool(selector, ids, column, frame)
    try:
        selector.load_state_dict(state, params=choice)  # type: ignore[arg-type]  # checked above
    except CheckpointError as exc:
        text = _pool_difference(str(exc), "", None)
        inner = text[text.find("(") + 1 : text.rfind(")")] if "differ" in text else text
        named = []
        for part in inner.split("; "):
            name, _, rest = part.partition(": ")
            key = _KEY_OF.get(name, f"bots.{name}" if name in _BOTS_KEYS else name)
            named.append(f"{key}: {rest}")
        raise ConfigError(
            f"bots.checkpoint: {path} was written with other settings than this run's ({'; '.join(named)}); "
            "set them as the checkpoint has them, or bots.checkpoint_params=checkpoint (take the checkpoint's) or "
            "current (keep this run's)"
        ) from None
    return selector


def _checkpoint_params(cfg: Mapping[str, Any]) -> str:
    """``bots.checkpoint_params``: which wins when a checkpoint (``bots.checkpoint``, or verl's
    ``data.pt`` on resume) differs from this run's selector."""
    choice = cfg.get("checkpoint_params", "error")
    if choice not in ("error", "checkpoint", "current"):
        raise ConfigError(f"bots.checkpoint_params: must be error, checkpoint or current, got {choice!r}")
    return str(choice)


def build_sampler(config: Any, dataset: Any, selector: BOTS | None = None) -> BOTSPromptSampler:
    """The :class:`BOTSPromptSampler` for verl's training ``dataset`` (an ``RLHFDataset``: its
    ``dataframe`` is read, or any dataset with those columns) under the full verl ``config``
    (``data.train_batch_size``, ``actor_rollout_ref.rollout.n`` and the ``bots`` section).
    ``selector`` replaces the configured one. With ``bots.checkpoint`` the selector is built from
    the config and loaded with the checkpoint (see :func:`_resumed`): the checkpoint never
    replaces a key the config sets."""
    cfg = _bots_options(config)
    resume_params = _checkpoint_params(cfg)
    frame = getattr(dataset, "dataframe", None)
    frame = dataset if frame is None else frame
    column = str(cfg.get("task_id_column", "extra_info.index"))
    ids = column_values(frame, column)
    if len(ids) != len(dataset):
        raise DataError(f"{column}: {len(ids)} task ids for {len(dataset)} dataset rows")
    int_ids = [int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v for v in ids]
    chunk = int(config.data.train_batch_size)
    rollout_n = int(config.actor_rollout_ref.rollout.n)
    if "n_rollouts" in cfg and float(cfg["n_rollouts"]) != float(rollout_n):
        raise ConfigError(
            f"bots.n_rollouts: {cfg['n_rollouts']:g} rollouts per task, but actor_rollout_ref.rollout.n is {rollout_n}; "
            "leave bots.n_rollouts unset (it defaults to rollout.n) or set both alike"
        )
    if selector is None:
        num_tasks = cfg.get("num_tasks")
        if num_tasks is None:
            ints = [v for v in int_ids if isinstance(v, (int, np.integer)) and not isinstance(v, bool)]
            num_tasks = (max(ints) + 1) if ints else len(int_ids)
        kwargs = {k: cfg[k] for k in _BOTS_KEYS if k in cfg}
        kwargs.setdefault("n_rollouts", rollout_n)
        rows = rows_of_tasks(int_ids, int(num_tasks), column)  # validates ids before reading columns
        _evidence_keys(cfg)  # refuses a bad combination of evidence keys before any file is read

        def evidence_for(lam: Any) -> Estimator | None:
            return _evidence(frame, cfg, column, int(num_tasks), rows, lam)

        if cfg.get("checkpoint"):
            selector = _resumed(
                str(cfg["checkpoint"]), cfg, kwargs, evidence_for, int(num_tasks), column, int_ids, frame
            )
        else:
            selector = BOTS(int(num_tasks), evidence=evidence_for(kwargs.get("lam", LAM.default)), **kwargs)
    else:
        check_rollouts(selector, rollout_n, "actor_rollout_ref.rollout.n")
    if chunk > len(int_ids):
        raise ConfigError(f"data.train_batch_size: {chunk} exceeds the {len(int_ids)} training rows")
    try:
        RewardClip(cfg.get("success_threshold"), "bots.success_threshold")  # checks the threshold alone
    except BotsError as exc:
        raise _renamed(exc, "bots.success_threshold") from None
    sampler = BOTSPromptSampler(selector, int_ids, chunk, cfg.get("success_threshold"), column)
    sampler.resume_params = resume_params
    bind_pool(selector, int_ids, column, frame)
    return sampler


# ------------------------------------------------------------------------------- replay buffer


class _EvidenceTap:
    """Reads every finished training group just before verl's replay buffer deletes it or hands it
    to the trainer, and reports it to the trainer's :class:`BOTSPromptSampler`."""

    partitions: dict[str, dict[str, dict[str, Any]]]
    refill_fn: Any
    bots_sampler: BOTSPromptSampler | None = None

    def _bots_init(self) -> None:
        trainer = getattr(self.refill_fn, "__self__", None)
        if not isinstance(trainer, _BOTSTrainerMixin):
            raise ConfigError(
                f"{type(self).__name__}: built outside a BOTS trainer (e.g. via trainer.v1.sampler.custom_sampler); "
                "BOTS would see the rewards but not choose the prompts. Run `python -m bots_rft.integrations.verl` "
                "with trainer.v1.trainer_mode=bots_sync (or bots_colocate_async / bots_separate_async) instead"
            )

    def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
        if partition_id == "train" and uids:
            self._bots_feed(partition_id, set(uids), self.partitions[partition_id], kept=False)
        super()._clear_groups(partition_id, uids)  # type: ignore[misc]

    def _materialize_batch(
        self, partition_id: str, selected_prompt_uids: list[str], partition_snapshot: dict[str, dict]
    ) -> Any:
        if partition_id == "train":
            self._bots_feed(partition_id, set(selected_prompt_uids), partition_snapshot, kept=True)
        return super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)  # type: ignore[misc]

    def _bots_feed(self, partition_id: str, uids: set[str], partition: Mapping[str, Any], kept: bool) -> None:
        sampler = self.bots_sampler
        if sampler is None:
            raise ConfigError("bots: evidence arrived before the BOTS sampler was attached to the replay buffer")
        keys = [k for k in partition if k.split("_")[0] in uids]
        # One reward per rollout (session): an agent loop with several outputs gives them all the
        # session's final reward, so the last output stands for the session.
        sessions: dict[str, dict[str, tuple[int, int, float]]] = {}
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["index", "rm_scores"])
            for key, index, scores in zip(keys, list(data["index"]), list(data["rm_scores"]), strict=True):
                uid, session, out = key.split("_")[:3]
                prev = sessions.setdefault(uid, {}).get(session)
                if prev is None or int(out) >= prev[0]:
                    sessions[uid][session] = (int(out), int(index), float(scores.float().sum()))
        for uid in sorted(uids):
            per_session = sessions.get(uid)
            if not per_session:
                sampler.observe_empty(uid)
                continue
            tasks = {t for _, t, _ in per_session.values()}
            if len(tasks) != 1:
                raise DataError(f"index: the rollouts of group {uid} carry different task ids {sorted(tasks)}")
            rewards = [r for _, _, r in per_session.values()]
            sampler.observe(uid, tasks.pop(), rewards, kept)


class BOTSReplayBuffer(_EvidenceTap, ReplayBuffer):
    """verl's sync ``ReplayBuffer`` (DAPO filtering and all) that shows BOTS every finished group."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._bots_init()


class BOTSReplayBufferAsync(_EvidenceTap, ReplayBufferAsync):
    """verl's ``ReplayBufferAsync`` (staleness, DAPO, failures) that shows BOTS every finished group."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._bots_init()


# ------------------------------------------------------------------------------------ trainers

#: Registered trainer name -> verl's mode it runs.
BOTS_MODES = {"bots_sync": "sync", "bots_colocate_async": "colocate_async", "bots_separate_async": "separate_async"}


def check_config(config: Any) -> str:
    """Refuse configurations BOTS cannot serve; returns verl's trainer mode behind the BOTS one."""
    trainer = config.trainer
    if not bool(trainer.get("use_v1", True)):
        raise ConfigError(f"trainer.use_v1: false selects verl's legacy RayPPOTrainer; BOTS supports {SUPPORTED_VERL}")
    mode = str(trainer.v1.trainer_mode)
    if mode not in BOTS_MODES:
        raise ConfigError(
            f"trainer.v1.trainer_mode: {mode!r} is not a BOTS trainer; use one of {', '.join(BOTS_MODES)}"
        )
    custom = trainer.v1.sampler.get("custom_sampler", None)
    if custom is not None and (custom.get("path") or custom.get("name")):
        raise ConfigError(
            "trainer.v1.sampler.custom_sampler: BOTS installs its own replay buffer (verl's, extended); "
            f"unset custom_sampler (got path={custom.get('path')!r}, name={custom.get('name')!r})"
        )
    sampler = config.data.get("sampler", None)
    if sampler is not None and any(v is not None for v in dict(sampler).values()):
        raise ConfigError(
            f"data.sampler: verl 0.9's V1 trainer never reads it (the verl <= 0.7 curriculum-sampler route), so it "
            f"would be ignored; BOTS chooses the prompts: remove data.sampler (got {dict(sampler)!r:.120})"
        )
    workers = config.data.get("dataloader_num_workers", 0)
    if workers:
        raise ConfigError(
            f"data.dataloader_num_workers: {workers}, but BOTS's training loader runs with 0 workers (a worker "
            "fetches prompts ahead, chosen from a posterior missing the latest evidence), and verl's validation "
            "loader takes the same key; remove it (the entry point's default is 0)"
        )
    reward_model = config.reward.reward_model
    if reward_model.enable and not reward_model.enable_resource_pool:
        raise ConfigError(
            "reward.reward_model: a colocated reward model scores rollouts only after the replay buffer hands "
            "out a batch, so the groups it filters or discards would reach BOTS without rewards; use rule-based "
            "rewards or reward.reward_model.enable_resource_pool=true"
        )
    _bots_options(config)
    return BOTS_MODES[mode]


class _BOTSTrainerMixin:
    """What the three BOTS trainers add to verl's: see the module docstring."""

    config: DictConfig
    replay_buffer: Any
    train_dataset: Any
    train_dataloader: Any
    train_dataloader_it: Any
    global_steps: int
    bots_sampler: BOTSPromptSampler

    def __init__(self, config: DictConfig) -> None:
        check_verl()
        mode = check_config(config)
        with open_dict(config):  # verl branches on the plain mode name everywhere
            config.trainer.v1.trainer_mode = mode
        super().__init__(config)  # type: ignore[call-arg]

    def _build_replay_buffer(self) -> Any:
        # verl's own construction (DAPO metric, batch sizes, in-flight bound, failure refills), then the
        # same arguments into the BOTS subclass: nothing of verl's filtering is re-derived by hand.
        stock = super()._build_replay_buffer()  # type: ignore[misc]
        cls = {ReplayBuffer: BOTSReplayBuffer, ReplayBufferAsync: BOTSReplayBufferAsync}.get(type(stock))
        if cls is None:
            raise ConfigError(f"trainer.v1.sampler: unexpected replay buffer {type(stock).__name__}")
        names = [p for p in inspect.signature(ReplayBuffer.__init__).parameters if p != "self"]
        return cls(**{name: getattr(stock, name) for name in names})

    def _init_dataloader(self) -> None:
        super()._init_dataloader()  # type: ignore[misc]
        self.bots_sampler = build_sampler(self.config, self.train_dataset)
        gen_batch_size = self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size
        # num_workers=0: workers would fetch ahead, i.e. select from a posterior missing recent evidence.
        self.train_dataloader = StatefulDataLoader(
            dataset=self.train_dataset,
            batch_size=gen_batch_size,
            num_workers=0,
            drop_last=True,
            collate_fn=collate_fn,
            sampler=self.bots_sampler,
        )
        self.train_dataloader_it = None
        self.replay_buffer.bots_sampler = self.bots_sampler

    def _fetch_one_gen_batch(self) -> Any:
        batch = super()._fetch_one_gen_batch()  # type: ignore[misc]
        self.bots_sampler.dispatched(list(batch["uid"]))
        return batch

    def step(self, metrics: dict[str, Any], timing_raw: dict[str, Any]) -> Any:
        batch = super().step(metrics, timing_raw)  # type: ignore[misc]
        metrics.update(self.bots_sampler.fold())  # before fit() writes this step's checkpoint
        return batch

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()  # type: ignore[misc]
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        self.bots_sampler.selector.save(os.path.join(folder, SELECTOR_FILE))

    def _load_checkpoint(self) -> Any:
        out = super()._load_checkpoint()  # type: ignore[misc]
        # StatefulDataLoader restores its sampler only when iterated; do it now, so evidence arriving
        # before the first fetch (async modes) lands in the restored state, not in one replaced later.
        if self.train_dataloader_it is None:
            self.train_dataloader_it = iter(self.train_dataloader)
        return out


class BOTSPPOTrainerSync(_BOTSTrainerMixin, PPOTrainerSync):
    """verl's sync V1 trainer with BOTS choosing prompts (``trainer.v1.trainer_mode=bots_sync``)."""


class BOTSPPOTrainerColocateAsync(_BOTSTrainerMixin, PPOTrainerColocateAsync):
    """verl's colocated async V1 trainer with BOTS (``trainer.v1.trainer_mode=bots_colocate_async``)."""


class BOTSPPOTrainerSeparateAsync(_BOTSTrainerMixin, PPOTrainerSeparateAsync):
    """verl's separate async V1 trainer with BOTS (``trainer.v1.trainer_mode=bots_separate_async``)."""


_TRAINERS = {
    "bots_sync": BOTSPPOTrainerSync,
    "bots_colocate_async": BOTSPPOTrainerColocateAsync,
    "bots_separate_async": BOTSPPOTrainerSeparateAsync,
}


def register() -> None:
    """Put the BOTS trainers into verl's ``TRAINER_REGISTRY`` (idempotent)."""
    for name, cls in _TRAINERS.items():
        if TRAINER_REGISTRY.get(name) is not cls:
            register_trainer(name)(cls)


# --------------------------------------------------------------------------------- entry point


class BOTSTaskRunner(_TaskRunnerV1.__ray_actor_class__):  # type: ignore[misc,name-defined]
    """verl's V1 task runner, registering the BOTS trainers in the Ray actor before verl looks the
    trainer up by name (``get_trainer_cls``)."""

    def run(self, config: DictConfig) -> Any:
        register()
        check_config(config)
        return super().run(config)


def _default_config() -> dict[str, Any]:
    return {
        "defaults": ["ppo_trainer", "_self_"],
        "bots": dict(BOTS_DEFAULTS),
        "trainer": {"v1": {"trainer_mode": "bots_sync"}},
        "data": {"dataloader_num_workers": 0},
    }


def _ray_cpus(config: Any) -> tuple[int, str] | None:
    """The Ray CPUs a local run gets (``ray_kwargs.ray_init.num_cpus``, else this host's cores) and
    where that number came from; None when verl joins a running cluster (an ``address``, or
    ``RAY_ADDRESS``), whose size only that cluster knows."""
    ray_init = config.get("ray_kwargs", {}).get("ray_init", {}) or {}
    if ray_init.get("address") or os.environ.get("RAY_ADDRESS"):
        return None
    if ray_init.get("num_cpus") is not None:
        return int(ray_init["num_cpus"]), "ray_kwargs.ray_init.num_cpus"
    return int(os.cpu_count() or 1), "this host's cores (ray_kwargs.ray_init.num_cpus is unset)"


def check_ray_capacity(config: Any) -> str:
    """Refuse a local Ray too small for TransferQueue; returns a line saying what it holds.

    verl's task runner starts TransferQueue before anything else: its controller and every
    SimpleStorage unit are Ray actors holding one CPU each for as long as they live, and
    ``tq.init`` waits (with no timeout) until every unit answers. verl's default of 8 units on a
    Ray with fewer than 9 CPUs leaves units that can never start, so it waits forever without a
    message; refusing here names the setting instead."""
    key = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
    backend = config.get("transfer_queue", {}).get("backend", {}) or {}
    if str(backend.get("storage_backend", "SimpleStorage")) != "SimpleStorage":
        return f"TransferQueue: storage backend {backend.get('storage_backend')} (its CPUs are not checked)"
    units = int(backend.get("SimpleStorage", {}).get("num_data_storage_units", 8))
    cpus = _ray_cpus(config)
    if cpus is None:
        return f"TransferQueue: {units + 1} Ray CPUs (controller and {units} storage units) on the running cluster"
    have, source = cpus
    if units + 1 > have:
        raise ConfigError(
            f"{key}: {units} storage units and TransferQueue's controller hold {units + 1} Ray CPUs, but Ray gets "
            f"{have} ({source}), so verl would wait for them forever; set {key}=1 (or fewer units than the CPUs, "
            "or raise +ray_kwargs.ray_init.num_cpus)"
        )
    return f"Ray: {have} CPUs ({source}); TransferQueue holds {units + 1} of them (its controller and {units} storage unit(s))"


def _train_frame(config: Any) -> Any:
    """verl's training files as one DataFrame (parquet, as ``RLHFDataset`` reads them)."""
    import pandas as pd  # type: ignore[import-untyped]  # a dependency of verl

    files = config.data.train_files
    files = [files] if isinstance(files, str) else list(files)
    for f in files:
        if not os.path.exists(f):
            raise ConfigError(f"data.train_files: {f} does not exist")
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def preflight(config: DictConfig) -> list[str]:
    """Everything the entry point can check without a GPU, in the order a run would meet it: the
    version gate, the BOTS checks of the config, verl's own ``validate_config``, the Ray CPUs
    TransferQueue needs, and the training data read into the selector (task ids, reference
    columns, batch size). Returns what a run would do, one line each; raises a :class:`BotsError`
    naming the key at the first problem. Starts nothing (no Ray, no model, no GPU)."""
    from hydra.errors import InstantiationException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    bypassed = check_verl()
    version = str(getattr(_verl, "__version__", "?"))
    where = "inside" if TESTED_VERL.contains(version) else "OUTSIDE"
    lines = [f"verl {version}: {where} the tested window ({TESTED_VERL}); {_count(len(VERL_SEAMS), 'method')} checked"]
    if bypassed:
        lines[-1] += f"; BOTS_ALLOW_UNTESTED=1 bypassed {len(bypassed)}"
    untested = untested_under_verl()
    if untested:
        lines[-1] += "".join(f"; {phrase}" for phrase in untested)
    mode = check_config(config)
    dapo = config.algorithm.get("filter_groups", {}) or {}
    lines.append(
        f"trainer: {config.trainer.v1.trainer_mode} (verl's {mode} mode); DAPO group filter "
        + (f"on (metric {dapo.get('metric')})" if dapo.get("enable") else "off")
    )
    auto_set_device(config)
    try:
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
    except (AssertionError, ValueError, TypeError, InstantiationException) as exc:
        # verl's checks are plain asserts and ValueErrors, some raised inside hydra's instantiate:
        # report the innermost message, on one line.
        cause: BaseException = exc
        while cause.__cause__ is not None:
            cause = cause.__cause__
        raise ConfigError(f"verl's validate_config: {' '.join(str(cause).split())}") from None
    lines.append(check_ray_capacity(config))
    frame = _train_frame(config)
    sampler = build_sampler(config, frame)
    sel = sampler.selector
    lines.append(
        f"pool: {len(frame)} rows, task ids from {sampler.task_id_column}, {sel.num_tasks} tasks; "
        f"{sampler.chunk_size} prompts x {config.actor_rollout_ref.rollout.n} rollouts per step; "
        f"pool fingerprint {sel.pool}"
    )
    lines.append(describe_selector(sel, _bots_options(config)))
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def describe_selector(sel: BOTS, cfg: Mapping[str, Any]) -> str:
    """One line on the selector a run will use, read from the selector itself (not from the
    config): its parameters, where it came from (``bots.checkpoint``: the file and its updates)
    and its implicit evidence (kind, reference columns, hash of the references)."""
    p = sel.params
    shown = ("lam", "rho", "target", "n_rollouts", "thompson", "seed", "tau", "adaptive_rho", "adaptive_lam")
    params = ", ".join(f"{k}={p[k]:g}" if isinstance(p[k], float) else f"{k}={p[k]}" for k in shown if k in p)
    origin = (
        f" resumed from {cfg['checkpoint']} ({_count(sel.num_updates, 'update')}, "
        f"{_count(sel.num_selections, 'selection')})"
        if cfg.get("checkpoint")
        else ""
    )
    evidence = sel.identity["evidence"]
    if evidence is None:
        refs = "no implicit evidence (no reference columns)"
    elif evidence["kind"] == "interpolation" and "weak_column" in cfg:
        refs = (
            f"interpolation evidence from {cfg['weak_column']} / {cfg['strong_column']} "
            f"(references {evidence['sha256']}, momentum {sel.evidence.momentum:g})"  # type: ignore[union-attr]
        )
    elif isinstance(sel.evidence, EmbeddingRegression) and "embeddings" in cfg:
        est = sel.evidence
        refs = (
            f"embedding-regression evidence from bots.embeddings={cfg['embeddings']} ({len(est)} x "
            f"{est.embeddings.shape[1]}, embeddings {evidence['sha256']}, prior_precision {est.prior_precision:g}, "
            f"forgetting {est.forgetting:g})"
        )
    elif evidence["kind"] == "similarity" and "embeddings" in cfg:
        refs = f"similarity evidence from bots.embeddings={cfg['embeddings']} (embeddings {evidence['sha256']})"
    else:
        refs = f"{evidence['kind']} evidence (references {evidence['sha256']})"
    return f"selector: BOTS({params}){origin}; {refs}"


def _preflight(config: DictConfig) -> None:
    try:
        lines = preflight(config)
    except BotsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print("\n".join(lines))
    print("check passed: nothing was started; the same command without --check runs it (GPUs needed)")


def _run(config: DictConfig) -> None:
    import ray
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    check_verl()
    check_config(config)
    untested = untested_under_verl()
    if untested:  # verl's own pin allows it, so it runs; said once, before the long run starts
        print(
            f"python -m bots_rft.integrations.verl: note: {'; '.join(untested)}",
            file=sys.stderr,
        )
    check_ray_capacity(config)  # before Ray starts: a TransferQueue that cannot be placed hangs
    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    run_ppo(config, task_runner_class=ray.remote(BOTSTaskRunner))


#: Where a run's hydra log and config copy go unless the command sets ``hydra.run.dir``.
HYDRA_RUN_DIR = "${trainer.default_local_dir}/hydra/${now:%Y-%m-%d_%H-%M-%S}"


def main() -> None:
    """``python -m bots_rft.integrations.verl [--check] <hydra overrides>``: verl's ``main_ppo`` with
    the BOTS trainers (config: verl's ``ppo_trainer`` plus ``bots.*``,
    ``trainer.v1.trainer_mode=bots_sync``). With ``--check``, only :func:`preflight`: exit status
    0 and what the run would do, or 2 and one line naming the key at fault."""
    import hydra
    from hydra.core.config_store import ConfigStore

    register()  # here, not on import: importing the module changes nothing in verl
    check_only = "--check" in sys.argv[1:]
    if check_only:
        sys.argv.remove("--check")  # hydra parses the rest
        # A check writes nothing: no hydra output folder, no job log.
        sys.argv += [
            "hydra.output_subdir=null",
            "hydra.run.dir=.",
            "hydra/job_logging=disabled",
            "hydra/hydra_logging=disabled",
        ]
    elif not any(arg.startswith(("hydra.run.dir=", "++hydra.run.dir=")) for arg in sys.argv[1:]):
        # hydra's default writes outputs/<date>/<time>/ into the working directory (a repository,
        # often); keep its log and config copy with the run's checkpoints instead.
        sys.argv.append(f"hydra.run.dir={HYDRA_RUN_DIR}")
    ConfigStore.instance().store(name="bots_ppo_trainer", node=_default_config())
    config_dir = os.path.join(os.path.dirname(_verl.__file__), "trainer", "config")
    task = _preflight if check_only else _run
    hydra.main(config_path=config_dir, config_name="bots_ppo_trainer", version_base=None)(task)()


if __name__ == "__main__":
    # Run the module under its real name, so the classes Ray ships to its actor are importable ones.
    from bots_rft.integrations.verl import main as _main

    _main()
