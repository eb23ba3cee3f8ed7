"""Drop-ins for the trainers people already use.

- :mod:`bots_rft.integrations.trl`: Hugging Face TRL's ``GRPOTrainer`` (``attach_bots``, a
  ``RepeatSampler``-layout sampler, a reward recorder);
- :mod:`bots_rft.integrations.verl`: verl's curriculum-sampler hook (verl <= 0.7) and the
  trainer-subclass recipe for verl >= 0.8;
- :mod:`bots_rft.integrations.trinity`: a Trinity-RFT ``data_selector``
  (``selector_type: bots_rft.integrations.trinity.BOTSSelector``); it subclasses Trinity's
  ``BaseSelector``, so importing it needs trinity-rft (Trinity imports it, nothing else does);
- :mod:`bots_rft.integrations.ray`: moving selectors between processes (Ray actors,
  multiprocessing) with their arrays out of band;
- :mod:`bots_rft.integrations.tasks`: task ids <-> dataset rows, rewards -> successes (shared).

Nothing here is imported by ``import bots_rft``; each module imports its trainer lazily, so the
package never needs trl, verl or ray to be installed.
"""
