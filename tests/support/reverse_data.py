"""The algorithmic_reverse data folder that t2t-datagen would write, made
once per test session (in the process of the first test to ask, which has
TensorFlow loaded already or soon will) and shared by the pytest-xdist
workers: read it, do not write into it (a test that must, copies it).

    data_dir = shared_reverse_data(tmp_path_factory)
"""
import pathlib

from shared_run import built_once


def _generate(path):
  from t2tlite import problem as problem_lib
  problem_lib.get_problem("algorithmic_reverse").generate_data(path)


def shared_reverse_data(tmp_path_factory):
  """Path of the shared algorithmic_reverse data folder."""
  return pathlib.Path(built_once(tmp_path_factory, "algorithmic_reverse_data",
                                 _generate))
