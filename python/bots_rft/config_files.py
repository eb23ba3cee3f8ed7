"""Reading a YAML or TOML config file into a mapping, with one error for every way it can fail.

The trainer's config (``bots train``) and the spread pool's spec (``bots data spread``) are both
read here, so a missing file, an unknown suffix, a parse error or a file that is not a mapping is
reported the same way (:class:`~bots_rft.errors.ConfigError` naming the file) by every command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["read_mapping"]


def _toml() -> Any:
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python >= 3.11
    except ImportError:
        try:
            import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            raise ConfigError("config: TOML files need Python >= 3.11 or the tomli package; use YAML") from None
    return tomllib


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a ``.yaml``/``.yml`` or ``.toml`` file (an empty YAML file is an
    empty mapping); :class:`ConfigError` naming the file otherwise."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config: file {str(p)!r} does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".toml":
            loaded: Any = _toml().loads(text)
        elif p.suffix.lower() in (".yaml", ".yml"):
            import yaml  # type: ignore[import-untyped]

            loaded = yaml.safe_load(text) or {}
        else:
            raise ConfigError(f"config: {str(p)!r} must end in .yaml, .yml or .toml")
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - parser errors have many types
        raise ConfigError(f"config: cannot parse {str(p)!r}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config: {str(p)!r} must hold a mapping of keys, got {type(loaded).__name__}")
    return loaded
