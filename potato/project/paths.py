"""``<output_annotation_dir>/training/server.json``: how CLI commands find a running server.

``potato training run`` goes through the running server when there is one, so that a project
never has two queue owners.
"""

import json
import os
from typing import Optional

from potato.training.remote.paths import write_json


def server_file(cfg) -> str:
    return os.path.join(cfg.output_dir, "training", "server.json")


def write_server_file(cfg, url: str) -> None:
    write_json(server_file(cfg), {"url": url, "pid": os.getpid()})


def remove_server_file(cfg) -> None:
    try:
        os.unlink(server_file(cfg))
    except FileNotFoundError:
        pass


def running_server(cfg) -> Optional[str]:
    """The URL of this project's running server, or None."""
    try:
        with open(server_file(cfg), encoding="utf-8") as f:
            info = json.load(f)
        os.kill(int(info["pid"]), 0)
        return info["url"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
