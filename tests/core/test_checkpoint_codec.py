"""The checkpoint codec (bots_rft.checkpoint): the file is plain safetensors with the state's
structure in its metadata, checksummed and written atomically; files of the legacy format
(BOTSRFT) and the trainer's old JSON + safetensors parts still load to the same state."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, CheckpointError, checkpoint
from bots_rft.selector.multipool import MultiPool

DATA = Path(__file__).parents[1] / "data"
EXPECTED = json.loads((DATA / "legacy_expected.json").read_text())


def _arrays(node: Any, path: str = "", acc: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every array of a state by path: dtype, shape and SHA-256 of its bytes (as the fixtures'
    expectations were recorded by tests/data/make_legacy_fixtures.py)."""
    acc = {} if acc is None else acc
    if isinstance(node, dict):
        for k, v in node.items():
            _arrays(v, f"{path}/{k}", acc)
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            _arrays(v, f"{path}/{i}", acc)
    elif isinstance(node, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(node).tobytes()).hexdigest()
        acc[path] = [node.dtype.str, list(node.shape), digest]
    return acc


# ---------------------------------------------------------------------------- legacy files
def test_a_legacy_selector_file_loads_to_the_same_state_and_picks(tmp_path: Path) -> None:
    path = DATA / "legacy_selector.bots"
    assert path.read_bytes()[:8] == b"BOTSRFT\x00"
    assert _arrays(checkpoint.load_state(path)) == EXPECTED["selector"]["arrays"]
    assert BOTS.load(path).select(32).tolist() == EXPECTED["selector"]["next"]
    # Saved again, it is written in the current format, and holds the same state.
    BOTS.load(path).save(tmp_path / "again.bots")
    data = (tmp_path / "again.bots").read_bytes()
    assert data[:8] != b"BOTSRFT\x00"
    assert _arrays(checkpoint.load_state(tmp_path / "again.bots")) == EXPECTED["selector"]["arrays"]
    assert BOTS.load(tmp_path / "again.bots").select(32).tolist() == EXPECTED["selector"]["next"]
    old, new = checkpoint.load_state(path), checkpoint.load_state(tmp_path / "again.bots")
    assert {k: v for k, v in old.items() if not isinstance(v, (np.ndarray, dict))} == {
        k: v for k, v in new.items() if not isinstance(v, (np.ndarray, dict))
    }


def test_legacy_bytes_decode_to_the_same_arrays() -> None:
    state = checkpoint.from_bytes((DATA / "legacy_state.bin").read_bytes())
    assert _arrays(state) == EXPECTED["state_bytes"]["arrays"]
    assert state["nested"] == [1, [2.5, "x"], None, True, {"k": 7}] and state["scalar"] == 0.5
    # And the current format stores each of those arrays as it is.
    again = checkpoint.from_bytes(checkpoint.to_bytes(state))
    assert _arrays(again) == _arrays(state)
    assert again["ids"].tolist() == ["task-a", "b", "ç"]


def test_a_legacy_multipool_file_loads_to_the_same_state_and_picks() -> None:
    path = DATA / "legacy_multipool.bots"
    assert _arrays(checkpoint.load_state(path)) == EXPECTED["multipool"]["arrays"]
    assert MultiPool.load(path).select(16).tolist() == EXPECTED["multipool"]["next"]


def test_a_legacy_trainer_part_loads() -> None:
    torch = pytest.importorskip("torch")
    from bots_rft.train.run_checkpoint import load_tree

    tree = load_tree(DATA / "legacy_tree", "tree")
    assert torch.equal(tree["weights"]["layer.weight"], torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7)
    assert tree["weights"]["layer.bias"].dtype == torch.bfloat16
    assert tree["weights"]["layer.bias"].tolist() == [1.5, -2.0]
    assert tree["steps"] == (1, 2, 3) and tree["note"] == "legacy" and tree["none"] is None
    assert tree["optimizer"]["param_groups"] == [{"lr": 0.1, "params": [0]}]
    assert torch.equal(tree["optimizer"]["state"][0]["step"], torch.tensor(3.0))
    rs = np.random.RandomState()
    rs.seed(3)
    kind, keys, pos, *_ = rs.get_state()
    assert tree["rng"]["numpy"][0] == kind and np.array_equal(tree["rng"]["numpy"][1], keys)
    assert tree["rng"]["numpy"][2] == pos


