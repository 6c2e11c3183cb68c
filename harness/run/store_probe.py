"""Does the object store keep the promises Delta's commit protocol rests on?

Delta on object storage is safe only if the store's conditional PUT
(`If-None-Match: *` on `_delta_log/<v>.json`) is atomic put-if-absent: of
writers racing for one version exactly one wins, the others are refused. A
store that lets two racing PUTs both succeed loses a commit whatever the
engine does, so the harness checks the store before blaming an engine.

Delta's DynamoDB commit coordinator (delta-spark's coordinated commits)
moves that promise to DynamoDB: a version is ratified by one conditional
UpdateItem, and of coordinators racing for it exactly one may win. That is
a property of its own, probed when a run's engines commit through the
coordinator.

Each property is a small function returning a :class:`PropertyResult`; all
work on a scratch prefix (`<prefix>_dj_store_check/<random>/`), and the
DynamoDB one on a scratch table (`_dj_store_check_<random>`), deleted
afterwards. Every request has a timeout and no retry (a retried
conditional write could be refused by its own first attempt and read as a
race). Nothing here prints or returns a credential.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from harness.core.errors import HarnessError

SCRATCH = "_dj_store_check"
PUT_IF_ABSENT = "put-if-absent"
OVERWRITE = "if-none-match-on-overwrite"
READ_AFTER_WRITE = "read-after-write"
LIST_AFTER_PUT = "list-after-put"
DYNAMODB_CONDITIONAL_UPDATE = "dynamodb-conditional-update"
PROPERTIES = (PUT_IF_ABSENT, OVERWRITE, READ_AFTER_WRITE, LIST_AFTER_PUT, DYNAMODB_CONDITIONAL_UPDATE)
# The racing properties: named per concurrency level when there are several.
RACING = (PUT_IF_ABSENT, DYNAMODB_CONDITIONAL_UPDATE)
# What the refusal of a conditional PUT looks like: 412, or 409 which AWS S3
# answers to a conditional PUT racing another in flight on the same key.
REFUSALS = {412: "PreconditionFailed", 409: "ConditionalRequestConflict"}
DYNAMODB_REFUSAL = "ConditionalCheckFailedException"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0
BARRIER_TIMEOUT = 30.0
MIN_ROUNDS = 1


class StoreUnusable(HarnessError):
    """The store could not be probed at all (unreachable, no such bucket,
    credentials refused): bad input, not a verdict on the store."""


@dataclass
class PropertyResult:
    name: str
    passed: bool | None  # None: not decided (requests failed for other reasons)
    counts: dict[str, int]
    detail: str  # one sentence with the counts; on failure, the first failure
    failure: str = ""  # the first failure, said so it can be quoted beside an anomaly

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StoreTarget:
    """What the probe talks to. `repr` shows no secret."""

    endpoint: str
    bucket: str
    prefix: str = ""
    region: str = "us-east-1"
    access_key: str = field(default="", repr=False)
    secret_key: str = field(default="", repr=False)
    session_token: str | None = field(default=None, repr=False)
    # Where the DynamoDB property probes, as boto3 settings (endpoint_url,
    # region_name, aws_access_key_id, ...); None: the S3 endpoint, with the
    # same credentials and region.
    dynamodb: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def from_storage(cls, storage: Any) -> StoreTarget:
        """An S3 storage of harness.run.storage, with the credentials its own
        log reader uses (the store itself, never the fault proxy); DynamoDB
        where its commit coordinators keep their state, if it has one."""
        opts = storage.reader_options() or {}
        return cls(
            endpoint=opts.get("endpoint_url") or storage.endpoint,
            bucket=storage.bucket,
            prefix=storage.prefix,
            region=opts.get("region_name") or storage.region,
            access_key=opts.get("aws_access_key_id", ""),
            secret_key=opts.get("aws_secret_access_key", ""),
            session_token=opts.get("aws_session_token"),
            dynamodb=storage.coordinator_reader_options(),
        )

    @property
    def public_endpoint(self) -> str:
        """The endpoint without any user:password@ it may carry."""
        return _public(self.endpoint)

    @property
    def public_dynamodb_endpoint(self) -> str:
        return _public((self.dynamodb or {}).get("endpoint_url") or self.endpoint)

    def _options(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint,
            "region_name": self.region,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "aws_session_token": self.session_token,
        }

    def client(self, pool: int) -> Any:
        return _client("s3", pool, **self._options())

    def dynamodb_client(self, pool: int) -> Any:
        return _client("dynamodb", pool, **(self.dynamodb or self._options()))

    def scrub(self, text: str) -> str:
        dynamodb = [v for k, v in (self.dynamodb or {}).items() if k.startswith("aws_")]
        for secret in (self.secret_key, self.session_token, self.access_key, *dynamodb):
            if secret:
                text = text.replace(secret, "***")
        return text


def _public(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    if parts.username is None and parts.password is None:
        return endpoint
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))


def _client(service: str, pool: int, **options: Any) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        **options,
        config=Config(
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=READ_TIMEOUT,
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=max(pool, 10),
        ),
    )


@dataclass
class StoreCheck:
    endpoint: str
    bucket: str
    scratch: str
    through: str  # "direct" or what stood between the probe and the store
    properties: list[PropertyResult]
    seconds: float
    cleanup: str  # "deleted N objects" or why not

    @property
    def passed(self) -> bool | None:
        verdicts = [p.passed for p in self.properties]
        if False in verdicts:
            return False
        return None if None in verdicts else True

    @property
    def failed(self) -> list[PropertyResult]:
        return [p for p in self.properties if p.passed is False]

    def summary(self) -> str:
        """'passed (put-if-absent 10/10 rounds one winner, ...)' or 'FAILED: ...'."""
        if self.passed is False:
            return "FAILED: " + "; ".join(f"{p.name}: {p.detail}" for p in self.failed)
        head = "passed" if self.passed else "not decided"
        return f"{head} ({', '.join(_short(p) for p in self.properties)}; {self.seconds:.1f} s, {self.through})"

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "summary": self.summary(),
            # What the run's checkers quote beside each anomaly a failed
            # property explains (harness/check/pipeline.py reads only this JSON).
            "failures": {p.name: p.failure or p.detail for p in self.failed},
            "endpoint": self.endpoint,
            "bucket": self.bucket,
            "scratch": self.scratch,
            "through": self.through,
            "seconds": round(self.seconds, 3),
            "cleanup": self.cleanup,
            "properties": [p.to_json() for p in self.properties],
        }


def _short(p: PropertyResult) -> str:
    c = p.counts
    if p.passed is None and not c:
        return f"{p.name} not decided"
    if p.name.split("@")[0] in RACING:
        return f"{p.name} {c.get('one_winner', 0)}/{c.get('rounds', 0)} rounds one winner"
    if p.name == OVERWRITE:
        return f"{p.name} {c.get('refused', 0)}/{c.get('tries', 0)} refused"
    return f"{p.name} {c.get('ok', 0)}/{c.get('tries', 0)}"


# -- requests -------------------------------------------------------------------------------


def _status(e: BaseException) -> tuple[int | None, str]:
    """(HTTP status, error code) of a failed request; (None, class) when it
    never got an answer (timeout, connection refused)."""
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        code = (resp.get("Error") or {}).get("Code") or ""
        status = (resp.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return status, str(code)
    return None, type(e).__name__


def _conditional_put(client: Any, bucket: str, key: str, body: bytes) -> str:
    """'won', 'refused' (412/409) or 'error:<status or exception>'."""
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
        return "won"
    except Exception as e:  # noqa: BLE001 - every outcome is counted, none may escape a racer
        status, code = _status(e)
        if status in REFUSALS:
            return "refused"
        return f"error:{status or code}"


def _get(client: Any, bucket: str, key: str) -> bytes | None:
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as e:  # noqa: BLE001
        if _status(e)[0] == 404:
            return None
        raise


# -- racing ---------------------------------------------------------------------------------

# One racer's conditional write: racer index -> 'won', 'refused' or 'error:<why>'.
Attempt = Callable[[int], str]


@dataclass(frozen=True)
class _Racing:
    """How a racing property speaks of what races."""

    name: str
    writes: str  # what the racers send, in failures: "conditional PUTs"
    target: str  # what each round races for: "key"
    refusal: str  # what a loser is answered, in the passing detail
    unsupported: frozenset[str]  # error outcomes that mean the store lacks the conditional write
    unsupported_failure: str
    holds: str = ""  # what else the passing detail says held


_PUT_IF_ABSENT = _Racing(
    PUT_IF_ABSENT,
    "conditional PUTs",
    "key",
    "412/409",
    frozenset({"501", "400", "NotImplemented"}),
    "the store does not support If-None-Match on PUT",
)
_DYNAMODB = _Racing(
    DYNAMODB_CONDITIONAL_UPDATE,
    "conditional updates",
    "item",
    DYNAMODB_REFUSAL,
    frozenset({"501", "NotImplemented", "ValidationException", "UnknownOperationException"}),
    "the store does not support the commit coordinator's conditional UpdateItem (Expected, AttributeUpdates)",
    "; each item read back with hasAcceptedCommits BOOL true and one commit",
)


def race(pool: ThreadPoolExecutor, concurrency: int, attempt: Attempt) -> tuple[list[str], float]:
    """One round: `concurrency` racers released together by a barrier, one
    attempt each. Their outcomes, and the seconds the slowest racer waited
    for its answer."""
    barrier = threading.Barrier(concurrency)

    def racer(i: int) -> tuple[str, float]:
        try:
            barrier.wait(BARRIER_TIMEOUT)
        except threading.BrokenBarrierError:
            return "error:barrier", 0.0
        start = time.monotonic()
        return attempt(i), time.monotonic() - start

    timed = list(pool.map(racer, range(concurrency)))
    return [o for o, _ in timed], max(s for _, s in timed)


def _racing(
    how: _Racing,
    rounds: int,
    concurrency: int,
    pool: ThreadPoolExecutor,
    budget: float | None,
    prepare: Callable[[int], Attempt],
    settle: Callable[[int, list[int], Counter[str]], str] | None = None,
    note: Callable[[int, list[int]], str] | None = None,
) -> PropertyResult:
    """R rounds of `race`, each on a fresh target that `prepare(round)` sets
    up. `settle(round, winners, counts)` judges what the store kept after a
    round with a winner (a failure sentence, or ""); `note(round, winners)`
    tells what it kept after the first failure, when that is a double win.

    With a `budget` (seconds), rounds stop once it is spent and at least
    MIN_ROUNDS ran: a store that makes losers wait (SeaweedFS retries its
    lock once a second) must not hold up a run's self-check."""
    counts: Counter[str] = Counter(rounds=0, racers=concurrency)
    failures: list[str] = []
    undecided: list[str] = []
    kept_note = ""
    t0 = time.monotonic()
    for r in range(rounds):
        if budget is not None and r >= MIN_ROUNDS and time.monotonic() - t0 > budget:
            break
        counts["rounds"] += 1
        round_no = r + 1
        try:
            attempt = prepare(r)
        except Exception as e:  # noqa: BLE001 - a round that could not start decides nothing
            status, code = _status(e)
            undecided.append(f"round {round_no}: its fresh {how.target} could not be set up ({status or code})")
            continue
        outcomes, slowest = race(pool, concurrency, attempt)
        # How long the slowest racer waited for its answer: a store may
        # serialize racers behind a lock (correct, but every loser waits).
        counts["slowest_ms"] = max(counts["slowest_ms"], round(1000 * slowest))
        won = [i for i, o in enumerate(outcomes) if o == "won"]
        errors = Counter(o[len("error:") :] for o in outcomes if o.startswith("error:"))
        counts["won"] += len(won)
        counts["refused"] += outcomes.count("refused")
        counts["errors"] += sum(errors.values())
        failed = len(failures)
        if len(won) > 1:
            counts["several_winners"] += 1
            both = "both" if len(won) == 2 else "all"
            failures.append(
                f"the store let {len(won)} racing {how.writes} {both} succeed in round {round_no} "
                f"of {rounds} ({concurrency} racers)"
            )
            if not failed and note is not None:
                kept_note = note(r, won)
        elif len(won) == 1 and not errors:
            counts["one_winner"] += 1
        elif not won and not errors:
            counts["no_winner"] += 1
            failures.append(f"all {concurrency} racers were refused on a fresh {how.target} in round {round_no}")
        elif any(e in how.unsupported for e in errors):
            counts["unsupported"] += 1
            failures.append(f"{how.unsupported_failure} (round {round_no}: {dict(errors)})")
        else:
            undecided.append(f"round {round_no}: {len(won)} won, {dict(errors)} failed")
        if settle is not None and won:
            try:
                kept = settle(r, won, counts)
            except Exception as e:  # noqa: BLE001 - what the store kept is then unknown, not wrong
                status, code = _status(e)
                undecided.append(f"round {round_no}: reading back what the store kept failed ({status or code})")
            else:
                # One failure per round: a double win already says the round went wrong.
                if kept and len(failures) == failed:
                    failures.append(kept)
    passed: bool | None = False if failures else (None if undecided else True)
    done = counts["rounds"]
    if failures:
        detail = f"{len(failures)} of {done} rounds went wrong; first: {failures[0]}{kept_note}"
    elif undecided:
        detail = f"{len(undecided)} of {done} rounds undecided (requests failed), e.g. {undecided[0]}"
    else:
        detail = (
            f"{done}/{done} rounds of {concurrency} racers had exactly one winner, the others refused "
            f"({how.refusal}){how.holds}"
        )
    if done < rounds:
        detail += f" (the {budget:g} s budget was spent after {done} of {rounds} rounds)"
    return PropertyResult(how.name, passed, dict(counts), detail, failures[0] if failures else "")


