/* test_inode.c - the node table (fs/inode.h): same identity, same nodeid; counts;
 * forget; fresh nodeids; stable st_ino; unlink and rename; topic references. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fuse_ll.h"
#include "fs/inode.h"

/* Fake topics: the table only compares their pointers and asks for references. */
struct fake_topics {
	int refs;
	bool refuse;                    /* the topic is "deleted" */
};

static struct tfs_topic *fake_ref(void *arg, struct tfs_topic *t)
{
	struct fake_topics *f = arg;

	if (f->refuse)
		return NULL;
	f->refs++;
	return t;
}

static void fake_unref(void *arg, struct tfs_topic *t)
{
	struct fake_topics *f = arg;

	f->refs--;
}

static char topic_a, topic_b;       /* addresses serve as topics */
#define TA ((struct tfs_topic *)&topic_a)
#define TB ((struct tfs_topic *)&topic_b)

struct fixture {
	struct fake_topics f;
	struct tfs_inode_table *t;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct tfs_inode_topic_ops ops = { fake_ref, fake_unref, &fx->f };

	assert_int_equal(tfs_inode_table_create(&ops, &fx->t), 0);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	tfs_inode_table_destroy(fx->t);
	assert_int_equal(fx->f.refs, 0);    /* every topic reference was returned */
	free(fx);
	return 0;
}

static struct tfs_node_ident key_id(struct tfs_topic *t, const char *tname, int32_t p,
                                    const char *key)
{
	struct tfs_node_ident id = {
		.kind = TFS_NODE_KEY, .topic = t, .topic_name = tname, .partition = p,
		.key = tfs_slice_make(key, strlen(key)),
	};
	return id;
}

static struct tfs_node *lookup(struct fixture *fx, const struct tfs_node_ident *id)
{
	struct tfs_node *n = NULL;

	assert_int_equal(tfs_inode_lookup(fx->t, id, &n), 0);
	assert_non_null(n);
	return n;
}

static void test_root(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node *r = tfs_inode_get(fx->t, FUSE_ROOT_ID);

	assert_non_null(r);
	assert_int_equal(r->nodeid, FUSE_ROOT_ID);
	assert_int_equal(r->ino, 1);
	assert_int_equal(r->kind, TFS_NODE_ROOT);
	tfs_inode_forget(fx->t, FUSE_ROOT_ID, 100);        /* the root never goes */
	tfs_inode_put(fx->t, r);
	assert_non_null(r = tfs_inode_get(fx->t, FUSE_ROOT_ID));
	tfs_inode_put(fx->t, r);
}

static void test_same_identity_same_node(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident id = key_id(TA, "a", 0, "k1");
	struct tfs_node *n1 = lookup(fx, &id), *n2 = lookup(fx, &id);
	uint64_t nid = n1->nodeid;

	assert_ptr_equal(n1, n2);
	assert_true(nid > FUSE_ROOT_ID);
	assert_int_equal(n1->nlookup, 2);
	assert_int_equal(fx->f.refs, 1);            /* one topic ref per node */
	assert_int_equal(n1->ino, tfs_inode_ident_hash(&id));
	tfs_inode_put(fx->t, n1);
	tfs_inode_put(fx->t, n2);

	tfs_inode_forget(fx->t, nid, 1);            /* one lookup left */
	n1 = tfs_inode_get(fx->t, nid);
	assert_non_null(n1);
	tfs_inode_put(fx->t, n1);
	tfs_inode_forget(fx->t, nid, 1);            /* gone */
	assert_null(tfs_inode_get(fx->t, nid));
	assert_int_equal(fx->f.refs, 0);

	/* A new lookup: a fresh nodeid (never reused), the same st_ino. */
	n1 = lookup(fx, &id);
	assert_true(n1->nodeid > nid);
	assert_int_equal(n1->ino, tfs_inode_ident_hash(&id));
	tfs_inode_put(fx->t, n1);
}

