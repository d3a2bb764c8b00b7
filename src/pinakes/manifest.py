"""Strict loading and validation of `pinakes.toml` (spec §2.1; every field: docs/MANIFEST.md).

Three postures, each deliberate. Unknown keys and sections are rejected (with a did-you-mean),
because a typo silently ignored is a setting silently not applied. An explicit empty string is an
error, never a request for the default: substituting one hides the mistake until it fails far away.
Cross-key invariants are checked here, at read time, because a manifest that parses but cannot work
is a failure deferred to the least convenient moment.

`[kb] requires_pinakes` is read in a pre-pass over the raw TOML, before anything else: a manifest
written by a newer Pinakes must be diagnosed as "upgrade Pinakes", not as a spelling mistake in a key
this build has never heard of.

Every problem found is collected and reported at once, each naming its dotted key, what is wrong
and what to do, so a user fixes a broken manifest in one pass rather than one error per run.
"""

from __future__ import annotations

import difflib
import math
import posixpath
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from functools import cached_property
from pathlib import Path

from ulid import ULID

from pinakes import __version__
from pinakes.errors import ManifestError
from pinakes.extract.registry import PDF_BACKENDS
from pinakes.extract.source_types import SUFFIX_TO_TYPE
from pinakes.kb import SIDECAR_SUFFIX, STATE_DIR_NAME

# Every section and the keys it accepts. The readers below may take only declared keys, and any
# other key in the file is reported as unknown, so this table is the whole vocabulary.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "kb": ("name", "id", "requires_pinakes", "template", "description"),
    "sources": ("roots", "include", "exclude"),
    "embedding": ("provider", "model", "dim", "revision", "batch_size"),
    "extraction": ("backend",),
    "chunking": ("strategy", "max_tokens", "overlap", "headings"),
    "retrieval": (
        "candidates_per_source", "fusion_top_k", "final_k", "rrf_k", "rerank", "vector_tier",
        "adjacent_k", "graph_channel", "confidence",
    ),
    "retrieval.confidence": ("high", "low", "fitted_for"),
    "rerank": ("provider", "model", "revision", "batch_size"),
    "budget": (
        "confirm_above_eur", "per_operation_eur", "daily_eur", "monthly_eur", "timezone",
        "on_exceed", "max_price_age_days",
    ),
    "deep": ("max_rounds",),
    "links": ("kb",),
    "links.kb": ("id", "alias", "path"),
}
TOP_LEVEL_SECTIONS = ("kb", "sources", "embedding", "extraction", "chunking", "retrieval", "rerank",
                      "budget", "deep", "links")
REQUIRED_SECTIONS = ("kb", "sources", "embedding")

EMBEDDING_PROVIDERS = ("sentence-transformers", "fastembed")
CHUNKING_STRATEGIES = ("structural",)
HEADING_GRAMMARS = ("none", "numbered")
ON_EXCEED = ("abort", "partial")
# Settings the code implements. A value the spec names but this build does not implement is refused
# at load time (spec §3.1): a setting the code ignores is not a setting.
VECTOR_TIERS = ("numpy",)
UNBUILT_VECTOR_TIERS = ("sqlite-vec",)
GRAPH_CHANNELS = ("off",)
UNBUILT_GRAPH_CHANNELS = ("expand", "ppr")

# Every extension that has a source type (markdown, text, code, pdf). A file must still have a source
# type to be indexed; `include` only narrows which files the walk considers.
DEFAULT_INCLUDE = tuple(f"*{suffix}" for suffix in SUFFIX_TO_TYPE)
# Never sources, whatever `exclude` says: derived state, and the sidecars themselves.
ALWAYS_EXCLUDED = (f"{STATE_DIR_NAME}/", f"*{SIDECAR_SUFFIX}")

DEFAULT_RERANK_MODEL = "BAAI/bge-reranker-base"
_VERSION_FLOOR = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_TEMPLATE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*@\d+(?:\.\d+)*")


# --------------------------------------------------------------------------------------------
# The parsed manifest: one frozen dataclass per section.


