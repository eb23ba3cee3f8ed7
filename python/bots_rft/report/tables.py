"""The comparison table of the paper (TTB and BSF against a baseline, ETR, the <1/>0 ratios,
rollouts per step, final score) as markdown, shared by simulated and trained comparisons.

TTB and BSF appear twice: per training step (the paper's) and per rollout spent, so that a
method that rolls out more per step (dynamic sampling) shows what its steps cost in the headline
table; and Trinity-RFT's strict valid ratio stands beside ETR."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..metrics import BSF_BUDGETS, TTB_FRACTIONS, format_ratio

__all__ = ["Row", "markdown_table"]


@dataclass
class Row:
    """One line of a comparison table."""

    label: str
    key: str
    ttb: list[float | None]
    bsf: list[float | None]
    etr: float
    below_one: float
    above_zero: float
    rollouts: float  # rollouts per step relative to batch_size * n
    final: float  # held-out score after the last step (mean over seeds)
    # TTB and BSF with rollouts spent as the x-axis instead of steps (empty: not measured).
    ttb_rollouts: list[float | None] = field(default_factory=list)
    bsf_rollouts: list[float | None] = field(default_factory=list)
    strict_valid: float = math.nan  # Trinity-RFT's strict valid ratio (mean over steps)

    def to_dict(self) -> dict[str, Any]:
        def num(v: float | None) -> float | str | None:
            return None if v is None else ("n/a" if math.isnan(v) else round(v, 4))

        return {
            "label": self.label,
            "key": self.key,
            **{f"ttb_{int(f * 100)}": num(v) for f, v in zip(TTB_FRACTIONS, self.ttb)},
            **{f"bsf_{int(b * 100)}": num(v) for b, v in zip(BSF_BUDGETS, self.bsf)},
            **{f"ttb_rollouts_{int(f * 100)}": num(v) for f, v in zip(TTB_FRACTIONS, self._ttb_rollouts)},
            **{f"bsf_rollouts_{int(b * 100)}": num(v) for b, v in zip(BSF_BUDGETS, self._bsf_rollouts)},
            "etr": round(self.etr, 4),
            "strict_valid": num(self.strict_valid),
            "below_one": round(self.below_one, 4),
            "above_zero": round(self.above_zero, 4),
            "rollouts_per_step": round(self.rollouts, 3),
            "final_score": round(self.final, 4),
        }

    @property
    def _ttb_rollouts(self) -> list[float | None]:
        return self.ttb_rollouts or [None] * len(TTB_FRACTIONS)

    @property
    def _bsf_rollouts(self) -> list[float | None]:
        return self.bsf_rollouts or [None] * len(BSF_BUDGETS)


def _marks(values: list[float | None], lower_better: bool, digits: int = 2) -> list[str]:
    """'**' for the best, '_' for the second best (the paper's bold/underline); None is worst."""
    finite = [(v, i) for i, v in enumerate(values) if v is not None and not math.isnan(v)]
    ordered = sorted({round(v, digits) for v, _ in finite}, reverse=not lower_better)
    marks = [""] * len(values)
    for v, i in finite:
        r = round(v, digits)
        if ordered and r == ordered[0]:
            marks[i] = "**"
        elif len(ordered) > 1 and r == ordered[1]:
            marks[i] = "_"
    return marks


def markdown_table(rows: list[Row]) -> str:
    """The paper's layout (TTB 50/75/100%, BSF 25/50/100%), the same per rollout spent
    ("(rollouts)" columns), ETR, the strict valid ratio, the <1/>0 ratios, the rollouts spent per
    step (1.00 = batch × n) and the final held-out score."""
    cols: list[tuple[str, list[float | None], bool | None, int]] = []
    for j, f in enumerate(TTB_FRACTIONS):
        cols.append((f"TTB {int(f * 100)}% ↓", [r.ttb[j] for r in rows], True, 2))
    for j, b in enumerate(BSF_BUDGETS):
        cols.append((f"BSF {int(b * 100)}% ↑", [r.bsf[j] for r in rows], False, 2))
    for j, f in enumerate(TTB_FRACTIONS):
        cols.append((f"TTB {int(f * 100)}% ↓ (rollouts)", [r._ttb_rollouts[j] for r in rows], True, 2))
    for j, b in enumerate(BSF_BUDGETS):
        cols.append((f"BSF {int(b * 100)}% ↑ (rollouts)", [r._bsf_rollouts[j] for r in rows], False, 2))
    cols.append(("ETR ↑", [r.etr for r in rows], False, 3))
    cols.append(("Strict valid ↑", [r.strict_valid for r in rows], False, 3))
    cols.append(("<1", [r.below_one for r in rows], None, 3))
    cols.append((">0", [r.above_zero for r in rows], None, 3))
    cols.append(("Rollouts/step", [r.rollouts for r in rows], None, 2))
    cols.append(("Final score", [r.final for r in rows], False, 3))
    header = "| Method | " + " | ".join(c[0] for c in cols) + " |"
    sep = "|---|" + "---:|" * len(cols)
    lines = [header, sep]
    marks = [_marks(vals, lower, digits) if lower is not None else [""] * len(rows) for _, vals, lower, digits in cols]
    for i, r in enumerate(rows):
        cells = []
        for (_, vals, _, digits), m in zip(cols, marks):
            txt = format_ratio(vals[i], digits)
            cells.append(f"{m[i]}{txt}{m[i]}" if m[i] and txt not in ("-", "n/a") else txt)
        lines.append(f"| {r.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
