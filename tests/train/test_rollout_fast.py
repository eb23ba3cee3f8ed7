"""The fast rollout engine (``rollout_engine: fast``, :mod:`bots_rft.llm.generation`) against
Hugging Face ``generate``: the same greedy tokens and rollout layout, the same sampling
distribution, and log-probs that the loss's forward pass reproduces exactly."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft.errors import ConfigError  # noqa: E402
from bots_rft.llm.generation import next_token_probs, sample_completions, shared_prefix_len  # noqa: E402
from bots_rft.llm.models import encode_chats  # noqa: E402
from bots_rft.train.policy import load_policy, sequence_logprobs  # noqa: E402
from bots_rft.train.rollout import completion_mask, generate_rollouts  # noqa: E402

# Prompts of different lengths sharing a system prompt (the shared prefix the engine runs once).
CHATS = [
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": q}]
    for q in ("2+2?", "What is the capital of France, in one word?", "x", "Name three primes.")
]


@pytest.fixture(scope="module")
def policy() -> Any:
    """The tiny model with larger random weights: its initial ones make near-uniform logits
    whose greedy continuation is one token repeated, which would hide ordering mistakes."""
    model, tok = load_policy("tiny", "cpu", "auto", 0)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.15)
    model.eval()
    return model, tok


def _unpadded(tok: Any, chats: Any) -> tuple[list[list[int]], dict[str, Any]]:
    enc = encode_chats(tok, chats)
    rows = [r[m.bool()].tolist() for r, m in zip(enc["input_ids"], enc["attention_mask"])]
    return rows, enc


def test_shared_prefix_len() -> None:
    assert shared_prefix_len([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert shared_prefix_len([[5, 1], [6, 1]]) == 0
    assert shared_prefix_len([[1, 2, 3]]) == 3
    assert shared_prefix_len([]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [64, 5])  # all tasks at once; two tasks per call (5 // 2)
def test_greedy_rollouts_equal_generate(policy: Any, batch_size: int) -> None:
    model, tok = policy
    kw: dict[str, Any] = dict(max_new_tokens=16, greedy=True, batch_size=batch_size)
    hf = generate_rollouts(model, tok, CHATS, [0, 1, 2, 3], 2, engine="hf", **kw)
    fast = generate_rollouts(model, tok, CHATS, [0, 1, 2, 3], 2, engine="fast", **kw)
    assert fast.prompt_len == hf.prompt_len
    assert torch.equal(fast.input_ids, hf.input_ids)
    assert torch.equal(fast.attention_mask, hf.attention_mask)
    assert torch.equal(fast.completion_mask, hf.completion_mask)
    assert fast.texts == hf.texts


def test_dropping_finished_rows_leaves_greedy_tokens_unchanged(policy: Any) -> None:
    model, tok = policy
    prompts, _ = _unpadded(tok, CHATS)
    kw: dict[str, Any] = dict(max_new_tokens=12, pad_id=tok.pad_token_id, greedy=True)
    free = sample_completions(model, prompts, 1, eos_ids=[], **kw)

    # A stop token the rows first produce at different steps, so that they finish apart.
    def first_steps(t: int) -> set[int]:
        return {int((row == t).nonzero()[0]) if bool((row == t).any()) else -1 for row in free}

    eos = [max(set(free.flatten().tolist()), key=lambda t: len(first_steps(t)))]
    every_step = sample_completions(model, prompts, 1, eos_ids=eos, compact_fraction=0.0, **kw)
    never = sample_completions(model, prompts, 1, eos_ids=eos, compact_fraction=2.0, **kw)
    assert torch.equal(every_step, never)
    lengths = completion_mask(every_step, eos).sum(1)
    assert int(lengths.min()) < int(lengths.max())  # some rows did finish early


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["fast", "speculative"])
def test_decode_logprobs_are_the_training_forwards(policy: Any, engine: str) -> None:
    """The decode loop's log-prob of every sampled token (shared prefix, repeated KV cache,
    finished rows dropped every step) equals what the loss computes on the rollout layout; with
    the speculative engine too, for kept proposals and replacements alike (its draft here is an
    unrelated model, so most proposals are replaced)."""
    from bots_rft.llm.decoders import LeanDecoder
    from bots_rft.llm.speculative import sample_completions_speculative

    model, tok = policy
    prompts, enc = _unpadded(tok, CHATS)
    n, temperature = 5, 0.7
    kw: dict[str, Any] = dict(
        max_new_tokens=20,
        eos_ids=[tok.eos_token_id],
        pad_id=tok.pad_token_id,
        temperature=temperature,
        compact_fraction=0.0,
        return_logprobs=True,
    )
    torch.manual_seed(1)
    with torch.inference_mode():
        if engine == "fast":
            tokens, logp = sample_completions(model, prompts, n, **kw)
        else:
            other, _ = load_policy("tiny", "cpu", "auto", 1)
            with torch.no_grad():
                for p in other.parameters():
                    if p.ndim == 2:
                        p.normal_(0.0, 0.15)
            draft = LeanDecoder(other.eval(), torch.bfloat16)
            tokens, logp = sample_completions_speculative(model, draft, prompts, n, **kw)
    cmask = completion_mask(tokens, [tok.eos_token_id])
    ids = torch.cat([enc["input_ids"].repeat_interleave(n, 0), tokens], 1)
    attn = torch.cat([enc["attention_mask"].repeat_interleave(n, 0), cmask], 1)
    with torch.no_grad():
        ref = sequence_logprobs(model, ids, attn, enc["input_ids"].shape[1], temperature)
    assert torch.allclose(ref * cmask, logp, atol=1e-5)
    assert torch.all(logp[cmask.bool()] < 0)


def test_sampling_is_reproducible(policy: Any) -> None:
    model, tok = policy
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append(generate_rollouts(model, tok, CHATS, [0, 1, 2, 3], 3, max_new_tokens=8, engine="fast"))
    assert torch.equal(runs[0].input_ids, runs[1].input_ids)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.6), (1.0, 0.05)])
def test_next_token_probs_are_generates(temperature: float, top_p: float) -> None:
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(3)) * 3
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    expected = torch.softmax(scores, dim=-1)
    got = next_token_probs(logits, temperature=temperature, top_p=top_p)
    assert torch.allclose(got, expected, atol=1e-6)


def test_first_tokens_follow_the_policy(policy: Any) -> None:
    """Many rollouts of one prompt: the first tokens' frequencies match the policy's
    probabilities at that position (4000 draws: a standard error below 0.008)."""
    model, tok = policy
    prompts, enc = _unpadded(tok, CHATS[:1])
    draws = 4000
    torch.manual_seed(0)
    with torch.inference_mode():
        first = sample_completions(model, prompts, draws, max_new_tokens=1, eos_ids=[], pad_id=tok.pad_token_id)[:, 0]
        probs = torch.softmax(model(**enc).logits[0, -1].float(), dim=-1)
    freq = torch.bincount(first, minlength=probs.numel()).float() / draws
    assert float((freq - probs).abs().max()) < 0.035


def test_bad_engine_is_a_config_error(policy: Any) -> None:
    model, tok = policy
    with pytest.raises(ConfigError, match="rollout_engine.*'vllm'"):
        generate_rollouts(model, tok, CHATS, [0, 1, 2, 3], 2, max_new_tokens=4, engine="vllm")


def test_bad_arguments_are_refused(policy: Any) -> None:
    model, tok = policy
    with pytest.raises(ValueError, match="n=0"):
        sample_completions(model, [[1, 2]], 0, max_new_tokens=4, eos_ids=[], pad_id=0)
    with pytest.raises(ValueError, match="prompt lengths"):
        sample_completions(model, [[1, 2], []], 2, max_new_tokens=4, eos_ids=[], pad_id=0)


def test_reserved_cache_grows_and_matches_the_dynamic_cache(policy: Any) -> None:
    """The in-place KV cache, reserved too small so that it must grow, gives the logits of
    transformers' DynamicCache through a prefill, a batch repeat, a row selection and decode steps."""
    from transformers import DynamicCache

    from bots_rft.llm.kv_cache import reserved_cache

    model, _ = policy
    ids = torch.randint(0, 200, (2, 7), generator=torch.Generator().manual_seed(0))
    logits = []
    for cache in (DynamicCache(config=model.config), reserved_cache(model, capacity=3)):
        with torch.inference_mode():
            out = [model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1]]
            cache.batch_repeat_interleave(2)
            cache.batch_select_indices(torch.tensor([0, 3, 1]))
            step = torch.tensor([[5], [6], [7]])
            for _ in range(3):
                out.append(model(input_ids=step, past_key_values=cache, use_cache=True).logits[:, -1])
                step = out[-1].argmax(-1, keepdim=True)
        assert cache.get_seq_length() == 10
        logits.append(out)
    for a, b in zip(*logits):
        assert torch.allclose(a, b, atol=1e-5)


