#!/bin/sh
# Runs inside the aarch64 test host (real, nested arm64 KVM): the arm64 husk
# boots the arm64 guest kernel, then runs jobs in it, once per capability.
#   arm64-inner.sh HUSK KERNEL_DIR WORKDIR
# WORKDIR holds mini.cpio (mini-init) and rootfs.ext4 (guest-init + busybox).
HUSK=$1 K=$2 T=$3
W=/tmp/arm64-inner
SHOW_LINES=25
mkdir -p $W
. "$(dirname "$0")/lib.sh"

# timings_ordered NAME: first_kvm_run <= init <= exit, all measured.
timings_ordered() {
	f=$(jnum first_kvm_run $W/out) i=$(jnum init $W/out) e=$(jnum exit $W/out)
	if [ "${f:--1}" -gt 0 ] && [ "${i:--1}" -ge "$f" ] && [ "${e:--1}" -ge "$i" ]; then
		ok "$1: phase timestamps ordered (first_kvm_run=${f}us init=${i}us exit=${e}us)"
	else
		bad "$1: phase timestamps not ordered: $(tail -n 1 $W/out)"
	fi
}

same() { if [ "$(cat "$2")" = "$3" ]; then ok "$1"; else bad "$1: got '$(cat "$2")', want '$3'"; fi; }

BOOT="boot --kernel $K/Image --initrd $T/mini.cpio --console $W/console --json --timeout 300"

run "Image boots to init and powers off" 0 $BOOT
has "init reached with one CPU, husk registers answer" $W/console \
	'HUSK-MINI-INIT: reached userspace, cpus=1, husk-port=yes'
has "JSON says poweroff" $W/out '"reason":"poweroff"'
has "the guest found its GICv3" $W/console 'GICv3'
has "the guest's clock is the architected timer" $W/console 'arch_timer'
timings_ordered "Image"

run "Image with --vcpus 2 (the second started through PSCI)" 0 $BOOT --vcpus 2
has "guest sees 2 CPUs" $W/console 'HUSK-MINI-INIT: reached userspace, cpus=2,'

run "missing init panics: status 3" 3 $BOOT --cmdline "rdinit=/nonexistent init=/nonexistent"
has "panic reported" $W/err 'husk: panic: guest kernel panic: Kernel panic - not syncing'
has "JSON says panic" $W/out '"reason":"panic"'

run "a bad Image is refused" 1 boot --kernel $T/mini.cpio --timeout 60
has "the error names the format" $W/err 'not an arm64 Image'

RUN="run --kernel $K/Image --rootfs $T/rootfs.ext4 --console $W/console"

run "job as agentuser with both streams and its exit code" 3 \
	$RUN -- sh -c 'id -u; echo out; echo err >&2; uname -m; exit 3'
same "stdout: uid 1000, the line, the guest's machine" $W/out "$(printf '1000\nout\naarch64')"
same "stderr carries its line" $W/err "err"

run "root file system is read-only" 1 $RUN -- sh -c 'echo x > /etc/x'
has "write to / refused" $W/err "Read-only file system"

mkdir -p $W/results
echo "arm64 bytes" >$W/in.txt
run "--put/--get round trip" 0 $RUN --put "$W/in.txt:in.txt" --get out:$W/results \
	-- sh -c 'mkdir out && cp in.txt out/'
if cmp -s $W/in.txt $W/results/out/in.txt; then ok "bytes preserved"; else bad "file differs"; fi

# Templates: every register KVM lists, the MP state and the GICv3's state
# saved at guest-init's HELLO; clones start from there.
TPL="--template-dir $W/tpl"
run "template create" 0 template create base $TPL --kernel $K/Image --rootfs $T/rootfs.ext4 \
	--console $W/console
has "create says what it saved" $W/err "template base made in"
for i in 1 2; do
	run "job $i from the template" 0 run --template base $TPL --console $W/console \
		-- sh -c 'echo from-template; uname -m; head -c 16 /dev/urandom | od -An -tx1'
	sed -n 1,2p $W/out >$W/c$i.head
	sed -n 3p $W/out >$W/c$i.rand
	same "clone $i ran its job" $W/c$i.head "$(printf 'from-template\naarch64')"
done
if [ -s $W/c1.rand ] && ! cmp -s $W/c1.rand $W/c2.rand; then ok "two clones read different random bytes"
else bad "clones' random bytes: '$(cat $W/c1.rand)' and '$(cat $W/c2.rand)'"; fi
mkdir -p $W/results-tpl
run "a clone takes files in and out" 0 run --template base $TPL --put "$W/in.txt:in.txt" \
	--get out:$W/results-tpl -- sh -c 'mkdir out && cp in.txt out/'
