"""The agent backend: a machine the server cannot reach runs ``potato training agent``, which
polls the server, claims the backend's queued runs and runs them (see docs/backends/agent.md).

A run stays ``queued`` until an agent of its backend claims it. The claim gives the agent a
fresh run token; from there the run follows the same agent protocol as the ssh backend, and
the agent's reports are the lease that keeps the run alive.
"""

import os
import shlex
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

from potato.config.backends import boolean, heartbeat_timeout, key, number
from potato.training.backends.base import Outcome, RemoteState, RunContext, TrainingBackend
from potato.training.backends.wait import outcome_of, wait_for_agent
from potato.training.remote import bundle as bundle_mod
from potato.training.remote.paths import read_json
from potato.training.remote.protocol import LOST_CONTACT_S, VERSION, RunSettings
from potato.training.core.runs import Run

CLAIM_WAIT_S = 60  # how long a claim waits for the server to prepare the run
AGENT_POLL_S = 5.0  # the agent's default --poll-interval (agents before 2.15 do not say theirs)
POLL_GRACE_S = 10.0  # a claim's own round trip: silence shorter than interval + this is normal


def agent_wait_step(backend: str) -> str:
    """What a queued run of an agent backend is waiting for, and what to do about it."""
    return ("waiting for an agent of backend %s to poll the server: start potato training agent "
            "--backend %s on the training machine (Check on the Training page shows its token)"
            % (backend, backend))


