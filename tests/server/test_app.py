"""The app's state (potato/server/app.py): routes, the access log, the data file watcher,
background start and stop. A small media project; servers bind loopback port 0 and are closed by
each test. Also the tests tools/mutation.py runs against the module (docs/testing.md)."""

import hashlib
import logging
import threading
from types import SimpleNamespace

import pytest

from potato.config.settings import load
from potato.server import app as app_mod
from potato.server import safety
from potato.project.store import Store
from tests.helpers import MEDIA_CONFIG, media_project


@pytest.fixture
def cfg(tmp_path):
    c, errors, _ = load(media_project(tmp_path, config=MEDIA_CONFIG + "server: {port: 0}\n"))
    assert not errors, errors
    return c


@pytest.fixture
def store(cfg):
    s = Store(cfg.db_path)
    yield s
    s.close()


def test_the_apps_state(cfg, store):
    cfg.server.host, cfg.server_url = "127.0.0.3", "https://x.example.org/"
    cfg.server.max_body_mb = 1.5
    cfg.server.new_names_per_hour = 7
    a = app_mod.App(cfg, store, tls=True, core_routes=False)
    assert a.config is cfg and a.store is store and a.tls is True and a.routes == []
    assert a.max_body_bytes == 1572864 and isinstance(a.max_body_bytes, int)
    key = cfg.admin_api_key.encode()
    assert a.admin_session_name == "admin:" + hashlib.sha256(b"potato-admin\0" + key).hexdigest()[
        :32]
    assert a.allowed_hosts == safety.default_allowed_hosts(cfg.server.host, cfg.server_url)
    assert "127.0.0.3" in a.allowed_hosts and "x.example.org" in a.allowed_hosts
    assert (a.login_limiter.limit, a.login_limiter.window_s) == (10, 60.0)
    assert (a.new_name_limiter.limit, a.new_name_limiter.window_s) == (7, 3600.0)
    assert a.disk.output_dir == cfg.output_dir and a.assignment.store is store
    assert app_mod.App(cfg, store, core_routes=False).tls is False
    cfg.allowed_hosts = ["annotate.example.org"]
    cfg.admin_api_key = None
    b = app_mod.App(cfg, store, core_routes=False)
    assert b.allowed_hosts == ["annotate.example.org"]
    assert b.admin_session_name == "admin:" + hashlib.sha256(b"potato-admin\0").hexdigest()[:32]
    assert len(app_mod.App(cfg, store).routes) > 10  # the annotation pages and admin UI


def test_routes_and_the_access_log(cfg, store, capsys):
    a = app_mod.App(cfg, store, core_routes=False)

    @a.route("GET", r"/x/(?P<n>\d+)", access="admin")
    def handler(h, n):
        return n

    [(method, pattern, func, access)] = a.routes
    assert (method, pattern.pattern, func, access) == ("GET", r"/x/(?P<n>\d+)", handler, "admin")
    assert handler(None, "3") == "3"  # the function itself is kept
    a.route("POST", "/y")(handler)
    assert a.routes[1][3] == "public" and a.routes[1][1].match("/y")
    a.access_log("line one")
    assert capsys.readouterr().err == "line one\n"
    lines = []
    b = app_mod.App(cfg, store, access_log=lines.append, core_routes=False)
    b.access_log("line two")
    assert lines == ["line two"] and capsys.readouterr().err == ""


class Ticks:
    """threading.Event as the data-file watcher sees it (``_stop``): each wait(timeout) blocks
    until the test calls tick() (one round of the watcher: "not stopped") or set()."""

    def __init__(self):
        self.cond = threading.Condition()
        self.waits, self.pending, self.stopped = [], 0, False

    def wait(self, timeout=None):
        with self.cond:
            self.waits.append(timeout)
            self.cond.notify_all()
            assert self.cond.wait_for(lambda: self.pending or self.stopped, 30)
            if self.stopped:
                return True
            self.pending -= 1
            return False

    def set(self):
        with self.cond:
            self.stopped = True
            self.cond.notify_all()

    def is_set(self):
        return self.stopped

    def tick(self):
        """Let the watcher's wait return once, and wait until it has waited again (a watcher
        that died fails the test at once)."""
        with self.cond:
            self.until(lambda: self.waits)  # it has started
            n = len(self.waits)
            self.pending += 1
            self.cond.notify_all()
            self.until(lambda: len(self.waits) > n)

    def until(self, done):
        for _ in range(600):
            if done():
                return
            assert all(t.is_alive() for t, _ in self.threads), "the watcher's thread died"
            self.cond.wait(0.05)
        raise AssertionError("the watcher did not come back within 30 s")


