"""moto's server as the embedded store, made fit to judge engines by.

moto as shipped has three faults that would be blamed on the engine under
test; this launcher mends each before the server starts:

- Conditional writes are check-then-act with no lock. An S3 PUT with
  ``If-None-Match: *`` looks the key up, then writes it; a DynamoDB
  conditional update reads the item, checks, then writes. Two racing
  writers can both pass the check: measured here with the server's GIL
  switch interval at 1 microsecond, 9 of 200 rounds of 8 racing S3 writers
  had two winners. Every S3 object mutation (PUT, POST, DELETE of a key)
  now holds a lock per key, and every DynamoDB request one lock per
  server, so the check and the write are one step. (`bench-moto-race`
  counts double winners with and without this.)
- A DynamoDB ``AttributeUpdates`` PUT of a BOOL (or B, BS) value is stored
  as a string: ``{"BOOL": true}`` comes back ``{"S": "True"}``, and
  delta-spark's DynamoDB commit coordinator then fails every later call
  in ``getBOOL()``. Such a value is now stored as the type it was sent as.
- moto picks the backend of each request by listing its own package
  directory (``moto.backends.list_of_moto_modules``: a listdir and an
  isdir per module, some 150), under a lock every request shares.
  Profiled here (py-spy during a delta-rs append run): 24% of moto's CPU.
  The listing cannot change while the server runs, so it is taken once.

``python -m harness.run.moto_main -H 127.0.0.1 -p 0``; with
DJ_MOTO_AS_SHIPPED=1 none of this is applied (the benchmarks time and
race both). DJ_MOTO_SWITCH_INTERVAL sets the server's GIL switch interval
in seconds: a small one widens moto's check-then-act windows, which is how
`bench-moto-race` shows them.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

AS_SHIPPED_ENV = "DJ_MOTO_AS_SHIPPED"
SWITCH_INTERVAL_ENV = "DJ_MOTO_SWITCH_INTERVAL"
# Locks per S3 key, striped: two keys rarely share one, and the table of
# locks does not grow with the number of keys a run writes.
KEY_LOCK_STRIPES = 256


def cache_backend_listing() -> bool:
    """Take moto's module listing once; False for a moto without it (it
    then runs as shipped)."""
    from moto import backends

    listing = getattr(backends, "list_of_moto_modules", None)
    if not callable(listing):
        return False
    modules = tuple(listing())
    backends.list_of_moto_modules = lambda: iter(modules)
    return True


def serialize_s3_key_mutations() -> bool:
    """A PUT, POST or DELETE of one S3 key holds that key's lock for its
    whole handling: a conditional PUT's check and write are one step, and
    no other write of the key falls between them."""
    from moto.s3.responses import S3Response

    original = getattr(S3Response, "_key_response", None)
    if not callable(original):
        return False
    stripes = [threading.Lock() for _ in range(KEY_LOCK_STRIPES)]

    @functools.wraps(original)
    def key_response(self: Any, request: Any, full_url: str) -> Any:
        if request.method not in ("PUT", "POST", "DELETE"):
            return original(self, request, full_url)
        key = (self.parse_bucket_name_from_url(request, full_url), self.parse_key_name())
        with stripes[hash(key) % KEY_LOCK_STRIPES]:
            return original(self, request, full_url)

    S3Response._key_response = key_response  # type: ignore[method-assign]
    return True


def serialize_dynamodb() -> bool:
    """One DynamoDB request at a time: a conditional update's read, check
    and write are one step. The commit coordinator sends a few requests per
    commit, so the lock costs nothing measurable."""
    from moto.dynamodb.responses import DynamoHandler

    original: Callable[..., Any] = DynamoHandler.call_action
    lock = threading.Lock()

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with lock:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
    return True


# The DynamoDB types moto's AttributeUpdates PUT turns into strings.
_TYPES_KEPT = ({"BOOL"}, {"B"}, {"BS"})


def keep_attribute_update_types() -> bool:
    """An AttributeUpdates PUT of a BOOL, B or BS value stores that type,
    not its text."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    original = getattr(Item, "update_with_attribute_updates", None)
    if not callable(original):
        return False

    @functools.wraps(original)
    def update(self: Any, attribute_updates: dict[str, Any]) -> None:
        rest = {}
        for name, update in attribute_updates.items():
            value = update.get("Value")
            if update.get("Action", "PUT") == "PUT" and isinstance(value, dict) and set(value) in _TYPES_KEPT:
                self.attrs[name] = DynamoType(value)
            else:
                rest[name] = update
        original(self, rest)

    Item.update_with_attribute_updates = update  # type: ignore[method-assign]
    return True


def mend() -> None:
    cache_backend_listing()
    serialize_s3_key_mutations()
    serialize_dynamodb()
    keep_attribute_update_types()


def main(argv: list[str]) -> None:
    from moto import server

    interval = os.environ.get(SWITCH_INTERVAL_ENV)
    if interval:
        sys.setswitchinterval(float(interval))
    if os.environ.get(AS_SHIPPED_ENV) != "1":
        mend()
    server.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
