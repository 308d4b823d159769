#!/usr/bin/env bash
# The VS Code extension's whole suite, run by the repository's scripts/test:
# npm ci, type-check, lint, the .vsix, then in Node's test runner the unit
# tests, the protocol tests (the real tandem binary; TANDEM_BIN or
# target/debug/tandem), the manifest test, the chat webview's rendering
# benchmark in headless Chromium, and the end-to-end tests in a real VS Code
# (code-server, installed into ~/.cache/tandem-test by install-test-host.sh;
# if that is impossible, the e2e tests say they did not run).
set -euo pipefail
cd "$(dirname "$0")/.."

npm ci --no-audit --no-fund --loglevel=error
npx tsc --noEmit -p .
npx eslint src webview test
npm run -s package
node esbuild.mjs --tests

if host=$(bash scripts/install-test-host.sh); then
    # shellcheck disable=SC2046
    export $host
else
    echo "editors/vscode: could not install code-server; the e2e tests will not run" >&2
fi

node --test --test-concurrency=1 --test-timeout=300000 out/test/
