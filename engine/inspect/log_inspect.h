/* log_inspect.h - read-only inspection of Kafka-format logs on disk, for tools
 * (topicctl dump, verify, estimate) and anything else that must look at a data
 * directory without mounting it.
 *
 * Owns: a tfs_segscan owns its fd and its read buffer; a tfs_keycount owns its
 * table; listings and loaded index arrays are owned by the caller (free functions
 * below). Borrows the io context for every read.
 *
 * Never writes, renames or truncates a file, takes no lock and uses no partition
 * log: it works on an unmounted data directory and beside a live mount alike. On a
 * live one a batch still being written reads as a truncated tail, and a segment the
 * cleaner swapped away meanwhile reads as missing (-ENOENT): callers report what
 * they saw, they do not treat it as proof of corruption.
 *
 * Implemented in three files: log_inspect.c (the segment scanner, listings, index
 * and checkpoint files), log_verify.c (verify), log_estimate.c (distinct keys and
 * the compaction estimate).
 *
 * What counts as a problem (tfs_inspect_verify_*), each reported with its file and
 * byte position (-1 when no position applies):
 *   batches   header (magic, length), CRC-32C, the full record structure (records
 *             decode, count matches, the region is consumed exactly), record offset
 *             deltas strictly increasing and within the batch's last offset delta;
 *             a batch cut short by the end of the file (a torn tail)
 *   offsets   every batch's base offset at or above its segment's base and above
 *             the previous batch's last offset, across batches and segments; a
 *             segment's last offset below the next segment's base offset
 *   .index    size a multiple of 8; entries strictly increasing in offset and
 *             position; each position the start of a batch whose last offset is
 *             base + relative offset
 *   .timeindex size a multiple of 12; timestamps and offsets never decreasing;
 *             each offset inside a batch of the segment whose max timestamp is the
 *             entry's timestamp
 *   files     leftovers of an interrupted cleaner pass, swap, deletion or atomic
 *             replace (*.cleaned, *.swap, *.deleted, *.tmp, topics/<topic>.tmp,
 *             "-delete" directories); an index file without its .log; a topic's
 *             config file (DATA_DIR/topics/<topic>) that tfs_topic_config_load
 *             refuses (with the offending line); fewer partition directories than
 *             its topicfs.partitions; a plain file where topics/ belongs; a
 *             checkpoint file (Kafka's text format: version line 0, count line,
 *             "topic partition offset" lines) that does not parse
 * Notes (reported, not problems): unknown files (in the data directory, its
 * partition directories and topics/), stale checkpoint entries.
 *
 * Threads: every function is reentrant; one tfs_segscan or tfs_keycount per thread.
 * Errors: 0 or a negative errno / TFS_E* code (engine/types.h).
 */
#ifndef TFS_LOG_INSPECT_H
#define TFS_LOG_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/format/batch_codec.h"
#include "engine/log/segment.h"
#include "engine/ondisk.h"
#include "engine/types.h"

struct tfs_io;

/* Names of a data directory's files and the partition-directory name rule
 * (tfs_partition_dir_parse) are engine/ondisk.h's, shared with the mount. */

/* ---- one segment file, batch by batch ------------------------------------------ */

enum tfs_scan_status {
	TFS_SCAN_OK = 0,          /* a whole batch; header and CRC check out */
	TFS_SCAN_BAD_BATCH,       /* framing intact (the length fits the file) but the CRC
	                           * or header fields are wrong; scanning goes on after it */
	TFS_SCAN_BAD_HEADER,      /* magic or length unusable: the rest of the file cannot
	                           * be framed; the scan ends here */
	TFS_SCAN_TRUNCATED,       /* the file ends inside the batch (or its first 12
	                           * bytes): a torn tail; the scan ends here */
};

/* One step of a scan. bytes borrows the scanner's buffer until the next call. */
struct tfs_scan_batch {
	enum tfs_scan_status status;
	const char *why;                 /* static reason unless status is OK */
	tfs_pos_t pos;                   /* position of the batch in the file */
	size_t size;                     /* 12 + length; for TRUNCATED: bytes left */
	bool header_valid;               /* h holds the decoded 61-byte header */
	struct tfs_batch_header h;
	const uint8_t *bytes;            /* the whole batch (OK and BAD_BATCH only) */
};

