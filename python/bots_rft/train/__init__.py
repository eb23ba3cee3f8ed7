"""GRPO reinforcement finetuning fed by a task selector (BOTS or a baseline): ``bots train``.

- :mod:`.config`: :class:`TrainConfig` (a pydantic model, valid once built), YAML/TOML loading and
  ``key=value`` overrides, and the leaves' views of it (:class:`PolicyAdaptation`,
  :class:`SFTWarmup`, :class:`GRPOUpdate`);
- :mod:`.grpo`: advantages, log-probs, the clipped surrogate loss;
- :mod:`.rollout`: batched sampling of n completions per task (or of a plan's own count per task);
- :mod:`.trainer`: the loop as explicit stages (:class:`GRPOTrainer`: built, it has trained
  nothing; ``run()`` warms up and trains; :func:`train`), DAPO's dynamic-sampling fill loop
  included; :mod:`.optimise`: the GRPO update of one step; :mod:`.resume`: continuing a run from
  its latest checkpoint;
- :mod:`.run_selector`: the run's selector from the method table, and its checkpoints
  (``method=dynamic`` draws from :class:`bots_rft.selector.peers.dapo.EpochOrder`);
- :mod:`.refeval`: reference pass rates measured by sampling a model with the rollout engine
  (``bots refeval``);
- ``bots compare``: :mod:`.comparison` (its config's ``compare:`` section), :mod:`.compare_plan`
  (the comparison settled before any work), :mod:`.compare_reuse` (what ``--reuse`` checks),
  :mod:`.compare_warmup` (the pool, shared warm-up and references every run starts from),
  :mod:`.compare_run` (the runs, side by side with ``jobs``); its report is
  :mod:`bots_rft.report.compare_summary`'s;
- :mod:`.scoring`: verifier rewards; :mod:`.policy`: the policy; :mod:`.distributed`: torchrun;
- :mod:`.run_checkpoint`, :mod:`.pool_identity`, :mod:`.evaluate`, :mod:`.logger`, :mod:`.stops`,
  :mod:`.sft`, :mod:`.toy`.

torch and transformers are imported by the submodules (the ``train`` extra), not by ``bots_rft``.
"""

from __future__ import annotations

from .config import METHODS, TrainConfig, load_config, parse_overrides

__all__ = ["METHODS", "TrainConfig", "load_config", "parse_overrides", "train", "GRPOTrainer"]


def __getattr__(name: str) -> object:
    # Lazy: importing the config (CLI parsing) must not pay for torch.
    if name in ("train", "GRPOTrainer", "TrainResult"):
        from . import trainer

        return getattr(trainer, name)
    raise AttributeError(name)
