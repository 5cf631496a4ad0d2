"""MkDocs hook (mkdocs.yml `hooks:`): a page's line ``<!-- registry: KIND -->`` becomes
the registry's table of KIND (`lipnorm.registry.catalogue`), so the site lists every
registered architecture, normalisation and dataset as the registry holds them. On GitHub
the line is an HTML comment and shows nothing."""

from __future__ import annotations

import re

MARKER = re.compile(r"^<!-- registry: ([a-z]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, **kwargs) -> str:
    from lipnorm.registry.catalogue import catalogue

    return MARKER.sub(lambda match: catalogue(match.group(1)), markdown)
