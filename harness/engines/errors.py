"""Classify the errors engines raise: which conflict (spec E1..E6), and
whether the op surely did not apply (history ``fail``) or may have (``info``).

Pure functions of the exception (or of its type name and message, for
recorded strings); nothing here imports an engine.

Where the texts come from (see tests/test_error_classification.py for the
recorded samples):

- delta-rs (Python ``deltalake``): every commit conflict is a
  ``CommitFailedError`` whose message is ``"Failed to commit transaction: "``
  followed by the text of the conflict-checker error (``CommitConflictError``):
  E1 "Commit failed: a concurrent transactions added new data.", E2 "... a
  concurrent transaction deleted data this operation read.", E3 "... a
  concurrent transaction deleted the same data your transaction deletes.",
  E4 "Metadata changed since last commit.", E5 "Concurrent transaction
  failed.", E6 "Protocol changed since last commit: <detail>". Running out of
  retries (or ``max_commit_retries=0``) is "Failed to commit transaction: <n>"
  with a bare number, which names no class. "Delta transaction failed,
  version <n> already exists." (a plain ``DeltaError``) is a lost race on the
  log entry itself. Storage errors are ``OSError`` (PyIOError).
- Sail reuses those texts (its Delta code is ported from delta-rs) and sends
  them as ``SparkRuntimeException``. Sail 0.7 gives a non-append, non-create
  write no retries, so a conflict is "Failed to commit transaction: 0" and the
  conflict checker never runs: the class is not reported.
- delta-spark / Databricks: ``io.delta.exceptions.ConcurrentAppendException``
  and friends (Databricks: ``com.databricks.sql.transaction.tahoe.*``), with
  error conditions DELTA_CONCURRENT_APPEND, DELTA_CONCURRENT_DELETE_READ,
  DELTA_CONCURRENT_DELETE_DELETE, DELTA_METADATA_CHANGED,
  DELTA_CONCURRENT_TRANSACTION, DELTA_PROTOCOL_CHANGED (newer releases add
  sub-conditions such as ``.WITHOUT_HINT``), DELTA_CONCURRENT_WRITE and
  DELTA_MAX_COMMIT_RETRIES_EXCEEDED (conflicts without a class). Through
  Spark Connect they reach PySpark as ``UnknownException`` whose text starts
  with ``(<jvm class>) [<CONDITION>] ...`` and whose ``getCondition()`` is the
  condition; through classic PySpark, as ``delta.exceptions.*`` classes.

Definite or not: a recognised conflict, or an error the engine raises while
parsing, analysing or validating, is definite. Anything that can come from the
storage or the network (I/O errors, timeouts, connection resets, 5xx, a lost
Spark Connect stream), and any error we do not recognise, is indeterminate:
the commit PUT may have landed. Caveat, unverified: an object-store client
that retries a conditional PUT whose first attempt landed sees "already
exists" and may report a conflict (or "version already exists") for a commit
that did happen; the harness's log checkers must not take a conflict's
``fail`` as proof beyond what the log shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.core.history import FAIL, INFO, ErrorClass, OpError

RAW_LIMIT = 4000

E = ErrorClass


@dataclass(frozen=True)
class Classified:
    cls: ErrorClass
    definite: bool  # True: definitely not applied (fail); False: indeterminate (info)
    raw: str  # "<ExceptionType>: <message>", truncated to RAW_LIMIT

    @property
    def history_type(self) -> str:
        return FAIL if self.definite else INFO

    def op_error(self) -> OpError:
        return OpError(self.cls, self.raw)


# --------------------------------------------------------------------------
# Text markers
# --------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Error conditions of delta-spark / Databricks, longest first so that
# DELTA_CONCURRENT_DELETE_DELETE is not read as a prefix of something else.
_CONDITIONS: tuple[tuple[str, ErrorClass], ...] = (
    ("DELTA_CONCURRENT_DELETE_DELETE", E.CONCURRENT_DELETE_DELETE),
    ("DELTA_CONCURRENT_DELETE_READ", E.CONCURRENT_DELETE_READ),
    ("DELTA_CONCURRENT_APPEND", E.CONCURRENT_APPEND),
    ("DELTA_METADATA_CHANGED", E.METADATA_CHANGED),
    ("DELTA_CONCURRENT_TRANSACTION", E.CONCURRENT_TRANSACTION),
    ("DELTA_PROTOCOL_CHANGED", E.PROTOCOL_CHANGED),
    ("DELTA_CONCURRENT_WRITE", E.UNCLASSIFIED_CONFLICT),
    ("DELTA_MAX_COMMIT_RETRIES_EXCEEDED", E.UNCLASSIFIED_CONFLICT),
    ("DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL", E.UNCLASSIFIED_CONFLICT),
)
_CONDITION_RE = re.compile(r"\b(" + "|".join(c for c, _ in _CONDITIONS) + r")(?:\.[A-Z0-9_]+)?\b")
_CONDITION_CLS = dict(_CONDITIONS)

# JVM / Python exception class names (simple names; any package).
_CLASS_NAMES: tuple[tuple[str, ErrorClass], ...] = (
    ("ConcurrentAppendException", E.CONCURRENT_APPEND),
    ("ConcurrentDeleteReadException", E.CONCURRENT_DELETE_READ),
    ("ConcurrentDeleteDeleteException", E.CONCURRENT_DELETE_DELETE),
    ("MetadataChangedException", E.METADATA_CHANGED),
    ("ConcurrentTransactionException", E.CONCURRENT_TRANSACTION),
    ("ProtocolChangedException", E.PROTOCOL_CHANGED),
    ("ConcurrentWriteException", E.UNCLASSIFIED_CONFLICT),
    # Delta's own base class. Not java.util.ConcurrentModificationException,
    # which Delta's classes extend but which the JVM throws for a collection
    # changed under an iterator: no conflict.
    ("DeltaConcurrentModificationException", E.UNCLASSIFIED_CONFLICT),
)
_CLASS_NAME_RE = re.compile(r"\b(" + "|".join(n for n, _ in _CLASS_NAMES) + r")\b")
_CLASS_NAME_CLS = dict(_CLASS_NAMES)

# delta-rs CommitConflictError texts (Sail carries the same ones).
_RS_CONFLICTS: tuple[tuple[re.Pattern[str], ErrorClass], ...] = (
    (re.compile(r"a concurrent transactions? added new data", re.I), E.CONCURRENT_APPEND),
    (re.compile(r"a concurrent transaction deleted data this operation read", re.I), E.CONCURRENT_DELETE_READ),
    (
        re.compile(r"a concurrent transaction deleted the same data your transaction deletes", re.I),
        E.CONCURRENT_DELETE_DELETE,
    ),
    (re.compile(r"Metadata changed since last commit", re.I), E.METADATA_CHANGED),
    (re.compile(r"Concurrent transaction failed", re.I), E.CONCURRENT_TRANSACTION),
    (re.compile(r"Protocol changed since last commit", re.I), E.PROTOCOL_CHANGED),
    # Sail only: a concurrent domainMetadata change; not one of E1..E6.
    (re.compile(r"Domain metadata changed since last commit", re.I), E.UNCLASSIFIED_CONFLICT),
    # Only raised while resolving a conflict against a newer commit.
    (re.compile(r"Failed to commit transaction: Error evaluating predicate", re.I), E.UNCLASSIFIED_CONFLICT),
    # MaxCommitAttempts: "Failed to commit transaction: 15" (a bare count).
    (re.compile(r"Failed to commit transaction: \d+\s*$", re.M), E.UNCLASSIFIED_CONFLICT),
    # VersionAlreadyExists, as DeltaTableError and as TransactionError.
    (re.compile(r"version \d+ already exists", re.I), E.UNCLASSIFIED_CONFLICT),
    (re.compile(r"Tried committing existing table version", re.I), E.UNCLASSIFIED_CONFLICT),
)

# Texts of the delta-spark messages, for a message that lost its condition
# and class name (older releases, logs).
_JVM_TEXTS: tuple[tuple[re.Pattern[str], ErrorClass], ...] = (
    (re.compile(r"Files were added to .{0,200}? by a concurrent update", re.I | re.S), E.CONCURRENT_APPEND),
    (re.compile(r"attempted to read one or more files that were deleted", re.I), E.CONCURRENT_DELETE_READ),
    (re.compile(r"attempted to delete one or more files that were deleted", re.I), E.CONCURRENT_DELETE_DELETE),
    (re.compile(r"metadata of the Delta table has been changed by a concurrent update", re.I), E.METADATA_CHANGED),
    (
        re.compile(r"protocol version of the Delta table has been changed by a concurrent update", re.I),
        E.PROTOCOL_CHANGED,
    ),
    (re.compile(r"multiple streaming queries are using the same checkpoint", re.I), E.CONCURRENT_TRANSACTION),
    (
        re.compile(r"A concurrent transaction has written new data since the current transaction read", re.I),
        E.UNCLASSIFIED_CONFLICT,
    ),
)

_TIMEOUT_RE = re.compile(
    r"timed[ _-]?out|deadline[ _]exceeded|\b\w*Timeout(?:Error|Exception)\b|Gateway Timeout"
    r"|\b(?:request|operation|read|connect|connection|query|op|commit) timeout\b",
    re.I,
)

_NETWORK_RE = re.compile(
    "|".join(
        [
            r"connection (?:refused|reset|aborted|closed)",
            r"broken pipe",
            r"error sending request",
            r"tcp connect error",
            r"dns error",
            r"failed to lookup address",
            r"network is unreachable",
            r"no route to host",
            r"StatusCode\.(?:UNAVAILABLE|CANCELLED)",
            r"(?-i:\bUNAVAILABLE\b)",
            r"failed to connect to all addresses",
            r"socket closed",
            r"RETRIES_EXCEEDED",
            r"request or response body error",
            r"error decoding response body",
            r"incomplete message",
            r"unexpected EOF",
            r"connection (?:was )?(?:forcibly )?closed",
            r"\bHTTP error\b",
            r"\b5\d\d (?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)\b",
            r"status(?: code)?[:= ]+5\d\d\b",
            r"(?-i:\bSlowDown\b|\bServiceUnavailable\b|\bInternalError\b)",
            r"Log storage error",
            r"Generic (?:S3|GCS|MicrosoftAzure|Azure|HTTP|LocalFileSystem|HadoopFileSystem) error",
        ]
    ),
    re.I,
)

# The op committed (or may have) but a later step failed.
# Only what says a commit step failed: a word like "checkpoint" alone is
# no evidence (reading a checkpoint fails before any commit).
_AFTER_COMMIT_RE = re.compile(
    r"DELTA_POST_COMMIT_HOOK_FAILED|DELTA_INVALID_COMMITTED_VERSION|post-commit|Error writing checkpoint",
    re.I,
)

# A feature the engine lacks, in the words engines use where they give no
# type or condition (delta-rs and its kernel, DataFusion, Sail).
_UNSUPPORTED_RE = re.compile(
    r"does not support (?:writer|reader) version|Unsupported minimum (?:reader|writer) version"
    r"|unsupported table features|not supported in Delta Kernel|Unsupported deletion vector"
    r"|\bnot (?:yet )?(?:supported|implemented)\b|\bUnsupported: |\[(?:DELTA_)?UNSUPPORTED_\w*\]",
    re.I,
)
# A type error of the statement itself, which engines also word as
# unsupported ("Unsupported cast from Utf8 to Int64", arrow's "Casting from
# .. to .. not supported"): an error of the op, never a missing feature.
_TYPE_ERROR_RE = re.compile(r"\bcast(?:ing)?\b|type[_ ]coercion|cannot infer common", re.I)


def _unsupported_text(text: str) -> bool:
    return bool(_UNSUPPORTED_RE.search(text)) and not _TYPE_ERROR_RE.search(text)


_OSERROR_NAMES = frozenset(
    {
        "OSError",
        "IOError",
        "EnvironmentError",
        "FileNotFoundError",
        "FileExistsError",
        "PermissionError",
        "TimeoutError",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "ConnectionAbortedError",
        "BrokenPipeError",
        "InterruptedError",
        "BlockingIOError",
        "socket.timeout",
    }
)

# Errors raised before anything is written: parsing, analysis, validation.
_DEFINITE_PY = frozenset(
    {
        "ValueError",
        "TypeError",
        "KeyError",
        "IndexError",
        "AttributeError",
        "NotImplementedError",
        "AssertionError",
        "ArrowInvalid",
        "ArrowTypeError",
        "ArrowNotImplementedError",
        "ArrowKeyError",
    }
)
# deltalake's own exception types.
_DELTARS_DEFINITE = frozenset({"TableNotFoundError", "SchemaMismatchError", "DeltaProtocolError", "DeltaError"})
# PySpark / Spark Connect types for parse, analysis and validation errors.
_SPARK_DEFINITE = frozenset(
    {
        "AnalysisException",
        "ParseException",
        "IllegalArgumentException",
        "NumberFormatException",
        "ArithmeticException",
        "ArrayIndexOutOfBoundsException",
        "DateTimeException",
        "SparkUpgradeException",
        "InvalidPlanInput",
        "InvalidCommandInput",
        "PySparkValueError",
        "PySparkTypeError",
        "PySparkAttributeError",
        "PySparkKeyError",
        "PySparkIndexError",
        "PySparkNotImplementedError",
        "PySparkAssertionError",
        "TempTableAlreadyExistsException",
    }
)
_SPARK_DEFINITE_CONDITION = re.compile(
    r"^(?:TABLE_OR_VIEW_NOT_FOUND|TABLE_OR_VIEW_ALREADY_EXISTS|PARSE_SYNTAX_ERROR|UNRESOLVED_|"
    r"DATATYPE_MISMATCH|INVALID_|DELTA_TABLE_NOT_FOUND|DELTA_MISSING_|DELTA_SCHEMA_|"
    r"DELTA_FAILED_TO_MERGE_FIELDS|DELTA_NOT_A_DELTA_TABLE|PATH_NOT_FOUND|CANNOT_|"
    r"DIVIDE_BY_ZERO|CAST_INVALID_INPUT|NUM_COLUMNS_MISMATCH)"
)


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


def _chain(exc: BaseException, limit: int = 5) -> list[BaseException]:
    """The exception and its causes (``raise ... from``) / contexts."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(out) < limit:
        out.append(cur)
        seen.add(id(cur))
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return out


