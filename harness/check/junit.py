"""JUnit XML for CI: `--junit-xml PATH` on run, check, conformance and matrix.

The shape is the one Jenkins, GitLab and most CI tools read (Ant's):
testsuites > testsuite > testcase, each testcase passing or carrying one
<failure> (the engine broke a guarantee), <skipped> (nothing could be
decided) or <error> (the harness could not do its job). The mapping keeps
the harness's own distinction: only an anomaly is a failure, so a CI page
never shows a harness fault as the engine's.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.base import CheckResult, Verdict
from harness.check.pipeline import Report
from harness.core.errors import HarnessError

__all__ = [
    "PASS",
    "FAILURE",
    "SKIPPED",
    "ERROR",
    "Case",
    "Recorder",
    "Suite",
    "check_target",
    "error_case",
    "recording",
    "report_suite",
    "to_xml",
    "write",
]

PASS, FAILURE, SKIPPED, ERROR = "pass", "failure", "skipped", "error"

# XML 1.0 cannot carry most control characters, even escaped; an engine's
# raw error text (ANSI colours from a JVM log, a NUL from a crashed reader)
# would make the whole file unreadable to CI.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("?", str(value))


@dataclass
class Case:
    name: str
    classname: str
    outcome: str = PASS  # pass / failure / skipped / error
    time: float = 0.0
    message: str = ""  # the one line a CI page shows
    type: str = ""  # failure / error: the anomaly kind or verdict
    text: str = ""  # the evidence, under the failure / error / skipped element
    system_out: str = ""


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    time: float = 0.0
    timestamp: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()))
    system_out: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)


def _seconds(value: float) -> str:
    return f"{max(0.0, value):.3f}"


def to_xml(suites: list[Suite]) -> bytes:
    root = ET.Element("testsuites")
    totals = {o: sum(s.count(o) for s in suites) for o in (FAILURE, ERROR, SKIPPED)}
    root.set("name", "delta-jepsen")
    root.set("tests", str(sum(len(s.cases) for s in suites)))
    root.set("failures", str(totals[FAILURE]))
    root.set("errors", str(totals[ERROR]))
    root.set("skipped", str(totals[SKIPPED]))
    root.set("time", _seconds(sum(s.time for s in suites)))
    host = socket.gethostname()
    for s in suites:
        se = ET.SubElement(root, "testsuite")
        se.set("name", _text(s.name))
        se.set("tests", str(len(s.cases)))
        se.set("failures", str(s.count(FAILURE)))
        se.set("errors", str(s.count(ERROR)))
        se.set("skipped", str(s.count(SKIPPED)))
        se.set("time", _seconds(s.time))
        se.set("timestamp", s.timestamp)
        se.set("hostname", _text(host))
        for c in s.cases:
            ce = ET.SubElement(se, "testcase")
            ce.set("name", _text(c.name))
            ce.set("classname", _text(c.classname))
            ce.set("time", _seconds(c.time))
            if c.outcome != PASS:
                oe = ET.SubElement(ce, c.outcome)
                oe.set("message", _text(c.message))
                if c.outcome != SKIPPED:
                    oe.set("type", _text(c.type or c.outcome))
                if c.text:
                    oe.text = _text(c.text)
            if c.system_out:
                ET.SubElement(ce, "system-out").text = _text(c.system_out)
        if s.system_out:
            ET.SubElement(se, "system-out").text = _text(s.system_out)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def check_target(path: str | os.PathLike[str] | None) -> Path | None:
    """--junit-xml, checked before anything runs: a run of minutes must not
    end in a file it cannot write. A bad path is bad input (exit 2)."""
    if path is None:
        return None
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise HarnessError(f"--junit-xml {p}: is a directory")
    if not parent.is_dir():
        raise HarnessError(f"--junit-xml {p}: no such directory {parent}")
    if p.exists() and not os.access(p, os.W_OK):
        raise HarnessError(f"--junit-xml {p}: not writable")
    # os.access says yes to root everywhere, and not every file system that
    # lists a folder takes files (/proc, a read-only mount): try one.
    probe = parent / f".{p.name}.{os.getpid()}.probe"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise HarnessError(f"--junit-xml {p}: cannot write in {parent}: {e.strerror or e}") from None
    return p


def write(path: Path, suites: list[Suite]) -> None:
    """Written whole, then moved into place: CI never reads half a file."""
    data = to_xml(suites)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise HarnessError(f"--junit-xml {path}: cannot write: {e.strerror or e}") from None


def error_case(name: str, classname: str, message: str, text: str = "", kind: str = "harness-error") -> Case:
    """The harness could not do its job (exit 2), or was stopped (130): no
    verdict on the engine either way."""
    first = (message.strip().splitlines() or ["harness error"])[0]
    return Case(name, classname, ERROR, message=first[:500], type=kind, text=text or message)


@dataclass
class Recorder:
    """What a command will write to --junit-xml; `recording` writes it."""

    path: Path | None
    name: str
    classname: str
    suites: list[Suite] = field(default_factory=list)


@contextmanager
def recording(path: Path | None, name: str, classname: str) -> Iterator[Recorder]:
    """Collect a command's suites and write them on the way out, whatever
    the way: a harness error or an interrupt becomes one more <error> case,
    so CI sees why there is no verdict instead of a stale or missing file."""
    rec = Recorder(path, name, classname)
    try:
        yield rec
    except (Exception, KeyboardInterrupt) as e:
        if path is not None:
            if isinstance(e, KeyboardInterrupt):
                case = error_case("interrupted", rec.classname, "interrupted (SIGINT/SIGTERM)", kind="interrupted")
            else:
                case = error_case("harness", rec.classname, f"{type(e).__name__}: {e}")
            if rec.suites:
                rec.suites[-1].cases.append(case)
            else:
                rec.suites.append(Suite(rec.name, [case]))
            write(path, rec.suites)
        raise
    if path is not None:
        write(path, rec.suites)


# -- a run's report --------------------------------------------------------------


def run_identity(run_dir: Path) -> tuple[str, str]:
    """(workload, engine) from spec.json, as recorded; "?" where unreadable."""
    try:
        spec = json.loads((run_dir / "spec.json").read_text()).get("spec") or {}
    except (OSError, ValueError, AttributeError):
        spec = {}
    return str(spec.get("workload") or "?"), str(spec.get("engine") or "?")


def classname_of(run_dir: Path, default: str = "delta-jepsen.check") -> str:
    workload, engine = run_identity(run_dir)
    if (workload, engine) == ("?", "?"):
        return default
    return f"delta-jepsen.{workload}.{engine.replace(',', '+')}"


def _anomaly_lines(r: CheckResult) -> str:
    lines = [r.explanation, ""]
    for a in r.anomalies:
        claim = f" (spec {a.claim})" if a.claim else ""
        lines.append(f"[{a.kind}] {a.title}{claim}: {a.explanation}")
        if a.ops:
            lines.append(f"    ops: {', '.join(map(str, a.ops[:20]))}" + (" ..." if len(a.ops) > 20 else ""))
        if a.versions:
            lines.append(f"    versions: {', '.join(map(str, a.versions[:20]))}")
    return "\n".join(lines)


def checker_case(r: CheckResult, classname: str) -> Case:
    seconds = r.stats.get("seconds") if isinstance(r.stats.get("seconds"), (int, float)) else 0.0
    case = Case(r.checker, classname, time=float(seconds or 0.0))
    if r.verdict is Verdict.INVALID:
        kinds = sorted({a.kind for a in r.anomalies})
        claims = sorted({a.claim for a in r.anomalies if a.claim})
        case.outcome = FAILURE
        case.type = ",".join(kinds) or "invalid"
        head = f"{len(r.anomalies)} anomal{'y' if len(r.anomalies) == 1 else 'ies'}: {', '.join(kinds)}"
        # A CI page shows the message first: a run outside its contract says so there.
        outside = sum(1 for a in r.anomalies if a.details.get("outside_contract"))
        tail = f"; {outside} outside contract" if outside else ""
        case.message = (
            head + (f" (spec {', '.join(claims)})" if claims else "") + tail if r.anomalies else r.explanation
        )
        case.text = _anomaly_lines(r)
    elif r.verdict is Verdict.UNKNOWN:
        case.outcome = SKIPPED
        case.message = r.explanation[:1000]
        case.text = r.explanation
    else:
        case.system_out = r.explanation
    return case


def report_suite(report: Report) -> Suite:
    """One testcase per checker; where the run's verdict is worse than its
    checkers' (a corrupt history line, a harness fault in an op), one more
    case named "history" says why."""
    classname = classname_of(report.run_dir)
    suite = Suite(classname, [checker_case(r, classname) for r in report.results])
    suite.time = float(report.doc.get("check_seconds") or 0.0)
    suite.system_out = report.summary
    worst = {c.outcome for c in suite.cases}
    if report.verdict is Verdict.UNKNOWN and not worst & {FAILURE, SKIPPED}:
        h: dict[str, Any] = report.doc.get("history") or {}
        reasons = [f"history problem: {p}" for p in h.get("problems", []) if "truncated" not in p]
        reasons += [f"harness fault in op {f['op']} ({f['f']}): {f['error']}" for f in h.get("harness_faults", [])]
        why = "; ".join(reasons) or "the run's verdict is unknown"
        suite.cases.append(Case("history", classname, SKIPPED, message=why[:1000], text=why))
    return suite