static void test_identities_are_distinct(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident ids[6] = {
		key_id(TA, "a", 0, "k"), key_id(TA, "a", 1, "k"), key_id(TB, "b", 0, "k"),
		key_id(TA, "a", 0, "K"), key_id(TA, "a", 0, ""),
		{ .kind = TFS_NODE_PARTITION, .topic = TA, .topic_name = "a", .partition = 0 },
	};
	struct tfs_node *n[6];

	for (int i = 0; i < 6; i++)
		n[i] = lookup(fx, &ids[i]);
	for (int i = 0; i < 6; i++) {
		for (int j = i + 1; j < 6; j++) {
			assert_ptr_not_equal(n[i], n[j]);
			assert_int_not_equal(n[i]->nodeid, n[j]->nodeid);
			assert_int_not_equal(n[i]->ino, n[j]->ino);
		}
		assert_true(n[i]->ino > 1);
	}
	for (int i = 0; i < 6; i++)
		tfs_inode_put(fx->t, n[i]);
}

/* A running handler's reference keeps a forgotten node alive. */
static void test_refs_outlive_forget(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident id = key_id(TA, "a", 0, "held");
	struct tfs_node *n = lookup(fx, &id);
	uint64_t nid = n->nodeid;

	tfs_inode_forget(fx->t, nid, 1);
	assert_null(tfs_inode_get(fx->t, nid));     /* unreachable... */
	assert_int_equal(n->key_len, 4);            /* ...but still valid */
	assert_int_equal(fx->f.refs, 1);
	tfs_inode_put(fx->t, n);
	assert_int_equal(fx->f.refs, 0);
}

static void test_unhash(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident id = key_id(TA, "a", 0, "gone");
	struct tfs_node *n = lookup(fx, &id), *again, *found;

	tfs_inode_unhash(fx->t, n);
	assert_true(n->unlinked);
	assert_null(tfs_inode_find(fx->t, &id));
	found = tfs_inode_get(fx->t, n->nodeid);    /* the kernel may still name it */
	assert_ptr_equal(found, n);
	tfs_inode_put(fx->t, found);
	again = lookup(fx, &id);
	assert_ptr_not_equal(again, n);
	assert_int_equal(again->ino, n->ino);
	tfs_inode_put(fx->t, again);
	tfs_inode_put(fx->t, n);
}

static void test_rename(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident a = key_id(TA, "a", 0, "from"), b = key_id(TA, "a", 0, "to");
	struct tfs_node *na = lookup(fx, &a), *nb = lookup(fx, &b), *f;
	uint64_t ino = na->ino;

	assert_int_equal(tfs_inode_rename(fx->t, na, &b), 0);
	assert_true(nb->unlinked);                  /* renamed over */
	assert_false(na->unlinked);
	assert_int_equal(na->key_len, 2);
	assert_memory_equal(na->key, "to", 2);
	assert_int_equal(na->ino, ino);             /* st_ino stays while mounted */
	assert_null(tfs_inode_find(fx->t, &a));
	f = tfs_inode_find(fx->t, &b);
	assert_ptr_equal(f, na);
	tfs_inode_put(fx->t, f);
	tfs_inode_put(fx->t, na);
	tfs_inode_put(fx->t, nb);
}

/* Scratch nodes are named by their file name: distinct from the key of the same
 * bytes, renamed like keys, and never seen by the key-only batch lookup. */
static void test_scratch_names(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident k = key_id(TA, "a", 0, ".x"), s = k, s2 = k, t = k;
	struct tfs_node *nk, *ns, *ns2, *f;
	struct tfs_slice keys[1] = { tfs_slice_make(".x", 2) };
	uint64_t ids[1];

	s.kind = s2.kind = t.kind = TFS_NODE_SCRATCH;
	s2.key = tfs_slice_make(".y", 2);
	t.key = tfs_slice_make(".z", 2);
	nk = lookup(fx, &k);
	ns = lookup(fx, &s);
	ns2 = lookup(fx, &s2);
	assert_ptr_not_equal(nk, ns);
	assert_ptr_not_equal(ns, ns2);
	assert_true(nk->ino != ns->ino && ns->ino != ns2->ino);
	assert_int_equal(ns->key_len, 2);
	assert_memory_equal(ns->key, ".x", 2);
	atomic_store(&ns->attrs_cached, true);
	atomic_store(&nk->attrs_cached, true);
	assert_int_equal(tfs_inode_find_keys(fx->t, TA, "a", 0, keys, 1, ids), 1);
	assert_int_equal(ids[0], nk->nodeid);       /* the key's node, not the scratch's */
	assert_int_equal(tfs_inode_rename(fx->t, ns, &t), 0);
	assert_null(tfs_inode_find(fx->t, &s));
	f = tfs_inode_find(fx->t, &t);
	assert_ptr_equal(f, ns);
	tfs_inode_put(fx->t, f);
	f = tfs_inode_find(fx->t, &k);
	assert_ptr_equal(f, nk);                    /* the key is untouched */
	tfs_inode_put(fx->t, f);
	tfs_inode_put(fx->t, nk);
	tfs_inode_put(fx->t, ns);
	tfs_inode_put(fx->t, ns2);
}

