"""Upstream Potato's crowdsourcing keys: workers arrive by a URL that carries their id, and
get a completion code (or a link back to their platform) when their items are done.

``parse`` reads ``login``, ``crowdsourcing``, ``completion_code`` and the redirect keys into
``Crowd`` (None when workers log in by name). ``Crowd.completion`` is what the "All done" page
shows one worker: computed from the config and the ids checked at arrival, never from the
request, so a return link always goes to a host the config names.

Upstream's providers (potato/crowdsourcing/providers upstream) differ in the URL parameters
they read and in what the done page offers; ``PROVIDERS`` holds that, one row a provider.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple
from urllib.parse import quote, urlsplit

from potato.config.reader import Path, Reader, dotted

# A worker's id, an invite's token and a captured parameter's name: the user names /login
# takes (potato.server.routes.USERNAME), whole-string.
NAME = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
# a captured value (an assignment, a study, turkSubmitTo): printable ASCII, bounded
VALUE = re.compile(r"[\x21-\x7e]{1,200}")
HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
MAX_CAPTURED = 20
PROLIFIC_URL = "https://app.prolific.com/submissions/complete?cc={code}"
SONA_URL = ("https://{hostname}/webstudy_credit.aspx?experiment_id={experiment_id}"
            "&credit_token={credit_token}&survey_code={worker_id}")
LOGIN_TYPES = ("url_direct", "prolific", "standard")


@dataclass(frozen=True)
class Provider:
    """What upstream's provider of this name reads at arrival: the id's parameter by
    default, the parameters kept as the worker's session and study ids, the others it keeps,
    and the keys its block takes beyond the common ones."""
    label: str
    id_param: str
    session: str = ""
    study: str = ""
    extra: Tuple[str, ...] = ()
    keys: Tuple[str, ...] = ()


COMMON_KEYS = ("id_param", "capture_params", "platform_label", "completion")
COMPLETION_KEYS = ("code", "redirect_url", "auto_redirect", "message", "failed_code",
                   "screened_out_code")
_PROLIFIC_API = ("token", "study_id", "config_file_path", "screen_out_on_block", "webhooks")
PROVIDERS: Dict[str, Provider] = {
    "prolific": Provider("Prolific", "PROLIFIC_PID", "SESSION_ID", "STUDY_ID",
                         keys=_PROLIFIC_API),
    "mturk": Provider("MTurk", "workerId", "assignmentId", "hitId", ("turkSubmitTo",)),
    "connect": Provider("Connect", "participantId", "assignmentId", "projectId"),
    "generic": Provider("your crowdsourcing platform", "PROLIFIC_PID"),
    "microworkers": Provider("Microworkers", "mw_id", "slot_id", "campaign_id",
                             keys=("vcode_secret", "vcode_prefix", "vcode_length")),
    "sona": Provider("SONA", "sona_code", keys=("hostname", "experiment_id", "credit_token")),
    "clickworker": Provider("Clickworker", "worker_id",
                            keys=("experimental", "postback_url", "postback_method",
                                  "api_key")),
    "expert": Provider("your contracting platform", "invite",
                       keys=("invites", "invites_file")),
    # login: {type: url_direct} with no crowdsourcing block: upstream's older behaviour
    "url_direct": Provider("your crowdsourcing platform", "PROLIFIC_PID", "SESSION_ID",
                           "STUDY_ID", ("assignmentId", "hitId", "turkSubmitTo")),
}


@dataclass(frozen=True)
class Completion:
    """What the done page shows one worker: a ``code`` (may be empty), a ``url`` back to the
    platform (may be empty), a ``message``, and a redirect after ``redirect_after`` seconds
    (None: none)."""
    label: str
    code: str = ""
    url: str = ""
    message: str = ""
    redirect_after: Optional[int] = None


@dataclass
class Crowd:
    """Workers arrive at ``/?<id_param>=<id>``; ``capture`` names the other parameters kept
    (as ``session_id``/``study_id`` where the provider says so)."""
    provider: str
    id_param: str
    label: str
    capture: Dict[str, str] = field(default_factory=dict)  # URL parameter -> name kept as
    code: str = ""
    redirect_url: str = ""      # a template: {code} {worker_id} {session_id} {study_id} ...
    auto_redirect: bool = False
    delay_ms: int = 5000
    message: str = ""
    invites: Dict[str, str] = field(default_factory=dict)  # expert: token -> user name
    vcode: Optional[Tuple[str, str, int]] = None  # microworkers: (secret, prefix, length)

    def worker(self, given: str) -> Optional[str]:
        """The annotator a checked id names: itself, or an invite token's user (None for an
        unknown token)."""
        if self.provider != "expert":
            return given
        for token, user in self.invites.items():  # compared in constant time, each one
            if hmac.compare_digest(token.encode(), given.encode()):
                return user
        return None

    def completion(self, worker: str, ids: Dict[str, str]) -> Completion:
        """What the done page offers ``worker``, whose arrival kept ``ids``."""
        code, url = self.code, ""
        if self.vcode:
            secret, prefix, length = self.vcode
            code = vcode(secret, worker, ids.get("study_id", ""), prefix, length)
        values = {"code": code, "worker_id": worker, "session_id": ids.get("session_id", ""),
                  "study_id": ids.get("study_id", ""), **{k: v for k, v in ids.items()
                                                          if k not in ("code", "worker_id")}}
        if self.redirect_url and (code or "{code}" not in self.redirect_url):
            url = fill(self.redirect_url, values)
        elif self.provider == "prolific" or self.provider == "url_direct" and \
                self.id_param.lower() == "prolific_pid":
            url = fill(PROLIFIC_URL, values) if code else ""
        wait = math.ceil(self.delay_ms / 1000) if self.auto_redirect and url else None
        return Completion(self.label, code, url, self.message, wait)


def vcode(secret: str, worker: str, campaign: str, prefix: str, length: int) -> str:
    """Upstream's Microworkers VCODE: an HMAC-SHA256 of ``worker:campaign`` under the
    secret, ``length`` hex digits after ``prefix``: the same worker always gets the same one,
    and it cannot be made without the secret."""
    digest = hmac.new(secret.encode(), f"{worker}:{campaign}".encode(), hashlib.sha256)
    return prefix + digest.hexdigest()[:length]


_FIELD = re.compile(r"\{([A-Za-z0-9_.@+-]*)\}")


def fill(template: str, values: Dict[str, str]) -> str:
    """The template with each {name} replaced by its value URL-encoded (nothing where the
    worker's arrival did not give it)."""
    return _FIELD.sub(lambda m: quote(str(values.get(m.group(1)) or ""), safe=""), template)


# -- reading the config -------------------------------------------------------------------------


def login_type(r: Reader, value: Any) -> Optional[str]:
    """``login.type`` when it is one this Potato runs, else an error and None (a login that
    is not a mapping is parse's error)."""
    kind = value.get("type", "standard") if isinstance(value, dict) else "standard"
    if kind in LOGIN_TYPES:
        return kind
    r.error(("login", "type"), "login.type is %s: upstream's %s login is not supported here: "
                               "annotators log in with a user name, or crowd workers by their "
                               "platform's link. Use login: {type: url_direct, url_argument: "
                               "<the id's URL parameter>}, or remove login."
            % (ascii(kind)[:60], "password" if kind == "password" else "single sign-on or "
               "other" if isinstance(kind, str) else "other"))
    return None


def provider_of(r: Reader, block: Any) -> Optional[str]:
    """``crowdsourcing.provider`` when it names one of ``PROVIDERS``, else an error and None."""
    name = block.get("provider") if isinstance(block, dict) else None
    if not isinstance(block, dict):
        r.error(("crowdsourcing",), "crowdsourcing must be a mapping. Give it as {provider: "
                                    "<name>, <name>: {...}}, the provider one of %s."
                % ", ".join(PROVIDERS))
    elif name is None:
        r.mapping(block, ("crowdsourcing",), ("provider",) + tuple(PROVIDERS), "crowdsourcing")
        r.error(("crowdsourcing",), "crowdsourcing names no provider. Give it one: provider: "
                                    "%s." % " | ".join(PROVIDERS))
    elif not isinstance(name, str) or name not in PROVIDERS:
        r.error(("crowdsourcing", "provider"), "crowdsourcing.provider %s is not a provider "
                "this Potato knows. Use one of %s, or generic (any platform that sends an id "
                "and takes a code or a link back)." % (ascii(name)[:60], ", ".join(PROVIDERS)))
    else:
        return name
    return None


def parse(r: Reader, m: Dict[str, Any]) -> Optional[Crowd]:
    """``Crowd`` from the implemented top-level keys ``m`` (login, crowdsourcing,
    completion_code, auto_redirect_*), or None when workers log in by name."""
    login = r.mapping(m.get("login"), ("login",), ("type", "url_argument"), "login")
    kind = login.get("type", "standard") if isinstance(m.get("login"), dict) else None
    argument = r.text(login, "url_argument", ("login",), None, numbers_ok=False)
    top_code = r.text(m, "completion_code", (), "") or ""
    auto = r.boolean(m, "auto_redirect_on_completion", (), False)
    delay = r.number(m, "auto_redirect_delay", (), 5000, 0, 600000, integer=True)
    block = m.get("crowdsourcing")  # its provider checked by provider_of (or not here)
    name = block.get("provider") if isinstance(block, dict) else None
    if name is None and kind not in ("url_direct", "prolific"):
        for key in ("completion_code", "auto_redirect_on_completion"):
            if m.get(key):
                r.warn((key,), f"{key} is set, but workers do not arrive by a platform's link "
                               f"(login.type url_direct), so no page shows it. Add login: "
                               f"{{type: url_direct, url_argument: ...}}, or remove {key}.")
        return None
    provider = PROVIDERS[name or "url_direct"]
    path: Path = ("crowdsourcing", name) if name else ("login",)
    if name:
        r.mapping(block, ("crowdsourcing",), ("provider",) + tuple(PROVIDERS), "crowdsourcing")
        for other in set(block) & set(PROVIDERS) - {name}:
            r.warn(("crowdsourcing", other), f"crowdsourcing.{other} is ignored: the provider "
                                             f"is {name}. Remove it, or set provider: {other}.")
    sub = r.mapping(block.get(name) if name else None, path, COMMON_KEYS + provider.keys,
                    f"crowdsourcing.{name}")
    done = r.mapping(sub.get("completion"), path + ("completion",), COMPLETION_KEYS,
                     "a completion block")
    id_param = _name(r, sub, "id_param", path) or (argument if not name else None) or \
        provider.id_param
    if argument and argument != id_param:
        r.error(("login", "url_argument"), f"login.url_argument is {argument!r}, but "
                f"{dotted(path)} reads the worker's id from {id_param!r} (its id_param). Give "
                f"both the same name: the parameter your platform's link carries.")
    if argument is not None and not NAME.fullmatch(argument):
        r.error(("login", "url_argument"), "login.url_argument must be a URL parameter's "
                "name: 1 to 64 letters, digits or _ . @ + -.")
    label = provider.label if name else {"prolific_pid": "Prolific", "workerid": "MTurk"}.get(
        id_param.lower(), provider.label)  # upstream's older links: Prolific's or MTurk's
    crowd = Crowd(name or "url_direct", id_param, r.text(sub, "platform_label", path) or label, code=r.text(done, "code", path + ("completion",)) or top_code,
                  auto_redirect=r.boolean(done, "auto_redirect", path + ("completion",), auto),
                  delay_ms=int(delay), message=r.text(done, "message", path +
                                                      ("completion",), "") or "")
    if provider.session:
        crowd.capture[provider.session] = "session_id"
    if provider.study:
        crowd.capture[provider.study] = "study_id"
    captured = r.text_list(sub, "capture_params", path)
    for param in list(provider.extra) + captured:
        if not NAME.fullmatch(param) or param in ("code", "worker_id", id_param):
            r.error(path + ("capture_params",), f"{dotted(path + ('capture_params',))}: "
                    f"{param[:70]!r} cannot be kept: a parameter's name is 1 to 64 letters, "
                    f"digits or _ . @ + -, and not code, worker_id or the id's own parameter.")
            continue
        crowd.capture.setdefault(param, param)
    if len(crowd.capture) > MAX_CAPTURED:
        r.error(path + ("capture_params",), f"{dotted(path)} keeps {len(crowd.capture)} URL "
                f"parameters; at most {MAX_CAPTURED} are kept. List fewer in capture_params.")
    _redirect(r, crowd, done, path + ("completion",))
    _provider_keys(r, crowd, sub, path)
    if crowd.auto_redirect and not crowd.redirect_url and crowd.provider not in (
            "prolific", "sona") and not (crowd.provider == "url_direct" and
                                         id_param.lower() == "prolific_pid"):
        r.warn(("auto_redirect_on_completion",), "auto_redirect_on_completion is true, but "
               "there is no page to send workers to (no completion.redirect_url): they stay "
               "on the done page with their code. Add a redirect_url, or remove it.")
    probe = crowd.completion("worker", {})
    if not (probe.code or probe.url or probe.message):
        r.warn(path, f"{dotted(path)}: workers who finish get no completion code and no link "
                     f"back (the done page only thanks them), so their platform cannot tell "
                     f"who finished. Set completion_code, or completion.code in the provider's "
                     f"block.")
    return crowd


def _name(r: Reader, m: Dict[str, Any], key: str, path: Path) -> Optional[str]:
    value = r.text(m, key, path, None, numbers_ok=False)
    if value is not None and not NAME.fullmatch(value):
        r.error(path + (key,), f"{dotted(path + (key,))} must be a URL parameter's name: 1 to "
                               f"64 letters, digits or _ . @ + -.")
        return None
    return value


def _redirect(r: Reader, crowd: Crowd, done: Dict[str, Any], path: Path) -> None:
    """completion.redirect_url: an http(s) address whose host the config names outright (a
    {field} there would let a link choose where workers are sent)."""
    url = r.text(done, "redirect_url", path, None, numbers_ok=False)
    if url is None:
        return
    where = dotted(path + ("redirect_url",))
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or "{" in parts.netloc \
            or "\\" in url or any(ord(c) < 33 or ord(c) > 126 for c in url.strip()):
        r.error(path + ("redirect_url",), f"{where} must be an http:// or https:// address "
                f"whose host is written out (no {{field}} before the path, no spaces or "
                f"backslashes), like "
                f"https://panel.example.com/complete?rid={{worker_id}}&code={{code}}.")
        return
    known = {"code", "worker_id", "session_id", "study_id"} | set(crowd.capture.values())
    for unknown in sorted(set(_FIELD.findall(url)) - known):
        r.warn(path + ("redirect_url",), f"{where} has {{{unknown}}}, which no arrival fills "
               f"(it is left empty). Use {', '.join('{%s}' % k for k in sorted(known))}, or add "
               f"{unknown} to capture_params.")
    crowd.redirect_url = url.strip()


def _provider_keys(r: Reader, crowd: Crowd, sub: Dict[str, Any], path: Path) -> None:
    """The keys of one provider beyond the common ones."""
    if crowd.provider == "microworkers":
        crowd.message = crowd.message or ("Paste this code into your Microworkers task to "
                                          "prove your work.")
        secret = r.text(sub, "vcode_secret", path, None, numbers_ok=False)
        length = r.number(sub, "vcode_length", path, 12, 4, 64, integer=True)
        prefix = r.text(sub, "vcode_prefix", path, "") or ""
        if not VALUE.fullmatch(prefix or "x") or len(prefix) > 20:
            r.error(path + ("vcode_prefix",), f"{dotted(path + ('vcode_prefix',))} must be up "
                                              f"to 20 printable characters, no spaces.")
        if secret and len(secret) >= 8:
            crowd.vcode = (secret, prefix, int(length))
        else:
            r.error(path + ("vcode_secret",), f"{dotted(path + ('vcode_secret',))} must be a "
                    f"secret of 8 characters or more: each worker's VCODE is made from it, and "
                    f"without one no worker could prove their work. Set a long random string.")
    elif crowd.provider == "sona":
        _sona(r, crowd, sub, path)
    elif crowd.provider == "expert":
        _invites(r, crowd, sub, path)
    elif crowd.provider == "clickworker" and sub.get("postback_url"):
        r.error(path + ("postback_url",), f"{dotted(path + ('postback_url',))}: upstream's "
                f"experimental Clickworker payment postback is not sent here: workers would not "
                f"be paid by it. Remove it, and upload the completion code to Clickworker.")
    elif crowd.provider == "prolific":
        for key in sorted(set(sub) & set(_PROLIFIC_API)):
            r.warn(path + (key,), f"{dotted(path + (key,))}: upstream's link to Prolific's API "
                                  f"(session tracking, screen-outs, webhooks) is not used here; "
                                  f"workers still get their completion code and link. Remove "
                                  f"it.")


def _sona(r: Reader, crowd: Crowd, sub: Dict[str, Any], path: Path) -> None:
    """SONA: the credit link (upstream also grants the credit from the server first; not
    here: the participant's browser follows the link)."""
    host = r.text(sub, "hostname", path, None, numbers_ok=False)
    experiment = r.text(sub, "experiment_id", path, None)
    token = r.text(sub, "credit_token", path, None)
    if not host or not HOSTNAME.fullmatch(host):
        r.error(path + ("hostname",), f"{dotted(path + ('hostname',))} must be your SONA "
                                      f"site's host name, like yourdept.sona-systems.com.")
        return
    for key, value in (("experiment_id", experiment), ("credit_token", token)):
        if not value or not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", value):
            r.error(path + (key,), f"{dotted(path + (key,))} must be the {key} SONA shows for "
                                   f"the study (letters, digits, _ or -).")
            return
    crowd.redirect_url = (SONA_URL.replace("{hostname}", host)
                          .replace("{experiment_id}", quote(experiment, safe=""))
                          .replace("{credit_token}", quote(token, safe="")))
    r.warn(path, f"{dotted(path)}: upstream grants SONA credit from the server when a "
                 f"participant finishes; here the done page links to SONA's credit page (and "
                 f"goes there itself with auto_redirect_on_completion: true): a participant who "
                 f"closes the tab first gets no credit. Grant it in SONA then.")


def _invites(r: Reader, crowd: Crowd, sub: Dict[str, Any], path: Path) -> None:
    """expert: invite tokens, each naming the user it logs in as."""
    crowd.message = crowd.message or "Your work is recorded. Thank you."
    if "invites_file" in sub:
        r.error(path + ("invites_file",), f"{dotted(path + ('invites_file',))} is not read "
                f"here: list the tokens under invites ({{token: user name}}) instead.")
    raw = sub.get("invites")
    where = path + ("invites",)
    if not isinstance(raw, dict) or not raw:
        r.error(where, f"{dotted(where)} must map each invite token to the user name it logs "
                       f"in as ({{k3J9mQ2xLp8v: expert-1}}); without one nobody can log in.")
        return
    users: Dict[str, str] = {}
    for token, user in raw.items():
        if user is None:  # review 39.11: the token would be the user name, seen everywhere
            r.error(where + (str(token),), f"{dotted(where)}: the token {str(token)[:12]!r}... "
                    f"names no user; give the user name it logs in as.")
            continue
        token, user = str(token), str(user)
        if not NAME.fullmatch(token) or len(token) < 8 or not NAME.fullmatch(user):
            r.error(where + (token,), f"{dotted(where)}: an invite token must be 8 to 64, and "
                    f"its user name 1 to 64, letters, digits or _ . @ + - (the token {token[:12]!r}"
                    f"... is not). Make a long random token for each expert.")
            continue
        if user in users.values():
            r.error(where + (token,), f"{dotted(where)}: two tokens log in as {user!r}; give "
                                      f"each expert one token and their own user name.")
        users[token] = user
        if len(set(token)) < 6 or user.lower() in token.lower():  # review 39.11
            r.warn(where + (token,), f"{dotted(where)}: the token {token[:12]!r}... is easy "
                   f"to guess (few different characters, or the user's own name), and it lets "
                   f"its holder in. Make a long random one: python3 -c 'import secrets; "
                   f"print(secrets.token_urlsafe(16))'.")
    crowd.invites = users
