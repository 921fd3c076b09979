"""The formatter keeps `#` comments (they are trivia on the model, excluded from equality)."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))

from strategies import plans

from sophon_dsl.cli import main
from sophon_dsl.loader import dumps, loads
from sophon_dsl.model import Call, Literal, Mode, Plan
from sophon_dsl.syntax.dsl_parser import parse_dsl
from sophon_dsl.syntax.dsl_printer import format_comment, print_dsl

COMMENTED = '''\
#!/usr/bin/env sophon-dsl
# Research plan.
#   (indented line kept as written)

# what we want
goal = "Compare"   # the goal
tool web.search = {description: "Search"}  # declared inline

# first step
@risk(low)
# between the decorator and the call
s1: $state.a = web.search(
    query="Acme",  # inside the arguments
    # on its own line inside the arguments
)  # after the call
$state.b = web.search(query="B"); $state.c = web.search(query="C")  # on the second call
# before return
return $state.a  # the answer
# end of file
'''

FORMATTED = '''\
#!/usr/bin/env sophon-dsl
# Research plan.
#   (indented line kept as written)

# what we want
goal = "Compare"  # the goal
tool web.search = {description: "Search"}  # declared inline

# first step
# between the decorator and the call
# inside the arguments
# on its own line inside the arguments
@risk(low)
s1: $state.a = web.search(query="Acme")  # after the call
$state.b = web.search(query="B")
$state.c = web.search(query="C")  # on the second call
# before return
return $state.a  # the answer
# end of file
'''


def fmt(text: str) -> str:
    plan, diags = parse_dsl(text)
    assert diags == [], diags
    return print_dsl(plan)


def test_every_comment_is_kept_in_place():
    assert fmt(COMMENTED) == FORMATTED


def test_formatting_commented_text_is_idempotent():
    assert fmt(FORMATTED) == FORMATTED


def test_comments_do_not_change_the_plan():
    with_comments, _ = parse_dsl(COMMENTED)
    without = "\n".join(line.split("  #")[0].split("   #")[0] for line in COMMENTED.split("\n")
                        if not line.lstrip().startswith("#"))
    plain, diags = parse_dsl(without)
    assert diags == []
    assert with_comments == plain


def test_where_comments_attach():
    plan, _ = parse_dsl(COMMENTED)
    assert plan.comments == ("#!/usr/bin/env sophon-dsl", "# Research plan.",
                             "#   (indented line kept as written)")
    assert plan.field_comments == (
        ("goal", ("# what we want",), "# the goal"),
        ("tool web.search", (), "# declared inline"),
        ("return", ("# before return",), "# the answer"),
    )
    assert plan.trailing_comments == ("# end of file",)
    s1, b, c = plan.calls
    assert s1.comments == ("# first step", "# between the decorator and the call",
                           "# inside the arguments", "# on its own line inside the arguments")
    assert s1.trailing_comment == "# after the call"
    assert b.comments == () and b.trailing_comment is None
    assert c.trailing_comment == "# on the second call"


def test_header_comments_follow_their_field_when_reordered():
    text = 'id = "p"  # the id\n# why lazy\nmode = lazy\n# the goal\ngoal = "g"\n'
    assert fmt(text) == '# the goal\ngoal = "g"\n# why lazy\nmode = lazy\nid = "p"  # the id\n'


def test_comments_of_an_omitted_field_are_not_lost():
    # `mode = eager` is the default and is not printed: its comments move to the next statement
    out = fmt('# keep\nmode = eager  # default\nf()\n')
    assert out == '# keep\n# default\nf()\n'
    assert fmt(out) == out


def test_header_comment_without_blank_line_attaches_to_first_statement():
    assert fmt("# about f\nf()\n") == "# about f\nf()\n"
    plan, _ = parse_dsl("# about f\nf()\n")
    assert plan.comments == () and plan.calls[0].comments == ("# about f",)
    plan, _ = parse_dsl("# file\n\n# about f\nf()\n")
    assert plan.comments == ("# file",) and plan.calls[0].comments == ("# about f",)
    assert fmt("# file\n\n\n# about f\nf()\n") == "# file\n\n# about f\nf()\n"


def test_comments_after_header_go_with_the_first_call():
    assert fmt('goal = "g"\n# step one\nf()\n') == 'goal = "g"\n\n# step one\nf()\n'


def test_trailing_comments_at_end_of_file():
    assert fmt("f()\n# a\n\n# b\n") == "f()\n# a\n# b\n"
    assert fmt('goal = "g"\n# end\n') == 'goal = "g"\n# end\n'
    plan, _ = parse_dsl('goal = "g"\n# end\n')
    assert plan.trailing_comments == ("# end",)


def test_comment_only_files():
    assert fmt("# just a note\n") == "# just a note\n"
    assert fmt("#a\n\n#b\n") == "# a\n\n# b\n"
    assert fmt("") == ""


def test_comment_normalisation():
    assert fmt("f()   #x   \n") == "f()  # x\n"
    assert fmt("#\nf()\n") == "#\nf()\n"
    assert fmt("#!x\n#:y\n## banner\n#\tz\nf()\n") == "#!x\n#:y\n## banner\n# z\nf()\n"
    assert format_comment("plain text") == ["# plain text"]
    assert format_comment("# a\nb\rc") == ["# a", "# b", "# c"]
    assert format_comment("") == ["#"]


def test_crlf_source():
    assert fmt("# a\r\nf()  # b\r\n") == "# a\nf()  # b\n"


def test_hash_inside_strings_is_not_a_comment():
    assert fmt('f(x="# not a comment")  # real\n') == 'f(x="# not a comment")  # real\n'


def test_long_calls_keep_trailing_comment_on_the_closing_line():
    args = ", ".join(f'p{i}="{"x" * 20}"' for i in range(4))
    out = fmt(f"# long\ntool({args}) -> 1  # done\n")
    assert out.startswith("# long\ntool(\n") and out.endswith(") -> 1  # done\n")
    assert fmt(out) == out


def test_programmatic_comments():
    plan = Plan(
        (Call("f", comments=("step one", "# two"), trailing_comment="why\nnot"),),
        goal="g", mode=Mode.LAZY, output=Literal(1),
        comments=("file",), field_comments=(("mode", ("lazy on purpose",), None), ("return", (), "r")),
        trailing_comments=("bye",),
    )
    text = print_dsl(plan)
    assert text == ('# file\n\ngoal = "g"\n# lazy on purpose\nmode = lazy\n\n# step one\n# two\n'
                    'f()  # why # not\nreturn 1  # r\n# bye\n')
    parsed, diags = parse_dsl(text)
    assert diags == [] and parsed == plan
    assert print_dsl(parsed) == text


def test_json_and_yaml_forms_drop_comments():
    plan = loads(COMMENTED)
    for form in ("json", "yaml"):
        text = dumps(plan, form)
        assert "first step" not in text and "end of file" not in text
        again = loads(text, form)
        assert again == plan  # the model is equal; the comments are gone
        assert again.comments == () and again.field_comments == () and again.trailing_comments == ()
        assert all(c.comments == () and c.trailing_comment is None for c in again.calls)


def test_cli_fmt_keeps_comments(tmp_path, capsys):
    path = tmp_path / "plan.plan"
    path.write_text(COMMENTED, encoding="utf-8")
    assert main(["fmt", str(path)]) == 0
    assert capsys.readouterr().out == FORMATTED
    assert main(["fmt", str(path), "--check"]) == 1
    assert main(["fmt", "-w", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == FORMATTED
    assert main(["fmt", str(path), "--check"]) == 0
    assert main(["fmt", "-w", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == FORMATTED


def test_cli_fmt_check_accepts_formatted_commented_file(tmp_path):
    path = tmp_path / "ok.plan"
    path.write_text(FORMATTED, encoding="utf-8")
    assert main(["fmt", str(path), "--check"]) == 0


def _all_comments(plan: Plan):
    return (plan.comments, plan.field_comments, plan.trailing_comments,
            [(c.comments, c.trailing_comment) for c in plan.calls])


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plans(comments=True))
def test_generated_comments_survive_print_and_parse(plan):
    """Canonical comments in canonical places come back exactly where they were."""
    text = print_dsl(plan)
    parsed, diags = parse_dsl(text)
    assert diags == [], (text, diags)
    assert parsed == plan
    assert print_dsl(parsed) == text
    if plan.calls or plan.has_header or plan.output is not None:
        assert _all_comments(parsed) == _all_comments(plan), text


@settings(max_examples=75, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plans(max_calls=3, comments=True), st.data())
def test_mutated_commented_plans_never_raise(plan, data):
    text = print_dsl(plan)
    for _ in range(data.draw(st.integers(1, 3))):
        if not text:
            break
        i = data.draw(st.integers(0, len(text)))
        piece = data.draw(st.sampled_from(list("()[]{},;:=\"'\n @$†#|&")))
        text = text[:i] + piece + text[i + data.draw(st.integers(0, 1)):]
    plan2, _ = parse_dsl(text)
    again = print_dsl(plan2)  # whatever parsed prints, comments included
    assert isinstance(again, str)