@dataclass(frozen=True)
class KBSection:
    name: str
    id: str
    requires_pinakes: str | None = None
    template: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class SourcesSection:
    """Where the documents are. Paths are KB-root-relative POSIX paths.

    Glob patterns follow .gitignore's shape: `*` and `?` stay inside one path component, `**`
    crosses directories, a pattern containing `/` (other than a trailing one) is anchored at the KB
    root, one without matches at any depth, and a trailing `/` matches a directory and everything
    beneath it. A pattern matches a file if it matches the file's path or any directory above it.
    Matching ignores case.
    """

    roots: tuple[str, ...]
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = ()

    @property
    def effective_exclude(self) -> tuple[str, ...]:
        return ALWAYS_EXCLUDED + self.exclude

    @cached_property
    def _include_globs(self) -> _GlobSet:
        return _GlobSet.compile(self.include)

    @cached_property
    def _exclude_globs(self) -> _GlobSet:
        return _GlobSet.compile(self.effective_exclude)

    def selects(self, relpath: str) -> bool:
        """Whether the file at `relpath` (KB-root-relative, POSIX) is a candidate source."""
        return (
            any(_is_within(relpath, root) for root in self.roots)
            and self._include_globs.matches(relpath, is_dir=False)
            and not self._exclude_globs.matches(relpath, is_dir=False)
        )

    def prunes(self, reldir: str) -> bool:
        """Whether the walk may skip the directory at `reldir` without descending into it."""
        return self._exclude_globs.matches(reldir, is_dir=True)


@dataclass(frozen=True)
class EmbeddingSection:
    provider: str
    model: str
    dim: int
    revision: str | None = None
    batch_size: int = 32


@dataclass(frozen=True)
class ExtractionSection:
    backend: str = "pypdfium2"


@dataclass(frozen=True)
class ChunkingSection:
    strategy: str = "structural"
    max_tokens: int = 250
    overlap: int = 25
    headings: str = "none"


@dataclass(frozen=True)
class ConfidenceSection:
    high: float
    low: float
    fitted_for: str


@dataclass(frozen=True)
class RetrievalSection:
    candidates_per_source: int = 50
    fusion_top_k: int = 20
    final_k: int = 8
    rrf_k: int = 60
    rerank: bool = True
    vector_tier: str = "numpy"
    adjacent_k: int = 5
    graph_channel: str = "off"
    confidence: ConfidenceSection | None = None  # absent ⇒ confidence is reported as "unknown"


@dataclass(frozen=True)
class RerankSection:
    provider: str
    model: str = DEFAULT_RERANK_MODEL
    revision: str | None = None
    batch_size: int = 16


@dataclass(frozen=True)
class BudgetSection:
    """Money is Decimal end to end: a cap compared against a float is not a cap (spec §5)."""

    confirm_above_eur: Decimal = Decimal("0.50")
    per_operation_eur: Decimal = Decimal("2.00")
    daily_eur: Decimal = Decimal("5.00")
    monthly_eur: Decimal = Decimal("20.00")
    timezone: str = "UTC"
    on_exceed: str = "abort"
    max_price_age_days: int = 90


@dataclass(frozen=True)
class DeepSection:
    max_rounds: int = 3


@dataclass(frozen=True)
class LinkedKB:
    """One `[[links.kb]]`: the partner's permanent ULID plus a machine-local alias and path."""

    id: str
    alias: str
    path: str


@dataclass(frozen=True)
class Manifest:
    path: Path
    kb: KBSection
    sources: SourcesSection
    embedding: EmbeddingSection
    extraction: ExtractionSection
    chunking: ChunkingSection
    retrieval: RetrievalSection
    rerank: RerankSection
    budget: BudgetSection
    deep: DeepSection
    links: tuple[LinkedKB, ...] = ()

    @property
    def root(self) -> Path:
        return self.path.parent

    def link(self, alias_or_id: str) -> LinkedKB | None:
        """The connected KB named by alias or ULID, or None."""
        for linked in self.links:
            if alias_or_id in (linked.alias, linked.id):
                return linked
        return None


# --------------------------------------------------------------------------------------------
# Errors.


@dataclass(frozen=True)
class ManifestProblem:
    key: str | None  # dotted key (`retrieval.final_k`); None for a whole-file problem
    problem: str
    remedy: str

    def render(self) -> str:
        return f"{self.key}: {self.problem}" if self.key else self.problem


class InvalidManifestError(ManifestError):
    """pinakes.toml is invalid; `problems` lists every problem found (section by section)."""

    def __init__(self, path: Path, problems: Sequence[ManifestProblem]):
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            only = self.problems[0]
            super().__init__(only.render(), remedy=only.remedy, path=path)
        else:
            lines = [f"{len(self.problems)} problems:"]
            for problem in self.problems:
                lines.append(f"  - {problem.render()}\n    fix: {problem.remedy}")
            super().__init__("\n".join(lines), remedy="fix each problem listed above", path=path)


# --------------------------------------------------------------------------------------------
# Loading.


