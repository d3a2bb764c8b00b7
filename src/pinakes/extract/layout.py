"""Reading order and clean-up for the free PDF path (spec §7.1): plain data in, page texts out.

The input is each page's glyphs as pdfium reports them — `(text, left, bottom, right, top)` in PDF
user space (y grows upwards), in the content stream's order — so everything here is testable
without a PDF. The steps, in order:

1. glyphs -> words: a word ends at whitespace or where the next glyph does not continue it
   (another line, or a horizontal gap wider than a space). Ligatures and compatibility forms are
   folded by NFKC (`ﬁ` -> `fi`); pdfium's line-end hyphen marker (U+0002) and the soft hyphen
   become a plain hyphen for step 5 to judge.
2. words -> lines -> segments: words on one baseline form a line; a line is cut into segments at
   horizontal gaps wider than a line height (a column gutter, a table's cell gap).
3. reading order by x-gap clustering: a gutter is an x-range no narrow segment covers, with at
   least `MIN_COLUMN_LINES` segments on each side. Segments that cross a gutter (titles, running
   heads) cut the page into bands; inside a band, columns are read left to right, each top to
   bottom. It is geometric, not structural: a table is read column by column (a stated limit).
4. running heads and page numbers: a segment among a page's top or bottom `HEAD_ZONE_LINES` lines
   whose signature (lowercase, digits and roman numerals as `#`) recurs on at least a fraction T
   of the other pages within `HEAD_WINDOW` pages is dropped (documents of `MIN_HEAD_PAGES` pages
   or more). T is fitted from the corpus
   (`floors.toml`), never guessed here.
5. hyphenation: a line ending in a letter and a hyphen, followed in reading order by a line that
   starts with a lowercase letter, is joined. The hyphen is kept when the document itself spells
   the word with one elsewhere (`well-known`) and dropped otherwise (`exam-` `ple`).

Changing what any step outputs changes `LAYOUT_VERSION`, which is in the extractor fingerprint,
so every PDF is re-extracted through the cache on the next sync.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

# 2: the stripped running heads are kept beside the text (`ExtractedText.running_heads`).
LAYOUT_VERSION = "2"

# (text, left, bottom, right, top) in PDF user space.
Glyph = tuple[str, float, float, float, float]

# A gap wider than this many line heights cuts a line into segments (a gutter or a cell gap):
# justified prose stretches a space to about one em; a loose glyph box is about 1.15 em tall.
SEGMENT_GAP_LINE_HEIGHTS = 1.0
# A segment at least this share of the page's text width spans the page (a title, a full-width
# paragraph) and never defines a column.
WIDE_SEGMENT_SHARE = 0.6
# A gutter needs this many segments entirely on each side: one right-aligned page number is not
# a column.
MIN_COLUMN_LINES = 3
# A vertical gap above a line wider than this many line heights starts a paragraph.
PARAGRAPH_GAP_LINE_HEIGHTS = 0.5
# Running heads and page numbers are looked for among a page's top and bottom lines ...
HEAD_ZONE_LINES = 2
# ... and must recur on the pages within this distance (heads alternate and change by chapter).
HEAD_WINDOW = 4
# Recurrence over fewer pages than this is too weak to call a line a head: nothing is stripped.
MIN_HEAD_PAGES = 4
# Distinct stripped heads kept per document, for its context (`layout_with_heads`).
MAX_KEPT_HEADS = 12

_HYPHEN_MARKERS = {"\x02": "-", "\u00ad": "-", "\u2010": "-", "\u2011": "-"}
# C0/C1 controls, lone surrogates and the noncharacters pdfium uses for unmapped glyphs.
_NOISE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffd\ufffe\uffff]")
_DIGITS = re.compile(r"\d+")
_ROMAN = re.compile(r"(?<![a-z])[ivxlcdm]+(?![a-z])")
_SPACES = re.compile(r"\s+")
_HYPHENATED_END = re.compile(r"([^\W\d_]+)-$")
_WORD_CHARS = re.compile(r"[^\W_]+(?:-[^\W_]+)*")


@dataclass(frozen=True, slots=True)
class LayoutOptions:
    """Each step can be switched off, so the eval can show what each one buys (and a planted
    regression can be caught); the extractor always runs them all."""

    reading_order: bool = True
    strip_running_heads: bool = True
    join_hyphens: bool = True


@dataclass(slots=True)
class Word:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(slots=True)
class Segment:
    """Words on one line with no gutter between them; `line` numbers the page's lines top down."""

    words: list[Word]
    line: int
    x0: float = field(init=False)
    y0: float = field(init=False)
    x1: float = field(init=False)
    y1: float = field(init=False)

    def __post_init__(self) -> None:
        self.x0 = min(w.x0 for w in self.words)
        self.x1 = max(w.x1 for w in self.words)
        self.y0 = min(w.y0 for w in self.words)
        self.y1 = max(w.y1 for w in self.words)

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    @property
    def height(self) -> float:
        return self.y1 - self.y0


