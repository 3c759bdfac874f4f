/* server.c - the listener's event loops (see kafka.h).
 *
 * Design: a fixed pool of threads (num.network.threads), each with its own epoll
 * set; the listening socket is in every set with EPOLLEXCLUSIVE, so the kernel
 * hands each new connection to one waiting thread, which owns the connection for
 * its life. No thread per connection: 1,000 idle connections cost 1,000 sockets
 * and as many small structs. A thread runs a request to its end, engine call
 * included (an append waits for its group commit, which is short: Kafka's acks
 * do not fsync, and neither does this), so the pool size bounds how many
 * requests run at once.
 *
 * A connection, as in Kafka:
 *   (1) frames are int32 size + size bytes; a size below a request header's or
 *       above socket.request.max.bytes closes the connection before any of it
 *       is buffered;
 *   (2) requests are handled one at a time, in arrival order, and responses
 *       leave in the same order; a long-poll Fetch that parks blocks only its own
 *       connection (later requests wait behind it, as Kafka mutes the channel);
 *   (3) bounded memory: the input buffer holds at most one frame plus a read's
 *       worth, and grows with the bytes that arrive (at most doubling), not
 *       with the size a frame claims; no request is handled while more than OUT_HIGH bytes of responses
 *       wait to be sent, and then nothing more is read either, so a client that
 *       stops reading stops being served without growing anything or holding a
 *       thread (the socket's own buffers fill, and TCP pushes back on it);
 *   (4) a Fetch's records are not copied: the response holds spans of segment
 *       files (a reference and a descriptor each) that leave by sendfile(2).
 *   (5) bounded memory over all connections (queued.max.request.bytes, Kafka's
 *       memory pool for requests): a connection's first READ_CHUNK of input
 *       buffer is its own, so small requests are always read; every byte beyond
 *       it, and every response buffer waiting to be sent, is taken from one
 *       count shared by all loops. A buffer may grow only while the count is
 *       below the bound (as Kafka's pool, it may then pass the bound by that one
 *       growth, so a request larger than the bound is still read); otherwise the
 *       connection stops reading (starved) until bytes are given back, when
 *       every loop with starved connections is woken to read them again. A
 *       connection with responses waiting handles no request while the count
 *       is past the bound. So the listener buffers at most the bound, plus one
 *       growth and one response per connection, plus READ_CHUNK per connection.
 *
 * Long polls: a parked Fetch is tried again when any append to the engine,
 * through the listener or through the mount, wakes the loops (the engine's
 * append hook writes each loop's eventfd while fetches are parked), and it is
 * answered at the latest at its max.wait.ms.
 *
 * Threads: each connection is touched by its loop's thread only; the struct
 * tfs_kafka is immutable while the loops run.
 */
#include "kafka/kafka_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/log/segment.h"
#include "io/log.h"
#include "kafka/group.h"

#define OUT_HIGH (1u << 20)             /* (3) responses waiting before a mute */
#define READ_CHUNK (64u << 10)          /* bytes buffered beyond the frame in hand */
#define FRAME_MIN 8                     /* api key, version, correlation id */
#define MAX_EVENTS 64
#define RELISTEN_MS 100                 /* after EMFILE, the listener rests this long */

struct resp {
	struct resp *next;
	struct kw w;
	size_t piece;                       /* 2i: bytes before hole i; 2i+1: hole i */
	size_t off;                         /* sent of that piece */
	int fd;                             /* of the hole being sent, or -1 */
};

struct conn {
	int fd;
	struct tfs_kafka_loop *lp;
	struct conn *prev, *next;           /* every connection of the loop */
	struct conn *pnext;                 /* parked connections of the loop */
	bool parked;
	bool timed;                         /* parked on the loop's timed list */
	int64_t parked_at, wake_at;
	uint64_t id;                        /* tfs_kafka_ctx.conn_id */
	char host[INET6_ADDRSTRLEN + 2];    /* "/ADDRESS" (DescribeGroups' client host) */
	struct tfs_kafka_peer peer;
	struct tfs_kafka_sasl sasl;
	uint8_t *in;
	size_t in_len, in_cap;
	size_t in_pooled;                   /* of in_cap, taken from k->queued (5) */
	struct resp *out_head, *out_tail;
	size_t out_bytes;
	uint32_t events;                    /* registered with epoll */
	bool starved;                       /* (5): reading waits for the pool */
	bool rdhup;                         /* the peer shut its side while starved */
	struct conn *snext;                 /* starved connections of the loop */
};

