"""JSON and JSON Lines I/O: errors that name the file and line, run-settings records."""

import json
import os

import pytest

from lwm.errors import RowFormatError, RunMismatchError
from lwm.jsonl import check_run_settings, iter_jsonl, read_json, write_atomic


def test_read_json_names_the_file_and_line(tmp_path):
    f = tmp_path / "manifest.json"
    f.write_text('{"a": 1,\n "b": }')
    with pytest.raises(RowFormatError, match=r"manifest\.json:2: not valid JSON \(Expecting value"):
        read_json(f)
    f.write_text("[1, 2]")
    with pytest.raises(RowFormatError, match="expected a JSON object, got list"):
        read_json(f)
    f.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RowFormatError, match="nested too deeply"):
        read_json(f)
    with pytest.raises(RowFormatError, match="missing.json:0: cannot read: No such file"):
        read_json(tmp_path / "missing.json")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(RowFormatError, match="not a regular file"):  # and does not block
        read_json(tmp_path / "fifo.json")
    f.write_text('{"ok": true}')
    assert read_json(f) == {"ok": True}


def test_iter_jsonl_line_numbers_and_truncated_tail(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"a": 1}\n\n{"a": 2}\n{"a": ')
    with pytest.raises(RowFormatError, match=r"rows\.jsonl:4: not valid JSON"):
        list(iter_jsonl(f))
    assert list(iter_jsonl(f, skip_truncated_tail=True)) == [(1, {"a": 1}), (3, {"a": 2})]
    f.write_text('{"a": 1}\n"text"\n')
    with pytest.raises(RowFormatError, match=r"rows\.jsonl:2: expected a JSON object, got str"):
        list(iter_jsonl(f))
    f.write_text('{"a": 1}\n{"a": "cut\n')  # json's own message ends in "at"
    with pytest.raises(RowFormatError) as e:
        list(iter_jsonl(f))
    assert str(e.value).endswith("rows.jsonl:2: not valid JSON (Unterminated string starting at column 7)")
    f.write_text('{"a": "\x01"}\n')
    with pytest.raises(RowFormatError, match=r"\(Invalid control character at column 8\)$"):
        list(iter_jsonl(f))


def test_check_run_settings_records_then_compares(tmp_path):
    path = tmp_path / "run" / "run.json"
    path.parent.mkdir()
    check_run_settings(path, {"model": "a", "lr": 1})
    assert json.loads(path.read_text()) == {"model": "a", "lr": 1}
    check_run_settings(path, {"model": "a", "lr": 1})  # the same settings: a resume
    with pytest.raises(RunMismatchError, match="lr: started with 1, now 2") as e:
        check_run_settings(path, {"model": "a", "lr": 2})
    assert e.value.out == path.parent and e.value.differences == {"lr": (1, 2)}
    # settings that are dicts name only the keys that differ; long lists, their first items
    path.write_text(json.dumps({"sampling": {"temperature": 0.0, "stop": ["</a>"]}, "heldout": None}))
    with pytest.raises(RunMismatchError) as e:
        check_run_settings(path, {"sampling": {"temperature": 0.5, "stop": ["</a>"]}, "heldout": list("abcdef")})
    assert "sampling.temperature: started with 0.0, now 0.5; heldout: started with None, now ['a', 'b', 'c', … " \
           "(6 in all)]" in str(e.value) and "stop" not in str(e.value)
    path.write_text("{")
    with pytest.raises(RowFormatError, match=r"run\.json:1: not valid JSON"):
        check_run_settings(path, {"model": "a"})


def test_atomic_writes_never_replace_what_is_not_a_regular_file(tmp_path):
    # os.replace would swap a FIFO, a directory or, as root, /dev/null itself for a plain file
    fifo, folder = tmp_path / "fifo", tmp_path / "folder"
    os.mkfifo(fifo)
    folder.mkdir()
    for path in (fifo, folder):
        with pytest.raises(FileExistsError, match="exists and is not a regular file; it is not replaced"):
            write_atomic(path, "x\n")
    assert fifo.is_fifo() and folder.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "folder"]
    write_atomic(tmp_path / "new" / "file.txt", "x\n")  # a new file, and its folder, are fine
    assert (tmp_path / "new" / "file.txt").read_text() == "x\n"
