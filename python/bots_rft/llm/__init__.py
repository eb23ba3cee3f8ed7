"""Language models for rollouts: the part of bots-rft that needs torch and transformers (the
``train`` extra).

- :mod:`.models`: loading a causal LM and its tokenizer offline (``tiny``, SmolLM2 from GGUF, a
  local Hugging Face directory), the device and dtype, chat templates;
- :mod:`.refeval`: reference pass rates measured by sampling a model (``bots refeval``).

Both import torch inside the functions that use it, and nothing is imported here, so
``import bots_rft`` and the CLI's argument parsing stay free of torch.
"""
