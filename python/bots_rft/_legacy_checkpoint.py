"""Reading checkpoints of the legacy format (BOTSRFT, format version 1), which bots-rft wrote
before checkpoints became safetensors files; read-only, so that existing checkpoints keep loading.

Layout (little-endian)::

    b"BOTSRFT\\0"  magic (8 bytes)
    u32           format version (1)
    u64           header length H
    H bytes       JSON header: the state with every array replaced by {"__array__": i}, plus
                  each array's dtype, shape, offset and size
    ...           array payloads, 64-byte aligned
    32 bytes      SHA-256 of everything before it
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import numpy as np

from .errors import CheckpointError

MAGIC = b"BOTSRFT\x00"
#: The last version of this format; files of a later one are refused as written by a newer bots-rft.
VERSION = 1
_PREFIX = struct.Struct("<8sIQ")
_DIGEST = 32
_ALIGN = 64

__all__ = ["MAGIC", "VERSION", "from_bytes"]


def _decode(node: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(node, dict):
        if set(node) == {"__array__"}:
            i = node["__array__"]
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(arrays):
                raise ValueError(f"reference to array {i!r}; the file has {len(arrays)}")
            return arrays[i]
        return {k: _decode(v, arrays) for k, v in node.items()}
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    return node


def _read_array(data: bytes, base: int, end: int, i: int, spec: Any) -> np.ndarray:
    """Array ``i`` of the payload, after checking its spec against the file: a plain numeric
    (or bool/unicode) dtype, a non-negative shape, an aligned offset inside the payload and a
    size that matches the shape — so a header edited to point elsewhere (into the header, past
    the end) is refused even when the checksum was recomputed."""
    if not isinstance(spec, dict):
        raise ValueError(f"array {i}: spec is not a mapping")
    dtype = np.dtype(spec["dtype"])
    if dtype.hasobject or dtype.kind not in "biufcU" or dtype.fields is not None:
        raise ValueError(f"array {i}: dtype {spec['dtype']!r} is not allowed")
    shape, offset, nbytes = spec["shape"], spec["offset"], spec["nbytes"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"array {i}: invalid shape {shape!r}")
    for name, value in (("offset", offset), ("nbytes", nbytes)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"array {i}: invalid {name} {value!r}")
    count = 1
    for d in shape:
        count *= d
    if count * dtype.itemsize != nbytes:
        raise ValueError(f"array {i}: {nbytes} bytes do not hold shape {shape} of {dtype}")
    if offset % _ALIGN:
        raise ValueError(f"array {i}: offset {offset} is not {_ALIGN}-byte aligned")
    if base + offset + nbytes > end:
        raise ValueError(f"array {i}: bytes {offset}..{offset + nbytes} lie outside the {end - base}-byte payload")
    raw = np.frombuffer(data, dtype=dtype, count=count, offset=base + offset)
    return raw.reshape(shape).copy()


def _check_layout(specs: list[dict[str, Any]], payload: int) -> None:
    """Arrays do not overlap and the payload ends where the last one does (as written)."""
    spans = sorted((s["offset"], s["offset"] + s["nbytes"]) for s in specs)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        if start < end:
            raise ValueError(f"arrays overlap at payload byte {start}")
    last = spans[-1][1] if spans else 0
    if last != payload:
        raise ValueError(f"the payload has {payload} bytes, the arrays end at {last}")


def from_bytes(data: bytes, source: str = "checkpoint") -> dict[str, Any]:
    if len(data) < _PREFIX.size + _DIGEST:
        raise CheckpointError(f"{source}: truncated ({len(data)} bytes is shorter than any checkpoint)")
    magic, version, hlen = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError(f"{source}: not a bots-rft checkpoint (magic {magic!r})")
    if version > VERSION:
        raise CheckpointError(
            f"{source}: written by a newer bots-rft (format version {version}; this version reads up to {VERSION})"
        )
    if hashlib.sha256(data[:-_DIGEST]).digest() != data[-_DIGEST:]:
        end = _PREFIX.size + hlen
        if end > len(data) - _DIGEST:
            raise CheckpointError(f"{source}: truncated (header says {hlen} header bytes, file has {len(data)} bytes)")
        try:
            specs = json.loads(data[_PREFIX.size : end])["arrays"]
            need = end + max((s["offset"] + s["nbytes"] for s in specs), default=0) + _DIGEST
        except (ValueError, KeyError, TypeError):
            need = -1
        if need > len(data):
            raise CheckpointError(f"{source}: truncated ({len(data)} bytes, expected {need})")
        raise CheckpointError(f"{source}: corrupt (checksum mismatch)")
    try:
        base = _PREFIX.size + hlen
        if base > len(data) - _DIGEST:
            raise ValueError(f"header length {hlen} runs past the end of the file")
        header = json.loads(data[_PREFIX.size : base])
        specs = header["arrays"]
        if not isinstance(specs, list):
            raise ValueError("'arrays' is not a list")
        arrays = [_read_array(data, base, len(data) - _DIGEST, i, s) for i, s in enumerate(specs)]
        _check_layout(specs, len(data) - _DIGEST - base)
        state = _decode(header["state"], arrays)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CheckpointError(f"{source}: corrupt header ({exc})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{source}: corrupt header (state is not a mapping)")
    return state
