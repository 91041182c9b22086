"""Fast unit tests for potato/config/settings.py's sections (ranges, defaults, the key and line of each
problem), written so that tools/mutation.py's mutants of that module fail."""

import os
import textwrap

import pytest

from potato.config.settings import Backend, load

HEAD = """\
data_files: [items.jsonl]
annotation_schemes:
  - {annotation_type: radio, name: sentiment, labels: [a, b]}
"""


@pytest.fixture
def parse(tmp_path):
    def run(text, head=HEAD):
        path = tmp_path / "config.yaml"
        path.write_text(head + textwrap.dedent(text))
        cfg, errors, warnings = load(str(path))
        assert all(p.file == str(path) for p in errors + warnings)
        return cfg, [(p.key, p.line) for p in errors], [(p.key, p.line) for p in warnings]
    return run


def mt_value(parse, yaml, attr):
    """model_training.<yaml> parsed: (the value of attr, the errors' keys)."""
    cfg, errors, _ = parse("model_training:\n  %s\n" % yaml)
    value = cfg.model_training
    for part in attr.split("."):
        value = getattr(value, part)
    return value, [k for k, _ in errors]


MT_CASES = [
    # (yaml under model_training, attribute, expected value, error key or None)
    ("enabled: false", "enabled", False, None),
    ("enabled: 3", "enabled", True, "model_training.enabled"),
    ("backend: gpu", "backend", "gpu", None),
    ("backend: 5", "backend", "local", "model_training.backend"),
    ("split_seed: -3", "split_seed", -3, None),
    ("split_seed: 1.5", "split_seed", 0, "model_training.split_seed"),
    ("retain_runs: 1", "retain_runs", 1, None),
    ("retain_runs: 0", "retain_runs", 5, "model_training.retain_runs"),
    ("retain_runs: 2.5", "retain_runs", 5, "model_training.retain_runs"),
    ("max_wall_seconds: 0.5", "max_wall_seconds", 0.5, None),
    ("max_wall_seconds: 0", "max_wall_seconds", None, "model_training.max_wall_seconds"),
    ("max_ram_mb: 0.5", "max_ram_mb", 0.5, None),
    ("max_ram_mb: 0", "max_ram_mb", None, "model_training.max_ram_mb"),
    ("num_threads: 1", "num_threads", 1, None),
    ("num_threads: 0", "num_threads", None, "model_training.num_threads"),
    ("num_threads: 1.5", "num_threads", None, "model_training.num_threads"),
    ("device: cpu", "device", "cpu", None),
    ("device: mps", "device", "mps", None),
    ("device: cuda", "device", "cuda", None),
    ("device: 'cuda:12'", "device", "cuda:12", None),
    ("device: gpu", "device", "auto", "model_training.device"),
    ("device: 'cuda:x'", "device", "auto", "model_training.device"),
    ("device: xcpu", "device", "auto", "model_training.device"),
    ("device: cpux", "device", "auto", "model_training.device"),
    ("grace_seconds: 0", "grace_seconds", 0, None),
    ("grace_seconds: -1", "grace_seconds", 20, "model_training.grace_seconds"),
    ("max_predictions_mb: 0.5", "max_predictions_mb", 0.5, None),
    ("max_predictions_mb: 0", "max_predictions_mb", 512, "model_training.max_predictions_mb"),
    ("min_labels_per_class: 1", "min_labels_per_class", 1, None),
    ("min_labels_per_class: 0", "min_labels_per_class", 2, "model_training.min_labels_per_class"),
    ("min_labels_per_class: 1.5", "min_labels_per_class", 2,
     "model_training.min_labels_per_class"),
    ("aggregation: consensus", "aggregation", "consensus", None),
    ("aggregation: majority", "aggregation", "majority", None),
    ("aggregation: ''", "aggregation", "majority", None),
    ("aggregation: vote", "aggregation", "majority", "model_training.aggregation"),
    ("aggregation: 5", "aggregation", "majority", "model_training.aggregation"),
    ("writeback: {schemas: [s1, s2]}", "writeback.schemas", ["s1", "s2"], None),
    ("writeback: {schemas: 3}", "writeback.schemas", [], "model_training.writeback.schemas"),
    ("writeback: {min_confidence: 1}", "writeback.min_confidence", 1, None),
    ("writeback: {min_confidence: 0}", "writeback.min_confidence", 0, None),
    ("writeback: {min_confidence: 1.01}", "writeback.min_confidence", 0.0,
     "model_training.writeback.min_confidence"),
    ("writeback: {min_confidence: -0.1}", "writeback.min_confidence", 0.0,
     "model_training.writeback.min_confidence"),
    ("writeback: {include_unlabeled: true}", "writeback.include_unlabeled", True, None),
    ("writeback: {include_unlabeled: 1}", "writeback.include_unlabeled", False,
     "model_training.writeback.include_unlabeled"),
    ("writeback: {policy: newest}", "writeback.policy", "newest", None),
    ("writeback: {policy: ''}", "writeback.policy", "best", None),
    ("writeback: {policy: worst}", "writeback.policy", "worst", "model_training.writeback.policy"),
    ("writeback: {tolerance: 1}", "writeback.tolerance", 1, None),
    ("writeback: {tolerance: 0}", "writeback.tolerance", 0, None),
    ("writeback: {tolerance: 1.5}", "writeback.tolerance", 0.01, "model_training.writeback.tolerance"),
    ("writeback: {tolerance: -1}", "writeback.tolerance", 0.01, "model_training.writeback.tolerance"),
    ("writeback: {nope: 1}", "writeback.policy", "best", "model_training.writeback.nope"),
    ("auto_retrain: {enabled: true}", "auto_retrain.enabled", True, None),
    ("auto_retrain: {enabled: 2}", "auto_retrain.enabled", False,
     "model_training.auto_retrain.enabled"),
    ("auto_retrain: {trainer: t2}", "auto_retrain.trainer", "t2", None),
    ("auto_retrain: {schemas: [s]}", "auto_retrain.schemas", ["s"], None),
    ("auto_retrain: {schemas: 3}", "auto_retrain.schemas", [], "model_training.auto_retrain.schemas"),
    ("auto_retrain: {params: {a: 1}}", "auto_retrain.params", {"a": 1}, None),
    ("auto_retrain: {params: 3}", "auto_retrain.params", {}, "model_training.auto_retrain.params"),
    ("auto_retrain: {update_frequency: 1}", "auto_retrain.update_frequency", 1, None),
    ("auto_retrain: {update_frequency: 0}", "auto_retrain.update_frequency", 100,
     "model_training.auto_retrain.update_frequency"),
    ("auto_retrain: {update_frequency: 1.5}", "auto_retrain.update_frequency", 100,
     "model_training.auto_retrain.update_frequency"),
    ("auto_retrain: {min_interval_s: 0}", "auto_retrain.min_interval_s", 0, None),
    ("auto_retrain: {min_interval_s: -1}", "auto_retrain.min_interval_s", 600,
     "model_training.auto_retrain.min_interval_s"),
    ("auto_retrain: {backend: gpu}", "auto_retrain.backend", "gpu", None),
    ("auto_retrain: {backend: 5}", "auto_retrain.backend", None,
     "model_training.auto_retrain.backend"),
    ("auto_retrain: {nope: 1}", "auto_retrain.enabled", False, "model_training.auto_retrain.nope"),
    ("splits: {train: 0.8, val: 0.1, test: 0.1}", "splits.train", 0.8, None),
    ("splits: {train: 0.8, val: 0.1, test: 0.1}", "splits.val", 0.1, None),
    ("splits: {train: 0.8, val: 0.1, test: 0.1}", "splits.test", 0.1, None),
    ("splits: {train: 1, val: 0, test: 0.0000005}", "splits.train", 1, None),  # within 1e-6
    ("splits: {train: 1, val: 0, test: 0.000002}", "splits.train", 0.7, "model_training.splits"),
    ("splits: {train: 0.8, val: 0.1, test: 0.2}", "splits.train", 0.7, "model_training.splits"),
    ("splits: {train: 0.7, val: 0.1, test: 0.1}", "splits.train", 0.7, "model_training.splits"),
    ("splits: {train: 0.9, val: 0.1, test: 0}", "splits.train", 0.7, "model_training.splits"),
    ("splits: {train: 0, val: 0, test: 1}", "splits.test", 1, None),
    ("splits: {train: 0.9, val: 0.1}", "splits.val", 0.15, "model_training.splits"),
    ("splits: {train: 1.5, val: 0.1, test: 0.1}", "splits.train", 0.7,
     "model_training.splits.train"),
    ("splits: {train: 0.9, val: -0.1, test: 0.2}", "splits.val", 0.15,
     "model_training.splits.val"),
    ("splits: {train: 0.5, val: 0.5, test: 1.5}", "splits.test", 0.15,
     "model_training.splits.test"),
    ("splits: {train: 0.8, val: 0.1, test: 0.1, nope: 1}", "splits.train", 0.8,
     "model_training.splits.nope"),
    ("splits: {train: 0.9, val: 0.1, test: null}", "splits.val", 0.15, "model_training.splits"),
    ("publish: {token_env: MY_TOKEN}", "publish.token_env", "MY_TOKEN", None),
    ("publish: {token_env: hf_abcdef}", "publish.token_env", "HF_TOKEN",
     "model_training.publish.token_env"),
    ("publish: {token_env: 1BAD}", "publish.token_env", "HF_TOKEN",
     "model_training.publish.token_env"),
    ("publish: {token_env: _%s}" % ("A" * 99), "publish.token_env", "_" + "A" * 99, None),
    ("publish: {token_env: _%s}" % ("A" * 100), "publish.token_env", "HF_TOKEN",
     "model_training.publish.token_env"),
    ("publish: {token_env: 'A B'}", "publish.token_env", "HF_TOKEN",
     "model_training.publish.token_env"),
    ("publish: {token_env: 5}", "publish.token_env", "HF_TOKEN", "model_training.publish.token_env"),
    ("publish: {license: apache-2.0}", "publish.license", "apache-2.0", None),
    ("publish: {license: 'a%s'}" % ("b" * 63), "publish.license", "a" + "b" * 63, None),
    ("publish: {license: 'a%s'}" % ("b" * 64), "publish.license", None,
     "model_training.publish.license"),
    ("publish: {license: Apache}", "publish.license", None, "model_training.publish.license"),
    ("publish: {license: -mit}", "publish.license", None, "model_training.publish.license"),
    ("publish: {license: 'mit x'}", "publish.license", None, "model_training.publish.license"),
    ("publish: {license: 5}", "publish.license", None, "model_training.publish.license"),
    ("publish: {timeout_s: 1}", "publish.timeout_s", 1, None),
    ("publish: {timeout_s: 3600}", "publish.timeout_s", 3600, None),
    ("publish: {timeout_s: 0.5}", "publish.timeout_s", 60, "model_training.publish.timeout_s"),
    ("publish: {timeout_s: 3601}", "publish.timeout_s", 60, "model_training.publish.timeout_s"),
    ("publish: {nope: 1}", "publish.timeout_s", 60, "model_training.publish.nope"),
    ("nope: 1", "enabled", True, "model_training.nope"),
]


