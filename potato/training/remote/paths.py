"""``RunPaths``: the one owner of a run directory's file names, and atomic writes.

A run directory holds::

    spec.json          what to train (written by the server, read by the worker)
    bundle/            items, labels, splits and manifest (see bundle.py)
    artifacts/         model files the trainer saved
    events.jsonl       every event the worker emitted, as received
    predictions.jsonl  the worker's predictions on val, test and unlabeled items
    run.log            a human-readable log of the run
    stderr.log         the worker's standard error
    agent.log          the remote agent's own output (remote backends)
    media.json         a remote run's media files by sha256 (server side: what the run's agent
                       may download, and where each is here; training/media_bundle.py)
    result.json        the agent's result, kept by the server once it has answered it (so a
                       restart between the result and the run's end does not lose it)
    job.sh, slurm.out, exit_code   a SLURM job's script, SLURM's output, the worker's status

Standard library only: the worker and the agent use it on remote hosts too.
"""

import json
import os
import tempfile


def write_atomic(path, data):
    """Write bytes or text to ``path`` through a temp file and a rename: never half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path, obj):
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class RunPaths:
    # The names a spec gives relative to its run directory (the worker joins them to it).
    SPEC_NAMES = {"bundle": "bundle", "artifacts": "artifacts",
                  "predictions": "predictions.jsonl"}

    def __init__(self, root):
        self.root = os.path.abspath(root)

    @classmethod
    def in_spec(cls, base, spec, name):
        """The path a spec gives for ``name`` (bundle, artifacts, predictions), joined to the
        directory ``base`` the spec lies in (the worker's view of its run directory)."""
        return os.path.join(base, spec.get(name) or cls.SPEC_NAMES[name])

    @property
    def spec(self):
        return os.path.join(self.root, "spec.json")

    @property
    def bundle(self):
        return os.path.join(self.root, "bundle")

    @property
    def bundle_items(self):
        return os.path.join(self.bundle, "items.jsonl")

    @property
    def heldout(self):
        """The test split's human labels, kept on the server for a remote run (never shipped)."""
        return os.path.join(self.root, "heldout.jsonl")

    @property
    def bundle_archive(self):
        return os.path.join(self.root, "bundle.tar.gz")

    @property
    def artifacts(self):
        return os.path.join(self.root, "artifacts")

    @property
    def events(self):
        return os.path.join(self.root, "events.jsonl")

    @property
    def predictions(self):
        return os.path.join(self.root, "predictions.jsonl")

    @property
    def log(self):
        return os.path.join(self.root, "run.log")

    @property
    def stderr(self):
        return os.path.join(self.root, "stderr.log")

    @property
    def agent_log(self):
        return os.path.join(self.root, "agent.log")

    @property
    def media_index(self):
        return os.path.join(self.root, "media.json")

    @property
    def result(self):
        return os.path.join(self.root, "result.json")

    @property
    def exit_code(self):
        return os.path.join(self.root, "exit_code")

    @property
    def job_script(self):
        return os.path.join(self.root, "job.sh")

    @property
    def slurm_out(self):
        return os.path.join(self.root, "slurm.out")

    def create(self):
        """The run directory and its artifacts/, private to this account (0700)."""
        os.makedirs(self.artifacts, mode=0o700, exist_ok=True)
        for d in (self.root, self.artifacts):
            os.chmod(d, 0o700)
        return self
