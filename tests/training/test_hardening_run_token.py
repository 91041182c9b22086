"""The third hostile review of issue 25: what a holder of a valid run token could do. Many slow
uploads kept annotators out and outlived their run; concurrent uploads passed the artifact caps;
empty files in deep folders had no bound. Each test here failed before its fix."""

import http.client
import json
import os
import re
import time

import pytest

from potato.training.web import agent_limits
from potato.training.web import agent_routes
from tests.helpers import (
    BASE, TOKEN, Client, Tricklers, active_run, make_project, raw, read_all, ssh_backend)

AUTH = {"Authorization": "Bearer " + TOKEN}


def art_head(run_id, path, length, offset=0):
    return (b"PUT /agent/v1/runs/%s/artifacts?path=%s&offset=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
            % (run_id.encode(), path.encode(), offset, TOKEN.encode(), length))


def events_head(run_id, length):
    return (b"POST /agent/v1/runs/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            b"application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
            % (run_id.encode(), TOKEN.encode(), length))


def serve_run(tmp_path, serve, top="", backend="{type: ssh, host: gpu.example.org}"):
    server, url = serve(make_project(tmp_path, "  backends:\n    gpu: %s\n" % backend, top=top),
                        training=False)
    run_id, ctx = active_run(server)
    return server, Client(url), run_id, ctx


def upload(c, run_id, path, data, offset=0):
    r = c.request("PUT", "/agent/v1/runs/%s/artifacts?path=%s&offset=%d" % (run_id, path, offset),
                  body=data, headers=AUTH)
    return r.status, json.loads(r.body)


# -- F1: slow uploads with a valid run token ----------------------------------------------------

@pytest.mark.parametrize("proxy", [False, True], ids=["four-addresses", "trusted-proxy"])
def test_slow_uploads_with_a_run_token_cannot_lock_annotators_out(tmp_path, serve, proxy):
    top = "server: {trusted_proxies: [127.0.0.3]}" if proxy else ""
    server, c, run_id, ctx = serve_run(tmp_path, serve, top)
    port = server.http.server_address[1]
    heads = [art_head(run_id, "f%d" % i, 1000000) for i in range(300)]
    sources = ["127.0.0.3"] if proxy else ["127.0.0.%d" % i for i in range(2, 6)]
    floods = [Tricklers(port, heads, n=140 if proxy else 40, source=s, every=2.0)
              for s in sources]
    for f in floods:
        f.__enter__()
    try:
        deadline, rounds = time.time() + 15, 0
        while time.time() < deadline:
            t0 = time.time()
            r = c.get("/login")
            took = time.time() - t0
            assert r.status == 200 and took < 2.0, (r.status, took, r.body[:200])
            rounds += 1
            time.sleep(0.5)
        assert rounds >= 10 and sum(f.opened for f in floods) >= 140
    finally:
        for f in floods:
            f.__exit__(None, None, None)
    # the agent itself still uploads once the flood has let go (the held bodies end: 400)
    data = os.urandom(1 << 20)
    end = time.time() + 15
    while True:
        status, body = upload(c, run_id, "model.bin", data)
        if status != 503 or time.time() > end:
            break
        time.sleep(0.5)
    assert status == 200 and body["bytes"] == len(data), body
    with open(os.path.join(ctx.paths.artifacts, "model.bin"), "rb") as f:
        assert f.read() == data


@pytest.mark.parametrize("how", ["cancelled", "ended"])
def test_uploads_of_a_run_that_ends_are_cut_off(tmp_path, serve, how):
    server, c, run_id, ctx = serve_run(tmp_path, serve)
    port = server.http.server_address[1]
    socks = [raw(port, art_head(run_id, "f%d" % i, 100000000) + b"A") for i in range(3)]
    if how == "ended":
        socks.append(raw(port, events_head(run_id, 100000) + b"{"))
    time.sleep(1.0)
    t0 = time.time()
    if how == "cancelled":
        ctx.cancel.set()
    else:
        server.manager._active.pop(run_id)
    for s in socks:
        s.settimeout(15)
        reply = read_all(s)  # before: held until the 180 s stall rule
        assert reply.startswith(b"HTTP/1.1 409") and how.encode() in reply, reply[:300]
    assert time.time() - t0 < 10
    if how == "cancelled":  # its agent still hears about the cancel
        status, body = c.json("POST", "/agent/v1/runs/%s/events" % run_id, headers=AUTH,
                              json_body={"events": []})
        assert status == 200 and body["cancel"] is True


