"""The composition root (potato/service.py): a Service builds, serves and closes in order,
its defaults, its URL, TLS, and serve() until a signal. A small media project; servers bind
loopback port 0 and are closed by each test. Also the tests tools/mutation.py runs against the
module (docs/testing.md)."""

import logging
import socket
import threading
from types import SimpleNamespace

import pytest

from potato import service as svc
from potato.config.settings import load
from potato.project.data import DataError
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


def test_a_service_builds_serves_and_closes_in_order(cfg, monkeypatch):
    s = svc.Service(cfg, host="127.0.0.1", owner=None)
    assert (s.host, s.port, s.ui, s.owner, s.reattach) == ("127.0.0.1", 0, True, None, True)
    assert s.open() is s
    try:
        assert s.lock is None and s.store is not None and s.app.store is s.store
        assert s.app.tls is False and s.on_disk is not None and s.app.routes
        assert s.manager is not None and s.http.app is s.app
        assert s.app.allowed_hosts == safety.default_allowed_hosts("127.0.0.1", cfg.server_url)
        port = s.http.server_address[1]
        assert port > 0 and s.url == "http://127.0.0.1:%d/" % port
        assert s.http.ssl_context is None
        assert s.store.item_count() == 4
        s.start(training=False, data_sync=False, poll_interval=0.05)
        [serving] = [t for t in threading.enumerate() if t.name == "potato-http"]
        assert serving.daemon
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert c.recv(12).startswith(b"HTTP/1.")
    finally:
        s.close()
    assert not serving.is_alive()
    s.close()  # once only


def test_a_service_without_pages_and_with_the_queue_lock(cfg):
    s = svc.Service(cfg, host="127.0.0.1", ui=False, owner="test", reattach=False)
    s.open()
    try:
        assert s.on_disk is None and s.lock is not None and s.manager.reattach is False \
            if hasattr(s.manager, "reattach") else True
        paths = [p.pattern for _, p, _, _ in s.app.routes]
        assert not any(p.startswith("/admin") or p == "/" for p in paths)
        other = svc.Service(cfg, host="127.0.0.1", owner="second")
        with pytest.raises(svc.LockHeld) as e:
            other.open()
        assert "test" in str(e.value)
        assert other.lock is None and other.store is None
    finally:
        s.close()
    third = svc.Service(cfg, host="127.0.0.1", owner="third").open()  # the lock was let go
    third.close()


def test_a_service_that_cannot_listen_closes_what_it_built(cfg):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        s = svc.Service(cfg, host="127.0.0.1", port=taken.getsockname()[1], owner="t")
        with pytest.raises(svc.CannotListen) as e:
            s.open()
        assert isinstance(e.value, OSError) and e.value.errno is not None and e.value.strerror
        assert s.http is None
        assert svc.Service(cfg, host="127.0.0.1", owner="t").open().close() is None
    finally:
        taken.close()


def test_the_services_defaults_come_from_the_config(cfg):
    cfg.server.port = 8123
    s = svc.Service(cfg)
    assert (s.host, s.port, s.owner, s.ui, s.reattach) == (cfg.server.host, 8123, "potato start",
                                                           True, True)
    assert svc.Service(cfg, port=0).port == 0


def test_the_url_of_an_ipv6_or_tls_service(cfg):
    s = svc.Service(cfg, owner=None)
    s.http = SimpleNamespace(server_address=("::1", 8000, 0, 0))
    s.app = SimpleNamespace(tls=True)
    assert s.url == "https://[::1]:8000/"
    s.app.tls = False
    s.http.server_address = ("10.0.0.1", 80)
    assert s.url == "http://10.0.0.1:80/"


def test_the_host_given_is_answered_unless_hosts_are_configured(cfg):
    cfg.server_url = "https://annotate.example.org/"
    s = svc.Service(cfg, host="127.0.0.2", owner=None).open()
    try:
        assert "127.0.0.2" in s.app.allowed_hosts
        assert "annotate.example.org" in s.app.allowed_hosts
    finally:
        s.close()
    cfg.allowed_hosts = ["only.example.org"]
    s = svc.Service(cfg, host="127.0.0.1", owner=None).open()
    try:
        assert s.app.allowed_hosts == ["only.example.org"]
    finally:
        s.close()


