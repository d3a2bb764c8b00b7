"""The remote provider: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, vLLM, TEI,
llama.cpp, LM Studio, OpenAI), configured by the official `openai` client (the `[remote]` extra:
its key, headers and error classes) and posted by embed/plain_http.py (why: its docstring).

A remote model has no weights file to digest, and the server may swap the model behind the same
name, truncate silently, return the wrong number of vectors, or be down. So:

- identity: the vectors the endpoint returns for a fixed probe set, compared by cosine with the
  ones the index recorded, within a tolerance that noise stays inside and another model does not
  (embed/remote_identity.py). They are asked for on every load (a sync's start, a searcher's first
  query), again by a long-running searcher every `RECHECK_INTERVAL_S` and after any failed
  request, so a swapped model is a model change (embed/coherence.py), never unrelated passages;
- every response is checked: one vector per input, in order, of the manifest's `dim`, finite, and
  (with an exact tokenizer) usage that shows no truncation. Anything else fails the batch;
- time and size: every request has one deadline, connect to last byte (`timeout_s`), and a
  search one for all its requests and waits (`search_timeout_s`), never a timeout per read; an
  answer larger than its request can bring back is refused unread (embed/plain_http.py);
- faults: 408/429/5xx, timeouts and a connection cut mid-answer are retried with backoff, at most
  `MAX_ATTEMPTS` times (a query: `QUERY_ATTEMPTS`), honouring Retry-After (up to
  `paid.MAX_RETRY_WAIT_S`, and never past a search's deadline); an endpoint that refuses the
  connection is down, not busy, and fails at once (a search then answers with keyword results, a
  sync stops before writing). Each failure's remedy names what that failure needs
  (embed/remote_failures.py);
- cost: with `input_usd_per_mtok`, every request is reserved and reconciled through the budget
  (embed/spending.py); without it the endpoint is free, as the user asserts.

The client's own retries are off: each attempt is its own request, reserved and closed on its own.
"""

from __future__ import annotations

import binascii
import json
import math
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pinakes.embed._common import refuse_too_long
from pinakes.embed.base import ModelIdentity
from pinakes.embed.remote_failures import answered_error, deadline_error, failure_error
from pinakes.embed.remote_identity import (
    MIN_PROBE_COSINE,
    PROBE_TEXTS,
    fingerprint_of,
    probe_agreement,
    same_model,
)
from pinakes.embed.tokens import TokenCounter
from pinakes.errors import EmbeddingEndpointError, ManifestError, MissingExtraError

if TYPE_CHECKING:
    import contextlib

    import httpx2
    import numpy as np
    from tokenizers import Tokenizer

    from pinakes.embed.loader import LoadRequest
    from pinakes.embed.plain_http import EmbeddingsEndpoint
    from pinakes.embed.settings import RemoteEmbedding
    from pinakes.embed.spending import EmbeddingSpending, Reservation
    from pinakes.embed.untyped import OpenAIModule

PROVIDER = "openai-compatible"
EXTRA = "remote"
MAX_ATTEMPTS = 5  # one request and at most four retries
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
# A query waits for one retry at most: an agent would rather have keyword results now.
QUERY_ATTEMPTS = 2
# How often a long-running searcher (`pnk serve`) asks for the probe again, before the search that
# comes due: one small request a minute at most, so a model swapped behind the same name answers
# keyword results with a note within a minute (and at the first search after any failed request,
# the usual sign of a server restarted with another model), never unrelated passages for long.
RECHECK_INTERVAL_S = 60.0
# An answer's size cap: every number of every vector it should hold at this many bytes (a JSON
# float32 takes at most ~16, "-1.2345678e-05, "; base64 5.3), plus room for the rest of the JSON.
# A batch of 32 x 1,024 may bring 2 MB back; a server sending 300 MB is refused, unread.
ANSWER_BYTES_PER_NUMBER = 32
ANSWER_SLACK_BYTES = 1 << 20
DIMENSION_READ_NUMBERS = 16384  # the widest vector `pnk init` reads a dimension from