def test_a_run_token_upload_has_a_rate_floor_after_its_stall_allowance(tmp_path, serve,
                                                                        monkeypatch):
    """Before: a byte every few seconds (never a pause as long as COPY_STALL_S) held the
    connection for ever."""
    monkeypatch.setattr(agent_routes, "COPY_STALL_S", 2)
    server, c, run_id, ctx = serve_run(tmp_path, serve)
    s = raw(server.http.server_address[1], art_head(run_id, "slow.bin", 10 << 20))
    t0 = time.time()
    s.settimeout(1)
    reply = b""
    while time.time() - t0 < 20 and not reply:
        try:
            s.sendall(b"x")
            reply = s.recv(65536)
        except OSError:  # the 1 s timeout (nothing yet), or the server has closed
            if s.fileno() < 0:
                break
    if reply:  # the head and the body may come in separate segments (TCP_NODELAY)
        s.settimeout(10)
        reply += read_all(s)
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive in time" in reply, reply[:300]
    s.close()


def test_a_run_token_holds_at_most_a_few_requests(tmp_path, serve):
    server, c, run_id, ctx = serve_run(tmp_path, serve)
    port = server.http.server_address[1]
    held = [raw(port, art_head(run_id, "h%d" % i, 1000)) for i in
            range(agent_limits.MAX_REQUESTS_PER_RUN)]
    time.sleep(0.5)
    status, body = upload(c, run_id, "one.bin", b"x")
    assert status == 503 and "requests under way" in body["error"]
    for s in held:
        s.close()


# -- F2: the artifact caps under concurrency, files and depth -----------------------------------

MB1 = "{type: ssh, host: gpu.example.org, max_artifact_mb: 1}"


def test_concurrent_uploads_cannot_pass_the_run_total(tmp_path, serve):
    server, c, run_id, ctx = serve_run(tmp_path, serve, backend=MB1)
    mb = 1 << 20
    for name in ("a", "b"):
        assert upload(c, run_id, name, b"z" * mb)[0] == 200
    port = server.http.server_address[1]
    socks = [raw(port, art_head(run_id, "c%d" % i, mb)) for i in range(4)]  # headers first
    time.sleep(0.5)
    replies = []
    for s in socks:
        try:
            s.sendall(b"z" * mb)
        except OSError:  # refused before the body: the server closed
            pass
    for s in socks:
        s.settimeout(15)
        replies.append(s.recv(12))  # the status line (a 200 keeps the connection open)
        s.close()
    assert sum(r == b"HTTP/1.1 200" for r in replies) <= 2, replies
    total = sum(os.path.getsize(os.path.join(ctx.paths.artifacts, f))
                for f in os.listdir(ctx.paths.artifacts))
    assert total <= 4 * mb


def test_one_upload_at_a_time_per_model_file(tmp_path, serve):
    server, c, run_id, ctx = serve_run(tmp_path, serve, backend=MB1)
    port = server.http.server_address[1]
    socks = [raw(port, art_head(run_id, "same", 1000)) for _ in range(2)]
    time.sleep(1.0)  # both past their headers: one writes, the other is refused
    replies = []
    for s in socks:
        s.sendall(b"y" * 1000)
        s.settimeout(15)
        r = http.client.HTTPResponse(s)
        r.begin()
        replies.append((r.status, r.read()))
        s.close()
    assert sorted(status for status, _ in replies) == [200, 409], replies
    assert any(b"being uploaded by another request" in body for _, body in replies), replies
    assert os.path.getsize(os.path.join(ctx.paths.artifacts, "same")) == 1000


def test_files_folders_and_depth_are_bounded(tmp_path, serve, monkeypatch):
    monkeypatch.setattr(agent_limits, "MAX_ARTIFACT_ENTRIES", 30)
    _, c, run_id, ctx = serve_run(tmp_path, serve)
    deep = "/".join("d%d" % k for k in range(agent_limits.MAX_ARTIFACT_DEPTH))
    status, body = upload(c, run_id, deep + "/f", b"")
    assert status == 400 and "at most 8 levels" in body["error"]
    assert upload(c, run_id, deep, b"")[0] == 200  # 8 levels: 8 entries
    statuses = [upload(c, run_id, "many/f%d" % i, b"")[0] for i in range(30)]
    assert statuses[:21] == [200] * 21 and set(statuses[21:]) == {413}  # 8 + many/ + 21
    status, body = upload(c, run_id, "many/f99", b"")
    assert "the most a run may store" in body["error"]
    entries = sum(len(d) + len(f) for _, d, f in os.walk(ctx.paths.artifacts))
    assert entries == 30


