/*
 * Unit tests for cli: command selection (help, version, boot, unknown) and
 * "husk boot" option parsing: defaults, every option, the numeric ranges of
 * --mem/--vcpus/--timeout, required --kernel, unknown options, options
 * missing their value, stray arguments, the --json/--console rule,
 * --no-stdin and --help; "husk run": transfers, network rules (--allow
 * IPv4/IPv6, --allow-host, --deny, thresholds, all of them only with --net
 * egress) and the jail options (--cpus, --pids-max, --uid-range,
 * --no-jail). Every rejection must be -EINVAL with a message naming the
 * problem.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "cli_run.h"
#include "cli_template.h"
#include "machine/arch.h"
#include "lib/util.h"
#include "suites.h"

/*
 * getopt may rewrite argv and the options keep pointers into it, so every
 * parse gets private, writable copies of its arguments.
 */
#define MAX_ARGS 32

static char store[MAX_ARGS][128];
static char *argv_buf[MAX_ARGS + 1];
static struct boot_opts o;

static int make_argv(const char *const *args)
{
	int n;

	for (n = 0; args[n]; n++) {
		ck_assert_int_lt(n, MAX_ARGS);
		ck_assert_uint_lt(strlen(args[n]), sizeof(store[n]));
		strcpy(store[n], args[n]);
		argv_buf[n] = store[n];
	}
	argv_buf[n] = NULL;
	return n;
}

static int parse_boot(const char *const *args)
{
	int argc = make_argv(args);

	return cli_parse_boot(argc, argv_buf, &o);
}

static enum cli_command command(const char *const *args)
{
	int argc = make_argv(args);

	return cli_command(argc, argv_buf);
}

/*
 * Put glibc's getopt back into its pristine state after each test, so that
 * with CK_FORK=no a parse that cli_parse_boot() left half-way through a
 * short option cluster cannot leak into the following tests (see
 * boot_reparse_after_short_option_cluster for why cli itself should).
 */
static void reset_getopt(void)
{
	static char prog[] = "reset";
	char *argv[] = { prog, NULL };

	optind = 0;
	opterr = 0;
	while (getopt_long(1, argv, "+", NULL, NULL) != -1)
		;
	optind = 1;
}

#define BOOT(...) parse_boot((const char *const[]){ "boot", __VA_ARGS__, NULL })
#define CMD(...) command((const char *const[]){ "husk", __VA_ARGS__, NULL })

static void assert_rejected(int ret, const char *needle)
{
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_msg(strstr(husk_lasterr(), needle),
		      "error '%s' does not mention '%s'", husk_lasterr(), needle);
}

/* ------------------------------------------------------------ commands -- */

START_TEST(command_help)
{
	ck_assert_int_eq(CMD("help"), CLI_HELP);
	ck_assert_int_eq(CMD("--help"), CLI_HELP);
	ck_assert_int_eq(CMD("-h"), CLI_HELP);
	/* Only argv[1] matters. */
	ck_assert_int_eq(CMD("help", "boot"), CLI_HELP);
}
END_TEST

START_TEST(command_version)
{
	ck_assert_int_eq(CMD("version"), CLI_VERSION);
	ck_assert_int_eq(CMD("--version"), CLI_VERSION);
}
END_TEST

START_TEST(command_boot)
{
	ck_assert_int_eq(CMD("boot"), CLI_BOOT);
	ck_assert_int_eq(CMD("run"), CLI_RUN);
	ck_assert_int_eq(CMD("boot", "--kernel", "k"), CLI_BOOT);
}
END_TEST

START_TEST(command_unknown)
{
	ck_assert_int_eq(CMD("frobnicate"), CLI_NONE);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "unknown command 'frobnicate'"));
	ck_assert_int_eq(CMD("Boot"), CLI_NONE);
	ck_assert_int_eq(CMD("-v"), CLI_NONE);
	ck_assert_int_eq(CMD("--kernel"), CLI_NONE);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "'--kernel'"));
	ck_assert_int_eq(CMD(""), CLI_NONE);
}
END_TEST

START_TEST(command_none)
{
	char *argv[] = { store[0], NULL };

	strcpy(store[0], "husk");
	ck_assert_int_eq(cli_command(1, argv), CLI_NONE);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no command given"));
	ck_assert_int_eq(cli_command(0, argv), CLI_NONE);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no command"));
}
END_TEST

START_TEST(usage_texts)
{
	ck_assert_ptr_nonnull(strstr(cli_usage, "boot"));
	ck_assert_ptr_nonnull(strstr(cli_boot_usage, "--kernel PATH"));
	ck_assert_ptr_nonnull(strstr(cli_boot_usage, "32..65536"));
	ck_assert_ptr_nonnull(strstr(cli_boot_usage, ARCH_CMDLINE_BASE));
}
END_TEST

/* ---------------------------------------------------------- boot: good -- */

START_TEST(boot_minimal_defaults)
{
	memset(&o, 0x5a, sizeof(o));
	ck_assert_int_eq(BOOT("--kernel", "vmlinux"), 0);
	ck_assert_str_eq(o.kernel, "vmlinux");
	ck_assert_ptr_null(o.initrd);
	ck_assert_ptr_null(o.cmdline);
	ck_assert_str_eq(o.console, "-");
	ck_assert_uint_eq(o.mem_mib, CLI_DEFAULT_MEM_MIB);
	ck_assert_uint_eq(o.mem_mib, 256);
	ck_assert_uint_eq(o.vcpus, 1);
	ck_assert_uint_eq(o.timeout_sec, 0);
	ck_assert(!o.json);
	ck_assert(!o.no_stdin);
	ck_assert(!o.verbose);
	ck_assert(!o.help);
}
END_TEST

START_TEST(boot_all_options)
{
	ck_assert_int_eq(BOOT("--kernel", "/boot/bzImage", "--initrd", "/tmp/initrd.cpio",
			      "--cmdline", "quiet loglevel=3", "--mem", "1024", "--vcpus", "4",
			      "--console", "out.log", "--timeout", "30", "--json", "--no-stdin",
			      "--verbose"), 0);
	ck_assert_str_eq(o.kernel, "/boot/bzImage");
	ck_assert_str_eq(o.initrd, "/tmp/initrd.cpio");
	ck_assert_str_eq(o.cmdline, "quiet loglevel=3");
	ck_assert_uint_eq(o.mem_mib, 1024);
	ck_assert_uint_eq(o.vcpus, 4);
	ck_assert_str_eq(o.console, "out.log");
	ck_assert_uint_eq(o.timeout_sec, 30);
	ck_assert(o.json);
	ck_assert(o.no_stdin);
	ck_assert(o.verbose);
	ck_assert(!o.help);
}
END_TEST

START_TEST(boot_vsock)
{
	ck_assert_int_eq(BOOT("--kernel", "k"), 0);
	ck_assert_ptr_null(o.vsock);
	ck_assert_int_eq(BOOT("--kernel", "k", "--vsock", "/tmp/v.sock"), 0);
	ck_assert_str_eq(o.vsock, "/tmp/v.sock");
	assert_rejected(BOOT("--kernel", "k", "--vsock", ""), "--vsock");
}
END_TEST

START_TEST(boot_equals_form_and_order)
{
	ck_assert_int_eq(BOOT("--mem=512", "--vcpus=2", "--kernel=k", "--timeout=5"), 0);
	ck_assert_str_eq(o.kernel, "k");
	ck_assert_uint_eq(o.mem_mib, 512);
	ck_assert_uint_eq(o.vcpus, 2);
	ck_assert_uint_eq(o.timeout_sec, 5);
	/* The last occurrence wins. */
	ck_assert_int_eq(BOOT("--kernel", "a", "--kernel", "b", "--mem", "64", "--mem", "128"), 0);
	ck_assert_str_eq(o.kernel, "b");
	ck_assert_uint_eq(o.mem_mib, 128);
}
END_TEST

START_TEST(boot_empty_cmdline_allowed)
{
	ck_assert_int_eq(BOOT("--kernel", "k", "--cmdline", ""), 0);
	ck_assert_str_eq(o.cmdline, "");
}
END_TEST

