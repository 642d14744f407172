"""The pure read-only guard: statement classes and functions that act outside the transaction."""

from __future__ import annotations

import pytest

from connectors.sql.guard import GuardError, check_read_statement, first_word, wrappable
from connectors.sql.statements import words


@pytest.mark.parametrize("sql", [
    "SELECT 1",
    "(SELECT 1) UNION (SELECT 2)",
    "WITH t AS (SELECT 1) SELECT * FROM t",
    "VALUES (1), (2)",
    "TABLE customers",
    "SHOW search_path",
    "EXPLAIN SELECT 1",
    "SELECT pg_advisory_xact_lock(1)",            # released with the transaction
    "SELECT 'pg_read_file(''x'')' AS text",     # in a literal
    "SELECT 1 -- dblink_exec('x')",               # in a comment
    'SELECT "dblink_exec" FROM t',                # a column, not a call
    "SELECT $$ lo_import('/etc/passwd') $$",      # dollar-quoted
    "SELECT dblinks.x FROM dblinks",              # a table whose name starts like it
])
def test_reads_pass(sql: str) -> None:
    check_read_statement(sql, "postgresql")


@pytest.mark.parametrize(("sql", "status", "named"), [
    ("COPY t TO PROGRAM 'id'", "refused_statement", "COPY"),
    ("copy t to '/tmp/x'", "refused_statement", "COPY"),
    ("PREPARE p AS SELECT 1", "refused_statement", "PREPARE"),
    ("EXECUTE p", "refused_statement", "EXECUTE"),
    ("DEALLOCATE ALL", "refused_statement", "DEALLOCATE"),
    ("LISTEN ch", "refused_statement", "LISTEN"),
    ("DO $$ BEGIN END $$", "refused_statement", "DO"),
    ("CALL p()", "refused_statement", "CALL"),
    ("SET ROLE postgres", "refused_statement", "SET"),
    ("COMMIT", "refused_statement", "COMMIT"),
    ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", "refused_statement", "DECLARE"),
    ("LOAD 'plpgsql'", "refused_statement", "LOAD"),
    ("SELECT pg_advisory_lock(1)", "refused_function", "pg_advisory_lock()"),
    ("SELECT pg_try_advisory_lock_shared(1)", "refused_function", "pg_try_advisory_lock_shared()"),
    ("SELECT PG_CATALOG.PG_READ_FILE('/etc/passwd')", "refused_function", "pg_read_file()"),
    ('SELECT "pg_read_binary_file" (\'/etc/passwd\')', "refused_function", "pg_read_binary_file()"),
    ("SELECT * FROM pg_ls_dir /* x */ ('.')", "refused_function", "pg_ls_dir()"),
    ("SELECT lo_import('/etc/passwd')", "refused_function", "lo_import()"),
    ("SELECT lo_export(1, '/tmp/x')", "refused_function", "lo_export()"),
    ("SELECT * FROM public.dblink('x', 'SELECT 1') AS t(x int)", "refused_function", "dblink()"),
    ("SELECT dblink_exec('x', 'DROP TABLE t')", "refused_function", "dblink_exec()"),
    ("SELECT query_to_xml('SELECT 1', true, false, '')", "refused_function", "query_to_xml()"),
    ("SELECT pg_terminate_backend(1)", "refused_function", "pg_terminate_backend()"),
    ("EXPLAIN ANALYZE SELECT pg_advisory_lock(1)", "refused_function", "pg_advisory_lock()"),
    ("SELECT * FROM (SELECT pg_read_file('x')) s", "refused_function", "pg_read_file()"),
    ('SELECT U&"d\\0062link_exec"(\'x\', \'y\')', "refused_statement", 'U&"'),
])
def test_escapes_are_refused(sql: str, status: str, named: str) -> None:
    with pytest.raises(GuardError) as info:
        check_read_statement(sql, "postgresql")
    assert info.value.status == status and named in info.value.message and "read-only" in info.value.message


def test_sqlite_statement_classes() -> None:
    for sql in ("SELECT 1", "PRAGMA table_info(t)", "EXPLAIN QUERY PLAN SELECT 1", "WITH t AS (SELECT 1) SELECT 1"):
        check_read_statement(sql, "sqlite")
    for sql in ("ATTACH DATABASE 'x' AS y", "VACUUM", "REINDEX", "DELETE FROM t", "SHOW x"):
        with pytest.raises(GuardError, match="not a read-only statement"):
            check_read_statement(sql, "sqlite")


def test_words_and_wrapping() -> None:
    assert words('SELECT a."B" , x::int FROM t -- c') == (
        ("ident", "select"), ("ident", "a"), ("punct", "."), ("quoted", "B"), ("punct", ","), ("ident", "x"),
        ("punct", ":"), ("punct", ":"), ("ident", "int"), ("ident", "from"), ("ident", "t"))
    assert first_word("  /* c */ ((SELECT 1))") == "select" and first_word("'x'") == ""
    assert wrappable("SELECT * FROM t ORDER BY 1") and wrappable("VALUES (1)") and wrappable("TABLE t")
    for sql in ("SHOW all", "EXPLAIN SELECT 1", "SELECT * INTO x FROM t", "SELECT * FROM t FOR UPDATE",
                "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d"):
        assert not wrappable(sql), sql
