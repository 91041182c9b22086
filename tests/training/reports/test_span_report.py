"""Spans as BIO tags and back (remote/spans.py), the span held-out report against seqeval's
figures on the same predictions (span_report.py), and the trust boundary for span predictions."""

import json
import random

import pytest

from potato.training.exchange import boundary
from potato.training.reports import spans as span_report
from potato.training.remote import spans as bio
from potato.training.reports.report import holdout_report
from tests.helpers import span_item

LABELS = ["person", "place"]


def sub_word_offsets(text):
    """Token offsets as a WordPiece tokenizer would give them: [CLS], each word cut into pieces
    of at most three characters, [SEP]."""
    out, pos = [(0, 0)], 0
    for word in text.split(" "):
        for k in range(0, len(word), 3):
            out.append((pos + k, pos + min(len(word), k + 3)))
        pos += len(word) + 1
    return out + [(0, 0)]


def test_tags_read_back_into_the_same_spans():
    rng = random.Random(0)
    for _ in range(200):
        text, spans = span_item(rng)
        offsets = sub_word_offsets(text)
        tags = bio.token_tags(offsets, spans, LABELS)
        assert tags[0] == tags[-1] == bio.IGNORE
        names = bio.tag_names(LABELS)
        for (a, b), t in zip(offsets, tags):  # a span's first piece is B, the rest I
            starts = [s for s in spans if s["start"] == a and a != b]
            if starts:
                assert names[t] == "B-" + starts[0]["label"]
        tokens = [(a, b, t, 0.9) for (a, b), t in zip(offsets, tags) if a != b]
        back = bio.decode(text, tokens, LABELS)
        assert [(s["start"], s["end"], s["label"]) for s in back] == \
            [(s["start"], s["end"], s["label"]) for s in spans]
        assert all(s["confidence"] == pytest.approx(0.9) for s in back)


def test_decode_reads_a_stray_i_as_a_start_and_trims_spaces():
    text = "we saw  alice"
    tokens = [(0, 2, 0, 0.99), (2, 6, 4, 0.5), (6, 13, 2, 0.7)]  # I-place, then I-person
    assert bio.decode(text, tokens, LABELS) == [
        {"start": 3, "end": 6, "label": "place", "confidence": 0.5},
        {"start": 8, "end": 13, "label": "person", "confidence": 0.7}]


def test_the_tag_set_is_o_then_b_and_i_for_each_label_in_order():
    assert bio.tag_names(["person", "place"]) == ["O", "B-person", "I-person", "B-place",
                                                  "I-place"]
    assert bio.tag_names([]) == ["O"]


def test_special_tokens_get_the_tag_the_training_loss_ignores():
    torch = pytest.importorskip("torch")
    tags = bio.token_tags([(0, 0), (0, 5), (0, 0)], [{"start": 0, "end": 5, "label": "place"}],
                          LABELS)
    assert tags[0] == tags[2] == torch.nn.CrossEntropyLoss().ignore_index
    assert bio.tag_names(LABELS)[tags[1]] == "B-place"


def test_a_token_that_only_touches_a_span_is_outside_it():
    # "alice's": the span ends where the next token starts, and "the" ends where it starts
    text = "thealice's"
    spans = [{"start": 3, "end": 8, "label": "person"}]
    tags = bio.token_tags([(0, 0), (0, 3), (3, 8), (8, 10), (0, 0)], spans, LABELS)
    names = bio.tag_names(LABELS)
    assert [names[t] if t != bio.IGNORE else None for t in tags] == [
        None, "O", "B-person", "O", None]
    assert text[3:8] == "alice"


def test_two_spans_that_touch_are_each_begun_with_b():
    spans = [{"start": 0, "end": 5, "label": "person"}, {"start": 5, "end": 8, "label": "person"},
             {"start": 9, "end": 12, "label": "other"}]
    tags = bio.token_tags([(0, 3), (3, 5), (5, 8), (9, 12)], spans, LABELS)
    assert [bio.tag_names(LABELS)[t] for t in tags] == ["B-person", "I-person", "B-person", "O"]
    back = bio.decode("alicebob kim", [(0, 3, tags[0], 0.2), (3, 5, tags[1], 0.4),
                                       (5, 8, tags[2], 0.9), (9, 12, tags[3], 0.9)], LABELS)
    assert back == [{"start": 0, "end": 5, "label": "person", "confidence": pytest.approx(0.3)},
                    {"start": 5, "end": 8, "label": "person", "confidence": 0.9}]


