#!/bin/sh
# Builds the Containerfile's final stage offline, FROM scratch, from a binary already
# built (registries' base images cannot be pulled here), lints the Containerfile with
# hadolint, reports the image's size, and runs the image's own binary on its own root
# filesystem (chroot: containers cannot be run on these machines) for `--version` and a
# request to its mock server.
#
#   .ci/image.sh BINARY HADOLINT
set -eu
bin=$1 hadolint=$2
"$hadolint" Containerfile
uid=$(sed -n 's/^USER \([0-9]*\):.*/\1/p' Containerfile)
work=$(mktemp -d)
trap 'podman $store rmi -f aiperf:ci >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
store="--storage-driver vfs --root $work/storage --runroot $work/run"
container/rootfs.sh "$bin" "$work/context/rootfs" "$uid"
# The final stage as written, copying the root filesystem from the context instead of
# from the build stage.
sed -n '/^FROM scratch/,$p' Containerfile |
    sed 's|^COPY --from=build /rootfs/ /$|COPY rootfs/ /|' > "$work/context/Containerfile"
grep -q '^COPY rootfs/ /$' "$work/context/Containerfile" || {
    echo "image: the final stage no longer copies /rootfs/ from the build stage" >&2
    exit 1
}
# shellcheck disable=SC2086
podman $store build --quiet --tag aiperf:ci "$work/context"
# shellcheck disable=SC2086
podman $store image inspect aiperf:ci \
    --format 'image aiperf:ci: {{.Size}} bytes, user {{.Config.User}}, entrypoint {{.Config.Entrypoint}}'
# shellcheck disable=SC2086
mnt=$(podman $store image mount aiperf:ci)
chroot --userspec="$uid:$uid" "$mnt" /usr/local/bin/aiperf --version
chroot --userspec="$uid:$uid" "$mnt" /usr/local/bin/aiperf mock-server --port 18999 --fast &
server=$!
for _ in $(seq 50); do
    if curl -sf http://127.0.0.1:18999/v1/models >/dev/null; then break; fi
    sleep 0.1
done
curl -sf http://127.0.0.1:18999/v1/models
echo
kill "$server"
# shellcheck disable=SC2086
podman $store image unmount aiperf:ci >/dev/null
