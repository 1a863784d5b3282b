"""Checking t2t-serve's JSON requests: every problem is one line naming the
field and what was expected (the server answers it with HTTP 400).

    POST /api/translate  {"lines": [str, ...], "decode_hparams": str,
                          "n_best": bool, "target_prefixes": [str, ...],
                          "target_language": str or [str or null, ...]}
    POST /api/attention  {"line": str, "decode_hparams": str,
                          "target_prefix": str, "target_language": str}

All but lines and line are optional.
"""
import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one request may ask for.

  max_request_bytes: body size (larger: HTTP 413).
  max_lines: lines in one translate request.
  max_line_chars: characters in one line.
  max_beam_size: the largest decode hparam beam_size a request may set
    (and num_samples, when it samples).
  max_concurrent: requests computing at once (more wait up to
    busy_timeout_secs, then get HTTP 503).
  busy_timeout_secs: that wait.
  """
  max_request_bytes: int = 65536
  max_lines: int = 32
  max_line_chars: int = 1000
  max_beam_size: int = 16
  max_concurrent: int = 1
  busy_timeout_secs: float = 30.0


class BadRequest(ValueError):
  """A request that breaks the rules; str(error) is its one-line reason."""


def too_large_message(limits):
  """The one line a body over limits.max_request_bytes gets (HTTP 413),
  from Flask or from the HTTP server (`http_server`)."""
  return (f"request body larger than {limits.max_request_bytes} bytes "
          "(--max_request_bytes)")


def parse_body(body):
  """bytes -> the JSON object it holds. Raises BadRequest."""
  if not body:
    raise BadRequest("empty body: expected a JSON object")
  try:
    data = json.loads(body.decode("utf-8"))
  except (UnicodeDecodeError, ValueError) as error:
    raise BadRequest(f"invalid JSON: {str(error).splitlines()[0]}") from None
  if not isinstance(data, dict):
    raise BadRequest(f"expected a JSON object, got {type(data).__name__}")
  return data


def _check_keys(data, allowed):
  unknown = sorted(set(data) - set(allowed))
  if unknown:
    raise BadRequest(f"unknown field {unknown[0]!r}: expected "
                     f"{', '.join(allowed)}")


def _line(value, where, limits):
  if not isinstance(value, str):
    raise BadRequest(f"{where}: expected a string, got "
                     f"{type(value).__name__}")
  if len(value) > limits.max_line_chars:
    raise BadRequest(f"{where}: {len(value)} characters, more than the "
                     f"limit of {limits.max_line_chars} (--max_line_chars)")
  if "\n" in value or "\r" in value:
    raise BadRequest(f"{where}: one sentence a line, without line breaks")
  return value


def _decode_hparams(data):
  value = data.get("decode_hparams", "")
  if not isinstance(value, str):
    raise BadRequest("decode_hparams: expected a string such as "
                     f"\"beam_size=4,alpha=0.6\", got {type(value).__name__}")
  return value


def _language(value, where):
  if value is not None and not isinstance(value, str):
    raise BadRequest(f"{where}: expected a language such as \"de\", got "
                     f"{type(value).__name__}")
  return value


def target_languages(data, count):
  """The request's target_language: None, or one (str or None) per line
  (a model of a mixture of problems, `t2tlite.data.languages`)."""
  value = data.get("target_language")
  if isinstance(value, list):
    if len(value) != count:
      raise BadRequest(f"target_language: expected one language, or a list "
                       f"of {count}, one per line")
    return [_language(v, f"target_language[{i}]")
            for i, v in enumerate(value)]
  value = _language(value, "target_language")
  return None if value is None else [value] * count


def translate_request(data, limits):
  """(lines, decode_hparams, n_best, target_prefixes: None or a str per
  line) of a translate request (its target_language: `target_languages`)."""
  _check_keys(data, ("lines", "decode_hparams", "n_best", "target_prefixes",
                     "target_language"))
  lines = data.get("lines")
  if not isinstance(lines, list):
    raise BadRequest("lines: expected a list of strings, got "
                     f"{type(lines).__name__ if 'lines' in data else 'none'}")
  if not lines:
    raise BadRequest("lines: empty list; expected at least one string")
  if len(lines) > limits.max_lines:
    raise BadRequest(f"lines: {len(lines)} lines, more than the limit of "
                     f"{limits.max_lines} (--max_lines)")
  lines = [_line(v, f"lines[{i}]", limits) for i, v in enumerate(lines)]
  n_best = data.get("n_best", False)
  if not isinstance(n_best, bool):
    raise BadRequest(f"n_best: expected true or false, got "
                     f"{type(n_best).__name__}")
  prefixes = data.get("target_prefixes")
  if prefixes is not None:
    if not isinstance(prefixes, list) or len(prefixes) != len(lines):
      raise BadRequest(f"target_prefixes: expected a list of {len(lines)} "
                       "strings, one per line (\"\" for none)")
    prefixes = [_line(v, f"target_prefixes[{i}]", limits)
                for i, v in enumerate(prefixes)]
  return lines, _decode_hparams(data), n_best, prefixes


def attention_request(data, limits):
  """(line, decode_hparams, target_prefix or None) of an attention
  request."""
  _check_keys(data, ("line", "decode_hparams", "target_prefix",
                     "target_language"))
  if "line" not in data:
    raise BadRequest("line: missing; expected the sentence to show")
  line = _line(data["line"], "line", limits)
  if not line.strip():
    raise BadRequest("line: empty; expected a sentence")
  prefix = data.get("target_prefix")
  if prefix is not None:
    prefix = _line(prefix, "target_prefix", limits)
  return line, _decode_hparams(data), prefix


def check_search_width(hp, limits):
  """Raises BadRequest when DecodeHParams hp decode more hypotheses a line
  than --max_beam_size allows: its beam_size, or when sampling its
  num_samples (each a row of the search)."""
  if hp.outputs_per_input > limits.max_beam_size:
    raise BadRequest(f"decode hparam {hp.width_hparam}="
                     f"{hp.outputs_per_input}: more "
                     f"than the limit of {limits.max_beam_size} "
                     "(--max_beam_size)")
