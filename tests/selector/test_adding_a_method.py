"""Adding a method is one file plus one registry line: the method of docs/adding-a-method.md,
written into a temporary package from the page's snippets exactly as shown and registered with
its one line, passes the contract battery and runs in ``bots simulate``'s method list, the
trainer's config and a short training run. The page's last snippet runs as shown too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import test_method_contract as battery
from bots_rft.cli import main as cli_main
from bots_rft.errors import ConfigError, InvalidArgumentError
from bots_rft.parameters import LAM, SEED, Parameter
from bots_rft.selector.registry import ENTRIES, METHODS, Method, RolloutMode, method, register, unregister

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "adding-a-method.md"


def _snippets() -> list[str]:
    """The page's Python snippets: the method's file, the registry line, running it."""
    found = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    assert len(found) == 3, "the page shows the file, the line and how it runs"
    return [str(s) for s in found]


@pytest.fixture
def added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Method]:
    """The page's method, its file in a temporary package, registered by the page's line."""
    file, line, _ = _snippets()
    assert file.startswith("# least_recent.py\n")
    package = tmp_path / "package"
    package.mkdir()
    (package / "least_recent.py").write_text(file, encoding="utf-8")
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.chdir(tmp_path)
    exec(compile(line, f"{PAGE.name} (the registry line)", "exec"), {})
    try:
        yield method("least-recent")
    finally:
        unregister("least-recent")
        sys.modules.pop("least_recent", None)


def test_the_line_adds_it_to_every_list(added: Method) -> None:
    from bots_rft.cli import build_parser
    from bots_rft.train.config import TrainConfig

    assert added.rollout_mode is RolloutMode.PLAIN and "least-recent" in METHODS and "least-recent" in ENTRIES
    assert build_parser().parse_args(["simulate", "--methods", "random,least-recent"]).methods == (
        "random",
        "least-recent",
    )
    cfg = TrainConfig(pool="p.parquet", method="least-recent", jitter=3)
    assert cfg.method_params == {"jitter": 3.0} and cfg.method_values() == {"jitter": 3.0, "seed": 0}
    assert cfg.replace(steps=3).method_params == {"jitter": 3.0}


def test_it_passes_the_contract_battery(added: Method, tmp_path: Path) -> None:
    battery.test_names_aliases_and_labels_are_unique()
    battery.test_the_registry_builds_exactly_the_methods_of_the_table()
    battery.test_implementation_names_the_class_built(added)
    battery.test_defaults_pass_their_own_check(added)
    for case, call, exc, argument in battery.BAD_CALLS:
        battery.test_bad_calls_raise_one_class_and_change_nothing(added, case, call, exc, argument)
    battery.test_bad_parameters_raise_one_class_naming_the_parameter(added)
    battery.test_fixed_and_unknown_parameters_are_refused(added)
    battery.test_methods_that_need_references_refuse_to_build_without(added)
    battery.test_signals_are_checked_by_name(added)
    battery.test_a_seed_determines_the_selections(added)
    battery.test_checkpoint_round_trip_continues_identically(added, tmp_path)
    battery.test_exclusion_as_ids_or_mask(added)


def test_its_parameters_are_config_keys_with_one_range_check(
    added: Method, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots_rft.train.config import load_config
    from bots_rft.train.run_selector import make_selector

    cfg = load_config(None, ["pool=p.parquet", "method=least-recent", "jitter=2", "seed=5"])
    sel = make_selector(cfg, 12, None, None)
    assert type(sel).__name__ == "LeastRecent" and (sel.jitter, sel.seed) == (2.0, 5)  # type: ignore[attr-defined]
    for bad, shown in (("11", "11.0"), ("-1", "-1.0"), ("nan", "nan")):
        with pytest.raises(ConfigError) as info:
            load_config(None, ["pool=p.parquet", "method=least-recent", f"jitter={bad}"])
        assert str(info.value) == f"jitter: must lie in [0, 10], got {shown}"
    with pytest.raises(ConfigError, match=r"^jitter: must lie in \[0, 10\], got 11$"):
        load_config(None, {"pool": "p.parquet", "method": "least-recent", "jitter": 11})
    # The command line: exit 2, one line naming the key and the value; printed, it reads back.
    assert cli_main(["train", "--print-config", "pool=p.parquet", "method=least-recent", "jitter=12"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "jitter: must lie in [0, 10], got 12.0" in err
    assert cli_main(["train", "--print-config", "pool=p.parquet", "method=least-recent", "jitter=2"]) == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    assert load_config(printed) == cfg.replace(seed=0)


def test_a_new_parameter_may_not_redefine_the_catalogues() -> None:
    def build(*args: object) -> None:
        raise AssertionError("never built")

    other_lam = Parameter("lam", "float", 0.5, "another λ", 0.0, 2.0)
    clash = Method(
        name="clash", label="Clash", summary="", params=(other_lam, SEED), references="unused",
        implementation="x:Y", builder=build,
    )  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="params: 'lam' is already a parameter"):
        register(clash)
    taken = Method(
        name="bots2", label="B2", summary="", params=(LAM,), references="unused", aliases=("bots",),
        implementation="x:Y", builder=build,
    )  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="'bots' already names the bots method"):
        register(taken)
    planned = Method(
        name="planned", label="P", summary="", params=(), references="unused",
        rollout_mode=RolloutMode.PLANNED, implementation="x:Y", builder=build,
    )  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="unrolled: a planned method needs"):
        register(planned)
    with pytest.raises(InvalidArgumentError, match="built in"):
        unregister("bots")
    assert "clash" not in METHODS and "planned" not in METHODS


@pytest.mark.slow
def test_the_pages_running_snippet_runs_as_shown(added: Method, tmp_path: Path) -> None:
    *_, use = _snippets()
    exec(compile(use, f"{PAGE.name} (running it)", "exec"), {})
    summary = (tmp_path / "runs" / "least-recent").iterdir()
    assert any(summary)


@pytest.mark.slow
def test_it_trains(added: Method, tmp_path: Path) -> None:
    from bots_rft.train.toy import toy_config, write_toy_pool
    from bots_rft.train.trainer import train

    pool, _ = write_toy_pool(tmp_path / "pool", num_tasks=12, eval_tasks=3)
    cfg = toy_config(
        pool, tmp_path / "out", method="least-recent", jitter=1.5, steps=2, batch_size=4, rollouts=2,
        max_new_tokens=4, eval_every=0,
    )  # fmt: skip
    result = train(cfg)
    assert result.steps_done == 2 and not result.interrupted
    configs = [r for r in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines() if '"config"' in r]
    assert configs and '"jitter": 1.5' in configs[0]


_BUILT_IN_CHECK = """
import sys
from bots_rft.cli import build_parser
from bots_rft.selector.registry import METHODS, method
from bots_rft.train.config import TrainConfig

