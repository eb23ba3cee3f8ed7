"""Trinity's config checks cannot switch themselves off (issue 45), and a Trinity YAML gets a
pre-flight without Ray or a GPU: ``python -m bots_rft.integrations.check trinity --config FILE``.

The selector reads the whole config from ``TasksetScheduler.__init__``'s ``config`` argument, a
seam the version gate declares; built anywhere else, without ``whole_config(cfg)``, it is refused
instead of running unchecked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trinity.buffer.selector.selector", reason="trinity-rft is not installed")

from trinity.buffer.task_scheduler import TasksetScheduler  # noqa: E402

from bots_rft import ConfigError, IntegrationError  # noqa: E402
from bots_rft.integrations import trinity as bt  # noqa: E402
from test_integrations_trinity import PAPER, _file_reader, config_for, write_pool  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> str:
    weak = [round(0.02 * i, 3) for i in range(24)]
    return write_pool(tmp_path_factory.mktemp("pool"), weak, [min(1.0, w + 0.3) for w in weak])


def test_a_selector_built_outside_the_scheduler_is_refused_not_left_unchecked(pool: str) -> None:
    with pytest.raises(ConfigError, match="^BOTSSelector: built outside Trinity's TasksetScheduler"):
        _file_reader(pool, bt.__name__ + ".BOTSSelector", PAPER, ("weak", "strong"), 42, 4)
    # Given the whole config, its checks run (m against repeat_times) ...
    cfg = config_for(pool, {**PAPER, "m": 16}, ["pass_rate_calculator"], 4, Path("/tmp"))
    cfg.algorithm.repeat_times = 8
    with bt.whole_config(cfg), pytest.raises(ConfigError, match=r"kwargs\.m: 16 rollouts per task"):
        _file_reader(pool, bt.__name__ + ".BOTSSelector", {**PAPER, "m": 16}, ("weak", "strong"), 42, 4)
    # ... and None says the caller checked them.
    with bt.whole_config(None):
        _file_reader(pool, bt.__name__ + ".BOTSSelector", PAPER, ("weak", "strong"), 42, 4)


def test_a_scheduler_without_a_config_argument_fails_closed(pool: str, monkeypatch: pytest.MonkeyPatch) -> None:
    class NoConfig(TasksetScheduler):  # type: ignore[misc]
        def __init__(self, explorer_state: Any, config: Any) -> None:  # builds a reader with no Config at hand
            self.reader = _file_reader(pool, bt.__name__ + ".BOTSSelector", PAPER, ("weak", "strong"), 42, 4)

    with pytest.raises(ConfigError, match="TasksetScheduler.__init__ has no Trinity Config in its config argument"):
        NoConfig({}, {"not": "a Config"})
    # A Trinity whose TasksetScheduler.__init__ takes the config under another name (the frame walk
    # of earlier releases then skipped every check) is refused by the version gate.
    original = TasksetScheduler.__init__

    def renamed(self: Any, explorer_state: Any, cfg: Any) -> None:
        original(self, explorer_state, cfg)

    monkeypatch.setattr(TasksetScheduler, "__init__", renamed)
    with pytest.raises(IntegrationError, match=r"TasksetScheduler.__init__\(self, explorer_state, cfg\) does not"):
        bt.check_trinity()


def _yaml(
    tmp_path: Path, pool: str, *, m: int = 8, operators: tuple[str, ...] = ("pass_rate_calculator",), path: str = ""
) -> Path:
    text = f"""
algorithm:
  repeat_times: 8
buffer:
  batch_size: 4
  total_epochs: 10
  explorer_input:
    taskset:
      name: math
      storage_type: file
      path: {path or pool}
      split: train
      default_workflow_type: math_workflow
      data_selector:
        selector_type: bots_rft.integrations.trinity.BOTSSelector
        feature_keys: ["weak", "strong"]
        kwargs: {{m: {m}, lamb: 0.1, rho: 0.1, target_reward: 0.5, tau: 0, do_sample: true}}
data_processor:
  experience_pipeline:
    operators: [{", ".join("{name: " + o + "}" for o in operators)}]
"""
    out = tmp_path / "run.yaml"
    out.write_text(text)
    return out


def test_preflight_runs_every_check_on_a_yaml(pool: str, tmp_path: Path) -> None:
    lines = bt.preflight(str(_yaml(tmp_path, pool)))
    assert lines[0].startswith("trinity-rft 0.6.0: inside the tested window") and "6 methods checked" in lines[0]
    assert lines[1] == "algorithm.repeat_times: 8; experience operators: pass_rate_calculator"
    assert lines[2].startswith(f"buffer.explorer_input.taskset: BOTSSelector over 24 tasks of {pool}; BOTS(lam=0.1")
    assert "interpolation evidence from ['weak', 'strong'] (references " in lines[2]
    for kwargs, message in [
        ({"m": 16}, r"^buffer\.explorer_input\.tasksets?(\[0\])?\.data_selector\.kwargs\.m: 16 rollouts per task"),
        ({"operators": ("dapo_dynamic_sampling", "pass_rate_calculator")}, r"comes before .* \(pass_rate_calculator\)"),
        ({"path": str(tmp_path / "nowhere")}, r"^buffer\.explorer_input\.taskset\.path: .*nowhere' does not exist"),
    ]:
        with pytest.raises(ConfigError, match=message):
            bt.preflight(str(_yaml(tmp_path, pool, **kwargs)))


def test_the_check_cli_takes_a_trinity_config(pool: str, tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "bots_rft.integrations.check", *args]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)

    done = run("trinity", "--config", str(_yaml(tmp_path, pool)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "check passed: nothing was started (no Ray, no model)"
    bad = run("trinity", "--config", str(_yaml(tmp_path, pool, m=16)))
    assert bad.returncode == 2
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "kwargs.m: 16 rollouts per task" in errors[0]
    assert run("verl", "--config", "x.yaml").returncode == 2  # --config is Trinity's only
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml"]  # nothing written
