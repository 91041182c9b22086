"""What `potato validate` says about an item's media (potato/project/validation_media.py): the media
folder, missing, unreadable and unshowable files, escapes, counts and the names it quotes. Also
the tests tools/mutation.py runs against the module (docs/testing.md)."""

import os
from types import SimpleNamespace

from potato.project import validation_media as vm
from potato.config.settings import load
from tests.helpers import DIGITS, MEDIA_CONFIG, media_project, wav_bytes

PNG = open(os.path.join(DIGITS, "media", "images", "digit-0000.png"), "rb").read()


def rules(path):
    """media_rules over the config at ``path``: (cfg, errors, warnings, notes), each finding as
    (key, message)."""
    cfg, errors, _ = load(path)
    assert not errors, errors
    found = {"err": [], "warn": []}
    report = SimpleNamespace(notes=[])
    vm.media_rules(cfg, report,
                   lambda key, msg: found["err"].append((key, msg)),
                   lambda key, msg: found["warn"].append((key, msg)))
    return cfg, found["err"], found["warn"], report.notes


IMAGE_KEY = ("item_properties", "image_key")
AUDIO_KEY = ("item_properties", "audio_key")


def test_few_names_the_first_five():
    assert vm.few(["a", "b", "c", "d", "e"]) == "a, b, c, d, e"
    assert vm.few(["a", "b", "c", "d", "e", "f"]) == "a, b, c, d, e, …"
    assert vm.few(["a", "b"], "; ") == "a; b"
    assert vm.few(list("abcdefg"), "; ") == "a; b; c; d; e; …"
    assert vm.few(["abcdef", "\x00"], cap=3) == "abc…, \\x0…"
    assert vm.few(["x" * 130]) == "x" * 120 + "…"
    assert vm.LONG == 360 and vm.few(["x" * 400], cap=vm.LONG) == "x" * 360 + "…"


def test_nothing_to_check_without_media_keys(tmp_path):
    config = MEDIA_CONFIG.replace("item_properties: {image_key: image, audio_key: audio}", "")
    rows = [{"id": "a", "image": "../x.png", "text": "t"}]
    _, errors, warnings, notes = rules(media_project(tmp_path, items=rows, config=config))
    assert (errors, warnings, notes) == ([], [], [])


def test_the_media_folder_must_be_a_folder(tmp_path):
    path = media_project(tmp_path, config=MEDIA_CONFIG.replace("media_directory: media",
                                                               "media_directory: pics"))
    cfg, errors, warnings, _ = rules(path)
    assert errors == [(("media_directory",), f"media_directory is {tmp_path / 'pics'}, which is "
                       f"not a folder. Give the folder the items' media paths are "
                       f"relative to (relative to task_dir, {cfg.task_dir}).")]
    assert warnings == []


def test_without_a_media_directory_paths_are_relative_to_the_task_dir(tmp_path):
    rows = [{"id": "a", "image": "media/digit-0.png"}, {"id": "b", "image": "lost.png"}]
    path = media_project(tmp_path, items=rows,
                         config=MEDIA_CONFIG.replace("media_directory: media\n", ""))
    _, errors, warnings, _ = rules(path)
    root = os.path.realpath(tmp_path)
    assert errors == []
    assert warnings == [(IMAGE_KEY, f"1 of 2 items name an image that is not in {root}: "
                                    f"lost.png; fix the paths or media_directory.")]


def test_missing_or_broken_data_files_are_left_to_their_rules(tmp_path):
    path = media_project(tmp_path, items=[{"id": "a", "image": "lost.png"}])
    (tmp_path / "items.jsonl").unlink()
    assert rules(path)[1:] == ([], [], [])
    (tmp_path / "items.jsonl").write_text("{not json\n")
    _, errors, warnings, _ = rules(path)
    assert [k for k, _ in errors] == [("data_files",)] and warnings == []
    assert "items.jsonl" in errors[0][1]


def test_no_data_files_at_all(tmp_path):
    path = media_project(tmp_path, config=MEDIA_CONFIG.replace("data_files: [items.jsonl]",
                                                               "data_files: []"))
    cfg, errors, _ = load(path)
    got = []
    vm.media_rules(cfg, SimpleNamespace(notes=[]), lambda *a: got.append(a),
                   lambda *a: got.append(a))
    assert got == []