@pytest.mark.parametrize("yaml, attr, expected, error", MT_CASES)
def test_model_training_values(parse, yaml, attr, expected, error):
    value, errors = mt_value(parse, yaml, attr)
    assert value == expected and type(value) is type(expected)
    assert errors == ([error] if error else [])


def test_model_training_defaults(parse):
    cfg, errors, warnings = parse("")
    assert errors == warnings == []
    mt = cfg.model_training
    assert (mt.enabled, mt.backend, mt.split_seed, mt.retain_runs) == (True, "local", 0, 5)
    assert (mt.max_wall_seconds, mt.max_ram_mb, mt.num_threads) == (None, None, None)
    assert (mt.device, mt.grace_seconds, mt.max_predictions_mb) == ("auto", 20, 512)
    assert (mt.min_labels_per_class, mt.aggregation) == (2, "majority")
    assert (mt.splits.train, mt.splits.val, mt.splits.test) == (0.70, 0.15, 0.15)
    wb = mt.writeback
    assert (wb.schemas, wb.min_confidence, wb.include_unlabeled, wb.policy, wb.tolerance) == (
        [], 0.0, False, "best", 0.01)
    ar = mt.auto_retrain
    assert (ar.enabled, ar.trainer, ar.schemas, ar.params) == (False, None, [], {})
    # no trainer named: automatic runs take the registry's default, the tutorial's naive Bayes
    from potato.training.remote import trainers
    assert trainers.default_trainer() == "text-naive-bayes"
    assert (ar.update_frequency, ar.min_interval_s, ar.backend) == (100, 600, None)
    assert (mt.publish.token_env, mt.publish.license, mt.publish.timeout_s) == (
        "HF_TOKEN", None, 60)
    assert mt.backends == {"local": Backend("local", "local")}


