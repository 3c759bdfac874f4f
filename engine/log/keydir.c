/* keydir.c - a partition's key directory: key -> newest record (see keydir.h).
 *
 * The directory is TFS_KEYDIR_SHARDS shards (keydir.h), each a whole table over
 * its hash range as described below; a shard's bucket index uses the hash bits
 * after the top SHARD_BITS, which every key of the shard shares.
 *
 * Three structures, sized so that a live key costs at most ~48 bytes beyond its own
 * bytes (36 entry + 4..8 bucket + 0..3 arena padding and prefix):
 *
 * Buckets: a power-of-two array of uint32 entry indexes, chosen by the HIGH
 * bucket_bits of the hash below the shard's bits. Every chain is sorted by (hash, key bytes), so bucket i
 * holds exactly the hashes of prefix i, and bucket i splits into 2i and 2i+1 (grow)
 * or merges with its sibling (shrink) by cutting or joining a chain in place: no
 * rehash, no reordering, and the iteration order never depends on the table size.
 * The table doubles when count exceeds the bucket count (load 1.0) and halves when
 * count falls below a quarter of it. A failed resize is not an error: the table goes
 * on at a different load and tries again on the next insert or removal.
 *
 * Entries: fixed-size records in chunks of ENTRY_CHUNK_COUNT; index = chunk << shift |
 * slot, so growing the entry space never moves an entry and never copies more than
 * the first (small, doubling) chunk. Removed entries go on a free list threaded
 * through `next`; their key_ref is KEY_REF_NONE. When more than half the slots are
 * free, the entries of the trailing chunks move into free slots below (relinking
 * their chains; nothing outside refers to an entry index) and those chunks are
 * freed. When the directory empties, everything is released.
 *
 *   OFFSET SIZE DESCRIPTION (struct entry, packed, 4-byte aligned)
 *   0      8    hash: XXH3-64 of the key (or the forced hash of a test hook)
 *   8      8    offset of the newest record
 *   16     8    its timestamp (ms)
 *   24     4    its value size in bytes
 *   28     4    next entry in the chain / the free list, or ENTRY_NONE
 *   32     4    key_ref: the key's record in the arena, in ARENA_UNIT_BYTES units
 *
 * Key arena: chunks of ARENA_CHUNK_UNITS units of ARENA_UNIT_BYTES; key_ref = chunk
 * << shift | unit. A record starts on a unit boundary:
 *
 *   FIRST BYTE  LAYOUT
 *   0x00..0x7f  length (0..127), then the key bytes
 *   0x80..0x84  two-byte length (0x80 | len >> 8, len & 0xff), then the key bytes
 *               (128..KEY_INLINE_MAX_BYTES)
 *   0xff        a big key: at byte ARENA_UNIT_BYTES, a pointer to a malloc'd
 *               struct big_key {len, bytes}; the record is KEY_BIG_UNITS long
 *
 * A record never straddles chunks; the unused tail of a chunk is dead space. Removing
 * a key makes its record dead (a big key's block is freed at once). When dead units
 * exceed live units (garbage is more than half the used arena) the arena is
 * compacted into fresh chunks; an -ENOMEM there leaves the old arena in place and
 * postpones the next attempt until the garbage has doubled.
 *
 * Internal invariants, beyond (1)-(3) of the header (checked by tfs_keydir__check):
 *   (4) every slot below entry_top is either reachable from exactly one bucket or on
 *       the free list (key_ref == KEY_REF_NONE), never both;
 *   (5) key_bytes, live_units and big_count equal the sums over live entries, and
 *       live_units + dead_units == arena_top (chunk 0 reaches full size before a
 *       second chunk is added, so no unit below arena_top is unbacked).
 *
 * -ENOMEM and "unchanged": a put allocates everything it may need (an entry slot, the
 * key's record, a big key's block) before it links anything; a failure after that
 * point is impossible. Capacity gained by a failed put (a new entry chunk) is
 * invisible to every function but tfs_keydir_memory_bytes.
 *
 * Limits (each reported as -ENOMEM): 2^32 - 2^14 entries; 16 GiB of arena, i.e. of
 * keys up to KEY_INLINE_MAX_BYTES plus KEY_BIG_UNITS units for each longer key.
 */
#include "engine/log/keydir.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* 2^14 entries (576 KiB) a chunk: the chunk pointer array stays tiny even at 100M
 * keys, and the chunk is big enough that its allocator overhead is negligible. */
#define ENTRY_CHUNK_SHIFT 14
#define ENTRY_CHUNK_COUNT ((uint32_t)1 << ENTRY_CHUNK_SHIFT)
#define ENTRY_CHUNK_MASK (ENTRY_CHUNK_COUNT - 1)
/* The first chunk starts this small and doubles up to a full chunk, so that the many
 * partitions holding a handful of keys do not pay 576 KiB each. */
#define ENTRY_FIRST_COUNT 64
/* Chunks such that every index stays below ENTRY_NONE. */
#define ENTRY_MAX_CHUNKS (UINT32_MAX >> ENTRY_CHUNK_SHIFT)
#define ENTRY_NONE UINT32_MAX /* end of a chain or of the free list */
/* Chunk pointer arrays (entries and arena) start with this many slots and double. */
#define CHUNK_SLOTS_FIRST 4

/* key_ref granularity: 2^32 units address 16 GiB of keys; 4 bytes keeps the padding
 * of a short key at 0..3 bytes. */
#define ARENA_UNIT_BYTES 4
/* 2^16 units = 256 KiB a chunk: allocator overhead is negligible, and the slack of
 * the last chunk is a quarter of a byte per key at 1M keys. */
#define ARENA_CHUNK_SHIFT 16
#define ARENA_CHUNK_UNITS ((uint32_t)1 << ARENA_CHUNK_SHIFT)
#define ARENA_CHUNK_MASK (ARENA_CHUNK_UNITS - 1)
/* The first chunk starts at 256 bytes and doubles (powers of two up to a full chunk). */
#define ARENA_FIRST_UNITS 64
/* Compaction is not worth a pass below this much garbage (4 KiB). */
#define ARENA_COMPACT_MIN_UNITS 1024
/* Longer keys get their own allocation: a record never exceeds ~1 KiB, so the tail a
 * chunk can waste is at most 0.4% of it. */