@pytest.fixture
def joins(monkeypatch):
    """The service's serving thread, its joins recorded (timeout) in the returned list."""
    seen = []

    class Thread(threading.Thread):
        def join(self, timeout=None):
            seen.append(("join", timeout))
            threading.Thread.join(self, timeout)

    monkeypatch.setattr(svc, "threading", SimpleNamespace(Thread=Thread))
    return seen


def _join_serving():
    for t in threading.enumerate():
        if t.name == "potato-http":
            t.join(5)


def test_close_runs_every_step_and_raises_the_first_failure(cfg, caplog, joins):
    s = svc.Service(cfg, owner=None)
    order = joins
    s.manager = SimpleNamespace(start=lambda: None, stop=lambda: order.append("stop"),
                                close_backends=lambda: order.append("close_backends"))

    def fail(what):
        def step():
            order.append(what)
            raise RuntimeError(what)
        return step
    s.http = SimpleNamespace(shutdown=lambda: order.append("shutdown"),
                             server_close=fail("server_close"),
                             serve_forever=lambda poll_interval: None)
    s.app = SimpleNamespace(stop_background=fail("background"))
    s.store = SimpleNamespace(close=lambda: order.append("store"))
    s.lock = SimpleNamespace(release=lambda: order.append("lock"))
    s.start()  # the queue and the server's thread
    _join_serving()
    order.clear()
    with pytest.raises(RuntimeError, match="server_close"):
        s.close()
    assert order == ["stop", "shutdown", ("join", 5), "server_close", "background", "store",
                     "lock"]
    assert [r.getMessage() for r in caplog.records] == ["stopping the server: server_close",
                                                        "stopping the server: background"]
    s.close()
    assert len(order) == 7


def test_close_without_training_closes_the_backends(cfg):
    s = svc.Service(cfg, owner=None)
    order = []
    s.manager = SimpleNamespace(stop=lambda: order.append("stop"),
                                close_backends=lambda: order.append("close_backends"))
    s.http = SimpleNamespace(shutdown=lambda: order.append("shutdown"),
                             server_close=lambda: order.append("server_close"))
    s.close()
    assert order == ["close_backends", "server_close"]  # never served: no shutdown
    svc.Service(cfg, owner=None).close()  # nothing built: nothing to stop


def test_start_training_and_apply_config(cfg, monkeypatch):
    s = svc.Service(cfg, owner=None)
    started = []
    s.manager = SimpleNamespace(start=lambda: started.append(1),
                                stop=lambda: started.append("stop"),
                                close_backends=lambda: started.append("close_backends"))
    s.start_training()
    assert started == [1]
    calls = []
    monkeypatch.setattr(svc.reload, "apply_to_manager",
                        lambda m, c, port: calls.append((m, c, port)) or ["gone"])
    s.app = SimpleNamespace(config=cfg)
    s.http = SimpleNamespace(server_address=("127.0.0.1", 4321))
    new = SimpleNamespace(name="new")
    assert s.apply_config(new) == ["gone"]
    assert calls == [(s.manager, new, 4321)] and s.cfg is new and s.app.config is new
    s.http = None
    s.apply_config(cfg)
    assert calls[-1] == (s.manager, cfg, None)
    s.app.stop_background = lambda: None
    s.close()  # the queue was started: it is stopped, not merely its backends closed
    assert started == [1, "stop"]


def test_start_starts_the_queue_and_the_watcher_when_asked(cfg, monkeypatch):
    s = svc.Service(cfg, owner=None)
    calls = []
    s.manager = SimpleNamespace(start=lambda: calls.append("queue"))
    s.http = SimpleNamespace(serve_forever=lambda poll_interval: calls.append(("serve",
                                                                                poll_interval)))
    s.app = SimpleNamespace(start_background=lambda: calls.append("watch"))
    assert s.start() is s
    _join_serving()
    assert calls == ["queue", ("serve", 0.2)]
    calls.clear()
    s.start(training=False, data_sync=True, poll_interval=0.5)
    _join_serving()
    assert sorted(map(str, calls)) == sorted(map(str, [("serve", 0.5), "watch"]))


