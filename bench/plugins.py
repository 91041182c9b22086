"""A benchmark trainer (loaded through $POTATO_TRAINER_PLUGINS): writes one big model file."""

import os

from potato.training.remote.trainers import Param, TrainerInfo


class BigArtifact:
    def __init__(self, ctx):
        self.ctx = ctx

    def train(self):
        block = os.urandom(1 << 20)
        with open(os.path.join(self.ctx.artifacts, "big.bin"), "wb") as f:
            for _ in range(int(self.ctx.params["mb"])):
                f.write(block)
        return {}

    def predict(self, scheme, texts):
        return [(self.ctx.schemas[scheme]["labels"][0], 0.5) for _ in texts]


TRAINERS = {"bench-big-artifact": TrainerInfo(
    "bench-big-artifact", __name__, "writes one big model file",
    [Param("mb", "int", 300, "size of the file in MB", 1)], {"radio"}, class_name="BigArtifact")}
