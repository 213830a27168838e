# Sourced by scripts inside the test host: a witness of the test host's own
# stalls. QEMU-TCG sometimes stops the whole test host for tens of seconds
# (docs/testhost.md); its clock keeps running meanwhile, so a ticker that
# wakes every second finds a gap as long as the stall. A tier may repeat a
# case only when the witness proves such a gap during it: a slow husk or
# guest never opens one, so a real regression cannot hide behind a retry.
#
#   stall_watch FILE        start the ticker (stopped when the shell exits)
#   uptime_cs               the test host's uptime in centiseconds
#   stall_gap FILE FROM     longest gap in seconds between ticks since FROM
uptime_cs() {
	local up
	read -r up _ </proc/uptime
	echo "${up%.*}${up#*.}"
}
stall_watch() {
	# Started from a command substitution, the ticker is not a child of
	# this shell: a plain `wait` in the caller must not wait for it.
	STALL_WITNESS=$(
		(
			while :; do
				uptime_cs
				sleep 1
			done
		) </dev/null >"$1" 2>/dev/null &
		echo $!
	)
	trap 'kill $STALL_WITNESS 2>/dev/null' EXIT
}
stall_gap() {
	awk -v from="$2" -v now="$(uptime_cs)" '
		$1 >= from - 200 { if (p != "" && $1 - p > m) m = $1 - p; p = $1 }
		END { if (p != "" && now - p > m) m = now - p; print int(m / 100) }' "$1"
}
