"""Upstream Potato's config, read here: a lab that already runs upstream Potato
(github.com/davidjurgens/potato) brings its config.

``split`` sorts a config's top level by ``potato.config.upstream_keys.POLICY`` (implemented,
accepted, refused); a key in neither that table nor ours is a warning naming it, unless it is
close to a known key, which stays the "did you mean" error it always was. ``_parse`` turns the
implemented keys into ``Upstream`` (read by config, pages and assignment).
"""

from __future__ import annotations

import codecs
import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from potato.config import crowd
from potato.config.reader import Path, Reader, dotted
from potato.config.upstream_keys import ACCEPTED, IMPLEMENTED, OFF_SWITCHES, POLICY, REFUSED


@dataclass
class DisplayField:
    """One ``instance_display.fields`` entry: the item's ``key`` shown as ``type``."""
    key: str
    type: str
    label: str = ""
    span_target: bool = False  # upstream: spans mark this field (settings checks text_key)
    at: int = 0                # its place in instance_display.fields
    options: Dict[str, Any] = field(default_factory=dict)  # its display_options (a mapping)


@dataclass
class Upstream:
    """What an upstream config asked for, sorted by policy, and the implemented keys' values."""
    implemented: List[str] = field(default_factory=list)
    accepted: List[str] = field(default_factory=list)
    refused: List[str] = field(default_factory=list)
    unknown: List[str] = field(default_factory=list)
    instructions: str = ""
    codebook_url: Optional[str] = None
    port: Optional[int] = None
    per_item: Optional[int] = None   # annotators per item; None: every annotator gets it
    per_user: Optional[int] = None   # items per annotator; None: all of them
    strategy: str = "fixed_order"    # assignment_strategy: one of STRATEGIES
    active_learning: Any = None      # the raw active_learning block (config/active_learning.py)
    diversity: Any = None            # the raw diversity_ordering block (config/diversity_order.py)
    all_required: bool = False
    display: List[DisplayField] = field(default_factory=list)
    # what else blocks the config: a scheme type or display type not here -> how many schemes
    # or fields ask for it (the migration report lists these with the refused keys)
    blockers: Dict[str, int] = field(default_factory=dict)
    crowd: Optional[crowd.Crowd] = None  # workers arrive by a platform's link (config/crowd.py)
    hide_navbar: bool = False        # no user name and Log out on annotators' pages
    no_jump: bool = False            # jumping_to_id_disabled: no Go to item box

    @property
    def seen(self) -> bool:
        return bool(self.implemented or self.accepted or self.refused or self.unknown)


def split(r: Reader, data: Any, ours: Tuple[str, ...]) -> Tuple[Dict[str, Any], Upstream]:
    """(our top-level keys, Upstream) of a config's top level, with problems recorded."""
    up = Upstream()
    if data is not None and not isinstance(data, dict):
        return r.mapping(data, (), ours, "a Potato config"), up
    top: Dict[str, Any] = {}
    raw: Dict[str, Any] = {}
    for key, value in (data or {}).items():
        if key in ours:
            top[key] = value
        elif key in POLICY:
            raw[key] = value
        else:
            close = difflib.get_close_matches(str(key), list(ours) + list(POLICY), 1, 0.8)
            if close:
                r.error((key,), f"{key} is not a key a Potato config accepts. Did you mean "
                                f"{close[0]}? Valid keys: {', '.join(ours)}.")
            else:
                up.unknown.append(str(key))
                r.warn((key,), f"{key} is not a key of this Potato nor of upstream Potato; it "
                               f"is ignored. Remove it (or check its spelling).")
    _parse(r, raw, up)
    return top, up


