"""Rules a config must pass before anything starts, and the acknowledgements of warnings.

``check(path)`` loads the config (``config.load`` reports structural problems), applies the
cross-field rules below, then moves warnings matched by ``validation.acknowledge`` into the
report's ``acknowledged`` list. ``potato validate`` prints the report; ``potato start`` refuses
to start on its errors (never on warnings), with the same messages.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import List, Tuple
from urllib.parse import urlsplit

from potato.config.settings import Config, Problem, dotted, load, suggest
from potato.config.backends import arrives_as_loopback, host_of, kind_rules, polled_by_agents
from potato.config.netaddr import is_loopback
from potato.schemes import save_bytes
from potato.project import display
from potato.project.data import DataError, load_items
from potato.project.validation_media import media_rules
from potato.training.remote import trainers

MIN_ACK_LENGTH = 12


@dataclass
class Report:
    errors: List[Problem] = field(default_factory=list)
    warnings: List[Problem] = field(default_factory=list)
    acknowledged: List[Problem] = field(default_factory=list)
    # Advice that never fails --strict (the tutorial's own configs must pass it).
    notes: List[Problem] = field(default_factory=list)

    def ok(self, strict: bool = False) -> bool:
        return not self.errors and not (strict and self.warnings)

    def as_dict(self, strict: bool = False) -> dict:
        return {"ok": self.ok(strict), "strict": strict,
                "errors": [p.as_dict() for p in self.errors],
                "warnings": [p.as_dict() for p in self.warnings],
                "acknowledged": [p.as_dict() for p in self.acknowledged],
                "notes": [p.as_dict() for p in self.notes]}


def check(path: str, acknowledge: bool = True, items: bool = True) -> Tuple[Config, Report]:
    """Load and validate ``path``. Raises ``config.ConfigError`` when it cannot be read.
    ``acknowledge``: apply the config's ``validation.acknowledge`` block, which only
    ``potato validate`` reads (the tutorial's word); ``potato start`` and the other commands
    report every warning.
    ``items``: read the items as potato start will (potato validate); start and Reload read
    them themselves, once."""
    cfg, errors, warnings = load(path)
    report = Report(list(errors), list(warnings))
    _rules(cfg, report, items)
    if acknowledge:
        _acknowledge(cfg, report)
    return cfg, report


def _rules(cfg: Config, report: Report, items: bool = True) -> None:
    def err(path, message, backend=None):
        report.errors.append(Problem(message, dotted(path), cfg.line_of(path), cfg.path, backend))

    def warn(path, message, backend=None):
        report.warnings.append(Problem(message, dotted(path), cfg.line_of(path), cfg.path, backend))

    if not cfg.data_files:
        err(("data_files",), "data_files is empty: list the JSON, JSON Lines, CSV or TSV files "
                             "that hold the items to annotate (paths relative to task_dir).")
    for i, f in enumerate(cfg.data_files):
        if not os.path.isfile(f):
            err(("data_files", i), f"data_files[{i}] is {f}, which does not exist. Fix the path "
                                   f"(it is relative to task_dir, {cfg.task_dir}).")
    if not cfg.schemes and not any(e.key.startswith("annotation_schemes")
                                   for e in report.errors):  # else those say why
        err(("annotation_schemes",), "annotation_schemes is empty: add at least one scheme "
                                     "(annotation_type such as radio, multiselect, span or "
                                     "likert, a name, and labels for choices and spans).")
    if not cfg.admin_api_key and not cfg.debug:
        warn(("admin_api_key",), "admin_api_key is not set, so no one can open the admin pages "
                                 "or call the admin API (training included). Set a long random "
                                 "key, for example from: python3 -c 'import secrets; "
                                 "print(secrets.token_urlsafe(32))'")

    mt = cfg.model_training
    names = list(mt.backends)
    for ref_path, ref in ((("model_training", "backend"), mt.backend),
                          (("model_training", "auto_retrain", "backend"), mt.auto_retrain.backend)):
        if ref is not None and ref not in mt.backends:
            err(ref_path, f"{dotted(ref_path)} is {ref!r}, which names no configured backend."
                          f"{suggest(ref, names)} Configured: {', '.join(names)}.")

    _auto_retrain_rules(cfg, err, warn)
    scheme_names = [s.name for s in cfg.schemes]
    types = {s.name: s.annotation_type for s in cfg.schemes}
    for i, name in enumerate(mt.writeback.schemas):
        if name not in scheme_names:
            err(("model_training", "writeback", "schemas", i),
                f"model_training.writeback.schemas names {name!r}, which is not an annotation "
                f"scheme.{suggest(name, scheme_names)} Schemes: {', '.join(scheme_names) or 'none'}.")
        elif trainers.annotate_only(types[name]):
            err(("model_training", "writeback", "schemas", i),
                f"model_training.writeback.schemas names {name!r}, a {types[name]} scheme: no "
                f"trainer trains {types[name]} schemes (they are annotate-only), so there would "
                f"never be suggestions to write back. Remove it from writeback.schemas.")

    if cfg.debug and (cfg.server.trusted_proxies
                      or (cfg.server_url or "").lower().startswith("https://")):
        err(("debug",), "debug: true gives admin rights to requests from loopback, and behind a "
                        "proxy (server.trusted_proxies, or an https server_url) every remote "
                        "client arrives from the proxy's address. Set debug: false and log in "
                        "with admin_api_key.")
    need = save_bytes(cfg.schemes)
    if need > cfg.server.max_body_mb * 1024 * 1024:
        longest = max(cfg.schemes, key=lambda s: s.kind.answer_bytes())
        err(("server", "max_body_mb"), "One save of this project's answers can take %.1f MB "
            "(its text boxes' max_length, up to 12 bytes a character as a browser sends them), "
            "more than server.max_body_mb (%g) lets a request carry, so a long answer would be "
            "refused. Raise server.max_body_mb to at least %d, or lower max_length (scheme %s "
            "takes the most)." % (need / 1048576, cfg.server.max_body_mb,
                                  -(-need // 1048576), longest.name))
    _backend_rules(cfg, report, err, warn)
    _upstream_rules(cfg, report, warn)
    if display.media_kinds(cfg):
        media_rules(cfg, report, err, warn)  # reads the items too
    elif items and cfg.data_files and all(os.path.isfile(f) for f in cfg.data_files):
        try:  # what potato start would refuse (an item without its text_key, a duplicate id)
            load_items(cfg)
        except DataError as e:
            err(("data_files",), str(e))


def _auto_retrain_rules(cfg: Config, err, warn) -> None:
    """The trainer automatic runs would start: known, and fitting the project's schemes and
    items (else every automatic run would be refused at its moment, far from the config)."""
    for problem in trainers.plugin_problems():
        warn(("model_training",), problem[0].upper() + problem[1:] + ".")
    ar = cfg.model_training.auto_retrain
    if not ar.enabled or not cfg.schemes:
        return
    path = ("model_training", "auto_retrain", "trainer")
    name = ar.trainer or trainers.default_trainer()
    info = trainers.get(name) if isinstance(name, str) else None
    if info is None:
        err(path, f"{dotted(path)}: {trainers.unknown_trainer(name)}")
        return
    # the items may hold text beside their media (the store knows; validate reads no store)
    holds = {"text"} | set(display.media_kinds(cfg))
    kinds = {s.annotation_type for s in cfg.schemes}
    why = trainers.unfit(info, kinds, holds)
    if why:
        fitting = [n for n, i in trainers.all_trainers().items()
                   if not trainers.unfit(i, kinds, holds)]
        err(path, f"{dotted(path)} is {name}, which does not fit this project: {why}. Set it to "
                  f"one that does ({', '.join(fitting) or 'none fits its schemes'}), or turn "
                  f"automatic runs off (model_training.auto_retrain.enabled: false).")


def _upstream_rules(cfg: Config, report: Report, warn) -> None:
    """Upstream Potato's keys that are read and ignored: one note naming them all (never a
    --strict failure); and debug, which means more here than upstream."""
    accepted = cfg.upstream.accepted
    if accepted:
        report.notes.append(Problem(
            f"accepted, not used here (upstream Potato keys for looks and features this Potato "
            f"does not have; they change nothing): {', '.join(accepted)}.", accepted[0],
            cfg.line_of((accepted[0],)), cfg.path))
    remote = [b for b in cfg.model_training.backends.values() if arrives_as_loopback(b)]
    if cfg.debug and not remote:  # with a remote backend its own, sharper warning is given
        warn(("debug",), "debug: true gives admin rights to every request from loopback (upstream "
                         "Potato's debug does not): any program or person on this machine can "
                         "act as admin. Set debug: false and log in with admin_api_key.")


def _backend_rules(cfg: Config, report: Report, err, warn) -> None:
    mt = cfg.model_training
    for name, b in mt.backends.items():
        bpath = ("model_training", "backends", name)
        for rule in kind_rules(b):  # each kind's own checks live with its config keys
            rule(b, bpath, dotted(bpath), err, warn)
    # only schemes a trainer takes have suggestions to write back (not text, not pairwise)
    trainable = [s.name for s in cfg.schemes if not trainers.annotate_only(s.annotation_type)]
    if mt.enabled and not mt.writeback.schemas and trainable:
        report.notes.append(Problem(
            "model_training.writeback.schemas is empty, so runs train models whose predictions "
            "annotators never see. List the schemes whose model suggestions annotators should "
            "get (for example writeback: {schemas: [%s]})." % trainable[0],
            "model_training.writeback.schemas", cfg.line_of(("model_training",)), cfg.path))
    agents = [name for name, b in mt.backends.items() if polled_by_agents(b)]
    if agents and mt.enabled:
        if cfg.server_url is None and not any(p.key == "server_url" for p in report.errors):
            report.notes.append(Problem(
                f"server_url is not set, so potato training register prints a guessed URL for "
                f"agent backend {agents[0]}. Set server_url to the URL the training machine uses "
                f"to reach this server (for example https://annotate.example.org).",
                "server_url", None, cfg.path))
        elif cfg.server_url and is_loopback(urlsplit(cfg.server_url).hostname or ""):
            warn(("server_url",),
                 f"server_url is {cfg.server_url}, a loopback address: an agent on another "
                 f"machine (backend {agents[0]}) would talk to itself. Set server_url to the URL "
                 f"the training machine uses to reach this server.")
    if cfg.debug:
        for name in [n for n, b in mt.backends.items() if arrives_as_loopback(b)]:
            warn(("debug",),
                 f"debug: true gives admin rights to every request from loopback, and runs on "
                 f"backend {name} reach the server through a reverse-forwarded socket that "
                 f"arrives as loopback, so anyone who can log into "
                 f"{host_of(mt.backends[name]) or 'that host'} could act as admin. Set debug: false "
                 f"when {name} is configured.", name)


def _names_in(entry: str, backends) -> List[str]:
    """Backend names that appear in an acknowledgement as whole words."""
    found = []
    for name in backends:
        if re.search(r"(?<![A-Za-z0-9_-])" + re.escape(name) + r"(?![A-Za-z0-9_-])", entry):
            found.append(name)
    return found


def _acknowledge(cfg: Config, report: Report) -> None:
    """Move warnings matched by ``validation.acknowledge`` entries to ``report.acknowledged``.

    An entry matches a warning when it is a (case-sensitive) substring of its text. An entry
    that names a backend acknowledges only that backend's warnings. Entries shorter than
    MIN_ACK_LENGTH, or that match nothing, become warnings themselves (never acknowledgeable).
    """
    backends = [n for n in cfg.model_training.backends]
    used = [False] * len(cfg.acknowledge)
    short = set()
    for i, entry in enumerate(cfg.acknowledge):
        if len(entry) < MIN_ACK_LENGTH:
            short.add(i)
    kept = []
    for w in report.warnings:
        matched = False
        for i, entry in enumerate(cfg.acknowledge):
            if i in short or entry not in w.message:
                continue
            named = _names_in(entry, backends)
            if named and w.backend not in named:
                continue
            used[i] = matched = True
        (report.acknowledged if matched else kept).append(w)
    report.warnings = kept
    for i, entry in enumerate(cfg.acknowledge):
        path = ("validation", "acknowledge", i)
        line = cfg.line_of(path)
        if i in short:
            report.warnings.append(Problem(
                f"validation.acknowledge[{i}] ({entry!r}) is shorter than {MIN_ACK_LENGTH} "
                f"characters, so it could match warnings by accident; quote more of the warning.",
                dotted(path), line, cfg.path))
        elif not used[i]:
            report.warnings.append(Problem(
                f"validation.acknowledge[{i}] ({entry!r}) matches no warning. Remove it, or copy "
                f"part of a current warning's text (matching is case-sensitive).",
                dotted(path), line, cfg.path))
