"""The training queue: one active run across all backends, FIFO, persisted in SQLite.

``Manager.submit`` validates a request and records a ``queued`` run; a background thread
starts the oldest queued run when none is active, builds its bundle and spec, hands it to its
backend, then ingests the predictions (held-out score, write-back) and records the outcome.
Only one process may own a project's queue at a time (``queue_lock.QueueLock``).
"""

import logging
import os
import secrets
import threading
import time
from typing import Any, Dict, List, Optional

from potato.config.settings import Config
from potato.project.store import Store
from potato.training.backends import Outcome, RunContext, make_backends
from potato.training.backends.base import Claim
from potato.training.core import fit, runlog
from potato.training.core.runs import RequestError, Run, RunStore
from potato.training.core.tokens import AgentTokens
from potato.training.exchange import ingest
from potato.training.exchange.intake import RunEvents
from potato.project import queue_order
from potato.training.lifecycle import admission, autoretrain, in_use, prepare, restarts, retention
from potato.training.remote import bundle as bundle_mod, proc, trainers
from potato.training.remote.paths import RunPaths
from potato.training.reports import report, run_texts

log = logging.getLogger("potato.training")

DISABLED = "training is disabled (model_training.enabled: false)"


class Manager:
    def __init__(self, cfg: Config, store: Store, poll_s: float = 0.5, reattach: bool = True):
        self.cfg = cfg
        self.reattach = reattach  # restarts.recover: only potato start re-attaches agent runs
        self.store = store
        self.runs = RunStore(store)
        self.poll_s = poll_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._active: Dict[str, RunContext] = {}
        self._lock = threading.Lock()
        self.tokens = AgentTokens(store)
        self.holds = retention.Holds()  # runs whose model files are being read
        self.backends = make_backends(cfg, self.tokens)
        self._hidden: Optional[str] = cfg.model_training.publish.token_env
        proc.hide(self._hidden)  # the publish token: for the server only, never for a child
        self._claims: Dict[str, Claim] = {}  # run_id -> claim, until it executes
        self._resumed: List[RunContext] = []  # re-attached at start, followed first
        mt = self.cfg.model_training
        self.auto_status = {"enabled": autoretrain.enabled(self.cfg),
                            "reason": DISABLED if not mt.enabled
                            else "not checked yet" if autoretrain.enabled(self.cfg)
                            else "auto_retrain.enabled is false"}

    # -- requests ------------------------------------------------------------------------------
    def resolve_request(self, trainer: Any, schemas: Any, backend: Optional[str],
                        params: Any) -> Dict[str, Any]:
        """Check a request; returns the normalised fields or raises RequestError."""
        mt = self.cfg.model_training
        if not mt.enabled:
            raise RequestError(409, DISABLED)
        backend = backend or mt.backend
        if not isinstance(backend, str) or backend not in mt.backends:
            raise admission.unknown_backend(backend, mt.backends)
        target = self.backends.get(backend)
        if target is None:
            raise RequestError(409, "Backend %s is of type %s, which this version of Potato "
                                    "cannot run yet; use local." % (backend,
                                                                    mt.backends[backend].type))
        info = trainers.get(trainer) if isinstance(trainer, str) else None
        if info is None:
            raise RequestError(400, trainers.unknown_trainer(trainer))
        if isinstance(schemas, str):
            schemas = [s.strip() for s in schemas.split(",") if s.strip()]
        if not isinstance(schemas, list) or not schemas or not all(
                isinstance(s, str) for s in schemas):
            raise RequestError(400, "schemas must name at least one annotation scheme (%s)."
                               % ", ".join(s.name for s in self.cfg.schemes))
        for s in schemas:
            scheme = self.cfg.scheme(s)
            if scheme is None:
                raise RequestError(400, "Unknown scheme %r. Schemes: %s." % (
                    s, ", ".join(x.name for x in self.cfg.schemes)))
            if scheme.annotation_type not in info.schema_types:
                raise RequestError(400, trainers.cannot_train(info, scheme.annotation_type, s))
        fit.refuse(info, self.cfg, self.store)  # e.g. a text model on image items
        if info.max_schemas and len(schemas) > info.max_schemas:
            raise RequestError(400, "Trainer %s trains one scheme per run; start one run per "
                                    "scheme." % info.name)
        if info.local_only and not target.on_server:
            raise RequestError(400, "Trainer %s reads the server's store, so it runs only on "
                                    "local, not on %s (%s)." % (info.name, backend, target.type))
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RequestError(400, "params must be an object of trainer params.")
        try:
            resolved = trainers.resolve_params(info, params)
        except trainers.ParamError as e:
            raise RequestError(400, trainers.sentence("Bad params: %s" % e))
        refusal = target.refusal()
        if refusal:
            raise RequestError(409, refusal)
        reason = prepare.refusal(self.cfg, self.store, schemas)
        if reason:
            raise RequestError(400, reason)
        return {"trainer": info.name, "schemas": schemas, "backend": backend, "params": resolved}

    def submit(self, trainer, schemas, backend=None, params=None, auto=False) -> Run:
        req = self.resolve_request(trainer, schemas, backend, params)
        run, step = admission.admit(self, req, auto)  # under the lock a reload swaps under
        self._log(run.run_id, "queued: trainer %s on %s, backend %s; params: %s" % (
            run.trainer, ", ".join(run.schemas), run.backend, run_texts.params_words(run.params)))
        if step:
            self.runs.update(run.run_id, step=step)
            self._log(run.run_id, step)
            run = self.runs.get(run.run_id)
        self._wake.set()
        return run

    def use(self, run_id: str) -> List[str]:
        """Put a successful run in use for its write-back schemes (``in_use.use``)."""
        return in_use.use(self, run_id)

    def cancel(self, run_id: str) -> Optional[Run]:
        run = self.runs.get(run_id)
        if run is None:
            return None
        if run.status == "queued":
            said = run_texts.CANCELLED_QUEUED
            if self.runs.transition(run_id, "queued", "cancelled", error=said, step=said,
                                    finished_at=time.time()):
                self._log(run_id, "cancelled while queued: it never started")
                return self.runs.get(run_id)
            run = self.runs.get(run_id)  # it started meanwhile: cancel it as a running run
        if run.status == "running":
            self.runs.update(run_id, cancel_requested=1, step="cancelling")
            self._log(run_id, "cancel requested")
            with self._lock:
                ctx = self._active.get(run_id)
            if ctx is not None:
                ctx.cancel.set()
        return self.runs.get(run_id)

    # -- agent backends ----------------------------------------------------------------------
    def _startable(self, run: Run) -> bool:
        """Runs of agent backends start only once an agent has claimed them; nothing starts
        while training is disabled (runs queued before stay queued)."""
        backend = self.backends.get(run.backend)
        if not self.cfg.model_training.enabled or backend is None:
            return False  # a backend gone from the config: recover() ended its runs
        return not backend.polled_by_agents or run.run_id in self._claims

    def claim(self, backend: str, agent: Dict[str, Any], timeout: float = 60):
        """(run_id, run token) of the run an agent of ``backend`` may take now, or None.

        A run is given only when no run is active and it is the next one to start; the call
        waits (up to ``timeout``) until the server has prepared it.
        """
        with self._lock:
            if not self.cfg.model_training.enabled or self.stopping:
                return None
            if self._claims or self._active or self.runs.with_status("running"):
                return None
            nxt = next((r for r in self.runs.with_status("queued")
                        if self._startable(r) or r.backend == backend), None)
            if nxt is None or nxt.backend != backend:
                return None
            claim = Claim(secrets.token_urlsafe(32), agent)
            self._claims[nxt.run_id] = claim
        self._wake.set()
        claim.ready.wait(timeout)
        ctx = self.active_context(nxt.run_id)
        if ctx is None or ctx.remote is None or self.stopping:  # stopping: never handed out,
            with self._lock:  # so the next start queues the run again (no token recorded)
                self._claims.pop(nxt.run_id, None)
            return None
        self.runs.update(nxt.run_id, remote_token=ctx.remote.token_hash)  # handed out
        return nxt.run_id, claim.token

    def _queue_timeouts(self) -> None:
        """Queued runs' steps kept current (an agent backend says how long no agent has
        polled), and runs that waited past queue_timeout_s ended."""
        now = time.time()
        busy = bool(self._active or self.runs.with_status("running"))
        for run in self.runs.with_status("queued"):
            b = self.backends.get(run.backend)
            limit = b.queue_timeout_s if b is not None else None
            if b is not None and run.run_id not in self._claims:
                step = b.queued_step(busy)
                if step and step != run.step and self.runs.update(run.run_id, step=step) \
                        and b.step_worth_logging(run.step, step):
                    self._log(run.run_id, step)
            if limit and now - run.created_at > limit and run.run_id not in self._claims:
                message = b.queue_timeout_message(limit)
                if self.runs.finish(run.run_id, "error", message,
                                    step=b.queue_timeout_step):
                    self._log(run.run_id, "error: " + message)

    def active_context(self, run_id: str) -> Optional[RunContext]:
        with self._lock:
            return self._active.get(run_id)

    # -- the loop ------------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        """Nothing starts or is claimed; agents hear 503 (report again), not 410 (run gone)."""
        return self._stop.is_set()

    def start(self) -> None:
        self.recover()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="potato-training")
        self._thread.start()

    def listening_on(self, port: int) -> None:
        """The server's port, for backends that forward their agents to it."""
        for backend in self.backends.values():
            backend.listening_on(port)

    def close_backends(self) -> None:
        if self._hidden is not None:
            proc.unhide(self._hidden)
            self._hidden = None
        for backend in self.backends.values():
            backend.close()

    def stop(self, timeout: float = 5) -> None:
        """Stop within about a second. A shutdown is not a cancel: each active run ends as its
        backend says (restarts.py); a waiting claim hears at once."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            for ctx in self._active.values():
                ctx.shutdown.set()
            for claim in self._claims.values():
                claim.ready.set()
        if self._thread is not None:
            self._thread.join(timeout)
            with self._lock:
                busy = list(self._active)
            if self._thread.is_alive() and busy:  # an ingest takes longer than the stop may
                log.warning("stopping while run(s) %s are being finished (predictions written "
                            "back); an agent run is finished again at the next start, from "
                            "its saved result", ", ".join(busy))
        self.close_backends()

    def recover(self) -> None:
        """Runs the previous server left ``running``: re-attached (active from here on, so an
        agent's next report finds its run) or ended with the reason (restarts.recover)."""
        for ctx in restarts.recover(self):
            with self._lock:
                self._active[ctx.run_id] = ctx
            self._resumed.append(ctx)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self._resumed:
                    ctx = self._resumed.pop(0)
                    self._follow(ctx, self.backends[ctx.run.backend].resume)
                    continue
                self._auto_retrain_tick()
                self._queue_timeouts()
                startable = [r for r in self.runs.with_status("queued") if self._startable(r)]
                if startable and not self.runs.with_status("running"):
                    self._execute(startable[0])
                    continue
            except Exception:  # keep the queue alive; the detail goes to the server log
                log.exception("training queue error")
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def paths(self, run_id: str) -> RunPaths:
        return RunPaths(os.path.join(self.cfg.runs_dir, run_id))

    def _log(self, run_id: str, message: str) -> None:
        runlog.append(self.paths(run_id).log, message)

    run_log = _log  # a line in the run's log, for the modules that act on runs

    def context(self, run: Run, claim: Optional[Claim] = None) -> RunContext:
        """A run's context: its events, step, log and record; shut down if we are stopping."""
        run_id, paths = run.run_id, self.paths(run.run_id)

        def set_step(text: str) -> None:
            self.runs.update(run_id, step=text, heartbeat_at=time.time())
            self._log(run_id, text)

        on_event = RunEvents(self.runs, lambda m: self._log(run_id, m), run_id, paths, set_step,
                             self.backends[run.backend].ran_on)
        ctx = RunContext(run, paths, self.cfg, on_event, set_step,
                         lambda m: self._log(run_id, m), claim=claim)
        ctx.save = lambda **fields: self.runs.update(run_id, **fields)
        if self._stop.is_set():
            ctx.shutdown.set()
        return ctx

    def _execute(self, run: Run) -> None:
        run_id = run.run_id
        if self._stop.is_set() or not self.runs.transition(
                run_id, "queued", "running", started_at=time.time(),
                step="building the bundle", ran_on=run.backend):
            with self._lock:  # cancelled since it was picked, or stopping: nothing starts
                claim = self._claims.pop(run_id, None)
            if claim is not None:
                claim.ready.set()
            return
        backend = self.backends[run.backend]
        with self._lock:  # the claim leaves the claims as the run becomes active, atomically
            ctx = self.context(run, claim=self._claims.pop(run_id, None))
            self._active[run_id] = ctx
        if self.runs.get(run_id).cancel_requested:
            ctx.cancel.set()
        self._follow(ctx, lambda c: self._prepare(run, c.paths, c.set_step) or backend.execute(c))

    def _follow(self, ctx: RunContext, start) -> None:
        """``start(ctx)`` (a backend's execute or resume), then the run's ending, recorded."""
        run, run_id, paths, on_event = ctx.run, ctx.run_id, ctx.paths, ctx.on_event
        backend = self.backends[run.backend]
        try:
            outcome = start(ctx)
            if outcome.status == "detached":  # it carries on without us (survives_restart)
                self.runs.update(run_id, step="waiting for the server to start again")
                return
            fields = {"ran_on": (backend.ran_on(on_event.placement)
                                 if on_event.placement else outcome.ran_on or run.backend),
                      "artifact_uri": outcome.artifact_uri}
            if outcome.ingest:
                fields.update(self._ingest(run, paths))
                for warning in fields.pop("warnings", []):
                    on_event.warn(warning, server=True)
                if "error" in fields:
                    outcome = Outcome("error", fields.pop("error"))
            on_event.flush_warnings()
            if ctx.cancel.is_set() and outcome.status != "success":
                outcome = Outcome("cancelled", run_texts.CANCELLED_RUNNING)
            elif ctx.shutdown.is_set() and outcome.status != "success":
                outcome = Outcome("error", backend.restart_error())  # never "cancelled"
            outcome.error = run_texts.said(outcome.status, outcome.error)
            step = {"success": "finished", "cancelled": outcome.error}.get(outcome.status, "failed")
            self.runs.finish(run_id, outcome.status, outcome.error, step=step, **fields)
            if outcome.status == "error" and outcome.error in on_event.errors_said:
                self._log(run_id, "failed (the worker's error above)")  # said once
            elif outcome.status == "error":
                self._log(run_id, "failed: %s" % outcome.error)
            else:
                self._log(run_id, "%s%s" % (outcome.status, ": " + outcome.error
                                            if outcome.error and outcome.status != "success"
                                            else ""))
        except Exception as e:
            log.exception("run %s failed in the server", run_id)
            if ctx.shutdown.is_set() and backend.survives_restart:
                return  # stopping (the store may be closing): the next start finishes it
            self.runs.finish(run_id, "error", "The server failed while handling the run: %s. "
                                              "The server log has the details." % e, step="failed")
        finally:
            with self._lock:
                self._active.pop(run_id, None)
            if ctx.claim is not None:
                ctx.claim.ready.set()  # a claim still waiting hears that the run ended
            self._retain()
            self._wake.set()

    def _prepare(self, run: Run, paths: RunPaths, set_step) -> Optional[Outcome]:
        """Bundle and spec for a run; an Outcome when it cannot start."""
        backend = self.backends[run.backend]
        dest = prepare.Destination(backend.on_server, backend.heldout_on_server,
                                   backend.python_fix)
        return prepare.prepare(self.cfg, self.store, run, paths, dest, set_step,
                               lambda m: self._log(run.run_id, m))

    def _ingest(self, run: Run, paths: RunPaths) -> Dict[str, Any]:
        b = bundle_mod.read(paths.bundle, verify=False)
        try:
            predictions = ingest.read_predictions(paths.predictions, b)
        except ingest.PredictionsError as e:
            return {"error": "The run finished but its predictions cannot be used: %s." % e}
        holdout = report.holdout_report(predictions, ingest.with_heldout(b.items, paths.heldout),
                                        b.schemas)
        done = self.runs.get(run.run_id)
        if done is not None and done.writeback is not None:  # a restart cut the ingest short
            wb = done.writeback  # after the write-back: it is not done twice
            self._log(run.run_id, "the predictions were written back before the restart")
        else:
            ingest.keep_ranking(self.store, self.cfg, run.run_id, predictions, b.schemas)
            wb = ingest.write_back(self.store, self.cfg, run.run_id, predictions, holdout)
            counts = b.manifest.get("counts", {})
            self.runs.update(run.run_id, holdout=holdout, writeback=wb,  # the mark of it
                             labelled=sum(counts.get(s, 0) for s in ("train", "val", "test")))
            for scheme, why in list(wb.kept_in_use.items()) + list(wb.took_over.items()):
                self._log(run.run_id, "%s: %s" % (scheme, why))
        if set(wb.in_use) & set(self.cfg.active_learning.schemes):
            ordered = ingest.reorder(self.store, self.cfg)  # idempotent: again after a restart
            if ordered:
                self._log(run.run_id, ordered)
        metrics = None
        for line in ingest.read_lines(paths.events):
            if line.get("type") == "result":
                metrics = line.get("metrics")
        self._log(run.run_id, run_texts.scored_sentence(holdout, wb))
        run_texts.record_scored(paths.events, holdout, wb)  # the JSON, for tools
        return {"holdout": holdout, "writeback": wb, "metrics": metrics,
                "warnings": ingest.warnings(self.cfg, run, wb, holdout, b.schemas)}

    def _retain(self) -> None:
        pruned = retention.prune(self.runs, self.paths, self.cfg.model_training.retain_runs,
                                 self._log, self.holds)
        if pruned:  # their ranking numbers go with their model files (active learning)
            queue_order.forget(self.store, pruned)
        with ingest.CHOICE:  # and the kept predictions of every run retain_runs let go,
            # files here or not; under CHOICE: no use or pin of such a run in between
            self.runs.forget_predictions(retention.superseded(
                self.runs, self.cfg.model_training.retain_runs))

    def _auto_retrain_tick(self) -> None:
        """Carry out auto-retraining's decision: queue an automatic run, or say why not."""
        decision = autoretrain.decide(self.cfg, self.store, self.runs)
        if decision is None:
            return
        if decision.start:
            ar = self.cfg.model_training.auto_retrain
            try:
                trainer = ar.trainer or trainers.default_trainer()
                run = self.submit(trainer, autoretrain.schemes(self.cfg), ar.backend,
                                  ar.params, auto=True)
                self.store.meta_set("auto_retrain.labels", str(decision.labels))
                decision.status["reason"] = "started automatic run %s" % run.run_id
            except RequestError as e:
                decision.status["reason"] = "cannot start an automatic run: %s" % e.message
        self.auto_status = decision.status

