"""Upstream's crowdsourcing keys read from a config (potato/config/crowd.py): each provider's id
parameter and kept ids, the completion code and the link back (every value URL-encoded, the
host the config's own), Microworkers' VCODE, SONA's credit link, expert invites, and the errors
that say what is wrong, where, and what to do."""

import hashlib
import hmac

import pytest

from potato.config import upstream
from potato.config.reader import Reader

OURS = ("annotation_schemes", "data_files")
PROLIFIC = {"login": {"type": "url_direct", "url_argument": "PROLIFIC_PID"},
            "completion_code": "C1ABCDEF", "auto_redirect_on_completion": True,
            "auto_redirect_delay": 2500}
GENERIC = {"login": {"type": "url_direct", "url_argument": "response_id"},
           "crowdsourcing": {"provider": "generic", "generic": {
               "platform_label": "Example Panel", "id_param": "response_id",
               "capture_params": ["batch"], "completion": {
                   "code": "PANEL-01",
                   "redirect_url": "https://panel.example.com/done?rid={worker_id}&c={code}"
                                   "&b={batch}"}}}}
MICRO = {"login": {"type": "url_direct", "url_argument": "mw_id"},
         "crowdsourcing": {"provider": "microworkers", "microworkers": {
             "vcode_secret": "a-private-secret", "vcode_prefix": "mw-", "vcode_length": 12}}}
SONA = {"login": {"type": "url_direct", "url_argument": "sona_code"},
        "crowdsourcing": {"provider": "sona", "sona": {
            "hostname": "dept.sona-systems.com", "experiment_id": 123,
            "credit_token": "tok123"}}}
EXPERT = {"login": {"type": "url_direct", "url_argument": "invite"},
          "crowdsourcing": {"provider": "expert", "expert": {
              "invites": {"token-for-alice": "expert-alice", "token-for-bob-0": "expert-bob"}}}}


def read(data):
    """(Upstream, error messages, warning messages) of a config's top level."""
    r = Reader("c.yaml", {}, {})
    _, got = upstream.split(r, data, OURS)
    return got, [p.message for p in r.errors], [p.message for p in r.warnings]


def keys_of(data):
    r = Reader("c.yaml", {}, {})
    upstream.split(r, data, OURS)
    return [p.key for p in r.errors]


def test_no_login_block_means_no_crowd_and_a_code_alone_is_a_warning():
    got, errors, _ = read({})
    assert got.crowd is None and errors == []
    got, errors, warnings = read({"completion_code": "X"})
    assert got.crowd is None and errors == []
    assert any("completion_code is set, but workers do not arrive" in w for w in warnings)


def test_upstreams_older_prolific_link_gives_the_prolific_return_url():
    got, errors, _ = read(PROLIFIC)
    assert errors == [] and got.crowd.id_param == "PROLIFIC_PID"
    assert got.crowd.label == "Prolific"
    done = got.crowd.completion("5f1a", {"session_id": "s", "study_id": "t"})
    assert done.code == "C1ABCDEF"
    assert done.url == "https://app.prolific.com/submissions/complete?cc=C1ABCDEF"
    assert done.redirect_after == 3  # 2,500 ms, rounded up to whole seconds
    assert {"SESSION_ID": "session_id", "STUDY_ID": "study_id"}.items() <= \
        got.crowd.capture.items()


def test_a_code_that_needs_encoding_is_encoded_in_the_prolific_url():
    got, _, _ = read({**PROLIFIC, "completion_code": "A&B=C D"})
    assert got.crowd.completion("w", {}).url.endswith("?cc=A%26B%3DC%20D")


def test_an_mturk_link_shows_the_code_with_no_url():
    got, errors, _ = read({"login": {"type": "url_direct", "url_argument": "workerId"},
                           "completion_code": "TASK_COMPLETED"})
    assert errors == [] and got.crowd.label == "MTurk"
    done = got.crowd.completion("A1B2", {"session_id": "asg"})
    assert (done.code, done.url, done.redirect_after) == ("TASK_COMPLETED", "", None)


def test_a_generic_panels_template_gets_each_value_url_encoded():
    got, errors, _ = read(GENERIC)
    assert errors == []
    done = got.crowd.completion("w+1@x", {"batch": "a&b=c/d?e#f"})
    assert done.url == ("https://panel.example.com/done?rid=w%2B1%40x&c=PANEL-01"
                        "&b=a%26b%3Dc%2Fd%3Fe%23f")
    assert done.label == "Example Panel" and done.redirect_after is None


