"""Input coercion shared by the public API: turn user input into contiguous numpy arrays of the
dtype the core expects, or raise a typed error naming the argument and the value."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import InvalidArgumentError, InvalidTypeError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def host_array(value: Any) -> Any:
    """A torch tensor as numpy can read it (any other value unchanged): off the graph and the
    device, and in float32 when its dtype has no numpy equivalent (bfloat16), so every argument
    that takes an array takes the tensors a trainer holds. Found by duck typing: the core never
    imports torch."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    return value


def describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_ids(value: Any, name: str) -> IntArray:
    """A 1-D int64 array of task ids (range is checked by the core)."""
    value = host_array(value)
    arr = np.asarray(value)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # np.asarray([]) is float64
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        dtype = "" if isinstance(value, np.ndarray) else f" (dtype {arr.dtype})"  # an array's names it
        raise InvalidTypeError(f"{name}: must be integers, got {describe(value)}{dtype}", name)
    if arr.ndim != 1:
        raise InvalidTypeError(f"{name}: must be 1-D, got shape {arr.shape}", name)
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise InvalidArgumentError(f"{name}: {int(arr.max())} is out of range", name)
    return np.ascontiguousarray(arr, dtype=np.int64)


def as_floats(value: Any, name: str, length: int | None = None, ndim: int = 1) -> FloatArray:
    """A contiguous float64 array of the given rank (and length along axis 0)."""
    value = host_array(value)
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested sequences
        raise InvalidTypeError(f"{name}: must be a numeric array, got {describe(value)} ({exc})", name) from None
    if arr.dtype.kind not in "biuf":
        raise InvalidTypeError(f"{name}: must be numeric, got {describe(value)}", name)
    if arr.ndim != ndim:
        raise InvalidTypeError(f"{name}: must be {ndim}-D, got shape {arr.shape}", name)
    if length is not None and arr.shape[0] != length:
        raise InvalidTypeError(f"{name}: has length {arr.shape[0]}, expected {length}", name)
    return np.ascontiguousarray(arr, dtype=np.float64)


def as_real(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name}: must be a real number, got {describe(value)}", name)
    return float(value)


def as_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    if type(value) is int:  # the common case, without the ABC check (select() calls this first)
        v = value
    elif isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name}: must be an integer, got {describe(value)}", name)
    else:
        v = int(value)
    if minimum is not None and v < minimum:
        raise InvalidArgumentError(f"{name}: must be >= {minimum}, got {v}", name)
    if maximum is not None and v > maximum:
        raise InvalidArgumentError(f"{name}: must be <= {maximum}, got {v}", name)
    return v


def pool_too_large(num_tasks: int) -> InvalidArgumentError:
    """The error for a pool whose posterior (α and β, float64) does not fit in memory."""
    gib = 16 * num_tasks / 2**30
    return InvalidArgumentError(
        f"num_tasks: {num_tasks} tasks need {gib:,.1f} GiB for the posterior (alpha and beta, float64) and this "
        "machine could not allocate it; use a smaller pool or the sharded selector (bots_rft.selector.backends.sharded)",
        "num_tasks",
    )


def as_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidTypeError(f"{name}: must be a bool, got {describe(value)}", name)
    return bool(value)


def positive(value: Any, name: str) -> float:
    v = as_real(value, name)
    if not (math.isfinite(v) and v > 0.0):
        raise InvalidArgumentError(f"{name}: must be finite and > 0, got {v}", name)
    return v


