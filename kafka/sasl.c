/* sasl.c - who a connection of a SASL_PLAINTEXT listener is: SaslHandshake (17)
 * v0-1, SaslAuthenticate (36) v0-2, the v0 handshake's bare tokens, the
 * mechanisms PLAIN (RFC 4616) and SCRAM-SHA-256 (RFC 5802, 7677), and the
 * credentials file that maps each principal to a Unix user.
 *
 * The credentials file (kafka_sasl_credentials=PATH), one principal a line,
 * '#' comments, fields separated by blanks:
 *
 *   PRINCIPAL  USER  SCRAM-SHA-256=salt=B64,stored_key=B64,server_key=B64,iterations=N
 *
 * PRINCIPAL: 1..255 of [A-Za-z0-9._@-]. USER: a Unix user name or uid the user
 * database knows; the connection then acts as that user, with its groups, under
 * the mount's rule (access.c). The credential is Kafka's own SCRAM form (what
 * kafka-configs.sh --describe prints for a user): the salt, the iteration count
 * (4096..16777216, Kafka's minimum for SCRAM-SHA-256 first), StoredKey =
 * SHA-256(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword,
 * "Server Key"), SaltedPassword = PBKDF2-HMAC-SHA-256(password, salt, N). No
 * password is kept: PLAIN checks the password it is given by computing StoredKey
 * from it, so the same line serves both mechanisms. The file must be a regular
 * file of root or of the daemon's user that the group may not write and others
 * may not read, write or search; anything else, or a line that does not parse,
 * fails the mount with a line saying which.
 *
 * A connection of such a listener:
 *
 *   WANT_HANDSHAKE --SaslHandshake v1--> WANT_AUTHENTICATE --SaslAuthenticate--+
 *        |                                  (SCRAM: twice)                     |
 *        +--SaslHandshake v0--> RAW (bare int32-sized tokens, no header) -----+--> DONE
 *   any failure --> FAILED (the next frame closes the connection; a bare token
 *                   that fails closes it at once, as Kafka does)
 *
 * Until DONE only ApiVersions, SaslHandshake and SaslAuthenticate are served;
 * any other request closes the connection (Kafka's IllegalSaslState). A failure
 * is SASL_AUTHENTICATION_FAILED with one message for every cause ("invalid
 * credentials": a client cannot tell an unknown principal from a wrong
 * password), a log line with the principal and the cause, never the password,
 * and comparisons of keys in constant time (CRYPTO_memcmp). An unknown
 * principal costs the same PBKDF2 as a known one, and SCRAM does not tell it
 * either: its client-first gets a server-first as a known principal's would,
 * with a salt and keys derived from a secret of the credentials file and the
 * name (HMAC-SHA-256; the same name gets the same salt every time, two names
 * different ones) and the file's first iteration count and salt length, and it
 * fails at the client-final, as a wrong password does (RFC 5802 section 9's
 * advice against user enumeration).
 *
 * A failed authentication is answered connection.failed.authentication.delay.ms
 * late (default 100, Kafka's): the connection parks as a long-poll Fetch does,
 * so the loop serves every other connection meanwhile, and a client guessing
 * passwords gets one answer per delay per connection.
 *
 * Threads: a connection's state is its loop's; the credentials are immutable
 * after tfs__kafka_creds_load.
 */
#include "kafka/kafka_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "io/log.h"
#include "io/parse.h"

#define KEY_BYTES SHA256_DIGEST_LENGTH
#define SALT_MAX 64
#define ITER_MIN 4096                   /* Kafka's ScramMechanism minimum */
#define ITER_MAX (1 << 24)              /* bounds the cost of one attempt */
#define PRINCIPAL_MAX 255
#define CREDS_FILE_MAX (1 << 20)
#define NONCE_BYTES 18                  /* 24 base64 characters */
#define NONCE_MAX 255                   /* of a client's nonce: the answer fits */
#define TOKEN_MAX 1024                  /* any client message of these mechanisms */
#define B64_LEN(n) (((n) + 2) / 3 * 4)

struct tfs_kafka_cred {
	char principal[PRINCIPAL_MAX + 1];
	struct tfs_kafka_peer user;
	uint8_t salt[SALT_MAX];
	size_t salt_len;
	int iterations;
	uint8_t stored_key[KEY_BYTES], server_key[KEY_BYTES];
};

struct tfs_kafka_creds {
	struct tfs_kafka_cred *c;
	size_t n;
	uint8_t mock_secret[KEY_BYTES];  /* SHA-256 of every server key: what the
	                                  * stand-ins of unknown principals come from */
};

