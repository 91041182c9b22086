"""Crowd workers over HTTP (a real server): a platform's link logs a worker in under the id it
carries, hostile ids are refused with a page and no session, the name form is closed, invite
tokens map to their users, and once every item of theirs is labelled the done page shows the
code and the link back, every value URL-encoded; Microworkers' VCODE without its secret."""

import hashlib
import hmac
import re

import pytest

from tests.helpers import KEY, Client

SCHEMES = """
data_files: [items.jsonl]
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
max_annotations_per_user: 2
"""
PROLIFIC = SCHEMES + """
login: {type: url_direct, url_argument: PROLIFIC_PID}
completion_code: "C1&ABC"
auto_redirect_on_completion: true
auto_redirect_delay: 4000
hide_navbar: true
jumping_to_id_disabled: true
"""
GENERIC = SCHEMES + """
login: {type: url_direct, url_argument: rid}
crowdsourcing:
  provider: generic
  generic:
    platform_label: "Panel <b>X</b>"
    id_param: rid
    capture_params: [batch]
    completion:
      code: PANEL-1
      redirect_url: "https://panel.example.com/done?rid={worker_id}&code={code}&b={batch}"
"""
MICRO = SCHEMES + """
login: {type: url_direct, url_argument: mw_id}
crowdsourcing:
  provider: microworkers
  microworkers: {vcode_secret: the-vcode-secret-42, vcode_prefix: "mw-", vcode_length: 10}
"""
EXPERT = SCHEMES + """
login: {type: url_direct, url_argument: invite}
crowdsourcing:
  provider: expert
  expert:
    invites: {k3J9mQ2xLp8v: expert-alice}
    completion: {message: "Invoice per your contract."}
"""


@pytest.fixture
def crowd(write_config, serve):
    """(a Client of a fresh server for this config text, the service)."""
    def start(text):
        service, url = serve(write_config(text), training=False)
        return Client(url), service
    return start


def label_all(c):
    """Label each item /annotate shows until the done page; returns that page."""
    for _ in range(10):
        page = c.get("/annotate").text
        item = re.search(r'name="item_id" value="([^"]+)"', page)
        if not item:
            return page
        position = re.search(r'name="position" value="(\d+)"', page).group(1)
        r = c.post("/annotate", form={"item_id": item.group(1), "position": position,
                                      "label:sentiment": "positive", "action": "next"})
        assert r.status == 303, r.text
    raise AssertionError("no done page")


def test_a_prolific_link_logs_the_worker_in_and_the_done_page_sends_them_back(crowd):
    c, _ = crowd(PROLIFIC)
    r = c.get("/?PROLIFIC_PID=5f1a2b3c4d5e6f7a8b9c0d1e&STUDY_ID=st1&SESSION_ID=se1")
    assert r.status == 303 and r.getheader("Location") == "/annotate"
    page = c.get("/annotate")
    assert page.status == 200 and 'name="item_id"' in page.text
    assert "Log out" not in page.text and "5f1a2b3c" not in page.text  # hide_navbar
    assert 'class="jump"' not in page.text  # jumping_to_id_disabled
    jump = c.get("/annotate?item=i3")
    assert jump.status == 403 and "jumping_to_id_disabled" in jump.text
    # review 39.9: nor by posting a position: one step at a time
    assert c.post("/annotate", form={"position": "3", "action": "next"}).status == 303
    assert "Item 2 of" in c.get("/annotate").text
    c.post("/annotate", form={"position": "0", "action": "prev"})
    done = label_all(c)
    assert '<code id="completion-code">C1&amp;ABC</code>' in done
    url = "https://app.prolific.com/submissions/complete?cc=C1%26ABC"
    assert f'id="completion-return" href="{url}"' in done
    assert f'<meta http-equiv="refresh" content="4;url={url}">' in done
    assert "<script>" not in done


def test_the_code_waits_until_every_item_has_a_label(crowd):
    c, _ = crowd(PROLIFIC)
    c.get("/?PROLIFIC_PID=w1")
    for _ in range(2):  # Save and next with nothing chosen: moves on, labels nothing
        page = c.get("/annotate").text
        position = re.search(r'name="position" value="(\d+)"', page).group(1)
        c.post("/annotate", form={"position": position, "action": "next"})
    page = c.get("/annotate").text
    assert "All done" in page and "completion-code" not in page and "http-equiv" not in page
    assert "Your completion code is shown here once each of your items has a label" in page


def test_a_worker_coming_back_resumes_and_keeps_their_code(crowd):
    c, _ = crowd(PROLIFIC)
    c.get("/?PROLIFIC_PID=w2")
    label_all(c)
    c.cookies.clear()  # another day, the same link
    assert c.get("/?PROLIFIC_PID=w2").status == 303
    assert "C1&amp;ABC" in c.get("/annotate").text


