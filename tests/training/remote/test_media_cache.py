"""The media cache and the pieces around it, without a host: LRU eviction that honours pins,
verification on arrival, hostile hashes and names, the server's hash cache, URL media."""

import hashlib
import io
import json
import os
import re
import stat
import tarfile
import threading
import time

import pytest

from potato.training.exchange import media_bundle
from potato.training.remote import media, media_cache as mc
from potato.training.remote import media_store as ms
from potato.training.remote import media as media_mod
from potato.training.remote import media_receive


def sha(data):
    return hashlib.sha256(data).hexdigest()


def put(cache, data, age=0.0):
    ms.store(str(cache), sha(data), len(data), io.BytesIO(data).read)
    path = mc.file_path(str(cache), sha(data))
    if age:
        t = time.time() - age
        os.utime(path, (t, t))
    return sha(data)


def test_store_verifies_and_is_private(tmp_path):
    cache = tmp_path / "media"
    h = put(cache, b"x" * 1000)
    path = mc.file_path(str(cache), h)
    assert open(path, "rb").read() == b"x" * 1000
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    with pytest.raises(mc.CacheError, match="another sha256"):
        ms.store(str(cache), sha(b"good"), 4, io.BytesIO(b"evil").read)
    with pytest.raises(mc.CacheError, match="2 of 4 bytes"):
        ms.store(str(cache), sha(b"good"), 4, io.BytesIO(b"go").read)
    assert not os.path.exists(mc.file_path(str(cache), sha(b"good")))
    assert [p.name for p in cache.rglob(".*")] == []  # no half file left


def test_lru_eviction_never_takes_a_pinned_file(tmp_path):
    cache = str(tmp_path / "media")
    oldest = put(cache, b"a" * 1000, age=300)
    old = put(cache, b"b" * 1000, age=200)
    newer = put(cache, b"c" * 1000, age=100)
    newest = put(cache, b"d" * 1000)
    mc.pin(cache, "run-1", [(oldest, 1000)])  # a running run needs the oldest file
    removed, freed, held = mc.evict(cache, 2500)
    assert (removed, freed, held) == (2, 2000, 2000)
    left = {h for _, _, h in mc.entries(cache)}
    assert left == {oldest, newest}  # the pinned one stays; the least recently used go
    assert old not in left and newer not in left
    # touched on use: the pinned file is now the most recent; unpinned, the other goes first
    mc.touch(cache, oldest)
    mc.unpin(cache, "run-1")
    t = time.time() - 50
    os.utime(mc.file_path(cache, newest), (t, t))
    assert mc.evict(cache, 1000)[:2] == (1, 1000)
    assert {h for _, _, h in mc.entries(cache)} == {oldest}


def test_stale_pins_expire(tmp_path):
    cache = str(tmp_path / "media")
    h = put(cache, b"z" * 500, age=100)
    mc.pin(cache, "killed-run", [(h, 500)])
    assert mc.evict(cache, 0)[0] == 0  # fresh pin: kept although over the limit
    t = time.time() - mc.PIN_STALE_S - 10
    os.utime(os.path.join(cache, ".pins", "killed-run"), (t, t))
    assert mc.evict(cache, 0)[0] == 1
    assert not os.path.exists(os.path.join(cache, ".pins", "killed-run"))


def test_files_left_half_way_go_once_stale(tmp_path):
    cache = str(tmp_path / "media")
    h = put(cache, b"kept")
    half = os.path.join(cache, h[:2], "." + h[:16] + "abc")
    open(half, "wb").close()
    mc.evict(cache, 1 << 30)
    assert os.path.exists(half)  # it may be on its way in right now
    t = time.time() - mc.INCOMING_STALE_S - 10
    os.utime(half, (t, t))
    mc.evict(cache, 1 << 30)
    assert not os.path.exists(half) and mc.have(cache, h, 4)


def test_need_pins_and_touches(tmp_path):
    cache = str(tmp_path / "media")
    here = put(cache, b"here", age=1000)
    gone = sha(b"gone")
    assert mc.need(cache, "job-a", [(here, 4), (gone, 4)]) == [(gone, 4)]
    assert time.time() - os.stat(mc.file_path(cache, here)).st_mtime < 60
    assert mc.read_pin(cache, "job-a") == {here: 4, gone: 4}
    assert mc.need(cache, "job-b", [(here, 5)]) == [(here, 5)]  # another size: not the file


@pytest.mark.parametrize("bad", ["../../etc/passwd", "ab/../../x", "A" * 64, "0" * 63,
                                 "/" + "0" * 63, "0" * 64 + "\n"])
def test_hostile_hashes_are_refused(tmp_path, bad):
    with pytest.raises(mc.CacheError):
        mc.file_path(str(tmp_path), bad)
    assert not mc.valid_hash(bad)


@pytest.mark.parametrize("bad", ["..", "../x", "a/b", "", "x" * 121, "a\x00b"])
def test_hostile_pin_names_are_refused(tmp_path, bad):
    with pytest.raises(mc.CacheError):
        mc.pin(str(tmp_path / "media"), bad, [])
    assert not (tmp_path / "x").exists()


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def test_receive_takes_only_the_pinned_files(tmp_path):
    cache = str(tmp_path / "media")
    good, evil = b"good bytes", b"evil bytes"
    mc.pin(cache, "job", [(sha(good), len(good)), (sha(b"other"), 5)])
    out = media_receive.receive(cache, "job", _tar([
        (sha(good), good),
        ("../" + sha(evil), evil),                # a name with a path in it
        ("../../outside", evil),
        (sha(evil), evil),                        # not in the run's pin
        (sha(b"other"), b"OTHER"),                # pinned, but the bytes do not match
    ]), 1 << 30)
    assert out["received"] == 1 and out["bad_count"] == 4, out
    assert mc.have(cache, sha(good), len(good))
    assert not mc.have(cache, sha(b"other"), 5)
    assert not (tmp_path / "outside").exists()
    assert {h for _, _, h in mc.entries(cache)} == {sha(good)}


