#!/bin/sh
# Lays out the root filesystem of the aiperf image: the binary (stripped), the shared
# libraries it links (as ldd lists them), a passwd and group entry for the non-root user,
# and a world-writable /tmp. The Containerfile's build stage runs it; CI runs it on the
# binary it built and builds the Containerfile's final stage from the result.
#
#   container/rootfs.sh BINARY ROOT UID
set -eu
if [ $# -ne 3 ]; then
    echo "usage: $0 BINARY ROOT UID" >&2
    exit 2
fi
bin=$1 root=$2 uid=$3
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp"
if command -v strip >/dev/null; then
    strip -o "$root/usr/local/bin/aiperf" "$bin"
else
    cp "$bin" "$root/usr/local/bin/aiperf"
fi
# "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader's own line.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
    while read -r lib; do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
echo "aiperf:x:$uid:$uid:aiperf:/tmp:/nonexistent" > "$root/etc/passwd"
echo "aiperf:x:$uid:" > "$root/etc/group"
chmod 1777 "$root/tmp"
