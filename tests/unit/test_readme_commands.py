"""Every command line in README.md (and the docs/ pages it links) names only
flags its command defines.

The t2t-* command lines and `python -m t2tlite...` lines are taken from the
pages' code blocks and inline code; each `--flag` they pass is looked up in
the flags the command's module defines (absl's FLAGS after importing the
module, tests/support/command_flags.py; `--help` for a module that parses
its arguments with argparse). Nothing trains or decodes: a README that names
a flag or a command that does not exist fails here, in seconds. Which test
runs each README command for real is listed in the build notes."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/data.md", "docs/commands.md", "docs/cluster.md",
         "docs/serving.md", "docs/library.md", "docs/training_quality.md",
         "docs/decoding.md", "docs/web.md", "docs/cpu_and_precision.md",
         "docs/results.md")
SUPPORT = REPO / "tests" / "support"
# A command's name at the start of a shell segment, after any VAR=value
# assignments or the end of a quoted one ('...}' t2t-trainer).
_COMMAND = re.compile(r"(?:^|[\s'\"])(t2t-[a-z]+(?:-[a-z]+)*|python -m "
                      r"t2tlite[\w.]*)(?=\s|$)")
_FLAG = re.compile(r"(?<![\w-])--(\w+)")


def console_scripts():
  """{"t2t-name": "t2tlite.bin.module"} from setup.py."""
  text = (REPO / "setup.py").read_text()
  return {name: f"t2tlite.bin.{module}" for name, module in re.findall(
      r'"(t2t-[a-z-]+)=t2tlite\.bin\.(\w+):main"', text)}


def shell_lines(markdown):
  """The lines of the page's code: indented and fenced blocks (a line ending
  in a backslash joined with the next) and each inline code span."""
  lines, block, fenced = [], [], False
  for line in markdown.splitlines():
    if line.startswith("```"):
      fenced = not fenced
    elif fenced or line.startswith("    "):
      block.append(line.strip())
    else:
      lines.extend(_joined(block))
      block = []
      lines.extend(re.findall(r"`([^`]+)`", line))
  lines.extend(_joined(block))
  return lines


def _joined(block):
  text = "\n".join(block).replace("\\\n", " ")
  return [line for line in text.splitlines() if line.strip()]


def command_uses(markdown):
  """[(command, [flag, ...], line)] for every command the page runs: a
  line is split into shell segments (&&, ||, |, ;) and each segment that
  starts a t2t-* command or `python -m t2tlite...` gives one entry."""
  uses = []
  for line in shell_lines(markdown):
    line = line.split(" #")[0].rstrip()  # a trailing shell comment
    for segment in re.split(r"&&|\|\||\||;", line):
      match = _COMMAND.search(segment)
      if match:
        rest = segment[match.end():]
        uses.append((match.group(1), _FLAG.findall(rest), line))
  return uses


@pytest.fixture(scope="module")
def defined_flags():
  """{command: set of flag names it accepts}, for every console script and
  every `python -m t2tlite...` module the pages run."""
  scripts = console_scripts()
  result = subprocess.run(
      [sys.executable, str(SUPPORT / "command_flags.py"), *scripts.values()],
      capture_output=True, text=True, timeout=240, check=True, cwd=REPO)
  by_module = json.loads(result.stdout.strip().splitlines()[-1])
  defined = {name: set(by_module[module]) for name, module in scripts.items()}
  modules = {command for page in PAGES
             for command, _, _ in command_uses((REPO / page).read_text())
             if command.startswith("python -m ")}
  for command in modules:
    module = command.split()[-1]
    if module.startswith("t2tlite.bin."):
      defined[command] = set(json.loads(subprocess.run(
          [sys.executable, str(SUPPORT / "command_flags.py"), module],
          capture_output=True, text=True, timeout=240, check=True,
          cwd=REPO).stdout.strip().splitlines()[-1])[module])
    else:  # an argparse module: its --help lists its options
      usage = subprocess.run(
          [sys.executable, "-m", module, "--help"], capture_output=True,
          text=True, timeout=120, check=True, cwd=REPO).stdout
      defined[command] = set(_FLAG.findall(usage))
  return defined


def test_shell_lines_join_continuations_and_split_commands():
  page = ("Run `t2t-bleu --translation=a --reference=b` then:\n\n"
          "    pip install -e . && t2t-trainer --problem=p \\\n"
          "        [--xla] --output_dir=o | t2t-decoder --decode_interactive\n"
          "    TF_CONFIG='{\"task\": 0}' t2t-trainer --worker_gpu=2  # note\n"
          "\nprose with --not_a_command_flag and t2t-decoder in words\n")
  assert command_uses(page) == [
      ("t2t-bleu", ["translation", "reference"],
       "t2t-bleu --translation=a --reference=b"),
      ("t2t-trainer", ["problem", "xla", "output_dir"],
       "pip install -e . && t2t-trainer --problem=p  [--xla] --output_dir=o "
       "| t2t-decoder --decode_interactive"),
      ("t2t-decoder", ["decode_interactive"],
       "pip install -e . && t2t-trainer --problem=p  [--xla] --output_dir=o "
       "| t2t-decoder --decode_interactive"),
      ("t2t-trainer", ["worker_gpu"],
       "TF_CONFIG='{\"task\": 0}' t2t-trainer --worker_gpu=2"),
  ]


def test_readme_is_a_short_guide():
  # The README is the user's guide; details live in docs/ and BUILD_NOTES.md.
  lines = (REPO / "README.md").read_text().splitlines()
  assert len(lines) < 300, f"README.md has {len(lines)} lines; keep it under 300"


def test_readme_shows_every_command():
  shown = {command for command, _, _ in
           command_uses((REPO / "README.md").read_text())}
  assert set(console_scripts()) <= shown, set(console_scripts()) - shown


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", PAGES)
def test_every_flag_on_the_page_is_defined(page, defined_flags):
  uses = command_uses((REPO / page).read_text())
  assert uses, f"{page} runs no command"
  unknown = [f"{command} --{flag}   in: {line}"
             for command, flag_names, line in uses
             for flag in flag_names
             if flag not in defined_flags.get(command, ())]
  assert not unknown, "\n".join(unknown)


def test_unknown_flags_and_commands_are_caught(defined_flags):
  # The check itself: a misspelt flag is not among the defined ones, and a
  # command that is no console script has no flags at all.
  assert "decode_hparams" in defined_flags["t2t-decoder"]
  assert "decode_hparam" not in defined_flags["t2t-decoder"]
  assert "reference" in defined_flags["t2t-parse-eval"]
  assert "translation" not in defined_flags["t2t-parse-eval"]
  assert "t2t-translate" not in defined_flags