START_TEST(boot_mem_limits_accepted)
{
	ck_assert_int_eq(BOOT("--kernel", "k", "--mem", "32"), 0);
	ck_assert_uint_eq(o.mem_mib, 32);
	ck_assert_int_eq(BOOT("--kernel", "k", "--mem", "65536"), 0);
	ck_assert_uint_eq(o.mem_mib, 65536);
}
END_TEST

START_TEST(boot_vcpus_limits_accepted)
{
	ck_assert_int_eq(BOOT("--kernel", "k", "--vcpus", "1"), 0);
	ck_assert_uint_eq(o.vcpus, 1);
	ck_assert_int_eq(BOOT("--kernel", "k", "--vcpus", "32"), 0);
	ck_assert_uint_eq(o.vcpus, 32);
}
END_TEST

START_TEST(boot_timeout_limits_accepted)
{
	ck_assert_int_eq(BOOT("--kernel", "k", "--timeout", "1"), 0);
	ck_assert_uint_eq(o.timeout_sec, 1);
	ck_assert_int_eq(BOOT("--kernel", "k", "--timeout", "604800"), 0);
	ck_assert_uint_eq(o.timeout_sec, CLI_MAX_TIMEOUT_SEC);
}
END_TEST

START_TEST(boot_json_with_console_file)
{
	ck_assert_int_eq(BOOT("--kernel", "k", "--json", "--console", "console.txt"), 0);
	ck_assert(o.json);
	ck_assert_str_eq(o.console, "console.txt");
}
END_TEST

START_TEST(boot_double_dash_ends_options)
{
	ck_assert_int_eq(BOOT("--kernel", "k", "--"), 0);
	assert_rejected(BOOT("--kernel", "k", "--", "--mem"), "unexpected argument '--mem'");
}
END_TEST

START_TEST(boot_help)
{
	ck_assert_int_eq(BOOT("--help"), 0);
	ck_assert(o.help);
	ck_assert_ptr_null(o.kernel);
	/* --help wins over anything after it, even invalid options. */
	ck_assert_int_eq(BOOT("--kernel", "k", "--help", "--bogus", "stray"), 0);
	ck_assert(o.help);
	ck_assert_int_eq(BOOT("--json", "--help"), 0);
	ck_assert(o.help);
}
END_TEST

START_TEST(boot_reparse_resets_state)
{
	/* A second parse in the same process starts from scratch. */
	assert_rejected(BOOT("--kernel", "k", "--mem", "1"), "--mem");
	ck_assert_int_eq(BOOT("--kernel", "k2"), 0);
	ck_assert_str_eq(o.kernel, "k2");
	ck_assert_uint_eq(o.mem_mib, 256);
	ck_assert_int_eq(BOOT("--kernel", "k3", "--json", "--console", "f"), 0);
	ck_assert_int_eq(BOOT("--kernel", "k4"), 0);
	ck_assert(!o.json);
	ck_assert_str_eq(o.console, "-");
}
END_TEST

START_TEST(boot_reparse_after_short_option_cluster)
{
	/* An unknown short option cluster must not leak into the next parse. */
	assert_rejected(BOOT("-xy", "--kernel", "k"), "unknown option");
	ck_assert_int_eq(BOOT("--kernel", "k"), 0);
	ck_assert_str_eq(o.kernel, "k");
}
END_TEST

/* ----------------------------------------------------------- boot: bad -- */

START_TEST(boot_mem_rejected)
{
	static const char *const bad[] = {
		"31", "0", "65537", "1000000", "abc", "-1", "-256", "12abc", "",
		"+64", "0x40", "64.5", "99999999999999999999999",
	};
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = BOOT("--kernel", "k", "--mem", bad[i]);

		ck_assert_msg(ret == -EINVAL, "--mem '%s' accepted", bad[i]);
		ck_assert_msg(strstr(husk_lasterr(), "--mem") &&
			      strstr(husk_lasterr(), "32..65536"),
			      "--mem '%s': '%s'", bad[i], husk_lasterr());
	}
	assert_rejected(BOOT("--kernel", "k", "--mem", "12abc"),
			"--mem '12abc' is not a number in 32..65536");
	assert_rejected(BOOT("--kernel", "k", "--mem", "-1"), "--mem '-1'");
	assert_rejected(BOOT("--kernel", "k", "--mem="), "--mem ''");
}
END_TEST

START_TEST(boot_vcpus_rejected)
{
	assert_rejected(BOOT("--kernel", "k", "--vcpus", "0"),
			"--vcpus '0' is not a number in 1..32");
	assert_rejected(BOOT("--kernel", "k", "--vcpus", "33"), "--vcpus '33'");
	assert_rejected(BOOT("--kernel", "k", "--vcpus", "4294967297"), "1..32");
	assert_rejected(BOOT("--kernel", "k", "--vcpus", "two"), "--vcpus 'two'");
	assert_rejected(BOOT("--kernel", "k", "--vcpus", "-1"), "--vcpus");
}
END_TEST

START_TEST(boot_timeout_rejected)
{
	assert_rejected(BOOT("--kernel", "k", "--timeout", "0"),
			"--timeout '0' is not a number in 1..604800");
	assert_rejected(BOOT("--kernel", "k", "--timeout", "604801"), "--timeout '604801'");
	assert_rejected(BOOT("--kernel", "k", "--timeout", "10s"), "--timeout '10s'");
}
END_TEST

START_TEST(boot_missing_kernel)
{
	char *argv[] = { store[0], NULL };

	strcpy(store[0], "boot");
	assert_rejected(cli_parse_boot(1, argv, &o), "--kernel PATH is required");
	assert_rejected(BOOT("--mem", "64", "--vcpus", "2"), "--kernel PATH is required");
	assert_rejected(BOOT("--initrd", "i"), "--kernel");
}
END_TEST

START_TEST(boot_empty_values)
{
	assert_rejected(BOOT("--kernel", ""), "--kernel needs a non-empty value");
	assert_rejected(BOOT("--kernel", "k", "--initrd", ""), "--initrd needs a non-empty value");
	assert_rejected(BOOT("--kernel", "k", "--console", ""), "--console needs a non-empty value");
	assert_rejected(BOOT("--kernel="), "--kernel needs a non-empty value");
}
END_TEST

START_TEST(boot_unknown_option)
{
	assert_rejected(BOOT("--kernel", "k", "--bogus"), "unknown option '--bogus'");
	assert_rejected(BOOT("--bogus", "--kernel", "k"), "unknown option '--bogus'");
	assert_rejected(BOOT("--kernel", "k", "-x"), "unknown option '-x'");
	/* The old short help flag is not a boot option. */
	assert_rejected(BOOT("--kernel", "k", "-h"), "unknown option '-h'");
	/* An option that takes no value given one. */
	ck_assert_int_eq(BOOT("--kernel", "k", "--verbose=yes"), -EINVAL);
	ck_assert_int_eq(BOOT("--kernel", "k", "--no-stdin=1"), -EINVAL);
}
END_TEST

START_TEST(boot_unknown_short_in_cluster)
{
	/* The message must name the bad option, not the argument before it. */
	assert_rejected(BOOT("-xy", "--kernel", "k"), "unknown option '-x");
	assert_rejected(BOOT("--kernel", "k", "-vq"), "unknown option '-v");
}
END_TEST

START_TEST(boot_option_missing_value)
{
	assert_rejected(BOOT("--kernel"), "option --kernel needs a value");
	assert_rejected(BOOT("--kernel", "k", "--mem"), "option --mem needs a value");
	assert_rejected(BOOT("--kernel", "k", "--console"), "option --console needs a value");
	assert_rejected(BOOT("--kernel", "k", "--timeout"), "--timeout needs a value");
}
END_TEST