def test_problem_lines_in_model_training(parse):
    _, errors, _ = parse("""\
        model_training:
          retain_runs: 0
          splits: {train: 0.5, val: 0.1, test: 0.1}
          writeback:
            policy: worst
          publish:
            license: Apache
          auto_retrain:
            params: 3
        """)
    assert errors == [("model_training.retain_runs", 5), ("model_training.splits", 6),
                      ("model_training.writeback.policy", 8),
                      ("model_training.auto_retrain.params", 12),
                      ("model_training.publish.license", 10)]


def test_backends(parse):
    cfg, errors, _ = parse("model_training:\n  backends: 3\n")
    assert errors == [("model_training.backends", 5)]
    assert list(cfg.model_training.backends) == ["local"]
    cfg, errors, _ = parse("model_training:\n  backends: {}\n")
    assert errors == [] and list(cfg.model_training.backends) == ["local"]
    cfg, errors, _ = parse("model_training:\n  backends:\n"
                           "    gpu: {type: ssh, host: h}\n    7: {type: agent}\n")
    assert errors == []
    assert list(cfg.model_training.backends) == ["local", "gpu", "7"]
    b = cfg.model_training.backends["gpu"]
    assert (b.name, b.type, b.options.host) == ("gpu", "ssh", "h")
    cfg, errors, _ = parse("model_training:\n  backends:\n    bad: 3\n")
    assert list(cfg.model_training.backends) == ["local"]
    assert [k for k, _ in errors] == ["model_training.backends.bad"]