# -- the properties -------------------------------------------------------------------------


def put_if_absent(
    client: Any,
    bucket: str,
    scratch: str,
    rounds: int,
    concurrency: int,
    pool: ThreadPoolExecutor,
    budget: float | None = None,
) -> PropertyResult:
    """R rounds of N threads racing a conditional PUT on one fresh key per
    round, released together by a barrier. The key has the shape of a commit
    (`_delta_log/<20 digits>.json`) so that a store treating log files
    specially is probed on what Delta really writes."""

    def key(r: int) -> str:
        return f"{scratch}pia-{concurrency}/_delta_log/{r:020d}.json"

    def prepare(r: int) -> Attempt:
        return lambda i: _conditional_put(client, bucket, key(r), b"racer %d" % i)

    def note(r: int, won: list[int]) -> str:
        try:
            kept = _get(client, bucket, key(r))
        except Exception:  # noqa: BLE001 - the double win is the finding; what survived is colour
            return ""
        if kept is None:
            return ""
        return f"; it kept {kept.decode(errors='replace')!r}: {len(won) - 1} acknowledged write(s) lost"

    return _racing(_PUT_IF_ABSENT, rounds, concurrency, pool, budget, prepare, note=note)


# The item delta-spark's DynamoDB commit coordinator keeps per table, and the
# attributes of a commit in its `commits` list
# (io.delta.dynamodbcommitcoordinator.DynamoDBTableEntryConstants).
COORDINATOR_HASH_KEY = "tableId"
COORDINATOR_SCHEMA_VERSION = "1"


