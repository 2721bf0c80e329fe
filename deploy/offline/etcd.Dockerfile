# etcd from Debian's etcd-server (3.4.23 on bookworm, a release etcd recommends), for machines
# that reach no image registry. Configured like quay.io/coreos/etcd: by ETCD_* variables.
#   docker build --network host -f deploy/offline/etcd.Dockerfile -t yak-etcd:debian deploy/offline
ARG BASE_IMAGE=yak-debian:bookworm
FROM ${BASE_IMAGE}
# The versions are the base's Debian release's: pinning them would break at each point release.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends etcd-server etcd-client \
 && rm -rf /var/lib/apt/lists/*
EXPOSE 2379 2380
CMD ["etcd"]
