"""`potato validate`: every rule, its message, and the exit codes with and without --strict."""

import json

import pytest

from potato.commands.cli import main
from potato.config.settings import ConfigError
from potato.training.backends.slurm import slurm_time_seconds
from potato.project.validation import check
from tests.helpers import BASE, EXAMPLE
from potato.config.reader import Problem
from potato.project.validation import MIN_ACK_LENGTH, Report, _names_in, check
from tests.helpers import BASE as HEAD  # a valid project to build on


def messages(problems):
    return [p.message for p in problems]


def run_validate(capsys, *args):
    code = main(["validate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_example_config_is_clean(capsys):
    code, out, _ = run_validate(capsys, f"{EXAMPLE}/config.yaml", "--strict")
    assert code == 0, out
    assert "OK (0 error(s), 0 warning(s), 0 acknowledged)" in out


def test_unknown_backend_key_suggests_closest_with_line(write_config, capsys):
    path = write_config(BASE + """\
model_training:
  backends:
    gpu-server:
      type: ssh
      host: gpu.example.org
      pyhton: python3.11
""")
    cfg, report = check(path)
    [err] = report.errors
    assert err.key == "model_training.backends.gpu-server.pyhton"
    assert err.line == 13
    assert err.message.startswith("model_training.backends.gpu-server.pyhton is not a key an ssh "
                                  "backend accepts. Did you mean python?")
    assert "Valid keys: type, description, host, user, port" in err.message
    code, out, _ = run_validate(capsys, path)
    assert code == 1
    assert f"error: {path}:13: model_training.backends.gpu-server.pyhton" in out


@pytest.mark.parametrize("btype,key,accepted", [
    ("ssh", "gpus", True), ("ssh", "packages", True), ("ssh", "partition", False),
    ("slurm", "gpus", False), ("slurm", "packages", False), ("slurm", "job_python", True),
    ("slurm", "prelude", True), ("slurm", "account", True), ("slurm", "cpus_per_task", True),
    ("agent", "host", False), ("agent", "queue_timeout_s", True), ("agent", "python", False),
    ("slurm", "requeue", True), ("ssh", "requeue", False), ("agent", "requeue", False),
])
def test_keys_per_backend_type(write_config, btype, key, accepted):
    values = {"gpus": "auto", "packages": ["peft"], "partition": "gpu", "job_python": "python3",
              "prelude": ["module load cuda"], "account": "lab", "cpus_per_task": 4,
              "host": "h", "queue_timeout_s": 60, "python": "python3", "requeue": True}
    extra = "      host: login\n      remote_dir: ~/p\n" if btype in ("ssh", "slurm") else ""
    if key == "host":
        extra = ""
    path = write_config(BASE + f"""\
model_training:
  backends:
    b:
      type: {btype}
{extra}      {key}: {json.dumps(values[key])}
""")
    _, report = check(path)
    unknown = [m for m in messages(report.errors) if "is not a key" in m]
    assert (unknown == []) == accepted, report.errors


def test_requeue_must_be_true_or_false_and_reaches_the_job(write_config, capsys):
    path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, requeue: "yes"}
""")
    _, report = check(path)
    assert "model_training.backends.cluster.requeue must be true or false, not 'yes'." in \
        messages(report.errors)
    from potato.config.settings import load
    from potato.training.backends.slurm import SlurmBackend
    from potato.training.remote.slurm_job import sbatch_argv

    for value, flag in (("true", "--requeue"), ("false", "--no-requeue")):
        path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, requeue: %s}
""" % value)
        code, out, _ = run_validate(capsys, path)
        assert code == 0, out
        cfg = load(path)[0]
        backend = SlurmBackend(cfg.model_training.backends["cluster"], cfg)
        assert flag in sbatch_argv(backend.settings(), "/j", "r1")


def test_slurm_nodes_is_a_whole_count_and_reaches_sbatch(write_config, capsys):
    from potato.config.settings import load
    from potato.training.backends.slurm import SlurmBackend
    from potato.training.remote.slurm_job import sbatch_argv

    for value, said in (("0", "must be between 1 and 1024, not 0"),
                        ("1.5", "must be a whole number"), ("two", "must be a whole number")):
        path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, nodes: %s}
