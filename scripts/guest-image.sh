#!/usr/bin/env bash
# guest-image.sh [MODULE...]: builds the test guest that QEMU boots in nicstack's tests and
# benchmarks, and prints the folder that holds it (vmlinuz, initrd.img). The guest is Debian's
# cloud kernel (apt-get download, unpacked with dpkg-deb -x: nothing is installed), a static
# busybox, the kernel's virtio-net modules (plus any MODULE named, a path under kernel/ without
# .ko, loaded after them in order) and a static `nicstack` for iperf. Its init loads the
# modules, takes a DHCP lease on eth0, runs `nicstack iperf $iperf` (iperf="..." on the kernel
# command line) or `sh -c "$run"`, prints markers (NICSTACK-GUEST: ...) and powers off.
#
# The image is cached under ${XDG_CACHE_HOME:-~/.cache}/nicstack/guest/HASH, HASH over every
# input (kernel package and version, busybox, nicstack binary, this script, the modules), so a
# changed input builds a new one; images unused for a week are removed. One build at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
script="$PWD/scripts/guest-image.sh"
# --components: the image also holds the seed topology's components (ipxe_nic, nic_router,
# vm) built static, the scenarios of deploy/ in /etc/nicstack, and guest-scenario (below):
# for scenarios that run inside the guest.
components=no
if [ "${1:-}" = --components ]; then components=yes; shift; fi
# --netfilter: the image also holds the host's nft and ethtool with the shared libraries they
# load, and guest-linux-router (scripts/guest-linux-router.sh): for the Linux reference of
# those scenarios (Linux's driver, forwarding and NAT in the guest); its modules come as
# MODULEs.
netfilter=no
if [ "${1:-}" = --netfilter ]; then netfilter=yes; shift; fi
# The kernel flavour: cloud-amd64 (small, quick to boot), or amd64, whose modules include
# drivers for emulated hardware the cloud kernel leaves out (e1000e).
flavour=${NICSTACK_GUEST_KERNEL:-cloud-amd64}
cache="${XDG_CACHE_HOME:-$HOME/.cache}/nicstack/guest"
mkdir -p "$cache/debs"
exec 9>"$cache/.lock"
flock 9

# virtio_ring before virtio, then the PCI transport, then the net driver and what it needs.
modules=(
  drivers/virtio/virtio_ring drivers/virtio/virtio
  drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci
  net/core/failover drivers/net/net_failover drivers/net/virtio_net
  "$@"
)

busybox=/bin/busybox
case "$(LC_ALL=C ldd "$busybox" 2>&1)" in
  *"not a dynamic"*) ;;
  *) echo "guest-image: $busybox is not a static busybox (apt-get install busybox-static)" >&2; exit 1 ;;
esac

