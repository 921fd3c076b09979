"""``sophon-dsl ui``: serve the dashboard over the run store (the ``ui`` extra)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from .common import EXIT_OK, EXIT_USAGE

__all__ = ["run"]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _existing_store(url: str | None) -> tuple[object, str]:
    """The store, which must exist: the dashboard reads runs, it never creates a store (a
    missing SQLite file, or a database without the store's tables: exit 2)."""
    from ..durable import default_store_url
    from .store import open_cli_store

    url = url or default_store_url()
    return open_cli_store(url, create=False), url


def run(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get("SOPHON_DSL_UI_TOKEN") or None
    if not _loopback(args.host) and not token:
        print(f"sophon-dsl ui: error: binding {args.host} (not loopback) needs --token or SOPHON_DSL_UI_TOKEN",
              file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.port <= 65535:
        print("sophon-dsl ui: error: --port must be 0-65535", file=sys.stderr)
        return EXIT_USAGE
    try:
        import uvicorn

        from ..ui.app import make_app
    except ImportError as exc:
        print(f"sophon-dsl ui: error: the dashboard needs the ui extra (pip install 'sophon-dsl[ui]'): {exc}",
              file=sys.stderr)
        return EXIT_USAGE
    store, url = _existing_store(args.store)
    try:
        if args.run == "latest":  # the newest run: what `run ... && sophon-dsl ui --open --run latest` just made
            newest = store.list_runs(limit=1)
            args.run = newest[0]["run_id"] if newest else None
        app = make_app(store, url, token)
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        _announce_when_up(server, args, token)
        server.run()
        if not server.started:  # (the port was taken: uvicorn said why)
            return EXIT_USAGE
        return EXIT_OK
    finally:
        store.close()


def _announce_when_up(server, args: argparse.Namespace, token: str | None) -> None:
    """Print the address once the server listens (``--port 0`` picks one), and open it with
    ``--open``."""
    import threading
    import time
    import webbrowser
    from urllib.parse import quote

    def opener() -> None:
        for _ in range(600):
            if server.started:
                break
            time.sleep(0.05)
        else:
            return
        port = server.servers[0].sockets[0].getsockname()[1] if server.servers else args.port
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"sophon-dsl ui: serving http://{host}:{port}/", file=sys.stderr, flush=True)
        if args.open:
            path = f"/runs/{quote(args.run, safe='')}" if args.run else "/"
            query = f"?token={quote(token)}" if token and not args.run else ""
            webbrowser.open(f"http://{host}:{port}{path}{query}")

    threading.Thread(target=opener, daemon=True).start()
