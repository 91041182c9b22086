"""Fast unit tests for the cross-field rules of potato/validation.py, written so that
tools/mutation.py's mutants of that module fail: every finding is checked for its key, line,
file and backend, not only its words."""

import json

import pytest

from potato.config_reader import Problem
from potato.validation import MIN_ACK_LENGTH, Report, _names_in, check

from tests.helpers import BASE as HEAD  # a valid project to build on


def where(problems, path):
    """(key, line, backend) of each finding; each must name the config file."""
    assert all(p.file == path for p in problems), [p.file for p in problems]
    assert all(isinstance(p.message, str) and len(p.message) > 20 for p in problems)
    return [(p.key, p.line, p.backend) for p in problems]


def keyed(problems, key):
    return [p for p in problems if p.key == key]


def test_report_ok_and_as_dict():
    r = Report()
    assert r.ok() and r.ok(True)
    r.warnings.append(Problem("w", "k", 3, "f", "b"))
    assert r.ok() and not r.ok(True)
    r.notes.append(Problem("n"))
    r.acknowledged.append(Problem("a"))
    d = r.as_dict(True)
    assert d == {"ok": False, "strict": True, "errors": [],
                 "warnings": [{"message": "w", "key": "k", "line": 3, "file": "f",
                               "backend": "b"}],
                 "acknowledged": [Problem("a").as_dict()], "notes": [Problem("n").as_dict()]}
    assert r.as_dict()["ok"] is True and r.as_dict()["strict"] is False
    r.errors.append(Problem("e"))
    assert not r.ok() and r.as_dict()["errors"] == [Problem("e").as_dict()]


def test_load_warnings_are_kept(write_config):
    path = write_config(HEAD + "server: {debug: true}\n")
    _, report = check(path)
    assert where(keyed(report.warnings, "server.debug"), path) == [("server.debug", 8, None)]


def test_errors_point_at_the_key_and_its_line(write_config):
    path = write_config(HEAD.replace("[items.jsonl]", "[items.jsonl, gone.jsonl]") + """\
model_training:
  backend: nope
  auto_retrain: {backend: nope2}
  writeback: {schemas: [sentiment, nosuch]}
""")
    _, report = check(path)
    assert where(report.errors, path) == [
        ("data_files[1]", 2, None), ("model_training.backend", 9, None),
        ("model_training.auto_retrain.backend", 10, None),
        ("model_training.writeback.schemas[1]", 11, None)]
    assert "gone.jsonl" in report.errors[0].message
    assert "Schemes: sentiment." in report.errors[3].message


def test_empty_data_files_and_schemes(write_config):
    path = write_config("data_files: []\nannotation_schemes: []\nadmin_api_key: k\n"
                        "model_training: {writeback: {schemas: [x]}}\n")
    _, report = check(path)
    assert where(report.errors, path) == [
        ("data_files", 1, None), ("annotation_schemes", 2, None),
        ("model_training.writeback.schemas[0]", 4, None)]
    assert report.errors[2].message.endswith("Schemes: none.")


def test_admin_key_warning_unless_debug(write_config):
    path = write_config(HEAD.replace("admin_api_key: test-admin-key-0123456789\n", ""))
    _, report = check(path)
    assert where(report.warnings, path) == [("admin_api_key", None, None)]
    assert report.warnings[0].message.endswith(  # a command to copy
        "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    path = write_config(HEAD.replace("admin_api_key: test-admin-key-0123456789\n", "debug: true\n"),
                        "debug.yaml")
    _, report = check(path)
    assert [p.key for p in report.warnings] == ["debug"]  # the debug warning, not the key's


