/* access.c - who a connection acts as, and the mount's permission rule.
 *
 * Without authentication the listener cannot ask a client who it is, but for a
 * loopback connection the kernel knows: the client's socket is in the same
 * network namespace, and sock_diag (the interface ss(8) uses) names the uid that
 * created it, given the connection's four addresses. That user, with its groups
 * from the user database, is who the connection acts as: the listener grants
 * what the mount's kernel would grant that user through the files (write
 * permission on a partition's directory to produce, read to fetch, write on the
 * root to create or delete a topic). A peer the kernel does not name (another
 * host, when kafka_allow_remote lets one in) acts as nobody: only the "others"
 * bits apply. docs/kafka.md "Permissions" says the same for users. */
#include "kafka/kafka_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/log.h"

static bool is_loopback(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
	if (a->ss_family == AF_INET6) {
		const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(x))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(x))
			return x->s6_addr[12] == 127;
	}
	return false;
}

/* The uid owning the socket at the other end of fd (its source is peer, its
 * destination self), from sock_diag's exact lookup. -errno. */
static int diag_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *self,
                    uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr nlh;
		uint8_t bytes[1024];
	} resp;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	int s, rc = -ENOENT;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = (uint8_t)peer->ss_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = 1u << TCP_ESTABLISHED;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *p = (const void *)peer, *q = (const void *)self;
		req.r.id.idiag_sport = p->sin_port;
		req.r.id.idiag_dport = q->sin_port;
		memcpy(req.r.id.idiag_src, &p->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &q->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *p = (const void *)peer, *q = (const void *)self;
		req.r.id.idiag_sport = p->sin6_port;
		req.r.id.idiag_dport = q->sin6_port;
		memcpy(req.r.id.idiag_src, &p->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &q->sin6_addr, 16);
	}
	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return -errno;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		rc = -errno;
		close(s);
		return rc;
	}
	n = recv(s, &resp, sizeof(resp), 0);
	if (n < 0)
		rc = -errno;
	for (struct nlmsghdr *h = &resp.nlh; n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
			const struct inet_diag_msg *m = NLMSG_DATA(h);
			*uid = m->idiag_uid;
			rc = 0;
			break;
		}
		if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE)
			break;
	}
	close(s);
	return rc;
}

void tfs_kafka_peer_identify(int fd, struct tfs_kafka_peer *p)
{
	struct sockaddr_storage peer, self;
	socklen_t pl = sizeof(peer), sl = sizeof(self);
	uid_t uid = (uid_t)-1;          /* set by diag_uid when it returns 0 */
	int rc;

	memset(p, 0, sizeof(*p));
	p->uid = (uid_t)-1;
	p->gid = (gid_t)-1;
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
	    getsockname(fd, (struct sockaddr *)&self, &sl) < 0 || !is_loopback(&peer))
		return;
	rc = diag_uid(&peer, &self, &uid);
	if (rc < 0) {
		tfs_log_warn("kafka", "cannot tell which user opened a loopback connection (%s): "
		             "it acts as nobody", tfs_strerror(rc));
		return;
	}
	(void)tfs_kafka_peer_of_user(uid, p);  /* a uid without a name: no groups */
}

int tfs_kafka_peer_of_user(uid_t uid, struct tfs_kafka_peer *p)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	int ng;

	memset(p, 0, sizeof(*p));
	p->local = true;
	p->uid = uid;
	p->gid = (gid_t)-1;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
		return -ENOENT;
	p->gid = pw.pw_gid;
	ng = (int)(sizeof(p->groups) / sizeof(p->groups[0]));
	if (getgrouplist(pw.pw_name, pw.pw_gid, p->groups, &ng) < 0)
		ng = (int)(sizeof(p->groups) / sizeof(p->groups[0]));   /* the first 64 */
	p->ngroups = ng;
	return 0;
}

static bool in_group(const struct tfs_kafka_peer *p, gid_t gid)
{
	if (p->local && p->gid == gid)
		return true;
	for (int i = 0; i < p->ngroups; i++)
		if (p->groups[i] == gid)
			return true;
	return false;
}

bool tfs_kafka_peer_may(const struct tfs_kafka_peer *p, uid_t uid, gid_t gid, mode_t mode,
                        int want)
{
	mode_t bits;

	if (p->local && p->uid == 0)
		return true;                    /* root, as the kernel's check lets it */
	if (p->local && p->uid == uid)
		bits = (mode >> 6) & 7;
	else if (in_group(p, gid))
		bits = (mode >> 3) & 7;
	else
		bits = mode & 7;
	return ((int)bits & want) == want;
}
