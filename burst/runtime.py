"""Assemble a running controller from a `burst.yaml`: providers, job source, store, clock, prices.

This is the only place that turns configuration into live objects; `burst
run`, `burst plan` and the tests build controllers through it. The embedded
quickstart (`burst run` with no `--config`) is the config shipped at
`burst/data/quickstart/burst.yaml`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from burst import retention, store_files, store_pg
from burst.agent.bridge import AgentBridge
from burst.agent.hub import AgentHub
from burst.agent.router import load_tokens
from burst.bounds import SERVICE_EVENT_MEMORY_S
from burst.catalog import Catalog, OnPremCost, PriceRow, price_drift
from burst.extras import missing_extra
from burst.lease import Deposed, LeaderLease, StoreLease, WallClockLease
from burst.metrics import ControllerMetrics, MeteredProvider
from burst.model import DemandPoint, NodeGroup, Policy, Service, ServiceEvent, TenantName
from burst.provider_specs import PROVIDERS, ConfigError, ProviderContext
from burst.reconcile import Controller, LoopSettings, LoopStats, TickReport, run_loop
from burst.retention import RetentionReport
from burst.service_forecasts import ServiceForecasts
from burst.service_loop import ServiceLoop
from burst.state import MetaKey, Store
from burst.store_lock import WriterLock, hold_writer
from burst.wakeup import JobWatch, NodeWatch, NoticeWatch, Wakeup, Watch
from burst.workloads.base import JobSource
from burst.workloads.feed import ArrivalFeed
from burst.workloads.queue import StoreQueue
from burst.workloads.rates import DailyCycle, RateSource, SyntheticRates
from burst.workloads.replicas import QueueReplicas
from burst.workloads.synthetic import SyntheticSettings, SyntheticWorkload
from forecasting.select import SelectingForecaster
from forecasting.service import ForecastService
from policies import BurstConfig, PolicyError, PolicyReloader, PolicyValidationError, load_config
from policies.loader import read_yaml
from providers.base import Provider, ProviderError
from providers.sim import ManualClock, SimProvider

if TYPE_CHECKING:
    from burst.workloads.kubernetes import KubernetesParts

log = logging.getLogger(__name__)

NOTICE_READ_S = 1.0
"""Between ticks, a cloud's event source (an SQS receive, a zone operations list) is read at most once a wall second."""


def quickstart_config_path() -> Path:
    """Where the embedded quickstart `burst.yaml` is installed."""
    return Path(str(resources.files("burst") / "data" / "quickstart" / "burst.yaml"))


def config_node_groups(path: Path | None) -> tuple[NodeGroup, ...]:
    """The node groups burst.yaml at `path` lists (none without a path); a config that does not load is a
    `ConfigError` naming every problem."""
    if path is None:
        return ()
    try:
        return load_run_config(path).node_groups_model()
    except PolicyValidationError as exc:
        raise ConfigError("\n".join(str(e) for e in exc.errors)) from None
    except ValueError as exc:  # a ConfigError too
        raise ConfigError(str(exc)) from None


def load_run_config(path: Path | None) -> BurstConfig:
    """The config at `path`, or the embedded quickstart when `path` is None."""
    return load_config(path if path is not None else quickstart_config_path())


def catalog_from_config(config: BurstConfig) -> Catalog:
    """The price catalog with the config's extra CSV, overrides and on-prem cost model applied."""
    base = Catalog.load(config.catalog_path())
    extra: list[PriceRow] = []
    for doc in config.catalog.overrides:
        known = base.find(doc.provider, doc.instance_type, doc.region)
        if doc.read_on is None:
            raise ConfigError(
                f"catalog.overrides: {doc.provider}/{doc.instance_type}/{doc.region} needs read_on, the date "
                "the price was read (YYYY-MM-DD), so cost reports can say how old it is"
            )
        gpu_model = doc.gpu_model or (known.gpu_model if known else None)
        gpus = doc.gpus or (known.gpus if known else None)
        if gpu_model is None or gpus is None:
            raise ConfigError(
                f"catalog.overrides: {doc.provider}/{doc.instance_type}/{doc.region} is not in the catalog; "
                "give gpu_model and gpus for a new instance type"
            )
        extra.append(
            PriceRow(
                provider=doc.provider,
                instance_type=doc.instance_type,
                region=doc.region,
                gpu_model=gpu_model,
                gpus=gpus,
                gpu_memory_gib=doc.gpu_memory_gib if doc.gpu_memory_gib is not None else (known.gpu_memory_gib if known else 0.0),
                on_demand_usd_per_hour=doc.on_demand_usd_per_hour,
                spot_usd_per_hour=doc.spot_usd_per_hour,
                source=doc.source or "burst.yaml catalog.overrides",
                read_on=doc.read_on.isoformat(),
            )
        )
    onprem = OnPremCost(**config.catalog.onprem.model_dump()) if config.catalog.onprem else OnPremCost()
    return Catalog.load(config.catalog_path(), extra=extra, onprem=onprem)


