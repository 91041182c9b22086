"""Mutation testing over the code that guards users (issue 26; docs/testing.md).

mutmut (the ``mutation`` extra: ``pip install -e .[mutation]``) generates the mutants: its
libcst operators flip comparisons and booleans, change numbers, strings and operators, drop
call arguments, replace assigned values by None. This driver applies them ONE AT A TIME to a
scratch copy of the project and runs, for each module, only the tests listed for it in
``MODULES`` (fast unit tests), with a timeout per mutant and a time budget per module. It never
touches the working tree, and it mutates module-level values too (defaults, ranges, caps), which
mutmut's own runner leaves alone.

    python3 tools/mutation.py                     # every listed module, in order
    python3 tools/mutation.py --module potato/training/exchange/boundary.py
    python3 tools/mutation.py --module boundary --show-survivors

Each mutant ends as killed (the tests failed), survived (they passed), timeout (they ran past
the per-mutant limit; counted as killed, as mutmut does), or equivalent (listed in
``EQUIVALENT`` with why it cannot change behaviour; not counted). Score = (killed + timeout) /
(killed + timeout + survived). Results are printed and written to ``--out`` as JSON.

Not mutated: docstrings, and string literals that hold whitespace (prose: messages and help
text, whose wording no unit test should pin); identifiers, keys, states and tokens are.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# module -> the tests that cover it (fast ones; end-to-end tiers are not run per mutant).
# Order is the priority of issue 26; a module joins with its tests, see docs/testing.md. Each
# module's tests are in tests/test_<module>.py (the test_mut_* files written against this run
# are being folded into them, issue 33), with the other tests that cover the module
# (docs/testing.md says which modules were run and their score).
MODULES = {
    "potato/training/exchange/boundary.py": ["tests/training/exchange/test_boundary.py"],
    "potato/training/exchange/intake.py": ["tests/training/exchange/test_intake.py"],
    "potato/training/lifecycle/in_use.py": ["tests/training/lifecycle/test_in_use.py"],
    "potato/training/lifecycle/autoretrain.py": ["tests/training/lifecycle/test_autoretrain.py"],
    "potato/training/exchange/ingest.py": ["tests/training/exchange/test_ingest.py"],
    "potato/training/reports/report.py": ["tests/training/reports/test_report.py"],
    "potato/training/remote/proc.py": ["tests/training/remote/test_proc.py"],
    "potato/server/safety.py": ["tests/server/test_safety.py"],
    "potato/markup.py": ["tests/project/test_markup.py"],
    "potato/training/exchange/wheel.py": ["tests/training/exchange/test_wheel.py"],
    "potato/training/remote/gpus.py": ["tests/training/remote/test_gpus.py"],
    "potato/training/remote/protocol.py": ["tests/training/remote/test_protocol.py"],
    "potato/config/settings.py": ["tests/project/test_validate.py", "tests/config/test_settings.py"],
    "potato/project/validation.py": ["tests/project/test_validate.py"],
    "potato/training/backends/sshcmd.py": ["tests/training/backends/test_sshcmd.py"],
    "potato/training/core/runs.py": ["tests/training/core/test_runs.py"],
    "potato/training/remote/bundle.py": ["tests/training/test_training_units.py",
                                         "tests/training/remote/test_bundle.py"],
    "potato/training/remote/supervise.py": ["tests/training/remote/test_supervise.py"],
    "potato/training/remote/client.py": ["tests/training/remote/test_client.py"],
    "potato/training/remote/slurm_job.py": ["tests/training/remote/test_slurm_job.py"],
    # issue 22's host side of the media cache (item 3 of issue 26: modules other issues added)
    "potato/training/remote/media_cache.py": ["tests/training/remote/test_media_cache.py",
                                              "tests/training/remote/test_media_store.py",
                                              "tests/training/remote/test_media_receive.py",
                                              "tests/training/remote/test_media_tar.py",
                                              "tests/training/remote/test_media_stream.py"],
    "potato/training/remote/media_store.py": ["tests/training/remote/test_media_store.py",
                                              "tests/training/remote/test_media_cache.py",
                                              "tests/training/remote/test_media_receive.py",
                                              "tests/training/remote/test_media_tar.py",
                                              "tests/training/remote/test_media_stream.py"],
    "potato/training/remote/media_tar.py": ["tests/training/remote/test_media_tar.py",
                                            "tests/training/remote/test_media_receive.py",
                                            "tests/training/remote/test_media_store.py",
                                            "tests/training/remote/test_media_cache.py",
                                            "tests/training/remote/test_media_stream.py"],
    "potato/training/remote/media_receive.py": ["tests/training/remote/test_media_receive.py",
                                                "tests/training/remote/test_media_tar.py",
                                                "tests/training/remote/test_media_store.py",
                                                "tests/training/remote/test_media_cache.py",
                                                "tests/training/remote/test_media_stream.py"],
    "potato/training/lifecycle/retention.py": ["tests/training/lifecycle/test_retention.py"],
    "potato/labels/aggregate.py": ["tests/labels/test_aggregate.py"],
    "potato/labels/agreement.py": ["tests/labels/test_aggregate.py"],
    "potato/schemes/span.py": ["tests/schemes/test_kinds.py"],
    "potato/schemes/rating.py": ["tests/schemes/test_kinds.py"],
    "potato/project/media.py": ["tests/project/test_media.py"],
    "potato/project/validation_media.py": ["tests/project/test_validation_media.py", "tests/project/test_media.py"],
    "potato/server/media_route.py": ["tests/server/test_media_route.py", "tests/project/test_media.py"],
    "potato/training/hub/publish.py": ["tests/training/hub/test_publish.py"],
    "potato/server/connections.py": ["tests/server/test_connections.py"],
    "potato/service.py": ["tests/test_service.py", "tests/server/test_app.py"],
    "potato/server/app.py": ["tests/server/test_app.py", "tests/test_service.py"],
    "potato/training/reports/ratings.py": ["tests/training/reports/test_report.py"],
    # issue 34 item 15: modules the hand-planted bugs survived in
    "potato/training/reports/spans.py": ["tests/training/reports/test_span_report.py"],
    "potato/training/remote/spans.py": ["tests/training/reports/test_span_report.py"],
    "potato/training/web/run_cells.py": ["tests/training/web/test_run_cells.py"],
    "potato/config/upstream.py": ["tests/config/test_upstream.py"],
    "potato/labels/export.py": ["tests/labels/test_export.py"],
    "potato/project/assignment.py": ["tests/project/test_assignment.py"],
    # issue 34, item 15: the Hub, the disk-full spare, the server's side of media sending
    "potato/training/hub/client.py": ["tests/training/hub/test_publish.py"],
    "potato/server/diskfull.py": ["tests/server/test_diskfull.py"],
    "potato/training/exchange/media_bundle.py": ["tests/training/remote/test_media_cache.py"],
    "potato/training/backends/media_push.py": ["tests/training/remote/test_media_stream.py"],
    # regression figures on constant values: the page's cells and the trainer's standardising
    "potato/training/web/rating_cells.py": ["tests/training/reports/test_ratings.py"],
    # issue 34, item 15: the trust boundary's request bodies and streamed uploads
    "potato/server/bodies.py": ["tests/server/test_bodies.py", "tests/server/test_handler.py"],
    "potato/server/uploads.py": ["tests/server/test_uploads.py"],
}

# module -> {mutant id: why it cannot change behaviour}. Ids are printed with each survivor.
EQUIVALENT = {
    "potato/training/exchange/boundary.py": {
        "812e8b5316": "_progress: dropping hi=BIG from number() keeps its default, hi=BIG",
        "3cb6a4c1e0": "_progress: dropping hi=BIG from number() keeps its default, hi=BIG",
        "c2fbfbc9da": "_metric: dropping hi=BIG from number() keeps its default, hi=BIG",
        "0a1024bb1b": "_artifact: dropping hi=BIG from number() keeps its default, hi=BIG",
    },
    "potato/training/exchange/intake.py": {
        "04c8c75bd9": "__call__: events.jsonl's line is json.dumps' (non-ASCII escaped): "
                      "every locale encoding writes the same bytes, with or without utf-8",
        "cf51f13edb": "__call__: events.jsonl's line is json.dumps' (non-ASCII escaped): "
                      "every locale encoding writes the same bytes, with or without utf-8",
        "a7409d9579": "record: a log event from boundary.event always has its level (info by "
                      "default), so the default here is never read",
        "bc0e04aac4": "record: a log event from boundary.event always has its level (info by "
                      "default), so the default here is never read",
        "6aa5a1e516": "record: a log event from boundary.event always has its level (info by "
                      "default), so the default here is never read",
        "3586068fa9": "record: a log event (always a level, never a kind) reads the same "
                      "through run_texts.worker_error_line: level: message",
    },
    "potato/training/exchange/ingest.py": {
        **{k: "_score_kind: the fallback figure (no score in the report) is only returned when "
              "the report has none of SCORES' keys, and takes_over then reads it from a report "
              "that has none either (the old run's, or both): None whichever key, so the "
              "sentence is the same" for k in ("4e26401dcd", "9df4537e02")},
    },
    "potato/training/reports/report.py": {
        "d0db7592c3": "scheme_report: above_baseline is the difference of two values already "
                      "rounded to 4 places: rounding it to 4 or to 5 places gives the same float",
        "3571556a1f": "_baseline: most_common(n)[0] is the same pair for any n (and None): "
                      "Counter sorts the same way for each, ties in first-seen order",
        "8287bf60df": "_baseline: most_common(n)[0] is the same pair for any n (and None): "
                      "Counter sorts the same way for each, ties in first-seen order",
    },
    "potato/training/reports/ratings.py": {
        "d65835a938": "_ranks: every slot of the list is assigned in the loop (order is a "
                      "permutation of its indices), so its initial value is never read",
        "dd83a8c8a1": "_ranks: its only reader is spearman, Pearson's r of the ranks, which an affine map of every rank (- 1 for + 1) leaves as it is",
        "e7fbcfa772": "_ranks: its only reader is spearman, Pearson's r of the ranks, which an affine map of every rank ((i + j) * 2 for (i + j) / 2) leaves as it is",
        "3e07cdb673": "_ranks: its only reader is spearman, Pearson's r of the ranks, which an affine map of every rank (/ 3 for / 2) leaves as it is",
        "0ce04cfd3d": "_ranks: its only reader is spearman, Pearson's r of the ranks, which an affine map of every rank (+ 2 for + 1) leaves as it is",
        "31a72ce23b": "spearman: sum((a + mx)(b - my)) = sum(a(b - my)) + mx * sum(b - my), "
                      "and sum(b - my) = 0: the same sum (to the last bit's rounding)",
        "e2343cb16c": "spearman: sum((a - mx)(b + my)) = sum((a - mx)b) + my * sum(a - mx), "
                      "and sum(a - mx) = 0: the same sum (to the last bit's rounding)",
        "ed540ea9d5": "number_report: mae_below_baseline is the difference of two values "
                      "already rounded to 4 places: rounding it to 4 or to 5 places gives the "
                      "same float",
    },
    "potato/training/remote/proc.py": {
        "5e2b5375db": "run: stdin always a pipe: with no input communicate() closes it at once, "
                      "so the child reads end of file, as from DEVNULL",
    },
    "potato/training/remote/bundle.py": {
        "5f664dc156": "build: had_votes = None instead of False: it is only read as a truth value",
        "b7fbb6c2d1": "build: the heldout file without encoding=utf-8: its lines are json.dumps "
                      "output (ensure_ascii), the same bytes in any locale's encoding",
        "e63676a40c": "build: the heldout file without encoding=utf-8: its lines are json.dumps "
                      "output (ensure_ascii), the same bytes in any locale's encoding",
        "c8ce4ceca8": "build: items.jsonl without encoding=utf-8: its lines are json.dumps output "
                      "(ensure_ascii), the same bytes in any locale's encoding",
        "d3a2586ac2": "build: items.jsonl without encoding=utf-8: its lines are json.dumps output "
                      "(ensure_ascii), the same bytes in any locale's encoding",
    },
    "potato/training/remote/supervise.py": {
        "1437add4ed": "run_worker: eof = None instead of False: it is only read as a truth value "
                      "(`_drain(...) or eof`, `if eof`, `while not eof`)",
        "bd232b3e95": "explain: None instead of a default Supervision when none is given: w is "
                      "read only for a run stopped at a limit, and a default Supervision has no "
                      "limit (None, which %g refuses): an AttributeError instead of a TypeError, "
                      "for a call no caller makes (a run stopped at a limit ran under one)",
    },
    "potato/training/remote/slurm_job.py": {
        "9e621aff3d": "__init__: was_running None instead of False: only its truth is read",
        "c4792a5690": "poll_queue: was_running None instead of False: only its truth is read",
        "5a87bf4ec0": "__init__: requeue_note \"\" instead of None: only its truth is read",
        "67b28321ae": "on_requeue: 51 lines of slurm.out instead of 50: one line more looked at",
        "81ff82b7d4": "reason_from_scontrol: a missing JobState read as \"XXXX\" instead of \"\": "
                      "neither is a state in STATE_REASONS, so both give None",
        "97e4f984a2": "follow: left_queue = None instead of False: it is only read as a truth "
                      "value (`if not left_queue`)",
        "c741f7fd8e": "on_gone: an empty exit_code read as int(\"XX1XX\") instead of int(\"1\"): "
                      "the ValueError is caught and gives returncode 1 all the same",
    },
    "potato/training/remote/client.py": {
        "5adb9d7aeb": "UnixHTTPConnection.connect: socket.socket(SOCK_STREAM): SOCK_STREAM and "
                      "AF_UNIX are both 1 on Linux and the type defaults to SOCK_STREAM",
        "7daf827c4b": "UnixHTTPConnection.connect: socket.socket(AF_UNIX): the type defaults to "
                      "SOCK_STREAM",
        "9c0d620d78": "download_bundle: last_error = \"\" before the loop instead of None: it is "
                      "set again at each try and only read as `last_error or ...`",
        "6b2118a588": "download_bundle: stream_to=False instead of True: request() only asks "
                      "`stream_to is not None`",
        "800f9858d9": "download_bundle: last_error = \"\" at each try instead of None: it is only "
                      "read as `last_error or ...`",
        "b48e97f340": "send_result: tries.append(None) instead of 1: only len(tries) is read",
        "91c05f549c": "send_result: tries.append(2) instead of 1: only len(tries) is read",
    },
    "potato/training/remote/gpus.py": {
        "26788bb4ac": "has_kernels: rpartition(\"_\") for partition(\"_\"): they differ only on "
                      "names with two or more underscores (or none), where the kind is then not "
                      "exactly sm/compute or the number not all digits, so both skip the name",
    },
    "potato/server/safety.py": {
        "b7dec84672": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "3000bfa823": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "639d0a1bd1": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "1c22a2cd9d": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "d13c77d6a6": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "8cc91168f9": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "16af7ddd74": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "6442ef02bb": ("_check_tree: its depth count is unreachable from parse_json, which "
                      "refuses a text with more than MAX_JSON_DEPTH open brackets (_too_deep) "
                      "before decoding, so no decoded tree is deeper than the limit; a lower or "
                      "missing count lets nothing through (issue 33: it only backs _too_deep up)"),
        "cda704e0a4": "_too_deep: a match is one bracket or a quoted string (starts with a quote); "
                      "'XX[{XX' holds the same brackets and no quote",
        "2927618e3f": "_too_deep: a match is one bracket or a quoted string (starts with a quote); "
                      "'XX]}XX' holds the same brackets and no quote",
        "3f20de0b24": "dumps: json takes allow_nan by its truth value: None acts as False",
        "2de4b87bc6": "dumps: json takes allow_nan by its truth value: None acts as False",
        "8eb07a8607": "host_of: only reached with exactly one ':', where any maxsplit gives the "
                      "same first part",
        "1d34dd1054": "host_of: only reached with exactly one ':', where split and rsplit give "
                      "the same first part",
        "5abdf867e7": "host_of: only reached with exactly one ':', where maxsplit 1 or 2 give "
                      "the same first part",
        "8ea4823117": "default_allowed_hosts: an empty bound is already false in 'bound and ...', "
                      "so whether '' is in the tuple never matters",
        "fc96a7107b": "origin: a missing scheme as '' or 'xxxx' is not http(s) either way: None",
        "cc4293967e": "LoginLimiter.failed: keeping a failure exactly window_s old changes nothing: "
                      "retry_after, at that time or later (monotonic), drops it with '<', and "
                      "as the oldest it is cut first when the list is over limit",
    },
    "potato/training/backends/sshcmd.py": {
        "5f9445f4ef": "control_exit_argv: the remote command is cut off with everything from "
                      "'--' on, so which command ssh_argv was given never shows",
        "ca8697ddde": "control_exit_argv: the remote command is cut off with everything from "
                      "'--' on, so which command ssh_argv was given never shows",
        "cd311b6d0d": "control_exit_argv: the remote command is cut off with everything from "
                      "'--' on, so which command ssh_argv was given never shows (None too)",
        "18eb10126e": "model_check_command: model_source.py is ASCII (test_sshcmd checks), "
                      "which the locale's encoding reads as UTF-8 does",
        "ea2b25f9e0": "model_check_command: model_source.py is ASCII (test_sshcmd checks), "
                      "which the locale's encoding reads as UTF-8 does",
    },
    "potato/training/exchange/wheel.py": {
        "5a55aaca46": "_source_digest: the digest is only compared with digests this same code "
                      "made (the stamp, the cache); any fixed separator keeps names and "
                      "contents apart",
        "3a4cc30bb2": "_source_digest: the digest is only compared with digests this same code "
                      "made (the stamp, the cache); any fixed separator keeps names and "
                      "contents apart",
        "6456144acd": "_source_digest: the digest is only compared with digests this same code "
                      "made; 17 hex digits tell sources apart as 16 do",
    },
    "potato/project/validation.py": {
        "4de9a3f9bf": "_rules: a missing server_url as '' or 'xxxx' does not start with https:// "
                      "either way",
        "95e653d478": "_backend_rules: config.load keeps server_url only with a host name "
                      "(else an error and None), so hostname is never empty here",
        "5e7c45ff14": "_acknowledge: matched is only read for its truth: None is false as "
                      "False is",
    },
    "potato/config/settings.py": {
        "083c69e58c": "<module>: a field load() sets on every load; nothing but load() makes a ServerConfig",
        "ae733dd88e": "<module>: a field load() sets on every load; nothing but load() makes a ServerConfig",
        "365d9cd887": "<module>: a field load() sets on every load; nothing but load() makes a Writeback",
        "e8b8ad503c": "<module>: a field load() sets on every load; nothing but load() makes a AutoRetrain",
        "e18f4ff22e": "<module>: a field load() sets on every load; nothing but load() makes a AutoRetrain",
        "2cc1360fa6": "<module>: a field load() sets on every load; nothing but load() makes a ModelTraining",
        "9e30838631": "<module>: a field load() sets on every load; nothing but load() makes a ModelTraining",
        "0e4ab53298": "<module>: a field load() sets on every load; nothing but load() makes a ModelTraining",
        "29c1dd80d0": "<module>: a field load() sets on every load; nothing but load() makes a ModelTraining",
        "1ab5f362bd": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "4b7ea178d1": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "ccc884f636": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "c20ece05ea": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "9f15b0f300": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "5a6650133a": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "16e26742c9": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "0ec56c3595": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "cc19da7ff8": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "99b4d622c2": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "6a3f409d7d": "<module>: a field load() sets on every load; nothing but load() makes a Config",
        "c9fc8cd751": "<module>: a field load() sets on every load; nothing but load() makes a Config (it passes upstream)",
        "15556ff1e6": "<module>: a field load() sets on every load; nothing but load() makes a Config (it passes upstream)",
        "dee1fc434d": "<module>: a field load() sets on every load; nothing but load() makes a Config (it passes key_lines)",
        "91bd773d51": "<module>: a field load() sets on every load; nothing but load() makes a Config (it passes key_lines)",
        "3f2ed8efa5": "<module>: key_lines in repr() or not: only how a Config prints",
        "0c4d82c208": "<module>: key_lines in repr() or not: only how a Config prints",
        "c1b7f2c799": "<module>: key_lines in repr() or not: only how a Config prints",
        "d50271c323": "load: upstream.split reads a None config as an empty one",
        "fbf71862b1": "load: Reader.text reads numbers_ok by its truth value: None acts as False",
        "6b789a81cb": "load: Reader.text reads numbers_ok by its truth value: None acts as False",
        "a8ffe41071": "load: dropping the default None from Reader.text keeps its default, None",
        "bc89b71ae2": "load: dropping the default None from Reader.text keeps its default, None",
        "69d4aab134": "load: Reader.text reads numbers_ok by its truth value: None acts as False",
        "224cc02071": "load: Reader.text reads numbers_ok by its truth value: None acts as False",
        "4d875e8796": "load: dropping the default None from Reader.text keeps its default, None",
        "54b7fe4f3e": "load: dropping the default None from Reader.text keeps its default, None",
        "783b16a32c": "_server: server.debug's default None is false like False: no warning",
        "9e83ffc01a": "_server: ip_network reads strict by its truth value: None acts as False",
        "b0a8978c16": "_server_url: problem is only tested for truth: '' is false like None",
        "5ecf2bdd17": "_aggregation: an absent method None is replaced by 'or \"majority\"'",
        "b786c43c42": "_aggregation: an absent method None is replaced by 'or \"majority\"'",
        "a4b16eb2b1": "writeback.policy: an absent policy None is replaced by 'or \"best\"'",
        "e5c355038c": "writeback.policy: an absent policy None is replaced by 'or \"best\"'",
        "bd9af53209": "Reader.text reads numbers_ok by its truth value: None acts as False",
        "cfa75a4370": "Reader.text reads numbers_ok by its truth value: None acts as False",
        "4c50a75896": "Reader.text reads numbers_ok by its truth value: None acts as False",
        "7b993bb099": "Reader.text reads numbers_ok by its truth value: None acts as False",
        "647753ae20": "Reader.text reads numbers_ok by its truth value: None acts as False",
        "f3f1cfab41": "dropping the default None from Reader.number keeps its default, None",
        "bade266343": "dropping the default None from Reader.number keeps its default, None",
        "22d936e318": "dropping the default None from Reader.number keeps its default, None",
        "55c60021af": "dropping the default None from Reader.text keeps its default, None",
        "f596c9aaba": "dropping the default None from Reader.text keeps its default, None",
    },
    "potato/markup.py": {
        "3ecbfa773a": "esc: dropping quote=True from html.escape keeps its default, quote=True",
    },
    "potato/training/remote/media_cache.py": {
        "62a919180d": "reserve: the record's time is None exactly when its bytes are",
        "fa41c75ffc": "evict: a count and a reservation never share a time: both hold the lock "
                      "alone, one after the other, and each writes a file meanwhile",
        "31c9fb6dc3": "need: a folder looked up afresh for every file: the same answer, more "
                      "stats",
        "80c2149c59": "need: a folder looked up afresh for every file: the same answer, more "
                      "stats",
        "66133c7846": "_reserve: the record's time is None exactly when its bytes are",
        "9aa6e07467": "_usage: os has O_NOFOLLOW here: the fallback is not used",
        "b69cba94ac": "_usage: os has O_NOFOLLOW here: the fallback is not used",
        "77b17cfd87": "_usage: os has O_NOFOLLOW here: the fallback is not used",
        "88d0f1bf37": "_private_dir: the folder is chmod 0700 right after it is made",
        "6d20e0d452": "_private_dir: the folder is chmod 0700 right after it is made",
        "8d80670d65": "pin: the temporary pin's name lives only until the replace; with any "
                      "prefix it is a valid pin name, read the same way meanwhile",
        "573ec6d67f": "pin: the temporary pin's name lives only until the replace; with any "
                      "prefix it is a valid pin name, read the same way meanwhile",
        "e554e273ed": "pin: the temporary pin's name lives only until the replace; with any "
                      "prefix it is a valid pin name, read the same way meanwhile",
        "2a6bac38ff": "need: exclusive=None is false, as False: the lock is taken shared",
        "b94c224b0f": "evict: _evict hands now only to pinned(), which reads the clock itself "
                      "for None",
        "5316929237": "_evict: at exactly the limit the loop's own check (<=) stops before "
                      "any file goes",
        "62600bb46c": "store: a longer prefix of the hash in the hidden name: still hidden, "
                      "still swept",
        "14c898a960": "put: an open without flags finds no file, so the folder is made and the "
                      "open is tried again with the flags",
        "df6400eb7a": "BLOCK: only the size of a read",
        "fb461ef95f": "BLOCK: only the size of a read",
        "02a22394a3": "_CREATE: getattr's default is not used where O_NOFOLLOW exists (Linux)",
        "39c92b5226": "_CREATE: getattr's default is not used where O_NOFOLLOW exists (Linux)",
        "5e2d8f5584": "_CREATE: getattr's default is not used where O_NOFOLLOW exists (Linux)",
        "4b7ea178d1": "_TOKEN: its first value is replaced at the first use",
        "976e2fa526": "_CREATE: with O_CREAT|O_EXCL an open never follows a link at the name "
                      "(POSIX: EEXIST), so O_NOFOLLOW adds nothing",
        "9a6e19902f": "_CREATE: with O_CREAT|O_EXCL an open never follows a link at the name "
                      "(POSIX: EEXIST), so O_NOFOLLOW adds nothing",
    },
    "potato/training/remote/media_receive.py": {
        "0991c8e22a": "receive: the queue's bound only (WRITE_AHEAD // BATCH is 256, over 2)",
        "d8e6626796": "receive: Queue takes a float bound (256.0) as it takes 256",
        "2191a18c69": "receive: a monotonic clock exactly PIN_TOUCH_S later touches the pin one "
                      "read later",
        "71856012cd": "receive: kept() ignores the size when it is given an error",
        "08801b40f9": "receive: kept() ignores the size when it is given an error",
        "cd715bb612": "_read_stream: kept() ignores the size when it is given an error",
        "7f10d08591": "_read_stream: kept() ignores the size when it is given an error",
        "c96d662836": "receive: the writers are always joined (finally), daemon or not",
        "9bf9185fe1": "receive: the writers are always joined (finally), daemon or not",
        "c810e97a6e": "receive: the writers are always joined (finally), daemon or not",
        "262872dc62": "receive: two writer threads at least instead of one: the same files",
        "52477a53ff": "receive: the drain after the end reads the rest in one read instead of "
                      "1 MB reads",
        "42a5886b04": "receive: keep_pin just refreshed (or wrote again) this run's pin, which "
                      "evict's pinned() reads: the same hashes are kept",
        "65fe2a8bb4": "_read_stream: the loop is the try's last statement: break and return "
                      "both reach the finally",
        "a432894b40": "_read_stream: the loop is the try's last statement: break and return "
                      "both reach the finally",
        "d7231d74ea": "_read_stream: the loop is the try's last statement: break and return "
                      "both reach the finally",
        "8d30d0cb56": "_read_stream: the loop is the try's last statement: break and return "
                      "both reach the finally",
        "96880a9100": "_read_stream: a file of exactly SMALL_FILE bytes is stored as it is read "
                      "instead of in memory: the same verified file",
        "ab58606917": "main: stdin's buffer size only",
        "d03c29db0f": "PIN_TOUCH_S: how often a pin is touched (60 or 61 s, far under "
                      "PIN_STALE_S)",
        "8ba13e6c21": "WRITERS: how many writer threads, not what they write",
        "46ba13043a": "WRITE_AHEAD: how far the reader runs ahead (a bound of one batch at "
                      "least), not what is kept",
        "e2912af038": "WRITE_AHEAD: how far the reader runs ahead, not what is kept",
        "e6c2368b9b": "WRITE_AHEAD: how far the reader runs ahead, not what is kept",
        "56f6bae339": "BATCH: how many bytes go to a writer at once, not what is kept",
        "52c2b1b65c": "BATCH: how many bytes go to a writer at once, not what is kept",
        "67ad49f096": "_Writers: the queue's bound only (WRITE_AHEAD // (BATCH + SMALL_FILE) "
                      "is 15, over 2)",
        "77187e21ac": "_start: the loop is the function's last statement: break and return "
                      "both end it",
        "cc0040d295": "_write: kept() ignores the size when it is given an error",
        "ce22707b4c": "_write: kept() ignores the size when it is given an error",
        "57c6fadfd2": "receive: the pin main() just wrote holds the same pairs: read back, the "
                      "same wanted (one read saved, nothing else)",
        "eee7180b36": "main: the pin just written holds the same pairs: receive reads back the "
                      "same wanted (one read saved, nothing else)",
        "9cbf131840": "main: the pin just written holds the same pairs: receive reads back the "
                      "same wanted (one read saved, nothing else)",
        "09446389f3": "wide_pipe: getattr on None falls back to 1031, Linux's F_SETPIPE_SZ: "
                      "the same number",
        "b60e3107b5": "wide_pipe: a name fcntl lacks falls back to 1031, Linux's "
                      "F_SETPIPE_SZ: the same number",
    },
    "potato/training/remote/media_store.py": {
        "62600bb46c": "store: the hidden name's prefix is one character longer: still its own",
        "767089ed22": "put: over=None is false as over=False is",
        "9abaf929f7": "_replace: a short file found first tries a link (which fails on it), then "
                      "the same rename",
        "976e2fa526": "_CREATE: O_EXCL alone never follows a link at the name (open fails with "
                      "EEXIST): O_NOFOLLOW adds nothing",
        "02a22394a3": "_CREATE: os has O_NOFOLLOW here: the fallback is not used",
        "39c92b5226": "_CREATE: os has O_NOFOLLOW here: the fallback is not used",
        "9a6e19902f": "_CREATE: O_EXCL alone never follows a link at the name (open fails with "
                      "EEXIST): O_NOFOLLOW adds nothing",
        "5e2d8f5584": "_CREATE: os has O_NOFOLLOW here: the fallback is not used",
    },
    "potato/training/remote/media_tar.py": {
        "cb731285df": "_tar_number: split's first piece is the same for any maxsplit",
        "b9ca29effe": "_tar_number: split's first piece is the same for any maxsplit",
        "a56a44251f": "tar_header: split's first piece is the same for any maxsplit",
        "66b4180246": "tar_header: split's first piece is the same for any maxsplit",
        "1f8b00f5ca": "tar_header: split's first piece is the same for any maxsplit",
        "3a8a71dce2": "tar_header: split's first piece is the same for any maxsplit",
        "02c0013b06": "tar_header: byte 500 is ustar padding; a prefix is never a wanted hash "
                      "(it adds a '/'), so a longer one is skipped all the same",
        "df6400eb7a": "BLOCK: only the size of the reads that skip a member",
        "fb461ef95f": "BLOCK: only the size of the reads that skip a member",
    },
    "potato/training/core/runs.py": {
        "7bbe686b59": "with_status: in_use_schemes() also read when no row matched: unused then",
    },
    "potato/schemes/span.py": {
        "5dd2bdf6dc": "cell: json.dumps(ensure_ascii=None): json tests the flag's truth; None is "
                      "false, as False",
        "58a4aa504e": "inputs: json.dumps(ensure_ascii=None): json tests the flag's truth; None is "
                      "false, as False",
        "b674dd1023": "suggestion: json.dumps(ensure_ascii=None): json tests the flag's truth; "
                      "None is false, as False",
        "8c50c6147a": "answer_bytes: max(..., default=None): a span scheme always has labels "
                      "(validate refuses an empty list), so the default is never used",
        "58b3903060": "answer_bytes: max(...) without a default: a span scheme always has labels",
        "7e930613ce": "answer_bytes: max(..., default=1): a span scheme always has labels",
        "5c7ddf1e36": "answer_bytes: 201 bytes a span instead of 200: a cap one byte a span more "
                      "generous; the test shows the largest real answer fits either way",
        "049176806a": "answer_bytes: 13 bytes a label character instead of 12: a more generous "
                      "cap (a form-encoded character is at most 12)",
        "f09a7972fd": "answer_bytes: 13 bytes a text character instead of 12: a more generous "
                      "cap (a form-encoded character is at most 12)",
        "5edfa9fadb": "answer_bytes(longest_text=1) by default: validate's call sizes schemes "
                      "against each other, 12 bytes more for every span scheme",
    },
    "potato/schemes/rating.py": {
        "7502dfff79": "_upstream_number: `if cell` always true: an empty cell gives None from "
                      "next()'s default either way",
        "59f9c362d4": "_upstream_number: next() without its default: only reached with a "
                      "non-empty cell (the `if cell` guard), whose first value exists",
        "aa26d87151": "_upstream_number: a whole number read as float (\"70\" -> 70.0): the "
                      "kinds' check makes a whole float an int again (_as_int)",
        "7eae138d45": "_upstream_number: the integer pattern never matches, so float(): the "
                      "kinds' check makes a whole float an int again (_as_int)",
        "42770b76b2": "_end_label: r.text's default None instead of \"\": the `or \"\"` after it "
                      "gives \"\" either way",
        "dd3a03b1e4": "_end_label: r.text's default dropped (None): the `or \"\"` after it gives "
                      "\"\" either way",
        "0e6bfe4db4": "Slider.parse: r.boolean(show_labels) only checks the key; its default (and "
                      "its answer) is not used",
        "51a9e7bbe2": "Slider.parse: r.boolean(show_labels) only checks the key; its default (and "
                      "its answer) is not used",
        "6ca5feffe8": "Slider.check: Number.check never reads the item's text",
        "9fc7b5ef4f": "Slider.check: Number.check never reads the item's text (default None)",
    },
    "potato/labels/aggregate.py": {
        "e5d136e185": "aggregate: an unknown kind's shape \"XXchoiceXX\" instead of \"choice\": "
                      "only spans, number, text and multi are tested for, so both are choices",
        "e57b37adc0": "aggregate: method's default \"XXmajorityXX\": only \"consensus\" is "
                      "tested for, so both defaults mean the majority vote",
        "d6a0abe2c2": "Votes = None: the alias is only used in annotations",
        "3dc6dfcec0": "agreed_spans' sort key (count, -length, start, end, label): start -> end; "
                      "with the same length, sorting by end is sorting by start",
        "c25b898bd8": "agreed_spans' sort key (count, -length, start, end, label): end -> label; "
                      "same count, length and start mean the same end, so the label decides "
                      "either way",
        "0c510f1f1c": "_lower_bound: a total started at 1.0 adds 1/n to every bound of the same "
                      "votes (n, their count, is fixed), and only the bounds' differences "
                      "decide convergence; with no votes the bound is a constant either way",
        "2f6c40e29c": "_lower_bound: max(n, 2) differs from max(n, 1) at n = 1 only, and one "
                      "vote is one class, whose bound is always 0 (prior 1, confusion 1)",
    },
    "potato/training/lifecycle/retention.py": {
        "5c7f4b6cd3": "Holds.held: a Counter reads 0 for a missing run (without adding it), "
                      "so the 'in' test only saves the lookup",
        "9db9f33172": "Holds.release: <= 0 -> < 0 keeps a run's zero count in the Counter "
                      "(one small entry per run ever held) instead of deleting it; held() reads "
                      "0 as not held either way, so no caller sees it",
        "2dd37d9e8a": "Holds.held: > 0 -> >= 0: release deletes a count at 0 and never leaves "
                      "one below it, so a run in the Counter always has a count above 0",
    },
    "potato/training/hub/publish.py": {
        "37dbe4dca0": "Publisher.__init__: _active starts as \"\" instead of None: it is only "
                      "compared with a run id, and no run id is empty",
        "6b8e5edfe2": "check_repo_id: len(v) >= 200: REPO_ID matches at most 96 + 1 + 96 = 193 "
                      "characters, so a longer id is refused by the pattern either way",
        "19b1c7fdf8": "check_repo_id: len(v) > 201: REPO_ID matches at most 193 characters, so "
                      "a longer id is refused by the pattern either way",
        "75a9046fd8": "cannot_publish: no artifact_uri read as 'XXXX' instead of '': neither "
                      "holds '://'",
        "c63ada6fd1": "_start: started.append(None): start only asks whether the list is empty",
        "6ec20a1a0e": "_start: started.append(False): start only asks whether the list is empty",
    },
    "potato/service.py": {
        "98138f967e": "Service: _training None at first: only ever read as a truth value",
        "e6c489b071": "Service: _closed None at first: only ever read as a truth value",
        "515efa9912": "serve: done.wait() without a timeout: the signal handler (main thread) "
                      "sets the event, which ends the wait either way",
        "766ba13508": "serve: done.wait(1.5): the handler's set() ends the wait at once either way",
        "8fde55a462": "serve: start(data_sync=True) without training=True: start's default is "
                      "training=True",
    },
    "potato/server/connections.py": {
        "651ab9c9ff": "_Conn: floor '' at first: floor is read only in a body phase, and "
                      "connection_deadline sets it when one starts",
        "df5e0478da": "_Conn: watch '' at first: service_actions' _ask('') fails and says None, "
                      "as no watch does",
        "f736467a66": "_from_the_biggest: every count 1 higher: the counts only order addresses",
        "04a506069c": "_from_the_biggest: every count doubled: the counts only order addresses",
        "28c426d50c": "_from_the_biggest: an address with no open connection counted 1: its "
                      "connections are all closed, so _oldest gives None for it wherever it sorts",
        "6903e9a027": "_oldest: 'waited a while' always true: waiting is sorted by since, so those "
                      "that waited a while are its head either way (the young ones come again)",
        "f2a6231209": "_oldest: <= for the young ones: one that waited exactly the minimum is "
                      "already in the head, and a repeat later cannot change the first pick",
        "5ba6f0a098": "_readable: poll(1) instead of poll(0): a 1 ms wait, the same readiness",
        "dc14d4961b": "address_key: ip_network(strict=None): None is as false as False",
        "f7940beff8": "process_request: a client without an address asked about as 'XXXX' "
                      "instead of '': neither is an address, so neither is a trusted proxy",
        "d4875ac0ca": "process_request: _oldest(at_work=None): None is as false as False",
        "757e6f5e13": "_mark: trusted None instead of False: only ever read as a truth value",
        "33c5d927fa": "connection_untrusted: trusted None instead of False: only ever read as a "
                      "truth value",
        "5f56b05e7e": "_Conn: sock None: nothing reads _Conn.sock (a connection is found by id() "
                      "of its accepted socket)",
        "013a402f02": "_Conn: trusted None at first: only ever read as a truth value",
        "7eedeeb80d": "_Conn: got None at first: got is read only in a body phase, and "
                      "connection_deadline sets it to 0 when one starts",
        "9854edc38a": "_Conn: got 1 at first: got is read only in a body phase, and "
                      "connection_deadline sets it to 0 when one starts",
        "b84dfadc1a": "_Conn: started None at first: started is read only in a body phase, and "
                      "connection_deadline sets it when one starts",
        "4eaa8ea918": "_Conn: started 1.0 at first: started is read only in a body phase, and "
                      "connection_deadline sets it when one starts",
        "034b81a317": "_Conn: addr 'XXXX' by default: process_request always passes the address",
        "ae4aab2849": "_Conn: limited False by default: process_request always passes it",
        "e7c9c43deb": "evictable: at_work False by default: _oldest always passes at_work",
        "6b0f01045f": "MIN_IDLE_TO_EVICT_S 1.2: _oldest's two lists are the head and the tail of "
                      "one list sorted by since, cut where it crosses the minimum, so every "
                      "minimum gives the same order (as 6903e9a027)",
        "ef02d48f3e": "service_actions: a body cut off keeps deadline '' instead of None: until "
                      "its thread sets or clears its deadline, the next turns find it behind "
                      "again and shut its reads again, which changes nothing",
        "bdc3eae799": "service_actions: a connection closed at its deadline keeps deadline '': "
                      "service_actions passes closed ones over before it reads a deadline",
        "68bd850c0c": "process_request: a client without an address counted under 'XXXX' "
                      "instead of '': every such client shares the one key either way",
        "15fb916a44": "finish_request: the handshake's phase None instead of 'headers': during "
                      "the handshake the connection is not busy, so it may be closed to make "
                      "room and is closed outright at its deadline in any phase but 'body'; "
                      "'' is the only other phase told apart, and the handler's marks reset it",
        "af80d22b9b": "finish_request: the handshake's phase 'XXheadersXX': as None (15fb916a44)",
        "c0681df955": "finish_request: do_handshake_on_connect=None: None is as false as False",
        "515b9d19ef": "process_request_thread: pop() without a default: process_request puts "
                      "each request in _conns before it starts its thread, and only that thread "
                      "takes it out",
        "f1e6dbfce0": "_fd: called by nothing (dead code)",
        "f1649a48a7": "_fd: called by nothing (dead code)",
    },
    "potato/server/media_route.py": {
        "4ba4d105e6": "parse_range: no header read as 'XXXX' instead of '': neither matches _RANGE, "
                      "so both are the whole file",
        "3707fd5b90": "parse_range: an open range's end size + 1 instead of size - 1: min(end, "
                      "size - 1) makes both size - 1",
        "8ffb6e4478": "_item_for: an admin's annotator session is looked up too (a read, no "
                      "side effect) and never used: admins skip every check that reads it",
    },
    "potato/project/validation_media.py": {
        "7570195c89": "_one_kind: 'an' for every kind: both kinds (image, audio) begin with a vowel",
        "149ac7e23f": "_one_kind: 'XXaeiouXX' still holds every vowel, so kind[0] in it is the same",
        "22f0ea67b2": "_one_kind: the 'a' branch is never taken: image and audio take 'an'",
        "dcf2a8593a": "data_errors: the warning callback returns 0 instead of None: media_rules "
                      "never reads what warn returns",
    },
    "potato/project/media.py": {
        "aebf76637c": "shown: < 0x100 -> <= 0x100: U+0100 is printable, so never escaped",
        "c5ffa6560c": "shown: 0x100 -> 257: U+0100 is printable, so never escaped",
        "b9318e67ef": "shown: < 0x10000 -> <= 0x10000: U+10000 is printable, so never escaped",
        "7358816fa7": "shown: 0x10000 -> 65537: U+10000 is printable, so never escaped",
        "5cffa08222": "shown: name[:cap + 2]: a name over cap is cut to out[:cap], which the "
                      "first cap characters fill (each gives at least one)",
        "d8ecfc001f": "local_path: isabs(rel) and rel.startswith('/'): on POSIX isabs is "
                      "exactly startswith('/'), so and/or give the same",
        "d3d21a3381": "_open_inside: the EXDEV OSError's strerror is never shown: open_media "
                      "answers every EXDEV with its own MediaRefused",
        "a1d78b0842": "getattr(os, 'O_CLOEXEC', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "0868eeb3aa": "getattr(os, 'O_CLOEXEC', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "5e2d8f5584": "getattr(os, 'O_CLOEXEC', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "02a22394a3": "getattr(os, 'O_NOFOLLOW', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "39c92b5226": "getattr(os, 'O_NOFOLLOW', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "fc1f7f6d77": "getattr(os, 'O_NOFOLLOW', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "5136a994a1": "getattr(os, 'O_NONBLOCK', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "35318a47dc": "getattr(os, 'O_NONBLOCK', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "f91fb47df5": "getattr(os, 'O_NONBLOCK', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "0f27c25db8": "getattr(os, 'O_DIRECTORY', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "335dc97600": "getattr(os, 'O_DIRECTORY', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "f8969a75e2": "getattr(os, 'O_DIRECTORY', default): the default (0) is only for a platform "
                      "without the flag; Linux has it",
        "0d829edf83": "_jpeg_size: f.read() of the rest of the file instead of 9 bytes: only its "
                      "first 9 are looked at (a step costs more reading, the answer is the same)",
        "63b469c2d2": "_jpeg_size: f.read(10): only head[:9] is looked at, and a read that gets 9 "
                      "bytes of a 10 asked passes 'len(head) < 9' alike",
        "b949710b1b": "_jpeg_size: head[7:10] is head[7:9]: head holds at most 9 bytes",
        "9d15f5462a": "_jpeg_size: a step that reads exactly 4 bytes is the file's end: every later "
                      "step reads fewer, and a frame header needs 9, so both end in None",
        "4a7b9bbadf": "_jpeg_size: a step that reads exactly 4 bytes is the file's end: every later "
                      "step reads fewer, and a frame header needs 9, so both end in None",
        "572442dbc7": "_jpeg_size: RST range up to 0xD8: SOI (0xD8) is in the no-length tuple already",
        "a2f6e19cf2": "_jpeg_size: SOF range up to 0xD0: RST0 (0xD0) is taken by the no-length branch "
                      "before it",
        **{k: "int.from_bytes without its byteorder: it is 'big' by default (Python 3.11+, the "
              "run's; older Pythons raise TypeError, which every size test sees)"
           for k in ("c0a19332fa", "81172f0cf4", "1d03f161f6", "417efd59f0", "98adab2004")},
        "326692f260": "_size_of: a VP8 width read from 3 bytes: the third is above the 0x3FFF mask",
        "55acac74dd": "_size_of: a VP8 height read from 3 bytes: the third is above the 0x3FFF mask",
        "85fb4159ab": "_size_of: VP8L's len(h) >= 25 always holds: the WebP branch needs 30 bytes",
        "1503bffb88": "_size_of: VP8L's len(h) >= 25 always holds: the WebP branch needs 30 bytes",
        "7ca8d970a8": "_size_of: VP8L's bits read from 5 bytes: the fifth gives bits 32-39, which "
                      "neither 14-bit field (bits 0-27) reads",
    },
    "potato/project/assignment.py": {
        "21f19079db": "AllItems.limited = None instead of False: it is only read as a truth value",
        "4cd2a4a067": "AllItems.item_at: store.item_at(total) is past the last active item, so "
                      "it is None, as the guard's None",
        "353b9e147e": "AllItems.item_at: AllItems.total does not read its user",
        "86b697fc75": "Limited.item_at: the check before the transaction is repeated inside it on "
                      "a fresh read, which refuses the same requests (it only saves the lock)",
        "3b29169647": "Limited.item_at: the check before the transaction is repeated inside it on "
                      "a fresh read, which refuses the same requests (it only saves the lock)",
        "142a470498": "Limited.item_at: the quota inside the transaction is reached only with "
                      "position == len(ids) == the length the check before it read, which that "
                      "check already refused at the quota",
    },
    "potato/labels/export.py": {
        **{k: "json takes ensure_ascii by its truth value: None acts as False"
           for k in ("c7a57dd47e", "eeb2e7eb45", "690df9df19")},
        **{k: "aggregate() takes the consensus only for \"consensus\": any other method word "
              "is the majority vote" for k in ("b88c72ea6c", "0f2b58a336", "a9c48ac539")},
        "6b58bc99df": "aggregated: a type no kind has aggregates as a choice, as radio does",
        **{k: "a default or jsonl()'s argument: write() gives label rows as JSON lines for any "
              "rows but \"item\" and any format but \"csv\", so another word (or None) writes "
              "the same bytes" for k in ("19a968e02e", "22e7e5e023", "e4bd8b47eb", "bc8b86eeea",
                                         "886b2031cb", "ffcef55bd1", "72fe31f6c0", "442ecc6ba4",
                                         "dd22c68d0b", "42bdd19b77", "eddd4901f6",
                                         "76850fc534")},
        "210a17c103": "_label_csv: the scheme passed for every column: the other columns are "
                      "strings, which _cell writes before it looks at the scheme",
        **{k: "item_rows: decided is aggregated over the same annotation rows, so a scheme an "
              "item has labels in is always in it" for k in ("8c38b47148", "c210d07eab")},
        **{k: "to_file: newline=None on write turns \"\\n\" into os.linesep, \"\\n\" on "
              "Linux, and keeps the csv module's \"\\r\\n\"" for k in ("190866dcd4",
                                                                 "e82c5e1fa8")},
        **{k: "to_file: write_through changes when the bytes reach the file, not which; the "
              "wrapper is flushed before it is detached" for k in ("f7fc21d9c6", "6ee88fa9c5")},
        "fc408b1a9d": "filename: time.gmtime(None) is the current time, as "
                      "time.gmtime(time.time()) is",
    },
    "potato/config/upstream.py": {
        "42fe3a3232": "ACCEPTED's word is only compared with ACCEPTED itself (POLICY, _parse); "
                      "nothing shows or stores it",
        "0317236c08": "_limit: `value and value > 0`: a 0 is already false in `value and`",
        "0efd529ce8": "split: get_close_matches' first match is the same for n=1 or 2",
        **{k: "split: r.mapping is only called with a value that is not a mapping, whose error "
              "uses neither the valid keys nor `what`" for k in ("6bca4181f0", "70264e04ab")},
        **{k: "_parse: r.boolean's default is what it returns for a missing key, and the value "
              "is not kept (only the error for a non-boolean matters)"
           for k in ("643fb9c96d", "740eb99026", "bc6d14fdb2", "3ff0c3560e")},
        "728e9c9e5c": "_parse: r.text's default is None already",
        "f6786b4300": "_parse: numbers_ok is read for its truth: None acts as False",
        "56afe4f49e": "_parse: a refused url is only read as `url.strip() if url else None`: \"\" "
                      "gives None as None does",
        "904be0b6ff": "data_files: text_codec is only read for its truth: None acts as False",
        **{k: "DisplayField.label's default: _display always passes the label"
           for k in ("4b7ea178d1", "5c27a3e377")},
        **{k: "_display: the label is read as `r.text(...) or \"\"`: a None default gives \"\" "
              "too" for k in ("1bd203dbe3", "c4e8f34313")},
        "bc652392a5": "an accepted key's `why` is read by nothing (only a refused key's is "
                      "shown, and docs/configuration.md lists accepted keys without one)",
    },
    "potato/training/remote/spans.py": {
        "2ebae829d5": "token_tags: open_span is only compared by identity with a span dict "
                      "(`open_span is not span`): \"\" is no span, as None is not",
        "b9c494b6ea": "decode: tag 0 is read as \"O\" either way: names[0] is \"O\"",
        "34c645ce9f": "decode: tag 0 is read as \"O\" either way: names[0] is \"O\"",
        "e6131750c2": "decode: a tag outside the set read as \"XXOXX\": its kind is neither B "
                      "nor I, so it ends a span and starts none, as \"O\" does",
        "bad1ec8bff": "decode: the trailing trim's `end >= start` differs only once the leading "
                      "trim met end (a span of spaces), which `start < end` drops either way",
    },
    "potato/server/diskfull.py": {
        "58bcabf293": "mount_point: '== path' skips the walk past missing folders; the ismount "
                      "walk after it goes up past them by itself (a missing path is no mount)",
    },
    "potato/training/exchange/media_bundle.py": {
        "29b1dbc662": "file_sha256: the read size (whole file for None) changes memory, not the hash",
        "64bf075b5f": "file_sha256: the read size (2 MB) changes memory, not the hash",
        "95856f3b80": "file_sha256: the read size (2 MB) changes memory, not the hash",
    },
    "potato/training/hub/client.py": {
        "02ad1c41e4": "Session: account None for '': read only as 'account or ...' until whoami "
                      "sets it (a read-only sentence comes after whoami)",
        "31452c27c5": "Session: role None for '': role is only compared with 'read'",
        "ad5b66c84d": "Session: role 'XXXX' for '': role is only compared with 'read'",
        "fdc433d12f": "whoami: role 'XXXX' for a missing role: role is only compared with 'read'",
        "46f548c1b6": "create_repo: repo_type None is huggingface_hub's default, a model repo",
        "96448757c5": "create_repo: repo_type left out is huggingface_hub's default, a model repo",
        "43e957d1d1": "create_commit: num_threads (upload threads) changes speed, not the commit",
        "cba76db2bf": "create_commit: num_threads (upload threads) changes speed, not the commit",
        "101ee81a74": "create_commit: num_threads 3 for 2 changes speed, not the commit",
        "69e9ffbc2b": "push: getattr's default dropped: huggingface_hub's CommitInfo always has "
                      "an oid",
        "97f9ce5bc9": "_status_sentence: the read-only branch is unreachable: a read token fails "
                      "in whoami, before any other call",
        "9a06c70f6b": "_status_sentence: the read-only branch is unreachable: a read token fails "
                      "in whoami, before any other call",
        "faeb31f901": "_status_sentence: the read-only branch is unreachable: a read token fails "
                      "in whoami, before any other call",
        "a7810f2909": "_size: a file gone counts 1 byte (0.0 MB) in the step that push replaces "
                      "at once with the file-gone sentence",
        "899461bcf0": "_status_sentence: a repo id here always holds one '/' (checked, or the "
                      "account put before a bare name): [1] is [-1]",
    },
    "potato/training/backends/media_push.py": {
        "619cb179fa": "cache_source: the four host modules are ASCII: any encoding reads them the "
                      "same",
        "d29446d813": "cache_source: the four host modules are ASCII: any encoding reads them the "
                      "same",
        "1cc4bb25d4": "_read: '< 0' for '<= 0': the time left is a float, never exactly 0",
        "c581998394": "_read: each wait 2 s for 1 (tuning: the cancel is still looked at each wait)",
        "4441b20b0a": "_read: the read size changes memory, not what is read",
        "26bb543fbb": "_read: the read size changes memory, not what is read",
        "281ad6b060": "missing: rindex for index: one answer line comes before the stream",
        "2b2996eda7": "missing: the ValueError's words are caught at once, never shown",
        "bdd6ebfdc4": "send: rindex for index: one answer line comes before the stream",
        "43acbb9503": "send: the host says nothing more before the stream ends; a leftover piece "
                      "of the answer line is no answer line",
        "df8f61ddef": "send: the host says nothing more before the stream ends: one newline",
        "49e0359ade": "send: the host says nothing more before the stream ends: nothing to skip",
        "f26a9b04ab": "finish: None for False from the 'enough' test, read only for its truth",
        "d0af576c01": "finish: stop=None for False, read only for its truth",
        "9854edc38a": "Session: sent and total are set by _stream before the stream; before it "
                      "only the one-line list goes, into a 1 MB pipe",
        "88150053c2": "_stream: how the stream is cut into writes: the same bytes go",
        "7c3b531126": "_stream: how the stream is cut into writes: the same bytes go",
        "d11b463f80": "_stream: how the stream is cut into writes: the same bytes go",
        "6cdb7b44a3": "_stream: how the stream is cut into writes: the same bytes go",
        "3914cdb713": "_stream: how the stream is cut into writes: the same bytes go",
        "d40c2e1186": "_stream: how the stream is cut into writes: the same bytes go",
        "f8cc5dbc8b": "_stream: how the stream is cut into writes: the same bytes go",
        "b707f91bad": "_stream: the first step's 'last' 1.0 for 0.0: the monotonic clock is far "
                      "past 1.5 s on a running server",
        "2a123e1cab": "_stream: '>' for '>=' PROGRESS_S: float times are never exactly equal",
        "b74ed28a59": "_stream: a file of exactly ONE_READ read in one block either way",
        "b3a65d078c": "_write_one: the cancel's _Failed words are replaced by the cancel's own "
                      "sentence in _failure",
        "5014c2d6dc": "_write_one: writing without the poll: a full pipe raises BlockingIOError, "
                      "taken as 0 bytes (the same outcome, a busier loop)",
        "f413b81c66": "_write_one: n None for 0, read only for its truth",
        "4e9d673f0e": "_write_one: '>=' for '>' WRITE_STALL_S: float times are never exactly equal",
        "d45cf77b4e": "_ready: register's default mask also asks POLLOUT of a read end, which "
                      "never has it (and POLLIN of a write end)",
        "0932ed09a9": "_ready: each wait in ms for s (tuning: the loops around it wait again)",
        "5c3a21e9df": "_ready: 1001 for 1000 ms a second (tuning)",
        "8b215591a8": "_small: '<=' reads once more after the whole file: an empty read, then "
                      "the same check",
        "3600e6ac51": "_end: 6 s for 5 before SIGKILL (tuning)",
        "96bffbe8e9": "_end: 601 s for 600 for the host's last word (tuning)",
    },
    "potato/server/bodies.py": {
        "19e2b765db": "body: getattr(annotator_session) default: the handler sets "
                      "annotator_session for every request before a route runs",
        "1372988c7e": "body: getattr(annotator_session) default: the handler sets "
                      "annotator_session for every request before a route runs",
        "ad8ff8d8b4": "body: getattr(annotator_session) default: the handler sets "
                      "annotator_session for every request before a route runs",
        "2208c473a9": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 to every such request before a route can read a body",
        "af25029221": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "71d5b2290c": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "699f92000b": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "3ee555ddba": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "4bc7e53324": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "3bd146f8b0": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "b3d241d062": "body: its Transfer-Encoding refusal is a second guard: _check_host answers "
                      "411 first",
        "9397e13b0e": "body: close on 413: _drain closes every connection whose refused body is "
                      "left unread (at once without credentials, else body() refuses again)",
        "b3b1ff876e": "body: close on 413: _drain closes every connection whose refused body is "
                      "left unread (at once without credentials, else body() refuses again)",
        "7feab49f09": "body: _body before the read: replaced by the data, or the read fails the "
                      "request and closes the connection; nothing reads it in between",
        "8ca6b14ed6": "content_length: _body_read on a bad length: the connection closes either "
                      "way; only whether the server lingers (<= 2 s) before closing differs, "
                      "which the client cannot tell",
        "1b11c1e9a3": "content_length: _body_read on a bad length: the connection closes either "
                      "way; only whether the server lingers (<= 2 s) before closing differs, "
                      "which the client cannot tell",
        "2e222c8c42": "_floor_s: getattr(_stall_s) default: parse_request sets _stall_s for every "
                      "request",
        "54e7184f94": "read_body_block: getattr(_stall_s) default: parse_request sets _stall_s "
                      "for every request",
        "75848295a5": "begin_body: getattr(_continue_wanted) default: parse_request sets it for "
                      "every request",
        "c74f90e53f": "begin_body: getattr(_continue_wanted) default: parse_request sets it for "
                      "every request",
        "5ceacb903f": "begin_body: getattr(_continue_wanted) default: parse_request sets it for "
                      "every request",
        "5ec381b962": "begin_body: _continue_wanted = None: only read for its truth",
        "0fd6c2fc2e": "begin_body: _continue_wanted left True: begin_body runs once a request "
                      "(body() and the uploads mark the body read first)",
        "a1e707048d": "read_body_block: getattr(_body_began) default: begin_body sets it before "
                      "any block is read",
        "3136b0766d": "read_body_block: getattr(_body_began) default: begin_body sets it before "
                      "any block is read",
        "5b34b486c0": "body_ended: getattr(_body_began) default: body_ended follows begin_body",
        "9bf20ee8f2": "body_ended: getattr(_body_began) default: body_ended follows begin_body",
        "6d4323ba2f": "read_body_block: at most 4 MB a read: a tuning value (every byte is read "
                      "either way)",
        "d0d29cea7f": "read_body_block: at most 4 MB a read: a tuning value (every byte is read "
                      "either way)",
        "486ab3561f": "read_body_block: now < cut or <= cut: two monotonic floats equal to the "
                      "nanosecond",
        "7943315229": "body_ended: close_connection: both callers close the connection as the "
                      "error passes (except BaseException)",
        "d7338ffc8d": "body_ended: close_connection: both callers close the connection as the "
                      "error passes (except BaseException)",
        "6fb62aee07": "form: a missing Content-Type as '' or 'XXXX': neither holds the form type",
        "b1af190fc3": "_drain: getattr(_body_read) default: _dispatch sets it before any response "
                      "(_drain runs from _head)",
        "b7e94ccdfe": "_drain: getattr(_body_read) default: _dispatch sets it before any response "
                      "(_drain runs from _head)",
        "8a4eb9c990": "_drain: getattr(_body_read) default: _dispatch sets it before any response "
                      "(_drain runs from _head)",
        "937588f060": "_drain: getattr(_refusing) default: _dispatch sets it before any response",
        "35d969c2f2": "_drain: getattr(_refusing) default: _dispatch sets it before any response",
        "99d3e636e7": "_drain: getattr(_refusing) default: _dispatch sets it before any response",
    },
    "potato/server/uploads.py": {
        "2566603380": "_copy_body: getattr(app, 'disk') without its default: App always "
                      "makes a DiskWatch (self.disk), so the default is never used",
    },
}

# modules whose tests run them in subprocesses too (a worker, an agent, a job), where the
# tracer cannot see which lines ran: a mutant with no traced coverage still runs all their tests
SUBPROCESS = {"potato/training/remote/supervise.py", "potato/training/remote/client.py",
              "potato/training/remote/slurm_job.py"}

PER_MUTANT_S = 60  # a mutant whose tests take longer than this (an endless loop) is a timeout
MODULE_BUDGET_S = 900  # past this a module's remaining mutants are not run (reported as such)


def mutants(path: Path):
    """One dict per mutant mutmut makes of ``path``: id, line, desc, build (-> the mutated
    source), scope (the qualname of the outermost function whose body holds the mutant, or None
    when it is evaluated at import) and lines (the first and last line of the statement that
    holds it: a test that ran none of them cannot see the mutant)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider
    from mutmut.mutation.file_mutation import create_mutations, deep_replace

    code = path.read_text()
    here = os.getcwd()
    os.chdir(ROOT)  # mutmut reads its [mutmut] settings from setup.cfg in the working directory
    try:
        module, found, _, _ = create_mutations(str(path), code)
    finally:
        os.chdir(here)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    seen = {}
    for m in found:
        if _skipped(m):
            continue
        before = module.code_for_node(m.original_node).strip()
        after = module.code_for_node(m.mutated_node).strip()
        func = m.contained_by_top_level_function
        where = func.name.value if isinstance(func, cst.FunctionDef) else "<module>"
        key = "%s|%s|%s" % (where, before, after)
        seen[key] = seen.get(key, 0) + 1
        mid = hashlib.sha1(("%s|%d" % (key, seen[key])).encode()).hexdigest()[:10]
        pos = positions.get(m.original_node)
        line = pos.start.line if pos else 0
        desc = "%s: %s  ->  %s" % (where, _short(before), _short(after))
        scope, lines = _place(m.original_node, parents, positions, line)
        yield {"id": mid, "line": line, "desc": desc, "scope": scope, "lines": lines,
               "build": (lambda m=m: deep_replace(module, m.original_node,
                                                   m.mutated_node).code)}