def test_server_hashes_each_file_once(tmp_path):
    from potato.config.settings import Config

    cfg = Config(path=str(tmp_path / "c.yaml"), task_dir=str(tmp_path))
    cfg.output_dir = str(tmp_path / "out")
    folder = tmp_path / "img"
    folder.mkdir()
    items = []
    for i in range(5):
        p = folder / ("%d.png" % i)
        p.write_bytes(b"png %d" % (i % 3))  # two pairs share their bytes
        items.append(("i%d" % i, "t", {"kind": "image", "path": str(p)}))
    items.append(("url", "t", {"kind": "image", "url": "https://example.org/x.png"}))
    index_path = str(tmp_path / "run" / "media.json")
    out = media_bundle.to_cache_form(cfg, items, index_path)
    assert out[0][2] == {"kind": "image", "sha256": sha(b"png 0"), "size": 5, "name": "0.png"}
    assert out[5][2] == items[5][2]  # URL media travel as they are
    assert len(media_bundle.load_index(index_path)) == 3

    calls = []
    real = media_bundle.file_sha256
    media_bundle.file_sha256 = lambda p: calls.append(p) or real(p)
    try:
        media_bundle.to_cache_form(cfg, items, index_path)
        assert calls == []  # a second run hashes nothing that did not change
        (folder / "1.png").write_bytes(b"changed!")
        again = media_bundle.to_cache_form(cfg, items, index_path)
        assert calls == [str(folder / "1.png")]
        assert again[1][2]["sha256"] == sha(b"changed!")
    finally:
        media_bundle.file_sha256 = real


def _project(tmp_path):
    from potato.config.settings import Config

    cfg = Config(path=str(tmp_path / "c.yaml"), task_dir=str(tmp_path))
    cfg.output_dir = str(tmp_path / "out")
    return cfg


def _image(folder, name, data):
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return {"kind": "image", "path": str(folder / name)}


def _hashed(lines):
    """What the run log's media line says: (files listed, their plural, files hashed now)."""
    said = [line for line in lines if line.startswith("media: ")]
    assert len(said) == 1, lines
    m = re.search(r"(\d+) (files?) .* (\d+) hashed", said[0])
    return int(m.group(1)), m.group(2), int(m.group(3))


def test_the_hashes_are_kept_in_the_output_folder_as_documented(tmp_path, monkeypatch):
    cfg = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    items = [("a", "t", _image(tmp_path / "img", "a.png", b"png a"))]
    media_bundle.to_cache_form(cfg, items, str(tmp_path / "run" / "media.json"))
    kept = os.path.join(cfg.output_dir, "training", "media-hashes.json")  # docs/backends/ssh.md
    assert media_bundle.hashes_path(cfg) == kept
    with open(kept) as f:
        assert json.load(f) == {items[0][2]["path"]: [os.stat(items[0][2]["path"]).st_mtime_ns,
                                                      5, sha(b"png a")]}
    assert sorted(os.listdir(tmp_path)) == ["img", "out", "run"]  # nothing beside the project


def test_each_item_keeps_its_id_and_text_and_the_index_says_where_each_file_is(tmp_path):
    cfg = _project(tmp_path)
    folder = tmp_path / "img"
    items = [("a", "first", _image(folder, "a.png", b"png a")),
             ("b", "second", None),
             ("c", "third", _image(folder, "c.png", b"png a")),  # the same bytes as a.png
             ("d", "fourth", _image(folder, "d.png", b"png dd"))]
    index_path = str(tmp_path / "run" / "media.json")
    out = media_bundle.to_cache_form(cfg, items, index_path)
    assert [o[:2] for o in out] == [i[:2] for i in items]
    assert out[1][2] is None
    assert out[2][2] == {"kind": "image", "sha256": sha(b"png a"), "size": 5, "name": "c.png"}
    assert media_bundle.load_index(index_path) == {
        sha(b"png a"): {"path": str(folder / "a.png"), "size": 5, "name": "a.png"},
        sha(b"png dd"): {"path": str(folder / "d.png"), "size": 6, "name": "d.png"}}


def test_the_run_log_counts_the_files_listed_and_those_hashed_now(tmp_path):
    cfg = _project(tmp_path)
    folder = tmp_path / "img"
    one = [("a", "t", _image(folder, "a.png", b"png a"))]
    lines = []
    media_bundle.to_cache_form(cfg, one, str(tmp_path / "r1.json"), lines.append)
    assert _hashed(lines) == (1, "file", 1)
    three = one + [("b", "t", _image(folder, "b.png", b"png b")),
                   ("b2", "t", {"kind": "image", "path": str(folder / "b.png")}),  # listed twice
                   ("c", "t", _image(folder, "c.png", b"png c"))]
    lines = []
    media_bundle.to_cache_form(cfg, three, str(tmp_path / "r2.json"), lines.append)
    assert _hashed(lines) == (3, "files", 2)  # b.png once, though two items name it
    lines = []
    media_bundle.to_cache_form(cfg, three, str(tmp_path / "r3.json"), lines.append)
    assert _hashed(lines) == (3, "files", 0)


def test_a_file_listed_twice_in_a_new_cache_is_hashed_once(tmp_path, monkeypatch):
    cfg = _project(tmp_path)
    item = _image(tmp_path / "img", "a.png", b"png a")
    calls = []
    real = media_bundle.file_sha256
    monkeypatch.setattr(media_bundle, "file_sha256", lambda p: calls.append(p) or real(p))
    out = media_bundle.to_cache_form(cfg, [("a", "t", item), ("b", "t", dict(item))],
                                     str(tmp_path / "media.json"))
    assert calls == [item["path"]] and out[0][2] == out[1][2]


def test_a_file_hashed_in_pieces_has_the_sha256_of_its_bytes(tmp_path):
    data = os.urandom(3 << 20) + b"tail"  # more than one read
    (tmp_path / "big").write_bytes(data)
    assert media_bundle.file_sha256(str(tmp_path / "big")) == sha(data)
    (tmp_path / "empty").write_bytes(b"")
    assert media_bundle.file_sha256(str(tmp_path / "empty")) == sha(b"")


@pytest.mark.parametrize("kept", ["[1, 2]", "\"text\"", "{not json", "7"])
def test_a_damaged_hashes_file_is_hashed_again_and_replaced(tmp_path, kept):
    cfg = _project(tmp_path)
    os.makedirs(os.path.dirname(media_bundle.hashes_path(cfg)))
    with open(media_bundle.hashes_path(cfg), "w") as f:
        f.write(kept)
    item = _image(tmp_path / "img", "a.png", b"png a")
    lines = []
    out = media_bundle.to_cache_form(cfg, [("a", "t", item)], str(tmp_path / "m.json"),
                                     lines.append)
    assert out[0][2]["sha256"] == sha(b"png a") and _hashed(lines) == (1, "file", 1)
    with open(media_bundle.hashes_path(cfg)) as f:
        assert list(json.load(f)) == [item["path"]]


def test_a_stale_hash_is_not_trusted(tmp_path):
    cfg = _project(tmp_path)
    item = _image(tmp_path / "img", "a.png", b"png a")
    st = os.stat(item["path"])
    os.makedirs(os.path.dirname(media_bundle.hashes_path(cfg)))
    for entry in ([st.st_mtime_ns, 5, "f" * 64, "extra"], [st.st_mtime_ns, 4, "f" * 64],
                  [st.st_mtime_ns + 1, 5, "f" * 64], {"sha": "f" * 64}):
        with open(media_bundle.hashes_path(cfg), "w") as f:
            json.dump({item["path"]: entry}, f)
        out = media_bundle.to_cache_form(cfg, [("a", "t", item)], str(tmp_path / "m.json"))
        assert out[0][2]["sha256"] == sha(b"png a"), entry


