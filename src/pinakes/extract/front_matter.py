"""A Markdown document's YAML front matter: metadata, not text.

The chunker leaves the block out of the indexed passages (`pinakes.chunking.front_matter_span`), so
its raw YAML never becomes a search hit; its `title:` names the document when the sidecar gives none.
Only the title is read: the sidecar stays the one place Pinakes takes tags and links from.
"""

from __future__ import annotations

from pinakes.chunking import front_matter_span

# A title longer than this is not a title (and never reaches a one-line search hit whole).
MAX_TITLE_CHARS = 300


def front_matter_title(text: str) -> str | None:
    """The string `title` of the front matter, or None (none, not YAML, not a mapping, not a string)."""
    span = front_matter_span(text)
    if span is None:
        return None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe", pure=True).load(text[span[0]:span[1]])
    except (YAMLError, ValueError):
        return None
    title = data.get("title") if isinstance(data, dict) else None
    if not isinstance(title, str):
        return None
    title = " ".join(title.split())
    return title[:MAX_TITLE_CHARS] or None
