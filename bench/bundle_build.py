"""Bundle build time against a plain JSON dump of the same rows, at 10k and 100k items.

Both sides get the same in-memory rows (id, text, one annotator's label for 60% of items);
the plain side writes them as JSON Lines, the bundle side votes, splits, hashes and writes the
manifest. Runs alternate (A B A B ...) and the median of each side is compared, since this
machine is shared and absolute times drift.  Target: ratio <= 3 at both sizes, and the time per
item at 100k within 1.5x of that at 10k (linear).

    python3 bench/bundle_build.py [--repeat 5]
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from potato.training.remote import bundle  # noqa: E402

WORDS = ("the a film movie plot actor great awful boring moving funny long short story scene "
         "music dull bright clever").split()


def rows(n, seed=0):
    rng = random.Random(seed)
    items, labels = [], {}
    for k in range(n):
        item_id = "item-%07d" % k
        items.append((item_id, " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 30)))))
        if rng.random() < 0.6:
            labels[item_id] = {"sentiment": [rng.choice(["positive", "negative"])]}
    return items, labels


def plain(path, items, labels):
    with open(path, "w", encoding="utf-8") as f:
        for item_id, text in items:
            f.write(json.dumps({"id": item_id, "text": text, "labels": labels.get(item_id, {})},
                               ensure_ascii=False) + "\n")


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    schemas = {"sentiment": {"type": "radio", "labels": ["positive", "negative"]}}
    per_item = {}
    for n in (10_000, 100_000):
        items, labels = rows(n)
        a, b = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.repeat):
                a.append(timed(lambda: plain(os.path.join(tmp, "plain.jsonl"), items, labels)))
                b.append(timed(lambda: bundle.build(os.path.join(tmp, "b%d" % r), items, labels,
                                                    schemas, include_unlabeled=True)))
        ma, mb = statistics.median(a), statistics.median(b)
        per_item[n] = mb / n
        print("%7d items: bundle %.3f s, plain JSON dump %.3f s, ratio %.2f (target <= 3)"
              % (n, mb, ma, mb / ma))
    growth = per_item[100_000] / per_item[10_000]
    print("time per item, 100k over 10k: %.2f (target <= 1.5: linear)" % growth)


if __name__ == "__main__":
    main()
