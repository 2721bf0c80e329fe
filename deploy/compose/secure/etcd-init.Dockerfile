# The image of docker-compose.secure.yml's one-shot `etcd-init`: Yak's image (for
# yak.etcd_auth and the admin's bootstrap) with the etcdctl of the etcd image compose runs,
# so the client matches the server. Built by compose (`up --build`) after Yak's image, or by
# deploy/offline/compose-images.sh; no network needed.
#   docker build --build-arg ETCDCTL=/usr/bin/etcdctl --build-arg ETCD_IMAGE=yak-etcd:debian \
#       -f etcd-init.Dockerfile -t yak-etcd-init:latest deploy/compose/secure
ARG YAK_IMAGE=yak:latest
ARG ETCD_IMAGE=quay.io/coreos/etcd:v3.5.17
FROM ${ETCD_IMAGE} AS etcd

FROM ${YAK_IMAGE}
# etcd's image: /usr/local/bin/etcdctl (static); Debian's etcd-client: /usr/bin/etcdctl.
ARG ETCDCTL=/usr/local/bin/etcdctl
COPY --from=etcd ${ETCDCTL} /usr/local/bin/etcdctl
