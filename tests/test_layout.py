"""The folder says where code runs (issue 13): what travels to hosts is potato/training/remote/
(plus the package __init__s on its path and the two entry points), it imports nothing of the
server, it is all that is hashed and copied, and the package stays small and acyclic."""

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import io

import pytest

from potato.training import backends
from potato.training.backends import ship
from potato.training.remote import protocol
from tests.helpers import ROOT

PACKAGE = os.path.join(ROOT, "potato")
STDLIB = set(sys.stdlib_module_names)
THIRD_PARTY_IN_TRAINERS = {"torch", "transformers", "peft", "numpy", "bitsandbytes",
                           "accelerate", "tokenizers", "PIL", "soundfile"}


def shipped():
    return [rel for rel, _ in ship.shipped_files(ROOT)]


def py_files():
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, ROOT), path


def module_name(rel):
    mod = rel[:-3].replace("/", ".")
    return mod[:-len(".__init__")] if mod.endswith(".__init__") else mod


def imports(path, top_level_only=False):
    """(module imported, line, at module level?) for every import in ``path``."""
    tree = ast.parse(open(path).read())
    package = module_name(os.path.relpath(path, ROOT))
    if not path.endswith("__init__.py"):
        package = package.rsplit(".", 1)[0]
    out = []

    def visit(node, level):
        for child in ast.iter_child_nodes(node):
            inner = level or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, not level) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - child.level + 1] + ([base] if base else []))
                out.append((base, child.lineno, not level))
                for a in child.names:  # "from potato.training import x" may name a module
                    out.append((base + "." + a.name, child.lineno, not level))
            visit(child, inner)

    visit(tree, False)
    return [i for i in out if i[2]] if top_level_only else out


def is_module(name):
    base = os.path.join(ROOT, *name.split("."))
    return os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py"))


# -- 1. import isolation ------------------------------------------------------------------------

@pytest.mark.parametrize("rel", shipped())
def test_shipped_modules_import_only_stdlib_and_remote(rel):
    if not rel.endswith(".py"):
        return
    bad = []
    in_trainers = rel.startswith("potato/training/remote/trainers/")
    for name, line, top in imports(os.path.join(ROOT, rel)):
        root = name.split(".")[0]
        if root == "potato":
            if not is_module(name):
                continue  # a name imported from a module, not a module
            if not (name.startswith("potato.training.remote") or name in ("potato",
                                                                          "potato.training")):
                bad.append("%s:%d imports %s" % (rel, line, name))
        elif root not in STDLIB and root != "__future__":
            if top or not (in_trainers and root in THIRD_PARTY_IN_TRAINERS):
                bad.append("%s:%d imports %s%s" % (rel, line, name,
                                                   "" if top else " (in a function)"))
    assert bad == []


def test_shipped_files_run_alone(tmp_path):
    """Every shipped module imports from a copy of the shipped files only, with no site
    packages (no PyYAML, no torch) and nothing of the server on sys.path."""
    for rel in shipped():
        dest = tmp_path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.join(ROOT, rel), dest)
    mods = [module_name(rel) for rel in shipped() if rel.endswith(".py")]
    code = ("import sys\nsys.path[:] = [%r] + [p for p in sys.path if 'site-packages' not in p "
            "and p not in ('', %r)]\nimport importlib\n"
            "for m in %r:\n    importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.startswith('potato')))"
            % (str(tmp_path), ROOT, mods))
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ.get("PATH", "")})
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = eval(r.stdout.strip().splitlines()[-1])
    assert all(m.startswith("potato.training.remote") or m in ("potato", "potato.training",
                                                                "potato.training.agent",
                                                                "potato.training.worker")
               for m in loaded), loaded
    # and the agent and worker entry points answer from there
    for entry in ("potato.training.agent", "potato.training.worker"):
        r = subprocess.run([sys.executable, "-S", "-m", entry, "--help"], cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=60,
                           env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path)})
        assert r.returncode == 0 and "usage: python -m " + entry in r.stdout, r.stderr


def test_isolation_check_can_fail(tmp_path):
    bad = tmp_path / "potato" / "training" / "remote" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from potato.training.lifecycle.queue import Manager\nimport yaml\n")
    found = [n for n, _, _ in imports(str(bad))]
    assert "potato.training.lifecycle.queue" in found and "yaml" in found


# -- 2. only what travels is shipped ------------------------------------------------------------

def copy_of_source(tmp_path):
    dest = tmp_path / "src"
    shutil.copytree(PACKAGE, dest / "potato", ignore=shutil.ignore_patterns("__pycache__"))
    return str(dest)


