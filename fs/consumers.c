/* consumers.c - the mount's consumer state and the consumer-health metrics
 * (consumers.h). Each metric answers one line of the monitoring list that the
 * README's "Consumers" section explains:
 *
 *   topicfs_partition_cleaner_behind      a pass has run and the dirty ratio is
 *                                         back at or over min.cleanable.dirty.ratio
 *   topicfs_partition_keyless_fraction    keyless records among those produced
 *                                         since the log start (compacted topics)
 *   topicfs_partition_oldest_record_age_ms   against retention.ms
 *   topicfs_topic_bootstrap_ms            the last bootstrap from zero reported
 *   topicfs_group_*                       each group's lag against the tombstone
 *                                         window (consumer_groups.c)
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cleaner/cleaner.h"
#include "engine/groups/groups.h"
#include "engine/log/lag.h"
#include "fs/consumers.h"
#include "fs/node.h"

struct bootstrap {
	char *topic;
	int64_t ms;
};

struct tfs_consumers {
	pthread_mutex_t lock;
	struct bootstrap *boots;
	size_t nboots, boots_cap;
	char **groups;                  /* made by mkdir, no offset yet */
	size_t ngroups, groups_cap;
};

int tfs_consumers_create(struct tfs_consumers **out)
{
	struct tfs_consumers *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void tfs_consumers_destroy(struct tfs_consumers *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nboots; i++)
		free(c->boots[i].topic);
	for (size_t i = 0; i < c->ngroups; i++)
		free(c->groups[i]);
	free(c->boots);
	free(c->groups);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Makes room for one more element of size elem in *v (of capacity *cap). */
static int grow(void **v, size_t n, size_t *cap, size_t elem)
{
	void *p;
	size_t nc;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 8;
	p = realloc(*v, nc * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = nc;
	return 0;
}

int tfs_consumers_note_bootstrap(struct tfs_consumers *c, const char *topic, int64_t ms)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nboots; i++) {
		if (!strcmp(c->boots[i].topic, topic)) {
			c->boots[i].ms = ms;
			goto out;
		}
	}
	rc = grow((void **)&c->boots, c->nboots, &c->boots_cap, sizeof(*c->boots));
	if (rc == 0) {
		char *t = strdup(topic);
		if (!t)
			rc = -ENOMEM;
		else
			c->boots[c->nboots++] = (struct bootstrap){ t, ms };
	}
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int64_t tfs_consumers_bootstrap_ms(struct tfs_consumers *c, const char *topic)
{
	int64_t ms = -1;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nboots; i++)
		if (!strcmp(c->boots[i].topic, topic))
			ms = c->boots[i].ms;
	pthread_mutex_unlock(&c->lock);
	return ms;
}

static ssize_t group_index(const struct tfs_consumers *c, const char *group)
{
	for (size_t i = 0; i < c->ngroups; i++)
		if (!strcmp(c->groups[i], group))
			return (ssize_t)i;
	return -1;
}

