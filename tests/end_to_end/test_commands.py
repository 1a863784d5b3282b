"""The commands as a user meets them: --help (exit 0), a quiet start, clear
errors, progress while training, a plugin model through t2t-trainer and
t2t-decoder, the decoder's warning on inputs longer than training; and CI
runs the README's test command."""
import contextlib
import io
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from user_env import clean_env
import command_flags
import require_all

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = REPO / "tests" / "support" / "plugins"
BIN = pathlib.Path(sys.executable).parent
# Lines in absl/glog format ("I1123 11:36:36.895 12345 file.py:396] ..."),
# or the commands' short one ("11:36:36 WARNING trainer: ..."), which are
# noise unless logged by t2tlite's own modules.
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ ([\w.]+):\d+\] ")
_SHORT_LINE = re.compile(r"^\d\d:\d\d:\d\d (?:[A-Z]+ )?(\w+): ")
_OWN_FILES = {path.name for path in (REPO / "t2tlite").rglob("*.py")}
_OWN_MODULES = {name[:-3] for name in _OWN_FILES}
TINY = ("num_layers=1,d_model=32,d_ff=64,num_heads=2,d_k=16,d_v=16,"
        "batch_size=256,warmup_steps=10")


def noise(output):
  """The lines of `output` that TensorFlow or absl printed, not t2tlite."""
  lines = []
  for line in output.splitlines():
    match, short = _LOG_LINE.match(line), _SHORT_LINE.match(line)
    if ("absl::InitializeLog" in line or "rebuild TensorFlow" in line or
        (match and match.group(1) not in _OWN_FILES) or
        (short and short.group(1) not in _OWN_MODULES)):
      lines.append(line)
  return lines


def command(name, *args, timeout=240, cwd=None, stdin=None):
  """Runs console script `name` in a clean environment; CompletedProcess."""
  return subprocess.run([str(BIN / name), *args], capture_output=True,
                        text=True, env=clean_env(), timeout=timeout, cwd=cwd,
                        input=stdin)


def console_scripts():
  text = (REPO / "setup.py").read_text()
  return re.findall(r'"(t2t-[a-z-]+)=t2tlite\.bin\.(\w+):main"', text)


def test_ci_runs_the_readme_test_command():
  readme = (REPO / "README.md").read_text()
  commands = [line.strip() for line in readme.splitlines()
              if "pip install -e '.[test" in line and "pytest" in line]
  assert len(commands) == 1, commands
  ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text()
              .splitlines()]
  assert commands[0] in ci_lines


def flags_in_use(module):
  """Flags a command reads: FLAGS.name in its source, and those the shared
  flag modules read for it."""
  source = (REPO / "t2tlite" / "bin" / f"{module}.py").read_text()
  used = set(re.findall(r"FLAGS\.(\w+)", source))
  if "run_flags.load_trained" in source:
    used |= {"output_dir", "checkpoint_path", "decode_hparams"}
  if "load_plugins" in source:
    used.add("t2t_usr_dir")
  return used


@pytest.mark.timeout(300)
def test_every_command_has_help():
  scripts = console_scripts()
  module_of = dict(scripts)
  assert len(scripts) >= 9
  processes = {name: subprocess.Popen(
      [str(BIN / name), "--help"], stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True, env=clean_env())
               for name, _ in scripts}
  try:
    for name, process in processes.items():
      output, _ = process.communicate(timeout=240)
      assert process.returncode == 0, output[-2000:]
      assert not noise(output), f"{name} --help:\n{output[:3000]}"
      # Usage examples keep their line breaks (raw docstrings).
      assert ("--output_dir=~/t2t_train/ende [--problem=translate_ende_wmt] "
              "\\\n" in output) == (name == "t2t-decoder")
      assert "Try --helpfull" in output, f"{name} --help:\n{output[-2000:]}"
      # The flags follow "flags:" directly, under no header naming the
      # wrapper script's path (absl's module header).
      assert re.search(r"^flags:\n\n  --", output, re.M), output[-3000:]
      assert not re.search(r"^\S*/\S*:$", output, re.M), output[:3000]
      listed = set(re.findall(r"^\s+--(?:\[no\])?(\w+)", output, re.M))
      missing = flags_in_use(module_of[name]) - listed
      assert not missing, f"{name} --help lacks {missing}:\n{output[-3000:]}"
  finally:
    for process in processes.values():
      if process.poll() is None:
        process.kill()


