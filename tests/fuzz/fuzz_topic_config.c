/* fuzz_topic_config.c - the topic config file parser (engine/topic_config.c,
 * tfs_topic_config_load) on a file holding the input's bytes.
 *
 * Properties:
 *   - a refused file leaves the caller's config and ownership exactly as they
 *     were;
 *   - an accepted file saves (tfs_topic_config_save never refuses what load
 *     accepted) and the saved file loads to the same config and ownership
 *     (render and parse round-trip); saving that again gives the same bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/topic_config.h"
#include "engine/types.h"
#include "io/io.h"
#include "tests/fuzz/fz.h"

#define CONFIG_TEXT_MAX 64

static char *dir;
static struct tfs_io *io;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int rc;

	(void)argc;
	(void)argv;
	fz_quiet_logs();
	dir = fz_mkdtemp("config");
	fz_remove_at_exit(dir);
	rc = tfs_io_create(TFS_IO_SYNC, &io);
	FZ_CHECK(rc == 0, "io: %s", tfs_strerror(rc));
	return 0;
}

static void same_config(const struct tfs_topic_config *a, const struct tfs_topic_meta *am,
                        const struct tfs_topic_config *b, const struct tfs_topic_meta *bm)
{
	for (const char *const *n = tfs_topic_config_names(); *n; n++) {
		char va[CONFIG_TEXT_MAX], vb[CONFIG_TEXT_MAX];
		FZ_CHECK(tfs_topic_config_get(a, *n, va, sizeof(va)) == 0 &&
		         tfs_topic_config_get(b, *n, vb, sizeof(vb)) == 0, "get of %s", *n);
		FZ_CHECK(strcmp(va, vb) == 0, "%s: %s after the round trip, %s before", *n, vb, va);
	}
	FZ_CHECK(am->uid == bm->uid && am->gid == bm->gid && am->mode == bm->mode &&
	         am->partitions == bm->partitions, "ownership changed in the round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char in_path[4096], out_path[4096], again_path[4096];
	struct tfs_topic_config c, c0, c2;
	struct tfs_topic_meta m = { .uid = 1000, .gid = 1000, .mode = 0750, .partitions = 1 }, m0, m2;
	uint8_t *saved = NULL, *resaved = NULL;
	long saved_len, resaved_len;
	int rc;

	snprintf(in_path, sizeof(in_path), "%s/in", dir);
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	snprintf(again_path, sizeof(again_path), "%s/again", dir);
	fz_write_file(in_path, data, size);
	memset(&c, 0, sizeof(c));           /* padding too: compared with memcmp */
	tfs_topic_config_defaults(&c);
	c0 = c;
	m0 = m;
	rc = tfs_topic_config_load(in_path, &c, &m);
	if (rc < 0) {
		FZ_CHECK(memcmp(&c, &c0, sizeof(c)) == 0 && memcmp(&m, &m0, sizeof(m)) == 0,
		         "a refused file (%s) changed the config", tfs_strerror(rc));
		return 0;
	}
	rc = tfs_topic_config_save(io, out_path, &c, &m);
	FZ_CHECK(rc == 0, "an accepted config does not save: %s", tfs_strerror(rc));
	memset(&c2, 0, sizeof(c2));
	tfs_topic_config_defaults(&c2);
	m2 = (struct tfs_topic_meta){ .partitions = 1 };
	rc = tfs_topic_config_load(out_path, &c2, &m2);
	FZ_CHECK(rc == 0, "a saved config does not load: %s", tfs_strerror(rc));
	same_config(&c, &m, &c2, &m2);
	rc = tfs_topic_config_save(io, again_path, &c2, &m2);
	FZ_CHECK(rc == 0, "a reloaded config does not save: %s", tfs_strerror(rc));
	saved_len = fz_read_file(out_path, &saved);
	resaved_len = fz_read_file(again_path, &resaved);
	FZ_CHECK(saved_len > 0 && saved_len == resaved_len &&
	         memcmp(saved, resaved, (size_t)saved_len) == 0,
	         "saving a reloaded config gives other bytes");
	free(saved);
	free(resaved);
	return 0;
}
