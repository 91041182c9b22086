"""``decision-calibrate``: make the latest model's confidences mean what they say.

It finds the latest successful run for the scheme (in the server's store, so it runs only on
``local``), fits Platt scaling — P(correct) = sigmoid(a * logit(confidence) + b) — on that
run's held-out predictions (val and test items with human labels), re-scores all of that run's
predictions with it, and reports the lowest confidence threshold at which the held-out
precision reaches ``target_precision``. Its predictions replace the base run's in write-back.
"""

import json
import math
import os
import sqlite3

from potato.training.remote.paths import RunPaths


def _logit(p):
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(z):
    if z >= 0:
        return 1 / (1 + math.exp(-z))
    e = math.exp(z)
    return e / (1 + e)


def fit_platt(pairs, iterations=100):
    """(a, b) minimising log-loss of sigmoid(a*x + b) for (x, y) pairs, by Newton's method."""
    a, b = 1.0, 0.0
    for _ in range(iterations):
        ga = gb = haa = hab = hbb = 0.0
        for x, y in pairs:
            p = _sigmoid(a * x + b)
            d = p - y
            w = max(p * (1 - p), 1e-9)
            ga += d * x
            gb += d
            haa += w * x * x
            hab += w * x
            hbb += w
        haa += 1e-6
        hbb += 1e-6  # a little ridge keeps a separable set from diverging
        det = haa * hbb - hab * hab
        if abs(det) < 1e-12:
            break
        da = (hbb * ga - hab * gb) / det
        db = (haa * gb - hab * ga) / det
        a, b = a - da, b - db
        if abs(da) < 1e-9 and abs(db) < 1e-9:
            break
    return a, b


def threshold_for(scored, target):
    """(threshold, precision, coverage) of the lowest threshold reaching ``target`` precision.

    ``scored``: (confidence, correct) pairs. None when no threshold reaches the target.
    """
    ranked = sorted(scored, key=lambda t: -t[0])
    best = None
    correct = 0
    for k, (conf, ok) in enumerate(ranked, start=1):
        correct += ok
        if k < len(ranked) and ranked[k][0] == conf:
            continue  # a threshold keeps every item of equal confidence
        if correct / k >= target:
            best = (conf, correct / k, k / len(ranked))
    return best


class Trainer:
    def __init__(self, ctx):
        self.ctx = ctx
        self.scheme = next(iter(ctx.schemas))
        self.records = []

    def _base_run(self):
        db = self.ctx.extra.get("db_path")
        if not db or not os.path.exists(db):
            raise self.ctx.RunFailure("decision-calibrate reads the server's store, which is not "
                                      "here; it runs only on the local backend")
        conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
        try:
            rows = conn.execute("SELECT run_id, schemas FROM runs WHERE status='success' AND "
                                "trainer != 'decision-calibrate' ORDER BY seq DESC").fetchall()
        finally:
            conn.close()
        for run_id, schemas in rows:
            if self.scheme in json.loads(schemas):
                return run_id
        raise self.ctx.RunFailure("no successful run of scheme %s to calibrate yet; train a "
                                  "model first" % self.scheme)

    def train(self):
        ctx = self.ctx
        target = ctx.params["target_precision"]
        base = self._base_run()
        base_paths = RunPaths(os.path.join(ctx.extra["runs_dir"], base))
        ctx.emitter.status("calibrating run %s" % base)
        human = {}
        with open(base_paths.bundle_items, encoding="utf-8") as f:
            for line in f:
                it = json.loads(line)
                if it["split"] in ("val", "test") and self.scheme in it["labels"]:
                    human[it["id"]] = it["labels"][self.scheme]
        preds = []
        with open(base_paths.predictions, encoding="utf-8") as f:
            for line in f:
                p = json.loads(line)
                if p["scheme"] == self.scheme:
                    preds.append(p)
        pairs = [(_logit(p["confidence"]), 1 if p["label"] == human[p["id"]] else 0)
                 for p in preds if p["id"] in human]
        if len(pairs) < 10:
            raise ctx.RunFailure("run %s has only %d held-out predictions with human labels; "
                                 "calibration needs at least 10" % (base, len(pairs)))
        a, b = fit_platt(pairs)
        calibrated = [(_sigmoid(a * x + b), y) for x, y in pairs]
        found = threshold_for(calibrated, target)
        for p in preds:
            q = dict(p)
            q["confidence"] = round(_sigmoid(a * _logit(p["confidence"]) + b), 6)
            self.records.append(q)
        report = {"base_run": base, "heldout_n": len(pairs), "platt_a": round(a, 4),
                  "platt_b": round(b, 4), "target_precision": target,
                  "threshold": round(found[0], 4) if found else None,
                  "precision_at_threshold": round(found[1], 4) if found else None,
                  "coverage_at_threshold": round(found[2], 4) if found else None}
        if found is None:
            ctx.log("no confidence threshold reaches precision %.2f on the %d held-out items"
                    % (target, len(pairs)), "warning")
        path = os.path.join(ctx.artifacts, "calibration.json")
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
        ctx.emitter.emit("artifact", path="calibration.json", bytes=os.path.getsize(path))
        return report

    def prediction_records(self):
        """The base run's predictions, re-scored (the worker writes these as they are)."""
        return self.records

    def predict(self, scheme, texts):
        raise NotImplementedError("decision-calibrate re-scores stored predictions")