""" % value)
        _, report = check(path)
        assert any(m.startswith("model_training.backends.cluster.nodes " + said)
                   for m in messages(report.errors)), report.errors
    path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, nodes: 2, ntasks_per_node: 4,
              gpus_per_node: "4"}
""")
    code, out, _ = run_validate(capsys, path, "--strict")
    assert code == 0, out
    cfg = load(path)[0]
    argv = sbatch_argv(SlurmBackend(cfg.model_training.backends["cluster"], cfg).settings(),
                       "/j", "r1")
    assert argv[-4:] == ["--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4", "/j/job.sh"]
    # per-node keys on a one-node backend do nothing: a warning says so
    path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, ntasks_per_node: 4}
""")
    _, report = check(path)
    assert any("sets ntasks_per_node or gpus_per_node without nodes" in m
               for m in messages(report.warnings)), report.warnings


def test_ssh_requeue_says_it_is_a_slurm_key(write_config):
    path = write_config(BASE + """\
model_training:
  backends:
    gpu: {type: ssh, host: gpu, requeue: true}
""")
    _, report = check(path)
    assert any("requeue is a slurm backend's key" in m for m in messages(report.errors)), \
        report.errors


def test_slurm_gpus_gets_gres_hint(write_config):
    path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, gpus: auto}
""")
    _, report = check(path)
    assert any("ask for GPUs with gres" in m for m in messages(report.errors))


def test_unknown_type_missing_host_and_remote_dir(write_config):
    path = write_config(BASE + """\
model_training:
  backends:
    k8s: {type: kubernets}
    gpu: {type: ssh}
    cluster: {type: slurm, host: login}
    scratch: {type: slurm, host: login, remote_dir: /tmp/potato}
    vartmp: {type: slurm, host: login, remote_dir: /var/tmp}
""")
    _, report = check(path)
    msgs = messages(report.errors)
    assert ("model_training.backends.k8s.type is 'kubernets', which is not a backend type. "
            "Valid types: local, ssh, slurm, agent.") in msgs
    assert any(m.startswith("model_training.backends.gpu is an ssh backend without host.")
               for m in msgs)
    assert any(m.startswith("model_training.backends.cluster has no remote_dir.") for m in msgs)
    assert any(m.startswith("model_training.backends.scratch.remote_dir is /tmp/potato, which is "
                            "node-local") for m in msgs)
    assert any(m.startswith("model_training.backends.vartmp.remote_dir is /var/tmp") for m in msgs)
    assert len(msgs) == 5, msgs


def test_backend_references(write_config):
    path = write_config(BASE + """\
model_training:
  backend: gpu-servr
  auto_retrain: {enabled: true, backend: nowhere, schemas: [sentiment]}
  backends:
    gpu-server: {type: ssh, host: gpu.example.org}
""")
    _, report = check(path)
    msgs = messages(report.errors)
    assert ("model_training.backend is 'gpu-servr', which names no configured backend. Did you "
            "mean gpu-server? Configured: local, gpu-server.") in msgs
    assert any(m.startswith("model_training.auto_retrain.backend is 'nowhere'") for m in msgs)


@pytest.mark.parametrize("value, word", [("[ssh]", "list"), ("{ssh: 1}", "dict"), ("3", "int")])
def test_a_backend_type_that_is_not_a_word_is_an_error_not_a_crash(write_config, value, word):
    path = write_config(BASE + "model_training:\n  backends:\n    g: {type: %s}\n" % value)
    _, report = check(path)
    assert messages(report.errors) == [
        "model_training.backends.g.type must be one word, one of: local, ssh, slurm, agent "
        "(it is a %s)." % word]