def _message(exc: BaseException) -> str:
    try:
        msg = str(exc)
    except Exception as e:  # a broken __str__ must not break classification
        msg = f"<unprintable {type(exc).__name__}: {e!r}>"
    return _ANSI.sub("", msg).strip()


def truncate(text: str, limit: int = RAW_LIMIT) -> str:
    if len(text) <= limit:
        return text
    marker = f" ...[{len(text) - limit} chars truncated]"
    return text[: max(0, limit - len(marker))] + marker


def format_raw(type_name: str, message: str, causes: Sequence[tuple[str, str]] = ()) -> str:
    text = f"{type_name}: {_ANSI.sub('', message).strip()}"
    for t, m in causes:
        text += f"\n  caused by {t}: {m}"
    return truncate(text)


def _names(exc: BaseException) -> list[str]:
    return [c.__name__ for c in type(exc).__mro__]


def _described(exc: BaseException) -> tuple[str, str, list[tuple[str, str]]]:
    chain = _chain(exc)
    causes = [(type(c).__name__, _message(c)) for c in chain[1:]]
    return type(exc).__name__, _message(exc), causes


# --------------------------------------------------------------------------
# Shared rules
# --------------------------------------------------------------------------


def _first_match(text: str, rules: Iterable[tuple[re.Pattern[str], ErrorClass]]) -> ErrorClass | None:
    best: tuple[int, ErrorClass] | None = None
    for pat, cls in rules:
        m = pat.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), cls)
    return best[1] if best else None


