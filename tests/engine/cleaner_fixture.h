/* cleaner_fixture.h - what the cleaner suites share (test_cleaner*.c,
 * test_retention.c): a partition log with a cleaner on a fake clock, appends,
 * hand-built segments with producer ids and transaction markers, and the checks
 * every suite makes (the log is whole, offsets ascend, the key digest).
 * Include after <cmocka.h>. Everything is static: each suite is one binary. */
#ifndef TFS_CLEANER_FIXTURE_H
#define TFS_CLEANER_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>

#include "engine/cleaner/cleaner.h"
#include "engine/cleaner/cleaner_internal.h"
#include "engine/log/partition_log.h"
#include "engine/log/segment.h"
#include "io/file_util.h"
#include "io/log.h"
#include "tests/t_util.h"

#define FX_T0 1700000000000LL          /* the fake clock's start */
#define FX_UNUSED __attribute__((unused))   /* not every suite uses every helper */

struct fx {
	struct tfs_io *io;
	struct tfs_fdcache *fdc;
	struct tfs_topic_config cfg;
	struct tfs_cleaner_config ccfg;
	char *dir;
	char path[4096];
	struct tfs_plog *pl;
	struct tfs_cleaner *c;
	int64_t now;                       /* the cleaner's clock */
};

FX_UNUSED static int64_t fx_clock(void *arg)
{
	return __atomic_load_n(&((struct fx *)arg)->now, __ATOMIC_RELAXED);
}

FX_UNUSED static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	tfs_log_set_level(TFS_LOG_ERROR);
	f->io = t_io();
	f->fdc = tfs_fdcache_create(f->io, 64);
	tfs_topic_config_defaults(&f->cfg);
	tfs_cleaner_config_defaults(&f->ccfg);
	f->ccfg.threads = 0;
	f->ccfg.dedupe_buffer_size = 1 << 20;
	f->ccfg.backoff_ms = 50;
	f->dir = t_mkdtemp("cleaner");
	snprintf(f->path, sizeof(f->path), "%s/t-0", f->dir);
	f->now = tfs_now_ms();
	*state = f;
	return 0;
}

/* As the engine closes: the cleaner goes first (its checkpoints stay on disk);
 * the files of deleted segments are gone once it returns, as they are when the
 * engine destroys its io context. */
FX_UNUSED static void fx_close(struct fx *f)
{
	tfs_cleaner_destroy(f->c);
	f->c = NULL;
	tfs_plog_close(f->pl);
	f->pl = NULL;
	tfs_io_unlink_drain(f->io);
}

FX_UNUSED static int fx_teardown(void **state)
{
	struct fx *f = *state;
	fx_close(f);
	tfs_fdcache_destroy(f->fdc);
	tfs_io_destroy(f->io);
	t_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

FX_UNUSED static struct tfs_plog *fx_open_path(struct fx *f, const char *path)
{
	struct tfs_plog_env env = { f->io, f->fdc, &f->cfg, false };
	struct tfs_plog *pl = NULL;
	assert_int_equal(tfs_plog_open(&env, path, true, &pl), 0);
	return pl;
}

/* Opens the partition and a cleaner (threads per f->ccfg, not started). */
FX_UNUSED static void fx_open(struct fx *f)
{
	f->pl = fx_open_path(f, f->path);
	assert_int_equal(tfs_cleaner_create(f->io, f->dir, &f->ccfg, &f->c), 0);
	tfs_cleaner_set_clock(f->c, fx_clock, f);
	assert_int_equal(tfs_cleaner_register(f->c, f->pl, "t", 0), 0);
}

FX_UNUSED static void fx_reopen(struct fx *f)
{
	fx_close(f);
	fx_open(f);
}

FX_UNUSED static void fx_set_config(struct fx *f)
{
	tfs_plog_set_config(f->pl, &f->cfg);
}

FX_UNUSED static tfs_offset_t fx_put_to(struct tfs_plog *pl, const char *key, const char *value)
{
	struct tfs_append_rec r = { 0 };
	tfs_offset_t off = -1;
	r.key = tfs_slice_make(key, key ? strlen(key) : 0);
	r.key_null = key == NULL;
	r.value = tfs_slice_make(value, value ? strlen(value) : 0);
	r.value_null = value == NULL;
	assert_int_equal(tfs_plog_append(pl, &r, 1, false, &off, NULL), 0);
	return off;
}

FX_UNUSED static tfs_offset_t fx_put(struct fx *f, const char *key, const char *value)
{
	return fx_put_to(f->pl, key, value);
}

/* count records over keys "k0".."k<keys-1>" in turn, each value value_bytes of
 * fill, then a roll: a sealed log that a pass has value_bytes x count to read. */
FX_UNUSED static void fx_put_filled(struct fx *f, int count, int keys, size_t value_bytes,
                                    char fill)
{
	char *v = malloc(value_bytes + 1);

	assert_non_null(v);
	memset(v, fill, value_bytes);
	v[value_bytes] = '\0';
	for (int i = 0; i < count; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i % keys);
		assert_true(fx_put_to(f->pl, k, v) >= 0);
	}
	free(v);
	assert_int_equal(tfs_plog_roll(f->pl), 0);
}