def rates_or_nan(value: Any, name: str, length: int | None = None) -> FloatArray:
    """Per-task rates in [0, 1], NaN meaning unknown (copied, so callers cannot alias state)."""
    arr = np.array(as_floats(value, name, length), dtype=np.float64, copy=True)
    bad = ~(np.isnan(arr) | ((arr >= 0.0) & (arr <= 1.0)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidArgumentError(f"{name}: must be in [0, 1] or NaN, got {arr[i]} at index {i}", name)
    return arr


def prior(value: Any, name: str, num_tasks: int) -> float | FloatArray:
    """A prior parameter: a positive scalar or one positive value per task."""
    if np.ndim(value) == 0:
        return positive(value.item() if isinstance(value, np.generic) else value, name)
    arr = np.array(as_floats(value, name, num_tasks), dtype=np.float64, copy=True)
    bad = ~(np.isfinite(arr) & (arr > 0.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidArgumentError(f"{name}: must be finite and > 0, got {arr[i]} at index {i}", name)
    return arr


# ---------------------------------------------------------------------------------------------
# Selector inputs: the checks every selector applies to select / update, with the same error
# class and message for the same mistake (BOTS leaves the update's checks to the core, which
# reports them in these words).
# ---------------------------------------------------------------------------------------------


def exclusion(exclude: Any, n: int) -> tuple[npt.NDArray[np.bool_] | None, IntArray | None]:
    """(mask, sorted distinct ids) from ``exclude``, at most one of them set.

    Only a boolean array (or a list of bools) is a mask; integers are task ids. An integer
    sequence of length ``n`` holding only 0 and 1, some repeated, is refused: as ids it would
    exclude just tasks 0 and 1, so it is almost surely a mask with the wrong dtype.
    """
    if exclude is None:
        return None, None
    arr = np.asarray(exclude)
    if arr.dtype == np.bool_:
        if arr.shape != (n,):
            raise InvalidTypeError(f"exclude: a mask must have shape ({n},), got {arr.shape}", "exclude")
        return np.ascontiguousarray(arr), None
    ids = as_ids(exclude, "exclude")
    if ids.size == n and np.all((ids == 0) | (ids == 1)) and np.unique(ids).size < n:
        raise InvalidTypeError(
            f"exclude: an integer array of {n} zeros and ones (dtype {arr.dtype}) is ambiguous: as task ids it "
            "excludes only tasks 0 and 1; pass a boolean mask (np.asarray(mask, dtype=bool)) or distinct task ids",
            "exclude",
        )
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        raise InvalidArgumentError(f"exclude: id {bad} is out of range [0, {n})", "exclude")
    return None, np.unique(ids)


def selectable(exclude: Any, n: int) -> npt.NDArray[np.bool_] | None:
    """The tasks ``exclude`` leaves selectable, as a bool mask; None when it excludes nothing."""
    mask, ids = exclusion(exclude, n)
    if mask is not None:
        return ~mask
    if ids is None or ids.size == 0:
        return None
    allowed = np.ones(n, dtype=bool)
    allowed[ids] = False
    return allowed


def batch_size(value: Any, available: int) -> int:
    """A batch of at least one task, at most the ``available`` selectable ones."""
    b = as_int(value, "batch_size", minimum=1)
    if b > available:
        raise InvalidArgumentError(f"batch_size: {b} exceeds the selectable pool of {available} tasks", "batch_size")
    return b


def ids_in_pool(value: Any, n: int, name: str = "task_ids") -> IntArray:
    """Task ids of a pool of ``n`` tasks: int64, each in [0, n)."""
    ids = as_ids(value, name)
    out = (ids < 0) | (ids >= n)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise InvalidArgumentError(f"{name}: {ids[i]} at position {i} is out of range [0, {n})", name)
    return ids


def feedback(task_ids: Any, successes: Any, trials: Any, n: int) -> tuple[IntArray, FloatArray, FloatArray]:
    """(ids, successes, trials) of one update, checked as the core checks them: ids in [0, n),
    one success count per id, trials a scalar or one per id, 0 <= successes <= trials."""
    ids = ids_in_pool(task_ids, n)
    succ = as_floats(successes, "successes")
    if succ.shape[0] != ids.size:
        raise InvalidTypeError(
            f"successes: has length {succ.shape[0]}, expected {ids.size} (one per task id)", "successes"
        )
    if np.ndim(trials) == 0:
        value = trials.item() if isinstance(trials, (np.ndarray, np.generic)) else trials
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise InvalidTypeError(f"trials: must be a number or an array, got {describe(value)}", "trials")
        tri = np.full(ids.size, float(value))
    else:
        tri = as_floats(trials, "trials")
        if tri.shape[0] == 1:  # one value for every id, as a scalar
            tri = np.full(ids.size, tri[0])
        if tri.shape[0] != ids.size:
            raise InvalidTypeError(
                f"trials: has length {tri.shape[0]}, expected 1 or {ids.size} (one per task id)", "trials"
            )
    bad = ~(np.isfinite(tri) & (tri > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidArgumentError(f"trials: must be finite and > 0, got {_number(tri[i])} at position {i}", "trials")
    bad = ~(np.isfinite(succ) & (succ >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidArgumentError(
            f"successes: must be finite and >= 0, got {_number(succ[i])} at position {i}", "successes"
        )
    over = succ > tri
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise InvalidArgumentError(
            f"successes: {_number(succ[i])} at position {i} exceeds its trials {_number(tri[i])}", "successes"
        )
    return ids, succ, tri


def _number(x: float) -> str:
    """A number as the core prints it: NaN, inf, and integers without a decimal point."""
    if math.isnan(x):
        return "NaN"
    return f"{x:g}" if math.isfinite(x) and x == int(x) else repr(float(x))
