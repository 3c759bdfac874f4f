/* txn_tombs.c - the keys removed while a transaction was open (txn_tombs.h).
 *
 * Open addressing with linear probing on the key's 64-bit hash, at most half full;
 * each slot owns a malloc'd copy of its key (hash collisions compare the bytes).
 * The set lives only while a transaction is open, so nothing here is tuned for
 * size beyond that.
 */
#include "engine/log/txn_tombs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TOMBS_FIRST_SLOTS 64            /* a power of two */

struct tomb {
	uint64_t hash;
	tfs_offset_t offset;
	uint8_t *key;                   /* NULL: an empty slot */
	size_t len;
};

struct tfs_tombs {
	struct tomb *slot;
	size_t nslots;                  /* a power of two */
	size_t count;
	size_t kept;                    /* count after the last prune */
};

static struct tomb *find(const struct tfs_tombs *t, struct tfs_slice key, uint64_t hash)
{
	size_t mask = t->nslots - 1;

	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		struct tomb *s = &t->slot[i];
		if (!s->key || (s->hash == hash && s->len == key.len &&
		                (key.len == 0 || memcmp(s->key, key.p, key.len) == 0)))
			return s;
	}
}

static int grow(struct tfs_tombs *t)
{
	size_t n = t->nslots ? t->nslots * 2 : TOMBS_FIRST_SLOTS;
	struct tfs_tombs bigger = { calloc(n, sizeof(struct tomb)), n, t->count, t->kept };

	if (!bigger.slot)
		return -ENOMEM;
	for (size_t i = 0; i < t->nslots; i++) {
		struct tomb *s = &t->slot[i];
		if (s->key)
			*find(&bigger, (struct tfs_slice){ s->key, s->len }, s->hash) = *s;
	}
	free(t->slot);
	*t = bigger;
	return 0;
}

int tfs_tombs_note(struct tfs_tombs **tp, struct tfs_slice key, uint64_t hash, tfs_offset_t offset)
{
	struct tfs_tombs *t = *tp;
	struct tomb *s;

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t || grow(t) < 0) {
			free(t);
			return -ENOMEM;
		}
		*tp = t;
	}
	if (2 * (t->count + 1) > t->nslots && grow(t) < 0)
		return -ENOMEM;
	s = find(t, key, hash);
	if (s->key) {
		if (offset > s->offset)
			s->offset = offset;
		return 0;
	}
	s->key = malloc(key.len ? key.len : 1);
	if (!s->key)
		return -ENOMEM;
	if (key.len)
		memcpy(s->key, key.p, key.len);
	s->len = key.len;
	s->hash = hash;
	s->offset = offset;
	t->count++;
	return 0;
}

bool tfs_tombs_after(const struct tfs_tombs *t, struct tfs_slice key, uint64_t hash,
                     tfs_offset_t offset)
{
	const struct tomb *s;

	if (!t || t->count == 0)
		return false;
	s = find(t, key, hash);
	return s->key && s->offset > offset;
}

bool tfs_tombs_prune_due(const struct tfs_tombs *t)
{
	return t && t->count >= TFS_TOMBS_PRUNE_MIN && t->count > 2 * t->kept;
}

void tfs_tombs_prune(struct tfs_tombs **tp, tfs_offset_t below)
{
	struct tfs_tombs *t = *tp, kept = { 0 };
	size_t left = 0;

	if (!t)
		return;
	for (size_t i = 0; i < t->nslots; i++)
		left += t->slot[i].key && t->slot[i].offset >= below;
	/* rebuilt in place of deleting (linear probing has no cheap delete), at
	 * most a quarter full, so that a prune after a big one costs little */
	kept.nslots = TOMBS_FIRST_SLOTS;
	while (kept.nslots < 4 * left)
		kept.nslots *= 2;
	kept.slot = calloc(kept.nslots, sizeof(struct tomb));
	if (!kept.slot)
		return;                     /* kept whole: only memory is lost */
	for (size_t i = 0; i < t->nslots; i++) {
		struct tomb *s = &t->slot[i];
		if (!s->key)
			continue;
		if (s->offset < below) {
			free(s->key);
			continue;
		}
		*find(&kept, (struct tfs_slice){ s->key, s->len }, s->hash) = *s;
		kept.count++;
	}
	free(t->slot);
	kept.kept = kept.count;
	*t = kept;
	if (t->count == 0)
		tfs_tombs_clear(tp);
}

void tfs_tombs_clear(struct tfs_tombs **tp)
{
	struct tfs_tombs *t = *tp;

	if (!t)
		return;
	for (size_t i = 0; i < t->nslots; i++)
		free(t->slot[i].key);
	free(t->slot);
	free(t);
	*tp = NULL;
}

size_t tfs_tombs_count(const struct tfs_tombs *t)
{
	return t ? t->count : 0;
}
