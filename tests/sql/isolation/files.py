"""Core files: the six commands of memory.run, and write, read, list_files, render."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.sql.isolation.base import FILE_TEXT, Machine, path_st, target
from tests.sql.isolation.model import (
    AMBIGUOUS,
    CONFLICT,
    EXISTS,
    INVALID,
    INVALID_PATH,
    NO_MATCH,
    NOT_FOUND,
    ROOT,
    Actor,
    File,
    Ns,
    NsKey,
    Target,
    file_ancestor,
    is_dir,
    numbered,
    render,
    render_block,
    view_dir,
    view_file,
)
from tests.support import Failure


class CoreFiles(Machine):
    """memory.run: create, view, str_replace, insert, delete, rename."""

    def run(self, actor: Actor, org: str, ns: Ns, command: dict[str, Any]) -> str | Failure:
        return self.value(actor, "SELECT memory.run(%s, %s, %s)", org, command, ns.json())

    @rule(data=st.data(), who=target(), path=path_st, text=FILE_TEXT)
    def run_create(self, data: st.DataObject, who: Target, path: str, text: str) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        got = self.run(actor, org, ns, {"command": "create", "path": path, "file_text": text})
        key = self.resolve(actor, org, ns, "write")
        if isinstance(key, Failure):
            return self.check(got, key, "create")
        files = self.files(key)
        if path not in files:
            if is_dir(files, path):
                return self.check(got, EXISTS, "create onto a directory")
            if file_ancestor(files, path):
                return self.check(got, INVALID_PATH, "create below a file")
            files[path] = File(text)
        else:
            files[path] = File(text, files[path].version + 1)
        self.wrote(actor, org, ns, path)
        self.check(got, f"File created successfully at: {path}", "create")

    @rule(
        data=st.data(),
        who=target(),
        path=path_st,
        view_range=st.none() | st.tuples(st.integers(-3, 4), st.integers(-3, 6)).map(list),
    )
    def run_view(
        self, data: st.DataObject, who: Target, path: str, view_range: list[int] | None
    ) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        command: dict[str, Any] = {"command": "view", "path": path}
        if view_range is not None:
            command["view_range"] = view_range
        got = self.run(actor, org, ns, command)
        key = self.resolve(actor, org, ns, "read")
        if isinstance(key, Failure):
            return self.check(got, key, "view")
        files = self.model.files.get(key, {})
        if path in files:
            expected: str | Failure = view_file(path, files[path].content, view_range)
        elif is_dir(files, path):
            expected = view_dir(files, path)
        else:
            expected = NOT_FOUND
        self.check(got, expected, "view")

    @rule(
        data=st.data(),
        who=target(),
        path=path_st,
        old=st.sampled_from(["alpha", "beta", "<b>", "é", "\n", "line", "zzz"]),
        new=FILE_TEXT,
    )
    def run_str_replace(
        self, data: st.DataObject, who: Target, path: str, old: str, new: str
    ) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        key = self.resolve(actor, org, ns, "write")
        files = self.files(key) if not isinstance(key, Failure) else {}
        how = data.draw(st.integers(0, 2), label="old_str from")
        if files.get(path) and files[path].content and how < 2:
            # The file's whole text or a piece of it, to make replacements happen.
            content = files[path].content
            start = 0 if how == 0 else data.draw(st.integers(0, len(content) - 1))
            end = len(content) if how == 0 else data.draw(st.integers(start + 1, len(content)))
            old = content[start:end]
        command = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
        got = self.run(actor, org, ns, command)
        if isinstance(key, Failure):
            return self.check(got, key, "str_replace")
        if path not in files:
            code = INVALID_PATH if is_dir(files, path) else NOT_FOUND
            return self.check(got, code, "str_replace on no file")
        content = files[path].content
        count = content.count(old)
        if count != 1:
            return self.check(got, NO_MATCH if count == 0 else AMBIGUOUS, "str_replace")
        changed = content[: content.find(old)].count("\n")
        new_content = content.replace(old, new)
        files[path] = File(new_content, files[path].version + 1)
        lines = new_content.split("\n")
        start, end = max(0, changed - 2), min(len(lines), changed + 3)
        self.check(
            got,
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
            + numbered(lines[start:end], start + 1),
            "str_replace",
        )

    @rule(data=st.data(), who=target(), path=path_st, line=st.integers(-1, 5), text=FILE_TEXT)
    def run_insert(self, data: st.DataObject, who: Target, path: str, line: int, text: str) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        command = {"command": "insert", "path": path, "insert_line": line, "insert_text": text}
        got = self.run(actor, org, ns, command)
        key = self.resolve(actor, org, ns, "write")
        if isinstance(key, Failure):
            return self.check(got, key, "insert")
        files = self.files(key)
        if path not in files:
            code = INVALID_PATH if is_dir(files, path) else NOT_FOUND
            return self.check(got, code, "insert into no file")
        lines = files[path].content.split("\n")
        if lines[-1] == "":
            lines = lines[:-1]
        if not 0 <= line <= len(lines):
            return self.check(got, INVALID, "insert_line out of range")
        new_content = "\n".join([*lines[:line], text.rstrip("\n"), *lines[line:]])
        if not new_content.endswith("\n"):
            new_content += "\n"
        files[path] = File(new_content, files[path].version + 1)
        self.check(got, f"The file {path} has been edited.", "insert")

    @rule(data=st.data(), who=target(), path=path_st)
    def run_delete(self, data: st.DataObject, who: Target, path: str) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        got = self.run(actor, org, ns, {"command": "delete", "path": path})
        key = self.resolve(actor, org, ns, "write")
        if isinstance(key, Failure):
            return self.check(got, key, "delete")
        if path == ROOT:
            return self.check(got, INVALID_PATH, "delete the root")
        files = self.files(key)
        doomed = [p for p in files if p == path or p.startswith(path + "/")]
        if not doomed:
            return self.check(got, NOT_FOUND, "delete nothing")
        for p in doomed:
            del files[p]
        self.check(got, f"Successfully deleted {path}", "delete")

    @rule(data=st.data(), who=target(), old=path_st, new=path_st)
    def run_rename(self, data: st.DataObject, who: Target, old: str, new: str) -> None:
        actor, org, ns, old = self.aim(data, who, old)
        got = self.run(actor, org, ns, {"command": "rename", "old_path": old, "new_path": new})
        key = self.resolve(actor, org, ns, "write")
        if isinstance(key, Failure):
            return self.check(got, key, "rename")
        files = self.files(key)
        if old == ROOT:
            return self.check(got, INVALID_PATH, "rename the root")
        if new in files or is_dir(files, new):
            return self.check(got, EXISTS, "rename onto something")
        if old not in files and not is_dir(files, old):
            return self.check(got, NOT_FOUND, "rename nothing")
        if new.startswith(old + "/") or file_ancestor(files, new):
            return self.check(got, INVALID_PATH, "rename into itself or a file")
        for p in [p for p in files if p == old or p.startswith(old + "/")]:
            moved = files.pop(p)
            files[new + p[len(old) :]] = File(moved.content, moved.version + 1)
        self.wrote(actor, org, ns, new)
        self.check(got, f"Successfully renamed {old} to {new}", "rename")


class FileCalls(Machine):
    """write (with expected_version), read, list_files and render."""

    @rule(
        data=st.data(),
        who=target(),
        path=path_st,
        text=FILE_TEXT,
        expected=st.sampled_from(["none", "zero", "current", "stale"]),
    )
    def write(self, data: st.DataObject, who: Target, path: str, text: str, expected: str) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        key = self.resolve(actor, org, ns, "write")
        files = self.files(key) if not isinstance(key, Failure) else {}
        current = files[path].version if path in files else None
        version = {
            "none": None,
            "zero": 0,
            "current": current if current is not None else 1,
            "stale": (current or 0) + 1,
        }[expected]
        got = self.value(
            actor, "SELECT memory.write(%s, %s, %s, %s, %s)", org, path, text, version, ns.json()
        )
        if isinstance(key, Failure):
            return self.check(got, key, "write")
        if path == ROOT:
            return self.check(got, INVALID_PATH, "write the root")
        if current is None:
            if version is not None and version > 0:
                return self.check(got, CONFLICT, "write of a missing file")
            if is_dir(files, path):
                return self.check(got, EXISTS, "write onto a directory")
            if file_ancestor(files, path):
                return self.check(got, INVALID_PATH, "write below a file")
            files[path] = File(text)
        elif version is not None and version != current:
            return self.check(got, CONFLICT, "stale write")
        else:
            files[path] = File(text, current + 1)
        self.wrote(actor, org, ns, path)
        self.check(got, {"path": path, "version": files[path].version}, "write")

    @rule(data=st.data(), who=target(), path=path_st)
    def read(self, data: st.DataObject, who: Target, path: str) -> None:
        actor, org, ns, path = self.aim(data, who, path)
        got = self.value(
            actor, "SELECT memory.read(%s, %s, %s) - 'updated_at'", org, path, ns.json()
        )
        key = self.resolve(actor, org, ns, "read")
        if isinstance(key, Failure):
            return self.check(got, key, "read")
        file = self.model.files.get(key, {}).get(path)
        expected = (
            None
            if file is None
            else {"path": path, "content": file.content, "version": file.version}
        )
        self.check(got, expected, "read")

    @rule(data=st.data(), who=target())
    def list_files(self, data: st.DataObject, who: Target) -> None:
        actor, org, ns, _ = self.aim(data, who, ROOT)
        got = self.call(
            actor, "SELECT path, bytes, version FROM memory.list_files(%s, %s)", org, ns.json()
        )
        key = self.resolve(actor, org, ns, "read")
        if isinstance(key, Failure):
            return self.check(got, key, "list_files")
        files = self.model.files.get(key, {})
        expected = [(p, len(f.content.encode()), f.version) for p, f in sorted(files.items())]
        self.check(got, expected, "list_files")

    @rule(data=st.data(), who=target())
    def render(self, data: st.DataObject, who: Target) -> None:
        actor, org, ns, _ = self.aim(data, who, ROOT)
        got = self.value(actor, "SELECT memory.render(%s, %s)", org, ns.json())
        key = self.resolve(actor, org, ns, "read")
        if isinstance(key, Failure):
            return self.check(got, key, "render")
        org_key: NsKey = (org, "organization", None, None)
        keys = [org_key] if key == org_key else [org_key, key]
        blocks = [
            render_block(path, k[1], f.content)
            for k in keys
            for path, f in sorted(self.model.files.get(k, {}).items())
        ]
        self.check(got, render(blocks), "render")
