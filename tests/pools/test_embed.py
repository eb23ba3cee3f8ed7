"""Task embeddings: the file format (bots_rft.data.embeddings) and its errors, the rows of a pool,
PCA; prompt embeddings with the tiny random model (batch-independent); ``bots embed`` end to end,
resumed, refused, and the commands docs/estimators.md shows."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy

from bots_rft.cli import main
from bots_rft.data.embeddings import (
    FORMAT,
    EmbeddingsFile,
    embeddings_for,
    pca_reduce,
    read_embeddings,
    write_embeddings,
)
from bots_rft.errors import ConfigError, DataError, InvalidArgumentError, InvalidTypeError

ROOT = Path(__file__).resolve().parents[2]


def _matrix(n: int = 5, d: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


# ------------------------------------------------------------------------------- the file
def _nan_at(row: int) -> np.ndarray:
    m = _matrix()
    m[row, 1] = np.nan
    return m


def test_round_trip_keeps_ids_rows_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "e.safetensors"
    ids = np.array([40, 7, 12, 3, 99])
    m = _matrix()
    write_embeddings(path, ids, m, metadata={"model": "tiny", "prompt_tokens": "123"})
    assert [p.name for p in tmp_path.iterdir()] == ["e.safetensors"]  # no temporary file left
    got = read_embeddings(path)
    assert isinstance(got, EmbeddingsFile) and len(got) == 5 and got.dim == 3
    assert got.task_ids.dtype == np.int64 and got.task_ids.tolist() == ids.tolist()
    assert got.matrix.dtype == np.float32 and np.array_equal(got.matrix, m)
    assert got.metadata == {
        "model": "tiny",
        "prompt_tokens": "123",
        "format": FORMAT,
        "format_version": "1",
        "tasks": "5",
        "dim": "3",
        "task_id_kind": "int",
    }
    assert got.source == str(path)
    with pytest.raises(AttributeError):
        got.matrix = m  # type: ignore[misc]  # frozen
    # Plain safetensors: any reader sees the two tensors.
    raw = safetensors.numpy.load_file(str(path))
    assert set(raw) == {"embeddings", "task_id"} and raw["task_id"].dtype == np.int64
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_string_ids_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.safetensors"
    ids = ["b-2", "ä", "", "a-1"]
    write_embeddings(path, ids, _matrix(4, 2))
    got = read_embeddings(path)
    assert got.task_ids.dtype == object and got.task_ids.tolist() == ids
    assert got.metadata["task_id_kind"] == "str"
    rows = embeddings_for(path, np.array(["a-1", "ä"], dtype=object))
    assert np.array_equal(rows, _matrix(4, 2)[[3, 1]])
    with pytest.raises(DataError, match=r"keys its tasks by strings, but the task ids asked for are integers"):
        embeddings_for(path, [1, 2])


def test_a_file_from_another_tool_with_just_the_tensors_reads(tmp_path: Path) -> None:
    path = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file({"embeddings": _matrix(3, 4), "task_id": np.array([5, 6, 7], dtype=np.int64)}, path)
    got = read_embeddings(path)
    assert got.metadata == {} and got.task_ids.tolist() == [5, 6, 7]


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"task_ids": [1, 2]}, InvalidArgumentError, "task_ids: 2 ids for a matrix of 5 rows"),
        ({"task_ids": [1, 2, 3, 2, 5]}, InvalidArgumentError, "task_ids: task id 2 occurs more than once"),
        ({"task_ids": [[1, 2, 3, 4, 5]]}, InvalidArgumentError, "task_ids: expected a 1-D sequence"),
        ({"task_ids": [1.5, 2, 3, 4, 5]}, InvalidTypeError, "task_ids: task ids must be integers or strings"),
        ({"matrix": np.zeros(5)}, InvalidArgumentError, "matrix: expected a 2-D"),
        ({"matrix": np.zeros((5, 0))}, InvalidArgumentError, "matrix: needs at least one row and one column"),
        ({"matrix": np.array([["a"]] * 5)}, InvalidTypeError, "matrix: expected real numbers"),
        ({"matrix": _nan_at(3)}, InvalidArgumentError, r"matrix: row 3 \(task id 4\) holds a non-finite value"),
        ({"matrix": np.full((5, 1), 1e300)}, InvalidArgumentError, "matrix: row 0 .* non-finite value in float32"),
        ({"metadata": {"format": "x"}}, InvalidArgumentError, "metadata: key 'format' is set by the writer"),
        ({"metadata": {"prompt_tokens": 5}}, InvalidTypeError, "metadata: keys and values must be str"),
    ],
)
def test_write_refuses_bad_input_and_writes_nothing(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    args: dict[str, Any] = {"task_ids": [1, 2, 3, 4, 5], "matrix": _matrix(), "metadata": None}
    args.update(kwargs)
    with pytest.raises(error, match=text):
        write_embeddings(tmp_path / "e.safetensors", args["task_ids"], args["matrix"], metadata=args["metadata"])
    assert list(tmp_path.iterdir()) == []


def _save(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Path:
    safetensors.numpy.save_file(tensors, str(path), metadata=metadata)
    return path


IDS = np.array([1, 2, 3], dtype=np.int64)
EMB = np.ones((3, 2), dtype=np.float32)


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda p: p, "does not exist"),
        (lambda p: (p.mkdir(), p)[1], "is a directory"),
        (lambda p: (p.write_bytes(b"not a safetensors file at all"), p)[1], "is not a safetensors file"),
        (lambda p: _truncated(p), "is not a safetensors file"),
        (lambda p: _save(p, {"task_id": IDS}), "has no tensor 'embeddings'"),
        (lambda p: _save(p, {"embeddings": EMB}), "has no tensor 'task_id'"),
        (lambda p: _save(p, {"embeddings": EMB.astype(np.float64), "task_id": IDS}), "'embeddings' has dtype F64"),
        (lambda p: _save(p, {"embeddings": EMB, "task_id": IDS.astype(np.int32)}), "'task_id' has dtype I32"),
        (lambda p: _save(p, {"embeddings": EMB.ravel(), "task_id": IDS}), "'embeddings' has shape \\[6\\]"),
        (lambda p: _save(p, {"embeddings": EMB, "task_id": IDS.reshape(3, 1)}), "'task_id' has shape \\[3, 1\\]"),
        (lambda p: _save(p, {"embeddings": EMB, "task_id": IDS[:2]}), "2 task ids for 3 embeddings"),
        (lambda p: _save(p, {"embeddings": EMB[:0], "task_id": IDS[:0]}), "expected \\[tasks >= 1, dim >= 1\\]"),
        (
            lambda p: _save(p, {"embeddings": np.where(np.arange(3)[:, None] == 2, np.inf, EMB), "task_id": IDS}),
            "row 2 \\(task id 3\\) of 'embeddings' holds a non-finite value",
        ),
        (
            lambda p: _save(p, {"embeddings": EMB, "task_id": np.array([9, 4, 9], dtype=np.int64)}),
            "task id 9 occurs more than once",
        ),
        (lambda p: _save(p, {"embeddings": EMB, "task_id": IDS}, {"format": "bots-rft"}), "is not an embeddings file"),
        (
            lambda p: _save(p, {"embeddings": EMB, "task_id": IDS}, {"format": FORMAT, "format_version": "2"}),
            "format version 2, newer than this bots-rft reads \\(1\\)",
        ),
        (
            lambda p: _save(
                p,
                {
                    "embeddings": EMB,
                    "task_id_utf8": np.frombuffer(b"ab", np.uint8),
                    "task_id_offsets": np.array([0, 1, 1, 3]),
                },
            ),
            "'task_id_offsets' does not split 'task_id_utf8' \\(2 bytes\\)",
        ),
    ],
)
def test_read_names_what_is_wrong_in_one_line(tmp_path: Path, make: Any, text: str) -> None:
    path = make(tmp_path / "bad.safetensors")
    with pytest.raises(DataError) as info:
        read_embeddings(path, argument="--embeddings")
    message = str(info.value)
    assert re.search(text, message), message
    assert message.startswith(f"--embeddings: '{tmp_path / 'bad.safetensors'}'") and "\n" not in message
    with pytest.raises(DataError):  # and through embeddings_for
        embeddings_for(path, [1])


def _truncated(path: Path) -> Path:
    write_embeddings(path, IDS, EMB)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 5])
    return path


def test_embeddings_for_gives_the_pools_order_and_names_missing_ids(tmp_path: Path) -> None:
    path = tmp_path / "e.safetensors"
    file_ids = np.array([30, 10, 50, 20, 40])
    m = _matrix()
    write_embeddings(path, file_ids, m)
    got = embeddings_for(path, [10, 20, 30])  # extra ids in the file are fine
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert np.array_equal(got, m[[1, 3, 0]])
    from_file = embeddings_for(read_embeddings(path), np.array([50, 40, 10, 20, 30], dtype=np.int64))
    assert np.array_equal(from_file, m[[2, 4, 1, 3, 0]])
    with pytest.raises(DataError) as info:
        embeddings_for(path, [10, 77, 20, 78, 79], argument="similarity.embeddings")
    assert str(info.value) == (
        f"similarity.embeddings: '{path}' has no embedding for task id 77 (3 of 5 task ids missing); "
        "embed this pool with bots embed"
    )
    assert embeddings_for(path, []).shape == (0, 3)


def test_embeddings_for_a_pool(tmp_path: Path) -> None:
    from bots_rft.data import TaskPool, chat, make_row

    rows = [
        make_row(index=100 - i, prompt=chat(f"q{i}"), ground_truth="a", data_source="x", ability="y", split="train")
        for i in range(4)
    ]
    pool = TaskPool.from_records(rows)
    m = _matrix(4, 3)
    write_embeddings(tmp_path / "e.safetensors", pool.ids[::-1], m[::-1])  # stored in another order
    assert np.array_equal(embeddings_for(tmp_path / "e.safetensors", pool.ids), m)


def test_pca_is_the_projection_on_the_top_components_with_fixed_signs() -> None:
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(200, 6)) * np.array([5, 3, 2, 1, 0.5, 0.1])) @ np.linalg.qr(rng.normal(size=(6, 6)))[0]
    reduced, kept = pca_reduce(x, 3)
    assert reduced.dtype == np.float32 and reduced.shape == (200, 3)
    centred = x - x.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    for k in range(3):
        expected = centred @ vt[k]
        expected *= np.sign(vt[k][np.argmax(np.abs(vt[k]))])  # the largest loading positive
        np.testing.assert_allclose(reduced[:, k], expected, rtol=1e-4, atol=1e-4)
    assert kept == pytest.approx(float((s[:3] ** 2).sum() / (s**2).sum()))
    again, _ = pca_reduce(x.copy(), 3)
    assert np.array_equal(again, reduced)  # deterministic
    with pytest.raises(InvalidArgumentError, match=r"dim: must lie in \[1, 6\]"):
        pca_reduce(x, 7)


def test_importing_the_format_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, bots_rft.data.embeddings; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------- prompt embeddings
@pytest.fixture(scope="module")
def tiny() -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.llm.models import load_model

    return load_model("tiny", device="cpu")


CHATS = [
    [{"role": "user", "content": "reverse ab"}],
    [{"role": "system", "content": "Think first."}, {"role": "user", "content": "reverse " + "qwerty" * 9}],
    [{"role": "user", "content": "copy hello world"}],
]


def test_a_prompts_embedding_does_not_depend_on_its_batch(tiny: Any) -> None:
    from bots_rft.llm.models import encode_chats
    from bots_rft.train.embed import prompt_embeddings

    model, tok = tiny
    batch, tokens = prompt_embeddings(model, tok, CHATS, batch_size=3)
    assert batch.dtype == np.float32 and batch.shape == (3, 64) and np.isfinite(batch).all()
    lengths = [int(encode_chats(tok, [c])["attention_mask"].sum()) for c in CHATS]
    assert tokens == sum(lengths) and len(set(lengths)) == 3  # padded: different lengths in one batch
    for i, c in enumerate(CHATS):
        alone, n = prompt_embeddings(model, tok, [c])
        assert n == lengths[i]
        np.testing.assert_allclose(batch[i], alone[0], rtol=0, atol=1e-5)
    # In small batches, in another order: the same rows.
    again, _ = prompt_embeddings(model, tok, CHATS[::-1], batch_size=2)
    np.testing.assert_allclose(again[::-1], batch, rtol=0, atol=1e-5)


def test_position_ids_skip_the_padding_for_a_model_with_absolute_positions(tiny: Any) -> None:
    """Qwen2's rotary positions are relative, so left padding shifts nothing there; GPT-2 adds
    absolute position embeddings, where a padded prompt would move without position ids that skip
    the padding (the check has teeth)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from bots_rft.llm.models import encode_chats, portable_init
    from bots_rft.train.embed import _decoder, prompt_embeddings

    _, tok = tiny
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=512, **ids))
    portable_init(gpt2, 0)
    gpt2.eval()
    batch, _ = prompt_embeddings(gpt2, tok, CHATS)
    for i, c in enumerate(CHATS):
        np.testing.assert_allclose(batch[i], prompt_embeddings(gpt2, tok, [c])[0][0], rtol=0, atol=1e-5)
    enc = encode_chats(tok, CHATS)
    with torch.no_grad():
        naive = _decoder(gpt2)(**enc, use_cache=False).last_hidden_state  # positions 0.. counting the padding
    mask = enc["attention_mask"].unsqueeze(-1).float()
    pooled = ((naive * mask).sum(1) / mask.sum(1)).numpy()
    assert np.abs(pooled[0] - batch[0]).max() > 1e-2  # CHATS[0] is padded in the batch


