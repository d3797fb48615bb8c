"""Capacity-optimized spot spread and learnt interruption rates, through the real plan()."""

from __future__ import annotations

import dataclasses
import math
from datetime import timedelta

import pytest
from builders import T0, TablePrices, group, job, ready_node
from pydantic import ValidationError

from burst.model import ActionKind, CapacityType, JobState, Plan, Policy, Snapshot, SpotPolicy
from burst.planner import PlanIds, plan
from burst.planner.spot_rates import (
    HALF_LIFE_H,
    PRIOR_NODE_HOURS,
    InterruptionObservations,
    band_rate,
    prior_rate,
)
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import MemoryQueue
from policies.config import NodeGroupDoc
from providers.sim import ManualClock, SimProvider

# Three spot offerings of one GPU model: A the cheapest but often interrupted, B 5% dearer and quiet,
# C quiet too but 25% dearer (outside the 10% tolerance); and on-demand.
A = dataclasses.replace(group("spot-a", capacity_type=CapacityType.SPOT), zone="us-east-1a", interruption_band=">20%")
B = dataclasses.replace(group("spot-b", capacity_type=CapacityType.SPOT), zone="us-east-1b", interruption_band="<5%")
C = dataclasses.replace(group("spot-c", capacity_type=CapacityType.SPOT), zone="us-east-1c", interruption_band="<5%")
OD = group("od")
PRICES = TablePrices({"spot-a": 8.0, "spot-b": 8.4, "spot-c": 10.0, "od": 24.0})
POLICY = Policy(tenant="a", spot=SpotPolicy(allowed=True))


def ft(jid: str, minute: int = 0, **kw: object):
    return job(jid, gpus=8, fault_tolerant=True, submitted=T0 + timedelta(minutes=minute), **kw)


def planned(*jobs, policy: Policy = POLICY, groups=(A, B, C, OD), nodes=(), rates=None) -> Plan:
    snap = Snapshot(groups=tuple(groups), nodes=tuple(nodes), jobs=tuple(jobs),
                    targets={g.id: sum(1 for n in nodes if n.group_id == g.id) for g in groups},
                    interruption_rates=rates or {})
    return plan(snap, [], {"a": policy}, PRICES, now=T0, ids=PlanIds("p"))


def launches(p: Plan) -> dict[str, int]:
    return {a.target: a.count or 0 for a in p.of_kind(ActionKind.SCALE_UP)}


def test_within_the_price_tolerance_the_least_interrupted_offering_wins() -> None:
    p = planned(ft("j"))
    (up,) = p.of_kind(ActionKind.SCALE_UP)
    assert (up.target, up.count) == ("spot-b", 1)
    assert up.reason.endswith(
        "spot-b is the cheapest feasible group at $1.05/GPU-h; spot spread: 2 offerings within 10% of the cheapest "
        f"($1.00/GPU-h), this one interrupted at {band_rate('<5%'):.2g}/node-h (0 -> 1 nodes)")


def test_with_no_tolerance_the_cheapest_offering_wins() -> None:
    exact = Policy(tenant="a", spot=SpotPolicy(allowed=True, price_tolerance=0.0))
    assert launches(planned(ft("j"), policy=exact)) == {"spot-a": 1}
    assert launches(planned(ft("j"), groups=(A, C, OD))) == {"spot-a": 1}, "C is 25% dearer: outside the tolerance"


def test_a_tenants_spot_gpus_spread_so_no_offering_holds_more_than_half() -> None:
    # B first (quietest); then A, since B would hold 16 of 16 GPUs; then B again (both would hold 2/3); then A.
    assert launches(planned(*(ft(f"j{i}", i) for i in range(4)))) == {"spot-a": 2, "spot-b": 2}
    one_each = Policy(tenant="a", spot=SpotPolicy(allowed=True, max_offering_share=1.0))
    assert launches(planned(*(ft(f"j{i}", i) for i in range(4)), policy=one_each)) == {"spot-b": 4}


def test_running_spot_gpus_count_toward_an_offerings_share() -> None:
    nodes = (ready_node("b-0", B), ready_node("b-1", B))
    held = [job(f"r{i}", gpus=8, fault_tolerant=True, state=JobState.RUNNING, nodes=(f"b-{i}",),
                started=T0 - timedelta(hours=1)) for i in range(2)]
    assert launches(planned(*held, ft("new"), nodes=nodes)) == {"spot-a": 1}  # B would hold 24 of 24


def test_the_spread_never_refuses_a_job_the_crowded_offering_can_take() -> None:
    full_a = dataclasses.replace(A, max_size=0)
    assert launches(planned(ft("j0"), ft("j1", 1), groups=(full_a, B, C, OD))) == {"spot-b": 2}


def test_ready_capacity_in_the_quieter_offering_is_used_first() -> None:
    nodes = (ready_node("a-0", A), ready_node("b-0", B))
    (place,) = planned(ft("j"), nodes=nodes).of_kind(ActionKind.PLACE_JOB)
    assert place.node_ids == ("b-0",)
    assert "spot spread: 2 offerings within 10%" in place.reason


