"""Ambiguous faults as real stores produce them: a write
the store applied and still answered 500/503, or answered after the client
gave up; and a listing that has not caught up with the newest writes while
a GET finds them. Each seen through a real boto3 client against moto behind
the proxy, then through a real engine run per nemesis."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from checkers.facts import table_facts
from harness.core.errors import HarnessError
from harness.run.storage import EmbeddedS3, open_storage
from harness.s3proxy.s3 import filter_young
from tests.conftest import assert_only_known_findings, load_results, only_run_dir, run_cli
from tests.known import (
    Known,
    RunView,
    assert_only_known,
    commit_put_answers,
    faults_applied,
    same_files_added,
    versions_of,
)

LOG = "t/_delta_log/"
C0, C1, C2 = (f"{LOG}{v:020d}.json" for v in range(3))
DATA = "t/part-00000-0b1c.c000.snappy.parquet"
DROPPED = (ConnectionClosedError, EndpointConnectionError, ReadTimeoutError)


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[EmbeddedS3]:
    """moto_server with the proxy in front (its own ports per test)."""
    storage = open_storage("s3", tmp_path, proxy=True)
    assert isinstance(storage, EmbeddedS3)
    try:
        yield storage
    finally:
        storage.stop()


def ctl(s3: EmbeddedS3) -> Any:
    assert s3.proxy is not None
    return s3.proxy


def client(s3: EmbeddedS3, key: str, read_timeout: float = 10) -> Any:
    """A boto3 client through the proxy, signing as `key`. No retries at all
    (total_max_attempts counts the first attempt; max_attempts would not):
    a retried PUT would hide the first answer behind the second."""
    assert s3._proxy_proc is not None
    return boto3.client(
        "s3",
        endpoint_url=s3._proxy_proc.endpoint,
        aws_access_key_id=key,
        aws_secret_access_key="x",
        region_name="us-east-1",
        config=Config(connect_timeout=3, read_timeout=read_timeout, retries={"total_max_attempts": 1}),
    )


def body(s3: EmbeddedS3, key: str) -> bytes | None:
    """Asked of moto directly, past the proxy."""
    try:
        return s3.boto3_client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    except ClientError as e:
        assert e.response["Error"]["Code"] in ("404", "NoSuchKey")
        return None


def put(c: Any, s3: EmbeddedS3, key: str, data: bytes = b"{}") -> str:
    """'ok' or the error code the client saw."""
    try:
        c.put_object(Bucket=s3.bucket, Key=key, Body=data, IfNoneMatch="*")
        return "ok"
    except ClientError as e:
        return str(e.response["Error"]["Code"])


def listed(c: Any, s3: EmbeddedS3, prefix: str = LOG) -> list[str]:
    resp = c.list_objects_v2(Bucket=s3.bucket, Prefix=prefix)
    keys = [o["Key"] for o in resp.get("Contents", [])]
    assert resp["KeyCount"] == len(keys)
    return keys


# --- applied, then 500/503 ---------------------------------------------------------------


@pytest.mark.parametrize("status, code", [(500, "InternalError"), (503, "SlowDown")])
def test_applied_error_answers_5xx_for_a_put_that_took_effect(s3: EmbeddedS3, status: int, code: str) -> None:
    a = client(s3, "dj-n1-1")
    ctl(s3).add_fault("applied-error", {"path_class": "commit"}, status=status)
    with pytest.raises(ClientError) as e:
        a.put_object(Bucket=s3.bucket, Key=C1, Body=b'{"commitInfo":{}}', IfNoneMatch="*")
    assert e.value.response["Error"]["Code"] == code
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert a.get_object(Bucket=s3.bucket, Key=C1)["Body"].read() == b'{"commitInfo":{}}'  # yet it is there
    # The writer that retries its own commit now loses to itself.
    ctl(s3).heal()
    assert put(a, s3, C1) == "PreconditionFailed"
    assert ctl(s3).stats()["faults"] == {"applied-error": 1}


def test_applied_error_spares_requests_the_store_refused_and_counts_only_applied_ones(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1")
    assert put(a, s3, C0) == "ok"
    ctl(s3).add_fault("applied-error", {"path_class": "commit"}, status=503, count=2)
    # A PUT the store refused (412) keeps its answer: it did not apply, so
    # it is no ambiguous write, and it does not use up the count.
    assert put(a, s3, C0) == "PreconditionFailed"
    assert [put(a, s3, f"{LOG}{v:020d}.json") for v in (1, 2, 3, 4)] == ["SlowDown", "SlowDown", "ok", "ok"]
    assert all(body(s3, f"{LOG}{v:020d}.json") == b"{}" for v in (1, 2, 3, 4))
    assert put(a, s3, DATA) == "ok"  # a data PUT is not a commit
    assert ctl(s3).faults()[0]["applied"] == 2


def test_applied_error_at_a_rate_and_for_one_client_only(s3: EmbeddedS3) -> None:
    a, b = client(s3, "dj-n1-1"), client(s3, "dj-n2-2")
    ctl(s3).add_fault("applied-error", {"client": "1"}, status=500, rate=0.5)
    outcomes = [put(a, s3, f"t/a{i}") for i in range(40)]
    errors = outcomes.count("InternalError")
    assert 8 <= errors <= 32 and errors + outcomes.count("ok") == 40, outcomes
    assert all(body(s3, f"t/a{i}") == b"{}" for i in range(40))  # every one applied
    assert [put(b, s3, f"t/b{i}") for i in range(5)] == ["ok"] * 5
    assert ctl(s3).stats()["faults"]["applied-error"] == errors


def test_applied_error_by_node(s3: EmbeddedS3) -> None:
    ctl(s3).add_fault("applied-error", {"node": "n2"}, status=503)
    assert put(client(s3, "dj-n2-7"), s3, "t/x") == "SlowDown"
    assert put(client(s3, "dj-n2"), s3, "t/y") == "SlowDown"  # a Sail server's identity
    assert put(client(s3, "dj-n1-7"), s3, "t/z") == "ok"
    assert body(s3, "t/x") == body(s3, "t/y") == b"{}"


# --- applied, then answered late ---------------------------------------------------------


def test_applied_late_times_the_client_out_after_the_write_applied(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1", read_timeout=1)
    ctl(s3).add_fault("applied-late", {"path_class": "commit"}, ms=4000)
    t = time.monotonic()
    with pytest.raises(ReadTimeoutError):
        a.put_object(Bucket=s3.bucket, Key=C0, Body=b"A", IfNoneMatch="*")
    assert 0.9 <= time.monotonic() - t < 3
    assert body(s3, C0) == b"A"  # applied before the answer was held
    ctl(s3).heal()


def test_applied_late_answer_arrives_after_ms_then_is_sent_or_reset(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1", read_timeout=10)
    rule = ctl(s3).add_fault("applied-late", {}, ms=600, count=1)
    t = time.monotonic()
    assert put(a, s3, "t/late") == "ok"  # the client waited long enough
    assert time.monotonic() - t >= 0.6
    t = time.monotonic()
    assert put(a, s3, "t/on-time") == "ok"  # count 1: only the first
    assert time.monotonic() - t < 0.5
    ctl(s3).remove_fault(rule)
    ctl(s3).add_fault("applied-late", {}, ms=300, then="reset")
    with pytest.raises(DROPPED):
        a.put_object(Bucket=s3.bucket, Key="t/reset", Body=b"R")
    assert body(s3, "t/reset") == b"R"


def test_heal_ends_a_late_answer_at_once(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1", read_timeout=30)
    ctl(s3).add_fault("applied-late", {}, ms=60_000)
    out: dict[str, Any] = {}

    def run() -> None:
        t = time.monotonic()
        out["result"] = put(a, s3, "t/held")
        out["took"] = time.monotonic() - t

    th = threading.Thread(target=run, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while body(s3, "t/held") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert "result" not in out  # applied, answer held
    ctl(s3).heal()
    th.join(10)
    assert out["result"] == "ok" and out["took"] < 10, out


# --- stale listings --------------------------------------------------------------------


def test_filter_young_drops_only_keys_written_after_the_cutoff() -> None:
    def entry(k: str) -> str:
        return f"<Contents><Key>{k}</Key><Size>1</Size></Contents>"

    xml = f"<ListBucketResult><KeyCount>3</KeyCount>{entry(C0)}{entry(C1)}{entry(C2)}</ListBucketResult>".encode()
    put_at = {("b", C1): 10.0, ("b", C2): 20.0, ("other", C0): 30.0}
    out, dropped = filter_young(xml, "b", put_at, cutoff=15.0)
    assert dropped == 1 and b"<KeyCount>2</KeyCount>" in out
    assert C0.encode() in out and C1.encode() in out and C2.encode() not in out
    assert filter_young(xml, "b", put_at, cutoff=25.0) == (xml, 0)


def test_stale_list_hides_a_fresh_key_that_get_finds_until_ms_passed(s3: EmbeddedS3) -> None:
    s3.boto3_client().put_object(Bucket=s3.bucket, Key=C0, Body=b"{}")  # past the proxy: an old key
    a, b = client(s3, "dj-n1-1"), client(s3, "dj-n1-2")
    ctl(s3).add_fault("stale-list", {"client": "1"}, ms=1500)
    t = time.monotonic()
    assert put(a, s3, C1) == "ok"
    assert listed(a, s3) == [C0]  # the new commit is not listed...
    assert a.get_object(Bucket=s3.bucket, Key=C1)["Body"].read() == b"{}"  # ...but is there
    assert listed(b, s3) == [C0, C1]  # a client the rule does not name sees it
    time.sleep(max(0.0, 1.6 - (time.monotonic() - t)))
    assert listed(a, s3) == [C0, C1]
    assert ctl(s3).stats()["stale_list_hidden"] == 1


def test_stale_list_count_limits_the_stale_listings(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1")
    assert put(a, s3, C0) == "ok"
    ctl(s3).add_fault("stale-list", {}, ms=30_000, count=1)
    assert listed(a, s3, "t/nothing/") == []  # nothing to hide: not counted
    assert listed(a, s3) == []
    assert listed(a, s3) == [C0]  # count 1: only the first stale listing
    assert ctl(s3).faults()[0]["applied"] == 1


def test_stale_list_at_a_rate(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1")
    assert put(a, s3, C0) == "ok"
    ctl(s3).add_fault("stale-list", {}, ms=30_000, rate=0.5)
    seen = [len(listed(a, s3)) for _ in range(40)]
    assert 8 <= seen.count(0) <= 32 and seen.count(0) + seen.count(1) == 40, seen


def test_a_deleted_and_rewritten_key_is_young_again(s3: EmbeddedS3) -> None:
    a = client(s3, "dj-n1-1")
    assert put(a, s3, C0) == "ok"
    ctl(s3).add_fault("stale-list", {}, ms=800)
    time.sleep(0.9)
    assert listed(a, s3) == [C0]
    a.delete_object(Bucket=s3.bucket, Key=C0)
    assert put(a, s3, C0) == "ok"
    assert listed(a, s3) == []


def test_bad_parameters_are_refused(s3: EmbeddedS3) -> None:
    for kind, target, params, msg in [
        ("applied-error", {}, {"status": 404}, "applied-error status"),
        ("applied-late", {}, {}, "needs ms"),
        ("applied-late", {}, {"ms": -1}, "needs ms"),
        ("applied-late", {}, {"ms": 10, "then": "drop"}, "then must be"),
        ("stale-list", {}, {"ms": "5"}, "needs ms"),
        ("stale-list", {"method": "PUT"}, {"ms": 5}, "LIST requests only"),
        ("applied-error", {}, {"count": -1}, "count must be"),
    ]:
        with pytest.raises(HarnessError, match=msg):
            ctl(s3).add_fault(kind, target, **params)
    assert ctl(s3).faults() == []
    rules = [ctl(s3).add_fault(k, {}, ms=5) for k in ("applied-late", "stale-list")]
    assert [r["target"]["method"] for r in ctl(s3).faults()] == ["PUT", "LIST"] and len(rules) == 2


# --- real engine runs, one per nemesis ---------------------------------------------------


def _engine_run(results_dir: Path, engine: str, nemesis: str, *extra: str) -> tuple[Path, dict[str, Any]]:
    res = run_cli(
        "run",
        "--engine",
        engine,
        "--workload",
        "append",
        "--nemesis",
        nemesis,
        "--time-limit",
        "10",
        "--concurrency",
        "4",
        "--storage",
        "s3",
        "--seed",
        "11",
        "--nemesis-interval",
        "2.5",
        *extra,
        "--results-dir",
        str(results_dir),
        "--no-progress",
        timeout=240,
    )
    assert res.returncode in (0, 1), res.stdout + res.stderr
    run_dir = only_run_dir(results_dir)
    return run_dir, load_results(run_dir)


def _nemesis_events(run_dir: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return [e for e in events if e["process"] == "nemesis"]


def _faults_applied(run_dir: Path) -> dict[str, int]:
    return json.loads((run_dir / "logs" / "s3proxy-stats.json").read_text())["faults"]


def _assert_nemesis_ran(run_dir: Path, doc: dict[str, Any], nemesis: str, kind: str) -> None:
    events = _nemesis_events(run_dir)
    started = [e for e in events if e["f"] == f"start-{nemesis}" and e["type"] == "ok"]
    assert started and all(e["value"]["kind"] == kind for e in started), events
    assert events[-1]["f"] == "heal" and doc["history"]["nemesis"]["healed"] is True
    assert _faults_applied(run_dir).get(kind, 0) > 0, _faults_applied(run_dir)


def _retried_after_applied(moto_log: str, version: int) -> bool:
    """The commit PUT of `version` was taken by the store (200) and then came
    again and met itself (412): a retry of a PUT the client saw fail."""
    key = re.escape(f"table/_delta_log/{version:020d}.json")
    statuses = re.findall(rf'"(?:\x1b\[[\d;]*m)*PUT /\S+/{key} HTTP/1\.1(?:\x1b\[0m)?" (\d+)', moto_log)
    # One PUT applied, the others refused. moto logs a request once it has
    # answered, so a 412 answered in the same instant may be logged before the
    # 200 it met (seen once in CI): the order of the lines proves nothing.
    return statuses.count("200") == 1 and "412" in statuses


def _applied_5xx_again(view: RunView, a: dict[str, Any]) -> str | None:
    """None when moto's request log and the table's log show the anomaly is
    a commit PUT that applied, was answered 5xx and was sent again: the
    retry met its own commit (412) and the append was committed later,
    adding the very file the first commit added (so the table holds its
    rows once, spec C4)."""
    moto = view.text("logs/moto.log")
    versions = versions_of(a)
    if not a.get("ops") or not versions:
        return "it names no op or no version"
    op = a["ops"][0]
    done = view.completions.get(op)
    if done is None or done["f"] != "append":
        return f"op {op} is no completed append"
    if a["kind"] == "duplicate-commit":
        if len(versions) < 2:
            return f"one version only ({versions})"
        if not _retried_after_applied(moto, min(versions)):
            return f"the commit PUT of version {min(versions)} was not applied and then retried"
        return same_files_added(view, [min(versions), max(versions)])
    if a["kind"] == "wrong-commit-version":
        told, found = versions[0], versions[-1]
        if not _retried_after_applied(moto, found):
            return f"the commit PUT of version {found} was not applied and then retried"
        return same_files_added(view, [found, told])
    # failed-but-committed: its commit applied, was answered 5xx, and the op
    # gave up later.
    if done["type"] != "fail":
        return f"op {op} did not fail"
    if not _retried_after_applied(moto, min(versions)):
        return f"the commit PUT of version {min(versions)} was not applied and then retried"
    return None


def _applied_5xx_known(engine: str, always: bool) -> Known:
    return Known(
        f"{engine}:C7:applied-5xx-commits-again",
        "C7",
        f"{engine}: a commit PUT applied but answered 5xx is retried, the 412 taken for a conflict, and the "
        "append committed again",
        frozenset({"duplicate-commit", "wrong-commit-version", "failed-but-committed"}),
        _applied_5xx_again,
        always=always,
    )


def _stale_list_windows(view: RunView) -> list[tuple[int, int]]:
    """When the stale-list fault was on (history times): each start's invoke
    to the next stop's (or heal's) completion."""
    windows, opened = [], None
    for e in view.events:
        if e["process"] != "nemesis":
            continue
        if e["f"] == "start-stale-list" and e["type"] == "invoke" and opened is None:
            opened = e["time"]
        elif e["f"] in ("stop-stale-list", "heal") and e["type"] != "invoke" and opened is not None:
            windows.append((opened, e["time"]))
            opened = None
    if opened is not None:
        windows.append((opened, max(e["time"] for e in view.events)))
    return windows


def _during_stale_list(view: RunView, op: str) -> str | None:
    inv, done = view.invokes.get(op), view.completions.get(op)
    if inv is None or done is None:
        return f"op {op} is not in the history"
    if not faults_applied(view, "stale-list"):
        return "the proxy served no stale listing"
    if not any(s < done["time"] and inv["time"] < e for s, e in _stale_list_windows(view)):
        return f"op {op} ran while no stale listing was on"
    return None


def _stale_read(view: RunView, a: dict[str, Any]) -> str | None:
    if "stale-list" not in str((a.get("details") or {}).get("outside_contract", "")):
        return "not labelled outside contract for the stale-list fault"
    if not a.get("ops"):
        return "it names no read"
    return _during_stale_list(view, a["ops"][0])


STALE_LIST_STALE_READ = Known(
    "store:C12:stale-list-stale-read",
    "C12",
    "outside contract: a listing that misses new commits (the stale-list fault) makes a read see an older "
    "version; Delta requires consistent listing",
    frozenset({"stale-read"}),
    _stale_read,
)

# delta-rs loads the version it just committed by listing the log; a listing
# that lags behind its own commit makes it report the committed op failed.
OWN_COMMIT_UNLISTED = re.compile(
    r"Requested snapshot version (\d+) is not available|LogSegment end version \d+ not the same as the specified "
    r"end version (\d+)"
)


def _delta_rs_own_commit_unlisted(view: RunView, a: dict[str, Any]) -> str | None:
    (op,) = a["ops"]
    done = view.completions.get(op) or {}
    m = OWN_COMMIT_UNLISTED.search(str((done.get("error") or {}).get("raw", "")))
    # The version it could not load is the one its rows are at: its own commit.
    if not m or int(m.group(1) or m.group(2)) not in versions_of(a):
        return f"op {op}'s error does not name its own commit's version as unlisted"
    return _during_stale_list(view, op)


def _sail_own_commit_failed(view: RunView, a: dict[str, Any]) -> str | None:
    """Sail's error names no version: its commit PUT was answered 200 by
    the store, and the op failed while stale listings were served."""
    (op,) = a["ops"]
    if (view.completions.get(op) or {}).get("type") != "fail":
        return f"op {op} did not fail"
    answers = commit_put_answers(view)
    if not versions_of(a) or not all("200" in answers.get(v, []) for v in versions_of(a)):
        return f"the store did not answer 200 to the commit PUT of each of {versions_of(a)}"
    return _during_stale_list(view, op)


DELTA_RS_STALE_LIST_OWN_COMMIT = Known(
    "delta-rs:C6:stale-list-own-commit-failed",
    "C6",
    "outside contract (a stale listing; Delta requires consistent listing): delta-rs reports an append failed "
    "whose commit PUT succeeded, when the listing that follows does not show its own commit",
    frozenset({"failed-but-committed"}),
    _delta_rs_own_commit_unlisted,
)
SAIL_STALE_LIST_OWN_COMMIT = Known(
    "sail:C6:stale-list-own-commit-failed",
    "C6",
    "outside contract (a stale listing; Delta requires consistent listing): sail reports an append failed whose "
    "commit PUT succeeded",
    frozenset({"failed-but-committed"}),
    _sail_own_commit_failed,
    always=False,
)


@pytest.mark.integration
def test_delta_rs_retries_an_applied_5xx_commit_and_commits_it_twice(results_dir: Path) -> None:
    """Measured (delta-rs 1.6, seed 11): 79 ok / 0 fail / 0 info, invalid.
    object_store retries a commit PUT answered 5xx; the retry meets the
    commit the first attempt made and gets 412; delta-rs takes that for a
    concurrent writer's commit of the version, rebases its blind append and
    commits it again one or more versions later, adding the same data file.
    The op is acknowledged with the last version, not the one that made its
    rows visible (C7), and one change is two commits in the log (the table
    holds the file once, so no row is doubled). In 1 run of 6 an op also
    failed after its commit had applied (C6)."""
    run_dir, doc = _engine_run(results_dir, "delta-rs", "ambiguous-5xx")
    _assert_nemesis_ran(run_dir, doc, "ambiguous-5xx", "applied-error")
    assert_only_known(doc, run_dir, [_applied_5xx_known("delta-rs", always=True)])


@pytest.mark.integration
def test_delta_rs_commits_answered_past_its_timeout_resolve_as_committed(results_dir: Path) -> None:
    """Measured (seed 11, --op-timeout 5): 70 ok / 0 fail / 4 info, valid;
    the 4 info ops (2 timeouts, 2 resets at the heal) all resolved as
    committed, which they were: the proxy holds only answers to applied
    PUTs. On a loaded machine an op the fault never touched can also run
    past the timeout before its commit (seen in CI: 5 info, 1 of them not
    committed); that op is a timeout, and the checker rightly finds no
    commit of it."""
    run_dir, doc = _engine_run(results_dir, "delta-rs", "ambiguous-late", "--op-timeout", "5")
    _assert_nemesis_ran(run_dir, doc, "ambiguous-late", "applied-late")
    assert_only_known_findings(doc, run_dir, "delta-rs")
    atomicity = next(c for c in doc["checkers"] if c["checker"] == "atomicity")
    resolution = atomicity["stats"]["info_resolution"]
    held = _faults_applied(run_dir)["applied-late"]
    # Each held answer was to an applied commit PUT: its op is info and committed.
    assert resolution["committed"] >= held and resolution["may_have_committed"] == 0, (held, resolution)
    view = RunView(run_dir, doc)
    facts = table_facts(view.log)
    committed = set(facts.commit_ops.values()) | set(facts.writer_rows)
    # The appends (a read that timed out has nothing to resolve).
    info = [e for e in view.completions.values() if e["type"] == "info" and e["f"] == "append"]
    uncommitted = [e for e in info if e["id"] not in committed]
    # Only an op the harness gave up on before it committed may be neither.
    assert len(uncommitted) == resolution["not_committed"], (uncommitted, resolution)
    assert all((e["error"] or {}).get("class") == "timeout" for e in uncommitted), uncommitted


@pytest.mark.integration
def test_delta_rs_on_a_stale_listing_reads_stale_and_fails_its_own_commits(results_dir: Path) -> None:
    """The Delta protocol asks the store for consistent listing (a file
    written is in every later listing of its directory); a stale listing
    breaks that, so stale reads (C12) are the store's doing, and expected.
    Measured (delta-rs 1.6, seed 11): 65 ok / 167 fail / 0 info, invalid:
    10 stale reads; 4 appends failed although committed (C6), each with the
    error that delta-rs could not list the version it had just committed;
    142 appends and 25 reads failed on "the newest version in the log is
    older than the existing snapshot version" or "Invalid table version"."""
    run_dir, doc = _engine_run(results_dir, "delta-rs", "stale-list")
    _assert_nemesis_ran(run_dir, doc, "stale-list", "stale-list")
    # Both seen in each of 3 runs of this command on an idle machine (4, 3
    # and 2 failed ops); a CI run on a loaded one had the failed commits but
    # no stale read, which needs a read inside a stale window: not pinned as
    # always (the store's doing, not the engine's, either way).
    stale = dataclasses.replace(STALE_LIST_STALE_READ, always=False)
    assert_only_known(doc, run_dir, [DELTA_RS_STALE_LIST_OWN_COMMIT, stale])


