"""`burst services`: each inference service as the daemon last saw and decided it, from the state store."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from burst.cli_common import CONFIG_OPTION, STATE_OPTION, store_path
from burst.store_pg import location_exists, shown
from burst.tables import print_table


def read_statuses(path: Path | str) -> list[dict[str, Any]]:
    """The services' last statuses the daemon recorded in the state at `path` ([] when it has run none)."""
    from burst.state import MetaKey
    from burst.state_option import open_for_command

    with open_for_command(path, read_only=True) as store:
        raw = store.get_meta(MetaKey.SERVICES)
    return list(json.loads(raw)) if raw else []


def print_service_forecast(config_path: Path | None, name: str, at: datetime, as_json: bool) -> None:
    """Print service `name`'s request-rate forecast from `at` over the next hour: its history read from the rate
    source the config names (as the daemon reads it), forecast by burst's rate forecaster at `rates.step`."""
    from burst.runtime import load_run_config, rate_source
    from burst.service_forecasts import HORIZON_S, ServiceForecasts
    from burst.workloads.rates import RateUnavailable
    from policies.loader import load_policy_dir

    config = load_run_config(config_path)
    policies = load_policy_dir(config.policies_path())
    found = [s for p in policies.values() for s in p.services
             if f"{s.tenant}/{s.name}" == name or ("/" not in name and s.name == name)]
    if len(found) != 1:
        raise click.ClickException(f"no service {name} in the policies" if not found else
                                   f"{name} names several services: give TENANT/NAME")
    service = found[0]
    rates = rate_source(config)
    if rates is None:
        raise click.ClickException("burst.yaml names no rate source (rates: prometheus or synthetic)")
    forecasts = ServiceForecasts(rates, background=False, step_s=config.rates.step)
    try:
        forecasts.observe(service, at, rates.rate(service, at))
    except RateUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    made = forecasts.forecast(service, at)
    key = (service.tenant, service.name)
    if made is None:
        why = forecasts.errors.get(key) or "under a day of history"
        raise click.ClickException(f"no forecast for {name} at {at.isoformat()}: {why}")
    levels = sorted(made.quantiles)
    rows: list[dict[str, Any]] = [
        {"at": t.isoformat(), **{f"p{round(q * 100)}": made.quantiles[q][i] for q in levels}}
        for i, t in enumerate(made.at) if t <= at + timedelta(seconds=HORIZON_S)]
    if as_json:
        click.echo(json.dumps({"service": f"{service.tenant}/{service.name}", "at": at.isoformat(),
                               "step_s": config.rates.step, "forecast": rows}, indent=2))
        return
    table = Table(title=f"{service.tenant}/{service.name}: request rate (req/s) from {at.isoformat()}")
    columns = [k for k in rows[0] if k != "at"] if rows else []
    for col in ("at", *columns):
        table.add_column(col)
    for row in rows:
        table.add_row(row["at"][:19], *(f"{row[c]:.4g}" for c in columns))
    print_table(table, whole=("at",))


def _rps(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


@click.command("services")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--tenant", default=None, help="Only this tenant's services.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per service.")
def services_cmd(config_path: Path | None, state: Path | str | None, tenant: str | None, as_json: bool) -> None:
    """Each inference service at the daemon's last tick: desired, ready, starting, standby and spot replicas, the
    observed request rate, the forecast over the next lead time and hour, and the last decision's reason.

    Reads the state file `burst run` writes (services run where burst.yaml's `rates:` names where their rates
    are read). Exits 1 when the state file is missing, or when --tenant names a tenant with no service.
    """
    path = store_path(config_path, state)
    if not location_exists(path):
        raise click.ClickException(f"{path}: no state file (run burst run with it first)")
    statuses = [s for s in read_statuses(path) if tenant is None or s["tenant"] == tenant]
    if tenant is not None and not statuses:
        raise click.ClickException(f"tenant {tenant} has no service in {shown(path)}")
    if as_json:
        click.echo(json.dumps(statuses, indent=2))
        return
    table = Table(title=f"services in {shown(path)}")
    for col in ("service", "desired", "ready", "starting", "standby", "spot", "rate req/s", "lead forecast", "hour forecast",
                "at", "reason"):
        table.add_column(col)
    for s in statuses:
        reason = s["error"] or s["reason"]
        table.add_row(f"{s['tenant']}/{s['name']}", str(s["desired"]), str(s["ready"]), str(s["starting"]),
                      str(s["standby"]), str(s.get("spot", 0)), _rps(s["observed_rps"]), _rps(s["forecast_lead_rps"]),
                      _rps(s["forecast_hour_rps"]), s["at"][:19], reason)
    print_table(table, whole=("service",), droppable=("at", "hour forecast", "standby", "spot"))
    if not statuses:
        click.echo("no services: burst.yaml's rates: names no rate source, or no tenant policy declares services:")
