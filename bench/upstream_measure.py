"""Issue 23's measure: how many of upstream Potato's project configs open here, annotate every
scheme and train one.

    python3 bench/upstream_measure.py DIR [--json OUT] [--no-train] [--tiny-model]

DIR holds upstream configs (``*.yaml``, searched recursively; upstream's own folder layout
keeps relative data paths working). The tree is copied to a temporary folder first, so the
configs are never changed and every project writes its store there. For each config:

1. ``potato validate --upstream`` (``validation.check``, what the command runs): errors whose
   key is refused by the policy table (``potato.config.upstream_keys.POLICY``) make the config
   *refused-with-reason*; any other error makes it *failed* with the first message. A data file
   the config names but DIR lacks is synthesised first (40+ items with the config's id and text
   keys, and its instance_display keys; an image or audio field names a 1x1 PNG or a short WAV
   written to the media folder; JSON Lines, CSV or TSV by the file's extension) and the table says so: the measure is about the config, not
   upstream's data.
2. A config that validates is *opened*: the app is built and served in-process on loopback
   (``potato.service.Service``, as ``potato start`` builds it).
3. *annotated*: one annotator's annotate page shows every scheme, and a value for every scheme
   of every item is saved through the annotation API (each value valid for its type).
4. *trained*: the first scheme naive Bayes takes (radio, multiselect, likert) trains with
   ``text-naive-bayes`` on the local backend and the run succeeds. A config whose schemes only
   the hf trainers take (spans, sliders, numbers) is counted "no cheap trainer", not as a
   failure, unless ``--tiny-model`` is given: then a BERT with random weights and a vocabulary
   of the synthetic items' words is built here (no download; needs the train-text extra) and
   the first span scheme trains with ``hf-token-classification``, or the first slider or number
   scheme with ``hf-text-regression``, one epoch. Text schemes train with nothing (annotate-only).

It also checks that no config with a refused key opens silently (a refused key, yet no error).
Prints one row per config and the totals; ``--json`` writes the rows.
"""

import argparse
import contextlib
import csv
import html
import io
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import wave
import zlib
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from potato.config.settings import load  # noqa: E402
from potato.config.reader import ConfigError  # noqa: E402
from potato.service import Service  # noqa: E402
from potato.config.upstream_keys import POLICY, SCHEME_HINTS  # noqa: E402
from potato.config.upstream_report import migration_report  # noqa: E402
from potato.project.validation import check  # noqa: E402

KEY = "bench-admin-key-0123456789abcdef"
NB_TYPES = ("radio", "multiselect", "likert")
HF_TRAINERS = {"span": "hf-token-classification", "slider": "hf-text-regression",
               "number": "hf-text-regression"}
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india")


# -- data -----------------------------------------------------------------------------------------

def synth_items(cfg, n):
    id_key, text_key = cfg.item_properties.id_key, cfg.item_properties.text_key
    rows = []
    for k in range(n):
        text = "%s item %d says %s and %s." % (WORDS[k % 9].title(), k, WORDS[(k * 4) % 9],
                                               WORDS[(k * 7) % 9])
        row = {id_key: "item-%03d" % k, text_key: text}
        for f in cfg.upstream.display:
            if f.key in row:
                continue
            if f.type == "dialogue":
                row[f.key] = [{"speaker": "A", "text": text}, {"speaker": "B", "text": "ok"}]
            elif f.type == "spreadsheet":
                row[f.key] = [{"name": "a", "value": k}, {"name": "b", "value": k + 1}]
            else:
                row[f.key] = text
        # an item's image or audio (item_properties, or an instance_display image or audio
        # field): a file of the media folder (synth_media writes it)
        for s in cfg.schemes:  # a pairwise scheme's responses: one per label, under items_key
            if s.annotation_type in ("pairwise", "pairwise_scale"):
                row[s.kind.items_key] = ["%s (response %d)" % (text, j + 1)
                                         for j in range(len(s.kind.options))]
        ip = cfg.item_properties
        for key, ext in ((ip.image_key, "png"), (ip.audio_key, "wav")):
            if key:
                row[key] = "synthetic-media/item-%03d.%s" % (k, ext)
        rows.append(row)
    return rows