def _place(node, parents, positions, line):
    """(scope, (first, last line of the innermost statement)) of a mutated node; see mutants."""
    import libcst as cst
    chain = []  # node, its parent, ..., the module
    while node is not None:
        chain.append(node)
        node = parents.get(node)
    stmt = next((n for n in chain if isinstance(n, (cst.BaseSmallStatement,
                                                    cst.BaseCompoundStatement))), None)
    pos = positions.get(stmt) if stmt is not None else None
    lines = (pos.start.line, pos.end.line) if pos else (line, line)
    funcs = [i for i, n in enumerate(chain) if isinstance(n, cst.FunctionDef)]
    if not funcs:
        return None, lines
    top = funcs[-1]  # the outermost function: its body runs at each call, the rest at import
    if top == 0 or chain[top - 1] is not chain[top].body:
        return None, lines
    names = [n.name.value for n in chain[top:] if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    if any(isinstance(n, cst.FunctionDef) for n in chain[top + 1:]):
        return None, lines
    return ".".join(reversed(names)), lines


def _skipped(m) -> bool:
    """Prose strings, and the upper/lower-case variants of a string (its XX..XX mutant stays)."""
    import libcst as cst
    if isinstance(m.original_node, cst.SimpleString):
        value = m.original_node.evaluated_value  # bytes for a b"..." literal
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if any(c.isspace() for c in value):
            return True
        mutated = m.mutated_node.evaluated_value
        if isinstance(mutated, bytes):
            mutated = mutated.decode("latin-1")
        return not (isinstance(mutated, str) and mutated.startswith("XX"))
    return False


def _short(s: str, n: int = 90) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n - 3] + "..."


