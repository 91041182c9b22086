"""``image_annotation`` in a real headless Chromium (issue 36, item 7): an upstream-style config
(the image path in text_key) shows the image in a stage where the annotator draws a box by
dragging, a polygon by clicking its corners and Enter, a point by a click, a box by keys alone
(n, Shift+arrows, arrows); relabels with a label key, selects and moves a region by dragging,
deletes with Delete, zooms with + and 0;
the save stores exactly what was drawn, and coming back shows it again. A region outside the
image sent by hand is refused at the boundary with the reason, and the markup in a label is
shown as text. Screenshots go to test-output/."""

import json
import os
import struct
import zlib

import pytest

from tests.helpers import KEY, SHOTS, Client, wait_for
from tests.schemes.test_regions import BLOCK

pytestmark = pytest.mark.integration
H = {"X-API-Key": KEY}

# the unit tests' upstream-style block, with a label that holds markup
CONFIG = ("annotation_task_name: Boxes\nmedia_directory: media\nadmin_api_key: %s\n" % KEY
          + BLOCK % '      - "<b>tree</b>"\n')


def png(width, height):
    """A plain RGB PNG: grey, with a dark block in its upper left quarter."""
    rows = b"".join(b"\x00" + b"".join(
        (b"\x30\x30\x30" if x < width // 2 and y < height // 2 else b"\xc0\xc0\xc0")
        for x in range(width)) for y in range(height))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                             0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def project(tmp_path, extra=""):
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "street.png").write_bytes(png(400, 300))
    (tmp_path / "items.jsonl").write_text("".join(
        json.dumps({"id": i, "image_url": "/media/street.png" if i == "s2" else "street.png"})
        + "\n" for i in ("s1", "s2")))  # s2 as upstream's examples name it
    (tmp_path / "config.yaml").write_text(CONFIG + extra)
    return str(tmp_path / "config.yaml")


def login(d, url, name="dana"):
    d.get(url + "login")
    d.find_element("id", "username").send_keys(name)
    d.find_element("css selector", "form button[type=submit]").click()
    wait_for(d, lambda d: d.current_url.endswith("/annotate") and d.find_elements(
        "css selector", ".regions"), what="the annotate page")


def drawn(d):
    return json.loads(d.find_element("css selector", "input[data-regions]")
                      .get_attribute("value"))


def size(d):
    return d.execute_script("var r = document.querySelector('.region-svg')"
                            ".getBoundingClientRect(); return [r.width, r.height];")


def at(d, fx, fy):
    """Pixel offsets from the SVG's centre (selenium's origin) of the fraction (fx, fy)."""
    w, h = size(d)
    return round((fx - 0.5) * w), round((fy - 0.5) * h)


