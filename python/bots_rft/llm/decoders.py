"""Decoders: a causal LM's forward pass over a KV cache, behind one interface (:class:`Decoder`),
for the decode loops of :mod:`.generation` (the model itself) and :mod:`.speculative` (the model
and its bfloat16 draft).

- :class:`HFDecoder`: the Hugging Face module (or a copy of it in another dtype) with a KV cache
  written in place (:func:`~bots_rft.llm.kv_cache.reserved_cache`). Works for every model.
- :class:`LeanDecoder`, for Llama-style decoders (Llama, SmolLM2, Qwen2; LoRA adapters merged into
  the copy) on a CPU: the forward pass written out over copies of the weights, query/key/value fused into one matrix and gate/up into
  another, and each matrix packed once into the layout oneDNN's matrix kernels read (torch's
  plain ``linear`` re-lays the weight out at every call: at 16 rows that cost SmolLM2's float32
  layers a third of their time, its bfloat16 layers half). The same arithmetic as the Hugging Face
  module up to float32 rounding (the tests compare the two to 1e-4 in log-probabilities), for one
  more copy of the weights, made again whenever the model's weights change.

:func:`decoder_for` gives the one to use for a model and dtype, reused until the weights change.
"""

from __future__ import annotations

import copy
import functools
import weakref
from typing import Any, Protocol

import torch
import torch.nn.functional as F

from .kv_cache import PromptLayout, forward_logits, prefill, reserved_cache

__all__ = ["Decoder", "HFDecoder", "LeanDecoder", "decoder_for", "LEAN_MODEL_TYPES"]

#: Architectures whose decoder :class:`LeanDecoder` writes out: pre-norm RMSNorm blocks, rotary
#: attention with grouped key/value heads (query/key/value biases allowed), a SiLU-gated MLP.
LEAN_MODEL_TYPES = ("llama", "qwen2")


class Decoder(Protocol):
    """A decoder's life over one batch of prompts: ``start`` encodes them, ``n`` rows each, in the
    cache positions of their :class:`~bots_rft.llm.kv_cache.PromptLayout`, and returns the last
    prompt position's logits ``[rows, vocab]``; ``logits`` appends ``ids`` ``[rows, q]``
    at positions ``pos`` to every row's cache, attending to the cache positions ``attn``
    ``[rows, length + q]`` marks, and returns the last ``keep`` positions' logits ``[rows, keep,
    vocab]``; ``keep_rows`` keeps only the given rows. Logits are float32 (float64 for a float64
    model)."""

    def start(self, layout: PromptLayout, n: int, *, capacity: int) -> torch.Tensor: ...

    def logits(self, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, *, keep: int = 1) -> torch.Tensor: ...

    def keep_rows(self, keep: torch.Tensor) -> None: ...


class HFDecoder:
    """The Hugging Face module (``dtype`` None: ``model`` itself; else a copy in ``dtype``) with a
    reserved KV cache."""

    def __init__(self, model: Any, dtype: torch.dtype | None = None) -> None:
        if dtype is None or dtype == next(model.parameters()).dtype:
            self.model = model
        else:
            self.model = copy.deepcopy(model).to(dtype).eval()
            for p in self.model.parameters():
                p.requires_grad_(False)
        self.cache: Any = None

    def start(self, layout: PromptLayout, n: int, *, capacity: int) -> torch.Tensor:
        self.cache = reserved_cache(self.model, capacity)
        return prefill(self.model, layout, n, self.cache)

    def logits(self, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, *, keep: int = 1) -> torch.Tensor:
        return forward_logits(self.model, ids, attn, pos, self.cache, keep=keep)

    def keep_rows(self, keep: torch.Tensor) -> None:
        self.cache.batch_select_indices(keep)


@functools.cache
def _packing_works(dtype: torch.dtype) -> bool:
    """Whether this torch packs ``dtype`` weights for oneDNN's CPU kernels (x86 builds with
    oneDNN do), checked once on a small product against ``F.linear``. Its inputs come from a
    generator of its own: the check runs inside the first rollout or evaluation of a process, and
    a draw from torch's global generator there would shift that run's sampling (and a resumed
    run's, so resume would not be exact)."""
    try:
        gen = torch.Generator().manual_seed(0)
        w = torch.randn(8, 16, generator=gen).to(dtype)
        x = torch.randn(3, 16, generator=gen).to(dtype)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, 3)
        got = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return bool(torch.allclose(got.float(), F.linear(x, w).float(), atol=1e-2, rtol=1e-2))
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