def test_auto_retrain_trainer_must_be_known_and_fit_the_project(write_config):
    path = write_config(BASE + "model_training:\n  auto_retrain: {enabled: true, trainer: "
                               "text-naive-bayse}\n")
    msgs = messages(check(path)[1].errors)
    assert len(msgs) == 1 and msgs[0].startswith(
        "model_training.auto_retrain.trainer: Unknown trainer 'text-naive-bayse'.")
    assert "text-naive-bayes" in msgs[0]
    path = write_config(BASE + "model_training:\n  auto_retrain: {enabled: true, trainer: "
                               "hf-image-classification}\n")
    msgs = messages(check(path)[1].errors)
    assert len(msgs) == 1 and msgs[0].startswith(
        "model_training.auto_retrain.trainer is hf-image-classification, which does not fit "
        "this project: it reads images")
    assert "text-naive-bayes" in msgs[0] and "auto_retrain.enabled: false" in msgs[0]
    # the default trainer fits the text project; automatic runs off: no trainer is judged
    for block in ("  auto_retrain: {enabled: true}\n",
                  "  auto_retrain: {enabled: false, trainer: hf-image-classification}\n"):
        assert check(write_config(BASE + "model_training:\n" + block))[1].errors == []


def test_a_trainer_plugin_that_cannot_be_imported_is_a_warning(write_config, monkeypatch):
    monkeypatch.setenv("POTATO_TRAINER_PLUGINS", "no_such_potato_plugin")
    _, report = check(write_config(BASE))
    assert report.errors == []
    assert any("no_such_potato_plugin" in m and "could not be imported" in m
               for m in messages(report.warnings))


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_numbers_must_be_finite(write_config, value):
    path = write_config(BASE + "model_training:\n  backends:\n    gpu: {type: ssh, host: h, "
                               "min_free_gpu_mb: %s, max_media_cache_mb: %s}\n" % (value, value))
    msgs = messages(check(path)[1].errors)
    assert len(msgs) == 2 and all("must be a finite number, not" in m for m in msgs), msgs


def test_env_values_are_one_value_and_a_bad_name_is_named(write_config):
    path = write_config(BASE + "model_training:\n  backends:\n    gpu: {type: ssh, host: h, "
                               "env: {X: [1, 2], Y: {a: b}, Z: 3}}\n")
    assert messages(check(path)[1].errors) == [
        "model_training.backends.gpu.env: X, Y must be one text, number or true/false, not a "
        "list or mapping."]
    path = write_config(BASE + "model_training:\n  backends:\n    gpu: {type: ssh, host: h, "
                               "env: {OK: 1, 2BAD: x}}\n")
    assert messages(check(path)[1].errors) == [
        "model_training.backends.gpu.env must map variable names (letters, digits, _) to values "
        "('2BAD' is not one)."]


def test_local_is_always_configured(write_config):
    path = write_config(BASE + "model_training:\n  backend: local\n")
    _, report = check(path)
    assert report.errors == []


@pytest.mark.parametrize("value,ok", [
    ('auto', True), ('none', True), ('"1"', True), ('"0,1"', True), ("0,1", True),
    ("1", False), ("all", False), ('"1,"', False), ("[0, 1]", False),
])
def test_gpus_values(write_config, value, ok):
    path = write_config(BASE + f"""\
model_training:
  backends:
    gpu:
      type: ssh
      host: h
      gpus: {value}
""")
    cfg, report = check(path)
    assert (report.errors == []) == ok, report.errors
    if value == "1":
        assert report.errors[0].message.startswith(
            'model_training.backends.gpu.gpus is the number 1. Write gpus: "1" (quoted)')


@pytest.mark.parametrize("value,ok", [("0", True), ("2500.5", True), ("-1", False),
                                      ("lots", False)])
def test_min_free_gpu_mb(write_config, value, ok):
    path = write_config(BASE + f"""\
model_training:
  backends:
    gpu: {{type: ssh, host: h, min_free_gpu_mb: {value}}}
""")
    _, report = check(path)
    assert (report.errors == []) == ok, report.errors


@pytest.mark.parametrize("value,ok", [("0", True), ("0.75", True), ("1", True), ("1.5", False),
                                      ("-0.1", False), ("high", False)])
def test_writeback_min_confidence(write_config, value, ok):
    path = write_config(BASE + f"model_training:\n  writeback: {{min_confidence: {value}}}\n")
    _, report = check(path)
    assert (report.errors == []) == ok, report.errors


