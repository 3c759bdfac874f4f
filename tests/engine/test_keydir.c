/* test_keydir.c - the key directory: key -> newest record, and its resumable scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/log/keydir.h"
#include "engine/log/txn_tombs.h"
#include "tests/t_util.h"

/* Test hooks defined in engine/log/keydir.c: the public calls with a forced hash, and the
 * invariant checker (0, or the number of the violated invariant). */
extern int tfs_keydir__put_hashed(struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                                  const struct tfs_keyinfo *info);
extern void tfs_keydir__remove_hashed(struct tfs_keydir *kd, struct tfs_slice key,
                                      uint64_t hash, tfs_offset_t offset);
extern int tfs_keydir__check(const struct tfs_keydir *kd);

/* The contract's budget: bytes per live key beyond the key's own bytes. */
#define KEYDIR_BYTES_PER_KEY_MAX 48
/* A packed entry; the lower bound of any implementation that stores what we ask. */
#define ENTRY_BYTES_MIN 36
/* Allowance for a partly used entry chunk and arena chunk in small tables. */
#define CHUNK_SLACK_BYTES (16384 * 36 + 256 * 1024)
#define LONG_KEY_BYTES (100 * 1024)
#define KEY_BUF_BYTES 4096
#define ID_BYTES 4

/* ---- helpers ---- */

static uint64_t rng(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* What a put at `offset` records, derived from the offset so that a wrongly applied
 * stale put shows up in every field. */
static struct tfs_keyinfo info_at(tfs_offset_t offset)
{
	struct tfs_keyinfo info = { offset, offset * 3 + 1000, (uint32_t)(offset * 7) };
	return info;
}

static void assert_info_at(const struct tfs_keyinfo *info, tfs_offset_t offset)
{
	struct tfs_keyinfo want = info_at(offset);
	assert_int_equal(info->offset, want.offset);
	assert_int_equal(info->timestamp, want.timestamp);
	assert_int_equal(info->value_bytes, want.value_bytes);
}

static struct tfs_slice str(const char *s)
{
	return tfs_slice_make(s, strlen(s));
}

static void put_at(struct tfs_keydir *kd, struct tfs_slice key, tfs_offset_t offset)
{
	struct tfs_keyinfo info = info_at(offset);
	assert_int_equal(tfs_keydir_put(kd, key, &info), 0);
}

static void assert_check(const struct tfs_keydir *kd)
{
	assert_int_equal(tfs_keydir__check(kd), 0);
}

/* Key number id: 4 id bytes (so keys are distinct and give their id back) then a
 * pseudo-random tail; mostly 4..32 bytes, some 2-byte-prefix and big keys. */
static size_t make_key(uint32_t id, uint8_t *buf)
{
	uint64_t x = mix(id);
	size_t len = ID_BYTES + x % 29;
	if (id % 4099 == 0)
		len = 300;
	if (id % 65537 == 1)
		len = 2000;
	memcpy(buf, &id, ID_BYTES);
	for (size_t i = ID_BYTES; i < len; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		buf[i] = (uint8_t)(x >> 56);
	}
	return len;
}

static uint32_t key_id(struct tfs_slice key)
{
	uint32_t id;
	assert_true(key.len >= ID_BYTES);
	memcpy(&id, key.p, ID_BYTES);
	return id;
}

static void put_id(struct tfs_keydir *kd, uint32_t id, tfs_offset_t offset)
{
	uint8_t buf[KEY_BUF_BYTES];
	put_at(kd, tfs_slice_make(buf, make_key(id, buf)), offset);
}

static void remove_id(struct tfs_keydir *kd, uint32_t id, tfs_offset_t offset)
{
	uint8_t buf[KEY_BUF_BYTES];
	tfs_keydir_remove(kd, tfs_slice_make(buf, make_key(id, buf)), offset);
}

/* A visitor that records everything in order. */
struct rec_key {
	uint8_t bytes[16];
	size_t len;
	uint64_t hash;
};

struct recorder {
	struct rec_key keys[32];
	size_t n;
	size_t stop_at; /* return stop_value when called for the key with this index */
	int stop_value;
};

static int record_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                        uint64_t hash)
{
	struct recorder *r = arg;
	(void)info;
	if (r->n == r->stop_at)
		return r->stop_value;
	assert_true(r->n < sizeof r->keys / sizeof r->keys[0]);
	assert_true(key.len <= sizeof r->keys[0].bytes);
	if (key.len)
		memcpy(r->keys[r->n].bytes, key.p, key.len);
	r->keys[r->n].len = key.len;
	r->keys[r->n].hash = hash;
	r->n++;
	return 0;
}

static void recorder_reset(struct recorder *r)
{
	memset(r, 0, sizeof *r);
	r->stop_at = SIZE_MAX;
}

/* A visitor that pages through a scan like readdir: accepts up to `limit` keys per
 * call, then refuses one (not consumed); counts visits per key id. */
struct pager {
	size_t limit, taken;
	bool have_last;
	uint64_t last;      /* hash of the last accepted key: the cookie */
	uint8_t *seen;      /* visits per id */
	size_t seen_ids;
	size_t total;
};

static int pager_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                       uint64_t hash)
{
	struct pager *p = arg;
	uint32_t id;
	(void)info;
	if (p->taken == p->limit)
		return 1;
	id = key_id(key);
	assert_true(id < p->seen_ids);
	assert_int_equal(hash, tfs_keydir_hash(key));
	if (p->have_last)
		assert_true(hash > p->last); /* strictly ascending across resumed calls */
	assert_int_equal(p->seen[id], 0); /* never repeated */
	p->seen[id]++;
	p->last = hash;
	p->have_last = true;
	p->taken++;
	p->total++;
	return 0;
}

/* One resumed step; returns true when the scan reached the end. */
static bool pager_step(struct tfs_keydir *kd, struct pager *p)
{
	int rc;
	p->taken = 0;
	rc = tfs_keydir_scan(kd, p->have_last, p->last, pager_visit, p);
	assert_true(rc == 0 || rc == 1);
	if (rc == 1)
		assert_int_equal(p->taken, p->limit);
	return rc == 0;
}

/* ---- put / get / replace / remove ---- */