class ByteBound:
    """The documented conservative token bound when no tokenizer is named: a text's UTF-8 bytes.

    Byte-level BPE (GPT, Llama, Qwen) and WordPiece/SentencePiece vocabularies alike never make
    more tokens than bytes (each token covers at least one byte or one character), so a chunk
    within `max_input_tokens` bytes fits any such model whole. It packs small chunks; a tokenizer
    file packs them exactly."""

    special_tokens = 0
    exact = False

    def count(self, text: str) -> int:
        return len(text) if text.isascii() else len(text.encode("utf-8"))  # isascii: a flag, no scan

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [len(text) if text.isascii() else len(text.encode("utf-8")) for text in texts]

    def head(self, text: str, limit: int) -> str:
        """The longest start of `text` within `limit` tokens."""
        return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


class _ExactCounter(TokenCounter):
    exact = True

    def head(self, text: str, limit: int) -> str:
        """The longest start of `text` within `limit` tokens, cut where the tokenizer's token ends."""
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        return text[: offsets[limit - 1][1]] if len(offsets) > limit else text


class RemoteEmbedder:
    """An `Embedder` whose model runs behind an OpenAI-compatible endpoint."""

    def __init__(self, settings: RemoteEmbedding, model: str, dim: int, client: EmbeddingsEndpoint, sdk: OpenAIModule,
                 counter: ByteBound | _ExactCounter, batch_size: int,
                 spending: EmbeddingSpending | None) -> None:
        self.settings = settings
        self.model = model
        self.batch_size = batch_size
        self.max_input_tokens = settings.max_input_tokens
        self._client = client
        self._sdk = sdk
        self._counter = counter
        self._spending = spending
        self._pool: futures.ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # base64 float32: a quarter of the bytes of JSON numbers and no float parsing (the response
        # of 64 x 768 shrinks from ~1 MB); a server that refuses it is asked for floats from then on.
        self.encoding = "base64"
        # Set by `load` once the probe has answered; a placeholder until then.
        self.identity = ModelIdentity(PROVIDER, model, "", "", dim)
        # The probe vectors `identity` stands for: the ones first answered, or the index's recorded
        # ones once adopted (embed/coherence.py); compared afresh with every later probe.
        self.probe_vectors: np.ndarray | None = None
        self.agreed_with: str | None = None  # the index's recorded probe value adopted last
        self.disagreed_with: str | None = None  # the one a search last found this model differs from
        self._probed_at = -math.inf
        self._recheck = False  # a request failed: ask for the probe again before the next search
        self._search_deadline: float | None = None
        self._loaded_for_search = False

    # -- the Embedder protocol ----------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._counter.count_batch(texts)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Unit float32 vectors, one row per text, `concurrency` requests in flight. A text over
        `max_input_tokens` is refused before anything is sent (the server would truncate it)."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.identity.dim), dtype=np.float32)
        counts = refuse_too_long(self.count_tokens_batch(texts), self.max_input_tokens)
        size = batch_size or self.batch_size
        starts = range(0, len(texts), size)
        jobs = [(texts[start:start + size], counts[start:start + size]) for start in starts]
        if len(jobs) == 1:
            return self._request(*jobs[0], attempts=MAX_ATTEMPTS)
        pool = self._executor()
        answers = [pool.submit(self._request, batch, batch_counts, attempts=MAX_ATTEMPTS)
                   for batch, batch_counts in jobs]
        try:
            return np.concatenate([answer.result() for answer in answers])
        finally:
            for answer in answers:
                answer.cancel()
            futures.wait(answers)

    def embed_query(self, text: str) -> np.ndarray:
        """One unit vector. A query past max_input_tokens is cut to its head *here*, visibly in the
        code, rather than by the server."""
        count = self._counter.count(text)
        if count > self.max_input_tokens:
            text = self._counter.head(text, self.max_input_tokens)
            count = self._counter.count(text)
        # The search's deadline (`begin_search`), spent here: a query outside a search gets its own.
        deadline, self._search_deadline = self._search_deadline, None
        deadline = deadline or time.monotonic() + self.settings.search_timeout_s
        return self._request([text], [count], attempts=QUERY_ATTEMPTS, query=True, deadline=deadline)[0]

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    # -- one request ------------------------------------------------------------------------------

    def _executor(self) -> futures.ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = futures.ThreadPoolExecutor(self.settings.concurrency,
                                                        thread_name_prefix="pnk-remote-embed")
            return self._pool

    def _request(self, texts: list[str], counts: list[int], *, attempts: int, query: bool = False,
                 deadline: float | None = None) -> np.ndarray:
        """One batch's vectors: the request, retried while the failure is transient, each attempt
        reserved and closed when the endpoint is priced. `deadline` (monotonic): when every attempt
        and every wait between them must be over (a search's); each attempt has `timeout_s` too."""
        from pinakes.http_json import TooLarge

        # What one request may bill, at worst: every counted token plus the model's own specials.
        bound = sum(counts) + len(texts) * max(self._counter.special_tokens, 2)
        limit = ANSWER_SLACK_BYTES + len(texts) * max(self.identity.dim, 1) * ANSWER_BYTES_PER_NUMBER
        for attempt in range(1, attempts + 1):
            if deadline is not None and time.monotonic() >= deadline:
                raise deadline_error(self.settings, self.model)
            with self._reserved(bound, query) as call:
                try:
                    raw = self._post(texts, deadline, limit)
                except self._sdk.APIError as exc:
                    wait = self._failed(exc, call, attempt, attempts, deadline)
                    time.sleep(wait)
                    continue
                except TooLarge as exc:
                    self._recheck = True
                    if call is not None and 200 <= exc.status < 300:  # it may have billed: at worst the bound
                        call.close(bound)
                    elif call is not None:  # an error status is not billed
                        call.fail("void")
                    raise self._endpoint_error(str(exc), answered=True) from None
                payload = _json_object(raw.content)
                billed = _usage_tokens(payload)
                if call is not None:  # it answered 2xx: billed, at its usage or at worst the bound
                    call.close(billed if billed is not None else bound)
            if payload is None:
                raise self._endpoint_error("its answer is not an embeddings JSON object", answered=True)
            return self._checked(payload, texts, counts, billed)
        raise AssertionError("unreachable: the last attempt raises")

    def _post(self, texts: list[str], deadline: float | None = None, limit: int | None = None) -> httpx2.Response:
        """One POST /embeddings, answered as the raw HTTP response and parsed here: the client's
        typed `embeddings.create` checks every input string against its schema and builds one
        object per float returned (~40 ms for 64 x 768 on this project's machines, eight times the
        JSON itself), and even its untyped `post` costs as much CPU as a local server's 5%
        (embed/plain_http.py; bench/bench_remote_embed.py)."""
        body: dict[str, object] = {"input": texts, "model": self.model, "encoding_format": self.encoding}
        return self._client.post("embeddings", body, deadline=deadline, max_bytes=limit)

    def _reserved(self, bound: int, query: bool) -> contextlib.AbstractContextManager[Reservation | None]:
        import contextlib

        if self._spending is None:
            return contextlib.nullcontext(None)
        return self._spending.request(self.model, bound, query=query)

    def _failed(self, exc: BaseException, call: Reservation | None, attempt: int, attempts: int,
                deadline: float | None = None) -> float:
        """Close the failed attempt's reservation; the wait before the next attempt, or raise."""
        from pinakes.http_json import backoff_s, past, retry_after_s, transient
        from pinakes.paid import MAX_RETRY_WAIT_S, classify_failure

        self._recheck = True
        failure = classify_failure(self._sdk, exc)
        if call is not None:
            call.fail(failure.outcome if failure is not None else "unknown")
        status = getattr(exc, "status_code", None)
        if status in (400, 422) and self.encoding == "base64" and attempt < attempts:
            self.encoding = "float"  # an older server that knows only floats (llama.cpp, LM Studio builds)
            return 0.0
        refused = failure is not None and failure.status is None and failure.outcome == "void"
        timed_out = isinstance(exc, self._sdk.APITimeoutError)
        cut = isinstance(exc, self._sdk.APIConnectionError) and not timed_out and not refused  # mid-answer
        retryable = timed_out or cut or (isinstance(status, int) and transient(status))
        response = getattr(exc, "response", None)
        asked = retry_after_s(response.headers.get("retry-after")) if response is not None else None
        wait = (min(asked, MAX_RETRY_WAIT_S) if asked is not None
                else backoff_s(attempt, FIRST_BACKOFF_S, MAX_BACKOFF_S))
        if refused or not retryable or attempt >= attempts or past(deadline, wait):
            raise failure_error(self.settings, self.model, exc, failure, self._sdk, attempt=attempt,
                                deadline=deadline, wait=wait if retryable and attempt < attempts else None) from None
        return wait

    def _endpoint_error(self, what: str, *, answered: bool = False) -> EmbeddingEndpointError:
        """`answered`: the server did answer, with something that cannot be used (not a network fault)."""
        if answered:
            return answered_error(self.settings, self.model, what)
        return EmbeddingEndpointError(
            f"the embedding endpoint {self.settings.base_url} (model {self.model}) failed: {what}",
            remedy=f"check that the server at {self.settings.base_url} is running and serves {self.model}; "
                   "then run the command again")

    def _checked(self, payload: dict[str, object], texts: list[str], counts: list[int],
                 billed: int | None) -> np.ndarray:
        """The response's vectors as unit float32 rows in input order, or the batch fails."""
        import numpy as np

        items = payload.get("data")
        data = [cast("dict[str, object]", item) for item in cast("list[object]", items)
                if isinstance(item, dict)] if isinstance(items, list) else []
        if len(data) != len(texts):
            raise self._endpoint_error(f"it returned {len(data)} vectors for {len(texts)} inputs", answered=True)
        ordered = _in_input_order(data)
        if ordered is None:
            raise self._endpoint_error("its vectors' indexes are not 0..n-1, one per input", answered=True)
        matrix = self._matrix([item.get("embedding") for item in ordered])
        if matrix.ndim != 2 or matrix.shape[1] != self.identity.dim:
            got = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise EmbeddingEndpointError(
                f"the embedding endpoint {self.settings.base_url} returned {got}-dimensional vectors "
                f"from {self.model}, but [embedding] dim = {self.identity.dim}",
                remedy=f"set [embedding] dim = {got} (then `pnk sync --rebuild`), or name the model you "
                       "meant" if isinstance(got, int) else "check the server")
        # Each row's squared length, summed in float64 (no float32 overflow): finite exactly when
        # every component is, so one pass both checks the vectors and normalises them.
        squares = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
        if not np.isfinite(squares).all():
            raise self._endpoint_error("it returned vectors holding NaN or infinity", answered=True)
        if self._counter.exact and billed and billed < sum(counts):
            raise self._endpoint_error(
                f"its usage counts {billed} input tokens for inputs of {sum(counts)}: the server "
                "truncated them (check its own input limit against [embedding] max_input_tokens)",
                answered=True)
        squares[squares == 0] = 1.0  # a zero row stays zero
        return (matrix / np.sqrt(squares, dtype=np.float32)[:, None]).astype(np.float32, copy=False)

    def _matrix(self, rows: list[object]) -> np.ndarray:
        """float32 rows from base64 strings (little-endian float32, what `encoding_format = base64`
        returns) or from JSON number lists (a server that answers floats whatever was asked).
        A ragged answer comes back as a 1-D array for the dimension check to name."""
        import numpy as np

        try:
            strings = [row for row in rows if isinstance(row, str)]
            if len(strings) < len(rows):
                return np.asarray(rows, dtype=np.float32)
            if len({len(row) for row in strings}) != 1:
                return np.zeros(len(rows), dtype=np.float32)
            try:  # one call for the whole answer; padding inside it (a width not a multiple of 3) fails
                decoded = binascii.a2b_base64("".join(strings), strict_mode=True)
            except binascii.Error:
                decoded = b"".join(binascii.a2b_base64(row, strict_mode=True) for row in strings)
            if len(decoded) % (4 * len(rows)):
                return np.zeros(len(rows), dtype=np.float32)
            matrix = np.frombuffer(decoded, dtype="<f4").reshape(len(rows), -1)
            return matrix.astype(np.float32, copy=False)  # a copy only on a big-endian machine
        except (TypeError, ValueError, binascii.Error) as exc:
            raise self._endpoint_error(f"its vectors are neither base64 float32 nor lists of numbers of "
                                       f"one length ({exc})", answered=True) from None

    # -- identity -----------------------------------------------------------------------------

    def probe(self, deadline: float | None = None) -> np.ndarray:
        """The endpoint's vectors for `PROBE_TEXTS` now, the reference `identity` stands for
        replaced when they are another model's (a swap): the caller compares with the index.
        `deadline`: a search's (its probe is then priced as its own operation, as a query is)."""
        counts = self._counter.count_batch(list(PROBE_TEXTS))
        vectors = self._request(list(PROBE_TEXTS), counts, attempts=QUERY_ATTEMPTS, query=deadline is not None,
                                deadline=deadline)
        self._probed_at = time.monotonic()
        self._recheck = False
        if self.probe_vectors is None or not same_model(vectors, self.probe_vectors):
            self.probe_vectors = vectors
            self.identity = replace(self.identity, weights_sha256=fingerprint_of(vectors))
            self.agreed_with = None
        return vectors

    def adopt(self, fingerprint: str, recorded: np.ndarray, recorded_value: str) -> float:
        """Take the index's fingerprint and probe vectors as this model's when its own probe agrees
        with them within the tolerance (noise is not another model). Returns the agreement."""
        agreement = probe_agreement(self.probe_vectors, recorded) if self.probe_vectors is not None else -1.0
        if agreement >= MIN_PROBE_COSINE:
            self.probe_vectors = recorded
            self.identity = replace(self.identity, weights_sha256=fingerprint)
            self.agreed_with = recorded_value
        return agreement

    def answered_dimension(self) -> int:
        """The width of the vector the endpoint gives one text, from one request (what `pnk init`
        writes as `dim`); this embedder's own `dim` is not checked."""
        raw = None
        limit = ANSWER_SLACK_BYTES + DIMENSION_READ_NUMBERS * ANSWER_BYTES_PER_NUMBER
        for attempt in (1, 2):  # the second only when the server refused base64 (then floats are asked)
            try:
                raw = self._post([PROBE_TEXTS[0]], None, limit)
                break
            except self._sdk.APIError as exc:
                time.sleep(self._failed(exc, None, attempt, 2))  # raises the endpoint's error unless it may retry
        if raw is None:
            raise self._endpoint_error("it refused every request")
        data = (_json_object(raw.content) or {}).get("data")
        first = cast("list[object]", data)[0] if isinstance(data, list) and data else None
        vector = cast("dict[str, object]", first).get("embedding") if isinstance(first, dict) else None
        if not isinstance(vector, (list, str)) or not vector:
            raise self._endpoint_error("its answer holds no vector for the one input sent")
        return int(self._matrix([vector]).shape[1])

    def first_probe(self, *, for_search: bool) -> None:
        """The load's probe. A search's is its first request, within its `search_timeout_s` (a
        deadline the search then keeps: `begin_search`); a sync's has each attempt within timeout_s."""
        if for_search:
            self._search_deadline = time.monotonic() + self.settings.search_timeout_s
            self._loaded_for_search = True
        self.probe(self._search_deadline)

    def begin_search(self) -> bool:
        """Start one search's deadline (`search_timeout_s` for every request and wait it makes),
        and ask for the probe again when it is due; whether it asked. A model loaded for this very
        search keeps the deadline its load started: the load's probe was this search's first request."""
        if self._loaded_for_search:
            self._loaded_for_search = False
            return True
        self._search_deadline = time.monotonic() + self.settings.search_timeout_s
        if self._recheck or time.monotonic() - self._probed_at >= RECHECK_INTERVAL_S:
            self.probe(self._search_deadline)
            return True
        return False

    def reprobe(self) -> None:
        """Ask for the probe now, within the current search's deadline."""
        self.probe(self._search_deadline)


