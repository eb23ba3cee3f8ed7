"""The BOTS selector on torch tensors: the posterior, the references and the exclusion masks live
on a torch device (a GPU, or the CPU), and each step's update, Thompson draw and top-B selection
run there.

Same API, same checkpoints and same errors as :class:`~bots_rft.BOTS` (built with
``BOTS(..., backend="torch", device=...)``), with these semantics:

- The update is the core's arithmetic, operation for operation: bit-identical to it with
  ``dtype=torch.float64``, equal to float32 rounding with the default ``dtype=torch.float32``
  (α and β are stored in float32 on the device: 8 bytes per task instead of 16; every value
  returned to the caller is float64).
- Thompson draws are exact Beta variates keyed like the core's: Philox4x32-10 words of
  (seed, selection count, task index) (see :mod:`bots_rft.selector.backends._torch_draws`), so a draw
  does not depend on how the pool is split into launches. For a seed, the same calls give the
  same selections on the same device type with the same torch version. Draws on CPU and on a GPU,
  and the core's, may differ in the last bits (each uses its own logarithm and sine), so a
  selection can differ where two tasks' draws are within rounding of each other; the selection
  distributions are the same.
- Ranking: distance |θ − p*| (θ the float32 draw, or the posterior mean), ties to the lower task
  id; ``tau`` > 0 ranks by the core's Gumbel-top-k key.

Not supported (each raises :class:`~bots_rft.selector.backends.UnsupportedByBackendError` naming it):
the streaming interface (``take``, ``release``, ``in_flight``, a checkpoint with tasks in flight)
and parameters added to BOTS that this backend does not know, unless at their default value.
``threads`` and ``prefetch`` are accepted and have no effect (device work is asynchronous).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
import torch

from ... import _core
from ..._validation import FloatArray, IntArray, _number, as_int, ids_in_pool
from ..._validation import exclusion as _exclusion
from ...checkpoint import read_checkpoint
from ...errors import CheckpointError, InvalidArgumentError, InvalidTypeError, UnsupportedByBackendError
from ...estimators import (
    Estimator,
    ImplicitEvidence,
    Interpolation,
    StepEvidence,
)
from ..bots import (
    BOTS,
    DEFAULT_PRIOR,
    SETTABLE_PARAMS,
    BOTSParams,
    Picks,
)
from ..bots.params import readonly
from ..bots.state import check_state_header, state_params, state_posterior
from ._torch_draws import gumbel_keys, thompson_draws

__all__ = ["TorchBOTS", "CHUNK"]

_BACKEND = "torch"
#: Tasks ranked per launch sequence: bounds the temporaries of a selection (about 100 bytes per
#: task) whatever the pool size. The picks do not depend on it.
CHUNK = 1 << 22
#: Tasks ranked per launch by the fused Thompson kernel, which keeps only an 8-byte key per task.
KEY_CHUNK = 1 << 26
#: The core's Gumbel shift: a softmax key's distance form is |θ − p*| / τ + (GUMBEL_SHIFT − G).
_GUMBEL_SHIFT = 40.0
#: The parameters this backend implements: every parameter BOTS lets you set (a checkpoint's
#: other parameters must be at BOTS's default to load).
_SUPPORTED_SETTABLE = SETTABLE_PARAMS
_KNOWN_PARAMS = frozenset(_SUPPORTED_SETTABLE) | {"seed"}


class TorchBOTS(BOTS):
    """:class:`~bots_rft.BOTS` with the posterior in torch tensors on ``device`` (see the module
    docstring for what differs): what ``BOTS(..., backend="torch")`` builds, a BOTS itself. ``device``: a torch device or its name (None: ``"cuda"`` when
    available, else ``"cpu"``); ``dtype``: ``torch.float32`` (default) or ``torch.float64``, the
    storage of α, β and per-task priors on the device. Other arguments as for BOTS."""

    def __init__(
        self,
        num_tasks: int,
        *,
        backend: str = _BACKEND,
        device: Any = None,
        dtype: Any = None,
        prior_alpha: float | Any = DEFAULT_PRIOR,
        prior_beta: float | Any = DEFAULT_PRIOR,
        evidence: Estimator | ImplicitEvidence | None = None,
        threads: int | None = None,
        prefetch: bool = True,
        kernels: str = "auto",
        **parameters: Any,
    ) -> None:
        # BOTS's parameters (lam, rho, ...: the fields of BOTSParams) arrive in ``parameters``.
        params_given, unknown = BOTSParams.split_names(parameters)
        _refuse_unknown_params(unknown)
        if backend != _BACKEND:
            raise InvalidArgumentError(f"backend: TorchBOTS is the torch backend, got {backend!r}", "backend")
        # num_tasks is checked before the device, then the shared parameters: a call wrong in several
        # places names the same argument on every backend.
        n = as_int(num_tasks, "num_tasks", minimum=1)
        self._device = _as_device(device)
        self._dtype = _as_dtype(dtype)
        self._init_params(
            n,
            BOTSParams(**params_given),
            prior_alpha=prior_alpha,
            prior_beta=prior_beta,
            evidence=evidence,
            threads=threads,
            prefetch=prefetch,
        )
        self._prior_alpha_t = self._on_device(self._prior_alpha)
        self._prior_beta_t = self._on_device(self._prior_beta)
        self._alpha = self._full(self._prior_alpha, self._prior_alpha_t)
        self._beta = self._full(self._prior_beta, self._prior_beta_t)
        # The interpolation estimator's references on the device, for the estimator they belong
        # to (an Interpolation's references never change).
        self._references: tuple[Interpolation, torch.Tensor, torch.Tensor] | None = None
        # With the Triton kernels an update waits here for the next pass over the pool: the next
        # Thompson selection's (update and draw fused), or any read of the posterior.
        self._pending: _PendingUpdate | None = None
        self._kernels = _resolve_kernels(kernels, self._device, self._dtype, n)

    def _on_device(self, p: float | FloatArray) -> torch.Tensor | None:
        return None if not isinstance(p, np.ndarray) else _to_device(p, self._device, self._dtype)

    def _full(self, p: float | FloatArray, on_device: torch.Tensor | None) -> torch.Tensor:
        if on_device is not None:
            return on_device.clone()
        return torch.full((self._num_tasks,), float(cast(float, p)), device=self._device, dtype=self._dtype)

    # ----------------------------------------------------------------------------- views
    @property
    def backend(self) -> str:
        return _BACKEND

    @property
    def device(self) -> torch.device:
        """Where α, β, the references and the masks live."""
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        """The storage type of α and β on the device."""
        return self._dtype

    @property
    def kernels(self) -> str:
        """``"triton"`` (fused Triton kernels for the update and the Thompson draw) or ``"torch"``
        (torch operations)."""
        return self._kernels

    @property
    def alpha(self) -> FloatArray:
        """α of every task: a read-only float64 snapshot copied from the device."""
        with self._lock:
            self._flush_locked()
            return readonly(_host(self._alpha))

    @property
    def beta(self) -> FloatArray:
        """β of every task (see :attr:`alpha`)."""
        with self._lock:
            self._flush_locked()
            return readonly(_host(self._beta))

    @property
    def alpha_tensor(self) -> torch.Tensor:
        """α on the device (a clone: the selector's own tensor is never shared)."""
        with self._lock:
            self._flush_locked()
            return self._alpha.clone()

    @property
    def beta_tensor(self) -> torch.Tensor:
        """β on the device (a clone)."""
        with self._lock:
            self._flush_locked()
            return self._beta.clone()

    def _params_dict(self) -> dict[str, Any]:
        # BOTS's parameters that this backend does not implement are at their default (others are
        # refused), and are written as such: the checkpoint layout is BOTS's.
        return _bots_param_defaults() | super()._params_dict()

    def _params_changed(self) -> None:
        """Nothing is ranked ahead of time here, so nothing is redone when parameters change."""

    def _refuse_unsupported(self, changes: dict[str, Any]) -> None:
        for name in changes:
            if name not in _SUPPORTED_SETTABLE:
                raise UnsupportedByBackendError(name, _BACKEND)

    def __repr__(self) -> str:
        ev = type(self.evidence).__name__ if self._estimator is not None else None
        return (
            f"TorchBOTS(num_tasks={self._num_tasks}, device={self._device}, dtype={self._dtype}, lam={self._lam}, "
            f"rho={self._rho}, target={self._target}, n_rollouts={self._n_rollouts}, thompson={self._thompson}, "
            f"evidence={ev}, seed={self._seed}, selections={self._num_selections}, updates={self._num_updates})"
        )

    def flush(self) -> None:
        """Apply a pending update and wait for the device work queued so far (never needed for
        correctness: every read does the first)."""
        with self._lock:
            self._flush_locked()
            if self._device.type == "cuda":
                torch.cuda.synchronize(self._device)

    def _flush_locked(self) -> None:
        """Apply the pending update, if any, on its own (no selection to fuse it with)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            from . import _triton_kernels

            _triton_kernels.update(self._alpha, self._beta, pending.step)
            pending.overwrite_rolled(self._alpha, self._beta)

    def _posterior_at(self, ids: IntArray) -> tuple[FloatArray, FloatArray]:
        at = _to_device(ids, self._device)
        return _host(self._alpha[at]), _host(self._beta[at])

    def _posterior_arrays(self) -> tuple[FloatArray, FloatArray]:
        return _host(self._alpha), _host(self._beta)

    # ----------------------------------------------------------------------------- selection
    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """See :meth:`BOTS.select`: the ``batch_size`` tasks nearest the target (by Thompson draw
        or posterior mean; by the Gumbel-top-k key with ``tau`` > 0), best first, ties to the lower
        id. ``exclude``: task ids or a boolean mask, as for BOTS; a boolean torch tensor of shape
        ``(num_tasks,)`` on this selector's device is used where it is, with no copy from the
        host (any other tensor is read as ids or a mask through the host)."""
        k = as_int(batch_size, "batch_size", minimum=0)
        excluded, selectable = self._exclusion(exclude)
        if k > selectable:
            raise InvalidArgumentError(
                f"batch_size: {k} exceeds the selectable pool of {selectable} tasks", "batch_size"
            )
        if k == 0:  # as BOTS.select(0): nothing drawn, the random stream stays where it is
            return _no_ids()
        with self._lock:
            chosen = self._rank(k, self._num_selections, excluded)
            self._num_selections += 1
        return chosen

    def _selectable(self, exclude: Any) -> int:
        return self._exclusion(exclude)[1]

    def _ranked_theta(self, ranked: IntArray) -> FloatArray:
        return self._explain(ranked, self._num_selections - 1).theta

    def _exclusion(self, exclude: Any) -> tuple[torch.Tensor | None, int]:
        """``exclude`` as a boolean mask on the device (None: nothing excluded) and how many
        tasks it leaves selectable, checked as BOTS checks it."""
        on_device = self._device_mask(exclude)
        if on_device is not None:
            return on_device, self._num_tasks - int(on_device.sum())
        if isinstance(exclude, torch.Tensor):
            exclude = exclude.cpu().numpy()
        mask, ids = _exclusion(exclude, self._num_tasks)
        excluded = int(np.count_nonzero(mask)) if mask is not None else (0 if ids is None else int(ids.size))
        return self._excluded_on_device(mask, ids), self._num_tasks - excluded

    def _device_mask(self, exclude: Any) -> torch.Tensor | None:
        """``exclude`` itself when it is a boolean mask already on this device, else None."""
        if not (isinstance(exclude, torch.Tensor) and exclude.dtype == torch.bool):
            return None
        where, mine = exclude.device, self._device
        if where.type != mine.type or (mine.index is not None and where.index != mine.index):
            return None
        if tuple(exclude.shape) != (self._num_tasks,):
            raise InvalidTypeError(
                f"exclude: a mask must have shape ({self._num_tasks},), got {tuple(exclude.shape)}", "exclude"
            )
        return exclude.contiguous()

    def _excluded_on_device(self, mask: np.ndarray | None, ids: IntArray | None) -> torch.Tensor | None:
        if mask is not None:
            return _to_device(mask, self._device)
        if ids is None or ids.size == 0:
            return None
        out = torch.zeros(self._num_tasks, dtype=torch.bool, device=self._device)
        out[_to_device(ids, self._device)] = True
        return out

    def _rank(self, k: int, counter: int, excluded: torch.Tensor | None) -> IntArray:
        """The k best selectable tasks in the order (distance, id), chunk by chunk."""
        if self._kernels == "triton" and self._thompson and self._tau == 0.0:
            return self._rank_by_keys(k, counter, excluded)
        self._flush_locked()
        self._check_posterior()
        distances, ids = [], []
        for lo in range(0, self._num_tasks, CHUNK):
            hi = min(lo + CHUNK, self._num_tasks)
            j = torch.arange(lo, hi, device=self._device, dtype=torch.int64)
            d = self._distances(self._alpha[lo:hi], self._beta[lo:hi], j, counter)
            if excluded is not None:
                d = d.masked_fill(excluded[lo:hi], math.inf)
            best = _smallest(d, min(k, hi - lo))
            distances.append(d[best])
            ids.append(best + lo)
        d_all, id_all = torch.cat(distances), torch.cat(ids)
        # Chunks come in id order and each chunk's candidates sort by id first, so a stable sort
        # by distance leaves ties in id order.
        by_id = torch.argsort(id_all, stable=True)
        d_all, id_all = d_all[by_id], id_all[by_id]
        order = _smallest(d_all, k)
        return id_all[order].cpu().numpy().astype(np.int64)

    def _rank_by_keys(self, k: int, counter: int, excluded: torch.Tensor | None) -> IntArray:
        """:meth:`_rank` by the fused kernel's int64 keys (distance bits, id): no ties, so
        ``torch.topk`` alone orders them. A pending update is applied in the same pass: each task
        is updated and drawn from its new values; the rolled-out tasks then get their explicit
        evidence and are drawn again (a draw is a function of the task's posterior and of
        (seed, selection count, task) only, so their keys are what one pass would give)."""
        from . import _triton_kernels

        pending, self._pending = self._pending, None
        mask = None if excluded is None else excluded.view(torch.uint8)
        best = []
        for lo in range(0, self._num_tasks, KEY_CHUNK):
            hi = min(lo + KEY_CHUNK, self._num_tasks)
            a, b = self._alpha[lo:hi], self._beta[lo:hi]
            args = (self._seed, counter, self._target)
            chunk_mask = None if mask is None else mask[lo:hi]
            step = None if pending is None else pending.step.chunk(lo, hi)
            high = torch.empty(hi - lo, dtype=torch.int32, device=self._device)
            keys = _triton_kernels.draw_keys(a, b, lo, *args, chunk_mask, update=step, high=high)
            rolled = None if pending is None else pending.rolled_in(lo, hi)
            if rolled is not None:
                _triton_kernels.redraw_rolled(keys, high, self._alpha, self._beta, rolled, lo, *args, chunk_mask)
            best.append(_triton_kernels.smallest_keys(keys, high, min(k, hi - lo)))
        merged = best[0] if len(best) == 1 else torch.topk(torch.cat(best), k, largest=False, sorted=True).values
        values = merged.cpu().numpy()
        if values[0] < 0:  # an invalid posterior: its key sorts first, by id
            self._raise_invalid(int(values[0]) - _triton_kernels.INVALID_BASE)
        return (values & 0xFFFF_FFFF).astype(np.int64)

    def _distances(self, a: torch.Tensor, b: torch.Tensor, j: torch.Tensor, counter: int) -> torch.Tensor:
        """Each task's ranking key (smaller is better), as the core computes it."""
        theta: torch.Tensor
        if self._thompson:
            draws = thompson_draws(a, b, j, self._seed, counter)
            if self._tau == 0.0:
                return (draws - self._target).abs()  # float32, against p* rounded to float32
            theta = draws.to(torch.float64)
        else:
            a64, b64 = a.to(torch.float64), b.to(torch.float64)
            theta = a64 / (a64 + b64)
            if self._tau == 0.0:
                return (theta - self._target).abs()
        near = (theta - self._target).abs() * (1.0 / self._tau)
        return near + (_GUMBEL_SHIFT - gumbel_keys(j, self._seed, counter))

    def _check_posterior(self) -> None:
        """The core's check before a selection: the first task whose α or β is not finite and > 0
        is an error naming it (α before β)."""
        a, b = self._alpha, self._beta
        ok_a = torch.isfinite(a) & (a > 0)
        ok = ok_a & torch.isfinite(b) & (b > 0)
        if bool(ok.all()):
            return
        self._raise_invalid(int(torch.nonzero(~ok)[0, 0]))

    def _raise_invalid(self, j: int) -> None:
        """The core's error for task j's invalid posterior (α named first)."""
        a, b = float(self._alpha[j]), float(self._beta[j])
        name, value = ("alpha", a) if not (math.isfinite(a) and a > 0) else ("beta", b)
        raise InvalidArgumentError(f"{name}: must be finite and > 0, got {_number(value)} at index {j}", name)

    def explain(self, task_ids: Any) -> Picks:
        """See :meth:`BOTS.explain`: what the last selection drew for ``task_ids`` and why,
        recomputed for those tasks on the device (the draw's float32 value may differ from the
        pass's in the last bit where the device's vectorised and scalar functions differ)."""
        chosen = ids_in_pool(task_ids, self._num_tasks)
        with self._lock:
            return self._explain(chosen, max(self._num_selections - 1, 0))

    def _explain(self, chosen: IntArray, counter: int) -> Picks:
        with self._lock:
            self._flush_locked()
            at = _to_device(chosen, self._device)
            a, b = self._alpha[at], self._beta[at]
            alpha, beta = _host(a), _host(b)
            theta: FloatArray
            if self._thompson:
                draws = thompson_draws(a, b, at, self._seed, counter)
                theta = _host(draws)
                distance = _host((draws - self._target).abs())
            else:
                theta = alpha / (alpha + beta)
                distance = np.abs(theta - self._target)
            predicted = self._estimator.predict_at(chosen) if self._estimator is not None else None
        if predicted is None:
            predicted = np.full(chosen.size, np.nan)
        return Picks(chosen, theta, -distance, alpha, beta, np.asarray(predicted, dtype=np.float64))

    # ----------------------------------------------------------------------------- streaming
    def take(self, k: int, *, draw_size: int = 256, exclude: Any = None) -> IntArray:
        """Not supported by this backend (:meth:`BOTS.take`)."""
        raise UnsupportedByBackendError("take", _BACKEND)

    def release(self, task_ids: Any) -> int:
        """Not supported by this backend (:meth:`BOTS.release`)."""
        raise UnsupportedByBackendError("release", _BACKEND)

    @property
    def in_flight(self) -> IntArray:
        """Not supported by this backend (:attr:`BOTS.in_flight`)."""
        raise UnsupportedByBackendError("in_flight", _BACKEND)

    # ----------------------------------------------------------------------------- updates
    def _take_update(
        self, batch: _core.Batch, step: StepEvidence, estimator: Estimator | None, *, rho: float, lam: float
    ) -> None:
        """Apply the update on the device now (with the Triton kernels: queue it for the next pass
        over the pool)."""
        self._update(batch, self._evidence_on_device(step, estimator), lam=lam, rho=rho)

    def _after_update(self, batch: _core.Batch, update: Any) -> None:
        """Nothing left to do: the update was applied (or queued) by :meth:`_take_update`."""

    def _evidence_on_device(self, step: StepEvidence, estimator: Estimator | None) -> _DeviceEvidence:
        """The step's implicit evidence on the device: a prediction per task (NaN = none), the
        interpolation's references and μ̃ (evaluated inside the update, as the core does), or
        nothing."""
        kw = step.update_kwargs
        if "predicted" in kw:
            predicted = _to_device(np.asarray(kw["predicted"], dtype=np.float64), self._device, self._dtype)
            return _DeviceEvidence(predicted=predicted)
        if "capability" not in kw:
            return _DeviceEvidence()
        weak, strong = self._references_for(estimator, kw["weak"], kw["strong"])
        return _DeviceEvidence(references=(weak, strong, float(kw["capability"])))

    def _references_for(self, estimator: Estimator | None, weak: Any, strong: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The interpolation references on the device in the storage type (float32 values either
        way), moved once per estimator."""
        cached = self._references
        if cached is not None and estimator is not None and cached[0] is estimator:
            return cached[1], cached[2]
        w = _to_device(np.asarray(weak, dtype=np.float32), self._device, self._dtype)
        s = _to_device(np.asarray(strong, dtype=np.float32), self._device, self._dtype)
        if isinstance(estimator, Interpolation):
            self._references = (estimator, w, s)
        return w, s

    def _update(self, batch: _core.Batch, evidence: _DeviceEvidence, *, lam: float, rho: float) -> None:
        """The core's update rule on the device: every task decays toward its prior and takes its
        implicit evidence; then the rolled-out tasks get their explicit evidence instead."""
        a, b = self._alpha, self._beta
        decay = 1.0 - lam
        weight = rho * self._n_rollouts
        if self._kernels == "triton":
            self._pending = self._pending_update(batch, evidence, decay=decay, lam=lam, weight=weight)
            return
        at = _to_device(batch.ids, self._device)
        s = _to_device(batch.successes, self._device)
        f = _to_device(batch.trials, self._device) - s
        # The rolled-out tasks' new values, from their values before this step, in float64.
        rolled_a = (
            decay * a[at].to(torch.float64) + lam * self._prior_at(self._prior_alpha, self._prior_alpha_t, at) + s
        )
        rolled_b = decay * b[at].to(torch.float64) + lam * self._prior_at(self._prior_beta, self._prior_beta_t, at) + f
        a.mul_(decay).add_(self._pull(lam, self._prior_alpha, self._prior_alpha_t))
        b.mul_(decay).add_(self._pull(lam, self._prior_beta, self._prior_beta_t))
        p = evidence.per_task()
        if p is not None:
            # No prediction (NaN) adds exactly 0, as in the core.
            a.add_(torch.nan_to_num(weight * p, nan=0.0))
            b.add_(torch.nan_to_num(weight * (1.0 - p), nan=0.0))
        a[at] = rolled_a.to(self._dtype)
        b[at] = rolled_b.to(self._dtype)

    def _pending_update(
        self, batch: _core.Batch, evidence: _DeviceEvidence, *, decay: float, lam: float, weight: float
    ) -> _PendingUpdate:
        """The update for the next pass over the pool (the next selection's, fused with its
        draw), and the rolled-out tasks' new values computed now, from their values before it.
        What goes to the device is one copy (the batch and scalars packed, not waiting for the
        device) and one launch: on a GPU a step is short enough that each small operation's
        launch counts."""
        from ._triton_kernels import KernelUpdate, pack_batch, rolled_values

        per_a, per_b = self._prior_alpha_t, self._prior_beta_t
        scalar_a = 0.0 if per_a is not None else float(cast(float, self._prior_alpha))
        scalar_b = 0.0 if per_b is not None else float(cast(float, self._prior_beta))
        ids = np.asarray(batch.ids)
        packed = pack_batch(
            ids, np.asarray(batch.successes), np.asarray(batch.trials), decay, lam * scalar_a, lam * scalar_b, lam
        )
        rolled = rolled_values(self._alpha, self._beta, _staged(packed, self._device), per_a, per_b)
        step = KernelUpdate(
            decay,
            lam,
            weight,
            per_a if per_a is not None else scalar_a,
            per_b if per_b is not None else scalar_b,
            evidence.predicted,
            evidence.references,
        )
        return _PendingUpdate(step, rolled, ids)

    @staticmethod
    def _pull(lam: float, scalar: float | FloatArray, on_device: torch.Tensor | None) -> float | torch.Tensor:
        """λ·α0 (or λ·β0): a number for a scalar prior, a device tensor for a per-task one."""
        return lam * float(cast(float, scalar)) if on_device is None else lam * on_device

    @staticmethod
    def _prior_at(scalar: float | FloatArray, on_device: torch.Tensor | None, at: torch.Tensor) -> Any:
        if on_device is None:
            return float(cast(float, scalar))
        return on_device[at].to(torch.float64)

    # ----------------------------------------------------------------------------- state
    #: The per-task priors on the device go with the priors when ``params="current"`` keeps them.
    _KEPT_ON_LOAD = (*_KNOWN_PARAMS, "prior_alpha", "prior_beta", "prior_alpha_t", "prior_beta_t")
    _OPTIONS = ("device", "dtype", "threads", "kernels")

    def _state_parts(self) -> tuple[FloatArray, FloatArray, dict[str, Any] | None]:
        # The checkpoint is BOTS's layout, float64 arrays: it loads into BOTS, and a BOTS state
        # loads here.
        self._flush_locked()
        alpha, beta = self._posterior_arrays()
        return alpha, beta, self._estimator_state()

    def _stream_state(self) -> dict[str, Any] | None:
        return None  # no task stream here (take is not supported)

    def _rebuilt(self, state: dict[str, Any], evidence: Any, options: dict[str, Any]) -> TorchBOTS:
        return TorchBOTS._from_state(state, evidence=evidence, **options)

    def _pickled_options(self) -> dict[str, Any]:
        # The device travels by name.
        options = self._options()
        return options | {"device": str(self._device), "dtype": str(self._dtype).removeprefix("torch.")}

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        evidence: ImplicitEvidence | None = None,
        prefetch: bool = True,
        backend: str = _BACKEND,
        device: Any = None,
        dtype: Any = None,
        kernels: str = "auto",
    ) -> TorchBOTS:
        """Read a checkpoint written by :meth:`save` or :meth:`BOTS.save` onto ``device``
        (``threads`` and ``prefetch`` are accepted and have no effect, as in the constructor)."""
        if backend != _BACKEND:
            raise InvalidArgumentError(f"backend: TorchBOTS is the torch backend, got {backend!r}", "backend")
        state = read_checkpoint(path)
        return cls._from_state(state, evidence=evidence, device=device, dtype=dtype, threads=threads, kernels=kernels)

    @classmethod
    def _from_state(
        cls,
        state: dict[str, Any],
        *,
        threads: int | None = None,
        evidence: Any,
        prefetch: bool = True,
        device: Any = None,
        dtype: Any = None,
        kernels: str = "auto",
    ) -> TorchBOTS:
        check_state_header(state)
        if state.get("stream") is not None:
            raise UnsupportedByBackendError("stream (tasks handed out by take)", _BACKEND)
        try:
            n = int(state["num_tasks"])
            p = dict(state["params"])
            extra = {name: p.pop(name) for name in list(p) if name not in _KNOWN_PARAMS}
            sel = cls(
                n,
                device=device,
                dtype=dtype,
                kernels=kernels,
                threads=threads,
                **state_params(state, p, evidence, n),
                **extra,
            )
            alpha, beta = state_posterior(state, n)
            sel._alpha = _to_device(alpha, sel._device, sel._dtype)
            sel._beta = _to_device(beta, sel._device, sel._dtype)
            for name, t in (("alpha", sel._alpha), ("beta", sel._beta)):
                if not bool((torch.isfinite(t) & (t > 0)).all()):
                    raise CheckpointError(f"{name}: the state holds values outside the range of {sel._dtype}")
            sel._restore_counts(state)
            sel._restore_adaptive(state)
        except (CheckpointError, UnsupportedByBackendError):
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"state: malformed selector state ({type(exc).__name__}: {exc})") from None
        return sel


@dataclass(frozen=True)
class _PendingUpdate:
    """An update waiting for the next pass over the pool: the kernels' arguments, and the new α, β
    of the rolled-out tasks, computed from their values before it."""

    step: Any  # _triton_kernels.KernelUpdate (imported only with Triton)
    rolled: Any  # _triton_kernels.RolledValues
    host_ids: IntArray  # the rolled-out ids on the host, to find a chunk's part without waiting for the device

    def rolled_in(self, lo: int, hi: int) -> Any:
        """The rolled-out tasks among tasks ``lo .. hi`` (None: none)."""
        first, last = np.searchsorted(self.host_ids, [lo, hi])
        return self.rolled.part(int(first), int(last)) if last > first else None

    def overwrite_rolled(self, alpha: torch.Tensor, beta: torch.Tensor) -> None:
        """Write the rolled-out tasks' values."""
        alpha[self.rolled.ids] = self.rolled.alpha
        beta[self.rolled.ids] = self.rolled.beta


class _DeviceEvidence(NamedTuple):
    """One update's implicit evidence on the device (at most one field set)."""

    predicted: torch.Tensor | None = None
    references: tuple[torch.Tensor, torch.Tensor, float] | None = None

    def per_task(self) -> torch.Tensor | None:
        """p̃ of every task (NaN = none), as the core computes it, or None."""
        if self.references is None:
            return self.predicted
        weak, strong, mu = self.references
        return (mu * strong + (1.0 - mu) * weak).clamp(0.0, 1.0)


def _resolve_kernels(kernels: Any, device: torch.device, dtype: torch.dtype, num_tasks: int) -> str:
    """``"auto"``: the fused Triton kernels for a float32 posterior on a CUDA device when Triton
    is installed, else torch operations. ``"triton"`` insists (on CPU tensors only under Triton's
    interpreter, ``TRITON_INTERPRET=1``, which ``"auto"`` never picks); ``"torch"`` never uses
    them."""
    if kernels not in ("auto", "triton", "torch"):
        raise InvalidArgumentError(f"kernels: must be 'auto', 'triton' or 'torch', got {kernels!r}", "kernels")
    if kernels == "torch" or (kernels == "auto" and device.type != "cuda"):
        return "torch"
    usable = importlib.util.find_spec("triton") is not None
    why = "" if usable else "Triton is not installed"
    if dtype != torch.float32:
        why = why or "they work on a float32 posterior (dtype=torch.float32)"
    if num_tasks >= 2**32:
        why = why or "their ranking keys hold task ids below 2^32"
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        why = why or "they run on a CUDA device (or on CPU under TRITON_INTERPRET=1)"
    if not why:
        return "triton"
    if kernels == "triton":
        raise InvalidArgumentError(f"kernels: 'triton' cannot be used here: {why}", "kernels")
    return "torch"


def _smallest(d: torch.Tensor, k: int) -> torch.Tensor:
    """Positions of the k smallest finite values of ``d`` in the order (value, position); fewer
    when fewer are finite. ``torch.topk`` breaks ties arbitrarily, so it only finds the k-th
    value; every position at or below it is then sorted, stably, by value."""
    if k <= 0 or d.numel() == 0:
        return torch.empty(0, dtype=torch.int64, device=d.device)
    kth = torch.topk(d, k, largest=False, sorted=False).values.max()
    candidates = torch.nonzero((d <= kth) & (d < math.inf)).squeeze(1)  # ascending positions
    order = torch.sort(d[candidates], stable=True).indices[:k]
    return candidates[order]


def _staged(host: np.ndarray, device: torch.device) -> torch.Tensor:
    """``host`` (a new array, not written again) on ``device``. On a GPU the copy goes through
    page-locked memory and does not wait: a copy from pageable memory first waits for every
    operation queued on the device."""
    tensor = torch.from_numpy(host)
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def _to_device(arr: np.ndarray, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A device copy of a numpy array (which may be read-only, as the estimators' arrays are)."""
    return torch.tensor(arr, device=device, dtype=dtype)


def _host(t: torch.Tensor) -> FloatArray:
    """A float64 numpy copy of a device tensor."""
    return cast(FloatArray, t.detach().to("cpu", torch.float64).numpy().copy())


def _no_ids() -> IntArray:
    return np.empty(0, dtype=np.int64)


def _as_device(device: Any) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise InvalidTypeError(f"device: must be a torch device or its name, got {type(device).__name__}", "device")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise InvalidArgumentError(f"device: {device!r} is not a torch device ({exc})", "device") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device: {device!r} asked for, but torch sees no CUDA device", "device")
    return dev


_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _as_dtype(dtype: Any) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    if dtype in (torch.float32, torch.float64):
        return cast(torch.dtype, dtype)
    raise InvalidArgumentError(f"dtype: must be torch.float32 or torch.float64, got {dtype!r}", "dtype")


@functools.cache
def _bots_param_defaults() -> dict[str, Any]:
    """Every parameter BOTS records in a checkpoint, at its default."""
    return BOTS(1, prefetch=False)._params_dict()


def _refuse_unknown_params(unknown: dict[str, Any]) -> None:
    """Parameters BOTS has and this backend does not implement are refused unless at BOTS's
    default (so a checkpoint written by a newer BOTS loads when it does not use them); names
    BOTS does not take either are a TypeError, as for any function."""
    defaults = inspect.signature(BOTS.__init__).parameters
    for name, value in unknown.items():
        if name not in defaults:
            raise TypeError(f"TorchBOTS() got an unexpected keyword argument {name!r}")
        default = defaults[name].default
        if default is inspect.Parameter.empty or value != default:
            raise UnsupportedByBackendError(name, _BACKEND)


if TYPE_CHECKING:
    from ..bots import PosteriorSelector

    def _keeps_the_selector_contract(sel: TorchBOTS) -> PosteriorSelector:
        return sel  # mypy checks TorchBOTS against the PosteriorSelector protocol here
