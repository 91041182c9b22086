"""Load a project's YAML config into typed objects.

``load(path)`` parses the file once, keeps the line of every key, and turns each section into a
small dataclass. Structural problems (unknown keys, wrong types, out-of-range values) are
collected as ``Problem`` records with the file, the line and the dotted key path, so that
``potato validate`` can list all of them at once; cross-field rules live in ``project/validation.py``.
Code below this module reads only the dataclasses, never the raw YAML.

PyYAML is imported inside ``load`` so that importing ``potato.config.settings`` stays cheap and
standard-library only. The backends' keys are declared by the backend kinds themselves
(``config_backends.KINDS``, filled by ``potato.training.backends``).
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from potato.config.backends import Backend, implicit_backends, parse_backend
from potato.config.reader import ConfigError, Path, Problem, Reader, dotted, read_yaml, suggest
from potato.schemes import Scheme, check_text_fields, drawn_on, parse_schemes
from potato.config import active_learning as al_config, diversity_order
from potato.config.upstream import MEDIA_FIELDS, Upstream, data_files, span_targets, split

__all__ = ["ConfigError", "Problem", "Config", "Backend", "Scheme", "load", "dotted", "suggest"]


# ---------------------------------------------------------------------------------------------
# Typed config objects

@dataclass
class ItemProperties:
    id_key: str = "id"
    text_key: str = "text"
    image_key: Optional[str] = None  # the item field naming its image (potato/project/media.py)
    audio_key: Optional[str] = None  # the item field naming its audio file
    video_key: Optional[str] = None  # the item field naming its video file


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    max_body_mb: float = 16.0
    # Addresses (or networks) of reverse proxies whose X-Forwarded-Host/-Proto are believed,
    # and which the per-address connection limit leaves out (one proxy speaks for many).
    trusted_proxies: List[str] = field(default_factory=list)
    new_names_per_hour: int = 100  # new annotator names one client may log in with (0: no limit)


@dataclass
class Splits:
    train: float = 0.70
    val: float = 0.15
    test: float = 0.15


@dataclass
class Writeback:
    schemas: List[str] = field(default_factory=list)
    min_confidence: float = 0.0
    include_unlabeled: bool = False
    policy: str = "best"  # best: a run takes over only if its held-out macro-F1 is not worse
    tolerance: float = 0.01


@dataclass
class AutoRetrain:
    enabled: bool = False
    trainer: Optional[str] = None  # None: the trainer registry's default (trainers.default)
    schemas: List[str] = field(default_factory=list)
    params: Dict[str, Any] = field(default_factory=dict)
    update_frequency: int = 100
    min_interval_s: float = 600
    backend: Optional[str] = None  # None: model_training.backend


@dataclass
class Publish:
    """Publishing a run's model to the Hugging Face Hub (potato/training/hub/publish.py)."""
    token_env: str = "HF_TOKEN"  # the server's environment variable that holds the token
    license: Optional[str] = None  # the model card's license, e.g. apache-2.0
    timeout_s: float = 60  # each request to the Hub


@dataclass
class ModelTraining:
    enabled: bool = True
    backend: str = "local"
    backends: Dict[str, Backend] = field(default_factory=dict)
    splits: Splits = field(default_factory=Splits)
    split_seed: int = 0
    retain_runs: int = 5
    max_wall_seconds: Optional[float] = None
    max_ram_mb: Optional[float] = None
    num_threads: Optional[int] = None
    device: str = "auto"
    grace_seconds: float = 20
    max_predictions_mb: float = 512
    min_labels_per_class: int = 2
    aggregation: str = "majority"  # or consensus (Dawid-Skene): potato/labels/aggregate.py
    writeback: Writeback = field(default_factory=Writeback)
    auto_retrain: AutoRetrain = field(default_factory=AutoRetrain)
    publish: Publish = field(default_factory=Publish)