def test_hash_covers_only_what_travels(tmp_path):
    """Three copies of the source (a hash is kept per folder): as it is, with changes that stay
    on the server, with one that travels."""
    before = ship.code_hash(copy_of_source(tmp_path / "as-is"))
    root = copy_of_source(tmp_path / "server-only")
    with open(os.path.join(root, "potato", "server", "static", "style.css"), "a") as f:
        f.write("\n/* a CSS-only change */\n")
    with open(os.path.join(root, "potato", "training", "lifecycle", "queue.py"), "a") as f:
        f.write("\n# a server-only change\n")
    assert ship.code_hash(root) == before
    root = copy_of_source(tmp_path / "travels")
    with open(os.path.join(root, "potato", "training", "remote", "bundle.py"), "a") as f:
        f.write("\n# a change that travels\n")
    assert ship.code_hash(root) != before


def test_archive_holds_the_shipped_files_only():
    with tarfile.open(fileobj=io.BytesIO(ship.source_archive()), mode="r:gz") as tar:
        names = sorted(m.name for m in tar.getmembers())
    assert names == sorted(shipped())
    assert "potato/training/remote/run.py" in names and "potato/training/worker.py" in names
    assert not any(n.startswith(("potato/server/", "potato/training/backends/"))
                   or n in ("potato/config/settings.py", "potato/training/lifecycle/queue.py") for n in names)


# -- 3. no cycles, small modules, short functions ----------------------------------------------

def import_graph():
    graph = {}
    for rel, path in py_files():
        mod = module_name(rel)
        deps = set()
        for name, _, _ in imports(path):
            if name.startswith("potato") and is_module(name) and name != mod:
                deps.add(name)
        graph[mod] = deps
    return graph


def find_cycle(graph):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m not in graph:
                continue
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_no_import_cycles():
    """Function-local imports count too: none may dodge a cycle. A package's __init__ is
    imported by its modules, so edges into a parent package are not followed."""
    graph = import_graph()
    pruned = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    assert find_cycle(pruned) is None


def test_cycle_finder_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def imported_by_name(path):
    """The potato modules a module imports by name at run time: in a module that calls
    ``importlib.import_module``, every string constant that names a potato module (the trainer
    registry's modules)."""
    tree = ast.parse(open(path).read())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        getattr(n.func, "attr", None) == "import_module"
        or getattr(n.func, "id", None) == "import_module")]
    if not calls:
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and n.value.startswith("potato.")
            and is_module(n.value)}


def runtime_graph():
    """The import graph with the edges of ``importlib.import_module`` added, parent-package
    edges pruned (as in test_no_import_cycles)."""
    graph = import_graph()
    for rel, path in py_files():
        graph[module_name(rel)] |= imported_by_name(path) - {module_name(rel)}
    return {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}


def test_no_import_cycles_at_run_time():
    """A module imported by name (a trainer, through the registry) counts as imported: the
    worker loads the trainers, so no trainer module may import the worker."""
    assert find_cycle(runtime_graph()) is None


def test_runtime_cycle_check_can_fail(tmp_path):
    registry = tmp_path / "registry.py"
    registry.write_text("import importlib\nMODULES = ['potato.training.remote.worker', "
                        "'potato.nothing.here']\n"
                        "def load(name):\n    return importlib.import_module(name)\n")
    assert imported_by_name(str(registry)) == {"potato.training.remote.worker"}
    # the cycle this check was written for: a trainer module importing the worker (which
    # imports the trainer registry, which imports the trainer modules by name)
    graph = runtime_graph()
    graph["potato.training.remote.trainers.hf_text"].add("potato.training.remote.worker")
    assert find_cycle(graph) is not None
    static = import_graph()
    static["potato.training.remote.trainers.hf_text"].add("potato.training.remote.worker")
    assert find_cycle({m: {d for d in deps if not m.startswith(d + ".")}
                       for m, deps in static.items()}) is None  # invisible without the names


def test_modules_and_functions_stay_small():
    big = []
    for rel, path in py_files():
        src = open(path).read()
        if len(src.splitlines()) > 450:
            big.append("%s: %d lines" % (rel, len(src.splitlines())))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    big.append("%s: %s() is %d lines" % (rel, node.name, n))
    assert big == []


# -- 6. one exit-code table ----------------------------------------------------------------------

def test_every_reserved_exit_code_has_a_sentence():
    codes = {v for k, v in vars(protocol).items()
             if k.startswith(("EXIT_", "AGENT_", "REMOTE_")) and isinstance(v, int)}
    assert codes >= {0, 1, 2, 3, 4, 64, 65, 66, 67, 95, 96, 97, 98}
    for code in codes:
        assert not protocol.exit_sentence(code).startswith("it stopped with exit status")
    assert protocol.exit_sentence(3) == ("the agent could not reach the server, or the server "
                                         "refused it")
    assert protocol.exit_sentence(-9) == "it was killed by signal 9"