#define KEY_INLINE_MAX_BYTES 1024
#define KEY_SHORT_MAX_BYTES 127 /* one-byte length prefix */
#define KEY_LONG_TAG 0x80       /* two-byte prefix: 0x80 | len >> 8, len & 0xff */
#define KEY_LONG_PREFIX_BYTES 2
#define KEY_SHORT_PREFIX_BYTES 1
#define KEY_BIG_TAG 0xff        /* record holds a struct big_key pointer */
#define KEY_BIG_UNITS (1 + (sizeof(void *) + ARENA_UNIT_BYTES - 1) / ARENA_UNIT_BYTES)
#define KEY_REF_NONE UINT32_MAX /* marks a free entry */
#define BYTE_BITS 8
#define BYTE_MASK 0xff

/* 8 buckets minimum; 2^32 maximum (entry indexes are 32-bit, so count < 2^32). */
#define BUCKET_MIN_BITS 3
#define BUCKET_MAX_BITS 32
/* Halve the table when count < buckets / 2^BUCKET_SHRINK_SHIFT: after halving the
 * load is below 1/2, so a grow (at load 1) cannot follow at once, and a shrunken
 * table costs at most 16 bytes per key. */
#define BUCKET_SHRINK_SHIFT 2
#define HASH_BITS 64

struct entry {
	uint64_t hash;
	int64_t offset;
	int64_t timestamp;
	uint32_t value_bytes;
	uint32_t next;
	uint32_t key_ref;
} __attribute__((packed, aligned(4)));

_Static_assert(sizeof(struct entry) == 36, "entry layout is part of the memory budget");

struct big_key {
	size_t len;
	uint8_t bytes[];
};

struct shard {
	uint32_t *buckets;
	unsigned bucket_bits;
	size_t count;
	size_t key_bytes;             /* sum of live key lengths */

	struct entry **echunks;
	uint32_t echunk_count, echunk_slots;
	uint32_t entry_cap;           /* slots allocated */
	uint32_t entry_top;           /* slots ever handed out: [entry_top, entry_cap) unused */
	uint32_t free_head;           /* free list of slots below entry_top */

	uint8_t **achunks;
	uint32_t achunk_count, achunk_slots;
	uint32_t arena_first_units;   /* capacity of achunks[0] (a power of two) */
	uint64_t arena_top;           /* next free unit */
	uint64_t live_units;          /* units of live records */
	uint64_t dead_units;          /* units of removed records and chunk tails */
	uint64_t compact_floor_units; /* after a failed compaction: wait for more garbage */
	size_t big_count;             /* live big keys */
	size_t big_bytes;             /* bytes of their blocks */
};

/* The directory: one table per shard, the shard chosen by the hash's top
 * SHARD_BITS bits (keydir.h). Each shard is the whole structure above, over the
 * keys of its hash range; its bucket index skips the bits every one of its
 * hashes shares. */
struct tfs_keydir {
	struct shard shard[TFS_KEYDIR_SHARDS];
};

#define SHARD_BITS 1
_Static_assert(TFS_KEYDIR_SHARDS == 1 << SHARD_BITS, "a shard per value of the top bits");
#define ALL_SHARDS ((1u << TFS_KEYDIR_SHARDS) - 1)

/* The shard of `hash` if it is one of the bit mask `shards`, else NULL. */
static inline struct shard *shard_in(struct tfs_keydir *kd, unsigned shards, uint64_t hash)
{
	unsigned s = tfs_keydir_shard(hash);
	return shards & (1u << s) ? &kd->shard[s] : NULL;
}

/* Test hooks, not in keydir.h (tests/engine/test_keydir.c declares them extern): the
 * public changes with the hash given instead of computed, so that tests can force
 * collisions (a lookup with a given hash is public: tfs_keydir_get_hashed), and the invariant checker (compiled in every build, so that the suite
 * checks invariants in the default RelWithDebInfo build too). */
int tfs_keydir__put_hashed(struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                           const struct tfs_keyinfo *info);
void tfs_keydir__remove_hashed(struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                               tfs_offset_t offset);
int tfs_keydir__check(const struct tfs_keydir *kd);

/* ---- entries ---- */

static inline struct entry *entry_at(const struct shard *kd, uint32_t idx)
{
	return &kd->echunks[idx >> ENTRY_CHUNK_SHIFT][idx & ENTRY_CHUNK_MASK];
}

/* Chunk pointer arrays hold one more chunk after these (doubling). */
static int echunk_slots_reserve(struct shard *kd)
{
	uint32_t n = kd->echunk_slots ? kd->echunk_slots * 2 : CHUNK_SLOTS_FIRST;
	struct entry **p;
	if (kd->echunk_count < kd->echunk_slots)
		return 0;
	p = realloc(kd->echunks, (size_t)n * sizeof *p);
	if (!p)
		return -ENOMEM;
	kd->echunks = p;
	kd->echunk_slots = n;
	return 0;
}

static int achunk_slots_reserve(struct shard *kd)
{
	uint32_t n = kd->achunk_slots ? kd->achunk_slots * 2 : CHUNK_SLOTS_FIRST;
	uint8_t **p;
	if (kd->achunk_count < kd->achunk_slots)
		return 0;
	p = realloc(kd->achunks, (size_t)n * sizeof *p);
	if (!p)
		return -ENOMEM;
	kd->achunks = p;
	kd->achunk_slots = n;
	return 0;
}

