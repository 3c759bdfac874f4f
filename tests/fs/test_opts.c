/* test_opts.c - topicfs's command line (fs/opts.c) without a mount: what each
 * option sets, what is refused, and what is left for libfuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fuse_ll.h"
#include "fs/opts.h"
#include "io/log.h"

#define CONFIG_TEXT_MAX 64

struct parsed {
	int rc;
	struct tfs_opts o;
	struct fuse_args args;
};

/* Parses "topicfs" + the NULL-terminated arguments; the line a refusal prints
 * goes to /dev/null. */
static void parse(struct parsed *p, ...)
{
	char *argv[32] = { "topicfs" };
	int argc = 1, saved = dup(2), null_fd = open("/dev/null", O_WRONLY);
	va_list ap;
	char *a;

	va_start(ap, p);
	while ((a = va_arg(ap, char *)) && argc < 31)
		argv[argc++] = a;
	va_end(ap);
	tfs_opts_init(&p->o);
	p->args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	dup2(null_fd, 2);
	p->rc = tfs_opts_parse(&p->args, &p->o);
	dup2(saved, 2);
	close(saved);
	close(null_fd);
}

static void release(struct parsed *p)
{
	tfs_opts_release(&p->o);
	fuse_opt_free_args(&p->args);
}

/* Whether libfuse's argument list holds opt among the options of a "-o": every
 * -o's list is joined, with commas around, and ",opt," looked for. */
static bool left_for_fuse(const struct fuse_args *args, const char *opt)
{
	char joined[4096] = ",", want[256];
	size_t n = 1;

	for (int i = 1; i < args->argc; i++) {
		const char *s = args->argv[i];
		if (strncmp(s, "-o", 2) != 0)
			continue;
		if (!s[2] && i + 1 == args->argc)
			break;
		n += (size_t)snprintf(joined + n, sizeof(joined) - n, "%s,",
		                      s[2] ? s + 2 : args->argv[++i]);
		assert_true(n < sizeof(joined));
	}
	snprintf(want, sizeof(want), ",%s,", opt);
	return strstr(joined, want) != NULL;
}

static void defaults_are_secure_and_positional_args_stay(void **state)
{
	struct parsed p;
	(void)state;

	parse(&p, "/data", "/mnt", NULL);
	assert_int_equal(p.rc, 0);
	assert_string_equal(p.o.data_dir, "/data");
	assert_false(p.o.read_only);
	assert_false(p.o.engine.read_only);
	assert_true(p.o.reader_cache);
	assert_true(left_for_fuse(&p.args, "default_permissions"));   /* checks are on */
	assert_true(p.o.max_read > 0);
	assert_null(p.o.fault_spec);
	release(&p);
}

static void each_option_sets_what_it_names(void **state)
{
	struct parsed p;
	char v[CONFIG_TEXT_MAX];
	(void)state;

	parse(&p, "-o", "partitions=3,io=sync,ro,max_open_files=64,cache_timeout=2.5", "-o",
	      "segment.bytes=1048576,log.cleaner.threads=0,max_read=65536,direct_reads",
	      "-o", "scratch_max_files=0,fault=write:3:EIO,allow_other,offsets.retention.minutes=90",
	      "/data", "/mnt", NULL);
	assert_int_equal(p.rc, 0);
	assert_int_equal(p.o.engine.groups.retention_ms, 90 * 60000);
	assert_int_equal(p.o.engine.default_partitions, 3);
	assert_int_equal(p.o.engine.io_kind, TFS_IO_SYNC);
	assert_true(p.o.read_only);
	assert_true(p.o.engine.read_only);
	assert_int_equal(p.o.engine.max_open_files, 64);
	assert_true(p.o.cache_timeout == 2.5);
	assert_int_equal(tfs_topic_config_get(&p.o.engine.topic_defaults, "segment.bytes", v,
	                                      sizeof(v)), 0);
	assert_string_equal(v, "1048576");
	assert_int_equal(p.o.engine.cleaner.threads, 0);
	assert_int_equal(p.o.max_read, 65536);
	assert_false(p.o.reader_cache);
	assert_int_equal(p.o.scratch_max_files, 0);
	assert_string_equal(p.o.fault_spec, "write:3:EIO");
	/* libfuse's own, and the kernel mount options, stay for libfuse */
	assert_true(left_for_fuse(&p.args, "allow_other"));
	assert_true(left_for_fuse(&p.args, "ro"));
	assert_true(left_for_fuse(&p.args, "max_read=65536"));
	/* topicfs's own do not */
	assert_false(left_for_fuse(&p.args, "partitions=3"));
	assert_false(left_for_fuse(&p.args, "segment.bytes=1048576"));
	release(&p);
}

