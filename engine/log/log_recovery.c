/* log_recovery.c - opening a partition directory: leftover files, torn tails,
 * indexes and the key directory.
 *
 * Steps (Kafka's LogLoader, adapted):
 *   1. leftovers: *.deleted and *.tmp are removed; *.cleaned are removed; a *.swap
 *      whose offset is at or past the lowest *.cleaned belongs to an interrupted
 *      swap and is removed; the remaining *.swap files complete their swap: the
 *      originals they cover are removed and the .swap suffix dropped. Index files
 *      without a .log are removed (remove_orphan_indexes).
 *   2. every segment is scanned from position 0: each batch's header and CRC are
 *      checked, its records feed the key directory, and the in-memory indexes are
 *      rebuilt. In the last segment, the first invalid or incomplete batch starts a
 *      torn tail: it is truncated and the cut is logged. In a sealed segment an
 *      invalid batch is corruption, not a torn tail (invariant 5): nothing is cut.
 *      The unreadable regions (batch_reader.h: a run of batches whose framing
 *      holds, or everything from a batch that cannot be framed) are kept on the
 *      segment and read as TFS_ECORRUPT; batches after a region are read on. A
 *      key whose newest readable record precedes a region may be stale
 *      (pl->stale_below) and reads TFS_EDAMAGED; the partition is marked
 *      uncleanable with the reason. Only topicctl repair truncates there.
 *   3. sealed segments whose .index/.timeindex are missing or differ from the
 *      rebuilt ones get them rewritten (logged); so does every segment's
 *      .txnindex (the aborted transactions whose ABORT marker the scan met in
 *      it). A transactional batch's keys reach the key directory only at its
 *      transaction's COMMIT marker; a transaction still open at the end is
 *      aborted by tfs_plog_open once recovery is done (its writer is gone).
 *   4. an empty directory gets an empty segment at offset 0.
 * A read-only open changes no file: a torn tail is skipped in memory, a completed
 * swap is read from its .swap file with its originals left out, and leftovers
 * stay in place (each one logged); step 3 is skipped and step 4 fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/format/batch_reader.h"
#include "engine/log/plog_internal.h"
#include "engine/ondisk.h"
#include "io/log.h"

/* Sequential read size of the open scan: small enough that the CRC check and the
 * parse find a chunk still in the L2 cache the read's copy left it in (4 MiB
 * chunks went out to L3: ~10% slower opens, bench/bench_open), large enough that
 * the syscalls do not count. */
#define RECOVERY_CHUNK (256u << 10)
#define PATH_CAP 4096
#define REASON_CAP 512
/* A segment from this size on feeds the key directory on a second thread
 * (keydir_feed.c); below it a thread costs more than it saves, and a wide topic's
 * partitions mostly hold a few records each. */
#define FEED_MIN_BYTES (1u << 20)

struct dir_scan {
	tfs_offset_t *logs;                 /* bases of *.log files */
	size_t nlogs, caplogs;
	tfs_offset_t min_cleaned;           /* INT64_MAX when none */
	/* read-only: completed swaps finished in memory only - the segment of base
	 * swap_base[i] is read from the file swap_name[i] */
	tfs_offset_t *swap_base;
	char **swap_name;
	size_t nswap_over;
};

