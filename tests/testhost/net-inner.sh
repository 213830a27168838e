#!/bin/sh
# Inside the test host (real KVM, root): `husk run --net egress` against a
# tiny HTTP server on a documentation address (198.51.100.1, TEST-NET-2,
# never routed) owned by the test host itself.   net-inner.sh HUSK
HUSK=$1
W=/tmp/net-inner
SRV=198.51.100.1
mkdir -p $W/www
pass=0 fail=0
ok() { echo "ok   - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; fail=$((fail + 1)); }
show() { sed 's/^/    | /' "$@" | tail -n 15; }

for m in tun sch_ingress cls_bpf; do
	[ -d /sys/module/$m ] || { echo "SKIP: module $m is not loaded"; exit 77; }
done

# The "internet": the server's address on the test host's own lo; the guest
# reaches it through its tap, where the egress filter decides.
ip addr add $SRV/32 dev lo 2>/dev/null
echo "hello from the net" >$W/www/f
httpd -f -p $SRV:8080 -h $W/www &
srv=$!
sleep 1

# run NAME WANT_STATUS ARGS...: stdout in $W/out, stderr in $W/err.
run() {
	name=$1 want=$2
	shift 2
	"$HUSK" run --console $W/console "$@" >$W/out 2>$W/err </dev/null
	st=$?
	if [ $st = "$want" ]; then
		ok "$name (exit $st)"
	else
		bad "$name: exit $st, expected $want"
		show $W/out $W/err
		tail -n 20 $W/console | sed 's/^/    console| /'
	fi
}
has() {
	if grep -q -- "$3" "$2"; then ok "$1"; else bad "$1: no '$3'"; show "$2"; fi
}
no_leftovers() {
	if ip link | grep -q husk; then bad "$1: husk link left"; ip link | show
	else ok "$1: no husk link left"; fi
	if tc filter show dev lo ingress 2>/dev/null | grep -q bpf; then bad "$1: tc filter left"
	else ok "$1: no tc filter left"; fi
}

# The image's static busybox wget crashes in glibc's NSS (getservbyname)
# before any packet is sent; nc with numeric host and port does not.
GET="printf 'GET /f HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 $SRV 8080 | grep -q 'hello from the net' && echo got-it"
run "allowed destination is reachable" 0 --net egress --allow $SRV/32:tcp:8080 \
	-- sh -c "$GET"
has "the job got the file" $W/out "got-it"
no_leftovers "after the allowed run"

start=$(date +%s)
run "without --allow the connection fails" 1 --net egress --json -- sh -c "$GET"
el=$(( $(date +%s) - start ))
if [ $el -lt 60 ]; then ok "failed fast (${el}s)"; else bad "took ${el}s"; fi
has "drops counted" $W/out '"drops":[1-9]'
has "drops are not-allowed" $W/out '"not-allowed":[1-9]'
has "no anomaly in a normal run" $W/out '"anomaly":null'
echo "JSON $(tail -n 1 $W/out)"
no_leftovers "after the denied run"

run "allowed port only: another port is dropped" 1 --net egress --json \
	--allow $SRV/32:tcp:9999 -- sh -c "$GET"
has "drops are port" $W/out '"port":[1-9]'

run "guest has its address and resolv.conf" 0 --net egress \
	-- sh -c 'cat /proc/net/dev /etc/resolv.conf; cat /proc/net/route'
has "eth0 present" $W/out "eth0"
has "nameserver is the gateway" $W/out "nameserver 10.200."
has "default route" $W/out "eth0	00000000"

run "--net none has no eth0" 0 -- cat /proc/net/dev
if grep -q eth0 $W/out; then bad "eth0 with --net none"; show $W/out; else ok "no eth0 with --net none"; fi

# Anomaly: 50 quick connections (port 8081 is allowed but closed: each SYN
# is a new connection and is answered by a RST) against --conn-rate 10.
FLOOD="i=0; while [ \$i -lt 50 ]; do busybox nc -w 1 $SRV 8081 </dev/null; i=\$((i+1)); done; echo survived"
start=$(date +%s)
run "connection flood is killed" 125 --net egress --json --conn-rate 10 \
	--allow $SRV/32:tcp:8080-8081 -- sh -c "$FLOOD"
el=$(( $(date +%s) - start ))
if [ $el -lt 60 ]; then ok "killed fast (${el}s)"; else bad "took ${el}s"; fi
has "stderr names the anomaly" $W/err "killed: egress anomaly (new connections [0-9]* in 1000 ms > 10)"
has "JSON has the anomaly" $W/out '"anomaly":"killed: egress anomaly'
has "JSON error is the anomaly" $W/out '"error":"killed: egress anomaly'
if grep -q survived $W/out; then bad "the flood job finished"; else ok "the flood job did not finish"; fi
# Not a "JSON " line: net.test expects not-allowed drops in each of those.
echo "anomaly record: $(tail -n 1 $W/out)"
no_leftovers "after the anomaly run"

run "--conn-rate without --net egress is a usage error" 2 --conn-rate 10 -- true
run "--egress-limit without --net egress is a usage error" 2 --egress-limit 1000 -- true

run "--allow without --net egress is a usage error" 2 --allow $SRV/32 -- true
run "bad --allow is a usage error" 2 --net egress --allow 1.2.3.4/8:tcp -- true

kill $srv 2>/dev/null
echo "testhost net: $pass passed, $fail failed"
[ $fail = 0 ]
