/* bench_kafka.c - a librdkafka client for bench/kafka.sh: producers and a consumer
 * against the mount's Kafka listener.
 *
 *   bench_kafka produce BROKER TOPIC N [PRODUCERS [PARTITIONS]]
 *       PRODUCERS threads (default 1), each its own idempotent producer
 *       (enable.idempotence=true, acks=all), send N records in all of 100-byte
 *       values with keys user-%07d (as bench_append's), round-robin over
 *       PARTITIONS partitions (default 1). The clock runs from the first send to
 *       the last delivery report.
 *   bench_kafka consume BROKER TOPIC N
 *       reads N records of partition 0 from the beginning (the simple consumer,
 *       no group); the clock runs from the start to the N-th record.
 *   bench_kafka latency BROKER TOPIC RATE SECONDS
 *       one idempotent producer (acks=all, linger.ms=0) sends RATE records a
 *       second for SECONDS; each record's latency is from its send to its
 *       delivery report.
 *
 * Output: "name value unit" lines (records_per_s, mb_per_s, seconds, p50_ms,
 * p99_ms, max_ms); "# ..." lines describe the run. Exit 1 on any delivery error.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define VALUE_BYTES 100
#define KEY_COUNT 1000000           /* distinct keys, as bench_append's default */
#define POLL_EVERY 1000             /* sends between two polls for reports */
#define FLUSH_MS 600000
#define CONSUME_TIMEOUT_MS 1000
#define CONSUME_BATCH 10000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static atomic_long delivery_errors;

static void conf_set(rd_kafka_conf_t *c, const char *name, const char *value)
{
	char err[256];

	if (rd_kafka_conf_set(c, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "bench_kafka: %s=%s: %s\n", name, value, err);
		exit(2);
	}
}

static rd_kafka_t *make(rd_kafka_type_t type, const char *broker, rd_kafka_conf_t *c)
{
	char err[512];
	rd_kafka_t *rk;

	conf_set(c, "bootstrap.servers", broker);
	rk = rd_kafka_new(type, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "bench_kafka: %s\n", err);
		exit(2);
	}
	return rk;
}

/* ---- produce ---- */

static void dr_count(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (m->err && atomic_fetch_add(&delivery_errors, 1) == 0)
		fprintf(stderr, "bench_kafka: delivery failed: %s\n", rd_kafka_err2str(m->err));
}

static rd_kafka_t *producer(const char *broker, const char *linger_ms,
                            void (*dr)(rd_kafka_t *, const rd_kafka_message_t *, void *))
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();

	conf_set(c, "enable.idempotence", "true");
	conf_set(c, "acks", "all");
	conf_set(c, "linger.ms", linger_ms);
	conf_set(c, "queue.buffering.max.messages", "1000000");
	conf_set(c, "queue.buffering.max.kbytes", "1048576");
	rd_kafka_conf_set_dr_msg_cb(c, dr);
	return make(RD_KAFKA_PRODUCER, broker, c);
}

struct pjob {
	const char *broker, *topic;
	long first, count;
	int partitions;
};

static void *produce_main(void *arg)
{
	struct pjob *j = arg;
	rd_kafka_t *rk = producer(j->broker, "5", dr_count);
	char key[32], value[VALUE_BYTES];

	memset(value, 'v', sizeof(value));
	for (long i = 0; i < j->count; i++) {
		long n = j->first + i;
		int klen = snprintf(key, sizeof(key), "user-%07ld", n % KEY_COUNT);
		rd_kafka_resp_err_t e;
		for (;;) {
			e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(j->topic),
			                      RD_KAFKA_V_PARTITION((int32_t)(n % j->partitions)),
			                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			                      RD_KAFKA_V_KEY(key, (size_t)klen),
			                      RD_KAFKA_V_VALUE(value, sizeof(value)), RD_KAFKA_V_END);
			if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
				break;
			rd_kafka_poll(rk, 10);      /* the queue is full: let reports drain it */
		}
		if (e) {
			fprintf(stderr, "bench_kafka: produce: %s\n", rd_kafka_err2str(e));
			atomic_fetch_add(&delivery_errors, 1);
			break;
		}
		if (i % POLL_EVERY == 0)
			rd_kafka_poll(rk, 0);
	}
	if (rd_kafka_flush(rk, FLUSH_MS) != RD_KAFKA_RESP_ERR_NO_ERROR)
		atomic_fetch_add(&delivery_errors, 1);
	rd_kafka_destroy(rk);
	return NULL;
}

static int cmd_produce(const char *broker, const char *topic, long n, int producers,
                       int partitions)
{
	pthread_t *t = calloc((size_t)producers, sizeof(*t));
	struct pjob *j = calloc((size_t)producers, sizeof(*j));
	double t0, secs;

	t0 = now_s();
	for (int i = 0; i < producers; i++) {
		j[i] = (struct pjob){ broker, topic, n / producers * i,
		                      i == producers - 1 ? n - n / producers * i : n / producers,
		                      partitions };
		pthread_create(&t[i], NULL, produce_main, &j[i]);
	}
	for (int i = 0; i < producers; i++)
		pthread_join(t[i], NULL);
	secs = now_s() - t0;
	printf("# %ld records of %d bytes, %d producers, %d partitions, idempotent, acks=all\n",
	       n, VALUE_BYTES, producers, partitions);
	printf("records_per_s %.0f records/s\n", (double)n / secs);
	printf("mb_per_s %.1f MB/s\n", (double)n * (VALUE_BYTES + 12) / secs / 1e6);
	printf("seconds %.3f s\n", secs);
	free(t);
	free(j);
	return atomic_load(&delivery_errors) ? 1 : 0;
}