START_TEST(boot_stray_argument)
{
	assert_rejected(BOOT("--kernel", "k", "extra"), "unexpected argument 'extra'");
	/* Options stop at the first non-option ("+"): nothing is permuted. */
	assert_rejected(BOOT("vmlinux", "--kernel", "k"), "unexpected argument 'vmlinux'");
	ck_assert_str_eq(argv_buf[1], "vmlinux");
	ck_assert_str_eq(argv_buf[2], "--kernel");
}
END_TEST

START_TEST(boot_json_needs_console_file)
{
	assert_rejected(BOOT("--kernel", "k", "--json"), "--json needs --console FILE");
	assert_rejected(BOOT("--kernel", "k", "--json", "--console", "-"), "--json needs --console");
	ck_assert_int_eq(BOOT("--kernel", "k", "--console", "-"), 0);
}
END_TEST

/* ----------------------------------------------------------------- run -- */

static struct run_opts ro;

static int parse_run(const char *const *args)
{
	int argc = make_argv(args);

	return cli_parse_run(argc, argv_buf, &ro);
}

#define RUN(...) parse_run((const char *const[]){ "run", __VA_ARGS__, NULL })

static struct template_opts to;

static int parse_template(const char *const *args)
{
	int argc = make_argv(args);

	return cli_parse_template(argc, argv_buf, &to);
}

#define TEMPLATE(...) parse_template((const char *const[]){ "template", __VA_ARGS__, NULL })

START_TEST(template_create_on_an_image)
{
	ck_assert_int_eq(TEMPLATE("create", "t1", "--image", "app:1", "--image-dir", "/s"), 0);
	ck_assert_str_eq(to.run.image, "app:1");
	ck_assert_str_eq(to.run.image_dir, "/s");
	ck_assert(to.run.template_create);
	ck_assert_int_ne(TEMPLATE("create", "t1", "--image", "a", "--rootfs", "r"), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not with --rootfs"));
	ck_assert_int_ne(TEMPLATE("create", "t1", "--image-dir", "/s"), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "--image-dir without --image"));
}
END_TEST

START_TEST(run_minimal_defaults)
{
	ck_assert_int_eq(RUN("--", "sh", "-c", "exit 3"), 0);
	ck_assert_int_eq(ro.job.argc, 3);
	ck_assert_str_eq(ro.job.argv[0], "sh");
	ck_assert_str_eq(ro.job.argv[2], "exit 3");
	ck_assert_uint_eq(ro.mem_mib, RUN_DEFAULT_MEM_MIB);
	ck_assert_uint_eq(ro.vcpus, 1);
	ck_assert_uint_eq(ro.job.timeout_sec, RUN_DEFAULT_TIMEOUT_SEC);
	ck_assert_uint_eq(ro.job.workspace_mib, RUN_DEFAULT_WORKSPACE_MIB);
	ck_assert_ptr_null(ro.kernel);
	ck_assert_ptr_null(ro.rootfs);
	ck_assert(!ro.job.stdin && !ro.json && !ro.get_always);
	/* Without "--" the command starts at the first non-option. */
	ck_assert_int_eq(RUN("--timeout", "5", "ls", "-l"), 0);
	ck_assert_uint_eq(ro.job.timeout_sec, 5);
	ck_assert_int_eq(ro.job.argc, 2);
	ck_assert_str_eq(ro.job.argv[1], "-l");
}
END_TEST

START_TEST(run_image)
{
	/* The image may bring the command: none needed with --image. */
	ck_assert_int_eq(RUN("--image", "app:1"), 0);
	ck_assert_str_eq(ro.image, "app:1");
	ck_assert_int_eq(ro.job.argc, 0);
	ck_assert_int_eq(RUN("--image", "app", "--image-dir", "/s", "--", "ls"), 0);
	ck_assert_str_eq(ro.image_dir, "/s");
	ck_assert_int_eq(ro.job.argc, 1);
	assert_rejected(RUN("--image", "app", "--rootfs", "r"), "not with --rootfs");
	/* A template made on the image: its root is checked when the clone starts. */
	ck_assert_int_eq(RUN("--image", "app", "--template", "t", "--", "ls"), 0);
	ck_assert_str_eq(ro.template_name, "t");
	assert_rejected(RUN("--image-dir", "/s", "--", "true"), "--image-dir without --image");
	assert_rejected(RUN("--image", "a/../x"), "contains '..'");
	assert_rejected(RUN("--image", "-x"), "starting with a letter or digit");
	assert_rejected(RUN("--image", "a b"), "letters, digits");
	assert_rejected(RUN("--image", "app", "--image-dir", ""), "needs a directory");
	ck_assert_int_eq(RUN("--image", "app", "--server", "/s", "--", "true"), 0);
	assert_rejected(RUN("--image", "app", "--image-dir", "/d", "--server", "/s", "--", "true"),
			"the daemon's");
	assert_rejected(RUN("--mem", "64"), "no command given");
}
END_TEST

START_TEST(run_hostname)
{
	ck_assert_int_eq(RUN("--hostname", "box-1.example", "--", "hostname"), 0);
	ck_assert_str_eq(ro.job.hostname, "box-1.example");
	ck_assert_int_eq(RUN("--", "hostname"), 0);
	ck_assert_ptr_null(ro.job.hostname);
	assert_rejected(RUN("--hostname", "", "--", "true"), "is not a host name");
	assert_rejected(RUN("--hostname", "a b", "--", "true"), "is not a host name");
	assert_rejected(RUN("--hostname", "-x", "--", "true"), "is not a host name");
	assert_rejected(RUN("--hostname", "h", "--server", "/s", "--", "true"),
			"does not go through husk serve");
}
END_TEST

START_TEST(run_user)
{
	ck_assert_int_eq(RUN("--user", "root", "--", "id"), 0);
	ck_assert(ro.job.root);
	ck_assert_int_eq(RUN("--user", "agentuser", "--", "id"), 0);
	ck_assert(!ro.job.root);
	ck_assert_int_eq(RUN("--", "id"), 0);
	ck_assert(!ro.job.root);
	assert_rejected(RUN("--user", "nobody", "--", "id"), "agentuser or root");
	assert_rejected(RUN("--user", "", "--", "id"), "agentuser or root");
	assert_rejected(RUN("--user", "root", "--session-fd", "3"), "not with --session-fd");
	assert_rejected(RUN("--user", "root", "--server", "/s", "--", "id"),
			"does not go through husk serve");
	assert_rejected(RUN("--net", "egress", "--netns", "/run/netns/a", "--server", "/s", "--",
			    "id"), "not with --server");
}
END_TEST

START_TEST(run_tty)
{
	ck_assert_int_eq(RUN("--tty", "--stdin", "--", "sh"), 0);
	ck_assert(ro.job.terminal);
	ck_assert(ro.job.stdin);
	ck_assert_int_eq(RUN("--", "sh"), 0);
	ck_assert(!ro.job.terminal);
	assert_rejected(RUN("--tty", "--server", "/s", "--", "sh"), "does not go through husk serve");
	assert_rejected(RUN("--tty", "--session-fd", "3"), "not with --session-fd");
}
END_TEST

