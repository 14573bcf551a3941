#!/bin/sh
# Bake the BaTS worker into a machine image (run as root on the machine being imaged, e.g. by
# Packer's shell provisioner, see bats-worker.pkr.hcl; or by hand on a VM you then snapshot).
#
#   sudo sh install-worker.sh WHEEL_OR_PIP_SPEC [UNIT_FILE]
#
# WHEEL_OR_PIP_SPEC: what to pip install, e.g. /tmp/bats-0.1.0-py3-none-any.whl (built on your
# machine with `python3 -m pip wheel --no-deps -w dist .`). The worker needs no extras: it imports
# pyzmq, msgpack and psutil only. UNIT_FILE defaults to bats-worker.service next to this script's
# folder (deploy/bats-worker.service).
#
# Result: Python venv in /opt/bats, /usr/local/bin/bats-worker, a `bats` system user, and the
# bats-worker systemd unit installed but not enabled: the machine's user data writes
# /etc/bats/worker.sh (who to connect to, with which token) and starts the unit.
set -eu
spec=${1:?usage: install-worker.sh WHEEL_OR_PIP_SPEC [UNIT_FILE]}
unit=${2:-$(dirname "$0")/../bats-worker.service}
[ "$(id -u)" = 0 ] || { echo "install-worker.sh: run as root" >&2; exit 2; }
[ -f "$unit" ] || { echo "install-worker.sh: no unit file at $unit" >&2; exit 2; }

if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates >/dev/null
elif command -v dnf >/dev/null 2>&1; then
    dnf install -y -q python3 >/dev/null
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "install-worker.sh: the worker needs Python 3.11 or newer" >&2; exit 2; }

python3 -m venv /opt/bats
/opt/bats/bin/pip install --quiet --upgrade pip
/opt/bats/bin/pip install --quiet "$spec"
ln -sf /opt/bats/bin/bats-worker /usr/local/bin/bats-worker

id bats >/dev/null 2>&1 || useradd --system --create-home --home-dir /home/bats --shell /usr/sbin/nologin bats
install -m 0644 "$unit" /etc/systemd/system/bats-worker.service
mkdir -p /etc/bats
systemctl daemon-reload 2>/dev/null || true
/usr/local/bin/bats-worker --help >/dev/null
echo "install-worker.sh: bats-worker installed; the machine's user data starts it"
