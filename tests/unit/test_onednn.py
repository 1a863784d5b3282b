"""oneDNN on by default on x86 (t2tlite.onednn): the decision on given
environments, and in fresh processes that TensorFlow really reads it."""
import os
import subprocess
import sys

from t2tlite import hardware, onednn, precision

ENV = onednn.ENV


def test_x86_gets_onednn_unless_the_user_set_it():
  setting, value = onednn.decide({}, False, "x86_64")
  assert (setting.source, setting.value, value) == (onednn.BY_T2TLITE, "1",
                                                     "1")
  for users in ("0", "1"):
    setting, value = onednn.decide({ENV: users}, False, "x86_64")
    assert (setting.source, setting.value, value) == (onednn.BY_USER, users,
                                                       None)


def test_a_child_process_knows_t2tlite_set_it():
  setting, value = onednn.decide({ENV: "1", onednn.MARK_ENV: "1"}, False,
                                 "x86_64")
  assert (setting.source, value) == (onednn.BY_T2TLITE, None)
  # The user changed it after: theirs.
  setting, _ = onednn.decide({ENV: "0", onednn.MARK_ENV: "1"}, False,
                             "x86_64")
  assert setting.source == onednn.BY_USER


def test_nothing_changes_once_tensorflow_is_loaded_or_off_x86():
  assert onednn.decide({}, True, "x86_64") == (
      onednn.Setting(None, onednn.TF_FIRST), None)
  # TensorFlow read the user's setting.
  assert onednn.decide({ENV: "0"}, True, "x86_64") == (
      onednn.Setting("0", onednn.BY_USER), None)
  assert onednn.decide({}, False, "aarch64") == (
      onednn.Setting(None, onednn.NOT_X86), None)


def test_x86_is_recognised_whatever_its_case():
  # platform.machine() is "AMD64" on Windows.
  for machine in ("AMD64", "x86_64", "i686"):
    assert onednn.decide({}, False, machine)[1] == "1", machine


def test_the_value_set_is_marked_for_the_processes_started(monkeypatch):
  monkeypatch.delenv(ENV, raising=False)
  monkeypatch.delenv(onednn.MARK_ENV, raising=False)
  monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
  monkeypatch.setattr(onednn.platform, "machine", lambda: "x86_64")
  monkeypatch.setattr(onednn, "_setting", None)
  assert onednn.set_default() == onednn.Setting("1", onednn.BY_T2TLITE)
  assert os.environ[ENV] == "1"
  # A process started now inherits the environment and says who set it.
  child, value = onednn.decide(dict(os.environ), True, "x86_64")
  assert (child.source, value) == (onednn.BY_T2TLITE, None)


def test_the_log_phrase_says_why():
  assert onednn.describe(True, onednn.Setting("1", onednn.BY_T2TLITE)) == (
      "oneDNN on (default set by t2tlite)")
  off = onednn.describe(False, onednn.Setting("0", onednn.BY_USER))
  assert off == "oneDNN off (TF_ENABLE_ONEDNN_OPTS=0, set by the user)"
  late = onednn.describe(False, onednn.Setting(None, onednn.TF_FIRST))
  assert "tensorflow imported before t2tlite" in late and "=1" in late


def test_the_precision_choice_carries_it():
  device = hardware.Device(cpu_model="AMD EPYC 7763", cpu_flags=frozenset(
      {"avx2"}), onednn_enabled=False,
      onednn_setting=onednn.Setting("0", onednn.BY_USER))
  choice = precision.choose("auto", device)
  assert choice.onednn == ("oneDNN off (TF_ENABLE_ONEDNN_OPTS=0, set by the "
                           "user)")
  gpu = hardware.Device(gpus=(hardware.Gpu("A100", (8, 0)),))
  assert precision.choose("auto", gpu).onednn == ""


def _fresh(code, **env):
  """Runs `code` in a fresh Python with `env` on top of this environment
  without TF_ENABLE_ONEDNN_OPTS; returns its stdout's last line."""
  environ = {k: v for k, v in os.environ.items()
             if k not in (ENV, onednn.MARK_ENV)}
  environ.update(env, TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run([sys.executable, "-c", code], env=environ,
                          capture_output=True, text=True, timeout=120,
                          check=True)
  return result.stdout.strip().splitlines()[-1]


IS_ON = ("from tensorflow.python.util import _pywrap_util_port as p; "
         "from t2tlite import onednn; "
         "print(p.IsMklEnabled(), onednn.setting().source)")


def test_commands_and_the_library_turn_it_on_before_tensorflow_loads():
  # As a command starts: t2tlite.quiet hides TensorFlow's start-up.
  code = "import t2tlite.quiet as q; q.install(); " + IS_ON
  assert _fresh(code) == "True default set by t2tlite"
  assert _fresh("import t2tlite; " + IS_ON, **{ENV: "0"}) == (
      "False set by the user")


def test_tensorflow_imported_first_is_detected():
  code = ("import tensorflow; import t2tlite; " + IS_ON)
  # Whatever TensorFlow chose on this CPU; t2tlite says it could not choose.
  assert _fresh(code).endswith("tensorflow imported before t2tlite")
