"""``meta.properties``: the data folder's identity, and its ``directory.id`` (KIP-858), new
only when the folder starts empty (what tells an empty-disk restart apart, issue 21)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from yak_broker.server.meta_properties import (
    META_PROPERTIES_FILE,
    InconsistentDataDirError,
    check_meta_properties,
)


def test_the_folder_id_is_drawn_once_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    first = check_meta_properties(folder, "c", 1)
    assert len(first) == 16
    assert check_meta_properties(folder, "c", 1) == first
    assert f"directory.id={first}" in (folder / META_PROPERTIES_FILE).read_text()


def test_an_emptied_folder_gets_a_new_id(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    first = check_meta_properties(folder, "c", 1)
    shutil.rmtree(folder)
    assert check_meta_properties(folder, "c", 1) != first


def test_a_file_from_before_the_id_gets_one_and_keeps_its_identity(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / META_PROPERTIES_FILE).write_text("version=0\ncluster.id=c\nbroker.id=1\n")
    added = check_meta_properties(folder, "c", 1)
    assert added
    assert check_meta_properties(folder, "c", 1) == added
    assert "cluster.id=c\nbroker.id=1\n" in (folder / META_PROPERTIES_FILE).read_text()


def test_another_identity_is_refused(tmp_path: Path) -> None:
    check_meta_properties(tmp_path, "c", 1)
    with pytest.raises(InconsistentDataDirError):
        check_meta_properties(tmp_path, "c", 2)