int tfs_consumers_group_add(struct tfs_consumers *c, const char *group)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if (group_index(c, group) < 0) {
		rc = grow((void **)&c->groups, c->ngroups, &c->groups_cap, sizeof(*c->groups));
		if (rc == 0 && !(c->groups[c->ngroups] = strdup(group)))
			rc = -ENOMEM;
		if (rc == 0)
			c->ngroups++;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

bool tfs_consumers_group_has(struct tfs_consumers *c, const char *group)
{
	bool has;

	pthread_mutex_lock(&c->lock);
	has = group_index(c, group) >= 0;
	pthread_mutex_unlock(&c->lock);
	return has;
}

void tfs_consumers_group_remove(struct tfs_consumers *c, const char *group)
{
	ssize_t i;

	pthread_mutex_lock(&c->lock);
	i = group_index(c, group);
	if (i >= 0) {
		free(c->groups[i]);
		c->groups[i] = c->groups[--c->ngroups];
	}
	pthread_mutex_unlock(&c->lock);
}

int tfs_consumers_group_names(struct tfs_consumers *c, char ***names, size_t *count)
{
	char **v;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	*count = c->ngroups;
	v = calloc(c->ngroups ? c->ngroups : 1, sizeof(*v));
	for (size_t i = 0; v && i < c->ngroups; i++)
		if (!(v[i] = strdup(c->groups[i])))
			rc = -ENOMEM;
	pthread_mutex_unlock(&c->lock);
	if (!v)
		rc = -ENOMEM;
	if (rc < 0 && v) {
		for (size_t i = 0; i < *count; i++)
			free(v[i]);
		free(v);
		v = NULL;
	}
	*names = v;
	if (rc < 0)
		*count = 0;
	return rc;
}

/* ---- per-partition health -------------------------------------------------- */

struct health_row {
	char *topic;                    /* points into the names block */
	int32_t partition;
	struct tfs_topic_config cfg;
	struct tfs_plog_stats st;
	struct tfs_log_tally tally;
	bool have_tally;
	int64_t oldest_ts;              /* first record given from 0, -1 none */
	bool have_cleaner;
	struct tfs_cleaner_partition_info ci;
};

static int collect_health(struct tfs_mount *m, char ***names_out, struct health_row **out,
                          size_t *count)
{
	struct tfs_cleaner *cl = tfs_engine_cleaner(m->engine);
	struct health_row *rows = NULL;
	size_t n = 0, cap = 0, ntopics = 0;
	char **names = NULL;
	int rc = tfs_engine_topic_names(m->engine, &names, &ntopics);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < ntopics && rc == 0; i++) {
		struct tfs_topic *t = tfs_engine_topic_get(m->engine, names[i]);
		struct tfs_topic_config cfg;
		int32_t np;

		if (!t)
			continue;
		tfs_topic_get_config(t, &cfg);
		np = tfs_topic_partition_count(t);
		for (int32_t p = 0; p < np && rc == 0; p++) {
			struct tfs_plog *pl = tfs_topic_partition(t, p);
			struct health_row *r;
			struct tfs_lag lag;

			if (!pl)
				continue;
			rc = grow((void **)&rows, n, &cap, sizeof(*rows));
			if (rc < 0)
				break;
			r = &rows[n++];
			memset(r, 0, sizeof(*r));
			r->topic = names[i];
			r->partition = p;
			r->cfg = cfg;
			tfs_plog_stats(pl, &r->st);
			r->have_tally = tfs_plog_tally(pl, &r->tally) == 0;
			r->oldest_ts = tfs_plog_lag(pl, 0, &lag) == 0 ? lag.first_timestamp : -1;
			r->have_cleaner = cl && tfs_cleaner_partition_info(cl, pl, &r->ci) == 0;
		}
		tfs_topic_unref(t);
	}
	if (rc < 0) {
		free(rows);
		free(names);
		return rc;
	}
	*names_out = names;
	*out = rows;
	*count = n;
	return 0;
}

static bool compacted(const struct health_row *r)
{
	return r->cfg.cleanup_policy & TFS_POLICY_COMPACT;
}

/* Keyless records among those produced since the log start: every offset was one
 * record; markers are not produced records. -1 when not known. */
static double keyless_fraction(const struct health_row *r)
{
	int64_t produced = r->st.log_end_offset - r->st.log_start_offset - r->tally.control;

	if (!r->have_tally || produced <= 0)
		return -1;
	return (double)r->tally.keyless / (double)produced;
}

static bool cleaner_behind(const struct health_row *r)
{
	return r->have_cleaner && compacted(r) && r->ci.last_clean[0] &&
	       r->ci.dirty_ratio >= r->cfg.min_cleanable_dirty_ratio && r->ci.dirty_bytes > 0;
}

static int64_t oldest_age_ms(const struct health_row *r, int64_t now)
{
	return r->oldest_ts < 0 || r->oldest_ts > now ? 0 : now - r->oldest_ts;
}

