# Shared by the *-inner.sh scripts that run inside the test host: counters,
# check helpers and a husk runner. Source it after setting W (a scratch
# directory) and HUSK.
. "$(dirname "$0")/stall-witness.sh"
stall_watch $W/ticks
pass=0 fail=0
ok() { echo "ok   - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; fail=$((fail + 1)); return 1; }
show() { sed 's/^/    | /' "$@" | tail -n "${SHOW_LINES:-15}"; }
# guest_detail CONSOLE: what a failed run leaves to go on, kept in the log:
# the guest's last console lines and what the test host's KVM said lately
# (a slow or stuck nested boot shows there first).
guest_detail() {
	[ -f "$1" ] && tail -n 40 "$1" | tr -d '\r' | sed 's/^/    console| /'
	dmesg 2>/dev/null | grep -i 'kvm' | tail -n 10 | sed 's/^/    host kvm| /'
	[ -n "${run_u0:-}" ] &&
		echo "    test host: longest standstill during the run $(stall_gap $W/ticks "$run_u0") s"
}
# has NAME FILE REGEX / hasnt NAME FILE REGEX (basic regular expressions).
# bad and the check helpers (has, hasnt, run) return 1 when the check
# failed, so that `has ... || show ...` works; each judges its whole
# condition (tests/lint/hollow.test).
has() { if grep -q -- "$3" "$2"; then ok "$1"; else bad "$1: no '$3'"; show "$2"; return 1; fi; }
hasnt() { if grep -q -- "$3" "$2"; then bad "$1: '$3' found"; show "$2"; return 1; else ok "$1"; fi; }
# run NAME WANT_STATUS ARGS...: husk ARGS, stdout in $W/out, stderr in
# $W/err, the guest console in $W/console; status in $st.
run() {
	name=$1 want=$2
	shift 2
	rm -f $W/console
	run_u0=$(uptime_cs)
	"$HUSK" "$@" >$W/out 2>$W/err </dev/null
	st=$?
	if [ "$st" = "$want" ]; then
		ok "$name (exit $st)"
	else
		bad "$name: exit $st, expected $want"
		show $W/out $W/err
		guest_detail $W/console
		return 1
	fi
}
# jnum KEY FILE: a number from the JSON record on the last line of FILE
jnum() { tail -n 1 "$2" | grep -o "\"$1\":-\{0,1\}[0-9]*" | head -n 1 | cut -d: -f2; }
# uptime_ms: milliseconds since the test host booted (busybox date has no %N)
uptime_ms() { cut -d' ' -f1 /proc/uptime | tr -d . | sed 's/$/0/'; }
# skip WHY: a part that did not run, counted and said with its reason;
# tools/test matches the line against tests/skips.allowed.
skipped=0
skip() { echo "skip - $1"; skipped=$((skipped + 1)); }
# summary NAME: the line tools/test adds up, and the exit status
summary() { echo "$1: $pass passed, $fail failed, $skipped skipped"; [ $fail = 0 ]; }
