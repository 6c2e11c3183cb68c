"""Where runs land: results/<workload>-<engine>/<timestamp>/, results/latest."""

from __future__ import annotations

import os
import time
from pathlib import Path

RESULTS_ENV = "DJ_RESULTS_DIR"

# What a run folder holds, name -> what it is; a folder's name ends in "/".
# The docs' reference page of results files is written from this, and a
# test holds real run folders to it.
RUN_FILES: dict[str, str] = {
    "spec.json": "the test spec: workload, engine (and release), storage, nodes, seed, nemeses, package versions, "
    "the table and its checkers, and `repro`, the command that re-runs it; never credentials",
    "run.json": "how the run went: workload seconds, op counts, whether it was interrupted, the store's self-check, "
    "and on SeaweedFS the commit files its own log shows a second write replacing",
    "history.jsonl": "every op, one JSON event per line: its invoke, then ok, fail or info (docs: the history format)",
    "table/": "a copy of the table: `_delta_log/` and the data files, so the run can be checked again with no store",
    "kept/": "with a workload that runs VACUUM: a copy of every data file the run saw appear, names unchanged, "
    "so `check` still reads the rows of files VACUUM deleted and knows which it deleted",
    "logs/": "the logs of everything the run started: the store (moto.log, seaweedfs.log), the fault proxy, "
    "every engine node, every client worker (worker-<process>.log)",
    "coordinator.json": "with delta-spark's coordinated commits: the commit coordinator's DynamoDB state, which "
    "`check` reads for the commits not yet backfilled",
    "seaweedfs/": "with --storage seaweedfs: the store's own data, from which `check` recovers the table when "
    "the harness was killed before copying it",
    "results.json": "every checker's verdict, explanation and anomalies, and the run's verdict",
    "summary.txt": "the verdict and the short summary `run` prints",
    "report.html": "the run on one page: verdict, anomalies with their graphs, timeline, latency and throughput",
    "anomalies/": "one Graphviz file (DOT, and SVG where `dot` is installed) per anomaly that carries a graph",
    "repro/": "`reproduce`'s work: per anomaly, its schedule, the replays, REPORT.md and a standalone script",
}


def results_root(flag: str | None) -> Path:
    return Path(flag or os.environ.get(RESULTS_ENV) or "results")


def new_run_dir(root: Path, workload: str, engine: str) -> Path:
    base = root / f"{workload}-{engine}"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for n in range(1000):
        run_dir = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            run_dir.mkdir(parents=True, exist_ok=False)
            break
        except FileExistsError:
            continue
    else:
        raise RuntimeError(f"cannot create a run folder under {base}")
    latest = root / "latest"
    tmp = root / f".latest-{os.getpid()}"
    try:
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(run_dir.relative_to(root))
        os.replace(tmp, latest)  # atomic: concurrent runs never see no link
    except OSError:
        pass
    return run_dir
