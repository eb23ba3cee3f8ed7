"""Task embeddings on disk: one vector per task, keyed by the pool's task ids (``bots embed``
writes them; an estimator reads the rows of its pool with :func:`embeddings_for`).

The file is a plain safetensors file (no pickle, readable by any safetensors library):

- ``embeddings``: float32 ``[N, d]``, every value finite;
- ``task_id``: int64 ``[N]``, the pool's task ids, unique, when the pool's ids are integers; a
  pool with string ids stores them instead as ``task_id_utf8`` (uint8, the UTF-8 bytes of every id
  one after the other) and ``task_id_offsets`` (int64 ``[N + 1]``, id ``i`` is bytes
  ``offsets[i]:offsets[i+1]``);
- metadata (str -> str): ``format`` (``bots-rft-embeddings``), ``format_version``, ``tasks``,
  ``dim``, ``task_id_kind`` (``int`` or ``str``) and what the writer adds (``bots embed``: the
  model, the pool's fingerprint, the prompt tokens, the system prompt, a PCA's dimensions).

A file made by other tools with just the two tensors (and no metadata) reads as well. Rows are in
no particular order: :func:`embeddings_for` returns them in the order of the ids asked for. Only
numpy and safetensors are needed (no torch).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..checkpoint import fsync_dir
from ..errors import DataError, InvalidArgumentError, InvalidTypeError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "EmbeddingsFile",
    "write_embeddings",
    "read_embeddings",
    "embeddings_for",
    "pca_reduce",
]

#: The ``format`` metadata value of a file :func:`write_embeddings` writes.
FORMAT = "bots-rft-embeddings"
#: The newest format version this code reads (and the one it writes).
FORMAT_VERSION = 1

_RESERVED = ("format", "format_version", "tasks", "dim", "task_id_kind")


@dataclass(frozen=True, eq=False)
class EmbeddingsFile:
    """What :func:`read_embeddings` read: ``task_ids`` (int64, or an object array of str),
    ``matrix`` (float32 ``[N, d]``, row ``i`` is task ``task_ids[i]``), ``metadata`` (str -> str)
    and ``source`` (the path, for messages)."""

    task_ids: npt.NDArray[Any]
    matrix: npt.NDArray[np.float32]
    metadata: dict[str, str] = field(default_factory=dict)
    source: str = "<embeddings>"

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


# ------------------------------------------------------------------------------------ writing
def _ids_array(task_ids: Any, argument: str) -> npt.NDArray[Any]:
    """``task_ids`` as int64 or as an object array of str (as ``TaskPool.ids``)."""
    arr = np.asarray(task_ids)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{argument}: expected a 1-D sequence of task ids, got shape {arr.shape}", argument)
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise InvalidArgumentError(f"{argument}: task id {int(arr.max())} does not fit in int64", argument)
        return arr.astype(np.int64)
    if arr.dtype.kind == "U":
        return arr.astype(object)
    if arr.dtype.kind == "O":
        if all(isinstance(v, str) for v in arr.tolist()):
            return arr
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr.tolist()):
            return arr.astype(np.int64)
    if arr.size == 0:
        return arr.astype(np.int64)
    raise InvalidTypeError(f"{argument}: task ids must be integers or strings, got dtype {arr.dtype}", argument)


def _first_duplicate(ids: npt.NDArray[Any]) -> Any | None:
    """The smallest id that occurs more than once, or None."""
    if ids.size < 2:
        return None
    ordered = np.sort(ids, kind="stable")
    dup = np.flatnonzero(ordered[1:] == ordered[:-1])
    return _py(ordered[dup[0]]) if dup.size else None


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _first_non_finite_row(matrix: npt.NDArray[Any]) -> int | None:
    bad = ~np.isfinite(matrix).all(axis=1)
    rows = np.flatnonzero(bad)
    return int(rows[0]) if rows.size else None


def _encode_str_ids(ids: npt.NDArray[Any]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    encoded = [str(v).encode("utf-8", "surrogatepass") for v in ids.tolist()]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def write_embeddings(
    path: str | os.PathLike[str],
    task_ids: Sequence[Any] | npt.NDArray[Any],
    matrix: npt.ArrayLike,
    *,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``matrix`` (``[N, d]``, stored as float32) with the ``N`` unique ``task_ids`` (its
    row keys) to ``path``, atomically: a temporary file beside it, fsynced, renamed over ``path``,
    the folder fsynced. ``metadata`` (str -> str) is stored beside ``format``, ``format_version``,
    ``tasks``, ``dim`` and ``task_id_kind``, which it may not set. Bad input raises naming the
    argument and value, and writes nothing."""
    ids = _ids_array(task_ids, "task_ids")
    mat = np.asarray(matrix)
    if mat.ndim != 2:
        raise InvalidArgumentError(f"matrix: expected a 2-D [tasks, dim] array, got shape {mat.shape}", "matrix")
    if mat.dtype.kind not in "fiu" or mat.dtype == np.bool_:
        raise InvalidTypeError(f"matrix: expected real numbers, got dtype {mat.dtype}", "matrix")
    if mat.shape[0] < 1 or mat.shape[1] < 1:
        raise InvalidArgumentError(f"matrix: needs at least one row and one column, got shape {mat.shape}", "matrix")
    if mat.shape[0] != ids.shape[0]:
        raise InvalidArgumentError(
            f"task_ids: {ids.shape[0]} ids for a matrix of {mat.shape[0]} rows; expected one id per row", "task_ids"
        )
    with np.errstate(over="ignore"):  # a value beyond float32's range becomes inf: refused below
        mat32 = np.ascontiguousarray(mat, dtype=np.float32)
    row = _first_non_finite_row(mat32)
    if row is not None:
        raise InvalidArgumentError(
            f"matrix: row {row} (task id {_py(ids[row])!r}) holds a non-finite value in float32", "matrix"
        )
    dup = _first_duplicate(ids)
    if dup is not None:
        raise InvalidArgumentError(f"task_ids: task id {dup!r} occurs more than once", "task_ids")
    meta: dict[str, str] = {}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidTypeError(
                f"metadata: keys and values must be str, got {key!r}: {type(value).__name__}", "metadata"
            )
        if key in _RESERVED:
            raise InvalidArgumentError(f"metadata: key {key!r} is set by the writer; choose another name", "metadata")
        meta[key] = value
    kind = "str" if ids.dtype == object else "int"
    meta.update(
        format=FORMAT,
        format_version=str(FORMAT_VERSION),
        tasks=str(mat32.shape[0]),
        dim=str(mat32.shape[1]),
        task_id_kind=kind,
    )
    tensors: dict[str, npt.NDArray[Any]] = {"embeddings": mat32}
    if kind == "int":
        tensors["task_id"] = np.ascontiguousarray(ids, dtype=np.int64)
    else:
        tensors["task_id_utf8"], tensors["task_id_offsets"] = _encode_str_ids(ids)
    _atomic_save(Path(path), tensors, meta)


