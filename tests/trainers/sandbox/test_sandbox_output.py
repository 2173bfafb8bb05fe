"""Reading worker pipes: the output cap and its marker, and JSON control lines split across reads."""

from __future__ import annotations

import os
import time

from trainers.sandbox.output import Capture, LineReader, classify


def test_capture_keeps_the_head_and_counts_the_rest() -> None:
    capture = Capture(cap=5)
    capture.feed(b"abc")
    capture.feed(b"defgh")
    assert capture.cut
    assert capture.text() == "abcde\n[output truncated: 3 more bytes]"


def test_capture_under_the_cap_is_verbatim() -> None:
    capture = Capture(cap=10)
    capture.feed("héllo".encode())
    assert (capture.cut, capture.text()) == (False, "héllo")


def test_line_reader_joins_partial_writes_and_keeps_the_rest() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b'{"a": 1}\n{"b"')
    reader = LineReader(read_end)
    assert reader.read_line(time.monotonic() + 1) == b'{"a": 1}'
    os.write(write_end, b": 2}\n")
    assert reader.read_line(time.monotonic() + 1) == b'{"b": 2}'
    os.close(write_end)
    assert reader.read_line(time.monotonic() + 1) == b""
    os.close(read_end)


def test_classify_prefers_the_wall_clock_then_the_init_report() -> None:
    assert classify({"status": {"status": "ok"}}, True, 10) == (
        "timeout",
        "TimeoutError: wall time limit exceeded",
    )
    assert classify({"status": {"status": "error", "error_line": "E"}}, False, 10) == ("error", "E")


def test_classify_reads_the_wait_status_when_the_init_died() -> None:
    sigxcpu, sigsegv = 24, 11  # a wait status of a signalled process is the signal number
    assert classify({"exit": {"exit": sigxcpu, "cpu_s": 2.0}}, False, 2) == (
        "timeout",
        "TimeoutError: CPU time limit exceeded",
    )
    assert classify({"exit": {"exit": sigsegv, "cpu_s": 0.1}}, False, 2) == (
        "killed",
        "killed by signal SIGSEGV",
    )
