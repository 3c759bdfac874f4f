/* node_groups.h - what the .groups/ nodes (node_groups.c) offer the rest of the
 * front end: a group offset file's position and lag, for its attributes and the
 * metrics. Threads: any. Errors: 0 or a negative errno / TFS_E* code. */
#ifndef TFS_FS_NODE_GROUPS_H
#define TFS_FS_NODE_GROUPS_H

#include <stdint.h>

#include "engine/log/lag.h"

struct tfs_mount;
struct tfs_node;

struct tfs_group_lag {
	int64_t committed;              /* the committed offset */
	int64_t commit_ms;              /* when it was committed */
	struct tfs_lag lag;             /* from committed on */
	int64_t lag_ms;                 /* tfs_lag_ms as of now */
};

/* The position and lag of the group offset file n (TFS_NODE_GROUP_FILE).
 * -ENOENT when the group has no offset there (or the topic is gone). */
int tfs_group_file_lag(struct tfs_mount *m, struct tfs_node *n, struct tfs_group_lag *out);

#endif
