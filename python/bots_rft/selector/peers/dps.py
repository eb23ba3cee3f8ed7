"""DPS, Dynamics-Predictive Sampling (arXiv 2603.10887, ICLR 2026; code: maoyixiu/DPS,
``recipe/dps/task_sampler.py``).

Each prompt's *solving state* is one of three: unsolved (0 of n rollouts correct), partially
solved (0 < k < n) and solved (k = n). DPS tracks it with a per-prompt hidden Markov model whose
3x3 transition matrix has a Dirichlet posterior (counts ``alpha``, column j: from state j), and a
predicted state distribution ``pi`` for the next time the prompt is rolled out. Each step:

1. **Candidates**: ``candidate_ratio`` x batch prompts from the data loader (an epoch-order walk of
   the pool; the published runs use 32 x 256, capped at the pool);
2. **Select** the ``batch_size`` candidates with the highest predicted probability of the
   partially-solved state (the "topk" strategy of the published scripts; stable order on ties);
3. **Update** after rollout. A rolled-out prompt's state is observed exactly; its transition
   counts get the soft count ``outer(onehot, pi_before) * P / sum`` (P: the expected transition
   matrix), after old counts decay toward the prior by ``transition_decay``; its prediction
   becomes ``P @ onehot``. Every other prompt DPS has met (as a candidate or in a batch) has no
   observation: its counts decay toward the prior and its prediction is propagated one step,
   ``pi <- P @ pi``. Prompts never met keep the prior (uniform ``pi``, all counts ``prior_alpha``).

Defaults are the published scripts' (``scripts/math/math_verl_1.5b_dps.sh``): candidate_ratio 32,
prior_alpha 1.0 (uniform Dirichlet), transition_decay 0.7, uniform initial state distribution,
"topk" selection. The whole pool is tracked in arrays rather than per-prompt dictionaries; the
arithmetic is the reference code's, vectorised.

Given reference pass rates (``prior``, with the run's ``n_rollouts``: the scoreboard's
shared-information setting), a prompt's initial state distribution is that of a group of n
rollouts at the reference's rate instead of uniform.

Reference lines (maoyixiu/DPS@5654d52): ``recipe/dps/task_sampler.py:L72-85`` (prediction
``P @ pi``, P's columns normalised), ``L87-103`` (soft count, decay toward the prior),
``L133-135`` (topk on the partial state), ``L144-181`` (observed prompts), ``L182-199`` (every
other prompt met: decay and propagate), ``L58-70`` (a candidate is met once scored);
``recipe/dps/our_ray_trainer.py:L209-222`` (candidates: min(candidate_ratio x batch, pool), a
``drop_last`` loader), ``L406-408`` (topk over each candidate batch), ``L54-80`` (state from each
group's mean accuracy); ``recipe/dps/scripts/math/math_verl_1.5b_dps.sh:L26-32,L132-136``
(no DAPO filter, batch 256, candidate_ratio 32, topk, prior_alpha 1.0, decay 0.7);
``recipe/dps/config/our_trainer.yaml:L39`` (uniform initial state). One difference: the reference
loader drops each epoch's last partial candidate batch, the walk here crosses the epoch boundary
instead (neutral: the dropped prompts are a random subset).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..._portable import int_power
from ..._validation import as_int, feedback, selectable
from ..._validation import batch_size as _check_batch
from ...errors import CheckpointError
from ...parameters import ROLLOUTS, SEED, Parameter
from ..method import Method, references
from .base import FloatArray, IdArray, check_state, prior_rates, saved_array
from .dapo import EpochOrder

__all__ = ["DynamicsPredictiveSampling", "STATES"]

CANDIDATE_RATIO = Parameter(
    "candidate_ratio", "float", 32.0, "DPS: candidates scored per step, as a multiple of the batch size", 1.0
)
PRIOR_ALPHA = Parameter(
    "prior_alpha", "float", 1.0, "DPS: Dirichlet prior count of every state transition", 0.0, low_open=True
)
TRANSITION_DECAY = Parameter(
    "transition_decay", "float", 0.7, "DPS: share of old transition counts kept each step (1: no forgetting)", 0.0, 1.0
)

#: The solving states, in the order of every state vector and transition matrix.
STATES = ("unsolved", "partial", "solved")
PARTIAL = 1


def observed_states(successes: FloatArray, trials: FloatArray) -> IdArray:
    """0 (none correct), 1 (some) or 2 (all) for each group, as DPS reads a batch's accuracy."""
    return np.where(successes <= 0, 0, np.where(successes >= trials, 2, PARTIAL)).astype(np.int64)


