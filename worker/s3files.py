"""``[files]`` on a cloud machine, through S3 URLs the master signed: the inputs fetched before the
worker starts, each task's outputs uploaded before its result is sent. Standard library only: a
worker image needs no boto3 and the machine no AWS credentials.

How this works. The master (:mod:`bats.provisioners.ec2`) stages the run's inputs under
``s3://BUCKET/PREFIX/inputs/SET/`` (``SET``: the SHA-256 over their names and contents, so a set
already there is not sent again) with the ``setup`` command as ``.bats-setup``. For each machine it
launches it signs, with its own credentials, a *grant* (JSON) and a *manifest* it puts at
``RUN/grants/MACHINE.json``:

- the manifest: the set's name and a presigned GET URL for each input and for the setup;
- the grant: a presigned GET URL for that manifest, a presigned PUT URL for the one key
  ``RUN/setup-failed/MACHINE``, and a presigned POST policy for the uploads whose conditions hold
  the key to ``RUN/outputs/`` (``starts-with``) and each file to ``max_output`` bytes, with the time
  they all expire.

Signed URLs are bearer credentials, so the grant travels as the token does: in the worker's
environment (``BATS_FILES_GRANT``, a line of the machine's user data beside ``BATS_TOKEN``), never
on a command line. The worker's argv names the unsigned locations only (``--files-from``,
``--files-to``: for the operator and for messages). :func:`prepare` runs in the worker before it
says hello: it fetches the manifest and the inputs into ``DIR/inputs`` (skipped when the machine
holds the same set), runs the setup there once per machine with ``/bin/sh``, keeps the grant in
``DIR/.grant`` (mode 0600, for the uploads) and writes ``DIR/push``; ``BATS_FILES=DIR`` is put in the
environment the tasks inherit (the grant's variable is not: :mod:`bats.worker.main` pops it). The task
wrapper (:mod:`bats.master.state.files`) calls ``DIR/push ID`` after it moved a task's outputs to
``DIR/outputs/ID``: :func:`push` posts each file as ``multipart/form-data`` with the policy's fields
to ``RUN/outputs/ID/...`` and removes it here; a failed upload fails the task. A setup that fails
PUTs its exit status and last line to ``RUN/setup-failed/MACHINE`` (the master reads it, names it
and gives the machine up) and the worker exits.

A URL past its expiry (``files_url_expiry``, counted from the machine's launch) is refused by S3;
the error then says so in one line naming the machine. No URL is ever written to a log or an error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SETUP_KEY = ".bats-setup"  # the setup command, beside the inputs
SET_MARK = ".bats-set"  # in DIR/inputs: the set this machine holds
SETUP_DONE = ".bats-setup-done"
GRANT_ENV = "BATS_FILES_GRANT"  # how the master hands a machine its signed URLs (not on the command line)
GRANT_FILE = ".grant"  # in DIR, mode 0600: the grant, for DIR/push
TIMEOUT_S = 120.0  # one socket operation of a transfer
CHUNK = 1 << 20


class FilesError(RuntimeError):
    """The machine cannot take part, or an upload failed: the message says why (one line)."""


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``); ValueError otherwise."""
    if not url.startswith("s3://") or not url[5:].split("/", 1)[0]:
        raise ValueError(f"expected an S3 location such as s3://bucket/prefix, got {url!r}")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def join_key(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def read_grant(text: str, machine: str) -> dict[str, Any]:
    """The grant in ``text`` (JSON, see the module docstring); FilesError if it is not one."""
    try:
        grant = json.loads(text)
    except ValueError:
        grant = None
    if not isinstance(grant, dict) or not isinstance(grant.get("expires"), (int, float)) or not all(
            isinstance(grant.get(k), (str, type(None))) for k in ("manifest", "failed", "outputs")) or not isinstance(
            grant.get("post") or {}, dict):
        raise FilesError(f"[files] {GRANT_ENV} of machine {machine} is not a grant of signed S3 URLs "
                         "(it comes from the master with the machine's token)")
    return grant


def prepare(files_from: str | None, files_to: str | None, folder: str, machine: str, grant_text: str) -> None:
    """Inputs, setup and the push command for this machine (see the module docstring); sets
    ``BATS_FILES``. Raises :class:`FilesError`."""
    if not grant_text:
        raise FilesError(f"[files] machine {machine} has no {GRANT_ENV} in its environment: the signed S3 "
                         "URLs come from the master, in the machine's user data beside its token")
    grant = read_grant(grant_text, machine)
    root = Path(folder)
    for name in ("inputs", "tasks", "outputs"):
        (root / name).mkdir(parents=True, exist_ok=True)
    os.environ["BATS_FILES"] = str(root)
    if files_from and grant.get("manifest"):
        try:
            setup = _fetch_inputs(grant, files_from, root / "inputs", machine)
        except (OSError, ValueError) as exc:  # a full disk, a torn answer: the machine cannot work
            raise FilesError(f"[files] fetching the inputs from {files_from} failed on {machine}: "
                             f"{_one_line(exc)}") from None
        if setup is not None and not (root / SETUP_DONE).exists():
            _run_setup(grant, setup, root, machine)
            (root / SETUP_DONE).write_text("done\n")
    if files_to and grant.get("post"):
        kept = root / GRANT_FILE
        fd = os.open(kept.with_name(GRANT_FILE + ".part"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**grant, "machine": machine, "to": files_to}, f)
        os.replace(kept.with_name(GRANT_FILE + ".part"), kept)
        push = root / "push"  # the path of the grant, never a URL, on this command line
        words = [sys.executable, "-m", "bats.worker.s3files", "push", "--dir", str(root)]
        push.write_text(f"#!/bin/sh\nexec {shlex.join(words)} \"$1\"\n")
        push.chmod(0o700)


def _fetch_inputs(grant: dict[str, Any], where: str, inputs: Path, machine: str) -> str | None:
    """Download the set the manifest lists unless ``inputs`` holds it; the setup command, if any."""
    manifest = json.loads(_get(grant, grant["manifest"], f"the [files] manifest of {where}", machine))
    files = manifest.get("inputs") if isinstance(manifest, dict) else None
    wanted = manifest.get("set") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not isinstance(wanted, str):
        raise FilesError(f"[files] the manifest of {where} for machine {machine} is not one BaTS wrote")
    mark = inputs / SET_MARK
    have = mark.read_text().strip() if mark.exists() else None
    if have != wanted:
        for name, url in sorted(files.items()):
            if not name or "/" in name or name.startswith(".") or not isinstance(url, str):
                raise FilesError(f"[files] the manifest of {where} names {name!r}, which is no input's name")
            part = inputs / f".{name}.part"
            with _open(grant, urllib.request.Request(url), f"fetching the input {name} from {where}", machine) as answer, \
                    open(part, "wb") as out:
                shutil.copyfileobj(answer, out, CHUNK)
            os.replace(part, inputs / name)
        mark.write_text(wanted + "\n")
    setup = manifest.get("setup")
    if not isinstance(setup, str):
        return None
    return _get(grant, setup, f"the [files] setup of {where}", machine).decode("utf-8", "replace")


def _run_setup(grant: dict[str, Any], setup: str, root: Path, machine: str) -> None:
    done = subprocess.run(["/bin/sh", "-c", setup], cwd=root / "inputs", stdin=subprocess.DEVNULL,
                          capture_output=True, env={**os.environ, "BATS_MACHINE": machine})
    if done.returncode == 0:
        return
    said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
    message = f"[files] setup failed on {machine} (exit {done.returncode}): {said[-1] if said else 'no message'}"
    if grant.get("failed"):
        body = message.encode()
        request = urllib.request.Request(grant["failed"], data=body, method="PUT",
                                         headers={"Content-Length": str(len(body)),
                                                  "Content-Type": "text/plain; charset=utf-8"})
        try:  # the master reads this and gives the machine up, naming the setup
            with _open(grant, request, "telling the master", machine):
                pass
        except FilesError as exc:
            message += f" (and {exc})"
    raise FilesError(message)


def push(folder: str, task: str) -> None:
    """Upload ``DIR/outputs/TASK`` to ``RUN/outputs/TASK/`` with the policy in ``DIR/.grant`` and
    remove it here."""
    if not task.isdigit():
        raise FilesError(f"[files] push: expected a task id, got {task!r}")
    here = Path(folder) / "outputs" / task
    if not here.is_dir():
        return
    try:
        text = (Path(folder) / GRANT_FILE).read_text(encoding="utf-8")
    except OSError as exc:
        raise FilesError(f"[files] push: cannot read {Path(folder) / GRANT_FILE}: {exc.strerror or exc}") from None
    grant = read_grant(text, "this machine")
    machine, post, prefix = str(grant.get("machine", "?")), grant.get("post") or {}, grant.get("outputs") or ""
    if not isinstance(post.get("url"), str) or not isinstance(post.get("fields"), dict):
        raise FilesError(f"[files] the grant of machine {machine} has no upload policy")
    for path in sorted(p for p in here.rglob("*") if p.is_file()):
        rel = path.relative_to(here).as_posix()
        key = f"{prefix}{task}/{rel}"
        body, length, boundary = _form(post["fields"], key, path)
        request = urllib.request.Request(post["url"], data=body, method="POST", headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(length)})
        with _open(grant, request, f"uploading {rel} of task {task} to {grant.get('to') or 'S3'}", machine):
            pass
        path.unlink()


