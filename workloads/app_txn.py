"""`app-txn`: idempotent writes tagged with an application transaction
(``txn`` action: app id + version), spec E5.

Every write is a blind append carrying (app_id, txn_version). Apps are
shared: slot s writes as ``app-<s mod APPS>``, so with 4 clients two writers
share each app id and race on it (E5: concurrent writers with one app id
must conflict). Versions come from the generator, ``seq * TXN_STRIDE +
slot``: increasing per slot and unique across slots, so a writer that lags
behind the other writer of its app is (rightly) skipped.

Some writes deliberately RETRY one of the slot's earlier writes: the same
app id, version and row ids re-sent (value ``"retry_of": <op id>``), as a
client does after a timeout. A retry must not apply when its pair is
already committed. Its rows carry the retry's own op id in ``writer`` (every
row names the op that wrote it), so a retry that applied twice shows as row
ids in the table twice. Rows also carry ``app`` and ``txn``: the data alone
says which (app, version) wrote them.

Idempotent writes are not checked by ``durability``: an acknowledged write
that was skipped wrote nothing, legitimately. The ``app-txn`` checker judges
their durability instead (a skip is legitimate only when a version at least
as new was committed for the app).
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload

APPS = 2
TXN_STRIDE = 1000  # slots < TXN_STRIDE keep versions unique across slots
MAX_BATCH = 3
READ_FRACTION = 0.2
RETRY_FRACTION = 0.2
RETRY_WINDOW = 5  # a retry re-sends one of the slot's last few writes


def app_of(slot: int) -> str:
    return f"app-{slot % APPS}"


class AppTxnWorkload(Workload):
    name = "app-txn"
    checkers = ("log-sanity", "atomicity", "duplicates", "read-validity", "app-txn")
    primitives = {"write": "append-idempotent", "read": "read"}

    def __init__(self, seed: int, isolation: str | None = None):
        super().__init__(seed, isolation)
        # slot -> its recent writes (op id, value): what a retry re-sends.
        self._recent: dict[Any, list[tuple[str, dict[str, Any]]]] = {}

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column("id", "BIGINT"),
                Column("app", "STRING"),
                Column("txn", "BIGINT"),
                Column("writer", "STRING"),
            ),
            properties=self.properties(),
        )

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        slot = gen.slot if isinstance(gen.slot, int) else 0
        recent = self._recent.setdefault(gen.slot, [])
        r = gen.rng.random()
        if r < READ_FRACTION:
            return self.read_op(gen, op_id)
        if recent and r < READ_FRACTION + RETRY_FRACTION:
            orig_id, orig = gen.rng.choice(recent)
            return OpSpec(
                "write",
                op_id,
                {
                    "app_id": orig["app_id"],
                    "txn_version": orig["txn_version"],
                    "ids": list(orig["ids"]),
                    "retry_of": orig_id,
                },
            )
        n = gen.rng.randint(1, MAX_BATCH)
        value = {
            "app_id": app_of(slot),
            "txn_version": gen.seq * TXN_STRIDE + slot,
            "ids": [row_id(slot + 1, gen.seq, j) for j in range(n)],
        }
        recent.append((op_id, value))
        del recent[:-RETRY_WINDOW]
        return OpSpec("write", op_id, value)

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f, op_id = op["value"], op["f"], op["id"]
        if f == "write":
            app, txn = str(value["app_id"]), int(value["txn_version"])
            rows = [(i, app, txn, op_id) for i in value["ids"]]
            res = client.append_idempotent(rows, table, app, txn, op_id)
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            return self.read_ids(client, value)
        raise ValueError(f"app-txn workload has no op {f!r}")
