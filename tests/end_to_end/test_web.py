"""t2t-serve's page and API, and t2t-report's page, in a real headless
browser (chromium driven by playwright; tests/support/browser.py).

The session's shared run folder and export (tests/support/shared_export.py,
read only), one server and one browser serve every test (the ensemble's
test serves the app over the run folder from this process; the server is
started again for the tests after the SIGTERM test).
"""
import contextlib
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request

import pytest

import browser as browser_lib
from restartable import Restartable
from run_folder import multi30k_lines
from shared_export import DECODE, shared_export
from shared_run import shared_run_folder
import train_helpers

LIMITS = {"max_lines": 4, "max_line_chars": 200, "max_request_bytes": 4096,
          "max_beam_size": 4}
START_SECS = 300  # generous: a loaded 2-core machine starts TensorFlow slowly


@pytest.fixture(scope="module")
def sentence():
  return multi30k_lines("en", 1)[0]


def _wait_for_url(proc, log_path, deadline):
  """The URL t2t-serve prints once it listens; fails with its log if it
  exits or the deadline passes."""
  while time.time() < deadline:
    with open(log_path, encoding="utf-8", errors="replace") as f:
      match = re.search(r"on (http://127\.0\.0\.1:\d+/)", f.read())
    if match:
      return match.group(1)
    if proc.poll() is not None:
      break
    time.sleep(0.2)
  with open(log_path, encoding="utf-8", errors="replace") as f:
    log = f.read()
  pytest.fail(f"t2t-serve did not start (exit {proc.poll()}):\n{log[-4000:]}")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """(run folder, Vocabulary) of the session's shared run (tests/support/
  shared_run.py, read only): run_folder.TINY's untrained model on
  translate_ende_wmt, with a vocabulary of Multi30k English and German
  lines. Skips without ../shared/data's Multi30k."""
  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  folder = shared_run_folder(tmp_path_factory)
  return folder, Vocabulary.from_file(run_dir.read_run_info(
      folder).vocab_file)


@pytest.fixture(scope="module")
def serving(run, sentence, tmp_path_factory):
  """(the Decoder's output for `sentence`, a Restartable of (URL, Popen)):
  t2t-serve over the shared run's export with DECODE fixed in the graph
  (tests/support/shared_export.py, read only) on a free port, started
  again after a test stopped it (tests/support/restartable.py); the run's
  Decoder with DECODE decodes in this process while the first server
  loads. The processes are killed at teardown."""
  from t2tlite import run_dir
  from t2tlite.decode.decoding import Decoder
  from t2tlite.decode.machine import settle
  from t2tlite.decode.settings import DecodeHParams
  tmp = tmp_path_factory.mktemp("serve")
  folder, vocab = run
  limit_flags = [f"--{name}={value}" for name, value in LIMITS.items()]
  with train_helpers.processes() as started:
    version = shared_export(tmp_path_factory, DECODE)

    def launch():
      port, = train_helpers.free_ports(1)
      log_path = tmp / f"serve{len(started)}.log"
      server = train_helpers.start(
          [train_helpers.console_script("t2t-serve"),
           f"--model={os.path.dirname(version)}", f"--port={port}",
           *limit_flags], str(log_path))
      started.append(server)
      return server, log_path

    launched = [launch()]

    def start_server():
      server, log_path = launched.pop() if launched else launch()
      url = _wait_for_url(server, log_path, time.time() + START_SECS)
      return (url, server), server

    servers = Restartable(start_server)
    # In float32, as the export computes.
    model, _, _ = run_dir.load_trained_model(folder, dtype="float32")
    (decoded,), _ = Decoder(model, vocab, settle(DecodeHParams.parse(
        DECODE))).decode_lines([sentence], progress=False)
    # The model is untrained: an empty output would make the tests'
    # comparisons with it pass whatever the page shows.
    assert decoded, f"the shared run translates {sentence!r} as nothing"
    servers.get()
    yield decoded, servers


