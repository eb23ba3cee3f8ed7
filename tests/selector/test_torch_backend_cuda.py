"""The torch backend on a CUDA device: every check of tests/selector/test_torch_backend.py (imported here,
with the ``device`` fixture set to ``"cuda"``), plus CPU ↔ GPU checkpoints and the agreement of
CPU and GPU selection distributions. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from scipy import stats  # noqa: E402

from bots_rft import BOTS  # noqa: E402
from bots_rft.selector.backends.torch import TorchBOTS  # noqa: E402
from test_torch_backend import *  # noqa: E402, F403  (the CPU checks, collected again here)
from test_torch_backend import selection_counts  # noqa: E402


# Overrides the CPU module's fixture for the tests imported from it.
@pytest.fixture(scope="module")  # type: ignore[no-redef]
def device() -> str:
    return "cuda"


def test_a_gpu_checkpoint_loads_on_cpu_and_back(tmp_path: Path) -> None:
    gpu = TorchBOTS(10_000, device="cuda", seed=2)
    rng = np.random.default_rng(0)
    for _ in range(3):
        ids = gpu.select(64)
        gpu.update(ids, rng.integers(0, 5, 64), 4)
    gpu.save(tmp_path / "gpu.ckpt")
    cpu = TorchBOTS.load(tmp_path / "gpu.ckpt", device="cpu")
    core = BOTS.load(tmp_path / "gpu.ckpt")
    np.testing.assert_array_equal(cpu.alpha, gpu.alpha)
    np.testing.assert_array_equal(core.alpha, gpu.alpha)
    cpu.save(tmp_path / "cpu.ckpt")
    back = TorchBOTS.load(tmp_path / "cpu.ckpt", device="cuda")
    np.testing.assert_array_equal(back.alpha, gpu.alpha)
    assert back.num_selections == gpu.num_selections == 3


@pytest.mark.parametrize("kernels", ["torch", "triton"])
def test_gpu_and_cpu_selection_distributions_agree(kernels: str) -> None:
    n, rounds, k = 24, 1500, 4
    rng = np.random.default_rng(21)
    state = BOTS(n, seed=17).state_dict()
    state["alpha"] = rng.choice([0.3, 0.8, 2.0, 6.0, 20.0], n)
    state["beta"] = rng.choice([0.4, 1.0, 3.0, 9.0, 25.0], n)

    # Different seeds on the two devices: independent samples (one seed shares the uniforms).
    def on(device: str, kernels: str, seed: int):  # type: ignore[no-untyped-def]
        def make() -> TorchBOTS:
            sel = TorchBOTS(n, seed=seed, device=device, kernels=kernels)
            sel.load_state_dict(state, params="current")
            return sel

        return make

    table = np.stack(
        [selection_counts(on("cpu", "torch", 17), rounds, k), selection_counts(on("cuda", kernels, 1017), rounds, k)]
    )
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-3, table


def test_the_default_on_cuda_uses_the_fused_kernels() -> None:
    pytest.importorskip("triton")
    sel = BOTS(1000, backend="torch", device="cuda")
    assert sel.kernels == "triton"  # type: ignore[attr-defined]
    assert sel.select(10).shape == (10,)