def test_shell_scripts_use_the_table():
    from potato.training.backends import sshcmd
    from potato.training.remote import slurm_job

    assert "exit %d" % protocol.REMOTE_NO_CODE in sshcmd.AGENT_SH
    assert "exit %d" % protocol.REMOTE_NO_PYTHON in sshcmd.PROBE_SH
    assert "exit %d" % protocol.REMOTE_ENV_FAILED in sshcmd.ENV_SH
    job_sh = slurm_job.job_script(
        protocol.RunSettings(scheduler=slurm_job.SlurmSettings()), "/jobs/r1", "/code")
    assert "|| exit %d\n" % protocol.REMOTE_NO_CODE in job_sh
    for name, text in (("AGENT_SH", sshcmd.AGENT_SH), ("PROBE_SH", sshcmd.PROBE_SH),
                       ("ENV_SH", sshcmd.ENV_SH), ("job.sh", job_sh)):
        assert unreserved_exits(text) == [], name


SHELL_EXIT = re.compile(r"\bexit (\d+)\b")


def reserved_codes():
    return {v for k, v in vars(protocol).items()
            if k.startswith(("EXIT_", "AGENT_", "REMOTE_")) and isinstance(v, int)}


def unreserved_exits(script):
    """``exit N`` in a generated script with N not in protocol's table."""
    return [m for m in SHELL_EXIT.findall(script) if int(m) not in reserved_codes()]


def code_strings(path):
    """(line, text) of every string constant of a module but its docstrings."""
    tree = ast.parse(open(path).read())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docstrings]


def literal_exits(path):
    """``exit N`` written with a literal N in a module's strings (a script or a line of one,
    job.sh's among them): every code a script exits with comes from protocol's table."""
    rel = os.path.relpath(path, ROOT)
    return ["%s:%d: exit %s" % (rel, line, code) for line, text in code_strings(path)
            for code in SHELL_EXIT.findall(text)]


def test_no_literal_exit_codes_in_scripts():
    bad = []
    for _, path in py_files():
        bad.extend(literal_exits(path))
    assert bad == []


def test_exit_code_checks_can_fail(tmp_path):
    planted = tmp_path / "job.py"
    planted.write_text('"""Writes job.sh: exit 0 when done (a docstring may say so)."""\n'
                       'import shlex\n'
                       'def job(d):\n'
                       '    return "cd %s || exit 96" % shlex.quote(d)\n')
    assert [b.split(": ", 1)[1] for b in literal_exits(str(planted))] == ["exit 96"]
    assert unreserved_exits("cd /x || exit 42\nexit \"$code\"\n") == ["42"]
    assert unreserved_exits("cd /x || exit %d\n" % protocol.REMOTE_NO_CODE) == []


# -- 7. one builder for the worker's command line ------------------------------------------------

def worker_command_lines(path):
    """Strings of a module that name the worker as a command (``-m`` and the module, or the
    module alone as an argv item), docstrings and messages that quote it aside."""
    return ["%s:%d" % (os.path.relpath(path, ROOT), line) for line, text in code_strings(path)
            if text == protocol.WORKER_MODULE or re.search(
                r"-m %s --spec %%s" % re.escape(protocol.WORKER_MODULE), text)]


def test_one_builder_for_the_worker_command_line():
    owners = [w for _, path in py_files() for w in worker_command_lines(path)]
    assert [o.split(":")[0] for o in owners] == ["potato/training/remote/protocol.py"], owners
    assert protocol.worker_argv("/py", "/r/spec.json") == [
        "/py", "-m", "potato.training.worker", "--spec", "/r/spec.json"]


def test_worker_command_line_check_can_fail(tmp_path):
    planted = tmp_path / "backend.py"
    planted.write_text('argv = [py, "-m", "potato.training.worker", "--spec", spec]\n'
                       'line = "%s -m potato.training.worker --spec %s > %s" % (py, spec, out)\n'
                       'hint = "run it through python -m potato.training.worker"\n')
    assert [w.split(":")[1] for w in worker_command_lines(str(planted))] == ["1", "2"]


# -- 8. one composition root; the server knows nothing of training (issue 19) -----------------

def server_imports_of_training(files):
    """(file, line, module) for every import of potato.training in ``files`` (function-local
    imports included)."""
    out = []
    for rel, path in files:
        for name, line, _ in imports(path):
            if name == "potato.training" or name.startswith("potato.training."):
                out.append((rel, line, name))
    return sorted(set(out))


