#!/usr/bin/env bash
# Regenerates constraints.txt: the resolved set of burst's dependencies, dev extras included, for
# every supported Python (3.11 and 3.12), as exact pins without hashes (hash-checking mode refuses
# `pip install -e .`). Both README commands install with `-c constraints.txt`.
#
#   scripts/lock.sh              keep today's pins, add or drop only what pyproject.toml changed
#   scripts/lock.sh --upgrade    re-resolve everything to the newest releases that fit
#
# Needs uv (`pip install uv`).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v uv > /dev/null; then
  echo "scripts/lock.sh: uv not found; install it with 'pip install uv'" >&2
  exit 1
fi
uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
  --custom-compile-command scripts/lock.sh --output-file constraints.txt "$@"
