"""hf-audio-classification (issue 22 part 3): a tiny Wav2Vec2 with random weights and its
feature extractor, built here (no download), trained on WAV tones made here with the standard
library (low tones vs high ones, in every WAV encoding the trainer reads, at rates it must
resample) through the worker, the real server's local backend, the real sshd and a real agent;
multiselect over audio; bad files refused before training in one sentence."""

import io
import json
import math
import os
import re
import struct
import subprocess
import sys

import pytest

from potato.cli import main
from potato.training.remote import bundle, worker
from potato.training.remote import protocol as events
from potato.training.remote.paths import RunPaths, write_json
from potato.training.remote.trainers import REGISTRY, resolve_params
from tests.helpers import KEY, ROOT, Client, start_run, wait_run

H = {"X-API-Key": KEY}
LABELS = ["high", "low"]
# (encoding, bits, channels, rate, extensible): the clips cycle through these
FORMATS = [("pcm", 16, 1, 16000, False), ("pcm", 8, 1, 8000, False),
           ("pcm", 24, 2, 22050, False), ("float", 32, 1, 11025, False),
           ("pcm", 32, 1, 16000, True), ("float", 64, 2, 12000, True)]


def wav(samples, rate, enc="pcm", bits=16, channels=1, extensible=False, data_size=None):
    """WAV bytes written here with struct (the stdlib ``wave`` module writes only PCM);
    ``samples``: floats in [-1, 1], one per frame (the same on every channel, except the
    second channel is silent, so a mix-down halves it)."""
    frames = []
    for v in samples:
        frames.extend([v] + [0.0] * (channels - 1))
    if enc == "float":
        data = struct.pack("<%d%s" % (len(frames), "f" if bits == 32 else "d"), *frames)
    elif bits == 8:
        data = bytes(int(round(v * 127)) + 128 for v in frames)
    elif bits == 24:
        data = b"".join(int(v * 8388607).to_bytes(3, "little", signed=True) for v in frames)
    else:
        data = struct.pack("<%d%s" % (len(frames), "h" if bits == 16 else "i"),
                           *[int(v * ((1 << (bits - 1)) - 1)) for v in frames])
    tag = 3 if enc == "float" else 1
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, channels, rate, rate * block,
                      block, bits)
    if extensible:  # cbSize, valid bits, channel mask, sub-format GUID (tag first)
        fmt += struct.pack("<HHI", 22, bits, 0) + struct.pack("<H", tag) + \
            b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"LIST" + \
        struct.pack("<I", 3) + b"abc\x00" + b"data" + \
        struct.pack("<I", len(data) if data_size is None else data_size) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def tone(freq, rate, seconds=0.25, amp=0.5):
    return [amp * math.sin(2 * math.pi * freq * n / rate) for n in range(int(seconds * rate))]


def clips(n=40):
    """(id, file name, WAV bytes, label): alternately a low tone (150-300 Hz) and a high one
    (1.5-3 kHz), each in the next of FORMATS."""
    out = []
    for k in range(n):
        label = LABELS[k % 2]
        freq = (150 + 10 * k if label == "low" else 1500 + 40 * k)
        enc, bits, ch, rate, ext = FORMATS[k % len(FORMATS)]
        out.append(("clip-%02d" % k, "clip-%02d.wav" % k,
                    wav(tone(freq, rate), rate, enc, bits, ch, ext), label))
    return out


def tiny_model(d):
    """A Wav2Vec2 classifier small enough to train in seconds, random weights, and its feature
    extractor at 16 kHz (no download)."""
    if not os.environ.get("CI"):
        pytest.importorskip("torch", reason="needs the train-audio extra (torch)")
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16, 16), conv_stride=(5, 4, 4), conv_kernel=(10, 8, 8),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, classifier_proj_size=16,
        feat_extract_norm="layer", do_stable_layer_norm=True,
        mask_time_prob=0.0)).save_pretrained(d)
    transformers.Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
        return_attention_mask=True).save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def tiny_w2v(tmp_path_factory):
    return tiny_model(str(tmp_path_factory.mktemp("tiny-w2v")))


def write_clips(folder, rows=None):
    os.makedirs(folder, exist_ok=True)
    for _, name, data, _ in rows or clips():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return str(folder)


def run_dir(tmp_path, model, schema, label_of, media_of=None, **params):
    """A worker run over the clips: ``label_of(label)`` gives each item's label; a quarter of
    the items stay unlabelled."""
    folder = write_clips(tmp_path / "sounds")
    items, labels = [], {}
    for k, (item_id, name, _, label) in enumerate(clips()):
        media = (media_of or (lambda n: {"kind": "audio",
                                         "path": os.path.join(folder, n)}))(name)
        items.append((item_id, "", media))
        if k % 4 != 3:
            labels[item_id] = {"pitch": [label_of(label)]}
    paths = RunPaths(str(tmp_path / "run")).create()
    schemas = {"pitch": schema}
    bundle.build(paths.bundle, items, labels, schemas, include_unlabeled=True)
    full = resolve_params(REGISTRY["hf-audio-classification"], dict(model=model, **params))
    write_json(paths.spec, {"run_id": "t", "trainer": "hf-audio-classification",
                            "schemas": schemas, "params": full, "device": "cpu"})
    return paths


def train(paths):
    out = io.StringIO()
    code = worker.run(paths.spec, events.Emitter(out))
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


FAST = dict(epochs=6, batch_size=8, learning_rate=3e-3, lora=False)