def create_coordinator_table(client: Any, table: str) -> None:
    """A table shaped as the coordinator creates its own: hash key tableId (S)."""
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": COORDINATOR_HASH_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": COORDINATOR_HASH_KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    # A real DynamoDB creates a table in seconds; moto at once.
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})


def register_coordinated_table(client: Any, table: str, table_id: str, path: str) -> None:
    """The item as the coordinator's registerTable writes it, at version 0
    (written through the file system, before the coordinator takes over)."""
    client.put_item(
        TableName=table,
        Item={
            COORDINATOR_HASH_KEY: {"S": table_id},
            "tableVersion": {"N": "0"},
            "hasAcceptedCommits": {"BOOL": False},
            "path": {"S": path},
            "commits": {"L": []},
            "acceptingCommits": {"BOOL": True},
            "schemaVersion": {"N": COORDINATOR_SCHEMA_VERSION},
        },
        ConditionExpression=f"attribute_not_exists({COORDINATOR_HASH_KEY})",
    )


def coordinator_commit(client: Any, table: str, table_id: str, path: str, version: int, fs_name: str) -> str:
    """The UpdateItem by which the coordinator ratifies `version`
    (DynamoDBCommitCoordinatorClient.commitToOwner), in its legacy form:
    'won', 'refused' (ConditionalCheckFailedException) or 'error:<code>'."""
    now = str(int(time.time() * 1000))
    commit = {
        "version": {"N": str(version)},
        "timestamp": {"N": now},
        "fsName": {"S": fs_name},
        "fsLength": {"N": "1024"},
        "fsTimestamp": {"N": now},
    }
    try:
        client.update_item(
            TableName=table,
            Key={COORDINATOR_HASH_KEY: {"S": table_id}},
            Expected={
                "tableVersion": {"Value": {"N": str(version - 1)}},
                "acceptingCommits": {"Value": {"BOOL": True}},
                "path": {"Value": {"S": path}},
                "schemaVersion": {"Value": {"N": COORDINATOR_SCHEMA_VERSION}},
            },
            AttributeUpdates={
                "tableVersion": {"Value": {"N": str(version)}, "Action": "PUT"},
                "hasAcceptedCommits": {"Value": {"BOOL": True}, "Action": "PUT"},
                "tableTimestamp": {"Value": {"N": now}, "Action": "PUT"},
                "commits": {"Value": {"L": [{"M": commit}]}, "Action": "ADD"},
            },
        )
        return "won"
    except Exception as e:  # noqa: BLE001 - every outcome is counted, none may escape a racer
        status, code = _status(e)
        if code == DYNAMODB_REFUSAL:
            return "refused"
        return f"error:{code or status}"