/* Notes (read-only) that the segment of base is read from the file name. */
static int swap_override(struct dir_scan *d, tfs_offset_t base, const char *name)
{
	tfs_offset_t *b = realloc(d->swap_base, (d->nswap_over + 1) * sizeof(*b));
	char **n;

	if (!b)
		return -ENOMEM;
	d->swap_base = b;
	n = realloc(d->swap_name, (d->nswap_over + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	d->swap_name = n;
	if (!(n[d->nswap_over] = strdup(name)))
		return -ENOMEM;
	b[d->nswap_over++] = base;
	return 0;
}

static int push_base(struct dir_scan *d, tfs_offset_t base)
{
	if (d->nlogs == d->caplogs) {
		size_t cap = d->caplogs ? d->caplogs * 2 : 16;
		tfs_offset_t *p = realloc(d->logs, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->logs = p;
		d->caplogs = cap;
	}
	d->logs[d->nlogs++] = base;
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	tfs_offset_t x = *(const tfs_offset_t *)a, y = *(const tfs_offset_t *)b;
	return x < y ? -1 : x > y;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void remove_file(struct tfs_plog *pl, const char *name, const char *why)
{
	int rc;

	if (pl->env.read_only) {
		tfs_log_warn("recovery", "left %s/%s in place (%s): the mount is read-only; a "
		             "read-write mount removes it", pl->path, name, why);
		return;
	}
	rc = tfs_io_unlinkat(pl->env.io, pl->dirfd, name, 0);

	if (rc < 0 && rc != -ENOENT)
		tfs_log_warn("recovery", "cannot remove %s/%s: %s", pl->path, name, tfs_strerror(rc));
	else
		tfs_log_info("recovery", "removed %s/%s (%s)", pl->path, name, why);
}

/* Step 1, first pass: removes plain leftovers, notes .cleaned, lists .log files.
 * Leaves .swap files for complete_swaps(). */
static int list_dir(struct tfs_plog *pl, struct dir_scan *d, bool *have_swap)
{
	DIR *dir = tfs_dir_stream(pl->dirfd);
	struct dirent *de;
	int rc = 0;

	if (!dir)
		return -errno;
	rewinddir(dir);
	d->min_cleaned = INT64_MAX;
	while ((de = readdir(dir))) {
		tfs_offset_t base;
		const char *suffix;

		if (de->d_name[0] == '.')
			continue;
		if (ends_with(de->d_name, TFS_SUFFIX_TMP)) {
			if (!pl->env.read_only)
				remove_file(pl, de->d_name, "stale temporary file");
			continue;
		}
		if (tfs_segment_parse_name(de->d_name, &base, &suffix) < 0)
			continue;
		if (ends_with(suffix, TFS_SUFFIX_DELETED)) {
			if (!pl->env.read_only)
				remove_file(pl, de->d_name, "deletion left by a previous run");
		} else if (ends_with(suffix, TFS_SUFFIX_CLEANED)) {
			if (base < d->min_cleaned)
				d->min_cleaned = base;
		} else if (ends_with(suffix, TFS_SUFFIX_SWAP)) {
			*have_swap = true;
		} else if (!strcmp(suffix, TFS_SUFFIX_LOG)) {
			rc = push_base(d, base);
			if (rc < 0)
				break;
		}
	}
	closedir(dir);
	return rc;
}

/* Step 1, second pass: .cleaned files and the .swap files of an interrupted swap
 * go; complete swaps are finished. Kafka's crash matrix (docs/cleaner.md §7). */
static int complete_swaps(struct tfs_plog *pl, struct dir_scan *d)
{
	DIR *dir = tfs_dir_stream(pl->dirfd);
	struct dirent *de;
	char **swaps = NULL;
	size_t nswaps = 0, cap = 0;
	int rc = 0;

	if (!dir)
		return -errno;
	rewinddir(dir);    /* a dup shares the position the first pass left at the end */
	while ((de = readdir(dir))) {
		tfs_offset_t base;
		const char *suffix;

		if (tfs_segment_parse_name(de->d_name, &base, &suffix) < 0)
			continue;
		if (ends_with(suffix, TFS_SUFFIX_CLEANED)) {
			remove_file(pl, de->d_name, "output of an interrupted cleaning pass");
		} else if (ends_with(suffix, TFS_SUFFIX_SWAP)) {
			if (base >= d->min_cleaned) {
				remove_file(pl, de->d_name, "part of an interrupted swap");
				continue;
			}
			if (nswaps == cap) {
				size_t ncap = cap ? cap * 2 : 8;
				char **p = realloc(swaps, ncap * sizeof(*p));
				if (!p) {
					rc = -ENOMEM;
					goto out;
				}
				swaps = p;
				cap = ncap;
			}
			if (!(swaps[nswaps] = strdup(de->d_name))) {
				rc = -ENOMEM;
				goto out;
			}
			nswaps++;
		}
	}
	/* A .swap .log replaces every original segment whose base lies in
	 * [its base, the next swap or original that starts past its last offset).
	 * The swap's own files are renamed into place last; its originals with
	 * other bases were already renamed .deleted or are removed here. */
	for (size_t i = 0; i < nswaps; i++) {
		tfs_offset_t base;
		const char *suffix;
		char final[PATH_CAP];

		tfs_segment_parse_name(swaps[i], &base, &suffix);
		if (!strcmp(suffix, ".log.swap")) {
			/* originals inside the swap's range other than its own base */
			struct tfs_segment *sw = NULL;
			char path[PATH_CAP];
			uint8_t hdr[TFS_BATCH_HEADER_BYTES];
			tfs_pos_t pos = 0;
			tfs_offset_t next = base;

			snprintf(path, sizeof(path), "%s/%s", pl->path, swaps[i]);
			rc = tfs_segment_open(pl->env.io, pl->env.fdcache, pl->path, base, 0, &sw);
			if (rc < 0)
				goto out;
			tfs_fdcache_slot_set_path(pl->env.fdcache, &sw->log, path);
			atomic_store(&sw->size, INT64_MAX);
			for (;;) {
				struct tfs_batch_header h;
				if (tfs_segment_read(sw, hdr, sizeof(hdr), pos) != (ssize_t)sizeof(hdr))
					break;
				if (tfs_batch_header_decode(hdr, sizeof(hdr), &h, NULL) < 0)
					break;
				next = tfs_batch_last_offset(&h) + 1;
				pos += (tfs_pos_t)tfs_batch_size(&h);
			}
			tfs_segment_unref(sw);
			for (size_t j = 0; j < d->nlogs; j++) {
				if (d->logs[j] > base && d->logs[j] < next) {
					static const char *const sfx[] = {
						TFS_SUFFIX_LOG, TFS_SUFFIX_INDEX, TFS_SUFFIX_TIMEINDEX,
						TFS_SUFFIX_TXNINDEX
					};
					for (size_t k = 0; k < sizeof(sfx) / sizeof(sfx[0]); k++) {
						char name[64];
						snprintf(name, sizeof(name), "%020" PRId64 "%s", d->logs[j], sfx[k]);
						remove_file(pl, name, "replaced by a completed swap");
					}
					d->logs[j] = -1;
				}
			}
		}
		snprintf(final, sizeof(final), "%.*s", (int)(strlen(swaps[i]) - strlen(TFS_SUFFIX_SWAP)),
		         swaps[i]);
		if (pl->env.read_only) {
			/* read the new segment where it is; its originals are left out */
			tfs_log_warn("recovery", "reading %s/%s in place of %s: a swap to finish "
			             "(read-only; a read-write mount finishes it)", pl->path, swaps[i], final);
			if (!strcmp(suffix, ".log.swap") && (rc = swap_override(d, base, swaps[i])) < 0)
				goto out;
		} else {
			rc = tfs_io_renameat(pl->env.io, pl->dirfd, swaps[i], pl->dirfd, final);
			if (rc < 0)
				goto out;
			tfs_log_info("recovery", "completed swap of %s/%s", pl->path, final);
		}
		if (!strcmp(suffix, ".log.swap")) {
			bool known = false;
			for (size_t j = 0; j < d->nlogs; j++)
				known |= d->logs[j] == base;
			if (!known && (rc = push_base(d, base)) < 0)
				goto out;
		}
	}
	if (nswaps && !pl->env.read_only)
		rc = tfs_io_fsync_dir(pl->env.io, pl->dirfd);
out:
	for (size_t i = 0; i < nswaps; i++)
		free(swaps[i]);
	free(swaps);
	closedir(dir);
	return rc;
}

/* Step 1, last part: .index / .timeindex files whose .log is gone (an interrupted
 * swap or retention renamed the .log first) are removed, as Kafka's loader does. */
static int remove_orphan_indexes(struct tfs_plog *pl, const struct dir_scan *d)
{
	DIR *dir = tfs_dir_stream(pl->dirfd);
	struct dirent *de;

	if (!dir)
		return -errno;
	rewinddir(dir);
	while ((de = readdir(dir))) {
		tfs_offset_t base;
		const char *suffix;
		bool known = false;

		if (tfs_segment_parse_name(de->d_name, &base, &suffix) < 0 ||
		    (strcmp(suffix, TFS_SUFFIX_INDEX) && strcmp(suffix, TFS_SUFFIX_TIMEINDEX) &&
		     strcmp(suffix, TFS_SUFFIX_TXNINDEX)))
			continue;
		for (size_t i = 0; i < d->nlogs && !known; i++)
			known = d->logs[i] == base;
		if (!known)
			remove_file(pl, de->d_name, "index without a .log");
	}
	closedir(dir);
	return 0;
}

/* The key-directory changes of one batch, held until the whole batch has
 * decoded: a batch whose fifth record is garbage must not have fed its first
 * four (they would pass for newer than what they replace). */
struct pending_keys {
	struct pending_key {
		struct tfs_slice key;       /* borrows the iterator's bytes */
		bool remove;
		struct tfs_keyinfo info;
	} *v;
	size_t n, cap;
};

/* A producer's transaction as the scan follows it: the first offset of its
 * open transaction, and the key changes of its records held until the marker
 * (a COMMIT feeds them, an ABORT drops them). Keys are copied: the iterator's
 * bytes go with the next batch. */
struct scan_txn {
	int64_t producer_id;
	tfs_offset_t first;             /* -1: no open transaction */
	struct pending_keys keys;       /* key.p: an offset into arena until fed */
	uint8_t *arena;
	size_t alen, acap;
};

/* What the scan of one partition carries from batch to batch. */
struct scan_ctx {
	uint8_t *buf;
	size_t cap;
	struct tfs_record_iter it;
	struct pending_keys keys;
	struct scan_txn *txn;           /* producers seen with transactional batches */
	size_t ntxn, captxn;
	size_t nopen;                   /* of which with an open transaction */
	struct tfs_tombs *tombs;        /* removals while one is (txn_tombs.h) */
};

/* Forgets the removals no open transaction's put can precede, as the appends
 * do (partition_log.c), when the set is due. */
static void tombs_maybe_prune(struct scan_ctx *sc)
{
	tfs_offset_t floor = INT64_MAX;

	if (!tfs_tombs_prune_due(sc->tombs))
		return;
	for (size_t i = 0; i < sc->ntxn; i++)
		if (sc->txn[i].first >= 0 && sc->txn[i].first < floor)
			floor = sc->txn[i].first;
	tfs_tombs_prune(&sc->tombs, floor);
}

static int pending_push(struct pending_keys *pk, struct tfs_slice key, bool remove,
                        const struct tfs_keyinfo *info)
{
	if (pk->n == pk->cap) {
		size_t ncap = pk->cap ? pk->cap * 2 : 256;
		struct pending_key *nv = realloc(pk->v, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		pk->v = nv;
		pk->cap = ncap;
	}
	pk->v[pk->n++] = (struct pending_key){ key, remove, *info };
	return 0;
}

static struct scan_txn *scan_txn_get(struct scan_ctx *sc, int64_t pid)
{
	for (size_t i = 0; i < sc->ntxn; i++)
		if (sc->txn[i].producer_id == pid)
			return &sc->txn[i];
	if (sc->ntxn == sc->captxn) {
		size_t ncap = sc->captxn ? sc->captxn * 2 : 4;
		struct scan_txn *p = realloc(sc->txn, ncap * sizeof(*p));
		if (!p)
			return NULL;
		sc->txn = p;
		sc->captxn = ncap;
	}
	sc->txn[sc->ntxn] = (struct scan_txn){ .producer_id = pid, .first = -1 };
	return &sc->txn[sc->ntxn++];
}

static void scan_txns_release(struct scan_ctx *sc)
{
	for (size_t i = 0; i < sc->ntxn; i++) {
		free(sc->txn[i].keys.v);
		free(sc->txn[i].arena);
	}
	free(sc->txn);
	tfs_tombs_clear(&sc->tombs);
}

/* Feeds one key change to the key directory: here, or on the feed's thread for
 * a large partition (started at its first large segment: the order holds).
 * While a transaction is open, a removal is noted, and a COMMIT's put of a key
 * removed after it is dropped (txn_tombs.h), as the appends do. */
static int feed_key(struct tfs_plog *pl, struct scan_ctx *sc, const struct pending_key *k,
                    bool committed)
{
	if (sc->nopen > 0 || sc->tombs) {
		uint64_t h = tfs_keydir_hash(k->key);
		if (committed && !k->remove && tfs_tombs_after(sc->tombs, k->key, h, k->info.offset))
			return 0;
		if (k->remove && sc->nopen > 0) {
			if (tfs_tombs_note(&sc->tombs, k->key, h, k->info.offset) < 0)
				return -ENOMEM;
			tombs_maybe_prune(sc);
		}
	}
	if (!pl->kdfeed) {
		if (k->remove)
			tfs_keydir_remove(pl->kd, k->key, k->info.offset);
		else if (tfs_keydir_put(pl->kd, k->key, &k->info) < 0)
			return -ENOMEM;
	} else if (tfs__kdfeed_add(pl->kdfeed, k->key, k->remove, &k->info) < 0) {
		return -ENOMEM;
	}
	return 0;
}

/* Holds a transactional batch's key changes (pk) on its producer until the
 * marker. */
static int txn_hold(struct scan_txn *t, const struct pending_keys *pk)
{
	for (size_t i = 0; i < pk->n; i++) {
		struct pending_key k = pk->v[i];
		if (t->alen + k.key.len > t->acap) {
			size_t ncap = t->acap ? t->acap : 4096;
			uint8_t *p;
			while (ncap < t->alen + k.key.len)
				ncap *= 2;
			if (!(p = realloc(t->arena, ncap)))
				return -ENOMEM;
			t->arena = p;
			t->acap = ncap;
		}
		memcpy(t->arena + t->alen, k.key.p, k.key.len);
		k.key.p = (const uint8_t *)(uintptr_t)t->alen;
		t->alen += k.key.len;
		if (pending_push(&t->keys, k.key, k.remove, &k.info) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The marker of t's transaction at offset marker: a COMMIT feeds the held key
 * changes, an ABORT drops them and notes the transaction on seg (its .txnindex
 * entry, the last stable offset being the first offset of the oldest other open
 * transaction, else the one past the marker - Kafka's rule). */
static int txn_end(struct tfs_plog *pl, struct scan_ctx *sc, struct scan_txn *t, int type,
                   struct tfs_segment *seg, tfs_offset_t marker)
{
	int rc = 0;

	if (type == TFS_CONTROL_COMMIT) {
		for (size_t i = 0; rc == 0 && i < t->keys.n; i++) {
			struct pending_key k = t->keys.v[i];
			k.key.p = t->arena + (uintptr_t)k.key.p;
			rc = feed_key(pl, sc, &k, true);
		}
	} else if (type == TFS_CONTROL_ABORT) {
		/* no data seen (the cleaner took it): the file's first offset, if it
		 * names this marker, is kept (tfs_segment_txnindex_match) */
		struct tfs_aborted_txn a = { t->producer_id, t->first >= 0 ? t->first : marker,
		                             marker, marker + 1 };
		for (size_t i = 0; i < sc->ntxn; i++)
			if (&sc->txn[i] != t && sc->txn[i].first >= 0 &&
			    sc->txn[i].first < a.last_stable_offset)
				a.last_stable_offset = sc->txn[i].first;
		rc = tfs_segment_add_aborted(seg, &a);
	}
	if (type == TFS_CONTROL_COMMIT || type == TFS_CONTROL_ABORT) {
		if (t->first >= 0 && --sc->nopen == 0)
			tfs_tombs_clear(&sc->tombs);
		t->first = -1;
		t->keys.n = 0;
		t->alen = 0;
	}
	return rc;
}

/* Decodes every record of one CRC-valid batch and only then feeds them to the
 * key directory, in order. A transactional batch's changes wait for its
 * transaction's COMMIT (README "Transactions"): an aborted or still open
 * transaction's records never name a key. TFS_ECORRUPT (nothing fed) with
 * *why, -ENOMEM. */
static int index_keys(struct tfs_plog *pl, struct scan_ctx *sc, struct tfs_segment *seg,
                      const uint8_t *batch, size_t size, const char **why)
{
	struct tfs_record_iter *it = &sc->it;
	struct pending_keys *pk = &sc->keys;
	struct tfs_record r;
	int ctype = -1;
	int rc = tfs_record_iter_reset(it, batch, size, why);

	if (rc < 0)
		return rc;
	pk->n = 0;
	while ((rc = tfs_record_iter_next(it, &r, why)) == 1) {
		if (it->h.attributes & TFS_ATTR_CONTROL) {
			ctype = tfs_control_type(&r);  /* markers carry no data key */
			continue;
		}
		if (r.key_null)
			continue;
		if (pending_push(pk, r.key, r.value_null,
		                 &(struct tfs_keyinfo){ r.offset, r.timestamp, (uint32_t)r.value.len }) < 0)
			return -ENOMEM;
	}
	if (rc < 0)
		return rc;
	if (it->h.producer_id >= 0 && (it->h.attributes & TFS_ATTR_TRANSACTIONAL)) {
		struct scan_txn *t = scan_txn_get(sc, it->h.producer_id);
		if (!t)
			return -ENOMEM;
		if (it->h.attributes & TFS_ATTR_CONTROL)
			return txn_end(pl, sc, t, ctype, seg, it->h.base_offset);
		if (t->first < 0) {
			t->first = it->h.base_offset;
			sc->nopen++;
		}
		return txn_hold(t, pk);
	}
	for (size_t i = 0; i < pk->n; i++)
		if ((rc = feed_key(pl, sc, &pk->v[i], false)) < 0)
			return rc;
	return 0;
}

/* Closes the unreadable region d of seg (bytes up to end, offsets up to next),
 * logs it and keeps it on the segment. */
static int add_damage(struct tfs_plog *pl, struct tfs_segment *seg, struct tfs_seg_damage *d,
                      tfs_pos_t end, tfs_offset_t next)
{
	struct tfs_seg_damage *nv = realloc(seg->damage, (seg->damage_count + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	d->end = end;
	d->next = next > d->first ? next : d->first;
	seg->damage = nv;
	seg->damage[seg->damage_count++] = *d;
	if (seg->corrupt_at < 0)
		seg->corrupt_at = d->pos;
	tfs_log_error("recovery", "corrupt sealed segment, left as it is: %s/%020" PRId64
	              ".log bytes %" PRId64 "..%" PRId64 " unreadable (%s): offsets %" PRId64
	              "..%" PRId64 " unknown", pl->path, seg->base_offset, d->pos, end - 1, d->why,
	              d->first, d->next - 1);
	if (!pl->uncleanable_reason) {
		char reason[REASON_CAP];
		snprintf(reason, sizeof(reason), "%s/%020" PRId64 ".log at position %" PRId64
		         ": %s; offsets %" PRId64 "..%" PRId64 " unreadable (topicctl repair)",
		         pl->path, seg->base_offset, d->pos, d->why, d->first, d->next - 1);
		pl->uncleanable_reason = strdup(reason);
	}
	if (d->first > pl->stale_below)
		pl->stale_below = d->first;
	return 0;
}

/* Step 2 for one segment. Returns 0 with the segment's size set; for the last
 * segment a torn tail is cut, in a sealed one unreadable regions are noted
 * (batch_reader.h). expect: the smallest base offset allowed; next_base: the next
 * segment's base offset (INT64_MAX for the last). */
static int scan_segment(struct tfs_plog *pl, struct tfs_segment *seg, bool last,
                        tfs_offset_t expect, tfs_offset_t next_base, struct scan_ctx *sc)
{
	struct tfs_batch_reader rd;
	tfs_pos_t pos = 0, file_size;
	const char *why = NULL;
	struct tfs_seg_damage d = { .pos = -1 };      /* the region being read through */
	int rc = 0;
	char reason[REASON_CAP];

	atomic_store(&seg->size, INT64_MAX);   /* reads are bounded by the file here */
	{
		int fd = tfs_fdcache_get(pl->env.fdcache, &seg->log);
		off_t end;
		if (fd < 0)
			return fd;
		end = lseek(fd, 0, SEEK_END);
		tfs_fdcache_put(pl->env.fdcache, &seg->log);
		if (end < 0)
			return -errno;
		file_size = end;
	}
	if (expect < seg->base_offset)
		expect = seg->base_offset;
	/* the feed's thread starts with the first large segment (the keys of the
	 * smaller ones before it are applied already, so the order holds) */
	if (file_size >= (tfs_pos_t)FEED_MIN_BYTES && !pl->kdfeed &&
	    (rc = tfs__kdfeed_start(pl->kd, &pl->kdfeed)) < 0)
		return rc;
	tfs_segment_reset_index(seg);
	tfs_batch_reader_init(&rd, tfs_segment_read_fn, seg, 0, file_size, RECOVERY_CHUNK, &sc->buf,
	                      &sc->cap);
	while ((pos = rd.pos) < file_size) {
		struct tfs_batch_frame f;
		enum tfs_batch_fate fate;

		rc = tfs_batch_reader_frame(&rd, &f);
		if (rc < 0)
			return rc;
		rc = 0;
		why = f.why;
		if (f.unsupported && d.pos < 0) {
			rc = TFS_EUNSUPPORTED;          /* magic 0/1 where a batch must start */
			break;
		}
		if (f.fate == TFS_FATE_GOOD && (rc = tfs_batch_reader_load(&rd, &f)) < 0)
			return rc;
		fate = f.fate;
		why = f.why;
		if (fate == TFS_FATE_GOOD)
			fate = tfs_batch_fate_offsets(&f.h, expect, next_base, &why);
		if (fate == TFS_FATE_GOOD) {
			rc = index_keys(pl, sc, seg, f.bytes, f.size, &why);
			if (rc == -ENOMEM || rc == TFS_EUNSUPPORTED)
				break;
			if (rc < 0)
				fate = TFS_FATE_SKIP;
		}
		rc = 0;
		if (fate != TFS_FATE_GOOD) {
			if (last && f.over_bound) {
				/* whole in the file: cutting it would lose records a broker
				 * wrote, so the partition is refused as it is */
				tfs_log_error("recovery", "%s/%020" PRId64 ".log at position %" PRId64
				              ": a batch larger than topicfs reads (%zu bytes at most); "
				              "nothing truncated, the partition is not opened", pl->path,
				              seg->base_offset, pos, TFS_MAX_BATCH_BYTES);
				return -EFBIG;
			}
			if (last)
				break;                  /* a torn tail starts here */
			if (d.pos < 0)
				d = (struct tfs_seg_damage){ .pos = pos, .first = expect, .why = why };
			if (fate == TFS_FATE_REST) {
				pos = file_size;
				break;
			}
			tfs_batch_reader_skip(&rd, &f);
			continue;
		}
		if (d.pos >= 0) {
			rc = add_damage(pl, seg, &d, pos, f.h.base_offset);
			if (rc < 0)
				return rc;
			d.pos = -1;
		}
		if (f.h.producer_id >= 0) {
			seg->has_producer_ids = true;   /* the cleaner reads producer state here */
			tfs__pstate_replay(pl, &f.h);
		}
		rc = tfs_segment_note_batch(seg, pos, f.size, f.h.base_offset,
		                            tfs_batch_last_offset(&f.h), f.h.max_timestamp);
		if (rc < 0)
			return rc;
		expect = tfs_batch_last_offset(&f.h) + 1;
		tfs_batch_reader_skip(&rd, &f);
	}
	if (rc == -ENOMEM || rc == TFS_EUNSUPPORTED) {
		if (rc == TFS_EUNSUPPORTED)
			tfs_log_error("recovery", "%s/%020" PRId64 ".log at %" PRId64 ": %s", pl->path,
			              seg->base_offset, pos, why ? why : "unsupported record format");
		return rc;
	}
	atomic_store(&seg->size, pos);
	if (!last) {
		if (d.pos >= 0)
			rc = add_damage(pl, seg, &d, file_size, next_base > expect ? next_base : expect);
		return rc;
	}
	if (pos == file_size)
		return 0;
	snprintf(reason, sizeof(reason), "%s/%020" PRId64 ".log at position %" PRId64 ": %s",
	         pl->path, seg->base_offset, pos, why ? why : "invalid batch");
	if (!pl->env.read_only) {
		tfs_log_warn("recovery", "truncated torn tail of %" PRId64 " bytes from %s",
		             file_size - pos, reason);
		return tfs_segment_truncate(seg, pos);
	}
	tfs_log_warn("recovery", "ignoring %" PRId64 " bytes of torn tail (read-only) of %s",
	             file_size - pos, reason);
	return 0;
}

static int count_stale(void *arg, struct tfs_slice key, const struct tfs_keyinfo *info,
                       uint64_t hash)
{
	struct { tfs_offset_t below; size_t n; } *c = arg;

	(void)key;
	(void)hash;
	c->n += info->offset < c->below;
	return 0;
}

int tfs__plog_recover(struct tfs_plog *pl)
{
	struct dir_scan d = { 0 };
	struct tfs_seglist *list = NULL;
	struct scan_ctx sc = { 0 };
	size_t n = 0;
	bool have_swap = false;
	tfs_offset_t expect = 0;
	int rc;

	tfs_record_iter_init(&sc.it);
	rc = list_dir(pl, &d, &have_swap);
	if (rc < 0)
		goto out;
	if (have_swap || d.min_cleaned != INT64_MAX) {
		rc = complete_swaps(pl, &d);       /* in memory only when read-only */
		if (rc < 0)
			goto out;
	}
	if (!pl->env.read_only) {
		rc = remove_orphan_indexes(pl, &d);
		if (rc < 0)
			goto out;
	}
	if (d.nlogs)
		qsort(d.logs, d.nlogs, sizeof(*d.logs), cmp_offset);
	list = tfs__seglist_alloc((int)d.nlogs + 1);
	if (!list) {
		rc = -ENOMEM;
		goto out;
	}
	list->count = 0;
	for (size_t i = 0; i < d.nlogs; i++) {
		struct tfs_segment *seg;
		if (d.logs[i] < 0)
			continue;
		rc = tfs_segment_open(pl->env.io, pl->env.fdcache, pl->path, d.logs[i],
		                      pl->cfg.index_interval_bytes, &seg);
		if (rc < 0)
			goto out;
		list->seg[list->count++] = seg;
		for (size_t k = 0; k < d.nswap_over; k++) {
			char path[PATH_CAP];
			if (d.swap_base[k] != d.logs[i])
				continue;
			snprintf(path, sizeof(path), "%s/%s", pl->path, d.swap_name[k]);
			rc = tfs_fdcache_slot_set_path(pl->env.fdcache, &seg->log, path);
			if (rc < 0)
				goto out;
		}
	}
	for (int i = 0; i < list->count; i++) {
		struct tfs_segment *seg = list->seg[i];
		bool last = i == list->count - 1;
		rc = scan_segment(pl, seg, last, expect,
		                  last ? INT64_MAX : list->seg[i + 1]->base_offset, &sc);
		if (rc < 0)
			goto out;
		if (seg->next_offset > expect)
			expect = seg->next_offset;
		if (seg->base_offset > expect)
			expect = seg->base_offset;
		n++;
		if (!pl->env.read_only && seg->corrupt_at < 0 &&
		    !tfs_segment_txnindex_match(seg, pl->dirfd)) {
			tfs_log_warn("recovery", "rebuilt .txnindex of %s/%020" PRId64 TFS_SUFFIX_LOG, pl->path,
			             seg->base_offset);
			rc = tfs_segment_write_txnindex(seg, pl->dirfd, "");
			if (rc < 0)
				goto out;
		}
		if (last) {
			/* as Kafka's recovery does, and its close: the newest timestamp
			 * of the active segment gets its entry */
			rc = tfs_segment_timeindex_final(seg);
			if (rc < 0)
				goto out;
		} else {
			seg->sealed = true;
			if (!pl->env.read_only && seg->corrupt_at < 0 && !tfs_segment_indexes_match(seg)) {
				tfs_log_warn("recovery", "rebuilt index of %s/%020" PRId64 TFS_SUFFIX_LOG, pl->path,
				             seg->base_offset);
				rc = tfs_segment_write_indexes(seg, pl->dirfd, false);
				if (rc < 0)
					goto out;
			}
		}
	}
	rc = pl->kdfeed ? tfs__kdfeed_finish(pl->kdfeed) : 0;
	pl->kdfeed = NULL;
	if (rc < 0)
		goto out;
	if (list->count == 0) {
		struct tfs_segment *seg = NULL;
		if (pl->env.read_only) {
			rc = TFS_EREADONLY;
			tfs_log_error("recovery", "%s has no segments and the mount is read-only", pl->path);
			goto out;
		}
		rc = tfs_segment_create(pl->env.io, pl->env.fdcache, pl->dirfd, pl->path, 0,
		                        pl->cfg.index_interval_bytes, true, &seg);
		if (rc < 0)
			goto out;
		list->seg[list->count++] = seg;
	}
	pl->segs = list;
	list = NULL;
	{
		struct tfs_segment *active = pl->segs->seg[pl->segs->count - 1];
		pl->end_offset = active->next_offset > expect ? active->next_offset : expect;
		if (active->next_offset == active->base_offset && active->base_offset > pl->end_offset)
			pl->end_offset = active->base_offset;
	}
	if (pl->stale_below > 0) {
		struct { tfs_offset_t below; size_t n; } c = { pl->stale_below, 0 };
		(void)tfs_keydir_scan(pl->kd, false, 0, count_stale, &c);
		tfs_log_error("recovery", "%s: %zu keys whose newest readable record precedes offset %"
		              PRId64 " may be stale and read EIO, and listing the partition ends with "
		              "EIO, until topicctl repair truncates the log at the damage", pl->path,
		              c.n, pl->stale_below);
	}
	tfs_log_info("recovery", "opened %s: %zu segments, offsets up to %" PRId64 ", %zu live keys",
	             pl->path, n, pl->end_offset, tfs_keydir_count(pl->kd));
out:
	if (pl->kdfeed) {
		tfs__kdfeed_finish(pl->kdfeed);
		pl->kdfeed = NULL;
	}
	tfs__seglist_put(list);
	tfs_record_iter_release(&sc.it);
	free(sc.buf);
	free(sc.keys.v);
	scan_txns_release(&sc);
	free(d.logs);
	for (size_t k = 0; k < d.nswap_over; k++)
		free(d.swap_name[k]);
	free(d.swap_name);
	free(d.swap_base);
	return rc;
}
