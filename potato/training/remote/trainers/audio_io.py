"""Audio files as mono float samples at a model's sampling rate, for hf-audio-classification.

WAV is read here, with nothing but ``struct`` and numpy: PCM at 8, 16, 24 or 32 bits and IEEE
float at 32 or 64 bits, plain or WAVE_FORMAT_EXTENSIBLE (the stdlib ``wave`` module reads
only 8/16/32-bit PCM before Python 3.12). Every channel is averaged into one. Other formats
(MP3, Ogg, FLAC, and WAV encodings such as ADPCM or mu-law) are decoded with the ``soundfile``
package when it is importable; without it ``check`` raises NeedsSoundfile naming the format.
The format comes from the file's first bytes, never its name: a file in a host's media cache
is named by its sha256.

Resampling is linear interpolation between neighbouring samples (``numpy.interp``): no
low-pass filter first, so when a clip is brought down (44.1 kHz to 16 kHz) sound above the new
rate's Nyquist frequency (8 kHz) folds back; speech and most labelled sounds sit far below it.
numpy is imported when a function needs it (only the worker calls them), so importing this
module imports nothing outside the standard library.
"""

import os
import struct

PCM, FLOAT, EXTENSIBLE = 0x0001, 0x0003, 0xFFFE
PCM_BITS = (8, 16, 24, 32)
FLOAT_BITS = (32, 64)
MAX_RATE = 1000000  # samples per second: any real file's rate is far below
RF64 = "RF64 WAV"  # a WAV over 4 GB (RF64, BW64): its sizes are in a ds64 chunk
RIFX = "big-endian WAV (RIFX)"
SOUNDFILE_FORMATS = ("MP3", "Ogg", "FLAC", RF64, RIFX)  # what libsndfile reads besides WAV
# WAV format tags soundfile decodes, by name (the rest are named by their number)
TAG_NAMES = {0x0002: "MS ADPCM", 0x0006: "A-law", 0x0007: "mu-law", 0x0011: "IMA ADPCM",
             0x0031: "GSM 6.10", 0x0055: "MP3"}
INSTALL = "pip install soundfile"


class AudioError(Exception):
    """A file this trainer cannot read: the message says why, in a phrase ("it is ...")."""


class NeedsSoundfile(AudioError):
    """A file only the ``soundfile`` package decodes, when it is not importable here."""

    def __init__(self, fmt):
        super().__init__("it is %s, which this trainer decodes only with the soundfile "
                         "package" % fmt)
        self.format = fmt
        self.is_wav = "WAV" in fmt  # "convert it to WAV" would not help: 16-bit PCM WAV would


