"""Upstream's agent_trace and coding_trace display fields: an agent's steps shown read only,
escaped, bounded, whatever shape a data file gives them."""

import re
from html.parser import HTMLParser

import pytest

from potato.project import display, traces

STEPS = [
    {"agent": "Researcher", "thought": "Find <studies>.", "action": "search('x')",
     "result": "Found 12."},
    {"role": "assistant", "content": "Reading the file.",
     "tool_calls": [{"tool": "Read", "input": {"file_path": "src/a.py"},
                     "output": "line\n" * 40, "output_type": "code"}]},
    "a bare string step",
]


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [a for a, _ in attrs]


def parsed(html):
    p = Tags()
    p.feed(html)
    return p


def test_each_step_shows_its_speaker_message_and_other_fields():
    out = str(traces.trace(STEPS, {}))
    assert out.startswith('<ol class="trace"><li class="trace-step"><div class="trace-head">'
                          '<span class="speaker">Researcher</span></div>')
    assert "<dt>thought</dt><dd><div class=\"trace-text\">Find &lt;studies&gt;.</div></dd>" in out
    assert '<span class="speaker">assistant</span></div><div class="trace-text">Reading the ' \
           'file.</div>' in out
    # a tool call's 40-line output is folded in a <details> the annotator opens
    assert "<details class=\"trace-long\"><summary>41 lines</summary>" in out
    assert "<dt>file_path</dt><dd><div class=\"trace-text\">src/a.py</div></dd>" in out
    assert '<li class="trace-step"><div class="trace-text">a bare string step</div></li>' in out
    assert display.RENDERERS["agent_trace"] is display.RENDERERS["coding_trace"]


def test_the_options_name_the_speaker_and_message_and_the_numbers():
    step = [{"who": "Bot", "says": "hi", "agent": "not the speaker"}]
    out = str(traces.trace(step, {"speaker_key": "who", "text_key": "says",
                                  "show_step_numbers": False, "max_output_lines": 2}))
    assert out.startswith('<ol class="trace plain"><li class="trace-step"><div '
                          'class="trace-head"><span class="speaker">Bot</span></div><div '
                          'class="trace-text">hi</div><dl class="trace-fields"><dt>agent</dt>')
    assert "<details" in str(traces.trace([{"content": "a\nb\nc"}], {"max_output_lines": 2}))
    assert "<details" not in str(traces.trace([{"content": "a\nb\nc"}],
                                              {"max_output_lines": True}))


HOSTILE = [None, 7, "x", [], {}, [None, 1.5, True], {"a": {"b": {"c": {"d": {"e": "deep"}}}}},
           [{"agent": {"x": "<b>"}, "content": ["<script>", {"k": "<img src=x>"}]}],
           [{"content": None, "role": 3}], [[["nested"]]], {"<k>": "<v>"},
           [{"agent": "a", "content": "c", "<script>": "<script>alert(1)</script>"}]]


@pytest.mark.parametrize("value", HOSTILE)
def test_any_json_value_renders_escaped(value):
    out = str(traces.trace(value, {"speaker_key": ["x"], "text_key": 5}))
    tags = parsed(out)
    assert set(tags.tags) <= {"ol", "li", "div", "span", "dl", "dt", "dd", "ul", "p",
                              "details", "summary"}
    assert set(tags.attrs) <= {"class"}


def test_bounds_say_what_was_left_out():
    long = [{"content": "s"}] * (traces.MAX_STEPS + 5)
    out = str(traces.trace(long, {}))
    assert out.count('<li class="trace-step">') == traces.MAX_STEPS
    assert out.endswith('<p class="hint">5 more steps not shown.</p>')
    wide = [{"content": "c", "calls": list(range(traces.MAX_PARTS + 3))}]
    assert '<p class="hint">3 more entries not shown.</p>' in str(traces.trace(wide, {}))
    many = [dict({"content": "c"}, **{"f%d" % n: n for n in range(traces.MAX_PARTS + 2)})]
    assert '<p class="hint">2 more fields not shown.</p>' in str(traces.trace(many, {}))
    big = [{"content": "x" * (traces.MAX_TEXT + 9)}]
    out = str(traces.trace(big, {}))
    assert "… (9 more characters)" in out and len(out) < traces.MAX_TEXT + 300
    deep = {"a": {"b": {"c": {"d": {"f": ["e"]}}}}}
    out = str(traces.trace([{"content": "c", "x": deep}], {}))
    assert re.search(r'"f": \[\s+"e"\s+\]', out.replace("&quot;", '"'))  # JSON past the depth


def test_a_trace_shows_a_bounded_number_of_values_in_all():
    # review 39.6: 20 fields of 20x20x20 lists gave a 6.7 MB page (per-level caps only)
    step = {"content": "c", **{"k%d" % n: [[[0] * 20] * 20] * 20 for n in range(20)}}
    out = str(traces.trace([step] * 3, {}))
    assert out.count("<li>") + out.count("<dd>") <= traces.MAX_VALUES
    assert out.endswith('<p class="hint">This trace is longer than a page shows: its last '
                        'values are left out.</p>')
    assert len(out) < 60 * traces.MAX_VALUES
    assert "longer than a page" not in str(traces.trace(STEPS, {}))
