"""Rewards of rollouts: each completion scored by the pool's verifier for its task's
``data_source`` (``bots_rft.rewards``). A verifier error (the verifier raised, hung, crashed or
returned something that is not a reward) costs that rollout (reward 0) and is tallied in a
:class:`VerifierErrors`, which the trainer records per step and checks against its stop threshold."""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..data import TaskPool
from ..errors import ConfigError, DataError
from ..rewards import RewardItem, RewardScorer, get_verifier, register_verifier
from ..rewards.scorer import verifier_name
from .toy import TOY_VERIFIER

__all__ = ["register_config_verifiers", "score_texts", "VerifierErrors"]


@dataclass
class VerifierErrors:
    """Verifier errors among ``scored`` verifications: how many, by kind, and the first one
    (``"module:function for data_source 'x': reason"``)."""

    count: int = 0
    scored: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    first: str | None = None

    def add(self, other: VerifierErrors) -> None:
        self.count += other.count
        self.scored += other.scored
        self.by_kind.update(other.by_kind)
        if self.first is None:
            self.first = other.first

    @classmethod
    def merged(cls, parts: Iterable[VerifierErrors]) -> VerifierErrors:
        out = cls()
        for p in parts:
            out.add(p)
        return out

    @property
    def rate(self) -> float:
        return self.count / self.scored if self.scored else 0.0

    def record(self) -> dict[str, Any]:
        """The fields of a metrics record."""
        return {"verifier_errors": self.count, "verifier_error_kinds": dict(sorted(self.by_kind.items()))}


#: Verifiers every training run has beside the package's defaults: the toy pool's, so the pool
#: ``bots data toy`` writes trains without a ``verifiers:`` entry (its verifier lives with the
#: trainer, not in :mod:`bots_rft.rewards`, since it scores only that pool). A config's entry wins.
TRAINING_VERIFIERS = TOY_VERIFIER


def register_config_verifiers(verifiers: dict[str, str]) -> None:
    """Register ``{prefix: "module:function"}`` from the config (in every rank's process), after
    :data:`TRAINING_VERIFIERS`."""
    for prefix, target in {**TRAINING_VERIFIERS, **verifiers}.items():
        module, _, name = target.partition(":")
        try:
            fn = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"verifiers.{prefix}: cannot import {target!r} ({exc})") from None
        register_verifier(prefix, fn)


def check_verifiers(pool: TaskPool, key: str) -> None:
    """Refuse a pool with a data source no registered verifier scores, naming ``key`` (the config
    key that chose the pool), before a run writes or loads anything: otherwise the first step's
    scoring would stop it, after the model was built and the output folder written."""
    counts = Counter(pool.data_sources().tolist())
    for source, count in sorted(counts.items()):
        try:
            get_verifier(source)
        except DataError:
            raise DataError(
                f"{key}: {pool.source}: {count} task(s) have data_source {source!r}, which no verifier scores; "
                "add a verifiers: entry to the config ({prefix: 'module:function'}), or register one with "
                "bots_rft.rewards.register_verifier"
            ) from None


def score_texts(
    scorer: RewardScorer,
    pool: TaskPool,
    rows: Sequence[int],
    texts: Sequence[str],
    n: int,
    errors: VerifierErrors | None = None,
) -> npt.NDArray[np.float64]:
    """``[len(rows), n]`` rewards of ``texts`` (task-major, n per row); verifier errors are
    added to ``errors`` when given."""
    rows = [int(r) for r in rows]
    sources = pool.data_sources(rows)
    truths = pool.ground_truths(rows)
    infos = pool.extra_infos(rows)
    items = [
        RewardItem(str(sources[i]), texts[i * n + j], truths[i], infos[i]) for i in range(len(rows)) for j in range(n)
    ]
    if not items:
        return np.zeros((0, n), dtype=np.float64)
    results = scorer.score_batch(items)
    if errors is not None:
        errors.scored += len(results)
        for item, res in zip(items, results):
            if res.error:
                errors.count += 1
                errors.by_kind[res.kind or "reported"] += 1
                if errors.first is None:
                    name = verifier_name(get_verifier(item.data_source))
                    errors.first = f"{name} for data_source {item.data_source!r}: {res.reason}"
    rewards = np.array([r.reward for r in results], dtype=np.float64)
    return rewards.reshape(len(rows), n)
