"""What the cloud provisioners (``ec2``, ``libcloud``) share: user data, tags, retries.

How this works.

*User data.* A cloud machine learns how to join the master from its user data, which cloud-init
runs once on first boot. :class:`UserData` renders a template with :class:`string.Template`
placeholders (``${command}``, ``${install}``, ``${machine}``, ``${cluster}``, ``${run}``,
``${master}``; ``$$`` is a literal ``$``). The built-in template, :data:`DEFAULT_USER_DATA`, is a
shell script for an image that already holds the worker (``deploy/image/``): it writes the worker's
command line to ``/etc/bats/worker.sh`` and starts the ``bats-worker`` systemd unit (or, without
systemd, the script itself). ``install`` runs first, e.g. ``pip install URL`` of the worker's own
wheel (``make worker-wheel``) on a stock image; ``deploy/cloud-init.yaml`` is a fuller template that
installs everything. Every template must contain the ``exec ${command}`` line: that is also how the
test harness, which plays the cloud, finds the command to start (:func:`worker_command`).

*Tags.* Every machine carries :data:`TAG_RUN` (the run id), :data:`TAG_CLUSTER`,
:data:`TAG_MACHINE` (the machine id the worker says hello with) and :data:`TAG_SESSION`, so
``bats-master cleanup`` and ``--resume`` find what a run left behind, whatever the master knew.

*Retries.* :func:`call_with_retries` repeats a call that failed with a throttling, capacity or
limit error (:data:`RETRYABLE`), sleeping ``backoff · 2^k`` seconds with full jitter (capped at
:data:`MAX_SLEEP_S`); when the error persists it raises :class:`ApiRefused`, which the provisioner
turns into a lower ``usable_max`` for its cluster. Any other API error is raised at once.
"""

from __future__ import annotations

import logging
import random
import re
import shlex
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from bats.provisioners.base import TOKEN_ENV, Bootstrap, MachineHandle, ProvisionerError

log = logging.getLogger(__name__)

TAG_RUN = "bats:run"
TAG_CLUSTER = "bats:cluster"
TAG_MACHINE = "bats:machine"
TAG_SESSION = "bats:session"

# error codes worth waiting for; the names are EC2's, other clouds' SDKs map onto the kinds
THROTTLING = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequests",
                        "RequestThrottled", "EC2ThrottledException"})
CAPACITY = frozenset({"InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity",
                      "InsufficientReservedInstanceCapacity", "InsufficientFreeAddressesInSubnet",
                      "SpotMaxPriceTooLow", "Unsupported"})
LIMITS = frozenset({"InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded",
                    "ResourceLimitExceeded", "LimitExceeded", "QuotaExceeded"})
RETRYABLE = THROTTLING | CAPACITY | LIMITS
MAX_SLEEP_S = 20.0

T = TypeVar("T")


class ApiRefused(ProvisionerError):
    """The back end kept refusing with a throttling, capacity or limit error."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def error_code(exc: BaseException) -> str | None:
    """The API error code of a failed call: botocore's ``ClientError`` carries it in
    ``exc.response``; Libcloud's EC2 driver raises ``Exception("Code: message")`` and its HTTP
    errors carry the status (429: rate limited). None when there is no code."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if isinstance(code, str):
            return code
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        return code
    if code == 429 or type(exc).__name__ == "RateLimitReachedError":
        return "TooManyRequests"
    match = _CODE_PREFIX.match(str(exc))
    return match.group(1) if match and match.group(1) in RETRYABLE else None


_CODE_PREFIX = re.compile(r"\s*([A-Za-z][A-Za-z.]*)\s*:")


def call_with_retries(call: Callable[[], T], what: str, attempts: int, backoff_s: float,
                      sleep: Callable[[float], None] = time.sleep,
                      rng: random.Random | None = None) -> T:
    """``call()``, repeated up to ``attempts`` times in all while it fails with a
    :data:`RETRYABLE` code; raises :class:`ApiRefused` when that persists."""
    rng = rng or random.Random()
    for attempt in range(1, max(1, attempts) + 1):
        try:
            return call()
        except Exception as exc:
            code = error_code(exc)
            if code not in RETRYABLE:
                raise
            if attempt >= attempts:
                raise ApiRefused(f"{what}: {code} after {attempt} attempt(s): {_short(exc)}", code) from None
            pause = rng.uniform(0.0, min(MAX_SLEEP_S, backoff_s * 2 ** (attempt - 1)))
            log.warning("%s: %s (attempt %d of %d); retrying in %.1fs", what, code, attempt, attempts, pause)
            sleep(pause)
    raise AssertionError("unreachable")


def _short(exc: BaseException) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."


