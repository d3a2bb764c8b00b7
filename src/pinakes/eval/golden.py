"""The golden set: `eval/questions.yaml`, loaded strictly (spec §7).

A question's kind is validated, never defaulted: defaulting it is a claim about how the question was
authored, and a wrong one puts it into a class whose score then measures two different things. Ids
are what pair a before-row with an after-row across runs, so a repeated id is an error rather than a
silently dropped question. A misspelt top-level key is an error too, because the harness skips a KB
that has no golden set, and a typo must not read as "no golden set".

`expect` lists the documents that answer a question; any one of them found in the top k answers it.
A multi-hop question is answered only when every hop's own query retrieves one of that hop's
documents, so its `expect` must be exactly the union of its hops'.
"""

from __future__ import annotations

import difflib
import hashlib
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import EXIT_DATA, PinakesError, UsageError
from pinakes.jsontypes import is_dict, is_list, str_list

if TYPE_CHECKING:
    from pinakes.lexical.filters import SearchFilters
    from pinakes.manifest import SourcesSection

# Records one problem (what is wrong, the remedy) of the question being read.
Fail = Callable[[str, str], None]

GOLDEN_SET_RELPATH = "eval/questions.yaml"
KINDS = ("lexical", "simple-lookup", "paraphrase", "filter", "multi-hop", "no-answer")
NO_ANSWER = "no-answer"
MULTI_HOP = "multi-hop"
FILTER = "filter"
TOP_LEVEL_KEYS = ("questions",)
QUESTION_KEYS = ("id", "kind", "query", "expect", "filters", "hops")
HOP_KEYS = ("query", "expect")
FILTER_KEYS = ("tags", "all_tags", "path_prefix", "source_type", "since", "until")
MIN_HOPS = 2


@dataclass(frozen=True)
class GoldenProblem:
    question_id: str | None  # None for a whole-file problem
    problem: str
    remedy: str

    def render(self) -> str:
        return f"question {self.question_id}: {self.problem}" if self.question_id else self.problem


class GoldenSetError(PinakesError):
    """The golden set is invalid; `problems` lists every problem found, each naming its question."""

    exit_code = EXIT_DATA

    def __init__(self, path: Path, problems: Sequence[GoldenProblem]):
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            only = self.problems[0]
            super().__init__(only.render(), remedy=only.remedy, path=path)
        else:
            lines = [f"{len(self.problems)} problems in the golden set:"]
            for problem in self.problems:
                lines.append(f"  - {problem.render()}\n    fix: {problem.remedy}")
            super().__init__("\n".join(lines), remedy="fix each problem listed above", path=path)


@dataclass(frozen=True)
class Hop:
    query: str
    expect: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    query: str
    expect: tuple[str, ...]
    filters: Mapping[str, object] | None = None  # as written; `search_filters()` validates them
    hops: tuple[Hop, ...] = ()

    @property
    def answerable(self) -> bool:
        return self.kind != NO_ANSWER

    def search_filters(self) -> SearchFilters:
        """The question's filters as `SearchFilters` (the same validation `pnk search` applies)."""
        from pinakes.lexical.filters import make_filters

        filters = dict(self.filters or {})
        source_type = filters.get("source_type")
        return make_filters(
            tags=_as_list(filters.get("tags")),
            all_tags=bool(filters.get("all_tags", False)),
            path_prefix=filters.get("path_prefix"),
            since=filters.get("since"),
            until=filters.get("until"),
            source_types=_as_list(source_type) if source_type is not None else None,
        )


@dataclass(frozen=True)
class GoldenSet:
    path: Path
    questions: tuple[Question, ...]
    sha256: str = ""

    def __len__(self) -> int:
        return len(self.questions)


