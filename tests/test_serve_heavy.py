"""`pnk serve` with the real packaged embedding model (heavy: loads the model in two processes).

The fast tests index with the fake embedder and search in bm25 mode; this one indexes with the
model the manifest names, exactly as `pnk sync` does, and searches hybrid through the server, so
the vector half of the pipeline and the server's own lazily loaded embedder are exercised too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.test_serve_helpers import live_server, make_kb, offline_env

pytestmark = pytest.mark.heavy


def test_hybrid_search_and_get_with_the_real_model(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", "real", {
        "aviation.md": "# Aviation\n\nAn aircraft wing produces lift when air flows over its curved surface.\n",
        "cooking.md": "# Cooking\n\nSimmer the tomato sauce slowly and season it with basil.\n",
        "sailing.md": "# Sailing\n\nA sailboat tacks into the wind by turning its bow through the breeze.\n",
    })
    report = run_sync(kb, SyncOptions())
    assert report.ok, report
    with live_server(["--kb", str(kb)], offline_env(tmp_path)) as server:
        reply = server.call("pinakes_search", {"query": "how do aeroplanes stay up in the air", "k": 2})
        assert not reply.is_error, reply.payload
        top = reply.payload["passages"][0]
        assert top["path"] == "docs/aviation.md"
        assert top["scores"]["vector_rank"] is not None  # the vector retriever ran in the server
        assert reply.payload["mode"] == "hybrid"
        got = server.call("pinakes_get", {"doc_id": top["doc_id"], "char_start": top["char_start"],
                                          "char_end": top["char_end"]})
        assert "lift" in got.payload["evidence"]