@pytest.fixture
def ticks(monkeypatch):
    """The watcher's clock, in the test's hands: App() after this fixture takes a Ticks as its
    stop event, and start_background's thread is recorded in ``ticks.threads``."""
    t = Ticks()
    t.threads = []

    class Thread(threading.Thread):
        def __init__(self, **kw):
            threading.Thread.__init__(self, **kw)
            t.threads.append((self, kw))

        def join(self, timeout=None):
            t.joins.append(timeout)
            threading.Thread.join(self, timeout)

    t.joins = []
    monkeypatch.setattr(app_mod, "threading",
                        SimpleNamespace(Event=lambda: t, Thread=Thread))
    yield t
    t.set()  # a test that failed half-way leaves no watcher waiting
    for thread, _ in t.threads:
        threading.Thread.join(thread, 5)


def _watching(cfg, store, ticks):
    a = app_mod.App(cfg, store, core_routes=False)
    a.start_background()
    return a


def test_the_data_file_watcher(cfg, store, tmp_path, caplog, ticks):
    caplog.set_level(logging.WARNING, "potato.server")
    fresh = _watching(cfg, store, ticks)
    ticks.tick()  # the files as the app found them: nothing to sync
    assert caplog.records == []
    fresh.stop_background()
    ticks.__init__()
    ticks.threads, ticks.joins = [], []
    a = _watching(cfg, store, ticks)
    assert a.sync_items() == {"added": 4, "updated": 0, "deactivated": 0, "total": 4}
    ticks.tick()  # nothing changed: nothing synced
    assert ticks.waits == [app_mod.SYNC_INTERVAL_S, app_mod.SYNC_INTERVAL_S]
    assert caplog.records == [] and app_mod.SYNC_INTERVAL_S == 5.0
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n{"id": "n", "image": "x.png"}\n')
    ticks.tick()
    ticks.tick()
    [rec] = caplog.records
    assert rec.name == "potato.server" and rec.levelname == "WARNING"
    assert rec.getMessage() == ("data files changed: 1 item(s) added, 0 updated, 3 no longer in "
                                "the files (kept with their labels)")
    caplog.clear()
    items.write_text("{broken\n")
    ticks.tick()
    ticks.tick()
    [rec] = caplog.records
    assert rec.levelname == "ERROR"
    assert rec.getMessage().startswith("data files changed but cannot be loaded, keeping the "
                                       "items as they were: ")
    assert "items.jsonl" in rec.getMessage()  # what is wrong, from the DataError
    caplog.clear()
    ticks.tick()  # the broken file was noted once: not again until it changes
    assert caplog.records == []
    # issue 34, item 8: an item potato start refuses (its image outside the media folder) is
    # refused here too, named, and the items stay as they were
    before = [r["id"] for r in store.conn().execute("SELECT id FROM items WHERE active=1")]
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n'
                     '{"id": "evil", "image": "../../etc/passwd"}\n')
    ticks.tick()
    ticks.tick()
    [rec] = caplog.records
    assert rec.levelname == "ERROR"
    assert rec.getMessage().startswith("data files changed but cannot be loaded, keeping the "
                                       "items as they were: 1 of 2 items name an image outside "
                                       "the media folder "), rec.getMessage()
    assert "../../etc/passwd" in rec.getMessage()
    assert rec.getMessage().endswith("../../etc/passwd. Give paths relative to media_directory. "
                                     "(potato start refuses the same; fix the data files)")
    assert [r["id"] for r in store.conn().execute("SELECT id FROM items WHERE active=1")] == \
        before
    caplog.clear()
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n'
                     '{"id": "evil", "image": "../../etc/passwd"}\n'
                     '{"id": "evil2", "audio": "/etc/shadow"}\n')
    ticks.tick()
    [rec] = caplog.records  # two findings (images, sounds): the first, and a count of the rest
    assert "1 of 3 items name an image outside the media folder" in rec.getMessage()
    assert "/etc/shadow" not in rec.getMessage()
    assert rec.getMessage().endswith(". (and 1 more) (potato start refuses the same; fix the "
                                     "data files)"), rec.getMessage()
    caplog.clear()
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n'
                     '{"id": "evil", "image": "../../etc/passwd"}\n'
                     '{"id": "evil2", "audio": "/etc/shadow"}\n'
                     '{"id": "evil3", "audio": "/etc/hosts"}\n')
    ticks.tick()
    [rec] = caplog.records
    assert rec.getMessage().endswith(". (and 1 more) (potato start refuses the same; fix the "
                                     "data files)"), rec.getMessage()
    # the hostile review: a line json cannot build (a 5,000-digit number) ended the watcher's
    # thread for good; it is one line in the log, and the watcher goes on
    caplog.clear()
    items.write_text('{"id": "img0", "image": "digit-0.png", "n": %s}\n' % ("9" * 5000))
    ticks.tick()
    ticks.tick()
    [rec] = caplog.records
    assert "a value on this line cannot be read (Exceeds the limit (4300 digits)" in \
        rec.getMessage(), rec.getMessage()
    caplog.clear()
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n{"id": "new", "image": '
                     '"digit-0.png"}\n')
    ticks.tick()
    ticks.tick()  # still watching: the next good file is taken
    assert "new" in [r["id"] for r in store.conn().execute("SELECT id FROM items WHERE "
                                                          "active=1")]
    # a failure that is not the data's (here the store's): one line, and the watcher goes on
    caplog.clear()
    real_sync = store.sync_items

    def gone(items):
        raise RuntimeError("the disk is gone")

    store.sync_items = gone
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n')
    ticks.tick()
    ticks.tick()  # the failure was noted once: not again until the files change
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "data files changed but reading them failed (RuntimeError: the disk is gone), "
                  "keeping the items as they were; potato validate says where")]
    store.sync_items = real_sync
    items.write_text('{"id": "img0", "image": "digit-0.png"}\n{"id": "back", "image": '
                     '"digit-0.png"}\n')
    ticks.tick()
    assert "back" in [r["id"] for r in store.conn().execute("SELECT id FROM items WHERE "
                                                           "active=1")]
    a.stop_background()