FX_UNUSED static void fx_roll(struct fx *f)
{
	assert_int_equal(tfs_plog_roll(f->pl), 0);
}

FX_UNUSED static int fx_clean(struct fx *f)
{
	return tfs_cleaner_clean_now(f->c, f->pl);
}

FX_UNUSED static void fx_value_is(struct tfs_plog *pl, const char *key, const char *value)
{
	struct tfs_record_copy rc;
	int r = tfs_plog_read_key(pl, tfs_slice_make(key, strlen(key)), &rc);
	if (!value) {
		assert_int_equal(r, -ENOENT);
		return;
	}
	assert_int_equal(r, 0);
	assert_int_equal(rc.value_len, strlen(value));
	assert_memory_equal(rc.value, value, rc.value_len);
	tfs_record_copy_release(&rc);
}

/* Every record offset on disk, ascending (asserts they strictly ascend and that
 * every batch reads back whole). *n gets the count; caller frees. */
FX_UNUSED static tfs_offset_t *fx_offsets(struct tfs_plog *pl, size_t *n)
{
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	tfs_offset_t *v = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	while ((rc = tfs_plog_cursor_next(c, &r, NULL)) == 1) {
		if (cnt)
			assert_true(r.offset > v[cnt - 1]);
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			v = realloc(v, cap * sizeof(*v));
		}
		v[cnt++] = r.offset;
	}
	assert_int_equal(rc, 0);
	tfs_plog_cursor_close(c);
	*n = cnt;
	return v;
}

FX_UNUSED static bool fx_has_offset(struct tfs_plog *pl, tfs_offset_t off)
{
	struct tfs_record_copy rc;
	int r = tfs_plog_read_offset(pl, off, &rc);
	if (r == 0)
		tfs_record_copy_release(&rc);
	else
		assert_int_equal(r, -ENOENT);
	return r == 0;
}

/* ---- the key digest: key -> newest value, order independent ---- */

struct fx_digest {
	uint64_t x;           /* xor of hash(key, value) over live keys */
	uint64_t count;
};

struct fx_kv {
	char *key;
	size_t klen;
	char *value;          /* NULL: tombstoned */
	size_t vlen;
};

struct fx_table {
	struct fx_kv *e;
	size_t cap, n;
};

FX_UNUSED static uint64_t fx_kv_hash(const void *k, size_t kl, const void *v, size_t vl)
{
	XXH64_state_t *s = XXH64_createState();
	uint64_t h;
	XXH64_reset(s, 0);
	XXH64_update(s, &kl, sizeof(kl));
	XXH64_update(s, k, kl);
	XXH64_update(s, v, vl);
	h = XXH64_digest(s);
	XXH64_freeState(s);
	return h;
}

