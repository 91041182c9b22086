"""HTML pages. Every value from items, labels or users goes through ``esc`` (item text is
untrusted: a data file may hold ``<script>``), and pages carry a strict Content-Security-Policy
set by the handler, so inline event handlers and injected scripts do not run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from potato.project import display, media
from potato.config.crowd import Completion
from potato.config.settings import Config
from potato.markup import Safe, esc, render


def layout(title: str, body: str, cfg: Config, user: Optional[str] = None,
           admin: bool = False, scripts: str = "", head: str = "") -> str:
    nav = []
    if user and not cfg.upstream.hide_navbar:
        nav.append(f'<span class="who">Annotator: <b>{esc(user)}</b></span>'
                   f'<form method="post" action="/logout" class="inline">'
                   f'<button type="submit" class="link">Log out</button></form>')
    if admin:
        nav.append('<a href="/admin">Admin</a><a href="/admin/training">Training</a>')
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} · {esc(cfg.annotation_task_name)}</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="data:,">{head}
</head><body>
<header><a class="brand" href="/">{esc(cfg.annotation_task_name)}</a><nav>{''.join(nav)}</nav></header>
<main>
{body}
</main>
{scripts}
</body></html>
"""


def error_page(cfg: Config, status: int, message: str, admin: bool = False,
               path: str = "") -> str:
    """An error as a page; an admin's stays inside the admin layout, with a way back."""
    if admin:
        back = ('<a href="/admin/training">Back to Training</a>'
                if path.startswith("/admin/training") else '<a href="/admin">Back to Admin</a>')
    else:
        back = '<a href="/">Back to the start page</a>'
    return layout(f"Error {status}", f'<h1>Error {status}</h1><p class="error">{esc(message)}</p>'
                  f'<p>{back}</p>', cfg, admin=admin)


def login_page(cfg: Config, error: str = "", next_url: str = "/annotate") -> str:
    err = f'<p class="error" role="alert">{esc(error)}</p>' if error else ""
    return layout("Log in", f"""<h1>Log in to annotate</h1>{err}
<form method="post" action="/login" class="card">
  <input type="hidden" name="next" value="{esc(next_url)}">
  <label for="username">Your username</label>
  <input id="username" name="username" autocomplete="username" required maxlength="64"
         pattern="[A-Za-z0-9_.@+\\-]+" autofocus>
  <p class="hint">Letters, digits and <code>_ . @ + -</code>. Use the same name next time to
  resume where you left off.</p>
  <button type="submit">Start annotating</button>
</form>""", cfg)


def admin_login_page(cfg: Config, error: str = "", next_url: str = "/admin") -> str:
    err = f'<p class="error" role="alert">{esc(error)}</p>' if error else ""
    return layout("Admin log in", f"""<h1>Admin</h1>{err}
<form method="post" action="/admin/login" class="card">
  <input type="hidden" name="next" value="{esc(next_url)}">
  <label for="key">Admin key (<code>admin_api_key</code> in the config)</label>
  <input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
  <button type="submit">Log in</button>
</form>""", cfg)


@dataclass
class Annotating:
    """What the annotate page shows one annotator now: ``item`` (None: the end of the queue)
    at ``position`` of ``total`` in their queue, ``done`` of them labelled by them, the first
    they have not labelled at ``first_unlabelled``; their ``labels`` of the item and the
    model's ``predictions`` for it, by scheme."""

    user: str
    item: Optional[Dict[str, Any]]
    position: int
    total: int
    done: int
    labels: Dict[str, Any] = field(default_factory=dict)
    predictions: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    admin: bool = False
    first_unlabelled: int = 0
    completion: Optional[Completion] = None  # a crowd worker's code and link back, at the end


