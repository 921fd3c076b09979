"""`check`, `fmt` and `graph` walk a directory for DSL plans (*.plan, *.sophon, *.dsl).

Before, `sophon-dsl fmt --check examples/` was a usage error ("is a directory"); users of
black and `terraform fmt` expect the tree to be walked.  JSON and YAML files met on the walk
are not read (beside plans they are inputs, tool declarations, CI files), hidden
directories are skipped, the exit code is the worst file's, a missing path exits 2 before
any file is read or written."""

from __future__ import annotations

import json

import pytest

from sophon_dsl.cli import main

FORMATTED = '$state.profile = fetchUserProfile(userName="Alice")\n'
UNFORMATTED = '†state.summary = summarizeProfile(profile=†state.profile)\n'
BROKEN = "$state.x = f(a=\n"


@pytest.fixture
def tree(tmp_path):
    """plans/ with a formatted plan, an unformatted one in a subdirectory, files that are not
    plans (which would not load as plans), and a broken plan in a hidden directory."""
    root = tmp_path / "plans"
    (root / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "a.plan").write_text(FORMATTED, encoding="utf-8")
    (root / "sub" / "b.sophon").write_text(UNFORMATTED, encoding="utf-8")
    (root / "input.json").write_text('{"team": ["ana@example.com"]}\n', encoding="utf-8")
    (root / "ci.yaml").write_text("on: push\njobs: {}\n", encoding="utf-8")
    (root / "notes.txt").write_text("not a plan\n", encoding="utf-8")
    (root / ".hidden" / "broken.plan").write_text(BROKEN, encoding="utf-8")
    return root


def test_fmt_check_walks_a_directory_and_names_only_the_unformatted_plan(tree, capsys):
    assert main(["fmt", "--check", str(tree)]) == 1
    err = capsys.readouterr().err
    assert f"{tree / 'sub' / 'b.sophon'}: not formatted" in err
    for other in ("a.plan", "input.json", "ci.yaml", "notes.txt", "broken.plan"):
        assert other not in err


def test_fmt_w_on_a_directory_rewrites_it_and_check_then_passes(tree, capsys):
    assert main(["fmt", "-w", str(tree)]) == 0
    assert (tree / "sub" / "b.sophon").read_text(encoding="utf-8") == \
        "$state.summary = summarizeProfile($state.profile)\n"
    assert (tree / "ci.yaml").read_text(encoding="utf-8") == "on: push\njobs: {}\n"
    assert (tree / ".hidden" / "broken.plan").read_text(encoding="utf-8") == BROKEN
    capsys.readouterr()
    assert main(["fmt", "--check", str(tree)]) == 0
    assert capsys.readouterr().err == ""


def test_fmt_prints_each_walked_plan_in_sorted_order(tree, capsys):
    assert main(["fmt", str(tree)]) == 0
    assert capsys.readouterr().out == FORMATTED + "$state.summary = summarizeProfile($state.profile)\n"


def test_check_walks_and_counts_the_plans_it_read(tree, capsys):
    (tree / "sub" / "c.dsl").write_text(BROKEN, encoding="utf-8")
    assert main(["check", str(tree), "--no-stdlib"]) == 1  # the broken c.dsl (and unknown tools)
    out = capsys.readouterr()
    assert "c.dsl:1:" in out.out and "input.json" not in out.out and "ci.yaml" not in out.out
    assert "3 plan(s) checked" in out.err


def test_check_on_a_directory_of_valid_plans_passes(tmp_path, capsys):
    (tmp_path / "one.plan").write_text(FORMATTED, encoding="utf-8")
    tools = tmp_path / "tools.yaml"  # not a plan: a walk does not read it
    tools.write_text("tools:\n  fetchUserProfile:\n    input: {type: object}\n    output: {type: object}\n",
                     encoding="utf-8")
    assert main(["check", str(tmp_path), "--tools", str(tools)]) == 0
    assert "1 plan(s) checked: 0 error(s), 0 warning(s)" in capsys.readouterr().out


