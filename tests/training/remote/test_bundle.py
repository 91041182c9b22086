"""Fast unit tests for a run's bundle (potato/training/remote/bundle.py): splits, votes, the
files build() writes, read()'s checks, pack() and safe_extract(). Also the tests
tools/mutation.py runs against bundle.py (docs/testing.md, "Mutation testing")."""

import hashlib
import io
import json
import os
import stat
import sys
import tarfile

import pytest

from potato.training.remote import bundle

SCHEMAS = {"s": {"type": "radio", "labels": ["x", "y"]}}


def _u(item_id, seed):
    digest = hashlib.sha256(("%s:%s" % (seed, item_id)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def test_constants():
    assert bundle.BUNDLE_VERSION == 1
    assert bundle.SPLITS == ("train", "val", "test", "unlabeled")


def test_split_of_is_the_seeded_hash_and_its_edges():
    # the split must not change between versions: an item stays in its split
    for item_id, seed in (("a", 0), ("item-7", 3), ("é", "s")):
        u = _u(item_id, seed)
        assert 0 < u < 1
        assert bundle.split_of(item_id, seed, (u + 1e-9, 0.0, 0.0)) == "train"
        assert bundle.split_of(item_id, seed, (u, 0.0, 1.0)) == "test"  # u < train is strict
        assert bundle.split_of(item_id, seed, (u, 1e-9, 0.0)) == "val"
        assert bundle.split_of(item_id, seed, (u - 1e-9, 1e-9, 0.0)) == "test"  # strict too
        assert bundle.split_of(item_id, seed, (0.0, u + 1e-9, 0.0)) == "val"
        assert bundle.split_of(item_id, seed, (0.0, u, 1.0)) == "test"


def test_majority():
    assert bundle.majority([]) is None
    assert bundle.majority(None) is None
    assert bundle.majority(["a"]) == "a"
    assert bundle.majority(["a", "b"]) is None
    assert bundle.majority(["b", "a", "a"]) == "a"
    assert bundle.majority(["a", "b", "b", "c", "c"]) is None  # a tie for the top
    assert bundle.majority(["a", "a", "b", "b", "c"]) is None
    assert bundle.majority(["a", "a", "b", "c"]) == "a"
    spans = [{"start": 0, "end": 2, "label": "x"}]
    same = [{"label": "x", "end": 2, "start": 0}]  # the same spans, keys in another order
    assert bundle.majority([spans, same, [{"label": "y"}]]) == spans
    assert bundle.majority([same, spans]) == same  # the first one given is returned
    assert bundle.majority([1, 2, 2]) == 2
    assert bundle.majority([0, 0, 1]) == 0


def test_label_names():
    assert bundle.label_names("x") == ["x"]
    assert bundle.label_names(["a", "b"]) == ["a", "b"]
    assert bundle.label_names([{"label": "p"}, {"label": 3}, {"start": 1}, "q", 5]) == \
        ["p", "q"]
    assert bundle.label_names(3) == []
    assert bundle.label_names(None) == []


def test_label_counts_key_each_kind_of_aggregated_value(tmp_path):
    # the manifest counts an aggregated value by its text: a label, labels joined by "+" as
    # they come, spans by their sorted distinct labels, anything else as JSON
    values = {"i1": "x", "i2": ["b", "a", "b"], "i3": [], "i4": [{"label": "y"}, {"label": "x"},
                                                            {"label": "y"}],
              "i5": ["b", {"label": "a"}], "i6": 3, "i7": {"a": 1}}
    m = bundle.build(str(tmp_path / "b"), [(i, "t") for i in values],
                     {i: {"s": ["vote"]} for i in values},
                     {"s": {"type": "multiselect", "labels": ["a", "b"]}},
                     agree=lambda item_id, scheme, votes: values[item_id])
    assert m["label_counts"] == {"s": {"x": 1, "b+a+b": 1, "": 1, "x+y": 1, "a+b": 1,
                                       "3": 1, '{"a": 1}': 1}}


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f.read().split("\n") if x]


def test_build_writes_items_manifest_and_digest(tmp_path):
    dest = str(tmp_path / "b")
    items = [("a", "one"), ("b", "two"), ("c", "three", {"image": "c.png"}), ("d", "four"),
             ("e", "five", None)]
    labels = {"a": {"s": ["x"]}, "b": {"s": ["x", "y"]}, "c": {"s": ["y", "y", "x"], "t": []},
              "e": {}}
    schemas = {"s": SCHEMAS["s"], "t": {"type": "multiselect", "labels": ["p", "q"]}}
    m = bundle.build(dest, items, labels, schemas, fractions=(1.0, 0.0, 0.0), seed=4,
                     include_unlabeled=True)
    got = _lines(os.path.join(dest, "items.jsonl"))
    assert got == [
        {"id": "a", "text": "one", "split": "train", "labels": {"s": "x"}},
        {"id": "c", "text": "three", "split": "train", "labels": {"s": "y"},
         "media": {"image": "c.png"}},
        {"id": "d", "text": "four", "split": "unlabeled", "labels": {}},
        {"id": "e", "text": "five", "split": "unlabeled", "labels": {}},
    ]
    with open(os.path.join(dest, "items.jsonl"), "rb") as f:
        raw = f.read()
    assert m == {
        "version": 1, "schemas": schemas,
        "counts": {"train": 2, "val": 0, "test": 0, "unlabeled": 2},
        "label_counts": {"s": {"x": 1, "y": 1}, "t": {}},
        "ties_skipped": {"s": 1, "t": 0}, "split_seed": 4,
        "splits": {"train": 1.0, "val": 0.0, "test": 0.0},
        "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
    }
    with open(os.path.join(dest, "manifest.json"), encoding="utf-8") as f:
        assert json.load(f) == m
    # without include_unlabeled the unlabelled items are left out; building again is fine
    m = bundle.build(dest, items, labels, schemas, fractions=(1.0, 0.0, 0.0))
    assert m["counts"] == {"train": 2, "val": 0, "test": 0, "unlabeled": 0}
    assert m["split_seed"] == 0
    assert [it["id"] for it in _lines(os.path.join(dest, "items.jsonl"))] == ["a", "c"]


def test_build_defaults_and_label_counts(tmp_path):
    items = [("i%d" % n, "t") for n in range(40)]
    labels = {"i%d" % n: {"s": ["x" if n % 3 else "y"], "m": [["p", "q"]]} for n in range(40)}
    schemas = {"s": SCHEMAS["s"], "m": {"type": "multiselect", "labels": ["p", "q"]}}
    m = bundle.build(str(tmp_path / "b"), items, labels, schemas)
    assert m["splits"] == {"train": 0.7, "val": 0.15, "test": 0.15}
    want = {"train": 0, "val": 0, "test": 0, "unlabeled": 0}
    for n in range(40):
        want[bundle.split_of("i%d" % n, 0, (0.7, 0.15, 0.15))] += 1
    assert m["counts"] == want
    assert m["label_counts"] == {"s": {"x": 26, "y": 14}, "m": {"p+q": 40}}
    assert m["ties_skipped"] == {"s": 0, "m": 0}


def test_build_with_heldout_and_agree(tmp_path):
    calls = []

    def agree(item_id, scheme, votes):
        calls.append((item_id, scheme, list(votes)))
        return None if item_id == "b" else votes[-1]

    held = str(tmp_path / "held.jsonl")
    items = [("a", "one"), ("b", "two"), ("c", "three")]
    labels = {"a": {"s": ["x", "y"]}, "b": {"s": ["x"]}, "c": {"s": ["y"]}}
    m = bundle.build(str(tmp_path / "b"), items, labels, SCHEMAS, fractions=(0.0, 0.0, 1.0),
                     heldout=held, agree=agree)
    assert calls == [("a", "s", ["x", "y"]), ("b", "s", ["x"]), ("c", "s", ["y"])]
    assert m["ties_skipped"] == {"s": 1}
    assert m["counts"]["test"] == 2
    assert _lines(held) == [{"id": "a", "labels": {"s": "y"}}, {"id": "c", "labels": {"s": "y"}}]
    assert _lines(str(tmp_path / "b" / "items.jsonl")) == [
        {"id": "a", "text": "one", "split": "test", "labels": {}},
        {"id": "c", "text": "three", "split": "test", "labels": {}},
    ]
    # train items keep their labels with a heldout file; nothing is held out of them
    m = bundle.build(str(tmp_path / "b2"), items, labels, SCHEMAS, fractions=(1.0, 0.0, 0.0),
                     heldout=str(tmp_path / "held2.jsonl"))
    assert _lines(str(tmp_path / "held2.jsonl")) == []
    assert _lines(str(tmp_path / "b2" / "items.jsonl"))[0]["labels"] == {"s": "x"}


def test_build_text_round_trips(tmp_path):
    text = "caf\u00e9 \u2028 line\u0085break \"q\"\n"
    bundle.build(str(tmp_path / "b"), [("a", text)], {"a": {"s": ["x"]}}, SCHEMAS,
                 fractions=(1.0, 0.0, 0.0))
    b = bundle.read(str(tmp_path / "b"))
    assert b.items == [{"id": "a", "text": text, "split": "train", "labels": {"s": "x"}}]
    assert b.schemas == SCHEMAS
    assert b.manifest["version"] == 1


def test_bundle_labelled():
    b = bundle.Bundle({"schemas": SCHEMAS}, [
        {"text": "1", "split": "train", "labels": {"s": "x"}},
        {"text": "2", "split": "val", "labels": {"s": "y"}},
        {"text": "3", "split": "train", "labels": {}},
        {"text": "4", "split": "train", "labels": {"s": "y", "t": "z"}},
    ])
    assert b.labelled("train", "s") == [("1", "x"), ("4", "y")]
    assert b.labelled("val", "s") == [("2", "y")]
    assert b.labelled("train", "t") == [("4", "z")]
    assert b.schemas is b.manifest["schemas"]


def _write(dest, manifest, raw):
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "manifest.json"), "w", encoding="utf-8") as f:
        f.write(manifest if isinstance(manifest, str) else json.dumps(manifest))
    if raw is not None:
        with open(os.path.join(dest, "items.jsonl"), "wb") as f:
            f.write(raw)


