/* keyname.h - Kafka key bytes <-> the canonical file name that spells them.
 *
 * Owns: nothing; pure functions on caller buffers.
 *
 * The spelling (docs/semantics.md §2): a key's file name is its bytes with
 * these written as "%XX" (upper-case hex): '%', '/', 0x00-0x1F, 0x7F, and a '.' in
 * the first position. The empty key is the name "%". Every other byte (including
 * 0x80-0xFF) stands for itself.
 *
 * Invariants: (1) encode is injective and decode(encode(k)) == k for every key;
 *   (2) decode accepts exactly the names encode produces (canonical spellings):
 *   "%2e", "%41", "%G1", a trailing '%', a raw leading '.', a raw control byte are
 *   all rejected; so there is one name per key and one key per name.
 *
 * Threads: reentrant.
 * Errors: -EINVAL for a non-canonical name, -ENAMETOOLONG when the name of a key
 * would exceed TFS_KEYNAME_MAX bytes, -ERANGE when a caller buffer is too small.
 */
#ifndef TFS_FS_KEYNAME_H
#define TFS_FS_KEYNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/types.h"

#define TFS_KEYNAME_MAX 255        /* NAME_MAX: the longest file name topicfs takes */

/* Length of the name of key (without a NUL); may exceed TFS_KEYNAME_MAX. */
size_t tfs_keyname_len(struct tfs_slice key);

/* Writes the name of key and a NUL into buf. Returns the name's length,
 * -ENAMETOOLONG if it exceeds TFS_KEYNAME_MAX (nothing useful written), or -ERANGE
 * if cap < length + 1. */
ssize_t tfs_keyname_encode(struct tfs_slice key, char *buf, size_t cap);

/* Decodes the name (len bytes, no NUL needed) into out (cap >= len suffices: a key
 * is never longer than its name). Returns the key's length, -EINVAL if the name is
 * not the canonical spelling of any key (or is empty), -ERANGE if cap is short. */
ssize_t tfs_keyname_decode(const char *name, size_t len, uint8_t *out, size_t cap);

/* True if the name needs no decoding: the key's bytes are the name's bytes (no '%',
 * no byte that would need escaping, no leading '.'). Such a name is canonical. The
 * fast path of .put uses it to point into the written buffer. */
bool tfs_keyname_is_plain(const char *name, size_t len);

#endif
