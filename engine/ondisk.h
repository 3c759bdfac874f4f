/* ondisk.h - the names and bounds of a data directory, in one place: what the
 * mount, the cleaner and topicctl's inspection spell and parse, so that they can
 * never disagree about which file is which or what it holds (docs/format.md §1,
 * §10).
 *
 * Owns: nothing; constants and the two parsers every reader shares: partition
 * directory names and cleaner-offset-checkpoint.
 *
 * The partition-directory name rule: "<topic>-<N>", where <topic> is a valid
 * topic name (tfs_topic_name_valid) and N is the partition number in decimal,
 * digits only (no sign, no blank), without a leading zero unless N is 0, and
 * below TFS_MAX_PARTITIONS. The topic is everything before the last '-'. Any
 * other name is not a partition directory: the mount leaves it alone and
 * topicctl verify reports it as an unknown directory.
 *
 * Threads: reentrant. Errors: -EINVAL for a name that breaks the rule. */
#ifndef TFS_ONDISK_H
#define TFS_ONDISK_H

#include <stddef.h>
#include <stdint.h>

#include "engine/types.h"

/* A batch declaring more than this is not read (Kafka's own max.message.bytes
 * default is 1 MiB; 256 MiB keeps a garbage length from costing a huge read). */
#define TFS_MAX_BATCH_BYTES ((size_t)256 << 20)

/* Partitions of one topic: numbers 0 .. TFS_MAX_PARTITIONS - 1. */
#define TFS_MAX_PARTITIONS 100000

/* Longest topic name (Kafka's limit); a buffer for one holds one byte more. */
#define TFS_TOPIC_NAME_MAX 249

/* ---- DATA_DIR ---- */
#define TFS_CONFIG_DIR "topics"                   /* topics/<topic>: config, ownership */
#define TFS_CHECKPOINT_FILE "cleaner-offset-checkpoint"
#define TFS_CLEANER_LOG_FILE "log-cleaner.log"
#define TFS_CLEANER_LOG_OLD_FILE "log-cleaner.log.1"  /* the rotated one */

/* ---- a partition directory: <base><suffix>, base in 20 digits ---- */
#define TFS_SUFFIX_LOG ".log"
#define TFS_SUFFIX_INDEX ".index"
#define TFS_SUFFIX_TIMEINDEX ".timeindex"
#define TFS_SUFFIX_TXNINDEX ".txnindex"
#define TFS_SUFFIX_SNAPSHOT ".snapshot"
/* appended to one of the above */
#define TFS_SUFFIX_CLEANED ".cleaned"                 /* a pass's output being written */
#define TFS_SUFFIX_SWAP ".swap"                       /* a pass's output, complete */
#define TFS_SUFFIX_DELETED ".deleted"                 /* replaced, unlinked when unused */
#define TFS_SUFFIX_TMP ".tmp"                         /* a file being replaced */

/* Splits a partition directory's name by the rule above: the topic into
 * topic[cap] (NUL-terminated), the number into *partition. 0, or -EINVAL (the
 * outputs are then unspecified). */
int tfs_partition_dir_parse(const char *name, char *topic, size_t cap, int32_t *partition);

/* ---- cleaner-offset-checkpoint: Kafka's offset checkpoint text ----
 *
 *   LINE  CONTENT                                   DESCRIPTION
 *      1  0                                         version, must be 0
 *      2  N                                         number of entries, 0..INT32_MAX
 *    3..  <topic> <partition> <first dirty offset>  N lines, fields split by runs of
 *                                                   blanks (space, tab)
 *
 * Lines end with '\n' (a '\r' before it is dropped, as Kafka's reader drops it).
 * A text is valid if and only if it has both first lines, the version is 0, exactly
 * N entry lines follow, each with a valid topic name, a partition >= 0 and an
 * offset >= 0 in strict decimal (digits only, a '-' is never a number here), no
 * partition is listed twice, no byte is NUL, and nothing but blank lines follows
 * the entries. */

#define TFS_CHECKPOINT_VERSION 0

struct tfs_checkpoint_entry {
	char topic[TFS_TOPIC_NAME_MAX + 1];
	int32_t partition;
	tfs_offset_t offset;
};

/* Parses text[0, len). Returns 0 with *out (caller frees with free(); NULL when
 * count is 0 is not promised) and *count, or TFS_ECORRUPT with *why (static) and
 * *err_pos, the byte position of the line at fault (len when the text ends too
 * early), or -ENOMEM. On failure *out is NULL and *count 0. */
int tfs_checkpoint_parse(const char *text, size_t len, struct tfs_checkpoint_entry **out,
                         size_t *count, tfs_pos_t *err_pos, const char **why);

#endif
