"""Step: scale elastic groups up ahead of forecast demand; never in on a forecast alone.

Runs after placement, so this plan's reactive launches already count. Per
GPU model, supply is every GPU of the groups that serve it (steady and
elastic, ready, booting or launched by this plan). A tenant's need is the
demand it has now (running + pending GPUs) plus the rise its forecast P50
predicts over the lead time (the largest P50 over [now, now + lead] less the
P50 now, in whole GPUs), but never more than its forecast at the policy's
`prescale.quantile` (default P90) over that time: the quantile says how far
the forecast is trusted. The lead time is the boot latency of the cheapest
on-demand elastic group the tenant may use plus `prescale.buffer` (default
300 s); the need is capped by its quotas.

Anchoring on observed demand keeps the forecast's level error out of the
fleet: provisioning the P90 level itself would hold the whole P90 - P50
spread idle all day, and a forecast fitted on a history that sat higher (a
trend that turned, last week's burst) more. Provisioning the P90 level on
the 3-day Philly window of docs/benchmarks/strategies.md cost 1.69x the run
without forecasts for 4 s less P95 wait.
Pre-scaling is for the ramps the forecast sees coming, which reactive scaling
meets one boot latency late.

A launch must pay: the expected queueing it saves, valued at the tenant's
`prescale.wait_usd_per_gpu_hour` (default 12 USD per GPU-hour), must exceed
its expected cost, node by node (`burst.planner.prescale_value`); the reason
gives both figures and where the value came from, and a shortfall that does
not pay is held with them.

Tenants are served from supply in priority order; what is left short is
launched in the cheapest on-demand elastic group with room (spot capacity is
not pre-scaled: a forecast does not say which jobs will be fault-tolerant),
within max size, the burst quota and hard budgets, or held with the reason.

A forecast is acted on only where it has shown skill at what pre-scaling
uses it for: its backtest's rise skill (`Forecast.backtest_rise_skill`,
`forecasting.select.rise_skill`: the error of its P50's step-ahead rises
against the actual changes, over the error of assuming no change) must be
below 1. A forecast whose rises did no better than reacting, or one no
backtest has measured (too little history to select a model:
`forecasting.select` serves Prophet or seasonal naive unscored then), is
held with that figure and pre-scales nothing, and scale-in does not read
it either (a GPU model with no skilled forecast gets no
`forecast_spare_gpus`, so idle nodes keep the no-forecast break-even rule).

This step adds capacity only. It records how many GPUs of supply exceed
the need per GPU model (`ctx.forecast_spare_gpus`, only for models some
tenant's skilled forecast was used for), and the scale-down step keeps idle nodes
by it (`burst.planner.scale_down`): the need is kept, so capacity launched
for a coming ramp is not released and relaunched on the next tick, and an
idle node beyond it is released at once. As with AWS predictive scaling, a forecast fitted on less than
`MIN_HISTORY_S` (24 h) of history does not pre-scale. A pooled forecast
(`ALL_TENANTS`) is anchored on every tenant's demand. Demand of `ANY_MODEL`
counts every group as supply, so with mixed GPU models it is an
approximation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

from burst.model import (
    ALL_TENANTS,
    ANY_MODEL,
    Action,
    ActionKind,
    CapacityType,
    Forecast,
    NodeGroup,
    Policy,
    Tier,
)
from burst.planner.context import GroupCapacity, PlanContext, budget_refusal
from burst.planner.contract import declare
from burst.planner.eligibility import serves
from burst.planner.power import saves_power, wake_latency_s, wake_room
from burst.planner.prescale_value import DEFAULT_WAIT_USD_PER_GPU_HOUR, prescale_case

STEP = "prescale"
MIN_HISTORY_S = 24 * 3600.0


def latency_s(group: NodeGroup) -> float:
    """How long capacity launched in `group` takes to serve: its boot (on-prem: wake) latency."""
    return wake_latency_s(group) if saves_power(group) else group.boot_latency_s


def lead_time_s(group: NodeGroup, policy: Policy) -> float:
    """How far ahead of forecast demand `group` is scaled for a tenant: its boot (on-prem: wake) latency plus the buffer."""
    return latency_s(group) + policy.prescale.buffer_s


def prescale_options(ctx: PlanContext, policy: Policy, gpu_model: str) -> list[GroupCapacity]:
    """Groups the tenant may pre-scale for `gpu_model`: on-prem groups with powered-off nodes to wake first, then
    on-demand elastic groups, cheapest per GPU-hour first."""
    caps = [
        c
        for c in ctx.groups.values()
        if ((c.group.tier is Tier.ELASTIC and c.group.capacity_type is CapacityType.ON_DEMAND)
            or (saves_power(c.group) and wake_room(ctx, c) > 0))
        and serves(c.group, gpu_model)
        and policy.allows_group(c.group)
        and c.group.id not in ctx.snapshot.unavailable
    ]
    return sorted(caps, key=lambda c: (c.group.tier is not Tier.STEADY, c.gpu_price, c.group.id))


@declare(writes=("scale_ups", "forecast_spare_gpus"), reads=("scale_ups",))
def prescale_elastic(ctx: PlanContext) -> None:
    """Launch elastic capacity for forecast demand within each tenant's lead time (see module doc)."""
    if not ctx.forecasts:
        return
    by_model: dict[str, list[Forecast]] = defaultdict(list)
    for f in ctx.forecasts:
        by_model[f.gpu_model].append(f)
    demanded = _demand_now(ctx)
    for model in sorted(by_model):
        supply = sum(c.planned_size * c.gpn for c in ctx.groups.values() if serves(c.group, model))
        free = float(supply)
        trusted = False  # whether any tenant's forecast of this model is one pre-scaling (and scale-in) may use
        for f in sorted(by_model[model], key=lambda f: (-ctx.policy(f.tenant).priority, f.tenant)):
            policy = ctx.policy(f.tenant)
            q = policy.prescale.quantile
            if q is None or q not in f.quantiles or f.history_s < MIN_HISTORY_S:
                continue
            options = prescale_options(ctx, policy, model)
            lead = lead_time_s(options[0].group, policy) if options else policy.prescale.buffer_s
            now_gpus = demanded[(f.tenant, model)]
            until = ctx.now + timedelta(seconds=lead)
            rise = math.floor(max(0.0, f.max_over(0.5, ctx.now, until) - f.now_value(0.5, ctx.now)) + 1e-9)
            skill = f.backtest_rise_skill
            unskilled = skill is None or not skill < 1.0
            if unskilled and rise > 0:
                shown = ("no backtest has measured its rises yet" if skill is None else
                         f"in its backtest the forecast's rises did not beat no forecast (rise skill {skill:.2f}, "
                         "acted on below 1)")
                ctx.hold(f"tenant:{f.tenant}", f"forecast rise of {rise} {model} GPU(s) within {lead / 60:g} min on "
                         f"tenant {f.tenant} not acted on: {shown}", STEP, f.tenant)
                rise = 0
            trusted = trusted or not unskilled
            want = _capped(now_gpus if unskilled else min(now_gpus + rise, f.max_over(q, ctx.now, until)), policy)
            available = free
            free -= want
            if free >= 0 or unskilled:
                continue
            label = (f"forecast rise of {rise} {model} GPU(s) within {lead / 60:g} min on tenant {f.tenant}'s "
                     f"{now_gpus:g} demanded now (at most its P{q * 100:g} of {f.max_over(q, ctx.now, until):.1f})")
            if not options:
                ctx.hold(f"tenant:{f.tenant}", f"{label} exceeds supply, but no on-demand elastic group is allowed "
                         "to pre-scale", STEP, f.tenant)
                continue
            first = options[0]
            wait_usd = policy.prescale.wait_usd_per_gpu_hour
            source = "policy prescale.wait_usd_per_gpu_hour"
            if wait_usd is None:
                wait_usd, source = DEFAULT_WAIT_USD_PER_GPU_HOUR, "the default"
            case = prescale_case(f, now=ctx.now, lead_s=lead, boot_s=latency_s(first.group), demand_now=now_gpus,
                                 supply=available, nodes=math.ceil(-free / first.gpn - 1e-9), gpus_per_node=first.gpn,
                                 gpu_usd_per_hour=first.gpu_price, wait_usd_per_gpu_hour=wait_usd)
            if case.nodes == 0:
                ctx.hold(f"tenant:{f.tenant}", f"{label} exceeds the {supply} GPU(s) ready, booting and planned, but "
                         f"pre-scaling does not pay: {case.says(wait_usd, source)}", STEP, f.tenant)
                continue
            free += _launch(ctx, f.tenant, policy, options, min(-free, case.nodes * first.gpn),
                            f"{label} exceeds the {supply} GPU(s) ready, booting and planned; "
                            f"{case.says(wait_usd, source)}")
        if trusted:
            ctx.set_forecast_spare(model, free)


