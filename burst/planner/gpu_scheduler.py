"""The local GPU scheduler for on-prem nodes: filter -> score -> bind specific GPU UUIDs.

The cloud tier is scheduled a node at a time (`placement`); on-prem nodes are
long-lived and shared, so which GPUs a job gets matters: a 2-GPU job on an
NVLink pair trains faster than on two GPUs across sockets, and a 1-GPU job
dropped on an empty node splits an 8-GPU block that a later 8-GPU job needed.

For each request, in the order given (the planner passes them in fair order):

1. **Filter** nodes: GPU model, required labels, the tenant's remaining quota,
   and enough free GPUs that are not unhealthy, not in MIG mode, and have the
   memory asked for.
2. **Score** each candidate node with the best GPU subset it offers:
   ``score = w_locality * locality + w_packing * packing + w_energy * energy``,
   times a health factor (each degraded GPU in the subset halves its share):

   * locality: the interconnect of the subset (NVLink 1.0, PCIe switch 0.75,
     host bridge 0.5, NUMA node 0.25, across sockets 0), averaged with the
     share of the request's data-locality labels the node carries, when it
     names any;
   * packing: the share of the node's GPUs in use after the bind (best fit,
     so large free blocks stay whole on other nodes);
   * energy: 1 when the node already runs work, 0 when it is idle (an idle
     node can be powered down; filling a busy one first keeps it so).

   Default weights 0.6 / 0.3 / 0.1 follow the locality / balance / energy
   split of published enterprise GPU schedulers, with "balance" read as
   packing. Inside a node the subset is the one with the best worst link, then
   fewest degraded GPUs, then the tightest links, then the best-connected
   GPUs left free (so the rest of the node stays one island).
3. **Bind**: the request gets exactly those GPU UUIDs. A gang job (more GPUs
   than one node has) gets whole free nodes, all of them or none.

A fractional request (`share` of one GPU) may share a GPU with others of the
same sharing mode (MPS or time-slicing) while shares sum to at most 1 and
memory to at most the GPU's; it prefers the shared GPU it fills best.

Candidate nodes are taken best fit first (fewest free GPUs that suffice) and
at most `max_candidates` are scored per request, like kube-scheduler's
percentage of nodes to score: placing 10,000 jobs on 1,000 nodes stays fast.
Everything is deterministic: the same input gives the same bindings.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from burst.model import (
    Gpu,
    GpuHealth,
    GpuLink,
    GpuSharing,
    Job,
    JobId,
    NodeGpus,
    NodeId,
    Policy,
    TenantName,
)

LINK_LOCALITY: Mapping[GpuLink, float] = {
    GpuLink.SAME: 1.0,
    GpuLink.NVLINK: 1.0,
    GpuLink.PCIE_SWITCH: 0.75,
    GpuLink.HOST_BRIDGE: 0.5,
    GpuLink.NUMA_NODE: 0.25,
    GpuLink.SYSTEM: 0.0,
}
"""Locality score of a subset by its worst link."""

DEGRADED_FACTOR = 0.5
"""Each degraded GPU in a subset counts at half weight in the health factor: used, but last."""

DEFAULT_MAX_CANDIDATES = 64
"""Nodes scored per request at most (best fit first)."""


@dataclass(frozen=True)
class ScoreWeights:
    """Weights of the node score's terms (they need not sum to 1)."""

    locality: float = 0.6
    packing: float = 0.3
    energy: float = 0.1


@dataclass(frozen=True)
class GpuRequest:
    """What one job asks of the local scheduler.

    `gpus` whole GPUs, or (gpus 0) a `share` of one GPU under `sharing`.
    `memory_mib` is per GPU. `node_labels` must all match; `data_labels` are
    preferred (data locality) and only raise the score.
    """

    job_id: JobId
    tenant: TenantName
    gpus: int = 1
    share: float | None = None
    memory_mib: int = 0
    gpu_model: str | None = None
    node_labels: Mapping[str, str] = field(default_factory=dict)
    data_labels: Mapping[str, str] = field(default_factory=dict)
    sharing: GpuSharing = GpuSharing.NONE

    @property
    def demand(self) -> float:
        """GPUs this request counts against its tenant's quota."""
        return float(self.gpus) if self.gpus else float(self.share or 0.0)

    @staticmethod
    def for_job(job: Job, policy: Policy, *, memory_mib: int = 0) -> GpuRequest:
        """The request for `job` under its tenant's `policy` (sharing mode only for fractional jobs)."""
        return GpuRequest(
            job_id=job.id,
            tenant=job.tenant,
            gpus=job.gpus,
            share=job.gpu_share if job.gpus == 0 else None,
            memory_mib=memory_mib,
            gpu_model=job.gpu_model,
            sharing=policy.gpu_sharing if job.gpus == 0 else GpuSharing.NONE,
        )