def test_each_finding_of_one_kind(tmp_path):
    rows = [{"id": "t1", "text": "only text"},
            {"id": "r1", "image": "../x.png"}, {"id": "r2", "image": 7, "text": "t"},
            {"id": "m1", "image": "lost.png"}, {"id": "s1", "image": "sounds/tone-0.wav"},
            {"id": "d1", "image": "sounds"}, {"id": "u1", "image": "https://b.org/1.png"},
            {"id": "u2", "image": "https://a.org/2.png"}, {"id": "u3", "image": "https://b.org/3"},
            {"id": "b1", "image": "https://x:y@c.org/"}, {"id": "ok", "image": "digit-0.png"}]
    cfg, errors, warnings, notes = rules(media_project(tmp_path, items=rows))
    root = os.path.realpath(tmp_path / "media")
    assert errors == [(IMAGE_KEY, f"2 of 11 items name an image outside the media folder {root} "
                                  f"(an absolute path, '..', a symlink out, or not a path), which "
                                  f"is never served: ../x.png, r2 (the item's 'image' field must "
                                  f"be a path or URL, not int). Give paths relative to "
                                  f"media_directory.")]
    assert warnings == [
        (IMAGE_KEY, f"1 of 11 items name an image that is not in {root}: lost.png; fix the paths "
                    f"or media_directory."),
        (IMAGE_KEY, "1 of 11 items' image files cannot be shown by a browser: 'sounds/tone-0.wav' "
                    "is audio (audio/wav), and the item names it as its image. Convert them to "
                    "PNG, JPEG, GIF or WebP."),
        (IMAGE_KEY, "1 of 11 items name an image that is not a file: 'sounds' (a folder); name "
                    "the image file itself."),
        (IMAGE_KEY, "1 of 11 items name an image address the annotate page will not load and "
                    "no run fetches (only plain http:// and https:// addresses, without spaces, "
                    "tabs or user info): item b1 ('https://x:y@c.org/'). Those items are left "
                    "out of runs whose model reads the images.")]
    [note] = notes
    assert note.message == ("the image of 3 item(s) are web addresses, not checked here "
                            "(validate fetches nothing): the annotators' browsers load them "
                            "from https://a.org, https://b.org.")
    assert (note.key, note.line, note.file) == ("item_properties.image_key", 5, cfg.path)


def test_audio_findings_and_the_error_when_every_file_is_missing(tmp_path):
    rows = [{"id": "a", "audio": "lost.wav", "text": "t"},
            {"id": "b", "audio": "lost2.wav", "text": "t"},
            {"id": "u", "audio": "https://a.org/x.wav", "text": "t"},
            {"id": "c", "image": "digit-0.png"}]
    _, errors, warnings, notes = rules(media_project(tmp_path, items=rows))
    root = os.path.realpath(tmp_path / "media")
    assert errors == [(AUDIO_KEY, f"none of the 2 audio files the items name is in {root}: "
                                  f"lost.wav, lost2.wav; fix media_directory (relative to "
                                  f"task_dir) or the paths.")]
    assert warnings == []
    assert [n.message for n in notes] == [
        "the audio of 1 item(s) are web addresses, not checked here (validate fetches nothing): "
        "the annotators' browsers load them from https://a.org."]
    assert notes[0].key == "item_properties.audio_key"


def test_unsupported_audio_and_counts_with_thousands(tmp_path):
    rows = [{"id": f"i{n}", "audio": "digit-0.png", "text": "t"} for n in range(1001)]
    _, errors, warnings, _ = rules(media_project(tmp_path, items=rows))
    assert errors == []
    assert warnings == [(AUDIO_KEY, "1,001 of 1,001 items' audio files cannot be shown by a "
                                    "browser: 'digit-0.png' is image (image/png), and the item "
                                    "names it as its audio; 'digit-0.png' is image (image/png), "
                                    "and the item names it as its audio; 'digit-0.png' is image "
                                    "(image/png), and the item names it as its audio; "
                                    "'digit-0.png' is image (image/png), and the item names it "
                                    "as its audio; 'digit-0.png' is image (image/png), and the "
                                    "item names it as its audio; …. Convert them to WAV, MP3, "
                                    "OGG, FLAC or M4A.")]


