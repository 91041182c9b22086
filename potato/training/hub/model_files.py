"""A run's model files for the admin: one tar archive streamed from the run's artifacts, and the
few lines of Python that load them. Only files on this server are offered (a run whose files
stayed on its host names where they are instead)."""

import json
import logging
import os
import tarfile
from typing import Callable, List, Optional, Tuple

from potato.markup import Safe, join, render
from potato.training.remote import trainers
from potato.training.core.runs import Run
from potato.training.core.view import RunView

log = logging.getLogger(__name__)

FILES_MAX = 10000  # a run's page lists (and an archive holds) at most this many files
BLOCK, RECORD = 512, 10240  # tar's block and record sizes


class ArchiveChanged(Exception):
    """A model file changed while its archive was being sent (the connection is closed short
    of its Content-Length, so the client sees an incomplete download, never a tidy one)."""


def files(directory: Optional[str]) -> List[str]:
    """The regular files under ``directory`` (relative paths, sorted; at most FILES_MAX);
    links are left out."""
    if not directory or not os.path.isdir(directory):
        return []
    out: List[str] = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                out.append(os.path.relpath(path, directory))
            if len(out) >= FILES_MAX:
                return sorted(out)
    return sorted(out)


def shown(name: str) -> str:
    """A file name as a page can show it (a name that is not UTF-8 gets \\x escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def archive_name(run_id: str) -> str:
    return "%s-model.tar" % run_id


class Archive:
    """A tar of the files under a directory (as ``top/...``), planned first so that its exact
    size is known (sent as Content-Length), then written. Uncompressed: model weights do not
    compress, and the download starts at once."""

    def __init__(self, directory: str, top: str):
        self.members: List[Tuple[str, bytes, int]] = []
        for rel in files(directory):
            path = os.path.join(directory, rel)
            try:
                st = os.stat(path)
            except OSError:
                continue  # gone since it was listed
            info = tarfile.TarInfo("%s/%s" % (top, rel))
            info.size, info.mtime, info.mode = st.st_size, int(st.st_mtime), 0o644
            header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
            self.members.append((path, header, st.st_size))
        body = sum(len(h) + _padded(size) for _, h, size in self.members) + 2 * BLOCK
        self.size = -(-body // RECORD) * RECORD

    def write(self, out) -> None:
        written = 0
        for path, header, size in self.members:
            out.write(header)
            try:
                f = open(path, "rb")
            except OSError as e:
                raise ArchiveChanged("%s could not be read: %s" % (path, e))
            with f:
                left = size
                while left > 0:
                    block = f.read(min(left, 1 << 20))
                    if not block:
                        raise ArchiveChanged("%s shrank while it was sent" % path)
                    out.write(block)
                    left -= len(block)
            out.write(b"\0" * (_padded(size) - size))
            written += len(header) + _padded(size)
        out.write(b"\0" * (self.size - written))


def writer(archive: "Archive", run_id: str, h) -> Callable:
    """``archive.write`` for ``send_stream``: a file changed while it was sent ends the
    connection short of Content-Length (the client sees an incomplete download) with one log
    line, not a traceback."""
    def write(out) -> None:
        try:
            archive.write(out)
        except ArchiveChanged as e:
            log.warning("run %s: model.tar cut short: %s", run_id, e)
            h.close_connection = True
    return write


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def load_code(run: Run) -> str:
    """The Python that loads the run's unpacked archive (its trainer's ``load_code``, with the
    archive unpacked in the current directory), or "" for a trainer without one."""
    info = trainers.get(run.trainer) if isinstance(run.trainer, str) else None
    if info is None:
        return ""
    params = run.params if isinstance(run.params, dict) else {}
    top = "%s-model" % run.run_id
    return trainers.fill_load_code(info.load_template(params), top + "/model",
                                   lambda rel: json.dumps("%s/%s" % (top, rel)),
                                   str(run.schemas[0]) if run.schemas else "SCHEME")


def model_files_cell(view: RunView, where: str, here: List[str], code: str) -> Safe:
    """Where the model files are; when they are on this server and the run succeeded: the
    download link, the list of files, and the Python that loads them."""
    if view.status != "success" or not here:
        return render("{w}", w=where)
    size = "%d file%s" % (len(here), "" if len(here) == 1 else "s")
    load = render('<p class="hint">Unpack it, then load it in Python:</p><pre class="load-code">'
                  '<code>{c}</code></pre>', c=code) if code else Safe("")
    return render('<a class="download" id="model-download" href="/admin/training/runs/{id}/'
                  'model.tar" download>Download the model ({size}, one .tar archive)</a>'
                  '<details><summary>files</summary><ul>{files}</ul></details>{load}'
                  '<p class="hint">On the server: <code>{where}</code></p>', id=view.run_id,
                  size=size, files=join(render("<li><code>{f}</code></li>", f=shown(f))
                                        for f in here[:200]), load=load, where=where)
