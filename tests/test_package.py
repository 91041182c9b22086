"""Packaging, entry points, import hygiene and the Python 3.8 floor for remote code."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# Everything in the package must run on Python 3.8 (requires-python in pyproject.toml); the
# modules that travel to remote hosts must, above all. vermin checks the whole tree.
VERMIN_TARGET = "3.8-"


def run(argv, **kw):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, **kw)


def test_bin_potato_runs_from_any_directory(tmp_path):
    r = run([os.path.join(ROOT, "bin", "potato"), "--help"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "usage: potato" in r.stdout
    for command in ("start", "validate", "annotations", "training"):
        assert command in r.stdout


def test_python_dash_m_matches_bin_wrapper():
    a = run([sys.executable, "-m", "potato", "--help"], cwd=ROOT)
    b = run([os.path.join(ROOT, "bin", "potato"), "--help"], cwd=ROOT)
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_installed_console_script():
    exe = shutil.which("potato")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("the potato console script is not installed: .ci/run must pip install .")
        pytest.skip("potato is not installed here (pip install -e '.[test]')")
    r = run([exe, "--help"])
    assert r.returncode == 0 and "usage: potato" in r.stdout


@pytest.mark.parametrize("argv", [
    ["start"], ["validate"], ["annotations", "import"], ["annotations", "export"],
    ["training", "run"], ["training", "check"], ["training", "register"], ["training", "agent"],
])
def test_every_command_has_help(argv):
    r = run([sys.executable, "-m", "potato", *argv, "--help"], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: potato " + " ".join(argv))


def test_importing_potato_stays_light():
    code = ("import sys, potato, potato.training, potato.training.remote, potato.commands.cli, "
            "potato.config.settings, potato.project.validation\n"
            "heavy = [m for m in ('yaml', 'torch', 'transformers', 'peft', 'potato.server') "
            "if m in sys.modules]\n"
            "print(heavy)")
    r = run([sys.executable, "-c", code], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def _vermin(*paths):
    exe = shutil.which("vermin")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("vermin is not installed: .ci/run installs the test extra")
        pytest.skip("vermin not installed (pip install -e '.[test]')")
    return run([exe, "--no-config-file", f"-t={VERMIN_TARGET}", "--violations", "--no-tips",
                *paths], cwd=ROOT)


def test_package_needs_no_newer_python_than_3_8():
    r = _vermin("potato")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_python_floor_check_can_fail(tmp_path):
    newer = tmp_path / "newer.py"
    newer.write_text("import graphlib\n")  # new in Python 3.9
    r = _vermin(str(newer))
    assert r.returncode != 0