def _atomic_save(target: Path, tensors: dict[str, npt.NDArray[Any]], metadata: dict[str, str]) -> None:
    import safetensors.numpy

    target.parent.mkdir(parents=True, exist_ok=True)
    # A new file with the mode the umask gives (0644 under 022), as open(target, "w") would:
    # safetensors writes through a 0600 temporary file of its own, so the mode is put back.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, flags, 0o666))
            break
        except FileExistsError:
            continue
    try:
        mode = os.stat(tmp).st_mode & 0o777
        safetensors.numpy.save_file(tensors, str(tmp), metadata=metadata)
        if os.stat(tmp).st_mode & 0o777 != mode:
            os.chmod(tmp, mode)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


# ------------------------------------------------------------------------------------ reading
def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def read_embeddings(path: str | os.PathLike[str], *, argument: str = "embeddings") -> EmbeddingsFile:
    """The embeddings file at ``path``, checked: a missing file, one that is not safetensors, of
    another format or a newer version, without its tensors, with a tensor of the wrong dtype or
    shape, a non-finite value (the row is named) or a repeated task id (named) is a
    :class:`~bots_rft.errors.DataError` whose one-line message starts with ``argument`` and names
    the file."""
    from safetensors import safe_open

    p = Path(path)
    where = f"{argument}: {str(p)!r}"
    if not p.exists():
        raise DataError(f"{where} does not exist")
    if p.is_dir():
        raise DataError(f"{where} is a directory, expected an embeddings file")
    try:
        handle = safe_open(str(p), framework="np")
    except OSError as exc:
        raise DataError(f"{where} cannot be read ({exc.strerror or _one_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error type
        raise DataError(f"{where} is not a safetensors file ({_one_line(exc)})") from None
    with handle as f:
        metadata = dict(f.metadata() or {})
        fmt = metadata.get("format")
        if fmt is not None and fmt != FORMAT:
            raise DataError(f"{where} is not an embeddings file (format {fmt!r:.60}, expected {FORMAT!r})")
        version = metadata.get("format_version")
        if version is not None:
            if not version.isdigit():
                raise DataError(f"{where} has a corrupt format_version {version!r:.40}")
            if int(version) > FORMAT_VERSION:
                raise DataError(
                    f"{where} is format version {version}, newer than this bots-rft reads ({FORMAT_VERSION}); "
                    "upgrade bots-rft"
                )
        keys = set(f.keys())
        if "task_id" in keys:
            id_tensors = ["task_id"]
        elif {"task_id_utf8", "task_id_offsets"} <= keys:
            id_tensors = ["task_id_utf8", "task_id_offsets"]
        else:
            id_tensors = ["task_id"]
        missing = [name for name in ("embeddings", *id_tensors) if name not in keys]
        if missing:
            raise DataError(f"{where} has no tensor {missing[0]!r} (it has {sorted(keys)})")

        def spec(name: str) -> tuple[str, list[int]]:
            s = f.get_slice(name)
            return str(s.get_dtype()), list(s.get_shape())

        expected = {
            "embeddings": ("F32", 2),
            "task_id": ("I64", 1),
            "task_id_utf8": ("U8", 1),
            "task_id_offsets": ("I64", 1),
        }
        shapes = {}
        for name in ("embeddings", *id_tensors):
            dtype, shape = spec(name)
            want_dtype, want_ndim = expected[name]
            if dtype != want_dtype:
                raise DataError(f"{where}: tensor {name!r} has dtype {dtype}, expected {want_dtype}")
            if len(shape) != want_ndim:
                raise DataError(f"{where}: tensor {name!r} has shape {shape}, expected {want_ndim} dimension(s)")
            shapes[name] = shape
        n, d = shapes["embeddings"]
        if n < 1 or d < 1:
            raise DataError(
                f"{where}: tensor 'embeddings' has shape {shapes['embeddings']}, expected [tasks >= 1, dim >= 1]"
            )
        n_ids = shapes["task_id"][0] if "task_id" in shapes else shapes["task_id_offsets"][0] - 1
        if n_ids != n:
            raise DataError(f"{where}: {n_ids} task ids for {n} embeddings; expected one id per row")
        matrix = f.get_tensor("embeddings")
        if "task_id" in shapes:
            ids: npt.NDArray[Any] = f.get_tensor("task_id")
        else:
            ids = _decode_str_ids(f.get_tensor("task_id_utf8"), f.get_tensor("task_id_offsets"), where)
    row = _first_non_finite_row(matrix)
    if row is not None:
        raise DataError(f"{where}: row {row} (task id {_py(ids[row])!r}) of 'embeddings' holds a non-finite value")
    dup = _first_duplicate(ids)
    if dup is not None:
        raise DataError(f"{where}: task id {dup!r} occurs more than once")
    return EmbeddingsFile(task_ids=ids, matrix=matrix, metadata=metadata, source=str(p))


def _decode_str_ids(data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], where: str) -> npt.NDArray[Any]:
    if offsets.size < 1 or offsets[0] != 0 or offsets[-1] != data.size or np.any(np.diff(offsets) < 0):
        raise DataError(f"{where}: tensor 'task_id_offsets' does not split 'task_id_utf8' ({data.size} bytes)")
    raw = data.tobytes()
    out = np.empty(offsets.size - 1, dtype=object)
    try:
        for i in range(out.size):
            out[i] = raw[offsets[i] : offsets[i + 1]].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise DataError(f"{where}: task id {i} in 'task_id_utf8' is not UTF-8") from None
    return out