/* "cleanup.policy=compact,delete": libfuse splits at the comma; the parser glues
 * the halves back together. */
static void a_two_word_cleanup_policy_survives_the_comma(void **state)
{
	struct parsed p;
	char v[CONFIG_TEXT_MAX];
	(void)state;

	parse(&p, "-o", "cleanup.policy=compact,delete", "/data", "/mnt", NULL);
	assert_int_equal(p.rc, 0);
	assert_int_equal(tfs_topic_config_get(&p.o.engine.topic_defaults, "cleanup.policy", v,
	                                      sizeof(v)), 0);
	assert_non_null(strstr(v, "compact"));
	assert_non_null(strstr(v, "delete"));
	release(&p);
}

/* "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256" likewise. */
static void two_sasl_mechanisms_survive_the_comma(void **state)
{
	struct parsed p;
	(void)state;

	parse(&p, "-o", "listeners=SASL_PLAINTEXT://127.0.0.1:9093,sasl.enabled.mechanisms=SCRAM-SHA-256",
	      "/data", "/mnt", NULL);
	assert_int_equal(p.rc, 0);
	assert_int_equal(p.o.kafka.sasl_mechanisms, TFS_KAFKA_SASL_SCRAM_SHA_256);
	release(&p);
	parse(&p, "-o", "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN", "/data", "/mnt", NULL);
	assert_int_equal(p.rc, 0);
	assert_int_equal(p.o.kafka.sasl_mechanisms, TFS_KAFKA_SASL_PLAIN | TFS_KAFKA_SASL_SCRAM_SHA_256);
	release(&p);
	parse(&p, "-o", "sasl.enabled.mechanisms=GSSAPI", "/data", "/mnt", NULL);
	assert_int_not_equal(p.rc, 0);
	release(&p);
}

/* Each bad value is refused (the parse fails) rather than replaced by a default. */
static void bad_values_are_refused(void **state)
{
	static const char *const bad[] = {
		"partitions=0", "partitions=-1", "partitions=lots", "io=fast",
		"max_open_files=15", "max_open_files=1000001", "max_read=4095",
		"max_read=1048577", "cache_timeout=-1", "cache_timeout=soon",
		"scratch_max_files=1000001", "segment.bytes=lots", "cleanup.policy=keep",
		"log.cleaner.threads=-1", "fault=write:0:EIO", "fault=nonsense",
		"default_permissions,no_default_permissions", "offsets.retention.minutes=0",
		"offsets.retention.minutes=weekly", "offsets.retention.minutes=153722867280913",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct parsed p;
		parse(&p, "-o", bad[i], "/data", "/mnt", NULL);
		if (p.rc != -1)
			fail_msg("-o %s was accepted", bad[i]);
		release(&p);
	}
}

/* no_default_permissions is the one way to turn the kernel's checks off. */
static void no_default_permissions_leaves_the_checks_out(void **state)
{
	struct parsed p;
	(void)state;

	parse(&p, "-o", "no_default_permissions", "/data", "/mnt", NULL);
	assert_int_equal(p.rc, 0);
	assert_true(p.o.no_default_permissions);
	assert_false(left_for_fuse(&p.args, "default_permissions"));
	release(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_secure_and_positional_args_stay),
		cmocka_unit_test(each_option_sets_what_it_names),
		cmocka_unit_test(a_two_word_cleanup_policy_survives_the_comma),
		cmocka_unit_test(two_sasl_mechanisms_survive_the_comma),
		cmocka_unit_test(bad_values_are_refused),
		cmocka_unit_test(no_default_permissions_leaves_the_checks_out),
	};
	tfs_log_set_level(TFS_LOG_ERROR);
	return cmocka_run_group_tests_name("opts", tests, NULL, NULL);
}
