"""The reranker behind an HTTP endpoint the user runs (`[rerank] provider = "http"`): TEI's `/rerank`,
or the Cohere/Jina-compatible `/rerank` of vLLM, Infinity, Jina and Cohere (search/rerank_api.py).

A search waits on it, and its endpoint may be down, slow, busy, broken, priced, or serving another
model under the same name. The rules are the remote embedding provider's (embed/provider_openai.py),
with a search's bounds:

- identity: the model's name plus its scores for a fixed probe (PROBE_QUERY against PROBE_TEXTS),
  taken before the first search reranks, again after any endpoint failure and at most every
  RECHECK_S in a long-running process. Scores are compared with a tolerance (PROBE_TOLERANCE), never
  hashed: a server's float noise (another batch shape, a GPU kernel) moves a score by ~1e-4, another
  model by tenths. The first probe is recorded in `.pinakes/rerank-identity.json` (the model's name,
  its probe scores, the day); a later probe that differs beyond the tolerance means another model
  answers under the configured name, and the search is not reranked (its scores are not the ones
  any confidence fit of this KB saw) until the record is deleted;
- deadline: `timeout_s` bounds one search's whole rerank (the identity probe when one is due,
  connecting, every byte, retries and their waits); a Retry-After past the deadline is not waited for;
- retries: a 408/429/5xx answer or a connection cut mid-answer is sent again, at most MAX_ATTEMPTS
  times, after its Retry-After or a short backoff; a refused connection is down, not busy, and
  fails at once; after a failure the endpoint is not asked again for COOLDOWN_S (an agent's next
  searches answer at once, without rerank, rather than each waiting out the deadline);
- answers: at most a size cap (`response_cap`), checked whole (one finite score per text sent);
- cost: with a price, every request is reserved and reconciled through the budget
  (search/rerank_spending.py); without one the endpoint is free, as the user asserts;
- the key: read from the variable `api_key_env` names, sent as a bearer token, kept nowhere else.

Every failure is a RerankEndpointError (or the accountant's BudgetError), which search turns into
results in fused order and a note saying why (search/rerank.py: `scores_or_note`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes import __version__
from pinakes.errors import ManifestError, PinakesError, RerankEndpointError
from pinakes.http_json import (
    CUT,
    NO_ANSWER,
    REFUSED,
    Answer,
    Dropped,
    Endpoint,
    JSONEndpoint,
    TimedOut,
    TooLarge,
    Unreachable,
    backoff_s,
    key_from_environment,
    past,
    quoted,
    remedy,
    retry_after_s,
    transient,
)
from pinakes.kb import KBPaths
from pinakes.search.rerank_api import APIS, MalformedAnswer, RerankAPI

if TYPE_CHECKING:
    from pinakes.budget.accountant import Plan
    from pinakes.embed.spending import Reservation
    from pinakes.jsontypes import JSONValue
    from pinakes.manifest.sections import HTTPRerank, RerankSection
    from pinakes.search.rerank import RerankRequest
    from pinakes.search.rerank_spending import RerankSpending

# Fixed forever: changing a probe text makes every recorded identity a mismatch.
PROBE_QUERY = "How far is the Moon from the Earth?"
PROBE_TEXTS = (
    "The Moon orbits the Earth at an average distance of about 384,400 kilometres.",
    "The Earth takes about 365.25 days to travel once around the Sun.",
    "Tomatoes need full sun, regular watering and a stake to climb.",
    "Der Mond ist im Mittel etwa 384.400 Kilometer von der Erde entfernt.",
)
PROBE_TOLERANCE = 0.02  # on sigmoid scores in [0, 1]; relative to the score where it is larger
IDENTITY_FILE = "rerank-identity.json"
MAX_ATTEMPTS = 3  # one request and at most two retries, all within timeout_s
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 2.0
COOLDOWN_S = 30.0
RECHECK_S = 600.0
RESPONSE_FLOOR_BYTES = 1 << 20  # every dialect's answer fits in this plus 4x what was sent (vLLM echoes texts)
THEN = "searches answer without rerank meanwhile, or set [retrieval] rerank = false"  # a remedy's last words


class RerankerChangedError(RerankEndpointError):
    """Another model answers under the configured reranker's name: its probe scores moved beyond the
    tolerance from the identity `.pinakes/rerank-identity.json` records. Search answers without rerank."""


@dataclass(frozen=True)
class RerankIdentity:
    model: str
    probe: tuple[float, ...]

    def distance(self, other: RerankIdentity) -> float:
        """How far the other probe's scores are, in units of the tolerance's scale (>1: another model)."""
        if len(self.probe) != len(other.probe):
            return float("inf")
        return max((abs(a - b) / max(1.0, abs(a), abs(b)) for a, b in zip(self.probe, other.probe, strict=True)),
                   default=0.0)

    def to_dict(self) -> dict[str, object]:
        return {"model": self.model, "probe": list(self.probe)}


@dataclass(frozen=True)
class RecordedIdentity:
    identity: RerankIdentity
    recorded: str  # the day, ISO

    @classmethod
    def read(cls, path: Path) -> RecordedIdentity | None:
        """The record, or None when there is none or it cannot be read (it is then written afresh)."""
        try:
            data: JSONValue = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        model, probe, recorded = data.get("model"), data.get("probe"), data.get("recorded")
        if not isinstance(model, str) or not isinstance(probe, list) or not isinstance(recorded, str):
            return None
        scores = [value for value in probe if isinstance(value, (int, float)) and not isinstance(value, bool)]
        if len(scores) != len(probe):
            return None
        return cls(RerankIdentity(model, tuple(float(value) for value in scores)), recorded)


class HTTPReranker:
    """A `Reranker` whose model runs behind an HTTP endpoint. Thread-safe."""

    def __init__(self, model: str, endpoint: HTTPRerank, batch_size: int, transport: JSONEndpoint,
                 spending: RerankSpending | None, record: Path | None) -> None:
        self.model = model
        self.endpoint = endpoint
        self.api: RerankAPI = APIS[endpoint.api]
        self.batch_size = batch_size
        self.identity: RerankIdentity | None = None
        self._transport = transport
        self._spending = spending
        self._record = record
        self._checked_at = 0.0
        self._blocked: tuple[float, str] | None = None  # (until, why): not asked until then
        self._lock = threading.Lock()
        self._pool: futures.ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"HTTPReranker({self.model!r}, {self.endpoint.api}, {self.endpoint.base_url!r})"

    # -- the Reranker protocol -------------------------------------------------------------------

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in order. Raises RerankEndpointError (or the budget's BudgetError)."""
        if not texts:
            return []
        with self._lock:
            now = time.monotonic()
            if self._blocked is not None and now < self._blocked[0]:
                raise RerankEndpointError(f"{self._blocked[1]} (not asked again for {self._blocked[0] - now:.0f} s)")
            verify = self.identity is None or self._blocked is not None or now - self._checked_at > RECHECK_S
        deadline = time.monotonic() + self.endpoint.timeout_s  # the probe, when due, shares it
        try:
            if verify:
                self._verify(deadline)
            scores = self._rerank(query, list(texts), deadline)
        except RerankEndpointError as exc:
            with self._lock:
                pause = RECHECK_S if isinstance(exc, RerankerChangedError) else COOLDOWN_S
                self._blocked = (time.monotonic() + pause, exc.message)
            raise
        with self._lock:
            self._blocked = None
        return scores

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self._transport.close()

    # -- identity ----------------------------------------------------------------------------------

    def _verify(self, deadline: float) -> None:
        """Probe the endpoint; compare with the recorded identity (or this process's last probe)."""
        probe = RerankIdentity(self.model, tuple(round(score, 6) for score in
                                                 self._rerank(PROBE_QUERY, list(PROBE_TEXTS), deadline)))
        recorded = RecordedIdentity.read(self._record) if self._record is not None else None
        if recorded is not None and recorded.identity.model == self.model:
            expected, since = recorded.identity, f"when this KB first used it ({recorded.recorded})"
        elif self.identity is not None:
            expected, since = self.identity, "earlier in this process"
        else:
            expected, since = None, ""
        if expected is not None and expected.distance(probe) > PROBE_TOLERANCE:
            moved = max(abs(a - b) for a, b in zip(expected.probe, probe.probe, strict=True)) \
                if len(expected.probe) == len(probe.probe) else float("inf")
            raise RerankerChangedError(
                f"{self._where()} scores the identity probe differently from {since} (a score moved by "
                f"{moved:.3f}, beyond the {PROBE_TOLERANCE} tolerance): another model answers under the name "
                f"{self.model}, and its scores are not the ones this KB's confidence was fitted on",
                remedy=f"if the server's model changed on purpose, delete .pinakes/{IDENTITY_FILE} (the next "
                       "search records the new one) and refit: `pnk eval --fit-confidence --write`; otherwise "
                       "restore the model on the server")
        if recorded is None or recorded.identity.model != self.model:
            self._write_record(probe)
        with self._lock:
            self.identity, self._checked_at = probe, time.monotonic()

    def _write_record(self, identity: RerankIdentity) -> None:
        """Record the first identity seen; a KB whose state directory cannot be written keeps none."""
        if self._record is None or not self._record.parent.is_dir():
            return
        from pinakes.atomic import atomic_write_text

        data = {**identity.to_dict(), "api": self.endpoint.api, "recorded": datetime.date.today().isoformat(),
                "tolerance": PROBE_TOLERANCE}
        with contextlib.suppress(PinakesError):
            atomic_write_text(self._record, json.dumps(data, indent=2) + "\n")

    # -- requests ----------------------------------------------------------------------------------

    def _rerank(self, query: str, texts: list[str], deadline: float) -> list[float]:
        """The texts in batches of `batch_size`, up to `concurrency` in flight, within `deadline` and
        (priced) one budget operation."""
        batches = [texts[start:start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        plan = self._spending.plan([self._spending.bound(query, batch) for batch in batches]) \
            if self._spending is not None else None
        if len(batches) == 1:
            return self._request(query, batches[0], deadline, plan)
        with self._lock:
            if self._pool is None:
                self._pool = futures.ThreadPoolExecutor(self.endpoint.concurrency, thread_name_prefix="pnk-rerank")
            pool = self._pool
        answers = [pool.submit(self._request, query, batch, deadline, plan) for batch in batches]
        try:
            return [score for answer in answers for score in answer.result()]
        finally:
            for answer in answers:
                answer.cancel()
            futures.wait(answers)

    def _request(self, query: str, texts: list[str], deadline: float, plan: Plan | None) -> list[float]:
        """One batch's scores: the request, sent again while the failure is transient and time is left."""
        body = self.api.body(self.model, query, texts)
        cap = RESPONSE_FLOOR_BYTES + 4 * sum(len(text.encode("utf-8")) for text in (query, *texts))
        bound = self._spending.bound(query, texts) if self._spending is not None else 0
        for attempt in range(1, MAX_ATTEMPTS + 1):
            wait = None
            with self._reserved(plan, bound) as call:
                try:
                    answer = self._transport.post(self.api.path, body, deadline=deadline, cap=cap)
                except Unreachable as exc:
                    _close(call, "void")
                    raise self._error(f"could not be reached ({exc})", kind=NO_ANSWER if exc.timed_out
                                      else REFUSED) from None
                except TimedOut:
                    _close(call, "unknown")
                    raise self._error(f"gave no complete answer within timeout_s = {self.endpoint.timeout_s:g} s",
                                      slow=True) from None
                except TooLarge as exc:
                    _close(call, bound if 200 <= exc.status < 300 else "void")
                    raise self._error(f"answered with more than it may ({exc})", answered=True) from None
                except Dropped as exc:
                    _close(call, "unknown")
                    if attempt >= MAX_ATTEMPTS or past(deadline):
                        raise self._error(f"{exc} ({attempt} attempts)", kind=CUT) from None
                    wait = backoff_s(attempt, FIRST_BACKOFF_S, MAX_BACKOFF_S)
                else:
                    if 200 <= answer.status < 300:
                        return self._scored(answer, texts, call, bound)
                    _close(call, "void")  # an error status: the endpoint refused it, nothing billed
                    wait = self._refused(answer, attempt, deadline)
            if past(deadline, wait):
                raise self._error(f"was still busy after {attempt} attempts and the next one would pass "
                                  f"timeout_s = {self.endpoint.timeout_s:g} s", slow=True)
            time.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _scored(self, answer: Answer, texts: list[str], call: Reservation | None, bound: int) -> list[float]:
        """A 2xx answer's scores; the reservation closed at the usage it reports (else its bound)."""
        try:
            payload = self.api.parse(answer.body)
        except MalformedAnswer as exc:
            _close(call, bound)
            raise self._error(f"answered, but {exc}", answered=True) from None
        if call is not None and self._spending is not None:
            billed = self._spending.billed(self.api.usage(payload, answer.headers))
            _close(call, billed if billed is not None else bound)
        try:
            return self.api.scores(payload, len(texts))
        except MalformedAnswer as exc:
            raise self._error(f"answered, but {exc}", answered=True) from None

    def _refused(self, answer: Answer, attempt: int, deadline: float) -> float:
        """The wait before sending a refused request again, or the error that ends it."""
        status = answer.status
        what = f"was refused with HTTP {status}{_detail(answer.body)}"
        if not transient(status) or attempt >= MAX_ATTEMPTS:
            raise self._error(what + (f" ({attempt} attempts)" if attempt > 1 else ""), status=status)
        asked = retry_after_s(answer.headers.get("retry-after"))
        if asked is not None and past(deadline, asked):
            raise self._error(f"{what}, asking to wait {asked:g} s, past timeout_s = {self.endpoint.timeout_s:g} s",
                              status=status)
        return asked if asked is not None else backoff_s(attempt, FIRST_BACKOFF_S, MAX_BACKOFF_S)

    def _reserved(self, plan: Plan | None, bound: int) -> contextlib.AbstractContextManager[Reservation | None]:
        if self._spending is None or plan is None:
            return contextlib.nullcontext(None)
        return self._spending.request(plan, bound)

    def _where(self) -> str:
        return f"the reranker at {self.endpoint.base_url} ({self.model})"

    def _error(self, what: str, *, kind: str = "", status: int | None = None, answered: bool = False,
               slow: bool = False) -> RerankEndpointError:
        """The failure, with this endpoint's own remedies first (its dialect, its path, its deadline);
        then those every endpoint shares (pinakes/http_json.py `remedy`)."""
        endpoint = self.endpoint
        if answered:
            fix = (f'check that [rerank] api = "{endpoint.api}" is the dialect the server speaks '
                   "(tei or cohere), and the server's logs")
        elif status == 404:
            fix = (f"check [rerank] base_url: {self.api.path} is posted under it (TEI: the server's root; "
                   "vLLM: ending in /v1; Cohere: https://api.cohere.com/v2) and that it serves "
                   f"{self.model!r}")
        elif slow:
            fix = ("check the server's logs and load, or raise [rerank] timeout_s; searches answer "
                   "without rerank meanwhile")
        else:
            fix = remedy(Endpoint("the reranker", "rerank", endpoint.base_url, endpoint.api_key_env, THEN), kind,
                         status) or f"check the reranker at {endpoint.base_url} and its logs; {THEN}"
        return RerankEndpointError(f"{self._where()} {what}", remedy=fix)


def _close(call: Reservation | None, outcome: int | str) -> None:
    """Close a reservation: at the units billed (an int), "void" (never billed) or "unknown" (left open)."""
    if call is None:
        return
    if isinstance(outcome, int):
        call.close(outcome)
    else:
        call.fail(outcome)


def _detail(body: bytes) -> str:
    """The error message an answer carries (`error`, `message`, `detail`), short, for the note."""
    try:
        data: JSONValue = json.loads(body)
    except ValueError:
        return ""
    detail = data.get("error", data.get("message", data.get("detail"))) if isinstance(data, dict) else None
    if isinstance(detail, dict):
        detail = detail.get("message")
    return f" ({quoted(detail)})" if isinstance(detail, str) and detail.strip() else ""


def load(section: RerankSection, request: RerankRequest) -> HTTPReranker:
    """The reranker the manifest's [rerank] names (the registry's `load` for "http"). Nothing is sent
    here: the endpoint is probed before the first search reranks, so a down server costs a search its
    rerank, never its results."""
    kb_root, budget, kb_id = request.kb_root, request.budget, request.kb_id
    endpoint = section.http
    if endpoint is None:
        raise ManifestError('[rerank] provider = "http" needs base_url and api',
                            remedy='add base_url = "http://127.0.0.1:8080" and api = "tei" (your server\'s)')
    priced = endpoint.input_usd_per_mtok is not None or endpoint.usd_per_1k_search_units is not None
    spending = None
    if priced:
        if kb_root is None or budget is None or kb_id is None:
            raise ManifestError(f"[rerank] prices {section.model}, and this command has no budget to spend it through",
                                remedy="run it as `pnk search` in the KB, where [budget] caps the spending")
        from pinakes.search.rerank_spending import RerankSpending

        spending = RerankSpending(kb_root, budget, kb_id, section.model, endpoint)
    headers = {"User-Agent": f"pinakes/{__version__}"}
    if endpoint.api_key_env is not None:
        headers["Authorization"] = f"Bearer {key_from_environment(endpoint.api_key_env, 'rerank', RerankEndpointError)}"
    record = KBPaths(kb_root).state_dir / IDENTITY_FILE if kb_root is not None else None
    return HTTPReranker(section.model, endpoint, section.batch_size, JSONEndpoint(endpoint.base_url, headers),
                        spending, record)
