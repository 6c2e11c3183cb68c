"""The tamper suite: every anomaly kind a checker claims to find, planted in
a real stored run the way a buggy engine would write it, must be named by
that checker, and by no other kind of it; the untouched run must be valid.

Runs are real (delta-rs, local directory, one per workload; delta-spark for
the workloads delta-rs cannot run), made once per test. A plant edits a
copy of the run folder: its table (log actions, data files) or its history
(what the engine reported). Kinds of the README's checker table with no
plant here are listed there as unproven, and
`test_every_readme_kind_is_planted_or_listed_unproven` keeps both in step.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from checkers.facts import Fingerprint
from harness.check.pipeline import check_run
from tests.conftest import REPO, load_results, only_run_dir, run_cli
from tests.known import DELTA_RS_TIME_TRAVEL_AFTER_CLEANUP, RunView, explaining

# -- a run folder, as files ------------------------------------------------------


class Run:
    def __init__(self, root: Path):
        self.root = root
        self.log_dir = root / "table" / "_delta_log"

    # the log
    def versions(self) -> list[int]:
        return sorted(int(p.stem) for p in self.log_dir.glob("*.json") if p.stem.isdigit())

    def commit_path(self, v: int) -> Path:
        return self.log_dir / f"{v:020d}.json"

    def actions(self, v: int) -> list[dict]:
        return [json.loads(line) for line in self.commit_path(v).read_text().splitlines() if line.strip()]

    def write_actions(self, v: int, actions: list[dict]) -> None:
        self.commit_path(v).write_text("".join(json.dumps(a) + "\n" for a in actions))

    def commit_of(self, op_id: str) -> int:
        for v in self.versions():
            for a in self.actions(v):
                if a.get("commitInfo", {}).get("dj.op") == op_id:
                    return v
        raise LookupError(op_id)

    def commit_of_any(self, v: int) -> str | None:
        return next((a["commitInfo"].get("dj.op") for a in self.actions(v) if "commitInfo" in a), None)

    def adds(self, v: int) -> list[dict]:
        return [a["add"] for a in self.actions(v) if "add" in a]

    def append_commit(self, actions: list[dict], op_id: str | None = None) -> int:
        v = self.versions()[-1] + 1
        info: dict[str, Any] = {"timestamp": 1, "operation": "WRITE", "operationParameters": {"mode": "Append"}}
        if op_id:
            info["dj.op"] = op_id
        self.write_actions(v, [{"commitInfo": info}, *actions])
        return v

    def drop_checkpoints(self) -> None:
        """Replay from JSON only, so a plant in any commit is seen (a
        checkpoint would otherwise stand in for the commits below it); the
        commits log cleanup deleted come back from the run's kept copies."""
        for p in self.log_dir.iterdir():
            if ".checkpoint." in p.name or p.name == "_last_checkpoint":
                p.unlink()
        kept = self.root / "kept" / "_delta_log"
        if kept.is_dir():
            for p in kept.glob("*.json"):
                if not (self.log_dir / p.name).exists():
                    shutil.copy2(p, self.log_dir / p.name)

    # data files
    def data(self, add: dict) -> pa.Table:
        return pq.read_table(self.root / "table" / add["path"])

    def write_data(self, table: pa.Table) -> dict:
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        pq.write_table(table, self.root / "table" / name)
        return {
            "path": name,
            "partitionValues": {},
            "size": (self.root / "table" / name).stat().st_size,
            "modificationTime": 1,
            "dataChange": True,
            "stats": json.dumps({"numRecords": table.num_rows}),
        }

    # the history
    def events(self) -> list[dict]:
        return [json.loads(line) for line in (self.root / "history.jsonl").read_text().splitlines()]

    def write_events(self, events: list[dict]) -> None:
        (self.root / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))

    def ok_ops(self, f: str) -> list[dict]:
        return [e for e in self.events() if e["type"] == "ok" and e["f"] == f and isinstance(e["process"], int)]

    def edit_event(self, index: int, **changes: Any) -> None:
        events = self.events()
        events[index].update(changes)
        self.write_events(events)


def _committed(run: Run, f: str) -> list[tuple[dict, int]]:
    """Acknowledged ops of kind f that have a commit, newest first (an
    idempotent write the engine skipped has none)."""
    out = []
    for done in reversed(run.ok_ops(f)):
        if (done.get("value") or {}).get("skipped"):
            continue
        try:
            out.append((done, run.commit_of(done["id"])))
        except LookupError:
            continue
    return out


def _multi_row_append(run: Run, f: str = "append") -> tuple[dict, int]:
    """An acknowledged append of two or more rows, and its commit."""
    for done, v in _committed(run, f):
        inv = next(e for e in run.events() if e["type"] == "invoke" and e["id"] == done["id"])
        if len(inv["value"]["ids"]) >= 2:
            return done, v
    raise LookupError("no multi-row append")


def _last_append(run: Run, f: str = "append") -> tuple[dict, int]:
    return _committed(run, f)[0]


def _ids_at(run: Run, version: int) -> list[int]:
    from harness.deltalog import read_log

    log = read_log(str(run.root / "table"))
    return sorted(log.rows_at(version, columns=["id"]).column("id").to_pylist())


# -- plants: append workload --------------------------------------------------------


def plant_log_gap(run: Run) -> None:
    last = run.versions()[-1]
    run.commit_path(last - 1).rename(run.commit_path(last + 1))


def plant_log_unparseable(run: Run) -> None:
    last = run.versions()[-1]
    with run.commit_path(last).open("a") as f:
        f.write('{"add": {"path": \n')


def plant_duplicate_file_action(run: Run) -> None:
    _, v = _last_append(run)
    acts = run.actions(v)
    run.write_actions(v, acts + [a for a in acts if "add" in a])


def plant_multiple_metadata(run: Run) -> None:
    _, v = _last_append(run)
    meta = next(a for a in run.actions(0) if "metaData" in a)
    run.write_actions(v, run.actions(v) + [meta, meta])


def plant_multiple_protocol(run: Run) -> None:
    _, v = _last_append(run)
    protocol = next(a for a in run.actions(0) if "protocol" in a)
    run.write_actions(v, run.actions(v) + [protocol, protocol])