def test_publish_only_under_a_model_training_mapping(parse):
    cfg, errors, _ = parse("model_training: 3\n")
    assert cfg.model_training.publish.token_env == "HF_TOKEN"
    assert [k for k, _ in errors] == ["model_training"]


SERVER_CASES = [
    # (yaml under server, attribute, expected, error key or None)
    ("host: 0.0.0.0", "host", "0.0.0.0", None),
    ("port: 0", "port", 0, None),
    ("port: 65535", "port", 65535, None),
    ("port: 65536", "port", 8000, "server.port"),
    ("port: -1", "port", 8000, "server.port"),
    ("port: 80.5", "port", 8000, "server.port"),
    ("max_body_mb: 0.5", "max_body_mb", 0.5, None),
    ("max_body_mb: 0", "max_body_mb", 16.0, "server.max_body_mb"),
    ("new_names_per_hour: 0", "new_names_per_hour", 0, None),
    ("new_names_per_hour: 1000000", "new_names_per_hour", 1000000, None),
    ("new_names_per_hour: 1000001", "new_names_per_hour", 100, "server.new_names_per_hour"),
    ("new_names_per_hour: -1", "new_names_per_hour", 100, "server.new_names_per_hour"),
    ("new_names_per_hour: 1.5", "new_names_per_hour", 100, "server.new_names_per_hour"),
    ("trusted_proxies: [' 10.0.0.7/24 ', 127.0.0.1, '::1']", "trusted_proxies",
     ["10.0.0.0/24", "127.0.0.1/32", "::1/128"], None),
    ("trusted_proxies: [10.0.0.1, proxy.example]", "trusted_proxies", ["10.0.0.1/32"],
     "server.trusted_proxies[1]"),
    ("tls_cert: c.pem", "tls_key", None, "server"),
    ("tls_key: k.pem", "tls_cert", None, "server"),
    ("nope: 1", "port", 8000, "server.nope"),
]


