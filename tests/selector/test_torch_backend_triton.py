"""The torch backend's fused Triton kernels (``kernels="triton"``) against its torch operations
and the Rust core. Without CUDA they run on CPU tensors under Triton's interpreter
(``TRITON_INTERPRET=1``, set here before the kernels are first imported); with CUDA, compiled on
the GPU."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
if importlib.util.find_spec("triton") is None:
    pytest.skip("Triton is not installed", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    # Triton decides between compiling and interpreting when it defines a function, its own
    # library included: the variable must be set before triton is first imported.
    if "triton" in sys.modules:
        pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set", allow_module_level=True)
    os.environ["TRITON_INTERPRET"] = "1"

from bots_rft import BOTS, Interpolation  # noqa: E402
from bots_rft.errors import BotsError  # noqa: E402
from bots_rft.selector.backends import _triton_kernels as kernels  # noqa: E402
from bots_rft.selector.backends._torch_draws import thompson_draws  # noqa: E402
from bots_rft.selector.backends.torch import TorchBOTS  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def references(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    weak = rng.random(n) * 0.6
    strong = np.clip(weak + 0.4 * rng.random(n), 0, 1)
    weak[rng.random(n) < 0.05] = np.nan
    return weak, strong


def test_kernels_resolve() -> None:
    assert TorchBOTS(4, device=DEVICE, kernels="triton").kernels == "triton"
    assert TorchBOTS(4, device=DEVICE, kernels="torch").kernels == "torch"
    assert TorchBOTS(4, device=DEVICE, dtype="float64").kernels == "torch"  # the kernels are float32
    assert TorchBOTS(4, device="cpu").kernels == "torch"  # "auto" never picks the interpreter
    with pytest.raises(BotsError, match="kernels: 'triton' cannot be used here"):
        TorchBOTS(4, device=DEVICE, dtype="float64", kernels="triton")
    with pytest.raises(BotsError, match="kernels"):
        TorchBOTS(4, device=DEVICE, kernels="cuda")


@pytest.mark.parametrize("per_task_prior", [False, True])
def test_fused_update_matches_the_core(per_task_prior: bool) -> None:
    n = 3000
    rng = np.random.default_rng(1)
    weak, strong = references(n, 2)
    prior_a: Any = rng.uniform(0.5, 2, n) if per_task_prior else 1.5
    kw: dict[str, Any] = dict(lam=0.3, rho=0.4, n_rollouts=8.0, prior_alpha=prior_a, seed=3)
    core = BOTS(n, evidence=Interpolation(weak, strong), **kw)
    fused = TorchBOTS(n, evidence=Interpolation(weak, strong), device=DEVICE, kernels="triton", **kw)
    for step in range(6):
        ids = rng.choice(n, 40)
        succ = rng.integers(0, 5, 40)
        predicted = None
        if step == 3:
            predicted = rng.random(n)
            predicted[::5] = np.nan
        core.update(ids, succ, 4, predicted=predicted)
        fused.update(ids, succ, 4, predicted=predicted)
    # Float32 rounding over 6 steps (see tests/selector/test_torch_backend.py's tolerance; weight ρ·n = 3.2).
    eps, steps = 2.0**-24, 6
    np.testing.assert_allclose(fused.alpha, core.alpha, rtol=8 * steps * eps, atol=4 * steps * eps * 3.2)
    np.testing.assert_allclose(fused.beta, core.beta, rtol=8 * steps * eps, atol=4 * steps * eps * 3.2)


def test_fused_draws_are_the_torch_draws() -> None:
    rng = np.random.default_rng(4)
    n = 10_000
    a = torch.tensor(0.3 + 40 * rng.random(n), dtype=torch.float32, device=DEVICE)
    b = torch.tensor(0.3 + 40 * rng.random(n), dtype=torch.float32, device=DEVICE)
    keys = kernels.draw_keys(a, b, 7, 11, 5, 0.4, None).cpu()
    assert torch.equal(keys & 0xFFFFFFFF, torch.arange(7, 7 + n))
    distance = (keys >> 32).to(torch.int32).view(torch.float32)
    reference = (thompson_draws(a, b, torch.arange(7, 7 + n, device=DEVICE), 11, 5) - 0.4).abs().cpu()
    close = (distance - reference).abs() <= 1e-5
    assert close.float().mean().item() > 0.999


@pytest.mark.parametrize("a,b", [(0.3, 0.5), (1.0, 1.0), (2.5, 40.0), (5000.0, 0.3)])
def test_fused_draws_pass_ks(a: float, b: float) -> None:
    n = 10_000
    keys = kernels.draw_keys(
        torch.full((n,), a, device=DEVICE), torch.full((n,), b, device=DEVICE), 0, 3, 9, 0.0, None
    ).cpu()
    x = np.sort((keys >> 32).to(torch.int32).view(torch.float32).numpy().astype(np.float64))  # |θ − 0| = θ
    keep = x < 1 - 1e-6
    f = stats.beta(a, b).cdf(x[keep])
    i = np.flatnonzero(keep)
    d = max(np.max((i + 1) / n - f, initial=0.0), np.max(f - i / n, initial=0.0))
    assert stats.kstwo.sf(d, n) > 1e-3, (a, b)


def test_fused_selection_is_the_torch_selection() -> None:
    n = 4000
    weak, strong = references(n, 3)
    fused = TorchBOTS(n, evidence=Interpolation(weak, strong), seed=2, device=DEVICE, kernels="triton")
    plain = TorchBOTS(n, evidence=Interpolation(weak, strong), seed=2, device=DEVICE, kernels="torch")
    rng = np.random.default_rng(5)
    mask = np.zeros(n, dtype=bool)
    mask[::3] = True
    same = 0
    for step in range(8):
        exclude = (None, mask, np.arange(0, n, 5))[step % 3]
        a, b = fused.select(24, exclude=exclude), plain.select(24, exclude=exclude)
        same += int(np.array_equal(a, b))
        if exclude is not None:
            assert not np.isin(a, np.flatnonzero(exclude) if exclude.dtype == bool else exclude).any()
        succ = rng.integers(0, 5, 24)
        fused.update(a, succ, 4)
        plain.update(a, succ, 4)
    assert same >= 7, same


@pytest.mark.parametrize("key_chunk", [None, 700])
def test_the_fused_pass_equals_the_update_then_the_selection(key_chunk: int | None, monkeypatch: Any) -> None:
    """An update waits for the next selection and runs in its pass; reading the posterior in
    between applies it alone. Both give the same posterior and the same picks, bit for bit (small
    key chunks put rolled-out tasks in every chunk)."""
    import bots_rft.selector.backends.torch as backend

    if key_chunk is not None:
        monkeypatch.setattr(backend, "KEY_CHUNK", key_chunk)
    n = 3000
    weak, strong = references(n, 6)
    rng = np.random.default_rng(7)
    prior = rng.uniform(0.5, 2.0, n)

    def make() -> TorchBOTS:
        return TorchBOTS(
            n, evidence=Interpolation(weak, strong), prior_beta=prior, seed=9, device=DEVICE, kernels="triton"
        )

    fused, stepwise = make(), make()
    exclude = np.arange(0, n, 13)
    for step in range(5):
        ids = rng.integers(0, n, 60)  # repeats included
        successes = rng.integers(0, 5, 60)
        predicted = rng.random(n) if step == 2 else None
        for sel in (fused, stepwise):
            sel.update(ids, successes, 4, predicted=predicted)
        assert fused._pending is not None
        stepwise.flush()  # the update alone
        assert stepwise._pending is None
        np.testing.assert_array_equal(fused.select(40, exclude=exclude), stepwise.select(40, exclude=exclude))
        np.testing.assert_array_equal(fused.alpha, stepwise.alpha)
        np.testing.assert_array_equal(fused.beta, stepwise.beta)


def test_key_chunks_do_not_change_the_selection(monkeypatch: Any) -> None:
    import bots_rft.selector.backends.torch as backend

    def picks() -> list[list[int]]:
        sel = TorchBOTS(3000, seed=8, device=DEVICE, kernels="triton")
        return [sel.select(k, exclude=np.arange(0, 3000, 7)).tolist() for k in (1, 50, 2000)]

    whole = picks()
    monkeypatch.setattr(backend, "KEY_CHUNK", 1000)
    assert picks() == whole


@pytest.mark.parametrize("ties", ["none", "some", "all"])
def test_the_two_stage_top_k_is_the_64_bit_top_k(ties: str) -> None:
    """The k smallest keys found through their high words (a 32-bit top-k, then the candidates
    at or below its bound) are the plain 64-bit top-k's, ties in the high word included: many
    equal distances only make the candidate set larger."""
    rng = np.random.default_rng(11)
    n = 5000
    levels = {"none": 2**31 - 1, "some": 40, "all": 1}[ties]
    high = torch.tensor(rng.integers(0, levels, n), dtype=torch.int64)
    high[rng.integers(0, n, 50)] = 0x7FFFFFFF  # excluded tasks' keys
    high[rng.integers(0, n, 3)] = -(2**30)  # invalid tasks' keys sort first
    keys = (high << 32) | torch.randperm(n, generator=torch.Generator().manual_seed(3)).to(torch.int64)
    for k in (1, 7, 256, n - 1, n):
        expected = torch.topk(keys, k, largest=False, sorted=True).values
        got = kernels.smallest_keys(keys, (keys >> 32).to(torch.int32), k)
        assert torch.equal(got, expected), (ties, k)


def test_the_fused_pass_writes_each_keys_high_word() -> None:
    rng = np.random.default_rng(12)
    n = 3000
    a = torch.tensor(0.3 + 40 * rng.random(n), dtype=torch.float32, device=DEVICE)
    b = torch.tensor(0.3 + 40 * rng.random(n), dtype=torch.float32, device=DEVICE)
    excluded = torch.tensor(rng.random(n) < 0.1, device=DEVICE).view(torch.uint8)
    a[17] = float("nan")  # an invalid task's key is negative
    high = torch.empty(n, dtype=torch.int32, device=DEVICE)
    keys = kernels.draw_keys(a, b, 5, 11, 3, 0.4, excluded, high=high)
    assert torch.equal(high, (keys >> 32).to(torch.int32))
    assert torch.equal(keys, kernels.draw_keys(a, b, 5, 11, 3, 0.4, excluded))  # the keys do not change
    assert int(high[17]) < 0


def test_the_program_size_changes_no_key() -> None:
    """A GPU runs the fused pass in small programs, the interpreter in large ones (it is faster
    there); a draw depends on its task's counters only, so the keys and the updated posterior are
    the same bit for bit, with an update, exclusions, and the rolled-out tasks' redraw."""
    rng = np.random.default_rng(13)
    n, first = 1500, 3
    a0 = torch.tensor(0.3 + 40 * rng.random(first + n), dtype=torch.float32, device=DEVICE)
    b0 = torch.tensor(0.3 + 40 * rng.random(first + n), dtype=torch.float32, device=DEVICE)
    weak = torch.tensor(rng.uniform(0, 0.6, n), dtype=torch.float32, device=DEVICE)
    strong = torch.clamp(weak + 0.3, max=1.0)
    excluded = torch.tensor(rng.random(n) < 0.1, device=DEVICE).view(torch.uint8)
    step = kernels.KernelUpdate(0.99, 0.01, 0.5, 1.0, 1.0, None, (weak, strong, 0.4))
    ids = torch.tensor([4, 99, 1400], device=DEVICE) + first
    rolled = kernels.RolledValues(ids, a0[ids] + 1.5, b0[ids] + 0.5)
    results = []
    for block in (kernels.STEP_BLOCK, kernels.BLOCK):
        a, b = a0.clone(), b0.clone()
        high = torch.empty(n, dtype=torch.int32, device=DEVICE)
        keys = kernels.draw_keys(a[first:], b[first:], first, 11, 5, 0.4, excluded, update=step, high=high, block=block)
        updated = keys.clone()
        kernels.redraw_rolled(keys, high, a, b, rolled, first, 11, 5, 0.4, excluded, block=block)
        results.append((updated, keys, high, a, b))
    for small, large in zip(*results, strict=True):
        assert torch.equal(small, large)