class _Runner:
    """Runs the tests in a forked child of a process that has already imported pytest and the
    third-party modules the tests use, so that a mutant costs a fork and the project's own
    imports, not a fresh interpreter. The project's modules are dropped before each fork, so each
    child imports the (mutated) files anew."""

    def __init__(self, copy: Path, tests):
        self.copy, self.tests = copy, list(tests)  # run_module has made copy the working dir
        import pytest  # noqa: F401 - warmed for the children
        try:
            import tests.conftest  # noqa: F401 - warms the test dependencies
        except Exception:  # noqa: BLE001 - a child reports the same failure as a test failure
            pass
        _forget(copy)
        sys.dont_write_bytecode = True  # the unmutated modules' bytecode stays; a mutant has none

    mutate = staticmethod(lambda target, source: _write(target, source))

    def run(self, timeout: float):
        """('passed'|'failed'|'timeout', seconds)."""
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: its own process group, quiet, exits with pytest's status
            rc = 3
            try:
                os.setpgid(0, 0)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                import pytest
                rc = int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                                      *self.tests]))
            finally:
                os._exit(rc)
        deadline = start + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                return ("passed" if rc == 0 else "failed"), time.monotonic() - start
            if time.monotonic() > deadline:
                try:
                    os.killpg(pid, 9)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                return "timeout", time.monotonic() - start
            time.sleep(0.02)


