/* dump.c - topicctl dump: the batches (and records) of segment files, index
 * entries, and the offsets no record holds, read-only, like kafka-dump-log.
 */
#include "topicctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <limits.h>

#include "engine/format/batch_codec.h"
#include "engine/cleaner/cleaner.h"
#include "engine/inspect/log_inspect.h"
#include "engine/log/partition_log.h"
#include "engine/topic_config.h"
#include "io/file_util.h"
#include "io/io.h"

#define FATE_FDCACHE_FILES 64        /* the read-only partition's open segments */

const char dump_help[] =
	"usage: topicctl dump [--records] [--fate] [--json] [--max-bytes N] PARTITION_DIR|FILE...\n"
	"\n"
	"Prints the batches of segment files, read-only, like kafka-dump-log: for each\n"
	"batch its base and last offset, record count, position and size, producer id,\n"
	"epoch and base sequence, attributes (codec, transactional, control, delete\n"
	"horizon, with its value when set), timestamp type and max timestamp, and\n"
	"whether its CRC-32C is valid. Offsets that no record holds are shown as\n"
	"  gap: offsets FIRST..LAST (COUNT)\n"
	"between batches (and, with --records, inside them: the cleaner keeps a batch's\n"
	"offsets when it drops some of its records); without --records a batch with\n"
	"such holes shows how many. A PARTITION_DIR dumps its segments in offset order;\n"
	"a .index or .timeindex file prints its entries.\n"
	"\n"
	"  -r, --records       also print each record: offset, timestamp, key, value (or\n"
	"                      \"tombstone\"), headers; printable UTF-8 as is, other bytes\n"
	"                      as 0x-prefixed hex; a null key prints as null\n"
	"  -f, --fate          with --records (implied) on a PARTITION_DIR: what the next\n"
	"                      cleaning pass would do with each record, from a dry run of\n"
	"                      that pass on the partition opened read-only (its topic's\n"
	"                      config, the cleaner checkpoint of the data directory, the\n"
	"                      default log.cleaner.* sizes): keep, drop, keep-tombstone\n"
	"                      until MS, drop-tombstone, keep-keyless, keep-producer-state,\n"
	"                      not-cleanable REASON; as the mount's `fate` attribute\n"
	"  -m, --max-bytes N   print at most N bytes of a key, value or header (text output)\n"
	"  -j, --json          print JSON\n"
	"  -h, --help          show this help\n"
	"\n"
	"Exit status: 0 every batch is valid; 1 a batch is invalid or truncated, or a\n"
	"file cannot be read; 2 usage error.\n";

/* The fates of one partition's records, by offset (from its dry run). */
struct fate_table {
	struct tfs_cleaner_record_fate *v;
	size_t n, cap;
	bool on;                       /* the table is for the partition being dumped */
	bool failed;                   /* allocation failed: fates are unknown */
	struct tfs_cleaner_dry_run dry;
};

struct dump {
	bool records, json, fate;
	struct fate_table fates;
	int64_t max_bytes;
	tfs_offset_t expect;           /* the next offset a record could hold */
	bool expect_known;
	bool bad;
	bool first_item;
	struct tfs_record_iter it;
	struct progress prog;
	int64_t done, total;
};

static bool is_text(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			if (c < 0x20 || c == 0x7f)
				return false;
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0))
			return false;
		i += len;
	}
	return true;
}

/* Text output of bytes: "" for empty, as is when printable, else 0x<hex>. */
static void put_bytes(FILE *f, struct tfs_slice s, int64_t max)
{
	size_t n = s.len;
	bool cut = max > 0 && (int64_t)n > max;

	if (cut)
		n = (size_t)max;
	if (s.len == 0) {
		fputs("\"\"", f);
		return;
	}
	if (is_text(s.p, s.len)) {
		/* a cut must not split a UTF-8 sequence */
		while (cut && n > 0 && (s.p[n] & 0xc0) == 0x80)
			n--;
		fwrite(s.p, 1, n, f);
	} else {
		fputs("0x", f);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%02x", s.p[i]);
	}
	if (cut)
		fprintf(f, "...(%zu bytes)", s.len);
}

static char *hex_of(struct tfs_slice s)
{
	char *h = malloc(s.len * 2 + 1);

	if (!h)
		return NULL;
	for (size_t i = 0; i < s.len; i++)
		sprintf(h + 2 * i, "%02x", s.p[i]);
	h[s.len * 2] = '\0';
	return h;
}

