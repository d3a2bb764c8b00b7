"""The four rules both paid entry points obey (spec §1): one home, so two copies cannot drift.

Exactly two things may spend — `pnk sync` on the claude-vision backend and `pnk ask --deep` — and
each has its own client module on `.paid-path-allowlist`. What they must do identically lives here:

1. **The key** is read from `PINAKES_ANTHROPIC_API_KEY` (or the first line of a file the user
   names) and passed to the client explicitly, so the SDK consults no other credential. The
   generic `ANTHROPIC_API_KEY` is deliberately never read: a key exported for other tools must
   never enable spending here. The key is held in an `ApiKey` whose repr is redacted and is handed
   to the client and nowhere else: never logged, never in an error, the ledger or the cache.
2. **The SDK's own retries are off** (`max_retries=0`): every attempt is its own reservation, so a
   retry the SDK made silently would be a spend the ledger never saw. The caller retries, and
   only what provably did not bill (`PaidCallError.retry_after_s`).
3. **A failed call is classified by whether it billed, from where it failed** (`classify_failure`):
   an error status from the API is *void*, and so is a request that never left this process (raised
   before the client handed it to its HTTP transport, refused by the HTTP library itself — a key
   holding a newline is an illegal header — or no connection made); no answer at all after it left
   (a timeout, a dropped connection, a body that is not the Messages shape) is an *unknown outcome*,
   counted at its reserved amount until `pnk budget --resolve`.
4. **A reconciliation is computed from the response's own usage** (`billed_tokens`), never from
   the request or an estimate. A reconciliation the ledger will not take (unwritable, disk full)
   raises the accountant's UnrecordedOutcomeError carrying the answer: the call was made and paid
   for, so its result is the caller's to keep, and the error names `pnk budget --resolve`. Usage
   above what the request allowed (more output than `max_tokens`, more input than was sent) is an
   overrun: recorded as reported, returned with the answer (`PaidAnswer.overrun`), and every later
   reservation is refused until it is resolved (budget/overrun.py).

`paid_call` applies all four around one request inside the accountant's reservation, and sends
`max_tokens` equal to the reserved output bound, so the worst case reserved is a bound on what the
call can bill — unless its answer reports usage the request did not allow, which is an overrun.

This module imports no paid client, so it is not on the allowlist and the paid-path gate scans it
like any other: each function is handed the caller's already-imported `anthropic` module (`sdk`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pinakes.budget.errors import UnrecordedOutcomeError
from pinakes.errors import ApiKeyError, PaidCallError

if TYPE_CHECKING:
    from pinakes.budget import Call, CallShape, Plan
    from pinakes.budget.overrun import Overrun

API_KEY_ENV = "PINAKES_ANTHROPIC_API_KEY"
GENERIC_KEY_ENV = "ANTHROPIC_API_KEY"  # named only to say it is not read
KEY_FILE_FLAG = "--api-key-file"

# A request may take minutes to generate (a slice of page images, a long answer); past this the
# call is abandoned as an unknown outcome rather than left to hang a sync or a cron job.
REQUEST_TIMEOUT_S = 300.0
# Statuses that say "busy, send it again": the API answered, so nothing was billed.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})
DEFAULT_RETRY_WAIT_S = 2.0
MAX_RETRY_WAIT_S = 60.0
# A prompt-cache write bills at most twice the input rate (the one-hour TTL). Pinakes writes no
# prompt cache, so the API should report none; if it ever does, it is counted at that ceiling.
_CACHE_WRITE_INPUT_MULTIPLE = 2


# --- what the paid paths use of the SDK ----------------------------------------------------------
# Structural types, since this module imports no client: the `anthropic` module and what it returns
# match them. A request's keyword arguments are the SDK's to validate (`Callable[..., ...]`).


class Usage(Protocol):
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...


class ContentBlock(Protocol):
    @property
    def type(self) -> str: ...  # "text", "tool_use", ...: a text block has `.text`


class Message(Protocol):
    """The SDK's Message: an answer, why it stopped, and what it billed."""

    @property
    def content(self) -> Sequence[ContentBlock]: ...
    @property
    def stop_reason(self) -> str | None: ...
    @property
    def usage(self) -> Usage: ...


class TokenCount(Protocol):
    @property
    def input_tokens(self) -> int: ...


class Messages(Protocol):
    @property
    def create(self) -> Callable[..., Message]: ...
    @property
    def count_tokens(self) -> Callable[..., TokenCount]: ...


class Client(Protocol):
    """The SDK's client (`make_client` builds it)."""

    @property
    def messages(self) -> Messages: ...


