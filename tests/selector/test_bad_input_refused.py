"""Bad input is refused the same way everywhere: a typed error (a BotsError) naming the argument,
no state changed. Each case here was seen by a new user: select(0) moving the random stream, an
empty update applying a whole λ step, strings accepted as rewards, torch tensors (bfloat16,
requires_grad) raising raw torch errors, a pool too large for memory raising numpy's error, a
missing checkpoint not being a FileNotFoundError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bots_rft import BOTS
from bots_rft.errors import BotsError, CheckpointError, InvalidArgumentError, InvalidTypeError


def test_select_zero_changes_nothing() -> None:
    a, b = BOTS(100, seed=3), BOTS(100, seed=3)
    assert a.select(0).size == 0
    assert a.num_selections == 0
    np.testing.assert_array_equal(a.select(5), b.select(5))


def test_select_zero_still_checks_its_exclusion() -> None:
    with pytest.raises(InvalidArgumentError, match="^exclude: id 100 is out of range"):
        BOTS(100).select(0, exclude=[100])


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.update([], [], 4),
        lambda s: s.update(np.array([], dtype=np.int64), np.array([]), 4),
        lambda s: s.update_rewards([], np.zeros((0, 4))),
        lambda s: s.update_rewards([], []),
    ],
)
def test_an_empty_update_is_refused_and_changes_nothing(call: object) -> None:
    sel, ref = BOTS(10, seed=1, lam=0.5), BOTS(10, seed=1, lam=0.5)
    with pytest.raises(InvalidArgumentError, match="^task_ids: empty"):
        call(sel)  # type: ignore[operator]
    np.testing.assert_array_equal(sel.alpha, ref.alpha)
    np.testing.assert_array_equal(sel.select(4), ref.select(4))


def test_update_rewards_refuses_strings_as_update_does() -> None:
    sel = BOTS(10)
    with pytest.raises(InvalidTypeError, match="^rewards: must be numeric"):
        sel.update_rewards([0], [["1", "0"]])
    with pytest.raises(InvalidTypeError, match="^rewards: must be numeric"):
        sel.update_rewards([0, 1], [["1", "0"], ["1"]])  # ragged rows
    with pytest.raises(InvalidTypeError, match="^successes: must be numeric"):
        sel.update([0], ["1"], 2)
    assert float(sel.alpha.sum()) == 10.0


def test_torch_tensors_of_any_float_dtype_and_with_grad_are_read() -> None:
    torch = pytest.importorskip("torch")
    for rewards in (
        torch.tensor([[1.0, 0.0, 1.0, 1.0]], dtype=torch.bfloat16),
        torch.tensor([[1.0, 0.0, 1.0, 1.0]], requires_grad=True),
        torch.tensor([[1.0, 0.0, 1.0, 1.0]], dtype=torch.float16),
    ):
        sel, ref = BOTS(10, seed=2, prefetch=False), BOTS(10, seed=2, prefetch=False)
        sel.update_rewards(torch.tensor([3]), rewards)
        ref.update_rewards([3], [[1.0, 0.0, 1.0, 1.0]])
        np.testing.assert_array_equal(sel.alpha, ref.alpha)
    for successes in (
        torch.tensor([3.0], dtype=torch.bfloat16),
        torch.tensor([3.0], requires_grad=True),
    ):
        sel, ref = BOTS(10, seed=2, prefetch=False), BOTS(10, seed=2, prefetch=False)
        sel.update([3], successes, 4)
        ref.update([3], [3.0], 4)
        np.testing.assert_array_equal(sel.alpha, ref.alpha)


def test_a_tensor_of_the_wrong_kind_names_its_argument() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(InvalidTypeError, match=r"^rewards: must be 2-D \[batch, rollouts\], got shape \(4,\)"):
        BOTS(10).update_rewards([0], torch.ones(4, dtype=torch.bfloat16))
    with pytest.raises(InvalidTypeError, match="^task_ids: must be integers"):
        BOTS(10).update(torch.tensor([0.0]), [1], 4)


def test_a_float_id_message_names_the_dtype_once() -> None:
    with pytest.raises(InvalidTypeError) as info:
        BOTS(10).update(np.array([0.0]), [1], 4)
    assert str(info.value).count("float64") == 1, str(info.value)


def test_a_pool_too_large_for_memory_is_a_bots_error() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^num_tasks: 10000000000 tasks"):
        BOTS(10**10)


def test_loading_a_missing_checkpoint_is_also_a_file_not_found_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.bots"
    with pytest.raises(FileNotFoundError) as info:
        BOTS.load(missing)
    assert isinstance(info.value, CheckpointError) and isinstance(info.value, BotsError)
    assert str(info.value) == f"path: no checkpoint at {str(missing)!r}"
    assert info.value.filename == str(missing)
    try:  # the common resume pattern
        sel = BOTS.load(missing)
    except FileNotFoundError:
        sel = BOTS(10)
    assert sel.num_tasks == 10


def test_a_string_as_the_selector_is_a_typed_error() -> None:
    pytest.importorskip("torch")
    from bots_rft.integrations.batches import BOTSBatchSampler
    from bots_rft.integrations.tasks import check_selector

    with pytest.raises(InvalidTypeError, match=r"^selector: must be a selector \(bots_rft\.BOTS or any"):
        check_selector("bots")
    with pytest.raises(InvalidTypeError, match=r"^selector: .*got 'bots'"):
        BOTSBatchSampler("bots", np.arange(4), 2)
    check_selector(BOTS(4))


def test_attach_bots_with_a_string_names_the_selector_argument() -> None:
    pytest.importorskip("trl")
    from bots_rft.integrations.trl import attach_bots

    class Trainer:  # what attach_bots reads before the selector, so the selector is the first mistake
        pass

    with pytest.raises(InvalidTypeError, match="^selector: "):
        attach_bots(Trainer(), "bots")


HIDE_TORCH = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("torch", "torchdata"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
try:
    import bots_rft.integrations.%s
except ModuleNotFoundError as exc:
    print(exc.name)
    print(exc)
"""


@pytest.mark.parametrize("module", ["trl", "trl_async", "batches"])
def test_importing_an_adapter_without_torch_names_the_extra(module: str) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", HIDE_TORCH % module], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    name, message = out.stdout.splitlines()
    assert name == "torch"
    assert message == (
        f"bots_rft.integrations.{module} needs torch, from the [integrations] extra: "
        "pip install 'bots-rft[integrations]'"
    )


HIDE_AND_RUN_VERL = """
import importlib.abc, runpy, sys
hidden = sys.argv[1]
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
sys.argv = ["verl", "--check"]
runpy.run_module("bots_rft.integrations.verl", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("missing", ["transfer_queue", "cachetools"])
def test_verl_entry_point_names_a_missing_package_and_the_install_line(missing: str) -> None:
    import subprocess
    import sys

    pytest.importorskip("verl")
    out = subprocess.run(
        [sys.executable, "-c", HIDE_AND_RUN_VERL, missing], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr  # verl's own import warnings come first; then our one line
    assert out.stderr.splitlines()[-1] == (
        f"python -m bots_rft.integrations.verl: error: bots_rft.integrations.verl needs {missing}, "
        "from the [verl] extra: pip install 'bots-rft[verl]'"
    )
