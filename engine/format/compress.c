/* compress.c - see compress.h: the four codecs of a batch's records region.
 *
 * Decompression never trusts a size the input states: every output buffer is
 * bounded by the caller's limit, a stated size above it is refused before anything
 * is allocated for it, and streams that do not state one are decoded into a buffer
 * that doubles up to the limit. A region that is truncated, has bytes after its end
 * (gzip: after the last member; snappy: a block that does not fit), or damaged in
 * any way the library notices is TFS_ECORRUPT.
 */
#include "engine/format/compress.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <isa-l/igzip_lib.h>
#include <zstd.h>

#include "engine/format/batch_codec.h"
#include "engine/types.h"

#define BUF_MIN_BYTES ((size_t)64 << 10)
#define GUESS_RATIO 4                  /* first output guess: 4x the input */
#define GZIP_LEVEL 1                   /* igzip's level 1: zlib's level 6 ratio within a
                                        * few percent at ten times the speed
                                        * (bench/bench_libs) */
#define GZIP_LEVEL_BUF ISAL_DEF_LVL1_DEFAULT
#define SNAPPY_BLOCK_BYTES (32u << 10) /* snappy-java's SnappyOutputStream block */
#define XERIAL_HEADER_BYTES 16
#define XERIAL_VERSION 1
#define XERIAL_COMPAT 1
#define BE32_BYTES 4
#define GZIP_SLACK_BYTES (64u << 10)
#define ZSTD_WINDOW_LOG_DEFAULT 27       /* libzstd's decoder default (128 MiB) */

static const uint8_t xerial_magic[8] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0 };

