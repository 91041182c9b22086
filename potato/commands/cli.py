"""``potato ...``: the command line. Each command imports what it needs when it runs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from potato import __version__

class TrainerHelp(argparse.HelpFormatter):
    """Help that lists the trainers and their params, read from the registry only when help
    is printed (the registry is not imported to parse a command line)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "{trainers}" in text or "{params}" in text:
            from potato.training.remote import trainers

            known = trainers.all_trainers()
            text = text.replace("{trainers}", ", ".join(known)).replace(
                "{params}", "; ".join("%s: %s" % (name, ", ".join(p.name for p in info.params)
                                                  or "none") for name, info in known.items()))
        return text.replace("%", "%%")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="potato", description="Potato annotation server and model "
                                "training on local, ssh, SLURM and agent backends.")
    p.add_argument("--version", action="version", version=f"potato {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser("start", help="start the annotation server",
                       description="Start the annotation server for a project config. It refuses "
                                   "to start on a config with errors (see potato validate).")
    s.add_argument("config", metavar="CONFIG", help="the project's YAML config")
    s.add_argument("--host", help="address to bind (default: server.host, else 127.0.0.1)")
    s.add_argument("--port", type=int, help="port (default: server.port, else 8000; 0 picks one)")
    s.set_defaults(func=cmd_start)

    v = sub.add_parser("validate", help="check a config and report every problem",
                       description="Check a config. Exit 0 when there is nothing to report (or "
                                   "only warnings without --strict), 1 otherwise.")
    v.add_argument("config", metavar="CONFIG")
    v.add_argument("--strict", action="store_true", help="warnings fail too (unless acknowledged "
                                                        "under validation.acknowledge)")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument("--upstream", action="store_true", help="also list the config's upstream "
                   "Potato keys: implemented, accepted but unused, blocking (printed anyway "
                   "for a config that has any), and what each does here in a sentence")
    v.set_defaults(func=cmd_validate)

    _annotations_parser(sub)

    t = sub.add_parser("training", help="train models and manage training backends")
    tsub = t.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True
    tr = tsub.add_parser("run", help="queue a training run and follow it to the end",
                         formatter_class=TrainerHelp)
    tr.add_argument("config", metavar="CONFIG")
    tr.add_argument("--trainer", required=True, help="the trainer: {trainers}")
    tr.add_argument("--schemas", required=True, help="comma-separated scheme names")
    tr.add_argument("--backend", help="where the run executes (default model_training.backend)")
    tr.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a param of the trainer (repeat for more); {params}")
    tr.set_defaults(func=cmd_training_run)
    tc = tsub.add_parser("check", help="check that a backend can start a run",
                         usage="%(prog)s [-h] [--json] [--trainer T] [--param KEY=VALUE] "
                               "CONFIG NAME", formatter_class=TrainerHelp,
                         description="Check that backend NAME of CONFIG can start a run "
                                     "(NAME CONFIG, the older order, works too).")
    tc.add_argument("config", metavar="CONFIG")
    tc.add_argument("name", metavar="NAME", help="the backend (model_training.backends)")
    tc.add_argument("--json", action="store_true")
    tc.add_argument("--trainer", metavar="T", help="also find this trainer's model where runs "
                                                   "execute: {trainers}")
    tc.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="the trainer's params (model=... is the one Check resolves); {params}")
    tc.set_defaults(func=cmd_training_check)
    tg = tsub.add_parser("register", help="issue a token for an agent backend")
    tg.add_argument("name", metavar="NAME")
    tg.add_argument("config", metavar="CONFIG")
    tg.set_defaults(func=cmd_training_register)
    _publish_parser(tsub)
    ta = tsub.add_parser("agent", help="run a training agent that polls the server for work")
    ta.add_argument("--server", required=True, metavar="URL", help="the server's URL")
    ta.add_argument("--backend", required=True, metavar="NAME", help="the agent backend")
    ta.add_argument("--token-file", metavar="F",
                    help="read the token from F (default: $POTATO_TRAINING_TOKEN)")
    ta.add_argument("--python", metavar="P", help="interpreter for the worker (default: this one)")
    ta.add_argument("--once", action="store_true", help="run one job, then exit")
    ta.add_argument("--workdir", metavar="D", help="default ~/.cache/potato-training")
    ta.add_argument("--keep", action="store_true",
                    help="keep each job's directory with its bundle after the run (it holds "
                         "the run's labels: remove it when done)")
    ta.add_argument("--slurm-config", metavar="slurm.json",
                    help="submit the worker to SLURM with these settings (the slurm backend's "
                         "keys); --workdir must be on storage the compute nodes share")
    ta.add_argument("--poll-interval", type=float, default=5.0, metavar="S",
                    help="seconds between two polls when there is no work (default 5)")
    ta.add_argument("--max-media-cache-mb", type=float, default=None, metavar="MB",
                    help="bound of this machine's media cache (WORKDIR/media, shared by every "
                         "run; least recently used files go first; default 10240)")
    ta.set_defaults(func=cmd_training_agent)
    return p


