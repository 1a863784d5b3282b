"""Takes docs/web.md's screenshots with playwright and the system chromium.

    python docs/images/screenshots.py --model=OUTPUT_DIR/export \
        --run=OUTPUT_DIR --sentence="A man is riding a bicycle ."

Starts t2t-serve over --model, translates --sentence with the beam shown,
opens its attention view and saves docs/images/serve_page.png; writes
--run's report (t2t-report) and saves docs/images/report.png. The server is
stopped at the end (SIGTERM).
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from PIL import Image
from playwright.sync_api import sync_playwright

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _command(name):
  return os.path.join(os.path.dirname(sys.executable), name)


def _serve(model):
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  log_path = os.path.join(tempfile.mkdtemp(), "serve.log")
  log = open(log_path, "w")
  proc = subprocess.Popen([_command("t2t-serve"), f"--model={model}",
                           f"--port={port}"], stdout=log,
                          stderr=subprocess.STDOUT)
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None:
    with open(log_path) as f:
      match = re.search(r"on (http://\S+/)", f.read())
    if match:
      return proc, match.group(1)
    time.sleep(0.2)
  proc.kill()
  raise RuntimeError(f"t2t-serve did not start; see {log_path}")


def _save_small(page, name):
  """A full-page screenshot, reduced to 256 colours (a few hundred KB)."""
  path = os.path.join(HERE, name)
  page.screenshot(path=path, full_page=True)
  Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", required=True)
  parser.add_argument("--run", required=True)
  parser.add_argument("--sentence", required=True)
  parser.add_argument("--chromium", default="/usr/bin/chromium")
  args = parser.parse_args()
  subprocess.run([_command("t2t-report"), f"--output_dir={args.run}"],
                 check=True, timeout=300)
  proc, url = _serve(args.model)
  try:
    with sync_playwright() as playwright:
      browser = playwright.chromium.launch(executable_path=args.chromium,
                                           args=ARGS)
      page = browser.new_page(viewport={"width": 1100, "height": 800})
      page.goto(url)
      page.fill("#source", args.sentence)
      page.check("#n-best")
      page.click("#translate")
      page.wait_for_selector("table.beam", timeout=120_000)
      page.click("li.result")
      page.wait_for_selector("body[data-state=attention]", timeout=120_000)
      page.click("section[data-kind=encdec] canvas.heatmap")
      page.hover("section[data-kind=encdec] canvas.heatmap")
      _save_small(page, "serve_page.png")
      page.goto("file://" + os.path.join(os.path.abspath(args.run),
                                         "report.html"))
      _save_small(page, "report.png")
      browser.close()
  finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


if __name__ == "__main__":
  main()