@dataclass
class Runtime:
    """A controller and everything it was built from; `close()` releases the store."""

    config: BurstConfig
    store: Store
    controller: Controller
    providers: dict[str, Provider]
    reloader: PolicyReloader
    catalog: Catalog
    sim_clock: ManualClock | None
    state_path: Path | str  # a SQLite file, or a postgresql:// URL
    temp_dir: tempfile.TemporaryDirectory[str] | None = None
    forecasts: ForecastService | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    hub: AgentHub | None = None  # the on-prem node agents' link, when api.agent_tokens is set
    config_file: Path | None = None  # the burst.yaml the daemon re-reads on SIGHUP or change; None = never
    _reload_requested: bool = False
    _backed_up_at: datetime | None = None
    _retained_at: datetime | None = None
    _policy_stamp: tuple[tuple[str, int, int], ...] | None = None
    _config_stamp: tuple[int, int] | None = None
    on_tick_timed: list[Callable[[TickReport | None, float], None]] = field(default_factory=list)
    kube_pods: Watch | None = None  # the Kubernetes pod watch, when jobs are pods
    writer: WriterLock | None = None  # the store's writer lock, held from the start to close()
    lost_store: str | None = None  # why the writer lock was lost (another daemon took the store): the run stops

    def now(self) -> datetime:
        return self.controller.clock()

    def run(
        self,
        *,
        until: datetime | None = None,
        on_tick: Callable[[TickReport], None] | None = None,
        realtime: bool = True,
    ) -> LoopStats:
        """Tick until `until` or `stop`: when events wake the loop (`wakeup`), else at the heartbeat, the
        config's interval; on the sim clock, ticks step simulated time.

        With a sim clock each pause advances simulated time by its length and
        sleeps that / clock_speed wall seconds (none when `realtime` is False).
        A loop ended by `stop` (SIGTERM) is a clean stop: the leader lease is released.
        """
        cfg = self.config
        if self.sim_clock is not None:
            sim_clock = self.sim_clock

            def wait(seconds: float) -> None:
                sim_clock.advance(seconds)
                if realtime:
                    self.stop.wait(seconds / cfg.clock_speed)

        else:

            def wait(seconds: float) -> None:
                self.stop.wait(seconds)

        stats = run_loop(
            self.controller,
            interval_s=lambda: self.config.loop_interval,  # a reloaded config re-paces the next wait
            jitter_s=lambda: self.config.loop_jitter,
            wait=wait,
            stop=self.stop,
            until=until,
            on_tick=on_tick,
            on_timing=self._timed,
            wakeup=self.wakeup(),
            max_failing_s=cfg.loop_max_failing,
            known_failure=known_failure,
        )
        if self.lost_store is not None and stats.gave_up is None:
            stats.gave_up = self.lost_store
        if self.stop.is_set():
            self.release_lease()
        return stats

    def wakeup(self) -> Wakeup | None:
        """What wakes this daemon's loop before its heartbeat (None when `loop_events` is off): jobs submitted
        to or finished in the embedded queue (`burst submit` on the same store, the API) or Kubernetes pods,
        nodes ready or lost in sim groups, and interruption notices and lost nodes any provider reports."""
        cfg = self.config
        if not cfg.loop_events:
            return None
        remote = any(not isinstance(p, SimProvider) for p in self.providers.values())
        watches: list[Watch] = [NoticeWatch(self.controller, min_wall_s=NOTICE_READ_S if remote else 0.0)]
        source = self.controller.source
        queue = source.queue if isinstance(source, ArrivalFeed) else source
        if isinstance(queue, StoreQueue):
            watches.append(JobWatch(queue.store))
        elif self.kube_pods is not None:
            watches.append(self.kube_pods)
        watches += [NodeWatch(p) for p in self.providers.values() if isinstance(p, SimProvider)]
        return Wakeup(watches, self.controller.clock, idle_s=cfg.loop_batch_idle, max_s=cfg.loop_batch_max)

    def release_lease(self) -> None:
        """Give up the leader lease if this daemon holds it (a clean stop), so a standby leads at its next tick."""
        lease = self.controller.lease
        state = lease.current() if lease is not None else None
        now = lease.clock() if isinstance(lease, WallClockLease) else self.now()
        if lease is None or state is None or state.holder != lease.holder or state.expires_at <= now:
            return
        lease.release()
        log.info("leader lease released", extra={"holder": lease.holder, "epoch": state.epoch})

    def __post_init__(self) -> None:
        self._policy_stamp = _dir_stamp(self.reloader.path)
        self._config_stamp = _file_stamp(self.config_file)

    def request_reload(self) -> None:
        """Ask for the config and policies to be reloaded after the current tick (SIGHUP's handler calls this)."""
        self._reload_requested = True

    def reload_if_changed(self) -> list[str] | None:
        """Reload burst.yaml and the policies if asked to or if their files changed; the errors, or None.

        On any error the last good config or policy set stays in force.
        """
        stamp, config_stamp = _dir_stamp(self.reloader.path), _file_stamp(self.config_file)
        if not self._reload_requested and stamp == self._policy_stamp and config_stamp == self._config_stamp:
            return None
        asked, self._reload_requested = self._reload_requested, False
        config_errors: list[str] = []
        if asked or config_stamp != self._config_stamp:
            self._config_stamp = config_stamp
            config_errors = self._reload_config()
        self._policy_stamp = stamp
        errors = [str(e) for e in self.reloader.reload()]
        if errors:
            log.error("policy reload failed; the last good policies stay in force", extra={"errors": errors})
        else:
            log.info("policies reloaded", extra={"tenants": sorted(self.reloader.current),
                                                 "generation": self.reloader.generation})
        return config_errors + errors

    def _reload_config(self) -> list[str]:
        """Re-read `config_file` and apply its live keys; the errors (nothing applied when there are any)."""
        from burst.catalog import UnknownInstanceType
        from burst.config_reload import apply_live, diff_config

        if self.config_file is None:
            return []
        try:
            reloaded = load_config(self.config_file)
            checked = validate_config(reloaded, self.config_file)
            change = diff_config(self.config, reloaded)
            catalog = checked if "catalog" in change.live else self.catalog
            for provider in self.providers.values():
                for group in provider.node_groups():
                    catalog.group_price(group)  # a catalog that cannot price a running group is refused
        except PolicyValidationError as exc:
            errors = [str(e) for e in exc.errors]
        except (ConfigError, UnknownInstanceType, OSError) as exc:
            errors = [f"{self.config_file}: {exc}"]
        else:
            if change.restart:
                log.warning("config keys changed that take effect only after a restart; their running values stay",
                            extra={"keys": list(change.restart)})
            if change.live:
                self.config = apply_live(self.config, reloaded, change)
                self.catalog = catalog
                self.controller.prices = catalog
                log.info("config reloaded", extra={"keys": list(change.live)})
            return []
        log.error("config reload failed; the last good config stays in force", extra={"errors": errors})
        return errors

    def retain_if_due(self, now: datetime) -> RetentionReport | None:
        """Apply the config's retention (roll the old ledger up, prune finished rows) when its interval has
        passed on the controller's clock since the last pass; what went, or None."""
        settings = self.config.retention
        if self._retained_at is not None and (now - self._retained_at).total_seconds() < settings.interval:
            return None
        self._retained_at = now
        report = retention.apply(self.store, settings, now)
        if report.ledger_read or any(report.deleted.values()):
            log.info("retention applied", extra={"ledger_rows_rolled_up": report.ledger_read,
                                                  "hourly_rows_written": report.ledger_written,
                                                  "deleted": report.deleted})
        return report

    def backup_if_due(self, now: datetime) -> Path | None:
        """Back the state file up (`state_backup` in burst.yaml) when its interval has passed since the last
        backup; the new backup, or None. Never for the quickstart's temporary store, nor with `keep: 0`."""
        settings = self.config.state_backup
        if self.temp_dir is not None or settings.keep == 0 or not isinstance(self.state_path, Path):
            return None  # a PostgreSQL store is the server's to back up
        if self._backed_up_at is None:
            saved = store_files.backups(self.state_path)
            self._backed_up_at = store_files.backup_taken_at(saved[-1]) if saved else None
            if self._backed_up_at is not None and self._backed_up_at > now:
                self._backed_up_at = None  # an earlier run's copy, on a clock --fresh has since started again
        if self._backed_up_at is not None and (now - self._backed_up_at).total_seconds() < settings.interval:
            return None
        try:
            made = self.store.backup(now, keep=settings.keep)
        except (OSError, store_files.DamagedStore) as exc:
            log.error("state file backup failed", extra={"error": str(exc)})
            self._backed_up_at = now  # retried at the next interval, not every tick
            return None
        self._backed_up_at = now
        log.info("state file backed up", extra={"backup": str(made)})
        return made

    def _timed(self, report: TickReport | None, seconds: float) -> None:
        """Feed the metrics (and any other listener, e.g. the API's view) one tick's report and duration."""
        self._check_writer()
        self.reload_if_changed()
        if report is not None and not report.standby:
            self.retain_if_due(report.at)
            self.backup_if_due(report.at)
        if report is None:
            self.metrics.tick_failed(seconds)
        else:
            forecasts = self.forecasts.forecasts(report.at) if self.forecasts is not None and not report.standby else ()
            self.metrics.observe_tick(
                report,
                seconds=seconds,
                policies=self.reloader.current,
                forecasts=forecasts,
                spend_month_usd=report.snapshot.spend_month_usd if report.snapshot else None,
                prices=self.catalog.group_price,
            )
            self.metrics.observe_ledger(self.store, report.at, report.snapshot.groups if report.snapshot else (),
                                        leading=not report.standby)
        for listener in self.on_tick_timed:
            listener(report, seconds)

    def _check_writer(self) -> None:
        """Stop the loop when this daemon's writer lock went to another daemon (a PostgreSQL session lost)."""
        who = self.writer.check() if self.writer is not None else None
        if who is not None:
            self.lost_store = f"the state store's writer lock is now held by {who}; this daemon stops acting"
            log.error("writer lock lost; stopping", extra={"holder": who})
            self.stop.set()

    def price_drift(self) -> list[str]:
        """The node groups whose provider offers them at a price the catalog disagrees with, one line each
        (`burst.catalog.price_drift`); a provider that cannot say now (down, no credentials) is passed over."""
        out: list[str] = []
        for name, provider in self.providers.items():
            try:
                offered = [(g, provider.offerings(g.id)) for g in provider.node_groups()]
            except ProviderError as exc:
                log.debug("offerings unread", extra={"provider": name, "detail": f"{type(exc).__name__}: {exc}"})
                continue
            out.extend(line for g, offerings in offered
                       if (line := price_drift(g, offerings, self.catalog.group_price(g))) is not None)
        return out

    def close(self) -> None:
        self.store.close()
        if self.writer is not None:
            self.writer.release()
            self.writer = None
        if self.temp_dir is not None:
            self.temp_dir.cleanup()


