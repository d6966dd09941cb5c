"""The self-contained viewer page: one HTML file holding the page's CSS, its script and the log's data.

Nothing is fetched when the page opens (no network, no CDN): the stylesheet and the script are
package data inlined here, and the data is one JSON document in a ``<script type="application/json">``
element, which the script parses and renders lazily (only the rows in view exist in the DOM).
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from typing import Any

ASSETS = ("viewer.css", "viewer.js")


def asset_text(name: str) -> str:
    """The text of one of the page's assets (`ASSETS`), shipped as package data."""
    return files("dshkit.viewer").joinpath("assets", name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """`data` as JSON that cannot end the ``<script>`` element holding it.

    Every ``<`` becomes ``\\u003c`` (only strings can hold one, where JSON.parse reads it back), so
    no ``</script>`` or ``<!--`` in a message can close the element or change how it is parsed.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


def render_page(data: Any, *, title: str, live: bool = False) -> str:
    """The whole HTML page for `data` (a `page_data` document).

    Its content security policy lets it load nothing, except, for a `live` page served by
    `dshkit log serve`, its own server's newer data.
    """
    connect = "; connect-src 'self'" if live else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        f"style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:{connect}\">"
        f"<title>{html.escape(title)}</title>"
        f"<style>{asset_text('viewer.css')}</style></head>\n"
        '<body><noscript>This page shows a dshkit session log; it needs JavaScript.</noscript>\n'
        f'<script id="dshkit-data" type="application/json">{embed_json(data)}</script>\n'
        f"<script>{asset_text('viewer.js')}</script>\n"
        "</body></html>\n"
    )
