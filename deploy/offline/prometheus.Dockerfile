# Prometheus from Debian's package (2.42 on bookworm), for machines that reach no image
# registry: the compose file's monitoring profile (PROMETHEUS_IMAGE). Run like the official
# image: the entry point is the server, the compose file passes its flags, data in /prometheus.
#   docker build --network host -f deploy/offline/prometheus.Dockerfile -t yak-prometheus:debian deploy/offline
ARG BASE_IMAGE=yak-debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends prometheus wget \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus \
 && chown 65534:65534 /prometheus
# nobody, as in the official image.
USER 65534:65534
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
