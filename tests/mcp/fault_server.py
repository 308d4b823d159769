#!/usr/bin/env python3
"""A scripted MCP server (stdio, newline-delimited JSON-RPC) for tandem's
fault tests: it misbehaves on request. No SDK, so that it can break the
protocol exactly where a test wants.

    fault_server.py MODE LOG

MODE: `silent` never answers `initialize`; `tools` serves the tools below.
LOG: a file every received message is appended to (one JSON per line),
then `started <pid>` at startup, so tests can see what reached it.

Tools: `echo {text}`; `env` (the server's environment as JSON); `slow
{seconds}` (answers after a while, or never when cancelled); `crash` (the
process exits without answering); `grow` (adds the tool `grown` and sends
`notifications/tools/list_changed`).
"""

import json
import os
import sys
import threading
import time

MODE, LOG = sys.argv[1], sys.argv[2]
lock = threading.Lock()
cancelled = set()


def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")


def send(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


TOOLS = [
    {"name": "echo", "description": "Echoes its text",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "env", "description": "Shows the server's environment",
     "inputSchema": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}},
    {"name": "slow", "description": "Answers after `seconds`",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "crash", "description": "Exits mid-call",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "grow", "description": "Adds the tool `grown` and says the list changed",
     "inputSchema": {"type": "object", "properties": {}}},
]


def text_result(id, text):
    send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})


def slow(id, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if id in cancelled:
            return
        time.sleep(0.01)
    text_result(id, "slow done")


def call(id, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        text_result(id, "fault echo: " + str(args.get("text", "")))
    elif name == "env":
        text_result(id, json.dumps(dict(os.environ), sort_keys=True))
    elif name == "slow":
        threading.Thread(target=slow, args=(id, float(args.get("seconds", 30))), daemon=True).start()
    elif name == "grow":
        TOOLS.append({"name": "grown", "description": "Added by grow",
                      "inputSchema": {"type": "object", "properties": {}}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        text_result(id, "grew")
    elif name == "crash":
        log("crashing")
        os._exit(3)
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool " + str(name)}})


def main():
    log("started %d" % os.getpid())
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        log(line)
        message = json.loads(line)
        method, id = message.get("method"), message.get("id")
        if method == "initialize":
            if MODE == "silent":
                continue
            send({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "fault-server", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            call(id, message.get("params") or {})
        elif method == "notifications/cancelled":
            cancelled.add((message.get("params") or {}).get("requestId"))
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": id, "result": {}})
        elif id is not None:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no " + str(method)}})


main()
