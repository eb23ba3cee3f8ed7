"""The environment check, and the docs' version and seam tables: generated from the adapters'
declarations and the installed packages, compared with docs/integrations.md here, so the docs
name the releases the tests ran against and every framework method an adapter overrides."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from bots_rft.integrations import check as ck
from bots_rft.integrations.gates import installed_version

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"
INSTALLED = [a for a in ck.ADAPTERS if a.installed()]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(len(INSTALLED) < len(ck.ADAPTERS), reason="not every framework is installed"),
]


def doc_block(name: str) -> str:
    """The text between ``<!-- name:start -->`` and ``<!-- name:end -->`` in the docs."""
    found = re.search(rf"<!-- {name}:start[^>]*-->\n(.*?)\n<!-- {name}:end -->", DOC.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/integrations.md has no {name} block"
    return found.group(1)


def test_docs_version_table_is_what_the_tests_ran_against() -> None:
    assert doc_block("versions") == ck.versions_table()


def test_docs_seam_table_lists_every_checked_method() -> None:
    assert doc_block("seams") == ck.seams_table()


def test_the_suite_runs_inside_every_tested_window() -> None:
    """An environment upgraded past a window fails here, until the adapter is retested and its
    window (and so the docs' table) moved."""
    for adapter in ck.ADAPTERS:
        window, _ = adapter.load()
        assert window.contains(installed_version(adapter.framework)), (adapter.name, str(window))


# A version the docs name on purpose although it is not the installed one, and why.
NOT_INSTALLED_ON_PURPOSE = {
    "verl 0.8": "the refused releases",
    "ray 2.51": "the ray skyrl-train 0.3.1 was built against",
}
TRACKED = [
    "trl",
    "transformers",
    "accelerate",
    "datasets",
    "verl",
    "transferqueue",
    "trinity-rft",
    "skyrl-train",
    "areal",
    "ray",
    "hydra-core",
    "tensordict",
    "torchdata",
]
SPELLINGS = {"TransferQueue": "transferqueue", "Trinity-RFT": "trinity-rft", "SkyRL-train": "skyrl-train"}


def test_every_version_the_docs_name_is_the_installed_one() -> None:
    pattern = re.compile(r"\b(" + "|".join(TRACKED + list(SPELLINGS)) + r") (\d+\.\d+(?:\.\d+)?)\b")
    wrong = []
    for doc in (DOC, ROOT / "README.md"):
        for line_no, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for name, version in pattern.findall(line):
                dist = SPELLINGS.get(name, name)
                mention = f"{dist} {version}"
                if mention in NOT_INSTALLED_ON_PURPOSE:
                    continue
                have = installed_version(dist)
                if have != version and not have.startswith(version + "."):
                    wrong.append(f"{doc.name}:{line_no}: {name} {version} (installed: {have})")
    assert wrong == []


def _defined_overrides(cls: type, framework_bases: tuple[type, ...]) -> set[tuple[type, str]]:
    """(framework class, method) for each method of ours (classes from bots_rft in ``cls``'s MRO)
    that a framework class in ``framework_bases`` also defines."""
    ours = [k for k in cls.__mro__ if k.__module__.startswith("bots_rft.")]
    names = {n for k in ours for n, v in vars(k).items() if callable(v) or isinstance(v, (staticmethod, classmethod))}
    found = set()
    for base in framework_bases:
        for name in names:
            owner = next((k for k in base.__mro__ if name in vars(k)), None)
            if owner is not None and owner is not object:
                found.add((base, name))
    return found


# Overrides left out of the gates on purpose: constructors that pass the framework's own
# arguments through unchanged (their parameters are the user's, checked by the framework).
PASS_THROUGH = {"__init__"}


def test_every_framework_method_an_adapter_overrides_is_gated() -> None:
    # isort: off
    from bots_rft.integrations import areal, skyrl, trinity  # skyrl first: it lets skyrl_train import
    import bots_rft.integrations.verl as bv
    from areal.trainer.rl_trainer import PPOTrainer
    from skyrl_train.trainer import RayPPOTrainer
    from trinity.buffer.selector.selector import BaseSelector
    from verl.trainer.ppo.v1 import PPOTrainerColocateAsync, PPOTrainerSeparateAsync, PPOTrainerSync
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

    # isort: on

    def resolved(owner: type, name: str) -> object:
        func = inspect.getattr_static(owner, name)
        return getattr(func, "__func__", func)

    seams = [*bv.VERL_SEAMS, *trinity.trinity_seams(), *skyrl.skyrl_seams(), *areal.areal_seams()]
    gated = {id(resolved(s.owner, s.name)) for s in seams}
    cases = [
        (bv.BOTSPPOTrainerSync, PPOTrainerSync),
        (bv.BOTSPPOTrainerColocateAsync, PPOTrainerColocateAsync),
        (bv.BOTSPPOTrainerSeparateAsync, PPOTrainerSeparateAsync),
        (bv.BOTSReplayBuffer, ReplayBuffer),
        (bv.BOTSReplayBufferAsync, ReplayBufferAsync),
        (bv.BOTSTaskRunner, bv._TaskRunnerV1.__ray_actor_class__),
        (trinity.BOTSSelector, BaseSelector),
        (skyrl.with_bots(RayPPOTrainer), RayPPOTrainer),
        (areal.with_bots(PPOTrainer), PPOTrainer),
        (areal.TaskIdWorkflow, areal.RolloutWorkflow),
    ]
    missing = [
        f"{cls.__name__}.{name} (over {base.__name__})"
        for cls, base in cases
        for base, name in _defined_overrides(cls, (base,))
        if name not in PASS_THROUGH and id(resolved(base, name)) not in gated
    ]
    assert sorted(missing) == []


def test_check_refuses_an_unknown_framework_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        ck.main(["verl", "deepspeed"])
    assert exit_info.value.code == 2
    assert "framework: 'deepspeed' is not one of" in capsys.readouterr().err


def test_a_failed_gate_is_one_line_and_status_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots_rft.integrations import trinity

    monkeypatch.delenv("BOTS_ALLOW_UNTESTED", raising=False)
    changed = ck.Seam(trinity.BaseSelector, "feedback", "(self, indices)", None)
    monkeypatch.setattr(trinity, "trinity_seams", lambda: [changed])
    assert ck.main(["trinity"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("trinity: trinity-rft 0.6.0: BaseSelector.feedback")
    assert "BOTS_ALLOW_UNTESTED=1" in out[0]


def test_skyrl_imports_with_this_ray_once_the_adapter_is_imported() -> None:
    """ray >= 2.52 moved PlacementGroupSchedulingStrategy; skyrl-train 0.3.1 imports it from the
    old place. The adapter puts it back; the docs' snippet imports the adapter first."""
    import subprocess
    import sys

    code = "import bots_rft.integrations.skyrl\nfrom skyrl_train.trainer import RayPPOTrainer\nprint('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip().endswith("ok"), done.stderr[-2000:]
    assert inspect.isclass(ck.ADAPTERS[0].load()[1][0].owner)
