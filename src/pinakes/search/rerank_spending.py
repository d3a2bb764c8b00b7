"""A priced HTTP reranker's requests, through the KB's budget (spec §5: the budget ships with anything
that can spend), by the rules of the priced embedding endpoint (embed/spending.py):

- the manifest's price becomes one more model in the table the accountant prices with (its exchange
  rate and dates unchanged);
- each search that reranks is one operation `rerank` (`per_operation_eur` bounds it), planned at its
  worst case before its first request; each request (each retry too) is a call reserved at its worst
  case before it is sent, reconciled at the usage its answer reports (at the worst case when the
  answer reports none), voided when the endpoint refused it or it never left, and left open as an
  unknown outcome when it may have billed without answering (a timeout, a dropped connection).

Vendors bill reranking in one of two units, and the price says which:
  `input_usd_per_mtok`       tokens (Jina, Voyage, a metered vLLM): at worst every UTF-8 byte of each
                             (query, text) pair is a token, plus SPECIAL_TOKENS_PER_PAIR;
  `usd_per_1k_search_units`  Cohere's search units: one query with up to SEARCH_UNIT_DOCUMENTS texts,
                             a text longer than SEARCH_UNIT_TOKENS (query included) counting as one
                             more per SEARCH_UNIT_TOKENS. The ledger records search units in its
                             token fields, under the model name with " [search units]" appended.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Generator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from pinakes.budget.accountant import CallShape, Plan
from pinakes.budget.ledger import RERANK_OPERATION
from pinakes.budget.prices import ModelPrice
from pinakes.embed.spending import PricedEndpoint, Reservation

if TYPE_CHECKING:
    from pathlib import Path

    from pinakes.manifest import BudgetSection
    from pinakes.manifest.sections import HTTPRerank
    from pinakes.search.rerank_api import Usage

SPECIAL_TOKENS_PER_PAIR = 4  # [CLS] query [SEP] text [SEP], with room for a model that adds one more
SEARCH_UNIT_TOKENS = 500
SEARCH_UNIT_DOCUMENTS = 100


class RerankSpending(PricedEndpoint):
    """The budget of one process's priced rerank requests for one KB."""

    def __init__(self, kb_root: Path, budget: BudgetSection, kb_id: str, model: str, endpoint: HTTPRerank) -> None:
        self.by_search_unit = endpoint.usd_per_1k_search_units is not None
        if self.by_search_unit:
            assert endpoint.usd_per_1k_search_units is not None
            model = f"{model} [search units]"
            per_million = endpoint.usd_per_1k_search_units * 1000  # the table's unit is a million
        else:
            assert endpoint.input_usd_per_mtok is not None
            per_million = endpoint.input_usd_per_mtok
        super().__init__(kb_root, budget, kb_id, ModelPrice(model, per_million, Decimal(0)))

    def bound(self, query: str, texts: Sequence[str]) -> int:
        """What one request of `texts` can bill at worst, in the price's unit."""
        query_bytes = len(query.encode("utf-8"))
        pairs = [query_bytes + len(text.encode("utf-8")) for text in texts]
        if not self.by_search_unit:
            return sum(pairs) + SPECIAL_TOKENS_PER_PAIR * len(pairs)
        pieces = sum(max(1, math.ceil(size / SEARCH_UNIT_TOKENS)) for size in pairs)
        return max(1, math.ceil(pieces / SEARCH_UNIT_DOCUMENTS))

    def billed(self, usage: Usage) -> int | None:
        return usage.search_units if self.by_search_unit else usage.tokens

    def plan(self, bounds: Sequence[int]) -> Plan:
        """One search's requests at their worst case: raises the accountant's BudgetError, before
        anything is sent, when a cap would be breached."""
        shapes = [CallShape(self.model, max_input_tokens=bound, max_output_tokens=1) for bound in bounds]
        with self._lock:
            return self._opened().plan(RERANK_OPERATION, shapes, interactive=False)

    @contextlib.contextmanager
    def request(self, plan: Plan, bound: int) -> Generator[Reservation]:
        """Reserve one request's worst case inside `plan` (raises BudgetError when it no longer fits);
        yield it to be closed."""
        with self._lock:
            reservation = self._reserved(plan, CallShape(self.model, max_input_tokens=bound, max_output_tokens=1))
        yield reservation
