"""Text files of lines, as the commands and scorers read them."""


def write_lines(path, lines):
  """Writes `lines` to `path` (a pathlib.Path), each ending in a newline;
  returns the path as a string."""
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)