def _status(r: Reader, key: str, value: Any) -> str:
    """The policy of ``key`` for this value (some keys are implemented in one form only)."""
    status = POLICY[key].status
    if key == "user_config" and isinstance(value, dict):
        users = value.get("users")
        if value.get("require_password") is True:
            r.error((key, "require_password"), "user_config.require_password: true asks for "
                    "passwords; annotators log in here with a user name alone. Remove it (or "
                    "set it to false), and keep the server on a network only your annotators "
                    "reach.")
            return REFUSED
        if users or value.get("allow_all_users") is False or \
                value.get("allow_new_users") is False:
            r.error((key,), "user_config lists the users who may log in (or sets "
                            "allow_all_users or allow_new_users to false); this Potato lets "
                            "anyone with a user name "
                            "in. Remove the user list and set allow_all_users: true, and keep "
                            "the server on a network only your annotators reach.")
            return REFUSED
    if key == "require_password" and value is True or key == "require_no_password" and \
            value is False:
        r.error((key,), f"{key}: {str(value).lower()} asks for passwords; annotators log in "
                        f"here with a user name alone. Remove {key} (or set require_password: "
                        f"false), and keep the server on a network only your annotators reach.")
        return REFUSED
    if key == "login":
        return IMPLEMENTED if crowd.login_type(r, value) else REFUSED
    if key == "crowdsourcing":
        return IMPLEMENTED if crowd.provider_of(r, value) else REFUSED
    if key == "num_annotators_per_item" and isinstance(value, dict):
        r.error((key,), "num_annotators_per_item is a mapping (overlap sampling and adaptive "
                        "rules), which is not implemented here. Give an integer: how many "
                        "annotators get each item.")
        return REFUSED
    if status == REFUSED and turned_off(key, value):
        return ACCEPTED  # a feature switched off asks for nothing
    if status == REFUSED:
        r.error((key,), f"{key} is upstream Potato's, and refused here: {POLICY[key].why}")
    return status


def turned_off(key: str, value: Any) -> bool:
    """A refused upstream feature the config switches off, as upstream's own code reads its
    switch (``OFF_SWITCHES``): null, false, or a mapping whose every switch is false."""
    switches = OFF_SWITCHES.get(key)
    if not switches:
        return False
    if value is None or value is False:
        return True
    given = [value[k] for k in switches if k in value] if isinstance(value, dict) else []
    return bool(given) and all(v is False for v in given)


_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(\s[^<>]*)?/?>")


def _parse(r: Reader, raw: Dict[str, Any], up: Upstream) -> None:
    for key, value in raw.items():
        status = _status(r, key, value)
        getattr(up, {IMPLEMENTED: "implemented", ACCEPTED: "accepted",
                     REFUSED: "refused"}[status]).append(key)
    m = {k: raw[k] for k in up.implemented}
    texts = [r.text(m, k, ()) for k in ("task_description", "annotation_task_description",
                                        "annotation_instructions")]
    up.instructions = "\n\n".join(dict.fromkeys(t.strip() for t in texts if t and t.strip()))
    for key, t in zip(("task_description", "annotation_task_description",
                       "annotation_instructions"), texts):
        tag = _HTML_TAG.search(t or "")
        if tag:
            r.warn((key,), f"{key} holds HTML ({tag.group()[:40]}): upstream Potato renders it, "
                           f"this Potato shows it as text, the tags as written (a page never "
                           f"runs markup from a config). Write the instructions as plain text.")
    url = r.text(m, "annotation_codebook_url", (), None, numbers_ok=False)
    if url and not url.strip().lower().startswith(("http://", "https://")):
        r.error(("annotation_codebook_url",), f"annotation_codebook_url is {url!r}; give an "
                                              f"http:// or https:// address.")
        url = None
    up.codebook_url = url.strip() if url else None
    up.port = r.number(m, "port", (), None, 0, 65535, integer=True)
    if "user_config" in m:
        uc = r.mapping(m["user_config"], ("user_config",), (
            "allow_all_users", "allow_anonymous", "allow_new_users", "require_password",
            "users"), "user_config")
        for key in ("allow_all_users", "allow_anonymous", "allow_new_users", "require_password"):
            r.boolean(uc, key, ("user_config",), False)
    for key in ("require_password", "require_no_password", "require_fully_annotated"):
        r.boolean(m, key, (), False)
    up.all_required = m.get("require_fully_annotated") is True
    per_item = _limit(r, m, "num_annotators_per_item")
    cap = _limit(r, m, "max_annotations_per_item")
    up.per_item = min(x for x in (per_item, cap) if x) if per_item or cap else None
    up.per_user = _limit(r, m, "max_annotations_per_user")
    if "assignment_strategy" in m:
        up.strategy = _strategy(r, m["assignment_strategy"])
    up.active_learning = m.get("active_learning")
    up.diversity = m.get("diversity_ordering")
    if "instance_display" in m:
        up.display = _display(r, m["instance_display"], up.blockers)
    up.crowd = crowd.parse(r, m)
    up.hide_navbar = r.boolean(m, "hide_navbar", (), False)
    up.no_jump = r.boolean(m, "jumping_to_id_disabled", (), False)


