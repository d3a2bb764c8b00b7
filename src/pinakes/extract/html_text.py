"""An HTML tree's main text, as blocks (`blocks.py`): the walk the HTML and EPUB extractors share.

The page is parsed by lexbor (`selectolax`, the `[formats]` extra), a C HTML5 parser: malformed
markup is repaired as browsers repair it. Then:

1. **The content root** is chosen: the first visible `<main>`, else the first `[role=main]`, else the
   only `<article>`, else `<body>`. Site chrome outside it (the header, navigation bars, sidebars,
   footers a site template repeats on every page) is never read.
2. **Boilerplate inside it is dropped**: `<nav>`; `<aside>` outside the root; scripts, styles,
   templates, forms and their controls, `<noscript>`, embedded objects; anything hidden (`hidden`,
   `aria-hidden="true"`, an inline `display: none` or `visibility: hidden`); the landmark roles of
   chrome (navigation, banner, contentinfo, search, complementary, dialog, menu); a `<footer>` not
   inside an article or section; a `<header>` that holds no heading; and any container whose class or
   id names chrome (`BOILERPLATE_NAMES`: nav, menu, sidebar, breadcrumbs, toc, footer, cookie, share,
   pagination ...), such as a table of contents a documentation theme repeats on every page. A
   book's chapter (`site=False`, EPUB) has no site chrome: there only scripts, styles, navigation and
   hidden elements go.
3. **The structure is written**: `<h1>`-`<h6>` as headings, paragraphs and block containers as
   paragraphs, `<ul>`/`<ol>` items with their depth and numbers, each table row as one line of cells,
   `<pre>` verbatim as a fenced code block, `<br>` as a line break. Images and their alt text are
   left out (alt text is mostly "logo", "icon" or a file name).

The walk is iterative, so a deeply nested page costs no recursion; the parser's own cost grows with
nesting, which `html.py` bounds before it parses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from pinakes.extract.blocks import BlockWriter

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser, LexborNode

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
DROPPED_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "form", "input", "select", "option", "button",
    "textarea", "iframe", "object", "embed", "canvas", "svg", "math", "video", "audio", "map", "head",
    "title", "meta", "link", "dialog", "menu", "datalist", "output", "progress", "meter",
})
CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "complementary", "dialog",
                          "alertdialog", "menu", "menubar", "toolbar", "tablist"})
# Words of a class or id that name site chrome, matched as whole words of it (split at -, _ and case).
BOILERPLATE_NAMES = frozenset({
    "nav", "navbar", "navigation", "menu", "menubar", "sidebar", "sphinxsidebar", "breadcrumb", "breadcrumbs",
    "toc", "toctree", "masthead", "footer", "related", "share", "sharing", "social", "cookie", "cookies",
    "consent", "skip", "pagination", "pager", "newsletter", "subscribe", "advert", "advertisement", "ads",
    "sponsor", "promo", "banner", "topbar", "bottombar", "navbox", "catlinks", "sitenav", "sitemap",
})
BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "main", "blockquote", "dl", "dt", "dd", "figure", "figcaption",
    "address", "details", "summary", "header", "footer", "aside", "hr", "center", "fieldset", "legend",
    "caption", "body", "html", "li", "ul", "ol", "table", "pre", "hgroup", "search",
})
LISTS = frozenset({"ul", "ol"})
_HIDDEN_STYLE = re.compile(r"(?:display\s*:\s*none|visibility\s*:\s*hidden)", re.IGNORECASE)
_NAME_WORDS = re.compile(r"[A-Za-z][a-z]*|[A-Z]+(?![a-z])")
_TITLE_SEPARATORS = ("—", "–", "-", "|", "·", ":", "•", "»")


def content_root(tree: LexborHTMLParser, *, site: bool) -> LexborNode | None:
    """Where the page's own text is (see the module docstring)."""
    if site:
        for selector in ("main", "[role=main]"):
            for node in tree.css(selector):
                if not _hidden(node):
                    return node
        articles = [node for node in tree.css("article") if not _hidden(node)]
        if len(articles) == 1:
            return articles[0]
    return tree.body


def page_title(tree: LexborHTMLParser) -> str | None:
    """The `<title>`, or the page's first `<h1>` when the title is that heading plus a site's name
    (`Data model — Python 3.11 documentation`), or when there is no title."""
    title_node = tree.css_first("title")
    title = " ".join(title_node.text(deep=True).split()) if title_node is not None else ""
    root = content_root(tree, site=True)
    h1 = root.css_first("h1") if root is not None else None
    heading = " ".join(h1.text(deep=True).split()).rstrip("¶#").strip() if h1 is not None else ""
    if heading and (not title or (title.startswith(heading) and title[len(heading):].strip()[:1] in _TITLE_SEPARATORS)):
        return heading
    return title or None


def write_page(tree: LexborHTMLParser, writer: BlockWriter, *, site: bool) -> None:
    """The main text of a parsed page into `writer`."""
    root = content_root(tree, site=site)
    if root is not None:
        _Walker(writer, site=site).walk(root)