def tags_for(bootstrap: Bootstrap, handle: MachineHandle, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The tags every machine carries (plus the operator's ``tags``), and a ``Name``."""
    return {
        "Name": f"bats-{handle.machine_id}",
        **(extra or {}),
        TAG_RUN: bootstrap.run_id,
        TAG_CLUSTER: handle.cluster,
        TAG_MACHINE: handle.machine_id,
        TAG_SESSION: str(bootstrap.session),
    }


DEFAULT_USER_DATA = """\
#!/bin/sh
# BaTS worker bootstrap: cloud-init runs this once, as root, on first boot.
# Machine ${machine} of cluster ${cluster}, run ${run}, master ${master}.
set -eu
${install}
mkdir -p /etc/bats
umask 077
cat > /etc/bats/worker.sh <<'BATS_WORKER'
#!/bin/sh
exec ${command}
BATS_WORKER
if id bats >/dev/null 2>&1; then chown bats:bats /etc/bats/worker.sh; fi
chmod 0700 /etc/bats/worker.sh  # it holds the machine's token
if [ -d /run/systemd/system ] && systemctl cat bats-worker.service >/dev/null 2>&1; then
    systemctl enable --now bats-worker.service
else
    nohup /etc/bats/worker.sh >>/var/log/bats-worker.log 2>&1 &
fi
"""

PLACEHOLDERS = ("command", "install", "machine", "cluster", "run", "master")
_EXEC_LINE = re.compile(r"^([ \t]*)exec \$\{command\}[ \t]*$", re.MULTILINE)
_EXPORT_LINE = re.compile(r"^[ \t]*(BATS_[A-Z_]+)=(.*); export \1[ \t]*$")  # what render() puts before it


@dataclass(frozen=True)
class UserData:
    """A user-data template (see the module docstring)."""

    template: str
    source: str = "the built-in user data"

    @classmethod
    def load(cls, path: str | None) -> UserData:
        """The template at ``path`` (None: the built-in one); ValueError with the reason."""
        if not path:
            return cls(DEFAULT_USER_DATA)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not UTF-8 text") from None
        data = cls(text, path)
        data.check()
        return data

    def check(self) -> None:
        """Refuse a template with an unknown placeholder or without the ``exec ${command}`` line."""
        try:
            string.Template(self.template).substitute(dict.fromkeys(PLACEHOLDERS, "x"))
        except KeyError as exc:
            raise ValueError(f"{self.source}: unknown placeholder ${{{exc.args[0]}}} "
                             f"(known: {', '.join(PLACEHOLDERS)}; write $$ for a literal $)") from None
        except ValueError as exc:
            raise ValueError(f"{self.source}: {exc} (write $$ for a literal $)") from None
        if not _EXEC_LINE.search(self.template):
            raise ValueError(f"{self.source}: needs a line 'exec ${{command}}' that starts the worker")

    def render(self, bootstrap: Bootstrap, handle: MachineHandle, command: list[str], install: str = "",
               env: dict[str, str] | None = None) -> str:
        """The user data of one machine. The token (and ``env``: other secrets, such as the signed
        URLs of ``[files]``) goes in the environment of the worker, on lines put before the
        template's ``exec ${command}`` line (the worker's command line, which every user of the
        machine can read in ``ps``, carries none)."""
        # "$$": the values are data, not placeholders (a signed policy may hold "${filename}")
        lines = [f"{name}={shlex.quote(value)}; export {name}".replace("$", "$$")
                 for name, value in {TOKEN_ENV: handle.token, **(env or {})}.items()]
        template = _EXEC_LINE.sub(lambda m: "".join(f"{m.group(1)}{line}\n" for line in lines) + m.group(0),
                                  self.template)
        return string.Template(template).substitute(
            command=shlex.join(command), install=install or ":", machine=handle.machine_id,
            cluster=handle.cluster, run=bootstrap.run_id, master=bootstrap.master_endpoint)


def worker_environment(user_data: str) -> dict[str, str]:
    """What a rendered user data puts in the worker's environment (its token, [files]' grant)."""
    found: dict[str, str] = {}
    for line in user_data.splitlines():
        match = _EXPORT_LINE.match(line)
        if match:
            found[match.group(1)] = (shlex.split(match.group(2)) or [""])[0]
    return found


def worker_command(user_data: str) -> list[str] | None:
    """The worker command a rendered user data starts (its ``exec`` line), or None."""
    for line in user_data.splitlines():
        words = line.strip().split(None, 1)
        if len(words) == 2 and words[0] == "exec" and "--master" in words[1]:
            return shlex.split(words[1])
    return None


def worker_argv(bootstrap: Bootstrap, bootstrap_argv: list[str], worker: str) -> list[str]:
    """The bootstrap command with the master's interpreter swapped for the machine's ``worker``
    command (``bats-worker`` from the image, or what the ``worker_command`` key says)."""
    return [*shlex.split(worker), *bootstrap_argv[len(bootstrap.worker_command):]]


def string_table(value: Any, key: str) -> dict[str, str]:
    """A TOML table of strings (``tags``); ValueError(key, reason) otherwise."""
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(key, f"expected a table of strings such as {{ team = \"x\" }}, got {value!r}")
    for name in value:
        if name.startswith("bats:") or name == "Name":
            raise ValueError(key, f"{name!r} is set by BaTS")
    return dict(value)
