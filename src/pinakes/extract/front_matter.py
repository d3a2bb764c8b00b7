"""What a Markdown document declares about itself at its top: title, description, aliases, tags.

Read in the shapes note apps and site generators write (issue #26):

- a **YAML block** between `---` lines at the very top (Obsidian, Hugo, Jekyll, Zola's YAML form,
  the notes template). The chunker leaves the block out of every chunk (`pinakes.chunking`), so the
  words it declares are indexed from here;
- **Logseq page properties**: `key:: value` lines at the top of a page (`title:: …`,
  `tags:: a, [[b c]]`, `alias:: …`). They are lines of the text itself, so the chunks already hold
  their words; only their title and tags are read here.

TOML (`+++`) and JSON front matter are not read: the block stays in the text as written.

Keys, each optional:

| key | read as |
|---|---|
| `title` | the document's title (a number such as `title: 1984` is its text) |
| `description`, `summary` | searchable words (Hugo, Jekyll) |
| `aliases`, `alias` | searchable words; a list, or a comma-separated string (Obsidian, Logseq) |
| `tags`, `tag`, `keywords` | the document's tags; a list, or a comma-separated string, else a space-separated one (Jekyll); a leading `#` and Logseq's `[[ ]]` are dropped |

A block that is not YAML, or not a mapping, declares nothing: it never fails the document, which is
indexed all the same. A block that is not YAML (a slip such as `title: [broken`) or is nested too
deeply to be one a person wrote says why in `problem`, with the document line it is on
(`problem_line`): the sync reports it as a warning naming the file and the line (issue #40: it was
dropped without a word).

How the index uses them: the title, aliases, description and tags of a YAML block are the
document's declared words (`searchable_words`), added to its chunks' context (pipeline/context.py)
and so to their keyword index — where an H1 title would stand — and never to any chunk's text, so
spans and citations are unchanged (issue #40: tags filtered but were not searchable as words). The
tags are also stored beside the sidecar's (`documents.metadata.front_matter_tags`) and filter like
them (docs/SIDECAR.md); they are never written into the sidecar.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TypeAlias

from pinakes.jsontypes import is_dict, is_list

# Part of every Markdown document's build key (sync/keys.py): a change to what is read here, or to
# how the index stores it, bumps this and re-indexes Markdown documents (and only them).
FRONT_MATTER_VERSION = "2"  # 2: the tags are searchable words too

# Front matter is a header: never scan more of a document than the title reader does.
HEAD_CHARS = 65536
MAX_TITLE_CHARS = 300
MAX_DESCRIPTION_CHARS = 2000
MAX_ALIASES = 32
MAX_TAGS = 64
MAX_TAG_CHARS = 128
# Deeper flow nesting (`[[[[…`) is no front matter a person wrote, and the YAML parser's time grows
# with it (seconds at a few thousand levels): such a block declares nothing.
MAX_FLOW_NESTING = 64

TITLE_KEYS = ("title",)
DESCRIPTION_KEYS = ("description", "summary")
ALIAS_KEYS = ("aliases", "alias")
TAG_KEYS = ("tags", "tag", "keywords")

_LOGSEQ_PROPERTY = re.compile(r"([A-Za-z][\w-]*)::[ \t]*(.*?)[ \t]*\r?$")
_LOGSEQ_PAGE_REF = re.compile(r"^#?\[\[(.*)\]\]$")


@dataclass(frozen=True)
class FrontMatter:
    """What a document's front matter declares. `in_text` is true where the declaration is itself
    part of the indexed text (Logseq properties), so its words need no second home."""

    title: str | None = None
    description: str | None = None
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()  # a document format's declared authors (extract/declared.py)
    in_text: bool = False
    problem: str | None = None  # why a YAML block declared nothing: not YAML, or nested too deeply
    problem_line: int | None = None  # the document line (1-based) the problem is on

    def searchable_words(self) -> str:
        """The declared words the chunks do not hold, one line each (the tags on one line): what the
        chunks' context, and so their keyword index, adds."""
        if self.in_text:
            return ""
        return "\n".join(part for part in (self.title, ", ".join(self.authors), *self.aliases, self.description,
                                            ", ".join(self.tags)) if part)

    def warning(self, path: str) -> str | None:
        """What a sync says about a block that declared nothing for a reason, naming `path` and the line."""
        if self.problem is None:
            return None
        where = f"{path}, line {self.problem_line}" if self.problem_line else path
        return (f"{where}: the front matter is not read ({self.problem}): its title, tags, aliases and "
                "description are ignored, and the document is indexed without them. Fix the YAML (quote a "
                "value holding ':', '[' or '{') and sync again")


NO_FRONT_MATTER = FrontMatter()


def document_front_matter(text: str | None, source_type: str, path: Path | str) -> FrontMatter:
    """The front matter of a document: `text` is its indexed text (or its head); None reads the head
    of the file at `path`. Markdown has front matter; a document format (HTML, EPUB, DOCX, ODT)
    declares its title and authors in its own metadata, read from the file (extract/declared.py)."""
    from pinakes.extract.source_types import MARKDOWN_WRITTEN

    if source_type in MARKDOWN_WRITTEN:
        from pinakes.extract.declared import declared_metadata

        title, authors = declared_metadata(Path(path), source_type)
        return FrontMatter(title=clean_title(title), authors=authors[:MAX_ALIASES])
    if source_type != "markdown":
        return NO_FRONT_MATTER
    head = document_head(text, path)
    return NO_FRONT_MATTER if head is None else read_front_matter(head)


