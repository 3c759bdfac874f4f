/* bench_kafka.c - the clients of bench/kafka.sh: librdkafka producers and
 * consumers against the mount's Kafka listener, a consumer that is only Kafka's
 * Fetch, and the loopback ceiling both consumers are measured against.
 *
 *   bench_kafka produce BROKER TOPIC N [PRODUCERS [PARTITIONS]]
 *       PRODUCERS threads (default 1), each its own idempotent producer
 *       (enable.idempotence=true, acks=all, linger.ms=5), send N records in all
 *       of 100-byte values with keys user-%07d (as bench_append's), round-robin
 *       over PARTITIONS partitions (default 1), enqueued with
 *       rd_kafka_produce_batch, a thousand a call, neither key nor value copied
 *       (the keys are formatted before the clock starts). The clock runs from the
 *       first send to the last delivery report; every record must be reported
 *       delivered.
 *   bench_kafka consume BROKER TOPIC N
 *       reads N records of partition 0 from the beginning (librdkafka's simple
 *       consumer, no group); the clock runs from the start to the N-th record.
 *   bench_kafka fetch BROKER TOPIC N
 *       the same with Fetch requests of its own (see cmd_fetch).
 *   bench_kafka loopback FILE...
 *       sendfile(2) of the files over one loopback TCP connection, received and
 *       dropped: what one connection on this machine carries.
 *   bench_kafka latency BROKER TOPIC RATE SECONDS
 *       one idempotent producer (acks=all, linger.ms=0) sends RATE records a
 *       second for SECONDS; each record's latency is from its send to its
 *       delivery report.
 *
 * BENCH_KAFKA_CONF="name=value,..." adds librdkafka settings to the producers'.
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

#include <arpa/inet.h>
#include <isa-l/crc.h>
#include <librdkafka/rdkafka.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define VALUE_BYTES 100
#define KEY_COUNT 1000000           /* distinct keys, as bench_append's default */
#define KEY_BYTES 12                /* "user-%07d" */
#define PRODUCE_BATCH 1000          /* records a rd_kafka_produce_batch call enqueues */
#define FLUSH_MS 600000
#define CONSUME_TIMEOUT_MS 1000
#define CONSUME_BATCH 10000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static atomic_long delivery_errors, delivered;

static void conf_set(rd_kafka_conf_t *c, const char *name, const char *value)
{
	char err[256];

	if (rd_kafka_conf_set(c, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "bench_kafka: %s=%s: %s\n", name, value, err);
		exit(2);
	}
}

/* BENCH_KAFKA_CONF="name=value,name=value": librdkafka settings over the ones
 * above, to try a client's tuning without rebuilding. */
static void conf_extra(rd_kafka_conf_t *c)
{
	const char *env = getenv("BENCH_KAFKA_CONF");
	char *copy, *item, *save = NULL;

	if (!env || !*env)
		return;
	copy = strdup(env);
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (!eq) {
			fprintf(stderr, "bench_kafka: BENCH_KAFKA_CONF: %s is not name=value\n", item);
			exit(2);
		}
		*eq = '\0';
		conf_set(c, item, eq + 1);
	}
	free(copy);
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
	if (!m->err)
		atomic_fetch_add(&delivered, 1);
	else if (atomic_fetch_add(&delivery_errors, 1) == 0)
		fprintf(stderr, "bench_kafka: delivery failed: %s\n", rd_kafka_err2str(m->err));
}

static rd_kafka_t *producer(const char *broker, const char *linger_ms,
                            void (*dr)(rd_kafka_t *, const rd_kafka_message_t *, void *))
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();

	conf_set(c, "enable.idempotence", "true");
	conf_set(c, "acks", "all");
	conf_set(c, "linger.ms", linger_ms);
	rd_kafka_conf_set_dr_msg_cb(c, dr);
	conf_extra(c);
	return make(RD_KAFKA_PRODUCER, broker, c);
}

struct pjob {
	const char *broker, *topic;
	long first, count;
	int partitions;
};

/* Every record's key, built before the clock starts (as bench_append builds its
 * batches first): formatting a key costs more than librdkafka's enqueue of it. */
static char (*keys)[KEY_BYTES];

static void keys_build(void)
{
	keys = malloc(sizeof(*keys) * KEY_COUNT);
	if (!keys) {
		fprintf(stderr, "bench_kafka: out of memory\n");
		exit(2);
	}
	for (long i = 0; i < KEY_COUNT; i++) {
		char k[32];
		snprintf(k, sizeof(k), "user-%07ld", i);
		memcpy(keys[i], k, KEY_BYTES);
	}
}

