"""The 'checkpoint' file of a folder of checkpoints, written by hand for
tests that need its list but no variables (finding, listing, averaging).

    write_checkpoint_state(folder, ["ckpt-1", "ckpt-2"])   # ckpt-2 newest
"""
import os


def write_checkpoint_state(folder, names):
  """Writes FOLDER/checkpoint, the CheckpointState text TensorFlow reads
  (tf.train.get_checkpoint_state): `names` (prefixes, relative to folder
  or absolute) oldest first, the last one model_checkpoint_path."""
  with open(os.path.join(folder, "checkpoint"), "w", encoding="utf-8") as f:
    f.write(f'model_checkpoint_path: "{names[-1]}"\n' + "".join(
        f'all_model_checkpoint_paths: "{name}"\n' for name in names))