def normalise(text: str) -> str:
    """NFKC (ligatures, compatibility forms, odd spaces) with line-end hyphen markers made plain."""
    for marker, plain in _HYPHEN_MARKERS.items():
        text = text.replace(marker, plain)
    return _NOISE.sub("", unicodedata.normalize("NFKC", text))


def words_from_glyphs(glyphs: Sequence[Glyph]) -> list[Word]:
    """Step 1: glyphs in stream order -> words, each with its box."""
    words: list[Word] = []
    chars: list[str] = []
    x0 = y0 = x1 = y1 = 0.0
    previous_left = 0.0

    def flush() -> None:
        if chars:
            text = normalise("".join(chars)).strip()
            if text:
                words.append(Word(text, x0, y0, x1, y1))
            chars.clear()

    for text, left, bottom, right, top in glyphs:
        if not text or text.isspace():
            flush()
            continue
        if right - left <= 0 and top - bottom <= 0:  # a generated glyph with no box
            continue
        if chars:
            height = max(y1 - y0, top - bottom, 1e-6)
            centre = (bottom + top) / 2
            # A ligature's characters share one box, so "continues" means not going back past the
            # previous glyph's left edge (a new line would) and no gap wider than a space.
            continues = (y0 <= centre <= y1 and left >= previous_left - 0.1 * height
                         and left - x1 <= 0.25 * height)
            if not continues:
                flush()
        if chars:
            x0, y0, x1, y1 = min(x0, left), min(y0, bottom), max(x1, right), max(y1, top)
        else:
            x0, y0, x1, y1 = left, bottom, right, top
        chars.append(text)
        previous_left = left
        if text in _HYPHEN_MARKERS:  # pdfium's line-end hyphen: the word ends here
            flush()
    flush()
    return words


def segments_from_words(words: Sequence[Word]) -> list[Segment]:
    """Step 2: words -> lines (shared baseline band) -> segments (cut at gutter-wide gaps)."""
    if not words:
        return []
    ordered = sorted(words, key=lambda w: (-(w.y0 + w.y1) / 2, w.x0))
    lines: list[list[Word]] = []
    band_low = band_high = 0.0
    for word in ordered:
        centre = (word.y0 + word.y1) / 2
        if lines and band_low <= centre <= band_high:
            lines[-1].append(word)
            continue
        lines.append([word])
        band_low, band_high = word.y0, word.y1
    segments: list[Segment] = []
    for number, line in enumerate(lines):
        line.sort(key=lambda w: w.x0)
        height = statistics.median(w.y1 - w.y0 for w in line)
        current = [line[0]]
        for word in line[1:]:
            if word.x0 - current[-1].x1 > SEGMENT_GAP_LINE_HEIGHTS * height:
                segments.append(Segment(current, number))
                current = []
            current.append(word)
        segments.append(Segment(current, number))
    return segments


def find_gutters(segments: Sequence[Segment]) -> list[tuple[float, float]]:
    """Step 3a: x-ranges no narrow segment covers, with enough segments on both sides."""
    if len(segments) < 2 * MIN_COLUMN_LINES:
        return []
    left, right = min(s.x0 for s in segments), max(s.x1 for s in segments)
    width = right - left
    if width <= 0:
        return []
    narrow = [s for s in segments if s.x1 - s.x0 < WIDE_SEGMENT_SHARE * width]
    line_height = statistics.median(s.height for s in segments)
    gutters: list[tuple[float, float]] = []
    covered_to = left
    for segment in sorted(narrow, key=lambda s: s.x0):
        if segment.x0 - covered_to >= line_height and covered_to > left:
            gutters.append((covered_to, segment.x0))
        covered_to = max(covered_to, segment.x1)
    return [g for g in gutters
            if sum(1 for s in segments if s.x1 <= g[0]) >= MIN_COLUMN_LINES
            and sum(1 for s in segments if s.x0 >= g[1]) >= MIN_COLUMN_LINES]


