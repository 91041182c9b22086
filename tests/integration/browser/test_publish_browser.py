"""The run page's "Publish to Hugging Face Hub" card in a real headless Chromium (issue 20):
a refused repo id shows its sentence in place, a publish shows its steps while it runs, a
failure its sentence, and a success the repo's URL and the commit. The Hub is the loopback fake
(tests/fakes/hub.py) driven by the real huggingface_hub client. Screenshots go to test-output/."""

import os

import pytest

from tests.helpers import ROOT, Client, use_endpoint
from tests.fakes.hub import FakeHub
from tests.helpers import admin_login
from tests.helpers import SHOTS, text_of, wait_for
from tests.helpers import PLUGINS, make_project, start_run, wait_run

pytestmark = pytest.mark.integration
pytest.importorskip("huggingface_hub")


@pytest.fixture
def hub(monkeypatch):
    fake = FakeHub()
    use_endpoint(monkeypatch, fake.url)
    monkeypatch.setenv("HF_TOKEN", "hf_write_alice")
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", PLUGINS)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    yield fake
    fake.close()


def test_publish_form_on_the_run_page(tmp_path, serve, browser, hub):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    run_id = start_run(c, trainer="text-naive-bayes", schemas=["sentiment"])
    wait_run(c, run_id)
    admin_login(d, url, f"/admin/training/runs/{run_id}")
    repo = d.find_element("id", "publish-repo")

    # A repo id of the wrong shape: the sentence appears in the card, as text.
    repo.send_keys("<img src=x onerror=alert(1)>")
    d.find_element("id", "publish-button").click()
    wait_for(d, lambda d: "is not a Hugging Face repo id" in text_of(d, "#publish-message"),
             what="the refusal")
    assert "<img src=x" in text_of(d, "#publish-message")  # shown as text, not markup
    assert not d.find_elements("css selector", "#publish-message img")
    assert not hub.requests

    # The Hub does not answer the repo creation: the card shows the step, then the failure.
    hub.hang = {"/api/repos/create"}
    repo.clear()
    repo.send_keys("alice/browser")
    d.find_element("css selector", 'input[name="private"][value="true"]').click()
    d.find_element("id", "publish-commit").send_keys("From the run page")
    d.find_element("id", "publish-button").click()
    wait_for(d, lambda d: "creating the repo alice/browser" in text_of(d, "#publish-progress"),
             what="the progress line")
    assert d.find_element("id", "publish-button").get_attribute("disabled") is not None
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "run-page-publishing.png"))
    hub.hang = set()
    hub.release.set()
    wait_for(d, lambda d: "Publishing to alice/browser failed" in text_of(d, "#publish-error"),
             what="the failure sentence")

    # Again: published, with the repo's URL and the commit.
    hub.release.clear()
    d.find_element("id", "publish-button").click()
    done = wait_for(d, lambda d: d.find_elements("id", "publish-done"), what="the published line")
    commit = hub.repos["alice/browser"]["commits"][0]
    assert commit["summary"] == "Publish Potato run %s" % run_id  # the form starts empty again
    text = done[0].text
    assert "Published to alice/browser (private), commit %s" % commit["oid"][:12] in text
    links = [a.get_attribute("href") for a in done[0].find_elements("css selector", "a")]
    assert links == [f"{hub.url}/alice/browser",
                     f"{hub.url}/alice/browser/commit/{commit['oid']}"]
    assert not d.find_elements("id", "publish-error")
    assert sorted(hub.repos["alice/browser"]["files"]) == ["README.md",
                                                            "sentiment.naive-bayes.json"]
    d.save_screenshot(os.path.join(SHOTS, "run-page-published.png"))
