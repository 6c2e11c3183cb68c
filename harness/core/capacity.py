"""How much a command may ask of this machine: the one rule that every size
flag starting processes or threads (client workers, engine nodes, parallel
jobs, client threads) is checked by before anything starts. Asking for more
than the machine can hold is bad input (one line, exit 2), not a run that
fails half-started, or drives the machine out of memory and hangs.

The figures are rough, measured on a 2-core machine. Memory is what a
process typically holds, as running out of it brings the OOM killer onto
any process of the machine; processes, threads and open files count only
what the harness itself certainly holds, so that these limits refuse only
what cannot start at all (a run that hits them anyway ends with one line,
see harness.run.runner).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.errors import HarnessError

MiB = 1 << 20
GiB = 1 << 30

# Seconds a client worker has to start. A run starts all its slots' workers
# at once: the CPUs must start them within half this time, the other half
# being margin for a machine busy with more than the run.
WORKER_START_TIMEOUT = 90.0


@dataclass(frozen=True)
class Load:
    """What some of the harness's children take while they run."""

    memory: int = 0  # bytes resident
    tasks: int = 0  # processes and threads: RLIMIT_NPROC counts both
    files: int = 0  # descriptors the harness holds open for them
    start_cpu: float = 0.0  # CPU seconds that must be spent at once to start them

    def __add__(self, other: Load) -> Load:
        return Load(
            self.memory + other.memory,
            self.tasks + other.tasks,
            self.files + other.files,
            self.start_cpu + other.start_cpu,
        )

    def __mul__(self, n: int) -> Load:
        return Load(self.memory * n, self.tasks * n, self.files * n, self.start_cpu * n)

    __rmul__ = __mul__


# A harness process (a run's controller, a matrix's, a conformance worker):
# measured at 97 MiB resident with 9 threads and 20 descriptors in a run of
# 4 delta-rs workers.
HARNESS = Load(memory=128 * MiB, tasks=16, files=32)
# One client slot: the worker process (146-195 MiB resident, about 80 MiB of
# it its own; importing the Spark Connect client takes 0.8 s of CPU, the
# delta-rs one 0.3 s) and the harness thread that drives it, holding the
# worker's two pipes, its log and a selector.
CLIENT_WORKER = Load(memory=160 * MiB, tasks=2, files=4, start_cpu=1.0)
# An embedded S3 store the harness starts (moto, SeaweedFS).
EMBEDDED_STORE = Load(memory=256 * MiB, tasks=1, files=1)
# A node that is only a name the clients carry (delta-rs, a remote Spark
# Connect endpoint): its Node, its line of spec.json.
NODE_NAME = Load(memory=4096)
# A client thread inside the harness (bench-proxy), with its HTTP client and socket.
CLIENT_THREAD = Load(memory=16 * MiB, tasks=1, files=1)


def _soft_limit(which: int) -> int | None:
    soft, _ = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY else soft


@dataclass(frozen=True)
class Machine:
    """What this machine has now."""

    cpus: int
    memory: int  # bytes available
    files: int | None  # open files a process may hold (RLIMIT_NOFILE); None: no limit
    tasks: int | None  # processes and threads of this user (RLIMIT_NPROC); None: no limit

    @classmethod
    def now(cls) -> Machine:
        import psutil

        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cpus = os.cpu_count() or 1
        return cls(
            cpus,
            psutil.virtual_memory().available,
            _soft_limit(resource.RLIMIT_NOFILE),
            _soft_limit(resource.RLIMIT_NPROC),
        )

    def holds(self, load: Load) -> bool:
        return (
            load.memory <= self.memory
            and load.start_cpu <= self.cpus * WORKER_START_TIMEOUT / 2
            and (self.files is None or load.files <= self.files)
            and (self.tasks is None or load.tasks <= self.tasks)
        )

    def __str__(self) -> str:
        limits = [f"{self.cpus} CPUs", f"{self.memory / GiB:.1f} GiB of memory available"]
        if self.files is not None:
            limits.append(f"{self.files} open files")
        if self.tasks is not None:
            limits.append(f"{self.tasks} processes and threads")
        return ", ".join(limits)


def check_fits(flag: str, value: int, load: Callable[[int], Load]) -> None:
    """Raise HarnessError, naming the most that fits, if `value` for `flag`
    is more than this machine can run; `load(n)` is what the command takes
    with n (more never takes less)."""
    machine = Machine.now()
    if machine.holds(load(value)):
        return
    most, over = 0, value
    while over - most > 1:
        mid = (most + over) // 2
        if machine.holds(load(mid)):
            most = mid
        else:
            over = mid
    raise HarnessError(f"{flag} {value} is more than this machine can run (at most {most} here: {machine})")
