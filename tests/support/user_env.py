"""The environment a command sees when a new user starts it."""
import os


def clean_env():
  """This process's environment without TensorFlow or absl logging settings
  (which a test run, or a quiet command run in-process, may have set)."""
  return {k: v for k, v in os.environ.items()
          if not k.startswith(("TF_CPP_", "GLOG_", "ABSL_", "T2TLITE_QUIET"))}