FX_UNUSED static struct fx_kv *fx_table_slot(struct fx_table *t, const void *k, size_t kl)
{
	if ((t->n + 1) * 2 > t->cap) {
		struct fx_table nt = { calloc(t->cap ? t->cap * 2 : 64, sizeof(struct fx_kv)),
		                       t->cap ? t->cap * 2 : 64, 0 };
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->e[i].key)
				continue;
			size_t j = XXH64(t->e[i].key, t->e[i].klen, 0) & (nt.cap - 1);
			while (nt.e[j].key)
				j = (j + 1) & (nt.cap - 1);
			nt.e[j] = t->e[i];
			nt.n++;
		}
		free(t->e);
		*t = nt;
	}
	size_t j = XXH64(k, kl, 0) & (t->cap - 1);
	while (t->e[j].key && !(t->e[j].klen == kl && !memcmp(t->e[j].key, k, kl)))
		j = (j + 1) & (t->cap - 1);
	if (!t->e[j].key) {
		t->e[j].key = malloc(kl + 1);
		memcpy(t->e[j].key, k, kl);
		t->e[j].klen = kl;
		t->n++;
	}
	return &t->e[j];
}

FX_UNUSED static void fx_table_set(struct fx_table *t, const void *k, size_t kl, const void *v, size_t vl,
                         bool tomb)
{
	struct fx_kv *e = fx_table_slot(t, k, kl);
	free(e->value);
	e->value = NULL;
	if (!tomb) {
		e->value = malloc(vl + 1);
		if (vl)
			memcpy(e->value, v, vl);
		e->vlen = vl;
	}
}

FX_UNUSED static struct fx_digest fx_table_digest(const struct fx_table *t)
{
	struct fx_digest d = { 0, 0 };
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->e[i].key || !t->e[i].value)
			continue;
		d.x ^= fx_kv_hash(t->e[i].key, t->e[i].klen, t->e[i].value, t->e[i].vlen);
		d.count++;
	}
	return d;
}

FX_UNUSED static void fx_table_free(struct fx_table *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		free(t->e[i].key);
		free(t->e[i].value);
	}
	free(t->e);
	memset(t, 0, sizeof(*t));
}

/* Replays the whole log (data records only) into key -> newest value. */
FX_UNUSED static struct fx_digest fx_log_digest(struct tfs_plog *pl)
{
	struct fx_table t = { 0 };
	struct tfs_plog_cursor *c;
	struct tfs_record r;
	struct tfs_batch_header bh;
	struct fx_digest d;
	int rc;

	assert_int_equal(tfs_plog_cursor_open(pl, 0, &c), 0);
	while ((rc = tfs_plog_cursor_next(c, &r, &bh)) == 1) {
		if (r.key_null || (bh.attributes & TFS_ATTR_CONTROL))
			continue;
		fx_table_set(&t, r.key.p, r.key.len, r.value.p, r.value.len, r.value_null);
	}
	assert_int_equal(rc, 0);
	tfs_plog_cursor_close(c);
	d = fx_table_digest(&t);
	fx_table_free(&t);
	return d;
}

struct fx_kd_walk {
	struct tfs_plog *pl;
	struct fx_digest d;
	char (*keys)[64];
	size_t n, cap;
};

FX_UNUSED static int fx_kd_visit(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info, uint64_t h)
{
	struct fx_kd_walk *w = arg;
	(void)info;
	(void)h;
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 256;
		w->keys = realloc(w->keys, w->cap * sizeof(*w->keys));
	}
	assert_true(key.len < 63);
	memcpy(w->keys[w->n], key.p, key.len);
	w->keys[w->n][key.len] = '\0';
	w->n++;
	return 0;
}

/* key -> newest value through the key directory and point reads. */
FX_UNUSED static struct fx_digest fx_kd_digest(struct tfs_plog *pl)
{
	struct fx_kd_walk w = { pl, { 0, 0 }, NULL, 0, 0 };
	assert_int_equal(tfs_plog_scan_keys(pl, false, 0, fx_kd_visit, &w), 0);
	for (size_t i = 0; i < w.n; i++) {
		struct tfs_record_copy rc;
		assert_int_equal(tfs_plog_read_key(pl, tfs_slice_make(w.keys[i], strlen(w.keys[i])), &rc), 0);
		w.d.x ^= fx_kv_hash(w.keys[i], strlen(w.keys[i]), rc.value, rc.value_len);
		w.d.count++;
		tfs_record_copy_release(&rc);
	}
	free(w.keys);
	return w.d;
}