class _Linear:
    """``x @ weight.T (+ bias)``, with the weight packed for oneDNN where that works."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, rows_hint: int) -> None:
        self.out_features = weight.shape[0]
        self.bias = bias
        self.packed: torch.Tensor | None = None
        self.weight: torch.Tensor | None = weight
        if weight.device.type == "cpu" and _packing_works(weight.dtype):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, rows_hint)
            self.weight = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)  # type: ignore[arg-type]
        flat = x.reshape(-1, x.shape[-1])
        out = torch.ops.mkldnn._linear_pointwise(flat, self.packed, self.bias, "none", [], "")
        return out.view(*x.shape[:-1], self.out_features)


def _causal_lm(model: Any) -> Any:
    """The Hugging Face causal LM itself, inside a peft wrapper if there is one."""
    if getattr(model, "peft_config", None) is not None:
        return model.base_model.model
    return model


def _base_linear(module: Any) -> torch.nn.Linear | None:
    """The ``nn.Linear`` under ``module``: itself, or a peft plain-LoRA layer's base layer. None for
    anything else (quantized layers, DoRA, LoRA biases), which :class:`LeanDecoder` cannot copy."""
    if type(module) is torch.nn.Linear:
        return module
    base = getattr(module, "base_layer", None)
    if type(base) is not torch.nn.Linear or not hasattr(module, "get_delta_weight"):
        return None
    for name in module.active_adapters:
        if getattr(module, "use_dora", {}).get(name) or getattr(module, "lora_bias", {}).get(name):
            return None
    return base


def _linear_parts(module: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(weight, bias)`` of the linear map ``module`` (one :func:`_base_linear` accepts) computes:
    a plain ``nn.Linear``'s own, or for a LoRA layer (unmerged or merged) its base weight plus
    each active adapter's ``scaling * B @ A``, the same map in eval mode."""
    base = _base_linear(module)
    assert base is not None, "checked by LeanDecoder.supports"
    weight = base.weight
    if base is not module and not module.merged and not module.disable_adapters:
        for name in module.active_adapters:
            if name in module.lora_A:
                weight = weight + module.get_delta_weight(name)
    return weight, base.bias