def _demand_now(ctx: PlanContext) -> dict[tuple[str, str], float]:
    """GPUs demanded now (running + pending) per (tenant, GPU model), with `ALL_TENANTS` totals per model."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    for job in ctx.snapshot.jobs:
        if job.active:
            model = job.gpu_model or ANY_MODEL
            out[(job.tenant, model)] += job.gpu_demand
            out[(ALL_TENANTS, model)] += job.gpu_demand
    return out


def _capped(gpus: float, policy: Policy) -> float:
    """A tenant's forecast need bounded by what its quotas let it hold."""
    if policy.steady_quota_gpus is not None and policy.burst_quota_gpus is not None:
        return min(gpus, float(policy.steady_quota_gpus + policy.burst_quota_gpus))
    return gpus


def _launch(ctx: PlanContext, tenant: str, policy: Policy, options: list[GroupCapacity], short: float, why: str) -> int:
    """Launch nodes for `short` GPUs across `options` in order; the GPUs launched."""
    usage = ctx.usage_of(tenant)
    if policy.burst_quota_gpus is not None:
        room = policy.burst_quota_gpus - usage.elastic_gpus
        if room < short:
            ctx.hold(f"tenant:{tenant}", f"{why}; pre-scaling limited by quota.burst_gpus {policy.burst_quota_gpus}",
                     STEP, tenant)
        short = min(short, max(0.0, room))
    launched = 0
    for cap in options:
        if short <= 0:
            break
        room = wake_room(ctx, cap) if cap.group.tier is Tier.STEADY else cap.group.max_size - cap.planned_size
        nodes = min(math.ceil(short / cap.gpn - 1e-9), room)
        if nodes <= 0:
            ctx.hold(f"group:{cap.group.id}", f"{why}; {cap.group.id} is at its max_size {cap.group.max_size}", STEP)
            continue
        cost = nodes * cap.price_per_node
        refusal = budget_refusal(ctx, tenant, policy, cost, f"pre-scaling {nodes} x {cap.group.instance_type}")
        if refusal is not None:
            ctx.hold(f"tenant:{tenant}", f"{why}; {refusal}", STEP, tenant)
            break
        before = cap.planned_size
        cap.launched += nodes
        for _ in range(nodes):
            cap.add_inflight(cap.gpn, None)
        usage.add(cap.group, nodes * cap.gpn, cost)
        _merge_scale_up(ctx, cap, nodes, tenant, f"{why}: +{nodes} node(s) ahead of it in {cap.group.id} "
                        f"({before} -> {cap.planned_size} nodes)")
        short -= nodes * cap.gpn
        launched += nodes * cap.gpn
    return launched


def _merge_scale_up(ctx: PlanContext, cap: GroupCapacity, nodes: int, tenant: str, reason: str) -> None:
    """Fold a pre-scale launch into this plan's scale-up of the group (`scale_ups`), or add one: one scale-up per
    group."""
    action = ctx.scale_up_of(cap.group.id)
    if action is not None:
        ctx.replace_scale_up(replace(
            action, count=(action.count or 0) + nodes, size=cap.planned_size, reason=f"{action.reason}; {reason}"
        ))
        return
    ctx.add_scale_up(
        Action(kind=ActionKind.SCALE_UP, target=cap.group.id, count=nodes, size=cap.planned_size, step=STEP,
               reason=reason, tenant=tenant)
    )