def test_writeback_schemas_must_exist(write_config):
    path = write_config(BASE + "model_training:\n  writeback: {schemas: [sentimnt]}\n")
    _, report = check(path)
    [err] = report.errors
    assert err.message == ("model_training.writeback.schemas names 'sentimnt', which is not an "
                           "annotation scheme. Did you mean sentiment? Schemes: sentiment.")


def test_writeback_schemas_naming_an_annotate_only_scheme_is_an_error(write_config):
    text_too = BASE.replace("annotation_schemes:\n", "annotation_schemes:\n  - "
                            "{annotation_type: text, name: comment}\n")
    _, report = check(write_config(text_too + "model_training:\n  writeback: {schemas: "
                                   "[sentiment, comment]}\n"))
    [err] = report.errors
    assert err.message == (
        "model_training.writeback.schemas names 'comment', a text scheme: no trainer trains "
        "text schemes (they are annotate-only), so there would never be suggestions to write "
        "back. Remove it from writeback.schemas.")


def test_an_empty_writeback_note_names_a_scheme_a_trainer_takes(write_config):
    text_first = BASE.replace("annotation_schemes:\n", "annotation_schemes:\n  - "
                              "{annotation_type: text, name: comment}\n")
    _, report = check(write_config(text_first))
    [note] = [n for n in report.notes if "writeback.schemas is empty" in n.message]
    assert "writeback: {schemas: [sentiment]}" in note.message  # not the text scheme
    only_text = BASE.split("annotation_schemes:")[0] + (
        "annotation_schemes:\n  - {annotation_type: text, name: comment}\n")
    _, report = check(write_config(only_text, name="text.yaml"))
    assert not [n for n in report.notes if "writeback" in n.message]  # nothing to write back


@pytest.mark.parametrize("text,seconds", [
    ("30", 1800), ("30:15", 1815), ("02:00:00", 7200), ("1-12", 129600),
    ("1-02:30", 95400), ("1-00:00:10", 86410), ("UNLIMITED", float("inf")),
    ("2h", None), ("1:2:3:4", None), ("", None), ("-5", None),
])
def test_slurm_time_formats(text, seconds):
    assert slurm_time_seconds(text) == seconds


@pytest.mark.parametrize("value,error", [
    ("30", False), ("'30:00'", False), ("02:00:00", False), ("1:30:00", False), ("1-12", False),
    ("1-02:30", False), ("0-01:00:00", False), ("2h", True), ("0", True), ("[1]", True),
])
def test_slurm_time_in_config(write_config, value, error):
    path = write_config(BASE + f"""\
model_training:
  backends:
    cluster: {{type: slurm, host: login, remote_dir: ~/p, time: {value}}}
""")
    _, report = check(path)
    assert bool(report.errors) == error, report.errors


def test_six_hour_warning_exact_text_and_strict(write_config, capsys):
    # 7:00:00 is read by YAML 1.1 as a base-60 number; the message must show what was written.
    path = write_config(BASE + """\
model_training:
  backends:
    cluster: {type: slurm, host: login, remote_dir: ~/p, time: 7:00:00}
    short: {type: slurm, host: login, remote_dir: ~/p, time: "06:00:00"}
""")
    _, report = check(path)
    assert report.errors == []
    assert messages(report.warnings) == [
        "model_training.backends.cluster.time is 7:00:00. A job that holds a GPU for more than "
        "6 hours is long on a shared cluster; check its policy"]
    assert run_validate(capsys, path)[0] == 0
    code, out, _ = run_validate(capsys, path, "--strict")
    assert code == 1
    assert "warning:" in out and "FAILED" in out


def test_debug_with_remote_backend_warns(write_config):
    path = write_config(BASE + """\
debug: true
model_training:
  backends:
    gpu: {type: ssh, host: gpu.example.org}
    lab: {type: agent}
""")
    _, report = check(path)
    [w] = report.warnings
    assert w.backend == "gpu"
    assert "debug: true gives admin rights to every request from loopback" in w.message
    assert "reverse-forwarded socket" in w.message


def test_debug_without_remote_backend_still_warns(write_config):
    # issue 23: debug here gives loopback admin rights, which upstream's debug does not
    path = write_config(BASE + "debug: true\n")
    [w] = check(path)[1].warnings
    assert w.key == "debug" and "upstream Potato's debug does not" in w.message


