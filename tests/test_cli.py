"""Bad input: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import REPO, run_cli, still_running


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--workload", "nope"], "valid: append, register, bank, delete-insert"),
        (["run", "--engine", "nope"], "valid: delta-spark, sail, delta-rs"),
        (["run", "--log-store", "nope"], "valid: auto, single-driver, coordinated, dynamodb"),
        (["bench-log-store", "--log-stores", "coordinated,nope"], "valid: single-driver, coordinated"),
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
    a traceback and never 1."""
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


def _one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    """The run's single error line, the last on stderr (a run that got as
    far as its folder names it first)."""
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Exception in thread" not in res.stderr, res.stderr
    err = [line for line in res.stderr.strip().splitlines() if line.startswith("delta-jepsen: error:")]
    assert len(err) == 1 and res.stderr.strip().endswith(err[0]), res.stderr
    return err[0]


def test_more_clients_than_the_machine_holds_is_refused_at_once() -> None:
    """Each slot is a worker process: 100000 of them once started until the
    machine gave out, printed thread tracebacks and never exited."""
    t0 = time.monotonic()
    res = run_cli("run", "--concurrency", "100000", "--engine", "delta-rs", "--storage", "local", "--time-limit", "1")
    elapsed = time.monotonic() - t0
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "--concurrency 100000 is more than this machine can run (at most " in err[0], err[0]
    assert "CPUs" in err[0] and "GiB of memory available" in err[0], err[0]
    assert elapsed < 30, f"took {elapsed:.1f} s"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--engine", "sail", "--nodes", "100000", "--storage", "local"], "--nodes 100000 is more than"),
        (["run", "--nodes", "100000", "--storage", "local"], "--nodes 100000 is more than"),  # delta-spark JVMs
        (["matrix", "--concurrency", "100000", "--storage", "local"], "--concurrency 100000 is more than"),
        (["conformance", "--engine", "delta-rs", "--jobs", "100000"], "--jobs 100000 is more than"),
        (["bench-startup", "--engines", "sail", "--nodes", "100000"], "--nodes 100000 is more than"),
        (["bench-storage", "--concurrency", "100000"], "--concurrency 100000 is more than"),
        (["bench-proxy", "--clients", "10000000"], "--clients 10000000 is more than"),
    ],
)
def test_sizes_beyond_the_machine_are_one_line_exit_2(args: list[str], needle: str) -> None:
    """Checked before anything starts: nothing is spawned, whatever the size."""
    res = run_cli(*args, timeout=60)
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in res.stderr, res.stderr
    assert needle in err[0] and "(at most " in err[0], err[0]


def _as_user(uid: int) -> list[str]:
    """The argv prefix that runs a command as `uid`, without root's exemption
    from RLIMIT_NPROC; it keeps reading and writing any file, as the
    interpreter and pytest's folders may be root's alone."""
    caps = "+dac_override,+dac_read_search"
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        f"--inh-caps={caps}",
        f"--ambient-caps={caps}",
        "--",
    ]


def _processes_of(uid: int) -> list[int]:
    return [p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"] is not None and p.info["uids"].real == uid]


# Holds `argv[1]` of the user's processes and threads until its stdin closes.
_HOG = (
    "import sys, threading\n"
    "done = threading.Event()\n"
    "for _ in range(int(sys.argv[1]) - 1):\n"
    "    threading.Thread(target=done.wait, daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.mark.may_skip("a process limit binds only a user other than root: it needs root, to switch user with setpriv")
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_workers_the_os_refuses_end_the_run_with_one_line_and_no_process_left(tmp_path) -> None:
    """Another program of the same user holds most of its process limit (a
    real cause no check before the start can see): the run's client workers
    cannot all start. The run stops at once with one line, exit 2, and
    leaves no process of its own behind."""
    uid = 100000 + os.getpid()  # this test's alone: the limit counts every process of the user
    limit, held, concurrency = 60, 32, 16  # the run's own check passes (16 slots fit in 60)
    hog = subprocess.Popen(
        [*_as_user(uid), sys.executable, "-c", _HOG, str(held)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
        home = tmp_path / "home"
        home.mkdir()
        t0 = time.monotonic()
        res = subprocess.run(
            [
                *_as_user(uid),
                sys.executable,
                "-m",
                "harness.cli",
                "run",
                "--engine",
                "delta-rs",
                "--storage",
                "local",
                "--concurrency",
                str(concurrency),
                "--time-limit",
                "5",
                "--no-progress",
                "--results-dir",
                str(tmp_path / "results"),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HOME": str(home), "MPLCONFIGDIR": str(home)},
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit)),
        )
        elapsed = time.monotonic() - t0
        left = [pid for pid in _processes_of(uid) if pid != hog.pid]
        deadline = time.monotonic() + 10
        while still_running(left) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert still_running(left) == [], f"processes left by the run: {left}"
    finally:
        hog.kill()
        hog.wait()
        for pid in still_running(_processes_of(uid)):
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass
    line = _one_error_line(res)
    assert "the OS refused to start" in line and "ulimit -u" in line, line
    assert elapsed < 60, f"took {elapsed:.1f} s"
