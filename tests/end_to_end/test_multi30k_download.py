"""t2t-datagen --problem=translate_ende_multi30k downloads the Multi30k
release (served whole from 127.0.0.1), checks it against the pinned
checksums and writes the records of the recipe's command,
`t2t-datagen --problem=translate_ende_wmt --raw_data_dir=... --vocab_size=8000`,
over the same files: the README's Multi30k figures hold for the problem.

Needs ../shared/data/multi30k; skips without, saying how to get it.
"""
from corpora import shared_corpus
from file_server import serving
import multi30k_release
from train_helpers import command, console_script, run

from t2tlite.problems import multi30k


def test_download_writes_the_recipes_records(tmp_path):
  raw = shared_corpus("multi30k/raw")
  folder = multi30k_release.release_folder(tmp_path / "release", ("en", "de"))
  data_dir, reference_dir = tmp_path / "data", tmp_path / "reference"
  with serving(folder) as (url, requests):
    code, output = run(
        [console_script("t2t-datagen"), "--problem=translate_ende_multi30k",
         f"--data_dir={data_dir}", f"--tmp_dir={tmp_path / 'tmp'}"],
        timeout=300, env={multi30k.URL_VARIABLE: url})
  assert code == 0, output[-3000:]
  assert len(requests) == 16, requests  # every file, once
  for split in ("train ", "dev ", "test ", "test2017_flickr ",
                "test2017_mscoco ", "test2018_flickr "):
    assert f"\n  {split}" in output, output[-3000:]
  command("t2t-datagen", "--problem=translate_ende_wmt",
          f"--data_dir={reference_dir}", f"--raw_data_dir={raw}",
          "--vocab_size=8000", timeout=300)
  assert len(multi30k_release.generated_files(
      reference_dir, "translate_ende_wmt")) == 1 + 2 * (32 + 1 + 1) + 4
  assert multi30k_release.differences(
      data_dir, "translate_ende_multi30k", reference_dir,
      "translate_ende_wmt", splits=("train", "dev", "test")) == []
