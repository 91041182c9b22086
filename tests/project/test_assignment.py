"""Which items an annotator gets (assignment.py): without limits every annotator walks every
item; with upstream's num_annotators_per_item / max_annotations_per_item / max_annotations_per_user
each gets the first item in data-file order that fewer than N annotators were given, keeps it,
and may label only what was given. The limits are tested the way they are used: many
annotators at once, each a real thread against a real server."""

import json
from urllib.parse import quote
import re
import threading

import pytest

from potato.project.assignment import AllItems, Limited, for_config
from potato.config.settings import load
from potato.project.data import load_items
from potato.project.store import Store
from potato.project.validation import check
from tests.helpers import Client

CONFIG = """\
annotation_task_name: Assignment test
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
{limits}
"""


def project(tmp_path, limits="", n=12):
    with open(tmp_path / "items.jsonl", "w") as f:
        for k in range(n):
            f.write(json.dumps({"id": "i%02d" % k, "text": "item %d" % k}) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG.format(limits=limits))
    return str(tmp_path / "config.yaml")


@pytest.fixture
def store(tmp_path):
    """A function giving (config, store) of a project with these limits; stores closed after."""
    opened = []

    def make(limits="", n=12):
        cfg, errors, _ = load(project(tmp_path, limits, n))
        assert not errors, errors
        s = Store(cfg.db_path)
        opened.append(s)
        s.sync_items(load_items(cfg))
        return cfg, s

    yield make
    for s in opened:
        s.close()


ITEM = re.compile(r'name="item_id" value="([^"]+)"')


def shown(page):
    m = ITEM.search(page)
    return m.group(1) if m else None


def annotate_all(url, name, start, got, errors):
    """One annotator: log in, wait for the others, then label what /annotate shows until it
    shows nothing; records the items in ``got[name]``."""
    try:
        c = Client(url)
        c.login(name)
        start.wait(timeout=30)
        mine = got.setdefault(name, [])
        for position in range(100):
            item = shown(c.get("/annotate").text)
            if item is None:
                return
            mine.append(item)
            r = c.post("/annotate", form={"item_id": item, "label:sentiment": "positive",
                                          "action": "next", "position": str(position)})
            assert r.status == 303, (name, item, r.status, r.text[:200])
        raise AssertionError("%s was never done" % name)
    except BaseException as e:  # noqa: BLE001 - reported by the test's thread
        errors.append((name, repr(e)))


