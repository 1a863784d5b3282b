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
import signal
import subprocess
import sys
import tempfile

from PIL import Image
from playwright.sync_api import sync_playwright

HERE = os.path.dirname(os.path.abspath(__file__))
# bench/serve_latency.py starts t2t-serve and waits until it listens.
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "bench"))
import serve_latency  # noqa: E402
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _command(name):
  return os.path.join(os.path.dirname(sys.executable), name)


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
  log_path = os.path.join(tempfile.mkdtemp(), "serve.log")
  proc, url = serve_latency.start_server(args.model, log_path)
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
