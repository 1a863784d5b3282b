"""translate_ende_multi30k: the release downloaded from a real HTTP server on
127.0.0.1 (a subset, checked against the served files' own checksums), or
read from --raw_data_dir, writes translate_ende_wmt's records; failed and
short downloads are one-line errors naming the URL and leave no file.

The files come from ../shared/data/multi30k; without them these tests skip,
saying how to get them. The full release, checked against the pinned
checksums through t2t-datagen, is in tests/end_to_end/test_multi30k_download.py.
"""
import gzip
import hashlib

import pytest

from corpora import MULTI30K_TRAIN_LINES, shared_corpus
from file_server import serving
import multi30k_release

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from t2tlite.data import download
from t2tlite.data.samples import DataError
from t2tlite.problem import get_problem
from t2tlite.problems import multi30k

VOCAB_SIZE = 1000  # the shared multi30k_data fixture's
LANGS = ("en", "de")
SHARDS = 32 + 1 + 1  # train, dev, test of translate_ende_wmt


@pytest.fixture(scope="module")
def release(tmp_path_factory):
  """(folder, {(stem, lang): Expected}): the release's EN/DE files with
  the first MULTI30K_TRAIN_LINES training lines (multi30k_raw's), served
  from `folder`, and their checksums."""
  folder = multi30k_release.release_folder(
      tmp_path_factory.mktemp("release"), LANGS, MULTI30K_TRAIN_LINES)
  return folder, multi30k_release.served_release(folder)


@pytest.fixture(scope="module")
def downloaded(release, tmp_path_factory):
  """(data_dir, tmp_dir, summary, request paths): translate_ende_multi30k
  generated from the served release."""
  folder, expected = release
  data_dir = tmp_path_factory.mktemp("downloaded_data")
  tmp_dir = tmp_path_factory.mktemp("downloads")
  with serving(folder) as (url, requests):
    problem = multi30k.TranslateEndeMulti30k(base_url=url, release=expected)
    summary = problem.generate_data(str(data_dir), str(tmp_dir),
                                    vocab_size=VOCAB_SIZE)
  return data_dir, tmp_dir, summary, list(requests)


def test_registered_with_their_reverse():
  for name in ("translate_ende_multi30k", "translate_enfr_multi30k"):
    problem, reverse = get_problem(name), get_problem(name + "_rev")
    assert (problem.reverse, reverse.reverse) == (False, True)
    assert reverse.data_name == name
    assert problem.vocab_size == 8000  # the recipe's --vocab_size
  assert get_problem("translate_ende_multi30k").vocab_type == (
      get_problem("translate_ende_wmt").vocab_type)
  assert get_problem("translate_enfr_multi30k").vocab_type == (
      get_problem("translate_enfr_wmt").vocab_type)
  assert get_problem("translate_enfr_multi30k").num_shards == (
      get_problem("translate_enfr_wmt").num_shards)


def test_pinned_checksums_are_the_mirrored_release():
  mirrored = multi30k_release.served_release(shared_corpus("multi30k"))
  pinned = {name: value for name, value in multi30k.RELEASE.items()
            if value.sha256}
  assert len(pinned) == 9 + 6  # raw train/val/test2016, tok val/test2016
  assert pinned == {name: mirrored[name] for name in pinned}


def test_download_writes_translate_ende_wmt_records(downloaded,
                                                    multi30k_data):
  data_dir, _, summary, requests = downloaded
  _, reference_dir, reference = multi30k_data
  assert multi30k_release.generated_files(data_dir, "translate_ende_multi30k")
  assert multi30k_release.differences(
      data_dir, "translate_ende_multi30k", reference_dir,
      "translate_ende_wmt", splits=("train", "dev", "test")) == []
  for split in ("train", "dev", "test"):
    assert summary["splits"][split] == reference["splits"][split]
  assert len(requests) == 16  # 6 raw + 2 tok a language, each fetched once


def test_later_test_sets_are_named_splits(downloaded, release):
  data_dir, _, summary, _ = downloaded
  problem = get_problem("translate_ende_multi30k")
  for split, (_, lines) in zip(problem.extra_test_splits,
                               multi30k_release.STAND_INS.values()):
    assert summary["splits"][split]["examples"] == lines
    assert len(problem.shard_files(data_dir, split)) == 1
    stem = multi30k.RELEASE_STEMS[split]
    with gzip.open(release[0] / multi30k.raw_file(stem, "de"), "rt") as f:
      # The kept text has one sample a line, its whitespace made spaces.
      targets = [" ".join(line.split()) for line in f]
    assert [t for _, t in problem.text_pairs(data_dir, split)] == targets