static int corrupt(const char **why, const char *reason)
{
	if (why)
		*why = reason;
	return TFS_ECORRUPT;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* ---- the output buffer ----------------------------------------------------------- */

static int reserve(struct tfs_inflater *z, size_t want)
{
	uint8_t *nb;

	if (want < BUF_MIN_BYTES)
		want = BUF_MIN_BYTES;
	if (z->cap >= want)
		return 0;
	nb = realloc(z->buf, want);
	if (!nb)
		return -ENOMEM;
	z->buf = nb;
	z->cap = want;
	return 0;
}

/* A first size for a stream that does not state its own, and the next one. */
static size_t first_guess(size_t len, size_t limit)
{
	return len <= limit / GUESS_RATIO ? len * GUESS_RATIO : limit;
}

static size_t next_size(size_t cur, size_t limit)
{
	return cur <= limit / 2 ? cur * 2 : limit;
}

void tfs_inflater_trim(struct tfs_inflater *z, size_t keep_bytes)
{
	if (z->cap <= keep_bytes)
		return;
	free(z->buf);
	z->buf = NULL;
	z->cap = 0;
}

void tfs_inflater_release(struct tfs_inflater *z)
{
	if (!z)
		return;
	free(z->buf);
	ZSTD_freeDCtx(z->zstd);
	free(z->gzip);
	LZ4F_freeDecompressionContext(z->lz4);
	memset(z, 0, sizeof(*z));
}

/* ---- zstd ------------------------------------------------------------------------- */

/* Frames without a content size (Java's streaming ZstdOutputStream), or several. */
static int zstd_stream(struct tfs_inflater *z, const uint8_t *src, size_t len, size_t limit,
                       size_t *out_len, const char **why)
{
	ZSTD_inBuffer in = { src, len, 0 };
	ZSTD_outBuffer out;
	int rc = reserve(z, first_guess(len, limit));

	if (rc)
		return rc;
	out.dst = z->buf;
	out.size = z->cap < limit ? z->cap : limit;
	out.pos = 0;
	for (;;) {
		size_t in0 = in.pos, out0 = out.pos, ret;
		if (out.pos == out.size && out.size < limit) {
			rc = reserve(z, next_size(out.size, limit));
			if (rc)
				return rc;
			out.dst = z->buf;
			out.size = z->cap < limit ? z->cap : limit;
		}
		ret = ZSTD_decompressStream(z->zstd, &out, &in);
		if (ZSTD_isError(ret))
			return corrupt(why, "zstd: damaged frame");
		if (ret == 0 && in.pos == in.size)
			break;   /* the last frame ended with the input */
		if (in.pos == in0 && out.pos == out0) {
			if (out.pos == limit)
				return corrupt(why, "zstd: body larger than max_decompressed");
			return corrupt(why, "zstd: truncated frame");
		}
	}
	*out_len = out.pos;
	return 0;
}

/* The smallest window log that covers limit bytes, within what libzstd accepts
 * and never past its own default. */
static int window_log_max(size_t limit)
{
	ZSTD_bounds b = ZSTD_dParam_getBounds(ZSTD_d_windowLogMax);
	int log = b.lowerBound, top = b.upperBound < ZSTD_WINDOW_LOG_DEFAULT ? b.upperBound
	                                                                   : ZSTD_WINDOW_LOG_DEFAULT;

	while (log < top && ((size_t)1 << log) < limit)
		log++;
	return log;
}

/* A frame that states its size (python-zstandard, our own) decodes in one call into
 * a buffer of exactly that size; anything else is streamed. */
static int zstd_inflate(struct tfs_inflater *z, const uint8_t *src, size_t len, size_t limit,
                        size_t *out_len, const char **why)
{
	unsigned long long stated = ZSTD_getFrameContentSize(src, len);
	size_t ret;
	int rc;

	if (stated == ZSTD_CONTENTSIZE_ERROR)
		return corrupt(why, "zstd: not a zstd frame");
	if (stated != ZSTD_CONTENTSIZE_UNKNOWN && stated > limit)
		return corrupt(why, "zstd: body larger than max_decompressed");
	if (!z->zstd) {
		z->zstd = ZSTD_createDCtx();
		if (!z->zstd)
			return -ENOMEM;
	} else {
		ZSTD_DCtx_reset(z->zstd, ZSTD_reset_session_only);
	}
	/* A frame without a content size makes the decoder allocate the window its
	 * header names, up to 128 MiB for a few bytes of input; no window wider than
	 * the whole output is of use, so none is allowed past the limit. */
	if (ZSTD_isError(ZSTD_DCtx_setParameter(z->zstd, ZSTD_d_windowLogMax, window_log_max(limit))))
		return -EINVAL;
	if (stated == ZSTD_CONTENTSIZE_UNKNOWN || ZSTD_findFrameCompressedSize(src, len) != len)
		return zstd_stream(z, src, len, limit, out_len, why);
	rc = reserve(z, (size_t)stated);
	if (rc)
		return rc;
	ret = ZSTD_decompressDCtx(z->zstd, z->buf, (size_t)stated, src, len);
	if (ZSTD_isError(ret) || ret != stated)   /* exactly `stated` bytes, or damage */
		return corrupt(why, "zstd: damaged frame or wrong content size");
	*out_len = ret;
	return 0;
}

/* ---- gzip ------------------------------------------------------------------------- */

/* Every member of a multi-member stream, back to back (GZIPInputStream reads them
 * all); nothing may follow the last. isal_inflate checks each member's CRC-32 and
 * length. */
static int gzip_inflate(struct tfs_inflater *z, const uint8_t *src, size_t len, size_t limit,
                        size_t *out_len, const char **why)
{
	struct inflate_state *s = z->gzip;
	size_t have = 0;
	int rc;

	if (len > UINT32_MAX)
		return corrupt(why, "gzip: body larger than max_decompressed");
	if (!s) {
		s = malloc(sizeof(*s));
		if (!s)
			return -ENOMEM;
		z->gzip = s;
	}
	isal_inflate_init(s);
	s->crc_flag = ISAL_GZIP;
	s->next_in = (uint8_t *)(uintptr_t)src;   /* isal_inflate does not write its input */
	s->avail_in = (uint32_t)len;
	rc = reserve(z, first_guess(len, limit));
	if (rc)
		return rc;
	for (;;) {
		size_t room;
		int ret;

		if (have == z->cap || have == limit) {
			if (have == limit)
				return corrupt(why, "gzip: body larger than max_decompressed");
			rc = reserve(z, next_size(z->cap, limit));
			if (rc)
				return rc;
		}
		room = (z->cap < limit ? z->cap : limit) - have;
		s->next_out = z->buf + have;
		s->avail_out = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room;
		ret = isal_inflate(s);
		have = (size_t)(s->next_out - z->buf);
		if (ret < 0)
			return corrupt(why, ret == ISAL_INCORRECT_CHECKSUM ? "gzip: checksum mismatch"
			                                                  : "gzip: damaged stream");
		if (s->block_state == ISAL_BLOCK_FINISH) {
			if (s->avail_in == 0)
				break;
			/* another member follows */
			uint8_t *next = s->next_in;
			uint32_t left = s->avail_in;
			isal_inflate_reset(s);
			s->crc_flag = ISAL_GZIP;
			s->next_in = next;
			s->avail_in = left;
			continue;
		}
		if (s->avail_out != 0 && s->avail_in == 0)
			return corrupt(why, "gzip: truncated stream");
	}
	*out_len = have;
	return 0;
}

/* ---- snappy ----------------------------------------------------------------------- */

/* One raw snappy block appended at z->buf + *have. */
static int snappy_block(struct tfs_inflater *z, const uint8_t *src, size_t len, size_t limit,
                        size_t *have, const char **why)
{
	size_t n, out;
	int rc;

	if (snappy_uncompressed_length((const char *)src, len, &n) != SNAPPY_OK)
		return corrupt(why, "snappy: damaged block header");
	if (n > limit - *have)
		return corrupt(why, "snappy: body larger than max_decompressed");
	rc = reserve(z, *have + n);
	if (rc)
		return rc;
	out = n;
	if (snappy_uncompress((const char *)src, len, (char *)z->buf + *have, &out) != SNAPPY_OK ||
	    out != n)
		return corrupt(why, "snappy: damaged block");
	*have += n;
	return 0;
}

static int snappy_inflate(struct tfs_inflater *z, const uint8_t *src, size_t len, size_t limit,
                          size_t *out_len, const char **why)
{
	size_t have = 0, pos = XERIAL_HEADER_BYTES;
	int rc;

	if (len < XERIAL_HEADER_BYTES || memcmp(src, xerial_magic, sizeof(xerial_magic)) != 0) {
		rc = snappy_block(z, src, len, limit, &have, why);
		if (rc == 0)
			*out_len = have;
		return rc;
	}
	/* version and minimum compatible version: snappy-java reads every version
	 * whose compatible version it knows; 1 is the only one. */
	if (get_be32(src + sizeof(xerial_magic) + BE32_BYTES) > XERIAL_COMPAT)
		return corrupt(why, "snappy: xerial stream of an unknown version");
	while (pos < len) {
		uint32_t n;
		if (len - pos < BE32_BYTES)
			return corrupt(why, "snappy: truncated xerial block length");
		n = get_be32(src + pos);
		pos += BE32_BYTES;
		if (n > len - pos)
			return corrupt(why, "snappy: truncated xerial block");
		rc = snappy_block(z, src + pos, n, limit, &have, why);
		if (rc)
			return rc;
		pos += n;
	}
	*out_len = have;
	return 0;
}

/* ---- lz4 -------------------------------------------------------------------------- */

static int lz4_inflate(struct tfs_inflater *z, const uint8_t *src, size_t len, size_t limit,
                       size_t *out_len, const char **why)
{
	size_t have = 0, pos = 0, ret = 1;
	int rc;

	if (!z->lz4) {
		if (LZ4F_isError(LZ4F_createDecompressionContext((LZ4F_dctx **)&z->lz4, LZ4F_VERSION)))
			return -ENOMEM;
	} else {
		LZ4F_resetDecompressionContext(z->lz4);
	}
	rc = reserve(z, first_guess(len, limit));
	if (rc)
		return rc;
	while (ret != 0) {
		size_t in = len - pos, out;
		if (pos == len)
			return corrupt(why, "lz4: truncated frame");
		if (have == z->cap || have == limit) {
			if (have == limit)
				return corrupt(why, "lz4: body larger than max_decompressed");
			rc = reserve(z, next_size(z->cap, limit));
			if (rc)
				return rc;
		}
		out = (z->cap < limit ? z->cap : limit) - have;
		ret = LZ4F_decompress(z->lz4, z->buf + have, &out, src + pos, &in, NULL);
		if (LZ4F_isError(ret))
			return corrupt(why, "lz4: damaged frame");
		pos += in;
		have += out;
	}
	if (pos != len)
		return corrupt(why, "lz4: bytes after the frame");
	*out_len = have;
	return 0;
}

int tfs_inflate(struct tfs_inflater *z, int codec, const uint8_t *src, size_t len,
                size_t limit, size_t *out_len, const char **why)
{
	switch (codec) {
	case TFS_CODEC_GZIP:
		return gzip_inflate(z, src, len, limit, out_len, why);
	case TFS_CODEC_SNAPPY:
		return snappy_inflate(z, src, len, limit, out_len, why);
	case TFS_CODEC_LZ4:
		return lz4_inflate(z, src, len, limit, out_len, why);
	case TFS_CODEC_ZSTD:
		return zstd_inflate(z, src, len, limit, out_len, why);
	default:
		if (why)
			*why = "unknown compression codec";
		return TFS_EUNSUPPORTED;
	}
}

/* ---- compression ------------------------------------------------------------------ */

static LZ4F_preferences_t lz4_prefs(void)
{
	LZ4F_preferences_t p;

	memset(&p, 0, sizeof(p));
	p.frameInfo.blockSizeID = LZ4F_max64KB;
	p.frameInfo.blockMode = LZ4F_blockIndependent;
	p.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
	p.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
	p.frameInfo.contentSize = 0;
	p.compressionLevel = 0;          /* the fast compressor, as Kafka's default level */
	return p;
}

size_t tfs_deflate_bound(int codec, size_t len)
{
	LZ4F_preferences_t p;
	size_t blocks;

	switch (codec) {
	case TFS_CODEC_GZIP:
		/* stored blocks at worst: 5 bytes of header per 64 KiB, plus the gzip
		 * header and trailer and igzip's own headers */
		return len > UINT32_MAX / 2 ? 0 : len + (len >> 12) + GZIP_SLACK_BYTES;
	case TFS_CODEC_SNAPPY:
		blocks = len / SNAPPY_BLOCK_BYTES + 1;
		return XERIAL_HEADER_BYTES + blocks * (BE32_BYTES + snappy_max_compressed_length(SNAPPY_BLOCK_BYTES));
	case TFS_CODEC_LZ4:
		p = lz4_prefs();
		return LZ4F_compressFrameBound(len, &p);
	case TFS_CODEC_ZSTD:
		return ZSTD_isError(ZSTD_compressBound(len)) ? 0 : ZSTD_compressBound(len);
	default:
		return 0;
	}
}

static int gzip_deflate(struct tfs_deflater *z, const uint8_t *src, size_t len, uint8_t *dst,
                        size_t cap, size_t *out_len)
{
	struct isal_zstream *s = z->gzip;
	int ret;

	if (len > UINT32_MAX || cap > UINT32_MAX)
		return -EMSGSIZE;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		s->level_buf = malloc(GZIP_LEVEL_BUF);
		if (!s->level_buf) {
			free(s);
			return -ENOMEM;
		}
		z->gzip = s;
	}
	{
		uint8_t *level_buf = s->level_buf;
		isal_deflate_init(s);
		s->level_buf = level_buf;
	}
	s->level_buf_size = GZIP_LEVEL_BUF;
	s->level = GZIP_LEVEL;
	s->gzip_flag = IGZIP_GZIP;
	s->end_of_stream = 1;
	s->flush = NO_FLUSH;
	s->next_in = (uint8_t *)(uintptr_t)src;
	s->avail_in = (uint32_t)len;
	s->next_out = dst;
	s->avail_out = (uint32_t)cap;
	ret = isal_deflate(s);
	if (ret != COMP_OK || s->internal_state.state != ZSTATE_END)
		return -ENOMEM;   /* the bound always suffices */
	*out_len = cap - s->avail_out;
	return 0;
}

