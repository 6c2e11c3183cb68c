"""The checking process's arena allocator (harness.core._arenas): objects
built on arenas it cut and reused keep their values, a freed arena is
taken again before a new one is cut, the regions are backed by huge pages
where the kernel offers them, and installing it twice is installing it
once. Each case runs in a process of its own: the allocator stays for the
life of the process that installs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

try:
    import harness.core._arenas  # noqa: F401
except ImportError:
    if os.environ.get("CI"):  # CI has a C compiler (.ci/setup-debian): a build that lost it is a failure
        raise
    pytest.skip("the arena allocator was not built: no C compiler at install time", allow_module_level=True)

_CHURN = """
import json, sys
from harness.core import _arenas
from harness.core.arenas import keep_arenas

if len(sys.argv) > 1:  # huge pages from the first region on
    _arenas.install(int(sys.argv[1]))
assert keep_arenas() and keep_arenas()
def build(n, salt):
    return [{"path": f"part-{i}-{salt}", "size": i, "stats": str(i) * 3} for i in range(n)]
first = build(400_000, "a")
before = _arenas.stats()
del first
second = build(400_000, "b")
ok = all(d["path"] == f"part-{i}-b" and d["size"] == i and d["stats"] == str(i) * 3 for i, d in enumerate(second))
huge = 0
with open("/proc/self/smaps_rollup") as f:
    for line in f:
        if line.startswith("AnonHugePages:"):
            huge = int(line.split()[1])
print(json.dumps({"ok": ok, "before": before, "after": _arenas.stats(), "huge_kb": huge}))
"""


def _churn(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHURN, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout)


def test_freed_arenas_are_taken_again_and_objects_keep_their_values() -> None:
    got = _churn()
    assert got["ok"]
    before, after = got["before"], got["after"]
    assert before["installed"] == 1 and before["arena_size"] > 0
    assert before["cut"] > 50  # 400,000 dicts take many arenas
    # The second build reuses what the first freed before cutting more.
    assert after["reused"] >= 0.8 * before["cut"] - before["reused"]
    assert after["cut"] - before["cut"] < 0.2 * before["cut"]


def test_arenas_are_backed_by_huge_pages_where_the_kernel_offers_them() -> None:
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        pytest.skip("no transparent huge pages on this kernel")
    if "[never]" in mode:
        pytest.skip("transparent huge pages are off on this machine")
    got = _churn("0")
    assert got["after"]["regions"] >= 2 and got["huge_kb"] >= 2048
    # By default the first GB stays in small pages: a short check is
    # faster without huge pages on a virtual machine.
    assert _churn()["huge_kb"] < 2048


def test_keep_arenas_is_installed_by_a_check() -> None:
    code = (
        "from harness.core import _arenas\n"
        "from harness.check.pipeline import check_run\n"
        "import sys\n"
        "try:\n"
        "    check_run(sys.argv[1], write=False)\n"
        "except Exception:\n"
        "    pass\n"
        "print(_arenas.stats()['installed'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "no-such-run")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "1"