def load_manifest(path: Path) -> Manifest:
    """Read and validate the manifest at `path`; raises InvalidManifestError (a ManifestError)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InvalidManifestError(path, [ManifestProblem(
            None, "the manifest does not exist", "run `pnk init` to create a KB, or pass -C DIR")]) from None
    except OSError as exc:
        raise InvalidManifestError(path, [ManifestProblem(
            None, f"cannot read the manifest ({exc.strerror or exc})",
            "check the file's permissions")]) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidManifestError(path, [ManifestProblem(
            None, f"not valid UTF-8 (byte offset {exc.start})", "save the file as UTF-8")]) from None
    return parse_manifest(text, path=path)


def parse_manifest(text: str, *, path: Path) -> Manifest:
    """Validate manifest `text`; `path` is where it lives (errors name it; `root` derives from it)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # A newer Pinakes may write syntax this build cannot parse; the floor still explains it.
        _refuse_newer_floor(_floor_from_text(text), path)
        raise InvalidManifestError(path, [ManifestProblem(
            None, f"invalid TOML: {exc}", "fix the syntax at that line and column (TOML 1.0)")]) from None
    _pre_pass_requires_pinakes(data, path)
    problems = _Problems()
    manifest = _read_manifest(data, Path(path), problems)
    if problems:
        raise InvalidManifestError(path, problems.items)
    assert manifest is not None
    return manifest


def _pre_pass_requires_pinakes(data: Mapping[str, object], path: Path) -> None:
    kb = data.get("kb")
    floor = kb.get("requires_pinakes") if isinstance(kb, dict) else None
    if isinstance(floor, str) and _VERSION_FLOOR.fullmatch(floor):
        _refuse_newer_floor(floor, path)


def _floor_from_text(text: str) -> str | None:
    """`[kb] requires_pinakes` found line by line, for a file that does not parse as TOML."""
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        header = re.fullmatch(r"\[\[?\s*([^\]]+?)\s*\]\]?(?:\s*#.*)?", stripped)
        if header:
            section = header.group(1)
            continue
        match = re.fullmatch(r"requires_pinakes\s*=\s*[\"'](\d+\.\d+\.\d+)[\"'](?:\s*#.*)?", stripped)
        if section == "kb" and match:
            return match.group(1)
    return None


def _refuse_newer_floor(floor: str | None, path: Path) -> None:
    if floor is None or _version_tuple(floor) <= _version_tuple(__version__):
        return
    raise InvalidManifestError(path, [ManifestProblem(
        "kb.requires_pinakes",
        f"this KB requires Pinakes {floor} or newer; this is Pinakes {__version__}",
        f"upgrade Pinakes to {floor} or newer (e.g. `pip install -U \"pinakes>={floor}\"`)")])


def _version_tuple(version: str) -> tuple[int, int, int]:
    match = _VERSION_FLOOR.match(version)
    if not match:
        return (0, 0, 0)
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch))


# --------------------------------------------------------------------------------------------
# The strict reader: typed getters that record a problem and return a placeholder, so one pass
# reports everything. Placeholders never escape: any problem means no Manifest is returned.


class _Problems:
    def __init__(self) -> None:
        self.items: list[ManifestProblem] = []

    def add(self, key: str | None, problem: str, remedy: str) -> None:
        self.items.append(ManifestProblem(key, problem, remedy))

    def __bool__(self) -> bool:
        return bool(self.items)


_TOML_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (str, "a string"), (int, "an integer"), (float, "a float"),
    (list, "an array"), (dict, "a table"), (datetime, "a date-time"), (date, "a date"),
    (time, "a time"),
)


def _toml_type(value: object) -> str:
    for kind, label in _TOML_TYPE_NAMES:
        if isinstance(value, kind):
            return label
    return type(value).__name__


class _Invalid:
    """The value was present but wrong (already reported)."""


_INVALID = _Invalid()