/* ---- consume ---- */

static int cmd_consume(const char *broker, const char *topic, long n)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_topic_t *rkt;
	rd_kafka_message_t **batch = calloc(CONSUME_BATCH, sizeof(*batch));
	rd_kafka_t *rk;
	long got = 0;
	int64_t bytes = 0;
	double t0, secs;

	conf_set(c, "fetch.message.max.bytes", "8388608");
	conf_set(c, "fetch.max.bytes", "67108864");
	conf_set(c, "queued.max.messages.kbytes", "1048576");
	conf_set(c, "fetch.wait.max.ms", "100");
	rk = make(RD_KAFKA_CONSUMER, broker, c);
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	t0 = now_s();
	if (rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING) < 0) {
		fprintf(stderr, "bench_kafka: consume_start: %s\n",
		        rd_kafka_err2str(rd_kafka_last_error()));
		return 1;
	}
	while (got < n) {
		ssize_t k = rd_kafka_consume_batch(rkt, 0, CONSUME_TIMEOUT_MS, batch, CONSUME_BATCH);
		if (k < 0) {
			fprintf(stderr, "bench_kafka: consume: %s\n",
			        rd_kafka_err2str(rd_kafka_last_error()));
			return 1;
		}
		for (ssize_t i = 0; i < k; i++) {
			if (batch[i]->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
				got++;
				bytes += (int64_t)batch[i]->len + (int64_t)batch[i]->key_len;
			} else if (batch[i]->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
				fprintf(stderr, "bench_kafka: consume: %s\n",
				        rd_kafka_err2str(batch[i]->err));
				return 1;
			}
			rd_kafka_message_destroy(batch[i]);
		}
	}
	secs = now_s() - t0;
	rd_kafka_consume_stop(rkt, 0);
	printf("# %ld records read from the beginning of %s/0\n", got, topic);
	printf("records_per_s %.0f records/s\n", (double)got / secs);
	printf("mb_per_s %.1f MB/s\n", (double)bytes / secs / 1e6);
	printf("seconds %.3f s\n", secs);
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
	free(batch);
	return 0;
}

/* ---- latency ---- */

struct lat {
	double *ms;                     /* by record */
	long done;
};

static void dr_latency(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct lat *l = rd_kafka_opaque(rk);
	double *sent_at = m->_private;

	(void)opaque;
	if (m->err) {
		dr_count(rk, m, NULL);
		return;
	}
	l->ms[l->done++] = (now_s() - *sent_at) * 1e3;
	free(sent_at);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int cmd_latency(const char *broker, const char *topic, long rate, long seconds)
{
	long n = rate * seconds;
	struct lat l = { calloc((size_t)n, sizeof(double)), 0 };
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	char value[VALUE_BYTES], key[32];
	double t0;
	rd_kafka_t *rk;

	memset(value, 'v', sizeof(value));
	conf_set(c, "enable.idempotence", "true");
	conf_set(c, "acks", "all");
	conf_set(c, "linger.ms", "0");
	rd_kafka_conf_set_dr_msg_cb(c, dr_latency);
	rd_kafka_conf_set_opaque(c, &l);
	rk = make(RD_KAFKA_PRODUCER, broker, c);
	t0 = now_s();
	for (long i = 0; i < n; i++) {
		double due = t0 + (double)i / (double)rate, *at = malloc(sizeof(*at));
		int klen = snprintf(key, sizeof(key), "user-%07ld", i % KEY_COUNT);
		while (now_s() < due)
			rd_kafka_poll(rk, 0);       /* the fixed rate: wait for the slot */
		*at = now_s();
		if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
		                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		                      RD_KAFKA_V_KEY(key, (size_t)klen),
		                      RD_KAFKA_V_VALUE(value, sizeof(value)), RD_KAFKA_V_OPAQUE(at),
		                      RD_KAFKA_V_END) != RD_KAFKA_RESP_ERR_NO_ERROR) {
			fprintf(stderr, "bench_kafka: produce failed\n");
			return 1;
		}
		rd_kafka_poll(rk, 0);
	}
	rd_kafka_flush(rk, FLUSH_MS);
	rd_kafka_destroy(rk);
	if (l.done == 0)
		return 1;
	qsort(l.ms, (size_t)l.done, sizeof(double), cmp_double);
	printf("# %ld records at %ld/s, acks=all, linger.ms=0, idempotent\n", l.done, rate);
	printf("p50_ms %.3f ms\n", l.ms[l.done / 2]);
	printf("p99_ms %.3f ms\n", l.ms[l.done * 99 / 100]);
	printf("max_ms %.3f ms\n", l.ms[l.done - 1]);
	free(l.ms);
	return atomic_load(&delivery_errors) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "produce"))
		return cmd_produce(argv[2], argv[3], atol(argv[4]), argc > 5 ? atoi(argv[5]) : 1,
		                   argc > 6 ? atoi(argv[6]) : 1);
	if (argc == 5 && !strcmp(argv[1], "consume"))
		return cmd_consume(argv[2], argv[3], atol(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "latency"))
		return cmd_latency(argv[2], argv[3], atol(argv[4]), atol(argv[5]));
	fprintf(stderr, "usage: bench_kafka produce BROKER TOPIC N [PRODUCERS [PARTITIONS]]\n"
	                "       bench_kafka consume BROKER TOPIC N\n"
	                "       bench_kafka latency BROKER TOPIC RATE SECONDS\n");
	return 2;
}