@pytest.mark.parametrize("per_task_prior", [False, True])
def test_the_rolled_out_values_are_the_torch_operations(per_task_prior: bool) -> None:
    """One launch computes what ``TorchBOTS._update`` computes with torch operations for the
    rolled-out tasks (float64 from their float32 values, rounded once), bit for bit."""
    rng = np.random.default_rng(21)
    n = 5000
    alpha = torch.tensor(0.2 + 30 * rng.random(n), dtype=torch.float32, device=DEVICE)
    beta = torch.tensor(0.2 + 30 * rng.random(n), dtype=torch.float32, device=DEVICE)
    prior_a = torch.tensor(rng.uniform(0.5, 2.0, n), dtype=torch.float32, device=DEVICE) if per_task_prior else None
    prior_b = torch.tensor(rng.uniform(0.5, 2.0, n), dtype=torch.float32, device=DEVICE) if per_task_prior else None
    ids = np.sort(rng.choice(n, 700, replace=False))  # several programs, the last one partial
    trials = rng.integers(1, 17, ids.size).astype(np.float64)
    successes = np.floor(trials * rng.random(ids.size)) + 0.25 * (rng.random(ids.size) < 0.1)
    lam, pa, pb = 0.13, 1.7, 0.6
    decay = 1.0 - lam
    packed = kernels.pack_batch(ids, successes, trials, decay, lam * pa, lam * pb, lam)
    got = kernels.rolled_values(alpha, beta, torch.from_numpy(packed).to(DEVICE), prior_a, prior_b)

    at = torch.tensor(ids, device=DEVICE)
    s = torch.tensor(successes, device=DEVICE)
    f = torch.tensor(trials, device=DEVICE) - s
    pull_a = lam * prior_a[at].to(torch.float64) if prior_a is not None else lam * pa
    pull_b = lam * prior_b[at].to(torch.float64) if prior_b is not None else lam * pb
    want_a = (decay * alpha[at].to(torch.float64) + pull_a + s).to(torch.float32)
    want_b = (decay * beta[at].to(torch.float64) + pull_b + f).to(torch.float32)
    assert torch.equal(got.ids, at)
    assert torch.equal(got.alpha, want_a)
    assert torch.equal(got.beta, want_b)
    empty = kernels.pack_batch(ids[:0], successes[:0], trials[:0], decay, 0.0, 0.0, lam)
    assert kernels.rolled_values(alpha, beta, torch.from_numpy(empty).to(DEVICE), None, None).ids.numel() == 0


