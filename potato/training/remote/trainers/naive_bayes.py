"""``text-naive-bayes``: multinomial naive Bayes on word n-grams, standard library only.

Raw naive-Bayes posteriors are far too sure of themselves (they multiply many word
likelihoods as if independent), so with ``calibrate`` the log-scores are divided by a
temperature chosen to minimise the negative log-likelihood on the val split. Multiselect
schemes get one binary model per label; a Likert scheme's points are its classes (integers,
as the store holds them).
"""

import json
import math
import os
import re
import time
from collections import Counter

from potato.training.remote.trainers import parallel

TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")
TEMPERATURES = [1.0 * (1.25 ** k) for k in range(0, 36)]  # 1 .. ~2500


def features(text, n):
    tokens = TOKEN.findall(text.lower())
    out = list(tokens)
    for k in range(2, n + 1):
        out.extend(" ".join(tokens[i:i + k]) for i in range(len(tokens) - k + 1))
    return out


def _softmax(scores, temperature):
    top = max(scores)
    exps = [math.exp((s - top) / temperature) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


class Model:
    """One multinomial NB over a list of classes."""

    def __init__(self, classes, alpha, ngrams):
        self.classes = list(classes)
        self.alpha = alpha
        self.ngrams = ngrams
        self.temperature = 1.0
        self.log_prior = {}
        self.log_lik = {}
        self.log_unseen = {}

    def fit(self, examples, min_count, on_progress=None):
        counts = dict((c, Counter()) for c in self.classes)
        docs = Counter()
        total_seen = Counter()
        for i, (text, cls) in enumerate(examples):
            feats = features(text, self.ngrams)
            counts[cls].update(feats)
            total_seen.update(feats)
            docs[cls] += 1
            if on_progress and i % 500 == 0:
                on_progress(i)
        vocab = [w for w, n in total_seen.items() if n >= min_count]
        keep = set(vocab)
        n_docs = sum(docs.values())
        for c in self.classes:
            # add-one prior smoothing keeps a class with no training items possible, just unlikely
            self.log_prior[c] = math.log((docs[c] + 1) / (n_docs + len(self.classes)))
            total = sum(n for w, n in counts[c].items() if w in keep)
            denom = total + self.alpha * (len(vocab) + 1)
            self.log_lik[c] = dict((w, math.log((counts[c][w] + self.alpha) / denom))
                                   for w in vocab if counts[c][w])
            self.log_unseen[c] = math.log(self.alpha / denom)
        self.vocab = keep
        return self

    def scores(self, text):
        feats = [f for f in features(text, self.ngrams) if f in self.vocab]
        out = []
        for c in self.classes:
            lik, unseen = self.log_lik[c], self.log_unseen[c]
            out.append(self.log_prior[c] + sum(lik.get(f, unseen) for f in feats))
        return out

    def proba(self, text):
        return _softmax(self.scores(text), self.temperature)

    def calibrate(self, examples):
        """Pick the temperature with the lowest NLL on held-out (text, class) pairs."""
        if not examples:
            return
        scored = [(self.scores(t), self.classes.index(c)) for t, c in examples]
        best = None
        for temp in TEMPERATURES:
            nll = -sum(math.log(max(_softmax(s, temp)[k], 1e-12)) for s, k in scored)
            if best is None or nll < best[0]:
                best = (nll, temp)
        self.temperature = best[1]

    def to_json(self):
        return {"classes": self.classes, "alpha": self.alpha, "ngrams": self.ngrams,
                "temperature": self.temperature, "log_prior": self.log_prior,
                "log_unseen": self.log_unseen, "log_lik": self.log_lik}

    @classmethod
    def from_json(cls, data):
        """The model back from ``to_json``'s dict as JSON returns it (class keys as text)."""
        m = cls(data["classes"], data["alpha"], data["ngrams"])
        m.temperature = data["temperature"]
        for c in m.classes:
            m.log_prior[c] = data["log_prior"][str(c)]
            m.log_lik[c] = data["log_lik"][str(c)]
            m.log_unseen[c] = data["log_unseen"][str(c)]
        m.vocab = set(w for lik in m.log_lik.values() for w in lik)  # every kept n-gram
        return m


def predict(model, texts):
    """(label, confidence) per text of a scheme's Model; a multiselect scheme's {label:
    Model}: (the labels said yes to, the least sure of those yes/no answers)."""
    out = []
    if isinstance(model, Model):
        for text in texts:
            probs = model.proba(text)
            k = max(range(len(probs)), key=probs.__getitem__)
            out.append((model.classes[k], probs[k]))
        return out
    for text in texts:
        chosen, confidence = [], 1.0
        for label, m in model.items():
            p_yes = m.proba(text)[0]
            if p_yes >= 0.5:
                chosen.append(label)
            confidence = min(confidence, max(p_yes, 1 - p_yes))
        out.append((chosen, confidence))
    return out


def predict_ranked(model, texts):
    """As ``predict``, with each label's probability (a Likert point's as text): a
    distribution for one label, each label's yes for a multiselect scheme."""
    out = []
    for text, (label, conf) in zip(texts, predict(model, texts)):
        if isinstance(model, Model):
            probs = dict(zip((str(c) for c in model.classes), model.proba(text)))
        else:
            probs = dict((lab, m.proba(text)[0]) for lab, m in model.items())
        out.append((label, conf, {"probabilities": probs}))
    return out


class Saved:
    """A saved scheme's model (``SCHEME.naive-bayes.json``) loaded back: ``predict(texts)``
    answers as the run did. The run page's and the model card's load code use it."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data.get("classes"), list):
            self.model = Model.from_json(data)
        else:  # multiselect: a yes/no model per label
            self.model = dict((label, Model.from_json(d)) for label, d in data.items())

    def predict(self, texts):
        return predict(self.model, texts)


class Trainer:
    def __init__(self, ctx):
        self.ctx = ctx
        self.p = ctx.params
        self.models = {}  # scheme -> Model (radio) or {label: Model} (multiselect)

    def _fit(self, classes, train, val):
        m = Model(classes, self.p["alpha"], self.p["ngrams"])
        m.fit(train, self.p["min_count"])
        self.ctx.check_cancelled()
        if self.p["calibrate"]:
            m.calibrate(val)
        return m

    def train(self):
        ctx = self.ctx
        metrics = {}
        schemes = ctx.schemas
        start = time.time()
        for k, (name, schema) in enumerate(schemes.items()):
            ctx.emitter.status("training %s (%d/%d)" % (name, k + 1, len(schemes)))
            train = ctx.bundle.labelled("train", name)
            val = ctx.bundle.labelled("val", name)
            if not train:
                raise ctx.RunFailure("scheme %s has no labelled items in the train split; label "
                                     "more items before training" % name)
            if schema["type"] != "multiselect":  # one class per label (radio) or point (likert)
                self.models[name] = self._fit(schema["labels"], train, val)
            else:
                per = {}
                for label in schema["labels"]:
                    yes_no = lambda pairs: [(t, "yes" if label in ls else "no") for t, ls in pairs]
                    per[label] = self._fit(["yes", "no"], yes_no(train), yes_no(val))
                self.models[name] = per
            elapsed = time.time() - start
            done = k + 1
            ctx.emitter.progress(done, len(schemes), unit="scheme",
                                 eta_s=elapsed / done * (len(schemes) - done))
            if val:
                acc = parallel.accuracy(lambda texts: self.predict(name, texts), val)
                metrics["%s.val_accuracy" % name] = round(acc, 4)
                ctx.emitter.metric("val_accuracy", round(acc, 4), scheme=name, epoch=1)
            metrics["%s.train_items" % name] = len(train)
        self._save()
        return metrics

    def predict(self, scheme, texts):
        return predict(self.models[scheme], texts)

    def predict_ranked(self, scheme, texts):
        return predict_ranked(self.models[scheme], texts)

    def _save(self):
        for name, model in self.models.items():
            data = model.to_json() if isinstance(model, Model) else dict(
                (label, m.to_json()) for label, m in model.items())
            path = os.path.join(self.ctx.artifacts, "%s.naive-bayes.json" % name)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f)
            self.ctx.emitter.emit("artifact", path=os.path.basename(path),
                                  bytes=os.path.getsize(path))
