"""`pnk ask --deep`: the bounded, budgeted, cited answer loop (spec §4.2, §4.3, §5).

    free search of the question (€0)
     └─ confidence high    → one synthesis call over those passages
     └─ medium / low       → the decomposition loop, which may stop early when the free signal says so
     └─ unknown            → the same loop, run to its caps (no early stop is possible without a signal)
    the whole run priced at its worst case and reserved through the accountant before call 0

A round is two calls (`prompts.py`): decompose the question and the memory into new search queries
(the cursor never re-asks one), search each over this KB with the caller's filters, merge at most
final_k passages, and answer from the memory's passages plus those. Sufficiency is the calibrated
free signal of the round's own searches, never the model's opinion: the loop stops early only when
every query of the round retrieved at confidence high *and* its answer is grounded. The round cap
ends in a best-effort answer, not a failure; so does a budget that admits fewer rounds under
`on_exceed = "partial"`, labelled as bounded by the budget. A refusal or a truncated reply ends the
loop on what earlier rounds established. Which of these ended it is always in the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.budget import BudgetExceededError, BudgetOverrunError, UnrecordedOutcomeError
from pinakes.deep import calls, prompts, shapes
from pinakes.deep.grounding import Grounding, ground, renumber
from pinakes.deep.memory import Carried, Memory
from pinakes.deep.result import CallRecord, Citation, DeepResult, RoundRecord
from pinakes.jsontypes import is_list
from pinakes.kb import KBPaths
from pinakes.search.confidence import HIGH

if TYPE_CHECKING:
    from pinakes import paid
    from pinakes.budget import CallShape, Plan
    from pinakes.jsontypes import JSONValue
    from pinakes.lexical.filters import SearchFilters
    from pinakes.manifest import Manifest
    from pinakes.search.core import Searcher
    from pinakes.search.results import Passage, SearchResult

Prompt = Callable[[str], bool]


def ask_deep(kb_root: Path | str, question: str, *, filters: SearchFilters | None = None,
             manifest: Manifest | None = None, searcher: Searcher | None = None, client: paid.Client | None = None,
             api_key_file: Path | None = None, interactive: bool = False, confirm: Prompt | None = None,
             transcript: Path | None = None, sleep: Callable[[float], None] = time.sleep) -> DeepResult:
    """Answer `question` over the KB at `kb_root`, spending through the accountant (`operation="ask"`).

    Raises before any call: UsageError (the question), ApiKeyError, and the accountant's refusals
    (BudgetRefusedError naming every blocked window, SpendNotConfirmedError without a terminal).
    During the run: BudgetExceededError under on_exceed = "abort", DeepAskFailedError at the API, and
    UnrecordedOutcomeError when the ledger refused to record a call that billed, and BudgetOverrunError
    when a call's usage overran its reservation (or an open overrun refused the next call): the run
    stops before its next call, and the result it had (that call's reply included) is the error's
    `answer`, a DeepResult, written to `transcript` first when one was asked for: paid for, so never
    discarded."""
    from pinakes.budget import Accountant
    from pinakes.lexical.filters import SearchFilters
    from pinakes.manifest import load_manifest
    from pinakes.search.core import Searcher

    root = Path(kb_root)
    question = prompts.check_question(question)
    manifest = manifest or load_manifest(KBPaths(root).manifest)
    filters = filters or SearchFilters()
    own_searcher = searcher is None
    searcher = searcher or Searcher.for_kb(root, manifest)
    try:
        free = searcher.search(question, filters=filters)
        branch = shapes.branch_for(free.confidence.level)
        key = calls.read_key(api_key_file) if client is None else None
        accountant = Accountant.open(root, manifest.budget, kb_id=manifest.kb.id)
        plan = accountant.plan("ask", shapes.run_shapes(manifest, branch), interactive=interactive,
                               prompt=confirm)
        if client is None:
            assert key is not None
            client = calls.make_client(key)
        run = _Run(manifest, searcher, client, plan, question, filters, free, branch, sleep)
        result = run.synthesis() if branch == "synthesis" else run.loop()
        _write_transcripts(KBPaths(root), transcript, run.exchanges, result)
        stop = run.unrecorded or run.overrun
        if stop is not None:
            stop.answer = result
            raise stop
        return result
    finally:
        if own_searcher:
            searcher.close()


@dataclass
class _Answer:
    """A completed answer call: the passages it was shown, what it said, what that resolves to."""

    round: int
    shown: list[Carried]
    text: str
    grounding: Grounding


class _Run:
    def __init__(self, manifest: Manifest, searcher: Searcher, client: paid.Client, plan: Plan, question: str,
                 filters: SearchFilters, free: SearchResult, branch: str, sleep: Callable[[float], None]):
        self.manifest = manifest
        self.searcher = searcher
        self.client = client
        self.plan = plan
        self.question = question
        self.filters = filters
        self.free = free
        self.branch = branch
        self.sleep = sleep
        self.passage_bytes = shapes.passage_max_bytes(manifest.chunking.max_tokens)
        self.calls: list[CallRecord] = []
        self.rounds: list[RoundRecord] = []
        self.answers: list[_Answer] = []
        self.exchanges: list[dict[str, object]] = []  # for the transcript, when asked for
        self.notes: list[str] = []
        # A call billed but the ledger refused its outcome, or overran its reservation: no further
        # call is made (calls.py).
        self.unrecorded: UnrecordedOutcomeError | None = None
        self.overrun: BudgetOverrunError | None = None

    # -- the two branches ---------------------------------------------------------------------

    def synthesis(self) -> DeepResult:
        shape = self.plan.calls[0]
        shown = [self._show(passage) for passage in self.free.passages]
        request = prompts.answer_request(self.question, None, [item.shown for item in shown],
                                         model=shape.model)
        reply = self._send(shape, request, round_number=0, kind="synthesis")
        if reply.kind == "ok":
            self._grounded_answer(0, shown, reply.data or {})
            return self._result("synthesis")
        return self._result(reply.kind)

    def loop(self) -> DeepResult:
        memory = Memory()
        rounds_admitted = self.plan.admitted_units
        for number in range(1, self.manifest.deep.max_rounds + 1):
            if number > rounds_admitted:
                return self._result("budget")
            decompose_shape, answer_shape = self.plan.calls[2 * (number - 1): 2 * number]
            record = RoundRecord(number)
            self.rounds.append(record)
            request = prompts.decompose_request(self.question, memory.finding, memory.asked,
                                                [item.shown for item in memory.carried], model=decompose_shape.model)
            try:
                reply = self._send(decompose_shape, request, round_number=number, kind="decompose")
            except BudgetExceededError as exc:
                return self._budget_stop(exc)
            if reply.kind != "ok":
                return self._result(reply.kind)
            if self._stopped():  # its queries were paid for, but answering them takes a call
                return self._result(self._stopped())
            queries = memory.new_queries(_strings((reply.data or {}).get("queries")))
            if not queries:
                return self._result("exhausted")
            memory.ask(queries)
            record.queries = queries
            shown = self._retrieve(queries, record, exclude=memory.carried)
            shown = list(memory.carried) + shown
            record.shown = len(shown)
            request = prompts.answer_request(self.question, memory.finding, [item.shown for item in shown],
                                             model=answer_shape.model)
            try:
                reply = self._send(answer_shape, request, round_number=number, kind="answer")
            except BudgetExceededError as exc:
                return self._budget_stop(exc)
            if reply.kind != "ok":
                return self._result(reply.kind)
            answer = self._grounded_answer(number, shown, reply.data or {})
            record.answered = answer.grounding.answered
            record.cited = [shown[index - 1].passage.citation for index in answer.grounding.resolved]
            memory.fold(answer.text, [shown[index - 1] for index in answer.grounding.resolved])
            # Sufficiency is the free signal's to decide (spec §4.3), and only a calibrated one can.
            if (self.branch == "decomposition" and answer.grounding.answered
                    and all(level == HIGH for level in record.levels)):
                return self._result("sufficient")
            if self._stopped():
                return self._result(self._stopped())
        return self._result("max_rounds")

    # -- steps --------------------------------------------------------------------------------

    def _retrieve(self, queries: Sequence[str], record: RoundRecord, exclude: Sequence[Carried]) -> list[Carried]:
        """Each query searched over this KB with the caller's filters; the results merged (taking
        each query's best first, in turn), without duplicates or passages the memory carries,
        cut to final_k."""
        results = [self.searcher.search(query, filters=self.filters) for query in queries]
        record.levels = [result.confidence.level for result in results]
        seen = {(item.passage.doc_id, item.passage.ordinal) for item in exclude}
        merged: list[Carried] = []
        depth = max((len(result.passages) for result in results), default=0)
        for rank in range(depth):
            for result in results:
                if rank < len(result.passages):
                    passage = result.passages[rank]
                    key = (passage.doc_id, passage.ordinal)
                    if key not in seen:
                        seen.add(key)
                        merged.append(self._show(passage))
        return merged[: self.manifest.retrieval.final_k]

    def _show(self, passage: Passage) -> Carried:
        return Carried(prompts.show(passage.text, passage.title, passage.heading_path, self.passage_bytes), passage)

    def _send(self, shape: CallShape, request: dict[str, object], *, round_number: int, kind: str) -> calls.Reply:
        if not shapes.request_fits(request, shape):
            raise AssertionError(f"a {kind} request outgrew the input its reservation priced (a Pinakes bug)")
        what = f"{kind} call of round {round_number}" if round_number else "synthesis call"
        reply = calls.send(self.client, self.plan, shape, request, what=what.removesuffix(" call"),
                           sleep=self.sleep)
        # Every call of a run has the same shape (shapes.py), so the admitted worst case divides evenly.
        reserved = self.plan.worst_case_eur / self.plan.admitted_calls * len(reply.call_ids)
        self.calls.append(CallRecord(round_number, kind, reply.kind, reserved, reply.eur, reply.input_tokens,
                                     reply.output_tokens, reply.call_ids, shape.model))
        self.exchanges.append({"round": round_number, "kind": kind, "request": request, "reply": reply.raw,
                               "outcome": reply.kind})
        if reply.unrecorded is not None:
            self.unrecorded = reply.unrecorded
        if reply.overrun is not None:
            self.overrun = reply.overrun
        return reply

    def _stopped(self) -> str:
        """Why no further call may be made ("ledger", "overrun"), or "" when calls may go on."""
        return "ledger" if self.unrecorded is not None else "overrun" if self.overrun is not None else ""

    def _grounded_answer(self, number: int, shown: list[Carried], data: Mapping[str, JSONValue]) -> _Answer:
        text = data.get("answer")
        text = text if isinstance(text, str) else ""
        # the model's JSON, not checked for shape: a non-list fails here as it always did
        cited = [item for item in _strings(data.get("citations")) if isinstance(item, int) and not isinstance(item, bool)]
        grounding = ground(text, cited, [item.shown.text for item in shown], self.question)
        answer = _Answer(number, shown, text, grounding)
        self.answers.append(answer)
        return answer

    def _budget_stop(self, exc: BudgetExceededError) -> DeepResult:
        """A call's reservation was refused mid-run (another process spent meanwhile): under
        "abort" the run is a failure; under "partial" it returns what completed rounds established.
        An open overrun stops it under either, keeping what it paid for (ask_deep raises it)."""
        if isinstance(exc, BudgetOverrunError):
            self.overrun = exc
            return self._result("overrun")
        if self.manifest.budget.on_exceed != "partial":
            raise exc
        self.notes.append("a call's reservation was refused mid-run: "
                          + ", ".join(window.window for window in self.plan.stopped_by))
        return self._result("budget")

    # -- the result ---------------------------------------------------------------------------

    def _result(self, ended_by: str) -> DeepResult:
        chosen = _best(self.answers)
        citations: list[Citation] = []
        answer_text: str | None = None
        grounding: Grounding | None = None
        if chosen is not None:
            grounding = chosen.grounding
            mapping = {index: number for number, index in enumerate(grounding.resolved, start=1)}
            citations = [Citation(number, chosen.shown[index - 1].passage, chosen.shown[index - 1].shown.truncated)
                         for index, number in mapping.items()]
            if grounding.resolved:
                answer_text = renumber(chosen.text, mapping)
        reasons = list(grounding.reasons) if grounding else ["no answer call completed"]
        plan = self.plan
        return DeepResult(
            question=self.question, branch=self.branch, free_confidence=self.free.confidence.to_dict(),
            ended_by=ended_by, answer=answer_text, answered=bool(grounding and grounding.answered),
            reasons=reasons, citations=citations,
            unresolved=list(grounding.unresolved) if grounding else [],
            unsupported_numbers=list(grounding.unsupported_numbers) if grounding else [],
            rounds=self.rounds, max_rounds=self.manifest.deep.max_rounds, calls=self.calls,
            operation_id=plan.operation_id, reserved_eur=plan.worst_case_eur, requested_eur=plan.requested_eur,
            admitted_rounds=plan.admitted_units if self.branch != "synthesis" else 0,
            blocked=[window.to_dict() for window in (*plan.blocked, *plan.stopped_by)],
            answer_round=chosen.round if chosen else None, notes=self.notes,
        )


def _best(answers: Sequence[_Answer]) -> _Answer | None:
    """The answer a run returns: the latest that is an answer, else the latest whose citations
    resolved at all (a best effort, labelled), else the latest."""
    predicates: tuple[Callable[[_Answer], bool], ...] = (
        lambda a: a.grounding.answered, lambda a: bool(a.grounding.resolved), lambda a: True)
    for predicate in predicates:
        for answer in reversed(answers):
            if predicate(answer):
                return answer
    return None


def _strings(value: object) -> list[object]:
    return list(value) if is_list(value) else []


def _write_transcripts(paths: KBPaths, asked: Path | None, exchanges: list[dict[str, object]],
                       result: DeepResult) -> None:
    """Every request and reply of the run, verbatim, beside the result: to `--transcript` when asked
    for, and kept under .pinakes/transcripts/ whenever the run made a paid call (deep/transcripts.py).
    Only these hold the question and document text; the ledger never does."""
    from pinakes.deep import transcripts

    kept = transcripts.kept_path(paths.transcripts, result.operation_id) if result.calls else None
    result.kept_transcript = str(kept) if kept is not None else None
    if asked is not None:
        result.transcript = str(asked)
    document: dict[str, object] = {"result": result.to_dict(), "exchanges": exchanges}
    if asked is not None:
        transcripts.write(asked, document)
    if kept is None:
        return
    try:
        transcripts.write(kept, document)
        transcripts.prune(paths.transcripts)
    except OSError as exc:  # the answer was paid for: a full disk must not cost it
        result.kept_transcript = None
        result.notes.append(f"the transcript could not be kept in {paths.transcripts} "
                            f"({exc.strerror or exc}); the answer is whole")
