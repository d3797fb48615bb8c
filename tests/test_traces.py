"""Trace loaders: every format on hand-made fixtures (stats computed by hand), validation, real traces."""

from __future__ import annotations

import csv
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from burst.model import JobState
from burst.settings import data_dir
from burst.sim.traces import BadRow, Trace, TraceError, detect_format, load_trace

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
ITP_DATASET_GPU_HOURS = 1_632_719.7  # all 10 ITP clusters together, from the dataset's README


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------- philly


def test_philly_fixture_jobs_and_stats() -> None:
    tr = load_trace(FIXTURES / "philly-small.csv")
    assert tr.format == "philly"
    assert tr.tenants == ("vc1", "vc2")
    assert tr.bad_rows == ()
    # sorted by submit time, then id; ids are <cluster>-<line>
    assert [j.id for j in tr.jobs] == ["vc1-3", "vc2-5", "vc2-2", "vc1-4"]
    first = tr.jobs[0]
    assert first.submitted_at == datetime(2017, 10, 1, tzinfo=UTC)
    assert first.submitted_at.tzinfo is not None
    assert first.gpus == 2 and first.duration_s == 3600.0
    assert all(j.state is JobState.PENDING and not j.fault_tolerant for j in tr.jobs)

    s = tr.stats()
    # demand: [0,900) 10, [900,1800) 2, [1800,3600) 6, [3600,5400) 4, [5400,7200) 0, [7200,9900) 1
    assert s.jobs == 4
    assert s.gpu_hours == pytest.approx((3600 * 2 + 3600 * 4 + 2700 * 1 + 900 * 8) / 3600)
    assert s.peak_gpus == 10
    # time at <=0: 1800 s, <=1: 4500 s, <=2: 5400 s >= 9900/2  -> 2 (an event-count median would be 3)
    assert s.p50_gpus == 2
    assert s.start == datetime(2017, 10, 1, tzinfo=UTC)
    assert s.end == datetime(2017, 10, 1, 2, 45, tzinfo=UTC)


def test_philly_numeric_timestamps_are_unix_seconds(tmp_path: Path) -> None:
    p = write(tmp_path, "p.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n1506816000,60,1,60,vc\n")
    (job,) = load_trace(p).jobs
    assert job.submitted_at == datetime(2017, 10, 1, tzinfo=UTC)


def test_bad_rows_are_reported_with_line_numbers_and_skipped(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:00:00,abc,1,0,vc1\n"  # 2
        "2017-10-01 00:00:00,100,0,0,vc1\n"  # 3
        "not-a-time,100,1,100,vc1\n"  # 4
        "2017-10-01 00:00:00,-5,1,0,vc1\n"  # 5
        "2017-10-01 00:00:00,100,1,100,\n"  # 6
        "\n"  # 7: blank, ignored
        "2017-10-01 00:00:00,100\n"  # 8
        "2017-10-01 00:00:00,100,1.5,150,vc1\n"  # 9
        "2017-10-01 00:00:00,0,1,0,vc1\n"  # 10
        "2017-10-01 00:00:00,100,2,200,vc1\n",  # 11: the good one
    )
    tr = load_trace(p)
    assert [j.id for j in tr.jobs] == ["vc1-11"]
    assert tr.bad_rows == (
        BadRow(2, "duration: not a number 'abc'"),
        BadRow(3, "num_gpus: must be >= 1, got 0"),
        BadRow(4, "timestamp: not a time 'not-a-time'"),
        BadRow(5, "duration: must be > 0, got -5"),
        BadRow(6, "cluster: missing"),
        BadRow(8, "num_gpus: missing"),
        BadRow(9, "num_gpus: not a whole number '1.5'"),
        BadRow(10, "duration: must be > 0, got 0"),
    )


def test_rows_with_absurd_values_are_skipped_with_their_line(tmp_path: Path) -> None:
    # A 1e15 s duration or a million GPUs used to load, then raise in the simulator or run for minutes.
    p = write(
        tmp_path,
        "absurd.csv",
        "job_id,submission_time,duration,num_gpu\n"
        "a,0,1e15,1\n"  # 2
        "b,0,60,1000000\n"  # 3
        "c,0,60,1\n"  # 4: the good one
        "d,1e300,60,1\n",  # 5
    )
    tr = load_trace(p)
    assert [j.id for j in tr.jobs] == ["absurd-c"]
    assert [(b.line, b.message.split(":")[0]) for b in tr.bad_rows] == [(2, "duration_s"), (3, "gpus"),
                                                                          (5, "submission_time")]
    assert all(len(b.message) < 120 for b in tr.bad_rows)


