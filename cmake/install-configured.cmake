# install-configured.cmake - run by `cmake --install` (install(SCRIPT) in CMakeLists.txt):
# installs everything, and writes on the way the files that name install paths (the
# systemd units, the man pages, mount.topicfs).
#
# It decides at install time, not at configure time, because `cmake --install build
# --prefix DIR` may name another prefix than the one the build was configured with:
# every path those files name (ExecStart=, the helper's daemon, the docs, the
# configuration directory) and every directory the files go to then follow DIR. As
# GNUInstallDirs does for a prefix of "/", the directories then go under usr/ (/usr/bin,
# /usr/share/man), configuration stays in /etc. DESTDIR= stages the whole tree as usual
# (file(INSTALL) puts it in front of each destination).
#
# Set by CMakeLists.txt before this runs: TFS_SOURCE_DIR, TFS_STAGE_DIR, TFS_VERSION,
# TFS_PROGRAMS (the built topicfs and topicctl), TFS_STRIP (strip(1), for --strip),
# TFS_BINDIR, TFS_SBINDIR, TFS_DOCDIR, TFS_MANDIR, TFS_COMPLETION_DIR (relative to the
# prefix, as GNUInstallDirs gives them for the configured one), TFS_UNIT_DIR_PATTERN (systemd.pc's unit directory, with
# @TFS_ROOT_PREFIX@ and @TFS_PREFIX@ where systemd's root_prefix and prefix go) or
# TFS_UNIT_DIR (an absolute directory chosen by the builder).

string(REGEX REPLACE "(.)/+$" "\\1" _prefix "${CMAKE_INSTALL_PREFIX}")
if(_prefix STREQUAL "")
  set(_prefix "/")                    # `--prefix /` arrives without its slash
endif()

# full_path(VAR REL): REL under the prefix; for prefix "/", under /usr.
function(full_path var rel)
  if(IS_ABSOLUTE "${rel}")
    set(${var} "${rel}" PARENT_SCOPE)
  elseif(_prefix STREQUAL "/")
    string(REGEX REPLACE "^usr/" "" rel "${rel}")
    set(${var} "/usr/${rel}" PARENT_SCOPE)
  else()
    set(${var} "${_prefix}/${rel}" PARENT_SCOPE)
  endif()
endfunction()

# The names configure_file fills in, as GNUInstallDirs would for this prefix: /usr and
# / keep their configuration in /etc, any other prefix in PREFIX/etc; systemd's
# root_prefix is empty for both (units in /lib/systemd/system) and the prefix itself
# otherwise (PREFIX/lib/systemd/system, which systemd searches for /usr/local).
full_path(CMAKE_INSTALL_FULL_BINDIR "${TFS_BINDIR}")
full_path(CMAKE_INSTALL_FULL_SBINDIR "${TFS_SBINDIR}")
full_path(CMAKE_INSTALL_FULL_DOCDIR "${TFS_DOCDIR}")
full_path(_mandir "${TFS_MANDIR}")
full_path(TFS_COMPLETION_FULL_DIR "${TFS_COMPLETION_DIR}")
if(_prefix STREQUAL "/usr" OR _prefix STREQUAL "/")
  set(CMAKE_INSTALL_FULL_SYSCONFDIR "/etc")
  set(_root_prefix "")
else()
  set(CMAKE_INSTALL_FULL_SYSCONFDIR "${_prefix}/etc")
  set(_root_prefix "${_prefix}")
endif()
if(TFS_UNIT_DIR)
  set(_unit_dir "${TFS_UNIT_DIR}")
else()
  string(REPLACE "@TFS_ROOT_PREFIX@" "${_root_prefix}" _unit_dir "${TFS_UNIT_DIR_PATTERN}")
  string(REPLACE "@TFS_PREFIX@" "${_prefix}" _unit_dir "${_unit_dir}")
endif()
set(PROJECT_VERSION "${TFS_VERSION}")

# The helper installed keeps only its installed daemon: the search of the source
# tree's copy (beside the script, then PATH) is cut out between its two markers.
file(READ "${TFS_SOURCE_DIR}/mount-helpers/mount.topicfs" _helper)
string(REGEX REPLACE "\t# >>> source tree only[^\n]*\n.*\t# <<< source tree only\n" ""
       _helper "${_helper}")
file(WRITE "${TFS_STAGE_DIR}/mount.topicfs.in" "${_helper}")

set(_out "${TFS_STAGE_DIR}/installed")
configure_file("${TFS_STAGE_DIR}/mount.topicfs.in" "${_out}/mount.topicfs" @ONLY)
configure_file("${TFS_SOURCE_DIR}/systemd/topicfs@.service" "${_out}/topicfs@.service" @ONLY)
configure_file("${TFS_SOURCE_DIR}/systemd/example.mount" "${_out}/example.mount" @ONLY)
foreach(page topicfs.8 mount.topicfs.8 topicctl.8)
  configure_file("${TFS_SOURCE_DIR}/man/${page}" "${_out}/man/${page}" @ONLY)
endforeach()

foreach(program ${TFS_PROGRAMS})
  file(INSTALL DESTINATION "${CMAKE_INSTALL_FULL_BINDIR}" TYPE EXECUTABLE FILES "${program}")
  if(CMAKE_INSTALL_DO_STRIP AND TFS_STRIP)         # cmake --install --strip
    get_filename_component(_name "${program}" NAME)
    execute_process(COMMAND "${TFS_STRIP}" "$ENV{DESTDIR}${CMAKE_INSTALL_FULL_BINDIR}/${_name}")
  endif()
endforeach()
file(INSTALL DESTINATION "${CMAKE_INSTALL_FULL_SBINDIR}" TYPE PROGRAM
     FILES "${_out}/mount.topicfs")
file(INSTALL DESTINATION "${_unit_dir}" TYPE FILE FILES "${_out}/topicfs@.service")
file(INSTALL DESTINATION "${_mandir}/man8" TYPE FILE
     FILES "${_out}/man/topicfs.8" "${_out}/man/mount.topicfs.8" "${_out}/man/topicctl.8")
file(INSTALL DESTINATION "${TFS_COMPLETION_FULL_DIR}" TYPE FILE
     FILES "${TFS_SOURCE_DIR}/completion/topicctl")
# The README links to docs/FILE: the same layout under the doc directory.
file(INSTALL DESTINATION "${CMAKE_INSTALL_FULL_DOCDIR}" TYPE FILE
     FILES "${TFS_SOURCE_DIR}/README.md")
file(INSTALL DESTINATION "${CMAKE_INSTALL_FULL_DOCDIR}" TYPE DIRECTORY
     FILES "${TFS_SOURCE_DIR}/docs")
file(INSTALL DESTINATION "${CMAKE_INSTALL_FULL_DOCDIR}/examples" TYPE FILE
     FILES "${_out}/example.mount")
