"""The lines of the docs' fenced code blocks, as the doc tests read them (shared by
test_examples.py and test_docs.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced_lines() -> Iterator[tuple[Path, str]]:
    """``(document, line)`` for every line of every fenced block in README.md and docs/*.md; a
    command continued with ``\\`` is one line."""
    for doc in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in re.sub(r"\\\n\s*", "", block).splitlines():
                yield doc, line
