"""The process runner (potato/training/remote/proc.py): one helper spawns every child, applies
its deadline, hides the server's secrets from it, and turns a failure into a sentence that
quotes the command. Also the tests tools/mutation.py runs against proc.py (docs/testing.md)."""

import os
import sys

import pytest

from potato.training.remote import proc


def test_quoted():
    assert proc.quoted(["ssh", "a b", "it's", 3, "$HOME"]) == \
        "ssh 'a b' 'it'\"'\"'s' 3 '$HOME'"
    assert proc.quoted([]) == ""


def test_exit_codes_for_calls_that_cannot_start():
    assert (proc.NOT_FOUND, proc.NOT_EXECUTABLE) == (127, 126)


def test_completed_failure_sentences():
    c = proc.Completed(["scp", "a b"], 3, "out\n", "l1\nl2\nl3\nl4\nl5\nl6\n")
    assert c.command == "scp 'a b'"
    assert c.stderr_tail() == "l2\nl3\nl4\nl5\nl6"
    assert c.stderr_tail(2) == "l5\nl6"
    assert c.failure("copying") == ("copying failed (exit 3): l2\nl3\nl4\nl5\nl6. The command "
                                    "was: scp 'a b'")
    t = proc.Completed(["sleep", "9"], -9, "", "", timed_out=True)
    assert t.timed_out is True
    assert t.failure("waiting") == "waiting did not finish in time: no output. The command " \
                                   "was: sleep 9"
    o = proc.Completed(["x"], 1, "  " + "o" * 400 + "  ", " \n ")
    assert o.failure("x") == "x failed (exit 1): %s. The command was: x" % ("o" * 300)
    assert proc.Completed(["x"], 0, "", "").timed_out is False