def test_an_unreadable_file_leaves_its_item_without_media_and_says_so(tmp_path):
    cfg = _project(tmp_path)
    folder = tmp_path / "img"
    items = [("gone", "t", {"kind": "image", "path": str(folder / "gone.png")}),
             ("b", "t", _image(folder, "b.png", b"png b"))]
    lines = []
    out = media_bundle.to_cache_form(cfg, items, str(tmp_path / "m.json"), lines.append)
    assert out[0] == ("gone", "t", None) and out[1][2]["sha256"] == sha(b"png b")
    said = [line for line in lines if "gone" in line]
    assert len(said) == 1 and "No such file or directory" in said[0]
    assert "Errno" not in said[0]  # the reason in words, not an exception's repr
    assert list(media_bundle.load_index(str(tmp_path / "m.json"))) == [sha(b"png b")]


def test_hashes_that_cannot_be_saved_are_said_and_the_run_goes_on(tmp_path):
    cfg = _project(tmp_path)
    os.makedirs(cfg.output_dir)
    with open(os.path.join(cfg.output_dir, "training"), "w") as f:
        f.write("a file where the folder should be")
    lines = []
    out = media_bundle.to_cache_form(
        cfg, [("a", "t", _image(tmp_path / "img", "a.png", b"png a"))],
        str(tmp_path / "m.json"), lines.append)
    assert out[0][2]["sha256"] == sha(b"png a")
    said = [line for line in lines if media_bundle.hashes_path(cfg) in line]
    assert len(said) == 1 and "Errno" not in said[0]  # the reason in words
    assert _hashed(lines) == (1, "file", 1)


def test_a_run_without_media_empties_an_index_left_from_before(tmp_path):
    cfg = _project(tmp_path)
    index_path = str(tmp_path / "m.json")
    with open(index_path, "w") as f:
        json.dump({"a" * 64: {"path": "/old", "size": 1, "name": "old"}}, f)
    lines = []
    assert media_bundle.to_cache_form(cfg, [("a", "t", None)], index_path, lines.append) == [
        ("a", "t", None)]
    assert media_bundle.load_index(index_path) == {} and lines == []
    assert not os.path.exists(str(tmp_path / "none.json"))
    media_bundle.to_cache_form(cfg, [("a", "t", None)], str(tmp_path / "none.json"))
    assert not os.path.exists(str(tmp_path / "none.json"))  # no index where none was


def test_an_index_that_is_not_a_mapping_reads_as_empty(tmp_path):
    for text in ("[1]", "3", "{bad"):
        (tmp_path / "m.json").write_text(text)
        assert media_bundle.load_index(str(tmp_path / "m.json")) == {}
    assert media_bundle.load_index(str(tmp_path / "missing.json")) == {}


def test_the_wanted_list_is_each_file_and_its_size_by_hash(tmp_path):
    index = {"b" * 64: {"path": "/x/b", "size": 7, "name": "b"},
             "a" * 64: {"path": "/x/a", "size": 0, "name": "a"}}
    assert json.loads(media_bundle.dumps_wanted(index)) == [["a" * 64, 0], ["b" * 64, 7]]
    assert json.loads(media_bundle.dumps_wanted({})) == []


@pytest.mark.parametrize("n, said", [
    (0, "0"), (1, "0.0"), (52429, "0.1"), (1 << 19, "0.5"), ((1 << 20) - 1, "1.0"),
    (1 << 20, "1"), (int(1.4 * (1 << 20)), "1"), (int(1.6 * (1 << 20)), "2"),
    (1500 << 20, "1,500")])
def test_megabytes_are_whole_from_one_and_tenths_below(n, said):
    assert media_bundle.mb(n) == said


def test_url_media_failures_are_named_and_bounded(tmp_path):
    def fake_fetch(url, dest):
        if "bad" in url:
            return "%s could not be fetched: the server answered 404 Not Found" % url
        with open(dest, "wb") as f:
            f.write(url.encode())
        return None

    items = [{"media": {"kind": "image", "url": "https://h/ok%d.png" % i}} for i in range(40)]
    items += [{"media": {"kind": "image", "url": "https://h/bad0.png"}}]
    errors = []
    fetched, failed = media.fetch_urls(items, str(tmp_path / "u"), on_error=errors.append,
                                       fetch=fake_fetch)
    assert (fetched, failed) == (40, 1)
    assert errors == ["https://h/bad0.png could not be fetched: the server answered 404 "
                      "Not Found"]
    assert open(media.path_for(items[0]["media"], {}), "rb").read() == b"https://h/ok0.png"
    with pytest.raises(media.MediaMissing, match="404"):
        media.path_for(items[-1]["media"], {})
    many = [{"media": {"kind": "image", "url": "https://h/bad%d.png" % i}} for i in range(5)]
    many += [{"media": {"kind": "image", "url": "https://h/ok%d.png" % i}} for i in range(20)]
    with pytest.raises(media.TooManyFailed, match=r"5 of 25 media URLs .*bad0\.png"):
        media.fetch_urls(many, str(tmp_path / "v"), fetch=fake_fetch)


def test_fetch_url_caps_the_size(tmp_path):
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b"x" * 5000)

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d/a.png" % srv.server_port
        assert media.fetch_url(url, str(tmp_path / "a"), max_bytes=10000) is None
        assert os.path.getsize(tmp_path / "a") == 5000
        error = media.fetch_url(url, str(tmp_path / "b"), max_bytes=1000)
        assert "over the 0 MB limit" in error or "limit" in error
        assert not (tmp_path / "b").exists() and not (tmp_path / "b.part").exists()
        error = media.fetch_url("http://127.0.0.1:1/none.png", str(tmp_path / "c"), timeout=5)
        assert error.startswith("http://127.0.0.1:1/none.png could not be fetched: ")
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def test_items_listing_refuses_bad_entries(tmp_path):
    from potato.training.remote import media_fetch

    p = tmp_path / "items.jsonl"
    p.write_text(json.dumps({"id": "a", "media": {"sha256": "0" * 64, "size": 3}}) + "\n")
    assert media_fetch.wanted(str(p)) == {"0" * 64: (3, "0" * 12)}
    p.write_text(json.dumps({"id": "a", "media": {"sha256": "../" + "0" * 61, "size": 3}}))
    with pytest.raises(mc.CacheError):
        media_fetch.wanted(str(p))


