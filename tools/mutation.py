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
    "potato/training/intake.py": ["tests/test_mut_intake.py"],
    "potato/training/choice.py": ["tests/test_run_keeping.py"],
    "potato/training/autoretrain.py": ["tests/test_mut_autoretrain.py"],
    "potato/training/ingest.py": ["tests/test_mut_writeback.py"],
    "potato/training/report.py": ["tests/test_mut_report.py"],
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
    "potato/training/report_ratings.py": ["tests/test_mut_report.py"],
}

# module -> {mutant id: why it cannot change behaviour}. Ids are printed with each survivor.
EQUIVALENT = {
    "potato/training/boundary.py": {
        "812e8b5316": "_progress: dropping hi=BIG from number() keeps its default, hi=BIG",
        "3cb6a4c1e0": "_progress: dropping hi=BIG from number() keeps its default, hi=BIG",
        "c2fbfbc9da": "_metric: dropping hi=BIG from number() keeps its default, hi=BIG",
        "0a1024bb1b": "_artifact: dropping hi=BIG from number() keeps its default, hi=BIG",
    },
    "potato/training/intake.py": {
        "04c8c75bd9": "__call__: events.jsonl's line is json.dumps' (non-ASCII escaped): "
                      "every locale encoding writes the same bytes, with or without utf-8",
        "cf51f13edb": "__call__: events.jsonl's line is json.dumps' (non-ASCII escaped): "
                      "every locale encoding writes the same bytes, with or without utf-8",
        "a7409d9579": "record: a log event from boundary.event always has its level (info by "
                      "default), so the default here is never read",
        "bc0e04aac4": "record: a log event from boundary.event always has its level (info by "
                      "default), so the default here is never read",
        "6aa5a1e516": "record: a log event from boundary.event always has its level (info by "
                      "default), so the default here is never read",
        "3586068fa9": "record: a log event (always a level, never a kind) reads the same "
                      "through run_texts.worker_error_line: level: message",
    },
    "potato/training/report.py": {
        "d0db7592c3": "scheme_report: above_baseline is the difference of two values already "
                      "rounded to 4 places: rounding it to 4 or to 5 places gives the same float",
        "3571556a1f": "_baseline: most_common(n)[0] is the same pair for any n (and None): "
                      "Counter sorts the same way for each, ties in first-seen order",
        "8287bf60df": "_baseline: most_common(n)[0] is the same pair for any n (and None): "
                      "Counter sorts the same way for each, ties in first-seen order",
    },
    "potato/training/report_ratings.py": {
        "d65835a938": "_ranks: every slot of the list is assigned in the loop (order is a "
                      "permutation of its indices), so its initial value is never read",
        "31a72ce23b": "spearman: sum((a + mx)(b - my)) = sum(a(b - my)) + mx * sum(b - my), "
                      "and sum(b - my) = 0: the same sum (to the last bit's rounding)",
        "e2343cb16c": "spearman: sum((a - mx)(b + my)) = sum((a - mx)b) + my * sum(a - mx), "
                      "and sum(a - mx) = 0: the same sum (to the last bit's rounding)",
        "ed540ea9d5": "number_report: mae_below_baseline is the difference of two values "
                      "already rounded to 4 places: rounding it to 4 or to 5 places gives the "
                      "same float",
    },
    "potato/training/remote/proc.py": {
        "5e2b5375db": "run: stdin always a pipe: with no input communicate() closes it at once, "
                      "so the child reads end of file, as from DEVNULL",
    },
    "potato/markup.py": {
        "3ecbfa773a": "esc: dropping quote=True from html.escape keeps its default, quote=True",
    },
}

# modules whose tests run them in subprocesses too (a worker, an agent, a job), where the
# tracer cannot see which lines ran: a mutant with no traced coverage still runs all their tests
SUBPROCESS = {"potato/training/remote/supervise.py", "potato/training/remote/client.py",
              "potato/training/remote/slurm_job.py"}

PER_MUTANT_S = 60  # a mutant whose tests take longer than this (an endless loop) is a timeout
MODULE_BUDGET_S = 900  # past this a module's remaining mutants are not run (reported as such)


