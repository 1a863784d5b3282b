"""The command layer's helpers: library argument names become flag names,
TensorFlow's start-up notices are told from other stderr lines, log lines
are short, modules load at their first use; console.run's one-line errors,
required and path flags, and --help."""
import os
import sys

from absl import app
from absl import flags
import pytest

from t2tlite import quiet
from t2tlite.bin import console
import command_flags


def test_library_arguments_become_flags():
  flags = ["output_dir", "checkpoint_path", "n", "hparams_set", "hparams"]
  assert console.name_flags(
      "output_dir=/x/output_dir/y is not a t2tlite training folder",
      flags) == "--output_dir=/x/output_dir/y is not a t2tlite training folder"
  assert console.name_flags(
      "No checkpoint in output_dir=/x: name one with checkpoint_path.",
      flags) == ("No checkpoint in --output_dir=/x: name one with "
                 "--checkpoint_path.")
  # Names without "_" only as name=value; unknown names stay; renames apply.
  assert console.name_flags("n=7 but n is larger; use n=5 (min_n=2)",
                            flags) == "--n=7 but n is larger; use --n=5 " \
                                      "(min_n=2)"
  assert console.name_flags("(hparams_set=a, overrides='x=1')", flags,
                            {"overrides": "hparams"}) == (
                                "(--hparams_set=a, --hparams='x=1')")
  assert console.name_flags("hparam train_steps must be positive",
                            ["train_steps"]) == (
                                "hparam train_steps must be positive")


def test_startup_notices_are_recognised():
  assert quiet.is_notice("WARNING: All log messages before "
                         "absl::InitializeLog() is called are written to "
                         "STDERR\n")
  assert quiet.is_notice("I0000 00:00:1795433238.790574    5997 "
                         "cudart_stub.cc:31] Could not find cuda drivers on "
                         "your machine, GPU will not be used.")
  assert not quiet.is_notice("E0000 00:00:1795433238.790574    5997 "
                             "op_kernel.cc:12] something broke")
  assert not quiet.is_notice("Traceback (most recent call last):")


def test_user_settings_bring_the_logs_back():
  assert quiet.user_wants_logs(["t2t-x", "--verbosity=1"], {})
  assert quiet.user_wants_logs(["t2t-x", "-v", "1"], {})
  assert quiet.user_wants_logs(["t2t-x"], {"TF_CPP_MIN_LOG_LEVEL": "0"})
  assert not quiet.user_wants_logs(["t2t-x", "--vocab_size=5"], {})
  assert not quiet.user_wants_logs(["t2t-x", "--", "--verbosity=1"], {})


def test_a_commands_own_quiet_setting_is_not_taken_for_the_users():
  # A process started by a quiet command inherits its setting, marked.
  inherited = {"TF_CPP_MIN_LOG_LEVEL": "3", "T2TLITE_QUIET_SET": "3"}
  assert not quiet.user_wants_logs(["t2t-x"], inherited)
  # The user changed the level after the mark was set: theirs.
  assert quiet.user_wants_logs(
      ["t2t-x"], dict(inherited, TF_CPP_MIN_LOG_LEVEL="1"))
  assert quiet.user_wants_logs(["t2t-x"], {"TF_CPP_MIN_LOG_LEVEL": "3"})


def _record(level, message, module_path="/x/t2tlite/train/trainer.py"):
  import logging
  record = logging.LogRecord("absl", level, module_path, 704, message, (),
                             None)
  record.created = 1795792335.5  # 2026-11-27 (UTC) in the local zone
  return record


def test_log_lines_carry_time_level_when_not_info_and_component():
  import logging
  import re
  import time
  from t2tlite.bin import log_lines
  formatter = log_lines.ShortFormatter()
  clock = time.strftime("%H:%M:%S", time.localtime(1795792335.5))
  assert formatter.format(_record(logging.INFO, "Planned 857 steps")) == (
      f"{clock} trainer: Planned 857 steps")
  warning = formatter.format(_record(logging.WARNING, "Ignoring x",
                                     "/y/t2tlite/bfloat16_check.py"))
  assert warning == f"{clock} WARNING bfloat16_check: Ignoring x"
  # No thread id, no source file and line.
  assert not re.search(r"\.py|:704|\d{6,}", warning)


