"""BOTS with screening rollouts (method ``bots-screen``): BOTS chooses which prompts to try,
SPEED-RL's screen decides which of them to roll out in full.

Each generation call asks BOTS for a fresh batch of ``gen_ratio x batch_size`` prompts (Thompson
sampling nearest the target, excluding prompts already queued) and gives each ``n_init``
screening rollouts; a prompt whose screening rollouts disagree (0 < successes < n_init) qualifies
and gets ``n_continue`` more in the next call, together with the next fresh batch; a step trains
on ``batch_size`` prompts with all ``n_init + n_continue`` rollouts, as
:class:`~bots_rft.selector.peers.speed.SpeedRL` does (queues, top-up and accounting are its
own). Every rollout, the failed screenings' included, is evidence for BOTS's posterior at
:meth:`update`.

Why: SPEED-RL's screen is cheap where the candidates are poor (4 rollouts to drop a prompt that
16 would have wasted), and BOTS's candidates are rarely poor; together the step trains only on
prompts whose groups disagree (what DAPO's filter buys per step) at little more than BOTS's
spend per rollout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import CheckpointError
from ..parameters import BOTS_PARAMS, GEN_RATIO, MAX_GEN_BATCHES, N_CONTINUE, N_INIT, SCREENING_PARAMS, SEED
from .bots.methods import bots_selector, interpolation
from .method import Method, RolloutMode, needs_rollout
from .peers.base import FloatArray, Groups, IdArray
from .peers.speed import SpeedRL
from .protocol import RolledBatch, Selector

__all__ = ["ScreenedBOTS"]


class _ProposedBy:
    """The fresh prompts of a generation call, from BOTS instead of the data loader's walk."""

    def __init__(self, bots: Selector) -> None:
        self.bots = bots

    def select(self, count: int, exclude: npt.NDArray[np.bool_] | None = None) -> IdArray:
        free = self.bots.num_tasks if exclude is None else int((~exclude).sum())  # type: ignore[attr-defined]
        if free == 0:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.bots.select(min(count, free), exclude=exclude), dtype=np.int64)


class ScreenedBOTS(SpeedRL):
    """BOTS proposing, SPEED-RL's screen filtering (module docstring)."""

    kind = "bots_screen"

    def __init__(
        self,
        num_tasks: int,
        rollout: Any,
        *,
        bots: Selector,
        n_init: int = N_INIT.default,
        n_continue: int = N_CONTINUE.default,
        gen_ratio: float = GEN_RATIO.default,
        max_gen_batches: int = MAX_GEN_BATCHES.default,
        seed: int = SEED.default,
    ) -> None:
        super().__init__(
            num_tasks,
            rollout,
            n_init=n_init,
            n_continue=n_continue,
            gen_ratio=gen_ratio,
            max_gen_batches=max_gen_batches,
            seed=seed,
        )
        self.bots = bots
        self._order = _ProposedBy(bots)  # type: ignore[assignment]
        self._observed: list[tuple[IdArray, FloatArray, FloatArray]] = []  # this step's rollouts
        self._evidence: tuple[IdArray, FloatArray, FloatArray] = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))

    # BOTS's state is the selector's; the posterior and the estimator are read by the reports.
    @property
    def capability(self) -> Any:
        return getattr(self.bots, "capability", None)

    def predicted(self) -> Any:
        return self.bots.predicted() if hasattr(self.bots, "predicted") else None

    def posterior(self, task_ids: Any = None) -> Any:
        return self.bots.posterior(task_ids)  # type: ignore[attr-defined]

    def _roll(self, task_ids: IdArray, counts: npt.ArrayLike) -> FloatArray:
        succ = super()._roll(task_ids, counts)
        ids = np.asarray(task_ids, dtype=np.int64)
        self._observed.append((ids, succ, np.broadcast_to(np.asarray(counts, dtype=np.float64), ids.shape).copy()))
        return succ

    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        self._observed = []
        batch, _ = super()._roll_step(batch_size, allowed)
        if self._observed:
            ids = np.concatenate([o[0] for o in self._observed])
            succ = np.concatenate([o[1] for o in self._observed])
            trials = np.concatenate([o[2] for o in self._observed])
        else:  # trained on the queue alone: nothing new to learn from
            ids, succ, trials = np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        # update() accepts the trained prompts; they are a subset of what the step rolled out,
        # except queued ones rolled out in earlier steps, so those are listed too (no evidence).
        known = np.union1d(ids, batch.task_ids)
        self._evidence = (ids, succ, trials)
        return batch, (known, np.zeros(known.size), np.ones(known.size))

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        ids, succ, tri = self._evidence
        if ids.size:
            self.bots.update(ids, succ, tri)

    def _extra_state(self) -> dict[str, Any]:
        return {**self._queue_state(), "bots": self.bots.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        bots_state = state.get("bots")
        if not isinstance(bots_state, dict):
            raise CheckpointError("state: has no BOTS state for bots-screen")
        before = self.bots.state_dict()
        self.bots.load_state_dict(bots_state)
        try:
            self._load_queue_state(state)
        except CheckpointError:
            self.bots.load_state_dict(before)
            raise


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> ScreenedBOTS:
    screen = {k: p[k] for k in ("n_init", "n_continue", "gen_ratio", "max_gen_batches")}
    bots = bots_selector(n, p, interpolation(m, weak, strong, p), threads)
    return ScreenedBOTS(n, needs_rollout(m, rollout), bots=bots, seed=p["seed"], **screen)


METHOD = Method(
    name="bots-screen",
    label="BOTS-Screen",
    summary="BOTS proposing the prompts SPEED-RL's screen tries: n_init screening rollouts each, "
    "n_continue more for those whose screening disagrees; every rollout is BOTS's evidence",
    params=(*BOTS_PARAMS, *SCREENING_PARAMS),
    references="optional",
    rollout_mode=RolloutMode.CALLBACK,
    implementation="bots_rft.selector.screen:ScreenedBOTS",
    builder=_build,
)
