/* opts.h - topicfs's command line: `topicfs [-o OPTIONS] DATA_DIR MOUNTPOINT`.
 *
 * Owns: the parsed options (struct tfs_opts), including the engine config it
 * builds: mount-wide topic defaults by their Kafka names (segment.bytes=...,
 * cleanup.policy=...), cleaner settings by their broker names
 * (log.cleaner.threads=...), partitions=N, io=auto|uring|sync, max_open_files=N,
 * fault=SPEC, ro, cache_timeout=SECONDS, direct_reads, scratch_max_bytes=N,
 * scratch_max_files=N, create_data_dir, no_default_permissions, the Kafka
 * listener's settings by their broker names (listeners=..., node.id=...,
 * kafka/kafka.h)
 * (libfuse's default_permissions is passed on unless that one is given: permission
 * checks are on by default). max_read=N is noted and
 * also left for libfuse (it is a kernel mount option; without one, topicfs adds
 * its default). Everything else (allow_other, auto_unmount,
 * max_threads, -f, -d, ...) is left in the argument list for libfuse.
 *
 * Errors: tfs_opts_parse prints one line naming the bad option and returns -1.
 * Threads: main thread only, before anything starts.
 */
#ifndef TFS_FS_OPTS_H
#define TFS_FS_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "kafka/kafka.h"

struct fuse_args;

struct tfs_opts {
	char *data_dir;                      /* as given (malloc'd); NULL if missing */
	struct tfs_engine_config engine;     /* data_dir is set by the mount */
	struct tfs_kafka_config kafka;       /* the listener; off unless listeners= */
	char *fault_spec;                    /* malloc'd or NULL; armed once mounted */
	double cache_timeout;                /* seconds the kernel may trust key attrs */
	bool read_only;
	bool reader_cache;                   /* readers through the page cache (the
	                                      * default; -o direct_reads: off) */
	bool default_permissions;            /* given explicitly (it is the default) */
	bool no_default_permissions;         /* the kernel checks no permission */
	unsigned max_read;                   /* bytes one READ request may ask for */
	uint64_t scratch_max_bytes;          /* bound of all scratch files' bytes */
	uint32_t scratch_max_files;          /* bound of the scratch files alive */
	bool debug;
	int bad;                             /* a parse error was printed */
	bool last_was_policy;                /* parser state: "cleanup.policy=a,b" */
	char last_policy[32];
	bool last_was_mechs;                 /* "sasl.enabled.mechanisms=A,B" likewise */
	char last_mechs[32];
};

void tfs_opts_init(struct tfs_opts *o);
void tfs_opts_release(struct tfs_opts *o);
/* Consumes topicfs's options from args (the rest stays for libfuse). Returns 0 or
 * -1 after printing what was wrong. */
int tfs_opts_parse(struct fuse_args *args, struct tfs_opts *o);
/* The topicfs part of --help. */
void tfs_opts_usage(const char *prog);

#endif