def plant_in_commit_timestamp(run: Run) -> None:
    # Two consecutive commits whose in-commit timestamps go backwards (the
    # engine here writes none: a table with them enabled writes one per commit).
    last = run.versions()[-1]
    for v, ts in ((last - 1, 2_000), (last, 1_000)):
        acts = run.actions(v)
        for a in acts:
            if "commitInfo" in a:
                a["commitInfo"]["inCommitTimestamp"] = ts
        run.write_actions(v, acts)


def plant_missing_data_file(run: Run) -> None:
    _, v = _last_append(run)
    (run.root / "table" / run.adds(v)[0]["path"]).unlink()


def plant_lost_write(run: Run, f: str = "append") -> None:
    # The engine acknowledged its commit, and another writer's PUT of the
    # same version replaced it (a commit that added nothing).
    _, v = _last_append(run, f)
    run.write_actions(v, [{"commitInfo": {"timestamp": 1, "operation": "WRITE", "operationParameters": {}}}])


def plant_wrong_commit_version(run: Run) -> None:
    done, v = _last_append(run)
    run.edit_event(done["index"], version=v - 1)


def plant_lost_rows(run: Run, f: str = "append") -> None:
    # A later commit removes an acknowledged append's file with no op asking.
    _, v = _multi_row_append(run, f)
    add = run.adds(v)[0]
    run.append_commit([{"remove": {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}}])


def plant_failed_but_committed(run: Run) -> None:
    done, _ = _last_append(run)
    run.edit_event(
        done["index"],
        type="fail",
        version=None,
        error={
            "class": "ConcurrentAppendException",
            "claim": "E1",
            "raw": "CommitFailedError: Failed to commit transaction: Commit failed: a concurrent transactions added "
            "new data.",
        },
    )


def plant_partial_op(run: Run) -> None:
    _, v = _multi_row_append(run)
    add = run.adds(v)[0]
    table = run.data(add)
    pq.write_table(table.slice(0, table.num_rows - 1), run.root / "table" / add["path"])


def plant_split_op(run: Run) -> None:
    done, v = _multi_row_append(run)
    add = run.adds(v)[0]
    table = run.data(add)
    pq.write_table(table.slice(0, 1), run.root / "table" / add["path"])
    run.append_commit([{"add": run.write_data(table.slice(1))}], op_id=done["id"])


def plant_duplicate_row(run: Run) -> None:
    # One row of an op written again by a commit no op made.
    _, v = _multi_row_append(run)
    run.append_commit([{"add": run.write_data(run.data(run.adds(v)[0]).slice(0, 1))}])


def plant_duplicate_application(run: Run, f: str = "append") -> None:
    # One op applied twice: a retried commit that had landed the first time.
    done, v = _multi_row_append(run, f)
    run.append_commit([{"add": run.write_data(run.data(run.adds(v)[0]))}], op_id=done["id"])


def _late_read(run: Run) -> dict:
    reads = [e for e in run.ok_ops("read") if not (e.get("value") or {}).get("final")]
    return reads[-1]


def plant_state_never_existed(run: Run) -> None:
    read = _late_read(run)
    run.edit_event(read["index"], value={**read["value"], "ids": sorted(read["value"]["ids"] + [424242])})


def plant_stale_read(run: Run) -> None:
    read = _late_read(run)
    run.edit_event(read["index"], value={**read["value"], "ids": _ids_at(run, 1)}, version=1)


def plant_future_read(run: Run) -> None:
    # A read returns a version whose writer was invoked only after the read
    # had ended; chosen so that no later read saw an older one (which the
    # future read would make stale as well).
    events = run.events()
    invoked = {e["id"]: e["time"] for e in events if e["type"] == "invoke"}
    version_of = {v: run.commit_of_any(v) for v in run.versions()}
    reads = run.ok_ops("read")
    for r in reads:
        later = [v for v, op in sorted(version_of.items()) if op in invoked and invoked[op] > r["time"]]
        if not later:
            continue
        v = later[0]
        if all(x["version"] is not None and x["version"] >= v for x in reads if invoked[x["id"]] > r["time"]):
            run.edit_event(r["index"], value={**r["value"], "ids": _ids_at(run, v)}, version=v)
            return
    raise LookupError("no read to make a future read of")


def plant_read_version_mismatch(run: Run) -> None:
    read = _late_read(run)
    run.edit_event(read["index"], version=read["version"] - 1)


def _checkpoint_now(run: Run) -> int:
    """A checkpoint of the latest version, written by delta-rs itself."""
    from deltalake import DeltaTable

    dt = DeltaTable(str(run.root / "table"))
    dt.create_checkpoint()
    return dt.version()


def plant_missing_commit(run: Run) -> None:
    # A commit file gone from the middle of the log; the checkpoint above it
    # still holds the state (a cleanup that removed the wrong file).
    top = _checkpoint_now(run)
    run.commit_path(top // 2).unlink()


def plant_checkpoint_mismatch(run: Run) -> None:
    # The checkpoint the engine wrote holds a file the JSON commits below it
    # never added (or lost): drop one add from a commit it covers.
    _checkpoint_now(run)
    _, v = _multi_row_append(run)
    run.write_actions(v, [a for a in run.actions(v) if "add" not in a])


def plant_orphan_rows(run: Run) -> None:
    # Rows of a writer no op ever was: data from nowhere.
    _, v = _multi_row_append(run)
    table = run.data(run.adds(v)[0])
    ids = pa.array([i + 7_000_000_000_000 for i in table.column("id").to_pylist()], pa.int64())
    table = table.set_column(table.schema.get_field_index("id"), "id", ids)
    table = table.set_column(
        table.schema.get_field_index("writer"),
        "writer",
        pa.array(["9.999"] * table.num_rows, table.schema.field("writer").type),
    )
    run.append_commit([{"add": run.write_data(table)}])


def plant_duplicate_commit(run: Run) -> None:
    # The log names one op at a second commit that added nothing.
    done, _ = _last_append(run)
    run.append_commit([], op_id=done["id"])


def plant_readded_file(run: Run) -> None:
    # A commit applied twice: a later commit, naming no op, adds a data file
    # that is still live (the same add again). The table holds it once.
    _, v = _last_append(run)
    run.append_commit([{"add": run.adds(v)[0]}])


# -- plants: bank and register ---------------------------------------------------------


def _rewrite_rows(run: Run, v: int, writer: str, column: str, value: Callable[[Any], Any]) -> None:
    """Change `column` of the rows `writer` wrote, in commit v's data file."""
    add = run.adds(v)[0]
    table = run.data(add)
    rows = table.to_pylist()
    for row in rows:
        if row["writer"] == writer:
            row[column] = value(row[column])
            break
    else:
        raise LookupError(f"no row of {writer} in version {v}")
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), run.root / "table" / add["path"])


