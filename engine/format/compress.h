/* compress.h - the records region of a batch in each of Kafka's codecs, framed
 * exactly as Kafka's clients and brokers write it (docs/format.md §3).
 *
 *   codec   library    framing of the region
 *   gzip    ISA-L      one or more gzip members (RFC 1952), as java.util.zip's
 *           (igzip)    GZIPOutputStream writes and GZIPInputStream reads them
 *   snappy  libsnappy  xerial's framing (snappy-java's SnappyOutputStream, which
 *                      Kafka uses): the 8-byte magic 82 'SNAPPY' 00, int32 version,
 *                      int32 minimum compatible version, then blocks of an int32
 *                      compressed length and a raw snappy block of at most 32 KiB of
 *                      input; a region without the magic is one raw snappy block
 *                      (what some clients write, and snappy-java reads too)
 *   lz4     liblz4     one LZ4 frame (v1.5.1): 64 KiB independent blocks, no block
 *                      or content checksum, no content size, as Kafka's
 *                      Lz4BlockOutputStream writes it; any valid frame is read
 *   zstd    libzstd    one or more zstd frames, with or without a content size
 *
 * Levels: gzip at igzip's level 1 (about zlib's default ratio, Kafka's -1, at ten
 * times its speed: bench/bench_libs), lz4 at liblz4's fast level (Kafka's
 * default level 9 also selects the fast compressor), zstd at the topic's
 * compression.zstd.level.
 *
 * Owns: a tfs_inflater owns its output buffer and one decompression context per
 * codec; a tfs_deflater one compression context per codec. Both are created lazily
 * on first use of a codec and reused from batch to batch (never one per batch).
 * Threads: one inflater or deflater per thread; the functions are reentrant.
 * Errors: 0, TFS_ECORRUPT (a damaged, truncated or oversized region; *why says
 * which), TFS_EUNSUPPORTED (an unknown codec), -ENOMEM, -EMSGSIZE.
 */
#ifndef TFS_COMPRESS_H
#define TFS_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

struct tfs_inflater {
	uint8_t *buf;              /* the decompressed region, grown as needed, owned */
	size_t cap;
	void *zstd;                /* ZSTD_DCtx */
	void *gzip;                /* ISA-L inflate_state */
	void *lz4;                 /* LZ4F_dctx */
};

struct tfs_deflater {
	void *zstd;                /* ZSTD_CCtx */
	int zstd_level;            /* the level zstd is set to (valid if zstd) */
	void *gzip;                /* ISA-L isal_zstream and its level buffer */
	void *lz4;                 /* LZ4F_cctx */
};

/* Zero-initialised structs are valid; release frees everything and re-inits. */
void tfs_inflater_release(struct tfs_inflater *z);
/* Frees the output buffer if it grew past keep_bytes. */
void tfs_inflater_trim(struct tfs_inflater *z, size_t keep_bytes);
/* Decompresses src (the whole records region) with codec (enum tfs_codec, not
 * none) into z->buf; *out_len bytes. A region that would decompress to more than
 * limit bytes is TFS_ECORRUPT. */
int tfs_inflate(struct tfs_inflater *z, int codec, const uint8_t *src, size_t len,
                size_t limit, size_t *out_len, const char **why);

void tfs_deflater_release(struct tfs_deflater *z);
/* The most bytes tfs_deflate can write for len bytes of input, or 0 if codec cannot
 * take len bytes (past what its framing can describe). */
size_t tfs_deflate_bound(int codec, size_t len);
/* Compresses src into dst (cap >= tfs_deflate_bound), *out_len bytes. zstd_level is
 * used by zstd only (0: zstd's default). */
int tfs_deflate(struct tfs_deflater *z, int codec, int zstd_level, const uint8_t *src,
                size_t len, uint8_t *dst, size_t cap, size_t *out_len);

#endif