def known_failure(exc: BaseException) -> str | None:
    """Decide whether a failed tick's error is an outage or a lost lease rather than a bug: one line saying
    what it is (logged without a traceback), or None (logged with one).

    A store server that is down or failing over (psycopg's OperationalError, `StoreUnavailable`), a SQLite
    file that is locked or cannot be read or written, and a leader lease lost to another daemon (`Deposed`).
    """
    if isinstance(exc, Deposed):
        return f"this daemon no longer leads ({exc})"
    if isinstance(exc, store_pg.StoreUnavailable):
        return f"the state store is unavailable ({exc})"
    if isinstance(exc, sqlite3.OperationalError | sqlite3.ProgrammingError):
        return f"the state file cannot be used ({exc})"
    if type(exc).__name__ == "OperationalError" and type(exc).__module__.startswith("psycopg"):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"the state store's server is unavailable ({first})"
    return None


def validate_config(config: BurstConfig, config_file: Path | None = None) -> Catalog:
    """Decide whether `config` can be run, before anything is built: its price catalog, or one line saying why not.

    The same checks guard the start and a reload, so a file refused at start (no node groups: an empty or
    truncated burst.yaml) is refused on reload too. Raises ConfigError, or UnknownInstanceType for a group
    the catalog cannot price, or (for `workload.synthetic`, given the file it came from) PolicyValidationError
    with the `FILE:LINE: field: message` of the setting at fault.
    """
    groups = config.node_groups_model()
    if not groups and not _discovers(config):
        raise ConfigError("node_groups: the config has no node groups; add at least one")
    unsupported = sorted({g.provider for g in groups} - set(PROVIDERS))
    if unsupported:
        raise ConfigError(
            f"node_groups: provider(s) {', '.join(unsupported)} are not available in this build of burst; "
            f"use provider {', '.join(list(PROVIDERS)[:-1])} or {list(PROVIDERS)[-1]} for these groups"
        )
    for spec in PROVIDERS.values():
        if spec.section is not None and spec.settings(config) is None and any(g.provider == spec.name for g in groups):
            raise ConfigError(f"node_groups: provider {spec.name} needs {spec.section_fix}")
    catalog = catalog_from_config(config)
    for g in groups:
        catalog.group_price(g)
    if config.workload.synthetic is not None and config.workload.kubernetes is None:
        try:
            SyntheticSettings.from_mapping(config.workload.synthetic)
        except ValueError as exc:
            if config_file is None:
                raise ConfigError(str(exc)) from None
            raise PolicyValidationError([located(config_file, str(exc))]) from None
    return catalog