FX_UNUSED static void fx_digest_equal(struct fx_digest a, struct fx_digest b)
{
	assert_int_equal(a.count, b.count);
	assert_true(a.x == b.x);
}

/* ---- files ---- */

FX_UNUSED static int fx_count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	size_t sl = strlen(suffix);
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l >= sl && !strcmp(de->d_name + l - sl, suffix))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* No cleaner leftovers in the partition directory (once the deferred unlinks of
 * deleted segments' files are done). */
FX_UNUSED static void fx_no_leftovers(struct fx *f)
{
	tfs_io_unlink_drain(f->io);
	assert_int_equal(fx_count_files(f->path, ".cleaned"), 0);
	assert_int_equal(fx_count_files(f->path, ".swap"), 0);
	assert_int_equal(fx_count_files(f->path, ".deleted"), 0);
}

/* Every batch of every .log file verifies (CRC and records). Returns the batches. */
FX_UNUSED static int fx_verify_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int batches = 0;
	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char path[8192];
		uint8_t *buf = NULL;
		long n;
		if (l < 4 || strcmp(de->d_name + l - 4, ".log"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n = t_read_file(path, &buf);
		assert_true(n >= 0);
		for (long pos = 0; pos < n;) {
			struct tfs_batch_header h;
			const char *why = NULL;
			assert_int_equal(tfs_batch_header_decode(buf + pos, (size_t)(n - pos), &h, &why), 0);
			assert_true(pos + (long)tfs_batch_size(&h) <= n);
			if (tfs_batch_verify(buf + pos, tfs_batch_size(&h), &why) != 0)
				fail_msg("%s at %ld: %s", path, pos, why);
			pos += (long)tfs_batch_size(&h);
			batches++;
		}
		free(buf);
	}
	closedir(d);
	return batches;
}

/* The headers of every batch on disk, in offset order (empty ones included). */
FX_UNUSED static struct tfs_batch_header *fx_batches(struct tfs_plog *pl, size_t *n)
{
	struct tfs_seglist *l = tfs__plog_snapshot(pl, NULL);
	struct tfs_batch_header *v = NULL;
	size_t cnt = 0, cap = 0;
	uint8_t *buf = NULL;
	size_t bcap = 0;

	for (int i = 0; i < l->count; i++) {
		struct tfs__seg_reader r;
		struct tfs_batch_header h;
		const uint8_t *b;
		tfs_pos_t at;
		int rc;
		tfs__seg_reader_init(&r, l->seg[i], 0, &buf, &bcap, 65536, NULL, NULL);
		while ((rc = tfs__seg_reader_next(&r, &h, &b, &at)) == 1) {
			if (cnt == cap) {
				cap = cap ? cap * 2 : 64;
				v = realloc(v, cap * sizeof(*v));
			}
			v[cnt++] = h;
		}
		assert_int_equal(rc, 0);
	}
	free(buf);
	tfs__seglist_put(l);
	*n = cnt;
	return v;
}

FX_UNUSED static int fx_segments(struct tfs_plog *pl)
{
	struct tfs_plog_stats st;
	tfs_plog_stats(pl, &st);
	return st.segments;
}

/* ---- hand-built segments (producer ids, transactions, offset gaps) ---- */

struct fx_raw {
	uint8_t *buf;
	size_t len, cap;
	struct tfs_batch_builder b;
};

struct fx_rec {
	const char *key;       /* NULL: keyless */
	const char *value;     /* NULL: tombstone */
};

FX_UNUSED static void fx_raw_init(struct fx_raw *r)
{
	memset(r, 0, sizeof(*r));
	tfs_batch_builder_init(&r->b);
}

FX_UNUSED static void fx_raw_bytes(struct fx_raw *r, const void *p, size_t n)
{
	if (r->len + n > r->cap) {
		r->cap = (r->len + n) * 2;
		r->buf = realloc(r->buf, r->cap);
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
}

/* One data batch at base with records at base, base+1, ... */
FX_UNUSED static void fx_raw_batch(struct fx_raw *r, tfs_offset_t base, int64_t pid, int16_t epoch,
                         int32_t seq, bool transactional, int64_t ts, const struct fx_rec *recs,
                         int n)
{
	struct tfs_batch_params p = { .base_offset = base, .leader_epoch = 0, .producer_id = pid,
	                              .producer_epoch = epoch, .base_sequence = seq };
	const uint8_t *out;
	size_t len;
	if (transactional)
		p.attributes |= TFS_ATTR_TRANSACTIONAL;
	tfs_batch_builder_reset(&r->b, &p);
	for (int i = 0; i < n; i++) {
		struct tfs_record_in in = { 0 };
		in.key = tfs_slice_make(recs[i].key, recs[i].key ? strlen(recs[i].key) : 0);
		in.key_null = !recs[i].key;
		in.value = tfs_slice_make(recs[i].value, recs[i].value ? strlen(recs[i].value) : 0);
		in.value_null = !recs[i].value;
		in.timestamp = ts;
		assert_int_equal(tfs_batch_builder_add(&r->b, &in), 0);
	}
	assert_int_equal(tfs_batch_builder_finish(&r->b, -1, &out, &len), 0);
	fx_raw_bytes(r, out, len);
}

/* A transaction marker (type TFS_CONTROL_ABORT / _COMMIT) at offset. */
FX_UNUSED static void fx_raw_marker(struct fx_raw *r, tfs_offset_t offset, int64_t pid, int16_t epoch,
                          int type, int64_t ts)
{
	struct tfs_batch_params p = { .base_offset = offset, .leader_epoch = 0, .producer_id = pid,
	                              .producer_epoch = epoch, .base_sequence = -1,
	                              .attributes = TFS_ATTR_TRANSACTIONAL | TFS_ATTR_CONTROL };
	uint8_t key[4] = { 0, 0, 0, (uint8_t)type }, value[6] = { 0, 0, 0, 0, 0, 7 };
	struct tfs_record_in in = { 0 };
	const uint8_t *out;
	size_t len;
	tfs_batch_builder_reset(&r->b, &p);
	in.key = tfs_slice_make(key, sizeof(key));
	in.value = tfs_slice_make(value, sizeof(value));
	in.timestamp = ts;
	assert_int_equal(tfs_batch_builder_add(&r->b, &in), 0);
	assert_int_equal(tfs_batch_builder_finish(&r->b, -1, &out, &len), 0);
	fx_raw_bytes(r, out, len);
}

/* Writes the accumulated batches as <partition>/<base>.log and starts over. */
FX_UNUSED static void fx_raw_segment(struct fx *f, struct fx_raw *r, tfs_offset_t base)
{
	char p[8192];
	mkdir(f->path, 0755);
	snprintf(p, sizeof(p), "%s/%020" PRId64 ".log", f->path, base);
	assert_int_equal(t_write_file(p, r->buf, r->len), 0);
	r->len = 0;
}

FX_UNUSED static void fx_raw_release(struct fx_raw *r)
{
	free(r->buf);
	tfs_batch_builder_release(&r->b);
}

FX_UNUSED static struct tfs_cleaner_partition_info fx_info(struct fx *f)
{
	struct tfs_cleaner_partition_info info;
	assert_int_equal(tfs_cleaner_partition_info(f->c, f->pl, &info), 0);
	return info;
}

FX_UNUSED static char *fx_read_text(const char *dir, const char *name)
{
	char p[8192];
	uint8_t *buf = NULL;
	long n;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	n = t_read_file(p, &buf);
	if (n < 0)
		return NULL;
	buf = realloc(buf, (size_t)n + 1);
	buf[n] = '\0';
	return (char *)buf;
}

#endif
