/* crc32c.c - CRC-32C (Castagnoli), the checksum of Kafka's RecordBatch v2, through
 * ISA-L's crc32_iscsi.
 *
 * The polynomial is 0x1EDC6F41, used bit-reflected; the register starts at ~0 and is
 * inverted at the end, so tfs_crc32c(0, "123456789", 9) == 0xE3069283.
 * tfs_crc32c(crc, ...) continues a previous result, so a buffer may be summed in
 * pieces. crc32_iscsi takes and returns the register itself (no inversions), so a
 * previous result crc continues as ~crc32_iscsi(buf, len, ~crc).
 *
 * ISA-L picks its implementation for the CPU at first use (PCLMULQDQ folding and
 * the SSE4.2 crc32 instruction where present); bench/bench_libs measured it against
 * the three-lane SSE4.2 code topicfs had, on the same buffers in one run, at 1.0-1.2x
 * its speed, so that code is gone. crc32_iscsi takes an int length: longer buffers
 * go in pieces.
 */
#include <isa-l/crc.h>
#include <limits.h>

#include "engine/format/batch_codec.h"

#define PIECE_BYTES ((size_t)1 << 30)   /* well under INT_MAX */

uint32_t tfs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t reg = ~crc;

	while (len > 0) {
		size_t n = len < PIECE_BYTES ? len : PIECE_BYTES;
		reg = crc32_iscsi((unsigned char *)(uintptr_t)p, (int)n, reg);
		p += n;
		len -= n;
	}
	return ~reg;
}