def annotate_page(cfg: Config, now: Annotating, max_body: int = 0) -> str:
    """``max_body``: the most bytes the server takes in one save (the page checks before it
    sends, so that an answer too long to save stays in the form with the reason)."""
    user, item, position, total, done = now.user, now.item, now.position, now.total, now.done
    labels, predictions, admin = now.labels, now.predictions, now.admin
    first_unlabelled = now.first_unlabelled
    progress = (f'<p class="progress"><progress max="{total}" value="{done}"></progress> '
                f'{done} of {total} items labelled by you</p>')
    if item is None:
        skipped = (f'<p>Some items have no label from you yet: <a href="/annotate?resume=1" '
                   f'id="resume">go to the first of them (item {first_unlabelled + 1})</a>.</p>'
                   if first_unlabelled < total else "")
        done_html, head = completion_html(now.completion) if now.completion else ("", "")
        if cfg.upstream.crowd is not None and total == 0:  # nothing given: nothing earned
            body = ('<h1>No items for you</h1><p id="crowd-no-items">Every item of this study '
                    'has all the annotators it needs, so there is no work for you here and no '
                    'completion code. Return the study on your platform (or tell the '
                    'researcher).</p>')
            return layout("No items", body, cfg, user, admin)
        if cfg.upstream.crowd is not None and not now.completion:
            skipped += ("<p>Your completion code is shown here once each of your items has a "
                        "label.</p>")
        body = (f"<h1>All done</h1>{progress}<p>You have reached the end of the items. "
                f'Thank you!</p>{done_html}{skipped}<form method="post" action="/annotate">'
                f'<input type="hidden" name="position" value="{position}">'
                f'<button name="action" value="prev">Previous item</button></form>')
        return layout("All done", body, cfg, user, admin, head=head)
    record = display.record(item)  # what the schemes show of it (pairwise: the responses)
    fields, key = [], 1
    for scheme in cfg.schemes:
        current = labels.get(scheme.name)
        fields.append(scheme.kind.fieldset(scheme.kind.initial(record) if current is None
                                           else current, key, record))
        key += scheme.kind.key_count()
    with_media = bool(display.media_kinds(cfg))
    scripts = ['<script src="/static/annotate.js"></script>'] + (
        ['<script src="/static/media.js"></script>'] if with_media else []) + [
        f'<script src="/static/{esc(name)}"></script>'
        for name in dict.fromkeys(s.kind.script for s in cfg.schemes if s.kind.script)]
    # The exact text as JSON: HTML turns CR LF into LF, and span offsets count every character.
    text_attr = (f' data-text="{esc(json.dumps(item["text"]))}"'
                 if any(s.kind.marks_text for s in cfg.schemes) else "")
    suggestions = _suggestions(cfg, predictions)
    item_text = f'<div class="item-text" id="item-text"{text_attr}>{esc(item["text"])}</div>'
    views = "".join(dict.fromkeys(str(s.kind.view(record)) for s in cfg.schemes))
    # a media item alone, or a text made of a list a scheme shows (its views)
    ip = cfg.item_properties  # (a media path in text_key: the media is shown, not the path)
    if not text_attr and (not item["text"] or ip.text_key in dict(media.keys(cfg)).values() or
                          isinstance(record.get(ip.text_key), list)):
        item_text = ""
    first_open = min(first_unlabelled, total)
    zero = (" (<kbd>0</kbd> the tenth)" if any(k == "0" for s in cfg.schemes
                                                for k in s.label_keys) else "")
    resume = (f'<a href="/annotate?resume=1" id="resume">Go to the first item you have not '
              f'labelled (item {first_open + 1})</a>' if first_open < position else "")
    body = f"""{progress}{display.instructions(cfg)}
{'<div class="media-layout">' if with_media else ''}
<article class="item" aria-label="Item to annotate">
  <p class="item-id">Item {position + 1} of {total} · <code>{esc(item["id"])}</code></p>
  {display.fields(cfg, item, Safe(item_text))}{views}
  {''.join(suggestions)}
</article>
<form method="post" action="/annotate" id="annotate-form" data-max-body="{max_body}">
  <input type="hidden" name="item_id" value="{esc(item["id"])}">
  <input type="hidden" name="position" value="{position}">
  {''.join(fields)}
  <div class="actions">
    <button type="submit" name="action" value="prev" {"disabled" if position == 0 else ""}>&larr; Previous</button>
    <button type="submit" name="action" value="next" class="primary">Save and next &rarr;</button>
  </div>
  <p class="error" id="required-missing" role="alert" hidden></p>
  <p class="warning" id="nothing-chosen" role="alert" hidden>Nothing is chosen for this item.
  Choose a label (<kbd>1</kbd>–<kbd>9</kbd>), or press <kbd>Enter</kbd> again to skip it.</p>
  <p class="hint">Keys: <kbd>1</kbd>–<kbd>9</kbd>{zero} choose a label, <kbd>A</kbd> accepts the
  model's suggestion, <kbd>Enter</kbd> saves and moves on, <kbd>&larr;</kbd> goes back.
  {resume}</p>
</form>
{'' if cfg.upstream.no_jump else JUMP}{'</div>' if with_media else ''}"""
    return layout("Annotate", body, cfg, user, admin, "".join(scripts))