def test_sample_next_draws_from_next_token_probs() -> None:
    """Each row's draws follow its probabilities, and never fall outside the top-p nucleus."""
    from bots_rft.llm.generation import sample_next

    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(5)) * 2
    probs = next_token_probs(logits, temperature=0.8, top_p=0.7)
    torch.manual_seed(0)
    draws = torch.stack([sample_next(logits, greedy=False, temperature=0.8, top_p=0.7) for _ in range(3000)])
    for row in range(3):
        freq = torch.bincount(draws[:, row], minlength=40).float() / 3000
        assert bool((freq[probs[row] == 0] == 0).all())  # outside the nucleus: never drawn
        assert float((freq - probs[row]).abs().max()) < 0.04
    assert torch.equal(sample_next(logits, greedy=True, temperature=0.8, top_p=0.7), logits.argmax(-1))


def test_training_logprobs_through_the_kept_positions_equal_the_full_forward(policy: Any) -> None:
    """The loss's forward sends only the completion positions through the output head; their
    log-probs are the ones a forward over every position gives (left padding included)."""
    from bots_rft.train.grpo import token_logprobs
    from bots_rft.train.policy import position_ids

    model, tok = policy
    enc = encode_chats(tok, CHATS)
    prompt_len = enc["input_ids"].shape[1]
    completion = torch.randint(3, 200, (len(CHATS), 7), generator=torch.Generator().manual_seed(2))
    ids = torch.cat([enc["input_ids"], completion], 1)
    attn = torch.cat([enc["attention_mask"], torch.ones_like(completion)], 1)
    assert int(attn[:, 0].min()) == 0  # some prompts are padded on the left
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=attn, position_ids=position_ids(attn), use_cache=False).logits
        want = token_logprobs(full[:, prompt_len - 1 : -1], completion, 0.7)
        got = sequence_logprobs(model, ids, attn, prompt_len, 0.7)
    assert got.shape == (len(CHATS), 7) and torch.equal(got, want)


@pytest.mark.slow
def test_the_oneDNN_packing_check_draws_nothing_from_torchs_generator() -> None:
    """It runs inside a process's first seeded rollout or evaluation; a draw from the global
    generator there shifted that run's samples (and a resumed run's)."""
    import subprocess
    import sys

    probe = (
        "import torch; from bots_rft.llm.decoders import _packing_works; torch.manual_seed(5); "
        "before = torch.get_rng_state().clone(); _packing_works(torch.float32); "
        "print(bool(torch.equal(before, torch.get_rng_state())))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
