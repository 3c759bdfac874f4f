/* plog_keyphase.c - the key directory's phase of group commit (docs/engine.md
 * §3), and the waits of the group-commit queue.
 *
 * A leader writes and publishes its group (partition_log.c, commit_group),
 * hands the queue on, then brings the group's key changes into the key
 * directory here, shard by shard in ticket order, while the next leader writes.
 * The group's waiters are answered after it (partition_log.c, submit).
 */
#include <errno.h>
#include <stdlib.h>

#include "engine/log/plog_internal.h"
#include "io/log.h"

/* How long a wait in the queue spins before it sleeps (tfs__q_wait). */
#define QUEUE_SPIN_US 50
#define QUEUE_SPIN_CHECK 64             /* pauses between two looks at the clock */

struct tfs__kops_buf tfs__kops_take(struct tfs_plog *pl)
{
	struct tfs__kops_buf b = { NULL, 0 };

	for (size_t i = 0; i < sizeof(pl->kops_idle) / sizeof(pl->kops_idle[0]); i++) {
		if (pl->kops_idle[i]) {
			b = (struct tfs__kops_buf){ pl->kops_idle[i], pl->kops_idle_cap[i] };
			pl->kops_idle[i] = NULL;
			break;
		}
	}
	return b;
}

/* Gives b back to the idle ones, or frees it when they are all there. Under
 * q_lock. */
void tfs__kops_give(struct tfs_plog *pl, struct tfs__kops_buf b)
{
	for (size_t i = 0; b.ops && i < sizeof(pl->kops_idle) / sizeof(pl->kops_idle[0]); i++) {
		if (!pl->kops_idle[i]) {
			pl->kops_idle[i] = b.ops;
			pl->kops_idle_cap[i] = b.cap;
			return;
		}
	}
	free(b.ops);
}

/* Lists the key-directory changes of a written group (n waiters from head) in
 * b, in offset order: every keyed record of every unit written, but not a
 * transaction's, whose keys come with its COMMIT marker. Hashed here, before
 * any lock is taken. The number of changes, or -ENOMEM. */
static ssize_t kops_list(struct tfs__kops_buf *b, struct tfs__waiter *head, size_t n)
{
	struct tfs__waiter *w;
	size_t k, nrecs = 0, nops = 0;

	for (w = head, k = 0; k < n; k++, w = k < n ? w->next : NULL)
		nrecs += w->skip ? 0 : w->count;
	if (nrecs > b->cap) {
		struct tfs_keydir_op *p = realloc(b->ops, nrecs * sizeof(*p));
		if (!p)
			return -ENOMEM;
		b->ops = p;
		b->cap = nrecs;
	}
	for (w = head, k = 0; k < n; k++, w = k < n ? w->next : NULL) {
		bool txn = w->pre && (w->pre->txn_data || w->pre->marker);
		for (size_t i = 0; !w->skip && !txn && i < w->count; i++) {
			const struct tfs_append_rec *r = &w->recs[i];
			if (r->key_null)
				continue;
			b->ops[nops++] = (struct tfs_keydir_op){
				.key = r->key,
				.hash = w->pre ? w->pre->hashes[i] : tfs_keydir_hash(r->key),
				.remove = r->value_null,
				.info = { w->first + (tfs_offset_t)i,
				          w->pre && w->pre->timestamps ? w->pre->timestamps[i] : w->timestamp,
				          (uint32_t)r->value.len },
			};
		}
	}
	return (ssize_t)nops;
}

/* A COMMIT's key changes, but those below the log start (start): a
 * DeleteRecords past the transaction's first records (Kafka allows it up to the
 * log end) removed them for good, and a COMMIT must not bring them back. The
 * changes are in offset order, so what stays is a suffix. Under pl->kd_lock
 * (write). */
static int apply_committed(struct tfs_plog *pl, const struct tfs_keydir_op *ops, size_t n,
                           tfs_offset_t start, bool note)
{
	size_t skip = 0;
	int rc = 0;

	while (skip < n && ops[skip].info.offset < start)
		skip++;
	if (!pl->tombs && !note)
		return tfs_keydir_apply(pl->kd, ops + skip, n - skip);
	/* a put of a key removed after it stays out (txn_tombs.h); the
	 * transaction's own removals are noted for the markers after it, in this
	 * group or later, of the others open while it was written */
	for (size_t i = skip; i < n; i++) {
		const struct tfs_keydir_op *op = &ops[i];
		if (!op->remove && tfs_tombs_after(pl->tombs, op->key, op->hash, op->info.offset))
			continue;
		if (tfs_keydir_apply(pl->kd, op, 1) < 0)
			rc = -ENOMEM;
		else if (op->remove && note &&
		         tfs_tombs_note(&pl->tombs, op->key, op->hash, op->info.offset) < 0)
			rc = -ENOMEM;
	}
	return rc;
}

