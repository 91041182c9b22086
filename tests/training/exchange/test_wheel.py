"""The server's own wheel (potato/training/exchange/wheel.py); also the tests tools/mutation.py runs
against the module. A small fake checkout stands in for the
source, and a fake ``setuptools.build_meta`` (first on PYTHONPATH) for the build backend, so
the real child process runs in well under a second."""

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
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write(mode + "\n")
    if mode.startswith("block"):  # another build under way: until the test says go (10 s at most)
        import time
        open(os.environ["FAKE_STARTED"], "w").close()
        for _ in range(200):
            if os.path.exists(os.environ["FAKE_GO"]):
                break
            time.sleep(0.05)
        mode = mode[len("block"):] or "ok"
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
    monkeypatch.setattr(wheel, "SOURCE_ROOT", str(root))  # the caches are keyed by it: fresh
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "builds.log"))
    clock = Clock()
    monkeypatch.setattr(wheel, "time", clock)
    return types.SimpleNamespace(root=root, out=tmp_path / "out", temp=temp, clock=clock,
                                 log=tmp_path / "builds.log")


def _builds(src):
    """The builds the fake backend has run, in order (their FAKE_BUILD modes)."""
    return src.log.read_text().split() if src.log.exists() else []


def _stamp(src):
    """The digest of the source the wheel was built from, as wheel_path wrote it beside it."""
    return (src.out / "training" / "wheel" / (wheel.NAME + ".source")).read_text()


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


def test_wheel_path_rebuilds_for_a_change_of_the_source_only(src, tmp_path, monkeypatch):
    """The stamp beside the wheel is a digest of what the wheel holds: the project files and
    potato/ without compiled files and caches, by name and content."""
    wheel.wheel_path(str(src.out))
    d0 = _stamp(src)
    assert len(d0) == 16 and _builds(src) == ["ok"]

    def again():
        src.clock.now += 10
        wheel.wheel_path(str(src.out))
        return _stamp(src)

    monkeypatch.chdir(tmp_path)  # the same source from another working directory
    assert again() == d0
    # not the source: compiled files and caches
    (src.root / "potato" / "b.pyc").write_bytes(b"other")
    (src.root / "potato" / "d.pyo").write_bytes(b"other")
    (src.root / "potato" / "__pycache__" / "junk.txt").write_text("other")
    (src.root / "tests" / "t.py").write_text("other")  # outside potato/: not in the wheel
    assert again() == d0 and _builds(src) == ["ok"]
    seen = {d0}
    for path, text in (("pyproject.toml", "p2"), ("setup.cfg", "s2"), ("README.md", "r2"),
                       ("potato/a.py", "a2"), ("potato/c.py", "c2"), ("potato/sub/x.py", "x2")):
        (src.root / path).write_text(text)
        d = again()
        assert d not in seen, path
        seen.add(d)
    os.rename(src.root / "potato" / "sub" / "x.py", src.root / "potato" / "sub" / "y.py")
    d = again()
    assert d not in seen  # a renamed file is another source
    seen.add(d)
    monkeypatch.setattr(wheel, "PROJECT_FILES", ())
    assert again() not in seen
    assert len(_builds(src)) == 2 + len(seen) - 1


def test_wheel_path_hashes_the_source_at_most_every_10_s(src):
    path = wheel.wheel_path(str(src.out))
    d0 = _stamp(src)
    (src.root / "potato" / "a.py").write_text("changed")
    src.clock.now += 9.9
    assert wheel.wheel_path(str(src.out)) == path and _stamp(src) == d0  # not hashed yet
    src.clock.now += 0.1  # 10 s exactly: hashed again, the wheel rebuilt
    assert wheel.wheel_path(str(src.out)) == path
    d1 = _stamp(src)
    assert d1 != d0 and len(_builds(src)) == 2
    (src.root / "potato" / "a.py").write_text("changed again")
    src.clock.now += 9.9  # counted from the last hash
    assert wheel.wheel_path(str(src.out)) == path and _stamp(src) == d1
    src.clock.now += 0.1
    wheel.wheel_path(str(src.out))
    assert _stamp(src) not in (d0, d1) and len(_builds(src)) == 3


