"""A client querying a live server in a loop while syncs and a rebuild run (spec §6.5).

No tool call may fail while the index is being written or swapped, and the first request after a
sync or rebuild returns must already answer from the new index: the server stat()s the index per
request, so its stale-read window is one request, never the session.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tests.test_serve_helpers import LiveServer, doc_ids, live_server, make_kb, offline_env, sync_kb

WORDS = ("quokka", "numbat", "bilby")


def test_queries_never_fail_and_switch_to_the_new_index_within_one_request(tmp_path: Path) -> None:
    documents = {f"d{n}.md": f"# Doc {n}\n\n" + f"Paragraph {n} about wings and lift. " * 40 for n in range(30)}
    kb = make_kb(tmp_path / "kb", "busy", documents)
    sync_kb(kb)
    stable_id = doc_ids(kb)["docs/d0.md"]
    failures: list[str] = []
    calls = [0]
    stop = threading.Event()

    def query_in_a_loop(server: LiveServer) -> None:
        while not stop.is_set():
            for tool, arguments in (("pinakes_search", {"query": "wings lift", "mode": "bm25"}),
                                    ("pinakes_get", {"doc_id": stable_id, "char_start": 0, "char_end": 40}),
                                    ("pinakes_list_kbs", {})):
                reply = server.call(tool, arguments)
                calls[0] += 1
                if reply.is_error:
                    failures.append(f"{tool}: {reply.payload}")

    with live_server(["--kb", str(kb)], offline_env(tmp_path)) as server:
        loop = threading.Thread(target=query_in_a_loop, args=(server,))
        loop.start()
        try:
            for round_, word in enumerate(WORDS):
                for n in range(0, 30, 4):  # edits as well as additions, so chunks are rewritten
                    (kb / "docs" / f"d{n + 1}.md").write_text(f"# Doc {n}\n\nround {round_} " * 30, encoding="utf-8")
                (kb / "docs" / f"{word}.md").write_text(f"# {word}\n\nA {word} was seen.\n", encoding="utf-8")
                sync_kb(kb)
                assert found(server, word), f"the first search after sync {round_} did not see {word}"
            (kb / "docs" / "wombat.md").write_text("# Wombat\n\nA wombat digs.\n", encoding="utf-8")
            sync_kb(kb, rebuild=True)
            assert found(server, "wombat"), "the first search after the rebuild did not see the new index"
            listed = server.call("pinakes_list_kbs").payload["kbs"][0]
            assert listed["documents"] == 30 + len(WORDS) + 1
        finally:
            stop.set()
            loop.join(timeout=60)
    assert failures == []
    assert calls[0] > 30, f"the loop only made {calls[0]} calls; it did not overlap the syncs"
    assert doc_ids(kb)["docs/d0.md"] == stable_id  # the rebuild kept the document's identity


def found(server: LiveServer, word: str) -> bool:
    reply = server.call("pinakes_search", {"query": word, "mode": "bm25"})
    assert not reply.is_error, reply.payload
    return [passage["path"] for passage in reply.payload["passages"]] == [f"docs/{word}.md"]
