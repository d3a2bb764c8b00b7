"""The indexed text of a structured document (HTML, EPUB, DOCX, ODT): its blocks written as Markdown.

The document extractors walk their format's tree and hand each block here: a heading with its level,
a paragraph, a list item with its depth, a table row, a code block. The text written is Markdown, so
the chunker reads it as it reads a Markdown source (`source_types.chunked_as`): ATX headings make
each chunk's heading trail and the document's context, a fenced code block stays one block across
its blank lines, and a person or agent reading `pnk get` sees the structure. Markup adds no word:
`#`, `-`, `|` and fences are not tokens, so token recall and precision against a plain-text truth are
the words' alone.

Only what the chunker reads as structure is escaped: a text line that would open an ATX heading or a
fence, or a first line that would open front matter, gets a leading backslash. Whitespace inside a
paragraph, item or cell is collapsed to single spaces (a line break the document makes, `<br>` or a
Word break, stays a line break); a code block keeps its characters exactly, tabs and blank lines too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_CHUNKER_SYNTAX = re.compile(r" {0,3}(?:#|`{3}|~{3})")
_FRONT_MATTER_LINE = re.compile(r"(?:---|\.\.\.)[ \t]*$")
_BACKTICK_RUN = re.compile(r"^ {0,3}(`{3,})", re.MULTILINE)
_SPACES = re.compile(r"[^\S\n]+")
MAX_HEADING_LEVEL = 6
BREAK = "\n"  # a line break inside a block (`<br>`, a Word break): kept, where other whitespace collapses


def inline(text: str) -> str:
    """Text of one block as written: runs of whitespace one space, line breaks kept, ends trimmed."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


class BlockWriter:
    """Collects blocks in reading order; `text()` is the indexed text."""

    def __init__(self) -> None:
        self._blocks: list[str] = []
        self._run: list[str] = []  # consecutive list items or table rows: one block, no blank lines between
        self._run_kind = ""

    def heading(self, level: int, text: str) -> None:
        words = " ".join(text.split())
        if not words:
            return
        level = min(max(level, 1), MAX_HEADING_LEVEL)
        self._block("#" * level + " " + words)

    def paragraph(self, text: str, *, indent: int = 0) -> None:
        written = inline(text)
        if not written:
            return
        pad = "  " * indent
        if indent:
            self._line("item", "\n".join(pad + self._escaped(line) for line in written.split("\n")))
        else:
            self._block("\n".join(self._escaped(line) for line in written.split("\n")))

    def item(self, depth: int, marker: str, text: str) -> None:
        """One list item: `marker` is "-" or "1." (its number), `depth` 0 for a top-level list."""
        written = inline(text)
        pad = "  " * depth
        lines = written.split("\n") if written else [""]
        first = f"{pad}{marker} {lines[0]}".rstrip()
        rest = [f"{pad}  {self._escaped(line)}" for line in lines[1:]]
        self._line("item", "\n".join([first, *rest]))

    def row(self, cells: Sequence[str], *, first: bool) -> None:
        """One table row; the first row of a table is followed by the separator Markdown tables have."""
        written = [inline(cell).replace("\n", " ").replace("|", "\\|") for cell in cells]
        if not any(written):
            return
        if first:
            self._flush()
        self._line("row", "| " + " | ".join(written) + " |")
        if first:
            self._line("row", "|" + "|".join(" --- " for _ in written) + "|")

    def end_table(self) -> None:
        self._flush()

    def code(self, text: str) -> None:
        body = text.strip("\n")
        if not body.strip():
            return
        longest = max((len(run) for run in _BACKTICK_RUN.findall(body)), default=0)
        fence = "`" * max(3, longest + 1)
        self._block(f"{fence}\n{body}\n{fence}")

    def blocks(self) -> list[str]:
        """The blocks written so far, each as it will stand in the text."""
        self._flush()
        return list(self._blocks)

    def extend(self, blocks: Sequence[str]) -> None:
        """Blocks another writer wrote (an EPUB chapter), after this one's."""
        self._flush()
        self._blocks.extend(blocks)

    def text(self) -> str:
        self._flush()
        return "\n\n".join(self._blocks) + ("\n" if self._blocks else "")

    def _escaped(self, line: str) -> str:
        if _CHUNKER_SYNTAX.match(line) or (not self._blocks and not self._run and _FRONT_MATTER_LINE.match(line)):
            return "\\" + line
        return line

    def _block(self, text: str) -> None:
        self._flush()
        self._blocks.append(text)

    def _line(self, kind: str, text: str) -> None:
        if self._run and self._run_kind != kind:
            self._flush()
        self._run_kind = kind
        self._run.append(text)

    def _flush(self) -> None:
        if self._run:
            self._blocks.append("\n".join(self._run))
            self._run = []