JUMP = """<form method="get" action="/annotate" class="jump"><label>Go to item
  <input name="item" size="14" maxlength="200" placeholder="id or number" autocomplete="off">
  </label> <button type="submit">Go</button></form>"""


def completion_html(c: Completion) -> Tuple[str, str]:
    """(the done page's part for a crowd worker, the <head>'s redirect): their code, the
    message, the link back to their platform; a redirect to that link after the delay (a
    meta refresh: the page's policy runs no inline script)."""
    code = render('<p class="completion">Your completion code for {label}: <code '
                  'id="completion-code">{code}</code></p>', label=c.label, code=c.code) \
        if c.code else ""
    message = render('<p id="completion-message">{m}</p>', m=c.message) if c.message else ""
    link = render('<p><a class="button primary" id="completion-return" href="{url}">Return '
                  'to {label}</a>{when}</p>', url=c.url, label=c.label, when=render(
                      " (this page goes there by itself in {s} s)", s=c.redirect_after)
                  if c.redirect_after is not None else "") if c.url else ""
    head = render('<meta http-equiv="refresh" content="{s};url={url}">', s=c.redirect_after,
                  url=c.url) if c.redirect_after is not None else ""
    return code + message + link, head


def _suggestions(cfg: Config, predictions: Dict[str, Any]) -> List[str]:
    """The model's suggestions for an item, one per scheme that has one: a label to accept,
    a pre-selected value, or the kind's own (spans)."""
    suggestions = []
    for scheme in cfg.schemes:
        p = predictions.get(scheme.name)
        if p and scheme.kind.suggests_labels and _choice_label(p["label"]):
            label = ", ".join(p["label"]) if isinstance(p["label"], list) else p["label"]
            labels_json = json.dumps(p["label"] if isinstance(p["label"], list)
                                     else [p["label"]])
            suggestions.append(f'<p class="suggestion" data-scheme="{esc(scheme.name)}" '
                               f'data-labels="{esc(labels_json)}">Model suggests: '
                               f'<b>{esc(label)}</b>, {p["confidence"]:.2f} '
                               f'<button type="button" class="link accept-suggestion">accept '
                               f'(<kbd>A</kbd>)</button></p>')
        elif p and scheme.kind.preselect(p["label"]) is not None:  # likert, slider, number
            value = scheme.kind.preselect(p["label"])
            suggestions.append(f'<p class="suggestion suggestion-value" data-scheme='
                               f'"{esc(scheme.name)}" data-value="{esc(value)}">Model suggests '
                               f'for {esc(scheme.name)}: <b>{esc(value)}</b> (pre-selected '
                               f'where you have not answered; change it if you disagree)</p>')
    return suggestions + [str(s.kind.suggestion(predictions.get(s.name))) for s in cfg.schemes]


def _choice_label(label: Any) -> bool:
    """A choice prediction worth offering: a label, or a non-empty list of labels (an empty
    list, e.g. a span item whose every span fell below min_confidence, suggests nothing)."""
    return isinstance(label, str) or isinstance(label, list) and bool(label) and all(
        isinstance(x, str) for x in label)


