"""``potato training register NAME CONFIG``: issue the token of an agent backend, once, and
say how to install and start the agent on the training machine."""

import ipaddress
import socket
import sys
from typing import Tuple

from potato.config.netaddr import is_loopback
from potato.project.store import Store
from potato.training.exchange import wheel
from potato.training.backends import polled_by_agents
from potato.training.core.tokens import AgentTokens
from potato.training.lifecycle.queue_lock import QueueLock


def guess_host(bound: str) -> str:
    """This machine's name as others might reach it: the bound address unless it is a
    wildcard or loopback, else the fully qualified name, else the short host name."""
    if bound and not is_loopback(bound):
        return bound
    for name in (socket.getfqdn(), socket.gethostname()):
        if name and not is_loopback(name):
            return name
    return "this-server"


def loopback_only(host: str) -> bool:
    """Whether a server bound to ``host`` answers this machine only (127.0.0.1, ::1,
    localhost), unlike a wildcard (0.0.0.0, ::) or a named address."""
    host = (host or "").strip("[]").lower()
    if host in ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback") \
            or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def loopback_warning(cfg, url: str) -> str:
    """A warning when the server listens on loopback only and no server_url names the way in
    (a proxy on this machine, say): the printed URL then reaches nothing from elsewhere."""
    if cfg.server_url or not loopback_only(cfg.server.host):
        return ""
    return ("warning: this server listens on %s only (server.host in %s), so an agent on "
            "another machine cannot reach %s. Start the server with --host 0.0.0.0 (or set "
            "server.host to an address the training machine can reach), or put a proxy in "
            "front of it and set server_url to the proxy's URL; then register again."
            % (cfg.server.host, cfg.path, url))


def torch_hint(install: str) -> str:
    """How to reuse a torch already installed on the training machine, instead of letting pip
    fetch another (about 2 GB): a venv that sees the system's packages, or --python."""
    pip = install.strip()
    venv_pip = "~/potato-venv/bin/" + (pip if pip.startswith("pip ") else
                                       "pip install '<the Potato checkout>[train-text]'")
    return ("\nTo reuse a torch already installed on the training machine (pip would otherwise "
            "download another), install Potato into a venv that sees the system's packages:\n\n"
            "  python3 -m venv --system-site-packages ~/potato-venv\n"
            "  %s\n\n"
            "and start the agent with ~/potato-venv/bin/potato. Or keep the agent where it is and "
            "run the training with the Python that has torch: add --python /path/to/python (a "
            "conda environment's python, say: it needs the trainer's packages, such as torch "
            "and transformers, not Potato) to the agent's command line." % venv_pip)


def server_url(cfg) -> Tuple[str, bool]:
    """(the URL agents use to reach this server, whether it is only a guess): server_url, else
    this machine's address with the port of the project's running server (``potato start
    --port`` may differ from server.port), else server.port."""
    if cfg.server_url:
        return cfg.server_url, False
    host = guess_host(cfg.server.host)
    if ":" in host:
        host = "[%s]" % host  # an IPv6 address in a URL
    scheme = "https" if cfg.server.tls_cert else "http"
    port = QueueLock(cfg.output_dir).running_port() or cfg.server.port
    return "%s://%s:%d" % (scheme, host, port), True


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
    print(torch_hint(install))
    if guessed:
        print("\n%s is a guess (server_url is not set in %s). If the training machine reaches "
              "this server by another URL (a proxy, a public name), set server_url to it and "
              "register again." % (url, cfg.path))
    warning = loopback_warning(cfg, url)
    if warning:
        print("\n" + warning, file=sys.stderr)
    return 0