@pytest.mark.parametrize("tag", [-1, bio.IGNORE, 5, 99])
def test_a_tag_outside_the_tag_set_reads_as_outside(tag):
    # 5 tags for two labels: O, B-person, I-person, B-place, I-place
    tokens = [(0, 5, 1, 0.8), (6, 9, tag, 0.8), (10, 13, 2, 0.6)]
    assert bio.decode("alice and bob", tokens, LABELS) == [
        {"start": 0, "end": 5, "label": "person", "confidence": 0.8},
        {"start": 10, "end": 13, "label": "person", "confidence": 0.6}]


def test_labels_with_hyphens_decode_whole():
    labels = ["new-york", "x-y-z"]
    tags = bio.token_tags([(0, 3), (4, 8)], [{"start": 0, "end": 8, "label": "x-y-z"}], labels)
    assert bio.decode("new york", [(0, 3, tags[0], 0.5), (4, 8, tags[1], 0.5)], labels) == [
        {"start": 0, "end": 8, "label": "x-y-z", "confidence": 0.5}]


def test_spaces_at_either_edge_are_trimmed_and_a_span_of_spaces_is_dropped():
    text = "  alice  "
    assert bio.decode(text, [(0, 9, 1, 0.5)], LABELS) == [
        {"start": 2, "end": 7, "label": "person", "confidence": 0.5}]
    assert bio.decode("alice ", [(0, 6, 1, 0.5)], LABELS) == [
        {"start": 0, "end": 5, "label": "person", "confidence": 0.5}]
    assert bio.decode("a   ", [(0, 1, 0, 0.9), (1, 4, 3, 0.5)], LABELS) == []
    assert bio.decode("   b", [(0, 3, 3, 0.5), (3, 4, 0, 0.9)], LABELS) == []


def test_a_span_that_would_overlap_the_previous_one_is_dropped():
    # tokens out of order (a tokenizer's bug): the second span would start inside the first
    tokens = [(0, 5, 1, 0.5), (5, 6, 0, 0.9), (2, 4, 3, 0.5)]
    assert bio.decode("alice bob", tokens, LABELS) == [
        {"start": 0, "end": 5, "label": "person", "confidence": 0.5}]


def test_spans_of_a_label_outside_the_scheme_are_counted_under_that_label():
    pairs = [([{"start": 0, "end": 3, "label": "person"}, {"start": 4, "end": 6, "label": "pet"}],
              [{"start": 0, "end": 3, "label": "person"}, {"start": 7, "end": 9, "label": "car"},
               {"start": 4, "end": 6, "label": "dog"}])]
    assert bio.entity_counts(pairs, LABELS) == {"person": [1, 0, 0], "place": [0, 0, 0],
                                                "pet": [0, 1, 0], "car": [0, 0, 1],
                                                "dog": [0, 0, 1]}
    assert bio.entity_counts([(None, None)], ["person"]) == {"person": [0, 0, 0]}


@pytest.mark.parametrize("counts", [(2, 2, 2), (1, 1, 2), (1, 2, 1), (3, 0, 0), (0, 1, 0),
                                    (0, 0, 1), (0, 0, 0), (5, 1, 3), (0, 3, 1)])
def test_micro_f1_of_the_counts_is_the_reports_entity_f1(counts):
    pairs = counted(person=counts, place=(1, 0, 1))
    f1 = bio.micro_f1(bio.entity_counts(pairs, LABELS))
    assert round(f1, 4) == span_report.scheme_report(pairs, LABELS)["micro_f1"]
    assert bio.micro_f1(bio.entity_counts([([], [])], LABELS)) == 0.0


def words_bio(text, spans):
    """Word-level BIO tags of word-aligned spans (the input seqeval scores)."""
    tags, pos = [], 0
    for word in text.split(" "):
        tag = "O"
        for s in spans:
            if s["start"] <= pos < s["end"]:
                tag = ("B-" if s["start"] == pos else "I-") + s["label"]
        tags.append(tag)
        pos += len(word) + 1
    return tags


