#!/bin/sh
# Inside the test host (real KVM, root): `husk run --net egress` against a
# tiny HTTP server on a documentation address (198.51.100.1, TEST-NET-2,
# never routed) owned by the test host itself, and a stub upstream resolver
# for husk's DNS proxy.   net-inner.sh HUSK DNS_STUB
HUSK=$1 DNS_STUB=$2 IPR=${3:-}
FAR=203.0.113.7		# TEST-NET-3: not a host address, nobody answers
W=/tmp/net-inner
SRV=198.51.100.1
mkdir -p $W/www
. "$(dirname "$0")/lib.sh"

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
		guest_detail $W/console
	fi
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
run "without --allow the host's own address is refused" 1 --net egress --json -- sh -c "$GET"
el=$(( $(date +%s) - start ))
if [ $el -lt 60 ]; then ok "failed fast (${el}s)"; else bad "took ${el}s"; fi
has "drops counted" $W/out '"drops":[1-9]'
has "the host address is in the deny list" $W/out '"deny-range":[1-9]'
has "no anomaly in a normal run" $W/out '"anomaly":null'
has "denied destination listed" $W/out '"denied_destinations":\[{"address":"198.51.100.1","protocol":"tcp","port":8080,"reason":"deny-range"}'
no_leftovers "after the denied run"

run "an address nobody allowed is not reached" 1 --net egress --json \
	-- sh -c "echo x | busybox nc -w 2 $FAR 80"
has "drops are not-allowed" $W/out '"not-allowed":[1-9]'
has "denied destination $FAR listed" $W/out "\"address\":\"$FAR\",\"protocol\":\"tcp\",\"port\":80,\"reason\":\"not-allowed\""
echo "JSON $(tail -n 1 $W/out)"
no_leftovers "after the not-allowed run"

run "allowed port only: another port is dropped" 1 --net egress --json \
	--allow $SRV/32:tcp:9999 -- sh -c "$GET"
has "drops are port" $W/out '"port":[1-9]'

# The host's resolver is unreachable here (no route to it): without
# --allow-host nothing is forwarded, so that must not matter.
resolv_saved=$(cat /etc/resolv.conf 2>/dev/null)
echo "nameserver 192.0.2.99" >/etc/resolv.conf
run "guest has its address and resolv.conf" 0 --net egress \
	-- sh -c 'cat /proc/net/dev /etc/resolv.conf; cat /proc/net/route'
if [ -n "$resolv_saved" ]; then echo "$resolv_saved" >/etc/resolv.conf; else rm -f /etc/resolv.conf; fi
has "eth0 present" $W/out "eth0"
has "nameserver is the gateway" $W/out "nameserver 10.200."
has "default route" $W/out "eth0	00000000"

run "--net none has no eth0" 0 -- cat /proc/net/dev
if grep -q eth0 $W/out; then bad "eth0 with --net none"; show $W/out; else ok "no eth0 with --net none"; fi

# Anomaly: 100 quick connections (port 8081 is allowed but closed: each SYN
# is a new connection and is answered by a RST) against --conn-rate 4.
# Four loops at once and a low threshold: a loaded test host forks slowly, and
# one loop alone managed only about 6 connections a second there.
FLOOD="for l in 1 2 3 4; do (i=0; while [ \$i -lt 25 ]; do busybox nc -w 1 $SRV 8081 </dev/null; i=\$((i+1)); done) & done; wait; echo survived"
start=$(date +%s)
run "connection flood is killed" 125 --net egress --json --conn-rate 4 \
	--allow $SRV/32:tcp:8080-8081 -- sh -c "$FLOOD"
el=$(( $(date +%s) - start ))
if [ $el -lt 60 ]; then ok "killed fast (${el}s)"; else bad "took ${el}s"; fi
has "stderr names the anomaly" $W/err "killed: egress anomaly (new connections [0-9]* in 1000 ms > 4)"
has "JSON has the anomaly" $W/out '"anomaly":"killed: egress anomaly'
has "JSON error is the anomaly" $W/out '"error":"killed: egress anomaly'
if grep -q survived $W/out; then bad "the flood job finished"; else ok "the flood job did not finish"; fi
# Not a "JSON " line: net.test expects not-allowed drops in each of those.
echo "anomaly record: $(tail -n 1 $W/out)"
no_leftovers "after the anomaly run"

