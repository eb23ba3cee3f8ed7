"""Write README.pypi.md, the package's description on PyPI, from README.md.

    python docs/gen_pypi_readme.py          # rewrite it
    python docs/gen_pypi_readme.py --check  # exit 1 if it is out of date (run by the tests)

README.md links to the repository's own files (docs/, examples/, configs/, benches/) and shows
plots from it by relative path, which GitHub resolves and PyPI cannot: on PyPI every such link
and image would be broken. The project states no repository address to resolve them against, so
the PyPI description names those files instead of linking them: a relative link becomes its text
followed by the path in backticks (just the path when the text is the path), an image becomes a
line naming the figure and its file, and links to web addresses and to the page's own headings
stay links. When the project publishes an address, setting ``LINK_BASE`` below turns every such
path into a link under it instead.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PYPI_README = ROOT / "README.pypi.md"

#: The address relative paths would resolve against (e.g. a repository's blob URL); None: none is
#: published, so paths are named, not linked.
LINK_BASE: str | None = None

HEADER = (
    "<!-- Generated from README.md by docs/gen_pypi_readme.py: edit README.md, then run it. -->\n"
    "<!-- The files this page names are in the project's source repository. -->\n\n"
)

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("#")


def _image(match: re.Match[str]) -> str:
    alt, target = match.group(1), match.group(2)
    if not _relative(target):
        return match.group(0)
    if LINK_BASE is not None:
        return f"![{alt}]({LINK_BASE}{target})"
    return f"*Figure: {alt} (`{target}`).*"


def _link(match: re.Match[str]) -> str:
    text, target = match.group(1), match.group(2)
    if not _relative(target):
        return match.group(0)
    if LINK_BASE is not None:
        return f"[{text}]({LINK_BASE}{target})"
    path = target.split("#", 1)[0]
    plain = text.strip("`")
    return f"`{path}`" if plain in (path, target) else f"{text} (`{path}`)"


def convert(text: str) -> str:
    """README.md's text as PyPI can render it (the module docstring says how)."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append(line)
            continue
        out.append(line if fenced else _LINK.sub(_link, _IMAGE.sub(_image, line)))
    return HEADER + "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if README.pypi.md is out of date")
    args = parser.parse_args(argv)
    wanted = convert(README.read_text(encoding="utf-8"))
    if args.check:
        current = PYPI_README.read_text(encoding="utf-8") if PYPI_README.exists() else ""
        if current != wanted:
            print("README.pypi.md is out of date: run python docs/gen_pypi_readme.py", file=sys.stderr)
            return 1
        return 0
    PYPI_README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
