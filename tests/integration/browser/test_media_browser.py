"""Media items in a real headless Chromium: the digits example shows each image scaled to fit,
full size on a click or on Enter at its button, and takes the digit from the number keys
(0 for zero); an audio item gets a player that loads the WAV through the media route; a
missing file and a URL that does not answer are placeholders, the page still works.
Screenshots go to test-output/."""

import json
import os
import shutil

import pytest

from tests.helpers import Client, DIGITS, SHOTS, browser_login, media_project, wait_for

pytestmark = pytest.mark.integration


def keys(d, *ks):
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(d).send_keys(*ks).perform()


def image_loaded(d):
    return d.execute_script("const i = document.querySelector('img.media-img');"
                            "return i && i.complete && i.naturalWidth > 0 ? "
                            "[i.naturalWidth, i.getBoundingClientRect().width] : null;")


def item_id(d):
    return d.find_element("css selector", "input[name=item_id]").get_attribute("value")


def test_digits_show_the_image_and_take_number_keys(tmp_path, serve, browser):
    from selenium.webdriver.common.keys import Keys

    project = tmp_path / "digits"
    shutil.copytree(DIGITS, project)
    gold = {r["id"]: r["digit"] for r in map(json.loads, open(project / "data" / "gold.jsonl"))}
    server, url = serve(str(project / "config.yaml"), training=False)
    d = browser
    browser_login(d, url)
    natural, shown = wait_for(d, image_loaded, what="the digit image")
    assert natural == 32 and shown > 200  # scaled to fit the page, not 32 pixels wide
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-image.png"))
    # Full size on a click, and back; after a click Enter saves rather than zooms.
    fig = d.find_element("css selector", "figure.media-image")
    d.find_element("css selector", "button.media-zoom").click()
    assert "full" in fig.get_attribute("class")
    assert d.execute_script("return document.querySelector('img.media-img')"
                            ".getBoundingClientRect().width") == 32
    d.find_element("css selector", "button.media-zoom").click()
    assert "full" not in fig.get_attribute("class")
    # By keyboard: the image's button takes focus and Enter switches it.
    d.execute_script("document.querySelector('button.media-zoom').focus()")
    keys(d, Keys.ENTER)
    zoom = d.find_element("css selector", "button.media-zoom")
    assert zoom.get_attribute("aria-pressed") == "true" and "full" in fig.get_attribute("class")
    keys(d, Keys.ENTER)
    assert zoom.get_attribute("aria-pressed") == "false"
    d.execute_script("document.activeElement.blur()")
    # The number keys label: 0 is zero (the tenth label), 1-9 the others; Enter saves.
    labelled = []
    for _ in range(3):
        current = item_id(d)
        key = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
               "six": "6", "seven": "7", "eight": "8", "nine": "9"}[gold[current]]
        keys(d, key)
        box = d.find_element("css selector", f"input[name='label:digit'][data-key='{key}']")
        assert box.is_selected() and box.get_attribute("value") == gold[current]
        keys(d, Keys.ENTER)
        wait_for(d, lambda d: item_id(d) != current, what="the next item")
        wait_for(d, image_loaded, what="the next image")
        labelled.append(current)
    store = server.app.store
    assert {i: store.labels_of("dana", i) for i in labelled} == {
        i: {"digit": gold[i]} for i in labelled}
    assert labelled == ["digit-0000", "digit-0001", "digit-0002"]
    keys(d, Keys.ARROW_LEFT)  # back to the previous item, its image and label shown
    wait_for(d, lambda d: item_id(d) == "digit-0002", what="the previous item")
    assert d.find_element("css selector", "input[name='label:digit'][value='two']").is_selected()
    wait_for(d, image_loaded, what="the previous image")


def test_audio_player_and_placeholders(tmp_path, serve, browser):
    rows = [{"id": "tone0", "audio": "sounds/tone-0.wav", "text": "Which sound is it?"},
            {"id": "gone", "image": "not-here.png"},
            {"id": "dead", "image": "http://127.0.0.1:9/nothing.png"}]
    server, url = serve(media_project(tmp_path, items=rows), training=False)
    d = browser
    browser_login(d, url)
    player = d.find_element("css selector", "figure.media-audio audio[controls]")
    assert player.get_attribute("src") == url + "media/audio/tone0"
    duration = wait_for(d, lambda d: d.execute_script(
        "const a = document.querySelector('audio'); return a.readyState >= 1 && a.duration;"),
        what="the audio's metadata")
    assert 0.4 < duration < 0.6  # the WAV came through the media route, whole and playable
    assert d.find_element("id", "item-text").text == "Which sound is it?"
    keys(d, "2")  # label keys work beside the player
    assert d.find_element("css selector", "input[name='label:kind'][value='tone']").is_selected()
    d.save_screenshot(os.path.join(SHOTS, "annotate-audio.png"))
    from selenium.webdriver.common.keys import Keys
    keys(d, Keys.ENTER)
    wait_for(d, lambda d: item_id(d) == "gone", what="the missing image's item")
    note = d.find_element("css selector", ".media-missing")
    assert "The image of this item cannot be shown" in note.text
    assert "'not-here.png' is missing from the media folder" in note.text
    keys(d, "3", Keys.ENTER)
    wait_for(d, lambda d: item_id(d) == "dead", what="the URL image's item")
    # The address does not answer: media.js replaces the image with a note.
    wait_for(d, lambda d: d.find_elements("css selector", ".media-missing[data-kind=image]"),
             what="the note for an image that did not load")
    assert "did not load" in d.find_element("css selector", ".media-missing").text
    assert not d.find_elements("css selector", "img.media-img")
    store = server.app.store
    assert store.labels_of("dana", "tone0") == {"kind": "tone"}
    assert store.labels_of("dana", "gone") == {"kind": "other"}
    c = Client(url)
    assert c.get("/media/audio/tone0").status == 401  # the browser had a session; this has none


