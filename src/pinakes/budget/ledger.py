"""`.pinakes/ledger.jsonl`: the append-only spend log every window is computed from (spec §5).

One record is one line, written by one `os.write` of fewer than 4096 bytes to a file opened with
O_APPEND, so concurrent processes cannot interleave a record. Every line carries a CRC32 of its own
bytes (`"crc"`, last key), so a torn or edited line is detected and reported by number — never
silently summed. Writers hold an exclusive `flock` on `.pinakes/ledger.lock` and re-read the tail
of the ledger inside it before appending: that is what keeps two processes sharing one ledger from
exceeding a cap together (the check and the append are one critical section).

A record is committed by its terminating newline, which is part of the same write. A last line
without one is therefore an interrupted write that never finished — its call was never sent,
because the request follows the reservation's write — and the next writer, under the lock, moves
its bytes to `ledger.torn` and truncates them away before appending. Every other damaged line (a bad
CRC, bytes that do not parse) is someone else's edit or a disk fault: it is reported, never summed,
and it stops paid calls until a person repairs it, because its amount is unknowable.

Records hold no query text, no document content, no paths: timestamp, operation_id, call_id, kind,
operation, model, token counts, cost_usd, usd_per_eur, the two `as_of` dates, the KB id — nothing
more. `pnk sync --rebuild` and `--clear-cache` never touch this file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import zlib
from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Literal, TypeGuard, cast

from pinakes.errors import filesystem_error

FORMAT_VERSION = 1
MAX_RECORD_BYTES = 4096  # one write below this is atomic with O_APPEND on POSIX (PIPE_BUF-sized)
LOCK_NAME = "ledger.lock"
TORN_NAME = "ledger.torn"

Kind = Literal["reservation", "reconciliation", "void", "resolution"]
KINDS: tuple[Kind, ...] = ("reservation", "reconciliation", "void", "resolution")
CLOSING_KINDS = frozenset({"reconciliation", "void", "resolution"})
EMBED_OPERATION = "embed"  # a priced remote embedding endpoint's requests (embed/spending.py)
RERANK_OPERATION = "rerank"  # a priced HTTP reranker's requests (search/rerank_spending.py)
OPERATIONS = ("extract", "ask", EMBED_OPERATION, RERANK_OPERATION)

# The order keys are written in; the CRC covers exactly these bytes.
_FIELDS = ("v", "ts", "kind", "operation", "operation_id", "call_id", "model", "input_tokens",
           "output_tokens", "cost_usd", "usd_per_eur", "prices_as_of", "rate_as_of", "kb_id")


@dataclass(frozen=True)
class LedgerRecord:
    kind: Kind
    ts: datetime  # aware, UTC; a pair is attributed to its reservation's ts, forever
    operation: str  # "extract" | "ask" | "embed" | "rerank"
    operation_id: str  # one invocation: what per_operation_eur bounds
    call_id: str  # one API call: what a reservation and its outcome share
    model: str
    input_tokens: int  # reservation: the worst case reserved; otherwise the usage billed
    output_tokens: int
    cost_usd: Decimal  # quantised once, here, when written (money.quantise_usd)
    usd_per_eur: Decimal  # the rate this record is converted at, read back with it
    prices_as_of: date
    rate_as_of: date
    kb_id: str | None

    def eur(self) -> Decimal:
        from pinakes.budget.money import to_eur

        return to_eur(self.cost_usd, self.usd_per_eur)

    def encode(self) -> bytes:
        """The record's line: canonical JSON with its CRC32 as the last key, newline-terminated."""
        body = _canonical(self._fields())
        crc = zlib.crc32(body)
        line = body[:-1] + b',"crc":"' + f"{crc:08x}".encode() + b'"}\n'
        if len(line) >= MAX_RECORD_BYTES:
            raise ValueError(f"a ledger record must stay under {MAX_RECORD_BYTES} bytes ({len(line)})")
        return line

    def _fields(self) -> dict[str, object]:
        return {
            "v": FORMAT_VERSION,
            "ts": self.ts.astimezone(UTC).isoformat(timespec="microseconds"),
            "kind": self.kind,
            "operation": self.operation,
            "operation_id": self.operation_id,
            "call_id": self.call_id,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": str(self.cost_usd),
            "usd_per_eur": str(self.usd_per_eur),
            "prices_as_of": self.prices_as_of.isoformat(),
            "rate_as_of": self.rate_as_of.isoformat(),
            "kb_id": self.kb_id,
        }


