"""Holding a server that cannot be told its listen address to loopback.

Spark 3.5's Spark Connect server has no binding-address setting (Spark 4's
``spark.connect.grpc.binding.address``): it listens on every interface. The
harness's servers bind to 127.0.0.1 only, so such a JVM runs with a small
library preloaded (``loopback_bind.c``) that turns a bind to the wildcard
address into a bind to loopback. It is compiled with the system's C
compiler on first use and cached beside the jars, keyed by its source.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess
from harness.engines.jars import cache_lock, cache_root

SOURCE = Path(__file__).with_name("loopback_bind.c")
COMPILE_TIMEOUT_S = 120.0


def shim() -> Path:
    """The compiled library (built now if the cache lacks it)."""
    text = SOURCE.read_bytes()
    out = cache_root() / "native" / f"loopback-bind-{hashlib.sha256(text).hexdigest()[:12]}.so"
    if out.is_file():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise HarnessError(
            "Spark 3.5's Spark Connect server listens on every interface; holding it to 127.0.0.1 "
            "needs a C compiler (apt-get install gcc, or set $CC)"
        )
    with cache_lock():
        if out.is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        log = out.with_suffix(".log")
        argv = [cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SOURCE), "-ldl"]
        code = ManagedProcess("cc", argv, log).run(COMPILE_TIMEOUT_S, "compiling the loopback shim")
        if code != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            raise HarnessError(f"compiling {SOURCE.name} failed with exit code {code} (log: {log})")
        os.replace(tmp, out)
    return out


def preload(env: dict[str, str]) -> dict[str, str]:
    """`env` with the shim preloaded, ahead of what it already preloads
    (the clock nemesis's libfaketime)."""
    others = env.get("LD_PRELOAD", "")
    return {**env, "LD_PRELOAD": ":".join(p for p in (str(shim()), others) if p)}