struct tfs_kafka_loop {
	struct tfs_kafka *k;
	pthread_t thread;
	bool started;
	int epfd, evfd;
	atomic_bool stop;
	struct conn *conns;
	struct conn *parked;                /* waiting for an append, a group change
	                                     * or their deadline: retried on a wake-up */
	struct conn *timed;                 /* waiting for their deadline alone */
	struct conn *starved;               /* (5) */
	int64_t relisten_at;                /* 0: the listener is in the epoll set */
};

static void wake_loops(struct tfs_kafka *k);

/* ---- the pool of queued bytes (5) ---- */

static bool pool_over(struct tfs_kafka *k)
{
	return k->cfg.queued_max_bytes >= 0 &&
	       atomic_load(&k->queued) >= (size_t)k->cfg.queued_max_bytes;
}

/* Takes n bytes if the count is below the bound. */
static bool pool_take(struct tfs_kafka *k, size_t n)
{
	size_t cur = atomic_load(&k->queued);

	do {
		if (k->cfg.queued_max_bytes >= 0 && cur >= (size_t)k->cfg.queued_max_bytes)
			return false;
	} while (!atomic_compare_exchange_weak(&k->queued, &cur, cur + n));
	return true;
}

/* Gives n bytes back; wakes the loops when connections wait and room came back.
 * The order (count first, then starved) pairs with starve()'s (starved first,
 * then the count): one of the two sees the other's change. */
static void pool_give(struct tfs_kafka *k, size_t n)
{
	if (n == 0)
		return;
	atomic_fetch_sub(&k->queued, n);
	if (atomic_load(&k->starved) > 0 && !pool_over(k))
		wake_loops(k);
}

/* Stops c reading until the pool has room. False if room came back meanwhile (c
 * reads on). */
static bool starve(struct conn *c)
{
	struct tfs_kafka *k = c->lp->k;

	atomic_fetch_add(&k->starved, 1);
	if (!pool_over(k)) {
		atomic_fetch_sub(&k->starved, 1);
		return false;
	}
	c->starved = true;
	c->snext = c->lp->starved;
	c->lp->starved = c;
	return true;
}

/* The link at offset link of a connection: pnext or snext. */
static struct conn **link_at(struct conn *c, size_t link)
{
	return (struct conn **)((char *)c + link);
}

/* Unlinks c from a loop's list of parked or starved connections, whose links
 * are at offset link in each connection. */
static void list_unlink(struct conn **head, struct conn *c, size_t link)
{
	for (struct conn **pp = head; *pp; pp = link_at(*pp, link))
		if (*pp == c) {
			*pp = *link_at(c, link);
			break;
		}
	*link_at(c, link) = NULL;
}

static void starved_remove(struct conn *c)
{
	list_unlink(&c->lp->starved, c, offsetof(struct conn, snext));
	atomic_fetch_sub(&c->lp->k->starved, 1);
	c->starved = false;
}

/* Frees c's input buffer, giving back what it took. */
static void in_free(struct conn *c)
{
	pool_give(c->lp->k, c->in_pooled);
	free(c->in);
	c->in = NULL;
	c->in_cap = 0;
	c->in_pooled = 0;
}

static void resp_free(struct tfs_kafka *k, struct resp *r)
{
	if (r->fd >= 0)
		close(r->fd);
	pool_give(k, r->w.len);
	kw_free(&r->w);
	free(r);
}

static void park_remove(struct conn *c)
{
	if (c->timed) {
		list_unlink(&c->lp->timed, c, offsetof(struct conn, pnext));
		atomic_fetch_sub(&c->lp->k->timed, 1);
	} else {
		list_unlink(&c->lp->parked, c, offsetof(struct conn, pnext));
		atomic_fetch_sub(&c->lp->k->parked, 1);
	}
	c->parked = c->timed = false;
}