def test_summary_columns_hold_the_long_split_names(downloaded):
  from t2tlite.data import datagen
  _, _, summary, _ = downloaded
  table = datagen.format_summary(summary).splitlines()[2:]
  end = table[0].index("examples") + len("examples")
  for row, (split, stats) in zip(table[1:], summary["splits"].items()):
    examples = f"{stats['examples']:,}"
    assert row.split()[0] == split and row[end - len(examples):end] == (
        examples), table


def test_downloaded_files_are_kept_and_not_fetched_again(downloaded, release,
                                                         tmp_path):
  _, tmp_dir, _, _ = downloaded
  folder, expected = release
  def files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*"))
  assert files(tmp_dir / "multi30k") == files(folder)
  with serving(folder) as (url, requests):
    problem = multi30k.TranslateEndeMulti30k(base_url=url, release=expected)
    assert problem.available_splits(str(tmp_dir)) == problem.splits
  assert requests == []


def test_raw_data_dir_writes_translate_ende_wmt_records(multi30k_raw,
                                                        multi30k_data,
                                                        tmp_path, caplog):
  problem = get_problem("translate_ende_multi30k")
  caplog.set_level("INFO", logger="absl")
  summary = problem.generate_data(str(tmp_path), raw_data_dir=str(
      multi30k_raw), vocab_size=VOCAB_SIZE)
  # The later test sets and the tokenized references are not in the
  # folder: one line says so, naming them.
  (left_out,) = [r.getMessage() for r in caplog.records
                 if r.getMessage().startswith("Left out: ")]
  assert ("no test2017_flickr, test2017_mscoco, test2018_flickr in "
          "raw_data_dir" in left_out), left_out
  assert (f"tok/test_2016_flickr.lc.norm.tok.de in {tmp_path / 'tmp'}"
          "/multi30k") in left_out, left_out
  _, reference_dir, reference = multi30k_data
  assert len(multi30k_release.generated_files(
      tmp_path, "translate_ende_multi30k")) == 1 + 2 * SHARDS + 4
  assert multi30k_release.differences(
      tmp_path, "translate_ende_multi30k", reference_dir,
      "translate_ende_wmt") == []
  assert summary["splits"] == reference["splits"]


def _served_copy(folder, to, change=None):
  """A copy of the served release in `to`, with change(name, bytes) ->
  bytes or None (left out) applied to each file."""
  for path in folder.rglob("*"):
    if path.is_file():
      name = path.relative_to(folder).as_posix()
      data = path.read_bytes()
      data = change(name, data) if change else data
      if data is not None:
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        (to / name).write_bytes(data)
  return to


def _failing_download(folder, expected, tmp_dir, broken, cut_short=()):
  """The one-line DataError of a download from `folder` that fails on the
  file `broken` (a path under the base URL); asserts that nothing of it
  is left in tmp_dir."""
  with serving(folder, cut_short) as (url, _):
    problem = multi30k.TranslateEndeMulti30k(base_url=url, release=expected)
    with pytest.raises(DataError) as error:
      problem.available_splits(str(tmp_dir))
  message = str(error.value)
  assert "\n" not in message and f"{url}/{broken}" in message, message
  assert "raw_data_dir=" in message and multi30k.URL_VARIABLE in message
  left = [p.name for p in tmp_dir.rglob("*")]
  assert not [name for name in left if name.startswith(
      broken.rsplit("/", 1)[-1])], left
  # Only a complete release is tmp_dir/multi30k; no empty folder is left.
  assert not (tmp_dir / "multi30k").exists()
  assert all(any(p.iterdir()) for p in tmp_dir.rglob("*") if p.is_dir())
  return message


def test_altered_file_is_refused(release, tmp_path):
  folder, expected = release
  broken = multi30k.raw_file("val", "de")

  def change(name, data):  # one word of one line
    return gzip.compress(gzip.decompress(data).replace(b"Ein", b"Eine", 1)) \
        if name == broken else data
  served = _served_copy(folder, tmp_path / "served", change)
  message = _failing_download(served, expected, tmp_path / "tmp", broken)
  assert "SHA-256" in message and expected[broken].sha256 in message


def test_cut_short_download_is_an_error(release, tmp_path):
  folder, expected = release
  message = _failing_download(folder, expected, tmp_path, "raw/train.de.gz",
                              cut_short=["train.de.gz"])
  assert "bytes" in message or "IncompleteRead" in message, message


def test_missing_file_is_an_error(release, tmp_path):
  folder, expected = release
  broken = multi30k.tokenized_file("test_2016_flickr", "de")
  served = _served_copy(folder, tmp_path / "served",
                        lambda name, data: None if name == broken else data)
  message = _failing_download(served, expected, tmp_path / "tmp", broken)
  assert "HTTP 404" in message


