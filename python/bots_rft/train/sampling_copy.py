"""An int8 twin of a partly frozen policy that only samples rollouts (``rollout_precision: int8``).

On a CPU with int8 dot-product instructions (AVX-512 VNNI, AVX2) torch's dynamic quantization runs
a linear layer two to five times faster than float32 at rollout batch sizes (weights int8 per
tensor, activations quantized per call); the output head, a quarter of a small model's decode
step, gains the most. Quantizing takes seconds, so only weights that never change are quantized,
once: the twin holds int8 copies of the policy's *frozen* linear layers (LoRA's base layers, the
layers below ``train_top_layers``, the output head) and shares every *trainable* parameter with
the policy itself (the same tensors), so each optimizer step reaches it with no copy.

The loss never sees the twin: the GRPO log-probs, old and new, come from the float32 torch policy,
as with ``rollout_precision: fp32``. What changes is that rollouts are drawn from a policy one
int8 rounding of the frozen weights away from the one trained (as when a trainer samples with
vLLM in bf16), and the clipped ratio does not correct for that.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch

from ..errors import ConfigError
from .policy import unwrap

__all__ = ["int8_twin"]


def int8_twin(model: Any) -> Any:
    """An eval-mode copy of ``model`` (unwrapped from DDP) whose frozen linear layers are int8
    (dynamic quantization) and whose trainable parameters are the policy's own tensors."""
    net = unwrap(model)
    device = next(net.parameters()).device
    if device.type != "cpu":
        raise ConfigError(f"rollout_precision: 'int8' samples on CPU only, but the policy is on {device}")
    trainable = [p for p in net.parameters() if p.requires_grad]
    if len(trainable) == sum(1 for _ in net.parameters()):
        raise ConfigError(
            "rollout_precision: 'int8' quantizes the frozen weights once, but every weight trains; "
            "set lora_r or train_top_layers"
        )
    memo: dict[int, Any] = {id(p): p for p in trainable}  # deepcopy keeps these: shared, not copied
    twin = copy.deepcopy(net, memo)
    frozen_linear = {
        name
        for name, mod in twin.named_modules()
        if type(mod) is torch.nn.Linear and not mod.weight.requires_grad and name
    }
    with warnings.catch_warnings():  # torch.ao's eager quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

        spec: dict[Any, Any] = {name: default_dynamic_qconfig for name in frozen_linear}
        twin = quantize_dynamic(twin, spec, dtype=torch.qint8, inplace=True)
    twin.eval()
    return twin
