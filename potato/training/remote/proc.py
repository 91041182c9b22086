"""The one helper that runs a tool (ssh, sbatch, ...) to completion with a deadline."""

import subprocess
from typing import List, Optional


class Completed:
    def __init__(self, argv, returncode, stdout, stderr, timed_out=False):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out

    def stderr_tail(self, lines: int = 5) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


def run(argv: List[str], input_bytes: Optional[bytes] = None, timeout: float = 120,
        env=None) -> Completed:
    """Run ``argv``; stdout and stderr are captured as text. Killed after ``timeout`` seconds."""
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if input_bytes is not None
                             else subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
    except FileNotFoundError:
        return Completed(argv, 127, "", "%s: command not found" % argv[0])
    try:
        out, err = p.communicate(input_bytes, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        timed_out = True
    return Completed(argv, p.returncode, out.decode("utf-8", "replace"),
                     err.decode("utf-8", "replace"), timed_out)
