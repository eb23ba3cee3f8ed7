"""Fused Triton kernels of the torch backend, for float32 posteriors on a GPU: one pass over the
pool that updates every task (α, β and the references read once, α and β written once) and draws
its Thompson sample from the updated values, writing each task's ranking key for ``torch.topk``;
the same pass over the rolled-out tasks alone, which writes their new values and redraws them;
their new values, computed when the update arrives; and the update alone, for when no selection
follows.

They compute what :mod:`bots_rft.selector.backends._torch_draws` and ``TorchBOTS._update`` compute with
torch operations, from the same Philox words, so their draws are the same exact Beta variates up
to the rounding of the device's ``log``, ``sin`` and ``cos`` (and of fused multiply-adds). With
``TRITON_INTERPRET=1`` set before this module is imported they run on CPU tensors, which is how
the CPU tests check them.

The ranking key of task j is ``bits(|θ_j − p*|) << 32 | j`` (an int64: the float32 distance's bit
pattern orders non-negative floats), so the k smallest keys are the k best tasks in the order
(distance, id) with no tie left to break. An excluded task's key is the largest int64; a task
whose α or β is not finite and > 0 gets ``j − 2^62``, below every valid key, so the caller finds
the first invalid task among the k smallest keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import triton  # type: ignore[import-untyped]
import triton.language as tl  # type: ignore[import-untyped]

from ._torch_draws import BOOST_ATTEMPT, MAX_SHAPE, philox_key

#: Tasks per program of the update alone (memory-bound: large programs stream best).
BLOCK = 1024
#: Tasks per program of the fused pass, and its warps. The draw's rejection loop runs until the
#: program's last lane has accepted, so a small program wastes fewer tries on lanes that are
#: already done: on an H100 at 10^7 tasks the pass took 0.56 ms with 1024 tasks and 4 warps,
#: 0.28 ms with 256 and 4, 0.22 ms with 64 and 2 (same keys, bit for bit: a draw depends only on
#: its task's counters). Under Triton's interpreter (CPU tensors) each program is a round of numpy
#: calls, so there the pass uses BLOCK-task programs: 4x faster in the tests, the same keys.
STEP_BLOCK = 64
STEP_WARPS = 2
#: The key of an excluded task.
EXCLUDED_KEY = 2**63 - 1
#: Invalid task j's key is j + INVALID_BASE (negative).
INVALID_BASE = -(2**62)
_EVIDENCE = {"none": 0, "predicted": 1, "interpolation": 2}


@triton.jit
def _philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on uint32 lanes (the core's generator)."""
    for r in tl.static_range(10):
        hi0 = tl.umulhi(c0, 0xD2511F53)
        lo0 = c0 * 0xD2511F53
        hi1 = tl.umulhi(c2, 0xCD9E8D57)
        lo1 = c2 * 0xCD9E8D57
        rk0 = k0 + ((0x9E3779B9 * r) & 0xFFFFFFFF)
        rk1 = k1 + ((0xBB67AE85 * r) & 0xFFFFFFFF)
        c0, c1, c2, c3 = hi1 ^ c1 ^ rk0, lo1, hi0 ^ c3 ^ rk1, lo0
    return c0, c1, c2, c3


@triton.jit
def _open01(w):
    return ((w >> 8).to(tl.int32).to(tl.float32) + 0.5) * (1.0 / 16777216.0)


@triton.jit
def _gamma_attempt(shape, z, u):
    d = shape - 1.0 / 3.0
    c = 1.0 / tl.sqrt(9.0 * d)
    v = 1.0 + c * z
    v3 = v * v * v
    z2 = z * z
    squeeze = u < 1.0 - 0.0331 * z2 * z2
    log_test = tl.log(u) < 0.5 * z2 + d * (1.0 - v3 + tl.log(tl.maximum(v3, 1.1754943508222875e-38)))
    return d * v3, (v > 0.0) & (squeeze | log_test)