/* Makes sure entry_take will succeed. Only adds capacity. */
static int entry_reserve(struct shard *kd)
{
	struct entry *chunk;
	uint32_t n;
	int rc;

	if (kd->free_head != ENTRY_NONE || kd->entry_top < kd->entry_cap)
		return 0;
	if (kd->echunk_count == 1 && kd->entry_cap < ENTRY_CHUNK_COUNT) {
		n = kd->entry_cap * 2;
		chunk = realloc(kd->echunks[0], (size_t)n * sizeof *chunk);
		if (!chunk)
			return -ENOMEM;
		kd->echunks[0] = chunk;
		kd->entry_cap = n;
		return 0;
	}
	if (kd->echunk_count >= ENTRY_MAX_CHUNKS)
		return -ENOMEM;
	rc = echunk_slots_reserve(kd);
	if (rc)
		return rc;
	n = kd->echunk_count == 0 ? ENTRY_FIRST_COUNT : ENTRY_CHUNK_COUNT;
	chunk = malloc((size_t)n * sizeof *chunk);
	if (!chunk)
		return -ENOMEM;
	kd->echunks[kd->echunk_count++] = chunk;
	kd->entry_cap = (kd->echunk_count - 1) * ENTRY_CHUNK_COUNT + n;
	return 0;
}

/* Takes the slot entry_reserve guaranteed. */
static uint32_t entry_take(struct shard *kd)
{
	uint32_t idx = kd->free_head;
	if (idx != ENTRY_NONE) {
		kd->free_head = entry_at(kd, idx)->next;
		return idx;
	}
	assert(kd->entry_top < kd->entry_cap);
	return kd->entry_top++;
}

static void entry_release(struct shard *kd, uint32_t idx)
{
	struct entry *e = entry_at(kd, idx);
	e->key_ref = KEY_REF_NONE;
	e->next = kd->free_head;
	kd->free_head = idx;
}

/* Moves the live entries of the chunks past the first ceil(count / chunk) into free
 * slots below, relinking each chain, then frees those chunks. Allocates nothing, so
 * it cannot fail. Only called when more than half the slots are free. */
static void entries_compact(struct shard *kd, uint32_t *buckets, size_t nbuckets)
{
	uint32_t keep_chunks = (uint32_t)((kd->count + ENTRY_CHUNK_COUNT - 1) >> ENTRY_CHUNK_SHIFT);
	uint32_t keep = keep_chunks << ENTRY_CHUNK_SHIFT;
	uint32_t low_free = ENTRY_NONE, idx, next, prev, slot;

	assert(keep_chunks >= 1 && keep_chunks < kd->echunk_count);
	/* the free slots that stay: there are at least as many as live entries to move */
	for (idx = kd->free_head; idx != ENTRY_NONE; idx = next) {
		next = entry_at(kd, idx)->next;
		if (idx < keep) {
			entry_at(kd, idx)->next = low_free;
			low_free = idx;
		}
	}
	for (size_t b = 0; b < nbuckets; b++) {
		prev = ENTRY_NONE;
		for (idx = buckets[b]; idx != ENTRY_NONE; prev = idx, idx = entry_at(kd, idx)->next) {
			if (idx < keep)
				continue;
			assert(low_free != ENTRY_NONE);
			slot = low_free;
			low_free = entry_at(kd, slot)->next;
			*entry_at(kd, slot) = *entry_at(kd, idx);
			if (prev == ENTRY_NONE)
				buckets[b] = slot;
			else
				entry_at(kd, prev)->next = slot;
			idx = slot;
		}
	}
	for (uint32_t c = keep_chunks; c < kd->echunk_count; c++)
		free(kd->echunks[c]);
	kd->echunk_count = keep_chunks;
	kd->entry_cap = keep;
	if (kd->entry_top > keep)
		kd->entry_top = keep;
	kd->free_head = low_free;
}

static void entries_maybe_compact(struct shard *kd)
{
	uint32_t free_count = kd->entry_top - (uint32_t)kd->count;
	/* more than half the slots free and at least one whole chunk to give back */
	if (free_count <= kd->count || kd->echunk_count < 2 ||
	    ((kd->count + ENTRY_CHUNK_COUNT - 1) >> ENTRY_CHUNK_SHIFT) >= kd->echunk_count)
		return;
	entries_compact(kd, kd->buckets, (size_t)1 << kd->bucket_bits);
}

/* ---- key arena ---- */

static inline uint8_t *arena_at(const struct shard *kd, uint32_t ref)
{
	return kd->achunks[ref >> ARENA_CHUNK_SHIFT] +
	       (size_t)(ref & ARENA_CHUNK_MASK) * ARENA_UNIT_BYTES;
}

static inline uint32_t units_for(size_t bytes)
{
	return (uint32_t)((bytes + ARENA_UNIT_BYTES - 1) / ARENA_UNIT_BYTES);
}

static uint32_t record_units(const uint8_t *rec)
{
	if (rec[0] <= KEY_SHORT_MAX_BYTES)
		return units_for(KEY_SHORT_PREFIX_BYTES + (size_t)rec[0]);
	if (rec[0] == KEY_BIG_TAG)
		return KEY_BIG_UNITS;
	return units_for(KEY_LONG_PREFIX_BYTES +
	                 ((size_t)(rec[0] & ~KEY_LONG_TAG & BYTE_MASK) << BYTE_BITS | rec[1]));
}

static struct big_key *record_big(const uint8_t *rec)
{
	struct big_key *bk;
	memcpy(&bk, rec + ARENA_UNIT_BYTES, sizeof bk);
	return bk;
}

static struct tfs_slice record_key(const uint8_t *rec)
{
	struct big_key *bk;
	size_t len;
	if (rec[0] <= KEY_SHORT_MAX_BYTES)
		return tfs_slice_make(rec + KEY_SHORT_PREFIX_BYTES, rec[0]);
	if (rec[0] == KEY_BIG_TAG) {
		bk = record_big(rec);
		return tfs_slice_make(bk->bytes, bk->len);
	}
	len = (size_t)(rec[0] & ~KEY_LONG_TAG & BYTE_MASK) << BYTE_BITS | rec[1];
	return tfs_slice_make(rec + KEY_LONG_PREFIX_BYTES, len);
}