def test_commands_load_tensorflow_only_to_run():
  """--help, a misspelt flag and a missing required flag answer before
  the command's body runs; so importing every command module (its flag
  definitions) must load no TensorFlow or Keras (t2tlite.bin.lazy). One
  process imports them in turn, forgetting each (tests/support/
  command_flags.py: commands define flags of the same name); TensorFlow,
  once loaded, stays, so the first module that loads it is named."""
  code = ("import json, sys\n"
          "sys.path.insert(0, sys.argv[1])\n"
          "from command_flags import command_flags\n"
          "loaded = {}\n"
          "for module in sys.argv[2:]:\n"
          "  command_flags([module])\n"
          "  loaded[module] = sorted(n for n in ('tensorflow', 'keras') "
          "if n in sys.modules)\n"
          "print(json.dumps(loaded))")
  modules = [f"t2tlite.bin.{module}" for _, module in console_scripts()]
  run = subprocess.run(
      [sys.executable, "-c", code, str(REPO / "tests" / "support"),
       *modules], capture_output=True, text=True, env=clean_env(),
      timeout=120)
  assert run.returncode == 0, run.stderr[-3000:]
  loaded = json.loads(run.stdout)
  assert list(loaded) == modules
  assert loaded == {module: [] for module in modules}, loaded


def test_noise_detection_sees_tensorflow_lines():
  assert noise("I0000 00:00:1795433238.790204    5997 port.cc:153] oneDNN\n"
               "WARNING: All log messages before absl::InitializeLog() is "
               "called are written to STDERR")
  assert noise("11:36:36 WARNING saved_model_builder: assets written")
  assert not noise("I1123 11:36:36.895241 139902 trainer.py:396] Training "
                   "to step 20\nt2t-decoder: warning: longer\n"
                   "11:36:36 trainer: Training to step 20")


@pytest.mark.timeout(180)
def test_precision_check_keeps_its_measurement(tmp_path, monkeypatch,
                                               capsys):
  """`python -m t2tlite.precision` prints auto's choice and only its own
  lines; on a CPU with a bfloat16 flag another process (this one) reads
  the kept speedup (a figure written in its place) instead of measuring,
  and --remeasure (here, in this process) measures it again."""
  from t2tlite import bfloat16_check, hardware, precision
  env = dict(clean_env(), T2TLITE_CACHE_DIR=str(tmp_path))
  checks = lambda *args: subprocess.run(
      [sys.executable, "-m", "t2tlite.precision", *args], env=env,
      capture_output=True, text=True, timeout=120, check=True)
  first_check = checks()
  assert not noise(first_check.stderr), first_check.stderr[:3000]
  first = first_check.stdout
  assert re.search(r"^auto precision: (bfloat16|float16|float32) \(",
                   first, re.M), first
  speedup = re.search(r"^bfloat16 matmul speedup: (.+)x \(auto needs",
                      first, re.M)
  kept = tmp_path / "bfloat16_speedup.json"
  if speedup is None:
    assert not kept.exists()
    require_all.machine_skip("no bfloat16 speedup measured (a GPU, or no CPU "
                             "bfloat16 flag): nothing kept to read again")
  [entry] = json.loads(kept.read_text()).values()
  assert float(speedup.group(1)) == entry["speedup"]
  assert f"kept in {kept}" in first
  kept.write_text(json.dumps({key: dict(value, speedup=99.0) for key, value
                              in json.loads(kept.read_text()).items()}))

  def measure():
    raise AssertionError("measured the bfloat16 speedup again")

  measured = bfloat16_check.bfloat16_speedup
  monkeypatch.setenv(bfloat16_check.CACHE_DIR_ENV, str(tmp_path))
  monkeypatch.setattr(bfloat16_check, "bfloat16_speedup", measure)
  device = hardware.describe_device.__wrapped__()
  assert device.bfloat16_speedup == 99.0
  assert device.measured.endswith(f"kept in {kept}")
  monkeypatch.setattr(bfloat16_check, "bfloat16_speedup", measured)
  # main's describe_device is cached by its arguments: measured afresh here,
  # and recomputed (from the machine's own kept figure) when next asked.
  hardware.describe_device.cache_clear()
  try:
    capsys.readouterr()
    precision.main(["--remeasure"])
    remeasured = capsys.readouterr().out
  finally:
    hardware.describe_device.cache_clear()
  assert re.search(r"^bfloat16 matmul speedup: .+x \(auto needs", remeasured,
                   re.M), remeasured
  assert "speedup: 99.0x" not in remeasured
  assert list(json.loads(kept.read_text()).values())[0]["speedup"] < 99


