#!/bin/sh
# The inner dockerd's default runtime: runc, minus what needs CAP_SYS_RESOURCE.
# The machine's capability bounding set lacks CAP_SYS_RESOURCE, so a privileged container asking for it
# fails with "unable to apply caps", and a negative oom_score_adj (pod sandboxes ask for -998) cannot be
# set ("can't get final child's PID from pipe: EOF"). Strip the capability and clamp the score at 0 in the
# bundle's config.json (create/run) and in the process JSON of `runc exec --process`, then hand over to
# the real runc with the same arguments.
strip() {
    [ -f "$1" ] || return 0
    sed -i -e 's/"CAP_SYS_RESOURCE" *, *//g' -e 's/ *, *"CAP_SYS_RESOURCE"//g' -e 's/"CAP_SYS_RESOURCE"//g' \
        -e 's/"oomScoreAdj": *-[0-9]*/"oomScoreAdj":0/g' "$1"
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