def plant_wrong_total(run: Run) -> None:
    # A transfer that credited one unit more than it debited.
    done, v = _committed(run, "transfer")[0]
    _rewrite_rows(run, v, done["id"], "balance", lambda b: b + 1)


def plant_read_wrong_total(run: Run) -> None:
    read = _late_read(run)
    bal = [list(b) for b in read["value"]["balances"]]
    bal[0][1] += 1
    run.edit_event(read["index"], value={**read["value"], "balances": bal})


def plant_load_never_visible(run: Run) -> None:
    # The load was acknowledged and nothing of it landed: its commit added
    # nothing, and nothing came after it.
    for v in run.versions()[2:]:
        run.commit_path(v).unlink()
    run.write_actions(1, [a for a in run.actions(1) if "add" not in a])


def plant_lost_update(run: Run) -> None:
    # A register write that read the state before the write it replaced:
    # both read the same version, both committed (G-single, a lost update).
    committed = {done["id"]: v for done, v in _committed(run, "write")}
    for w_id, v in committed.items():
        row = next(r for r in run.data(run.adds(v)[0]).to_pylist() if r["writer"] == w_id)
        p = row["prev_writer"]
        if p not in committed:
            continue
        pv = committed[p]
        prow = next(r for r in run.data(run.adds(pv)[0]).to_pylist() if r["writer"] == p)
        _rewrite_rows(run, v, w_id, "prev_writer", lambda _, prev=prow["prev_writer"]: prev)
        acts = run.actions(v)
        for a in acts:
            if "commitInfo" in a:
                a["commitInfo"]["readVersion"] = pv - 1
        run.write_actions(v, acts)
        return
    raise LookupError("no write that replaced another client's write")


def _set_error(run: Run, cls: str, claim: str | None) -> None:
    fail = next(e for e in run.events() if e["type"] == "fail" and (e.get("error") or {}).get("claim") == "E1")
    run.edit_event(fail["index"], error={**fail["error"], "class": cls, "claim": claim})


def plant_stalled_op(run: Run) -> None:
    # A client whose write got no reply while the others went on: invoked a
    # quarter into the run, given up by the runner's 30 s time limit, in no
    # commit, no fault anywhere.
    events = run.events()
    client = [e for e in events if isinstance(e["process"], int)]
    at = next(e for e in client[len(client) // 4 :] if e["type"] == "invoke" and e["f"] == "write")
    process = max(e["process"] for e in client) + 1
    op = {**at, "process": process, "id": f"{process}.1"}
    end = max(events[-1]["time"] + 1, at["time"] + 30 * 10**9)
    done = {
        **op,
        "type": "info",
        "time": end,
        "error": {"class": "timeout", "claim": None, "raw": "no reply within 30.0s"},
    }
    events.insert(events.index(at) + 1, op)
    events.append(done)
    run.write_events([{**e, "index": i} for i, e in enumerate(events)])


def plant_conflict_unclassified(run: Run) -> None:
    # A conflict reported as "Failed to commit transaction" and nothing more.
    _set_error(run, "commit-conflict-unclassified", None)


def plant_wrong_conflict_class(run: Run) -> None:
    # E5 names two writers of one application id; this run has none.
    _set_error(run, "ConcurrentTransactionException", "E5")


def plant_aborted_read(run: Run) -> None:
    # A committed write that read (replaced) the value of a write that
    # failed: an aborted read (G1a).
    failed = {e["value"]["key"]: e["id"] for e in run.events() if e["type"] == "fail" and e["f"] == "write"}
    for done, v in _committed(run, "write"):
        if done["value"]["key"] in failed:
            _rewrite_rows(run, v, done["id"], "prev_writer", lambda _, prev=failed[done["value"]["key"]]: prev)
            return
    raise LookupError("no committed write of a key another write failed on")


def plant_duplicate_key(run: Run) -> None:
    # A second live row for a key: a MERGE that inserted a key already there.
    done, v = _committed(run, "merge")[0]
    table = run.data(run.adds(v)[0])
    row = next(r for r in table.to_pylist() if r["writer"] == done["id"])
    row = {**row, "id": row["id"] + 7_000_000_000_000}
    run.append_commit([{"add": run.write_data(pa.Table.from_pylist([row], schema=table.schema))}], op_id=done["id"])


def _last_optimize(run: Run) -> tuple[int, dict, pa.Table]:
    v = max(
        v for v in run.versions() if any(a.get("commitInfo", {}).get("operation") == "OPTIMIZE" for a in run.actions(v))
    )
    add = run.adds(v)[0]
    return v, add, run.data(add)


def plant_compaction_lost_rows(run: Run) -> None:
    _, add, table = _last_optimize(run)
    pq.write_table(table.slice(1), run.root / "table" / add["path"])


def plant_compaction_duplicated_rows(run: Run) -> None:
    _, add, table = _last_optimize(run)
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), run.root / "table" / add["path"])


# -- plants: list-append --------------------------------------------------------------


def _last_of_its_key(run: Run) -> tuple[dict, int, dict]:
    from harness.deltalog import read_log

    log = read_log(str(run.root / "table"))
    final = log.rows_at(log.latest_version, columns=["k", "pos", "writer"]).to_pylist()
    top = {}
    for r in final:
        if r["k"] not in top or r["pos"] > top[r["k"]]["pos"]:
            top[r["k"]] = r
    for done, v in _committed(run, "append"):
        for row in run.data(run.adds(v)[0]).to_pylist():
            t = top.get(row["k"])
            if row["writer"] == done["id"] and t and t["writer"] == done["id"] and row["pos"] > 1:
                return done, v, row
    raise LookupError("no append that is the last of its list")


def _rewrite_element(run: Run, v: int, element_id: int, **changes: Any) -> None:
    add = run.adds(v)[0]
    table = run.data(add)
    rows = [{**r, **changes} if r["id"] == element_id else r for r in table.to_pylist()]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), run.root / "table" / add["path"])


