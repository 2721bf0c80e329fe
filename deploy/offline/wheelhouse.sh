#!/bin/sh
# The wheelhouse deploy/docker/Dockerfile installs from (`pip install --no-index`), so that
# building the image needs no network: Yak's own wheel and a CPython 3.11 manylinux x86_64
# wheel of every dependency, whatever Python the host runs.
#
#   deploy/offline/wheelhouse.sh PYTHON [EXTRAS]   (make wheelhouse; EXTRAS e.g. "spark")
#
# PYTHON is the project's venv interpreter (it has pip). Versions are pinned to what that venv
# has installed, the versions the tests ran against, so two runs give the same wheelhouse;
# a dependency the venv lacks takes the newest release pyproject.toml allows.
set -eu

python="$1"
extras="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="$root/deploy/docker/wheels"

rm -rf "$dest"
mkdir -p "$dest"
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$dest" "$root"
# Beside the wheels (ignored by git, and by `pip install --no-index` in the image).
constraints="$dest/constraints.txt"
"$python" -m pip freeze --exclude-editable --all | grep -v '^-e ' | grep '==' >"$constraints" || true

requirement="$(ls "$dest"/yak-*.whl)"
# The services run from it: the `server` extra always, plus any others asked for.
requirement="$requirement[server${extras:+,$extras}]"
platforms=""
for tag in manylinux1 manylinux2010 manylinux2014 manylinux_2_17 manylinux_2_24 \
           manylinux_2_26 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 \
           manylinux_2_35 manylinux_2_36; do
    platforms="$platforms --platform ${tag}_x86_64"
done
# shellcheck disable=SC2086  # one word per flag
"$python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none $platforms \
    --constraint "$constraints" --dest "$dest" "$requirement" pip
rm -f "$constraints"
ls "$dest" | wc -l | xargs printf '%s wheels in deploy/docker/wheels\n'