def dynamodb_conditional_update(
    client: Any,
    table: str,
    path: str,
    rounds: int,
    concurrency: int,
    pool: ThreadPoolExecutor,
    budget: float | None = None,
) -> PropertyResult:
    """R rounds of N threads racing the commit coordinator's UpdateItem for
    version 1 of a fresh item per round (registered as the coordinator
    registers a table), released together by a barrier. Exactly one may
    win; afterwards the item must say so as the coordinator reads it back:
    hasAcceptedCommits BOOL true (its getBOOL() fails on anything else) and
    one commit in `commits`. `table` exists, with the coordinator's key."""

    def table_id(r: int) -> str:
        return f"race-{concurrency}-{r}"

    def prepare(r: int) -> Attempt:
        register_coordinated_table(client, table, table_id(r), path)
        return lambda i: coordinator_commit(client, table, table_id(r), path, 1, f"00000000000000000001.racer-{i}.json")

    def settle(r: int, won: list[int], counts: Counter[str]) -> str:
        key = {COORDINATOR_HASH_KEY: {"S": table_id(r)}}
        item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        failure = ""
        accepted = item.get("hasAcceptedCommits")
        if accepted == {"BOOL": True}:
            counts["bool_kept"] += 1
        else:
            counts["not_bool"] += 1
            failure = (
                f"an AttributeUpdates PUT of hasAcceptedCommits {{'BOOL': True}} read back as {accepted!r} "
                f"(round {r + 1}): the commit coordinator's getBOOL() fails on it at every later commit"
            )
        commits = (item.get("commits") or {}).get("L", [])
        if len(commits) != 1:
            counts["not_one_commit"] += 1
            failure = failure or f"after round {r + 1} the item held {len(commits)} commits for version 1, not one"
        return failure

    return _racing(_DYNAMODB, rounds, concurrency, pool, budget, prepare, settle)


