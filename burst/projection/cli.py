"""`burst cost` (dry-run cost projection) and `burst usage` (metering), registered on the main CLI."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from burst.catalog import COST_LINES
from burst.projection.budget import HOURLY, Breach, has_budget
from burst.state_option import StateLocation, open_for_command
from burst.store_pg import location_exists, shown
from burst.tables import print_table
from burst.workloads.replicas import REPLICA_PREFIX, is_replica
from forecasting.paths import DEFAULT_PATHS, MIN_PATHS

if TYPE_CHECKING:
    from burst.model import Budget, Job
    from burst.projection.capacity import CapacityAdvice
    from burst.projection.project import Progress
    from burst.projection.services import ServicePaths
    from burst.sim.setup import SimSetup
    from forecasting.models import DemandSeries

MAX_HORIZON_S = 30 * 86400.0


def _instant(value: str, hint: str) -> datetime:
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 instant, e.g. 2026-03-02T10:30:00Z", param_hint=hint) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _horizon(value: str) -> float:
    from policies import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--horizon") from None
    if not 3600.0 <= seconds <= MAX_HORIZON_S:
        raise click.BadParameter(f"{value!r}: the horizon must be between 1h and 30d (e.g. 7d or 30d)", param_hint="--horizon")
    return seconds


def _config(config_path: Path | None) -> Any:
    """The config at `config_path`, or the embedded quickstart's."""
    from burst.runtime import load_run_config
    from policies import PolicyValidationError

    try:
        return load_run_config(config_path)
    except PolicyValidationError as exc:
        raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None


@click.command("cost")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="burst.yaml whose node groups, prices and tenant policies the projection runs on "
                   "(default: the embedded quickstart, projected from its saved state).")
@click.option("--history", "history_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Job trace (Philly, ITP, Alibaba 2023 or generic CSV) to forecast from and take the job mix of.")
@click.option("--format", "trace_format", default="auto", show_default=True,
              type=click.Choice(["auto", "philly", "itp", "alibaba", "csv"]), help="Format of the --history trace.")
@click.option("--from-store", is_flag=True,
              help="Forecast from the state store's demand history and take the job mix from its jobs instead "
                   "(the default on the quickstart).")
@click.option("--state", "state", type=StateLocation(), default=None,
              help="State store (SQLite file or postgresql:// URL) for --from-store and month-to-date spend (default: the config's state_path, "
                   "or the quickstart's).")
@click.option("--horizon", "horizon", default="7d", show_default=True, help="How far to project: 7d or 30d (1h to 30d).")
@click.option("--at", "at", default=None,
              help="ISO instant the projection starts at (default: the end of the trace, or with --from-store the "
                   "state's now: its simulated clock's last tick on a sim-clock config).")
@click.option("--what-if", "what_if_paths", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="What-if YAML (keys name, spot, hot_pool_nodes, steady_gpus_delta, region, prices); repeatable.")
@click.option("--strategy", default="burst", show_default=True, type=click.Choice(["burst", "burst-no-forecast"]),
              help="Strategy simulated: the full planner with forecasts, or without (faster).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the sampled demand paths, synthetic arrivals, fault tolerance, spot interruptions.")
@click.option("--paths", "paths", type=click.IntRange(min=MIN_PATHS), default=DEFAULT_PATHS, show_default=True,
              help=f"Demand paths sampled from the forecast; P10/P50/P90 are quantiles of their simulated costs "
                   f"(at least {MIN_PATHS}).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Simulations run in parallel (default: one per CPU, at most the runs needed).")
@click.option("--spot-history", "spot_history_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Spot price history CSV (burst/data/spot_history.csv's columns) added to the shipped one; "
                                 "spot is priced at its last 30 days' median.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: horizon_h, total_usd, by_tenant, by_tier (each p10/p50/p90; tenants with "
                   "their hourly and monthly budgets and when the median run first passes one), paths, what_if, "
                   "spot_from_history, capacity, history (days, and why the band is wide under a week), services "
                   "(each projected from its request rate, and those left out).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write an HTML report with PNG plots (cost over time with P50-P90 band, per tenant, per line).")