def test_the_run_total_is_counted_not_walked_per_request(tmp_path, serve, monkeypatch):
    _, c, run_id, ctx = serve_run(tmp_path, serve)
    walks, real = [], os.walk

    def counting(top, *a, **kw):
        walks.append(top)
        return real(top, *a, **kw)

    monkeypatch.setattr(os, "walk", counting)
    for i in range(10):
        assert upload(c, run_id, "f%d" % i, b"x")[0] == 200
    assert len([w for w in walks if str(w).startswith(ctx.paths.artifacts)]) <= 1


# -- the lows -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["\u3164.bin", "a\u115f", "\u2800", "\u0301x.bin",
                                  "dir/\u0301x", "\ue000.bin"])
def test_artifact_names_that_print_nothing_are_refused(tmp_path, serve, name):
    from urllib.parse import quote

    _, c, run_id, ctx = serve_run(tmp_path, serve)
    status, body = upload(c, run_id, quote(name), b"x")
    assert status == 400 and "control or format characters" in body["error"]
    assert os.listdir(ctx.paths.artifacts) == []
    assert upload(c, run_id, quote("e\u0301t\u00e9/\ubaa8\ub378.bin"), b"x")[0] == 200


def test_a_short_heartbeat_never_sweeps_a_live_job(tmp_path, serve, monkeypatch):
    """The probe sweeps job directories whose .alive (touched every 2 s) is older than
    heartbeat_timeout_s: before, 2 s swept live ones."""
    from potato.training.backends import sshcmd

    server, _ = serve(make_project(tmp_path, ssh_backend(heartbeat_timeout_s=2)),
                      training=False)
    asked = []

    def probe_command(*args):
        asked.append(args)
        raise RuntimeError("stop here")

    monkeypatch.setattr(sshcmd, "probe_command", probe_command)
    with pytest.raises(RuntimeError):
        server.manager.backends["gpu-server"].probe()
    assert asked[0][-1] >= 60


def test_wrong_admin_keys_count_per_client_behind_a_proxy(tmp_path, serve):
    _, url = serve(make_project(tmp_path, top="server: {trusted_proxies: [127.0.0.1]}",
                                labels=False), training=False)
    c = Client(url)

    def wrong(client):
        return c.get("/admin/api/stats", headers={"X-API-Key": "wrong",
                                                  "X-Forwarded-For": client}).status

    assert [wrong("203.0.113.9") for _ in range(10)] == [401] * 10
    assert wrong("203.0.113.9") == 429
    assert wrong("203.0.113.10") == 401  # before: every client of the proxy was locked out


def test_validate_refuses_ssh_names_with_white_space(write_config):
    from potato.project.validation import check

    _, report = check(write_config(BASE + """\
model_training:
  backends:
    gpu: {type: ssh, host: "gpu -oProxyCommand=x", user: alice}
    other: {type: ssh, host: gpu2, user: "al ice"}
"""))
    msgs = [p.message for p in report.errors]
    assert any(m.startswith("model_training.backends.gpu.host is 'gpu -oProxyCommand=x', "
                            "which holds a space") for m in msgs), msgs
    assert any(m.startswith("model_training.backends.other.user is 'al ice'") for m in msgs)


def test_a_result_on_a_full_disk_is_taken_and_kept_in_memory(tmp_path, serve, monkeypatch):
    """As docs/security.md says: 200, and the run ends from memory."""
    import errno

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(agent_routes, "write_json", full)
    _, c, run_id, ctx = serve_run(tmp_path, serve)
    status, body = c.json("POST", "/agent/v1/runs/%s/result" % run_id, headers=AUTH,
                          json_body={"status": "error", "error": "out of memory"})
    assert status == 200 and ctx.remote.result["error"] == "out of memory"


# -- the backend token's claims (the fifth review) -------------------------------------------------

def claim_head(backend, token, length):
    return (b"POST /agent/v1/backends/%s/claim HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            b"application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
            % (backend.encode(), token.encode(), length))