static inline struct tfs_slice entry_key(const struct shard *kd, const struct entry *e)
{
	return record_key(arena_at(kd, e->key_ref));
}

static uint32_t pow2_at_least(uint64_t n, uint32_t min)
{
	uint32_t p = min;
	while (p < n)
		p *= 2;
	return p;
}

/* Allocates `units` contiguous units; on -ENOMEM nothing changed. The returned record
 * is only valid until the next allocation (chunk 0 may move). */
static int arena_alloc(struct shard *kd, uint32_t units, uint32_t *ref)
{
	uint64_t top = kd->arena_top;
	uint64_t c = top >> ARENA_CHUNK_SHIFT;
	uint32_t off = (uint32_t)(top & ARENA_CHUNK_MASK);
	uint64_t waste = 0;
	uint32_t cap, n;
	uint8_t *chunk;
	int rc;

	if (c < kd->achunk_count) {
		cap = c == 0 ? kd->arena_first_units : ARENA_CHUNK_UNITS;
		if (off + units <= cap)
			goto take;
		if (off + units <= ARENA_CHUNK_UNITS) {
			/* only chunk 0 is ever smaller than a full chunk */
			assert(c == 0 && kd->achunk_count == 1);
			n = pow2_at_least((uint64_t)off + units, cap * 2);
			chunk = realloc(kd->achunks[0], (size_t)n * ARENA_UNIT_BYTES);
			if (!chunk)
				return -ENOMEM;
			kd->achunks[0] = chunk;
			kd->arena_first_units = n;
			goto take;
		}
		/* chunk 0 doubles in powers of two and a record is < ARENA_CHUNK_UNITS / 2,
		 * so a chunk we leave is full size (invariant 5: no unbacked units) */
		assert(cap == ARENA_CHUNK_UNITS);
		waste = cap - off;
		c++;
		off = 0;
	}
	assert(c == kd->achunk_count && off == 0);
	if (((c + 1) << ARENA_CHUNK_SHIFT) > (uint64_t)KEY_REF_NONE)
		return -ENOMEM; /* 16 GiB of keys: key_ref cannot address more */
	rc = achunk_slots_reserve(kd);
	if (rc)
		return rc;
	n = c == 0 ? pow2_at_least(units, ARENA_FIRST_UNITS) : ARENA_CHUNK_UNITS;
	chunk = malloc((size_t)n * ARENA_UNIT_BYTES);
	if (!chunk)
		return -ENOMEM;
	kd->achunks[kd->achunk_count++] = chunk;
	if (c == 0)
		kd->arena_first_units = n;
	kd->dead_units += waste;
	top = c << ARENA_CHUNK_SHIFT;
take:
	*ref = (uint32_t)top;
	kd->arena_top = top + units;
	kd->live_units += units;
	return 0;
}

/* Copies key into the arena (or a big_key block); on -ENOMEM nothing changed. */
static int key_store(struct shard *kd, struct tfs_slice key, uint32_t *ref)
{
	struct big_key *bk = NULL;
	size_t prefix, bytes;
	uint32_t units;
	uint8_t *rec;
	int rc;

	if (key.len > KEY_INLINE_MAX_BYTES) {
		if (key.len > SIZE_MAX - sizeof *bk)
			return -ENOMEM;
		bk = malloc(sizeof *bk + key.len);
		if (!bk)
			return -ENOMEM;
		bk->len = key.len;
		memcpy(bk->bytes, key.p, key.len);
		rc = arena_alloc(kd, KEY_BIG_UNITS, ref);
		if (rc) {
			free(bk);
			return rc;
		}
		rec = arena_at(kd, *ref);
		memset(rec, 0, KEY_BIG_UNITS * ARENA_UNIT_BYTES);
		rec[0] = KEY_BIG_TAG;
		memcpy(rec + ARENA_UNIT_BYTES, &bk, sizeof bk);
		kd->big_count++;
		kd->big_bytes += sizeof *bk + key.len;
		return 0;
	}
	prefix = key.len <= KEY_SHORT_MAX_BYTES ? KEY_SHORT_PREFIX_BYTES : KEY_LONG_PREFIX_BYTES;
	units = units_for(prefix + key.len);
	rc = arena_alloc(kd, units, ref);
	if (rc)
		return rc;
	rec = arena_at(kd, *ref);
	bytes = (size_t)units * ARENA_UNIT_BYTES;
	if (prefix == KEY_SHORT_PREFIX_BYTES) {
		rec[0] = (uint8_t)key.len;
	} else {
		rec[0] = (uint8_t)(KEY_LONG_TAG | key.len >> BYTE_BITS);
		rec[1] = (uint8_t)(key.len & BYTE_MASK);
	}
	if (key.len)
		memcpy(rec + prefix, key.p, key.len);
	memset(rec + prefix + key.len, 0, bytes - prefix - key.len);
	return 0;
}

static void key_free(struct shard *kd, uint32_t ref)
{
	uint8_t *rec = arena_at(kd, ref);
	uint32_t units = record_units(rec);
	struct big_key *bk;
	if (rec[0] == KEY_BIG_TAG) {
		bk = record_big(rec);
		kd->big_count--;
		kd->big_bytes -= sizeof *bk + bk->len;
		free(bk);
	}
	kd->live_units -= units;
	kd->dead_units += units;
}

static void arena_free_chunks(uint8_t **chunks, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++)
		free(chunks[i]);
	free(chunks);
}

/* Rewrites the live records densely into fresh chunks (in entry order) and frees the
 * old ones. On -ENOMEM nothing changed. */