/* JSON of bytes: o[name] = text, or o[name] = hex with o[name_encoding] = "hex". */
static void json_bytes(struct json_object *o, const char *name, struct tfs_slice s, bool null)
{
	char enc[64];

	snprintf(enc, sizeof(enc), "%s_encoding", name);
	if (null) {
		json_object_object_add(o, name, NULL);
	} else if (is_text(s.p, s.len)) {
		json_object_object_add(o, name, json_object_new_string_len((const char *)s.p, (int)s.len));
	} else {
		char *h = hex_of(s);
		json_object_object_add(o, name, json_object_new_string(h ? h : ""));
		json_object_object_add(o, enc, json_object_new_string("hex"));
		free(h);
	}
}

static void dump_item(struct dump *d, struct json_object *o)
{
	printf("%s\n    %s", d->first_item ? "" : ",", json_object_to_json_string_ext(o, JSON_LINE_FLAGS));
	d->first_item = false;
	json_object_put(o);
}

static void dump_gap(struct dump *d, tfs_offset_t first, tfs_offset_t last)
{
	if (last < first)
		return;
	if (d->json) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("gap"));
		json_object_object_add(o, "first", json_object_new_int64(first));
		json_object_object_add(o, "last", json_object_new_int64(last));
		json_object_object_add(o, "count", json_object_new_int64(last - first + 1));
		dump_item(d, o);
	} else {
		printf("gap: offsets %" PRId64 "..%" PRId64 " (%" PRId64 ")\n", first, last,
		       last - first + 1);
	}
}

static void dump_error(struct dump *d, tfs_pos_t pos, const char *msg)
{
	d->bad = true;
	if (d->json) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("error"));
		json_object_object_add(o, "position", json_object_new_int64(pos));
		json_object_object_add(o, "message", json_object_new_string(msg));
		dump_item(d, o);
	} else {
		printf("position: %" PRId64 ": %s\n", pos, msg);
	}
}

static const char *codec_name(int codec)
{
	const char *name = tfs_codec_name(codec);
	return name ? name : "unknown";
}

static void fate_collect(void *arg, const struct tfs_cleaner_record_fate *f)
{
	struct fate_table *t = arg;

	if (t->failed)
		return;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 256;
		struct tfs_cleaner_record_fate *nv = realloc(t->v, nc * sizeof(*nv));
		if (!nv) {
			t->failed = true;
			return;
		}
		t->v = nv;
		t->cap = nc;
	}
	t->v[t->n++] = *f;   /* the pass reports offsets in ascending order */
}