m = method("least-recent")
assert m.implementation == "least_recent:LeastRecent" and list(METHODS)[-1] == "least-recent"
assert "least-recent" in build_parser().parse_args(["simulate", "--methods", "random,least-recent"]).methods
cfg = TrainConfig(pool="p.parquet", method="least-recent", jitter=3)
assert cfg.method_values() == {"jitter": 3.0, "seed": 0}
sel = m.build(12, jitter=1.0, seed=2)
assert len(sel.select(4)) == 4
print(sys.modules["least_recent"].__file__ if "least_recent" in sys.modules else method("least-recent").builder.__module__)
"""


def test_a_built_in_method_is_one_file_and_one_registry_line(tmp_path: Path) -> None:
    """The page's file, put beside the built-in peers of a copy of the package, and one line
    added to the registry's list (as the page says): the method is then built in, listed,
    a trainer key and buildable, and nothing else in the package differs from the original."""
    import bots_rft

    file, *_ = _snippets()
    source = Path(bots_rft.__file__).parent
    copy = tmp_path / "bots_rft"
    for path in source.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = copy / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (copy / "selector" / "peers" / "least_recent.py").write_text(file, encoding="utf-8")
    registry = copy / "selector" / "registry.py"
    line = 'register(declared("bots_rft.selector.peers.least_recent:METHOD"))\n'
    text = registry.read_text(encoding="utf-8")
    last = text.rindex("register(declared(")
    end = text.index("\n", last) + 1
    registry.write_text(text[:end] + line + text[end:], encoding="utf-8")

    changed = sorted(
        str(p.relative_to(copy))
        for p in copy.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
        and (not (source / p.relative_to(copy)).exists() or (source / p.relative_to(copy)).read_bytes() != p.read_bytes())
    )  # fmt: skip
    assert changed == ["selector/peers/least_recent.py", "selector/registry.py"]
    added = [
        d
        for d in registry.read_text().splitlines()
        if d not in (source / "selector/registry.py").read_text().splitlines()
    ]
    assert added == [line.strip()]

    # The page's file says `implementation="least_recent:LeastRecent"`; as a built-in it lives in
    # the peers package, so the check imports it under that name too.
    check = _BUILT_IN_CHECK.replace('assert m.implementation == "least_recent:LeastRecent" and ', "assert ")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "bots_rft.selector.peers.least_recent" in run.stdout


def test_the_bots_command_registers_an_installed_packages_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's pyproject.toml entry point, in an installed distribution's metadata: every
    ``bots`` command registers the method before it parses its arguments."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    file, *_ = _snippets()
    (toml,) = re.findall(r"```toml\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    group = tomllib.loads(toml)["project"]["entry-points"]["bots_rft.methods"]
    site = tmp_path / "site"
    info = site / "least_recent-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "least_recent.py").write_text(file, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: least-recent\nVersion: 0.1\n", encoding="utf-8")
    lines = "".join(f"{name} = {value}\n" for name, value in group.items())
    (info / "entry_points.txt").write_text(f"[bots_rft.methods]\n{lines}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    try:
        assert cli_main(["train", "--print-config", "pool=p.parquet", "method=least-recent", "jitter=12"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == "bots train: error: jitter: must lie in [0, 10], got 12.0"
        assert method("least-recent").implementation == "least_recent:LeastRecent"
        assert cli_main(["train", "--print-config", "pool=p.parquet", "method=least-recent", "jitter=2"]) == 0
        assert "jitter: 2.0" in capsys.readouterr().out
        # A broken entry stops the command with one line naming it.
        (info / "entry_points.txt").write_text("[bots_rft.methods]\nbroken = least_recent:NOTHING\n", encoding="utf-8")
        assert cli_main(["demo", "--help"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.splitlines() == [err] and err.startswith("bots: error: bots_rft.methods: broken = ")
    finally:
        if "least-recent" in METHODS:
            unregister("least-recent")
        sys.modules.pop("least_recent", None)


def test_a_parameter_named_like_a_trainer_key_is_refused_by_the_trainer() -> None:
    from bots_rft.train.config import TrainConfig

    steps = Parameter("steps", "int", 3, "Clash: a parameter named like the trainer's steps", 1)
    clash = Method(
        name="clash", label="Clash", summary="", params=(steps, SEED), references="unused",
        implementation="x:Y", builder=lambda *args: None,
    )  # fmt: skip
    register(clash)
    try:
        with pytest.raises(ConfigError, match="^method: the clash method's parameter 'steps' is a trainer key"):
            TrainConfig(pool="p.parquet", method="clash")
    finally:
        unregister("clash")
