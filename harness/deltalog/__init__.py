"""Reads a Delta table's transaction log directly, never through an engine.

The checkers judge engines, so they must not see the table through one: an
engine bug in log replay would hide the very anomaly we look for. This
package parses ``_delta_log`` itself (JSON commits ``<20-digit version>.json``,
classic, multi-part and v2 parquet/JSON checkpoints, ``_last_checkpoint``)
from a local directory or from S3, and reads data files with pyarrow,
deletion vectors applied (``file_rows`` gives a data file's physical rows,
``add_rows`` the rows an add makes live, and ``rows_at`` uses it).

Robustness is the point: a checker runs after chaos, so a broken commit file
is evidence, not an error. Nothing here raises on bad log *content*; every
oddity becomes a :class:`LogProblem` and the reader carries on with what it
can read. It does raise on programmer errors (asking for a version past the
end) and on an unreachable store (that is the environment, not the table).

Paths: an add's ``path`` is a URI; relative ones (the usual) are
percent-encoded relative to the table root. delta-rs double-encodes partition
directories: the directory ``part=a%20b`` (Hive escaping of ``a b``) appears
in the log as ``part=a%2520b``, so exactly one ``unquote`` gives the object
name. ``live_files`` keys are the raw log paths, so they match the log text.

The modules, each importing only those above it in this list: ``names``
(log entry names), ``actions`` (commits, their parser and checks),
``schema`` (Delta types as Arrow), ``dv`` (deletion vectors), ``store``
(local directory or S3), ``checkpoints``, ``_pool`` (reader processes),
``datafiles`` (data files into Arrow), ``log`` (:class:`TransactionLog`),
``read`` (:func:`read_log`) and ``copy`` (:func:`copy_table`).
"""

from harness.deltalog.actions import Commit, LogProblem, parse_commit_bytes
from harness.deltalog.copy import DataFileKeeper, copy_table
from harness.deltalog.dv import (
    DV_MAGIC,
    DV_MAGIC_NATIVE,
    DeletionVectorError,
    decode_roaring_bitmap_array,
    dv_bytes,
    dv_file_path,
    dv_from_file,
    dv_positions,
    z85_decode,
    z85_encode,
)
from harness.deltalog.log import TransactionLog, column_values
from harness.deltalog.names import LOG_DIR
from harness.deltalog.read import read_log

__all__ = [
    "DV_MAGIC",
    "DV_MAGIC_NATIVE",
    "LOG_DIR",
    "Commit",
    "DeletionVectorError",
    "LogProblem",
    "TransactionLog",
    "DataFileKeeper",
    "column_values",
    "copy_table",
    "decode_roaring_bitmap_array",
    "dv_bytes",
    "dv_file_path",
    "dv_from_file",
    "dv_positions",
    "parse_commit_bytes",
    "read_log",
    "z85_decode",
    "z85_encode",
]
