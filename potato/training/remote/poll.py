"""``potato training agent``: a training machine that polls the server for work.

For a machine the server cannot reach (behind NAT or a firewall): it opens every connection
itself, claims the runs of its backend, and runs each with the same agent code as the ssh and
slurm backends. Standard library only (Python 3.8): it may run from a plain checkout or wheel.
"""

import http.client
import ipaddress
import json
import os
import platform
import secrets
import sys
import time
from urllib.parse import urlsplit

from potato.training.remote import alive, protocol, slurm_job
from potato.training.remote import run as agent_mod
from potato.training.remote.client import Client, ServerError, log, send_result

POLL_S = 5.0
SWEEP_EVERY_S = 60.0  # how often a polling agent looks for killed agents' job directories
# --slurm-config's keys: the slurm scheduler's own, and two of every run's settings
RUN_KEYS = ("env", "num_threads")
SLURM_KEYS = slurm_job.SlurmSettings.CONFIG_KEYS + RUN_KEYS


def read_token(token_file):
    if token_file:
        try:
            with open(token_file) as f:
                return f.read().strip()
        except OSError as e:
            raise SystemExit("error: cannot read the token file %s: %s" % (token_file,
                                                                            e.strerror))
    token = os.environ.get("POTATO_TRAINING_TOKEN", "").strip()
    if not token:
        raise SystemExit("error: no token: set POTATO_TRAINING_TOKEN or pass --token-file "
                         "(potato training register NAME CONFIG on the server prints one).")
    return token


def slurm_overrides(path):
    """The scheduler settings from ``--slurm-config slurm.json`` (the slurm backend's keys)."""
    try:
        with open(path) as f:
            conf = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit("error: %s cannot be read as JSON: %s" % (path, e))
    unknown = sorted(set(conf) - set(SLURM_KEYS))
    if unknown:
        raise SystemExit("error: %s has key(s) %s that a slurm job does not take; valid keys: %s"
                         % (path, ", ".join(unknown), ", ".join(SLURM_KEYS)))
    if not isinstance(conf.get("requeue", False), bool):
        raise SystemExit("error: %s: requeue must be true or false, not %r" % (path,
                                                                            conf["requeue"]))
    scheduler = {k: v for k, v in conf.items() if k not in RUN_KEYS}
    scheduler["name"] = slurm_job.SlurmSettings.name
    if "time" in scheduler:
        scheduler["time"] = str(scheduler["time"])
    return dict({k: conf[k] for k in RUN_KEYS if k in conf}, scheduler=scheduler, gpus="none")


def plain_http_warning(server):
    u = urlsplit(server)
    if u.scheme != "http":
        return None
    try:
        if ipaddress.ip_address(u.hostname).is_loopback:
            return None
    except ValueError:
        if u.hostname == "localhost":
            return None
    return ("warning: %s is plain http: the token and the data travel unencrypted. Put the "
            "server behind https (see docs/annotation-server.md)." % server)


def serve(args):
    if not args.server.startswith(("http://", "https://")):
        print("error: --server must be the server's URL, like http://potato.example.org:8000",
              file=sys.stderr)
        return 2
    warning = plain_http_warning(args.server)
    if warning:
        print(warning, file=sys.stderr)
    token = read_token(args.token_file)
    os.umask(0o077)  # job directories hold training data: this account's only
    overrides = slurm_overrides(args.slurm_config) if args.slurm_config else None
    limit = getattr(args, "max_media_cache_mb", None)
    if limit is not None:
        if not limit >= 0:
            print("error: --max-media-cache-mb must be a number of MB, 0 or more",
                  file=sys.stderr)
            return 2
        overrides = dict(overrides or {}, max_media_cache_mb=limit)
    workdir = os.path.abspath(os.path.expanduser(args.workdir or "~/.cache/potato-training"))
    python = args.python or sys.executable
    backend_client = Client(token, server=args.server)
    me = {"host": platform.node(), "version": protocol.VERSION,
          "python": platform.python_version(), "poll_interval_s": args.poll_interval}
    log("polling %s for runs of backend %s (work directory %s)" % (args.server, args.backend,
                                                                   workdir))
    failing_since = None
    swept_at = None
    while True:
        if swept_at is None or time.monotonic() - swept_at > SWEEP_EVERY_S:
            swept_at = time.monotonic()
            for name in alive.sweep(os.path.join(workdir, "jobs")):
                log("removed the job directory %s: its agent was killed (nothing touched it "
                    "for %d s)" % (os.path.join(workdir, "jobs", name), alive.STALE_S))
        try:
            _, reply, _ = backend_client.request("POST", "/agent/v1/backends/%s/claim"
                                                 % args.backend, me)
            failing_since = None
        except ServerError as e:
            if e.status in (401, 403, 404):
                print("error: the server at %s rejected this agent: %s" % (args.server, e),
                      file=sys.stderr)
                return protocol.AGENT_REJECTED
            log("the server answered %s: %s; trying again" % (e.status, e))
            reply = None
        except (OSError, http.client.HTTPException) as e:
            if failing_since is None:
                failing_since = time.monotonic()
                log("cannot reach %s (%s); trying again every %g s" % (args.server, e,
                                                                       args.poll_interval))
            reply = None
        if reply and reply.get("run_id"):
            run_id = reply["run_id"]
            log("claimed run %s" % run_id)
            job = os.path.join(workdir, "jobs", "%s-%s" % (run_id, secrets.token_hex(3)))
            # patient: the run carries on through a server restart (LOST_CONTACT_S at most)
            run_client = Client(reply["token"], server=args.server,
                                patience=protocol.LOST_CONTACT_S)
            try:
                agent_mod.run(run_client, run_id, job, python, overrides=overrides,
                              keep_bundle=args.keep, keep_job=args.keep)
            except ServerError as e:
                log("the server refused run %s: %s" % (run_id, e))
            except Exception as e:  # one failed run must not end the agent
                log("run %s failed in the agent: %s: %s" % (run_id, type(e).__name__, e))
                send_result(run_client, run_id, {
                    "status": "error", "exit_code": None, "error": "the agent failed: %s" % e})
            log("run %s done" % run_id)
            if args.once:
                return 0
            continue
        time.sleep(args.poll_interval)