def _blocking_hash(monkeypatch):
    """sha256 whose first hash (in the thread that starts it) waits until ``go`` is set."""
    started, go = threading.Event(), threading.Event()
    real = wheel.hashlib.sha256
    first = []

    def sha256(data=b""):
        if not first:
            first.append(threading.current_thread())
            started.set()
            assert go.wait(10)
        return real(data)

    monkeypatch.setattr(wheel, "hashlib", types.SimpleNamespace(sha256=sha256))
    return started, go


def test_a_caller_does_not_wait_while_another_thread_hashes(src, monkeypatch):
    path = wheel.wheel_path(str(src.out))
    d0 = _stamp(src)
    (src.root / "potato" / "a.py").write_text("changed")
    src.clock.now += 60
    started, go = _blocking_hash(monkeypatch)
    t = threading.Thread(target=wheel.wheel_path, args=(str(src.out),))
    t.start()
    try:
        assert started.wait(10)
        # stale, but not waited for: the last digest, and the wheel built from it
        assert wheel.wheel_path(str(src.out), wait=False) == path and _stamp(src) == d0
    finally:
        go.set()
        t.join(30)
    assert _stamp(src) != d0 and len(_builds(src)) == 2
    (src.root / "potato" / "a.py").write_text("changed again")
    src.clock.now += 10  # the hashing thread let go of the hash: this caller hashes
    d1 = _stamp(src)
    wheel.wheel_path(str(src.out))
    assert _stamp(src) not in (d0, d1)


def test_a_first_caller_hashes_even_while_another_thread_hashes(src, monkeypatch):
    """With no digest to fall back on (a wheel left by an earlier server), a caller hashes for
    itself rather than wait for the thread that is hashing."""
    folder = src.out / "training" / "wheel"
    folder.mkdir(parents=True)
    (folder / wheel.NAME).write_text("left")
    (folder / (wheel.NAME + ".source")).write_text("an older source")
    started, go = _blocking_hash(monkeypatch)
    t = threading.Thread(target=wheel.wheel_path, args=(str(src.out),))
    t.start()
    try:
        assert started.wait(10)
        assert wheel.wheel_path(str(src.out), wait=False) == str(folder / wheel.NAME)
        assert not go.is_set() and t.is_alive()  # done while the other still hashes
        assert _builds(src) == ["ok"] and _stamp(src) != "an older source"
    finally:
        go.set()
        t.join(30)
    assert _builds(src) == ["ok"]  # the other found the wheel built