#define MOCK_LABEL "topicfs SCRAM stand-in"


/* ---- base64 (OpenSSL's codec, with its padding handled) ---- */

static size_t b64_encode(const uint8_t *in, size_t len, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

/* Decodes len characters into out (cap bytes); -1 if not base64 or too long. */
static ssize_t b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
	uint8_t tmp[B64_LEN(TOKEN_MAX)];
	int n;
	size_t pad = 0;

	if (len == 0 || len % 4 || len / 4 * 3 > sizeof(tmp))
		return -1;
	n = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)len);
	if (n < 0)
		return -1;
	if (in[len - 1] == '=')
		pad++;
	if (in[len - 2] == '=')
		pad++;
	if ((size_t)n < pad || (size_t)n - pad > cap)
		return -1;
	memcpy(out, tmp, (size_t)n - pad);
	return (ssize_t)((size_t)n - pad);
}

/* ---- SCRAM's functions (RFC 5802 section 3) ---- */

static void hmac(const uint8_t *key, size_t klen, const void *msg, size_t mlen,
                 uint8_t out[KEY_BYTES])
{
	unsigned int n = KEY_BYTES;

	HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &n);
}

/* StoredKey of a password, as the credentials file keeps it. */
static int stored_key_of(const char *pw, size_t pwlen, const struct tfs_kafka_cred *c,
                         uint8_t out[KEY_BYTES])
{
	uint8_t salted[KEY_BYTES], client_key[KEY_BYTES];

	if (!PKCS5_PBKDF2_HMAC(pw, (int)pwlen, c->salt, (int)c->salt_len, c->iterations,
	                       EVP_sha256(), KEY_BYTES, salted))
		return -EIO;
	hmac(salted, KEY_BYTES, "Client Key", 10, client_key);
	SHA256(client_key, KEY_BYTES, out);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(client_key, sizeof(client_key));
	return 0;
}

/* ---- the credentials file ---- */