@pytest.mark.parametrize("yaml, attr, expected, error", SERVER_CASES)
def test_server_values(parse, yaml, attr, expected, error):
    cfg, errors, warnings = parse("server: {%s}\n" % yaml)
    value = getattr(cfg.server, attr)
    assert value == expected and type(value) is type(expected)
    assert [k for k, _ in errors] == ([error] if error else [])
    assert warnings == []


def test_server_defaults_tls_and_debug(parse, tmp_path):
    cfg, errors, warnings = parse("")
    s = cfg.server
    assert (s.host, s.port, s.tls_cert, s.tls_key, s.max_body_mb, s.trusted_proxies,
            s.new_names_per_hour) == ("127.0.0.1", 8000, None, None, 16.0, [], 100)
    cfg, errors, warnings = parse("server:\n  tls_cert: c.pem\n  tls_key: ~/k.pem\n"
                                  "  debug: false\n")
    assert errors == warnings == []
    assert cfg.server.tls_cert == str(tmp_path / "c.pem")
    assert cfg.server.tls_key == os.path.expanduser("~/k.pem")
    cfg, errors, warnings = parse("server:\n  debug: true\n")
    assert warnings == [("server.debug", 5)] and errors == [] and cfg.debug is False
    cfg, errors, _ = parse("server:\n  tls_cert: c.pem\n")
    assert errors == [("server", 4)]


@pytest.mark.parametrize("url, kept", [
    ("https://annotate.example.org/", "https://annotate.example.org"),
    ("  http://gpu-lab.example.org:8000//  ", "http://gpu-lab.example.org:8000"),
    ("http://h/sub/path/", "http://h/sub/path"),
    ("''", None), ("'   '", None),
])
def test_server_url_kept(parse, url, kept):
    cfg, errors, _ = parse("server_url: %s\n" % url)
    assert cfg.server_url == kept and errors == []


@pytest.mark.parametrize("url, why", [
    ("ftp://h", "http:// or https://"), ("h.example.org", "http:// or https://"),
    ("'http://'", "no host name"), ("'http://:80'", "no host name"),
    ("http://u@h", "user name"), ("'http://:p@h'", "user name"),
    ("http://h?q=1", "query"), ("http://h#f", "query"), ("'http://h/a b'", "query"),
    ("http://h:99999", "out of range"), ("http://h:x", "port"),
])
def test_server_url_refused(parse, url, why):
    cfg, errors, _ = parse("server_url: %s\n" % url)
    assert cfg.server_url is None and errors == [("server_url", 4)]


def test_server_url_reasons(tmp_path):
    for url, why in (("ftp://h", "http:// or https://"), ("http://", "no host name"),
                     ("http://u@h", "user name or password"), ("http://h?q=1", "a query"),
                     ("http://h:99999", "out of range")):
        path = tmp_path / "c.yaml"
        path.write_text(HEAD + "server_url: '%s'\n" % url)
        _, errors, _ = load(str(path))
        assert why in errors[0].message, (url, errors[0].message)