class _Table:
    """One TOML table being read. Reading a key declares it known; `finish` reports the rest."""

    def __init__(self, data: Mapping[str, object], section: str, key: str, problems: _Problems):
        self._data = data
        self._section = section  # the SECTION_KEYS entry (`links.kb`, never `links.kb[0]`)
        self.key = key  # the dotted prefix errors name (`links.kb[0]`)
        self._problems = problems
        self.failed: set[str] = set()

    def dotted(self, name: str) -> str:
        return f"{self.key}.{name}"

    def fail(self, name: str, problem: str, remedy: str) -> None:
        self.failed.add(name)
        self._problems.add(self.dotted(name), problem, remedy)

    def ok(self, *names: str) -> bool:
        """Whether every named key read cleanly (cross-key checks skip values already reported)."""
        return not self.failed.intersection(names)

    def _raw(self, name: str, expected: tuple[type, ...], expected_label: str, example: str,
             *, required: bool = False) -> object:
        """The value if present and of the expected type, None if absent, _INVALID after reporting."""
        assert name in SECTION_KEYS[self._section], f"undeclared key {self._section}.{name}"
        if name not in self._data:
            return None
        value = self._data[name]
        # bool is an int in Python and never a valid integer in a manifest.
        is_bool_for_number = isinstance(value, bool) and bool not in expected
        if is_bool_for_number or not isinstance(value, expected):
            self.fail(name, f"must be {expected_label}, got {_toml_type(value)} ({value!r})",
                      f"write it as {expected_label}, e.g. {name} = {example}")
            return _INVALID
        if isinstance(value, str) and not value.strip():
            self.fail(name, "is an empty string (an empty value is an error, not a request for "
                            "the default)",
                      f"give a value, e.g. {name} = {example}" if required
                      else f"delete the line to use the default, or give a value, e.g. {name} = {example}")
            return _INVALID
        return value

    def _missing(self, name: str, example: str) -> None:
        self.fail(name, "is required", f"add it, e.g. {name} = {example}")

    # -- scalars --------------------------------------------------------------------------

    def required_string(self, name: str, example: str) -> str:
        value = self._raw(name, (str,), "a string", example, required=True)
        if value is None:
            self._missing(name, example)
        return value if isinstance(value, str) else ""

    def optional_string(self, name: str, example: str) -> str | None:
        value = self._raw(name, (str,), "a string", example)
        return value if isinstance(value, str) else None

    def choice(self, name: str, default: str | None, allowed: Sequence[str],
               unbuilt: Sequence[str] = ()) -> str:
        """A string from `allowed`. `unbuilt` names values the spec defines but this build lacks."""
        example = f'"{allowed[0]}"'
        value = self._raw(name, (str,), "a string", example, required=default is None)
        if value is None:
            if default is None:
                self._missing(name, example)
                return allowed[0]
            return default
        if not isinstance(value, str):
            return default or allowed[0]
        if value in allowed:
            return value
        built = ", ".join(f'"{option}"' for option in allowed)
        if value in unbuilt:
            self.fail(name, f'"{value}" is not built in this Pinakes (built: {built})',
                      f"set {name} = {example} or delete the line")
        else:
            suggestion = difflib.get_close_matches(value, [*allowed, *unbuilt], n=1)
            hint = f'; did you mean "{suggestion[0]}"?' if suggestion else ""
            self.fail(name, f'"{value}" is not one of {built}{hint}', f"set {name} to one of {built}")
        return default or allowed[0]

    def integer(self, name: str, default: int | None, minimum: int) -> int:
        example = str(default if default is not None else max(minimum, 1))
        value = self._raw(name, (int,), "an integer", example)
        if value is None:
            if default is None:
                self._missing(name, example)
                return minimum
            return default
        if not isinstance(value, int):
            return default if default is not None else minimum
        if value < minimum:
            self.fail(name, f"must be >= {minimum}, got {value}", f"set {name} to {minimum} or more")
            return default if default is not None else minimum
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self._raw(name, (bool,), "a boolean", str(default).lower())
        return value if isinstance(value, bool) else default

    def required_float(self, name: str, example: str) -> float:
        value = self._raw(name, (int, float), "a number", example)
        if value is None:
            self._missing(name, example)
            return 0.0
        if not isinstance(value, (int, float)):
            return 0.0
        if not math.isfinite(value):
            self.fail(name, f"must be a finite number, got {value}", f"set {name} to a real threshold")
            return 0.0
        return float(value)

    def money(self, name: str, default: Decimal) -> Decimal:
        """EUR as Decimal, from a TOML string or number via its text: never float arithmetic."""
        example = f'"{default}"'
        value = self._raw(name, (str, int, float), "an amount in EUR", example)
        if value is None:
            return default
        if isinstance(value, _Invalid):
            return default
        try:
            amount = Decimal(str(value).strip())
        except InvalidOperation:
            self.fail(name, f"{value!r} is not an amount", f'write a decimal amount, e.g. {name} = {example}')
            return default
        if not amount.is_finite():
            self.fail(name, f"must be a finite amount, got {value!r}", f"write e.g. {name} = {example}")
            return default
        if amount < 0:
            self.fail(name, f"must be >= 0, got {amount}", f"write a cap of 0 or more, e.g. {name} = {example}")
            return default
        return amount

    def string_list(self, name: str, default: tuple[str, ...] | None, example: str) -> tuple[str, ...]:
        value = self._raw(name, (list,), "an array of strings", example)
        if value is None:
            if default is None:
                self._missing(name, example)
                return ()
            return default
        if not isinstance(value, list):
            return default or ()
        items: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(name, f"item {index} must be a string, got {_toml_type(item)} ({item!r})",
                          f"write every item as a quoted string, e.g. {name} = {example}")
            elif not item.strip():
                self.fail(name, f"item {index} is an empty string", "remove it or give a value")
            else:
                items.append(item)
        return tuple(items)

    # -- nesting --------------------------------------------------------------------------

    def table(self, name: str) -> _Table | None:
        value = self._raw(name, (dict,), "a table", "{ ... }")
        if not isinstance(value, dict):
            return None
        return _Table(value, f"{self._section}.{name}", self.dotted(name), self._problems)

    def array_of_tables(self, name: str, header: str) -> list[_Table]:
        value = self._raw(name, (list,), f"an array of tables ({header})", f"(one {header} per item)")
        if not isinstance(value, list):
            return []
        tables: list[_Table] = []
        for index, item in enumerate(value):
            if isinstance(item, dict):
                tables.append(_Table(item, f"{self._section}.{name}", f"{self.dotted(name)}[{index}]",
                                     self._problems))
            else:
                self.fail(name, f"item {index} must be a table ({header}), got {_toml_type(item)}",
                          f"write each item as its own {header} block")
        return tables

    def finish(self) -> None:
        """Report every key nothing asked for, with a did-you-mean against the declared keys."""
        known = SECTION_KEYS[self._section]
        for name in self._data:
            if name not in known:
                self._problems.add(self.dotted(name), *_unknown(name, known, f"[{self._section}]"))