def _conflict_from_jvm(text: str, condition: str | None = None) -> ErrorClass | None:
    if condition:
        m = _CONDITION_RE.match(condition.strip())
        if m:
            return _CONDITION_CLS[m.group(1)]
    m = _CONDITION_RE.search(text)
    if m:
        return _CONDITION_CLS[m.group(1)]
    m = _CLASS_NAME_RE.search(text)
    if m:
        return _CLASS_NAME_CLS[m.group(1)]
    return _first_match(text, _JVM_TEXTS)


def _conflict_from_rs(text: str) -> ErrorClass | None:
    return _first_match(text, _RS_CONFLICTS)


def _is_timeout(type_names: Iterable[str], text: str) -> bool:
    names = set(type_names)
    return bool(names & {"TimeoutError", "timeout", "ReadTimeout", "ConnectTimeout"}) or bool(_TIMEOUT_RE.search(text))


def _is_network(text: str) -> bool:
    return bool(_NETWORK_RE.search(text))


def _indeterminate(type_names: Sequence[str], text: str) -> Classified | None:
    """Timeouts and network/storage failures: the commit may have landed."""
    if _is_timeout(type_names, text):
        return Classified(E.TIMEOUT, False, "")
    if _is_network(text):
        return Classified(E.NOT_A_CONFLICT, False, "")
    return None


