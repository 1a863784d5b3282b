"""Whether the tests fail when the code is wrong: each mutant of
`bench/mutants.json` changes one line of the code (a bound, a constant, a
comparison) and runs the tests that should catch it.

    python bench/mutants.py [--only 0,3] [--mutants FILE]

The repository's files (those git tracks or would track, as they are now)
are copied to a temporary folder, first on the import path of every test
and process, so the checkout is never changed; `../shared` beside the copy
links to the one beside the repository, so tests that read its data run
rather than skip (a mutant's skipped tests are counted in its line). One
JSON line per mutant: killed (its tests failed) or survived, the first
failing test, seconds; then the counts. A survivor is a behaviour no test
checks (or a change that alters nothing, an equivalent mutant: say so in
its "why"). Exit status 1 when a mutant survives without a "why", or when
a mutant's text is not found once.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The packages setup.py maps into t2tlite from the top level.
MAPPED = ("problems", "hparams")


def copy_tree(root, into):
  """The files of `root` git does not ignore, as they are now, copied
  `into`; the mapped packages linked where `import t2tlite.<name>` finds
  them."""
  files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], cwd=root, check=True,
                         capture_output=True, text=True).stdout.split("\0")
  for name in filter(None, files):
    source = os.path.join(root, name)
    if os.path.isfile(source):
      os.makedirs(os.path.dirname(os.path.join(into, name)), exist_ok=True)
      shutil.copy2(source, os.path.join(into, name))
  for name in MAPPED:
    if os.path.isdir(os.path.join(into, name)) and os.path.isdir(
        os.path.join(into, "t2tlite")):
      os.symlink(os.path.join("..", name), os.path.join(into, "t2tlite", name))


def run_mutant(tree, mutant, timeout):
  """Applies `mutant` in `tree`, runs its tests, restores the file; returns
  its JSON record."""
  path = os.path.join(tree, mutant["file"])
  with open(path, encoding="utf-8") as f:
    original = f.read()
  record = {"what": mutant["what"], "file": mutant["file"]}
  found = original.count(mutant["old"])
  if found != 1:
    return dict(record, error=f"its text is found {found} times, not once")
  with open(path, "w", encoding="utf-8") as f:
    f.write(original.replace(mutant["old"], mutant["new"]))
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [tree] + list(filter(None, [os.environ.get("PYTHONPATH")]))),
             TF_CPP_MIN_LOG_LEVEL="2")
  start = time.monotonic()
  try:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0",
         "-p", "no:cacheprovider", "-o", "addopts=", "-m", "not slow"] +
        mutant["tests"], cwd=tree, env=env, capture_output=True, text=True,
        timeout=timeout)
  except subprocess.TimeoutExpired:
    return dict(record, killed=True, by="(timed out)",
                seconds=round(time.monotonic() - start))
  finally:
    with open(path, "w", encoding="utf-8") as f:
      f.write(original)
  # pytest's summary lines ("FAILED tests/x.py::test - ..."), not a
  # failure's captured log lines ("ERROR    name:file.py:12 ...").
  failed = [line.split(" ")[1] for line in run.stdout.splitlines()
            if re.match(r"(FAILED|ERROR) \S", line)]
  summary = run.stdout.strip().splitlines()[-1:] or [""]
  skipped = re.search(r"(\d+) skipped", summary[0])
  record.update(killed=run.returncode != 0,
                seconds=round(time.monotonic() - start),
                skipped=int(skipped.group(1)) if skipped else 0)
  if run.returncode != 0:
    record["by"] = failed[0] if failed else run.stdout.strip()[-200:]
  elif mutant.get("why"):
    record["why"] = mutant["why"]
  return record


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--mutants",
                      default=os.path.join(ROOT, "bench", "mutants.json"))
  parser.add_argument("--only", default="",
                      help="comma-separated indices into the list")
  parser.add_argument("--root", default=ROOT, help="the repository")
  parser.add_argument("--timeout", type=int, default=900,
                      help="seconds a mutant's tests may take")
  args = parser.parse_args()
  with open(args.mutants, encoding="utf-8") as f:
    mutants = json.load(f)
  chosen = ([int(i) for i in args.only.split(",")] if args.only
            else range(len(mutants)))
  bad = 0
  records = []
  with tempfile.TemporaryDirectory() as folder:
    tree = os.path.join(folder, "repo")
    copy_tree(args.root, tree)
    shared = os.path.join(os.path.dirname(os.path.abspath(args.root)),
                          "shared")
    if os.path.isdir(shared):
      os.symlink(shared, os.path.join(folder, "shared"))
    for i in chosen:
      record = dict(index=i, **run_mutant(tree, mutants[i], args.timeout))
      print(json.dumps(record), flush=True)
      records.append(record)
      bad += "error" in record or not (record["killed"] or "why" in record)
  errors = sum("error" in r for r in records)
  killed = sum(r.get("killed", False) for r in records)
  print(json.dumps({"mutants": len(records), "killed": killed,
                    "survived": len(records) - killed - errors,
                    "errors": errors}))
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
