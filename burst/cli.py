"""The `burst` command line."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

import burst
from burst.agent_cli import agent_cmd, agents_group
from burst.cli_common import CONFIG_OPTION, STATE_OPTION, load_config_option, parse_at, parse_duration_option
from burst.cli_common import store_path as _store_path
from burst.config_cli import config_group, init_cmd, policy_group
from burst.db_cli import db_group
from burst.gpus_cli import gpus_cmd
from burst.model import Forecast, Plan, SteadyAdvice
from burst.nodegroups_cli import nodegroups_group
from burst.projection.cli import cost_cmd, usage_cmd
from burst.services_cli import services_cmd
from burst.simulate_cli import simulate_cmd
from burst.store_pg import location_exists, shown
from burst.tables import print_table

if TYPE_CHECKING:
    from burst.api.server import ApiServer
    from burst.model import Job, Policy
    from burst.runtime import Runtime
    from burst.state import Store
    from forecasting.models import DemandSeries
    from forecasting.select import Selection


class _Burst(click.Group):
    """The command group: an optional integration missing (`burst.extras.MissingExtra`) is one line, exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        from burst.extras import MissingExtra

        try:
            return super().invoke(ctx)
        except MissingExtra as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Burst)
@click.version_option(burst.__version__, prog_name="burst")
def main() -> None:
    """burst: hybrid-cloud elastic burst controller for GPU fleets."""


def _open_runtime(config_path: Path | None, state: Path | str | None, *, ephemeral: bool = False, **kw: object) -> Runtime:
    """Build the runtime for a command, turning config errors into one clear message each.

    With neither config nor state it is the quickstart on its per-user state, unless `ephemeral`.
    """
    from burst.catalog import UnknownInstanceType
    from burst.quickstart import state_path_for
    from burst.runtime import ConfigError, build_runtime, load_run_config
    from burst.state import MissingStore, SchemaTooNew, SchemaTooOld
    from burst.store_files import DamagedStore
    from burst.store_lock import StoreHeld
    from policies import PolicyValidationError

    try:
        config = load_run_config(config_path)
        if config_path is None and not ephemeral:
            state = state_path_for(None, state)
        return build_runtime(config, state_path=state, ephemeral=ephemeral,
                             config_file=config_path, **kw)  # type: ignore[arg-type]
    except PolicyValidationError as exc:
        raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None
    except (ConfigError, UnknownInstanceType, DamagedStore, StoreHeld, MissingStore, SchemaTooOld,
            SchemaTooNew) as exc:
        raise click.ClickException(str(exc)) from None


def _open_store(path: Path | str, *, read_only: bool = True) -> Store:
    """The store at `path` for a command (`burst.state_option.open_for_command`): read-only unless it writes."""
    from burst.state_option import open_for_command

    return open_for_command(path, read_only=read_only)




@main.command("run")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--duration", default=None,
              help="Stop after this long (e.g. 12h); simulated time on a sim clock. Default: run until SIGTERM.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line per event (start, action, gc, status, stop).")
@click.option("--quiet", is_flag=True, help="Print only the final summary.")
@click.option("--api", "api_listen", default=None,
              help="Serve the HTTP API on HOST:PORT, e.g. 0.0.0.0:8460, or on 127.0.0.1 with a bare PORT, e.g. 8460 "
                   "(default: the config's api.listen; none).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Log lines on stderr: text, or one JSON object per line with plan and action ids.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="warning",
              show_default=True, help="Least severe log level written.")
@click.option("--fresh", is_flag=True,
              help="Start over: move the state file aside (<state>.damaged-<time>) and begin a new one.")