def _unknown(name: str, known: Sequence[str], where: str) -> tuple[str, str]:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"unknown key; did you mean `{close[0]}`?", f"rename it to `{close[0]}`"
    return ("unknown key",
            f"remove it ({where} accepts: {', '.join(known)}); if a newer Pinakes wrote this "
            "manifest, upgrade Pinakes")


# --------------------------------------------------------------------------------------------
# The sections.


def _read_manifest(data: Mapping[str, object], path: Path, problems: _Problems) -> Manifest | None:
    for name, value in data.items():
        if name not in TOP_LEVEL_SECTIONS:
            close = difflib.get_close_matches(name, TOP_LEVEL_SECTIONS, n=1)
            hint = f"; did you mean [{close[0]}]?" if close else ""
            remedy = (f"rename it to [{close[0]}]" if close else
                      f"remove it (sections: {', '.join(TOP_LEVEL_SECTIONS)}); if a newer Pinakes "
                      "wrote this manifest, upgrade Pinakes")
            problems.add(name, f"unknown section [{name}]{hint}", remedy)
        elif not isinstance(value, dict):
            problems.add(name, f"must be a table ([{name}]), got {_toml_type(value)}",
                         f"write it as a [{name}] section")
    tables: dict[str, _Table] = {}
    for name in TOP_LEVEL_SECTIONS:
        value = data.get(name)
        if isinstance(value, dict):
            tables[name] = _Table(value, name, name, problems)
            continue
        if name in REQUIRED_SECTIONS and name not in data:
            problems.add(name, f"the required section [{name}] is missing",
                         f"add the [{name}] section (see MANIFEST.md)")
        # Absent (or already reported): read as all defaults. A missing required section's keys
        # would each be "required" too; that is one problem, already said, so they go unreported.
        tables[name] = _Table({}, name, name, _Problems())

    kb = _read_kb(tables["kb"])
    sources = _read_sources(tables["sources"])
    embedding = _read_embedding(tables["embedding"])
    extraction = _read_extraction(tables["extraction"])
    chunking = _read_chunking(tables["chunking"])
    retrieval = _read_retrieval(tables["retrieval"])
    rerank = _read_rerank(tables["rerank"], default_provider=embedding.provider)
    budget = _read_budget(tables["budget"])
    deep = _read_deep(tables["deep"])
    links = _read_links(tables["links"])
    for table in tables.values():
        table.finish()
    if problems:
        return None
    return Manifest(path=path, kb=kb, sources=sources, embedding=embedding, extraction=extraction,
                    chunking=chunking, retrieval=retrieval, rerank=rerank, budget=budget, deep=deep,
                    links=links)


def _ulid(table: _Table, name: str) -> str:
    value = table.required_string(name, '"01J9Z8Y7X6W5V4T3S2R1Q0P9N8"')
    if value and not _is_canonical_ulid(value):
        hint = f" (write it in uppercase: {value.upper()})" if _is_canonical_ulid(value.upper()) else ""
        table.fail(name, f"{value!r} is not a ULID (26 Crockford base32 characters){hint}",
                   "copy the ULID exactly; never invent one (a KB id is permanent)")
    return value


def _is_canonical_ulid(value: str) -> bool:
    try:
        return str(ULID.from_str(value)) == value
    except ValueError:
        return False


