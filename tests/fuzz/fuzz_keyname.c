/* fuzz_keyname.c - key bytes <-> file names (fs/keyname.c).
 *
 * The input is read twice: as a file name someone typed, and as the bytes of a
 * Kafka key. Properties (keyname.h's invariants):
 *   name: decode accepts it only if it is the canonical spelling of a key: the
 *         decoded key encodes back to exactly the same name; a plain name decodes
 *         to itself; a refused name is -EINVAL and never plain.
 *   key:  its name is what tfs_keyname_len says, a usable file name (no '/', no
 *         NUL or control byte, not ".", "..", nor any leading '.'), and decodes
 *         back to the key; a buffer one byte short is -ERANGE; a name over 255
 *         bytes is -ENAMETOOLONG.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/keyname.h"
#include "tests/fuzz/fz.h"

static void check_name(const uint8_t *data, size_t size)
{
	const char *name = (const char *)data;
	uint8_t *key = malloc(size + 1);
	char *again = malloc(3 * size + 2);
	ssize_t klen, nlen;

	if (!key || !again)
		abort();
	klen = tfs_keyname_decode(name, size, key, size);
	if (klen < 0) {
		FZ_CHECK(klen == -EINVAL, "decode of a %zu-byte name: %zd", size, klen);
		FZ_CHECK(!tfs_keyname_is_plain(name, size), "a refused name is plain");
	} else {
		struct tfs_slice k = tfs_slice_make(key, (size_t)klen);
		FZ_CHECK((size_t)klen <= size, "a key longer than its name");
		FZ_CHECK(tfs_keyname_len(k) == size, "name length %zu, re-encoded %zu", size,
		         tfs_keyname_len(k));
		nlen = tfs_keyname_encode(k, again, 3 * size + 2);
		if (size > TFS_KEYNAME_MAX) {
			FZ_CHECK(nlen == -ENAMETOOLONG, "encode of a %zu-byte name: %zd", size, nlen);
		} else {
			FZ_CHECK(nlen == (ssize_t)size && memcmp(again, name, size) == 0,
			         "decode then encode is not the same name");
		}
		if (tfs_keyname_is_plain(name, size))
			FZ_CHECK((size_t)klen == size && memcmp(key, name, size) == 0,
			         "a plain name is not its own key");
		/* A short output buffer is refused, never overrun (ASan watches). */
		if (klen > 0) {
			uint8_t *small = malloc((size_t)klen - 1 + 1);
			if (!small)
				abort();
			FZ_CHECK(tfs_keyname_decode(name, size, small, (size_t)klen - 1) == -ERANGE,
			         "decode into a short buffer");
			free(small);
		}
	}
	free(key);
	free(again);
}

static void check_key(const uint8_t *data, size_t size)
{
	struct tfs_slice key = tfs_slice_make(data, size);
	size_t want = tfs_keyname_len(key);
	char *name = malloc(want + 1);
	uint8_t *back = malloc(want + 1);
	ssize_t nlen, klen;

	if (!name || !back)
		abort();
	nlen = tfs_keyname_encode(key, name, want + 1);
	if (want > TFS_KEYNAME_MAX) {
		FZ_CHECK(nlen == -ENAMETOOLONG, "encode of a %zu-byte name: %zd", want, nlen);
		goto out;
	}
	FZ_CHECK(nlen == (ssize_t)want, "encode gave %zd, keyname_len %zu", nlen, want);
	FZ_CHECK(name[nlen] == '\0', "no NUL after the name");
	FZ_CHECK(nlen > 0 && name[0] != '.', "a name that is empty or starts with '.'");
	for (ssize_t i = 0; i < nlen; i++) {
		unsigned char c = (unsigned char)name[i];
		FZ_CHECK(c != '/' && c >= 0x20 && c != 0x7f, "byte 0x%02x in a name", c);
	}
	klen = tfs_keyname_decode(name, (size_t)nlen, back, want);
	FZ_CHECK(klen == (ssize_t)size && memcmp(back, data, size) == 0,
	         "encode then decode is not the same key");
	FZ_CHECK(tfs_keyname_is_plain(name, (size_t)nlen) ==
	         ((size_t)nlen == size && size > 0 && memcmp(name, data, size) == 0),
	         "is_plain disagrees with the spelling");
	FZ_CHECK(tfs_keyname_encode(key, name, want) == -ERANGE, "encode into a short buffer");
out:
	free(name);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_name(data, size);
	check_key(data, size);
	return 0;
}
