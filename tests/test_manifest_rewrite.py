"""`pinakes.manifest.rewrite`: one table of pinakes.toml replaced by a block, every other byte kept.

The text-level cases assert the exact bytes: what precedes the table's block and what follows it are
the input's own bytes, whatever its newlines, comments and spacing. The file-level cases go through
`write_table` on a manifest `pnk init` stamped: a result that would not load is refused with the file
and its directory as they were.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pinakes.errors import ManifestError
from pinakes.init import init_kb
from pinakes.manifest import InvalidManifestError, load_manifest
from pinakes.manifest.rewrite import replace_table, write_table

TABLE = "retrieval.confidence"
BLOCK = '[retrieval.confidence]\nhigh = 0.61\nlow = 0.42\nfitted_for = "test/model (best cosine)"\n'
HERE = Path("pinakes.toml")


def replaced(text: str, block: str = BLOCK) -> tuple[str, str]:
    return replace_table(text, TABLE, block, path=HERE)


def test_a_live_table_is_replaced_in_place_and_every_other_byte_kept() -> None:
    before = ('# top comment\r\n[kb]\r\nname   =   "x"    # odd spacing\r\n\r\n[retrieval]\r\nfinal_k=8\r\n\r\n'
              '# about the thresholds (kept: directly above the table)\r\n')
    table = ('[ retrieval . confidence ]   # fitted last week\r\nhigh = 0.9\r\n# between keys\r\nlow = 0.1\r\n'
             'fitted_for = "old"\r\n')
    after = '# introduces [rerank] (kept)\r\n\r\n[rerank]\r\nbatch_size = 16\r\n\t\r\n[deep]\r\nmax_rounds = 3'
    text, placement = replaced(before + table + after)
    assert placement == "replaced"
    assert text == before + BLOCK.replace("\n", "\r\n") + after  # CRLF kept, no final newline added


def test_a_sub_table_elsewhere_goes_with_the_table() -> None:
    text = ('[retrieval]\nfinal_k = 8\n\n[retrieval.confidence]\nhigh = 0.9\nlow = 0.1\nfitted_for = "a"\n\n'
            '[rerank]\nbatch_size = 16\n\n[retrieval.confidence.model]\nweights = [1, 2]\n\n[deep]\nmax_rounds = 3\n')
    result, _ = replaced(text)
    assert result == ('[retrieval]\nfinal_k = 8\n\n' + BLOCK + '\n[rerank]\nbatch_size = 16\n\n\n[deep]\n'
                      'max_rounds = 3\n')
    assert tomllib.loads(result)["retrieval"]["confidence"] == {"high": 0.61, "low": 0.42,
                                                                "fitted_for": "test/model (best cosine)"}


def test_the_templates_commented_out_table_is_where_the_block_goes() -> None:
    prose = "# Fit them and write them here with `pnk eval --fit-confidence --write`:\n"
    placeholder = '# [retrieval.confidence]\n# high = <fitted>\n# low = <fitted>\n# fitted_for = "<model>"\n'
    before = "[retrieval]\nfinal_k = 8\n\n" + prose
    after = "\n[rerank]\nbatch_size = 16\n"
    text, placement = replaced(before + placeholder + after)
    assert (placement, text) == ("placeholder", before + BLOCK + after)


def test_without_a_table_the_block_follows_the_parents_last_key() -> None:
    before = "[retrieval]\nfinal_k = 8\nrrf_k = 60\n"
    after = "# a comment introducing the next table\n[rerank]\nbatch_size = 16\n"
    text, placement = replaced(before + after)
    assert (placement, text) == ("inserted", before + "\n" + BLOCK + "\n" + after)


def test_without_a_parent_the_block_is_appended_even_after_a_missing_final_newline() -> None:
    text, placement = replaced("[kb]\r\nname = \"x\"")
    assert (placement, text) == ("appended", '[kb]\r\nname = "x"\r\n\r\n' + BLOCK.replace("\n", "\r\n"))


def test_a_line_opening_with_a_bracket_inside_a_multi_line_value_is_no_header() -> None:
    before = "[retrieval]\nmatrix = [\n  [1, 2],\n  [3, 4],\n]\n"
    text, _ = replaced(before + "[retrieval.confidence]\nhigh = 0.9\nlow = 0.1\nfitted_for = \"a\"\n")
    assert text == before + BLOCK


@pytest.mark.parametrize("written", [
    '[retrieval]\nconfidence = { high = 0.9, low = 0.1, fitted_for = "a" }\n',
    '[retrieval]\nconfidence.high = 0.9\nconfidence.low = 0.1\nconfidence.fitted_for = "a"\n',
])
def test_a_table_written_inline_or_as_dotted_keys_is_refused(written: str) -> None:
    with pytest.raises(ManifestError, match="cannot place") as caught:
        replaced(written)
    assert "pnk eval --fit-confidence" in (caught.value.remedy or "")


# -- the file ----------------------------------------------------------------------------------------


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    init_kb(tmp_path / "kb", name="rewrite")
    return tmp_path / "kb" / "pinakes.toml"


def test_write_backs_up_writes_and_a_second_write_replaces_the_first(manifest: Path) -> None:
    original = manifest.read_bytes()
    first = write_table(manifest, TABLE, BLOCK, expected=original, backup_label="confidence")
    assert first.placement == "placeholder" and first.backup is not None
    assert first.backup.read_bytes() == original
    confidence = load_manifest(manifest).retrieval.confidence
    assert confidence is not None and (confidence.high, confidence.low) == (0.61, 0.42)
    second = write_table(manifest, TABLE, BLOCK.replace("0.61", "0.7"), backup_label="confidence")
    assert second.placement == "replaced" and second.backup is not None and second.backup != first.backup
    lines = manifest.read_text(encoding="utf-8").splitlines()
    assert lines.count("[retrieval.confidence]") == 1 and "high = 0.7" in lines
    unchanged = write_table(manifest, TABLE, BLOCK.replace("0.61", "0.7"), backup_label="confidence")
    assert (unchanged.placement, unchanged.backup) == ("unchanged", None)


def test_a_result_that_would_not_load_is_refused_and_nothing_is_written(manifest: Path) -> None:
    original = manifest.read_bytes()
    listing = sorted(manifest.parent.iterdir())
    backwards = BLOCK.replace("0.61", "0.1")  # low above high: the manifest reader refuses it
    with pytest.raises(InvalidManifestError, match="low"):
        write_table(manifest, TABLE, backwards, backup_label="confidence")
    assert manifest.read_bytes() == original and sorted(manifest.parent.iterdir()) == listing


def test_a_manifest_changed_since_it_was_read_is_refused(manifest: Path) -> None:
    read_then = manifest.read_bytes()
    manifest.write_bytes(read_then + b"# edited meanwhile\n")
    with pytest.raises(ManifestError, match="changed while the fit ran"):
        write_table(manifest, TABLE, BLOCK, expected=read_then, backup_label="confidence")
    assert manifest.read_bytes() == read_then + b"# edited meanwhile\n"


def test_a_block_with_a_sub_table_replaces_the_table_and_its_old_sub_table() -> None:
    block = BLOCK + '\n[retrieval.confidence.model]\nweights = [0.5, 1.5]\nbias = -2.0\n'
    before = "[retrieval]\nfinal_k = 8\n\n"
    old = '[retrieval.confidence]\nhigh = 0.9\nlow = 0.1\nfitted_for = "a"\n[retrieval.confidence.model]\nweights = [9]\n'
    text, placement = replaced(before + old + "\n[deep]\nmax_rounds = 3\n", block)
    assert (placement, text) == ("replaced", before + block + "\n[deep]\nmax_rounds = 3\n")