def test_an_unreadable_flag_file_is_named_by_its_flag(tmp_path):
  missing = str(tmp_path / "missing.txt")
  latin1 = tmp_path / "latin1.txt"
  latin1.write_bytes("caf\xe9\n".encode("latin-1"))
  # t2t-bleu defines --translation.
  with command_flags.command_module("t2tlite.bin.t2t_bleu",
                                    translation=missing):
    with pytest.raises(FileNotFoundError) as missing_error:
      console.read_flag_lines("translation")
    flags.FLAGS.translation = str(latin1)
    with pytest.raises(ValueError) as latin1_error:
      console.read_flag_lines("translation")
    latin1.write_text("a\nb\n", encoding="utf-8")
    assert console.read_flag_lines("translation") == ["a", "b"]
  assert str(missing_error.value) == f"--translation={missing}: no such file"
  assert str(latin1_error.value).startswith(
      f"--translation={latin1}: not UTF-8")


def test_library_info_records_are_dropped_but_warnings_kept(tmp_path):
  import logging
  library = tmp_path / "tensorflow"
  library.mkdir()
  drop = quiet._DropLibraryInfo((os.path.join(str(library), ""),))
  inside = str(library / "checkpoint.py")
  assert not drop.filter(_record(logging.INFO, "Sharding took 0.1 s",
                                 inside))
  assert drop.filter(_record(logging.WARNING, "Deprecated", inside))
  assert drop.filter(_record(logging.ERROR, "Failed", inside))
  # The commands' own INFO lines stay.
  assert drop.filter(_record(logging.INFO, "Planned 857 steps"))


def test_lines_printed_while_tensorflow_loads_show_but_notices(capfd):
  with quiet.filtered_stderr():
    os.write(2, b"I0000 00:00:1795433238.790204  5997 port.cc:153] oneDNN "
                b"custom operations are on.\n"
                b"E0000 00:00:1795433238.790574  5997 op.cc:12] broke\n"
                b"WARNING: All log messages before absl::InitializeLog() "
                b"is called are written to STDERR\n"
                b"UserWarning: a warning of Python's\n")
  assert capfd.readouterr().err == (
      "E0000 00:00:1795433238.790574  5997 op.cc:12] broke\n"
      "UserWarning: a warning of Python's\n")


def test_a_log_line_with_an_exception_carries_its_traceback():
  import logging
  from t2tlite.bin import log_lines
  try:
    raise ValueError("no such checkpoint")
  except ValueError:
    record = _record(logging.ERROR, "Decoding failed")
    record.exc_info = sys.exc_info()
  lines = log_lines.ShortFormatter().format(record).splitlines()
  assert lines[0].endswith(" ERROR trainer: Decoding failed")
  assert lines[1] == "Traceback (most recent call last):"
  assert lines[-1] == "ValueError: no such checkpoint"


