"""A throwaway PostgreSQL server for the store benchmark (``bench_store.py --postgres
initdb``): initdb + pg_ctl on 127.0.0.1 and a free port, the server's default settings
(``fsync`` and ``synchronous_commit`` on: a commit is on disk when the client hears of it),
removed again at exit.  Run as root, the server runs as the ``postgres`` user (as the
tests' cluster does)."""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile


def _binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    if found is None:
        raise SystemExit(f"--postgres initdb needs the PostgreSQL server binaries ({name} not found)")
    return found


def start(fsync: bool = True) -> str:
    """Start a server; its URL (the server stops and its files go when the process exits)."""
    root = tempfile.mkdtemp(prefix="sophon-bench-pg-")
    data = os.path.join(root, "data")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
        os.chmod(root, 0o777)
        shutil.chown(root, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]

    def run(*argv: str) -> None:
        subprocess.run([*prefix, *argv], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=root)

    pg_ctl = _binary("pg_ctl")
    run(_binary("initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
    opts = f"-p {port} -h 127.0.0.1 -k {root}" + ("" if fsync else " -c fsync=off")
    run(pg_ctl, "-D", data, "-o", opts, "-l", os.path.join(root, "log"), "-w", "start")

    def stop() -> None:
        try:
            run(pg_ctl, "-D", data, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"