/* A key-directory update failed: the directory misses records of the log from
 * now on. Set before the shard's turn is passed on and before the group's
 * waiters are answered, so that no read answered after either takes the
 * directory's word for a key it missed (tfs_plog_lookup). */
static void kd_fail(struct tfs_plog *pl)
{
	if (!atomic_exchange(&pl->kd_failed, true))
		tfs_log_error("plog", "out of memory indexing keys of %s; reads by key fail "
		              "with EIO until a remount rebuilds the key directory", pl->path);
}

/* Notes the group's removals (ops[0, n)) while a transaction is open. */
static int note_removals(struct tfs_plog *pl, const struct tfs_keydir_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ops[i].remove && tfs_tombs_note(&pl->tombs, ops[i].key, ops[i].hash,
		                                    ops[i].info.offset) < 0)
			return -ENOMEM;
	return 0;
}

/* A hand-over in the queue happened (under q_lock, before its signal). */
void tfs__q_bump(struct tfs_plog *pl)
{
	atomic_fetch_add_explicit(&pl->q_seq, 1, memory_order_release);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* pthread_cond_wait(cond, &pl->q_lock) for the queue's waits, but one thread
 * of the partition at a time first spins, up to QUEUE_SPIN_US, for the next
 * hand-over (q_seq). With two writers, every group waits for one (the
 * leadership, its key-directory turn), and it comes within the other's work on
 * a batch, ~0.1 ms; waking a sleeping thread costs more than that on the VMs
 * measured (0.2 ms, `perf sched latency`), and it would be paid on each
 * hand-over. A second waiter sleeps at once, so many writers do not spend the
 * cores the leader needs. Like pthread_cond_wait it may return early; callers
 * wait in a loop. */
void tfs__q_wait(struct tfs_plog *pl, pthread_cond_t *cond)
{
	unsigned seen = atomic_load_explicit(&pl->q_seq, memory_order_relaxed);

	if (!atomic_exchange_explicit(&pl->q_spinning, true, memory_order_acquire)) {
		int64_t until = tfs_mono_us() + QUEUE_SPIN_US;

		pthread_mutex_unlock(&pl->q_lock);
		for (unsigned i = 1; atomic_load_explicit(&pl->q_seq, memory_order_acquire) == seen;
		     i++) {
			cpu_relax();
			if (i % QUEUE_SPIN_CHECK == 0 && tfs_mono_us() > until)
				break;
		}
		atomic_store_explicit(&pl->q_spinning, false, memory_order_release);
		pthread_mutex_lock(&pl->q_lock);
	}
	/* a hand-over bumps q_seq under q_lock before it signals: one after this
	 * look finds us waiting */
	if (atomic_load_explicit(&pl->q_seq, memory_order_relaxed) == seen)
		pthread_cond_wait(cond, &pl->q_lock);
}

/* Waits, under q_lock, for shard s's turn to take ticket's changes. */
static void kd_turn_wait(struct tfs_plog *pl, unsigned s, uint64_t ticket)
{
	pthread_mutex_lock(&pl->q_lock);
	while (pl->kd_done[s] != ticket)
		tfs__q_wait(pl, &pl->kd_cond);
	pthread_mutex_unlock(&pl->q_lock);
}

/* Hands shards [from, to) on to the ticket after this one. */
static void kd_turn_pass(struct tfs_plog *pl, unsigned from, unsigned to, uint64_t ticket)
{
	pthread_mutex_lock(&pl->q_lock);
	for (unsigned s = from; s < to; s++)
		pl->kd_done[s] = ticket + 1;
	tfs__q_bump(pl);
	pthread_cond_broadcast(&pl->kd_cond);
	pthread_mutex_unlock(&pl->q_lock);
}

/* The second phase of a group commit: the key directory learns what the group
 * (n waiters from head, written and published by commit_group; nothing if it
 * failed, written < 0) wrote, after every group before it (ticket order), so
 * that a key's changes reach it in offset order; meanwhile the next leader
 * encodes, writes and publishes (pl->lock, which this phase does not hold but
 * to read the log start for a COMMIT). Its waiters are answered after this, so
 * a read after an acknowledgement finds the record, and a reader racing it
 * finds the old record or the new one, under the key's shard lock.
 *
 * Shard by shard: the group takes shard 0 at its turn, then shard 1 at its
 * turn, while the group after it takes shard 0: two groups' changes go in on
 * two cores. A key lives in one shard, so its changes still arrive in offset
 * order. A group with transactional work (a COMMIT's keys, removals noted for
 * an open transaction, the noted set to clear or prune) holds every shard at
 * once, so that a COMMIT's keys become visible together and the noted set
 * (under all the shard locks) sees one order.
 *
 * Called without q_lock; takes it to wait for each turn. ticket NULL: no turn
 * to wait for, the caller being an exclusive request's (after tfs__keydir_drain)
 * that wrote a group of its own. */
void tfs__keydir_phase(struct tfs_plog *pl, struct tfs__waiter *head, size_t n,
                         int written, const uint64_t *ticket, struct tfs__kops_buf *b,
                         const struct tfs__txn_marks *marks)
{
	struct tfs__waiter *w;
	ssize_t nops = written < 0 ? 0 : kops_list(b, head, n);
	size_t ops = nops > 0 ? (size_t)nops : 0;
	bool commits = false, whole;
	tfs_offset_t start = 0;
	size_t k;

	if (nops < 0)
		kd_fail(pl);                    /* no memory for the group's changes */
	for (w = head, k = 0; written >= 0 && k < n; k++, w = k < n ? w->next : NULL)
		commits |= !w->skip && w->pre && w->pre->marker && w->pre->commit;
	if (commits) {
		/* only an exclusive request moves the start, and none runs before this
		 * group is in the directory (tfs__keydir_drain) */
		pthread_rwlock_rdlock(&pl->lock);
		start = tfs__plog_start(pl);
		pthread_rwlock_unlock(&pl->lock);
	}
	if (ticket)
		kd_turn_wait(pl, 0, *ticket);
	pthread_rwlock_wrlock(&pl->kd_lock[0]);
	/* every group before this one is done with the noted set: a group that
	 * changes it holds shard 0's turn until it is through */
	whole = commits || marks->during || pl->tombs;
	if (!whole) {
		for (unsigned s = 0; s < TFS_KEYDIR_SHARDS; s++) {
			if (s > 0) {
				if (ticket)
					kd_turn_wait(pl, s, *ticket);
				pthread_rwlock_wrlock(&pl->kd_lock[s]);
			}
			if (ops > 0 && tfs_keydir_apply_shard(pl->kd, s, b->ops, ops) < 0)
				kd_fail(pl);
			pthread_rwlock_unlock(&pl->kd_lock[s]);
			if (ticket)
				kd_turn_pass(pl, s, s + 1, *ticket);
		}
		return;
	}
	/* Every shard's turn, then every shard's lock: no shard lock is held while
	 * q_lock is taken (docs/engine.md §4). Shard 0's turn keeps it ours while
	 * its lock is let go, and what `whole` read with it: only a whole group
	 * changes the noted set, and it passes shard 0's turn last. */
	if (ticket) {
		pthread_rwlock_unlock(&pl->kd_lock[0]);
		for (unsigned s = 1; s < TFS_KEYDIR_SHARDS; s++)
			kd_turn_wait(pl, s, *ticket);
		pthread_rwlock_wrlock(&pl->kd_lock[0]);
	}
	for (unsigned s = 1; s < TFS_KEYDIR_SHARDS; s++)
		pthread_rwlock_wrlock(&pl->kd_lock[s]);

	if (ops > 0 && tfs_keydir_apply(pl->kd, b->ops, ops) < 0)
		kd_fail(pl);
	if (ops > 0 && marks->during && note_removals(pl, b->ops, ops) < 0)
		kd_fail(pl);
	/* markers last: a COMMIT's keys become visible with it */
	for (w = head, k = 0; commits && k < n; k++, w = k < n ? w->next : NULL) {
		if (!w->skip && w->pre && w->pre->marker && w->pre->commit &&
		    apply_committed(pl, w->pre->txn_ops, w->pre->txn_nops, start,
		                    marks->during) < 0)
			kd_fail(pl);
	}
	if (written >= 0 && !marks->after)
		tfs_tombs_clear(&pl->tombs);
	else if (tfs_tombs_prune_due(pl->tombs))
		/* a transaction left open for long must not make every removal of
		 * the partition stay: only those a pending put may precede */
		tfs_tombs_prune(&pl->tombs, marks->floor);
	tfs__plog_kd_unlock(pl);
	if (ticket)
		kd_turn_pass(pl, 0, TFS_KEYDIR_SHARDS, *ticket);
}

/* Waits until every group written so far is in the key directory, so that an
 * exclusive request (a swap, retention, append_onto) finds it whole. As the
 * leader, under q_lock: no group starts meanwhile. Shards take each group in
 * index order, so the last shard's turn is the last to come. */
void tfs__keydir_drain(struct tfs_plog *pl)
{
	while (pl->kd_done[TFS_KEYDIR_SHARDS - 1] != pl->kd_issued)
		pthread_cond_wait(&pl->kd_cond, &pl->q_lock);
}