# ------------------------------------------------------------------------- the format
def _state() -> dict[str, Any]:
    return {
        "alpha": np.linspace(0.5, 2.0, 50),
        "mask": np.arange(9) % 2 == 0,
        "ids": np.array(["a", "bb", "ccc"]),
        "big_endian": np.arange(4, dtype=">i4"),
        "complex": np.array([1 + 2j, 3 - 4j]),
        "zero_d": np.array(7, dtype=np.int16),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "scalar": np.float64(0.25),
        "pair": (1, "two"),
        "by_id": {3: "three", (1, 2): [None, True]},
        "__reserved": 1,
        "nan": float("nan"),
        "nested": {"evidence": {"weak": np.arange(3, dtype=np.float32)}},
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
            and b.flags.writeable
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.generic):  # stored as the Python scalar it holds
        a = a.item()
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def test_a_checkpoint_is_a_plain_safetensors_file(tmp_path: Path) -> None:
    import safetensors.numpy
    from safetensors import safe_open

    path = tmp_path / "state.bots"
    checkpoint.save_state(path, _state())
    arrays = safetensors.numpy.load_file(str(path))
    assert np.array_equal(arrays["alpha"], _state()["alpha"])  # arrays are stored under their path
    assert np.array_equal(arrays["nested.evidence.weak"], np.arange(3, dtype=np.float32))
    with safe_open(str(path), "np") as f:
        meta = f.metadata()
    assert list(meta) == ["bots-rft"]
    info = json.loads(meta["bots-rft"])
    assert list(info) == ["format", "version", "sha256", "tree"]
    assert info["format"] == "bots-rft" and info["version"] == checkpoint.VERSION == 2
    assert len(info["sha256"]) == 64 and info["tree"]["__dict__"]


def test_the_same_state_gives_the_same_bytes(tmp_path: Path) -> None:
    """Integrations compare packed states byte for byte; a file's bytes depend on its state only."""
    first = checkpoint.to_bytes(_state())
    assert all(checkpoint.to_bytes(_state()) == first for _ in range(5))
    checkpoint.save_state(tmp_path / "a.bots", _state())
    assert (tmp_path / "a.bots").read_bytes() == first


def test_every_value_round_trips_as_it_was(tmp_path: Path) -> None:
    state = _state()
    back = checkpoint.from_bytes(checkpoint.to_bytes(state))
    assert _same(state, back) and back["scalar"] == 0.25 and type(back["scalar"]) is float
    checkpoint.save_state(tmp_path / "s.bots", state)
    assert _same(state, checkpoint.load_state(tmp_path / "s.bots"))
    assert _same(state, checkpoint.from_bytes((tmp_path / "s.bots").read_bytes()))


def test_what_cannot_be_stored_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    for bad in ({"x": object()}, {"x": np.array([object()])}, {"x": np.zeros(2, dtype="datetime64[s]")}):
        with pytest.raises(CheckpointError, match="^state: "):
            checkpoint.save_state(tmp_path / "bad.bots", bad)
        with pytest.raises(CheckpointError, match="^state: "):
            checkpoint.to_bytes(bad)
    assert list(tmp_path.iterdir()) == []


def test_every_flipped_byte_and_every_truncation_is_a_one_line_error_naming_the_file(tmp_path: Path) -> None:
    state = {"alpha": np.arange(4.0), "ids": np.array(["a"]), "n": 3}
    path = tmp_path / "s.bots"
    checkpoint.save_state(path, state)
    data = path.read_bytes()
    bad = tmp_path / "bad.bots"
    for i in range(len(data)):
        for bit in (0x01, 0x40):
            flipped = bytearray(data)
            flipped[i] ^= bit
            bad.write_bytes(bytes(flipped))
            with pytest.raises(CheckpointError) as info:
                checkpoint.load_state(bad)
            assert str(info.value).startswith(f"{bad}: ") and "\n" not in str(info.value), (i, bit)
            with pytest.raises(CheckpointError):
                checkpoint.from_bytes(bytes(flipped))
    for cut in range(len(data)):
        bad.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=rf"^{bad}: (truncated|corrupt)"):
            checkpoint.load_state(bad)
    bad.write_bytes(data + b"\0")
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load_state(bad)


