"""Task embeddings instead of reference models, in the integrations that take a user-built
selector: the docs' one-line-per-trainer block (docs/integrations.md, *Task embeddings instead of
reference models*) run as written, and TRL's ``attach_bots`` training a real GRPOTrainer with a
selector whose evidence is ``EmbeddingRegression``. verl's and Trinity-RFT's own ``embeddings``
keys are tested with their other tests (tests/integrations/test_integrations_verl.py,
tests/integrations/test_integrations_trinity.py), the docs' verl overrides and Trinity YAML there too."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import re
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS
from bots_rft.data.embeddings import embeddings_for, write_embeddings
from bots_rft.estimators import EmbeddingRegression

pytest.importorskip("torch")
pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
N = 12
#: Row r holds task N-1-r: row order and task ids differ.
IDS = [N - 1 - r for r in range(N)]
GENERATIONS = 16  # the docs' n_rollouts=16


def python_block_after(marker: str) -> str:
    """The first fenced python block after ``marker`` in docs/integrations.md."""
    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text[text.index(marker) :], flags=re.S)
    assert block is not None, marker
    return textwrap.dedent(block.group(1))


def write_pool_embeddings(path: Path) -> None:
    """The pool's embeddings keyed by task id, rows in yet another order: a task's kind (id mod 3:
    always passes, always fails, mixed) one-hot plus a noise column."""
    rng = np.random.default_rng(0)
    ids = rng.permutation(N)
    write_embeddings(path, ids, np.concatenate([np.eye(3)[ids % 3], rng.standard_normal((N, 1))], axis=1))


#: The task ids each call of :func:`accuracy` scored.
SCORED: list[int] = []


def rate_of(task: int) -> float:
    """Task id mod 3: 0 always passes, 1 always fails, 2 passes every other rollout."""
    return (1.0, 0.0, 0.5)[task % 3]


def accuracy(prompts: list[str], completions: list[str], extra_info: list[dict[str, Any]], **kw: Any) -> list[float]:
    ids = [int(e["index"]) for e in extra_info]
    SCORED.extend(ids)
    return [float(i % 2) if rate_of(t) == 0.5 else rate_of(t) for i, t in enumerate(ids)]


def grpo(tmp_path: Path, ds: Any, **overrides: Any) -> Any:
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from bots_rft.llm.models import byte_tokenizer, tiny_model

    torch.manual_seed(0)
    tok = byte_tokenizer()
    cfg: dict[str, Any] = dict(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_steps=3,
        per_device_train_batch_size=2 * GENERATIONS,  # two tasks per generation
        num_generations=GENERATIONS,
        max_completion_length=4,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        beta=0.0,
        disable_tqdm=True,
    )
    cfg.update(overrides)
    return GRPOTrainer(
        model=tiny_model(tok), reward_funcs=[accuracy], args=GRPOConfig(**cfg), train_dataset=ds, processing_class=tok
    )


def test_the_documented_one_line_per_trainer_block_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each line of the block builds the selector its trainer takes, on the file's rows by task
    id; TRL's attaches to a real GRPOTrainer, which then trains with it."""
    from bots_rft.integrations.trl import BOTSRepeatSampler

    monkeypatch.chdir(tmp_path)  # the docs' paths are relative: emb.safetensors beside the run
    write_pool_embeddings(tmp_path / "emb.safetensors")
    ds = datasets.Dataset.from_list([{"prompt": f"task {t}:", "extra_info": {"index": t}} for t in IDS])
    trainer = grpo(tmp_path, ds)
    space: dict[str, Any] = {
        "ds": ds,
        "trainer": trainer,
        # What SkyRL's and AReaL's config objects hold at the keys the block reads.
        "cfg": SimpleNamespace(generator=SimpleNamespace(n_samples_per_prompt=8)),
        "config": SimpleNamespace(gconfig=SimpleNamespace(n_samples=4)),
    }
    exec(compile(python_block_after("**One line per trainer**"), "docs/integrations.md", "exec"), space)
    rows = embeddings_for(tmp_path / "emb.safetensors", range(N))
    selectors = {
        "TRL": (space["hook"].selector, GENERATIONS),
        "TRL async": (space["stream"].selector, 16),
        "SkyRL": (space["skyrl_bots"], 8),
        "AReaL": (space["areal_bots"], 4),
        "OpenRLHF": (space["openrlhf_bots"], 16),
    }
    for name, (sel, rollouts) in selectors.items():
        assert isinstance(sel, BOTS) and sel.num_tasks == N, name
        assert isinstance(sel.evidence, EmbeddingRegression), name
        np.testing.assert_array_equal(sel.evidence.embeddings, rows)  # row k: task id k's embedding
        assert sel.n_rollouts == rollouts, name
        assert sel.evidence.forgetting == sel.lam, name  # the regression forgets at BOTS's λ
    assert len({id(sel.evidence) for sel, _ in selectors.values()}) == len(selectors)  # one estimator each
    assert isinstance(trainer._get_train_sampler(), BOTSRepeatSampler)
    space["stream"].close()

    # attach_bots with EmbeddingRegression evidence: a real GRPO run feeds the regression, which
    # then predicts the rolled-out tasks' success rates (and every other task's, from its kind).
    SCORED.clear()
    trainer.train()
    hook, sel = space["hook"], space["hook"].selector
    assert hook.num_feeds == 3 and sel.num_updates == 3 and sel.evidence.updates == 3
    predicted = sel.evidence.predict_all()
    assert predicted is not None and predicted.shape == (N,)
    rolled = sorted(set(SCORED))
    assert len(rolled) >= 2
    np.testing.assert_allclose(predicted[rolled], [rate_of(t) for t in rolled], atol=0.25)
