"""What a `pnk ask --deep` run returns: the answer, what it rests on, how the loop ended, the cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.search.results import Passage

# What ended the run, and the sentence each says (ENDINGS[ended_by]).
ENDINGS = {
    "synthesis": "one synthesis call over the passages the free search retrieved (its confidence was high)",
    "sufficient": "the calibrated free signal was high for every query of the last round, and its answer "
                  "is grounded",
    "max_rounds": "[deep] max_rounds was reached",
    "budget": "the budget admitted no further round (on_exceed = \"partial\"): bounded by the budget, "
              "not by the evidence",
    "exhausted": "the decomposition proposed no query that had not already been asked",
    "refusal": "the model refused a call",
    "truncated": "a reply was cut off at its output ceiling (no result)",
    "malformed": "a reply was not the structured answer asked for (no result)",
    "ledger": "the ledger refused to record what a call cost, so no further call could be reserved "
              "(the reply that call paid for is kept)",
    "overrun": "a call reported usage above its reservation (an overrun), so no further call is made until "
               "it is resolved (the reply that call paid for is kept)",
}
# Endings that are a cap (what `unknown` confidence runs to, spec §4.2).
CAPS = ("max_rounds", "budget")


@dataclass(frozen=True)
class Citation:
    number: int  # as printed in the answer
    passage: Passage
    truncated: bool  # the model was shown a prefix of this passage

    def to_dict(self) -> dict[str, object]:
        passage = self.passage
        return {"number": self.number, "citation": passage.citation, "path": passage.path,
                "doc_id": passage.doc_id, "title": passage.title,
                "heading_path": list(passage.heading_path) if passage.heading_path else None,
                "char_start": passage.char_start, "char_end": passage.char_end,
                "page_start": passage.page_start, "page_end": passage.page_end,
                "truncated": self.truncated, "text": passage.text}


@dataclass
class CallRecord:
    """One call of the run (not its text: that goes to the transcript, when asked for)."""

    round: int  # 0 for the synthesis call
    kind: str  # "decompose" | "answer" | "synthesis"
    outcome: str  # Reply.kind
    reserved_eur: Decimal
    actual_eur: Decimal
    input_tokens: int
    output_tokens: int
    call_ids: tuple[str, ...]
    model: str = ""  # what it was sent to ([deep] model)

    def to_dict(self) -> dict[str, object]:
        return {"round": self.round, "kind": self.kind, "outcome": self.outcome, "model": self.model,
                "reserved_eur": str(self.reserved_eur), "actual_eur": str(self.actual_eur),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "call_ids": list(self.call_ids)}


@dataclass
class RoundRecord:
    number: int
    queries: list[str] = field(default_factory=list[str])
    levels: list[str] = field(default_factory=list[str])  # the free confidence of each query's search
    shown: int = 0  # passages the answer call was shown
    answered: bool | None = None  # None: the round's answer call did not complete
    cited: list[str] = field(default_factory=list[str])  # citations (path:locator) its answer resolved to

    def to_dict(self) -> dict[str, object]:
        return {"round": self.number, "queries": [{"query": q, "confidence": level}
                                                  for q, level in zip(self.queries, self.levels, strict=False)],
                "passages_shown": self.shown, "answered": self.answered, "cited": list(self.cited)}


@dataclass
class DeepResult:
    question: str
    branch: str  # "synthesis" | "decomposition" | "unknown"
    free_confidence: dict[str, object]
    ended_by: str
    answer: str | None  # None when no citation resolved: uncited text is withheld
    answered: bool
    reasons: list[str]  # why it is not an answer
    citations: list[Citation]
    unresolved: list[int]
    unsupported_numbers: list[str]
    rounds: list[RoundRecord]
    max_rounds: int
    calls: list[CallRecord]
    operation_id: str
    reserved_eur: Decimal  # the run's admitted worst case
    requested_eur: Decimal  # the worst case of every call the branch could make
    admitted_rounds: int
    blocked: list[dict[str, str]]  # what cut a partial plan short
    answer_round: int | None  # which round's answer this is (0: the synthesis call)
    notes: list[str] = field(default_factory=list[str])
    transcript: str | None = None
    kept_transcript: str | None = None  # the copy under .pinakes/transcripts/ (deep/transcripts.py)

    @property
    def actual_eur(self) -> Decimal:
        return sum((call.actual_eur for call in self.calls), Decimal(0))

    @property
    def bounded_by_budget(self) -> bool:
        return self.ended_by == "budget"

    def to_dict(self) -> dict[str, object]:
        return {
            "question": self.question, "answered": self.answered, "answer": self.answer,
            "not_an_answer_because": list(self.reasons),
            "citations": [citation.to_dict() for citation in self.citations],
            "unresolved_citations": list(self.unresolved), "unsupported_numbers": list(self.unsupported_numbers),
            "branch": self.branch, "free_confidence": self.free_confidence,
            "ended_by": self.ended_by, "ended_because": ENDINGS[self.ended_by],
            "bounded_by_budget": self.bounded_by_budget, "answer_round": self.answer_round,
            "rounds": [record.to_dict() for record in self.rounds], "rounds_taken": len(self.rounds),
            "max_rounds": self.max_rounds,
            "cost": {"reserved_eur": str(self.reserved_eur), "requested_eur": str(self.requested_eur),
                     "actual_eur": str(self.actual_eur), "admitted_rounds": self.admitted_rounds,
                     "blocked": list(self.blocked), "operation_id": self.operation_id,
                     "calls": [call.to_dict() for call in self.calls]},
            "notes": list(self.notes), "transcript": self.transcript, "kept_transcript": self.kept_transcript,
        }

    def render_text(self) -> str:
        """For a person; every KB-controlled string through `printable`."""
        from pinakes.budget.money import format_eur
        from pinakes.display import printable

        lines: list[str] = []
        if self.answer is not None:
            heading = "Answer" if self.answered else "Best effort (not an answer: " + "; ".join(self.reasons) + ")"
            lines.append(f"{heading}:")
            lines.append(printable(self.answer))
        else:
            lines.append("No answer: " + "; ".join(self.reasons) + ".")
        if self.citations:
            lines.append("")
            lines.append("Citations:")
            for citation in self.citations:
                passage = citation.passage
                where = printable(passage.citation)
                if passage.heading_path:
                    where += " (" + printable(" > ".join(passage.heading_path)) + ")"
                cut = " [the model saw a prefix]" if citation.truncated else ""
                lines.append(f"  [{citation.number}] {where}{cut}")
        if self.unresolved:
            lines.append("Cited passages it was never shown (not evidence): "
                         + ", ".join(str(n) for n in self.unresolved))
        if self.unsupported_numbers:
            lines.append("Numbers in no cited passage: " + ", ".join(printable(n) for n in self.unsupported_numbers))
        lines.append("")
        free = f"Free confidence {self.free_confidence.get('level')} ({self.free_confidence.get('source', 'unknown')})"
        if self.branch == "synthesis":
            lines.append(f"{free}: one synthesis call.")
        else:
            lines.append(f"{free}: {counted(len(self.rounds), 'round')} of at most {self.max_rounds}.")
            for record in self.rounds:
                asked = ", ".join(f"{printable(query)!r} ({level})"
                                  for query, level in zip(record.queries, record.levels, strict=False))
                done = ("answered" if record.answered else "not answered" if record.answered is False
                        else "no answer")
                lines.append(f"  round {record.number}: {asked or 'no new query'} -> {done}")
        lines.append(f"Ended by {self.ended_by}: {ENDINGS[self.ended_by]}.")
        if self.bounded_by_budget:
            lines.append(f"Bounded by the budget: {self.admitted_rounds} of {counted(self.max_rounds, 'round')} admitted.")
        made = sum(len(call.call_ids) for call in self.calls)
        lines.append(f"Cost: {format_eur(self.actual_eur)} actual over {counted(made, 'call')}; "
                     f"{format_eur(self.reserved_eur)} reserved at the worst case before the first call "
                     f"(operation {self.operation_id}).")
        lines.extend(f"note: {printable(note)}" for note in self.notes)
        if self.transcript:
            lines.append(f"transcript: {printable(self.transcript)}")
        if self.kept_transcript:
            lines.append(f"kept: {printable(self.kept_transcript)} (`pnk sync --clear-cache=transcripts` empties them)")
        return "\n".join(lines)