START_TEST(run_rlimit)
{
	ck_assert_int_eq(RUN("--rlimit", "nofile=50:100", "--rlimit", "RLIMIT_CORE=unlimited",
			     "--rlimit", "NPROC=7", "--", "sh"), 0);
	ck_assert_uint_eq(ro.job.nr_rlimits, 3);
	ck_assert_uint_eq(ro.job.rlimits[0].resource, RLIMIT_NOFILE);
	ck_assert_uint_eq(ro.job.rlimits[0].soft, 50);
	ck_assert_uint_eq(ro.job.rlimits[0].hard, 100);
	ck_assert_uint_eq(ro.job.rlimits[1].resource, RLIMIT_CORE);
	ck_assert_uint_eq(ro.job.rlimits[1].soft, UINT64_MAX);
	ck_assert_uint_eq(ro.job.rlimits[1].hard, UINT64_MAX);
	ck_assert_uint_eq(ro.job.rlimits[2].resource, RLIMIT_NPROC);
	ck_assert_uint_eq(ro.job.rlimits[2].soft, 7);
	ck_assert_uint_eq(ro.job.rlimits[2].hard, 7);
	ck_assert_int_eq(RUN("--", "sh"), 0);
	ck_assert_uint_eq(ro.job.nr_rlimits, 0);
	assert_rejected(RUN("--rlimit", "nofile=200:100", "--", "sh"), "over the hard one");
	assert_rejected(RUN("--rlimit", "rss=1", "--", "sh"), "NAME=SOFT[:HARD]");
	assert_rejected(RUN("--rlimit", "nofile", "--", "sh"), "NAME=SOFT[:HARD]");
	assert_rejected(RUN("--rlimit", "nofile=", "--", "sh"), "a number or 'unlimited'");
	assert_rejected(RUN("--rlimit", "nofile=1:x", "--", "sh"), "a number or 'unlimited'");
	assert_rejected(RUN("--rlimit", "nofile=-1", "--", "sh"), "a number or 'unlimited'");
	assert_rejected(RUN("--rlimit", "nofile=1", "--server", "/s", "--", "sh"),
			"does not go through husk serve");
	assert_rejected(RUN("--rlimit", "nofile=1", "--session-fd", "3"), "not with --session-fd");
}
END_TEST

START_TEST(run_tmpfs)
{
	ck_assert_int_eq(RUN("--tmpfs", "/data", "--tmpfs",
			     "/tmp/cache:size=64m,mode=700,noexec,nosuid,nodev,rw", "--", "sh"), 0);
	ck_assert_uint_eq(ro.job.nr_tmpfs, 2);
	ck_assert_str_eq(ro.job.tmpfs[0].path, "/data");
	ck_assert_uint_eq(ro.job.tmpfs[0].size, 0);
	ck_assert_uint_eq(ro.job.tmpfs[0].mode, 01777);
	ck_assert(!ro.job.tmpfs[0].noexec);
	ck_assert_str_eq(ro.job.tmpfs[1].path, "/tmp/cache");
	ck_assert_uint_eq(ro.job.tmpfs[1].size, 64ull << 20);
	ck_assert_uint_eq(ro.job.tmpfs[1].mode, 0700);
	ck_assert(ro.job.tmpfs[1].noexec);
	ck_assert_int_eq(RUN("--tmpfs", "/x:size=4096,noexec,exec", "--", "sh"), 0);
	ck_assert_uint_eq(ro.job.tmpfs[0].size, 4096);
	ck_assert(!ro.job.tmpfs[0].noexec);
	{
		static const char *const bad[] = { "/", "rel", "/a/../b", "/a//b", "/a/", "/./a",
						   "/proc", "/sys/x", "/dev/shm", "/tmp",
						   "/tmp/workspace", "/tmp/workspace/in" };

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			assert_rejected(RUN("--tmpfs", bad[i], "--", "sh"), "an absolute path");
	}
	ck_assert_int_eq(RUN("--tmpfs", "/tmp/workspace2", "--tmpfs", "/procs", "--", "sh"), 0);
	assert_rejected(RUN("--tmpfs", "/d:size=1x", "--", "sh"), "an option is not one of");
	assert_rejected(RUN("--tmpfs", "/d:mode=8", "--", "sh"), "an option is not one of");
	assert_rejected(RUN("--tmpfs", "/d:mode=17777", "--", "sh"), "an option is not one of");
	assert_rejected(RUN("--tmpfs", "/d:ro", "--", "sh"), "an option is not one of");
	assert_rejected(RUN("--tmpfs", "/d:suid", "--", "sh"), "an option is not one of");
	assert_rejected(RUN("--tmpfs", "/d", "--server", "/s", "--", "sh"),
			"does not go through husk serve");
	assert_rejected(RUN("--tmpfs", "/d", "--session-fd", "3"), "not with --session-fd");
}
END_TEST

START_TEST(run_all_options)
{
	ck_assert_int_eq(RUN("--kernel", "k", "--rootfs", "r", "--mem", "1024", "--vcpus", "4",
			     "--timeout", "9", "--workspace-size", "64", "--env", "A=1",
			     "--env", "B=x=y", "--put", "./in.txt:data/in.txt",
			     "--put", "/tmp/workspace/x:/tmp/workspace/y", "--get", "out:/tmp/res",
			     "--get-always", "--stdin", "--json", "--console", "c.log",
			     "--", "true"), 0);
	ck_assert_str_eq(ro.kernel, "k");
	ck_assert_str_eq(ro.rootfs, "r");
	ck_assert_uint_eq(ro.mem_mib, 1024);
	ck_assert_uint_eq(ro.vcpus, 4);
	ck_assert_uint_eq(ro.job.workspace_mib, 64);
	ck_assert_uint_eq(ro.job.nr_env, 2);
	ck_assert_str_eq(ro.job.env[1], "B=x=y");
	ck_assert_uint_eq(ro.nr_put, 2);
	ck_assert_str_eq(ro.put[0].host, "./in.txt");
	ck_assert_str_eq(ro.put[0].guest, "data/in.txt");
	/* A leading /tmp/workspace/ is the workspace itself. */
	ck_assert_str_eq(ro.put[1].host, "/tmp/workspace/x");
	ck_assert_str_eq(ro.put[1].guest, "y");
	ck_assert_uint_eq(ro.nr_get, 1);
	ck_assert_str_eq(ro.get[0].guest, "out");
	ck_assert_str_eq(ro.get[0].host, "/tmp/res");
	ck_assert(ro.get_always && ro.job.stdin && ro.json);
	ck_assert_str_eq(ro.console, "c.log");
}
END_TEST

START_TEST(run_rejected)
{
	assert_rejected(RUN("--timeout", "5"), "no command");
	assert_rejected(RUN("--timeout", "0", "--", "x"), "--timeout");
	assert_rejected(RUN("--workspace-size", "0", "--", "x"), "--workspace-size");
	assert_rejected(RUN("--mem", "8", "--", "x"), "--mem");
	assert_rejected(RUN("--vcpus", "33", "--", "x"), "--vcpus");
	assert_rejected(RUN("--env", "NOVALUE", "--", "x"), "K=V");
	assert_rejected(RUN("--env", "=v", "--", "x"), "K=V");
	assert_rejected(RUN("--put", "nocolon", "--", "x"), "HOSTPATH:GUESTPATH");
	assert_rejected(RUN("--put", "a:", "--", "x"), "HOSTPATH:GUESTPATH");
	assert_rejected(RUN("--put", "a:../etc", "--", "x"), "inside the workspace");
	assert_rejected(RUN("--put", "a:x/../../y", "--", "x"), "inside the workspace");
	assert_rejected(RUN("--put", "a:/etc/passwd", "--", "x"), "inside the workspace");
	assert_rejected(RUN("--get", "..:/tmp", "--", "x"), "inside the workspace");
	assert_rejected(RUN("--get-always", "--", "x"), "--get-always without --get");
	assert_rejected(RUN("--bogus", "--", "x"), "unknown option");
	assert_rejected(RUN("--kernel"), "needs a value");
}
END_TEST

