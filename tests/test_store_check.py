"""The store is checked before an engine is blamed: racing
conditional PUTs, If-None-Match on overwrite, read-after-write and
list-after-put, as a probe, as `delta-jepsen store-check`, and as the
self-check before every S3 run, whose failure turns the anomalies such a
store explains into the store's (unknown for the engine, not invalid)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.kinds import KINDS
from harness.check.pipeline import STORE_EXPLAINS, _not_relying_on_put_if_absent, _store_failures_explain
from harness.cli.main import main
from harness.run.storage import EMBEDDED_SECRET, EmbeddedS3, SeaweedS3
from harness.run.store_probe import (
    LIST_AFTER_PUT,
    OVERWRITE,
    PUT_IF_ABSENT,
    READ_AFTER_WRITE,
    SCRATCH,
    StoreTarget,
    check_store,
)
from harness.s3proxy.client import ProxyProcess, start_proxy
from tests.conftest import load_results, only_run_dir, run_cli

SECRET = "dj-test-secret-never-printed"
CREDS = {"AWS_ACCESS_KEY_ID": "dj-test", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}


@dataclass
class Stores:
    moto: EmbeddedS3
    # The proxy in front of moto with If-None-Match stripped from every PUT:
    # a store without put-if-absent, for as long as the module runs.
    unsafe: ProxyProcess

    def target(self, endpoint: str) -> StoreTarget:
        return StoreTarget(endpoint, self.moto.bucket, access_key="dj-test", secret_key=SECRET)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    logs = tmp_path_factory.mktemp("store")
    moto = EmbeddedS3(logs / "moto.log")
    try:
        proxy = start_proxy(moto.endpoint, logs / "s3proxy.log")
        try:
            proxy.control.add_fault("strip-if-none-match", {"method": "PUT"})
            yield Stores(moto, proxy)
        finally:
            proxy.stop()
    finally:
        moto.stop()


def _scratch_left(stores: Stores) -> list[str]:
    page = stores.moto.boto3_client().list_objects_v2(Bucket=stores.moto.bucket, Prefix=SCRATCH)
    return [o["Key"] for o in page.get("Contents", [])]


# -- the probe ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["s3", "seaweedfs"])
def test_each_embedded_store_passes(kind: str, stores: Stores, tmp_path: Path) -> None:
    """The stores the harness starts itself qualify for Delta; SeaweedFS
    makes a losing racer wait on its lock (about a second per racer ahead of
    it), so it gets fewer racers and the budget."""
    store = stores.moto if kind == "s3" else SeaweedS3(tmp_path)
    try:
        secret = store.reader_options()["aws_secret_access_key"]
        res = check_store(StoreTarget.from_storage(store), rounds=2, concurrency=(3,), tries=2, budget=2.0)
    finally:
        if store is not stores.moto:
            store.stop()
    assert res.passed is True, res.summary()
    racing = res.properties[0].counts
    assert racing["one_winner"] == racing["rounds"] >= 1 and racing["refused"] == 2 * racing["rounds"]
    assert res.cleanup.startswith("deleted ")
    assert secret not in json.dumps(res.to_json())


def test_probe_passes_on_moto_and_leaves_nothing(stores: Stores) -> None:
    res = check_store(stores.target(stores.moto.endpoint), rounds=5, concurrency=(2, 8))
    assert res.passed is True, res.summary()
    assert [p.name for p in res.properties] == [
        f"{PUT_IF_ABSENT}@2",
        f"{PUT_IF_ABSENT}@8",
        OVERWRITE,
        READ_AFTER_WRITE,
        LIST_AFTER_PUT,
    ]
    eight = res.properties[1].counts
    assert (eight["one_winner"], eight["won"], eight["refused"]) == (5, 5, 35)
    assert res.cleanup.startswith("deleted ") and _scratch_left(stores) == []
    doc = json.dumps(res.to_json())
    assert SECRET not in doc and "dj-test" not in doc
    assert res.summary().startswith(f"passed ({PUT_IF_ABSENT}@2 5/5 rounds one winner")


def test_probe_fails_put_if_absent_on_a_store_without_it(stores: Stores) -> None:
    res = check_store(stores.target(stores.unsafe.endpoint), rounds=3, concurrency=(2,))
    by = {p.name.split("@")[0]: p for p in res.properties}
    assert res.passed is False
    assert by[PUT_IF_ABSENT].passed is False and by[PUT_IF_ABSENT].counts["several_winners"] == 3
    assert "the store let 2 racing conditional PUTs both succeed in round 1" in by[PUT_IF_ABSENT].failure
    assert by[OVERWRITE].passed is False and by[OVERWRITE].counts["overwritten"] == 3
    # What the proxy leaves alone still holds.
    assert by[READ_AFTER_WRITE].passed is True and by[LIST_AFTER_PUT].passed is True
    # One concurrency level: the property keeps its plain name.
    assert set(res.to_json()["failures"]) == {PUT_IF_ABSENT, OVERWRITE}
    assert res.summary().startswith("FAILED: ") and _scratch_left(stores) == []


def test_a_budget_bounds_the_racing_rounds(stores: Stores) -> None:
    res = check_store(stores.target(stores.moto.endpoint), rounds=10_000, concurrency=(2,), tries=1, budget=0.3)
    racing = res.properties[0]
    assert racing.passed is True and 1 <= racing.counts["rounds"] < 10_000
    assert f"budget was spent after {racing.counts['rounds']} of 10000 rounds" in racing.detail
    assert res.seconds < 5


# -- the command ----------------------------------------------------------------------------


def test_store_check_exits_1_on_a_store_without_put_if_absent(stores: Stores) -> None:
    args = ("store-check", "--s3-endpoint", stores.unsafe.endpoint, "--s3-bucket", stores.moto.bucket)
    p = run_cli(*args, "--rounds", "3", "--concurrency", "2,4", "--tries", "2", env=CREDS, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "FAILED" in p.stdout and "verdict: NOT fit for Delta" in p.stdout
    assert "both succeed in round 1" in p.stdout and "all succeed in round 1" in p.stdout
    assert SECRET not in p.stdout + p.stderr
    good = run_cli(
        *args[:2], stores.moto.endpoint, *args[3:], "--rounds", "3", "--concurrency", "4", "--json", env=CREDS
    )
    assert good.returncode == 0, good.stderr
    doc = json.loads(good.stdout)
    assert doc["passed"] is True and len(doc["properties"]) == 4 and good.stderr == ""


@pytest.mark.parametrize("embedded", ["moto", "seaweedfs"])
def test_store_check_embedded_self_test(embedded: str) -> None:
    args = ("--embedded", embedded, "--rounds", "2", "--concurrency", "2", "--tries", "1")
    p = run_cli("store-check", *args, timeout=90)
    assert p.returncode == 0, p.stderr
    assert f"store: embedded {embedded}" in p.stdout and "verdict: fit for Delta" in p.stdout
    assert EMBEDDED_SECRET not in p.stdout + p.stderr


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--s3-endpoint", "http://127.0.0.1:9", "--s3-bucket", "b"], {"AWS_ACCESS_KEY_ID": ""}, "AWS_ACCESS_KEY_ID"),
        (["--s3-endpoint", "127.0.0.1:9000", "--s3-bucket", "b"], CREDS, "http:// or https://"),
        (["--s3-endpoint", "http://127.0.0.1:9"], {**CREDS, "DJ_S3_BUCKET": ""}, "--s3-bucket"),
        (["--s3-endpoint", "http://127.0.0.1:9", "--s3-bucket", "b"], CREDS, "cannot reach the S3 endpoint"),
        (["--embedded", "--concurrency", "1"], {}, "2..256 racers"),
        (["--embedded", "--rounds", "0"], {}, "must be > 0"),
    ],
)
def test_store_check_bad_input_is_one_line(
    args: list[str], env: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # In process (main() is what the console script runs): argument and
    # environment checks need no interpreter of their own.
    for k, v in {"AWS_ENDPOINT_URL": "", **env}.items():
        monkeypatch.setenv(k, v)
    code: int | str | None
    try:
        code = main(["store-check", *args])
    except SystemExit as e:  # argparse's own checks exit from the parser
        code = e.code
    assert code == 2
    out, err = capsys.readouterr()
    assert err.strip().count("\n") == 0 and says in err and out == "", err
    assert SECRET not in err


def test_store_check_names_a_missing_bucket(
    stores: Stores, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    assert main(["store-check", "--s3-endpoint", stores.moto.endpoint, "--s3-bucket", "no-such"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"delta-jepsen: error: no bucket 'no-such' at {stores.moto.endpoint}", err


# -- what check does with a failed self-check -----------------------------------------------


def test_every_kind_a_store_explains_is_a_known_kind() -> None:
    assert {k for kinds in STORE_EXPLAINS.values() for k in kinds} <= set(KINDS)


def _results() -> list[CheckResult]:
    lost = Anomaly("lost-write", "C7", "op 1.1 was acknowledged but is in no commit")
    return [
        CheckResult("durability", Verdict.INVALID, "1 lost", [lost]),
        CheckResult(
            "duplicates",
            Verdict.INVALID,
            "2 anomalies",
            [Anomaly("duplicate-row", None, "row 7 twice"), Anomaly("lost-write", "C7", "op 2.1 lost")],
        ),
        CheckResult("atomicity", Verdict.VALID, "fine"),
    ]


def test_a_failed_put_if_absent_makes_lost_writes_the_stores() -> None:
    failure = "the store let 2 racing conditional PUTs both succeed in round 3 of 10 (8 racers)"
    results = _results()
    n = _store_failures_explain(results, {"passed": False, "failures": {f"{PUT_IF_ABSENT}@8": failure}})
    durability, duplicates, atomicity = results
    assert n == 2
    assert durability.verdict is Verdict.UNKNOWN and "Unknown for the engine" in durability.explanation
    assert durability.anomalies[0].explanation.startswith(
        f"The store failed its self-check ({PUT_IF_ABSENT}@8: {failure}): this lost write is the store's, "
        "not the engine's. op 1.1"
    )
    # An anomaly no such store explains keeps its checker invalid.
    assert duplicates.verdict is Verdict.INVALID and "the others are the engine's" in duplicates.explanation
    assert duplicates.anomalies[0].explanation == "row 7 twice"
    assert atomicity.verdict is Verdict.VALID


@pytest.mark.parametrize("store", [None, {"passed": True, "failures": {}}, {"passed": None, "failures": {}}])
def test_a_store_that_did_not_fail_changes_nothing(store: dict | None) -> None:
    results = _results()
    assert _store_failures_explain(results, store) == 0
    assert [r.verdict for r in results] == [Verdict.INVALID, Verdict.INVALID, Verdict.VALID]
    assert results[0].anomalies[0].explanation == "op 1.1 was acknowledged but is in no commit"


def test_an_engine_that_does_not_ask_for_put_if_absent_keeps_its_lost_writes() -> None:
    """delta-spark's default S3 LogStore checks for the commit file, then
    PUTs it plainly: a store's broken conditional PUT explains none of its losses."""
    from harness.engines.base import Engine
    from harness.engines.deltaspark import LOG_STORES

    s3 = EmbeddedS3.__new__(EmbeddedS3)  # only its kind is read
    protocols = {
        "delta-rs": Engine.commit_protocol(None, s3),  # type: ignore[arg-type]
        "delta-spark": LOG_STORES["single-driver"][2],
    }
    assert _not_relying_on_put_if_absent({"delta-rs": protocols["delta-rs"]}) == []
    assert _not_relying_on_put_if_absent(protocols) == ["delta-spark"]
    results = _results()
    failures = {PUT_IF_ABSENT: "the store let 2 racing conditional PUTs both succeed in round 1"}
    assert _store_failures_explain(results, {"passed": False, "failures": failures}, ignore=(PUT_IF_ABSENT,)) == 0
    assert results[0].verdict is Verdict.INVALID