/* Runs the dry run of dir's next pass (dir: DATA_DIR/TOPIC-P) into d->fates. */
static int load_fates(struct dump *d, struct tfs_io *io, const char *dir)
{
	char real[PATH_MAX], topic[TOPIC_CAP], cfgpath[PATH_MAX * 2];
	struct tfs_topic_config cfg;
	struct tfs_topic_meta meta = { 0 };
	struct tfs_cleaner_config ccfg;
	struct tfs_fdcache *fdc = NULL;
	struct tfs_plog *pl = NULL;
	tfs_offset_t checkpoint = TFS_OFFSET_NONE;
	char *slash;
	int32_t partition;
	int dirfd = -1, rc;

	d->fates.n = 0;
	d->fates.on = d->fates.failed = false;
	if (!realpath(dir, real))
		return -errno;
	slash = strrchr(real, '/');
	if (!slash || tfs_partition_dir_parse(slash + 1, topic, sizeof(topic), &partition) < 0) {
		complain("%s: --fate needs a partition directory (DATA_DIR/TOPIC-N)", dir);
		return -EINVAL;
	}
	*slash = '\0';                 /* real is now the data directory */
	tfs_topic_config_defaults(&cfg);
	tfs_cleaner_config_defaults(&ccfg);
	snprintf(cfgpath, sizeof(cfgpath), "%s/%s/%s", real[0] ? real : "/", TFS_CONFIG_DIR,
	         topic);
	rc = tfs_topic_config_load(cfgpath, &cfg, &meta);
	if (rc < 0 && rc != -ENOENT)
		complain("%s: does not load (%s); fates use the default topic config", cfgpath,
		         tfs_strerror(rc));
	dirfd = open(real[0] ? real : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	rc = tfs_cleaner_checkpoint_read(io, dirfd, topic, partition, &checkpoint);
	if (rc < 0) {
		complain("%s/cleaner-offset-checkpoint: %s; fates assume no pass ran yet", real,
		         tfs_strerror(rc));
		checkpoint = TFS_OFFSET_NONE;
	}
	close(dirfd);
	fdc = tfs_fdcache_create(io, FATE_FDCACHE_FILES);
	if (!fdc)
		return -ENOMEM;
	{
		struct tfs_plog_env env = { io, fdc, &cfg, true };
		*slash = '/';
		rc = tfs_plog_open(&env, real, false, &pl);
	}
	if (rc == 0)
		rc = tfs_cleaner_dry_run_log(pl, &cfg, &ccfg, checkpoint, tfs_now_ms(), fate_collect,
		                             &d->fates, &d->fates.dry);
	tfs_plog_close(pl);
	tfs_fdcache_destroy(fdc);
	if (rc == 0 && !d->fates.failed)
		d->fates.on = true;
	return rc;
}

/* The fate of the record at offset, as the `fate` attribute words it. */
static const char *fate_text(const struct dump *d, tfs_offset_t offset, char *buf, size_t cap)
{
	const struct fate_table *t = &d->fates;
	size_t lo = 0, hi = t->n;

	if (!t->on)
		return "unknown";
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->v[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	tfs_cleaner_fate_text(&t->dry, lo < t->n && t->v[lo].offset == offset ? &t->v[lo] : NULL,
	                      offset, buf, cap);
	return buf[0] ? buf : "unknown";
}

static void dump_record(struct dump *d, const struct tfs_batch_header *h, const struct tfs_record *r)
{
	char fate[TFS_CLEANER_FATE_TEXT_CAP];
	struct tfs_slice cur = r->headers_raw;
	struct tfs_header hd;
	bool control = h->attributes & TFS_ATTR_CONTROL;
	int16_t ctype = -1;

	if (control && !r->key_null && r->key.len >= 4)
		ctype = (int16_t)(r->key.p[2] << 8 | r->key.p[3]);
	if (d->json) {
		struct json_object *o = json_object_new_object(), *ha = json_object_new_array();
		json_object_object_add(o, "type", json_object_new_string("record"));
		json_object_object_add(o, "offset", json_object_new_int64(r->offset));
		json_object_object_add(o, "timestamp", json_object_new_int64(r->timestamp));
		if (control)
			json_object_object_add(o, "control", json_object_new_string(
			                       ctype == 0 ? "ABORT" : ctype == 1 ? "COMMIT" : "unknown"));
		json_bytes(o, "key", r->key, r->key_null);
		json_bytes(o, "value", r->value, r->value_null);
		json_object_object_add(o, "tombstone", json_object_new_boolean(r->value_null));
		if (d->fate)
			json_object_object_add(o, "fate", json_object_new_string(
			                       fate_text(d, r->offset, fate, sizeof(fate))));
		while (tfs_header_next(&cur, &hd) == 1) {
			struct json_object *x = json_object_new_object();
			json_bytes(x, "name", hd.key, false);
			json_bytes(x, "value", hd.value, hd.value_null);
			json_object_array_add(ha, x);
		}
		json_object_object_add(o, "headers", ha);
		dump_item(d, o);
		return;
	}
	printf("| offset: %" PRId64 " timestamp: %" PRId64, r->offset, r->timestamp);
	if (d->fate)
		printf(" fate: %s", fate_text(d, r->offset, fate, sizeof(fate)));
	if (control) {
		printf(" control: %s\n", ctype == 0 ? "ABORT" : ctype == 1 ? "COMMIT" : "unknown");
		return;
	}
	fputs(" key: ", stdout);
	if (r->key_null)
		fputs("null", stdout);
	else
		put_bytes(stdout, r->key, d->max_bytes);
	if (r->value_null) {
		fputs(" tombstone", stdout);
	} else {
		fputs(" value: ", stdout);
		put_bytes(stdout, r->value, d->max_bytes);
	}
	fputs(" headers: [", stdout);
	for (bool first = true; tfs_header_next(&cur, &hd) == 1; first = false) {
		if (!first)
			fputs(", ", stdout);
		put_bytes(stdout, hd.key, d->max_bytes);
		fputc('=', stdout);
		if (hd.value_null)
			fputs("null", stdout);
		else
			put_bytes(stdout, hd.value, d->max_bytes);
	}
	fputs("]\n", stdout);
}

static void dump_batch(struct dump *d, const struct tfs_scan_batch *b)
{
	const struct tfs_batch_header *h = &b->h;
	tfs_offset_t last = tfs_batch_last_offset(h);
	int64_t span = (int64_t)h->last_offset_delta + 1;
	bool horizon = h->attributes & TFS_ATTR_DELETE_HORIZON;
	bool valid = b->status == TFS_SCAN_OK;

	if (d->expect_known && h->base_offset > d->expect)
		dump_gap(d, d->expect, h->base_offset - 1);
	if (d->json) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("batch"));
		json_object_object_add(o, "base_offset", json_object_new_int64(h->base_offset));
		json_object_object_add(o, "last_offset", json_object_new_int64(last));
		json_object_object_add(o, "count", json_object_new_int(h->records_count));
		json_object_object_add(o, "position", json_object_new_int64(b->pos));
		json_object_object_add(o, "size", json_object_new_int64((int64_t)b->size));
		json_object_object_add(o, "producer_id", json_object_new_int64(h->producer_id));
		json_object_object_add(o, "producer_epoch", json_object_new_int(h->producer_epoch));
		json_object_object_add(o, "base_sequence", json_object_new_int(h->base_sequence));
		json_object_object_add(o, "leader_epoch", json_object_new_int(h->leader_epoch));
		json_object_object_add(o, "codec", json_object_new_string(codec_name(tfs_batch_codec(h))));
		json_object_object_add(o, "transactional",
		                       json_object_new_boolean(h->attributes & TFS_ATTR_TRANSACTIONAL));
		json_object_object_add(o, "control", json_object_new_boolean(h->attributes & TFS_ATTR_CONTROL));
		json_object_object_add(o, "delete_horizon_ms",
		                       horizon ? json_object_new_int64(h->base_timestamp) : NULL);
		json_object_object_add(o, "timestamp_type", json_object_new_string(
		                       (h->attributes & TFS_ATTR_LOG_APPEND_TIME) ? "LogAppendTime"
		                                                                  : "CreateTime"));
		json_object_object_add(o, "max_timestamp", json_object_new_int64(h->max_timestamp));
		json_object_object_add(o, "crc", json_object_new_int64(h->crc));
		json_object_object_add(o, "crc_valid", json_object_new_boolean(valid));
		json_object_object_add(o, "error", json_str_or_null(valid ? NULL : b->why));
		dump_item(d, o);
	} else {
		printf("baseOffset: %" PRId64 " lastOffset: %" PRId64 " count: %" PRId32, h->base_offset,
		       last, h->records_count);
		if (span > h->records_count && h->records_count >= 0)
			printf(" holes: %" PRId64, span - h->records_count);
		printf(" position: %" PRId64 " size: %zu producerId: %" PRId64 " producerEpoch: %" PRId16
		       " baseSequence: %" PRId32 " codec: %s transactional: %s control: %s",
		       b->pos, b->size, h->producer_id, h->producer_epoch, h->base_sequence,
		       codec_name(tfs_batch_codec(h)),
		       (h->attributes & TFS_ATTR_TRANSACTIONAL) ? "true" : "false",
		       (h->attributes & TFS_ATTR_CONTROL) ? "true" : "false");
		if (horizon)
			printf(" deleteHorizonMs: %" PRId64, h->base_timestamp);
		else
			printf(" deleteHorizonMs: -");
		printf(" %s: %" PRId64 " crc: 0x%08" PRIx32 " crcValid: %s%s%s\n",
		       (h->attributes & TFS_ATTR_LOG_APPEND_TIME) ? "LogAppendTime" : "CreateTime",
		       h->max_timestamp, h->crc, valid ? "true" : "false", valid ? "" : " ",
		       valid ? "" : b->why);
	}
	if (!valid)
		d->bad = true;
	if (d->records) {
		struct tfs_record r;
		const char *why = NULL;
		tfs_offset_t expect = h->base_offset;
		int rc = tfs_record_iter_reset(&d->it, b->bytes, b->size, &why);

		while (rc == 0 && (rc = tfs_record_iter_next(&d->it, &r, &why)) == 1) {
			if (r.offset > expect)
				dump_gap(d, expect, r.offset - 1);
			dump_record(d, h, &r);
			if (r.offset + 1 > expect)
				expect = r.offset + 1;
			rc = 0;
		}
		if (rc < 0) {
			char msg[256];
			snprintf(msg, sizeof(msg), "records of batch %" PRId64 "..%" PRId64 " cannot be read: %s",
			         h->base_offset, last, why ? why : tfs_strerror(rc));
			dump_error(d, b->pos, msg);
		} else if (last >= expect) {
			dump_gap(d, expect, last);
		}
	}
	if (!d->expect_known || last + 1 > d->expect)
		d->expect = last + 1;
	d->expect_known = true;
}