def crowd(url, names):
    """Every name annotates at once, each in its own thread: {name: items labelled}."""
    start = threading.Barrier(len(names))
    got, errors = {}, []
    threads = [threading.Thread(target=annotate_all, args=(url, n, start, got, errors))
               for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and errors == [], errors
    return got


def counts(got):
    out = {}
    for items in got.values():
        for i in items:
            out[i] = out.get(i, 0) + 1
    return out


# -- many annotators at once, against a real server -----------------------------------------------

def test_ten_annotators_at_once_never_push_an_item_past_its_annotators(tmp_path, serve):
    _, url = serve(project(tmp_path, "num_annotators_per_item: 2\n"), training=False)
    got = crowd(url, ["ann%d" % k for k in range(10)])
    # 12 items x 2 places: every place is taken, by 24 labels, no item more than twice
    assert counts(got) == {"i%02d" % k: 2 for k in range(12)}
    assert all(len(set(items)) == len(items) for items in got.values())  # never one item twice
    assert sum(len(v) for v in got.values()) == 24


def test_annotators_at_once_each_get_at_most_their_quota(tmp_path, serve):
    cfg = project(tmp_path, "num_annotators_per_item: 3\nmax_annotations_per_user: 2\n", n=8)
    server, url = serve(cfg, training=False)
    got = crowd(url, ["ann%d" % k for k in range(9)])
    assert sorted(len(v) for v in got.values()) == [2] * 9  # 18 places of 24: each gets 2
    assert max(counts(got).values()) <= 3 and sum(counts(got).values()) == 18
    # first come, in data-file order: whoever holds an item also holds every earlier item
    # that still has room (it was given the first open one)
    holders = {"i%02d" % k: {n for n, items in got.items() if "i%02d" % k in items}
               for k in range(8)}
    for k in range(8):
        for j in range(k + 1, 8):
            if len(holders["i%02d" % k]) < 3:
                assert holders["i%02d" % j] <= holders["i%02d" % k], holders
    # each annotator's labels are saved on their own items, and nobody may label another's
    for name, items in got.items():
        assert sorted(server.store.labels_of(name, i)["sentiment"] for i in items) == \
            ["positive", "positive"]
    other = next(i for i in ("i%02d" % k for k in range(8)) if i not in got["ann0"])
    c = Client(url)
    c.login("ann0")
    status, out = c.json("POST", "/api/annotations", json_body={
        "item_id": other, "labels": {"sentiment": "negative"}})
    assert status == 403 and "num_annotators_per_item" in out["error"]
    r = c.post("/annotate", form={"item_id": other, "label:sentiment": "negative",
                                  "action": "next", "position": "0"})
    assert r.status == 403 and server.store.labels_of("ann0", other) == {}


def test_one_annotators_requests_at_once_never_beat_the_quota(tmp_path, serve):
    _, url = serve(project(tmp_path, "max_annotations_per_user: 3\n"), training=False)
    c = Client(url)
    c.login("ann")
    start, pages, errors = threading.Barrier(8), [], []

    def ask(position):
        try:
            d = Client(url)
            d.cookies = dict(c.cookies)
            start.wait(timeout=30)
            r = d.post("/annotate", form={"action": "next", "position": str(position)})
            pages.append((r.status, shown(d.get("/annotate").text)))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    for rounds in range(3):
        threads = [threading.Thread(target=ask, args=(p,)) for p in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [] and not any(t.is_alive() for t in threads)
    r = c.get("/annotate")
    assert "of 3 items labelled by you" in r.text
    seen = {item for _, item in pages if item}
    assert seen <= {"i00", "i01", "i02"}  # the first three, no more


# -- the rules, one store -------------------------------------------------------------------------

def test_without_limits_everyone_walks_every_active_item(store):
    cfg, s = store()
    q = for_config(cfg, s)
    assert isinstance(q, AllItems) and not q.limited
    assert q.total("ann") == 12 and q.item_at("ann", 0)["id"] == "i00"
    assert q.item_at("ann", 11)["id"] == "i11"
    assert q.item_at("ann", 12) is None and q.item_at("ann", -1) is None
    assert q.may_label("ann", "i05") and q.may_label("bob", "nothing")
    s.save_labels("ann", "i00", {"sentiment": "positive"})
    assert q.first_unlabelled("ann") == 1 and q.first_unlabelled("bob") == 0


@pytest.mark.parametrize("limits, per_item, per_user", [
    ("num_annotators_per_item: 2", 2, None),
    ("max_annotations_per_item: 3", 3, None),
    ("num_annotators_per_item: 4\nmax_annotations_per_item: 2", 2, None),  # the smaller
    ("max_annotations_per_user: 5", None, 5),
    ("num_annotators_per_item: -1\nmax_annotations_per_user: 0\nmax_annotations_per_item: 2",
     2, None),
])
def test_the_config_keys_set_the_limits(store, limits, per_item, per_user):
    cfg, s = store(limits)
    q = for_config(cfg, s)
    assert q.limited and (q.per_item, q.per_user) == (per_item, per_user)


def test_no_limit_written_as_upstream_writes_it_gives_every_item(store):
    cfg, s = store("num_annotators_per_item: -1\nmax_annotations_per_user: 0")
    assert not for_config(cfg, s).limited


def test_an_item_goes_to_at_most_n_annotators_in_data_file_order(store):
    _, s = store(n=4)
    q = Limited(s, 2, None)
    assert q.total("a") == 4 and q.assigned("a") == []
    assert [q.item_at("a", k)["id"] for k in range(4)] == ["i00", "i01", "i02", "i03"]
    assert q.item_at("a", 4) is None and q.total("a") == 4
    assert q.item_at("b", 0)["id"] == "i00" and q.total("b") == 4
    assert q.item_at("c", 0)["id"] == "i01"  # i00 has its two
    assert q.assigned("a") == ["i00", "i01", "i02", "i03"] and q.assigned("c") == ["i01"]
    assert q.item_at("b", 1)["id"] == "i02"  # i01 has its two too
    assert q.total("c") == 2 and q.item_at("c", 1)["id"] == "i03"
    assert q.item_at("c", 2) is None and q.total("c") == 2  # i02 went to a and b
    assert q.total("d") == 0 and q.item_at("d", 0) is None  # every item has its two
    assert q.total("b") == 2 and q.item_at("b", 2) is None


def test_items_are_given_one_at_a_time_and_only_at_the_end(store):
    _, s = store(n=5)
    q = Limited(s, None, 3)
    assert q.item_at("a", 1) is None  # not the next one: nothing is given out of turn
    assert q.assigned("a") == []
    assert q.item_at("a", 0)["id"] == "i00" and q.item_at("a", 0)["id"] == "i00"  # kept
    assert q.item_at("a", 1)["id"] == "i01" and q.item_at("a", 2)["id"] == "i02"
    assert q.item_at("a", 3) is None and q.total("a") == 3  # the quota
    assert q.item_at("a", -1) is None
    assert q.assigned("a") == ["i00", "i01", "i02"]
    assert q.total("b") == 3 and q.item_at("b", 0)["id"] == "i00"  # no per-item limit


def test_the_quota_counts_what_was_given_and_the_total_what_is_left(store):
    _, s = store(n=5)
    q = Limited(s, 1, 3)
    assert q.total("a") == 3
    q.item_at("a", 0)
    q.item_at("b", 0)
    assert q.assigned("b") == ["i01"]
    assert q.total("a") == 3 and q.total("b") == 3  # 1 given + 2 of the 3 open items
    for k in (1, 2):
        q.item_at("b", k)
    assert q.total("a") == 2 and q.item_at("a", 1)["id"] == "i04"
    assert q.item_at("a", 2) is None and q.total("a") == 2 and q.total("c") == 0


def test_what_was_given_is_theirs_to_label_and_nothing_else(store):
    _, s = store(n=4)
    q = Limited(s, 1, None)
    q.item_at("a", 0)
    q.item_at("b", 0)
    assert q.may_label("a", "i00") and not q.may_label("a", "i01")
    assert q.may_label("b", "i01") and not q.may_label("b", "i00")
    assert not q.may_label("c", "i02")  # not given yet


def test_the_first_unlabelled_is_counted_in_the_order_given(store):
    _, s = store(n=5)
    q = Limited(s, 1, None)
    q.item_at("b", 0)  # b takes i00: a gets i01, i02, i03 in that order
    for k in range(3):
        q.item_at("a", k)
    assert q.assigned("a") == ["i01", "i02", "i03"] and q.first_unlabelled("a") == 0
    s.save_labels("a", "i01", {"sentiment": "positive"})
    s.save_labels("a", "i03", {"sentiment": "positive"})
    s.save_labels("b", "i02", {"sentiment": "positive"})  # another's label does not count
    assert q.first_unlabelled("a") == 1
    s.save_labels("a", "i02", {"sentiment": "negative"})
    assert q.first_unlabelled("a") == 3  # all given ones labelled: the end
    assert q.first_unlabelled("nobody") == 0


def test_an_item_that_left_the_data_files_is_no_longer_given_or_counted(store):
    cfg, s = store(n=4)
    q = Limited(s, 2, 3)
    q.item_at("a", 0)
    q.item_at("a", 1)
    s.sync_items([(i["id"], i["text"], {}) for i in (dict(s.item("i01")), dict(s.item("i02")),
                                                     dict(s.item("i03")))])  # i00 leaves
    assert q.assigned("a") == ["i01"] and q.total("a") == 3
    assert q.item_at("a", 0)["id"] == "i01" and q.item_at("a", 1)["id"] == "i02"
    assert q.item_at("a", 2)["id"] == "i03" and q.item_at("a", 3) is None
    assert q.total("b") == 3 and q.item_at("b", 0)["id"] == "i01"
    assert q.item_at("c", 0)["id"] == "i02"  # i01 has its two


def test_a_store_opened_again_keeps_who_was_given_what(store, tmp_path):
    cfg, s = store(n=3)
    q = Limited(s, 1, None)
    q.item_at("a", 0)
    q.item_at("b", 0)
    again = Limited(Store(cfg.db_path), 1, None)
    try:
        assert again.assigned("a") == ["i00"] and again.assigned("b") == ["i01"]
        assert again.item_at("c", 0)["id"] == "i02"
    finally:
        again.store.close()


# -- one annotator's requests racing each other (the second read its list before the first
# committed: Limited.assigned answers what that request saw) ---------------------------------------

def stale(monkeypatch, seen):
    real = Limited.assigned
    answers = [list(seen)]
    monkeypatch.setattr(Limited, "assigned",
                        lambda self, user: answers.pop() if answers else real(self, user))
    return real


def test_a_request_that_raced_another_gets_the_item_the_other_was_given(store, monkeypatch):
    _, s = store(n=4)
    q = Limited(s, 1, None)
    assert q.item_at("a", 0)["id"] == "i00"
    real = stale(monkeypatch, [])  # this request read "a has nothing" before i00 was given
    assert q.item_at("a", 0)["id"] == "i00"  # the same item, not a second one
    assert real(q, "a") == ["i00"] and q.item_at("b", 0)["id"] == "i01"


def test_a_request_that_raced_an_item_leaving_gives_nothing_out_of_turn(store, monkeypatch):
    _, s = store(n=4)
    q = Limited(s, None, None)
    for k in range(2):
        q.item_at("a", k)
    s.sync_items([("i00", "item 0", {}), ("i02", "item 2", {}), ("i03", "item 3", {})])
    real = stale(monkeypatch, ["i00", "i01"])  # read before i01 left the data files
    assert q.item_at("a", 2) is None  # a's list is one item shorter now: position 2 is not next
    assert real(q, "a") == ["i00"]
    assert q.item_at("a", 1)["id"] == "i02"


# -- assignment_strategy (issue 35, item 2) and the jump box ---------------------------------------

def walk(queue, user, n):
    return [queue.item_at(user, k)["id"] for k in range(n)]


def test_least_annotated_starts_a_new_annotator_where_labels_are_needed(store):
    cfg, s = store("assignment_strategy: least_annotated")
    assert cfg.upstream.strategy == "least_annotated"
    for k in range(8):  # the first eight items were labelled by gold (imported, say)
        s.save_labels("gold", "i%02d" % k, {"sentiment": "positive"})
    s.save_labels("ann", "i09", {"sentiment": "negative"})
    s.save_labels("bob", "i09", {"sentiment": "negative"})
    queue = for_config(cfg, s)
    # nobody has i08, i10, i11; then the items one annotator has, in order; i09 (two) last
    expected = ["i08", "i10", "i11"] + ["i%02d" % k for k in range(8)] + ["i09"]
    assert walk(queue, "dana", 12) == expected
    assert walk(queue, "dana", 12) == expected  # what was given stays theirs, in that order
    assert queue.item_at("eve", 0)["id"] == "i08"  # one annotator each now (dana): i08 first
    # with a per-item limit as well (the same project: every item was given to dana), the
    # limit holds
    cfg, s = store("assignment_strategy: least_annotated\nnum_annotators_per_item: 1")
    assert for_config(cfg, s).item_at("fay", 0) is None


def test_random_is_one_shuffled_order_for_everyone(store):
    cfg, s = store("assignment_strategy: random")
    queue = for_config(cfg, s)
    first = walk(queue, "a", 12)
    assert sorted(first) == ["i%02d" % k for k in range(12)]  # every item, once
    assert first != sorted(first)  # shuffled
    assert walk(queue, "b", 12) == first  # the same order for another annotator


def test_fixed_order_is_the_data_file_and_other_strategies_say_so(store, tmp_path):
    cfg, s = store("assignment_strategy: fixed_order")
    assert isinstance(for_config(cfg, s), AllItems) and not for_config(cfg, s).limited
    path = project(tmp_path, "assignment_strategy: max_diversity")
    cfg, errors, _ = load(path)
    assert not errors and cfg.upstream.strategy == "fixed_order"
    _, report = check(path)
    assert any("assignment_strategy max_diversity is upstream Potato's and not implemented "
               "here: annotators get items in data-file order" in w.message
               for w in report.warnings)


def test_the_jump_box_opens_an_item_by_id_or_number(tmp_path, serve):
    _, url = serve(project(tmp_path))
    c = Client(url)
    c.login("dana")
    page = c.get("/annotate").text
    assert '<form method="get" action="/annotate" class="jump">' in page and shown(page) == "i00"
    r = c.get("/annotate?item=i07")
    assert r.status == 303
    assert shown(c.get("/annotate").text) == "i07"
    c.get("/annotate?item=3")
    assert shown(c.get("/annotate").text) == "i02"
    r = c.get("/annotate?item=%3Cb%3Enope")
    assert r.status == 404 and "There is no item" in r.text and "<b>nope" not in r.text
    assert "&lt;b&gt;nope" in r.text and "among the 12 items you can open now" in r.text
    assert "or its number, 1 to 12." in r.text
    assert c.get("/annotate?item=13").status == 404
    for odd in ("\u00b2", "\u0661\u0662\u0663\u0664\u0665", "1e3", "-1", "0", "+5", " "):
        r = c.get("/annotate?item=" + quote(odd))  # digits Python's int() refuses: no 500
        assert r.status == 404 or r.status == 303 and odd.strip() == "", (odd, r.status)
    assert shown(c.get("/annotate").text) == "i02"  # where it was


def test_the_jump_box_keeps_to_the_items_given_under_limits(tmp_path, serve):
    _, url = serve(project(tmp_path, "max_annotations_per_user: 2"))
    c = Client(url)
    c.login("dana")
    assert shown(c.get("/annotate").text) == "i00"
    assert c.get("/annotate?item=i05").status == 404  # not given to dana
    assert c.get("/annotate?item=i00").status == 303


@pytest.mark.parametrize("limits", ["assignment_strategy: least_annotated",
                                    "assignment_strategy: random\nnum_annotators_per_item: 2"])
def test_the_jump_box_and_a_return_under_a_strategy(tmp_path, serve, limits):
    _, url = serve(project(tmp_path, limits))
    c = Client(url)
    c.login("dana")
    first = shown(c.get("/annotate").text)
    # numbers reach the items given so far and the next one, never past them
    r = c.get("/annotate?item=5")
    assert r.status == 404 and "among the 2 items you can open now" in r.text
    assert c.get("/annotate?item=2").status == 303
    second = shown(c.get("/annotate").text)
    assert second not in (None, first)
    for position, item in enumerate((first, second)):
        assert c.post("/annotate", form={"item_id": item, "label:sentiment": "positive",
                                         "action": "next", "position": str(position)}).status \
            == 303
    # a returning annotator resumes at the first item given to them they have not labelled
    c = Client(url)
    c.login("dana")
    third = shown(c.get("/annotate").text)
    assert third not in (None, first, second)


@pytest.mark.parametrize("value, says", [
    ("least-annotated", None), ("Random", None), ("max_diversity", "is upstream Potato's"),
    ("5", "not a strategy's name"),
    ("{a: 1}", "not a strategy's name"), ("true", "not a strategy's name"),
    ("2026-12-07", "not a strategy's name")])
def test_assignment_strategy_values_of_every_shape(tmp_path, value, says):
    path = project(tmp_path, "assignment_strategy: %s" % value)
    cfg, errors, _ = load(path)
    assert not errors
    found = [w.message for w in check(path)[1].warnings if "assignment_strategy" in w.message]
    if says is None:
        assert cfg.upstream.strategy in ("least_annotated", "random") and not found
    else:
        assert cfg.upstream.strategy == "fixed_order" and says in found[0]


def test_ten_annotators_at_once_under_least_annotated_keep_the_per_item_limit(tmp_path, serve):
    _, url = serve(project(tmp_path, "assignment_strategy: least_annotated\n"
                                     "num_annotators_per_item: 2\n"), training=False)
    got = crowd(url, ["ann%d" % k for k in range(10)])
    assert counts(got) == {"i%02d" % k: 2 for k in range(12)}
    assert all(len(set(items)) == len(items) for items in got.values())