def test_quoted_multiline_field_keeps_later_line_numbers_right(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "q.csv",
        'timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,60,1,60,"v\nc"\n2017-10-01 00:00:00,x,1,60,vc\n',
    )
    tr = load_trace(p)
    assert tr.bad_rows == (BadRow(4, "duration: not a number 'x'"),)


# ---------------------------------------------------------------- itp


def test_itp_fixture_tenant_is_file_stem_and_stats() -> None:
    tr = load_trace(FIXTURES / "itp-small.csv")
    assert tr.format == "itp"
    assert tr.tenants == ("itp-small",)
    assert [j.id for j in tr.jobs] == ["itp-small-c", "itp-small-a", "itp-small-b"]
    s = tr.stats()
    # [0,600) 1, then idle until 86400, [86400,88200) 8, [88200,90000) 10, [90000,95400) 2
    assert s.peak_gpus == 10
    assert s.p50_gpus == 0  # idle 85,800 s of 95,400 s
    assert s.gpu_hours == pytest.approx((8 * 3600 + 2 * 7200 + 1 * 600) / 3600)
    assert s.end == datetime(2021, 3, 5, 2, 30, tzinfo=UTC)


def test_itp_epoch_anchoring() -> None:
    default = load_trace(FIXTURES / "itp-small.csv")
    a = next(j for j in default.jobs if j.id.endswith("-a"))  # submission_time 86400
    assert a.submitted_at == datetime(2021, 3, 5, tzinfo=UTC)
    assert default.jobs[0].submitted_at == datetime(2021, 3, 4, tzinfo=UTC)

    epoch = datetime(2022, 6, 1, 12, tzinfo=UTC)
    moved = load_trace(FIXTURES / "itp-small.csv", epoch=epoch)
    a2 = next(j for j in moved.jobs if j.id.endswith("-a"))
    assert a2.submitted_at == epoch + timedelta(days=1)
    # a naive epoch is UTC
    naive = load_trace(FIXTURES / "itp-small.csv", epoch=datetime(2022, 6, 1, 12))
    assert naive.jobs == moved.jobs


def test_itp_tenant_argument_replaces_stem() -> None:
    tr = load_trace(FIXTURES / "itp-small.csv", tenant="research")
    assert tr.tenants == ("research",)
    assert tr.jobs[0].id == "research-c"


def test_itp_negative_submission_time_and_duplicate_id_are_bad(tmp_path: Path) -> None:
    p = write(
        tmp_path, "itp-x.csv", "job_id,submission_time,duration,num_gpu\na,-1,600,1\nb,0,600,1\nb,5,600,1\n"
    )
    tr = load_trace(p)
    assert [j.id for j in tr.jobs] == ["itp-x-b"]
    assert tr.bad_rows == (
        BadRow(2, "submission_time: must be >= 0, got -1"),
        BadRow(4, "job id 'itp-x-b' repeats line 3"),
    )


# ---------------------------------------------------------------- alibaba


def test_alibaba_fixture_shares_skips_and_stats() -> None:
    tr = load_trace(FIXTURES / "alibaba-small.csv")
    assert tr.format == "alibaba"
    assert tr.tenants == ("BE", "Burstable", "LS")
    assert tr.skipped_non_gpu == 1  # openb-pod-0002 is CPU-only: skipped, not bad
    assert tr.bad_rows == ()
    jobs = {j.id.split("-", 1)[1]: j for j in tr.jobs}
    assert set(jobs) == {"openb-pod-0000", "openb-pod-0001", "openb-pod-0003", "openb-pod-0004"}

    whole = jobs["openb-pod-0000"]
    assert (whole.gpus, whole.gpu_share, whole.tenant) == (1, None, "LS")
    shared = jobs["openb-pod-0001"]
    assert (shared.gpus, shared.gpu_share, shared.gpu_demand, shared.whole_gpus) == (0, 0.5, 0.5, 1)
    assert shared.submitted_at == datetime(2023, 1, 1, 0, 10, tzinfo=UTC)
    multi = jobs["openb-pod-0003"]
    assert multi.gpus == 8 and multi.gpu_model == "V100M32"
    assert multi.duration_s == 4600 - 1800  # deletion - scheduled
    assert multi.submitted_at == datetime(2023, 1, 1, tzinfo=UTC) + timedelta(seconds=1000)  # creation
    pending = jobs["openb-pod-0004"]  # never scheduled: deletion - creation
    assert pending.duration_s == 600 and pending.gpu_share == 0.25 and pending.gpu_model is None

    s = tr.stats()
    # [0,600) 1, [600,1000) 1.5, [1000,2000) 9.5, [2000,2600) 9.75, [2600,3800) 9.5, [3800,4200) 1.5, [4200,7000) 1
    assert s.peak_gpus == 9.75
    assert s.p50_gpus == 1.5  # time at <=1: 3400 s < 3500; at <=1.5: 4200 s
    assert s.gpu_hours == pytest.approx((1 * 7000 + 0.5 * 3600 + 8 * 2800 + 0.25 * 600) / 3600)
    assert s.start == datetime(2023, 1, 1, tzinfo=UTC)
    assert s.end == datetime(2023, 1, 1, tzinfo=UTC) + timedelta(seconds=7000)