def _forget(copy: Path) -> None:
    """Drop the project's and the tests' modules, so that the next import reads the files."""
    for name, mod in list(sys.modules.items()):
        if (getattr(mod, "__file__", None) or "").startswith(str(copy)) or \
                name.split(".")[0] in ("potato", "tests"):
            del sys.modules[name]


def _copy_project(dest: Path) -> None:
    skip = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", "mutants", ".venv", "build",
                                  "*.egg-info", "test-output", "annotation_output")
    for name in os.listdir(ROOT):
        src = ROOT / name
        if name in (".git", "mutants", ".venv", "build", "test-output", "annotation_output"):
            continue
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=skip, symlinks=True)
        else:
            shutil.copy2(src, dest / name)


class _Tally:
    """What each mutant came to, the progress lines, and the module's time budget."""

    def __init__(self, rel, todo, budget, verbose):
        self.rel, self.total, self.budget, self.verbose = rel, len(todo), budget, verbose
        self.verdicts, self.survivors, self.done = {}, [], 0
        self.start = time.monotonic()

    def over_budget(self) -> bool:
        return time.monotonic() - self.start > self.budget

    def report(self, entry, kind):
        self.verdicts[entry["id"]] = kind
        self.done += 1
        if kind in ("survived", "no_coverage"):
            self.survivors.append({"id": entry["id"], "line": entry["line"],
                                   "mutant": entry["desc"], "why": kind})
            if self.verbose:
                _say("  %s %s line %d  %s" % (kind, entry["id"], entry["line"], entry["desc"]))
        if self.done % 50 == 0:
            _say("  %d/%d mutants, %d survived so far (%ds)" % (
                self.done, self.total, len(self.survivors), time.monotonic() - self.start))


