"""`pnk ask --deep`: a bounded, budgeted, cited answer loop for the CLI and cron (spec §4.2, §4.3, §5).

One of the two things allowed to spend (spec §1). It is a CLI surface only: no `pinakes_*` tool
runs it (a server-side loop would spend the operator's money on the caller's question), and
`tests/test_serve_audit.py` asserts `pnk serve`'s process never loads this package, with a planted
import as the negative control. Of its modules only `calls.py` loads the paid client and is on
`.paid-path-allowlist`; importing this package imports nothing.

    loop.py       ask_deep(): the free search, the branch, the plan, the rounds
    shapes.py     what one call can cost at most; what a run reserves; the branch a confidence takes
    prompts.py    the two requests, their schemas, the evidence block and its bounds
    memory.py     the cursor and the re-folded memory
    grounding.py  citations resolved by the code, "answered" computed, markers defused
    calls.py      one budgeted request through `pinakes.paid` (the allowlisted module)
    result.py     DeepResult: the answer, its citations, the rounds, what ended it, the cost
"""
