"""Issue 25 through the CLI: a misspelt flag gets a did-you-mean and a directory of only
JSON/YAML plans says how to check them (item 14)."""

from __future__ import annotations

import pytest

from sophon_dsl.cli import main


def _code(argv):
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_a_misspelt_flag_gets_did_you_mean(tmp_path, capsys):
    plan = tmp_path / "p.plan"
    plan.write_text('echo(x=1)\n', encoding="utf-8")
    assert _code(["check", "--tool", "x.py", str(plan)]) == 2
    err = capsys.readouterr().err
    assert "usage: sophon-dsl check" in err      # the command's usage, not the top level's
    assert "unrecognized arguments: --tool; did you mean '--tools'?" in err
    assert _code(["run", str(plan), "--jsn"]) == 2
    assert "did you mean '--json'?" in capsys.readouterr().err
    assert _code(["check", str(plan), "--frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --frobnicate" in err and "did you mean" not in err


@pytest.mark.parametrize("names", [["a.json", "b.yaml"], ["sub/c.yml"]])
def test_a_directory_of_json_and_yaml_plans_says_how_to_check_them(tmp_path, capsys, names):
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("[]\n", encoding="utf-8")
    assert main(["check", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"{len(names)} JSON/YAML file(s) were not read" in err
    assert f"to check them, name them: sophon-dsl check {tmp_path / names[0]}".rsplit("/", 1)[0] in err
    assert "*." in err
