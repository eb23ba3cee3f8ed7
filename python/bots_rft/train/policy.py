"""The policy: loading it through :func:`bots_rft.llm.models.load_model` (plus ``tiny-HxL``, a
random-weight byte-level model of a chosen width and depth), the device/precision context of
its forward passes, and per-token log-probs of completions."""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConfigError
from ..llm.models import byte_tokenizer, load_model, portable_init, resolve_device, resolve_dtype
from .grpo import token_logprobs

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["load_policy", "autocast", "unwrap", "sequence_logprobs", "position_ids"]

_TINY_SIZED = re.compile(r"^tiny-(\d+)x(\d+)$")


def load_policy(spec: str, device: str, dtype: str, seed: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` in train mode. Weights stay float32 unless ``dtype`` says otherwise:
    on CUDA bf16 autocast gives the speed while AdamW keeps full-precision master weights."""
    dev = resolve_device(None if device == "auto" else device)
    wdtype = "float32" if dtype == "auto" else dtype
    match = _TINY_SIZED.match(spec.lower())
    if match:
        model, tok = _tiny_sized(int(match.group(1)), int(match.group(2)), seed)
        model.to(device=dev, dtype=resolve_dtype(wdtype, dev))  # type: ignore[call-arg]
    else:
        model, tok = load_model(spec, device=dev, dtype=wdtype, seed=seed)
    model.train()
    return model, tok


def _tiny_sized(hidden: int, layers: int, seed: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if hidden % 32 or hidden < 32 or layers < 1:
        raise ConfigError(f"model: tiny-HxL needs H a multiple of 32 and L >= 1, got 'tiny-{hidden}x{layers}'")
    tok = byte_tokenizer()
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 32,
        num_key_value_heads=max(1, hidden // 64),
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    portable_init(model, seed)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def unwrap(model: Any) -> Any:
    """The Hugging Face model inside a DDP/FSDP wrapper (for ``generate``, ``save_pretrained``)."""
    return getattr(model, "module", model)


def autocast(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on CUDA; nothing on CPU (CPU bf16 is slower than fp32 on most hosts)."""
    if device.type == "cuda" and bf16:
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as ``generate`` computes them, so that training-time
    log-probs match the generation policy's."""
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.clamp(min=0)


def sequence_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_len: int,
    temperature: float,
) -> torch.Tensor:
    """``[S, T]`` log-probs of the completion tokens ``input_ids[:, prompt_len:]`` (prompts left
    padded to the common ``prompt_len``).

    Only the positions that predict a completion token go through the output head
    (``logits_to_keep``): the prompt's logits are never used, and with a large vocabulary they
    were most of the step's memory (128 sequences of 272 tokens at SmolLM2's 49,152 entries are
    6.8 GB of float32) and a share of its arithmetic. The kept logits are the same numbers."""
    completion = input_ids.shape[1] - prompt_len
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids(attention_mask),
        use_cache=False,
        logits_to_keep=completion + 1,
    )
    logits = out.logits[:, -(completion + 1) : -1, :]
    return token_logprobs(logits, input_ids[:, prompt_len:], temperature)


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    """Dropout off for generation and evaluation, restored afterwards."""
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


def frozen_copy(model: Any) -> Any:
    """A frozen copy of the policy in eval mode: the reference of the KL penalty."""
    return copy.deepcopy(model).eval().requires_grad_(False)


def build_policy(cfg: Any, device: torch.device, dist: Any) -> tuple[Any, Any, Any, torch.optim.Optimizer, Any]:
    """A training run's policy and what trains it, from its config: the model (seeded by the
    caller, adapted for LoRA or frozen layers, gradient checkpointing as configured) wrapped for
    data parallelism, its tokenizer, the frozen KL reference when ``kl_coef > 0`` (else None),
    AdamW over the trainable parameters and the learning-rate schedule (linear warm-up over
    ``warmup_steps``, then constant)."""
    from .lora import adapt_policy

    model, tok = load_policy(cfg.model, str(device), cfg.dtype, cfg.seed)
    model = adapt_policy(model, cfg.adaptation, sharded=dist.enabled and cfg.distributed == "fsdp")
    if cfg.gradient_checkpointing:
        import warnings

        with warnings.catch_warnings():  # transformers 5 renames it; the old name still works
            warnings.simplefilter("ignore", FutureWarning)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ref_model = frozen_copy(model) if cfg.kl_coef > 0 else None
    wrapped = dist.wrap(model, cfg.distributed, device)
    optimizer = torch.optim.AdamW(
        [p for p in wrapped.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay
    )
    warm = cfg.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
    return wrapped, tok, ref_model, optimizer, scheduler
