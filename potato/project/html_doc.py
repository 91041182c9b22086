"""An item's HTML document (upstream's ``document`` display field) made safe to show.

A data file's HTML is untrusted: it is parsed (``html.parser``, the standard library's) and
written out again from an allowlist, so what reaches the page is markup this module wrote:

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
  flattened and a document longer than ``MAX_CHARS`` is cut, with a line that says so.
"""

from __future__ import annotations

from html.parser import HTMLParser
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


class _Cleaner(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: List[str] = []
        self.open: List[str] = []
        self.skip: Optional[str] = None   # inside a DROPPED tag: its name
        self.skip_depth = 0

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

    def handle_startendtag(self, tag, attrs) -> None:
        if tag in VOID or tag == "img":
            self.handle_starttag(tag, attrs)

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
        self.close()
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
    parser.feed(source[:MAX_CHARS])
    body = parser.close_all()
    if cut:
        body += ('<p class="hint">The rest of this document (%d of %d characters) is not '
                 'shown.</p>' % (len(source) - MAX_CHARS, len(source)))
    return Safe(body)
