"""The one module of `pnk ask --deep` that loads the paid client (`.paid-path-allowlist`).

The rules both paid entry points obey — the key (`PINAKES_ANTHROPIC_API_KEY` or a file the user
names, passed explicitly, never logged), the SDK's own retries off, a failed call classified by
whether it billed, a reconciliation from the response's own usage — are `pinakes.paid`'s; this
module hands it the SDK and decides what a reply means for the loop:

- an error status the API marks as busy (408/429/5xx/529) was not billed, and is sent again, each
  attempt its own reservation, at most `pinakes.paid.MAX_ATTEMPTS` times; any other failure stops the run with
  `DeepAskFailedError`, naming the call to resolve when it may have billed;
- a billed reply that is a refusal, a truncation (`max_tokens`) or not the schema's JSON is *no
  result*: returned as such and never repaired, and the loop ends on it, saying which;
- a billed reply whose reconciliation the ledger would not take is still returned (it was paid for),
  carrying that UnrecordedOutcomeError (`unrecorded`): the loop makes no further call and the run
  ends raising it, with the result it kept;
- a billed reply whose usage overran its reservation (more output than `max_tokens`, more input than
  was sent: budget/overrun.py) is returned likewise, carrying the BudgetOverrunError (`overrun`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes import paid
from pinakes.budget.errors import BudgetOverrunError, UnrecordedOutcomeError
from pinakes.errors import DeepAskFailedError, MissingExtraError, PaidCallError

if TYPE_CHECKING:
    from pinakes.budget import CallShape, Plan
    from pinakes.jsontypes import JSONValue
    from pinakes.paid import ApiKey

_RETRY = "ask the question again"


@dataclass(frozen=True)
class Reply:
    """One billed answer. `kind`: "ok" (`data` is the parsed object), "refusal", "truncated" or
    "malformed" (no result)."""

    kind: str
    data: dict[str, JSONValue] | None
    raw: str
    eur: Decimal  # what its reconciliation recorded
    input_tokens: int
    output_tokens: int
    call_ids: tuple[str, ...]  # every attempt's reservation, the answered one last
    # The call billed but the ledger refused its reconciliation: no further call can be reserved.
    unrecorded: UnrecordedOutcomeError | None = None
    # Its usage overran the reservation (recorded as reported): no further call is reserved.
    overrun: BudgetOverrunError | None = None


def read_key(key_file: Path | None) -> ApiKey:
    """The API key, read before anything is planned (an ApiKeyError names the variable or file)."""
    return paid.read_api_key(key_file)


def make_client(key: ApiKey) -> paid.Client:
    return paid.make_client(_sdk(), key)


def send(client: paid.Client, plan: Plan, shape: CallShape, request: dict[str, object], *, what: str,
         sleep: Callable[[float], None] = time.sleep) -> Reply:
    """Make one budgeted request; BudgetExceededError (the call was never made) passes through."""
    try:
        answer, call_ids = paid.paid_call_retrying(_sdk(), client, plan, shape, request, unit=shape.unit,
                                                   retry=_RETRY, sleep=sleep)
    except PaidCallError as exc:
        attempts = f" after {exc.attempts} attempts" if exc.attempts > 1 else ""
        raise DeepAskFailedError(f"the {what} call: {exc.message}{attempts}", remedy=exc.remedy,
                                 call_ids=exc.call_ids) from None
    except UnrecordedOutcomeError as exc:
        if not isinstance(exc.answer, paid.PaidAnswer):
            raise  # it billed nothing (a void the ledger refused): nothing to keep
        return _reply(exc.answer, (exc.call_id,), unrecorded=exc)
    return _reply(answer, call_ids, overrun=plan.overrun_error() if answer.overrun is not None else None)


def _reply(answer: paid.PaidAnswer, call_ids: tuple[str, ...], *, unrecorded: UnrecordedOutcomeError | None = None,
           overrun: BudgetOverrunError | None = None) -> Reply:
    input_tokens, output_tokens = paid.billed_tokens(answer.message)
    kind, data, raw = _classify(answer.message)
    return Reply(kind, data, raw, answer.cost_eur, input_tokens, output_tokens, call_ids, unrecorded, overrun)


def _classify(message: paid.Message) -> tuple[str, dict[str, JSONValue] | None, str]:
    raw = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
    if message.stop_reason == "refusal":
        return "refusal", None, raw
    if message.stop_reason in ("max_tokens", "model_context_window_exceeded"):
        return "truncated", None, raw  # a length finish is no result, however much of it parses
    try:
        data: JSONValue = json.loads(raw)
    except ValueError:
        return "malformed", None, raw
    return ("ok", data, raw) if isinstance(data, dict) else ("malformed", None, raw)


def _sdk() -> paid.SDK:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingExtraError("claude", "pnk ask --deep", missing_module="anthropic") from exc
    return anthropic