@pytest.mark.timeout(120)
def test_bleu_prints_only_its_own_lines(tmp_path):
  (tmp_path / "hyp").write_text("a small cat sat on the mat\n")
  (tmp_path / "ref").write_text("a small cat sat on the mat\n")
  run = command("t2t-bleu", f"--translation={tmp_path / 'hyp'}",
                f"--reference={tmp_path / 'ref'}")
  assert run.returncode == 0, run.stderr
  assert run.stderr == ""
  assert run.stdout.startswith("BLEU = 100.00")


REQUIRED_OUTPUT_DIR = ("t2t-decoder", "t2t-exporter", "t2t-avg-checkpoints",
                       "t2t-trainer")


@pytest.fixture(scope="module")
def failing_runs(tmp_path_factory):
  """Commands that must fail at once, run in parallel: {key: (returncode,
  stderr)}; key "data_dir" also maps to the file given as --data_dir."""
  folder = tmp_path_factory.mktemp("failing")
  not_a_folder = folder / "data"
  not_a_folder.write_text("")
  runs = {f"required {name}": [name] for name in REQUIRED_OUTPUT_DIR}
  runs["datagen data_dir"] = ["t2t-datagen", "--problem=algorithmic_reverse",
                              f"--data_dir={not_a_folder}"]
  runs["trainer data_dir"] = [
      "t2t-trainer", "--problem=algorithmic_reverse", "--generate_data",
      "--hparams_set=transformer_tiny", f"--data_dir={not_a_folder}",
      f"--output_dir={folder / 'out'}"]
  runs["unknown model"] = [
      "t2t-trainer", "--model=transfomer", "--problem=algorithmic_reverse",
      "--hparams_set=transformer_tiny", f"--data_dir={folder}",
      f"--output_dir={folder / 'out'}"]
  started = {key: subprocess.Popen(
      [str(BIN / args[0]), *args[1:]], stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True, env=clean_env())
             for key, args in runs.items()}
  results = {"data_dir": not_a_folder, "out": folder / "out"}
  try:
    for key, process in started.items():
      _, stderr = process.communicate(timeout=200)
      results[key] = (process.returncode, stderr)
  finally:
    for process in started.values():
      if process.poll() is None:
        process.kill()
  return results


@pytest.mark.timeout(240)
def test_data_dir_naming_a_file_is_a_clear_error(failing_runs):
  not_a_folder = failing_runs["data_dir"]
  for name in ("datagen", "trainer"):
    code, stderr = failing_runs[f"{name} data_dir"]
    assert code == 1, stderr
    assert (f"t2t-{name}: error: --data_dir={not_a_folder} is a file; "
            "expected a folder") in stderr
    assert "Traceback" not in stderr and not noise(stderr)
  assert not_a_folder.read_text() == ""