static bool principal_valid(const char *s, size_t n)
{
	if (n == 0 || n > PRINCIPAL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._@-", s[i]))
			return false;
	return true;
}

static const struct tfs_kafka_cred *cred_find(const struct tfs_kafka_creds *cs, const char *p,
                                              size_t n)
{
	for (size_t i = 0; cs && i < cs->n; i++)
		if (strlen(cs->c[i].principal) == n && !memcmp(cs->c[i].principal, p, n))
			return &cs->c[i];
	return NULL;
}

/* "salt=..,stored_key=..,server_key=..,iterations=N" into c; a reason or NULL. */
static const char *parse_scram(char *v, struct tfs_kafka_cred *c)
{
	bool salt = false, sk = false, vk = false, it = false;
	char *save = NULL;

	for (char *kv = strtok_r(v, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		ssize_t n;
		int64_t i;

		if (!eq)
			return "a field without '='";
		*eq++ = '\0';
		if (!strcmp(kv, "salt")) {
			n = b64_decode(eq, strlen(eq), c->salt, sizeof(c->salt));
			if (n <= 0)
				return "salt is not base64 of 1..64 bytes";
			c->salt_len = (size_t)n;
			salt = true;
		} else if (!strcmp(kv, "stored_key") || !strcmp(kv, "server_key")) {
			uint8_t *k = kv[1] == 't' ? c->stored_key : c->server_key;
			if (b64_decode(eq, strlen(eq), k, KEY_BYTES) != KEY_BYTES)
				return "a key is not base64 of 32 bytes";
			*(kv[1] == 't' ? &sk : &vk) = true;
		} else if (!strcmp(kv, "iterations")) {
			if (!tfs_parse_i64(eq, ITER_MIN, ITER_MAX, &i))
				return "iterations must be 4096..16777216";
			c->iterations = (int)i;
			it = true;
		} else {
			return "an unknown field (salt, stored_key, server_key, iterations)";
		}
	}
	return salt && sk && vk && it ? NULL : "salt, stored_key, server_key and iterations are "
	                                       "all needed";
}

static const char *parse_user(const char *u, struct tfs_kafka_peer *p)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	int64_t id;

	if (tfs_parse_i64(u, 0, UINT32_MAX - 1, &id)) {
		if (tfs_kafka_peer_of_user((uid_t)id, p) < 0)
			return "no such uid in the user database";
		return NULL;
	}
	if (getpwnam_r(u, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
		return "no such user";
	return tfs_kafka_peer_of_user(pw.pw_uid, p) < 0 ? "no such user" : NULL;
}

int tfs__kafka_creds_parse(char *text, const char *path, struct tfs_kafka_creds **out)
{
	struct tfs_kafka_creds *cs = calloc(1, sizeof(*cs));
	size_t cap = 0, line = 0;
	char *save = NULL;
	int rc = 0;

	*out = NULL;
	if (!cs)
		return -ENOMEM;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { 0 }, *fs = NULL;
		const char *why = NULL;
		struct tfs_kafka_cred c;
		int nf = 0;

		line++;                         /* counts non-empty lines: "\n\n" is one */
		while (*l == ' ' || *l == '\t')
			l++;
		if (*l == '#' || *l == '\0' || *l == '\r')
			continue;
		for (char *t = strtok_r(l, " \t\r", &fs); t && nf < 4; t = strtok_r(NULL, " \t\r", &fs))
			f[nf++] = t;
		memset(&c, 0, sizeof(c));
		if (nf != 3)
			why = "expected PRINCIPAL USER SCRAM-SHA-256=...";
		else if (!principal_valid(f[0], strlen(f[0])))
			why = "a principal is 1..255 of [A-Za-z0-9._@-]";
		else if (cred_find(cs, f[0], strlen(f[0])))
			why = "the principal is named twice";
		else if (strncmp(f[2], "SCRAM-SHA-256=", 14) != 0)
			why = "the credential must be SCRAM-SHA-256=salt=...";
		else if (!(why = parse_user(f[1], &c.user)))
			why = parse_scram(f[2] + 14, &c);
		if (why) {
			tfs_log_error("kafka", "%s: entry %zu: %s", path, line, why);
			rc = -EINVAL;
			break;
		}
		strcpy(c.principal, f[0]);
		if (cs->n == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			struct tfs_kafka_cred *nc = realloc(cs->c, ncap * sizeof(*nc));
			if (!nc) {
				rc = -ENOMEM;
				break;
			}
			cs->c = nc;
			cap = ncap;
		}
		cs->c[cs->n++] = c;
		OPENSSL_cleanse(&c, sizeof(c));
	}
	if (rc == 0 && cs->n == 0) {
		tfs_log_error("kafka", "%s: no principal: nobody could connect", path);
		rc = -EINVAL;
	}
	if (rc == 0) {
		/* secret to a client (it needs every server key), stable while the
		 * file's principals are */
		size_t blen = sizeof(MOCK_LABEL) + cs->n * KEY_BYTES;
		uint8_t *b = malloc(blen);
		if (!b) {
			rc = -ENOMEM;
		} else {
			memcpy(b, MOCK_LABEL, sizeof(MOCK_LABEL));
			for (size_t i = 0; i < cs->n; i++)
				memcpy(b + sizeof(MOCK_LABEL) + i * KEY_BYTES, cs->c[i].server_key,
				       KEY_BYTES);
			SHA256(b, blen, cs->mock_secret);
			OPENSSL_cleanse(b, blen);
			free(b);
		}
	}
	if (rc < 0) {
		tfs__kafka_creds_free(cs);
		return rc;
	}
	*out = cs;
	return 0;
}

int tfs__kafka_creds_load(const char *path, struct tfs_kafka_creds **out)
{
	struct stat st;
	char *text = NULL;
	ssize_t n;
	int fd, rc;

	*out = NULL;
	if (!path[0]) {
		tfs_log_error("kafka", "a SASL_PLAINTEXT listener needs kafka_sasl_credentials=PATH");
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		tfs_log_error("kafka", "kafka_sasl_credentials: cannot open %s: %s", path,
		              tfs_strerror(rc));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IRWXO))) {
		tfs_log_error("kafka", "kafka_sasl_credentials: %s must be a regular file of root or "
		              "of this daemon's user, not writable by its group nor readable, "
		              "writable or searchable by others (chmod 0600 or 0640); refused",
		              path);
		close(fd);
		return -EPERM;
	}
	if (st.st_size > CREDS_FILE_MAX || !(text = malloc((size_t)st.st_size + 1))) {
		tfs_log_error("kafka", "kafka_sasl_credentials: %s is larger than 1 MiB", path);
		close(fd);
		return -EFBIG;
	}
	n = read(fd, text, (size_t)st.st_size);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc == 0 && n != st.st_size)
		rc = -EIO;                      /* changed under us: read it again next time */
	if (rc < 0) {
		tfs_log_error("kafka", "kafka_sasl_credentials: cannot read %s: %s", path,
		              tfs_strerror(rc));
		free(text);
		return rc;
	}
	text[n] = '\0';
	if (memchr(text, '\0', (size_t)n)) {
		tfs_log_error("kafka", "kafka_sasl_credentials: %s holds a NUL byte", path);
		rc = -EINVAL;
	} else {
		rc = tfs__kafka_creds_parse(text, path, out);
	}
	OPENSSL_cleanse(text, (size_t)n);
	free(text);
	if (rc == 0)
		tfs_log_info("kafka", "SASL: %zu principals from %s", (*out)->n, path);
	return rc;
}