static int snappy_deflate(const uint8_t *src, size_t len, uint8_t *dst, size_t cap,
                          size_t *out_len)
{
	size_t pos = 0, o = XERIAL_HEADER_BYTES;

	memcpy(dst, xerial_magic, sizeof(xerial_magic));
	put_be32(dst + sizeof(xerial_magic), XERIAL_VERSION);
	put_be32(dst + sizeof(xerial_magic) + BE32_BYTES, XERIAL_COMPAT);
	while (pos < len) {
		size_t n = len - pos < SNAPPY_BLOCK_BYTES ? len - pos : SNAPPY_BLOCK_BYTES;
		size_t w = cap - o - BE32_BYTES;
		if (snappy_compress((const char *)src + pos, n, (char *)dst + o + BE32_BYTES, &w) !=
		    SNAPPY_OK)
			return -ENOMEM;
		put_be32(dst + o, (uint32_t)w);
		o += BE32_BYTES + w;
		pos += n;
	}
	*out_len = o;
	return 0;
}

static int lz4_deflate(struct tfs_deflater *z, const uint8_t *src, size_t len, uint8_t *dst,
                       size_t cap, size_t *out_len)
{
	LZ4F_preferences_t p = lz4_prefs();
	size_t ret;

	if (!z->lz4 &&
	    LZ4F_isError(LZ4F_createCompressionContext((LZ4F_cctx **)&z->lz4, LZ4F_VERSION)))
		return -ENOMEM;
	size_t o;

	/* begin, one update, end on a reused context: the frame LZ4F_compressFrame
	 * would write, without a context per batch. */
	ret = LZ4F_compressBegin(z->lz4, dst, cap, &p);
	if (LZ4F_isError(ret))
		return -ENOMEM;
	o = ret;
	ret = LZ4F_compressUpdate(z->lz4, dst + o, cap - o, src, len, NULL);
	if (LZ4F_isError(ret))
		return -ENOMEM;
	o += ret;
	ret = LZ4F_compressEnd(z->lz4, dst + o, cap - o, NULL);
	if (LZ4F_isError(ret))
		return -ENOMEM;
	*out_len = o + ret;
	return 0;
}

