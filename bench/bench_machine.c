/* bench_machine.c - how far this machine lets writers scale, without the engine.
 *
 * What it measures: --writers threads, each writing its share of --bytes to a file
 * of its own, as an appender of the engine does: --chunk bytes per pwrite at the
 * file's end, a background fdatasync each time FLUSH_AHEAD_BYTES more were
 * written (when none is running), and a last fdatasync before the clock stops.
 * With --shared they append to one file instead, as two writers of one partition
 * do: each spends its CPU on its chunk on its own, then takes the file's lock to
 * write it at the end (and to start or join the file's one background fdatasync),
 * as the engine's group-commit leader writes a group while the next encodes.
 * Before each write a writer spends CPU on the chunk: --hash-per-byte bytes of
 * XXH3 for each byte written (the chunk hashed over and over, each pass seeded
 * with the last). That is the knob that makes it cost what an engine writer costs:
 * bench/engine.sh sets it so that one of these writers goes as fast, in a tmpfs,
 * as one engine writer (bench_append in the same run), then runs one and two of
 * them on the disk. Their ratio is what the cores and the disk of this machine
 * give two writers that each spend that CPU per byte: the kernel's writeback,
 * interrupts, and a hypervisor's own I/O work (steal time) come out of the same
 * cores. An engine that scales as well has nothing left to win there.
 *
 * The hashing is compute on a chunk that stays in cache; the engine's writer also
 * misses caches (its key directory), so it can suffer more from other work on the
 * memory bus: the ratio is an upper bound for the engine, not a prediction.
 *
 * --calibrate MBPS: instead, finds the --hash-per-byte at which one writer writes
 * MBPS MB/s in --dir (runs of --bytes at two settings, the median of three at
 * each, the cost taken as linear in it) and prints it as "hash_per_byte H".
 *
 * Output: "name value unit" lines: seconds, mb_per_s, cpu_cores (this process),
 * machine_busy_cores and machine_steal_cores (the whole machine, /proc/stat; steal
 * is time a hypervisor ran something else on a CPU the guest had work for).
 * MB is 10^6 bytes, as dd prints it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench/bench_util.h"

#define DEFAULT_CHUNK (128u << 10)          /* ~ one bench_append group of 1000 records */
#define MAX_CHUNK (64u << 20)
#define MAX_BYTES 1e15
#define MAX_HASH_PER_BYTE 1e6
#define MAX_MBPS 1e6
#define FLUSH_AHEAD_BYTES (8 << 20)         /* as the engine's active segment */
#define MAX_WRITERS 64
#define PATH_CAP 4096
#define DEFAULT_BYTES (64u << 20)
#define CALIBRATE_RUNS 3
#define CALIBRATE_LOW 4.0                   /* the two settings calibration times */
#define CALIBRATE_HIGH 32.0

struct opts {
	uint64_t bytes;
	unsigned writers;
	size_t chunk;
	double hash_per_byte;
	double calibrate_mbps;              /* 0: a normal run */
	bool shared;                        /* every writer appends to one file */
	const char *dir;
};

/* A file being appended to, by one writer or (--shared) by all under lock. */
struct file {
	int fd;
	pthread_mutex_t lock;
	uint64_t end;                       /* bytes written */
	uint64_t mark;                      /* end when the last flush started */
	uint64_t synced;                    /* end at the last writer's own fdatasync */
	/* the background fdatasync: at most one at a time */
	pthread_t flusher;
	bool flushing;
	atomic_bool flush_done;
	int flush_err;
	int err;                            /* first errno of a write or flush */
};

struct writer {
	pthread_t thread;
	const struct opts *o;
	pthread_barrier_t *start;
	struct file *file;
	uint64_t bytes;
	uint64_t digest;                    /* keeps the hashing from being optimised out */
};

static void *flush_main(void *arg)
{
	struct file *f = arg;

	if (fdatasync(f->fd) < 0)
		f->flush_err = errno;
	atomic_store(&f->flush_done, true);
	return NULL;
}

/* Joins the running flush: always when wait, else only a finished one. Under
 * f->lock. */
