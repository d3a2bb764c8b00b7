"""The sync's core: the typed stages (walk's plan, pair, graph, ...) and the state a run shares
between them. doit never appears here: `pinakes.rules` adapts these stages into tasks."""