def admin_page(cfg: Config, stats: Dict[str, Any], debug_note: str = "",
               counts: Optional[Dict[str, Dict[str, int]]] = None,
               agreement: Optional[Dict[str, Dict[str, Any]]] = None) -> str:
    crowd = cfg.upstream.crowd is not None  # a column of each worker's platform ids
    rows = "".join(f"<tr><td>{esc(a['name'])}</td><td>{a['items']}</td>" + (
        "<td>%s</td>" % esc(", ".join(f"{k}={v}" for k, v in a.get("crowd_ids", {}).items()))
        if crowd else "") + "</tr>" for a in stats["annotators"]) or \
        '<tr><td colspan="2">No annotators yet</td></tr>'
    ids_head = '<th scope="col">Platform ids</th>' if crowd else ""
    schemes = "".join(f"<li><b>{esc(s.name)}</b> ({esc(s.annotation_type)}): "
                      f"{esc(s.kind.summary())}</li>" for s in cfg.schemes)
    note = f'<p class="warning">{esc(debug_note)}</p>' if debug_note else ""
    counts_html = _label_counts(counts or {}) + agreement_html(agreement or {})
    return layout("Admin", f"""<h1>Admin</h1>{note}
<section class="card"><h2>Project</h2>
<p>{_count(stats["items"], "item")} · {_count(stats["annotations"], "label")} ·
{_count(len(stats["annotators"]), "annotator")}</p>
<ul>{schemes}</ul>
<p><a href="/admin/training">Training</a> · <a href="/admin/training/runs">All runs</a> ·
export the labels, one row per item (with every annotator's label, the aggregated label and the
model's prediction and confidence):
<a href="/admin/export.jsonl" id="export-items-jsonl" download>JSON Lines</a> ·
<a href="/admin/export.csv" id="export-items-csv" download>CSV</a>; one row per label (with
the annotator, the time and the item's aggregated label):
<a href="/admin/export.jsonl?rows=label" id="export-jsonl" download>JSON Lines</a> ·
<a href="/admin/export.csv?rows=label" id="export-csv" download>CSV</a> ·
<a href="/admin/export-upstream.zip" id="export-upstream" download>upstream Potato's layout
(a folder per annotator, zipped)</a>. The same as <code>potato annotations export CONFIG
--rows item|label --format jsonl|csv</code> (one row per item unless told).</p>{counts_html}</section>
<section class="card"><h2>Annotators</h2>
<table><thead><tr><th scope="col">Annotator</th><th scope="col">Items labelled</th>{ids_head}</tr></thead>
<tbody>{rows}</tbody></table></section>
<form method="post" action="/admin/logout"><button type="submit">Log out of admin</button></form>
""", cfg, admin=True)


def _count(n: int, noun: str) -> str:
    return "%d %s%s" % (n, noun, "" if n == 1 else "s")


def _label_counts(counts: Dict[str, Dict[str, int]]) -> str:
    """Per scheme, the items whose majority label is each label."""
    tables = []
    for scheme, per in counts.items():
        cells = "".join(render("<tr><th scope=\"row\">{l}</th><td>{n}</td></tr>", l=label, n=n)
                        for label, n in per.items())
        tables.append(render('<table class="label-counts"><caption>{s}: items by majority label'
                             '</caption><tbody>{cells}</tbody></table>', s=scheme,
                             cells=Safe(cells)))
    return "".join(tables)


def _kappa(value: Optional[float]) -> str:
    return "not defined (one label throughout)" if value is None else "%.3f" % value


def agreement_html(summary: Dict[str, Dict[str, Any]]) -> str:
    """Per scheme: items labelled, unlabelled and tied, and the annotators' agreement."""
    parts = []
    for scheme, a in summary.items():
        ties = "" if a["ties"] is None else render(", {t} tied (no single most frequent "
                                                   "label)", t=a["ties"])
        lines = [render("<li>Cohen's κ ({x} and {y}): {k} over the {n} item(s) that exactly "
                        "these two labelled</li>", x=c["annotators"][0], y=c["annotators"][1],
                        k=_kappa(c["kappa"]), n=c["items"]) for c in a["cohen"]]
        if a["more_pairs"]:
            lines.append(render("<li>and {n} more pair(s)</li>", n=a["more_pairs"]))
        f = a["fleiss"]
        if f:
            lines.append(render("<li>Fleiss' κ: {k} over the {n} item(s) with {r} annotators "
                                "each</li>", k=_kappa(f["kappa"]), n=f["items"],
                                r=f["annotators_per_item"]))
        reg = a.get("regions")
        if reg:
            lines.append(render("<li>regions: mean F1 {f} between two annotators' regions "
                                "(the same object: same label, IoU at least 0.5), over {n} "
                                "pair(s) of annotators of an image</li>", f="%.3f" % reg["f1"],
                                n=reg["pairs"]))
        elif "regions" in a:
            lines.append(Safe("<li>agreement: no image has two or more annotators yet</li>"))
        if not lines and a["ties"] is not None:
            lines.append(Safe("<li>agreement: no item has two or more annotators yet</li>"))
        parts.append(render('<div class="agreement" data-scheme="{s}"><p><b>{s}</b>: {l} of '
                            '{n} items labelled, {u} unlabelled{t}</p><ul>{lines}</ul></div>',
                            s=scheme, l=a["labelled"], n=a["items"], u=a["unlabelled"],
                            t=Safe(ties), lines=Safe("".join(lines))))
    return "".join(parts)


def json_script(data: Any) -> str:
    """JSON safe to place inside a <script type="application/json"> element."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
