#!/bin/sh
# Inside the test host: `husk run --json -- true` RUNS times; summarise.
#   run-inner.sh ROOT RUNS
ROOT=$1 RUNS=$2
R=/tmp/bench-run
mkdir -p $R
i=0
while [ $i -lt "$RUNS" ]; do
	"$ROOT/tools/bench/boot-timer" --marker '"exit_code":0' --output $R/json -- \
		"$ROOT/husk" run --json -- true >$R/one 2>/dev/null
	rss=$(sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p' $R/one)
	grep '^{' $R/json | sed 's/.*"timings_us":{//; s/}.*//' | tr ',' '\n' |
		sed 's/"//g; s/:/ /' | while read -r k v; do echo "$k $v"; done >$R/t
	for k in first_kvm_run init job_start job_end vm_exit teardown; do
		echo "$(sed -n "s/^$k //p" $R/t)" >>$R/$k
	done
	echo "$rss" >>$R/rss
	i=$((i + 1))
done
stat() {
	sort -n "$1" | awk '{ v[NR] = $1 } END {
		m = int((NR + 1) / 2); p = int(NR * 0.9 + 0.999); if (p > NR) p = NR
		printf "%10.1f %10.1f\n", v[m] / 1000, v[p] / 1000 }'
}
echo
echo "husk run -- true, $RUNS runs (ms since husk started)"
printf '%-28s %10s %10s\n' phase median p90
for k in first_kvm_run init job_start job_end vm_exit teardown; do
	printf '%-28s %s\n' "$k" "$(stat $R/$k)"
done
printf '%-28s %s\n' "peak RSS of husk (MiB)" "$(sort -n $R/rss | awk '{ v[NR] = $1 } END {
	m = int((NR + 1) / 2); p = int(NR * 0.9 + 0.999); if (p > NR) p = NR
	printf "%10.1f %10.1f", v[m] / 1024, v[p] / 1024 }')"