@dataclass(frozen=True)
class DamagedLine:
    number: int  # 1-based line number in ledger.jsonl
    reason: str

    def describe(self) -> str:
        return f"line {self.number}: {self.reason}"


def decode(line: bytes) -> LedgerRecord:
    """The record on one line (without its newline); ValueError saying why it cannot be trusted."""
    try:
        parsed: object = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not a JSON record ({exc})") from None
    if not isinstance(parsed, dict) or "crc" not in parsed:
        raise ValueError("not a ledger record (no crc)")
    payload = cast("dict[str, object]", parsed)  # JSON object keys are always strings
    crc = payload.pop("crc")
    if list(payload) != list(_FIELDS):
        raise ValueError("its keys are not a ledger record's")
    if not isinstance(crc, str) or not _crc_holds(line, crc):
        raise ValueError("CRC mismatch: the line was edited or damaged")
    if payload["v"] != FORMAT_VERSION:
        raise ValueError(f"format version {payload['v']!r} is not {FORMAT_VERSION} (a newer Pinakes wrote it)")
    try:
        kind = payload["kind"]
        if not _is_kind(kind):
            raise ValueError(f"unknown kind {kind!r}")
        ts = datetime.fromisoformat(_str(payload["ts"]))
        if ts.tzinfo is None:
            raise ValueError("timestamp without a zone")
        return LedgerRecord(
            kind=kind,
            ts=ts.astimezone(UTC),
            operation=_str(payload["operation"]),
            operation_id=_str(payload["operation_id"]),
            call_id=_str(payload["call_id"]),
            model=_str(payload["model"]),
            input_tokens=_count(payload["input_tokens"]),
            output_tokens=_count(payload["output_tokens"]),
            cost_usd=_amount(payload["cost_usd"], positive=False),
            usd_per_eur=_amount(payload["usd_per_eur"], positive=True),
            prices_as_of=date.fromisoformat(_str(payload["prices_as_of"])),
            rate_as_of=date.fromisoformat(_str(payload["rate_as_of"])),
            kb_id=None if payload["kb_id"] is None else _str(payload["kb_id"]),
        )
    except (TypeError, ValueError, InvalidOperation) as exc:
        raise ValueError(f"a field is invalid ({exc})") from None