def if_none_match_on_overwrite(client: Any, bucket: str, scratch: str, tries: int = 3) -> PropertyResult:
    """A conditional PUT on a key that exists must be refused and leave the
    object as it was (what keeps a slow writer off a committed version)."""
    counts: Counter[str] = Counter(tries=tries)
    failure = ""
    for t in range(tries):
        key = f"{scratch}overwrite/_delta_log/{t:020d}.json"
        original = b"first %d" % t
        client.put_object(Bucket=bucket, Key=key, Body=original)
        outcome = _conditional_put(client, bucket, key, b"second %d" % t)
        kept = _get(client, bucket, key)
        if outcome == "refused" and kept == original:
            counts["refused"] += 1
        elif outcome == "won" or kept != original:
            counts["overwritten"] += 1
            failure = failure or (
                f"a conditional PUT on an existing key was accepted (try {t + 1} of {tries})"
                if outcome == "won"
                else f"a refused conditional PUT changed the object anyway (try {t + 1} of {tries})"
            )
        else:
            counts["errors"] += 1
    passed = False if failure else (True if counts["refused"] == tries else None)
    detail = failure or f"{counts['refused']}/{tries} conditional PUTs on an existing key refused, object kept"
    return PropertyResult(OVERWRITE, passed, dict(counts), detail, failure)