@dataclass(frozen=True)
class GpuUse:
    """What already runs on one GPU: the share of it taken, its memory, and how it is shared (NONE: exclusive)."""

    share: float = 1.0
    memory_mib: int = 0
    sharing: GpuSharing = GpuSharing.NONE


@dataclass(frozen=True)
class Binding:
    """A request bound to specific GPUs, with its score and the reason a reader sees."""

    job_id: JobId
    node_ids: tuple[NodeId, ...]
    gpu_uuids: tuple[str, ...]
    score: float
    reason: str
    share: float | None = None
    sharing: GpuSharing = GpuSharing.NONE


@dataclass(frozen=True)
class Unplaced:
    """A request no node could take now, and why."""

    job_id: JobId
    reason: str


@dataclass(frozen=True)
class ScheduleResult:
    """Every request's outcome: bound, or unplaced with a reason."""

    bindings: tuple[Binding, ...]
    unplaced: tuple[Unplaced, ...]

    def binding(self, job_id: JobId) -> Binding | None:
        """The binding of `job_id`, if it got one."""
        return next((b for b in self.bindings if b.job_id == job_id), None)


@dataclass(frozen=True)
class _Subset:
    mask: int
    worst: GpuLink
    degraded: int


class _NodeState:
    """One node's mutable occupancy while a schedule is computed."""

    __slots__ = ("index", "gpus", "node", "ranks", "topo", "free", "eligible", "degraded", "shared", "total", "model")

    def __init__(self, index: int, node: NodeGpus, topo: int, ranks: tuple[tuple[int, ...], ...]) -> None:
        self.index = index
        self.node = node
        self.gpus: tuple[Gpu, ...] = tuple(sorted(node.gpus, key=lambda g: g.index))
        self.ranks = ranks
        self.topo = topo
        self.total = len(self.gpus)
        self.model = self.gpus[0].model if self.gpus else ""
        self.eligible = 0  # GPUs that may take new work (not unhealthy, not MIG)
        self.degraded = 0
        for i, g in enumerate(self.gpus):
            if g.health is not GpuHealth.UNHEALTHY and not g.mig_enabled:
                self.eligible |= 1 << i
            if g.health is GpuHealth.DEGRADED:
                self.degraded |= 1 << i
        self.free = self.eligible
        self.shared: dict[int, GpuUse] = {}

    @property
    def free_count(self) -> int:
        return self.free.bit_count()

    @property
    def busy(self) -> bool:
        return self.free != self.eligible or bool(self.shared)


class _Fleet:
    """The nodes, indexed by GPU model and free-GPU count, with a cache of best subsets per topology."""

    def __init__(self, nodes: Sequence[NodeGpus], in_use: Mapping[str, GpuUse]) -> None:
        topologies: dict[tuple[tuple[int, ...], ...], int] = {}
        self.nodes: list[_NodeState] = []
        for i, node in enumerate(sorted(nodes, key=lambda n: n.node_id)):
            gpus = sorted(node.gpus, key=lambda g: g.index)
            ranks = tuple(tuple(node.link(a.uuid, b.uuid).rank for b in gpus) for a in gpus)
            state = _NodeState(i, node, topologies.setdefault(ranks, len(topologies)), ranks)
            for j, g in enumerate(state.gpus):
                use = in_use.get(g.uuid)
                if use is None:
                    continue
                state.free &= ~(1 << j)
                if use.sharing is not GpuSharing.NONE and use.share < 1.0:
                    state.shared[j] = use
            self.nodes.append(state)
        self.buckets: dict[str, list[dict[int, None]]] = {}
        for state in self.nodes:
            self._bucket(state.model, state.total)[state.free_count][state.index] = None
        self._subsets: dict[tuple[int, int, int, int], _Subset | None] = {}

    def _bucket(self, model: str, size: int) -> list[dict[int, None]]:
        buckets = self.buckets.setdefault(model, [])
        while len(buckets) <= size:
            buckets.append({})
        return buckets

    def models(self, wanted: str | None) -> list[str]:
        return sorted(self.buckets) if wanted is None else ([wanted] if wanted in self.buckets else [])

    def take(self, state: _NodeState, mask: int) -> None:
        """Mark `mask`'s GPUs of `state` in use, keeping the free-count index right."""
        buckets = self.buckets[state.model]
        del buckets[state.free_count][state.index]
        state.free &= ~mask
        buckets[state.free_count][state.index] = None

    def best_subset(self, state: _NodeState, usable: int, k: int) -> _Subset | None:
        """The best `k` GPUs of `usable` on `state` (cached by topology, masks and k)."""
        key = (state.topo, usable, state.degraded & usable, k)
        if key not in self._subsets:
            self._subsets[key] = _choose_subset(state.ranks, usable, state.degraded, k)
        return self._subsets[key]


