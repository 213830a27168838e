#!/bin/sh
# Inside the test host: cold and template starts, interleaved, then the
# memory of idle clones; summarise.
#   start-inner.sh ROOT RUNS [CPUS]
ROOT=$1 RUNS=$2
HUSK=$ROOT/husk
T=$ROOT/tools/bench/boot-timer
R=/tmp/bench-start
D=$R/templates
OPT=${3:+--cpus $3}
PHASES="template_checked vm_restored first_kvm_run init job_start job_end vm_exit teardown"
rm -rf $R
mkdir -p $R

# one KIND ARGS...: a run, its phases appended to $R/KIND.PHASE
one() {
	kind=$1
	shift
	"$T" --marker '"exit_code":0' --output $R/json -- "$HUSK" run --json $OPT "$@" -- true \
		>$R/one 2>/dev/null
	sed -n 's/.*exit_us=\([0-9]*\).*/\1/p' $R/one >>$R/$kind.exit
	grep '^{' $R/json | sed 's/.*"timings_us":{//; s/}.*//' | tr ',' '\n' |
		sed 's/"//g; s/:/ /' >$R/t
	for k in $PHASES; do
		v=$(sed -n "s/^$k //p" $R/t)
		[ -n "$v" ] && [ "$v" -ge 0 ] 2>/dev/null && echo "$v" >>$R/$kind.$k
	done
	grep -q '"exit_code":0' $R/json || echo x >>$R/$kind.failed
}
# stat FILE: "median p90" in ms, "-" when there is nothing
stat() {
	[ -s "$1" ] || { echo "         -          -"; return; }
	sort -n "$1" | awk '{ v[NR] = $1 } END {
		m = int((NR + 1) / 2); p = int(NR * 0.9 + 0.999); if (p > NR) p = NR
		printf "%10.1f %10.1f\n", v[m] / 1000, v[p] / 1000 }'
}
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] + 0 }'; }

t0=$(cut -d' ' -f1 /proc/uptime)
"$HUSK" template create bench --template-dir $D $OPT >$R/create 2>&1 ||
	{ echo "bench-start: template create failed:"; cat $R/create; exit 1; }
t1=$(cut -d' ' -f1 /proc/uptime)
i=0
while [ $i -lt "$RUNS" ]; do
	one cold
	one template --template bench --template-dir $D
	i=$((i + 1))
done

# mem KIND N ARGS...: N idle VMs of KIND at once; total Pss and Rss (KiB)
# of every husk process (supervisor and VM process) into $R/mem.KIND.N
mem() {
	kind=$1 n=$2
	shift 2
	k=0
	while [ $k -lt $n ]; do
		"$HUSK" run --timeout 300 $OPT "$@" -- sh -c 'echo up; sleep 300' \
			>$R/up.$k 2>$R/err.$k </dev/null &
		k=$((k + 1))
	done
	w=0
	while [ $w -lt 1200 ] && [ "$(cat $R/up.* 2>/dev/null | grep -c '^up$')" -lt $n ]; do
		sleep 0.1
		w=$((w + 1))
	done
	sleep 1
	pss=0 rss=0
	for p in $(pidof husk); do
		s=$(awk '/^Pss:/ { print $2 }' /proc/$p/smaps_rollup 2>/dev/null)
		r=$(awk '/^Rss:/ { print $2 }' /proc/$p/smaps_rollup 2>/dev/null)
		pss=$((pss + ${s:-0})) rss=$((rss + ${r:-0}))
	done
	up=$(cat $R/up.* 2>/dev/null | grep -c '^up$')
	echo "$up $pss $rss" >$R/mem.$kind.$n
	[ "$up" = "$n" ] || { echo "bench-start: only $up of $n $kind VMs came up:"; tail -n 3 $R/err.*; }
	kill $(pidof husk) 2>/dev/null
	wait
	rm -f $R/up.* $R/err.*
}
mem cold 1
for n in 1 4 8; do
	mem template $n --template bench --template-dir $D
done

echo
echo "husk run -- true: cold and from a template${OPT:+ ($OPT)}, $RUNS runs each, interleaved"
echo "template create: $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s, $(du -sh $D/bench | cut -f1) on disk"
printf '%-20s %21s %21s\n' "" "cold" "template"
printf '%-20s %10s %10s %10s %10s\n' "ms since husk start" median p90 median p90
for k in $PHASES exit; do
	printf '%-20s %s %s\n' "$k" "$(stat $R/cold.$k)" "$(stat $R/template.$k)"
done
echo "(exit: spawn to exit of the husk process; failed runs: cold $(cat $R/cold.failed 2>/dev/null | wc -l), template $(cat $R/template.failed 2>/dev/null | wc -l))"
js_c=$(med $R/cold.job_start) js_t=$(med $R/template.job_start)
ex_c=$(med $R/cold.exit) ex_t=$(med $R/template.exit)
awk "BEGIN { printf \"ratio template / cold: job start %.3f, exit %.3f\n\", $js_t / $js_c, $ex_t / $ex_c }"
echo
echo "memory of idle VMs (every husk process: supervisor and VM process)"
printf '%-20s %6s %14s %14s\n' "" alive "PSS/VM MiB" "RSS/VM MiB"
set -- $(cat $R/mem.cold.1)
cold_rss=$3
printf '%-20s %6s %14.1f %14.1f\n' "cold" "$1" "$(awk "BEGIN{print $2/1024/($1>0?$1:1)}")" \
	"$(awk "BEGIN{print $3/1024/($1>0?$1:1)}")"
for n in 1 4 8; do
	set -- $(cat $R/mem.template.$n)
	printf '%-20s %6s %14.1f %14.1f\n' "template x$n" "$1" \
		"$(awk "BEGIN{print $2/1024/($1>0?$1:1)}")" "$(awk "BEGIN{print $3/1024/($1>0?$1:1)}")"
	[ $n = 8 ] && awk "BEGIN { printf \"ratio PSS per clone (x8) / RSS of a cold VM: %.3f\n\", ($2 / ($1 > 0 ? $1 : 1)) / $cold_rss }"
done