def run_cmd(
    config_path: Path | None, state: Path | str | None, duration: str | None, as_json: bool, quiet: bool, api_listen: str | None,
    log_format: str, log_level: str, fresh: bool,
) -> None:
    """Run the controller: observe, plan, act and record every loop_interval, printing each decision.

    With no --config this is the embedded quickstart: a simulated on-prem rack and
    two simulated cloud groups (on-demand and spot), three tenants and a seeded
    synthetic workload, on an accelerated simulated clock. Its state is kept in
    the per-user state directory ($XDG_STATE_HOME/burst/quickstart/ on Linux),
    where `burst jobs`, `submit`, `explain`, `plan`, `usage` and `cost` without
    --config or --state read it; the next `burst run` continues from it, and
    `burst run --fresh` starts over. SIGTERM or Ctrl-C
    finishes the current tick, gives up the leader lease and stops. SIGHUP, or
    a change to a policy file, reloads the tenant policies after the current
    tick; a policy set with an error is refused and the last good one stays in
    force. An empty, truncated or corrupt state file is refused with one line
    saying how to recover (its last backup, or --fresh).
    """
    import signal

    from burst.logs import configure_logging
    from burst.run_log import TickPrinter

    configure_logging(log_format, log_level)

    seconds = parse_duration_option(duration, "--duration") if duration else None
    if config_path is None and state is None:
        _announce_quickstart_state(fresh)
    runtime = _open_runtime(config_path, state, fresh=fresh) if fresh else _open_runtime(config_path, state)
    api = None
    try:
        listen = api_listen or runtime.config.api.listen
        if listen is not None:
            api = _start_api(runtime, listen)
            click.echo(f"API on {api.url} (OpenAPI at {api.url}/docs); bearer tokens in {api.tokens_dir}", err=True)
        start = runtime.now()
        until = start + timedelta(seconds=seconds) if seconds is not None else None
        printer = TickPrinter(runtime, as_json=as_json, quiet=quiet, echo=click.echo)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: runtime.stop.set())
        signal.signal(signal.SIGHUP, lambda *_: runtime.request_reload())
        printer.banner(until)
        stats = runtime.run(until=until, on_tick=printer.tick)
        runtime.release_lease()  # the end of --duration is a clean stop too
        printer.summary(stats)
        if stats.gave_up is not None:
            raise click.ClickException(stats.gave_up)
    finally:
        if api is not None:
            api.stop()
        runtime.close()


def _announce_quickstart_state(fresh: bool) -> None:
    """Say where the quickstart's state is kept, and whether this run continues it (on stderr: stdout is the run's)."""
    from burst.quickstart import quickstart_state_path

    path = quickstart_state_path()
    if fresh and path.exists():
        click.echo(f"burst: starting the quickstart over (its state moves aside to {path.name}.damaged-TIME)", err=True)
    elif path.exists():
        click.echo(f"burst: continuing the quickstart from {path} (burst run --fresh starts over)", err=True)
    click.echo(f"burst: quickstart state in {path}: burst jobs, explain, plan, usage and cost read it", err=True)


def _start_api(runtime: Runtime, listen: str) -> ApiServer:
    """Start the API beside the loop; an ephemeral run keeps its tokens in its temporary directory."""
    from burst.api.server import ApiStartError, start_api
    from burst.quickstart import quickstart_state_path
    from burst.runtime import quickstart_config_path

    tokens_dir = runtime.config.tokens_path()
    if runtime.temp_dir is not None:
        tokens_dir = Path(runtime.temp_dir.name) / "tokens"
    elif tokens_dir.is_relative_to(quickstart_config_path().parent):
        tokens_dir = quickstart_state_path().parent / "tokens" if isinstance(runtime.state_path, str) \
            else runtime.state_path.parent / "tokens"  # never write into the installed package
    try:
        return start_api(runtime, listen, tokens_dir=tokens_dir)
    except ApiStartError as exc:
        raise click.ClickException(str(exc)) from None


@main.command("plan")
@click.option("--snapshot", "snapshot_path", type=click.Path(exists=True, path_type=Path), default=None,
              help="Snapshot JSON (groups, nodes, jobs, targets) to plan from instead of live state.")
@click.option("--policies", "policies_dir", type=click.Path(path_type=Path), default=None,
              help="With --snapshot: directory of tenant policy files (default: every tenant gets the default policy).")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--at", "at", default=None,
              help="Plan as of this ISO instant. With --snapshot: the planning instant; on a sim-clock config "
                   "(the quickstart): the config is run from its sim_start up to this instant first.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