def test_alibaba_tenant_column_and_epoch() -> None:
    epoch = datetime(2024, 2, 1, tzinfo=UTC)
    tr = load_trace(FIXTURES / "alibaba-small.csv", tenant_column="pod_phase", epoch=epoch)
    assert tr.tenants == ("Pending", "Running", "Succeeded")
    assert tr.jobs[0].submitted_at == epoch


def test_alibaba_only_cpu_pods_is_unusable(tmp_path: Path) -> None:
    header = (FIXTURES / "alibaba-small.csv").read_text().splitlines()[0]
    p = write(tmp_path, "cpu.csv", header + "\nopenb-pod-9,1000,1024,0,0,,LS,Running,0,10,0\n")
    with pytest.raises(TraceError, match=r"cpu\.csv: no usable rows \(1 non-GPU pod skipped\)"):
        load_trace(p)


def test_alibaba_bad_rows(tmp_path: Path) -> None:
    header = (FIXTURES / "alibaba-small.csv").read_text().splitlines()[0]
    p = write(
        tmp_path,
        "a.csv",
        header + "\n"
        "p1,1000,1024,1,0,,LS,Running,0,10,0\n"  # 2: 1-GPU pod asking for 0 milli-GPU
        "p2,1000,1024,1,1000,,LS,Running,5,5,5\n"  # 3: zero duration
        "p3,1000,1024,2,1000,,LS,Running,0,,0\n"  # 4: still running, no deletion_time
        "p4,1000,1024,1,1000,,LS,Running,0,10,0\n",  # 5: good
    )
    tr = load_trace(p)
    assert [j.id for j in tr.jobs] == ["LS-p4"]
    assert tr.bad_rows == (
        BadRow(2, "gpu_milli: must be in (0, 1000] for a 1-GPU pod, got 0"),
        BadRow(3, "duration: deletion_time - scheduled_time must be > 0, got 0"),
        BadRow(4, "deletion_time: missing"),
    )


# ---------------------------------------------------------------- generic csv


def test_generic_csv_fixture() -> None:
    tr = load_trace(FIXTURES / "generic-small.csv")
    assert tr.format == "csv"
    assert tr.tenants == ("default", "team-a", "team-b")
    # 01:00 tie (numeric and +02:00 offset) broken by id
    assert [j.id for j in tr.jobs] == ["team-a-train-1", "default-eval-1", "team-a-train-3", "team-b-3"]
    t1, ev, t3, b = tr.jobs
    assert t1.fault_tolerant and t1.checkpoint_interval_s == 600 and t1.gpu_model == "A100"
    assert not b.fault_tolerant and b.checkpoint_interval_s is None and b.gpu_model is None
    assert ev.submitted_at == datetime(2024, 5, 1, 0, 30, tzinfo=UTC) and ev.gpu_model == "H100"
    assert t3.submitted_at == b.submitted_at == datetime(2024, 5, 1, 1, tzinfo=UTC)
    assert not t3.fault_tolerant

    s = tr.stats()
    # [0,1800) 4, [1800,2400) 5, [2400,3600) 4, [3600,4200) 3, [4200,5400) 2.
    # train-1 ends at 3600 exactly when team-b-3 and train-3 start: half-open, so no 7 there.
    assert s.peak_gpus == 5
    assert s.p50_gpus == 4
    assert s.gpu_hours == pytest.approx((4 * 3600 + 2 * 1800 + 600 + 600) / 3600)