static void conn_close(struct conn *c)
{
	struct tfs_kafka_loop *lp = c->lp;

	if (c->parked)
		park_remove(c);
	if (c->starved)
		starved_remove(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		lp->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	atomic_fetch_sub(&lp->k->open_conns, 1);
	tfs__kafka_sasl_release(&c->sasl);
	while (c->out_head) {
		struct resp *r = c->out_head;
		c->out_head = r->next;
		resp_free(lp->k, r);
	}
	in_free(c);
	free(c);
}

/* Registers the events c needs now: input unless muted (3), output while
 * responses wait. */
static int conn_update(struct conn *c)
{
	uint32_t ev = 0;
	struct epoll_event e;

	if (!c->parked && !c->starved && c->out_bytes <= OUT_HIGH)
		ev |= EPOLLIN;
	if (c->starved && !c->rdhup)
		ev |= EPOLLRDHUP;               /* a starved peer that goes lets its bytes go */
	if (c->out_head)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return 0;
	e.events = ev;
	e.data.ptr = c;
	if (epoll_ctl(c->lp->epfd, EPOLL_CTL_MOD, c->fd, &e) < 0)
		return -errno;
	c->events = ev;
	return 0;
}

/* Sends what the socket takes. 0, or -1 to close. */
static int conn_send(struct conn *c)
{
	while (c->out_head) {
		struct resp *r = c->out_head;
		size_t nh = r->w.nholes;

		while (r->piece <= 2 * nh) {
			ssize_t n;
			if (r->piece % 2 == 0) {
				size_t h = r->piece / 2;
				size_t from = h == 0 ? 0 : r->w.holes[h - 1].at;
				size_t to = h < nh ? r->w.holes[h].at : r->w.len;
				if (r->off == to - from) {
					r->piece++;
					r->off = 0;
					continue;
				}
				n = send(c->fd, r->w.buf + from + r->off, to - from - r->off,
				         MSG_NOSIGNAL | MSG_DONTWAIT);
			} else {
				struct tfs_plog_span *s = &r->w.holes[r->piece / 2].span;
				off_t pos;
				if (r->off == s->len) {
					close(r->fd);
					r->fd = -1;
					r->piece++;
					r->off = 0;
					continue;
				}
				if (r->fd < 0) {
					r->fd = tfs_plog_span_fd(s);
					if (r->fd < 0) {
						tfs_log_warn("kafka", "cannot open a segment to send records: "
						             "%s; closing the connection", tfs_strerror(r->fd));
						return -1;
					}
				}
				pos = (off_t)(s->pos + (tfs_pos_t)r->off);
				n = sendfile(c->fd, r->fd, &pos, s->len - r->off);
				if (n == 0) {
					tfs_log_warn("kafka", "segment %s/%020lld.log is shorter than its "
					             "batches; closing the connection", s->seg->dir,
					             (long long)s->seg->base_offset);
					return -1;
				}
			}
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return 0;
				if (errno == EINTR)
					continue;
				return -1;          /* the peer went away */
			}
			r->off += (size_t)n;
			c->out_bytes -= (size_t)n;
		}
		c->out_head = r->next;
		if (!c->out_head)
			c->out_tail = NULL;
		resp_free(c->lp->k, r);
	}
	return 0;
}

static int queue_response(struct conn *c, struct kw *w)
{
	struct resp *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->w = *w;
	r->fd = -1;
	kw_init(w);
	if (c->out_tail)
		c->out_tail->next = r;
	else
		c->out_head = r;
	c->out_tail = r;
	c->out_bytes += r->w.len + r->w.span_bytes;
	/* the request is done: its response is counted even past the bound, and
	 * conn_process handles no more while this one waits (5) */
	atomic_fetch_add(&c->lp->k->queued, r->w.len);
	return 0;
}

/* Whether c may handle its next request: not parked, not muted by its own
 * responses (3), and none waiting while the pool is past its bound (5). */
static bool may_process(struct conn *c)
{
	return !c->parked && c->out_bytes <= OUT_HIGH && !(c->out_head && pool_over(c->lp->k));
}

/* Handles the complete frames at the start of c->in while c is not muted (2, 3).
 * 0, or -1 to close. */
