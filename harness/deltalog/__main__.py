"""A reader process of harness.deltalog._pool: ``python -m harness.deltalog
<parent pid>`` serves read requests on stdin until it closes. It serves from
the module proper, not from __main__, so what it pickles names
harness.deltalog._pool's classes, which the parent resolves."""

import sys

from harness.deltalog._pool import _worker_main

_worker_main(int(sys.argv[1]))
