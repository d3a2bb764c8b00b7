"""`eval/outcomes.json`: one row per question, under a header naming what produced them (spec §7).

Two artifacts from two configurations are otherwise indistinguishable on inspection, so the header
names the embedding model (from the index's own meta), the reranker, and the retrieval settings. The
scoreboard is a function of the rows alone, so the file is re-scorable offline with no weights.

Rows carry the five fields the spec names (id, kind, hit, hit_rank, confidence) plus what rerank
precision and threshold fitting need: `signal` (the number the confidence level was decided on),
`relevant_returned` / `returned` (relevant passages among those returned), and `features` (the
search's evidence features, search/signals.py: what `--fit-confidence` fits its model on, so a fit
from a committed file needs no re-run; a multi-hop question has `hop_features`, one set per hop,
because the hop it stops at depends on the model being fitted). The file holds no
timestamp, so re-running an unchanged configuration rewrites it byte for byte and a diff shows
exactly which questions moved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from pinakes.errors import OutcomesError
from pinakes.jsontypes import is_list, is_object

OUTCOMES_FORMAT = "pinakes-eval-outcomes/1"
OUTCOMES_RELPATH = "eval/outcomes.json"
LEVELS = ("high", "medium", "low", "unknown")


@dataclass(frozen=True)
class Outcome:
    id: str
    kind: str
    hit: bool | None  # None for a no-answer question (there is nothing to find)
    hit_rank: int | None  # rank at which the question was answered (the worst hop's, for multi-hop)
    confidence: str  # high | medium | low | unknown
    signal: float | None = None  # the score the level was decided on (lowest hop's, for multi-hop)
    relevant_returned: int = 0  # passages from expected documents among those returned
    returned: int = 0  # passages returned (summed over hops)
    hop_ranks: tuple[int | None, ...] | None = None  # per hop, multi-hop only
    features: Mapping[str, float] | None = None  # None for multi-hop: see hop_features
    hop_features: tuple[Mapping[str, float] | None, ...] | None = None  # per hop, multi-hop only

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["hop_ranks"] = list(self.hop_ranks) if self.hop_ranks is not None else None
        data["features"] = dict(self.features) if self.features is not None else None
        data["hop_features"] = ([dict(hop) if hop is not None else None for hop in self.hop_features]
                                if self.hop_features is not None else None)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object], where: str) -> Outcome:
        try:
            hop_ranks = data.get("hop_ranks")
            outcome = cls(
                id=str(data["id"]),
                kind=str(data["kind"]),
                hit=_optional_bool(data["hit"]),
                hit_rank=_optional_int(data["hit_rank"]),
                confidence=str(data["confidence"]),
                signal=None if (signal := data.get("signal")) is None else number(signal),
                relevant_returned=whole(data.get("relevant_returned", 0)),
                returned=whole(data.get("returned", 0)),
                hop_ranks=tuple(_optional_int(rank) for rank in _items(hop_ranks)) if hop_ranks is not None else None,
                features=_features(data.get("features")),
                hop_features=_hop_features(data.get("hop_features")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise OutcomesError(f"{where} is not an outcome row ({exc!r})",
                                remedy="regenerate the file with `pnk eval`") from None
        if outcome.confidence not in LEVELS:
            raise OutcomesError(f"{where} has confidence {outcome.confidence!r}",
                                remedy=f"confidence is one of: {', '.join(LEVELS)}")
        return outcome


@dataclass(frozen=True)
class OutcomesFile:
    header: Mapping[str, object]  # JSON: what produced the rows (eval/runner.py's run_header)
    rows: tuple[Outcome, ...]
    path: Path | None = None

    @property
    def retrieval(self) -> Mapping[str, object]:
        return header_object(self.header, "retrieval")

    @property
    def k(self) -> int:
        return whole(self.retrieval["final_k"])

    @property
    def reranked(self) -> bool:
        return bool(self.retrieval["rerank"])

    @property
    def thresholds(self) -> Mapping[str, object] | None:
        thresholds = self.retrieval.get("confidence")
        return thresholds if is_object(thresholds) else None

    def to_dict(self) -> dict[str, object]:
        return {"format": OUTCOMES_FORMAT, "header": self.header, "rows": [row.to_dict() for row in self.rows]}


def header_object(header: Mapping[str, object], key: str) -> Mapping[str, object]:
    """The header's object under `key` (`retrieval`, `embedding`, `reranker`, `golden_set`, `kb`); empty
    when the header has none there."""
    value = header.get(key)
    return value if is_object(value) else {}


def write_outcomes(path: Path, outcomes: OutcomesFile) -> None:
    write_json_object(path, outcomes.to_dict())


def write_json_object(path: Path, data: Mapping[str, object]) -> None:
    """The eval artifacts' one on-disk form: indented UTF-8 JSON, written atomically; a file that
    already says the same up to number noise is left as it is (`eval/unchanged.py`)."""
    from pinakes.atomic import atomic_write_text
    from pinakes.eval.unchanged import already_written

    if already_written(path, data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_outcomes(path: Path) -> OutcomesFile:
    path = Path(path)
    data = read_json_object(path, "an outcomes file")
    if data.get("format") != OUTCOMES_FORMAT:
        raise OutcomesError(f"not an outcomes file (format {data.get('format')!r}, expected {OUTCOMES_FORMAT!r})",
                            remedy="pass the eval/outcomes.json a `pnk eval` run wrote", path=path)
    header = data.get("header")
    rows = data.get("rows")
    if not is_object(header) or not is_list(rows):
        raise OutcomesError("the outcomes file has no header or no rows", remedy="regenerate it with `pnk eval`",
                            path=path)
    retrieval = header.get("retrieval")
    if not is_object(retrieval) or "final_k" not in retrieval or "rerank" not in retrieval:
        raise OutcomesError("the header does not name its retrieval settings (final_k, rerank)",
                            remedy="regenerate it with `pnk eval`", path=path)
    parsed: list[Outcome] = []
    for position, row in enumerate(rows, start=1):
        if not is_object(row):
            raise OutcomesError(f"row {position} is not an object", remedy="regenerate it with `pnk eval`", path=path)
        try:
            parsed.append(Outcome.from_dict(row, f"row {position}"))
        except OutcomesError as exc:
            exc.path = path
            raise
    return OutcomesFile(header, tuple(parsed), path)


def read_json_object(path: Path, what: str) -> dict[str, object]:
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OutcomesError(f"{what} does not exist", remedy="check the path", path=path) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OutcomesError(f"cannot read {what} ({exc})", remedy="pass a JSON file `pnk eval` wrote",
                            path=path) from None
    if not is_object(data):
        raise OutcomesError(f"not {what} (the top level is not an object)", remedy="check the path", path=path)
    return data


def _features(value: object) -> dict[str, float] | None:
    if value is None:
        return None
    if not is_object(value):
        raise TypeError(f"features must be an object of numbers, got {value!r}")
    return {str(name): number(item) for name, item in value.items()}


def _hop_features(value: object) -> tuple[dict[str, float] | None, ...] | None:
    if value is None:
        return None
    if not is_list(value):
        raise TypeError(f"hop_features must be a list, got {value!r}")
    return tuple(_features(hop) for hop in value)


def _items(value: object) -> list[object]:
    if not is_list(value):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def _optional_bool(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"expected true/false/null, got {value!r}")
    return value


def _optional_int(value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"expected an integer or null, got {value!r}")
    return value


def number(value: object) -> float:
    """A JSON number (or its text) as a float; anything else is a TypeError, as `float()` makes it."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def whole(value: object) -> int:
    """A JSON number (or its text) as an int; anything else is a TypeError, as `int()` makes it."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"expected a whole number, got {value!r}")
    return int(value)