def located(config_file: Path, message: str) -> PolicyError:
    """Decide the `FILE:LINE: field: message` of an error `field: message` about a key path of `config_file`."""
    field, _, why = message.partition(": ")
    try:
        line = read_yaml(config_file).line_of(field.split("."))
    except PolicyValidationError:
        line = 1
    return PolicyError(str(config_file), line, field, why or message)


def declared_groups(config: BurstConfig) -> tuple[NodeGroup, ...] | None:
    """The node groups `config` fixes by itself, or None when a provider discovers more (tags, Terraform outputs)."""
    if _discovers(config) or config.aws_terraform_outputs() is not None:
        return None
    return config.node_groups_model()


def _discovers(config: BurstConfig) -> bool:
    """Whether a provider discovers node groups the config does not list (tags, Terraform outputs)."""
    return any(spec.discovers(config) for spec in PROVIDERS.values())


def build_runtime(
    config: BurstConfig,
    *,
    state_path: Path | str | None = None,
    ephemeral: bool = False,
    sim_start: datetime | None = None,
    config_file: Path | None = None,
    fresh: bool = False,
    read_only: bool = False,
) -> Runtime:
    """Build the controller `config` describes.

    `state_path` overrides the config's; `ephemeral` keeps state in a fresh
    temporary directory removed on `close()` (the quickstart's default).
    `sim_start` overrides the sim clock's start instant. `config_file` is the
    file `config` was read from, re-read on SIGHUP or change (None: never).
    `fresh` moves an existing state file aside (`<state>.damaged-<time>`) and
    starts a new one: the deliberate way past a damaged file, which is
    otherwise refused with `burst.store_files.DamagedStore`. `read_only` opens
    an existing store for reading (`burst plan`): nothing is written.

    A writing runtime holds the store's writer lock (`burst.store_lock`) until
    `close()`, shared when it elects a leader; another daemon on the store
    without election is refused with `StoreHeld`. A start that fails writes nothing: a store it created is
    removed, and a file `fresh` moved aside is moved back.
    """
    catalog = validate_config(config, config_file)
    reloader = PolicyReloader(config.policies_path())
    if reloader.last_errors:
        raise ConfigError("\n".join(str(e) for e in reloader.last_errors))
    temp_dir = tempfile.TemporaryDirectory(prefix="burst-") if ephemeral else None
    path: Path | str = Path(temp_dir.name) / "burst.db" if temp_dir else (state_path or config.state_file())
    if store_pg.is_url(path) and fresh:
        raise ConfigError(f"--fresh moves a SQLite state file aside; {store_pg.redact(str(path))} is a "
                          "PostgreSQL database: drop and re-create it to start over")
    holder = config.leader.holder or f"{socket.gethostname()}:{os.getpid()}"
    writer = None
    try:
        if temp_dir is None and not read_only:
            writer = hold_writer(path, holder, shared=config.leader.enabled)
        return _build_on_store(config, catalog, reloader, path, temp_dir, writer, sim_start=sim_start,
                               config_file=config_file, fresh=fresh, read_only=read_only)
    except store_pg.StoreUnavailable as exc:
        raise ConfigError(str(exc)) from None
    except BaseException:
        if writer is not None:
            writer.release()
        if temp_dir is not None:
            temp_dir.cleanup()
        raise


