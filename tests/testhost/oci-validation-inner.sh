#!/bin/sh
# Inside the test host (real KVM, root): the OCI runtime conformance suite
# of opencontainers/runtime-tools (validation/*.t, built by
# tools/build-oci-validation) against husk-runc. Each program drives the
# runtime through create, start, state, kill and delete and most run
# runtimetest inside the container, which checks the container against its
# config.json; each prints TAP. Prints a line per program and per check
# that failed, then checks that every program in EXPECTED passes whole and
# that at least as many checks pass as RATCHET records. A TAP line
# "ok N ... # SKIP" is a check the suite did not make: it is counted apart
# and never counts as a pass. WHICH "all" (the default) runs every
# program; "expected" only those in EXPECTED, and the ratchet is then not
# checked.
#   oci-validation-inner.sh BUILDDIR SUITE_DIR EXPECTED RATCHET [WHICH]
# OCI_VALIDATION_WORK: another scratch directory (the counting is tested
# on this host with stand-in programs, tests/tools/validation-count.test).
B=$1 SUITE=$2 EXPECTED=$3 RATCHET=$4 WHICH=${5:-all}
W=${OCI_VALIDATION_WORK:-/tmp/oci-validation}
rm -rf $W
mkdir -p $W/run $W/out
. "$(dirname "$0")/lib.sh"
cat >$W/husk-runc <<WRAP
#!/bin/sh
exec $B/husk-runc --root $W/state --image-dir $W/images "\$@"
WRAP
chmod +x $W/husk-runc
# The programs find runtimetest and the root tarball in their directory.
cp $SUITE/runtimetest $SUITE/rootfs-amd64.tar.gz $W/run/
cd $W/run
progs=0 whole=0 checks=0 passed=0 skips=0
if [ "$WHICH" = all ]; then
	programs=$(ls $SUITE/validation/*.t)
else
	programs=$(grep -v '^#' $EXPECTED | grep . | sed "s|.*|$SUITE/validation/&.t|")
fi
t0=$(cut -d. -f1 /proc/uptime)
for t in $programs; do
	name=$(basename $t .t)
	p0=$(cut -d. -f1 /proc/uptime)
	RUNTIME=$W/husk-runc timeout 180 $t >$W/out/$name.tap 2>$W/out/$name.err </dev/null
	st=$?
	secs=$(( $(cut -d. -f1 /proc/uptime) - p0 ))
	n_skip=$(grep -ci '^ok .*# *skip' $W/out/$name.tap)
	n_ok=$(( $(grep -c '^ok ' $W/out/$name.tap) - n_skip ))
	n_bad=$(grep -c '^not ok ' $W/out/$name.tap)
	progs=$((progs + 1))
	checks=$((checks + n_ok + n_skip + n_bad))
	passed=$((passed + n_ok))
	skips=$((skips + n_skip))
	if [ $st = 0 ] && [ $n_bad = 0 ] && [ $n_ok -gt 0 ]; then
		whole=$((whole + 1))
		echo "# pass $name ($n_ok checks, $n_skip skipped by the suite; $secs s)"
		echo $name >>$W/passing
	else
		echo "# FAIL $name (exit $st, $n_ok ok, $n_skip skipped by the suite, $n_bad not ok; $secs s)"
		grep '^not ok ' $W/out/$name.tap | head -n 5 | sed 's/^/#     /'
		[ $n_ok = 0 ] && [ $n_bad = 0 ] && head -c 400 $W/out/$name.err | sed 's/^/#     | /'
	fi
	# Whatever a failed program left behind goes before the next one.
	for id in $(ls $W/state 2>/dev/null); do
		$W/husk-runc delete --force $id >/dev/null 2>&1
	done
	rm -rf /tmp/ocitest*
done
echo "# runtime-tools validation against husk-runc ($WHICH): $whole of $progs programs pass whole;" \
	"of $checks checks $passed pass, $skips are skipped by the suite (ok # SKIP)," \
	"$((checks - passed - skips)) fail; $(( $(cut -d. -f1 /proc/uptime) - t0 )) s"
while read -r name; do
	case $name in ''|'#'*) continue ;; esac
	if grep -qx "$name" $W/passing 2>/dev/null; then ok "validation $name passes"
	else bad "validation $name no longer passes"; show $W/out/$name.tap; fi
done <$EXPECTED
# The ratchet: the number of checks that passed when it was last raised.
want=$(grep -v '^#' "$RATCHET" | grep -m1 '^[0-9][0-9]*$')
if [ "$WHICH" != all ]; then
	echo "# the ratchet ($want checks) is checked only when every program runs"
elif [ -z "$want" ]; then
	bad "no number of checks in $RATCHET"
elif [ $passed -lt $want ]; then
	bad "$passed checks pass, fewer than the $want recorded in $RATCHET"
else
	ok "$passed checks pass (ratchet: $want)"
	[ $passed = $want ] ||
		echo "# note: $passed checks pass, more than the $want recorded: raise $RATCHET to $passed"
fi
# Nothing of husk is left running after the suite.
if pidof husk >/dev/null; then bad "husk processes left: $(pidof husk)"; else ok "no husk process left"; fi
summary oci-validation