def _form(fields: dict[str, Any], key: str, path: Path) -> tuple[Iterator[bytes], int, str]:
    """A ``multipart/form-data`` body for S3's POST: the policy's fields, the key, then the file (it
    must come last), streamed from disk; its length; its boundary."""
    boundary = "bats-" + secrets.token_hex(16)
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + str(value).encode() + b"\r\n"
        for name, value in [*((n, v) for n, v in fields.items() if n != "key"), ("key", key)])
    filename = re.sub(r'["\\\r\n]', "_", path.name)
    head += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
             "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    size = path.stat().st_size

    def chunks() -> Iterator[bytes]:
        yield head
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk
        yield tail

    return chunks(), len(head) + size + len(tail), boundary


def _get(grant: dict[str, Any], url: str, what: str, machine: str) -> bytes:
    with _open(grant, urllib.request.Request(url), f"fetching {what}", machine) as answer:
        data: bytes = answer.read()
    return data


def _open(grant: dict[str, Any], request: urllib.request.Request, what: str, machine: str) -> Any:
    """``urlopen``, its failures as one-line :class:`FilesError` naming the machine and never the URL
    (a bearer credential); an expired signature says so."""
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        try:
            said = exc.read(4000).decode("utf-8", "replace")
        except OSError:
            said = ""
        code = _xml(said, "Code") or exc.reason
        message = _xml(said, "Message")
        expires = float(grant.get("expires") or 0)
        if exc.code == 403 and ("expired" in message.lower() or time.time() > expires):
            at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires))
            raise FilesError(f"[files] the signed S3 URLs of machine {machine} expired at {at}: {what} was "
                             "refused (the machine outlived the cluster's files_url_expiry, counted from its "
                             "launch)") from None
        raise FilesError(f"[files] {what} failed on {machine}: HTTP {exc.code} {code}"
                         + (f": {_one_line(message)}" if message else "")) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise FilesError(f"[files] {what} failed on {machine}: {_one_line(reason)}") from None


def _xml(text: str, tag: str) -> str:
    found = re.search(f"<{tag}>([^<]*)</{tag}>", text)
    return found.group(1) if found else ""


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split())
    text = re.sub(r"https?://\S+", "(a signed URL)", text)  # never a bearer credential in a message
    return text[:300] or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """``python -m bats.worker.s3files push --dir DIR ID`` (what ``DIR/push`` runs)."""
    p = argparse.ArgumentParser(prog="bats-worker-files", description="upload one task's [files] outputs to S3")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("push")
    up.add_argument("--dir", required=True)
    up.add_argument("task")
    args = p.parse_args(argv)
    try:
        push(args.dir, args.task)
    except (FilesError, OSError) as exc:
        sys.stderr.write(f"bats: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
