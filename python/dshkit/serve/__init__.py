"""Agents as a service: an ASGI app speaking AG-UI over SSE, turns run by workers on DBOS.

`create_app(agents={"name": factory}, store=..., auth=...)` returns a Starlette app; `run_worker`
starts a worker without HTTP. `pip install 'dshkit[serve]'`. See docs/serve.md.
"""

from __future__ import annotations

from dshkit.serve.app import create_app, run_worker
from dshkit.serve.auth import bearer_tokens
from dshkit.serve.limits import Limits
from dshkit.serve.worker import AgentFactory

__all__ = ["AgentFactory", "Limits", "bearer_tokens", "create_app", "run_worker"]
