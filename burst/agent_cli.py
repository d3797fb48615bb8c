"""`burst agent` (on each on-prem GPU node) and `burst agents serve` (the controller's agent link, standalone).

The commands sit above the runtime, which they read node groups from; `burst.agent` itself never imports it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

DEFAULT_TOKENS_FILE = Path("agent-tokens.yaml")


def _duration(value: str, hint: str) -> float:
    from policies import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT, e.g. 127.0.0.1:8470", param_hint="--listen")
    return host, int(port)


@click.command("agent")
@click.option("--controller", required=True, help="URL of the controller's agent link, e.g. http://10.0.0.5:8470.")
@click.option("--node-id", default=None, help="This node's id as the controller knows it (default: the host name).")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="File holding this node's agent token (one line; keep it readable by the agent's user only).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="burst.yaml whose provider: onprem groups give the static inventory used without NVML.")
@click.option("--group", "group_id", default=None, help="This node's group in --config (default: the only onprem group).")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("burst-agent"),
              show_default=True, help="Where job directories, logs and checkpoint files live.")
@click.option("--interval", default="5s", show_default=True, help="Time between heartbeats, e.g. 5s.")
@click.option("--ticks", type=click.IntRange(min=1), default=None, help="Stop after this many heartbeats (default: run until SIGTERM).")
def agent_cmd(controller: str, node_id: str | None, token_file: Path, config_path: Path | None, group_id: str | None,
              workdir: Path, interval: str, ticks: int | None) -> None:
    """Run the node agent: discover GPUs, heartbeat them with their health, run assigned jobs on their GPUs.

    Jobs run as process groups with CUDA_VISIBLE_DEVICES set to the bound GPU
    UUIDs; a checkpoint request sends the job's signal (default SIGUSR1) and
    waits for its ack file, then SIGTERM at the deadline; an eviction kills the
    whole process group. SIGTERM or Ctrl-C stops the agent and its jobs.

    Exits 1 at once when the controller refuses the token or the node (HTTP
    401/403); with --ticks N, also when none of the N heartbeats got through.
    An unreachable controller is otherwise retried every --interval.
    """
    import socket

    from burst.agent.channel import GpuSummary
    from burst.agent.node import NodeAgent
    from burst.agent.runner import JobRunner
    from providers.onprem.discovery import discover

    try:
        token = token_file.read_text().strip()
    except OSError as exc:
        raise click.ClickException(f"--token-file {token_file}: {exc.strerror or exc}") from None
    if not token:
        raise click.ClickException(f"--token-file {token_file} is empty")
    every = _duration(interval, "--interval")
    from burst.runtime import ConfigError, config_node_groups

    try:
        groups = config_node_groups(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    name = node_id or socket.gethostname()

    def inventory() -> tuple[str, list[GpuSummary]]:
        found = discover(name, groups=groups, group_id=group_id)
        gpus = found.node.gpus if found.node is not None else ()
        return found.status, [
            GpuSummary(uuid=g.uuid, index=g.index, model=g.model, memory_mib=g.memory_mib, health=g.health.value,
                       health_reason=g.health_reason)
            for g in gpus
        ]

    status, _ = inventory()
    click.echo(f"burst agent {name}: {status}")
    agent = NodeAgent(controller, name, token, JobRunner(workdir), inventory)
    if ticks is not None:
        delivered = 0
        try:
            for _ in range(ticks):
                result = agent.tick()
                click.echo(f"tick: {'reported' if result.delivered else result.error}; "
                           f"{len(result.work.assignments)} start(s), {len(result.work.checkpoints)} checkpoint(s), "
                           f"{len(result.work.evictions)} eviction(s)")
                if result.refused is not None:
                    _refused(result.refused, controller)
                delivered += result.delivered
        finally:
            agent.runner.stop_all()
        if not delivered:
            raise click.ClickException(f"no heartbeat reached {controller} in {ticks} tick(s)")
        return
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    refused = agent.run(every, stop)
    if refused is not None and refused.refused is not None:
        _refused(refused.refused, controller)


def _refused(status: int, controller: str) -> None:
    """Stop with exit 1: the controller refuses this node's token (401) or this node (403); no retry mends that."""
    what = "this node's token" if status == 401 else "this node"
    raise click.ClickException(f"{controller} refused {what} (HTTP {status}): check --token-file and --node-id "
                               "against the controller's agent tokens")


@click.group("agents")
def agents_group() -> None:
    """The controller's side of the node agents: serve their link until the daemon's API mounts it."""


@agents_group.command("serve")
@click.option("--listen", default="127.0.0.1:8470", show_default=True, help="HOST:PORT to listen on.")
@click.option("--tokens", "tokens_path", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_TOKENS_FILE,
              show_default=True, help="YAML mapping of node id to agent token.")
@click.option("--node", "nodes", multiple=True,
              help="A node id to generate a token for if it has none (repeatable); the file is written 0600.")
def agents_serve(listen: str, tokens_path: Path, nodes: tuple[str, ...]) -> None:
    """Serve the agent link (heartbeats, work, checkpoint acks) with per-node bearer tokens."""
    import uvicorn

    from burst.agent.hub import AgentHub
    from burst.agent.router import agent_app, load_tokens

    host, port = _listen(listen)
    try:
        tokens = load_tokens(tokens_path, create_for=nodes)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if not tokens:
        raise click.ClickException(f"{tokens_path}: no agent tokens; add --node NODE_ID to generate one")
    click.echo(f"agent link on http://{host}:{port} for {len(tokens)} node(s); tokens in {tokens_path}")
    uvicorn.run(agent_app(AgentHub(tokens)), host=host, port=port, log_level="info")