def _read_kb(table: _Table) -> KBSection:
    name = table.required_string("name", '"my-research"')
    kb_id = _ulid(table, "id")
    floor = table.optional_string("requires_pinakes", f'"{__version__}"')
    if floor is not None and not _VERSION_FLOOR.fullmatch(floor):
        table.fail("requires_pinakes", f"{floor!r} is not a version X.Y.Z",
                   f'write the oldest Pinakes that can read this KB, e.g. "{__version__}"')
    template = table.optional_string("template", '"default@1"')
    if template is not None and not _TEMPLATE_REF.fullmatch(template):
        table.fail("template", f"{template!r} is not a template reference NAME@VERSION",
                   'write e.g. template = "default@1"')
    description = table.optional_string("description", '"What this KB is about"')
    return KBSection(name=name, id=kb_id, requires_pinakes=floor, template=template,
                     description=description)


def _read_sources(table: _Table) -> SourcesSection:
    roots = table.string_list("roots", None, '["docs"]')
    if table.ok("roots") and not roots:
        table.fail("roots", "is empty: no document would ever be found", 'list at least one, e.g. ["docs"]')
    roots = _normalise_roots(table, roots)
    include = table.string_list("include", DEFAULT_INCLUDE, '["*.md", "*.pdf"]')
    if table.ok("include") and not include:
        table.fail("include", "is empty: no file would ever be a source",
                   "delete the line to include every supported type, or list patterns")
    exclude = table.string_list("exclude", (), '["drafts/"]')
    for name, patterns in (("include", include), ("exclude", exclude)):
        for pattern in patterns:
            try:
                _GlobSet.compile([pattern])
            except re.error as exc:
                table.fail(name, f"{pattern!r} is not a valid glob ({exc})", "fix the pattern")
    return SourcesSection(roots=roots, include=include, exclude=exclude)


def _normalise_roots(table: _Table, roots: tuple[str, ...]) -> tuple[str, ...]:
    normalised: list[str] = []
    for root in roots:
        if "\\" in root:
            table.fail("roots", f"{root!r} uses a backslash",
                       "use forward slashes: the manifest is shared across machines")
            continue
        if root.startswith("/") or re.match(r"[A-Za-z]:", root):
            table.fail("roots", f"{root!r} is absolute; roots are relative to the KB root",
                       'write it relative to the directory holding pinakes.toml, e.g. "docs"')
            continue
        clean = posixpath.normpath(root)
        if clean == ".." or clean.startswith("../"):
            table.fail("roots", f"{root!r} leaves the KB", "keep every root inside the KB directory")
            continue
        if clean.split("/")[0] == STATE_DIR_NAME:
            table.fail("roots", f"{root!r} is inside {STATE_DIR_NAME}/, which is derived state",
                       "name a directory holding your documents")
            continue
        for earlier in normalised:
            if _is_within(clean, earlier) or _is_within(earlier, clean):
                table.fail("roots", f"{root!r} overlaps the root {earlier!r}: files would be found twice",
                           "keep only the outer directory")
                break
        else:
            normalised.append(clean)
    return tuple(normalised)


def _is_within(relpath: str, root: str) -> bool:
    return root == "." or relpath == root or relpath.startswith(root + "/")


def _read_embedding(table: _Table) -> EmbeddingSection:
    return EmbeddingSection(
        provider=table.choice("provider", None, EMBEDDING_PROVIDERS),
        model=table.required_string("model", '"sentence-transformers/all-MiniLM-L6-v2"'),
        dim=table.integer("dim", None, minimum=1),
        revision=table.optional_string("revision", '"<commit hash>"'),
        batch_size=table.integer("batch_size", 32, minimum=1),
    )


def _read_extraction(table: _Table) -> ExtractionSection:
    return ExtractionSection(backend=table.choice("backend", "pypdfium2", PDF_BACKENDS))


def _read_chunking(table: _Table) -> ChunkingSection:
    chunking = ChunkingSection(
        strategy=table.choice("strategy", "structural", CHUNKING_STRATEGIES),
        max_tokens=table.integer("max_tokens", 250, minimum=1),
        overlap=table.integer("overlap", 25, minimum=0),
        headings=table.choice("headings", "none", HEADING_GRAMMARS),
    )
    if table.ok("max_tokens", "overlap") and chunking.overlap >= chunking.max_tokens:
        table.fail("overlap", f"overlap ({chunking.overlap}) must be smaller than max_tokens "
                              f"({chunking.max_tokens})",
                   f"set overlap below {chunking.max_tokens} (the default is 25)")
    return chunking


