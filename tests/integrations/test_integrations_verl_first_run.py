"""The verl first run of docs/integrations.md: the pre-flight check (``--check``) on the
documented command, its refusals, and the toy pool it reads. tests/package/test_examples.py runs the
documented command itself, as a user types it; here the same overrides are composed in process
to test what each check refuses."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("verl.trainer.ppo.v1.replay_buffer", reason="verl 0.9 is not installed")

import verl  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.core.config_store import ConfigStore  # noqa: E402

from bots_rft import ConfigError, DataError  # noqa: E402
from bots_rft.integrations import verl as bv  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TWO_CORES = ("+ray_kwargs.ray_init.num_cpus=2", "transfer_queue.backend.SimpleStorage.num_data_storage_units=1")


def documented_check_overrides() -> list[str]:
    """The overrides of the ``python -m bots_rft.integrations.verl --check`` block in the docs."""
    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        command = re.sub(r"\\\n\s*", "", block).strip()
        if command.startswith("python -m bots_rft.integrations.verl --check"):
            return shlex.split(command)[4:]
    raise AssertionError("docs/integrations.md shows no verl --check command")


OVERRIDES = documented_check_overrides()


def config(*changes: str, drop: tuple[str, ...] = ()) -> Any:
    """The documented config with ``drop``-ped overrides removed and ``changes`` added, resolved
    from the repository root (the docs' paths are relative to it)."""
    keep = [o for o in OVERRIDES if o not in drop]
    keep = [
        f"{k}={ROOT / v}" if k.startswith("data.") and k.endswith("_files") else f"{k}={v}"
        for k, v in (o.split("=", 1) for o in keep)
    ]
    ConfigStore.instance().store(name="bots_ppo_trainer", node=bv._default_config())
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="bots_ppo_trainer", overrides=[*keep, *changes])


def test_the_documented_command_holds_the_two_core_settings_and_passes() -> None:
    assert set(TWO_CORES) <= set(OVERRIDES)
    lines = bv.preflight(config())
    assert lines[0].startswith("verl 0.9.1: inside the tested window")
    assert "TransferQueue holds 2 of them" in lines[2]
    assert "24 rows, task ids from extra_info.index, 24 tasks; 4 prompts x 4 rollouts" in lines[3]
    assert "interpolation evidence from qwen2.5_7b_pass_rate / qwen3_30b_pass_rate" in lines[4]


def test_transferqueue_that_cannot_be_placed_is_refused_naming_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    key = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
    # verl's default of 8 units on a Ray of 2 CPUs: tq.init would wait forever.
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}: 8 storage units .* hold 9 Ray CPUs, but Ray gets 2"):
        bv.check_ray_capacity(config(drop=(TWO_CORES[1],)))
    # Unset num_cpus: the host's cores count.
    monkeypatch.setattr(bv.os, "cpu_count", lambda: 4)
    with pytest.raises(ConfigError, match=r"Ray gets 4 \(this host's cores"):
        bv.check_ray_capacity(config(drop=TWO_CORES))
    monkeypatch.setattr(bv.os, "cpu_count", lambda: 16)
    assert "9 of them" in bv.check_ray_capacity(config(drop=TWO_CORES))
    # A running cluster's size is not known here: not refused.
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert "running cluster" in bv.check_ray_capacity(config(drop=(TWO_CORES[1],)))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ("bots.weak_column=qwen2_5_7b", DataError, "qwen2_5_7b: the dataset has no column"),
        ("data.train_batch_size=32", ConfigError, "data.train_batch_size: 32 exceeds the 24 training rows"),
        ("trainer.v1.trainer_mode=sync", ConfigError, "trainer.v1.trainer_mode: 'sync' is not a BOTS trainer"),
        ("+bots.lamda=0.2", ConfigError, "bots: unknown keys"),
        (
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",
            ConfigError,
            "verl's validate_config: [actor] Please set at least one of",
        ),
    ],
)
def test_preflight_refuses_naming_the_key(change: str, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        bv.preflight(config(change))


def test_missing_training_file_is_named() -> None:
    with pytest.raises(ConfigError, match=r"data.train_files: .*nowhere.parquet does not exist"):
        bv.preflight(config("data.train_files=/nowhere.parquet"))


def test_the_cli_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    import subprocess

    argv = [sys.executable, "-m", "bots_rft.integrations.verl", "--check", *OVERRIDES, "data.train_batch_size=32"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: data.train_batch_size: 32 exceeds the 24 training rows"]
    assert not (ROOT / "outputs").exists()  # no hydra output folder


def test_the_toy_pool_is_what_its_script_writes() -> None:
    sys.path.insert(0, str(ROOT / "examples" / "data"))
    try:
        import verl_toy
    finally:
        sys.path.pop(0)
    train, val = verl_toy.frames()
    for name, frame in (("train", train), ("val", val)):
        stored = pd.read_parquet(ROOT / "examples" / "data" / "verl_toy" / f"{name}.parquet")
        assert stored.to_dict("records") == frame.to_dict("records")
