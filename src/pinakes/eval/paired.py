"""Paired before/after comparison of two outcome files, and the sign test it rests on (spec §7.3).

Six aggregates cannot say which questions moved; rows paired by id can. A question is "right" when
an answerable one was found in the top k, or a no-answer one abstained (confidence low); a no-answer
question whose confidence was unknown in either run is not comparable and is left out.

The sign test is exact and one-sided: under "the change does nothing", each moved question is a
fair coin, and p is the chance of at least `improved` heads among `improved + worsened` tosses.
One-sided is what the spec's own number implies — §7.3 quotes sign_test(4, 0) = 0.0625, which is
0.5**4; the two-sided value would be 0.125 — and it is the question a claimed improvement asks.
`two_sided=True` gives the other. The improvable pool (questions still wrong before) bounds what any
change can show: if every one of them improved, p would be sign_test(pool, 0), and a pool too small
to reach p < 0.05 is a power limit of the corpus, not evidence about the change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import comb

from pinakes.eval.baseline import header_changes
from pinakes.eval.outcomes import Outcome, OutcomesFile

SIGNIFICANCE = 0.05


def sign_test(improved: int, worsened: int, *, two_sided: bool = False) -> float:
    """Exact sign test p-value for `improved` against `worsened` paired changes (ties dropped)."""
    if improved < 0 or worsened < 0:
        raise ValueError("counts must be non-negative")
    moved = improved + worsened
    if moved == 0:
        return 1.0
    at_least = sum((comb(moved, heads) for heads in range(improved, moved + 1)), 0)
    upper = Fraction(at_least, 2**moved)
    if not two_sided:
        return float(upper)
    at_most = sum((comb(moved, heads) for heads in range(improved + 1)), 0)
    lower = Fraction(at_most, 2**moved)
    return float(min(Fraction(1), 2 * min(upper, lower)))


def rises_and_falls(after: Mapping[str, float], before: Mapping[str, float],
                    tolerance: float = 1e-9) -> tuple[int, int]:
    """Per-question scores paired by key: how many rose and how many fell by more than `tolerance`
    (float noise is a tie, which the sign test drops). Keys missing from `before` are not paired."""
    paired = [(after[key], before[key]) for key in after if key in before]
    return (sum(1 for new, old in paired if new > old + tolerance),
            sum(1 for new, old in paired if new < old - tolerance))


def is_right(row: Outcome) -> bool | None:
    """Whether the run did the right thing for this question; None when that cannot be said."""
    if row.kind != "no-answer":
        return bool(row.hit)
    if row.confidence == "unknown":
        return None
    return row.confidence == "low"


@dataclass
class PairedComparison:
    paired: int = 0
    improved: list[str] = field(default_factory=list[str])
    worsened: list[str] = field(default_factory=list[str])
    not_comparable: list[str] = field(default_factory=list[str])
    kind_changed: list[str] = field(default_factory=list[str])
    only_before: list[str] = field(default_factory=list[str])
    only_after: list[str] = field(default_factory=list[str])
    improvable_pool: int = 0  # paired questions that were wrong before
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict[str, dict[str, int]])
    header_changes: list[str] = field(default_factory=list[str])

    @property
    def p_value(self) -> float:
        return sign_test(len(self.improved), len(self.worsened))

    @property
    def best_possible_p(self) -> float:
        return sign_test(self.improvable_pool, 0)

    def to_dict(self) -> dict[str, object]:
        return {
            "paired": self.paired,
            "improved": self.improved,
            "worsened": self.worsened,
            "p_value": self.p_value,
            "test": "exact sign test, one-sided (improvement)",
            "improvable_pool": self.improvable_pool,
            "best_possible_p": self.best_possible_p,
            "can_license_improvement": self.best_possible_p < SIGNIFICANCE,
            "not_comparable": self.not_comparable,
            "kind_changed": self.kind_changed,
            "only_before": self.only_before,
            "only_after": self.only_after,
            "by_kind": self.by_kind,
            "header_changes": self.header_changes,
        }


def compare_outcomes(before: OutcomesFile, after: OutcomesFile) -> PairedComparison:
    result = PairedComparison(header_changes=header_changes(before.header, after.header))
    after_rows = {row.id: row for row in after.rows}
    before_ids = {row.id for row in before.rows}
    result.only_after = [row.id for row in after.rows if row.id not in before_ids]
    for old in before.rows:
        new = after_rows.get(old.id)
        if new is None:
            result.only_before.append(old.id)
            continue
        if new.kind != old.kind:
            result.kind_changed.append(old.id)
            continue
        was, now = is_right(old), is_right(new)
        if was is None or now is None:
            result.not_comparable.append(old.id)
            continue
        result.paired += 1
        tally = result.by_kind.setdefault(old.kind, {"paired": 0, "improved": 0, "worsened": 0})
        tally["paired"] += 1
        if not was:
            result.improvable_pool += 1
        if now and not was:
            result.improved.append(old.id)
            tally["improved"] += 1
        elif was and not now:
            result.worsened.append(old.id)
            tally["worsened"] += 1
    return result


def render_comparison(result: PairedComparison) -> str:
    lines = [f"paired questions: {result.paired}",
             f"improved: {len(result.improved)}" + (f" ({', '.join(result.improved)})" if result.improved else ""),
             f"worsened: {len(result.worsened)}" + (f" ({', '.join(result.worsened)})" if result.worsened else ""),
             f"sign test (exact, one-sided): p = {result.p_value:.4g}"]
    for kind, tally in result.by_kind.items():
        lines.append(f"  {kind}: +{tally['improved']} -{tally['worsened']} of {tally['paired']}")
    verdict = ("can" if result.best_possible_p < SIGNIFICANCE else "cannot")
    lines.append(f"improvable pool: {result.improvable_pool} (if all improved, p = {result.best_possible_p:.4g}; "
                 f"this set {verdict} license an improvement at p < {SIGNIFICANCE})")
    for label, ids in (("not comparable (confidence unknown)", result.not_comparable),
                       ("kind changed", result.kind_changed), ("only in BEFORE", result.only_before),
                       ("only in AFTER", result.only_after)):
        if ids:
            lines.append(f"{label}: {', '.join(ids)}")
    if result.header_changes:
        lines.append("configuration changes:")
        lines.extend(f"  {change}" for change in result.header_changes)
    return "\n".join(lines)