def _annotations_parser(sub) -> None:
    a = sub.add_parser("annotations", help="import or export annotations")
    asub = a.add_subparsers(dest="action", metavar="ACTION")
    asub.required = True
    ai = asub.add_parser("import", help="import labels from a JSON Lines file",
                         description='Import labels. Each line: {"id": ..., "<scheme>": label}. '
                                     "Nothing is imported when any line has a problem.")
    ai.add_argument("config", metavar="CONFIG")
    ai.add_argument("file", metavar="FILE.jsonl")
    ai.add_argument("--annotator", help="whose labels these are (not with --format upstream: "
                    "its files name their annotators)")
    ai.add_argument("--format", choices=("jsonl", "upstream"), default="jsonl",
                    help="upstream: FILE is upstream Potato's output folder (or one "
                         "annotated_instances.jsonl)")
    ai.set_defaults(func=cmd_annotations_import)
    ae = asub.add_parser("export", help="export the labels (and the model's predictions)",
                         description="Export the labels, as the admin page does (the same "
                                     "bytes): one row per item, with every annotator's labels, "
                                     "the aggregated label and the model's prediction and "
                                     "confidence, or one row per label.")
    ae.add_argument("config", metavar="CONFIG")
    ae.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout; a "
                    "directory: write into it as PROJECT-items-YYYYMMDD-HHMMSS.jsonl (the "
                    "admin page's name); the folder for --format upstream")
    ae.add_argument("--format", choices=("jsonl", "csv", "upstream"), default="jsonl",
                    help="jsonl (default) or csv; upstream: upstream Potato's layout, one "
                         "folder per annotator with annotated_instances.jsonl (needs -o DIR)")
    ae.add_argument("--rows", choices=("item", "label"), default="item",
                    help="one row per item (default, with the model's predictions) or one row "
                         "per label (annotator, time, the item's aggregated label)")
    ae.set_defaults(func=cmd_annotations_export)


def _publish_parser(tsub) -> None:
    tp = tsub.add_parser("publish", help="publish a run's model to the Hugging Face Hub",
                         description="Publish a successful run's model files and a model card "
                                     "to a Hugging Face Hub repo (needs the publish extra and a "
                                     "write token in HF_TOKEN, or in the variable named by "
                                     "model_training.publish.token_env; through a running "
                                     "server, in the server's environment).")
    tp.add_argument("run_id", metavar="RUN_ID")
    tp.add_argument("config", metavar="CONFIG")
    tp.add_argument("--repo", required=True, metavar="ID", help="OWNER/NAME, or NAME under the "
                                                                "token's account")
    tp.add_argument("--private", action="store_true", help="create the repo private (an "
                                                           "existing repo keeps its visibility)")
    tp.add_argument("--message", metavar="M", help="the commit message")
    tp.set_defaults(func=cmd_training_publish)


