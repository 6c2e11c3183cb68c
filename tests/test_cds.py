"""The Spark Connect JVMs' class-data sharing archive: who records it, when
a recording is kept, and that a killed recorder leaves nothing. The JVM side
(an archive mapped into a second start) is in tests/test_deltaspark.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.engines import cds
from harness.engines.cds import ClassArchive


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DJ_JAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(cds.ENV, raising=False)
    return tmp_path / "cache"


def _recorded(opt: str) -> Path:
    assert opt.startswith("-XX:ArchiveClassesAtExit="), opt
    return Path(opt.split("=", 1)[1])


def test_the_first_jvm_records_others_wait_and_the_archive_is_mapped_once_kept() -> None:
    a, b = ClassArchive(["/jars/a.jar"], "-Xopt"), ClassArchive(["/jars/a.jar"], "-Xopt")
    assert a.path == b.path  # one archive per jar set and options
    tmp = _recorded(a.java_option("n1"))
    assert a.java_option("n2") == ""  # one recorder per engine ...
    assert b.java_option("n1") == ""  # ... and per machine (the lock)
    tmp.write_bytes(b"archive")  # what the JVM writes at its exit
    a.finish("n1", exited_cleanly=True)
    assert a.path.read_bytes() == b"archive" and not tmp.exists() and not a.lock.exists()
    assert b.java_option("n1") == f"-XX:SharedArchiveFile={a.path}"


def test_a_killed_recorder_leaves_no_archive_and_frees_the_lock() -> None:
    a = ClassArchive(["/jars/a.jar"], "")
    tmp = _recorded(a.java_option("n1"))
    tmp.write_bytes(b"half an archive")
    a.finish("n1", exited_cleanly=False)
    assert not a.path.exists() and not tmp.exists() and not a.lock.exists()
    # A restarted node (the kill nemesis) records afresh; its dead JVM's file goes.
    tmp = _recorded(a.java_option("n1"))
    tmp.write_bytes(b"dead")
    again = _recorded(a.java_option("n1"))
    assert not tmp.exists() or tmp == again
    a.finish("n1", exited_cleanly=True)  # the new JVM wrote nothing: still no archive
    assert not a.path.exists() and not a.lock.exists()


def test_another_jar_set_or_option_is_another_archive() -> None:
    base = ClassArchive(["/jars/a.jar"], "-Xopt").path
    assert ClassArchive(["/jars/b.jar"], "-Xopt").path != base
    assert ClassArchive(["/jars/a.jar"], "-Xother").path != base


def test_a_stale_lock_is_taken_over_and_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    a = ClassArchive(["/jars/a.jar"], "")
    a.lock.parent.mkdir(parents=True, exist_ok=True)
    a.lock.write_text("")
    assert a.java_option("n1") == ""  # a live recorder elsewhere
    old = time.time() - cds.STALE_LOCK_S - 60
    os.utime(a.lock, (old, old))
    assert a.java_option("n1").startswith("-XX:ArchiveClassesAtExit=")  # a dead one's lock
    a.discard("n1")
    monkeypatch.setenv(cds.ENV, "0")
    assert ClassArchive(["/jars/a.jar"], "").java_option("n1") == ""


def test_recording_one_prunes_the_least_recently_used_beyond_the_kept_few() -> None:
    olds = [ClassArchive([f"/venv{i}/a.jar"], "") for i in range(cds.KEEP_ARCHIVES + 2)]
    for age, old in enumerate(olds):
        old.path.parent.mkdir(parents=True, exist_ok=True)
        old.path.write_bytes(b"old")
        t = time.time() - 1000 * (age + 1)
        os.utime(old.path, (t, t))
    # The oldest is used now: it becomes the most recently used.
    assert olds[-1].java_option("n1") == f"-XX:SharedArchiveFile={olds[-1].path}"
    new = ClassArchive(["/venv-new/a.jar"], "")
    tmp = _recorded(new.java_option("n1"))
    tmp.write_bytes(b"archive")
    new.finish("n1", exited_cleanly=True)
    kept = sorted(p.name for p in new.path.parent.glob("*.jsa"))
    assert kept == sorted([new.path.name, olds[-1].path.name, *(o.path.name for o in olds[: cds.KEEP_ARCHIVES - 2])])


def test_an_archive_whose_class_path_is_gone_is_pruned_first(tmp_path: Path) -> None:
    """A removed checkout's archives go as soon as another is recorded, even
    the most recently used; an archive on a class path still there stays,
    and so does one recorded before class paths were kept beside them."""
    jar = tmp_path / "venv-kept" / "a.jar"
    gone = tmp_path / "venv-removed" / "a.jar"
    for p in (jar, gone):
        p.parent.mkdir(parents=True)
        p.write_bytes(b"jar")
    recorded = []
    for classpath in ([str(jar)], [str(gone)]):
        a = ClassArchive(classpath, "")
        _recorded(a.java_option("n1")).write_bytes(b"archive")
        a.finish("n1", exited_cleanly=True)
        recorded.append(a)
    kept, removed = recorded
    assert kept.path.is_file() and removed.path.is_file()  # both class paths there
    unknown = ClassArchive(["/from/older/code.jar"], "")
    unknown.path.write_bytes(b"archive")  # no class path beside it
    gone.unlink()
    new = ClassArchive([str(jar)], "-Xother")
    _recorded(new.java_option("n1")).write_bytes(b"archive")
    new.finish("n1", exited_cleanly=True)
    left = sorted(p.name for p in new.path.parent.iterdir() if p.suffix != ".lock")
    assert left == sorted(
        [
            *(a.path.name for a in (new, kept, unknown)),
            *(cds.classpath_file(a.path).name for a in (new, kept)),
        ]
    )


def _pyspark(root: Path, jar: bytes = b"jar") -> Path:
    """A pyspark folder as a virtualenv holds one: a launcher, jars, a cache."""
    home = root / "site-packages" / "pyspark"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "__pycache__").mkdir()
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (home / "bin" / "spark-submit").chmod(0o755)
    (home / "jars" / "spark-core.jar").write_bytes(jar)
    (home / "__pycache__" / "x.pyc").write_bytes(os.urandom(8))  # differs between virtualenvs
    return home


def test_two_virtualenvs_of_one_pyspark_start_their_jvms_from_one_linked_spark(tmp_path: Path) -> None:
    first, second = _pyspark(tmp_path / "venv1"), _pyspark(tmp_path / "venv2")
    home = cds.stable_spark_home(first)
    assert home != first and home.parent == cds.cache_root() / "spark-homes"
    assert cds.stable_spark_home(second) == home  # the same files: the same class path, its archives
    jar = home / "jars" / "spark-core.jar"
    assert jar.stat().st_ino == (first / "jars" / "spark-core.jar").stat().st_ino  # links, not copies
    assert os.access(home / "bin" / "spark-submit", os.X_OK)
    assert not (home / "__pycache__").exists()
    # The first virtualenv removed: the linked files live on for the second.
    import shutil

    shutil.rmtree(tmp_path / "venv1")
    assert jar.read_bytes() == b"jar" and cds.stable_spark_home(second) == home
    # Another pyspark is another copy; a third evicts the least recently used.
    other = cds.stable_spark_home(_pyspark(tmp_path / "venv3", b"other jar"))
    assert other != home and home.is_dir()
    third = cds.stable_spark_home(_pyspark(tmp_path / "venv4", b"third jar"))
    assert sorted((cds.cache_root() / "spark-homes").iterdir()) == sorted([other, third])


def test_without_links_or_the_archive_the_jvm_starts_from_the_virtualenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = _pyspark(tmp_path / "venv")

    def cross_device(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    with monkeypatch.context() as mp:
        mp.setattr(cds.os, "link", cross_device)
        assert cds.stable_spark_home(venv) == venv
    assert not any((cds.cache_root() / "spark-homes").iterdir())  # no half copy left
    monkeypatch.setenv(cds.ENV, "0")
    assert cds.stable_spark_home(venv) == venv