def synth_media(cfg, root, rows):
    """The media files synthesised items name: a 1x1 PNG, 0.1 s of WAV silence (inside root)."""
    folder = os.path.realpath(cfg.media_directory)
    if not folder.startswith(os.path.realpath(root) + os.sep):
        return
    png = (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
           + _chunk(b"IDAT", zlib.compress(b"\x00\x00")) + _chunk(b"IEND", b""))
    wav = io.BytesIO()
    with wave.open(wav, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    ip = cfg.item_properties
    for key, data in ((ip.image_key, png), (ip.audio_key, wav.getvalue())):
        for row in rows if key else ():
            dest = os.path.join(folder, row[key])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)


def _chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def write_items(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ext = os.path.splitext(path)[1].lower()
    if ext in (".csv", ".tsv"):
        keys = list(rows[0])
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, delimiter="\t" if ext == ".tsv" else ",")
            w.writerow(keys)
            for r in rows:
                w.writerow([r[k] if isinstance(r[k], str) else json.dumps(r[k]) for k in keys])
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))


def synthesise_missing(path, root):
    """Write the config's missing data files (inside ``root`` only); the names written."""
    try:
        cfg, _, _ = load(path)
    except ConfigError:
        return []
    made = []
    n = max([40] + [8 * len(s.labels) for s in cfg.schemes])
    for name in cfg.data_files:
        real = os.path.realpath(name)
        if os.path.exists(real) or not real.startswith(os.path.realpath(root) + os.sep):
            continue
        rows = synth_items(cfg, n)
        write_items(real, rows)
        synth_media(cfg, root, rows)
        made.append(os.path.relpath(real, root))
    return made


# -- values for every scheme --------------------------------------------------------------------

def value_for(scheme, k, text):
    kind, t = scheme.kind, scheme.annotation_type
    if t in ("radio", "select", "pairwise"):
        return scheme.labels[k % len(scheme.labels)]
    if t == "pairwise_scale":
        return kind.min_value
    if t == "multiselect":
        return [scheme.labels[k % len(scheme.labels)]]
    if t == "likert":
        return k % kind.size + 1
    if t == "slider":
        return kind.min_value
    if t == "number":
        return kind.min_value if kind.min_value is not None else k
    if t == "span":
        word = text.split(" ")[0]
        return [{"start": 0, "end": len(word), "label": scheme.labels[k % len(scheme.labels)]}]
    if t == "text":
        return "answer %d" % k
    return None


# -- one config -----------------------------------------------------------------------------------

class Http:
    def __init__(self, url):
        self.url = url.rstrip("/")
        self.cookie = ""

    def call(self, method, path, body=None, form=None, admin=False):
        headers = {"Cookie": self.cookie} if self.cookie else {}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        if form is not None:
            from urllib.parse import urlencode
            data = urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if admin:
            headers["X-API-Key"] = KEY
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a, **k):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        try:
            resp = opener.open(req, timeout=60)
        except urllib.error.HTTPError as e:
            resp = e
        for c in resp.headers.get_all("Set-Cookie") or []:
            self.cookie = c.split(";", 1)[0]
        return resp.status, resp.read().decode("utf-8", "replace")


def login(h, cfg, name, who=0):
    """Log ``name`` in as the project lets annotators in: the user-name form, or a crowd
    project's link (``/?<id_param>=<id>``; expert invites: the ``who``-th token). The status."""
    crowd = cfg.upstream.crowd
    if crowd is None:
        return h.call("POST", "/login", form={"username": name})[0]
    tokens = sorted(crowd.invites)
    worker = tokens[who % len(tokens)] if tokens else name
    return h.call("GET", "/?%s=%s" % (crowd.id_param, urllib.parse.quote(worker)))[0]


