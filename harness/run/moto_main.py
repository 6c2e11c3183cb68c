"""moto's S3 server as the embedded store, its backend lookup computed once.

moto's server picks the backend for each request by listing its own package
directory (`moto.backends.list_of_moto_modules`: a listdir and an isdir per
module, some 150), and does so under a lock every request shares. Profiled
here (py-spy on moto during a delta-rs append run): 24% of moto's CPU, and
every request serialized behind it. The listing cannot change while the
server runs, so it is taken once; the rest is moto's own server, with its
own arguments:

``python -m harness.run.moto_main -H 127.0.0.1 -p 0``; with
DJ_MOTO_AS_SHIPPED=1 the lookup is moto's own (bench-storage --profile
times both).
"""

from __future__ import annotations

import os
import sys

AS_SHIPPED_ENV = "DJ_MOTO_AS_SHIPPED"


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


def main(argv: list[str]) -> None:
    from moto import server

    if os.environ.get(AS_SHIPPED_ENV) != "1":
        cache_backend_listing()
    server.main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