def mutants(path: Path):
    """One dict per mutant mutmut makes of ``path``: id, line, desc, build (-> the mutated
    source), scope (the qualname of the outermost function whose body holds the mutant, or None
    when it is evaluated at import) and lines (the first and last line of the statement that
    holds it: a test that ran none of them cannot see the mutant)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider
    from mutmut.mutation.file_mutation import create_mutations, deep_replace

    code = path.read_text()
    here = os.getcwd()
    os.chdir(ROOT)  # mutmut reads its [mutmut] settings from setup.cfg in the working directory
    try:
        module, found, _, _ = create_mutations(str(path), code)
    finally:
        os.chdir(here)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
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
        scope, lines = _place(m.original_node, parents, positions, line)
        yield {"id": mid, "line": line, "desc": desc, "scope": scope, "lines": lines,
               "build": (lambda m=m: deep_replace(module, m.original_node,
                                                   m.mutated_node).code)}


def _place(node, parents, positions, line):
    """(scope, (first, last line of the innermost statement)) of a mutated node; see mutants."""
    import libcst as cst
    chain = []  # node, its parent, ..., the module
    while node is not None:
        chain.append(node)
        node = parents.get(node)
    stmt = next((n for n in chain if isinstance(n, (cst.BaseSmallStatement,
                                                    cst.BaseCompoundStatement))), None)
    pos = positions.get(stmt) if stmt is not None else None
    lines = (pos.start.line, pos.end.line) if pos else (line, line)
    funcs = [i for i, n in enumerate(chain) if isinstance(n, cst.FunctionDef)]
    if not funcs:
        return None, lines
    top = funcs[-1]  # the outermost function: its body runs at each call, the rest at import
    if top == 0 or chain[top - 1] is not chain[top].body:
        return None, lines
    names = [n.name.value for n in chain[top:] if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    if any(isinstance(n, cst.FunctionDef) for n in chain[top + 1:]):
        return None, lines
    return ".".join(reversed(names)), lines


def _skipped(m) -> bool:
    """Prose strings, and the upper/lower-case variants of a string (its XX..XX mutant stays)."""
    import libcst as cst
    if isinstance(m.original_node, cst.SimpleString):
        value = m.original_node.evaluated_value  # bytes for a b"..." literal
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if any(c.isspace() for c in value):
            return True
        mutated = m.mutated_node.evaluated_value
        if isinstance(mutated, bytes):
            mutated = mutated.decode("latin-1")
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
        self.copy, self.tests = copy, list(tests)  # run_module has made copy the working dir
        import pytest  # noqa: F401 - warmed for the children
        try:
            import tests.conftest  # noqa: F401 - warms the test dependencies
        except Exception:  # noqa: BLE001 - a child reports the same failure as a test failure
            pass
        _forget(copy)
        sys.dont_write_bytecode = True  # the unmutated modules' bytecode stays; a mutant has none

    mutate = staticmethod(lambda target, source: _write(target, source))

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


def _forget(copy: Path) -> None:
    """Drop the project's and the tests' modules, so that the next import reads the files."""
    for name, mod in list(sys.modules.items()):
        if (getattr(mod, "__file__", None) or "").startswith(str(copy)) or \
                name.split(".")[0] in ("potato", "tests"):
            del sys.modules[name]


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


class _Tally:
    """What each mutant came to, the progress lines, and the module's time budget."""

    def __init__(self, rel, todo, budget, verbose):
        self.rel, self.total, self.budget, self.verbose = rel, len(todo), budget, verbose
        self.verdicts, self.survivors, self.done = {}, [], 0
        self.start = time.monotonic()

    def over_budget(self) -> bool:
        return time.monotonic() - self.start > self.budget

    def report(self, entry, kind):
        self.verdicts[entry["id"]] = kind
        self.done += 1
        if kind in ("survived", "no_coverage"):
            self.survivors.append({"id": entry["id"], "line": entry["line"],
                                   "mutant": entry["desc"], "why": kind})
            if self.verbose:
                _say("  %s %s line %d  %s" % (kind, entry["id"], entry["line"], entry["desc"]))
        if self.done % 50 == 0:
            _say("  %d/%d mutants, %d survived so far (%ds)" % (
                self.done, self.total, len(self.survivors), time.monotonic() - self.start))


