"""What the annotate page shows of an item besides the schemes: the task's instructions and
codebook link (upstream's ``task_description`` / ``annotation_instructions`` /
``annotation_codebook_url``), and upstream's ``instance_display`` fields of type text, dialogue
(a list of turns with speakers), spreadsheet (a small table), code (monospaced, with line
numbers unless ``show_line_numbers: false``; no colouring), document (the item's HTML,
rebuilt from an allowlist: potato/project/html_doc.py) and agent_trace / coding_trace (an
agent's steps: potato/project/traces.py); and the item's image, audio
or video (``item_properties.image_key`` / ``audio_key`` / ``video_key``, or upstream's image,
audio and video fields): the image scaled to fit (full size on click, or Enter on its button),
the browser's own audio or video player, or a placeholder that says why the file cannot be
shown.

Every value comes from a data file and is escaped (``markup.render``); nothing here writes a
script or a style attribute (the page's Content-Security-Policy allows neither). Dialogues and
tables are cut at ``MAX_ROWS`` rows and ``MAX_COLUMNS`` columns, with a line that says so.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List
from urllib.parse import quote

from potato.project import html_doc, media, traces
from potato.markup import Safe, join, render

MAX_ROWS = 200
MAX_COLUMNS = 30
MAX_CODE_LINES = 2000


def instructions(cfg) -> Safe:
    up = cfg.upstream
    parts = []
    if up.instructions:
        parts.append(render('<div class="instructions">{t}</div>', t=up.instructions))
    if up.codebook_url:
        parts.append(render('<p class="codebook"><a href="{u}" target="_blank" '
                            'rel="noopener noreferrer">Codebook</a></p>', u=up.codebook_url))
    return join(parts)


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if value is not None else ""


def _more(n: int, shown: int, what: str) -> Safe:
    return render('<p class="hint">{k} more {w} not shown.</p>', k=n - shown, w=what) \
        if n > shown else Safe("")


def _dialogue(value: Any, options: Dict[str, Any]) -> Safe:
    turns = value if isinstance(value, list) else [value]
    rows = []
    for turn in turns[:MAX_ROWS]:
        speaker, text = "", turn
        if isinstance(turn, dict):
            speaker = turn.get("speaker", turn.get("role", ""))
            text = turn.get("text", turn.get("content", ""))
        elif isinstance(turn, str) and ":" in turn[:40]:
            speaker, text = (x.strip() for x in turn.split(":", 1))
        rows.append(render('<li class="turn"><span class="speaker">{s}</span> '
                           '<span class="turn-text">{t}</span></li>', s=_cell(speaker),
                           t=_cell(text)))
    return render('<ol class="dialogue">{r}</ol>{m}', r=join(rows),
                  m=_more(len(turns), MAX_ROWS, "turns"))


def _as_list(value: Any) -> list:
    """A list as it is; nothing for None; anything else as one cell."""
    return value if isinstance(value, list) else [] if value is None else [value]


def _table_rows(value: Any):
    """(header, rows) of a list of mappings, a list of lists (first row: header) or
    ``{headers, rows}``; a headers or rows that is not a list is one cell."""
    if isinstance(value, dict):
        return [_cell(h) for h in _as_list(value.get("headers"))], _as_list(value.get("rows"))
    rows = value if isinstance(value, list) else [[value]]
    if rows and all(isinstance(r, dict) for r in rows):
        header = list(dict.fromkeys(k for r in rows for k in r))
        return header, [[r.get(k) for k in header] for r in rows]
    if rows and isinstance(rows[0], list):
        return [_cell(h) for h in rows[0]], rows[1:]
    return [], [[r] for r in rows]


def _spreadsheet(value: Any, options: Dict[str, Any]) -> Safe:
    header, rows = _table_rows(value)
    head = join(render('<th scope="col">{h}</th>', h=h) for h in header[:MAX_COLUMNS])
    body = join(render('<tr>{c}</tr>', c=join(render('<td>{v}</td>', v=_cell(v))
                                              for v in (r if isinstance(r, list) else [r])
                                              [:MAX_COLUMNS]))
                for r in rows[:MAX_ROWS])
    return render('<table class="spreadsheet"><thead><tr>{h}</tr></thead><tbody>{b}</tbody>'
                  '</table>{m}', h=head, b=body, m=_more(len(rows), MAX_ROWS, "rows"))


def _code(value: Any, options: Dict[str, Any]) -> Safe:
    lines = _cell(value).split("\n")
    language = options.get("language")
    lang = render(' data-language="{l}"', l=language) if isinstance(language, str) else ""
    shown = join(render('<li><code>{t}</code></li>', t=line) for line in lines[:MAX_CODE_LINES])
    numbered = options.get("show_line_numbers", True) is not False
    return render('<ol class="code-block{n}"{l}>{s}</ol>{m}', n="" if numbered else " plain",
                  l=Safe(lang), s=shown, m=_more(len(lines), MAX_CODE_LINES, "lines"))


def _document(value: Any, options: Dict[str, Any]) -> Safe:
    return render('<div class="document">{d}</div>', d=html_doc.clean(_cell(value)))


RENDERERS = {"text": lambda v, o: render('<div class="field-text">{t}</div>', t=_cell(v)),
             "dialogue": _dialogue, "spreadsheet": _spreadsheet, "code": _code,
             "document": _document, "agent_trace": traces.trace, "coding_trace": traces.trace}


def record(item) -> Dict[str, Any]:
    """The item's record as read from its data file ({} when it cannot be read)."""
    try:
        rec = json.loads(item["data"]) if item["data"] else {}
    except (ValueError, TypeError, IndexError, KeyError):
        rec = {}
    return rec if isinstance(rec, dict) else {}