void tfs__kafka_creds_free(struct tfs_kafka_creds *cs)
{
	if (!cs)
		return;
	if (cs->c)
		OPENSSL_cleanse(cs->c, cs->n * sizeof(*cs->c));
	OPENSSL_cleanse(cs->mock_secret, sizeof(cs->mock_secret));
	free(cs->c);
	free(cs);
}

/* ---- a connection's authentication ---- */

void tfs__kafka_sasl_init(struct tfs_kafka_sasl *s, bool required)
{
	memset(s, 0, sizeof(*s));
	s->state = required ? SASL_WANT_HANDSHAKE : SASL_OFF;
}

void tfs__kafka_sasl_release(struct tfs_kafka_sasl *s)
{
	if (s) {
		free(s->client_first_bare);
		free(s->server_first);
		free(s->mock);
		s->client_first_bare = s->server_first = NULL;
		s->mock = NULL;
	}
}

bool tfs__kafka_sasl_allows(const struct tfs_kafka_sasl *s, int16_t api_key)
{
	if (!s || s->state == SASL_OFF || s->state == SASL_DONE)
		return true;
	if (s->state == SASL_FAILED)            /* but its answer, parked */
		return s->fail_due_ms && api_key == API_SASL_AUTHENTICATE;
	return api_key == API_API_VERSIONS || api_key == API_SASL_HANDSHAKE ||
	       api_key == API_SASL_AUTHENTICATE;
}

const char *tfs__kafka_sasl_mechanisms(unsigned m)
{
	if ((m & TFS_KAFKA_SASL_PLAIN) && (m & TFS_KAFKA_SASL_SCRAM_SHA_256))
		return "PLAIN,SCRAM-SHA-256";
	return (m & TFS_KAFKA_SASL_PLAIN) ? "PLAIN" : (m & TFS_KAFKA_SASL_SCRAM_SHA_256) ?
	                                                "SCRAM-SHA-256" : "";
}

/* A principal's name for a log line: printable and short. */
static void log_name(const char *p, size_t n, char out[64])
{
	size_t o = 0;

	for (size_t i = 0; i < n && o < 60; i++)
		out[o++] = isprint((unsigned char)p[i]) ? p[i] : '?';
	out[o] = '\0';
}

static void fail(struct tfs_kafka_ctx *ctx, const char *mech, const char *who, size_t wlen,
                 const char *why)
{
	char name[64];

	log_name(who, wlen, name);
	tfs_log_warn("kafka", "SASL %s authentication of '%s' failed: %s", mech, name, why);
	ctx->sasl->fail_raw = ctx->sasl->state == SASL_RAW;
	ctx->sasl->state = SASL_FAILED;
	if (ctx->k->cfg.auth_fail_delay_ms > 0)
		ctx->sasl->fail_due_ms = ctx->now_ms + ctx->k->cfg.auth_fail_delay_ms;
	tfs__kafka_sasl_release(ctx->sasl);
}

static void succeed(struct tfs_kafka_ctx *ctx, const struct tfs_kafka_cred *c, const char *mech)
{
	*ctx->peer = c->user;
	ctx->sasl->state = SASL_DONE;
	tfs__kafka_sasl_release(ctx->sasl);
	tfs_log_info("kafka", "principal %s authenticated (%s), acting as uid %d", c->principal,
	             mech, (int)c->user.uid);
}

/* The stand-in of the unknown principal name: a salt and keys no password
 * gives (HMACs of the creds' secret), the iterations and salt length of the
 * first principal, no user. */
static void mock_of(const struct tfs_kafka_creds *cs, const char *name, size_t n,
                    struct tfs_kafka_cred *out)
{
	/* one letter says which, then the name: "s" salt, "k" StoredKey, "v" ServerKey */
	static const char what[] = "skv";
	uint8_t *to[] = { out->salt, out->stored_key, out->server_key };
	uint8_t msg[1 + TOKEN_MAX], d[KEY_BYTES];

