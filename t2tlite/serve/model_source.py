"""What t2t-serve serves: an exported SavedModel, a run folder, or both.

    source = ModelSource.open("~/t2t_train/ende/export")   # or a run folder
    hp = source.decode_hparams("beam_size=2")  # parsed once a request
    source.translate(["A dog runs."], hp, n_best=False)
    source.attention("A dog runs.", hp)

--model may name
  * an export version folder (EXPORT_DIR/3, with saved_model.pb), or an
    export folder of versions (the highest is served, as TF Serving does);
  * a run folder (hparams.json, run.json, checkpoints: t2t-trainer's);
  * an ensemble: run folders or checkpoints of runs sharing a vocabulary,
    separated by commas (RUN_A,RUN_B/ckpt-500, as t2t-decoder's
    --checkpoint_path). It decodes from the first member's run folder
    (whose problem and vocabulary it uses; an ensemble has no export), and
    its attention has one set of maps per member.

Translations with the export's own decode hparams come from the SavedModel
(what TF Serving would answer). Other decode hparams, the n-best of an
export that does not return beams, and attention maps need the model's
weights as Keras layers: they come from the run folder the export was made
from (its metadata names the checkpoint, whose folder, or that folder's
parent for OUTPUT_DIR/averaged and OUTPUT_DIR/best, is the run folder),
loaded on first use. Serving a run folder uses it for everything.
`search_small_batches_with_xla(N)` (t2t-serve --xla_lines) sends batches
of at most N lines with the model's own decode hparams to the run folder's
model compiled with XLA instead: the same answers, faster on small models.
"""
import collections
import dataclasses
import json
import os
import re
import threading

from t2tlite import files
from t2tlite.export.layout import METADATA_FILE, numbered_versions

# The export's signature of text with target prefixes (serving_module).
PREFIX_SIGNATURE = "translate_with_prefix"
# Decoders kept for the last few decode hparams strings (each holds a traced
# search; tracing one takes seconds).
_DECODER_CACHE = 4


class RequestError(ValueError):
  """A request the model source cannot answer (HTTP 400)."""


class PrefixError(RequestError):
  """A target prefix the export's search refused (HTTP 400).

  reason: why, as the search's assertion says it ("the target vocabulary
    cannot encode ...", "longer than its output may hold ..."); the caller,
    which knows the request's lines, names the prefix (`named`).
  """

  def __init__(self, reason):
    super().__init__(f"target_prefixes: {reason}")
    self.reason = reason

  def named(self, index, prefix):
    """The error naming prefix `index` (0-based) of a request, as the run
    folder's check (`Decoder.prefix_ids`) names it."""
    return RequestError(f"target_prefixes: target prefix {index + 1} "
                        f"({prefix!r}): {self.reason}")


def _assertion(message):
  """The message of the in-graph assertion that failed (a prefix check:
  `prefix_ids`, `search._checked_prefix`) without its "target prefix"
  start, from an InvalidArgumentError's text (whose first line is
  "Graph execution error:"); else that text's first line."""
  found = re.search(r"assertion failed: \[(?:target prefix )?([^\]]+)\]",
                    message)
  return found.group(1) if found else message.splitlines()[0]


def _is_run_folder(path):
  return all(os.path.exists(os.path.join(path, name))
             for name in ("hparams.json", "run.json", "vocab.model"))


def _export_version(path):
  """The SavedModel folder `path` names (itself, or its highest integer
  version), or None."""
  if os.path.exists(os.path.join(path, "saved_model.pb")):
    return path
  if not os.path.isdir(path):
    return None
  names = [name for _, name in numbered_versions(os.listdir(path))
           if os.path.exists(os.path.join(path, name, "saved_model.pb"))]
  return os.path.join(path, names[-1]) if names else None


def _run_folder_of(checkpoint):
  """The run folder holding `checkpoint` (a prefix), or None."""
  folder = os.path.dirname(checkpoint or "")
  for candidate in (folder, os.path.dirname(folder)):
    if candidate and _is_run_folder(candidate):
      return candidate
  return None


