"""Forwards to :mod:`bots_rft.llm.models`, where model loading now lives, until the trainer's
rollout and loop modules import that path; then this module is removed. Forwarding is lazy, so
importing this name does not import torch."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from .llm import models

    return getattr(models, name)
