"""Upstream Potato's top-level config keys and scheme keys: the decided answer for each.

Every top-level key of upstream Potato (github.com/davidjurgens/potato; the 161 of its
documented config schema, and a few older ones its examples use) has one row in ``POLICY``:

- ``implemented``: it works here as it does upstream (``port``, the open forms of
  ``user_config``, ``annotation_codebook_url`` ...);
- ``accepted``: it changes looks, logging or features nothing here relies on; it is read and
  ignored, and ``potato validate`` names all of them in one note (never a --strict failure);
- ``refused``: ignoring it would change who gets in, what annotators are asked, shown, given
  or consent to, how they are paid or where items come from, so the config is refused with the
  reason and what to do. A refused feature that the config turns off (``false``, or a mapping
  with ``enabled: false``) is accepted: it asks for nothing.

``potato.config.upstream`` sorts a config's top level by this table; docs/configuration.md
carries the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Tuple

IMPLEMENTED, ACCEPTED, REFUSED = "implemented", "accepted", "refused"


@dataclass(frozen=True)
class Policy:
    status: str
    why: str  # implemented: what it does here; accepted: what it is; refused: what to do


def _acc(what: str) -> Policy:
    return Policy(ACCEPTED, what)


def _ref(why: str) -> Policy:
    return Policy(REFUSED, why)


_LOOKS = "page looks and templates"
_PLATFORM_API = ("not used here: workers who arrive by the platform's link still get their "
                 "completion code (login: {type: url_direct}, completion_code or "
                 "crowdsourcing), but places, sessions and payments are managed on the "
                 "platform's own site. Remove it.")
_COHORT = ("per-cohort assignment is not implemented here: every annotator would get the same "
           "items. Remove it and use num_annotators_per_item / max_annotations_per_user, or "
           "run one project per cohort.")
_AGENT = ("live-agent annotation (a model acting while annotators watch) is not implemented "
          "here. Remove it; this Potato trains models from labels (model_training).")

_QDA = ("qualitative coding (memos, a codebook annotators grow, cases) is not implemented "
        "here: annotators' memos and new codes would be lost. Remove it, or keep this project "
        "on upstream Potato.")
_DIVERSE = ("diversity_config is not read here (upstream's schema lists it with no documented "
            "settings). Remove it; diversity ordering's settings go under diversity_ordering.")
_RECLAIM = ("reclaiming items an annotator was given but left unlabelled is not done here: an "
            "item given to an annotator stays theirs. Remove it, and set "
            "num_annotators_per_item for the overlap you need.")
_WATCHED = ("records how annotators type and work (and tells them so), which is not recorded "
            "here: the study's behavioural data would be missing. Remove it (or set "
            "enabled: false).")
_ADMIN = ("admin views and analyses not in this Potato (the admin page here shows progress, "
          "agreement and training runs)")
_PHASE = "settings of upstream's phases (phases itself is refused on its own)"
_BWS = ("settings of upstream's best-worst scaling (a best-worst scheme is refused by its "
        "annotation_type)")
_LOGS = "upstream's logging and debug switches (they change nothing here)"
_PUBLISH = ("upstream's dataset publishing and backups (labels here: potato annotations "
            "export; a trained model: model_training.publish)")

POLICY: Dict[str, Policy] = {
    # implemented --------------------------------------------------------------------------
    "port": Policy(IMPLEMENTED, "the port, as server.port"),
    "user_config": Policy(IMPLEMENTED, "allow_all_users (or allow_new_users) true without a "
                                       "user list, require_password false: anyone may log in "
                                       "with a user name, as here"),
    "require_password": Policy(IMPLEMENTED, "false: annotators log in with a user name alone"),
    "require_no_password": Policy(IMPLEMENTED, "true: annotators log in with a user name alone"),
    "annotation_codebook_url": Policy(IMPLEMENTED, "a link to the codebook on the annotate page"),
    "task_description": Policy(IMPLEMENTED, "shown to annotators above the item"),
    "annotation_task_description": Policy(IMPLEMENTED, "shown to annotators above the item"),
    "annotation_instructions": Policy(IMPLEMENTED, "shown to annotators above the item"),
    "num_annotators_per_item": Policy(IMPLEMENTED, "an integer: how many annotators get each "
                                                   "item"),
    "max_annotations_per_item": Policy(IMPLEMENTED, "an integer: at most this many annotators "
                                                    "per item (-1: no limit)"),
    "max_annotations_per_user": Policy(IMPLEMENTED, "an integer: at most this many items per "
                                                    "annotator (-1: no limit)"),
    "require_fully_annotated": Policy(IMPLEMENTED, "true: every scheme needs an answer"),
    "assignment_strategy": Policy(IMPLEMENTED, "fixed_order (data-file order, the default), "
                                               "random (one shuffled order, the same for every "
                                               "annotator) or least_annotated (the items the "
                                               "fewest annotators have labelled or been given "
                                               "first) or active_learning (the model in use "
                                               "ranks the items that need labels) or "
                                               "diversity_clustering (clusters of the items' "
                                               "words, handed out in turn)"),
    "diversity_ordering": Policy(IMPLEMENTED, "items clustered by their words (not a "
                                              "sentence embedding: the server holds no model) "
                                              "and handed out one cluster after another: "
                                              "enabled, num_clusters, items_per_cluster, "
                                              "auto_clusters; the embedding settings are "
                                              "accepted with no effect"),
    "active_learning": Policy(IMPLEMENTED, "the model in use orders the queue: enabled, "
                                           "schema_names, query_strategy (uncertainty, margin, "
                                           "entropy, diversity, hybrid), hybrid_weights, "
                                           "min_instances_for_training, update_frequency, "
                                           "max_instances_to_reorder, random_sample_percent, "
                                           "cold_start_strategy"),
    "login": Policy(IMPLEMENTED, "type: url_direct (or prolific): crowd workers arrive at "
                                 "/?<url_argument>=<their id> and are logged in as that id; "
                                 "type: standard is the user-name login. Other types are "
                                 "refused"),
    "crowdsourcing": Policy(IMPLEMENTED, "provider prolific, mturk, connect, generic, "
                                         "microworkers, sona, clickworker or expert: its id "
                                         "parameter, the ids it keeps, and its completion code "
                                         "or link on the done page"),
    "completion_code": Policy(IMPLEMENTED, "the code the done page shows a crowd worker who "
                                           "has labelled all their items"),
    "auto_redirect_on_completion": Policy(IMPLEMENTED, "true: the done page goes back to the "
                                                       "platform by itself"),
    "auto_redirect_delay": Policy(IMPLEMENTED, "milliseconds before that (rounded up to "
                                               "seconds)"),
    "hide_navbar": Policy(IMPLEMENTED, "true: annotators' pages show no user name and no Log "
                                       "out"),
    "jumping_to_id_disabled": Policy(IMPLEMENTED, "true: no Go to item box; annotators move "
                                                  "with Previous and Save and next"),
    "instance_display": Policy(IMPLEMENTED, "text, dialogue, spreadsheet, code, document, "
                                            "agent_trace, coding_trace, image, audio and "
                                            "video fields on the annotate page"),
    # accepted, not used here ----------------------------------------------------------------
    **{k: _acc(_LOOKS) for k in (
        "site_dir", "site_file", "base_html_template", "header_file", "html_layout",
        "customjs", "customjs_hostname", "ui", "ui_config", "ui_language",
        "layout", "list_as_text", "highlight_linebreaks", "horizontal_key_bindings",
        "keyword_highlights_file", "emphasis_corpus_to_color", "label_colors", "theme",
        "show_progress", "keyboard_shortcuts")},
    **{k: _acc("output formats (the store here is potato.db; export with potato annotations "
               "export)") for k in ("output_annotation_format", "export_annotation_format",
                                    "annotation_output_format", "export")},
    **{k: _acc("features not in this Potato") for k in (
        "alert_time_each_instance", "max_session_seconds", "ai_support",
        "automatic_assignment", "random_seed", "chat_support",
        "icl_labeling", "llm_labeling", "pre_annotation", "agreement_metrics", "adjudication",
        "quality_control", "min_annotators_per_instance", "persist_sessions",
        "session_lifetime_days", "secret_key", "partial_loading",
        "data_cache", "watch_data_directory", "watch_poll_interval",
        "host", "base_css", "allow_skip", "annotation_codebook")},
    # refused --------------------------------------------------------------------------------
    "phases": _ref("upstream's phases (consent, instructions, training, post-study pages) are "
                   "not run here: annotators would skip what they must read or agree to. "
                   "Remove phases and put the instructions in annotation_instructions, or keep "
                   "this project on upstream Potato."),
    "surveyflow": _ref("survey pages (consent, pre- and post-study questions) are not shown "
                       "here. Remove surveyflow, or ask those questions as annotation schemes."),
    "training": _ref("upstream's training quiz (annotators pass it before real items) is not "
                     "run here. Remove training; model training here is model_training."),
    "authentication": _ref("accounts, passwords and single sign-on are not supported: "
                           "annotators log in with a user name. Remove authentication and "
                           "keep the server on a network only your annotators reach."),
    "rbac": _ref("roles are not supported: admins use admin_api_key. Remove rbac."),
    # features that change what annotators are asked or given (issue 36): refused, not warned
    "truth_serum": _ref("upstream's truth serum asks each annotator an extra question (how "
                        "others will answer), which is not asked here. Remove truth_serum, or "
                        "add the question as an ordinary scheme."),
    "thinkaloud": _ref("upstream's think-aloud records and transcribes what annotators say "
                       "while they label (spoken labels included), which is not done here. "
                       "Remove thinkaloud."),
    "boundary_probing": _ref("upstream's boundary probing shows annotators generated variants "
                             "of an item, not made here. Remove boundary_probing."),
    "review_workflow": _ref("upstream's review board routes labelled items to reviewers, "
                            "which is not done here: reviewers would get nothing to review. "
                            "Remove review_workflow; compare annotators on the admin page's "
                            "agreement."),
    "psychometrics": _ref("upstream's psychometrics fits an item response model and routes "
                          "items by it (an item stops being handed out once resolved), which "
                          "is not done here. Remove psychometrics; num_annotators_per_item "
                          "sets how many annotators each item gets."),
    "triage": _ref("upstream's triage hands out items by priority rules with a banner, which "
                   "is not done here: items would come in another order. Remove triage "
                   "(assignment_strategy sets the order; a triage scheme is a different, "
                   "supported thing)."),
    "user_roles": _ref("per-user roles and quotas are not supported. Remove user_roles; use "
                       "max_annotations_per_user for a quota."),
    "prolific": _ref("upstream's link to Prolific's API (study places, concurrent sessions) "
                     "is " + _PLATFORM_API),
    "mturk": _ref("upstream's link to MTurk's API (making HITs) is " + _PLATFORM_API),
    "data_sources": _ref("remote data sources (URLs, S3, Hugging Face, sheets, databases) are "
                         "not read here. Remove data_sources, download the items and list the "
                         "files in data_files."),
    "trace_ingestion": _ref("traces posted to the server while it runs (its webhook, a "
                            "Langfuse poller) are not received here: annotators would never "
                            "see them. Remove trace_ingestion and add the traces to a file in "
                            "data_files (a data file that changes is read again)."),
    "data_directory": _ref("a data directory is not read here. Remove data_directory and "
                           "list its files in data_files."),
    "database": _ref("upstream's database storage is not used: the store here is SQLite in "
                     "output_annotation_dir. Remove database."),
    "attention_checks": _ref("attention checks add items from another file and block "
                             "annotators who fail them; neither happens here. Remove "
                             "attention_checks, or add those items to data_files."),
    "gold_standards": _ref("gold items that score and block annotators are not used here. "
                           "Remove gold_standards; put known items in data_files."),
    "gold_standards_file": _ref("gold items are not used here. Remove gold_standards_file."),
    "live_agent": _ref(_AGENT), "agent_proxy": _ref(_AGENT), "live_coding_agent": _ref(_AGENT),
    "interactive_chat": _ref(_AGENT),
    "cohorts": _ref(_COHORT), "cohort_assignment": _ref(_COHORT),
    "cohort_schemes": _ref(_COHORT), "batch_assignment": _ref(_COHORT),
    "scheme_sets": _ref(_COHORT), "category_assignment": _ref(_COHORT),
    # the rest of upstream's documented schema (issue 36) -----------------------------------
    **{k: _acc(_LOOKS) for k in (
        "custom_footer_html", "header_logo", "task_layout", "ui_debug",
        "keyword_highlight_settings", "spectrogram", "annotator_dashboard")},
    "review_mode": _acc("page navigation (moving on after an answer): here Save and next "
                        "moves on"),
    "__config_file__": _acc("upstream's own bookkeeping (the config file's path)"),
    "config_file": _acc("upstream's own bookkeeping (the config file's path)"),
    **{k: _acc(_BWS) for k in ("_bws_pool_items", "bws_config", "ibws_config")},
    **{k: _acc(_PHASE) for k in ("allow_phase_back_navigation", "debug_phase",
                                 "export_include_phase_data")},
    "corpus_map": _ref("upstream's corpus map lets annotators browse the documents and take "
                       "the ones they choose, which is not offered here: annotators get items "
                       "in the assignment order. Remove corpus_map."),
    **{k: _acc(_ADMIN) for k in ("analytics", "embedding_visualization",
                                 "embeddings", "curation", "datasets")},
    "mace": _acc("MACE annotator-competence estimates are not computed here; "
                 "model_training.aggregation: consensus (Dawid-Skene) estimates each "
                 "annotator's reliability"),
    "audio_annotation": _acc("upstream's waveform cache (audio plays here in the browser's "
                             "own player)"),
    **{k: _acc("output formats (the store here is potato.db; export with potato annotations "
               "export)") for k in ("auto_export_interval",
                                    "export_include_annotation_changes")},
    "data_directory_encoding": _acc("the encoding of data_directory (data_directory itself "
                                    "is refused on its own)"),
    **{k: _acc(_LOGS) for k in ("debug_log", "server_debug", "verbose", "very_verbose")},
    "default_video_fps": _acc("the frame rate of upstream's video annotation tools (a video "
                              "field plays in the browser's own player here; a "
                              "video_annotation scheme is refused on its own)"),
    "item_store": _acc("upstream's item storage backend (items here are read from "
                       "data_files)"),
    **{k: _acc(_PUBLISH) for k in ("publish", "dataset_metadata", "huggingface_backup")},
    "webhooks": _acc("notifications sent to other services on events, which are not sent "
                     "here"),
    "env_substitution": _ref("environment-variable substitution (${VAR} in values) is not "
                             "done here: values would keep the ${...} as written. Remove "
                             "env_substitution and write the values out."),
    "keystroke_logging": _ref("upstream's keystroke logging " + _WATCHED),
    "annotation_telemetry": _ref("upstream's annotation telemetry " + _WATCHED),
    "arena": _ref("upstream's model arena (annotators compare models' answers) is not run "
                  "here. Remove arena, or put each pair of answers in an item."),
    "automation": _ref("rules that act on items as they arrive (routing them, adding them to "
                       "datasets) are not run here: items would not be routed. Remove "
                       "automation."),
    "cot_segmentation": _ref("splitting each item's reasoning into steps for annotators to "
                             "label is not done here: annotators would get the text unsplit. "
                             "Remove cot_segmentation and put the steps in the data file."),
    "judge_alignment": _ref("showing annotators an AI judge's verdict to agree or disagree "
                            "with is not done here. Remove judge_alignment."),
    "judge_calibration": _ref("judge calibration (models score the items and a fraction goes "
                              "to annotators) is not done here: annotators would get every "
                              "item. Remove judge_calibration."),
    "event_template": _ref("event templates (annotators fill an event's slots) are not shown "
                           "here. Remove event_template, or ask each slot as a scheme."),
    "rooms": _ref("multiplayer rooms (annotators vote together) are not run here. Remove "
                  "rooms."),
    "solo_mode": _ref("solo mode (one annotator labels while a model labels the rest) is not "
                      "run here. Remove solo_mode; assignment_strategy: active_learning has "
                      "the model in use choose what annotators label next."),
    "pocket": _ref("pocket mode (a batch of items for a phone, then a redirect) is not run "
                   "here: annotators would get items one by one with no batch limit. Remove "
                   "pocket; max_annotations_per_user caps how many items each gets."),
    "search": _ref("item search, with annotators claiming the items they find, is not "
                   "offered here: annotators get items in the assignment order. Remove "
                   "search."),
    **{k: _ref(_QDA) for k in ("qda_mode", "codebook", "codebook_mode", "codebook_invivo_key",
                               "annotation_ui", "cases")},
    "sessions": _ref("session scoring (items grouped by a key and scored as one session) is "
                     "not done here: annotators would score each item alone. Remove sessions, "
                     "or make one item per session."),
    "diversity_config": _ref(_DIVERSE),
    "instance_reclaim": _ref(_RECLAIM), "reclaim_stale_assignments": _ref(_RECLAIM),
    "per_annotator_quota": _ref("per-annotator quotas (by role) are not supported. Remove "
                                "per_annotator_quota; max_annotations_per_user sets one quota "
                                "for everyone."),
    "format_handling": _ref("document formats (PDFs, spreadsheets converted for display) are "
                            "not handled here: annotators would see the raw file. Remove "
                            "format_handling; items here are text, dialogue, spreadsheet, "
                            "code, HTML document, image, audio and video fields "
                            "(instance_display)."),
    "prestudy": _ref("pre-study pages (consent, questions before the items) are not shown "
                     "here. Remove prestudy, or ask those questions as annotation schemes."),
}

# Upstream scheme keys about looks only: accepted so that an upstream block loads, with no
# effect (ai_support: per-scheme AI help, a feature not here, as the top-level ai_support);
# every kind and every upstream variant (potato.schemes.variants, multirate) takes them.
LOOKS_KEYS = ("annotation_id", "tooltip", "horizontal", "displaying_score", "label_colors",
              "layout", "columns", "display_config", "title", "ai_support")

# Scheme keys of upstream that are refused with a reason (any other unknown scheme key is the
# usual error listing the kind's keys).
SCHEME_HINTS: Dict[str, str] = {
    k: "Upstream's turn-level annotation (one answer per dialogue turn) is not implemented "
       "here: the scheme would get one answer per item. Remove it, or make one item per turn."
    for k in ("turn_level", "turn_binding")}
SCHEME_HINTS["has_free_response"] = (
    "Upstream's free-response box is one of radio and multiselect schemes (there it becomes a "
    "text scheme NAME[free_response] here); on this kind what annotators type would be lost. "
    "Remove it and add a text scheme for the free response.")
SCHEME_HINTS["bad_text_label"] = (
    "Upstream's 'bad text' checkbox beside the spans (the item cannot be annotated) is not "
    "implemented here: annotators' marks would be lost. Remove it and add a multiselect "
    "scheme (for example labels: [bad text]) for items that cannot be annotated.")
# upstream's pairwise: a scheme of several comparisons, and a reasons-and-rationale box
SCHEME_HINTS["dimensions"] = (
    "Upstream's pairwise multi_dimension mode is not implemented here. Remove dimensions "
    "and make one pairwise scheme per dimension (each with its own name, description and "
    "allow_tie).")
SCHEME_HINTS["justification"] = (
    "Upstream's pairwise justification box is not implemented here: what annotators write in "
    "it would be lost. Remove it and add a multiselect scheme for the reasons and a text "
    "scheme for the rationale.")
# upstream's image_annotation: the settings of the tools not drawn here (regions.py)
SCHEME_HINTS.update({k: (
    "Upstream's segmentation masks, freeform drawing, skeletons and their settings are not "
    "implemented here (regions are drawn as boxes, polygons and points): remove it, and list "
    "only bbox, polygon and landmark in tools.") for k in (
        "brush_size", "eraser_size", "mask_opacity", "mask_mode", "fill_mode",
        "fill_tolerance", "freeform_brush_size", "freeform_simplify", "skeletons",
        "segmentation", "text_prompt")})
SCHEME_HINTS.update({k: (
    "Upstream's image viewer options (deep-zoom tiles, key profiles, copying the previous "
    "image's regions) are not implemented here: remove it; the image zooms with + and -.")
    for k in ("viewer", "tiles", "keybinding_profile", "carry_over")})

# The refused features upstream's own code switches off, and the keys that say so: only
# these are accepted when the config turns them off (false, null, or every switch given as
# false). Upstream's schema gives these an ``enabled`` key; surveyflow's older switch is
# ``on`` (unquoted, YAML reads that key as true). Any other refused key is refused whatever
# its value: upstream acts on it whenever it is there (phases, prolific ...).
OFF_SWITCHES: Dict[str, Tuple[Any, ...]] = dict(
    {k: ("enabled",) for k in (
        "annotation_telemetry", "arena", "attention_checks", "automation", "boundary_probing",
        "cases", "category_assignment", "codebook", "corpus_map",
        "event_template", "format_handling", "gold_standards", "judge_alignment",
        "judge_calibration", "keystroke_logging", "pocket", "psychometrics", "qda_mode",
        "rbac", "review_workflow", "rooms", "search", "sessions", "solo_mode", "thinkaloud",
        "trace_ingestion", "training", "triage", "truth_serum")},
    surveyflow=("on", True))
