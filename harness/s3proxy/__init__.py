"""L1: the S3 fault proxy. `server` runs as its own process between engine
clients and the S3 server; `client` starts and steers it (nemeses, tests)."""