ACK_BASE = BASE + """\
model_training:
  backends:
    gpu: {type: slurm, host: login, remote_dir: ~/p, time: 1-00}
    gpu2: {type: slurm, host: login, remote_dir: ~/p, time: 2-00}
"""


def test_acknowledgement_moves_matching_warnings(write_config, capsys):
    path = write_config(ACK_BASE + """\
validation:
  acknowledge:
    - "A job that holds a GPU for more than 6 hours"
""")
    _, report = check(path)
    assert report.warnings == []
    assert len(report.acknowledged) == 2
    code, out, _ = run_validate(capsys, path, "--strict")
    assert code == 0
    assert out.count("acknowledged: ") == 2


def test_only_validate_reads_the_validation_block(write_config, capsys, monkeypatch):
    # issue 38, item 7 (the tutorial: "the top-level validation block, which only potato
    # validate reads"): potato start reports the six-hour warning even when acknowledged
    path = write_config(ACK_BASE + """validation:
  acknowledge:
    - "A job that holds a GPU for more than 6 hours"
""")
    import potato.service

    started = []
    monkeypatch.setattr(potato.service, "serve", lambda cfg, **kw: started.append(cfg) or 0)
    capsys.readouterr()
    assert main(["start", path]) == 0 and started
    err = capsys.readouterr().err
    assert err.count("warning: ") == 2, err
    assert "model_training.backends.gpu.time is 1-00. A job that holds a GPU for more than 6 " \
           "hours" in err
    assert "acknowledge" not in err  # nor is the block itself judged there
    assert run_validate(capsys, path)[1].count("acknowledged: ") == 2


def test_acknowledgement_naming_a_backend_covers_only_that_backend(write_config):
    # "model_training.backends.gpu" is also a substring of gpu2's warning: the name decides.
    path = write_config(ACK_BASE + """\
validation:
  acknowledge: ["model_training.backends.gpu.time"]
""")
    _, report = check(path)
    assert [p.backend for p in report.acknowledged] == ["gpu"]
    assert [p.backend for p in report.warnings] == ["gpu2"]


def test_acknowledgement_is_case_sensitive_short_and_unused_entries_warn(write_config, capsys):
    path = write_config(ACK_BASE + """\
validation:
  acknowledge:
    - "a job that holds a gpu for more than 6 hours"
    - "6 hours"
""")
    _, report = check(path)
    assert report.acknowledged == []
    msgs = messages(report.warnings)
    assert any(m.startswith("validation.acknowledge[0] ('a job that holds a gpu for more than 6 "
                            "hours') matches no warning.") for m in msgs)
    assert any(m.startswith("validation.acknowledge[1] ('6 hours') is shorter than 12 characters")
               for m in msgs)
    assert len(msgs) == 4
    assert run_validate(capsys, path)[0] == 0
    assert run_validate(capsys, path, "--strict")[0] == 1


def test_json_report(write_config, capsys):
    path = write_config(ACK_BASE + "validation:\n  acknowledge: ['model_training.backends.gpu2']\n")
    code, out, _ = run_validate(capsys, path, "--json", "--strict")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert [w["backend"] for w in report["warnings"]] == ["gpu"]
    assert [w["backend"] for w in report["acknowledged"]] == ["gpu2"]
    assert report["warnings"][0]["line"] == 10
    assert report["warnings"][0]["key"] == "model_training.backends.gpu.time"


def test_wrong_types_and_sections(write_config):
    path = write_config(BASE + """\
debug: maybe
server: {port: eighty, colour: blue}
model_training:
  retain_runs: 0
  splits: {train: 0.8, val: 0.15, test: 0.15}
  backends:
    gpu: {type: ssh, host: h, port: 70000, env: {"BAD-NAME": 1}, keep_remote: yes please}
""")
    _, report = check(path)
    keys = sorted(p.key for p in report.errors)
    assert keys == ["debug", "model_training.backends.gpu.env",
                    "model_training.backends.gpu.keep_remote", "model_training.backends.gpu.port",
                    "model_training.retain_runs", "model_training.splits", "server.colour",
                    "server.port"], report.errors


