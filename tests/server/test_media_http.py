"""The media route on a real server: who may fetch an item's file, its content type from the
bytes, byte ranges (206 with the exact bytes, 416), ETag and 304, HEAD, the errors for a
missing, refused or unshowable file, and the annotate page around it (image, audio player,
placeholder, the page's policy for URL media, escaping)."""

import os

from potato.server.media_route import MEDIA_CSP
from tests.helpers import KEY, Client, MEDIA_CONFIG, media_project

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root


def served(tmp_path, serve, **kw):
    _, url = serve(media_project(tmp_path, **kw), training=False)
    return url


def annotator(url, name="ana"):
    c = Client(url)
    c.login(name)
    return c


def test_only_annotators_and_admins_get_media(tmp_path, serve):
    url = served(tmp_path, serve)
    anon = Client(url)
    r = anon.get("/media/image/img0")
    assert r.status == 401 and "Log in to see an item&#x27;s media" in r.text
    assert r.headers["Content-Type"].startswith("text/html")
    r = anon.get("/media/image/img0", headers={"X-API-Key": "wrong-key-0123456789"})
    assert r.status == 401
    r = anon.get("/media/image/img0", headers={"X-API-Key": KEY})
    assert r.status == 200 and r.headers["Content-Type"] == "image/png"
    c = annotator(url)
    r = c.get("/media/image/img0")
    png = open(tmp_path / "media" / "digit-0.png", "rb").read()
    assert (r.status, r.body) == (200, png)
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Content-Security-Policy"] == MEDIA_CSP
    assert "sandbox" in MEDIA_CSP and "default-src 'none'" in MEDIA_CSP
    assert r.headers["Cache-Control"] == "private, no-cache"
    assert r.headers["Content-Length"] == str(len(png))
    assert r.headers.get_all("Content-Security-Policy") == [MEDIA_CSP]  # replaced, not added
    assert r.headers.get_all("Cache-Control") == ["private, no-cache"]


def test_annotators_get_only_their_items_media(tmp_path, serve):
    config = MEDIA_CONFIG + "max_annotations_per_user: 1\n"
    url = served(tmp_path, serve, config=config)
    c = annotator(url)
    assert c.get("/annotate").status == 200  # gets img0, the first item
    assert c.get("/media/image/img0").status == 200
    r = c.get("/media/image/img1")
    assert r.status == 403 and "is not one of yours" in r.text
    assert Client(url).get("/media/image/img1", headers={"X-API-Key": KEY}).status == 200


def test_the_type_comes_from_the_bytes_not_the_name(tmp_path, serve):
    rows = [{"id": "a", "image": "looks-like.gif"}, {"id": "s", "audio": "sounds/tone-1.wav"},
            {"id": "svg", "image": "evil.png"}, {"id": "txt", "image": "notes.png"}]
    path = media_project(tmp_path, items=rows)
    os.rename(tmp_path / "media" / "digit-1.png", tmp_path / "media" / "looks-like.gif")
    (tmp_path / "media" / "evil.png").write_bytes(b"<svg xmlns='http://www.w3.org/2000/svg'>"
                                                  b"<script>alert(1)</script></svg>")
    (tmp_path / "media" / "notes.png").write_bytes(b"<html><script>alert(1)</script>")
    _, url = serve(path, training=False)
    c = annotator(url)
    assert c.get("/media/image/a").headers["Content-Type"] == "image/png"
    r = c.get("/media/audio/s")
    assert r.headers["Content-Type"] == "audio/wav" and r.body[:4] == b"RIFF"
    for item in ("svg", "txt"):
        r = c.get(f"/media/image/{item}")
        assert r.status == 415, r.text
        assert b"alert(1)" not in r.body and "Convert it to a format browsers show" in r.text
    assert "SVG (not served: it can carry scripts" in c.get("/media/image/svg").text
    r = c.get("/media/audio/a")  # the item has an image, no audio
    assert r.status == 404 and "has no audio" in r.text


