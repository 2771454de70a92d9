#!/bin/sh
# report-first-screen.sh REPORT.html OUT.png [WIDTH HEIGHT]
#
# Looks at a report's first screen as a researcher's browser shows it: headless Chromium
# (./scripts/install-deps.sh --browser installs it) at WIDTH x HEIGHT (default 1300 x 900)
# writes the screenshot OUT.png, and says whether the study's conclusions table ends inside
# that first screen (exit 1 when it does not). The report itself has no script; the check
# runs on a copy with one line added that measures the table.
set -eu
html=$1 out=$2 width=${3:-1300} height=${4:-900}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "no chromium: run ./scripts/install-deps.sh --browser" >&2; exit 2; }
run() { timeout 60 "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="$width,$height" "$@" 2>/dev/null; }

run --screenshot="$out" "file://$(realpath "$html")" >/dev/null
tmp=$(mktemp --suffix=.html)
trap 'rm -f "$tmp"' EXIT
sed 's#</body>#<script>var t=document.getElementById("conclusions-table");document.title="FIRST-SCREEN "+(t?Math.ceil(t.getBoundingClientRect().bottom):-1)+" "+innerHeight;</script></body>#' "$html" >"$tmp"
set -- $(run --dump-dom "file://$tmp" | sed -n 's#.*<title>FIRST-SCREEN \([-0-9]*\) \([0-9]*\)</title>.*#\1 \2#p')
bottom=${1:-} screen=${2:-}
if [ -z "$bottom" ]; then echo "$html: could not measure the page" >&2; exit 2; fi
if [ "$bottom" -lt 0 ]; then echo "$html: no conclusions table (a run that reproduces no study)"; exit 0; fi
if [ "$bottom" -le "$screen" ]; then
  echo "$html: conclusions end at ${bottom}px of a ${width}x${screen} first screen: all in view ($out)"
else
  echo "$html: conclusions end at ${bottom}px, below the ${width}x${screen} first screen ($out)" >&2
  exit 1
fi