# ------------------------------------------------------------------------------------ lookup
def embeddings_for(
    path_or_file: str | os.PathLike[str] | EmbeddingsFile,
    task_ids: Sequence[Any] | npt.NDArray[Any],
    *,
    argument: str = "embeddings",
) -> npt.NDArray[np.float32]:
    """float32 ``[len(task_ids), d]``: row ``i`` is the embedding of ``task_ids[i]`` (pass
    ``pool.ids`` for the pool's row order). The file may hold more tasks than asked for; a task id
    it lacks is a :class:`~bots_rft.errors.DataError` naming the first one missing and how many
    are. ``argument`` starts every message (the option or config key the path came from)."""
    if isinstance(path_or_file, EmbeddingsFile):
        emb = path_or_file
    else:
        emb = read_embeddings(path_or_file, argument=argument)
    query = _ids_array(task_ids, "task_ids")
    where = f"{argument}: {emb.source!r}"
    have_str, want_str = emb.task_ids.dtype == object, query.dtype == object
    if query.size and have_str != want_str:
        kinds = {True: "strings", False: "integers"}
        raise DataError(
            f"{where} keys its tasks by {kinds[have_str]}, but the task ids asked for are {kinds[want_str]}"
        )
    if want_str:
        index = {v: i for i, v in enumerate(emb.task_ids.tolist())}
        rows = np.fromiter((index.get(v, -1) for v in query.tolist()), dtype=np.int64, count=query.size)
        found = rows >= 0
    else:
        order = np.argsort(emb.task_ids, kind="stable")
        ordered = emb.task_ids[order]
        if ordered.size:
            pos = np.minimum(np.searchsorted(ordered, query), ordered.size - 1)
            found = ordered[pos] == query
            rows = order[pos]
        else:
            found = np.zeros(query.size, dtype=bool)
            rows = np.zeros(query.size, dtype=np.int64)
    if not np.all(found):
        missing = query[~found]
        raise DataError(
            f"{where} has no embedding for task id {_py(missing[0])!r} "
            f"({missing.size} of {query.size} task ids missing); embed this pool with bots embed"
        )
    return np.ascontiguousarray(emb.matrix[rows], dtype=np.float32)


