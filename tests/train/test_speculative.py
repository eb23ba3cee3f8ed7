"""The speculative rollout engine (``rollout_engine: speculative``, :mod:`bots_rft.llm.speculative`
and :mod:`bots_rft.llm.decoders`): every token it returns is distributed as the model's own draw,
whatever the draft proposes; its greedy tokens are the model's (its log-probs are the loss's:
``tests/train/test_rollout_fast.py``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
stats = pytest.importorskip("scipy.stats")

from bots_rft.errors import ConfigError  # noqa: E402
from bots_rft.llm.decoders import HFDecoder, LeanDecoder, decoder_for  # noqa: E402
from bots_rft.llm.generation import next_token_probs, prompt_layout, sample_completions  # noqa: E402
from bots_rft.llm.models import encode_chats  # noqa: E402
from bots_rft.llm.speculative import accept_proposals, bf16_draft, sample_completions_speculative  # noqa: E402
from bots_rft.train.policy import load_policy  # noqa: E402
from bots_rft.train.rollout import completion_mask, generate_rollouts  # noqa: E402

CHATS = [
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": q}]
    for q in ("2+2?", "What is the capital of France, in one word?", "x", "Name three primes.")
]


def _tiny(seed: int, scale: float = 0.15) -> Any:
    """The tiny model with larger random weights (its initial ones give near-uniform logits)."""
    model, tok = load_policy("tiny", "cpu", "auto", 0)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * scale)
    model.eval()
    return model, tok


@pytest.fixture(scope="module")
def policy() -> Any:
    return _tiny(0)


@pytest.fixture(scope="module")
def poor_draft() -> Any:
    """A draft from other random weights: its proposals are mostly rejected, so the residual
    draws carry most of the sampling."""
    other, _ = _tiny(1)
    return LeanDecoder(other, torch.bfloat16)


@pytest.fixture(scope="module")
def peaked() -> Any:
    """Larger weights still: a few likely tokens per position, so that many rollouts share
    their first tokens and each prefix's next tokens can be tested."""
    return _tiny(0, scale=0.3)


def _unpadded(tok: Any, chats: Any) -> tuple[list[list[int]], dict[str, Any]]:
    enc = encode_chats(tok, chats)
    rows = [r[m.bool()].tolist() for r, m in zip(enc["input_ids"], enc["attention_mask"])]
    return rows, enc


def _chi2_pvalue(observed: dict[int, int], probs: np.ndarray) -> float:
    """Pearson's test of counts against probabilities, cells with expected count < 5 pooled."""
    total = sum(observed.values())
    expected = probs * total
    big = expected >= 5
    obs = np.array([observed.get(i, 0) for i in range(len(probs))], dtype=float)
    o = np.append(obs[big], obs[~big].sum())
    e = np.append(expected[big], expected[~big].sum())
    if e[-1] < 5:  # fold the small remainder into the largest cell
        j = int(np.argmax(e[:-1]))
        o[j] += o[-1]
        e[j] += e[-1]
        o, e = o[:-1], e[:-1]
    if len(o) < 2:  # one token holds all the mass: nothing to test beyond "only it was drawn"
        return 1.0 if o.sum() == total else 0.0
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)


@pytest.mark.parametrize("k", [1, 3])
def test_the_rejection_step_returns_the_models_distribution(k: int) -> None:
    """With fixed distributions per position, the first token out of the rejection step (the
    first proposal if kept, else the replacement) follows p at position 0, and so on: here for
    200,000 rows against p with a draft q far from it (including tokens q never proposes)."""
    gen = torch.Generator().manual_seed(0)
    vocab, rows = 7, 200_000
    p = torch.softmax(torch.randn(k + 1, vocab, generator=gen) * 1.5, dim=-1)
    q = torch.softmax(torch.randn(k, vocab, generator=gen) * 1.5, dim=-1)
    q[:, 0] = 0.0  # the draft never proposes token 0: only the residual can produce it
    q = q / q.sum(-1, keepdim=True)
    torch.manual_seed(1)
    proposals = torch.stack([torch.multinomial(q[j], rows, replacement=True) for j in range(k)], dim=1)
    P = p.unsqueeze(0).expand(rows, k + 1, vocab)
    Q = q.unsqueeze(0).expand(rows, k, vocab)
    accepted, new = accept_proposals(P, Q, proposals)
    assert int(accepted.min()) >= 0 and int(accepted.max()) <= k
    tokens = torch.cat([proposals, new.unsqueeze(1)], dim=1).scatter(1, accepted.unsqueeze(1), new.unsqueeze(1))
    for pos in range(k + 1):
        reached = accepted >= pos  # rows whose token at ``pos`` was emitted
        counts = Counter(tokens[reached, pos].tolist())
        assert _chi2_pvalue(counts, p[pos].double().numpy()) > 1e-4, pos