class _Fast:
    """What tools/mutation_fork.ForkPlugin needs from the driver."""

    def __init__(self, rel, copy, todo, tally, per_mutant):
        self.rel, self.todo, self.tally, self.per_mutant = rel, todo, tally, per_mutant
        self.path = copy / rel
        self.target = str(self.path)
        self.modname = rel[:-3].replace("/", ".")
        self.original = self.path.read_text()
        self.subprocess = rel in SUBPROCESS
        self.tmp = copy
        self.over_budget, self.report = tally.over_budget, tally.report

    def scratch(self, name):
        return str(self.tmp / name)

    def started(self, clean):
        took = sum(t for t, _ in clean.values())
        _say("%s: %d mutants, tests %s (%d tests, %.1fs clean)" % (
            self.rel, self.tally.total, " ".join(MODULES[self.rel]), len(clean), took))

    def write(self, source):
        _write(self.path, source)

    def restore(self):
        _write(self.path, self.original)


_OUT = None  # the real stdout while pytest's report goes to /dev/null


def _say(text: str) -> None:
    print(text, file=_OUT or sys.stdout, flush=True)


def _write(target: Path, source: str) -> None:
    """Write ``source`` to ``target`` and drop its cached bytecode."""
    target.write_text(source)
    for pyc in (target.parent / "__pycache__").glob(target.stem + ".*.pyc"):
        pyc.unlink()