def plan_cmd(
    snapshot_path: Path | None,
    policies_dir: Path | None,
    config_path: Path | None,
    state: Path | str | None,
    at: str | None,
    as_json: bool,
) -> None:
    """One dry-run plan, printed diff-style with each action's reason; nothing is changed.

    From a --snapshot file, or from live observed state of --config (default: the
    embedded quickstart's saved state, or its start when it has none; with --at,
    a fresh quickstart run up to that instant). The table shows each action's
    count under `nodes` (actions on groups) or `GPUs` (actions on jobs). The
    JSON form is an object with `id`, `at`, `actions` (each with `id`, `kind`,
    `target`, `count` and `count_unit` (`nodes` or `gpus`) where it applies,
    `size`, `step` and `reason`), `holds` and `steady_tier`.
    """
    when = parse_at(at) if at else None
    if snapshot_path is not None:
        result = _plan_snapshot(snapshot_path, policies_dir, when or datetime.now(UTC))
    else:
        if policies_dir is not None:
            raise click.UsageError("--policies goes with --snapshot; a config names its own policies_dir")
        result = _plan_live(config_path, state, when)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    print_plan(result)


def _plan_snapshot(snapshot_path: Path, policies_dir: Path | None, now: datetime) -> Plan:
    from burst.bounds import job_problem
    from burst.catalog import Catalog
    from burst.codec import CodecError, snapshot_from_json
    from burst.planner import PlanIds, plan
    from policies import PolicyValidationError, load_policy_dir

    try:
        snap = snapshot_from_json(json.loads(snapshot_path.read_text()))
    except (CodecError, ValueError, RecursionError) as exc:
        raise click.ClickException(f"{snapshot_path}: {str(exc)[:300]}") from None
    for job in snap.jobs:  # the bounds every other edge applies: nothing out of them reaches the planner
        problem = job_problem(job)
        if problem is not None:
            raise click.ClickException(f"{snapshot_path}: job {job.id[:63]}: {problem}")
    pols = {}
    if policies_dir is not None:
        try:
            pols = load_policy_dir(policies_dir)
        except PolicyValidationError as exc:
            raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None
    try:
        return plan(snap, [], pols, Catalog.load(), now=now, ids=PlanIds(f"plan-{now:%Y%m%dT%H%M%S}"))
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None


def _plan_live(config_path: Path | None, state: Path | str | None, when: datetime | None) -> Plan:
    sim = load_config_option(config_path).clock == "sim" if config_path is not None else True
    if when is not None and not sim:
        raise click.UsageError("--at needs --snapshot or a sim-clock config (clock: sim)")
    # A dry run writes nothing: it reads the saved state (read-only), or, with --at or before any state exists,
    # runs on a temporary store of its own.
    ephemeral = when is not None or not location_exists(_store_path(config_path, state))
    runtime = _open_runtime(config_path, state, ephemeral=ephemeral, read_only=not ephemeral)
    try:
        if when is not None:
            if when < runtime.now():
                raise click.UsageError(
                    f"--at {when.isoformat()} is before the simulation's start {runtime.now().isoformat()}"
                )
            runtime.run(until=when, realtime=False)
            assert runtime.sim_clock is not None
            runtime.sim_clock.advance_to(when)
        result = runtime.controller.preview()
        for line in runtime.price_drift():
            click.echo(f"warning: {line}", err=True)
        return result
    finally:
        runtime.close()




def _submission_time(config_path: Path | None, path: Path | str) -> datetime:
    """The controller's "now" for a new job: the sim clock's last tick on a sim config, else wall time."""
    from burst.state import MetaKey

    config = load_config_option(config_path)
    if config.clock != "sim":
        return datetime.now(UTC)
    last = None
    if location_exists(path):
        with _open_store(path, read_only=False) as store:  # `burst submit` writes this store next
            last = store.get_meta(MetaKey.LAST_TICK)
    if last is not None:
        return datetime.fromisoformat(last)
    return config.sim_start or datetime.now(UTC)


def _check_tenant(config_path: Path | None, tenant: str) -> Policy:
    """The tenant's policy (the default where the config has no policy files); a tenant the files do not name is refused."""
    from burst.model import default_policy
    from policies import PolicyValidationError, load_policy_dir

    try:
        known = load_policy_dir(load_config_option(config_path).policies_path())
    except PolicyValidationError as exc:
        raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None
    if known and tenant not in known:
        raise click.BadParameter(f"no policy for tenant {tenant!r} (known: {', '.join(sorted(known))})", param_hint="--tenant")
    return known.get(tenant) or default_policy(tenant)


