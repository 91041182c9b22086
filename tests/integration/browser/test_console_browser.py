"""No page logs an error to Chromium's console (issue 35, item 13): every page an admin and an
annotator visit, with a run in use (suggestions on the annotate page), a finished run's page,
the runs list, compare and the prefilled form. An invalid ``pattern`` attribute is such an
error: Chromium drops the check and says so in the console, nowhere else."""

import time

import pytest

from tests.helpers import Client, admin_login, make_project, start_run, wait_for, wait_run

pytestmark = pytest.mark.integration


def _severe(d):
    """The console's SEVERE entries since the last call (reading the log empties it)."""
    return [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]


def _visit(d, url, path, ready_id):
    d.get(url + path.lstrip("/"))
    wait_for(d, lambda d: d.find_elements("id", ready_id), what="%s on %s" % (ready_id, path))
    return _severe(d)


def test_no_page_logs_a_console_error(tmp_path, serve, browser):
    d = browser
    _, url = serve(make_project(tmp_path))
    c = Client(url)
    runs = [start_run(c, trainer="text-naive-bayes", schemas=["sentiment"], params=p)
            for p in ({"ngrams": 1}, {"ngrams": 2})]
    for run_id in runs:
        wait_run(c, run_id)

    # The annotator: the login page (its username pattern), then the annotate page.
    errors = {"/login": _visit(d, url, "/login", "username")}
    box = d.find_element("id", "username")
    box.send_keys("two words")  # the server refuses it: the browser's check says so first
    assert d.execute_script("return arguments[0].validity.patternMismatch", box)
    box.clear()
    box.send_keys("ann.o-1@lab+x")
    assert d.execute_script("return arguments[0].checkValidity()", box)
    d.find_element("css selector", "form.card button[type=submit]").click()
    wait_for(d, lambda d: "/annotate" in d.current_url, what="the annotate page")
    # (the browser's own check let a name the server takes through: the form was sent)
    errors["/annotate"] = _severe(d) + _visit(d, url, "/annotate", "annotate-form")

    # The admin: every page of the admin and training pages.
    admin_login(d, url, "/admin")
    errors["/admin"] = _severe(d)
    for path, ready in (("/admin/training", "run-form"),
                        ("/admin/training/runs/%s" % runs[0], "again-card"),
                        ("/admin/training?again=%s" % runs[0], "again-notice"),
                        ("/admin/training/compare?runs=%s&runs=%s" % tuple(runs), "compare"),
                        ("/admin/training/runs", "runs-list")):
        errors[path] = _visit(d, url, path, ready)
    time.sleep(2.5)  # an error the last page's script logs later (its first live update)
    errors["after the last page"] = _severe(d)
    found = {p: e for p, e in errors.items() if e}
    assert not found, "\n".join("%s: %s" % (p, x["message"]) for p, e in found.items() for x in e)