# The kernel package the meta package points at; a cached .deb serves when apt cannot answer.
kpkg=$(apt-cache depends "linux-image-$flavour" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
if [ -z "$kpkg" ]; then
  deb=$(ls -t "$cache"/debs/linux-image-*[0-9]-"$flavour"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { echo "guest-image: apt knows no linux-image-$flavour and no .deb is cached" >&2; exit 1; }
else
  kver=$(apt-cache policy "$kpkg" | awk '/Candidate:/{print $2}')
  deb=$(ls "$cache"/debs/"${kpkg}_${kver/:/%3a}"_amd64.deb 2>/dev/null || true)
  if [ -z "$deb" ]; then
    (cd "$cache/debs" && apt-get download -q "$kpkg" >/dev/null 2>&1) ||
      { echo "guest-image: apt-get download $kpkg failed" >&2; exit 1; }
    deb=$(ls -t "$cache"/debs/"${kpkg}"_*_amd64.deb | head -1)
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/nicstack-guest.XXXXXX")
trap 'rm -rf "$work" ${out:+"$out.tmp"}' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$work/nicstack" ./cmd/nicstack
inputs=("$busybox" "$work/nicstack" "$script")
if [ $components = yes ]; then
  mkdir -p "$work/components"
  CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$work/components/" ./components/ipxe_nic ./components/nic_router ./components/vm
  inputs+=("$work"/components/* deploy/*.hid)
fi
if [ $netfilter = yes ]; then
  tools=$(command -v nft ethtool) || { echo "guest-image: no nft or ethtool here (apt-get install nftables ethtool)" >&2; exit 1; }
  toollibs=$(LC_ALL=C ldd $tools | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\// && $i !~ /:$/) print $i}' | sort -u)
  inputs+=($tools $toollibs scripts/guest-linux-router.sh)
fi

hash=$( { basename "$deb"; sha256sum "${inputs[@]}" | cut -d' ' -f1; echo "${modules[*]}"; } |
  sha256sum | cut -c1-16)
out="$cache/$hash"
if [ -f "$out/initrd.img" ] && [ -f "$out/vmlinuz" ]; then
  touch "$out"
  echo "$out"
  exit 0
fi

dpkg-deb -x "$deb" "$work/kernel"
kdir=$(ls -d "$work"/kernel/lib/modules/*/)
root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,etc,tmp,lib/modules}
cp "$busybox" "$root/bin/busybox"
cp "$work/nicstack" "$root/bin/nicstack"
if [ $components = yes ]; then
  cp "$work"/components/* "$root/bin/"
  mkdir -p "$root/etc/nicstack"
  cp deploy/*.hid "$root/etc/nicstack/"
  # guest-scenario SCENARIO START DONE SECONDS [PCI...]: gives each PCI device to vfio-pci,
  # runs the scenario until a line of its output matches DONE or SECONDS pass, and stops it
  # (SIGTERM: the supervisor removes what it made); it fails unless DONE came. When a line
  # matches START and when DONE comes it prints `nicstack status --json` on one line as the
  # markers "status-start" and "status", and the guest's CPU times (/proc/stat's first line)
  # as "stat-start" and "stat" (a measurement's two ends).
  cat >"$root/bin/guest-scenario" <<'EOF'
#!/bin/busybox sh
scenario=$1 start=$2 done=$3 seconds=$4
shift 4
for pci in "$@"; do
  echo vfio-pci >"/sys/bus/pci/devices/$pci/driver_override"
  [ -e "/sys/bus/pci/devices/$pci/driver" ] && echo "$pci" >"/sys/bus/pci/devices/$pci/driver/unbind"
  echo "$pci" >/sys/bus/pci/drivers_probe
done
# The log exists before either starts: a tail that opens it first would give up on it.
: >/tmp/run.log
nicstack run --watch 0 "$scenario" >>/tmp/run.log 2>&1 &
run=$!
tail -f /tmp/run.log &
tailer=$!
rc=1 started=no
for i in $(seq $((seconds * 10))); do
  if [ $started = no ] && grep -q "$start" /tmp/run.log; then
    started=yes
    echo "NICSTACK-GUEST: status-start $(nicstack status --json | tr -d '\n')"
    echo "NICSTACK-GUEST: stat-start $(head -1 /proc/stat)"
  fi
  if grep -q "$done" /tmp/run.log; then rc=0; break; fi
  usleep 100000
done
echo "NICSTACK-GUEST: status $(nicstack status --json | tr -d '\n')"
echo "NICSTACK-GUEST: stat $(head -1 /proc/stat)"
kill -TERM $run
wait $run
sleep 1
kill $tailer
exit $rc
EOF
  chmod 755 "$root/bin/guest-scenario"
fi
if [ $netfilter = yes ]; then
  cp $tools "$root/bin/"
  for lib in $toollibs; do mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; done
  cp scripts/guest-linux-router.sh "$root/bin/guest-linux-router"
fi
: >"$root/etc/modules"
for m in "${modules[@]}"; do
  name=$(basename "$m")
  if [ -f "$kdir/kernel/$m.ko" ]; then cp "$kdir/kernel/$m.ko" "$root/lib/modules/$name.ko"
  elif [ -f "$kdir/kernel/$m.ko.xz" ]; then xz -dc "$kdir/kernel/$m.ko.xz" >"$root/lib/modules/$name.ko"
  elif [ -f "$kdir/kernel/$m.ko.zst" ]; then zstd -qdc "$kdir/kernel/$m.ko.zst" >"$root/lib/modules/$name.ko"
  else echo "guest-image: module $m is not in $(basename "$deb")" >&2; exit 1
  fi
  echo "$name" >>"$root/etc/modules"
done

cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /etc/modules); do
  insmod "/lib/modules/$m.ko" || echo "NICSTACK-GUEST: insmod $m failed"
done
ip link set lo up
ip link set eth0 up || echo "NICSTACK-GUEST: no eth0"
if [ "$dhcp" = no ]; then
  :
elif udhcpc -i eth0 -s /etc/udhcpc.script -n -q -f -t 20 -T 1 -A 1 >/dev/null 2>&1; then
  echo "NICSTACK-GUEST: lease $(ip -4 -o addr show eth0 | awk '{print $4}') via $(ip route | awk '/default/{print $3}')"
else
  echo "NICSTACK-GUEST: no lease"
fi
rc=0
if [ -n "$iperf" ]; then
  nicstack iperf $iperf; rc=$?
elif [ -n "$run" ]; then
  sh -c "$run"; rc=$?
fi
echo "NICSTACK-GUEST: exit $rc"
# poweroff -f does not wait for the serial console to send what the tty still holds: under
# load the last lines, this marker among them, were lost once. A second is ample to drain it.
sleep 1
poweroff -f
EOF
cat >"$root/etc/udhcpc.script" <<'EOF'
#!/bin/sh
case "$1" in
bound|renew)
  ip addr flush dev "$interface"
  ip addr add "$ip/${mask:-24}" dev "$interface"
  [ -n "$router" ] && ip route add default via "${router%% *}" dev "$interface"
  ;;
esac
exit 0
EOF
chmod 755 "$root/init" "$root/etc/udhcpc.script"

mkdir -p "$out.tmp"
(cd "$root" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$out.tmp/initrd.img"
cp "$work"/kernel/boot/vmlinuz-* "$out.tmp/vmlinuz"
rm -rf "$out"
mv "$out.tmp" "$out"
find "$cache" -mindepth 1 -maxdepth 1 -type d -name '????????????????' -mtime +7 -exec rm -rf {} +
find "$cache/debs" -name '*.deb' -mtime +30 -delete
echo "$out"