def _check_runnable(config_path: Path | None, job: Job, policy: Policy) -> None:
    """Refuse a job no node group of the config could ever run (groups a provider discovers are not checked)."""
    from burst.planner.placement import never_runs
    from burst.runtime import declared_groups

    groups = declared_groups(load_config_option(config_path))
    reason = never_runs(job, policy, groups) if groups is not None else None
    if reason is not None:
        raise click.ClickException(f"job {job.id} refused: {reason}")


@main.command("submit")
@click.option("--tenant", required=True, help="Tenant the job belongs to (its policy applies).")
@click.option("--gpus", type=click.IntRange(min=1), required=True, help="Whole GPUs the job needs (>= 1).")
@click.option("--duration", default=None, help="Expected run time, e.g. 2h (jobs complete by it on sim groups).")
@click.option("--gpu-model", default=None, help="GPU model the job needs, e.g. A100 (default: any).")
@click.option("--priority", type=int, default=None, help="Priority within the tenant (default: the tenant's).")
@click.option("--fault-tolerant", is_flag=True, help="The job resumes from checkpoints, so it may run on spot.")
@click.option("--checkpoint-interval", default=None, help="How often the job checkpoints, e.g. 15m.")
@click.option("--id", "job_id", default=None, help="Job id (default: generated).")
@click.option("--command", "command", default=None,
              help="Command an on-prem node agent runs for the job, e.g. 'python train.py' (split like a shell).")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the submitted job as JSON.")
def submit_cmd(
    tenant: str,
    gpus: int,
    duration: str | None,
    gpu_model: str | None,
    priority: int | None,
    fault_tolerant: bool,
    checkpoint_interval: str | None,
    job_id: str | None,
    command: str | None,
    config_path: Path | None,
    state: Path | str | None,
    as_json: bool,
) -> None:
    """Submit a job to the embedded queue in the state store; the running controller places it.

    A job no node group could ever run (no group with its GPU model that the
    tenant may use, or more GPUs than the largest such group holds) is refused
    with the reason and exit status 1.
    """
    import shlex
    import uuid

    from burst.bounds import job_problem
    from burst.codec import job_to_json
    from burst.model import Job
    from burst.state import JobExists

    if checkpoint_interval is not None and not fault_tolerant:
        raise click.UsageError("--checkpoint-interval needs --fault-tolerant")
    policy = _check_tenant(config_path, tenant)
    path = _store_path(config_path, state)
    if isinstance(path, Path):
        path.parent.mkdir(parents=True, exist_ok=True)
    job = Job(
        id=job_id or f"job-{uuid.uuid4().hex[:12]}",
        tenant=tenant,
        gpus=gpus,
        submitted_at=_submission_time(config_path, path),
        gpu_model=gpu_model,
        priority=priority,
        fault_tolerant=fault_tolerant,
        checkpoint_interval_s=parse_duration_option(checkpoint_interval, "--checkpoint-interval") if checkpoint_interval else None,
        duration_s=parse_duration_option(duration, "--duration") if duration else None,
        declared_duration_s=parse_duration_option(duration, "--duration") if duration else None,
        command=tuple(shlex.split(command)) if command else (),
    )
    problem = job_problem(job)  # the bounds the API applies (burst.bounds)
    if problem is not None:
        field, _, why = problem.partition(": ")
        option = {"duration_s": "--duration", "checkpoint_interval_s": "--checkpoint-interval", "gpu_model": "--gpu-model",
                  "id": "--id"}.get(field, f"--{field.replace('_', '-')}")
        raise click.BadParameter(why, param_hint=option)
    _check_runnable(config_path, job, policy)
    with _open_store(path, read_only=False) as store:
        try:
            store.add_job(job, at=job.submitted_at)
        except JobExists as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(job_to_json(job), indent=2) if as_json else f"submitted {job.id} ({tenant}, {gpus} GPU(s)) to {path}")


@main.command("jobs")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--tenant", default=None, help="Only this tenant's jobs.")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice(["pending", "running", "checkpointing", "succeeded", "failed", "cancelled", "reclaimed"]),
              help="Only jobs in this state (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of jobs.")
