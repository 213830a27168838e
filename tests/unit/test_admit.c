/*
 * Unit tests for serve/admit: what husk serve does with a run or create
 * request given its limits and what is in use. A request that can never
 * fit is refused at once; one that waits never blocks the ones behind it
 * that fit until it has aged; a uid's share bounds its sandboxes, memory
 * and queue places; a queued request expires; idle pooled clones are given
 * up only for a request they make room for.
 */
#include <errno.h>
#include <string.h>

#include "serve/admit.h"
#include "suites.h"

#define SEC 1000000ull

/* The daemon of the review's example: 4 VMs, 4096 MiB, a queue of 3. */
static const struct admit_limits lim = {
	.max_vms = 4, .max_mem_mib = 4096, .max_queue = 3, .max_vcpus = 8,
	.uid_vms = 2, .uid_mem_mib = 2048, .uid_queue = 2,
	.age_us = 30 * SEC, .wait_us = 600 * SEC,
};

static struct admit_req req(uint64_t mem)
{
	return (struct admit_req){ .mem_mib = mem, .vcpus = 1 };
}

START_TEST(never_fits_is_refused)
{
	struct admit_req r = req(65536);
	char why[256];

	ck_assert_int_eq(admit_check(&lim, &r, why, sizeof(why)), -E2BIG);
	ck_assert_ptr_nonnull(strstr(why, "65536 MiB"));
	ck_assert_ptr_nonnull(strstr(why, "max_mem 4096 MiB"));
	/* Under max_mem but over one user's share. */
	r = req(3000);
	ck_assert_int_eq(admit_check(&lim, &r, why, sizeof(why)), -E2BIG);
	ck_assert_ptr_nonnull(strstr(why, "uid_max_mem 2048"));
	/* Root has no share, only the daemon's limits. */
	r.exempt = true;
	ck_assert_int_eq(admit_check(&lim, &r, why, sizeof(why)), 0);
	r = req(512);
	r.vcpus = 9;
	ck_assert_int_eq(admit_check(&lim, &r, why, sizeof(why)), -E2BIG);
	ck_assert_ptr_nonnull(strstr(why, "max_vcpus 8"));
	r.vcpus = 8;
	ck_assert_int_eq(admit_check(&lim, &r, why, sizeof(why)), 0);
}
END_TEST

START_TEST(small_passes_a_waiting_large)
{
	/* Three sandboxes of 1024 MiB run: 1024 MiB and one VM are left. */
	struct admit_use u = { .vms = 3, .mem_mib = 3072 };
	struct admit_req big = req(2048), small = req(64), q[1];
	unsigned which;

	ck_assert_int_eq(admit_fit(&lim, &u, &big), ADMIT_WAIT_ROOM);
	ck_assert_int_eq(admit_new(&lim, &u, NULL, 0, &big), ADMIT_QUEUE);
	q[0] = big;
	u.queued = 1;
	/* Not aged yet: the small one starts at once. */
	q[0].waited_us = 5 * SEC;
	ck_assert_int_eq(admit_new(&lim, &u, q, 1, &small), ADMIT_START);
	/* Nothing in the queue can start, and there is no clone to give up. */
	ck_assert_int_eq(admit_next(&lim, &u, q, 1, &which), ADMIT_NONE);
}
END_TEST

START_TEST(aged_request_holds_its_room)
{
	struct admit_use u = { .vms = 3, .mem_mib = 3072, .queued = 2 };
	struct admit_req q[2] = { req(2048), req(64) }, pooled = req(512);
	unsigned which = 99;

	q[0].waited_us = 31 * SEC;
	q[1].waited_us = 1 * SEC;
	/* The small one behind it would fit, but the room is the big one's. */
	ck_assert_int_eq(admit_next(&lim, &u, q, 2, &which), ADMIT_NONE);
	ck_assert_int_eq(admit_new(&lim, &u, q, 2, &q[1]), ADMIT_QUEUE);
	/* A pooled clone takes no room: it still goes. */
	pooled.pooled = true;
	ck_assert_int_eq(admit_new(&lim, &u, q, 2, &pooled), ADMIT_START);
	/* Room comes back: the big one first, then the small one. */
	u.vms = 1;
	u.mem_mib = 1024;
	ck_assert_int_eq(admit_next(&lim, &u, q, 2, &which), ADMIT_DEQUEUE);
	ck_assert_uint_eq(which, 0);
	u.vms = 2;
	u.mem_mib = 3072;
	u.queued = 1;
	ck_assert_int_eq(admit_next(&lim, &u, &q[1], 1, &which), ADMIT_DEQUEUE);
	ck_assert_uint_eq(which, 0);
}
END_TEST

START_TEST(older_than_the_holder_goes_first)
{
	/* q[0] waited for its uid's own sandbox, which ended; q[1] holds the room. */
	struct admit_use u = { .vms = 3, .mem_mib = 3072, .queued = 2 };
	struct admit_req q[2] = { req(64), req(2048) };
	unsigned which = 99;

	q[0].waited_us = 50 * SEC;
	q[1].waited_us = 40 * SEC;
	ck_assert_int_eq(admit_next(&lim, &u, q, 2, &which), ADMIT_DEQUEUE);
	ck_assert_uint_eq(which, 0);
}
END_TEST