class SDK(Protocol):
    """The `anthropic` module, as the caller imported it."""

    @property
    def Anthropic(self) -> Callable[..., Client]: ...
    @property
    def DefaultHttpxClient(self) -> Callable[..., object]: ...  # older SDKs lack it: see make_client
    @property
    def APIError(self) -> type[Exception]: ...
    @property
    def APIStatusError(self) -> type[Exception]: ...
    @property
    def APITimeoutError(self) -> type[Exception]: ...
    @property
    def APIConnectionError(self) -> type[Exception]: ...


# --- rule 1: the key -------------------------------------------------------------------------------


class ApiKey:
    """The API key, redacted everywhere it could be printed (repr, str, a traceback's locals)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself: for the client constructor, and nothing else."""
        return self._value

    def __repr__(self) -> str:
        return "ApiKey(<redacted>)"

    __str__ = __repr__


def read_api_key(key_file: Path | str | None = None, environ: Mapping[str, str] | None = None) -> ApiKey:
    """The key from `key_file` (its first line) when given, else from PINAKES_ANTHROPIC_API_KEY.
    Raises ApiKeyError naming the variable or the file, never the key."""
    if key_file is not None:
        try:
            text = Path(key_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ApiKeyError(f"cannot read the API key file ({reason})",
                              remedy="name a readable file holding the key on its first line",
                              path=key_file) from None
        value = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not value:
            raise ApiKeyError("the API key file is empty", remedy="put the key on its first line", path=key_file)
        return _one_token(value, f"the first line of {key_file}")
    env = environ if environ is not None else os.environ
    value = env.get(API_KEY_ENV, "").strip()
    if not value:
        generic = (f"; {GENERIC_KEY_ENV} is set but deliberately not read, so a key exported for other "
                   "tools never enables spending here" if env.get(GENERIC_KEY_ENV, "").strip() else "")
        raise ApiKeyError(f"a paid call needs an Anthropic API key and {API_KEY_ENV} is not set{generic}",
                          remedy=f"export {API_KEY_ENV}=... in this shell, or pass {KEY_FILE_FLAG} PATH")
    return _one_token(value, API_KEY_ENV)


def _one_token(value: str, source: str) -> ApiKey:
    """An API key is one token of printable ASCII: anything else (a newline pasted with it, a
    space) cannot travel in an HTTP header, so it is refused here, before anything is planned."""
    if not (value.isascii() and value.isprintable()) or " " in value:
        raise ApiKeyError(f"the API key in {source} holds a space, a control character (a pasted newline?) "
                          "or a non-ASCII character, which an HTTP header cannot carry",
                          remedy=f"set {API_KEY_ENV} (or the first line of the {KEY_FILE_FLAG} file) to the key alone")
    return ApiKey(value)


# --- rule 2: the client ----------------------------------------------------------------------------


def make_client(sdk: SDK, key: ApiKey, *, base_url: str | None = None,
                timeout: float = REQUEST_TIMEOUT_S) -> Client:
    """`sdk.Anthropic` with the key passed explicitly (the SDK then reads no credential from the
    environment or a profile), its own retries off and a bounded timeout. `base_url` None leaves
    the SDK's own default (`ANTHROPIC_BASE_URL`, else the vendor's endpoint).

    Its HTTP client counts the requests handed to the transport (`_Handoffs`), so a failure raised
    before the request was handed over is known to be one that never left this process."""
    handoffs = _Handoffs()
    http_client = None
    if hasattr(sdk, "DefaultHttpxClient"):
        http_client = sdk.DefaultHttpxClient(event_hooks={"request": [handoffs.saw], "response": []})
    client = sdk.Anthropic(api_key=key.reveal(), base_url=base_url, max_retries=0, timeout=timeout,
                           http_client=http_client)
    if http_client is not None:
        _HANDOFFS[client] = handoffs
    return client


class _Handoffs:
    """How many requests a client's HTTP layer has been handed, per thread (the httpx request hook
    runs after the SDK built the request and before the transport sends a byte)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def saw(self, request: object) -> None:
        del request
        self._local.count = self.count() + 1

    def count(self) -> int:
        return int(getattr(self._local, "count", 0))


_HANDOFFS: weakref.WeakKeyDictionary[object, _Handoffs] = weakref.WeakKeyDictionary()


def _handoff_count(client: object) -> int | None:
    """The client's handoff count so far; None for a client `make_client` did not build (unknown)."""
    try:
        handoffs = _HANDOFFS.get(client)
    except TypeError:  # an object that cannot be weakly referenced: never one of ours
        return None
    return handoffs.count() if handoffs is not None else None


# --- rule 3: did a failed call bill? ---------------------------------------------------------------


@dataclass(frozen=True)
class CallFailure:
    """How one request failed. `outcome`: "void" (not billed) or "unknown" (may have billed)."""

    outcome: str
    what: str  # "HTTP 429 (rate_limit_error)", "timed out", ...: for a message, never the key
    status: int | None = None
    retry_after_s: float | None = None  # set only when sending it again is safe (void and busy)
    unsendable: bool = False  # refused inside this process: the request as built cannot be sent

    @property
    def happened(self) -> str:
        """What the request did, to follow "the request ...": "was refused with HTTP 429 (...)"."""
        return f"was refused with {self.what}" if self.status is not None else self.what


# Transport failures that happen before a request leaves this process, by the HTTP library's class
# names (this module imports neither the SDK nor the transport beneath it): no connection was made,
# or the library refused to write the request at all (an illegal header, such as a key holding a
# newline; a URL it cannot send to). Nothing reached the API, so nothing can have billed.
_NO_CONNECTION = ("ConnectError", "ConnectTimeout", "PoolTimeout")
_UNSENDABLE = ("LocalProtocolError", "UnsupportedProtocol", "InvalidURL")


def classify_failure(sdk: SDK, exc: BaseException, *, handed_off: bool = True) -> CallFailure | None:
    """Whether the exception a request raised means it billed, from where it happened; None when it
    is no API failure at all (a bug in the caller). `handed_off` False: the HTTP layer was never
    handed the request (`paid_call` knows this for a client `make_client` built)."""
    if isinstance(exc, sdk.APIStatusError):
        # The API answered with an error status: an error response is not billed.
        status = int(getattr(exc, "status_code", 0))
        kind = getattr(exc, "type", None) or "error"
        wait = _retry_after(exc) if status in RETRYABLE_STATUS else None
        return CallFailure("void", f"HTTP {status} ({kind})", status, wait)
    if not isinstance(exc, sdk.APIError) and not isinstance(exc, ValueError):
        return None
    where = _transport_failure(exc, _NO_CONNECTION + _UNSENDABLE)
    if where in _UNSENDABLE or (where is None and not handed_off):
        return CallFailure("void", f"was refused inside this process before it was sent ({where or type(exc).__name__})",
                           unsendable=True)
    if where is not None:  # refused or unresolvable: the request never left this machine
        return CallFailure("void", "could not connect" + (" (timed out)" if where != "ConnectError" else ""))
    if isinstance(exc, sdk.APITimeoutError):
        return CallFailure("unknown", "timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return CallFailure("unknown", "lost its connection")
    return CallFailure("unknown", "came back unreadable")  # a 2xx body that is not the Messages shape


def failure_remedy(failure: CallFailure, call_id: str, *, retry: str) -> str:
    """What the user does next. `retry` is the command that tries again (e.g. "run `pnk sync` again")."""
    if failure.outcome == "unknown":
        return (f"check the usage page of your Anthropic console, then `pnk budget --resolve {call_id} "
                f"--actual EUR`; {retry}")
    if failure.unsendable:
        return (f"check that the API key ({API_KEY_ENV} or {KEY_FILE_FLAG}) is the key alone on one line, "
                f"and ANTHROPIC_BASE_URL if set; {retry}")
    if failure.status in (401, 403):
        return f"check the API key ({API_KEY_ENV} or {KEY_FILE_FLAG}) and its workspace's permissions"
    if failure.status is None:
        return f"check the network (and ANTHROPIC_BASE_URL if set); {retry}"
    if failure.status in RETRYABLE_STATUS:
        return f"the API is busy or rate-limited: {retry} later"
    return f"{retry}; if it recurs, report it with this message"


def _retry_after(exc: BaseException) -> float:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        wait = float(header) if header is not None else DEFAULT_RETRY_WAIT_S
    except ValueError:
        wait = DEFAULT_RETRY_WAIT_S
    return max(0.0, min(wait, MAX_RETRY_WAIT_S))


def _transport_failure(exc: BaseException, names: tuple[str, ...]) -> str | None:
    """The first of `names` that a class in `exc`'s cause chain is (or derives from), read by class
    name: this module imports no client, nor the transport beneath it."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        for klass in type(cause).__mro__:
            if klass.__name__ in names:
                return klass.__name__
        cause = cause.__cause__ or cause.__context__
    return None


# --- rule 4: reconciliation from the response's usage ----------------------------------------------


def billed_tokens(message: Message) -> tuple[int, int]:
    """(input, output) tokens the response says it billed, from its own `usage`. Prompt-cache
    tokens (none are expected) are folded into input at or above what they can bill, so a
    reconciliation never under-reports."""
    usage = message.usage
    cache_write = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    cache_read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    input_tokens = int(usage.input_tokens) + _CACHE_WRITE_INPUT_MULTIPLE * cache_write + cache_read
    return input_tokens, int(usage.output_tokens)


def reconcile(call: Call, message: Message) -> Decimal:
    """Close `call` at what `message`'s usage says it cost; returns EUR."""
    input_tokens, output_tokens = billed_tokens(message)
    return call.reconcile(input_tokens=input_tokens, output_tokens=output_tokens)


# --- all four around one request -------------------------------------------------------------------


@dataclass(frozen=True)
class PaidAnswer:
    message: Message
    call_id: str
    cost_eur: Decimal
    # Its usage overran the reservation: recorded as reported; keep the answer, make no further call.
    overrun: Overrun | None = None


def paid_call(sdk: SDK, client: Client, plan: Plan, shape: CallShape, request: Mapping[str, object], *,
              unit: str | None = None, retry: str = "run the command again") -> PaidAnswer:
    """One Messages request inside `plan`'s reservation for `shape`, closed by what came back.

    `request` is the keyword arguments of `client.messages.create` without `max_tokens`, which is
    always the reserved output bound. Raises the accountant's BudgetExceededError (the call was
    never made), PaidCallError carrying the classification (void: closed at zero; unknown: left
    open at its reservation), or UnrecordedOutcomeError when the ledger would not take the outcome
    (its `answer` is this PaidAnswer when the call billed: keep what was paid for). Every other
    exception leaves the reservation open too (unclassified is counted as possibly billed), unless
    it was raised before the HTTP layer was handed the request: then nothing left, and it is voided.
    """
    if "max_tokens" in request:
        raise ValueError("max_tokens is the reservation's output bound; paid_call sets it")
    with plan.call(shape, unit=unit) as call:
        handoffs_before = _handoff_count(client)
        try:
            message = client.messages.create(max_tokens=shape.max_output_tokens, **request)
        except Exception as exc:
            handed_off = handoffs_before is None or _handoff_count(client) != handoffs_before
            failure = classify_failure(sdk, exc, handed_off=handed_off)
            if failure is None:
                if not handed_off:
                    call.void(f"raised before the request was handed over ({type(exc).__name__})")
                raise
            if failure.outcome == "void":
                call.void(failure.what)
                billed = "nothing was billed"
            else:
                billed = f"whether it billed is unknown, so call {call.call_id} counts at its reserved amount"
            raise PaidCallError(f"the request {failure.happened}; {billed}", happened=failure.happened,
                                billed=billed, outcome=failure.outcome, call_id=call.call_id, status=failure.status,
                                retry_after_s=failure.retry_after_s,
                                remedy=failure_remedy(failure, call.call_id, retry=retry)) from None
        try:
            cost = reconcile(call, message)
        except UnrecordedOutcomeError as exc:
            exc.answer = PaidAnswer(message, call.call_id, exc.actual_eur)
            raise
        return PaidAnswer(message, call.call_id, cost, call.overrun)


# A busy or rate-limited API (429, 529, 5xx with retry-after) never billed: the same request is sent
# again after its retry-after, each attempt its own reservation, at most this many times.
MAX_ATTEMPTS = 3


def paid_call_retrying(sdk: SDK, client: Client, plan: Plan, shape: CallShape, request: Mapping[str, object], *,
                       unit: str | None = None, retry: str = "run the command again",
                       sleep: Callable[[float], None] = time.sleep) -> tuple[PaidAnswer, tuple[str, ...]]:
    """`paid_call`, repeated while the API answers busy (void, with a retry-after), at most
    MAX_ATTEMPTS times. Returns the answer and every attempt's call_id; a final PaidCallError
    carries them too (`call_ids`, `attempts`)."""
    call_ids: list[str] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            answer = paid_call(sdk, client, plan, shape, request, unit=unit, retry=retry)
        except PaidCallError as exc:
            call_ids.append(exc.call_id)
            if exc.retry_after_s is not None and attempt < MAX_ATTEMPTS:
                sleep(exc.retry_after_s)
                continue
            exc.call_ids, exc.attempts = tuple(call_ids), attempt
            raise
        call_ids.append(answer.call_id)
        return answer, tuple(call_ids)
    raise AssertionError("unreachable: the last attempt returns or raises")