def test_the_last_hidden_state_is_the_causal_lms_last_hidden_states_entry(
    tiny: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoder's last_hidden_state (no logits computed) is ``output_hidden_states``' last
    entry; a model without a separate decoder goes through the causal LM itself."""
    import bots_rft.train.embed as embed

    model, tok = tiny
    through_decoder, n1 = embed.prompt_embeddings(model, tok, CHATS)
    monkeypatch.setattr(embed, "_decoder", lambda model: None)
    through_lm, n2 = embed.prompt_embeddings(model, tok, CHATS)
    assert n1 == n2
    np.testing.assert_array_equal(through_decoder, through_lm)


def test_eval_mode_is_used_and_the_previous_mode_restored(tiny: Any) -> None:
    from bots_rft.train.embed import prompt_embeddings

    model, tok = tiny
    seen: list[bool] = []
    handle = model.get_decoder().register_forward_pre_hook(lambda module, args: seen.append(module.training))
    try:
        model.train()
        prompt_embeddings(model, tok, CHATS[:1])
        assert model.training and seen == [False]
        model.eval()
        prompt_embeddings(model, tok, CHATS[:1])
        assert not model.training
    finally:
        handle.remove()
        model.eval()
    with pytest.raises(InvalidArgumentError, match="batch_size: must be an integer >= 1, got 0"):
        prompt_embeddings(model, tok, CHATS, batch_size=0)
    empty, tokens = prompt_embeddings(model, tok, [])
    assert empty.shape == (0, 64) and tokens == 0


def test_max_prompt_tokens_truncates_as_the_rollouts_do(tiny: Any) -> None:
    from bots_rft.train.embed import prompt_embeddings

    model, tok = tiny
    _, tokens = prompt_embeddings(model, tok, CHATS, max_prompt_tokens=16)
    assert tokens == 3 * 16


# ------------------------------------------------------------------------------ bots embed
@pytest.fixture(scope="module")
def strings_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("strings") / "pool"
    assert main(["data", "strings", "--out", str(out), "--tasks", "72", "--eval-tasks", "4"]) == 0
    return out / "train.parquet"


def _cfg(pool: Path, out: Path, **kw: Any) -> Any:
    from bots_rft.train.embed import EmbedConfig

    base: dict[str, Any] = dict(model="tiny", pool=str(pool), out=str(out), batch_size=4, chunk_tasks=8, device="cpu")
    base.update(kw)
    return EmbedConfig(**base)


@pytest.mark.slow
def test_bots_embed_end_to_end(strings_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bots_rft.data import TaskPool
    from bots_rft.llm.models import load_model
    from bots_rft.train.embed import progress_dir_for, prompt_embeddings

    out = tmp_path / "emb.safetensors"
    argv = ["embed", "--model", "tiny", "--pool", str(strings_pool), "--out", str(out), "--device", "cpu"]
    assert main([*argv, "--batch-size", "8", "--system-prompt", "Be brief.", "--no-progress"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1
    line = printed[0]
    assert re.fullmatch(
        r"bots embed: embedded 72 tasks \(now 72, resumed 0\), dim 64, \d+ prompt tokens; [\d.]+s "
        r"\([\d.]+s embedding: [\d.]+ tasks/s, \d+ tokens/s; model load [\d.]+s\); wrote .*emb\.safetensors",
        line,
    ), line
    pool = TaskPool.load(strings_pool)
    got = read_embeddings(out)
    assert got.task_ids.tolist() == pool.ids.tolist() and got.matrix.shape == (72, 64)
    meta = got.metadata
    assert meta["model"] == "tiny" and meta["system_prompt"] == "Be brief." and meta["dim"] == "64"
    assert meta["pool"] == str(strings_pool) and meta["dtype"] == "float32" and meta["max_prompt_tokens"] == "1024"
    assert f"{meta['prompt_tokens']} prompt tokens" in line
    import json

    assert json.loads(meta["pool_identity"]) == pool.identity()
    assert not progress_dir_for(out).exists()
    # The vectors are the prompts' as training renders them.
    model, tok = load_model("tiny", device="cpu")
    direct, tokens = prompt_embeddings(model, tok, pool.prompts(system_prompt="Be brief."), batch_size=8)
    np.testing.assert_allclose(got.matrix, direct, rtol=0, atol=1e-5)
    assert int(meta["prompt_tokens"]) == tokens
    # An existing --out needs --overwrite.
    assert main([*argv, "--no-progress"]) == 2
    assert "--out: " in capsys.readouterr().err
    assert main([*argv, "--no-progress", "--overwrite", "--limit", "5"]) == 0
    assert read_embeddings(out).task_ids.tolist() == pool.ids[:5].tolist()


@pytest.mark.slow
def test_an_interrupted_run_resumes_to_the_same_file_bit_for_bit(
    strings_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bots_rft.train.embed as embed

    full = embed.run_embed(_cfg(strings_pool, tmp_path / "full.safetensors"), progress=False)
    assert full.tasks == 72 and full.embedded_now == 72 and full.resumed == 0
    expected = read_embeddings(tmp_path / "full.safetensors")

    # Killed while embedding the third chunk: two chunk files are there.
    real = embed.prompt_embeddings
    calls = {"n": 0}

    def dies_on_the_third_chunk(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    out = tmp_path / "resumed.safetensors"
    monkeypatch.setattr(embed, "prompt_embeddings", dies_on_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        embed.run_embed(_cfg(strings_pool, out), progress=False)
    monkeypatch.setattr(embed, "prompt_embeddings", real)
    pdir = embed.progress_dir_for(out)
    assert not out.exists()
    assert sorted(p.name for p in pdir.iterdir()) == [
        "chunk-0000000.safetensors",
        "chunk-0000001.safetensors",
        "config.json",
    ]
    (pdir / ".chunk-0000002.safetensors.abc.tmp").write_bytes(b"torn")  # a write cut off
    resumed = embed.run_embed(_cfg(strings_pool, out), progress=False)
    assert resumed.resumed == 16 and resumed.embedded_now == 56
    assert resumed.prompt_tokens == full.prompt_tokens and resumed.prompt_tokens_now < full.prompt_tokens
    _assert_same_file(out, expected)
    assert not pdir.exists()

    # A damaged chunk file is embedded again.
    kept = tmp_path / "kept.safetensors"
    embed.run_embed(_cfg(strings_pool, kept, keep_progress=True), progress=False)
    kdir = embed.progress_dir_for(kept)
    (kdir / "chunk-0000003.safetensors").write_bytes(b"garbage")
    (kdir / "chunk-0000001.safetensors").unlink()
    again = embed.run_embed(_cfg(strings_pool, kept), progress=False)
    assert again.resumed == 56 and again.embedded_now == 16
    _assert_same_file(kept, expected)

    # Everything done: no model is loaded, and --dim reduces the finished progress.
    embed.run_embed(_cfg(strings_pool, kept, keep_progress=True), progress=False)
    monkeypatch.setattr("bots_rft.llm.models.load_model", lambda *a, **k: pytest.fail("model loaded"))
    reduced = embed.run_embed(_cfg(strings_pool, tmp_path / "kept.safetensors", dim=4), progress=False)
    assert reduced.resumed == 72 and reduced.dim == 4 and reduced.model_dim == 64
    assert reduced.explained_variance is not None and 0 < reduced.explained_variance < 1
    assert read_embeddings(kept).matrix.tobytes() == pca_reduce(expected.matrix, 4)[0].tobytes()


def _assert_same_file(path: Path, expected: EmbeddingsFile) -> None:
    """Bit for bit: the same ids, the same float32 bytes, the same metadata (safetensors writes
    the metadata in no fixed order, so the files' bytes are compared through what they hold)."""
    got = read_embeddings(path)
    assert got.task_ids.tolist() == expected.task_ids.tolist()
    assert got.matrix.tobytes() == expected.matrix.tobytes()
    assert got.metadata == expected.metadata


@pytest.mark.slow
def test_a_resume_with_other_settings_is_refused(strings_pool: Path, tmp_path: Path) -> None:
    from bots_rft.train.embed import progress_dir_for, run_embed

    out = tmp_path / "o.safetensors"
    run_embed(_cfg(strings_pool, out, keep_progress=True, limit=8), progress=False)
    out.unlink()
    for other in ({"batch_size": 2}, {"system_prompt": ""}, {"max_prompt_tokens": 64}, {"limit": 16}, {"seed": 1}):
        with pytest.raises(ConfigError, match="different settings") as info:
            run_embed(_cfg(strings_pool, out, **{"limit": 8, **other}), progress=False)
        assert "--restart" in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()
    summary = run_embed(_cfg(strings_pool, out, limit=8, batch_size=2, restart=True), progress=False)
    assert summary.resumed == 0 and summary.embedded_now == 8
    assert not progress_dir_for(out).exists()
    # A corrupt header is refused too, naming --restart.
    pdir = progress_dir_for(out)
    pdir.mkdir()
    (pdir / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="corrupt header.*--restart"):
        run_embed(_cfg(strings_pool, tmp_path / "o.safetensors"), progress=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "text"),
    [
        (["--pool", "nope.parquet"], "--pool: 'nope.parquet' does not exist"),
        (["--pool", "garbage.parquet"], "garbage.parquet"),
        (["--out", "old.safetensors"], "--out: 'old.safetensors' already exists; pass --overwrite"),
        (["--out", "afile/e.safetensors"], "--out: cannot create 'afile/e.safetensors'"),
        (["--out", "POOL"], "--out: "),
        (["--batch-size", "0"], "argument --batch-size: must be >= 1, got 0"),
        (["--dim", "0"], "argument --dim: must be >= 1, got 0"),
        (["--dim", "65"], "dim: --dim 65 is more than the model's hidden size 64"),
        (["--dim", "73"], "dim: --dim 73 is more than the 72 tasks embedded"),
        (["--max-prompt-tokens", "x"], "argument --max-prompt-tokens: expected an integer, got 'x'"),
        (["--limit", "-1"], "argument --limit: must be >= 1, got -1"),
        (["--model", "nosuch"], "model: 'nosuch' is neither"),
        (["--device", "bogus"], "device: not a torch device: 'bogus'"),
        (["--dtype", "int3"], "dtype: expected one of"),
        (["--adapter", "noadapter"], "--adapter: 'noadapter' does not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    strings_pool: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    text: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.parquet").write_bytes(b"not parquet")
    (tmp_path / "old.safetensors").write_bytes(b"old")
    (tmp_path / "afile").write_text("a file, not a folder")
    before = sorted(p.name for p in tmp_path.iterdir())
    args = {"--model": "tiny", "--pool": str(strings_pool), "--out": "e.safetensors", "--device": "cpu"}
    for option, value in zip(extra[::2], extra[1::2]):
        args[option] = str(strings_pool) if value == "POOL" else value
    argv = ["embed", *[x for kv in args.items() for x in kv], "--no-progress"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and text in lines[0] and "Traceback" not in captured.err, captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no progress
    assert (tmp_path / "old.safetensors").read_bytes() == b"old"


# ------------------------------------------------------------------------------------ docs
def _docs_section() -> str:
    text = (ROOT / "docs" / "estimators.md").read_text(encoding="utf-8")
    section = text[text.index("## Task embeddings: `bots embed`") :]
    end = section.find("\n## ", 1)
    return section if end < 0 else section[:end]


@pytest.mark.slow
def test_the_docs_commands_run_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command in the section, run exactly as written in a fresh folder, then its Python
    block prints what the text says."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    section = _docs_section()
    blocks = re.findall(r"```([a-z]*)\n(.*?)```", section, flags=re.S)
    commands = [line.strip() for lang, block in blocks if lang == "bash" for line in block.splitlines() if line.strip()]
    assert [c.split()[:2] for c in commands] == [["bots", "data"], ["bots", "embed"], ["bots", "embed"]]
    monkeypatch.chdir(tmp_path)
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command
    printed = capsys.readouterr().out
    assert "bots embed: embedded 200 tasks" in printed and "dim 16 (PCA of 64" in printed
    (code,) = [block for lang, block in blocks if lang == "python"]
    exec(compile(code, "estimators.md", "exec"), {})
    said = re.search(r"prints `([^`]*)`", section[section.index(code) :])
    assert said is not None
    assert capsys.readouterr().out.strip() == said.group(1)


def test_the_docs_cost_figures_add_up() -> None:
    """The section's FLOPs: 2·P·T per task for the pool, 6·P + 2·P per token for an RL step."""
    section = _docs_section()
    p = 7e9
    pool = 2 * p * 54_400 * 200
    step_tokens = 256 * 8 * (200 + 1_000)
    train, gen = 6 * p * step_tokens, 2 * p * step_tokens
    assert round(pool / 1e17, 1) == 1.5 and "≈ **1.5·10¹⁷ FLOPs**" in section
    assert step_tokens == 2_457_600 and "= 2.46·10⁶ tokens" in section
    assert round(train / 1e17, 2) == 1.03 and "≈ 1.03·10¹⁷" in section
    assert round(gen / 1e17, 2) == 0.34 and "≈ 0.34·10¹⁷" in section
    assert round((train + gen) / 1e17, 1) == 1.4 and "≈ 1.4·10¹⁷ per step" in section
    assert round(pool / (train + gen), 1) == 1.1 and "about 1.1 RL steps" in section
