from collections.abc import Callable
from pathlib import Path

import pytest

from pinakes.errors import SourceError
from pinakes.extract import registry
from pinakes.extract.text import extract, read_source_bytes
from pinakes.extract.types import ExtractedText
from tests.kb_helpers import text_pdf as make_pdf

PdfExtract = Callable[[Path, str], ExtractedText]  # pinakes.extract.pdf.extract, once its extra is known installed


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_utf8_text_is_returned_exactly(tmp_path: Path) -> None:
    content = "# Título\r\n\r\nCafé ✓ 日本語\r\nno trailing newline"
    path = write(tmp_path, "doc.md", content.encode())
    extracted = extract(path, "markdown")
    assert extracted.text == content  # CRLF kept: offsets address the decoded file
    assert extracted.pages is None
    assert extracted.backend == "text"
    assert extracted.fingerprint == registry.current_fingerprint("text")


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    path = write(tmp_path, "bom.txt", b"\xef\xbb\xbfhello\n")
    assert extract(path, "text").text == "hello\n"


def test_invalid_utf8_names_file_and_byte_offset(tmp_path: Path) -> None:
    data = b"line one\nline two \xff\xfe bad\n"
    path = write(tmp_path, "latin.txt", data)
    with pytest.raises(SourceError) as caught:
        extract(path, "text")
    error = caught.value
    assert error.path == path
    bad_offset = data.index(b"\xff")
    assert f"byte offset {bad_offset}" in error.message
    assert "line 2" in error.message
    assert error.remedy and "UTF-8" in error.remedy


def test_invalid_utf8_offset_counts_bytes_not_characters(tmp_path: Path) -> None:
    data = "ééé".encode() + b"\x80"
    path = write(tmp_path, "multi.md", data)
    with pytest.raises(SourceError, match="byte offset 6 "):
        extract(path, "markdown")


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"x" * 100, "PNG"),
        (b"%PDF-1.7\n" + b"x" * 100, "PDF"),
        (b"PK\x03\x04" + b"x" * 100, "ZIP"),
        (b"plain start" + b"\x00" * 4 + b"more", "NUL"),
    ],
)
def test_binary_with_text_extension_is_refused(tmp_path: Path, data: bytes, kind: str) -> None:
    path = write(tmp_path, "looks.txt", data)
    with pytest.raises(SourceError, match="binary file with a text extension, not indexed") as caught:
        extract(path, "text")
    assert kind in caught.value.message
    assert caught.value.path == path


def test_nul_after_the_sniff_window_is_not_binary_but_still_decoded(tmp_path: Path) -> None:
    sniff = int(registry.EXTRACTORS["text"].constants["binary_sniff_bytes"])
    data = b"a" * sniff + b"\x00tail"
    path = write(tmp_path, "late.txt", data)
    assert extract(path, "text").text == data.decode()


def test_utf16_is_refused_with_its_own_message(tmp_path: Path) -> None:
    path = write(tmp_path, "wide.txt", "hello".encode("utf-16"))
    with pytest.raises(SourceError, match="UTF-16"):
        extract(path, "text")


def test_size_cap_is_checked_before_reading(tmp_path: Path) -> None:
    path = write(tmp_path, "big.txt", b"x" * 101)
    with pytest.raises(SourceError, match="over the 100-byte limit"):
        read_source_bytes(path, max_bytes=100)
    assert read_source_bytes(path, max_bytes=101) == b"x" * 101


def test_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot read"):
        extract(tmp_path / "gone.md", "markdown")


def test_pdf_is_not_a_text_source(tmp_path: Path) -> None:
    path = write(tmp_path, "doc.pdf", b"%PDF-1.7")
    with pytest.raises(ValueError, match="not 'pdf'"):
        extract(path, "pdf")


# --- the free PDF extractor (pypdfium2) -----------------------------------------------------------


@pytest.fixture
def pdf_extract() -> PdfExtract:
    pytest.importorskip("pypdfium2", reason="the [pdf] extra (pypdfium2) is not installed")
    from pinakes.extract.pdf import extract as extract_pdf

    return extract_pdf


def test_pdf_pages_are_joined_with_their_spans(tmp_path: Path, pdf_extract: PdfExtract) -> None:
    path = write(tmp_path, "doc.pdf", make_pdf([["Hello page one", "second line"], ["Page two text"], []]))
    extracted = pdf_extract(path, "pdf")
    assert extracted.backend == "pypdfium2"
    assert extracted.fingerprint == registry.current_fingerprint("pypdfium2")
    assert extracted.pages is not None and len(extracted.pages) == 3
    page_texts = [extracted.text[start:end] for start, end in extracted.pages]
    assert page_texts == ["Hello page one\nsecond line", "Page two text", ""]  # an empty page has an empty span
    assert "\r" not in extracted.text


def test_pdf_chunks_carry_pages(tmp_path: Path, pdf_extract: PdfExtract) -> None:
    from pinakes.chunking import chunk_text

    pages = [[f"page {page} line {line} words" for line in range(3)] for page in range(1, 4)]
    extracted = pdf_extract(write(tmp_path, "doc.pdf", make_pdf(pages)), "pdf")
    def chunk_pages(max_tokens: int) -> list[tuple[int | None, int | None]]:
        chunks = chunk_text(extracted.text, "pdf", max_tokens=max_tokens, overlap=0,
                            count_tokens=lambda s: len(s.split()), pages=extracted.pages)
        assert all(c.text == extracted.text[c.char_start:c.char_end] for c in chunks)
        return [(c.page_start, c.page_end) for c in chunks]

    assert chunk_pages(15) == [(1, 1), (2, 2), (3, 3)]  # 15 words a page
    assert chunk_pages(40) == [(1, 2), (3, 3)]  # a chunk spanning two pages records both


def test_a_broken_pdf_is_a_source_error(tmp_path: Path, pdf_extract: PdfExtract) -> None:
    path = write(tmp_path, "broken.pdf", b"%PDF-1.4\nthis is not a pdf body")
    with pytest.raises(SourceError, match="the PDF is unreadable") as caught:
        pdf_extract(path, "pdf")
    assert caught.value.path == path
