"""A real headless browser for the page tests: the system's chromium
(Debian's package; .ci/run installs it) driven by playwright, whose own
browser download is never used. Tests skip, saying why, only when no
browser or no playwright can be found."""
import contextlib
import os
import shutil

import pytest

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser",
              "/usr/bin/google-chrome")
# Headless, and nothing reaches out to the network on its own.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def chromium_path():
  """The browser's path ($T2TLITE_CHROMIUM, else the first installed), or
  None."""
  for path in (os.environ.get("T2TLITE_CHROMIUM"), *CANDIDATES,
               shutil.which("chromium")):
    if path and os.access(path, os.X_OK):
      return path
  return None


@contextlib.contextmanager
def launched():
  """Yields a playwright Browser (headless chromium); skips the test when
  there is none. Closed on exit."""
  try:
    from playwright.sync_api import sync_playwright
  except ImportError:
    pytest.skip("playwright is not installed (pip install '.[test]')")
  path = chromium_path()
  if path is None:
    pytest.skip(f"no chromium found (looked at {', '.join(CANDIDATES)}; "
                "apt-get install chromium)")
  with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=path, args=ARGS,
                                         timeout=60_000)
    try:
      yield browser
    finally:
      browser.close()


def screenshot_path(folder, name):
  """Where a page test keeps its screenshot for a reviewer: in
  $T2TLITE_SCREENSHOT_DIR when set (pytest's own temporary folders are
  pruned after a few runs), else in `folder` (the test's tmp_path)."""
  keep = os.environ.get("T2TLITE_SCREENSHOT_DIR")
  if keep:
    os.makedirs(keep, exist_ok=True)
    folder = keep
  return os.path.join(str(folder), name)