@dataclass
class Config:
    path: str
    task_dir: str
    annotation_task_name: str = "Potato project"
    data_files: List[str] = field(default_factory=list)
    media_directory: str = ""  # where items' relative media paths are found (task_dir by default)
    item_properties: ItemProperties = field(default_factory=ItemProperties)
    schemes: List[Scheme] = field(default_factory=list)
    output_dir: str = ""
    admin_api_key: Optional[str] = None
    server_url: Optional[str] = None  # how agents and people reach this server
    allowed_hosts: List[str] = field(default_factory=list)  # Host headers answered; [] = default
    debug: bool = False
    server: ServerConfig = field(default_factory=ServerConfig)
    model_training: ModelTraining = field(default_factory=ModelTraining)
    acknowledge: List[str] = field(default_factory=list)
    # upstream Potato's keys found, by policy, and the implemented ones' values (upstream.py)
    upstream: Upstream = field(default_factory=Upstream)
    active_learning: al_config.ActiveLearning = field(default_factory=al_config.ActiveLearning)
    diversity_order: diversity_order.DiversityOrder = field(
        default_factory=diversity_order.DiversityOrder)
    data_encodings: Dict[str, str] = field(default_factory=dict)  # path -> encoding
    # The YAML line of every key path, so later rules can point at the right line.
    key_lines: Dict[Path, int] = field(default_factory=dict, repr=False)

    def line_of(self, path: Path) -> Optional[int]:
        while path:
            if path in self.key_lines:
                return self.key_lines[path]
            path = path[:-1]
        return None

    def scheme(self, name: str) -> Optional[Scheme]:
        return next((s for s in self.schemes if s.name == name), None)

    @property
    def db_path(self) -> str:
        return os.path.join(self.output_dir, "potato.db")

    @property
    def runs_dir(self) -> str:
        return os.path.join(self.output_dir, "training", "runs")


TOP_KEYS = ("annotation_task_name", "task_dir", "data_files", "media_directory", "item_properties",
            "annotation_schemes", "output_annotation_dir", "admin_api_key", "server_url",
            "allowed_hosts", "debug", "server",
            "model_training", "validation")


# ---------------------------------------------------------------------------------------------
def load(path: str) -> Tuple[Config, List[Problem], List[Problem]]:
    """Parse ``path`` into a Config, with the structural errors and warnings found. Raises
    ConfigError when the file cannot be read or parsed at all. The Config is filled with
    defaults wherever a value was wrong, so it is only safe to use without errors."""
    data, lines, scalars, duplicates = read_yaml(path)
    r = Reader(path, lines, scalars)
    for dup_path, line in duplicates:
        r.errors.append(Problem(f"{dotted(dup_path)} is given twice; the second value would "
                                f"silently win. Keep one.", dotted(dup_path), line, path))
    if data is None:
        data = {}
    top, upstream = split(r, data, TOP_KEYS)
    config_dir = os.path.dirname(os.path.abspath(path))
    task_dir = os.path.normpath(os.path.join(config_dir, r.text(top, "task_dir", (), ".")))
    cfg = Config(path=path, task_dir=task_dir, key_lines=lines, upstream=upstream)

    def resolve(p: Optional[str]) -> Optional[str]:
        return None if p is None else os.path.normpath(
            os.path.join(task_dir, os.path.expanduser(p)))

    cfg.annotation_task_name = r.text(top, "annotation_task_name", (), cfg.annotation_task_name)
    for name, encoding in data_files(r, top.get("data_files")):
        cfg.data_files.append(resolve(name))
        cfg.data_encodings[cfg.data_files[-1]] = encoding
    cfg.media_directory = resolve(r.text(top, "media_directory", (), "."))
    ip = r.mapping(top.get("item_properties"), ("item_properties",),
                   ("id_key", "text_key", "image_key", "audio_key", "video_key", "kwargs"),
                   "item_properties")
    r.text_list(ip, "kwargs", ("item_properties",))  # upstream's template fields: no effect
    d = ItemProperties()  # the defaults; a media key is a field name, never a number
    cfg.item_properties = ItemProperties(*(
        r.text(ip, k, ("item_properties",), getattr(d, k), numbers_ok=k in ("id_key", "text_key"))
        for k in ("id_key", "text_key", "image_key", "audio_key", "video_key")))
    _display_media_keys(r, cfg)
    cfg.schemes = parse_schemes(r, top.get("annotation_schemes"), upstream.blockers)
    span_targets(r, cfg.upstream.display, cfg.item_properties.text_key,
                 any(s.kind.marks_text for s in cfg.schemes if s.kind is not None),
                 cfg.upstream.blockers)
    check_text_fields(r, cfg.schemes, cfg.item_properties.text_key)
    if drawn_on(cfg.schemes) is not None and not cfg.item_properties.image_key:  # upstream's
        cfg.item_properties.image_key = drawn_on(cfg.schemes) or cfg.item_properties.text_key
    cfg.output_dir = resolve(r.text(top, "output_annotation_dir", (), "annotation_output"))
    cfg.admin_api_key = r.text(top, "admin_api_key", (), cfg.admin_api_key, numbers_ok=False)
    cfg.server_url = _server_url(r, r.text(top, "server_url", (), cfg.server_url,
                                           numbers_ok=False))
    cfg.allowed_hosts = [h.strip().lower() for h in r.text_list(top, "allowed_hosts", ())
                         if h.strip()]
    cfg.debug = r.boolean(top, "debug", (), cfg.debug)
    cfg.server = _server(r, top.get("server"), resolve)
    if upstream.port is not None:  # upstream's top-level port
        if isinstance(top.get("server"), dict) and "port" in top["server"]:
            r.error(("port",), "port and server.port are both given; keep one (server.port).")
        else:
            cfg.server.port = upstream.port
    for scheme in cfg.schemes if upstream.all_required else ():
        scheme.required = True  # upstream's require_fully_annotated: true
    cfg.model_training = _model_training(r, top.get("model_training"), resolve)
    if isinstance(top.get("model_training"), dict):
        cfg.model_training.publish = _publish(r, top["model_training"].get("publish"),
                                              ("model_training", "publish"))
    cfg.diversity_order = diversity_order.parse(r, upstream.diversity, upstream.strategy)
    cfg.active_learning = al_config.parse(r, upstream.active_learning, upstream.strategy,
                                          cfg.schemes)
    val = r.mapping(top.get("validation"), ("validation",), ("acknowledge",), "validation")
    cfg.acknowledge = r.text_list(val, "acknowledge", ("validation",))
    return cfg, r.errors, r.warnings