@pytest.mark.parametrize("media", [
    {"kind": "image", "sha256": "../../../etc/passwd", "size": 1, "name": "x.png"},
    {"kind": "image", "sha256": "ab/../../" + "0" * 55, "size": 1, "name": "x.png"},
    {"kind": "image", "sha256": "0" * 64, "size": 1, "name": "../../etc/passwd"},
])
def test_path_for_never_leaves_the_cache(tmp_path, media):
    cache = tmp_path / "media"
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("secret")
    with pytest.raises(media_mod.MediaMissing):
        media_mod.path_for(media, {"media_cache": str(cache)})


def test_a_media_download_waits_out_a_busy_server(tmp_path):
    """A 503 (the run's request slots taken for a moment by its own reports) is tried again
    after a pause, for a single file and for a batch; before, it failed the whole run."""
    import http.client
    import http.server

    from potato.training.remote import media_fetch
    from tests.helpers import media_server

    files = {hashlib.sha256(b).hexdigest(): b for b in (b"first file " * 50, b"second" * 9)}
    busy = {"left": 2}

    class H(http.server.BaseHTTPRequestHandler):
        def _answer(self, body):
            if busy["left"] > 0:
                busy["left"] -= 1
                self.send_response(503)
                msg = b'{"error": "Run r1 already has 7 requests under way"}'
                self.send_header("Content-Length", str(len(msg)))
                self.send_header("Retry-After", "1")
                self.end_headers()
                self.wfile.write(msg)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._answer(files[self.path.rsplit("/", 1)[1]])

        def do_POST(self):
            n = int(self.headers["Content-Length"])
            hashes = json.loads(self.rfile.read(n))["hashes"]
            self._answer(b"".join(files[h] for h in hashes))

        def log_message(self, *a):
            pass

    client, stop = media_server(H)

    try:
        cache = str(tmp_path / "cache")
        d = media_fetch.Downloader(client, "r1", cache)
        sha = sorted(files)[0]
        d.fetch(sha, len(files[sha]))  # two 503s, then the file
        assert open(mc.file_path(cache, sha), "rb").read() == files[sha]
        busy["left"] = 1
        other = sorted(files)[1]
        done = []
        d.fetch_batch([(other, len(files[other]))], done.append)  # a 503: one by one
        assert done == [len(files[other])]
        assert open(mc.file_path(cache, other), "rb").read() == files[other]
        d.close()
    finally:
        stop()


def test_two_downloads_of_one_large_file_at_once(tmp_path):
    """Two runs on one host fetch the same large file at the same moment: each writes its own
    partial file, the cache gets the one right file, neither fails; before, both appended to
    one ``.part`` and the cache got both copies in one file."""
    import http.client
    import http.server
    import threading

    from potato.training.remote import media_fetch
    from tests.helpers import media_server

    big = os.urandom(media_fetch.BATCH_FILE_MAX + (2 << 20))
    both = threading.Barrier(2, timeout=10)

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            start = int(self.headers["Range"].split("=")[1].rstrip("-")) \
                if self.headers.get("Range") else 0
            try:
                both.wait()  # both requests are under way before a byte is sent
            except threading.BrokenBarrierError:
                pass
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(big) - start))
            self.end_headers()
            for i in range(start, len(big), 256 << 10):
                self.wfile.write(big[i:i + (256 << 10)])
                self.wfile.flush()
                time.sleep(0.01)

        def log_message(self, *a):
            pass

    client, stop = media_server(H, timeout=10)

    cache = str(tmp_path / "cache")
    errors = []

    def fetch():
        d = media_fetch.Downloader(client, "r1", cache)
        try:
            d.fetch(sha(big), len(big))
        except Exception as e:  # noqa: BLE001 - the test reports it
            errors.append(e)
        finally:
            d.close()

    try:
        threads = [threading.Thread(target=fetch) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        stop()
    assert errors == []
    with open(mc.file_path(cache, sha(big)), "rb") as f:
        assert f.read() == big
    assert os.listdir(os.path.join(cache, ".incoming")) == []


def test_a_download_stops_at_the_listed_size(tmp_path):
    """A server answering with more than the listed bytes: one file stops just past its size
    (before, it was read to the end), a batch's surplus is read at most BATCH_TAIL_MAX (before,
    all of it into memory at once)."""
    import http.client
    import http.server

    from potato.training.remote import media_fetch
    from tests.helpers import media_server
    from potato.training.remote.client import ServerError

    files = [os.urandom(3000), os.urandom(2000)]
    by_sha = {sha(d): d for d in files}
    junk = 3 * media_fetch.BATCH_TAIL_MAX

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, body):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + junk))
            self.end_headers()
            try:
                for part in [body] + [bytes(1 << 16)] * (junk >> 16):
                    self.wfile.write(part)
            except OSError:  # the reader stopped
                pass
            self.close_connection = True

        def do_GET(self):
            self._answer(by_sha[self.path.rsplit("/", 1)[1]])

        def do_POST(self):
            hashes = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["hashes"]
            self._answer(b"".join(by_sha[h] for h in hashes))

        def log_message(self, *a):
            pass

    client, stop = media_server(H)

    cache = str(tmp_path / "cache")
    d = media_fetch.Downloader(client, "r1", cache)
    try:
        with pytest.raises(mc.CacheError, match=r"arrived with .* \(the server sent more than "
                                                r"the 3000 bytes listed\)"):
            d.fetch(sha(files[0]), len(files[0]))
        done = []
        with pytest.raises(ServerError, match="ran on more than 1048576 bytes past"):
            d.fetch_batch([(sha(x), len(x)) for x in files], done.append)
        assert done == [len(x) for x in files]  # verified and kept all the same
        assert all(mc.have(cache, sha(x), len(x)) for x in files)
    finally:
        d.close()
        stop()


def test_data_parallel_ranks_see_the_url_media_the_worker_fetched(tmp_path, monkeypatch):
    """A rank above 0 reads the bundle afresh: before, its URL media had no path (every URL item
    was left out there while rank 0 trained on it, so the ranks disagreed on the items). Now it
    finds what the worker fetched into the run directory, fetches nothing itself, and leaves
    out the items the worker left out."""
    import argparse
    import signal
    from potato.training.remote import rank
    run_dir = tmp_path / "run"
    (run_dir / media.URL_DIR).mkdir(parents=True)
    items = [{"id": "a", "media": {"kind": "image", "url": "https://h/a.png"}},
             {"id": "b", "media": {"kind": "image", "url": "https://h/b.png"}}]
    got = hashlib.sha256(b"https://h/a.png").hexdigest()
    (run_dir / media.URL_DIR / got).write_bytes(b"a's bytes")  # the worker fetched a, not b
    (run_dir / "spec.json").write_text(json.dumps({"trainer": "fake", "schemas": {},
                                                   "bundle": "bundle"}))
    seen = {}

    class Trainer:
        def __init__(self, ctx):
            self.ctx = ctx

        def train(self):
            for item in self.ctx.bundle.items:
                try:
                    seen[item["id"]] = open(media.path_for(item["media"], {}), "rb").read()
                except media.MediaMissing as e:
                    seen[item["id"]] = str(e)

    monkeypatch.setattr(rank, "read", lambda d: type("B", (), {"items": items})())
    monkeypatch.setattr(rank.trainers, "get", lambda name: type("Info", (), {
        "media": ("image",)})())
    monkeypatch.setattr(rank.trainers, "load", lambda info: Trainer)
    monkeypatch.setattr(rank, "watch_parent", lambda *a, **k: None)
    monkeypatch.setattr(media, "fetch_url", lambda url, dest: pytest.fail("a rank fetched"))
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = rank.run_rank(argparse.Namespace(
            rank=1, world=2, parent=os.getppid(), spec=str(run_dir / "spec.json"),
            backend="gloo", store="x", error_file=str(tmp_path / "err.json")))
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert code == 0, (tmp_path / "err.json").read_text()
    # b, which the worker could not fetch, is left out here as the worker left it out
    assert seen == {"a": b"a's bytes"}


