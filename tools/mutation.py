"""Mutation testing over the code that guards users (issue 26; docs/testing.md).

mutmut (the ``mutation`` extra: ``pip install -e .[mutation]``) generates the mutants: its
libcst operators flip comparisons and booleans, change numbers, strings and operators, drop
call arguments, replace assigned values by None. This driver applies them ONE AT A TIME to a
scratch copy of the project and runs, for each module, only the tests listed for it in
``MODULES`` (fast unit tests), with a timeout per mutant and a time budget per module. It never
touches the working tree, and it mutates module-level values too (defaults, ranges, caps), which
mutmut's own runner leaves alone.

    python3 tools/mutation.py                     # every listed module, in order
    python3 tools/mutation.py --module potato/training/boundary.py
    python3 tools/mutation.py --module boundary --show-survivors

Each mutant ends as killed (the tests failed), survived (they passed), timeout (they ran past
the per-mutant limit; counted as killed, as mutmut does), or equivalent (listed in
``EQUIVALENT`` with why it cannot change behaviour; not counted). Score = (killed + timeout) /
(killed + timeout + survived). Results are printed and written to ``--out`` as JSON.

Not mutated: docstrings, and string literals that hold whitespace (prose: messages and help
text, whose wording no unit test should pin); identifiers, keys, states and tokens are.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# module -> the tests that cover it (fast ones; end-to-end tiers are not run per mutant).
# Order is the priority of issue 26; a module joins with its tests, see docs/testing.md. The
# test_mut_* files were written against this run; the other entries are the existing tests that
# cover the module (docs/testing.md says which modules were run and their score).
MODULES = {
    "potato/training/boundary.py": ["tests/test_mut_boundary.py"],
    "potato/training/intake.py": ["tests/test_ratings_training.py"],
    "potato/training/choice.py": ["tests/test_run_keeping.py"],
    "potato/training/autoretrain.py": ["tests/test_mut_autoretrain.py"],
    "potato/training/ingest.py": ["tests/test_mut_writeback.py"],
    "potato/training/report.py": ["tests/test_report.py"],
    "potato/training/remote/proc.py": ["tests/test_mut_remote.py"],
    "potato/server/safety.py": ["tests/test_hostile.py"],
    "potato/markup.py": ["tests/test_mut_safety.py"],
    "potato/training/wheel.py": ["tests/test_hardening_review.py"],
    "potato/training/remote/gpus.py": ["tests/test_ssh_units.py"],
    "potato/training/remote/protocol.py": ["tests/test_mut_remote.py", "tests/test_ssh_units.py"],
    "potato/config.py": ["tests/test_validate.py"],
    "potato/validation.py": ["tests/test_validate.py"],
    "potato/training/backends/sshcmd.py": ["tests/test_ssh_units.py"],
    "potato/training/runs.py": ["tests/test_run_keeping.py"],
    "potato/training/remote/bundle.py": ["tests/test_training_units.py"],
    "potato/training/remote/supervise.py": ["tests/test_mut_remote.py",
                                            "tests/test_training_units.py"],
    "potato/training/remote/client.py": ["tests/test_agent_run.py"],
    "potato/training/remote/slurm_job.py": ["tests/test_slurm_units.py"],
}

# module -> {mutant id: why it cannot change behaviour}. Ids are printed with each survivor.
EQUIVALENT = {
    "potato/training/boundary.py": {
        "812e8b5316": "_progress: dropping hi=BIG from number() keeps its default, hi=BIG",
        "3cb6a4c1e0": "_progress: dropping hi=BIG from number() keeps its default, hi=BIG",
        "c2fbfbc9da": "_metric: dropping hi=BIG from number() keeps its default, hi=BIG",
        "0a1024bb1b": "_artifact: dropping hi=BIG from number() keeps its default, hi=BIG",
    },
    "potato/markup.py": {
        "3ecbfa773a": "esc: dropping quote=True from html.escape keeps its default, quote=True",
    },
}

PER_MUTANT_S = 60  # a mutant whose tests take longer than this (an endless loop) is a timeout
MODULE_BUDGET_S = 900  # past this a module's remaining mutants are not run (reported as such)


def mutants(path: Path):
    """(id, line, description, mutated source) for each mutant mutmut makes of ``path``."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider
    from mutmut.mutation.file_mutation import create_mutations, deep_replace

    code = path.read_text()
    here = os.getcwd()
    os.chdir(ROOT)  # mutmut reads its [mutmut] settings from setup.cfg in the working directory
    try:
        module, found, _, _ = create_mutations(str(path), code)
    finally:
        os.chdir(here)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    seen = {}
    for m in found:
        if _skipped(m):
            continue
        before = module.code_for_node(m.original_node).strip()
        after = module.code_for_node(m.mutated_node).strip()
        func = m.contained_by_top_level_function
        where = func.name.value if isinstance(func, cst.FunctionDef) else "<module>"
        key = "%s|%s|%s" % (where, before, after)
        seen[key] = seen.get(key, 0) + 1
        mid = hashlib.sha1(("%s|%d" % (key, seen[key])).encode()).hexdigest()[:10]
        pos = positions.get(m.original_node)
        line = pos.start.line if pos else 0
        desc = "%s: %s  ->  %s" % (where, _short(before), _short(after))
        yield mid, line, desc, (lambda m=m: deep_replace(module, m.original_node,
                                                          m.mutated_node).code)


