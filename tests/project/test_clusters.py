"""Upstream's diversity ordering: items clustered by their words and handed out one cluster
after another, the same order at every start, made again when the items change."""

import json
from types import SimpleNamespace

import pytest

import potato.training.backends  # noqa: F401  (registers the backend kinds a config reads)
from potato.config.diversity_order import DiversityOrder
from potato.config.settings import load
from potato.project import assignment, clusters
from potato.project.store import Store

THEMES = {
    "fruit": ["apple banana orchard harvest", "banana mango orchard ripe", "apple mango ripe "
              "harvest", "orchard apple ripe banana", "mango harvest banana ripe"],
    "space": ["rocket orbit launch moon", "moon crater orbit astronaut", "astronaut rocket "
              "launch crater", "orbit moon astronaut launch", "crater rocket orbit moon"],
    "music": ["guitar chord melody drum", "drum rhythm guitar concert", "melody concert chord "
              "rhythm", "concert guitar drum melody", "chord rhythm melody concert"],
}


def themed_items():
    """Fifteen items, five of each theme, in theme blocks (the data-file order)."""
    return [("%s-%d" % (theme, n), text) for theme, texts in THEMES.items()
            for n, text in enumerate(texts)]


def theme(item_id):
    return item_id.split("-")[0]


def test_the_clusters_are_taken_in_turn():
    settings = DiversityOrder(enabled=True, num_clusters=3, auto_clusters=False)
    got = clusters.order(themed_items(), settings, "7")
    ids = [i for i, _ in got]
    assert sorted(ids) == sorted(i for i, _ in themed_items())  # every item once
    # the words tell the themes apart: each cluster is one theme, and every run of three
    # handed out holds the three themes
    assert {frozenset(theme(i) for i, c in got if c == k) for k in range(3)} == {
        frozenset([t]) for t in THEMES}
    for start in range(0, 15, 3):
        assert {theme(i) for i in ids[start:start + 3]} == set(THEMES)
    # within a cluster, data-file order
    fruit = [i for i in ids if theme(i) == "fruit"]
    assert fruit == ["fruit-%d" % n for n in range(5)]
    assert clusters.order(themed_items(), settings, "7") == got  # the same at every start


@pytest.mark.parametrize("n,auto,num,per,k", [
    (0, True, 10, 20, 0), (1, True, 10, 20, 1), (3, True, 10, 20, 2), (100, True, 10, 20, 5),
    (100, True, 10, 5, 20), (100, False, 7, 20, 7), (4, False, 7, 20, 4),
    (10 ** 6, True, 10, 20, clusters.MAX_CLUSTERS), (10 ** 6, False, 500, 20,
                                                     clusters.MAX_CLUSTERS)])
def test_how_many_clusters(n, auto, num, per, k):
    settings = DiversityOrder(enabled=True, num_clusters=num, items_per_cluster=per,
                              auto_clusters=auto)
    assert clusters.cluster_count(n, settings) == k


def test_texts_without_telling_words_and_tiny_projects():
    settings = DiversityOrder(enabled=True, num_clusters=3, auto_clusters=False)
    assert clusters.order([], settings, "0") == []
    assert clusters.order([("a", "x")], settings, "0") == [("a", 0)]
    same = [("i%d" % n, "the same words") for n in range(6)] + [("e", ""), ("f", "!!")]
    got = clusters.order(same, settings, "0")
    assert sorted(i for i, _ in got) == sorted(i for i, _ in same)
    assert all(not any(v) for v in clusters.vectors(["the same", "the same", ""]))


def project(tmp_path, rows, extra=""):
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nassignment_strategy: diversity_clustering\n"
        "diversity_ordering: {num_clusters: 3, auto_clusters: false}\n" + extra +
        "annotation_schemes:\n  - {annotation_type: radio, name: r, labels: [a, b]}\n")
    cfg, errors, warnings = load(str(tmp_path / "c.yaml"))
    assert errors == []
    return cfg, warnings


def open_store(tmp_path, cfg):
    from potato.project.data import load_items
    store = Store(cfg.db_path)
    store.sync_items(load_items(cfg))
    return store


def test_annotators_get_the_clusters_in_turn_and_keep_what_they_were_given(tmp_path):
    rows = [{"id": i, "text": t} for i, t in themed_items()]
    cfg, warnings = project(tmp_path, rows)
    assert any("clustered by their words" in w.message for w in warnings)
    store = open_store(tmp_path, cfg)
    a = assignment.for_config(cfg, store)
    first = [a.item_at("ann", n)["id"] for n in range(6)]
    assert {theme(i) for i in first[:3]} == set(THEMES) == {theme(i) for i in first[3:]}
    assert [a.item_at("bob", n)["id"] for n in range(3)] == first[:3]  # no limits: the same
    assert a.assigned("ann") == first
    reasons = assignment.reasons(store)
    assert reasons[("ann", first[0])].startswith("diversity_clustering: clusters")
    # a restart with the same items keeps the order; what was given stays given
    store.close()
    store = open_store(tmp_path, cfg)
    mark = store.meta_get("cluster_order.items")
    again = assignment.for_config(cfg, store)
    assert again.assigned("ann") == first and store.meta_get("cluster_order.items") == mark
    # other items: the order is made again, and a new item is in it
    rows.append({"id": "space-new", "text": "rocket moon orbit launch astronaut"})
    cfg, _ = project(tmp_path, rows)
    store.close()
    store = open_store(tmp_path, cfg)
    assignment.for_config(cfg, store)
    assert store.meta_get("cluster_order.items") != mark
    assert store.conn().execute("SELECT COUNT(*) FROM cluster_order").fetchone()[0] == 16
    store.close()


