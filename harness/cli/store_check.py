"""`delta-jepsen store-check`: is an S3-compatible store fit for Delta's commit protocol?

Exit 0 when every property holds, 1 when one Delta relies on fails, 2 on bad
input (no credentials, an unreachable endpoint, no such bucket), 3 when
requests failed so often that a property could not be decided.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.cli.options import Handler, positive
from harness.core.errors import HarnessError

EXIT_UNDECIDED = 3
EMBEDDED = "embedded"
EMBEDDED_STORES = ("moto", "seaweedfs")


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    s = sub.add_parser(
        "store-check",
        help="qualify an S3-compatible store for Delta: racing put-if-absent, If-None-Match, read/list after write",
    )
    s.add_argument(
        "--s3-endpoint",
        default=None,
        help=f"the store, e.g. http://127.0.0.1:9000 (default $AWS_ENDPOINT_URL); '{EMBEDDED}': start moto",
    )
    s.add_argument("--s3-bucket", default=None, help="an existing bucket (default $DJ_S3_BUCKET)")
    s.add_argument(
        "--prefix", default="", help="key prefix; the check writes under <prefix>_dj_store_check/ and deletes it"
    )
    s.add_argument("--rounds", type=positive(int), default=50, help="put-if-absent rounds per concurrency level (50)")
    s.add_argument(
        "--concurrency", default="2,8,32", help="racers per round, comma-separated levels >= 2 (default 2,8,32)"
    )
    s.add_argument("--tries", type=positive(int), default=5, help="tries of each of the other properties (5)")
    s.add_argument(
        "--dynamodb",
        action="store_true",
        help="also race delta-spark's DynamoDB commit coordinator's conditional update, as put-if-absent is raced "
        "(DynamoDB at the same endpoint; with --embedded seaweedfs, the embedded moto a coordinated run uses)",
    )
    s.add_argument(
        "--embedded",
        nargs="?",
        const="moto",
        default=None,
        choices=EMBEDDED_STORES,
        help="probe a store the harness starts itself: moto (the default) or seaweedfs (a self-test)",
    )
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    return {"store-check": cmd_store_check}


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise HarnessError(f"--concurrency takes comma-separated numbers, not {text!r}") from None
    if not levels or min(levels) < 2 or max(levels) > 256:
        raise HarnessError(f"--concurrency levels must be 2..256 racers, not {text!r}")
    return levels


def cmd_store_check(args: argparse.Namespace) -> int:
    from harness.run.store_probe import StoreTarget, check_store

    levels = _levels(args.concurrency)
    embedded = args.embedded or ("moto" if args.s3_endpoint == EMBEDDED else None)
    progress = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    if embedded:
        from harness.run.storage import EmbeddedS3, SeaweedS3

        with tempfile.TemporaryDirectory(prefix="dj-store-check-") as tmp:
            store = EmbeddedS3(Path(tmp) / "moto.log") if embedded == "moto" else SeaweedS3(Path(tmp))
            try:
                if args.dynamodb:
                    store.start_coordinator(Path(tmp) / "moto-dynamodb.log")
                target = StoreTarget.from_storage(store)
                target.prefix = args.prefix
                result = check_store(
                    target,
                    rounds=args.rounds,
                    concurrency=levels,
                    tries=args.tries,
                    progress=progress,
                    dynamodb=args.dynamodb,
                )
            finally:
                store.stop()
    else:
        target = _target(args)
        result = check_store(
            target, rounds=args.rounds, concurrency=levels, tries=args.tries, progress=progress, dynamodb=args.dynamodb
        )
    doc = result.to_json()
    if embedded:
        doc["endpoint"] = f"{EMBEDDED} {embedded}"  # its port was this process's alone
    print(json.dumps(doc, indent=2) if args.json else _render(doc))
    if result.passed is False:
        return 1
    return 0 if result.passed else EXIT_UNDECIDED


def _target(args: argparse.Namespace) -> Any:
    from harness.run.store_probe import StoreTarget

    endpoint = args.s3_endpoint or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
    if not endpoint:
        raise HarnessError(f"store-check needs --s3-endpoint URL (or $AWS_ENDPOINT_URL, or '{EMBEDDED}')")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HarnessError(f"--s3-endpoint must be an http:// or https:// URL, not {endpoint!r}")
    bucket = args.s3_bucket or os.environ.get("DJ_S3_BUCKET")
    if not bucket:
        raise HarnessError("store-check needs --s3-bucket (or $DJ_S3_BUCKET)")
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        raise HarnessError("store-check needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
    return StoreTarget(
        endpoint=endpoint,
        bucket=bucket,
        prefix=args.prefix,
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        access_key=key,
        secret_key=secret,
        session_token=os.environ.get("AWS_SESSION_TOKEN"),
    )


def _render(doc: dict[str, Any]) -> str:
    from harness.run.store_probe import DYNAMODB_CONDITIONAL_UPDATE

    verdicts = {True: "passed", False: "FAILED", None: "undecided"}
    props = doc["properties"]
    width = max(len(p["name"]) for p in props)
    lines = [f"store: {doc['endpoint']}  bucket {doc['bucket']}  ({doc['seconds']:.1f} s; scratch {doc['cleanup']})"]
    for p in props:
        counts = ", ".join(f"{k} {v}" for k, v in p["counts"].items())
        lines.append(f"  {p['name']:<{width}}  {verdicts[p['passed']]:<9} {p['detail']}  [{counts}]")
    if doc["passed"] is True:
        coordinator = any(p["name"].startswith(DYNAMODB_CONDITIONAL_UPDATE) for p in props)
        lines.append(
            "verdict: fit for Delta's commit protocol (atomic put-if-absent, read-after-write, list-after-put"
            + (", the commit coordinator's atomic conditional update)" if coordinator else ")")
        )
    elif doc["passed"] is False:
        lines.append(
            "verdict: NOT fit for Delta: "
            + "; ".join(doc["failures"])
            + " failed (Delta's commit protocol relies on each; anomalies on this store may be the store's)"
        )
    else:
        lines.append("verdict: undecided: requests failed before every property could be decided")
    return "\n".join(lines)