def test_top_level_values(parse, tmp_path):
    cfg, errors, warnings = parse("""\
        annotation_task_name: My task
        media_directory: media
        item_properties: {id_key: uid, text_key: body, image_key: pic, audio_key: snd,
                          kwargs: [x]}
        output_annotation_dir: out
        admin_api_key: secret-key-123
        allowed_hosts: [' Annotate.Example.ORG ', '', LOCALHOST]
        debug: true
        validation: {acknowledge: [some warning text]}
        """)
    assert errors == warnings == []
    assert cfg.annotation_task_name == "My task"
    assert cfg.task_dir == str(tmp_path)
    assert cfg.data_files == [str(tmp_path / "items.jsonl")]
    assert cfg.data_encodings == {str(tmp_path / "items.jsonl"): "utf-8"}
    assert cfg.media_directory == str(tmp_path / "media")
    ip = cfg.item_properties
    assert (ip.id_key, ip.text_key, ip.image_key, ip.audio_key) == ("uid", "body", "pic", "snd")
    assert cfg.output_dir == str(tmp_path / "out")
    assert cfg.db_path == str(tmp_path / "out" / "potato.db")
    assert cfg.runs_dir == str(tmp_path / "out" / "training" / "runs")
    assert cfg.admin_api_key == "secret-key-123"
    assert cfg.allowed_hosts == ["annotate.example.org", "localhost"]
    assert cfg.debug is True and cfg.acknowledge == ["some warning text"]
    assert [s.name for s in cfg.schemes] == ["sentiment"] and cfg.scheme("sentiment").name == (
        "sentiment")
    assert cfg.scheme("nope") is None


def test_top_level_defaults(parse, tmp_path):
    cfg, errors, warnings = parse("")
    assert errors == warnings == []
    assert cfg.annotation_task_name == "Potato project"
    assert cfg.media_directory == str(tmp_path)
    ip = cfg.item_properties
    assert (ip.id_key, ip.text_key, ip.image_key, ip.audio_key) == ("id", "text", None, None)
    assert cfg.output_dir == str(tmp_path / "annotation_output")
    assert (cfg.admin_api_key, cfg.server_url, cfg.allowed_hosts, cfg.debug) == (
        None, None, [], False)
    assert cfg.acknowledge == [] and cfg.path == str(tmp_path / "config.yaml")


def test_task_dir_and_paths(parse, tmp_path):
    cfg, errors, _ = parse("task_dir: proj\nmedia_directory: ~/m\n")
    assert cfg.task_dir == str(tmp_path / "proj")
    assert cfg.data_files == [str(tmp_path / "proj" / "items.jsonl")]
    assert cfg.media_directory == os.path.expanduser("~/m")


def test_wrong_types_at_the_top(parse):
    _, errors, _ = parse("admin_api_key: 12345\nserver_url: 5\ndebug: 1\n"
                         "item_properties: {image_key: 5}\n")
    assert errors == [("item_properties.image_key", 7), ("admin_api_key", 4),
                      ("server_url", 5), ("debug", 6)]


def test_duplicate_keys_and_an_empty_file(parse):
    cfg, errors, _ = parse("debug: false\ndebug: true\n")
    assert errors == [("debug", 5)]
    cfg, errors, _ = parse("", head="")
    assert cfg.data_files == [] and errors == []
    cfg, errors, _ = parse("# nothing\n", head="")
    assert cfg.annotation_task_name == "Potato project"


def test_upstream_port_and_required(parse):
    cfg, errors, _ = parse("port: 9001\n")
    assert cfg.server.port == 9001 and errors == []
    cfg, errors, _ = parse("port: 9001\nserver: {port: 9002}\n")
    assert cfg.server.port == 9002 and errors == [("port", 4)]
    cfg, errors, _ = parse("port: 9001\nserver: {host: h}\n")
    assert cfg.server.port == 9001 and errors == []
    cfg, errors, _ = parse("require_fully_annotated: true\n")
    assert [s.required for s in cfg.schemes] == [True]
    cfg, errors, _ = parse("")
    assert [s.required for s in cfg.schemes] == [False]


