"""The server's own wheel (potato/training/exchange/wheel.py); also the tests tools/mutation.py runs
against the module. A small fake checkout stands in for the
source, and a fake ``setuptools.build_meta`` (first on PYTHONPATH) for the build backend, so
the real child process runs in well under a second."""

import json
import os
import sys
import tempfile
import threading
import types

import pytest

import potato
from potato.training.exchange import wheel
from potato.training.remote.proc import Completed

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository root

FAKE_BACKEND = r'''
import os, sys
NAME = %r
def build_wheel(out):
    mode = os.environ.get("FAKE_BUILD", "ok")
    if mode == "missing":
        sys.stderr.write("ModuleNotFoundError: No module named 'setuptools'\n")
        sys.exit(1)
    if mode == "selfclean":  # a backend that removes its folder, the wheel kept elsewhere
        import shutil
        keep = os.path.join(os.environ["FAKE_KEEP"], NAME)
        with open(keep, "w") as f:
            f.write("kept")
        shutil.rmtree(os.getcwd())
        return keep
    if mode == "fail":
        sys.stderr.write("E" * 400 + "boom-end\n")
        sys.exit(3)
    files = {}
    for root, dirs, names in os.walk("."):
        for n in names:
            p = os.path.relpath(os.path.join(root, n))
            with open(p) as f:
                files[p] = f.read()
    with open(os.path.join(out, NAME), "w") as f:
        f.write(repr({"cwd": os.getcwd(), "files": files}))
    print("noise one")
    print("noise two")
    return NAME
'''


class Clock:
    def __init__(self):
        self.now = 5000.0

    def monotonic(self):
        return self.now