@dataclass(frozen=True)
class KernelUpdate:
    """One update's arguments for the kernels (float32 tensors on the device): α ← decay·α +
    λ·α0 + w·p̃, β ← decay·β + λ·β0 + w·(1 − p̃), no evidence term where p̃ is NaN; p̃ is
    ``predicted``, or clip(μ·strong + (1 − μ)·weak, 0, 1) from ``references`` (weak, strong, μ).
    The rolled-out tasks are the caller's to overwrite."""

    decay: float
    lam: float
    weight: float
    prior_alpha: float | torch.Tensor
    prior_beta: float | torch.Tensor
    predicted: torch.Tensor | None = None
    references: tuple[torch.Tensor, torch.Tensor, float] | None = None

    def chunk(self, lo: int, hi: int) -> KernelUpdate:
        """The same update for tasks ``lo .. hi`` (views of the per-task tensors)."""

        def part(x: float | torch.Tensor) -> float | torch.Tensor:
            return x[lo:hi] if isinstance(x, torch.Tensor) else x

        refs = (
            None
            if self.references is None
            else (self.references[0][lo:hi], self.references[1][lo:hi], self.references[2])
        )
        predicted = None if self.predicted is None else self.predicted[lo:hi]
        return KernelUpdate(
            self.decay, self.lam, self.weight, part(self.prior_alpha), part(self.prior_beta), predicted, refs
        )

    def launch_args(self, like: torch.Tensor) -> tuple[list[object], dict[str, object]]:
        """The kernels' update arguments (pointers, scalars) and constexprs; ``like`` stands in
        for the pointers a kernel does not read."""
        per_a, per_b = isinstance(self.prior_alpha, torch.Tensor), isinstance(self.prior_beta, torch.Tensor)
        evidence = 1 if self.predicted is not None else (2 if self.references is not None else 0)
        weak, strong, mu = self.references if self.references is not None else (like, like, 0.0)
        args: list[object] = [
            self.prior_alpha if per_a else like,
            self.prior_beta if per_b else like,
            self.predicted if self.predicted is not None else like,
            weak,
            strong,
            self.decay,
            0.0 if per_a else self.lam * float(self.prior_alpha),  # type: ignore[arg-type]
            0.0 if per_b else self.lam * float(self.prior_beta),  # type: ignore[arg-type]
            self.lam,
            self.weight,
            mu,
        ]
        return args, {"PER_TASK_A": per_a, "PER_TASK_B": per_b, "EVIDENCE": evidence}


_UPDATE_SCALARS = ["decay", "pull_a", "pull_b", "lam", "weight", "mu"]


@triton.jit
def _updated(
    a,
    b,
    offs,
    live,
    prior_a_ptr,
    prior_b_ptr,
    p_ptr,
    weak_ptr,
    strong_ptr,
    decay,
    pull_a,
    pull_b,
    lam,
    weight,
    mu,
    PER_TASK_A: tl.constexpr,
    PER_TASK_B: tl.constexpr,
    EVIDENCE: tl.constexpr,
):
    """(α, β) of lanes ``offs`` after the update (the core's order of operations)."""
    if PER_TASK_A:
        a = decay * a + lam * tl.load(prior_a_ptr + offs, mask=live, other=1.0)
    else:
        a = decay * a + pull_a
    if PER_TASK_B:
        b = decay * b + lam * tl.load(prior_b_ptr + offs, mask=live, other=1.0)
    else:
        b = decay * b + pull_b
    if EVIDENCE != 0:
        if EVIDENCE == 1:
            p = tl.load(p_ptr + offs, mask=live, other=float("nan"))
        else:
            s = tl.load(strong_ptr + offs, mask=live, other=float("nan"))
            w = tl.load(weak_ptr + offs, mask=live, other=float("nan"))
            p = mu * s + (1.0 - mu) * w
            p = tl.minimum(tl.maximum(p, 0.0), 1.0)
            p = tl.where(s == s, p, s)  # NaN references give NaN (min/max would drop it)
            p = tl.where(w == w, p, w)
        has = p == p
        a = a + tl.where(has, weight * p, 0.0)
        b = b + tl.where(has, weight * (1.0 - p), 0.0)
    return a, b


