"""A tree of about 700,000 page-sized files of real text, for the first sync of a large tree (issue #45:
"the first sync of a 700k-page tree writes chunks within a minute of starting, under 1 GB RSS").

    python bench/corpora/make_pages.py CORPUS OUT [--pages 700000]

CORPUS is make_million.py's corpus (e.g. /tmp/pnk-million-full: the shared corpora and Debian's
documentation, 75,574 files, 367 M characters). Each of its files, in sorted order, is cut at blank
lines into pages of at least `--least` characters (400: a short wiki page or a tldr page; the last
page of a file takes what is left; a shorter file stays one page), written as `OUT/docs/<its folder>/<its
stem>.p<NNNN><its suffix>`, until `--pages` pages are written. Nothing is copied twice: every page is
a distinct piece of a real text, as a wiki or a folder of notes is many small pages. The same corpus
gives the same tree byte for byte. OUT is then a folder `bench/bench_first_chunk.py --kb OUT` syncs
in place (it runs `pnk init` there when OUT has no pinakes.toml).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SUFFIXES = (".md", ".txt", ".rst")
BLANK_LINES = re.compile(r"\n[ \t]*\n")


def corpus_files(corpus: Path) -> list[Path]:
    return sorted(path for path in corpus.rglob("*") if path.suffix in SUFFIXES and path.is_file())


def pages_of(text: str, least: int) -> list[str]:
    """`text` cut at blank lines into pieces of at least `least` characters (the last may be shorter)."""
    pages: list[str] = []
    start = 0
    for gap in BLANK_LINES.finditer(text):
        if gap.start() - start >= least:
            pages.append(text[start:gap.start()].strip("\n") + "\n")
            start = gap.end()
    rest = text[start:].strip("\n")
    if rest.strip():
        if pages and len(rest) < least // 4:
            pages[-1] = pages[-1] + "\n" + rest + "\n"
        else:
            pages.append(rest + "\n")
    return pages


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=700_000)
    parser.add_argument("--least", type=int, default=400, help="a page's least characters (400 gives 709,928 pages)")
    args = parser.parse_args()
    files = corpus_files(args.corpus)
    least = args.least
    docs = args.out / "docs"
    written = chars = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        folder = docs / path.parent.relative_to(args.corpus)
        folder.mkdir(parents=True, exist_ok=True)
        for number, page in enumerate(pages_of(text, least), 1):
            (folder / f"{path.stem}.p{number:04d}{path.suffix}").write_text(page, encoding="utf-8")
            written += 1
            chars += len(page)
            if written >= args.pages:
                break
        if written >= args.pages:
            break
    print(f"{written} pages, {chars} characters ({chars // max(written, 1)} a page, at least {least}), "
          f"from {len(files)} files of {args.corpus}", file=sys.stderr)
    return 0 if written >= args.pages else 1


if __name__ == "__main__":
    raise SystemExit(main())