/* Enqueues the records first .. first + n - 1 with one rd_kafka_produce_batch
 * call, retrying the ones a full queue refused. Neither the keys nor the value
 * are copied: both outlive the producer. Returns 0, or -1 on another error. */
static int enqueue(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const struct pjob *j, long first,
                   int n, rd_kafka_message_t *msgs)
{
	static const char value[VALUE_BYTES] = { [0 ... VALUE_BYTES - 1] = 'v' };
	int done = 0;

	for (int i = 0; i < n; i++) {
		long r = first + i;
		msgs[i] = (rd_kafka_message_t){ .partition = (int32_t)(r % j->partitions),
		                                .payload = (void *)value, .len = sizeof(value),
		                                .key = keys[r % KEY_COUNT], .key_len = KEY_BYTES };
	}
	while (done < n) {
		int sent = rd_kafka_produce_batch(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_PARTITION,
		                                  msgs + done, n - done);
		int k = done;
		for (; k < done + sent; k++)
			if (msgs[k].err)
				break;
		if (k < n && msgs[k].err && msgs[k].err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			fprintf(stderr, "bench_kafka: produce: %s\n", rd_kafka_err2str(msgs[k].err));
			return -1;
		}
		/* produce_batch enqueues a prefix; the rest failed (queue full) */
		done = k;
		if (done < n)
			rd_kafka_poll(rk, 10);      /* let delivery reports drain the queue */
		else
			rd_kafka_poll(rk, 0);
	}
	return 0;
}

static void *produce_main(void *arg)
{
	struct pjob *j = arg;
	rd_kafka_t *rk = producer(j->broker, "5", dr_count);
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, j->topic, NULL);
	rd_kafka_message_t msgs[PRODUCE_BATCH];

	for (long i = 0; i < j->count; i += PRODUCE_BATCH) {
		int n = j->count - i < PRODUCE_BATCH ? (int)(j->count - i) : PRODUCE_BATCH;
		if (enqueue(rk, rkt, j, j->first + i, n, msgs) < 0) {
			atomic_fetch_add(&delivery_errors, 1);
			break;
		}
	}
	if (rd_kafka_flush(rk, FLUSH_MS) != RD_KAFKA_RESP_ERR_NO_ERROR)
		atomic_fetch_add(&delivery_errors, 1);
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
	return NULL;
}