def _display_media_keys(r: Reader, cfg: Config) -> None:
    """upstream's instance_display image and audio fields name the item's media field when
    item_properties names none (an item has one image and one audio file here)."""
    ip = cfg.item_properties
    for f in cfg.upstream.display:
        if f.type not in MEDIA_FIELDS:
            continue
        attr = f.type + "_key"
        if getattr(ip, attr) is None:
            setattr(ip, attr, f.key)
        elif getattr(ip, attr) != f.key:
            r.error(("instance_display", "fields"),
                    f"instance_display shows the {f.type} field {f.key!r}, and "
                    f"item_properties.{attr} is {getattr(ip, attr)!r}: an item has one "
                    f"{f.type} here. Show {getattr(ip, attr)!r}, or name {f.key!r} in "
                    f"item_properties.{attr}.")


def _server(r: Reader, raw, resolve) -> ServerConfig:
    path: Path = ("server",)
    m = r.mapping(raw, path, ("host", "port", "tls_cert", "tls_key", "max_body_mb",
                              "trusted_proxies", "new_names_per_hour", "debug"), "server")
    if r.boolean(m, "debug", path, False):  # upstream's server block: Flask's debug switch
        r.warn(path + ("debug",), "server.debug is upstream's web-framework debug switch and "
                                  "is ignored here; it does not turn on this Potato's debug "
                                  "(top-level debug, which gives loopback requests admin "
                                  "rights). Remove server.debug.")
    s = ServerConfig()
    s.host = r.text(m, "host", path, s.host)
    s.port = r.number(m, "port", path, s.port, 0, 65535, integer=True)
    s.tls_cert = resolve(r.text(m, "tls_cert", path))
    s.tls_key = resolve(r.text(m, "tls_key", path))
    s.max_body_mb = r.number(m, "max_body_mb", path, s.max_body_mb, positive=True)
    s.new_names_per_hour = r.number(m, "new_names_per_hour", path, s.new_names_per_hour, 0,
                                    1000000, integer=True)
    if bool(s.tls_cert) != bool(s.tls_key):
        r.error(path, "server.tls_cert and server.tls_key go together: give both or neither.")
    for i, value in enumerate(r.text_list(m, "trusted_proxies", path)):
        try:
            s.trusted_proxies.append(str(ipaddress.ip_network(value.strip(), strict=False)))
        except ValueError:
            r.error(path + ("trusted_proxies", i),
                    f"server.trusted_proxies[{i}] is {value!r}: not an IP address or network. "
                    f"List the addresses your reverse proxy connects from, such as 127.0.0.1 "
                    f"or 10.0.0.0/24.")
    return s


