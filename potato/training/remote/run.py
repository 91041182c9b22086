"""One training run where it executes, for the server: the agent's run, in named steps.

Standard library only (Python 3.8+): it runs on GPU servers, SLURM login nodes and agent
machines from the shipped files. ``python -m potato.training.agent`` (``main`` below) reads its
run token from the first line of standard input (never argv or the environment), then talks
HTTP to the server (``client.Client``). ``AgentRun`` does the run in steps, each a method:

    download -> prepare -> execute (run the worker, or submit a SLURM job) -> upload -> report
    -> clean up

Events are relayed every ``REPORT_S`` seconds (which is also the heartbeat); a cancel arrives in
the reply to a report. Standard input stays open for the length of the run: when it closes (the
ssh session dropped), or on SIGHUP/SIGTERM, the agent stops the worker or cancels its job, so
nothing of the run survives on the host.
"""

import argparse
import http.client
import os
import platform
import shutil
import sys
import threading
import time

from potato.training.remote import bundle as bundle_mod
from potato.training.remote.alive import Alive
from potato.training.remote import gpus as gpus_mod
from potato.training.remote import media_cache, media_fetch
from potato.training.remote import protocol
from potato.training.remote import slurm_job
from potato.training.remote import supervise
from potato.training.remote import upload as upload_mod
from potato.training.remote.client import (
    Client, ServerError, StdinWatch, download_bundle, log, on_hangup, patiently, send_result,
    set_log_file)
from potato.training.remote.paths import RunPaths, write_json
from potato.training.remote.protocol import RunSettings

REPORT_S = 2.0
REPORT_MAX_EVENTS = 2000  # events per report (the server takes 10000 and 8 MB)
PENDING_MAX = 5000  # events kept while the server cannot be reached
MAX_SPLIT_REQUESTS = 64  # requests one report may take when the server refuses a batch
LOST_CONTACT_S = protocol.LOST_CONTACT_S  # no server this long: the worker is stopped here
UNREACHABLE = "the agent could not reach the server for %d s and stopped the worker"
ALIVE = ".alive"  # in the job directory, touched while its agent runs (see remote/alive.py)
GPU_LOCK_HOLD_S = 120  # the GPU choice is held until the worker speaks, at most this long
# The schedulers an agent can hand a run's worker to, by the name in the run's settings (the
# server's slurm backend names one; without one the agent runs the worker itself).
SCHEDULERS = {slurm_job.SlurmSettings.name: slurm_job.SlurmSettings}
CODE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))  # the folder that holds potato/


