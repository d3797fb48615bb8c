"""The agent link over HTTP: a FastAPI router over an `AgentHub`, mountable in the daemon's API or served alone.

Endpoints (every one needs `Authorization: Bearer <the node's token>`, declared
in the OpenAPI schema as the `bearerAuth` scheme, as in the daemon's API):

* `POST /agent/v1/nodes/{node_id}/report`: a `Report` (heartbeat, GPUs, job statuses, acks).
* `GET /agent/v1/nodes/{node_id}/work`: the `Work` queued for the node (drained).

A missing or wrong token is 401; a token of another node is 403; a report whose
body names another node is 422. Nothing is recorded for a refused call.
"""

import secrets
from pathlib import Path
from typing import Annotated

import yaml
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from burst.agent.channel import Report, Work
from burst.agent.hub import AgentHub

PREFIX = "/agent/v1"
DEFAULT_LISTEN = "127.0.0.1:8470"
BEARER = HTTPBearer(scheme_name="bearerAuth", auto_error=False,
                    description="The node's agent token (`api.agent_tokens`), as `Authorization: Bearer TOKEN`.")


def agent_router(hub: AgentHub) -> APIRouter:
    """The router the daemon's API mounts (and `burst agents serve` serves alone)."""
    router = APIRouter(prefix=PREFIX, tags=["agents"])

    def authorise(node_id: str,
                  credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)] = None) -> str:
        token = credentials.credentials if credentials is not None else ""
        if not token:
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        if not hub.knows(node_id):
            raise HTTPException(403, f"node {node_id} has no agent token configured")
        if not hub.authorised(node_id, token):
            raise HTTPException(401, "wrong token for this node", headers={"WWW-Authenticate": "Bearer"})
        return node_id

    @router.post("/nodes/{node_id}/report", status_code=204, summary="Heartbeat: GPUs, job statuses, acks")
    def report(body: Report, node_id: Annotated[str, Depends(authorise)]) -> Response:
        if body.node_id != node_id:
            raise HTTPException(422, f"report is for node {body.node_id}, posted as {node_id}")
        hub.record(body)
        return Response(status_code=204)

    @router.get("/nodes/{node_id}/work", summary="Work queued for the node (drained)")
    def work(node_id: Annotated[str, Depends(authorise)]) -> Work:
        return hub.take_work(node_id)

    return router


def agent_app(hub: AgentHub) -> FastAPI:
    """A FastAPI app serving only the agent router (until the daemon's API mounts it)."""
    app = FastAPI(title="burst agent link", version="1")
    app.include_router(agent_router(hub))
    return app


def load_tokens(path: Path, *, create_for: tuple[str, ...] = ()) -> dict[str, str]:
    """Per-node agent tokens from a YAML mapping `node_id: token`; tokens for `create_for` are generated if missing.

    A generated file is written readable by its owner only (0600).
    """
    tokens: dict[str, str] = {}
    if path.exists():
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()):
            raise ValueError(f"{path}: expected a mapping of node id to token")
        tokens = dict(loaded)
    missing = [n for n in create_for if n not in tokens]
    if missing:
        tokens.update({n: secrets.token_urlsafe(32) for n in missing})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_text(yaml.safe_dump(tokens, sort_keys=True))
    return tokens
