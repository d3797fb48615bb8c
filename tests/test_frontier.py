"""The service gate on cost targets and the dominance check of the cost-delay frontier, on hand-made figures."""

from __future__ import annotations

from burst.sim.frontier import (
    SERVICE_GATE_S,
    CostVerdict,
    Point,
    cost_delay_frontier,
    cost_verdict,
    dominated_by,
    dominates,
)

BURST = Point(cost_usd=1000.0, delay_p95_s=300.0, lost_gpu_hours=2.0, work_gpu_hours=500.0)


def test_a_cost_target_is_waived_only_for_a_baseline_that_serves_more_than_a_minute_worse() -> None:
    """burst at $1,000 and 300 s. A dearer baseline: the target holds. A cheaper one at 360 s (60 s worse, not
    more): it fails. A cheaper one at 361 s: cheaper at worse service, waived. A cheaper one that serves better:
    it fails."""
    assert cost_verdict(BURST, Point(1000.0, 200.0, 9.0, 500.0)) is CostVerdict.HOLDS
    assert cost_verdict(BURST, Point(900.0, 300.0 + SERVICE_GATE_S, 0.0, 500.0)) is CostVerdict.FAILS
    assert cost_verdict(BURST, Point(900.0, 361.0, 0.0, 500.0)) is CostVerdict.WORSE_SERVICE
    assert cost_verdict(BURST, Point(900.0, 100.0, 0.0, 500.0)) is CostVerdict.FAILS
    assert CostVerdict.WORSE_SERVICE.value == "cheaper at worse service"


def test_burst_is_dominated_only_by_a_strategy_cheaper_and_no_worse_on_delay_loss_and_work() -> None:
    """Each rival is cheaper than burst; each but `dominant` is worse on one figure, so only it dominates. A bound,
    the clairvoyant reference and static-p50 would dominate but are not compared."""
    points = {
        "burst": BURST,
        "dominant": Point(999.0, 300.0, 2.0, 500.0),  # cheaper, equal elsewhere
        "slower": Point(900.0, 301.0, 0.0, 500.0),
        "lossier": Point(900.0, 100.0, 2.5, 500.0),
        "less-work": Point(900.0, 100.0, 0.0, 499.0),
        "dearer": Point(1000.0, 100.0, 0.0, 600.0),  # not cheaper: equal cost does not dominate
        "oracle": Point(500.0, 0.0, 0.0, 500.0),
        "floor": Point(600.0, 0.0, 0.0, 500.0),
        "burst-clairvoyant": Point(990.0, 200.0, 1.0, 500.0),
        "static-p50": Point(10.0, 0.0, 0.0, 500.0),
    }
    assert dominated_by("burst", points) == ["dominant"]
    assert dominates(points["dominant"], BURST) and not dominates(BURST, points["dominant"])
    del points["dominant"]
    assert dominated_by("burst", points) == []


def test_the_frontier_keeps_what_no_strategy_beats_on_both_cost_and_delay() -> None:
    points = {"cheap-slow": Point(100.0, 900.0, 0, 1), "dear-fast": Point(300.0, 50.0, 0, 1),
              "middle": Point(200.0, 300.0, 0, 1), "beaten": Point(250.0, 400.0, 0, 1), "tie": Point(200.0, 310.0, 0, 1)}
    assert cost_delay_frontier(points) == ["dear-fast", "middle", "cheap-slow"]


def test_the_frontier_figure_draws_every_window_as_a_png() -> None:
    from burst import plots
    from burst.sim.report import frontier_figure

    points = {"burst": BURST, "reactive": Point(1200.0, 400.0, 3.0, 500.0), "oracle": Point(800.0, 0.0, 0.0, 500.0),
              "static-p50": Point(10.0, 90_000.0, 0.0, 10.0)}
    data = plots.png(lambda th: frontier_figure(th, [("a", points), ("b", points)], {"burst": "#1f77b4"}), plots.LIGHT)
    assert data.startswith(b"\x89PNG")