def _record(cache):
    with open(os.path.join(cache, ".usage")) as f:
        return int(f.read().split()[0])


def test_a_trim_after_a_copy_trusts_the_recorded_size_within_the_limit(tmp_path, monkeypatch):
    """A full count is recorded in .usage; reserve() adds the bytes a copy is about to bring;
    a trim after the copy lists nothing while the record is within the limit."""
    cache = str(tmp_path / "media")
    put(cache, b"a" * 1000, age=300)
    assert mc.evict(cache, 5000) == (0, 0, 1000)  # a full count, recorded
    assert _record(cache) == 1000
    missing = mc.need(cache, "job", [(sha(b"b" * 1500), 1500), (sha(b"a" * 1000), 1000)])
    assert missing == [(sha(b"b" * 1500), 1500)]
    at = mc.reserve(cache, missing)
    assert _record(cache) == 2500 and at <= time.time()  # reserved before a byte is written
    put(cache, b"b" * 1500)
    monkeypatch.setattr(mc, "entries", lambda c: pytest.fail("listed the cache"))
    assert mc.evict(cache, 2500, recorded=at) == (0, 0, 2500)  # exactly at the limit
    assert mc.reserve(cache, mc.need(cache, "job", [(sha(b"a" * 1000), 1000)])) is None
    assert _record(cache) == 2500  # nothing missing: nothing reserved


def test_a_copy_that_failed_half_way_is_still_counted(tmp_path):
    """Its bytes were reserved when it asked: the next copy's trim finds the record over the
    limit, counts the files and removes what is over."""
    cache = str(tmp_path / "media")
    mc.reserve(cache, mc.need(cache, "one", [(sha(b"x" * 700), 700), (sha(b"y" * 700), 700)]))
    put(cache, b"x" * 700, age=100)  # then the copy broke off: no trim
    mc.unpin(cache, "one")
    at = mc.reserve(cache, mc.need(cache, "two", [(sha(b"z" * 300), 300)]))
    put(cache, b"z" * 300)
    assert _record(cache) == 1700  # 700 never came: too high is safe
    assert mc.evict(cache, 500, keep={sha(b"z" * 300)}, recorded=at) == (1, 700, 300)
    assert _record(cache) == 300


LATER = time.time() + 7200  # a reservation after every record these tests write


def test_a_trim_counts_again_when_the_record_is_over_the_limit_stale_or_unreadable(tmp_path):
    cache = str(tmp_path / "media")
    oldest = put(cache, b"a" * 1000, age=300)
    newest = put(cache, b"b" * 1000)
    assert mc.evict(cache, 5000) == (0, 0, 2000)
    assert mc.evict(cache, 1999, recorded=LATER) == (1, 1000, 1000)  # over: counted, oldest goes
    assert {h for _, _, h in mc.entries(cache)} == {newest} and oldest
    usage = os.path.join(cache, ".usage")
    for record in ("9 %f" % (time.time() - mc.USAGE_STALE_S - 5),  # stale
                   "9 %f" % (time.time() + 60),  # counted in the future: a clock set back
                   "garbage", "-5 %f" % time.time(), "", "nan %f" % time.time()):
        with open(usage, "w") as f:
            f.write(record)
        assert mc.evict(cache, 1 << 30, recorded=LATER) == (0, 0, 1000), record
        assert _record(cache) == 1000
    for odd in ("fifo", "link", "folder"):
        os.unlink(usage)
        if odd == "fifo":
            os.mkfifo(usage)  # would block a plain open (and hold the lock) for good
        elif odd == "link":
            (tmp_path / "elsewhere").write_text("1 %f" % time.time())
            os.symlink(str(tmp_path / "elsewhere"), usage)
        else:
            os.mkdir(usage)
        assert mc.evict(cache, 1 << 30, recorded=LATER) == (0, 0, 1000), odd  # counted
        if odd == "folder":  # no record can take its place
            assert os.path.isdir(usage)
            os.rmdir(usage)
        else:
            assert _record(cache) == 1000 and not os.path.islink(usage)
    assert mc.evict(cache, 1 << 30, recorded=LATER) == (0, 0, 1000)  # no record: counted
    assert [n for n in os.listdir(cache) if n.startswith(".usage.")] == []


def trusts(cache, record, now):
    """Whether a trim after a copy at ``now`` trusts ``record`` (5 bytes; the cache holds
    none, so a count says 0)."""
    with open(os.path.join(cache, ".usage"), "w") as f:
        f.write(record)
    return {5: True, 0: False}[mc.evict(cache, 1 << 30, now=now, recorded=LATER)[2]]


def test_a_record_counted_a_moment_ahead_is_trusted(tmp_path):
    """The count's time is written to the millisecond, rounded: it may read as a little in
    the future; a second or more ahead is a clock set back."""
    cache = str(tmp_path / "media")
    mc.open_cache(cache)
    now = time.time()
    for ahead, trusted in ((0.0005, True), (0.999, True), (1.01, False)):
        assert trusts(cache, "5 %.3f" % (now + ahead), now) is trusted, ahead


def test_the_record_is_private_written_beside_it_and_read_to_its_bounds(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    mask = os.umask(0o022)
    try:
        mc.open_cache(cache)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(os.path.join(cache, ".usage")).st_mode) == 0o600
    moved = []
    real = os.replace
    monkeypatch.setattr(mc.os, "replace", lambda a, b: moved.append(a) or real(a, b))
    mc.reserve(cache, mc.need(cache, "job", [(sha(b"one"), 3)]))  # rewrites the record
    assert len(moved) == 2  # the pin, then the record
    assert os.path.dirname(moved[1]) == cache
    assert os.path.basename(moved[1]).startswith(".usage.")  # what entries() sweeps
    now = 100000.0
    usage = os.path.join(cache, ".usage")
    for record, trusted in (("5 %.3f" % (now + 1), True),  # a second ahead, exactly
                            ("5 %.3f" % (now - mc.USAGE_STALE_S), True),  # an hour, exactly
                            ("5 " + "0" * 93 + "%d" % now, False)):  # 101 bytes: not ours
        assert trusts(cache, record, now) is trusted, record
    assert os.path.exists(usage)


