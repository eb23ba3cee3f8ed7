"""Finding the selector's packed entry (bots_rft.integrations.batches.pack_state) inside a
trainer's data-loader state, for the integrations' save-format tests."""

from __future__ import annotations

from typing import Any


def packed_entry(state: Any, fmt: str) -> dict[str, Any]:
    """The first dict with ``format == fmt`` inside ``state`` (nested dicts and lists); {} if none."""
    if isinstance(state, dict) and state.get("format") == fmt:
        return state
    for value in state.values() if isinstance(state, dict) else state if isinstance(state, list) else ():
        found = packed_entry(value, fmt)
        if found:
            return found
    return {}
