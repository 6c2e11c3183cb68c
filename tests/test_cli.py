"""Bad input: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--workload", "nope"], "valid: append, register, bank, delete-insert"),
        (["run", "--engine", "nope"], "valid: delta-spark, sail, delta-rs"),
        (["run", "--log-store", "nope"], "valid: auto, single-driver, coordinated, dynamodb"),
        (["run", "--spark-jars", "/nonexistent/jars", "--storage", "local"], "no such directory"),
        (["run", "--nemesis", "nope"], "valid: none"),
        (["run", "--storage", "nope"], "valid: s3, local, external-s3"),
        (["run", "--isolation", "Snapshot"], "valid: Serializable, WriteSerializable"),
        (["run", "--concurrency", "0"], "must be > 0"),
        (["run", "--time-limit", "abc"], "not a number"),
        (["check", "/nonexistent/run"], "no such run folder"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    res = run_cli(*args, timeout=60)
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1, res.stderr
    assert needle in err[0]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("flag", ["--results-dir", "--local-root"])
def test_an_unusable_path_is_one_line_exit_2(tmp_path, flag: str) -> None:
    """A file where a folder must go (the same failure as an unwritable
    folder, which root, running CI here, could still write): exit 2, never
    a traceback and never 1 (issue 11, item 15)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = [
        "run",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--time-limit",
        "1",
        "--no-progress",
        flag,
        str(blocker / "below"),
    ]
    if flag != "--results-dir":
        args += ["--results-dir", str(tmp_path / "results")]
    res = run_cli(*args, timeout=120)
    assert res.returncode == 2, (res.stdout, res.stderr)
    # One error line, the last (a run that got as far as its folder names it first).
    err = [line for line in res.stderr.strip().splitlines() if line.startswith("delta-jepsen: error:")]
    assert len(err) == 1 and res.stderr.strip().endswith(err[0]), res.stderr
    assert "Not a directory" in err[0] and str(blocker) in err[0], res.stderr
    assert "Traceback" not in res.stderr


def test_check_of_a_folder_that_is_no_run(tmp_path) -> None:
    res = run_cli("check", str(tmp_path), timeout=60)
    assert res.returncode == 2
    assert "not a run folder" in res.stderr


def test_list_names_everything() -> None:
    res = run_cli("list", timeout=60)
    assert res.returncode == 0
    assert "workloads: append, register, bank, delete-insert" in res.stdout
    assert "checkers: log-sanity, durability, atomicity, duplicates, read-validity, serializability, bank" in res.stdout