static void dump_file_head(struct dump *d, const char *path, const char *kind, tfs_offset_t base,
                           int64_t size)
{
	if (d->json) {
		struct json_object *p = json_object_new_string(path);
		printf("%s\n  {\"path\": %s, \"kind\": \"%s\", \"base_offset\": %" PRId64
		       ", \"size_bytes\": %" PRId64 ", \"items\": [",
		       d->first_item ? "" : ",", json_object_to_json_string_ext(p, JSON_LINE_FLAGS),
		       kind, base, size);
		json_object_put(p);
		d->first_item = true;
	} else {
		printf("Dumping %s\n", path);
		if (base >= 0)
			printf("Starting offset: %" PRId64 "\n", base);
	}
}

static void dump_file_tail(struct dump *d)
{
	if (d->json) {
		printf("\n  ]}");
		d->first_item = false;
	}
}

static int dump_log(struct dump *d, struct tfs_io *io, const char *path, tfs_offset_t base)
{
	struct tfs_segscan *s;
	struct tfs_scan_batch b;
	int rc = tfs_segscan_open(io, path, &s);

	if (rc < 0) {
		progress_clear(&d->prog);
		complain("%s: %s", path, tfs_strerror(rc));
		d->bad = true;
		return rc;
	}
	dump_file_head(d, path, "log", base, tfs_segscan_file_size(s));
	if (base >= 0 && !d->expect_known) {
		d->expect = base;           /* offsets below the first batch are gaps too */
		d->expect_known = true;
	}
	while ((rc = tfs_segscan_next(s, &b)) == 1) {
		char msg[256];
		if (b.status == TFS_SCAN_BAD_HEADER) {
			snprintf(msg, sizeof(msg), "bad batch header: %s; the rest of the file cannot be read",
			         b.why);
			dump_error(d, b.pos, msg);
			break;
		}
		if (b.status == TFS_SCAN_TRUNCATED) {
			snprintf(msg, sizeof(msg), "truncated batch: %s (%zu bytes left)", b.why, b.size);
			dump_error(d, b.pos, msg);
			break;
		}
		dump_batch(d, &b);
		d->done += (int64_t)b.size;
		progress_show(&d->prog, d->done, d->total);
	}
	if (rc < 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "read failed: %s", tfs_strerror(rc));
		dump_error(d, -1, msg);
	}
	dump_file_tail(d);
	tfs_segscan_close(s);
	return 0;
}