static int conn_process(struct conn *c)
{
	struct tfs_kafka *k = c->lp->k;

	while (may_process(c) && c->in_len >= 4) {
		uint32_t size = ((uint32_t)c->in[0] << 24) | ((uint32_t)c->in[1] << 16) |
		                ((uint32_t)c->in[2] << 8) | c->in[3];
		struct tfs_kafka_ctx ctx = { .k = k, .peer = &c->peer, .sasl = &c->sasl,
		                             .conn_id = c->id, .retry = c->parked_at != 0,
		                             .peer_host = c->host };
		bool raw = tfs__kafka_sasl_raw(&c->sasl);
		enum tfs_kafka_verdict v;
		struct kw w;

		if ((size < FRAME_MIN && !raw) || size > (uint32_t)k->cfg.request_max_bytes) {
			tfs_log_warn("kafka", "a frame of %u bytes (socket.request.max.bytes=%d): "
			             "closing the connection", size, (int)k->cfg.request_max_bytes);
			return -1;
		}
		if (c->in_len < 4 + (size_t)size)
			break;
		ctx.now_ms = tfs_mono_ms();
		ctx.parked_at_ms = c->parked_at ? c->parked_at : ctx.now_ms;
		kw_init(&w);
		if (raw)
			v = tfs__kafka_sasl_raw_token(&ctx, c->in + 4, size, &w);
		else
			v = tfs_kafka_handle(&ctx, c->in + 4, size, &w);
		if (v == KAFKA_CLOSE || w.oom) {
			kw_free(&w);
			return -1;
		}
		if (v == KAFKA_PARK) {
			kw_free(&w);
			if (!c->parked_at)
				c->parked_at = ctx.now_ms;
			c->wake_at = ctx.wake_at_ms;
			c->parked = true;
			/* a wait only the clock ends (a failed login's delay) is not
			 * tried again at every append: a flood of them costs nothing */
			c->timed = ctx.park_clock_only;
			atomic_fetch_add(c->timed ? &k->timed : &k->parked, 1);
			c->pnext = c->timed ? c->lp->timed : c->lp->parked;
			*(c->timed ? &c->lp->timed : &c->lp->parked) = c;
			break;
		}
		c->parked_at = 0;
		if (v == KAFKA_REPLY && queue_response(c, &w) < 0) {
			kw_free(&w);
			return -1;
		}
		kw_free(&w);
		memmove(c->in, c->in + 4 + size, c->in_len - 4 - size);
		c->in_len -= 4 + (size_t)size;
	}
	return 0;
}

/* Reads what the socket has, up to the frame in hand plus READ_CHUNK (3). */
static int conn_read(struct conn *c)
{
	struct tfs_kafka *k = c->lp->k;

	for (;;) {
		size_t want = READ_CHUNK;
		ssize_t n;

		if (c->in_len >= 4) {
			uint32_t size = ((uint32_t)c->in[0] << 24) | ((uint32_t)c->in[1] << 16) |
			                ((uint32_t)c->in[2] << 8) | c->in[3];
			if ((size < FRAME_MIN && !tfs__kafka_sasl_raw(&c->sasl)) ||
			    size > (uint32_t)k->cfg.request_max_bytes)
				return 0;               /* conn_process closes it */
			if (c->in_len >= 4 + (size_t)size)
				return 0;               /* a whole frame to handle first */
			want = 4 + (size_t)size - c->in_len;
			/* grow with what arrives, not with what the size claims: a
			 * header alone costs no more than a read's worth */
			if (want > READ_CHUNK && want > c->in_len)
				want = c->in_len > READ_CHUNK ? c->in_len : READ_CHUNK;
			if (want < READ_CHUNK)
				want = READ_CHUNK;
		}
		if (c->in_cap - c->in_len < want) {
			size_t cap = c->in_len + want;
			size_t pooled = cap > READ_CHUNK ? cap - READ_CHUNK : 0;
			uint8_t *nb;
			if (pooled > c->in_pooled && !pool_take(k, pooled - c->in_pooled)) {
				if (starve(c))
					return 0;           /* (5): read again once there is room */
				continue;
			}
			nb = realloc(c->in, cap);
			if (!nb) {
				if (pooled > c->in_pooled)
					pool_give(k, pooled - c->in_pooled);
				return -1;
			}
			if (pooled > c->in_pooled)
				c->in_pooled = pooled;
			c->in = nb;
			c->in_cap = cap;
		}
		n = recv(c->fd, c->in + c->in_len, want, MSG_DONTWAIT);
		if (n == 0)
			return -1;                  /* the peer closed */
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		c->in_len += (size_t)n;
		if ((size_t)n < want)
			return 0;
	}
}