# Domain allowlist: husk's DNS proxy on the gateway forwards only listed
# names to the upstream (the stub) and opens the filter for their answers.
: >$W/dns.log
$DNS_STUB 127.0.0.1 5353 $W/dns.log web.test=$FAR &
stub=$!
sleep 0.5
export HUSK_DNS_UPSTREAM=127.0.0.1:5353
RESOLVE="busybox nslookup web.test; busybox nslookup secret-data.exfil.test; echo x | busybox nc -w 2 $FAR 80; true"
run "--allow-host resolves its name and refuses others" 0 --net egress --json \
	--allow-host web.test -- sh -c "$RESOLVE"
has "the allowed name resolved" $W/out "$FAR"
has "the unlisted name got NXDOMAIN" $W/out "NXDOMAIN"
has "JSON counts the allowed query" $W/out '"dns":{"queries":[1-9][0-9]*,"allowed":[1-9]'
has "JSON lists the refused name" $W/out '"refused_names":\[[^]]*"secret-data.exfil.test"'
has "the resolved address passed the filter" $W/out '"not-allowed":0,'
if grep -q "$FAR" $W/out && ! grep -q "\"address\":\"$FAR\"" $W/out; then
	ok "the resolved address is not among the denied"
else bad "resolved address denied or missing"; show $W/out; fi
has "upstream saw the allowed name" $W/dns.log "^web.test "
if grep -q exfil $W/dns.log; then bad "the refused name reached upstream"; show $W/dns.log
else ok "the refused name never reached upstream"; fi
has "no fault of the DNS helper" $W/out '"helper_error":null'
has "the supervisor opened the address" $W/out '"addresses_opened":[1-9]'
# The proxy runs in a helper process of its own while the job runs: a child
# of husk, not root, no capabilities, no_new_privs, seccomp, in the VM's
# cgroup; and it is gone with the run.
"$HUSK" run --net egress --allow-host web.test \
	-- sh -c "busybox nslookup web.test >/dev/null; sleep 6" >$W/out2 2>$W/err2 </dev/null &