static int arena_compact(struct shard *kd)
{
	uint8_t **chunks = NULL;
	uint32_t nchunks = 0, first_units, units, off;
	uint64_t top = 0, dead = 0;
	struct entry *e;
	int rc = -ENOMEM;

	/* pass 1: where would everything go? */
	for (uint32_t i = 0; i < kd->entry_top; i++) {
		e = entry_at(kd, i);
		if (e->key_ref == KEY_REF_NONE)
			continue;
		units = record_units(arena_at(kd, e->key_ref));
		if ((top & ARENA_CHUNK_MASK) + units > ARENA_CHUNK_UNITS)
			top = (top | ARENA_CHUNK_MASK) + 1;
		top += units;
	}
	if (top) {
		nchunks = (uint32_t)((top - 1) >> ARENA_CHUNK_SHIFT) + 1;
		chunks = calloc(nchunks, sizeof *chunks);
		if (!chunks)
			goto out;
	}
	first_units = nchunks == 1 ? pow2_at_least(top, ARENA_FIRST_UNITS) : ARENA_CHUNK_UNITS;
	for (uint32_t c = 0; c < nchunks; c++) {
		chunks[c] = malloc((size_t)(c ? ARENA_CHUNK_UNITS : first_units) * ARENA_UNIT_BYTES);
		if (!chunks[c])
			goto out;
	}

	/* pass 2: copy and repoint; nothing can fail from here */
	top = 0;
	for (uint32_t i = 0; i < kd->entry_top; i++) {
		e = entry_at(kd, i);
		if (e->key_ref == KEY_REF_NONE)
			continue;
		units = record_units(arena_at(kd, e->key_ref));
		off = (uint32_t)(top & ARENA_CHUNK_MASK);
		if (off + units > ARENA_CHUNK_UNITS) {
			dead += ARENA_CHUNK_UNITS - off;
			top = (top | ARENA_CHUNK_MASK) + 1;
			off = 0;
		}
		memcpy(chunks[top >> ARENA_CHUNK_SHIFT] + (size_t)off * ARENA_UNIT_BYTES,
		       arena_at(kd, e->key_ref), (size_t)units * ARENA_UNIT_BYTES);
		e->key_ref = (uint32_t)top;
		top += units;
	}
	arena_free_chunks(kd->achunks, kd->achunk_count);
	kd->achunks = chunks;
	kd->achunk_count = kd->achunk_slots = nchunks;
	kd->arena_first_units = nchunks ? first_units : 0;
	kd->arena_top = top;
	kd->dead_units = dead;
	chunks = NULL;
	nchunks = 0;
	rc = 0;
out:
	if (chunks)
		arena_free_chunks(chunks, nchunks);
	return rc;
}

static void arena_maybe_compact(struct shard *kd)
{
	if (kd->dead_units <= kd->live_units || kd->dead_units < ARENA_COMPACT_MIN_UNITS ||
	    kd->dead_units <= kd->compact_floor_units)
		return;
	/* -ENOMEM: keep the old arena, retry once the garbage has doubled */
	kd->compact_floor_units = arena_compact(kd) ? kd->dead_units * 2 : 0;
}

/* ---- buckets ---- */

/* The bucket of hash: the bucket_bits below the shard's bits. */
static inline size_t bucket_of(const struct shard *kd, uint64_t hash)
{
	return (size_t)((hash << SHARD_BITS) >> (HASH_BITS - kd->bucket_bits));
}

static inline size_t bucket_count(const struct shard *kd)
{
	return (size_t)1 << kd->bucket_bits;
}

/* Prefetches both cache lines an entry may straddle (36 bytes, 4-aligned). */
static inline void entry_prefetch(const struct shard *kd, uint32_t idx)
{
	const char *p = (const char *)entry_at(kd, idx);
	__builtin_prefetch(p);
	__builtin_prefetch(p + sizeof(struct entry) - 1);
}

/* Doubles the table by splitting each chain where the next hash bit turns to 1.
 * Chains are sorted (invariant 1), so each split is a single cut.
 *
 * Walking the chains is a cache miss per entry, one after the other; a table of
 * a million keys is too big for the cache. So the walk runs a pipeline over the
 * bucket array: the head entry of bucket i - HEAD_AHEAD is fetched, and the
 * second entry of bucket i - NEXT_AHEAD when its head is a 0 (the split walks
 * past it), while bucket i is cut. At load 1 nine chains in ten are at most two
 * long, so most cuts find their entries in the cache. */
static void buckets_grow(struct shard *kd)
{
	enum { HEAD_AHEAD = 32, NEXT_AHEAD = 16 };
	size_t n = bucket_count(kd);
	/* the bit the index gains */
	unsigned bit = HASH_BITS - 1 - SHARD_BITS - kd->bucket_bits;
	uint32_t *b, head, prev, cur;

	if (kd->bucket_bits >= BUCKET_MAX_BITS)
		return;
	b = realloc(kd->buckets, 2 * n * sizeof *b);
	if (!b)
		return; /* goes on at a higher load; retried at the next insert */
	/* from the top down: buckets 2i and 2i+1 (>= i) are free once i+1.. are done,
	 * and buckets below i still hold the old heads the pipeline reads */
	for (size_t i = n; i-- > 0;) {
		if (i >= HEAD_AHEAD && b[i - HEAD_AHEAD] != ENTRY_NONE)
			entry_prefetch(kd, b[i - HEAD_AHEAD]);
		if (i >= NEXT_AHEAD && b[i - NEXT_AHEAD] != ENTRY_NONE) {
			const struct entry *e = entry_at(kd, b[i - NEXT_AHEAD]);
			if (!((e->hash >> bit) & 1) && e->next != ENTRY_NONE)
				entry_prefetch(kd, e->next);
		}
		head = b[i];
		prev = ENTRY_NONE;
		for (cur = head; cur != ENTRY_NONE && !((entry_at(kd, cur)->hash >> bit) & 1);
		     cur = entry_at(kd, cur)->next)
			prev = cur;
		if (prev != ENTRY_NONE)
			entry_at(kd, prev)->next = ENTRY_NONE;
		b[2 * i] = prev == ENTRY_NONE ? ENTRY_NONE : head;
		b[2 * i + 1] = cur;
	}
	kd->buckets = b;
	kd->bucket_bits++;
}

