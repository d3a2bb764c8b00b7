"""The sync's core: the typed stages (walk, pair, extract, chunk, embed, graph, reverse-scan), the
values they hand each other (`types.py`) and the run-wide context (`run.py`). doit never appears
here: `pinakes.rules` adapts these stages into tasks."""