@pytest.fixture
def src(tmp_path, monkeypatch):
    """A fake checkout as SOURCE_ROOT, a fake build backend, a fake clock, fresh caches."""
    root = tmp_path / "src"
    (root / "potato" / "sub").mkdir(parents=True)
    (root / "potato" / "__pycache__").mkdir()
    (root / "pyproject.toml").write_text("fake-pyproject")
    (root / "setup.cfg").write_text("fake-setup")
    (root / "README.md").write_text("fake-readme")
    (root / "potato" / "__init__.py").write_text("init")
    (root / "potato" / "a.py").write_text("a")
    (root / "potato" / "b.pyc").write_bytes(b"compiled")
    (root / "potato" / "c.py").write_text("c")  # after b.pyc: a skipped file ends nothing
    (root / "potato" / "d.pyo").write_bytes(b"optimised")
    (root / "potato" / "sub" / "x.py").write_text("x")
    (root / "potato" / "__pycache__" / "junk.txt").write_text("cache")
    (root / "tests").mkdir()
    (root / "tests" / "t.py").write_text("not shipped")
    backend = tmp_path / "backend" / "setuptools"
    backend.mkdir(parents=True)
    (backend / "__init__.py").write_text("")
    (backend / "build_meta.py").write_text(FAKE_BACKEND % wheel.NAME)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "backend"))
    monkeypatch.delenv("FAKE_BUILD", raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(wheel, "SOURCE_ROOT", str(root))
    monkeypatch.setattr(wheel, "_digests", {})
    monkeypatch.setattr(wheel, "_failures", {})
    clock = Clock()
    monkeypatch.setattr(wheel, "time", clock)
    return types.SimpleNamespace(root=root, out=tmp_path / "out", temp=temp, clock=clock)


def test_names_and_install_line():
    assert wheel.NAME == "potato_annotation-%s-py3-none-any.whl" % potato.__version__
    assert wheel.URL_PATH == "/agent/v1/" + wheel.NAME
    assert wheel.install_line("http://h:8000/") == (
        'pip install "potato-annotation[train-text] @ http://h:8000%s"' % wheel.URL_PATH)
    assert wheel.install_line("/hX//") == (
        'pip install "potato-annotation[train-text] @ /hX%s"' % wheel.URL_PATH)
    here = ROOT_DIR
    assert wheel.SOURCE_ROOT == here and wheel.is_checkout() is True


def test_checkout_hint_names_the_folder_only_for_the_admin(src, tmp_path, monkeypatch):
    root = str(src.root)
    admin, public = wheel.checkout_hint(), wheel.checkout_hint(False)
    assert root in admin and root not in public
    assert wheel.checkout_hint(True) == admin
    assert admin.replace(" (this server's is %s)" % root, "") == public
    assert potato.__version__ in public
    monkeypatch.setattr(wheel, "SOURCE_ROOT", str(tmp_path / "installed"))  # no pyproject.toml
    assert wheel.is_checkout() is False
    assert wheel.checkout_hint(True) == public.replace(root, str(tmp_path / "installed"))
    assert str(tmp_path / "installed") not in wheel.checkout_hint(True)


def test_source_digest_follows_the_source_only(src, tmp_path, monkeypatch):
    d0 = wheel._source_digest()
    assert wheel._source_digest() == d0
    monkeypatch.chdir(tmp_path)  # the same source from another working directory
    assert wheel._source_digest() == d0
    # not the source: compiled files and caches
    (src.root / "potato" / "b.pyc").write_bytes(b"other")
    (src.root / "potato" / "d.pyo").write_bytes(b"other")
    (src.root / "potato" / "__pycache__" / "junk.txt").write_text("other")
    (src.root / "tests" / "t.py").write_text("other")  # outside potato/: not in the wheel
    assert wheel._source_digest() == d0
    seen = {d0}
    for path, text in (("pyproject.toml", "p2"), ("setup.cfg", "s2"), ("README.md", "r2"),
                       ("potato/a.py", "a2"), ("potato/c.py", "c2"), ("potato/sub/x.py", "x2")):
        (src.root / path).write_text(text)
        d = wheel._source_digest()
        assert d not in seen, path
        seen.add(d)
    os.rename(src.root / "potato" / "sub" / "x.py", src.root / "potato" / "sub" / "y.py")
    assert wheel._source_digest() not in seen  # a renamed file is another source
    monkeypatch.setattr(wheel, "PROJECT_FILES", ())
    assert wheel._source_digest() not in seen


def test_current_digest_hashes_at_most_every_10_s(src, monkeypatch):
    calls = []
    monkeypatch.setattr(wheel, "_source_digest", lambda: calls.append(1) or "d%d" % len(calls))
    assert wheel._current_digest() == "d1"
    src.clock.now += 9.9
    assert wheel._current_digest() == "d1" and len(calls) == 1
    src.clock.now += 0.1  # 10 s exactly: hashed again
    assert wheel._current_digest() == "d2"
    assert wheel._digests[str(src.root)] == (src.clock.now, "d2")
    assert not wheel._digest_lock.locked()


def test_current_digest_does_not_wait_for_another_hash(src, monkeypatch):
    calls = []
    monkeypatch.setattr(wheel, "_source_digest", lambda: calls.append(1) or "d%d" % len(calls))
    assert wheel._digest_lock.acquire(blocking=False)  # another thread is hashing
    try:
        assert wheel._current_digest() == "d1"  # nothing to fall back on: hash anyway
        src.clock.now += 60
        assert wheel._current_digest() == "d1" and len(calls) == 1  # stale, but not waited
    finally:
        wheel._digest_lock.release()
    assert wheel._current_digest() == "d2"


def test_wheel_path_builds_once_with_the_real_child(src, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = wheel.wheel_path(str(src.out))
    folder = src.out / "training" / "wheel"
    assert path == str(folder / wheel.NAME)
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert sorted(os.listdir(folder)) == [wheel.NAME, wheel.NAME + ".source"]
    assert (folder / (wheel.NAME + ".source")).read_text() == wheel._source_digest()
    built = eval((folder / wheel.NAME).read_text())
    assert os.path.dirname(built["cwd"]) == str(src.temp)
    assert os.path.basename(built["cwd"]).startswith("potato-wheel-")
    assert built["files"] == {"pyproject.toml": "fake-pyproject", "setup.cfg": "fake-setup",
                              "README.md": "fake-readme", "potato/__init__.py": "init",
                              "potato/a.py": "a", "potato/c.py": "c", "potato/d.pyo": "optimised",
                              "potato/sub/x.py": "x"}
    assert os.listdir(src.temp) == []  # the build folder is gone
    # found again without a build
    os.remove(os.path.join(src.temp, "..", "backend", "setuptools", "build_meta.py"))
    assert wheel.wheel_path(str(src.out)) == path


def test_wheel_path_rebuilds_when_the_source_or_the_wheel_changes(src, monkeypatch):
    builds = []
    real = wheel._build
    monkeypatch.setattr(wheel, "_build", lambda folder, timeout: builds.append(timeout) or real(
        folder, timeout))
    path = wheel.wheel_path(str(src.out), timeout=33)
    assert builds == [33]
    (src.root / "potato" / "a.py").write_text("changed")
    src.clock.now += 10
    assert wheel.wheel_path(str(src.out)) == path and builds == [33, 300]
    assert open(path + ".source").read() == wheel._source_digest()
    os.remove(path)
    assert wheel.wheel_path(str(src.out)) == path and len(builds) == 3
    assert wheel.wheel_path(str(src.out)) == path and len(builds) == 3


def test_wheel_path_needs_a_checkout(src, tmp_path, monkeypatch):
    monkeypatch.setattr(wheel, "SOURCE_ROOT", str(tmp_path / "installed"))
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    assert "checkout" in str(e.value)
    assert not src.out.exists()


def test_a_failed_build_is_remembered_for_60_s(src, monkeypatch):
    monkeypatch.setenv("FAKE_BUILD", "fail")
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    first = str(e.value)
    assert ("E" * 292 + "boom-end") in first and ("E" * 293) not in first  # the last 300
    monkeypatch.setenv("FAKE_BUILD", "missing")
    src.clock.now += 59.9
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    assert str(e.value) == first  # not built again
    src.clock.now += 0.1
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    assert "pip install setuptools" in str(e.value) and "boom" not in str(e.value)
    monkeypatch.delenv("FAKE_BUILD")
    src.clock.now += 60
    assert os.path.isfile(wheel.wheel_path(str(src.out)))


class FakeLock:
    """Stands in for wheel._lock: records how it was taken; ``on_acquire`` plays another
    thread that finished while this one waited."""

    def __init__(self, give=True, on_acquire=None):
        self.give, self.on_acquire, self.taken = give, on_acquire, []

    def acquire(self, blocking=True):
        self.taken.append(blocking)
        if self.on_acquire:
            self.on_acquire()
        return self.give

    def release(self):
        self.taken.append("released")


def test_wheel_path_waits_for_the_lock_unless_told_not_to(src, monkeypatch):
    lock = FakeLock(give=False)
    monkeypatch.setattr(wheel, "_lock", lock)
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out), wait=False)
    assert "building" in str(e.value) and lock.taken == [False]
    lock = FakeLock()
    monkeypatch.setattr(wheel, "_lock", lock)
    wheel.wheel_path(str(src.out))
    assert lock.taken == [True, "released"]