def reading_order(segments: Sequence[Segment]) -> list[Segment]:
    """Step 3b: bands cut by gutter-crossing segments; columns left to right inside a band."""
    top_down = sorted(segments, key=lambda s: (s.line, s.x0))
    gutters = find_gutters(top_down)
    if not gutters:
        return top_down

    def crosses(segment: Segment) -> bool:
        return any(segment.x0 < g_start and segment.x1 > g_end for g_start, g_end in gutters)

    def column(segment: Segment) -> int:
        centre = (segment.x0 + segment.x1) / 2
        return sum(1 for g_start, _ in gutters if centre > g_start)

    ordered: list[Segment] = []
    band: list[Segment] = []
    for segment in top_down:
        if crosses(segment):
            ordered.extend(sorted(band, key=lambda s: (column(s), s.line, s.x0)))
            band = []
            ordered.append(segment)
        else:
            band.append(segment)
    ordered.extend(sorted(band, key=lambda s: (column(s), s.line, s.x0)))
    return ordered


def head_signature(text: str) -> str:
    """What a running head keeps from page to page: lowercase, numbers (arabic or roman) as `#`."""
    folded = _SPACES.sub(" ", text.lower()).strip()
    return _ROMAN.sub("#", _DIGITS.sub("#", folded)) if folded else folded