@pytest.fixture
def served(serving, run):
  """(base URL, the Decoder's output for `sentence`, the server's Popen,
  the Vocabulary) of a running t2t-serve (`serving`)."""
  decoded, servers = serving
  url, server = servers.get()
  return url, decoded, server, run[1]


@pytest.fixture(scope="module")
def browser():
  with browser_lib.launched() as b:
    yield b


def _post(url, body, content_type="application/json"):
  """(status, decoded JSON answer) of a POST with bytes `body`."""
  request = urllib.request.Request(url, data=body, method="POST",
                                   headers={"Content-Type": content_type})
  try:
    with urllib.request.urlopen(request, timeout=60) as response:
      return response.status, json.loads(response.read())
  except urllib.error.HTTPError as error:
    return error.code, json.loads(error.read())


def _translate(url, request):
  return _post(url + "api/translate", json.dumps(request).encode())


# The first test starts the module's server (t2t-serve, which loads
# TensorFlow, over the shared export, built by the session's first test to
# ask) and decodes with the run's Decoder in this process, which every test
# here shares; the browser checks themselves take seconds.
@pytest.mark.timeout(600)
def test_page_translates_as_the_decoder_and_shows_attention(
    served, browser, sentence):
  url, decoded, _, vocab = served
  page = browser.new_page()
  try:
    page.goto(url)
    page.fill("#source", sentence)
    page.click("#translate")
    page.wait_for_selector("body[data-state=translated]", timeout=60_000)
    assert page.inner_text("#translation-0") == decoded

    # The beam: beam_size hypotheses with scores, the best one first.
    page.check("#n-best")
    page.click("#translate")
    page.wait_for_selector("table.beam", timeout=60_000)
    rows = page.locator("table.beam tr").all_inner_texts()[1:]
    assert len(rows) == 2
    best_text, best_score = rows[0].split("\t")[1:]
    assert best_text == decoded
    assert float(best_score) <= 0.0

    # The attention view: layers x heads maps of every kind, each of its
    # tokens' size (queries x keys).
    page.click("li.result")
    page.wait_for_selector("body[data-state=attention]", timeout=60_000)
    assert page.inner_text("#attention-title").endswith(decoded)
    assert not page.locator("#attention-member").is_visible()  # one model
    maps = page.eval_on_selector_all(
        "canvas.heatmap", "cs => cs.map(c => ({kind: c.dataset.kind, "
        "layer: +c.dataset.layer, head: +c.dataset.head, rows: "
        "+c.dataset.rows, cols: +c.dataset.cols}))")
    tokens = {kind: page.eval_on_selector_all(
        f"section[data-kind={kind}] .tokens", "ts => ts.map(t => "
        "t.children.length)") for kind in ("encoder", "decoder_self",
                                           "encdec")}
    source_tokens = len(vocab.encode_text(sentence))  # with EOS
    target_tokens = tokens["decoder_self"][0]
    assert target_tokens >= 1
    expected_shape = {"encoder": (source_tokens, source_tokens),
                      "decoder_self": (target_tokens, target_tokens),
                      "encdec": (target_tokens, source_tokens)}
    layers, heads = 2, 4  # run_folder.TINY's, the shared run's
    for kind, (rows_, cols) in expected_shape.items():
      assert tokens[kind] == [rows_, cols]
      found = sorted((m["layer"], m["head"]) for m in maps
                     if m["kind"] == kind)
      assert found == [(l, h) for l in range(layers) for h in range(heads)]
      assert {(m["rows"], m["cols"]) for m in maps if m["kind"] == kind} == {
          (rows_, cols)}
    # A map clicked is drawn large, the same size in tokens.
    page.click("section[data-kind=encdec] canvas.heatmap")
    detail = page.locator("#detail-map")
    assert (int(detail.get_attribute("data-rows")),
            int(detail.get_attribute("data-cols"))) == expected_shape["encdec"]
  finally:
    page.close()