def test_a_remembered_failure_is_told_before_the_lock_is_asked_for(src, monkeypatch):
    folder = str(src.out / "training" / "wheel")
    wheel._failures[folder] = (src.clock.now - 30, "it failed 30 s ago")
    lock = FakeLock(give=False)
    monkeypatch.setattr(wheel, "_lock", lock)
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out), wait=False)
    assert str(e.value) == "it failed 30 s ago" and lock.taken == []


def test_the_module_caches_in_use(tmp_path):
    """Without the fixture: the module's own failure and digest caches."""
    saved = dict(wheel._digests)
    try:
        folder = tmp_path / "training" / "wheel"
        folder.mkdir(parents=True)
        (folder / wheel.NAME).write_text("wheel")
        (folder / (wheel.NAME + ".source")).write_text(wheel._current_digest())
        assert wheel.wheel_path(str(tmp_path)) == str(folder / wheel.NAME)
        assert str(folder) not in wheel._failures
    finally:
        wheel._digests.clear()
        wheel._digests.update(saved)


def test_build_ignores_a_build_folder_already_gone(src, tmp_path, monkeypatch):
    keep = tmp_path / "keep"
    keep.mkdir()
    monkeypatch.setenv("FAKE_BUILD", "selfclean")
    monkeypatch.setenv("FAKE_KEEP", str(keep))
    folder = src.out
    folder.mkdir()
    wheel._build(str(folder), 60)
    assert (folder / wheel.NAME).read_text() == "kept"
    assert os.listdir(src.temp) == []


def test_wheel_path_checks_again_once_it_has_the_lock(src, monkeypatch):
    folder = str(src.out / "training" / "wheel")
    monkeypatch.setattr(wheel, "_build", lambda *a: pytest.fail("built"))

    def other_failed():
        wheel._failures[folder] = (src.clock.now, "the other build failed")

    monkeypatch.setattr(wheel, "_lock", FakeLock(on_acquire=other_failed))
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    assert str(e.value) == "the other build failed"
    wheel._failures.clear()

    def other_built():
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, wheel.NAME), "w") as f:
            f.write("wheel")
        with open(os.path.join(folder, wheel.NAME + ".source"), "w") as f:
            f.write(wheel._current_digest())

    monkeypatch.setattr(wheel, "_lock", FakeLock(on_acquire=other_built))
    assert wheel.wheel_path(str(src.out)) == os.path.join(folder, wheel.NAME)


def test_a_build_that_makes_no_wheel(src, monkeypatch):
    monkeypatch.setattr(wheel, "_build", lambda folder, timeout: None)
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    assert wheel.NAME in str(e.value)


def test_build_runs_the_backend_in_its_copy_and_places_the_wheel_atomically(src, monkeypatch):
    calls, made = [], []

    def run(argv, **kw):
        calls.append((argv, kw))
        return Completed(argv, -9, "", "", timed_out=True)

    monkeypatch.setattr(wheel, "proc", types.SimpleNamespace(run=run))
    folder = str(src.out)
    os.makedirs(folder)
    with pytest.raises(wheel.WheelError) as e:
        wheel._build(folder, 7)
    assert "7 s" in str(e.value)
    (argv, kw), = calls
    work = kw["cwd"]
    assert argv == [sys.executable, "-c", wheel.BUILD_PY, os.path.join(work, "dist")]
    assert kw == {"cwd": work, "timeout": 7}
    assert os.path.dirname(work) == str(src.temp) and not os.path.exists(work)

    real_mkstemp = tempfile.mkstemp

    def mkstemp(**kw):
        made.append(kw)
        return real_mkstemp(**kw)

    monkeypatch.setattr(wheel, "proc", __import__("potato.training.remote.proc",
                                                  fromlist=["run"]))
    monkeypatch.setattr(wheel, "tempfile", types.SimpleNamespace(mkdtemp=tempfile.mkdtemp,
                                                                 mkstemp=mkstemp))
    wheel._build(folder, 60)
    assert made == [{"prefix": ".%s." % wheel.NAME, "dir": folder}]
    assert os.listdir(folder) == [wheel.NAME]
