"""The wheel alone is enough to try the trainer: the toy pool ``bots data toy`` writes trains with no
config (its verifier is built in), a pool no verifier scores is refused before anything is written,
and the smallest example configs ship with the package (``bots example``), run as the docs show."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bots_rft.cli import main

pytest.importorskip("torch")
pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]
QUICK = ("steps=2", "batch_size=4", "rollouts=4", "max_new_tokens=8")


@pytest.mark.slow
def test_the_toy_pool_trains_with_no_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["data", "toy", "--out", "toy"]) == 0
    assert main(["train", "pool=toy/train.parquet", *QUICK, "--out", "run", "--no-progress"]) == 0
    assert "bots train: done after step 2" in capsys.readouterr().out


def _unscored_pool(tmp_path: Path) -> Path:
    import pyarrow.parquet as pq

    from bots_rft.train.toy import write_toy_pool

    train, _ = write_toy_pool(tmp_path / "pool", num_tasks=8, eval_tasks=2)
    table = pq.read_table(train)
    sources = table.column("data_source").to_pylist()
    sources[3] = "mystery/task"
    table = table.set_column(table.schema.get_field_index("data_source"), "data_source", [sources])
    pq.write_table(table, train)
    return train


@pytest.mark.slow
def test_a_pool_no_verifier_scores_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _unscored_pool(tmp_path)
    out = tmp_path / "run"
    assert main(["train", f"pool={train}", *QUICK, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"bots train: error: pool: {train}: 1 task(s) have data_source 'mystery/task'"
    )
    assert "verifiers:" in err[0]
    assert not out.exists()


@pytest.mark.slow
def test_a_refused_pool_leaves_the_run_overwrite_names_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots_rft.train.toy import write_toy_pool

    good, _ = write_toy_pool(tmp_path / "good", num_tasks=8, eval_tasks=2)
    out = tmp_path / "run"
    assert main(["train", f"pool={good}", *QUICK, "--out", str(out), "--no-progress"]) == 0
    before = (out / "metrics.jsonl").read_bytes()
    train = _unscored_pool(tmp_path)
    assert main(["train", f"pool={train}", *QUICK, "--out", str(out), "--overwrite", "--no-progress"]) == 2
    assert (out / "metrics.jsonl").read_bytes() == before
    assert "mystery/task" in capsys.readouterr().err


def test_bots_example_lists_prints_and_writes_the_configs_that_ship(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from bots_rft.commands.example import examples
    from bots_rft.train.config import load_config

    monkeypatch.chdir(tmp_path)
    assert main(["example"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed[:-1]] == ["compare-smoke", "smoke"]
    assert listed[0].endswith("bots compare on the toy pool, under a minute on a CPU")
    for name, text in examples().items():
        assert main(["example", name]) == 0
        assert capsys.readouterr().out == text
        keys = yaml.safe_load(text)
        keys.pop("compare", None)  # bots compare's own section (its runs below check it)
        load_config(None, keys)  # every training key known, every value valid
    assert main(["example", "smoke", "--out", "s.yaml"]) == 0
    assert (tmp_path / "s.yaml").read_text(encoding="utf-8") == examples()["smoke"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["example", "smok"], "bots example: error: NAME: no example 'smok' (did you mean smoke?); the examples: "),
        (["example", "--out", "x.yaml"], "bots example: error: --out: 'x.yaml' given without NAME"),
        (["example", "smoke", "--out", "taken.yaml"], "bots example: error: --out: 'taken.yaml' already exists"),
    ],
)
def test_bots_example_refuses_bad_input_with_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken.yaml").write_text("mine\n")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and captured.err.startswith(message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.yaml"]
    assert (tmp_path / "taken.yaml").read_text() == "mine\n"


def _commands_in_block(doc: str, marker: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S) if marker in b)
    return [line.split(" #", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("doc", ["README.md", "docs/training.md"])
def test_the_examples_run_as_the_docs_show(
    doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = _commands_in_block(doc, "bots example smoke")
    assert [c.split()[:2] for c in commands][:2] == [["bots", "data"], ["bots", "example"]]
    monkeypatch.chdir(tmp_path)  # a folder with nothing in it, as after pip install
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command
    out = capsys.readouterr().out
    assert "bots train: done after step 4" in out
    if "bots compare" in "\n".join(commands):
        assert (tmp_path / "runs" / "compare-smoke" / "summary.md").exists()