def _in_input_order(data: list[dict[str, object]]) -> list[dict[str, object]] | None:
    """The answer's items sorted by `index`, or None unless the indexes are 0..n-1 once each
    (servers answer in order, so the usual case costs one comparison, not a sort)."""
    expected = list(range(len(data)))
    try:
        indexes = [item.get("index") for item in data]
        if indexes == expected:
            return data
        ordered = sorted(data, key=lambda item: _position(item.get("index", 0)))
        if [_position(item.get("index", position)) for position, item in enumerate(ordered)] == expected:
            return ordered
    except ValueError:
        pass
    return None


def _position(index: object) -> int:
    """An item's `index` as a number (a server may send 1.0 or "1"); ValueError for anything else."""
    if isinstance(index, (int, float, str)):
        return int(index)
    raise ValueError(f"not an index: {index!r}")


def _json_object(content: bytes) -> dict[str, object] | None:
    try:
        payload: object = json.loads(content)
    except ValueError:
        return None
    return cast("dict[str, object]", payload) if isinstance(payload, dict) else None  # a JSON object's keys are strings


def _usage_tokens(payload: dict[str, object] | None) -> int | None:
    """The input tokens the answer says it billed; None when it says nothing usable (Ollama and
    some llama.cpp builds report 0)."""
    usage = payload.get("usage") if payload is not None else None
    if not isinstance(usage, dict):
        return None
    fields = cast("dict[str, object]", usage)
    tokens = fields.get("prompt_tokens", fields.get("total_tokens"))
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None


