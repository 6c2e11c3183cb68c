"""What each deltalake release calls each op: one table, from the oldest
release the harness drives (0.8.1) to the pinned one.

The Python API grew by steps: optimize (0.9, a method; an object from 0.10),
DELETE/UPDATE/MERGE (0.12), ``DeltaTable.create`` (0.14), custom commit
metadata (0.15 as ``custom_metadata=``, 0.20 as ``CommitProperties``),
``alter.add_columns`` (0.19), app transactions (0.21), SQL queries through
``QueryBuilder`` (0.22), and from 1.0 a write leaves its table object at the
version it committed. Found by installing each minor series' last release
and reading its signatures. An op a release lacks is not in its
capabilities: the worker answers it ``unsupported``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OLDEST = "0.8.1"

# feature -> the first release that has it
SINCE: dict[str, tuple[int, ...]] = {
    "optimize-method": (0, 9, 0),
    "optimize": (0, 10, 0),  # dt.optimize.compact() and .z_order()
    "dml": (0, 12, 0),  # DeltaTable.delete / update / merge
    "create": (0, 14, 0),
    "create-commit-properties": (1, 0, 0),  # 0.15-0.25's create takes custom_metadata only
    "custom-metadata": (0, 15, 0),
    "set-properties": (0, 18, 0),  # alter.set_table_properties (known delta.* keys only)
    "add-columns": (0, 19, 0),
    "commit-properties": (0, 20, 0),
    "app-transactions": (0, 21, 0),
    "query-builder": (0, 22, 0),
    "exact-commit-version": (1, 0, 0),
    "transaction-version": (1, 0, 0),  # transaction_version(app_id); before: transaction_versions()
    # vacuum(full=, commit_properties=), restore(commit_properties=),
    # load_as_version, create_checkpoint as the pinned release calls them;
    # older releases are not yet driven through them.
    "maintenance": (1, 0, 0),
}


def parse_release(text: str) -> tuple[int, ...]:
    """'0.15.3' -> (0, 15, 3); pre-release suffixes are ignored."""
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise ValueError(f"not a release number: {text!r}")
    return tuple(int(g or 0) for g in m.groups())


@dataclass(frozen=True)
class DeltaRsApi:
    release: tuple[int, ...]

    @classmethod
    def of(cls, release: str) -> DeltaRsApi:
        return cls(parse_release(release))

    def has(self, feature: str) -> bool:
        return self.release >= SINCE[feature]

    @property
    def ops(self) -> frozenset[str]:
        ops = {"create-table", "create-table-at", "append", "read", "overwrite"}
        if self.has("optimize-method"):
            ops.add("optimize")
        if self.has("dml"):
            ops |= {"update", "delete", "merge"}
        if self.has("dml") and self.has("query-builder"):
            ops.add("insert_select")
        if self.has("query-builder"):
            ops.add("read-tables")
        if self.has("add-columns"):
            ops.add("add-columns")
        if self.has("set-properties"):
            ops.add("set-properties")
        if self.has("app-transactions"):
            ops.add("append-idempotent")
        if self.has("maintenance"):
            ops |= {"read-as-of", "read-as-of-time", "restore", "vacuum", "checkpoint", "cleanup"}
        return frozenset(ops)

    @property
    def write_refreshes(self) -> bool:
        """0.9 to 1.0 move the table object given to write_deltalake to the
        newest version before writing ("We need to write against the latest
        table version"): a read, then an overwrite through that object, is
        two transactions unless the object is held at the read snapshot."""
        return (0, 9, 0) <= self.release < (1, 1, 0)

    def metadata_kwargs(self, op_id: str, key: str) -> dict[str, object]:
        """How an op's id rides in its commit's commitInfo, where the release can."""
        if self.has("commit-properties"):
            from deltalake import CommitProperties

            return {"commit_properties": CommitProperties(custom_metadata={key: op_id})}
        if self.has("custom-metadata"):
            return {"custom_metadata": {key: op_id}}
        return {}
