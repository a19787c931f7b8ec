"""A throwaway PostgreSQL server for the tests and benchmarks: initdb and pg_ctl in a
temporary directory, listening on a Unix socket only, as the ``postgres`` user when run as root
(initdb refuses root). Debian's ``postgresql`` package provides the binaries
(``apt-get install -y postgresql``); without them the tests that need a server skip, naming it."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PgServer", "find_bin"]


def find_bin(name: str) -> str | None:
    """A PostgreSQL program on PATH, or in Debian's versioned directory."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return versions[-1] if versions else None


class PgServer:
    """One PostgreSQL cluster in a temporary directory; ``url`` connects to its ``postgres``
    database as the superuser ``hmem`` over the socket."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if initdb is None or self.pg_ctl is None:
            raise FileNotFoundError("no PostgreSQL here: apt-get install -y postgresql")
        self.root = Path(tempfile.mkdtemp(prefix="hmem-pg-"))
        self.data, self.socket = self.root / "data", self.root / "sock"
        self.socket.mkdir()
        self.log = self.socket / "server.log"
        os.chmod(self.root, 0o755)
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.socket, "postgres")
            self.data.mkdir(mode=0o700)
            shutil.chown(self.data, "postgres")
        self._run(initdb, "-D", str(self.data), "-A", "trust", "-U", "hmem", "--no-sync")
        self.url = f"postgresql://hmem@/postgres?host={self.socket}"
        self.start()

    def new_store(self, schema: str) -> str:
        """The URL of a new, empty store on this server: a schema of its own (named in the
        URL's search_path)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as con:
            con.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}&options=-csearch_path%3D{schema}"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self._run(self.pg_ctl or "pg_ctl", "-D", str(self.data), "-l", str(self.log),
                  "-w", "-o", f"-k {self.socket} -c listen_addresses='' -c fsync=on", "start")

    def kill(self) -> None:
        """SIGKILL the postmaster and every server process of this cluster (a crash)."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        for p in [pid, *map(int, children.stdout.split())]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not any(Path(f"/proc/{p}").exists() for p in [pid]):
                return
            time.sleep(0.05)

    def stop(self) -> None:
        subprocess.run([*self._as, self.pg_ctl or "pg_ctl", "-D", str(self.data), "-m",
                        "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)
