/* offset_map.c - the cleaner's fingerprint -> offset table; see offset_map.h.
 *
 * The arena is an array of struct entry in anonymous memory. Emptiness is stored ==
 * 0 (the slot holds offset + 1), so the kernel's fresh zero pages are empty slots
 * already: creating a map touches nothing, and a pass faults in only the pages its
 * live table uses. Clearing is one memset(0) of the last round's live table, when it
 * stored anything, not of the whole arena.
 *
 * Linear probing was chosen over Kafka's probe sequence (successive 4-byte windows of
 * the digest, then linear): XXH3-128 is well mixed, so one home slot per key is as
 * good as any, and walking forward keeps a probe in one or two cache lines. At the
 * default load factor 0.9 a hit costs ~5.5 probes on average and a miss ~50 (Knuth),
 * all sequential 24-byte reads; a live table rounded up to a power of two is at most
 * that full and usually far less.
 *
 * What the time goes to is the first of those reads: a home slot is a random place in
 * up to 128 MiB, a cache miss (and with 4 KiB pages a TLB miss) per key. Huge pages
 * remove most TLB misses; tfs_offset_map_prefetch lets a caller start the cache misses
 * of many keys before waiting for the first.
 */
#include "engine/cleaner/offset_map.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define XXH_INLINE_ALL         /* the hash of a short key is a few ns: no call */
#include <xxhash.h>

#define HUGE_PAGE_BYTES ((size_t)2 << 20)   /* x86-64 transparent huge page */

struct entry {
	uint64_t fp_lo;
	uint64_t fp_hi;
	uint64_t stored;         /* offset + 1; 0 = empty */
};

/* The entry layout in offset_map.h depends on this. */
_Static_assert(sizeof(struct entry) == 24, "offset map entry must be 24 bytes");

struct tfs_offset_map {
	struct entry *slot;       /* arena: nslots entries, inside the mapping below */
	void *mapping;            /* what mmap returned, and its length */
	size_t mapping_bytes;
	size_t nslots;
	size_t max_entries;       /* floor(nslots × load_factor), 1..nslots */
	double load_factor;
	size_t live;              /* home slots are in [0, live) this round */
	size_t live_max;          /* keys the live table takes before it grows */
	size_t size;
	tfs_offset_t latest;
};

static inline uint64_t stored_of(tfs_offset_t offset)
{
	return (uint64_t)offset + 1;   /* offset >= 0, so this never wraps to 0 */
}

static inline tfs_offset_t offset_of(uint64_t stored)
{
	return (tfs_offset_t)(stored - 1);   /* 0 (empty) gives TFS_OFFSET_NONE */
}

struct tfs_offset_map_fp tfs_offset_map_fingerprint(struct tfs_slice key)
{
	/* XXH3 reads no bytes of an empty key, but it should not be handed NULL. */
	static const uint8_t empty_key_byte;
	XXH128_hash_t h = XXH3_128bits(key.p ? (const void *)key.p : &empty_key_byte, key.len);
	struct tfs_offset_map_fp f = { h.low64, h.high64 };
	return f;
}

/* Scales a 64-bit hash onto [0, n) (Lemire's multiply-shift; no division). */
static inline size_t home_slot(size_t n, uint64_t hi)
{
	return (size_t)(((unsigned __int128)hi * n) >> 64);
}

static inline bool same_fp(const struct entry *e, struct tfs_offset_map_fp f)
{
	return e->fp_lo == f.lo && e->fp_hi == f.hi;
}

/* Finds f in the live table: returns its slot, or the first empty slot on its probe
 * path, or NULL if neither exists within `live` probes (only on a table filled to
 * load factor 1.0). */
static struct entry *probe(const struct tfs_offset_map *m, struct tfs_offset_map_fp f)
{
	size_t i = home_slot(m->live, f.hi);

	for (size_t n = 0; n < m->live; n++) {
		struct entry *e = &m->slot[i];
		if (e->stored == 0 || same_fp(e, f))
			return e;
		if (++i == m->live)
			i = 0;
	}
	return NULL;
}

/* The keys a live table of n slots takes before it must grow. */
static size_t live_capacity(const struct tfs_offset_map *m, size_t n)
{
	double cap;

	if (n >= m->nslots)
		return m->max_entries;
	cap = floor((double)n * m->load_factor);
	return cap < 1.0 ? 1 : (size_t)cap;
}

static void set_live(struct tfs_offset_map *m, size_t n)
{
	m->live = n;
	m->live_max = live_capacity(m, n);
}

