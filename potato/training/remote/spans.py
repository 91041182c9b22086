"""Spans as BIO tags and back, and entity-level counts: the standard-library half of span
training, shared by the token-classification trainer (on the host) and the server's held-out
report (entity precision, recall and F1), so both score spans the same way.

A span is ``{"start", "end", "label"}``: character offsets (Python ``str`` indices, Unicode
code points; end exclusive) into the item's text, as the span scheme stores them. Tokens are
``(start, end)`` character offsets from a fast tokenizer's offset mapping; ``(0, 0)`` marks a
special token ([CLS], [SEP], padding), which carries no tag.
"""

IGNORE = -100  # the tag of a special token: no loss, no prediction


def tag_names(labels):
    """The tag set: ``O``, then ``B-label`` and ``I-label`` for each label, in order."""
    out = ["O"]
    for label in labels:
        out += ["B-" + label, "I-" + label]
    return out


def token_tags(offsets, spans, labels):
    """Tag ids (into ``tag_names(labels)``) for tokens at ``offsets``: B on the first token
    that overlaps a span, I on the span's later tokens, O elsewhere, IGNORE on special
    tokens. Sub-word tokens of a word inside a span are all tagged, so decoding needs no
    notion of words. Spans with labels outside ``labels`` are ignored."""
    index = dict((label, i) for i, label in enumerate(labels))
    ordered = sorted((s for s in spans if s["label"] in index), key=lambda s: s["start"])
    tags = []
    k = 0
    open_span = None  # the span whose B was given
    for start, end in offsets:
        if start == end:
            tags.append(IGNORE)
            continue
        while k < len(ordered) and ordered[k]["end"] <= start:
            k += 1
        span = ordered[k] if k < len(ordered) else None
        if span is None or span["start"] >= end:
            tags.append(0)
            continue
        i = index[span["label"]]
        tags.append(1 + 2 * i if open_span is not span else 2 + 2 * i)  # B, else I
        open_span = span
    return tags


def decode(text, tokens, labels):
    """Character spans from tagged tokens: ``tokens`` is a list of ``(start, end, tag id,
    probability)`` in text order (special tokens left out). A span starts at a B tag, or at an
    I tag that does not continue a span of its label (the CoNLL reading), and ends before the
    next token that does not continue it; its confidence is the mean probability of its
    tokens. Whitespace at a span's edges is trimmed (some tokenizers count a leading space
    into a token). Returns ``[{"start", "end", "label", "confidence"}, ...]`` by start."""
    names = tag_names(labels)
    out = []
    current = None
    for start, end, tag, prob in tokens:
        name = names[tag] if 0 <= tag < len(names) else "O"
        kind, _, label = name.partition("-")
        if current is not None and kind == "I" and label == current["label"]:
            current["end"] = end
            current["probs"].append(prob)
            continue
        if current is not None:
            out.append(current)
            current = None
        if kind in ("B", "I"):
            current = {"start": start, "end": end, "label": label, "probs": [prob]}
    if current is not None:
        out.append(current)
    spans = []
    for s in out:
        start, end = s["start"], s["end"]
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end and (not spans or spans[-1]["end"] <= start):
            spans.append({"start": start, "end": end, "label": s["label"],
                          "confidence": sum(s["probs"]) / len(s["probs"])})
    return spans


def entity_counts(pairs, labels):
    """``{label: [true positives, false positives, false negatives]}`` over ``(predicted
    spans, gold spans)`` pairs, one per item: a predicted span counts only when a gold span
    has exactly its start, end and label (entity-level, as CoNLL and seqeval score)."""
    counts = dict((label, [0, 0, 0]) for label in labels)
    for predicted, gold in pairs:
        p = set((s["start"], s["end"], s["label"]) for s in predicted or [])
        g = set((s["start"], s["end"], s["label"]) for s in gold or [])
        for start, end, label in p | g:
            row = counts.setdefault(label, [0, 0, 0])
            key = (start, end, label)
            if key in p and key in g:
                row[0] += 1
            elif key in p:
                row[1] += 1
            else:
                row[2] += 1
    return counts


def micro_f1(counts):
    """Entity-level micro-F1 of ``entity_counts``' counts (0.0 with no entity at all)."""
    tp = sum(c[0] for c in counts.values())
    fp = sum(c[1] for c in counts.values())
    fn = sum(c[2] for c in counts.values())
    return 2.0 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
