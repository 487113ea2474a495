/*
 * files.h - writing outputs so that they never hurt the user (base/files.c): a set of files
 * that lands together, refusal of targets that are not regular files, and removal of the
 * temporary files a killed run left behind.
 *
 * The outputs of one run are a set (plan.json with its trainer configs; report.html, report.md
 * and plans.csv): ap_outset writes every file into a temporary directory inside the output
 * directory (fsynced), and only when all are written removes the files an earlier run of the
 * same kind left there (the set's `family`), then renames the new ones in. A failure (full disk,
 * a refused target) before that leaves the directory as it was; a kill during it leaves a part
 * of one run's set, never files of two runs side by side. The temporary directory is named
 * after the process (".autoplan-<pid>.tmp"): the next run into the same directory removes those
 * of processes that no longer exist, as ap_write_file_atomic does for its "<file>.tmp.<pid>".
 *
 * A target that exists and is not a regular file (a FIFO, a symlink, a device, a socket) is
 * refused (AP_ERR_INPUT naming it), never replaced: writing to standard output is the caller's
 * business (the CLI takes "-" for it).
 */
#ifndef AP_FILES_H
#define AP_FILES_H

#include <stddef.h>

#include "autoplan/common.h"

/* AP_OK when path does not exist or is a regular file (symlinks are not followed); otherwise
 * AP_ERR_INPUT "<path>: exists and is a FIFO (not a regular file); not replaced". */
ap_status ap_files_check_target(const char *path, ap_err *err);

/* Remove the temporary files of dead processes beside path ("<path>.tmp.<pid>") and, when path
 * is a directory, those in it ("*.tmp.<pid>" and ".autoplan-<pid>.tmp" directories). Best
 * effort, silent. */
void ap_files_remove_stale(const char *path);

/* mkdir -p: AP_ERR_INPUT naming the part that exists and is not a directory or cannot be made
 * (permission, read-only filesystem), AP_ERR_IO for other failures. `what` prefixes messages
 * ("--out"). */
ap_status ap_files_make_dir(const char *dir, const char *what, ap_err *err);

/* What ap_files_make_dir would refuse without making anything: a part of dir that exists and
 * is not a directory (AP_ERR_INPUT). For checking --out before a long computation. */
ap_status ap_files_check_dir(const char *dir, const char *what, ap_err *err);

/* Write all of data to fd (an interrupted write is retried). *written counts the file's bytes
 * (0 at its start); each whole 4 MB it passes is handed to the disk's writeback at once where
 * Linux has sync_file_range, so the fsync that ends the file waits for its last pages only.
 * 0, or the errno of the write that failed. */
int ap_files_write_fd(int fd, const void *data, size_t len, long long *written);

typedef struct ap_outset ap_outset;

/* Start a set in directory dir (made when missing, with its missing parents). family:
 * NULL-terminated names of the files an earlier run of this kind may have left in dir (removed
 * at commit unless written again); NULL for none. *out is freed by ap_outset_commit or
 * ap_outset_abort. The directories the set made are removed again when it moves nothing in (a
 * begin that fails part of the way, an abort, a commit that fails before its first file): a
 * run that writes nothing leaves the file system as it found it. */
ap_status ap_outset_begin(const char *dir, const char *const *family, ap_outset **out,
                          ap_err *err);
/* Write one file of the set (a plain name, no '/') into the temporary directory. Refused when
 * dir/name exists and is not a regular file. */
ap_status ap_outset_add(ap_outset *s, const char *name, const void *data, size_t len,
                        ap_err *err);
/* ap_outset_add in pieces, for a file too large to hold in memory: _open starts dir/name (the
 * same checks; one file open at a time), _write appends, _close fsyncs it into the set. A
 * failure removes the file from the set (ap_outset_abort still ends the set). */
ap_status ap_outset_open(ap_outset *s, const char *name, ap_err *err);
ap_status ap_outset_write(ap_outset *s, const void *data, size_t len, ap_err *err);
ap_status ap_outset_close(ap_outset *s, ap_err *err);
/* Move the set into its directory (see the file comment) and free s. */
ap_status ap_outset_commit(ap_outset *s, ap_err *err);
/* Remove what the set wrote and free s; NULL is a no-op. */
void ap_outset_abort(ap_outset *s);
/* The set's directory as given (borrowed; valid until commit or abort). */
const char *ap_outset_dir(const ap_outset *s);

#endif
