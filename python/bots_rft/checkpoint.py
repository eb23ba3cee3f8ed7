"""The checkpoint codec: every checkpoint bots-rft writes (selector files, the trainer's
checkpoint parts, states passed between processes as bytes) is one safetensors file.

Layout (a plain safetensors file, readable by any safetensors library)::

    u64 (little-endian)  header length N
    N bytes              JSON header: each stored array's dtype, shape and byte range, and
                         "__metadata__": {"bots-rft": <JSON string of
                             {"format": "bots-rft", "version": 2, "sha256": <checksum, hex>,
                              "tree": <the state, arrays replaced by references>}>}
    ...                  the arrays' bytes

The tree is the state as JSON: dicts, lists and scalars as themselves, a tuple as
``{"__tuple__": [...]}``, a dict with keys that are not plain strings as ``{"__dict__": [[k, v], ...]}``,
a numpy array as ``{"__array__": name}`` and a torch tensor as ``{"__tensor__": name}``, ``name``
being the array's entry in the file (its path in the state, e.g. ``evidence.weak``). Arrays of
dtypes safetensors has no name for (strings, big-endian or complex numbers) are stored as their
raw bytes, with ``"dtype"`` and ``"shape"`` in the reference.

Checksum: ``sha256`` is the SHA-256 of the whole file as written, with those 64 hex digits
themselves read as ``0``; it is written into the header in place once the file is laid out (same
length, nothing moves). A reader checks it before it trusts anything the header says, so a
flipped, missing or added byte anywhere is refused as corrupt (or truncated) before any array is
read. Writing is atomic: the file is written under a temporary name in the target's folder,
fsynced, renamed over the target, and the folder fsynced, so a crash leaves either the old file or
the new one, never a part.

Checkpoints of the legacy format (``BOTSRFT`` binary, format version 1) are still read (see
:mod:`bots_rft._legacy_checkpoint`); nothing writes them. Nothing here is a pickle: loading a
checkpoint cannot run code.

Torch is needed only for a state that holds torch tensors (the trainer's); selector states are
numpy arrays and plain values, stored with ``safetensors.numpy``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import _legacy_checkpoint as legacy
from .errors import CheckpointError, CheckpointNotFoundError

__all__ = [
    "FORMAT",
    "VERSION",
    "to_bytes",
    "from_bytes",
    "save_state",
    "load_state",
    "write_checkpoint",
    "read_checkpoint",
    "save_tree_file",
    "load_tree_file",
    "is_checkpoint_file",
    "atomic_write_bytes",
]

#: The ``format`` entry of a bots-rft file's safetensors metadata.
FORMAT = "bots-rft"
#: Format version written: 2, safetensors. Version 1, the BOTSRFT binary, is read and never written.
VERSION = 2

_TENSOR, _ARRAY, _TUPLE, _DICT = "__tensor__", "__array__", "__tuple__", "__dict__"
#: An array inlined as a list: how the trainer's JSON + safetensors layout stored numpy arrays.
_INLINE = "__ndarray__"
_METADATA = "__metadata__"
#: The one entry of the safetensors metadata, holding format, version, checksum and tree as JSON.
_KEY = "bots-rft"
_LEN = struct.Struct("<Q")
#: safetensors refuses longer headers; anything claiming more is not a checkpoint.
_MAX_HEADER = 100_000_000
_CHUNK = 1 << 22
#: numpy dtypes stored as themselves (safetensors names them in every version we support);
#: any other array is stored as raw bytes.
_NATIVE = frozenset(
    np.dtype(d).str for d in ("|b1", "|u1", "|i1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8")
)


# ------------------------------------------------------------------------------- the tree
def _is_tensor(obj: Any) -> bool:
    # torch is imported by whoever made the tensor; the codec never imports it for numpy states.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


class _Encoder:
    """Turns a state into its JSON tree, collecting the arrays under unique names."""

    def __init__(self) -> None:
        self.arrays: dict[str, Any] = {}
        self.refs: dict[str, dict[str, Any]] = {}
        self.torch = False
        self._storages: set[int] = set()

    def _name(self, path: list[str]) -> str:
        base = ".".join(path) or "state"
        name, n = base, 1
        while name in self.arrays or name == _METADATA:
            n += 1
            name = f"{base}#{n}"
        return name

    def encode(self, obj: Any, path: list[str]) -> Any:
        if _is_tensor(obj):
            t = obj.detach().cpu()
            storage = t.untyped_storage().data_ptr()
            # safetensors refuses tensors that share memory (tied weights): each gets its own copy.
            if storage in self._storages or not t.is_contiguous():
                t = t.clone().contiguous()
                storage = t.untyped_storage().data_ptr()
            if t.numel():
                self._storages.add(storage)
            self.torch = True
            name = self._name(path)
            self.arrays[name] = t
            return {_TENSOR: name}
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                raise CheckpointError("state: object arrays cannot be stored")
            if obj.dtype.kind not in "biufcU" or obj.dtype.fields is not None:
                raise CheckpointError(f"state: arrays of dtype {obj.dtype} cannot be stored")
            name = self._name(path)
            a = np.ascontiguousarray(obj)
            ref: dict[str, Any] = {_ARRAY: name}
            if a.dtype.str in _NATIVE:
                self.arrays[name] = a.reshape(obj.shape)  # ascontiguousarray makes 0-d arrays 1-d
            else:
                self._raw(name, ref, a.reshape(obj.shape))
            self.refs[name] = ref
            return ref
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, tuple):
            return {_TUPLE: [self.encode(v, [*path, str(i)]) for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.encode(v, [*path, str(i)]) for i, v in enumerate(obj)]
        if isinstance(obj, dict):
            if all(isinstance(k, str) and not k.startswith("__") for k in obj):
                return {k: self.encode(v, [*path, k]) for k, v in obj.items()}
            return {_DICT: [[self.encode(k, [*path, "key"]), self.encode(v, [*path, str(k)])] for k, v in obj.items()]}
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        raise CheckpointError(f"state: cannot store a value of type {type(obj).__name__}")

    def _raw(self, name: str, ref: dict[str, Any], a: np.ndarray) -> None:
        self.arrays[name] = np.frombuffer(bytearray(a.tobytes()), dtype=np.uint8)  # writable, as torch wants
        ref.update(dtype=a.dtype.str, shape=list(a.shape))

    def tensors(self) -> dict[str, Any]:
        """The arrays as one library's tensors: numpy unless the state holds torch tensors, then
        torch, with the numpy arrays as raw bytes (torch lacks some of numpy's dtypes)."""
        if not self.torch:
            return self.arrays
        import torch

        for name, ref in self.refs.items():
            if "dtype" not in ref:
                self._raw(name, ref, self.arrays[name])
        return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in self.arrays.items()}

    def metadata(self, tree: Any) -> tuple[dict[str, Any], dict[str, str]]:
        """The tensors and the file's metadata, with 64 zeros where the checksum goes: it is
        computed over the file as written, then put in their place (same length, nothing moves)."""
        tensors = self.tensors()  # may rewrite references, so before the tree is serialised
        # One metadata entry: safetensors keeps metadata in a hash map, whose order changes from
        # call to call, and the same state must give the same bytes. The checksum comes before the
        # tree, so it is the first "sha256" entry in the header.
        info = {"format": FORMAT, "version": VERSION, "sha256": _ZEROS.decode(), "tree": tree}
        return tensors, {_KEY: json.dumps(info, allow_nan=True, separators=(",", ":"))}


