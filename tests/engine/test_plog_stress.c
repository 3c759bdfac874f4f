/* test_plog_stress.c - appends, readers, rolls and the cleaner on one partition at
 * once (docs/engine.md §3, §5): a group's keys reach the key directory after the
 * queue has passed to the next leader, in the order the groups were written.
 *
 * Writers append units of records over keys of their own and, the moment an
 * append returns, read the unit's last key back: it must be the value just
 * written, or gone if it was a tombstone (a read after the acknowledgement sees
 * the write). Readers meanwhile read every writer's keys and check that each value
 * is whole and that no key goes back to an older value than one already seen.
 * A third kind of thread rolls the active segment and runs cleaning passes,
 * whose swaps run as the group-commit leader beside the groups still indexing
 * keys. At the end the log holds exactly the records written (end offset, and
 * every offset read back), the key directory holds each key's newest value, and
 * a reopen rebuilds the same. Sized for TSan (build-tsan).
 *
 * A second case has the writers share their keys (below). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "tests/engine/cleaner_fixture.h"

enum {
	WRITERS = 2,
	READERS = 2,
	UNITS = 150,           /* appends a writer makes */
	UNIT_RECORDS = 24,     /* records an append holds */
	KEYS = 40,             /* keys a writer owns */
	TOMBSTONE_EVERY = 5,   /* every 5th unit ends with a tombstone */
	VALUE_BYTES = 48,
};

/* The value of a writer's n-th record: "w<writer>-s<n>-" then fill to VALUE_BYTES
 * of one letter, so that a torn or mixed value shows. */
static void value_of(char *v, int writer, int seq)
{
	int n = snprintf(v, VALUE_BYTES + 1, "w%d-s%06d-", writer, seq);
	memset(v + n, 'a' + seq % 26, (size_t)(VALUE_BYTES - n));
	v[VALUE_BYTES] = '\0';
}

static void key_of(char *k, size_t cap, int writer, int key)
{
	snprintf(k, cap, "w%d-k%02d", writer, key);
}

/* The key and value of a writer's record seq (n-th of the whole run). */
static int key_index(int seq)
{
	return seq % KEYS;
}

/* Whether record seq is a tombstone: the last of every TOMBSTONE_EVERY-th unit. */
static bool is_tombstone(int seq)
{
	int unit = seq / UNIT_RECORDS;
	return unit % TOMBSTONE_EVERY == TOMBSTONE_EVERY - 1 && seq % UNIT_RECORDS == UNIT_RECORDS - 1;
}

struct stress {
	struct fx *f;
	atomic_int writers_left;
	atomic_int failures;
};

struct writer_arg {
	struct stress *s;
	int id;
};

static void note_failure(struct stress *s, const char *what, const char *key)
{
	fprintf(stderr, "stress: %s (key %s)\n", what, key);
	atomic_fetch_add(&s->failures, 1);
}

static void *writer_main(void *p)
{
	struct writer_arg *a = p;
	struct tfs_plog *pl = a->s->f->pl;
	static char keys[WRITERS][UNIT_RECORDS][16];
	static char vals[WRITERS][UNIT_RECORDS][VALUE_BYTES + 1];
	struct tfs_append_rec recs[UNIT_RECORDS];

	for (int u = 0; u < UNITS; u++) {
		int last = 0;
		for (int i = 0; i < UNIT_RECORDS; i++) {
			int seq = u * UNIT_RECORDS + i;
			key_of(keys[a->id][i], sizeof(keys[a->id][i]), a->id, key_index(seq));
			value_of(vals[a->id][i], a->id, seq);
			recs[i] = (struct tfs_append_rec){
				.key = tfs_slice_make(keys[a->id][i], strlen(keys[a->id][i])),
				.value = tfs_slice_make(vals[a->id][i], VALUE_BYTES),
				.value_null = is_tombstone(seq),
			};
			last = i;
		}
		if (tfs_plog_append(pl, recs, UNIT_RECORDS, u % 40 == 0, NULL, NULL) != 0) {
			note_failure(a->s, "append failed", keys[a->id][0]);
			break;
		}
		/* read after the acknowledgement: this writer alone writes its keys */
		struct tfs_record_copy rc;
		int r = tfs_plog_read_key(pl, recs[last].key, &rc);
		if (recs[last].value_null) {
			if (r != -ENOENT)
				note_failure(a->s, "a tombstone acknowledged but the key still reads", keys[a->id][last]);
			if (r == 0)
				tfs_record_copy_release(&rc);
			continue;
		}
		if (r != 0) {
			note_failure(a->s, "a record acknowledged but its key does not read", keys[a->id][last]);
			continue;
		}
		if (rc.value_len != VALUE_BYTES || memcmp(rc.value, vals[a->id][last], VALUE_BYTES) != 0)
			note_failure(a->s, "a record acknowledged but its key reads another value", keys[a->id][last]);
		tfs_record_copy_release(&rc);
	}
	atomic_fetch_sub(&a->s->writers_left, 1);
	return NULL;
}

