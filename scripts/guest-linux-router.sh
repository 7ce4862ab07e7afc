#!/bin/busybox sh
# guest-linux-router UPLINK ROUTER VM IPERF_ARGS...: the reference of a scenario that runs
# ipxe_nic, nic_router and a vm inside the QEMU guest, with Linux in their places: Linux's
# e1000e drives eth0, which gets the router's uplink address UPLINK (e.g. 198.18.0.1/24); the
# vm is a network namespace behind a veth pair, its end "eth0" with address VM on ROUTER's
# subnet (the router's end "vm" has ROUTER, e.g. 10.0.1.1/24); the kernel forwards between
# them and masquerades the vm's subnet to UPLINK's address (nft), letting through what
# nic_router's rules do (TCP, UDP and ICMP to 198.18.0.0/16, and the replies). The vm runs
# `nicstack iperf IPERF_ARGS`. scripts/guest-image.sh --netfilter puts it in the image as
# /bin/guest-linux-router.
#
# Markers (NICSTACK-GUEST: ...): "irq-start"/"irq" the interrupts of eth0 summed over its
# vectors and CPUs and "stat-start"/"stat" /proc/stat's cpu line, before and after the iperf
# test; "nat PACKETS CONNECTIONS" the packets the masquerade rule rewrote and the tracked
# connections of VM whose replies went to UPLINK's address; "iperf" iperf's JSON report on
# one line. Its exit status is iperf's.
uplink=$1 router=$2 vm=$3
shift 3
fail() { echo "NICSTACK-GUEST: linux-router: $*"; exit 1; }
irqs() { awk '/eth0/ {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i} END {print s + 0}' /proc/interrupts; }

subnet=$(ipcalc -n "$router" | cut -d= -f2)/${router#*/}
ip addr add "$uplink" dev eth0 && ip link set eth0 up || fail "eth0: cannot take $uplink"
# The kernel cuts its TCP segments itself (GSO): QEMU 7.2's e1000e, whose netdev takes no
# virtio-net header (stream), carries out TSO as IP fragments, which nic_router, like
# Genode's, drops (the guest sent at 1-6 Mbit/s with retransmissions).
ethtool -K eth0 tso off || fail "eth0: cannot turn TSO off"
echo 1 >/proc/sys/net/ipv4/ip_forward
# The vm's namespace lives as long as this holder; the guest powers off after the test.
unshare -n sleep 100000 &
holder=$!
# busybox's ip names the peer itself (veth0) and takes no "peer name".
for i in $(seq 100); do [ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; usleep 20000; done
ip link add name vm type veth && ip link set veth0 netns $holder || fail "no veth pair into the vm's namespace"
ip addr add "$router" dev vm && ip link set vm up || fail "vm: cannot take $router"
nsenter -t $holder -n sh -c "ip link set lo up && ip link set veth0 name eth0 && ip addr add $vm/${router#*/} dev eth0 &&
  ip link set eth0 up && ip route add default via ${router%/*}" || fail "the vm's namespace: cannot take $vm"
nft -f - <<EOF || fail "nft refused the ruleset"
table ip nat {
  chain postrouting {
    type nat hook postrouting priority srcnat;
    oifname "eth0" ip saddr $subnet counter masquerade
  }
}
table ip filter {
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "vm" oifname "eth0" ip daddr 198.18.0.0/16 ip protocol { tcp, udp, icmp } accept
  }
}
EOF
# QEMU's e1000e takes a moment to bring its link up after the driver resets it.
for i in $(seq 100); do [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] && break; usleep 100000; done
[ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] || fail "eth0 has no link"

echo "NICSTACK-GUEST: irq-start $(irqs)"
echo "NICSTACK-GUEST: stat-start $(head -1 /proc/stat)"
nsenter -t $holder -n nicstack iperf -J "$@" >/tmp/iperf.json
rc=$?
echo "NICSTACK-GUEST: irq $(irqs)"
echo "NICSTACK-GUEST: stat $(head -1 /proc/stat)"
packets=$(nft list chain ip nat postrouting | awk '/masquerade/ {for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1)}')
conns=$(grep -c " src=${vm%/*} .* dst=${uplink%/*} " /proc/net/nf_conntrack)
echo "NICSTACK-GUEST: nat ${packets:-0} $conns"
echo "NICSTACK-GUEST: iperf $(tr -d '\n' </tmp/iperf.json)"
kill $holder
exit $rc