class Ledger:
    """The records of one ledger file, read incrementally; appends only inside `exclusive()`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(LOCK_NAME)
        self.torn_path = self.path.with_name(TORN_NAME)
        self.records: list[LedgerRecord] = []
        self.damaged: list[DamagedLine] = []
        self.torn_tail: DamagedLine | None = None  # an unterminated last line (not yet sealed)
        self._offset = 0  # bytes consumed: the end of the last complete line read
        self._lines = 0
        self._locked = False
        # Moves each time the file is read from its start again (it was replaced, truncated or
        # removed by hand): whatever was derived from `records` so far must be derived afresh.
        self.epoch = 0

    def refresh(self) -> None:
        """Read whatever was appended since the last read (everything, if the file shrank)."""
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < self._offset:  # replaced or truncated by hand: start again
                    self.records, self.damaged, self._offset, self._lines = [], [], 0, 0
                    self.epoch += 1
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            if self._offset or self.records or self.damaged:
                self.epoch += 1
            self.records, self.damaged, self._offset, self._lines, self.torn_tail = [], [], 0, 0, None
            return
        except OSError as exc:
            raise filesystem_error(self.path, exc, "read the spending ledger") from exc
        complete, newline, partial = data.rpartition(b"\n")
        if newline:
            for raw in complete.split(b"\n"):
                self._lines += 1
                self._offset += len(raw) + 1
                if not raw.strip():
                    self.damaged.append(DamagedLine(self._lines, "an empty line"))
                    continue
                try:
                    self.records.append(decode(raw))
                except ValueError as exc:
                    self.damaged.append(DamagedLine(self._lines, str(exc)))
        self.torn_tail = (DamagedLine(self._lines + 1, "an unterminated last line (an interrupted or "
                                      "in-progress write; never summed)") if partial else None)

    @contextlib.contextmanager
    def exclusive(self, consequence: str = "no call was made") -> Generator[Ledger]:
        """Hold the ledger's lock, with every record appended by anyone up to now read in.
        `consequence` is what a failure to take it means for the caller ("no call was made" before
        a reservation; a call being closed was made already)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise filesystem_error(self.lock_path, exc, "open the ledger's lock", consequence) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._locked = True
            self.refresh()
            self._seal_torn_tail()
            yield self
        finally:
            self._locked = False
            os.close(fd)  # closing the descriptor releases the flock

    def append(self, record: LedgerRecord) -> None:
        """Append `record` durably (one write, then fsync); only inside `exclusive()`."""
        assert self._locked, "Ledger.append outside Ledger.exclusive()"
        line = record.encode()
        # Only a reservation precedes its call; any other record closes a call already made.
        consequence = "no call was made" if record.kind == "reservation" else ""
        self._write(line, "append to the spending ledger", consequence)
        self.records.append(record)
        self._lines += 1
        self._offset += len(line)

    def _write(self, data: bytes, doing: str, consequence: str = "nothing was written") -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(fd, data)
                if written != len(data):  # the rest never lands: the next writer seals the tail
                    raise OSError(28, "short write (disk full?)")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise filesystem_error(self.path, exc, doing, consequence) from exc

    def _seal_torn_tail(self) -> None:
        """Under the lock: an unterminated last line is either a complete record missing only its
        newline (terminate it) or an interrupted write (move it to ledger.torn, truncate it away)."""
        if self.torn_tail is None:
            return
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            partial = handle.read()
        try:
            decode(partial)
        except ValueError:
            try:
                with open(self.torn_path, "ab") as torn:
                    torn.write(partial + b"\n")
                    torn.flush()
                    os.fsync(torn.fileno())
                os.truncate(self.path, self._offset)
            except OSError as exc:
                raise filesystem_error(self.path, exc, "set aside an interrupted ledger write") from exc
        else:
            self._write(b"\n", "terminate the ledger's last line")
        self.torn_tail = None
        self.refresh()


def _crc_holds(line: bytes, crc: str) -> bool:
    """Whether `crc`, the line's last key, is the CRC32 of the line's own bytes before it: those
    bytes are the canonical record `encode` wrote (the check reads them as they are, rather than
    encoding the parsed record again, which took half the time of reading a ledger)."""
    tail = b',"crc":"' + crc.encode("utf-8", "replace") + b'"}'
    return line.endswith(tail) and f"{zlib.crc32(line[: -len(tail)] + b'}'):08x}" == crc


def _canonical(fields: dict[str, object]) -> bytes:
    return json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _is_kind(value: object) -> TypeGuard[Kind]:
    return value in KINDS


def _str(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, not {value!r}")
    return value


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a token count, not {value!r}")
    return value


def _amount(value: object, *, positive: bool) -> Decimal:
    amount = Decimal(_str(value))
    if not amount.is_finite() or amount < 0 or (positive and amount == 0):
        raise ValueError(f"not a valid amount: {value!r}")
    return amount