def load(request: LoadRequest) -> RemoteEmbedder:
    """The remote model, probed (the registry's `load` for "openai-compatible"): one request that both
    proves the endpoint answers (a clear error when it does not, before a sync writes anything) and
    fingerprints the model behind it. `request.for_search`: the probe is the first request of a
    search, within its `search_timeout_s`."""
    section, kb_root, spending = request.section, request.kb_root, request.spending
    settings = section.remote
    if settings is None:
        raise ManifestError(f'[embedding] provider = "{PROVIDER}" needs base_url',
                            remedy='add base_url = "http://127.0.0.1:11434/v1" (your server\'s)')
    try:
        import openai
    except ImportError as exc:
        raise MissingExtraError(EXTRA, "the openai-compatible embedding provider",
                                missing_module=exc.name or "openai") from exc
    if settings.input_usd_per_mtok is not None and spending is None:
        raise ManifestError(
            f"[embedding] input_usd_per_mtok prices {section.model}, and this command has no budget to "
            "spend it through",
            remedy="run it as `pnk sync` or `pnk search` in the KB, where [budget] caps the spending")
    client = _client(openai, settings)
    embedder = RemoteEmbedder(settings, section.model, section.dim, client, openai,
                              _counter(settings, kb_root), section.batch_size, spending)
    # No revision: the endpoint's URL may move (another host, a port) while the model stays; the
    # probe is what says whether it did.
    embedder.identity = ModelIdentity(PROVIDER, section.model, section.revision or "", "", section.dim)
    embedder.first_probe(for_search=request.for_search)
    return embedder