def load_golden_set(path: Path, kb_root: Path, *, sources: SourcesSection | None = None) -> GoldenSet:
    """Read and validate the golden set at `path`. Expected paths are KB-root-relative and must be
    files under `kb_root` (and, when the manifest's [sources] is given, selected by it)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GoldenSetError(path, [GoldenProblem(
            None, "the golden set does not exist", f"write one at {GOLDEN_SET_RELPATH} (see docs/QUALITY.md)")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenSetError(path, [GoldenProblem(
            None, f"cannot read the golden set ({exc})", "save it as UTF-8 text readable by you")]) from exc
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise GoldenSetError(path, [GoldenProblem(
            None, f"invalid YAML: {exc}", "fix the syntax at the line and column named")]) from None
    problems: list[GoldenProblem] = []
    questions = _read_questions(data, Path(kb_root), sources, problems)
    if problems:
        raise GoldenSetError(path, problems)
    return GoldenSet(path, tuple(questions), hashlib.sha256(text.encode("utf-8")).hexdigest())


def _read_questions(data: object, kb_root: Path, sources: SourcesSection | None, problems: list[GoldenProblem]) -> list[Question]:
    if not is_dict(data):
        problems.append(GoldenProblem(
            None, f"the file must be a mapping with a `questions` list, got {_kind_of(data)}",
            "start the file with `questions:` followed by a list of questions"))
        return []
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            problems.append(GoldenProblem(
                None, f"unknown top-level key {key!r}{_did_you_mean(str(key), TOP_LEVEL_KEYS)}",
                "the only top-level key is `questions`"))
    if "questions" not in data:
        problems.append(GoldenProblem(
            None, "no `questions` key", "list the questions under a top-level `questions:` key"))
        return []
    raw: object = data["questions"]
    if raw is None:
        raw = []
    if not is_list(raw):
        problems.append(GoldenProblem(
            None, f"`questions` must be a list, got {_kind_of(raw)}", "write `questions:` then `- id: ...` items"))
        return []
    questions: list[Question] = []
    first_seen: dict[str, int] = {}
    for position, item in enumerate(raw, start=1):
        question = _read_question(item, position, kb_root, sources, problems)
        if question is None:
            continue
        if question.id in first_seen:
            problems.append(GoldenProblem(
                question.id, f"the id is used twice (questions #{first_seen[question.id]} and #{position})",
                "give every question its own id; ids pair before/after rows, so a repeat silently "
                "drops a question from every comparison"))
            continue
        first_seen[question.id] = position
        questions.append(question)
    return questions


def _read_question(item: object, position: int, kb_root: Path, sources: SourcesSection | None,
                   problems: list[GoldenProblem]) -> Question | None:
    label = f"#{position}"
    if not is_dict(item):
        problems.append(GoldenProblem(label, f"must be a mapping, got {_kind_of(item)}",
                                      "write each question as `- id: ...` with kind, query and expect"))
        return None
    raw_id = item.get("id")
    if not isinstance(raw_id, str) or not raw_id.strip():
        problems.append(GoldenProblem(label, f"`id` must be a non-empty string, got {raw_id!r}",
                                      "give the question a permanent id such as `lex-017`"))
        return None
    qid = raw_id.strip()
    before = len(problems)

    def fail(problem: str, remedy: str) -> None:
        problems.append(GoldenProblem(qid, problem, remedy))

    for key in item:
        if key not in QUESTION_KEYS:
            fail(f"unknown key {key!r}{_did_you_mean(str(key), QUESTION_KEYS)}",
                 f"use only: {', '.join(QUESTION_KEYS)}")
    kind = item.get("kind")
    if kind not in KINDS:
        shown = "no `kind`" if kind is None else f"unknown kind {kind!r}"
        fail(f"{shown}; a kind is never defaulted", f"set `kind` to one of: {', '.join(KINDS)}")
    query = _text(item.get("query"), "query", fail)
    expect = _paths(item.get("expect"), "expect", kb_root, sources, fail)
    hops = _hops(item.get("hops"), kb_root, sources, fail)
    filters = item.get("filters")
    if filters is not None:
        _check_filters(filters, fail)
    written = {str(key): value for key, value in filters.items()} if is_dict(filters) and filters else None
    if kind == NO_ANSWER:
        if expect:
            fail("a no-answer question must have `expect: []`", "empty its expect, or change its kind")
        if hops:
            fail("a no-answer question has no hops", "remove `hops`, or change its kind")
    elif kind in KINDS and expect == ():
        fail("an answerable question needs at least one expected document",
             "list the KB-root-relative path of each document that answers it, or make it no-answer")
    if kind == MULTI_HOP:
        _check_hops(item, hops, expect, fail)
    elif kind in KINDS and "hops" in item:
        fail("only multi-hop questions have hops", "remove `hops`, or set `kind: multi-hop`")
    if kind == FILTER and not filters:
        fail("a filter question must carry `filters`",
             "add `filters: {tags: [...], path_prefix: ..., source_type: ...}`, or change its kind")
    if len(problems) > before or query is None or expect is None or hops is None:
        return None
    assert isinstance(kind, str)
    return Question(qid, kind, query, expect, written, hops)


def _check_hops(item: Mapping[object, object], hops: tuple[Hop, ...] | None, expect: tuple[str, ...] | None,
                fail: Fail) -> None:
    if "hops" not in item or hops is None:
        if "hops" not in item:
            fail("a multi-hop question needs `hops` (scored on every hop)",
                 "add `hops: [{query: ..., expect: [...]}, ...]`, one per search of the chain")
        return
    if len(hops) < MIN_HOPS:
        fail(f"a multi-hop question needs at least {MIN_HOPS} hops, got {len(hops)}",
             "add the missing hop, or change its kind")
    union = {path for hop in hops for path in hop.expect}
    if expect is not None and set(expect) != union:
        fail(f"`expect` must be exactly the union of its hops' documents ({sorted(union)})",
             "make `expect` list every hop's documents and nothing else")


def _hops(value: object, kb_root: Path, sources: SourcesSection | None, fail: Fail) -> tuple[Hop, ...] | None:
    if value is None:
        return ()
    if not is_list(value):
        fail(f"`hops` must be a list, got {_kind_of(value)}", "write `hops:` then `- query: ...` items")
        return None
    hops: list[Hop] = []
    ok = True
    for number, raw in enumerate(value, start=1):
        if not is_dict(raw):
            fail(f"hop {number} must be a mapping with query and expect, got {_kind_of(raw)}",
                 "write each hop as `{query: ..., expect: [...]}`")
            ok = False
            continue
        for key in raw:
            if key not in HOP_KEYS:
                fail(f"hop {number}: unknown key {key!r}", "a hop has only `query` and `expect`")
                ok = False
        query = _text(raw.get("query"), f"hop {number} query", fail)
        expect = _paths(raw.get("expect"), f"hop {number} expect", kb_root, sources, fail)
        if expect == ():
            fail(f"hop {number} expects no document", "list the document this hop's search must retrieve")
            ok = False
        if query is None or expect is None:
            ok = False
            continue
        hops.append(Hop(query, expect))
    return tuple(hops) if ok else None


def _text(value: object, name: str, fail: Fail) -> str | None:
    if not isinstance(value, str) or not value.strip():
        fail(f"`{name}` must be a non-empty string, got {value!r}", f"write the {name} as text")
        return None
    return value.strip()


def _paths(value: object, name: str, kb_root: Path, sources: SourcesSection | None, fail: Fail) -> tuple[str, ...] | None:
    if value is None:
        fail(f"no `{name}`", f"add `{name}: [path, ...]` (KB-root-relative; `[]` for a no-answer question)")
        return None
    entries = str_list(value)
    if entries is None:
        fail(f"`{name}` must be a list of paths, got {value!r}", f"write `{name}: [docs/some/file.md]`")
        return None
    paths: list[str] = []
    valid = True
    for entry in entries:
        path = entry.strip().replace("\\", "/")
        normal = posixpath.normpath(path) if path else ""
        if not path or path.startswith("/") or normal.startswith("..") or normal != path:
            fail(f"`{name}` path {entry!r} is not a plain KB-root-relative path",
                 "write it relative to the KB root with forward slashes, e.g. docs/loans/incoming.md")
            valid = False
            continue
        if not (kb_root / path).is_file():
            fail(f"`{name}` names {path}, which does not exist in the KB",
                 "fix the path (KB-root-relative), or restore the document")
            valid = False
            continue
        if sources is not None and not sources.selects(path):
            fail(f"`{name}` names {path}, which [sources] does not index (outside its roots or excluded)",
                 "point it at an indexed document, or widen [sources] in pinakes.toml")
            valid = False
            continue
        if path in paths:
            fail(f"`{name}` lists {path} twice", "list each document once")
            valid = False
            continue
        paths.append(path)
    return tuple(paths) if valid else None


def _check_filters(filters: object, fail: Fail) -> None:
    if not is_dict(filters) or not filters:
        fail(f"`filters` must be a non-empty mapping, got {filters!r}",
             "write `filters: {tags: [...], path_prefix: ..., source_type: ...}`")
        return
    unknown = [key for key in filters if key not in FILTER_KEYS]
    for key in unknown:
        fail(f"unknown filter {key!r}{_did_you_mean(str(key), FILTER_KEYS)}",
             f"use only: {', '.join(FILTER_KEYS)}")
    if unknown:
        return
    probe = Question("probe", FILTER, "probe", (), {str(key): value for key, value in filters.items()})
    try:
        probe.search_filters()
    except UsageError as exc:
        fail(f"invalid filters: {exc.message}", exc.remedy or "fix the filter value")


def _as_list(value: object) -> list[object] | None:
    if value is None:
        return None
    return list(value) if is_list(value) else [value]


def _did_you_mean(word: str, vocabulary: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, vocabulary, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _kind_of(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__} ({value!r})"
