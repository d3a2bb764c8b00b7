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
from typing import Any

from pinakes.errors import OutcomesError

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
    def from_dict(cls, data: Mapping[str, Any], where: str) -> Outcome:
        try:
            hop_ranks = data.get("hop_ranks")
            outcome = cls(
                id=str(data["id"]),
                kind=str(data["kind"]),
                hit=_optional(data["hit"], bool),
                hit_rank=_optional(data["hit_rank"], int),
                confidence=str(data["confidence"]),
                signal=_optional(data.get("signal"), float),
                relevant_returned=int(data.get("relevant_returned", 0)),
                returned=int(data.get("returned", 0)),
                hop_ranks=tuple(_optional(rank, int) for rank in hop_ranks) if hop_ranks is not None else None,
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
    header: dict[str, Any]
    rows: tuple[Outcome, ...]
    path: Path | None = None

    @property
    def k(self) -> int:
        return int(self.header["retrieval"]["final_k"])

    @property
    def reranked(self) -> bool:
        return bool(self.header["retrieval"]["rerank"])

    @property
    def thresholds(self) -> Mapping[str, Any] | None:
        return self.header["retrieval"].get("confidence")

    def to_dict(self) -> dict[str, object]:
        return {"format": OUTCOMES_FORMAT, "header": self.header, "rows": [row.to_dict() for row in self.rows]}


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
    if not isinstance(header, dict) or not isinstance(rows, list):
        raise OutcomesError("the outcomes file has no header or no rows", remedy="regenerate it with `pnk eval`",
                            path=path)
    retrieval = header.get("retrieval")
    if not isinstance(retrieval, dict) or "final_k" not in retrieval or "rerank" not in retrieval:
        raise OutcomesError("the header does not name its retrieval settings (final_k, rerank)",
                            remedy="regenerate it with `pnk eval`", path=path)
    parsed = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise OutcomesError(f"row {number} is not an object", remedy="regenerate it with `pnk eval`", path=path)
        try:
            parsed.append(Outcome.from_dict(row, f"row {number}"))
        except OutcomesError as exc:
            exc.path = path
            raise
    return OutcomesFile(header, tuple(parsed), path)


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OutcomesError(f"{what} does not exist", remedy="check the path", path=path) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OutcomesError(f"cannot read {what} ({exc})", remedy="pass a JSON file `pnk eval` wrote",
                            path=path) from None
    if not isinstance(data, dict):
        raise OutcomesError(f"not {what} (the top level is not an object)", remedy="check the path", path=path)
    return data


def _features(value: object) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"features must be an object of numbers, got {value!r}")
    return {str(name): float(number) for name, number in value.items()}


def _hop_features(value: object) -> tuple[dict[str, float] | None, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise TypeError(f"hop_features must be a list, got {value!r}")
    return tuple(_features(hop) for hop in value)


def _optional(value: Any, kind: type) -> Any:
    if value is None:
        return None
    if kind is bool and not isinstance(value, bool):
        raise TypeError(f"expected true/false/null, got {value!r}")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"expected an integer or null, got {value!r}")
    return kind(value)