def plant_duplicate_position(run: Run) -> None:
    # Two appends that read the same prefix both committed: a second element
    # at one (key, pos), from a commit of another acknowledged op.
    # The twin's writer wrote nothing else, so what it read is one snapshot
    # (another op's elements elsewhere would add a non-snapshot-read).
    done, v, row = _last_of_its_key(run)
    table = run.data(run.adds(v)[0])
    twin = {**row, "id": row["id"] + 7_000_000_000_000, "writer": "9.999"}
    run.append_commit([{"add": run.write_data(pa.Table.from_pylist([twin], schema=table.schema))}])


def plant_list_gap(run: Run) -> None:
    # The last element of a list one position too far: a position skipped.
    _, v, row = _last_of_its_key(run)
    _rewrite_element(run, v, row["id"], pos=row["pos"] + 1)


def plant_broken_link(run: Run) -> None:
    # An element that names, as the list's last writer, one that was not.
    _, v, row = _last_of_its_key(run)
    _rewrite_element(run, v, row["id"], prev_writer="9.999")


def plant_incompatible_order(run: Run) -> None:
    # A read that saw a list's third element without its second: no
    # committed version holds that list.
    for read in reversed(run.ok_ops("read")):
        lists = [list(x) for x in read["value"].get("lists") or []]
        for i, (k, elems) in enumerate(lists):
            if len(elems) >= 3:
                lists[i] = [k, [e for j, e in enumerate(elems) if j != 1]]
                run.edit_event(read["index"], value={**read["value"], "lists": lists})
                return
    raise LookupError("no read of a list of three elements")


# -- plants: partitioned ----------------------------------------------------


def plant_foreign_partition_rewrite(run: Run) -> None:
    # An op's commit that also rewrote a file of a partition it never named.
    from harness.deltalog import read_log

    log = read_log(str(run.root / "table"))
    v = log.latest_version
    acts = run.actions(v)
    own = {tuple(sorted(a["add"]["partitionValues"].items())) for a in acts if "add" in a}
    adds = {a["path"]: a for c in log.commits.values() for a in c.adds}
    path = next(
        p for p in sorted(log.live_files(v - 1)) if tuple(sorted(adds[p]["partitionValues"].items())) not in own
    )
    old = adds[path]
    table = pq.read_table(run.root / "table" / path)
    new = run.write_data(table.drop_columns([c for c in old["partitionValues"] if c in table.column_names]))
    dest = run.root / "table" / path.rsplit("/", 1)[0] / new["path"]
    (run.root / "table" / new["path"]).rename(dest)
    new = {**new, "path": f"{path.rsplit('/', 1)[0]}/{new['path']}", "partitionValues": old["partitionValues"]}
    run.write_actions(
        v,
        acts
        + [
            {
                "remove": {
                    "path": path,
                    "deletionTimestamp": 1,
                    "dataChange": True,
                    "partitionValues": old["partitionValues"],
                }
            },
            {"add": new},
        ],
    )


# -- plants: metadata ---------------------------------------------------------------------


def plant_commit_after_metadata_change(run: Run) -> None:
    # The write right after a column was added read the version before it,
    # and still committed.
    for _done, m in reversed(_committed(run, "add-column")):
        if m + 1 in run.versions() and not any("metaData" in a for a in run.actions(m + 1)):
            acts = run.actions(m + 1)
            for a in acts:
                if "commitInfo" in a:
                    a["commitInfo"]["readVersion"] = m - 1
            run.write_actions(m + 1, acts)
            op = next(a["commitInfo"].get("dj.op") for a in acts if "commitInfo" in a)
            for e in run.events():
                if (
                    e["id"] == op
                    and e["type"] == "ok"
                    and isinstance(e.get("value"), dict)
                    and "read_version" in e["value"]
                ):
                    run.edit_event(e["index"], value={**e["value"], "read_version": m - 1})
            return
    raise LookupError("no write right after a column add")


def plant_lost_metadata_update(run: Run) -> None:
    # A later metadata commit written from a stale schema: an acknowledged
    # column is gone from the table's final metadata.
    done = run.ok_ops("add-column")[0]
    column = done["value"]["columns"][0][0]
    last = run.versions()[-1]
    meta = next(a for v in reversed(run.versions()) for a in run.actions(v) if "metaData" in a)
    schema = json.loads(meta["metaData"]["schemaString"])
    schema["fields"] = [f for f in schema["fields"] if f["name"] != column]
    meta = {"metaData": {**meta["metaData"], "schemaString": json.dumps(schema)}}
    v = run.append_commit([meta])
    acts = run.actions(v)
    acts[0]["commitInfo"].update({"operation": "SET TBLPROPERTIES", "readVersion": last})
    run.write_actions(v, acts)


def plant_metadata_failed_but_committed(run: Run) -> None:
    done = run.ok_ops("add-column")[-1]
    run.edit_event(
        done["index"],
        type="fail",
        version=None,
        error={
            "class": "MetadataChangedException",
            "claim": "E4",
            "raw": "CommitFailedError: Metadata changed since last commit.",
        },
    )


# -- plants: maintenance workload ---------------------------------------------------


def _kept_log(run: Run) -> Any:
    """The run's table log read with its kept copies, as the check reads it."""
    from harness.check.pipeline import KEPT_DIR
    from harness.deltalog import read_log

    return read_log(str(run.root / "table"), kept=run.root / KEPT_DIR)


def plant_time_travel_wrong_version(run: Run) -> None:
    # A time-travel read answered with another version's rows than it asked
    # for: a read the check judges (every file of its version readable).
    from checkers.facts import table_facts

    log = _kept_log(run)
    facts = table_facts(log)
    for e in reversed(run.events()):
        if e["type"] != "ok" or e["f"] != "read-as-of" or not isinstance(e["value"].get("version"), int):
            continue
        v = e["value"]["version"]
        if v not in log.commits or set(log.live_files(v)) & log.unreadable_files:
            continue
        for other in (v - 1, v + 1, v - 2, v + 2):
            if other in facts.fingerprints and facts.fingerprints[other] != facts.fingerprints[v]:
                run.edit_event(e["index"], value={**e["value"], "ids": sorted(facts.state(other))})
                return
    raise LookupError("no time-travel read to answer wrongly")


