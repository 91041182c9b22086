"""Routes for publishing a run's model to the Hugging Face Hub (added by ``api.add_routes``):

- ``POST /admin/training/api/runs/<id>/publish`` body ``{repo_id, private?, commit_message?}``:
  202 with the publish state; 400 for a bad field; 409 when this run or this server cannot
  publish now (the sentence says why)
- ``GET /admin/training/api/runs/<id>/publish``: the state, and ``html``, the run page's part
- ``POST /admin/training/runs/<id>/publish``: the run page's form (then back to the run page)
"""

from typing import Any, Callable, Dict, Optional

from potato.server.errors import HTTPError
from potato.markup import Safe
from potato.training.hub import page as publish_page
from potato.training.core.view import RunView
from potato.training.hub.publish import Publisher, Refused, cannot_publish

RUN = r"/runs/(?P<run_id>[A-Za-z0-9_-]+)/publish"


def state_view(publisher: Publisher, view: RunView) -> Dict[str, Any]:
    """The publish state the API returns for a run (``view``: the run's RunView)."""
    state = publisher.state(view.run_id)
    blocked = cannot_publish(publisher.cfg, view, publisher.paths_of(view.run_id).artifacts) \
        if view.status == "success" else ""
    out = dict(state, run_id=view.run_id, can_publish=not blocked, reason=blocked or None,
               ready=publisher.readiness() or None)
    out["html"] = publish_page.section(view, state, blocked or "", publisher.readiness()) \
        if view.status == "success" else ""
    return out


def page_card(publisher: Publisher, view: RunView,
              typed: Optional[Dict[str, Any]] = None) -> Safe:
    """The publish card for the run page (``view``: the run's RunView); ``typed``: a refused
    form's input, shown again."""
    if view.status != "success":
        return Safe("")
    blocked = cannot_publish(publisher.cfg, view, publisher.paths_of(view.run_id).artifacts)
    return publish_page.card(view, dict(publisher.state(view.run_id), **(typed or {})),
                             blocked or "", publisher.readiness())


def add_routes(app, manager, prefix: str, get_run: Callable, show_run: Callable) -> Publisher:
    """``show_run(h, run_id, message, ok, status, typed)``: the run page, for a refused form."""
    # the config in force at each request: Reload config replaces the manager's
    publisher = Publisher(lambda: manager.cfg, manager.paths, holds=manager.holds)

    def start(run_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        view = RunView.from_run(get_run(run_id))
        try:
            publisher.start(view, body)
        except Refused as e:
            raise HTTPError(e.status, e.message)
        return state_view(publisher, view)

    @app.route("POST", prefix + RUN, "admin")
    def publish_api(h, run_id):
        h.send_json(start(run_id, h.json_object()), 202)

    @app.route("GET", prefix + RUN, "admin")
    def publish_state(h, run_id):
        h.send_json(state_view(publisher, RunView.from_run(get_run(run_id))))

    @app.route("POST", r"/admin/training" + RUN, "admin")
    def publish_form(h, run_id):
        form = h.form()

        def first(key):
            return (form.get(key) or [None])[0]

        body = {"repo_id": first("repo_id"), "private": first("private") == "true",
                "commit_message": first("commit_message")}
        try:
            publisher.start(RunView.from_run(get_run(run_id)), body)
        except Refused as e:  # the run page again, with the reason and what was typed
            typed = {"repo_id": (body["repo_id"] or "")[:200], "private": body["private"],
                     "form_message": (body["commit_message"] or "")[:200]}
            show_run(h, run_id, e.message, ok=False, status=e.status, typed=typed)
            return
        h.redirect("/admin/training/runs/%s" % run_id)

    return publisher
