"""``potato training register NAME CONFIG``: issue the token of an agent backend, once."""

import socket
import sys

from potato.store import Store
from potato.training.agent_tokens import AgentTokens


def server_url(cfg) -> str:
    host = cfg.server.host
    if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""):
        host = socket.getfqdn() or "this-server"
    return "http://%s:%d" % (host, cfg.server.port)


def register(cfg, name: str) -> int:
    backend = cfg.model_training.backends.get(name)
    if backend is None or backend.type != "agent":
        agents = [n for n, b in cfg.model_training.backends.items() if b.type == "agent"]
        print("error: %s has no agent backend %r. Agent backends: %s. Add one under "
              "model_training.backends with type: agent." % (cfg.path, name,
                                                            ", ".join(agents) or "none"),
              file=sys.stderr)
        return 1
    store = Store(cfg.db_path)
    try:
        token = AgentTokens(store).issue(name)
    finally:
        store.close()
    print("Token for backend '%s' (shown once; registering again replaces it):\n\n"
          "  %s\n\n"
          "On the training machine:\n\n"
          "  export POTATO_TRAINING_TOKEN=%s\n"
          "  potato training agent --server %s --backend %s" % (name, token, token,
                                                               server_url(cfg), name))
    return 0