@pytest.mark.slow
@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.8)])
@pytest.mark.parametrize("which", ["poor", "own"])
def test_sampled_tokens_follow_the_model(
    peaked: Any, poor_draft: Any, which: str, temperature: float, top_p: float
) -> None:
    """20,000 rollouts of one prompt: at each of the first three positions, the tokens
    that follow each frequent prefix follow the model's own conditional probabilities (computed
    by a forward pass on that prefix), whether the draft is the model in bfloat16 (most
    proposals kept) or an unrelated model (most replaced)."""
    model, tok = peaked
    draft = poor_draft if which == "poor" else bf16_draft(model)
    prompts, _ = _unpadded(tok, CHATS[:1])
    torch.manual_seed(3)
    with torch.inference_mode():
        out = sample_completions_speculative(
            model,
            draft,
            prompts,
            20000,
            max_new_tokens=3,
            eos_ids=[],
            pad_id=tok.pad_token_id,
            temperature=temperature,
            top_p=top_p,
            lookahead=2,
        )
    assert out.shape == (20000, 3)
    tested = 0
    for pos in range(3):
        groups: dict[tuple[int, ...], Counter[int]] = {}
        for row in out.tolist():
            groups.setdefault(tuple(row[:pos]), Counter())[row[pos]] += 1
        for prefix, counts in sorted(groups.items(), key=lambda g: -sum(g[1].values()))[:3]:
            if sum(counts.values()) < 300:
                continue
            ids = torch.tensor([prompts[0] + list(prefix)])
            with torch.inference_mode():
                logits = model(input_ids=ids).logits[:, -1]
            probs = next_token_probs(logits, temperature=temperature, top_p=top_p)[0].double().numpy()
            assert all(probs[t] > 0 for t in counts), "a token outside the nucleus was sampled"
            assert _chi2_pvalue(counts, probs) > 1e-4, (pos, prefix)
            tested += 1
    print("tested", tested)
    assert tested >= 5


