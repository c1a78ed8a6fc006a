#!/usr/bin/env bash
# Installs the Debian packages the browser, Prometheus and Azure tests need, one at a time and
# only those whose command is missing, so a package that conflicts with what the machine already
# has (a preinstalled Node.js, say) is never asked for. `--plan` prints what it would install.
#
#   scripts/system-packages.sh          install what is missing (root or sudo)
#   scripts/system-packages.sh --plan   print "<command> <package>" for each missing one
set -euo pipefail

# command -> Debian package
needed=(
  "chromium chromium"
  "chromedriver chromium-driver"
  "promtool prometheus"
  "openssl openssl"
)
# npm comes with Node.js: Debian's npm conflicts with a Node.js from elsewhere (NodeSource's
# nodejs ships its own npm), so ask for it only on a machine with no Node.js at all.
if ! command -v node >/dev/null; then
  needed+=("npm npm")
fi

missing=()
for pair in "${needed[@]}"; do
  cmd=${pair%% *}
  command -v "$cmd" >/dev/null || missing+=("$pair")
done

if [ "${1:-}" = "--plan" ]; then
  for pair in "${missing[@]}"; do echo "$pair"; done
  exit 0
fi

if ! command -v npm >/dev/null && command -v node >/dev/null; then
  echo "system-packages: Node.js is installed without npm; install npm from the same source as Node.js" >&2
  exit 1
fi
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -qq
for pair in "${missing[@]}"; do
  package=${pair#* }
  echo "system-packages: installing $package"
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null; then
    echo "system-packages: 'apt-get install $package' failed; install it by hand and run again" >&2
    exit 1
  fi
done
