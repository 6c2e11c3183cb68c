"""`delta-jepsen reproduce` on real delta-rs runs: the M6 finding replays,
shrinks and becomes a script that shows it in a venv holding only deltalake;
a valid run has nothing to reproduce; an anomaly that does not replay is
said so (exit 3), never "reproduced"."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from harness.core.history import load_history
from tests.conftest import load_results, only_run_dir, run_cli

pytestmark = pytest.mark.integration

M6 = "compaction-duplicated-rows"
RUN_ATTEMPTS = 3  # the race needs two OPTIMIZEs of one snapshot: nearly every 4 s run meets it


def _run(workload: str, results_dir: Path, seconds: str = "4") -> tuple[subprocess.CompletedProcess, Path]:
    res = run_cli(
        "run",
        "--workload",
        workload,
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--concurrency",
        "3",
        "--time-limit",
        seconds,
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode in (0, 1), res.stdout + res.stderr
    return res, only_run_dir(results_dir)


def _kinds(run_dir: Path) -> set[str]:
    return {a["kind"] for c in load_results(run_dir)["checkers"] for a in c["anomalies"]}


def _clean_venv(path: Path) -> Path:
    """A venv holding deltalake (the version under test) and its own dependencies only."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    pip = subprocess.run(
        [
            str(path / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            f"deltalake=={version('deltalake')}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    return path / "bin" / "python"


def test_m6_replays_shrinks_and_runs_standalone(tmp_path: Path) -> None:
    for attempt in range(1, RUN_ATTEMPTS + 1):
        _, run_dir = _run("compaction", tmp_path / f"results-{attempt}")
        if M6 in _kinds(run_dir):
            break
    assert M6 in _kinds(run_dir), f"delta-rs: no {M6} in {RUN_ATTEMPTS} runs: the pinned M6 finding is gone"

    res = run_cli("reproduce", str(run_dir), "--anomaly", M6, "--repeat", "5")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "REPRODUCED in 5 of 5" in res.stdout and "standalone script shows the anomaly" in res.stdout
    (out,) = (run_dir / "repro").iterdir()
    outcome = json.loads((out / "outcome.json").read_text())
    assert outcome["anomaly"]["kind"] == M6 and outcome["anomaly"]["claim"] == "M6"
    assert outcome["reproduced_before_shrink"] >= 4 and outcome["reproduced_after_shrink"] >= 4
    assert outcome["uncontrolled"] == 0
    txns, files, rows = outcome["size_after"]
    # Two compactions of one snapshot; a one-row file is enough (ZORDER rewrites it).
    assert 2 <= txns <= 3 and 1 <= files <= 2 and rows <= 2
    assert tuple(outcome["size_after"]) <= tuple(outcome["size_before"])
    steps = json.loads((out / "shrink.json").read_text())
    assert steps and any(s["reproduced"] for s in steps) and any(not s["reproduced"] for s in steps)
    shrunk = json.loads((out / "schedule.json").read_text())["shrunk"]
    # Two compactions of one file set, and at most the commit that made it.
    assert sum(t["f"].startswith("optimize") for t in shrunk["txns"]) == 2, shrunk["txns"]
    report = (out / "REPORT.md").read_text()
    assert "Spec claim M6" in report and "## Schedule" in report and "OPTIMIZE" in report
    assert outcome["script"]["exit_code"] == 1

    # The script imports nothing of the harness: a venv with deltalake alone runs it.
    script = (out / "reproduce.py").read_text()
    assert "harness" not in script.replace("delta-jepsen", "")
    python = _clean_venv(tmp_path / "venv")
    alone = subprocess.run([str(python), str(out / "reproduce.py")], capture_output=True, text=True, timeout=300)
    assert alone.returncode == 1, alone.stdout + alone.stderr
    assert "REPRODUCED" in alone.stdout and "unexpected row" in alone.stdout

    # Bad input: one line, exit 2.
    for args in (["--anomaly", "no-such-kind"], ["--anomaly", "100000"], ["--repeat", "0"]):
        bad = run_cli("reproduce", str(run_dir), *args)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_c16_from_a_delete_insert_run_replays_shrinks_and_runs_standalone(tmp_path: Path) -> None:
    """delta-rs's C16 deviation found at scale (a WHERE-less DELETE commits over
    an INSERT its snapshot missed, under Serializable), reproduced from the
    run folder rather than from the conformance cell."""
    for attempt in range(1, RUN_ATTEMPTS + 1):
        res = run_cli(
            "run",
            "--workload",
            "delete-insert",
            "--engine",
            "delta-rs",
            "--storage",
            "local",
            "--isolation",
            "Serializable",
            "--concurrency",
            "4",
            "--time-limit",
            "5",
            "--results-dir",
            str(tmp_path / f"results-{attempt}"),
            "--no-progress",
        )
        run_dir = only_run_dir(tmp_path / f"results-{attempt}")
        if "history-order" in _kinds(run_dir):
            break
    assert "history-order" in _kinds(run_dir), f"no C16 history-order anomaly in {RUN_ATTEMPTS} runs: " + res.stdout
    # The deviation is the WHERE-less DELETE's alone: a DELETE over a key range
    # is checked against the INSERT it missed, and fails.
    invokes = {op.id: op.invoke.value for op in load_history(run_dir / "history.jsonl").ops()}
    for c in load_results(run_dir)["checkers"]:
        assert c["verdict"] == "valid" or c["checker"] == "serializability", c
        for a in c["anomalies"]:
            assert a["kind"] == "history-order" and a["claim"] == "C14", a
            later = a["ops"][a["versions"].index(max(a["versions"]))]
            assert invokes[later].get("where") == "none", (later, invokes[later], a["explanation"])

    out = run_cli("reproduce", str(run_dir), "--anomaly", "history-order", "--repeat", "5")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "standalone script shows the anomaly" in out.stdout
    (folder,) = (run_dir / "repro").iterdir()
    outcome = json.loads((folder / "outcome.json").read_text())
    assert outcome["anomaly"]["kind"] == "history-order" and outcome["anomaly"]["claim"] == "C14"
    assert outcome["reproduced_before_shrink"] >= 4 and outcome["reproduced_after_shrink"] >= 4
    assert outcome["uncontrolled"] == 0
    txns, files, rows = outcome["size_after"]
    assert txns == 2 and files <= 1 and rows <= 1, outcome["size_after"]
    shrunk = json.loads((folder / "schedule.json").read_text())["shrunk"]
    by_f = {t["f"]: t for t in shrunk["txns"]}
    assert set(by_f) == {"insert", "delete"} and by_f["delete"]["value"]["where"] == "none"
    assert by_f["insert"]["commit_version"] < by_f["delete"]["commit_version"]
    assert outcome["script"]["exit_code"] == 1, outcome["script"]
    assert "dt.delete(predicate=None)" in (folder / "reproduce.py").read_text()
    assert "Spec claim C14" in (folder / "REPORT.md").read_text()


def test_valid_run_has_nothing_and_a_non_reproducing_anomaly_says_so(tmp_path: Path) -> None:
    res, run_dir = _run("append", tmp_path / "results", seconds="2")
    assert res.returncode == 0, res.stdout + res.stderr
    nothing = run_cli("reproduce", str(run_dir))
    assert nothing.returncode == 0 and "nothing to reproduce" in nothing.stdout, nothing.stdout + nothing.stderr

    # Plant an anomaly the engine never showed: two appends "duplicating rows"
    # in a compaction. The replay runs them for real; the checker finds no such
    # thing, so reproduce must say it did not reproduce, with what it tried.
    doc = load_results(run_dir)
    hist = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    appends = [e["id"] for e in hist if e["type"] == "ok" and e["f"] == "append" and isinstance(e["process"], int)]
    doc["checkers"].append(
        {
            "checker": "compaction",
            "verdict": "invalid",
            "explanation": "planted",
            "anomalies": [{"kind": M6, "claim": "M6", "ops": appends[:2], "versions": [], "explanation": "planted"}],
        }
    )
    (run_dir / "results.json").write_text(json.dumps(doc))
    res = run_cli("reproduce", str(run_dir), "--repeat", "2")
    assert res.returncode == 3, res.stdout + res.stderr
    # The schedule holds the two named appends and any commit another client
    # made between their snapshots (a loaded machine interleaves more).
    folder = next((run_dir / "repro").iterdir())
    txns = json.loads((folder / "schedule.json").read_text())["original"]["txns"]
    assert set(appends[:2]) <= {t["op_id"] for t in txns}
    assert "not reproduced" in res.stdout and f"2 replay(s) of {len(txns)} transaction(s)" in res.stdout
    assert "REPRODUCED" not in res.stdout
    outcome = json.loads(folder.joinpath("outcome.json").read_text())
    assert outcome["reproduced_before_shrink"] == 0 and outcome["script"] is None

    # A cycle through a commit no op made (an engine's unasked commit, which
    # the log names "v<N>") cannot be replayed: the replay of the other party
    # alone would say "not reproduced" of an anomaly it never held.
    cycle = {"kind": "G-single", "claim": "C14", "ops": ["v1", appends[0]], "versions": [1], "explanation": "planted"}
    doc["checkers"][-1]["anomalies"].append(cycle)
    (run_dir / "results.json").write_text(json.dumps(doc))
    res = run_cli("reproduce", str(run_dir), "--anomaly", "G-single", "--repeat", "1")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "names v1, a commit the log ties to no client op" in res.stderr and "REPRODUCED" not in res.stdout


def test_not_a_run_folder_is_bad_input(tmp_path: Path) -> None:
    res = run_cli("reproduce", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "not a run folder" in res.stderr and "Traceback" not in res.stderr


def test_a_deviating_conformance_cell_reproduces_standalone(tmp_path: Path) -> None:
    """delta-rs C16: under Serializable an INSERT and a concurrent DELETE with
    no predicate both commit (the pinned conformance finding)."""
    res = run_cli(
        "conformance",
        "--engine",
        "delta-rs",
        "--cells",
        "^unpartitioned/Serializable/insert>delete",
        "--results-dir",
        str(tmp_path),
        "--no-progress",
    )
    (conf,) = (tmp_path / "conformance-delta-rs").iterdir()
    cells = {c["id"]: c for c in json.loads((conf / "conformance.json").read_text())["cells"]}
    deviating, conforming = "unpartitioned/Serializable/insert>delete-all", "unpartitioned/Serializable/insert>delete"
    assert cells[deviating]["verdict"] == "deviates-safety", res.stdout + res.stderr
    assert cells[conforming]["verdict"] == "conforms"

    out = run_cli("reproduce", str(conf), "--cell", deviating, "--repeat", "5")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "REPRODUCED in 5 of 5" in out.stdout and "standalone script shows the anomaly" in out.stdout
    (folder,) = (conf / "repro").iterdir()
    outcome = json.loads((folder / "outcome.json").read_text())
    assert outcome["reproduced"] == 5 and outcome["claim"] == "C16" and len(outcome["schedule"]) == 5
    assert "2.1 must conflict here; it committed" in outcome["script"]["output"]
    assert "harness" not in (folder / "reproduce.py").read_text().replace("delta-jepsen", "")
    assert "spec claim C16" in (folder / "REPORT.md").read_text()

    nothing = run_cli("reproduce", str(conf), "--cell", conforming)
    assert nothing.returncode == 0 and "conforms: nothing to reproduce" in nothing.stdout
    bad = run_cli("reproduce", str(conf), "--cell", "no/such>cell")
    assert bad.returncode == 2 and "no such cell" in bad.stderr


def test_a_lost_write_under_unsafe_put_replays_with_its_fault(tmp_path: Path) -> None:
    """delta-rs under the unsafe-put nemesis (If-None-Match stripped from
    commit PUTs): an acknowledged append is replaced by a concurrent commit of
    the same version. The replay re-applies the fault behind the proxy; the
    shrinker's replay without it does not lose the write."""
    for attempt in range(1, RUN_ATTEMPTS + 1):
        results = tmp_path / f"results-{attempt}"
        res = run_cli(
            "run",
            *("--workload", "append", "--engine", "delta-rs", "--storage", "s3", "--nemesis", "unsafe-put"),
            *("--nemesis-interval", "2", "--concurrency", "4", "--time-limit", "8", "--results-dir", str(results)),
            "--no-progress",
        )
        run_dir = only_run_dir(results)
        if "lost-write" in _kinds(run_dir):
            break
    assert "lost-write" in _kinds(run_dir), f"no lost write under unsafe-put in {RUN_ATTEMPTS} runs: {res.stdout}"

    out = run_cli("reproduce", str(run_dir), "--anomaly", "lost-write", "--repeat", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "REPRODUCED in 2 of 2" in out.stdout and "fault on: strip-if-none-match" in out.stdout
    (folder,) = (run_dir / "repro").iterdir()
    outcome = json.loads((folder / "outcome.json").read_text())
    assert outcome["size_after"][0] == 2 and outcome["uncontrolled"] == 0
    steps = json.loads((folder / "shrink.json").read_text())
    assert any(s["what"].startswith("drop the fault") and not s["reproduced"] for s in steps), steps
    assert outcome["script"]["exit_code"] == 3 and "needs a storage fault" in outcome["script"]["output"]
    assert "## The fault" in (folder / "REPORT.md").read_text()


def test_a_sail_m3_cell_reproduces_standalone(tmp_path: Path) -> None:
    """Sail M3: two INSERT ... SELECTs of one snapshot both commit (each a
    blind append), so both rows carry the count of the same snapshot. The
    script orders them in time (a slowed SELECT with a head start)."""
    cell = "unpartitioned/WriteSerializable/insert-select>insert-select"
    run_cli("conformance", "--engine", "sail", "--cells", f"^{cell}$", "--results-dir", str(tmp_path), "--no-progress")
    (conf,) = (tmp_path / "conformance-sail").iterdir()
    (row,) = json.loads((conf / "conformance.json").read_text())["cells"]
    assert row["verdict"] == "deviates-safety", row

    out = run_cli("reproduce", str(conf), "--cell", cell, "--repeat", "1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "REPRODUCED in 1 of 1" in out.stdout and "standalone script shows the anomaly" in out.stdout
    (folder,) = (conf / "repro").iterdir()
    script = (folder / "reproduce.py").read_text()
    assert "harness" not in script.replace("delta-jepsen", "") and "from pysail.spark import" in script
    outcome = json.loads((folder / "outcome.json").read_text())
    assert "REPRODUCED: no serial order gives the observed table" in outcome["script"]["output"]


def test_a_sail_lost_append_from_a_list_append_run_replays_and_runs_standalone(tmp_path: Path) -> None:
    """Sail M3 found at scale: two list-append INSERT ... SELECTs read one
    list and both commit (Sail takes them for blind appends). Sail records
    no readVersion, so the snapshot each read comes from its rows' positions;
    the replay pins and holds a Sail server at the proxy; the script orders
    the pair in time."""
    res = run_cli(
        "run",
        "--workload",
        "list-append",
        "--engine",
        "sail",
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--results-dir",
        str(tmp_path / "results"),
        "--no-progress",
        timeout=240,
    )
    run_dir = only_run_dir(tmp_path / "results")
    assert "duplicate-position" in _kinds(run_dir), res.stdout + res.stderr  # the pinned finding, every run

    out = run_cli("reproduce", str(run_dir), "--anomaly", "duplicate-position", "--repeat", "5", timeout=900)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "standalone script shows the anomaly" in out.stdout, out.stdout
    (folder,) = (run_dir / "repro").iterdir()
    outcome = json.loads((folder / "outcome.json").read_text())
    assert outcome["anomaly"]["kind"] == "duplicate-position"
    assert outcome["reproduced_before_shrink"] >= 4 and outcome["reproduced_after_shrink"] >= 4
    assert outcome["uncontrolled"] == 0
    assert outcome["size_after"][0] == 2, outcome["size_after"]
    shrunk = json.loads((folder / "schedule.json").read_text())["shrunk"]
    assert [t["f"] for t in shrunk["txns"]] == ["append", "append"]
    first, second = sorted(shrunk["txns"], key=lambda t: t["commit_version"])
    assert second["read_version"] < first["commit_version"]  # the later one read before the first committed
    script = (folder / "reproduce.py").read_text()
    assert "harness" not in script.replace("delta-jepsen", "") and "from pysail.spark import" in script
    assert "REPRODUCED: no serial order gives the observed table" in outcome["script"]["output"]
    assert "## Log entries of the replay" in (folder / "REPORT.md").read_text()
