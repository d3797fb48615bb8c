"""A projection's runs: in worker processes or not, the same results; what is kept of each run's ledger; order."""

from __future__ import annotations

from datetime import timedelta

from burst.model import Budget, Forecast, Policy, SpotPolicy
from burst.projection.arrivals import JobTemplate
from burst.projection.budget import breaches
from burst.projection.project import project
from burst.projection.runs import Batch, demand_jobs, per_bin, run_all
from burst.projection.whatif import WhatIf, run_for
from burst.sim.engine import simulate
from burst.sim.setup import SimSetup
from forecasting.paths import Dependence
from tests.test_projection import NO_STATS, T0, tiny_setup

HOURS = 8


def _forecast() -> Forecast:
    stamps = tuple(T0 + timedelta(hours=k) for k in range(HOURS))
    return Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                    quantiles={0.1: (4.0,) * HOURS, 0.5: (12.0,) * HOURS, 0.9: (24.0,) * HOURS, 0.99: (30.0,) * HOURS})


def _setup() -> SimSetup:
    return tiny_setup(batch=Policy(tenant="batch", budget=Budget(usd_per_month=90.0),
                                   spot=SpotPolicy(allowed=True, fault_tolerant_fraction=0.5)))


MIX = (JobTemplate("batch", 8, 3600.0), JobTemplate("batch", 2, 1800.0), JobTemplate("prod", 4, 5400.0))


def _measured(run: dict[str, object]) -> dict[str, object]:
    """A run's figures less the seconds it took."""
    return {k: v for k, v in run.items() if k not in ("wall_s", "forecast_fit_s")}


def test_runs_in_worker_processes_give_what_one_process_gives() -> None:
    kwargs = {"start": T0, "horizon_s": HOURS * 3600.0, "strategy": "burst-no-forecast", "paths": 20, "seed": 3,
              "what_ifs": [WhatIf("no-spot", spot=False)], "dependence": Dependence(0.3, 0.5, "scripted"),
              "month_to_date": {"batch": 10.0}}
    one = project(_setup(), NO_STATS, _forecast(), MIX, workers=1, **kwargs)  # type: ignore[arg-type]
    two = project(_setup(), NO_STATS, _forecast(), MIX, workers=2, **kwargs)  # type: ignore[arg-type]
    assert one.to_json() == two.to_json()
    for a, b in zip(one.scenarios(), two.scenarios(), strict=True):
        assert [_measured(r.to_json()) for r in a.runs] == [_measured(r.to_json()) for r in b.runs]
        assert a.spend == b.spend and a.exceeds_at == b.exceeds_at
    assert len({r.cost_usd for r in one.baseline.runs}) > 5, "the paths' runs differ: the comparison says something"


def test_a_run_keeps_its_ledgers_bins_and_breaches_not_its_rows() -> None:
    setup = _setup()
    result = project(setup, NO_STATS, _forecast(), MIX, start=T0, horizon_s=HOURS * 3600.0,
                     strategy="burst-no-forecast", paths=20, seed=3, month_to_date={"batch": 10.0})
    base = result.baseline
    assert all(not r.ledger for r in base.runs)
    breached = 0
    for i, (run, spend) in enumerate(zip(base.runs, base.spend, strict=True)):
        jobs = demand_jobs(result.paths[i], 3600.0, T0, MIX, setup, 3, prefix=f"proj{i}")
        again = simulate(run_for("burst-no-forecast", setup, NO_STATS), jobs, start=T0,
                         end=T0 + timedelta(hours=HOURS), seed=3, keep_ledger=True)
        assert again.cost_usd == run.cost_usd  # the same run, now with its ledger rows
        assert spend.bins == {line: tuple(v) for line, v in per_bin(again.ledger, T0, HOURS * 3600.0)[1].items()}
        expected = breaches(again.ledger, {"batch": Budget(usd_per_month=90.0)}, start=T0,
                            month_to_date={"batch": 10.0})
        assert spend.exceeds_at == expected  # prod has no policy, so no budget: nothing to pass
        breached += expected["batch"] is not None
    assert 0 < breached < len(base.runs), "some runs pass the budget and some do not: the breach is per run"
    assert base.exceeds_at["batch"] == base.spend[base.median_index].exceeds_at["batch"]


def test_the_largest_paths_run_first() -> None:
    setup = _setup()
    demand = ((2.0,) * HOURS, (20.0,) * HOURS, (8.0,) * HOURS, (0.0,) * HOURS)
    batch = Batch(strategy="burst-no-forecast", setup=setup, stats=NO_STATS, options={"baseline": None},
                  demand=demand, step_s=3600.0, start=T0, horizon_s=HOURS * 3600.0, mix=MIX, seed=0, prior=())
    order: list[int] = []
    results = run_all(batch, done=lambda _name, i: order.append(i))
    assert order == [1, 2, 0, 3]
    assert sorted(results) == [("baseline", i) for i in range(4)]