def test_server_imports_nothing_of_training():
    files = [(rel, path) for rel, path in py_files() if rel.startswith("potato/server/")]
    assert files and server_imports_of_training(files) == []


def test_server_import_check_can_fail(tmp_path):
    planted = tmp_path / "potato" / "server" / "bad.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("def f():\n    from potato.training.lifecycle.queue import Manager\n")
    found = server_imports_of_training([("potato/server/bad.py", str(planted))])
    assert [m for _, _, m in found] == ["potato.training.lifecycle.queue", "potato.training.lifecycle.queue.Manager"]


# -- 9. backends own their behaviour -------------------------------------------------------------

# The backend kinds, from the backends registry (the config reads each kind's keys from its
# class there, so no module outside backends/ needs a kind's name).
BACKEND_TYPES = set(backends.TYPES)
MAY_NAME_TYPES = ("potato/training/backends/",)


def type_comparisons(path):
    """Lines that compare something's ``type`` with a backend type string, or test membership
    of a ``type`` in literals that name one (``b.type == "agent"``, ``btype in ("ssh", ...)``)."""
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left] + list(node.comparators)
        literals = set()
        for side in sides:
            for sub in ast.walk(side):
                if isinstance(sub, ast.Constant) and sub.value in BACKEND_TYPES:
                    literals.add(sub.value)
        if not literals:
            continue
        text = ast.unparse(node)
        if re.search(r"(\btype\b|type\"\]|type'\]|btype|backend_type)", text):
            found.append((node.lineno, text))
    return found


def test_no_backend_type_comparisons_outside_backends():
    bad = []
    for rel, path in py_files():
        if rel.startswith(MAY_NAME_TYPES) or rel.startswith("potato/training/remote/"):
            continue
        bad += ["%s:%d %s" % (rel, line, text) for line, text in type_comparisons(path)]
    assert bad == []


# Where a backend kind's name may appear as a string at all (beyond the files above): the CLI's
# `training agent` subcommand, the shipped SLURM scheduler's own name on the wire
# (RunSettings.scheduler, in its own module), and an agent trace's speaker field (an item's
# data, upstream's name for it).
KIND_NAME_ALLOWED = {("potato/commands/cli.py", "agent"),
                     ("potato/training/remote/slurm_job.py", "slurm"),
                     ("potato/project/traces.py", "agent")}


def kind_name_strings(rel, path):
    """(value, line) of every string constant that is a remote backend kind's name."""
    return [(n.value, n.lineno) for n in ast.walk(ast.parse(open(path).read()))
            if isinstance(n, ast.Constant) and n.value in BACKEND_TYPES - {"local"}
            and (rel, n.value) not in KIND_NAME_ALLOWED]


def test_no_backend_kind_names_outside_backends():
    """Stronger than the comparison check: a kind's name as a string (a dispatch table, a
    ``match``, a tuple named elsewhere) appears only in backends/ and the config parser."""
    bad = []
    for rel, path in py_files():
        if rel.startswith(MAY_NAME_TYPES):
            continue
        bad += ["%s:%d %r" % (rel, line, value) for value, line in kind_name_strings(rel, path)]
    assert bad == []


def test_kind_name_check_can_fail(tmp_path):
    planted = tmp_path / "bad.py"
    planted.write_text('REMOTE = ("ssh", "slurm")\nHANDLERS = {"agent": print}\n')
    assert kind_name_strings("potato/training/bad.py", str(planted)) == [
        ("ssh", 1), ("slurm", 1), ("agent", 2)]


def test_type_comparison_check_can_fail(tmp_path):
    planted = tmp_path / "bad.py"
    planted.write_text('def f(b, run):\n    if b.type == "agent":\n        pass\n'
                       '    return run["type"] != "local" or btype in ("ssh", "slurm")\n')
    assert [line for line, _ in type_comparisons(str(planted))] == [2, 4, 4]


# -- 10. imports at the top, except where they defer torch ----------------------------------------

DEFER_MARK = "# deferred:"  # the one-line reason a function-local import may give


def local_potato_imports(rel, path):
    lines = open(path).read().splitlines()
    out = []
    for name, line, top in imports(path):
        if top or name.split(".")[0] != "potato":
            continue
        if DEFER_MARK in lines[line - 1]:
            continue
        out.append("%s:%d %s" % (rel, line, name))
    return sorted(set(out))


