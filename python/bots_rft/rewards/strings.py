"""The verifier of the procedural string tasks (``bots data strings``): the response's first
line, stripped, must be exactly the ground truth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["STRINGS_PREFIX", "verify_first_line"]

#: ``data_source`` prefix of the procedural string pool's rows (``strings/reverse_l7``).
STRINGS_PREFIX = "strings"


def verify_first_line(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None
) -> float:
    """1.0 when the response's first line, stripped, is exactly the ground truth."""
    first = solution_str.strip().split("\n", 1)[0].strip()
    return 1.0 if first == str(ground_truth).strip() else 0.0
