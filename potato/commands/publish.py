"""``potato training publish RUN_ID CONFIG --repo ID [--private] [--message M]``.

Through the project's running server when there is one (the token then comes from the
server's environment, as for the run page); otherwise in this process, with the token from
this shell's environment. Either way it follows the publish to its end and exits 0 when the
model is on the Hub, 1 otherwise.
"""

import os
import re
import sys
import time
import urllib.error
from typing import Any, Callable, Dict

from potato.project.paths import running_server
from potato.project.store import Store
from potato.training.core.view import RunView
from potato.commands.training import _api
from potato.training.hub.publish import Publisher, Refused
from potato.training.remote.paths import RunPaths
from potato.training.core.runs import RunStore

FOLLOW_DEADLINE_S = 6 * 3600  # a stuck follower gives up; the publish itself has timeouts


def publish_command(cfg, args) -> int:
    if not re.match(r"^[A-Za-z0-9_-]{1,64}$", args.run_id):
        print("error: %r is not a run id (such as r12); potato training run and the Training "
              "page show them." % args.run_id[:80], file=sys.stderr)
        return 1
    body = {"repo_id": args.repo, "private": bool(args.private),
            "commit_message": args.message}
    url = running_server(cfg)
    if url:
        return _via_server(cfg, url, args.run_id, body)
    return _in_process(cfg, args.run_id, body)


def _follow(get: Callable[[], Dict[str, Any]], interval: float = 0.5) -> Dict[str, Any]:
    last = None
    deadline = time.time() + FOLLOW_DEADLINE_S
    while True:
        state = get()
        if state.get("step") != last and state.get("state") == "publishing":
            last = state.get("step")
            print("publishing: %s" % last, flush=True)
        if state.get("state") != "publishing" or time.time() > deadline:
            return state
        time.sleep(interval)


def _done(state: Dict[str, Any]) -> int:
    if state.get("state") == "published":
        print("Published to %s, commit %s" % (state.get("url"), state.get("commit")))
        return 0
    print("error: %s" % (state.get("error") or "the publish did not finish"), file=sys.stderr)
    return 1


def _via_server(cfg, url: str, run_id: str, body: Dict[str, Any]) -> int:
    key = cfg.admin_api_key
    path = "/admin/training/api/runs/%s/publish" % run_id
    print("Publishing through the running server at %s (the token comes from its "
          "environment)" % url)
    try:
        status, state = _api(url, key, "POST", path, body)
        if status != 202:
            print("error: %s" % (state or {}).get("error", "HTTP %d" % status), file=sys.stderr)
            return 1

        def get():
            code, out = _api(url, key, "GET", path)
            if code != 200:
                raise RuntimeError("the server answered %d for run %s" % (code, run_id))
            return out

        return _done(_follow(get))
    except (OSError, urllib.error.URLError, RuntimeError) as e:
        print("error: the server at %s did not answer (%s). Is it still running? The run page "
              "shows the publish's state." % (url, e), file=sys.stderr)
        return 1


def _in_process(cfg, run_id: str, body: Dict[str, Any]) -> int:
    if not os.path.exists(cfg.db_path):
        print("error: %s has no store yet (%s), so it has no runs." % (cfg.path, cfg.db_path),
              file=sys.stderr)
        return 1
    store = Store(cfg.db_path)
    try:
        run = RunStore(store).get(run_id)
    finally:
        store.close()
    if run is None:
        print("error: no run %s in %s." % (run_id, cfg.path), file=sys.stderr)
        return 1
    publisher = Publisher(cfg, lambda rid: RunPaths(os.path.join(cfg.runs_dir, rid)),
                          whose="this command's environment", then="and run it again")
    try:
        publisher.start(RunView.from_run(run), body)
    except Refused as e:
        print("error: %s" % e.message, file=sys.stderr)
        return 1
    try:
        _follow(lambda: publisher.state(run_id))
    except KeyboardInterrupt:
        print("\nStopped following; the publish goes on until this process exits.",
              file=sys.stderr)
        raise
    publisher.wait()
    return _done(publisher.state(run_id))