def noisy(rng, text, spans):
    """A model's answer: some spans kept, some relabelled or cut short, some invented."""
    out = []
    for s in spans:
        r = rng.random()
        if r < 0.6:
            out.append(dict(s))
        elif r < 0.75:
            out.append(dict(s, label=rng.choice(LABELS)))
        elif r < 0.85 and " " in s["text"]:
            out.append(dict(s, end=s["start"] + s["text"].index(" ")))
    words = text.split(" ")
    if rng.random() < 0.3:
        k = rng.randrange(len(words))
        start = len(" ".join(words[:k])) + (1 if k else 0)
        new = {"start": start, "end": start + len(words[k]), "label": rng.choice(LABELS)}
        if all(new["end"] <= s["start"] or s["end"] <= new["start"] for s in out):
            out.append(new)
    return sorted(out, key=lambda s: s["start"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_report_matches_seqeval(seed):
    seqeval = pytest.importorskip("seqeval.metrics")
    rng = random.Random(seed)
    items, predictions, y_true, y_pred = [], [], [], []
    for k in range(150):
        text, spans = span_item(rng)
        pred = noisy(rng, text, spans)
        items.append({"id": "t%d" % k, "split": "test", "text": text, "labels": {"who": spans}})
        predictions.append({"id": "t%d" % k, "split": "test", "scheme": "who", "label": pred,
                            "confidence": 0.5})
        y_true.append(words_bio(text, spans))
        y_pred.append(words_bio(text, pred))
    r = holdout_report(predictions, items, {"who": {"type": "span", "labels": LABELS}})
    assert r["kind"] == "span" and r["n"] == 150
    assert r["precision"] == pytest.approx(seqeval.precision_score(y_true, y_pred), abs=1e-4)
    assert r["recall"] == pytest.approx(seqeval.recall_score(y_true, y_pred), abs=1e-4)
    assert r["micro_f1"] == pytest.approx(seqeval.f1_score(y_true, y_pred), abs=1e-4)
    assert r["score"] == r["micro_f1"] and r["score_name"] == "entity micro-F1"
    theirs = seqeval.classification_report(y_true, y_pred, output_dict=True)
    for label in LABELS:
        mine = r["per_label"][label]
        assert mine["precision"] == pytest.approx(theirs[label]["precision"], abs=1e-4)
        assert mine["recall"] == pytest.approx(theirs[label]["recall"], abs=1e-4)
        assert mine["f1"] == pytest.approx(theirs[label]["f1-score"], abs=1e-4)
        assert mine["support"] == theirs[label]["support"]
    assert r["macro_f1"] == pytest.approx(theirs["macro avg"]["f1-score"], abs=1e-4)
    assert r["entities"] == theirs["micro avg"]["support"] > span_report.MIN_ENTITIES
    assert r["note"] is None
    assert 0.3 < r["micro_f1"] < 0.95  # the noise really did something


def test_a_few_entities_get_a_note():
    pairs = [([{"start": 0, "end": 5, "label": "person"}],
              [{"start": 0, "end": 5, "label": "person"}])] * 4
    r = span_report.scheme_report(pairs, LABELS)
    assert r["micro_f1"] == 1.0 and r["entities"] == 4
    assert "Only 4 human spans in 4 test items: too few to say much" in r["note"]
    empty = span_report.scheme_report([([], [])] * 3, LABELS)
    assert empty["micro_f1"] == 0.0 and "hold no human span" in empty["note"]


def counted(**counts):
    """(predicted, human) pairs, one span per item, that give each label (true positives,
    false positives, false negatives)."""
    out, k = [], 0
    for label, (tp, fp, fn) in counts.items():
        for pred, gold in [(True, True)] * tp + [(True, False)] * fp + [(False, True)] * fn:
            span = [{"start": k, "end": k + 1, "label": label}]
            out.append((span if pred else [], span if gold else []))
            k += 1
    return out


def test_each_labels_precision_recall_and_f1_count_exact_spans_only():
    # person: half of what it marks is right and it finds half; place and thing: F1 0.4;
    # org: only wrong marks; date: only missed spans; event: all right; none: never seen
    pairs = counted(person=(2, 2, 2), place=(1, 1, 2), thing=(1, 2, 1), org=(0, 1, 0),
                    date=(0, 0, 1), event=(1, 0, 0))
    labels = ["person", "place", "thing", "org", "date", "event", "none"]
    r = span_report.scheme_report(pairs, labels)
    per = r["per_label"]
    assert per["person"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 4,
                             "predicted": 4}
    assert per["place"] == {"precision": 0.5, "recall": 0.3333, "f1": 0.4, "support": 3,
                            "predicted": 2}
    assert per["thing"] == {"precision": 0.3333, "recall": 0.5, "f1": 0.4, "support": 2,
                            "predicted": 3}
    assert per["org"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0,
                          "predicted": 1}
    assert per["date"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1,
                           "predicted": 0}
    assert per["event"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1,
                            "predicted": 1}
    assert per["none"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0,
                           "predicted": 0}
    # micro: 5 right of 11 marked, 5 found of 11 human spans
    assert (r["n"], r["entities"], r["predicted"]) == (len(pairs), 11, 11)
    assert r["precision"] == r["recall"] == r["micro_f1"] == r["score"] == 0.4545
    # macro: over the six labels that occur (org and date count as 0, none is left out)
    assert r["macro_f1"] == 0.3833


def test_a_model_that_marks_more_than_humans_is_counted_as_such():
    r = span_report.scheme_report(counted(person=(3, 5, 1)), ["person"])
    assert (r["entities"], r["predicted"]) == (4, 8)
    assert (r["precision"], r["recall"], r["micro_f1"]) == (0.375, 0.75, 0.5)


def test_with_no_span_at_all_every_figure_is_zero():
    r = span_report.scheme_report([([], [])] * 2, ["person"])
    assert (r["precision"], r["recall"], r["micro_f1"], r["macro_f1"]) == (0.0, 0.0, 0.0, 0.0)
    assert (r["entities"], r["predicted"], r["n"]) == (0, 0, 2)


# docs/training.md: a note when the test split holds fewer than 50 human spans, or a label
# fewer than 10

def test_fewer_than_fifty_human_spans_get_a_note_that_says_what_one_span_moves():
    r = span_report.scheme_report(counted(person=(40, 0, 9)), ["person"])
    assert "Only 49 human spans in 49 test items: too few" in r["note"]
    assert "moves recall by 0.02" in r["note"] and r["note"].endswith(" splits.test.")
    r = span_report.scheme_report(counted(person=(2, 0, 2)), ["person"])
    assert "moves recall by 0.25" in r["note"]
    assert span_report.scheme_report(counted(person=(40, 3, 10)), ["person"])["note"] is None
    empty = span_report.scheme_report([([], [])] * 3, ["person"])["note"]
    assert "The 3 test items hold no human span" in empty and empty.endswith(" splits.test.")


def test_a_label_with_fewer_than_ten_human_spans_is_named_in_the_note():
    r = span_report.scheme_report(counted(person=(45, 0, 0), place=(9, 0, 0),
                                          thing=(0, 0, 1), org=(0, 4, 0), event=(10, 0, 0)),
                                  ["person", "place", "thing", "org", "event", "date"])
    assert "human spans of place, thing in the test split" in r["note"]
    assert "Fewer than 10 " in r["note"]
    r = span_report.scheme_report(counted(person=(45, 0, 0), place=(10, 0, 0), org=(0, 4, 0)),
                                  ["person", "place", "org", "date"])
    assert r["note"] is None


# -- the boundary --------------------------------------------------------------------------------

SCHEMAS = {"who": {"type": "span", "labels": LABELS}}
TEXT = "we saw alice in new york"


def row(label, **kw):
    return json.dumps(dict({"id": "a", "split": "test", "scheme": "who", "label": label,
                            "confidence": 0.8}, **kw))


def check(label, **kw):
    return boundary.predictions([row(label, **kw)], {"a": "test"}, SCHEMAS, {"a": TEXT})


def test_good_span_predictions_pass_with_their_text():
    rows, problem = check([{"start": 16, "end": 24, "label": "place", "confidence": 0.7},
                           {"start": 7, "end": 12, "label": "person", "confidence": 0.9}])
    assert problem is None
    assert rows[0]["label"] == [
        {"start": 7, "end": 12, "label": "person", "text": "alice", "confidence": 0.9},
        {"start": 16, "end": 24, "label": "place", "text": "new york", "confidence": 0.7}]
    assert check([])[1] is None


@pytest.mark.parametrize("label, fragment", [
    ("alice", "not a list of spans"),
    ([{"start": 7, "end": 99, "label": "person", "confidence": 0.5}], "outside 0..24"),
    ([{"start": -1, "end": 3, "label": "person", "confidence": 0.5}], "outside 0..24"),
    ([{"start": 5, "end": 5, "label": "person", "confidence": 0.5}], "is not before end"),
    ([{"start": 7, "end": 12, "label": "<b>boss</b>", "confidence": 0.5}], "not one of who's"),
    ([{"start": 7, "end": 12, "label": "person", "confidence": 1.5}], "confidence"),
    ([{"start": 7, "end": 12, "label": "person"}], "confidence is missing"),
    ([{"start": 7.5, "end": 12, "label": "person", "confidence": 0.5}], "whole number"),
    ([{"start": True, "end": 12, "label": "person", "confidence": 0.5}], "must be a number"),
    ([{"start": 7, "end": 12, "label": "person", "confidence": 0.5, "x": 1}], "an object of"),
    (["person"], "an object of"),
    ([{"start": 7, "end": 12, "label": "person", "confidence": 0.5},
      {"start": 9, "end": 15, "label": "place", "confidence": 0.5}], "overlap"),
    ([{"start": k, "end": k + 1, "label": "person", "confidence": 0.5}
      for k in range(1001)], "at most 1000"),
])
def test_bad_span_predictions_reject_the_file(label, fragment):
    rows, problem = check(label)
    assert rows == [] and fragment in problem and "nothing was written back" in problem


def test_a_span_row_for_an_unknown_item_has_no_text():
    rows, problem = boundary.predictions([row([])], {"a": "test"}, SCHEMAS, {})
    assert rows == [] and "need the item's text" in problem


# -- write-back ----------------------------------------------------------------------------------

def test_span_write_back_keeps_confident_spans_and_compares_entity_f1(tmp_path):
    from potato.config.settings import load
    from potato.project.store import Store
    from potato.training.exchange import ingest
    from potato.training.core.runs import RunStore
    from tests.helpers import beats_baseline, make_span_project

    cfg_path, rows = make_span_project(tmp_path, "    min_confidence: 0.5\n", n=4, labelled=0)
    cfg = load(cfg_path)[0]
    store = Store(cfg.db_path)
    try:
        def pred(run_conf):
            return [{"id": rows[0]["id"], "split": "unlabeled", "scheme": "who",
                     "confidence": 0.3, "label": [
                         {"start": 0, "end": 2, "label": "person", "text": "..",
                          "confidence": run_conf},
                         {"start": 3, "end": 4, "label": "place", "text": ".",
                          "confidence": 0.2}]}]

        def holdout(f1):
            return beats_baseline({"kind": "span", "n": 60, "micro_f1": f1, "macro_f1": 0.1,
                                   "score": f1, "score_name": span_report.SCORE_NAME})

        runs = RunStore(store)
        for f1 in (0.8, 0.5):
            run = runs.create("hf-token-classification", ["who"], "local", {})
            runs.update(run.run_id, holdout=holdout(f1))
        wb = ingest.write_back(store, cfg, "r1", pred(0.9), holdout(0.8))
        # the item is kept (its confidence 0.3 is the least sure token's) with its one span
        # at or above min_confidence; the other span is counted below it
        assert wb.written == 1 and wb.below_min_confidence == 1
        assert wb.by_label == {"person": 1} and wb.in_use == ["who"]
        shown = store.item_predictions(rows[0]["id"])["who"]["label"]
        assert [s["label"] for s in shown] == ["person"]
        # policy best compares the entity micro-F1 (not the macro-F1, equal here), in words
        wb2 = ingest.write_back(store, cfg, "r2", pred(0.95), holdout(0.5))
        assert wb2.in_use == [] and "held-out entity micro-F1 0.500 is below r1's 0.800" \
            in wb2.kept_in_use["who"]
    finally:
        store.close()


def test_an_item_whose_spans_are_all_below_min_confidence_shows_no_suggestion(tmp_path, serve):
    """All of an item's predicted spans below writeback.min_confidence: the item keeps an
    empty prediction, and its annotate page offers nothing (no empty "Model suggests" line,
    no accept button for an empty label list); an item with a confident span still does."""
    from potato.training.exchange import ingest
    from tests.helpers import Client, beats_baseline, make_span_project

    cfg_path, rows = make_span_project(tmp_path, "    min_confidence: 0.5\n", n=2, labelled=0)
    server, url = serve(cfg_path, training=False)
    cfg, store = server.cfg, server.store

    def pred(item, conf):
        return {"id": item["id"], "split": "unlabeled", "scheme": "who", "confidence": conf,
                "label": [{"start": 0, "end": 2, "label": "person",
                           "text": item["text"][:2], "confidence": conf}]}

    wb = ingest.write_back(store, cfg, "r1", [pred(rows[0], 0.2), pred(rows[1], 0.9)],
                           beats_baseline())
    assert wb.below_min_confidence == 1 and wb.in_use == ["who"]
    c = Client(url)
    c.login("dana")
    page = c.get("/annotate").text
    assert rows[0]["id"] in page and "Model suggests" not in page, page
    assert 'class="suggestion"' not in page and "accept-suggestion" not in page
    c.post("/annotate", form={"item_id": rows[0]["id"], "action": "next", "position": "0"})
    page = c.get("/annotate").text
    assert rows[1]["id"] in page and "Model suggests 1 span for who" in page
