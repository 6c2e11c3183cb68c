"""The standalone reproduction: a Python script that needs only the engine's
own package, and a bug report draft beside it.

The script builds the table the schedule starts from, runs the transactions
with the same control the replay used (one table object per transaction,
loaded at its snapshot and never refreshed), then runs the committed ones
one after another on a fresh table: the serial execution the spec allows
(C14: in commit order under Serializable; C15: in any order under
WriteSerializable, the looser bound). It prints expected against observed and
exits 1 when the concurrent outcome is none of the serial ones.
"""

from __future__ import annotations

import json
from typing import Any

from harness.repro.schedule import COMMIT, PIN, Schedule, describe_fault

SCRIPT_NAME = "reproduce.py"
REPORT_NAME = "REPORT.md"

# Delta SQL types the tables use -> arro3 data type constructors.
_ARROW = {
    "BIGINT": "int64",
    "LONG": "int64",
    "INT": "int32",
    "INTEGER": "int32",
    "STRING": "string",
    "DOUBLE": "float64",
    "BOOLEAN": "bool",
}


def lit(x: Any) -> str:
    """A Python literal of JSON data, as compact as a person can read."""
    return repr(json.loads(json.dumps(x)))


def _fn(op_id: str) -> str:
    return "txn_" + "".join(c if c.isalnum() else "_" for c in op_id)


def _call(call: dict[str, Any]) -> list[str]:
    """The deltalake statements of one recorded primitive call, on `dt`."""
    p, a = call["primitive"], call["args"]
    if p == "append":
        return [f"write_deltalake(dt, rows_table({lit(a['rows'])}), mode='append')"]
    if p == "update":
        return [f"dt.update(predicate={lit(a['where'])}, updates={lit(a['assignments'])})"]
    if p == "delete":
        return [f"dt.delete(predicate={lit(a['where'])})"]
    if p == "merge":
        lines = [
            f"source = rows_table({lit(a['source_rows'])}, {lit(a['source_columns'])})",
            f"m = dt.merge(source=source, predicate={lit(a['on'])}, source_alias='s', target_alias='t')",
        ]
        if a.get("when_matched_set"):
            lines.append(f"m = m.when_matched_update({lit(a['when_matched_set'])})")
        if a.get("insert_values"):
            lines.append(f"m = m.when_not_matched_insert({lit(a['insert_values'])})")
        return [*lines, "m.execute()"]
    if p == "insert_select":
        # delta-rs has no INSERT ... SELECT: the SELECT runs on this table
        # object's snapshot and a MERGE commits from that same snapshot.
        cols, on = a["columns"], " AND ".join(f"t.{c} = s.{c}" for c in a["match_on"])
        sql = a["select_sql"].replace("{table}", "t0")
        return [
            f"selected = QueryBuilder().register('t0', dt).execute({lit(sql)}).read_all()",
            f"source = select_columns(selected, {lit(cols)})",
            f"m = dt.merge(source=source, predicate={lit(on)}, source_alias='s', target_alias='t')",
            f"m.when_not_matched_insert({lit({c: f's.{c}' for c in cols})}).execute()",
        ]
    if p == "optimize":
        filters = (
            f"partition_filters={lit([list(f) for f in a['partition_filters']])}" if a.get("partition_filters") else ""
        )
        if a.get("zorder_by"):
            return [f"dt.optimize.z_order({lit(list(a['zorder_by']))}{', ' + filters if filters else ''})"]
        return [f"dt.optimize.compact({filters})"]
    if p == "count_then_merge":
        # INSERT ... SELECT count(*): the SELECT on this snapshot, then a MERGE
        # committing one row that carries the count, from the same snapshot.
        sql = a["count_sql"].replace("{table}", "t0")
        cols = a["columns"]
        return [
            f"count = QueryBuilder().register('t0', dt).execute({lit(sql)}).read_all().column('c').to_pylist()[0]",
            f"row = {lit(a['row'])}",
            f"row[{int(a['count_column'])}] = count",
            f"m = dt.merge(source=rows_table([row], {lit(cols)}), predicate={lit(a['on'])}, "
            "source_alias='s', target_alias='t')",
            f"m.when_not_matched_insert({lit({c: f's.{c}' for c in cols})}).execute()",
        ]
    if p == "set_properties":
        return [f"dt.alter.set_table_properties({lit(a['props'])})"]
    if p == "append_idempotent":
        return [
            f"if (dt.transaction_version({lit(a['app_id'])}) or -1) < {int(a['txn_version'])}:",
            f"    write_deltalake(dt, rows_table({lit(a['rows'])}), mode='append', commit_properties="
            f"CommitProperties(app_transactions=[Transaction({lit(a['app_id'])}, {int(a['txn_version'])})]))",
        ]
    if p == "read":
        return ["table_rows(dt)"]
    return [f"raise NotImplementedError({lit(p + ' has no standalone form yet')})"]


