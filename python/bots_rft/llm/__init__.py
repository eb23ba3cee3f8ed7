"""Language models for rollouts: the part of bots-rft that needs torch and transformers (the
``train`` extra).

- :mod:`.models`: loading a causal LM and its tokenizer offline (``tiny``, SmolLM2 from GGUF, a
  local Hugging Face directory), the device and dtype, chat templates;
- :mod:`.generation`: the fast exact rollout engine (each prompt encoded once, its KV cache shared
  by its samples).

Both import torch inside the functions that use it, and nothing is imported here, so
``import bots_rft`` and the CLI's argument parsing stay free of torch.
"""
