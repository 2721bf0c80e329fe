"""The console's front-end files, vendored from the npm registry (no CDN, no build step).

``static/vendor/vendor.json`` records, per npm package, the version, the registry's integrity
hash of the tarball and the SHA-256 of every file copied out of it. The tests check the files
on disk against it (offline); ``python -m yak_console.vendor`` fetches the pinned tarballs
with ``npm pack``, checks their integrity and copies the files again (``--check`` only
compares, which needs the npm registry too).
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["VENDOR_DIR", "VendoredPackage", "load_manifest", "verify_files"]

VENDOR_DIR = Path(__file__).parent / "static" / "vendor"
_MANIFEST = VENDOR_DIR / "vendor.json"


@dataclass(frozen=True, slots=True)
class VendoredPackage:
    """One npm package: ``files`` maps a path inside its tarball to (our file name, SHA-256)."""

    name: str
    version: str
    integrity: str
    files: dict[str, tuple[str, str]]


def load_manifest(path: Path = _MANIFEST) -> list[VendoredPackage]:
    raw = json.loads(path.read_text())
    return [
        VendoredPackage(
            name=entry["name"],
            version=entry["version"],
            integrity=entry["integrity"],
            files={src: (f["file"], f["sha256"]) for src, f in entry["files"].items()},
        )
        for entry in raw["packages"]
    ]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify_files(folder: Path = VENDOR_DIR) -> list[str]:
    """Problems with the vendored files (missing, changed); empty when all match."""
    problems = []
    for package in load_manifest(folder / "vendor.json"):
        for name, digest in package.files.values():
            path = folder / name
            if not path.is_file():
                problems.append(f"{name} ({package.name}@{package.version}) is missing")
            elif _sha256(path) != digest:
                problems.append(f"{name} differs from {package.name}@{package.version}")
    return problems


def _npm_pack(spec: str, into: Path) -> tuple[Path, str]:
    """Download ``spec`` (``name@version``) with npm; its tarball and registry integrity."""
    out = subprocess.run(
        ["npm", "pack", spec, "--json", "--pack-destination", str(into)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (info,) = json.loads(out)
    return into / info["filename"], info["integrity"]


def _integrity_of(tarball: Path) -> str:
    digest = hashlib.sha512(tarball.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def refresh(check_only: bool = False) -> list[str]:
    """Fetch every pinned package, check its integrity, and copy (or compare) its files."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for package in load_manifest():
            tarball, integrity = _npm_pack(f"{package.name}@{package.version}", Path(tmp))
            if integrity != package.integrity or _integrity_of(tarball) != package.integrity:
                problems.append(f"{package.name}@{package.version}: integrity mismatch")
                continue
            with tarfile.open(tarball) as archive:
                for src, (name, digest) in package.files.items():
                    member = archive.extractfile(f"package/{src}")
                    if member is None:
                        problems.append(f"{package.name}: {src} not in the tarball")
                        continue
                    data = member.read()
                    if hashlib.sha256(data).hexdigest() != digest:
                        problems.append(f"{package.name}: {src} does not match the manifest")
                    elif not check_only:
                        (VENDOR_DIR / name).write_bytes(data)
    return problems


def main() -> None:
    problems = refresh(check_only="--check" in sys.argv[1:])
    for problem in problems:
        print(problem, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