def label_items(h, cfg, items):
    """Save a value for every scheme on every item through the annotation API, item by item
    as the annotate page hands them out (a project with per-item or per-user limits assigns
    items as annotators reach them), as annotators measure, measure-1 ...: the number of
    items labelled, or why a save failed."""
    index = {item_id: (k, text) for k, (item_id, text) in enumerate(items)}
    done, who = set(), 0
    while len(done) < len(items) and who < 20:
        if who:
            h.cookie = ""
            login(h, cfg, "measure-%d" % who, who)
        for _ in range(len(items) + 1):
            h.call("GET", "/annotate?resume=1")  # move to the first item not yet labelled
            _, page = h.call("GET", "/annotate")
            m = re.search(r'name="item_id" value="([^"]*)"', page)
            item_id = html.unescape(m.group(1)) if m else None
            if item_id not in index or item_id in done:
                break
            k, text = index[item_id]
            labels = {s.name: value_for(s, k, text) for s in cfg.schemes}
            status, out = h.call("POST", "/api/annotations",
                                 body={"item_id": item_id, "labels": labels})
            if status != 200:
                return "saving %s: %s" % (item_id, out[:200])
            done.add(item_id)
        who += 1
    return len(done)


def tiny_model(d):
    """A BERT with random weights and a fast tokenizer over the synthetic items' words."""
    import inspect

    import torch
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "item", "says", "and", "."] + \
        [w for w in WORDS] + [str(k) for k in range(1000)]
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    if "vocab" in inspect.signature(transformers.BertTokenizer.__init__).parameters:  # v5
        tok = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})
    else:
        tok = transformers.BertTokenizerFast(vocab_file=os.path.join(d, "vocab.txt"))
    tok.save_pretrained(d)
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)).save_pretrained(d)
    return d


def pick_trainer(cfg, model):
    """(scheme, trainer, params) of the cheapest training this config allows, or None."""
    scheme = next((s for s in cfg.schemes if s.annotation_type in NB_TYPES), None)
    if scheme is not None:
        return scheme, "text-naive-bayes", {}
    scheme = next((s for s in cfg.schemes if s.annotation_type in HF_TRAINERS), None)
    if scheme is None or model is None:
        return None
    params = {"model": model, "epochs": 1, "batch_size": 8, "max_length": 32, "lora": False}
    return scheme, HF_TRAINERS[scheme.annotation_type], params


def annotate_and_train(cfg, train, model=None):
    """(annotated: bool, why, trained: 'yes' | 'no cheap trainer' | 'failed: ...')"""
    cfg.admin_api_key = KEY
    service = Service(cfg, "127.0.0.1", 0, access_log=lambda line: None, owner=None).open()
    try:
        service.start(training=train, poll_interval=0.05)
        h = Http(service.url)
        status = login(h, cfg, "measure")
        if status != 303:
            return False, "login answered %d" % status, "-"
        status, page = h.call("GET", "/annotate")
        if status != 200:
            return False, "the annotate page answered %d" % status, "-"
        missing = [s.name for s in cfg.schemes
                   if 'data-scheme="%s" data-type="%s"' % (s.name, s.annotation_type) not in page]
        if missing:
            return False, "not on the annotate page: " + ", ".join(missing), "-"
        items = [(r["id"], r["text"]) for r in service.store.all_items()]
        saved = label_items(h, cfg, items)
        if isinstance(saved, str):
            return False, saved, "-"
        if not saved:
            return False, "no item could be labelled", "-"
        if not train:
            return True, "", "-"
        picked = pick_trainer(cfg, model)
        if picked is None:
            return True, "", "no cheap trainer (%s)" % ", ".join(
                sorted({s.annotation_type for s in cfg.schemes}))
        scheme, trainer, params = picked
        status, out = h.call("POST", "/admin/training/api/runs", admin=True, body={
            "trainer": trainer, "schemas": [scheme.name], "params": params})
        if status != 202:
            return True, "", "refused: " + json.loads(out).get("error", out)[:200]
        run_id, deadline = json.loads(out)["run_id"], time.time() + 300
        while time.time() < deadline:
            _, out = h.call("GET", "/admin/training/api/runs/" + run_id, admin=True)
            run = json.loads(out)
            if run["status"] in ("success", "error", "cancelled"):
                return True, "", "yes (%s, %s)" % (scheme.name, trainer) \
                    if run["status"] == "success" else \
                    "failed: %s" % (run.get("error") or run["status"])[:200]
            time.sleep(0.2)
        return True, "", "failed: no end in 300 s"
    finally:
        service.close()


