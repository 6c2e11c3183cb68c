"""L2: one run. The plan (what to run, written to spec.json), the runner that
composes storage, engine nodes, client workers and nemeses, and the files a
run leaves behind."""
