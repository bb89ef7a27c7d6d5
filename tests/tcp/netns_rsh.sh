#!/usr/bin/env bash
# chorusrun's remote shell for tests/tcp/netns_hosts.sh: a "host" is a
# network namespace, and reaching it is `ip netns exec`.
host=$1
shift
# NETNS_RSH_HOSTNAME=1 (inherited from the test through chorusrun): the
# process also gets a UTS namespace of its own named after the host, so
# ranks on different "hosts" see different hostnames (the host layout).
if [ "${NETNS_RSH_HOSTNAME:-0}" = 1 ]; then
  exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
fi
exec ip netns exec "$host" "$@"