def _client(sdk: OpenAIModule, settings: RemoteEmbedding) -> EmbeddingsEndpoint:
    """The endpoint: the openai client's configuration (key, headers, base URL, error classes)
    with a lean request path (embed/plain_http.py says why and what); the manifest's timeout; no
    retries but ours (each attempt is reserved on its own)."""
    from pinakes.embed.plain_http import EmbeddingsEndpoint

    client = sdk.OpenAI(api_key=_api_key(settings), base_url=settings.base_url, max_retries=0,
                        timeout=settings.timeout_s)
    return EmbeddingsEndpoint(sdk, client, settings.timeout_s)


def _load_tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def _api_key(settings: RemoteEmbedding) -> str:
    """The key from the variable the manifest names; a placeholder for servers that want none (the
    client insists on some string). The key is passed to the client and kept nowhere else (the
    request headers are built from the client's, in memory)."""
    from pinakes.http_json import key_from_environment

    if settings.api_key_env is None:
        return "no-key"
    return key_from_environment(settings.api_key_env, "embedding", EmbeddingEndpointError)


def _counter(settings: RemoteEmbedding, kb_root: Path | None) -> ByteBound | _ExactCounter:
    if settings.tokenizer is None:
        return ByteBound()
    path = Path(settings.tokenizer).expanduser()
    if not path.is_absolute() and kb_root is not None:
        path = kb_root / path
    if not path.is_file():
        raise ManifestError(f"[embedding] tokenizer {settings.tokenizer!r} is not a file ({path})",
                            remedy="point it at the model's tokenizer.json, or delete it to count UTF-8 "
                                   "bytes (a conservative bound)")
    try:
        return _ExactCounter(_load_tokenizer(path))
    except ImportError as exc:
        raise MissingExtraError(EXTRA, "counting tokens with [embedding] tokenizer",
                                missing_module=exc.name or "tokenizers") from exc
    except Exception as exc:  # the tokenizers library raises its own untyped exception
        raise ManifestError(f"[embedding] tokenizer {path} cannot be read as a tokenizer.json ({exc})",
                            remedy="point it at the model's tokenizer.json") from None



def read_dimension(base_url: str, model: str, api_key_env: str | None, timeout_s: float = 30.0) -> int:
    """The dimension of `model`'s vectors, from one request (what `pnk init` writes as `dim`)."""
    from pinakes.embed.settings import RemoteEmbedding

    try:
        import openai
    except ImportError as exc:
        raise MissingExtraError(EXTRA, "the openai-compatible embedding provider",
                                missing_module=exc.name or "openai") from exc
    settings = RemoteEmbedding(base_url=base_url, api_key_env=api_key_env, timeout_s=timeout_s)
    client = _client(openai, settings)
    return RemoteEmbedder(settings, model, 0, client, openai, ByteBound(), 1, None).answered_dimension()