def test_band_priors_are_the_aws_band_midpoints_as_hazards() -> None:
    assert band_rate("<5%") == -math.log(0.975) / 720.0
    assert band_rate(">20%") == -math.log(0.75) / 720.0
    assert prior_rate(dataclasses.replace(B, interruption_band=None)) == band_rate("10-15%")
    assert prior_rate(OD) == 0.0
    with pytest.raises(ValueError, match="unknown interruption band '30%'"):
        band_rate("30%")


def test_observed_interruptions_raise_an_offerings_rate_and_placement_moves_away() -> None:
    none = InterruptionObservations()
    assert none.rates([A, B, OD]) == {"spot-a": band_rate(">20%"), "spot-b": band_rate("<5%")}
    seen = none.observe(10.0, {"spot-a": 4, "spot-b": 4}, ["spot-b", "spot-b", "spot-b"])
    rates = seen.rates([A, B])
    assert rates["spot-b"] == (band_rate("<5%") * PRIOR_NODE_HOURS + 3) / (PRIOR_NODE_HOURS + 40.0)
    assert rates["spot-a"] == band_rate(">20%") * PRIOR_NODE_HOURS / (PRIOR_NODE_HOURS + 40.0)
    assert rates["spot-b"] > 10 * rates["spot-a"]
    assert launches(planned(ft("j"))) == {"spot-b": 1}
    assert launches(planned(ft("j"), rates=rates)) == {"spot-a": 1}
    one = none.observe(10.0, {"spot-b": 4}, ["spot-b"]).rates([B])["spot-b"]
    assert band_rate("<5%") < one < rates["spot-b"], "each interruption raises the rate further"


def test_observations_decay_with_their_half_life_and_survive_a_round_trip() -> None:
    seen = InterruptionObservations().observe(1.0, {"spot-b": 2}, ["spot-b"])
    later = seen.observe(HALF_LIFE_H, {}, [])
    assert (later.interruptions["spot-b"], later.node_hours["spot-b"]) == (0.5, 1.0)
    assert InterruptionObservations.from_json(later.to_json()) == later
    assert InterruptionObservations.from_json("not json") == InterruptionObservations()


class LoopPrices:
    def group_price(self, g: object) -> float:
        return PRICES.per_node[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 0.0


def test_the_reconcile_loop_learns_from_an_interruption_and_launches_elsewhere_after_it() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    groups = [dataclasses.replace(g, boot_latency_s=300.0) for g in (A, B, OD)]
    sim = SimProvider(groups, clock=clock, cluster="test")
    queue = MemoryQueue()

    no_share_rule = Policy(tenant="a", spot=SpotPolicy(allowed=True, max_offering_share=1.0))  # rates alone

    def controller() -> Controller:
        return Controller(providers={"sim": sim}, source=queue, store=store, policies=lambda: {"a": no_share_rule},
                          prices=LoopPrices(), clock=clock, cluster="test")

    ctl = controller()
    queue.submit(ft("j", duration_s=36000.0, checkpoint_interval_s=600.0))
    first = ctl.tick()
    assert launches(first.plan) == {"spot-b": 1}
    clock.advance(300)
    ctl.tick()  # j runs on B's node
    clock.advance(3600)
    ctl.tick()  # one node-hour on B
    (node,) = [n for n in sim.nodes().values() if n.group_id == "spot-b"]
    sim.inject_interruption(node.id, notice_s=0)
    clock.advance(1)
    report = ctl.tick()
    assert report.snapshot is not None
    rate = report.snapshot.interruption_rates["spot-b"]
    saved = ctl.interruptions  # stored at once after an interruption
    exposure = ctl.interruptions.node_hours["spot-b"]
    assert ctl.interruptions.interruptions["spot-b"] == 1.0
    assert exposure == 0.5 ** (1 / 3600 / HALF_LIFE_H) + 1 / 3600  # the first hour decayed a little
    assert rate == (band_rate("<5%") * PRIOR_NODE_HOURS + 1.0) / (PRIOR_NODE_HOURS + exposure)
    assert rate > report.snapshot.interruption_rates["spot-a"]
    queue.submit(ft("k", 65, duration_s=3600.0, checkpoint_interval_s=600.0))
    clock.advance(1)
    again = ctl.tick()  # j, requeued, waits for B's replacement node; k launches in the offering now quieter
    assert launches(again.plan) == {"spot-a": 1}
    assert [h.reason for h in again.plan.holds if h.subject == "group:spot-b"] == [
        "1 pending job(s) wait for capacity already booting in spot-b; nothing new launched"]
    assert controller().interruptions == saved, "a restarted loop reads the observations back"


def test_a_node_group_in_burst_yaml_gives_its_interruption_band() -> None:
    doc = {"id": "spot-b", "provider": "aws", "region": "us-east-1", "zone": "us-east-1b", "tier": "elastic",
           "capacity_type": "spot", "instance_type": "p4d.24xlarge", "gpu_model": "A100", "gpus_per_node": 8,
           "max_size": 4, "interruption_band": "<5%"}
    assert NodeGroupDoc.model_validate(doc).to_model().interruption_band == "<5%"
    with pytest.raises(ValidationError, match="interruption_band"):
        NodeGroupDoc.model_validate({**doc, "interruption_band": "3%"})