def _build_on_store(
    config: BurstConfig, catalog: Catalog, reloader: PolicyReloader, path: Path | str,
    temp_dir: tempfile.TemporaryDirectory[str] | None, writer: WriterLock | None, *, sim_start: datetime | None,
    config_file: Path | None, fresh: bool, read_only: bool,
) -> Runtime:
    """Open the store at `path` and build the runtime on it; on any failure, leave the files as they were."""
    file = path if isinstance(path, Path) else None
    before = _present(file)
    aside = store_files.move_aside(file, datetime.now(UTC)) if fresh and temp_dir is None and file else None
    if aside is not None:
        log.warning("state file moved aside; starting a fresh one", extra={"moved_to": str(aside)})
    try:
        store = Store.open(path, read_only=read_only, fresh=fresh)
    except BaseException:
        _undo_start(file, before, aside)
        raise
    try:
        runtime = _assemble(config, catalog, reloader, store, path, temp_dir, sim_start=sim_start,
                            config_file=config_file)
    except BaseException:
        store.close()
        _undo_start(file, before, aside)
        raise
    runtime.writer = writer
    return runtime


STATE_SUFFIXES = ("", "-wal", "-shm")
"""A SQLite state file and the log and index SQLite keeps beside it."""


def _present(file: Path | None) -> frozenset[str]:
    """Which of state file `file`'s parts (`STATE_SUFFIXES`) exist now."""
    if file is None:
        return frozenset()
    return frozenset(s for s in STATE_SUFFIXES if file.with_name(file.name + s).exists())


