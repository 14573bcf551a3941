#!/bin/sh
# Bake the BaTS worker into a machine image (run as root on the machine being imaged, e.g. by
# Packer's shell provisioner, see bats-worker.pkr.hcl; or by hand on a VM you then snapshot).
#
#   sudo sh install-worker.sh WHEEL_OR_PIP_SPEC [UNIT_FILE]
#
# WHEEL_OR_PIP_SPEC: what to pip install, e.g. /tmp/bats_worker-0.1.0-py3-none-any.whl, the worker
# alone (built in the repository by `make worker-wheel`; it pulls pyzmq, msgpack and psutil only).
# pip's own variables apply: PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR installs from a folder of wheels.
# UNIT_FILE defaults to bats-worker.service next to this script's folder (deploy/bats-worker.service).
#
# Result: Python venv in /opt/bats, /usr/local/bin/bats-worker, a `bats` system user whose home,
# /var/lib/bats, systemd makes when the unit starts, and the bats-worker systemd unit installed but
# not enabled: the machine's user data writes /etc/bats/worker.sh (who to connect to, with which
# token) and starts the unit. Python and its venv module come from the distribution's packages when
# the machine lacks them.
set -eu
spec=${1:?usage: install-worker.sh WHEEL_OR_PIP_SPEC [UNIT_FILE]}
unit=${2:-$(dirname "$0")/../bats-worker.service}
[ "$(id -u)" = 0 ] || { echo "install-worker.sh: run as root" >&2; exit 2; }
[ -f "$unit" ] || { echo "install-worker.sh: no unit file at $unit" >&2; exit 2; }

if python3 -c 'import ensurepip, venv' 2>/dev/null && [ -e /etc/ssl/certs/ca-certificates.crt ]; then
    :  # Python with venv and pip, and the certificates pip needs: nothing to install
elif command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates >/dev/null
elif command -v dnf >/dev/null 2>&1; then
    dnf install -y -q python3 >/dev/null
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "install-worker.sh: the worker needs Python 3.11 or newer" >&2; exit 2; }

python3 -m venv /opt/bats
/opt/bats/bin/pip install --quiet "$spec"
ln -sf /opt/bats/bin/bats-worker /usr/local/bin/bats-worker

id bats >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /var/lib/bats --shell /usr/sbin/nologin bats
install -m 0644 "$unit" /etc/systemd/system/bats-worker.service
mkdir -p /etc/bats
systemctl daemon-reload 2>/dev/null || true
version=$(/usr/local/bin/bats-worker --version)
echo "install-worker.sh: $version installed; the machine's user data starts it"
