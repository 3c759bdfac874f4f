/* offset_map.c - the cleaner's fingerprint -> offset table; see offset_map.h.
 *
 * The arena is an array of struct entry. Emptiness is offset == TFS_OFFSET_NONE, and
 * since -1 is all one bits, clearing is one memset(0xff) of the arena: every offset
 * becomes -1 (the fingerprints become all ones too, which means nothing in an empty
 * slot).
 *
 * Linear probing was chosen over Kafka's probe sequence (successive 4-byte windows of
 * the digest, then linear): XXH3-128 is well mixed, so one home slot per key is as
 * good as any, and walking forward keeps a probe in one or two cache lines. At the
 * default load factor 0.9 a hit costs ~5.5 probes on average and a miss ~50 (Knuth),
 * all sequential 24-byte reads.
 */
#include "engine/offset_map.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <xxhash.h>

#define HUGE_PAGE_BYTES (2u << 20)     /* x86-64 transparent huge page */

struct entry {
	uint64_t fp_lo;
	uint64_t fp_hi;
	tfs_offset_t offset;     /* TFS_OFFSET_NONE = empty */
};

/* The entry layout in offset_map.h depends on this. */
_Static_assert(sizeof(struct entry) == 24, "offset map entry must be 24 bytes");
_Static_assert(TFS_OFFSET_NONE == -1, "clear relies on -1 being all one bits");

/* memset byte that makes every int64 in the arena -1. */
#define EMPTY_FILL_BYTE 0xff

struct tfs_offset_map {
	struct entry *slot;       /* arena: nslots entries */
	size_t nslots;
	size_t max_entries;       /* floor(nslots × load_factor), 1..nslots */
	size_t size;
	tfs_offset_t latest;
};

struct fp {
	uint64_t lo, hi;
};

/* Stand-in pointer for an empty key given as {NULL, 0}: XXH3 reads no bytes then,
 * but it should not be handed NULL. */
static const uint8_t empty_key_byte;

static struct fp fingerprint(struct tfs_slice key)
{
	XXH128_hash_t h = XXH3_128bits(key.p ? (const void *)key.p : &empty_key_byte, key.len);
	struct fp f = { h.low64, h.high64 };
	return f;
}

/* Scales a 64-bit hash onto [0, n) (Lemire's multiply-shift; no division). */
static size_t home_slot(const struct tfs_offset_map *m, struct fp f)
{
	return (size_t)(((unsigned __int128)f.hi * m->nslots) >> 64);
}

static bool same_fp(const struct entry *e, struct fp f)
{
	return e->fp_lo == f.lo && e->fp_hi == f.hi;
}

/* Finds f: returns its slot, or the first empty slot on its probe path, or NULL if
 * neither exists within nslots probes (only on a map filled to load factor 1.0). */
static struct entry *probe(const struct tfs_offset_map *m, struct fp f)
{
	size_t i = home_slot(m, f);

	for (size_t n = 0; n < m->nslots; n++) {
		struct entry *e = &m->slot[i];
		if (e->offset == TFS_OFFSET_NONE || same_fp(e, f))
			return e;
		if (++i == m->nslots)
			i = 0;
	}
	return NULL;
}

int tfs_offset_map_create(size_t buffer_bytes, double load_factor, struct tfs_offset_map **out)
{
	struct tfs_offset_map *m = NULL;
	size_t nslots = buffer_bytes / sizeof(struct entry);
	double cap;

	if (!(load_factor > 0.0 && load_factor <= 1.0))   /* also rejects NaN */
		return -EINVAL;
	cap = floor((double)nslots * load_factor);
	if (cap < 1.0)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->nslots = nslots;
	/* The double product can round above nslots for huge maps; clamp. */
	m->max_entries = cap >= (double)nslots ? nslots : (size_t)cap;
	/* Every put and get is a random access into the arena: with 4 KiB pages each
	 * one also misses the TLB. Huge pages where the kernel offers them made a
	 * 10M-record pass 1.3x faster (bench/cleaner.sh); a hint, so no error. */
	if (posix_memalign((void **)&m->slot, HUGE_PAGE_BYTES, nslots * sizeof(struct entry)) != 0) {
		free(m);
		return -ENOMEM;
	}
	madvise(m->slot, nslots * sizeof(struct entry), MADV_HUGEPAGE);
	memset(m->slot, EMPTY_FILL_BYTE, nslots * sizeof(struct entry));
	m->size = 0;
	m->latest = TFS_OFFSET_NONE;
	*out = m;
	return 0;
}

void tfs_offset_map_destroy(struct tfs_offset_map *m)
{
	if (!m)
		return;
	free(m->slot);
	free(m);
}

void tfs_offset_map_clear(struct tfs_offset_map *m)
{
	if (m->size > 0)
		memset(m->slot, EMPTY_FILL_BYTE, m->nslots * sizeof(struct entry));
	m->size = 0;
	m->latest = TFS_OFFSET_NONE;
}

int tfs_offset_map_put(struct tfs_offset_map *m, struct tfs_slice key, tfs_offset_t offset)
{
	struct entry *e;
	struct fp f;

	if (offset < 0 || (!key.p && key.len > 0))
		return -EINVAL;
	if (m->size >= m->max_entries)
		return -ENOSPC;
	f = fingerprint(key);
	e = probe(m, f);
	/* size < max_entries <= nslots, so an empty slot exists and probe finds one. */
	assert(e != NULL);
	if (e->offset == TFS_OFFSET_NONE) {
		e->fp_lo = f.lo;
		e->fp_hi = f.hi;
		e->offset = offset;
		m->size++;
	} else if (offset > e->offset) {
		e->offset = offset;
	}
	if (offset > m->latest)
		m->latest = offset;
	return 0;
}

tfs_offset_t tfs_offset_map_get(const struct tfs_offset_map *m, struct tfs_slice key)
{
	const struct entry *e;

	if (!key.p && key.len > 0)
		return TFS_OFFSET_NONE;
	e = probe(m, fingerprint(key));
	return e ? e->offset : TFS_OFFSET_NONE;   /* an empty slot's offset is NONE */
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

	for (size_t i = 0; i < m->nslots; i++) {
		const struct entry *e = &m->slot[i];
		struct fp f = { e->fp_lo, e->fp_hi };
		size_t j;

		if (e->offset == TFS_OFFSET_NONE)
			continue;
		if (e->offset < 0)
			return 1;
		occupied++;
		if (e->offset > max_off)
			max_off = e->offset;
		/* (3) and (4): the walk from home reaches i through occupied slots only,
		 * meeting no other copy of this fingerprint. */
		for (j = home_slot(m, f); j != i; j = (j + 1 == m->nslots) ? 0 : j + 1) {
			if (m->slot[j].offset == TFS_OFFSET_NONE)
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
