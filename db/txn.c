/*
 * txn.c - write transactions of the store: every write function is one BEGIN IMMEDIATE
 * transaction, or a SAVEPOINT inside the caller's ap_db_begin ... ap_db_commit (db.h).
 *
 * Structure: the liveness check, the per-write begin/end pair the table files use
 * (ap_db_wbegin / ap_db_wend, db_int.h), then the public ap_db_begin / commit / rollback.
 */
#include "db_int.h"

/* After some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY) SQLite may roll back
 * the whole transaction by itself (SQLite docs, "Response To Errors Within A Transaction").
 * Inside ap_db_begin that must not go unnoticed: later writes would run, and commit, on their
 * own. So every write and the commit check that the transaction is still open. */
static ap_status txn_alive(ap_db *db, const char *doing, ap_err *err) {
    if (db->in_txn && ap_sql_autocommit(db))
        return ap_err_set(err, AP_ERR_DB, "%s: %s: the transaction was rolled back after an "
                          "earlier error; nothing of it was stored", db->path, doing);
    return AP_OK;
}

ap_status ap_db_wbegin(ap_db *db, const char *doing, ap_err *err) {
    if (db->readonly)
        return ap_err_set(err, AP_ERR_DB, "%s: %s: the database was opened read-only", db->path,
                          doing);
    ap_status st = txn_alive(db, doing, err);
    if (st != AP_OK) return st;
    int rc = ap_sql_exec(db, db->in_txn ? "SAVEPOINT ap_write" : "BEGIN IMMEDIATE");
    if (rc != AP_SQL_OK) return ap_db_fail(db, rc, doing, err);
    return AP_OK;
}

static ap_status run_hook(ap_db *db, const char *doing, ap_err *err) {
    if (db->before_commit && db->before_commit(db->hook_arg) != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: %s: injected failure before commit", db->path,
                          doing);
    return AP_OK;
}

ap_status ap_db_wend(ap_db *db, ap_status st, const char *doing, ap_err *err) {
    if (db->in_txn) {
        if (!ap_sql_autocommit(db)) {
            if (st != AP_OK) ap_sql_exec(db, "ROLLBACK TO ap_write");
            ap_sql_exec(db, "RELEASE ap_write");
        }
        return st;
    }
    if (st == AP_OK) st = run_hook(db, doing, err);
    if (st == AP_OK) {
        int rc = ap_sql_exec(db, "COMMIT");
        if (rc == AP_SQL_OK) return AP_OK;
        st = ap_db_fail(db, rc, doing, err);
    }
    if (!ap_sql_autocommit(db)) ap_sql_exec(db, "ROLLBACK");
    return st;
}

ap_status ap_db_begin(ap_db *db, ap_err *err) {
    if (!db) return ap_err_set(err, AP_ERR_DB, "no database");
    if (db->in_txn)
        return ap_err_set(err, AP_ERR_INTERNAL, "%s: ap_db_begin inside a transaction", db->path);
    ap_status st = ap_db_wbegin(db, "starting a transaction", err);
    if (st == AP_OK) db->in_txn = 1;
    return st;
}

ap_status ap_db_commit(ap_db *db, ap_err *err) {
    if (!db || !db->in_txn) return ap_err_set(err, AP_ERR_INTERNAL, "commit without ap_db_begin");
    ap_status st = txn_alive(db, "committing", err);
    db->in_txn = 0;
    if (st != AP_OK) return st;
    return ap_db_wend(db, AP_OK, "committing", err);
}

void ap_db_rollback(ap_db *db) {
    if (!db || !db->in_txn) return;
    db->in_txn = 0;
    if (!ap_sql_autocommit(db)) ap_sql_exec(db, "ROLLBACK");
}
