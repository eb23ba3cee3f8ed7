"""Per-step records to ``metrics.jsonl`` (one JSON object a line, flushed each step) and, when
the tensorboard package is installed, to TensorBoard scalars. Only rank 0 writes."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "read_metrics"]

log = logging.getLogger("bots_rft.train")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist"):
        return _clean(value.tolist())
    return value


class MetricsLogger:
    def __init__(self, out_dir: Path, *, enabled: bool, tensorboard: bool, resume_step: int | None) -> None:
        self.path = out_dir / "metrics.jsonl"
        self.enabled = enabled
        self._tb: Any = None
        if not enabled:
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.exists():
            # Records after the checkpoint belong to the interrupted future: drop them.
            keep = [r for r in read_metrics(self.path) if int(r.get("step", 0)) <= resume_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in keep))
        elif resume_step is None and self.path.exists():
            self.path.unlink()
        # Open for the logger's life (close() closes it), so no with-block can hold it.
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                # On resume, events logged after the checkpoint (by the interrupted run) are
                # purged, as the JSONL records are above.
                purge = None if resume_step is None else resume_step + 1
                self._tb = SummaryWriter(str(out_dir / "tensorboard"), purge_step=purge)
            except ImportError:
                log.info("tensorboard is not installed; logging to %s only", self.path)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        rec = _clean(record)
        self._file.write(json.dumps(rec) + "\n")
        self._file.flush()
        if self._tb is not None:
            step = int(rec.get("step", 0))
            prefix = rec.get("kind", "train")
            for key, value in _flat(rec):
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                    self._tb.add_scalar(f"{prefix}/{key}", value, step)

    def close(self) -> None:
        if self.enabled:
            self._file.close()
            if self._tb is not None:
                self._tb.close()


def _flat(rec: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in rec.items():
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}/")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` (a torn last line is skipped)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def verifier_error_totals(path: str | Path) -> dict[str, int]:
    """Verifier errors of a whole run (resumed parts included), by kind, from its metrics.jsonl
    (empty when there is none yet)."""
    totals: dict[str, int] = {}
    if not Path(path).exists():
        return totals
    for rec in read_metrics(path):
        for kind, n in (rec.get("verifier_error_kinds") or {}).items():
            totals[kind] = totals.get(kind, 0) + int(n)
    return dict(sorted(totals.items()))
