"""Downloading a corpus file and checking it against what was published.

A file is fetched to `PATH.part` and renamed to PATH only once it is complete
(as long as the server announced) and passes its check, so a failed or
interrupted download never leaves a file that a later run would trust.
"""
import dataclasses
import gzip
import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.request

from absl import logging

from t2tlite.data.samples import DataError

_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Expected:
  """What a published text file holds once uncompressed.

  Attributes:
    lines: its number of lines.
    sha256: hex SHA-256 of its uncompressed bytes, or None where only the
      line count is known.
  """
  lines: int
  sha256: str = None


def text_digest(path, gzipped=None):
  """(lines, hex SHA-256) of a text file's bytes, gunzipped if `gzipped`
  (default: if the name ends in .gz).

  Raises:
    DataError: a .gz file that is not a complete gzip stream.
  """
  digest, lines = hashlib.sha256(), 0
  gzipped = path.endswith(".gz") if gzipped is None else gzipped
  opener = gzip.open if gzipped else open
  try:
    with opener(path, "rb") as f:
      for chunk in iter(lambda: f.read(_CHUNK), b""):
        digest.update(chunk)
        lines += chunk.count(b"\n")
  except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
    raise DataError(f"{path} is not a complete gzip file ({error}).") from None
  return lines, digest.hexdigest()


def mismatch(path, expected, gzipped=None):
  """Why the file at `path` is not the `Expected` one, or None if it is
  (`gzipped` as in `text_digest`; a .gz cut short is not)."""
  try:
    lines, sha256 = text_digest(path, gzipped)
  except DataError as error:
    return str(error).rstrip(".")
  if lines != expected.lines:
    return f"{lines} lines, expected {expected.lines}"
  if expected.sha256 and sha256 != expected.sha256:
    return f"SHA-256 {sha256}, expected {expected.sha256}"
  return None


def fetch(url, path, expected, timeout=60):
  """Downloads `url` to `path` unless a correct copy is there already.

  Args:
    url: http(s) URL of the file.
    path: where it goes (its folder is created).
    expected: an `Expected`; the file must match it.
    timeout: seconds without data before the download fails.

  Returns:
    path.

  Raises:
    DataError: one line naming the URL: the server failed or refused, the
      download stopped short, or the file is not the expected one.
  """
  if os.path.exists(path) and mismatch(path, expected) is None:
    return path
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  partial = f"{path}.part"
  logging.info("Downloading %s", url)
  try:
    _download(url, partial, timeout)
    problem = mismatch(partial, expected, gzipped=path.endswith(".gz"))
    if problem:
      raise DataError(f"Downloaded {url} is not the published file "
                      f"({problem}); not using it.")
    os.replace(partial, path)
  finally:
    if os.path.exists(partial):
      os.remove(partial)
  return path


def _download(url, partial, timeout):
  try:
    with urllib.request.urlopen(url, timeout=timeout) as response, open(
        partial, "wb") as out:
      announced = response.headers.get("Content-Length")
      shutil.copyfileobj(response, out, _CHUNK)
      received = out.tell()
  except urllib.error.HTTPError as error:
    raise DataError(f"Could not download {url}: HTTP {error.code} "
                    f"{error.reason}.") from None
  except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
    reason = getattr(error, "reason", None) or error
    raise DataError(f"Could not download {url}: {type(error).__name__}: "
                    f"{reason}.") from None
  if announced is not None and received != int(announced):
    raise DataError(f"Could not download {url}: the connection ended after "
                    f"{received} of {announced} bytes.")