if cmp -s $W/in.txt $W/results-tpl/out/in.txt; then ok "clone: bytes preserved"; else bad "clone: file differs"; fi
run "a two-vCPU template" 0 template create smp $TPL --vcpus 2 --kernel $K/Image \
	--rootfs $T/rootfs.ext4 --console $W/console
run "its clone sees two CPUs" 0 run --template smp $TPL -- sh -c 'grep -c ^processor /proc/cpuinfo'
same "two processors" $W/out 2
HUSK_FINGERPRINT_EXTRA=another-host run "a template from another kind of host is refused" 125 \
	run --template base $TPL -- true
has "the reason" $W/err "another kind of host"

# husk serve: jobs cold and from its warm pool of the base template.
HUSK_KERNEL=$K/Image HUSK_ROOTFS=$T/rootfs.ext4 "$HUSK" serve --socket $W/serve.sock \
	$TPL --pool base=1 >$W/serve.out 2>$W/serve.err &
serve=$!
i=0
while [ ! -S $W/serve.sock ] && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
run "a cold job through husk serve" 0 run --server $W/serve.sock -- sh -c 'echo served; uname -m'
same "its output" $W/out "$(printf 'served\naarch64')"
run "a job from husk serve's pool" 0 run --server $W/serve.sock --template base -- echo pooled
same "its output" $W/out pooled
kill $serve; wait $serve
st=$?
if [ $st = 0 ]; then ok "husk serve ends cleanly on SIGTERM"; else bad "husk serve: exit $st"; show $W/serve.err; fi

# Hostile jobs, a subset of the audit (tests/audit): each is contained by
# the guest's limits and ends with its own status, the VM torn down.
run "fork bomb (endless) is killed at --timeout" 124 $RUN --timeout 10 --json \
	-- sh -c 'b() { b | b & }; (b) 2>/dev/null; exec sleep 600'
has "fork bomb: reason on stderr" $W/err 'job timed out after 10 s and was killed'
has "fork bomb: the VM process ran in the full jail" $W/out '"jail":{"confined":true'
run "memory exhaustion is the job's problem, not the VM's" 3 $RUN --mem 256 --timeout 80 \
	-- sh -c 'awk "BEGIN { s = \"x\"; while (1) s = s s }" 2>&1; echo "awk-status=$?"; exit 3'
has "memory: the hog died, the job's shell carried on" $W/out '^awk-status=[1-9]'
run "job killed by a signal gives 128+N" 137 $RUN -- sh -c 'kill -9 $$'
if ! command -v ps >/dev/null; then bad "no ps here to look for husk processes"
elif ps -o args | grep -v grep | grep -q "husk run"; then bad "a husk process is left"; ps -o pid,args | show; else ok "no husk process left"; fi

# The egress filter on the tap: its BPF program is the same bytecode on
# every arch. The "internet" is a documentation address on the test host's
# own lo, served by busybox httpd; the guest reaches it through its tap.
SRV=198.51.100.1 FAR=203.0.113.7
ip addr add $SRV/32 dev lo 2>/dev/null
mkdir -p $W/www
echo "hello from the net" >$W/www/f
httpd -f -p $SRV:8080 -h $W/www &
srv=$!
GET="printf 'GET /f HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 $SRV 8080 | grep -q 'hello from the net' && echo got-it"
run "allowed destination is reachable" 0 $RUN --net egress --allow $SRV/32:tcp:8080 -- sh -c "$GET"
has "the job got the file" $W/out "got-it"
run "an address nobody allowed is not reached" 1 $RUN --net egress --json \
	-- sh -c "echo x | busybox nc -w 2 $FAR 80"
has "drops are not-allowed" $W/out '"not-allowed":[1-9]'
has "denied destination $FAR listed" $W/out "\"address\":\"$FAR\",\"protocol\":\"tcp\",\"port\":80,\"reason\":\"not-allowed\""
run "allowed port only: another port is dropped" 1 $RUN --net egress --json \
	--allow $SRV/32:tcp:9999 -- sh -c "$GET"
has "drops are port" $W/out '"port":[1-9]'
if ip link | grep -q husk; then bad "a husk link is left"; else ok "no husk link left"; fi
kill $srv 2>/dev/null

echo "testhost arm64: $pass passed, $fail failed"
[ $fail = 0 ]