def jobs_cmd(config_path: Path | None, state: Path | str | None, tenant: str | None, statuses: tuple[str, ...], as_json: bool) -> None:
    """List the jobs in the embedded queue with their state, GPUs and nodes."""
    from burst.codec import job_to_json
    from burst.model import JobState

    path = _store_path(config_path, state)
    if not location_exists(path):
        raise click.ClickException(f"{path}: no state file (run burst run or burst submit with it first)")
    with _open_store(path) as store:
        unreadable: list[tuple[str, str, str]] = []
        jobs = store.jobs(states=[JobState(s) for s in statuses] or None, tenant=tenant, unreadable=unreadable)
    for job_id, _, why in unreadable:  # failed by the daemon's next tick; listed apart, never a traceback
        click.echo(f"job {job_id[:63]}: {why}", err=True)
    if as_json:
        click.echo(json.dumps([job_to_json(j) for j in jobs], indent=2))
        return
    table = Table(title=f"jobs in {shown(path)}")
    for col in ("id", "tenant", "state", "gpus", "submitted", "nodes"):
        table.add_column(col)
    for j in jobs:
        table.add_row(j.id, j.tenant, j.state.value, f"{j.gpu_demand:g}", j.submitted_at.isoformat(timespec="seconds"), ",".join(j.node_ids))
    print_table(table, whole=("id", "tenant"), droppable=("nodes", "submitted"))


@main.command("explain")
@click.argument("name")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Most recent decisions shown.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of decisions, newest first.")
@click.option("--timeline", "as_timeline", is_flag=True,
              help="Print a compact time-ordered view instead, oldest first: the job's submission, decisions and "
                   "lost runs, one line each (with --json, a list of {at, until, seen, kind, subject, detail, plan_id}).")
def explain_cmd(name: str, config_path: Path | None, state: Path | str | None, limit: int, as_json: bool,
                as_timeline: bool) -> None:
    """Why something happened or did not: the decisions about job, node, group or tenant NAME, newest first.

    Every action a plan takes and every hold (a decision not to act) is in the
    decision log with its reason; this reads it from the state file. A hold
    repeated unchanged by consecutive plans is one entry: its first plan, the
    last plan that made it and how many did. Exits 1 when nothing by that name
    has a decision.
    """

    path = _store_path(config_path, state)
    if not location_exists(path):
        raise click.ClickException(f"{path}: no state file (run burst run with it first)")
    if "/" not in name:  # a service named without its tenant: the one service of that name the daemon runs
        from burst.services_cli import read_statuses

        named = [f"{s['tenant']}/{s['name']}" for s in read_statuses(path) if s["name"] == name]
        name = named[0] if len(named) == 1 else name
    with _open_store(path) as store:
        found = store.decisions_about(name, limit=limit)
        job = store.get_job(name)
        losses = store.job_losses(job_id=name) if job is not None and as_timeline else []
    if not found and job is None:  # nothing by that name has a decision: not found, as kubectl says it
        raise click.ClickException(f"no decision about {name} in {shown(path)}: no job, node, group, tenant or "
                                   "service (TENANT/NAME) by that name has one (burst jobs, burst services list them)")
    if as_timeline:
        from burst.timeline import render_text, timeline

        entries = timeline(found, job, losses)
        if as_json:
            click.echo(json.dumps([e.to_json() for e in entries], indent=2))
        else:
            if job is not None:
                click.echo(f"job {job.id}: {job.state.value}, tenant {job.tenant}, {job.gpu_demand:g} GPU(s)"
                           + (f" on {', '.join(job.node_ids)}" if job.node_ids else ""))
            click.echo(f"timeline of {name} (UTC, oldest first; from the {limit} latest decisions)")
            for line in render_text(entries):
                click.echo(line)
        return
    if as_json:
        click.echo(json.dumps([
            {"at": d.at.isoformat(), "last_at": (d.last_at or d.at).isoformat(), "seen": d.seen, "plan_id": d.plan_id,
             "subject": d.subject, "kind": d.kind, "reason": d.reason, "data": d.data} for d in found
        ], indent=2, sort_keys=True))
        return
    if job is not None:
        click.echo(f"job {job.id}: {job.state.value}, tenant {job.tenant}, {job.gpu_demand:g} GPU(s)"
                   + (f" on {', '.join(job.node_ids)}" if job.node_ids else ""))
    if not found:
        click.echo(f"no decision about {name} in {shown(path)}")
        return
    table = Table(title=f"decisions about {name} (newest first)")
    for col in ("at (first plan)", "last plan at", "plans", "plan", "kind", "subject", "reason"):
        table.add_column(col, overflow="fold")
    for d in found:
        last = d.last_at or d.at
        table.add_row(d.at.isoformat(timespec="seconds"), "" if last == d.at else last.isoformat(timespec="seconds"),
                      str(d.seen), d.plan_id, d.kind, d.subject, d.reason)
    print_table(table, whole=("plan", "subject"), droppable=("last plan at", "plans"))