START_TEST(run_net)
{
	const struct run_allow *a;

	ck_assert_int_eq(RUN("--", "true"), 0);
	ck_assert_int_eq(ro.net, RUN_NET_NONE);
	ck_assert_uint_eq(ro.nr_allow, 0);
	ck_assert_int_eq(RUN("--net", "none", "--", "true"), 0);
	ck_assert_int_eq(ro.net, RUN_NET_NONE);
	ck_assert_int_eq(RUN("--net", "egress", "--allow", "198.51.100.1/32:tcp:8080",
			     "--allow", "10.0.0.0/8", "--allow", "192.0.2.0/24:udp:53,1000-2000",
			     "--allow", "0.0.0.0/0:icmp", "--", "true"), 0);
	ck_assert_int_eq(ro.net, RUN_NET_EGRESS);
	ck_assert_uint_eq(ro.nr_allow, 4);
	a = &ro.allow[0];
	ck_assert_int_eq(a->family, AF_INET);
	ck_assert_ptr_eq(run_cidr_addr(a), &a->addr);
	ck_assert_uint_eq(ntohl(a->addr.s_addr), 0xc6336401);
	ck_assert_uint_eq(a->prefixlen, 32);
	ck_assert_uint_eq(a->protos, EGRESS_P_TCP);
	ck_assert_uint_eq(a->nports, 1);
	ck_assert_uint_eq(a->ports[0].lo, 8080);
	ck_assert_uint_eq(a->ports[0].hi, 8080);
	a = &ro.allow[1];
	ck_assert_uint_eq(a->prefixlen, 8);
	ck_assert_uint_eq(a->protos, EGRESS_P_ANY);
	ck_assert_uint_eq(a->nports, 0);
	a = &ro.allow[2];
	ck_assert_uint_eq(a->protos, EGRESS_P_UDP);
	ck_assert_uint_eq(a->nports, 2);
	ck_assert_uint_eq(a->ports[1].lo, 1000);
	ck_assert_uint_eq(a->ports[1].hi, 2000);
	ck_assert_uint_eq(ro.allow[3].protos, EGRESS_P_ICMP);
	ck_assert_uint_eq(ro.allow[3].prefixlen, 0);
	ck_assert_uint_eq(ro.conn_rate, RUN_DEFAULT_CONN_RATE);
	ck_assert_uint_eq(ro.egress_limit, RUN_DEFAULT_EGRESS_LIMIT);
	ck_assert_uint_eq(ro.egress_limit, 1ull << 30);
	ck_assert_int_eq(RUN("--net", "egress", "--conn-rate", "10", "--egress-limit",
			     "5000", "--", "true"), 0);
	ck_assert_uint_eq(ro.conn_rate, 10);
	ck_assert_uint_eq(ro.egress_limit, 5000);
	ck_assert_int_eq(RUN("--conn-rate=7", "--net", "egress", "--", "true"), 0);
	ck_assert_uint_eq(ro.conn_rate, 7);
	ck_assert_uint_eq(ro.egress_limit, RUN_DEFAULT_EGRESS_LIMIT);
	ck_assert_uint_eq(ro.egress_rate, 0);
	ck_assert_uint_eq(ro.max_dests, RUN_DEFAULT_MAX_DESTS);
	ck_assert_int_eq(RUN("--net", "egress", "--egress-rate", "100000", "--max-dests", "3",
			     "--", "true"), 0);
	ck_assert_uint_eq(ro.egress_rate, 100000);
	ck_assert_uint_eq(ro.max_dests, 3);
	ck_assert_int_eq(RUN("--", "true"), 0);
	ck_assert_uint_eq(ro.conn_rate, 0);
	ck_assert_uint_eq(ro.egress_limit, 0);
	ck_assert_uint_eq(ro.egress_rate, 0);
	ck_assert_uint_eq(ro.max_dests, 0);
}
END_TEST

START_TEST(run_net_rejected)
{
	assert_rejected(RUN("--net", "bridge", "--", "x"), "none or egress");
	assert_rejected(RUN("--netns", "/run/netns/a", "--", "x"), "--netns needs --net egress");
	assert_rejected(RUN("--net", "egress", "--netns", "run/netns/a", "--", "x"),
			"absolute path");
	ck_assert_int_eq(RUN("--net", "egress", "--netns", "/run/netns/a", "--", "x"), 0);
	ck_assert_str_eq(ro.netns, "/run/netns/a");
	assert_rejected(RUN("--allow", "10.0.0.0/8", "--", "x"), "--allow needs --net egress");
	assert_rejected(RUN("--allow", "[2001:db8::]/32", "--", "x"), "--allow needs --net egress");
	assert_rejected(RUN("--conn-rate", "10", "--", "x"), "--conn-rate needs --net egress");
	assert_rejected(RUN("--net", "none", "--egress-limit", "10", "--", "x"),
			"--egress-limit needs --net egress");
	assert_rejected(RUN("--net", "egress", "--conn-rate", "0", "--", "x"), "--conn-rate");
	assert_rejected(RUN("--net", "egress", "--conn-rate", "abc", "--", "x"), "--conn-rate");
	assert_rejected(RUN("--net", "egress", "--egress-limit", "0", "--", "x"),
			"--egress-limit");
	assert_rejected(RUN("--net", "egress", "--egress-limit", "-5", "--", "x"),
			"--egress-limit");
	assert_rejected(RUN("--egress-rate", "10", "--", "x"), "--egress-rate needs --net egress");
	assert_rejected(RUN("--max-dests", "10", "--", "x"), "--max-dests needs --net egress");
	assert_rejected(RUN("--net", "egress", "--egress-rate", "0", "--", "x"), "--egress-rate");
	assert_rejected(RUN("--net", "egress", "--max-dests", "x1", "--", "x"), "--max-dests");
	assert_rejected(RUN("--net", "egress", "--max-dests", "4294967296", "--", "x"),
			"--max-dests");
#define BAD_ALLOW(v, why) \
	assert_rejected(RUN("--net", "egress", "--allow", v, "--", "x"), why)
	BAD_ALLOW("10.0.0.1", "CIDR");
	BAD_ALLOW("10.0.0.0/", "CIDR");
	BAD_ALLOW("10.0.0.0/33", "CIDR");
	BAD_ALLOW("10.0.0.0/x", "CIDR");
	BAD_ALLOW("host/32", "CIDR");
	BAD_ALLOW("10.0.0.1/8", "host bits");
	BAD_ALLOW("10.0.0.0/8:sctp", "protocol");
	BAD_ALLOW("10.0.0.0/8:icmp:80", "icmp has no ports");
	BAD_ALLOW("10.0.0.0/8:tcp:", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:0", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:65536", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:90-80", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:80,", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:80-", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:a", "ports");
	BAD_ALLOW("10.0.0.0/8:tcp:1,2,3,4,5,6,7,8,9", "port ranges");
#undef BAD_ALLOW
}
END_TEST

