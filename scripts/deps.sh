#!/usr/bin/env bash
# Installs what nicstack's build, tests and benchmarks need: Debian packages through apt-get when
# root (skipped with a note otherwise), Go modules through the module proxy.
set -euo pipefail
pkgs=(iperf3 jq iproute2 ethtool tcpdump tshark protobuf-compiler passt slirp4netns systemd qemu-system-x86 busybox-static nftables iputils-ping dpdk-dev librte-net-vhost23 librte-net-virtio23)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "deps: not root, not installing ${missing[*]} (tests that need them skip)"
  fi
fi
go mod download