def _server_url(r: Reader, url: Optional[str]) -> Optional[str]:
    """The URL agents and people use to reach this server, checked as an agent will parse it."""
    if url is None or not url.strip():
        return None
    url = url.strip()
    problem = None
    try:
        u = urlsplit(url)
        u.port  # raises ValueError for a port that is not a number in range
        if u.scheme not in ("http", "https"):
            problem = "it must start with http:// or https://"
        elif not u.hostname:
            problem = "it has no host name"
        elif u.username or u.password:
            problem = "it holds a user name or password, which agents would not send"
        elif u.query or u.fragment or any(c.isspace() for c in url):
            problem = "it has a query, a fragment or spaces"
    except ValueError as e:
        problem = str(e)
    if problem:
        r.error(("server_url",), f"server_url is {url!r}: {problem}. Give the URL agents and "
                                 f"people use to reach this server, such as "
                                 f"https://annotate.example.org or "
                                 f"http://gpu-lab.example.org:8000.")
        return None
    return url.rstrip("/")


MODEL_TRAINING_KEYS = ("enabled", "backend", "backends", "splits", "split_seed", "retain_runs",
                       "max_wall_seconds", "max_ram_mb", "num_threads", "device", "grace_seconds",
                       "max_predictions_mb", "min_labels_per_class", "aggregation", "writeback",
                       "auto_retrain", "publish")


def _splits(r: Reader, m, path: Path) -> Splits:
    sp = r.mapping(m.get("splits"), path + ("splits",), ("train", "val", "test"),
                   "model_training.splits")
    if sp:
        parts = [r.number(sp, k, path + ("splits",), None, 0, 1) for k in ("train", "val", "test")]
        if any(sp.get(k) is None for k in ("train", "val", "test")):
            r.error(path + ("splits",), "model_training.splits needs all of train, val and test.")
        elif None not in parts:  # (a value out of range or not a number has its own error)
            if abs(sum(parts) - 1) > 1e-6:
                r.error(path + ("splits",), f"model_training.splits add up to {sum(parts):g}; "
                                            f"train, val and test must add up to 1.")
            elif parts[2] == 0:
                r.error(path + ("splits",), "model_training.splits.test is 0, so no held-out "
                                            "score can be computed. Keep some items for test.")
            else:
                return Splits(*parts)
    return Splits()


def _aggregation(r: Reader, m, path: Path) -> str:
    default = ModelTraining.aggregation
    method = r.text(m, "aggregation", path, default, numbers_ok=False) or default
    if method not in ("majority", "consensus"):
        r.error(path + ("aggregation",), f"model_training.aggregation is {method!r}; use "
                                         f"majority (the most frequent label) or consensus "
                                         f"(Dawid-Skene: weighs each annotator by how reliable "
                                         f"they are).")
        return default
    return method


