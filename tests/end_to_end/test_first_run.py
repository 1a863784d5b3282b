"""A new user's first run: the README quick start (t2t-trainer, then
t2t-decoder) logs lines a person reads, and t2t-report's page over its run
folder tells the truth at a glance, seen in a real browser (chromium driven
by playwright; tests/support/browser.py), screenshot kept for a reviewer.

The quick start's own budget is 2 minutes (tests/end_to_end/
test_quickstart.py spends them, marked slow); here the same command trains
for a short budget, with a schedule shortened to fit it and fewer dev lines
evaluated and decoded, to keep the suite fast.
"""
import json
import re
import subprocess

import pytest

import browser as browser_lib
import train_helpers
from user_env import clean_env

# The README's quick start, with the test's folders: the flags of
# QUICK_START, then the shortening ones.
QUICK_START = ["--problem=algorithmic_reverse",
               "--hparams_set=transformer_tiny_quick", "--generate_data",
               "--local_eval_frequency=0"]
# A budget of 18 s. The 20 steps timed for the plan outnumber the
# schedule's least (warm-up 10 + a quarter of the 20 cool-down steps), so
# even a loaded machine plans a run (budget.plan_train_steps); the budget
# holds 70 to 120 steps on 2 cores, so that the decoder outputs digits (a
# plan of 22 steps, all a loaded machine fits in 0.2 minutes, outputs
# none).
BUDGET = "--train_minutes=0.3"
SHORTER = [BUDGET, "--hparams=warmup_steps=10,learning_rate_cooldown_steps=20",
           "--eval_steps=2", "--eval_decode_samples=10"]
MAX_LINES = 30  # the whole quick start's stderr, trainer and decoder
# absl's prefix: "I1127 12:35:15.533802 139629780781952 precision.py:250]".
THREAD_ID = re.compile(r"(?<![\d.])\d{9,}(?![\d.])")
SOURCE_PATH = re.compile(r"\b[\w/.-]+\.py(:\d+)?\b")


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory):
  """(run folder, trainer CompletedProcess, decoder CompletedProcess)."""
  root = tmp_path_factory.mktemp("quick_start")
  output_dir = root / "t2t_train" / "reverse"
  trainer = subprocess.run(
      [train_helpers.console_script("t2t-trainer"), *QUICK_START, *SHORTER,
       f"--data_dir={root / 't2t_data'}", f"--output_dir={output_dir}"],
      capture_output=True, text=True, env=clean_env(), timeout=400)
  assert trainer.returncode == 0, trainer.stderr[-5000:]
  decoder = subprocess.run(
      [train_helpers.console_script("t2t-decoder"),
       f"--output_dir={output_dir}", "--decode_interactive"],
      input="1 2 3 4 5 6 7\n", capture_output=True, text=True,
      env=clean_env(), timeout=300)
  assert decoder.returncode == 0, decoder.stderr[-5000:]
  return output_dir, trainer, decoder


@pytest.mark.timeout(800)
def test_quick_start_log_is_short_and_readable(quick_start):
  _, trainer, decoder = quick_start
  lines = (trainer.stderr + decoder.stderr).splitlines()
  print(f"quick start stderr ({len(lines)} lines):\n" + "\n".join(lines))
  assert len(lines) <= MAX_LINES, "\n".join(lines)
  for line in lines:
    assert not THREAD_ID.search(line), line
    assert not SOURCE_PATH.search(line), line
    # time, level when not INFO, component
    assert re.match(r"\d\d:\d\d:\d\d (WARNING |ERROR )?\w+: ", line), line
  text = "\n".join(lines)
  planned = re.search(r" budget: Planned \d+ steps for " + re.escape(BUDGET)
                      + r".*", text)
  assert planned, text
  # No evaluation timed (--local_eval_frequency=0): none named ("0.0s").
  assert "an evaluation" not in planned.group(0), planned.group(0)
  # As the README says: results on stdout, the data's table then the
  # translation, the dev result only in the log; on stderr 14 lines and the
  # concurrent searches' (on 2+ cores, TF_NUM_INTRAOP_THREADS unset) besides
  # the progress lines and the re-plan lines, each progress line showing
  # the total last planned.
  table = trainer.stdout.splitlines()
  assert len(table) == 6 and table[0].startswith("algorithmic_reverse -> ")
  assert "exact_match" not in trainer.stdout and "loss" not in trainer.stdout
  assert len(decoder.stdout.splitlines()) == 1
  shown, others = None, []
  for line in lines:
    plan = re.search(r" budget: (?:Re-)?[Pp]lanned (\d+) steps", line)
    step = re.search(r" trainer: step \d+/(\d+) ", line)
    if plan:
      shown = plan.group(1)
    if step:
      assert step.group(1) == shown, text
    if not step and not re.search(r" (budget: Re-planned|machine: "
                                  r"Decoding a batch as) ", line):
      others.append(line)
  assert len(others) == 14, "\n".join(others)
  assert re.search(r" trainer: Step \d+ \(final checkpoint\) after .* "
                   r"(as planned,|final plan) \d+ steps", text), text
  # The decode settings as the strategy in use, not the dataclass dump.
  assert "beam search: beam_size=4, alpha=0.6" in text
  assert "DecodeHParams(" not in text
  # The short schedule need not reverse it yet (the 2-minute one does).
  assert re.fullmatch(r"[\d ]+\n", decoder.stdout), decoder.stdout