def _choose_subset(ranks: tuple[tuple[int, ...], ...], usable: int, degraded: int, k: int) -> _Subset | None:
    indices = [i for i in range(len(ranks)) if usable >> i & 1]
    if len(indices) < k:
        return None
    best: tuple[tuple[int, int, int, int, tuple[int, ...]], int] | None = None
    for combo in itertools.combinations(indices, k):
        worst = max((ranks[a][b] for a, b in itertools.combinations(combo, 2)), default=0)
        tight = sum(ranks[a][b] for a, b in itertools.combinations(combo, 2))
        rest = [i for i in indices if i not in combo]
        residual = max((ranks[a][b] for a, b in itertools.combinations(rest, 2)), default=0)
        n_degraded = sum(1 for i in combo if degraded >> i & 1)
        key = (worst, n_degraded, tight, residual, combo)
        if best is None or key < best[0]:
            best = (key, sum(1 << i for i in combo))
    assert best is not None
    (worst, n_degraded, *_), mask = best
    return _Subset(mask=mask, worst=list(GpuLink)[worst], degraded=n_degraded)


def _usable(state: _NodeState, memory_mib: int) -> int:
    if memory_mib <= 0:
        return state.free
    return sum(1 << i for i, g in enumerate(state.gpus) if state.free >> i & 1 and g.memory_mib >= memory_mib)


def _labels_match(node: NodeGpus, wanted: Mapping[str, str]) -> bool:
    return all(node.labels.get(k) == v for k, v in wanted.items())


def _data_share(node: NodeGpus, wanted: Mapping[str, str]) -> float | None:
    if not wanted:
        return None
    return sum(1 for k, v in wanted.items() if node.labels.get(k) == v) / len(wanted)


@dataclass(frozen=True)
class _Scored:
    score: float
    state: _NodeState
    subset: _Subset
    detail: str


def _score(req: GpuRequest, state: _NodeState, subset: _Subset, k: int, weights: ScoreWeights) -> _Scored:
    interconnect = LINK_LOCALITY[subset.worst] if k > 1 else 1.0
    data = _data_share(state.node, req.data_labels)
    locality = interconnect if data is None else (interconnect + data) / 2
    packing = (state.total - state.free_count + k) / state.total
    energy = 1.0 if state.busy else 0.0
    health = 1.0 - DEGRADED_FACTOR * subset.degraded / k
    score = (weights.locality * locality + weights.packing * packing + weights.energy * energy) * health
    detail = f"locality {locality:.2f}, packing {packing:.2f}, energy {energy:.0f}"
    if subset.degraded:
        detail += f", {subset.degraded} degraded GPU(s) x{health:.2f}"
    return _Scored(score, state, subset, detail)


def _uuids(state: _NodeState, mask: int) -> tuple[str, ...]:
    return tuple(g.uuid for i, g in enumerate(state.gpus) if mask >> i & 1)


def _indices(mask: int) -> str:
    return ",".join(str(i) for i in range(mask.bit_length()) if mask >> i & 1)