/* Input, output, or a retry: everything a connection does goes through here. */
static void conn_run(struct conn *c, bool readable)
{
	if (readable && conn_read(c) < 0)
		goto close;
	if (conn_process(c) < 0 || conn_send(c) < 0)
		goto close;
	/* sending may have unmuted it: frames already buffered go on */
	if (may_process(c) && c->in_len >= 4) {
		if (conn_process(c) < 0 || conn_send(c) < 0)
			goto close;
	}
	if (c->in_len == 0 && c->in)
		in_free(c);                     /* an idle connection keeps no buffer */
	if (conn_update(c) < 0)
		goto close;
	return;
close:
	conn_close(c);
}

/* "/ADDRESS" of the peer of fd, as Java's InetAddress prints it; "" if unknown. */
static void peer_host(int fd, char *buf, size_t cap)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	const void *addr = NULL;

	buf[0] = '\0';
	if (getpeername(fd, (struct sockaddr *)&sa, &len) < 0)
		return;
	if (sa.ss_family == AF_INET)
		addr = &((struct sockaddr_in *)&sa)->sin_addr;
	else if (sa.ss_family == AF_INET6)
		addr = &((struct sockaddr_in6 *)&sa)->sin6_addr;
	buf[0] = '/';
	if (!addr || !inet_ntop(sa.ss_family, addr, buf + 1, (socklen_t)(cap - 1)))
		buf[0] = '\0';
}

static void accept_all(struct tfs_kafka_loop *lp)
{
	struct tfs_kafka *k = lp->k;

	for (;;) {
		int fd = accept4(k->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
		struct epoll_event e;
		struct conn *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				tfs_log_warn("kafka", "cannot accept a connection: %s; the listener "
				             "rests %d ms", strerror(errno), RELISTEN_MS);
				epoll_ctl(lp->epfd, EPOLL_CTL_DEL, k->listen_fd, NULL);
				lp->relisten_at = tfs_mono_ms() + RELISTEN_MS;
			}
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		c->lp = lp;
		c->id = atomic_fetch_add(&k->conns, 1) + 1;
		peer_host(fd, c->host, sizeof(c->host));
		/* on a SASL listener a connection is nobody until it authenticates */
		if (k->cfg.sasl)
			c->peer = (struct tfs_kafka_peer){ .uid = (uid_t)-1, .gid = (gid_t)-1 };
		else
			tfs_kafka_peer_identify(fd, &c->peer);
		tfs__kafka_sasl_init(&c->sasl, k->cfg.sasl);
		e.events = EPOLLIN;
		e.data.ptr = c;
		if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->events = EPOLLIN;
		atomic_fetch_add(&k->open_conns, 1);
		c->next = lp->conns;
		if (lp->conns)
			lp->conns->prev = c;
		lp->conns = c;
	}
}

static int listen_add(struct tfs_kafka_loop *lp)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL };

	return epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lp->k->listen_fd, &e) < 0 ? -errno : 0;
}

/* Retries every parked connection (each retry may answer, or park it again). */
static void retry_parked(struct tfs_kafka_loop *lp)
{
	struct conn *list = lp->parked;

	lp->parked = NULL;
	while (list) {
		struct conn *c = list;
		list = c->pnext;
		atomic_fetch_sub(&lp->k->parked, 1);
		c->parked = false;
		c->pnext = NULL;
		atomic_fetch_add_explicit(&lp->k->park_retries, 1, memory_order_relaxed);
		conn_run(c, false);
	}
}

/* Retries the connections of the timed list whose deadline has come. */
static void retry_timed(struct tfs_kafka_loop *lp, int64_t now)
{
	struct conn *due = NULL, **pp = &lp->timed;

	while (*pp) {
		struct conn *c = *pp;
		if (c->wake_at > now) {
			pp = &c->pnext;
			continue;
		}
		*pp = c->pnext;
		atomic_fetch_sub(&lp->k->timed, 1);
		c->parked = c->timed = false;
		c->pnext = due;
		due = c;
	}
	while (due) {
		struct conn *c = due;
		due = c->pnext;
		c->pnext = NULL;
		atomic_fetch_add_explicit(&lp->k->park_retries, 1, memory_order_relaxed);
		conn_run(c, false);
	}
}

