"""Does the object store keep the promises Delta's commit protocol rests on?

Delta on object storage is safe only if the store's conditional PUT
(`If-None-Match: *` on `_delta_log/<v>.json`) is atomic put-if-absent: of
writers racing for one version exactly one wins, the others are refused. A
store that lets two racing PUTs both succeed loses a commit whatever the
engine does, so the harness checks the store before blaming an engine.

Each property is a small function returning a :class:`PropertyResult`; all
work on a scratch prefix (`<prefix>_dj_store_check/<random>/`) that is
deleted afterwards. Every request has a timeout and no retry (a retried
conditional PUT could be refused by its own first attempt and read as a
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
PROPERTIES = (PUT_IF_ABSENT, OVERWRITE, READ_AFTER_WRITE, LIST_AFTER_PUT)
# What the refusal of a conditional PUT looks like: 412, or 409 which AWS S3
# answers to a conditional PUT racing another in flight on the same key.
REFUSALS = {412: "PreconditionFailed", 409: "ConditionalRequestConflict"}
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

    @classmethod
    def from_storage(cls, storage: Any) -> StoreTarget:
        """An S3 storage of harness.run.storage, with the credentials its own
        log reader uses (the store itself, never the fault proxy)."""
        opts = storage.reader_options() or {}
        return cls(
            endpoint=opts.get("endpoint_url") or storage.endpoint,
            bucket=storage.bucket,
            prefix=storage.prefix,
            region=opts.get("region_name") or storage.region,
            access_key=opts.get("aws_access_key_id", ""),
            secret_key=opts.get("aws_secret_access_key", ""),
            session_token=opts.get("aws_session_token"),
        )

    @property
    def public_endpoint(self) -> str:
        """The endpoint without any user:password@ it may carry."""
        parts = urlsplit(self.endpoint)
        if parts.username is None and parts.password is None:
            return self.endpoint
        host = parts.hostname or ""
        return urlunsplit(parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host))

    def client(self, pool: int) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=self.session_token,
            config=Config(
                connect_timeout=CONNECT_TIMEOUT,
                read_timeout=READ_TIMEOUT,
                retries={"total_max_attempts": 1, "mode": "standard"},
                max_pool_connections=max(pool, 10),
            ),
        )

    def scrub(self, text: str) -> str:
        for secret in (self.secret_key, self.session_token, self.access_key):
            if secret:
                text = text.replace(secret, "***")
        return text


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
    if p.name.startswith(PUT_IF_ABSENT):
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
    specially is probed on what Delta really writes.

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
        key = f"{scratch}pia-{concurrency}/_delta_log/{r:020d}.json"
        barrier = threading.Barrier(concurrency)

        def racer(i: int, key: str = key, barrier: threading.Barrier = barrier) -> tuple[str, float]:
            try:
                barrier.wait(BARRIER_TIMEOUT)
            except threading.BrokenBarrierError:
                return "error:barrier", 0.0
            start = time.monotonic()
            return _conditional_put(client, bucket, key, b"racer %d" % i), time.monotonic() - start

        timed = list(pool.map(racer, range(concurrency)))
        outcomes = [o for o, _ in timed]
        # How long the slowest racer waited for its answer: a store may
        # serialize racers behind a lock (correct, but every loser waits).
        counts["slowest_ms"] = max(counts["slowest_ms"], round(1000 * max(s for _, s in timed)))
        won = [i for i, o in enumerate(outcomes) if o == "won"]
        errors = Counter(o[len("error:") :] for o in outcomes if o.startswith("error:"))
        counts["won"] += len(won)
        counts["refused"] += outcomes.count("refused")
        counts["errors"] += sum(errors.values())
        round_no = r + 1
        if len(won) > 1:
            counts["several_winners"] += 1
            kept = None
            try:
                if not failures:  # which write survived is told once, for the first such round
                    kept = _get(client, bucket, key)
            except Exception:  # noqa: BLE001 - the double win is the finding; what survived is colour
                pass
            both = "both" if len(won) == 2 else "all"
            sentence = (
                f"the store let {len(won)} racing conditional PUTs {both} succeed in round {round_no} "
                f"of {rounds} ({concurrency} racers)"
            )
            failures.append(sentence)
            if kept is not None and len(failures) == 1:
                kept_note = f"; it kept {kept.decode(errors='replace')!r}: {len(won) - 1} acknowledged write(s) lost"
        elif len(won) == 1 and not errors:
            counts["one_winner"] += 1
        elif not won and not errors:
            counts["no_winner"] += 1
            failures.append(f"all {concurrency} racers were refused on a fresh key in round {round_no}")
        elif any(e in ("501", "400", "NotImplemented") for e in errors):
            counts["unsupported"] += 1
            failures.append(f"the store does not support If-None-Match on PUT (round {round_no}: {dict(errors)})")
        else:
            undecided.append(f"round {round_no}: {len(won)} won, {dict(errors)} failed")
    passed: bool | None = False if failures else (None if undecided else True)
    done = counts["rounds"]
    if failures:
        detail = f"{len(failures)} of {done} rounds went wrong; first: {failures[0]}{kept_note}"
    elif undecided:
        detail = f"{len(undecided)} of {done} rounds undecided (requests failed), e.g. {undecided[0]}"
    else:
        detail = f"{done}/{done} rounds of {concurrency} racers had exactly one winner, the others refused (412/409)"
    if done < rounds:
        detail += f" (the {budget:g} s budget was spent after {done} of {rounds} rounds)"
    return PropertyResult(PUT_IF_ABSENT, passed, dict(counts), detail, failures[0] if failures else "")


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
) -> StoreCheck:
    """Every property, put-if-absent once per concurrency level (each level
    within `budget` seconds, if given). Raises StoreUnusable when the store
    cannot be probed at all."""
    if rounds < 1 or not concurrency or min(concurrency) < 2:
        raise HarnessError("the store check needs rounds >= 1 and concurrency levels >= 2")
    t0 = time.monotonic()
    client = target.client(max(concurrency))
    _usable(client, target)
    scratch = f"{target.prefix}{SCRATCH}/{uuid.uuid4().hex[:12]}/"
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
    if len(concurrency) > 1:
        results = _merge_put_if_absent(results, len(concurrency))
    return StoreCheck(
        endpoint=target.public_endpoint,
        bucket=target.bucket,
        scratch=scratch,
        through=through,
        properties=results,
        seconds=time.monotonic() - t0,
        cleanup=cleanup,
    )


def _merge_put_if_absent(results: list[PropertyResult], levels: int) -> list[PropertyResult]:
    """Several concurrency levels stay separate properties, named by level
    (`put-if-absent@8`), so a verdict per level is printed."""
    out = []
    for p in results[:levels]:
        out.append(PropertyResult(f"{p.name}@{p.counts.get('racers')}", p.passed, p.counts, p.detail, p.failure))
    return out + results[levels:]
