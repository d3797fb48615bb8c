"""The seeded synthetic workload generator behind the quickstart."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burst.workloads.synthetic import SyntheticSettings, SyntheticWorkload, TenantMix

MONDAY = datetime(2026, 3, 2, tzinfo=UTC)


def test_split_windows_give_the_same_jobs() -> None:
    w = SyntheticWorkload()
    whole = w.jobs_between(MONDAY, MONDAY + timedelta(hours=30))
    cut = MONDAY + timedelta(hours=9, minutes=17, seconds=3)
    halves = w.jobs_between(MONDAY, cut) + w.jobs_between(cut, MONDAY + timedelta(hours=30))
    assert whole == halves
    assert len({j.id for j in whole}) == len(whole) > 100
    assert [j.submitted_at for j in whole] == sorted(j.submitted_at for j in whole)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6 * 3600), min_size=1, max_size=6))
def test_any_partition_concatenates_to_the_whole(steps: list[int]) -> None:
    w = SyntheticWorkload(SyntheticSettings(seed=3, base_jobs_per_hour=30))
    edges = [MONDAY]
    for step in steps:
        edges.append(edges[-1] + timedelta(seconds=step))
    pieces = [j for a, b in zip(edges, edges[1:], strict=False) for j in w.jobs_between(a, b)]
    assert pieces == w.jobs_between(edges[0], edges[-1])


def test_seed_decides_the_jobs() -> None:
    end = MONDAY + timedelta(days=1)
    a = SyntheticWorkload(SyntheticSettings(seed=1)).jobs_between(MONDAY, end)
    again = SyntheticWorkload(SyntheticSettings(seed=1)).jobs_between(MONDAY, end)
    other = SyntheticWorkload(SyntheticSettings(seed=2)).jobs_between(MONDAY, end)
    assert a == again
    assert [j.submitted_at for j in a] != [j.submitted_at for j in other]


def test_a_burst_multiplies_arrivals_inside_its_window() -> None:
    s = SyntheticSettings(base_jobs_per_hour=40, daily_amplitude=0, burst_probability=1, burst_factor=5, burst_window=(9, 11))
    w = SyntheticWorkload(s)
    (b_start, b_end), = w.bursts_between(MONDAY, MONDAY + timedelta(days=1))
    assert (b_start, b_end) == (MONDAY + timedelta(hours=9), MONDAY + timedelta(hours=11))
    assert w.rate_at(b_start) == pytest.approx(200) and w.rate_at(b_end) == pytest.approx(40)
    inside = len(w.jobs_between(b_start, b_end))
    before = len(w.jobs_between(MONDAY + timedelta(hours=5), MONDAY + timedelta(hours=7)))
    assert inside > 3 * before


def test_no_bursts_when_probability_is_zero() -> None:
    w = SyntheticWorkload(SyntheticSettings(burst_probability=0))
    assert w.bursts_between(MONDAY, MONDAY + timedelta(days=30)) == []


def test_burst_probability_is_the_share_of_burst_days() -> None:
    w = SyntheticWorkload(SyntheticSettings(burst_probability=0.5, seed=11))
    days = len(w.bursts_between(MONDAY, MONDAY + timedelta(days=400)))
    assert 150 < days < 250
    for start, end in w.bursts_between(MONDAY, MONDAY + timedelta(days=400)):
        assert 9 <= start.hour and end - start == timedelta(hours=2) and (end - timedelta(seconds=1)).hour < 17


def test_daily_peak_and_weekend() -> None:
    w = SyntheticWorkload(SyntheticSettings(burst_probability=0, daily_amplitude=0.5, peak_hour=14, weekend_factor=0.25))
    assert w.rate_at(MONDAY + timedelta(hours=14)) > w.rate_at(MONDAY + timedelta(hours=2)) * 2.5
    saturday = MONDAY + timedelta(days=5, hours=14)
    assert w.rate_at(saturday) == pytest.approx(w.rate_at(MONDAY + timedelta(hours=14)) * 0.25)


def test_tenant_shares_and_job_shapes() -> None:
    tenants = (
        TenantMix("a", 3, gpus=(1,), mean_duration_s=600),
        TenantMix("b", 1, gpus=(4, 8), fault_tolerant=True, checkpoint_interval_s=300, gpu_model="A100"),
    )
    jobs = SyntheticWorkload(SyntheticSettings(tenants=tenants, base_jobs_per_hour=100)).jobs_between(
        MONDAY, MONDAY + timedelta(days=2)
    )
    count = Counter(j.tenant for j in jobs)
    assert 0.70 < count["a"] / len(jobs) < 0.80
    for job in jobs:
        assert 60 <= (job.duration_s or 0) <= 12 * 3600
        if job.tenant == "a":
            assert job.gpus == 1 and not job.fault_tolerant and job.gpu_model is None
        else:
            assert job.gpus in (4, 8) and job.fault_tolerant and job.checkpoint_interval_s == 300
            assert job.gpu_model == "A100"
    mean_a = sum(j.duration_s or 0 for j in jobs if j.tenant == "a") / count["a"]
    assert 450 < mean_a < 800


def test_from_mapping_reads_a_config_section() -> None:
    s = SyntheticSettings.from_mapping(
        {
            "seed": 5,
            "base_jobs_per_hour": 12,
            "burst_window": [8, 12],
            "tenants": {"batch": {"share": 1, "gpus": [8], "fault_tolerant": True, "checkpoint_interval": "10m", "mean_duration": "2h"}},
        }
    )
    assert s.seed == 5 and s.base_jobs_per_hour == 12 and s.burst_window == (8, 12)
    assert s.tenants == (TenantMix("batch", 1.0, (8,), True, 600.0, 7200.0, None),)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"sead": 1}, "workload.synthetic.sead: unknown setting"),
        ({"seed": "x"}, "workload.synthetic.seed: expected an integer"),
        ({"base_jobs_per_hour": -1}, "workload.synthetic.base_jobs_per_hour: must be >= 0"),
        ({"burst_window": [12, 9]}, "workload.synthetic.burst_window"),
        ({"burst_hours": 5, "burst_window": [9, 11]}, "at least burst_hours long"),
        ({"tenants": {}}, "workload.synthetic.tenants"),
        ({"tenants": {"a": {"gpus": [1]}}}, "workload.synthetic.tenants.a.share: required"),
        ({"tenants": {"a": {"share": 1, "gpus": [0]}}}, "tenants.a.gpus: every GPU count must be within 1 .. 1024"),
        ({"tenants": {"a": {"share": 1, "mean_duration": "soon"}}}, "workload.synthetic.tenants.a.mean_duration: invalid duration"),
        ({"tenants": {"a": {"share": 1, "colour": "red"}}}, "workload.synthetic.tenants.a.colour: unknown key"),
    ],
)
def test_from_mapping_errors_name_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        SyntheticSettings.from_mapping(raw)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        SyntheticWorkload().jobs_between(datetime(2026, 3, 2), datetime(2026, 3, 3))