def _place_whole(req: GpuRequest, fleet: _Fleet, weights: ScoreWeights, max_candidates: int) -> Binding | None:
    k = req.gpus
    best: _Scored | None = None
    seen = 0
    for model in fleet.models(req.gpu_model):
        buckets = fleet.buckets[model]
        for count in range(k, len(buckets)):
            for index in buckets[count]:
                state = fleet.nodes[index]
                if req.node_labels and not _labels_match(state.node, req.node_labels):
                    continue
                subset = fleet.best_subset(state, _usable(state, req.memory_mib), k)
                if subset is None:
                    continue
                scored = _score(req, state, subset, k, weights)
                if best is None or (scored.score, -scored.state.index) > (best.score, -best.state.index):
                    best = scored
                seen += 1
                if seen >= max_candidates:
                    break
            if seen >= max_candidates:
                break
    if best is None:
        return None
    fleet.take(best.state, best.subset.mask)
    link = f" ({best.subset.worst.value})" if k > 1 else ""
    return Binding(
        job_id=req.job_id,
        node_ids=(best.state.node.node_id,),
        gpu_uuids=_uuids(best.state, best.subset.mask),
        score=round(best.score, 4),
        reason=f"{best.state.node.node_id} GPU {_indices(best.subset.mask)}{link}: score {best.score:.2f} ({best.detail})",
    )


def _place_gang(req: GpuRequest, fleet: _Fleet) -> Binding | str:
    """Whole free nodes for a job larger than one node: all it needs, or none."""
    for model in fleet.models(req.gpu_model):
        per_node = max((s.total for s in fleet.nodes if s.model == model), default=0)
        if per_node == 0:
            continue
        need = -(-req.gpus // per_node)
        whole = [
            fleet.nodes[i]
            for i in fleet.buckets[model][per_node]
            if fleet.nodes[i].free == (1 << per_node) - 1
            and _usable(fleet.nodes[i], req.memory_mib) == fleet.nodes[i].free
            and (not req.node_labels or _labels_match(fleet.nodes[i].node, req.node_labels))
        ]
        if len(whole) < need:
            continue
        chosen = sorted(whole, key=lambda s: s.node.node_id)[:need]
        uuids: list[str] = []
        remaining = req.gpus
        for state in chosen:
            take = min(per_node, remaining)
            mask = (1 << take) - 1
            uuids.extend(_uuids(state, mask))
            fleet.take(state, mask)
            remaining -= take
        names = ",".join(s.node.node_id for s in chosen)
        return Binding(
            job_id=req.job_id,
            node_ids=tuple(s.node.node_id for s in chosen),
            gpu_uuids=tuple(uuids),
            score=0.0,
            reason=f"gang of {req.gpus} GPUs on {need} whole {model} nodes ({names})",
        )
    return f"gang of {req.gpus} GPUs: not enough whole free nodes; nothing bound"


def _place_share(req: GpuRequest, fleet: _Fleet, weights: ScoreWeights, max_candidates: int) -> Binding | None:
    share = req.share or 0.0
    best: tuple[float, int, int] | None = None  # (room left after, node index, gpu index)
    for state in fleet.nodes:
        if (req.gpu_model is not None and state.model != req.gpu_model) or (
            req.node_labels and not _labels_match(state.node, req.node_labels)
        ):
            continue
        for j, use in state.shared.items():
            gpu = state.gpus[j]
            room = 1.0 - use.share - share
            if use.sharing is req.sharing and room >= -1e-9 and use.memory_mib + req.memory_mib <= gpu.memory_mib:
                if best is None or (room, state.index, j) < best:
                    best = (room, state.index, j)
    if best is not None:
        _, index, j = best
        state = fleet.nodes[index]
        use = state.shared[j]
        state.shared[j] = GpuUse(use.share + share, use.memory_mib + req.memory_mib, req.sharing)
        gpu = state.gpus[j]
        return Binding(
            job_id=req.job_id,
            node_ids=(state.node.node_id,),
            gpu_uuids=(gpu.uuid,),
            score=1.0,
            reason=f"{state.node.node_id} GPU {j}: shares it ({req.sharing.value}), "
            f"{use.share + share:.2f} of it taken",
            share=share,
            sharing=req.sharing,
        )
    whole = _place_whole(
        GpuRequest(req.job_id, req.tenant, 1, None, req.memory_mib, req.gpu_model, req.node_labels, req.data_labels),
        fleet,
        weights,
        max_candidates,
    )
    if whole is None:
        return None
    state = next(s for s in fleet.nodes if s.node.node_id == whole.node_ids[0])
    j = next(i for i, g in enumerate(state.gpus) if g.uuid == whole.gpu_uuids[0])
    state.shared[j] = GpuUse(share, req.memory_mib, req.sharing)
    return Binding(
        job_id=req.job_id,
        node_ids=whole.node_ids,
        gpu_uuids=whole.gpu_uuids,
        score=whole.score,
        reason=f"{whole.reason}; opened for sharing ({req.sharing.value}), {share:.2f} of it taken",
        share=share,
        sharing=req.sharing,
    )


def _why_unplaced(req: GpuRequest, fleet: _Fleet) -> str:
    states = [s for s in fleet.nodes if req.gpu_model is None or s.model == req.gpu_model]
    if not states:
        return f"no on-prem node has GPU model {req.gpu_model}"
    states = [s for s in states if _labels_match(s.node, req.node_labels)]
    if not states:
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(req.node_labels.items()))
        return f"no on-prem node carries labels {wanted}"
    most = max(_usable(s, req.memory_mib).bit_count() for s in states)
    memory = f" with {req.memory_mib} MiB" if req.memory_mib else ""
    if req.share is not None and req.gpus == 0:
        return f"no GPU{memory} has {req.share:.2f} left to share ({req.sharing.value}) and no GPU is free"
    return f"no node has {req.gpus} free healthy GPUs{memory} (at most {most} on one node)"


