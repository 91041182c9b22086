"""Review 36: a number scheme's step and a model's suggestion."""

from potato.config.reader import Reader
from potato.schemes import make_scheme

P = ("annotation_schemes", 0)


def number(**m):
    k = make_scheme("q", "number", []).kind
    r = Reader("c.yaml", {}, {})
    k.parse(r, dict(m), P)
    assert r.errors == []
    return k


def test_a_prediction_off_the_steps_is_suggested_on_the_nearest_step():
    """A slider snaps a regression's 3.7 to its step; a number with step: 1 drops it: the
    annotator gets no suggestion at all for every prediction that is not a whole number."""
    slider = make_scheme("s", "slider", [], min_value=0, max_value=10, step=1).kind
    assert slider.preselect(3.7) == "4"
    assert number(min_value=0, max_value=10, step=1).preselect(3.7) == "4"
