"""delta-jepsen's harness: CLI, runner, engines, storage, history, log reader."""

import os

# gRPC (under PySpark's Spark Connect client) installs fork handlers that
# restart its poller thread in a forked child. Children started with a
# preexec_fn (fork, then exec: harness.procs) close inherited descriptors
# under that thread, and the child can abort before exec (seen: moto_server
# exit -6 after "Epoll1Poller ... epoll_wait error: Bad file descriptor").
# Nothing here forks a process that goes on using gRPC, so the handlers
# are not needed.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