/* Reads again from every starved connection (5); each may starve again. */
static void retry_starved(struct tfs_kafka_loop *lp)
{
	struct conn *list = lp->starved;

	lp->starved = NULL;
	while (list) {
		struct conn *c = list;
		list = c->snext;
		atomic_fetch_sub(&lp->k->starved, 1);
		c->starved = false;
		c->snext = NULL;
		conn_run(c, true);
	}
}

/* A starved connection whose peer shut its side (5): if the frame in hand can
 * never be whole (the socket holds less than its rest), it goes with the memory
 * it holds; otherwise it waits for room like the others. */
static void starved_hangup(struct conn *c, uint32_t events)
{
	int avail = 0;

	if (!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	if (!(events & (EPOLLHUP | EPOLLERR)) && c->in_len >= 4 &&
	    ioctl(c->fd, FIONREAD, &avail) == 0) {
		uint32_t size = ((uint32_t)c->in[0] << 24) | ((uint32_t)c->in[1] << 16) |
		                ((uint32_t)c->in[2] << 8) | c->in[3];
		if (c->in_len + (size_t)avail >= 4 + (size_t)size) {
			c->rdhup = true;
			if (conn_update(c) == 0)
				return;
		}
	}
	conn_close(c);
}

/* Milliseconds epoll may sleep: until the nearest parked deadline or the
 * listener's rest; -1: no limit. A deadline already past is 0, never -1. */
static int next_timeout(struct tfs_kafka_loop *lp, int64_t now)
{
	int64_t t = INT64_MAX;

	for (struct conn *c = lp->parked; c; c = c->pnext)
		if (c->wake_at - now < t)
			t = c->wake_at - now;
	for (struct conn *c = lp->timed; c; c = c->pnext)
		if (c->wake_at - now < t)
			t = c->wake_at - now;
	if (lp->relisten_at && lp->relisten_at - now < t)
		t = lp->relisten_at - now;
	if (t == INT64_MAX)
		return -1;
	return t < 0 ? 0 : (int)t;
}

static void *loop_main(void *arg)
{
	struct tfs_kafka_loop *lp = arg;
	struct epoll_event ev[MAX_EVENTS];

	while (!atomic_load(&lp->stop)) {
		int64_t now = tfs_mono_ms();
		int n = epoll_wait(lp->epfd, ev, MAX_EVENTS, next_timeout(lp, now));
		bool woken = false;

		if (n < 0 && errno != EINTR) {
			tfs_log_error("kafka", "epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == NULL) {
				accept_all(lp);
			} else if (ev[i].data.ptr == (void *)lp) {
				uint64_t v;
				if (read(lp->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					tfs_log_warn("kafka", "eventfd: %s", strerror(errno));
				woken = true;
			} else {
				struct conn *c = ev[i].data.ptr;
				if (c->starved) {
					starved_hangup(c, ev[i].events);
					continue;
				}
				if (c->parked)
					park_remove(c);     /* a retry comes with this event */
				conn_run(c, (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0);
			}
		}
		now = tfs_mono_ms();
		if (lp->relisten_at && now >= lp->relisten_at && listen_add(lp) == 0)
			lp->relisten_at = 0;
		if (woken && lp->starved && !pool_over(lp->k))
			retry_starved(lp);
		if (lp->timed)
			retry_timed(lp, now);
		/* No lost wake-up: an append after the last look below either finds
		 * this loop's fetches counted in k->parked (and writes the eventfd) or
		 * changed k->appends before that look (and it looks again). */
		while (lp->parked) {
			uint_fast64_t seen = atomic_load(&lp->k->appends);
			retry_parked(lp);
			if (atomic_load(&lp->k->appends) == seen)
				break;
		}
	}
	return NULL;
}

/* Writes every loop's eventfd: for parked fetches after an append, and for
 * starved connections once the pool has room (5). */
static void wake_loops(struct tfs_kafka *k)
{
	uint64_t one = 1;

	for (int i = 0; i < k->nloops; i++)
		if (write(k->loops[i].evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			tfs_log_warn("kafka", "eventfd: %s", strerror(errno));
}

void tfs__kafka_wake(struct tfs_kafka *k)
{
	atomic_fetch_add(&k->appends, 1);
	if (atomic_load(&k->parked) > 0)    /* nobody waits: no system call per append */
		wake_loops(k);
}

static void kafka_appended(void *arg, struct tfs_plog *pl)
{
	(void)pl;
	tfs__kafka_wake(arg);
}

/* Binds host:port; refuses a non-loopback address without allow_remote. */
static int bind_listener(struct tfs_kafka *k)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE },
	                *res = NULL;
	const struct tfs_kafka_config *cfg = &k->cfg;
	char port[8];
	int fd = -1, one = 1, rc;
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);

	snprintf(port, sizeof(port), "%u", cfg->listener_port);
	rc = getaddrinfo(cfg->listener_host[0] ? cfg->listener_host : NULL, port, &hints, &res);
	if (rc != 0) {
		tfs_log_error("kafka", "listeners: cannot resolve %s: %s", cfg->listener_host,
		              gai_strerror(rc));
		return -EINVAL;
	}
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		bool loop = (a->ai_family == AF_INET &&
		             (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127) ||
		            (a->ai_family == AF_INET6 &&
		             IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr));
		if (!loop && !cfg->allow_remote && !cfg->sasl) {
			tfs_log_error("kafka", "listeners=PLAINTEXT://%s:%u is not a loopback address: "
			              "without authentication any host could write; refused (bind "
			              "127.0.0.1, use listeners=SASL_PLAINTEXT:// with "
			              "kafka_sasl_credentials, or mount with kafka_allow_remote=true to "
			              "accept it)",
			              cfg->listener_host, cfg->listener_port);
			freeaddrinfo(res);
			return -EPERM;
		}
	}
	rc = -EADDRNOTAVAIL;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
			rc = -errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		tfs_log_error("kafka", "cannot listen on %s:%u: %s", cfg->listener_host,
		              cfg->listener_port, tfs_strerror(rc));
		return rc;
	}
	if (cfg->allow_remote && !cfg->sasl)
		tfs_log_warn("kafka", "kafka_allow_remote: PLAINTEXT://%s:%u accepts connections "
		             "from other hosts without authentication; they act as nobody",
		             cfg->listener_host, cfg->listener_port);
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		k->port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
		                                          : ((struct sockaddr_in6 *)&sa)->sin6_port);
	k->listen_fd = fd;
	return 0;
}