class _Fast:
    """What tools/mutation_fork.ForkPlugin needs from the driver."""

    def __init__(self, rel, copy, todo, tally, per_mutant):
        self.rel, self.todo, self.tally, self.per_mutant = rel, todo, tally, per_mutant
        self.path = copy / rel
        self.target = str(self.path)
        self.modname = rel[:-3].replace("/", ".")
        self.original = self.path.read_text()
        self.subprocess = rel in SUBPROCESS
        self.tmp = copy
        self.over_budget, self.report = tally.over_budget, tally.report

    def scratch(self, name):
        return str(self.tmp / name)

    def started(self, clean):
        took = sum(t for t, _ in clean.values())
        _say("%s: %d mutants, tests %s (%d tests, %.1fs clean)" % (
            self.rel, self.tally.total, " ".join(MODULES[self.rel]), len(clean), took))

    def write(self, source):
        _write(self.path, source)

    def restore(self):
        _write(self.path, self.original)


_OUT = None  # the real stdout while pytest's report goes to /dev/null


def _say(text: str) -> None:
    print(text, file=_OUT or sys.stdout, flush=True)


def _write(target: Path, source: str) -> None:
    """Write ``source`` to ``target`` and drop its cached bytecode."""
    target.write_text(source)
    for pyc in (target.parent / "__pycache__").glob(target.stem + ".*.pyc"):
        pyc.unlink()


def run_module(rel: str, budget: float, per_mutant: float, verbose: bool, part=None,
               slow_only=False, ids=None) -> dict:
    tests = MODULES[rel]
    missing = [t for t in tests if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        return {"module": rel, "error": "tests not found: %s" % ", ".join(missing)}
    todo = list(mutants(ROOT / rel))
    if part:  # (first, last), 1-based: a long module run in parts
        todo = todo[part[0] - 1:part[1]]
    if ids:
        todo = [e for e in todo if e["id"] in ids]
    tally = _Tally(rel, todo, budget, verbose)
    equivalent = EQUIVALENT.get(rel, {})
    for e in todo:
        if e["id"] in equivalent:
            tally.verdicts[e["id"]] = "equivalent"
    todo = [e for e in todo if e["id"] not in equivalent]
    fast = [] if slow_only else [e for e in todo if e["scope"]]
    slow = [e for e in todo if not e["scope"] or slow_only]
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="potato-mutation-") as tmp:
        copy = Path(tmp)
        _copy_project(copy)
        os.chdir(str(copy))
        sys.path.insert(0, str(copy))
        os.environ["PYTHONPATH"] = str(copy)
        # the installed pytest plugins are not needed and loading them costs seconds
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        try:
            if fast:
                error = _run_fast(rel, copy, fast, tally, per_mutant, slow)
                if error:
                    return {"module": rel, "error": error}
            if slow:
                error = _run_slow(rel, copy, slow, tally, per_mutant)
                if error:
                    return {"module": rel, "error": error}
        finally:
            _forget(copy)
            sys.dont_write_bytecode = False
            os.chdir(here)
            sys.path.remove(str(copy))
    return _result(rel, tests, tally, len(fast), len(slow))


def _run_fast(rel, copy, todo, tally, per_mutant, slow):
    """The fast path (tools/mutation_fork.py); mutants it cannot swap in join ``slow``."""
    global _OUT
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mutation_fork
    finally:
        sys.path.remove(str(ROOT / "tools"))
    import pytest
    plugin = mutation_fork.ForkPlugin(_Fast(rel, copy, todo, tally, per_mutant))
    saved = os.dup(1), os.dup(2)
    try:  # pytest's own report of the (unrun) session is not wanted
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        _OUT = os.fdopen(os.dup(saved[0]), "w", buffering=1)
        pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", *MODULES[rel]],
                    plugins=[plugin])
    finally:
        _OUT.close()
        _OUT = None
        os.dup2(saved[0], 1)
        os.close(saved[0])
        os.close(saved[1])
    if isinstance(plugin.clean, str) or plugin.clean is None:
        return plugin.clean or "pytest did not run (%s)" % " ".join(MODULES[rel])
    for e in todo:
        kind = plugin.results.get(e["id"])
        if kind == "not_run":
            tally.verdicts[e["id"]] = kind
    slow.extend(plugin.slow)
    return None