@pytest.fixture(scope="module")
def browser():
  with browser_lib.launched() as b:
    yield b


@pytest.mark.timeout(800)
def test_report_of_the_quick_start_reads_true(quick_start, browser,
                                             tmp_path_factory):
  output_dir, _, _ = quick_start
  out = train_helpers.command("t2t-report", f"--output_dir={output_dir}",
                              timeout=200)
  path = str(output_dir / "report.html")
  assert out.strip().splitlines()[-1] == path
  text = open(path, encoding="utf-8").read()
  # No Python dict repr anywhere ({'exact_match': 99.9}).
  assert not re.search(r"\{'|&#x27;\w+&#x27;:", text), re.search(
      r".{80}\{'.{80}", text)
  plan = json.loads((output_dir / "run.json").read_text())["plan"]
  hp_steps = json.loads((output_dir / "hparams.json").read_text())[
      "train_steps"]
  made = train_helpers.latest_step(str(output_dir))
  assert made == plan["train_steps"] != hp_steps
  page = browser.new_page(viewport={"width": 1200, "height": 900})
  try:
    page.goto("file://" + path)
    shot = browser_lib.screenshot_path(tmp_path_factory.mktemp("screenshots"),
                                       "quick_start_report.png")
    page.screenshot(path=shot, full_page=True)
    print(f"screenshot of {path}: {shot}")
    # The evaluation results: named values, the dev metric first.
    rows = [row.split("\t") for row in
            page.locator("#eval-results tr").all_inner_texts()]
    assert all(len(row) == 2 for row in rows), rows
    results = dict(rows)
    # The values the run wrote (eval_results.json), at the page's 4
    # significant digits.
    written = json.loads((output_dir / "eval_results.json").read_text())
    assert rows[0][0] == written["metric"] == "exact_match"
    for name in ("exact_match", "accuracy", "loss"):
      assert float(results[name]) == pytest.approx(written[name], rel=1e-3,
                                                   abs=1e-9), name
    best, at = results["best exact_match"].split(" at step ")
    assert float(best) == pytest.approx(written["best_value"], rel=1e-3,
                                        abs=1e-9)
    assert int(at) == written["best_step"] == made
    assert "scores" not in results
    # The steps made beside the hparams' train_steps.
    hparams = page.inner_text("#hparams")
    assert (f"train_steps: {hp_steps} in the hparams; this run made {made} "
            f"steps, of the {plan['train_steps']} planned for "
            f"{BUDGET}") in hparams, hparams
    assert page.inner_text("header").count(f"{made} steps made") == 1
    # One evaluation: a point, in the tables, not a plot of its own.
    alts = page.eval_on_selector_all("#curves img",
                                     "imgs => imgs.map(i => i.alt)")
    assert not [a for a in alts if a.startswith("Dev ")], alts
    assert "One dev evaluation" in page.inner_text("#curves")
    # Sections apart: Flags is a section of its own, below the machine's.
    boxes = {name: page.locator(f"#{name}").bounding_box()
             for name in ("machine", "flags")}
    assert boxes["flags"]["y"] >= (boxes["machine"]["y"] +
                                   boxes["machine"]["height"] + 8), boxes
    assert "--train_minutes" in page.inner_text("#flags")
  finally:
    page.close()