static void test_put_get_replace_remove(void **state)
{
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info;
	(void)state;
	assert_non_null(kd);
	assert_int_equal(tfs_keydir_count(kd), 0);
	assert_int_equal(tfs_keydir_get(kd, str("a"), &info), 0);

	put_at(kd, str("alpha"), 10);
	put_at(kd, str("beta"), 11);
	assert_int_equal(tfs_keydir_count(kd), 2);
	assert_int_equal(tfs_keydir_key_bytes(kd), 9);
	assert_int_equal(tfs_keydir_get(kd, str("alpha"), &info), 1);
	assert_info_at(&info, 10);
	assert_int_equal(tfs_keydir_get(kd, str("beta"), &info), 1);
	assert_info_at(&info, 11);
	assert_int_equal(tfs_keydir_get(kd, str("alph"), &info), 0);
	assert_int_equal(tfs_keydir_get(kd, str("alphaa"), &info), 0);

	/* replace: newer offset wins, key count and bytes unchanged */
	put_at(kd, str("alpha"), 20);
	assert_int_equal(tfs_keydir_count(kd), 2);
	assert_int_equal(tfs_keydir_key_bytes(kd), 9);
	assert_int_equal(tfs_keydir_get(kd, str("alpha"), &info), 1);
	assert_info_at(&info, 20);

	/* a record at the same offset (an idempotent replay) is applied */
	put_at(kd, str("alpha"), 20);
	assert_int_equal(tfs_keydir_get(kd, str("alpha"), &info), 1);
	assert_info_at(&info, 20);

	tfs_keydir_remove(kd, str("alpha"), 21);
	assert_int_equal(tfs_keydir_get(kd, str("alpha"), &info), 0);
	assert_int_equal(tfs_keydir_count(kd), 1);
	assert_int_equal(tfs_keydir_key_bytes(kd), 4);
	/* removing an absent key changes nothing */
	tfs_keydir_remove(kd, str("alpha"), 22);
	tfs_keydir_remove(kd, str("gamma"), 22);
	assert_int_equal(tfs_keydir_count(kd), 1);
	/* a removed key can come back */
	put_at(kd, str("alpha"), 30);
	assert_int_equal(tfs_keydir_get(kd, str("alpha"), &info), 1);
	assert_info_at(&info, 30);
	assert_int_equal(tfs_keydir_count(kd), 2);
	assert_check(kd);

	tfs_keydir_remove(kd, str("alpha"), 31);
	tfs_keydir_remove(kd, str("beta"), 31);
	assert_int_equal(tfs_keydir_count(kd), 0);
	assert_int_equal(tfs_keydir_key_bytes(kd), 0);
	assert_check(kd);
	put_at(kd, str("beta"), 40); /* usable again after emptying */
	assert_int_equal(tfs_keydir_get(kd, str("beta"), &info), 1);
	assert_check(kd);
	tfs_keydir_destroy(kd);
	tfs_keydir_destroy(NULL);
}

static void test_put_at_lower_offset_is_ignored(void **state)
{
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info;
	(void)state;
	put_at(kd, str("k"), 100);
	put_at(kd, str("k"), 99);
	put_at(kd, str("k"), 0);
	assert_int_equal(tfs_keydir_get(kd, str("k"), &info), 1);
	assert_info_at(&info, 100); /* offset, timestamp and size all from offset 100 */
	assert_int_equal(tfs_keydir_count(kd), 1);
	assert_check(kd);
	tfs_keydir_destroy(kd);
}

static void test_tombstone_at_lower_offset_does_not_remove(void **state)
{
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info;
	(void)state;
	put_at(kd, str("k"), 100);
	tfs_keydir_remove(kd, str("k"), 99);
	assert_int_equal(tfs_keydir_get(kd, str("k"), &info), 1);
	assert_info_at(&info, 100);
	tfs_keydir_remove(kd, str("k"), 100); /* not strictly newer: the record stays */
	assert_int_equal(tfs_keydir_get(kd, str("k"), &info), 1);
	assert_int_equal(tfs_keydir_count(kd), 1);
	tfs_keydir_remove(kd, str("k"), 101);
	assert_int_equal(tfs_keydir_get(kd, str("k"), &info), 0);
	assert_int_equal(tfs_keydir_count(kd), 0);
	assert_check(kd);
	tfs_keydir_destroy(kd);
}

static void test_empty_key_is_a_key(void **state)
{
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info;
	struct recorder r;
	static const uint8_t some[] = "x";
	(void)state;
	put_at(kd, tfs_slice_make(NULL, 0), 5);
	put_at(kd, str("a"), 6);
	assert_int_equal(tfs_keydir_count(kd), 2);
	assert_int_equal(tfs_keydir_key_bytes(kd), 1);
	/* the empty key is the same whatever pointer carries it */
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(some, 0), &info), 1);
	assert_info_at(&info, 5);
	assert_int_equal(tfs_keydir_hash(tfs_slice_make(NULL, 0)),
	                 tfs_keydir_hash(tfs_slice_make(some, 0)));

	recorder_reset(&r);
	assert_int_equal(tfs_keydir_scan(kd, false, 0, record_visit, &r), 0);
	assert_int_equal(r.n, 2);
	assert_true(r.keys[0].len == 0 || r.keys[1].len == 0);

	put_at(kd, tfs_slice_make(some, 0), 7);
	assert_int_equal(tfs_keydir_count(kd), 2);
	tfs_keydir_remove(kd, tfs_slice_make(NULL, 0), 8);
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(NULL, 0), &info), 0);
	assert_int_equal(tfs_keydir_count(kd), 1);
	assert_check(kd);
	tfs_keydir_destroy(kd);
}

/* Lengths around every encoding boundary (1- and 2-byte prefix, own allocation) and
 * 100 KiB keys that differ only in their last byte or in their length. */