def test_line_of_walks_up_to_a_known_key(parse):
    cfg, _, _ = parse("model_training:\n  backends:\n    gpu: {type: ssh, host: h}\n")
    assert cfg.line_of(("model_training", "backends", "gpu", "host")) == 6
    assert cfg.line_of(("model_training", "backends", "gpu", "nope", "x")) == 6
    assert cfg.line_of(("model_training", "nope")) == 4
    assert cfg.line_of(("nope",)) is None and cfg.line_of(()) is None


def test_display_fields_name_the_media_keys(parse, tmp_path):
    display = ("instance_display:\n  fields:\n    - {key: pic, type: image}\n"
               "    - {key: snd, type: audio}\n    - {key: txt, type: text}\n")
    cfg, errors, _ = parse(display)
    ip = cfg.item_properties
    assert (ip.image_key, ip.audio_key, ip.text_key) == ("pic", "snd", "text") and errors == []
    cfg, errors, _ = parse(display + "item_properties: {image_key: pic}\n")
    assert cfg.item_properties.image_key == "pic" and errors == []
    cfg, errors, _ = parse(display + "item_properties: {audio_key: other}\n")
    assert cfg.item_properties.audio_key == "other"
    assert errors == [("instance_display.fields", 5)]
    assert cfg.item_properties.image_key == "pic"
    _, errs, _ = load(str(tmp_path / "config.yaml"))
    assert "'snd'" in errs[0].message and "'other'" in errs[0].message


@pytest.mark.parametrize("yaml, key", [
    ("task_dir: [a]", "task_dir"),
    ("annotation_task_name: [a]", "annotation_task_name"),
    ("media_directory: [a]", "media_directory"),
    ("output_annotation_dir: [a]", "output_annotation_dir"),
    ("data_files: 5", "data_files"),
    ("allowed_hosts: 5", "allowed_hosts"),
    ("item_properties: {id_key: [a]}", "item_properties.id_key"),
    ("item_properties: {text_key: [a]}", "item_properties.text_key"),
    ("item_properties: {audio_key: 5}", "item_properties.audio_key"),
    ("item_properties: {kwargs: 5}", "item_properties.kwargs"),
    ("item_properties: {nope: 5}", "item_properties.nope"),
    ("item_properties: 5", "item_properties"),
    ("validation: {acknowledge: 5}", "validation.acknowledge"),
    ("validation: {nope: 5}", "validation.nope"),
    ("server: 5", "server"),
    ("server: {host: [a]}", "server.host"),
    ("server: {tls_cert: [a]}", "server.tls_cert"),
    ("server: {tls_key: [a]}", "server.tls_key"),
    ("server: {debug: 5}", "server.debug"),
    ("server: {trusted_proxies: 5}", "server.trusted_proxies"),
])
def test_a_wrong_value_is_an_error_at_its_key(parse, yaml, key):
    _, errors, _ = parse(yaml + "\n", head="")
    assert [k for k, _ in errors] == [key]


def test_an_unknown_item_properties_key_names_its_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("item_properties: {nope: 1}\n")
    _, errors, _ = load(str(path))
    assert "not a key item_properties accepts" in errors[0].message