def schedule(
    requests: Sequence[GpuRequest],
    nodes: Sequence[NodeGpus],
    in_use: Mapping[str, GpuUse] | None = None,
    *,
    quotas: Mapping[TenantName, float] | None = None,
    weights: ScoreWeights = ScoreWeights(),
    max_candidates: int = DEFAULT_MAX_CANDIDATES,
) -> ScheduleResult:
    """Bind each request, in order, to specific GPUs of `nodes`, or say why it cannot be placed now.

    `in_use` is what already runs, by GPU UUID; `quotas` the GPUs each tenant
    may still take on-prem (a tenant not named is unbounded). A fractional
    request with sharing NONE gets a whole GPU.
    """
    fleet = _Fleet(nodes, in_use or {})
    left = dict(quotas or {})
    bindings: list[Binding] = []
    unplaced: list[Unplaced] = []
    max_node = max((s.total for s in fleet.nodes), default=0)
    for req in requests:
        if req.tenant in left and req.demand > left[req.tenant] + 1e-9:
            unplaced.append(
                Unplaced(req.job_id, f"tenant {req.tenant} quota: needs {req.demand:g} GPUs, {left[req.tenant]:g} left")
            )
            continue
        outcome: Binding | str | None
        if req.gpus == 0 and req.sharing is not GpuSharing.NONE:
            outcome = _place_share(req, fleet, weights, max_candidates)
        elif req.gpus > max_node:
            outcome = _place_gang(req, fleet)
        else:
            whole_req = req if req.gpus else GpuRequest(
                req.job_id, req.tenant, 1, None, req.memory_mib, req.gpu_model, req.node_labels, req.data_labels
            )
            outcome = _place_whole(whole_req, fleet, weights, max_candidates)
        if isinstance(outcome, Binding):
            bindings.append(outcome)
            if req.tenant in left:
                left[req.tenant] -= req.demand
        else:
            unplaced.append(Unplaced(req.job_id, outcome if isinstance(outcome, str) else _why_unplaced(req, fleet)))
    return ScheduleResult(tuple(bindings), tuple(unplaced))


def displaced_by_health(nodes: Iterable[NodeGpus], bound: Mapping[JobId, Sequence[str]]) -> dict[JobId, str]:
    """Jobs running on a GPU judged unhealthy, with the reason: they are moved (checkpoint first, then evict)."""
    unhealthy = {g.uuid: (n.node_id, g) for n in nodes for g in n.gpus if g.health is GpuHealth.UNHEALTHY}
    out: dict[JobId, str] = {}
    for job_id, uuids in sorted(bound.items()):
        for uuid in uuids:
            if uuid in unhealthy:
                node_id, gpu = unhealthy[uuid]
                out[job_id] = f"GPU {gpu.index} of {node_id} is unhealthy ({gpu.health_reason or 'no reason given'})"
                break
    return out