def read_after_write(client: Any, bucket: str, scratch: str, tries: int = 3) -> PropertyResult:
    """A GET right after a PUT returns that body: on a new key, and on a key
    just overwritten (`_last_checkpoint` is overwritten in place)."""
    counts: Counter[str] = Counter(tries=2 * tries)
    failure = ""
    for t in range(tries):
        key = f"{scratch}raw/{t}"
        for n, body in enumerate((b"new %d" % t, b"overwritten %d" % t)):
            client.put_object(Bucket=bucket, Key=key, Body=body)
            got = _get(client, bucket, key)
            if got == body:
                counts["ok"] += 1
            else:
                counts["stale"] += 1
                what = "new" if n == 0 else "overwritten"
                failure = failure or (
                    f"a GET right after a PUT of a {what} key returned "
                    + ("nothing (404)" if got is None else "another body")
                    + f" (try {t + 1})"
                )
    passed = not failure
    detail = failure or f"{counts['ok']}/{counts['tries']} GETs right after a PUT returned that body"
    return PropertyResult(READ_AFTER_WRITE, passed, dict(counts), detail, failure)


def list_after_put(client: Any, bucket: str, scratch: str, tries: int = 3) -> PropertyResult:
    """A LIST of the prefix right after a PUT includes the key: engines find
    the latest version by listing `_delta_log/`."""
    counts: Counter[str] = Counter(tries=tries)
    failure = ""
    prefix = f"{scratch}list/_delta_log/"
    put: list[str] = []
    for t in range(tries):
        key = f"{prefix}{t:020d}.json"
        client.put_object(Bucket=bucket, Key=key, Body=b"{}")
        put.append(key)
        listed = {o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])}
        missing = [k for k in put if k not in listed]
        if missing:
            counts["missing"] += 1
            failure = failure or f"a LIST right after a PUT missed {len(missing)} of {len(put)} keys (try {t + 1})"
        else:
            counts["ok"] += 1
    passed = not failure
    detail = failure or f"{counts['ok']}/{tries} LISTs right after a PUT included every key put"
    return PropertyResult(LIST_AFTER_PUT, passed, dict(counts), detail, failure)


# -- the whole check ------------------------------------------------------------------------


def _cleanup(client: Any, bucket: str, scratch: str) -> str:
    deleted = 0
    try:
        token: dict[str, str] = {}
        while True:
            page = client.list_objects_v2(Bucket=bucket, Prefix=scratch, **token)
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
                deleted += len(keys)
            if not page.get("IsTruncated"):
                return f"deleted {deleted} objects"
            token = {"ContinuationToken": page["NextContinuationToken"]}
    except Exception as e:  # noqa: BLE001 - leftovers under a scratch prefix harm nothing
        status, code = _status(e)
        return f"not deleted ({status or code}); {deleted} objects deleted before that"


def _dynamodb_check(
    target: StoreTarget,
    table: str,
    path: str,
    rounds: int,
    concurrency: tuple[int, ...],
    budget: float | None,
    progress: Callable[[str], None] | None,
) -> tuple[list[PropertyResult], str]:
    """The DynamoDB property once per concurrency level, on a scratch table
    created for it and deleted after; and what became of the table."""
    client = target.dynamodb_client(max(concurrency))
    try:
        create_coordinator_table(client, table)
    except Exception as e:  # noqa: BLE001 - a store without DynamoDB leaves the property undecided
        status, code = _status(e)
        why = f"not decided: no scratch table could be created at {target.public_dynamodb_endpoint} ({status or code})"
        return [PropertyResult(DYNAMODB_CONDITIONAL_UPDATE, None, {}, target.scrub(why))], "no DynamoDB table created"
    results: list[PropertyResult] = []
    try:
        with ThreadPoolExecutor(max(concurrency), thread_name_prefix="store-probe") as pool:
            for n in concurrency:
                if progress:
                    progress(f"store-check: {DYNAMODB_CONDITIONAL_UPDATE}, {rounds} rounds of {n} racers")
                results.append(dynamodb_conditional_update(client, table, path, rounds, n, pool, budget))
    finally:
        try:
            client.delete_table(TableName=table)
            cleanup = f"deleted the DynamoDB table {table}"
        except Exception as e:  # noqa: BLE001 - a leftover scratch table harms nothing
            status, code = _status(e)
            cleanup = f"DynamoDB table {table} not deleted ({status or code})"
    return results, cleanup