def test_run_captures_output_and_status():
    r = proc.run([sys.executable, "-c", "import sys; sys.stdout.write('hé'); "
                  "sys.stderr.write('err'); sys.exit(3)"])
    assert (r.returncode, r.stdout, r.stderr, r.timed_out) == (3, "hé", "err", False)
    assert r.argv[0] == sys.executable
    r = proc.run([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
                 input_bytes=b"piped")
    assert r.stdout == "piped" and r.returncode == 0
    r = proc.run([sys.executable, "-c", "import sys; print(sys.stdin.read() == '')"])
    assert r.stdout.strip() == "True"
    r = proc.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\xff')"])
    assert r.stdout == "\ufffd"


def test_run_env_and_cwd(tmp_path):
    code = "import os; print(os.getcwd()); print(os.environ.get('PM_X', '-'))"
    r = proc.run([sys.executable, "-c", code], env={"PM_X": "1", "PATH": os.environ["PATH"]},
                 cwd=str(tmp_path))
    assert r.stdout.split() == [str(tmp_path), "1"]


def test_run_deadline_kills_the_group():
    # sh starts in milliseconds even on a loaded machine; its sleep is a second process of the
    # group, which holds the output pipe open unless the whole group is killed
    r = proc.run(["sh", "-c", "echo started; sleep 60"], timeout=1.5)
    assert r.timed_out is True and r.returncode == -9 and r.stdout == "started\n"


def test_run_cannot_start(tmp_path):
    r = proc.run(["/nonexistent/prog", "a"])
    assert (r.returncode, r.stdout, r.stderr) == (127, "", "/nonexistent/prog: command not found")
    script = tmp_path / "noexec"
    script.write_text("#!/bin/sh\n")
    r = proc.run([str(script)])
    assert (r.returncode, r.stderr) == (126, "%s: permission denied" % script)
    r = proc.run(["echo", "a\0b"])
    assert r.returncode == 126 and r.stderr.startswith("echo: cannot run: ")
    r = proc.run([str(tmp_path)])  # a directory: not executable
    assert r.returncode == 126 and r.stderr.startswith(str(tmp_path) + ": ")


def test_hidden_variables_never_reach_a_child(monkeypatch):
    monkeypatch.setenv("PM_SECRET", "s3")
    code = "import os; print(os.environ.get('PM_SECRET', '-'))"
    assert proc.child_env(None) is None
    env = {"PM_SECRET": "x", "A": "1"}
    assert proc.child_env(env) is env
    proc.hide("PM_SECRET")
    try:
        assert proc.run([sys.executable, "-c", code]).stdout.strip() == "-"
        out = proc.child_env(None)
        assert "PM_SECRET" not in out and out["PATH"] == os.environ["PATH"]
        assert proc.child_env(env) == {"A": "1"} and env == {"PM_SECRET": "x", "A": "1"}
        assert proc.child_env({"A": "1"}) == {"A": "1"}
        proc.hide("PM_SECRET")  # two servers hide it: it stays hidden until both unhide
        proc.unhide("PM_SECRET")
        assert "PM_SECRET" not in proc.child_env(None)
        p = proc.spawn([sys.executable, "-c", code], stdout=__import__("subprocess").PIPE)
        assert p.communicate()[0].decode().strip() == "-"
    finally:
        proc.unhide("PM_SECRET")
    assert proc.child_env(None) is None
    assert proc.run([sys.executable, "-c", code]).stdout.strip() == "s3"


def test_spawn_own_group_or_ours():
    import subprocess
    code = "import os; print(os.getpgid(0))"
    p = proc.spawn([sys.executable, "-c", code], stdout=subprocess.PIPE)
    out = int(p.communicate()[0])
    assert out == p.pid
    p = proc.spawn([sys.executable, "-c", code], new_session=False, stdout=subprocess.PIPE)
    assert int(p.communicate()[0]) == os.getpgid(0)


def test_spawn_error_names_the_command():
    with pytest.raises(proc.SpawnError) as e:
        proc.spawn(["/nonexistent/worker", "a b"])
    assert str(e.value) == ("cannot start /nonexistent/worker: No such file or directory. The "
                            "command was: /nonexistent/worker 'a b'")
    assert isinstance(e.value, OSError)


def test_run_defaults_and_own_group(tmp_path):
    import inspect
    assert inspect.signature(proc.run).parameters["timeout"].default == 120
    r = proc.run([sys.executable, "-c", "import os; print(os.getpgid(0) == os.getpid())"])
    assert r.stdout.strip() == "True"
    bad = tmp_path / "garbage"
    bad.write_bytes(b"\x00\x01 not a program")
    bad.chmod(0o755)
    r = proc.run([str(bad), "x"])  # exec format error: neither missing nor forbidden
    assert (r.argv, r.returncode, r.stdout) == ([str(bad), "x"], 126, "")
    assert r.stderr == "%s: Exec format error" % bad
    r = proc.run(["echo", "a\0b"])
    assert (r.argv, r.returncode, r.stdout) == (["echo", "a\0b"], 126, "")


def test_spawn_passes_its_env():
    import subprocess
    code = "import os; print(os.environ.get('PM_X', '-'))"
    p = proc.spawn([sys.executable, "-c", code], stdout=subprocess.PIPE,
                   env={"PM_X": "1", "PATH": os.environ["PATH"]})
    assert p.communicate()[0].decode().strip() == "1"


def test_run_cannot_start_keeps_its_argv_and_empty_output(tmp_path):
    r = proc.run(["/nonexistent/prog", "a"])
    assert r.argv == ["/nonexistent/prog", "a"]
    script = tmp_path / "noexec"
    script.write_text("#!/bin/sh\n")
    r = proc.run([str(script), "b"])
    assert (r.argv, r.stdout, r.returncode) == ([str(script), "b"], "", 126)


def test_run_replaces_bad_utf8_on_stderr():
    r = proc.run([sys.executable, "-c", "import sys; sys.stderr.buffer.write(b'a\\xffb')"])
    assert r.stderr == "a\ufffdb" and r.returncode == 0