def _undo_start(file: Path | None, before: frozenset[str], aside: Path | None) -> None:
    """After a failed start: remove the parts of the state file this start created (not those there before
    it), and move back what `--fresh` moved aside."""
    if file is None:
        return
    for suffix in STATE_SUFFIXES:
        if suffix not in before or aside is not None:
            file.with_name(file.name + suffix).unlink(missing_ok=True)
    if aside is not None:
        for suffix in STATE_SUFFIXES:
            moved = aside.with_name(aside.name + suffix)
            if moved.exists():
                moved.rename(file.with_name(file.name + suffix))


def _assemble(
    config: BurstConfig, catalog: Catalog, reloader: PolicyReloader, store: Store, path: Path | str,
    temp_dir: tempfile.TemporaryDirectory[str] | None, *, sim_start: datetime | None, config_file: Path | None,
) -> Runtime:
    """The controller and its collaborators on an open `store`."""
    groups = config.node_groups_model()
    sim_clock = _sim_clock(config, store, sim_start) if config.clock == "sim" else None
    if not store.read_only:
        _record_gpu_models(store, groups)
    clock: Callable[[], datetime] = sim_clock if sim_clock is not None else (lambda: datetime.now(UTC))
    metrics = ControllerMetrics()
    hub = _agent_hub(config)
    providers: dict[str, Provider] = {}
    for spec in PROVIDERS.values():
        if not spec.wanted(config):
            continue
        listed = tuple(g for g in groups if g.provider == spec.name)
        try:
            provider = providers[spec.name] = spec.build(ProviderContext(config, listed, catalog, clock, hub))
        except ModuleNotFoundError as exc:
            missing = missing_extra(exc, f"provider {spec.name}")
            if missing is None:
                raise
            raise ConfigError(str(missing)) from None
        if spec.none_found:  # it may have found groups the config does not list: each must have a price
            if not provider.node_groups():
                raise ConfigError(spec.none_found.format(cluster=config.cluster))
            for g in provider.node_groups():
                catalog.group_price(g)
    kube = _kubernetes(config)
    holder = config.leader.holder or f"{socket.gethostname()}:{os.getpid()}"
    lease: LeaderLease | None = StoreLease(path, holder, duration_s=config.leader.lease) \
        if config.leader.enabled and config.leader.kind in ("store", "sqlite") else None
    if config.leader.enabled and config.leader.kind == "kubernetes":
        lease = (kube or _kubernetes(config, need=True)).lease(  # type: ignore[union-attr]
            holder, name=config.leader.name, namespace=config.leader.namespace, duration_s=config.leader.lease)
    if lease is not None and sim_clock is not None:  # each daemon's sim clock is its own: judge on the wall's
        lease = WallClockLease(lease)
    source = kube.source if kube is not None else _job_source(config, store, clock, complete_by_duration=True)
    policies: Callable[[], Mapping[TenantName, Policy]] = lambda: reloader.current  # noqa: E731
    forecasts = forecast_service(config, store, background=sim_clock is None)
    services = service_loop(config, store, clock, background=sim_clock is None, kubernetes=kube)
    controller = Controller(
        providers={name: MeteredProvider(kube.wrap(p, clock) if kube else p, metrics) for name, p in providers.items()},
        lease=lease,
        agents=kube.link if kube is not None else AgentBridge(hub, store, policies) if hub is not None else None,
        source=source,
        store=store,
        policies=policies,
        prices=catalog,
        clock=clock,
        cluster=config.cluster,
        forecaster=(lambda now, jobs: forecasts.forecasts(now)) if forecasts else None,
        settings=LoopSettings(interruption_cooldown_s=config.spot.interruption_cooldown),
        services=services,
    )
    return Runtime(
        config=config,
        store=store,
        controller=controller,
        providers=providers,
        reloader=reloader,
        catalog=catalog,
        sim_clock=sim_clock,
        state_path=path,
        temp_dir=temp_dir,
        forecasts=forecasts,
        metrics=metrics,
        hub=hub,
        config_file=config_file,
        kube_pods=kube.pods if kube is not None and config.workload.kubernetes is not None else None,
    )


