#!/bin/sh
# Inside the test host: RUNS cold `husk boot` (initcall_debug, the kernel's
# log printed by mini-init after its marker) and RUNS cold `husk run --
# true`, interleaved; every record goes to stdout as a "PHASES-RAW" line for
# tools/bench-phases to tabulate.
#   phases-inner.sh ROOT KERNEL_DIR INITRD RUNS MEM_MIB [on|off [SCRUB]]
# SCRUB "on": scrub (tools/bench/scrub.sh) before every recorded start.
ROOT=$1 K=$2 RD=$3 RUNS=$4 MEM=$5 ASLR=${6:-on} SCRUB=${7:-off}
. "$(dirname "$0")/scrub.sh"
T=$ROOT/tools/bench/boot-timer
H=$ROOT/husk
R=/tmp/bench-phases
rm -rf $R
mkdir -p $R
if [ "$ASLR" = off ]; then
	echo 0 >/proc/sys/kernel/randomize_va_space || exit 1
	echo "PHASES-RAW aslr off"
fi
# Three unrecorded boots and runs first: the test host's TCG translates
# each code path the first time it runs, which inflates the first cold
# starts (husk boot's first KVM_RUN at 110-250 ms instead of 70, for about
# six boots) with the emulator's work, not husk's.
for w in 1 2 3; do
	"$H" boot --kernel "$K/vmlinux" --initrd "$RD" --mem "$MEM" --cmdline quiet \
		--timeout 120 >/dev/null 2>&1 </dev/null
	"$H" run --mem "$MEM" -- true >/dev/null 2>&1 </dev/null
done
[ "$SCRUB" = on ] && echo "free memory scrubbed before every start"
i=1
while [ $i -le "$RUNS" ]; do
	scrub
	"$T" --marker '"reason"' --output $R/bj -- "$H" boot --kernel "$K/vmlinux" \
		--initrd "$RD" --mem "$MEM" --cmdline "quiet initcall_debug mini-init.kmsg" \
		--console $R/bc --json --timeout 120 >$R/bt 2>$R/be </dev/null
	echo "PHASES-RAW boot $i timer $(cat $R/bt)"
	echo "PHASES-RAW boot $i json $(grep '^{' $R/bj)"
	grep -a '^HUSK-KMSG ' $R/bc | tr -d '\r' | sed "s/^HUSK-KMSG /PHASES-RAW boot $i kmsg /"
	scrub
	"$T" --marker '"exit_code"' --output $R/rj -- "$H" run --mem "$MEM" --json -- true \
		>$R/rt 2>$R/re </dev/null
	echo "PHASES-RAW run $i timer $(cat $R/rt)"
	echo "PHASES-RAW run $i json $(grep '^{' $R/rj)"
	if ! grep -q '"exit_code":0' $R/rj; then
		echo "PHASES-RAW run $i error $(tail -n 3 $R/re | tr '\n' ' ')"
	fi
	i=$((i + 1))
done
echo "PHASES-RAW end"
