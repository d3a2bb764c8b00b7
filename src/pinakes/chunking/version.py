"""The chunker's version: part of every document's build key."""

# The version of what this package outputs for given inputs. It is part of every document's build key,
# so bumping it re-chunks (and re-embeds) every KB on its next sync. tests/test_chunker_version.py
# holds a digest of the output over fixed inputs per version: a change to chunk output without a bump
# fails there. "2": the output after the first release's five chunking changes (was "1"); "3": chunks
# bounded in characters too (MAX_CHARS_PER_TOKEN); "4": a heading never stands alone (a section holding
# only its heading joins the next), reST and AsciiDoc section titles are headings.
CHUNKER_VERSION = "4"