hk=$!
hp= i=0
while [ -z "$hp" ] && [ $i -lt 50 ]; do
	# Read without forking: a scan that forks per process steals the
	# CPU the cold boot beside it needs.
	for c in /proc/[0-9]*/comm; do
		n= ; read -r n 2>/dev/null <$c
		[ "$n" = husk-dns ] && { hp=${c#/proc/}; hp=${hp%/comm}; }
	done
	[ -n "$hp" ] || sleep 0.5
	i=$((i + 1))
done
if [ -n "$hp" ]; then
	sleep 1
	st=/proc/$hp/status
	f() { awk -v k="$1:" '$1 == k { print $2 }' $st; }
	echo "    | DNS helper $hp: PPid $(f PPid) Uid $(f Uid) CapEff $(f CapEff) NoNewPrivs $(f NoNewPrivs) Seccomp $(f Seccomp)"
	if [ "$(f PPid)" = $hk ] && [ "$hp" != $hk ]; then ok "the DNS proxy is a child of husk ($hp), not husk ($hk)"
	else bad "DNS helper $hp: parent $(f PPid), husk is $hk"; fi
	u=$(f Uid)
	if [ -n "$u" ] && [ "$u" != 0 ]; then ok "the DNS helper runs as uid $u"
	else bad "the DNS helper runs as uid '$u'"; fi
	if [ "$(f CapEff)" = 0000000000000000 ] && [ "$(f NoNewPrivs)" = 1 ] && [ "$(f Seccomp)" = 2 ]
	then ok "the DNS helper has no capabilities, no_new_privs and seccomp"
	else bad "the DNS helper is not confined"; show $st; fi
	if grep -q 'husk/vm-' /proc/$hp/cgroup; then ok "the DNS helper is in the VM's cgroup"
	else bad "the DNS helper is outside the VM's cgroup"; show /proc/$hp/cgroup; fi
else
	bad "no husk-dns process while a job with --allow-host ran"
fi
wait $hk
st=$?
if [ $st = 0 ]; then ok "the job with the helper checked ran (exit 0)"
else bad "the job with the helper checked: exit $st"; show $W/out2 $W/err2; fi
if [ -n "$hp" ] && [ "$(cat /proc/$hp/comm 2>/dev/null)" = husk-dns ]; then
	bad "the DNS helper $hp outlived its run"
else ok "the DNS helper is gone with its run"; fi
seen=$(wc -l <$W/dns.log)
run "without --allow-host every name is refused" 0 --net egress --json \
	-- sh -c "busybox nslookup web.test; true"
has "NXDOMAIN without an allowlist" $W/out "NXDOMAIN"
has "JSON refused it" $W/out '"refused_names":\["web.test"\]'
if [ "$(wc -l <$W/dns.log)" = "$seen" ]; then ok "nothing forwarded without an allowlist"
else bad "upstream saw a query it should not have"; show $W/dns.log; fi
kill $stub 2>/dev/null
unset HUSK_DNS_UPSTREAM
no_leftovers "after the DNS runs"

# Bytes out past --egress-limit: the filter's event kills the VM.
# (stdin held open: nc closes the connection at its stdin's EOF)
sleep 120 | busybox nc -l -p 8082 >/dev/null &
sink=$!
sleep 0.3
run "upload past --egress-limit is killed" 125 --net egress --json --egress-limit 20000 \
	--allow $SRV/32:tcp:8082 -- sh -c "head -c 400000 /dev/zero | busybox nc -w 5 $SRV 8082; echo survived"
has "stderr names the byte limit" $W/err "killed: egress anomaly (bytes out [0-9]* > 20000)"
if grep -q survived $W/out; then bad "the upload job finished"; else ok "the upload job did not finish"; fi
kill $sink 2>/dev/null; pkill -f "sleep 120" 2>/dev/null
no_leftovers "after the egress-limit run"

# Scanning: more distinct destinations than --max-dests.
run "a scan past --max-dests is killed" 125 --net egress --max-dests 3 --allow 203.0.113.0/24 \
	-- sh -c "for i in 1 2 3 4 5 6; do echo x | busybox nc -w 1 203.0.113.\$i 80; done; echo survived"
has "stderr names the destination count" $W/err "killed: egress anomaly (distinct destinations 4 > 3)"
if grep -q survived $W/out; then bad "the scan finished"; else ok "the scan did not finish"; fi
no_leftovers "after the scan run"

# Later gateways and later host addresses. VM A runs with rules wider than
# any job should get (--allow 0.0.0.0/0 and 10.0.0.0/8); only then VM B
# starts, whose gateway 10.200.0.5 is a new address of this host (local
# delivery, not forwarding), and the host gains $LATE. A must reach
# neither, though an httpd answers on every host address.
LATE=198.51.100.99
rm -f $W/www/go $W/a-ready $W/hold
mkfifo $W/hold
exec 9<>$W/hold		# keeps the readiness listener's stdin open
busybox nc -l -p 8085 <$W/hold >$W/a-ready &
rdy=$!
httpd -f -p 8087 -h $W/www &
web=$!
A_JOB=$(cat <<EOF
echo up | busybox nc -w 3 $SRV 8085
i=0
while [ \$i -lt 150 ]; do
	printf 'GET /go HTTP/1.0\r\n\r\n' | busybox nc -w 2 $SRV 8080 | grep -q go-now && break
	sleep 1; i=\$((i+1))
done
echo "waited \$i"
for a in 10.200.0.5 $LATE; do
	printf 'GET /f HTTP/1.0\r\n\r\n' | busybox nc -w 3 \$a 8087 | grep -q 'hello from the net' && echo "reached \$a"
done
true
EOF
)
"$HUSK" run --console $W/console-a --timeout 300 --net egress --json --allow 0.0.0.0/0 \
	--allow 10.0.0.0/8 --allow $SRV/32:tcp:8080,8085 -- sh -c "$A_JOB" \
	>$W/a.out 2>$W/a.err </dev/null &
apid=$!
n=0
while ! grep -q up $W/a-ready 2>/dev/null && [ $n -lt 300 ]; do sleep 0.5; n=$((n + 1)); done
if grep -q up $W/a-ready; then ok "VM A's job is running"; else bad "VM A's job never said it runs"; show $W/a.err; fi
"$HUSK" run --console $W/console-b --mem 256 --net egress -- sleep 600 >$W/b.out 2>$W/b.err </dev/null &
bpid=$!
n=0
while ! ip -o addr show | grep -q 'inet 10.200.0.5 ' && [ $n -lt 300 ]; do sleep 0.5; n=$((n + 1)); done
if ip -o addr show | grep -q 'inet 10.200.0.5 '; then ok "VM B's gateway 10.200.0.5 is up after A started"
else bad "VM B's gateway never came up"; show $W/b.err; fi
ip addr add $LATE/32 dev lo
# Both answer here, from the host itself.
for a in 10.200.0.5 $LATE; do
	if printf 'GET /f HTTP/1.0\r\n\r\n' | busybox nc -w 3 $a 8087 | grep -q 'hello from the net'; then
		ok "the host's httpd answers on $a"
	else bad "no httpd on $a"; fi
done
sleep 1
echo go-now >$W/www/go
wait $apid
st=$?
if [ $st = 0 ]; then ok "VM A finished (exit 0)"; else bad "VM A: exit $st"; show $W/a.out $W/a.err; fi
has "A waited for the go" $W/a.out "waited [0-9]"
echo "record of VM A: $(tail -n 1 $W/a.out)"
if grep -q "^reached" $W/a.out; then bad "A reached a later address: $(grep '^reached' $W/a.out)"
else ok "A reached neither B's gateway nor $LATE under --allow 0.0.0.0/0 and 10.0.0.0/8"; fi
has "B's gateway denied as deny-range" $W/a.out '"address":"10.200.0.5","protocol":"tcp","port":8087,"reason":"deny-range"'
has "$LATE denied as deny-range" $W/a.out "\"address\":\"$LATE\",\"protocol\":\"tcp\",\"port\":8087,\"reason\":\"deny-range\""
kill $bpid 2>/dev/null
wait $bpid
kill $rdy $web 2>/dev/null
exec 9>&-
ip addr del $LATE/32 dev lo
no_leftovers "after the two VMs"

# The host-wide deny file: its ranges beat even an exact --allow; a
# malformed one stops the run before a VM starts.
printf '# site policy\n%s/32   # the test server\n' $SRV >$W/deny-ok
export HUSK_EGRESS_DENY_FILE=$W/deny-ok
run "a deny-file range beats an exact --allow" 1 --net egress --json --allow $SRV/32:tcp:8080 \
	-- sh -c "$GET"
has "the deny file's range is deny-range" $W/out '"denied_destinations":\[{"address":"198.51.100.1","protocol":"tcp","port":8080,"reason":"deny-range"}'
printf '10.0.0.0/8\nnot-a-range\n' >$W/deny-bad
export HUSK_EGRESS_DENY_FILE=$W/deny-bad
run "a malformed deny file stops the run" 125 --net egress -- true
has "the error names file and line" $W/err "deny-bad:2:"
unset HUSK_EGRESS_DENY_FILE
no_leftovers "after the deny-file runs"

run "--conn-rate without --net egress is a usage error" 2 --conn-rate 10 -- true
run "--egress-limit without --net egress is a usage error" 2 --egress-limit 1000 -- true

run "--allow without --net egress is a usage error" 2 --allow $SRV/32 -- true
run "bad --allow is a usage error" 2 --net egress --allow 1.2.3.4/8:tcp -- true

# --netns: the NIC's host end in a network namespace made here as an engine
# makes one per container (a veth to the test host, the namespace's own
# address 10.77.0.2 and default route). The guest's packets leave through
# the namespace, translated to its address, and the filter still decides.
if [ -x "$IPR" ] && [ -x /usr/sbin/nft ]; then
	$IPR netns add hn
	$IPR link add hv0 type veth peer name hv1
	$IPR link set hv1 netns hn
	$IPR addr add 10.77.0.1/24 dev hv0
	$IPR link set hv0 up
	$IPR -n hn link set lo up
	$IPR -n hn addr add 10.77.0.2/24 dev hv1
	$IPR -n hn link set hv1 up
	$IPR -n hn route add default via 10.77.0.1
	# An address only the namespace has (the host's own are denied anyway).
	$IPR -n hn addr add 203.0.113.77/32 dev lo
	# A server that logs its peers: who reached it tells where from.
	httpd -f -vv -p $SRV:8082 -h $W/www 2>$W/httpd-ns.log &
	nsrv=$!
	sleep 1
	NSGET="printf 'GET /f HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 $SRV 8082 | grep -q 'hello from the net' && echo got-it"
	"$HUSK" run --console $W/console --net egress --netns /run/netns/hn \
		--allow $SRV/32:tcp:8082 -- sh -c "$NSGET; sleep 4" >$W/out 2>$W/err </dev/null &
	job=$!
	n=0
	while ! $IPR -n hn -o link show 2>/dev/null | grep -q ' husk[0-9]*:' && [ $n -lt 240 ]; do
		sleep 0.5; n=$((n + 1))
	done
	if $IPR -n hn -o link show | grep -q ' husk[0-9]*:'; then
		ok "--netns: the tap is in the namespace while the VM runs"
	else bad "--netns: no tap in the namespace"; $IPR -n hn link show | show; fi
	if ip link | grep -q ' husk[0-9]*:'; then bad "--netns: a husk tap in the host's namespace"
	else ok "--netns: no tap in the host's namespace"; fi
	# The table follows the tap within the same set-up step: wait for it too.
	n=0
	while ! $IPR netns exec hn /usr/sbin/nft list tables | grep -q 'table ip husk_' &&
		[ $n -lt 20 ]; do
		sleep 0.2; n=$((n + 1))
	done
	if $IPR netns exec hn /usr/sbin/nft list tables | grep -q 'table ip husk_'; then
		ok "--netns: the namespace has the VM's translation table"
	else bad "--netns: no husk_ table in the namespace"; fi
	wait $job
	st=$?
	if [ $st = 0 ]; then ok "--netns: the allowed destination is reachable (exit 0)"
	else bad "--netns: exit $st, expected 0"; show $W/out $W/err; guest_detail $W/console; fi
	has "--netns: the job got the file" $W/out "got-it"
	has "--netns: the server saw the namespace's address" $W/httpd-ns.log "10\.77\.0\.2"
	hasnt "--netns: the server never saw the guest's own" $W/httpd-ns.log "10\.200\."
	if $IPR netns exec hn /usr/sbin/nft list tables | grep -q husk_; then
		bad "--netns: the translation table outlived the run"
	else ok "--netns: the translation table is gone with the run"; fi
	if $IPR -n hn -o link show | grep -q husk; then bad "--netns: a tap outlived the run"
	else ok "--netns: no tap left in the namespace"; fi

	run "--netns: the filter decides there too" 1 --net egress --netns /run/netns/hn --json \
		-- sh -c "$NSGET"
	has "--netns: the host's address is denied" $W/out '"deny-range":[1-9]'
	run "--netns: the namespace's own address is denied" 1 --net egress \
		--netns /run/netns/hn --json --allow 0.0.0.0/0 \
		-- sh -c "echo x | busybox nc -w 2 203.0.113.77 22"
	has "--netns: 203.0.113.77 is listed as denied" $W/out '"address":"203.0.113.77","protocol":"tcp","port":22,"reason":"deny-range"'
	# Names: the proxy's sockets live in the namespace, its upstream is the
	# resolver that namespace's programs see (/etc/netns/NAME/resolv.conf).
	unset HUSK_DNS_UPSTREAM
	mkdir -p /etc/netns/hn
	echo "nameserver 10.77.0.1" >/etc/netns/hn/resolv.conf
	: >$W/dns-ns.log
	$DNS_STUB 10.77.0.1 53 $W/dns-ns.log web.test=$FAR &
	nstub=$!
	sleep 0.5
	run "--netns --allow-host: the name resolves through the namespace's resolver" 0 \
		--net egress --netns /run/netns/hn --json --allow-host web.test \
		-- sh -c "busybox nslookup web.test; busybox nslookup other.test; true"
	has "--netns: the allowed name resolved" $W/out "$FAR"
	has "--netns: the other name got NXDOMAIN" $W/out "NXDOMAIN"
	has "--netns: /etc/netns/hn/resolv.conf's resolver saw the allowed name" $W/dns-ns.log \
		"^web.test "
	hasnt "--netns: and never the refused one" $W/dns-ns.log "other.test"
	kill $nstub 2>/dev/null
	rm -rf /etc/netns/hn
	run "--netns at a path that is no namespace is refused" 125 --net egress --netns $W/www \
		-- true
	has "--netns: the error says why" $W/err "is not a network namespace"
	run "--netns at a missing path is refused" 125 --net egress --netns /run/netns/nope \
		-- true
	has "--netns: the error names the path" $W/err "/run/netns/nope"
	kill $nsrv 2>/dev/null
	$IPR netns del hn
	$IPR link del hv0 2>/dev/null
	no_leftovers "after the --netns runs"
else
	skip "--netns part: iproute2's ip or nft(8) is not in the test host (tools/install-deps)"
fi

kill $srv 2>/dev/null
summary "testhost net"
