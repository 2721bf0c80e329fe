"""The cluster secret: where it is read from, what is refused, how it is compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from yak.security.cluster_secret import (
    MIN_SECRET_LENGTH,
    load_cluster_secret,
    new_cluster_secret,
    secret_matches,
)

SECRET = "s3cret-" + "x" * 20


def test_no_variable_means_no_secret() -> None:
    assert load_cluster_secret({}) is None
    assert load_cluster_secret({"YAK_CLUSTER_SECRET": ""}) is None


def test_the_secret_comes_from_the_variable_or_a_file(tmp_path: Path) -> None:
    assert load_cluster_secret({"YAK_CLUSTER_SECRET": SECRET}) == SECRET
    path = tmp_path / "secret"
    path.write_text(f"  {SECRET}\n")
    assert load_cluster_secret({"YAK_CLUSTER_SECRET_FILE": str(path)}) == SECRET


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"YAK_CLUSTER_SECRET": "short"}, "at least"),
        ({"YAK_CLUSTER_SECRET": SECRET + "\n"}, "printable"),
        ({"YAK_CLUSTER_SECRET": SECRET + "é"}, "printable"),
        ({"YAK_CLUSTER_SECRET": SECRET, "YAK_CLUSTER_SECRET_FILE": "/x"}, "not both"),
        ({"YAK_CLUSTER_SECRET_FILE": "/nonexistent/secret"}, "cannot read"),
    ],
)
def test_unusable_secrets_are_refused(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        load_cluster_secret(env)


def test_new_secrets_are_long_random_and_loadable() -> None:
    first, second = new_cluster_secret(), new_cluster_secret()
    assert first != second
    assert len(first) >= MIN_SECRET_LENGTH
    assert load_cluster_secret({"YAK_CLUSTER_SECRET": first}) == first


def test_secret_matches_only_the_exact_value() -> None:
    assert secret_matches(b"abc", b"abc")
    assert not secret_matches(b"abc", b"abd")
    assert not secret_matches(b"abc", b"ab")
    assert not secret_matches(b"abc", None)
