/* test_scratch.c - scratch files (fs/scratch.h): names per partition directory,
 * the byte and file bounds (ENOSPC, nothing changed), rename and its replace
 * rules, consume (a rename onto a key), topic references, and the bound held by
 * racing writers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void);   /* libasan; gcc ships no header */
#else
#include <malloc.h>
#endif

#include "fs/scratch.h"

/* Fake topics: the store only compares their pointers and asks for references. */
struct fake_topics {
	atomic_int refs;
	bool refuse;                    /* the topic is "deleted" */
};

static struct tfs_topic *fake_ref(void *arg, struct tfs_topic *t)
{
	struct fake_topics *f = arg;

	if (f->refuse)
		return NULL;
	atomic_fetch_add(&f->refs, 1);
	return t;
}

static void fake_unref(void *arg, struct tfs_topic *t)
{
	struct fake_topics *f = arg;

	(void)t;
	atomic_fetch_sub(&f->refs, 1);
}

static char topic_a, topic_b;       /* addresses serve as topics */
#define TA ((struct tfs_topic *)&topic_a)
#define TB ((struct tfs_topic *)&topic_b)

#define BOUND_BYTES 1000
#define BOUND_FILES 4

struct fixture {
	struct fake_topics f;
	struct tfs_scratch *s;
};

static int setup_bounds(void **state, uint64_t bytes, uint32_t files)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct tfs_inode_topic_ops ops = { fake_ref, fake_unref, &fx->f };

	assert_int_equal(tfs_scratch_create(&ops, bytes, files, &fx->s), 0);
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	return setup_bounds(state, BOUND_BYTES, BOUND_FILES);
}

static int setup_large(void **state)
{
	return setup_bounds(state, 1u << 20, 64);
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	tfs_scratch_destroy(fx->s);
	assert_int_equal(atomic_load(&fx->f.refs), 0);   /* every topic reference back */
	free(fx);
	return 0;
}

static struct tfs_scratch_file *make(struct fixture *fx, struct tfs_topic *t, int32_t p,
                                     const char *name)
{
	struct tfs_scratch_file *f = NULL;
	bool created = false;

	assert_int_equal(tfs_scratch_make(fx->s, t, p, name, 0600, 1000, 1000, true, &f, &created), 0);
	assert_true(created);
	return f;
}

static uint64_t bytes_used(struct fixture *fx)
{
	uint64_t b;

	tfs_scratch_usage(fx->s, &b, NULL, NULL, NULL);
	return b;
}

static uint32_t files_used(struct fixture *fx)
{
	uint32_t n;

	tfs_scratch_usage(fx->s, NULL, &n, NULL, NULL);
	return n;
}

static void test_names(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *a, *b, *c, *got, *again;
	bool created = true;

	a = make(fx, TA, 0, ".x");
	b = make(fx, TA, 1, ".x");              /* another partition: another file */
	c = make(fx, TB, 0, ".x");              /* another topic: another file */
	assert_ptr_not_equal(a, b);
	assert_ptr_not_equal(a, c);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".x", &got), 0);
	assert_ptr_equal(got, a);
	tfs_scratch_put(got);
	assert_int_equal(tfs_scratch_make(fx->s, TA, 0, ".x", 0600, 0, 0, true, &got, &created),
	                 -EEXIST);
	assert_int_equal(tfs_scratch_make(fx->s, TA, 0, ".x", 0644, 0, 0, false, &again, &created), 0);
	assert_false(created);
	assert_ptr_equal(again, a);
	tfs_scratch_put(again);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".y", &got), -ENOENT);
	assert_null(got);

	assert_int_equal(tfs_scratch_unlink(fx->s, TA, 0, ".x"), 0);
	assert_int_equal(tfs_scratch_unlink(fx->s, TA, 0, ".x"), -ENOENT);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".x", &got), -ENOENT);
	assert_false(tfs_scratch_named(a));
	assert_true(tfs_scratch_named(b));
	assert_int_equal(files_used(fx), 3);    /* a is still referenced */
	tfs_scratch_put(a);
	assert_int_equal(files_used(fx), 2);
	tfs_scratch_put(b);
	tfs_scratch_put(c);
	assert_int_equal(files_used(fx), 2);    /* still named */
}