/* Halves the table by joining sibling chains (all of 2i sorts before 2i+1). */
static void buckets_shrink(struct shard *kd)
{
	size_t n = bucket_count(kd) / 2;
	uint32_t *b, cur;

	b = malloc(n * sizeof *b);
	if (!b)
		return; /* the larger table is just as correct */
	for (size_t i = 0; i < n; i++) {
		cur = kd->buckets[2 * i];
		if (cur == ENTRY_NONE) {
			b[i] = kd->buckets[2 * i + 1];
			continue;
		}
		b[i] = cur;
		while (entry_at(kd, cur)->next != ENTRY_NONE)
			cur = entry_at(kd, cur)->next;
		entry_at(kd, cur)->next = kd->buckets[2 * i + 1];
	}
	free(kd->buckets);
	kd->buckets = b;
	kd->bucket_bits--;
}

/* ---- lookup ---- */

static int key_cmp(struct tfs_slice a, struct tfs_slice b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.p, b.p, n) : 0;
	if (c)
		return c;
	return (a.len > b.len) - (a.len < b.len);
}

/* Order of entry e relative to (hash, key): <0 before, 0 same key, >0 after. */
static int entry_cmp(const struct shard *kd, const struct entry *e, uint64_t hash,
                     struct tfs_slice key)
{
	if (e->hash != hash)
		return e->hash < hash ? -1 : 1;
	return key_cmp(entry_key(kd, e), key);
}

/* Finds (hash, key): returns its index or ENTRY_NONE; *prev is the entry before it
 * (or before where it would go), ENTRY_NONE at the head of the chain. */
static uint32_t find(const struct shard *kd, uint64_t hash, struct tfs_slice key,
                     uint32_t *prev)
{
	uint32_t idx = kd->buckets[bucket_of(kd, hash)];
	int c;
	*prev = ENTRY_NONE;
	for (; idx != ENTRY_NONE; idx = entry_at(kd, idx)->next) {
		c = entry_cmp(kd, entry_at(kd, idx), hash, key);
		if (c == 0)
			return idx;
		if (c > 0)
			break;
		*prev = idx;
	}
	return ENTRY_NONE;
}

static void entry_info(const struct entry *e, struct tfs_keyinfo *info)
{
	info->offset = e->offset;
	info->timestamp = e->timestamp;
	info->value_bytes = e->value_bytes;
}

/* ---- one shard ---- */

static int shard_init(struct shard *kd)
{
	size_t n = (size_t)1 << BUCKET_MIN_BITS;
	kd->buckets = malloc(n * sizeof *kd->buckets);
	if (!kd->buckets)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		kd->buckets[i] = ENTRY_NONE;
	kd->bucket_bits = BUCKET_MIN_BITS;
	kd->free_head = ENTRY_NONE;
	return 0;
}

/* Frees entries and arena; only when no key is live, or on destroy after the big keys
 * were freed. */
static void storage_release(struct shard *kd)
{
	for (uint32_t i = 0; i < kd->echunk_count; i++)
		free(kd->echunks[i]);
	free(kd->echunks);
	kd->echunks = NULL;
	kd->echunk_count = kd->echunk_slots = 0;
	kd->entry_cap = kd->entry_top = 0;
	kd->free_head = ENTRY_NONE;
	arena_free_chunks(kd->achunks, kd->achunk_count);
	kd->achunks = NULL;
	kd->achunk_count = kd->achunk_slots = 0;
	kd->arena_first_units = 0;
	kd->arena_top = kd->live_units = kd->dead_units = kd->compact_floor_units = 0;
}

static void shard_free(struct shard *kd)
{
	struct entry *e;
	uint8_t *rec;
	for (uint32_t i = 0; kd->big_count && i < kd->entry_top; i++) {
		e = entry_at(kd, i);
		if (e->key_ref == KEY_REF_NONE)
			continue;
		rec = arena_at(kd, e->key_ref);
		if (rec[0] == KEY_BIG_TAG) {
			free(record_big(rec));
			kd->big_count--;
		}
	}
	storage_release(kd);
	free(kd->buckets);
}

static int shard_put(struct shard *kd, struct tfs_slice key, uint64_t hash,
                     const struct tfs_keyinfo *info)
{
	uint32_t prev, idx, ref;
	size_t b;
	struct entry *e;
	int rc;

	idx = find(kd, hash, key, &prev);
	if (idx != ENTRY_NONE) {
		e = entry_at(kd, idx);
		if (info->offset < e->offset)
			return 0; /* a replay older than what we hold */
		e->offset = info->offset;
		e->timestamp = info->timestamp;
		e->value_bytes = info->value_bytes;
		return 0;
	}

	/* allocate everything first: -ENOMEM must leave the table unchanged */
	rc = entry_reserve(kd);
	if (rc)
		return rc;
	rc = key_store(kd, key, &ref);
	if (rc)
		return rc;

	idx = entry_take(kd);
	e = entry_at(kd, idx);
	e->hash = hash;
	e->offset = info->offset;
	e->timestamp = info->timestamp;
	e->value_bytes = info->value_bytes;
	e->key_ref = ref;
	b = bucket_of(kd, hash);
	if (prev == ENTRY_NONE) {
		e->next = kd->buckets[b];
		kd->buckets[b] = idx;
	} else {
		e->next = entry_at(kd, prev)->next;
		entry_at(kd, prev)->next = idx;
	}
	/* invariant (1) around the new link */
	assert(prev == ENTRY_NONE || entry_cmp(kd, entry_at(kd, prev), hash, key) < 0);
	assert(e->next == ENTRY_NONE || entry_cmp(kd, entry_at(kd, e->next), hash, key) > 0);
	kd->count++;
	kd->key_bytes += key.len;
	if (kd->count > bucket_count(kd))
		buckets_grow(kd);
	return 0;
}

