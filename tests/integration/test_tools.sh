#!/bin/bash
# test_tools.sh - whole-tree tools and editors (docs/semantics.md §1: "cp -r MOUNT/users
# cache/ is therefore an exact bootstrap", "Editors must just work"): cp -r, find,
# grep -r, sed -i, a vim-style save (swap file, temp file, rename over, fsync), vim.
. "$(dirname "$0")/lib.sh"
t_require_daemon

# Fill topic t (3 partitions) and a plain model directory with the same operations.
fill_topic() {
	local model=$1 p i name
	mkdir "$MNT/t" "$MNT/t/1" "$MNT/t/2"
	for p in 0 1 2; do mkdir -p "$model/$p"; done
	for i in $(seq 0 59); do
		p=$((i % 3))
		case $((i % 6)) in
		0) name="key-$i" ;;
		1) name="a%25b-$i" ;;                # a key holding '%'
		2) name="%2Edot-$i" ;;               # a key starting with '.'
		3) name="sp ace $i" ;;
		4) name="utf8-é-$i" ;;
		5) name="x%2Fy-$i" ;;                # a key holding '/'
		esac
		printf 'value %s\n' "$i" > "$MNT/t/$p/$name"
		printf 'value %s\n' "$i" > "$model/$p/$name"
		if [ $((i % 4)) = 0 ]; then           # overwrite a quarter
			head -c $((i * 37)) /dev/urandom > "$model/$p/$name"
			cat "$model/$p/$name" > "$MNT/t/$p/$name"
		fi
		if [ $((i % 5)) = 0 ]; then           # delete a fifth
			rm "$MNT/t/$p/$name" "$model/$p/$name"
		fi
	done
	printf '' > "$MNT/t/0/%"; : > "$model/0/%"    # the empty key, empty value
}

c_cp_r_bootstrap() {
	t_mount
	local model=$T_CASE/model
	fill_topic "$model"
	assert_records t/0 0 cp -r "$MNT/t" "$T_CASE/boot"
	assert_ok diff -r "$MNT/t" "$T_CASE/boot"
	assert_ok diff -r "$model" "$T_CASE/boot"
	assert_eq "$(cd "$model" && find . | sort)" "$(cd "$T_CASE/boot" && find . | sort)" \
		"names in the bootstrap copy (no control entries)"
	# The whole mount as well, and again after a remount.
	cp -r "$MNT/." "$T_CASE/all"
	assert_ok diff -r "$model" "$T_CASE/all/t"
	t_remount
	rm -rf "${T_CASE:?}/boot"
	cp -r "$MNT/t" "$T_CASE/boot"
	assert_ok diff -r "$model" "$T_CASE/boot"
}

c_find_grep() {
	t_mount
	mkdir "$MNT/t" "$MNT/u"
	echo needle > "$MNT/t/0/a"; echo hay > "$MNT/t/0/b"; echo needle > "$MNT/u/0/c"
	echo x > "$MNT/u/0/d"; rm "$MNT/u/0/d"
	assert_eq "$(printf '%s\n' "$MNT/t/0/a" "$MNT/u/0/c")" "$(grep -rl needle "$MNT" | sort)" "grep -rl"
	assert_eq "$MNT/t/0/b" "$(find "$MNT" -type f -name b)" "find -name"
	assert_eq 3 "$(find "$MNT" -type f -size -10c | wc -l)" "find -size"
	assert_eq "" "$(find "$MNT" -name '.*')" "find never sees a control entry"
	# find -delete tombstones every key; then the empty topic can go.
	assert_records t/0 2 find "$MNT/t" -type f -delete
	assert_eq "" "$(ls -A "$MNT/t/0")" "partition after find -delete"
	assert_ok rmdir "$MNT/t"
	assert_eq u "$(ls "$MNT")" "topics after rmdir"
}

c_sed_i() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 v0 v1 n
	printf 'hello world\n' > "$p/k"
	echo other > "$p/o"
	v0=$(t_x "$p/k" versions | wc -w)
	# sed -i: a temp key (1 record), renamed over k (2 records, one batch).
	assert_records t/0 3 sed -i 's/world/there/' "$p/k"
	assert_cat "$p/k" $'hello there\n'
	assert_eq "k o" "$(ls "$p" | xargs)" "listing after sed -i (no temp file left)"
	v1=$(t_x "$p/k" versions | wc -w)
	assert_eq $((v0 + 1)) "$v1" "records of k after one save"
	n=$(t_leo t/0)
	assert_one_batch t 0 $((n - 2)) $((n - 1))
}

# An editor's save, step by step: swap file, new content in a temp file, fsync,
# rename over the key, fsync of the key and of the directory, swap file removed.
c_editor_save() {
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 out n
	printf 'line 1\nline 2\n' > "$p/notes"
	# A raw leading dot is not a key name: ".notes.swp" is a scratch file, never logged.
	n=$(t_leo t/0)
	out=$("$T_PY" - "$p" <<'EOF'
import os, sys
p = sys.argv[1]
j = lambda n: os.path.join(p, n)
swp = os.open(j(".notes.swp"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.write(swp, b"swap contents")
os.fsync(swp)
tmp = os.open(j("notes.tmp~"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(tmp, b"line 1\nline 2 edited\n")
os.fsync(tmp)
os.close(tmp)
os.rename(j("notes.tmp~"), j("notes"))
fd = os.open(j("notes"), os.O_RDONLY)
os.fsync(fd)
os.close(fd)
d = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(d)
os.close(d)
os.close(swp)
os.unlink(j(".notes.swp"))
print(open(j("notes")).read().replace("\n", "|"))
EOF
)
	assert_eq "line 1|line 2 edited|" "$out" "value after the save"
	# temp (1) + rename (2); the swap file and fsyncs add nothing.
	assert_eq $((n + 3)) "$(t_leo t/0)" "log_end_offset after the save"
	assert_eq notes "$(ls "$p")" "listing after the save"
	assert_one_batch t 0 $((n + 1)) $((n + 2))
	assert_eq 2 "$(t_x "$p/notes" versions | wc -w)" "records of notes (one per save)"
	t_remount
	assert_cat "$p/notes" $'line 1\nline 2 edited\n'
}

# Real vim (vim.tiny): in-place write with ftruncate and fsync; its swap file ".k.swp"
# is a scratch file in the partition (test_scratch.sh counts its records).
c_vim() {
	need vim.tiny
	t_mount
	mkdir "$MNT/t"
	local p=$MNT/t/0 n
	printf 'hello world\n' > "$p/k"
	n=$(t_leo t/0)
	assert_ok env HOME="$T_CASE" vim.tiny -u NONE -i NONE -es -c '%s/world/vim/' -c wq "$p/k"
	assert_cat "$p/k" $'hello vim\n'
	assert_eq k "$(ls -A "$p")" "listing after vim (no swap, backup or test file left)"
	[ "$(t_leo t/0)" -gt "$n" ] || fail "vim's save appended no record"
	assert_eq k "$(t_x "$MNT/t/0/.history/$(t_last t/0)" key)" "the last record is the key's"
	assert_ok env HOME="$T_CASE" vim.tiny -u NONE -i NONE -es -c 'set nocp wb bkc=no' \
		-c '%s/vim/again/' -c wq "$p/k"
	assert_cat "$p/k" $'hello again\n'
	assert_eq k "$(ls -A "$p")" "listing after the second vim save"
}

t_test cp_r_bootstrap c_cp_r_bootstrap
t_test find_grep c_find_grep
t_test sed_i c_sed_i
t_test editor_save c_editor_save
t_test vim c_vim
t_done