def cost_cmd(config_path: Path | None, history_path: Path | None, trace_format: str, from_store: bool, state: Path | str | None,
             horizon: str, at: str | None, what_if_paths: tuple[Path, ...], strategy: str, seed: int, paths: int,
             workers: int | None,
             spot_history_path: Path | None, as_json: bool, report_dir: Path | None) -> None:
    """Project next week's or month's cost per tenant and cost line, with P10, P50 and P90 totals.

    Fits the demand forecast on the history, samples --paths demand paths from
    it (correlated across steps as its errors were), turns each into synthetic
    jobs of the history's size and duration mix, replays them with the real
    planner in the simulator, and prints the P10/P50/P90 of the runs' costs
    per tenant and per line (steady, elastic_on_demand, elastic_spot,
    hot_pool), queue waits, budgets (hourly and monthly, with when the median
    run first passes one) and capacity advice of the median run, and under a
    week of history why the band is wide; each what-if is run on the same jobs and shown beside the baseline.
    Inference services are projected from their request-rate forecasts (their replicas as jobs of their
    tenant, sized by the service planner), their replicas left out of the batch history. Spot is priced at the time-weighted median of the
    spot price history's last 30 days before the start, per offering, where
    the history covers it (else the catalog's flat spot price). Progress goes
    to stderr.
    """
    from burst.projection.arrivals import job_mix
    from burst.projection.demand import HISTORY_S, fit_forecast
    from burst.projection.project import BASELINE, project
    from burst.projection.whatif import WhatIfError, load_what_if
    from burst.quickstart import state_path_for
    from burst.sim.traces import Trace

    if config_path is None and history_path is None:
        from_store = True  # the quickstart has no trace: its own saved state is the history
    if (history_path is None) == (not from_store):
        raise click.UsageError("give one of --history TRACE or --from-store")
    horizon_s = _horizon(horizon)
    try:
        what_ifs = [load_what_if(p) for p in what_if_paths]
    except WhatIfError as exc:
        raise click.ClickException(str(exc)) from None
    config = _config(config_path)
    setup = _setup(config, spot_history_path)
    store_path = state_path_for(config_path, state)

    def say(message: str) -> None:
        click.echo(message, err=True)

    start, history, series, month_to_date = _history(
        config, config_path, history_path, trace_format, at, state_given=state is not None, store_path=store_path)
    history = tuple(j for j in history if not is_replica(j))  # replicas are projected from rates, not as batch
    for warning in _policy_coverage({j.tenant for j in history}, set(setup.policies), config_path):
        say(f"warning: {warning}")
    mix = job_mix(j for j in history if j.submitted_at >= start - timedelta(seconds=HISTORY_S))
    if not mix:
        raise click.ClickException("history: no job with a duration to take the size and duration mix from")
    say(f"fitting the demand forecast on {series.history_s / 86400:.1f} days of history ...")
    forecast, dependence = fit_forecast(series, horizon_s)
    runs = paths * (1 + len(what_ifs))
    workers = workers or max(1, min(runs, os.cpu_count() or 1))
    say(f"forecast by {forecast.model}; simulating {paths} demand path(s) x {1 + len(what_ifs)} option(s) of "
        f"{horizon_s / 3600:g} h in {workers} process(es) ...")
    stats = Trace(path=history_path or Path(shown(store_path)), format="history", jobs=tuple(history)).stats()
    services = _services(config, setup, start, horizon_s, paths, say)
    try:
        with _progress([BASELINE, *(w.name for w in what_ifs)], paths, quiet=as_json) as advance:
            projection = project(
                setup, stats, forecast, mix, start=start, horizon_s=horizon_s, strategy=strategy, what_ifs=what_ifs,
                seed=seed, month_to_date=month_to_date, prior=history, workers=workers, on_progress=advance,
                paths=paths, dependence=dependence, history_s=series.history_s, services=services,
            )
    except (WhatIfError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if report_dir is not None:
        from burst.projection.report import write_report
        from burst.projection.whatif import describe

        say(f"wrote {write_report(projection, report_dir, history=series, changes={w.name: describe(w) for w in what_ifs})}")
    if as_json:
        click.echo(json.dumps(projection.to_json(), indent=2))
        return
    _print_projection(projection)


def _services(config: Any, setup: SimSetup, start: datetime, horizon_s: float, paths: int,
              say: Callable[[str], None]) -> ServicePaths | None:
    """The services' replica jobs per path from their request-rate forecasts (`burst.projection.services`), None
    when burst.yaml names no rate source or no policy declares a service; each service left out is said why."""
    from burst.projection.services import service_paths
    from burst.runtime import rate_source

    try:
        rates = rate_source(config)
    except (OSError, ValueError) as exc:  # a Prometheus CA or token file that cannot be read
        raise click.ClickException(f"rates: {exc}") from None
    declared = sum(len(p.services) for p in setup.policies.values())
    if rates is None or not declared:
        return None
    say(f"projecting {declared} service(s) from their request-rate forecasts ...")
    services = service_paths(setup.policies, setup.groups, setup.catalog, rates, start=start, horizon_s=horizon_s,
                             paths=paths)
    for why in services.skipped:
        say(f"warning: service {why}: not projected")
    return services


@contextmanager
def _progress(options: list[str], paths: int, *, quiet: bool) -> Iterator[Progress]:
    """A progress bar per option on stderr, advanced by one path per finished run (as `burst simulate` shows its
    strategies); hidden under --json when stderr is not a terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bars

    with Bars(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TextColumn("paths"),
              TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=True,
              disable=quiet and not sys.stderr.isatty()) as bars:
        tasks = {name: bars.add_task(name, total=paths) for name in options}
        yield lambda name, _index: bars.advance(tasks[name])


def _setup(config: Any, spot_history_path: Path | None) -> SimSetup:
    """The simulator set-up of `config`, its spot prices taken from the history at `spot_history_path` when
    given (a config or history that does not load stops the command)."""
    import dataclasses

    from burst.catalog import UnknownInstanceType, read_spot_history
    from burst.sim.setup import setup_from_config

    try:
        setup = setup_from_config(config)
    except UnknownInstanceType as exc:
        raise click.ClickException(str(exc)) from None
    if spot_history_path is not None:
        try:
            points = read_spot_history(spot_history_path)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        setup = dataclasses.replace(setup, catalog=setup.catalog.with_spot_history(points))
    return setup


def _history(config: Any, config_path: Path | None, history_path: Path | None, trace_format: str, at: str | None,
             *, state_given: bool, store_path: Path | str) -> tuple[datetime, tuple[Job, ...], DemandSeries, dict[str, float]]:
    """Where the projection starts, the jobs submitted before it, the demand series to forecast from and each
    tenant's month-to-date spend: from the trace at `history_path`, else from the state store's demand history
    and jobs (spend is known from the store only)."""
    from burst.model import month_start
    from burst.projection.demand import HISTORY_S, series_of_jobs, series_of_points
    from burst.projection.services import without_replicas
    from burst.quickstart import recorded_now
    from burst.sim.traces import TraceError, load_trace
    from forecasting.models import SeriesError

    month_to_date: dict[str, float] = {}
    try:
        if history_path is not None:
            try:
                trace = load_trace(history_path, format=trace_format)
            except TraceError as exc:
                raise click.ClickException(str(exc)) from None
            start = _instant(at, "--at") if at else _hour_after(trace.jobs[-1].submitted_at)
            history = tuple(j for j in trace.jobs if j.submitted_at < start)
            series = series_of_jobs(history, start)
        else:
            if not location_exists(store_path):
                hint = "run burst run first" if config_path is None and not state_given else "give --state"
                raise click.ClickException(f"{store_path}: no state file to read demand history from ({hint})")
            with open_for_command(store_path, read_only=True) as store:
                now = recorded_now(config, store)
                start = _instant(at, "--at") if at else _hour_after(now - timedelta(hours=1))
                demand = store.demand_history(since=start - timedelta(seconds=HISTORY_S), until=start)
                history = tuple(j for j in store.jobs() if j.submitted_at < start)
                demand = without_replicas(demand, [j for j in history if is_replica(j)],
                                          store.ended_at(REPLICA_PREFIX + ":"), start)
                month_to_date = store.spend_by_tenant(since=month_start(start), until=start)
            series = series_of_points(demand, start)
    except (ValueError, SeriesError) as exc:
        raise click.ClickException(f"history: {exc}") from None
    return start, history, series, month_to_date


def _policy_coverage(history_tenants: set[str], policy_tenants: set[str], config_path: Path | None) -> list[str]:
    """What to say when the history's tenants and the config's policies do not line up (nothing when they do)."""
    if not policy_tenants:
        return []
    where = str(config_path) if config_path is not None else "the quickstart"
    out = []
    unknown = sorted(history_tenants - policy_tenants)
    if unknown:
        out.append(f"tenant(s) {', '.join(unknown)} of the history have no policy in {where}: "
                   "they are projected on the default policy")
    idle = sorted(policy_tenants - history_tenants)
    if idle:
        out.append(f"tenant(s) {', '.join(idle)} of {where} have no job in the history: they are projected at $0")
    return out


def _hour_after(at: datetime) -> datetime:
    """The first whole hour after `at`."""
    return at.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def _money(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "n/a"


def _print_projection(projection: Any) -> None:
    from burst.projection.project import QUANTILES

    console = Console(width=None)
    base = projection.baseline
    table = Table(title=f"candidates: {projection.horizon_s / 3600:g} h from {projection.start:%Y-%m-%d %H:%M} UTC, "
                        f"{len(projection.paths)} demand paths",
                  caption=None if projection.thin is None else f"[bold]{escape(projection.thin)}[/bold]")
    for col in ("option", "USD/hour (P50)", "P10 total $", "P50 total $", "P90 total $", "wait P50 s", "wait P95 s"):
        table.add_column(col, justify="left" if col == "option" else "right")
    for s in projection.scenarios():
        median = s.median_run
        table.add_row(s.name, f"{s.usd_per_hour():,.2f}", *(_money(s.cost(q)) for q in QUANTILES),
                      f"{median.wait_p50_s:,.0f}", f"{median.wait_p95_s:,.0f}")
    console.print(table)
    table = Table(title="per cost line $ (P10 / P50 / P90)")
    table.add_column("option")
    for line in COST_LINES:
        table.add_column(line, justify="right")
    for s in projection.scenarios():
        table.add_row(s.name, *(" / ".join(_money(s.line_cost(ln, q)) for q in QUANTILES) for ln in COST_LINES))
    console.print(table)
    table = Table(title="per tenant (baseline; idle capacity and hot pools are on no tenant)")
    for col in ("tenant", "P10 $", "P50 $", "P90 $", "budget $/hour", "budget $/month", "exceeds budget at (median run)"):
        table.add_column(col, justify="left" if col == "tenant" else "right")
    for t in base.tenants():
        budget = base.budgets.get(t)
        table.add_row(t, *(_money(base.tenant_cost(t, q)) for q in QUANTILES), *budget_cells(budget),
                      breach_cell(budget, base.exceeds_at.get(t)))
    console.print(table)
    _print_services(console, projection.services)
    click.echo(f"P10/P50/P90: quantiles of the costs of {len(projection.paths)} sampled demand paths' runs, each line and "
               f"tenant on its own (they need not add up); steps correlated as the forecast's errors were "
               f"({projection.dependence.source})")
    _print_capacity(projection.capacity)


def _print_services(console: Console, services: Any) -> None:
    """The services projected from their request rates (their cost is in their tenant's), and those left out."""
    from forecasting.paths import quantile

    if not services.outlooks and not services.skipped:
        return
    table = Table(title="services (projected from their request-rate forecasts; their cost is in their tenant's)")
    for col in ("service", "forecast req/s (median mean)", "replica GPU-h P10", "P50", "P90", "peak replicas P50"):
        table.add_column(col, justify="left" if col == "service" else "right")
    for o in services.outlooks:
        hours = list(o.gpu_hours)
        table.add_row(f"{o.tenant}/{o.name}", f"{o.mean_rps:,.4g}", *(f"{quantile(hours, q):,.1f}" for q in (0.1, 0.5, 0.9)),
                      f"{quantile([float(p) for p in o.peak_replicas], 0.5):g}")
    for why in services.skipped:
        table.add_row(why.split(":", 1)[0], "not projected: " + why.split(": ", 1)[-1], "", "", "", "")
    console.print(table)


def budget_cells(budget: Budget | None) -> tuple[str, str]:
    """The hourly and monthly budget cells of the per-tenant table ("none" where the policy sets no cap)."""
    def shown(cap: float | None) -> str:
        return "none" if cap is None else _money(cap)

    return ("none", "none") if budget is None else (shown(budget.usd_per_hour), shown(budget.usd_per_month))


def breach_cell(budget: Budget | None, breach: Breach | None) -> str:
    """When the median run first passes a budget and which, "not within the horizon", or "" without a budget."""
    if breach is not None:
        return f"{breach.at:%Y-%m-%d %H:%M} UTC ({'hourly' if breach.budget == HOURLY else 'monthly'})"
    return "not within the horizon" if budget is not None and has_budget(budget) else ""


def _print_capacity(cap: CapacityAdvice | None) -> None:
    """Print the capacity advice: GPUs to own over the projection's horizon (naming the window, as `burst plan`
    names its own), and GPUs to add with their payback."""
    if cap is None:
        return
    a = cap.steady_tier
    own = "" if a is None else (
        f"own {a.recommended_gpus} GPU(s) (P50 of forecast P50 demand over the projection's horizon, "
        f"{a.window_start:%Y-%m-%d %H:%M} to {a.window_end:%Y-%m-%d %H:%M} UTC); ")
    head = f"capacity: {own}forecast P50 above the steady tier ({cap.steady_gpus} GPUs) {cap.above_share:.0%} of the horizon"
    if not cap.add_gpus:
        click.echo(f"{head}: no on-prem GPUs to add")
        return
    short = "" if a is None else f" ({a.recommended_gpus - cap.steady_gpus} short of it, rounded up to whole nodes)"
    payback = "never" if cap.payback_months is None else f"{cap.payback_months:,.1f} months"
    click.echo(f"{head}: add {cap.add_gpus} on-prem GPU(s){short}; saves ${cap.cloud_avoided_usd_month:,.0f}/month of "
               f"cloud for ${cap.onprem_running_usd_month:,.0f}/month to run and ${cap.capex_usd:,.0f} capex: "
               f"pays back in {payback}")


@click.command("usage")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="burst.yaml naming the node groups (GPU models, prices) and the state file (default: the "
                   "quickstart and its saved state, unless --state is given).")
@click.option("--state", "state", type=StateLocation(), default=None,
              help="State store (SQLite file or postgresql:// URL) whose cost ledger is metered (default: the config's state_path, or the "
                   "quickstart's); alone, GPU models come from the groups the state's last run recorded.")
@click.option("--tenant", default=None, help="Only this tenant.")
@click.option("--since", default=None,
              help="ISO instant to meter from (default: the start of the state's month, UTC: this month, or on a "
                   "simulated clock the month of its last tick).")
@click.option("--until", default=None, help="ISO instant to meter to (default: now).")
@click.option("--root-volume-gb", type=click.FloatRange(min=0), default=200.0, show_default=True,
              help="Root volume GB per cloud node, for warm-pool storage GB-hours (the Terraform modules' default).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: since, until, tenants, warm_pool, network (schema: --schema).")
@click.option("--schema", "schema", is_flag=True, help="Print the JSON Schema of --json's object and exit.")
def usage_cmd(config_path: Path | None, state: Path | str | None, tenant: str | None, since: str | None, until: str | None,
              root_volume_gb: float, as_json: bool, schema: bool) -> None:
    """Meter the cost ledger: GPU-hours per tenant by cost line and GPU model, and warm-pool node-, GPU- and storage-hours.

    Per tenant too, from the job-loss ledger: runs interrupted and evicted,
    GPU-hours of work they lost beyond their last checkpoint, and GPU-hours
    spent on checkpoints plans asked for.

    Warm-pool storage GB-hours are the stopped (or hibernated) cloud warm
    node-hours × --root-volume-gb. Cross-zone and egress GB are null: no
    provider reports them, so nothing is metered or estimated.
    """
    from burst.model import month_start
    from burst.projection.usage import USAGE_JSON_SCHEMA, meter
    from burst.quickstart import recorded_now, state_path_for
    from burst.runtime import catalog_from_config
    from burst.state import MetaKey

    if schema:
        click.echo(json.dumps(USAGE_JSON_SCHEMA, indent=2))
        return
    # --state alone meters that file without a config; neither is the quickstart's saved state.
    config = _config(config_path) if config_path is not None or state is None else None
    path = state_path_for(config_path, state)
    if not location_exists(path):
        hint = " (run burst run first)" if config_path is None and state is None else ""
        raise click.ClickException(f"{path}: no state file{hint}")
    t1 = _instant(until, "--until") if until else None
    groups = {g.id: g for g in config.node_groups_model()} if config is not None else {}
    catalog = catalog_from_config(config) if config is not None else None
    with open_for_command(path, read_only=True) as store:
        now = recorded_now(config, store)
        t0 = _instant(since, "--since") if since else month_start(now)
        rows = store.costs(since=t0, until=t1)
        losses = store.loss_totals(since=t0, until=t1, tenant=tenant)
        gpu_models = json.loads(store.get_meta(MetaKey.GROUP_GPU_MODELS) or "{}")
    usage = meter(rows, groups, catalog.standby_price if catalog is not None else (lambda g: 0.0), tenant=tenant,
                  group_price=catalog.group_price if catalog is not None else None,
                  root_volume_gb=lambda g: root_volume_gb, losses=losses, gpu_models=gpu_models)
    if as_json:
        click.echo(json.dumps({"since": t0.isoformat(), "until": t1.isoformat() if t1 else None, **usage.to_json()}, indent=2))
        return
    if not usage.tenants:
        click.echo(f"no usage in {path} since {t0.isoformat()} (the state's clock is at {now.isoformat()}); "
                   "--since picks another window", err=True)
    table = Table(title=f"usage since {t0.isoformat()}")
    for col in ("tenant", "GPU-h", "USD", *(f"{line} GPU-h" for line in COST_LINES), "by GPU model (GPU-h)"):
        table.add_column(col, justify="left" if col in ("tenant", "by GPU model (GPU-h)") else "right")
    lost = Table(title="work lost and checkpoints")
    for col in ("tenant", "interruptions", "evictions", "lost GPU-h", "checkpoint GPU-h"):
        lost.add_column(col, justify="left" if col == "tenant" else "right")
    for name, u in sorted(usage.tenants.items()):
        table.add_row(name, f"{u.gpu_hours:,.2f}", f"{u.usd:,.2f}", *(f"{u.by_tier.get(ln, 0.0):,.2f}" for ln in COST_LINES),
                      ", ".join(f"{m}: {h:,.2f}" for m, h in sorted(u.by_gpu_model.items())))
        lost.add_row(name, str(u.losses.interruptions), str(u.losses.evictions), f"{u.losses.lost_gpu_hours:,.2f}",
                     f"{u.losses.checkpoint_gpu_hours:,.2f}")
    if tenant is None:
        idle = usage.idle
        table.add_row("(idle capacity)", f"{idle.gpu_hours:,.2f}", f"{idle.usd:,.2f}", *("" for _ in COST_LINES), "")
        table.add_row("(warm pools)", f"{usage.warm_pool_gpu_hours:,.2f}", f"{usage.warm_pool_usd:,.2f}",
                      *("" for _ in COST_LINES), "")
        table.add_row("total", "", f"{usage.total_usd:,.2f}", *("" for _ in COST_LINES), "")
    print_table(table, whole=("tenant",), droppable=("by GPU model (GPU-h)", *(f"{ln} GPU-h" for ln in COST_LINES)))
    print_table(lost, whole=("tenant",))
    click.echo(f"warm pools: {usage.warm_pool_node_hours:,.2f} node-hours, {usage.warm_pool_gpu_hours:,.2f} GPU-hours, "
               f"{usage.storage_gb_hours:,.2f} storage GB-hours ({usage.stopped_node_hours:,.2f} stopped node-hours "
               f"x {root_volume_gb:g} GB), ${usage.warm_pool_usd:,.2f}")
    click.echo("network: cross-zone and egress GB not metered (no provider reports them)")


__all__ = ["cost_cmd", "usage_cmd"]