static void test_long_keys(void **state)
{
	static const size_t lens[] = { 1, 127, 128, 129, 255, 256, 1023, 1024, 1025, 4096,
	                               LONG_KEY_BYTES, LONG_KEY_BYTES + 1 };
	const size_t nlens = sizeof lens / sizeof lens[0];
	struct tfs_keydir *kd = tfs_keydir_create();
	uint8_t *a = malloc(LONG_KEY_BYTES + 1), *b = malloc(LONG_KEY_BYTES + 1);
	struct tfs_keyinfo info;
	size_t key_bytes = 0, mem_with_big;
	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < LONG_KEY_BYTES + 1; i++)
		a[i] = b[i] = (uint8_t)mix(i);

	for (size_t i = 0; i < nlens; i++) {
		put_at(kd, tfs_slice_make(a, lens[i]), (tfs_offset_t)i);
		key_bytes += lens[i];
	}
	b[LONG_KEY_BYTES - 1] ^= 1; /* same length as a 100 KiB key, last byte differs */
	put_at(kd, tfs_slice_make(b, LONG_KEY_BYTES), 1000);
	key_bytes += LONG_KEY_BYTES;
	assert_int_equal(tfs_keydir_count(kd), nlens + 1);
	assert_int_equal(tfs_keydir_key_bytes(kd), key_bytes);
	assert_check(kd);

	for (size_t i = 0; i < nlens; i++) {
		assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(a, lens[i]), &info), 1);
		assert_info_at(&info, (tfs_offset_t)i);
	}
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(b, LONG_KEY_BYTES), &info), 1);
	assert_info_at(&info, 1000);
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(b, LONG_KEY_BYTES + 1), &info), 0);
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(a, LONG_KEY_BYTES - 1), &info), 0);
	mem_with_big = tfs_keydir_memory_bytes(kd);
	assert_true(mem_with_big >= key_bytes);

	/* replace and remove the big ones; their memory goes back at once */
	put_at(kd, tfs_slice_make(a, LONG_KEY_BYTES), 2000);
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(a, LONG_KEY_BYTES), &info), 1);
	assert_info_at(&info, 2000);
	tfs_keydir_remove(kd, tfs_slice_make(a, LONG_KEY_BYTES), 2001);
	tfs_keydir_remove(kd, tfs_slice_make(b, LONG_KEY_BYTES), 2001);
	key_bytes -= 2 * LONG_KEY_BYTES;
	assert_int_equal(tfs_keydir_key_bytes(kd), key_bytes);
	assert_true(tfs_keydir_memory_bytes(kd) + 2 * LONG_KEY_BYTES <= mem_with_big);
	assert_int_equal(tfs_keydir_get(kd, tfs_slice_make(a, LONG_KEY_BYTES + 1), &info), 1);
	assert_check(kd);
	/* destroy with big keys still live: ASan's leak check sees them freed */
	tfs_keydir_destroy(kd);
	free(a);
	free(b);
}

/* ---- 1M random keys against a reference ---- */

#define REF_IDS (1u << 20)

struct ref {
	tfs_offset_t *off;  /* per id: offset of the newest put, or -1 if absent */
	size_t count, key_bytes;
	uint8_t *seen;
	uint64_t last;
	bool have_last;
	size_t visited;
};

static int ref_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                     uint64_t hash)
{
	struct ref *ref = arg;
	uint32_t id = key_id(key);
	uint8_t buf[KEY_BUF_BYTES];
	assert_true(id < REF_IDS);
	assert_true(ref->off[id] >= 0); /* invariant (3): only live keys */
	assert_int_equal(ref->seen[id], 0);
	ref->seen[id] = 1;
	assert_int_equal(key.len, make_key(id, buf));
	assert_memory_equal(key.p, buf, key.len);
	assert_int_equal(hash, tfs_keydir_hash(key));
	if (ref->have_last)
		assert_true(hash > ref->last);
	ref->last = hash;
	ref->have_last = true;
	assert_info_at(info, ref->off[id]);
	ref->visited++;
	return 0;
}

static void ref_verify_counts(struct tfs_keydir *kd, struct ref *ref)
{
	assert_check(kd);
	assert_int_equal(tfs_keydir_count(kd), ref->count);
	assert_int_equal(tfs_keydir_key_bytes(kd), ref->key_bytes);
}

/* Every id's get, and a full scan, agree with the reference. */
static void ref_verify(struct tfs_keydir *kd, struct ref *ref)
{
	uint8_t buf[KEY_BUF_BYTES];
	struct tfs_keyinfo info;
	size_t len;
	int got;

	ref_verify_counts(kd, ref);
	for (uint32_t id = 0; id < REF_IDS; id++) {
		len = make_key(id, buf);
		got = tfs_keydir_get(kd, tfs_slice_make(buf, len), &info);
		assert_int_equal(got, ref->off[id] >= 0);
		if (got)
			assert_info_at(&info, ref->off[id]);
	}
	memset(ref->seen, 0, REF_IDS);
	ref->have_last = false;
	ref->visited = 0;
	assert_int_equal(tfs_keydir_scan(kd, false, 0, ref_visit, ref), 0);
	assert_int_equal(ref->visited, ref->count);
}

static void ref_put(struct tfs_keydir *kd, struct ref *ref, uint32_t id, tfs_offset_t offset)
{
	uint8_t buf[KEY_BUF_BYTES];
	size_t len = make_key(id, buf);
	put_at(kd, tfs_slice_make(buf, len), offset);
	if (ref->off[id] < 0) {
		ref->count++;
		ref->key_bytes += len;
		ref->off[id] = offset;
	} else if (offset >= ref->off[id]) {
		ref->off[id] = offset;
	}
}

static void ref_remove(struct tfs_keydir *kd, struct ref *ref, uint32_t id, tfs_offset_t offset)
{
	uint8_t buf[KEY_BUF_BYTES];
	size_t len = make_key(id, buf);
	tfs_keydir_remove(kd, tfs_slice_make(buf, len), offset);
	if (ref->off[id] >= 0 && ref->off[id] < offset) {
		ref->off[id] = -1;
		ref->count--;
		ref->key_bytes -= len;
	}
}

static void test_random_ops_match_reference_1m(void **state)
{
	struct tfs_keydir *kd = tfs_keydir_create();
	struct ref ref = { 0 };
	uint64_t seed = 0x5eed;
	tfs_offset_t clock = 0;
	uint32_t id;
	unsigned op;
	(void)state;
	ref.off = malloc(REF_IDS * sizeof *ref.off);
	ref.seen = malloc(REF_IDS);
	assert_non_null(ref.off);
	assert_non_null(ref.seen);
	for (uint32_t i = 0; i < REF_IDS; i++)
		ref.off[i] = -1;

	/* 1M distinct keys, in a scattered order */
	for (uint32_t i = 0; i < REF_IDS; i++)
		ref_put(kd, &ref, (uint32_t)((i * 2654435761u) & (REF_IDS - 1)), ++clock);
	assert_int_equal(ref.count, REF_IDS);
	ref_verify_counts(kd, &ref);

	/* 1M random operations: newer puts, tombstones, and stale replays of both */
	for (uint32_t i = 0; i < REF_IDS; i++) {
		id = (uint32_t)(rng(&seed) & (REF_IDS - 1));
		op = (unsigned)(rng(&seed) % 100);
		if (op < 35) {
			ref_put(kd, &ref, id, ++clock);
		} else if (op < 70) {
			ref_remove(kd, &ref, id, ++clock);
		} else if (op < 85) {
			if (ref.off[id] > 0) /* stale put: ignored */
				ref_put(kd, &ref, id, (tfs_offset_t)(rng(&seed) % (uint64_t)ref.off[id]));
		} else {
			if (ref.off[id] >= 0) /* stale or equal tombstone: ignored */
				ref_remove(kd, &ref, id,
				           ref.off[id] - (tfs_offset_t)(rng(&seed) % 2));
		}
	}
	ref_verify(kd, &ref);

	/* remove ~95%: the bucket table shrinks, entries and arena compact */
	for (id = 0; id < REF_IDS; id++)
		if (id % 20)
			ref_remove(kd, &ref, id, ++clock);
	ref_verify_counts(kd, &ref);
	/* and grow again */
	for (id = 0; id < REF_IDS; id += 3)
		ref_put(kd, &ref, id, ++clock);
	ref_verify(kd, &ref);

	tfs_keydir_destroy(kd);
	free(ref.off);
	free(ref.seen);
}

