"""The standalone script of a Sail conformance cell: pysail's own server,
PySpark's Connect client, a local table, SQL only.

Sail cannot pin a session's snapshot, so the script's control is an
explicit order in time: the loser's statement is made slow (its SELECT
sums a large `range`, which changes nothing it computes), started first,
and given a head start in which it reads the table; the winner then runs to
completion; the loser commits after it. Only a loser whose statement has a
SELECT can be slowed so (INSERT ... SELECT): for other cells there is no
script.
"""

from __future__ import annotations

from harness.core.table import TableSpec
from harness.engines.spark import sql_literal
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.rows import COLUMNS, OpPlan
from harness.repro.schedule import Schedule
from harness.repro.standalone import lit

# Rows the loser's SELECT sums: about 3.5 s of work here, where the
# winner's statement takes well under one.
SLOW_ROWS = 600_000_000
HEAD_START_S = 1.0

TABLE = "{table}"


def statement(plan: OpPlan) -> str | None:
    """The cell op as one SQL statement on `{table}`, as the Sail backend runs it."""
    cols = ", ".join(COLUMNS)
    k = plan.kind
    if k == C.INSERT:
        rows = ", ".join("(" + ", ".join(sql_literal(v) for v in r) + ")" for r in plan.new_rows())
        return f"INSERT INTO {TABLE} ({cols}) VALUES {rows}"
    if k == C.INSERT_SELECT:
        return f"INSERT INTO {TABLE} ({cols}) {plan.insert_select_sql(TABLE)}"
    if k == C.UPDATE:
        sets = ", ".join(f"{c} = {e}" for c, e in plan.assignments().items())
        return f"UPDATE {TABLE} SET {sets} WHERE {plan.where}"
    if k == C.DELETE:
        return f"DELETE FROM {TABLE} WHERE {plan.where}"
    if k == C.DELETE_ALL:
        return f"DELETE FROM {TABLE}"
    return None


def slow(sql: str | None) -> str | None:
    """An INSERT ... SELECT with its SELECT made slow, or None where the
    statement has no SELECT of the table to slow."""
    if sql is None or not sql.startswith(f"INSERT INTO {TABLE} ") or f"FROM {TABLE} WHERE " not in sql:
        return None
    # A scalar subquery, not a join with the table: an empty table would
    # end a join at once.
    return sql.replace(
        f"FROM {TABLE} WHERE ",
        f"FROM {TABLE} WHERE (SELECT SUM(id) FROM range({SLOW_ROWS})) >= 0 AND ",
        1,
    )


def slowed(plan: OpPlan) -> str | None:
    """The loser's statement with a slow SELECT, or None where it has none."""
    return slow(statement(plan)) if plan.kind == C.INSERT_SELECT else None


def sail_cell_script(schedule: Schedule, winner: OpPlan, loser: OpPlan, source: str = "") -> str | None:
    w_sql, l_sql = statement(winner), statement(loser)
    if w_sql is None or l_sql is None:
        return None
    return sail_pair_script(schedule, (winner.op_id, w_sql), (loser.op_id, l_sql), "Serializable", source)


def sail_schedule_script(schedule: Schedule, calls: dict[str, list[dict]], source: str = "") -> str | None:
    """The script of a replayed run schedule, where it is a pair the script
    can order in time: two transactions, each one SQL statement, the second
    to commit (an INSERT ... SELECT) having taken its snapshot before the
    first committed. None otherwise."""
    events = [(kind, t.op_id) for kind, t in schedule.events()]
    if len(schedule.txns) != 2 or [k for k, _ in events] != ["pin", "pin", "commit", "commit"]:
        return None
    winner, loser = events[2][1], events[3][1]
    sql = {op: [c["sql"] for c in calls.get(op, []) if "sql" in c] for op in (winner, loser)}
    if any(len(v) != 1 for v in sql.values()):
        return None
    level = schedule.isolation or str(schedule.declaration.get("default_isolation") or "WriteSerializable")
    return sail_pair_script(schedule, (winner, sql[winner][0]), (loser, sql[loser][0]), level, source)


