/*
 * accounts: the host's users and groups as /etc/passwd and /etc/group list
 * them, read without NSS.
 *
 * husk is a static executable (a cold start spends no time in the dynamic
 * loader), and a static glibc reaches NSS modules only by loading shared
 * objects of the very glibc release it was built with: a glibc update on the
 * host would break every lookup. husk asks two things of the account
 * database (is this uid or gid anyone's, which groups is a user in), and
 * both are about local accounts: the jail's uid range must not hold a local
 * user, and husk serve's --group names a local group. Accounts that only a
 * directory service (LDAP, sssd) knows are not seen; give such ids by number.
 */
#ifndef HUSK_ACCOUNTS_H
#define HUSK_ACCOUNTS_H

#include <stdbool.h>
#include <sys/types.h>

/* The files read; tests point them elsewhere. */
extern const char *accounts_passwd_path;
extern const char *accounts_group_path;

/* A user with this uid, or a group with this gid, is listed. */
bool account_uid_taken(uid_t uid);
bool account_gid_taken(gid_t gid);

/* The gid of the group called name: 0, or -ENOENT if none is listed. */
int account_group_gid(const char *name, gid_t *gid);

/* The primary gid of the user with this uid: 0, or -ENOENT if none is listed. */
int account_user_gid(uid_t uid, gid_t *gid);

/*
 * The user with this uid is in group want, as the account files say: its
 * primary group in /etc/passwd, or a member in /etc/group. A process's own
 * credentials do not count: a setgid program, or one that kept a gid it
 * was given, would otherwise lend that group to whoever runs it.
 */
bool account_in_group(uid_t uid, gid_t want);

#endif