int tfs_kafka_start(struct tfs_engine *e, const struct tfs_kafka_config *cfg,
                    const struct tfs_kafka_hooks *hooks, struct tfs_kafka **out)
{
	struct tfs_kafka *k = calloc(1, sizeof(*k));
	struct stat st;
	int rc;

	*out = NULL;
	if (!k)
		return -ENOMEM;
	k->engine = e;
	k->cfg = *cfg;
	if (hooks)
		k->hooks = *hooks;
	k->listen_fd = -1;
	if (stat(tfs_engine_data_dir(e), &st) < 0) {
		rc = -errno;
		tfs_log_error("kafka", "cannot stat %s: %s", tfs_engine_data_dir(e), tfs_strerror(rc));
		goto fail;
	}
	k->root_uid = st.st_uid;
	k->root_gid = st.st_gid;
	k->root_mode = st.st_mode & 07777;
	rc = tfs_kafka_meta_load(tfs_engine_io(e), tfs_engine_data_dir(e), cfg->node_id,
	                         tfs_engine_read_only(e), k->cluster_id);
	if (rc < 0)
		goto fail;
	if (cfg->sasl && (rc = tfs__kafka_creds_load(cfg->sasl_credentials, &k->creds)) < 0)
		goto fail;
	rc = bind_listener(k);
	if (rc < 0)
		goto fail;
	if (!k->cfg.advertised_host[0]) {
		if (!k->cfg.listener_host[0] || !strcmp(k->cfg.listener_host, "0.0.0.0") ||
		    !strcmp(k->cfg.listener_host, "::"))
			snprintf(k->cfg.advertised_host, sizeof(k->cfg.advertised_host), "localhost");
		else
			snprintf(k->cfg.advertised_host, sizeof(k->cfg.advertised_host), "%s",
			         k->cfg.listener_host);
		k->cfg.advertised_port = k->port;
	}
	/* before the loops, which hand it requests */
	rc = tfs_kgroups_create(k, tfs_engine_groups(e), k->cfg.group_initial_rebalance_delay_ms,
	                        k->cfg.group_max_size, &k->groups);
	if (rc < 0) {
		tfs_log_error("kafka", "cannot start the group coordinator: %s", tfs_strerror(rc));
		goto fail;
	}
	k->loops = calloc((size_t)cfg->threads, sizeof(*k->loops));
	if (!k->loops) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < cfg->threads; i++) {
		struct tfs_kafka_loop *lp = &k->loops[i];
		struct epoll_event ev = { .events = EPOLLIN };

		lp->k = k;
		lp->epfd = epoll_create1(EPOLL_CLOEXEC);
		lp->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		k->nloops = i + 1;
		ev.data.ptr = lp;
		if (lp->epfd < 0 || lp->evfd < 0 ||
		    epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lp->evfd, &ev) < 0 || listen_add(lp) < 0) {
			rc = -errno;
			tfs_log_error("kafka", "cannot set up an event loop: %s", tfs_strerror(rc));
			goto fail;
		}
		rc = -pthread_create(&lp->thread, NULL, loop_main, lp);
		if (rc < 0) {
			tfs_log_error("kafka", "cannot start a listener thread: %s", tfs_strerror(rc));
			goto fail;
		}
		lp->started = true;
	}
	tfs_engine_set_append_hook(e, kafka_appended, k);
	tfs_log_info("kafka", "listening on %s://%s:%u (advertised %s:%u), node.id=%d, "
	             "cluster id %s, %d threads%s%s", k->cfg.sasl ? "SASL_PLAINTEXT" : "PLAINTEXT",
	             k->cfg.listener_host, k->port,
	             k->cfg.advertised_host, k->cfg.advertised_port, (int)k->cfg.node_id,
	             k->cluster_id, k->nloops, k->cfg.sasl ? ", sasl.enabled.mechanisms=" : "",
	             k->cfg.sasl ? tfs__kafka_sasl_mechanisms(k->cfg.sasl_mechanisms) : "");
	*out = k;
	return 0;
