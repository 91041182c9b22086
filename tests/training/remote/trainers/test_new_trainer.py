"""A new trainer is one module and one registry line: a toy trainer module written here, its
TrainerInfo added to REGISTRY (in the server by monkeypatch, in the local worker's process
by the same line in a sitecustomize on its PYTHONPATH), is offered by the Training form on a
project it fits (and refused, greyed, on one it does not), trains through the real local
queue, and its run page's load code and model card metadata come from its registry entry."""

import html
import io
import re
import sys
import tarfile
import textwrap

from potato.training.core.view import RunView
from potato.training.hub import model_card
from potato.training.remote.trainers import REGISTRY
from tests.helpers import KEY, Client, make_project, start_run, wait_run

H = {"X-API-Key": KEY}

MODULE = '''
"""toy-words: answers each scheme's most common train label (a majority baseline)."""

import json
import os
from collections import Counter

from potato.training.remote.trainers import Hub, Param, TrainerInfo

LOAD = (
    "import json\\n"
    "model = json.load(open({file:{scheme}.toy.json}))\\n"
    "print(model[\\"label\\"])")

ENTRY = TrainerInfo(
    "toy-words", "toy_words", "The most common label of the train split.",
    [Param("smoothing", "int", 0, "unused", 0, 10)], {"radio"}, load_code=LOAD,
    hub=Hub("text-classification"))


class Trainer:
    def __init__(self, ctx):
        self.ctx = ctx
        self.best = {}

    def train(self):
        for name in self.ctx.schemas:
            counts = Counter(label for _, label in self.ctx.bundle.labelled("train", name))
            self.best[name] = counts.most_common(1)[0][0]
            path = os.path.join(self.ctx.artifacts, "%s.toy.json" % name)
            with open(path, "w") as f:
                json.dump({"label": self.best[name]}, f)
            self.ctx.emitter.emit("artifact", path=os.path.basename(path),
                                  bytes=os.path.getsize(path))
        return {"schemes": len(self.best)}

    def predict(self, scheme, texts):
        return [(self.best[scheme], 0.5) for _ in texts]
'''

REGISTRY_LINE = ("from potato.training.remote.trainers import REGISTRY\n"
                 "import toy_words\n"
                 "REGISTRY[\"toy-words\"] = toy_words.ENTRY\n")


def register(tmp_path, monkeypatch):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_words.py").write_text(textwrap.dedent(MODULE))
    (plugin / "sitecustomize.py").write_text(REGISTRY_LINE)  # the worker's process
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.setenv("PYTHONPATH", str(plugin))
    sys.modules.pop("toy_words", None)
    import toy_words

    monkeypatch.setitem(REGISTRY, "toy-words", toy_words.ENTRY)  # the server's


def option(page, name):
    return re.search(r'<option value="%s"([^>]*)>([^<]*)</option>' % name, page)


def test_a_toy_trainer_is_offered_trains_and_has_its_card(tmp_path, serve, monkeypatch,
                                                          capsys):
    register(tmp_path, monkeypatch)
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    page = c.get("/admin/training", headers=H).text
    offered = option(page, "toy-words")
    assert offered and "disabled" not in offered.group(1)
    assert 'data-trainer="toy-words"' in page and "param-toy-words-smoothing" in page

    run = wait_run(c, start_run(c, trainer="toy-words", schemas=["sentiment"]))
    assert run["status"] == "success", run
    assert run["metrics"]["schemes"] == 1  # its train() ran in the worker
    r = c.get("/admin/training/runs/%s/model.tar" % run["run_id"], headers=H)
    with tarfile.open(fileobj=io.BytesIO(r.body)) as tar:
        tar.extractall(str(tmp_path / "download"))
    page = c.get("/admin/training/runs/%s" % run["run_id"], headers=H).text
    [code] = re.findall(r'<pre class="load-code"><code>(.*?)</code></pre>', page, re.S)
    code = html.unescape(code)
    assert '"%s-model/sentiment.toy.json"' % run["run_id"] in code
    monkeypatch.chdir(tmp_path / "download")
    capsys.readouterr()
    exec(code, {})
    assert capsys.readouterr().out.strip() in ("positive", "negative")

    card = model_card.card(RunView.from_dict(run),
                           model_card.Release("alice/toy", ["sentiment.toy.json"]), {}, None, {})
    head = card.split("\n---\n")[0]
    assert 'pipeline_tag: "text-classification"' in head and "library_name" not in head
    assert '- "toy-words"' in head
    assert 'hf_hub_download("alice/toy", "sentiment.toy.json")' in card


def test_a_toy_trainer_that_does_not_fit_is_greyed_and_refused(tmp_path, serve, monkeypatch):
    """The same trainer on an image project: listed disabled with the reason, refused before
    it queues."""
    register(tmp_path, monkeypatch)
    from tests.helpers import media_project

    _, url = serve(media_project(tmp_path, items=[  # images only: no item has text
        {"id": "img0", "image": "digit-0.png"}, {"id": "img1", "image": "digit-1.png"}]))
    c = Client(url)
    page = c.get("/admin/training", headers=H).text
    greyed = option(page, "toy-words")
    assert greyed and "disabled" in greyed.group(1)
    assert "it reads item text and this project" in html.unescape(greyed.group(2))
    _, data = c.json("GET", "/admin/training/api/trainers", headers=H)
    row = next(t for t in data["trainers"] if t["name"] == "toy-words")
    assert row["unfit"].startswith("it reads item text")
    status, out = c.json("POST", "/admin/training/api/runs", headers=H, json_body={
        "trainer": "toy-words", "schemas": ["kind"]})
    assert status == 400 and out["error"].startswith("Trainer toy-words does not fit project ")
    assert "Choose one that does: " in out["error"]
    _, runs = c.json("GET", "/admin/training/api/runs", headers=H)
    assert not runs["runs"]  # nothing was queued