def _check_or_exit(path: str, acknowledge: bool = True, items: bool = True):
    """(config, report) for ``path``; prints one line and returns None when it cannot be read.
    ``acknowledge``: apply ``validation.acknowledge`` (potato validate alone reads it);
    ``items``: read the items too (potato validate; the commands that load them do it once)."""
    from potato.config.settings import ConfigError
    from potato.training import backends  # noqa: F401 (registers the kinds whose keys it reads)
    from potato.project.validation import check

    try:
        return check(path, acknowledge, items)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def print_report(report, out=None) -> None:
    out = out or sys.stdout
    for kind, items in (("error", report.errors), ("warning", report.warnings),
                        ("acknowledged", report.acknowledged), ("note", report.notes)):
        for p in items:
            print(f"{kind}: {p.format()}", file=out)


def cmd_validate(args) -> int:
    checked = _check_or_exit(args.config)
    if checked is None:
        if args.json:
            print(json.dumps({"ok": False, "errors": [{"message": "cannot read config"}]}))
        return 1
    cfg, report = checked
    from potato.config.upstream_report import migration_report, report_lists

    show_upstream = args.upstream or cfg.upstream.seen
    if args.json:
        out = report.as_dict(args.strict)
        if show_upstream:
            out["upstream"] = report_lists(cfg.upstream)
        print(json.dumps(out, indent=2))
    else:
        print_report(report)
        if show_upstream:
            print("\n".join(migration_report(cfg.upstream, len(report.errors),
                                             why=args.upstream)))
        counts = (f"{len(report.errors)} error(s), {len(report.warnings)} warning(s), "
                  f"{len(report.acknowledged)} acknowledged")
        verdict = "OK" if report.ok(args.strict) else "FAILED"
        print(f"{args.config}: {verdict} ({counts})")
    return 0 if report.ok(args.strict) else 1


def load_valid_config(path: str):
    """The config, or None after printing its errors (the same messages as potato validate).
    Every warning is printed: the ``validation`` block is read by ``potato validate`` only."""
    checked = _check_or_exit(path, acknowledge=False, items=False)
    if checked is None:
        return None
    cfg, report = checked
    if report.errors:
        print_report(report, sys.stderr)
        print(f"{path} has {len(report.errors)} error(s); fix them (potato validate {path} "
              f"lists them) and try again.", file=sys.stderr)
        return None
    for p in report.warnings:
        print(f"warning: {p.format()}", file=sys.stderr)
    return cfg


def cmd_start(args) -> int:
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    from potato.service import serve

    return serve(cfg, host=args.host, port=args.port)


def cmd_annotations_import(args) -> int:
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    if args.format == "upstream":
        from potato.labels.upstream_output import import_upstream

        return import_upstream(cfg, args.file)
    if not args.annotator:
        print("error: --annotator is required: name whose labels these are.", file=sys.stderr)
        return 1
    from potato.labels.annotations import import_file

    return import_file(cfg, args.file, args.annotator)


def cmd_annotations_export(args) -> int:
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    if args.format == "upstream":
        from potato.labels.upstream_output import export_upstream

        return export_upstream(cfg, args.output)
    from potato.labels.annotations import export_file

    return export_file(cfg, args.output, args.rows, args.format)


def cmd_training_run(args) -> int:
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    from potato.commands.training import run_command

    return run_command(cfg, args)


def cmd_training_check(args) -> int:
    _config_first(args)
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    from potato.commands.training import check_command

    return check_command(cfg, args.name, args.json, args.trainer, args.param)


def _config_first(args) -> None:
    """``training check CONFIG NAME``, and the older ``NAME CONFIG``: the config is the one
    that is a file (or is named like one)."""
    import os

    def looks(path):
        return os.path.isfile(path) or path.endswith((".yaml", ".yml"))

    if looks(args.name) and not looks(args.config):
        args.config, args.name = args.name, args.config


def cmd_training_register(args) -> int:
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    from potato.commands.register import register

    return register(cfg, args.name)


def cmd_training_publish(args) -> int:
    cfg = load_valid_config(args.config)
    if cfg is None:
        return 1
    from potato.commands.publish import publish_command

    return publish_command(cfg, args)


def cmd_training_agent(args) -> int:
    from potato.training.remote.poll import serve

    return serve(args)


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
