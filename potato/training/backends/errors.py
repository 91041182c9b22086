"""Errors of remote backends, by stage, with the messages people read.

Each message says what happened, where, and what to do next. Builders live here so tests can
compare against them.
"""


from potato.training.remote.protocol import exit_sentence


class RemoteError(Exception):
    """A remote backend could not do its part; ``str(e)`` is the run's one-line error."""


class ConnectError(RemoteError):
    """ssh itself failed (login, host key, network)."""


class SetupError(RemoteError):
    """The host is reachable but not ready (python, code copy, packages, GPUs)."""


class TransferError(RemoteError):
    """Copying files to or from the host failed."""



def ssh_failure(host, user, returncode, stderr, command=""):
    """The sentence for a failed ssh call, from its exit status and the tail of its stderr."""
    tail = " ".join(stderr.strip().splitlines()[-3:])[-400:]
    who = "%s@%s" % (user, host) if user else host
    if "Permission denied" in stderr:
        return ("ssh to %s failed: Permission denied. Potato logs in without a password "
                "(BatchMode): install a key for %s (ssh-copy-id %s) or set identity_file in "
                "the backend." % (host, who, who))
    if "IDENTIFICATION HAS CHANGED" in stderr or "Host key verification failed" in stderr:
        return ("ssh to %s failed: the host key does not match the one in known_hosts. If %s "
                "was reinstalled, remove the old key with ssh-keygen -R %s and try again; "
                "otherwise someone may be in the middle." % (host, host, host))
    if "Could not resolve hostname" in stderr:
        return ("ssh to %s failed: the name does not resolve. Check host in the backend (a name "
                "or an alias from ~/.ssh/config)." % host)
    for phrase in ("Connection refused", "Connection timed out", "No route to host",
                   "Network is unreachable", "Operation timed out"):
        if phrase in stderr:
            return ("ssh to %s failed: %s. Check that the host is up and that its ssh port is "
                    "reachable from the annotation server." % (host, phrase))
    return "ssh to %s failed (exit %s): %s%s" % (
        host, returncode, tail or "no error output",
        " (command: %s)" % command if command else "")


def no_python(python, host, backend):
    return ("%s was not found on %s. Set python in model_training.backends.%s to the "
            "interpreter's path there (for example /usr/bin/python3)." % (python, host, backend))


def old_python(python, host, version, backend):
    return ("%s on %s is Python %s; Potato needs Python 3.8 or newer there. Set python in "
            "model_training.backends.%s to a newer interpreter." % (python, host, version,
                                                                    backend))


def agent_stopped(host, returncode, log_tail):
    """An agent whose ssh session ended before it reported a result, in words."""
    return ("The agent on %s stopped before reporting a result: %s (exit %s). Its last output: "
            "%s" % (host, exit_sentence(returncode), returncode, log_tail[-400:] or "none"))


def copy_stalled(host, seconds):
    return "The copy from %s sent nothing for %d s." % (host, seconds)


def silent_agent(backend, seconds, agent_log=False):
    return ("No word from the agent on %s for %d seconds. The machine or the network to it went "
            "away%s." % (backend, seconds, "; agent.log in the run directory has the agent's "
                                           "last output" if agent_log else ""))
