#!/bin/sh
# The image's one entry point. The first argument names the service; each gets the port of
# `yak up`'s layout (base 9400) unless YAK_PORT says otherwise, and binds YAK_HOST (0.0.0.0
# in the image). Anything else runs as a command (`yak topics list`, `python`, `sh`).
#
# YAK_CONSOLE_API_KEY_FILE: the console's API key read from a file (compose's secure override
# writes the bootstrap admin's key into its secrets volume), since compose cannot put a
# file's content into an environment variable.
set -eu

if [ -n "${YAK_CONSOLE_API_KEY_FILE:-}" ] && [ -z "${YAK_CONSOLE_API_KEY:-}" ]; then
    YAK_CONSOLE_API_KEY="$(cat "$YAK_CONSOLE_API_KEY_FILE")"
    export YAK_CONSOLE_API_KEY
fi

service="${1:-broker}"
[ "$#" -gt 0 ] && shift

case "$service" in
    coordinator | yak-coordinator) exec yak-coordinator --port "${YAK_PORT:-9410}" "$@" ;;
    broker | yak-broker) exec yak-broker --port "${YAK_PORT:-9420}" "$@" ;;
    rest-proxy | yak-rest-proxy) exec yak-rest-proxy --port "${YAK_PORT:-9430}" "$@" ;;
    console | yak-console) exec yak-console --port "${YAK_PORT:-9440}" "$@" ;;
    *) exec "$service" "$@" ;;
esac
