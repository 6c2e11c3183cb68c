"""The conformance matrix: deterministic two-transaction schedules,
one per documented conflict claim, per engine, isolation level and layout.

- :mod:`harness.matrices.conformance.cells`: the op kinds, layouts, the cells and the
  expectation table (spec M1-M6, C16, C17, E5, E6, P1, P2); engine-free.
- :mod:`harness.matrices.conformance.rows`: what each op does to the rows, so a
  committed cell's table can be compared with every allowed serial order.
- :mod:`harness.matrices.conformance.verdict`: observation + expectation -> verdict.
- :mod:`harness.matrices.conformance.deltars_backend`: runs a cell on delta-rs, both
  transactions on table objects loaded at the same version.
- :mod:`harness.matrices.conformance.cell_worker` / :mod:`harness.matrices.conformance.matrix`: the
  matrix runs its cells in a worker process with a per-cell timeout, then
  checks each cell (data model + the serializability checker) and writes
  conformance.md and conformance.json.
"""
