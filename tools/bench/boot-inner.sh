#!/bin/sh
# Inside the test host: boot each configuration RUNS times, interleaved so
# drifting load hits every VMM alike, then summarise. Raw figures go to
# stdout as "BOOT-RAW config marker_us=N ..." lines for the plot.
#   boot-inner.sh ROOT KERNEL_DIR INITRD RUNS MEM_MIB QEMU [LKVM [ARCH [on|off [SCRUB]]]]
# ROOT holds husk and tools/bench/boot-timer (a build tree). ARCH x86_64
# (default) or arm64 picks the configurations and QEMU's machine. SCRUB
# "on": scrub (below) before every recorded boot.
ROOT=$1 K=$2 RD=$3 RUNS=$4 MEM=$5 QEMU=$6 LKVM=${7:-} ARCH=${8:-x86_64} ASLR=${9:-on}
SCRUB=${10:-off}
T=$ROOT/tools/bench/boot-timer
# husk's own parameters (ARCH_CMDLINE_BASE, as husk boot --help prints them)
# and quiet, for every VMM alike: a copy here could drift from husk's.
BASE=$("$ROOT/husk" boot --help | sed -n '/--cmdline STR/{n;s/^ *"\(.*\)"$/\1/p}')
[ -n "$BASE" ] || { echo "boot-inner: husk boot --help shows no parameters" >&2; exit 1; }
CMDLINE="$BASE quiet"
R=/tmp/bench
rm -rf $R
mkdir -p $R
if [ "$ASLR" = off ]; then
	echo 0 >/proc/sys/kernel/randomize_va_space || exit 1
	echo "address randomization: off"
fi

. "$(dirname "$0")/scrub.sh"
[ "$SCRUB" = on ] && echo "free memory scrubbed before every boot"

husk_run() {	# husk_run KERNEL
	"$T" -- "$ROOT/husk" boot --kernel "$1" --initrd "$RD" --mem "$MEM" \
		--cmdline quiet --timeout 120 2>/dev/null
}
# QEMU's microvm: with vmlinux it enters through the PVH note (its fastest
# path: no real-mode setup, no decompression); with bzImage it decompresses.
qemu_run() {	# qemu_run KERNEL
	"$T" --kill-after-marker -- "$QEMU" -M microvm,x-option-roms=off,acpi=off,rtc=on \
		-enable-kvm -cpu host -m "$MEM" -smp 1 -nodefaults -no-user-config \
		-display none -serial stdio -no-reboot \
		-kernel "$1" -initrd "$RD" -append "$CMDLINE"
}
# A whole job at default options: husk run's record is its last output.
run_true() {
	"$T" --marker '"exit_code":0' -- "$ROOT/husk" run --json -- true 2>/dev/null </dev/null
}
# QEMU's arm64 virt board: its console is the PL011 (ttyAMA0) where husk's
# is ttyS0; the other parameters are the same.
qemu_virt_run() {
	"$T" --kill-after-marker -- "$QEMU" -M virt,gic-version=3 \
		-enable-kvm -cpu host -m "$MEM" -smp 1 -nodefaults -no-user-config \
		-display none -serial stdio -no-reboot -kernel "$K/Image" -initrd "$RD" \
		-append "$(echo "$CMDLINE" | sed 's/console=ttyS0/console=ttyAMA0/')"
}
# kvmtool boots bzImage on x86 (it has no PVH or vmlinux path); it adds its
# own console=ttyS0.
lkvm_run() {	# lkvm_run KERNEL PARAMS
	"$T" --kill-after-marker -- "$LKVM" run --name bench$$ -k "$1" -i "$RD" \
		-m "$MEM" -c 1 --console serial --network mode=none -p "$2" 2>/dev/null
}
run() {	# run CONFIG: one boot of that configuration
	case $1 in
	husk-vmlinux) husk_run "$K/vmlinux" ;;
	husk-bzimage) husk_run "$K/bzImage" ;;
	husk-image) husk_run "$K/Image" ;;
	qemu-microvm-pvh) qemu_run "$K/vmlinux" ;;
	qemu-microvm-bzimage) qemu_run "$K/bzImage" ;;
	qemu-virt-image) qemu_virt_run ;;
	kvmtool-bzimage) lkvm_run "$K/bzImage" "noreplace-smp quiet" ;;
	kvmtool-image) lkvm_run "$K/Image" "${CMDLINE#console=ttyS0 }" ;;
	husk-run-true) run_true ;;
	esac
}

# configs: the table's rows; order: one round; warm: the round before it.
if [ "$ARCH" = arm64 ]; then
	configs="husk-image qemu-virt-image"
	[ -n "$LKVM" ] && configs="$configs kvmtool-image"
	order=$configs warm=$configs kvm_arch=" --arch arm64"