def test_a_stale_list_explains_stale_reads_not_lost_writes() -> None:
    results = _results()
    assert _store_failures_explain(results, {"passed": False, "failures": {LIST_AFTER_PUT: "missed 1"}}) == 0
    assert results[0].verdict is Verdict.INVALID


# -- real runs ------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_run_on_a_store_without_put_if_absent_blames_the_store(stores: Stores, results_dir: Path) -> None:
    """The whole run on the unsafe store (external-s3 at the stripping proxy):
    the self-check fails up front, delta-rs's racing commits overwrite each
    other, and the lost writes are reported as the store's: exit 3, not 1."""
    p = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--workload",
        "append",
        "--storage",
        "external-s3",
        "--s3-endpoint",
        stores.unsafe.endpoint,
        "--s3-bucket",
        stores.moto.bucket,
        "--nodes",
        "1",
        "--concurrency",
        "6",
        "--time-limit",
        "6",
        "--seed",
        "7",
        "--no-progress",
        "--results-dir",
        str(results_dir),
        env=CREDS,
        timeout=180,
    )
    assert p.returncode == 3, p.stdout + p.stderr[-2000:]
    warning = [line for line in p.stderr.splitlines() if "store self-check FAILED" in line]
    assert warning and "will be reported unknown, as the store's" in warning[0], p.stderr[-2000:]
    run_dir = only_run_dir(results_dir)
    doc = load_results(run_dir)
    assert doc["store_self_check"]["passed"] is False and doc["store_self_check"]["through"] == "direct"
    assert not [c["checker"] for c in doc["checkers"] if c["verdict"] == "invalid"], p.stdout
    durability = next(c for c in doc["checkers"] if c["checker"] == "durability")
    lost = [a for a in durability["anomalies"] if a["kind"] == "lost-write"]
    assert durability["verdict"] == "unknown" and lost, p.stdout
    assert all("is the store's, not the engine's" in a["explanation"] for a in lost)
    assert "racing conditional PUTs all succeed in round 1" in lost[0]["explanation"]
    assert doc["store_self_check"]["anomalies_excused"] >= len(lost)
    assert "store self-check: FAILED: " in (run_dir / "summary.txt").read_text()
    page = (run_dir / "report.html").read_text()
    assert '<div class="sub" id="store-check" style="color:' in page and "store self-check: FAILED: " in page
    assert SECRET not in p.stdout + p.stderr + (run_dir / "run.json").read_text() + json.dumps(doc)

    # The excuse is the record's: the same folder with a store that passed is the engine's failure.
    run_json = json.loads((run_dir / "run.json").read_text())
    run_json["store_self_check"] = {"passed": True, "summary": "passed (edited)", "failures": {}}
    (run_dir / "run.json").write_text(json.dumps(run_json))
    recheck = run_cli("check", str(run_dir))
    assert recheck.returncode == 1, recheck.stdout
    assert "store self-check: passed (edited)" in recheck.stdout


