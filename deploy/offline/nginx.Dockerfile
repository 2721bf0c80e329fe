# nginx from Debian's packages, for machines that reach no image registry: the compose file's
# load balancer (NGINX_IMAGE). Run like the official image: the configuration is mounted at
# /etc/nginx/nginx.conf. Debian builds the stream module (TCP pass-through, the secure
# override's nginx.secure.conf) as a loadable module: the command loads it, so either
# configuration works as it is. wget and nc: the compose health checks.
#   docker build --network host -f deploy/offline/nginx.Dockerfile -t yak-nginx:debian deploy/offline
ARG BASE_IMAGE=yak-debian:bookworm
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx libnginx-mod-stream wget netcat-openbsd \
 && rm -rf /var/lib/apt/lists/* \
 && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 9430
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "load_module /usr/lib/nginx/modules/ngx_stream_module.so; daemon off;"]
