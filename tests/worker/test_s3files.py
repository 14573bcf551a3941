"""The worker's side of ``[files]`` through S3 (bats.worker.s3files) against a small HTTP server that
answers as S3 does when it refuses a signed URL: the error is one line, names the machine, says when
the URLs expired if that is why, and never shows a URL (a bearer credential). The whole path against
moto's S3 is in tests/provisioners/test_ec2_files.py."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bats.worker import s3files

EXPIRED = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
REFUSED = (b"<Error><Code>AccessDenied</Code><Message>Invalid according to Policy: Policy Condition failed: "
           b"[\"starts-with\", \"$key\", \"p/r/outputs/\"]</Message></Error>")


class Refusing(http.server.BaseHTTPRequestHandler):
    body = EXPIRED
    seen: list[str] = []

    def _refuse(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.seen.append(self.command)
        self.send_response(403)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_PUT = do_POST = _refuse

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Refusing.body, Refusing.seen = EXPIRED, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def grant(url: str, expires: float) -> str:
    signed = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=0123abcd"
    return json.dumps({"expires": expires, "outputs": "p/r/outputs/", "manifest": f"{url}/b/p/r/grants/m1.json{signed}",
                       "failed": f"{url}/b/p/r/setup-failed/m1{signed}",
                       "post": {"url": f"{url}/b", "fields": {"policy": "e30=", "x-amz-signature": "0123abcd"}}})


def test_an_expired_manifest_url_is_one_line_naming_the_machine(server, tmp_path):
    with pytest.raises(s3files.FilesError) as caught:
        s3files.prepare("s3://b/p/inputs/SET", "s3://b/p/r", str(tmp_path), "m1", grant(server, time.time() - 60))
    message = str(caught.value)
    assert "\n" not in message and "Signature" not in message and server not in message
    assert message.startswith("[files] the signed S3 URLs of machine m1 expired at ")
    assert "files_url_expiry" in message


def test_an_expired_upload_fails_the_push_in_one_line(server, tmp_path, capsys):
    s3files.prepare(None, "s3://b/p/r", str(tmp_path), "m1", grant(server, time.time() + 3600))
    assert (tmp_path / "push").exists() and Refusing.seen == []  # nothing fetched: no inputs asked for
    (tmp_path / "outputs" / "3").mkdir()
    (tmp_path / "outputs" / "3" / "out-3.txt").write_text("x\n")
    assert s3files.main(["push", "--dir", str(tmp_path), "3"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Signature" not in err and server not in err, err
    assert "the signed S3 URLs of machine m1 expired" in err and "out-3.txt of task 3" in err
    assert (tmp_path / "outputs" / "3" / "out-3.txt").exists()  # kept: it was not uploaded


def test_a_refused_upload_says_what_s3_said(server, tmp_path, capsys):
    Refusing.body = REFUSED
    s3files.prepare(None, "s3://b/p/r", str(tmp_path), "m1", grant(server, time.time() + 3600))
    (tmp_path / "outputs" / "4").mkdir()
    (tmp_path / "outputs" / "4" / "out-4.txt").write_text("x\n")
    assert s3files.main(["push", "--dir", str(tmp_path), "4"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Signature" not in err, err
    assert "failed on m1: HTTP 403 AccessDenied: Invalid according to Policy" in err
    assert Refusing.seen == ["POST"]


def test_a_refused_manifest_keeps_the_machine_out_saying_why(server, tmp_path):
    Refusing.body = REFUSED
    with pytest.raises(s3files.FilesError, match=r"^\[files\] fetching the \[files\] manifest of s3://b/p/inputs/SET "
                                                 r"failed on m1: HTTP 403 AccessDenied"):
        s3files.prepare("s3://b/p/inputs/SET", None, str(tmp_path), "m1", grant(server, time.time() + 3600))


@pytest.mark.parametrize("text", ["", "not json", '{"expires": "soon"}', '{"expires": 1, "post": "x"}'])
def test_a_missing_or_damaged_grant_is_one_line(tmp_path, text):
    with pytest.raises(s3files.FilesError) as caught:
        s3files.prepare("s3://b/p/inputs/SET", "s3://b/p/r", str(tmp_path), "m1", text)
    assert "\n" not in str(caught.value) and "m1" in str(caught.value) and "BATS_FILES_GRANT" in str(caught.value)


def test_the_grant_file_is_private(server, tmp_path):
    s3files.prepare(None, "s3://b/p/r", str(tmp_path), "m1", grant(server, time.time() + 3600))
    assert (Path(tmp_path) / ".grant").stat().st_mode & 0o777 == 0o600
