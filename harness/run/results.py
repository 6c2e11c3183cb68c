"""Where runs land: results/<workload>-<engine>/<timestamp>/, results/latest."""

from __future__ import annotations

import os
import time
from pathlib import Path

RESULTS_ENV = "DJ_RESULTS_DIR"


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