def test_messages_say_what_is_wrong(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("server_url: 5\nport: 9001\nserver: {port: 9002}\n")
    _, errors, _ = load(str(path))
    assert "must be a string" in errors[0].message  # not read as the URL "5"
    assert "server.port" in errors[1].message


def test_validation_section_name_and_display_order(tmp_path, parse):
    path = tmp_path / "c.yaml"
    path.write_text("validation: {nope: 1}\n")
    _, errors, _ = load(str(path))
    assert "not a key validation accepts" in errors[0].message
    path.write_text("server: {nope: 1}\n")
    _, errors, _ = load(str(path))
    assert "not a key server accepts" in errors[0].message
    cfg, errors, _ = parse("instance_display:\n  fields:\n    - {key: txt, type: text}\n"
                           "    - {key: pic, type: image}\n")
    assert cfg.item_properties.image_key == "pic" and errors == []  # after a text field


@pytest.fixture
def problems(tmp_path):
    """config text -> [(dotted key, message)] of its errors and warnings."""
    def run(text):
        path = tmp_path / "config.yaml"
        path.write_text(HEAD + textwrap.dedent(text))
        _, errors, warnings = load(str(path))
        return [(p.key, p.message) for p in errors + warnings]
    return run


@pytest.mark.parametrize("yaml, key, says", [
    ("server: {debug: true}", "server.debug", "server.debug"),
    ("server: {tls_cert: c.pem}", "server", "server.tls_cert"),
    ("server: {trusted_proxies: [nonsense]}", "server.trusted_proxies[0]",
     "server.trusted_proxies[0]"),
    ("model_training: {splits: {train: 0.8, val: 0.2}}", "model_training.splits",
     "model_training.splits"),
    ("model_training: {splits: {train: 0.5, val: 0.2, test: 0.2}}", "model_training.splits",
     "model_training.splits"),
    ("model_training: {splits: {train: 0.8, val: 0.2, test: 0}}", "model_training.splits",
     "model_training.splits.test"),
    ("model_training: {aggregation: mode}", "model_training.aggregation",
     "model_training.aggregation"),
    ("model_training: {device: gpu}", "model_training.device", "model_training.device"),
    ("model_training: {writeback: {policy: oldest}}", "model_training.writeback.policy",
     "model_training.writeback.policy"),
    ("model_training: {auto_retrain: {params: 5}}", "model_training.auto_retrain.params",
     "model_training.auto_retrain.params"),
    ("model_training: {backends: 5}", "model_training.backends", "model_training.backends"),
    ("model_training: {publish: {token_env: hf_abcdef}}", "model_training.publish.token_env",
     "model_training.publish.token_env"),
    ("model_training: {publish: {token_env: 'A B'}}", "model_training.publish.token_env",
     "model_training.publish.token_env"),
    ("model_training: {publish: {license: MIT}}", "model_training.publish.license",
     "model_training.publish.license"),
])
def test_each_problem_says_which_key_it_is_about(problems, yaml, key, says):
    found = problems(yaml + "\n")
    assert any(k == key and says in (m or "") for k, m in found), found


@pytest.mark.parametrize("section, label", [
    ("model_training: {nope: 1}", "model_training"),
    ("model_training: {splits: {nope: 1}}", "model_training.splits"),
    ("model_training: {writeback: {nope: 1}}", "model_training.writeback"),
    ("model_training: {auto_retrain: {nope: 1}}", "model_training.auto_retrain"),
    ("model_training: {publish: {nope: 1}}", "model_training.publish"),
])
def test_an_unknown_key_names_the_section_that_refuses_it(problems, section, label):
    found = problems(section + "\n")
    assert any("is not a key %s accepts" % label in (m or "") for _, m in found), found


@pytest.mark.parametrize("yaml, key", [
    ("model_training: {aggregation: 5}", "model_training.aggregation"),
    ("model_training: {publish: {token_env: 5}}", "model_training.publish.token_env"),
    ("model_training: {device: [1]}", "model_training.device"),
    ("model_training: {writeback: {policy: [1]}}", "model_training.writeback.policy"),
    ("model_training: {auto_retrain: {trainer: [1]}}", "model_training.auto_retrain.trainer"),
])
def test_a_value_that_is_not_text_is_refused_at_its_key(problems, yaml, key):
    found = problems(yaml + "\n")
    assert any(k == key and "must be a string" in (m or "") for k, m in found), found


def test_a_server_url_loses_only_its_trailing_slashes(parse):
    cfg, errors, _ = parse("server_url: https://annotate.example.org/X/\n")
    assert errors == [] and cfg.server_url == "https://annotate.example.org/X"


def test_the_modules_public_names():
    """``from potato.config.settings import *`` gives exactly these, and each is there."""
    import potato.config.settings as config
    assert config.__all__ == ["ConfigError", "Problem", "Config", "Backend", "Scheme", "load",
                              "dotted", "suggest"]
    assert all(hasattr(config, name) for name in config.__all__)
