"""Which pages each commit writes: a census of a running agent's write-ahead log.

Run (beside a running agent, e.g. during bench/pace.py):
    .venv/bin/python -m bench.walpages STATE_DIR [--seconds 60]

SQLite appends every page a transaction changed to the WAL as a frame (a 24-byte header naming
the page, then the page); a commit's last frame carries the database size
(https://www.sqlite.org/fileformat.html#the_write_ahead_log). The WAL is tailed for
``--seconds`` (restarting with it after each checkpoint), then the pages are named by table or
index from ``dbstat`` on a copy of the database. Printed: commits per second, frames per commit,
frames per table and how many commits touched it, and the most common sets of tables a commit
writes. The file's first page is ``sqlite_schema`` (its header holds the page and freelist
counts, so a commit that allocates a page writes it); an unnamed page is on the freelist.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_WAL_HEADER = 32
_FRAME_HEADER = 24


@dataclass
class WalTail:
    """Reads the frames appended to a WAL since the last call, commit by commit."""

    path: Path
    salt: bytes = b""
    offset: int = _WAL_HEADER
    pending: list[int] = field(default_factory=list)
    restarts: int = 0
    """Checkpoints that restarted the WAL since the first call."""

    def commits(self) -> list[list[int]]:
        """Page numbers of each transaction committed since the previous call."""
        done: list[list[int]] = []
        try:
            with self.path.open("rb") as wal:
                header = wal.read(_WAL_HEADER)
                if len(header) < _WAL_HEADER:
                    return done
                (page_size,) = struct.unpack(">I", header[8:12])
                if header[16:24] != self.salt:  # a new WAL after a checkpoint restarted it
                    self.restarts += bool(self.salt)
                    self.salt, self.offset, self.pending = header[16:24], _WAL_HEADER, []
                wal.seek(self.offset)
                while True:
                    frame = wal.read(_FRAME_HEADER)
                    if len(frame) < _FRAME_HEADER or frame[8:16] != self.salt:
                        return done
                    if len(wal.read(page_size)) < page_size:
                        return done
                    page, size_after = struct.unpack(">II", frame[:8])
                    self.offset += _FRAME_HEADER + page_size
                    self.pending.append(page)
                    if size_after:
                        done.append(self.pending)
                        self.pending = []
        except FileNotFoundError:
            return done


def page_names(db: Path) -> dict[int, str]:
    """Each page's table or index, from ``dbstat`` on a copy of ``db`` and its WAL."""
    with tempfile.TemporaryDirectory(prefix="walpages-") as tmp:
        copy = Path(tmp) / "copy.db"
        shutil.copy(db, copy)
        wal = db.with_name(db.name + "-wal")
        if wal.exists():
            shutil.copy(wal, copy.with_name(copy.name + "-wal"))
        conn = sqlite3.connect(copy)
        try:
            return {int(p): str(n) for n, p in conn.execute("SELECT name, pageno FROM dbstat")}
        finally:
            conn.close()


def report(
    commits: list[list[int]], names: dict[int, str], seconds: float, checkpoints: int = 0
) -> list[str]:
    """Lines of the census: rates, frames per table, commonest sets of tables per commit.

    ``checkpoints`` is how many checkpoints restarted the WAL in the window. The pages a
    checkpoint copies into the database are written a second time, so a window without one
    leaves that share out of the bytes measured in it."""
    frames = sum(len(c) for c in commits)
    lines = [
        f"{len(commits)} commits in {seconds:.0f} s ({len(commits) / seconds:.2f}/s),"
        f" {frames} frames ({frames / max(len(commits), 1):.1f} per commit),"
        f" {checkpoints} checkpoint{'' if checkpoints == 1 else 's'} restarting the WAL"
        + ("" if checkpoints else " (the bytes above leave the checkpoint's copy out)"),
        "frames per table or index (frames, commits writing it, distinct pages: what a"
        " checkpoint copies of it):",
    ]
    per_frame: collections.Counter[str] = collections.Counter()
    per_commit: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[tuple[str, ...]] = collections.Counter()
    distinct: dict[str, set[int]] = collections.defaultdict(set)
    for pages in commits:
        tables = [names.get(p, "(free)") for p in pages]
        for page, table in zip(pages, tables, strict=True):
            distinct[table].add(page)
        per_frame.update(tables)
        per_commit.update(set(tables))
        kinds[tuple(sorted(set(tables)))] += 1
    lines += [
        f"  {n:40} {k:7} {per_commit[n]:7} {len(distinct[n]):7}" for n, k in per_frame.most_common()
    ]
    lines.append("commits by the tables they write:")
    lines += [f"  {k:7}  {', '.join(t)}" for t, k in kinds.most_common(12)]
    return lines


def census(state: Path, done: Callable[[], bool]) -> list[str]:
    """Tail the agent's WAL until ``done()`` and return the census (blocking: a thread's)."""
    db = state / "agent.db"
    tail = WalTail(db.with_name(db.name + "-wal"))
    tail.commits()  # what is already there was written before the census began
    tail.restarts = 0
    commits: list[list[int]] = []
    began = time.monotonic()
    while not done():
        commits += tail.commits()
        time.sleep(0.01)  # read before a checkpoint restarts the WAL over the unread frames
    return report(commits, page_names(db), time.monotonic() - began, tail.restarts)


def main(args: argparse.Namespace) -> None:
    """Tail the WAL for ``args.seconds`` and print the census."""
    until = time.monotonic() + args.seconds
    print("\n".join(census(Path(args.state), lambda: time.monotonic() >= until)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state", help="the agent's state directory (FARM_STATE_DIR)")
    parser.add_argument("--seconds", type=float, default=60.0)
    main(parser.parse_args())