START_TEST(run_net_ipv6)
{
	const struct run_allow *a;
	struct in6_addr want;

	ck_assert_int_eq(RUN("--net", "egress", "--allow", "[2001:db8::]/32:tcp:443",
			     "--allow", "[::]/0", "--allow", "[2001:db8:0:1::5]/128:udp:53,5000-5010",
			     "--allow", "[fd00::]/8:icmp", "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_allow, 4);
	a = &ro.allow[0];
	ck_assert_int_eq(a->family, AF_INET6);
	ck_assert_ptr_eq(run_cidr_addr(a), &a->addr6);
	inet_pton(AF_INET6, "2001:db8::", &want);
	ck_assert_mem_eq(&a->addr6, &want, 16);
	ck_assert_uint_eq(a->addr.s_addr, 0);
	ck_assert_uint_eq(a->prefixlen, 32);
	ck_assert_uint_eq(a->protos, EGRESS_P_TCP);
	ck_assert_uint_eq(a->nports, 1);
	ck_assert_uint_eq(a->ports[0].lo, 443);
	a = &ro.allow[1];
	ck_assert_int_eq(a->family, AF_INET6);
	ck_assert_uint_eq(a->prefixlen, 0);
	ck_assert_uint_eq(a->protos, EGRESS_P_ANY);
	a = &ro.allow[2];
	ck_assert_uint_eq(a->prefixlen, 128);
	ck_assert_uint_eq(a->protos, EGRESS_P_UDP);
	ck_assert_uint_eq(a->nports, 2);
	ck_assert_uint_eq(a->ports[1].hi, 5010);
	ck_assert_uint_eq(ro.allow[3].protos, EGRESS_P_ICMP);
	ck_assert_uint_eq(ro.allow[3].prefixlen, 8);
	/* IPv4 and IPv6 side by side. */
	ck_assert_int_eq(RUN("--net", "egress", "--allow", "192.0.2.0/24",
			     "--allow", "[2001:db8::1]/128", "--", "true"), 0);
	ck_assert_int_eq(ro.allow[0].family, AF_INET);
	ck_assert_int_eq(ro.allow[1].family, AF_INET6);
}
END_TEST

/* The rules in force are answered as text: what the parsers read back. */
START_TEST(run_rule_format_round_trip)
{
	static const char *const allows[] = {
		"198.51.100.1/32:tcp:8080", "10.0.0.0/8", "192.0.2.0/24:udp:53,1000-2000",
		"0.0.0.0/0:icmp", "[2001:db8::]/32:tcp:443", "[::]/0", "203.0.113.0/24:any:1-1024",
	};
	struct run_allow a, b;
	struct run_deny d, e;
	char buf[256];
	unsigned i;

	for (i = 0; i < sizeof(allows) / sizeof(allows[0]); i++) {
		ck_assert_int_eq(cli_parse_allow(allows[i], &a), 0);
		cli_format_allow(&a, buf, sizeof(buf));
		ck_assert_str_eq(buf, allows[i]);
		ck_assert_int_eq(cli_parse_allow(buf, &b), 0);
		ck_assert_mem_eq(&a, &b, sizeof(a));
	}
	/* A deny reads back as it was written. */
	ck_assert_int_eq(cli_parse_deny("[fd00::]/8", &d), 0);
	cli_format_deny(&d, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[fd00::]/8");
	ck_assert_int_eq(cli_parse_deny(buf, &e), 0);
	ck_assert_mem_eq(&d, &e, sizeof(d));
	ck_assert_int_eq(cli_check_allow_host("*.example.com"), 0);
	ck_assert_int_ne(cli_check_allow_host("192.0.2.1"), 0);
	ck_assert_int_ne(cli_check_allow_host("bad name"), 0);
}
END_TEST

START_TEST(run_policy_fd)
{
	ck_assert_int_eq(RUN("--net", "egress", "--policy-fd", "5", "--", "true"), 0);
	ck_assert_int_eq(ro.policy_fd, 5);
	ck_assert_int_eq(RUN("--", "true"), 0);
	ck_assert_int_eq(ro.policy_fd, -1);
	assert_rejected(RUN("--policy-fd", "5", "--", "x"), "--policy-fd needs --net egress");
	assert_rejected(RUN("--net", "egress", "--policy-fd", "2", "--", "x"), "--policy-fd");
	assert_rejected(RUN("--net", "egress", "--policy-fd", "4", "--json-fd", "4", "--", "x"),
			"already another option's fd");
}
END_TEST

START_TEST(run_net_ipv6_rejected)
{
#define BAD_ALLOW(v, why) \
	assert_rejected(RUN("--net", "egress", "--allow", v, "--", "x"), why)
	/* Unbracketed IPv6: the colons would be read as :PROTO:PORTS. */
	BAD_ALLOW("2001:db8::/32:tcp:443", "write an IPv6 address in brackets: [2001:db8::]/32");
	BAD_ALLOW("2001:db8::/32", "in brackets");
	BAD_ALLOW("::/0", "in brackets");
	BAD_ALLOW("[2001:db8::/32]", "CIDR");
	BAD_ALLOW("[2001:db8::]", "CIDR");
	BAD_ALLOW("[2001:db8::]:tcp:443", "CIDR");
	BAD_ALLOW("[2001:db8::]/129", "CIDR");
	BAD_ALLOW("[2001:db8::]/", "CIDR");
	BAD_ALLOW("[]/0", "CIDR");
	BAD_ALLOW("[10.0.0.0]/8", "CIDR");
	BAD_ALLOW("[2001:db8::g]/32", "CIDR");
	BAD_ALLOW("[2001:db8::1]/64", "host bits set after /64");
	BAD_ALLOW("[2001:db8::]/32:sctp", "protocol");
	BAD_ALLOW("[2001:db8::]/32:icmp:1", "icmp has no ports");
	BAD_ALLOW("[2001:db8::]/32:tcp:0", "ports");
#undef BAD_ALLOW
}
END_TEST

START_TEST(run_deny)
{
	struct in6_addr want;

	ck_assert_int_eq(RUN("--net", "egress", "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_deny, 0);
	ck_assert_int_eq(RUN("--net", "egress", "--allow", "203.0.113.0/24", "--deny",
			     "203.0.113.128/25", "--deny", "[2001:db8:bad::]/48",
			     "--deny=0.0.0.0/0", "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_deny, 3);
	ck_assert_int_eq(ro.deny[0].family, AF_INET);
	ck_assert_uint_eq(ntohl(ro.deny[0].addr.s_addr), 0xcb007180);
	ck_assert_uint_eq(ro.deny[0].prefixlen, 25);
	ck_assert_ptr_eq(run_cidr_addr(&ro.deny[0]), &ro.deny[0].addr);
	ck_assert_int_eq(ro.deny[1].family, AF_INET6);
	inet_pton(AF_INET6, "2001:db8:bad::", &want);
	ck_assert_mem_eq(&ro.deny[1].addr6, &want, 16);
	ck_assert_uint_eq(ro.deny[1].prefixlen, 48);
	ck_assert_ptr_eq(run_cidr_addr(&ro.deny[1]), &ro.deny[1].addr6);
	ck_assert_uint_eq(ro.deny[2].prefixlen, 0);
	/* Same address, other length: not a contradiction. */
	ck_assert_int_eq(RUN("--net", "egress", "--allow", "10.0.0.0/8", "--deny",
			     "10.0.0.0/16", "--", "true"), 0);
}
END_TEST

START_TEST(run_deny_rejected)
{
	assert_rejected(RUN("--deny", "10.0.0.0/8", "--", "x"), "--deny needs --net egress");
	assert_rejected(RUN("--net", "none", "--deny", "10.0.0.0/8", "--", "x"),
			"--deny needs --net egress");
#define BAD_DENY(v, why) \
	assert_rejected(RUN("--net", "egress", "--deny", v, "--", "x"), why)
	BAD_DENY("10.0.0.1", "--deny 10.0.0.1: needs a CIDR");
	BAD_DENY("10.0.0.1/8", "host bits");
	BAD_DENY("10.0.0.0/8:tcp", "CIDR");
	BAD_DENY("fc00::/7", "in brackets");
	BAD_DENY("[fc00::]/7:tcp", "CIDR");
	BAD_DENY("[fc00::1]/7", "host bits");
	BAD_DENY("", "CIDR");
#undef BAD_DENY
	assert_rejected(RUN("--net", "egress", "--allow", "198.51.100.0/24:tcp:443", "--deny",
			    "198.51.100.0/24", "--", "x"), "name the same prefix");
	assert_rejected(RUN("--net", "egress", "--deny", "[2001:db8::]/32", "--allow",
			    "[2001:db8::]/32", "--", "x"), "name the same prefix");
}
END_TEST

START_TEST(run_allow_host)
{
	ck_assert_int_eq(RUN("--net", "egress", "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_allow_host, 0);
	ck_assert_int_eq(RUN("--net", "egress", "--allow-host", "example.com", "--allow-host",
			     "*.pypi.org", "--allow-host=files.pythonhosted.org.",
			     "--allow-host", "_srv.x-y.Example.NET", "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_allow_host, 4);
	ck_assert_str_eq(ro.allow_host[0], "example.com");
	ck_assert_str_eq(ro.allow_host[1], "*.pypi.org");
	ck_assert_str_eq(ro.allow_host[2], "files.pythonhosted.org.");
	ck_assert_str_eq(ro.allow_host[3], "_srv.x-y.Example.NET");
}
END_TEST

START_TEST(run_allow_host_rejected)
{
	static const char *const bad[] = {
		"", "*", "*.", "ex ample.com", "a..b", ".example.com", "*example.com",
		"a.*.example.com", "example.com..", "bad/name", "üñí.com",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	};
	unsigned i;

	assert_rejected(RUN("--allow-host", "example.com", "--", "x"),
			"--allow-host needs --net egress");
	assert_rejected(RUN("--net", "none", "--allow-host", "example.com", "--", "x"),
			"--allow-host needs --net egress");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = RUN("--net", "egress", "--allow-host", bad[i], "--", "x");

		ck_assert_msg(ret == -EINVAL, "--allow-host '%s' accepted", bad[i]);
		ck_assert_msg(strstr(husk_lasterr(), "must be a domain name"),
			      "'%s': %s", bad[i], husk_lasterr());
	}
	assert_rejected(RUN("--net", "egress", "--allow-host", "192.0.2.1", "--", "x"),
			"is an address, not a name: use --allow ADDRESS/32");
	assert_rejected(RUN("--net", "egress", "--allow-host", "2001:db8::1", "--", "x"),
			"is an address");
}
END_TEST

START_TEST(run_allow_host_limit)
{
	const char *args[2 * RUN_MAX_ALLOW_HOST + 8];
	char names[RUN_MAX_ALLOW_HOST + 1][16];
	int n = 0, i, argc;

	args[n++] = "run";
	args[n++] = "--net";
	args[n++] = "egress";
	for (i = 0; i <= RUN_MAX_ALLOW_HOST; i++) {
		snprintf(names[i], sizeof(names[i]), "h%d.example", i);
		args[n++] = "--allow-host";
		args[n++] = names[i];
	}
	args[n++] = "x";
	args[n] = NULL;
	/* Too many words for make_argv's store: hand getopt the array itself. */
	argc = n;
	optind = 0;
	ck_assert_int_eq(cli_parse_run(argc, (char **)args, &ro), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "more than 64 --allow-host"));
	args[n - 3] = "x";
	args[n - 2] = NULL;
	ck_assert_int_eq(cli_parse_run(n - 2, (char **)args, &ro), 0);
	ck_assert_uint_eq(ro.nr_allow_host, RUN_MAX_ALLOW_HOST);
}
END_TEST

START_TEST(run_jail_defaults)
{
	ck_assert_int_eq(RUN("--", "true"), 0);
	ck_assert_uint_eq(ro.cpu_milli, RUN_DEFAULT_CPU_MILLI);
	ck_assert_uint_eq(ro.cpu_milli, 500);
	ck_assert_uint_eq(ro.pids_max, RUN_DEFAULT_PIDS_MAX);
	ck_assert_uint_ge(ro.pids_max, 16);
	ck_assert_uint_eq(ro.uid_base, 1879048192u);
	ck_assert_uint_eq(ro.uid_count, 4096);
	ck_assert(!ro.no_jail);
	ck_assert_int_eq(RUN("--no-jail", "--", "true"), 0);
	ck_assert(ro.no_jail);
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "--cpus N"));
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "(default 0.5)"));
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "(default 128)"));
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "(default 1879048192:4096)"));
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "--no-jail"));
	ck_assert_ptr_nonnull(strstr(cli_run_usage, "[2001:db8::]/32:tcp:443"));
}
END_TEST

