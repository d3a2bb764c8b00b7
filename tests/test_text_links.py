"""Links from text, parsed and resolved (links/text_links.py, links/resolve.py): pure functions of a
document's text and the KB's document paths. Each syntax of #44 is a link with its span and line;
code, escapes, external URLs and same-note anchors are not; resolution follows Obsidian's rules in
their order, and a change of the path list changes the answer."""

from __future__ import annotations

import pytest

from pinakes.links.resolve import PathIndex, resolve_link
from pinakes.links.text_links import TextLink, parse_text_links

ULID = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"


def targets(text: str, source_type: str = "markdown") -> list[tuple[str, str, str | None]]:
    return [(link.syntax, link.target, link.subpath) for link in parse_text_links(text, source_type)]


def test_every_wikilink_form_is_a_link_with_its_target_and_subpath() -> None:
    text = "[[Note]] [[Note|label]] [[Note#Heading]] [[Note#^block]] [[folder/Note]] ![[Embed]] [[Note.md]]"
    assert targets(text) == [("wikilink", "Note", None), ("wikilink", "Note", None),
                             ("wikilink", "Note", "Heading"), ("wikilink", "Note", "^block"),
                             ("wikilink", "folder/Note", None), ("embed", "Embed", None),
                             ("wikilink", "Note.md", None)]


def test_markdown_links_are_decoded_and_reference_links_are_their_uses() -> None:
    text = ("[t](other.md) [u](../dir/other%20note.md#section) [v](<a b.md>) ![img](fig.png)\n"
            "[text][Label] and [label][] and [label2] but [undefined] and [ ] are text\n\n"
            "[label]: ref.md\n[LABEL2]: <sub/two words.md> \"title\"\n")
    assert targets(text) == [("markdown", "other.md", None), ("markdown", "../dir/other note.md", "section"),
                             ("markdown", "a b.md", None), ("image", "fig.png", None),
                             ("reference", "ref.md", None), ("reference", "ref.md", None),
                             ("reference", "sub/two words.md", None)]


def test_a_span_covers_the_link_as_written_and_names_its_line() -> None:
    text = "first line\nsee ![[Note#^b|x]] and [t](a.md)\n"
    embed, markdown = parse_text_links(text, "markdown")
    assert text[embed.char_start:embed.char_end] == "![[Note#^b|x]]" and embed.line == 2
    assert text[markdown.char_start:markdown.char_end] == "[t](a.md)" and markdown.line == 2


@pytest.mark.parametrize("text", [
    "`[[InlineCode]]` and ``[x](code.md)``",
    "```md\n[[Fenced]]\n```",
    "~~~~\n[[Tilde]] [t](t.md)\n~~~~",
    "> ```\n> [[QuotedFence]]\n> ```",
    "- item\n\n  ```\n  [[ListFence]]\n  ```",
    "para\n\n    [[IndentedCode]]\n",
    "<!-- [[Comment]] -->",
    "\\[\\[Escaped\\]\\]",
    "[ext](https://example.org/x.md) [mail](mailto:a@b.c) [proto](//host/x.md) [[https://example.org]]",
    "[[#Same note heading]] [here](#anchor) [[## heading search]] [[^^block search]]",
])
def test_what_is_not_a_link(text: str) -> None:
    assert targets(text) == []


def test_an_unclosed_fence_runs_to_the_end_and_a_quote_ends_a_quoted_fence() -> None:
    assert targets("```\n[[Never]]\n") == []
    assert targets("> ```\n> [[In]]\n\n[[After]]") == [("wikilink", "After", None)]


def test_a_list_continuation_is_not_indented_code() -> None:
    assert targets("- item\n\n    [[Continued]]\n") == [("wikilink", "Continued", None)]


def test_a_table_cell_escapes_the_pipe_and_code_may_be_a_label() -> None:
    assert targets("| [[Cards view\\|Cards]] | [[Functions#hasTag|`hasTag`]] |") == [
        ("wikilink", "Cards view", None), ("wikilink", "Functions", "hasTag")]


def test_pnk_addresses_are_links_in_every_parsed_type_and_code_has_none() -> None:
    text = f"see pnk://self/{ULID}, and [this](pnk://self/{ULID})"
    assert targets(text) == [("uri", f"pnk://self/{ULID}", None)] * 2
    assert targets(f"plain pnk://self/{ULID} [[NotInText]]", "text") == [("uri", f"pnk://self/{ULID}", None)]
    assert targets(f"# pnk://self/{ULID}", "code") == []


PATHS = ["Note.md", "a/Note.md", "a/b/Note.md", "zzzz/Note.md", "Projects/Three laws of motion.md",
         "dir/other note.md", "a/Only.md", "Figure 1.pdf", "x/Unique.md", "Café.md"]


def resolve(target: str, source: str = "q/src.md", syntax: str = "wikilink", paths: list[str] = PATHS) -> tuple[str, str | None]:
    found = resolve_link(target, syntax, source, PathIndex(paths))
    return found.status, found.path


def test_by_name_anywhere_ignoring_case_extension_and_normalisation() -> None:
    assert resolve("only") == ("resolved", "a/Only.md")
    assert resolve("Only.MD") == ("resolved", "a/Only.md")
    assert resolve("Figure 1.pdf") == ("resolved", "Figure 1.pdf")
    assert resolve("Cafe\u0301") == ("resolved", "Café.md")  # NFD as typed, NFC on disk


def test_the_root_path_then_the_own_folder_then_the_shortest_path() -> None:
    assert resolve("Note", source="a/b/src.md") == ("resolved", "Note.md")  # an exact vault path wins
    without_root = [path for path in PATHS if path != "Note.md"]
    assert resolve("Note", source="a/b/src.md", paths=without_root) == ("ambiguous", "a/b/Note.md")  # own folder
    assert resolve("Note", source="q/src.md", paths=without_root) == ("ambiguous", "a/Note.md")  # shortest
    assert resolve("Note", source="zzzz/deep/src.md", paths=without_root) == ("ambiguous", "a/Note.md")  # not an ancestor
    assert resolve("b/Note", paths=without_root) == ("resolved", "a/b/Note.md")  # a path suffix narrows it


def test_relative_paths_are_exact_and_markdown_reads_the_folder_first() -> None:
    assert resolve("../dir/other note.md", source="a/src.md", syntax="markdown") == ("resolved", "dir/other note.md")
    assert resolve("./Only", source="q/src.md") == ("unresolved", None)  # no fallback by name
    assert resolve("Note.md", source="a/src.md", syntax="markdown") == ("resolved", "a/Note.md")
    assert resolve("Note.md", source="a/src.md", syntax="wikilink") == ("resolved", "Note.md")
    assert resolve("Projects/Three laws of motion", source="x/y.md") == ("resolved", "Projects/Three laws of motion.md")


def test_a_missing_document_is_unresolved_and_a_missing_image_an_attachment() -> None:
    assert resolve("Nowhere") == ("unresolved", None)
    assert resolve("Engelbart.jpg") == ("attachment", None)
    assert resolve("Unique", paths=[path for path in PATHS if path != "x/Unique.md"]) == ("unresolved", None)
    assert resolve("Unique", paths=[*PATHS, "renamed/Unique.md"]) == ("ambiguous", "x/Unique.md")


def test_text_link_is_a_value() -> None:
    link = TextLink("wikilink", "Note", None, 0, 8, 1)
    assert parse_text_links("[[Note]]", "markdown") == [link]