static void flush_join(struct file *f, bool wait)
{
	if (!f->flushing || (!wait && !atomic_load(&f->flush_done)))
		return;
	pthread_join(f->flusher, NULL);
	f->flushing = false;
	if (f->flush_err && !f->err)
		f->err = f->flush_err;
}

/* Writes n bytes at f's end and starts a flush ahead when one is due: 0, or -1
 * with f->err set. Under f->lock. */
static int append(struct file *f, const uint8_t *buf, size_t n)
{
	while (n > 0 && !f->err) {
		ssize_t put = pwrite(f->fd, buf, n, (off_t)f->end);
		if (put <= 0) {
			if (put == 0 || errno != EINTR)
				f->err = put == 0 ? EIO : errno;
			continue;
		}
		f->end += (uint64_t)put;
		buf += put;
		n -= (size_t)put;
	}
	flush_join(f, false);
	if (!f->err && f->end - f->mark >= FLUSH_AHEAD_BYTES && !f->flushing) {
		atomic_store(&f->flush_done, false);
		if (pthread_create(&f->flusher, NULL, flush_main, f) == 0)
			f->flushing = true;
		f->mark = f->end;
	}
	return f->err ? -1 : 0;
}

static void spend_cpu(struct writer *w, const uint8_t *chunk, size_t n)
{
	double todo = w->o->hash_per_byte * (double)n;

	while (todo >= 1) {
		size_t len = todo < (double)n ? (size_t)todo : n;
		w->digest = XXH3_64bits_withSeed(chunk, len, w->digest);
		todo -= (double)len;
	}
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct file *f = w->file;
	const struct opts *o = w->o;
	uint8_t *chunk = malloc(o->chunk);
	uint64_t done = 0;
	int rc = 0;

	if (chunk)
		for (size_t i = 0; i < o->chunk; i++)
			chunk[i] = (uint8_t)bench_mix64(i);
	pthread_barrier_wait(w->start);
	if (!chunk) {
		pthread_mutex_lock(&f->lock);
		f->err = f->err ? f->err : ENOMEM;
		pthread_mutex_unlock(&f->lock);
		return NULL;
	}
	while (rc == 0 && done < w->bytes) {
		size_t n = w->bytes - done < o->chunk ? (size_t)(w->bytes - done) : o->chunk;
		spend_cpu(w, chunk, n);
		chunk[0] = (uint8_t)w->digest;
		pthread_mutex_lock(&f->lock);
		rc = append(f, chunk, n);
		pthread_mutex_unlock(&f->lock);
		done += n;
	}
	pthread_mutex_lock(&f->lock);
	flush_join(f, true);
	/* with --shared, a writer skips the sync when one after the last write ran */
	if (!f->err && f->synced != f->end) {
		if (fdatasync(f->fd) < 0)
			f->err = errno;
		f->synced = f->end;
	}
	pthread_mutex_unlock(&f->lock);
	free(chunk);
	return NULL;
}

struct result {
	double secs;
	struct bench_cpu cpu0, cpu1;
};

/* Closes and removes the first n files, then root. */
static void remove_files(const char *root, struct file *f, unsigned n)
{
	char path[PATH_CAP + 16];

	for (unsigned i = 0; i < n; i++) {
		close(f[i].fd);
		pthread_mutex_destroy(&f[i].lock);
		snprintf(path, sizeof(path), "%s/w%u", root, i);
		unlink(path);
	}
	rmdir(root);
}