def test_a_service_is_a_context_manager(cfg):
    with svc.Service(cfg, host="127.0.0.1", owner="first") as s:
        s.open()
    assert s.http.socket.fileno() == -1  # closed on the way out, and its lock let go:
    svc.Service(cfg, host="127.0.0.1", owner="second").open().close()


def test_warn_debug(cfg, caplog):
    cfg.debug = False
    svc.warn_debug(cfg, "127.0.0.1")
    assert caplog.records == []
    cfg.debug = True
    svc.warn_debug(cfg, "10.0.0.1")
    assert [r.getMessage() for r in caplog.records] == [
        "debug: true: every request from loopback has admin rights. Do not use debug on a "
        "shared machine."]
    caplog.clear()
    svc.warn_debug(cfg, "127.0.0.1")
    assert len(caplog.records) == 2 and caplog.records[1].getMessage().startswith(
        "debug: true and the server listens on 127.0.0.1: a reverse proxy")
    assert cfg.path in caplog.records[1].getMessage()


# -- serve -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("error,said", [
    (svc.LockHeld("pid 7"), "error: this project's training queue is owned by pid 7. Only one "
                            "process may run a project's training; stop that one first."),
    (DataError("items.jsonl line 2 is not JSON"), "error: items.jsonl line 2 is not JSON"),
    (svc.CannotListen(98, "Address already in use"), "error: cannot listen on 127.0.0.1:0: "
                                                     "Address already in use. Pick another "
                                                     "--port, or stop what is using it."),
    (PermissionError(13, "Permission denied", "/out/x"), "error: cannot open the project's files "
                                                          "(/out/x): Permission denied."),
    (OSError(13, "Permission denied"), "error: cannot open the project's files (OUT): Permission "
                                       "denied."),
    (__import__("ssl").SSLError(9, "[SSL] PEM lib (_ssl.c:3900)"),
     "error: server.tls_cert/tls_key cannot be used: [SSL] PEM lib (_ssl.c:3900)")])
def test_serve_says_why_it_cannot_start(cfg, monkeypatch, capsys, error, said):
    def fail(self):
        raise error
    monkeypatch.setattr(svc.Service, "open", fail)
    monkeypatch.setattr(svc.os, "umask", lambda m: 0o022)
    monkeypatch.setattr(svc.logging, "basicConfig", lambda **kw: None)
    assert svc.serve(cfg, "127.0.0.1", 0) == 1
    err = capsys.readouterr().err
    assert err.startswith(said.replace("OUT", cfg.output_dir))
    if "cannot open" in said:
        assert err.rstrip().endswith("Check output_annotation_dir in %s." % cfg.path)


class Out:
    """stdout that keeps what had been flushed at each flush."""

    def __init__(self):
        self.text, self.flushed = "", []

    def write(self, s):
        self.text += s

    def flush(self):
        self.flushed.append(self.text)