def _with_raw(c: Classified, raw: str) -> Classified:
    return Classified(c.cls, c.definite, raw)


# --------------------------------------------------------------------------
# delta-rs
# --------------------------------------------------------------------------


def classify_deltars_text(
    type_name: str, message: str, bases: Sequence[str] = (), causes: Sequence[tuple[str, str]] = ()
) -> Classified:
    """Classify a delta-rs (Python ``deltalake``) error from its type name(s)
    and message. ``bases`` are the names of the type's base classes, when
    known (``type(exc).__mro__``)."""
    raw = format_raw(type_name, message, causes)
    names = [type_name, *bases]
    text = "\n".join([_ANSI.sub("", message), *(m for _, m in causes)])

    if "PanicException" in names:  # a Rust panic: no telling how far it got
        return Classified(E.CRASH, False, raw)

    conflict = _conflict_from_rs(text)
    if conflict is not None:
        return Classified(conflict, True, raw)

    ind = _indeterminate(names, text)
    if ind is not None:
        return _with_raw(ind, raw)
    if set(names) & _OSERROR_NAMES:
        # object_store errors become OSError; the failing request may be
        # the commit PUT itself.
        return Classified(E.NOT_A_CONFLICT, False, raw)
    if _AFTER_COMMIT_RE.search(text):
        return Classified(E.NOT_A_CONFLICT, False, raw)
    if "NotImplementedError" in names or _unsupported_text(text):
        return Classified(E.UNSUPPORTED, True, raw)

    if "CommitFailedError" in names:
        # TransactionError variants that are no conflict. "Transaction
        # failed: ..." is a log-store (e.g. DynamoDB) failure during the
        # commit: indeterminate, like anything unrecognised here.
        if re.search(
            r"append-only|Table features must be specified|Snapshot is corrupted|"
            r"No metadata found",
            text,
            re.I,
        ):
            return Classified(E.NOT_A_CONFLICT, True, raw)
        return Classified(E.NOT_A_CONFLICT, False, raw)
    if set(names) & (_DELTARS_DEFINITE | _DEFINITE_PY):
        return Classified(E.NOT_A_CONFLICT, True, raw)
    return Classified(E.NOT_A_CONFLICT, False, raw)