class LeanDecoder:
    """A Llama-style decoder's forward pass over packed copies of its weights in ``dtype`` (the
    model's own by default; bfloat16 for a draft). See the module."""

    @staticmethod
    def supports(model: Any) -> bool:
        lm = _causal_lm(model)
        cfg = getattr(lm, "config", None)
        try:
            layer = lm.model.layers[0]
            attn, mlp = layer.self_attn, layer.mlp
            linears = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj)
            plain = (
                getattr(cfg, "model_type", None) in LEAN_MODEL_TYPES
                and getattr(cfg, "hidden_act", None) == "silu"
                and not getattr(cfg, "mlp_bias", False)
                and getattr(cfg, "pretraining_tp", 1) == 1
                and not getattr(cfg, "use_sliding_window", False)
                and all(_base_linear(m) is not None for m in (*linears, lm.lm_head))
                and _base_linear(attn.o_proj).bias is None  # type: ignore[union-attr]
                and _base_linear(mlp.gate_proj).bias is None  # type: ignore[union-attr]
                and hasattr(lm.model, "rotary_emb")
            )
        except (AttributeError, IndexError, TypeError):
            return False
        return bool(plain)

    def __init__(self, model: Any, dtype: torch.dtype | None = None, *, rows_hint: int = 16) -> None:
        model = _causal_lm(model)
        cfg = model.config
        dt = self.dtype = dtype or next(model.parameters()).dtype
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        self.eps = float(cfg.rms_norm_eps)
        self.rotary = copy.deepcopy(model.model.rotary_emb)

        def w(t: torch.Tensor) -> torch.Tensor:
            return t.detach().to(dt).contiguous()

        def linear(*modules: Any) -> _Linear:
            """One linear map computing ``modules`` side by side (outputs concatenated)."""
            parts = [_linear_parts(m) for m in modules]
            weight = torch.cat([p[0] for p in parts])
            biases = [p[1] for p in parts]
            bias = None if biases[0] is None else torch.cat(biases)  # type: ignore[arg-type]
            return _Linear(w(weight), None if bias is None else w(bias), rows_hint)

        self.embed = w(model.model.embed_tokens.weight)
        self.final_norm = w(model.model.norm.weight)
        self.head = linear(model.lm_head)
        self.layers: list[dict[str, Any]] = []
        for layer in model.model.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append(
                {
                    "in_norm": w(layer.input_layernorm.weight),
                    "qkv": linear(a.q_proj, a.k_proj, a.v_proj),
                    "o": linear(a.o_proj),
                    "post_norm": w(layer.post_attention_layernorm.weight),
                    "gate_up": linear(m.gate_proj, m.up_proj),
                    "down": linear(m.down_proj),
                }
            )
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.length = 0

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def _reserve(self, rows: int, capacity: int, device: torch.device) -> None:
        shape = (rows, self.kv_heads, capacity, self.head_dim)
        self.keys = [torch.empty(shape, dtype=self.dtype, device=device) for _ in self.layers]
        self.values = [torch.empty(shape, dtype=self.dtype, device=device) for _ in self.layers]
        self.length = 0

    def _run(self, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, keep: int) -> torch.Tensor:
        rows, q = ids.shape
        start, end = self.length, self.length + q
        if end > self.keys[0].shape[2]:  # grow the buffers
            grown = max(end, 2 * self.keys[0].shape[2])
            for store in (self.keys, self.values):
                for i, old in enumerate(store):
                    new = old.new_empty((*old.shape[:2], grown, old.shape[3]))
                    new[:, :, :start] = old[:, :, :start]
                    store[i] = new
        h = F.embedding(ids, self.embed)
        cos, sin = self.rotary(h, pos)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        # Causal over cache positions, only the positions ``attn`` marks, and each query always
        # sees its own key (a padding query that saw nothing would turn its cache entry into NaN;
        # such a query's output is never used).
        kv = torch.arange(end, device=ids.device)
        here = torch.arange(start, end, device=ids.device).unsqueeze(1)
        mask = (attn.bool()[:, None, None, :] & (kv <= here)) | (kv == here)
        nq, nkv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for i, layer in enumerate(self.layers):
            qkv = layer["qkv"](self._norm(h, layer["in_norm"]))
            query = qkv[..., :nq].view(rows, q, self.heads, self.head_dim).transpose(1, 2)
            key = qkv[..., nq : nq + nkv].view(rows, q, self.kv_heads, self.head_dim).transpose(1, 2)
            value = qkv[..., nq + nkv :].view(rows, q, self.kv_heads, self.head_dim).transpose(1, 2)
            self.keys[i][:, :, start:end] = self._rope(key, cos, sin)
            self.values[i][:, :, start:end] = value
            out = F.scaled_dot_product_attention(
                self._rope(query, cos, sin),
                self.keys[i][:, :, :end],
                self.values[i][:, :, :end],
                attn_mask=mask,
                enable_gqa=self.heads != self.kv_heads,
            )
            h = h + layer["o"](out.transpose(1, 2).reshape(rows, q, nq))
            gate, up = layer["gate_up"](self._norm(h, layer["post_norm"])).chunk(2, dim=-1)
            h = h + layer["down"](F.silu(gate) * up)
        self.length = end
        logits = self.head(self._norm(h[:, -keep:], self.final_norm))
        return logits if logits.dtype == torch.float64 else logits.float()

    def start(self, layout: PromptLayout, n: int, *, capacity: int) -> torch.Tensor:
        device, tasks, shared = self.embed.device, layout.rest.shape[0], layout.shared
        self._reserve(1, max(capacity, layout.mask.shape[1]), device)
        if shared:  # the common prefix once, then a copy of its cache per prompt
            self._run(
                layout.prefix, torch.ones_like(layout.prefix), torch.arange(shared, device=device).unsqueeze(0), 1
            )
        self.keep_rows(torch.zeros(tasks, dtype=torch.long, device=device))
        logits = self._run(layout.rest, layout.mask, layout.rest_positions, 1)[:, -1]
        if n > 1:
            self.keep_rows(torch.arange(tasks, device=device).repeat_interleave(n))
            logits = logits.repeat_interleave(n, dim=0)
        return logits

    def logits(self, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, *, keep: int = 1) -> torch.Tensor:
        return self._run(ids, attn, pos, keep)

    def keep_rows(self, keep: torch.Tensor) -> None:
        self.keys = [k[keep] for k in self.keys]
        self.values = [v[keep] for v in self.values]


_CACHE: weakref.WeakKeyDictionary[Any, dict[Any, tuple[tuple[int, ...], Decoder]]] = weakref.WeakKeyDictionary()


def _weights_version(model: Any) -> tuple[int, ...]:
    """Changes whenever a weight is written in place (an optimizer step, a loaded state dict)."""
    try:
        return tuple(p._version for p in model.parameters())
    except RuntimeError:  # inference tensors keep no version counter: never reuse a copy of them
        return (-1,)


def decoder_for(model: Any, dtype: torch.dtype | None = None) -> Decoder:
    """The decoder for ``model`` (unwrapped, eval mode) computing in ``dtype`` (None: the model's
    own): a :class:`LeanDecoder` for the architectures it writes out, on a CPU, in float32 or
    bfloat16; else an :class:`HFDecoder`. A decoder that copies the weights is kept and reused
    until they change, so a training run pays one copy per optimizer step."""
    param = next(model.parameters())
    dt = dtype or param.dtype
    lean = param.device.type == "cpu" and dt in (torch.float32, torch.bfloat16) and LeanDecoder.supports(model)
    if not lean and dt == param.dtype:
        return HFDecoder(model)  # no copy: nothing to keep
    version = _weights_version(model)
    kept = _CACHE.setdefault(model, {})
    hit = kept.get(dt)
    if hit is not None and hit[0] == version and version != (-1,):
        return hit[1]
    kept.pop(dt, None)  # the stale copy goes before the new one is made: never two in memory
    decoder: Decoder = LeanDecoder(model, dt) if lean else HFDecoder(model, dt)
    kept[dt] = (version, decoder)
    return decoder