def _model_training(r: Reader, raw, resolve) -> ModelTraining:
    path: Path = ("model_training",)
    m = r.mapping(raw, path, MODEL_TRAINING_KEYS, "model_training")
    mt = ModelTraining()  # its defaults are the defaults below
    mt.enabled = r.boolean(m, "enabled", path, mt.enabled)
    mt.backend = r.text(m, "backend", path, mt.backend, numbers_ok=False)
    mt.split_seed = r.number(m, "split_seed", path, mt.split_seed, integer=True)
    mt.retain_runs = r.number(m, "retain_runs", path, mt.retain_runs, minimum=1, integer=True)
    mt.max_wall_seconds = r.number(m, "max_wall_seconds", path, mt.max_wall_seconds,
                                   positive=True)
    mt.max_ram_mb = r.number(m, "max_ram_mb", path, mt.max_ram_mb, positive=True)
    mt.num_threads = r.number(m, "num_threads", path, mt.num_threads, minimum=1, integer=True)
    mt.device = r.text(m, "device", path, mt.device)
    if not re.match(r"^(auto|cpu|mps|cuda(:\d+)?)$", mt.device):
        r.error(path + ("device",), f"model_training.device is {mt.device!r}; use auto, cpu, "
                                    f"mps, cuda or cuda:N (for example cuda:1).")
        mt.device = ModelTraining.device
    mt.grace_seconds = r.number(m, "grace_seconds", path, mt.grace_seconds, minimum=0)
    mt.max_predictions_mb = r.number(m, "max_predictions_mb", path, mt.max_predictions_mb,
                                     positive=True)
    mt.min_labels_per_class = r.number(m, "min_labels_per_class", path,
                                       mt.min_labels_per_class, minimum=1, integer=True)
    mt.aggregation = _aggregation(r, m, path)

    mt.splits = _splits(r, m, path)

    wb_path = path + ("writeback",)
    wb = r.mapping(m.get("writeback"), wb_path, ("schemas", "min_confidence", "include_unlabeled",
                                                 "policy", "tolerance"),
                   "model_training.writeback")
    d = Writeback()  # the defaults
    mt.writeback = Writeback(r.text_list(wb, "schemas", wb_path),
                             r.number(wb, "min_confidence", wb_path, d.min_confidence, 0, 1),
                             r.boolean(wb, "include_unlabeled", wb_path, d.include_unlabeled),
                             r.text(wb, "policy", wb_path, d.policy) or d.policy,
                             r.number(wb, "tolerance", wb_path, d.tolerance, 0, 1))
    if mt.writeback.policy not in ("best", "newest"):
        r.error(wb_path + ("policy",), f"model_training.writeback.policy is "
                                       f"{mt.writeback.policy!r}; use best (a new run takes "
                                       f"over only if its held-out macro-F1 is not worse) or "
                                       f"newest.")

    ar_path = path + ("auto_retrain",)
    ar = r.mapping(m.get("auto_retrain"), ar_path,
                   ("enabled", "trainer", "schemas", "params", "update_frequency",
                    "min_interval_s", "backend"), "model_training.auto_retrain")
    auto = AutoRetrain()
    auto.enabled = r.boolean(ar, "enabled", ar_path, auto.enabled)
    auto.trainer = r.text(ar, "trainer", ar_path, auto.trainer)
    auto.schemas = r.text_list(ar, "schemas", ar_path)
    params = ar.get("params")
    if params is not None and not isinstance(params, dict):
        r.error(ar_path + ("params",), "model_training.auto_retrain.params must be a mapping.")
    auto.params = dict(params or {}) if isinstance(params, dict) else {}
    auto.update_frequency = r.number(ar, "update_frequency", ar_path, auto.update_frequency,
                                     minimum=1, integer=True)
    auto.min_interval_s = r.number(ar, "min_interval_s", ar_path, auto.min_interval_s, minimum=0)
    auto.backend = r.text(ar, "backend", ar_path, auto.backend, numbers_ok=False)
    mt.auto_retrain = auto

    backends_raw = m.get("backends")
    mt.backends = implicit_backends()
    if backends_raw is not None and not isinstance(backends_raw, dict):
        r.error(path + ("backends",), "model_training.backends must be a mapping from a backend "
                                      "name to its settings.")
    elif backends_raw:
        for name, spec in backends_raw.items():
            b = parse_backend(r, str(name), spec, path + ("backends", name), resolve)
            if b is not None:
                mt.backends[str(name)] = b
    return mt


def _publish(r: Reader, raw, path: Path) -> Publish:
    m = r.mapping(raw, path, ("token_env", "license", "timeout_s"), "model_training.publish")
    out = Publish()
    out.token_env = r.text(m, "token_env", path, out.token_env, numbers_ok=False)
    if out.token_env.startswith("hf_"):  # a token pasted here: never echo it
        r.error(path + ("token_env",), "model_training.publish.token_env holds what looks like a "
                                       "Hugging Face token. Put the token in the server's "
                                       "environment (export HF_TOKEN=...) and name that variable "
                                       "here, or leave token_env out; then revoke the token, "
                                       "since the config file may have been shared.")
        out.token_env = Publish.token_env
    elif not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$", out.token_env):
        r.error(path + ("token_env",), f"model_training.publish.token_env is "
                                       f"{out.token_env!r}; it names an environment variable "
                                       f"(letters, digits and _), such as HF_TOKEN. The token "
                                       f"itself never goes in the config.")
        out.token_env = Publish.token_env
    out.license = r.text(m, "license", path, out.license, numbers_ok=False)
    if out.license is not None and not re.match(r"^[a-z0-9][a-z0-9.+-]{0,63}$", out.license):
        r.error(path + ("license",), f"model_training.publish.license is {out.license!r}; use a "
                                     f"license id of the Hub in lower case, such as apache-2.0, "
                                     f"mit or cc-by-4.0.")
        out.license = Publish.license
    out.timeout_s = r.number(m, "timeout_s", path, out.timeout_s, minimum=1, maximum=3600)
    return out
