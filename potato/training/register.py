"""``potato training register NAME CONFIG``: issue the token of an agent backend, once, and
say how to install and start the agent on the training machine."""

import socket
import sys
from typing import Tuple

from potato.netaddr import is_loopback
from potato.store import Store
from potato.training import wheel
from potato.training.backends import polled_by_agents
from potato.training.tokens import AgentTokens


def guess_host(bound: str) -> str:
    """This machine's name as others might reach it: the bound address unless it is a
    wildcard or loopback, else the fully qualified name, else the short host name."""
    if bound and not is_loopback(bound):
        return bound
    for name in (socket.getfqdn(), socket.gethostname()):
        if name and not is_loopback(name):
            return name
    return "this-server"


def server_url(cfg) -> Tuple[str, bool]:
    """(the URL agents use to reach this server, whether it is only a guess)."""
    if cfg.server_url:
        return cfg.server_url, False
    host = guess_host(cfg.server.host)
    if ":" in host:
        host = "[%s]" % host  # an IPv6 address in a URL
    scheme = "https" if cfg.server.tls_cert else "http"
    return "%s://%s:%d" % (scheme, host, cfg.server.port), True


def register(cfg, name: str) -> int:
    backend = cfg.model_training.backends.get(name)
    if backend is None or not polled_by_agents(backend.type):
        agents = [n for n, b in cfg.model_training.backends.items() if polled_by_agents(b.type)]
        print("error: %s has no agent backend %r. Agent backends: %s. Add one under "
              "model_training.backends with type: agent." % (cfg.path, name,
                                                            ", ".join(agents) or "none"),
              file=sys.stderr)
        return 1
    url, guessed = server_url(cfg)
    try:
        wheel.wheel_path(cfg.output_dir)
        install = "  " + wheel.install_line(url)
    except wheel.WheelError as e:
        install = "  (%s %s)" % (e, wheel.checkout_hint())
    store = Store(cfg.db_path)
    try:
        token = AgentTokens(store).issue(name)
    finally:
        store.close()
    print("Token for backend '%s' (shown once; registering again replaces it):\n\n"
          "  %s\n\n"
          "On the training machine:\n\n"
          "%s\n"
          "  export POTATO_TRAINING_TOKEN=%s\n"
          "  potato training agent --server %s --backend %s" % (name, token, install, token,
                                                               url, name))
    if guessed:
        print("\n%s is a guess (server_url is not set in %s). If the training machine reaches "
              "this server by another URL (a proxy, a public name), set server_url to it and "
              "register again." % (url, cfg.path))
    return 0