/* Parses "w<writer>-s<seq>-<fill>": the seq, or -1 when the value is not whole. */
static int value_seq(const struct tfs_record_copy *rc, int writer)
{
	char want[VALUE_BYTES + 1], got[VALUE_BYTES + 1];
	int w, seq;

	if (rc->value_len != VALUE_BYTES)
		return -1;
	memcpy(got, rc->value, VALUE_BYTES);
	got[VALUE_BYTES] = '\0';
	if (sscanf(got, "w%d-s%d-", &w, &seq) != 2 || w != writer || seq < 0)
		return -1;
	value_of(want, writer, seq);
	return strcmp(want, got) == 0 ? seq : -1;
}

static void *reader_main(void *p)
{
	struct stress *s = p;
	int newest[WRITERS][KEYS];
	char k[16];

	memset(newest, -1, sizeof(newest));
	/* goes on until every writer is done, then once more over every key */
	for (bool last = false; !last;) {
		last = atomic_load(&s->writers_left) == 0;
		for (int w = 0; w < WRITERS; w++) {
			for (int i = 0; i < KEYS; i++) {
				struct tfs_record_copy rc;
				int r, seq;
				key_of(k, sizeof(k), w, i);
				r = tfs_plog_read_key(s->f->pl, tfs_slice_make(k, strlen(k)), &rc);
				if (r == -ENOENT)
					continue;          /* not yet written, or a tombstone */
				if (r != 0) {
					note_failure(s, "a read failed", k);
					continue;
				}
				seq = value_seq(&rc, w);
				tfs_record_copy_release(&rc);
				if (seq < 0 || key_index(seq) != i)
					note_failure(s, "a value read torn or under another key", k);
				else if (seq < newest[w][i])
					note_failure(s, "a key went back to an older value", k);
				else
					newest[w][i] = seq;
			}
		}
	}
	return NULL;
}

/* Rolls and cleans until every writer is done: every swap and roll is an
 * exclusive request, in the queue between groups. */
static void *cleaner_main(void *p)
{
	struct stress *s = p;

	while (atomic_load(&s->writers_left) > 0) {
		int rc = tfs_plog_roll(s->f->pl);
		if (rc == 0)
			rc = fx_clean(s->f);
		if (rc != 0 && rc != -EAGAIN) {
			fprintf(stderr, "stress: roll or clean: %s\n", tfs_strerror(rc));
			atomic_fetch_add(&s->failures, 1);
			break;
		}
	}
	return NULL;
}

/* What the log must hold at the end: each key's newest record. */
static void check_final(struct fx *f)
{
	char k[16], v[VALUE_BYTES + 1];
	size_t live = 0;

	for (int w = 0; w < WRITERS; w++) {
		for (int i = 0; i < KEYS; i++) {
			int newest = -1;
			for (int seq = 0; seq < UNITS * UNIT_RECORDS; seq++)
				if (key_index(seq) == i)
					newest = seq;
			key_of(k, sizeof(k), w, i);
			if (is_tombstone(newest)) {
				fx_value_is(f->pl, k, NULL);
				continue;
			}
			value_of(v, w, newest);
			fx_value_is(f->pl, k, v);
			live++;
		}
	}
	struct tfs_plog_stats st;
	tfs_plog_stats(f->pl, &st);
	assert_int_equal(st.log_end_offset, (tfs_offset_t)WRITERS * UNITS * UNIT_RECORDS);
	assert_int_equal(st.live_keys, live);
}