def test_potato_imports_are_at_module_level():
    """Function-local imports hide cycles and slow first requests: only the CLI (which imports
    each command when it runs) and imports that defer torch/transformers (marked with
    ``# deferred: <reason>``) may import potato modules inside a function."""
    bad = []
    for rel, path in py_files():
        if rel == "potato/commands/cli.py":
            continue
        bad += local_potato_imports(rel, path)
    assert bad == []


def test_local_import_check_can_fail(tmp_path):
    planted = tmp_path / "potato" / "bad.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("def f():\n    from potato.project import store\n"
                       "    from potato import config  # deferred: a reason\n")
    assert local_potato_imports("potato/bad.py", str(planted)) == [
        "potato/bad.py:2 potato.project", "potato/bad.py:2 potato.project.store"]


# -- 11. tests share through one helpers module and conftest.py -----------------------------------

def test_no_test_module_imports_another():
    """No test module imports another test module or conftest (pytest hands out conftest's
    fixtures itself; everything else shared lives in tests/helpers.py)."""
    tests_dir = os.path.join(ROOT, "tests")
    files = sorted(os.path.join(tests_dir, f) for f in os.listdir(tests_dir) if f.endswith(".py"))
    assert _cross_test_imports(files) == []


def _cross_test_imports(files):
    bad = []
    for path in files:
        for name, line, _ in imports(path):
            mod = name.split(".")
            if mod[0] == "tests" and len(mod) > 1 and (mod[1].startswith("test_")
                                                       or mod[1] == "conftest"):
                bad.append("%s:%d imports %s" % (os.path.basename(path), line, name))
    return sorted(set(bad))


def test_cross_test_import_check_can_fail(tmp_path):
    planted = tmp_path / "test_bad.py"
    planted.write_text("from tests.conftest import ROOT\n"
                       "def f():\n    from tests.test_hostile import injected\n")
    assert _cross_test_imports([str(planted)]) == [
        "test_bad.py:1 imports tests.conftest", "test_bad.py:1 imports tests.conftest.ROOT",
        "test_bad.py:3 imports tests.test_hostile",
        "test_bad.py:3 imports tests.test_hostile.injected"]


# -- 12. a run is a typed record below the store (issue 19), and a typed view above it (33) --

# A run read from the store is a ``runs.Run``; what the API returns and the pages, the publish
# card, the model card and the CLI show is its ``view.RunView`` (``from_run`` builds it,
# ``as_dict`` is the API's JSON, ``from_dict`` reads that JSON back where the CLI gets it over
# HTTP). Both are read by attribute: no ``run["key"]`` or ``run.get("key")``, and no
# ``view["key"]`` or ``view.get("key")`` (``ctx.run``, ``self.view`` and ``live_view`` too) under
# potato/training/ or potato/commands/, outside the record's own module.
RECORD_MODULES = ("potato/training/core/view.py",)


def _names_a_run_or_view(node):
    """``run``, ``view`` or ``<something>_view``, or ``<something>.run`` / ``.view``."""
    return (isinstance(node, ast.Name) and (node.id in ("run", "view") or
                                            node.id.endswith("_view"))) or (
        isinstance(node, ast.Attribute) and node.attr in ("run", "view"))


def run_key_reads(rel, path):
    """``file:line code`` for every string-key read of a run or a run's view (``x["key"]``,
    ``x.get("key")``) in a module other than the record's own."""
    if rel in RECORD_MODULES:
        return []
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        hit = False
        if isinstance(node, ast.Subscript) and _names_a_run_or_view(node.value):
            hit = isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and _names_a_run_or_view(node.func.value)
              and node.args):
            hit = isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
        if hit:
            found.append((node.lineno, node.col_offset, "%s:%d %s" % (rel, node.lineno,
                                                                       ast.unparse(node))))
    return [text for _, _, text in sorted(found)]


def test_runs_and_their_views_are_read_by_attribute():
    bad = []
    for rel, path in py_files():
        if rel.startswith(("potato/training/", "potato/commands/")):
            bad += run_key_reads(rel, path)
    assert bad == []


def test_run_key_check_can_fail(tmp_path):
    planted = tmp_path / "bad.py"
    planted.write_text('def f(run, ctx, view, runs, live_view, self):\n'
                       '    a = run["status"], run.get("step"), ctx.run["backend"]\n'
                       '    b = view["status"], runs["r1"], run.status, run[0], run.get(k)\n'
                       '    c = view.get("holdout"), live_view["run_id"], self.view["name"]\n'
                       '    d = view.status, view[0], views["r1"], review["x"], data.get("run")\n'
                       '    return ctx.run.get("remote_host")\n')
    assert [b.split(" ", 1)[1] for b in run_key_reads("potato/training/bad.py",
                                                        str(planted))] == [
        "run['status']", "run.get('step')", "ctx.run['backend']", "view['status']",
        "view.get('holdout')", "live_view['run_id']", "self.view['name']",
        "ctx.run.get('remote_host')"]
    assert [b.split(" ")[0] for b in run_key_reads("potato/commands/bad.py", str(planted))] == [
        "potato/commands/bad.py:%d" % n for n in (2, 2, 2, 3, 4, 4, 4, 6)]
    assert run_key_reads("potato/training/core/view.py", str(planted)) == []  # the record's


