"""Talking to the Hugging Face Hub through its client library, ``huggingface_hub`` (the
``publish`` extra): check the token, create or find the repo, commit the files; and every way
that can fail, turned into one sentence that says what to do.

Imported only when a publish starts: the server runs without the library. The token is passed
to the client in this process only (never on a command line, in a file or in a message), and
the client talks only to ``endpoint`` (``HF_ENDPOINT``, default https://huggingface.co).
"""

import os
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

DEFAULT_ENDPOINT = "https://huggingface.co"
EXTRA = "pip install 'potato-annotation[publish]'"
NO_LIBRARY = ("Publishing to the Hugging Face Hub needs the huggingface_hub package, which this "
              "server's Python does not have: %s (or pip install huggingface_hub) where the "
              "server runs, restart the server, and publish again." % EXTRA)
OID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # fullmatch: "$" would take a final newline
SERVER_MESSAGE_MAX = 200


@dataclass(frozen=True)
class Commit:
    """What one publish commits: to ``repo_id`` (a bare name goes under the token's account),
    made ``private`` or not when it is new, with the commit ``message`` and ``description``;
    ``files``: (path in the repo, local path) each; the card is added as README.md."""

    repo_id: str
    private: bool
    message: str
    description: str
    files: List[Tuple[str, str]]


class HubFailure(Exception):
    """A publish that failed; ``str()`` is the sentence the run page shows."""


def available() -> bool:
    """Whether huggingface_hub can be imported here (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("huggingface_hub") is not None
    except (ImportError, ValueError):  # a module entry of None: blocked on purpose
        return False


def endpoint_of(environ) -> str:
    """The Hub the client talks to: HF_ENDPOINT (as huggingface_hub itself reads it), checked."""
    value = (environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    if not re.match(r"^https?://[A-Za-z0-9.\-\[\]:]+(/[\w.\-/]*)?$", value):
        raise HubFailure("HF_ENDPOINT in the server's environment is not an http(s) URL; unset "
                         "it to publish to https://huggingface.co, or set it to your Hub's URL.")
    return value


def _clean(text: Any, token: str) -> str:
    """Text from the Hub for a sentence: one line, capped, and never the token, nor a piece
    of it: the whole token is masked before the cap cuts (a cut first would leave the head of
    a token that straddles it)."""
    text = str(text or "")
    if token:
        text = text.replace(token, "***")
    return " ".join(text.split())[:SERVER_MESSAGE_MAX]


class Session:
    """One publish's conversation with the Hub (huggingface_hub's shared HTTP client, given
    this publish's timeout and closed at the end so no connection outlives it)."""

    def __init__(self, endpoint: str, token: str, timeout_s: float, token_env: str):
        try:
            import huggingface_hub
            from huggingface_hub import HfApi
            from huggingface_hub.utils._http import default_client_factory as factory
        except ImportError:
            raise HubFailure(NO_LIBRARY)
        self.hh = huggingface_hub
        self.endpoint, self.token, self.timeout_s = endpoint, token, timeout_s
        self.token_env = token_env
        self.account = ""
        self.role = ""
        self.doing = "checking the token"
        huggingface_hub.utils.disable_progress_bars()  # no tqdm lines or monitor threads

        def client():
            c = factory()
            c.timeout = float(timeout_s)  # the library's default waits forever
            return c

        huggingface_hub.set_client_factory(client)
        self.api = HfApi(endpoint=endpoint, token=token, library_name="potato-annotation")

    def close(self) -> None:
        self.hh.close_session()

    def whoami(self) -> str:
        """The token's account name; a read-only token fails here, before anything is made."""
        self.doing = "checking the token"
        info = self.api.whoami()
        name = info.get("name") if isinstance(info, dict) else None
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", name):
            raise HubFailure("The Hugging Face Hub at %s answered the token check without an "
                             "account name; check that HF_ENDPOINT points at a Hub." % self.endpoint)
        self.account = name
        auth = info.get("auth") if isinstance(info.get("auth"), dict) else {}
        token = auth.get("accessToken") if isinstance(auth.get("accessToken"), dict) else {}
        self.role = str(token.get("role") or "")
        if self.role == "read":
            raise HubFailure(self._read_only())
        return name

    def _read_only(self) -> str:
        return ("The token in %s (account %s) can only read, so it cannot publish. Create a "
                "token with write access at %s/settings/tokens, put it in %s where the server "
                "starts, restart the server, and publish again." % (
                    self.token_env, self.account, self.endpoint, self.token_env))

    def push(self, commit: Commit, card: bytes, step: Callable[[str], None]) -> str:
        """Create the repo (``commit.repo_id``, the account's part included) if it is new,
        commit the files and the card as README.md; returns the commit id."""
        from huggingface_hub import CommitOperationAdd

        repo_id, files = commit.repo_id, commit.files

        self.doing = "preparing the upload"
        gone = [local for _, local in files if not os.path.isfile(local)]
        if gone:
            raise HubFailure(self.vanished(gone[0]))
        self.doing = "creating the repo %s" % repo_id
        step("creating the repo %s (or finding it)" % repo_id)
        self.api.create_repo(repo_id, private=commit.private, exist_ok=True, repo_type="model")
        self.doing = "committing to %s" % repo_id
        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=local) for p, local in files]
        ops.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card))
        info = self.api.create_commit(repo_id, ops, commit_message=commit.message,
                                      commit_description=commit.description, num_threads=2)
        oid = getattr(info, "oid", None)
        if not isinstance(oid, str) or not OID.fullmatch(oid):
            raise HubFailure("The Hugging Face Hub at %s accepted the commit to %s but answered "
                             "no valid commit id; open the repo's page to see whether it is "
                             "there." % (self.endpoint, repo_id))
        return oid

    def explain(self, exc: BaseException, repo_id: str) -> str:
        """One sentence for a failure of the client, saying what to do."""
        if isinstance(exc, HubFailure):
            return str(exc)
        where = "The Hugging Face Hub at %s" % self.endpoint
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            said = _clean(getattr(exc, "server_message", None), self.token)
            said = " (%s)" % said if said else ""
            return self._status_sentence(status, said, repo_id)
        kinds = " ".join(c.__name__ for c in type(exc).__mro__)
        if "Timeout" in kinds:
            return ("%s did not answer within %g s while %s. It may be slow or unreachable "
                    "from this server; try again later, or raise "
                    "model_training.publish.timeout_s." % (where, self.timeout_s, self.doing))
        if any(k in kinds for k in ("ConnectError", "NetworkError", "ConnectionError",
                                    "ProtocolError", "OfflineModeIsEnabled")):
            return ("%s could not be reached from this server while %s (%s). Check the "
                    "server's network access to it (behind a proxy, set HTTPS_PROXY where the "
                    "server starts), then publish again." % (
                        where, self.doing, _clean(exc, self.token) or type(exc).__name__))
        if isinstance(exc, FileNotFoundError) or (
                isinstance(exc, ValueError) and "not a file" in str(exc)):
            return self.vanished(getattr(exc, "filename", None) or "a model file")
        if isinstance(exc, ValueError) and "README.md" in str(exc):
            return ("%s rejected the model card's metadata: %s. This is a Potato bug; please "
                    "report it." % (where, _clean(exc, self.token)))
        return ("Publishing failed while %s: %s: %s. The server log has the details." % (
            self.doing, type(exc).__name__, _clean(exc, self.token)))

    def vanished(self, path: str) -> str:
        return ("The run's model files changed on this server while %s: %s is gone (deleted "
                "by hand, or the run's files were removed), so nothing was committed. Publish "
                "a run whose model files are all on this server." % (self.doing, path))

    def _status_sentence(self, status: int, said: str, repo_id: str) -> str:
        where = "The Hugging Face Hub at %s" % self.endpoint
        if status == 401:
            return ("%s refused the token in %s (HTTP 401%s): it is invalid, expired or revoked. "
                    "Create a token with write access at %s/settings/tokens, put it in %s where "
                    "the server starts, restart the server, and publish again." % (
                        where, self.token_env, said, self.endpoint, self.token_env))
        if status == 403 and self.role == "read":
            return self._read_only()
        if status == 403:
            account = self.account or "the token's account"
            name = repo_id.split("/")[-1]
            return ("%s did not let %s write to %s (HTTP 403%s): the repo belongs to another "
                    "account, or to an organisation where %s cannot write, or the token lacks "
                    "write access to it. Publish to %s/%s, or ask the owner for write access." % (
                        where, account, repo_id, said, account, account, name))
        if status == 429:
            return ("%s is limiting this account's requests (HTTP 429%s) while %s; wait a few "
                    "minutes and publish again." % (where, said, self.doing))
        if status >= 500:
            return ("%s failed (HTTP %d%s) while %s; it may be down for a while. Try again "
                    "later." % (where, status, said, self.doing))
        return ("%s answered HTTP %d%s while %s." % (where, status, said, self.doing))