static void writers_readers_and_the_cleaner_share_one_partition(void **state)
{
	struct fx *f = *state;
	struct stress s = { .f = f };
	struct writer_arg wa[WRITERS];
	pthread_t wt[WRITERS], rt[READERS], ct;
	tfs_offset_t *offs;
	size_t n;

	f->cfg.segment_bytes = 64 * 1024;
	f->cfg.min_compaction_lag_ms = 0;
	fx_open(f);
	atomic_init(&s.writers_left, WRITERS);
	atomic_init(&s.failures, 0);
	for (int i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&rt[i], NULL, reader_main, &s), 0);
	assert_int_equal(pthread_create(&ct, NULL, cleaner_main, &s), 0);
	for (int i = 0; i < WRITERS; i++) {
		wa[i] = (struct writer_arg){ &s, i };
		assert_int_equal(pthread_create(&wt[i], NULL, writer_main, &wa[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++)
		pthread_join(wt[i], NULL);
	pthread_join(ct, NULL);
	for (int i = 0; i < READERS; i++)
		pthread_join(rt[i], NULL);
	assert_int_equal(atomic_load(&s.failures), 0);

	check_final(f);
	/* the cleaner removed only superseded records: what is left ascends, reads
	 * back whole, and holds at least every key's newest record */
	offs = fx_offsets(f->pl, &n);
	assert_true(n >= WRITERS * KEYS);
	assert_true(n <= (size_t)WRITERS * UNITS * UNIT_RECORDS);
	free(offs);
	fx_reopen(f);
	check_final(f);
}

/* ---- writers sharing keys ----
 *
 * Two writers walk the same keys in step: writer 0 puts each key, writer 1
 * deletes it, a unit of a few keys at a time, neither more than a unit ahead of
 * the other. So each key's two records land close together, in groups the two
 * threads index at the same time, and the key ends live or deleted by which of
 * them has the larger offset: a key directory that took two groups' changes out
 * of order for a shard (a tombstone before an older put brings the key back)
 * ends unlike the log. A reader meanwhile pages through the keys (readdir's
 * scan, across the shards). At the end, and after a reopen, the key directory
 * must hold what a replay of the log in offset order holds. */

enum { SHARED_UNITS = 3000, SHARED_UNIT_RECORDS = 4 };

struct shared_writer {
	struct tfs_plog *pl;
	int id;
	atomic_int *done;            /* units each writer has appended */
	atomic_int *left;
	int failed;
};

static void *shared_writer_main(void *p)
{
	struct shared_writer *a = p;
	char keys[SHARED_UNIT_RECORDS][16], vals[SHARED_UNIT_RECORDS][24];
	struct tfs_append_rec recs[SHARED_UNIT_RECORDS];

	for (int u = 0; u < SHARED_UNITS && !a->failed; u++) {
		/* in step with the other writer, at most one unit apart */
		while (atomic_load(&a->done[1 - a->id]) < u - 1 && atomic_load(a->left) == 2)
			sched_yield();
		for (int i = 0; i < SHARED_UNIT_RECORDS; i++) {
			snprintf(keys[i], sizeof(keys[i]), "s%05d", u * SHARED_UNIT_RECORDS + i);
			snprintf(vals[i], sizeof(vals[i]), "w%d-u%d-%d", a->id, u, i);
			recs[i] = (struct tfs_append_rec){
				.key = tfs_slice_make(keys[i], strlen(keys[i])),
				.value = tfs_slice_make(vals[i], strlen(vals[i])),
				.value_null = a->id == 1,
			};
		}
		if (tfs_plog_append(a->pl, recs, SHARED_UNIT_RECORDS, false, NULL, NULL) != 0)
			a->failed = 1;
		atomic_fetch_add(&a->done[a->id], 1);
	}
	atomic_fetch_sub(a->left, 1);
	return NULL;
}

struct page_walk {
	uint64_t last;
	size_t seen;
	int out_of_order;
};

static int page_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                      uint64_t hash)
{
	struct page_walk *w = arg;
	(void)info;
	if (hash != tfs_keydir_hash(key) || (w->seen > 0 && hash <= w->last))
		w->out_of_order = 1;
	w->last = hash;
	/* a page of 16 keys, as a small readdir buffer takes */
	return ++w->seen % 16 == 0;
}

static void writers_sharing_keys_leave_offset_order_in_the_key_directory(void **state)
{
	struct fx *f = *state;
	struct shared_writer w[2];
	pthread_t th[2];
	atomic_int left, done[2];
	int pages = 0;

	fx_open(f);
	atomic_init(&left, 2);
	atomic_init(&done[0], 0);
	atomic_init(&done[1], 0);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct shared_writer){ f->pl, i, done, &left, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, shared_writer_main, &w[i]), 0);
	}
	while (atomic_load(&left) > 0) {
		/* page through every key, resuming after the last hash of each page:
		 * hashes ascend within a walk, across the shards too */
		struct page_walk pw = { 0, 0, 0 };
		bool after = false;
		int rc;
		do {
			size_t before = pw.seen;
			rc = tfs_plog_scan_keys(f->pl, after, pw.last, page_visit, &pw);
			after = pw.seen > before || after;
		} while (rc == 1);
		assert_int_equal(rc, 0);
		assert_int_equal(pw.out_of_order, 0);
		assert_true(pw.seen <= SHARED_UNITS * SHARED_UNIT_RECORDS);
		pages++;
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(w[i].failed, 0);
	}
	assert_true(pages > 0);
	fx_digest_equal(fx_kd_digest(f->pl), fx_log_digest(f->pl));
	fx_reopen(f);
	fx_digest_equal(fx_kd_digest(f->pl), fx_log_digest(f->pl));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(writers_readers_and_the_cleaner_share_one_partition,
		                                fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(
			writers_sharing_keys_leave_offset_order_in_the_key_directory, fx_setup,
			fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