/* One timed run of o's writers in a fresh directory under o->dir. */
static int run(const struct opts *o, struct result *r)
{
	struct writer w[MAX_WRITERS];
	struct file f[MAX_WRITERS];
	pthread_barrier_t start;
	char root[PATH_CAP], path[PATH_CAP + 16];
	unsigned started = 0, nfiles = o->shared ? 1 : o->writers;
	uint64_t total = 0;
	int err = 0;

	if (snprintf(root, sizeof(root), "%s/tfs-machine-XXXXXX", o->dir) >= (int)sizeof(root) ||
	    !mkdtemp(root)) {
		fprintf(stderr, "bench_machine: cannot create a directory in %s: %s\n", o->dir,
		        strerror(errno));
		return -1;
	}
	/* every file before any thread, so a failure leaves nothing behind */
	for (unsigned i = 0; i < nfiles; i++) {
		f[i] = (struct file){ .fd = -1 };
		snprintf(path, sizeof(path), "%s/w%u", root, i);
		if (pthread_mutex_init(&f[i].lock, NULL) != 0) {
			fprintf(stderr, "bench_machine: cannot make a lock\n");
			remove_files(root, f, i);
			return -1;
		}
		f[i].fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (f[i].fd < 0) {
			fprintf(stderr, "bench_machine: cannot create %s: %s\n", path, strerror(errno));
			pthread_mutex_destroy(&f[i].lock);
			remove_files(root, f, i);
			return -1;
		}
	}
	for (unsigned i = 0; i < o->writers; i++)
		w[i] = (struct writer){ .o = o, .start = &start, .file = &f[o->shared ? 0 : i],
		                        .bytes = o->bytes * (i + 1) / o->writers - o->bytes * i / o->writers };
	if (pthread_barrier_init(&start, NULL, o->writers + 1) != 0) {
		fprintf(stderr, "bench_machine: cannot make a barrier\n");
		remove_files(root, f, nfiles);
		return -1;
	}
	for (unsigned i = 0; i < o->writers; i++) {
		if (pthread_create(&w[i].thread, NULL, writer_main, &w[i]) != 0) {
			fprintf(stderr, "bench_machine: cannot start a writer\n");
			exit(1);        /* the started writers wait at the barrier forever */
		}
		started++;
	}
	pthread_barrier_wait(&start);
	bench_cpu_now(&r->cpu0);
	r->secs = bench_now_s();
	for (unsigned i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	r->secs = bench_now_s() - r->secs;
	bench_cpu_now(&r->cpu1);
	pthread_barrier_destroy(&start);
	for (unsigned i = 0; i < nfiles; i++) {
		struct stat st;
		if (!f[i].err && fstat(f[i].fd, &st) < 0)
			f[i].err = errno;
		if (f[i].err && !err) {
			err = f[i].err;
			fprintf(stderr, "bench_machine: writing in %s: %s\n", root, strerror(err));
		}
		total += f[i].err ? 0 : (uint64_t)st.st_size;
	}
	if (!err && total != o->bytes) {
		fprintf(stderr, "bench_machine: %" PRIu64 " bytes in the files, not %" PRIu64 "\n",
		        total, o->bytes);
		err = EIO;
	}
	remove_files(root, f, nfiles);
	return err ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Seconds a byte costs one writer at hash_per_byte h in o->dir: the median of
 * CALIBRATE_RUNS runs of o->bytes. */
static int seconds_per_byte(const struct opts *o, double h, double *out)
{
	struct opts one = *o;
	struct result r;
	double s[CALIBRATE_RUNS];

	one.writers = 1;
	one.hash_per_byte = h;
	for (int i = 0; i < CALIBRATE_RUNS; i++) {
		if (run(&one, &r) < 0)
			return -1;
		s[i] = r.secs / (double)one.bytes;
	}
	qsort(s, CALIBRATE_RUNS, sizeof(s[0]), cmp_double);
	*out = s[CALIBRATE_RUNS / 2];
	return 0;
}

static int calibrate(const struct opts *o)
{
	double lo, hi, want = 1.0 / (o->calibrate_mbps * BENCH_BYTES_PER_MB), h;

	if (seconds_per_byte(o, CALIBRATE_LOW, &lo) < 0 || seconds_per_byte(o, CALIBRATE_HIGH, &hi) < 0)
		return 1;
	if (hi <= lo) {
		fprintf(stderr, "bench_machine: hashing more took no longer; cannot calibrate\n");
		return 1;
	}
	/* s(h) = lo + (h - LOW) * slope */
	h = CALIBRATE_LOW + (want - lo) * (CALIBRATE_HIGH - CALIBRATE_LOW) / (hi - lo);
	if (h < 0) {
		fprintf(stderr, "bench_machine: the writes alone are slower than %.1f MB/s\n",
		        o->calibrate_mbps);
		return 1;
	}
	if (h > MAX_HASH_PER_BYTE) {
		fprintf(stderr, "bench_machine: %.1f MB/s would take more hashing than --hash-per-byte "
		        "allows\n", o->calibrate_mbps);
		return 1;
	}
	printf("hash_per_byte %.2f bytes/byte\n", h);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: bench_machine --dir DIR [options]\n"
	        "  --bytes N            bytes written in all (default %u)\n"
	        "  --writers W          threads, each writing a file of its own (default 1)\n"
	        "  --shared             the writers append to one file, a write at a time\n"
	        "  --chunk B            bytes per write (default %u)\n"
	        "  --hash-per-byte H    bytes of XXH3 hashed per byte written (default 0)\n"
	        "  --calibrate MBPS     print the H at which one writer writes MBPS MB/s in DIR\n",
	        DEFAULT_BYTES, DEFAULT_CHUNK);
}

/* A number in [min, max] (strtod's forms: 122e6 is 122 MB). */
static int parse_double(const char *name, const char *s, double min, double max, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !(*out >= min && *out <= max)) {
		fprintf(stderr, "bench_machine: %s: not a number from %g to %g: '%s'\n", name, min, max, s);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "writers", required_argument, NULL, 'w' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "hash-per-byte", required_argument, NULL, 'h' },
		{ "calibrate", required_argument, NULL, 'C' },
		{ "shared", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .bytes = DEFAULT_BYTES, .writers = 1, .chunk = DEFAULT_CHUNK };
	struct result r;
	double v;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.dir = optarg;
			break;
		case 'b':
			if (parse_double("--bytes", optarg, 1, MAX_BYTES, &v) < 0)
				return 2;
			o.bytes = (uint64_t)v;
			break;
		case 'w':
			if (parse_double("--writers", optarg, 1, MAX_WRITERS, &v) < 0)
				return 2;
			if (v != (unsigned)v) {
				fprintf(stderr, "bench_machine: --writers: not a whole number: '%s'\n", optarg);
				return 2;
			}
			o.writers = (unsigned)v;
			break;
		case 'c':
			if (parse_double("--chunk", optarg, 1, MAX_CHUNK, &v) < 0)
				return 2;
			o.chunk = (size_t)v;
			break;
		case 'h':
			if (parse_double("--hash-per-byte", optarg, 0, MAX_HASH_PER_BYTE, &o.hash_per_byte) < 0)
				return 2;
			break;
		case 'C':
			if (parse_double("--calibrate", optarg, 0.001, MAX_MBPS, &o.calibrate_mbps) < 0)
				return 2;
			break;
		case 's':
			o.shared = true;
			break;
		case 'H':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!o.dir || optind < argc) {
		usage(stderr);
		return 2;
	}
	if (o.calibrate_mbps > 0)
		return calibrate(&o);
	printf("# bench_machine bytes=%" PRIu64 " writers=%u%s chunk=%zu hash_per_byte=%.2f dir=%s\n",
	       o.bytes, o.writers, o.shared ? " (one file)" : "", o.chunk, o.hash_per_byte, o.dir);
	if (run(&o, &r) < 0)
		return 1;
	printf("seconds %.3f s\n", r.secs);
	printf("mb_per_s %.1f MB/s\n", (double)o.bytes / BENCH_BYTES_PER_MB / r.secs);
	printf("cpu_cores %.2f cores\n", (r.cpu1.process_s - r.cpu0.process_s) / r.secs);
	if (r.cpu0.machine_busy_s >= 0 && r.cpu1.machine_busy_s >= 0) {
		printf("machine_busy_cores %.2f cores\n",
		       (r.cpu1.machine_busy_s - r.cpu0.machine_busy_s) / r.secs);
		printf("machine_steal_cores %.2f cores\n",
		       (r.cpu1.machine_steal_s - r.cpu0.machine_steal_s) / r.secs);
	}
	return 0;
}