@pytest.mark.integration
def test_a_clean_run_records_its_store_self_check(results_dir: Path) -> None:
    p = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--workload",
        "append",
        "--storage",
        "s3",
        "--s3-proxy",
        "--nodes",
        "1",
        "--concurrency",
        "2",
        "--time-limit",
        "2",
        "--no-progress",
        "--results-dir",
        str(results_dir),
        timeout=180,
    )
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    run_dir = only_run_dir(results_dir)
    check = load_results(run_dir)["store_self_check"]
    assert check["passed"] is True and check["anomalies_excused"] == 0
    # Through the proxy's bypass: the run's faults are not the store's.
    assert check["through"] == "direct (the run's fault proxy bypassed)"
    assert [p["name"] for p in check["properties"]] == [PUT_IF_ABSENT, OVERWRITE, READ_AFTER_WRITE, LIST_AFTER_PUT]
    racing = check["properties"][0]["counts"]
    assert racing["racers"] == 8 and racing["one_winner"] == racing["rounds"] >= 1
    assert check["seconds"] < 10 and check["cleanup"].startswith("deleted ")
    assert (
        f"store self-check: passed (put-if-absent {racing['rounds']}/{racing['rounds']} rounds one winner" in p.stdout
    )
    assert '<div class="sub" id="store-check">store self-check: passed' in (run_dir / "report.html").read_text()
    assert json.loads((run_dir / "run.json").read_text())["store_self_check"]["passed"] is True


def test_the_embedded_moto_lists_its_backends_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """harness.run.moto_main: moto's per-request backend lookup (a listdir
    and an isdir per module) is taken once; the answer is moto's own."""
    from moto import backends

    from harness.run.moto_main import cache_backend_listing

    shipped = list(backends.list_of_moto_modules())
    assert "s3" in shipped
    monkeypatch.setattr(backends, "list_of_moto_modules", backends.list_of_moto_modules)  # restored after
    assert cache_backend_listing()

    def no_listing(path: str) -> list[str]:
        raise AssertionError(f"listed {path} again")

    monkeypatch.setattr(os, "listdir", no_listing)
    assert list(backends.list_of_moto_modules()) == shipped == list(backends.list_of_moto_modules())
