"""A throwaway PostgreSQL cluster on 127.0.0.1 for the store tests (initdb + pg_ctl).

Run as root, the server runs as the ``postgres`` user (created if missing).  Without the
binaries the tests skip locally, and fail in CI (``CI`` set): .ci/run installs them.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

_counter = itertools.count()


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for base in sorted(os.listdir("/usr/lib/postgresql"), reverse=True) if os.path.isdir("/usr/lib/postgresql") else ():
        cand = os.path.join("/usr/lib/postgresql", base, "bin", name)
        if os.path.exists(cand):
            return cand
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self) -> None:
        self.initdb, self.pg_ctl = _binary("initdb"), _binary("pg_ctl")
        if not self.initdb or not self.pg_ctl:
            if os.environ.get("CI"):
                pytest.fail("PostgreSQL binaries (initdb, pg_ctl) are missing: .ci/run installs them")
            pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
        self.root = tempfile.mkdtemp(prefix="sophon-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = _free_port()
        self.user = None
        if os.geteuid() == 0:
            self.user = "postgres"
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
            os.chmod(self.root, 0o777)
            shutil.chown(self.root, "postgres")

    def _run(self, *argv: str) -> None:
        cmd = list(argv)
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.root)

    def start(self) -> "Cluster":
        self._run(self.initdb, "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off"
        self._run(self.pg_ctl, "-D", self.data, "-o", opts, "-l", os.path.join(self.root, "log"), "-w", "start")
        return self

    def stop(self) -> None:
        try:
            self._run(self.pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)