def test_read_checks(tmp_path):
    raw = b'{"id": "a"}\n\n  \n{"id": "b\\u2028c"}\n'
    good = {"version": 1, "schemas": {}, "digest": "sha256:" + hashlib.sha256(raw).hexdigest()}
    _write(str(tmp_path / "ok"), good, raw)
    assert bundle.read(str(tmp_path / "ok")).items == [{"id": "a"}, {"id": "b\u2028c"}]
    assert bundle.read(str(tmp_path / "ok")).manifest == good
    _write(str(tmp_path / "dig"), dict(good, digest="sha256:00"), raw)
    with pytest.raises(bundle.BundleError, match="does not match its manifest's digest"):
        bundle.read(str(tmp_path / "dig"))
    assert len(bundle.read(str(tmp_path / "dig"), verify=False).items) == 2
    _write(str(tmp_path / "plain"), dict(good, digest=hashlib.sha256(raw).hexdigest()), raw)
    with pytest.raises(bundle.BundleError, match="digest"):
        bundle.read(str(tmp_path / "plain"))
    _write(str(tmp_path / "v2"), dict(good, version=2), raw)
    with pytest.raises(bundle.BundleError) as e:
        bundle.read(str(tmp_path / "v2"), verify=False)
    assert "has version 2; this worker reads version 1" in str(e.value)
    _write(str(tmp_path / "nov"), {"digest": good["digest"]}, raw)
    with pytest.raises(bundle.BundleError, match="has version None"):
        bundle.read(str(tmp_path / "nov"))
    _write(str(tmp_path / "bad"), "{not json", raw)
    with pytest.raises(bundle.BundleError, match="cannot be read"):
        bundle.read(str(tmp_path / "bad"))
    _write(str(tmp_path / "noitems"), good, None)
    with pytest.raises(bundle.BundleError, match="cannot be read"):
        bundle.read(str(tmp_path / "noitems"))
    with pytest.raises(bundle.BundleError, match="cannot be read"):
        bundle.read(str(tmp_path / "missing"))