def _agent_hub(config: BurstConfig) -> AgentHub | None:
    """The node agents' hub, with the per-node tokens of `api.agent_tokens` (None when that is not set)."""
    path = config.agent_tokens_path()
    if path is None:
        return None
    try:
        return AgentHub(load_tokens(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"api.agent_tokens: {exc}") from None


def _file_stamp(path: Path | None) -> tuple[int, int] | None:
    """A file's mtime and size (None when unset or unreadable): a change in either means a reload."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _dir_stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    """Names, mtimes and sizes of a policy directory's YAML files: a change in any means a reload."""
    try:
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError:
        return ()
    return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files if p.exists())


HISTORY_WINDOW_S = 30 * 86400.0
"""Demand history a refit reads: the last 30 days (Prophet needs weeks, not months, for daily and weekly shape)."""


def forecast_service(config: BurstConfig, store: Store, *, background: bool) -> ForecastService | None:
    """The loop's forecast source from `forecasting:` in burst.yaml (None when disabled); history from the store."""
    settings = config.forecasting
    if not settings.enabled:
        return None

    def history(now: datetime) -> list[DemandPoint]:
        return store.demand_history(since=now - timedelta(seconds=HISTORY_WINDOW_S), until=now)

    return ForecastService(
        history,
        step_s=settings.step,
        horizon_s=settings.horizon,
        refit_every_s=settings.refit_interval,
        background=background,
        fit=SelectingForecaster(min_history_s=settings.min_history, events=tuple(e.to_event() for e in settings.events)),
    )


def service_loop(config: BurstConfig, store: Store, clock: Callable[[], datetime], *, background: bool,
                 kubernetes: KubernetesParts | None) -> ServiceLoop | None:
    """The daemon's services from `rates:` in burst.yaml (None when it names no rate source): replicas as jobs of
    the embedded queue, or with `kubernetes` (workload.kubernetes) the Deployments annotated as the services'
    (`burst.workloads.kube_replicas`, on the same cluster cache); each service's events declared through the API
    (`stored_events`) beside its policy's own."""
    rates = rate_source(config)
    if rates is None:
        return None
    forecasts = ServiceForecasts(rates, background=background)
    if kubernetes is not None:
        from burst.workloads.kube_replicas import KubeReplicas  # the client loads only here

        replicas = KubeReplicas(kubernetes.cluster)
        return ServiceLoop(rates, replicas, forecasts, events=stored_events(store, clock),
                           undeclared=replicas.undeclared)
    return ServiceLoop(rates, QueueReplicas(StoreQueue(store)), forecasts, events=stored_events(store, clock))