START_TEST(run_cpus)
{
	static const struct { const char *v; const char *vcpus; unsigned milli; } good[] = {
		{ "0.5", "1", 500 }, { "1", "1", 1000 }, { "0.01", "1", 10 },
		{ "0.015", "1", 15 }, { "1.0", "1", 1000 }, { "0.999", "1", 999 },
		{ "4", "4", 4000 }, { "2.25", "4", 2250 }, { "32", "32", 32000 },
		{ "007.5", "8", 7500 },
	};
	unsigned i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(RUN("--vcpus", good[i].vcpus, "--cpus", good[i].v, "--", "x") == 0,
			      "--cpus %s: %s", good[i].v, husk_lasterr());
		ck_assert_uint_eq(ro.cpu_milli, good[i].milli);
	}
	/* --vcpus may come after --cpus. */
	ck_assert_int_eq(RUN("--cpus", "3", "--vcpus", "3", "--", "x"), 0);
	ck_assert_uint_eq(ro.cpu_milli, 3000);
}
END_TEST

START_TEST(run_cpus_rejected)
{
	static const char *const bad[] = {
		"0", "0.0", "0.009", "0.0125", "", "abc", ".5", "1.", "-1", "+1", "1e3",
		"1,5", "0x1", "33", "32.001", "99999999999999999999", " 1", "1 ",
	};
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = RUN("--vcpus", "32", "--cpus", bad[i], "--", "x");

		ck_assert_msg(ret == -EINVAL, "--cpus '%s' accepted", bad[i]);
		ck_assert_msg(strstr(husk_lasterr(), "--cpus") &&
			      strstr(husk_lasterr(), "0.01..32"),
			      "--cpus '%s': %s", bad[i], husk_lasterr());
	}
	assert_rejected(RUN("--cpus", "2", "--", "x"),
			"--cpus 2.000 is more than the VM's 1 vCPU(s) can use");
	assert_rejected(RUN("--vcpus", "4", "--cpus", "4.001", "--", "x"), "4 vCPU(s)");
	assert_rejected(RUN("--cpus", "--", "x"), "--cpus '--'");
}
END_TEST

START_TEST(run_pids_max)
{
	ck_assert_int_eq(RUN("--pids-max", "16", "--", "x"), 0);
	ck_assert_uint_eq(ro.pids_max, 16);
	ck_assert_int_eq(RUN("--pids-max", "4194304", "--", "x"), 0);
	ck_assert_uint_eq(ro.pids_max, 4194304);
	ck_assert_int_eq(RUN("--vcpus", "32", "--pids-max", "40", "--", "x"), 0);
	assert_rejected(RUN("--pids-max", "15", "--", "x"), "--pids-max '15' is not a number in 16..4194304");
	assert_rejected(RUN("--pids-max", "0", "--", "x"), "--pids-max");
	assert_rejected(RUN("--pids-max", "4194305", "--", "x"), "--pids-max");
	assert_rejected(RUN("--pids-max", "many", "--", "x"), "--pids-max");
	assert_rejected(RUN("--pids-max", "-20", "--", "x"), "--pids-max");
	assert_rejected(RUN("--vcpus", "32", "--pids-max", "39", "--", "x"),
			"--pids-max 39 is too small for 32 vCPU(s)");
	assert_rejected(RUN("--pids-max", "20", "--vcpus", "13", "--", "x"), "too small");
}
END_TEST

START_TEST(run_uid_range)
{
	ck_assert_int_eq(RUN("--uid-range", "100000:65536", "--", "x"), 0);
	ck_assert_uint_eq(ro.uid_base, 100000);
	ck_assert_uint_eq(ro.uid_count, 65536);
	ck_assert_int_eq(RUN("--uid-range", "1:1", "--", "x"), 0);
	ck_assert_uint_eq(ro.uid_base, 1);
	ck_assert_uint_eq(ro.uid_count, 1);
	ck_assert_int_eq(RUN("--uid-range", "4294967294:1", "--", "x"), 0);
	ck_assert_uint_eq(ro.uid_base, 4294967294u);
	ck_assert_int_eq(RUN("--uid-range", "65535:10", "--", "x"), 0);
	ck_assert_int_eq(RUN("--uid-range", "1000:64534", "--", "x"), 0);
	ck_assert_uint_eq(ro.uid_base + ro.uid_count - 1, 65533);
}
END_TEST

START_TEST(run_uid_range_rejected)
{
	static const char *const bad[] = {
		"0:10", "200000", "200000:", ":4096", "200000:0", "a:b", "-1:5", "5:-1",
		"4294967295:1", "4294967296:1", "1:4294967295", "200000:4096:1", " 1:1", "",
		"99999999999999999999999:1",
	};
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = RUN("--uid-range", bad[i], "--", "x");

		ck_assert_msg(ret == -EINVAL, "--uid-range '%s' accepted", bad[i]);
		ck_assert_msg(strstr(husk_lasterr(), "--uid-range"), "'%s': %s", bad[i],
			      husk_lasterr());
	}
	assert_rejected(RUN("--uid-range", "0:10", "--", "x"), "never root");
	assert_rejected(RUN("--uid-range", "4294967294:2", "--", "x"), "runs past uid 4294967294");
	assert_rejected(RUN("--uid-range", "4000000000:294967296", "--", "x"), "runs past");
	assert_rejected(RUN("--uid-range", "60000:10000", "--", "x"), "uid 65534 (nobody)");
	assert_rejected(RUN("--uid-range", "65534:1", "--", "x"), "nobody");
	assert_rejected(RUN("--uid-range", "1000:64535", "--", "x"), "nobody");
	/* A flag given a value. */
	ck_assert_int_eq(RUN("--no-jail=1", "--", "x"), -EINVAL);
}
END_TEST

