#!/bin/sh
# Runs inside the test host (real KVM): boot the guest kernel with husk's
# virtio-blk (read-only) and virtio-rng and check what the guest saw.
#   devices-inner.sh HUSK KERNEL_DIR INITRD DISK WORKDIR
# WORKDIR/expect holds the disk's size in sectors and the big file's digest.
HUSK=$1 K=$2 RD=$3 DISK=$4 W=$5
SHOW_LINES=25
. "$(dirname "$0")/lib.sh"
. "$W/expect"

# boot NAME WANT_STATUS ARGS...: console in $W/con, stderr in $W/err.
boot() {
	name=$1 want=$2
	shift 2
	"$HUSK" boot --console "$W/con" --timeout 300 --no-stdin "$@" >"$W/out" 2>"$W/err" </dev/null
	st=$?
	if [ $st = "$want" ]; then
		ok "$name (exit $st)"
	else
		bad "$name: exit $st, expected $want"
		show "$W/con" "$W/err"
	fi
}
has() {
	if grep -Eq -- "$3" "$2"; then ok "$1"; else bad "$1: no /$3/"; show "$2"; fi
}

boot "boot with --disk and --rng" 0 --kernel "$K/vmlinux" --initrd "$RD" --disk "$DISK" --rng
has "guest registered two virtio-mmio devices" "$W/con" \
	'virtio-mmio: Registering device virtio-mmio.1 at 0xd0001000-0xd0001fff, IRQ 6'
has "guest init finished" "$W/con" '^DEV-DONE'
has "capacity is the image size ($sectors sectors)" "$W/con" "^DEV-SIZE: $sectors\$"
has "disk is read-only (VIRTIO_BLK_F_RO)" "$W/con" '^DEV-RO: 1$'
has "GET_ID serial" "$W/con" '^DEV-SERIAL: husk-rootfs$'
has "ext4 mounts read-only" "$W/con" '^DEV-MOUNT: ok$'
has "file read through virtio-blk" "$W/con" '^DEV-FILE: husk virtio-blk marker$'
has "16 MiB file digest matches the host's" "$W/con" "^DEV-SHA: $sha\$"
has "file system write refused" "$W/con" '^DEV-FSWRITE: refused$'
has "raw write to /dev/vda refused" "$W/con" '^DEV-RAWWRITE: refused$'
has "hw_random uses virtio-rng" "$W/con" '^DEV-RNG-NAME: virtio_rng'
has "16 bytes from /dev/hwrng" "$W/con" '^DEV-RNG1: [0-9a-f]{32}$'
r1=$(sed -n 's/^DEV-RNG1: //p' "$W/con") r2=$(sed -n 's/^DEV-RNG2: //p' "$W/con")
if [ -n "$r1" ] && [ "$r1" != "$r2" ] && [ "$r1" != 00000000000000000000000000000000 ]; then
	ok "two hwrng reads differ"
else
	bad "hwrng reads '$r1' and '$r2'"
fi
if grep -q "guest driver error" "$W/err"; then bad "husk saw no driver error"; show "$W/err"; else ok "husk saw no driver error"; fi
# Sequential read of the whole device, timed with the guest's uptime (10 ms ticks).
dd=$(sed -n 's/^DEV-DD: //p' "$W/con")
if [ -n "$dd" ]; then
	eval "$dd"
	# seconds.hundredths -> hundredths, without leading zeros (octal).
	c0=$(echo "$t0" | tr -d . | sed 's/^0*//') c1=$(echo "$t1" | tr -d . | sed 's/^0*//')
	cs=$(( ${c1:-0} - ${c0:-0} ))
	[ "$cs" -gt 0 ] || cs=1
	echo "info - dd of /dev/vda: $bytes bytes in ${cs}0 ms, $(( bytes * 100 / cs / 1048576 )) MiB/s (TCG test host)"
fi

boot "missing disk image is a host error: status 1" 1 --kernel "$K/vmlinux" --initrd "$RD" \
	--disk "$W/no-such-image"
has "error names the image" "$W/err" 'cannot open disk image .*no-such-image'

boot "boot without devices announces none" 0 --kernel "$K/vmlinux" --initrd "$RD"
if grep -q 'virtio-mmio: Registering' "$W/con"; then bad "no virtio devices expected"; else ok "no virtio devices"; fi
has "guest has no /dev/vda" "$W/con" '^DEV-NONE$'
# No entropy device and no trusted CPU source: only husk's boot seed, which
# the default kernel counts (CONFIG_RANDOM_TRUST_BOOTLOADER), can make the
# CRNG ready before init ("crng init done" logged first).
set -- $(sed -n 's/^DEV-CRNG-LINES: //p' "$W/con" | tr -d '\r')
if [ $# = 2 ] && [ "$1" -lt "$2" ]; then
	ok "the CRNG was seeded at boot, before init (x86 setup_data RNG seed)"
else
	bad "the CRNG was not ready before init: log lines '$*'"
	show "$W/con"
fi

echo "testhost devices: $pass passed, $fail failed"
[ $fail = 0 ]