class AgentRun:
    """One run on this host. ``run()`` goes through the steps; each can be called alone."""

    def __init__(self, client, run_id, workdir, python, watch=None, code_dir=None,
                 overrides=None, keep_bundle=True):
        self.client = client
        self.run_id = run_id
        self.workdir = workdir
        self.python = python
        self.watch = watch
        self.code_dir = code_dir or CODE_DIR
        self.overrides = overrides
        self.keep_bundle = keep_bundle
        self.keep_job = False  # --keep: the job directory stays with its bundle
        self.paths = None
        self.info = {}
        self.settings = RunSettings()
        self.env = {}
        self.grace = 20.0
        self.pending = []
        self.lock = threading.Lock()
        self.events = 0
        self.cancelled = False
        self.lost = False
        self.unreachable = False  # no server for LOST_CONTACT_S: not a cancel, an error
        self.last_report = 0.0
        self.failing_since = None
        self.result = None
        self.artifacts = []

    # -- the steps ---------------------------------------------------------------------------
    def run(self):
        """Every step in order; returns the agent's exit code. While it runs, the job
        directory's ``.alive`` is touched every ALIVE_S: a directory whose ``.alive`` went
        stale (its agent was killed) is removed by the next probe of the host."""
        name = os.path.basename(self.workdir)
        alive = Alive(os.path.join(self.workdir, ALIVE), media_cache.pin_path(
            self.media_cache, name) if media_cache.valid_pin(name) else None)
        try:
            return self._steps()
        finally:
            alive.stop()

    def _steps(self):
        self.download()
        self.prepare()
        try:
            self.media()
            self.result = self.execute()
        except (slurm_job.SlurmError, gpus_mod.GpuError, media_fetch.MediaFailed) as e:
            self.report_events(force=True)
            self.clean_up("error")
            send_result(self.client, self.run_id, {"status": "error", "error": str(e),
                                                   "exit_code": None,
                                                   "workdir": self.paths.root})
            return protocol.EXIT_OK
        self.report_events(force=True)
        if self.lost:  # the server is gone or closed the session: nothing will fetch the files
            self.clean_up("cancelled")
            return protocol.AGENT_LOST
        status, error = self.upload()
        self.clean_up(status)
        self.report(status, error)
        return protocol.EXIT_OK

    def download(self):
        """The run's spec and settings, then its bundle (resumed, checksum-verified)."""
        # patient, as every step after: the server may be restarting as the run begins
        _, self.info, _ = patiently(self.client, "fetch the run's spec", lambda: (
            self.client.request("GET", "/agent/v1/runs/%s" % self.run_id)))
        backend = dict(self.info.get("backend") or {})
        backend.update(self.overrides or {})
        self.settings = RunSettings.from_dict(backend, SCHEDULERS)
        self.grace = float(self.info.get("grace_seconds", 20))
        self.paths = RunPaths(self.workdir).create()
        set_log_file(self.paths.agent_log)
        log("run %s: job directory %s" % (self.run_id, self.paths.root))
        bundle = self.info["bundle"]
        download_bundle(self.client, self.run_id, self.paths.bundle_archive, bundle["sha256"],
                        bundle["bytes"])

    def prepare(self):
        """Unpack the bundle, write the spec, make the worker's environment."""
        bundle_mod.safe_extract(self.paths.bundle_archive, self.paths.bundle)
        spec = dict(self.info["spec"])
        spec.update(RunPaths.SPEC_NAMES)
        spec["media_cache"] = self.media_cache  # where path_for finds the run's media files
        write_json(self.paths.spec, spec)
        self.env = protocol.worker_env(os.environ, self.code_dir, self.settings.num_threads,
                                       self.settings.env)

    @property
    def media_cache(self):
        """The host's media cache, beside the jobs folder: ``remote_dir/media``."""
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(self.workdir))),
                            "media")

    def media(self):
        """The run's media files in the host's cache (pinned for the run; remote/media_fetch.py
        downloads those missing), with progress on the run's step line."""
        media_fetch.sync(self.client, self.run_id, self.media_cache, self.workdir,
                         self.paths.bundle_items, self.settings, self.status)

    def status(self, message):
        self.on_event(protocol.make("status", message=message))
        self.report_events(force=True)

    def execute(self):
        """Run the worker here (after taking a GPU), or submit it to SLURM; a WorkerExit."""
        s = self.settings
        self.on_event(protocol.make("log", level="info", message="agent on %s: Python %s (%s)"
                                    % (platform.node(), platform.python_version(),
                                       self.python)))
        if s.scheduler is not None:  # the scheduler runs the worker (a SLURM job)
            return s.scheduler.run(slurm_job.Job(
                s, self.paths.root, self.code_dir, self.run_id, self.env, self.on_event, log,
                self.should_cancel, grace_seconds=self.grace, on_tick=self.report_events))
        gpu_lock = None
        if s.gpus == "none":
            self.env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU, as asked, even on a GPU host
        else:
            gpu_lock, chosen, message = gpus_mod.take(
                s, self.python, os.path.dirname(os.path.dirname(self.paths.root)), self.env)
            self.on_event(protocol.make("log", level="info", message=message))
            if chosen is not None:
                self.env["CUDA_VISIBLE_DEVICES"] = chosen
        started, before = time.monotonic(), self.events

        def tick():
            # Hold the GPU lock until the worker speaks (it has started), at most two minutes.
            if gpu_lock is not None and gpu_lock.fd is not None and (
                    self.events > before or time.monotonic() - started > GPU_LOCK_HOLD_S):
                gpu_lock.release()
            self.report_events()

        argv = protocol.worker_argv(self.python, self.paths.spec)
        try:
            how = supervise.Supervision(should_cancel=self.should_cancel,
                                        grace_seconds=self.grace, on_tick=tick)
            return supervise.run_worker(argv, self.env, self.paths.stderr, self.on_event, how,
                                        cwd=self.paths.root)
        finally:
            if gpu_lock is not None:
                gpu_lock.release()

    def upload(self):
        """(status, error): predictions always, model files when the backend fetches them."""
        status, error = supervise.explain(self.result)
        reason = getattr(self.result, "reason_message", None)
        if reason and self.result.stopped != "cancelled":
            status, error = "error", reason  # the scheduler ended the job
        if self.unreachable and status != "success":  # we stopped it: the server never asked
            status, error = "error", UNREACHABLE % LOST_CONTACT_S
        self.artifacts = self._list_artifacts()
        if status != "success":
            return status, error
        try:
            with open(self.paths.predictions, "rb") as f:
                size = os.fstat(f.fileno()).st_size

                def put():
                    f.seek(0)
                    self.client.request("PUT", "/agent/v1/runs/%s/predictions" % self.run_id,
                                        body=f, headers={"Content-Length": str(size),
                                                         "Content-Type": "application/x-ndjson"})

                patiently(self.client, "upload the predictions", put)
        except ServerError as e:
            return "error", "the server refused the predictions: %s" % e
        except OSError as e:
            return "error", "the predictions could not be uploaded: %s" % e
        if self.settings.fetch_artifacts:
            try:
                self._upload_artifacts()
            except (ServerError, upload_mod.UploadError, OSError,
                    http.client.HTTPException) as e:
                message = ("copying the model files back failed (%s); the files not copied "
                           "stay on %s in %s" % (e, platform.node(), self.paths.artifacts))
                log(message)
                self.on_event(protocol.make("log", level="warning", message=message))
        return status, error

    def clean_up(self, status):
        """Remove the bundle unless kept; the whole job directory unless ``keep_remote``, the
        agent's ``--keep`` (``keep_job``) or model files stay here (a success whose files
        were not all copied back): a failed or cancelled run leaves none of its training data
        on the host. The run's media pin goes (its files stay in the cache for the next run)."""
        media_cache.unpin(self.media_cache, os.path.basename(self.workdir))
        if not self.keep_bundle:
            shutil.rmtree(self.paths.bundle, ignore_errors=True)
            if os.path.exists(self.paths.bundle_archive):
                os.unlink(self.paths.bundle_archive)
        s = self.settings
        fetched_all = all(a.get("fetched") for a in self.artifacts)
        if s.keep_remote or self.keep_job or (
                status == "success" and not (fetched_all and s.fetch_artifacts)):
            try:  # kept on purpose: never swept as a killed run's leftovers
                os.unlink(os.path.join(self.paths.root, ALIVE))
            except OSError:
                pass
            return
        shutil.rmtree(self.paths.root, ignore_errors=True)
        log("removed the job directory %s" % self.paths.root)

    def report(self, status, error):
        """The run's result, with where its files are (events still unsent go first)."""
        if self.pending:
            self.report_events(force=True)
        send_result(self.client, self.run_id, {
            "status": status, "error": error, "exit_code": self.result.returncode,
            "stderr_tail": self.result.stderr_tail[-4000:], "artifacts": self.artifacts,
            "workdir": self.paths.root, "host": platform.node(),
            "python": platform.python_version()})

    # -- events, cancel, liveness ----------------------------------------------------------------
    def on_event(self, event):
        with self.lock:
            self.pending.append(event)
            self.events += 1

    def report_events(self, force=False):
        """Send the pending events (the heartbeat); the reply may carry a cancel."""
        now = time.monotonic()
        if not force and now - self.last_report < REPORT_S:
            return
        with self.lock:
            batch, self.pending = self.pending[:REPORT_MAX_EVENTS], \
                self.pending[REPORT_MAX_EVENTS:]
        try:
            self._send(batch, [MAX_SPLIT_REQUESTS])
            self.failing_since = None
        except ServerError as e:
            if e.status in (401, 403, 404, 410):
                log("the server no longer accepts reports for this run (%s); stopping" % e)
                self.cancelled = True
            self._requeue(batch)
        except (OSError, http.client.HTTPException) as e:
            self._requeue(batch)
            if self.failing_since is None:
                self.failing_since = now
                log("cannot reach the server (%s); will retry" % e)
            elif now - self.failing_since > LOST_CONTACT_S and not self.unreachable:
                log("the server has been unreachable for %d s: stopping the worker (the run "
                    "ends as an error, not a cancel)" % LOST_CONTACT_S)
                self.unreachable = True
        self.last_report = now

    def _send(self, batch, budget):
        """POST a batch of events. A batch the server refuses as malformed or too large (400,
        413) is split in halves and each half sent, so one bad event cannot block the rest;
        events refused on their own (or past ``budget`` requests) are dropped, with a note."""
        budget[0] -= 1
        try:
            _, reply, _ = self.client.request("POST", "/agent/v1/runs/%s/events" % self.run_id,
                                              {"events": batch})
        except ServerError as e:
            if e.status not in (400, 413):
                raise
            if len(batch) == 1 or budget[0] <= 1:
                log("the server refused %d event(s) (%s); dropped them" % (len(batch), e))
                return
            half = len(batch) // 2
            self._send(batch[:half], budget)
            self._send(batch[half:], budget)
            return
        if reply and reply.get("cancel") and not self.cancelled:
            log("the server cancelled the run; stopping the worker")
            self.cancelled = True

    def _requeue(self, batch):
        """Put unsent events back, bounded: while the server cannot be reached, only the
        newest progress event is kept, and past PENDING_MAX the oldest events are dropped."""
        with self.lock:
            self.pending[:0] = batch
            if len(self.pending) <= PENDING_MAX:
                return
            progress = [e for e in self.pending if e.get("type") == "progress"]
            kept = [e for e in self.pending if e.get("type") != "progress"] + progress[-1:]
            dropped = max(0, len(kept) - PENDING_MAX)
            self.pending = kept[dropped:]
        if dropped:
            log("the server cannot take the run's events yet: dropped the %d oldest" % dropped)

    def should_cancel(self):
        if self.watch is not None and self.watch.closed.is_set() and not self.lost:
            self.lost = True
            log("the session that started the agent is gone (standard input closed, or a "
                "hangup): stopping the worker")
        return self.cancelled or self.lost or self.unreachable

    # -- files -------------------------------------------------------------------------------------
    def _list_artifacts(self):
        out = []
        for root, _, files in os.walk(self.paths.artifacts):
            for name in files:
                p = os.path.join(root, name)
                if os.path.islink(p):  # a trainer's link is not a model file: never followed
                    continue
                out.append({"path": os.path.relpath(p, self.paths.artifacts),
                            "bytes": os.path.getsize(p)})
        return out

    def _upload_artifacts(self):
        """Send the model files (resumed, verified: upload.py), reporting 'copying the model
        back: X/Y MB'; files over max_artifact_mb stay here, named in a warning."""
        def status(message):
            self.on_event(protocol.make("status", message=message))
            self.report_events(force=True)

        def warn(message):
            self.on_event(protocol.make("log", level="warning", message=message))

        upload_mod.upload_all(self.client, self.run_id, self.paths.artifacts, self.artifacts,
                              self.settings.max_artifact_mb * (1 << 20), status, warn,
                              platform.node())