def test_range_requests_and_conditional_gets(tmp_path, serve):
    url = served(tmp_path, serve)
    c = annotator(url)
    wav = open(tmp_path / "media" / "sounds" / "tone-0.wav", "rb").read()
    size = len(wav)
    full = c.get("/media/audio/tone0")
    assert full.status == 200 and full.body == wav and full.headers["Accept-Ranges"] == "bytes"
    etag = full.headers["ETag"]
    assert etag.startswith('"') and full.headers["Last-Modified"].endswith("GMT")
    r = c.get("/media/audio/tone0", headers={"Range": "bytes=100-199"})
    assert r.status == 206 and r.body == wav[100:200]
    assert r.headers["Content-Range"] == f"bytes 100-199/{size}"
    assert r.headers["Content-Length"] == "100"
    r = c.get("/media/audio/tone0", headers={"Range": "bytes=-44"})
    assert (r.status, r.body) == (206, wav[-44:])
    r = c.get("/media/audio/tone0", headers={"Range": f"bytes={size - 10}-"})
    assert (r.status, r.body) == (206, wav[-10:])
    r = c.get("/media/audio/tone0", headers={"Range": f"bytes={size}-"})
    assert r.status == 416 and r.headers["Content-Range"] == f"bytes */{size}"
    assert "lies past the end of the file" in r.text
    r = c.get("/media/audio/tone0", headers={"Range": "bytes=0-1,5-6"})  # several: all of it
    assert (r.status, r.body) == (200, wav)
    r = c.get("/media/audio/tone0", headers={"Range": "bytes=0-9", "If-Range": '"old"'})
    assert (r.status, r.body) == (200, wav)
    r = c.get("/media/audio/tone0", headers={"Range": "bytes=0-9", "If-Range": etag})
    assert (r.status, r.body) == (206, wav[:10])
    r = c.get("/media/audio/tone0", headers={"If-None-Match": etag})
    assert (r.status, r.body) == (304, b"") and r.headers["ETag"] == etag
    r = c.get("/media/audio/tone0", headers={"If-None-Match": '"other", W/' + etag})
    assert r.status == 304
    os.utime(tmp_path / "media" / "sounds" / "tone-0.wav", ns=(1, 10 ** 18))
    r = c.get("/media/audio/tone0", headers={"If-None-Match": etag})
    assert r.status == 200 and r.headers["ETag"] != etag  # the file changed
    r = c.request("HEAD", "/media/audio/tone0", headers={"Range": "bytes=0-9"})
    assert (r.status, r.body, r.headers["Content-Length"]) == (206, b"", "10")


def test_a_file_that_grows_is_sent_as_it_was_measured(tmp_path, serve):
    big = os.urandom(3 * 64 * 1024 + 17)
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "big.wav").write_bytes(b"RIFF\0\0\0\0WAVEfmt " + big)
    url = served(tmp_path, serve, items=[{"id": "b", "audio": "big.wav"}])
    c = annotator(url)
    r = c.get("/media/audio/b")
    assert r.status == 200 and len(r.body) == 16 + len(big)
    r = c.get("/media/audio/b", headers={"Range": "bytes=70000-200000"})
    assert r.status == 206 and r.body == (b"RIFF\0\0\0\0WAVEfmt " + big)[70000:200001]


