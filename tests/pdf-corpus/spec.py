"""The scored PDF corpus (spec §7.1), stated as data: every fixture's ground truth is authored here,
never extracted. `generate.py` draws each fixture into a PDF; `evaluate.py` scores the free path
against the truth below.

Strata: baseline prose; two columns (drawn row by row across the columns, so the content stream's
own order is the wrong one); running heads and footers; tables with (label, value) pairs;
hyphenation and ligatures; scanned (image-only pages, no text layer); pathological (invisible
text render mode, rotated pages, a broken xref table).

The prose is drawn from a fixed vocabulary by a seeded generator, so the corpus is the same on
every machine and its words never include a running head's words (`chapter`, `manual`, `draft`...):
a head that leaks into the text shows up as junk.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SPEC_VERSION = "1"

STRATA = ("baseline", "two-column", "headers-footers", "tables", "ligatures-hyphenation", "scanned",
          "pathological")

_VOCABULARY = """
archive record catalogue index shelf volume folio letter ledger register inventory museum collection
keeper curator visitor reader scholar student librarian binder printer engraver map atlas chart
drawing sketch painting portrait landscape garden river harbour bridge market tower church street
house window door table lamp candle paper parchment ink quill seal ribbon box drawer cabinet room
hall stair gallery wing basement attic north south east west early late quiet careful patient
rare fragile ancient modern small large narrow wide heavy light dark bright cold warm dry damp
describes preserves examines compares arranges repairs labels measures records lists moves keeps
opens closes studies copies checks reads writes binds folds cleans stores lends returns borrows
slowly gently often rarely always usually together apart again before after beneath above within
condition provenance acquisition accession donation exhibition conservation digitisation transcription
humidity temperature handling storage lighting packing courier insurance agreement schedule
""".split()  # noqa: SIM905 (a word list reads better as prose)
_CONNECTORS = ("the", "a", "each", "every", "one", "this", "that", "its", "their", "our")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_CONNECTORS)] + [rng.choice(_VOCABULARY) for _ in range(rng.randint(6, 13))]
    return " ".join(words).capitalize() + "."


def prose(seed: int, paragraphs: int, sentences: tuple[int, int] = (3, 5)) -> tuple[str, ...]:
    rng = random.Random(seed)
    return tuple(" ".join(_sentence(rng) for _ in range(rng.randint(*sentences))) for _ in range(paragraphs))


@dataclass(frozen=True)
class Page:
    paragraphs: tuple[str, ...]  # the page's text in reading order: the ground truth
    columns: int = 1  # 2: paragraphs are split between a left and a right column
    title: str | None = None  # a full-width title above the columns (part of the truth)
    head: str | None = None  # running head (not truth)
    head_align: str = "L"
    footer: str | None = None  # running footer (not truth)
    page_number: str | None = None  # printed page number (not truth)
    table: tuple[tuple[str, str], ...] = ()  # (label, value) rows drawn as a bordered table

    @property
    def truth(self) -> str:
        parts = ([self.title] if self.title else []) + list(self.paragraphs)
        parts += [f"{label} {value}" for label, value in self.table]
        return "\n\n".join(parts)


@dataclass(frozen=True)
class Fixture:
    name: str
    stratum: str
    pages: tuple[Page, ...]
    # How the PDF is drawn: "text" (a native layer), "ligatures" (a Unicode font, ligature code
    # points in the drawn text), "hyphenate" (long words split at line ends), "scanned" (a raster
    # of the text, no text layer), "invisible" (render mode 3), "rotated" (every page /Rotate 90),
    # "broken-xref" (startxref points at garbage; readers must rebuild the table).
    drawing: str = "text"
    pairs: tuple[tuple[str, str], ...] = field(default=())  # asserted (label, value) pairs

    @property
    def truth(self) -> str:
        return "\n\n".join(page.truth for page in self.pages)


def _numbered(pages: list[Page], *, heads: bool) -> tuple[Page, ...]:
    """Running heads (book title on even pages, chapter on odd), a footer and page numbers."""
    out: list[Page] = []
    for number, page in enumerate(pages, start=1):
        chapter = ("Chapter 1: Cataloguing the Collection" if number <= 7
                   else "Chapter 2: Lending and Borrowing")
        head = (chapter if number % 2 else "Pinakes Field Manual") if heads else None
        out.append(Page(page.paragraphs, columns=page.columns, title=page.title, head=head,
                        head_align="R" if number % 2 else "L",
                        footer="Draft for review" if heads else None, page_number=str(number + 10)))
    return tuple(out)


# The signatures (`layout.head_signature`) of the genuine running heads and footers, per fixture
# of the headers-footers stratum: what fitting T separates from everything else in the stratum.
KNOWN_RUNNING_HEAD_SIGNATURES: dict[str, frozenset[str]] = {
    "headers-repeating": frozenset({"pinakes field manual", "chapter #: cataloguing the collection",
                                    "chapter #: lending and borrowing", "draft for review", "#"}),
    "headers-numbers-only": frozenset({"#"}),
}

# A sentence that opens two pages of the same parity mid-document: body text that recurs, so the
# fitted T has something real to stay above.
_RECURRING_OPENER = "Notes on the handling of each fragile folio follow below."


def _headers_pages() -> list[Page]:
    pages = [Page(prose(300 + n, 3, (3, 4))) for n in range(12)]
    for index in (5, 7):  # pages 6 and 8
        pages[index] = Page((_RECURRING_OPENER, *pages[index].paragraphs))
    return pages


_SMALL_TABLE = (("Accession number", "AC-2291"), ("Date received", "14 March 1921"),
                ("Condition", "Fair, foxed"), ("Location", "Room 4, shelf C"))
_LARGE_TABLE = tuple((f"{label}", value) for label, value in (
    ("Shelf mark", "MS Pin. 17"), ("Material", "Vellum"), ("Leaves", "212"), ("Height", "31 cm"),
    ("Width", "22 cm"), ("Binding", "Oak boards"), ("Script", "Gothic textualis"), ("Decoration", "Red initials"),
    ("Provenance", "Abbey library"), ("Acquired", "1887"), ("Last checked", "2019"), ("Lent to", "None"),
    ("Insurance", "Listed"), ("Digitised", "Partly")))

FIXTURES: tuple[Fixture, ...] = (
    Fixture("baseline-prose", "baseline", (
        Page(prose(1, 5)), Page(prose(2, 5)), Page(prose(3, 5)),
        Page(("The collection closes for the winter on this page.",)),  # the sparse page: the lowest real yield
    )),
    Fixture("baseline-short", "baseline", (Page(prose(10, 2)), Page(prose(11, 2)))),
    Fixture("two-column-a", "two-column", (
        Page(prose(20, 6, (3, 4)), columns=2, title="Storage of Fragile Material"),
        Page(prose(21, 6, (3, 4)), columns=2),
        Page(prose(22, 6, (3, 4)), columns=2),
    )),
    Fixture("two-column-b", "two-column", (
        Page(prose(25, 4, (4, 5)), columns=2, title="Lending Between Institutions"),
        Page(prose(26, 4, (4, 5)), columns=2),
    )),
    Fixture("headers-repeating", "headers-footers", _numbered(_headers_pages(), heads=True)),
    Fixture("headers-numbers-only", "headers-footers",
            _numbered([Page(prose(400 + n, 3, (3, 4))) for n in range(6)], heads=False)),
    Fixture("tables-small", "tables", (Page(prose(50, 1), table=_SMALL_TABLE),), pairs=_SMALL_TABLE),
    Fixture("tables-large", "tables", (Page(prose(51, 1), table=_LARGE_TABLE),), pairs=_LARGE_TABLE),
    Fixture("hyphenation-a", "ligatures-hyphenation", (Page(prose(60, 4)), Page(prose(61, 4))),
            drawing="hyphenate"),
    Fixture("ligatures-a", "ligatures-hyphenation", (Page(
        ("The final office keeps the official flow of fifty effortless files in a flat drawer.", *prose(70, 2))),),
        drawing="ligatures"),
    Fixture("scanned-a", "scanned", (Page(prose(80, 3)), Page(prose(81, 3)), Page(prose(82, 3))),
            drawing="scanned"),
    Fixture("scanned-b", "scanned", (Page(prose(85, 2)), Page(prose(86, 2))), drawing="scanned"),
    Fixture("invisible-text", "pathological", (Page(prose(90, 3)),), drawing="invisible"),
    Fixture("rotated-pages", "pathological", (Page(prose(91, 3)), Page(prose(92, 3))), drawing="rotated"),
    Fixture("broken-xref", "pathological", (Page(prose(93, 3)), Page(prose(94, 3))), drawing="broken-xref"),
)

# Ligatures drawn as their Unicode code points; the truth above spells them out.
LIGATURES = {"ffi": "\ufb03", "ffl": "\ufb04", "ff": "\ufb00", "fi": "\ufb01", "fl": "\ufb02"}