#define ROW_LABELS "{topic=\"%s\",partition=\"%" PRId32 "\"}"

static void family(FILE *f, const char *metric, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", metric, help, metric);
}

static void write_health_metrics(FILE *f, struct tfs_mount *m, const struct health_row *rows,
                                 size_t n)
{
	int64_t now = tfs_now_ms();

	family(f, "topicfs_partition_dirty_ratio", "Dirty bytes over clean and dirty bytes.");
	for (size_t i = 0; i < n; i++)
		if (rows[i].have_cleaner)
			fprintf(f, "topicfs_partition_dirty_ratio" ROW_LABELS " %.6g\n", rows[i].topic,
			        rows[i].partition, rows[i].ci.dirty_ratio);
	family(f, "topicfs_partition_min_cleanable_dirty_ratio",
	       "The topic's min.cleanable.dirty.ratio.");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "topicfs_partition_min_cleanable_dirty_ratio" ROW_LABELS " %.6g\n",
		        rows[i].topic, rows[i].partition, rows[i].cfg.min_cleanable_dirty_ratio);
	family(f, "topicfs_partition_cleaner_behind",
	       "1 when a pass has run and the dirty ratio is back at or over min.cleanable.dirty.ratio.");
	for (size_t i = 0; i < n; i++)
		if (compacted(&rows[i]))
			fprintf(f, "topicfs_partition_cleaner_behind" ROW_LABELS " %d\n", rows[i].topic,
			        rows[i].partition, cleaner_behind(&rows[i]));
	family(f, "topicfs_partition_keyless_records",
	       "Records without a key on disk (a compacted topic never drops them).");
	for (size_t i = 0; i < n; i++)
		if (compacted(&rows[i]) && rows[i].have_tally)
			fprintf(f, "topicfs_partition_keyless_records" ROW_LABELS " %" PRId64 "\n",
			        rows[i].topic, rows[i].partition, rows[i].tally.keyless);
	family(f, "topicfs_partition_keyless_fraction",
	       "Keyless records among the records produced since the log start (compacted topics).");
	for (size_t i = 0; i < n; i++)
		if (compacted(&rows[i]) && keyless_fraction(&rows[i]) >= 0)
			fprintf(f, "topicfs_partition_keyless_fraction" ROW_LABELS " %.6g\n", rows[i].topic,
			        rows[i].partition, keyless_fraction(&rows[i]));
	family(f, "topicfs_partition_keyless_over_limit",
	       "1 when more than 1% of a compacted partition's records have no key.");
	for (size_t i = 0; i < n; i++)
		if (compacted(&rows[i]) && keyless_fraction(&rows[i]) >= 0)
			fprintf(f, "topicfs_partition_keyless_over_limit" ROW_LABELS " %d\n", rows[i].topic,
			        rows[i].partition, keyless_fraction(&rows[i]) > TFS_KEYLESS_FRACTION_LIMIT);
	family(f, "topicfs_partition_oldest_record_age_ms",
	       "Now minus the timestamp of the oldest record still on disk (0 when empty).");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "topicfs_partition_oldest_record_age_ms" ROW_LABELS " %" PRId64 "\n",
		        rows[i].topic, rows[i].partition, oldest_age_ms(&rows[i], now));
	family(f, "topicfs_partition_retention_ms", "The topic's retention.ms (-1 unlimited).");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "topicfs_partition_retention_ms" ROW_LABELS " %" PRId64 "\n", rows[i].topic,
		        rows[i].partition, rows[i].cfg.retention_ms);
	family(f, "topicfs_topic_bootstrap_ms",
	       "How long the last consumer that reported it took to bootstrap the topic from offset 0.");
	for (size_t i = 0; i < n; i++) {
		int64_t ms;
		if (i > 0 && rows[i].topic == rows[i - 1].topic)
			continue;
		ms = tfs_consumers_bootstrap_ms(m->consumers, rows[i].topic);
		if (ms >= 0)
			fprintf(f, "topicfs_topic_bootstrap_ms{topic=\"%s\"} %" PRId64 "\n", rows[i].topic,
			        ms);
	}
}