fail:
	tfs_kafka_stop(k);
	return rc;
}

void tfs_kafka_stop(struct tfs_kafka *k)
{
	if (!k)
		return;
	tfs_engine_set_append_hook(k->engine, NULL, NULL);  /* no call runs after this */
	for (int i = 0; i < k->nloops; i++)
		atomic_store(&k->loops[i].stop, true);
	wake_loops(k);
	for (int i = 0; i < k->nloops; i++) {
		struct tfs_kafka_loop *lp = &k->loops[i];
		if (lp->started)
			pthread_join(lp->thread, NULL);
		while (lp->conns)
			conn_close(lp->conns);
		if (lp->epfd >= 0)
			close(lp->epfd);
		if (lp->evfd >= 0)
			close(lp->evfd);
	}
	if (k->listen_fd >= 0)
		close(k->listen_fd);
	tfs_kgroups_destroy(k->groups);      /* no loop runs a request now */
	free(k->loops);
	tfs__kafka_creds_free(k->creds);
	free(k);
}

uint16_t tfs_kafka_port(const struct tfs_kafka *k)
{
	return k->port;
}

void tfs_kafka_write_metrics(struct tfs_kafka *k, FILE *f)
{
	if (!k)
		return;
	fprintf(f, "# HELP topicfs_kafka_connections Kafka client connections open.\n"
	        "# TYPE topicfs_kafka_connections gauge\ntopicfs_kafka_connections %d\n",
	        atomic_load(&k->open_conns));
	fprintf(f, "# HELP topicfs_kafka_parked Requests waiting for data, a group or their "
	        "deadline (long-poll fetches, joins).\n"
	        "# TYPE topicfs_kafka_parked gauge\ntopicfs_kafka_parked %d\n",
	        atomic_load(&k->parked));
	fprintf(f, "# HELP topicfs_kafka_auth_delayed Failed logins waiting out "
	        "connection.failed.authentication.delay.ms.\n"
	        "# TYPE topicfs_kafka_auth_delayed gauge\ntopicfs_kafka_auth_delayed %d\n",
	        atomic_load(&k->timed));
	fprintf(f, "# HELP topicfs_kafka_park_retries_total Waiting requests handled again.\n"
	        "# TYPE topicfs_kafka_park_retries_total counter\n"
	        "topicfs_kafka_park_retries_total %" PRIu64 "\n",
	        (uint64_t)atomic_load_explicit(&k->park_retries, memory_order_relaxed));
}
