"""A real PostgreSQL server (Debian's package) on 127.0.0.1 for the history store's tests, started and stopped by
the test session: ``initdb`` into a fresh directory, ``pg_ctl start`` on a free port, trust authentication on
loopback for the superuser and a password for one more role (for the bad-credentials test). As root (CI), the
server runs as the ``postgres`` user the package made: PostgreSQL refuses to run as root."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PASSWORD = "pg-Secret-77d1"


def binaries() -> Path | None:
    """The directory holding initdb and pg_ctl (PATH, else Debian's /usr/lib/postgresql/N/bin), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


class Postgres:
    def __init__(self) -> None:
        bindir = binaries()
        if bindir is None:
            raise RuntimeError("no initdb")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="jaxrel-pg-"))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.root, "postgres")
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "--auth=trust", "-U", "postgres", "-E", "UTF8")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
                  "-o", f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off", "start")
        self.count = 0
        try:
            self.sql(f"CREATE ROLE releaser LOGIN PASSWORD '{PASSWORD}'")  # DDL takes no parameters; a constant
            hba = self.data / "pg_hba.conf"
            self._run("sh", "-c", f"printf 'host all releaser 127.0.0.1/32 scram-sha-256\\n' | cat - {hba} > "
                                  f"{hba}.new && mv {hba}.new {hba}")
            self.sql("SELECT pg_reload_conf()")
        except BaseException:
            self.stop()  # a server whose setup failed is never left running
            raise

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=120)

    @property
    def admin(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def sql(self, statement: str, *parameters: object) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as connection:
            connection.execute(statement, parameters)  # type: ignore[arg-type]

    def database(self) -> str:
        """A fresh, empty database; its URL."""
        self.count += 1
        name = f"history_{self.count}"
        self.sql(f"CREATE DATABASE {name} OWNER releaser")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)