def test_a_wrong_copy_is_fetched_again_and_a_right_one_is_kept(tmp_path):
  served = tmp_path / "served"
  served.mkdir()
  text = b"Ein Hund.\nZwei Katzen.\n"
  (served / "a.de.gz").write_bytes(gzip.compress(text))
  expected = download.Expected(2, hashlib.sha256(text).hexdigest())
  path = tmp_path / "tmp" / "a.de.gz"
  path.parent.mkdir()
  path.write_bytes(gzip.compress(b"Ein Hund.\n"))  # an older, shorter file
  with serving(served) as (url, requests):
    assert download.fetch(f"{url}/a.de.gz", str(path), expected) == str(path)
    assert requests == ["/a.de.gz"]
    download.fetch(f"{url}/a.de.gz", str(path), expected)
    assert requests == ["/a.de.gz"]
  assert gzip.decompress(path.read_bytes()) == text
  assert sorted(p.name for p in path.parent.iterdir()) == ["a.de.gz"]
  # A copy cut short (not a complete gzip file) is fetched again too.
  path.write_bytes(gzip.compress(text)[:-6])
  with serving(served) as (url, requests):
    download.fetch(f"{url}/a.de.gz", str(path), expected)
    assert requests == ["/a.de.gz"]
  assert gzip.decompress(path.read_bytes()) == text
  # A server's file cut short is refused, naming its URL; nothing is kept.
  (served / "b.de.gz").write_bytes(gzip.compress(text)[:-6])
  with serving(served) as (url, _):
    with pytest.raises(DataError) as error:
      download.fetch(f"{url}/b.de.gz", str(tmp_path / "tmp" / "b.de.gz"),
                     expected)
  assert str(error.value).startswith(
      f"Downloaded {url}/b.de.gz is not the published file (")
  assert "not a complete gzip file" in str(error.value)
  assert sorted(p.name for p in path.parent.iterdir()) == ["a.de.gz"]


def test_a_failed_download_keeps_what_it_fetched_for_the_retry(release,
                                                              tmp_path):
  folder, expected = release
  late = multi30k.tokenized_file("test_2016_flickr", "de")
  served = _served_copy(folder, tmp_path / "served",
                        lambda name, data: None if name == late else data)
  tmp_dir = tmp_path / "tmp"
  _failing_download(served, expected, tmp_dir, late)
  with serving(folder) as (url, requests):
    problem = multi30k.TranslateEndeMulti30k(base_url=url, release=expected)
    assert problem.available_splits(str(tmp_dir)) == problem.splits
  assert requests == [f"/{late}"]
  assert sorted(p.name for p in tmp_dir.iterdir()) == ["multi30k"]


def test_a_download_as_raw_data_dir_leaves_nothing_out(downloaded, caplog):
  _, tmp_dir, _, _ = downloaded
  problem = get_problem("translate_ende_multi30k")
  caplog.set_level("INFO", logger="absl")
  assert problem.available_splits(
      str(tmp_dir), str(tmp_dir / "multi30k" / "raw")) == problem.splits
  messages = [r.getMessage() for r in caplog.records]
  assert not [m for m in messages if m.startswith("Left out")], messages


def test_offline_download_names_the_ways_without_it_and_leaves_nothing(
    tmp_path):
  problem = multi30k.TranslateEndeMulti30k(base_url="http://127.0.0.1:9")
  with pytest.raises(DataError) as error:
    problem.available_splits(str(tmp_path))
  message = str(error.value)
  assert message.startswith("Could not download http://127.0.0.1:9/raw/")
  assert "raw_data_dir=DIR" in message and "T2T_MULTI30K_URL" in message
  assert list(tmp_path.iterdir()) == []


def test_url_from_the_environment(monkeypatch):
  monkeypatch.setenv(multi30k.URL_VARIABLE, "http://127.0.0.1:9/m30k/")
  assert get_problem("translate_enfr_multi30k").base_url == (
      "http://127.0.0.1:9/m30k")
  # An explicit base_url wins over the environment.
  assert multi30k.TranslateEnfrMulti30k(
      base_url="http://127.0.0.1:8/own").base_url == "http://127.0.0.1:8/own"
  monkeypatch.delenv(multi30k.URL_VARIABLE)
  assert get_problem("translate_enfr_multi30k").base_url == (
      multi30k.MULTI30K_URL)


def test_missing_raw_data_dir_names_the_layout(tmp_path):
  with pytest.raises(DataError, match=r"test_2016_flickr\.en.*download"):
    get_problem("translate_ende_multi30k").available_splits(
        str(tmp_path), raw_data_dir=str(tmp_path / "absent"))
