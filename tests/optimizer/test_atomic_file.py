"""write_atomically: a file holds its old contents or all of the new ones, never a part."""

from __future__ import annotations

import os

import pytest

from seedcast.optimizer.atomic_file import write_atomically


def test_the_new_text_replaces_the_old_whole(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("old")
    write_atomically(target, "new\n" * 1000)
    assert target.read_text() == "new\n" * 1000
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left behind


def test_a_write_that_fails_leaves_the_old_contents(tmp_path, monkeypatch):
    target = tmp_path / "claims.json"
    target.write_text("old")

    def power_cut(descriptor):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", power_cut)
    with pytest.raises(OSError, match="disk gone"):
        write_atomically(target, "new", durable=True)
    assert target.read_text() == "old"