int tfs_offset_map_create(size_t buffer_bytes, double load_factor, struct tfs_offset_map **out)
{
	struct tfs_offset_map *m = NULL;
	size_t nslots = buffer_bytes / sizeof(struct entry), bytes, pad;
	uintptr_t at;
	double cap;
	void *p;

	if (!(load_factor > 0.0 && load_factor <= 1.0))   /* also rejects NaN */
		return -EINVAL;
	cap = floor((double)nslots * load_factor);
	if (cap < 1.0)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->nslots = nslots;
	m->load_factor = load_factor;
	/* The double product can round above nslots for huge maps; clamp. */
	m->max_entries = cap >= (double)nslots ? nslots : (size_t)cap;
	/* Every put and get is a random access into the arena: with 4 KiB pages each
	 * one also misses the TLB. Aligning the arena to a huge page and asking for huge
	 * pages (a hint, so no error) made a 10M-record pass 1.3x faster. The mapping
	 * has a huge page of slack so that the arena can start on a boundary. */
	bytes = nslots * sizeof(struct entry);
	if (bytes > SIZE_MAX - HUGE_PAGE_BYTES) {
		free(m);
		return -ENOMEM;
	}
	m->mapping_bytes = bytes + HUGE_PAGE_BYTES;
	p = mmap(NULL, m->mapping_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		free(m);
		return -ENOMEM;
	}
	m->mapping = p;
	at = (uintptr_t)p;
	pad = (HUGE_PAGE_BYTES - at % HUGE_PAGE_BYTES) % HUGE_PAGE_BYTES;
	m->slot = (struct entry *)(void *)((uint8_t *)p + pad);
	(void)madvise(m->slot, bytes, MADV_HUGEPAGE);
	m->size = 0;
	m->latest = TFS_OFFSET_NONE;
	set_live(m, nslots);
	*out = m;
	return 0;
}

void tfs_offset_map_destroy(struct tfs_offset_map *m)
{
	if (!m)
		return;
	munmap(m->mapping, m->mapping_bytes);
	free(m);
}

void tfs_offset_map_reset(struct tfs_offset_map *m, size_t max_keys)
{
	size_t want = m->nslots;

	if (m->size > 0)             /* the live table holds every stored key */
		memset(m->slot, 0, m->live * sizeof(struct entry));
	m->size = 0;
	m->latest = TFS_OFFSET_NONE;
	if (max_keys < m->max_entries) {
		/* enough slots for max_keys at the load factor, rounded up to a power of two */
		double need = ceil((double)max_keys / m->load_factor);
		size_t n = 1;
		while ((double)n < need && n < m->nslots)
			n <<= 1;
		if (n < want)
			want = n;
	}
	set_live(m, want);
}

void tfs_offset_map_clear(struct tfs_offset_map *m)
{
	tfs_offset_map_reset(m, SIZE_MAX);
}

void tfs_offset_map_prefetch(const struct tfs_offset_map *m, struct tfs_offset_map_fp fp)
{
	const char *e = (const char *)&m->slot[home_slot(m->live, fp.hi)];

	/* the home entry and the next one: a 24-byte entry may straddle two lines */
	__builtin_prefetch(e);
	__builtin_prefetch(e + 2 * sizeof(struct entry) - 1);
}

/* The live table is about to exceed what the caller said it needs: rehash every
 * entry into the whole arena. */
static int grow_to_arena(struct tfs_offset_map *m)
{
	struct entry *tmp = NULL;
	size_t n = 0, old_live = m->live;

	if (m->size > 0) {
		tmp = malloc(m->size * sizeof(*tmp));
		if (!tmp)
			return -ENOMEM;
	}
	for (size_t i = 0; i < old_live; i++)
		if (m->slot[i].stored != 0)
			tmp[n++] = m->slot[i];
	assert(n == m->size);
	memset(m->slot, 0, old_live * sizeof(struct entry));
	set_live(m, m->nslots);
	for (size_t i = 0; i < n; i++) {
		struct tfs_offset_map_fp f = { tmp[i].fp_lo, tmp[i].fp_hi };
		struct entry *e = probe(m, f);
		assert(e != NULL && e->stored == 0);
		*e = tmp[i];
	}
	free(tmp);
	return 0;
}