static void shard_remove(struct shard *kd, struct tfs_slice key, uint64_t hash,
                         tfs_offset_t offset)
{
	uint32_t prev, idx;
	struct entry *e;

	idx = find(kd, hash, key, &prev);
	if (idx == ENTRY_NONE)
		return;
	e = entry_at(kd, idx);
	if (e->offset >= offset)
		return; /* the tombstone is older than the record we hold */
	if (prev == ENTRY_NONE)
		kd->buckets[bucket_of(kd, hash)] = e->next;
	else
		entry_at(kd, prev)->next = e->next;
	kd->key_bytes -= key.len;
	kd->count--;
	key_free(kd, e->key_ref);
	entry_release(kd, idx);
	if (kd->count == 0) {
		storage_release(kd);
	} else {
		entries_maybe_compact(kd);
		arena_maybe_compact(kd);
	}
	if (kd->bucket_bits > BUCKET_MIN_BITS &&
	    kd->count < bucket_count(kd) >> BUCKET_SHRINK_SHIFT)
		buckets_shrink(kd);
}

static int shard_get(const struct shard *kd, struct tfs_slice key, uint64_t hash,
                     struct tfs_keyinfo *info)
{
	uint32_t prev;
	uint32_t idx = find(kd, hash, key, &prev);
	if (idx == ENTRY_NONE)
		return 0;
	entry_info(entry_at(kd, idx), info);
	return 1;
}

/* Applies, in order, the changes of ops[0, n) whose hash is in a shard of
 * `shards` (a bit mask; the others are skipped). A change that fails with
 * -ENOMEM stops its shard there: that shard's later changes are skipped, the
 * other shards' are applied, and the first error is returned.
 *
 * Three-stage software pipeline: the bucket slot of the change BUCKET_AHEAD
 * places on, the chain head entry of the one ENTRY_AHEAD on, and of the one
 * KEY_AHEAD on what the walk needs next - the head's key record when the head is
 * the key, the second entry when the key sorts after the head - are fetched
 * while the current change is applied. A stage reads what the one before
 * fetched, so the gap between two stages must cover a memory latency (~220 ns on
 * the VMs we measure, where a change costs ~80 ns): shorter distances measured
 * 20% slower (bench/bench_open). The distances count the changes this call
 * applies, so with one shard of TFS_KEYDIR_SHARDS they count that many times
 * more places in ops. One pass over every shard (open's scan, whole groups)
 * costs 20% less than one pass a shard (bench/bench_open).
 * Prefetches are hints, so a table that resizes under them only wastes one. */
static int keydir_apply(struct tfs_keydir *kd, unsigned shards, const struct tfs_keydir_op *ops,
                        size_t n)
{
	const size_t scale = shards == ALL_SHARDS ? 1 : TFS_KEYDIR_SHARDS;
	const size_t bucket_ahead = 32 * scale, entry_ahead = 16 * scale, key_ahead = 8 * scale;
	const struct tfs_keydir_op *op;
	struct shard *sh;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (i + bucket_ahead < n && (sh = shard_in(kd, shards, (op = &ops[i + bucket_ahead])->hash)))
			__builtin_prefetch(&sh->buckets[bucket_of(sh, op->hash)]);
		if (i + entry_ahead < n && (sh = shard_in(kd, shards, (op = &ops[i + entry_ahead])->hash))) {
			uint32_t idx = sh->buckets[bucket_of(sh, op->hash)];
			if (idx != ENTRY_NONE)
				entry_prefetch(sh, idx);
		}
		if (i + key_ahead < n && (sh = shard_in(kd, shards, (op = &ops[i + key_ahead])->hash))) {
			uint32_t idx = sh->buckets[bucket_of(sh, op->hash)];
			if (idx != ENTRY_NONE) {
				const struct entry *e = entry_at(sh, idx);
				if (e->hash == op->hash && e->key_ref != KEY_REF_NONE)
					__builtin_prefetch(arena_at(sh, e->key_ref));
				else if (e->hash < op->hash && e->next != ENTRY_NONE)
					entry_prefetch(sh, e->next);
			}
		}
		op = &ops[i];
		if (!(sh = shard_in(kd, shards, op->hash)))
			continue;
		if (op->remove) {
			shard_remove(sh, op->key, op->hash, op->info.offset);
		} else {
			int r = shard_put(sh, op->key, op->hash, &op->info);
			if (r < 0) {
				shards &= ~(1u << tfs_keydir_shard(op->hash));
				if (rc == 0)
					rc = r;
			}
		}
	}
	return rc;
}

static size_t shard_memory_bytes(const struct shard *kd)
{
	size_t arena_units = 0;
	if (kd->achunk_count)
		arena_units = kd->arena_first_units +
		              (size_t)(kd->achunk_count - 1) * ARENA_CHUNK_UNITS;
	return bucket_count(kd) * sizeof *kd->buckets +
	       (size_t)kd->echunk_slots * sizeof *kd->echunks +
	       (size_t)kd->entry_cap * sizeof(struct entry) +
	       (size_t)kd->achunk_slots * sizeof *kd->achunks +
	       arena_units * ARENA_UNIT_BYTES + kd->big_bytes;
}

/* Keys of the shard with a hash > after_hash (after_valid: in the shard's
 * range), in ascending hash order. */