@pytest.fixture
def probe_package(tmp_path, monkeypatch):
  """A package `lazy_probe` on the import path whose module `child` records
  each execution in the package's `runs`."""
  package = tmp_path / "lazy_probe"
  package.mkdir()
  (package / "__init__.py").write_text("runs = []\n")
  (package / "child.py").write_text(
      "from lazy_probe import runs\nruns.append('child')\nVALUE = 7\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  yield "lazy_probe"
  for name in ("lazy_probe.child", "lazy_probe"):
    sys.modules.pop(name, None)


def test_a_lazy_module_runs_at_its_first_attribute_read(probe_package):
  from t2tlite.bin import lazy
  child = lazy.module("lazy_probe.child")
  package = sys.modules["lazy_probe"]
  assert package.runs == [] and package.child is child
  assert child.VALUE == 7 and package.runs == ["child"]


def test_a_module_imported_before_is_not_run_again(probe_package):
  from t2tlite.bin import lazy
  import lazy_probe.child
  assert lazy.module("lazy_probe.child") is lazy_probe.child
  assert lazy_probe.child.VALUE == 7 and lazy_probe.runs == ["child"]
  assert sys.modules["lazy_probe.child"] is lazy_probe.child


def test_a_misspelt_lazy_module_is_not_found_at_once(probe_package):
  from t2tlite.bin import lazy
  with pytest.raises(ModuleNotFoundError,
                     match="No module named 'lazy_probe.chlid'"):
    lazy.module("lazy_probe.chlid")
  assert "lazy_probe.chlid" not in sys.modules


# console.run, in this process, as t2t-serve's main would call it.


@pytest.fixture
def serve_command(monkeypatch):
  """Runs console.run over t2t-serve's flags with a command line; yields
  run(body, argv, **kwargs) -> the exit code."""
  from absl import app
  from absl import logging as absl_logging
  app.define_help_flags()  # before the command's flags are counted
  # absl's one-time set-up (its log handler, faulthandler) is not redone.
  monkeypatch.setattr(app._run_init, "done", True)  # noqa: SLF001
  handler = absl_logging.get_absl_handler()
  monkeypatch.setattr(handler, "formatter", handler.formatter)
  monkeypatch.setattr(sys.modules["__main__"], "__doc__", None)
  with command_flags.command_module("t2tlite.bin.t2t_serve") as command:

    def run(body, argv, **kwargs):
      monkeypatch.setattr(sys, "argv", ["t2t-serve"] + argv)
      with pytest.raises(SystemExit) as exit_:
        console.run(body, command.__name__, **kwargs)
      return exit_.value.code
    yield run


def test_an_expected_failure_is_one_line_naming_the_command_and_flags(
    serve_command, capsys):
  def body():
    raise FileNotFoundError("model=/x/run: no such folder")
  assert serve_command(body, ["--model=/x/run"]) == 1
  assert capsys.readouterr().err == (
      "t2t-serve: error: --model=/x/run: no such folder\n")


def test_a_required_flag_given_empty_is_missing(serve_command, capsys):
  ran = []
  assert serve_command(lambda: ran.append(1), ["--model="],
                       required=["model"]) == 1
  assert ran == []
  assert capsys.readouterr().err == (
      f"t2t-serve: error: --model is required: {flags.FLAGS['model'].help}\n")


def test_a_home_in_a_path_flag_is_expanded(serve_command, monkeypatch,
                                           tmp_path):
  monkeypatch.setenv("HOME", str(tmp_path))
  seen = []

  def body():
    seen.append((flags.FLAGS.model, flags.FLAGS.host))
  assert serve_command(body, ["--model=~/run", "--host=~"],
                       path_flags=["model"]) == 0
  assert seen == [(f"{tmp_path}/run", "~")]


def test_help_exits_0_but_a_bad_flag_before_a_help_argument_exits_1(
    serve_command, capsys):
  assert serve_command(lambda: None, ["--help"]) == 0
  out = capsys.readouterr().out
  # The command's docstring, then its flags, without absl's header line
  # naming the program.
  assert out.startswith("t2t-serve: a page and JSON API to translate")
  assert "\nflags:\n\n" in out and "--max_batch_lines" in out
  assert "\nt2t-serve:\n" not in out
  # After "--", "--help" is an argument, not a request for help.
  assert serve_command(lambda: None, ["--no_such_flag", "--", "--help"]) == 1


def test_a_usage_error_is_one_line_and_the_command_does_not_run(
    serve_command, capsys):
  ran = []
  assert serve_command(lambda: ran.append(1),
                       ["--model=/x/run", "translate", "this"]) == 1
  assert ran == []
  assert capsys.readouterr().err == (
      "t2t-serve: error: Unexpected arguments: translate this (--help lists "
      "the flags)\n")

  def body():  # flags that do not go together, as a command finds them
    raise app.UsageError("--host goes with --port")
  assert serve_command(body, ["--model=/x/run"]) == 1
  assert capsys.readouterr().err == (
      "t2t-serve: error: --host goes with --port (--help lists the flags)\n")