def test_a_reservation_holds_the_lock_alone(tmp_path):
    """Two runs reserving at once must not both read the old record: a check (need) shares
    the cache's lock with another holder, a reservation waits until it holds it alone."""
    import fcntl
    cache = str(tmp_path / "media")
    mc.open_cache(cache)
    other = os.open(os.path.join(cache, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)  # a run's
    try:
        fcntl.flock(other, fcntl.LOCK_SH)  # another run checking now
        missing = mc.need(cache, "job", [(sha(b"one"), 3)])  # shares it: no wait
        assert missing == [(sha(b"one"), 3)]
        done = []
        t = threading.Thread(target=lambda: done.append(mc.reserve(cache, missing)),
                             daemon=True)
        t.start()
        t.join(0.3)
        assert t.is_alive() and _record(cache) == 0  # waits for the other run
        fcntl.flock(other, fcntl.LOCK_UN)
        t.join(20)
        assert not t.is_alive() and done[0] is not None and _record(cache) == 3
        fcntl.flock(other, fcntl.LOCK_EX)  # another run trimming: a check waits for it
        t = threading.Thread(target=lambda: done.append(mc.need(cache, "job", missing)),
                             daemon=True)
        t.start()
        t.join(0.3)
        assert t.is_alive()
        fcntl.flock(other, fcntl.LOCK_UN)
        t.join(20)
        assert not t.is_alive() and done[1] == missing
    finally:
        os.close(other)


def test_a_reservation_without_a_record_writes_none(tmp_path):
    cache = str(tmp_path / "media")
    os.makedirs(cache)  # an older cache: no record
    mc.need(cache, "job", [(sha(b"q"), 1)])
    assert not os.path.exists(os.path.join(cache, ".usage"))


def test_a_record_that_cannot_be_written_leaves_no_file(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    put(cache, b"a" * 10)
    real = os.replace

    def refuse(a, b):
        if os.path.basename(b) == ".usage":
            raise OSError(28, "No space left on device")
        return real(a, b)
    monkeypatch.setattr(mc.os, "replace", refuse)
    assert mc.evict(cache, 100) == (0, 0, 10)
    assert sorted(os.listdir(cache)) == [".lock", sha(b"a" * 10)[:2]]


def test_a_records_leftover_goes_once_stale_and_a_linked_folder_is_left_alone(tmp_path):
    cache = str(tmp_path / "media")
    put(cache, b"a" * 10)
    left = os.path.join(cache, ".usage.123.abc.0")  # its writer was killed
    with open(left, "w") as f:
        f.write("1 1")
    mc.evict(cache, 100)
    assert os.path.exists(left)
    os.utime(left, (1, 1))
    mc.evict(cache, 100)
    assert not os.path.exists(left)
    other = next(d for d in (b"%d" % i for i in range(1000)) if sha(d)[:2] != sha(b"a" * 10)[:2])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / sha(other)).write_bytes(other)
    os.symlink(str(outside), os.path.join(cache, sha(other)[:2]))  # not the cache's folder
    assert mc.evict(cache, 0)[:2] == (1, 10)
    assert (outside / sha(other)).read_bytes() == other


def test_the_agents_download_and_the_hosts_stream_trust_the_record(tmp_path, monkeypatch):
    """Both ways files come in reserve their bytes and trim with the reservation's time."""
    from potato.training.remote import media_fetch
    cache = str(tmp_path / "media")
    seen = []
    monkeypatch.setattr(media_receive, "evict", lambda *a, **k: seen.append(k.get("recorded"))
                        or (0, 0, 0))
    files = [b"one" * 100, b"two" * 200]
    mc.open_cache(cache)
    at = mc.reserve(cache, mc.need(cache, "job", [(sha(d), len(d)) for d in files]))
    assert _record(cache) == 900
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in files:
            info = tarfile.TarInfo(sha(d))
            info.size = len(d)
            tar.addfile(info, io.BytesIO(d))
    media_receive.receive(cache, "job", io.BytesIO(buf.getvalue()), 1 << 30, reserved=at)
    assert seen == [at]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"media": {"sha256": sha(d), "size": len(d)}}) + "\n"
                             for d in files + [b"three" * 70]))
    monkeypatch.setattr(media_fetch, "download", lambda client, run, c, missing, progress: (
        len(missing), sum(size for _, size in missing)))
    monkeypatch.setattr(mc, "evict", lambda *a, **k: seen.append(k.get("recorded"))
                        or (0, 0, 0))
    before = time.time()
    from potato.training.remote.protocol import RunSettings
    assert media_fetch.sync(None, "run", cache, str(tmp_path / "job2"), str(items),
                            RunSettings(host="lab", max_media_cache_mb=10),
                            lambda line: None) == 1
    assert len(seen) == 2 and before <= seen[1] <= time.time() and _record(cache) == 1250


def test_a_count_after_a_reservation_makes_the_copys_trim_count_again(tmp_path):
    """Another run's full count while this copy's bytes are on their way replaces the record
    with what was there: this copy's trim sees a count later than its reservation and counts
    the files again, instead of trusting a record without its bytes."""
    cache = str(tmp_path / "media")
    mc.open_cache(cache)
    a = mc.reserve(cache, mc.need(cache, "a", [(sha(b"a" * 900), 900)]))
    b = mc.reserve(cache, mc.need(cache, "b", [(sha(b"b" * 600), 600)]))
    assert _record(cache) == 1500 and a < b
    put(cache, b"b" * 600)
    assert mc.evict(cache, 2000, recorded=b) == (0, 0, 1500)  # b's own trim trusts 1500...
    assert mc.evict(cache, 2000) == (0, 0, 600)  # ...a full count (another trim) sees 600
    put(cache, b"a" * 900)  # a's bytes arrive after that count
    mc.unpin(cache, "b")
    assert mc.evict(cache, 1000, keep={sha(b"a" * 900)}, recorded=a) == (1, 600, 900)


def test_a_copy_with_no_reservation_counts(tmp_path, monkeypatch):
    """A cache whose record appeared only after the copy asked (two runs making a new cache
    at once) holds bytes the record lacks: without a reservation the trim counts."""
    cache = str(tmp_path / "media")
    os.makedirs(cache)  # the other run made the folder; its record comes a moment later
    assert mc.reserve(cache, mc.need(cache, "job", [(sha(b"q" * 50), 50)])) is None
    with open(os.path.join(cache, ".usage"), "w") as f:
        f.write("0 %f" % time.time())
    put(cache, b"q" * 50)
    assert mc.evict(cache, 40, recorded=None) == (0, 0, 50)  # counted (pinned: it stays)


