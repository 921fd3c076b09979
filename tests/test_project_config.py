"""The project config file (issue 28 item 1): discovery, paths relative to the file, flags
winning over it, positioned errors (exit 2) and ``sophon-dsl config``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sophon_dsl.cli import main
from sophon_dsl.config import ConfigError, discover, find_config, load_config

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "examples" / "competitors_tools.py"


def project(tmp_path: Path, body: str, name: str = "pyproject.toml") -> Path:
    (tmp_path / name).write_text(body, encoding="utf-8")
    shutil.copy(TOOLS, tmp_path / "tools.py")
    plans = tmp_path / "plans"
    plans.mkdir(exist_ok=True)
    (plans / "p.plan").write_text('$state.a = web.search(query="x")\nsheet.create(title="t", rows=[$state.zz])\n',
                                  encoding="utf-8")
    return plans / "p.plan"


def test_found_walking_up_and_paths_are_relative_to_the_file(tmp_path):
    plan = project(tmp_path, '[project]\nname = "x"\n\n'
                             '[tool.sophon-dsl]\ntools = ["tools.py", "mcp:stdio:srv", "mymod"]\n')
    assert find_config(plan) == tmp_path / "pyproject.toml"
    config = discover(plan)
    assert config.get("tools") == (str(tmp_path / "tools.py"), "mcp:stdio:srv", "mymod")
    assert config.origin("tools") == f"{tmp_path / 'pyproject.toml'}:5"


def test_pyproject_without_the_table_is_passed_over_and_sophon_toml_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.sophon-dsl]\nstrict = true\n', encoding="utf-8")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[tool.ruff]\nline-length = 100\n', encoding="utf-8")
    assert find_config(inner) == tmp_path / "pyproject.toml"
    (inner / "sophon.toml").write_text('strict = false\n', encoding="utf-8")
    assert find_config(inner) == inner / "sophon.toml"
    assert load_config(inner / "sophon.toml").get("strict") is False


@pytest.mark.parametrize("name", ["pyproject.toml", "sophon.toml"])
def test_a_file_with_a_byte_order_mark_is_read(tmp_path, name):
    # (Windows editors write one; the pyproject.toml's table went unseen, sophon.toml was
    # "not valid TOML" at 1:1)
    header = "[tool.sophon-dsl]\r\n" if name == "pyproject.toml" else ""
    plan = project(tmp_path, "\ufeff" + header + 'tools = ["tools.py"]\r\nstrict = true\r\n', name)
    assert find_config(plan) == tmp_path / name
    config = discover(plan)
    assert config.get("tools") == (str(tmp_path / "tools.py"),) and config.get("strict") is True
    assert config.origin("strict") == f"{tmp_path / name}:{3 if header else 2}"


def test_check_takes_tools_and_strict_from_the_file(tmp_path, capsys):
    plan = project(tmp_path, '[tool.sophon-dsl]\ntools = ["tools.py"]\nstrict = true\n')
    # W303 (a state path nothing writes) is only a warning: it fails under the file's strict
    assert main(["check", str(plan)]) == 1
    out = capsys.readouterr()
    assert "W303" in out.out and "E201" not in out.out and "--strict" in out.err


def test_flags_win_over_the_file(tmp_path, capsys):
    plan = project(tmp_path, '[tool.sophon-dsl]\ntools = ["missing_tools.py"]\n')
    # the file's tools would be a usage error; --tools replaces them
    assert main(["check", str(plan), "--tools", str(TOOLS)]) == 0
    capsys.readouterr()
    assert main(["check", str(plan)]) == 2
    assert "missing_tools.py" in capsys.readouterr().err


def test_stdlib_false_and_table(tmp_path, capsys):
    plan = project(tmp_path, '[tool.sophon-dsl]\nstdlib = false\n')
    (plan.parent / "s.plan").write_text('text.split(text="abc")\n', encoding="utf-8")
    assert main(["check", str(plan.parent / "s.plan")]) == 1
    assert "E201" in capsys.readouterr().out
    (tmp_path / "pyproject.toml").write_text('[tool.sophon-dsl.stdlib]\ngroups = ["text"]\n', encoding="utf-8")
    assert main(["check", str(plan.parent / "s.plan")]) == 0, capsys.readouterr()


@pytest.mark.parametrize("body, where, message", [
    ('[tool.sophon-dsl]\n\nstrictt = true\n', ":3:1:", "unknown setting 'strictt'; did you mean 'strict'?"),
    ('[tool.sophon-dsl]\ntools = "tools.py"\n', ":2:1:", "'tools' must be a list"),
    ('[tool.sophon-dsl]\napprove = "maybe"\n', ":2:1:", "'approve' must be one of yes, no, ask, wait"),
    ('[tool.sophon-dsl]\nstrict = [\n', ":2:", "not valid TOML"),
    ('[tool.sophon-dsl.stdlib]\nhttp_timeout = "soon"\n', ":2:1:", "'stdlib.http_timeout' must be a number"),
    ('[tool.sophon-dsl.stdlib]\nsmtp_hots = "x"\n', ":2:1:", "did you mean 'smtp_host'?"),
])
def test_a_bad_file_is_a_positioned_usage_error(tmp_path, capsys, body, where, message):
    plan = project(tmp_path, body)
    assert main(["check", str(plan)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'pyproject.toml'}{where}" in err and message in err and "Traceback" not in err
    with pytest.raises(ConfigError):
        discover(plan)
    assert main(["config", str(plan)]) == 2


def test_config_command_shows_values_and_origins(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SOPHON_DSL_STORE", raising=False)
    monkeypatch.delenv("SOPHON_DSL_EXECUTOR", raising=False)
    project(tmp_path, 'strict = true\nstore = "sqlite:///runs.db"\nplans = ["plans/*.yaml"]\n', name="sophon.toml")
    monkeypatch.chdir(tmp_path / "plans")
    assert main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    settings = shown["settings"]
    assert shown["file"] == str(tmp_path / "sophon.toml")
    assert settings["strict"] == {"value": True, "origin": f"{tmp_path / 'sophon.toml'}:1"}
    assert settings["store"]["value"] == f"sqlite:///{tmp_path / 'runs.db'}"
    assert settings["executor"]["origin"] == "default"
    assert settings["plans"]["value"][0] == "plans/*.yaml"
    assert main(["config"]) == 0
    assert "strict = true  # " in capsys.readouterr().out


def test_no_config_file_changes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 0
    assert "none found" in capsys.readouterr().out