/* The .put path: only nodes whose attributes the kernel may hold come back, each
 * once until they are handed out again. */
static void test_find_keys(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident x = key_id(TA, "a", 3, "x"), z = key_id(TA, "a", 3, "z"),
	                      w = key_id(TA, "a", 3, "w");
	struct tfs_node *nx = lookup(fx, &x), *nz = lookup(fx, &z), *nw = lookup(fx, &w);
	struct tfs_slice keys[5] = {
		tfs_slice_make("x", 1), tfs_slice_make("y", 1), tfs_slice_make("z", 1),
		tfs_slice_make("x", 1), tfs_slice_make("w", 1),
	};
	uint64_t ids[5];

	atomic_store(&nx->attrs_cached, true);      /* as a reply does */
	atomic_store(&nz->attrs_cached, true);      /* nw: never handed out */
	assert_int_equal(tfs_inode_find_keys(fx->t, TA, "a", 4, keys, 5, ids), 0);
	assert_int_equal(tfs_inode_find_keys(fx->t, TB, "a", 3, keys, 5, ids), 0);
	assert_int_equal(tfs_inode_find_keys(fx->t, TA, "a", 3, keys, 5, ids), 2);
	assert_int_equal(ids[0], nx->nodeid);
	assert_int_equal(ids[1], nz->nodeid);
	assert_false(atomic_load(&nx->attrs_cached));
	assert_int_equal(tfs_inode_find_keys(fx->t, TA, "a", 3, keys, 5, ids), 0);
	atomic_store(&nz->attrs_cached, true);
	assert_int_equal(tfs_inode_find_keys(fx->t, TA, "a", 3, keys, 5, ids), 1);
	assert_int_equal(ids[0], nz->nodeid);
	tfs_inode_put(fx->t, nx);
	tfs_inode_put(fx->t, nz);
	tfs_inode_put(fx->t, nw);
}

static void test_topic_gone(void **state)
{
	struct fixture *fx = *state;
	struct tfs_node_ident id = key_id(TA, "a", 0, "k");
	struct tfs_node *n = NULL;

	fx->f.refuse = true;
	assert_int_equal(tfs_inode_lookup(fx->t, &id, &n), -ENOENT);
	assert_null(n);
	fx->f.refuse = false;
}

/* Enough nodes to grow both maps several times; all stay findable. */
static void test_many_nodes(void **state)
{
	struct fixture *fx = *state;
	enum { N = 50000 };
	uint64_t *ids = calloc(N, sizeof(*ids));
	uint64_t *coll = NULL;
	char key[32];

	for (int i = 0; i < N; i++) {
		struct tfs_node_ident id;
		struct tfs_node *n;
		snprintf(key, sizeof(key), "key-%d", i);
		id = key_id(i % 2 ? TA : TB, i % 2 ? "a" : "b", 0, key);
		n = lookup(fx, &id);
		ids[i] = n->nodeid;
		tfs_inode_put(fx->t, n);
	}
	assert_int_equal(tfs_inode_count(fx->t), N + 1);
	assert_int_equal(tfs_inode_collect_topic(fx->t, TA, &coll), N / 2);
	free(coll);
	for (int i = 0; i < N; i++) {
		struct tfs_node_ident id;
		struct tfs_node *n;
		snprintf(key, sizeof(key), "key-%d", i);
		id = key_id(i % 2 ? TA : TB, i % 2 ? "a" : "b", 0, key);
		n = tfs_inode_find(fx->t, &id);
		assert_non_null(n);
		assert_int_equal(n->nodeid, ids[i]);
		tfs_inode_put(fx->t, n);
	}
	for (int i = 0; i < N; i += 2)
		tfs_inode_forget(fx->t, ids[i], 1);
	assert_int_equal(tfs_inode_count(fx->t), N / 2 + 1);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_identity_same_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_identities_are_distinct, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refs_outlive_forget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unhash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scratch_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_find_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_topic_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_nodes, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