class DynamicsPredictiveSampling:
    """DPS as a :class:`~bots_rft.selector.protocol.Selector` (module docstring: model and
    defaults)."""

    kind = "dps"

    def __init__(
        self,
        num_tasks: int,
        *,
        candidate_ratio: float = CANDIDATE_RATIO.default,
        prior_alpha: float = PRIOR_ALPHA.default,
        transition_decay: float = TRANSITION_DECAY.default,
        seed: int = SEED.default,
        n_rollouts: int = ROLLOUTS.default,
        prior: npt.ArrayLike | None = None,
    ) -> None:
        self.num_tasks = as_int(num_tasks, "num_tasks", minimum=1)
        self.candidate_ratio = CANDIDATE_RATIO.check(candidate_ratio)
        self.prior_alpha = PRIOR_ALPHA.check(prior_alpha)
        self.transition_decay = TRANSITION_DECAY.check(transition_decay)
        self.seed = SEED.check(seed)
        self._order = EpochOrder(self.num_tasks, seed=self.seed)
        n = self.num_tasks
        self.alpha: FloatArray = np.full((n, 3, 3), self.prior_alpha)  # alpha[k, i, j]: count of j -> i
        self.pi: FloatArray = np.full((n, 3), 1.0 / 3.0)  # predicted state at the next rollout
        self.pi_before: FloatArray = np.full((n, 3), 1.0 / 3.0)  # the state the next transition leaves
        if prior is not None:
            # A reference pass rate p gives the state of a group of n rollouts before any is seen:
            # unsolved (1-p)^n, solved p^n, partial the rest (NaN: no information, 1/3 each).
            p = prior_rates(prior, n)
            k = ROLLOUTS.check(n_rollouts)
            fail, solve = int_power(1 - p, k), int_power(p, k)  # the same bits on every CPU
            start = np.stack([fail, 1 - fail - solve, solve], axis=1)
            start[np.isnan(p)] = 1.0 / 3.0
            self.pi, self.pi_before = start.copy(), start.copy()
        self.met = np.zeros(n, dtype=bool)  # prompts DPS has met (and so propagates every step)
        self.times_sampled = np.zeros(n, dtype=np.int64)

    # ----------------------------------------------------------------------------- prediction
    def partial_probability(self, task_ids: object = None) -> FloatArray:
        """The predicted probability that each task's next rollouts are partially solved."""
        if task_ids is None:
            return self.pi[:, PARTIAL].copy()
        return np.asarray(self.pi[np.asarray(task_ids, dtype=np.int64), PARTIAL], dtype=np.float64)

    def _expected_transitions(self, alpha: FloatArray) -> FloatArray:
        return np.asarray(alpha / alpha.sum(axis=1, keepdims=True), dtype=np.float64)

    # ----------------------------------------------------------------------------- selection
    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        allowed = selectable(exclude, self.num_tasks)
        available = self.num_tasks if allowed is None else int(allowed.sum())
        b = _check_batch(batch_size, available)
        want = min(available, max(b, int(np.ceil(self.candidate_ratio * b))))
        candidates = self._order.select(want, exclude=None if allowed is None else ~allowed)
        if candidates.size < b:  # the walk hands out fewer near an exclusion-heavy epoch end
            more = self._order.select(b - candidates.size, exclude=_mask_with(allowed, candidates, self.num_tasks))
            candidates = np.concatenate([candidates, more])
        self.met[candidates] = True
        score = self.pi[candidates, PARTIAL]
        top = np.argsort(-score, kind="stable")[:b]
        return np.asarray(candidates[top], dtype=np.int64)

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        """One step of the filter: observe the rolled-out tasks, propagate every other met task."""
        ids, succ, tri = feedback(task_ids, successes, trials, self.num_tasks)
        ids, first = np.unique(ids, return_index=True)  # one observation per task and step
        succ, tri = succ[first], tri[first]
        decay, prior = self.transition_decay, self.prior_alpha
        # Prompts met but not observed: counts decay toward the prior, prediction moves one step.
        idle = self.met.copy()
        idle[ids] = False
        if idle.any():
            a = self.alpha[idle] * decay + prior * (1.0 - decay)
            pi = self.pi[idle]
            nxt = np.einsum("kij,kj->ki", self._expected_transitions(a), pi)
            self.alpha[idle], self.pi_before[idle] = a, pi
            self.pi[idle] = nxt / nxt.sum(axis=1, keepdims=True)
        if ids.size:
            onehot = np.eye(3)[observed_states(succ, tri)]
            a = self.alpha[ids]
            p_old = self._expected_transitions(a)
            soft = onehot[:, :, None] * self.pi_before[ids][:, None, :] * p_old
            soft /= soft.sum(axis=(1, 2), keepdims=True)
            a = a * decay + prior * (1.0 - decay) + soft
            nxt = np.einsum("kij,kj->ki", self._expected_transitions(a), onehot)
            self.alpha[ids], self.pi_before[ids] = a, onehot
            self.pi[ids] = nxt / nxt.sum(axis=1, keepdims=True)
            self.met[ids] = True
            self.times_sampled[ids] += 1

    # ----------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "candidate_ratio": self.candidate_ratio,
            "prior_alpha": self.prior_alpha,
            "transition_decay": self.transition_decay,
            "order": self._order.state_dict(),
            "alpha": self.alpha.copy(),
            "pi": self.pi.copy(),
            "pi_before": self.pi_before.copy(),
            "met": self.met.copy(),
            "times_sampled": self.times_sampled.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = check_state(state, self.kind, self.num_tasks)
        n = self.num_tasks
        alpha = saved_array(st, "alpha", (n, 3, 3), np.float64)
        pi = saved_array(st, "pi", (n, 3), np.float64)
        pi_before = saved_array(st, "pi_before", (n, 3), np.float64)
        met = saved_array(st, "met", (n,), bool)
        times = saved_array(st, "times_sampled", (n,), np.int64)
        if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0) and np.all(np.isfinite(pi))):
            raise CheckpointError("state: has transition counts that are not finite and > 0, or a non-finite pi")
        order = EpochOrder(n, seed=self.seed)
        order.load_state_dict(st.get("order"))  # type: ignore[arg-type]
        self._order, self.alpha, self.pi, self.pi_before = order, alpha, pi, pi_before
        self.met, self.times_sampled = met, times
        self.seed = int(st.get("seed", self.seed))


def _mask_with(allowed: npt.NDArray[np.bool_] | None, taken: IdArray, n: int) -> npt.NDArray[np.bool_]:
    """The exclusion mask: tasks not allowed, plus ``taken``."""
    excluded = np.zeros(n, dtype=bool) if allowed is None else ~allowed
    excluded[taken] = True
    return excluded


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Any:
    refs = references(m, weak, strong)  # the weak reference's rate is the prior, when given
    return DynamicsPredictiveSampling(n, **p, prior=None if refs is None else refs[0])


METHOD = Method(
    name="dps",
    label="DPS",
    summary="Dynamics-Predictive Sampling: per-task hidden Markov model of the solving state "
    "(unsolved/partial/solved), top-k predicted partial among candidates",
    params=(CANDIDATE_RATIO, PRIOR_ALPHA, TRANSITION_DECAY, SEED, ROLLOUTS),
    references="optional",
    implementation="bots_rft.selector.peers.dps:DynamicsPredictiveSampling",
    builder=_build,
)
