"""`pnk eval --init`: start a golden set from the KB's own documents.

Confidence stays `unknown` until `[retrieval.confidence]` is fitted on a golden set, and a new KB has
none (a template ships none: its questions would name documents that do not exist). Writing one from
nothing is the barrier; this drafts it from what the index already knows — one `simple-lookup`
question per document, from a heading or title deep inside it, expecting that document — plus two
`no-answer` questions to replace. Every drafted question works as written (so `pnk eval
--fit-confidence` runs at once), and every one is marked as a draft to rewrite the way a person
would ask, because a heading copied verbatim is an easier question than any real one.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from pinakes.errors import UsageError
from pinakes.eval.golden import GOLDEN_SET_RELPATH

# Documents drafted from, at most: enough to fit on, few enough to rewrite by hand.
MAX_DRAFTED = 30

HEADER = """\
# The golden set of this KB: questions with the documents that answer them (docs/QUALITY.md).
# Drafted by `pnk eval --init` from the documents' own headings: each query below is a heading or
# a title copied verbatim, which is easier than any question a person would ask. Rewrite each one
# as someone would really ask it, keep its `id` (it pairs before/after runs), fix `expect` where
# another document answers better, and replace the two no-answer questions with questions this KB
# cannot answer. Then: `pnk eval --fit-confidence` prints [retrieval.confidence] for pinakes.toml.
"""

NO_ANSWER_DRAFTS = (
    "What is the boiling point of tungsten in a vacuum?",
    "Who won the 1930 football world cup?",
)


def draft_golden_set(kb_root: Path, conn: sqlite3.Connection) -> tuple[Path, int]:
    """Write `eval/questions.yaml` under `kb_root` from the index; returns (path, drafted count)."""
    target = kb_root / GOLDEN_SET_RELPATH
    if target.exists():
        raise UsageError(f"{GOLDEN_SET_RELPATH} already exists; --init never overwrites a golden set",
                         remedy="edit it, or move it away and run `pnk eval --init` again", path=target)
    drafts = _drafts(conn)
    if not drafts:
        raise UsageError("the index holds no documents to draft questions from",
                         remedy="run `pnk sync` first")
    lines = [HEADER, "questions:"]
    for number, (path, query) in enumerate(drafts, start=1):
        lines += [f"  - id: draft-{number:03d}  # drafted from a heading: rewrite as a real question",
                  "    kind: simple-lookup",
                  f"    query: {json.dumps(query, ensure_ascii=False)}",
                  f"    expect: [{json.dumps(path, ensure_ascii=False)}]"]
    for number, query in enumerate(NO_ANSWER_DRAFTS, start=1):
        lines += [f"  - id: none-{number:03d}  # replace with a question this KB cannot answer",
                  "    kind: no-answer",
                  f"    query: {json.dumps(query)}",
                  "    expect: []"]
    target.parent.mkdir(parents=True, exist_ok=True)
    from pinakes.atomic import atomic_write_bytes

    atomic_write_bytes(target, ("\n".join(lines) + "\n").encode("utf-8"))
    return target, len(drafts)


def _drafts(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(document path, query) for up to MAX_DRAFTED documents spread over the KB: each document's
    most specific heading below its first one (a heading is more findable than a title, and a title
    more than nothing); documents with neither are skipped."""
    documents = conn.execute(
        "SELECT d.id, d.path, d.title FROM documents d WHERE d.state = 'active' ORDER BY d.path").fetchall()
    step = max(1, len(documents) // MAX_DRAFTED)
    drafts: list[tuple[str, str]] = []
    for doc_id, path, title in documents[::step][:MAX_DRAFTED]:
        headings = [json.loads(row[0]) for row in conn.execute(
            "SELECT heading_path FROM chunks WHERE doc_id = ? AND heading_path IS NOT NULL ORDER BY ordinal",
            (doc_id,))]
        deepest = max(headings[1:] or headings, key=len, default=None)
        query = _clean(deepest[-1]) if deepest else _clean(title or "")
        if query:
            drafts.append((path, query))
    return drafts


def _clean(heading: str) -> str:
    return " ".join(heading.lstrip("#").split()).strip()
