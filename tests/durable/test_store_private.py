"""The run store, the memory store and the default sandbox are private to the user: 0700
directories, 0600 files (SQLite's -wal/-shm too), whatever the umask; an existing one
other users can read gets a warning naming it (issue 24, item 10)."""

from __future__ import annotations

import json
import os
import stat
import warnings
from pathlib import Path

import pytest

import sophon_dsl
from sophon_dsl.cli import main
from sophon_dsl.durable import default_store_url, open_store
from sophon_dsl.private import PermissionsWarning


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A data home that does not exist yet, under a permissive umask: what we create must
    not depend on the umask being 077."""
    monkeypatch.delenv("SOPHON_DSL_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg" / "data"))
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o002)
    try:
        yield tmp_path / "xdg" / "data"
    finally:
        os.umask(old)


def test_default_run_store_is_private_sidecars_included(home):
    store = open_store(default_store_url())
    try:
        data = home / "sophon-dsl"
        db = data / "runs.sqlite3"
        assert _mode(home.parent) == 0o700 and _mode(home) == 0o700 and _mode(data) == 0o700
        assert _mode(db) == 0o600
        sidecars = [p for p in (Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
        assert sidecars  # WAL mode: open while the store is open
        assert all(_mode(p) == 0o600 for p in sidecars)
    finally:
        store.close()


def test_cli_run_creates_run_and_memory_stores_and_sandbox_private(home, capsys):
    Path("p.plan").write_text('†state.m = memory.write(text="API_KEY=hunter2")\n'
                              '†state.f = files.list(path=".")\n', encoding="utf-8")
    code = main(["run", "p.plan", "--approve", "yes", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["status"] == "succeeded"
    assert "warning" not in err
    data = home / "sophon-dsl"
    assert _mode(data) == 0o700 and _mode(data / "sandbox") == 0o700
    files = [p for p in data.iterdir() if p.is_file()]
    assert {"runs.sqlite3", "memory.sqlite3"} <= {p.name for p in files}
    assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}


def test_cli_warns_about_a_store_open_to_others(home, capsys):
    data = home / "sophon-dsl"
    data.mkdir(parents=True, mode=0o755)
    os.chmod(data, 0o755)
    db = data / "runs.sqlite3"
    db.touch()
    os.chmod(db, 0o644)
    Path("p.plan").write_text('†state.x = text.split(text="a b")\n', encoding="utf-8")
    code = main(["run", "p.plan", "--approve", "yes", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (f"sophon-dsl run: warning: other users can access run data: {data} (mode 755), "
            f"{db} (mode 644)") in err
    assert _mode(db) == 0o644  # warned, not changed: the owner may share it on purpose
    # an existing memory store is named too, through the library's warning class
    mem = data / "memory.sqlite3"
    mem.touch()
    os.chmod(mem, 0o640)
    with pytest.warns(PermissionsWarning, match=rf"{mem} \(mode 640\)"):
        sophon_dsl.run('†state.m = memory.write(text="x")\n', approve=True)


def test_a_store_path_the_user_chose_checks_its_files_not_their_directory(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)  # the user's directory: theirs to set
    with warnings.catch_warnings():
        warnings.simplefilter("error", PermissionsWarning)
        open_store(f"sqlite:///{shared / 'runs.db'}").close()
    assert _mode(shared / "runs.db") == 0o600
    os.chmod(shared / "runs.db", 0o604)
    with pytest.warns(PermissionsWarning, match=r"runs\.db \(mode 604\)"):
        open_store(f"sqlite:///{shared / 'runs.db'}").close()