@pytest.mark.timeout(240)
def test_unknown_model_fails_with_close_matches(failing_runs):
  code, stderr = failing_runs["unknown model"]
  assert code == 1
  assert ("t2t-trainer: error: Unknown model 'transfomer'. Did you mean: "
          "transformer?") in stderr
  assert not failing_runs["out"].exists()


@pytest.mark.timeout(240)
def test_required_flag_is_one_message(failing_runs):
  for name in REQUIRED_OUTPUT_DIR:
    code, stderr = failing_runs[f"required {name}"]
    assert code == 1
    assert stderr.startswith(f"{name}: error: --output_dir is required: "
                             "Training folder"), stderr


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory):
  """A few steps of the plugin model on the plugin problem, through
  t2t-trainer in a clean environment: (output_dir, CompletedProcess)."""
  root = tmp_path_factory.mktemp("plugin_run")
  run = command(
      "t2t-trainer", f"--t2t_usr_dir={PLUGINS}",
      "--model=plugin_postnorm_transformer", "--problem=plugin_sort_digits",
      "--hparams_set=plugin_tiny", f"--hparams={TINY}",
      f"--data_dir={root / 'data'}", f"--output_dir={root / 'train'}",
      "--generate_data", "--train_steps=4", "--log_step_count_steps=2",
      "--eval_steps=1", "--local_eval_frequency=0", timeout=400)
  assert run.returncode == 0, run.stderr[-3000:]
  return root / "train", run


@pytest.mark.timeout(420)
def test_training_says_what_it_does_and_stays_quiet(plugin_run):
  output_dir, run = plugin_run
  assert not noise(run.stderr), run.stderr[:3000]
  order = ["Training to step 4", "Building the input pipeline...",
           "Tracing the training step", "First step done in",
           "step 2/4", "ETA ", "step 4/4", "Saved checkpoint ",
           "Final evaluation on dev..."]
  positions = [run.stderr.find(text) for text in order]
  assert -1 not in positions and positions == sorted(positions), run.stderr
  saved = json.loads((output_dir / "run.json").read_text())
  assert saved["model"] == "plugin_postnorm_transformer"
  # plugin_sort_digits: at most 12 digits of one piece each, and EOS.
  assert 2 <= saved["longest_train_example"] <= 13


@pytest.mark.timeout(420)
def test_generate_data_prints_the_datagen_summary(plugin_run):
  _, run = plugin_run
  summary = json.loads((plugin_run[0].parent / "data" /
                        "plugin_sort_digits.datagen.json").read_text())
  lines = run.stdout.splitlines()
  assert lines[0] == f"plugin_sort_digits -> {summary['data_dir']}", lines
  assert "  vocabulary (trained): " in run.stdout
  for split, stats in summary["splits"].items():
    assert any(line.split()[:2] == [split, f"{stats['examples']:,}"]
               for line in lines), (split, run.stdout)


@pytest.fixture(scope="module")
def plugin_loaded(plugin_run):
  """The plugin run loaded in this process (run_decoding.LoadedRun), as
  t2t-decoder loads it, the plugin imported here."""
  from t2tlite import registry, run_decoding
  output_dir, _ = plugin_run
  try:
    if "plugin_postnorm_transformer" not in registry.models:
      registry.import_usr_dir(str(PLUGINS))
    return run_decoding.load_run(str(output_dir))
  finally:  # a later test imports the plugin into registries of its own
    for name in [m for m in sys.modules if m.startswith("t2t_usr_plugins")]:
      del sys.modules[name]


@pytest.mark.timeout(420)
def test_plugin_model_is_rebuilt_from_the_run_folder(plugin_loaded):
  model, info = plugin_loaded.model, plugin_loaded.info
  assert type(model).__name__ == "PluginPostNormTransformer"
  assert (model.config.norm_position, info.hparams.norm_position) == (
      "post", "pre")