def test_duplicate_key_is_an_error(write_config):
    path = write_config(BASE + "debug: false\ndebug: true\n")
    _, report = check(path)
    assert [p.message for p in report.errors] == [
        "debug is given twice; the second value would silently win. Keep one."]


def test_missing_data_file_and_schemes(write_config):
    path = write_config("data_files: [nope.jsonl]\nadmin_api_key: k\n")
    _, report = check(path)
    msgs = messages(report.errors)
    assert any(m.startswith("data_files[0] is ") and "does not exist" in m for m in msgs)
    assert any(m.startswith("annotation_schemes is empty") for m in msgs)


def test_paths_resolve_against_task_dir(tmp_path):
    (tmp_path / "proj" / "data").mkdir(parents=True)
    (tmp_path / "proj" / "data" / "x.jsonl").write_text('{"id": 1, "text": "a"}\n')
    (tmp_path / "conf").mkdir()
    cfg_path = tmp_path / "conf" / "c.yaml"
    cfg_path.write_text(BASE.replace("[items.jsonl]", "[data/x.jsonl]") + "task_dir: ../proj\n")
    cfg, report = check(str(cfg_path))
    assert report.errors == []
    assert cfg.task_dir == str(tmp_path / "proj")
    assert cfg.data_files == [str(tmp_path / "proj" / "data" / "x.jsonl")]
    assert cfg.output_dir == str(tmp_path / "proj" / "annotation_output")


@pytest.mark.parametrize("content,expect", [
    (None, "no such file. Give the path to the project's YAML config."),
    ("a: [1,\nb: 2\n", ":3: YAML syntax error:"),
    ("key: value\n  bad indent: here\n", ":2: YAML syntax error:"),
])
def test_unreadable_config_is_one_line_exit_1(tmp_path, capsys, content, expect):
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError):
        check(str(path))
    code, out, err = run_validate(capsys, str(path))
    assert code == 1
    assert expect in err
    assert "Traceback" not in err + out
    assert len(err.strip().splitlines()) == 1


# -- YAML that would explode or overflow (issue 34, items 1 and 9) ------------------------------

def _laughs(levels: int) -> str:
    """A "billion laughs" block: each level repeats the one before nine times."""
    text = 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for n in range(1, levels + 1):
        text += "l%d: &l%d [%s]\n" % (n, n, ", ".join(["*l%d" % (n - 1)] * 9))
    return text


def test_an_alias_bomb_is_refused_in_one_sentence_with_its_line(write_config, capsys):
    # Nine levels would be 9**10 values: without a bound this ran for minutes at gigabytes.
    path = write_config(BASE + _laughs(9))
    code, out, err = run_validate(capsys, path)
    assert code == 1 and out == ""
    base_lines = BASE.count("\n")
    # the first alias whose expansion passes the bound is on level 5's line (9**6 > 100,000)
    assert err.startswith("error: %s:%d: the YAML holds more than 100,000 values once the alias *l4 "
                          "here is expanded (it repeats a block that holds 66,430 values)" % (
        path, base_lines + 6)), err
    assert "Remove the aliases that repeat large blocks" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_aliases_that_stay_small_still_load(write_config):
    # a few levels of aliases (9**3 values) are a config, not a bomb; merge keys too
    path = write_config(BASE + _laughs(2) + "extra: &x {a: 1}\nmore:\n  <<: *x\n  b: 2\n")
    cfg, report = check(path)
    assert cfg.upstream is not None and not any("values" in m for m in messages(report.errors))


def test_an_alias_inside_its_own_block_is_refused(write_config, capsys):
    path = write_config(BASE + "loop: &me\n  - 1\n  - *me\n")
    code, _, err = run_validate(capsys, path)
    assert code == 1
    assert err.startswith("error: %s:%d: the alias *me is inside the block it names (&me)" % (
        path, BASE.count("\n") + 3)), err


