"""The fenced code blocks of README.md and docs/*.md, and the SQL in them, for tests/python/test_docs.py.

A block is the text between an opening fence (```` ```sql ````, possibly indented
inside a list item) and its closing fence. A block that the test suite cannot run
says why on the line directly before its fence:

    <!-- not run: needs a Citus cluster -->

SQL blocks are cut into statements here, each with the comments that belong to it:

- output: comment lines directly after the statement that start with two spaces
  (``--  File created successfully at: …``; a leading ``→`` is dropped), or a trailing
  comment that starts with ``→`` (``-- → 1``); ``…`` stands for any text on its line;
- an expected error: a trailing comment that starts with an error code
  (``-- MEMORY_DOCUMENT_CONFLICT``), the HINT the statement must fail with;
- the caller: a comment naming "the service" or "the user" (``-- as the service``,
  ``-- the user:``) sets the caller for the statements after it, or, trailing a
  statement, for that statement only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[ \t]*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
ERROR_CODE = re.compile(r"^(?:MEMORY|EMBEDDING)_[A-Z_]+\b")
CALLER = re.compile(r"\b(?:as )?the (?P<who>service|user)\b", re.IGNORECASE)


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository, e.g. "docs/quickstart.md"
    line: int  # 1-based line of the opening fence
    lang: str  # "sql", "python", "sh", "js", or "" for a plain block
    text: str  # the content, without the fences and without the list indentation
    not_run: str | None  # the reason given by a <!-- not run: … --> comment

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def first_line(self) -> int:
        """1-based line of the file that holds the block's first line of text."""
        return self.line + 1


def parse_markdown(path: Path) -> list[Block]:
    """Every fenced block of one markdown file, in order."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            if NOT_RUN.match(lines[i]) and not (i + 1 < len(lines) and FENCE.match(lines[i + 1])):
                raise ValueError(f"{rel}:{i + 1}: a <!-- not run: … --> comment not before a fence")
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = FENCE.match(lines[j])
            if closing and closing["fence"].startswith(fence) and not closing["lang"]:
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        else:
            raise ValueError(f"{rel}:{i + 1}: a fence that is never closed")
        marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        if marker is not None and not marker["reason"]:
            raise ValueError(f"{rel}:{i}: a <!-- not run: … --> comment without a reason")
        blocks.append(
            Block(
                path=rel,
                line=i + 1,
                lang=opening["lang"].lower(),
                text="\n".join(body) + "\n",
                not_run=marker["reason"] if marker else None,
            )
        )
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in parse_markdown(path)]


# --------------------------------------------------------------------------- SQL


@dataclass
class Comment:
    line: int  # 0-based line within the block
    text: str  # after "--"
    whole_line: bool  # nothing but blanks before it on its line


@dataclass
class Statement:
    text: str  # from its first token to its ";" (comments inside kept)
    start_line: int  # 0-based, within the block
    end_line: int
    caller: str = "service"  # "service" or "user"
    output: list[str] = field(default_factory=list)  # the expected output lines, if shown
    error: str | None = None  # the HINT it must fail with, if documented as failing

    @property
    def expected_output(self) -> str | None:
        return "\n".join(self.output) if self.output else None


def _scan(sql: str) -> tuple[list[tuple[int, int]], list[Comment]]:
    """(start, end) offsets of each statement (end just past its ";") and every -- comment."""
    statements: list[tuple[int, int]] = []
    comments: list[Comment] = []
    i, start, n = 0, None, len(sql)
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end == -1 else end
            line_start = sql.rfind("\n", 0, i) + 1
            comments.append(
                Comment(sql.count("\n", 0, i), sql[i + 2 : end], not sql[line_start:i].strip())
            )
            i = end
            continue
        if ch.isspace():
            i += 1
            continue
        if start is None:
            start = i
        if ch in "'\"":
            close = i + 1
            while True:
                close = sql.find(ch, close)
                if close == -1:
                    raise ValueError(f"unterminated {ch} quote in {sql[i : i + 40]!r}")
                if sql.startswith(ch * 2, close):
                    close += 2
                    continue
                break
            i = close + 1
            continue
        dollar = re.match(r"\$(?:[A-Za-z_]\w*)?\$", sql[i:]) if ch == "$" else None
        if dollar:
            close = sql.find(dollar.group(), i + len(dollar.group()))
            if close == -1:
                raise ValueError(f"unterminated {dollar.group()} quote")
            i = close + len(dollar.group())
            continue
        if ch == ";":
            statements.append((start, i + 1))
            start = None
        i += 1
    if start is not None:
        raise ValueError(f"a statement without a closing ';': {sql[start : start + 60]!r}")
    return statements, comments


def split_sql(sql: str, default_caller: str = "service") -> list[Statement]:
    """The statements of a SQL block with their callers, expected outputs and errors."""
    spans, comments = _scan(sql)
    result: list[Statement] = []
    caller = default_caller
    previous_end = -1
    for start, end in spans:
        stmt = Statement(sql[start:end], sql.count("\n", 0, start), sql.count("\n", 0, end), caller)
        for comment in comments:
            between = previous_end < comment.line < stmt.start_line
            if between and comment.whole_line and not comment.text.startswith("  "):
                who = CALLER.search(comment.text)
                if who:
                    caller = who["who"].lower()
        stmt.caller = caller
        trailing = [c for c in comments if c.line == stmt.end_line and not c.whole_line]
        for comment in trailing:
            text = comment.text.strip()
            if text.startswith("→"):
                stmt.output.append(text[1:].strip())
            elif ERROR_CODE.match(text):
                stmt.error = ERROR_CODE.match(text).group()
            elif CALLER.search(text):
                stmt.caller = CALLER.search(text)["who"].lower()
        following = stmt.end_line + 1
        for comment in comments:
            if comment.line != following or not comment.whole_line:
                continue
            if not comment.text.startswith("  "):
                break
            text = comment.text[2:]
            stmt.output.append(text[1:].lstrip(" ") if text.startswith("→") else text)
            following += 1
        result.append(stmt)
        previous_end = stmt.end_line
    return result


def matches(expected: str, actual: str) -> bool:
    """`actual` is `expected`, where each … stands for any text within its line."""
    pattern = ".*".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, actual) is not None
