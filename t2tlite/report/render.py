"""A run as one self-contained HTML page: tables, and matplotlib plots
embedded as base64 PNG (no external URL, no script), so the file can be
mailed or opened offline.

    html_text = render(collect.collect(output_dir))
"""
import base64
import datetime
import html
import io
import statistics

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
from matplotlib.figure import Figure  # noqa: E402

# Summary tags of the trainer that are not dev metrics or loss curves.
_TRAIN_LOSSES = ("loss", "nll")
_THROUGHPUT = ("tokens_per_sec", "steps_per_sec")
_METRICS_SKIP = ("step", "wall_time", "split", "tokens", "sequences")
# Dev metrics that are fractions (0-1); the others are scores of their own
# scale (BLEU, exact match and F1: 0-100).
_FRACTIONS = ("accuracy", "sequence_accuracy")
# eval_results.json's fields in the order a person reads them, after the
# dev metric and its other scores.
_RESULT_ORDER = ("accuracy", "sequence_accuracy", "loss", "nll", "perplexity",
                 "sequences", "tokens", "split", "step")

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
header{background:#24324a;color:#fff;padding:12px 24px}
header h1{margin:0;font-size:20px} header p{margin:2px 0 0;opacity:.85}
main{padding:12px 24px;max-width:1100px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;
padding:10px 16px;margin-bottom:14px}
h2{font-size:16px;margin:0 0 8px}
table{border-collapse:collapse;font-size:13px}
td,th{padding:2px 14px 2px 0;text-align:left;vertical-align:top}
th{color:#5b6474;font-weight:normal}
tr.best td{font-weight:700;color:#1b6e2d}
.plots{display:flex;flex-wrap:wrap;gap:10px}
.plots img{width:480px;max-width:100%}
.cols{columns:3;column-gap:24px}
.missing{color:#8a94a6}
code{font-family:ui-monospace,monospace;font-size:12px}
"""


def _png(fig):
  """A matplotlib Figure as a data: URL."""
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=80)
  return "data:image/png;base64," + base64.b64encode(
      buffer.getvalue()).decode("ascii")


def _plot(title, ylabel, series):
  """A line plot of series {label: [(step, value)]}; None if all empty."""
  series = {k: v for k, v in series.items() if v}
  if not series:
    return None
  fig = Figure(figsize=(6, 3.4))
  ax = fig.subplots()
  for label, points in series.items():
    steps, values = zip(*points)
    ax.plot(steps, values, label=label, marker="o" if len(points) < 30
            else None, markersize=3)
  ax.set_title(title, fontsize=11)
  ax.set_xlabel("step")
  ax.set_ylabel(ylabel)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  return _png(fig)


def _text(value):
  """A cell's text: dicts as `name=value, ...` and lists joined, never a
  Python repr."""
  if isinstance(value, dict):
    return ", ".join(f"{k}={_text(v)}" for k, v in value.items())
  if isinstance(value, (list, tuple)):
    return ", ".join(_text(v) for v in value)
  return str(_number(value))


def _esc(value):
  return html.escape(_text(value))


def _table(rows, header=None, classes=None):
  """rows: list of lists of cell values (escaped here)."""
  out = ["<table>"]
  if header:
    out.append("<tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) +
               "</tr>")
  for i, row in enumerate(rows):
    cls = f" class='{classes[i]}'" if classes and classes[i] else ""
    out.append(f"<tr{cls}>" + "".join(f"<td>{_esc(c)}</td>" for c in row) +
               "</tr>")
  out.append("</table>")
  return "".join(out)


def _number(value):
  if isinstance(value, float):
    return f"{value:.4g}"
  return value


def _section(title, body, section_id):
  return f"<section id='{section_id}'><h2>{_esc(title)}</h2>{body}</section>"


def _missing(what):
  return f"<p class='missing'>{_esc(what)}</p>"


def _metric_series(run):
  """{name: [(step, value)]} of the dev metrics: eval summaries besides the
  loss, and metrics.jsonl's numeric fields."""
  series = {f"dev {tag}": points for tag, points in run.eval.items()
            if tag not in _TRAIN_LOSSES}
  for row in run.metrics:
    if "step" not in row:
      continue
    for name, value in row.items():
      if name in _METRICS_SKIP or name in _TRAIN_LOSSES:
        continue
      if isinstance(value, (int, float)) and not isinstance(value, bool):
        series.setdefault(f"dev {name}", [])
  for name in list(series):
    plain = name[4:]
    from_file = [(row["step"], row[plain]) for row in run.metrics
                 if "step" in row and isinstance(row.get(plain), (int, float))]
    if from_file and not run.eval.get(plain):
      series[name] = from_file
  return series


def _metric_plots(run):
  """[(title, ylabel, series)]: the dev metrics, each plot on one scale.
  The trainer's teacher-forced accuracies (fractions, 0-1) share one; every
  other metric (BLEU, exact match, F1 are 0-100; a plugin's own score may
  be anything) gets a plot of its own, so no curve reads as flat zero
  beside another a hundred times larger; a mixture's members share their
  figure's."""
  series = _metric_series(run)
  fractions = {name: points for name, points in series.items()
               if name[len("dev "):] in _FRACTIONS}
  plots = [("Dev accuracy (teacher-forced)", "fraction (0-1)", fractions)]
  # A mixture's figures per member and their mean (bleu/MEMBER,
  # bleu/mean) share the plot of their figure, one curve each.
  groups = {}
  for name, points in series.items():
    if name not in fractions:
      groups.setdefault(name[len("dev "):].split("/")[0], {})[name] = points
  plots += [(f"Dev {figure}", figure, group)
            for figure, group in groups.items()]
  # One evaluation is a point, not a curve: the tables hold it.
  return [plot for plot in plots
          if max(map(len, plot[2].values()), default=0) >= 2]


def _dev_losses(run):
  points = list(run.eval.get("loss", []))
  if not points:
    points = [(row["step"], row["loss"]) for row in run.metrics
              if "step" in row and isinstance(row.get("loss"), (int, float))]
  return points


def _evaluations(run):
  """Rows [step, metric values...] and the header of every dev evaluation
  (the eval summaries, and metrics.jsonl's lines), by step."""
  by_step = {}
  for tag, points in run.eval.items():
    for step, value in points:
      by_step.setdefault(step, {})[tag] = value
  for row in run.metrics:
    if "step" in row:
      by_step.setdefault(row["step"], {}).update(
          {k: v for k, v in row.items() if k not in _METRICS_SKIP and
           isinstance(v, (int, float)) and not isinstance(v, bool)})
  names = sorted({name for values in by_step.values() for name in values})
  rows = [[step] + [_number(by_step[step].get(n, "")) for n in names]
          for step in sorted(by_step)]
  return rows, ["step"] + names


def _result_rows(results):
  """eval_results.json as [name, value] rows: the dev metric and its other
  scores first (the "scores" map spread into rows), the best so far, then
  the teacher-forced figures and the counts."""
  results = dict(results)
  metric, scores = results.pop("metric", None), results.pop("scores", {})
  best_value, best_step = (results.pop("best_value", None),
                           results.pop("best_step", None))
  rows = []
  if metric is not None:
    rows.append([metric, results.pop(metric, scores.get(metric))])
  for name, value in scores.items():
    results.pop(name, None)  # the trainer copies the scores to the top
    if name != metric:
      rows.append([name, value])
  if best_value is not None:
    rows.append([f"best {metric or 'score'}",
                 f"{_number(best_value)} at step {best_step}"])
  rows += [[name, results.pop(name)] for name in _RESULT_ORDER
           if name in results]
  return rows + [[name, value] for name, value in sorted(results.items())]


def _steps_made(run):
  """The last step the run reached: its newest checkpoint's or training
  summary's; None when it has neither."""
  steps = [c.step for c in run.checkpoints if c.kind == "run" and
           c.step is not None]
  steps += [points[-1][0] for points in run.train.values() if points]
  return max(steps) if steps else None


def _train_steps_text(run):
  """The hparams' train_steps beside the steps the run made: a run with
  --train_minutes plans its own length (run.json's "plan")."""
  hp_steps = (run.hparams or {}).get("train_steps")
  made = _steps_made(run)
  plan = (run.run_info or {}).get("plan")
  if plan:
    made_text = ("has no step yet" if made is None else
                 f"made {made} steps")
    return (f"{hp_steps} in the hparams; this run {made_text}, of the "
            f"{plan['train_steps']} planned for --train_minutes="
            f"{plan['train_minutes']:g} (run.json)")
  if made is not None and made != hp_steps:
    return f"{hp_steps} in the hparams; this run made {made}"
  return hp_steps


def _best(run):
  """(checkpoint path, why) of the best checkpoint, or (None, why)."""
  if run.best_checkpoint:
    return run.best_checkpoint, "kept in OUTPUT_DIR/best by the trainer"
  losses = dict(_dev_losses(run))
  scored = [c for c in run.checkpoints if c.kind == "run" and c.step in
            losses]
  if not scored:
    return None, "no dev evaluation at a kept checkpoint's step"
  best = min(scored, key=lambda c: losses[c.step])
  return best.path, (f"of the kept checkpoints at an evaluated step, the "
                     f"lowest dev loss ({losses[best.step]:.4f})")


def _throughput(run):
  rows = []
  for tag in _THROUGHPUT:
    values = [v for _, v in run.train.get(tag, [])]
    if values:
      rows.append([tag.replace("_", " "), f"{statistics.median(values):.4g}",
                   f"{values[-1]:.4g}", len(values)])
  return rows


def _checkpoints_section(run):
  if not run.checkpoints:
    return _missing("No checkpoints.")
  best, why = _best(run)
  rows, classes = [], []
  for c in run.checkpoints:
    when = datetime.datetime.fromtimestamp(
        c.mtime, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    is_best = c.path == best
    rows.append([c.path, c.step if c.step is not None else "", c.kind,
                 f"{c.size_bytes / 2**20:.2f} MiB", when,
                 "best" if is_best else ""])
    classes.append("best" if is_best else "")
  note = (f"<p>Best: <code>{_esc(best)}</code> ({_esc(why)}).</p>" if best
          else _missing(f"Best: unknown ({why})."))
  return note + _table(rows, ["checkpoint", "step", "kind", "size",
                              "written", ""], classes)


def _machine_section(run):
  info = run.run_info or {}
  precision = (info.get("flags") or {}).get("precision") or {}
  parent = info.get("parent") or {}
  started = parent and (f"{parent['checkpoint']} (step {parent['step']}; "
                        f"variables: {parent['variables'] or 'all'})")
  parent_vocab = parent and (
      f"{parent['vocab']}"
      f"{' (rows mapped by piece)' if parent['map_vocab'] else ''}")
  rows = [[k, v] for k, v in (("problem", info.get("problem")),
                              ("model", info.get("model")),
                              ("warm-started from", started or None),
                              ("parent's vocabulary", parent_vocab or None),
                              ("vocabulary size", info.get("vocab_size")),
                              ("precision", precision.get("precision")),
                              ("precision asked", precision.get("requested")),
                              ("why", precision.get("reason")),
                              ("warning", precision.get("warning")))
          if v is not None]
  if not rows:
    return _missing("No run.json (the run was not started by t2t-trainer).")
  return _table(rows)


def _flags_section(run):
  flags = (run.run_info or {}).get("flags") or {}
  rows = [[f"--{k}", v] for k, v in sorted(flags.items())
          if k != "precision" and v not in (None, "")]
  return _table(rows) if rows else _missing("No flags recorded in run.json.")


def render(run):
  """The report page of a collect.Run (a str of HTML)."""
  name = run.folder
  made = _steps_made(run)
  train_loss = {f"train {t}": run.train.get(t, []) for t in _TRAIN_LOSSES}
  specs = [
      ("Loss", "per token", {**train_loss, "dev loss": _dev_losses(run)}),
      *_metric_plots(run),
      ("Throughput", "tokens per second (source + target)",
       {"training": run.train.get("tokens_per_sec", [])}),
      ("Learning rate", "", {"learning rate":
                             run.train.get("learning_rate", [])}),
  ]
  # Each image's alt text names the curves it draws.
  plots = [(f"{title}: {', '.join(k for k, v in series.items() if v)}",
            _plot(title, ylabel, series)) for title, ylabel, series in specs]
  plots = [(alt, url) for alt, url in plots if url]
  curves = ("<div class='plots'>" + "".join(
      f"<img alt='{_esc(alt)}' src='{url}'>" for alt, url in plots) +
            "</div>") if plots else _missing("No summaries.")
  if any(_metric_series(run).values()) and not _metric_plots(run):
    curves += _missing("One dev evaluation: its figures are in the tables "
                       "(Evaluation results, Dev evaluations), not plotted.")
  results = (_table(_result_rows(run.eval_results)) if run.eval_results else
             _missing("No eval_results.json (the run has not evaluated)."))
  throughput = _throughput(run)
  evaluations = _evaluations(run)
  hparams = (_missing("No hparams.json.") if not run.hparams else
             f"<p>train_steps: {_esc(_train_steps_text(run))}.</p>"
             "<div class='cols'>" + _table(
                 [[k, v] for k, v in sorted(run.hparams.items())]) +
             "</div>")
  generated = datetime.datetime.now(datetime.timezone.utc).strftime(
      "%Y-%m-%d %H:%M UTC")
  body = [
      _section("Evaluation results", results, "eval-results"),
      _section("Curves", curves, "curves"),
      _section("Dev evaluations", _table(*evaluations) if evaluations[0]
               else _missing("No dev evaluations."), "evaluations"),
      _section("Throughput", _table(throughput, ["", "median", "last",
                                                 "points"])
               if throughput else _missing("No throughput summaries."),
               "throughput"),
      _section("Checkpoints", _checkpoints_section(run), "checkpoints"),
      _section("Machine and precision", _machine_section(run), "machine"),
      _section("Flags", _flags_section(run), "flags"),
      _section("Hparams", hparams, "hparams"),
  ]
  subtitle = (f"{made} steps made; " if made is not None else
              "") + f"report written {generated}"
  return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
          f"<title>t2tlite run {_esc(name)}</title><style>{_STYLE}</style>"
          f"</head><body><header><h1>Run {_esc(name)}</h1><p>"
          f"{_esc(subtitle)}</p></header><main>{''.join(body)}</main>"
          "</body></html>")