static void test_content(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *f = make(fx, TA, 0, ".c");
	char buf[32];

	assert_int_equal(tfs_scratch_write(f, "abc", 3, 0, false), 3);
	assert_int_equal(tfs_scratch_write(f, "xy", 2, 6, false), 2);    /* a hole */
	assert_int_equal(tfs_scratch_read(f, buf, sizeof(buf), 0), 8);
	assert_memory_equal(buf, "abc\0\0\0xy", 8);
	assert_int_equal(tfs_scratch_write(f, "!", 1, 0, true), 1);      /* append */
	assert_int_equal(tfs_scratch_read(f, buf, sizeof(buf), 8), 1);
	assert_int_equal(buf[0], '!');
	assert_int_equal(tfs_scratch_read(f, buf, sizeof(buf), 100), 0);
	assert_int_equal(tfs_scratch_read(f, buf, sizeof(buf), -1), -EINVAL);
	assert_int_equal(tfs_scratch_write(f, "a", 1, -1, false), -EINVAL);
	assert_int_equal(bytes_used(fx), 9);
	assert_int_equal(tfs_scratch_truncate(f, 2), 0);
	assert_int_equal(bytes_used(fx), 2);
	assert_int_equal(tfs_scratch_truncate(f, 5), 0);
	assert_int_equal(tfs_scratch_read(f, buf, sizeof(buf), 0), 5);
	assert_memory_equal(buf, "ab\0\0\0", 5);
	assert_int_equal(tfs_scratch_truncate(f, -1), -EINVAL);
	tfs_scratch_put(f);
}

static void test_attrs(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *f = make(fx, TA, 0, ".a");
	struct timespec t = { .tv_sec = 12345, .tv_nsec = 678 };
	struct stat st;

	tfs_scratch_stat(f, &st);
	assert_int_equal(st.st_mode, S_IFREG | 0600);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(st.st_size, 0);
	tfs_scratch_set_mode(f, S_IFREG | 04755);
	tfs_scratch_set_owner(f, 7, (gid_t)-1);
	tfs_scratch_set_times(f, NULL, &t);
	tfs_scratch_stat(f, &st);
	assert_int_equal(st.st_mode, S_IFREG | 04755);
	assert_int_equal(st.st_uid, 7);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(st.st_mtim.tv_sec, 12345);
	assert_int_equal(st.st_mtim.tv_nsec, 678);
	assert_int_equal(tfs_scratch_unlink(fx->s, TA, 0, ".a"), 0);
	tfs_scratch_stat(f, &st);
	assert_int_equal(st.st_nlink, 0);
	tfs_scratch_put(f);
}

/* A write or truncate past the byte bound is ENOSPC and leaves everything as it
 * was; bytes of an unlinked file still count until its last reference goes. */
static void test_byte_bound(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *f = make(fx, TA, 0, ".f"), *g = make(fx, TA, 0, ".g");
	static char big[BOUND_BYTES + 1];
	char buf[8];

	memset(big, 'b', sizeof(big));
	assert_int_equal(tfs_scratch_write(f, big, BOUND_BYTES + 1, 0, false), -ENOSPC);
	assert_int_equal(bytes_used(fx), 0);
	assert_int_equal(tfs_scratch_write(f, big, BOUND_BYTES - 10, 0, false), BOUND_BYTES - 10);
	assert_int_equal(tfs_scratch_write(g, "0123456789", 10, 0, false), 10);
	assert_int_equal(bytes_used(fx), BOUND_BYTES);
	assert_int_equal(tfs_scratch_write(g, "z", 1, 10, false), -ENOSPC);
	assert_int_equal(tfs_scratch_write(g, "z", 1, 0, true), -ENOSPC);
	assert_int_equal(tfs_scratch_truncate(g, 11), -ENOSPC);
	assert_int_equal(tfs_scratch_truncate(g, (off_t)1 << 40), -ENOSPC);
	/* Overwriting inside the file needs no room. */
	assert_int_equal(tfs_scratch_write(g, "AB", 2, 8, false), 2);
	assert_int_equal(tfs_scratch_read(g, buf, sizeof(buf), 6), 4);
	assert_memory_equal(buf, "67AB", 4);
	assert_int_equal(bytes_used(fx), BOUND_BYTES);

	assert_int_equal(tfs_scratch_unlink(fx->s, TA, 0, ".f"), 0);
	assert_int_equal(tfs_scratch_truncate(g, 11), -ENOSPC);   /* f is still open */
	tfs_scratch_put(f);
	assert_int_equal(bytes_used(fx), 10);
	assert_int_equal(tfs_scratch_truncate(g, 11), 0);
	tfs_scratch_put(g);
}