def test_slow_claims_with_a_backend_token_cannot_lock_annotators_out(tmp_path, serve, capsys):
    """Before: a claim was marked authenticated before its 64 KB body was read and took no
    slot, so slow claim bodies from a few addresses held every connection (503 for /login)."""
    from tests.helpers import agent_backends, register_agent

    cfg = make_project(tmp_path, agent_backends())
    token = register_agent(cfg, "lab", capsys)
    server, url = serve(cfg, training=False)
    c = Client(url)
    port = server.http.server_address[1]
    heads = [claim_head("lab", token, 60000) for _ in range(300)]
    floods = [Tricklers(port, heads, n=40, source="127.0.0.%d" % i, every=2.0)
              for i in range(2, 6)]
    for f in floods:
        f.__enter__()
    try:
        deadline, rounds = time.time() + 12, 0
        while time.time() < deadline:
            t0 = time.time()
            r = c.get("/login")
            assert r.status == 200 and time.time() - t0 < 2.0, (r.status, r.body[:200])
            rounds += 1
            time.sleep(0.5)
        assert rounds >= 8
    finally:
        for f in floods:
            f.__exit__(None, None, None)
    # an agent's own claim goes through once the slow ones have let go
    end = time.time() + 15
    while True:
        status, body = c.json("POST", "/agent/v1/backends/lab/claim", json_body={},
                              headers={"Authorization": "Bearer " + token})
        if status != 503 or time.time() > end:
            break
        time.sleep(0.5)
    assert status == 200 and body == {"run_id": None}, body


def test_a_backend_token_holds_at_most_two_claims(tmp_path, serve, capsys):
    from tests.helpers import agent_backends, register_agent

    cfg = make_project(tmp_path, agent_backends())
    token = register_agent(cfg, "lab", capsys)
    server, url = serve(cfg, training=False)
    port = server.http.server_address[1]
    held = [raw(port, claim_head("lab", token, 1000))
            for _ in range(agent_limits.MAX_CLAIMS_PER_BACKEND)]
    time.sleep(0.5)
    status, body = Client(url).json("POST", "/agent/v1/backends/lab/claim", json_body={},
                                    headers={"Authorization": "Bearer " + token})
    assert status == 503 and "claims under way" in body["error"], body
    for s in held:
        s.close()


def login_answers(c, rounds=6):
    """GET /login answers 200 within 2 s, ``rounds`` times half a second apart."""
    for _ in range(rounds):
        t0 = time.time()
        r = c.get("/login")
        assert r.status == 200 and time.time() - t0 < 2.0, (r.status, r.body[:200])
        time.sleep(0.5)


def test_a_run_tokens_trust_does_not_carry_over_to_the_next_request(tmp_path, serve):
    """Before: after one quick request with the run token, the next request on the same
    kept-alive connection (a slow POST /login, no credential) was marked trusted from its
    headers on, never closed to make room, and took no slot: 160 such connections from four
    addresses answered GET /login with 503 (the sixth review)."""
    server, c, run_id, ctx = serve_run(tmp_path, serve)
    port = server.http.server_address[1]
    ask = (b"GET /agent/v1/runs/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
           b"\r\n" % (run_id.encode(), TOKEN.encode()))
    slow = (b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-"
            b"urlencoded\r\nContent-Length: 4000\r\n\r\nn")
    socks = []
    try:
        for i in range(160):
            s = raw(port, ask, source="127.0.0.%d" % (2 + i % 4))
            got = b""
            while b"\r\n\r\n" not in got:
                got += s.recv(65536)
            head, _, body = got.partition(b"\r\n\r\n")
            if head.startswith(b"HTTP/1.1 503"):  # this address's share is taken: next
                s.close()
                continue
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
            while len(body) < length:
                body += s.recv(65536)
            s.sendall(slow)
            socks.append(s)
        assert len(socks) >= 100
        login_answers(c)
    finally:
        for s in socks:
            s.close()


def test_an_unread_answer_to_a_run_token_does_not_keep_its_connection(tmp_path, serve):
    """Before: a quick authorised request whose answer the client never read (a tiny receive
    window) left the connection trusted while the server waited for the answer to leave: no
    slot held, never closed to make room, so 160 of them answered GET /login with 503 (the
    seventh review)."""
    import socket

    server, c, run_id, ctx = serve_run(tmp_path, serve)
    port = server.http.server_address[1]
    ask = (b"GET /agent/v1/runs/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
           b"\r\n" % (run_id.encode(), TOKEN.encode()))
    socks = []
    try:
        for i in range(160):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
            s.bind(("127.0.0.%d" % (2 + i % 5), 0))
            s.settimeout(10)
            s.connect(("127.0.0.1", port))
            s.sendall(ask * 40)  # pipelined: answers pile up unread
            socks.append(s)
        time.sleep(1)
        login_answers(c)
    finally:
        for s in socks:
            s.close()