	memset(out, 0, sizeof(*out));
	n = n < TOKEN_MAX ? n : TOKEN_MAX;
	snprintf(out->principal, sizeof(out->principal), "%.*s", (int)n, name);
	out->iterations = cs->n ? cs->c[0].iterations : ITER_MIN;
	out->salt_len = cs->n ? cs->c[0].salt_len : KEY_BYTES;
	memcpy(msg + 1, name, n);
	for (size_t i = 0; i < sizeof(to) / sizeof(*to); i++) {
		msg[0] = (uint8_t)what[i];
		hmac(cs->mock_secret, KEY_BYTES, msg, 1 + n, d);
		/* a salt longer than one digest repeats it: still only the name's */
		for (size_t k = 0; k < (i == 0 ? out->salt_len : KEY_BYTES); k++)
			to[i][k] = d[k % KEY_BYTES];
	}
	OPENSSL_cleanse(d, sizeof(d));
}

/* PLAIN: [authzid] NUL authcid NUL passwd, authzid empty or the authcid. */
static int plain_step(struct tfs_kafka_ctx *ctx, const uint8_t *in, size_t len)
{
	const char *p = (const char *)in, *z1 = memchr(p, '\0', len), *z2;
	const struct tfs_kafka_cred *c;
	struct tfs_kafka_cred stand_in;
	uint8_t key[KEY_BYTES];
	size_t ulen, zlen;
	bool ok;

	if (!z1 || !(z2 = memchr(z1 + 1, '\0', len - (size_t)(z1 + 1 - p)))) {
		fail(ctx, "PLAIN", "", 0, "not a PLAIN message");
		return -1;
	}
	zlen = (size_t)(z1 - p);
	ulen = (size_t)(z2 - z1 - 1);
	c = cred_find(ctx->k->creds, z1 + 1, ulen);
	if (!c)
		mock_of(ctx->k->creds, z1 + 1, ulen, &stand_in);
	ok = stored_key_of(z2 + 1, len - (size_t)(z2 + 1 - p), c ? c : &stand_in, key) == 0;
	ok = ok && CRYPTO_memcmp(key, c ? c->stored_key : stand_in.stored_key, KEY_BYTES) == 0;
	ok = ok && c;
	OPENSSL_cleanse(key, sizeof(key));
	if (!c)
		OPENSSL_cleanse(&stand_in, sizeof(stand_in));
	if (ok && zlen && (zlen != ulen || memcmp(p, z1 + 1, ulen))) {
		fail(ctx, "PLAIN", z1 + 1, ulen, "an authorization id other than the principal");
		return -1;
	}
	if (!ok) {
		fail(ctx, "PLAIN", z1 + 1, ulen, c ? "wrong password" : "unknown principal");
		return -1;
	}
	succeed(ctx, c, "PLAIN");
	return 1;
}

/* Reads the SCRAM attribute "X=" at *p (comma-terminated); NULL if absent. */
static const char *attr(const char **p, const char *end, char x, size_t *n)
{
	const char *v = *p, *comma;

	if (end - v < 2 || v[0] != x || v[1] != '=')
		return NULL;
	v += 2;
	comma = memchr(v, ',', (size_t)(end - v));
	*n = (size_t)((comma ? comma : end) - v);
	*p = comma ? comma + 1 : end;
	return v;
}

/* saslname (RFC 5802 5.1): "=2C" is ',' and "=3D" is '='; other '=' are invalid. */
static bool unescape_name(const char *s, size_t n, char *out, size_t cap, size_t *olen)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch == '=') {
			if (i + 3 > n)
				return false;
			if (!memcmp(s + i, "=2C", 3))
				ch = ',';
			else if (!memcmp(s + i, "=3D", 3))
				ch = '=';
			else
				return false;
			i += 2;
		}
		if (o + 1 >= cap)
			return false;
		out[o++] = ch;
	}
	out[o] = '\0';
	*olen = o;
	return true;
}

/* client-first: gs2-header ("n,," or "y,," with an optional a=authzid) then
 * client-first-bare "n=user,r=nonce[,extensions]"; answers server-first. */