@pytest.mark.parametrize("extra, error", [
    ("server_url: HTTPS://annotate.example.org\n", True),
    ("server: {trusted_proxies: [10.0.0.1]}\n", True),
    ("server_url: http://annotate.example.org\n", False),
    ("", False),
])
def test_debug_behind_a_proxy_is_an_error(write_config, extra, error):
    path = write_config(HEAD + "debug: true\n" + extra)
    _, report = check(path)
    assert where(report.errors, path) == ([("debug", 8, None)] if error else [])
    assert all("debug" in p.message for p in report.errors)
    assert where(report.warnings, path) == [("debug", 8, None)]


def test_accepted_upstream_keys_are_one_note(write_config):
    path = write_config(HEAD + "theme: dark\nhide_navbar: true\n"
                        "model_training: {writeback: {schemas: [sentiment]}}\n")
    _, report = check(path)
    [note] = report.notes
    assert where([note], path) == [("theme", 8, None)]
    assert note.message.count("theme") == 1 and "hide_navbar" in note.message


def test_media_rules_get_the_report_and_both_callbacks(write_config, tmp_path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    items = [{"id": "a", "text": "t", "img": "a.png"}, {"id": "b", "text": "t", "img": "b.png"},
             {"id": "c", "text": "t", "img": "https://media.example.org/c.png"}]
    path = write_config(HEAD + "item_properties: {image_key: img}\n"
                        "model_training: {writeback: {schemas: [sentiment]}}\n", items=items)
    _, report = check(path)
    assert [p.key for p in report.errors] == []
    assert ["media.example.org" in p.message for p in report.notes] == [True]
    assert where(report.warnings, path) == [("item_properties.image_key", 8, None)]
    path = write_config(HEAD + "item_properties: {image_key: img}\nmedia_directory: nowhere\n",
                        "m2.yaml")
    _, report = check(path)
    assert where(report.errors, path) == [("media_directory", 9, None)]


def test_writeback_note_when_training_is_on_and_schemas_are_empty(write_config):
    path = write_config(HEAD + "model_training: {enabled: true}\n")
    _, report = check(path)
    [note] = report.notes
    assert where([note], path) == [("model_training.writeback.schemas", 8, None)]
    assert "[sentiment]" in note.message
    for extra in ("model_training: {enabled: false}\n",
                  "model_training: {writeback: {schemas: [sentiment]}}\n"):
        path = write_config(HEAD + extra, "off.yaml")
        assert check(path)[1].notes == []
    path = write_config(HEAD.split("annotation_schemes")[0] + "annotation_schemes: []\n",
                        "none.yaml")
    assert check(path)[1].notes == []


AGENT = "model_training:\n  writeback: {schemas: [sentiment]}\n  backends:\n" \
        "    lab: {type: agent}\n    lab2: {type: agent}\n"


def test_agent_backends_and_server_url(write_config):
    path = write_config(HEAD + AGENT)
    _, report = check(path)
    [note] = report.notes
    assert where([note], path) == [("server_url", None, None)]
    assert "backend lab." in note.message
    path = write_config(HEAD + AGENT + "server_url: http://LOCALHOST:8000\n", "lo.yaml")
    _, report = check(path)
    assert where(report.warnings, path) == [("server_url", 13, None)]
    assert "(backend lab)" in report.warnings[0].message and report.notes == []
    path = write_config(HEAD + AGENT + "server_url: ftp://x\n", "bad.yaml")
    _, report = check(path)
    assert [p.key for p in report.errors] == ["server_url"] and report.notes == []
    path = write_config(HEAD + AGENT + "server_url: https://annotate.example.org\n", "ok.yaml")
    _, report = check(path)
    assert report.notes == report.warnings == report.errors == []
    path = write_config(HEAD + AGENT.replace("backends:", "enabled: false\n  backends:"),
                        "off.yaml")
    _, report = check(path)
    assert report.notes == report.warnings == []


def test_debug_warns_per_backend_that_arrives_as_loopback(write_config):
    path = write_config(HEAD + "debug: true\nmodel_training:\n"
                        "  writeback: {schemas: [sentiment]}\n  backends:\n"
                        "    gpu: {type: ssh, host: gpu.example.org}\n"
                        "    lab: {type: agent}\n"
                        "server_url: https://annotate.example.org\n"
                        "validation: {acknowledge: []}\n")
    _, report = check(path)
    assert [p.key for p in report.errors] == ["debug"]  # behind https
    assert where(report.warnings, path) == [("debug", 8, "gpu")]
    assert "gpu.example.org" in report.warnings[0].message
    assert "backend gpu " in report.warnings[0].message


def test_backend_errors_name_their_backend(write_config):
    path = write_config(HEAD + "model_training:\n  writeback: {schemas: [sentiment]}\n"
                               "  backends:\n    gpu: {type: ssh, host: -oProxyCommand=x}\n")
    _, report = check(path)
    assert where(report.errors, path) == [("model_training.backends.gpu.host", 11, "gpu")]


def test_names_in_takes_whole_names():
    names = ["gpu", "gpu-2", "a.b"]
    assert _names_in("the gpu failed", names) == ["gpu"]
    assert _names_in("gpu-2 failed", names) == ["gpu-2"]
    assert _names_in("my_gpu and gpu2 and gpuX", names) == []
    assert _names_in("(gpu) and a.b.", names) == ["gpu", "a.b"]
    assert _names_in("axb", names) == []  # the name is matched literally


ACK = HEAD + """\
model_training:
  writeback: {schemas: [sentiment]}
  backends:
    gpu: {type: slurm, host: login, remote_dir: ~/p, time: 1-00}
    gpu2: {type: slurm, host: login, remote_dir: ~/p, time: 2-00}
"""


def test_acknowledge_entries(write_config):
    assert MIN_ACK_LENGTH == 12
    path = write_config(ACK + """\
validation:
  acknowledge:
    - "for more than"
    - "6 hours is x"
    - "6 hours ...."
    - "backends.gpu2.time"
    - "no such warning"
""")
    _, report = check(path)
    # "for more than" (13) and the 12-character entries are long enough; gpu2's entry names it
    assert [p.backend for p in report.acknowledged] == ["gpu", "gpu2"]
    assert where(report.warnings, path) == [
        ("validation.acknowledge[1]", 16, None), ("validation.acknowledge[2]", 17, None),
        ("validation.acknowledge[4]", 19, None)]
    assert "matches no warning" in report.warnings[0].message
    assert "'no such warning'" in report.warnings[2].message


def test_an_entry_naming_a_backend_skips_the_others(write_config):
    # "model_training.backends.gpu" is in gpu2's warning too ("...backends.gpu2.time")
    path = write_config(ACK + "validation:\n  acknowledge: [model_training.backends.gpu]\n")
    _, report = check(path)
    assert [p.backend for p in report.acknowledged] == ["gpu"]
    assert [p.backend for p in report.warnings] == ["gpu2"]
    path = write_config(ACK + "validation:\n  acknowledge: [model_training.backends.gpu, "
                              "'2-00. A job that holds']\n", "two.yaml")
    _, report = check(path)
    assert [p.backend for p in report.acknowledged] == ["gpu", "gpu2"]  # the next entry counts
    assert report.warnings == []


def test_short_acknowledge_entries_match_nothing(write_config):
    path = write_config(ACK + """\
validation:
  acknowledge: ["6 hours", "more than 6 hours"]
""")
    _, report = check(path)
    assert [p.backend for p in report.acknowledged] == ["gpu", "gpu2"]
    assert where(report.warnings, path) == [("validation.acknowledge[0]", 14, None)]
    assert "shorter than 12" in report.warnings[0].message
    assert "'6 hours'" in report.warnings[0].message


def test_json_of_a_checked_config(write_config):
    path = write_config(ACK)
    _, report = check(path)
    d = json.loads(json.dumps(report.as_dict(True)))
    assert d["ok"] is False and [w["backend"] for w in d["warnings"]] == ["gpu", "gpu2"]
