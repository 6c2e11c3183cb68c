"""The names inside ``_delta_log``: which entries are commits, which are
checkpoints (classic, multi-part, v2), which are the side files a healthy log
may carry, and which paths are URIs rather than names relative to the table."""

from __future__ import annotations

import re

LOG_DIR = "_delta_log"
# A coordinated-commits table's staged commits, inside LOG_DIR.
STAGED_DIR = "_staged_commits"

_COMMIT_RE = re.compile(r"^(\d{20})\.json$")
_CKPT_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_CKPT_PART_RE = re.compile(r"^(\d{20})\.checkpoint\.(\d+)\.(\d+)\.parquet$")
_CKPT_V2_RE = re.compile(r"^(\d{20})\.checkpoint\.([0-9A-Za-z-]+)\.(json|parquet)$")
# Files every healthy log may carry that are neither commits nor checkpoints.
_EXPECTED_OTHER = re.compile(r"^(\d{20}\.crc|\d{20}\.\d{20}\.compacted\.json|_last_checkpoint|_last_vacuum_info)$")
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