@pytest.mark.slow
@pytest.mark.parametrize("which", ["poor", "own"])
def test_greedy_tokens_are_the_models(policy: Any, poor_draft: Any, which: str) -> None:
    """Greedy decoding keeps a proposal only when it is the model's argmax: the same tokens as
    the plain decode loop, prompts of different lengths, finished rows leaving the batch."""
    model, tok = policy
    draft = poor_draft if which == "poor" else bf16_draft(model)
    prompts, _ = _unpadded(tok, CHATS)
    kw: dict[str, Any] = dict(max_new_tokens=14, pad_id=tok.pad_token_id, greedy=True)
    with torch.inference_mode():
        free = sample_completions(model, prompts, 1, eos_ids=[], **kw)
        # a stop token the rows first produce at different steps
        eos = [int(free[0, 3])]
        plain = sample_completions(model, prompts, 2, eos_ids=eos, **kw)
        for lookahead in (1, 3, 5):
            spec = sample_completions_speculative(model, draft, prompts, 2, eos_ids=eos, lookahead=lookahead, **kw)
            assert torch.equal(spec, plain), lookahead
    lengths = completion_mask(plain, eos).sum(1)
    assert int(lengths.min()) < int(lengths.max())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_lean_draft_computes_the_hugging_face_forward(policy: Any, dtype: str) -> None:
    """The written-out decoder gives the Hugging Face module's logits in the same precision
    through a prefill with a shared prefix, a row repeat, decode steps with a masked position, a
    row selection and a two-token step: to float32 rounding in float32, so it is the model's forward pass; within
    bfloat16's rounding in bfloat16, so a draft proposes what the model in bfloat16 would."""
    model, tok = policy
    prompts, _ = _unpadded(tok, CHATS[:3])
    assert LeanDecoder.supports(model)
    dt = getattr(torch, dtype)
    lean, hf = LeanDecoder(model, dt), HFDecoder(model, dt)
    with torch.inference_mode():
        layout = prompt_layout(prompts, pad_id=tok.pad_token_id, device=torch.device("cpu"))
        assert layout.mask.sum(1).tolist() == [len(p) for p in prompts]
        starts = [d.start(layout, 2, capacity=4) for d in (lean, hf)]  # too small: must grow
        mask = layout.mask.repeat_interleave(2, 0)
        assert mask.shape[1] == lean.length == hf.cache.get_seq_length()
        attn = torch.cat([mask, torch.ones((6, 1), dtype=torch.long)], 1)
        pos = torch.tensor([[len(p)] for p in prompts for _ in range(2)])
        step = torch.tensor([[5], [6], [7], [8], [9], [10]])
        outs = []
        for d in (lean, hf):
            a, s, ps = attn.clone(), step.clone(), pos.clone()
            logits = [d.logits(s, a, ps)[:, -1]]
            a = torch.cat([a, torch.ones((6, 1), dtype=torch.long)], 1)
            a[1, -1] = 0  # row 1's token is masked out, as a rejected proposal is
            logits.append(d.logits(s + 1, a, ps + 1, keep=1)[[0, 2, 3, 4, 5], -1])  # row 1's output is never used
            d.keep_rows(torch.tensor([0, 1, 4]))
            a = torch.cat([a[[0, 1, 4]], torch.ones((3, 1), dtype=torch.long)], 1)
            logits.append(
                d.logits(torch.tensor([[3], [4], [5]]), a, torch.tensor([[2], [1], [2]]) + pos[[0, 1, 4]])[:, -1]
            )
            a = torch.cat([a, torch.ones((3, 2), dtype=torch.long)], 1)  # two tokens at once, both positions' logits
            two = d.logits(
                torch.tensor([[7, 8], [9, 10], [11, 12]]),
                a,
                torch.tensor([[3, 4], [2, 3], [3, 4]]) + pos[[0, 1, 4]],
                keep=2,
            )
            logits += [two[:, 0], two[:, 1]]
            outs.append(logits)
    outs[0].append(starts[0])
    outs[1].append(starts[1])
    for a, b in zip(*outs):
        assert a.dtype == b.dtype == torch.float32
        gap = float((a.log_softmax(-1) - b.log_softmax(-1)).abs().max())
        assert gap < (1e-4 if dtype == "float32" else 0.1), gap
        if dtype == "float32":
            assert torch.equal(a.argmax(-1), b.argmax(-1))


