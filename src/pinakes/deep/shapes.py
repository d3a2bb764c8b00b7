"""What one `pnk ask --deep` call can cost at most, and so what a whole run reserves (spec §5).

Both calls of a round are priced at the same worst case — the question, the carried memory, final_k
passages at the chunk ceiling and the prompt, against one fixed output ceiling — so every call of a
run costs the same and `max_rounds x 2` of them is a ceiling the accountant can refuse before call 0.
Pricing the decompose call at the answer call's input over-reserves it; under-counting is the one
direction a budget may never be wrong in.

The input bound is measured rather than summed by hand: a request is built from maximal stand-ins
for every variable part (each clipped where it is placed, `prompts.py`) and its UTF-8 bytes counted,
a byte being an upper bound on a token. A run asserts each real request against the same number
before reserving it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from pinakes.deep import prompts
from pinakes.manifest import DEFAULT_DEEP_MODEL
from pinakes.search.confidence import HIGH, UNKNOWN
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.budget import CallShape
    from pinakes.manifest import Manifest

# What a run calls unless `[deep] model` names another priced model (checked at manifest load).
MODEL = DEFAULT_DEEP_MODEL
# The reply's ceiling. max_tokens truncates rather than bills, so this is the bound least safe to
# lower: the widest of 22 reconciled deep calls the spec records produced 660 tokens (spec §5); this
# is 6x that. A truncated reply is no result (the round ends, and says so).
OUTPUT_TOKENS = 4_096
# The structured-output schema the API adds, the system/user framing and the role markers.
REQUEST_OVERHEAD_TOKENS = 1_000
# Passages the memory carries from one round into the next: the latest answer's evidence.
MEMORY_PASSAGES = 3
# Queries a decomposition may add per round (more are dropped, in order).
MAX_QUERIES_PER_ROUND = 3
CHARS_PER_CHUNK_TOKEN = 16  # a chunk's character bound is max_tokens x 16 (chunking/chunker.py)


def passage_max_bytes(max_tokens: int) -> int:
    """A passage's text bound: the chunker's character ceiling, counted in bytes (ASCII text is
    never cut; text whose bytes exceed it is cut and marked truncated)."""
    return max_tokens * CHARS_PER_CHUNK_TOKEN


def max_input_tokens(final_k: int, chunk_max_tokens: int, model: str = MODEL) -> int:
    """The most input tokens either call of a round can send (to `model`, whose name is in the request)."""
    filler = "x"
    passage = prompts.Shown(text=filler * passage_max_bytes(chunk_max_tokens),
                            title=filler * prompts.LABEL_MAX_BYTES, heading=filler * prompts.LABEL_MAX_BYTES,
                            truncated=False)
    question = filler * prompts.QUESTION_MAX_BYTES
    finding = filler * prompts.FINDING_MAX_BYTES
    asked = [filler * prompts.QUERY_MAX_BYTES] * prompts.ASKED_SHOWN
    carried = [passage] * MEMORY_PASSAGES
    shown = [passage] * (MEMORY_PASSAGES + final_k)
    decompose = prompts.decompose_request(question, finding, asked, carried, model=model)
    answer = prompts.answer_request(question, finding, shown, model=model)
    # Markers grow by a digit past 9 and 99 passages: counted for the largest index there can be.
    marker_slack = 2 * (MEMORY_PASSAGES + final_k)
    text = max(prompts.request_bytes(decompose), prompts.request_bytes(answer)) + marker_slack
    return text + REQUEST_OVERHEAD_TOKENS


def call_shape(manifest: Manifest, *, unit: str) -> CallShape:
    """One call of this KB's deep run at its worst case, as the accountant prices it: to the model
    `[deep] model` names, which every request of the run is then sent to (loop.py reads it here)."""
    from pinakes.budget import CallShape

    model = manifest.deep.model
    return CallShape(model, max_input_tokens=max_input_tokens(manifest.retrieval.final_k,
                                                              manifest.chunking.max_tokens, model),
                     max_output_tokens=OUTPUT_TOKENS, unit=unit)


def run_shapes(manifest: Manifest, branch: str) -> list[CallShape]:
    """Every call a run on `branch` may make: one synthesis call, or two per round up to
    [deep] max_rounds, each round its own unit (what on_exceed = "partial" admits whole)."""
    if branch == "synthesis":
        return [call_shape(manifest, unit="synthesis")]
    return [call_shape(manifest, unit=f"round-{number}")
            for number in range(1, manifest.deep.max_rounds + 1) for _call in ("decompose", "answer")]


def request_fits(request: dict[str, object], shape: CallShape) -> bool:
    """Whether a built request stays inside the input its reservation priced."""
    return prompts.request_bytes(request) + REQUEST_OVERHEAD_TOKENS <= shape.max_input_tokens


def branch_for(level: str) -> str:
    """Confidence sizes the work (spec §4.2); it never decides whether --deep answers. High takes one
    synthesis call; medium and low the loop, which a high signal may stop early; unknown the loop
    run to its caps."""
    if level == HIGH:
        return "synthesis"
    return "unknown" if level == UNKNOWN else "decomposition"


def worst_case(manifest: Manifest, branch: str) -> tuple[Decimal, int]:
    """(EUR, calls) a run on `branch` would reserve, priced from the packaged table; nothing is
    spent or written (what `pnk ask` without --deep quotes)."""
    from pinakes.budget import load_prices
    from pinakes.budget.money import to_eur

    table = load_prices()
    total = Decimal(0)
    run = run_shapes(manifest, branch)
    for shape in run:
        price = table.price(shape.model)
        if price is None:
            raise RuntimeError(f"{shape.model} is not in the packaged price table (a Pinakes bug)")
        total += to_eur(price.cost_usd(shape.max_input_tokens, shape.max_output_tokens), table.usd_per_eur)
    return total, len(run)


@dataclass(frozen=True)
class DeepQuote:
    """What `pnk ask --deep` would do for a question the free search answered at some confidence, and
    what it would reserve: the run's plan, decided here so every caller quotes the same one."""

    branch: str  # "synthesis", "decomposition" or "unknown" (branch_for)
    eur: Decimal  # the worst case reserved under [budget] before the first call
    calls: int

    def calls_in_words(self) -> str:
        if self.branch == "synthesis":
            return "one synthesis call"
        return f"up to {counted(self.calls // 2, 'round')} of two calls"


def quote(manifest: Manifest, confidence_level: str) -> DeepQuote:
    """The deep run a free result at `confidence_level` leads to, priced; nothing is spent or written."""
    branch = branch_for(confidence_level)
    eur, calls = worst_case(manifest, branch)
    return DeepQuote(branch, eur, calls)