def stored_events(store: Store, clock: Callable[[], datetime]) -> Callable[[Service], list[ServiceEvent]]:
    """A service's events declared through the API, as the service loop reads them each tick: those stored for it
    that ended less than `SERVICE_EVENT_MEMORY_S` ago (a past one still shapes the history its forecast is fitted
    on), in start order."""
    kept = timedelta(seconds=SERVICE_EVENT_MEMORY_S)

    def declared(service: Service) -> list[ServiceEvent]:
        return [e.event for e in store.service_events(service.tenant, service.name, ended_after=clock() - kept)]

    return declared


def rate_source(config: BurstConfig) -> RateSource | None:
    """Where the services' rates are read, from `rates:` (None when neither source is set)."""
    doc = config.rates
    if doc.synthetic is not None:
        cycles = {name: DailyCycle(c.base_rps, c.amplitude, c.peak_hour, c.noise) for name, c in doc.synthetic.services.items()}
        return SyntheticRates(cycles, seed=doc.synthetic.seed)
    if doc.prometheus is not None:
        from burst.workloads.prometheus import prometheus_rates

        return prometheus_rates(doc.prometheus, config.rates_file)
    return None


def _record_gpu_models(store: Store, groups: tuple[NodeGroup, ...]) -> None:
    """Add the configured groups' GPU models to those the state has recorded (a group dropped keeps its entry)."""
    known = json.loads(store.get_meta(MetaKey.GROUP_GPU_MODELS) or "{}")
    models = {**known, **{g.id: g.shape.gpu_model for g in groups}}
    if models != known:
        store.set_meta(MetaKey.GROUP_GPU_MODELS, json.dumps(models, sort_keys=True))


def _sim_clock(config: BurstConfig, store: Store, override: datetime | None) -> ManualClock:
    start = override or config.sim_start or datetime.now(UTC).replace(microsecond=0)
    last = store.get_meta(MetaKey.LAST_TICK)
    if override is None and last is not None:
        start = max(start, datetime.fromisoformat(last))
    return ManualClock(start)


def _kubernetes(config: BurstConfig, *, need: bool = False) -> KubernetesParts | None:
    """The job source, checkpoint channel and node handling of `workload.kubernetes` (None when it is not set,
    unless `need`: for the Lease alone, through the in-cluster service account or ~/.kube/config)."""
    doc = config.workload.kubernetes
    if doc is None and not need:
        return None
    try:  # the client loads only here
        from burst.workloads.kubernetes import KubernetesSettings, kubernetes_parts
    except ModuleNotFoundError as exc:
        missing = missing_extra(exc, "workload.kubernetes" if doc is not None else "leader.kind kubernetes")
        if missing is None:
            raise
        raise ConfigError(str(missing)) from None
    from providers.base import CredentialsError

    kubeconfig = config.kubeconfig_path()
    settings = KubernetesSettings() if doc is None else KubernetesSettings(
        kubeconfig=str(kubeconfig) if kubeconfig else None, context=doc.context, api_url=doc.api_url,
        tenant_label=doc.tenant_label, checkpoint_grace_s=doc.checkpoint_grace, pdb_retry_s=doc.pdb_retry,
        on_pdb_timeout=doc.on_pdb_timeout, drain_timeout_s=doc.drain_timeout)
    try:
        return kubernetes_parts(settings, will_wrap=True)
    except CredentialsError as exc:
        raise ConfigError(f"workload.kubernetes: {exc}") from None


def _job_source(
    config: BurstConfig, store: Store, clock: Callable[[], datetime], *, complete_by_duration: bool
) -> JobSource:
    queue = StoreQueue(store, complete_by_duration=complete_by_duration)
    if config.workload.synthetic is None:
        return queue
    try:
        settings = SyntheticSettings.from_mapping(config.workload.synthetic)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    workload = SyntheticWorkload(settings)

    def load_cursor() -> datetime | None:
        raw = store.get_meta(MetaKey.FEED_CURSOR)
        return datetime.fromisoformat(raw) if raw else None

    def save_cursor(at: datetime) -> None:
        store.set_meta(MetaKey.FEED_CURSOR, at.isoformat())

    return ArrivalFeed(queue, workload.jobs_between, start=clock(), load_cursor=load_cursor, save_cursor=save_cursor)


__all__ = [
    "ConfigError",
    "Runtime",
    "build_runtime",
    "catalog_from_config",
    "config_node_groups",
    "declared_groups",
    "known_failure",
    "load_run_config",
    "quickstart_config_path",
    "validate_config",
]
