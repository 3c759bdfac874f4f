/* unlink_later.c - unlinking files on a background thread.
 *
 * Freeing a large file's blocks is slow (tens of milliseconds for a 100 MB
 * segment on ext4 with discard), and the last owner of a deleted segment can be a
 * cleaning pass or a reader's thread. Kafka defers segment deletion to its
 * scheduler for the same reason. Here the context starts one thread on first use;
 * it takes paths off a FIFO and unlinks them through tfs_io_unlinkat, so fault
 * specs still see every unlink.
 *
 * Inline instead: with a fault spec set (a crash sweep moves its crash point one
 * operation at a time and needs one order of operations), in a process forked
 * from the one that started the thread (the child has no such thread, and its
 * copy of the queue lock may be held), and when memory or a thread is short.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io_internal.h"
#include "io/log.h"

struct tfs__unlink_item {
	struct tfs__unlink_item *next;
	char path[];
};

static void unlink_now(struct tfs_io *io, const char *path)
{
	int rc = tfs_io_unlinkat(io, AT_FDCWD, path, 0);

	/* gone already is fine; anything else stays for recovery at the next open,
	 * which deletes every *.deleted file */
	if (rc < 0 && rc != -ENOENT)
		tfs_log_warn("io", "cannot unlink %s: %s", path, strerror(-rc));
}

static void *unlink_main(void *arg)
{
	struct tfs_io *io = arg;

	pthread_mutex_lock(&io->later_lock);
	for (;;) {
		struct tfs__unlink_item *it = io->later_head;

		if (!it) {
			if (io->later_stop)
				break;
			pthread_cond_wait(&io->later_work, &io->later_lock);
			continue;
		}
		io->later_head = it->next;
		if (!io->later_head)
			io->later_tail = NULL;
		pthread_mutex_unlock(&io->later_lock);
		unlink_now(io, it->path);
		free(it);
		pthread_mutex_lock(&io->later_lock);
		io->later_done++;
		pthread_cond_broadcast(&io->later_idle);
	}
	pthread_mutex_unlock(&io->later_lock);
	return NULL;
}

/* True when the thread was started, by this process. The acquire pairs with the
 * release store in tfs_io_unlink_later, so later_pid is the one written before it. */
static bool thread_here(struct tfs_io *io)
{
	return atomic_load_explicit(&io->later_started, memory_order_acquire) &&
	       io->later_pid == getpid();
}

/* True when this process may use the queue: the thread runs here or is not
 * started yet. */
static bool queue_usable(struct tfs_io *io)
{
	return !atomic_load_explicit(&io->later_started, memory_order_acquire) ||
	       thread_here(io);
}

void tfs_io_unlink_later(struct tfs_io *io, const char *path)
{
	size_t len = strlen(path) + 1;
	struct tfs__unlink_item *it;

	if (io->fault_ops || !queue_usable(io))
		goto inline_unlink;
	it = malloc(sizeof(*it) + len);
	if (!it)
		goto inline_unlink;
	memcpy(it->path, path, len);
	it->next = NULL;
	pthread_mutex_lock(&io->later_lock);
	if (!atomic_load_explicit(&io->later_started, memory_order_relaxed)) {
		if (pthread_create(&io->later_thread, NULL, unlink_main, io) != 0) {
			pthread_mutex_unlock(&io->later_lock);
			free(it);
			goto inline_unlink;
		}
		io->later_pid = getpid();
		/* pairs with the acquire loads in queue_usable and thread_here */
		atomic_store_explicit(&io->later_started, true, memory_order_release);
	}
	if (io->later_tail)
		io->later_tail->next = it;
	else
		io->later_head = it;
	io->later_tail = it;
	io->later_queued++;
	pthread_cond_signal(&io->later_work);
	pthread_mutex_unlock(&io->later_lock);
	return;
inline_unlink:
	unlink_now(io, path);
}

void tfs_io_unlink_drain(struct tfs_io *io)
{
	uint64_t target;

	if (!thread_here(io))
		return;
	pthread_mutex_lock(&io->later_lock);
	target = io->later_queued;
	while (io->later_done < target)
		pthread_cond_wait(&io->later_idle, &io->later_lock);
	pthread_mutex_unlock(&io->later_lock);
}

void tfs__unlink_later_init(struct tfs_io *io)
{
	pthread_mutex_init(&io->later_lock, NULL);
	pthread_cond_init(&io->later_work, NULL);
	pthread_cond_init(&io->later_idle, NULL);
}

void tfs__unlink_later_destroy(struct tfs_io *io)
{
	if (thread_here(io)) {
		pthread_mutex_lock(&io->later_lock);
		io->later_stop = true;
		pthread_cond_signal(&io->later_work);
		pthread_mutex_unlock(&io->later_lock);
		pthread_join(io->later_thread, NULL);   /* it empties the queue first */
	}
	pthread_cond_destroy(&io->later_idle);
	pthread_cond_destroy(&io->later_work);
	pthread_mutex_destroy(&io->later_lock);
}
