"""Editing checkpoint files the way an attacker or a bad disk might, for the tests of what the
reader refuses: a header rewritten, with or without a recomputed checksum."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

from bots_rft import checkpoint

KEY = "bots-rft"  # the one entry of a codec file's safetensors metadata


def info(data: bytes) -> dict[str, Any]:
    """The bots-rft entry of a codec file's metadata (format, version, sha256, tree), parsed."""
    (n,) = struct.unpack_from("<Q", data)
    return dict(json.loads(json.loads(data[8 : 8 + n])["__metadata__"][KEY]))


def rewrite_header(data: bytes, edit: Callable[[dict[str, Any]], Any], *, restamp: bool = True) -> bytes:
    """``data`` (a bots-rft safetensors file) with ``edit`` applied to its parsed header, in which
    ``header["__metadata__"]["bots-rft"]`` is the parsed bots-rft entry; the checksum recomputed
    over the result unless ``restamp`` is false."""
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    header["__metadata__"][KEY] = json.loads(header["__metadata__"][KEY])
    edit(header)
    entry = header.get("__metadata__", {}).get(KEY)
    if isinstance(entry, dict):
        if restamp and "sha256" in entry:
            entry["sha256"] = "0" * 64
        header["__metadata__"][KEY] = json.dumps(entry, separators=(",", ":"))
    else:
        restamp = False  # no checksum left to stamp
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    out = struct.pack("<Q", len(raw)) + raw + body
    return checkpoint._stamp(bytearray(out)) if restamp else out


def edit_info(data: bytes, edit: Callable[[dict[str, Any]], Any]) -> bytes:
    """``data`` with ``edit`` applied to its bots-rft entry (format, version, sha256, tree),
    checksum recomputed."""
    return rewrite_header(data, lambda h: edit(h["__metadata__"][KEY]))


def edit_tree(data: bytes, edit: Callable[[Any], Any]) -> bytes:
    """``data`` with ``edit`` applied to the state's JSON tree, checksum recomputed."""
    return edit_info(data, lambda i: edit(i["tree"]))


def is_codec_bytes(data: bytes) -> bool:
    """Whether ``data`` is a file of the checkpoint codec (a safetensors file with bots-rft's
    metadata), by its header alone."""
    try:
        return info(data).get("format") == checkpoint.FORMAT
    except (ValueError, KeyError, TypeError, struct.error):
        return False