@contextlib.contextmanager
def app_served(model, warm_up):
  """The URL of t2t-serve's app over `model` (as --model names it), served
  by t2t-serve's HTTP server (waitress) on 127.0.0.1 from a thread of this
  process, which has TensorFlow loaded already; closed after the block.
  As t2t-serve warms up before it says its URL, the app answers the
  requests `warm_up` ({path: JSON body}) first."""
  from t2tlite.serve import app as app_lib
  from t2tlite.serve import http_server, validation
  from t2tlite.serve.model_source import ModelSource
  limits = validation.Limits()
  app = app_lib.make_app(ModelSource.open(model), limits)
  for path, body in warm_up.items():
    answer = app.test_client().post(path, json=body)
    assert answer.status_code == 200, answer.get_json()
  server = http_server.create_server(app, limits, host="127.0.0.1", port=0)
  closed = threading.Event()

  def run():
    try:
      server.run()
    except OSError:  # its socket closed under its loop, at the end
      assert closed.is_set()

  threading.Thread(target=run, daemon=True).start()
  try:
    yield f"http://127.0.0.1:{server.effective_port}/"
  finally:
    closed.set()
    server.close()


def test_page_shows_each_ensemble_members_attention(run, browser, sentence):
  """t2t-serve's app over --model=RUN,CHECKPOINT (an ensemble of the run's
  model with itself): the header names an ensemble of 2, and a selector
  shows each member's maps of the translated output."""
  from t2tlite import run_dir
  folder, _ = run
  members = f"{folder},{run_dir.latest_checkpoint(folder)}"
  with app_served(members, {
      "/api/translate": {"lines": [sentence], "decode_hparams": DECODE},
      "/api/attention": {"line": sentence, "decode_hparams": DECODE}}) as url:
    page = browser.new_page()
    try:
      page.goto(url)
      page.wait_for_function(
          "document.querySelector('#model-info').textContent"
          ".includes('an ensemble of 2')", timeout=60_000)
      page.fill("#source", sentence)
      page.fill("#decode-hparams", DECODE)
      page.click("#translate")
      page.wait_for_selector("body[data-state=translated]", timeout=60_000)
      translated = page.inner_text("#translation-0")
      assert translated  # else the title's check below passes trivially
      page.click("li.result")
      page.wait_for_selector("body[data-state=attention]", timeout=60_000)
      assert page.inner_text("#attention-title").endswith(translated)
      member = page.locator("#attention-member")
      assert member.is_visible()
      assert member.locator("option").all_inner_texts() == ["member 1",
                                                            "member 2"]
      first = page.locator("canvas.heatmap").count()
      assert first == 3 * 2 * 4  # kinds x layers x heads (TINY's)
      page.select_option("#attention-member", "1")
      assert page.locator("canvas.heatmap").count() == first
    finally:
      page.close()


def test_page_draws_parse_trees(served, browser):
  """The page's tree drawing (parsing problems' outputs): one SVG text per
  constituent and word; text that is not a tree draws nothing."""
  url, _, _, _ = served
  page = browser.new_page()
  try:
    page.goto(url)
    counts = page.evaluate(
        "() => ['(S (NP (DT The) (NN dog)) (VP (VBZ runs)) (. .))', "
        "'(S (NP NNP )NP', 'not a tree'].map(t => { const tree = "
        "parseTree(t); return tree ? treeSvg(tree).querySelectorAll("
        "'text').length : null; })")
    assert counts == [11, None, None]
  finally:
    page.close()