def test_the_rolled_out_tasks_are_redrawn_in_place() -> None:
    """The redraw writes the rolled-out tasks' new values into the pool and their keys where the
    fused pass wrote theirs: the keys are then those of one pass over the final posterior."""
    rng = np.random.default_rng(22)
    n, lo, hi = 4000, 1000, 3000
    alpha = torch.tensor(0.3 + 20 * rng.random(n), dtype=torch.float32, device=DEVICE)
    beta = torch.tensor(0.3 + 20 * rng.random(n), dtype=torch.float32, device=DEVICE)
    excluded = torch.tensor(rng.random(hi - lo) < 0.2, device=DEVICE).view(torch.uint8)
    ids = torch.tensor(np.sort(rng.choice(np.arange(lo, hi), 300, replace=False)), device=DEVICE)
    rolled = kernels.RolledValues(ids, alpha[ids] + 3.0, beta[ids] * 0.5)
    high = torch.empty(hi - lo, dtype=torch.int32, device=DEVICE)
    keys = kernels.draw_keys(alpha[lo:hi], beta[lo:hi], lo, 5, 2, 0.3, excluded, high=high)
    kernels.redraw_rolled(keys, high, alpha, beta, rolled, lo, 5, 2, 0.3, excluded)
    assert torch.equal(alpha[ids], rolled.alpha) and torch.equal(beta[ids], rolled.beta)
    again = torch.empty(hi - lo, dtype=torch.int32, device=DEVICE)
    assert torch.equal(keys, kernels.draw_keys(alpha[lo:hi], beta[lo:hi], lo, 5, 2, 0.3, excluded, high=again))
    assert torch.equal(high, again)


