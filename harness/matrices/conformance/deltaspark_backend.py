"""Run conformance cells on delta-spark: two Spark Connect JVMs (the winner
on n1, the loser on n2) on embedded S3 behind the fault proxy.

delta-spark's default LogStore for s3a makes a commit by checking that
`_delta_log/<v>.json` does not exist, then writing it (no put-if-absent on
the store). Holding the loser's commit PUT would therefore let it overwrite
the winner's commit when released. The hold is one step earlier: the
loser's existence check (HEAD) of version v0+1 waits until the winner has
committed v0+1, then goes on and finds it. delta-spark then takes the path
it takes for every lost race (FileAlreadyExistsException): it runs its
conflict checker against v0+1 and commits v0+2 or fails. Verified per cell:
the held request was the HEAD of version v0+1, it found the winner's commit
(200), the winner's commit is v0+1 (its userMetadata), and the loser's
commit, if any, is v0+2; otherwise the cell is uncontrolled.

OPTIMIZE takes a lost race its own way: on a conflict it starts a new
transaction on the latest snapshot and commits its files again if they are
all still there. What the loser's JVM logged during the cell (its commit
attempts, each under its own txnId) is kept with the cell, beside what its
commit says it read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.core.history import ErrorClass
from harness.core.table import TableSpec
from harness.engines.deltaspark import DELTA_SPARK_CAPABILITIES, DeltaSparkEngine
from harness.engines.spark import DeltaSparkClient
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.rows import APP_ID, OpPlan, table_spec
from harness.matrices.conformance.sail_backend import LOSER, NODE_TIMEOUT_S, SailBackend
from harness.matrices.conformance.verdict import UNSUPPORTED, Observation, TxnResult
from harness.run.storage import open_storage

# The loggers whose lines say what a commit attempt did (LOG4J2 in
# harness/engines/deltaspark.py keeps OptimisticTransaction's at INFO, and
# every logger's warnings).
_COMMIT_LOGGERS = (" OptimisticTransaction: ", " OptimizeExecutor: ")
_MAX_LOG_LINES = 20


def _bucket_key(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return bucket, key.rstrip("/")


class _Borrowed(DeltaSparkClient):
    """A cell's view of a node's long-lived session: closing it keeps the
    session (opening one per cell would cost more than the cell)."""

    def close(self) -> None:
        pass


class DeltaSparkBackend(SailBackend):
    default_isolation = DELTA_SPARK_CAPABILITIES.default_isolation
    # The loser's existence check of v0+1, released once the winner has
    # committed it: it must find the file (200). No pin: after the release
    # the loser must read v0+1 for its conflict check.
    held_request = "existence check"
    hold_target = {"method": "HEAD"}
    hold_version_filter = True
    release_status = 200
    pin_loser = False
    commits_name_op = True  # userMetadata: the log must name the winner's and the loser's op

    def __init__(self, release: str | None = None) -> None:
        self.storage: Any = None
        self.engine = DeltaSparkEngine(release=release)
        self.sessions: dict[str, DeltaSparkClient] = {}
        # Table properties the engine refused at creation -> its answer.
        self.refused: dict[tuple[tuple[str, str], ...], str | None] = {}
        # (partition columns, properties) -> the template table's uri.
        self.templates: dict[tuple[Any, ...], str] = {}
        self._s3: Any = None  # the client that copies templates

    def close(self) -> None:
        for c in self.sessions.values():
            c.close()
        self.sessions.clear()
        super().close()

    def _start(self, run_dir: Path) -> None:
        self.storage = open_storage("s3", run_dir, proxy=True, prefix="conformance/")
        try:
            self.nodes = {
                n.name: n for n in self.engine.start_nodes(2, self.storage, run_dir / "logs", NODE_TIMEOUT_S * 3)
            }
        except BaseException:
            self.storage.stop()
            raise
        self.proxy = self.storage.proxy

    def _client(self, node: str, uri: str) -> DeltaSparkClient:  # type: ignore[override]
        cfg = self.engine.client_config(self.nodes[node], node, self.storage, uri, 30.0)
        if node not in self.sessions:
            self.sessions[node] = DeltaSparkClient(cfg, "delta-spark", DELTA_SPARK_CAPABILITIES)
            self.sessions[node].open()
        c = _Borrowed(cfg, "delta-spark", DELTA_SPARK_CAPABILITIES)
        c.spark = self.sessions[node].spark
        return c

    def _refusal(self, cell: C.Cell, uri: str) -> str | None:
        """Whether the engine refuses to create the cell's table at all (its
        level or features): probed once per set of table properties, and
        every cell that needs such a table is then unsupported."""
        table = table_spec(cell)
        if table.properties not in self.refused:
            probe = self._client("n1", f"{uri}-probe")
            try:
                probe.create_table(table)
                self.refused[table.properties] = None
            except Exception as exc:  # noqa: BLE001 - the refusal is the observation
                self.refused[table.properties] = probe.classify(exc).raw
        return self.refused[table.properties]

    def run_cell(self, cell: C.Cell, root: Path) -> Observation:
        t0 = time.monotonic()
        if self.storage is None:
            self._start(root.parent)
        uri = self.storage.table_uri(cell.id.replace("/", "__").replace(">", "-then-").replace("+", "-"))
        refusal = self._refusal(cell, uri)
        if refusal is not None:
            r = TxnResult(
                UNSUPPORTED,
                ErrorClass.UNSUPPORTED.value,
                f"delta-spark refused to create the cell's table ({dict(table_spec(cell).properties)}): {refusal}",
            )
            return Observation(r, r, True)
        log_path, start = self._log_end(LOSER)
        obs = self._run_create(cell, uri) if cell.winner == C.CREATE else self._run_pair(cell, uri)
        obs.loser_engine_log = self._commit_lines(log_path, start)
        obs.table, obs.seconds = uri, round(time.monotonic() - t0, 3)
        return obs

    def _log_end(self, node: str) -> tuple[Path | None, int]:
        log = self.nodes[node].log
        path = Path(log) if log else None
        return path, (path.stat().st_size if path is not None and path.exists() else 0)

    @staticmethod
    def _commit_lines(path: Path | None, start: int) -> list[str]:
        """The commit lines a node logged since `start`. A worker runs one
        cell at a time and only the loser runs on its node, so they are the
        loser's."""
        if path is None or not path.exists():
            return []
        with open(path, "rb") as fh:
            fh.seek(start)
            text = fh.read().decode(errors="replace")
        lines = [line.strip()[:400] for line in text.splitlines() if any(k in line for k in _COMMIT_LOGGERS)]
        return lines[:_MAX_LOG_LINES]

    @staticmethod
    def execute(client: DeltaSparkClient, plan: OpPlan, table: TableSpec) -> None:  # type: ignore[override]
        """The ops Sail lacks; every other op as Sail's backend runs it."""
        k, op_id = plan.kind, plan.op_id
        if k == C.APP_TXN:
            client.append_idempotent(plan.new_rows(), table, APP_ID, 1, op_id)
        elif k in (C.OPTIMIZE, C.ZORDER):
            # OPTIMIZE ... WHERE p = '<part>' confines it to one partition (P1).
            client._tag(op_id)
            stmt = f"OPTIMIZE {client.table_ref}" + (f" WHERE p = '{plan.part}'" if plan.partitioned else "")
            client._sql(stmt + (" ZORDER BY (k)" if k == C.ZORDER else ""))
        elif k == C.ADD_COLUMNS:
            client.add_columns([plan.column()], op_id)
        else:
            SailBackend.execute(client, plan, table)

    def _setup_table(self, client: DeltaSparkClient, table: TableSpec, uri: str) -> None:  # type: ignore[override]
        """Copy the cell's starting table from a template made once per set of
        table properties and layout. A delta-spark commit on the embedded
        store costs ~100 S3 requests; the setup's three commits were most of
        a cell. The copy is byte for byte (its log names data files by
        relative path), so the cell starts from what delta-spark wrote."""
        key = (table.partition_by, table.properties)
        if key not in self.templates:
            template = self.storage.table_uri(f"template-{len(self.templates)}")
            super()._setup_table(client.at(template), table, template)
            self.templates[key] = template
        if self._s3 is None:
            self._s3 = self.storage.boto3_client()
        s3 = self._s3
        src_bucket, src_prefix = _bucket_key(self.templates[key])
        dst_bucket, dst_prefix = _bucket_key(uri)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=src_bucket, Prefix=src_prefix + "/")
        for page in pages:
            for obj in page.get("Contents", []):
                s3.copy_object(
                    Bucket=dst_bucket,
                    Key=dst_prefix + obj["Key"][len(src_prefix) :],
                    CopySource={"Bucket": src_bucket, "Key": obj["Key"]},
                )
