#!/bin/sh
# Runs inside the test host (real KVM): boot the guest kernel with husk and
# check what the guest saw and how husk reported it.
#   boot-inner.sh HUSK KERNEL_DIR INITRD WORKDIR
HUSK=$1 K=$2 RD=$3 W=$4
SHOW_LINES=25
. "$(dirname "$0")/lib.sh"

# boot NAME WANT_STATUS ARGS...: console in $W/con, JSON in $W/json.
boot() {
	name=$1 want=$2
	shift 2
	"$HUSK" boot --console "$W/con" --json --timeout 300 "$@" >"$W/json" 2>"$W/err" </dev/null
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
timings_ordered() {
	# first_kvm_run <= init <= exit <= teardown, all measured (not -1).
	t=$(sed 's/.*"timings_us":{//; s/}.*//' "$W/json" | tr ',' '\n')
	f=$(echo "$t" | sed -n 's/"first_kvm_run"://p')
	i=$(echo "$t" | sed -n 's/"init"://p')
	e=$(echo "$t" | sed -n 's/"exit"://p')
	d=$(echo "$t" | sed -n 's/"teardown"://p')
	if [ "${f:--1}" -gt 0 ] && [ "$i" -ge "$f" ] && [ "$e" -ge "$i" ] && [ "$d" -ge "$e" ]; then
		ok "$1: phase timestamps ordered (first_kvm_run=${f}us init=${i}us exit=${e}us)"
	else
		bad "$1: phase timestamps not ordered: $(cat "$W/json")"
	fi
}

boot "vmlinux boots to init and powers off" 0 --kernel "$K/vmlinux" --initrd "$RD"
has "init reached with one CPU, husk port visible" "$W/con" \
	'HUSK-MINI-INIT: reached userspace, cpus=1, husk-port=yes'
has "JSON says poweroff" "$W/json" '"reason":"poweroff"'
has "guest used kvm-clock" "$W/con" 'kvm-clock'
timings_ordered "vmlinux"

boot "vmlinux with --vcpus 2" 0 --kernel "$K/vmlinux" --initrd "$RD" --vcpus 2
has "guest sees 2 CPUs" "$W/con" 'HUSK-MINI-INIT: reached userspace, cpus=2,'
timings_ordered "2 vCPUs"

boot "vmlinux with 4 GiB (RAM above the 32-bit hole)" 0 --kernel "$K/vmlinux" --initrd "$RD" --mem 4096
mib=$(sed -n 's/.*mem_mib=\([0-9]*\).*/\1/p' "$W/con")
if [ "${mib:-0}" -gt 3800 ]; then ok "guest sees ${mib} MiB"; else bad "guest sees ${mib:-no} MiB of 4096"; show "$W/con"; fi

boot "bzImage boots to init and powers off" 0 --kernel "$K/bzImage" --initrd "$RD"
has "bzImage reached init" "$W/con" 'HUSK-MINI-INIT: reached userspace, cpus=1, husk-port=yes'
timings_ordered "bzImage"

boot "missing init panics: status 3" 3 --kernel "$K/vmlinux" --initrd "$RD" \
	--cmdline "rdinit=/nonexistent init=/nonexistent"
has "panic reported" "$W/err" 'husk: panic: guest kernel panic: Kernel panic - not syncing'
has "JSON says panic" "$W/json" '"reason":"panic"'

echo "testhost boot: $pass passed, $fail failed"
[ $fail = 0 ]