def cause(problem):
    """A blocker's name for the totals: an unsupported annotation type by its type, a scheme
    key without the scheme's index, a top-level key as it is."""
    key = re.sub(r"\[\d+\]", "[]", problem.key or "?")
    if key.endswith("annotation_type"):
        m = re.search(r"is '([^']+)'", problem.message)
        return "annotation_type %s" % (m.group(1) if m else "?")
    if key.startswith("annotation_schemes[]") and "text scheme with" in problem.message:
        return "text scheme with labels"
    if key.startswith("instance_display.fields[].type"):
        m = re.search(r"type is '?([\w-]+)", problem.message)
        return "instance_display type %s" % (m.group(1) if m else "?")
    return key


def causes(errors):
    """The blockers of one config; a scheme of an unsupported type counts as that alone (not
    also as each of its keys that no supported type has)."""
    unsupported = {p.key.rsplit(".", 1)[0] for p in errors
                   if p.key.endswith(".annotation_type") and "Potato supports" in p.message}
    return sorted(set(cause(p) for p in errors
                      if p.key.endswith(".annotation_type")
                      or not any(p.key.startswith(u + ".") for u in unsupported)))


def measure(path, root, train, model=None):
    row = {"config": os.path.relpath(path, root), "synthesised": synthesise_missing(path, root)}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cfg, report = check(path)
    except ConfigError as e:
        return dict(row, outcome="failed", why=str(e)[:200])
    # refused with a reason: an error on an upstream key (the policy table's, a display
    # field, a scheme key with a reason: SCHEME_HINTS), which names what to remove or use
    # instead
    refused = [p for p in report.errors if p.key and (
        p.key.split(".")[0].split("[")[0] in POLICY or p.key.split(".")[-1] in SCHEME_HINTS)]
    row["refused_keys"] = sorted(set(cfg.upstream.refused))
    row["report"] = migration_report(cfg.upstream, len(report.errors))
    if report.errors:
        first = (refused or report.errors)[0]
        return dict(row, outcome="refused" if refused else "failed",
                    why="%s: %s" % (first.key, first.message[:300]),
                    causes=causes(report.errors))
    if row["refused_keys"]:
        return dict(row, outcome="SILENT", why="refused keys yet no error: %s"
                    % row["refused_keys"])
    cfg.output_dir = tempfile.mkdtemp(prefix="out-", dir=root)
    try:
        annotated, why, trained = annotate_and_train(cfg, train, model)
    except Exception as e:  # noqa: BLE001 -- the bench reports every failure and goes on
        return dict(row, outcome="opened", annotated=False, trained="-",
                    why="%s: %s" % (type(e).__name__, str(e)[:200]))
    return dict(row, outcome="opened", annotated=annotated, trained=trained, why=why)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--tiny-model", action="store_true",
                    help="train span, slider and number schemes on a tiny random BERT")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="upstream-measure-")
    root = os.path.join(work, "configs")
    shutil.copytree(args.dir, root)
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.endswith((".yaml", ".yml")))
    rows = []
    model = tiny_model(tempfile.mkdtemp(prefix="tiny-bert-", dir=work)) \
        if args.tiny_model and not args.no_train else None
    try:
        for path in paths:
            row = measure(path, root, not args.no_train, model)
            rows.append(row)
            print("%-60s %-8s %-5s %-24s %s%s" % (
                row["config"][:60], row["outcome"], "yes" if row.get("annotated") else "-",
                str(row.get("trained", "-"))[:24], row.get("why", "")[:160],
                " [data synthesised]" if row["synthesised"] else ""), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    count = Counter(r["outcome"] for r in rows)
    annotated = sum(1 for r in rows if r.get("annotated"))
    trained = sum(1 for r in rows if str(r.get("trained", "")).startswith("yes"))
    print("\n%d configs: %d opened, %d annotated every scheme, %d trained a scheme, %d refused "
          "with a reason, %d failed, %d with a refused key that opened silently; data "
          "synthesised for %d." % (len(rows), count["opened"], annotated, trained,
                                   count["refused"], count["failed"], count["SILENT"],
                                   sum(1 for r in rows if r["synthesised"])))
    blockers = Counter()
    for r in rows:
        blockers.update(set(r.get("causes", [])))
    print("Top blockers (configs): " + "; ".join("%s %d" % kv for kv in blockers.most_common(15)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