static int cmd_produce(const char *broker, const char *topic, long n, int producers,
                       int partitions)
{
	pthread_t *t = calloc((size_t)producers, sizeof(*t));
	struct pjob *j = calloc((size_t)producers, sizeof(*j));
	double t0, secs;

	keys_build();
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
	printf("mb_per_s %.1f MB/s\n", (double)n * (VALUE_BYTES + KEY_BYTES) / secs / 1e6);
	printf("seconds %.3f s\n", secs);
	free(t);
	free(j);
	if (atomic_load(&delivered) != n) {
		fprintf(stderr, "bench_kafka: %ld of %ld records reported delivered\n",
		        atomic_load(&delivered), n);
		return 1;
	}
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

/* ---- fetch: a consumer that is only Kafka's Fetch ----
 * One connection, Fetch v4 requests (read_uncommitted) for partition 0 from offset
 * 0, as a Java consumer issues them: the next request leaves as soon as a response
 * is in, once its batch headers gave the next offset, and the response's records
 * are then checked while the broker serves the next one. Every batch's CRC-32C is
 * checked (ISA-L, as the broker does) and every record walked (length, offset
 * delta, key, value, headers), so a record counts only once a consumer could hand it
 * to the application. Only uncompressed batches: the bench writes those. */

#define FETCH_MAX_BYTES (32 << 20)  /* per request and per partition */
#define FETCH_MAX_WAIT_MS 100
#define FETCH_VERSION 4
#define BATCH_HEADER_BYTES 61       /* base offset .. record count */
#define BATCH_LOG_OVERHEAD 12       /* base offset + batch length */
#define BATCH_CRC_AT 17             /* CRC-32C of everything after it */
#define BATCH_ATTR_AT 21
#define BATCH_LAST_DELTA_AT 23
#define BATCH_COUNT_AT 57
#define ATTR_CODEC_MASK 7

struct wire {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct wire *w, const void *b, size_t n)
{
	memcpy(w->p + w->len, b, n);
	w->len += n;
}

static void put16(struct wire *w, int16_t v)
{
	uint16_t be = htons((uint16_t)v);
	put(w, &be, 2);
}

static void put32(struct wire *w, int32_t v)
{
	uint32_t be = htonl((uint32_t)v);
	put(w, &be, 4);
}

static void put64(struct wire *w, int64_t v)
{
	put32(w, (int32_t)((uint64_t)v >> 32));
	put32(w, (int32_t)(uint32_t)v);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t get64(const uint8_t *p)
{
	return (int64_t)((uint64_t)get32(p) << 32 | get32(p + 4));
}

static void die(const char *what)
{
	fprintf(stderr, "bench_kafka: fetch: %s\n", what);
	exit(1);
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die(strerror(errno));
		p += k;
		n -= (size_t)k;
	}
}

static void recv_all(int fd, uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = recv(fd, p, n, MSG_WAITALL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die(k == 0 ? "the broker closed the connection" : strerror(errno));
		p += k;
		n -= (size_t)k;
	}
}

static void fetch_send(int fd, const char *topic, int32_t corr, int64_t offset)
{
	uint8_t buf[512];
	struct wire w = { buf, 4, sizeof(buf) };
	size_t tlen = strlen(topic);
	static const char client[] = "bench_kafka";

	if (tlen > 255)
		die("topic name too long");
	put16(&w, 1);                       /* Fetch */
	put16(&w, FETCH_VERSION);
	put32(&w, corr);
	put16(&w, (int16_t)(sizeof(client) - 1));
	put(&w, client, sizeof(client) - 1);
	put32(&w, -1);                      /* replica id: a consumer */
	put32(&w, FETCH_MAX_WAIT_MS);
	put32(&w, 1);                       /* min bytes */
	put32(&w, FETCH_MAX_BYTES);
	w.p[w.len++] = 0;                   /* read_uncommitted */
	put32(&w, 1);
	put16(&w, (int16_t)tlen);
	put(&w, topic, tlen);
	put32(&w, 1);
	put32(&w, 0);                       /* partition */
	put64(&w, offset);
	put32(&w, FETCH_MAX_BYTES);
	{
		uint32_t be = htonl((uint32_t)(w.len - 4));
		memcpy(w.p, &be, 4);
	}
	send_all(fd, w.p, w.len);
}

/* Reads one response into *buf (grown as needed); returns the records' bytes and
 * sets *recs to them. */
static size_t fetch_recv(int fd, int32_t corr, uint8_t **buf, size_t *cap, const uint8_t **recs)
{
	uint8_t hdr[4];
	uint32_t len;
	const uint8_t *p, *end;
	int32_t rlen;

	recv_all(fd, hdr, 4);
	len = get32(hdr);
	if (len > (uint32_t)FETCH_MAX_BYTES * 2)
		die("response too large");
	if (len > *cap) {
		free(*buf);
		*cap = len;
		*buf = malloc(len);
		if (!*buf)
			die("out of memory");
	}
	recv_all(fd, *buf, len);
	p = *buf;
	end = p + len;
	/* correlation id, throttle, 1 topic (name), 1 partition: index, error, high
	 * watermark, last stable offset, aborted transactions, records */
	if (len < 4 + 4 + 4 + 2 || (int32_t)get32(p) != corr)
		die("bad response header");
	p += 8;
	if (get32(p) != 1)
		die("not one topic in the response");
	p += 4;
	p += 2 + (size_t)(p[0] << 8 | p[1]);
	if (p + 4 + 4 + 2 + 8 + 8 + 4 > end || get32(p) != 1)
		die("not one partition in the response");
	p += 8;
	if (p[0] || p[1]) {
		fprintf(stderr, "bench_kafka: fetch: error %d\n", p[0] << 8 | p[1]);
		exit(1);
	}
	p += 2 + 8 + 8;
	{
		int32_t aborted = (int32_t)get32(p);
		p += 4;
		if (aborted > 0)
			p += (size_t)aborted * 16;
	}
	if (p + 4 > end)
		die("truncated response");
	rlen = (int32_t)get32(p);
	p += 4;
	if (rlen < 0)
		rlen = 0;
	if (p + rlen > end)
		die("records past the response");
	*recs = p;
	return (size_t)rlen;
}

/* Whole batches at the start of recs: their bytes, and *next the offset after them. */
static size_t whole_batches(const uint8_t *recs, size_t n, int64_t *next)
{
	size_t at = 0;

	while (n - at >= BATCH_HEADER_BYTES) {
		uint32_t blen = get32(recs + at + 8);
		if (blen < BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD || n - at - BATCH_LOG_OVERHEAD < blen)
			break;                      /* the broker cut the last one short */
		*next = get64(recs + at) + (int32_t)get32(recs + at + BATCH_LAST_DELTA_AT) + 1;
		at += BATCH_LOG_OVERHEAD + blen;
	}
	return at;
}

static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	die("bad varint");
	return 0;
}

