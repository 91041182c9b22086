"""Where runs execute (server side): local, ssh, slurm and agent backends over one lifecycle.

``make_backends`` builds every configured backend; ``check_backend`` is the one code path of
``potato training check`` and the Training page's Check button.
"""

from typing import Any, Dict, Optional

from potato.config.settings import Config
from potato.config.backends import KINDS
from potato.training.backends.agent import AgentBackend
from potato.training.backends.base import Outcome, RunContext, TrainingBackend
from potato.training.backends.local import LocalBackend
from potato.training.backends.slurm import SlurmBackend
from potato.training.backends.ssh import SshBackend
from potato.training.core import fit
from potato.training.remote import trainers

__all__ = ["Outcome", "RunContext", "TrainingBackend", "make_backends", "check_backend",
           "backend_class"]
# The registry of kinds: a new kind of backend is a module in this folder and a line here.
# It is the config's registry too (config_backends.KINDS, the same mapping): the config reads
# each kind's keys, rules, hints and traits from its class, so one line makes a kind known to
# both.
TYPES = KINDS
TYPES.update({
    "local": LocalBackend,
    "ssh": SshBackend,
    "slurm": SlurmBackend,
    "agent": AgentBackend,
})


def backend_class(type_name: str):
    """The class of a backend kind (``model_training.backends.X.type``), or None."""
    return TYPES.get(type_name)


def polled_by_agents(type_name: str) -> bool:
    """Whether runs of this kind wait for an agent that polls the server (tokens, register)."""
    kind = TYPES.get(type_name)
    return bool(kind is not None and kind.polled_by_agents)


def check_backend(backend: TrainingBackend, trainer: Optional[str] = None,
                  params: Optional[Dict[str, Any]] = None, store=None) -> Dict[str, Any]:
    """The report of ``potato training check`` and of the Check button (one code path); with
    a trainer (and the params the form holds), its model is resolved where runs execute.
    ``store``: the project's (whether a media project's items have text too), when open."""
    report = backend.check()
    _check_fit(backend, trainer, report, store)
    _check_packages(backend, trainer, report, store)
    if trainer and report.get("ok"):
        _check_models(backend, trainer, params, report)
    if not backend.cfg.model_training.enabled:
        # The API refuses every run while training is off: the check says so, whatever the
        # backend itself would allow.
        report["ok"] = False
        report["disabled"] = True
        report["lines"] = list(report.get("lines") or []) + [
            "Training is off (model_training.enabled: false in %s), so no run can start; set "
            "it to true to train." % (backend.cfg.path or "the config")]
    description = backend.bcfg.description
    report["description"] = description
    if description:
        report["lines"] = [description] + list(report.get("lines") or [])
    return report


def _check_fit(backend, trainer: Optional[str], report: Dict[str, Any], store) -> None:
    """A named trainer that does not fit the project's schemes and items fails the check with
    the sentence a run of it would be refused with."""
    info = trainers.get(trainer) if trainer else None
    why = fit.refusal(info, backend.cfg, store) if info is not None else None
    if why:
        report.setdefault("lines", []).append(why)
        report["ok"] = False


def _check_packages(backend, trainer: Optional[str], report: Dict[str, Any],
                    store=None) -> None:
    """Where the backend's check saw which training packages the worker's Python lacks
    (``missing_packages``), each trainer the project can use (``trainer`` alone when given)
    is judged: one that lacks its packages there makes the check fail, with the trainer, the
    packages and the fix, so "can start a run" is not said of a host where the project's
    models cannot train."""
    missing = report.get("missing_packages")
    if not isinstance(missing, list) or not report.get("ok"):
        return
    if trainer:
        named = trainers.get(trainer)
        candidates = {trainer: named} if named is not None else {}
    else:  # the trainers that fit the project's schemes and items (fit.py)
        unfit = fit.reasons(backend.cfg, store)
        candidates = {n: i for n, i in trainers.all_trainers().items()
                      if not i.local_only and not unfit.get(n)}
    lines = report.setdefault("lines", [])
    blocked = {}
    for name, info in sorted(candidates.items()):
        lacks = [p for p in info.packages if p in missing]
        if lacks:
            blocked[name] = lacks
            lines.append("trainer %s cannot run there: it needs %s (%s, %s)" % (
                name, ", ".join(lacks), info.install_hint, backend.python_fix))
    report["trainers_ready"] = sorted(n for n in candidates if n not in blocked)
    if blocked:
        report["ok"] = False
        ready = report["trainers_ready"]
        lines.append("Trainers for this project's schemes that can run there: %s%s." % (
            ", ".join(ready) or "none", "" if trainer or not ready else
            " (check one of them alone with --trainer)"))


def _check_models(backend, trainer, params, report) -> None:
    lines = report.setdefault("lines", [])
    info = trainers.get(trainer)
    if info is None:
        lines.append(trainers.unknown_trainer(trainer))
        report["ok"] = False
        return
    try:
        resolved = trainers.resolve_params(info, params or {})
    except trainers.ParamError as e:
        lines.append(trainers.sentence("Bad params: %s" % e))
        report["ok"] = False
        return
    for model in trainers.model_sources(info, resolved):
        found = backend.check_model(model)
        if found is None:
            lines.append("model %s is looked up on the training machine when a run starts"
                         % model)
            continue
        ok, sentence = found
        lines.append(sentence)
        report["model_ok"] = ok
        report["ok"] = report["ok"] and ok


def make_backends(cfg: Config, tokens=None) -> Dict[str, TrainingBackend]:
    """Every configured backend; agent backends see ``tokens`` (an AgentTokens) for check."""
    out: Dict[str, TrainingBackend] = {}
    for name, b in cfg.model_training.backends.items():
        kind = TYPES.get(b.type)
        if kind is not None:  # a kind the config knows but this server cannot run: not offered
            out[name] = kind(b, cfg, tokens=tokens)
    return out
