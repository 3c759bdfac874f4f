/* keyname.c - key bytes <-> canonical file names (see keyname.h). */
#include "fs/keyname.h"

#include <errno.h>

static const char hexdigits[] = "0123456789ABCDEF";

/* Must byte b at position pos be escaped? */
static inline bool needs_escape(uint8_t b, size_t pos)
{
	return b == '%' || b == '/' || b < 0x20 || b == 0x7f || (pos == 0 && b == '.');
}

/* Value of an upper-case hex digit, or -1 (lower case is not canonical). */
static inline int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t tfs_keyname_len(struct tfs_slice key)
{
	size_t n = 0;

	if (key.len == 0)
		return 1;                          /* "%" */
	for (size_t i = 0; i < key.len; i++)
		n += needs_escape(key.p[i], i) ? 3 : 1;
	return n;
}

ssize_t tfs_keyname_encode(struct tfs_slice key, char *buf, size_t cap)
{
	size_t n = tfs_keyname_len(key), o = 0;

	if (n > TFS_KEYNAME_MAX)
		return -ENAMETOOLONG;
	if (cap < n + 1)
		return -ERANGE;
	if (key.len == 0) {
		buf[0] = '%';
		buf[1] = '\0';
		return 1;
	}
	for (size_t i = 0; i < key.len; i++) {
		uint8_t b = key.p[i];
		if (needs_escape(b, i)) {
			buf[o++] = '%';
			buf[o++] = hexdigits[b >> 4];
			buf[o++] = hexdigits[b & 0x0f];
		} else {
			buf[o++] = (char)b;
		}
	}
	buf[o] = '\0';
	return (ssize_t)o;
}

ssize_t tfs_keyname_decode(const char *name, size_t len, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (len == 0)
		return -EINVAL;
	if (len == 1 && name[0] == '%')
		return 0;                          /* the empty key */
	for (size_t i = 0; i < len; i++) {
		uint8_t b = (uint8_t)name[i];
		if (b == '%') {
			int hi, lo;
			if (i + 2 >= len)
				return -EINVAL;            /* truncated escape */
			hi = hexval(name[i + 1]);
			lo = hexval(name[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			b = (uint8_t)(hi << 4 | lo);
			if (!needs_escape(b, o))
				return -EINVAL;            /* an escape of a byte that stands for itself */
			i += 2;
		} else if (needs_escape(b, o)) {
			return -EINVAL;                    /* raw byte that must be escaped */
		}
		if (o >= cap)
			return -ERANGE;
		out[o++] = b;
	}
	return (ssize_t)o;
}

bool tfs_keyname_is_plain(const char *name, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (needs_escape((uint8_t)name[i], i))
			return false;
	return true;
}
