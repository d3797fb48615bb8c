"""`burst agent`: the loop on each on-prem GPU node.

Every tick: poll the local jobs (exits, acks, deadlines), post a report with
the node's GPUs and health, fetch the work queued for it, carry that work
out (evictions first, then checkpoint requests, then starts), and post what
that changed at once. A report that cannot be delivered is kept and sent
with the next one, so no job status or checkpoint ack is lost to a
controller restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from burst.agent.channel import CheckpointAck, GpuSummary, JobStatus, Report, Work
from burst.agent.router import PREFIX
from burst.agent.runner import JobRunner

log = logging.getLogger(__name__)

CREDENTIALS_REFUSED = (401, 403)
"""HTTP statuses that mean the controller will never take this node's token: the agent stops with exit 1."""

Inventory = Callable[[], tuple[str, list[GpuSummary]]]
"""Returns the one-line discovery status and the node's GPUs (NVML, or the static inventory)."""


@dataclass
class TickResult:
    """What one agent tick did: work fetched, and whether the controller was reached."""

    work: Work = field(default_factory=Work)
    delivered: bool = False
    error: str = ""
    refused: int | None = None  # 401 or 403: the controller refuses this node's token, which no retry mends


class NodeAgent:
    """One node's agent (see the module docstring)."""

    def __init__(
        self,
        controller_url: str,
        node_id: str,
        token: str,
        runner: JobRunner,
        inventory: Inventory,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        timeout_s: float = 10.0,
    ) -> None:
        self.node_id = node_id
        self.runner = runner
        self.inventory = inventory
        self.clock = clock
        self.http = httpx.Client(
            base_url=controller_url.rstrip("/") + PREFIX,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )
        self._unsent_jobs: list[JobStatus] = []
        self._unsent_acks: list[CheckpointAck] = []

    def tick(self) -> TickResult:
        """One round trip with the controller; never raises for a network or HTTP failure (it is returned)."""
        self._collect()
        result = TickResult()
        try:
            self._send()
            response = self.http.get(f"/nodes/{self.node_id}/work")
            response.raise_for_status()
            result.work = Work.model_validate(response.json())
            self._apply(result.work)
            self._collect()
            self._send()
            result.delivered = True
        except (httpx.HTTPError, ValueError) as exc:
            result.error = f"controller unreachable or refused: {exc}"
            if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in CREDENTIALS_REFUSED:
                result.refused = exc.response.status_code
            log.warning("agent %s: %s", self.node_id, result.error)
        return result

    def run(self, interval_s: float, stop: threading.Event) -> TickResult | None:
        """Tick every `interval_s` until `stop` is set; then kill the jobs still running.

        A tick the controller refuses for credentials (401/403) ends the run
        at once and is returned: retrying cannot mend it. An unreachable
        controller is retried; None when `stop` ended the run.
        """
        try:
            while not stop.is_set():
                result = self.tick()
                if result.refused is not None:
                    return result
                stop.wait(interval_s)
            return None
        finally:
            self.runner.stop_all()
            self._collect()
            try:
                self._send()
            except httpx.HTTPError as exc:
                log.warning("agent %s: last report not delivered: %s", self.node_id, exc)
            self.http.close()

    def _collect(self) -> None:
        statuses, acks = self.runner.poll()
        self._unsent_jobs.extend(statuses)
        self._unsent_acks.extend(acks)

    def _apply(self, work: Work) -> None:
        for eviction in work.evictions:
            status = self.runner.evict(eviction)
            if status is not None:
                self._unsent_jobs.append(status)
        for request in work.checkpoints:
            log.info("agent %s: %s", self.node_id, self.runner.request_checkpoint(request))
        for assignment in work.assignments:
            self._unsent_jobs.append(self.runner.start(assignment))

    def _send(self) -> None:
        discovery, gpus = self.inventory()
        report = Report(
            node_id=self.node_id,
            at=self.clock(),
            discovery=discovery,
            gpus=gpus,
            jobs=self._unsent_jobs,
            acks=self._unsent_acks,
        )
        response = self.http.post(f"/nodes/{self.node_id}/report", content=report.model_dump_json(),
                                  headers={"Content-Type": "application/json"})
        response.raise_for_status()
        self._unsent_jobs, self._unsent_acks = [], []