def _skipped(m) -> bool:
    """Prose strings, and the upper/lower-case variants of a string (its XX..XX mutant stays)."""
    import libcst as cst
    if isinstance(m.original_node, cst.SimpleString):
        if any(c.isspace() for c in m.original_node.evaluated_value):
            return True
        mutated = m.mutated_node.evaluated_value
        return not (isinstance(mutated, str) and mutated.startswith("XX"))
    return False


def _short(s: str, n: int = 90) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n - 3] + "..."


class _Runner:
    """Runs the tests in a forked child of a process that has already imported pytest and the
    third-party modules the tests use, so that a mutant costs a fork and the project's own
    imports, not a fresh interpreter. The project's modules are dropped before each fork, so each
    child imports the (mutated) files anew."""

    def __init__(self, copy: Path, tests):
        self.copy, self.tests = copy, list(tests)
        os.chdir(str(copy))
        sys.path.insert(0, str(copy))
        os.environ["PYTHONPATH"] = str(copy)
        # the installed pytest plugins are not needed and loading them costs seconds per mutant
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        import pytest  # noqa: F401 - warmed for the children
        try:
            import tests.conftest  # noqa: F401 - warms the test dependencies
        except Exception:  # noqa: BLE001 - a child reports the same failure as a test failure
            pass
        self._forget()
        sys.dont_write_bytecode = True  # the unmutated modules' bytecode stays; a mutant has none

    def mutate(self, target: Path, source: str) -> None:
        """Write ``source`` to ``target`` and drop its cached bytecode."""
        target.write_text(source)
        for pyc in (target.parent / "__pycache__").glob(target.stem + ".*.pyc"):
            pyc.unlink()

    def _forget(self):
        root = str(self.copy)
        for name, mod in list(sys.modules.items()):
            if (getattr(mod, "__file__", None) or "").startswith(root) or \
                    name.split(".")[0] in ("potato", "tests"):
                del sys.modules[name]

    def run(self, timeout: float):
        """('passed'|'failed'|'timeout', seconds)."""
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: its own process group, quiet, exits with pytest's status
            rc = 3
            try:
                os.setpgid(0, 0)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                import pytest
                rc = int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                                      *self.tests]))
            finally:
                os._exit(rc)
        deadline = start + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                return ("passed" if rc == 0 else "failed"), time.monotonic() - start
            if time.monotonic() > deadline:
                try:
                    os.killpg(pid, 9)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                return "timeout", time.monotonic() - start
            time.sleep(0.02)


def _copy_project(dest: Path) -> None:
    skip = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", "mutants", ".venv", "build",
                                  "*.egg-info", "test-output", "annotation_output")
    for name in os.listdir(ROOT):
        src = ROOT / name
        if name in (".git", "mutants", ".venv", "build", "test-output", "annotation_output"):
            continue
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=skip, symlinks=True)
        else:
            shutil.copy2(src, dest / name)


def run_module(rel: str, budget: float, per_mutant: float, verbose: bool, part=None) -> dict:
    tests = MODULES[rel]
    missing = [t for t in tests if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        return {"module": rel, "error": "tests not found: %s" % ", ".join(missing)}
    todo = list(mutants(ROOT / rel))
    if part:  # (first, last), 1-based: a long module run in parts
        todo = todo[part[0] - 1:part[1]]
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="potato-mutation-") as tmp:
        copy = Path(tmp)
        _copy_project(copy)
        try:
            runner = _Runner(copy, tests)
            outcome, took = runner.run(per_mutant * 5)
            if outcome != "passed":
                return {"module": rel, "error": "the tests fail (%s) before any mutation: %s"
                        % (outcome, " ".join(tests))}
            limit = min(per_mutant, max(10.0, took * 4))
            print("%s: %d mutants, tests %s (%.1fs clean, limit %.0fs each)"
                  % (rel, len(todo), " ".join(tests), took, limit), flush=True)
            return _run_mutants(rel, runner, copy / rel, todo, budget, limit, verbose)
        finally:
            os.chdir(here)
            sys.path.remove(str(copy))