static void test_file_bound(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *f[BOUND_FILES], *extra = NULL;
	char name[8];
	bool created;

	for (int i = 0; i < BOUND_FILES; i++) {
		snprintf(name, sizeof(name), ".%d", i);
		f[i] = make(fx, TA, 0, name);
	}
	assert_int_equal(tfs_scratch_make(fx->s, TA, 0, ".more", 0600, 0, 0, false, &extra, &created),
	                 -ENOSPC);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".more", &extra), -ENOENT);
	/* An existing name still opens at the bound. */
	assert_int_equal(tfs_scratch_make(fx->s, TA, 0, ".0", 0600, 0, 0, false, &extra, &created), 0);
	tfs_scratch_put(extra);
	assert_int_equal(tfs_scratch_unlink(fx->s, TA, 0, ".1"), 0);
	tfs_scratch_put(f[1]);
	extra = make(fx, TA, 0, ".more");
	tfs_scratch_put(extra);
	for (int i = 0; i < BOUND_FILES; i++)
		if (i != 1)
			tfs_scratch_put(f[i]);
	assert_int_equal(files_used(fx), BOUND_FILES);
}

static void test_rename(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *a = make(fx, TA, 0, ".a"), *b = make(fx, TA, 0, ".b"), *got;
	char buf[4];

	assert_int_equal(tfs_scratch_write(a, "A", 1, 0, false), 1);
	assert_int_equal(tfs_scratch_write(b, "B", 1, 0, false), 1);
	assert_int_equal(tfs_scratch_rename(fx->s, TA, 0, ".a", ".b", true), -EEXIST);
	assert_int_equal(tfs_scratch_rename(fx->s, TA, 0, ".none", ".c", false), -ENOENT);
	assert_int_equal(tfs_scratch_rename(fx->s, TA, 0, ".a", ".a", false), 0);
	assert_int_equal(tfs_scratch_rename(fx->s, TA, 0, ".a", ".b", false), 0);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".a", &got), -ENOENT);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".b", &got), 0);
	assert_ptr_equal(got, a);
	assert_int_equal(tfs_scratch_read(got, buf, sizeof(buf), 0), 1);
	assert_int_equal(buf[0], 'A');
	tfs_scratch_put(got);
	/* The replaced file lives on for whoever holds it, unnamed. */
	assert_false(tfs_scratch_named(b));
	assert_int_equal(tfs_scratch_read(b, buf, sizeof(buf), 0), 1);
	assert_int_equal(buf[0], 'B');
	assert_int_equal(bytes_used(fx), 2);
	tfs_scratch_put(b);
	assert_int_equal(bytes_used(fx), 1);
	assert_int_equal(tfs_scratch_rename(fx->s, TA, 0, ".b", ".c", true), 0);
	tfs_scratch_put(a);
	assert_int_equal(files_used(fx), 1);
}

struct seen {
	char bytes[16];
	size_t len;
	int result;
};

static int take(void *arg, const uint8_t *p, size_t len)
{
	struct seen *s = arg;

	s->len = len;
	memcpy(s->bytes, p, len < sizeof(s->bytes) ? len : sizeof(s->bytes));
	return s->result;
}

/* A rename onto a key: the content goes to fn; the name goes only if fn succeeds. */
static void test_consume(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *f = make(fx, TA, 0, ".t"), *got;
	struct seen s = { .result = -EFBIG };

	assert_int_equal(tfs_scratch_write(f, "value", 5, 0, false), 5);
	assert_int_equal(tfs_scratch_consume(f, take, &s), -EFBIG);
	assert_int_equal(s.len, 5);
	assert_memory_equal(s.bytes, "value", 5);
	assert_true(tfs_scratch_named(f));
	s.result = 0;
	assert_int_equal(tfs_scratch_consume(f, take, &s), 0);
	assert_false(tfs_scratch_named(f));
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".t", &got), -ENOENT);
	assert_int_equal(tfs_scratch_consume(f, take, &s), 0);    /* unnamed: nothing to drop */
	tfs_scratch_put(f);
	assert_int_equal(files_used(fx), 0);
	assert_int_equal(bytes_used(fx), 0);
}

