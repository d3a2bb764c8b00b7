"""Token recall and precision of the HTML, EPUB, DOCX and ODT extractors against a plain-text truth
of the same source (issue #43), with the candidate libraries measured in the same run.

    python bench/corpora/formats/build.py --out bench/corpora/formats/corpus   # only to remake the committed copy
    python bench/bench_formats.py [--corpus DIR] [--arms ours,trafilatura,html2text,...]

Tokens are `pinakes.extract.quality.token_bag`'s: the multisets of lowercase `[a-z0-9]+` tokens of the
truth and of the extraction; recall and precision are summed over a corpus (micro), and the worst
page of each is shown. Arms (each skipped, saying so, when its library is not installed):

- HTML (`html/*.html`, each page inside its site template): `ours` (pinakes.extract.html, in process),
  `trafilatura` (its defaults, Markdown output, tables and comments on), `html2text` (the whole page:
  it removes no boilerplate) and `html2text-main` (html2text over our content root, which isolates
  what the converter adds);
- EPUB (`book.epub`, truth `truth-book.txt`): `ours`;
- DOCX (`docx/*.docx`): `ours`, `mammoth` (its Markdown), `docx2python`, `python-docx` (paragraphs
  and tables of the body);
- ODT (`odt/*.odt`): `ours`, `odfpy` (`teletype.extractText` over the body's paragraphs and headings).

Seconds are process CPU time over the corpus (one pass; the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO / "bench" / "corpora" / "formats" / "corpus"  # committed; build.py remakes it


def ours(kind: str) -> Callable[[Path], str]:
    from importlib import import_module

    module = import_module(f"pinakes.extract.{kind}")
    return lambda path: module.extract_in_process(path).text


def trafilatura_arm(path: Path) -> str:
    import trafilatura  # pyright: ignore[reportMissingImports]  # an optional arm: skipped when not installed

    library: Any = trafilatura  # untyped optional library: nothing for pyright to check
    return library.extract(path.read_text(encoding="utf-8"), output_format="markdown", include_tables=True,
                           include_comments=False, favor_recall=True) or ""


def html2text_arm(path: Path) -> str:
    import html2text  # pyright: ignore[reportMissingImports]  # an optional arm: skipped when not installed

    library: Any = html2text  # untyped optional library: nothing for pyright to check
    converter = library.HTML2Text()
    converter.body_width = 0
    return converter.handle(path.read_text(encoding="utf-8"))


def html2text_main_arm(path: Path) -> str:
    import html2text  # pyright: ignore[reportMissingImports]  # an optional arm: skipped when not installed
    from selectolax.lexbor import LexborHTMLParser

    from pinakes.extract.html_text import content_root

    root = content_root(LexborHTMLParser(path.read_text(encoding="utf-8")), site=True)
    library: Any = html2text  # untyped optional library: nothing for pyright to check
    converter = library.HTML2Text()
    converter.body_width = 0
    return converter.handle(root.html or "" if root is not None else "")


def mammoth_arm(path: Path) -> str:
    import mammoth  # pyright: ignore[reportMissingImports]  # an optional arm: skipped when not installed

    library: Any = mammoth  # untyped optional library: nothing for pyright to check
    with open(path, "rb") as handle:
        return library.convert_to_markdown(handle).value


def docx2python_arm(path: Path) -> str:
    from docx2python import docx2python  # pyright: ignore[reportMissingImports, reportUnknownVariableType]  # an optional, untyped package

    convert = cast(Any, docx2python)  # untyped optional library: nothing for pyright to check
    with convert(path) as document:
        return document.text


def python_docx_arm(path: Path) -> str:
    import docx  # pyright: ignore[reportMissingImports]  # an optional arm: skipped when not installed

    library: Any = docx  # untyped optional library: nothing for pyright to check
    document = library.Document(str(path))
    parts: list[str] = [paragraph.text for paragraph in document.paragraphs]
    for table in document.tables:
        parts.extend(cell.text for row in table.rows for cell in row.cells)
    return "\n".join(parts)


def odfpy_arm(path: Path) -> str:
    from odf import teletype, text  # pyright: ignore[reportMissingImports, reportUnknownVariableType]  # an optional, untyped package
    from odf.opendocument import load  # pyright: ignore[reportMissingImports, reportUnknownVariableType]  # an optional, untyped package

    teletype_module = cast(Any, teletype)  # untyped optional library: nothing for pyright to check
    text_module = cast(Any, text)
    load_document = cast(Any, load)
    document = load_document(str(path))
    return "\n".join(teletype_module.extractText(element) for kind in (text_module.H, text_module.P)
                     for element in document.getElementsByType(kind))


ARMS: dict[str, dict[str, Callable[[Path], str] | str]] = {
    "html": {"ours": "html", "trafilatura": trafilatura_arm, "html2text": html2text_arm,
             "html2text-main": html2text_main_arm},
    "epub": {"ours": "epub"},
    "docx": {"ours": "docx", "mammoth": mammoth_arm, "docx2python": docx2python_arm,
             "python-docx": python_docx_arm},
    "odt": {"ours": "odt", "odfpy": odfpy_arm},
}


def measure(kind: str, arm: str, run: Callable[[Path], str], pairs: list[tuple[Path, Path]]) -> None:
    from pinakes.extract.quality import token_bag

    common = want = got = 0
    worst: tuple[float, str] = (2.0, "")
    started = time.process_time()
    for source, truth in pairs:
        recall, precision = token_bag(truth.read_text(encoding="utf-8"), run(source))
        common += recall.numerator
        want += recall.denominator
        got += precision.denominator
        # a side with nothing to count (an empty truth or extraction) has no ratio: the other side decides
        page = min((value for value in (recall.value, precision.value) if value is not None), default=0.0)
        worst = min(worst, (page, source.name))
    seconds = time.process_time() - started
    print(f"{kind:5} {arm:15} docs {len(pairs):3}  recall {common / max(want, 1):.4f}  precision "
          f"{common / max(got, 1):.4f}  worst {worst[0]:.4f} ({worst[1]})  cpu {seconds:.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--kinds", default="html,epub,docx,odt")
    parser.add_argument("--arms", default="", help="comma-separated arm names (default: all)")
    args = parser.parse_args()
    corpus: Path = args.corpus
    if not (corpus / "truth").is_dir():
        print(f"bench_formats skipped: no corpus under {corpus} (build it: python bench/corpora/formats/build.py)")
        return 0
    wanted = {arm for arm in args.arms.split(",") if arm}
    for kind in args.kinds.split(","):
        if kind == "epub":
            pairs = [(corpus / "book.epub", corpus / "truth-book.txt")] if (corpus / "book.epub").exists() else []
        else:
            suffix = "html" if kind == "html" else kind
            pairs = [(source, corpus / "truth" / f"{source.stem}.txt")
                     for source in sorted((corpus / kind).glob(f"*.{suffix}"))]
        for arm, run in ARMS[kind].items():
            if wanted and arm not in wanted:
                continue
            try:
                function = ours(run) if isinstance(run, str) else run
                measure(kind, arm, function, pairs)
            except ImportError as exc:
                print(f"{kind:5} {arm:15} skipped: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