STRATEGIES = ("fixed_order", "least_annotated", "random", "active_learning",
              "diversity_clustering")


def _strategy(r: Reader, value: Any) -> str:
    """upstream's assignment_strategy: the ones implemented here, or a warning that says what
    annotators get instead (data-file order)."""
    name = value.strip().lower().replace("-", "_") if isinstance(value, str) else None
    if name in STRATEGIES:
        return name
    if name is None:
        r.warn(("assignment_strategy",), "assignment_strategy is %s, not a strategy's name: "
                                         "annotators get items in data-file order. Use "
                                         "fixed_order, random, least_annotated, "
                                         "active_learning or diversity_clustering."
               % repr(value)[:60])
        return "fixed_order"
    r.warn(("assignment_strategy",), "assignment_strategy %s is upstream Potato's and not "
                                     "implemented here: annotators get items in data-file order "
                                     "(fixed_order). Use fixed_order, random, "
                                     "least_annotated (the items the fewest annotators have "
                                     "labelled first), active_learning (the model in use "
                                     "ranks them) or diversity_clustering (clusters of the "
                                     "items in turn)."
           % (repr(value)[:60] if not isinstance(value, str) else value[:60]))
    return "fixed_order"


def _limit(r: Reader, m: Dict[str, Any], key: str) -> Optional[int]:
    """A count of at least 1, or None for "no limit" (absent, -1 or 0 as upstream writes it)."""
    value = r.number(m, key, (), None, -1, integer=True)
    return value if value and value > 0 else None


DISPLAY_TYPES = ("text", "dialogue", "spreadsheet", "code", "document", "agent_trace",
                 "coding_trace", "image", "audio", "video")
MEDIA_FIELDS = ("image", "audio", "video")  # shown from the media folder or a URL (potato/project/media.py)
MEDIA_TYPES = ("pdf", "gallery", "audio_dialogue")  # not shown here


def _display(r: Reader, raw: Any, blockers: Dict[str, int]) -> List[DisplayField]:
    path: Path = ("instance_display",)
    m = r.mapping(raw, path, ("fields", "layout"), "instance_display")
    fields = m.get("fields")
    if fields is None:
        return []
    if not isinstance(fields, list):
        r.error(path + ("fields",), "instance_display.fields must be a list of {key, type}.")
        return []
    out = []
    for i, f in enumerate(fields):
        p = path + ("fields", i)
        fm = r.mapping(f, p, ("key", "type", "label", "display_options", "span_target"),
                       "an instance_display field")
        key, kind = r.text(fm, "key", p), r.text(fm, "type", p, "text")
        if not key:
            r.error(p, f"{dotted(p)} has no key: name the item field it shows.")
            continue
        options = fm.get("display_options")
        if isinstance(options, dict) and options.get("per_turn_ratings") is not None:
            blockers["display_options.per_turn_ratings"] = \
                blockers.get("display_options.per_turn_ratings", 0) + 1
            r.error(p + ("display_options", "per_turn_ratings"),
                    f"{dotted(p + ('display_options', 'per_turn_ratings'))} (field {key!r}): "
                    f"upstream's rating of each turn of a dialogue is not implemented here: "
                    f"its scheme would not be shown, nor its answers kept. Remove it, and rate "
                    f"the whole dialogue with a scheme, or make one item per turn.")
        if kind not in DISPLAY_TYPES and (kind or "").strip():
            what = "instance_display type %s" % kind
            blockers[what] = blockers.get(what, 0) + 1
        if kind in MEDIA_TYPES:
            r.error(p + ("type",), f"{dotted(p + ('type',))} is {kind} (field {key!r}): only "
                                  f"image, audio and video media are shown here. Remove the "
                                  f"field, or show a still image (type: image) instead.")
        elif kind not in DISPLAY_TYPES:
            r.error(p + ("type",), f"{dotted(p + ('type',))} is {kind!r} (field {key!r}), which "
                                  f"is not implemented here (traces, a pairwise "
                                  f"display and the like; a pairwise scheme shows its item's "
                                  f"responses itself). Use one of {', '.join(DISPLAY_TYPES)}, "
                                  f"or remove the field.")
        else:
            out.append(DisplayField(key, kind, r.text(fm, "label", p, "") or "",
                                    r.boolean(fm, "span_target", p, False), i,
                                    options if isinstance(options, dict) else {}))
    return out


