#!/usr/bin/env bash
# The whole test suite, as CI runs it: `go test -race ./...`, after making
# sure the real ACP adapters the integration tests run are installed at the
# versions the lock pins (npm ci, only when the lock changed since the last
# install). Arguments go to go test: ./test.sh -short leaves the real-adapter
# tests out and needs no npm; ./test.sh -run TestReal -count=1 runs only them.
set -euo pipefail
cd "$(dirname "$0")"

adapters=integration_test/testdata/adapters
stamp=$adapters/node_modules/.acp-broker-installed-lock
case " $* " in
*" -short "* | *" -short=true "*) ;;
*)
  if ! cmp -s "$adapters/package-lock.json" "$stamp" 2>/dev/null; then
    command -v npm >/dev/null || {
      echo "test.sh: npm is needed to install the real adapters ($adapters); run ./test.sh -short to leave them out" >&2
      exit 1
    }
    npm ci --ignore-scripts --no-audit --no-fund --prefix "$adapters"
    cp "$adapters/package-lock.json" "$stamp"
  fi
  ;;
esac
# The integration package takes 4-5 minutes under -race on 2 cores, more on
# a busy machine: past go test's default 10-minute limit.
exec go test -race -timeout 30m "$@" ./...
