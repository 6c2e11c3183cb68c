"""Whether a run stays inside its engines' and its store's documented
contract, and what follows when it does not.

Delta's guarantees are conditional: on S3 they hold for the commit
protocol an engine documents as safe for how the table is shared. A run
configured outside that (two clusters on a single-driver LogStore, a fault
that strips put-if-absent, engines sharing a table through different commit
primitives) can lose commits with no engine defect. Such a run still fails
(exit 1: the guarantee did not hold), but every place that reports it says
"outside contract: <why>", so that nobody reads it as an engine's bug.

A :class:`Breach` is one reason, with the anomaly kinds it explains. The
rules read only what spec.json records, so a stored run is judged the same
way when it is checked again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# What a commit protocol without mutual exclusion across writers lets happen:
# a racer's commit replaces an acknowledged one, so that write is lost (C7);
# reads that saw it saw a state the log no longer has (C12); commits built on
# it replay against another state (wrong totals, broken list links, lost
# updates); two creators both win version 0 (E6); and the log need not be
# one serial history (C4, C11).
LOST_COMMIT_KINDS = frozenset(
    {
        "lost-write",
        "lost-rows",
        "wrong-commit-version",
        "load-never-visible",
        "lost-metadata-update",
        "lost-create",
        "lost-append",
        "multiple-creators",
        "table-recreated",
        "phantom-create",
        "read-version-mismatch",
        "state-never-existed",
        "read-state-never-existed",
        "G1a",
        "G-single",
        "wrong-total",
        "read-wrong-total",
        "list-gap",
        "broken-link",
        "duplicate-position",
        "log-gap",
        "log-missing-commit",
        "log-checkpoint-mismatch",
        "race-log-corrupt",
    }
)
# What a listing that misses new keys lets happen: a read of an older
# version, a writer that does not see its own commit and reports failure, a
# commit made on a stale snapshot.
STALE_LISTING_KINDS = frozenset({"stale-read", "failed-but-committed"}) | LOST_COMMIT_KINDS
# What readers that do not ask the commit coordinator miss: the ratified
# commits not yet backfilled, so their reads are stale and their writes race
# the coordinator's.
UNCOORDINATED_READER_KINDS = STALE_LISTING_KINDS

# Why HDFSLogStore on a local directory is safe for one JVM only: Delta needs
# a rename that fails when the target exists, and Hadoop's local rename
# checks, then renames over (delta-spark serializes the two inside its JVM).
LOCAL_RENAME = (
    "on the local file system Hadoop checks that the version is absent and then renames over it, "
    "two steps another process can come between"
)
SINGLE_DRIVER_NAMES = ("single-driver", "default")
COORDINATED = "coordinated"
# Workloads whose writers create the table (or tables) concurrently.
CREATE_RACE_WORKLOADS = ("create-race",)


@dataclass
class Breach:
    why: str  # one sentence, quoted wherever the run is reported
    explains: frozenset[str] = field(default_factory=frozenset)  # anomaly kinds it explains
    engines: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["explains"] = sorted(self.explains)
        d["engines"] = list(self.engines)
        return d


def engine_nodes(engines: list[str], nodes: int, name: str) -> int:
    """How many of a run's nodes run engine `name` (nodes are dealt to the
    engines in order, the first ones taking the remainder)."""
    if name not in engines:
        return 0
    count = max(nodes, len(engines))
    i = engines.index(name)
    return count // len(engines) + (i < count % len(engines))


AUTO_NODES = 0
DEFAULT_NODES = 2


def default_nodes(engine: str, storage: str) -> int:
    """The nodes a run starts when it names none: two, so that writers on
    two nodes race, except delta-spark alone on a local directory, where a
    second JVM takes the run outside HDFSLogStore's contract (LOCAL_RENAME).
    A count the run names stays, and is labelled where it leaves the contract."""
    return 1 if storage == "local" and _engine_names(engine) == ["delta-spark"] else DEFAULT_NODES


def _engine_names(engine: str) -> list[str]:
    """The engines of a run's --engine, without releases: an engine's
    release does not change its contract (delta-spark==3.3.2 is delta-spark)."""
    return [e.partition("==")[0].strip() for e in engine.split(",") if e.strip()]


def breaches(spec: dict[str, Any]) -> list[Breach]:
    """The ways the run spec.json describes leaves its engines' or store's
    documented contract (`spec`: spec.json's "spec" object)."""
    engines = _engine_names(str(spec.get("engine") or ""))
    storage = spec.get("storage") or "s3"
    nodes = int(spec.get("nodes") or 1)
    nemeses = set(spec.get("nemesis") or [])
    log_store = spec.get("log_store") or "single-driver"
    out: list[Breach] = []
    on_s3 = storage != "local"
    spark = engine_nodes(engines, nodes, "delta-spark")
    if on_s3 and spark > 1 and log_store in SINGLE_DRIVER_NAMES:
        out.append(
            Breach(
                f"{spark} delta-spark clusters write one table through S3SingleDriverLogStore, which Delta "
                "documents as safe for a single driver only (its mutual exclusion holds inside one JVM)",
                LOST_COMMIT_KINDS,
                ("delta-spark",),
            )
        )
    if on_s3 and spark > 1 and log_store == COORDINATED and spec.get("workload") in CREATE_RACE_WORKLOADS:
        out.append(
            Breach(
                f"{spark} delta-spark clusters create tables concurrently, and a coordinated-commits table's "
                "version 0 goes through the file system (S3SingleDriverLogStore: one driver only), not the "
                "coordinator",
                LOST_COMMIT_KINDS,
                ("delta-spark",),
            )
        )
    if not on_s3 and spark > 1:
        out.append(
            Breach(
                f"{spark} delta-spark JVMs write one local table through HDFSLogStore, whose mutual exclusion holds "
                f"inside one JVM only: {LOCAL_RENAME}",
                LOST_COMMIT_KINDS,
                ("delta-spark",),
            )
        )
    if not on_s3 and len(engines) > 1 and "delta-spark" in engines:
        others = [e for e in engines if e != "delta-spark"]
        out.append(
            Breach(
                f"delta-spark commits through HDFSLogStore and {', '.join(others)} through a create-if-absent of the "
                f"commit file, and {LOCAL_RENAME}: delta-spark can replace another engine's commit",
                LOST_COMMIT_KINDS,
                tuple(engines),
            )
        )
    if on_s3 and len(engines) > 1 and "delta-spark" in engines:
        others = [e for e in engines if e != "delta-spark"]
        protocol = "the coordinator" if log_store == COORDINATED else "S3SingleDriverLogStore"
        why = (
            f"delta-spark commits through {protocol} and {', '.join(others)} through the store's put-if-absent: "
            "engines sharing a table are safe together only on one commit primitive"
        )
        if log_store == COORDINATED:
            why += f", and {', '.join(others)} do(es) not read commits the coordinator has not backfilled yet"
        out.append(Breach(why, UNCOORDINATED_READER_KINDS, tuple(engines)))
    if "unsafe-put" in nemeses:
        out.append(
            Breach(
                "the unsafe-put fault strips If-None-Match from commit PUTs, so the store no longer refuses a "
                "second writer of a version (Delta on S3 requires put-if-absent)",
                LOST_COMMIT_KINDS,
            )
        )
    if "stale-list" in nemeses:
        out.append(
            Breach(
                "the stale-list fault makes LIST miss new keys, and Delta requires a store with consistent listing",
                STALE_LISTING_KINDS,
            )
        )
    return out


def outside_contract_text(found: list[Breach]) -> str:
    """'outside contract: <why>; <why>' or ''."""
    return ("outside contract: " + "; ".join(b.why for b in found)) if found else ""


__all__ = [
    "AUTO_NODES",
    "DEFAULT_NODES",
    "LOST_COMMIT_KINDS",
    "STALE_LISTING_KINDS",
    "Breach",
    "breaches",
    "default_nodes",
    "outside_contract_text",
]