def document_head(text: str | None, path: Path | str) -> str | None:
    """The first `HEAD_CHARS` characters of a document: of `text`, else read from `path`."""
    if text is not None:
        return text[:HEAD_CHARS]
    try:
        # utf-8-sig: the indexed text has a leading BOM dropped, so the head must too.
        with open(path, encoding="utf-8-sig", errors="replace") as handle:
            return handle.read(HEAD_CHARS)
    except OSError:
        return None


def read_front_matter(text: str) -> FrontMatter:
    """The front matter at the top of a Markdown text: a YAML block, else Logseq page properties."""
    from pinakes.chunking import front_matter_span

    head = text[:HEAD_CHARS]
    span = front_matter_span(head)
    if span is not None:
        declared = _from_yaml_block(head[span[0]:span[1]])
        if declared.problem_line is not None:  # a line of the block: of the document, 1-based
            declared = replace(declared, problem_line=head.count("\n", 0, span[0]) + declared.problem_line + 1)
        return declared
    return _from_logseq_properties(head)


# A YAML block's mapping (any keys) or Logseq's properties (named by strings).
_Declared: TypeAlias = Mapping[object, object] | Mapping[str, str]


# The chunk step (the title) and the embed step (words and tags) both read a document's block, a
# group of up to 256 documents apart; a YAML parse costs about a millisecond.
@lru_cache(maxsize=512)
def _from_yaml_block(block: str) -> FrontMatter:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if _flow_depth(block) > MAX_FLOW_NESTING:
        return FrontMatter(problem=f"brackets nested more than {MAX_FLOW_NESTING} deep")
    try:
        data = YAML(typ="safe", pure=True).load(block)
    except (YAMLError, ValueError, RecursionError) as exc:
        return _not_yaml(exc)  # a `title: a: b` slip: the block declares nothing
    if not is_dict(data):
        return NO_FRONT_MATTER
    return FrontMatter(
        title=clean_title(_first(data, TITLE_KEYS)),
        description=_clean_text(_first(data, DESCRIPTION_KEYS), MAX_DESCRIPTION_CHARS),
        aliases=_names(_first(data, ALIAS_KEYS), split_spaces=False, limit=MAX_ALIASES,
                       max_chars=MAX_TITLE_CHARS),
        tags=_tags(data, split_spaces=True),
    )


def _not_yaml(exc: Exception) -> FrontMatter:
    """A block the YAML parser refused, with its reason and the block line (0-based) to look at: where
    the construct it was parsing began (`[` of an unclosed list), else where it failed."""
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
    line = getattr(mark, "line", None)
    reason = ": ".join(str(part) for part in (context, problem) if part) or type(exc).__name__
    return FrontMatter(problem=f"not valid YAML: {' '.join(reason.split())}",
                       problem_line=line if isinstance(line, int) else None)


def _flow_depth(block: str) -> int:
    """The deepest nesting of flow brackets (`[`, `{`) in `block`, quoted ones counted too."""
    depth = deepest = 0
    for char in block:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest


def _from_logseq_properties(head: str) -> FrontMatter:
    properties: dict[str, str] = {}
    for line in head.split("\n"):
        match = _LOGSEQ_PROPERTY.fullmatch(line)
        if match is None:
            break
        properties.setdefault(match.group(1).lower(), match.group(2))
    if not properties:
        return NO_FRONT_MATTER
    return FrontMatter(
        title=clean_title(_first(properties, TITLE_KEYS)),
        aliases=_names(_first(properties, ALIAS_KEYS), split_spaces=False, limit=MAX_ALIASES,
                       max_chars=MAX_TITLE_CHARS),
        tags=_tags(properties, split_spaces=False),
        in_text=True,
    )


def clean_title(value: object) -> str | None:
    """A title as one line of at most MAX_TITLE_CHARS, or None when `value` is not one."""
    return _clean_text(value, MAX_TITLE_CHARS)


def _first(data: _Declared, keys: tuple[str, ...]) -> object:
    return next((data[key] for key in keys if data.get(key) is not None), None)


def _tags(data: _Declared, *, split_spaces: bool) -> tuple[str, ...]:
    """The tags under every tag key (`tags` and `keywords` together), each once, in the order written."""
    merged: dict[str, None] = {}
    for key in TAG_KEYS:
        for tag in _names(data.get(key), split_spaces=split_spaces, limit=MAX_TAGS, max_chars=MAX_TAG_CHARS):
            merged.setdefault(tag, None)
    return tuple(merged)[:MAX_TAGS]


def _clean_text(value: object, max_chars: int) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)  # `title: 1984` is a title, not a number
    if not isinstance(value, str):
        return None
    return " ".join(value.split())[:max_chars] or None


def _names(value: object, *, split_spaces: bool, limit: int, max_chars: int) -> tuple[str, ...]:
    """Names from a list (one name an item) or a separated string, cleaned, each once, in the order
    written. A string holding a comma is split at commas; else, where `split_spaces`, at spaces."""
    if is_list(value):
        parts = [text for item in value if (text := _clean_text(item, max_chars * 4)) is not None]
    else:
        text = _clean_text(value, max_chars * 4 * limit) or ""
        parts = text.split(",") if "," in text else text.split() if split_spaces else [text]
    names: dict[str, None] = {}
    for part in parts:
        name = _name(part)
        if name and len(name) <= max_chars:
            names.setdefault(name, None)
    return tuple(names)[:limit]


def _name(part: str) -> str:
    part = part.strip()
    page_ref = _LOGSEQ_PAGE_REF.match(part)
    if page_ref:
        part = page_ref.group(1)
    return part.lstrip("#").strip()
