"""An overrun: a call whose reconciliation is above its reservation.

A reservation is the most a call can bill by its request's own limits: every input token what is
sent can amount to (page images at their size bound, a prompt's bytes, an embedding batch's counted
tokens plus its special tokens) and the `max_tokens` it is sent with, where the API stops. So usage
above it — more tokens than the request allowed, or more money than was reserved — is usage the
request made impossible: a provider's or a gateway's accounting fault, or a bound of Pinakes' that is
wrong. Either way it is never accepted silently:

- it is recorded *as reported* (the reconciliation), never cut to the bound: the bill may well be
  what the provider reports, and the user is never told less than they may be billed;
- the ledger's own pair shows it — a reconciliation whose tokens or amount exceed its reservation's
  (`CallRecord.overran`) — so no writer can forget a marker, and every reader sees the same thing;
- `pnk budget` lists it (OVERRUNS, `overruns` in `--json`) and `pnk doctor` warns;
- no paid call is made, by the run that met it or any later one on this ledger, until it is
  resolved: `pnk budget --resolve CALL_ID --actual EUR` with what the provider's console shows it
  billed (a resolution supersedes the reconciliation, as it does an unknown outcome's reservation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from pinakes.budget.money import format_eur

if TYPE_CHECKING:
    # A type only: the budget's errors carry overruns and load with the package (every manifest
    # does), which must not load the ledger's modules (tests/test_lazy_imports.py).
    from pinakes.budget.windows import CallRecord

RESOLVE = "pnk budget --resolve {call_id} --actual EUR"


@dataclass(frozen=True)
class Overrun:
    """One open overrun: what the request allowed and reserved, and what its answer reported."""

    call_id: str
    operation: str
    operation_id: str
    model: str
    reserved_at: datetime
    reserved_eur: Decimal
    billed_eur: Decimal  # what the reconciliation recorded, at the usage reported
    allowed_input_tokens: int  # the reservation's bounds: what the request allowed
    allowed_output_tokens: int
    reported_input_tokens: int
    reported_output_tokens: int

    @classmethod
    def of(cls, call: CallRecord) -> Overrun | None:
        """The call's overrun, or None when it is not one (or no longer: resolved)."""
        if not call.overran:
            return None
        reservation, outcome = call.reservation, call.outcome
        assert reservation is not None and outcome is not None
        return cls(call.call_id, reservation.operation, reservation.operation_id, reservation.model,
                   reservation.ts, reservation.eur(), outcome.eur(), reservation.input_tokens,
                   reservation.output_tokens, outcome.input_tokens, outcome.output_tokens)

    @property
    def beyond_request(self) -> tuple[str, ...]:
        """The usage reported that the request made impossible, in words (empty: only the amount)."""
        reasons: list[str] = []
        if self.reported_output_tokens > self.allowed_output_tokens:
            reasons.append(f"{self.reported_output_tokens:,} output tokens where its max_tokens allowed "
                           f"{self.allowed_output_tokens:,}")
        if self.reported_input_tokens > self.allowed_input_tokens:
            reasons.append(f"{self.reported_input_tokens:,} input tokens where what was sent bounds them at "
                           f"{self.allowed_input_tokens:,}")
        return tuple(reasons)

    @property
    def resolve_command(self) -> str:
        return RESOLVE.format(call_id=self.call_id)

    def describe(self) -> str:
        """One sentence: which call, what it reported, what it is counted at against what was reserved."""
        reported = " and ".join(self.beyond_request) or "usage priced above its reservation"
        return (f"call {self.call_id} ({self.operation}, {self.model}) reported {reported}: recorded at "
                f"{format_eur(self.billed_eur)} as reported, above the {format_eur(self.reserved_eur)} reserved for it")

    def to_dict(self) -> dict[str, object]:
        return {"call_id": self.call_id, "operation": self.operation, "operation_id": self.operation_id,
                "model": self.model, "reserved_at": self.reserved_at.isoformat(),
                "reserved_eur": str(self.reserved_eur), "billed_eur": str(self.billed_eur),
                "allowed_tokens": {"input": self.allowed_input_tokens, "output": self.allowed_output_tokens},
                "reported_tokens": {"input": self.reported_input_tokens, "output": self.reported_output_tokens},
                "beyond_request": list(self.beyond_request), "resolve": self.resolve_command}


def open_overruns(calls: Iterable[CallRecord]) -> tuple[Overrun, ...]:
    """Every overrun no resolution has closed yet, in ledger order."""
    return tuple(overrun for call in calls if call.overran and (overrun := Overrun.of(call)) is not None)