def test_sync_items_remembers_the_files(cfg, store, tmp_path, caplog, ticks):
    """Items synced by hand are not synced again by the watcher."""
    caplog.set_level(logging.WARNING, "potato.server")
    a = _watching(cfg, store, ticks)
    (tmp_path / "items.jsonl").write_text('{"id": "z", "image": "digit-0.png"}\n')
    assert a.sync_items()["added"] == 1
    ticks.tick()
    assert caplog.records == []
    a.stop_background()


def test_an_annotators_save_is_capped_by_the_schemes_and_the_longest_item(cfg, store, tmp_path):
    """As much as the project's schemes need with its longest item text, never more than
    max_body_mb; synced items with longer texts raise it."""
    from potato.schemes import make_scheme, save_bytes
    cfg.schemes.append(make_scheme("where", "span", ["x"]))
    a = app_mod.App(cfg, store, core_routes=False)
    a.sync_items()
    longest = len("Which sound?")
    assert a.annotator_body_bytes == save_bytes(cfg.schemes, longest) < a.max_body_bytes
    (tmp_path / "items.jsonl").write_text('{"id": "t", "text": "%s"}\n' % ("w" * 5000))
    a.sync_items()
    assert a.annotator_body_bytes == save_bytes(cfg.schemes, 5000) == \
        save_bytes(cfg.schemes, longest) + 12 * (5000 - longest)
    b = app_mod.App(cfg, store, core_routes=False)  # items already there when it starts
    assert b.annotator_body_bytes == a.annotator_body_bytes
    cfg.server.max_body_mb = 0.01
    assert app_mod.App(cfg, store, core_routes=False).annotator_body_bytes == 10485
    fresh = Store(str(tmp_path / "empty.db"))
    try:  # no items yet: the schemes' need for an empty text
        assert app_mod.App(cfg, fresh, core_routes=False).annotator_body_bytes == 10485
        cfg.server.max_body_mb = 100
        assert app_mod.App(cfg, fresh, core_routes=False).annotator_body_bytes == \
            save_bytes(cfg.schemes, 0)
    finally:
        fresh.close()


def test_background_start_and_stop(cfg, store, ticks):
    a = app_mod.App(cfg, store, core_routes=False)
    a.start_background()
    [(t, kw)] = ticks.threads
    assert kw["daemon"] is True and kw["name"] == "potato-data-sync" and t.is_alive()
    a.stop_background()
    assert not t.is_alive() and ticks.is_set()
    assert ticks.joins == [app_mod.SYNC_INTERVAL_S + 1]
    ticks.__init__()
    b = app_mod.App(cfg, store, core_routes=False)
    b.stop_background()  # never started: nothing to join, and a later start ends at once
    assert ticks.is_set() and ticks.joins == [app_mod.SYNC_INTERVAL_S + 1]


def test_the_server_logs_a_failed_connection_briefly(cfg, store, caplog):
    a = app_mod.App(cfg, store, core_routes=False)
    s = app_mod.Server(("127.0.0.1", 0), a)
    try:
        assert s.app is a and s.RequestHandlerClass is app_mod.Handler
        try:
            raise ValueError("boom")
        except ValueError:
            s.handle_error(None, ("10.0.0.1", 5))
        assert caplog.records[-1].getMessage() == ("connection from ('10.0.0.1', 5) ended with "
                                                   "an error: boom")
        assert caplog.records[-1].levelname == "WARNING"
    finally:
        s.server_close()