def test_draw_edit_zoom_save_and_see_it_again(tmp_path, serve, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    _, url = serve(project(tmp_path), training=False)
    d = browser
    login(d, url)
    wait_for(d, lambda d: d.execute_script(
        "var i = document.querySelector('.region-canvas img');"
        "return i && i.complete && i.naturalWidth === 400;"), what="the image in the stage")
    assert d.execute_script("return document.querySelector('figure.media-image').hidden")
    assert not d.find_elements("css selector", "#item-text")  # the path is not shown as text
    assert "&lt;b&gt;tree&lt;/b&gt;" in d.page_source and "<b>tree</b>" not in d.page_source
    svg = d.find_element("css selector", ".region-svg")

    def drag(a, b):
        ActionChains(d).move_to_element_with_offset(svg, *at(d, *a)).click_and_hold() \
            .move_to_element_with_offset(svg, *at(d, *b)) \
            .move_to_element_with_offset(svg, *at(d, *b)).release().perform()

    def click(p):
        ActionChains(d).move_to_element_with_offset(svg, *at(d, *p)).click().perform()

    def keys(*ks):
        ActionChains(d).send_keys(*ks).perform()

    # a box, dragged (the first tool, the first label), then relabelled with its key
    drag((0.1, 0.1), (0.4, 0.3))
    [b] = drawn(d)
    assert b["type"] == "bbox" and b["label"] == "person"
    c = b["coordinates"]
    assert (c["x"], c["y"], c["width"], c["height"]) == pytest.approx((0.1, 0.1, 0.3, 0.2),
                                                                      abs=0.01)
    click((0.25, 0.2))  # a click (no drag) on it selects it; its label key relabels it
    keys("2")
    assert drawn(d)[0]["label"] == "vehicle"
    # a box inside it is a new box (nested objects), and choosing the label for the next
    # region does not relabel the last one drawn
    keys(Keys.ESCAPE)
    drag((0.2, 0.15), (0.3, 0.25))
    keys("1")
    assert [s["label"] for s in drawn(d)] == ["vehicle", "vehicle"]
    assert drawn(d)[0]["coordinates"]["x"] == pytest.approx(0.1, abs=0.01)  # not moved
    d.find_element("css selector", ".region-list li:nth-child(2) button").click()
    assert len(drawn(d)) == 1
    # a polygon: p, three corners, Enter closes it (and does not save the item)
    stage = d.find_element("css selector", ".region-stage")
    stage.click()  # (the focus back on the image after the list's button)
    keys("2", "p")
    for p in ((0.6, 0.6), (0.9, 0.6), (0.75, 0.9)):
        click(p)
    keys(Keys.ENTER)
    shapes = drawn(d)
    assert d.current_url.endswith("/annotate") and len(shapes) == 2
    assert shapes[1]["type"] == "polygon" and len(shapes[1]["coordinates"]) == 3
    assert shapes[1]["label"] == "vehicle"  # the label in hand
    assert shapes[1]["coordinates"][1] == pytest.approx({"x": 0.9, "y": 0.6}, abs=0.01)
    # a point, then select it (v, click) and delete it
    keys(Keys.ESCAPE, "k", "1")  # Esc: the polygon no longer selected, so 1 does not relabel it
    assert drawn(d)[1]["label"] == "vehicle"
    click((0.2, 0.8))
    assert drawn(d)[2] == {"type": "landmark", "label": "person",
                           "coordinates": pytest.approx({"x": 0.2, "y": 0.8}, abs=0.01)}
    keys("v")
    click((0.2, 0.8))
    keys(Keys.DELETE)
    assert len(drawn(d)) == 2
    # select the box and move it by dragging
    drag((0.25, 0.2), (0.35, 0.25))
    moved = drawn(d)[0]["coordinates"]
    assert (moved["x"], moved["y"]) == pytest.approx((0.2, 0.15), abs=0.01)
    assert moved["width"] == pytest.approx(0.3, abs=0.01)
    # keys alone: n puts a box in the middle, Shift+arrows size it, arrows move it
    keys(Keys.ESCAPE, "1", "n")
    ActionChains(d).key_down(Keys.SHIFT).send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT) \
        .key_up(Keys.SHIFT).send_keys(Keys.ARROW_DOWN).perform()
    kb = drawn(d)[2]
    assert kb["label"] == "person" and kb["coordinates"] == pytest.approx(
        {"x": 0.4, "y": 0.405, "width": 0.22, "height": 0.2})
    keys(Keys.DELETE)
    assert len(drawn(d)) == 2
    # zoom in and back: the image grows, and what is drawn stays where it is on it
    w0 = size(d)[0]
    keys("+")
    assert size(d)[0] == pytest.approx(1.5 * w0, rel=0.02)
    keys("0")
    assert size(d)[0] == pytest.approx(w0, rel=0.02)
    os.makedirs(SHOTS, exist_ok=True)
    d.save_screenshot(os.path.join(SHOTS, "regions-drawn.png"))
    expected = drawn(d)
    d.find_element("css selector", 'button[value="next"]').click()
    wait_for(d, lambda d: "Item 2 of 2" in d.page_source, what="the next item")
    # stored exactly as drawn: the admin's export
    c = Client(url)
    rows = [json.loads(line) for line in c.get("/admin/export.jsonl", headers=H).text
            .splitlines()]
    [row] = [r for r in rows if r.get("id", r.get("item_id")) == "s1"]
    [stored] = row["labels"]["objects"]
    assert stored["annotator"] == "dana"
    assert json.dumps(stored["label"], sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert row["aggregated_label"]["objects"] == expected  # one annotator: their regions
    # back on the first item, the regions are there again
    d.find_element("css selector", 'button[value="prev"]').click()
    wait_for(d, lambda d: "Item 1 of 2" in d.page_source, what="the first item again")
    wait_for(d, lambda d: len(d.find_elements("css selector", ".region-svg .region")) == 2,
             what="the regions drawn again")
    assert drawn(d) == expected


def test_a_region_outside_the_image_is_refused_with_the_reason(tmp_path, serve):
    _, url = serve(project(tmp_path), training=False)
    c = Client(url)
    c.login("eve")
    page = c.get("/annotate").text
    assert 'data-scheme="objects"' in page
    bad = [{"type": "bbox", "label": "person",
            "coordinates": {"x": 0.9, "y": 0.1, "width": 0.5, "height": 0.1}}]
    r = c.post("/annotate", form={"item_id": "s1", "position": "0", "present:objects": "1",
                                  "label:objects": json.dumps(bad), "action": "next"})
    assert r.status == 400, (r.status, r.text[:300])
    assert "past the image" in r.text
    rows = c.get("/admin/export.jsonl", headers=H).text.strip()
    assert "past" not in rows and '"x": 0.9' not in rows


def test_min_annotations_keeps_the_drawing_and_lets_the_annotator_go_back(tmp_path, serve,
                                                                           browser):
    """Save and next with fewer regions than min_annotations is stopped on the page, the
    drawing kept, with the reason; a polygon closes on a double click (no corner twice);
    Previous with nothing drawn is not refused (review 28)."""
    from selenium.webdriver.common.action_chains import ActionChains

    _, url = serve(project(tmp_path, "    min_annotations: 2\n"), training=False)
    d = browser
    login(d, url)
    wait_for(d, lambda d: d.execute_script(
        "var i = document.querySelector('.region-canvas img');"
        "return i && i.complete && i.naturalWidth === 400;"), what="the image in the stage")
    svg = d.find_element("css selector", ".region-svg")
    d.find_element("css selector", ".region-stage").click()
    ActionChains(d).send_keys("p").perform()
    for fx, fy in ((0.1, 0.1), (0.4, 0.1)):
        ActionChains(d).move_to_element_with_offset(svg, *at(d, fx, fy)).click().perform()
    ActionChains(d).move_to_element_with_offset(svg, *at(d, 0.25, 0.4)).double_click().perform()
    [poly] = drawn(d)
    assert poly["type"] == "polygon" and len(poly["coordinates"]) == 3
    d.find_element("css selector", 'button[value="next"]').click()
    message = d.find_element("css selector", ".region-message")
    wait_for(d, lambda d: message.is_displayed(), what="the note")
    assert "at least 2" in message.text and "1 drawn" in message.text
    assert "Item 1 of 2" in d.page_source and len(drawn(d)) == 1  # still here, still drawn
    # the second item named as upstream's examples do (/media/...): shown too; going back
    # from it with nothing drawn is not refused
    c = Client(url)
    c.login("eve")
    r = c.post("/annotate", form={"item_id": "s1", "position": "0", "present:objects": "1",
                                  "label:objects": json.dumps([poly, poly]), "action": "next"})
    assert r.status == 303, r.text[:300]
    page = c.get("/annotate").text
    assert "Item 2 of 2" in page and "/media/image/s2" in page
    r = c.post("/annotate", form={"item_id": "s2", "position": "1", "present:objects": "1",
                                  "label:objects": "[]", "action": "prev"})
    assert r.status == 303, r.text[:300]
    assert "Item 1 of 2" in c.get("/annotate").text