static int scram_first(struct tfs_kafka_ctx *ctx, const uint8_t *in, size_t len, char *out,
                       size_t cap, size_t *out_len)
{
	struct tfs_kafka_sasl *s = ctx->sasl;
	const char *p = (const char *)in, *end = p + len, *bare, *v, *nonce;
	char user[PRINCIPAL_MAX + 1], authz[PRINCIPAL_MAX + 1] = "";
	uint8_t rnd[NONCE_BYTES];
	char rnd64[B64_LEN(NONCE_BYTES) + 1], salt64[B64_LEN(SALT_MAX) + 1];
	const struct tfs_kafka_cred *c;
	size_t n, ulen = 0, alen = 0, nlen;
	int w;

	/* a= authzid, or none; "y": the client could bind a channel, this cannot */
	if (len < 3 || memchr(p, '\0', len) || (p[0] != 'n' && p[0] != 'y') || p[1] != ',') {
		fail(ctx, "SCRAM-SHA-256", "", 0, "not a client-first message (or channel binding)");
		return -1;
	}
	p += 2;
	if ((v = attr(&p, end, 'a', &n))) {
		if (!unescape_name(v, n, authz, sizeof(authz), &alen)) {
			fail(ctx, "SCRAM-SHA-256", v, n, "a bad authorization id");
			return -1;
		}
	} else if (p < end && *p == ',') {
		p++;
	} else {
		fail(ctx, "SCRAM-SHA-256", "", 0, "a bad GS2 header");
		return -1;
	}
	bare = p;
	v = attr(&p, end, 'n', &n);
	if (!v || !unescape_name(v, n, user, sizeof(user), &ulen) ||
	    !(nonce = attr(&p, end, 'r', &nlen)) || nlen == 0 || nlen > NONCE_MAX ||
	    memchr(nonce, ',', nlen)) {
		fail(ctx, "SCRAM-SHA-256", v ? v : "", v ? n : 0, "a bad client-first message");
		return -1;
	}
	if (alen && (alen != ulen || memcmp(authz, user, ulen))) {
		fail(ctx, "SCRAM-SHA-256", user, ulen, "an authorization id other than the principal");
		return -1;
	}
	c = cred_find(ctx->k->creds, user, ulen);
	if (!c) {
		/* answered as a known one; fails at client-final */
		if (!(s->mock = malloc(sizeof(*s->mock)))) {
			fail(ctx, "SCRAM-SHA-256", user, ulen, "out of memory");
			return -1;
		}
		mock_of(ctx->k->creds, user, ulen, s->mock);
		c = s->mock;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		fail(ctx, "SCRAM-SHA-256", user, ulen, "no random nonce");
		return -1;
	}
	rnd64[b64_encode(rnd, sizeof(rnd), rnd64)] = '\0';
	salt64[b64_encode(c->salt, c->salt_len, salt64)] = '\0';
	w = snprintf(out, cap, "r=%.*s%s,s=%s,i=%d", (int)nlen, nonce, rnd64, salt64, c->iterations);
	s->client_first_bare = strndup(bare, (size_t)(end - bare));
	s->server_first = strdup(out);
	if (w < 0 || (size_t)w >= cap || !s->client_first_bare || !s->server_first) {
		fail(ctx, "SCRAM-SHA-256", user, ulen, "out of memory");
		return -1;
	}
	s->cred = c;
	s->nonce_len = nlen + strlen(rnd64);
	*out_len = (size_t)w;
	s->state_scram_final = true;
	return 0;
}