/* ---- tfs_keydir_apply: the prefetching batch path ---- */

/* Keys of one apply batch; the ops' slices point here. */
struct apply_batch {
	struct tfs_keydir_op *ops;
	uint8_t *keys;
	size_t n, klen, cap;
};

/* Queues the change of ref_put / ref_remove and updates the reference the same way. */
static void batch_add(struct apply_batch *b, struct ref *ref, uint32_t id, bool remove,
                      tfs_offset_t offset)
{
	uint8_t *kp = b->keys + b->klen;
	size_t len = make_key(id, kp);
	struct tfs_keydir_op *op = &b->ops[b->n++];

	assert_true(b->n <= b->cap);
	b->klen += len;
	op->key = tfs_slice_make(kp, len);
	op->hash = tfs_keydir_hash(op->key);
	op->remove = remove;
	op->info = info_at(offset);
	if (remove) {
		if (ref->off[id] >= 0 && ref->off[id] < offset) {
			ref->off[id] = -1;
			ref->count--;
			ref->key_bytes -= len;
		}
	} else if (ref->off[id] < 0) {
		ref->count++;
		ref->key_bytes += len;
		ref->off[id] = offset;
	} else if (offset >= ref->off[id]) {
		ref->off[id] = offset;
	}
}

/* Every other batch goes shard by shard, last shard first (shards hold disjoint
 * keys, so their order must not matter), as group commit applies them. */
static void batch_apply(struct tfs_keydir *kd, struct apply_batch *b)
{
	static unsigned calls;

	if (calls++ % 2 == 0) {
		assert_int_equal(tfs_keydir_apply(kd, b->ops, b->n), 0);
	} else {
		for (unsigned s = TFS_KEYDIR_SHARDS; s-- > 0;)
			assert_int_equal(tfs_keydir_apply_shard(kd, s, b->ops, b->n), 0);
	}
	b->n = 0;
	b->klen = 0;
}

/* The same kind of workload as above through tfs_keydir_apply in batches of random
 * sizes: changes of one key repeat inside a batch, and the table doubles, halves
 * and compacts in the middle of batches while later changes are being prefetched.
 * The result must be exactly that of the changes one by one. */
static void test_apply_batches_match_reference(void **state)
{
	enum { BATCH_MAX = 3000 };
	struct tfs_keydir *kd = tfs_keydir_create();
	struct ref ref = { 0 };
	struct apply_batch b = { .cap = BATCH_MAX };
	uint64_t seed = 0xa991;
	tfs_offset_t clock = 0;
	size_t want = 0;
	(void)state;
	ref.off = malloc(REF_IDS * sizeof *ref.off);
	ref.seen = malloc(REF_IDS);
	b.ops = malloc(BATCH_MAX * sizeof *b.ops);
	b.keys = malloc((size_t)BATCH_MAX * KEY_BUF_BYTES / 2);   /* keys are <= 2000 bytes */
	assert_non_null(ref.off);
	assert_non_null(ref.seen);
	assert_non_null(b.ops);
	assert_non_null(b.keys);
	for (uint32_t i = 0; i < REF_IDS; i++)
		ref.off[i] = -1;

	for (int phase = 0; phase < 3; phase++) {
		/* 0: 300k inserts over 64k ids (repeats in a batch); 1: random changes and
		 * stale replays over 256k ids (grows); 2: tombstones for ids below 250k,
		 * most of the keys (halves the table, compacts), then inserts */
		for (uint32_t i = 0; i < 300000; i++) {
			uint32_t id = (uint32_t)(rng(&seed) & (phase == 0 ? 0xffff : 0x3ffff));
			unsigned op = (unsigned)(rng(&seed) % 100);
			if (want == 0)
				want = 1 + rng(&seed) % BATCH_MAX;
			if (phase == 0 || (phase == 1 && op < 40) || (phase == 2 && i >= 250000)) {
				batch_add(&b, &ref, id, false, ++clock);
			} else if (phase == 2 || op < 75) {
				batch_add(&b, &ref, phase == 2 ? i : id, true, ++clock);
			} else if (ref.off[id] > 0) {
				batch_add(&b, &ref, id, op < 90,
				          (tfs_offset_t)(rng(&seed) % (uint64_t)ref.off[id]));
			}
			if (b.n >= want) {
				batch_apply(kd, &b);
				want = 0;
			}
		}
		batch_apply(kd, &b);
		ref_verify(kd, &ref);
	}
	tfs_keydir_destroy(kd);
	free(ref.off);
	free(ref.seen);
	free(b.ops);
	free(b.keys);
}

/* Distinct keys with one forced hash, applied in one batch: the pipeline's guess
 * (the head entry has the change's hash, so fetch its key) is wrong for all but
 * one of them, and every key must still be told apart by its bytes. */
static void test_apply_with_equal_hashes(void **state)
{
	enum { KEYS = 200, HASH = 0x1234 };
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keydir_op ops[2 * KEYS];
	uint8_t keys[KEYS][8];
	struct tfs_keyinfo info;
	(void)state;
	for (int i = 0; i < KEYS; i++) {
		snprintf((char *)keys[i], sizeof keys[i], "k%05d", i);
		ops[i] = (struct tfs_keydir_op){ tfs_slice_make(keys[i], 6), HASH, false, info_at(i + 1) };
		/* then every other key again, newer; the rest removed */
		ops[KEYS + i] = (struct tfs_keydir_op){ tfs_slice_make(keys[i], 6), HASH, i % 2 == 1,
		                                        info_at(KEYS + i + 1) };
	}
	assert_int_equal(tfs_keydir_apply(kd, ops, 2 * KEYS), 0);
	assert_check(kd);
	assert_int_equal(tfs_keydir_count(kd), KEYS / 2);
	for (int i = 0; i < KEYS; i++) {
		int got = tfs_keydir_get_hashed(kd, tfs_slice_make(keys[i], 6), HASH, &info);
		assert_int_equal(got, i % 2 == 0);
		if (got)
			assert_info_at(&info, KEYS + i + 1);
	}
	tfs_keydir_destroy(kd);
}