def test_wheel_path_builds_once_with_the_real_child(src, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = wheel.wheel_path(str(src.out))
    folder = src.out / "training" / "wheel"
    assert path == str(folder / wheel.NAME)
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert sorted(os.listdir(folder)) == [wheel.NAME, wheel.NAME + ".source"]
    assert len((folder / (wheel.NAME + ".source")).read_text()) == 16
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
    real = wheel.proc.run
    monkeypatch.setattr(wheel, "proc", types.SimpleNamespace(
        run=lambda argv, **kw: builds.append(kw["timeout"]) or real(argv, **kw)))
    path = wheel.wheel_path(str(src.out), timeout=33)
    assert builds == [33]
    (src.root / "potato" / "a.py").write_text("changed")
    src.clock.now += 10
    assert wheel.wheel_path(str(src.out)) == path and builds == [33, 300]
    assert open(path + ".source").read() == _stamp(src)
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


def test_wheel_path_waits_for_a_build_under_way_unless_told_not_to(src, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_STARTED", str(tmp_path / "started"))
    monkeypatch.setenv("FAKE_GO", str(tmp_path / "go"))
    monkeypatch.setenv("FAKE_BUILD", "block")
    t = threading.Thread(target=wheel.wheel_path, args=(str(tmp_path / "other"),))
    t.start()
    try:
        for _ in range(400):
            if (tmp_path / "started").exists():
                break
            t.join(0.05)
        with pytest.raises(wheel.WheelError, match="building its wheel right now"):
            wheel.wheel_path(str(src.out), wait=False)
        assert not (tmp_path / "go").exists() and _builds(src) == ["block"]
        (tmp_path / "go").write_text("")
        monkeypatch.setenv("FAKE_BUILD", "ok")
        assert os.path.isfile(wheel.wheel_path(str(src.out)))  # waits, then builds its own
    finally:
        (tmp_path / "go").write_text("")
        t.join(30)
    assert _builds(src) == ["block", "ok"]
    assert os.path.isfile(wheel.wheel_path(str(src.out), wait=False))  # the lock let go


def test_a_remembered_failure_is_told_before_the_lock_is_asked_for(src, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_BUILD", "fail")
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    failed = str(e.value)
    monkeypatch.setenv("FAKE_STARTED", str(tmp_path / "started"))
    monkeypatch.setenv("FAKE_GO", str(tmp_path / "go"))
    monkeypatch.setenv("FAKE_BUILD", "block")
    t = threading.Thread(target=wheel.wheel_path, args=(str(tmp_path / "other"),))
    t.start()
    try:
        for _ in range(400):
            if (tmp_path / "started").exists():
                break
            t.join(0.05)
        src.clock.now += 30
        with pytest.raises(wheel.WheelError) as e:
            wheel.wheel_path(str(src.out), wait=False)
        assert str(e.value) == failed  # not "building right now"
    finally:
        (tmp_path / "go").write_text("")
        t.join(30)


def test_build_ignores_a_build_folder_already_gone(src, tmp_path, monkeypatch):
    keep = tmp_path / "keep"
    keep.mkdir()
    monkeypatch.setenv("FAKE_BUILD", "selfclean")
    monkeypatch.setenv("FAKE_KEEP", str(keep))
    path = wheel.wheel_path(str(src.out))
    assert open(path).read() == "kept"
    assert os.listdir(src.temp) == []


def test_wheel_path_checks_again_once_it_has_the_lock(src, tmp_path, monkeypatch):
    """A caller that waited for another's build takes its outcome, its wheel or its failure,
    and builds nothing itself."""
    out = str(src.out)
    for mode, want in (("blockfail", ["blockfail"]), ("blockok", ["blockfail", "blockok"])):
        started, go = tmp_path / ("started-" + mode), tmp_path / ("go-" + mode)
        monkeypatch.setenv("FAKE_STARTED", str(started))
        monkeypatch.setenv("FAKE_GO", str(go))
        monkeypatch.setenv("FAKE_BUILD", mode)
        got = {}

        def call(who):
            try:
                got[who] = wheel.wheel_path(out)
            except wheel.WheelError as e:
                got[who] = e
        first = threading.Thread(target=call, args=("first",))
        first.start()
        second = threading.Thread(target=call, args=("second",))
        try:
            for _ in range(400):
                if started.exists():
                    break
                first.join(0.05)
            assert started.exists()
            monkeypatch.setenv("FAKE_BUILD", "again")  # what a second build would log
            second.start()
            second.join(0.5)  # at the lock, behind the build under way
            assert second.is_alive()
        finally:
            go.write_text("")
            first.join(30)
            if second.ident:
                second.join(30)
        assert _builds(src) == want  # the second caller built nothing
        if mode == "blockfail":
            assert "boom-end" in str(got["first"]) and str(got["second"]) == str(got["first"])
            src.clock.now += 60
        else:
            assert os.path.isfile(got["first"]) and got["second"] == got["first"]


def test_a_build_that_makes_no_wheel(src, monkeypatch):
    monkeypatch.setattr(wheel.os, "replace", lambda a, b: None)  # the wheel never lands
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out))
    assert str(e.value) == "The build made no %s." % wheel.NAME


def test_build_runs_the_backend_in_its_copy_and_places_the_wheel_atomically(src, monkeypatch):
    calls, made = [], []

    def run(argv, **kw):
        calls.append((argv, kw))
        return Completed(argv, -9, "", "", timed_out=True)

    monkeypatch.setattr(wheel, "proc", types.SimpleNamespace(run=run))
    folder = str(src.out / "training" / "wheel")
    with pytest.raises(wheel.WheelError) as e:
        wheel.wheel_path(str(src.out), timeout=7)
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
    src.clock.now += 60  # past the remembered failure
    wheel.wheel_path(str(src.out))
    assert made == [{"prefix": ".%s." % wheel.NAME, "dir": folder}]
    assert sorted(os.listdir(folder)) == [wheel.NAME, wheel.NAME + ".source"]