@triton.jit(do_not_specialize=["n", *_UPDATE_SCALARS])
def _update_kernel(
    alpha_ptr,
    beta_ptr,
    prior_a_ptr,
    prior_b_ptr,
    p_ptr,
    weak_ptr,
    strong_ptr,
    decay,
    pull_a,
    pull_b,
    lam,
    weight,
    mu,
    n,
    PER_TASK_A: tl.constexpr,
    PER_TASK_B: tl.constexpr,
    EVIDENCE: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = offs < n
    a = tl.load(alpha_ptr + offs, mask=live, other=1.0)
    b = tl.load(beta_ptr + offs, mask=live, other=1.0)
    a, b = _updated(
        a, b, offs, live, prior_a_ptr, prior_b_ptr, p_ptr, weak_ptr, strong_ptr,
        decay, pull_a, pull_b, lam, weight, mu, PER_TASK_A, PER_TASK_B, EVIDENCE,
    )  # fmt: skip
    tl.store(alpha_ptr + offs, a, mask=live)
    tl.store(beta_ptr + offs, b, mask=live)


def update(alpha: torch.Tensor, beta: torch.Tensor, step: KernelUpdate) -> None:
    """Applies ``step`` to every task in place (the rolled-out tasks are the caller's)."""
    n = alpha.numel()
    args, flags = step.launch_args(alpha)
    _update_kernel[(triton.cdiv(n, BLOCK),)](
        alpha, beta, *args, n, **flags, BLOCK_SIZE=BLOCK, enable_fp_fusion=False
    )  # no fused multiply-adds, as in the core and torch's own operations


#: Tasks per program of the rolled-out tasks' new values (a batch: a few hundred tasks).
ROLLED_BLOCK = 256
#: Scalars at the head of an update's packed batch (float64): decay, λ·α0, λ·β0, λ.
PACKED_SCALARS = 4


@dataclass(frozen=True)
class RolledValues:
    """The rolled-out tasks of one update on the device: ids (int64, ascending) and their new α
    and β (float32), computed from their values before the update."""

    ids: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor

    def part(self, first: int, last: int) -> RolledValues:
        """Tasks ``first .. last`` of these (positions, not ids)."""
        return RolledValues(self.ids[first:last], self.alpha[first:last], self.beta[first:last])


def pack_batch(
    ids: np.ndarray, successes: np.ndarray, trials: np.ndarray, decay: float, pull_a: float, pull_b: float, lam: float
) -> np.ndarray:
    """One update's batch and scalars in one float64 array, so that one copy moves them to the
    device: decay, λ·α0, λ·β0, λ, the successes, the trials, then the ids' int64 bits."""
    n = ids.size
    packed = np.empty(PACKED_SCALARS + 3 * n, dtype=np.float64)
    packed[:PACKED_SCALARS] = (decay, pull_a, pull_b, lam)
    packed[PACKED_SCALARS : PACKED_SCALARS + n] = successes
    packed[PACKED_SCALARS + n : PACKED_SCALARS + 2 * n] = trials
    packed[PACKED_SCALARS + 2 * n :].view(np.int64)[:] = ids
    return packed


@triton.jit(do_not_specialize=["n"])
def _rolled_kernel(
    alpha_ptr,
    beta_ptr,
    packed_ptr,
    ids_ptr,
    prior_a_ptr,
    prior_b_ptr,
    out_a_ptr,
    out_b_ptr,
    n,
    PER_TASK_A: tl.constexpr,
    PER_TASK_B: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = offs < n
    decay = tl.load(packed_ptr)
    lam = tl.load(packed_ptr + 3)
    j = tl.load(ids_ptr + offs, mask=live, other=0)
    s = tl.load(packed_ptr + 4 + offs, mask=live, other=0.0)
    f = tl.load(packed_ptr + 4 + n + offs, mask=live, other=0.0) - s
    a = tl.load(alpha_ptr + j, mask=live, other=1.0).to(tl.float64)
    b = tl.load(beta_ptr + j, mask=live, other=1.0).to(tl.float64)
    if PER_TASK_A:
        pull_a = lam * tl.load(prior_a_ptr + j, mask=live, other=1.0).to(tl.float64)
    else:
        pull_a = tl.load(packed_ptr + 1)
    if PER_TASK_B:
        pull_b = lam * tl.load(prior_b_ptr + j, mask=live, other=1.0).to(tl.float64)
    else:
        pull_b = tl.load(packed_ptr + 2)
    tl.store(out_a_ptr + offs, (decay * a + pull_a + s).to(tl.float32), mask=live)
    tl.store(out_b_ptr + offs, (decay * b + pull_b + f).to(tl.float32), mask=live)


def rolled_values(
    alpha: torch.Tensor,
    beta: torch.Tensor,
    packed: torch.Tensor,
    prior_alpha: torch.Tensor | None,
    prior_beta: torch.Tensor | None,
) -> RolledValues:
    """The rolled-out tasks' new α and β, in float64 from their values before the update and
    rounded once to float32, as ``TorchBOTS._update`` computes them with torch operations: α ←
    decay·α + λ·α0 + s, β ← decay·β + λ·β0 + (t − s). ``packed``: :func:`pack_batch`'s array on
    the device; ``prior_alpha`` / ``prior_beta``: per-task priors (None: the scalar in
    ``packed``). One launch."""
    n = (packed.numel() - PACKED_SCALARS) // 3
    ids = packed[PACKED_SCALARS + 2 * n :].view(torch.int64)
    out_a = torch.empty(n, dtype=torch.float32, device=alpha.device)
    out_b = torch.empty(n, dtype=torch.float32, device=alpha.device)
    if n > 0:
        _rolled_kernel[(triton.cdiv(n, ROLLED_BLOCK),)](
            alpha,
            beta,
            packed,
            ids,
            prior_alpha if prior_alpha is not None else alpha,
            prior_beta if prior_beta is not None else beta,
            out_a,
            out_b,
            n,
            PER_TASK_A=prior_alpha is not None,
            PER_TASK_B=prior_beta is not None,
            BLOCK_SIZE=ROLLED_BLOCK,
            enable_fp_fusion=False,  # each product rounded, as torch's operations round it
        )
    return RolledValues(ids, out_a, out_b)


@triton.jit(do_not_specialize=["first", "n", "c1", "c2", "k0", "k1", "target", *_UPDATE_SCALARS])
def _step_kernel(
    alpha_ptr,
    beta_ptr,
    excluded_ptr,
    ids_ptr,
    keys_ptr,
    high_ptr,
    write_alpha_ptr,
    write_beta_ptr,
    prior_a_ptr,
    prior_b_ptr,
    p_ptr,
    weak_ptr,
    strong_ptr,
    decay,
    pull_a,
    pull_b,
    lam,
    weight,
    mu,
    first,
    n,
    c1,
    c2,
    k0,
    k1,
    target,
    UPDATE: tl.constexpr,
    PER_TASK_A: tl.constexpr,
    PER_TASK_B: tl.constexpr,
    EVIDENCE: tl.constexpr,
    HAS_IDS: tl.constexpr,
    HAS_EXCLUDED: tl.constexpr,
    HAS_HIGH: tl.constexpr,
    BOOST_SLOT: tl.constexpr,
    SHAPE_CAP: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    live = offs < n
    a = tl.load(alpha_ptr + offs, mask=live, other=1.0)
    b = tl.load(beta_ptr + offs, mask=live, other=1.0)
    if UPDATE:
        a, b = _updated(
            a, b, offs, live, prior_a_ptr, prior_b_ptr, p_ptr, weak_ptr, strong_ptr,
            decay, pull_a, pull_b, lam, weight, mu, PER_TASK_A, PER_TASK_B, EVIDENCE,
        )  # fmt: skip
        tl.store(alpha_ptr + offs, a, mask=live)
        tl.store(beta_ptr + offs, b, mask=live)
    a = a.to(tl.float32)
    b = b.to(tl.float32)
    valid = (a > 0.0) & (a < float("inf")) & (b > 0.0) & (b < float("inf"))
    sa = tl.where(valid, tl.minimum(a, SHAPE_CAP), 1.0)
    sb = tl.where(valid, tl.minimum(b, SHAPE_CAP), 1.0)
    small_a = sa < 1.0
    small_b = sb < 1.0
    ta = tl.where(small_a, sa + 1.0, sa)
    tb = tl.where(small_b, sb + 1.0, sb)
    if HAS_IDS:
        # The rolled-out tasks of a chunk: their new values are written to the posterior and
        # their keys to the chunk's key array, at their place in the chunk.
        j = tl.load(ids_ptr + offs, mask=live, other=0)
        at = j - first
        tl.store(write_alpha_ptr + j, a, mask=live)
        tl.store(write_beta_ptr + j, b, mask=live)
    else:
        j = first + offs.to(tl.int64)
        at = offs.to(tl.int64)
    w_c0 = (j & 0xFFFFFFFF).to(tl.uint32)
    j_hi = (j >> 32).to(tl.uint32)
    u_c1 = tl.zeros([BLOCK_SIZE], dtype=tl.uint32) + c1.to(tl.uint32)
    u_c2 = tl.zeros([BLOCK_SIZE], dtype=tl.uint32) + c2.to(tl.uint32)
    key0 = k0.to(tl.uint32)
    key1 = k1.to(tl.uint32)
    gx = tl.zeros([BLOCK_SIZE], dtype=tl.float32) + 1.0
    gy = tl.zeros([BLOCK_SIZE], dtype=tl.float32) + 1.0
    pending = live
    attempt = tl.zeros([BLOCK_SIZE], dtype=tl.uint32)
    # Every lane tries until accepted; a try redraws both gammas with the next attempt index.
    while tl.max(pending.to(tl.int32), axis=0) > 0:
        c3 = j_hi | (attempt << 16)
        w0, w1, w2, w3 = _philox(w_c0, u_c1, u_c2, c3, key0, key1)
        r = tl.sqrt(-2.0 * tl.log(_open01(w0)))
        angle = _open01(w1) * 6.283185307179586
        x, okx = _gamma_attempt(ta, r * tl.cos(angle), _open01(w2))
        y, oky = _gamma_attempt(tb, r * tl.sin(angle), _open01(w3))
        take = pending & okx & oky
        gx = tl.where(take, x, gx)
        gy = tl.where(take, y, gy)
        pending = pending & ~(okx & oky)
        attempt += 1
    # Formed in float64 and rounded once, as the core and the torch operations form it.
    draw = (gx.to(tl.float64) / (gx.to(tl.float64) + gy.to(tl.float64))).to(tl.float32)
    small = live & (small_a | small_b)
    if tl.max(small.to(tl.int32), axis=0) > 0:
        c3 = j_hi | (BOOST_SLOT << 16)
        u0, u1, _, _ = _philox(w_c0, u_c1, u_c2, c3, key0, key1)
        lx = tl.log(gx) + tl.where(small_a, tl.log(_open01(u0)) / sa, 0.0)
        ly = tl.log(gy) + tl.where(small_b, tl.log(_open01(u1)) / sb, 0.0)
        draw = tl.where(small, 1.0 / (1.0 + tl.exp(ly - lx)), draw)
    distance = tl.abs(draw - target)
    key = (distance.to(tl.int32, bitcast=True).to(tl.int64) << 32) | j
    if HAS_EXCLUDED:
        excluded = tl.load(excluded_ptr + at, mask=live, other=0) != 0
        key = tl.where(excluded, 0x7FFFFFFFFFFFFFFF, key)
    key = tl.where(valid, key, j - 0x4000000000000000)
    tl.store(keys_ptr + at, key, mask=live)
    if HAS_HIGH:
        tl.store(high_ptr + at, (key >> 32).to(tl.int32), mask=live)


def draw_keys(
    alpha: torch.Tensor,
    beta: torch.Tensor,
    first_index: int,
    seed: int,
    counter: int,
    target: float,
    excluded: torch.Tensor | None,
    *,
    update: KernelUpdate | None = None,
    high: torch.Tensor | None = None,
    block: int | None = None,
) -> torch.Tensor:
    """The ranking keys (see the module docstring) of selection ``(seed, counter)`` by Thompson
    draws, for tasks ``first_index ..``. With ``update``, each task is first updated in place and
    drawn from its updated values, in the same pass. With ``high`` (int32, one per task), the
    pass also writes each key's high 32 bits there (the distance's bits), which a 32-bit top-k
    ranks twice as fast as the keys (:func:`smallest_keys`). ``block``: tasks per program
    (default: STEP_BLOCK on a GPU, BLOCK under the interpreter); it changes no key."""
    keys = torch.empty(alpha.numel(), dtype=torch.int64, device=alpha.device)
    _launch_step(alpha, beta, first_index, seed, counter, target, excluded, keys, high, update=update, block=block)
    return keys


def redraw_rolled(
    keys: torch.Tensor,
    high: torch.Tensor,
    alpha: torch.Tensor,
    beta: torch.Tensor,
    rolled: RolledValues,
    first_index: int,
    seed: int,
    counter: int,
    target: float,
    excluded: torch.Tensor | None,
    *,
    block: int | None = None,
) -> None:
    """The rolled-out tasks of the chunk of tasks ``first_index ..`` whose ``keys`` and ``high``
    words a fused pass has just written (``rolled``: those tasks' ids, ascending, and new α, β):
    writes their new values into the pool's ``alpha`` and ``beta`` and their keys into the
    chunk's arrays, in one launch. ``excluded``: the chunk's flags."""
    _launch_step(
        rolled.alpha, rolled.beta, first_index, seed, counter, target, excluded, keys, high,
        ids=rolled.ids, write=(alpha, beta), block=block,
    )  # fmt: skip


def _launch_step(
    alpha: torch.Tensor,
    beta: torch.Tensor,
    first_index: int,
    seed: int,
    counter: int,
    target: float,
    excluded: torch.Tensor | None,
    keys: torch.Tensor,
    high: torch.Tensor | None,
    *,
    update: KernelUpdate | None = None,
    ids: torch.Tensor | None = None,
    write: tuple[torch.Tensor, torch.Tensor] | None = None,
    block: int | None = None,
) -> None:
    n = alpha.numel()
    if block is None:
        block = STEP_BLOCK if alpha.is_cuda else BLOCK
    k0, k1 = philox_key(seed, counter)
    args, flags = (update or KernelUpdate(1.0, 0.0, 0.0, 1.0, 1.0)).launch_args(alpha)
    write_alpha, write_beta = write if write is not None else (alpha, beta)
    _step_kernel[(triton.cdiv(n, block),)](
        alpha,
        beta,
        excluded if excluded is not None else alpha,
        ids if ids is not None else alpha,
        keys,
        high if high is not None else keys,
        write_alpha,
        write_beta,
        *args,
        first_index,
        n,
        counter & 0xFFFFFFFF,
        (counter >> 32) & 0xFFFFFFFF,
        k0,
        k1,
        float(target),
        UPDATE=update is not None,
        **flags,
        HAS_IDS=ids is not None,
        HAS_EXCLUDED=excluded is not None,
        HAS_HIGH=high is not None,
        BOOST_SLOT=BOOST_ATTEMPT,
        SHAPE_CAP=MAX_SHAPE,
        BLOCK_SIZE=block,
        num_warps=STEP_WARPS if block == STEP_BLOCK else 4,  # 4: Triton's default, for BLOCK-task programs
        enable_fp_fusion=False,  # no fused multiply-adds, as in the core and torch's own operations
    )


def smallest_keys(keys: torch.Tensor, high: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` smallest of ``keys``, ascending, given ``high`` = each key's high 32 bits. The
    k-th smallest key's high word is the k-th smallest high word (keys order by their high word
    first), so every one of the k smallest keys is among those whose high word is at most that;
    a 32-bit top-k finds it (half the radix passes of a 64-bit one) and only those candidates,
    usually a few more than k, are ranked as keys. Ties in the high word (equal distances) only
    make the candidate set larger, never the answer different."""
    if k >= keys.numel():
        return torch.sort(keys).values
    bound = torch.topk(high, k, largest=False, sorted=False).values.max()
    candidates = keys[high <= bound]
    return torch.topk(candidates, k, largest=False, sorted=True).values
