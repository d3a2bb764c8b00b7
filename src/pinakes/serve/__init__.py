"""The MCP server (`pnk serve`): read-only tools over the KBs named at startup (spec §4.3, §4.7, §6.5).

- `config`    which KBs are served, validated at startup (`--kb`, `--config`, or the KB at hand)
- `boundary`  every tool argument checked before use: no paths, URIs, globs, look-alikes
- `tools`     pinakes_search / pinakes_get / pinakes_list_kbs, transport-independent
- `documents` pinakes_get's text: the hash-verified source file or the extraction cache entry
- `reader`    a read-only index handle reopened whenever a sync or rebuild changed the file
- `evidence`  document text returned as data inside a delimited block
- `bounds`    the server-side caps on one response, and how a cut is reported
- `server`    the MCP wiring (stdio, or streamable HTTP on 127.0.0.1)

Importing this package imports nothing heavy; `server` imports the MCP SDK.
"""
