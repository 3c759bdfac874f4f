/* crc32c.c - CRC-32C (Castagnoli), the checksum of Kafka's RecordBatch v2.
 *
 * The polynomial is 0x1EDC6F41, used bit-reflected (0x82F63B78); the register starts
 * at ~0 and is inverted at the end, so tfs_crc32c(0, "123456789", 9) == 0xE3069283.
 * tfs_crc32c(crc, ...) continues a previous result, so a buffer may be summed in
 * pieces.
 *
 * Two implementations compute the same function:
 *
 *   table     slicing-by-8: eight 256-entry tables let one step fold eight input
 *             bytes. Portable; about 1 byte per cycle.
 *   hardware  the SSE4.2 `crc32` instruction (x86-64 only), 8 bytes per instruction.
 *             The instruction has a latency of 3 cycles but a throughput of 1, so
 *             large buffers are cut into three equal lanes that are summed
 *             independently and then joined: the CRC of A||B equals the CRC of A
 *             "shifted" over len(B) zero bytes, xor the CRC of B started from 0.
 *             The shift is linear in the 32-bit register, so a shift over a fixed
 *             length is four 256-entry table lookups (tables built at first use).
 *
 * Which one runs is decided once per process by a pthread_once probe of the CPU; the
 * tables are built by the same probe. Apart from that the module has no state, and
 * every function may be called from any thread.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/batch_codec.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_PATH 1
#include <nmmintrin.h>
#else
#define HAVE_SSE42_PATH 0
#endif

#define POLY_REFLECTED 0x82F63B78u  /* Castagnoli polynomial, bit-reversed */
#define SLICES 8                    /* slicing-by-8: bytes folded per table step */
#define BYTE_VALUES 256
#define REG_BYTES 4                 /* bytes in the 32-bit CRC register */
#define REG_BITS 32

/* Three-lane split for the hardware path. A lane of LONG_LANE_BYTES amortizes the
 * join (eight lookups) over 1024 instructions; SHORT_LANE_BYTES catches the rest of
 * buffers too small for the long lanes. Both must be multiples of 8. */
#define LANES 3
#define LONG_LANE_BYTES 8192
#define SHORT_LANE_BYTES 256

static uint32_t slice_tab[SLICES][BYTE_VALUES];
/* shift_*[k][b]: the register after running LANE zero bytes through a register whose
 * only non-zero byte is byte k, holding b. */
static uint32_t shift_long[REG_BYTES][BYTE_VALUES];
static uint32_t shift_short[REG_BYTES][BYTE_VALUES];
static bool hw_ok;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* One zero byte through the raw (non-inverted) register. */
static uint32_t zero_byte(uint32_t reg)
{
	return (reg >> 8) ^ slice_tab[0][reg & 0xff];
}

static void build_shift(uint32_t tab[REG_BYTES][BYTE_VALUES], size_t zero_bytes)
{
	uint32_t basis[REG_BITS];
	for (unsigned bit = 0; bit < REG_BITS; bit++) {
		uint32_t reg = (uint32_t)1 << bit;
		for (size_t i = 0; i < zero_bytes; i++)
			reg = zero_byte(reg);
		basis[bit] = reg;
	}
	for (unsigned k = 0; k < REG_BYTES; k++) {
		for (unsigned b = 0; b < BYTE_VALUES; b++) {
			uint32_t v = 0;
			for (unsigned bit = 0; bit < 8; bit++)
				if (b & (1u << bit))
					v ^= basis[k * 8 + bit];
			tab[k][b] = v;
		}
	}
}

static void crc32c_init(void)
{
	for (unsigned n = 0; n < BYTE_VALUES; n++) {
		uint32_t c = n;
		for (unsigned bit = 0; bit < 8; bit++)
			c = (c & 1) ? (c >> 1) ^ POLY_REFLECTED : c >> 1;
		slice_tab[0][n] = c;
	}
	for (unsigned n = 0; n < BYTE_VALUES; n++)
		for (unsigned k = 1; k < SLICES; k++)
			slice_tab[k][n] = zero_byte(slice_tab[k - 1][n]);
#if HAVE_SSE42_PATH
	hw_ok = __builtin_cpu_supports("sse4.2");
	if (hw_ok) {
		build_shift(shift_long, LONG_LANE_BYTES);
		build_shift(shift_short, SHORT_LANE_BYTES);
	}
#else
	(void)build_shift;
#endif
}

static uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The raw register update, table version. */
static uint32_t sw_update(uint32_t reg, const uint8_t *p, size_t len)
{
	while (len >= SLICES) {
		uint32_t lo = reg ^ load_le32(p);
		uint32_t hi = load_le32(p + 4);
		reg = slice_tab[7][lo & 0xff] ^ slice_tab[6][(lo >> 8) & 0xff] ^
		      slice_tab[5][(lo >> 16) & 0xff] ^ slice_tab[4][lo >> 24] ^
		      slice_tab[3][hi & 0xff] ^ slice_tab[2][(hi >> 8) & 0xff] ^
		      slice_tab[1][(hi >> 16) & 0xff] ^ slice_tab[0][hi >> 24];
		p += SLICES;
		len -= SLICES;
	}
	while (len--)
		reg = (reg >> 8) ^ slice_tab[0][(reg ^ *p++) & 0xff];
	return reg;
}

uint32_t tfs_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&init_once, crc32c_init);
	return ~sw_update(~crc, buf, len);
}

bool tfs_crc32c_hw_available(void)
{
	pthread_once(&init_once, crc32c_init);
	return hw_ok;
}

#if HAVE_SSE42_PATH

static uint32_t shift(const uint32_t tab[REG_BYTES][BYTE_VALUES], uint32_t reg)
{
	return tab[0][reg & 0xff] ^ tab[1][(reg >> 8) & 0xff] ^
	       tab[2][(reg >> 16) & 0xff] ^ tab[3][reg >> 24];
}

__attribute__((target("sse4.2")))
static uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));     /* x86 is little-endian, as CRC-32C wants */
	return v;
}

/* Sums LANES consecutive lanes of lane bytes each, joining them with tab. */
__attribute__((target("sse4.2")))
static uint32_t hw_lanes(uint32_t reg, const uint8_t *p, size_t lane,
                         const uint32_t tab[REG_BYTES][BYTE_VALUES])
{
	uint64_t c0 = reg, c1 = 0, c2 = 0;
	const uint8_t *end = p + lane;
	while (p < end) {
		c0 = _mm_crc32_u64(c0, load64(p));
		c1 = _mm_crc32_u64(c1, load64(p + lane));
		c2 = _mm_crc32_u64(c2, load64(p + 2 * lane));
		p += sizeof(uint64_t);
	}
	reg = shift(tab, (uint32_t)c0) ^ (uint32_t)c1;
	return shift(tab, reg) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2")))
static uint32_t hw_update(uint32_t reg, const uint8_t *p, size_t len)
{
	uint64_t c;
	while (len && ((uintptr_t)p & (sizeof(uint64_t) - 1))) {
		reg = _mm_crc32_u8(reg, *p++);
		len--;
	}
	while (len >= LANES * LONG_LANE_BYTES) {
		reg = hw_lanes(reg, p, LONG_LANE_BYTES, shift_long);
		p += LANES * LONG_LANE_BYTES;
		len -= LANES * LONG_LANE_BYTES;
	}
	while (len >= LANES * SHORT_LANE_BYTES) {
		reg = hw_lanes(reg, p, SHORT_LANE_BYTES, shift_short);
		p += LANES * SHORT_LANE_BYTES;
		len -= LANES * SHORT_LANE_BYTES;
	}
	c = reg;
	while (len >= sizeof(uint64_t)) {
		c = _mm_crc32_u64(c, load64(p));
		p += sizeof(uint64_t);
		len -= sizeof(uint64_t);
	}
	reg = (uint32_t)c;
	while (len--)
		reg = _mm_crc32_u8(reg, *p++);
	return reg;
}

uint32_t tfs_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	if (!tfs_crc32c_hw_available())
		return tfs_crc32c_sw(crc, buf, len);
	return ~hw_update(~crc, buf, len);
}

uint32_t tfs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&init_once, crc32c_init);
	if (hw_ok)
		return ~hw_update(~crc, buf, len);
	return ~sw_update(~crc, buf, len);
}

#else /* !HAVE_SSE42_PATH */

uint32_t tfs_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return tfs_crc32c_sw(crc, buf, len);
}

uint32_t tfs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return tfs_crc32c_sw(crc, buf, len);
}

#endif
