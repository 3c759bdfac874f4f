#!/bin/bash
# test_install.sh - installed like a Linux program: `cmake --install`, the man pages,
# the Debian package, the versions.
#
# Cases:
#   install_tree        `cmake --install --prefix DIR` (and DESTDIR=) lays out the
#                       programs, helper, unit, man pages, completion and docs, with
#                       the prefix's paths filled in and no other absolute path
#   installed_programs  the installed topicfs/topicctl/mount.topicfs print one version
#                       (the package's, from debian/changelog); the installed helper
#                       mounts a temporary data directory with the installed daemon
#   man_pages           each page, of the tree and as installed, renders with `man -l`
#                       without a warning
#   man_options         every option the programs accept (their --help and their
#                       parsers: fs/opts.c, the Kafka settings' table, topicctl's command
#                       table and getopt, the helper's case arms) is documented in their
#                       man page as an item, and every documented one is accepted
#   completion          the topicctl completion completes commands, options and topics
#   deb_package         dpkg-buildpackage builds the .deb from the tree; dpkg -c lists
#                       what it must hold; lintian finds nothing; installed with dpkg,
#                       `mount -t topicfs DATA MNT` works right after (then it is purged)
. "$(dirname "$0")/lib.sh"
t_require_daemon

BUILD=$BUILD_DIR
VERSION=$(sed -n '1s/^topicfs (\([^)]*\)).*/\1/p' "$T_REPO/debian/changelog")

# The files an install must lay down, relative to the prefix (systemd's unit directory
# follows the prefix: see cmake/install-configured.cmake).
expected_files() {
	cat <<EOF
bin/topicfs
bin/topicctl
sbin/mount.topicfs
lib/systemd/system/topicfs@.service
share/man/man8/topicfs.8
share/man/man8/mount.topicfs.8
share/man/man8/topicctl.8
share/bash-completion/completions/topicctl
share/doc/topicfs/README.md
share/doc/topicfs/docs/kafka.md
share/doc/topicfs/examples/example.mount
EOF
}

# install_to PREFIX [DESTDIR]: `cmake --install BUILD --prefix PREFIX`, as the README
# says: the build keeps the prefix it was configured with.
install_to() {
	DESTDIR=${2:-} cmake --install "$BUILD" --prefix "$1" > "$T_CASE/install.log" 2>&1 ||
		{ cat "$T_CASE/install.log"; fail "cmake --install --prefix $1 to ${2:-/}"; }
	# Under the prefix, but for the units of a /usr install (systemd.pc's /lib/systemd).
	assert_eq "" "$(grep -E -e '-- (Installing|Up-to-date): ' "$T_CASE/install.log" |
		grep -v -e "-- [A-Za-z-]*: ${2:-}${1%/}/" -e "-- [A-Za-z-]*: ${2:-}/lib/systemd/system/" ||
		true)" "files installed outside ${2:-}$1"
}

# no_foreign_paths DIR: no text file under DIR but the README and docs/ (prose that
# names /usr/local as an example) names /usr/local, the source or the build tree.
no_foreign_paths() {
	assert_eq "" "$(grep -rlI -e /usr/local -e "$T_REPO" -e "$BUILD" "$1" |
		grep -v -e '/share/doc/topicfs/README.md$' -e '/share/doc/topicfs/docs/' || true)" \
		"installed files naming /usr/local, the source or the build tree"
}

