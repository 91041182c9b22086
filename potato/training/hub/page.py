"""The run page's "Publish to Hugging Face Hub" part: the form, the progress, the outcome.

One renderer for the page and for the fragment ``static/publish.js`` swaps in while a publish
runs. Everything shown went through ``render`` (escaped), the Hub's answers included.
"""

import time
from typing import Any, Dict

from potato.markup import Safe, join, render
from potato.training.core.view import RunView


def _when(t: Any) -> str:
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        return ""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _link(url: Any, text: Any) -> Safe:
    """A link to the Hub: only an http(s) URL (built by the server from the endpoint)."""
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return render("{t}", t=text)
    return render('<a href="{u}" rel="noopener noreferrer">{t}</a>', u=url, t=text)


def _published(state: Dict[str, Any]) -> Safe:
    history = [h for h in state.get("history") or [] if isinstance(h, dict)]
    if not history:
        return Safe("")
    last = history[-1]
    older = render(' <span class="hint">({n} earlier publish{es})</span>', n=len(history) - 1,
                   es="" if len(history) == 2 else "es") if len(history) > 1 else Safe("")
    return render('<p class="publish-done" id="publish-done">Published to {repo}{private}, '
                  'commit {commit} ({when}).{older}</p>',
                  repo=_link(last.get("url"), last.get("repo_id")),
                  private=" (private)" if last.get("private") else "",
                  commit=_link(last.get("commit_url"),
                               render("<code>{c}</code>", c=str(last.get("commit"))[:12])),
                  when=_when(last.get("finished_at")), older=older)


def _current(state: Dict[str, Any]) -> Safe:
    if state.get("state") == "publishing":
        return render('<p class="publish-progress" id="publish-progress" aria-live="polite">'
                      'Publishing to <b>{repo}</b>: <span id="publish-step">{step}</span> …</p>',
                      repo=state.get("repo_id"), step=state.get("step") or "")
    if state.get("state") == "failed":
        return render('<p class="error" id="publish-error" role="alert">Publishing to {repo} '
                      'failed: {e}</p>', repo=state.get("repo_id") or "the Hub",
                      e=state.get("error") or "")
    return Safe("")


def _form(run_id: str, state: Dict[str, Any], busy: bool) -> Safe:
    history = [h for h in state.get("history") or [] if isinstance(h, dict)]
    repo = state.get("repo_id") or (history[-1].get("repo_id") if history else "") or ""
    private = bool(state.get("private"))
    return render(
        '<form id="publish-form" method="post" action="/admin/training/runs/{id}/publish">'
        '<label for="publish-repo">Repo id</label>'
        '<input id="publish-repo" name="repo_id" value="{repo}" required maxlength="200" '
        'placeholder="your-name/review-sentiment" autocomplete="off">'
        '<fieldset><legend>Visibility</legend>'
        '<label class="option"><input type="radio" name="private" value="false"{pub}> public'
        '</label><label class="option"><input type="radio" name="private" value="true"{priv}>'
        ' private</label><p class="hint">Applies when the repo is created; an existing repo '
        'keeps its visibility.</p></fieldset>'
        '<label for="publish-commit">Commit message</label>'
        '<input id="publish-commit" name="commit_message" maxlength="200" value="{msg}" '
        'placeholder="Publish Potato run {id}">'
        '<button type="submit" class="primary" id="publish-button"{off}>Publish to Hugging Face '
        'Hub</button></form>', id=run_id, repo=repo, msg=state.get("form_message") or "",
        pub=Safe("") if private else Safe(" checked"), priv=Safe(" checked") if private
        else Safe(""), off=Safe(" disabled") if busy else Safe(""))


def section(view: RunView, state: Dict[str, Any], blocked: str, unready: str) -> Safe:
    """The inside of the run page's publish card (``blocked``: why this run cannot be
    published; ``unready``: why this server cannot publish now)."""
    if blocked:
        return render('<p class="notice" id="publish-blocked">{w}</p>', w=blocked)
    busy = state.get("state") == "publishing"
    parts = [_published(state), _current(state)]
    if unready:
        parts.append(render('<p class="notice" id="publish-unready">{w}</p>', w=unready))
    else:
        parts.append(_form(view.run_id, state, busy))
    return join(parts)


def card(view: RunView, state: Dict[str, Any], blocked: str, unready: str) -> Safe:
    """The publish card on a successful run's page (nothing for other runs)."""
    if view.status != "success":
        return Safe("")
    return render('<section class="card" aria-labelledby="publish-h"><h2 id="publish-h">'
                  'Publish to Hugging Face Hub</h2><div id="publish-message" role="alert"></div>'
                  '<div id="publish" data-run="{id}" data-state="{s}">{inner}</div></section>'
                  '<script src="/static/publish.js"></script>', id=view.run_id,
                  s=state.get("state") or "", inner=section(view, state, blocked, unready))