/* client-final "c=biws,r=nonce,p=proof": checks the proof, answers "v=...". */
static int scram_final(struct tfs_kafka_ctx *ctx, const uint8_t *in, size_t len, char *out,
                       size_t cap, size_t *out_len)
{
	struct tfs_kafka_sasl *s = ctx->sasl;
	const struct tfs_kafka_cred *c = s->cred;
	const char *p = (const char *)in, *end = p + len, *cb, *nonce, *proof, *without = p;
	uint8_t got[KEY_BYTES], sig[KEY_BYTES], client_key[KEY_BYTES], stored[KEY_BYTES];
	char *msg = NULL;
	size_t cbn, nn, pn, mlen;
	bool ok = false;
	int w;

	s->state_scram_final = false;
	/* the proof is the last attribute; what precedes ",p=" is signed */
	proof = NULL;
	for (size_t i = len >= 3 ? len - 3 : 0; len >= 3 && !proof; i--) {
		if (!memcmp(p + i, ",p=", 3))
			proof = p + i + 3;
		if (i == 0)
			break;
	}
	if (memchr(p, '\0', len) || !proof || !(cb = attr(&p, end, 'c', &cbn)) ||
	    !(nonce = attr(&p, end, 'r', &nn)) || nonce + nn > proof - 3) {
		fail(ctx, "SCRAM-SHA-256", c->principal, strlen(c->principal),
		     "a bad client-final message");
		return -1;
	}
	mlen = (size_t)(proof - 3 - without);
	pn = (size_t)(end - proof);
	/* c= must be the GS2 header of the first message ("n,," is "biws"); the
	 * nonce must end with the one sent, Kafka's rule: librdkafka 2.0.2 puts its
	 * own nonce before the combined one, and Kafka accepts it (the proof covers
	 * the message as sent, so nothing is weakened) */
	if (!(cbn == 4 && !memcmp(cb, "biws", 4)) || nn < s->nonce_len ||
	    memcmp(nonce + nn - s->nonce_len, s->server_first + 2, s->nonce_len) ||
	    b64_decode(proof, pn, got, KEY_BYTES) != KEY_BYTES) {
		fail(ctx, "SCRAM-SHA-256", c->principal, strlen(c->principal),
		     "channel binding, nonce or proof do not match");
		return -1;
	}
	/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
	msg = malloc(strlen(s->client_first_bare) + strlen(s->server_first) + mlen + 3);
	if (!msg) {
		fail(ctx, "SCRAM-SHA-256", c->principal, strlen(c->principal), "out of memory");
		return -1;
	}
	w = sprintf(msg, "%s,%s,%.*s", s->client_first_bare, s->server_first, (int)mlen, without);
	hmac(c->stored_key, KEY_BYTES, msg, (size_t)w, sig);
	for (int i = 0; i < KEY_BYTES; i++)
		client_key[i] = got[i] ^ sig[i];
	SHA256(client_key, KEY_BYTES, stored);
	ok = CRYPTO_memcmp(stored, c->stored_key, KEY_BYTES) == 0 && c != s->mock;
	if (ok) {
		char v64[B64_LEN(KEY_BYTES) + 1];
		hmac(c->server_key, KEY_BYTES, msg, (size_t)w, sig);
		v64[b64_encode(sig, KEY_BYTES, v64)] = '\0';
		*out_len = (size_t)snprintf(out, cap, "v=%s", v64);
	}
	OPENSSL_cleanse(client_key, sizeof(client_key));
	free(msg);
	if (!ok) {
		fail(ctx, "SCRAM-SHA-256", c->principal, strlen(c->principal),
		     c == s->mock ? "unknown principal" : "wrong password");
		return -1;
	}
	succeed(ctx, c, "SCRAM-SHA-256");
	return 1;
}

/* One client token: 1 authenticated, 0 go on (out holds the answer), -1 failed. */
static int step(struct tfs_kafka_ctx *ctx, const uint8_t *in, size_t len, char *out, size_t cap,
                size_t *out_len)
{
	*out_len = 0;
	if (len == 0 || len > TOKEN_MAX) {
		fail(ctx, ctx->sasl->mech == TFS_KAFKA_SASL_PLAIN ? "PLAIN" : "SCRAM-SHA-256", "", 0,
		     "an empty token, or one longer than 1024 bytes");
		return -1;
	}
	if (ctx->sasl->mech == TFS_KAFKA_SASL_PLAIN)
		return plain_step(ctx, in, len);
	if (ctx->sasl->state_scram_final)
		return scram_final(ctx, in, len, out, cap, out_len);
	return scram_first(ctx, in, len, out, cap, out_len);
}

/* ---- SaslHandshake (17) ---- */

enum tfs_kafka_verdict tfs__kafka_sasl_handshake(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                 struct kw *w)
{
	struct tfs_slice m = kr_str(r, NULL);
	struct tfs_kafka_sasl *s = ctx->sasl;
	unsigned enabled = ctx->k->cfg.sasl_mechanisms, want = 0;
	int16_t err = E_NONE;

