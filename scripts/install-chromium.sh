#!/usr/bin/env bash
# install-chromium.sh: installs Debian's chromium package when no headless
# Chromium is on PATH (the ops console's browser tests drive it through
# chromedp; internal/testbrowser finds it). Called by `make test`.
set -euo pipefail

for b in chromium chromium-browser google-chrome; do
  command -v "$b" >/dev/null && exit 0
done
echo "install-chromium: installing chromium from Debian packages" >&2
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
