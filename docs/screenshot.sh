#!/usr/bin/env bash
# Builds the docs and screenshots pages of the site in headless Chromium (Debian's package:
# apt-get install -y chromium), to check how the site reads in a browser.
#
#   docs/screenshot.sh [OUT]     # OUT: where the site and the PNGs go (default: $TMPDIR/jaxrank-screens)
#
# Writes OUT/html (the site) and OUT/<page>.png for the front page, a guide and a tutorial.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${TMPDIR:-/tmp}/jaxrank-screens}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
python -m sphinx -W -q -b html docs "$out/html"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome)"
# page:height (a tutorial's plots lie far down its page)
for spec in index:1400 retrieval_loss:2000 notebooks/evaluate_runs:7000 notebooks/ltr_training:5200 reports/index:2000; do
    page="${spec%%:*}" height="${spec##*:}"
    profile="$(mktemp -d)"
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --hide-scrollbars --virtual-time-budget=3000 --window-size="1280,$height" \
        --screenshot="$out/$(echo "$page" | tr / _).png" "file://$out/html/$page.html" 2>/dev/null
    rm -rf "$profile"
done
ls -l "$out"/*.png
