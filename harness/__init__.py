"""delta-jepsen's harness, in layers; a layer imports only the layers below it
(tests/test_layers.py enforces this):

- L0 ``core`` (errors, processes, history, table, isolation, storage seam) and
  ``deltalog`` (the table's own log, read without an engine);
- L1 ``engines``, ``s3proxy``, and beside the harness the packages
  ``checkers``, ``workloads`` and ``nemeses``;
- L2 ``run`` (plan, runner, workers) and ``check`` (the check pipeline);
- L3 ``matrices`` and ``bench``;
- L4 ``cli``.
"""

import os

# gRPC (under PySpark's Spark Connect client) installs fork handlers that
# restart its poller thread in a forked child. Children started with a
# preexec_fn (fork, then exec: harness.core.procs) close inherited descriptors
# under that thread, and the child can abort before exec (seen: moto_server
# exit -6 after "Epoll1Poller ... epoll_wait error: Bad file descriptor").
# Nothing here forks a process that goes on using gRPC, so the handlers
# are not needed.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