/* ---- scans ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

struct collect {
	uint64_t *hashes;
	size_t n, cap;
};

static int collect_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                         uint64_t hash)
{
	struct collect *c = arg;
	(void)info;
	assert_int_equal(hash, tfs_keydir_hash(key));
	assert_true(c->n < c->cap);
	c->hashes[c->n++] = hash;
	return 0;
}

/* The scan's sequence of hashes is exactly the sorted list of the keys' hashes
 * (computed independently), so every key comes once, in ascending order. */
static void test_scan_visits_every_key_once_in_ascending_hash_order(void **state)
{
	const uint32_t n = 50000;
	struct tfs_keydir *kd = tfs_keydir_create();
	uint64_t *want = malloc(n * sizeof *want);
	struct collect c = { malloc(n * sizeof(uint64_t)), 0, n };
	uint8_t buf[KEY_BUF_BYTES];
	(void)state;
	assert_non_null(want);
	assert_non_null(c.hashes);
	for (uint32_t id = 0; id < n; id++) {
		put_id(kd, id, id + 1);
		want[id] = tfs_keydir_hash(tfs_slice_make(buf, make_key(id, buf)));
	}
	qsort(want, n, sizeof *want, cmp_u64);
	assert_int_equal(tfs_keydir_scan(kd, false, 0, collect_visit, &c), 0);
	assert_int_equal(c.n, n);
	assert_memory_equal(c.hashes, want, n * sizeof *want);
	for (uint32_t i = 1; i < n; i++)
		assert_true(want[i] > want[i - 1]); /* no collisions among these keys */

	/* resuming after any hash gives exactly the suffix */
	for (uint32_t i = 0; i < n; i += 4999) {
		c.n = 0;
		assert_int_equal(tfs_keydir_scan(kd, true, want[i], collect_visit, &c), 0);
		assert_int_equal(c.n, n - 1 - i);
		assert_memory_equal(c.hashes, want + i + 1, c.n * sizeof *want);
	}
	c.n = 0;
	assert_int_equal(tfs_keydir_scan(kd, true, UINT64_MAX, collect_visit, &c), 0);
	assert_int_equal(c.n, 0);
	tfs_keydir_destroy(kd);
	free(want);
	free(c.hashes);
}

/* readdir-style paging while the table doubles several times between two steps. */
static void test_scan_resumed_while_table_grows_never_repeats_or_misses(void **state)
{
	const uint32_t initial = 10000, per_step = 1000, grow_steps = 150;
	const uint32_t ids = initial + per_step * grow_steps;
	struct tfs_keydir *kd = tfs_keydir_create();
	struct pager p = { .limit = 256, .seen = calloc(ids, 1), .seen_ids = ids };
	uint32_t next_id = initial, steps = 0;
	size_t mem_before;
	(void)state;
	assert_non_null(p.seen);
	for (uint32_t id = 0; id < initial; id++)
		put_id(kd, id, id + 1);
	mem_before = tfs_keydir_memory_bytes(kd);

	while (!pager_step(kd, &p)) {
		steps++;
		for (uint32_t i = 0; i < per_step && next_id < ids; i++, next_id++)
			put_id(kd, next_id, next_id + 1);
	}
	assert_int_equal(next_id, ids); /* all inserts happened during the scan */
	assert_true(steps >= grow_steps);
	assert_true(tfs_keydir_memory_bytes(kd) > 8 * mem_before);
	for (uint32_t id = 0; id < initial; id++)
		assert_int_equal(p.seen[id], 1); /* present throughout: seen exactly once */
	assert_true(p.total >= initial);
	assert_check(kd);
	tfs_keydir_destroy(kd);
	free(p.seen);
}

/* The same while keys are removed (the table halves several times, the arena
 * compacts); the kept keys are seen exactly once, removed ones at most once. */
