#!/usr/bin/env bash
# Builds the docs and screenshots pages of the site in headless Chromium (Debian's package:
# apt-get install -y chromium), to check how the site reads in a browser.
#
#   docs/screenshot.sh [OUT]     # OUT: where the site and the PNGs go (default: docs/_build/screens)
#
# Writes OUT/html (the site) and OUT/<page>.png for the front page, a guide and a tutorial.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/_build/screens}"
mkdir -p "$out"
python -m sphinx -W -q -b html docs "$out/html"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome)"
for page in index retrieval_loss notebooks/dense_evaluation reports/index; do
    profile="$(mktemp -d)"
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --hide-scrollbars --window-size=1280,2000 \
        --screenshot="$out/$(echo "$page" | tr / _).png" "file://$PWD/$out/html/$page.html" 2>/dev/null
    rm -rf "$profile"
done
ls -l "$out"/*.png
