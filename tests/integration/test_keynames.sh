#!/bin/bash
# test_keynames.sh - key bytes <-> file names (docs/semantics.md §2): every
# one of the 256 byte values and the empty key round-trip through the canonical name;
# user.topicfs.key gives the raw bytes back; .put spells keys the same way.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# The python side: encode as docs/semantics.md §2 says, create through the mount, check it all.
KEYCHECK='
import os, sys
part = os.fsencode(sys.argv[1])
mode = sys.argv[2]

def enc(k):
    if k == b"":
        return b"%"
    out = bytearray()
    for i, c in enumerate(k):
        if c in (0x25, 0x2F, 0x7F) or c < 0x20 or (i == 0 and c == 0x2E):
            out += b"%%%02X" % c
        else:
            out.append(c)
    return bytes(out)

keys = [bytes([b]) for b in range(256)] + [b""] + [
    b"a.b", b"..x", b"a%b", b"a/b", b"\xc3\xa9t\xc3\xa9", b"trailing ", b" lead",
    b"\x00\x00", b"%%", b"x\x7fy", b"\xff\xfe", b"--", b"a\tb\nc", b"." * 10]
val = lambda k: b"value of " + k.hex().encode() + b"\n"
bad = []
if mode == "write":
    for k in keys:
        fd = os.open(os.path.join(part, enc(k)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, val(k))
        os.close(fd)
names = set(os.listdir(part))
want = set(enc(k) for k in keys)
if names != want:
    bad.append("listing: missing %r, extra %r" % (sorted(want - names)[:5], sorted(names - want)[:5]))
for k in keys:
    p = os.path.join(part, enc(k))
    try:
        got = os.getxattr(p, "user.topicfs.key")
        if got != k:
            bad.append("key attr of %r: %r" % (enc(k), got))
        with open(p, "rb") as f:
            if f.read() != val(k):
                bad.append("value of %r" % enc(k))
    except OSError as e:
        bad.append("%r: %s" % (enc(k), e))
print("\n".join(bad[:20]) if bad else "ok %d" % len(keys))
'

c_all_bytes_round_trip() {
	t_mount
	mkdir "$MNT/t"
	local out n
	out=$("$T_PY" -c "$KEYCHECK" "$MNT/t/0" write)
	assert_match "ok [0-9]+" "$out" "256 one-byte keys, the empty key and a few more"
	n=${out#ok }
	assert_eq "$n" "$(t_leo t/0)" "one record per key"
	assert_eq "$n" "$(t_x "$MNT/t/0" live_keys)" "live_keys"
	t_remount
	out=$("$T_PY" -c "$KEYCHECK" "$MNT/t/0" check)
	assert_eq "ok $n" "$out" "every key after remount"
}

c_spellings() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0
	echo a > "$p/%"           # the empty key
	echo b > "$p/%25"         # "%"
	echo c > "$p/%2E"         # "."
	echo d > "$p/a.b"         # a dot that is not first stays raw
	echo e > "$p/%2F%00"      # "/" and NUL
	assert_eq "" "$(t_xhex "$p/%" key)" "key of %"
	assert_eq 25 "$(t_xhex "$p/%25" key)" "key of %25"
	assert_eq 2e "$(t_xhex "$p/%2E" key)" "key of %2E"
	assert_eq 612e62 "$(t_xhex "$p/a.b" key)" "key of a.b"
	assert_eq 2f00 "$(t_xhex "$p/%2F%00" key)" "key of %2F%00"
	# .put spells keys the same way (%09 is a tab in a key).
	assert_eq "open:OK write1:OK close:OK" "$(t_sys writes "$p/.put" "a%09b	tabbed
%	empty key again
")" ".put with encoded keys"
	assert_eq 610962 "$(t_xhex "$p/a%09b" key)" "key of a%09b"
	assert_cat "$p/a%09b" tabbed
	assert_cat "$p/%" "empty key again"
}

t_test all_bytes_round_trip c_all_bytes_round_trip
t_test spellings c_spellings
t_done
