#!/bin/sh
# Inside the test host (real KVM): `husk run` with the default kernel and the
# minimal root image.   run-inner.sh HUSK WORKDIR
HUSK=$1 T=$2
W=/tmp/run-inner
mkdir -p $W
. "$(dirname "$0")/lib.sh"

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
same() {	# same NAME FILE EXPECTED_TEXT
	if [ "$(cat "$2")" = "$3" ]; then ok "$1"; else bad "$1: got '$(cat "$2")', want '$3'"; fi
}

run "job as agentuser with both streams and its exit code" 3 \
	-- sh -c 'id -u; id -g; echo out; echo err >&2; exit 3'
same "stdout carries uid/gid 1000 and the line" $W/out "$(printf '1000\n1000\nout')"
same "stderr carries its line" $W/err "err"

run "root file system is read-only" 1 -- sh -c 'echo x > /etc/x'
has "write to / refused" $W/err "Read-only file system"
run "the default root is the initramfs, read-only" 0 -- grep '^rootfs / rootfs ro' /proc/mounts

# The same tree as an ext4 disk image: the root on virtio-blk.
DISK=$(dirname "$HUSK")/images/rootfs.ext4
run "a disk root image (--rootfs ext4) boots the job" 3 --rootfs "$DISK" \
	-- sh -c 'grep " / " /proc/mounts; echo x > /etc/x; exit 3'
has "the disk root is ext4 on /dev/vda, read-only" $W/out '^/dev/root / ext4 ro'
has "and refuses writes" $W/err "Read-only file system"
# An archive whose header is a lie: the guest kernel finds no init in it.
{ printf 070701; head -c 4000 /dev/urandom; } >$W/bad.cpio
run "a broken cpio root image fails cleanly" 125 --timeout 60 --rootfs $W/bad.cpio -- true
has "and says the guest kernel found no root" $W/err 'guest kernel panic: .*Unable to mount root'
mkfifo $W/fifo
run "a FIFO as the root image is refused, not waited on" 125 --rootfs $W/fifo -- true
has "and says why" $W/err 'not a regular file or block device'
run "a FIFO as the kernel is refused, not waited on" 125 --kernel $W/fifo -- true
has "and says why" $W/err 'is not a regular file'

run "workspace is a size-limited tmpfs" 1 --workspace-size 4 \
	-- sh -c 'dd if=/dev/zero of=/tmp/workspace/fill bs=1M count=8 2>&1; exit 1'
has "filling it fails with ENOSPC" $W/out "No space left on device"

mkdir -p $W/results
run "--put/--get round trip" 0 --put "$T/blob.bin:in/blob.bin" --put "$T/tree:tree" \
	--get out:$W/results -- sh -c 'mkdir out && cp in/blob.bin out/ && cp -r tree out/ && ls -R out >/dev/null'
if cmp -s "$T/blob.bin" $W/results/out/blob.bin; then ok "bytes preserved"; else bad "blob differs"; fi
same "tree preserved" $W/results/out/tree/sub/b.txt "nested"

mkdir -p $W/fail-results
run "failed job commits no files" 7 --get out:$W/fail-results -- sh -c 'mkdir out; echo x > out/f; exit 7'
if [ -z "$(ls -A $W/fail-results)" ]; then ok "nothing written on failure"; else bad "files appeared: $(ls -A $W/fail-results)"; fi

start=$(date +%s)
run "job past --timeout is killed with status 124" 124 --timeout 2 -- sleep 60
el=$(( $(date +%s) - start ))
if [ $el -lt 40 ]; then ok "killed on time (${el}s)"; else bad "took ${el}s"; fi

run "job killed by a signal gives 128+N" 137 -- sh -c 'kill -9 $$'

echo "hello stdin" >$W/in
"$HUSK" run --stdin -- cat <$W/in >$W/out 2>$W/err
same "stdin reaches the job" $W/out "hello stdin"

