/*
 * netns: a network namespace the caller made (`husk run --netns PATH`, an
 * OCI bundle's network namespace) as the home of the VM's tap.
 *
 * The tap is made in husk's own namespace and then moved, so its index comes
 * from the host's counter and stays unique among husk's taps: the egress
 * filter keys its maps by interface index. Inside the namespace the tap is
 * the guest's point-to-point link as on the host, and the namespace's own
 * routes carry the guest's packets on, source-translated to the namespace's
 * address by one nftables table per VM (nft(8) run inside the namespace), so
 * the engine's network sees a container like any other. That needs IPv4
 * forwarding on in the namespace: it is the container's network (the VM is
 * the container), so husk turns it on there, and never in the host's own
 * namespace, which netns_open() refuses.
 *
 * Functions return 0 (or an fd) or -errno with husk_lasterr() set.
 */
#ifndef HUSK_NETNS_H
#define HUSK_NETNS_H

#include <netinet/in.h>

/*
 * Open PATH (/run/netns/NAME, /proc/PID/ns/net): a network namespace, or an
 * error; -EPERM for the host's own (the one husk runs in, or the initial
 * one), where netns_nat_add() would turn the host into a router.
 */
int netns_open(const char *path);

/*
 * Switch the calling thread into nsfd's namespace. Returns an fd of the one
 * it was in, for netns_leave().
 */
int netns_enter(int nsfd);

/*
 * Back to the namespace saved by netns_enter() (closed). A thread that
 * cannot go back must not open another socket: the caller fails the run.
 */
int netns_leave(int saved);

/*
 * Forwarding on in nsfd's namespace and table "ip husk_<slot>" there:
 * the guest's address translated to the namespace's own on every
 * interface but its tap. netns_nat_del() removes the table again.
 */
int netns_nat_add(int nsfd, unsigned slot, const char *tap, struct in_addr guest);
int netns_nat_del(int nsfd, unsigned slot);

#endif
