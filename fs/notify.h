/* notify.h - the one thread that tells the kernel to drop what it cached.
 *
 * Owns: a queue of pending invalidations and the thread that sends them.
 *
 * Why a thread: libfuse's rule (doc/README.notifications) is that notifications
 * must not be sent from inside a request handler or under a lock a handler needs;
 * an inval_entry sent from a handler deadlocks against the kernel's directory
 * lock. Handlers therefore only queue (never block on the kernel), and this thread
 * sends, in order, holding none of the fs locks.
 *
 * Only inode invalidations exist. Entry invalidations are not needed: topicfs
 * never lets the kernel cache a negative lookup (ENOENT replies carry no entry),
 * and every name change goes through the kernel's own unlink/rename/create paths,
 * which update its dentries. That also makes tfs_notifier_drain safe to call from
 * a handler: fuse_reverse_inval_inode takes no lock a request may hold (it bumps
 * the attribute version and, with data, drops clean pages; writeback cache is off,
 * so no dirty page ever waits on us).
 *
 * Invariants: (1) a nodeid is queued at most once (later requests merge into the
 *   pending one, data-or-not ORed); (2) everything queued before
 *   tfs_notifier_drain returned has been sent; (3) the thread never calls into the
 *   engine or the node table, and holds no lock while it sends.
 *
 * -ENOENT from the kernel ("not cached") is normal and ignored.
 * Threads: queue from any thread. Errors: 0 or a negative errno.
 */
#ifndef TFS_FS_NOTIFY_H
#define TFS_FS_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

struct fuse_session;
struct tfs_notifier;

/* Starts the thread; se is borrowed until tfs_notifier_stop. Caller owns *out. */
int tfs_notifier_start(struct fuse_session *se, struct tfs_notifier **out);
/* Sends what is queued, stops the thread and frees. NULL ok. */
void tfs_notifier_stop(struct tfs_notifier *n);

/* The node's attributes (size, mtime, mode) changed: the kernel must ask again.
 * With data = true its cached pages are dropped as well. */
void tfs_notify_inode(struct tfs_notifier *n, uint64_t nodeid, int data);
/* Waits until everything queued so far has been sent: a handler whose change must
 * be visible when its syscall returns (a .put naming cached keys, a chmod of a
 * topic) queues, then drains before replying. Hold no lock while draining. */
void tfs_notifier_drain(struct tfs_notifier *n);

/* Notifications sent so far (metrics). */
uint64_t tfs_notifier_sent(struct tfs_notifier *n);

#endif