def publish(endpoint: str, token: str, timeout_s: float, token_env: str, commit: Commit,
            card_for: Callable[[str], bytes], step: Callable[[str], None]) -> Dict[str, Any]:
    """The whole conversation with the Hub at ``endpoint``, as the account of ``token`` (read
    from the server's ``token_env``), each request given ``timeout_s``; ``card_for(repo_id)``
    makes the card once the repo id is final (a bare name goes under the token's account).
    Returns {repo_id, account, commit, url, commit_url}; raises HubFailure with the sentence."""
    session: Optional[Session] = None
    repo_id, files = commit.repo_id, commit.files
    try:
        session = Session(endpoint, token, timeout_s, token_env)
        step("checking the token with %s" % endpoint)
        account = session.whoami()
        if "/" not in repo_id:
            repo_id = "%s/%s" % (account, repo_id)
        size = sum(_size(local) for _, local in files)
        step("uploading %d files (%.1f MB) to %s and committing" % (
            len(files) + 1, size / 1e6, repo_id))
        oid = session.push(replace(commit, repo_id=repo_id), card_for(repo_id), step)
    except Exception as e:  # every failure of the client becomes a sentence
        if session is None:
            raise HubFailure(str(e) if isinstance(e, HubFailure) else "Publishing could not "
                             "start: %s: %s." % (type(e).__name__, _clean(e, token)))
        raise HubFailure(session.explain(e, repo_id)) from e
    finally:
        if session is not None:
            session.close()
    return {"repo_id": repo_id, "account": account, "commit": oid,
            "url": "%s/%s" % (endpoint, repo_id),
            "commit_url": "%s/%s/commit/%s" % (endpoint, repo_id, oid)}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
