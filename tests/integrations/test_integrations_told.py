"""What a run was told is what it does, on every adapter (issue 45): rollouts per task checked
against the trainer's own setting, reference pass rates read by task id (never by row), and a
resumed selector refused when its checkpoint's evidence or pool differs from the run's. Against
the real framework classes, as the other integration tests run them."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, CheckpointError, ConfigError, DataError, Interpolation, InvalidArgumentError
from bots_rft.estimators import MultiReference
from bots_rft.integrations.tasks import check_references_by_id, check_rollouts, references_by_id

N = 12
# Row r holds task N-1-r: row order and task ids differ, as in a shuffled or merged pool.
IDS = [N - 1 - r for r in range(N)]
WEAK_OF_TASK = np.round(np.linspace(0.05, 0.6, N), 3)  # task k's weak pass rate
STRONG_OF_TASK = np.round(np.clip(WEAK_OF_TASK + 0.3, 0, 1), 3)


def _rows() -> list[dict[str, Any]]:
    return [
        {"prompt": f"task {t}:", "task_id": t, "weak": float(WEAK_OF_TASK[t]), "strong": float(STRONG_OF_TASK[t])}
        for t in IDS
    ]


# ------------------------------------------------------------------------ references by id
def test_references_by_id_reads_every_pool_kind(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    frame = pd.DataFrame(_rows())
    frame.to_parquet(tmp_path / "pool.parquet")
    for pool in (_rows(), frame, datasets.Dataset.from_pandas(frame), tmp_path / "pool.parquet"):
        weak, strong = references_by_id(pool, ["weak", "strong"])
        np.testing.assert_array_equal(weak, WEAK_OF_TASK)
        np.testing.assert_array_equal(strong, STRONG_OF_TASK)
    # Nested ids (GURU's extra_info.index), a missing value, a task without a row, num_tasks.
    nested = [{"extra_info": {"index": t}, "p": None if t == 3 else 0.5} for t in (4, 0, 3)]
    (p,) = references_by_id(nested, ["p"], task_id_column="extra_info.index", num_tasks=6)
    np.testing.assert_array_equal(p, [0.5, np.nan, np.nan, np.nan, 0.5, np.nan])
    with pytest.raises(DataError, match="task_id: task id 1 occurs on 2 rows"):
        references_by_id([{"task_id": 1, "p": 0.1}, {"task_id": 1, "p": 0.2}], ["p"])
    with pytest.raises(DataError, match="p: reference pass rates must be numbers"):
        references_by_id([{"task_id": 0, "p": "high"}], ["p"])
    with pytest.raises(DataError, match="^q: "):
        references_by_id(_rows(), ["q"])


def test_row_order_references_with_shuffled_ids_are_refused() -> None:
    rows = _rows()
    by_row = BOTS(N, evidence=Interpolation([r["weak"] for r in rows], [r["strong"] for r in rows]))
    with pytest.raises(DataError, match=r"'weak' column in row order.*references_by_id\(pool"):
        check_references_by_id(by_row, rows, IDS, "task_id")
    multi = BOTS(N, evidence=MultiReference(np.array([[r["weak"], r["strong"]] for r in rows])))
    with pytest.raises(DataError, match="MultiReference references"):
        check_references_by_id(multi, rows, IDS, "task_id")
    # Built by id: accepted; ids in row order: row order is id order.
    check_references_by_id(
        BOTS(N, evidence=Interpolation(*references_by_id(rows, ["weak", "strong"]))), rows, IDS, "task_id"
    )
    in_order = sorted(rows, key=lambda r: r["task_id"])
    check_references_by_id(by_row, in_order, list(range(N)), "task_id")


def test_rollouts_per_task_are_checked_against_the_trainers_key() -> None:
    check_rollouts(BOTS(N, n_rollouts=8), 8, "num_generations")
    with pytest.raises(ConfigError, match=r"^num_generations: .* 4 completions per task .* n_rollouts=16"):
        check_rollouts(BOTS(N), 4, "num_generations")
    check_rollouts(object(), 4, "num_generations")  # a selector without n_rollouts is not checked


# ------------------------------------------------------------------------ TRL GRPOTrainer
def _grpo(tmp_path: Path, rows: list[dict[str, Any]] | None = None, **overrides: Any) -> Any:
    pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from bots_rft.llm.models import byte_tokenizer, tiny_model

    torch.manual_seed(0)
    tok = byte_tokenizer()

    def accuracy(prompts: list[str], completions: list[str], task_id: list[int], **kw: Any) -> list[float]:
        return [float(t % 2) for t in task_id]

    cfg: dict[str, Any] = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_steps=1,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=4,
        save_strategy="no",
        seed=0,
        beta=0.0,
        disable_tqdm=True,
    )
    cfg.update(overrides)
    ds = datasets.Dataset.from_list(rows if rows is not None else _rows())
    return GRPOTrainer(
        model=tiny_model(tok), reward_funcs=[accuracy], args=GRPOConfig(**cfg), train_dataset=ds, processing_class=tok
    )


@pytest.mark.slow
def test_trl_refuses_what_the_run_was_not_told(tmp_path: Path) -> None:
    from bots_rft.integrations.trl import attach_bots, save_selector

    trainer = _grpo(tmp_path)
    sampler_hook = trainer._get_train_sampler
    with pytest.raises(ConfigError, match="^num_generations: .*n_rollouts=16"):
        attach_bots(trainer, BOTS(N))
    rows = _rows()
    by_row = BOTS(N, n_rollouts=4, evidence=Interpolation([r["weak"] for r in rows], [r["strong"] for r in rows]))
    with pytest.raises(DataError, match="'weak' column in row order"):
        attach_bots(trainer, by_row)
    assert trainer._get_train_sampler == sampler_hook  # nothing installed by a refused attach

    # By id: attached, and bound to the pool.
    weak, strong = references_by_id(trainer.train_dataset, ["weak", "strong"])
    sel = BOTS(N, n_rollouts=4, evidence=Interpolation(weak, strong))
    attach_bots(trainer, sel, save_with_checkpoints=True)
    assert sel.pool is not None

    # Resuming from a checkpoint written on another pool (the same size) is refused ...
    other = BOTS(N, n_rollouts=4, evidence=Interpolation(weak, strong))
    other.set_pool(range(100, 100 + N))
    save_selector(other, tmp_path / "checkpoint-1")
    with pytest.raises(CheckpointError, match="pool: task ids"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))
    # ... and so is one of a pool with the same task ids and other prompts (the same size).
    from bots_rft.integrations.tasks import bind_pool

    renamed = [{**r, "prompt": r["prompt"].upper()} for r in _rows()]
    twin = BOTS(N, n_rollouts=4, evidence=Interpolation(weak, strong))
    bind_pool(twin, IDS, "task_id", renamed)
    save_selector(twin, tmp_path / "checkpoint-4")
    with pytest.raises(CheckpointError, match="pool: task ids"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    # ... and so is one whose references differ (the checkpoint used to replace the run's).
    swapped = BOTS(N, n_rollouts=4, evidence=Interpolation(strong, weak))
    save_selector(swapped, tmp_path / "checkpoint-2")
    with pytest.raises(CheckpointError, match=r"evidence: interpolation \(references"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    without = BOTS(N, n_rollouts=4)
    save_selector(without, tmp_path / "checkpoint-3")
    with pytest.raises(CheckpointError, match="evidence: interpolation .* here, none in the state"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert sel.num_updates == 0 and sel.identity["evidence"]["kind"] == "interpolation"


@pytest.mark.slow
def test_trl_async_checks_the_pool_references_and_rollouts() -> None:
    pytest.importorskip("trl")
    from bots_rft.integrations.trl_async import AsyncBOTS

    rows = _rows()
    by_row = BOTS(N, n_rollouts=4, evidence=Interpolation([r["weak"] for r in rows], [r["strong"] for r in rows]))
    with pytest.raises(DataError, match="'weak' column in row order"):
        AsyncBOTS(by_row, rows)
    sel = BOTS(N, evidence=Interpolation(*references_by_id(rows, ["weak", "strong"])))
    stream = AsyncBOTS(sel, rows)
    assert sel.pool is not None
    trainer = SimpleNamespace(train_dataset=stream.prompts, args=SimpleNamespace(num_generations=4))
    with pytest.raises(ConfigError, match="^num_generations: .*n_rollouts=16"):
        stream.attach(trainer)
    stream.close()


# ------------------------------------------------------------------------ SkyRL-train
@pytest.mark.slow
def test_skyrl_checks_rollouts_references_and_pool(tmp_path: Path) -> None:
    pytest.importorskip("skyrl_train")
    import json

    sky = pytest.importorskip("test_integrations_skyrl")
    from bots_rft.llm.models import byte_tokenizer

    mp = pytest.MonkeyPatch()
    mp.setattr(sky.skyrl_trainer, "ray", SimpleNamespace(get=lambda refs, **kw: refs))
    mp.setattr(sky.skyrl_trainer, "configure_ray_worker_logging", lambda: None)
    try:
        tok = byte_tokenizer()
        n, group = sky.N, sky.GROUP
        order = list(reversed(range(n)))  # rows hold tasks n-1 .. 0
        weak = np.round(np.linspace(0.05, 0.6, n), 3)
        path = tmp_path / "pool.jsonl"
        with open(path, "w") as f:
            for t in order:
                row = {"prompt": [{"role": "user", "content": f"task {t}"}], "env_class": "gsm8k", "task_id": t}
                f.write(json.dumps({**row, "weak": float(weak[t])}) + "\n")
        from skyrl_train.dataset import PromptDataset

        def dataset() -> Any:
            return PromptDataset(datasets=[str(path)], tokenizer=tok, max_prompt_length=64, num_workers=1)

        with pytest.raises(ConfigError, match=r"^generator.n_samples_per_prompt: .*n_rollouts=16"):
            sky._trainer(tmp_path, tok, sky._cfg(tmp_path), BOTS(n), dataset=dataset())
        by_row = BOTS(n, n_rollouts=group, evidence=Interpolation(weak[order], weak[order]))
        with pytest.raises(DataError, match="'weak' column in row order"):
            sky._trainer(tmp_path, tok, sky._cfg(tmp_path), by_row, dataset=dataset())
        ref = references_by_id(dataset().dataframe, ["weak"])[0]
        np.testing.assert_array_equal(ref, weak)
        sel = BOTS(n, n_rollouts=group, evidence=Interpolation(ref, ref))
        sky._trainer(tmp_path, tok, sky._cfg(tmp_path), sel, dataset=dataset())
        assert sel.pool is not None
        # A selector resumed from a checkpoint of another pool is refused when the loader binds it.
        other = BOTS(n, n_rollouts=group)
        other.set_pool(range(1, n + 1))
        resumed = BOTS(n, n_rollouts=group)
        resumed.load_state_dict(other.state_dict())
        with pytest.raises(DataError, match=r"task_id: this pool \(\d+ task ids"):
            sky._trainer(tmp_path, tok, sky._cfg(tmp_path), resumed, dataset=dataset())
    finally:
        mp.undo()


# ------------------------------------------------------------------------ AReaL
@pytest.mark.slow
def test_areal_checks_rollouts_references_and_single_controller(tmp_path: Path) -> None:
    pytest.importorskip("areal")
    ar = pytest.importorskip("test_integrations_areal")
    datasets = pytest.importorskip("datasets")

    n, group = ar.N, ar.GROUP
    order = list(reversed(range(n)))
    weak = np.round(np.linspace(0.05, 0.6, n), 3)
    ds = datasets.Dataset.from_list([{"task_id": t, "messages": f"task {t}", "weak": float(weak[t])} for t in order])
    previous = os.environ.get("AREAL_SPMD_MODE")
    os.environ["AREAL_SPMD_MODE"] = "1"
    try:
        with pytest.raises(ConfigError, match=r"^gconfig.n_samples: .*n_rollouts=16"):
            ar._trainer(ar._config(tmp_path), BOTS(n), ds)
        by_row = BOTS(n, n_rollouts=group, evidence=Interpolation(weak[order], weak[order]))
        with pytest.raises(DataError, match="'weak' column in row order"):
            ar._trainer(ar._config(tmp_path), by_row, ds)
        ref = references_by_id(ds, ["weak"])[0]
        sel = BOTS(n, n_rollouts=group, evidence=Interpolation(ref, ref))
        ar._trainer(ar._config(tmp_path), sel, ds).close()
        assert sel.pool is not None
        # Single-controller mode is refused when the trainer is built, before AReaL builds anything.
        os.environ["AREAL_SPMD_MODE"] = "0"
        built: list[bool] = []

        class Recording(ar.CPUPPOTrainer):  # type: ignore[misc,name-defined]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                built.append(True)
                super().__init__(*args, **kwargs)

        from bots_rft.integrations.areal import with_bots

        with pytest.raises(ConfigError, match="^AREAL_SPMD_MODE: .*single-controller"):
            with_bots(Recording)(ar._config(tmp_path), train_dataset=ds, bots=BOTS(n, n_rollouts=group))
        assert not built
    finally:
        if previous is None:
            os.environ.pop("AREAL_SPMD_MODE", None)
        else:
            os.environ["AREAL_SPMD_MODE"] = previous


# ------------------------------------------------------------------------ the docs' snippets
def _python_block_after(text: str, marker: str) -> str:
    import re

    start = text.index(marker)
    block = re.search(r"```python\n(.*?)```", text[start:], flags=re.S)
    assert block is not None, marker
    import textwrap

    return textwrap.dedent(block.group(1))


@pytest.mark.slow
def test_the_documented_reference_snippets_run_as_written(tmp_path: Path) -> None:
    """README's integration snippet and the docs' *References by task id* block, run as written on
    a GURU-layout pool whose ids are not in row order, with a real GRPOTrainer."""
    root = Path(__file__).resolve().parents[2]
    rows = [
        {
            "prompt": f"task {t}:",
            "extra_info": {"index": t},
            "qwen2.5_7b_pass_rate": float(WEAK_OF_TASK[t]),
            "qwen3_30b_pass_rate": float(STRONG_OF_TASK[t]),
        }
        for t in IDS
    ]
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(rows)
    docs = _python_block_after((root / "docs" / "integrations.md").read_text(), "**References by task id.**")
    space: dict[str, Any] = {"ds": ds}
    exec(compile(docs, "docs/integrations.md", "exec"), space)
    np.testing.assert_array_equal(space["weak"], WEAK_OF_TASK)
    readme = _python_block_after((root / "README.md").read_text(), "Reference pass rates are read **by task id**")
    trainer = _grpo(tmp_path, rows, num_generations=16, per_device_train_batch_size=16)
    space = {"ds": ds, "trainer": trainer, "BOTS": BOTS, "Interpolation": Interpolation}
    exec(compile(readme, "README.md", "exec"), space)
    np.testing.assert_array_equal(space["sel"].evidence.strong, STRONG_OF_TASK.astype(np.float32))
    assert space["hook"].selector is space["sel"] and space["sel"].pool is not None


# ------------------------------------------------------------------------ resume_params
@pytest.mark.slow
def test_trl_resume_params_says_which_wins(tmp_path: Path) -> None:
    from bots_rft.integrations.trl import attach_bots, restore_selector, save_selector

    weak, strong = references_by_id(_rows(), ["weak", "strong"])
    swapped = BOTS(N, n_rollouts=4, evidence=Interpolation(strong, weak))
    swapped.update([0, 1], [1, 2], 4)
    save_selector(swapped, tmp_path / "checkpoint-1")
    folder = str(tmp_path / "checkpoint-1")
    with pytest.raises(InvalidArgumentError, match="^resume_params: must be"):
        attach_bots(_grpo(tmp_path), BOTS(N, n_rollouts=4), resume_params="mine")
    trainer = _grpo(tmp_path / "error")
    sel = BOTS(N, n_rollouts=4, evidence=Interpolation(weak, strong))
    attach_bots(trainer, sel)
    with pytest.raises(CheckpointError, match=r"bots_selector\.bots: .*set resume_params='checkpoint'"):
        trainer.train(resume_from_checkpoint=folder)  # the restore runs before TRL's own train
    assert sel.num_updates == 0
    # What attach_bots(..., resume_params=choice) hands the restore on train(resume_from_checkpoint=...).
    for choice in ("checkpoint", "current"):
        sel = BOTS(N, n_rollouts=4, evidence=Interpolation(weak, strong))
        restore_selector(sel, folder, params=choice)
        assert sel.num_updates == 1
        want = swapped.identity["evidence"] if choice == "checkpoint" else evidence_identity_of(weak, strong)
        assert sel.identity["evidence"] == want


def evidence_identity_of(weak: Any, strong: Any) -> Any:
    return BOTS(N, evidence=Interpolation(weak, strong)).identity["evidence"]


def test_batch_sampler_resume_params() -> None:
    pytest.importorskip("torch")
    from bots_rft.integrations.batches import BOTSBatchSampler

    weak, strong = references_by_id(_rows(), ["weak", "strong"])
    saved = BOTSBatchSampler(BOTS(N, evidence=Interpolation(weak, strong)), np.arange(N), 4)
    state = saved.state_dict()
    mine = BOTSBatchSampler(BOTS(N), np.arange(N), 4)
    with pytest.raises(CheckpointError, match="^data loader state: .*evidence: none here.*resume_params='current'"):
        mine.load_state_dict(state)
    mine.resume_params = "current"
    mine.load_state_dict(state)
    assert mine.selector.evidence is None


@pytest.mark.slow
def test_the_trl_smoke_run_removes_its_temporary_folder(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TMPDIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "examples/trl_grpo_bots.py", "--smoke"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "read back: identical posterior" in done.stdout and "removed the temporary output folder" in done.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("trl_grpo_bots_")]


def test_a_pool_hashes_alike_through_pandas_and_datasets(tmp_path: Path) -> None:
    """verl's --check reads the training parquet with pandas (chat prompts as numpy arrays), its
    trainer with datasets (lists): a checkpoint of one must match a selector bound through the other."""
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    from bots_rft.integrations.tasks import bind_pool

    rows = [{"prompt": [{"role": "user", "content": f"task {t}"}], "extra_info": {"index": t}} for t in IDS]
    pd.DataFrame(rows).to_parquet(tmp_path / "pool.parquet")
    frame = pd.read_parquet(tmp_path / "pool.parquet")
    hf = datasets.Dataset.from_parquet(str(tmp_path / "pool.parquet"))
    pools = []
    for pool in (frame, hf, rows):
        sel = BOTS(N)
        bind_pool(sel, IDS, "extra_info.index", pool)
        pools.append(sel.pool)
    assert pools[0] == pools[1] == pools[2]
    other = BOTS(N)
    bind_pool(other, IDS, "extra_info.index", [{**r, "prompt": [{"role": "user", "content": "x"}]} for r in rows])
    assert other.pool != pools[0]
    ids_only = BOTS(N)
    bind_pool(ids_only, IDS, "extra_info.index", [{"extra_info": {"index": t}} for t in IDS])  # no prompt column
    assert ids_only.pool not in (None, pools[0])