struct tfs_segscan;

/* Opens path read-only. Caller owns *out; tfs_segscan_close. -ENOENT, -EACCES... */
int tfs_segscan_open(struct tfs_io *io, const char *path, struct tfs_segscan **out);
void tfs_segscan_close(struct tfs_segscan *s);
/* Size of the file when it was opened. */
int64_t tfs_segscan_file_size(const struct tfs_segscan *s);
/* Returns 1 with *b filled, 0 at the end of the file (or after a BAD_HEADER or
 * TRUNCATED step), or a negative errno for a failed read. */
int tfs_segscan_next(struct tfs_segscan *s, struct tfs_scan_batch *b);
/* The next call starts at pos, which the caller knows to be a batch start (an
 * index entry's position, checked by the header that follows). */
void tfs_segscan_seek(struct tfs_segscan *s, tfs_pos_t pos);

/* ---- a partition directory -------------------------------------------------- */

enum tfs_file_kind {
	TFS_FILE_LOG = 0,         /* <base>.log */
	TFS_FILE_INDEX,           /* <base>.index */
	TFS_FILE_TIMEINDEX,       /* <base>.timeindex */
	TFS_FILE_SNAPSHOT,        /* <base>.snapshot (producer state) */
	TFS_FILE_TXNINDEX,        /* <base>.txnindex (aborted transactions) */
	TFS_FILE_LEFTOVER,        /* *.cleaned, *.swap, *.deleted, *.tmp */
	TFS_FILE_KAFKA,           /* leader-epoch-checkpoint, partition.metadata */
	TFS_FILE_OTHER,           /* anything else (not ours) */
};

struct tfs_dir_file {
	char *name;                      /* owned by the listing */
	enum tfs_file_kind kind;
	tfs_offset_t base;               /* parsed base offset, -1 if the name has none */
	int64_t size_bytes;              /* -1 if stat failed */
};

/* Files of one directory: sorted by base offset, then by name (so every
 * segment's .log comes before its .index and .timeindex). */
struct tfs_dir_listing {
	struct tfs_dir_file *files;
	size_t count;
};

/* Lists dir (regular files only; "." names skipped). Caller owns *out. */
int tfs_inspect_list_dir(const char *dir, struct tfs_dir_listing *out);
void tfs_dir_listing_release(struct tfs_dir_listing *l);
/* Kind of a file name (see enum). */
enum tfs_file_kind tfs_inspect_file_kind(const char *name, tfs_offset_t *base);

/* ---- index files ----------------------------------------------------------- */

/* Reads a whole .index (8-byte entries) or .timeindex (12-byte entries). Entries
 * are decoded as stored, unchecked; a trailing partial entry is left out and its
 * byte count returned in *tail_bytes. Caller frees *out. -ENOENT if missing. */
int tfs_inspect_read_index(struct tfs_io *io, const char *path, struct tfs_index_entry **out,
                           size_t *count, size_t *tail_bytes);
int tfs_inspect_read_timeindex(struct tfs_io *io, const char *path,
                               struct tfs_timeindex_entry **out, size_t *count,
                               size_t *tail_bytes);

/* ---- Kafka's offset checkpoint files (text) ----------------------------------
 * tfs_checkpoint_parse (engine/ondisk.h), the parser the cleaner reads its own
 * file with. */

/* ---- verify ---------------------------------------------------------------- */

enum tfs_finding { TFS_FINDING_PROBLEM = 0, TFS_FINDING_NOTE = 1 };

/* Called once per finding: path is the file (or directory), pos a byte position
 * in it or -1, msg a lowercase sentence without a final period. All borrowed for
 * the call. */
typedef void (*tfs_finding_fn)(void *arg, enum tfs_finding kind, const char *path,
                               tfs_pos_t pos, const char *msg);
/* Progress: bytes of .log files done so far, of total. May be NULL. */
typedef void (*tfs_progress_fn)(void *arg, int64_t done, int64_t total);

struct tfs_verify_stats {
	int64_t partitions, segments, batches, records, bytes, index_entries;
	int64_t problems, notes;
};

struct tfs_verify_ctx {
	struct tfs_io *io;               /* borrowed */
	tfs_finding_fn finding;          /* required */
	tfs_progress_fn progress;        /* optional */
	void *arg;                       /* for both callbacks */
	struct tfs_verify_stats stats;   /* accumulated by every call below */
	int64_t progress_total;          /* set by the data-dir walk; 0 = unknown */
};