def run(client, run_id, workdir, python, watch=None, code_dir=None, overrides=None,
        keep_bundle=True, keep_job=False):
    """Run one run to its end; returns the agent's exit code. ``keep_job``: the job
    directory stays, bundle included, however the run ends (``potato training agent
    --keep``)."""
    agent = AgentRun(client, run_id, workdir, python, watch, code_dir, overrides,
                     keep_bundle or keep_job)
    agent.keep_job = keep_job
    return agent.run()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m potato.training.agent",
                                description="Run one Potato training run for the server. The "
                                            "run token is read from the first line of stdin.")
    p.add_argument("--socket", help="unix socket that reaches the server (ssh -R)")
    p.add_argument("--server", help="the server's URL, when there is no socket")
    p.add_argument("--run", required=True, help="the run id")
    p.add_argument("--workdir", required=True, help="the job directory for this run")
    p.add_argument("--python", default=sys.executable, help="interpreter for the worker")
    args = p.parse_args(argv)
    if not (args.socket or args.server):
        p.error("give --socket or --server")
    os.umask(0o077)  # the job directory holds training data: this account's only
    token = sys.stdin.readline().strip()
    if not token:
        log("no run token on standard input")
        return protocol.AGENT_USAGE
    watch = StdinWatch(sys.stdin)
    on_hangup(watch)
    client = Client(token, socket_path=args.socket, server=args.server)
    try:
        return run(client, args.run, os.path.expanduser(args.workdir), args.python, watch)
    except ServerError as e:
        log("the server refused the agent: %s" % e)
        return protocol.AGENT_REJECTED
    except Exception as e:  # report what we can, then exit non-zero
        log("the agent failed: %s: %s" % (type(e).__name__, e))
        try:
            send_result(client, args.run, {"status": "error", "exit_code": None,
                                           "error": "the agent failed: %s" % e})
        except ServerError as e2:
            log("could not report the failure either: %s" % e2)
        return 1
    finally:
        if args.socket:  # the forwarded socket is ours: leave nothing behind in /tmp
            try:
                os.unlink(args.socket)
            except FileNotFoundError:
                pass  # sshd removed it with the session: nothing failed
            except OSError as e:
                log("could not remove %s: %s" % (args.socket, e))