def test_missing_and_refused_files_are_clear_errors_and_placeholders(tmp_path, serve):
    rows = [{"id": "gone", "image": "not-here.png"}, {"id": "up", "image": "../config.yaml"},
            {"id": "link", "image": "out.png"}, {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "media" / "out.png").symlink_to(tmp_path / "media" / ".." / "items.jsonl")
    _, url = serve(path, training=False)
    c = annotator(url)
    r = c.get("/media/image/gone")
    assert r.status == 404 and "&#x27;not-here.png&#x27; is not in the media folder" in r.text
    for item in ("up", "link"):
        r = c.get(f"/media/image/{item}")
        assert r.status == 403 and "is not inside the media folder, so it is not served" in r.text
        assert str(tmp_path) not in r.text  # no server path for annotators
    assert c.get("/media/image/nope").status == 404
    assert c.get("/media/video/ok").status == 404
    assert c.get("/media/image/..%2F..%2Fconfig.yaml").status == 404  # an id, never a path
    page = c.get("/annotate")
    assert page.status == 200
    assert '<div class="media-missing" role="note" data-kind="image">' in page.text
    assert "&#x27;not-here.png&#x27; is missing from the media folder" in page.text
    assert "<img" not in page.text
    c.post("/annotate", form={"item_id": "gone", "position": "0", "action": "next",
                              "label:kind": "other"})
    page = c.get("/annotate").text
    assert "&#x27;../config.yaml&#x27; is not inside the media folder" in page


def test_a_folder_named_as_media_is_said_to_be_a_folder_on_the_page(tmp_path, serve):
    path = media_project(tmp_path, items=[{"id": "dir", "image": "sub"}])
    (tmp_path / "media" / "sub").mkdir()
    _, url = serve(path, training=False)
    page = annotator(url).get("/annotate").text
    assert "&#x27;sub&#x27; is a folder, not a file" in page and "missing from" not in page


def test_the_annotate_page_shows_image_audio_and_url_media(tmp_path, serve):
    rows = [{"id": "img/0", "image": "digit-0.png"},
            {"id": "tone0", "audio": "sounds/tone-0.wav", "text": "Which <b>sound</b>?"},
            {"id": "web", "image": "https://img.example.org/a.png?x=1&y=2"},
            {"id": "webaudio", "audio": "https://sounds.example.org:8443/a.wav", "text": "t"},
            {"id": "quote", "image": "https://ex.org/a.png\"onerror=\"alert(1)", "text": "t"}]
    url = served(tmp_path, serve, items=rows)
    c = annotator(url)
    page = c.get("/annotate")
    assert '<img class="media-img" src="/media/image/img%2F0" alt="digit-0.png">' in page.text
    assert 'id="item-text"' not in page.text  # an image item without text
    assert '<script src="/static/media.js"></script>' in page.text
    assert 'class="media-layout"' in page.text
    assert page.headers.get_all("Content-Security-Policy")[0].startswith("default-src 'self'; "
                                                                         "img-src 'self' data:;")
    assert c.get("/media/image/img%2F0").status == 200
    c.post("/annotate", form={"item_id": "img/0", "position": "0", "action": "next",
                              "label:kind": "digit"})
    page = c.get("/annotate").text
    assert ('<audio class="media-audio-player" controls preload="metadata" '
            'src="/media/audio/tone0">') in page
    assert "Which &lt;b&gt;sound&lt;/b&gt;?" in page
    assert "has no image" not in page  # an audio item; its (absent) image is no news
    c.post("/annotate", form={"item_id": "tone0", "position": "1", "action": "next"})
    r = c.get("/annotate")
    assert 'src="https://img.example.org/a.png?x=1&amp;y=2"' in r.text
    [csp] = r.headers.get_all("Content-Security-Policy")
    assert "img-src 'self' data: https://img.example.org;" in csp
    assert "media-src 'self'" in csp and "script-src 'self';" in csp
    c.post("/annotate", form={"item_id": "web", "position": "2", "action": "next"})
    r = c.get("/annotate")
    [csp] = r.headers.get_all("Content-Security-Policy")
    assert csp.endswith("; media-src 'self' https://sounds.example.org:8443")
    assert "img-src 'self' data:;" in csp
    c.post("/annotate", form={"item_id": "webaudio", "position": "3", "action": "next"})
    r = c.get("/annotate")
    assert "is not an http(s) address the page loads" in r.text and "<img" not in r.text
    assert "onerror=&quot;alert(1)" in r.text and 'onerror="' not in r.text
    assert "https://ex.org" not in r.headers["Content-Security-Policy"]


UPSTREAM_DISPLAY = """\
annotation_task_name: up
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
media_directory: media
instance_display:
  fields:
    - {key: caption, type: text, label: Caption}
    - {key: picture, type: image, label: The <picture>}
annotation_schemes:
  - {annotation_type: radio, name: kind, labels: [a, b]}
"""


def test_upstream_image_fields_show_in_their_place(tmp_path, serve):
    rows = [{"id": "p", "picture": "digit-1.png", "caption": "A one", "text": "the text"},
            {"id": "q", "caption": "no picture", "text": "t"}]
    url = served(tmp_path, serve, items=rows, config=UPSTREAM_DISPLAY)
    c = annotator(url)
    page = c.get("/annotate").text
    section = page[page.index('<section class="display-field display-image" data-key="picture">'):]
    assert section.startswith('<section class="display-field display-image" data-key="picture">'
                              '<h2 class="field-label">The &lt;picture&gt;</h2><figure class='
                              '"media media-image" data-kind="image">')
    assert page.index("A one") < page.index('<figure class="media media-image"')
    assert page.count("<figure") == 1 and 'id="item-text"' in page
    assert c.get("/media/image/p").status == 200
    c.post("/annotate", form={"item_id": "p", "position": "0", "action": "next"})
    assert '<p class="hint media-none">(this item has no image)</p>' in c.get("/annotate").text


def test_a_folder_swapped_for_a_symlink_is_never_served(tmp_path, serve, monkeypatch):
    from potato.project import media
    url = served(tmp_path, serve, items=[{"id": "s", "image": "sub/a.png"}])
    png = (tmp_path / "media" / "digit-0.png").read_bytes()
    (tmp_path / "media" / "sub").mkdir()
    (tmp_path / "media" / "sub" / "a.png").write_bytes(png)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.png").write_bytes(png + b"TOP-SECRET")
    check, swapped = media.local_path, []

    def then_swap(cfg, ref):  # what race.py did by chance: between the check and the open
        path = check(cfg, ref)
        os.rename(tmp_path / "media" / "sub", tmp_path / "media" / "sub-real")
        (tmp_path / "media" / "sub").symlink_to(tmp_path / "outside")
        swapped.append(path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    r = Client(url).get("/media/image/s", headers={"X-API-Key": KEY})
    assert swapped and b"TOP-SECRET" not in r.body
    assert r.status == 403 and "is not inside the media folder, so it is not served" in r.text


def unblock(fifo):
    """Opens the FIFO's writing end once, so a reader stuck in open() gets EOF (only a test
    that fails leaves one)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waiting: nothing blocked


def test_a_fifo_or_folder_answers_at_once(tmp_path, serve):
    rows = [{"id": "p", "image": "pipe.png"}, {"id": "d", "audio": "sounds"}]
    url = served(tmp_path, serve, items=rows)
    fifo = tmp_path / "media" / "pipe.png"
    os.mkfifo(fifo)
    c = Client(url)
    try:
        r = c.get("/media/image/p", headers={"X-API-Key": KEY})
    finally:
        unblock(fifo)
    assert r.status == 404
    assert ("Item &#x27;p&#x27;&#x27;s image &#x27;pipe.png&#x27; is a FIFO (named pipe), not a "
            "file. Name an image file in the media folder") in r.text
    r = c.get("/media/audio/d", headers={"X-API-Key": KEY})
    assert r.status == 404 and "&#x27;sounds&#x27; is a folder, not a file." in r.text


def test_a_file_swapped_for_a_fifo_answers_at_once(tmp_path, serve, monkeypatch):
    from potato.project import media
    url = served(tmp_path, serve, items=[{"id": "f", "image": "digit-1.png"}])
    check, fifo = media.local_path, tmp_path / "media" / "digit-1.png"

    def then_swap(cfg, ref):  # what race2.py did by chance: between the check and the open
        path = check(cfg, ref)
        os.remove(path)
        os.mkfifo(path)
        return path

    monkeypatch.setattr(media, "local_path", then_swap)
    try:
        r = Client(url).get("/media/image/f", headers={"X-API-Key": KEY})
    finally:
        unblock(fifo)
    assert r.status == 404 and "is a FIFO (named pipe), not a file" in r.text


def test_error_pages_escape_and_shorten_names(tmp_path, serve):
    rows = [{"id": "g", "image": "\x1b[2J" + "n" * 300 + ".png"}]
    url = served(tmp_path, serve, items=rows)
    c = Client(url)
    r = c.get("/media/image/g", headers={"X-API-Key": KEY})
    assert r.status == 404 and "\\x1b[2J" + "n" * 113 + "…" in r.text
    assert "\x1b" not in r.text and "n" * 114 not in r.text
    r = c.get("/media/image/%1B%5D0%3Bx%07" + "i" * 3000, headers={"X-API-Key": KEY})
    assert r.status == 404 and "No item &#x27;\\x1b]0;x\\x07" in r.text
    assert "\x1b" not in r.text and "i" * 200 not in r.text


def test_the_docs_give_the_media_policy_as_sent():
    root = ROOT_DIR
    with open(os.path.join(root, "docs", "annotation-server.md"), encoding="utf-8") as f:
        docs = f.read()
    assert f"`Content-Security-Policy: {MEDIA_CSP}`" in docs


def test_a_link_swapped_for_a_file_while_it_is_resolved_is_a_404_and_a_log_line(
        tmp_path, serve, monkeypatch, caplog):
    # issue 34, item 7: realpath saw a symlink, then the name was a file again when it read
    # the link (EINVAL): that OSError reached the client as a 500 with a traceback
    url = served(tmp_path, serve, items=[{"id": "l", "image": "link.png"}])
    media_dir = tmp_path / "media"
    (media_dir / "link.png").symlink_to("digit-0.png")
    readlink, swapped = os.readlink, []

    def swap_then_read(path, *a, **kw):
        if str(path).endswith("link.png") and not swapped:
            os.remove(path)
            (media_dir / "link.png").write_bytes((media_dir / "digit-0.png").read_bytes())
            swapped.append(path)
        return readlink(path, *a, **kw)

    monkeypatch.setattr(os, "readlink", swap_then_read)
    caplog.set_level("WARNING", logger="potato.server")
    c = Client(url)
    r = c.get("/media/image/l", headers={"X-API-Key": KEY})
    assert swapped and r.status == 404, (r.status, r.text[:300])
    assert "Item &#x27;l&#x27;&#x27;s image &#x27;link.png&#x27; changed while it was read; " \
           "try again." in r.text and "Traceback" not in r.text
    assert any("media request for item 'l': 'link.png' changed while it was looked up" in
               m for m in caplog.messages), caplog.messages
    r = c.get("/media/image/l", headers={"X-API-Key": KEY})  # now a plain file: served
    assert r.status == 200
