"""Page escaping (potato/markup.py): every interpolated value is escaped unless it is Safe.
Also the tests tools/mutation.py runs against the module (docs/testing.md)."""

from potato.markup import Safe, esc, join, render


def test_esc_escapes_markup_and_both_quotes():
    assert esc('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert esc(3) == "3"


def test_render_escapes_attribute_values_and_keeps_safe_markup():
    out = render('<a title="{t}">{b}</a>', t='" onmouseover="x', b=Safe("<b>ok</b>"))
    assert out == '<a title="&quot; onmouseover=&quot;x"><b>ok</b></a>'
    assert isinstance(out, Safe)


def test_render_fields_by_type():
    assert render("{v}", v=None) == ""
    assert render("{v}", v=True) == "True"
    assert render("{v}", v=False) == "False"
    assert render("{v:.2f}", v=1.5) == "1.50"  # numbers keep their format specs
    assert render("{v:d}", v=7) == "7"
    assert render("{v}", v=float("nan")) == "0"
    assert render("{v}", v=float("inf")) == "0"
    assert render("{v}", v="<i>") == "&lt;i&gt;"


def test_join_escapes_all_but_safe_parts():
    out = join([Safe("<p>"), "<x>", Safe("</p>")])
    assert out == "<p>&lt;x&gt;</p>"
    assert isinstance(out, Safe)
    assert join([]) == ""
