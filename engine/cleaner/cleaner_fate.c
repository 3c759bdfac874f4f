/* cleaner_fate.c - the verdict on each record of a batch (cleaner_pass.c,
 * "Decisions for one batch"; docs/cleaner.md §6): record_fate is the one rule, which
 * the pass and its dry run (cleaner_dry_run.c) both ask, whether a record is
 * decided by its dead bit, by a map lookup or by its batch alone; the dry run's
 * observer is told each fate from here. */
#include <errno.h>
#include <stdlib.h>

#include "engine/cleaner/cleaner_internal.h"

#define DECISIONS_INITIAL_CAP 64

static int reserve_decisions(struct tfs__cleaner_ctx *x, size_t n)
{
	size_t ncap = x->rv_cap ? x->rv_cap : DECISIONS_INITIAL_CAP;
	struct tfs__rec_verdict *p;

	if (n <= x->rv_cap)
		return 0;
	while (ncap < n)
		ncap *= 2;
	p = realloc(x->rv, ncap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	x->rv = p;
	x->rv_cap = ncap;
	return 0;
}

/* Whether record_fate must be told if the map holds a newer offset for the key. */
static bool fate_needs_map(const struct tfs__batch_rules *br, tfs_offset_t latest,
                           tfs_offset_t offset, bool keyless)
{
	return !br->drop_records && !br->control && offset <= latest && !keyless;
}

/* The verdict on one record: what the pass does with it. Every record the pass
 * keeps or drops, and every fate its dry run reports, is decided here; the dead
 * bits and the map lookups only answer `superseded` (the map holds a newer offset
 * for the record's key: read only when fate_needs_map), and filter_batch's
 * whole-batch shortcuts only skip batches whose every record this function would
 * keep, or drop, alike. */
static enum tfs_cleaner_fate record_fate(const struct tfs__batch_rules *br, tfs_offset_t latest,
                                         tfs_offset_t offset, bool keyless, bool tombstone,
                                         bool superseded)
{
	if (br->drop_records)
		return br->control ? TFS_FATE_DROP_TOMBSTONE : TFS_FATE_DROP;
	if (br->control)            /* a marker stays until it may go, then follows horizons */
		return br->can_discard ? TFS_FATE_KEEP_TOMBSTONE : TFS_FATE_KEEP;
	if (offset > latest)
		return TFS_FATE_NOT_CLEANABLE;      /* past the map: the next pass decides */
	if (keyless)
		return TFS_FATE_KEEP_KEYLESS;
	if (superseded)
		return TFS_FATE_DROP;
	if (tombstone)
		return br->retain_deletes ? TFS_FATE_KEEP_TOMBSTONE : TFS_FATE_DROP_TOMBSTONE;
	return TFS_FATE_KEEP;
}

bool tfs_cleaner_fate_keeps(enum tfs_cleaner_fate f)
{
	return f == TFS_FATE_KEEP || f == TFS_FATE_KEEP_TOMBSTONE || f == TFS_FATE_KEEP_KEYLESS ||
	       f == TFS_FATE_NOT_CLEANABLE;
}

/* Decides every record of a batch (x->rv[0..rv_count)): fills x->rv[].fate and
 * .keep and returns 0 with *kept and *tombstone_kept, or an error. Records the map
 * must decide are hashed and prefetched on the way through and looked up
 * afterwards, so that their cache misses overlap. */
int tfs__decide_records(struct tfs__cleaner_ctx *x, const struct tfs__group_ctx *g,
                        const struct tfs_batch_header *h, const uint8_t *b,
                        const struct tfs__batch_rules *br, bool use_bits, int32_t *kept,
                        bool *tombstone_kept)
{
	const struct tfs__verdicts *v = &x->v;
	struct tfs_record r;
	const char *why = NULL;
	size_t n = 0;
	int rc;

	*kept = 0;
	*tombstone_kept = false;
	x->rv_count = 0;
	rc = tfs_record_iter_reset(&x->it, b, tfs_batch_size(h), &why);
	while (rc == 0 && (rc = tfs_record_iter_next(&x->it, &r, &why)) == 1) {
		struct tfs__rec_verdict *rv;

		rc = reserve_decisions(x, n + 1);
		if (rc < 0)
			return rc;
		rv = &x->rv[n];
		rv->offset = r.offset;
		rv->tombstone = r.value_null && !br->control;
		rv->record_bytes = (r.key_null ? 0 : r.key.len) + (r.value_null ? 0 : r.value.len);
		rv->lookup = false;
		if (!fate_needs_map(br, g->latest, r.offset, r.key_null)) {
			rv->fate = record_fate(br, g->latest, r.offset, r.key_null, rv->tombstone, false);
		} else if (use_bits && tfs__verdict_covers(v, r.offset)) {
			rv->fate = record_fate(br, g->latest, r.offset, false, rv->tombstone,
			                       tfs__bit_get(v->dead, (uint64_t)(r.offset - v->start)));
		} else {
			rv->fp = tfs_offset_map_fingerprint(r.key);
			rv->lookup = true;
			tfs_offset_map_prefetch(x->map, rv->fp);
		}
		n++;
	}
	if (rc < 0)
		return rc;
	x->rv_count = n;
	for (size_t i = 0; i < n; i++) {
		struct tfs__rec_verdict *rv = &x->rv[i];
		if (rv->lookup)
			rv->fate = record_fate(br, g->latest, rv->offset, false, rv->tombstone,
			                       rv->offset < tfs_offset_map_get_fp(x->map, rv->fp));
		rv->keep = tfs_cleaner_fate_keeps(rv->fate);
		if (rv->keep) {
			(*kept)++;
			*tombstone_kept |= rv->tombstone;
		}
	}
	return 0;
}

/* Tells the dry run's observer the fate of every record decided in x->rv.
 * producer_state: the batch stays (empty) only as its producer's last. */
void tfs__report_fates(const struct tfs__cleaner_ctx *x, const struct tfs__pass_in *in,
                       const struct tfs__batch_rules *br, bool producer_state)
{
	for (size_t i = 0; i < x->rv_count; i++) {
		const struct tfs__rec_verdict *rv = &x->rv[i];
		struct tfs_cleaner_record_fate f = {
			.offset = rv->offset, .fate = rv->fate, .why = TFS_NC_NONE,
			.tombstone = rv->tombstone, .record_bytes = rv->record_bytes,
		};
		if (f.fate == TFS_FATE_NOT_CLEANABLE)
			f.why = TFS_NC_BUFFER_FULL;
		if (f.fate == TFS_FATE_KEEP_TOMBSTONE) {
			f.horizon_stamped = br->has_horizon;
			f.horizon_ms = br->has_horizon ? br->horizon :
			               tfs__sat_add(in->now_ms, in->cfg.delete_retention_ms);
		}
		if (producer_state && !rv->keep)
			f.fate = TFS_FATE_KEEP_PRODUCER_STATE;
		in->fate_fn(in->fate_arg, &f);
	}
}