static int64_t zigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Checks and walks every batch in recs[0..n); returns the records, adding their
 * key and value bytes to *bytes. */
static long walk_batches(const uint8_t *recs, size_t n, int64_t *bytes)
{
	long got = 0;

	for (size_t at = 0; at < n;) {
		const uint8_t *b = recs + at, *end = b + BATCH_LOG_OVERHEAD + get32(b + 8), *p;
		uint32_t want = get32(b + BATCH_CRC_AT);
		int32_t count = (int32_t)get32(b + BATCH_COUNT_AT);

		if (~crc32_iscsi((unsigned char *)(uintptr_t)(b + BATCH_ATTR_AT),
		                 (int)(end - b - BATCH_ATTR_AT), 0xffffffffu) != want)
			die("a batch fails its CRC-32C");
		if ((b[BATCH_ATTR_AT + 1] & ATTR_CODEC_MASK) != 0)
			die("a compressed batch (bench_kafka produces uncompressed ones)");
		p = b + BATCH_HEADER_BYTES;
		for (int32_t i = 0; i < count; i++) {
			int64_t rlen = zigzag(varint(&p, end)), klen, vlen;
			const uint8_t *rend = p + rlen;
			if (rlen <= 0 || rend > end)
				die("a record past its batch");
			p++;                        /* attributes */
			(void)varint(&p, rend);     /* timestamp delta */
			(void)varint(&p, rend);     /* offset delta */
			klen = zigzag(varint(&p, rend));
			if (klen > 0)
				p += klen;
			vlen = zigzag(varint(&p, rend));
			if (vlen > 0)
				p += vlen;
			if (p > rend)
				die("a key or value past its record");
			*bytes += (klen > 0 ? klen : 0) + (vlen > 0 ? vlen : 0);
			p = rend;                   /* headers: none from bench_kafka */
		}
		if (p != end)
			die("a batch's records do not fill it");
		got += count;
		at = (size_t)(end - recs);
	}
	return got;
}

