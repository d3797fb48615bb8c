"""The local GPU scheduler (burst/planner/gpu_scheduler.py): exact placements on scripted nodes."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from gpu_nodes import cube_mesh_node, nvswitch_node, pcie_node
from hypothesis import given, settings
from hypothesis import strategies as st

from burst.model import GpuHealth, GpuSharing, Job, NodeGpus, Policy
from burst.planner.gpu_scheduler import GpuRequest, GpuUse, displaced_by_health, schedule


def req(job: str, gpus: int = 1, **kw: object) -> GpuRequest:
    return GpuRequest(job_id=job, tenant=str(kw.pop("tenant", "t")), gpus=gpus, **kw)  # type: ignore[arg-type]


def busy(node: NodeGpus, *indices: int) -> dict[str, GpuUse]:
    return {node.gpus[i].uuid: GpuUse() for i in indices}


def indices(node: NodeGpus, uuids: tuple[str, ...]) -> list[int]:
    by_uuid = {g.uuid: g.index for g in node.gpus}
    return sorted(by_uuid[u] for u in uuids)


def test_two_gpu_job_takes_gpus_behind_one_pcie_switch() -> None:
    node = pcie_node("n1")
    result = schedule([req("j", 2)], [node], busy(node, 1, 3))  # free: 0, 2, 4, 5, 6, 7
    binding = result.binding("j")
    assert binding is not None
    assert indices(node, binding.gpu_uuids) == [4, 5]  # the only free switch pair; 0+2 would cross switches
    assert "pcie_switch" in binding.reason


def test_cube_mesh_four_gpu_job_stays_inside_one_nvlink_quad() -> None:
    node = cube_mesh_node("n1")
    result = schedule([req("j", 4)], [node], busy(node, 0))  # 1,2,3 + 4..7 free
    binding = result.binding("j")
    assert binding is not None
    assert indices(node, binding.gpu_uuids) == [4, 5, 6, 7]  # 1,2,3 plus any of 4..7 would include a SYS pair
    assert "nvlink" in binding.reason


def test_one_gpu_job_keeps_a_switch_pair_whole() -> None:
    node = pcie_node("n1", n=4)
    result = schedule([req("j", 1)], [node], busy(node, 3))  # free 0, 1, 2
    binding = result.binding("j")
    assert binding is not None
    assert indices(node, binding.gpu_uuids) == [2]  # 0+1 stay a pair for the next 2-GPU job


def test_small_job_packs_onto_busy_node_so_an_empty_one_stays_whole() -> None:
    a, b = nvswitch_node("a"), nvswitch_node("b")
    in_use = busy(a, 0, 1, 2, 3)
    result = schedule([req("small", 2), req("big", 8)], [a, b], in_use)
    small, big = result.binding("small"), result.binding("big")
    assert small is not None and big is not None
    assert small.node_ids == ("a",)
    assert big.node_ids == ("b",)
    assert not result.unplaced


def test_gang_job_gets_whole_nodes_or_nothing() -> None:
    a, b, c = nvswitch_node("a"), nvswitch_node("b"), nvswitch_node("c")
    result = schedule([req("gang", 16)], [a, b, c], busy(a, 0))
    binding = result.binding("gang")
    assert binding is not None
    assert binding.node_ids == ("b", "c") and len(binding.gpu_uuids) == 16

    # Only one whole node: the gang gets nothing, and the whole node is still there for others.
    result = schedule([req("gang", 16), req("after", 8)], [a, b], busy(a, 0))
    assert result.binding("gang") is None
    assert "nothing bound" in result.unplaced[0].reason
    after = result.binding("after")
    assert after is not None and after.node_ids == ("b",)


def test_unhealthy_gpus_get_no_work_and_degraded_ones_come_last() -> None:
    node = nvswitch_node("n", health={0: GpuHealth.UNHEALTHY, 1: GpuHealth.DEGRADED})
    result = schedule([req(f"j{i}", 1) for i in range(8)], [node])
    placed = {b.job_id: indices(node, b.gpu_uuids)[0] for b in result.bindings}
    assert 0 not in placed.values()
    assert len(placed) == 7 and placed["j6"] == 1  # the degraded GPU is the last one used
    assert [u.job_id for u in result.unplaced] == ["j7"]
    assert "free healthy GPUs" in result.unplaced[0].reason


def test_degraded_node_scores_lower_than_healthy_one() -> None:
    sick = nvswitch_node("a", health={i: GpuHealth.DEGRADED for i in range(8)})
    well = nvswitch_node("b")
    binding = schedule([req("j", 2)], [sick, well]).binding("j")
    assert binding is not None and binding.node_ids == ("b",)


def test_fractional_jobs_share_a_gpu_within_share_and_memory() -> None:
    node = nvswitch_node("n", n=2, memory_mib=40960)
    mps = dict(sharing=GpuSharing.MPS)
    result = schedule(
        [
            req("a", 0, share=0.5, memory_mib=20000, **mps),
            req("b", 0, share=0.25, memory_mib=10000, **mps),
            req("c", 0, share=0.25, memory_mib=20000, **mps),  # share fits, memory does not: next GPU
            req("d", 0, share=0.5, memory_mib=1000, sharing=GpuSharing.TIME_SLICING),  # other mode: own GPU
        ],
        [node],
    )
    gpu = {b.job_id: indices(node, b.gpu_uuids)[0] for b in result.bindings}
    assert gpu["a"] == gpu["b"] == 0
    assert gpu["c"] == 1
    assert "d" not in gpu and "no GPU" in result.unplaced[0].reason
    assert result.binding("a").sharing is GpuSharing.MPS  # type: ignore[union-attr]


def test_fractional_job_of_tenant_without_sharing_gets_a_whole_gpu() -> None:
    job = Job(id="f", tenant="t", gpus=0, gpu_share=0.3, submitted_at=datetime(2026, 1, 1, tzinfo=UTC))
    request = GpuRequest.for_job(job, Policy(tenant="t"))
    node = nvswitch_node("n", n=2)
    result = schedule([request, req("other", 0, share=0.3, sharing=GpuSharing.MPS)], [node])
    f, other = result.binding("f"), result.binding("other")
    assert f is not None and other is not None and f.gpu_uuids != other.gpu_uuids
    shared = GpuRequest.for_job(job, Policy(tenant="t", gpu_sharing=GpuSharing.MPS))
    assert shared.sharing is GpuSharing.MPS and shared.share == 0.3


def test_tenant_quota_and_labels_filter_nodes() -> None:
    a = nvswitch_node("a", labels={"rack": "r1"})
    b = nvswitch_node("b", labels={"rack": "r2", "dataset": "imagenet"})
    result = schedule(
        [
            req("r1", 1, node_labels={"rack": "r1"}),
            req("near-data", 1, data_labels={"dataset": "imagenet"}),
            req("over", 4, tenant="small"),
            req("nowhere", 1, node_labels={"rack": "r9"}),
            req("wrong-model", 1, gpu_model="H100"),
        ],
        [a, b],
        quotas={"small": 3},
    )
    assert result.binding("r1").node_ids == ("a",)  # type: ignore[union-attr]
    assert result.binding("near-data").node_ids == ("b",)  # type: ignore[union-attr]
    reasons = {u.job_id: u.reason for u in result.unplaced}
    assert reasons["over"] == "tenant small quota: needs 4 GPUs, 3 left"
    assert reasons["nowhere"] == "no on-prem node carries labels rack=r9"
    assert reasons["wrong-model"] == "no on-prem node has GPU model H100"


def test_deterministic_whatever_the_node_order() -> None:
    nodes = [pcie_node(f"n{i}") for i in range(6)]
    requests = [req(f"j{i}", random.Random(i).choice([1, 2, 4])) for i in range(20)]
    first = schedule(requests, nodes)
    shuffled = list(nodes)
    random.Random(3).shuffle(shuffled)
    assert schedule(requests, shuffled) == first


def test_jobs_on_an_unhealthy_gpu_are_displaced_with_the_reason() -> None:
    node = nvswitch_node("n", health={2: GpuHealth.UNHEALTHY})
    out = displaced_by_health([node], {"ok": [node.gpus[0].uuid], "hit": [node.gpus[1].uuid, node.gpus[2].uuid]})
    assert out == {"hit": "GPU 2 of n is unhealthy (scripted)"}


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([1, 1, 2, 3, 4, 8, 16]), min_size=1, max_size=30),
    shares=st.lists(st.sampled_from([0.25, 0.5]), max_size=6),
    n_nodes=st.integers(1, 4),
)
def test_no_gpu_is_given_twice_and_shares_never_exceed_one(sizes: list[int], shares: list[float], n_nodes: int) -> None:
    nodes = [cube_mesh_node(f"n{i}") if i % 2 else pcie_node(f"n{i}") for i in range(n_nodes)]
    requests = [req(f"w{i}", k) for i, k in enumerate(sizes)]
    requests += [req(f"s{i}", 0, share=s, sharing=GpuSharing.MPS) for i, s in enumerate(shares)]
    result = schedule(requests, nodes)
    assert len(result.bindings) + len(result.unplaced) == len(requests)
    exclusive: list[str] = []
    shared: dict[str, float] = {}
    for b in result.bindings:
        if b.share is None:
            exclusive.extend(b.gpu_uuids)
            assert len(b.gpu_uuids) == next(r.gpus for r in requests if r.job_id == b.job_id)  # all or nothing
        else:
            shared[b.gpu_uuids[0]] = shared.get(b.gpu_uuids[0], 0.0) + b.share
    assert len(exclusive) == len(set(exclusive))
    assert not set(exclusive) & set(shared)
    assert all(total <= 1.0 + 1e-9 for total in shared.values())
