-- db_query's functions on PostgreSQL (gateway/store/readonly_pg.py installs them, idempotently,
-- beside the store's tables). The SQL that db_query runs is written for SQLite and rewritten by
-- tools/host/sql_postgres.py, which calls these where PostgreSQL has no function of the same
-- meaning, and where SQLite's limits have to be kept by hand:
--
-- * SQLite refuses a string longer than its length limit wherever one is built; PostgreSQL
--   builds values up to 1 GB. Every function that can build a value longer than its arguments
--   (||, replace, group_concat) checks the size first and stops with SQLSTATE TL002.
-- * SQLite's LIKE/GLOB pattern limit is TL003 here; the size check of a search argument
--   (SQLite's __talon_short, registered on its connections) is TL001.
--
-- The names start with __talon_: db_query's SQL check refuses every function not on its list,
-- so a query can reach them only through the rewrite.

CREATE OR REPLACE FUNCTION __talon_short(v anyelement, max_bytes integer, fn text) RETURNS anyelement
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    size bigint;
BEGIN
    -- Numbers pass unchecked, as on SQLite: their text is short.
    IF v IS NULL OR pg_typeof(v) NOT IN ('text'::regtype, 'bytea'::regtype, 'character varying'::regtype) THEN
        RETURN v;
    END IF;
    size := octet_length(v);
    IF size > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'TL001', MESSAGE = fn, DETAIL = size || ' ' || max_bytes;
    END IF;
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION __talon_value(v text, max_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF octet_length(v) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'TL002', MESSAGE = 'string or blob too big';
    END IF;
    RETURN v;
END
$$;

CREATE OR REPLACE FUNCTION __talon_pattern(p text, max_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF octet_length(p) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'TL003', MESSAGE = 'LIKE or GLOB pattern too complex';
    END IF;
    RETURN p;
END
$$;

-- replace(), refused before it builds a result longer than max_bytes.
CREATE OR REPLACE FUNCTION __talon_replace(s text, f text, r text, max_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    hits bigint;
BEGIN
    IF octet_length(f) = 0 THEN
        RETURN s;
    END IF;
    IF octet_length(r) > octet_length(f) THEN
        hits := (octet_length(s) - octet_length(replace(s, f, ''))) / octet_length(f);
        IF octet_length(s) + hits * (octet_length(r) - octet_length(f)) > max_bytes THEN
            RAISE EXCEPTION USING ERRCODE = 'TL002', MESSAGE = 'string or blob too big';
        END IF;
    END IF;
    RETURN replace(s, f, r);
END
$$;

-- group_concat(): string_agg with the size check on every step.
CREATE OR REPLACE FUNCTION __talon_concat_step(state text, v text, sep text, max_bytes integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF v IS NULL THEN
        RETURN state;
    END IF;
    IF state IS NULL THEN
        state := v;
    ELSE
        state := state || coalesce(sep, '') || v;
    END IF;
    IF octet_length(state) > max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'TL002', MESSAGE = 'string or blob too big';
    END IF;
    RETURN state;
END
$$;

CREATE OR REPLACE AGGREGATE __talon_group_concat(text, text, integer) (
    SFUNC = __talon_concat_step,
    STYPE = text
);

-- total(): a float sum that is 0.0 over no rows.
CREATE OR REPLACE AGGREGATE __talon_total(double precision) (
    SFUNC = float8pl,
    STYPE = double precision,
    INITCOND = '0'
);

-- substr() with SQLite's reading of its arguments: a negative start counts from the end, a
-- negative length takes the characters before the start. Returns (start, count) for substr();
-- z NULL: to the end.
CREATE OR REPLACE FUNCTION __talon_substr_bounds(len bigint, y bigint, z bigint) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    p1 bigint := y;
    p2 bigint := coalesce(z, 2147483647);
    negative boolean := p2 < 0;
BEGIN
    IF negative THEN
        p2 := -p2;
    END IF;
    IF p1 < 0 THEN
        p1 := p1 + len;
        IF p1 < 0 THEN
            p2 := greatest(p2 + p1, 0);
            p1 := 0;
        END IF;
    ELSIF p1 > 0 THEN
        p1 := p1 - 1;
    ELSIF p2 > 0 THEN
        p2 := p2 - 1;
    END IF;
    IF negative THEN
        p1 := p1 - p2;
        IF p1 < 0 THEN
            p2 := p2 + p1;
            p1 := 0;
        END IF;
    END IF;
    RETURN ARRAY[least(p1 + 1, 2147483647)::integer, least(p2, 2147483647)::integer];
END
$$;

CREATE OR REPLACE FUNCTION __talon_substr(s text, y bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT substr(s, b[1], b[2]) FROM (SELECT __talon_substr_bounds(length(s), y, NULL) AS b) AS bounds
$$;

CREATE OR REPLACE FUNCTION __talon_substr(s text, y bigint, z bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT substr(s, b[1], b[2]) FROM (SELECT __talon_substr_bounds(length(s), y, z) AS b) AS bounds
$$;

CREATE OR REPLACE FUNCTION __talon_substr(s bytea, y bigint) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT substr(s, b[1], b[2]) FROM (SELECT __talon_substr_bounds(length(s), y, NULL) AS b) AS bounds
$$;

CREATE OR REPLACE FUNCTION __talon_substr(s bytea, y bigint, z bigint) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT substr(s, b[1], b[2]) FROM (SELECT __talon_substr_bounds(length(s), y, z) AS b) AS bounds
$$;

-- GLOB: case-sensitive, * ? and [...] (with ^ for "not"), as a regular expression.
CREATE OR REPLACE FUNCTION __talon_glob(s text, p text, max_bytes integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    re text := '^';
    i integer := 1;
    j integer;
    n integer;
    c text;
BEGIN
    IF s IS NULL OR p IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM __talon_pattern(p, max_bytes);
    n := length(p);
    WHILE i <= n LOOP
        c := substr(p, i, 1);
        IF c = '*' THEN
            re := re || '.*';
        ELSIF c = '?' THEN
            re := re || '.';
        ELSIF c = '[' THEN
            j := i + 1;
            IF substr(p, j, 1) = '^' THEN
                j := j + 1;
            END IF;
            IF substr(p, j, 1) = ']' THEN
                j := j + 1;
            END IF;
            WHILE j <= n AND substr(p, j, 1) <> ']' LOOP
                j := j + 1;
            END LOOP;
            IF j > n THEN
                RETURN false;  -- an unclosed [ matches nothing
            END IF;
            re := re || '[' || regexp_replace(substr(p, i + 1, j - i - 1), '([\\\[])', '\\\1', 'g') || ']';
            i := j;
        ELSIF c ~ '^[[:alnum:]]$' THEN
            re := re || c;
        ELSE
            re := re || '\' || c;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN s ~ (re || '$');
END
$$;

-- typeof() with SQLite's names.
CREATE OR REPLACE FUNCTION __talon_typeof(v anyelement) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v IS NULL THEN 'null'
        WHEN pg_typeof(v) IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'boolean'::regtype)
            THEN 'integer'
        WHEN pg_typeof(v) IN ('real'::regtype, 'double precision'::regtype) THEN 'real'
        WHEN pg_typeof(v) = 'numeric'::regtype THEN
            CASE WHEN v::text ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
        WHEN pg_typeof(v) = 'bytea'::regtype THEN 'blob'
        ELSE 'text'
    END
$$;