def zone_segments(page: Sequence[Segment]) -> list[Segment]:
    """The segments on a page's top and bottom `HEAD_ZONE_LINES` lines: where heads can be. A short
    page's zone shrinks so that at least one line is always body."""
    lines = sorted({s.line for s in page})
    depth = min(HEAD_ZONE_LINES, (len(lines) - 1) // 2)
    if depth <= 0:
        return []
    zone = set(lines[:depth]) | set(lines[-depth:])
    return [s for s in page if s.line in zone]


def head_recurrences(pages: Sequence[Sequence[Segment]]) -> list[list[tuple[Segment, str, float | None]]]:
    """Per page, each zone segment with its signature and recurrence: the share of the other pages
    within `HEAD_WINDOW` whose own zone holds the same signature, or the share among those of the
    same parity when that is higher (books alternate their heads between left and right pages)."""
    if len(pages) < MIN_HEAD_PAGES:
        return [[] for _ in pages]
    signatures = [{head_signature(s.text) for s in zone_segments(page)} for page in pages]
    result: list[list[tuple[Segment, str, float | None]]] = []
    for number, page in enumerate(pages):
        nearby = [other for other in range(max(0, number - HEAD_WINDOW), min(len(pages), number + HEAD_WINDOW + 1))
                  if other != number]
        same_parity = [other for other in nearby if (other - number) % 2 == 0]
        rows: list[tuple[Segment, str, float | None]] = []
        for segment in zone_segments(page):
            signature = head_signature(segment.text)
            shares = [sum(1 for other in group if signature in signatures[other]) / len(group)
                      for group in (nearby, same_parity) if group]
            rows.append((segment, signature, max(shares) if shares else None))
        result.append(rows)
    return result


def strip_running_heads(pages: Sequence[Sequence[Segment]], threshold: float) -> list[list[Segment]]:
    """Step 4: drop zone segments whose signature recurs on at least `threshold` of the nearby pages."""
    dropped = {id(segment) for rows in head_recurrences(pages)
               for segment, signature, share in rows if signature and share is not None and share >= threshold}
    return [[s for s in page if id(s) not in dropped] for page in pages]


def page_lines(ordered: Sequence[Segment]) -> list[tuple[str, bool]]:
    """Segments in reading order -> (line text, starts a paragraph). Segments of one line that stay
    adjacent in reading order are one line of text."""
    lines: list[tuple[str, bool]] = []
    previous: Segment | None = None
    for segment in ordered:
        if previous is not None and segment.line == previous.line and segment.x0 >= previous.x1:
            text, starts = lines[-1]
            lines[-1] = (f"{text} {segment.text}", starts)
        else:
            gap = previous.y0 - segment.y1 if previous is not None else 0.0
            starts = previous is not None and (
                gap > PARAGRAPH_GAP_LINE_HEIGHTS * max(segment.height, previous.height)
                or segment.y1 > previous.y1)  # a new column or band
            lines.append((segment.text, starts))
        previous = segment
    return lines


def join_hyphenated(pages: list[list[tuple[str, bool]]]) -> list[list[tuple[str, bool]]]:
    """Step 5: `exam-` + `ple ...` -> `example` + `...`, within a page. The hyphen stays when the
    document spells the joined word with one elsewhere and never without one."""
    spelled: Counter[str] = Counter()
    for lines in pages:
        for text, _ in lines:
            spelled.update(word.lower() for word in _WORD_CHARS.findall(text))
    joined_pages: list[list[tuple[str, bool]]] = []
    for lines in pages:
        out: list[tuple[str, bool]] = []
        for text, starts in lines:
            if out and text[:1].islower():
                match = _HYPHENATED_END.search(out[-1][0])
                if match:
                    head, rest = [*text.split(" ", 1), ""][:2]
                    tail = re.match(r"[^\W\d_]+", head)
                    if tail:
                        stem = match.group(1)
                        keep = (f"{stem}-{tail.group(0)}".lower() in spelled
                                and f"{stem}{tail.group(0)}".lower() not in spelled)
                        glued = out[-1][0][:-1] + ("-" if keep else "") + head
                        out[-1] = (glued, out[-1][1])
                        if rest:
                            out.append((rest, starts))
                        continue
            out.append((text, starts))
        joined_pages.append(out)
    return joined_pages


def render(lines: Sequence[tuple[str, bool]]) -> str:
    parts: list[str] = []
    for text, starts in lines:
        if parts:
            parts.append("\n\n" if starts else "\n")
        parts.append(text)
    return "".join(parts)


def layout_document(pages: Sequence[Sequence[Glyph]], *, head_threshold: float,
                    options: LayoutOptions = LayoutOptions()) -> list[str]:
    """Every page's glyphs -> every page's text, in reading order, heads stripped, words joined."""
    return layout_with_heads(pages, head_threshold=head_threshold, options=options)[0]


def layout_with_heads(pages: Sequence[Sequence[Glyph]], *, head_threshold: float,
                      options: LayoutOptions = LayoutOptions()) -> tuple[list[str], tuple[str, ...]]:
    """`layout_document`'s page texts, and the running heads and feet step 4 stripped from them:
    each distinct line once (by its signature), in page order, at most MAX_KEPT_HEADS. Not body
    text, but what names the document on every page (its document context, pipeline/context.py)."""
    return layout_words([words_from_glyphs(glyphs) for glyphs in pages], head_threshold=head_threshold,
                        options=options)


def layout_words(pages: Sequence[Sequence[Word]], *, head_threshold: float,
                 options: LayoutOptions = LayoutOptions()) -> tuple[list[str], tuple[str, ...]]:
    """Steps 2-5 from words rather than glyphs: what OCR's lines enter by (extract/ocr_layout.py),
    so a scan is ordered, stripped of its heads and de-hyphenated exactly as a text layer is."""
    segmented = [segments_from_words(words) for words in pages]
    heads: tuple[str, ...] = ()
    if options.strip_running_heads:
        stripped = strip_running_heads(segmented, head_threshold)
        heads = _distinct_heads(segmented, stripped)
        segmented = stripped
    ordered = [reading_order(page) if options.reading_order else sorted(page, key=lambda s: (s.line, s.x0))
               for page in segmented]
    lines = [page_lines(page) for page in ordered]
    if options.join_hyphens:
        lines = join_hyphenated(lines)
    return [render(page) for page in lines], heads


def _distinct_heads(before: Sequence[Sequence[Segment]], after: Sequence[Sequence[Segment]]) -> tuple[str, ...]:
    kept = {id(segment) for page in after for segment in page}
    heads: dict[str, str] = {}
    for page in before:
        for segment in page:
            signature = head_signature(segment.text)
            if id(segment) not in kept and signature.strip("# ") and signature not in heads:
                heads[signature] = segment.text
                if len(heads) == MAX_KEPT_HEADS:
                    return tuple(heads.values())
    return tuple(heads.values())
