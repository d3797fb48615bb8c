"""Hand-worked cases for the planner steps that read forecasts: elastic pre-scaling and steady-tier advice."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from builders import T0, TablePrices, group, job, ready_node

from burst.model import ActionKind, Budget, Forecast, JobState, Plan, Policy, PrescalePolicy, Snapshot, Tier
from burst.planner import PlanIds, plan
from burst.planner.context import build_context
from burst.planner.prescale import prescale_elastic
from burst.planner.steady import steady_advice

ONPREM = group("onprem", tier=Tier.STEADY, gpus=8, min_size=1, max_size=1)
OD_A = group("od-a", gpus=8)
OD_B = group("od-b", gpus=8, max_size=4)
PRICES = TablePrices({"onprem": 8.0, "od-a": 32.0, "od-b": 24.0})
DAY = 86400.0


def forecast(values: dict[int, float], *, tenant: str = "a", model: str = "any", history_s: float = 7 * DAY,
             spread: float = 4.0) -> Forecast:
    """A 5-minute-step forecast over the next hour: P50 given at each minute offset (else 0), P90/P99 above it; its
    backtest showed skill at rises (rise skill 0.5)."""
    stamps = tuple(T0 + timedelta(minutes=m) for m in range(5, 65, 5))
    p50 = tuple(values.get(m, 0.0) for m in range(5, 65, 5))
    return Forecast(tenant=tenant, gpu_model=model, timestamps=stamps,
                    quantiles={0.5: p50, 0.9: tuple(v + spread for v in p50), 0.99: tuple(v + 2 * spread for v in p50)},
                    model="prophet", history_s=history_s, backtest_rise_skill=0.5)


EAGER = 1e6
"""A wait value so high that pre-scaling always pays: the cases that test its other rules set it."""


def eager(**prescale: object) -> dict[str, Policy]:
    return {"a": Policy(tenant="a", prescale=PrescalePolicy(wait_usd_per_gpu_hour=EAGER, **prescale))}  # type: ignore[arg-type]


def run(snapshot: Snapshot, forecasts: list[Forecast], policies: dict[str, Policy] | None = None, now=T0) -> Plan:
    return plan(snapshot, forecasts, eager() if policies is None else policies, PRICES, now=now, ids=PlanIds("p1"))


def onprem_only(*extra_nodes, targets=None) -> Snapshot:
    return Snapshot(
        groups=(ONPREM, OD_A, OD_B),
        nodes=(ready_node("onprem-0", ONPREM), *extra_nodes),
        jobs=(),
        targets=targets or {"onprem": 1, "od-a": 0, "od-b": 0},
    )


def test_forecast_demand_within_the_lead_time_is_launched_ahead_at_p90() -> None:
    # lead = 300 s boot + 300 s buffer; P90 at +10 min is 26 + 4 = 30 GPUs against 8 on-prem: 22 short -> 3 nodes
    p = run(onprem_only(), [forecast({10: 26.0})])
    (up,) = p.actions
    assert (up.kind, up.target, up.count, up.size, up.step) == (ActionKind.SCALE_UP, "od-b", 3, 3, "prescale")
    # P50 rises by 26 GPUs over the lead time on the 0 demanded now, and P90 (30) does not bind
    assert "forecast rise of 26 any GPU(s) within 10 min on tenant a's 0 demanded now (at most its P90 of 30.0)" in up.reason
    assert "exceeds the 8 GPU(s)" in up.reason


def test_demand_beyond_the_lead_time_waits_and_a_longer_buffer_reaches_it() -> None:
    later = [forecast({20: 26.0})]
    assert run(onprem_only(), later).actions == ()
    longer = eager(quantile=0.9, buffer_s=900.0)
    (up,) = run(onprem_only(), later, longer).actions
    assert up.count == 3


def test_each_tenant_is_pre_scaled_at_its_own_quantile_or_not_at_all() -> None:
    running = job("r", gpus=8, state=JobState.RUNNING, nodes=("onprem-0",), started=T0 - timedelta(hours=1))
    snap = Snapshot(groups=(ONPREM, OD_B), nodes=(ready_node("onprem-0", ONPREM),), jobs=(running,),
                    targets={"onprem": 1, "od-b": 0})
    stamps = (T0 + timedelta(minutes=5), T0 + timedelta(minutes=10))
    rising = Forecast(tenant="a", gpu_model="any", timestamps=stamps,
                      quantiles={0.5: (0.0, 16.0), 0.9: (0.0, 24.0), 0.99: (0.0, 40.0)}, model="prophet",
                      backtest_rise_skill=0.5)

    def ahead(quantile: float | None) -> list[int | None]:
        policies = eager(quantile=quantile)
        return [a.count for a in run(snap, [rising], policies).actions]

    # need = min(8 demanded + P50 rise of 16, the quantile's level) against 8 GPUs of supply
    assert ahead(0.5) == [1]  # min(24, 16) = 16: 8 short
    assert ahead(0.9) == [2]  # min(24, 24) = 24: 16 short
    assert ahead(0.99) == [2]  # min(24, 40) = 24: the rise binds
    assert ahead(None) == []


def test_need_is_todays_demand_plus_the_forecast_rise_not_the_forecast_level() -> None:
    running = job("r", gpus=8, state=JobState.RUNNING, nodes=("onprem-0",), started=T0 - timedelta(hours=1))
    snap = Snapshot(groups=(ONPREM, OD_B), nodes=(ready_node("onprem-0", ONPREM),), jobs=(running,),
                    targets={"onprem": 1, "od-b": 0})
    flat_high = forecast({m: 100.0 for m in range(5, 65, 5)})
    assert run(snap, [flat_high]).actions == (), "a forecast level above today's demand, with no rise, waits"
    ramp = forecast({5: 100.0, 10: 116.0})
    (up,) = run(snap, [ramp]).actions
    assert up.count == 2 and "rise of 16 " in up.reason and "a's 8 demanded now" in up.reason  # 8 + 16 - 8


def test_a_forecast_on_under_a_day_of_history_does_not_pre_scale() -> None:
    assert run(onprem_only(), [forecast({10: 26.0}, history_s=DAY - 1)]).actions == ()


def test_capacity_already_booting_counts_as_supply() -> None:
    p = run(onprem_only(targets={"onprem": 1, "od-a": 0, "od-b": 2}), [forecast({10: 26.0})])
    (up,) = p.actions
    assert (up.target, up.count, up.size) == ("od-b", 1, 3)  # 8 + 16 booting = 24 < 30: one more node


def test_pre_scaling_folds_into_the_reactive_scale_up_of_the_same_group() -> None:
    snap = Snapshot(groups=(ONPREM, OD_B), nodes=(ready_node("onprem-0", ONPREM),),
                    jobs=(job("j1", gpus=8), job("j0", gpus=8)),
                    targets={"onprem": 1, "od-b": 0})
    p = run(snap, [forecast({10: 36.0})])
    ups = [a for a in p.actions if a.kind is ActionKind.SCALE_UP]
    assert len(ups) == 1, "one scale-up per group"
    (up,) = ups
    # reactive: one job fits on-prem, one needs a node; forecast P90 40 vs 8 + 8 = 16 -> 3 more nodes
    assert (up.count, up.size) == (4, 4)
    assert "pending job(s)" in up.reason and "ahead of it" in up.reason


def test_group_max_and_budget_bound_pre_scaling_and_say_so() -> None:
    p = run(onprem_only(), [forecast({10: 60.0})])  # 56 short: od-b's 4 nodes, then od-a for the rest
    assert [(a.target, a.count) for a in p.actions] == [("od-b", 4), ("od-a", 3)]
    capped = {"a": Policy(tenant="a", budget=Budget(usd_per_hour=50.0), prescale=PrescalePolicy(wait_usd_per_gpu_hour=EAGER))}
    p = run(onprem_only(), [forecast({10: 26.0})], capped)
    assert p.actions == ()
    assert any(h.step == "prescale" and "budget.usd_per_hour $50.00" in h.reason for h in p.holds)


def test_scale_in_stays_reactive_and_keeps_what_the_forecast_needs() -> None:
    idle = [ready_node(f"od-b-{i}", OD_B, idle_since=T0 - timedelta(minutes=30)) for i in range(3)]
    snap = onprem_only(*idle, targets={"onprem": 1, "od-a": 0, "od-b": 3})
    # without a forecast all three idle nodes go after their cooldown
    (down,) = run(snap, []).actions
    assert (down.kind, down.count) == (ActionKind.SCALE_DOWN, 3)
    # a forecast rise of 20 GPUs within the lead time keeps two of them (8 on-prem + 16 >= 20)
    ramp = [forecast({10: 20.0})]
    (down,) = run(snap, ramp).actions
    assert (down.kind, down.count, down.size) == (ActionKind.SCALE_DOWN, 1, 2)
    assert any("forecast demand within the pre-scaling lead time needs them" in h.reason for h in run(snap, ramp).holds)
    # a forecast of zero never releases nodes still inside their cooldown
    young = [ready_node(f"od-b-{i}", OD_B, idle_since=T0 - timedelta(minutes=5)) for i in range(3)]
    assert run(onprem_only(*young, targets={"onprem": 1, "od-a": 0, "od-b": 3}), [forecast({})]).actions == ()


def test_steady_advice_is_the_p50_of_forecast_p50_with_its_utilisation_and_status() -> None:
    f = forecast({5: 10.0, 10: 20.0, 15: 30.0, 20: 40.0, 25: 50.0})
    (advice,) = steady_advice([f], {"A100": 32}, T0, T0 + timedelta(minutes=25))
    assert advice.recommended_gpus == 30
    assert advice.utilisation == (10 + 20 + 30 + 32 + 32) / (5 * 32)  # 0.775
    assert advice.status == "yellow"
    assert advice.utilisation_at_recommended == (10 + 20 + 30 + 30 + 30) / (5 * 30)
    (unknown,) = steady_advice([f], None, T0, T0 + timedelta(minutes=25))
    assert (unknown.steady_gpus, unknown.utilisation, unknown.status) == (None, None, None)
    two = steady_advice([f, forecast({5: 10.0, 10: 20.0, 15: 30.0, 20: 40.0, 25: 50.0}, tenant="b")], {"A100": 32}, T0,
                        T0 + timedelta(minutes=25))
    assert two[0].recommended_gpus == 60 and two[0].status == "red"  # tenants' demand adds up
    assert steady_advice([f], {"A100": 200}, T0, T0 + timedelta(minutes=25))[0].status == "green"


def test_steady_advice_counts_one_models_demand_with_any_models_on_a_one_model_rack() -> None:
    anything = forecast({5: 10.0, 10: 20.0, 15: 30.0, 20: 40.0, 25: 50.0})
    a100 = forecast({5: 4.0, 10: 4.0, 15: 4.0, 20: 4.0, 25: 4.0}, tenant="b", model="A100")
    (advice,) = steady_advice([anything, a100], {"A100": 32}, T0, T0 + timedelta(minutes=25))
    assert (advice.gpu_model, advice.recommended_gpus) == ("any", 34)  # one path on the same 32 GPUs
    two = steady_advice([anything, a100], {"A100": 16, "H100": 16}, T0, T0 + timedelta(minutes=25))
    assert [(a.gpu_model, a.recommended_gpus) for a in two] == [("A100", 4), ("any", 30)]  # two models: apart


def test_plans_carry_steady_advice_for_todays_on_prem_gpus() -> None:
    p = run(onprem_only(), [forecast({m: 4.0 for m in range(5, 65, 5)})])
    (advice,) = p.advice
    assert (advice.steady_gpus, advice.recommended_gpus, advice.status) == (8, 4, "green")
    assert p.to_json()["steady_tier"][0]["recommended_gpus"] == 4
    assert run(onprem_only(), []).advice == ()


def test_a_window_between_two_forecast_steps_reads_the_value_now_not_zero() -> None:
    f = Forecast(tenant="a", gpu_model="any", timestamps=(T0 + timedelta(minutes=15), T0 + timedelta(minutes=30)),
                 quantiles={0.5: (10.0, 20.0), 0.9: (12.0, 24.0), 0.99: (14.0, 28.0)}, model="prophet")
    assert f.max_over(0.9, T0, T0 + timedelta(minutes=10)) == 12.0  # before the first step: its value
    assert f.max_over(0.9, T0 + timedelta(minutes=16), T0 + timedelta(minutes=20)) == 12.0  # between steps
    assert f.max_over(0.9, T0, T0 + timedelta(minutes=30)) == 24.0


def test_pre_scaling_fires_only_when_the_wait_it_saves_is_worth_more_than_it_costs() -> None:
    # P50 = P90 = P99 = 16 GPUs at +10 min against 8 on-prem: one od-b node (8 GPUs at $3 per GPU-hour) short.
    # Its GPUs are used with probability 1, but the last (at 15.5 GPUs, half a GPU below the certain 16) with
    # 0.75: 7.75 GPUs expected. Each saves a 300 s boot of waiting, and is billed 600 s before a reactive launch
    # would be; an unused one for the 600 s lead plus its 300 s break-even hold.
    #   benefit = wait value x 7.75 x 300/3600;  cost = 3 x (7.75 x 600/3600 + 0.25 x 900/3600) = $4.0625
    certain = [forecast({10: 16.0}, spread=0.0)]
    (up,) = run(onprem_only(), certain, {}).actions
    assert (up.target, up.count) == ("od-b", 1)
    assert ("expected wait saved $7.75 (at $12 per GPU-hour of queueing, the default) > expected cost $4.06"
            in up.reason)
    cheap_wait = {"a": Policy(tenant="a", prescale=PrescalePolicy(wait_usd_per_gpu_hour=6.0))}  # benefit $3.875
    held = run(onprem_only(), certain, cheap_wait)
    assert held.actions == (), "benefit below cost: nothing is launched ahead"
    (hold,) = [h for h in held.holds if h.step == "prescale"]
    assert ("pre-scaling does not pay: expected wait saved $3.88 (at $6 per GPU-hour of queueing, policy "
            "prescale.wait_usd_per_gpu_hour) <= expected cost $4.06") in hold.reason


def test_a_rise_the_forecast_is_unsure_of_launches_only_the_nodes_that_pay() -> None:
    # P50 of 26 at +10 min, P90 30, P99 34: 22 GPUs short of the 8 on-prem. The first two od-b nodes (GPUs up to
    # 24) are used with probability over 0.5 and pay at the default; the third (24.5-31.5 GPUs) mostly idles
    (up,) = run(onprem_only(), [forecast({10: 26.0})], {}).actions
    assert (up.target, up.count) == ("od-b", 2)
    assert "expected wait saved" in up.reason and "> expected cost" in up.reason


def test_the_cost_optimal_steady_size_is_the_critical_ratio_quantile_and_each_size_is_priced_for_a_year() -> None:
    # demand 0..99 GPUs, one step each; owned $1 and on-demand $4 per GPU-hour: own while P(demand > size) > 1/4,
    # i.e. the 0.75 quantile (74.25 -> 75 GPUs), against the P50's 50
    stamps = tuple(T0 + timedelta(hours=h) for h in range(100))
    f = Forecast(tenant="a", gpu_model="A100", timestamps=stamps,
                 quantiles={0.5: tuple(float(v) for v in range(100))}, model="prophet")
    (advice,) = steady_advice([f], None, T0, prices=(1.0, 4.0))
    assert (advice.recommended_gpus, advice.cost_optimal_quantile, advice.cost_optimal_gpus) == (50, 0.75, 75)
    # a year at 75: 75 owned + mean overflow (sum of 1..24 / 100 = 3.0) on-demand at $4
    assert advice.year_usd_at_cost_optimal == (75 * 1.0 + 3.0 * 4.0) * 8760
    # at 50: 50 owned + mean overflow (sum of 1..49 / 100 = 12.25) at $4 -- dearer
    assert advice.year_usd_at_recommended == (50 * 1.0 + 12.25 * 4.0) * 8760
    assert advice.year_usd_at_recommended > advice.year_usd_at_cost_optimal
    assert steady_advice([f], None, T0)[0].cost_optimal_gpus is None, "no prices: no cost-optimal size"


def test_a_forecast_whose_rises_did_not_beat_no_forecast_in_its_backtest_is_not_acted_on() -> None:
    # the rise of 26 GPUs that launches three nodes when the forecast has shown skill at rises (skill 0.8) ...
    skilled = replace(forecast({10: 26.0}), backtest_rise_skill=0.8)
    (up,) = run(onprem_only(), [skilled]).actions
    assert (up.target, up.count) == ("od-b", 3)
    # ... launches nothing from a forecast whose rises did no better than assuming no change (skill 1.0 or more),
    # nor from one no backtest has measured
    for skill, why in ((1.0, "in its backtest the forecast's rises did not beat no forecast (rise skill 1.00"),
                       (None, "no backtest has measured its rises yet")):
        held = run(onprem_only(), [replace(skilled, backtest_rise_skill=skill)])
        assert held.actions == ()
        (hold,) = [h for h in held.holds if h.step == "prescale"]
        assert f"forecast rise of 26 any GPU(s) within 10 min on tenant a not acted on: {why}" in hold.reason


def test_scale_in_reads_only_a_forecast_with_skill_at_rises() -> None:
    # no rise coming: a skilled forecast's need is the 0 GPUs demanded now, so its 8 on-prem GPUs are spare and
    # scale-in may release idle cloud nodes beyond the need at once; an unskilled or unscored one leaves no spare
    # figure, so scale-in keeps its no-forecast rule (break-even)
    def spare(skill: float | None) -> dict[str, float]:
        ctx = build_context(onprem_only(), (replace(forecast({}), backtest_rise_skill=skill),), eager(), PRICES, T0)
        prescale_elastic(ctx)
        return ctx.forecast_spare_gpus

    assert spare(0.5) == {"any": 8.0}
    assert spare(1.2) == {} and spare(None) == {}