# -- floors: no import runs from a lower layer to a higher one (issue 33) ---------------------

# Lowest first. A module's floor is the first entry whose file or folder holds it; it may import
# its own floor and those below, never one above. The config reader sits below the kinds (a
# kind reads its keys with it) and the config record above them (it holds the schemes); the
# backend kinds reach the config through the injected registry (config/backends.py), so the
# config layer imports nothing of training.
FLOORS = [
    ("kernel", ("potato/__init__.py", "potato/markup.py", "potato/training/__init__.py",
                "potato/training/agent.py", "potato/training/worker.py",
                "potato/training/remote/")),
    ("config reader", ("potato/config/__init__.py", "potato/config/reader.py",
                       "potato/config/upstream.py", "potato/config/upstream_keys.py",
                       "potato/config/netaddr.py", "potato/config/crowd.py")),
    ("kinds", ("potato/schemes/",)),
    ("config", ("potato/config/",)),
    ("project", ("potato/project/",)),
    ("labels", ("potato/labels/",)),
    ("server", ("potato/server/",)),
    ("training reports", ("potato/training/reports/",)),
    ("training core", ("potato/training/core/",)),
    ("training exchange", ("potato/training/exchange/",)),
    ("training backends", ("potato/training/backends/",)),
    ("training lifecycle", ("potato/training/lifecycle/",)),
    ("training hub", ("potato/training/hub/",)),
    ("training web", ("potato/training/web/",)),
    ("composition root", ("potato/service.py",)),
    ("commands", ("potato/commands/", "potato/__main__.py")),
]


def floor_of(rel):
    for i, (_, places) in enumerate(FLOORS):
        if rel in places or rel.startswith(tuple(p for p in places if p.endswith("/"))):
            return i
    return None


def module_file(module, root):
    """The file (relative to ``root``) that a dotted potato module name is, or None."""
    path = module.replace(".", "/")
    if os.path.isdir(os.path.join(root, path)):
        return path + "/__init__.py"
    if os.path.exists(os.path.join(root, path + ".py")):
        return path + ".py"
    return None


def upward_imports(files, root):
    """``file:line floor -> module floor`` for every import (function-local ones included) of a
    module on a higher floor than the importing file's."""
    out = []
    for rel, path in files:
        mine = floor_of(rel)
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom) and node.level:  # the floors read absolute names
                out.append("%s:%d relative import" % (rel, node.lineno))
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("potato"):
                names = [module_file(node.module + "." + a.name, root) or
                         module_file(node.module, root) for a in node.names]
            elif isinstance(node, ast.Import):
                names = [module_file(a.name, root) for a in node.names
                         if a.name.startswith("potato")]
            else:
                continue
            for target in names:
                theirs = floor_of(target) if target else None
                if mine is not None and theirs is not None and theirs > mine:
                    out.append("%s:%d %s -> %s %s" % (rel, node.lineno, FLOORS[mine][0], target,
                                                      FLOORS[theirs][0]))
    return sorted(set(out))


def test_every_module_has_a_floor():
    assert [rel for rel, _ in py_files() if floor_of(rel) is None] == []


def test_no_import_runs_from_a_lower_floor_to_a_higher_one():
    assert upward_imports(py_files(), ROOT) == []


def test_floor_check_can_fail(tmp_path):
    for rel, text in (("potato/config/reader.py", "from potato.schemes import KINDS\n"),
                      ("potato/config/settings.py", "def f():\n    import potato.training.backends\n"),
                      ("potato/schemes/__init__.py", ""), ("potato/training/backends/__init__.py", ""),
                      ("potato/project/ok.py", "from potato.config import settings\n"),
                      ("potato/project/rel.py", "from ..training import backends\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    files = [(rel, str(tmp_path / rel)) for rel in ("potato/config/reader.py",
                                                      "potato/config/settings.py",
                                                      "potato/project/ok.py",
                                                      "potato/project/rel.py")]
    assert upward_imports(files, str(tmp_path)) == [
        "potato/config/reader.py:1 config reader -> potato/schemes/__init__.py kinds",
        "potato/config/settings.py:2 config -> potato/training/backends/__init__.py "
        "training backends", "potato/project/rel.py:1 relative import"]


