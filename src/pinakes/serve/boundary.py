"""The server boundary (spec §4.7): every tool argument is checked here before anything uses it.

The caller is an LLM acting on untrusted document text, so no argument may name a file. Identifiers
(`kb`, `doc_id`) must match exactly one of a closed set; filter values (`path_prefix`, `tags`,
dates) are matched against rows of the index and never opened, and are still refused when they
look like a path or URI — `..`, an absolute path, a scheme, a glob, percent-encoding, a NUL or
other control character, an overlong string, or a Unicode look-alike of `/`, `\\` or `.` — because
an argument that *looks* like a path is a confused or hostile caller and deserves a clear error,
not an empty result. The query is the one free-text argument: it is searched as words (FTS5 never
sees it as syntax), so path-like text in it is refused only for control characters and length.

Unknown argument names are refused too: an SDK that silently drops a misspelt key turns "filter by
path" into "search everything" without a word.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import cast

# NotServedError is re-exported: serve/documents.py and the tests name it `boundary.NotServedError`.
from pinakes.errors import NotServedError as NotServedError
from pinakes.errors import ToolArgumentError
from pinakes.ids import is_ulid
from pinakes.links.addresses import NameForm, name_form
from pinakes.links.authoring import MAX_REL_CHARS as MAX_REL_CHARS  # what `pnk link` writes, at most

MAX_QUERY_CHARS = 2_000
MAX_IDENTIFIER_CHARS = 64
MAX_FILTER_CHARS = 256
MAX_TAGS = 32
MAX_RELS = 16  # relations one pinakes_links call may name
MAX_OFFSET = 1_000_000_000

# Characters that render as (or normalise to) a slash, a backslash or a dot but are not one: a
# filter spelled with them is an attempt to get `..` or `/` past a check that looks for ASCII.
_LOOKALIKES = frozenset(
    "\u2215\u2044\u29f8\u29f9\u2216\u2571\u2572\u1735\u27cb\u27cd\u3033\u30fb"  # slashes
    "\uff0f\uff3c\ufe68\u2024\u2025\u2026\uff0e\u3002\ufe52\u0701\u0702\u2e31"  # fullwidth, dots
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_GLOB_CHARS = frozenset("*?[]{}")


def refuse(argument: str, problem: str, remedy: str) -> ToolArgumentError:
    return ToolArgumentError(f"argument `{argument}` {problem}", remedy=remedy)


def check_argument_names(tool: str, arguments: Mapping[str, object], allowed: Sequence[str]) -> None:
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) if allowed else "no arguments"
        raise ToolArgumentError(
            f"{tool} does not take {', '.join(f'`{name}`' for name in unknown)}",
            remedy=f"{tool} takes: {takes}",
        )


def _refuse_invisible(argument: str, value: str, *, allow_whitespace: bool) -> None:
    """Control, format (bidi, zero-width) and unassigned characters: never part of a real value."""
    for char in value:
        if allow_whitespace and char in "\t\n\r":
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn") or category in ("Zl", "Zp"):
            name = "a NUL byte" if char == "\x00" else f"the invisible or control character U+{ord(char):04X}"
            raise refuse(argument, f"contains {name}", "pass plain visible text")


def check_string(argument: str, value: object, *, max_chars: int, allow_whitespace: bool = False) -> str:
    """A non-empty string without control or invisible characters, at most `max_chars` long."""
    if not isinstance(value, str):
        raise refuse(argument, f"must be a string, got {_json_type(value)}", f"pass `{argument}` as a string")
    if len(value) > max_chars:
        raise refuse(argument, f"is {len(value):,} characters long; the limit is {max_chars:,}",
                     f"shorten `{argument}`")
    _refuse_invisible(argument, value, allow_whitespace=allow_whitespace)
    if not value.strip():
        raise refuse(argument, "is empty", f"give `{argument}` a value, or leave it out")
    return value


def check_query(value: object) -> str:
    """The search text. Only control characters and length are refused: it is searched as words."""
    return check_string("query", value, max_chars=MAX_QUERY_CHARS, allow_whitespace=True).strip()


# What a good value of each path-checked argument is, for the remedy of a refused one: a bad `kb` or
# `tags` value is not helped by advice about path prefixes.
_GOOD_VALUE = {
    "path_prefix": "a prefix relative to the KB root, such as docs/ or docs/api/",
    "tags": "the tag as written, such as garden or status:draft",
    "kb": "the name of a served KB, as pinakes_list_kbs lists it",
    "rel": "a relation name as sidecars write it, such as cites or see-also",
}


def check_not_path_like(argument: str, value: str, *, allow_slash: bool, allow_colon: bool = False) -> str:
    """Refuse anything a filesystem or URL parser would treat as a location rather than a value.

    `allow_colon` keeps `status:draft` a valid tag while still refusing `file:` and `x://`."""
    good = f"pass {_GOOD_VALUE.get(argument, f'a plain `{argument}` value')}"
    if unicodedata.normalize("NFKC", value) != value or any(char in _LOOKALIKES for char in value):
        raise refuse(argument, "contains a Unicode look-alike or compatibility character",
                     f"spell it with plain characters: {good}")
    if "\\" in value:
        raise refuse(argument, "contains a backslash",
                     "use / between path segments" if argument == "path_prefix" else good)
    looks_like_uri = "://" in value or value.lower().startswith("file:")
    if looks_like_uri or (not allow_colon and _SCHEME.match(value)):
        raise refuse(argument, "looks like a URI; tools take no URIs or filesystem paths",
                     f"{good} (documents are addressed by ULID)")
    if value.startswith(("/", "~")):
        raise refuse(argument, "is an absolute path; tools never take filesystem paths", good)
    if any(char in _GLOB_CHARS for char in value):
        raise refuse(argument, "contains a glob character (* ? [ ] { }); values are matched literally", good)
    if _PERCENT_ESCAPE.search(value):
        raise refuse(argument, "contains a percent-escape; values are never URL-decoded",
                     "pass the characters themselves")
    segments = value.split("/")
    if any(segment in (".", "..") for segment in segments):
        raise refuse(argument, "contains a `.` or `..` segment", good)
    if not allow_slash and len(segments) > 1:
        raise refuse(argument, "contains a /", good)
    if any(segment == "" for segment in segments[:-1]):
        raise refuse(argument, "contains an empty path segment (//)", "remove the doubled /")
    return value


def check_path_prefix(value: object) -> str:
    prefix = check_string("path_prefix", value, max_chars=MAX_FILTER_CHARS)
    return check_not_path_like("path_prefix", prefix.strip(), allow_slash=True)


def check_tags(value: object) -> list[str]:
    items = _items(value)
    if items is None:
        raise refuse("tags", f"must be a list of strings, got {_json_type(value)}", 'pass ["tag", ...]')
    return _check_labels("tags", items, what="tags", most=MAX_TAGS, max_chars=MAX_FILTER_CHARS)


def check_rels(value: object) -> list[str]:
    """`pinakes_links` relations: a name or a list of names, each a short value matched against the
    links table's `rel` (the limit `pnk link` writes to), never a path."""
    items = _items(value)
    if not items:
        raise refuse("rel", f"must be a relation name or a list of them, got {_json_type(value)}", 'pass "cites"')
    return _check_labels("rel", items, what="relations", most=MAX_RELS, max_chars=MAX_REL_CHARS)