def plant_time_travel_wrong_time(run: Run) -> None:
    # A read as of a time answered with the rows of a version committed
    # outside the span of versions that time may resolve to, the engine
    # saying it read that version.
    from checkers.facts import table_facts
    from checkers.time_travel import SLACK_MS, commit_times, newest_by

    log = _kept_log(run)
    facts = table_facts(log)
    times = commit_times(log)
    for e in reversed(run.events()):
        if e["type"] != "ok" or e["f"] != "read-as-of-time":
            continue
        at, got = e["value"]["timestamp_ms"], Fingerprint.of(e["value"]["ids"])
        if not times or at < times[0][1]:
            continue  # not judged
        lo = newest_by(times, at - SLACK_MS) or times[0][0]
        hi = newest_by(times, at + SLACK_MS)  # at least version times[0]'s
        said = e["value"].get("resolved")
        if isinstance(said, int) and not lo <= said <= hi:
            continue  # a mismatch already (a known deviation): the plant must add one
        for v, _ in times:
            if not lo <= v <= hi and facts.fingerprints.get(v) not in (None, got):
                run.edit_event(e["index"], value={**e["value"], "ids": sorted(facts.state(v)), "resolved": v})
                return
    raise LookupError("no read as of a time to answer with a distant version")


def plant_restore_keeps_file(run: Run) -> None:
    # A RESTORE commit that also keeps (adds) a file its version never had.
    v = next(
        v
        for v in reversed(run.versions())
        if any(a.get("commitInfo", {}).get("operation") == "RESTORE" for a in run.actions(v))
    )
    source = next(a for w in run.versions() for a in run.adds(w) if (run.root / "table" / a["path"]).exists())
    table = run.data(source)
    ids = pa.array([i + 8_000_000_000_000 for i in table.column("id").to_pylist()], pa.int64())
    table = table.set_column(table.schema.get_field_index("id"), "id", ids)
    run.write_actions(v, [*run.actions(v), {"add": run.write_data(table)}])


def plant_vacuumed_live_file(run: Run) -> None:
    # A data file of the latest version deleted (the run's kept copy stays).
    from harness.deltalog import read_log

    log = read_log(str(run.root / "table"))
    path = sorted(log.live_files(log.latest_version))[0]
    kept = run.root / "kept" / path
    kept.parent.mkdir(parents=True, exist_ok=True)
    if not kept.exists():
        shutil.copy2(run.root / "table" / path, kept)
    (run.root / "table" / path).unlink()


