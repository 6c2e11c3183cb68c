"""The engine contract: every engine the harness starts, on local
and S3 storage, runs the primitive ops it declares, and each op is checked
against the table's own log, read without the engine: one new version per
write, the rows the op should leave, the versions the engine reports.

A new engine in harness.engines.ENGINE_NAMES gets this suite for free
(spark-connect starts nothing: it needs endpoints, see test_remote_engine).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.core.storage import Storage
from harness.core.table import Column, TableSpec
from harness.deltalog import read_log
from harness.engines import ENGINE_NAMES, REMOTE_ENGINES, make_client, make_engine
from harness.engines.base import EngineClient, OpResult
from harness.run.storage import open_storage

TABLE = TableSpec((Column("id", "BIGINT"), Column("v", "BIGINT"), Column("writer", "STRING")))
COLS = TABLE.column_names()
ENGINES = [e for e in ENGINE_NAMES if e not in REMOTE_ENGINES]
NODE_TIMEOUT = 240.0
OP_TIMEOUT = 120.0


class Contract:
    """One client on a fresh table, and the rows every op should leave."""

    def __init__(self, client: EngineClient, storage: Storage, uri: str):
        self.client, self.storage, self.uri = client, storage, uri
        self.rows: dict[int, tuple[int, str]] = {}
        self.version = -1
        self.caps = client.capabilities

    def log_rows(self) -> set[tuple]:
        log = read_log(self.uri, self.storage.reader_options())
        assert log.problems == [], log.problems
        assert log.latest_version == self.version, f"log at {log.latest_version}, expected {self.version}"
        table = log.rows_at(self.version, COLS)
        return set(zip(*(table.column(c).to_pylist() for c in COLS), strict=True))

    def expected(self) -> set[tuple]:
        return {(i, v, w) for i, (v, w) in self.rows.items()}

    def committed(self, res: OpResult, what: str) -> None:
        """A write committed exactly one version, holding exactly the rows expected."""
        self.version += 1
        if self.caps.commit_version_known:
            assert res.version == self.version, f"{what}: engine said version {res.version}"
        assert self.log_rows() == self.expected(), what


@pytest.fixture(scope="module", params=[(e, s) for e in ENGINES for s in ("local", "s3")], ids=lambda p: "-".join(p))
def node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Any, Storage]]:
    engine_name, kind = request.param
    root = tmp_path_factory.mktemp(f"{engine_name}-{kind}")
    (root / "logs").mkdir()
    storage = open_storage(kind, root)
    engine = make_engine(engine_name)
    try:
        (n,) = engine.start_nodes(1, storage, root / "logs", NODE_TIMEOUT)
        yield engine, n, storage
    finally:
        engine.stop_nodes()
        storage.stop()


@pytest.mark.integration
def test_every_declared_op_does_what_the_log_shows(node: tuple[Any, Any, Storage]) -> None:
    engine, n, storage = node
    uri = storage.table_uri("contract")
    client = make_client(engine.client_config(n, 1, storage, uri, OP_TIMEOUT))
    client.open()
    try:
        c = Contract(client, storage, uri)
        ops = c.caps.ops
        assert {"create-table", "append", "read"} <= ops

        c.committed(client.create_table(TABLE), "create-table")
        meta = read_log(uri, storage.reader_options()).commits[0].metadata
        assert meta is not None, "version 0 carries no metaData"
        assert [f["name"] for f in json.loads(meta["schemaString"])["fields"]] == COLS

        res = client.append([(1, 10, "a"), (2, 20, "a")], TABLE, "sql", "a")
        c.rows.update({1: (10, "a"), 2: (20, "a")})
        c.committed(res, "append via SQL")
        # A time after one commit and more than a second before the next: a
        # store that keeps file times to the second resolves it alike.
        between, rows_then = int(time.time() * 1000), c.expected()
        time.sleep(1.1)
        res = client.append([(3, 30, "b")], TABLE, "dataframe", "b")
        c.rows[3] = (30, "b")
        c.committed(res, "append via the DataFrame API")
        if "read-as-of-time" in ops:
            for via in ("dataframe", "sql"):
                then = client.read_as_of_time(COLS, between, via)
                assert set(then.value) == rows_then, f"read as of a time via {via}"
                assert then.version in (None, 1), f"read as of a time via {via} named version {then.version}"

        for via in ("dataframe", "sql"):
            read = client.read(COLS, via)
            assert set(read.value) == c.expected(), f"read via {via}"
            if c.caps.read_version_known:
                assert read.version == c.version, f"read via {via} named version {read.version}"

        if "update" in ops:
            res = client.update("id = 1", {"v": "v + 1", "writer": "'c'"}, "c")
            c.rows[1] = (11, "c")
            c.committed(res, "update")
        if "delete" in ops:
            res = client.delete("id = 2", "d")
            del c.rows[2]
            c.committed(res, "delete")
        if "merge" in ops:
            res = client.merge(
                [(3, 33, "e"), (4, 40, "e")],
                COLS,
                "t.id = s.id",
                {"v": "s.v", "writer": "s.writer"},
                {col: f"s.{col}" for col in COLS},
                "e",
            )
            c.rows.update({3: (33, "e"), 4: (40, "e")})
            c.committed(res, "merge")
        assert set(client.read(COLS).value) == c.expected() == c.log_rows()
    finally:
        client.close()