def test_api_answers_bad_requests_with_4xx_and_keeps_serving(served,
                                                             sentence):
  url, decoded, server, _ = served
  api = url + "api/translate"
  bad = [
      (b"", 400, "empty body"),
      (b"{not json", 400, "invalid JSON"),
      (b"[1, 2]", 400, "expected a JSON object"),
      (b'{"lines": "one line"}', 400, "lines: expected a list"),
      (b'{"lines": [3]}', 400, r"lines\[0\]: expected a string"),
      (b'{"lines": []}', 400, "empty list"),
      (b'{"lines": ["a"], "n_best": "yes"}', 400, "n_best: expected true"),
      (b'{"lines": ["a"], "decode_hparams": 4}', 400, "decode_hparams"),
      (b'{"lines": ["a"], "colour": 1}', 400, "unknown field 'colour'"),
      (json.dumps({"lines": ["a"] * 5}).encode(), 400, "--max_lines"),
      (json.dumps({"lines": ["a" * 201]}).encode(), 400, "--max_line_chars"),
      (b'{"lines": ["a"], "decode_hparams": "beam_sise=2"}', 400,
       "Unknown decode hparam 'beam_sise'"),
      (b'{"lines": ["a"], "decode_hparams": "beam_size=0"}', 400,
       "beam_size must be >= 1"),
      (b'{"lines": ["a"], "decode_hparams": "beam_size=5"}', 400,
       "--max_beam_size"),
      (json.dumps({"lines": ["a" * 150] * 4 * 8}).encode(), 413,
       "--max_request_bytes"),
      # The export's own graph refuses it; the answer names its line.
      (json.dumps({"lines": ["a", "b"],
                   "target_prefixes": ["Ein", "\u65e5\u672c"]}).encode(),
       400, re.escape("target_prefixes: target prefix 2 ('\u65e5\u672c'): "
                      "the target vocabulary cannot encode (it holds a "
                      "piece the vocabulary does not know)")),
  ]
  for body, status, message in bad:
    code, answer = _post(api, body)
    assert code == status, (body[:80], answer)
    assert re.search(message, answer["error"]), (body[:80], answer)
    assert "\n" not in answer["error"]
  for path, body, status in (("api/attention", b'{"line": ""}', 400),
                             ("api/attention", b'{"line": 1}', 400),
                             ("api/nothing", b"{}", 404)):
    code, answer = _post(url + path, body)
    assert code == status and answer["error"], (path, answer)
  with pytest.raises(urllib.error.HTTPError) as wrong_method:
    urllib.request.urlopen(api, timeout=30)  # GET
  assert wrong_method.value.code == 405
  assert server.poll() is None
  code, answer = _translate(url, {"lines": [sentence, ""]})
  assert code == 200
  assert answer == {"translations": [decoded, ""]}


def test_api_attention_rows_are_distributions(served, sentence):
  url, decoded, _, _ = served
  code, answer = _post(url + "api/attention",
                       json.dumps({"line": sentence}).encode())
  assert code == 200
  assert answer["target"] == decoded
  sizes = {kind: len(answer["pieces"][name]) for kind, name in (
      ("source", "source"), ("target", "target"))}
  for kind, (queries, keys) in {
      "encoder": ("source", "source"), "decoder_self": ("target", "target"),
      "encdec": ("target", "source")}.items():
    layers = answer["attention"][kind]
    assert len(layers) == 2 and all(len(heads) == 4 for heads in layers)
    for heads in layers:
      for weights in heads:
        assert len(weights) == sizes[queries]
        for row in weights:
          assert len(row) == sizes[keys]
          assert abs(sum(row) - 1.0) < 1e-3


def test_sigterm_stops_the_server(served):
  """SIGTERM ends t2t-serve with status 0 (the next test is given a new
  one)."""
  _, _, server, _ = served
  server.terminate()
  assert server.wait(timeout=30) == 0