# -- trainers (issue 33): trainer names live in the trainer registry ----------------------------

TRAINERS_DIR = "potato/training/remote/trainers/"


def trainer_name_uses(rel, path, names):
    """Where a trainer name (a string equal to one of ``names``) is compared (``==``, ``in``,
    in a tuple or set compared against), used as a dict key (a literal's key, a subscript,
    ``.get``/``.pop``/``.setdefault``'s key), or given as a default value: the behaviour that
    belongs on the trainer's registry entry."""
    found = []

    def named(node):  # the name constants of a value or of a tuple, list or set of them
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [e for e in elts if isinstance(e, ast.Constant) and e.value in names]

    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        hits = []
        if isinstance(node, ast.Compare):
            for side in [node.left] + node.comparators:
                hits += named(side)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                hits += named(key) if key is not None else []
        elif isinstance(node, ast.Subscript):
            hits += named(node.slice)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args):
            hits += named(node.args[0])
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            hits += named(node.value)  # a dataclass field's default (a config default)
        elif isinstance(node, ast.arguments):
            for default in node.defaults + [d for d in node.kw_defaults if d is not None]:
                hits += named(default)
        found += ["%s:%d %s" % (rel, h.lineno, h.value) for h in hits]
    return found


def test_trainer_names_are_used_only_in_the_trainer_registry():
    """No trainer name is compared or used as a key outside the trainers' folder: a trainer
    carries what it knows (load code, Hub metadata, kinds and media, the config's default)."""
    from potato.training.remote.trainers import REGISTRY

    names = set(REGISTRY)
    bad = []
    for rel, path in py_files():
        if not rel.startswith(TRAINERS_DIR):
            bad += trainer_name_uses(rel, path, names)
    assert bad == []


def test_trainer_name_check_can_fail(tmp_path):
    planted = tmp_path / "bad.py"
    planted.write_text(
        'from dataclasses import dataclass\n'
        'TABLE = {"hf-text-regression": 1, ("hf-text-classification", True): 2}\n'
        '@dataclass\nclass Auto:\n    trainer: str = "text-naive-bayes"\n'
        'def f(run, meta, trainer="hf-llm-classification"):\n'
        '    if run.trainer == "decision-calibrate" or run.trainer in ("hf-image-classification",'
        ' "other"):\n'
        '        return meta["hf-audio-classification"], meta.get("hf-token-classification")\n'
        '    return "hf-text-classification is named in a sentence", run.trainer == "x"\n')
    from potato.training.remote.trainers import REGISTRY

    planted_names = {"hf-text-regression", "hf-text-classification", "text-naive-bayes",
                     "hf-llm-classification", "decision-calibrate", "hf-image-classification",
                     "hf-audio-classification", "hf-token-classification"}
    found = trainer_name_uses("potato/training/bad.py", str(planted),
                              set(REGISTRY) | planted_names)
    # each name once; the sentence and "x" are no use of a name
    assert sorted(f.split(" ", 1)[1] for f in found) == sorted(planted_names)

# -- 13. kinds own their behaviour (issue 33) ------------------------------------------------------

from potato.schemes import KINDS  # noqa: E402  (this section's own names, kept at its end)

# An annotation kind is decided by its class in potato/schemes/ (attributes and methods of
# Kind); trainers declare which kinds they take (their registry, owned by trainers/).
KINDS_MAY_BE_NAMED = ("potato/schemes/", "potato/training/remote/trainers/")
# Words that are a kind's name and also something else in one file: display.py's field
# types (upstream's item displays: text, dialogue, image ...) are not annotation kinds, nor
# are the display field types upstream.py reads.
KIND_WORD_ELSEWHERE = {("potato/project/display.py", "text"),
                       ("potato/config/upstream.py", "text")}
# An expression that holds an annotation type: a scheme's annotation_type, a kind, a bundle
# schema's "type", a stored report's "kind" ...
KIND_EXPR = re.compile(r"annotation_type|type_name|\bkinds?\b|\bkind_name\b|\b\w*type\b|"
                       r"\[['\"](type|kind)['\"]\]|\.get\(['\"](type|kind)['\"]")


def _kind_names_in(node, names):
    """The kind names a comparison side is, or lists in a literal tuple, set or list."""
    elts = node.elts if isinstance(node, (ast.Tuple, ast.Set, ast.List)) else [node]
    return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]