@pytest.mark.parametrize("url", ["https://{worker_id}.example.com/x", "javascript:alert(1)",
                                 "ftp://example.com/x", "https:///nohost", "https://a.b/ c",
                                 "//example.com/x", "https://ex.com\\@evil.com/"])
def test_a_redirect_url_whose_host_a_link_could_choose_is_refused(url):
    data = {**GENERIC, "crowdsourcing": {"provider": "generic", "generic": {
        "id_param": "response_id", "completion": {"code": "X", "redirect_url": url}}}}
    got, errors, _ = read(data)
    [error] = errors
    assert "crowdsourcing.generic.completion.redirect_url must be an http:// or https://" \
           " address whose host is written out" in error
    assert got.crowd.completion("w", {}).url == ""


def test_a_template_field_nothing_fills_is_a_warning_that_lists_the_known_ones():
    data = {**GENERIC, "crowdsourcing": {"provider": "generic", "generic": {
        "id_param": "response_id", "completion": {
            "code": "X", "redirect_url": "https://p.example.com/?r={respondent}"}}}}
    _, errors, warnings = read(data)
    assert errors == []
    assert any("has {respondent}, which no arrival fills" in w and "{worker_id}" in w
               for w in warnings)


def test_an_unknown_provider_is_refused_by_name():
    got, errors, _ = read({"crowdsourcing": {"provider": "toloka"}})
    assert got.refused == ["crowdsourcing"] and got.crowd is None
    [error] = errors
    assert "crowdsourcing.provider 'toloka' is not a provider this Potato knows" in error
    assert "prolific" in error and "generic" in error


def test_a_crowdsourcing_block_without_a_provider_says_to_give_one():
    got, errors, _ = read({"crowdsourcing": {"platform": "prolific"}})
    assert got.refused == ["crowdsourcing"]
    assert any("crowdsourcing names no provider. Give it one" in e for e in errors)


@pytest.mark.parametrize("kind", ["password", "oauth", "clerk", 7])
def test_other_login_types_are_refused_naming_the_type(kind):
    got, errors, _ = read({"login": {"type": kind}})
    assert got.refused == ["login"] and got.crowd is None
    [error] = errors
    assert "login.type is %r" % kind in error and "url_direct" in error


def test_the_standard_login_is_the_name_form():
    got, errors, _ = read({"login": {"type": "standard"}})
    assert errors == [] and got.crowd is None and got.implemented == ["login"]


def test_url_argument_and_id_param_must_agree():
    data = {**GENERIC, "login": {"type": "url_direct", "url_argument": "rid"}}
    _, errors, _ = read(data)
    assert any("login.url_argument is 'rid', but crowdsourcing.generic reads the worker's id "
               "from 'response_id'" in e for e in errors)


@pytest.mark.parametrize("param", ["a b", "<x>", "x" * 65, "code", "response_id"])
def test_a_capture_param_must_be_a_plain_name(param):
    data = {**GENERIC, "crowdsourcing": {"provider": "generic", "generic": {
        "id_param": "response_id", "capture_params": [param]}}}
    assert keys_of(data) == ["crowdsourcing.generic.capture_params"]


def test_too_many_captured_params_are_refused():
    data = {**GENERIC, "crowdsourcing": {"provider": "generic", "generic": {
        "id_param": "response_id", "capture_params": ["p%d" % i for i in range(25)]}}}
    _, errors, _ = read(data)
    assert any("at most 20 are kept" in e for e in errors)


def test_microworkers_vcode_is_upstreams_hmac_and_deterministic():
    got, errors, _ = read(MICRO)
    assert errors == []
    first = got.crowd.completion("worker9", {"study_id": "camp7"})
    again = got.crowd.completion("worker9", {"study_id": "camp7"})
    want = "mw-" + hmac.new(b"a-private-secret", b"worker9:camp7",
                            hashlib.sha256).hexdigest()[:12]
    assert first.code == again.code == want
    assert got.crowd.completion("worker8", {"study_id": "camp7"}).code != want
    assert "a-private-secret" not in repr(first)


@pytest.mark.parametrize("block, where", [
    ({"vcode_secret": "short"}, "vcode_secret"), ({}, "vcode_secret"),
    ({"vcode_secret": "long-enough", "vcode_length": 2}, "vcode_length"),
    ({"vcode_secret": "long-enough", "vcode_prefix": "a b"}, "vcode_prefix")])
def test_microworkers_settings_are_checked(block, where):
    data = {**MICRO, "crowdsourcing": {"provider": "microworkers", "microworkers": block}}
    assert "crowdsourcing.microworkers.%s" % where in keys_of(data)


