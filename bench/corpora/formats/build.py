"""Build the HTML, EPUB, DOCX and ODT development corpora (issue #43) from the Python 3.11
documentation's reST sources, each page with a plain-text truth of the same source.

    python bench/corpora/formats/build.py [--out bench/results/formats-corpus] [--pages 40]

What it writes under `--out` (the copy in bench/corpora/formats/corpus is committed, with its README):

- `pages.txt`: the sampled pages (KB-relative paths of `../shared/corpora/python-3.11-docs-rst/docs`);
- `truth/<page>.txt`: the plain text of each page's docutils document tree;
- `html/<page>.html`: the same tree rendered by docutils' html5 writer inside a site template, the
  two templates taking turns (`sphinx`: the Python documentation's own classic layout, with its
  navigation bars, global and local tables of contents in a sidebar, search form, footer and scripts;
  `site`: a generic `<header>`/`<nav>`/`<main>`/`<aside>`/`<footer>` page with a cookie banner, a
  hidden dialog, a breadcrumb and a "on this page" table of contents in plain `<div>`s);
- `book.epub`, `docx/<page>.docx`, `odt/<page>.odt`: the bare body HTML of the same trees written by
  pandoc (Debian's `pandoc`; the EPUB is every page as one book, a chapter each, its truth the pages'
  truths in order: `truth-book.txt`).

The truth is one home for "what the page says": every Text node of the tree that a reader sees
(comments, system messages, substitution definitions, targets, raw passthrough and the
`.. contents::` table of contents left out). Sphinx's own directives and roles, which plain docutils
does not know, are given stand-ins here (a signature line and its body, a literal block, nothing for
`toctree`/`index`), used alike by the HTML and the truth since both come from the one tree.
Deterministic: the sample is every k-th page of those 8-120 KB in sorted order.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from docutils import nodes

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SOURCE = REPO.parent / "shared" / "corpora" / "python-3.11-docs-rst" / "docs"

SIGNATURE_DIRECTIVES = ("function", "method", "data", "class", "attribute", "exception", "decorator",
                        "classmethod", "staticmethod", "coroutinefunction", "coroutinemethod", "opcode",
                        "cmdoption", "option", "envvar", "describe", "object", "pdbcommand", "program",
                        "decoratormethod", "abstractmethod", "awaitablefunction", "awaitablemethod",
                        "c:function", "c:member", "c:type", "c:var", "c:macro", "c:struct", "c:data",
                        "2to3fixer", "audit-event")
NOTE_DIRECTIVES = {"versionadded": "New in version", "versionchanged": "Changed in version",
                   "deprecated": "Deprecated since version", "deprecated-removed": "Deprecated since version",
                   "seealso": "See also", "impl-detail": "CPython implementation detail:",
                   "availability": "Availability:"}
LITERAL_DIRECTIVES = ("code-block", "sourcecode", "doctest", "testcode", "testoutput", "productionlist")
DROPPED_DIRECTIVES = ("toctree", "index", "module", "currentmodule", "highlight", "sectionauthor",
                      "moduleauthor", "tabularcolumns", "testsetup", "testcleanup", "literalinclude",
                      "include", "only", "c:namespace", "c:namespace-push", "c:namespace-pop", "glossary-sort",
                      "miscnews", "limited-api-list", "audit-event-table", "deprecated-removed-list")


def install_sphinx_stand_ins() -> None:
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives, roles

    class AnyOptions(dict[str, Callable[[str], Any]]):
        def __contains__(self, key: object) -> bool:
            return True

        def __getitem__(self, key: str) -> Callable[[str], Any]:
            return directives.unchanged

    class Signature(Directive):
        has_content, optional_arguments, final_argument_whitespace = True, 1, True
        option_spec = AnyOptions()

        def run(self) -> list[nodes.Node]:
            out: list[nodes.Node] = []
            if self.arguments:
                out.append(nodes.paragraph("", "", nodes.literal(self.arguments[0], self.arguments[0])))
            body = nodes.block_quote()
            self.state.nested_parse(self.content, self.content_offset, body)
            out.append(body)
            return out

    class Note(Directive):
        has_content, optional_arguments, final_argument_whitespace = True, 1, True
        option_spec = AnyOptions()

        def run(self) -> list[nodes.Node]:
            lead = NOTE_DIRECTIVES[self.name]
            text = f"{lead} {self.arguments[0]}." if self.arguments else lead
            body = nodes.container()
            body += nodes.paragraph(text, text)
            self.state.nested_parse(self.content, self.content_offset, body)
            return [body]

    class Literal(Directive):
        has_content, optional_arguments, final_argument_whitespace = True, 1, True
        option_spec = AnyOptions()

        def run(self) -> list[nodes.Node]:
            code = "\n".join(self.content)
            return [nodes.literal_block(code, code)] if code.strip() else []

    class Dropped(Directive):
        has_content, optional_arguments, final_argument_whitespace = True, 1, True
        option_spec = AnyOptions()

        def run(self) -> list[nodes.Node]:
            return []

    for name in SIGNATURE_DIRECTIVES:
        directives.register_directive(name, Signature)
    for name in NOTE_DIRECTIVES:
        directives.register_directive(name, Note)
    for name in LITERAL_DIRECTIVES:
        directives.register_directive(name, Literal)
    for name in DROPPED_DIRECTIVES:
        directives.register_directive(name, Dropped)

    def generic_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
                     options: Mapping[str, Any] | None = None,
                     content: Sequence[str] | None = None) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        shown = html.unescape(text)
        titled = re.fullmatch(r"(?s)(.*?)\s*<([^<>]*)>", shown)
        if titled and titled.group(1):
            shown = titled.group(1)
        shown = shown.lstrip("!")
        if shown.startswith("~"):
            shown = shown[1:].rsplit(".", 1)[-1]
        return [nodes.literal(rawtext, shown)], []

    known = roles.role

    def any_role(name: str, language_module: Any, lineno: int,
                 reporter: Any) -> tuple[Callable[..., Any] | None, list[nodes.system_message]]:
        role, messages = known(name, language_module, lineno, reporter)
        return (role, messages) if role is not None else (generic_role, [])

    roles.role = any_role


SETTINGS = {"report_level": 5, "halt_level": 5, "doctitle_xform": False, "initial_header_level": 1,
            "file_insertion_enabled": False, "raw_enabled": False, "syntax_highlight": "none",
            "embed_stylesheet": False, "stylesheet_path": "", "section_self_link": False,
            "footnote_references": "brackets", "warning_stream": False}


def doctree_of(source: str) -> nodes.document:
    from docutils.core import publish_doctree  # pyright: ignore[reportUnknownVariableType] -- stub: untyped params

    return cast("nodes.document", publish_doctree(source, settings_overrides=SETTINGS))


def body_html(doctree: nodes.document) -> str:
    from docutils.core import publish_from_doctree  # pyright: ignore[reportUnknownVariableType] -- stub: untyped params

    parts = cast("bytes | str", publish_from_doctree(doctree, writer_name="html5", settings_overrides=SETTINGS))
    text = parts.decode("utf-8") if isinstance(parts, bytes) else parts
    match = re.search(r'<main>\s*(.*?)\s*</main>', text, re.S) or re.search(r'<body>\s*(.*?)\s*</body>', text, re.S)
    assert match is not None
    return match.group(1)


def truth_text(doctree: nodes.document) -> str:
    """The words a reader sees in the tree, one block a paragraph."""
    from docutils import nodes

    skipped = (nodes.comment, nodes.system_message, nodes.substitution_definition, nodes.target, nodes.raw,
               nodes.pending)
    out: list[str] = []

    def visit(node: nodes.Node) -> None:
        if isinstance(node, skipped):
            return
        if isinstance(node, nodes.topic) and "contents" in node.get("classes", []):
            return
        if isinstance(node, nodes.Text):
            out.append(str(node))
            return
        for child in node.children:
            visit(child)
        if isinstance(node, (nodes.paragraph, nodes.title, nodes.literal_block, nodes.term, nodes.entry)):
            out.append("\n")

    visit(doctree)
    return "".join(out)


def section_titles(doctree: nodes.document) -> list[tuple[int, str, str]]:
    from docutils import nodes

    titles: list[tuple[int, str, str]] = []
    for section in doctree.findall(nodes.section):
        depth = 0
        parent = section.parent
        while parent is not None:
            depth += isinstance(parent, nodes.section)
            parent = parent.parent
        ids = section.get("ids") or [""]
        titles.append((depth, section[0].astext() if section.children else "", ids[0]))
    return titles


def _toc(titles: list[tuple[int, str, str]], *, max_depth: int) -> str:
    items = "".join(f'<li class="toctree-l{depth + 1}"><a class="reference internal" href="#{anchor}">'
                    f"{html.escape(title)}</a></li>" for depth, title, anchor in titles if depth < max_depth)
    return f"<ul>{items}</ul>"


def sphinx_page(title: str, body: str, titles: list[tuple[int, str, str]], neighbours: tuple[str, str],
                global_toc: str) -> str:
    previous, following = (html.escape(name) for name in neighbours)
    related = ('<div class="related" role="navigation" aria-label="related navigation"><h3>Navigation</h3><ul>'
               '<li class="right" style="margin-right: 10px"><a href="../genindex.html" title="General Index" '
               'accesskey="I">index</a></li><li class="right"><a href="../py-modindex.html" title="Python Module '
               'Index">modules</a> |</li><li class="right"><a href="next.html">next</a> |</li><li class="right">'
               '<a href="prev.html">previous</a> |</li><li><img src="../_static/py.svg" alt="python logo" '
               'style="vertical-align: middle; margin-top: -1px"/></li><li><a href="https://www.python.org/">'
               'Python</a> &#187;</li><li class="switchers"><div class="language_switcher_placeholder"></div>'
               '<div class="version_switcher_placeholder"></div></li><li id="cpython-language-and-version">'
               '<a href="../index.html">3.11.2 Documentation</a> &#187;</li><li class="nav-item nav-item-1">'
               '<a href="index.html" accesskey="U">The Python Standard Library</a> &#187;</li><li class="right">'
               '<div class="inline-search" role="search"><form class="inline-search" action="../search.html" '
               'method="get"><input placeholder="Quick search" aria-label="Quick search" type="search" name="q" '
               '/><input type="submit" value="Go" /></form></div> |</li></ul></div>')
    sidebar = ('<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div '
               f'class="sphinxsidebarwrapper"><div><h3><a href="../contents.html">Table of Contents</a></h3>'
               f'{_toc(titles, max_depth=3)}</div><div><h4>Previous topic</h4><p class="topless"><a href="prev.html"'
               f' title="previous chapter">{previous}</a></p></div><div><h4>Next topic</h4><p class="topless">'
               f'<a href="next.html" title="next chapter">{following}</a></p></div><div role="note" '
               'aria-label="source link"><h3>This Page</h3><ul class="this-page-menu"><li><a href="../bugs.html">'
               'Report a Bug</a></li><li><a href="../_sources/page.rst.txt" rel="nofollow">Show Source</a></li>'
               f'</ul></div><div><h3>Contents</h3>{global_toc}</div></div></div>')
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8" /><meta name="viewport" '
            'content="width=device-width, initial-scale=1.0" /><meta property="og:title" content="'
            f'{html.escape(title)}" /><title>{html.escape(title)} &#8212; Python 3.11.2 documentation</title>'
            '<link rel="stylesheet" href="../_static/pydoctheme.css" /><script src="../_static/doctools.js">'
            '</script><script>DOCUMENTATION_OPTIONS = {VERSION: "3.11.2", LANGUAGE: "en"};</script><style>'
            '@media only screen { table.full-width-table { width: 100%; } }</style></head><body>'
            '<div class="mobile-nav"><input type="checkbox" id="menuToggler" class="toggler__input" '
            'aria-controls="navigation" aria-pressed="false" aria-expanded="false" role="button" '
            'aria-label="Menu" /><nav class="nav-content" role="navigation"><label for="menuToggler" '
            'class="toggler__label"><span></span></label><span class="nav-items-wrapper"><a '
            'href="https://www.python.org/" class="nav-logo"><img src="../_static/py.svg" alt="Logo"/></a>'
            '<span class="version_switcher_placeholder"></span><form role="search" class="search" '
            'action="../search.html" method="get"><svg width="20" height="20" viewBox="0 0 20 20" '
            'class="search-icon"><path fill-rule="nonzero" fill="currentColor" d="M15.5 14h-.79"></path>'
            '</svg><input placeholder="Quick search" aria-label="Quick search" type="search" name="q" />'
            '<input type="submit" value="Go"/></form></span></nav><div class="menu-wrapper"><nav '
            'class="menu" role="navigation" aria-label="main navigation"><div '
            'class="language_switcher_placeholder"></div><label class="theme-selector-label">Theme <select '
            'class="theme-selector" oninput="activateTheme(this.value)"><option value="auto" selected>Auto'
            '</option><option value="light">Light</option><option value="dark">Dark</option></select></label>'
            f'<div><h3><a href="../contents.html">Table of Contents</a></h3>{_toc(titles, max_depth=3)}</div>'
            '</nav></div></div>'
            f'{related}<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div '
            f'class="body" role="main">{body}</div></div></div>{sidebar}<div class="clearer"></div></div>'
            f'{related}<div class="footer">&copy; <a href="../copyright.html">Copyright</a> 2001-2023, Python '
            'Software Foundation.<br />This page is licensed under the Python Software Foundation License '
            'Version 2.<br />Examples, recipes, and other code in the documentation are additionally licensed '
            'under the Zero Clause BSD License.<br />See <a href="/license.html">History and License</a> for '
            'more information.<br /><br />The Python Software Foundation is a non-profit corporation. <a '
            'href="https://www.python.org/psf/donations/">Please donate.</a><br /><br />Last updated on Mar '
            '01, 2023. <a href="/bugs.html">Found a bug</a>?<br />Created using <a '
            'href="https://www.sphinx-doc.org/">Sphinx</a> 4.5.0.</div><script type="text/javascript" '
            'src="../_static/switchers.js"></script></body></html>\n')


def site_page(title: str, body: str, titles: list[tuple[int, str, str]], neighbours: tuple[str, str],
              global_toc: str) -> str:
    previous, following = (html.escape(name) for name in neighbours)
    return ('<!doctype html>\n<html lang="en"><head><meta http-equiv="Content-Type" content="text/html; '
            f'charset=utf-8"><title>{html.escape(title)} | Python Handbook</title><style>body{{font:16px '
            'sans-serif}} .sr-only{position:absolute}</style><script async src="/js/analytics.js"></script>'
            '<script type="application/ld+json">{"@type": "TechArticle", "headline": "x"}</script></head>'
            '<body><a class="skip-link" href="#content">Skip to content</a><div id="cookie-banner" '
            'class="cookie-consent" style="display: none">We use cookies to improve your experience. <button>'
            'Accept all</button> <button>Reject</button></div><header class="site-header"><a class="brand" '
            'href="/">Python Handbook</a><nav class="primary-nav" aria-label="Primary"><ul><li><a href="/">Home'
            '</a></li><li><a href="/tutorial/">Tutorial</a></li><li><a href="/library/">Library</a></li><li><a '
            'href="/reference/">Language Reference</a></li><li><a href="/howto/">HOWTOs</a></li></ul></nav>'
            '<form class="search-form" role="search"><label for="q">Search the handbook</label><input id="q" '
            'name="q" type="search"><button type="submit">Search</button></form></header>'
            '<div class="layout"><div class="sidebar left-sidebar"><div class="sidebar-title">Browse</div>'
            f'{global_toc}</div><main id="content"><div class="breadcrumbs"><a href="/">Home</a> / <a '
            f'href="../">Library</a> / <span>{html.escape(title)}</span></div><article class="post">{body}'
            '</article><div class="page-nav"><a class="prev" href="prev.html">&larr; '
            f'{previous}</a><a class="next" href="next.html">{following} &rarr;</a></div>'
            '<div class="feedback" hidden><p>Was this page helpful?</p><button>Yes</button><button>No</button>'
            '</div></main><aside class="toc-sidebar"><div class="toc-title">On this page</div>'
            f'<div class="toc">{_toc(titles, max_depth=4)}</div></aside></div><footer class="site-footer"><p>'
            '&copy; 2024 Python Handbook contributors. Content under the PSF License.</p><ul class="footer-links">'
            '<li><a href="/about/">About</a></li><li><a href="/privacy/">Privacy</a></li><li><a href="/contact/">'
            'Contact</a></li></ul></footer><noscript><img src="/pixel.gif" alt="tracking pixel"></noscript>'
            '<div role="dialog" aria-hidden="true" class="modal"><h2>Sign up for our newsletter</h2><p>Weekly '
            'tips.</p></div><script>window.dataLayer = window.dataLayer || [];</script></body></html>\n')


def sample(source: Path, count: int) -> list[str]:
    candidates = sorted(str(path.relative_to(source)) for path in source.rglob("*.rst.txt")
                        if 8_000 <= path.stat().st_size <= 120_000)
    step = max(1, len(candidates) // count)
    return candidates[::step][:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "formats-corpus")
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--no-pandoc", action="store_true", help="HTML and truth only")
    args = parser.parse_args()
    if not args.source.is_dir():
        print(f"formats corpus skipped: no reST sources under {args.source}")
        return 0
    install_sphinx_stand_ins()
    pages = sample(args.source, args.pages)
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    for sub in ("truth", "html", "body", "docx", "odt"):
        (out / sub).mkdir(parents=True)
    (out / "pages.txt").write_text("\n".join(pages) + "\n")
    trees = [doctree_of((args.source / page).read_text(encoding="utf-8")) for page in pages]
    all_titles = [section_titles(tree) for tree in trees]
    page_titles = [titles[0][1] if titles else page for titles, page in zip(all_titles, pages, strict=True)]
    global_toc = "<ul>" + "".join(f'<li><a href="{i}.html">{html.escape(t)}</a></li>'
                                  for i, t in enumerate(page_titles)) + "</ul>"
    for index, (page, tree, titles) in enumerate(zip(pages, trees, all_titles, strict=True)):
        name = _name(page)
        body = body_html(tree)
        neighbours = (page_titles[index - 1], page_titles[(index + 1) % len(pages)])
        template = sphinx_page if index % 2 == 0 else site_page
        page_html = template(page_titles[index], body, titles, neighbours, global_toc)
        (out / "html" / f"{name}.html").write_text(page_html, encoding="utf-8")
        (out / "body" / f"{name}.html").write_text(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>", encoding="utf-8")
        (out / "truth" / f"{name}.txt").write_text(truth_text(tree), encoding="utf-8")
    if args.no_pandoc:
        return 0
    if shutil.which("pandoc") is None:
        print("pandoc is not installed (apt-get install pandoc): EPUB, DOCX and ODT not built", file=sys.stderr)
        return 1
    names = [_name(page) for page in pages]
    for name in names:
        for kind in ("docx", "odt"):
            subprocess.run(["pandoc", "-f", "html", "-t", kind, "-o", str(out / kind / f"{name}.{kind}"),
                            str(out / "body" / f"{name}.html")], check=True)
    subprocess.run(["pandoc", "-f", "html", "-t", "epub3", "--metadata", "title=The Python 3.11 Sampler",
                    "--metadata", "author=Python Software Foundation", "--epub-chapter-level=1", "-o",
                    str(out / "book.epub"), *(str(out / "body" / f"{name}.html") for name in names)], check=True)
    (out / "truth-book.txt").write_text("".join((out / "truth" / f"{name}.txt").read_text(encoding="utf-8")
                                                for name in names), encoding="utf-8")
    return 0


def _name(page: str) -> str:
    return page.removesuffix(".rst.txt").replace("/", "__")


if __name__ == "__main__":
    sys.exit(main())