def deltars_script(
    schedule: Schedule,
    calls: dict[str, list[dict[str, Any]]],
    run_dir: str = "",
    expect: dict[str, str] | None = None,
) -> str:
    """The script of a delta-rs schedule; `calls` are the primitive calls each
    transaction made in the replay (Attempt.calls). `expect` names what the
    spec says of a transaction's outcome ("fail": it must conflict; "commit":
    it cannot): checked besides the table."""
    cols = schedule.table.get("columns") or []
    schema = [(n, _ARROW.get(str(t).upper(), "string")) for n, t in cols]
    version = schedule.engine_versions.get("deltalake", "")
    a = schedule.anomaly
    txns = [t for t in schedule.txns if t.f != "read"]
    steps = [(k, t.op_id) for k, t in schedule.events() if t.f != "read"]
    level = schedule.isolation or "Serializable"
    claim = f"spec {a['claim']}" if a.get("claim") else "no spec claim"
    out = [
        "#!/usr/bin/env python3",
        f'"""Standalone reproduction: {a.get("kind")} ({claim}) on delta-rs'
        f"{' ' + version if version else ''}, {level} isolation.",
        "",
        "Emitted by delta-jepsen `reproduce`"
        + (f" from {run_dir.rsplit('/', 1)[-1]}" if run_dir else "")
        + f". Needs only `pip install deltalake{'==' + version if version else ''}`.",
        "Run: python reproduce.py   (exit 1: the anomaly showed; 0: it did not; 3: it needs a fault, named)",
        "",
        "Each transaction runs on its own DeltaTable object, loaded at the step",
        "'snapshot' below and never refreshed, so delta-rs checks its commit",
        "against everything committed since: concurrent transactions, in a fixed",
        "order. Then the transactions that committed run again one after another",
        "on a fresh table: the serial outcomes the spec allows.",
        '"""',
        "",
        "import collections",
        "import itertools",
        "import sys",
        "import tempfile",
        "",
        "import arro3.core as ac",
        "from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction, write_deltalake",
        "",
        f"SCHEMA = {lit(schema)}",
        f"PARTITION_BY = {lit(list(schema_partition(schedule)))}",
        f"PROPERTIES = {lit(table_properties(schedule))}",
        f"LEVEL = {lit(level)}",
        "# A storage fault the schedule needs, which this script cannot apply by itself.",
        f"FAULT = {lit(describe_fault(schedule.fault) if schedule.fault else None)}",
        "# What the spec says of a transaction's own outcome, where it says it.",
        f"EXPECT = {lit(expect or {})}",
        "# The table the transactions start from: one commit per list.",
        f"SETUP = {lit(schedule.setup)}",
        "",
        "",
        "def rows_table(rows, names=None):",
        "    names = names or [n for n, _ in SCHEMA]",
        "    types = dict(SCHEMA)",
        "    cols = {n: ac.Array([r[i] for r in rows], getattr(ac.DataType, types.get(n, 'string'))())",
        "            for i, n in enumerate(names)}",
        "    return ac.Table.from_pydict(cols)",
        "",
        "",
        "def select_columns(table, names):",
        "    return ac.Table.from_pydict({n: table.column(n) for n in names})",
        "",
        "",
        "def table_rows(dt):",
        "    names = [n for n, _ in SCHEMA]",
        "    t = QueryBuilder().register('t', dt).execute(f\"SELECT {', '.join(names)} FROM t\").read_all()",
        "    return sorted(zip(*(t.column(n).to_pylist() for n in names)), key=repr)",
        "",
        "",
        "def create(path):",
        "    schema = ac.Schema([ac.Field(n, getattr(ac.DataType, t)(), nullable=True) for n, t in SCHEMA])",
        "    DeltaTable.create(path, schema, partition_by=PARTITION_BY or None, configuration=PROPERTIES or None)",
        "    for rows in SETUP:",
        "        write_deltalake(path, rows_table(rows), mode='append')",
        "",
    ]
    for t in txns:
        out += ["", f"def {_fn(t.op_id)}(dt):", f'    """{t.op_id}: {t.f} {lit(t.value)[:100]}"""']
        body = [line for c in calls.get(t.op_id, []) for line in _call(c)]
        out += ["    " + line for line in (body or ["pass  # the replay made no engine call"])]
    out += [
        "",
        "",
        f"TXNS = {{{', '.join(f'{t.op_id!r}: {_fn(t.op_id)}' for t in txns)}}}",
        "# The schedule: when each transaction takes its snapshot, and when it commits.",
        f"STEPS = {lit(steps)}",
        "",
        "",
        "def concurrent(path):",
        "    create(path)",
        "    snapshots, outcome = {}, {}",
        "    for step, op in STEPS:",
        f"        if step == {PIN!r}:",
        "            snapshots[op] = DeltaTable(path)",
        "            print(f'  {op} takes its snapshot at version {snapshots[op].version()}')",
        "            continue",
        "        try:",
        "            TXNS[op](snapshots[op])",
        "            outcome[op] = 'committed'",
        "        except Exception as e:  # a conflict is an outcome, not an error of this script",
        "            outcome[op] = f'failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}'",
        "        print(f'  {op} {outcome[op]}')",
        "    return outcome, table_rows(DeltaTable(path))",
        "",
        "",
        "def serial(path, order):",
        "    create(path)",
        "    for op in order:",
        "        TXNS[op](DeltaTable(path))",
        "    return table_rows(DeltaTable(path))",
        "",
        "",
        "def main():",
        "    if FAULT:",
        "        print(f'not run: this anomaly needs a storage fault: {FAULT}.')",
        "        print('On a local table or a store that honours put-if-absent it cannot happen; '",
        "              'REPORT.md says how delta-jepsen applied the fault and what it saw.')",
        "        return 3",
        "    with tempfile.TemporaryDirectory() as tmp:",
        "        print(f'delta-rs, {LEVEL} isolation, {len(SETUP)} setup commit(s); the schedule:')",
        "        outcome, observed = concurrent(f'{tmp}/concurrent')",
        f"        committed = [op for step, op in STEPS if step == {COMMIT!r} and outcome[op] == 'committed']",
        "        # Serializable: the commit order is the serial order (C14); WriteSerializable: allow any order.",
        "        orders = [committed] if LEVEL == 'Serializable' else list(itertools.permutations(committed))",
        "        expected = {}",
        "        for i, order in enumerate(orders):",
        "            expected[tuple(order)] = serial(f'{tmp}/serial-{i}', order)",
        "    print(f'observed: {len(observed)} row(s) after the concurrent schedule')",
        "    for order, rows in expected.items():",
        "        names = ', '.join(order) or 'nothing'",
        "        print(f'expected: {len(rows)} row(s) after running {names} one after another')",
        "    wrong = [(op, want, outcome[op]) for op, want in EXPECT.items()",
        "             if (want == 'fail') == (outcome.get(op) == 'committed')]",
        "    for op, want, got in wrong:",
        '        print(f\'REPRODUCED: {op} must {"conflict" if want == "fail" else "commit"} here; it {got}\')',
        "    if observed in expected.values():",
        "        if wrong:",
        "            return 1",
        "        print('not reproduced: the concurrent outcome equals a serial one')",
        "        return 0",
        "    print('REPRODUCED: no serial order gives the observed table')",
        "    for order, rows in list(expected.items())[:6]:",
        "        extra = list((collections.Counter(observed) - collections.Counter(rows)).elements())",
        "        missing = list((collections.Counter(rows) - collections.Counter(observed)).elements())",
        "        print(f\"  against {', '.join(order) or 'nothing'}: {len(extra)} row(s) not expected, \"",
        "              f'{len(missing)} expected row(s) missing')",
        "        for r in extra[:5]:",
        "            print(f'    unexpected row {r}')",
        "        for r in missing[:5]:",
        "            print(f'    missing row {r}')",
        "    return 1",
        "",
        "",
        "if __name__ == '__main__':",
        "    sys.exit(main())",
        "",
    ]
    return "\n".join(out)


def schema_partition(schedule: Schedule) -> list[str]:
    return list(schedule.table.get("partition_by") or [])


def table_properties(schedule: Schedule) -> dict[str, str]:
    props = dict(schedule.table.get("properties") or {})
    if schedule.isolation:
        props["delta.isolationLevel"] = schedule.isolation
    return props