/* cli_workspace_path normalizes in place: test on a writable copy. */
static const char *wpath(const char *p)
{
	static char buf[8192];

	snprintf(buf, sizeof(buf), "%s", p);
	return cli_workspace_path(buf);
}

START_TEST(run_workspace_paths)
{
	char big[5000];

	ck_assert_str_eq(wpath("a/b"), "a/b");
	ck_assert_str_eq(wpath("..a/b.."), "..a/b..");
	ck_assert_str_eq(wpath("/tmp/workspace/out"), "out");
	/* The guest's tar names entries with single slashes and no trailing one. */
	ck_assert_str_eq(wpath("out/"), "out");
	ck_assert_str_eq(wpath("a//b///c//"), "a/b/c");
	ck_assert_str_eq(wpath("/tmp/workspace//out"), "out");
	ck_assert_ptr_null(wpath(""));
	ck_assert_ptr_null(wpath("/tmp/workspace/"));
	ck_assert_ptr_null(wpath(".."));
	ck_assert_ptr_null(wpath("a//../b"));
	ck_assert_ptr_null(wpath("/abs"));
	ck_assert_ptr_null(wpath("."));
	ck_assert_ptr_null(wpath("./out"));
	ck_assert_ptr_null(wpath("a/./b"));
	ck_assert_ptr_null(wpath("//"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_ptr_null(wpath(big));
	big[4095] = '\0';
	ck_assert_ptr_nonnull(wpath(big));
}
END_TEST

/* The filter holds one rule per prefix: same protocols merge, others are refused. */
START_TEST(run_allow_same_prefix)
{
	ck_assert_int_eq(RUN("--net", "egress", "--allow", "192.0.2.1/32:tcp:8080",
			     "--allow", "192.0.2.1/32:tcp:8085", "--allow", "198.51.100.0/24",
			     "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_allow, 2);
	ck_assert_uint_eq(ro.allow[0].nports, 2);
	ck_assert_uint_eq(ro.allow[0].ports[0].lo, 8080);
	ck_assert_uint_eq(ro.allow[0].ports[1].lo, 8085);
	ck_assert_uint_eq(ro.allow[1].prefixlen, 24);
	/* Every port covers a port list. */
	ck_assert_int_eq(RUN("--net", "egress", "--allow", "192.0.2.1/32:tcp",
			     "--allow", "192.0.2.1/32:tcp:443", "--", "true"), 0);
	ck_assert_uint_eq(ro.nr_allow, 1);
	ck_assert_uint_eq(ro.allow[0].nports, 0);
	assert_rejected(RUN("--net", "egress", "--allow", "192.0.2.1/32:tcp:80",
			    "--allow", "192.0.2.1/32:udp:53", "--", "true"),
			"same prefix with different protocols");
}
END_TEST

START_TEST(run_record_options)
{
	ck_assert_int_eq(RUN("--json-fd", "3", "--result", "r.json", "--get", "out:/tmp",
			     "--get-keep-modes", "--", "true"), 0);
	ck_assert_int_eq(ro.json_fd, 3);
	ck_assert_str_eq(ro.result, "r.json");
	ck_assert(ro.get_keep_modes);
	ck_assert_int_eq(RUN("--", "true"), 0);
	ck_assert_int_eq(ro.json_fd, -1);
	ck_assert_ptr_null(ro.result);
	ck_assert(!ro.get_keep_modes);
	/* 0..2 belong to the job's streams. */
	ck_assert_int_eq(RUN("--json-fd", "1", "--", "true"), -EINVAL);
	ck_assert_int_eq(RUN("--json-fd", "x", "--", "true"), -EINVAL);
	ck_assert_int_eq(RUN("--result", "", "--", "true"), -EINVAL);
	ck_assert_int_eq(RUN("--get-keep-modes", "--", "true"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "without --get"));
	ck_assert_int_eq(RUN("--get", "out/:/tmp", "--", "true"), 0);
	ck_assert_str_eq(ro.get[0].guest, "out");
	ck_assert_int_eq(RUN("--get", "./out:/tmp", "--", "true"), -EINVAL);
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc;

	tc = tcase_create("command");
	tcase_add_test(tc, command_help);
	tcase_add_test(tc, command_version);
	tcase_add_test(tc, command_boot);
	tcase_add_test(tc, command_unknown);
	tcase_add_test(tc, command_none);
	tcase_add_test(tc, usage_texts);
	suite_add_tcase(s, tc);

	tc = tcase_create("boot");
	tcase_add_checked_fixture(tc, NULL, reset_getopt);
	tcase_add_test(tc, boot_minimal_defaults);
	tcase_add_test(tc, boot_all_options);
	tcase_add_test(tc, boot_vsock);
	tcase_add_test(tc, boot_equals_form_and_order);
	tcase_add_test(tc, boot_empty_cmdline_allowed);
	tcase_add_test(tc, boot_mem_limits_accepted);
	tcase_add_test(tc, boot_vcpus_limits_accepted);
	tcase_add_test(tc, boot_timeout_limits_accepted);
	tcase_add_test(tc, boot_json_with_console_file);
	tcase_add_test(tc, boot_double_dash_ends_options);
	tcase_add_test(tc, boot_help);
	tcase_add_test(tc, boot_reparse_resets_state);
	tcase_add_test(tc, boot_reparse_after_short_option_cluster);
	tcase_add_test(tc, boot_mem_rejected);
	tcase_add_test(tc, boot_vcpus_rejected);
	tcase_add_test(tc, boot_timeout_rejected);
	tcase_add_test(tc, boot_missing_kernel);
	tcase_add_test(tc, boot_empty_values);
	tcase_add_test(tc, boot_unknown_option);
	tcase_add_test(tc, boot_unknown_short_in_cluster);
	tcase_add_test(tc, boot_option_missing_value);
	tcase_add_test(tc, boot_stray_argument);
	tcase_add_test(tc, boot_json_needs_console_file);
	suite_add_tcase(s, tc);

	tc = tcase_create("run");
	tcase_add_checked_fixture(tc, NULL, reset_getopt);
	tcase_add_test(tc, run_minimal_defaults);
	tcase_add_test(tc, run_all_options);
	tcase_add_test(tc, run_rejected);
	tcase_add_test(tc, run_workspace_paths);
	tcase_add_test(tc, run_record_options);
	tcase_add_test(tc, run_allow_same_prefix);
	tcase_add_test(tc, run_net);
	tcase_add_test(tc, run_net_rejected);
	tcase_add_test(tc, run_net_ipv6);
	tcase_add_test(tc, run_net_ipv6_rejected);
	tcase_add_test(tc, run_deny);
	tcase_add_test(tc, run_deny_rejected);
	tcase_add_test(tc, run_allow_host);
	tcase_add_test(tc, run_rule_format_round_trip);
	tcase_add_test(tc, run_policy_fd);
	tcase_add_test(tc, run_allow_host_rejected);
	tcase_add_test(tc, run_allow_host_limit);
	tcase_add_test(tc, run_jail_defaults);
	tcase_add_test(tc, run_cpus);
	tcase_add_test(tc, run_cpus_rejected);
	tcase_add_test(tc, run_pids_max);
	tcase_add_test(tc, run_uid_range);
	tcase_add_test(tc, run_uid_range_rejected);
	tcase_add_test(tc, run_image);
	tcase_add_test(tc, run_hostname);
	tcase_add_test(tc, template_create_on_an_image);
	tcase_add_test(tc, run_user);
	tcase_add_test(tc, run_rlimit);
	tcase_add_test(tc, run_tmpfs);
	tcase_add_test(tc, run_tty);
	suite_add_tcase(s, tc);
	return s;
}
