"""Record a real measurement of the paid Claude-vision extractor (docs/GUIDE.md, "Paid PDF extraction").

For a user with an Anthropic API key: it extracts the PDFs given, for real, through the same
accountant and extractor `pnk sync --extract=claude-vision` uses, inside a scratch KB (so your own
KB's ledger and cache are untouched), and records per request what was reserved and what was
billed, the over-reservation ratio, the vendor's token count of the first request, and each
document's completeness audit:

    export PINAKES_ANTHROPIC_API_KEY=...            # or --api-key-file PATH
    python bench/measure_claude_vision.py scan.pdf [more.pdf ...] [--cap-eur 1.00]

It spends real money, at most --cap-eur (the scratch KB's per_operation_eur and daily_eur), and asks
before the first call when the worst case is above €0.10 (no terminal: it aborts). It writes
bench/results/claude_vision_<date>.json and prints a summary. Nothing here runs in the test suite:
the tests use the local stand-in (tests/fake_anthropic.py) and never touch the network.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pinakes.budget import Accountant

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("pdfs", nargs="+", type=Path)
    parser.add_argument("--cap-eur", default="1.00", help="the most this run may spend (EUR)")
    parser.add_argument("--api-key-file", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="where to write the JSON record")
    args = parser.parse_args(argv)

    from pinakes.budget import Accountant
    from pinakes.extract import claude_vision as cv
    from pinakes.extract.audit import audit_pages
    from pinakes.extract.floors import load_floors
    from pinakes.extract.pdf import extract as free_extract
    from pinakes.init import init_kb
    from pinakes.manifest import load_manifest
    from pinakes.paid import read_api_key

    key = read_api_key(args.api_key_file)  # refuses, naming the variable, when there is none
    client = cv.make_client(key)
    cap = Decimal(args.cap_eur)
    scratch = Path(tempfile.mkdtemp(prefix="pnk-measure-"))
    try:
        init_kb(scratch / "kb", name="measurement")
        manifest_path = scratch / "kb" / "pinakes.toml"
        text = manifest_path.read_text(encoding="utf-8")
        for name, value in (("confirm_above_eur", "0.10"), ("per_operation_eur", str(cap)),
                            ("daily_eur", str(cap)), ("monthly_eur", str(max(cap, Decimal("20.00"))))):
            text = _set(text, name, f'"{value}"')
        manifest_path.write_text(text, encoding="utf-8")
        manifest = load_manifest(manifest_path)
        accountant = Accountant.open(scratch / "kb", manifest.budget, kb_id=manifest.kb.id)
        pages = {path: cv.page_count(path) for path in args.pdfs}
        shapes = [shape for path, count in pages.items() for shape in cv.document_shapes(count, str(path))]
        counted, counted_pages = cv.count_first_slice(args.pdfs[0], client=client)
        plan = accountant.plan(operation="extract", calls=shapes, interactive=sys.stdin.isatty())
        documents: list[dict[str, Any]] = []
        for path in args.pdfs[: plan.admitted_units]:
            result = cv.extract_paid(path, client=client, plan=plan, unit=str(path))
            native = free_extract(path, "pdf")
            native_pages = [native.text[a:b] for a, b in native.pages or ()]
            audit = audit_pages(native_pages, result.page_texts, text_yield_floor=load_floors().text_yield_floor)
            documents.append({"path": str(path), "pages": pages[path], "call_ids": list(result.call_ids),
                              "audit": audit.to_dict(), "audit_lines": audit.lines(path.name)})
        records = _calls(accountant, plan.call_ids)
        reserved = sum((Decimal(str(r["reserved_eur"])) for r in records), Decimal(0))
        billed = sum((Decimal(str(r["billed_eur"])) for r in records if r["billed_eur"] is not None), Decimal(0))
        spec = cv._SPEC  # pyright: ignore[reportPrivateUsage]  # the request shape it sends: no public name
        record: dict[str, Any] = {
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "model": cv.MODEL,
            "request_shape": dict(spec.constants), "fingerprint": spec.fingerprint(),
            "bounds": {"image_tokens_per_page": cv.IMAGE_TOKENS_BOUND,
                       "request_overhead_tokens": cv.REQUEST_OVERHEAD_TOKENS,
                       "output_tokens_per_page": cv.OUTPUT_TOKENS_PER_PAGE},
            "first_request_counted": {"input_tokens": counted, "pages": counted_pages},
            "operation_id": plan.operation_id, "calls": records, "documents": documents,
            "reserved_eur": str(reserved), "billed_eur": str(billed),
            "over_reservation": str((reserved / billed).quantize(Decimal("0.01"))) if billed else None,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = args.out or RESULTS / f"claude_vision_{datetime.now(UTC):%Y%m%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"{len(record['calls'])} request(s): reserved €{reserved}, billed €{billed}, over-reservation "
          f"{record['over_reservation']}x; first request counted {counted:,} input tokens for {counted_pages} "
          f"page(s) (bound {cv.REQUEST_OVERHEAD_TOKENS + cv.IMAGE_TOKENS_BOUND * counted_pages:,})")
    for document in record["documents"]:
        print("\n".join(document["audit_lines"]))
    print(f"written to {out}")
    return 0


def _set(text: str, key: str, value: str) -> str:
    import re

    return re.sub(rf"(?m)^{key}\s*=.*$", f"{key} = {value}", text)


def _calls(accountant: Accountant, call_ids: list[str]) -> list[dict[str, object]]:
    """Per call: reserved and billed EUR and tokens, read back from the scratch ledger."""
    calls = accountant.calls()
    rows: list[dict[str, object]] = []
    for call_id in call_ids:
        call = calls.get(call_id)
        if call is None:
            continue
        rows.append({"call_id": call_id, **{k: (str(v) if isinstance(v, Decimal) else v)
                                            for k, v in _fields(call).items()}})
    return rows


def _fields(call: object) -> dict[str, object]:
    """A ledger CallRecord (pinakes.budget.windows) as plain values."""
    outcome = getattr(call, "outcome", None)
    billed = getattr(call, "eur", None) if outcome is not None else None
    return {"reserved_eur": getattr(call, "reserved_eur", None), "billed_eur": billed,
            "status": getattr(call, "status", None),
            "input_tokens": getattr(outcome, "input_tokens", None),
            "output_tokens": getattr(outcome, "output_tokens", None)}


if __name__ == "__main__":
    from pinakes.errors import PinakesError

    try:
        sys.exit(main())
    except PinakesError as error:  # a refusal (no key, a cap, no terminal) is an answer, not a crash
        print(f"measure_claude_vision: {error.render()}", file=sys.stderr)
        sys.exit(error.exit_code)
