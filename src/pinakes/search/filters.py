"""Moved to `pinakes.lexical.filters` (#27); this shim lasts until the graph stage imports it there."""

from pinakes.lexical.filters import document_tags as document_tags