/* Verifies one partition directory (see the list at the top). Returns 0 when the
 * walk completed (problems are counted in ctx->stats, not returned), or a
 * negative errno when the directory cannot be read. */
int tfs_inspect_verify_partition(struct tfs_verify_ctx *ctx, const char *dir);
/* Verifies a data directory: every partition directory, every topics/<topic>,
 * every *-checkpoint file, leftovers. Same return convention. */
int tfs_inspect_verify_data_dir(struct tfs_verify_ctx *ctx, const char *dir);
/* True if dir looks like a partition directory (it holds a <base>.log file, or
 * its name is "<topic>-<N>"), false for anything else: a data directory, known by
 * a topics/ directory, a *-checkpoint file or a partition directory in it. */
bool tfs_inspect_is_partition_dir(const char *dir);

/* ---- distinct keys ---------------------------------------------------------- */

/* Counts distinct keys by their XXH3-128 fingerprints: exactly (an open-addressing
 * set, 16 bytes a slot, at most half full) up to max_exact keys, then by
 * HyperLogLog (2^14 registers, standard error about 0.8%), which it feeds from the
 * start so the switch loses nothing. */
struct tfs_keycount;

/* max_exact 0 = TFS_KEYCOUNT_DEFAULT_EXACT. Caller owns *out. -ENOMEM. */
#define TFS_KEYCOUNT_DEFAULT_EXACT ((size_t)4 << 20)
int tfs_keycount_create(size_t max_exact, struct tfs_keycount **out);
void tfs_keycount_destroy(struct tfs_keycount *k);
void tfs_keycount_reset(struct tfs_keycount *k);
void tfs_keycount_add(struct tfs_keycount *k, struct tfs_slice key);
/* The count so far; *exact tells which counter answered. */
double tfs_keycount_value(const struct tfs_keycount *k, bool *exact);

/* ---- the compaction estimate ------------------------------------------------- */

#define TFS_ESTIMATE_SAMPLE_ABOVE_BYTES ((int64_t)100 << 20)  /* read all up to 100 MiB */
#define TFS_ESTIMATE_SAMPLE_FRACTION 0.10
#define TFS_ESTIMATE_SAMPLE_CHUNK_BYTES ((int64_t)1 << 20)     /* one contiguous read */
#define TFS_ESTIMATE_MIN_EVENTS_PER_KEY 3.0
#define TFS_ESTIMATE_MIN_SAVINGS 0.20
#define TFS_ESTIMATE_KEYLESS_WARN 0.10
#define TFS_ESTIMATE_NEW_KEYLESS_WARN 0.01    /* of the active segment's records: a
                                               * new producer without keys */

struct tfs_estimate_opts {
	int64_t sample_above_bytes;      /* read everything when cleanable <= this */
	double sample_fraction;          /* (0, 1] of the cleanable bytes otherwise */
	int64_t sample_chunk_bytes;      /* bytes read at each evenly spaced window */
	size_t exact_keys_max;           /* see tfs_keycount_create */
	tfs_progress_fn progress;        /* optional, with arg */
	void *arg;
};
void tfs_estimate_opts_defaults(struct tfs_estimate_opts *o);

/* What a scan of one partition measured. Byte figures are .log bytes. A batch's
 * bytes are shared among its records in proportion to their encoded (uncompressed)
 * lengths; bytes of empty batches, transaction markers and unreadable batches
 * count as keyless (they survive compaction). */
struct tfs_estimate_input {
	int64_t current_bytes;           /* every segment */
	int64_t active_bytes;            /* the last (active) segment: never cleaned */
	int64_t cleanable_bytes;         /* current - active */
	int64_t sampled_bytes;           /* bytes of the batches read */
	int segments;
	bool sampled;                    /* false: every cleanable batch was read */
	int64_t records;                 /* data records read (markers excluded) */
	int64_t keyed_records, keyless_records, tombstones;
	double keyed_bytes, keyless_bytes;   /* of sampled_bytes; they add up to it */
	double distinct_keys;            /* among the records read */
	bool distinct_exact;
	int64_t bad_batches;             /* batches that failed their CRC, skipped */
	double dirty_ratio;              /* r: the topic's min.cleanable.dirty.ratio */
	/* The active segment, read whole for its records (its bytes are active_bytes;
	 * a torn or damaged tail ends the read): what producers write now. */
	int64_t active_records, active_keyless_records;
	double distinct_keys_all;        /* among every record read, active ones too */
};