def _run_mutants(rel, runner, target, todo, budget, limit, verbose) -> dict:
    equivalent = EQUIVALENT.get(rel, {})
    original = target.read_text()
    counts = {"killed": 0, "survived": 0, "timeout": 0, "equivalent": 0, "not_run": 0}
    survivors = []
    start = time.monotonic()
    try:
        for n, (mid, line, desc, build) in enumerate(todo, 1):
            if n % 50 == 0:
                print("  %d/%d mutants, %d survived so far (%ds)" % (
                    n, len(todo), counts["survived"], time.monotonic() - start), flush=True)
            if mid in equivalent:
                counts["equivalent"] += 1
                continue
            if time.monotonic() - start > budget:
                counts["not_run"] += 1
                continue
            runner.mutate(target, build())
            status, _ = runner.run(limit)
            runner.mutate(target, original)
            kind = {"failed": "killed", "passed": "survived", "timeout": "timeout"}[status]
            counts[kind] += 1
            if kind == "survived":
                survivors.append({"id": mid, "line": line, "mutant": desc})
                if verbose:
                    print("  survived %s line %d  %s" % (mid, line, desc), flush=True)
    finally:
        runner.mutate(target, original)
    caught = counts["killed"] + counts["timeout"]
    ran = caught + counts["survived"]
    return {"module": rel, "tests": runner.tests, **counts, "total": len(todo),
            "score": round(100.0 * caught / ran, 1) if ran else None,
            "seconds": round(time.monotonic() - start), "survivors": survivors}


def _pick(name: str) -> str:
    if name in MODULES:
        return name
    hits = [m for m in MODULES if Path(m).stem == name or m.endswith("/" + name)]
    if len(hits) != 1:
        sys.exit("tools/mutation.py: no single listed module matches %r; listed: %s"
                 % (name, ", ".join(MODULES)))
    return hits[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append",
                    help="a listed module (path or file stem); repeatable")
    ap.add_argument("--budget", type=float, default=MODULE_BUDGET_S, help="seconds per module")
    ap.add_argument("--per-mutant", type=float, default=PER_MUTANT_S,
                    help="seconds per mutant at most")
    ap.add_argument("--out", default=str(ROOT / "test-output" / "mutation.json"))
    ap.add_argument("--show-survivors", action="store_true", help="print each survivor as found")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--part", help="FIRST-LAST: only these mutants (1-based, as --list counts)")
    args = ap.parse_args(argv)
    try:
        import mutmut
    except ImportError:
        sys.exit("tools/mutation.py: mutmut is not installed; run: pip install -e '.[mutation]'")
    chosen = [_pick(m) for m in args.module] if args.module else list(MODULES)
    if args.list:
        for rel in chosen:
            for mid, line, desc, _ in mutants(ROOT / rel):
                print("%s %s:%d %s" % (mid, rel, line, desc))
        return 0
    results = []
    for rel in chosen:
        part = tuple(int(x) for x in args.part.split("-")) if args.part else None
        r = run_module(rel, args.budget, args.per_mutant, args.show_survivors, part)
        results.append(r)
        if "error" in r:
            print("%s: NOT RUN: %s" % (rel, r["error"]), flush=True)
            continue
        print("%s: score %s%% (killed %d, timeout %d, survived %d, equivalent %d, not run %d; %ds)"
              % (rel, r["score"], r["killed"], r["timeout"], r["survived"], r["equivalent"],
                 r["not_run"], r["seconds"]), flush=True)
        for s in r["survivors"]:
            print("  survived %s line %d  %s" % (s["id"], s["line"], s["mutant"]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"tool": "mutmut %s" % _version(), "date": time.strftime("%Y-%m-%d"),
                               "results": results}, indent=1))
    print("written: %s" % out)
    low = [r for r in results if "error" in r or (r["score"] or 0) < 90 or r["not_run"]]
    return 1 if low else 0


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("mutmut")
    except Exception:  # noqa: BLE001 - only a label in the report
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