# ------------------------------------------------------------------------------------ PCA
def pca_reduce(matrix: npt.ArrayLike, dim: int) -> tuple[npt.NDArray[np.float32], float]:
    """``matrix`` ``[N, d]`` projected on its ``dim`` principal components (float32 ``[N, dim]``)
    and the share of the variance they keep. Centred on the column means; the covariance is
    computed in float64 and diagonalised with ``numpy.linalg.eigh``; each component's sign makes
    its largest-magnitude loading positive (ties: the first), so the result is deterministic."""
    x = np.asarray(matrix, dtype=np.float64)
    if x.ndim != 2:
        raise InvalidArgumentError(f"matrix: expected a 2-D [tasks, dim] array, got shape {x.shape}", "matrix")
    n, d = x.shape
    if not (isinstance(dim, (int, np.integer)) and 1 <= dim <= d):
        raise InvalidArgumentError(f"dim: must lie in [1, {d}] (the matrix's columns), got {dim!r}", "dim")
    centred = x - x.mean(axis=0)
    cov = centred.T @ centred / max(n - 1, 1)
    values, vectors = np.linalg.eigh(cov)  # ascending
    top = np.arange(d - 1, d - 1 - dim, -1)
    components = vectors[:, top]
    lead = np.argmax(np.abs(components), axis=0)
    signs = np.sign(components[lead, np.arange(dim)])
    signs[signs == 0] = 1.0
    components = components * signs
    total = float(np.clip(values, 0, None).sum())
    kept = float(np.clip(values[top], 0, None).sum()) / total if total > 0 else 1.0
    return np.ascontiguousarray(centred @ components, dtype=np.float32), kept
