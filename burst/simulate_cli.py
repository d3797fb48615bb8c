"""`burst simulate`: replay a GPU job trace, request-rate series, or both, through the real controller under
each strategy, and print or write what each cost and how it served."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from burst.cli_common import load_config_option, parse_at
from burst.service_strategy_option import ServiceStrategyChoice
from burst.strategy_option import strategy_option


@click.command("simulate")
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Trace CSV to replay (Philly, ITP, Alibaba 2023 or the generic CSV); optional with --service-trace.")
@click.option("--service-trace", "service_traces", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Request-rate series to replay as an inference service (repeatable): timestamp,value (NAB) or "
                   "the Azure LLM trace (TIMESTAMP,ContextTokens,GeneratedTokens).")
@click.option("--service-config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="YAML with services: entries (a tenant policy's fields), each named after a --service-trace "
                   "file stem, overriding the default mapping.")
@click.option("--service-strategy", "service_strategies", multiple=True, type=ServiceStrategyChoice(),
              help="Service strategy to run on the --service-trace series (repeatable; default: those --strategy "
                   "names that have a service form, else burst, its variants and the service baselines).")
@click.option("--format", "trace_format", default="auto", show_default=True,
              type=click.Choice(["auto", "philly", "itp", "alibaba", "csv"]), help="Trace format.")
@click.option("--epoch", default=None,
              help="ISO instant that relative trace times count from (default: ITP 2021-03-04T00:00:00Z, the "
                   "collection start; Alibaba 2023-01-01T00:00:00Z, a convention; numeric Philly and csv times: "
                   "the Unix epoch).")
@click.option("--tenant-column", default=None, help="Trace column naming the tenant (default: the format's own).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="burst.yaml whose node groups, initial sizes, spot hazards, prices and policies to simulate "
                   "(default: a set-up sized from the trace: on-prem at the P50 of its demand, one on-demand and "
                   "one spot cloud group at catalog prices).")
@click.option("--setup", "setup_name", type=click.Choice(["main", "spot-scarcity", "second-price", "multi-shape"]),
              default=None,
              help="A named set-up sized from the trace, as the strategy benchmark replays it: main (the default), "
                   "spot-scarcity (each spot offering holds a quarter of its group), second-price (the cloud groups "
                   "in us-west-2) or multi-shape (GCP A100 nodes of 1 and 8 GPUs, each on-demand and spot, in place "
                   "of the p4d groups). Not with --config.")
@strategy_option()
@click.option("--start", default=None, help="Replay jobs submitted from this ISO instant (default: the first job).")
@click.option("--days", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Replay this many days of submissions (default: the whole trace).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of spot interruptions and fault-tolerance draws.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: trace, assumptions, strategies, wall_s.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write an HTML report with PNG plots (capacity by tier, cost, wait CDF) into this directory.")
def simulate_cmd(
    trace_path: Path | None,
    service_traces: tuple[Path, ...],
    service_config: Path | None,
    service_strategies: tuple[str, ...],
    trace_format: str,
    epoch: str | None,
    tenant_column: str | None,
    config_path: Path | None,
    setup_name: str | None,
    strategies: tuple[str, ...],
    start: str | None,
    days: float | None,
    seed: int,
    as_json: bool,
    report_dir: Path | None,
) -> None:
    """Replay a GPU job trace through the real controller under each strategy and compare cost and waits.

    Without --config the set-up is sized from the trace (on-prem at the P50 of
    its demand, one on-demand and one spot cloud group at catalog prices); the
    assumptions are printed with the results. Progress goes to stderr.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from burst.sim.compare import compare
    from burst.sim.registry import default_names
    from burst.sim.setup import named_setup, setup_from_config
    from burst.sim.traces import TraceError, load_trace

    if setup_name is not None and config_path is not None:
        raise click.UsageError("--setup and --config are mutually exclusive: a config describes its own set-up")
    if trace_path is None:
        if not service_traces:
            raise click.UsageError("give --trace, --service-trace or both")
        return _simulate_services(service_traces, service_config, service_strategies or strategies, seed, as_json, {},
                                  report_dir)
    names = list(strategies) or list(default_names())
    try:
        trace = load_trace(trace_path, format=trace_format, epoch=parse_at(epoch) if epoch else None, tenant_column=tenant_column)
        shown = 20  # bad rows listed one by one; the rest are counted
        for bad in trace.bad_rows[:shown]:
            click.echo(f"{trace.path}:{bad.line}: skipped: {bad.message}", err=True)
        if len(trace.bad_rows) > shown:
            more = len(trace.bad_rows) - shown
            click.echo(f"... and {more} more bad row{'s' if more != 1 else ''}", err=True)
        trace = trace.window(parse_at(start) if start else None, days)
        setup = None
        if config_path is not None:
            setup = setup_from_config(load_config_option(config_path))
        elif setup_name is not None:
            setup = named_setup(setup_name, trace.stats())
        with Progress(TextColumn("{task.description:<18}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                      TimeElapsedColumn(), console=Console(stderr=True), transient=True, disable=as_json and not sys.stderr.isatty()) as bar:
            tasks = {n: bar.add_task(n, total=1.0) for n in names}
            result = compare(trace, names, setup=setup, seed=seed, days=days, keep_timeline=report_dir is not None,
                             on_progress=lambda name, done: bar.update(tasks[name], completed=done))
    except (TraceError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if report_dir is not None:
        from burst.sim.report import write_report

        click.echo(f"report: {write_report(result, report_dir)}", err=True)
    if service_traces:
        return _simulate_services(service_traces, service_config, service_strategies or strategies, seed, as_json,
                                  result.to_json(), report_dir, days)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    _print_batch(result.to_json(), days)


def _simulate_services(paths: tuple[Path, ...], config: Path | None, strategies: tuple[str, ...], seed: int,
                       as_json: bool, data: dict[str, Any], report_dir: Path | None, days: float | None = None) -> None:
    """Replay the service traces (`burst.sim.service_cli`) and print them, beside a batch result in `data`."""
    from burst.sim.registry import default_names
    from burst.sim.service_cli import run_from_cli
    from burst.sim.service_traces import ServiceTraceError
    from policies import PolicyValidationError

    try:
        run = run_from_cli(paths, config, strategies, default_names() if data else (), seed,
                           keep_replays=report_dir is not None)
    except PolicyValidationError as exc:
        raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None
    except (ServiceTraceError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if report_dir is not None:
        click.echo(f"report: {run.write_report(report_dir)}", err=True)
    if as_json:
        click.echo(json.dumps(run.merge_json(data), indent=2))
        return
    if data:
        _print_batch(data, days)
    for line in run.mapping_lines():
        click.echo(line)
    width = None if sys.stdout.isatty() else 200
    for table in run.tables():
        Console(width=width).print(table)
    for name in run.not_run:
        click.echo(f"{name}: no service form, not run on the services")


def _print_batch(data: dict[str, Any], days: float | None) -> None:
    """The batch comparison's text output."""
    t = data["trace"]
    click.echo(f"trace {t['path']} ({t['format']}): {t['jobs']} jobs, {t['gpu_hours']:,.0f} GPU-h, "
               f"peak {t['peak_gpus']:g} GPUs, P50 {t['p50_gpus']:g} GPUs; {t['start']} .. {t['end']}")
    for line in data["assumptions"]:
        click.echo(f"  assumption: {line}")
    from burst.sim.oracle import DRAIN

    window = f"the {days:g} day(s) of --days" if days is not None else "the trace's submissions"
    click.echo(f"  every strategy is billed over {t['start']} .. {t['end']}: {window} plus one drain day "
               f"({DRAIN.total_seconds() / 86400:g} d) for the work still running to finish; once nothing is queued, "
               "what still runs then is charged to its end at its nodes' prices")
    table = Table()
    for col in ("strategy", "cost $", "vs oracle", "wait p50", "wait p95", "wait p99", "delay mean", "delay p95",
                "SLO miss", "jobs done", "on-prem util", "interrupted", "lost GPU-h", "TTC p95"):
        table.add_column(col, justify="right" if col != "strategy" else "left")
    oracle_cost = data["strategies"].get("oracle", {}).get("cost_usd")
    short = unfinished_strategies(data["strategies"])
    for name, r in data["strategies"].items():
        vs = f"{r['cost_usd'] / oracle_cost:.2f}x" if oracle_cost else "n/a"
        mark = " !" if name in short else ""
        table.add_row(name + mark, f"{r['cost_usd']:,.0f}", vs + mark, f"{r['wait_p50_s']:,.0f}s",
                      f"{r['wait_p95_s']:,.0f}s", f"{r['wait_p99_s']:,.0f}s", f"{r['delay_mean_s']:,.0f}s",
                      f"{r['delay_p95_s']:,.0f}s", str(r["slo_violations"]), f"{r['jobs_completed']}/{r['jobs']}",
                      f"{r['onprem_utilization']:.1%}", str(r["interruptions"]), f"{r['lost_gpu_hours']:,.1f}",
                      f"{r['time_to_capacity_p95_s']:,.0f}s")
    width = None if sys.stdout.isatty() else 200  # piped output keeps whole columns
    Console(width=width).print(table)
    if short:
        oracle = data["strategies"].get("oracle")
        than = f"the {oracle['jobs_completed']} jobs the oracle did" if oracle else "every job"
        click.echo(f"! {', '.join(short)}: completed fewer jobs than {than} by the end of the drain day; "
                   "a cost for less work, not comparable with the others")
    Console(width=width).print(gap_table(data["strategies"]))
    click.echo(f"wall {data['wall_s']:.1f}s")


def unfinished_strategies(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The strategies that completed fewer jobs than the oracle (where it ran, else than all jobs); bounds aside."""
    reference = results["oracle"]["jobs_completed"] if "oracle" in results else None
    return [name for name, r in results.items()
            if name not in ("oracle", "floor") and r["jobs_completed"] < (reference if reference is not None else r["jobs"])]


def gap_table(strategies: dict[str, Any]) -> Table:
    """The cost gap waterfall: each strategy's cost above the oracle, by part (USD; parts defined in burst.sim.engine)."""
    from burst.sim.engine import GAP_PARTS

    table = Table(title="cost above the oracle, by part (USD)")
    table.add_column("strategy")
    table.add_column("gap", justify="right")
    for part in GAP_PARTS:
        table.add_column(part.replace("_", " "), justify="right")
    for name, r in strategies.items():
        gap = r.get("cost_gap", {})
        table.add_row(name, f"{round(sum(gap.values())):,}", *(f"{round(gap.get(part, 0.0)):,}" for part in GAP_PARTS))
    return table


__all__ = ["gap_table", "simulate_cmd", "unfinished_strategies"]