run "command not found is 127" 127 -- /no/such/program

# The VM's host cgroup: while the guest boots and guest-init sets the job
# up, a CPU per vCPU and one more (at most the host's CPUs); from the job's
# start, --cpus.
ncpu=$(grep -c ^processor /proc/cpuinfo)
want_boot=$(( (ncpu < 2 ? ncpu : 2) * 100000 ))
"$HUSK" run --cpus 0.25 -- sh -c 'echo started; sleep 4' >$W/q.out 2>$W/q.err </dev/null &
qpid=$!
boot_q= job_q= i=0
while [ $i -lt 600 ] && kill -0 $qpid 2>/dev/null; do
	q=$(cat /sys/fs/cgroup/husk/vm-*/cpu.max 2>/dev/null | head -n 1)
	if grep -q started $W/q.out; then
		procs=$(cat /sys/fs/cgroup/husk/vm-*/cgroup.procs 2>/dev/null | tr '\n' ' ')
		[ -n "$q" ] && job_q=$q && break
	elif [ -n "$q" ] && [ -z "$boot_q" ] && [ "${q%% *}" != max ]; then
		# (A group just made reads "max" until husk has written its limit.)
		boot_q=$q
	fi
	sleep 0.05
	i=$((i + 1))
done
wait $qpid
[ "$boot_q" = "$want_boot 100000" ] && ok "boot quota: $boot_q" ||
	bad "boot quota: '$boot_q', want '$want_boot 100000' ($ncpu CPUs)"
[ "$job_q" = "25000 100000" ] && ok "job quota from its start: $job_q" ||
	bad "job quota: '$job_q', want '25000 100000'"