def test_pack_is_private_sorted_and_round_trips(tmp_path):
    src = tmp_path / "b"
    bundle.build(str(src), [("a", "t")], {"a": {"s": ["x"]}}, SCHEMAS)
    (src / "zz.txt").write_text("z")
    (src / "aa").mkdir()
    (src / "aa" / "f.bin").write_bytes(b"\0" * 10)
    old = os.umask(0o022)
    try:
        digest = bundle.pack(str(src), str(tmp_path / "b.tar.gz"))
    finally:
        os.umask(old)
    archive = str(tmp_path / "b.tar.gz")
    assert stat.S_IMODE(os.stat(archive).st_mode) == 0o600
    assert not os.path.exists(archive + ".part")
    with open(archive, "rb") as f:
        assert digest == hashlib.sha256(f.read()).hexdigest()
    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
    assert names == ["aa", "aa/f.bin", "items.jsonl", "manifest.json", "zz.txt"]
    bundle.safe_extract(archive, str(tmp_path / "out"))
    assert (tmp_path / "out" / "aa" / "f.bin").read_bytes() == b"\0" * 10
    assert (tmp_path / "out" / "zz.txt").read_text() == "z"
    assert bundle.read(str(tmp_path / "out")).items[0]["id"] == "a"


def test_file_sha256_of_a_file_over_one_block(tmp_path):
    data = os.urandom(1000) * 2200  # 2.2 MB: three reads of 1 MiB
    p = tmp_path / "big"
    p.write_bytes(data)
    assert bundle.file_sha256(str(p)) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert bundle.file_sha256(str(tmp_path / "empty")) == hashlib.sha256(b"").hexdigest()