def run_module(rel: str, budget: float, per_mutant: float, verbose: bool, part=None,
               slow_only=False, ids=None) -> dict:
    tests = MODULES[rel]
    missing = [t for t in tests if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        return {"module": rel, "error": "tests not found: %s" % ", ".join(missing)}
    todo = list(mutants(ROOT / rel))
    if part:  # (first, last), 1-based: a long module run in parts
        todo = todo[part[0] - 1:part[1]]
    if ids:
        todo = [e for e in todo if e["id"] in ids]
    tally = _Tally(rel, todo, budget, verbose)
    equivalent = EQUIVALENT.get(rel, {})
    for e in todo:
        if e["id"] in equivalent:
            tally.verdicts[e["id"]] = "equivalent"
    todo = [e for e in todo if e["id"] not in equivalent]
    fast = [] if slow_only else [e for e in todo if e["scope"]]
    slow = [e for e in todo if not e["scope"] or slow_only]
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="potato-mutation-") as tmp:
        copy = Path(tmp)
        _copy_project(copy)
        os.chdir(str(copy))
        sys.path.insert(0, str(copy))
        os.environ["PYTHONPATH"] = str(copy)
        # the installed pytest plugins are not needed and loading them costs seconds
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        try:
            if fast:
                error = _run_fast(rel, copy, fast, tally, per_mutant, slow)
                if error:
                    return {"module": rel, "error": error}
            if slow:
                error = _run_slow(rel, copy, slow, tally, per_mutant)
                if error:
                    return {"module": rel, "error": error}
        finally:
            _forget(copy)
            sys.dont_write_bytecode = False
            os.chdir(here)
            sys.path.remove(str(copy))
    return _result(rel, tests, tally, len(fast), len(slow))