def test_the_config_says_what_it_does(tmp_path):
    rows = [{"id": i, "text": t} for i, t in themed_items()]
    cfg, warnings = project(tmp_path, rows, "")
    assert cfg.diversity_order.enabled and cfg.upstream.strategy == "diversity_clustering"
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\ndiversity_ordering: {enabled: true, model_name: m, "
        "prefill_count: 10}\nannotation_schemes:\n  - {annotation_type: radio, name: r, "
        "labels: [a, b]}\n")
    cfg, errors, warnings = load(str(tmp_path / "c.yaml"))
    assert errors == [] and cfg.diversity_order.enabled  # enabled alone turns it on
    [w] = [w.message for w in warnings if "diversity" in w.message]
    assert "not embedded with m" in w and "prefill_count (upstream's embedding settings)" in w
    for bad, key in (("{num_clusters: 0}", "diversity_ordering.num_clusters"),
                     ("{items_per_cluster: x}", "diversity_ordering.items_per_cluster"),
                     ("{enabled: yes-please}", "diversity_ordering.enabled"),
                     ("{clusters: 3}", "diversity_ordering.clusters"),
                     ("[1]", "diversity_ordering")):
        (tmp_path / "c.yaml").write_text(
            "data_files: [items.jsonl]\nassignment_strategy: diversity_clustering\n"
            "diversity_ordering: %s\nannotation_schemes:\n  - {annotation_type: radio, "
            "name: r, labels: [a, b]}\n" % bad)
        _, errors, _ = load(str(tmp_path / "c.yaml"))
        assert [e.key for e in errors] == [key], (bad, errors)
    (tmp_path / "c.yaml").write_text(
        "data_files: [items.jsonl]\nassignment_strategy: active_learning\n"
        "diversity_ordering: {enabled: true}\nactive_learning: {enabled: true}\n"
        "annotation_schemes:\n  - {annotation_type: radio, name: r, labels: [a, b]}\n")
    _, errors, _ = load(str(tmp_path / "c.yaml"))
    assert [e.key for e in errors][:1] == ["diversity_ordering.enabled"]
    assert "both would order the items" in errors[0].message


def test_settings_object_is_what_clusters_reads():
    # clusters.py reads only these three numbers and the switch
    s = SimpleNamespace(auto_clusters=True, items_per_cluster=2, num_clusters=1)
    assert clusters.cluster_count(9, s) == 4


def test_with_one_annotator_per_item_each_gets_the_next_open_items_in_turn(tmp_path):
    rows = [{"id": i, "text": t} for i, t in themed_items()]
    cfg, _ = project(tmp_path, rows, "num_annotators_per_item: 1\n")
    store = open_store(tmp_path, cfg)
    a = assignment.for_config(cfg, store)
    ann = [a.item_at("ann", n)["id"] for n in range(3)]
    bob = [a.item_at("bob", n)["id"] for n in range(3)]
    assert not set(ann) & set(bob)
    assert {theme(i) for i in ann} == set(THEMES) == {theme(i) for i in bob}
    store.close()


def test_only_the_first_items_are_clustered_and_the_rest_follow_in_order(monkeypatch):
    # review 39.5: 100,000 items took 40 s and 1.3 GB at start
    monkeypatch.setattr(clusters, "MAX_ITEMS", 9)
    settings = DiversityOrder(enabled=True, num_clusters=3, auto_clusters=False)
    items = themed_items()
    got = clusters.order(items, settings, "7")
    assert [i for i, c in got[9:]] == [i for i, _ in items[9:]]
    assert all(c == -1 for _, c in got[9:]) and all(c >= 0 for _, c in got[:9])
    assert sorted(i for i, _ in got[:9]) == sorted(i for i, _ in items[:9])


def test_what_diversity_ordering_overrides_or_caps_is_said(tmp_path):
    # review 39.8
    rows = [{"id": i, "text": t} for i, t in themed_items()]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for top, says in (
            ("assignment_strategy: least_annotated\ndiversity_ordering: {enabled: true}\n",
             "not by assignment_strategy least_annotated"),
            ("assignment_strategy: diversity_clustering\ndiversity_ordering: {enabled: false}\n",
             "which turns it on"),
            ("assignment_strategy: diversity_clustering\ndiversity_ordering: {num_clusters: 500,"
             " auto_clusters: false}\n", "at most 64 clusters are made here")):
        (tmp_path / "c.yaml").write_text(
            "data_files: [items.jsonl]\n" + top + "annotation_schemes:\n  - {annotation_type: "
            "radio, name: r, labels: [a, b]}\n")
        cfg, errors, warnings = load(str(tmp_path / "c.yaml"))
        assert errors == [] and cfg.diversity_order.enabled
        assert any(says in w.message for w in warnings), (top, warnings)
