"""Rewards outside [0, 1] never reach the posterior silently: every integration clips them into
[0, 1], warns once naming the integration and the value, and counts them in
``bots/clipped_rewards`` (Trinity's ``reward_range`` mapping is tested with its selector)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from bots_rft import BOTS
from bots_rft.errors import InvalidArgumentError
from bots_rft.integrations.batches import EvidenceBuffer
from bots_rft.integrations.tasks import RewardClip
from logged import warnings_of


@pytest.fixture
def warnings_logged() -> Iterator[list[str]]:
    from bots_rft.integrations import tasks

    with warnings_of(tasks.logger) as messages:
        yield messages


def test_clipped_rewards_are_counted_and_warned_about_once(warnings_logged: list[str]) -> None:
    clip = RewardClip(None, "the test's integration")
    assert clip.metrics() == {}
    out = clip([0.0, 1.5, 0.25, float("nan"), -0.1, 1.0])
    assert np.array_equal(out[[0, 1, 2, 4, 5]], [0.0, 1.0, 0.25, 0.0, 1.0])
    assert np.isnan(out[3])  # not a trial, not a clipped reward
    assert clip.clipped == 2
    clip([3.0])
    assert clip.metrics() == {"bots/clipped_rewards": 3.0}
    assert len(warnings_logged) == 1
    assert "the test's integration: reward 1.5 is outside [0, 1]" in warnings_logged[0]
    assert "success_threshold" in warnings_logged[0]


def test_a_threshold_clips_nothing(warnings_logged: list[str]) -> None:
    clip = RewardClip(0.5, "x")
    assert np.array_equal(clip([1.5, -3.0, 0.5, 0.6]), [1.0, 0.0, 0.0, 1.0])
    assert clip.clipped == 0 and clip.metrics() == {} and warnings_logged == []
    with pytest.raises(InvalidArgumentError, match="threshold"):
        RewardClip(float("inf"), "x")


def test_evidence_buffer_feeds_clipped_successes_and_reports_the_count(warnings_logged: list[str]) -> None:
    """SkyRL's and AReaL's path: a reward of 1.5 counts as one success, never as 1.5."""
    clipped, reference = BOTS(4, n_rollouts=2, seed=0), BOTS(4, n_rollouts=2, seed=0)
    buffer = EvidenceBuffer(clipped, where="skyrl-like")
    buffer.record([0, 0, 1, 1], [1.5, 1.0, -0.5, 0.5])
    metrics = buffer.flush()
    reference.update([0, 0, 1, 1], [1.0, 1.0, 0.0, 0.5], 1.0)
    assert np.array_equal(clipped.alpha, reference.alpha) and np.array_equal(clipped.beta, reference.beta)
    assert metrics["bots/clipped_rewards"] == 2.0
    assert warnings_logged and warnings_logged[0].startswith("skyrl-like: reward 1.5")


def test_verl_sampler_clips_rm_scores_loudly(warnings_logged: list[str]) -> None:
    pytest.importorskip("verl.trainer.ppo.v1.replay_buffer", reason="verl 0.9 is not installed")
    from bots_rft.integrations.verl import BOTSPromptSampler

    sampler = BOTSPromptSampler(BOTS(4, n_rollouts=2, seed=0), [0, 1, 2, 3], chunk_size=2)
    reference = BOTS(4, n_rollouts=2, seed=0)
    sampler.observe("u0", 0, [1.5, 1.0], kept=True)
    sampler.observe("u1", 1, [0.0, 0.5], kept=True)
    metrics = sampler.fold()
    reference.update([0, 1], [2.0, 0.5], [2.0, 2.0])
    assert np.array_equal(sampler.selector.alpha, reference.alpha)
    assert metrics["bots/clipped_rewards"] == 1.0
    assert "bots_rft.integrations.verl" in warnings_logged[0]


def test_the_warning_survives_a_framework_logging_set_up(warnings_logged: list[str]) -> None:
    """logging.config.dictConfig (as frameworks call it on import) disables every logger that
    exists by default, ours included; the clipping warning must still come out."""
    import logging.config

    logging.getLogger("bots_rft.integrations")  # exists before the framework's set-up
    logging.config.dictConfig({"version": 1})
    assert logging.getLogger("bots_rft.integrations").disabled
    RewardClip(None, "after dictConfig")([2.0])
    assert warnings_logged and warnings_logged[0].startswith("after dictConfig: reward 2.0")
