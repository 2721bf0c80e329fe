#!/bin/sh
# The base image for machines that reach no image registry: Debian's minbase with Python,
# made with debootstrap from the mirror apt already uses, then `docker import`ed.
#
#   deploy/offline/debian-base.sh [TAG]         (default yak-debian:bookworm; root, debootstrap)
#
# Every offline image starts from it: Yak's (deploy/docker/Dockerfile, BASE_IMAGE=TAG) and the
# etcd, nginx and Prometheus images (deploy/offline/*.Dockerfile), which add Debian packages.
# Python comes from Debian (3.11 on bookworm): the wheelhouse the Yak image installs from is
# built for that Python (deploy/offline/wheelhouse.sh). Same mirror, suite and package list
# give the same packages; the image is made again only when the tag is missing.
set -eu

tag="${1:-yak-debian:bookworm}"
suite="${YAK_DEBIAN_SUITE:-bookworm}"
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag: present"
    exit 0
fi

# The mirror of apt's own sources (deb822 or one-line), else Debian's.
mirror="${YAK_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
    mirror="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/*$/\1/p' | head -n 1)"
fi
if [ -z "$mirror" ]; then
    mirror="$(cat /etc/apt/sources.list 2>/dev/null | sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\/debian\)\/*[[:space:]].*/\2/p' | head -n 1)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

work="$(mktemp -d "${TMPDIR:-/tmp}/yak-debian-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT INT TERM
root="$work/rootfs"
echo "debootstrap $suite from $mirror"
# python3 is all Yak needs from Debian; the wheels bring everything else.
debootstrap --variant=minbase --include=python3 "$suite" "$root" "$mirror" >"$work/log" 2>&1 || {
    tail -n 30 "$work/log" >&2
    exit 1
}
# Nothing the image needs at run time: downloaded packages, package lists, docs, locales.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* \
       "$root"/var/log/*.log "$root"/var/cache/debconf/*-old
# Packages installed later in a container never start services.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
# The mirror the image's apt uses for the packages the other images add.
echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
tar --numeric-owner -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/sh"]' \
    - "$tag" >/dev/null
echo "$tag: built"
