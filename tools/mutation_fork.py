"""The fast path of tools/mutation.py: import and collect once, fork a child per mutant.

A pytest plugin. ``pytest.main`` in the driver's process imports the project and collects the
module's tests once; ``pytest_runtestloop`` then

1. runs every collected test once in a forked child under ``sys.settrace`` (all threads),
   recording which lines of the target module each test executes and how long it takes;
2. for each mutant, writes the mutated file into the scratch copy (for subprocesses that import
   it), forks a child that swaps the mutated code object into the already-imported function
   (``func.__code__ = ...``: every reference to the function, ``from x import f`` included, is
   the same object) and runs only the tests that executed the mutated statement, fastest
   first, stopping at the first failure.

Only mutants inside a function's body take this path: a changed default, decorator, class
attribute or module-level value is evaluated at import, so those go to the slow path (a fresh
import in a forked child, tools/mutation.py's ``_Runner``). A mutant whose statement no mapped
test executes is a *no coverage* survivor, unless the module is run in subprocesses by its
tests (``subprocess=True``), where the tracer cannot see it: then all mapped tests run.

Each child is forked from the same state (imported, collected, nothing run), so what one test
run leaves behind (a filled cache, a module-level counter) never reaches the next mutant.
"""

import json
import os
import sys
import time
import types

import pytest


def code_objects(code):
    """``code`` and every code object nested in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def runtime_functions(module, filename: str, qualname: str):
    """The function objects of ``module`` (top level, methods of its classes, unwrapped) whose
    code is ``qualname`` in ``filename``."""
    found, seen = [], set()

    def visit(obj, depth=0):
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        while hasattr(obj, "__wrapped__") and not isinstance(obj, type):
            visit_func(obj)
            obj = obj.__wrapped__
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    visit(f, depth + 1)
            return
        if hasattr(obj, "func") and callable(getattr(obj, "func")) and \
                not isinstance(obj, type):  # functools.cached_property, partial
            visit(obj.func, depth + 1)
        if isinstance(obj, types.FunctionType):
            visit_func(obj)
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for value in list(vars(obj).values()):
                visit(value, depth + 1)

    def visit_func(f):
        code = getattr(f, "__code__", None)
        if code is not None and code.co_filename == filename and code.co_qualname == qualname \
                and f not in found:
            found.append(f)

    for value in list(vars(module).values()):
        visit(value)
    return found


class ForkPlugin:
    """Runs ``todo`` (fast mutants) after collection; results in ``self.results``."""

    def __init__(self, driver):
        self.d = driver  # tools/mutation.py's _Fast: target, todo, limits, report()
        self.failed = False
        self.results = {}
        self.slow = []  # mutants that turned out to need a fresh import
        self.clean = None  # {nodeid: (seconds, [lines])} of the clean run, or an error text

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        if session.testsfailed:
            self.clean = "the tests do not collect"
            return True
        items = list(session.items)
        self.clean = self._coverage(items)
        if isinstance(self.clean, str):
            return True
        self.d.started(self.clean)
        module = sys.modules.get(self.d.modname)
        for entry in self.d.todo:
            if self.d.over_budget():
                self.results[entry["id"]] = "not_run"
                continue
            self.results[entry["id"]] = self._one(entry, items, module)
            self.d.report(entry, self.results[entry["id"]])
        return True

    def _one(self, entry, items, module):
        source = entry["build"]()
        funcs = self._swap_plan(entry, source, module)
        if funcs is None:
            self.slow.append(entry)
            return "slow"
        lo, hi = entry["lines"]
        chosen = [i for i in items if any(lo <= n <= hi for n in self.clean[i.nodeid][1])]
        if not chosen:
            if not self.d.subprocess:
                return "no_coverage"
            chosen = items
        chosen.sort(key=lambda i: self.clean[i.nodeid][0])
        took = sum(self.clean[i.nodeid][0] for i in chosen)
        limit = min(self.d.per_mutant, max(10.0, took * 4 + 5))
        self.d.write(source)
        try:
            status = self._fork(lambda: self._swap_and_run(funcs, chosen), limit)
        finally:
            self.d.restore()
        return {"passed": "survived", "failed": "killed", "timeout": "timeout"}[status]

    def _swap_plan(self, entry, source, module):
        """[(function, new code)] for a mutant inside a function body, or None (slow path)."""
        qual = entry.get("scope")
        if not qual or module is None:
            return None
        filename = module.__file__
        try:
            compiled = compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError:
            return None  # the slow path reports it as killed, as an import error would be
        codes = [c for c in code_objects(compiled) if c.co_qualname == qual]
        funcs = runtime_functions(module, filename, qual)
        if len(codes) != 1 or not funcs:
            return None
        if any(len(f.__code__.co_freevars) != len(codes[0].co_freevars) for f in funcs):
            return None
        return [(f, codes[0]) for f in funcs]

    def _swap_and_run(self, funcs, chosen):
        for f, code in funcs:
            f.__code__ = code
        return self._run(chosen)

    def _run(self, chosen, trace=None):
        for n, item in enumerate(chosen):
            nxt = chosen[n + 1] if n + 1 < len(chosen) else None
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nxt)
            if self.failed:
                return 1
        return 0

    def _coverage(self, items):
        """Runs every test once, traced, in a child: {nodeid: (seconds, lines)} or an error."""
        out = self.d.scratch("coverage.json")
        target = self.d.target

        def child():
            lines = set()

            def local(frame, event, arg):
                if event == "line":
                    lines.add(frame.f_lineno)
                return local

            def glob(frame, event, arg):
                if frame.f_code.co_filename == target:
                    lines.add(frame.f_lineno)
                    return local
                return None

            import threading
            result = {}
            for n, item in enumerate(items):
                lines.clear()
                start = time.monotonic()
                threading.settrace(glob)
                sys.settrace(glob)
                try:
                    item.ihook.pytest_runtest_protocol(
                        item=item, nextitem=items[n + 1] if n + 1 < len(items) else None)
                finally:
                    sys.settrace(None)
                    threading.settrace(None)
                result[item.nodeid] = (time.monotonic() - start, sorted(lines))
                if self.failed:
                    result = {"failed": item.nodeid}
                    break
            with open(out, "w") as f:
                json.dump(result, f)
            return 0

        status = self._fork(child, self.d.per_mutant * 10)
        try:
            with open(out) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return "the clean run ended %s without a result" % status
        if "failed" in data:
            return "the tests fail before any mutation (%s)" % data["failed"]
        return data

    def _fork(self, body, timeout):
        """Runs ``body()`` in a forked child (own process group, output dropped):
        'passed' (it returned 0), 'failed' or 'timeout'."""
        pid = os.fork()
        if pid == 0:
            rc = 3
            try:
                os.setpgid(0, 0)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                rc = body()
            finally:
                os._exit(rc)
        deadline = time.monotonic() + timeout
        status = None
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = "passed" if os.waitstatus_to_exitcode(raw) == 0 else "failed"
            elif time.monotonic() > deadline:
                status = "timeout"
                _kill(pid)
                os.waitpid(pid, 0)
            else:
                time.sleep(0.005)
        _kill(pid)  # whatever the tests left in the child's group
        return status


def _kill(pgid):
    try:
        os.killpg(pgid, 9)
    except (ProcessLookupError, PermissionError):
        pass