def _read_retrieval(table: _Table) -> RetrievalSection:
    retrieval = RetrievalSection(
        candidates_per_source=table.integer("candidates_per_source", 50, minimum=1),
        fusion_top_k=table.integer("fusion_top_k", 20, minimum=1),
        final_k=table.integer("final_k", 8, minimum=1),
        rrf_k=table.integer("rrf_k", 60, minimum=0),
        rerank=table.boolean("rerank", True),
        vector_tier=table.choice("vector_tier", "numpy", VECTOR_TIERS, UNBUILT_VECTOR_TIERS),
        adjacent_k=table.integer("adjacent_k", 5, minimum=1),
        graph_channel=table.choice("graph_channel", "off", GRAPH_CHANNELS, UNBUILT_GRAPH_CHANNELS),
        confidence=_read_confidence(table.table("confidence")),
    )
    rule = "widths must narrow: final_k <= fusion_top_k <= candidates_per_source"
    if table.ok("final_k", "fusion_top_k") and retrieval.final_k > retrieval.fusion_top_k:
        table.fail("final_k", f"final_k ({retrieval.final_k}) is larger than fusion_top_k "
                              f"({retrieval.fusion_top_k}); {rule}",
                   f"lower final_k to at most {retrieval.fusion_top_k}, or raise fusion_top_k")
    if (table.ok("fusion_top_k", "candidates_per_source")
            and retrieval.fusion_top_k > retrieval.candidates_per_source):
        table.fail("fusion_top_k", f"fusion_top_k ({retrieval.fusion_top_k}) is larger than "
                                   f"candidates_per_source ({retrieval.candidates_per_source}); {rule}",
                   f"lower fusion_top_k to at most {retrieval.candidates_per_source}, or raise "
                   "candidates_per_source")
    return retrieval


def _read_confidence(table: _Table | None) -> ConfidenceSection | None:
    if table is None:
        return None
    confidence = ConfidenceSection(
        high=table.required_float("high", "0.7"),
        low=table.required_float("low", "0.3"),
        fitted_for=table.optional_string("fitted_for", '"<embedding> + <reranker>, <golden set>"') or "",
    )
    if not confidence.fitted_for and table.ok("fitted_for"):
        table.fail("fitted_for", "is required whenever thresholds are present: thresholds are only "
                                 "valid for the models and golden set they were fitted on",
                   'name what they were fitted for, or re-fit with `pnk eval --fit-confidence`')
    if table.ok("high", "low") and confidence.low > confidence.high:
        table.fail("low", f"low ({confidence.low}) is above high ({confidence.high}); thresholds "
                          "must be ordered low <= high",
                   "swap them, or re-fit with `pnk eval --fit-confidence`")
    table.finish()
    return confidence


def _read_rerank(table: _Table, *, default_provider: str) -> RerankSection:
    return RerankSection(
        provider=table.choice("provider", default_provider, EMBEDDING_PROVIDERS),
        model=table.optional_string("model", f'"{DEFAULT_RERANK_MODEL}"') or DEFAULT_RERANK_MODEL,
        revision=table.optional_string("revision", '"<commit hash>"'),
        batch_size=table.integer("batch_size", 16, minimum=1),
    )


def _read_budget(table: _Table) -> BudgetSection:
    budget = BudgetSection(
        confirm_above_eur=table.money("confirm_above_eur", Decimal("0.50")),
        per_operation_eur=table.money("per_operation_eur", Decimal("2.00")),
        daily_eur=table.money("daily_eur", Decimal("5.00")),
        monthly_eur=table.money("monthly_eur", Decimal("20.00")),
        timezone=table.optional_string("timezone", '"Europe/Rome"') or "UTC",
        on_exceed=table.choice("on_exceed", "abort", ON_EXCEED),
        max_price_age_days=table.integer("max_price_age_days", 90, minimum=1),
    )
    if table.ok("timezone") and not _is_timezone(budget.timezone):
        table.fail("timezone", f"{budget.timezone!r} is not an IANA time zone",
                   'write a name such as "UTC" or "Europe/Rome"')
    if (table.ok("confirm_above_eur", "per_operation_eur")
            and budget.confirm_above_eur > budget.per_operation_eur):
        table.fail("confirm_above_eur",
                   f"confirm_above_eur ({budget.confirm_above_eur}) is above per_operation_eur "
                   f"({budget.per_operation_eur}): the confirmation prompt would be unreachable",
                   f"set confirm_above_eur to at most {budget.per_operation_eur}")
    return budget


def _is_timezone(name: str) -> bool:
    if name == "UTC":  # needs no tz database, so it works even where none is installed
        return True
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _read_deep(table: _Table) -> DeepSection:
    return DeepSection(max_rounds=table.integer("max_rounds", 3, minimum=1))