def test_generic_csv_tenant_default_and_epoch(tmp_path: Path) -> None:
    tr = load_trace(FIXTURES / "generic-small.csv", tenant="ops")
    assert "ops-eval-1" in {j.id for j in tr.jobs}
    p = write(tmp_path, "g.csv", "submit_time,duration_s,gpus\n3600,60,1\n")
    (job,) = load_trace(p, epoch=datetime(2024, 1, 1, tzinfo=UTC)).jobs
    assert job.submitted_at == datetime(2024, 1, 1, 1, tzinfo=UTC)
    assert job.id == "default-2" and job.tenant == "default"


def test_generic_csv_bad_optional_values(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "g.csv",
        "submit_time,duration_s,gpus,fault_tolerant,checkpoint_interval_s\n"
        "2024-01-01T00:00:00Z,60,1,maybe,\n"
        "2024-01-01T00:00:00Z,60,1,true,0\n"
        "2024-01-01T25:00:00Z,60,1,,\n"
        "2024-01-01T00:00:00Z,60,1,,\n",
    )
    tr = load_trace(p)
    assert len(tr.jobs) == 1
    assert tr.bad_rows == (
        BadRow(2, "fault_tolerant: not true/false 'maybe'"),
        BadRow(3, "checkpoint_interval_s: must be > 0, got 0"),
        BadRow(4, "submit_time: not a time '2024-01-01T25:00:00Z'"),
    )


# ---------------------------------------------------------------- detection and errors


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("philly-small.csv", "philly"),
        ("itp-small.csv", "itp"),
        ("alibaba-small.csv", "alibaba"),
        ("generic-small.csv", "csv"),
    ],
)
def test_auto_detection(name: str, fmt: str) -> None:
    assert load_trace(FIXTURES / name).format == fmt
    assert load_trace(FIXTURES / name, format=fmt).format == fmt
    with (FIXTURES / name).open() as f:
        assert detect_format(next(csv.reader(f))) == fmt


def test_header_names_are_case_and_space_insensitive(tmp_path: Path) -> None:
    p = write(tmp_path, "g.csv", "\ufeff Submit_Time , DURATION_S ,Gpus\n2024-01-01,60,1\n")
    assert load_trace(p).format == "csv"