def test_a_new_cache_is_recorded_as_empty_and_its_first_trim_lists_nothing(tmp_path,
                                                                             monkeypatch):
    cache = str(tmp_path / "media")
    mc.open_cache(cache)
    assert _record(cache) == 0
    with open(os.path.join(cache, ".usage"), "w") as f:
        f.write("7 %f" % time.time())  # another process's record since
    mc.open_cache(cache)  # the folder is there: its record is left alone
    assert _record(cache) == 7
    at = mc.reserve(cache, mc.need(cache, "job", [(sha(b"one"), 3)]))
    assert _record(cache) == 10
    monkeypatch.setattr(mc, "entries", lambda c: pytest.fail("listed the cache"))
    assert mc.evict(cache, 100, recorded=at) == (0, 0, 10)


def test_a_cache_made_by_two_processes_at_once_keeps_the_first_record(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    real = os.chmod

    def raced(path, mode, *a, **kw):  # the other process writes its record between the
        real(path, mode, *a, **kw)  # folder's making and ours
        if path == cache and not os.path.exists(os.path.join(cache, ".usage")):
            with open(os.path.join(cache, ".usage"), "w") as f:
                f.write("42 %f" % time.time())
    monkeypatch.setattr(mc.os, "chmod", raced)
    mc.open_cache(cache)
    assert _record(cache) == 42


def test_need_looks_at_no_file_of_a_folder_that_is_not_there(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    here = put(cache, b"here")
    gone = [d for d in (b"%d" % i for i in range(2000)) if sha(d)[:2] != here[:2]][:50]
    sized = []
    real = os.lstat
    monkeypatch.setattr(mc.os, "lstat", lambda p: sized.append(p) or real(p))
    missing = mc.need(cache, "job", [(here, 4)] + [(sha(d), len(d)) for d in gone])
    assert missing == [(sha(d), len(d)) for d in gone]
    assert sized == [mc.file_path(cache, here)]  # only the file whose folder is there
    ms.put(cache, sha(gone[0]), gone[0])
    assert mc.need(cache, "job", [(sha(gone[0]), len(gone[0])), (sha(gone[0]), 99)]) == [
        (sha(gone[0]), 99)]
    with pytest.raises(mc.CacheError, match="is not a sha256"):
        mc.need(cache, "job", [("../../etc/passwd", 1)])


# -- the host's cache, exactly (from the mutation run's tests, issue 26): pins, entries, eviction,
# the lock -----------------------------------------------------------------------------------------

import io  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from potato.training.remote import media_cache as mc  # noqa: E402
from potato.training.remote import media_store as ms  # noqa: E402
from tests.media_host import _Clock, _pins, sha  # noqa: E402


def test_dot_names_are_not_pins():
    assert not mc.valid_pin(".") and not mc.valid_pin("..") and mc.valid_pin("job-1.a_b")


def test_a_bad_hash_or_pin_name_is_quoted_in_its_error(tmp_path):
    with pytest.raises(mc.CacheError) as e:
        mc.file_path(str(tmp_path), "x" * 100)
    assert str(e.value) == "'%s' is not a sha256 in hex" % ("x" * 80)
    with pytest.raises(mc.CacheError, match=r"^5 is not a sha256 in hex$"):
        mc.file_path(str(tmp_path), 5)
    for call in (lambda n: mc.pin(str(tmp_path), n, []), lambda n: mc.pin_path(str(tmp_path), n)):
        with pytest.raises(mc.CacheError) as e:
            call("/" * 100)
        assert str(e.value) == "'%s' is not a pin name" % ("/" * 80)


def test_pins_and_stored_files_are_written_beside_their_place(tmp_path, monkeypatch):
    """Not in the system's temporary folder (another file system: the rename would fail)."""
    monkeypatch.setattr(mc.tempfile, "tempdir", str(tmp_path / "no such folder"))
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [(sha(b"x"), 1)])
    ms.store(cache, sha(b"x"), 1, io.BytesIO(b"x").read)
    assert mc.have(cache, sha(b"x"), 1) and mc.read_pin(cache, "job") == {sha(b"x"): 1}


def test_a_pin_file_keeps_only_hash_size_lines(tmp_path):
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [])
    good = sha(b"good")
    with open(mc.pin_path(cache, "job"), "w") as f:
        f.write("nothex 5\n%s x\n%s 7 extra\n%s 7\n" % (good, good, good))
    assert mc.read_pin(cache, "job") == {good: 7}


def test_pinned_reads_the_clock_itself_and_drops_stale_pins(tmp_path):
    cache = str(tmp_path / "media")
    _pins(cache, [("fresh", 10), ("stale", mc.PIN_STALE_S + 100)], time.time())
    assert mc.pinned(cache) == {sha(b"fresh")}
    assert not os.path.exists(mc.pin_path(cache, "stale"))


def test_a_pin_is_stale_only_past_pin_stale_s(tmp_path):
    cache = str(tmp_path / "media")
    _pins(cache, [("edge", mc.PIN_STALE_S), ("just-over", mc.PIN_STALE_S + 0.5)], 10000.0)
    assert mc.pinned(cache, now=10000.0) == {sha(b"edge")}