def _run_fast(rel, copy, todo, tally, per_mutant, slow):
    """The fast path (tools/mutation_fork.py); mutants it cannot swap in join ``slow``."""
    global _OUT
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mutation_fork
    finally:
        sys.path.remove(str(ROOT / "tools"))
    import pytest
    plugin = mutation_fork.ForkPlugin(_Fast(rel, copy, todo, tally, per_mutant))
    saved = os.dup(1), os.dup(2)
    try:  # pytest's own report of the (unrun) session is not wanted
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        _OUT = os.fdopen(os.dup(saved[0]), "w", buffering=1)
        pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", *MODULES[rel]],
                    plugins=[plugin])
    finally:
        _OUT.close()
        _OUT = None
        os.dup2(saved[0], 1)
        os.close(saved[0])
        os.close(saved[1])
    if isinstance(plugin.clean, str) or plugin.clean is None:
        return plugin.clean or "pytest did not run (%s)" % " ".join(MODULES[rel])
    for e in todo:
        kind = plugin.results.get(e["id"])
        if kind == "not_run":
            tally.verdicts[e["id"]] = kind
    slow.extend(plugin.slow)
    return None


def _run_slow(rel, copy, todo, tally, per_mutant):
    """Mutants evaluated at import: a fresh import of the project per mutant (_Runner)."""
    runner = _Runner(copy, MODULES[rel])
    outcome, took = runner.run(per_mutant * 5)
    if outcome != "passed":
        return "the tests fail (%s) before any mutation: %s" % (outcome, " ".join(MODULES[rel]))
    limit = min(per_mutant, max(10.0, took * 4))
    print("%s: %d mutants on the slow path (fresh import each; %.1fs clean, limit %.0fs)"
          % (rel, len(todo), took, limit), flush=True)
    target = copy / rel
    original = target.read_text()
    try:
        for e in todo:
            if tally.over_budget():
                tally.verdicts[e["id"]] = "not_run"
                continue
            runner.mutate(target, e["build"]())
            status, _ = runner.run(limit)
            runner.mutate(target, original)
            tally.report(e, {"failed": "killed", "passed": "survived", "timeout": "timeout"}[status])
    finally:
        runner.mutate(target, original)
    return None