def _archive(path, members):
    with tarfile.open(str(path), "w:gz") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = kind
                info.linkname = data
                tar.addfile(info)


def test_safe_extract_nested_files_and_big_ones(tmp_path):
    big = os.urandom(1000) * 2100
    _archive(tmp_path / "a.tar.gz", [(".", "dir", None), ("d", "dir", None),
                                     ("d/e/f.txt", "file", b"deep"), ("big", "file", big),
                                     ("empty", "file", b"")])
    dest = tmp_path / "new" / "out"
    bundle.safe_extract(str(tmp_path / "a.tar.gz"), str(dest))
    assert (dest / "d" / "e" / "f.txt").read_bytes() == b"deep"
    assert (dest / "big").read_bytes() == big
    assert (dest / "empty").read_bytes() == b""
    assert (dest / "d").is_dir()
    # extracting again over the same directory is fine
    bundle.safe_extract(str(tmp_path / "a.tar.gz"), str(dest))
    assert (dest / "big").read_bytes() == big


@pytest.mark.parametrize("name,kind,data", [
    ("../evil", "file", b"x"), ("/tmp/evil", "file", b"x"), ("a/../../evil", "file", b"x"),
    ("a\\..\\..\\evil", "file", b"x"), ("..", "dir", None),
    ("l", tarfile.SYMTYPE, "/etc/passwd"), ("h", tarfile.LNKTYPE, "items.jsonl"),
    ("fifo", tarfile.FIFOTYPE, ""), ("dev", tarfile.CHRTYPE, ""),
])
def test_safe_extract_refuses(tmp_path, name, kind, data):
    _archive(tmp_path / "bad.tar.gz", [("ok.txt", "file", b"fine"), (name, kind, data)])
    with pytest.raises(bundle.BundleError, match="refusing"):
        bundle.safe_extract(str(tmp_path / "bad.tar.gz"), str(tmp_path / "out"))
    # nothing at all is extracted from an archive with one bad member
    assert os.listdir(str(tmp_path / "out")) == []
    assert not (tmp_path / "evil").exists()


