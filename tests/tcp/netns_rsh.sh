#!/usr/bin/env bash
# chorusrun's remote shell for tests/tcp/netns_hosts.sh: a "host" is a
# network namespace, and reaching it is `ip netns exec`.
host=$1
shift
exec ip netns exec "$host" "$@"