	if (r->bad || kr_left(r))
		return KAFKA_CLOSE;
	if (m.len == 5 && !memcmp(m.p, "PLAIN", 5))
		want = TFS_KAFKA_SASL_PLAIN;
	else if (m.len == 13 && !memcmp(m.p, "SCRAM-SHA-256", 13))
		want = TFS_KAFKA_SASL_SCRAM_SHA_256;
	if (!s || s->state != SASL_WANT_HANDSHAKE) {
		err = E_ILLEGAL_SASL_STATE;         /* a PLAINTEXT listener, or a second one */
	} else if (!(want & enabled)) {
		char name[64];
		log_name((const char *)m.p, m.len, name);
		tfs_log_warn("kafka", "SASL mechanism '%s' asked for: not enabled (%s)", name,
		             tfs__kafka_sasl_mechanisms(enabled));
		err = E_UNSUPPORTED_SASL_MECHANISM;
	} else {
		s->mech = want;
		s->state = ctx->api_version == 0 ? SASL_RAW : SASL_WANT_AUTHENTICATE;
	}
	tfs__kafka_begin(w, ctx, false);
	kw_i16(w, err);
	if (!s || s->state == SASL_OFF) {
		kw_array(w, 0);
	} else {
		kw_array(w, __builtin_popcount(enabled));
		if (enabled & TFS_KAFKA_SASL_PLAIN)
			kw_cstr(w, "PLAIN");
		if (enabled & TFS_KAFKA_SASL_SCRAM_SHA_256)
			kw_cstr(w, "SCRAM-SHA-256");
	}
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- SaslAuthenticate (36) ---- */

static void kw_bytes(struct kw *w, const void *p, size_t len)
{
	if (w->flex)
		kw_uvarint(w, (uint32_t)len + 1);
	else
		kw_i32(w, (int32_t)len);
	kw_raw(w, p, len);
}

enum tfs_kafka_verdict tfs__kafka_sasl_authenticate(struct tfs_kafka_ctx *ctx, struct kr *r,
                                                    struct kw *w)
{
	struct tfs_kafka_sasl *s = ctx->sasl;
	bool null = false;
	struct tfs_slice in = kr_bytes(r, &null);
	char out[TOKEN_MAX];
	size_t out_len = 0;
	const char *msg = NULL;
	int16_t err = E_NONE;

	kr_tags(r);
	if (r->bad || kr_left(r))
		return KAFKA_CLOSE;
	if (s && s->fail_due_ms) {
		/* the failure this request met, parked: answered once it is due */
		if (ctx->now_ms < s->fail_due_ms) {
			ctx->wake_at_ms = s->fail_due_ms;
			ctx->park_clock_only = true;
			return KAFKA_PARK;
		}
		s->fail_due_ms = 0;
		err = E_SASL_AUTHENTICATION_FAILED;
		msg = "Authentication failed: invalid credentials";
	} else if (!s || s->state != SASL_WANT_AUTHENTICATE) {
		err = E_ILLEGAL_SASL_STATE;
		msg = "SaslAuthenticate without a SaslHandshake v1 first";
		if (s && s->state != SASL_OFF && s->state != SASL_DONE)
			s->state = SASL_FAILED;
	} else if (step(ctx, null ? NULL : in.p, in.len, out, sizeof(out), &out_len) < 0) {
		if (s->fail_due_ms) {
			ctx->wake_at_ms = s->fail_due_ms;
			ctx->park_clock_only = true;
			return KAFKA_PARK;
		}
		err = E_SASL_AUTHENTICATION_FAILED;
		msg = "Authentication failed: invalid credentials";
	}
	tfs__kafka_begin(w, ctx, ctx->flex);
	kw_i16(w, err);
	if (msg)
		kw_cstr(w, msg);
	else
		kw_nullstr(w);
	kw_bytes(w, out, out_len);
	if (ctx->api_version >= 1)
		kw_i64(w, 0);                   /* session lifetime: no re-authentication */
	kw_tags(w);
	tfs__kafka_finish(w);
	return KAFKA_REPLY;
}

/* ---- the v0 handshake's bare tokens ---- */

bool tfs__kafka_sasl_raw(const struct tfs_kafka_sasl *s)
{
	return s && (s->state == SASL_RAW || (s->fail_due_ms && s->fail_raw));
}

enum tfs_kafka_verdict tfs__kafka_sasl_raw_token(struct tfs_kafka_ctx *ctx, const uint8_t *tok,
                                                 size_t len, struct kw *w)
{
	char out[TOKEN_MAX];
	size_t out_len = 0;
	struct tfs_kafka_sasl *s = ctx->sasl;

	if (s->fail_due_ms && ctx->now_ms >= s->fail_due_ms)
		return KAFKA_CLOSE;             /* the failure's delay is over */
	if (s->fail_due_ms || step(ctx, tok, len, out, sizeof(out), &out_len) < 0) {
		if (!s->fail_due_ms)
			return KAFKA_CLOSE;     /* Kafka closes the connection */
		ctx->wake_at_ms = s->fail_due_ms;
		ctx->park_clock_only = true;
		return KAFKA_PARK;
	}
	w->flex = false;
	kw_bytes(w, out, out_len);              /* int32 size + token, no header */
	return KAFKA_REPLY;
}
