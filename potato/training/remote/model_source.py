"""Where a trainer's ``model`` param comes from, resolved on the machine that will load it: an
existing directory, a model in that machine's Hugging Face cache, or a Hub id the machine can
reach. Otherwise one sentence that says what to do, instead of a transformers traceback 51 s
into the run ("Repo id must be in the form ...", or an offline host's connection error).

Used by the worker at a run's start, and by Check: in the server for local runs, and sent over
ssh as ``python -c`` (this file's own source, standard library only, Python 3.8) for ssh and
slurm hosts, whose output line is ``POTATO-MODEL {"ok": ..., "sentence": ...}``.
"""

import json
import os
import re
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

MARK = "POTATO-MODEL "
TIMEOUT_S = 10
HUB = "https://huggingface.co"
# a Hub id: "name" or "owner/name", letters, digits, "-", "_", "."; no "--" or ".." inside
REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
TRUE = ("1", "true", "yes", "on")


def _hf_home(env):
    return env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface")


def _cache_dir(env):
    if env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        return env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    return os.path.join(_hf_home(env), "hub")


def in_cache(model, env):
    """Whether a snapshot of ``model`` with a config.json is in the Hugging Face cache."""
    snapshots = os.path.join(os.path.expanduser(_cache_dir(env)),
                             "models--" + model.replace("/", "--"), "snapshots")
    try:
        return any(os.path.isfile(os.path.join(snapshots, s, "config.json"))
                   for s in os.listdir(snapshots))
    except OSError:
        return False


class _SameOriginAuth(urllib.request.HTTPRedirectHandler):
    """Follows a redirect, but sends the token only to the origin it was meant for."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = urllib.request.HTTPRedirectHandler.redirect_request(
            self, req, fp, code, msg, headers, newurl)
        if new is not None:
            old, to = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(new.full_url)
            if (old.scheme, old.netloc) != (to.scheme, to.netloc):
                for name in [k for k in new.headers if k.lower() == "authorization"]:
                    del new.headers[name]
                new.unredirected_hdrs.pop("Authorization", None)
        return new


def _token(env):
    """HF_TOKEN, else the token ``huggingface-cli login`` stored, as huggingface_hub finds it."""
    token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token.strip()
    path = env.get("HF_TOKEN_PATH") or os.path.join(_hf_home(env), "token")
    try:
        with open(os.path.expanduser(path)) as f:
            return f.read(4096).strip()
    except (OSError, ValueError):
        return ""


def _hub_answer(model, env, timeout):
    """(HTTP status or None, the reason when the Hub could not be reached)."""
    endpoint = (env.get("HF_ENDPOINT") or HUB).rstrip("/")
    req = urllib.request.Request("%s/api/models/%s" % (endpoint, model), method="GET")
    token = _token(env)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.build_opener(_SameOriginAuth).open(req, timeout=timeout) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as e:
        return e.code, ""
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return None, "%s (%s)" % (endpoint, reason)


def resolve(model, host=None, env=None, timeout=TIMEOUT_S):
    """(ok, sentence): where ``model`` would load from on this machine, or why it cannot."""
    env = os.environ if env is None else env
    host = host or socket.gethostname()
    model = str(model)
    where = os.path.expanduser(model)
    if os.path.isdir(where):
        return True, "model %s: the directory %s on %s" % (model, where, host)
    fix = "set model to a Hub id or an existing directory"
    if model.startswith(("/", ".", "~")) or not REPO_ID.match(model) or "--" in model \
            or ".." in model:
        return False, "no directory %s on %s; %s" % (model, host, fix)
    if in_cache(model, env):
        return True, "model %s: in the Hugging Face cache on %s" % (model, host)
    fetch = ("download it there first (huggingface-cli download %s) or set model to an "
             "existing directory" % model)
    offline = [v for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
               if str(env.get(v, "")).lower() in TRUE]
    if offline:
        return False, ("model %s is not in the Hugging Face cache on %s, and %s is set there; %s"
                       % (model, host, offline[0], fetch))
    status, reason = _hub_answer(model, env, timeout)
    if status is None:
        return False, ("model %s is not in the Hugging Face cache on %s, and %s cannot reach %s; "
                       "%s" % (model, host, host, reason, fetch))
    if status in (401, 403, 404):
        return False, ("no directory %s on %s, and no model %s on the Hugging Face Hub that %s "
                       "may read (a gated or private model needs HF_TOKEN there); %s"
                       % (model, host, model, host, fix))
    if status >= 400:
        return False, ("model %s is not in the Hugging Face cache on %s, and the Hub answered "
                       "HTTP %d; try again later or %s" % (model, host, status, fetch))
    return True, "model %s: on the Hugging Face Hub, which %s can reach" % (model, host)


if __name__ == "__main__":  # python -c "<this file>" MODEL (Check over ssh)
    ok, sentence = resolve(sys.argv[1])
    print(MARK + json.dumps({"ok": ok, "sentence": sentence}))