HOSTILE = ["x" * 65, "a%0Ab", "a%0Db", "a%00b", "%3Cscript%3Ealert(1)%3C/script%3E",
           "%EF%BD%81dmin",          # fullwidth a: looks like "admin"
           "adm%C4%B1n",             # dotless i
           "%E2%80%AEnimda",         # right-to-left override
           "a%20b", "a%09b", "%FF%FE", "a;b", "a'b", "../../etc", "a%2Fb"]


@pytest.mark.parametrize("wid", HOSTILE)
def test_a_hostile_id_is_refused_with_a_page_and_no_session(crowd, wid):
    c, service = crowd(PROLIFIC)
    r = c.get("/?PROLIFIC_PID=" + wid)
    assert r.status == 400 and "text/html" in r.getheader("Content-Type")
    assert "This link&#x27;s PROLIFIC_PID is not an id this project takes" in r.text
    assert "<script>alert" not in r.text
    assert c.cookies == {} and c.get("/annotate").status in (302, 303)
    assert service.app.store.annotator_stats() == []


def test_an_id_given_twice_or_a_hostile_captured_value_is_refused(crowd):
    c, _ = crowd(PROLIFIC)
    r = c.get("/?PROLIFIC_PID=a&PROLIFIC_PID=b")
    assert r.status == 400 and "carries PROLIFIC_PID 2 times" in r.text and c.cookies == {}
    r = c.get("/?PROLIFIC_PID=a&STUDY_ID=%3Cb%3E%20x")
    assert r.status == 400 and "This link&#x27;s STUDY_ID is not a value" in r.text
    assert c.cookies == {}
    r = c.get("/?PROLIFIC_PID=a&STUDY_ID=" + "s" * 201)
    assert r.status == 400 and c.cookies == {}


def test_the_name_form_is_closed_in_a_crowd_project(crowd):
    c, _ = crowd(PROLIFIC)
    page = c.get("/login")
    assert page.status == 200 and 'id="crowd-login"' in page.text
    assert 'name="username"' not in page.text and "PROLIFIC_PID" in page.text
    r = c.post("/login", form={"username": "someone"})
    assert r.status == 403 and "log in by their Prolific link" in r.text and c.cookies == {}
    assert c.get("/").getheader("Location") == "/login"  # no id: how to get in


def test_new_ids_count_against_new_names_per_hour(crowd):
    c, _ = crowd(PROLIFIC + "server: {new_names_per_hour: 2}\n")
    for worker in ("n1", "n2"):  # each on a browser of their own
        c.cookies.clear()
        assert c.get("/?PROLIFIC_PID=" + worker).status == 303
    c.cookies.clear()
    r = c.get("/?PROLIFIC_PID=n3")
    assert r.status == 429 and "Too many new annotator names" in r.text
    assert c.get("/?PROLIFIC_PID=n1").status == 303  # a known id still gets in


def test_a_generic_panels_link_back_carries_the_kept_ids_url_encoded(crowd):
    c, _ = crowd(GENERIC)
    assert c.get("/?rid=w%2B1%40x&batch=b%26c%3Dd&other=%3Cx%3E").status == 303
    done = label_all(c)
    assert ('href="https://panel.example.com/done?rid=w%2B1%40x&amp;code=PANEL-1&amp;'
            'b=b%26c%3Dd"') in done
    assert "Panel &lt;b&gt;X&lt;/b&gt;" in done and "<b>X</b>" not in done
    assert "http-equiv" not in done  # no auto_redirect


def test_a_link_cannot_choose_where_the_done_page_sends_the_worker(crowd):
    c, _ = crowd(GENERIC)
    c.get("/?rid=w9&batch=https://evil.example/&redirect_url=https://evil.example/")
    done = label_all(c)
    hrefs = re.findall(r'href="(https?://[^"]+)"', done)
    assert hrefs and all(h.startswith("https://panel.example.com/done?") for h in hrefs)


def test_microworkers_vcode_is_shown_and_its_secret_is_not(crowd):
    c, service = crowd(MICRO)
    assert c.get("/?mw_id=mw77&campaign_id=camp9&slot_id=s1").status == 303
    done = label_all(c)
    want = "mw-" + hmac.new(b"the-vcode-secret-42", b"mw77:camp9",
                            hashlib.sha256).hexdigest()[:10]
    assert f'<code id="completion-code">{want}</code>' in done
    assert "the-vcode-secret-42" not in done
    assert not any("the-vcode-secret-42" in line for line in service.access_lines)
    assert want in c.get("/annotate").text  # the same code on every visit


