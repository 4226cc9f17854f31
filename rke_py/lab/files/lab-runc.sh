#!/bin/sh
# The inner dockerd's default runtime: runc, minus CAP_SYS_RESOURCE.
# The machine's capability bounding set lacks CAP_SYS_RESOURCE, so a privileged container asking for it
# fails with "unable to apply caps". Strip it from the bundle's config.json (create/run) and from the
# process JSON of `runc exec --process`, then hand over to the real runc with the same arguments.
strip() {
    [ -f "$1" ] || return 0
    sed -i -e 's/"CAP_SYS_RESOURCE" *, *//g' -e 's/ *, *"CAP_SYS_RESOURCE"//g' -e 's/"CAP_SYS_RESOURCE"//g' "$1"
}
prev=""
for arg in "$@"; do
    case "$prev" in
        --bundle|-b) strip "$arg/config.json" ;;
        --process|-p) strip "$arg" ;;
    esac
    case "$arg" in
        --bundle=*) strip "${arg#--bundle=}/config.json" ;;
        --process=*) strip "${arg#--process=}" ;;
    esac
    prev="$arg"
done
exec /usr/sbin/runc "$@"