def test_a_flipped_byte_is_found_before_any_array_is_read(tmp_path: Path) -> None:
    """The checksum covers the arrays: a flip in one of them is refused, not loaded."""
    path = tmp_path / "s.bots"
    checkpoint.save_state(path, {"alpha": np.arange(1000.0)})
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"corrupt \(checksum mismatch\)"):
        checkpoint.load_state(path)


def test_other_files_are_not_checkpoints(tmp_path: Path) -> None:
    import safetensors.numpy

    plain = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file({"a": np.zeros(2)}, str(plain))
    for path in (plain, tmp_path / "zip.bots", tmp_path / "text.bots"):
        if path.name == "zip.bots":
            path.write_bytes(b"PK\x03\x04" + bytes(100))
        elif path.name == "text.bots":
            path.write_text('{"alpha": [1, 2, 3], "and": "more text than a header"}')
        with pytest.raises(CheckpointError, match=rf"^{path}: not a bots-rft checkpoint"):
            checkpoint.load_state(path)
        assert not checkpoint.is_checkpoint_file(path)


def test_writing_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sel.bots"
    checkpoint.save_state(path, {"alpha": np.arange(3.0)})
    before = path.read_bytes()
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        checkpoint.save_state(path, {"alpha": np.arange(5.0)})
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["sel.bots"]
    assert synced  # the new file was on disk before the rename was tried
    monkeypatch.undo()
    synced.clear()
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    checkpoint.save_state(path, {"alpha": np.arange(5.0)})
    assert len(synced) == 2  # the file, then its folder (the rename)
    assert np.array_equal(checkpoint.load_state(path)["alpha"], np.arange(5.0))


def test_selector_states_need_no_torch(tmp_path: Path) -> None:
    code = (
        "import sys, numpy as np\n"
        "from bots_rft import BOTS, checkpoint\n"
        "s = BOTS(30, seed=1, prior_alpha=np.linspace(1, 2, 30))\n"
        f"s.save({str(tmp_path / 's.bots')!r})\n"
        f"t = BOTS.load({str(tmp_path / 's.bots')!r})\n"
        "assert np.array_equal(t.alpha, s.alpha)\n"
        "assert checkpoint.from_bytes(checkpoint.to_bytes(s.state_dict()))['num_tasks'] == 30\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_torch_tensors_round_trip_with_their_dtypes() -> None:
    torch = pytest.importorskip("torch")
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    state = {
        "w": w,
        "tied": w,  # shares w's memory, which safetensors refuses: stored as its own copy
        "half": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "rng": np.arange(4, dtype=np.uint32),
        "by_id": {0: {"step": torch.tensor(3.0)}},
    }
    back = checkpoint.from_bytes(checkpoint.to_bytes(state))
    assert torch.equal(back["w"], w) and torch.equal(back["tied"], w)
    assert back["half"].dtype == torch.bfloat16 and back["half"].tolist() == [1.5, -2.0]
    assert isinstance(back["rng"], np.ndarray) and back["rng"].dtype == np.uint32
    assert back["by_id"][0]["step"].item() == 3.0


def test_trainer_parts_are_codec_files(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    from bots_rft.train.run_checkpoint import load_tree, save_tree, tree_exists

    weights = {"layer.weight": torch.ones(2, 2), "layer.bias": torch.zeros(2)}
    save_tree(tmp_path, "model", weights)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json", "model.safetensors"]
    assert tree_exists(tmp_path, "model") and not tree_exists(tmp_path, "optimizer")
    assert checkpoint.is_checkpoint_file(tmp_path / "model.safetensors")
    assert sorted(load_file(tmp_path / "model.safetensors")) == ["layer.bias", "layer.weight"]
    back = load_tree(tmp_path, "model")
    assert all(torch.equal(back[k], v) for k, v in weights.items())
    data = bytearray((tmp_path / "model.safetensors").read_bytes())
    data[-1] ^= 0x01
    (tmp_path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: corrupt \(checksum mismatch\)"):
        load_tree(tmp_path, "model")
    with pytest.raises(CheckpointError, match="incomplete: missing 'optimizer.safetensors'"):
        load_tree(tmp_path, "optimizer")