def test_serve_until_a_signal(cfg, monkeypatch, caplog):
    umask, logging_set = [], []
    monkeypatch.setattr(svc.os, "umask", lambda m: umask.append(m) or 0o022)
    monkeypatch.setattr(svc.logging, "basicConfig", lambda **kw: logging_set.append(kw))
    handlers = {}
    monkeypatch.setattr(svc.signal, "signal", lambda sig, fn: handlers.__setitem__(sig, fn))
    written = []
    monkeypatch.setattr(svc, "write_server_file", lambda c, url: written.append(
        (c is cfg) and url))
    monkeypatch.setattr(svc, "remove_server_file", lambda c: written.append(
        "removed" if c is cfg else c))
    out = Out()
    monkeypatch.setattr(svc.sys, "stdout", out)
    cfg.debug = True  # its warnings name the address served
    cfg.server.host = "127.0.0.2"  # not the address asked for
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    cfg.server.port = taken.getsockname()[1]  # not the port asked for either
    monkeypatch.setattr(svc.Service, "close", _closing(svc.Service.close, taken))
    started = []
    real_start = svc.Service.start

    def start(self, training=True, data_sync=False, poll_interval=0.2):
        started.append((training, data_sync))
        out = real_start(self, training=False, data_sync=False, poll_interval=0.05)
        handlers[svc.signal.SIGTERM](15, None)  # as if stopped at once
        return out
    monkeypatch.setattr(svc.Service, "start", start)
    assert svc.serve(cfg, "127.0.0.1", 0) == 0
    assert umask == [0o077] and started == [(True, True)]
    assert logging_set == [{"level": logging.INFO,
                            "format": "%(asctime)s %(levelname)s %(message)s"}]
    assert set(handlers) == {svc.signal.SIGTERM, svc.signal.SIGINT}
    assert handlers[svc.signal.SIGINT] is handlers[svc.signal.SIGTERM]
    url = written[0]
    assert written == [url, "removed"] and url.startswith("http://127.0.0.1:")
    serving = "Potato is serving 'Media' at %s (4 items). Admin pages: %sadmin\n" % (url, url)
    assert out.text == serving + "Potato stopped.\n"
    assert out.flushed == [serving, serving + "Potato stopped.\n"]  # each line at once
    assert "the server listens on 127.0.0.1:" in caplog.text


def _closing(close, taken):
    def then_free(self):
        taken.close()
        return close(self)
    return then_free


def test_open_hands_each_part_the_others(cfg, monkeypatch):
    added, ports = [], []
    real_api, real_agent = svc.api.add_routes, svc.agent_routes.add_routes
    monkeypatch.setattr(svc.api, "add_routes", lambda *a: added.append(("api",) + a)
                        or real_api(*a))
    monkeypatch.setattr(svc.agent_routes, "add_routes", lambda *a: added.append(("agent",) + a)
                        or real_agent(*a))
    monkeypatch.setattr(svc.Manager, "listening_on", lambda self, port: ports.append(port))
    s = svc.Service(cfg, host="127.0.0.1", owner=None).open()
    try:
        assert added == [("api", s.app, s.manager, s.on_disk), ("agent", s.app, s.manager)]
        assert s.on_disk.manager is s.manager and s.on_disk.apply == s.apply_config
        assert s.manager.reattach is True and s.manager.store is s.store
        assert s.manager.cfg is cfg if hasattr(s.manager, "cfg") else True
        assert ports == [s.http.server_address[1]]
    finally:
        s.close()


def test_a_tls_service(tmp_path, tls_cert):
    c, errors, _ = load(media_project(tmp_path, config=MEDIA_CONFIG + "server: {port: 0, %s}\n"
                                      % tls_cert))
    assert not errors, errors
    s = svc.Service(c, host="127.0.0.1", owner=None).open()
    try:
        assert s.app.tls is True and s.url.startswith("https://127.0.0.1:")
        ctx = s.http.ssl_context
        assert ctx is not None and ctx.protocol == __import__("ssl").PROTOCOL_TLS_SERVER
        assert len(ctx.get_ca_certs()) == 0 and ctx.cert_store_stats() is not None
    finally:
        s.close()
    c.server.tls_key = c.server.tls_cert  # a certificate is no key
    with pytest.raises(__import__("ssl").SSLError):
        svc.Service(c, host="127.0.0.1", owner=None).open()


def test_a_service_hands_its_access_log_and_its_pages_to_the_app(cfg):
    lines = []
    s = svc.Service(cfg, host="127.0.0.1", access_log=lines.append, owner=None).open()
    try:
        s.app.access_log("a request")
        assert lines == ["a request"]
        paths = [p.pattern for _, p, _, _ in s.app.routes]
        assert "/annotate" in paths and "/login" in paths  # ui=True: the pages are there
    finally:
        s.close()


def test_the_server_logs_under_one_name():
    """docs/annotation-server.md: the server's own messages go to the logger potato.server."""
    import logging
    assert svc.log is logging.getLogger("potato.server")
