"""``[files]`` on a cloud machine, through S3: the inputs fetched before the worker starts, each
task's outputs uploaded before its result is sent.

How this works. The master (:mod:`bats.provisioners.ec2`) stages the run's inputs under
``s3://BUCKET/PREFIX/inputs/SET/`` (``SET``: the SHA-256 over their names and contents, so a set
already there is not sent again) with the ``setup`` command as ``.bats-setup``, and starts each
worker with ``--files-from`` that folder and ``--files-to s3://BUCKET/PREFIX/RUN``.
:func:`prepare` runs in the worker before it says hello: it fetches the inputs into
``DIR/inputs`` (skipped when the machine holds the same set), runs the setup there once per machine
with ``/bin/sh``, writes ``DIR/push`` and puts ``BATS_FILES=DIR`` in the environment the tasks
inherit. The task wrapper (:mod:`bats.master.state.files`) calls ``DIR/push ID`` after it moved a
task's outputs to ``DIR/outputs/ID``: :func:`push` uploads them to ``RUN/outputs/ID/...`` and
removes them here; a failed upload fails the task. A setup that fails writes its exit status and
last line to ``RUN/setup-failed/MACHINE`` (the master reads it, names it and gives the machine up)
and the worker exits.

Credentials come from boto3's own chain on the machine (an instance profile on EC2): none is ever
on a command line or in the user data. boto3 is imported here only, when ``--files-from`` or
``--files-to`` is given: a worker image without ``[files]`` needs none.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

SETUP_KEY = ".bats-setup"  # the setup command, beside the inputs
SET_MARK = ".bats-set"  # in DIR/inputs: the set this machine holds
SETUP_DONE = ".bats-setup-done"


class FilesError(RuntimeError):
    """The machine cannot take part: the message says why (one line)."""


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``); ValueError otherwise."""
    if not url.startswith("s3://") or not url[5:].split("/", 1)[0]:
        raise ValueError(f"expected an S3 location such as s3://bucket/prefix, got {url!r}")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def client(endpoint: str | None, region: str | None = None) -> Any:
    try:
        import boto3
    except ImportError:
        raise FilesError("[files] through S3 needs boto3 on the machine (pip install boto3, e.g. in the "
                         "cluster's install)") from None
    return boto3.session.Session(region_name=region or None).client("s3", endpoint_url=endpoint or None)


def join_key(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def prepare(files_from: str | None, files_to: str | None, folder: str, machine: str,
            endpoint: str | None, region: str | None = None) -> None:
    """Inputs, setup and the push command for this machine (see the module docstring); sets
    ``BATS_FILES``. Raises :class:`FilesError`."""
    s3 = client(endpoint, region)
    root = Path(folder)
    for name in ("inputs", "tasks", "outputs"):
        (root / name).mkdir(parents=True, exist_ok=True)
    os.environ["BATS_FILES"] = str(root)
    if files_from:
        setup = _fetch_inputs(s3, files_from, root / "inputs")
        if setup is not None and not (root / SETUP_DONE).exists():
            _run_setup(s3, setup, root, machine, files_to)
            (root / SETUP_DONE).write_text("done\n")
    if files_to:
        push = root / "push"
        words = [sys.executable, "-m", "bats.worker.s3files", "push", "--to", files_to, "--dir", str(root)]
        if endpoint:
            words += ["--endpoint", endpoint]
        if region:
            words += ["--region", region]
        push.write_text(f"#!/bin/sh\nexec {shlex.join(words)} \"$1\"\n")
        push.chmod(0o700)


def _fetch_inputs(s3: Any, url: str, inputs: Path) -> str | None:
    """Download the set at ``url`` unless ``inputs`` holds it; the setup command, if there is one."""
    bucket, prefix = split_url(url)
    wanted = prefix.rsplit("/", 1)[-1]
    mark = inputs / SET_MARK
    setup: str | None = None
    have = mark.read_text().strip() if mark.exists() else None
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
        for key in keys:
            name = key[len(prefix) + 1:]
            if name == SETUP_KEY:
                setup = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
            elif have != wanted and name and "/" not in name and not name.startswith("."):
                part = inputs / f".{name}.part"
                s3.download_file(bucket, key, str(part))
                os.replace(part, inputs / name)
    except FilesError:
        raise
    except Exception as exc:  # botocore's errors and OSError alike: the machine cannot work
        raise FilesError(f"[files] fetching the inputs from {url} failed: {_one_line(exc)}") from None
    if have != wanted:
        mark.write_text(wanted + "\n")
    return setup


def _run_setup(s3: Any, setup: str, root: Path, machine: str, files_to: str | None) -> None:
    done = subprocess.run(["/bin/sh", "-c", setup], cwd=root / "inputs", stdin=subprocess.DEVNULL,
                          capture_output=True, env={**os.environ, "BATS_MACHINE": machine})
    if done.returncode == 0:
        return
    said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
    message = f"[files] setup failed on {machine} (exit {done.returncode}): {said[-1] if said else 'no message'}"
    if files_to:
        bucket, prefix = split_url(files_to)
        try:  # the master reads this and gives the machine up, naming the setup
            s3.put_object(Bucket=bucket, Key=join_key(prefix, f"setup-failed/{machine}"), Body=message.encode())
        except Exception as exc:
            message += f" (and telling the master failed: {_one_line(exc)})"
    raise FilesError(message)


def push(files_to: str, folder: str, task: str, endpoint: str | None, region: str | None = None) -> None:
    """Upload ``DIR/outputs/TASK`` to ``RUN/outputs/TASK/`` and remove it here."""
    if not task.isdigit():
        raise FilesError(f"[files] push: expected a task id, got {task!r}")
    here = Path(folder) / "outputs" / task
    if not here.is_dir():
        return
    bucket, prefix = split_url(files_to)
    s3 = client(endpoint, region)
    for path in sorted(p for p in here.rglob("*") if p.is_file()):
        rel = path.relative_to(here).as_posix()
        try:
            s3.upload_file(str(path), bucket, join_key(prefix, f"outputs/{task}/{rel}"))
        except Exception as exc:
            raise FilesError(f"[files] uploading {rel} of task {task} failed: {_one_line(exc)}") from None
        path.unlink()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """``python -m bats.worker.s3files push --to URL --dir DIR ID`` (what ``DIR/push`` runs)."""
    p = argparse.ArgumentParser(prog="bats-worker-files", description="upload one task's [files] outputs to S3")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("push")
    up.add_argument("--to", required=True)
    up.add_argument("--dir", required=True)
    up.add_argument("--endpoint")
    up.add_argument("--region")
    up.add_argument("task")
    args = p.parse_args(argv)
    try:
        push(args.to, args.dir, args.task, args.endpoint, args.region)
    except (FilesError, ValueError) as exc:
        sys.stderr.write(f"bats: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