def test_an_invite_token_logs_in_as_its_user_and_an_unknown_one_is_refused(crowd):
    c, service = crowd(EXPERT)
    r = c.get("/?invite=k3J9mQ2xLp8w")
    assert r.status == 403 and "not an invitation to this project" in r.text
    assert c.cookies == {}
    assert c.get("/?invite=expert-alice").status == 403  # the user name is not a token
    assert c.get("/?invite=k3J9mQ2xLp8v").status == 303
    assert "expert-alice" in c.get("/annotate").text
    assert [a["name"] for a in service.app.store.annotator_stats()] == ["expert-alice"]
    done = label_all(c)
    assert "Invoice per your contract." in done
    assert not any("k3J9mQ2xLp8v" in line for line in service.access_lines)
    # review 39.3: a percent-encoded name reaches the same parameter; the log still hides it
    c.cookies.clear()
    assert c.get("/?%69nvite=k3J9mQ2xLp8v&x=1").status == 303
    assert not any("k3J9mQ2xLp8v" in line for line in service.access_lines)
    assert any("?invite=%28hidden%29&x=1" in line for line in service.access_lines)


def test_an_invitation_taken_back_ends_its_sessions(crowd, write_config):
    # review 39.2: a leaked token removed from the config left its holder logged in
    c, service = crowd(EXPERT.replace("{k3J9mQ2xLp8v: expert-alice}",
                                      "{k3J9mQ2xLp8v: expert-alice, Zq8rT2vW5yB1: expert-bob}"))
    assert c.get("/?invite=Zq8rT2vW5yB1").status == 303
    assert "expert-bob" in c.get("/annotate").text
    del service.app.config.upstream.crowd.invites["Zq8rT2vW5yB1"]  # as after a restart
    r = c.get("/annotate")
    assert r.status == 303 and r.getheader("Location") == "/login"


def test_the_admin_sees_each_workers_platform_ids(crowd):
    c, _ = crowd(PROLIFIC + "admin_api_key: %s\n" % KEY)
    assert c.get("/?PROLIFIC_PID=w5&STUDY_ID=st%3C1%3E&SESSION_ID=se5").status == 303
    status, stats = c.json("GET", "/admin/api/stats", headers={"X-API-Key": KEY})
    assert status == 200
    assert stats["annotators"] == [{"name": "w5", "items": 0, "crowd_ids": {
        "session_id": "se5", "study_id": "st<1>"}}]
    admin = Client("http://%s:%d" % (c.host, c.port))
    admin_page = admin.post("/admin/login", form={"key": KEY, "next": "/admin"})
    assert admin_page.status == 303
    page = admin.get("/admin").text
    assert "Platform ids" in page and "study_id=st&lt;1&gt;" in page and "st<1>" not in page


def test_a_worker_given_no_items_gets_no_code_but_is_told_to_return_the_study(crowd):
    # review 39.4: a late arrival with nothing to do was handed the paid code
    c, _ = crowd(PROLIFIC + "num_annotators_per_item: 1\n")
    for worker in ("a1", "a2", "a3"):  # 5 items, 2 a worker, 1 annotator an item
        c.cookies.clear()
        assert c.get("/?PROLIFIC_PID=" + worker).status == 303
        label_all(c)
    c.cookies.clear()
    c.get("/?PROLIFIC_PID=late")
    page = c.get("/annotate").text
    assert '<p id="crowd-no-items">Every item of this study has all the annotators it needs' \
        in page and "completion-code" not in page and "C1&amp;ABC" not in page


def test_a_second_worker_on_the_same_browser_is_asked_first(crowd):
    # review 39.1: a page on another site could send the browser to a link with another id
    c, _ = crowd(SCHEMES + "login: {type: url_direct, url_argument: workerId}\n")
    c.get("/?workerId=first")
    r = c.get("/?workerId=second&assignmentId=a1")
    assert r.status == 200 and "This browser is working as <b>first</b>, and the link it " \
        "was sent to is for <b>second</b>." in r.text
    assert '<input type="hidden" name="workerId" value="second">' in r.text
    assert "Annotator: <b>first</b>" in c.get("/annotate").text  # nothing changed yet
    assert c.post("/", form={"workerId": "first"}).status == 303  # the same one: no question
    r = c.post("/", form={"workerId": "second", "assignmentId": "a1"},
               headers={"Origin": "http://evil.example"})
    assert r.status == 403  # a page on another site cannot answer for the annotator
    assert c.post("/", form={"workerId": "second", "assignmentId": "a1"}).status == 303
    page = c.get("/annotate").text
    assert "Annotator: <b>second</b>" in page and "<b>first</b>" not in page
    assert c.post("/", form={}).status == 400
    assert c.request("HEAD", "/?workerId=third").status == 303  # a HEAD logs no one in
    assert "Annotator: <b>second</b>" in c.get("/annotate").text
