"""A priced remote embedding endpoint's requests, through the KB's budget (spec §5: the budget ships
with anything that can spend).

The manifest's `input_usd_per_mtok` becomes one more model in the price table the accountant
prices with (the packaged table's exchange rate and dates unchanged), and every request is a call
of an `embed` operation: reserved at its worst case (every input token it may carry) before it is
sent, reconciled at the usage the response reports, voided when the endpoint refused it, and left
as an unknown outcome when it may have billed without answering (a timeout). A sync is one
operation (`per_operation_eur` bounds it); each query is its own.

A request's reservation is the bound computed from what it sends (every counted input token plus
the model's special tokens). An answer reporting more input tokens than that is an overrun
(budget/overrun.py): recorded at the usage reported, and `close` then raises BudgetOverrunError, so
the batch fails (a sync stops, a search falls back to keywords with a note) and no further request
is sent, by this process or any other on the ledger, until it is resolved.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Generator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.budget.accountant import Accountant, Call, CallShape, Plan
from pinakes.budget.ledger import EMBED_OPERATION
from pinakes.budget.prices import ModelPrice, load_prices

if TYPE_CHECKING:
    from pinakes.budget.settings import BudgetSection


@dataclass
class Reservation:
    """One reserved request; `close` with the billed tokens, or `fail` with how it failed."""

    call: Call
    lock: threading.Lock

    def close(self, input_tokens: int) -> None:
        """Reconcile at the input tokens the answer reports; BudgetOverrunError, once recorded, when
        they are more than what was sent can amount to."""
        with self.lock:
            self.call.reconcile(input_tokens=input_tokens, output_tokens=0)
        overrun = self.call.plan.overrun_error() if self.call.overrun is not None else None
        if overrun is not None:
            raise overrun

    def fail(self, outcome: str) -> None:
        if outcome == "void":  # refused by the endpoint or never sent: it cannot have billed
            with self.lock:
                self.call.void("refused")
        # "unknown": the reservation stays open at its worst case until `pnk budget --resolve`.


class PricedEndpoint:
    """The budget of one process's requests to one priced endpoint of one KB: the manifest's price
    as one more model of the packaged table (its exchange rate and dates unchanged), one accountant
    opened at the first request, its ledger read and appended one thread at a time. The remote
    embedding provider and the HTTP reranker (search/rerank_spending.py) each plan their operations
    through it."""

    def __init__(self, kb_root: Path, budget: BudgetSection, kb_id: str, price: ModelPrice) -> None:
        self.kb_root = kb_root
        self.budget = budget
        self.kb_id = kb_id
        self.model = price.model
        self.price = price
        self._accountant: Accountant | None = None
        self._lock = threading.Lock()

    def _opened(self) -> Accountant:
        """Under `_lock`."""
        if self._accountant is None:
            table = load_prices()
            prices = replace(table, models={**table.models, self.model: self.price})
            self._accountant = Accountant.open(self.kb_root, self.budget, kb_id=self.kb_id, prices=prices)
        return self._accountant

    def _reserved(self, plan: Plan, shape: CallShape) -> Reservation:
        """Under `_lock`: one request of `plan` reserved at its worst case (the accountant's
        BudgetError, before anything is sent, when a cap would be breached)."""
        record = self._opened().reserve_call(plan, shape)
        plan.call_ids.append(record.call_id)
        return Reservation(Call(plan, record, None), self._lock)


class EmbeddingSpending(PricedEndpoint):
    """The budget of one process's remote embedding requests for one KB."""

    def __init__(self, kb_root: Path, budget: BudgetSection, kb_id: str, model: str,
                 input_usd_per_mtok: Decimal) -> None:
        super().__init__(kb_root, budget, kb_id, ModelPrice(model, input_usd_per_mtok, Decimal(0)))
        self._documents: Plan | None = None

    @contextlib.contextmanager
    def request(self, model: str, max_input_tokens: int, *, query: bool) -> Generator[Reservation, None, None]:
        """Reserve one request's worst case (raises the accountant's BudgetError, before anything is
        sent, when a cap would be breached); yield it to be closed."""
        shape = CallShape(model, max_input_tokens=max_input_tokens, max_output_tokens=1)
        with self._lock:
            if query or self._documents is None:
                plan = self._opened().plan(EMBED_OPERATION, [shape], interactive=False)
                if not query:
                    self._documents = plan
            else:
                plan = self._documents
            reservation = self._reserved(plan, shape)
        yield reservation