def test_safe_extract_refuses_a_path_through_a_link_in_dest(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "out"
    dest.mkdir()
    os.symlink(str(outside), str(dest / "link"))
    _archive(tmp_path / "a.tar.gz", [("link/x", "file", b"x")])
    with pytest.raises(bundle.BundleError, match="outside its directory"):
        bundle.safe_extract(str(tmp_path / "a.tar.gz"), str(dest))
    assert os.listdir(str(outside)) == []
    # a sibling whose name starts like dest is outside too
    (tmp_path / "out2").mkdir()
    os.symlink(str(tmp_path / "out2"), str(dest / "l2"))
    _archive(tmp_path / "b.tar.gz", [("l2/x", "file", b"x")])
    with pytest.raises(bundle.BundleError, match="outside its directory"):
        bundle.safe_extract(str(tmp_path / "b.tar.gz"), str(dest))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(bundle.__file__)))))


def test_split_of_runs_on_python_3_8():
    """bundle.py is shipped to hosts with Python 3.8, whose int.from_bytes needs its byteorder."""
    import shutil
    import subprocess

    want = bundle.split_of("item-3", 5, (0.5, 0.25, 0.25))
    import glob

    py38 = None
    for exe in [shutil.which("python3.8")] + sorted(glob.glob(os.path.expanduser(
            "~/.pyenv/versions/3.8*/bin/python3.8"))):
        if exe and subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
            py38 = exe
            break
    if py38 is None:
        pytest.skip("no Python 3.8 here")
    code = ("from potato.training.remote import bundle; "
            "print(bundle.split_of('item-3', 5, (0.5, 0.25, 0.25)))")
    r = subprocess.run([py38, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, want), r.stderr


def test_read_takes_the_manifest_as_utf8_in_any_locale(tmp_path):
    """A host's shell often runs with LANG=C: the manifest is read as UTF-8 all the same."""
    import subprocess

    raw = b'{"id": "a"}\n'
    manifest = ('{"version": 1, "schemas": {"s": {"labels": ["caf\u00e9"]}}, "digest": "%s"}'
                % ("sha256:" + hashlib.sha256(raw).hexdigest()))
    dest = str(tmp_path / "b")
    os.makedirs(dest)
    with open(os.path.join(dest, "manifest.json"), "wb") as f:
        f.write(manifest.encode("utf-8"))
    with open(os.path.join(dest, "items.jsonl"), "wb") as f:
        f.write(raw)
    assert bundle.read(dest).schemas["s"]["labels"] == ["caf\u00e9"]
    code = ("import sys; from potato.training.remote import bundle; "
            "print(ascii(bundle.read(sys.argv[1]).schemas['s']['labels'][0]))")
    env = dict(os.environ, PYTHONPATH=ROOT, LC_ALL="C", LANG="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    r = subprocess.run([sys.executable, "-c", code, dest], capture_output=True, text=True,
                       env=env, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "'caf\\xe9'"), r.stderr


def test_build_later_schemes_ties_and_items_after_skipped_ones(tmp_path):
    schemas = {"s": SCHEMAS["s"], "t": {"type": "radio", "labels": ["p", "q"]}}
    items = [("u", "unlabelled"), ("a", "t only"), ("b", "tie"), ("c", "tie again"),
             ("d", "last")]
    labels = {"a": {"t": ["p"]}, "b": {"s": ["x", "y"]}, "c": {"s": ["x", "y"], "t": ["q"]},
              "d": {"s": ["y"]}}
    m = bundle.build(str(tmp_path / "b"), items, labels, schemas, fractions=(0.6, 0.3, 0.1))
    assert m["ties_skipped"] == {"s": 2, "t": 0}
    assert m["splits"] == {"train": 0.6, "val": 0.3, "test": 0.1}
    got = {it["id"]: it["labels"] for it in _lines(str(tmp_path / "b" / "items.jsonl"))}
    assert got == {"a": {"t": "p"}, "c": {"t": "q"}, "d": {"s": "y"}}
    assert m["label_counts"] == {"s": {"y": 1}, "t": {"p": 1, "q": 1}}


def test_pack_writes_beside_the_archive_then_renames(tmp_path, monkeypatch):
    import gzip

    import random

    src = tmp_path / "b"
    rnd = random.Random(1)  # text whose level-6 and level-7 compression differ
    text = " ".join("w%d" % rnd.randrange(300) for _ in range(40000))
    bundle.build(str(src), [("a", text)], {"a": {"s": ["x"]}}, SCHEMAS)
    archive = str(tmp_path / "out.tar.gz")
    moves = []
    real_replace = os.replace
    monkeypatch.setattr(bundle.os, "replace", lambda a, b: (moves.append((a, b)),
                                                            real_replace(a, b)))
    monkeypatch.setattr(gzip.time, "time", lambda: 1234567.0)
    bundle.pack(str(src), archive)
    assert moves == [(archive + ".part", archive)]
    # level 6: the same bytes as tarfile makes at that level (fast; bundles are mostly text)
    other = tmp_path / "other"
    other.mkdir()
    want = str(other / "out.tar.gz.part")
    with tarfile.open(want, "w:gz", compresslevel=6) as tar:
        for name in sorted(os.listdir(str(src))):
            tar.add(os.path.join(str(src), name), arcname=name)
    with open(archive, "rb") as a, open(want, "rb") as b:
        assert a.read() == b.read()


def test_file_sha256_reads_in_blocks_of_one_mib(tmp_path, monkeypatch):
    """Bounded memory: a large archive is hashed one MiB at a time, never read whole."""
    p = tmp_path / "big"
    data = os.urandom(3000) * 1000
    p.write_bytes(data)
    sizes = []
    real_open = open

    class Recording:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            sizes.append(n)
            return self.f.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    monkeypatch.setattr(bundle, "open", lambda *a, **k: Recording(real_open(*a, **k)),
                        raising=False)
    assert bundle.file_sha256(str(p)) == hashlib.sha256(data).hexdigest()
    assert sizes == [1 << 20] * 4


def test_safe_extract_reads_only_gzip_archives(tmp_path):
    plain = tmp_path / "plain.tar"
    with tarfile.open(str(plain), "w") as tar:
        info = tarfile.TarInfo("ok.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"ok"))
    with pytest.raises(tarfile.ReadError):
        bundle.safe_extract(str(plain), str(tmp_path / "out"))
    assert os.listdir(str(tmp_path / "out")) == []


def test_safe_extract_makes_empty_directories_in_dest(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(str(cwd))
    _archive(tmp_path / "a.tar.gz", [("only-dir", "dir", None), ("x/y", "dir", None)])
    bundle.safe_extract(str(tmp_path / "a.tar.gz"), str(tmp_path / "out"))
    assert (tmp_path / "out" / "only-dir").is_dir() and (tmp_path / "out" / "x" / "y").is_dir()
    assert os.listdir(str(cwd)) == []


def test_safe_extract_copies_in_blocks_of_one_mib(tmp_path, monkeypatch):
    """Bounded memory: a member is copied one MiB at a time, never read whole."""
    data = os.urandom(3000) * 1000
    _archive(tmp_path / "a.tar.gz", [("big", "file", data)])
    sizes = []
    real = tarfile.TarFile.extractfile

    class Recording:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            sizes.append(n)
            return self.f.read(n)

    monkeypatch.setattr(tarfile.TarFile, "extractfile",
                        lambda self, m: Recording(real(self, m)))
    bundle.safe_extract(str(tmp_path / "a.tar.gz"), str(tmp_path / "out"))
    assert (tmp_path / "out" / "big").read_bytes() == data
    assert sizes == [1 << 20] * 4