def _check_labels(argument: str, items: list[object], *, what: str, most: int, max_chars: int) -> list[str]:
    """At most `most` labels (tags, relations), each a short string matched against index rows and
    never a path: `status:draft` and `a/b` are labels, `file:` and `..` are not."""
    if len(items) > most:
        raise refuse(argument, f"has {len(items)} {what}; the limit is {most}", f"pass fewer {what}")
    labels: list[str] = []
    for item in items:
        label = check_string(argument, item, max_chars=max_chars).strip()
        labels.append(check_not_path_like(argument, label, allow_slash=True, allow_colon=True))
    return labels


def check_date(argument: str, value: object) -> str:
    text = check_string(argument, value, max_chars=40).strip()
    if not _ISO_DATE.fullmatch(text):
        raise refuse(argument, f"is not an ISO date ({text!r})", "use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][+HH:MM]")
    return text


def check_choice(argument: str, value: object, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise refuse(argument, f"must be one of {', '.join(choices)}; got {_shown(value)}",
                     f"pass one of: {', '.join(choices)}")
    return value


def check_choices(argument: str, value: object, choices: Sequence[str]) -> list[str]:
    items = _items(value)
    if not items:
        raise refuse(argument, f"must be one of {', '.join(choices)}", f"pass one of: {', '.join(choices)}")
    return [check_choice(argument, item, choices) for item in items]


def check_bool(argument: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise refuse(argument, f"must be true or false, got {_json_type(value)}", f"pass `{argument}`: true")
    return value


def check_int(argument: str, value: object, *, minimum: int) -> int:
    """A JSON integer (a whole float such as 5.0 is accepted; a bool or a string is not)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(argument, f"must be a whole number, got {_json_type(value)}", f"pass `{argument}` as an integer")
    if value < minimum or value > MAX_OFFSET:
        raise refuse(argument, f"must be between {minimum} and {MAX_OFFSET:,}, got {value}",
                     f"pass `{argument}` >= {minimum}")
    return value


def check_count(argument: str, value: object) -> int:
    """A bound the caller may set (depth, fan-out, rows, tokens): a whole number of at least 1. It has
    no upper limit here because the tool clamps it into its range and says so: asking for more gets
    less, never an error."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(argument, f"must be a whole number, got {_json_type(value)}", f"pass `{argument}` as an integer")
    if value < 1:
        raise refuse(argument, f"must be at least 1, got {value}", f"pass `{argument}` >= 1, or leave it out")
    return value


# The forms of the one document-name grammar (links/addresses.py) a tool argument may take: an id,
# never a path, an alias or a URI, so no argument makes the server look at its filesystem.
DOC_ID_FORMS: tuple[NameForm, ...] = ("ulid",)
DOC_ID_REMEDY = "pass the doc_id of a pinakes_search passage"


def check_doc_id(value: object) -> str:
    """A document is named by its canonical ULID, never by a path."""
    if not isinstance(value, str):
        raise refuse("doc_id", f"must be a document ULID string, got {_json_type(value)}", DOC_ID_REMEDY)
    check_string("doc_id", value, max_chars=MAX_IDENTIFIER_CHARS)
    if name_form(value, accept=DOC_ID_FORMS) is None or not is_ulid(value):  # canonical case only
        raise refuse(
            "doc_id", f"is not a document ULID ({_shown(value)}); documents are addressed by id, never by path",
            f"{DOC_ID_REMEDY}: 26 upper-case Crockford base32 characters",
        )
    return value


def check_objects(argument: str, value: object, *, most: int) -> list[Mapping[str, object]]:
    """A list of 1..`most` JSON objects (each one's members are the caller's to check)."""
    kind = _json_type(value)
    items = cast("list[object]", value) if isinstance(value, list) else None  # parsed JSON: checked below
    if not items:
        raise refuse(argument, f"must be a non-empty list of objects, got {kind}",
                     f"pass a list of 1 to {most} objects")
    if len(items) > most:
        raise refuse(argument, f"has {len(items)} items; at most {most}", f"split it into calls of at most {most}")
    objects: list[Mapping[str, object]] = []
    for number, item in enumerate(items):
        if not isinstance(item, dict):
            raise refuse(f"{argument}[{number}]", f"must be an object, got {_json_type(item)}", "pass {...}")
        objects.append(cast("dict[str, object]", item))  # a JSON object's keys are strings
    return objects


def check_kb_name(value: object) -> str:
    """The shape of a `kb` argument; whether it names a served KB is the caller's lookup."""
    text = check_string("kb", value, max_chars=MAX_IDENTIFIER_CHARS)
    return check_not_path_like("kb", text, allow_slash=False)


def _items(value: object) -> list[object] | None:
    """A JSON list argument's items; a lone string is a list of one. None for anything else."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return cast("list[object]", value)  # parsed JSON: its items are checked one by one
    return None


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _shown(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
