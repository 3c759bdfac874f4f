/* kafka_door.c - the mount's side of the Kafka listener (see kafka_door.h). */
#include "fs/kafka_door.h"

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fs/fuse_ll.h"
#include "fs/history_fate.h"
#include "fs/inode.h"
#include "fs/keyname.h"
#include "fs/mount.h"
#include "fs/notify.h"
#include "fs/readcache.h"
#include "fs/scratch.h"
#include "io/log.h"

/* The kernel's cached attributes of the n keys (data too, with data) and the
 * partition's listing go, and are sent; ids has room for n. Returns the
 * partition's node (tfs_inode_put it) or NULL. */
static struct tfs_node *drop_cached(struct tfs_mount *m, struct tfs_topic *t, int32_t partition,
                                    const struct tfs_slice *keys, size_t n, uint64_t *ids,
                                    int data)
{
	struct tfs_node_ident pid = { .kind = TFS_NODE_PARTITION, .topic = t,
	                              .topic_name = tfs_topic_name(t), .partition = partition };
	size_t found = tfs_inode_find_keys(m->inodes, t, tfs_topic_name(t), partition, keys, n, ids);
	struct tfs_node *pn;

	for (size_t i = 0; i < found; i++)
		tfs_notify_inode(m->notifier, ids[i], data);
	pn = tfs_inode_find(m->inodes, &pid);
	if (pn)
		tfs_notify_inode(m->notifier, pn->nodeid, 1);   /* its listing changed */
	tfs_notifier_drain(m->notifier);
	return pn;
}

/* Keys a client wrote: their cached attributes go (the .put path's way), and the
 * names of those a tombstone removed leave the kernel's dentry cache. */
static void door_records(void *arg, struct tfs_topic *t, int32_t partition,
                         const struct tfs_append_rec *recs, size_t count)
{
	struct tfs_mount *m = arg;
	struct tfs_slice *keys = calloc(count ? count : 1, sizeof(*keys));
	uint64_t *ids = malloc(count * sizeof(*ids));
	struct tfs_node *pn;
	size_t nkeys = 0;

	if (!keys || !ids) {
		tfs_log_error("fs", "%s/%d: cannot drop cached keys a client wrote: out of memory",
		              tfs_topic_name(t), (int)partition);
		free(keys);
		free(ids);
		return;
	}
	for (size_t i = 0; i < count; i++)
		if (!recs[i].key_null)
			keys[nkeys++] = recs[i].key;
	pn = drop_cached(m, t, partition, keys, nkeys, ids, 0);
	for (size_t i = 0; pn && m->se && i < count; i++) {
		char name[TFS_KEYNAME_MAX + 1];
		ssize_t len;
		if (recs[i].key_null || !recs[i].value_null)
			continue;
		len = tfs_keyname_encode(recs[i].key, name, sizeof(name));
		if (len > 0)
			fuse_lowlevel_notify_inval_entry(m->se, pn->nodeid, name, (size_t)len);
	}
	tfs_inode_put(m->inodes, pn);
	free(keys);
	free(ids);
}

void tfs_kafka_door_keys_gone(struct tfs_mount *m, struct tfs_topic *t, int32_t partition,
                              const struct tfs_slice *keys, size_t n, bool entries)
{
	uint64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	struct tfs_node *pn = drop_cached(m, t, partition, keys, ids ? n : 0, ids, 1);

	for (size_t i = 0; entries && pn && m->se && i < n; i++) {
		char name[TFS_KEYNAME_MAX + 1];
		ssize_t len = tfs_keyname_encode(keys[i], name, sizeof(name));
		if (len > 0)
			fuse_lowlevel_notify_inval_entry(m->se, pn->nodeid, name, (size_t)len);
	}
	tfs_inode_put(m->inodes, pn);
	free(ids);
}

static void door_records_deleted(void *arg, struct tfs_topic *t, int32_t partition,
                                 const struct tfs_slice *keys, size_t n)
{
	tfs_kafka_door_keys_gone(arg, t, partition, keys, n, true);
}

static void door_topic_created(void *arg, const char *name)
{
	struct tfs_mount *m = arg;

	(void)name;
	tfs_notify_inode(m->notifier, FUSE_ROOT_ID, 1);     /* its listing and link count */
	tfs_notifier_drain(m->notifier);
}

/* As rmdir does after a deletion, and the kernel forgets the name. */
static void door_topic_deleted(void *arg, struct tfs_topic *t)
{
	struct tfs_mount *m = arg;
	struct tfs_node_ident id = { .kind = TFS_NODE_TOPIC, .topic = t,
	                             .topic_name = tfs_topic_name(t), .partition = -1 };
	struct tfs_node *n = tfs_inode_find(m->inodes, &id);
	const char *name = tfs_topic_name(t);

	tfs_readcache_forget_topic(m->readcache, t);
	tfs_scratch_forget_topic(m->scratch, t);
	if (n)
		tfs_inode_unhash(m->inodes, n);
	tfs_inode_put(m->inodes, n);
	tfs_notify_inode(m->notifier, FUSE_ROOT_ID, 1);
	tfs_notifier_drain(m->notifier);
	if (m->se)
		fuse_lowlevel_notify_inval_entry(m->se, FUSE_ROOT_ID, name, strlen(name));
}

/* As a setfattr of a config does: the cleaner's forecast may have moved. */
static void door_config_changed(void *arg, struct tfs_topic *t)
{
	struct tfs_mount *m = arg;

	(void)t;
	tfs_fate_cache_invalidate(m->fates);
}

void tfs_kafka_door_hooks(struct tfs_mount *m, struct tfs_kafka_hooks *h)
{
	memset(h, 0, sizeof(*h));
	h->arg = m;
	h->records = door_records;
	h->topic_created = door_topic_created;
	h->topic_deleted = door_topic_deleted;
	h->config_changed = door_config_changed;
	h->records_deleted = door_records_deleted;
}