static int connect_to(const char *broker)
{
	char host[256];
	const char *colon = strrchr(broker, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int fd, one = 1;

	if (!colon || (size_t)(colon - broker) >= sizeof(host))
		die("BROKER is host:port");
	memcpy(host, broker, (size_t)(colon - broker));
	host[colon - broker] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		die("cannot resolve the broker");
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die(strerror(errno));
	freeaddrinfo(ai);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* The receiving thread fills FETCH_SLOTS buffers in turn; the main thread checks
 * them in the same order. */
#define FETCH_SLOTS 4

struct fetch_slot {
	uint8_t *buf;
	size_t cap;
	const uint8_t *recs;
	size_t whole;                   /* bytes of whole batches at recs */
};

struct fetcher {
	int fd;
	const char *topic;
	long want;                      /* records; stops once its batches hold them */
	struct fetch_slot slot[FETCH_SLOTS];
	pthread_mutex_t lock;
	pthread_cond_t moved;
	unsigned filled, checked;       /* slots handed over / given back, ever */
};

static void *fetch_main(void *arg)
{
	struct fetcher *f = arg;
	int64_t next = 0;
	long seen = 0;
	int32_t corr = 1;

	fetch_send(f->fd, f->topic, corr, next);
	for (unsigned i = 0; seen < f->want; i++) {
		struct fetch_slot *s = &f->slot[i % FETCH_SLOTS];
		int64_t before = next;
		size_t len;

		pthread_mutex_lock(&f->lock);
		while (f->filled - f->checked == FETCH_SLOTS)
			pthread_cond_wait(&f->moved, &f->lock);
		pthread_mutex_unlock(&f->lock);
		len = fetch_recv(f->fd, corr, &s->buf, &s->cap, &s->recs);
		s->whole = whole_batches(s->recs, len, &next);
		if (s->whole == 0 && len > 0)
			die("a batch larger than the fetch size");
		seen += next - before;          /* offsets: no gaps in a fresh partition */
		if (seen < f->want)
			fetch_send(f->fd, f->topic, ++corr, next);
		pthread_mutex_lock(&f->lock);
		f->filled++;
		pthread_cond_signal(&f->moved);
		pthread_mutex_unlock(&f->lock);
	}
	return NULL;
}

static int cmd_fetch(const char *broker, const char *topic, long n)
{
	struct fetcher f = { .topic = topic, .want = n, .lock = PTHREAD_MUTEX_INITIALIZER,
	                     .moved = PTHREAD_COND_INITIALIZER };
	pthread_t t;
	int64_t bytes = 0;
	long got = 0;
	double t0 = now_s(), secs;

	f.fd = connect_to(broker);
	pthread_create(&t, NULL, fetch_main, &f);
	for (unsigned i = 0; got < n; i++) {
		struct fetch_slot *s = &f.slot[i % FETCH_SLOTS];
		pthread_mutex_lock(&f.lock);
		while (f.filled == f.checked)
			pthread_cond_wait(&f.moved, &f.lock);
		pthread_mutex_unlock(&f.lock);
		got += walk_batches(s->recs, s->whole, &bytes);
		pthread_mutex_lock(&f.lock);
		f.checked++;
		pthread_cond_signal(&f.moved);
		pthread_mutex_unlock(&f.lock);
	}
	secs = now_s() - t0;
	pthread_join(t, NULL);
	close(f.fd);
	printf("# %ld records read from the beginning of %s/0 with Fetch v%d, %d MiB a request,"
	       " every batch's CRC-32C checked and every record walked\n", got, topic,
	       FETCH_VERSION, FETCH_MAX_BYTES >> 20);
	printf("records_per_s %.0f records/s\n", (double)got / secs);
	printf("mb_per_s %.1f MB/s\n", (double)bytes / secs / 1e6);
	printf("seconds %.3f s\n", secs);
	for (int i = 0; i < FETCH_SLOTS; i++)
		free(f.slot[i].buf);
	return 0;
}

/* ---- loopback: what one TCP connection on this machine carries ----
 * A thread sendfile(2)s the given files (the segments the consumers read) over a
 * loopback connection, as the listener does, and the main thread receives them
 * into a FETCH_MAX_BYTES buffer and does nothing else: the ceiling of any consumer
 * of one partition over one connection, for bench/kafka.sh to print beside cat's. */

struct loop_job {
	int fd;
	char **files;
	int nfiles;
};

static void *loop_send(void *arg)
{
	struct loop_job *j = arg;

	for (int i = 0; i < j->nfiles; i++) {
		int in = open(j->files[i], O_RDONLY);
		off_t off = 0;
		struct stat st;
		if (in < 0 || fstat(in, &st) < 0)
			die(strerror(errno));
		while (off < st.st_size) {
			ssize_t k = sendfile(j->fd, in, &off, (size_t)(st.st_size - off));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				die(strerror(errno));
		}
		close(in);
	}
	shutdown(j->fd, SHUT_WR);
	return NULL;
}

static int cmd_loopback(char **files, int nfiles)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM, 0), cfd, sfd;
	uint8_t *buf = malloc(FETCH_MAX_BYTES);
	struct loop_job j;
	pthread_t t;
	int64_t total = 0;
	double t0, secs;

	if (ls < 0 || !buf || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) < 0)
		die(strerror(errno));
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die(strerror(errno));
	sfd = accept(ls, NULL, NULL);
	if (sfd < 0)
		die(strerror(errno));
	j = (struct loop_job){ sfd, files, nfiles };
	t0 = now_s();
	pthread_create(&t, NULL, loop_send, &j);
	for (;;) {
		ssize_t k = recv(cfd, buf, FETCH_MAX_BYTES, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die(strerror(errno));
		if (k == 0)
			break;
		total += k;
	}
	secs = now_s() - t0;
	pthread_join(t, NULL);
	printf("# %" PRId64 " bytes of %d files sent with sendfile over loopback TCP, received\n",
	       total, nfiles);
	printf("mb_per_s %.1f MB/s\n", (double)total / secs / 1e6);
	printf("seconds %.3f s\n", secs);
	close(cfd);
	close(sfd);
	close(ls);
	free(buf);
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
	if (argc >= 3 && !strcmp(argv[1], "loopback"))
		return cmd_loopback(argv + 2, argc - 2);
	if (argc == 5 && !strcmp(argv[1], "fetch"))
		return cmd_fetch(argv[2], argv[3], atol(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "latency"))
		return cmd_latency(argv[2], argv[3], atol(argv[4]), atol(argv[5]));
	fprintf(stderr, "usage: bench_kafka produce BROKER TOPIC N [PRODUCERS [PARTITIONS]]\n"
	                "       bench_kafka consume BROKER TOPIC N\n"
	                "       bench_kafka fetch BROKER TOPIC N\n"
	                "       bench_kafka loopback FILE...\n"
	                "       bench_kafka latency BROKER TOPIC RATE SECONDS\n");
	return 2;
}
