#!/bin/sh
# Every image deploy/compose/ runs, built on this machine with no image registry (make
# compose-images): the Debian base (debootstrap, deploy/offline/debian-base.sh), Yak on it from
# the wheelhouse (deploy/docker/Dockerfile; `make wheelhouse` first), and etcd, nginx and
# Prometheus from Debian's packages, and the secure override's etcd-init (Yak's image with
# etcd's etcdctl). Grafana and the Spark profile have no image here.
#
#   deploy/offline/compose-images.sh            needs root (debootstrap), docker and a daemon
#
# The tags are what deploy/offline/offline.env names for the compose file. The Yak image is
# built with no network at all; the others install Debian packages through the host's network
# (--network host: the build reaches the mirror as apt on the host does).
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
base="${YAK_BASE_IMAGE:-yak-debian:bookworm}"

step() {
    started="$(date +%s)"
    "$@"
    echo "  $(($(date +%s) - started)) s"
}
build() {
    # -q: the image id only (the legacy builder's log is long); the log is shown on failure.
    log="$(mktemp "${TMPDIR:-/tmp}/yak-image-build.XXXXXX")"
    if ! docker build "$@" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

ls "$root"/deploy/docker/wheels/yak-*.whl >/dev/null 2>&1 || {
    echo "no wheelhouse in deploy/docker/wheels: run \`make wheelhouse\` first" >&2
    exit 1
}
echo "base image $base"
step sh "$here/debian-base.sh" "$base"
echo "${YAK_IMAGE:-yak:latest} (deploy/docker/Dockerfile, no network)"
step build --network none --build-arg "BASE_IMAGE=$base" --target runtime \
    -t "${YAK_IMAGE:-yak:latest}" "$root/deploy/docker"
for name in etcd nginx prometheus; do
    echo "yak-$name:debian (deploy/offline/$name.Dockerfile)"
    step build --network host --build-arg "BASE_IMAGE=$base" -f "$here/$name.Dockerfile" \
        -t "yak-$name:debian" "$here"
done
# The secure override's etcd-init: Yak's image with the etcd image's etcdctl (Debian's path).
echo "yak-etcd-init:latest (deploy/compose/secure/etcd-init.Dockerfile, no network)"
step build --network none --build-arg "YAK_IMAGE=${YAK_IMAGE:-yak:latest}" \
    --build-arg ETCD_IMAGE=yak-etcd:debian --build-arg ETCDCTL=/usr/bin/etcdctl \
    -f "$root/deploy/compose/secure/etcd-init.Dockerfile" -t yak-etcd-init:latest \
    "$root/deploy/compose/secure"
