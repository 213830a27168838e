#!/bin/sh
# Inside the test host: tests/cgroup/cg-driver on real cgroup v2 (and a
# v2 + v1 mix made by taking cpu into a v1 hierarchy), or on v1.
#   cgroup-inner.sh DRIVER v2|v1
DRV=$1 MODE=$2
st=0
case $MODE in
v2)
	# Mixed first: cpu and cpuacct can only be mounted as v1 while no v2
	# group uses cpu, i.e. before the v2 run enables it.
	mkdir -p /run/cg-cpu
	if mount -t cgroup -o cpu,cpuacct cgroup /run/cg-cpu; then
		echo "# mixed: memory+pids on v2, cpu,cpuacct on v1 at /run/cg-cpu"
		"$DRV" --expect mixed || st=1
		# Unmounting frees cpu for v2 only if the hierarchy has no groups
		# left, dying ones included (/proc/cgroups counts those too).
		rmdir /run/cg-cpu/husk 2>/dev/null
		i=0
		while [ "$(awk '$1 == "cpu" { print $3 }' /proc/cgroups)" != 1 ] && [ $i -lt 50 ]; do
			sleep 0.1; i=$((i + 1))
		done
		umount /run/cg-cpu
		i=0
		while ! grep -qw cpu /sys/fs/cgroup/cgroup.controllers && [ $i -lt 50 ]; do
			sleep 0.1; i=$((i + 1))
		done
	else
		echo "FAIL - cannot mount a v1 cpu hierarchy for the mixed case"; st=1
	fi
	echo "# v2: $(cat /sys/fs/cgroup/cgroup.controllers)"
	"$DRV" --expect v2 || st=1
	;;
v1)
	echo "# v1: $(ls /sys/fs/cgroup | tr '\n' ' ')"
	"$DRV" --expect v1 || st=1
	;;
*)
	echo "usage: $0 DRIVER v2|v1"; exit 2 ;;
esac
exit $st