def classify_deltars(exc: BaseException) -> Classified:
    t, m, causes = _described(exc)
    return classify_deltars_text(t, m, bases=_names(exc)[1:], causes=causes)


# --------------------------------------------------------------------------
# Spark (Spark Connect: Sail, delta-spark, Databricks; classic PySpark)
# --------------------------------------------------------------------------


def classify_spark_text(
    type_name: str,
    message: str,
    *,
    condition: str | None = None,
    bases: Sequence[str] = (),
    causes: Sequence[tuple[str, str]] = (),
) -> Classified:
    """Classify an error from a Spark session from its type name, message and
    (when PySpark has one) error condition (``exc.getCondition()``)."""
    raw = format_raw(type_name, message, causes)
    names = [type_name, *bases]
    text = "\n".join([_ANSI.sub("", message), *(m for _, m in causes)])

    # The Python type itself (delta.exceptions.* on classic PySpark).
    for n in names:
        if n in _CLASS_NAME_CLS:
            return Classified(_CLASS_NAME_CLS[n], True, raw)

    # A committed-then-failed report beats everything else.
    if (condition and _AFTER_COMMIT_RE.search(condition)) or re.search(
        r"DELTA_POST_COMMIT_HOOK_FAILED|DELTA_INVALID_COMMITTED_VERSION", text
    ):
        return Classified(E.NOT_A_CONFLICT, False, raw)

    conflict = _conflict_from_jvm(text, condition)
    if conflict is None:
        conflict = _conflict_from_rs(text)  # Sail
    if conflict is not None:
        return Classified(conflict, True, raw)

    # Sail's log listing raced by concurrent commits: it surfaces as a
    # runtime error, or as an analysis error when the read is being planned;
    # either way the store was read mid-change, so nothing is provable.
    if re.search(r"Missing commit file: expected version \d+, found \d+", text):
        return Classified(E.NOT_A_CONFLICT, False, raw)

    # Raised while parsing or analysing, before anything runs: definite,
    # whatever words the message holds (a column may be called `timeout`).
    if (
        "UnsupportedOperationException" in names
        or "NotImplementedError" in names
        or ("PySparkNotImplementedError" in names)
    ):
        return Classified(E.UNSUPPORTED, True, raw)
    if condition and re.match(r"(?:DELTA_)?UNSUPPORTED_", condition):
        return Classified(E.UNSUPPORTED, True, raw)
    if set(names) & (_SPARK_DEFINITE | _DEFINITE_PY):
        return Classified(E.NOT_A_CONFLICT, True, raw)
    if condition and _SPARK_DEFINITE_CONDITION.match(condition):
        return Classified(E.NOT_A_CONFLICT, True, raw)
    if re.match(r"\s*(?:\([\w.$]+\)\s*)?\[(?:TABLE_OR_VIEW_NOT_FOUND|PARSE_SYNTAX_ERROR)", message):
        return Classified(E.NOT_A_CONFLICT, True, raw)

    ind = _indeterminate(names, text)
    if ind is not None:
        return _with_raw(ind, raw)
    if set(names) & _OSERROR_NAMES or "RpcError" in names or "RetriesExceeded" in names:
        return Classified(E.NOT_A_CONFLICT, False, raw)
    # SparkRuntimeException, SparkException, UnknownException, ...: Sail maps
    # storage and execution failures (including ones in the commit) here.
    return Classified(E.NOT_A_CONFLICT, False, raw)


def _condition(exc: BaseException) -> str | None:
    for getter in ("getCondition", "getErrorClass"):
        fn = getattr(exc, getter, None)
        if callable(fn):
            try:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    v = fn()
            except Exception:
                continue
            if v:
                return str(v)
    return None


def classify_spark(exc: BaseException) -> Classified:
    t, m, causes = _described(exc)
    return classify_spark_text(t, m, condition=_condition(exc), bases=_names(exc)[1:], causes=causes)


__all__ = [
    "Classified",
    "RAW_LIMIT",
    "classify_deltars",
    "classify_deltars_text",
    "classify_spark",
    "classify_spark_text",
    "format_raw",
    "truncate",
]
