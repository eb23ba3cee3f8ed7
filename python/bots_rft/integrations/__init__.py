"""Drop-ins for the trainers people already use.

- :mod:`bots_rft.integrations.trl`: Hugging Face TRL's ``GRPOTrainer`` (``attach_bots``, a
  ``RepeatSampler``-layout sampler, a reward recorder);
- :mod:`bots_rft.integrations.trl_async`: TRL's experimental ``AsyncGRPOTrainer`` (one task at a
  time, tasks in flight excluded, the selector served to TRL's rollout process);
- :mod:`bots_rft.integrations.verl`: verl 0.9's V1 trainer (``python -m bots_rft.integrations.verl``:
  BOTS trainers registered by name, a replay buffer that feeds BOTS every finished group);
- :mod:`bots_rft.integrations.trinity`: a Trinity-RFT ``data_selector``
  (``selector_type: bots_rft.integrations.trinity.BOTSSelector``); it subclasses Trinity's
  ``BaseSelector``, so importing it needs trinity-rft (Trinity imports it, nothing else does);
- :mod:`bots_rft.integrations.skyrl`, :mod:`bots_rft.integrations.areal`: SkyRL-train's and
  AReaL's trainers (``with_bots(TrainerCls)``), fed before their dynamic-sampling filters;
- :mod:`bots_rft.integrations.ray`: moving selectors between processes (Ray actors,
  multiprocessing) with their arrays out of band;
- :mod:`~bots_rft.integrations.gates` (each adapter's tested releases and the framework methods it
  overrides, checked when it is used) and :mod:`~bots_rft.integrations.check`
  (``python -m bots_rft.integrations.check``: those checks on the installed frameworks, and the
  docs' version and method tables);
- shared pieces: :mod:`~bots_rft.integrations.tasks` (task ids <-> dataset rows, rewards ->
  successes, clipped loudly), :mod:`~bots_rft.integrations.batches` (a lazily choosing batch sampler with tasks in
  flight excluded, and a per-step evidence buffer), :mod:`~bots_rft.metrics.step`
  (the ``bots/*`` metrics every integration logs, under one set of names).

Nothing here is imported by ``import bots_rft``; each module imports its trainer when it is
imported, so the package never needs trl, verl, trinity-rft, SkyRL, AReaL or ray to be installed.
"""