static int dump_index(struct dump *d, struct tfs_io *io, const char *path, tfs_offset_t base,
                      bool time)
{
	struct tfs_index_entry *ie = NULL;
	struct tfs_timeindex_entry *te = NULL;
	size_t n = 0, tail = 0;
	int rc = time ? tfs_inspect_read_timeindex(io, path, &te, &n, &tail)
	              : tfs_inspect_read_index(io, path, &ie, &n, &tail);

	if (rc < 0) {
		complain("%s: %s", path, tfs_strerror(rc));
		d->bad = true;
		return rc;
	}
	if (base < 0)
		base = 0;
	dump_file_head(d, path, time ? "timeindex" : "index", base,
	               (int64_t)(n * (time ? TFS_TIMEINDEX_ENTRY_BYTES : TFS_INDEX_ENTRY_BYTES) + tail));
	for (size_t i = 0; i < n; i++) {
		if (d->json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "type", json_object_new_string("entry"));
			if (time)
				json_object_object_add(o, "timestamp", json_object_new_int64(te[i].timestamp));
			json_object_object_add(o, "offset", json_object_new_int64(
			                       base + (time ? te[i].rel_offset : ie[i].rel_offset)));
			if (!time)
				json_object_object_add(o, "position", json_object_new_int64(ie[i].pos));
			dump_item(d, o);
		} else if (time) {
			printf("timestamp: %" PRId64 " offset: %" PRId64 "\n", te[i].timestamp,
			       base + te[i].rel_offset);
		} else {
			printf("offset: %" PRId64 " position: %" PRId32 "\n", base + ie[i].rel_offset, ie[i].pos);
		}
	}
	if (tail) {
		char msg[128];
		snprintf(msg, sizeof(msg), "%zu trailing bytes are not a whole entry", tail);
		dump_error(d, (tfs_pos_t)(n * (time ? TFS_TIMEINDEX_ENTRY_BYTES : TFS_INDEX_ENTRY_BYTES)), msg);
	}
	dump_file_tail(d);
	free(ie);
	free(te);
	return 0;
}