# plugin_sort_digits supplies a constraint: sorted digits, one per input
# digit. Two lines longer than any training example (the 2nd and 3rd),
# then lines the constraint test reads too.
SHORT_LINES = ["3 1 2", "9 0 9 4 4 7 1", "5 5 2 8 0 6 3 3 1 9"]
DECODED_LINES = [SHORT_LINES[0], " ".join("7" * 30), " ".join("5" * 25),
                 *SHORT_LINES[1:]]


def obeys(line, output):
  """Whether `output` is `line`'s digits sorted, one digit a token."""
  digits, output = line.split(), output.split()
  return len(output) == len(digits) and output == sorted(output) and all(
      d.isdigit() and len(d) == 1 for d in output)


def old_run_folder(output_dir, folder):
  """A copy of run `output_dir` in `folder` whose run.json lacks the
  longest training example, as written before run.json recorded it."""
  # A copy: the module's other tests read the run's own run.json.
  shutil.copytree(output_dir, folder)
  saved = json.loads((folder / "run.json").read_text())
  del saved["longest_train_example"]
  (folder / "run.json").write_text(json.dumps(saved))
  return folder


@pytest.fixture(scope="module")
def plugin_decodes(plugin_run, plugin_loaded, tmp_path_factory):
  """DECODED_LINES decoded: {"new": t2t-decoder, greedy, without
  --t2t_usr_dir (the plugin folder is read from run.json), a
  CompletedProcess; "old": beam_size=3 in this process on a copy of the run
  whose run.json lacks the longest training example (old_run_folder), as
  t2t-decoder loads it: (outputs, what its length warning wrote)}."""
  from t2tlite import problem_decoding, run_decoding
  from t2tlite.decode import machine
  output_dir, _ = plugin_run
  tmp = tmp_path_factory.mktemp("plugin_decodes")
  source = tmp / "in.txt"
  source.write_text("".join(line + "\n" for line in DECODED_LINES))
  started = subprocess.Popen(
      [str(BIN / "t2t-decoder"), f"--output_dir={output_dir}",
       f"--decode_from_file={source}", "--decode_hparams=beam_size=1"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=clean_env())
  try:  # while the command runs
    old = run_decoding.load_run(str(old_run_folder(output_dir,
                                                   tmp / "old_run")))
    warned = io.StringIO()
    with command_flags.command_module(
        "t2tlite.bin.t2t_decoder") as decoder_command, \
        contextlib.redirect_stderr(warned):
      decoder_command._LengthWarning(
          old.vocab, old.info.longest_train_example).check(DECODED_LINES)
    decoder = old.decoder(machine.settle(problem_decoding.decode_hparams(
        old.info.problem, "beam_size=3")))
    outputs, _ = decoder.decode_lines(DECODED_LINES, progress=False)
    stdout, stderr = started.communicate(timeout=300)
  finally:
    if started.poll() is None:
      started.kill()
  new = subprocess.CompletedProcess(started.args, started.returncode, stdout,
                                    stderr)
  assert new.returncode == 0, new.stderr[-3000:]
  return {"new": new, "old": (outputs, warned.getvalue())}


@pytest.mark.timeout(420)
def test_decoder_warns_once_on_inputs_longer_than_training(plugin_run,
                                                           plugin_decodes):
  output_dir, _ = plugin_run
  run = plugin_decodes["new"]
  warnings = [line for line in run.stderr.splitlines()
              if line.startswith("t2t-decoder: warning:")]
  longest = json.loads((output_dir / "run.json").read_text())[
      "longest_train_example"]
  assert len(warnings) == 1, run.stderr
  assert (f"2 input line(s) are longer than any training example (line 2: "
          f"31 tokens; the longest training example had {longest}, EOS "
          "included)") in warnings[0]
  assert len(run.stdout.splitlines()) == len(DECODED_LINES)
  assert not noise(run.stderr), run.stderr[:3000]
  # A run folder written before run.json recorded the length: no warning.
  outputs, warned = plugin_decodes["old"]
  assert warned == ""
  assert len(outputs) == len(DECODED_LINES)


@pytest.mark.timeout(420)
def test_a_plugin_problem_constrains_t2t_decoder(plugin_decodes,
                                                 plugin_loaded):
  # The model trained 4 steps; its outputs obey only by the constraint,
  # greedy through t2t-decoder and beam_size=3 (in this process, as
  # t2t-decoder loads the run), and constrained=false (in this process,
  # on the same run) lets them go.
  from t2tlite import problem_decoding
  from t2tlite.decode import machine
  for key, decoded in (("new", plugin_decodes["new"].stdout.splitlines()),
                       ("old", plugin_decodes["old"][0])):
    outputs = dict(zip(DECODED_LINES, decoded))
    pairs = [(line, outputs[line]) for line in SHORT_LINES]
    assert all(obeys(line, out) for line, out in pairs), (key, pairs)
  decoder = plugin_loaded.decoder(machine.settle(
      problem_decoding.decode_hparams(plugin_loaded.info.problem,
                                      "beam_size=1,constrained=false")))
  assert decoder.constraint is None
  free, _ = decoder.decode_lines(SHORT_LINES, progress=False)
  assert len(free) == len(SHORT_LINES)
  assert not all(obeys(line, out) for line, out in zip(SHORT_LINES, free)), (
      free)


@pytest.mark.timeout(420)
def test_other_commands_print_only_their_own_lines(plugin_run, tmp_path):
  output_dir, _ = plugin_run
  gold = tmp_path / "gold.mrg"
  gold.write_text("( (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)) )\n")
  prediction = tmp_path / "pred.txt"
  prediction.write_text("(S (NP XX XX )NP (VP XX )VP XX )S\n")
  runs = {
      "t2t-datagen": ["--problem=plugin_sort_digits",
                      f"--t2t_usr_dir={PLUGINS}",
                      f"--data_dir={output_dir.parent / 'data'}"],
      "t2t-avg-checkpoints": [f"--output_dir={output_dir}", "--n=1"],
      "t2t-exporter": [f"--output_dir={output_dir}",
                       f"--export_dir={tmp_path / 'export'}"],
      "t2t-attention": [f"--output_dir={output_dir}", "--input=3 1 2",
                        f"--plot_dir={tmp_path / 'plots'}"],
      "t2t-parse-eval": [f"--prediction={prediction}", f"--reference={gold}"],
  }
  started = {name: subprocess.Popen(
      [str(BIN / name), *args], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, env=clean_env())
             for name, args in runs.items()}
  try:
    for name, process in started.items():
      stdout, stderr = process.communicate(timeout=400)
      assert process.returncode == 0, f"{name}:\n{stderr[-3000:]}"
      assert stdout.strip(), name
      assert not noise(stderr), f"{name}:\n{stderr[:3000]}"
  finally:
    for process in started.values():
      if process.poll() is None:
        process.kill()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("blocked", ["waitress", "flask"])
def test_serve_without_its_extra_names_the_extra(tmp_path, blocked):
  """t2t-serve in a process where the serving extra's package cannot be
  imported (as without `pip install 't2tlite[serving]'`): exit code 2, one
  line naming the extra, no traceback."""
  code = ("import sys; sys.modules[sys.argv[1]] = None; "
          "sys.argv = ['t2t-serve'] + sys.argv[2:]; "
          "from t2tlite.bin.t2t_serve import main; main()")
  run = subprocess.run(
      [sys.executable, "-c", code, blocked, f"--model={tmp_path}"],
      capture_output=True, text=True, env=clean_env(), timeout=100)
  assert run.returncode == 2, run.stderr[-3000:]
  assert run.stderr.splitlines() == [
      f"t2t-serve: error: the web server needs the serving extra ({blocked} "
      "is not installed): pip install 't2tlite[serving]'"], run.stderr
  assert run.stdout == ""