START_TEST(queued_request_expires)
{
	struct admit_use u = { .vms = 4, .mem_mib = 4096, .queued = 2 };
	struct admit_req q[2] = { req(64), req(64) };
	unsigned which = 99;

	q[0].waited_us = 100 * SEC;
	q[1].waited_us = 600 * SEC;
	ck_assert_int_eq(admit_next(&lim, &u, q, 2, &which), ADMIT_EXPIRE);
	ck_assert_uint_eq(which, 1);
	q[1].waited_us = 599 * SEC;
	ck_assert_int_eq(admit_next(&lim, &u, q, 2, &which), ADMIT_NONE);
}
END_TEST

START_TEST(uid_share)
{
	struct admit_use u = { .vms = 2, .mem_mib = 1024, .queued = 2 };
	struct admit_req r = req(512), q[2];
	unsigned which = 99;

	/* Its uid runs two sandboxes already: it waits, though the host has room. */
	r.uid.vms = 2;
	r.uid.mem_mib = 1024;
	ck_assert_int_eq(admit_fit(&lim, &u, &r), ADMIT_WAIT_UID);
	ck_assert_int_eq(admit_new(&lim, &u, NULL, 0, &r), ADMIT_QUEUE);
	/* Its memory share counts too. */
	r.uid.vms = 1;
	r.uid.mem_mib = 1600;
	ck_assert_int_eq(admit_fit(&lim, &u, &r), ADMIT_WAIT_UID);
	/* ... and its share of the queue. */
	r.uid.queued = 2;
	ck_assert_int_eq(admit_new(&lim, &u, NULL, 0, &r), ADMIT_BUSY);
	/* Root has no share. */
	r.exempt = true;
	ck_assert_int_eq(admit_fit(&lim, &u, &r), ADMIT_FITS);
	ck_assert_int_eq(admit_new(&lim, &u, NULL, 0, &r), ADMIT_START);
	/* An aged request of a uid at its share holds nothing: another uid's goes. */
	q[0] = req(512);
	q[0].uid.vms = 2;
	q[0].waited_us = 100 * SEC;
	q[1] = req(512);
	q[1].waited_us = 1 * SEC;
	ck_assert_int_eq(admit_next(&lim, &u, q, 2, &which), ADMIT_DEQUEUE);
	ck_assert_uint_eq(which, 1);
}
END_TEST

START_TEST(queue_full_is_busy)
{
	struct admit_use u = { .vms = 4, .mem_mib = 2048, .queued = 3 };
	struct admit_req r = req(64);

	ck_assert_int_eq(admit_new(&lim, &u, NULL, 0, &r), ADMIT_BUSY);
	u.queued = 2;
	ck_assert_int_eq(admit_new(&lim, &u, NULL, 0, &r), ADMIT_QUEUE);
}
END_TEST

START_TEST(eviction_only_when_it_makes_room)
{
	/* Two idle clones of 512 MiB among 4 VMs: a request of 1536 needs both gone. */
	struct admit_use u = { .vms = 4, .mem_mib = 3584, .idle_pooled = 2,
			       .idle_pooled_mem = 1024, .queued = 1 };
	struct admit_req q[1] = { req(1536) };
	unsigned which = 99;

	ck_assert_int_eq(admit_next(&lim, &u, q, 1, &which), ADMIT_EVICT);
	ck_assert_uint_eq(which, 0);
	/* One is ending: not enough yet, give up the other too. */
	u.idle_pooled = 1;
	u.idle_pooled_mem = 512;
	u.ending = 1;
	u.ending_mem = 512;
	ck_assert_int_eq(admit_next(&lim, &u, q, 1, &which), ADMIT_EVICT);
	/* Both ending make room: wait for them, give up nothing more. */
	u.idle_pooled = 0;
	u.idle_pooled_mem = 0;
	u.ending = 2;
	u.ending_mem = 1024;
	ck_assert_int_eq(admit_next(&lim, &u, q, 1, &which), ADMIT_NONE);
	/* A request that giving up every clone would not make room for: none goes. */
	u = (struct admit_use){ .vms = 4, .mem_mib = 4096, .idle_pooled = 1,
				.idle_pooled_mem = 256, .queued = 1 };
	q[0] = req(1024);
	ck_assert_int_eq(admit_next(&lim, &u, q, 1, &which), ADMIT_NONE);
	/* One waiting only for its uid: clones stay. */
	u = (struct admit_use){ .vms = 4, .mem_mib = 3584, .idle_pooled = 2,
				.idle_pooled_mem = 1024, .queued = 1 };
	q[0] = req(512);
	q[0].uid.vms = 2;
	ck_assert_int_eq(admit_next(&lim, &u, q, 1, &which), ADMIT_NONE);
}
END_TEST

Suite *admit_suite(void)
{
	Suite *s = suite_create("admit");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, never_fits_is_refused);
	tcase_add_test(tc, small_passes_a_waiting_large);
	tcase_add_test(tc, aged_request_holds_its_room);
	tcase_add_test(tc, older_than_the_holder_goes_first);
	tcase_add_test(tc, queued_request_expires);
	tcase_add_test(tc, uid_share);
	tcase_add_test(tc, queue_full_is_busy);
	tcase_add_test(tc, eviction_only_when_it_makes_room);
	suite_add_tcase(s, tc);
	return s;
}
