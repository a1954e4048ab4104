"""The oracle for `memory.run`: what the memory tool should answer to a command.

The reference is the `anthropic` SDK's `BetaLocalFilesystemMemoryTool`, run on a
directory. `ReferenceTool` is that tool as the SDK ships it (bench/core.py times
it beside memory.run); `SpecOracle` is the same tool with exactly the deviations
docs/core-memory.md lists, one method each, and nothing else: what memory.run
must answer, text for text. tests/sql/test_differential.py checks memory.run
against it command by command, and bench/core.py on every replay of its trace.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import _format_file_size
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

Command = dict[str, Any]
ROOT = "/memories"
DIR_VIEW_HEADER = "Here're the files and directories up to 2 levels deep in "


class Outcome(NamedTuple):
    ok: bool
    text: str  # the tool's answer, or its error message


class ReferenceTool:
    """`BetaLocalFilesystemMemoryTool` on the directory `base`, as the SDK ships it."""

    def __init__(self, base: Path) -> None:
        self.tool = BetaLocalFilesystemMemoryTool(base_path=str(base))
        self.root = self.tool.memory_root.resolve()

    def call(self, command: Command) -> str:
        return str(self.tool.call(command))

    def run(self, command: Command) -> Outcome:
        try:
            return Outcome(True, self.call(command))
        except ToolError as err:
            return Outcome(False, str(err))
        except Exception as err:  # a bug of the caller's: the reference itself crashed
            return Outcome(False, f"<reference crashed: {err!r}>")

    def tree(self) -> tuple[list[str], list[str]]:
        """Memory paths of every directory and every file now held (hidden included)."""
        dirs: list[str] = []
        files: list[str] = []
        for current, subdirs, names in os.walk(self.root):
            rel = Path(current).relative_to(self.root).as_posix()
            prefix = ROOT if rel == "." else f"{ROOT}/{rel}"
            dirs.extend(f"{prefix}/{d}" for d in subdirs)
            files.extend(f"{prefix}/{f}" for f in names)
        return sorted(dirs), sorted(files)

    def files(self) -> list[str]:
        return self.tree()[1]


class SpecOracle(ReferenceTool):
    """The reference tool with exactly the deviations docs/core-memory.md names."""

    def call(self, command: Command) -> str:
        name = command["command"]
        if name == "create":
            return self.create(command)
        if name in ("delete", "rename"):
            try:
                return super().call(command)
            finally:
                self.prune_empty_directories()
        text = super().call(command)
        if name == "view" and text.startswith(DIR_VIEW_HEADER):
            text = self.directory_sizes(command["path"], text)
        return text

    def create(self, command: Command) -> str:
        """Deviation 1: `create` on an existing file overwrites it.

        The reference fails with "File … already exists"; here an existing regular
        file is deleted first, then the reference creates it. Anything else (a
        directory at that path, a bad path) is left to the reference as is.
        """
        try:
            full = self.tool._validate_path(command["path"])
        except ToolError:
            full = None
        if full is not None and full.is_file():
            full.unlink()
        return super().call(command)

    def directory_sizes(self, path: str, text: str) -> str:
        """Deviation 2: a directory's size is the total bytes of all files below it.

        The reference prints each directory's inode size (e.g. 4.0K). Here every
        directory line of a directory view (the listed directory's own first line
        and each `…/` entry) gets the sum of the sizes of all files below that
        directory, hidden ones included, formatted by the reference's own
        `_format_file_size`. File lines are untouched.
        """
        base = self.tool._validate_path(path)
        header, *lines = text.split("\n")
        out = [header]
        for index, line in enumerate(lines):
            size, shown = line.split("\t", 1)
            if index == 0:
                size = _format_file_size(_tree_bytes(base))
            elif shown.endswith("/"):
                relative = shown[len(path) + 1 : -1]
                size = _format_file_size(_tree_bytes(base / relative))
            out.append(f"{size}\t{shown}")
        return "\n".join(out)

    def prune_empty_directories(self) -> None:
        """Deviation 3: there are no empty directories.

        A directory exists only while a file lies below it. After a `delete` or a
        `rename` (successful or not: a failing rename has already made the
        destination's parents) every directory left empty is removed, bottom-up;
        the /memories root itself is never removed.
        """
        for current, _dirs, _files in os.walk(self.root, topdown=False):
            if Path(current) != self.root and not os.listdir(current):
                os.rmdir(current)


def _tree_bytes(directory: Path) -> int:
    return sum(
        (Path(current) / name).stat().st_size
        for current, _dirs, files in os.walk(directory)
        for name in files
    )
