"""The JSON reader's fast path finds each node's line from a packed array of line starts
and the line of the span before (json_source._Measurer); its spans are those of the
plain line index, wherever the offsets fall and in whatever order they are asked."""

from hypothesis import given, settings
from hypothesis import strategies as st

from sophon_dsl.syntax.json_source import _Measurer
from sophon_dsl.syntax.located import LineIndex


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\n", max_size=80), st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80)), max_size=40))
def test_measurer_spans_are_the_line_index_spans(text, offsets):
    measurer, lines = _Measurer(text), LineIndex(text)
    for a, b in offsets:
        a, b = min(a, b, len(text)), min(max(a, b), len(text))
        assert measurer.span(a, b) == lines.span(a, b)