def test_sona_links_to_its_credit_page_and_warns_that_no_server_grant_is_made():
    got, errors, warnings = read(SONA)
    assert errors == []
    assert got.crowd.completion("12 34", {}).url == (
        "https://dept.sona-systems.com/webstudy_credit.aspx?experiment_id=123"
        "&credit_token=tok123&survey_code=12%2034")
    assert any("a participant who closes the tab first gets no credit" in w for w in warnings)


@pytest.mark.parametrize("host", ["evil.com/x?", "a b", "", "-x.com"])
def test_a_sona_hostname_must_be_a_host_name(host):
    data = {**SONA, "crowdsourcing": {"provider": "sona", "sona": {
        "hostname": host, "experiment_id": 1, "credit_token": "t"}}}
    assert keys_of(data) == ["crowdsourcing.sona.hostname"]


def test_expert_invites_map_a_token_to_its_user_and_refuse_others():
    got, errors, _ = read(EXPERT)
    assert errors == []
    assert got.crowd.worker("token-for-alice") == "expert-alice"
    assert got.crowd.worker("token-for-bob-0") == "expert-bob"
    assert got.crowd.worker("expert-alice") is None and got.crowd.worker("token-for") is None
    assert got.crowd.completion("expert-alice", {}).message


def test_a_token_easy_to_guess_is_a_warning():
    # review 39.11: upstream's own example tokens name their user
    for tokens in ({"demo-token-alice": "alice"}, {"aaaaaaaaaa": "bob"}):
        data = {**EXPERT, "crowdsourcing": {"provider": "expert", "expert": {"invites": tokens}}}
        _, errors, warnings = read(data)
        assert errors == [] and any("is easy to guess" in w for w in warnings)


@pytest.mark.parametrize("invites", [{}, None, ["a"], {"short": "x"}, {"token-long-1": "a b"},
                                     {"token-long-1": "x", "token-long-2": "x"},
                                     {"k3J9mQ2xLp8v": None}])
def test_bad_invites_are_refused(invites):
    data = {**EXPERT, "crowdsourcing": {"provider": "expert", "expert": {"invites": invites}}}
    _, errors, _ = read(data)
    assert errors and all("crowdsourcing.expert.invites" in e for e in errors)


def test_an_invites_file_is_refused_with_what_to_do():
    data = {**EXPERT, "crowdsourcing": {"provider": "expert", "expert": {
        "invites": {"token-for-alice": "a"}, "invites_file": "x.yaml"}}}
    _, errors, _ = read(data)
    assert any("list the tokens under invites" in e for e in errors)


def test_clickworkers_payment_postback_is_refused_and_prolifics_api_warned():
    data = {"crowdsourcing": {"provider": "clickworker", "clickworker": {
        "completion": {"code": "CW"}, "postback_url": "https://x.example/{worker_id}"}}}
    _, errors, _ = read(data)
    assert any("payment postback is not sent here" in e for e in errors)
    data = {"crowdsourcing": {"provider": "prolific", "prolific": {
        "completion": {"code": "C"}, "token": "t", "study_id": "s"}}}
    got, errors, warnings = read(data)
    assert errors == [] and got.crowd.completion("w", {}).url.endswith("cc=C")
    assert sum("Prolific's API" in w for w in warnings) == 2


def test_auto_redirect_with_nowhere_to_go_is_a_warning():
    data = {"login": {"type": "url_direct", "url_argument": "workerId"},
            "completion_code": "X", "auto_redirect_on_completion": True}
    _, errors, warnings = read(data)
    assert errors == [] and any("there is no page to send workers to" in w for w in warnings)


@pytest.mark.parametrize("delay", [-1, 600001, "5s", 1.5])
def test_the_delay_is_a_bounded_whole_number(delay):
    assert keys_of({**PROLIFIC, "auto_redirect_delay": delay}) == ["auto_redirect_delay"]


def test_hide_navbar_and_jumping_are_read():
    got, errors, _ = read({"hide_navbar": True, "jumping_to_id_disabled": True})
    assert errors == [] and got.hide_navbar and got.no_jump
    assert keys_of({"hide_navbar": "yes"}) == ["hide_navbar"]


def test_a_done_page_with_nothing_to_show_is_a_warning():
    _, errors, warnings = read({"login": {"type": "url_direct", "url_argument": "workerId"}})
    assert errors == []
    assert any("workers who finish get no completion code and no link back" in w
               for w in warnings)
    for data in (PROLIFIC, GENERIC, MICRO, SONA, EXPERT):
        assert not any("no completion code" in w for w in read(data)[2])


def test_a_login_that_is_not_a_mapping_is_an_error():
    assert keys_of({"login": "url_direct"}) == ["login"]