static void test_topics(void **state)
{
	struct fixture *fx = *state;
	struct tfs_scratch_file *a = make(fx, TA, 0, ".a"), *b = make(fx, TB, 0, ".b"), *got;
	bool created;

	assert_int_equal(atomic_load(&fx->f.refs), 2);
	tfs_scratch_put(a);
	tfs_scratch_forget_topic(fx->s, TA);
	assert_int_equal(tfs_scratch_lookup(fx->s, TA, 0, ".a", &got), -ENOENT);
	assert_int_equal(tfs_scratch_lookup(fx->s, TB, 0, ".b", &got), 0);
	tfs_scratch_put(got);
	assert_int_equal(atomic_load(&fx->f.refs), 1);
	fx->f.refuse = true;                    /* deleted: nothing can be made in it */
	assert_int_equal(tfs_scratch_make(fx->s, TA, 0, ".n", 0600, 0, 0, false, &got, &created),
	                 -ENOENT);
	fx->f.refuse = false;
	tfs_scratch_put(b);
}

static void test_many_names(void **state)
{
	struct fixture *fx = *state;
	char name[16];

	for (int i = 0; i < 64; i++) {          /* past the initial buckets: the map grows */
		snprintf(name, sizeof(name), ".n%d", i);
		tfs_scratch_put(make(fx, TA, i % 3, name));
	}
	for (int i = 0; i < 64; i++) {
		struct tfs_scratch_file *got;
		snprintf(name, sizeof(name), ".n%d", i);
		assert_int_equal(tfs_scratch_lookup(fx->s, TA, i % 3, name, &got), 0);
		tfs_scratch_put(got);
		assert_int_equal(tfs_scratch_lookup(fx->s, TA, (i + 1) % 3, name, &got), -ENOENT);
	}
	assert_int_equal(files_used(fx), 64);
}

/* Writers racing for the last bytes never take more than the bound together, and
 * the count matches what the files hold. */
#define RACERS 4
#define RACE_CHUNK 7

struct racer {
	struct tfs_scratch_file *f;
	size_t written;
};

/* Bytes the heap holds for the program now. */
static size_t heap_bytes(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
#endif
}

/* The bound is of memory: a file cut short gives its memory back, so files
 * filled and truncated one after another cannot hold more than the bound. */
static void test_truncate_frees(void **state)
{
	enum { FILES = 8 };
	const size_t bound = 1u << 20, slack = 64u << 10;
	struct fixture *fx = *state;
	struct tfs_scratch_file *f[FILES];
	uint8_t *big = calloc(1, bound);
	size_t before;

	assert_non_null(big);
	before = heap_bytes();
	for (int i = 0; i < FILES; i++) {
		char name[16];
		snprintf(name, sizeof(name), ".t%d", i);
		f[i] = make(fx, TA, 0, name);
		assert_int_equal(tfs_scratch_write(f[i], big, bound, 0, false), (ssize_t)bound);
		assert_int_equal(tfs_scratch_truncate(f[i], 0), 0);
	}
	assert_int_equal(bytes_used(fx), 0);
	assert_true(heap_bytes() - before <= bound + bound / 2 + slack);
	for (int i = 0; i < FILES; i++)
		tfs_scratch_put(f[i]);
	free(big);
}

static void *race(void *arg)
{
	struct racer *r = arg;
	char chunk[RACE_CHUNK];

	memset(chunk, 'r', sizeof(chunk));
	for (;;) {
		ssize_t n = tfs_scratch_write(r->f, chunk, sizeof(chunk), 0, true);
		if (n < 0) {
			assert_int_equal(n, -ENOSPC);
			return NULL;
		}
		r->written += (size_t)n;
	}
}

static void test_race(void **state)
{
	struct fixture *fx = *state;
	struct racer r[RACERS];
	pthread_t th[RACERS];
	size_t total = 0;
	char name[8];

	for (int i = 0; i < RACERS; i++) {
		snprintf(name, sizeof(name), ".r%d", i);
		r[i].f = make(fx, TA, 0, name);
		r[i].written = 0;
	}
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
	for (int i = 0; i < RACERS; i++) {
		struct stat st;
		pthread_join(th[i], NULL);
		tfs_scratch_stat(r[i].f, &st);
		assert_int_equal((size_t)st.st_size, r[i].written);
		total += r[i].written;
	}
	assert_true(total <= BOUND_BYTES);
	assert_true(total > BOUND_BYTES - RACERS * RACE_CHUNK);
	assert_int_equal(bytes_used(fx), total);
	for (int i = 0; i < RACERS; i++)
		tfs_scratch_put(r[i].f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_content, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attrs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_consume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_topics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_names, setup_large, teardown),
		cmocka_unit_test_setup_teardown(test_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_frees, setup_large, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
