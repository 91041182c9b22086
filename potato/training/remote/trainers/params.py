"""A trainer's params: declared (``Param``), checked and turned into their types (``coerce``,
``resolve_params``) by the server before a run is queued, with the sentence when a value
cannot work. Standard library only (the registry, ``trainers/__init__.py``, re-exports
these names)."""

import difflib
import math

TYPES = {"int": int, "float": float, "bool": bool, "str": str}


class Param:
    """A trainer param. ``check``: a standard-library function that raises ValueError with a
    sentence when a value cannot work (run by the server before a run is queued, so a bad
    value never waits in the queue or travels to a host). ``multiline``: a text box.
    ``model_source``: a Hugging Face Hub id or a model directory, which Check and the worker's
    start resolve where the run executes (``model_source.resolve``)."""

    def __init__(self, name, type, default, help, minimum=None, maximum=None, choices=None,
                 check=None, multiline=False, model_source=False):
        self.check = check
        self.model_source = model_source
        self.multiline = multiline
        self.name = name
        self.type = type
        self.default = default
        self.help = help
        self.minimum = minimum
        self.maximum = maximum
        self.choices = choices

    def as_dict(self):
        return {"name": self.name, "type": self.type, "default": self.default, "help": self.help,
                "minimum": self.minimum, "maximum": self.maximum, "choices": self.choices,
                "multiline": self.multiline}


class ParamError(ValueError):
    pass


def did_you_mean(word, choices, lead=" "):
    """``lead`` + "did you mean X?" for the closest of ``choices`` (a typo), else ""."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return "%s%s you mean %s?" % (lead, "Did" if lead == " " else "did", close[0]) \
        if close else ""


STR_MAX = 1000  # a one-line string param (a model id or path) is never longer
TEXT_MAX = 20000  # a multiline one (a prompt template)


def _check_text(param, value):
    """No control characters (a multiline param may hold newlines and tabs), and a cap."""
    cap = TEXT_MAX if param.multiline else STR_MAX
    if len(value) > cap:
        raise ParamError("%s is %d characters long; at most %d are allowed"
                         % (param.name, len(value), cap))
    allowed = "\n\r\t" if param.multiline else ""
    if any((ord(ch) < 32 or ord(ch) == 127) and ch not in allowed for ch in value):
        raise ParamError("%s must not contain control characters (%s)" % (
            param.name, "only newlines and tabs" if param.multiline
            else "such as a newline or a null byte"))


def coerce(param, value):
    """``value`` as the param's type (strings from the CLI are parsed), or ParamError."""
    kind = TYPES[param.type]
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        if kind is bool:
            if text.lower() in ("true", "yes", "1", "on"):
                return True
            if text.lower() in ("false", "no", "0", "off"):
                return False
            raise ParamError("%s must be true or false, not %r" % (param.name, value))
        try:
            value = kind(text)
        except ValueError:
            raise ParamError("%s must be %s, not %r" % (
                param.name, "a whole number" if kind is int else "a number", value))
    if kind is bool and not isinstance(value, bool):
        raise ParamError("%s must be true or false, not %r" % (param.name, value))
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ParamError("%s must be a whole number, not %r" % (param.name, value))
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamError("%s must be a number, not %r" % (param.name, value))
        try:
            value = float(value)
        except OverflowError:
            raise ParamError("%s is too large a number" % param.name)
        if not math.isfinite(value):
            raise ParamError("%s must be a finite number, not %r" % (param.name, value))
    if kind is str and param.choices and isinstance(value, bool):
        value = "true" if value else "false"  # bf16: true from JSON means "true"
    if kind is str and not isinstance(value, str):
        raise ParamError("%s must be a string, not %r" % (param.name, value))
    if kind is str:
        _check_text(param, value)
    if kind is str and param.choices:
        value = value.strip().lower()
    if param.choices and value not in param.choices:
        raise ParamError("%s must be one of %s, not %r" % (param.name, ", ".join(
            str(c) for c in param.choices), value))
    if param.minimum is not None and value < param.minimum:
        raise ParamError("%s must be at least %s, not %s" % (param.name, param.minimum, value))
    if param.maximum is not None and value > param.maximum:
        raise ParamError("%s must be at most %s, not %s" % (param.name, param.maximum, value))
    if param.check is not None:
        try:
            param.check(value)
        except ValueError as e:
            raise ParamError("%s: %s" % (param.name, e))
    return value


def resolve_params(info, given):
    """Every declared param with its value (given or default); ParamError lists what is wrong."""
    given = dict(given or {})
    declared = dict((p.name, p) for p in info.params)
    unknown = sorted(k for k in given if k not in declared)
    if unknown:
        raise ParamError("unknown param%s %s for trainer %s; valid params: %s%s" % (
            "s" if len(unknown) > 1 else "", ", ".join(unknown), info.name,
            ", ".join(declared), did_you_mean(unknown[0], declared, "; ")))
    out = {}
    for name, p in declared.items():
        out[name] = coerce(p, given[name]) if name in given else p.default
    return out


def model_sources(info, params):
    """The values of a trainer's model-source params (given, else their defaults)."""
    params = params or {}
    return [str(params.get(p.name, p.default)) for p in info.params
            if p.model_source and params.get(p.name, p.default)]