def _result(rel, tests, tally, n_fast, n_slow) -> dict:
    counts = {k: 0 for k in ("killed", "survived", "no_coverage", "timeout", "equivalent",
                             "not_run")}
    for kind in tally.verdicts.values():
        counts[kind] += 1
    caught = counts["killed"] + counts["timeout"]
    ran = caught + counts["survived"] + counts["no_coverage"]
    seconds = time.monotonic() - tally.start
    return {"module": rel, "tests": tests, **counts, "total": tally.total,
            "score": round(100.0 * caught / ran, 1) if ran else None,
            "seconds": round(seconds), "per_mutant_s": round(seconds / ran, 2) if ran else None,
            "fast": n_fast, "slow": n_slow, "survivors": tally.survivors,
            "verdicts": tally.verdicts}


def _pick(name: str) -> str:
    if name in MODULES:
        return name
    hits = [m for m in MODULES if Path(m).stem == name or m.endswith("/" + name)]
    if len(hits) != 1:
        sys.exit("tools/mutation.py: no single listed module matches %r; listed: %s"
                 % (name, ", ".join(MODULES)))
    return hits[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append",
                    help="a listed module (path or file stem); repeatable")
    ap.add_argument("--budget", type=float, default=MODULE_BUDGET_S, help="seconds per module")
    ap.add_argument("--per-mutant", type=float, default=PER_MUTANT_S,
                    help="seconds per mutant at most")
    ap.add_argument("--out", default=str(ROOT / "test-output" / "mutation.json"))
    ap.add_argument("--show-survivors", action="store_true", help="print each survivor as found")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--part", help="FIRST-LAST: only these mutants (1-based, as --list counts)")
    ap.add_argument("--id", action="append",
                    help="only this mutant (an id as --list prints it); repeatable")
    ap.add_argument("--slow", action="store_true",
                    help="every mutant on the slow path (a fresh import each): the reference "
                         "the fast path is checked against")
    args = ap.parse_args(argv)
    try:
        import mutmut
    except ImportError:
        sys.exit("tools/mutation.py: mutmut is not installed; run: pip install -e '.[mutation]'")
    chosen = [_pick(m) for m in args.module] if args.module else list(MODULES)
    if args.list:
        for rel in chosen:
            for e in mutants(ROOT / rel):
                print("%s %s:%d %s%s" % (e["id"], rel, e["line"], e["desc"],
                                         "" if e["scope"] else "  [at import]"))
        return 0
    results = []
    for rel in chosen:
        part = tuple(int(x) for x in args.part.split("-")) if args.part else None
        r = run_module(rel, args.budget, args.per_mutant, args.show_survivors, part, args.slow,
                       args.id)
        results.append(r)
        if "error" in r:
            print("%s: NOT RUN: %s" % (rel, r["error"]), flush=True)
            continue
        print("%s: score %s%% (killed %d, timeout %d, survived %d, no coverage %d, equivalent %d,"
              " not run %d; %ds, %s s a mutant; %d fast, %d slow)"
              % (rel, r["score"], r["killed"], r["timeout"], r["survived"], r["no_coverage"],
                 r["equivalent"], r["not_run"], r["seconds"], r["per_mutant_s"], r["fast"],
                 r["slow"]), flush=True)
        for s in r["survivors"]:
            print("  %s %s line %d  %s" % (s["why"], s["id"], s["line"], s["mutant"]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"tool": "mutmut %s" % _version(), "date": time.strftime("%Y-%m-%d"),
                               "results": results}, indent=1))
    print("written: %s" % out)
    low = [r for r in results if "error" in r or (r["score"] or 0) < 90 or r["not_run"]]
    return 1 if low else 0


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("mutmut")
    except Exception:  # noqa: BLE001 - only a label in the report
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