@pytest.mark.slow
def test_the_lean_decoder_merges_lora_adapters() -> None:
    """A peft LoRA policy (adapters non-zero) decodes through the written-out forward pass with
    each adapter's ``scaling * B @ A`` merged into the copy: the peft module's logits to float32
    rounding, and the same greedy rollouts as transformers' generate on the peft module."""
    peft = pytest.importorskip("peft")
    model, tok = _tiny(3)
    policy = peft.get_peft_model(
        model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    policy.eval()
    assert LeanDecoder.supports(policy) and isinstance(decoder_for(policy), LeanDecoder)
    prompts, _ = _unpadded(tok, CHATS[:2])
    with torch.inference_mode():
        layout = prompt_layout(prompts, pad_id=tok.pad_token_id, device=torch.device("cpu"))
        lean = LeanDecoder(policy).start(layout, 2, capacity=8)
        hf = HFDecoder(policy).start(layout, 2, capacity=8)
    assert float((lean.log_softmax(-1) - hf.log_softmax(-1)).abs().max()) < 1e-4
    with policy.disable_adapter(), torch.inference_mode():  # the adapters do change the function
        plain = HFDecoder(policy).start(layout, 2, capacity=8)
    assert float((plain - hf).abs().max()) > 1e-3
    runs = [
        generate_rollouts(policy, tok, CHATS, [0, 1, 2, 3], 2, max_new_tokens=10, greedy=True, engine=e)
        for e in ("fast", "hf")
    ]
    assert torch.equal(runs[0].input_ids, runs[1].input_ids)


@pytest.mark.slow
def test_generate_rollouts_with_the_speculative_engine(policy: Any) -> None:
    """The engine behind ``rollout_engine: speculative``: reproducible for a seed, the rollout
    layout of the fast engine (same prompts and masks, completions up to EOS)."""
    model, tok = policy
    runs = []
    for engine in ("speculative", "speculative", "fast"):
        torch.manual_seed(7)
        runs.append(generate_rollouts(model, tok, CHATS, [0, 1, 2, 3], 3, max_new_tokens=8, engine=engine))
    spec, again, fast = runs
    assert torch.equal(spec.input_ids, again.input_ids)
    assert spec.prompt_len == fast.prompt_len
    assert torch.equal(spec.input_ids[:, : spec.prompt_len], fast.input_ids[:, : fast.prompt_len])
    assert torch.equal(spec.attention_mask[:, : spec.prompt_len], fast.attention_mask[:, : fast.prompt_len])
    assert len(spec.texts) == 12
    greedy = [
        generate_rollouts(model, tok, CHATS, [0, 1, 2, 3], 2, max_new_tokens=10, greedy=True, engine=e)
        for e in ("speculative", "hf")
    ]
    assert torch.equal(greedy[0].input_ids, greedy[1].input_ids)


def test_copies_of_the_weights_are_rebuilt_only_when_the_weights_change() -> None:
    model, _ = _tiny(2)
    for dtype in (torch.bfloat16, None):  # the draft, and the model's own packed decoder
        first = decoder_for(model, dtype)
        assert isinstance(first, LeanDecoder)
        assert decoder_for(model, dtype) is first
        with torch.no_grad():
            next(model.parameters()).add_(0.01)  # what an optimizer step does
        assert decoder_for(model, dtype) is not first
    assert isinstance(decoder_for(model.double()), HFDecoder)  # float64: the module itself, no copy


def test_speculative_cannot_sample_with_a_twin(policy: Any) -> None:
    model, tok = policy
    with pytest.raises(ConfigError, match="speculative.*int8"):
        generate_rollouts(model, tok, CHATS, [0], 2, max_new_tokens=4, engine="speculative", sampler=model)


def test_speculative_with_int8_rollouts_or_fsdp_is_a_config_error() -> None:
    from bots_rft.train.config import TrainConfig

    with pytest.raises(ConfigError, match="rollout_engine: 'speculative'.*int8.*got 'speculative'"):
        TrainConfig(model="tiny", pool="p.parquet", lora_r=4, rollout_precision="int8", rollout_engine="speculative")
    with pytest.raises(ConfigError, match="rollout_engine: 'speculative'.*fsdp, got 'speculative'"):
        TrainConfig(model="tiny", pool="p.parquet", distributed="fsdp", rollout_engine="speculative")


def test_sampling_without_a_copy_of_the_weights_is_the_same(policy: Any) -> None:
    """``copy_weights=False`` (FSDP, whose gathered weights exist only for the call) decodes with
    the Hugging Face module itself: the same greedy tokens as the packed copy."""
    model, tok = policy
    prompts, _ = _unpadded(tok, CHATS)
    kw: dict[str, Any] = dict(max_new_tokens=12, eos_ids=[], pad_id=tok.pad_token_id, greedy=True)
    with torch.inference_mode():
        packed = sample_completions(model, prompts, 2, **kw)
        module = sample_completions(model, prompts, 2, copy_weights=False, **kw)
    assert torch.equal(packed, module)


def test_bad_arguments_are_refused(policy: Any, poor_draft: Any) -> None:
    model, _ = policy
    with pytest.raises(ValueError, match="lookahead=0"):
        sample_completions_speculative(
            model, poor_draft, [[1, 2]], 1, max_new_tokens=4, eos_ids=[], pad_id=0, lookahead=0
        )
    with pytest.raises(ValueError, match="prompt lengths"):
        sample_completions_speculative(model, poor_draft, [[1, 2], []], 2, max_new_tokens=4, eos_ids=[], pad_id=0)


def test_the_cli_offers_every_refeval_engine() -> None:
    import argparse

    from bots_rft.commands import refeval as command
    from bots_rft.train.refeval import REFEVAL_ENGINES

    sub = argparse.ArgumentParser().add_subparsers()
    command.add_parser(sub)
    action = next(a for p in sub.choices.values() for a in p._actions if "--engine" in a.option_strings)
    assert tuple(action.choices) == REFEVAL_ENGINES
    assert action.default == "fast"