else
	configs="husk-vmlinux husk-bzimage qemu-microvm-pvh qemu-microvm-bzimage husk-run-true"
	[ -n "$LKVM" ] && configs="$configs kvmtool-bzimage"
	order="husk-vmlinux husk-bzimage qemu-microvm-pvh qemu-microvm-bzimage"
	[ -n "$LKVM" ] && order="$order kvmtool-bzimage"
	order="$order husk-run-true"
	warm="husk-vmlinux qemu-microvm-pvh"
	[ -n "$LKVM" ] && warm="$warm kvmtool-bzimage"
	warm="$warm husk-run-true" kvm_arch=
fi
# One unrecorded round first: the test host's TCG translates each code path
# of its kernel and of every VMM the first time it runs, which inflates the
# first boots (up to 3x measured) with the emulator's work, not the VMM's.
for c in $warm; do
	run $c >/dev/null
done
i=0
while [ $i -lt "$RUNS" ]; do
	for c in $order; do
		scrub
		run $c >>$R/$c
	done
	i=$((i + 1))
done
for c in $configs; do
	sed "s/^/BOOT-RAW $c /" $R/$c
done

stat() {	# stat FILE FIELD -> "median p90"
	sed -n "s/.*$2=\\([-0-9]*\\).*/\\1/p" "$1" | grep -v '^-' | sort -n | awk '
		{ v[NR] = $1 }
		END {
			if (!NR) { print "- -"; exit }
			m = int((NR + 1) / 2); p = int(NR * 0.9 + 0.999)
			if (p > NR) p = NR
			print v[m], v[p]
		}'
}
ms() { awk "BEGIN{ if (\"$1\" == \"-\") print \"-\"; else printf \"%.1f\", $1/${2:-1000} }"; }
echo
echo "time from VMM spawn to the guest's init marker, $RUNS runs each, $MEM MiB, 1 vCPU"
[ "$ARCH" = arm64 ] ||
	echo "(husk-run-true: husk run --json -- true at default options, spawn to its record)"
printf '%-26s %12s %12s %14s %8s\n' config "median ms" "p90 ms" "peak RSS MiB" failed
for c in $configs; do
	set -- $(stat $R/$c marker_us)
	med=$1 p90=$2
	set -- $(stat $R/$c maxrss_kib)
	rss=$1
	nf=$(grep -c 'marker_us=-1' $R/$c)
	printf '%-26s %12s %12s %14s %8s\n' "$c" "$(ms $med)" "$(ms $p90)" "$(ms $rss 1024)" "$nf"
	eval "med_$(echo $c | tr - _)=$med rss_$(echo $c | tr - _)=$rss"
done
[ -n "$LKVM" ] || echo "kvmtool: skipped (no lkvm; build one with tools/build-kvmtool$kvm_arch SRC)"
echo
ratio() {	# ratio LABEL NUM DEN
	awk "BEGIN{ if (\"$2\" == \"\" || \"$3\" == \"\" || \"$2\" == \"-\" || \"$3\" == \"-\") print \"$1: -\";
		else printf \"%s: %.2fx\n\", \"$1\", $2/$3 }"
}
if [ "$ARCH" = arm64 ]; then
	ratio "husk-image / qemu-virt-image (same Image), time to init" "$med_husk_image" "$med_qemu_virt_image"
	[ -n "$LKVM" ] && ratio "husk-image / kvmtool-image (same Image), time to init" "$med_husk_image" "$med_kvmtool_image"
	ratio "husk-image / qemu-virt-image, peak RSS" "$rss_husk_image" "$rss_qemu_virt_image"
	[ -n "$LKVM" ] && ratio "husk-image / kvmtool-image, peak RSS" "$rss_husk_image" "$rss_kvmtool_image"
	exit 0
fi
ratio "husk-vmlinux / qemu-microvm-pvh (its fastest path), time to init" "$med_husk_vmlinux" "$med_qemu_microvm_pvh"
[ -n "$LKVM" ] && ratio "husk-vmlinux / kvmtool-bzimage, time to init" "$med_husk_vmlinux" "$med_kvmtool_bzimage"
ratio "husk-bzimage / qemu-microvm-bzimage (same bzImage), time to init" "$med_husk_bzimage" "$med_qemu_microvm_bzimage"
[ -n "$LKVM" ] && ratio "husk-bzimage / kvmtool-bzimage (same bzImage), time to init" "$med_husk_bzimage" "$med_kvmtool_bzimage"
ratio "husk-vmlinux / qemu-microvm-pvh, peak RSS" "$rss_husk_vmlinux" "$rss_qemu_microvm_pvh"
ratio "husk run -- true end to end / husk-vmlinux time to init" "$med_husk_run_true" "$med_husk_vmlinux"
true
