"""A SQLite history of every bench run (embedded; default ./.neuroedge/history.sqlite)."""

from __future__ import annotations

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


def default_path() -> Path:
    """``$NEUROEDGE_HISTORY`` if set, else ``$NEUROEDGE_HOME/history.sqlite`` (./.neuroedge)."""
    if os.environ.get("NEUROEDGE_HISTORY"):
        return Path(os.environ["NEUROEDGE_HISTORY"])
    return Path(os.environ.get("NEUROEDGE_HOME", ".neuroedge")) / "history.sqlite"


def record(report: dict[str, Any], db_path: str | os.PathLike[str] | None = None,
           out_dir: str | None = None) -> int:
    """Store one report.json document; returns its run id."""
    path = Path(db_path) if db_path else default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        cur = db.execute("INSERT INTO runs(created, model, machine, out_dir, report) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (report["created"], report["model"], report["machine"], out_dir,
                          json.dumps(report)))
        run_id = int(cur.lastrowid)
        db.executemany(
            "INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(run_id, row["variant"], row["backend"], name, m["value"], m["unit"], m["how"])
             for row in report["rows"] for name, m in row["metrics"].items()])
    return run_id


def runs(db_path: str | os.PathLike[str] | None = None,
         model: str | None = None) -> list[dict[str, Any]]:
    """Every recorded run (newest last), optionally of one model, as report documents."""
    path = Path(db_path) if db_path else default_path()
    if not path.is_file():
        return []
    with sqlite3.connect(path) as db:
        query, args = "SELECT report FROM runs", ()
        if model:
            query, args = query + " WHERE model = ?", (model,)
        return [json.loads(r[0]) for r in db.execute(query + " ORDER BY id", args)]