static int dump_path(struct dump *d, struct tfs_io *io, const char *arg)
{
	struct stat st;
	const char *name = strrchr(arg, '/');
	tfs_offset_t base;
	enum tfs_file_kind kind;

	if (stat(arg, &st) < 0) {
		complain("%s: %s", arg, strerror(errno));
		d->bad = true;
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		struct tfs_dir_listing l;
		char path[PATH_MAX * 2];
		int rc = tfs_inspect_list_dir(arg, &l);
		if (rc < 0) {
			complain("%s: %s", arg, tfs_strerror(rc));
			d->bad = true;
			return rc;
		}
		d->total = 0;
		d->done = 0;
		if (d->fate && (rc = load_fates(d, io, arg)) < 0) {
			complain("%s: no fates: %s", arg, tfs_strerror(rc));
			d->bad = true;
		}
		for (size_t i = 0; i < l.count; i++)
			if (l.files[i].kind == TFS_FILE_LOG && l.files[i].size_bytes > 0)
				d->total += l.files[i].size_bytes;
		for (size_t i = 0; i < l.count; i++) {
			if (l.files[i].kind != TFS_FILE_LOG)
				continue;
			snprintf(path, sizeof(path), "%s/%s", arg, l.files[i].name);
			dump_log(d, io, path, l.files[i].base);
		}
		tfs_dir_listing_release(&l);
		d->fates.on = false;
		return 0;
	}
	if (d->fate) {
		complain("%s: --fate needs a partition directory (DATA_DIR/TOPIC-N)", arg);
		d->bad = true;
	}
	name = name ? name + 1 : arg;
	kind = tfs_inspect_file_kind(name, &base);
	d->total = st.st_size;
	d->done = 0;
	if (kind == TFS_FILE_INDEX)
		return dump_index(d, io, arg, base, false);
	if (kind == TFS_FILE_TIMEINDEX)
		return dump_index(d, io, arg, base, true);
	/* any other file (a .log, a .log.cleaned leftover, a copy) is read as a log */
	return dump_log(d, io, arg, base);
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "records", no_argument, NULL, 'r' },
		{ "fate", no_argument, NULL, 'f' },
		{ "max-bytes", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dump d = { .first_item = true };
	struct tfs_io *io = NULL;
	int c, rc;

	while ((c = next_opt(argc, argv, "rfm:jh", opts)) != -1) {
		switch (c) {
		case 'r': d.records = true; break;
		case 'f': d.fate = d.records = true; break;
		case 'j': d.json = true; break;
		case 'm':
			if (!parse_i64(optarg, 1, INT64_MAX, &d.max_bytes))
				return usage_error("--max-bytes needs a number above 0");
			break;
		case 'h': return show_help();
		default: return EXIT_USAGE;
		}
	}
	if (argc - optind < 1)
		return usage_error("dump needs a PARTITION_DIR or a segment FILE");
	if ((rc = tfs_io_create(TFS_IO_SYNC, &io)) < 0) {
		complain("cannot set up I/O: %s", tfs_strerror(rc));
		return EXIT_PROBLEM;
	}
	tfs_record_iter_init(&d.it);
	/* the bar only when it cannot mix with the dump itself */
	progress_init(&d.prog, "dump");
	d.prog.on = d.prog.on && !isatty(STDOUT_FILENO);
	if (d.json)
		printf("{\"files\": [");
	for (int i = optind; i < argc; i++) {
		/* gaps are tracked within one partition directory or file, not across */
		d.expect_known = false;
		dump_path(&d, io, argv[i]);
	}
	progress_clear(&d.prog);
	if (d.json)
		printf("\n]}\n");
	tfs_record_iter_release(&d.it);
	free(d.fates.v);
	tfs_io_destroy(io);
	return d.bad ? EXIT_PROBLEM : EXIT_OK;
}