def kind_name_decisions(rel, path, kinds=None):
    """(line, code) of every place that decides by a kind's name: a comparison (==, !=, in,
    not in a literal) of a kind name with an annotation type, kind or type expression, and a
    dict literal keyed by kind names (two or more, or any used as a lookup: d[...] / d.get)."""
    names = set(kinds if kinds is not None else
                list(KINDS) + [f.type_name for k in KINDS.values() for f in k.forms])
    names -= {word for (where, word) in KIND_WORD_ELSEWHERE if where == rel}
    tree = ast.parse(open(path).read())
    looked_up = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript)} | {
        id(n.func.value) for n in ast.walk(tree) if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute) and n.func.attr == "get"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left] + list(node.comparators)
            for i, side in enumerate(sides):
                others = sides[:i] + sides[i + 1:]
                if _kind_names_in(side, names) and any(KIND_EXPR.search(ast.unparse(o))
                                                       for o in others):
                    found.append((node.lineno, ast.unparse(node)))
                    break
        elif isinstance(node, ast.Dict):
            keyed = [k.value for k in node.keys if isinstance(k, ast.Constant)
                     and k.value in names]
            if len(keyed) >= 2 or keyed and len(keyed) == len(node.keys) and \
                    id(node) in looked_up:
                found.append((node.lineno, ast.unparse(node)[:80]))
    return sorted(found)


def test_no_kind_name_decisions_outside_schemes():
    """Adding a kind is its module and a line in KINDS: nothing outside potato/schemes/ decides
    by a kind's name (the names come from the registry, so a new kind is covered)."""
    bad = []
    for rel, path in py_files():
        if rel.startswith(KINDS_MAY_BE_NAMED):
            continue
        bad += ["%s:%d %s" % (rel, line, text) for line, text in kind_name_decisions(rel, path)]
    assert bad == []


def test_kind_name_decision_check_can_fail(tmp_path):
    planted = tmp_path / "bad.py"
    planted.write_text(
        'def f(s, info, r, kind, item, field):\n'
        '    a = s.annotation_type in ("radio", "select") or info["type"] == "span"\n'
        '    b = r.get("kind") != "span" or kind == "multiselect"\n'
        '    c = {"likert": 1, "slider": 2}\n'
        '    d = {"text": "text_box"}.get(s.annotation_type)\n'
        '    e = item["text"] == "text" or field.input == "number" or "radio" in item\n'
        '    g = s.kind.type_name == "bws"\n'
        '    return {"text": item, "id": 1}\n')
    assert [line for line, _ in kind_name_decisions("potato/bad.py", str(planted))] == [
        2, 2, 3, 3, 4, 5]
    # the names come from the registry: a kind added there is checked too
    assert [line for line, _ in kind_name_decisions(
        "potato/bad.py", str(planted), list(KINDS) + ["bws"])] == [2, 2, 3, 3, 4, 5, 7]
    # a word that is something else in a named file is not a kind's name there
    assert kind_name_decisions("potato/project/display.py", str(planted)) == [
        (line, text) for line, text in kind_name_decisions("potato/bad.py", str(planted))
        if line != 5]


# -- records: one options object, not long argument lists (issue 33) ---------------------------

# A function that needs ten or more values takes a record of them (supervise.Supervision,
# hub.Commit, model_card.Release, pages.Annotating, prepare.Destination). A class's __init__
# is left out: a record's constructor holds its fields.
MAX_PARAMS = 9


def long_signatures(rel, path):
    """``file:line name (n)`` for every function with more than MAX_PARAMS parameters (keyword-
    only ones included; self and cls not counted), __init__ aside."""
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "__init__":
            a = node.args
            n = len([x for x in a.posonlyargs + a.args + a.kwonlyargs
                     if x.arg not in ("self", "cls")])
            if n > MAX_PARAMS:
                found.append("%s:%d %s (%d)" % (rel, node.lineno, node.name, n))
    return found


def test_no_function_takes_a_long_argument_list():
    bad = []
    for rel, path in py_files():
        bad += long_signatures(rel, path)
    assert bad == []


def test_long_signature_check_can_fail(tmp_path):
    planted = tmp_path / "bad.py"
    planted.write_text(
        "def f(a, b, c, d, e, f, g, h, i, j):\n    pass\n"
        "def ok(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "class C:\n"
        "    def __init__(self, a, b, c, d, e, f, g, h, i, j):\n        pass\n"
        "    def m(self, a, b, c, d, e, *, f, g, h, i, j=1):\n        pass\n"
        "    async def n(self, a, b, c, d, e, f, g, h, i):\n        pass\n")
    assert long_signatures("potato/bad.py", str(planted)) == [
        "potato/bad.py:1 f (10)", "potato/bad.py:8 m (10)"]