@pytest.mark.integration
@pytest.mark.parametrize("nemesis", ["ambiguous-5xx", "ambiguous-late", "stale-list"])
def test_sail_under_each_store_fault_shows_only_what_the_fault_explains(nemesis: str, results_dir: Path) -> None:
    """Sail (a Spark Connect server, its own object_store client) under each
    new store fault. Measured (pysail 0.7.2, seed 11, 10 s): ambiguous-5xx
    invalid, the retried commit PUT committed again (duplicate-commit, as
    delta-rs); ambiguous-late valid, each timed-out commit resolved from the
    log; stale-list invalid with stale reads (C12) only. Every anomaly must
    be one the fault explains, with its evidence."""
    extra = ("--op-timeout", "10") if nemesis == "ambiguous-late" else ()
    run_dir, doc = _engine_run(results_dir, "sail", nemesis, *extra)
    kind = {"ambiguous-5xx": "applied-error", "ambiguous-late": "applied-late", "stale-list": "stale-list"}[nemesis]
    _assert_nemesis_ran(run_dir, doc, nemesis, kind)
    if nemesis == "ambiguous-late":
        assert_only_known_findings(doc, run_dir, "sail")
        resolution = next(c for c in doc["checkers"] if c["checker"] == "atomicity")["stats"]["info_resolution"]
        assert resolution["not_committed"] == 0, resolution
        return
    if nemesis == "stale-list":
        # Stale reads in each of 3 runs here (1, 2 and 2), but few: not pinned
        # as always.
        stale = dataclasses.replace(STALE_LIST_STALE_READ, always=False)
        assert_only_known(doc, run_dir, [stale, SAIL_STALE_LIST_OWN_COMMIT])
        return
    # The retries meet their own commit in most runs, not all.
    assert_only_known(doc, run_dir, [_applied_5xx_known("sail", always=False)])