static void test_scan_resumed_while_keys_removed_never_repeats_or_misses(void **state)
{
	const uint32_t ids = 100000, kept = 5000, per_step = 2000;
	struct tfs_keydir *kd = tfs_keydir_create();
	struct pager p = { .limit = 256, .seen = calloc(ids, 1), .seen_ids = ids };
	uint32_t *order = malloc(ids * sizeof *order), next = kept;
	uint64_t seed = 42;
	size_t mem_full;
	(void)state;
	assert_non_null(p.seen);
	assert_non_null(order);
	for (uint32_t id = 0; id < ids; id++) {
		put_id(kd, id, id + 1);
		order[id] = id;
	}
	/* shuffle the removable ids [kept, ids) */
	for (uint32_t i = ids - 1; i > kept; i--) {
		uint32_t j = kept + (uint32_t)(rng(&seed) % (i - kept + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	mem_full = tfs_keydir_memory_bytes(kd);

	while (!pager_step(kd, &p)) {
		for (uint32_t i = 0; i < per_step && next < ids; i++, next++)
			remove_id(kd, order[next], ids + 1);
	}
	for (uint32_t id = 0; id < kept; id++)
		assert_int_equal(p.seen[id], 1);
	assert_check(kd);
	/* finish removing, if the scan ended first */
	for (; next < ids; next++)
		remove_id(kd, order[next], ids + 1);
	assert_int_equal(tfs_keydir_count(kd), kept);
	assert_true(tfs_keydir_memory_bytes(kd) < mem_full);
	assert_check(kd);
	tfs_keydir_destroy(kd);
	free(p.seen);
	free(order);
}

/* Checks the order of any scan, forced hashes included: ascending hash, then key
 * bytes; records where the members of one hash's run were visited. */
struct run_check {
	uint64_t run_hash;
	uint64_t prev_hash;
	uint8_t prev_key[KEY_BUF_BYTES];
	size_t prev_len;
	size_t visited, run_count, first, last;
};

static int run_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                     uint64_t hash)
{
	struct run_check *rc = arg;
	size_t n;
	int c;
	(void)info;
	assert_true(key.len <= KEY_BUF_BYTES);
	if (rc->visited) {
		assert_true(hash >= rc->prev_hash);
		if (hash == rc->prev_hash) {
			n = key.len < rc->prev_len ? key.len : rc->prev_len;
			c = n ? memcmp(rc->prev_key, key.p, n) : 0;
			assert_true(c < 0 || (c == 0 && rc->prev_len < key.len));
		}
	}
	if (hash == rc->run_hash) {
		if (rc->first == SIZE_MAX)
			rc->first = rc->visited;
		rc->last = rc->visited;
		rc->run_count++;
	}
	if (key.len)
		memcpy(rc->prev_key, key.p, key.len);
	rc->prev_len = key.len;
	rc->prev_hash = hash;
	rc->visited++;
	return 0;
}

/* Keys whose 64-bit hashes collide (forced through the test hook) sort by key bytes
 * (memcmp, then length) and come back to back; a cursor at their hash skips the run. */
static void test_equal_hash_keys_are_returned_back_to_back(void **state)
{
	const uint64_t h = 0x8000000000000000ull;
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info = info_at(1);
	struct run_check run = { 0 };
	struct recorder r;
	/* inserted out of order; expected scan order below */
	static const struct { const char *s; size_t len; uint64_t hash; } in[] = {
		{ "b", 1, 0x8000000000000000ull }, { "y", 1, 0x8000000000000001ull },
		{ "a\0", 2, 0x8000000000000000ull }, { "w", 1, UINT64_MAX },
		{ "ab", 2, 0x8000000000000000ull }, { "x", 1, 0x7fffffffffffffffull },
		{ "", 0, 0x8000000000000000ull }, { "z", 1, 0 },
		{ "a", 1, 0x8000000000000000ull },
	};
	static const struct { const char *s; size_t len; } want[] = {
		{ "z", 1 }, { "x", 1 }, { "", 0 }, { "a", 1 }, { "a\0", 2 }, { "ab", 2 },
		{ "b", 1 }, { "y", 1 }, { "w", 1 },
	};
	const size_t n = sizeof in / sizeof in[0];
	(void)state;

	for (size_t i = 0; i < n; i++)
		assert_int_equal(tfs_keydir__put_hashed(kd, tfs_slice_make(in[i].s, in[i].len),
		                                        in[i].hash, &info), 0);
	assert_int_equal(tfs_keydir_count(kd), n);
	assert_check(kd);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(tfs_keydir_get_hashed(kd, tfs_slice_make(in[i].s, in[i].len),
		                                       in[i].hash, &info), 1);

	recorder_reset(&r);
	assert_int_equal(tfs_keydir_scan(kd, false, 0, record_visit, &r), 0);
	assert_int_equal(r.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(r.keys[i].len, want[i].len);
		assert_memory_equal(r.keys[i].bytes, want[i].s, want[i].len);
	}
	/* after h-1: the whole run, from its first member */
	recorder_reset(&r);
	assert_int_equal(tfs_keydir_scan(kd, true, h - 1, record_visit, &r), 0);
	assert_int_equal(r.n, 7);
	assert_int_equal(r.keys[0].len, 0);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(r.keys[i].hash, h);
	/* after h: the run is skipped as a whole */
	recorder_reset(&r);
	assert_int_equal(tfs_keydir_scan(kd, true, h, record_visit, &r), 0);
	assert_int_equal(r.n, 2);
	assert_memory_equal(r.keys[0].bytes, "y", 1);
	/* a visitor's stop value comes back, even in the middle of a run */
	recorder_reset(&r);
	r.stop_at = 4;
	r.stop_value = 7;
	assert_int_equal(tfs_keydir_scan(kd, false, 0, record_visit, &r), 7);
	assert_int_equal(r.n, 4);

	/* remove the middle of the run, then with wrong hash (not found) */
	tfs_keydir__remove_hashed(kd, tfs_slice_make("a\0", 2), h, 2);
	assert_int_equal(tfs_keydir_get_hashed(kd, tfs_slice_make("a\0", 2), h, &info), 0);
	assert_int_equal(tfs_keydir_get_hashed(kd, tfs_slice_make("a", 1), h, &info), 1);
	assert_int_equal(tfs_keydir_get_hashed(kd, tfs_slice_make("ab", 2), h, &info), 1);
	assert_int_equal(tfs_keydir_count(kd), n - 1);
	assert_check(kd);

	/* a long run of one hash survives the table doubling around it */
	for (uint32_t id = 0; id < 100; id++) {
		uint8_t buf[KEY_BUF_BYTES];
		size_t len = make_key(id, buf);
		assert_int_equal(tfs_keydir__put_hashed(kd, tfs_slice_make(buf, len), h + 2, &info), 0);
	}
	for (uint32_t id = 100; id < 3000; id++)
		put_id(kd, id, 1);
	assert_check(kd);
	run.run_hash = h + 2;
	run.first = SIZE_MAX;
	assert_int_equal(tfs_keydir_scan(kd, false, 0, run_visit, &run), 0);
	assert_int_equal(run.visited, tfs_keydir_count(kd));
	assert_int_equal(run.run_count, 100);
	assert_int_equal(run.last - run.first + 1, 100); /* back to back */
	tfs_keydir_destroy(kd);
}

static void test_memory_and_key_bytes_are_sane(void **state)
{
	const uint32_t n = 200000;
	struct tfs_keydir *kd = tfs_keydir_create();
	size_t empty = tfs_keydir_memory_bytes(kd), mem, overhead;
	char key[32];
	(void)state;
	assert_true(empty > 0);
	assert_true(empty < 1024);
	put_at(kd, str("one"), 1);
	assert_true(tfs_keydir_memory_bytes(kd) < 8192); /* a small partition stays small */

	for (uint32_t i = 0; i < n; i++) {
		snprintf(key, sizeof key, "user-%08u", i);
		put_at(kd, str(key), i + 2);
	}
	assert_int_equal(tfs_keydir_key_bytes(kd), 3 + (size_t)n * 13);
	mem = tfs_keydir_memory_bytes(kd);
	assert_true(mem >= tfs_keydir_key_bytes(kd) + (size_t)ENTRY_BYTES_MIN * (n + 1));
	overhead = mem - tfs_keydir_key_bytes(kd);
	assert_true(overhead <= (size_t)KEYDIR_BYTES_PER_KEY_MAX * (n + 1) + CHUNK_SLACK_BYTES);

	/* replacing does not grow it */
	for (uint32_t i = 0; i < n; i++) {
		snprintf(key, sizeof key, "user-%08u", i);
		put_at(kd, str(key), n + i + 2);
	}
	assert_int_equal(tfs_keydir_memory_bytes(kd), mem);

	/* removing 90%: buckets shrink, the arena compacts */
	for (uint32_t i = 0; i < n; i++) {
		if (i % 10 == 0)
			continue;
		snprintf(key, sizeof key, "user-%08u", i);
		tfs_keydir_remove(kd, str(key), 3 * (tfs_offset_t)n);
	}
	assert_int_equal(tfs_keydir_count(kd), 1 + n / 10);
	assert_int_equal(tfs_keydir_key_bytes(kd), 3 + (size_t)(n / 10) * 13);
	/* at least the removed keys' bytes and entries come back */
	assert_true(tfs_keydir_memory_bytes(kd) + (size_t)(n - n / 10) * (13 + ENTRY_BYTES_MIN) <=
	            mem);
	assert_true(tfs_keydir_memory_bytes(kd) - tfs_keydir_key_bytes(kd) <=
	            (size_t)KEYDIR_BYTES_PER_KEY_MAX * (1 + n / 10) + CHUNK_SLACK_BYTES);
	assert_check(kd);

	/* emptying gives nearly everything back */
	for (uint32_t i = 0; i < n; i += 10) {
		snprintf(key, sizeof key, "user-%08u", i);
		tfs_keydir_remove(kd, str(key), 3 * (tfs_offset_t)n);
	}
	tfs_keydir_remove(kd, str("one"), 3 * (tfs_offset_t)n);
	assert_int_equal(tfs_keydir_count(kd), 0);
	assert_int_equal(tfs_keydir_key_bytes(kd), 0);
	assert_true(tfs_keydir_memory_bytes(kd) <= empty);
	assert_check(kd);
	tfs_keydir_destroy(kd);
}

/* ---- out of memory ---- */

#ifndef T_SHADOW_SANITIZER
/* Address space the child may still grow by before allocations fail. */
#define OOM_HEADROOM_BYTES (8u << 20)
#define OOM_MAX_KEYS 10000000u
#define OOM_BASE_KEYS 1000u

enum oom_result {
	OOM_OK = 0,
	OOM_SETUP = 10,      /* a put failed before the limit, or it could not be lifted */
	OOM_NEVER_FAILED,    /* the limit was never reached */
	OOM_WRONG_ERROR,     /* a put failed with something other than -ENOMEM */
	OOM_CHANGED,         /* count, key bytes or a get differ after the failure */
	OOM_CHECK,           /* tfs_keydir__check failed */
	OOM_NO_RECOVERY,     /* the same put fails once memory is back */
};

static size_t oom_key(uint32_t i, size_t len, uint8_t *buf)
{
	memset(buf, 'k', len);
	memcpy(buf, &i, ID_BYTES);
	return len;
}

/* Runs in a child: fills a directory under an address-space limit until a put fails,
 * then checks that the failed put left the directory exactly as it was. */
static int oom_child(uintptr_t key_len)
{
	uint8_t *buf = malloc(key_len);
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info;
	size_t key_bytes, mem;
	uint32_t i, n;
	int rc = 0;

	if (!buf || !kd)
		return OOM_SETUP;
	for (i = 0; i < OOM_BASE_KEYS; i++) {
		info = info_at(i);
		if (tfs_keydir_put(kd, tfs_slice_make(buf, oom_key(i, key_len, buf)), &info))
			return OOM_SETUP;
	}
	if (t_limit_address_space(OOM_HEADROOM_BYTES))
		return T_SKIP_STATUS;
	for (; i < OOM_MAX_KEYS; i++) {
		key_bytes = tfs_keydir_key_bytes(kd);
		mem = tfs_keydir_memory_bytes(kd);
		info = info_at(i);
		rc = tfs_keydir_put(kd, tfs_slice_make(buf, oom_key(i, key_len, buf)), &info);
		if (rc)
			break;
	}
	if (i == OOM_MAX_KEYS)
		return OOM_NEVER_FAILED;
	if (rc != -ENOMEM)
		return OOM_WRONG_ERROR;
	n = i;
	if (tfs_keydir_count(kd) != n || tfs_keydir_key_bytes(kd) != key_bytes ||
	    tfs_keydir_get(kd, tfs_slice_make(buf, oom_key(n, key_len, buf)), &info))
		return OOM_CHANGED;
	/* capacity may have grown (an entry chunk), nothing else */
	if (tfs_keydir_memory_bytes(kd) < mem)
		return OOM_CHANGED;
	for (i = 0; i < n; i++) {
		if (tfs_keydir_get(kd, tfs_slice_make(buf, oom_key(i, key_len, buf)), &info) != 1 ||
		    info.offset != i)
			return OOM_CHANGED;
	}
	if (tfs_keydir__check(kd))
		return OOM_CHECK;
	if (t_unlimit_address_space())
		return OOM_SETUP;
	info = info_at(n);
	if (tfs_keydir_put(kd, tfs_slice_make(buf, oom_key(n, key_len, buf)), &info) ||
	    tfs_keydir_count(kd) != n + 1 || tfs_keydir__check(kd))
		return OOM_NO_RECOVERY;
	tfs_keydir_destroy(kd);
	free(buf);
	return OOM_OK;
}


/* Runs in a child: applies batches under an address-space limit until one fails,
 * then checks the contract of tfs_keydir_apply (whole != 0) or of
 * tfs_keydir_apply_shard in shard order: every shard kept a prefix of its
 * changes (apply: a shard that failed stopped there, the others went on until
 * they failed too or finished); with apply_shard, the shards before the failing
 * one kept all of theirs and those after it none (the caller stopped calling).
 * Every other change is a new key, which allocates; the others move keys put
 * before the limit to a newer offset, which allocates nothing, so a shard that
 * went on past its failure would show them applied. */
static int oom_apply_child(uintptr_t whole)
{
	enum { BATCH = 4096, OLD = BATCH / 2, KEY_LEN = 13 };
	const uint32_t old_id = 0x80000000u;  /* ids of the keys put before the limit */
	struct tfs_keydir_op *ops = calloc(BATCH, sizeof *ops);
	uint8_t *keys = malloc((size_t)BATCH * KEY_LEN);
	struct tfs_keydir *kd = tfs_keydir_create();
	struct tfs_keyinfo info;
	bool missing[TFS_KEYDIR_SHARDS] = { false };
	unsigned failed = TFS_KEYDIR_SHARDS;
	uint32_t fresh = 0;
	tfs_offset_t clock = 0;
	int rc = 0;

	if (!ops || !keys || !kd)
		return OOM_SETUP;
	for (uint32_t i = 0; i < OLD; i++) {
		info = info_at(++clock);
		if (tfs_keydir_put(kd, tfs_slice_make(keys, oom_key(old_id + i, KEY_LEN, keys)), &info))
			return OOM_SETUP;
	}
	if (t_limit_address_space(OOM_HEADROOM_BYTES))
		return T_SKIP_STATUS;
	while (rc == 0 && fresh < OOM_MAX_KEYS) {
		for (uint32_t j = 0; j < BATCH; j++) {
			uint8_t *k = keys + (size_t)j * KEY_LEN;
			uint32_t id = j % 2 ? old_id + j / 2 : fresh + j / 2;
			ops[j].key = tfs_slice_make(k, oom_key(id, KEY_LEN, k));
			ops[j].hash = tfs_keydir_hash(ops[j].key);
			ops[j].remove = false;
			ops[j].info = info_at(++clock);
		}
		if (whole) {
			rc = tfs_keydir_apply(kd, ops, BATCH);
		} else {
			for (failed = 0; failed < TFS_KEYDIR_SHARDS; failed++)
				if ((rc = tfs_keydir_apply_shard(kd, failed, ops, BATCH)) < 0)
					break;
		}
		if (rc == 0)
			fresh += BATCH / 2;
	}
	if (rc == 0)
		return OOM_NEVER_FAILED;
	if (rc != -ENOMEM)
		return OOM_WRONG_ERROR;
	for (uint32_t j = 0; j < BATCH; j++) {
		unsigned s = tfs_keydir_shard(ops[j].hash);
		bool there = tfs_keydir_get(kd, ops[j].key, &info) == 1 &&
		             info.offset == ops[j].info.offset;

		if (there && (missing[s] || (!whole && s > failed)))
			return OOM_CHANGED;     /* not a prefix, or a shard past the failure */
		if (!there)
			missing[s] = true;
	}
	if (!whole) {
		for (unsigned s = 0; s < failed; s++)
			if (missing[s])
				return OOM_CHANGED;
		if (!missing[failed])
			return OOM_CHANGED;
	}
	if (tfs_keydir__check(kd))
		return OOM_CHECK;
	if (t_unlimit_address_space())
		return OOM_SETUP;
	/* replaying the failed batch finishes it: the applied part is not changed */
	if (tfs_keydir_apply(kd, ops, BATCH) || tfs_keydir_count(kd) != OLD + fresh + BATCH / 2 ||
	    tfs_keydir__check(kd))
		return OOM_NO_RECOVERY;
	tfs_keydir_destroy(kd);
	free(keys);
	free(ops);
	return OOM_OK;
}

#endif

/* Short keys (entry chunks, arena chunks, bucket growth), 2-byte-prefix keys, and
 * keys big enough to get their own allocation: whichever allocation fails first,
 * the put returns -ENOMEM and the directory is as it was; it works again once
 * memory is back. */
static void test_put_enomem_leaves_table_unchanged(void **state)
{
	(void)state;
#ifdef T_SHADOW_SANITIZER
	skip();
#else
	t_expect_child(oom_child, 13, OOM_OK);
	t_expect_child(oom_child, 1000, OOM_OK);
	t_expect_child(oom_child, 64 * 1024, OOM_OK);
#endif
}

/* A batch that runs out of memory part way: each shard keeps a prefix of its
 * changes (a key's changes stay in offset order), and replaying the batch
 * finishes it. */
static void test_apply_enomem_keeps_a_prefix_of_each_shard(void **state)
{
	(void)state;
#ifdef T_SHADOW_SANITIZER
	skip();
#else
	t_expect_child(oom_apply_child, 1, OOM_OK);
	t_expect_child(oom_apply_child, 0, OOM_OK);
#endif
}

/* ---- txn_tombs.c: the removals noted while a transaction is open ---- */

#define S(k) tfs_slice_make((k), strlen(k))
#define H(k) tfs_keydir_hash(S(k))

static void tombs_keep_the_newest_removal_and_prune_below(void **state)
{
	struct tfs_tombs *t = NULL;
	char k[16];

	(void)state;
	assert_false(tfs_tombs_after(NULL, tfs_slice_make("a", 1), 1, 0));
	for (int i = 0; i < 3000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(tfs_tombs_note(&t, S(k), H(k), i), 0);
	}
	/* the newest removal of a key wins; an older one changes nothing */
	assert_int_equal(tfs_tombs_note(&t, S("k7"), H("k7"), 5000), 0);
	assert_int_equal(tfs_tombs_note(&t, S("k7"), H("k7"), 3), 0);
	assert_int_equal(tfs_tombs_count(t), 3000);
	assert_true(tfs_tombs_after(t, S("k7"), H("k7"), 4999));
	assert_false(tfs_tombs_after(t, S("k7"), H("k7"), 5000));
	/* two keys of one hash, and the empty key, are told apart by their bytes */
	assert_int_equal(tfs_tombs_note(&t, tfs_slice_make("x", 1), 42, 10), 0);
	assert_int_equal(tfs_tombs_note(&t, tfs_slice_make("y", 1), 42, 20), 0);
	assert_int_equal(tfs_tombs_note(&t, tfs_slice_make("", 0), 42, 30), 0);
	assert_true(tfs_tombs_after(t, tfs_slice_make("x", 1), 42, 9));
	assert_false(tfs_tombs_after(t, tfs_slice_make("x", 1), 42, 10));
	assert_true(tfs_tombs_after(t, tfs_slice_make("y", 1), 42, 19));
	assert_true(tfs_tombs_after(t, tfs_slice_make("", 0), 42, 29));
	assert_false(tfs_tombs_after(t, tfs_slice_make("z", 1), 42, 0));
	/* below 1500: the older half goes, k7 (moved to 5000) and the rest stay */
	assert_true(tfs_tombs_prune_due(t));
	tfs_tombs_prune(&t, 1500);
	assert_false(tfs_tombs_prune_due(t));
	assert_int_equal(tfs_tombs_count(t), 1500 + 1);
	for (int i = 0; i < 3000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		assert_int_equal(tfs_tombs_after(t, S(k), H(k), -1),
		                 i >= 1500 || i == 7);
	}
	assert_false(tfs_tombs_after(t, tfs_slice_make("y", 1), 42, 0));
	tfs_tombs_clear(&t);
	assert_null(t);
	assert_int_equal(tfs_tombs_count(t), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tombs_keep_the_newest_removal_and_prune_below),
		cmocka_unit_test(test_put_get_replace_remove),
		cmocka_unit_test(test_put_at_lower_offset_is_ignored),
		cmocka_unit_test(test_tombstone_at_lower_offset_does_not_remove),
		cmocka_unit_test(test_empty_key_is_a_key),
		cmocka_unit_test(test_long_keys),
		cmocka_unit_test(test_random_ops_match_reference_1m),
		cmocka_unit_test(test_apply_batches_match_reference),
		cmocka_unit_test(test_apply_with_equal_hashes),
		cmocka_unit_test(test_scan_visits_every_key_once_in_ascending_hash_order),
		cmocka_unit_test(test_scan_resumed_while_table_grows_never_repeats_or_misses),
		cmocka_unit_test(test_scan_resumed_while_keys_removed_never_repeats_or_misses),
		cmocka_unit_test(test_equal_hash_keys_are_returned_back_to_back),
		cmocka_unit_test(test_memory_and_key_bytes_are_sane),
		cmocka_unit_test(test_put_enomem_leaves_table_unchanged),
		cmocka_unit_test(test_apply_enomem_keeps_a_prefix_of_each_shard),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