def media_kinds(cfg) -> List[str]:
    """The kinds of media this project's items may name (image, audio, video)."""
    return [k for k, _ in media.keys(cfg)]


def _placeholder(kind: str, why: str) -> Safe:
    return render('<div class="media-missing" role="note" data-kind="{k}"><p><b>The {k} of '
                  'this item cannot be shown:</b> {w}.</p><p class="hint">Label what you can or '
                  'move on, and tell the project\'s admin (<code>potato validate</code> lists '
                  'such items).</p></div>', k=kind, w=why)


def media_block(cfg, item_id: str, rec: Dict[str, Any], kind: str, field: bool = False) -> Safe:
    """The item's image, audio or video player (``kind``), or a placeholder saying why not; an item
    without that kind of media shows nothing (a display ``field`` says it has none)."""
    try:
        ref = media.item_media(cfg, rec, (kind,))
    except media.MediaError as e:
        return _placeholder(kind, str(e))
    if ref is None:
        return render('<p class="hint media-none">(this item has no {k})</p>', k=kind) \
            if field else Safe("")
    if ref.is_url:
        if media.url_origin(ref.url) is None:
            return _placeholder(kind, f"{media.quoted(ref.source)} is not an http(s) address "
                                      f"the page loads")
        src = ref.url
    else:
        try:
            media.probe(cfg, ref)
        except media.MediaRefused:
            return _placeholder(kind, f"{media.quoted(ref.source)} is not inside the media "
                                      f"folder")
        except media.MediaNotAFile as e:
            return _placeholder(kind, f"{media.quoted(ref.source)} is {e.what}, not a file")
        except media.MediaMissing:
            return _placeholder(kind, f"{media.quoted(ref.source)} is missing from the media "
                                      f"folder")
        except media.MediaUnsupported as e:
            return _placeholder(kind, str(e))
        src = "/media/%s/%s" % (kind, quote(item_id, safe=""))
    name = ref.source.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if kind == "image":
        return render('<figure class="media media-image" data-kind="image"><button type="button" '
                      'class="media-zoom" aria-pressed="false" title="Full size (click again '
                      'to fit)"><img class="media-img" src="{s}" alt="{n}"></button><figcaption '
                      'class="hint">{n} · click the image (or press Enter on it) for full size '
                      '· <a href="{s}" target="_blank" rel="noopener noreferrer">open</a>'
                      '</figcaption></figure>', s=src, n=name)
    if kind == "video":
        return render('<figure class="media media-video" data-kind="video"><video class="media-'
                      'video-player" controls preload="metadata" src="{s}">Your browser cannot '
                      'play this video: <a href="{s}">download it</a>.</video><figcaption '
                      'class="hint">{n}</figcaption></figure>', s=src, n=name)
    return render('<figure class="media media-audio" data-kind="audio"><audio class="media-audio-'
                  'player" controls preload="metadata" src="{s}">Your browser cannot play this '
                  'audio: <a href="{s}">download it</a>.</audio><figcaption class="hint">{n}'
                  '</figcaption></figure>', s=src, n=name)


def fields(cfg, item, item_text: Safe) -> Safe:
    """The item as the page shows it: its media, ``item_text`` (the text spans mark,
    ``text_key``) and, with ``instance_display``, each field in its order (the text_key field
    is ``item_text``, an image, audio or video field the item's media)."""
    shown = cfg.upstream.display
    rec = record(item)
    shown_kinds = {f.type for f in shown}
    out: List[Safe] = [media_block(cfg, item["id"], rec, k) for k in media_kinds(cfg)
                       if k not in shown_kinds]
    if not shown:
        return join(out + [item_text])
    text_key = cfg.item_properties.text_key
    out += [] if any(f.key == text_key for f in shown) else [item_text]
    marked = any(s.kind.marks_text for s in cfg.schemes if s.kind is not None)
    for f in shown:
        title = render('<h2 class="field-label">{l}</h2>', l=f.label) if f.label else Safe("")
        # the text spans mark (a code field's too, then without line numbers)
        if f.key == text_key and (f.type == "text" or (f.type == "code" and marked)):
            inner = item_text
        elif f.type in media.KINDS:
            inner = media_block(cfg, item["id"], rec, f.type, field=True)
        elif f.key not in rec:
            inner = render('<p class="hint">(this item has no {k})</p>', k=f.key)
        else:
            inner = RENDERERS[f.type](rec[f.key], f.options)
        out.append(render('<section class="display-field display-{t}" data-key="{k}">{h}{i}'
                          '</section>', t=f.type, k=f.key, h=title, i=inner))
    return join(out)