static int shard_scan(const struct shard *kd, bool after_valid, uint64_t after_hash,
                      tfs_keydir_visit_fn fn, void *arg)
{
	size_t n = bucket_count(kd);
	size_t b = after_valid ? bucket_of(kd, after_hash) : 0;
	struct tfs_keyinfo info;
	const struct entry *e;
	int rc;

	for (; b < n; b++) {
		for (uint32_t idx = kd->buckets[b]; idx != ENTRY_NONE; idx = e->next) {
			e = entry_at(kd, idx);
			if (after_valid && e->hash <= after_hash)
				continue;
			entry_info(e, &info);
			rc = fn(arg, entry_key(kd, e), &info, e->hash);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int shard_check(const struct shard *kd, unsigned s)
{
	size_t reached = 0, key_bytes = 0, big = 0, free_count = 0;
	uint64_t live_units = 0;
	const struct entry *e, *prev;
	const uint8_t *rec;

	for (size_t b = 0; b < bucket_count(kd); b++) {
		prev = NULL;
		for (uint32_t idx = kd->buckets[b]; idx != ENTRY_NONE; idx = e->next) {
			if (idx >= kd->entry_top || ++reached > kd->count)
				return 2; /* a stray index, a cycle, or more entries than count */
			e = entry_at(kd, idx);
			if (e->key_ref == KEY_REF_NONE)
				return 4;
			if (bucket_of(kd, e->hash) != b || tfs_keydir_shard(e->hash) != s)
				return 1;
			if (prev && entry_cmp(kd, prev, e->hash, entry_key(kd, e)) >= 0)
				return 1;
			rec = arena_at(kd, e->key_ref);
			key_bytes += entry_key(kd, e).len;
			live_units += record_units(rec);
			big += rec[0] == KEY_BIG_TAG;
			prev = e;
		}
	}
	if (reached != kd->count)
		return 2;
	for (uint32_t idx = kd->free_head; idx != ENTRY_NONE; idx = entry_at(kd, idx)->next) {
		if (idx >= kd->entry_top || ++free_count > kd->entry_top)
			return 4;
		if (entry_at(kd, idx)->key_ref != KEY_REF_NONE)
			return 4;
	}
	if (free_count + kd->count != kd->entry_top)
		return 4;
	if (key_bytes != kd->key_bytes || live_units != kd->live_units || big != kd->big_count ||
	    kd->live_units + kd->dead_units != kd->arena_top)
		return 5;
	return 0;
}

/* ---- public ---- */

struct tfs_keydir *tfs_keydir_create(void)
{
	struct tfs_keydir *kd = calloc(1, sizeof *kd);

	for (unsigned s = 0; kd && s < TFS_KEYDIR_SHARDS; s++) {
		if (shard_init(&kd->shard[s]) < 0) {
			tfs_keydir_destroy(kd);
			return NULL;
		}
	}
	return kd;
}

void tfs_keydir_destroy(struct tfs_keydir *kd)
{
	if (!kd)
		return;
	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		if (kd->shard[s].buckets)
			shard_free(&kd->shard[s]);
	free(kd);
}

uint64_t tfs_keydir_hash(struct tfs_slice key)
{
	return XXH3_64bits(key.p, key.len);
}

int tfs_keydir__put_hashed(struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                           const struct tfs_keyinfo *info)
{
	return shard_put(&kd->shard[tfs_keydir_shard(hash)], key, hash, info);
}

int tfs_keydir_put(struct tfs_keydir *kd, struct tfs_slice key, const struct tfs_keyinfo *info)
{
	return tfs_keydir__put_hashed(kd, key, tfs_keydir_hash(key), info);
}

void tfs_keydir__remove_hashed(struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                               tfs_offset_t offset)
{
	shard_remove(&kd->shard[tfs_keydir_shard(hash)], key, hash, offset);
}

void tfs_keydir_remove(struct tfs_keydir *kd, struct tfs_slice key, tfs_offset_t offset)
{
	tfs_keydir__remove_hashed(kd, key, tfs_keydir_hash(key), offset);
}

int tfs_keydir_get_hashed(const struct tfs_keydir *kd, struct tfs_slice key, uint64_t hash,
                          struct tfs_keyinfo *info)
{
	return shard_get(&kd->shard[tfs_keydir_shard(hash)], key, hash, info);
}

int tfs_keydir_get(const struct tfs_keydir *kd, struct tfs_slice key, struct tfs_keyinfo *info)
{
	return tfs_keydir_get_hashed(kd, key, tfs_keydir_hash(key), info);
}

int tfs_keydir_apply_shard(struct tfs_keydir *kd, unsigned shard,
                           const struct tfs_keydir_op *ops, size_t n)
{
	return keydir_apply(kd, 1u << shard, ops, n);
}

int tfs_keydir_apply(struct tfs_keydir *kd, const struct tfs_keydir_op *ops, size_t n)
{
	return keydir_apply(kd, ALL_SHARDS, ops, n);
}

size_t tfs_keydir_count(const struct tfs_keydir *kd)
{
	size_t n = 0;

	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		n += kd->shard[s].count;
	return n;
}

size_t tfs_keydir_memory_bytes(const struct tfs_keydir *kd)
{
	size_t n = sizeof *kd;

	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		n += shard_memory_bytes(&kd->shard[s]);
	return n;
}

size_t tfs_keydir_key_bytes(const struct tfs_keydir *kd)
{
	size_t n = 0;

	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++)
		n += kd->shard[s].key_bytes;
	return n;
}

/* Shard by shard: shard s holds the hashes with top bits s, so the shards in
 * index order visit keys in ascending hash. A cursor in shard c skips the
 * shards below it and resumes within c. The visitor must not change kd. */
int tfs_keydir_scan(const struct tfs_keydir *kd, bool after_valid, uint64_t after_hash,
                    tfs_keydir_visit_fn fn, void *arg)
{
	unsigned from = after_valid ? tfs_keydir_shard(after_hash) : 0;

	for (unsigned s = from; s < TFS_KEYDIR_SHARDS; s++) {
		int rc = shard_scan(&kd->shard[s], after_valid && s == from, after_hash, fn, arg);
		if (rc)
			return rc;
	}
	return 0;
}

/* Returns 0, or the number of the first violated invariant: (1)-(3) of keydir.h,
 * (4)-(5) above, in any shard (an entry in the wrong shard breaks (1)). (3) is a
 * property of the caller's replay; the tests check it against a reference model.
 * O(count + buckets): for tests and debugging only. */
int tfs_keydir__check(const struct tfs_keydir *kd)
{
	for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++) {
		int rc = shard_check(&kd->shard[s], s);
		if (rc)
			return rc;
	}
	return 0;
}
