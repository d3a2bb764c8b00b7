"""The packer reads only a chunk's tail for its overlap words (`_Packer._overlap_words`); what it
finds must be what a scan of the whole chunk finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pinakes.chunking import _WORD, _Counter, _Packer, _Planned

# Words of any length up to several times the scan's first reach, so windows cut words.
WORDS = st.lists(st.text(alphabet=st.sampled_from("ab.é漢"), min_size=1, max_size=60), max_size=40)
SPACES = st.lists(st.sampled_from([" ", "\n", "\t ", "\n\n"]), min_size=40, max_size=40)


@settings(max_examples=500, deadline=None)
@given(words=WORDS, spaces=SPACES, span=st.tuples(st.integers(0, 2500), st.integers(0, 2500)),
       limit=st.integers(1, 30))
def test_the_tail_scan_finds_the_words_a_whole_scan_finds(words: list[str], spaces: list[str],
                                                          span: tuple[int, int], limit: int) -> None:
    text = "".join(word + space for word, space in zip(words, spaces, strict=False))
    start, end = sorted(min(bound, len(text)) for bound in span)
    packer = _Packer(text, _Counter(len, None), max_tokens=50, overlap=limit, split_sentences=True)
    whole = [match.span() for match in _WORD.finditer(text, start, end)][1:][-limit:]
    assert packer._overlap_words(  # pyright: ignore[reportPrivateUsage] -- the test pins the private method
        _Planned(start, end, 0, 0), limit) == whole
