#!/usr/bin/env bash
# local-base.sh builds the image localhost/palm-node:20 without a container registry: Debian
# bookworm from the Debian mirror (mmdebstrap, minbase) plus this machine's Node.js 20 and npm,
# and the certificate authorities this machine added in /usr/local/share/ca-certificates (a
# TLS-inspecting egress proxy's, without which npm ci cannot reach its registry from the build).
# Then: podman build --format docker --build-arg NODE_IMAGE=localhost/palm-node:20 -t palm-api .
# Needs mmdebstrap and podman (apt-get install mmdebstrap podman), run as root. PODMAN overrides
# the podman command (e.g. PODMAN="podman --runtime runc").
set -euo pipefail
node_bin=$(command -v node)
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
case "$("$node_bin" --version)" in v20.* | v22.*) ;; *) echo "local-base: Node.js 20 or 22 needed" >&2 && exit 1 ;; esac
tar=$(mktemp --suffix=.tar)
trap 'rm -f "$tar"' EXIT
mmdebstrap --variant=minbase --include=ca-certificates,libstdc++6 \
  --customize-hook="copy-in '$node_bin' /usr/local/bin" \
  --customize-hook='mkdir -p "$1/usr/local/lib/node_modules"' \
  --customize-hook="copy-in '$npm_dir' /usr/local/lib/node_modules" \
  --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"' \
  --customize-hook='rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/lib/apt/lists/"*' \
  bookworm "$tar"
podman=${PODMAN:-podman}
$podman import --change 'CMD ["node"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$tar" localhost/palm-node:20-debian
# This machine's own certificate authorities, if any, on top (an image for local builds only).
cas=/usr/local/share/ca-certificates
if compgen -G "$cas/*.crt" >/dev/null; then
  $podman build --network host -t localhost/palm-node:20 -f - "$cas" <<'CONTAINERFILE'
FROM localhost/palm-node:20-debian
COPY *.crt /usr/local/share/ca-certificates/
RUN update-ca-certificates
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
CONTAINERFILE
else
  $podman tag localhost/palm-node:20-debian localhost/palm-node:20
fi