def plant_half_written_checkpoint(run: Run) -> None:
    # A checkpoint cut off mid-write (no parquet footer), under its final name.
    top = _checkpoint_now(run)
    ck = run.log_dir / f"{top:020d}.checkpoint.parquet"
    data = ck.read_bytes()
    ck.write_bytes(data[: len(data) // 2])


# -- plants: identity workload (delta-spark) ---------------------------------------------


def _identity_commits(run: Run) -> list[tuple[int, list[dict]]]:
    """Commits that inserted rows (and so generated identity values), newest first."""
    out = []
    for v in reversed(run.versions()):
        acts = run.actions(v)
        info = next((a["commitInfo"] for a in acts if "commitInfo" in a), {})
        if info.get("operation") == "WRITE" and any("add" in a for a in acts):
            out.append((v, acts))
    return out


def plant_duplicate_identity_value(run: Run) -> None:
    # The newest insert gives one of its rows the identity value of a row
    # an older insert got.
    commits = _identity_commits(run)
    acts, older = commits[0][1], commits[-1][1]
    taken = run.data(next(a["add"] for a in older if "add" in a)).column("uid")[0].as_py()
    add = next(a["add"] for a in acts if "add" in a)
    table = run.data(add)
    uids = table.column("uid").to_pylist()
    uids[0] = taken
    table = table.set_column(table.schema.get_field_index("uid"), "uid", pa.array(uids, table.schema.field("uid").type))
    pq.write_table(table, run.root / "table" / add["path"])


def _schema_metadata(acts: list[dict], edit: Callable[[dict], None]) -> list[dict]:
    for a in acts:
        if "metaData" in a:
            schema = json.loads(a["metaData"]["schemaString"])
            edit(next(f["metadata"] for f in schema["fields"] if f["name"] == "uid"))
            a["metaData"]["schemaString"] = json.dumps(schema)
    return acts


def plant_identity_high_water_mark(run: Run) -> None:
    # An insert's commit records a high water mark below the values it wrote.
    v, acts = _identity_commits(run)[0]

    def lower(meta: dict) -> None:
        meta["delta.identity.highWaterMark"] = int(meta["delta.identity.highWaterMark"]) - 1

    run.write_actions(v, _schema_metadata(acts, lower))


def plant_concurrent_identity_commit(run: Run) -> None:
    # An insert whose transaction read a version older than the insert just
    # before it, and committed all the same.
    commits = _identity_commits(run)
    (v, acts), (w, _) = next((a, b) for a, b in zip(commits, commits[1:], strict=False) if a[0] - b[0] == 1)
    for a in acts:
        if "commitInfo" in a:
            a["commitInfo"]["readVersion"] = w - 1
    run.write_actions(v, acts)


# -- plants: multi-table workload -------------------------------------------------------


def plant_cross_table_commit(run: Run) -> None:
    # A commit of table a that carries rows an op wrote to table b. Their
    # writer column names no op: the commit is not that op's in table a's
    # order, so reads that came after the op keep their windows.
    other = Run(run.root)
    other.log_dir = run.root / "table" / "b" / "_delta_log"
    for v in reversed(other.versions()):
        adds = other.adds(v)
        if adds:
            rows = pq.read_table(run.root / "table" / "b" / adds[0]["path"])
            i = rows.schema.get_field_index("writer")
            rows = rows.set_column(i, "writer", pa.array(["planted"] * rows.num_rows, rows.schema.field(i).type))
            run.append_commit([{"add": run.write_data(rows)}])
            return
    raise LookupError("table b has no data file")


def plant_multi_table_read_mismatch(run: Run) -> None:
    # A query over both tables answered with a row table b never had.
    e = next(e for e in reversed(run.events()) if e["type"] == "ok" and e["f"] == "read-both")
    run.edit_event(e["index"], value={**e["value"], "b": sorted([*e["value"]["b"], 999_999])})


# -- plants: streaming workload (delta-spark, its JVM killed mid-run) ---------------------


def _sink(run: Run) -> Run:
    sink = Run(run.root)
    sink.log_dir = run.root / "table" / "stream" / "sink" / "_delta_log"
    return sink


def _sink_add(run: Run) -> dict:
    sink = _sink(run)
    return next(a for v in reversed(sink.versions()) for a in sink.adds(v) if json.loads(a["stats"])["numRecords"])


def plant_stream_duplicate_row(run: Run) -> None:
    # A batch written to the sink twice: a later sink commit adds its rows again.
    sink, add = _sink(run), _sink_add(run)
    rows = pq.read_table(run.root / "table" / "stream" / "sink" / add["path"])
    copy = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(rows, run.root / "table" / "stream" / "sink" / copy)
    sink.append_commit([{"add": {**add, "path": copy}}])


def plant_stream_lost_row(run: Run) -> None:
    # Rows the sink once had, removed by a commit of no batch.
    sink, add = _sink(run), _sink_add(run)
    sink.append_commit([{"remove": {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}}])


def plant_stream_crossed_metadata_change(run: Run) -> None:
    # A stream op that read past a column added after its query started,
    # reported as completed.
    log = [(v, run.actions(v)) for v in run.versions()]
    events = run.events()
    started = {e["id"]: e["time"] for e in events if e["type"] == "invoke"}
    found = next(
        (
            (a["commitInfo"].get("userMetadata"), v)
            for v, acts in log
            if v > 0 and any("metaData" in a for a in acts)
            for a in acts
            if "commitInfo" in a
        ),
        None,
    )
    if found is None:
        # A short run on a loaded machine can end before a writer adds its
        # column: the change is planted too, in a writer's commit made after
        # a completed stream op started.
        first = min(started[e["id"]] for e in events if e["f"] == "stream" and e["type"] != "invoke")
        meta = next(a["metaData"] for _, acts in reversed(log) for a in acts if "metaData" in a)
        for v, acts in log:
            op = next((a["commitInfo"].get("userMetadata") for a in acts if "commitInfo" in a), None)
            if v > 0 and op in started and started[op] > first:
                run.write_actions(v, [*acts, {"metaData": meta}])
                found = (op, v)
                break
    assert found is not None, "no writer committed after a stream op started"
    changer, version = found
    stream = max(
        (e for e in events if e["f"] == "stream" and e["type"] != "invoke" and started[e["id"]] < started[changer]),
        key=lambda e: started[e["id"]],
    )
    batch = {"batch": 99, "start": version - 1, "end": version + 1, "end_index": -1, "rows": 1}
    run.edit_event(stream["index"], type="ok", error=None, value={"seconds": 6.0, "batches": [batch]})


def check_kills_landed_mid_maintenance(run_dir: Path) -> None:
    events = Run(run_dir).events()
    killed = [e["value"]["op"] for e in events if e["f"] == "start-kill-mid-op" and e["type"] == "ok"]
    assert killed and set(killed) <= {"restore", "vacuum", "vacuum-full", "checkpoint", "cleanup"}, killed
    finals = [e for e in events if e["f"] == "read" and e["type"] == "ok" and (e["value"] or {}).get("final")]
    assert finals, "no final read completed: the table did not load after the kills"


def check_a_kill_landed_while_the_stream_ran(run_dir: Path) -> None:
    # The clean run's exactly-once verdict is evidence only if the JVM died
    # while a query was running.
    events = Run(run_dir).events()
    kills = [(e["time"], e["value"]) for e in events if e["f"] == "start-kill-mid-op" and e["type"] == "ok"]
    spans: dict[str, list[int]] = {}
    for e in events:
        if e["f"] == "stream":
            spans.setdefault(e["id"], []).append(e["time"])
    assert kills, "no kill landed"
    for t, value in kills:
        assert value["target"] == "node" and value["op"] == "stream", value
        start, *end = spans[value["op_id"]]
        assert start < t and (not end or t < end[0]), (t, spans[value["op_id"]])


def plant_cleanup_above_the_newest_checkpoint(run: Run) -> None:
    # Log cleanup that deleted a commit no checkpoint stands in for (the
    # run's kept copy stays): the table no longer reads whole.
    v = run.append_commit([])
    kept = run.root / "kept" / "_delta_log"
    kept.mkdir(parents=True, exist_ok=True)
    shutil.copy2(run.commit_path(v), kept / run.commit_path(v).name)
    run.commit_path(v).unlink()


@dataclass(frozen=True)
class Plant:
    checker: str
    kind: str
    plant: Callable[[Run], None]
    keep_checkpoints: bool = False


PLANTS: dict[str, tuple[Plant, ...]] = {
    "append": (
        Plant("log-sanity", "log-gap", plant_log_gap),
        Plant("log-sanity", "log-unparseable", plant_log_unparseable),
        Plant("log-sanity", "log-duplicate-file-action", plant_duplicate_file_action),
        Plant("log-sanity", "log-multiple-metadata", plant_multiple_metadata),
        Plant("log-sanity", "log-multiple-protocol", plant_multiple_protocol),
        Plant("log-sanity", "missing-data-file", plant_missing_data_file),
        Plant("log-sanity", "log-missing-commit", plant_missing_commit),
        Plant("log-sanity", "log-checkpoint-mismatch", plant_checkpoint_mismatch),
        Plant("log-sanity", "log-in-commit-timestamp", plant_in_commit_timestamp),
        Plant("durability", "lost-write", plant_lost_write),
        Plant("durability", "wrong-commit-version", plant_wrong_commit_version),
        Plant("durability", "lost-rows", plant_lost_rows),
        Plant("atomicity", "failed-but-committed", plant_failed_but_committed),
        Plant("atomicity", "partial-op", plant_partial_op),
        Plant("atomicity", "split-op", plant_split_op),
        Plant("duplicates", "duplicate-row", plant_duplicate_row),
        Plant("duplicates", "duplicate-application", plant_duplicate_application),
        Plant("duplicates", "duplicate-commit", plant_duplicate_commit),
        Plant("duplicates", "duplicate-commit", plant_readded_file),
        Plant("atomicity", "orphan-rows", plant_orphan_rows),
        Plant("read-validity", "state-never-existed", plant_state_never_existed),
        Plant("read-validity", "stale-read", plant_stale_read),
        Plant("read-validity", "future-read", plant_future_read),
        Plant("read-validity", "read-version-mismatch", plant_read_version_mismatch),
    ),
    "bank": (
        Plant("bank", "wrong-total", plant_wrong_total),
        Plant("bank", "read-wrong-total", plant_read_wrong_total),
        Plant("bank", "load-never-visible", plant_load_never_visible),
    ),
    "register": (
        Plant("serializability", "G-single", plant_lost_update),
        Plant("serializability", "G1a", plant_aborted_read),
        Plant("liveness", "stalled-op", plant_stalled_op),
        Plant("exception-classes", "conflict-unclassified", plant_conflict_unclassified),
        Plant("exception-classes", "wrong-conflict-class", plant_wrong_conflict_class),
    ),
    "list-append": (
        Plant("list-append", "duplicate-position", plant_duplicate_position),
        Plant("list-append", "list-gap", plant_list_gap),
        Plant("list-append", "broken-link", plant_broken_link),
        Plant("list-append", "incompatible-order", plant_incompatible_order),
    ),
    "app-txn": (
        # An idempotent write: acknowledged, then its commit replaced; its
        # file removed later; retried and applied again.
        Plant("app-txn", "lost-write", partial(plant_lost_write, f="write")),
        Plant("app-txn", "lost-rows", partial(plant_lost_rows, f="write")),
        Plant("app-txn", "duplicate-application", partial(plant_duplicate_application, f="write")),
    ),
    "partitioned": (Plant("partition-conflicts", "foreign-partition-rewrite", plant_foreign_partition_rewrite),),
    "metadata": (
        Plant("metadata-conflicts", "commit-after-metadata-change", plant_commit_after_metadata_change),
        Plant("metadata-conflicts", "lost-metadata-update", plant_lost_metadata_update),
        Plant("metadata-conflicts", "failed-but-committed", plant_metadata_failed_but_committed),
    ),
    "upsert": (Plant("unique-key", "duplicate-key", plant_duplicate_key),),
    # One client: delta-rs lets concurrent OPTIMIZEs both commit (a README
    # finding), and the untouched run must be valid.
    "compaction": (
        Plant("compaction", "compaction-lost-rows", plant_compaction_lost_rows),
        Plant("compaction", "compaction-duplicated-rows", plant_compaction_duplicated_rows),
    ),
    "maintenance": (
        Plant("time-travel", "time-travel-mismatch", plant_time_travel_wrong_version),
        Plant("time-travel", "time-travel-mismatch", plant_time_travel_wrong_time),
        Plant("restore", "restore-mismatch", plant_restore_keeps_file),
        Plant("vacuum", "vacuumed-live-file", plant_vacuumed_live_file),
        Plant("log-sanity", "missing-data-file", plant_vacuumed_live_file),
        Plant("log-sanity", "log-checkpoint-broken", plant_half_written_checkpoint, keep_checkpoints=True),
        Plant("log-sanity", "log-missing-commit", plant_cleanup_above_the_newest_checkpoint, keep_checkpoints=True),
    ),
    "multi-table": (
        Plant("multi-table", "cross-table-commit", plant_cross_table_commit),
        Plant("multi-table", "multi-table-read-mismatch", plant_multi_table_read_mismatch),
    ),
    "streaming": (
        Plant("streaming", "stream-duplicate-row", plant_stream_duplicate_row),
        Plant("streaming", "stream-lost-row", plant_stream_lost_row),
        Plant("streaming", "stream-crossed-metadata-change", plant_stream_crossed_metadata_change),
    ),
    "identity": (
        Plant("identity", "duplicate-identity-value", plant_duplicate_identity_value),
        Plant("identity", "identity-high-water-mark", plant_identity_high_water_mark),
        Plant("identity", "concurrent-identity-commit", plant_concurrent_identity_commit),
    ),
}
# partitioned: one client, since delta-rs refuses writes on disjoint
# partitions (a README finding, P1) and the untouched run must be valid.
CONCURRENCY = {"compaction": 1, "partitioned": 1, "identity": 2}
# Workloads delta-rs cannot run: identity columns come with delta-spark 4.4
# (its Spark 4.0 build, in an environment of its own).
# One JVM (its sessions still race), a longer run and a longer wait: the
# first use builds the release's environment and fetches its jars.
ENGINE = {"identity": "delta-spark==4.4.0", "streaming": "delta-spark"}
# maintenance: on a loaded machine (three runs at once on two cores), 4 s
# runs had no RESTORE or no VACUUM commit in 7 of 19 (each one killed), so
# nothing to judge; 8 s runs had both in 35 of 35.
TIME_LIMIT = {"identity": 4, "streaming": 12, "maintenance": 8}
EXTRA = {
    "identity": ("--nodes", "1"),
    # The stream's JVM killed while its query runs (3-5 s into a stream op),
    # started again 5 s later: exactly once must hold across the restart.
    "streaming": ("--nodes", "1", "--nemesis", "kill-mid-op", "--nemesis-interval", "8"),
    # Clients killed a few milliseconds into VACUUMs, RESTOREs, checkpoints
    # and log cleanups: delta-rs runs in the client, so each dies half done,
    # and the table must still load and every check hold.
    "maintenance": ("--nemesis", "kill-mid-op", "--nemesis-interval", "1"),
}
CLI_TIMEOUT = {"identity": 900.0, "streaming": 600.0}
# What the untouched run must also show.
RUN_CHECKS = {
    "streaming": check_a_kill_landed_while_the_stream_ran,
    "maintenance": check_kills_landed_mid_maintenance,
}


# Engine deviations an untouched run may show (tests/known.py, each shown by
# its evidence): the run is then valid but for them, and a plant for the
# same checker must add an anomaly of its own.
BASE_KNOWN = {"maintenance": (DELTA_RS_TIME_TRAVEL_AFTER_CLEANUP,)}


def _known_in_base(workload: str, original: Path, clean: Path, report: Any) -> dict[str, int]:
    """Anomalies of the untouched run, by checker, each a known deviation of
    BASE_KNOWN shown by its evidence; any other anomaly fails the test.

    The evidence is read from the run as it was made: the clean copy has
    its cleaned-up commits back from the kept copies (drop_checkpoints), so
    it no longer shows which commits log cleanup had deleted. Each anomaly
    of the clean copy must be one the original run shows and explains."""
    known = BASE_KNOWN.get(workload, ())
    explained, unexplained = set(), []
    if report.doc and any(c["anomalies"] for c in report.doc["checkers"]):
        view = RunView(original, load_results(original))  # as the run checked it
        for checker, a in view.anomalies():
            k, _ = explaining(view, a, known)
            if k is None:
                unexplained.append(f"{checker}: {a['kind']}: {a['explanation'][:400]}")
                continue
            explained.add((checker, a["kind"], tuple(a["ops"])))
            warnings.warn(f"[{k.id}] shown in the untouched run: {a['explanation'][:200]}", stacklevel=2)
    out: dict[str, int] = {}
    for checker, a in RunView(clean, report.doc).anomalies():
        if (checker, a["kind"], tuple(a["ops"])) not in explained:
            unexplained.append(f"{checker}: {a['kind']} (clean copy): {a['explanation'][:400]}")
            continue
        out[checker] = out.get(checker, 0) + 1
    assert not unexplained, unexplained
    return out


# Runs whose timing decides whether they are evidence at all: a fault must
# land mid-op, and the ops it interrupts must also commit now and then. On a
# loaded machine a run of seed 7 may be neither (no kill landed in one CI
# run); such a run is made again with the next seed, up to this many runs.
ATTEMPTS = {"maintenance": 3}


def _make_run(workload: str, results: Path) -> Path:
    attempts, unusable = ATTEMPTS.get(workload, 1), []
    for attempt in range(attempts):
        out = results / f"seed-{7 + attempt}"
        res = run_cli(
            "run",
            "--workload",
            workload,
            "--engine",
            ENGINE.get(workload, "delta-rs"),
            "--storage",
            "local",
            "--concurrency",
            str(CONCURRENCY.get(workload, 3)),
            "--time-limit",
            str(TIME_LIMIT.get(workload, 4)),
            "--seed",
            str(7 + attempt),
            "--results-dir",
            str(out),
            "--no-progress",
            *EXTRA.get(workload, ()),
            timeout=CLI_TIMEOUT.get(workload, 300.0),
        )
        # 1: a known deviation of BASE_KNOWN may show; the test judges the run.
        if res.returncode not in (0, 1):
            assert res.returncode == 3 and attempt + 1 < attempts, unusable + [res.stdout + res.stderr]
            unusable.append(f"seed {7 + attempt}: verdict unknown: {res.stdout[-600:]}")
            continue
        run_dir = only_run_dir(out)
        try:
            if workload in RUN_CHECKS:
                RUN_CHECKS[workload](run_dir)
        except AssertionError as e:
            assert attempt + 1 < attempts, [*unusable, f"seed {7 + attempt}: {e}"]
            unusable.append(f"seed {7 + attempt}: {e}")
            continue
        if unusable:
            warnings.warn(f"{workload}: runs not usable as evidence first: {unusable}", stacklevel=2)
        return run_dir
    raise AssertionError(unusable)


def _kinds(report: Any, checker: str) -> set[str]:
    r = next(r for r in report.results if r.checker == checker)
    # exception-classes reports findings beside a valid verdict, not anomalies
    return {a.kind for a in r.anomalies} | {d["kind"] for d in r.stats.get("deviations", [])}


@pytest.mark.integration
@pytest.mark.parametrize("workload", list(PLANTS))
def test_each_planted_anomaly_is_named_by_its_checker(workload: str, tmp_path: Path) -> None:
    original = _make_run(workload, tmp_path / "results")
    clean = tmp_path / "clean"
    shutil.copytree(original, clean, symlinks=True)
    Run(clean).drop_checkpoints()
    report = check_run(clean, write=False)
    base = _known_in_base(workload, original, clean, report)
    assert report.verdict.value == "valid" or base, [
        (r.checker, r.verdict.value, r.explanation[:200]) for r in report.results
    ]
    wrong = []
    for i, p in enumerate(PLANTS[workload]):
        dst = tmp_path / f"{i}-{p.kind}"
        shutil.copytree(original, dst, symlinks=True)
        run = Run(dst)
        if not p.keep_checkpoints:
            run.drop_checkpoints()
        p.plant(run)
        report = check_run(dst, write=False)
        got = _kinds(report, p.checker)
        r = next(r for r in report.results if r.checker == p.checker)
        named = len(r.anomalies) + len(r.stats.get("deviations", []))
        if got != {p.kind} or named <= base.get(p.checker, 0):
            wrong.append(
                f"{p.checker}/{p.kind}: named {sorted(got) or 'nothing'} ({r.verdict.value}: {r.explanation[:160]})"
            )
    assert wrong == [], "\n".join(wrong)


# -- the docs' checker table and this suite -------------------------------------------

# The explanation page "What is checked" (once the README's section).
CHECKING_PAGE = REPO / "docs" / "src" / "explanation" / "checking.md"

UNPROVEN_HEADING = "Anomaly kinds with no planted test"


def _readme_kinds() -> dict[str, set[str]]:
    text = CHECKING_PAGE.read_text()
    table = text[text.index("| checker | claim | anomaly kinds |") :]
    table = table[: table.index("\n\n")]
    out: dict[str, set[str]] = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.search(r"`([\w-]+)`", cells[0]).group(1)
        # kinds are the backticked names before any parenthesis of explanation
        out[name] = set(re.findall(r"`([A-Za-z][\w-]*)`", re.sub(r"\([^)]*\)", "", cells[2])))
    return out


def _readme_unproven() -> set[tuple[str, str]]:
    text = CHECKING_PAGE.read_text()
    section = text[text.index(UNPROVEN_HEADING) :]
    section = section[: section.index("\n\n")]
    return {(m.group(1), m.group(2)) for m in re.finditer(r"`([\w-]+)`: `([\w-]+)`", section)}


def test_every_readme_kind_is_planted_or_listed_unproven() -> None:
    planted = {(p.checker, p.kind) for ps in PLANTS.values() for p in ps}
    readme = {(c, k) for c, ks in _readme_kinds().items() for k in ks}
    unproven = _readme_unproven()
    assert planted <= readme, sorted(planted - readme)
    assert readme - planted == unproven, (
        "the docs' unproven list is out of step",
        sorted((readme - planted) - unproven),
        sorted(unproven - (readme - planted)),
    )