c_install_tree() {
	local p=$T_CASE/prefix d=$T_CASE/dest r=$T_CASE/root f u
	install_to "$p"
	while read -r f; do
		assert_ok test -e "$p/$f"
	done < <(expected_files)
	for f in bin/topicfs bin/topicctl sbin/mount.topicfs; do assert_ok test -x "$p/$f"; done
	# The install's prefix (not the configured one) is filled in; no placeholder left.
	u=$p/lib/systemd/system/topicfs@.service
	assert_ok grep -q "^ExecStart=$p/bin/topicfs " "$u"
	assert_ok grep -q "^EnvironmentFile=$p/etc/topicfs/%i.conf\$" "$u"
	assert_ok grep -q "^Documentation=.* file://$p/share/doc/topicfs/README.md\$" "$u"
	assert_ok grep -q "^installed_bin='$p/bin/topicfs'" "$p/sbin/mount.topicfs"
	assert_ok grep -q "^\.I $p/share/doc/topicfs\$" "$p/share/man/man8/topicfs.8"
	assert_eq "" "$(grep -rlI '@[A-Z_]*@' "$p" || true)" "files with unfilled @VAR@ placeholders"
	# The installed helper runs its installed daemon and nothing else: the source
	# tree's search of PATH is not in it.
	assert_fails grep -q -e 'command -v topicfs' -e 'source tree only' "$p/sbin/mount.topicfs"
	no_foreign_paths "$p"
	# DESTDIR= stages a /usr install: the same layout under DESTDIR, paths of /usr,
	# units where systemd.pc puts them for /usr (root_prefix is empty).
	install_to /usr "$d"
	while read -r f; do
		case $f in lib/systemd/*) ;; *) f=usr/$f ;; esac
		assert_ok test -e "$d/$f"
	done < <(expected_files)
	assert_ok grep -q '^ExecStart=/usr/bin/topicfs ' "$d/lib/systemd/system/topicfs@.service"
	assert_ok grep -q '^EnvironmentFile=/etc/topicfs/%i.conf$' "$d/lib/systemd/system/topicfs@.service"
	assert_ok grep -q "^installed_bin='/usr/bin/topicfs'" "$d/usr/sbin/mount.topicfs"
	no_foreign_paths "$d"
	# --prefix /: as GNUInstallDirs has it, the same tree as /usr.
	install_to / "$r"
	assert_eq "$(cd "$d" && find . | sort)" "$(cd "$r" && find . | sort)" "tree of --prefix / vs /usr"
	assert_eq "" "$(diff -r "$d" "$r")" "files of --prefix / vs /usr"
}

c_installed_programs() {
	local p=$T_CASE/prefix out rc
	install_to "$p"
	assert_match '[0-9]+\.[0-9]+(\.[0-9]+)?(-[0-9A-Za-z.+~]+)?' "$VERSION" "version in debian/changelog"
	out=$("$p/bin/topicfs" --version 2>&1)
	assert_match "topicfs $VERSION \\(libfuse .*\\)" "$(printf '%s\n' "$out" | grep '^topicfs ')" "topicfs --version"
	assert_eq "topicctl $VERSION" "$("$p/bin/topicctl" --version)" "topicctl --version"
	assert_eq "mount.topicfs $VERSION" "$("$p/sbin/mount.topicfs" --version)" "mount.topicfs --version"
	# The installed helper finds the installed daemon (not the build's) and mounts.
	assert_eq "mount.topicfs: $p/bin/topicfs -o partitions=2 $DATA $MNT" \
		"$(env -u TOPICFS_BIN PATH=/usr/bin:/bin "$p/sbin/mount.topicfs" "$DATA" "$MNT" -f -o defaults,partitions=2 2>&1)" \
		"command run by the installed helper"
	env -u TOPICFS_BIN "$p/sbin/mount.topicfs" "$DATA" "$MNT" -o partitions=2
	t_track_mount "$MNT"
	assert_ok mountpoint -q "$MNT"
	mkdir "$MNT/t"
	assert_eq "0 1" "$(ls "$MNT/t" | xargs)" "partitions of a topic made through the installed helper"
	echo v > "$MNT/t/1/k"
	assert_cat "$MNT/t/1/k" $'v\n'
	umount "$MNT"
	for i in $(seq 100); do pgrep -f "$p/bin/topicfs .*$MNT" >/dev/null || break; sleep 0.1; done
	assert_fails pgrep -f "$p/bin/topicfs .*$MNT"
	# Without its daemon the installed helper says so, and runs no other topicfs.
	mv "$p/bin/topicfs" "$p/bin/topicfs.away"
	out=$(env -u TOPICFS_BIN PATH=$BUILD:/usr/bin:/bin "$p/sbin/mount.topicfs" "$DATA" "$MNT" -f 2>&1) && rc=0 || rc=$?
	assert_eq 1 "$rc" "exit status of the installed helper without its daemon"
	assert_eq "mount.topicfs: the topicfs binary installed with this helper, $p/bin/topicfs, is missing (set TOPICFS_BIN)" \
		"$out" "message of the installed helper without its daemon"
}

c_man_pages() {
	local page out
	need man
	# The pages of the tree, and as installed (their paths and version filled in).
	install_to /usr "$T_CASE/dest"
	for page in "$T_REPO"/man/*.8 "$T_CASE"/dest/usr/share/man/man8/*.8; do
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
		assert_eq "" "$out" "warnings rendering $page"
		assert_ok test "$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>/dev/null | wc -l)" -gt 40
	done
	assert_match ".*topicfs $VERSION .*" "$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$T_CASE/dest/usr/share/man/man8/topicctl.8" |
		tail -n 1)" "the installed page's footer names the version"
}

c_man_options() {
	cat > "$T_CASE/man_options.py" <<'PY'
import re, subprocess, sys
repo, topicfs, topicctl = sys.argv[1:4]
bad = []

def man(name):
    return open(f"{repo}/man/{name}.8").read()

def src(path):
    return open(f"{repo}/{path}").read()

def run(*argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr

def unesc(s):
    return s.replace("\\-", "-").replace('"', "")

def section(page, start, end_re=r"^\.S[HS] "):
    body = page.split(start + "\n", 1)
    if len(body) < 2:
        bad.append(f"no section {start!r}")
        return ""
    m = re.search(end_re, body[1], re.M)
    return body[1][:m.start()] if m else body[1]

def both_ways(what, accepted, documented):
    for n in sorted(accepted - documented):
        bad.append(f"{what}: {n} is accepted but not documented")
    for n in sorted(documented - accepted):
        bad.append(f"{what}: {n} is documented but not accepted")

# Item heads: the line after each .TP; options in it are \-x and \-\-long.
def tp_options(text):
    heads = re.findall(r"^\.TP\n(.*)$", text, re.M)
    out = set()
    for h in heads:
        out |= {unesc(o) for o in re.findall(r"(\\-\\-[a-z][a-z\\-]*|\\-[A-Za-z0-9])(?![a-z\\])", h)}
    return out

# ---- topicfs ------------------------------------------------------------------------
rc, out = run(topicfs, "--help")
ours, fuse_help = out.split("\n\n    -h", 1)
fuse_help = "    -h" + fuse_help
accepted = set(re.findall(r"^    -o ([a-z_.]+)", ours, re.M)) - {"NAME"}
for line in re.findall(r"-o NAME=VALUE .*\n +([a-z. ]+)$", ours, re.M):
    accepted |= set(line.split())
# ... and every name the parser compares, even one --help leaves out (reader_cache,
# default_permissions: kept for old fstab lines), and the Kafka listener's table.
opts_c = src("fs/opts.c")
parsed = set(re.findall(r'strcmp\((?:arg|name), "([a-z_.]+)"\)', opts_c)) - {"debug", "compact", "delete"}
kafka_names = re.search(r"names\[\] = \{(.*?)NULL", src("kafka/config.c"), re.S).group(1)
parsed |= set(re.findall(r'"([a-z_.]+)"', kafka_names))
accepted |= parsed
page = man("topicfs")
mount_opts = page.split(".SS topicfs mount options")[1].split(".SS libfuse options")[0]
items = re.findall(r'^\.TP\n\.(BI?) "?([a-z_.]+)=?', mount_opts, re.M)
documented = {n for _, n in items}
flags = {n for kind, n in items if kind == "B"}     # ".B NAME": takes no value
both_ways("topicfs(8) -o", accepted, documented)
# each documented option is accepted by the parser: a bad value is refused by name
for n in sorted(documented - flags):
    rc, msg = run(topicfs, "-o", f"{n}=\x01bad", "/nonexistent-data", "/nonexistent-mnt")
    if f"bad mount option {n}" not in msg:
        bad.append(f"topicfs does not check -o {n}=VALUE: {msg.strip()[:120]}")
# libfuse's options the page names are ones libfuse (or topicfs) takes
fuse_opts = set(re.findall(r"^ +-o ([a-z_]+)", fuse_help, re.M))
for _, n in re.findall(r'^\.TP\n\.(BI?) "?([a-z_.]+)=?', section(page, ".SS libfuse options"), re.M):
    if n not in fuse_opts and n not in parsed:
        bad.append(f"topicfs(8) names libfuse option {n}, which topicfs --help does not list")
# program options: libfuse's command line flags, both ways
flags_help = set()
for short, long_ in re.findall(r"^    (-[A-Za-z])(?:   (--[a-z]+|-o [a-z]+))?", fuse_help, re.M):
    flags_help.add(short)
    if long_.startswith("--"):
        flags_help.add(long_)
both_ways("topicfs(8) program options", flags_help, tp_options(section(page, ".SS Program options")))

# ---- topicctl -----------------------------------------------------------------------
main_c = src("mount-helpers/topicctl/main.c")
rc, out = run(topicctl, "--help")
cmds = re.findall(r"^  ([a-z]+) ", out.split("Commands:")[1], re.M)
table = re.findall(r'^\t\{ "([a-z]+)", cmd_', main_c, re.M)
both_ways("topicctl --help commands vs its table", set(table), set(cmds))
page = man("topicctl")
sections = dict(re.findall(r"^\.SS (\S+)\n(.*?)(?=^\.SS |^\.SH )", page, re.M | re.S))
both_ways("topicctl(8) commands", set(table), set(sections))
glob = set(re.findall(r'!strcmp\(argv\[1\], "(-[^"]+)"\)', main_c))
both_ways("topicctl(8) options before a command", glob, tp_options(section(page, ".SH OPTIONS")))
for c in cmds:
    if c not in sections:
        continue
    rc, help_ = run(topicctl, c, "--help")
    takes = set()
    for short, long_ in re.findall(r"^  +(?:(-[A-Za-z0-9]), )?(--[a-z][a-z-]*)", help_, re.M):
        takes |= {long_} | ({short} if short else set())
    doc = tp_options(sections[c])
    both_ways(f"topicctl(8) {c}", takes, doc)
    # and the parser takes each: getopt names what it does not know
    for o in sorted(takes | doc):
        rc, msg = run(topicctl, c, o, "--help")
        if "unknown option" in msg:
            bad.append(f"topicctl {c} refuses {o}, which its --help or topicctl(8) lists")

# ---- mount.topicfs ------------------------------------------------------------------
script = src("mount-helpers/mount.topicfs")
takes = set(re.findall(r"^\t(-[A-Za-z](?: \| --[a-z]+)?)\)", script, re.M))
flags = set()
for t in takes:
    flags |= {f.strip() for f in t.split("|")}
flags |= {"-" + f for f in re.findall(r"^\t\t\t([a-z]) ?\)", script, re.M)}
flags |= {"-" + f for f in re.findall(r"^\t\t\t([a-z]) \| ([a-z])\)", script, re.M) for f in f}
page = section(man("mount.topicfs"), ".SH OPTIONS", r"^\.SH ")
both_ways("mount.topicfs(8)", flags, tp_options(page))

for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
PY
	"$T_PY" "$T_CASE/man_options.py" "$T_REPO" "$BUILD/topicfs" "$BUILD/topicctl"
}

c_completion() {
	need bash
	local out
	t_mount
	mkdir "$MNT/orders" "$MNT/users"
	echo 1 > "$MNT/users/0/user-1"
	echo 2 > "$MNT/users/0/user-2"
	out=$(PATH=$BUILD:$PATH bash -c '
		. "$1"/completion/topicctl
		c() { local tag=$1; shift; COMP_WORDS=(topicctl "$@"); COMP_CWORD=$(($# )); _topicctl; echo "$tag: ${COMPREPLY[*]}"; }
		c cmds st
		c newer e
		c gr gr
		c fo fo
		c opts dump --r
		c cfg create x --config segment.b
		c unset config x --unset segment.b
		c cfgname config "$2/users" retention.
		c mounts describe ""
		c topics describe "$2/"
		c erase_opts erase --w
		c wait_flag erase -w ""
		c timeout_value erase --timeout ""
		c keys erase "$2/users" user-
		c keys_after_opts erase --margin 0.5 "$2/users" ""
		c groups groups ""
		c follow_group follow --group ""
	' _ "$T_REPO" "$MNT")
	printf '%s\n' "$out" | sed 's/^/# /'
	assert_eq "cmds: status" "$(grep '^cmds:' <<< "$out")" "commands completed from 'st'"
	assert_eq "newer: estimate erase" "$(grep '^newer:' <<< "$out")" "commands from 'e'"
	assert_eq "gr: groups" "$(grep '^gr:' <<< "$out")" "commands from 'gr'"
	assert_eq "fo: follow" "$(grep '^fo:' <<< "$out")" "commands from 'fo'"
	assert_eq "opts: --records" "$(grep '^opts:' <<< "$out")" "options of dump from '--r'"
	assert_eq "cfg: segment.bytes=" "$(grep '^cfg:' <<< "$out")" "config names after --config"
	assert_eq "unset: segment.bytes" "$(grep '^unset:' <<< "$out")" "config names after --unset"
	assert_eq "cfgname: retention.ms retention.bytes" "$(grep '^cfgname:' <<< "$out")" "config names after config TOPIC"
	assert_match "mounts: (.* )?$MNT( .*)?" "$(grep '^mounts:' <<< "$out")" "topicfs mounts offered first"
	assert_eq "topics: $MNT/orders $MNT/users" "$(grep '^topics:' <<< "$out")" "topics under the mount"
	assert_eq "erase_opts: --wait" "$(grep '^erase_opts:' <<< "$out")" "options of erase from '--w'"
	assert_match "wait_flag: (.* )?$MNT( .*)?" "$(grep '^wait_flag:' <<< "$out")" "-w of erase takes no value"
	assert_eq "timeout_value: " "$(grep '^timeout_value:' <<< "$out")" "no completion of --timeout's value"
	assert_eq "keys: user-1 user-2" "$(grep '^keys:' <<< "$out")" "keys of the topic after erase TOPIC"
	assert_eq "keys_after_opts: user-1 user-2" "$(grep '^keys_after_opts:' <<< "$out")" "keys after options with values"
	assert_match "groups: (.* )?$MNT( .*)?" "$(grep '^groups:' <<< "$out")" "mounts for groups"
	assert_eq "follow_group: " "$(grep '^follow_group:' <<< "$out")" "no completion of --group's value"
	t_umount
}

c_deb_package() {
	need dpkg-buildpackage dh lintian dpkg-deb
	local src=$T_CASE/src out f want rc=0 p
	if dpkg-query -W -f='${Status}' topicfs 2>/dev/null | grep -q 'install ok installed'; then
		skip "a topicfs package is installed on this machine already; not replacing it"
	fi
	# The tree as it is now (tracked and new files, not build output).
	mkdir "$src"
	(cd "$T_REPO" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 cp --parents -t "$src" 2>/dev/null) || (cd "$T_REPO" && tar --exclude='./build*' -cf - . | tar -C "$src" -xf -)
	# On every core: the build is most of this case's time (the README has the figure).
	local TIMEFORMAT='%R s wall, %U s user, %S s sys'
	{ time (cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)" > "$T_CASE/dpkg-buildpackage.log" 2>&1); } \
		2> "$T_CASE/time" || { tail -n 40 "$T_CASE/dpkg-buildpackage.log"; fail "dpkg-buildpackage -us -uc -b"; }
	echo "# dpkg-buildpackage -j$(nproc): $(cat "$T_CASE/time")"
	f=$(ls "$T_CASE"/topicfs_"$VERSION"_*.deb)
	assert_ok test -f "$f"
	dpkg -c "$f" | sed 's/^/# /'
	while read -r want; do
		case $want in
		lib/systemd/*) assert_match "\./(usr/)?$want" "$(dpkg -c "$f" | awk '{print $6}' | grep "$want\$" || true)" "$want in the .deb" ;;
		share/doc/*) assert_ok sh -c "dpkg -c '$f' | grep -Eq './usr/$want(\.gz)?\$'" ;;
		share/man/*) assert_ok sh -c "dpkg -c '$f' | grep -q './usr/$want.gz\$'" ;;
		*) assert_ok sh -c "dpkg -c '$f' | grep -q './usr/$want\$'" ;;
		esac
	done < <(expected_files)
	# Dependencies are computed by dh_shlibdeps, not listed by hand.
	assert_match '.*libfuse3-3.*liburing2.*' "$(dpkg-deb -f "$f" Depends)" "Depends: of the .deb"
	assert_eq 'fuse3, ${misc:Depends}, ${shlibs:Depends}' \
		"$(sed -n 's/^Depends: //p' "$T_REPO/debian/control")" "Depends: of debian/control"
	# Nothing in it names /usr/local or the tree it was built from, binaries included.
	mkdir "$T_CASE/x"
	dpkg -x "$f" "$T_CASE/x"
	assert_eq "" "$(grep -rla -e /usr/local -e "$src" -e "$T_REPO" "$T_CASE/x" |
		grep -v -e '/share/doc/topicfs/README.md.gz$' -e '/share/doc/topicfs/docs/' || true)" \
		"files of the .deb naming /usr/local or the build tree"
	out=$(lintian --tag-display-limit 0 "$f" 2>&1 | grep -v 'running with root privileges' || true)
	printf '%s\n' "$out" | sed 's/^/# lintian: /'
	assert_eq "" "$out" "lintian's findings"
	# Installed, it works at once: mount -t topicfs finds the helper, the helper the daemon.
	t_on_exit "dpkg -P topicfs"
	dpkg -i "$f" > "$T_CASE/dpkg-i.log" 2>&1 || { cat "$T_CASE/dpkg-i.log"; fail "dpkg -i"; }
	assert_eq "topicfs $VERSION" "$(/usr/bin/topicfs --version | grep '^topicfs ' | cut -d' ' -f1,2)" "installed topicfs"
	assert_eq "topicctl $VERSION" "$(/usr/bin/topicctl --version)" "installed topicctl"
	assert_eq "mount.topicfs $VERSION" "$(/usr/sbin/mount.topicfs --version)" "installed mount.topicfs"
	assert_eq "$VERSION" "$(dpkg-query -W -f='${Version}' topicfs)" "the package's version"
	for p in topicfs mount.topicfs topicctl; do
		assert_eq "/usr/share/man/man8/$p.8.gz" "$(man -w "$p")" "man finds $p(8)"
	done
	assert_ok test -f /usr/share/bash-completion/completions/topicctl
	assert_ok grep -q '^ExecStart=/usr/bin/topicfs ' /lib/systemd/system/topicfs@.service
	mount -t topicfs "$DATA" "$MNT" -o partitions=3 || rc=$?
	t_track_mount "$MNT"
	assert_eq 0 "$rc" "mount -t topicfs with the package installed"
	mkdir "$MNT/t"
	assert_eq "0 1 2" "$(ls "$MNT/t" | xargs)" "partitions through mount -t topicfs -o partitions=3"
	assert_match ".* on $MNT type fuse.topicfs .*" "$(mount | grep " $MNT ")" "mount table entry"
	umount "$MNT"
	dpkg -P topicfs > /dev/null 2>&1
	for p in /usr/sbin/mount.topicfs /usr/bin/topicfs /usr/bin/topicctl /lib/systemd/system/topicfs@.service \
		/usr/share/man/man8/topicfs.8.gz /usr/share/bash-completion/completions/topicctl; do
		assert_fails test -e "$p"
	done
}

t_test install_tree c_install_tree
t_test installed_programs c_installed_programs
t_test man_pages c_man_pages
t_test man_options c_man_options
t_test completion c_completion
t_test deb_package c_deb_package
t_done