/* The simple formula topicctl estimate started from (a compaction essay's
 * "estimarEconomiaDeCompactacao"), term by term as it has it, on what the scan
 * read: records n (the active segment's too), distinct keys D among them (not
 * scaled for a sample), keyless records n0, current size S, active segment bytes
 * A per partition, P partitions, r:
 *   E = (n - n0) / max(D, 1), share = n0 / n
 *   U = S * share + (E > 0 ? S * (1 - share) / E : 0)
 *   estimate = U + U * (r / (1 - r)) + A * P, savings = 1 - estimate / S
 * worth it when E >= 3 and savings > 20%; its warning when share > 10%. README
 * "How topicctl estimate works" says where and why the refined figure differs. */
struct tfs_estimate_simple {
	bool defined;                    /* false: no record read, or S = 0, or r = 1 */
	double events_per_key, keyless_share, surviving_bytes, estimate_bytes, savings;
	bool worth_it, keyless_warning;
};

struct tfs_estimate {
	double sample_fraction;          /* sampled / cleanable bytes (1 when all read) */
	double keyed_records_total;      /* keyed records, scaled to the whole region */
	double distinct_keys_total;      /* distinct keys, estimated for the region */
	double events_per_key;           /* keyed records / distinct keys; 0 if no keys */
	double keyless_share;            /* keyless records / records */
	double keyed_bytes_total, keyless_bytes_total;   /* scaled to cleanable_bytes */
	double surviving_bytes;          /* keyless + keyed / events per key */
	double dirt_bytes;               /* surviving * r / (1 - r) */
	double estimate_bytes;           /* surviving + dirt + active, at most current */
	double current_bytes;
	double savings;                  /* 1 - estimate / current; 0 when empty */
	bool worth_it;                   /* events per key >= 3 and savings > 20% */
	bool keyless_warning;            /* keyless share > 10% */
	double new_keyless_share;        /* of the active segment's records */
	bool new_keyless_warning;        /* new_keyless_share > 1%: a keyless producer */
	struct tfs_estimate_simple simple; /* the simple formula, beside this one */
};

/* Scans the partition directory dir (every segment's .log but the last; the last,
 * the active segment, is read whole too, but only its records are counted): all of
 * it when its cleanable bytes are at most o->sample_above_bytes; otherwise the
 * cleanable bytes are cut into windows of sample_chunk_bytes / sample_fraction and
 * sample_chunk_bytes are read at a pseudo-random place of each (a fixed seed: the
 * same files give the same answer; a fixed place would alias with keys rewritten
 * in a fixed order), the .index finding a batch start near it. Bytes that cannot
 * be framed count as keyless (they survive). Fills *in except dirty_ratio.
 * -ENOENT if dir holds no .log (or a segment vanished: a live cleaner's swap);
 * -ESTALE if a file shrank while read; another I/O errno. */
int tfs_inspect_estimate_scan(struct tfs_io *io, const char *dir,
                              const struct tfs_estimate_opts *o, struct tfs_estimate_input *in);
/* The formula (README "topicctl estimate"). When the input was sampled, distinct
 * keys are scaled up by the occupancy model below; otherwise they are exact. Also
 * fills out->simple for the one partition (P = 1). */
void tfs_estimate_compute(const struct tfs_estimate_input *in, struct tfs_estimate *out);
/* The total of n partitions: sums of bytes, records and keys (a key is per
 * partition), events per key = total keyed records / total distinct keys; the
 * simple formula on the sums, with A the partitions' mean active segment. */
void tfs_estimate_total(const struct tfs_estimate *parts, const struct tfs_estimate_input *ins,
                        size_t n, struct tfs_estimate *out);
/* Occupancy model: distinct keys D of a region of n keyed records from d distinct
 * keys seen in a fraction f of it, assuming each key's n/D records are spread
 * evenly: d = D * (1 - (1 - f)^(n/D)), solved for D in [d, n]. */
double tfs_estimate_scale_distinct(double d_seen, double n_total, double f);

#endif