def test_fused_selection_reports_an_invalid_posterior_as_the_core_does() -> None:
    sel = TorchBOTS(3000, device=DEVICE, kernels="triton")
    sel._alpha[2500] = float("inf")
    sel._beta[1200] = 0.0
    with pytest.raises(BotsError, match=r"^beta: must be finite and > 0, got 0 at index 1200$"):
        sel.select(4)


#: torch operations that launch no device work (views, allocations, a host array made a tensor).
_NO_LAUNCH = {
    "aten.slice.Tensor", "aten.view.default", "aten.view.dtype", "aten.detach.default", "aten.alias.default",
    "aten.empty.memory_format", "aten.empty_strided.default", "aten.new_empty.default", "aten.lift_fresh.default",
    "aten._unsafe_view.default", "aten.select.int", "aten.as_strided.default",
    "aten.is_pinned.default", "aten._pin_memory.default", "aten.pin_memory.default",  # host work
}  # fmt: skip


@pytest.mark.slow
def test_a_step_asks_little_of_the_device(monkeypatch: Any) -> None:
    """On a GPU a step at 10^7 tasks lasts about a millisecond, and each small operation's launch
    costs the host microseconds: an update is one launch (the rolled-out tasks' new values; the
    pass over the pool waits for the selection), a selection two (the fused pass, the rolled-out
    tasks' redraw) and the top-k's five operations. Counted here as the torch operations that
    launch device work, and the Triton launches, the host issues."""
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    issued: list[str] = []

    class Issued(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if str(func) not in _NO_LAUNCH:
                issued.append(str(func).removeprefix("aten.").split(".")[0])
            return func(*args, **(kwargs or {}))

    class Counted:
        def __init__(self, kernel: Any, name: str) -> None:
            self.kernel, self.name = kernel, name

        def __getitem__(self, grid: Any) -> Any:
            def launch(*args: Any, **kwargs: Any) -> Any:
                issued.append(self.name)
                with _disable_current_modes():  # the interpreter's own tensor operations
                    return self.kernel[grid](*args, **kwargs)

            return launch

    for name in ("_step_kernel", "_rolled_kernel", "_update_kernel"):
        monkeypatch.setattr(kernels, name, Counted(getattr(kernels, name), name))
    n = 20_000
    weak, strong = references(n, 23)
    sel = TorchBOTS(n, evidence=Interpolation(weak, strong), seed=2, device=DEVICE, kernels="triton")
    rng = np.random.default_rng(24)
    ids = sel.select(256)
    sel.update(ids, rng.integers(0, 9, 256), 8)  # the references go to the device once, here
    ids = sel.select(256)
    for step in range(2):
        issued.clear()
        with Issued():
            sel.update(ids, rng.integers(0, 9, 256), 8)
        # On a GPU the batch's copy to the device is one more (made from page-locked memory).
        assert issued == (["_to_copy"] if DEVICE == "cuda" else []) + ["_rolled_kernel"], step
        issued.clear()
        with Issued():
            ids = sel.select(256)
        top_k = ["topk", "max", "le", "index", "topk"]
        assert issued == ["_step_kernel", "_step_kernel", *top_k] + (["_to_copy"] if DEVICE == "cuda" else []), step


AHEAD_OF_TIME = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from bots_rft.selector.backends import _triton_kernels as K

target = GPUTarget("cuda", 90, 32)  # an H100
types = {"excluded_ptr": "*u8", "ids_ptr": "*i64", "keys_ptr": "*i64", "high_ptr": "*i32", "packed_ptr": "*fp64", "first": "i64",
         "n": "i32", "c1": "i64", "c2": "i64", "k0": "i64", "k1": "i64"}


def compile(kernel, constants, warps=4):
    signature = {}
    for name in kernel.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        else:
            signature[name] = types.get(name, "*fp32" if name.endswith("_ptr") else "fp32")
    options = {"enable_fp_fusion": False, "num_warps": warps}
    out = triton.compile(ASTSource(kernel, signature, constants), target=target, options=options)
    assert "cubin" in out.asm


# The variants the selector launches: the fused pass (each kind of evidence, with and without
# exclusions), the draw alone, and the redraw of the rolled-out tasks by id; the rolled-out tasks' values.
variants = [(True, 2, False, True), (True, 1, False, False), (True, 0, False, False), (False, 0, True, True),
            (False, 0, False, False)]
for update, evidence, ids, excluded in variants:
    compile(K._step_kernel, {"UPDATE": update, "PER_TASK_A": True, "PER_TASK_B": False, "EVIDENCE": evidence,
                             "HAS_IDS": ids, "HAS_EXCLUDED": excluded, "HAS_HIGH": True, "BOOST_SLOT": 0xFFFE,
                             "SHAPE_CAP": 1e30, "BLOCK_SIZE": K.STEP_BLOCK}, K.STEP_WARPS)
for evidence in (0, 2):
    compile(K._update_kernel, {"PER_TASK_A": False, "PER_TASK_B": True, "EVIDENCE": evidence, "BLOCK_SIZE": K.BLOCK})
for per_task in (False, True):
    compile(K._rolled_kernel, {"PER_TASK_A": per_task, "PER_TASK_B": not per_task, "BLOCK_SIZE": K.ROLLED_BLOCK})
print("compiled")
"""


@pytest.mark.slow
def test_the_kernels_compile_for_a_gpu() -> None:
    """The interpreter is lenient with types; Triton's compiler is not. The kernels compile to
    an H100 (sm_90) binary with Triton's own toolchain, which needs no GPU."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", AHEAD_OF_TIME], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]
