"""μ̃, the interpolation estimator's capability, far outside [0, 1] is said: one warning per run
(per selector), and ``bots/capability_out_of_range`` in the step's metrics from then on. TRL's
smoke run once trained with μ̃ = -2.55 and nothing said so: the references do not bracket the
policy there, and the implicit evidence extrapolates."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation
from bots_rft.metrics.step import CAPABILITY_MARGIN, capability_metrics


def _selector() -> BOTS:
    # References of 0.5 and 0.6 everywhere: a policy that solves nothing sits at μ̃ = -5.
    return BOTS(8, evidence=Interpolation(np.full(8, 0.5), np.full(8, 0.6)), n_rollouts=4)


def test_capability_inside_the_margin_adds_nothing(caplog: pytest.LogCaptureFixture) -> None:
    sel = _selector()
    assert capability_metrics(sel) == {}  # no estimate yet
    ids = sel.select(4)
    sel.update(ids, [2, 2, 2, 2], 4)  # successes 0.5 = the weak reference: μ̃ = 0
    assert abs(sel.capability) < CAPABILITY_MARGIN  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        assert capability_metrics(sel) == {"bots/capability": pytest.approx(sel.capability)}
    assert not caplog.records


def test_capability_far_outside_warns_once_and_is_a_metric_from_then_on(caplog: pytest.LogCaptureFixture) -> None:
    sel = _selector()
    with caplog.at_level(logging.WARNING, logger="bots_rft.metrics"):
        sel.update(sel.select(4), [0, 0, 0, 0], 4)
        first = capability_metrics(sel)
        sel.update(sel.select(4), [2, 2, 2, 2], 4)
        second = capability_metrics(sel)
    assert first["bots/capability"] < -1 - CAPABILITY_MARGIN
    assert first["bots/capability_out_of_range"] == 1.0
    assert second["bots/capability_out_of_range"] == 1.0 and second["bots/capability"] < -1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    text = warnings[0].getMessage()
    assert "bots/capability" in text and "-5" in text and "[0, 1]" in text
    # A step back inside the margin reads 0 (the key stays, so the logger's series is unbroken).
    for _ in range(40):
        sel.update(sel.select(4), [2, 2, 2, 2], 4)
    assert capability_metrics(sel)["bots/capability_out_of_range"] == 0.0
    # Another run (another selector) warns again.
    other = _selector()
    with caplog.at_level(logging.WARNING, logger="bots_rft.metrics"):
        other.update(other.select(4), [4, 4, 4, 4], 4)  # all solved: μ̃ = 5
        assert capability_metrics(other)["bots/capability_out_of_range"] == 1.0
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2