def _read_links(links: _Table) -> tuple[LinkedKB, ...]:
    linked: list[LinkedKB] = []
    seen_alias: dict[str, int] = {}
    seen_id: dict[str, int] = {}
    for index, table in enumerate(links.array_of_tables("kb", "[[links.kb]]")):
        kb_id = _ulid(table, "id")
        alias = table.required_string("alias", '"partner"')
        if alias and table.ok("alias"):
            if alias == "self":
                table.fail("alias", '"self" is reserved (pnk://self/... names this KB)',
                           "choose another alias")
            elif _is_canonical_ulid(alias.upper()):
                table.fail("alias", f"{alias!r} looks like a ULID; tools accept an alias or a ULID, "
                                    "so it would be ambiguous", "choose a word-like alias")
        path = table.required_string("path", '"../partner-kb"')
        table.finish()
        if alias in seen_alias and table.ok("alias"):
            table.fail("alias", f'the alias "{alias}" is already used by links.kb[{seen_alias[alias]}]',
                       "give each connected KB its own alias")
        if kb_id in seen_id and table.ok("id"):
            table.fail("id", f"the KB {kb_id} is already linked by links.kb[{seen_id[kb_id]}]",
                       "keep one [[links.kb]] per connected KB")
        seen_alias.setdefault(alias, index)
        seen_id.setdefault(kb_id, index)
        linked.append(LinkedKB(id=kb_id, alias=alias, path=path))
    return tuple(linked)


# --------------------------------------------------------------------------------------------
# Globs (the semantics are documented on SourcesSection).


_PLAIN_SUFFIX = re.compile(r"\*[^*?\[/]*")  # `*.md`: testable with str.endswith


@dataclass(frozen=True)
class _GlobSet:
    """Patterns compiled by kind, so testing a path costs a few regex calls however many patterns
    there are (the default include has one per supported extension, and the walk tests every file)."""

    suffixes: tuple[str, ...]  # unanchored `*.ext` patterns, lowercased
    names: re.Pattern[str] | None  # other unanchored patterns, tested on each path component
    dir_names: re.Pattern[str] | None  # unanchored with a trailing `/`: directory components only
    paths: re.Pattern[str] | None  # anchored patterns, tested on each path prefix
    dir_paths: re.Pattern[str] | None  # anchored with a trailing `/`: directory prefixes only

    @classmethod
    def compile(cls, patterns: Sequence[str]) -> _GlobSet:
        suffixes: list[str] = []
        kinds: dict[tuple[bool, bool], list[str]] = {}
        for pattern in patterns:
            directory_only = pattern.endswith("/")
            body = pattern.rstrip("/")
            anchored = body.startswith("/") or "/" in body.lstrip("/")
            body = body.lstrip("/")
            if not anchored and not directory_only and _PLAIN_SUFFIX.fullmatch(body):
                suffixes.append(body[1:].lower())
            else:
                kinds.setdefault((anchored, directory_only), []).append(_translate_glob(body))
        return cls(tuple(suffixes), _alternation(kinds.get((False, False))),
                   _alternation(kinds.get((False, True))), _alternation(kinds.get((True, False))),
                   _alternation(kinds.get((True, True))))

    def matches(self, relpath: str, *, is_dir: bool) -> bool:
        """Whether any pattern matches `relpath` itself or a directory above it."""
        parts = relpath.split("/")
        for depth, name in enumerate(parts, start=1):
            candidate_is_dir = is_dir or depth < len(parts)
            if self.suffixes and name.lower().endswith(self.suffixes):
                return True
            if self.names is not None and self.names.fullmatch(name):
                return True
            if candidate_is_dir and self.dir_names is not None and self.dir_names.fullmatch(name):
                return True
            if self.paths is not None or self.dir_paths is not None:
                prefix = "/".join(parts[:depth])
                if self.paths is not None and self.paths.fullmatch(prefix):
                    return True
                if candidate_is_dir and self.dir_paths is not None and self.dir_paths.fullmatch(prefix):
                    return True
        return False


def _alternation(regexes: Sequence[str] | None) -> re.Pattern[str] | None:
    if not regexes:
        return None
    # Case-insensitive: a KB moves between case-sensitive and case-insensitive filesystems, and
    # `*.pdf` must find `Paper.PDF` on both.
    return re.compile("|".join(f"(?:{regex})" for regex in regexes), re.IGNORECASE)


def _translate_glob(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            members = pattern[i + 1:end]
            if members.startswith("!"):
                members = "^" + members[1:]
            out.append("[" + members.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)