static void write_health_status(FILE *f, struct tfs_mount *m, const struct health_row *rows,
                                size_t n)
{
	int64_t now = tfs_now_ms();

	fprintf(f, "\nconsumers' view:\n");
	for (size_t i = 0; i < n; i++) {
		const struct health_row *r = &rows[i];
		double kf = keyless_fraction(r);
		int64_t age = oldest_age_ms(r, now);

		fprintf(f, "%s/%" PRId32 ": oldest record %" PRId64 " ms old", r->topic, r->partition, age);
		if (r->cfg.retention_ms >= 0)
			fprintf(f, " (retention.ms %" PRId64 "%s)", r->cfg.retention_ms,
			        age > r->cfg.retention_ms ? ", PAST IT" : "");
		if (compacted(r) && kf >= 0)
			fprintf(f, ", keyless %.2f%%%s", kf * 100,
			        kf > TFS_KEYLESS_FRACTION_LIMIT ? " (OVER 1%: a producer without keys?)" : "");
		if (cleaner_behind(r))
			fprintf(f, ", CLEANER BEHIND: dirty ratio %.2f still >= %.2f after a pass",
			        r->ci.dirty_ratio, r->cfg.min_cleanable_dirty_ratio);
		fputc('\n', f);
	}
	for (size_t i = 0; i < n; i++) {
		int64_t ms;
		if (i > 0 && rows[i].topic == rows[i - 1].topic)
			continue;
		ms = tfs_consumers_bootstrap_ms(m->consumers, rows[i].topic);
		if (ms >= 0)
			fprintf(f, "topic %s: last bootstrap from zero took %" PRId64 " ms\n", rows[i].topic,
			        ms);
	}
}

/* ---- each group's lag against the tombstone window ---------------------------- */

struct group_row {
	char *group;                    /* points into the names block */
	char *topic;                    /* owned */
	int32_t partition;
	int64_t committed;
	struct tfs_lag lag;
	int64_t lag_ms;
	int64_t window_ms;              /* the topic's delete.retention.ms */
};

static void group_rows_free(struct group_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(rows[i].topic);
	free(rows);
}

static int collect_groups(struct tfs_mount *m, char ***names_out, struct group_row **out,
                          size_t *count)
{
	struct tfs_groups *g = tfs_engine_groups(m->engine);
	struct group_row *rows = NULL;
	size_t n = 0, cap = 0, ngroups = 0;
	char **names = NULL;
	int64_t now = tfs_now_ms();
	int rc = g ? tfs_groups_list(g, &names, &ngroups) : 0;

	for (size_t i = 0; rc == 0 && i < ngroups; i++) {
		struct tfs_group_offset *o = NULL;
		size_t no = 0;

		if (tfs_groups_offsets(g, names[i], &o, &no) < 0)
			continue;               /* forgotten since the list */
		for (size_t j = 0; j < no && rc == 0; j++) {
			struct tfs_topic *t = tfs_engine_topic_get(m->engine, o[j].topic);
			struct tfs_plog *pl = t ? tfs_topic_partition(t, o[j].partition) : NULL;
			struct tfs_topic_config cfg;
			struct group_row *r;

			if (pl && (rc = grow((void **)&rows, n, &cap, sizeof(*rows))) == 0) {
				r = &rows[n];
				memset(r, 0, sizeof(*r));
				tfs_topic_get_config(t, &cfg);
				r->group = names[i];
				r->partition = o[j].partition;
				r->committed = o[j].offset;
				r->window_ms = cfg.delete_retention_ms;
				if (!(r->topic = strdup(o[j].topic)))
					rc = -ENOMEM;
				else if (tfs_plog_lag(pl, r->committed, &r->lag) == 0) {
					r->lag_ms = tfs_lag_ms(&r->lag, now);
					n++;
				} else
					free(r->topic);
			}
			tfs_topic_unref(t);
		}
		tfs_group_offsets_free(o, no);
	}
	if (rc < 0) {
		group_rows_free(rows, n);
		free(names);
		return rc;
	}
	*names_out = names;
	*out = rows;
	*count = n;
	return 0;
}

