"""The config file on disk against the config the server runs with: the Training page's notice,
and **Reload config**, which re-reads and validates the file and applies what can be applied
while the server runs (``config_diff.live``: the ``model_training`` keys but ``enabled`` and
``publish.token_env``), through the composition root (``Service.apply_config``), without
dropping the queue or a running run.

A reload is all or nothing. It is refused, in one sentence, and the server keeps its config,
when the file cannot be read or has errors (the first error, as ``potato validate`` says it),
when a key only a restart applies changed (``server.port changed: restart the server to apply
it``), or when a backend that a running run uses was changed or removed, or one that a queued
run waits for was removed (reload again when that run has ended, or cancel it).

The page learns of a change by the file's size, time and inode (one ``stat`` per look); the
file is parsed and compared only when those change.
"""

import logging
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from potato.config import diff as config_diff
from potato.project import validation
from potato.config.settings import Config, ConfigError
from potato.markup import Safe, render
from potato.training.backends import backend_class
from potato.training.lifecycle import autoretrain, retention


log = logging.getLogger("potato.server")


def _signature(path: str) -> Optional[Tuple[int, int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class ConfigOnDisk:
    """Watches the config file (``state``), renders the notice, and reloads it (``reload``).

    ``manager``: the training manager (its ``cfg`` is the config the server runs with);
    ``apply``: the composition root's function that puts a new config in place."""

    def __init__(self, manager, apply: Callable[[Config], List[Any]]):
        self.manager = manager
        self.apply = apply
        self._lock = threading.Lock()
        self._reloading = threading.Lock()
        self._seen: Any = ()  # (signature, id of the running config) the state is for
        self._state: Dict[str, Any] = {}
        self._disk: Optional[Config] = None  # the file's config, when it loads
        self.last: Optional[Tuple[bool, str]] = None  # the latest reload: (applied, sentence)

    @property
    def path(self) -> str:
        return self.manager.cfg.path

    def _load(self) -> Tuple[Optional[Config], Optional[str]]:
        """(the config on disk, None) or (None, the sentence why it cannot be used)."""
        try:
            cfg, report = validation.check(self.path, items=False)  # the items: start reads them
        except ConfigError as e:
            return None, str(e)  # it names the file: "PATH:2: YAML syntax error: ..."
        except Exception as e:  # a check that fails on a value: a sentence, never a 500
            return None, "%s cannot be used: checking it failed (%s: %s); run potato " \
                         "validate %s to see where." % (self.path, type(e).__name__, e,
                                                         self.path)
        if report.errors:
            first = report.errors[0].format()
            more = len(report.errors) - 1
            return None, "%s%s" % (first, " (and %d more error%s: run potato validate %s)" % (
                more, "" if more == 1 else "s", self.path) if more else "")
        return cfg, None

    def state(self) -> Dict[str, Any]:
        """``{differs, changes, restart, error}`` for the file as it is now."""
        seen = (_signature(self.path), id(self.manager.cfg))
        with self._lock:
            if seen != self._seen:
                cfg, error = self._load()
                if cfg is None:
                    state = {"differs": True, "changes": [], "restart": [], "error": error}
                else:
                    keys = config_diff.changes(self.manager.cfg, cfg)
                    state = {"differs": bool(keys), "changes": keys, "error": None,
                             "restart": [k for k in keys if not config_diff.live(k)]}
                self._seen, self._state, self._disk = seen, state, cfg
            state, cfg = self._state, self._disk
        # what a reload would prune changes with every run, pin and name: looked at each time
        return dict(state, prunes=self._prunes(cfg) if cfg is not None else [])

    def reload(self) -> Tuple[bool, str]:
        """Re-read, validate and apply the file: (applied, the sentence that says what
        happened). The server keeps its config unless ``applied``."""
        with self._reloading:  # one reload at a time (two admins, two tabs)
            with self._lock:
                self._seen = ()  # look at the file afresh
            cfg, error = self._load()
            if cfg is None:
                result = (False, "Not reloaded: %s" % error)
            else:
                result = self._reload(cfg)
            self.last = result
            return result

    def _reload(self, cfg: Config) -> Tuple[bool, str]:
        old = self.manager.cfg
        keys = config_diff.changes(old, cfg)
        if not keys:
            return True, "The config on disk is the one the server runs with: nothing to reload."
        restart = [k for k in keys if not config_diff.live(k)]
        if restart:
            return False, "Not reloaded: %s." % config_diff.restart_sentence(restart)
        with self.manager._lock:  # no run starts or is claimed while backends change hands
            busy = busy_backends(self.manager, old, cfg)
            if busy:
                return False, "Not reloaded: %s." % busy
            gone = self.apply(cfg)
        for backend in gone:  # outside the lock: closing an ssh connection takes a moment
            backend.close()
        for run in self.manager.runs.with_status("queued"):  # queued as the backend went
            if run.backend not in self.manager.backends:
                self.manager.runs.finish(run.run_id, "error", "Backend %s was removed from %s "
                                         "by a reload; the run was not started." % (
                                             run.backend, self.path), step="failed")
        sentence = "Reloaded %s: %s." % (self.path, ", ".join(describe(old, cfg, keys)))
        log.warning("%s", sentence)
        return True, sentence

    def _prunes(self, cfg: Config) -> List[str]:
        """Named or annotated runs whose model files a reload to ``cfg`` would delete (it lowers
        retain_runs), as words; warned of before it happens."""
        keep = cfg.model_training.retain_runs
        if keep >= self.manager.cfg.model_training.retain_runs:
            return []
        runs = self.manager.runs
        return retention.named_words(runs, retention.would_prune(runs, self.manager.paths,
                                                                 keep))

    def notice(self) -> Safe:
        """The Training page's notice: empty while the file matches the running config."""
        state = self.state()
        if not state.get("differs"):
            return Safe("")
        if state["error"]:
            what = render("it cannot be used, so the server keeps the config it loaded: {e}",
                          e=state["error"])
        elif state["restart"]:
            what = render("{s}.", s=config_diff.restart_sentence(state["restart"]))
        else:
            what = render("changed: {k}. Reload applies it without stopping the queue or a "
                          "running run.", k=", ".join(state["changes"]))
            if state.get("prunes"):
                what = render("{w} <b class=\"warning\">Reloading deletes the model files of "
                              "named or annotated runs: {runs} (model_training.retain_runs is "
                              "lower in the file). Pin them first to keep their files.</b>",
                              w=what, runs=", ".join(state["prunes"]))
        return render(
            '<div class="notice" id="config-differs"><p>The config file on disk (<code>{path}'
            '</code>) differs from the one this server runs with: {what}</p><form method="post" '
            'action="/admin/training/reload" class="inline"><button type="submit" '
            'class="secondary" id="reload-config">Reload config</button></form></div>',
            path=self.path, what=what)

    def result(self) -> Safe:
        """What the latest reload did, in one sentence (shown once, after the form's post)."""
        if self.last is None:
            return Safe("")
        return render('<p class="{kind}" id="reload-result" role="status">{m}</p>',
                      kind="ok" if self.last[0] else "error", m=self.last[1])


def busy_backends(manager, old: Config, new: Config) -> str:
    """Why the backends cannot change hands now ("" when they can)."""
    running = {r.backend: r.run_id for r in manager.runs.with_status("running")}
    for run_id, ctx in list(manager._active.items()):
        running.setdefault(ctx.run.backend, run_id)
    for run_id in list(manager._claims):
        run = manager.runs.get(run_id)
        if run is not None:
            running.setdefault(run.backend, run_id)
    queued = {r.backend: r.run_id for r in manager.runs.with_status("queued")}
    for name, b in old.model_training.backends.items():
        after = new.model_training.backends.get(name)
        if after == b:
            continue
        what = "removed" if after is None else "changed"
        if name in running:
            return ("model_training.backends.%s %s while run %s runs on it: reload again when "
                    "it has ended" % (name, what, running[name]))
        if after is None and name in queued:
            return ("model_training.backends.%s removed while run %s waits for it: cancel the "
                    "run, or reload again when it has ended" % (name, queued[name]))
    return ""


def describe(old: Config, new: Config, keys: List[str]) -> List[str]:
    out = []
    for key in keys:
        if key.startswith(config_diff.BACKENDS):
            name = key[len(config_diff.BACKENDS):]
            out.append("backend %s %s" % (name, config_diff.backend_change(old, new, name)))
        else:
            out.append("%s changed" % key)
    return out


def apply_to_manager(manager, cfg: Config, port: Optional[int]) -> List[Any]:
    """Put ``cfg`` in the manager's hands (the caller holds ``manager._lock`` and has checked
    ``busy_backends``): unchanged backends are kept (a run on them goes on), the others are
    built anew. Returns the old backends that left, for the caller to close."""
    old_cfg, old = manager.cfg, manager.backends
    backends = {}
    for name, bcfg in cfg.model_training.backends.items():
        kept = old.get(name)
        if kept is not None and old_cfg.model_training.backends.get(name) == bcfg:
            kept.cfg, kept.bcfg = cfg, bcfg  # settings are read when a run starts
            backends[name] = kept
            continue
        kind = backend_class(bcfg.type)
        if kind is None:  # a kind the config knows but this server cannot run: not offered
            continue
        backends[name] = kind(bcfg, cfg, tokens=manager.tokens)
        if port is not None:
            backends[name].listening_on(port)
    manager.cfg, manager.backends = cfg, backends
    if not autoretrain.enabled(cfg):
        manager.auto_status = {"enabled": False, "reason": "auto_retrain.enabled is false"}
    manager._wake.set()
    return [b for name, b in old.items() if backends.get(name) is not b]


def add_routes(app, on_disk: ConfigOnDisk, prefix: str) -> None:
    """``GET {prefix}/config``, ``POST {prefix}/config/reload`` (JSON) and the page's form,
    ``POST /admin/training/reload``; all admin only (a browser's post must be same-origin)."""

    @app.route("GET", prefix + r"/config", "admin")
    def config_state(h):
        h.send_json(dict(on_disk.state(), path=on_disk.path))

    @app.route("POST", prefix + r"/config/reload", "admin")
    def config_reload(h):
        applied, sentence = on_disk.reload()
        if not applied:
            h.send_json({"error": sentence}, 409)
            return
        h.send_json({"applied": True, "message": sentence})

    @app.route("POST", r"/admin/training/reload", "admin")
    def reload_form(h):
        on_disk.reload()
        h.redirect("/admin/training?reload=done")


def page_notice(on_disk: Optional[ConfigOnDisk], query) -> Safe:
    """The Training page's part: the notice (updated live), and after the form's post what the
    reload did."""
    if on_disk is None:
        return Safe("")
    done = on_disk.result() if (query.get("reload") or [""])[0] == "done" else Safe("")
    return render('<div id="config-notice">{n}</div>{done}', n=on_disk.notice(), done=done)
