"""A run as the API returns it and the pages, the publish card and the model card show it.

``RunView.from_run`` is the one place a ``runs.Run`` becomes what is shown: the record's fields
(``placement`` and ``warnings`` read as empty when unset) and what is computed from them
(``params_changed``, ``duration_s``, ``terminal``). ``as_dict`` gives the API's JSON, key for
key as it always was, so the page shows exactly what the API returns; ``from_dict`` reads that
JSON back (the CLI, which gets it over HTTP): a missing key reads as its default, unknown keys
(``switched``) are ignored. The held-out report and the write-back result are their records
(``HeldOut``, ``WriteBack``), or None for a run without one.
"""

import time
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

from potato.training.core.runs import TERMINAL, Run
from potato.training.remote import trainers
from potato.training.reports.heldout import HeldOut
from potato.training.reports.writeback import WriteBack

COMPUTED = ("params_changed", "duration_s", "terminal")
# what a missing or null value reads as, for the fields that are always a list or a mapping
_EMPTY = {"schemas": list, "params": dict, "history": list, "in_use": list, "placement": dict,
          "warnings": list, "params_changed": dict}


def params_changed(run: Run) -> Dict[str, Any]:
    """The run's params whose value is not the trainer's default (all of them for a trainer
    this server no longer knows)."""
    params = run.params if isinstance(run.params, dict) else {}
    info = trainers.get(run.trainer) if isinstance(run.trainer, str) else None
    if info is None:
        return dict(params)
    defaults = dict((p.name, p.default) for p in info.params)
    return dict((k, v) for k, v in params.items() if k not in defaults or defaults[k] != v)


@dataclass(frozen=True)
class RunView:
    """One field per key of the API's run JSON, in its order (``as_dict`` keeps it)."""

    run_id: str = ""
    trainer: str = ""
    schemas: List[str] = field(default_factory=list)
    backend: str = ""
    ran_on: Optional[str] = None
    status: str = ""
    step: str = ""
    error: Optional[str] = None
    metrics: Optional[Dict[str, Any]] = None
    holdout: Optional[HeldOut] = None
    writeback: Optional[WriteBack] = None
    created_at: float = 0.0
    started_at: Optional[float] = None
    finished_at: Optional[float] = None
    artifact_uri: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)
    progress: Optional[Dict[str, Any]] = None
    history: List[Dict[str, Any]] = field(default_factory=list)
    auto: bool = False
    in_use: List[str] = field(default_factory=list)
    placement: Dict[str, Any] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    pinned: bool = False
    pruned_at: Optional[float] = None
    pruned_reason: Optional[str] = None
    name: Optional[str] = None
    note: Optional[str] = None
    params_changed: Dict[str, Any] = field(default_factory=dict)  # not the trainer's default
    duration_s: Optional[float] = None  # started to finished (or now), None before it starts
    terminal: bool = False  # success, error or cancelled: nothing more will change

    @classmethod
    def from_run(cls, run: Run, now: Optional[float] = None) -> "RunView":
        """``now``: the time a running run's duration is counted to (the clock's by default).
        A stored report that is not a JSON object (a damaged record) reads as no report."""
        values = {f.name: getattr(run, f.name) for f in fields(cls) if f.name not in COMPUTED}
        values["holdout"] = HeldOut.from_dict(run.holdout) \
            if isinstance(run.holdout, dict) else None
        values["placement"] = run.placement or {}
        values["warnings"] = run.warnings or []
        duration = None
        if run.started_at:
            end = run.finished_at or (time.time() if now is None else now)
            duration = round(end - run.started_at, 1)
        return cls(params_changed=params_changed(run), duration_s=duration,
                   terminal=run.status in TERMINAL, **values)

    @classmethod
    def from_dict(cls, data: Any) -> "RunView":
        """The API's JSON as a record (what ``as_dict`` gave, or part of it)."""
        d = data if isinstance(data, dict) else {}
        values = {f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None}
        for name, empty in _EMPTY.items():
            if not isinstance(values.get(name, empty()), empty):
                values[name] = empty()
        values["holdout"] = HeldOut.from_dict(d["holdout"]) \
            if isinstance(d.get("holdout"), dict) else None
        values["writeback"] = WriteBack.from_dict(d["writeback"]) \
            if isinstance(d.get("writeback"), dict) else None
        return cls(**values)

    def as_dict(self) -> Dict[str, Any]:
        """The API's JSON for the run (the keys, their order and their values as before the
        record: the reports as they are stored)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["holdout"] = self.holdout.as_dict() if self.holdout is not None else None
        out["writeback"] = self.writeback.as_dict() if self.writeback is not None else None
        return out
