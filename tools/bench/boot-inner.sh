#!/bin/sh
# Inside the test host: boot each configuration RUNS times, interleaved so
# drifting load hits every VMM alike, then summarise.
#   boot-inner.sh ROOT KERNEL_DIR INITRD RUNS MEM_MIB QEMU
ROOT=$1 K=$2 RD=$3 RUNS=$4 MEM=$5 QEMU=$6
T=$ROOT/tools/bench/boot-timer
CMDLINE="console=ttyS0 reboot=k panic=-1 no_timer_check quiet"
R=/tmp/bench
mkdir -p $R

husk_run() {	# husk_run KERNEL
	"$T" -- "$ROOT/husk" boot --kernel "$1" --initrd "$RD" --mem "$MEM" \
		--cmdline quiet --timeout 120 2>/dev/null
}
qemu_run() {
	"$T" --kill-after-marker -- "$QEMU" -M microvm,x-option-roms=off,acpi=off,rtc=on \
		-enable-kvm -cpu host -m "$MEM" -smp 1 -nodefaults -no-user-config \
		-display none -serial stdio -no-reboot \
		-kernel "$K/bzImage" -initrd "$RD" -append "$CMDLINE"
}

i=0
while [ $i -lt "$RUNS" ]; do
	husk_run "$K/vmlinux" >>$R/husk-vmlinux
	husk_run "$K/bzImage" >>$R/husk-bzimage
	qemu_run >>$R/qemu-microvm
	i=$((i + 1))
done

stat() {	# stat FILE FIELD -> "median p90"
	sed -n "s/.*$2=\\([-0-9]*\\).*/\\1/p" "$1" | sort -n | awk '
		{ v[NR] = $1 }
		END {
			if (!NR) { print "- -"; exit }
			m = int((NR + 1) / 2); p = int(NR * 0.9 + 0.999)
			if (p > NR) p = NR
			print v[m], v[p]
		}'
}
echo
echo "time from VMM spawn to the guest's init marker, $RUNS runs each, $MEM MiB, 1 vCPU"
printf '%-26s %12s %12s %14s %8s\n' config "median ms" "p90 ms" "peak RSS MiB" failed
for c in husk-vmlinux husk-bzimage qemu-microvm; do
	set -- $(stat $R/$c marker_us)
	med=$1 p90=$2
	set -- $(stat $R/$c maxrss_kib)
	rss=$1
	nf=$(grep -c 'marker_us=-1' $R/$c)
	printf '%-26s %12s %12s %14s %8s\n' "$c" \
		"$(awk "BEGIN{printf \"%.1f\", $med/1000}")" "$(awk "BEGIN{printf \"%.1f\", $p90/1000}")" \
		"$(awk "BEGIN{printf \"%.1f\", $rss/1024}")" "$nf"
	eval "med_$(echo $c | tr - _)=$med rss_$(echo $c | tr - _)=$rss"
done
echo
awk "BEGIN{printf \"ratio qemu-microvm / husk (same bzImage): time-to-init %.2fx, peak RSS %.2fx\n\", $med_qemu_microvm/$med_husk_bzimage, $rss_qemu_microvm/$rss_husk_bzimage}"
awk "BEGIN{printf \"ratio qemu-microvm / husk-vmlinux:         time-to-init %.2fx\n\", $med_qemu_microvm/$med_husk_vmlinux}"