def sniff(head):
    """The audio format of a file from its first 12 bytes: WAV, RF64 WAV, big-endian WAV
    (RIFX), MP3, Ogg, FLAC, MP4/M4A, WebM, AAC, or None."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] in (b"RF64", b"BW64") and head[8:12] == b"WAVE":
        return RF64
    if head[:4] == b"RIFX" and head[8:12] == b"WAVE":
        return RIFX
    if head[:4] == b"OggS":
        return "Ogg"
    if head[:4] == b"fLaC":
        return "FLAC"
    if head[4:8] == b"ftyp":
        return "MP4/M4A"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "WebM"
    if head[:3] == b"ID3" or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE6 == 0xE2):
        return "MP3"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0:
        return "AAC"
    return None


def soundfile():
    """The soundfile module, or None where it is not installed."""
    try:
        import soundfile as sf
    except (ImportError, OSError):  # OSError: the package is there but libsndfile is not
        return None
    return sf


def wav_layout(f):
    """(format tag, channels, rate, bits, first data byte, data bytes, block align) of an open
    WAV file, whose data size is cut to what the file holds (a streamed WAV says
    0xFFFFFFFF)."""
    f.seek(0, os.SEEK_END)
    end = f.tell()
    f.seek(12)
    fmt = None
    while True:
        chunk = f.read(8)
        if len(chunk) < 8:
            raise AudioError("it is a WAV file with no %s chunk" % ("data" if fmt else "fmt"))
        cid, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
        if cid == b"fmt ":
            if not 16 <= size <= 4096:
                raise AudioError("it is a WAV file whose fmt chunk is %d bytes" % size)
            body = f.read(size + (size & 1))  # with an odd-sized chunk's pad byte
            if len(body) < size:
                raise AudioError("it is a WAV file cut off in its fmt chunk")
            tag, channels, rate, _, block, bits = struct.unpack("<HHIIHH", body[:16])
            if tag == EXTENSIBLE and size >= 26:
                tag = struct.unpack("<H", body[24:26])[0]  # the sub-format GUID's first field
            fmt = (tag, channels, rate, bits, block)
        elif cid == b"data":
            if fmt is None:
                raise AudioError("it is a WAV file whose data chunk comes before its fmt chunk")
            start = f.tell()
            return fmt[:4] + (start, min(size, end - start), fmt[4])
        else:
            f.seek(size + (size & 1), os.SEEK_CUR)


def _check_layout(layout):
    """The layout itself when this module decodes it; NeedsSoundfile for another WAV encoding;
    AudioError for a header no decoder can make sense of."""
    tag, channels, rate, bits, _, size, block = layout
    if not (1 <= channels <= 64 and 1 <= rate <= MAX_RATE):
        raise AudioError("it is a WAV file that says it has %d channels at %d Hz"
                         % (channels, rate))
    if tag not in (PCM, FLOAT):
        raise NeedsSoundfile("%s WAV" % TAG_NAMES[tag] if tag in TAG_NAMES else
                             "WAV of format tag 0x%04x" % tag)
    kind = "PCM" if tag == PCM else "float"
    if bits not in (PCM_BITS if tag == PCM else FLOAT_BITS):
        raise NeedsSoundfile("%d-bit %s WAV" % (bits, kind))
    frame = channels * bits // 8
    if block > frame:  # e.g. 24-bit samples in 4-byte containers; a smaller or zero block
        raise NeedsSoundfile("%d-bit %s WAV in %d-byte frames (%d channels)"  # is a wrong
                             % (bits, kind, block, channels))  # header field: read as usual
    if size < frame:
        raise AudioError("it is a WAV file that holds no samples")
    return layout[:6]


def check(path):
    """Raise AudioError (or NeedsSoundfile) when ``path`` is not a file this module will read;
    reads the header only (WAV: its chunks; other formats: soundfile's ``info``)."""
    with open(path, "rb") as f:
        fmt = sniff(f.read(12))
        if fmt == "WAV":
            try:
                _check_layout(wav_layout(f))
                return
            except NeedsSoundfile:
                if soundfile() is None:
                    raise
        elif fmt is None:
            raise AudioError("it is not an audio file (WAV, MP3, Ogg or FLAC)")
        elif fmt not in SOUNDFILE_FORMATS:  # MP4/M4A, AAC, WebM
            raise AudioError("it is %s, which this trainer cannot decode; convert it to WAV or "
                             "FLAC" % fmt)
    sf = soundfile()
    if sf is None:
        raise NeedsSoundfile(fmt)
    try:
        info = sf.info(path)
    except Exception as e:  # soundfile raises its LibsndfileError, RuntimeError, TypeError ...
        raise AudioError("it is %s that soundfile cannot read (%s)" % (fmt, _first_line(e)))
    if info.frames == 0:
        raise AudioError("it is %s that holds no samples" % fmt)


def read(path, max_seconds):
    """(mono float32 samples, rate) of the first ``max_seconds`` of an audio file; only that
    much is read from disk."""
    import numpy as np

    with open(path, "rb") as f:
        if sniff(f.read(12)) == "WAV":
            try:
                tag, channels, rate, bits, start, size = _check_layout(wav_layout(f))
            except NeedsSoundfile:
                pass
            else:
                block = channels * bits // 8
                frames = min(size // block, max(1, int(max_seconds * rate)))
                f.seek(start)
                x = _samples(np, f.read(frames * block), tag, bits)
                return x.reshape(-1, channels).mean(axis=1, dtype=np.float32), rate
    sf = soundfile()
    if sf is None:
        raise NeedsSoundfile("WAV other than PCM or float")
    rate = sf.info(path).samplerate
    x, rate = sf.read(path, frames=max(1, int(max_seconds * rate)), dtype="float32",
                      always_2d=True)
    x = np.clip(np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0)
    return x.mean(axis=1, dtype=np.float32), rate


def _samples(np, raw, tag, bits):
    """Interleaved samples as float32 in [-1, 1] (float files: NaN made 0, the rest clipped to
    [-1, 1], so a corrupt file's huge values cannot overflow the extractor's normalisation)."""
    if tag == FLOAT:
        x = np.frombuffer(raw, "<f4" if bits == 32 else "<f8")
        return np.clip(np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0) \
            .astype(np.float32)
    if bits == 8:  # 8-bit WAV is unsigned, centred on 128
        return (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    if bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        return ((v ^ 0x800000) - 0x800000).astype(np.float32) / float(1 << 23)
    dtype = "<i2" if bits == 16 else "<i4"
    return np.frombuffer(raw, dtype).astype(np.float32) / float(1 << (bits - 1))


def resample(x, rate, target):
    """``x`` at ``rate`` Hz brought to ``target`` Hz by linear interpolation (the same array
    when the rates match)."""
    import numpy as np

    if rate == target or len(x) == 0:
        return x
    n = max(1, int(round(len(x) * float(target) / rate)))
    at = np.arange(n, dtype=np.float64) * (float(rate) / target)
    return np.interp(at, np.arange(len(x), dtype=np.float64), x).astype(np.float32)


def _first_line(e):
    text = str(e).splitlines()[0][:160] if str(e) else ""
    return "%s%s" % (type(e).__name__, ": " + text if text else "")