# A short WebM made by the browser itself (a canvas recorded with MediaRecorder): no video
# file ships with the tests, and none is downloaded.
RECORD_JS = """
const done = arguments[arguments.length - 1];
const c = document.createElement('canvas'); c.width = 64; c.height = 48;
const g = c.getContext('2d'), rec = new MediaRecorder(c.captureStream(10),
                                                     {mimeType: 'video/webm'});
const parts = []; let n = 0;
rec.ondataavailable = e => parts.push(e.data);
rec.onstop = () => { const r = new FileReader();
  r.onload = () => done(r.result.split(',')[1]); r.readAsDataURL(new Blob(parts)); };
const t = setInterval(() => { g.fillStyle = n % 2 ? '#c00' : '#00c'; g.fillRect(0, 0, 64, 48);
  if (++n === 8) { clearInterval(t); rec.stop(); } }, 100);
rec.start();
"""

VIDEO_CONFIG = """\
annotation_task_name: Video
data_files: [items.jsonl]
media_directory: media
admin_api_key: test-admin-key-0123456789
instance_display:
  fields:
    - {key: clip, type: video, label: Clip, display_options: {max_width: 640, autoplay: true}}
    - {key: text, type: text, label: Transcript}
annotation_schemes:
  - annotation_type: radio
    name: kind
    labels: [digit, tone, other]
"""


def test_a_video_plays_through_the_media_route_and_keeps_its_keys(tmp_path, serve, browser):
    import base64

    from selenium.webdriver.common.keys import Keys

    d = browser
    d.get("about:blank")
    d.set_script_timeout(20)
    webm = base64.b64decode(d.execute_async_script(RECORD_JS))
    assert webm[:4] == b"\x1a\x45\xdf\xa3"
    rows = [{"id": "first", "text": "Before the clip."},
            {"id": "clip0", "clip": "clips/c.webm", "text": "A clip that blinks."},
            {"id": "png", "clip": "digit-0.png", "text": "An image named as a video."}]
    path = media_project(tmp_path, items=rows, config=VIDEO_CONFIG)
    (tmp_path / "media" / "clips").mkdir()
    (tmp_path / "media" / "clips" / "c.webm").write_bytes(webm)
    server, url = serve(path, training=False)
    browser_login(d, url)
    assert not d.find_elements("css selector", "video")
    assert "(this item has no video)" in d.page_source
    keys(d, "3", Keys.ENTER)
    wait_for(d, lambda d: item_id(d) == "clip0", what="the clip's item")
    player = d.find_element("css selector", "figure.media-video video[controls]")
    assert player.get_attribute("src") == url + "media/video/clip0"
    assert player.get_attribute("autoplay") is None  # upstream's autoplay is a look: never
    size = wait_for(d, lambda d: d.execute_script(
        "const v = document.querySelector('video'); return v.readyState >= 1 && "
        "[v.videoWidth, v.videoHeight];"), what="the video's metadata")
    assert size == [64, 48]  # the WebM came through the media route, whole and playable
    assert "A clip that blinks." in d.find_element("css selector", ".display-text").text
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "annotate-video.png"))
    # The focused player keeps its own keys: the arrows and Enter do not leave the item.
    d.execute_script("document.querySelector('video').focus()")
    keys(d, Keys.ARROW_LEFT, Keys.ENTER)
    assert item_id(d) == "clip0"
    keys(d, "2")  # a label key still labels
    assert d.find_element("css selector", "input[name='label:kind'][value='tone']").is_selected()
    d.execute_script("document.activeElement.blur()")
    keys(d, Keys.ENTER)
    wait_for(d, lambda d: item_id(d) == "png", what="the next item")
    note = d.find_element("css selector", ".media-missing[data-kind=video]")
    assert "'digit-0.png' is image (image/png), and the item names it as its video" in note.text
    assert server.app.store.labels_of("dana", "clip0") == {"kind": "tone"}
    assert Client(url).get("/media/video/clip0").status == 401