def silence_words(seconds: float) -> str:
    """How long no agent has polled, in words that change at most every 10 s."""
    if seconds < 120:
        return "%d s" % (int(seconds) // 10 * 10)
    if seconds < 7200:
        return "%d min" % (seconds // 60)
    return "%d h" % (seconds // 3600)


def version_mismatch(agent_version) -> str:
    """A sentence when the agent runs another Potato than the server, else ''."""
    if not agent_version or agent_version == VERSION:
        return ""
    return ("the agent runs potato %s and this server %s; install the server's version on the "
            "training machine (potato training register prints the pip install line)"
            % (agent_version, VERSION))


def _kept_result(ctx: RunContext) -> Optional[Dict[str, Any]]:
    """The agent's result as the previous server saved it (agent_routes), or None."""
    try:
        kept = read_json(ctx.paths.result)
    except (OSError, ValueError):
        return None
    return kept if isinstance(kept, dict) else None


@dataclass
class AgentOptions:
    heartbeat_timeout_s: float = key(heartbeat_timeout, 120)
    queue_timeout_s: Optional[float] = key(number(positive=True))
    fetch_artifacts: bool = key(boolean, True)
    keep_remote: bool = key(boolean, False)
    max_artifact_mb: float = key(number(minimum=0), 2048)


class AgentBackend(TrainingBackend):
    type = "agent"
    Options = AgentOptions
    article = "an"
    python_fix = ("or start the agent with --python pointing at one that has them (default: "
                  "the agent's own)")
    polled_by_agents = True
    # The agent polls the server and waits out an outage shorter than LOST_CONTACT_S, so its
    # run carries on through a server restart: left running when the server stops, and
    # re-attached at the next start.
    survives_restart = True

    @property
    def queue_timeout_s(self):
        return self.options.queue_timeout_s

    def _config(self) -> str:
        """The config file as a command line names it (the server knows its own)."""
        return shlex.quote(self.cfg.path) if self.cfg.path else "CONFIG"

    def _server(self) -> str:
        return shlex.quote(self.cfg.server_url) if self.cfg.server_url else "URL"

    def refusal(self):
        if self.tokens is not None and self.tokens.record(self.name) is None:
            return ("Backend %s is an agent backend with no token issued, so no agent can claim "
                    "it: run potato training register %s %s and start the agent first."
                    % (self.name, shlex.quote(self.name), self._config()))
        return None

    queue_timeout_step = "no agent"

    def step_worth_logging(self, old, new):
        return ("(no agent" in old) != ("(no agent" in new)  # when the silence begins or ends

    def queue_timeout_message(self, limit):
        return ("No agent of backend %s claimed the run within %g s. Start `potato training "
                "agent --server %s --backend %s` on the training machine (potato training "
                "register %s %s gives its token)." % (self.name, limit, self._server(),
                                                      shlex.quote(self.name),
                                                      shlex.quote(self.name), self._config()))

    def settings(self) -> RunSettings:
        # Model files come back as an ssh run's do (fetch_artifacts, max_artifact_mb); those
        # that stay on the agent's machine are named in the run log, and the run records where.
        b = self.options
        return RunSettings(gpus="auto", fetch_artifacts=b.fetch_artifacts,
                           keep_remote=b.keep_remote, max_artifact_mb=b.max_artifact_mb)

    def execute(self, ctx: RunContext) -> Outcome:
        claim = ctx.claim  # made by Manager.claim
        ctx.bundle_sha256 = bundle_mod.pack(ctx.paths.bundle, ctx.paths.bundle_archive)
        remote = RemoteState(claim.token, self.settings())
        remote.seen()  # the claim itself was the agent's first word
        ctx.remote = remote
        agent = claim.agent or {}
        where = agent.get("host") or "the agent's machine"
        remote.host = where  # named in a stalled copy's sentence
        # The token's hash goes on the run's record once the claim is handed out
        # (Manager.claim): a restarted server re-attaches the run, and the agent's next report
        # with its token finds it again. A run whose claim never reached its agent is queued
        # again at the next start (restarts.recover).
        ctx.save(remote_host=where)
        ctx.log("claimed by the agent on %s (potato %s, Python %s)" % (
            where, agent.get("version"), agent.get("python")))
        mismatch = version_mismatch(agent.get("version"))
        if mismatch:
            ctx.log("warning: " + mismatch)
        ctx.set_step("waiting for the agent on %s" % where)
        claim.ready.set()
        return self._follow(ctx, remote, where)

    def reattach(self, ctx: RunContext, run: Run) -> bool:
        if not run.remote_token or not os.path.exists(ctx.paths.bundle_archive):
            return False
        remote = RemoteState(run.remote_token, self.settings(), hashed=True)
        remote.host = run.remote_host or remote.host
        remote.last_seen = time.monotonic()  # the agent has heartbeat_timeout_s from now
        ctx.remote = remote
        ctx.bundle_sha256 = bundle_mod.file_sha256(ctx.paths.bundle_archive)
        kept = _kept_result(ctx)
        if kept is not None:  # the agent's result came before the restart: ingest it now
            remote.result = kept
            remote.result_ready.set()
            ctx.log("the server restarted after the agent's result (%s): finishing the run "
                    "from it" % kept.get("status"))
        return True

    def resume(self, ctx: RunContext) -> Outcome:
        where = ctx.run.remote_host or "the agent's machine"
        ran_for = max(0.0, time.time() - (ctx.run.started_at or time.time()))
        return self._follow(ctx, ctx.remote, where, started=time.monotonic() - ran_for)

    def _follow(self, ctx: RunContext, remote: RemoteState, where: str,
                started: Optional[float] = None) -> Outcome:
        outcome = wait_for_agent(ctx, remote, self.name, where, self.options.heartbeat_timeout_s,
                                 started=started)
        if ctx.shutdown.is_set() and remote.result is None:
            ctx.log("the server is stopping: the run stays with the agent on %s, which keeps "
                    "training; the server picks it up again when it starts (the agent waits up "
                    "to %d s for it, then stops the worker; the restarted server waits %g s for "
                    "the agent)" % (where, LOST_CONTACT_S, self.options.heartbeat_timeout_s))
            return Outcome("detached")
        if outcome is not None:
            return outcome
        result = remote.result or {}
        uri = ctx.paths.artifacts
        stayed = [a for a in result.get("artifacts") or [] if not a.get("fetched")]
        if result.get("workdir") and (stayed or not self.options.fetch_artifacts
                                      or remote.copy_error):
            uri = "agent://%s%s/artifacts" % (result.get("host") or where, result["workdir"])
        return outcome_of(ctx, remote, self.name, uri)

    def silence(self, now: Optional[float] = None) -> str:
        """"no agent has polled for N s: a run will wait until one does" when no agent of this
        backend has polled for longer than its poll interval (or never has); "" otherwise."""
        record = self.tokens.record(self.name) if self.tokens is not None else None
        if record is None:
            return ""
        if not record.get("last_seen"):
            return "no agent has polled yet: a run will wait until one does"
        age = (now or time.time()) - record["last_seen"]
        interval = record.get("poll_interval_s")
        interval = AGENT_POLL_S if interval is None else interval
        if age <= interval + POLL_GRACE_S:
            return ""
        return "no agent has polled for %s: a run will wait until one does" % silence_words(age)

    def queued_step(self, busy: bool) -> Optional[str]:
        """The step of this backend's queued run: what it waits for and, when no run is active
        (``busy`` false) and the agent is silent, for how long no agent has polled."""
        silent = "" if busy else self.silence()
        step = agent_wait_step(self.name)
        return step if not silent else "%s (%s)" % (step, silent)

    def _running_run(self) -> Optional[str]:
        try:
            row = self.tokens.store.conn().execute(
                "SELECT run_id FROM runs WHERE backend=? AND status='running' LIMIT 1",
                (self.name,)).fetchone()
        except sqlite3.OperationalError:  # a store without a runs table yet
            return None
        return row[0] if row else None

    def check(self) -> Dict[str, Any]:
        report = self.report()
        record = self.tokens.record(self.name) if self.tokens is not None else None
        if record is None:
            report["lines"].append("no token issued yet: run potato training register %s %s "
                                   "on the server" % (shlex.quote(self.name),
                                                      shlex.quote(self.cfg.path or "CONFIG")))
            return report

        def when(t):
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "never"

        report["token"] = {k: record.get(k) for k in ("issued_at", "last_seen", "agent_host",
                                                      "agent_version")}
        report["lines"].append("token issued %s" % when(record["issued_at"]))
        if record.get("last_seen"):
            report["lines"].append("last seen %s, from %s (potato %s)" % (
                when(record["last_seen"]), record.get("agent_host"), record.get("agent_version")))
            mismatch = version_mismatch(record.get("agent_version"))
            if mismatch:
                report["lines"].append("warning: " + mismatch)
                report["version_mismatch"] = True
        else:
            report["lines"].append("no agent has connected with this token yet")
        running = self._running_run()
        silent = self.silence()
        if running:
            report["lines"].append("the agent is running run %s; it polls again when the run "
                                   "ends" % running)
        elif silent:
            report["lines"].append("%s. Start potato training agent --server URL --backend %s "
                                   "on the training machine" % (silent, self.name))
            return report
        report["ok"] = True
        return report
