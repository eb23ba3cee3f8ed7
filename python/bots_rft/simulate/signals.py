"""Extra per-task signals of a simulated world, for the estimators that read them.

The world of :mod:`.learner` has two measured reference pass rates (weak, strong). The methods
``bots-multiref`` and ``bots-sim`` need more: further reference columns and task embeddings.
Both are derived here from the world's latent task parameters (skill group g_k, initial logit
b_k, pace v_k) on a random stream of their own, so adding them changes nothing else in a world
and the same (world, seed) always gives the same signals:

- ``references`` [N, 4]: weak, strong (the world's own), then two more measured the same way
  (``ref_rollouts`` rollouts each): a *base* column, the initial policy's own pass rate (ability
  0, no model mismatch: what measuring the base model once before training gives), and a *mid*
  reference model at ability 2.25 with the same per-group profile noise and per-task noise as the
  world's weak and strong references.
- ``embeddings`` [N, 32]: what an embedding model that partly knows a task's skill and
  difficulty gives: the features (group one-hot, standardised b_k, standardised log v_k), with
  Gaussian noise of standard deviation ``LearnerConfig.embedding_noise`` (default 0.5, its
  informativeness) added per feature, then mixed into 32 dimensions by a fixed random rotation,
  plus isotropic noise in every dimension.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from .learner import TaskWorld

__all__ = ["SIGNALS", "simulated_signals", "extra_references", "embeddings"]

#: The signals a simulated world can supply, by the name the method table uses.
SIGNALS = ("references", "embeddings")

MID_LEVEL = 2.25
EMBEDDING_DIM = 32
EMBEDDING_JITTER = 0.1  # isotropic, per embedding dimension

_STREAM = 0x516E  # "signals": a stream no other part of the simulator uses


def _rng(seed: int, part: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), _STREAM, part])


def _sigmoid(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)


def extra_references(world: TaskWorld, seed: int) -> npt.NDArray[np.float64]:
    """[N, 4] measured pass rates: weak, strong, base (initial policy), mid (see the module)."""
    c = world.config
    rng = _rng(seed, 1)
    base = rng.binomial(c.ref_rollouts, _sigmoid(world.base_logit)) / c.ref_rollouts
    profile = MID_LEVEL + rng.normal(0.0, c.ref_group_std, c.num_groups)
    noise = rng.normal(0.0, c.ref_task_noise, world.num_tasks)
    mid_p = _sigmoid(world.base_logit + world.pace * profile[world.group] + noise)
    mid = rng.binomial(c.ref_rollouts, mid_p) / c.ref_rollouts
    return np.column_stack([world.weak, world.strong, base, mid]).astype(np.float64)


def embeddings(world: TaskWorld, seed: int) -> npt.NDArray[np.float32]:
    """[N, 32] noisy embeddings of the latent task parameters (see the module)."""
    c = world.config
    rng = _rng(seed, 2)
    onehot = np.eye(c.num_groups)[world.group]
    logit = (world.base_logit - world.base_logit.mean()) / max(world.base_logit.std(), 1e-12)
    log_pace = np.log(world.pace)
    pace = (log_pace - log_pace.mean()) / max(log_pace.std(), 1e-12)
    features = np.column_stack([onehot, logit, pace])
    features += rng.normal(0.0, c.embedding_noise, features.shape)
    rotation = np.linalg.qr(rng.normal(size=(EMBEDDING_DIM, EMBEDDING_DIM)))[0][: features.shape[1]]
    out = features @ rotation + rng.normal(0.0, EMBEDDING_JITTER, (world.num_tasks, EMBEDDING_DIM))
    return out.astype(np.float32)


def simulated_signals(
    world: TaskWorld, seed: int, names: Iterable[str]
) -> dict[str, npt.NDArray[np.float64] | npt.NDArray[np.float32]]:
    """The signals ``names`` of ``world`` (each a name in :data:`SIGNALS`)."""
    out: dict[str, npt.NDArray[np.float64] | npt.NDArray[np.float32]] = {}
    for name in names:
        if name == "references":
            out[name] = extra_references(world, seed)
        elif name == "embeddings":
            out[name] = embeddings(world, seed)
        else:
            raise ConfigError(f"signals: the simulator supplies {list(SIGNALS)}, got {name!r}")
    return out
