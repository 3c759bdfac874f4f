/* producer_ids.c - the producer id allocator (see producer_ids.h). */
#include "engine/producer/producer_ids.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/file_util.h"
#include "io/log.h"

#define FILE_MAX_BYTES 64

struct tfs_pids {
	struct tfs_io *io;
	int dirfd;
	pthread_mutex_t lock;
	int64_t next, reserved_end;   /* ids [next, reserved_end) may be handed out */
};

int tfs_pids_open(struct tfs_io *io, int dirfd, struct tfs_pids **out)
{
	struct tfs_pids *p;
	char *text = NULL, *end;
	size_t len;
	int rc;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->io = io;
	p->dirfd = dirfd;
	rc = tfs_file_read_all(io, dirfd, TFS_PIDS_FILE, FILE_MAX_BYTES, &text, &len);
	if (rc == 0) {
		long long v;
		errno = 0;
		v = strtoll(text, &end, 10);
		if (errno || end == text || (*end && *end != '\n') || v < 0) {
			tfs_log_error("pids", "%s does not hold a producer id: refusing to hand out "
			              "ids that may repeat", TFS_PIDS_FILE);
			rc = TFS_ECORRUPT;
		} else {
			p->next = p->reserved_end = v;
		}
	} else if (rc == -ENOENT) {
		rc = 0;
	}
	free(text);
	if (rc < 0) {
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void tfs_pids_close(struct tfs_pids *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int tfs_pids_next(struct tfs_pids *p, int64_t *id, int16_t *epoch)
{
	int rc = 0;

	pthread_mutex_lock(&p->lock);
	if (p->next == p->reserved_end) {
		char line[32];
		int64_t end;
		int n;
		if (p->reserved_end > INT64_MAX - TFS_PIDS_BLOCK) {
			rc = -EOVERFLOW;
			goto out;
		}
		end = p->reserved_end + TFS_PIDS_BLOCK;
		n = snprintf(line, sizeof(line), "%" PRId64 "\n", end);
		rc = tfs_file_replace(p->io, p->dirfd, TFS_PIDS_FILE, line, (size_t)n);
		if (rc < 0) {
			tfs_log_error("pids", "cannot reserve producer ids up to %" PRId64 ": %s", end,
			              tfs_strerror(rc));
			goto out;
		}
		p->reserved_end = end;
	}
	*id = p->next++;
	*epoch = 0;
out:
	pthread_mutex_unlock(&p->lock);
	return rc;
}