class _Walker:
    def __init__(self, writer: BlockWriter, *, site: bool) -> None:
        self.writer = writer
        self.site = site
        self.buffer: list[str] = []
        self.lists: list[list[int]] = []  # per open list: [ordered (0/1), the next item's number]
        self.pending_item: tuple[int, str] | None = None  # (depth, marker) of an item not yet written
        self.items_open = 0  # <li> elements entered and not left
        self.in_article = 0  # <article>/<section> elements entered and not left

    def walk(self, root: LexborNode) -> None:
        _traverse(root, self.enter, self.leave, self.buffer.append)
        self.flush()

    def enter(self, node: LexborNode) -> bool:
        tag = node.tag or ""
        if self.skipped(node, tag):
            return False
        if tag in HEADINGS:
            self.flush()
            self.writer.heading(HEADINGS[tag], inline_text(node).rstrip("¶#").strip())
            return False
        if tag == "pre":
            self.flush()
            self.writer.code(node.text(deep=True))
            return False
        if tag == "table":
            self.flush()
            self.table(node)
            return False
        if tag == "br":
            self.buffer.append("\n")
            return False
        if tag in BLOCK_TAGS:
            self.flush()
        if tag in LISTS:
            self.pending_item = None
            start = node.attributes.get("start") or "1"
            self.lists.append([int(tag == "ol"), int(start) if start.strip().isdigit() else 1])
        elif tag == "li":
            self.items_open += 1
            if self.lists:
                ordered, number = self.lists[-1]
                self.lists[-1][1] = number + 1
                self.pending_item = (len(self.lists) - 1, f"{number}." if ordered else "-")
        elif tag in ("article", "section"):
            self.in_article += 1
        return True

    def leave(self, node: LexborNode) -> None:
        tag = node.tag or ""
        if tag in BLOCK_TAGS:
            self.flush()
        if tag in LISTS and self.lists:
            self.lists.pop()
        elif tag == "li":
            self.items_open -= 1
            self.pending_item = None
        elif tag in ("article", "section"):
            self.in_article -= 1

    def flush(self) -> None:
        text = "".join(self.buffer)
        self.buffer.clear()
        if not text.strip():
            return
        if self.pending_item is not None:
            depth, marker = self.pending_item
            self.writer.item(depth, marker, text)
            self.pending_item = None
        elif self.items_open and self.lists:
            self.writer.paragraph(text, indent=len(self.lists))
        else:
            self.writer.paragraph(text)

    def skipped(self, node: LexborNode, tag: str) -> bool:
        if tag in DROPPED_TAGS or _hidden(node):
            return True
        attributes = node.attributes
        if (attributes.get("role") or "").strip().lower() in CHROME_ROLES:
            return True
        if not self.site:
            return False
        if tag == "footer" and not self.in_article:
            return True
        if tag == "header" and not self.in_article and node.css_first("h1, h2, h3, h4, h5, h6") is None:
            return True
        if tag in HEADINGS or tag in ("pre", "table", "p", "code", "span", "a"):
            return False  # a class on content is styling, never chrome
        classes = attributes.get("class")
        # A section's id is usually its heading's slug ("http-cookiejar-cookie-handling"): not a name.
        named = _names_chrome(classes) or (tag not in ("section", "article", "main")
                                           and "section" not in (classes or "").split()
                                           and _names_chrome(attributes.get("id")))
        return named and node.css_first("h1") is None  # the page's title is never chrome

    def table(self, table: LexborNode) -> None:
        caption = next((child for child in table.iter() if child.tag == "caption"), None)
        if caption is not None:
            self.writer.paragraph(inline_text(caption))
        first = True
        for row in _rows(table):
            cells = [inline_text(cell) for cell in row.iter() if cell.tag in ("td", "th") and not _hidden(cell)]
            if cells:
                self.writer.row(cells, first=first)
                first = False
        self.writer.end_table()


def inline_text(node: LexborNode) -> str:
    """The text of `node` as one block: block-level descendants separated by spaces, `<br>` a line
    break, dropped and hidden descendants left out."""
    parts: list[str] = []

    def enter(child: LexborNode) -> bool:
        tag = child.tag or ""
        if tag in DROPPED_TAGS or _hidden(child):
            return False
        if tag == "br":
            parts.append("\n")
        elif tag in BLOCK_TAGS or tag in HEADINGS or tag in ("td", "th"):
            parts.append(" ")
        return True

    def leave(child: LexborNode) -> None:
        if (child.tag or "") in BLOCK_TAGS:
            parts.append(" ")

    _traverse(node, enter, leave, parts.append, root_entered=True)
    return "".join(parts)


def _rows(table: LexborNode) -> list[LexborNode]:
    """The table's own rows (in `<thead>`, `<tbody>`, `<tfoot>` or directly), not a nested table's."""
    rows: list[LexborNode] = []
    for child in table.iter():
        if child.tag == "tr":
            rows.append(child)
        elif child.tag in ("thead", "tbody", "tfoot"):
            rows.extend(grandchild for grandchild in child.iter() if grandchild.tag == "tr")
    return rows


def _traverse(root: LexborNode, enter: Callable[[LexborNode], bool], leave: Callable[[LexborNode], None],
              text: Callable[[str], object], *, root_entered: bool = False) -> None:
    """Depth first through `root`'s subtree without recursion: `enter` says whether to go into an
    element, `leave` follows its children, `text` receives each text node's characters."""
    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            leave(node)
            continue
        tag = node.tag
        if tag == "-text":  # a line break in the markup is a space; <br> is the line break
            text(node.text(deep=False).replace("\r", " ").replace("\n", " "))
            continue
        if tag is None or tag.startswith("-"):  # a comment, a doctype
            continue
        if not (root_entered and node is root) and not enter(node):
            continue
        stack.append((node, True))
        children = list(node.iter(include_text=True))
        stack.extend((child, False) for child in reversed(children))


def _hidden(node: LexborNode) -> bool:
    attributes = node.attributes
    if not attributes:
        return False
    if "hidden" in attributes or (attributes.get("aria-hidden") or "").strip().lower() == "true":
        return True
    style = attributes.get("style")
    return bool(style and _HIDDEN_STYLE.search(style))


def _names_chrome(value: str | None) -> bool:
    if not value:
        return False
    return any(word.lower() in BOILERPLATE_NAMES for word in _NAME_WORDS.findall(value))