def test_unknown_header(tmp_path: Path) -> None:
    p = write(tmp_path, "weird.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(TraceError, match=r"^.*weird\.csv: unknown header \(a,b,c\); expected one of: ") as e:
        load_trace(p)
    assert "\n" not in str(e.value)


def test_explicit_format_that_does_not_match(tmp_path: Path) -> None:
    with pytest.raises(
        TraceError,
        match=r"header does not match format 'itp': missing column\(s\) submission_time, duration, num_gpu",
    ):
        load_trace(FIXTURES / "generic-small.csv", format="itp")
    with pytest.raises(ValueError, match="unknown trace format 'nope'"):
        load_trace(FIXTURES / "generic-small.csv", format="nope")


def test_philly_without_cluster_needs_a_tenant(tmp_path: Path) -> None:
    p = write(tmp_path, "p.csv", "timestamp,duration,num_gpus\n2017-10-01 00:00:00,60,1\n")
    with pytest.raises(TraceError, match="missing column"):
        load_trace(p, format="philly")
    assert load_trace(p, format="philly", tenant="vc").tenants == ("vc",)


def test_missing_tenant_column(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no tenant column 'owner'"):
        load_trace(FIXTURES / "philly-small.csv", tenant_column="owner")


def test_no_usable_rows_message(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "trace.csv",
        "submit_time,duration_s,gpus\n2024-01-01,abc,1\n2024-01-01,60,0\n2024-01-01,,1\n",
    )
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(e.value) == (
        f"{p}: no usable rows (3 bad rows; first: line 2: duration_s: not a number 'abc')"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("submit_time,duration_s,gpus\n", r"no usable rows \(no data rows\)"),
        ("\n1,2\n", "blank"),
    ],
)
def test_empty_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        load_trace(write(tmp_path, "e.csv", text))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.csv: file not found"):
        load_trace(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path)


def test_trace_error_is_a_value_error() -> None:
    assert issubclass(TraceError, ValueError)


# ---------------------------------------------------------------- window and stats


def test_window() -> None:
    tr = load_trace(FIXTURES / "itp-small.csv")
    assert tr.window() == tr
    first_day = tr.window(days=1)
    assert [j.id for j in first_day.jobs] == ["itp-small-c"]
    later = tr.window(datetime(2021, 3, 5, tzinfo=UTC), days=0.5)
    assert [j.id for j in later.jobs] == ["itp-small-a", "itp-small-b"]
    # start is inclusive, end exclusive; a naive start is UTC
    assert [j.id for j in tr.window(datetime(2021, 3, 5, 0, 30), days=1).jobs] == ["itp-small-b"]
    assert tr.window(datetime(2021, 3, 4), days=1 / 24 / 6 * 0.5).jobs[0].id == "itp-small-c"
    empty = tr.window(datetime(2030, 1, 1, tzinfo=UTC))
    assert empty.jobs == () and empty.tenants == ()
    assert empty.stats().jobs == 0 and empty.stats().peak_gpus == 0
    with pytest.raises(ValueError):
        tr.window(days=0)


def test_stats_of_an_empty_trace() -> None:
    s = Trace(path=Path("x"), format="csv", jobs=()).stats()
    assert (s.jobs, s.gpu_hours, s.peak_gpus, s.p50_gpus, s.start, s.end) == (0, 0.0, 0.0, 0.0, None, None)


def test_stats_is_fast_on_80k_jobs(tmp_path: Path) -> None:
    lines = ["submit_time,duration_s,gpus"] + [
        f"{i * 37},{600 + (i * 7919) % 86400},{1 + i % 8}" for i in range(80_000)
    ]
    tr = load_trace(write(tmp_path, "big.csv", "\n".join(lines) + "\n"))
    s = tr.stats()
    assert s.jobs == 80_000 and s.peak_gpus > 0


# ---------------------------------------------------------------- real traces


def real(name: str) -> Path:
    p = data_dir() / "traces" / name
    if not p.is_file():
        pytest.skip(f"{p} not present")
    return p


@pytest.fixture(scope="module")
def philly() -> Trace:
    return load_trace(real("philly.csv"))


def test_real_philly(philly: Trace) -> None:
    tr = philly
    assert tr.format == "philly"
    assert len(tr.jobs) == 82_247
    assert len(tr.tenants) == 15
    assert tr.bad_rows == ()
    s = tr.stats()
    assert s.start == datetime(2017, 9, 4, 10, 30, 41, tzinfo=UTC)
    assert s.end is not None and s.end > datetime(2017, 12, 22, tzinfo=UTC)
    assert 0 < s.p50_gpus < s.peak_gpus
    # the README's weekly seasonality: 10k-17k jobs on each weekday, about 7k on each weekend day
    per_weekday = Counter(j.submitted_at.weekday() for j in tr.jobs)
    assert all(10_000 <= per_weekday[d] <= 17_000 for d in range(5))
    assert all(6_500 <= per_weekday[d] <= 7_500 for d in (5, 6))
    # consecutive windows partition the trace
    start = tr.jobs[0].submitted_at
    weeks = [tr.window(start + timedelta(days=7 * k), days=7) for k in range(16)]
    assert sum(len(w.jobs) for w in weeks) == len(tr.jobs)
    assert all(
        start + timedelta(days=7 * k) <= j.submitted_at < start + timedelta(days=7 * (k + 1))
        for k, w in enumerate(weeks)
        for j in w.jobs
    )


ITP = [f"itp-cluster0{i}.csv" for i in range(1, 6)]


def test_real_itp_totals_are_a_share_of_the_dataset() -> None:
    total = 0.0
    for name in ITP:
        path = real(name)
        tr = load_trace(path)
        assert tr.format == "itp" and tr.bad_rows == ()
        assert tr.tenants == (path.stem,)
        hours = tr.stats().gpu_hours
        # independent check: sum duration x GPUs straight from the file
        with path.open() as f:
            direct = sum(float(r["duration"]) * int(r["num_gpu"]) for r in csv.DictReader(f)) / 3600
        assert hours == pytest.approx(direct)
        assert hours > 0
        total += hours
    assert total < ITP_DATASET_GPU_HOURS


def test_real_itp_cluster04() -> None:
    tr = load_trace(real("itp-cluster04.csv"))
    assert 15_700 <= len(tr.jobs) <= 15_900
    s = tr.stats()
    assert s.start is not None and s.end is not None
    assert datetime(2021, 3, 4, tzinfo=UTC) <= s.start and s.end <= datetime(2021, 5, 4, tzinfo=UTC)