@main.command("forecast")
@click.option("--series", "series_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="CSV of demand: a time column and a value column (or columns summed with --value-expr).")
@click.option("--service", default=None,
              help="Instead of --series: forecast service TENANT/NAME's request rate from the rate source burst.yaml's "
                   "rates: names (--config; the quickstart's by default), the next hour at rates.step.")
@click.option("--at", "at", default=None, help="With --service: the instant forecast from (default: now, UTC).")
@CONFIG_OPTION
@click.option("--time-column", default="time", show_default=True, help="Column holding each point's time (UTC if no offset).")
@click.option("--value-column", default=None, help="Column holding GPUs demanded (default: the only other column).")
@click.option("--value-expr", default=None, help="Columns summed into the value, e.g. 'running_gpu_num+pending_gpu_num'.")
@click.option("--step", default="1h", show_default=True, help="Forecast step (5m to 1d); the series is averaged to it.")
@click.option("--horizon", default="48h", show_default=True, help="How far ahead to forecast (up to 30d).")
@click.option("--quota", type=float, default=None, help="Clip every quantile to this many GPUs.")
@click.option("--steady-gpus", type=click.IntRange(min=0), default=None,
              help="On-prem GPUs owned today: the steady-tier advice gives their forecast utilisation and status "
                   "(default: judged at the recommended size).")
@click.option("--backtest", is_flag=True, help="Instead of forecasting, backtest burst's forecaster and its peers (rolling origin).")
@click.option("--folds", type=click.IntRange(min=1), default=3, show_default=True, help="Backtest folds of one horizon each.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: the series and the forecast (model, each step's P50/P90/P99), or the backtest scores.")
def forecast_cmd(
    series_path: Path | None,
    service: str | None,
    at: str | None,
    config_path: Path | None,
    time_column: str,
    value_column: str | None,
    value_expr: str | None,
    step: str,
    horizon: str,
    quota: float | None,
    steady_gpus: int | None,
    backtest: bool,
    folds: int,
    as_json: bool,
) -> None:
    """Fit a demand series and print its P10/P50/P90/P99 forecast, saying which model served it and its backtest score.

    The model is chosen by a rolling-origin backtest of the series' own
    history (Prophet, seasonal naive, AutoETS, recent level, and their median),
    and the quantiles are calibrated from that backtest's residuals.

    It also prints the steady-tier advice over the horizon: on-prem GPUs to own
    (the P50 of the forecast P50 demand), the utilisation that implies, and
    green / yellow / red for the forecast utilisation of --steady-gpus (< 60% /
    60-80% / > 80%: red means on-prem runs hot and demand above it bursts).

    With --backtest, score burst's forecaster (burst), Prophet alone, seasonal
    naive and AutoETS on the series' own last FOLDS horizons instead: MASE,
    pinball loss at P50 and P90, coverage of each quantile and fit time.
    """
    from forecasting.models import SeriesError
    from forecasting.select import SelectingForecaster
    from forecasting.series import load_series

    if (series_path is None) == (service is None):
        raise click.UsageError("give --series PATH (a demand CSV) or --service TENANT/NAME, one of the two")
    if service is not None:
        from burst.services_cli import print_service_forecast

        print_service_forecast(config_path, service, parse_at(at) if at else datetime.now(UTC), as_json)
        return
    assert series_path is not None
    step_s, horizon_s = _forecast_window(step, horizon, quota)
    try:
        loaded = load_series(series_path, time_column=time_column, value_column=value_column, value_expr=value_expr, step_s=step_s)
        if backtest:
            _print_backtest(loaded.series, series_path, horizon_s, folds, as_json)
            return
        forecaster = SelectingForecaster()
        result = forecaster(loaded.series, horizon_s=horizon_s, quota=quota)
    except SeriesError as exc:
        raise click.ClickException(str(exc)) from None
    series = loaded.series
    selection = forecaster.selections.get(series.name)
    advice = _series_advice(result, steady_gpus)
    rows = [
        {"at": ts.isoformat(), **{f"p{round(q * 100)}": result.quantiles[q][i] for q in sorted(result.quantiles)}}
        for i, ts in enumerate(result.timestamps)
    ]
    if as_json:
        doc = {
            "series": {"name": series.tenant, "path": str(series_path), "rows": loaded.rows, "points": len(series.values),
                       "step_s": step_s, "first": series.timestamps[0].isoformat(), "last": series.timestamps[-1].isoformat(),
                       "filled_buckets": loaded.filled_buckets},
            "model": result.model,
            "backtest_p90_pinball": result.backtest_p90_pinball,
            "selection": selection.to_json() if selection else None,
            "forecast": rows,
            "steady_tier": advice.to_json(),
        }
        click.echo(json.dumps(doc, indent=2))
        return
    _print_forecast(series.tenant, series.timestamps[-1], result, rows, selection)
    print_steady_advice([advice])
    if loaded.filled_buckets:
        click.echo(f"note: {loaded.filled_buckets} empty step(s) in the series were filled with the value before them", err=True)


def _forecast_window(step: str, horizon: str, quota: float | None) -> tuple[float, float]:
    """The step and horizon `burst forecast` was given, in seconds, or a usage error naming the option out of range."""
    step_s = parse_duration_option(step, "--step")
    horizon_s = parse_duration_option(horizon, "--horizon")
    if not 300 <= step_s <= 86400:
        raise click.BadParameter(f"{step} is outside 5m..1d", param_hint="--step")
    if not step_s <= horizon_s <= 30 * 86400:
        raise click.BadParameter(f"{horizon} is outside one step..30d", param_hint="--horizon")
    if quota is not None and quota < 0:
        raise click.BadParameter(f"{quota:g} is negative", param_hint="--quota")
    return step_s, horizon_s


def _print_forecast(name: str, last: datetime, result: Forecast, rows: Sequence[Mapping[str, Any]],
                    selection: Selection | None) -> None:
    """Print a series' forecast as a table of its steps' P10/P50/P90/P99, and the model selection behind it."""
    score = "" if result.backtest_p90_pinball is None else f" (backtest P90 pinball {result.backtest_p90_pinball:.2f})"
    table = Table(title=f"{name}: {len(rows)} step(s) after {last:%Y-%m-%d %H:%M} UTC, served by {result.model}{score}")
    for col in ("at", "P10", "P50", "P90", "P99"):
        table.add_column(col, justify="right" if col != "at" else "left")
    for r in rows:
        table.add_row(str(r["at"]), f"{r['p10']:.1f}", f"{r['p50']:.1f}", f"{r['p90']:.1f}", f"{r['p99']:.1f}")
    Console().print(table)
    if selection is not None:
        click.echo(f"model selection: {selection.model}, {selection.reason}; candidates' backtest P90 pinball: "
                   + ", ".join(f"{m} {v:.2f}" for m, v in selection.scores.items()))


def _series_advice(result: Forecast, steady_gpus: int | None) -> SteadyAdvice:
    """The steady-tier advice for one forecast series (utilisation and status only with --steady-gpus)."""
    from burst.planner.steady import steady_advice

    owned = None if steady_gpus is None else {result.gpu_model: steady_gpus}
    return steady_advice([result], owned, result.timestamps[0])[0]


def print_steady_advice(advice: Sequence[SteadyAdvice]) -> None:
    """Print the steady-tier advice, one line per GPU model: GPUs to own over the forecast horizon (naming the
    window, as `burst cost` names its own), today's utilisation and the GPUs to add (`steady.gpus_to_add`)."""
    from burst.planner.steady import gpus_to_add

    for a in advice:
        click.echo(
            f"steady tier ({a.gpu_model}): own {a.recommended_gpus} GPU(s) (P50 of forecast P50 demand over the "
            f"forecast horizon, {a.window_start:%Y-%m-%d %H:%M} to {a.window_end:%Y-%m-%d %H:%M} UTC; "
            f"{a.utilisation_at_recommended:.0%} utilised at that size)"
            + ("" if a.utilisation is None else
               f"; today's {a.steady_gpus} GPU(s) would be {a.utilisation:.0%} utilised: {a.status}; "
               f"add {gpus_to_add(a)}")
        )
        if a.cost_optimal_gpus is not None and a.cost_optimal_quantile is not None:
            click.echo(
                f"  cost-optimal ({a.gpu_model}): own {a.cost_optimal_gpus} GPU(s) (the P{a.cost_optimal_quantile * 100:.0f} "
                f"of that demand: 1 - owned / on-demand price); a year costs ${a.year_usd_at_cost_optimal or 0:,.0f} "
                f"at that size and ${a.year_usd_at_recommended or 0:,.0f} at {a.recommended_gpus} GPU(s), "
                "overflow on on-demand"
            )


def _print_backtest(series: DemandSeries, path: Path, horizon_s: float, folds: int, as_json: bool) -> None:
    from forecasting.backtest import Scores, backtest

    steps = max(1, round(horizon_s / series.step_s))
    scores = backtest(series, horizon_steps=steps, folds=folds,
                      on_fold=None if as_json else lambda m, f: click.echo(f"{m}: fold {f + 1}/{folds} done", err=True))
    models = {name: s.to_json() if isinstance(s, Scores) else {"error": s} for name, s in scores.items()}
    if as_json:
        click.echo(json.dumps({"series": {"name": series.tenant, "path": str(path), "points": len(series.values),
                                          "step_s": series.step_s, "horizon_steps": steps, "folds": folds},
                               "models": models}, indent=2))
        return
    table = Table(title=f"{series.tenant}: backtest, {folds} fold(s) of {steps} step(s)")
    for col in ("model", "MASE", "pinball P50", "pinball P90", "P90 coverage", "coverage P10/P50/P99", "fit s"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name, m in models.items():
        if "error" in m:
            table.add_row(name, str(m["error"]), "", "", "", "", "")
        else:
            cov = m["coverage"]
            table.add_row(name, f"{m['mase']:.3f}", f"{m['pinball_p50']:.2f}", f"{m['pinball_p90']:.2f}",
                          f"{m['coverage_p90']:.2f}", "/".join(f"{cov[k]:.2f}" if k in cov else "-"  # type: ignore[operator,index]
                                                                 for k in ("p10", "p50", "p99")), f"{m['fit_s']:.2f}")
    Console().print(table)


def print_plan(result: Plan) -> None:
    """Print a plan as a diff-style table: + adds capacity or work, - removes it, = holds."""
    console = Console()
    table = Table(title=f"plan {result.id} at {result.at.isoformat()}")
    for col in ("", "kind", "target", "nodes", "GPUs", "reason"):
        table.add_column(col)
    for a in result.actions:
        count = "" if a.count is None else str(a.count)
        nodes, gpus = (count, "") if a.count_unit == "nodes" else ("", count)
        table.add_row(SIGNS.get(a.kind.value, "~"), a.kind.value, a.target, nodes, gpus, a.reason)
    for h in result.holds:
        table.add_row("=", "hold", h.subject, "", "", h.reason)
    console.print(table)
    console.print(f"{len(result.actions)} action(s), {len(result.holds)} hold(s)")
    print_steady_advice(result.advice)


SIGNS = {"scale_up": "+", "place_job": "+", "scale_down": "-", "terminate_nodes": "-", "reclaim_job": "-"}


main.add_command(agent_cmd)
main.add_command(simulate_cmd)
main.add_command(init_cmd)
main.add_command(config_group)
main.add_command(db_group)
main.add_command(policy_group)
main.add_command(gpus_cmd)
main.add_command(agents_group)
main.add_command(cost_cmd)
main.add_command(usage_cmd)
main.add_command(nodegroups_group)
main.add_command(services_cmd)

if __name__ == "__main__":
    main()