static int zstd_deflate(struct tfs_deflater *z, int level, const uint8_t *src, size_t len,
                        uint8_t *dst, size_t cap, size_t *out_len)
{
	size_t ret;

	if (!z->zstd) {
		z->zstd = ZSTD_createCCtx();
		if (!z->zstd)
			return -ENOMEM;
		z->zstd_level = ZSTD_CLEVEL_DEFAULT;   /* a fresh context's level */
	}
	/* Parameters stay set from batch to batch: only the session is reset, and the
	 * level is set when it changes. ZSTD_compress2 tells zstd the input's size,
	 * which sizes the window and tables to it. */
	ZSTD_CCtx_reset(z->zstd, ZSTD_reset_session_only);
	if (level != z->zstd_level) {
		if (ZSTD_isError(ZSTD_CCtx_setParameter(z->zstd, ZSTD_c_compressionLevel, level)))
			return -EINVAL;
		z->zstd_level = level;
	}
	ret = ZSTD_compress2(z->zstd, dst, cap, src, len);
	if (ZSTD_isError(ret))
		return -ENOMEM;
	*out_len = ret;
	return 0;
}

int tfs_deflate(struct tfs_deflater *z, int codec, int zstd_level, const uint8_t *src,
                size_t len, uint8_t *dst, size_t cap, size_t *out_len)
{
	if (cap < tfs_deflate_bound(codec, len) || tfs_deflate_bound(codec, len) == 0)
		return -EMSGSIZE;
	switch (codec) {
	case TFS_CODEC_GZIP:
		return gzip_deflate(z, src, len, dst, cap, out_len);
	case TFS_CODEC_SNAPPY:
		return snappy_deflate(src, len, dst, cap, out_len);
	case TFS_CODEC_LZ4:
		return lz4_deflate(z, src, len, dst, cap, out_len);
	case TFS_CODEC_ZSTD:
		return zstd_deflate(z, zstd_level, src, len, dst, cap, out_len);
	default:
		return TFS_EUNSUPPORTED;
	}
}

void tfs_deflater_release(struct tfs_deflater *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->zstd);
	if (z->gzip)
		free(((struct isal_zstream *)z->gzip)->level_buf);
	free(z->gzip);
	LZ4F_freeCompressionContext(z->lz4);
	memset(z, 0, sizeof(*z));
}
