"""Which source type a file is, decided by its name alone.

The source type dispatches extraction and chunking (spec §4.6): markdown gets ATX headings, text
gets the opt-in numbered outline grammar, code, pdf and image (read by OCR, the `[ocr]` extra) take
the plain-text path, and the document formats (html, epub, docx, odt: the `[formats]` extra) are
written as Markdown and chunked as it is. A file whose name matches nothing here is not a source and
is never read; one whose type `[sources] types` leaves out is skipped with that reason.

Only the last suffix decides, so `intro.rst.txt` is text and `notes.md.txt` is text too: the file
is named as text, and guessing at an inner suffix would make the type depend on naming habits.
Matching is case-insensitive (`README.MD` is markdown).
"""

from __future__ import annotations

from pathlib import Path

SOURCE_TYPES = ("markdown", "text", "code", "pdf", "html", "epub", "docx", "odt", "image")
# The types a KB indexes when its manifest names none (`[sources] types`): those of every KB made
# before the document formats and images existed, so an upgrade never starts indexing files it skipped.
DEFAULT_SOURCE_TYPES = SOURCE_TYPES[:4]
# The document formats (issue #43): their extractors write the document's structure as Markdown
# (extract/blocks.py), which is chunked as a Markdown source is.
MARKDOWN_WRITTEN = ("html", "epub", "docx", "odt")

_MARKDOWN = (".md", ".markdown", ".mdown", ".mkd")
_TEXT = (".txt", ".text", ".rst", ".rest", ".adoc", ".asciidoc")
_PDF = (".pdf",)
_HTML = (".html", ".htm", ".xhtml")
_IMAGE = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")
# Source code: chunked as plain text, never parsed. A language missing here is simply not indexed.
_CODE = (
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".c", ".h",
    ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".cs", ".rb", ".php", ".sh", ".bash", ".zsh",
    ".fish", ".ps1", ".sql", ".swift", ".kt", ".kts", ".scala", ".lua", ".r", ".pl", ".pm", ".m",
    ".mm", ".dart", ".ex", ".exs", ".erl", ".hrl", ".clj", ".cljs", ".hs", ".ml", ".mli", ".fs",
    ".fsx", ".jl", ".nim", ".zig", ".v", ".vhd", ".vhdl", ".tf", ".proto", ".graphql", ".css",
    ".scss", ".sass", ".less", ".vue", ".svelte", ".el", ".vim", ".groovy", ".gradle", ".cmake",
)  # fmt: skip

SUFFIX_TO_TYPE: dict[str, str] = {
    **dict.fromkeys(_MARKDOWN, "markdown"),
    **dict.fromkeys(_TEXT, "text"),
    **dict.fromkeys(_CODE, "code"),
    **dict.fromkeys(_PDF, "pdf"),
    **dict.fromkeys(_HTML, "html"),
    ".epub": "epub",
    ".docx": "docx",
    ".odt": "odt",
    **dict.fromkeys(_IMAGE, "image"),
}


def markup_for(path: Path | str) -> str | None:
    """The markup a text source is written in, when its name says: "rst" (`.rst`, `.rest`, and the
    `.rst.txt` Sphinx publishes sources as) or "asciidoc" (`.adoc`, `.asciidoc`); else None. Its
    section titles are then the document's headings (`pinakes.chunking`)."""
    name = str(path).replace("\\", "/").rsplit("/", 1)[-1].lower()
    if name.endswith((".rst", ".rest", ".rst.txt")):
        return "rst"
    if name.endswith((".adoc", ".asciidoc")):
        return "asciidoc"
    return None


def chunked_as(source_type: str) -> str:
    """The source type whose structure a document of `source_type` is chunked by."""
    return "markdown" if source_type in MARKDOWN_WRITTEN else source_type


def source_type_for(path: Path | str) -> str | None:
    """The source type of `path` (one of SOURCE_TYPES), or None when it is not a source."""
    # String operations rather than Path(): the walk asks this of every file in the KB.
    return source_type_of_name(str(path).replace("\\", "/").rsplit("/", 1)[-1])


def source_type_of_name(name: str) -> str | None:
    """`source_type_for` of a bare file name (the walk has it from the directory entry)."""
    dot = name.rfind(".")
    if dot <= 0 or dot == len(name) - 1:  # ".bashrc", "README", "notes." have no suffix (as Path.suffix)
        return None
    return SUFFIX_TO_TYPE.get(name[dot:].lower())
