/* types.h - the vocabulary every engine module shares.
 *
 * Owns: nothing; only types, the error band and the one function that names errors.
 *
 * Offsets vs positions: a tfs_offset_t is a record's logical offset in a partition
 * (Kafka's int64 offset, never renumbered); a tfs_pos_t is a byte position inside one
 * file. They are distinct typedefs so that a signature says which one it takes; mixing
 * them up is the classic log-engine bug.
 *
 * Errors: every function returns 0 (or a count) on success, or a negative errno.
 * Engine-specific conditions live in a reserved band below -4096 (TFS_E*), named by
 * tfs_strerror(); the fs layer maps them to an errno in exactly one function.
 */
#ifndef TFS_TYPES_H
#define TFS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t tfs_offset_t;   /* logical record offset within a partition */
typedef int64_t tfs_pos_t;      /* byte position within one file */

#define TFS_OFFSET_NONE ((tfs_offset_t)-1)

/* A borrowed run of bytes. Keys and values are bytes, never C strings. */
struct tfs_slice {
	const uint8_t *p;
	size_t len;
};

static inline struct tfs_slice tfs_slice_make(const void *p, size_t len)
{
	struct tfs_slice s = { (const uint8_t *)p, len };
	return s;
}

/* Engine error band: below -4096, so that it never collides with an errno. */
enum {
	TFS_ECORRUPT = -4097,      /* on-disk data fails a length, varint or CRC check */
	TFS_EUNSUPPORTED = -4098,  /* valid Kafka data this build cannot read (magic < 2, gzip...) */
	TFS_ESEQUENCE = -4099,     /* producer sequence out of order */
	TFS_EFENCED = -4101,       /* producer epoch is older than the current one */
	TFS_EREADONLY = -4102,     /* the partition or data directory is read-only */
	TFS_EDAMAGED = -4103,      /* the answer may lie in an unreadable region of a sealed
	                            * segment (logged once, when the partition opened) */
	TFS_EGROUPBUSY = -4104,    /* the consumer group has members (groups.h) */
	TFS_EGENERATION = -4105,   /* not the consumer group's generation (groups.h) */
};

/* A short, lowercase, static description of an errno or TFS_E* code (negative). */
const char *tfs_strerror(int err);

/* Current wall-clock time in milliseconds since the epoch (Kafka timestamps). */
int64_t tfs_now_ms(void);
/* Monotonic time in milliseconds (for intervals and throttling). */
int64_t tfs_mono_ms(void);
int64_t tfs_mono_us(void);           /* the same clock in microseconds */

/* The position of key in base[0..n) (elements of `size` bytes, sorted by cmp, which
 * compares the key with an element): its index when present (*found), else where it
 * would be inserted. One binary search for the engine's sorted tables. */
size_t tfs_sorted_pos(const void *base, size_t n, size_t size, const void *key,
                      int (*cmp)(const void *key, const void *elem), bool *found);

/* An aborted transaction: one .txnindex entry (segment.h). */
struct tfs_aborted_txn {
	int64_t producer_id;
	tfs_offset_t first_offset;         /* its first data batch's base offset */
	tfs_offset_t last_offset;          /* its ABORT marker */
	tfs_offset_t last_stable_offset;   /* the partition's once the marker was written */
};

#endif