def span_targets(r: Reader, display: List[DisplayField], text_key: str, marked: bool,
                 blockers: Dict[str, int]) -> None:
    """Upstream's ``span_target``: spans here mark one field, the item's text (``text_key``),
    as plain text. Without a scheme that marks spans (``marked``) it changes nothing: said.
    What it refuses is counted in ``blockers`` (the migration report)."""
    before = len(r.errors)
    targets = [f for f in display if f.span_target]
    if targets and not marked:
        path = ("instance_display", "fields", targets[0].at, "span_target")
        r.warn(path, f"{dotted(path)}: no scheme of this project marks spans, so span_target "
                     f"(on {', '.join(repr(f.key) for f in targets)}) changes nothing. Remove "
                     f"it, or add a span scheme.")
        return
    if len(targets) > 1:
        r.error(("instance_display", "fields"),
                f"instance_display marks spans on {len(targets)} fields "
                f"({', '.join(f.key for f in targets)}); spans here mark one field, the item's "
                f"text (item_properties.text_key). Keep span_target on one field and set "
                f"text_key to it, or keep this project on upstream Potato.")
    for f in targets if len(targets) == 1 else []:
        path = ("instance_display", "fields", f.at, "span_target")
        if f.key != text_key:
            r.error(path, f"{dotted(path)}: spans here mark the item's text, the field "
                          f"item_properties.text_key names ({text_key!r}), not {f.key!r}. "
                          f"Set item_properties.text_key: {f.key} (spans then mark it), or "
                          f"remove span_target.")
        elif f.type not in ("text", "code"):
            r.error(path, f"{dotted(path)}: spans here mark plain text, and field {f.key!r} is "
                          f"shown as {f.type}. Show it as text (type: text), or mark spans on "
                          f"another field.")
    for f in display if marked else []:  # the text spans mark, shown as something else
        if f.key == text_key and not f.span_target and f.type not in ("text", "code"):
            path = ("instance_display", "fields", f.at, "type")
            r.error(path, f"{dotted(path)}: field {f.key!r} is the text spans mark "
                          f"(item_properties.text_key), and it is shown as {f.type}, where "
                          f"nothing can be marked. Show it as text (type: text), or set "
                          f"item_properties.text_key to the field spans should mark.")
    if len(r.errors) > before:
        blockers["spans on a field they cannot mark"] = len(r.errors) - before


def data_files(r: Reader, raw: Any) -> List[Tuple[str, str]]:
    """``data_files`` as (path, encoding) pairs: each entry a path, or upstream's mapping
    ``{path, encoding}`` (encoding defaults to utf-8)."""
    path: Path = ("data_files",)
    if raw is None:
        return []
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list):
        r.error(path, "data_files must be a list of paths (or {path, encoding} mappings).")
        return []
    out = []
    for i, entry in enumerate(raw):
        p = path + (i,)
        if isinstance(entry, dict):
            m = r.mapping(entry, p, ("path", "encoding", "format", "type"), "a data_files entry")
            where, encoding = r.text(m, "path", p), r.text(m, "encoding", p, "utf-8")
            if not where:
                r.error(p, f"{dotted(p)} has no path: give the data file's path.")
                continue
            try:  # a codec Python knows, for text (not rot13, base64), that can encode
                text_codec = (codecs.lookup(encoding)._is_text_encoding
                              and "".encode(encoding) == b"")
            except (LookupError, UnicodeError):
                text_codec = False
            if not text_codec:
                r.error(p + ("encoding",), f"{dotted(p)}.encoding is {encoding!r}, which is not "
                                           f"a text encoding Python knows; use utf-8, latin-1, "
                                           f"cp1252 ...")
                encoding = "utf-8"
            out.append((where, encoding))
        elif isinstance(entry, (str, int, float)) and not isinstance(entry, bool):
            out.append((str(entry), "utf-8"))
        else:
            r.error(p, f"{dotted(p)} must be a path or a mapping {{path, encoding}}.")
    return out