def _run_slow(rel, copy, todo, tally, per_mutant):
    """Mutants evaluated at import: a fresh import of the project per mutant (_Runner)."""
    runner = _Runner(copy, MODULES[rel])
    outcome, took = runner.run(per_mutant * 5)
    if outcome != "passed":
        return "the tests fail (%s) before any mutation: %s" % (outcome, " ".join(MODULES[rel]))
    limit = min(per_mutant, max(10.0, took * 4))
    print("%s: %d mutants on the slow path (fresh import each; %.1fs clean, limit %.0fs)"
          % (rel, len(todo), took, limit), flush=True)
    target = copy / rel
    original = target.read_text()
    try:
        for e in todo:
            if tally.over_budget():
                tally.verdicts[e["id"]] = "not_run"
                continue
            runner.mutate(target, e["build"]())
            status, _ = runner.run(limit)
            runner.mutate(target, original)
            tally.report(e, {"failed": "killed", "passed": "survived", "timeout": "timeout"}[status])
    finally:
        runner.mutate(target, original)
    return None


def _result(rel, tests, tally, n_fast, n_slow) -> dict:
    counts = {k: 0 for k in ("killed", "survived", "no_coverage", "timeout", "equivalent",
                             "not_run")}
    for kind in tally.verdicts.values():
        counts[kind] += 1
    caught = counts["killed"] + counts["timeout"]
    ran = caught + counts["survived"] + counts["no_coverage"]
    seconds = time.monotonic() - tally.start
    return {"module": rel, "tests": tests, **counts, "total": tally.total,
            "score": round(100.0 * caught / ran, 1) if ran else None,
            "seconds": round(seconds), "per_mutant_s": round(seconds / ran, 2) if ran else None,
            "fast": n_fast, "slow": n_slow, "survivors": tally.survivors,
            "verdicts": tally.verdicts}


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
    ap.add_argument("--id", action="append",
                    help="only this mutant (an id as --list prints it); repeatable")
    ap.add_argument("--slow", action="store_true",
                    help="every mutant on the slow path (a fresh import each): the reference "
                         "the fast path is checked against")
    args = ap.parse_args(argv)
    try:
        import mutmut
    except ImportError:
        sys.exit("tools/mutation.py: mutmut is not installed; run: pip install -e '.[mutation]'")
    chosen = [_pick(m) for m in args.module] if args.module else list(MODULES)
    if args.list:
        for rel in chosen:
            for e in mutants(ROOT / rel):
                print("%s %s:%d %s%s" % (e["id"], rel, e["line"], e["desc"],
                                         "" if e["scope"] else "  [at import]"))
        return 0
    results = []
    for rel in chosen:
        part = tuple(int(x) for x in args.part.split("-")) if args.part else None
        r = run_module(rel, args.budget, args.per_mutant, args.show_survivors, part, args.slow,
                       args.id)
        results.append(r)
        if "error" in r:
            print("%s: NOT RUN: %s" % (rel, r["error"]), flush=True)
            continue
        print("%s: score %s%% (killed %d, timeout %d, survived %d, no coverage %d, equivalent %d,"
              " not run %d; %ds, %s s a mutant; %d fast, %d slow)"
              % (rel, r["score"], r["killed"], r["timeout"], r["survived"], r["no_coverage"],
                 r["equivalent"], r["not_run"], r["seconds"], r["per_mutant_s"], r["fast"],
                 r["slow"]), flush=True)
        for s in r["survivors"]:
            print("  %s %s line %d  %s" % (s["why"], s["id"], s["line"], s["mutant"]))
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
