"""PrometheusRates against a real Prometheus (tests/prometheus_server.py): backfilled history, a scraped gauge,
and each way a query fails (no series, a PromQL error, a stopped server, a server too slow, not JSON, bad TLS)."""

from __future__ import annotations

import bisect
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_server import Exporter, PrometheusServer, StubApi, backfill, eventually, start_prometheus

from burst.model import Service
from burst.workloads.prometheus import MAX_STEPS_PER_QUERY, PrometheusRates, prometheus_rates
from burst.workloads.rates import RateUnavailable
from policies.rates import PrometheusDoc

SAMPLE_EVERY_S = 60
LOOKBACK_S = 300  # Prometheus's default: an instant query sees a series' latest sample up to 5 minutes old
HISTORY_DAYS = 4
END = (int(time.time()) // 3600 - 1) * 3600  # the backfilled history ends an hour or two ago
START = END - HISTORY_DAYS * 86400
# One series gaps for 30 minutes on day 1, the other on day 2, both together on day 3: no step there.
GAPS = {"a": [(START + 86400, START + 86400 + 1800), (START + 3 * 86400, START + 3 * 86400 + 1800)],
        "b": [(START + 2 * 86400, START + 2 * 86400 + 1800), (START + 3 * 86400, START + 3 * 86400 + 1800)]}


def series_samples(pod: str) -> list[tuple[float, float]]:
    """One backfilled series: a sample every minute, 15 s past it (so no query step lies exactly at the lookback's
    edge), a: 0.5 k, b: 1000 + 2 k, none inside its gaps."""
    out = []
    for k in range((END - START) // SAMPLE_EVERY_S):
        at = START + 15 + k * SAMPLE_EVERY_S
        if not any(lo <= at < hi for lo, hi in GAPS[pod]):
            out.append((float(at), 0.5 * k if pod == "a" else 1000.0 + 2 * k))
    return out


BACKFILLED = {pod: series_samples(pod) for pod in ("a", "b")}
SAMPLE_TIMES = {pod: [at for at, _ in samples] for pod, samples in BACKFILLED.items()}


def expected_sum(at: float) -> float | None:
    """What Prometheus answers for sum over pods at `at`: each series' latest sample within the lookback."""
    total, seen = 0.0, False
    for pod, samples in BACKFILLED.items():
        i = bisect.bisect_right(SAMPLE_TIMES[pod], at) - 1
        if i >= 0 and at - samples[i][0] < LOOKBACK_S:
            total, seen = total + samples[i][1], True
    return total if seen else None


def service(query: str | None, name: str = "chat") -> Service:
    return Service(tenant="research", name=name, gpu_model="a100", max_replicas=4, ready_within_s=300.0,
                   unserved_request_cost_usd=0.01, requests_per_s=10.0, rate_query=query)


def utc(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PrometheusServer, Exporter]]:
    """One Prometheus for the module: the two backfilled series of burst_test_rps, scraping an exporter of
    burst_test_live every second."""
    data_dir = tmp_path_factory.mktemp("prometheus") / "tsdb"
    backfill(data_dir, "burst_test_rps", [({"pod": pod}, samples) for pod, samples in BACKFILLED.items()])
    exporter = Exporter("burst_test_live", {"pod": "live-0"})
    server = start_prometheus(data_dir, [exporter.target])
    yield server, exporter
    server.stop()
    exporter.close()


@pytest.fixture
def rates(prom: tuple[PrometheusServer, Exporter]) -> Iterator[PrometheusRates]:
    source = PrometheusRates(prom[0].url, timeout_s=10.0)
    yield source
    source.close()


def test_history_reads_the_backfill_summed_across_series_in_chunks(rates: PrometheusRates) -> None:
    step_s = 30.0
    steps = (END - START) // int(step_s)
    assert steps > MAX_STEPS_PER_QUERY  # more than Prometheus answers in one query: read in two
    got = rates.history(service("burst_test_rps"), utc(START), utc(END), step_s)
    want = [(utc(at), v) for at in range(START, END + 1, int(step_s)) if (v := expected_sum(at)) is not None]
    assert got == want
    assert len(want) < steps + 1  # the common gap's steps are left out


def test_history_of_a_short_range_is_the_summed_samples(rates: PrometheusRates) -> None:
    first = START + 10 * SAMPLE_EVERY_S + 15
    got = rates.history(service("burst_test_rps"), utc(first), utc(first + 4 * SAMPLE_EVERY_S), SAMPLE_EVERY_S)
    assert got == [(utc(first + k * 60), 0.5 * (10 + k) + 1000.0 + 2 * (10 + k)) for k in range(5)]


def test_rate_at_a_past_instant_sums_the_series(rates: PrometheusRates) -> None:
    at = START + 100 * SAMPLE_EVERY_S + 15
    assert rates.rate(service("burst_test_rps"), utc(at)) == 0.5 * 100 + 1000.0 + 2 * 100
    assert rates.rate(service('burst_test_rps{pod="a"}'), utc(at + 30)) == 50.0


@pytest.mark.slow  # about 5 s: Prometheus hands new scrape targets to its scrapers at most every 5 s
def test_rate_follows_the_scraped_gauge(prom: tuple[PrometheusServer, Exporter], rates: PrometheusRates) -> None:
    _, exporter = prom
    live = service("burst_test_live")
    for value in (42.5, 7.25):
        exporter.set(value)
        assert eventually(lambda: rates.rate(live, datetime.now(UTC)), value.__eq__) == value


def test_rate_of_a_query_without_series_is_unavailable(rates: PrometheusRates) -> None:
    with pytest.raises(RateUnavailable, match="no series") as raised:
        rates.rate(service('burst_test_rps{pod="nobody"}'), utc(END - 600))
    assert raised.value.query == 'burst_test_rps{pod="nobody"}'


def test_a_promql_error_is_unavailable_with_prometheus_error(rates: PrometheusRates) -> None:
    with pytest.raises(RateUnavailable, match=r"HTTP 400 .*bad_data: .*parse error") as raised:
        rates.rate(service("sum(burst_test_rps"), utc(END))
    assert "\n" not in str(raised.value)
    with pytest.raises(RateUnavailable, match=r"HTTP 400 .*bad_data: .*parse error"):
        rates.history(service("sum(burst_test_rps"), utc(START), utc(END), 3600.0)


def test_values_that_are_not_rates_are_unavailable(rates: PrometheusRates) -> None:
    assert rates.rate(service("2.5"), utc(END)) == 2.5  # a scalar answer
    for query in ("vector(NaN)", "vector(-1)", "vector(+Inf)"):
        with pytest.raises(RateUnavailable, match="is not a rate"):
            rates.rate(service(query), utc(END))
    with pytest.raises(RateUnavailable, match="is not a rate"):
        rates.history(service("vector(-1)"), utc(END - 600), utc(END), 60.0)


def test_a_service_without_rate_query_is_unavailable(rates: PrometheusRates) -> None:
    with pytest.raises(RateUnavailable, match="service research/chat declares no rate_query") as raised:
        rates.rate(service(None), utc(END))
    assert raised.value.query == ""
    with pytest.raises(RateUnavailable, match="declares no rate_query"):
        rates.history(service(None), utc(START), utc(END), 60.0)


def test_a_stopped_server_is_unavailable_and_read_again_once_back(tmp_path: Path) -> None:
    data_dir = tmp_path / "tsdb"
    backfill(data_dir, "burst_test_rps", [({"pod": "a"}, BACKFILLED["a"][:600])])
    server = start_prometheus(data_dir)
    source = PrometheusRates(server.url, timeout_s=10.0)
    at = utc(BACKFILLED["a"][500][0])
    try:
        assert source.rate(service("burst_test_rps"), at) == 250.0
        server.stop()
        with pytest.raises(RateUnavailable, match=r"cannot reach .*Connection refused"):
            source.rate(service("burst_test_rps"), at)
        server.start()  # the same port and data
        assert source.rate(service("burst_test_rps"), at) == 250.0
    finally:
        source.close()
        server.stop()


def test_a_server_too_slow_is_unavailable_after_the_timeout() -> None:
    slow = StubApi('{"status": "success", "data": {"resultType": "vector", "result": []}}', hold=True)
    source = PrometheusRates(slow.url, timeout_s=0.3)
    try:
        began = time.monotonic()
        with pytest.raises(RateUnavailable, match=r"no answer from .* within 0.3 s \(timeout\)"):
            source.rate(service("up"), utc(END))
        assert time.monotonic() - began < 10.0
    finally:
        source.close()
        slow.close()


def test_an_answer_that_is_not_json_is_unavailable() -> None:
    proxy = StubApi("<html><body>502 Bad Gateway</body></html>", status=502, content_type="text/html")
    source = PrometheusRates(proxy.url)
    try:
        with pytest.raises(RateUnavailable, match=r"HTTP 502 from .*, not JSON: '<html><body>502 Bad Gateway"):
            source.rate(service("up"), utc(END))
    finally:
        source.close()
        proxy.close()


def vector_answer(*values: float) -> str:
    result = [{"metric": {"pod": str(i)}, "value": [END, str(v)]} for i, v in enumerate(values)]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def test_the_bearer_token_is_read_from_its_file_on_every_request(tmp_path: Path) -> None:
    api = StubApi(vector_answer(1.5, 2.0))
    (tmp_path / "token").write_text("first-token\n")
    doc = PrometheusDoc(url=api.url + "/", bearer_token_file="token")
    source = prometheus_rates(doc, lambda name: tmp_path / name if name is not None else None)
    try:
        assert source.rate(service("sum(rate(requests_total[1m]))"), utc(END)) == 3.5
        (tmp_path / "token").write_text("rotated-token")
        assert source.rate(service("up"), utc(END)) == 3.5
        assert [headers.get("Authorization") for _, headers in api.requests] == [
            "Bearer first-token", "Bearer rotated-token"]
        path = api.requests[0][0]
        assert path.startswith("/api/v1/query?") and "query=sum%28rate%28requests_total%5B1m%5D%29%29" in path
        assert f"time={END}.000" in path
        (tmp_path / "token").unlink()
        with pytest.raises(RateUnavailable, match=r"bearer token file .*token: No such file"):
            source.rate(service("up"), utc(END))
        assert len(api.requests) == 2  # nothing sent without the token
    finally:
        source.close()
        api.close()


def test_no_token_file_sends_no_authorization() -> None:
    api = StubApi(vector_answer(1.0))
    source = PrometheusRates(api.url)
    try:
        source.rate(service("up"), utc(END))
        assert "Authorization" not in api.requests[0][1]
    finally:
        source.close()
        api.close()


def test_the_ca_file_verifies_an_https_server(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    api = StubApi(vector_answer(6.0), tls=tls)
    trusting, default = PrometheusRates(api.url, ca_file=cert), PrometheusRates(api.url)
    try:
        assert trusting.rate(service("up"), utc(END)) == 6.0
        with pytest.raises(RateUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            default.rate(service("up"), utc(END))
    finally:
        trusting.close()
        default.close()
        api.close()