static bool past_half_window(const struct group_row *r)
{
	return (double)r->lag_ms > (double)r->window_ms * TFS_GROUP_LAG_WINDOW_FRACTION;
}

/* A label value in Prometheus's text format: backslash, quote and newline escaped
 * (a group id is any string). */
static void put_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void write_group_metrics(FILE *f, const struct group_row *rows, size_t n)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
		{ "topicfs_group_committed_offset", "The group's committed offset (the next it reads)." },
		{ "topicfs_group_log_end_offset", "The partition's log end offset." },
		{ "topicfs_group_lag_offsets", "Log end offset minus committed offset: an upper bound." },
		{ "topicfs_group_lag_records", "Records still on disk that the group has not read." },
		{ "topicfs_group_lag_ms", "Now minus the timestamp of the first record not read; 0 when caught up." },
		{ "topicfs_group_tombstone_window_ms", "The topic's delete.retention.ms." },
		{ "topicfs_group_lag_past_half_window",
		  "1 when lag_ms is past half of delete.retention.ms: deletions are no longer proven for it." },
	};

	for (size_t k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		family(f, fam[k].name, fam[k].help);
		for (size_t i = 0; i < n; i++) {
			const struct group_row *r = &rows[i];
			int64_t v[] = { r->committed, r->lag.log_end_offset, r->lag.lag_offsets,
			                r->lag.lag_records, r->lag_ms, r->window_ms, past_half_window(r) };
			fprintf(f, "%s{group=\"", fam[k].name);
			put_label(f, r->group);
			fprintf(f, "\",topic=\"%s\",partition=\"%" PRId32 "\"} %" PRId64 "\n", r->topic,
			        r->partition, v[k]);
		}
	}
}

static void write_group_status(FILE *f, const struct group_row *rows, size_t n)
{
	if (n)
		fprintf(f, "\n%-24s %-24s %5s %12s %12s %12s %14s\n", "group", "topic", "part",
		        "committed", "lag_offsets", "lag_records", "lag_ms");
	for (size_t i = 0; i < n; i++) {
		const struct group_row *r = &rows[i];
		fprintf(f, "%-24s %-24s %5" PRId32 " %12" PRId64 " %12" PRId64 " %12" PRId64 " %14" PRId64
		        "%s\n", r->group, r->topic, r->partition, r->committed, r->lag.lag_offsets,
		        r->lag.lag_records, r->lag_ms,
		        past_half_window(r) ? "  PAST HALF OF delete.retention.ms: deletions not proven" : "");
	}
}

/* Both views collect the same rows: the partitions' health, then the groups'. */
static void write_consumers(FILE *f, struct tfs_mount *m, bool status)
{
	struct health_row *rows = NULL;
	struct group_row *grows = NULL;
	char **names = NULL, **gnames = NULL;
	size_t n = 0, gn = 0;
	bool have = collect_health(m, &names, &rows, &n) == 0;
	bool ghave = collect_groups(m, &gnames, &grows, &gn) == 0;

	if (status && have)
		write_health_status(f, m, rows, n);
	if (status && ghave)
		write_group_status(f, grows, gn);
	if (!status && ghave)
		write_group_metrics(f, grows, gn);
	if (!status && have)
		write_health_metrics(f, m, rows, n);
	free(rows);
	free(names);
	group_rows_free(grows, gn);
	free(gnames);
}

void tfs_consumers_write_metrics(FILE *f, struct tfs_mount *m)
{
	write_consumers(f, m, false);
}

void tfs_consumers_write_status(FILE *f, struct tfs_mount *m)
{
	write_consumers(f, m, true);
}
