"""Trainers that misbehave on purpose, loaded through $POTATO_TRAINER_PLUGINS in tests.

- test-silent: prints nothing and sleeps (for the wall-clock limit)
- test-sigkill: kills its own process with SIGKILL (as the kernel's OOM killer would)
- test-steps: reports progress every 0.1 s for ``seconds`` and honours cancellation
- test-ignore-term: ignores SIGTERM (for the SIGKILL after the grace period)
- test-constant: always answers the first label (a model that learned nothing);
  test-image-constant the same for an image project

Except test-constant, test-warns and test-many-warnings (always the first label), their
predictions come from a tiny real model of the train split.
"""

import os
import signal
import time

from potato.training.remote.trainers import Param, TrainerInfo, naive_bayes


class _Base:
    """Whatever ``train`` does, predictions come from a real (tiny) model of the train split,
    naive Bayes over words, so that a run's write-back behaves as a real trainer's: its model
    beats the majority-class baseline where the labels can be learned, and only then is put in
    use. A multiselect scheme gets its first label."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.models = {}

    def predict(self, scheme, texts):
        labels = self.ctx.schemas[scheme]["labels"]
        train = self.ctx.bundle.labelled("train", scheme)
        if self.ctx.schemas[scheme]["type"] == "multiselect" or not train:
            return [(labels[0], 0.99) for _ in texts]
        if scheme not in self.models:
            self.models[scheme] = naive_bayes.Model(labels, 1.0, 1)
            self.models[scheme].fit(train, 1)
        return naive_bayes.predict(self.models[scheme], texts)


class Silent(_Base):
    def train(self):
        time.sleep(self.ctx.params["seconds"])
        return {}


class SigKill(_Base):
    def train(self):
        os.kill(os.getpid(), signal.SIGKILL)


class Steps(_Base):
    def train(self):
        n = int(self.ctx.params["seconds"] / 0.1)
        for i in range(n):
            self.ctx.check_cancelled()
            self.ctx.emitter.progress(i + 1, n, eta_s=(n - i - 1) * 0.1)
            time.sleep(0.1)
        return {"steps": n}


class Chatty(_Base):
    """A log line and a loss point every 0.1 s, and from half-way a val accuracy series (a
    new series mid-run), for ``seconds``: the live card's log and chart keep changing."""

    def train(self):
        n = int(self.ctx.params["seconds"] / 0.1)
        for i in range(n):
            self.ctx.check_cancelled()
            self.ctx.emitter.log("chatty line %d of %d" % (i + 1, n))
            self.ctx.emitter.metric("loss", 1.0 / (i + 1), step=i + 1, split="train")
            if i >= n // 2:
                self.ctx.emitter.metric("accuracy", 0.5 + i / (4.0 * n), step=i + 1,
                                        split="val")
            self.ctx.emitter.progress(i + 1, n)
            time.sleep(0.1)
        return {"steps": n}


class IgnoreTerm(_Base):
    def train(self):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(self.ctx.params["seconds"])
        return {}


def _info(name, cls):
    return TrainerInfo(name, __name__, "test trainer", [Param("seconds", "float", 30, "how long")],
                       {"radio", "multiselect"}, class_name=cls.__name__)


class Constant(_Base):
    """Learns nothing: always answers the scheme's first label (a model that must not reach
    annotators on its own)."""

    def train(self):
        return {}

    def predict(self, scheme, texts):
        labels = self.ctx.schemas[scheme]["labels"]
        return [(labels[0], 0.99) for _ in texts]


TRAINERS = {
    "test-constant": _info("test-constant", Constant),
    "test-image-constant": TrainerInfo(
        "test-image-constant", __name__, "test trainer: reads images, learns nothing", [],
        {"radio"}, class_name="Constant", media=("image",)),
    "test-silent": _info("test-silent", Silent),
    "test-sigkill": _info("test-sigkill", SigKill),
    "test-steps": _info("test-steps", Steps),
    "test-ignore-term": _info("test-ignore-term", IgnoreTerm),
    "test-chatty": _info("test-chatty", Chatty),
}


class Hog(_Base):
    def train(self):
        hoard = []
        for _ in range(int(self.ctx.params["seconds"] * 10)):
            hoard.append(bytearray(20 << 20))  # 20 MB every 0.1 s, touched
            time.sleep(0.1)
        return {}


class Env(_Base):
    def train(self):
        import importlib.util
        import sys

        return {"omp": os.environ.get("OMP_NUM_THREADS"),
                "openblas": os.environ.get("OPENBLAS_NUM_THREADS"),
                "python": sys.executable,
                "testpkg": importlib.util.find_spec("potato_testpkg") is not None,
                "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "hf_token": os.environ.get("HF_TOKEN"),
                "lab_token": os.environ.get("LAB_HF_TOKEN")}


TRAINERS["test-env"] = _info("test-env", Env)
TRAINERS["test-hog"] = _info("test-hog", Hog)
TRAINERS["test-missing-dep"] = TrainerInfo(
    "test-missing-dep", "potato_module_that_does_not_exist", "test trainer", [], {"radio"},
    install_hint="install it with: pip install nothing")


class BigArtifact(_Base):
    """Writes a model file of ``seconds`` MB (the param is reused as a size)."""

    def train(self):
        with open(os.path.join(self.ctx.artifacts, "model.bin"), "wb") as f:
            f.write(os.urandom(int(self.ctx.params["seconds"] * (1 << 20))))
        return {}


class Nvrtc(_Base):
    """Fails as torch does when its nvidia-cuda-nvrtc is for another CUDA version."""

    def train(self):
        raise RuntimeError("nvrtc: error: failed to open libnvrtc-builtins.so.13.0.\n  Make sure "
                           "that libnvrtc-builtins.so.13.0 is installed correctly.")


TRAINERS["test-big-artifact"] = _info("test-big-artifact", BigArtifact)
TRAINERS["test-nvrtc"] = _info("test-nvrtc", Nvrtc)


class BadPredictions(_Base):
    """Trains nothing and predicts a label outside the scheme."""

    def train(self):
        return {}

    def predict(self, scheme, texts):
        return [("neutral", 0.9) for _ in texts]


TRAINERS["test-bad-predictions"] = _info("test-bad-predictions", BadPredictions)


class Warns(Constant):
    """Succeeds, saying first that something is off (as decision-calibrate does when no
    threshold reaches its target); writes a model file with a hostile name too. Learns
    nothing: always answers the first label."""

    def train(self):
        self.ctx.log("no threshold <b>reaches</b> the target", "warning")
        os.makedirs(os.path.join(self.ctx.artifacts, "model"), exist_ok=True)
        with open(os.path.join(self.ctx.artifacts, "model", "weights.bin"), "wb") as f:
            f.write(b"\x00weights" * 1000)
        with open(os.path.join(self.ctx.artifacts, "model", "labels.json"), "w") as f:
            f.write('{"labels": ["positive", "negative"]}')
        os.symlink("/etc/passwd", os.path.join(self.ctx.artifacts, "model", "link"))
        return {}


TRAINERS["test-warns"] = _info("test-warns", Warns)


class ManyWarnings(Constant):
    """Warns 25 times (more than a run's status keeps); always answers the first label."""

    def train(self):
        for i in range(25):
            self.ctx.log("trainer warning %d" % i, "warning")
        return {}


TRAINERS["test-many-warnings"] = _info("test-many-warnings", ManyWarnings)
