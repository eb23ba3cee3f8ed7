"""Parameter-efficient training: LoRA adapters through ``peft`` (``lora_r > 0``), and/or training
only the top ``train_top_layers`` decoder layers. Either way the optimizer sees only the trainable
parameters and a checkpoint stores only them (:mod:`.run_checkpoint`): the adapter, in peft's own
safetensors format, or the trained layers' weights. The frozen weights are the base model's,
which a resumed run loads again from the same ``model`` spec."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConfigError

if TYPE_CHECKING:
    from .config import PolicyAdaptation

__all__ = ["adapt_policy", "is_adapter_model", "is_partly_frozen", "decoder_layers", "lora_target_names"]

#: ``lora_target_modules`` value meaning every linear layer but the output head.
ALL_LINEAR = "all-linear"


def is_adapter_model(model: Any) -> bool:
    """Whether ``model`` (or the module inside a DDP wrapper) is a peft model."""
    try:
        from peft import PeftModel
    except ImportError:  # without peft there are no peft models (and no LoRA runs)
        return False

    return isinstance(getattr(model, "module", model), PeftModel)


def is_partly_frozen(model: Any) -> bool:
    """Whether some of the parameters are frozen (LoRA, or only the top layers trained)."""
    net = getattr(model, "module", model)
    return any(not p.requires_grad for p in net.parameters())


def decoder_layers(model: Any) -> torch.nn.ModuleList:
    """The model's stack of decoder layers (``model.layers`` of Llama/Qwen2-style models,
    ``transformer.h`` of GPT-2-style ones)."""
    for path in ("model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers"):
        node: Any = model
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                break
        if isinstance(node, torch.nn.ModuleList):
            return node
    raise ConfigError(
        f"train_top_layers: cannot find the decoder layers of a {type(model).__name__} "
        "(looked for model.layers, transformer.h, gpt_neox.layers, model.decoder.layers)"
    )


def lora_target_names(model: Any, spec: str) -> list[str]:
    """The module names LoRA wraps: those listed in ``spec`` (comma-separated), or with
    ``all-linear`` every linear layer's name but the output head's; each must name a linear layer."""
    head = model.get_output_embeddings()
    linear = {
        name.rsplit(".", 1)[-1]
        for name, mod in model.named_modules()
        if isinstance(mod, torch.nn.Linear) and mod is not head
    }
    if spec.strip() == ALL_LINEAR:
        return sorted(linear)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in names if s not in linear]
    if not names or unknown:
        raise ConfigError(
            f"lora_target_modules: {unknown or spec!r} are not linear layers of this model; "
            f"expected '{ALL_LINEAR}' or a comma-separated subset of {sorted(linear)}, got {spec!r}"
        )
    return names


def _freeze_below(model: Any, k: int) -> None:
    """Train only the top ``k`` decoder layers and the final norm (the embeddings, tied to the
    output head in small models, stay frozen)."""
    layers = decoder_layers(model)
    if k > len(layers):
        raise ConfigError(f"train_top_layers: the model has {len(layers)} decoder layers, got {k}")
    model.requires_grad_(False)
    for layer in layers[len(layers) - k :]:
        layer.requires_grad_(True)
    norm = getattr(getattr(model, "model", None), "norm", None)
    if isinstance(norm, torch.nn.Module):
        norm.requires_grad_(True)


def adapt_policy(model: Any, cfg: PolicyAdaptation, *, sharded: bool = False) -> Any:
    """``model`` set up for the parameter-efficient training ``cfg`` describes: wrapped in LoRA
    adapters when ``lora_r > 0`` (only on the top ``train_top_layers`` layers when that is set),
    else with everything below the top ``train_top_layers`` layers frozen; unchanged otherwise.
    ``sharded``: the run wraps the model in FSDP, which this does not support (use DDP)."""
    k = cfg.train_top_layers
    if sharded and (cfg.lora_r or k is not None):
        key = "lora_r" if cfg.lora_r else "train_top_layers"
        raise ConfigError(f"{key}: parameter-efficient training runs under distributed=ddp, not fsdp")
    if cfg.lora_r == 0:
        if k is not None:
            _freeze_below(model, k)
        return model
    from peft import LoraConfig, get_peft_model

    targets = lora_target_names(model, cfg.lora_target_modules)
    layers_to_transform = None
    if k is not None:
        total = len(decoder_layers(model))
        if k > total:
            raise ConfigError(f"train_top_layers: the model has {total} decoder layers, got {k}")
        layers_to_transform = list(range(total - k, total))
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets,
        layers_to_transform=layers_to_transform,
        bias="none",
        task_type="CAUSAL_LM",
    )
    was_training = model.training
    # peft's adapter initialisation (LoRA A: Kaiming uniform) draws from torch's global RNG:
    # seeded by the trainer before loading the model, so a resumed run re-creates the same
    # (then overwritten) adapter and leaves the RNG where an uninterrupted run left it.
    with warnings.catch_warnings():  # peft asks transformers 5 for a renamed attribute
        warnings.simplefilter("ignore", FutureWarning)
        peft_model = get_peft_model(model, lora)
    peft_model.train(was_training)
    return peft_model
