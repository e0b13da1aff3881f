"""A SQLite history of every bench run (embedded; default ./.neuroedge/history.sqlite)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    model TEXT NOT NULL,
    machine TEXT NOT NULL,
    out_dir TEXT,
    report TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    variant TEXT NOT NULL,
    backend TEXT NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    how TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_by_name ON metrics(name, backend);
"""
RUN_COLUMNS = ("id", "created", "model", "machine", "out_dir", "report")
METRIC_COLUMNS = ("run_id", "variant", "backend", "name", "value", "unit", "how")


def default_path() -> Path:
    """``$NEUROEDGE_HISTORY`` if set, else ``$NEUROEDGE_HOME/history.sqlite`` (./.neuroedge)."""
    if os.environ.get("NEUROEDGE_HISTORY"):
        return Path(os.environ["NEUROEDGE_HISTORY"])
    from neuroedge.paths import home

    return home() / "history.sqlite"  # an empty NEUROEDGE_HOME is refused there, not "."


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def _open(path: Path) -> sqlite3.Connection:
    """A connection to the history at ``path`` with its tables made; ArtifactError naming the
    file where it cannot be opened, is not a SQLite database, or holds other tables (a
    database that is refused is left as it was: the tables are checked before any is made)."""
    from neuroedge.errors import ArtifactError

    if path.is_dir():
        raise ArtifactError(f"history {path}: is a directory, not a SQLite file")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path)
    except sqlite3.Error as exc:
        raise ArtifactError(f"history {path}: cannot be opened ({exc})") from exc
    try:
        _make_tables(db, path)
    except (sqlite3.DatabaseError, ArtifactError) as exc:
        db.close()
        if isinstance(exc, ArtifactError):
            raise
        raise ArtifactError(f"history {path}: not a neuroedge history database ({exc})") from exc
    return db


def _make_tables(db: sqlite3.Connection, path: Path) -> None:
    """Check the tables, then make the missing ones, in one write transaction: another
    process opening the same new file at once sees both tables or none, never ``runs``
    alone (``executescript`` committed each CREATE on its own). A history that already has
    them all is only read (no write lock), so a read-only one can still be listed."""
    index = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'metrics_by_name'"
    if _check_tables(db, path) and db.execute(index).fetchone():
        return
    db.execute("BEGIN IMMEDIATE")  # waits (connect's timeout) for another process's CREATEs
    try:
        if not _check_tables(db, path):  # checked again under the lock
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
        db.commit()
    finally:
        if db.in_transaction:  # refused or failed: nothing made
            db.rollback()


def _check_tables(db: sqlite3.Connection, path: Path) -> bool:
    """An empty database (False), or one whose runs and metrics tables are neuroedge's
    (True when both are there); ArtifactError for any other."""
    from neuroedge.errors import ArtifactError

    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables.discard("sqlite_sequence")
    for table, want in (("runs", RUN_COLUMNS), ("metrics", METRIC_COLUMNS)):
        if table in tables and _columns(db, table) != list(want):
            raise ArtifactError(
                f"history {path}: its table {table!r} has columns "
                f"{_columns(db, table)}, not neuroedge's {list(want)}"
            )
    if tables and not {"runs", "metrics"} <= tables:
        raise ArtifactError(
            f"history {path}: a SQLite database with other tables {sorted(tables)}, not a "
            "neuroedge history (give a new file or an existing history)"
        )
    return bool(tables)


def _path(db_path: str | os.PathLike[str] | None) -> Path:
    """``db_path``, or the default history when None; an empty path (an unset shell variable
    in ``--history $DB``) is refused, never read as "the default"."""
    from neuroedge.errors import ArtifactError
    from neuroedge.paths import refuse_empty

    if db_path is None:
        return default_path()
    refuse_empty(
        db_path,
        "history",
        "name a SQLite file or leave --history out for the default",
        ArtifactError,
    )
    return Path(db_path)


def check(db_path: str | os.PathLike[str] | None = None) -> Path:
    """The history path, checked before a benchmark runs (so a bad path fails first, not
    after the run): it must be, or become, a neuroedge SQLite history we can write (a row
    is inserted and rolled back)."""
    from neuroedge.errors import ArtifactError

    path = _path(db_path)
    with contextlib.closing(_open(path)) as db:
        try:
            db.execute("INSERT INTO runs(created, model, machine, report) VALUES ('', '', '', '')")
        except sqlite3.Error as exc:
            raise ArtifactError(f"history {path}: cannot be written ({exc})") from exc
        finally:
            db.rollback()
    return path


def record(
    report: dict[str, Any],
    db_path: str | os.PathLike[str] | None = None,
    out_dir: str | None = None,
) -> int:
    """Store one report.json document; returns its run id."""
    path = _path(db_path)
    with contextlib.closing(_open(path)) as db, db:  # commit (or roll back), then close
        cur = db.execute(
            "INSERT INTO runs(created, model, machine, out_dir, report) VALUES (?, ?, ?, ?, ?)",
            (report["created"], report["model"], report["machine"], out_dir, json.dumps(report)),
        )
        run_id = int(cur.lastrowid)
        db.executemany(
            "INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, row["variant"], row["backend"], name, m["value"], m["unit"], m["how"])
                for row in report["rows"]
                for name, m in row["metrics"].items()
                if m["value"] is not None  # not finite when measured: null in report.json
            ],
        )
    return run_id


def runs(
    db_path: str | os.PathLike[str] | None = None, model: str | None = None
) -> list[dict[str, Any]]:
    """Every recorded run (newest last), optionally of one model, as report documents."""
    path = _path(db_path)
    if not path.is_file():
        return []
    with contextlib.closing(_open(path)) as db:
        query, args = "SELECT report FROM runs", ()
        if model:
            query, args = query + " WHERE model = ?", (model,)
        return [json.loads(r[0]) for r in db.execute(query + " ORDER BY id", args)]
