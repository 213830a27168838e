# Sourced by the benchmarks' inner scripts, inside the test host.
# scrub: when SCRUB is "on", one write pass over the test host's free
# memory. Its QEMU (TCG) drops the code it translated from a page when the
# page is first written again, so a guest whose RAM lands where an earlier
# guest ran code pays for the drop in whatever it writes first: the guest
# kernel's struct pages took 160-360 ms to set up instead of 6-10 right
# after a scrub. Hardware has no such cost, and how much of it a boot
# meets depends on the runs before it, whichever VMM it is.
# The page cache stays: the guests' RAM comes from free memory, and a
# cache dropped here would have every VMM read its kernel and itself
# through the test host's share again.
# The tmpfs takes huge pages because the guests' RAM does (THP). Filled
# with small pages, it left some free 2 MiB blocks unwritten, and a boot
# after a run still spent 100-250 ms clearing such a block in the THP
# fault while it loaded its kernel (perf: clear_page_rep under
# do_huge_pmd_anonymous_page). Filled with huge pages, the VM process's
# CPU time to its first KVM_RUN stayed within 50-92 ms in the same runs.
scrub() {
	[ "$SCRUB" = on ] || return 0
	n=$(awk '/^MemFree:/ { print int($2 / 1024) - 160 }' /proc/meminfo)
	[ "$n" -gt 0 ] || return 0
	mkdir -p /tmp/scrub
	mount -t tmpfs -o size="$n"m,huge=always scrub /tmp/scrub 2>/dev/null ||
		mount -t tmpfs -o size="$n"m scrub /tmp/scrub || return 0
	dd if=/dev/zero of=/tmp/scrub/z bs=1M count="$n" 2>/dev/null
	umount /tmp/scrub
}