def _decode(node: Any, arrays: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    if not any(k.startswith("__") for k in node):
        return {k: _decode(v, arrays) for k, v in node.items()}
    keys = set(node)
    if keys == {_TENSOR}:
        return _stored(arrays, node[_TENSOR])
    if keys == {_ARRAY}:
        a = _stored(arrays, node[_ARRAY])
        return a if isinstance(a, np.ndarray) else a.numpy()
    if keys == {_ARRAY, "dtype", "shape"}:
        a = _stored(arrays, node[_ARRAY])
        return _from_raw(a if isinstance(a, np.ndarray) else a.numpy(), node["dtype"], node["shape"])
    if keys == {_INLINE, "dtype", "shape"}:
        return np.asarray(node[_INLINE], dtype=_dtype(node["dtype"])).reshape(node["shape"])
    if keys == {_TUPLE}:
        return tuple(_decode(v, arrays) for v in _list(node[_TUPLE]))
    if keys == {_DICT}:
        out = {}
        for pair in _list(node[_DICT]):
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError(f"a dict entry is {pair!r:.40}, not a [key, value] pair")
            key = _decode(pair[0], arrays)
            out[tuple(key) if isinstance(key, list) else key] = _decode(pair[1], arrays)
        return out
    raise ValueError(f"unknown entry {sorted(keys)!r:.80}")


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {type(value).__name__}")
    return value


def _stored(arrays: dict[str, Any], name: Any) -> Any:
    if not isinstance(name, str) or name not in arrays:
        raise ValueError(f"reference to array {name!r}, which the file lacks")
    return arrays[name]


def _dtype(spec: Any) -> np.dtype[Any]:
    dtype = np.dtype(spec) if isinstance(spec, str) else None
    if dtype is None or dtype.hasobject or dtype.kind not in "biufcU" or dtype.fields is not None:
        raise ValueError(f"dtype {spec!r} is not allowed")
    return dtype


def _from_raw(raw: np.ndarray, dtype_spec: Any, shape: Any) -> np.ndarray:
    dtype = _dtype(dtype_spec)
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"invalid shape {shape!r}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if raw.dtype != np.uint8 or raw.ndim != 1 or raw.size != count * dtype.itemsize:
        raise ValueError(f"{raw.size} bytes do not hold shape {shape} of {dtype}")
    return np.frombuffer(raw.tobytes(), dtype=dtype).reshape(shape).copy()


def _uses_torch(node: Any) -> bool:
    if isinstance(node, list):
        return any(_uses_torch(v) for v in node)
    if isinstance(node, dict):
        return _TENSOR in node or any(_uses_torch(v) for v in node.values())
    return False


# ---------------------------------------------------------------------------- the checksum
#: How the checksum's entry starts in a header (compact JSON inside the metadata's JSON string);
#: the first match is the checksum, written before the tree.
_STAMP = b'\\"sha256\\":\\"'
_ZEROS = b"0" * 64


def _stamp_at(raw: bytes) -> int | None:
    """Where in header ``raw`` the checksum's 64 hex digits are (None: nowhere)."""
    at = raw.find(_STAMP)
    if at < 0 or len(raw) < at + len(_STAMP) + len(_ZEROS):
        return None
    return at + len(_STAMP)


def _digest(parts: Iterable[bytes | memoryview]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()


def _stamp(data: bytearray) -> bytes:
    """``data`` (written with 64 zeros as its checksum) with its checksum filled in."""
    (n,) = _LEN.unpack_from(data)
    at = _stamp_at(bytes(data[_LEN.size : _LEN.size + n]))
    if at is None or data[_LEN.size + at : _LEN.size + at + len(_ZEROS)] != _ZEROS:
        raise CheckpointError("state: could not place the checksum in the file's header")
    at += _LEN.size
    data[at : at + len(_ZEROS)] = _digest([memoryview(data)]).encode()
    return bytes(data)


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.size = memoryview(data), len(data)

    def read(self, start: int, n: int) -> bytes:
        return bytes(self.data[start : start + n])

    def chunks(self, start: int) -> Iterator[bytes | memoryview]:
        yield self.data[start:]


class _File:
    def __init__(self, f: IO[bytes]) -> None:
        self.f, self.size = f, os.fstat(f.fileno()).st_size

    def read(self, start: int, n: int) -> bytes:
        self.f.seek(start)
        return self.f.read(n)

    def chunks(self, start: int) -> Iterator[bytes | memoryview]:
        self.f.seek(start)
        while chunk := self.f.read(_CHUNK):
            yield chunk


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return header if isinstance(header, dict) else None


def _info(header: dict[str, Any] | None) -> dict[str, Any] | None:
    """The bots-rft entry of a header's metadata, parsed; None when there is none."""
    meta = header.get(_METADATA) if header is not None else None
    entry = meta.get(_KEY) if isinstance(meta, dict) else None
    if not isinstance(entry, str):
        return None
    try:
        info = json.loads(entry)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def _data_end(header: dict[str, Any], source: str) -> int:
    """Where the header says the arrays' bytes end (relative to the start of the data)."""
    end = 0
    for name, entry in header.items():
        if name == _METADATA:
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
        ):
            raise CheckpointError(f"{source}: corrupt header (entry {name!r:.60} has no valid byte range)")
        end = max(end, offsets[1])
    return end


# ------------------------------------------------------------------------------- reading
class _Head:
    """A file's header, checked against the file: the checksum (over every byte, before anything
    in the file is trusted), then what the header says."""

    def __init__(self, source: str, src: _Bytes | _File, *, verify: bool = True) -> None:
        size = src.size
        if size < _LEN.size:
            raise CheckpointError(f"{source}: truncated ({size} bytes is shorter than any checkpoint)")
        prefix = src.read(0, _LEN.size)
        (n,) = _LEN.unpack(prefix)
        first = src.read(_LEN.size, 1)
        if n > _MAX_HEADER or first not in (b"{", b""):
            raise CheckpointError(f"{source}: not a bots-rft checkpoint (no safetensors header)")
        if _LEN.size + n > size:
            raise CheckpointError(f"{source}: truncated (header says {n} header bytes, file has {size} bytes)")
        raw = src.read(_LEN.size, n)
        header = _parse(raw)
        meta = _info(header)
        ours = meta is not None and meta.get("format") == FORMAT
        at = _stamp_at(raw)
        if at is None:
            if ours:
                raise CheckpointError(f"{source}: corrupt header (no checksum)")
            raise CheckpointError(f"{source}: not a bots-rft checkpoint (no bots-rft metadata)")
        if ours:
            # Before the checksum: a newer version may compute it differently.
            version = meta.get("version") if meta is not None else None
            if isinstance(version, int) and version > VERSION:
                raise CheckpointError(
                    f"{source}: written by a newer bots-rft (format version {version}; this version reads up to "
                    f"{VERSION})"
                )
        if verify:
            stored = raw[at : at + len(_ZEROS)]
            got = _digest([prefix, raw[:at], _ZEROS, raw[at + len(_ZEROS) :], *src.chunks(_LEN.size + n)])
            if not secrets.compare_digest(stored, got.encode()):
                if header is not None:
                    need = _LEN.size + n + _data_end(header, source)
                    if need > size:
                        raise CheckpointError(f"{source}: truncated ({size} bytes, expected {need})")
                raise CheckpointError(f"{source}: corrupt (checksum mismatch)")
        if header is None or meta is None:
            raise CheckpointError(f"{source}: corrupt header (not a safetensors header with bots-rft metadata)")
        if not ours:
            raise CheckpointError(f"{source}: not a bots-rft checkpoint (format {meta.get('format')!r:.40})")
        version = meta.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise CheckpointError(f"{source}: corrupt header (format version {version!r:.40})")
        if _LEN.size + n + _data_end(header, source) != size:
            raise CheckpointError(f"{source}: corrupt header (its byte ranges do not end where the file does)")
        self.source, self.meta = source, meta

    def tree(self) -> tuple[Any, bool]:
        if "tree" not in self.meta:
            raise CheckpointError(f"{self.source}: corrupt header (no state)")
        tree = self.meta["tree"]
        return tree, _uses_torch(tree)

    def decode(self, tree: Any, load: Callable[[], dict[str, Any]]) -> Any:
        try:
            arrays = load()
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
            raise CheckpointError(f"{self.source}: corrupt ({_one_line(exc)})") from None
        try:
            return _decode(tree, arrays)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise CheckpointError(f"{self.source}: corrupt header ({_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line (a library's may span several), cut to a readable length."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _torch_library(source: str) -> Any:
    try:
        import safetensors.torch
    except ImportError:
        raise CheckpointError(f"{source}: holds torch tensors; reading it needs torch") from None
    return safetensors.torch


def _from_bytes_any(data: bytes, source: str) -> Any:
    if data[: len(legacy.MAGIC)] == legacy.MAGIC:
        return legacy.from_bytes(data, source=source)
    head = _Head(source, _Bytes(data))
    tree, uses_torch = head.tree()
    if uses_torch:
        library = _torch_library(source)
        return head.decode(tree, lambda: library.load(data))
    import safetensors.numpy

    return head.decode(tree, lambda: safetensors.numpy.load(data))


def _mapping(state: Any, source: str) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise CheckpointError(f"{source}: corrupt header (state is not a mapping)")
    return state


def from_bytes(data: bytes, source: str = "checkpoint") -> dict[str, Any]:
    """The state :func:`to_bytes` encoded (or a legacy-format state); a truncated, corrupt or newer
    encoding is a :class:`CheckpointError` naming ``source``."""
    return _mapping(_from_bytes_any(bytes(data), source), source)


def load_tree_file(path: str | os.PathLike[str]) -> Any:
    """What :func:`save_tree_file` wrote (any tree, torch tensors included), checked before any
    array is read; a legacy-format file is read too."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            if f.read(len(legacy.MAGIC)) == legacy.MAGIC:
                f.seek(0)
                return legacy.from_bytes(f.read(), source=source)
            head = _Head(source, _File(f))
    except FileNotFoundError:
        raise CheckpointNotFoundError(f"path: no checkpoint at {source!r}", source) from None
    tree, uses_torch = head.tree()
    # Read after the check, by the library's own file reader (memory-mapped, no second copy).
    if uses_torch:
        library = _torch_library(source)
        return head.decode(tree, lambda: library.load_file(source))
    import safetensors.numpy

    return head.decode(tree, lambda: safetensors.numpy.load_file(source))


def load_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a state written by :func:`save_state`; refuses truncated, corrupt or newer files."""
    return _mapping(load_tree_file(path), str(path))


def is_checkpoint_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` looks like a bots-rft checkpoint (either format) by its header; its
    checksum is not computed."""
    try:
        with open(path, "rb") as f:
            if f.read(len(legacy.MAGIC)) == legacy.MAGIC:
                return True
            _Head(str(path), _File(f), verify=False)
    except (OSError, CheckpointError):
        return False
    return True


# ------------------------------------------------------------------------------- writing
def to_bytes(state: dict[str, Any]) -> bytes:
    """``state`` as one safetensors file's bytes (for passing between processes)."""
    enc = _Encoder()
    tensors, meta = enc.metadata(enc.encode(state, []))
    if enc.torch:
        import safetensors.torch

        return _stamp(bytearray(safetensors.torch.save(tensors, metadata=meta)))
    import safetensors.numpy

    return _stamp(bytearray(safetensors.numpy.save(tensors, metadata=meta)))


def _write_and_stamp(tmp: str, enc: _Encoder, tree: Any) -> None:
    """Write the encoded state to ``tmp`` with safetensors (streamed: no copy of the arrays in
    memory), then put the checksum of the file as written into its header."""
    tensors, meta = enc.metadata(tree)
    if enc.torch:
        import safetensors.torch

        safetensors.torch.save_file(tensors, tmp, metadata=meta)
    else:
        import safetensors.numpy

        safetensors.numpy.save_file(tensors, tmp, metadata=meta)
    with open(tmp, "r+b") as f:
        src = _File(f)
        (n,) = _LEN.unpack(src.read(0, _LEN.size))
        at = _stamp_at(src.read(_LEN.size, n))
        if at is None:
            raise CheckpointError("state: could not place the checksum in the file's header")
        digest = _digest(src.chunks(0))
        f.seek(_LEN.size + at)
        f.write(digest.encode())
        f.flush()
        os.fsync(f.fileno())


def _atomic(target: Path, write: Callable[[str], None]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temporary(target)
    try:
        mode = os.stat(tmp).st_mode & 0o777
        write(tmp)
        # safetensors (0.8) writes through a temporary file of its own, created 0600.
        if os.stat(tmp).st_mode & 0o777 != mode:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(target.parent)


def _new_temporary(target: Path) -> str:
    """A new, empty file beside ``target`` with the mode the umask gives a new file (0644 under
    022), as ``open(target, "w")`` would: the rename keeps it, so another uid can read the file.
    ``tempfile.mkstemp`` would create it 0600 whatever the umask; :func:`_atomic` gives the
    written file this mode back if the writer replaced it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, flags, 0o666))
            return tmp
        except FileExistsError:
            continue


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (not every filesystem lets a folder be fsynced)."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename, folder fsync)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    _atomic(Path(path), write)


def save_tree_file(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` (nested dicts, lists, tuples, scalars, numpy arrays, torch tensors) to
    ``path`` atomically, as one checksummed safetensors file."""
    enc = _Encoder()
    tree = enc.encode(obj, [])  # refuses what cannot be stored before the folder is touched
    _atomic(Path(path), lambda tmp: _write_and_stamp(tmp, enc, tree))


def save_state(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically."""
    save_tree_file(path, state)


def write_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """:func:`save_state` for a user-given checkpoint path: a directory or an OS error (no space,
    no permission) becomes a :class:`CheckpointError` naming the path."""
    _refuse_directory(path)
    try:
        save_state(path, state)
    except OSError as exc:
        raise CheckpointError(f"path: cannot write a checkpoint to {str(path)!r} ({exc.strerror or exc})") from None


def read_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`load_state` for a user-given checkpoint path, errors as in :func:`write_checkpoint`."""
    _refuse_directory(path)
    try:
        return load_state(path)
    except CheckpointNotFoundError:
        raise
    except OSError as exc:
        raise CheckpointError(f"path: cannot read a checkpoint from {str(path)!r} ({exc.strerror or exc})") from None


def _refuse_directory(path: str | os.PathLike[str]) -> None:
    if os.path.isdir(path):
        raise CheckpointError(
            f"path: {str(path)!r} is a directory; a checkpoint is one file, e.g. {os.path.join(path, 'selector.bots')!r}"
        )
