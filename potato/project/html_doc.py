"""An item's HTML document (upstream's ``document`` display field) made safe to show.

A data file's HTML is untrusted: it is read in one linear pass (``_Cleaner.run``: tags,
comments, declarations and text, entities decoded by ``html.unescape``) and written out again
from an allowlist, so what reaches the page is markup this module wrote:

- the tags of text structure only (``ALLOWED``: paragraphs, headings, lists, tables, emphasis,
  quotes, code); any other tag is dropped and its text kept, and the tags whose content is no
  text to read (``DROPPED``: script, style, SVG, frames, forms' fields ...) go with their
  content;
- no attribute but a link's ``href`` (http, https or mailto only; it opens in a new tab with
  no opener and no referrer) and a table cell's ``colspan``/``rowspan`` (1-100); no class,
  style, id or event handler survives;
- images are not loaded (the page loads nothing from a data file's markup): their ``alt``
  text is shown in brackets;
- every text is escaped again on the way out; tags are closed in order (a stray end tag is
  dropped, what is left open is closed at the end); nesting deeper than ``MAX_DEPTH`` is
  flattened and a document longer than ``MAX_CHARS`` is cut, with a line that says so;
- a "<" that opens no tag is text; a tag is a name and attributes with no "<" or ">" in them
  (a ">" inside a quoted value ends the tag here, and what follows is text); comments,
  declarations and CDATA are dropped, unclosed ones with the rest of the document.
"""

from __future__ import annotations

import html
import re
from typing import List, Optional, Tuple

from potato.markup import Safe, esc

ALLOWED = frozenset((
    "p br hr h1 h2 h3 h4 h5 h6 ul ol li dl dt dd b strong i em u s del ins sub sup small "
    "mark q cite abbr blockquote pre code kbd samp var table caption thead tbody tfoot tr th "
    "td span div section article header footer aside figure figcaption a").split())
VOID = frozenset(("br", "hr"))
DROPPED = frozenset((
    "script style template svg math iframe frame frameset object applet noscript head "
    "title textarea select option button audio video canvas noembed noframes xmp "
    "plaintext").split())
# Tags that never hold content: dropped alone (waiting for their end would drop the rest)
EMPTY = frozenset("input embed link meta base param source track area keygen wbr col".split())
MAX_CHARS = 200_000   # of a document's source
MAX_DEPTH = 40        # open tags kept; deeper ones are dropped, their text kept
SCHEMES = ("http://", "https://", "mailto:")


_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)([^<>]*)>")
_ATTR = re.compile(r"""([^\s"'=<>/`]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
# Elements whose content is raw text up to their own end tag (all of them DROPPED)
RAW = frozenset("script style textarea title xmp iframe noembed noframes noscript".split())


class _Cleaner:
    """Reads a document in one pass (``run``): every step finds the next "<" or the end of a
    construct with ``str.find`` or a pattern that cannot look past the next "<" or ">", so the
    time grows with the document's length (``html.parser`` rescans some malformed runs at
    every "<": a minute for 200 KB)."""

    def __init__(self):
        self.out: List[str] = []
        self.open: List[str] = []
        self.skip: Optional[str] = None   # inside a DROPPED tag: its name
        self.skip_depth = 0

    def run(self, text: str) -> None:
        pos, n, low = 0, len(text), None
        while pos < n:
            lt = text.find("<", pos)
            if lt < 0:
                self.handle_data(html.unescape(text[pos:]))
                break
            if lt > pos:
                self.handle_data(html.unescape(text[pos:lt]))
            if text.startswith("<!--", lt):  # a comment: dropped (unclosed: the rest is one)
                end = text.find("-->", lt + 4)
                pos = n if end < 0 else end + 3
                continue
            if text.startswith(("<!", "<?"), lt):  # a declaration, CDATA, a processing
                end = text.find(">", lt + 2)       # instruction: dropped, to the next ">"
                pos = n if end < 0 else end + 1
                continue
            m = _TAG.match(text, lt)
            if m is None:  # a "<" that opens no tag is text
                self.handle_data("<")
                pos = lt + 1
                continue
            pos = m.end()
            name, rest = m.group(2).lower(), m.group(3)
            if m.group(1):
                self.handle_endtag(name)
                continue
            if rest.rstrip().endswith("/") and name not in ALLOWED:
                continue  # <svg/>: an element that ends where it starts
            self.handle_starttag(name, [(a.lower(), html.unescape(q or s or u or ""))
                                        for a, q, s, u in _ATTR.findall(rest)])
            if name in RAW:  # its content is text up to its own end tag: dropped with it
                low = text.lower() if low is None else low
                end = low.find("</" + name, pos)
                pos = n if end < 0 else end

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if self.skip is not None:
            self.skip_depth += tag == self.skip
            return
        if tag in DROPPED:
            self.skip, self.skip_depth = tag, 1
            return
        if tag in EMPTY:
            return
        if tag == "img":
            alt = dict(attrs).get("alt")
            if alt and alt.strip():
                self.out.append(esc("[image: %s]" % alt.strip()))
            return
        if tag not in ALLOWED or (tag not in VOID and len(self.open) >= MAX_DEPTH):
            return
        self.out.append("<%s%s>" % (tag, _attributes(tag, attrs)))
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.skip is not None:
            if tag == self.skip:
                self.skip_depth -= 1
                if self.skip_depth == 0:
                    self.skip = None
            return
        if tag not in self.open:
            return  # a stray end tag
        while self.open:
            last = self.open.pop()
            self.out.append("</%s>" % last)
            if last == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.skip is None:
            self.out.append(esc(data))

    def close_all(self) -> str:
        self.out.extend("</%s>" % t for t in reversed(self.open))
        self.open = []
        return "".join(self.out)


def _attributes(tag: str, attrs: List[Tuple[str, Optional[str]]]) -> str:
    kept = []
    for name, value in attrs:
        value = (value or "").strip()
        if tag == "a" and name == "href" and value.lower().startswith(SCHEMES) and \
                not any(c in value for c in "\0\r\n\t"):
            kept.append(' href="%s" target="_blank" rel="noopener noreferrer nofollow"'
                        % esc(value))
        elif tag in ("td", "th") and name in ("colspan", "rowspan") and value.isdigit() and \
                value.isascii() and 1 <= int(value) <= 100:
            kept.append(' %s="%d"' % (name, int(value)))
    return "".join(kept)


def clean(source: str) -> Safe:
    """``source`` (an item's HTML) as markup with only ``ALLOWED`` tags and attributes."""
    cut = len(source) > MAX_CHARS
    parser = _Cleaner()
    parser.run(source[:MAX_CHARS])
    body = parser.close_all()
    if cut:
        body += ('<p class="hint">The rest of this document (%d of %d characters) is not '
                 'shown.</p>' % (len(source) - MAX_CHARS, len(source)))
    return Safe(body)
