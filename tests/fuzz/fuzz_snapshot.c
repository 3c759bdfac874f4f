/* fuzz_snapshot.c - the producer-state snapshot decoder
 * (engine/producer/producer_state.c, tfs_pstate_snapshot_decode) on the input's bytes,
 * as a `<offset>.snapshot` file read at open would hand them over.
 *
 * Properties:
 *   - a refused snapshot says why and leaves the state empty;
 *   - an accepted one encodes again to a snapshot that decodes to the same
 *     producers, and that encoding is a fixed point (encode, decode, encode
 *     gives the same bytes);
 *   - every single-byte change of an accepted snapshot is refused (the version,
 *     the CRC-32C over the rest, and the size rule leave no byte unchecked), so
 *     a flipped byte can never bring back a producer state nobody had.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/producer/producer_state.h"
#include "tests/fuzz/fz.h"

#define SNAPSHOT_END 1000               /* the file's name: its end offset */
#define FLIP_MAX 4096                   /* flip every byte of inputs up to this */

static struct tfs_pstate *state_of(const uint8_t *p, size_t n, int *rc)
{
	struct tfs_pstate *ps;
	const char *why = NULL;

	FZ_CHECK(tfs_pstate_create(&ps) == 0, "create");
	*rc = tfs_pstate_snapshot_decode(ps, p, n, SNAPSHOT_END, 0, 0, &why);
	if (*rc != 0) {
		FZ_CHECK(*rc == TFS_ECORRUPT, "decode returned %d", *rc);
		FZ_CHECK(why != NULL, "a refusal without a reason");
		FZ_CHECK(tfs_pstate_count(ps) == 0, "a refused snapshot left %zu producers",
		         tfs_pstate_count(ps));
	}
	return ps;
}

static void same_producers(struct tfs_pstate *a, struct tfs_pstate *b)
{
	size_t n = tfs_pstate_count(a);
	struct tfs_pstate_entry *ea, *eb;

	FZ_CHECK(tfs_pstate_count(b) == n, "%zu producers, then %zu", n, tfs_pstate_count(b));
	ea = calloc(n + 1, sizeof(*ea));
	eb = calloc(n + 1, sizeof(*eb));
	FZ_CHECK(ea && eb, "out of memory");
	FZ_CHECK(tfs_pstate_list(a, ea, n) == n && tfs_pstate_list(b, eb, n) == n, "list");
	for (size_t i = 0; i < n; i++) {
		FZ_CHECK(ea[i].producer_id == eb[i].producer_id && ea[i].epoch == eb[i].epoch &&
		         ea[i].coordinator_epoch == eb[i].coordinator_epoch &&
		         ea[i].last_timestamp == eb[i].last_timestamp &&
		         ea[i].txn_first_offset == eb[i].txn_first_offset &&
		         ea[i].nbatches == eb[i].nbatches, "producer %zu changed in the round trip", i);
		for (int j = 0; j < ea[i].nbatches; j++)
			FZ_CHECK(!memcmp(&ea[i].batch[j], &eb[i].batch[j], sizeof(ea[i].batch[j])),
			         "producer %zu batch %d changed in the round trip", i, j);
	}
	free(ea);
	free(eb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tfs_pstate *ps, *again;
	uint8_t *enc = NULL, *enc2 = NULL, *flipped;
	size_t len = 0, len2 = 0;
	int rc;

	ps = state_of(data, size, &rc);
	if (rc != 0) {
		tfs_pstate_destroy(ps);
		return 0;
	}
	FZ_CHECK(tfs_pstate_snapshot_encode(ps, &enc, &len) == 0, "encode");
	again = state_of(enc, len, &rc);
	FZ_CHECK(rc == 0, "an accepted snapshot's encoding is refused");
	same_producers(ps, again);
	FZ_CHECK(tfs_pstate_snapshot_encode(again, &enc2, &len2) == 0, "encode again");
	FZ_CHECK(len2 == len && !memcmp(enc, enc2, len), "encoding is not a fixed point");
	tfs_pstate_destroy(again);

	if (size <= FLIP_MAX) {
		flipped = malloc(size);
		FZ_CHECK(flipped != NULL, "out of memory");
		for (size_t i = 0; i < size; i++) {
			memcpy(flipped, data, size);
			flipped[i] ^= (uint8_t)(1u << (i % 8));
			again = state_of(flipped, size, &rc);
			FZ_CHECK(rc != 0, "byte %zu flipped is still accepted", i);
			tfs_pstate_destroy(again);
		}
		free(flipped);
	}
	free(enc);
	free(enc2);
	tfs_pstate_destroy(ps);
	return 0;
}