def test_pinned_goes_on_past_stale_gone_and_foreign_files(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    _pins(cache, [("b-stale", mc.PIN_STALE_S + 100), ("c-fresh", 1)], 10000.0)
    with open(os.path.join(cache, ".pins", "bad name"), "w") as f:
        f.write("%s 1\n" % sha(b"foreign"))
    real = os.listdir
    monkeypatch.setattr(mc.os, "listdir", lambda d: (
        ["a-gone"] + sorted(real(d)) if d.endswith(".pins") else real(d)))
    assert mc.pinned(cache, now=10000.0) == {sha(b"c-fresh")}


def test_need_holds_the_lock_shared(tmp_path):
    """Two runs check at once; only an eviction holds the lock alone."""
    import fcntl
    import threading
    cache = str(tmp_path / "media")
    os.makedirs(cache)
    fd = os.open(os.path.join(cache, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    done = []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # another run's need() in progress
        t = threading.Thread(target=lambda: done.append(mc.need(cache, "job", [(sha(b"x"), 1)])))
        t.start()
        t.join(10)
        assert done == [[(sha(b"x"), 1)]]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        t.join()


def test_entries_of_a_cache_that_is_not_there_is_empty(tmp_path):
    assert mc.entries(str(tmp_path / "nothing")) == []


def test_entries_count_only_hashes_in_their_own_folder(tmp_path):
    cache = str(tmp_path / "media")
    ms.put(cache, sha(b"kept"), b"kept")
    os.makedirs(os.path.join(cache, "00"))
    other = sha(b"elsewhere")
    with open(os.path.join(cache, "00", other if other[:2] != "00" else sha(b"e2")), "wb") as f:
        f.write(b"misplaced")
    folder = os.path.join(cache, sha(b"kept")[:2])
    with open(os.path.join(folder, sha(b"kept")[:2] + "cdef"), "wb") as f:
        f.write(b"not a hash")
    with open(os.path.join(cache, "ab"), "wb") as f:  # a file, not a folder
        f.write(b"x")
    os.makedirs(os.path.join(cache, "abc"))
    with open(os.path.join(cache, "abc", sha(b"y")), "wb") as f:
        f.write(b"y")
    assert [(size, h) for _, size, h in mc.entries(cache)] == [(4, sha(b"kept"))]


def test_a_partial_file_is_stale_only_past_incoming_stale_s(tmp_path, monkeypatch):
    cache = str(tmp_path / "media")
    incoming = ms.incoming_dir(cache)
    for name, age in (("edge.part", mc.INCOMING_STALE_S), ("old.part", mc.INCOMING_STALE_S + 0.5)):
        with open(os.path.join(incoming, name), "wb") as f:
            f.write(b"part")
        os.utime(os.path.join(incoming, name), (10000 - age, 10000 - age))
    monkeypatch.setattr(mc, "time", _Clock(10000.0))
    assert mc.evict(cache, 1 << 30, now=10000.0) == (0, 0, 0)
    assert sorted(os.listdir(incoming)) == ["edge.part"]


def test_evict_reads_the_clock_itself(tmp_path):
    cache = str(tmp_path / "media")
    for data in (b"pinned", b"free"):
        ms.put(cache, sha(data), data)
    mc.pin(cache, "job", [(sha(b"pinned"), 6)])
    assert mc.evict(cache, 0)[:2] == (1, 4)
    assert mc.have(cache, sha(b"pinned"), 6) and not mc.have(cache, sha(b"free"), 4)


def test_evict_stops_at_the_limit_and_counts_exactly(tmp_path):
    cache = str(tmp_path / "media")
    for i, data in enumerate((b"a" * 10, b"b" * 20, b"c" * 30)):
        ms.put(cache, sha(data), data)
        os.utime(mc.file_path(cache, sha(data)), (1000 + i, 1000 + i))
    assert mc.evict(cache, 60) == (0, 0, 60)  # exactly at the limit: nothing goes
    assert mc.evict(cache, 50) == (1, 10, 50)


def test_evict_keeps_what_it_is_asked_to_and_what_fresh_pins_hold(tmp_path):
    cache = str(tmp_path / "media")
    for data in (b"kept", b"pinned", b"free"):
        ms.put(cache, sha(data), data)
    mc.pin(cache, "job", [(sha(b"pinned"), 6)])
    assert mc.evict(cache, 0, now=time.time(), keep={sha(b"kept")})[:2] == (1, 4)
    assert mc.have(cache, sha(b"pinned"), 6) and mc.have(cache, sha(b"kept"), 4)
    assert mc.evict(cache, 0, now=time.time() + 10 * mc.PIN_STALE_S)[:2] == (2, 10)


def test_a_link_or_a_folder_of_the_listed_size_is_not_a_cached_file(tmp_path):
    cache = str(tmp_path / "media")
    data = b"z" * 7
    path = mc.file_path(cache, sha(data))
    os.makedirs(os.path.dirname(path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"7 bytes")
    os.symlink(str(elsewhere), path)
    assert not mc.have(cache, sha(data), 7)
    assert mc.need(cache, "job", [(sha(data), 7)]) == [(sha(data), 7)]
    os.unlink(path)
    os.mkdir(path)
    assert not mc.have(cache, sha(data), os.path.getsize(path))


def test_the_times_are_the_documented_ones():
    """docs/backends/ssh.md: a pin nobody touched for 15 minutes no longer counts;
    docs/backends/agent.md: a killed download's partial file goes once it is an hour old."""
    assert mc.PIN_STALE_S == 15 * 60 and mc.INCOMING_STALE_S == 60 * 60
    assert mc.USAGE_STALE_S == 60 * 60  # ssh.md: a record over an hour old is counted again


def test_evicting_a_cache_that_is_not_there_is_nothing(tmp_path):
    assert mc.evict(str(tmp_path / "nothing"), 0) == (0, 0, 0)


def test_entries_and_evict_go_on_past_a_file_that_went_or_stays(tmp_path, monkeypatch):
    """A file removed between the listing and its stat, and one that cannot be removed: the
    others are still counted and evicted."""
    cache = str(tmp_path / "media")
    files = [b"a" * 10, b"b" * 20, b"c" * 30]
    for i, data in enumerate(files):
        ms.put(cache, sha(data), data)
        os.utime(mc.file_path(cache, sha(data)), (1000 + i, 1000 + i))
    sub = sha(files[1])[:2]
    gone = sub + "f" * 62  # listed first in that folder, then gone before its stat
    real_listdir, real_unlink = os.listdir, os.unlink
    monkeypatch.setattr(mc.os, "listdir", lambda d: (
        [gone] + real_listdir(d) if d == os.path.join(cache, sub) else real_listdir(d)))
    assert sorted(size for _, size, _ in mc.entries(cache)) == [10, 20, 30]

    def unlink(path):
        if path.endswith(sha(files[0])):
            raise PermissionError(13, "Permission denied", path)
        real_unlink(path)
    monkeypatch.setattr(mc.os, "unlink", unlink)
    assert mc.evict(cache, 30) == (2, 50, 10)  # the oldest stays; the next two go


def test_a_pin_that_cannot_be_written_leaves_nothing_and_hidden_pins_hold_nothing(
        tmp_path, monkeypatch):
    """A full disk while a pin is written: its temporary file goes. A leftover of one (a
    killed host) holds no file, and goes once stale like a pin."""
    cache = str(tmp_path / "media")
    mc.pin(cache, "job", [(sha(b"x"), 1)])
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.f = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(mc.os, "fdopen", Full)
    with pytest.raises(OSError, match="No space left"):
        mc.pin(cache, "other", [(sha(b"y"), 1)])
    monkeypatch.undo()
    assert sorted(os.listdir(os.path.join(cache, ".pins"))) == ["job"]
    leftover = os.path.join(cache, ".pins", ".tmp-leftover")
    with open(leftover, "w") as f:
        f.write("%s 1\n" % sha(b"z"))
    assert mc.pinned(cache) == {sha(b"x")}
    assert mc.pinned(cache, now=time.time() + 2 * mc.PIN_STALE_S) == set()
    assert not os.path.exists(leftover)
