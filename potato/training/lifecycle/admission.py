"""A checked request becomes a queued run, under the lock a config reload swaps the backends
under (``reload.ConfigOnDisk._reload``), so a request and a reload cannot cross:

- a reload that removed the request's backend after ``Manager.resolve_request`` looked is
  answered like a request that named it afterwards ("Unknown backend ..."), never with a
  KeyError;
- a run recorded before the swap is one the reload sees queued (it refuses to remove the
  backend that run waits for), so no queued run is left on a backend that is gone.
"""

from typing import Any, Dict, Optional, Tuple

from potato.training.remote import trainers
from potato.training.core.runs import RequestError, Run


def unknown_backend(name: Any, configured) -> RequestError:
    """The refusal of a request for a backend the config does not have (a typo gets its
    did-you-mean)."""
    names = list(configured)
    return RequestError(409, "Unknown backend %r. Configured backends: %s.%s" % (
        name, ", ".join(names), trainers.did_you_mean(name, names) if isinstance(name, str)
        else ""))


def admit(manager, req: Dict[str, Any], auto: bool) -> Tuple[Run, Optional[str]]:
    """(the queued run, its backend's queued step or None) for ``req`` (resolve_request's
    fields); raises RequestError(409) when its backend has left the config meanwhile."""
    with manager._lock:
        target = manager.backends.get(req["backend"])
        if target is None:
            raise unknown_backend(req["backend"], manager.cfg.model_training.backends)
        step = target.queued_step(busy=True)  # before the record exists
        run = manager.runs.create(req["trainer"], req["schemas"], req["backend"],
                                  req["params"], auto)
    return run, step