@pytest.mark.parametrize("depth, refused", [(60, False), (65, True), (20000, True)])
def test_deep_nesting_is_one_sentence_not_a_traceback(write_config, capsys, depth, refused):
    path = write_config(BASE + "deep: " + "[" * depth + "]" * depth + "\n")
    code, _, err = run_validate(capsys, path)
    assert "Traceback" not in err and "RecursionError" not in err
    if refused:
        assert code == 1 and "the YAML is nested more than 64 levels deep" in err, err
        assert err.startswith("error: %s:%d:" % (path, BASE.count("\n") + 1)) and err.count("\n") == 1
    else:
        assert "nested" not in err


def test_a_deep_alias_counts_its_own_depth(write_config, capsys):
    # each block alone is shallow; the alias puts 40 levels under 40 levels
    block = "[" * 40 + "]" * 40
    path = write_config(BASE + "a: &a %s\nb: %s\n" % (block, "[" * 30 + "*a" + "]" * 30))
    code, _, err = run_validate(capsys, path)
    assert code == 1 and "nested more than 64 levels deep once the alias *a here is " \
                         "expanded" in err, err


def test_an_alias_repeating_a_long_text_is_refused(write_config, capsys):
    # the hostile review: a 300 KB string repeated through aliases passed the value count and
    # cost a running server 2.9 GB on reload; text is bounded too (2 MB, aliases expanded)
    path = write_config(BASE + "long: &s " + "x" * 300000 + "\nmany: [" +
                        ", ".join(["*s"] * 20) + "]\n")
    code, out, err = run_validate(capsys, path)
    assert code == 1 and err.count("\n") == 1, err[:300]
    assert "the YAML holds more than 2 MB of text once the alias *s here is expanded (it " \
           "repeats 300,000 characters)" in err


@pytest.mark.parametrize("value, says", [
    ("2001-02-30", "day is out of range for month"),
    ("9" * 5000, "Exceeds the limit (4300 digits)"),
    ("!!bool maybe", "'maybe' is not a value of its type"),
    ("!!timestamp abc", "a tagged value of the wrong form")])
def test_a_value_yaml_cannot_build_is_one_sentence(write_config, capsys, value, says):
    path = write_config(BASE + "odd: %s\n" % value)
    code, out, err = run_validate(capsys, path)
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("error: %s: a value cannot be read as YAML (" % path) and says in err
    assert err.rstrip().endswith('Quote it ("...") to keep it as text, or fix it.')


def test_a_long_label_list_is_checked_whole(write_config):
    # every duplicate still found in a long list (the check was quadratic: 60,000 labels took
    # a minute); a duplicate's message quotes a long label cut short
    labels = ["l%d" % i for i in range(20000)] + ["l7", "x" * 500, "x" * 500]
    path = write_config(BASE.replace("labels: [positive, negative]", "labels: [%s]" %
                                     ", ".join(labels)))
    _, report = check(path)
    dups = [m for m in messages(report.errors) if "twice" in m]
    assert len(dups) == 2 and "'l7'" in dups[0], dups
    assert len(dups[1]) < 200 and "..." in dups[1]


# -- Fast unit tests for the cross-field rules of potato/project/validation.py, written so that (folded in from test_validate.py) ----------
# tools/mutation.py's mutants of that module fail: every finding is checked for its key, line,
# file and backend, not only its words.


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
    path = write_config(HEAD + "theme: dark\nitem_store: sqlite\n"
                        "model_training: {writeback: {schemas: [sentiment]}}\n")
    _, report = check(path)
    [note] = report.notes
    assert where([note], path) == [("theme", 8, None)]
    assert note.message.count("theme") == 1 and "item_store" in note.message


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


def test_validate_reads_the_items_as_start_does(write_config, capsys):
    """Items start would refuse (no text under text_key, a duplicate id) fail validate too,
    with start's own sentence."""
    path = write_config(BASE, items=[{"id": "a", "text": "fine"}, {"id": "b", "body": "x"}])
    code, out, _ = run_validate(capsys, path)
    assert code == 1
    assert "item 'b' has no 'text' text (item_properties.text_key)." in out, out
    with open(path.replace("config.yaml", "items.jsonl"), "w") as f:
        f.write("".join(json.dumps({"id": "a", "text": t}) + "\n" for t in ("one", "two")))
    code, out, _ = run_validate(capsys, path)
    assert code == 1 and "duplicate id 'a'" in out, out
