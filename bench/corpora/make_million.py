"""A real-text corpus of about a million chunks for the scale benchmarks (issue #45), built
deterministically from the shared corpora and Debian's documentation packages. One command:

    python bench/corpora/make_million.py OUT [--chunks 1000000] [--debs DIR]

Nothing here is one corpus copied ten times: every file is a distinct real text.

Sources, in this order (the first that reach `--chunks` estimated chunks make the corpus):

1. the shared corpora beside the checkout (`../shared/corpora`): tldr-nl2bash-dev (7,425 English
   pages), tldr-pages-translations (30,979 pages in 38 languages), python-3.11-docs-rst, cranfield;
2. Debian documentation packages, fetched with `apt-get download` into `--debs` (kept there: a
   second run with the same .deb files makes the same corpus byte for byte) and unpacked with
   `dpkg-deb -x`: manual pages (groff reduced to its text), Sphinx sources (`_sources/*.txt`),
   POD, plain text, and HTML reduced to its text (scripts, styles and navigation dropped, block
   elements as paragraphs, headings as Markdown headings). Each file becomes `.md` (HTML, with
   headings) or `.txt`/`.rst` as it was.

Files shorter than 200 characters are left out (navigation stubs). The estimate counts one chunk
per 370 characters of text: what the default chunker made of every tenth file of the first 17
sources (69,889 chunks from 25.6 M characters, docs/perf/writer.md); `pnk sync` reports the real
count: the later sources make longer chunks, and the default `--chunks 1000000` gave 917,529
(403 characters a chunk); `--chunks 1100000` passes a million. `OUT/SOURCES.tsv` lists each source (package, version, the
.deb's sha256, files, characters); the order of files is sorted paths, so the same inputs give the
same corpus.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PNK_CORPORA") or REPO.parent / "shared" / "corpora")
SHARED_SETS = ("tldr-nl2bash-dev", "tldr-pages-translations", "python-3.11-docs-rst", "cranfield")
# Debian packages of documentation, in the order they are taken (largest text last).
PACKAGES = ("manpages", "manpages-dev", "bash-doc", "git-doc", "perl-doc", "python3.11-doc",
            "python-django-doc", "postgresql-doc-15", "sqlite3-doc", "debian-reference-en",
            "debian-handbook", "linux-doc-6.1", "rust-doc", "nodejs-doc", "libboost1.81-doc",
            "libstdc++-12-doc", "erlang-doc", "openjdk-17-doc", "gnucash-docs", "scala-doc")
CHARS_PER_CHUNK = 370
MIN_CHARS = 200
TEXT_SUFFIXES = (".md", ".txt", ".rst")


class _Text(html.parser.HTMLParser):
    """An HTML page's readable text: blocks as paragraphs, headings as Markdown headings."""

    SKIP = frozenset({"script", "style", "nav", "header", "footer", "head", "noscript", "svg", "form"})
    BLOCK = frozenset({"p", "div", "li", "pre", "tr", "br", "dt", "dd", "table", "section", "article", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_text(raw: str) -> str:
    parser = _Text()
    parser.feed(raw)
    parser.close()
    return _tidy("".join(parser.parts))


_ROFF_REQUEST = re.compile(r"^\.(?:\\\"|[A-Za-z]{1,3}\b)(.*)$")
_ROFF_ESCAPE = re.compile(r"\\f[BIRPC]|\\f\(..|\\s[-+]?\d|\\\*\(..|\\\*.|\\\(..|\\[&|^%e-]")


def man_text(raw: str) -> str:
    """A manual page's words: requests dropped but their arguments (.SH NAME, .B word) kept."""
    lines: list[str] = []
    for line in raw.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        request = _ROFF_REQUEST.match(line)
        if request:
            argument = request.group(1).strip().strip('"')
            if line.startswith((".SH", ".SS")):
                lines.append(f"\n## {argument}\n")
            elif line.startswith((".PP", ".LP", ".P ", ".TP", ".IP", ".sp", ".br")):
                lines.append("")
                if argument and line.startswith(".IP"):
                    lines.append(argument)
            elif argument and line.startswith((".B", ".I", ".R", ".BR", ".IR", ".BI", ".RB", ".RI")):
                lines.append(argument)
            continue
        lines.append(_ROFF_ESCAPE.sub("", line).replace("\\-", "-").replace("\\\\", "\\"))
    return _tidy("\n".join(lines))


def _tidy(text: str) -> str:
    text = re.sub(r"[ \t\r\f\v]+\n", "\n", html.unescape(text) if "&" in text else text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def _read(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def converted(path: Path, relative: str) -> tuple[str, str] | None:
    """(suffix to write, text) for one unpacked file; None when it is not documentation text."""
    name = relative.lower()
    if name.endswith((".html", ".htm")):
        return ".md", html_text(_read(path))
    if "/man/" in name and re.search(r"\.\d[a-z]*(\.gz)?$", name):
        return ".md", man_text(_read(path))
    if "/_sources/" in name and name.endswith((".txt", ".rst.txt")):
        return ".rst", _read(path)
    if name.endswith((".pod", ".pod.gz")):
        return ".txt", _read(path)
    if name.endswith((".txt", ".txt.gz", ".md", ".rst", ".md.gz")) and "/copyright" not in name:
        return (".md" if ".md" in name else ".rst" if ".rst" in name else ".txt"), _read(path)
    return None


def deb_files(debs: Path, package: str) -> tuple[Path, str]:
    """The package's .deb in `debs` (downloaded on first use) and its sha256."""
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True, capture_output=True)
        found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        raise SystemExit(f"apt-get download {package} left no {package}_*.deb in {debs}")
    deb = found[-1]
    return deb, hashlib.sha256(deb.read_bytes()).hexdigest()


def package_texts(deb: Path) -> Iterator[tuple[str, str, str]]:
    """(relative path, suffix, text) of each documentation file of a .deb, in sorted order."""
    with tempfile.TemporaryDirectory(prefix="pnk-deb-") as scratch:
        subprocess.run(["dpkg-deb", "-x", str(deb), scratch], check=True)
        root = Path(scratch)
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            relative = path.relative_to(root).as_posix()
            try:
                made = converted(path, relative)
            except (OSError, EOFError, gzip.BadGzipFile):
                continue
            if made is not None:
                yield relative, made[0], made[1]


def shared_texts(name: str) -> Iterator[tuple[str, str, str]]:
    docs = SHARED / name / "docs"
    for path in sorted(p for p in docs.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES):
        yield path.relative_to(docs).as_posix(), path.suffix.lower(), path.read_text(encoding="utf-8", errors="replace")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chunks", type=int, default=1_000_000, help="estimated chunks to stop at")
    parser.add_argument("--debs", type=Path, default=Path("/tmp/pnk-debdocs"), help="where the .deb files are kept")
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    args.debs.mkdir(parents=True, exist_ok=True)
    budget = args.chunks * CHARS_PER_CHUNK
    total = 0
    rows = ["source\tversion\tsha256\tfiles\tcharacters"]
    for name in [*SHARED_SETS, *PACKAGES]:
        if total >= budget:
            break
        if name in SHARED_SETS:
            version, digest, texts = "shared", "-", shared_texts(name)
        else:
            deb, digest = deb_files(args.debs, name)
            version, texts = deb.name.split("_")[1], package_texts(deb)
        files, chars = _write(args.out, name, texts, budget - total)
        total += chars
        rows.append(f"{name}\t{version}\t{digest}\t{files}\t{chars}")
        print(rows[-1], f"(total {total / 1e6:.0f} M characters, ~{total // CHARS_PER_CHUNK:,} chunks)",
              file=sys.stderr, flush=True)
    (args.out / "SOURCES.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(f"{args.out}: {total:,} characters, ~{total // CHARS_PER_CHUNK:,} chunks estimated")
    return 0


def _write(out: Path, name: str, texts: Iterator[tuple[str, str, str]], room: int) -> tuple[int, int]:
    """Write `texts` under OUT/name until `room` characters are written; (files, characters)."""
    files = chars = 0
    seen: set[str] = set()
    for relative, suffix, text in texts:
        if chars >= room:
            break
        if len(text) < MIN_CHARS:
            continue
        fingerprint = hashlib.sha1(text.encode()).hexdigest()
        if fingerprint in seen:  # the same page under two names (a package's symlinked copies)
            continue
        seen.add(fingerprint)
        stem = re.sub(r"(\.gz|\.html?|\.txt|\.rst|\.md|\.pod)+$", "", relative, flags=re.IGNORECASE)
        target = out / name / (stem + suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        files += 1
        chars += len(text)
    return files, chars


if __name__ == "__main__":
    raise SystemExit(main())
