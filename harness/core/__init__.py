"""L0, the bottom layer: what every other part of the harness speaks.

Errors, child processes, the history (ops and their events), the table
declaration, isolation levels and the storage seam. Imports nothing of the
project.
"""