def _given(prefixes):
  """`prefixes`, or None when there are none or all are blank."""
  if prefixes is None or not any(p.strip() for p in prefixes):
    return None
  return prefixes


def _with_n_best(hp, n_best):
  """hp as the run folder decodes a request: with n_best, listing every
  output (`DecodeHParams.with_every_output`)."""
  return hp.with_every_output() if n_best else hp


@dataclasses.dataclass
class Attention:
  """One sentence's attention maps.

  pieces: {"source", "target", "decoder_input": list of str}.
  weights: {"encoder", "decoder_self", "encdec": list over layers of
    float32 numpy [heads, queries, keys]}; encoder [heads, source, source],
    decoder_self [heads, target, target], encdec [heads, target, source].
  members: None, or for an ensemble each member's weights (as `weights`,
    which are the first member's), teacher-forced on the ensemble's output.
  """
  source: str
  target: str
  pieces: dict
  weights: dict
  members: list = None


class ModelSource:
  """A served model. Thread-safe: model work runs under one lock per
  loaded model (callers also bound concurrency, see t2tlite.serve.app).

  Args:
    saved_model_dir: an export version folder, or None.
    run_folder: the run folder, or None (export without its run).
    ensemble: None, or an ensemble's members (run folders or checkpoints,
      `run_dir.load_models`' paths), run_folder their first's run.
  """

  def __init__(self, saved_model_dir=None, run_folder=None, ensemble=None):
    if not saved_model_dir and not run_folder:
      raise ValueError("ModelSource needs an export or a run folder")
    self.saved_model_dir, self.run_folder = saved_model_dir, run_folder
    self.ensemble = ensemble
    self.metadata = {}
    if saved_model_dir:
      with open(os.path.join(saved_model_dir, METADATA_FILE),
                encoding="utf-8") as f:
        self.metadata = json.load(f)
    self._lock = threading.Lock()
    self._saved_model = None
    self._info = None  # the run folder's RunInfo, read once
    self._base = None  # the default DecodeHParams, parsed once
    self._settled_base = None  # and settled once (`settle_base`)
    self._run = None  # a run_decoding.LoadedRun
    self._decoders = collections.OrderedDict()
    self._xla_hparams = None  # `search_small_batches_with_xla`'s

  @classmethod
  def open(cls, path):
    """The source `path` names (see the module docstring).

    Raises:
      FileNotFoundError: neither an export nor a run folder (names path),
        or an ensemble member without a checkpoint.
      ValueError: ensemble members of different problems or vocabularies.
    """
    members = files.split_ensemble(path, "model")
    if members:
      return cls._open_ensemble([os.path.abspath(p) for p in members])
    path = os.path.abspath(os.path.expanduser(path))
    version = _export_version(path)
    if version:
      metadata_path = os.path.join(version, METADATA_FILE)
      if not os.path.exists(metadata_path):
        raise FileNotFoundError(
            f"model={version}: a SavedModel without {METADATA_FILE}; "
            "expected an export written by t2t-exporter")
      with open(metadata_path, encoding="utf-8") as f:
        checkpoint = json.load(f).get("checkpoint")
      return cls(version, _run_folder_of(checkpoint))
    if _is_run_folder(path):
      return cls(None, path)
    raise FileNotFoundError(
        f"model={path}: expected an export (a folder with saved_model.pb, "
        "or one of numbered versions) or a run folder (hparams.json, "
        "run.json, vocab.model)")

  @classmethod
  def _open_ensemble(cls, members):
    """An ensemble's source, its members checked (not loaded)."""
    from t2tlite import run_dir
    first = members[0]
    run_folder = first if _is_run_folder(first) else _run_folder_of(first)
    if not run_folder:
      raise FileNotFoundError(
          f"model={first}: expected a run folder, or a checkpoint in one "
          "(the ensemble's first member names its run)")
    try:
      run_dir.resolve_members(run_folder, members)
    except ValueError as error:
      raise ValueError(str(error).replace("checkpoint_path:", "model:",
                                          1)) from None
    return cls(None, run_folder, members)

  # ---- what the page shows about the model ----------------------------------

  def info(self):
    """{"problem", "export", "run_folder", "decode_hparams" (the defaults,
    dict), "layers", "heads" (None without the run folder), "n_best"
    (whether the n-best can be asked for), "ensemble" (the members'
    paths, None for one model), "target_languages" (a mixture's, sorted;
    [] for one problem)}."""
    hp = self._run_info().hparams if self.run_folder else None
    return {"problem": self._problem(), "export": self.saved_model_dir,
            "run_folder": self.run_folder,
            "decode_hparams": dataclasses.asdict(self.base_hparams),
            "layers": hp.num_layers if hp else None,
            "heads": hp.num_heads if hp else None,
            "n_best": bool(self.run_folder or self._export_has_n_best()),
            "ensemble": self.ensemble,
            "target_languages": sorted(self.target_languages)}

  @property
  def target_languages(self):
    """A mixture's {language: tag} (the export's, else the run's); {}."""
    if self.metadata:
      return self.metadata.get("target_languages") or {}
    return self._run_info().target_languages

  def tag_lines(self, lines, targets=None):
    """`lines` with their target languages' tags (`targets`: None, or a
    language or None per line; `languages.tag_line`). Raises RequestError
    (one line, naming the known languages)."""
    from t2tlite.data import languages
    known = self.target_languages
    try:
      if targets is None:
        return languages.tag_lines(lines, known)
      return [languages.tag_line(line, known, target)
              for line, target in zip(lines, targets)]
    except languages.LanguageError as error:
      raise RequestError(str(error)) from None

  def _run_info(self):
    """The run folder's RunInfo (hparams.json, run.json), read once."""
    if self._info is None:
      from t2tlite import run_dir
      self._info = run_dir.read_run_info(self.run_folder)
    return self._info

  def _export_has_n_best(self):
    """Whether the export returns several outputs a line (beams or
    samples)."""
    return bool(self.metadata) and self.base_hparams.multiple_outputs

  def _problem(self):
    if self.metadata:
      return self.metadata["problem"]
    return self._run_info().problem

  @property
  def base_hparams(self):
    """The default DecodeHParams (the export's, else the problem's), parsed
    on first use (after the run's plugins load) and kept: each request's
    overrides go on top of them (`decode_hparams`)."""
    if self._base is None:
      from t2tlite import problem_decoding
      from t2tlite.decode.settings import DecodeHParams
      self._base = (DecodeHParams.from_record(self.metadata["decode_hparams"])
                    if self.metadata else
                    problem_decoding.decode_hparams(self._problem()))
    return self._base

  def settle_base(self, set_threads=False):
    """Settles the default decode hparams for this process, once
    (`machine.settle`; set_threads: a command, before TensorFlow runs,
    gives their searches cores of their own): their Decoder decodes as
    settled here. Other hparams are settled as their Decoder is made.
    Returns the SettledDecode."""
    from t2tlite.decode import machine
    # Unlocked: a command calls it first; a race would settle equal twice.
    if self._settled_base is None:
      self._settled_base = machine.settle(self.base_hparams,
                                          set_threads=set_threads)
    return self._settled_base

  def _settled(self, hp):
    from t2tlite.decode import machine
    if hp == self.base_hparams:
      return self.settle_base()
    return machine.settle(hp)

  def decode_hparams(self, overrides):
    """DecodeHParams: the defaults with `overrides` ("beam_size=2,...") on
    top; a request's one parse. Raises RequestError naming a bad one."""
    from t2tlite import problem_decoding
    try:
      return problem_decoding.decode_hparams(self._problem(), overrides,
                                             self.base_hparams)
    except (ValueError, TypeError, KeyError) as error:
      raise RequestError(str(error).strip('"')) from None

  def search_small_batches_with_xla(self, lines):
    """Has the run folder's model, compiled with XLA, search every batch of
    at most `lines` lines that the model's own decode hparams translate
    without target prefixes or n-best (decode hparam xla_lines: one
    compile a shape, then a small model's lone line about twice as fast;
    the outputs are the graph's). 0: the export's search (or the run
    folder's graph) as before.

    Raises:
      ValueError: no run folder, or decode hparams XLA does not search
        (int8, sampling), naming why.
    """
    if not lines:
      self._xla_hparams = None
      return
    if not self.run_folder:
      raise ValueError(self._no_run("XLA's search needs"))
    if self.base_hparams.sampling:
      raise ValueError("the model's decode hparams sample; XLA's route "
                       "searches greedy and beam batches only")
    self._xla_hparams = dataclasses.replace(self.base_hparams,
                                            xla_lines=lines)

  def _xla_route(self, hp, lines, n_best, prefixes):
    """The hparams of the run folder's XLA search for this batch, or None
    (`search_small_batches_with_xla`)."""
    xla = self._xla_hparams
    if (xla is not None and hp == self.base_hparams and not n_best and
        prefixes is None and 0 < len(lines) <= xla.xla_lines):
      return xla
    return None

  # ---- translation -----------------------------------------------------------

  def translate(self, lines, hp=None, n_best=False, prefixes=None):
    """Translates lines with decode hparams `hp` (`decode_hparams`; None:
    the defaults), each output starting with its target prefix when
    `prefixes` gives one per line ("" for none).

    Returns:
      (translations: a str per line (the first of its outputs when the
      decode hparams give several: return_beams, num_samples > 1), n_best:
      None, or per line a list of {"text", "score"}: every beam, best
      first, or when sampling the num_samples samples, in order).
    Raises:
      RequestError: a request only the run folder can answer when there
        is none.
    """
    hp = hp or self.base_hparams
    prefixes = _given(prefixes)
    run_hp = (self._xla_route(hp, lines, n_best, prefixes) or
              self._run_hparams(hp, n_best))
    if run_hp is None:
      outputs, scores = self._translate_export(lines, prefixes)
    else:
      hp = run_hp
      outputs, scores = self._translate_run(lines, hp, prefixes)
    if not hp.multiple_outputs:  # one output a line
      if not n_best:
        return outputs, None
      outputs, scores = [[text] for text in outputs], [[s] for s in scores]
    nbest = [[{"text": t, "score": s} for t, s in zip(texts, line_scores)]
             for texts, line_scores in zip(outputs, scores)]
    return [texts[0] for texts in outputs], nbest if n_best else None

  def _uses_export(self, hp, n_best):
    """Whether the export (not the run folder) translates for hp."""
    return bool(self.saved_model_dir and hp == self.base_hparams and
                (not n_best or self._export_has_n_best()))

  def _run_hparams(self, hp, n_best):
    """None when the export translates for hp (and n_best), else the
    hparams the run folder's Decoder decodes with (`_with_n_best`).
    Raises RequestError when that needs a run folder and there is none."""
    if self._uses_export(hp, n_best):
      return None
    self._need_run("these decode hparams" if not n_best else "the n-best")
    return _with_n_best(hp, n_best)

  def check_prefixes(self, lines, hp, n_best=False, prefixes=None):
    """Raises RequestError naming the first of `prefixes` (one per line of
    `lines`) that cannot start its output with decode hparams `hp`, where
    the run folder translates them (an export's search checks its own, in
    the graph): before the request is batched with others.
    """
    if not _given(prefixes):
      return
    run_hp = self._run_hparams(hp, n_best)
    if run_hp is None:
      return
    decoder, _ = self._decoder(run_hp)
    try:
      decoder.prefix_ids(lines, prefixes)
    except ValueError as error:
      raise RequestError(f"target_prefixes: {error}") from None

  def _translate_export(self, lines, prefixes=None):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the sentencepiece ops)
    from t2tlite import graph_options
    with self._lock:
      if self._saved_model is None:
        self._saved_model = tf.saved_model.load(self.saved_model_dir)
      signatures = self._saved_model.signatures
    if prefixes is not None and PREFIX_SIGNATURE not in signatures:
      raise RequestError("target_prefixes: this export has no "
                         f"{PREFIX_SIGNATURE} signature; export it again")
    with graph_options.one_round():
      if prefixes is None:
        result = signatures["serving_default"](
            inputs=tf.constant(lines, tf.string))
      else:
        try:
          result = signatures[PREFIX_SIGNATURE](
              inputs=tf.constant(lines, tf.string),
              target_prefixes=tf.constant(prefixes, tf.string))
        except tf.errors.InvalidArgumentError as error:
          raise PrefixError(_assertion(error.message)) from None
    outputs = result["outputs"].numpy().tolist()
    scores = result["scores"].numpy().tolist()
    if outputs and isinstance(outputs[0], list):
      outputs = [[o.decode("utf-8") for o in row] for row in outputs]
    else:
      outputs = [o.decode("utf-8") for o in outputs]
    return outputs, scores

  def _no_run(self, needs):
    """The message that `needs` ("attention maps need") the run folder,
    which the export's metadata names and is not there."""
    return (f"{needs} the run folder the export came from (its metadata "
            f"names checkpoint {self.metadata.get('checkpoint')}, not found)")

  def _need_run(self, what):
    if not self.run_folder:
      raise RequestError(self._no_run(f"{what} need") + "; serve a run "
                         "folder, or send no decode_hparams")

  def _loaded_run(self):
    """The run folder's model (or the ensemble), a run_decoding.LoadedRun,
    loaded on first use."""
    with self._lock:
      if self._run is None:
        from t2tlite import precision, run_decoding
        # The export's weights, computing in the export's precision.
        dtype = precision.KERAS_POLICY[self.metadata.get("precision",
                                                         "float32")]
        self._run = run_decoding.load_run(
            self.run_folder, self.ensemble or self.metadata.get("checkpoint"),
            dtype=dtype)
      return self._run

  def _decoder(self, hp):
    """(Decoder, postprocess or None) for hp, cached."""
    run = self._loaded_run()
    with self._lock:
      if hp in self._decoders:
        self._decoders.move_to_end(hp)
        return self._decoders[hp]
      decoder = run.decoder(self._settled(hp))
      # As in an export: constrained outputs are well-formed, so the
      # problem's postprocess applies (parsing: bracketed trees).
      postprocess = (run.problem().postprocess
                     if decoder.constraint is not None else None)
      entry = (decoder, postprocess)
      self._decoders[hp] = entry
      while len(self._decoders) > _DECODER_CACHE:
        self._decoders.popitem(last=False)
      return entry

  def _translate_run(self, lines, hp, prefixes=None):
    decoder, postprocess = self._decoder(hp)
    try:
      outputs, scores = decoder.decode_lines(lines, progress=False,
                                             prefixes=prefixes)
    except ValueError as error:  # a prefix that cannot be, named
      raise RequestError(f"target_prefixes: {error}") from None
    if postprocess is not None:
      def post(text, source):
        return postprocess(text, inputs=source) if source.strip() else text
      outputs = [[post(t, src) for t in out] if hp.multiple_outputs else
                 post(out, src) for out, src in zip(outputs, lines)]
    return outputs, scores

  # ---- attention -------------------------------------------------------------

  def attention(self, line, hp=None, target_prefix=None):
    """Attention of `line` and the model's own output for it (decoded with
    decode hparams `hp`, None: the defaults, and the target prefix, as
    `translate` decodes it); an `Attention`.

    Raises:
      RequestError: no run folder, or a blank line.
    """
    from t2tlite.decode import attention_plots
    self._need_run("attention maps")
    if not line.strip():
      raise RequestError("attention: the line is empty")
    hp = hp or self.base_hparams
    # The Decoder /api/translate runs for these hparams: the maps are those
    # of the output it translates, teacher-forced on its ids.
    decoder, postprocess = self._decoder(hp)
    try:
      each = attention_plots.decoded_attention_maps(decoder, line,
                                                    target_prefix)
    except ValueError as error:  # a prefix the request cannot have
      raise RequestError(f"target_prefix: {error}") from None
    maps = each[0]
    target = maps["target"]
    if postprocess is not None:
      target = postprocess(target, inputs=line)
    members = [m["weights"] for m in each] if self.ensemble else None
    return Attention(maps["source"], target, maps["pieces"],
                     maps["weights"], members)