def test_a_symlink_out_is_refused_and_names_are_escaped(tmp_path):
    rows = [{"id": "a\x1b", "image": "out.png"}, {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "secret.png").write_bytes(PNG)
    (tmp_path / "media" / "out.png").symlink_to(tmp_path / "secret.png")
    _, errors, warnings, _ = rules(path)
    assert [m for _, m in errors] == [
        f"1 of 2 items name an image outside the media folder "
        f"{os.path.realpath(tmp_path / 'media')} (an absolute path, '..', a symlink out, or not "
        f"a path), which is never served: out.png. Give paths relative to media_directory."]
    assert warnings == []


def test_validate_names_long_entries_up_to_their_own_cap(tmp_path):
    long_id, long_png, long_dir = "i" * 100, "p" * 100 + ".png", "d" * 118
    rows = [{"id": long_id, "image": 7, "text": "t"}, {"id": "b", "image": long_png},
            {"id": "c", "image": long_dir}, {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "media" / long_png).write_bytes(wav_bytes(0.01))
    (tmp_path / "media" / long_dir).mkdir()
    _, errors, warnings, _ = rules(path)
    refused = f"{long_id} (the item's 'image' field must be a path or URL, not int)"
    assert errors[0][1].split("never served: ")[1] == refused + ". Give paths relative to " \
                                                               "media_directory."
    assert (f"cannot be shown by a browser: '{long_png}' is audio (audio/wav), and the item "
            f"names it as its image. Convert") in warnings[0][1]
    assert f"that is not a file: '{long_dir}' (a folder); name" in warnings[1][1]


def png_header(width, height):
    """The first bytes of a PNG that says it is ``width`` × ``height`` (all image_size reads)."""
    import zlib
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return (b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + ihdr +
            zlib.crc32(b"IHDR" + ihdr).to_bytes(4, "big"))


AVIF = b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf" + bytes(16)


def test_images_over_100_megapixels_are_named_up_to_their_own_cap(tmp_path):
    long_png = "w" * 130 + ".png"  # its name is cut at 120, its entry (141) is not
    rows = [{"id": "a", "image": long_png}, {"id": "b", "image": "tall.png"},
            {"id": "c", "image": "edge.png"}, {"id": "d", "image": "pic.avif"},
            {"id": "e", "image": "digit-0.png"}, {"id": "f", "image": "wide.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "media" / long_png).write_bytes(png_header(20_000, 20_000))
    (tmp_path / "media" / "tall.png").write_bytes(png_header(17, 5_882_353))  # 100,000,001
    (tmp_path / "media" / "wide.png").write_bytes(png_header(5_882_353, 17))
    (tmp_path / "media" / "edge.png").write_bytes(png_header(10_000, 10_000))  # 100,000,000
    (tmp_path / "media" / "pic.avif").write_bytes(AVIF)  # shown by browsers, no size read
    _, errors, warnings, _ = rules(path)
    assert errors == []
    assert warnings == [(IMAGE_KEY, (
        f"3 of 6 items' images are over 100 megapixels: '{'w' * 120}…' (20,000×20,000); "
        f"'tall.png' (17×5,882,353); 'wide.png' (5,882,353×17). A browser needs 4 bytes a pixel to show one (400 MB at 100 "
        f"megapixels), so the annotate page may freeze or fail on a laptop: scale them down."))]


def test_data_errors_are_the_media_rules_errors_only(tmp_path):
    # what the server's data-file watcher refuses: errors, never the warnings or notes
    rows = [{"id": "out", "image": "../x.png"}, {"id": "lost", "image": "lost.png"},
            {"id": "web", "image": "https://ex.org/a.png"}, {"id": "big", "image": "big.png"},
            {"id": "ok", "image": "digit-0.png"}]
    path = media_project(tmp_path, items=rows)
    (tmp_path / "media" / "big.png").write_bytes(png_header(30_000, 30_000))
    cfg, errors, _ = load(path)
    assert not errors
    root = os.path.realpath(tmp_path / "media")
    assert vm.data_errors(cfg) == [
        f"1 of 5 items name an image outside the media folder {root} (an absolute path, '..', "
        f"a symlink out, or not a path), which is never served: ../x.png. Give paths relative "
        f"to media_directory."]


def test_data_errors_of_a_sound_project_and_of_its_data_file(tmp_path):
    rows = [{"id": "a", "image": "https://ex.org/a.png", "audio": "lost.wav", "text": "t"}]
    path = media_project(tmp_path, items=rows)
    cfg, _, _ = load(path)
    root = os.path.realpath(tmp_path / "media")
    assert vm.data_errors(cfg) == [
        f"none of the 1 audio files the items name is in {root}: lost.wav; fix media_directory "
        f"(relative to task_dir) or the paths."]
    (tmp_path / "items.jsonl").write_text(
        '{"id": "a", "image": "https://ex.org/a.png", "audio": "sounds/tone-0.wav", "text": "t"}\n')
    assert vm.data_errors(cfg) == []  # a URL's note goes nowhere
    (tmp_path / "items.jsonl").write_text("{not json\n")
    [error] = vm.data_errors(cfg)
    assert "items.jsonl" in error


def test_videos_no_browser_plays_are_a_warning_and_each_kind_has_formats(tmp_path):
    # Review 36.1: a video of another format made validate (and the data watcher) a KeyError.
    from potato.project import media, validation_media

    assert set(validation_media.FORMATS) == set(media.KINDS)
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "clip.avi").write_bytes(b"RIFF\x10\0\0\0AVI LIST" + bytes(40))
    (tmp_path / "media" / "ok.webm").write_bytes(b"\x1a\x45\xdf\xa3\x9f" + bytes(40))
    rows = [{"id": "a", "video": "clip.avi", "text": "t"},
            {"id": "b", "video": "ok.webm", "text": "t"}]
    config = MEDIA_CONFIG.replace("{image_key: image, audio_key: audio}", "{video_key: video}")
    _, errors, warnings, _ = rules(media_project(tmp_path, items=rows, config=config))
    assert errors == []
    assert warnings == [(("item_properties", "video_key"), "1 of 2 items' video files cannot be "
                         "shown by a browser: 'clip.avi' is not an image, audio or video format "
                         "a browser shows. Convert them to MP4, WebM or Ogg.")]