# ---- t2t-report --------------------------------------------------------------


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
  """A run folder of 12 training steps of the tiny model, evaluated every 4,
  with the run.json and hparams.json t2t-trainer writes, and a
  metrics.jsonl as the trainer's dev scoring writes it."""
  from t2tlite import precision, run_dir
  from t2tlite.train import strategy as strategy_lib
  folder = str(tmp_path_factory.mktemp("short_run"))
  strategy = strategy_lib.make_strategy(0, tf_config="")
  trainer = train_helpers.tiny_trainer(folder, strategy, train_steps=12,
                                       local_eval_frequency=4,
                                       log_every_steps=2)
  final = trainer.train()
  vocab = tmp_path_factory.mktemp("vocab") / "vocab.model"
  vocab.write_bytes(b"")  # the synthetic data have no sentencepiece model
  run_dir.write_run_info(
      folder, trainer.hp, "synthetic_reverse", train_helpers.SYNTHETIC_VOCAB,
      str(vocab), flags={"precision": precision.choose("float32").to_json()})
  # One line per evaluation, as t2t-trainer's dev scoring writes them: a
  # fraction (0-1) and a percentage (0-100, as exact_match and BLEU are),
  # taken from the evaluation's teacher-forced figures.
  evals = train_helpers.read_scalars(os.path.join(folder, "eval"))
  with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
    for step, loss in sorted(evals["loss"].items()):
      f.write(json.dumps({
          "step": step, "wall_time": 0.0, "loss": loss,
          "dev_token_f1": evals["accuracy"][step],
          "exact_match": 100 * evals["sequence_accuracy"][step]}) + "\n")
  return folder, final


@pytest.mark.timeout(300)
def test_report_is_one_offline_page_with_curves_and_metrics(short_run,
                                                            browser,
                                                            tmp_path):
  # t2t-report's own work, in this process (the command prints this path:
  # test_first_run.py runs it).
  from t2tlite.report import write_report
  folder, final = short_run
  path = os.path.join(folder, "report.html")
  assert write_report(folder) == path
  assert [n for n in os.listdir(folder) if "report" in n] == ["report.html"]
  text = open(path, encoding="utf-8").read()
  assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
  assert "<script" not in text
  context = browser.new_context(offline=True)
  requests = []

  def only_the_file(route):
    # The page itself loads; any other request is recorded and refused.
    if route.request.url == "file://" + path:
      route.continue_()
    else:
      requests.append(route.request.url)
      route.abort()

  context.route("**/*", only_the_file)
  page = context.new_page()
  try:
    page.goto("file://" + path)
    # Every plot decoded from its embedded PNG, with no request made.
    widths = page.eval_on_selector_all(
        "#curves img", "imgs => imgs.map(i => i.complete && i.naturalWidth)")
    assert len(widths) == 6 and all(w > 100 for w in widths)
    assert requests == []
    shot = browser_lib.screenshot_path(tmp_path, "short_run_report.png")
    page.screenshot(path=shot, full_page=True)
    print(f"screenshot of {path}: {shot}")
    # Each dev plot holds metrics of one scale: the fractions (0-1) on one,
    # every other score on its own.
    alts = page.eval_on_selector_all("#curves img",
                                     "imgs => imgs.map(i => i.alt)")
    assert [a for a in alts if a.startswith("Dev ")] == [
        "Dev accuracy (teacher-forced): dev accuracy, dev sequence_accuracy",
        "Dev dev_token_f1: dev dev_token_f1",
        "Dev exact_match: dev exact_match"], alts
    results = dict(row.split("\t") for row in page.locator(
        "#eval-results tr").all_inner_texts())
    assert float(results["loss"]) == pytest.approx(final["loss"], rel=1e-3)
    assert float(results["accuracy"]) == pytest.approx(final["accuracy"],
                                                       rel=1e-3)
    evaluations = page.locator("#evaluations tr").all_inner_texts()
    header = evaluations[0].split("\t")
    assert header[0] == "step" and "dev_token_f1" in header
    assert [row.split("\t")[0] for row in evaluations[1:]] == ["4", "8", "12"]
    assert "ckpt-12" in page.inner_text("#checkpoints tr.best")
    assert "float32" in page.inner_text("#machine")
  finally:
    context.close()