def test_a_file_named_and_reached_by_the_walk_is_read_once(tree, capsys):
    assert main(["check", str(tree), str(tree / "a.plan"), "--no-stdlib", "--format", "json"]) == 1
    diags = json.loads(capsys.readouterr().out)
    assert sum(1 for d in diags if d["file"].endswith("a.plan")) == 1


def test_json_and_yaml_plans_are_read_when_named(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text('[{"_tool": "f", "_outputPath": "†state.x"}]\n', encoding="utf-8")
    assert main(["fmt", "--check", str(tmp_path)]) == 0  # the walk skips it, with a warning
    assert "no plan files" in capsys.readouterr().err
    assert main(["fmt", "--to", "dsl", str(plan)]) == 0
    assert capsys.readouterr().out == "$state.x = f()\n"


def test_a_missing_path_exits_2_before_any_file_is_written(tree, capsys):
    assert main(["fmt", "-w", str(tree), str(tree / "missing")]) == 2
    assert f"{tree / 'missing'}: no such file or directory" in capsys.readouterr().err
    assert (tree / "sub" / "b.sophon").read_text(encoding="utf-8") == UNFORMATTED
    for command in (["check"], ["graph"], ["fmt", "--check"]):
        assert main([*command, str(tree / "missing")]) == 2


def test_a_directory_without_plans_is_a_warning_not_a_failure(tmp_path, capsys):
    (tmp_path / "input.json").write_text("{}", encoding="utf-8")
    assert main(["fmt", "--check", str(tmp_path)]) == 0
    assert "warning" in capsys.readouterr().err
    assert main(["check", str(tmp_path)]) == 0
    assert "0 plan(s) checked" in capsys.readouterr().out


def test_worst_outcome_wins_across_files_and_directories(tree, capsys):
    bad = tree.parent / "context.json"  # fmt --to dsl refuses it (exit 2): it holds input data
    bad.write_text(json.dumps([{"type": "input", "a": 1}, {"type": "plan", "plan": [{"_tool": "f"}]}]),
                   encoding="utf-8")
    assert main(["fmt", "--to", "dsl", str(tree), str(bad)]) == 2
    capsys.readouterr()
    (tree / "sub" / "c.plan").write_text(BROKEN, encoding="utf-8")
    assert main(["fmt", "--check", str(tree)]) == 1  # a plan that does not load is 1, as before


def test_graph_json_on_a_directory_is_a_list_with_files_even_for_one_plan(tmp_path, capsys):
    (tmp_path / "one.plan").write_text(FORMATTED, encoding="utf-8")
    assert main(["graph", str(tmp_path), "--format", "json"]) == 0
    graphs = json.loads(capsys.readouterr().out)
    assert [g["file"] for g in graphs] == [str(tmp_path / "one.plan")]
    assert main(["graph", str(tmp_path / "one.plan"), "--format", "json"]) == 0
    assert "file" not in json.loads(capsys.readouterr().out)


def test_help_says_what_a_directory_stands_for(capsys):
    for command in ("check", "fmt", "graph"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "*.plan, *.sophon and *.dsl" in out and "JSON and YAML plans are read when named" in out


def test_several_mermaid_or_dot_graphs_each_name_their_file(tree, capsys):
    (tree / "sub" / "b.sophon").write_text(FORMATTED.replace("profile", "other"), encoding="utf-8")
    assert main(["graph", str(tree), "--no-stdlib"]) == 0
    out = capsys.readouterr().out
    assert out.count("graph TD\n    %% ") == 2
    assert f"%% {tree / 'a.plan'}\n" in out and f"%% {tree / 'sub' / 'b.sophon'}\n" in out
    assert main(["graph", str(tree), "--no-stdlib", "--format", "dot"]) == 0
    assert f'digraph "plan" {{\n    // {tree / "a.plan"}\n' in capsys.readouterr().out
    assert main(["graph", str(tree / "a.plan"), "--no-stdlib"]) == 0
    assert "%%" not in capsys.readouterr().out  # one plan named: the graph alone, as before