# KVM's kernel thread for the VM (NX huge page recovery, Linux < 6.13)
# stays in the caller's group: a group holding one never reports frozen.
set -- $procs
[ $# = 1 ] && ok "the VM's group holds the VM process alone ($1)" ||
	bad "the VM's group holds: '$procs' ($(for p in $procs; do cat /proc/$p/comm; done | tr '\n' ' '))"

"$HUSK" run --json -- sh -c 'echo hi' >$W/out 2>$W/err
st=$?
[ $st = 0 ] && ok "json run (exit 0)" || { bad "json run: exit $st"; show $W/err; }
echo "JSON $(tail -n 1 $W/out)"

run "usage error is 2" 2 --timeout nope -- true

run "output beyond --max-output is dropped and counted" 0 --max-output 1000 --json \
	-- sh -c 'head -c 5000 /dev/zero | tr "\\0" x; echo; echo err >&2'
n=$(head -n 1 $W/out | tr -d '\n' | wc -c)
if [ "$n" = 1000 ]; then ok "stdout cut at 1000 bytes"; else bad "stdout first line is $n bytes"; fi
has "truncation marker" $W/out "husk: stdout exceeded 1000 bytes"
has "dropped bytes counted" $W/out '"stdout_dropped":4001'
same "stderr under the cap untouched" $W/err "err"

run "job is unprivileged and sandboxed" 0 -- sh -c \
	'grep -E "^(CapEff|CapBnd|CapPrm|NoNewPrivs|Seccomp):" /proc/self/status; id -G'
has "no effective capabilities" $W/out "CapEff:	0000000000000000"
has "empty bounding set" $W/out "CapBnd:	0000000000000000"
has "no_new_privs" $W/out "NoNewPrivs:	1"
has "seccomp filter active" $W/out "Seccomp:	2"
same "no supplementary groups" $W/out "$(grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs|Seccomp):' $W/out; echo 1000)"

run "denied syscalls fail" 0 -- sh -c \
	'unshare -U true 2>&1 | head -1; mount -t tmpfs x /tmp/workspace 2>&1 | head -1; echo done'
has "unshare is refused" $W/out "unshare.*Operation not permitted"
has "mount is refused" $W/out "mount.*[Pp]ermission denied\|mount.*Operation not permitted"

# The job's own namespaces: with --verbose guest-init prints its own on the
# console ("husk-init: guest-init namespaces: pid:[N] mnt:[N] ..."), the job
# its. Without --verbose the console holds no such line.
NSLIST="pid mnt ipc uts net"
gi_ns() { sed -n 's/.*husk-init: guest-init namespaces: //p' $W/console | tr -d '\r'; }
job_ns() { tail -n 5 $W/out | tr '\n' ' '; }
if grep -q "guest-init namespaces" $W/console; then
	bad "guest-init printed its namespaces without --verbose"
else
	ok "guest-init keeps its namespaces off the console without --verbose"
fi
run "the job has its own PID namespace and /proc" 0 --verbose -- sh -c '
	echo /proc/[0-9]*; tr "\0" "\n" </proc/1/cmdline | head -n 1
	ps -o pid,comm >ps.txt; awk "NR > 1 { printf \"%s \", \$2 }" ps.txt; echo
	for n in '"$NSLIST"'; do readlink /proc/self/ns/$n; done'
head -n 3 $W/out >$W/head
same "only the job and its init in /proc, PID 1 is job-init, ps shows job-init, sh, ps" \
	$W/head "$(printf '/proc/1 /proc/2\njob-init\njob-init sh ps ')"
gns=$(gi_ns) jns=$(job_ns)
echo "    guest-init: $gns"
echo "    job:        $jns"
nsok=1
for n in $NSLIST; do
	g=$(echo "$gns" | tr ' ' '\n' | grep "^$n:\[") j=$(echo "$jns" | tr ' ' '\n' | grep "^$n:\[")
	if [ -z "$g" ] || [ -z "$j" ] || [ "$g" = "$j" ]; then nsok=; fi
done
if [ -n "$nsok" ]; then ok "pid, mnt, ipc, uts and net namespaces differ from guest-init's"
else bad "the job shares a namespace with guest-init (or one is missing)"; fi
run "the job's /dev: the usual devices, terminals and shared memory" 0 -- sh -c '
	ls -A /dev | tr "\n" " "; echo
	ls -A /dev/pts | tr "\n" " "; echo
	echo to-stderr >/dev/stderr; echo to-fd1 >/dev/fd/1; echo shm >/dev/shm/x; cat /dev/shm/x
	grep -E " /dev(/pts|/shm)? " /proc/mounts | cut -d" " -f2,3 | LC_ALL=C sort | tr "\n" " "; echo
	head -c 4 /dev/zero | od -An -tx1 | tr -d " "'
same "none of the VM's devices (disk, vsock, console, memory), the spec's set" $W/out \
	"$(printf 'fd full null ptmx pts random shm stderr stdin stdout tty urandom zero \nptmx \nto-fd1\nshm\n/dev tmpfs /dev/pts devpts /dev/shm tmpfs \n00000000')"
has "/dev/stderr is the job's stderr" $W/err "^to-stderr$"
run "--hostname names the job's machine" 0 --hostname box-7.example -- sh -c 'hostname; cat /proc/sys/kernel/hostname'
same "hostname says box-7.example" $W/out "$(printf 'box-7.example\nbox-7.example')"
run "a bad --hostname is a usage error" 2 --hostname 'a;b' -- true
has "and says why" $W/err "is not a host name"

# --user root: uid 0 in the guest with a container engine's default
# capabilities (docker's 0xa80425fb), nothing more: seccomp still refuses
# mounts, the root image stays read-only; agentuser by default.
run "--user root runs the job as root" 0 --user root -- sh -c \
	'id -u; echo $USER; grep -E "^Cap(Eff|Bnd)" /proc/self/status; echo x >w; chown 4242 w && stat -c %u w; mount -t tmpfs t /mnt 2>/dev/null || echo no-mount; (echo y >/etc/y) 2>/dev/null || echo ro-root'
same "--user root: uid 0, the container set, chown works, no mount, read-only root" $W/out "$(printf '0\nroot\nCapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\n4242\nno-mount\nro-root')"
run "the default user is agentuser, without capabilities" 0 -- sh -c \
	'id -u; echo $USER; grep -E "^CapEff" /proc/self/status'
same "agentuser: uid 1000, no capabilities" $W/out "$(printf '1000\nagentuser\nCapEff:\t0000000000000000')"
run "--user with another name is a usage error" 2 --user nobody -- true

run "--rlimit: the job's own limits" 0 --rlimit nofile=100:200 --rlimit nproc=unlimited \
	--rlimit nofile=300:100000 -- sh -c 'ulimit -Sn; ulimit -Hn; ulimit -Hu'
same "soft and hard apart, the last of a resource wins, above husk's default hard limit" \
	$W/out "$(printf '300\n100000\nunlimited')"
run "--rlimit of no resource is a usage error" 2 --rlimit rss=1 -- true
run "--tmpfs: the job's own tmpfs mounts" 0 --tmpfs /tmp/scratch:size=2m,noexec \
	--tmpfs /root:mode=1777 -- sh -c 'for m in /tmp/scratch /root; do
	grep " $m " /proc/mounts | cut -d" " -f3,4 | cut -d, -f1-4; done
	echo data >/tmp/scratch/f && cat /tmp/scratch/f; stat -c %a /root
	head -c 3000000 /dev/zero >/tmp/scratch/big 2>/dev/null || echo full'
same "a tmpfs made under /tmp and one on the image's /root, their size and flags" $W/out \
	"$(printf 'tmpfs rw,nosuid,nodev,noexec\ntmpfs rw,nosuid,nodev,relatime\ndata\n1777\nfull')"
run "--tmpfs where the read-only image has no directory: a VM failure with the reason" 125 \
	--tmpfs /no/such/dir -- true
has "and says why" $W/err "read-only"
run "--tty: the job's stdio is a terminal" 5 --tty -- sh -c \
	'if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then echo all-tty; fi; ls -l /proc/self/fd/2; echo to-err >&2; exit 5'
has "stdin, stdout and stderr are ttys" $W/out "all-tty"
has "a pty of the job's devpts" $W/out "/dev/pts/0"
has "stderr comes on the terminal, with stdout" $W/out "to-err"
printf 'hello\n' | "$HUSK" run --tty --stdin -- sh -c 'read l; echo got-$l' >$W/out 2>$W/err
has "--tty --stdin: what is typed reaches the job" $W/out "got-hello"
printf 'one\ntwo\n' | "$HUSK" run --tty --stdin --timeout 60 -- sh -c 'cat; echo cat-ended' >$W/out 2>$W/err
st=$?
if [ $st = 0 ] && grep -q "cat-ended" $W/out && [ "$(grep -c '^two' $W/out)" = 2 ]; then
	ok "--tty --stdin: the end of stdin is the terminal's EOF, the job's cat ends"
else bad "--tty --stdin at the end of stdin: exit $st"; show $W/out $W/err; fi
run "without --net the job's network is lo alone" 0 -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
same "only lo" $W/out "lo"
run "with --net egress the job keeps guest-init's network namespace" 0 --net egress --verbose \
	-- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort | tr "\n" " "; echo
		readlink /proc/self/ns/net; readlink /proc/self/ns/pid'
g=$(gi_ns)
head -n 1 $W/out >$W/head
same "eth0 visible" $W/head "eth0 lo "
if [ "$(sed -n 2p $W/out)" = "$(echo "$g" | tr ' ' '\n' | grep '^net:')" ] &&
   [ "$(sed -n 3p $W/out)" != "$(echo "$g" | tr ' ' '\n' | grep '^pid:')" ]; then
	ok "same network namespace, own PID namespace"
else
	bad "network/PID namespaces: job $(tail -n 2 $W/out | tr '\n' ' '), guest-init $g"
fi

# The job's memory limit: guest RAM - 16 MiB - RAM/16 (224 MiB of 256).
run "--mem 256 limits the job's cgroup" 0 --mem 256 -- cat /sys/fs/cgroup/job/memory.max
same "memory.max is 224 MiB" $W/out $((224 << 20))
MIB='s = "x"; for (i = 0; i < 20; i++) s = s s'
run "an allocation under the limit works" 0 --mem 256 \
	-- awk "BEGIN { $MIB; for (n = 0; n < 128; n++) a[n] = s n; print n \" MiB\" }"
same "128 MiB held" $W/out "128 MiB"
run "allocating past the limit is OOM-killed, guest-init reports it" 137 --mem 256 \
	-- awk "BEGIN { $MIB; while (1) a[n++] = s n }"
has "stderr names the memory limit" $W/err "husk-init: the job reached its memory limit of 224 MiB"

run "environment reaches the job" 0 --env GREETING=hi -- sh -c 'echo "$GREETING $USER $HOME"'
same "env values" $W/out "hi agentuser /tmp/workspace"

host_now=$(date +%s)
run "guest clock set from the host" 0 -- date +%s
gd=$(cat $W/out)
d=$((gd - host_now)); [ $d -lt 0 ] && d=$((-d))
if [ $d -lt 30 ]; then ok "guest clock within ${d}s of the host"; else bad "guest clock off by ${d}s"; fi

# Sleeps that outlive the bomb: it must reach the limit however slowly the
# test host forks (about 10 per second under load, so 512 take a minute).
run "fork bomb is contained by the pids limit" 0 --timeout 180 -- sh -c \
	'( while :; do sleep 1000 & done ) 2>/dev/null; echo contained'
has "the bomb hit the limit and the job went on" $W/out "contained"

# An idle VM costs no wake-ups: while the job sleeps (no output, no
# deadline near), the VM process's event loop stays asleep. Its main
# thread's voluntary context switches over 2 s (a 20 ms timer made ~100).
"$HUSK" run -- sh -c 'echo go; sleep 8' >$W/out 2>$W/err </dev/null &
hp=$!
vp= i=0
while [ $i -lt 600 ] && ! grep -q go $W/out 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
for f in /proc/[0-9]*/status; do
	[ "$(sed -n 's/^PPid:[[:space:]]*//p' "$f" 2>/dev/null)" = "$hp" ] && vp=${f%/status} && vp=${vp#/proc/}
done
csw() { sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' /proc/$vp/status 2>/dev/null; }
if [ -z "$vp" ] || ! grep -q go $W/out; then
	bad "idle VM: the job did not start or its VM process was not found"
	show $W/out $W/err
else
	c0=$(csw)
	sleep 2
	c1=$(csw)
	n=$((c1 - c0))
	if [ -n "$c0" ] && [ -n "$c1" ] && [ $n -lt 15 ]; then
		ok "an idle VM's event loop sleeps ($n wake-ups in 2 s)"
	else
		bad "an idle VM's event loop woke ${n:-?} times in 2 s"
	fi
fi
wait $hp

# SIGTERM mid-job: the VM is torn down, husk says why, nothing is left behind.
"$HUSK" run -- sleep 60 >$W/out 2>$W/err </dev/null &
hp=$!
sleep 6
kill -TERM $hp
wait $hp
st=$?
[ $st = 143 ] && ok "SIGTERM stops the run with 128+15" || { bad "SIGTERM: exit $st"; show $W/err; }
if ls -d ${TMPDIR:-/tmp}/husk-run-* >/dev/null 2>&1; then
	bad "runtime directories left behind: $(ls -d ${TMPDIR:-/tmp}/husk-run-*)"
else
	ok "no runtime directory left behind"
fi
if ls -A $W/results | grep -q '^\.husk-get'; then bad "staging directory left in results"; else ok "no staging directory left"; fi

echo "testhost run: $pass passed, $fail failed"
[ $fail = 0 ]
