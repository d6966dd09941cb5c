"""The original TypeScript harness's session logs: read, continue, convert (see docs/session.md).

`Session.open` recognises them by their header; `convert_log` moves a log between the formats.
Compressed logs need the `zstandard` package (`pip install 'dshkit[dsh]'`).
"""

from __future__ import annotations