int tfs_offset_map_put_fp(struct tfs_offset_map *m, struct tfs_offset_map_fp fp,
                          tfs_offset_t offset, tfs_offset_t *superseded)
{
	tfs_offset_t gone = TFS_OFFSET_NONE;
	struct entry *e;
	int rc;

	if (offset < 0)
		return -EINVAL;
	if (m->size >= m->max_entries)
		return -ENOSPC;
	e = probe(m, fp);
	if (!e || (e->stored == 0 && m->size >= m->live_max)) {
		/* only a live table smaller than the arena can be this full */
		rc = grow_to_arena(m);
		if (rc < 0)
			return rc;
		e = probe(m, fp);
	}
	/* size < max_entries <= live capacity, so an empty slot exists and probe finds one. */
	assert(e != NULL);
	if (e->stored == 0) {
		e->fp_lo = fp.lo;
		e->fp_hi = fp.hi;
		e->stored = stored_of(offset);
		m->size++;
	} else if (offset > offset_of(e->stored)) {
		gone = offset_of(e->stored);
		e->stored = stored_of(offset);
	} else if (offset < offset_of(e->stored)) {
		gone = offset;
	}
	if (offset > m->latest)
		m->latest = offset;
	if (superseded)
		*superseded = gone;
	return 0;
}

int tfs_offset_map_put(struct tfs_offset_map *m, struct tfs_slice key, tfs_offset_t offset)
{
	if (offset < 0 || (!key.p && key.len > 0))
		return -EINVAL;
	return tfs_offset_map_put_fp(m, tfs_offset_map_fingerprint(key), offset, NULL);
}

tfs_offset_t tfs_offset_map_get_fp(const struct tfs_offset_map *m, struct tfs_offset_map_fp fp)
{
	const struct entry *e = probe(m, fp);

	return e ? offset_of(e->stored) : TFS_OFFSET_NONE;   /* an empty slot gives NONE */
}

tfs_offset_t tfs_offset_map_get(const struct tfs_offset_map *m, struct tfs_slice key)
{
	if (!key.p && key.len > 0)
		return TFS_OFFSET_NONE;
	return tfs_offset_map_get_fp(m, tfs_offset_map_fingerprint(key));
}

void tfs_offset_map_update_latest_offset(struct tfs_offset_map *m, tfs_offset_t offset)
{
	if (offset > m->latest)
		m->latest = offset;
}

size_t tfs_offset_map_size(const struct tfs_offset_map *m)
{
	return m->size;
}

size_t tfs_offset_map_slots(const struct tfs_offset_map *m)
{
	return m->nslots;
}

size_t tfs_offset_map_live_slots(const struct tfs_offset_map *m)
{
	return m->live;
}

size_t tfs_offset_map_max_entries(const struct tfs_offset_map *m)
{
	return m->max_entries;
}

double tfs_offset_map_utilization(const struct tfs_offset_map *m)
{
	return (double)m->size / (double)m->nslots;
}

tfs_offset_t tfs_offset_map_latest_offset(const struct tfs_offset_map *m)
{
	return m->latest;
}

bool tfs_offset_map_full(const struct tfs_offset_map *m)
{
	return m->size >= m->max_entries;
}

size_t tfs_offset_map_entry_bytes(void)
{
	return sizeof(struct entry);
}

int tfs_offset_map_check(const struct tfs_offset_map *m)
{
	size_t occupied = 0;
	tfs_offset_t max_off = TFS_OFFSET_NONE;

	if (m->live > m->nslots || m->live < 1)
		return 2;
	for (size_t i = 0; i < m->nslots; i++) {
		const struct entry *e = &m->slot[i];
		struct tfs_offset_map_fp f = { e->fp_lo, e->fp_hi };
		size_t j;

		if (e->stored == 0)
			continue;
		/* (1) past the live table, which the next clear clears */
		if (i >= m->live || e->stored > (uint64_t)INT64_MAX + 1)
			return 1;
		occupied++;
		if (offset_of(e->stored) > max_off)
			max_off = offset_of(e->stored);
		/* (3) and (4): the walk from home reaches i through occupied slots only,
		 * meeting no other copy of this fingerprint. */
		for (j = home_slot(m->live, f.hi); j != i; j = (j + 1 == m->live) ? 0 : j + 1) {
			if (m->slot[j].stored == 0)
				return 4;
			if (same_fp(&m->slot[j], f))
				return 3;
		}
	}
	if (occupied != m->size || m->size > m->max_entries || m->max_entries > m->nslots ||
	    m->max_entries < 1)
		return 2;
	if (m->latest < max_off || m->latest < TFS_OFFSET_NONE)
		return 5;
	return 0;
}