def _usable(client: Any, target: StoreTarget) -> None:
    """One line of bad input when the store cannot be probed at all."""
    try:
        client.head_bucket(Bucket=target.bucket)
    except Exception as e:  # noqa: BLE001
        status, code = _status(e)
        where = target.public_endpoint
        if status == 404:
            raise StoreUnusable(f"no bucket {target.bucket!r} at {where}") from None
        if status in (401, 403):
            raise StoreUnusable(f"{where} refused the credentials for bucket {target.bucket!r} ({status})") from None
        if status is None:
            raise StoreUnusable(f"cannot reach the S3 endpoint {where} ({code})") from None
        raise StoreUnusable(f"{where}: HEAD bucket {target.bucket!r} answered {status} {code}") from None


def check_store(
    target: StoreTarget,
    *,
    rounds: int = 10,
    concurrency: tuple[int, ...] = (8,),
    tries: int = 3,
    through: str = "direct",
    budget: float | None = None,
    progress: Callable[[str], None] | None = None,
    dynamodb: bool = False,
) -> StoreCheck:
    """Every S3 property, put-if-absent once per concurrency level (each
    level within `budget` seconds, if given); with `dynamodb`, the commit
    coordinator's conditional update too, as put-if-absent is raced. Raises
    StoreUnusable when the store cannot be probed at all."""
    if rounds < 1 or not concurrency or min(concurrency) < 2:
        raise HarnessError("the store check needs rounds >= 1 and concurrency levels >= 2")
    t0 = time.monotonic()
    client = target.client(max(concurrency))
    _usable(client, target)
    scratch_id = uuid.uuid4().hex[:12]
    scratch = f"{target.prefix}{SCRATCH}/{scratch_id}/"
    results: list[PropertyResult] = []
    try:
        with ThreadPoolExecutor(max(concurrency), thread_name_prefix="store-probe") as pool:
            for n in concurrency:
                if progress:
                    progress(f"store-check: {PUT_IF_ABSENT}, {rounds} rounds of {n} racers")
                results.append(put_if_absent(client, target.bucket, scratch, rounds, n, pool, budget))
        for name, fn in (
            (OVERWRITE, if_none_match_on_overwrite),
            (READ_AFTER_WRITE, read_after_write),
            (LIST_AFTER_PUT, list_after_put),
        ):
            if progress:
                progress(f"store-check: {name}")
            try:
                results.append(fn(client, target.bucket, scratch, tries))
            except Exception as e:  # noqa: BLE001 - one property's failed request leaves it undecided
                status, code = _status(e)
                results.append(
                    PropertyResult(name, None, {}, target.scrub(f"not decided: a request failed ({status or code})"))
                )
    finally:
        cleanup = _cleanup(client, target.bucket, scratch)
    if dynamodb:
        path = f"s3://{target.bucket}/{scratch}coordinated"
        found, table_cleanup = _dynamodb_check(
            target, f"{SCRATCH}_{scratch_id}", path, rounds, concurrency, budget, progress
        )
        results += found
        cleanup += f"; {table_cleanup}"
    if len(concurrency) > 1:
        results = _name_levels(results)
    return StoreCheck(
        endpoint=target.public_endpoint,
        bucket=target.bucket,
        scratch=scratch,
        through=through,
        properties=results,
        seconds=time.monotonic() - t0,
        cleanup=cleanup,
    )


def _name_levels(results: list[PropertyResult]) -> list[PropertyResult]:
    """Several concurrency levels keep the racing properties separate, named
    by level (`put-if-absent@8`), so a verdict per level is printed."""
    return [
        PropertyResult(f"{p.name}@{p.counts['racers']}", p.passed, p.counts, p.detail, p.failure)
        if p.name in RACING and "racers" in p.counts
        else p
        for p in results
    ]