def sail_pair_script(
    schedule: Schedule, winner: tuple[str, str], loser: tuple[str, str], level: str, source: str = ""
) -> str | None:
    (w_id, w_sql), (l_id, l_sql) = winner, loser
    l_slow = slow(l_sql)
    if l_slow is None:
        return None
    table = TableSpec.from_json(schedule.table)
    cols = ", ".join(f"{c.name} {c.type}" for c in table.columns)
    version = schedule.engine_versions.get("pysail", "")
    # pyspark-client (the Connect client alone) has its own patch releases:
    # the same minor version as the run's pyspark.
    client = ".".join(schedule.engine_versions.get("pyspark", "").split(".")[:2] + ["0"])
    client = client if client != "0" else ""
    # pyspark-client is published from Spark 4.0; before it, the client is
    # pyspark with its connect extra.
    client_pkg = "pyspark-client" if not client or int(client.split(".")[0]) >= 4 else "pyspark[connect]"
    a = schedule.anomaly
    level = schedule.isolation or level
    props = dict(table.properties)
    return "\n".join(
        [
            "#!/usr/bin/env python3",
            f'"""Standalone reproduction: {a.get("explanation", "")[:160]}',
            "",
            f"Sail{' ' + version if version else ''}, {level} isolation. Emitted by delta-jepsen `reproduce`"
            + (f" from {source.rsplit('/', 1)[-1]}" if source else "")
            + f". Needs only `pip install pysail{'==' + version if version else ''} "
            + f"{client_pkg}{'~=' + client if client else ''}`.",
            "Run: python reproduce.py   (exit 1: the anomaly showed; 0: it did not; 3: the order did not take)",
            "",
            "Sail cannot pin a snapshot, so the order is made in time: the loser's",
            "statement has a slow SELECT (it sums a large range, which changes",
            "nothing it computes) and a head start, the winner runs to completion",
            "meanwhile, and the loser commits after it. Then both run one after",
            "another on fresh tables: the serial outcomes the spec allows.",
            '"""',
            "",
            "import collections",
            "import os",
            "import sys",
            "import tempfile",
            "import threading",
            "import time",
            "",
            "from pyspark.sql import SparkSession",
            "from pysail.spark import SparkConnectServer",
            "",
            f"COLUMNS = {lit(cols)}",
            f"PARTITION_BY = {lit(list(table.partition_by))}",
            f"PROPERTIES = {lit(props)}",
            f"LEVEL = {lit(level)}",
            f"SETUP = {lit(schedule.setup)}",
            f"WINNER, LOSER = {lit(w_id)}, {lit(l_id)}",
            f"WINNER_SQL = {lit(w_sql)}",
            f"LOSER_SQL = {lit(l_sql)}",
            f"LOSER_SLOW_SQL = {lit(l_slow)}",
            f"HEAD_START_S = {HEAD_START_S}",
            "",
            "",
            "def literal(v):",
            "    if v is None:",
            "        return 'NULL'",
            '    return repr(v) if isinstance(v, (int, float)) else "\'" + str(v).replace("\'", "\\\\\'") + "\'"',
            "",
            "",
            "def create(spark, name, path):",
            "    stmt = f'CREATE TABLE {name} ({COLUMNS}) USING delta'",
            "    if PARTITION_BY:",
            "        stmt += f\" PARTITIONED BY ({', '.join(PARTITION_BY)})\"",
            "    stmt += f\" LOCATION '{path}'\"",
            "    if PROPERTIES:",
            "        stmt += ' TBLPROPERTIES (' + ', '.join(f\"'{k}' = '{v}'\" for k, v in PROPERTIES.items()) + ')'",
            "    spark.sql(stmt)",
            "    for rows in SETUP:",
            "        values = ', '.join('(' + ', '.join(literal(v) for v in r) + ')' for r in rows)",
            "        spark.sql(f'INSERT INTO {name} VALUES {values}')",
            "",
            "",
            "def rows(spark, name):",
            "    return sorted((tuple(r) for r in spark.sql(f'SELECT * FROM {name}').collect()), key=repr)",
            "",
            "",
            "def attempt(spark, sql, name, outcome, op):",
            "    try:",
            "        spark.sql(sql.format(table=name)).collect()",
            "        outcome[op] = 'committed'",
            "    except Exception as e:  # a conflict is an outcome, not an error of this script",
            "        outcome[op] = f'failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}'",
            "    outcome[op + ' done'] = time.monotonic()",
            "",
            "",
            "def main():",
            "    server = SparkConnectServer(ip='127.0.0.1', port=0)",
            "    server.start(background=True)",
            "    try:",
            "        host, port = server.listening_address",
            "        spark = SparkSession.builder.remote(f'sc://{host}:{port}').getOrCreate()",
            "        with tempfile.TemporaryDirectory() as tmp:",
            "            create(spark, 'concurrent', f'{tmp}/concurrent')",
            "            outcome = {}",
            "            args = (spark, LOSER_SLOW_SQL, 'concurrent', outcome, LOSER)",
            "            # A daemon: a loser still waiting on the server when it stops must not hold the exit.",
            "            loser = threading.Thread(target=attempt, args=args, daemon=True)",
            "            loser.start()",
            "            time.sleep(HEAD_START_S)  # the loser has read the table and is computing",
            "            attempt(spark, WINNER_SQL, 'concurrent', outcome, WINNER)",
            "            print(f'  {WINNER} (winner) {outcome[WINNER]}', flush=True)",
            "            loser.join(120)",
            "            print(f'  {LOSER} (loser, started first, committing last) {outcome.get(LOSER)}')",
            "            if outcome.get(LOSER + ' done', 0) < outcome[WINNER + ' done']:",
            "                print('uncontrolled: the loser finished first (a loaded machine?); run again')",
            "                return 3",
            "            observed = rows(spark, 'concurrent')",
            "            committed = [op for op in (WINNER, LOSER) if outcome.get(op) == 'committed']",
            "            sql = {WINNER: WINNER_SQL, LOSER: LOSER_SQL}",
            "            orders = [committed] if LEVEL == 'Serializable' else [committed, committed[::-1]]",
            "            expected = {}",
            "            for i, order in enumerate(orders):",
            "                create(spark, f'serial{i}', f'{tmp}/serial{i}')",
            "                for op in order:",
            "                    spark.sql(sql[op].format(table=f'serial{i}')).collect()",
            "                expected[tuple(order)] = rows(spark, f'serial{i}')",
            "    finally:",
            "        server.stop()",
            "    print(f'observed: {observed}')",
            "    for order, r in expected.items():",
            "        print(f\"expected after {', '.join(order) or 'nothing'} one after another: {r}\")",
            "    if observed in expected.values():",
            "        print('not reproduced: the concurrent outcome equals a serial one')",
            "        return 0",
            "    print('REPRODUCED: no serial order gives the observed table')",
            "    for order, r in expected.items():",
            "        extra = list((collections.Counter(observed) - collections.Counter(r)).elements())",
            "        missing = list((collections.Counter(r) - collections.Counter(observed)).elements())",
            "        print(f\"  against {', '.join(order)}: unexpected {extra}, missing {missing}\")",
            "    return 1",
            "",
            "",
            "if __name__ == '__main__':",
            "    code = main()",
            "    sys.stdout.flush()",
            "    os._exit(code)  # a client thread still waiting on the stopped server must not hold the exit",
            "",
        ]
    )
