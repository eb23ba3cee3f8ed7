"""Editing checkpoint files the way an attacker or a bad disk might, for the tests of what the
reader refuses: a header rewritten, with or without a recomputed checksum."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

from bots_rft import checkpoint


def rewrite_header(data: bytes, edit: Callable[[dict[str, Any]], Any], *, restamp: bool = True) -> bytes:
    """``data`` (a bots-rft safetensors file) with ``edit`` applied to its parsed header; the
    checksum recomputed over the result unless ``restamp`` is false."""
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    edit(header)
    if restamp:
        header["__metadata__"]["sha256"] = "0" * 64
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    out = struct.pack("<Q", len(raw)) + raw + body
    return checkpoint._stamp(bytearray(out)) if restamp else out


def edit_tree(data: bytes, edit: Callable[[Any], Any]) -> bytes:
    """``data`` with ``edit`` applied to the state's JSON tree, checksum recomputed."""

    def change(header: dict[str, Any]) -> None:
        tree = json.loads(header["__metadata__"]["tree"])
        edit(tree)
        header["__metadata__"]["tree"] = json.dumps(tree)

    return rewrite_header(data, change)


def is_codec_bytes(data: bytes) -> bool:
    """Whether ``data`` is a file of the checkpoint codec (a safetensors file with bots-rft's
    metadata), by its header alone."""
    if len(data) < 8:
        return False
    (n,) = struct.unpack_from("<Q", data)
    try:
        header = json.loads(data[8 : 8 + n])
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("__metadata__", {}).get("format") == checkpoint.FORMAT
