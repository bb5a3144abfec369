-- db_query's SQLite date, time and JSON functions on PostgreSQL (see readonly_pg_functions.sql).
--
-- Times are kept as SQLite keeps them, a number of milliseconds, here as Unix seconds (UTC) in
-- a double: the store's timestamps are such numbers (created_at and the like), and SQLite's
-- date functions read a number as a Julian day unless told 'unixepoch'.

-- A time value and its modifiers as Unix seconds, or NULL where SQLite gives NULL.
CREATE OR REPLACE FUNCTION __talon_moment(v text, m text[]) RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    t double precision;
    num double precision;
    is_number boolean := false;
    parts text[];
    modifier text;
    amount double precision;
    whole integer;
    unit text;
    y integer;
    mo integer;
    d integer;
    day_seconds double precision;
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    v := btrim(v);
    IF lower(v) = 'now' THEN
        t := extract(epoch FROM statement_timestamp());
    ELSIF v ~ '^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$' THEN
        num := v::double precision;
        is_number := true;
        t := (num - 2440587.5) * 86400.0;  -- a Julian day number
    ELSE
        parts := regexp_match(v, '^(?:([0-9]{4})-([0-9]{2})-([0-9]{2})[ T]?)?'
            '(?:([0-9]{2}):([0-9]{2})(?::([0-9]{2}(?:\.[0-9]*)?))?)?\s*(?:[zZ]|([-+])([0-9]{2}):([0-9]{2}))?$');
        IF parts IS NULL OR (parts[1] IS NULL AND parts[4] IS NULL) THEN
            RETURN NULL;
        END IF;
        y := coalesce(parts[1]::integer, 2000);
        mo := coalesce(parts[2]::integer, 1);
        d := coalesce(parts[3]::integer, 1);
        IF y < 1 OR mo NOT BETWEEN 1 AND 12 OR d NOT BETWEEN 1 AND 31
           OR coalesce(parts[4]::integer, 0) > 24 OR coalesce(parts[5]::integer, 0) > 59
           OR coalesce(parts[6]::double precision, 0) >= 60 THEN
            RETURN NULL;
        END IF;
        -- Day 31 of a shorter month runs on into the next, as in SQLite.
        t := (make_date(y, mo, 1) - date '1970-01-01' + d - 1) * 86400.0
            + coalesce(parts[4]::integer, 0) * 3600 + coalesce(parts[5]::integer, 0) * 60
            + coalesce(parts[6]::double precision, 0);
        IF parts[7] IS NOT NULL THEN
            t := t - (CASE parts[7] WHEN '-' THEN -1 ELSE 1 END) * (parts[8]::integer * 3600 + parts[9]::integer * 60);
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(array_length(m, 1), 0) LOOP
        modifier := lower(btrim(m[i]));
        IF modifier IS NULL THEN
            RETURN NULL;
        ELSIF modifier NOT IN ('unixepoch', 'julianday', 'auto')
              AND NOT t BETWEEN -62135596800 AND 253402300799.999 THEN
            RETURN NULL;  -- SQLite's range: years 0000-9999 (year 0 is left out here)
        ELSIF modifier IN ('unixepoch', 'julianday', 'auto') THEN
            IF i <> 1 OR NOT is_number THEN
                RETURN NULL;
            END IF;
            IF modifier = 'unixepoch' OR (modifier = 'auto' AND NOT (num >= 0 AND num < 5373484.5)) THEN
                t := num;
            END IF;
        ELSIF modifier IN ('subsec', 'subsecond') THEN
            NULL;  -- read by the function that formats the result
        ELSIF modifier = 'localtime' THEN
            t := extract(epoch FROM to_timestamp(t)::timestamp AT TIME ZONE 'UTC');
        ELSIF modifier = 'utc' THEN
            t := extract(epoch FROM (to_timestamp(t) AT TIME ZONE 'UTC')::timestamptz);
        ELSIF modifier = 'start of day' THEN
            t := floor(t / 86400) * 86400;
        ELSIF modifier IN ('start of month', 'start of year') THEN
            y := extract(year FROM to_timestamp(t) AT TIME ZONE 'UTC');
            mo := CASE modifier WHEN 'start of month' THEN extract(month FROM to_timestamp(t) AT TIME ZONE 'UTC') ELSE 1 END;
            t := (make_date(y, mo, 1) - date '1970-01-01') * 86400.0;
        ELSIF modifier ~ '^weekday [0-6]$' THEN
            -- 1970-01-01 was a Thursday (4); move forward to the named weekday (Sunday is 0).
            t := t + ((substr(modifier, 9)::integer - ((floor(t / 86400)::bigint + 4) % 7 + 7) % 7 + 7) % 7) * 86400;
        ELSE
            parts := regexp_match(modifier,
                '^([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*(days?|hours?|minutes?|seconds?|months?|years?)$');
            IF parts IS NULL THEN
                RETURN NULL;
            END IF;
            amount := parts[1]::double precision;
            unit := rtrim(parts[2], 's');
            IF unit IN ('month', 'year') THEN
                -- The whole part moves the calendar (a day past the month's end runs on into the
                -- next, as in SQLite); a fraction counts 30 or 365 days.
                whole := trunc(amount);
                day_seconds := t - floor(t / 86400) * 86400;
                y := extract(year FROM to_timestamp(t) AT TIME ZONE 'UTC');
                mo := extract(month FROM to_timestamp(t) AT TIME ZONE 'UTC');
                d := extract(day FROM to_timestamp(t) AT TIME ZONE 'UTC');
                IF unit = 'year' THEN
                    y := y + whole;
                ELSE
                    mo := mo + whole;
                    y := y + floor((mo - 1) / 12.0)::integer;
                    mo := ((mo - 1) % 12 + 12) % 12 + 1;
                END IF;
                IF y < 1 THEN
                    RETURN NULL;
                END IF;
                t := (make_date(y, mo, 1) - date '1970-01-01' + d - 1) * 86400.0 + day_seconds
                    + (amount - whole) * (CASE unit WHEN 'month' THEN 30 ELSE 365 END) * 86400.0;
            ELSE
                t := t + amount * CASE unit WHEN 'day' THEN 86400 WHEN 'hour' THEN 3600 WHEN 'minute' THEN 60 ELSE 1 END;
            END IF;
        END IF;
    END LOOP;
    IF t IS NULL OR NOT t BETWEEN -62135596800 AND 253402300799.999 THEN
        RETURN NULL;
    END IF;
    RETURN round(t * 1000) / 1000;  -- milliseconds, as SQLite keeps them
END
$$;

CREATE OR REPLACE FUNCTION __talon_subsec(m text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(m) AS x WHERE lower(btrim(x)) IN ('subsec', 'subsecond'))
$$;

CREATE OR REPLACE FUNCTION __talon_datetime(v text, m text[]) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(to_timestamp(t) AT TIME ZONE 'UTC',
                   CASE WHEN __talon_subsec(m) THEN 'YYYY-MM-DD HH24:MI:SS.MS' ELSE 'YYYY-MM-DD HH24:MI:SS' END)
    FROM (SELECT __talon_moment(v, m) AS t) AS moment
$$;

CREATE OR REPLACE FUNCTION __talon_date(v text, m text[]) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(to_timestamp(__talon_moment(v, m)) AT TIME ZONE 'UTC', 'YYYY-MM-DD')
$$;

CREATE OR REPLACE FUNCTION __talon_time(v text, m text[]) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(to_timestamp(t) AT TIME ZONE 'UTC',
                   CASE WHEN __talon_subsec(m) THEN 'HH24:MI:SS.MS' ELSE 'HH24:MI:SS' END)
    FROM (SELECT __talon_moment(v, m) AS t) AS moment
$$;

CREATE OR REPLACE FUNCTION __talon_julianday(v text, m text[]) RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT __talon_moment(v, m) / 86400.0 + 2440587.5
$$;

CREATE OR REPLACE FUNCTION __talon_unixepoch(v text, m text[]) RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN __talon_subsec(m) THEN round(t::numeric, 3) ELSE trunc(t::numeric) END
    FROM (SELECT __talon_moment(v, m) AS t) AS moment
$$;

CREATE OR REPLACE FUNCTION __talon_strftime(f text, v text, m text[]) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    t double precision := __talon_moment(v, m);
    ts timestamp;
    out text := '';
    piece text;
    c text;
    i integer := 1;
    n integer := length(f);
    doy integer;
    dow integer;
BEGIN
    IF t IS NULL OR f IS NULL THEN
        RETURN NULL;
    END IF;
    ts := to_timestamp(t) AT TIME ZONE 'UTC';
    doy := extract(doy FROM ts)::integer - 1;
    dow := extract(dow FROM ts)::integer;
    WHILE i <= n LOOP
        c := substr(f, i, 1);
        IF c <> '%' THEN
            out := out || c;
        ELSE
            i := i + 1;
            piece := CASE substr(f, i, 1)
                WHEN 'd' THEN to_char(ts, 'DD')
                WHEN 'e' THEN lpad(to_char(ts, 'FMDD'), 2, ' ')
                WHEN 'f' THEN to_char(ts, 'SS.MS')
                WHEN 'F' THEN to_char(ts, 'YYYY-MM-DD')
                WHEN 'H' THEN to_char(ts, 'HH24')
                WHEN 'I' THEN to_char(ts, 'HH12')
                WHEN 'j' THEN to_char(ts, 'DDD')
                WHEN 'J' THEN trim_scale(round(t::numeric / 86400 + 2440587.5, 9))::text  -- %.16g
                WHEN 'k' THEN lpad(to_char(ts, 'FMHH24'), 2, ' ')
                WHEN 'l' THEN lpad(to_char(ts, 'FMHH12'), 2, ' ')
                WHEN 'm' THEN to_char(ts, 'MM')
                WHEN 'M' THEN to_char(ts, 'MI')
                WHEN 'p' THEN to_char(ts, 'AM')
                WHEN 'P' THEN to_char(ts, 'am')
                WHEN 'R' THEN to_char(ts, 'HH24:MI')
                WHEN 's' THEN trunc(t)::bigint::text
                WHEN 'S' THEN to_char(ts, 'SS')
                WHEN 'T' THEN to_char(ts, 'HH24:MI:SS')
                WHEN 'u' THEN to_char(ts, 'ID')
                WHEN 'w' THEN dow::text
                WHEN 'W' THEN lpad(((doy + 7 - (dow + 6) % 7) / 7)::text, 2, '0')
                WHEN 'U' THEN lpad(((doy + 7 - dow) / 7)::text, 2, '0')
                WHEN 'V' THEN to_char(ts, 'IW')
                WHEN 'G' THEN to_char(ts, 'IYYY')
                WHEN 'g' THEN to_char(ts, 'IY')
                WHEN 'Y' THEN to_char(ts, 'YYYY')
                WHEN '%' THEN '%'
            END;
            IF piece IS NULL THEN
                RETURN NULL;  -- an unknown conversion, as in SQLite
            END IF;
            out := out || piece;
        END IF;
        i := i + 1;
    END LOOP;
    RETURN out;
END
$$;

-- ---------------------------------------------------------------- JSON

-- The value at a SQLite JSON path ('$', '.key', '."key"', '[N]', '[#-N]'; for -> and ->> also a
-- bare key or array index), or NULL when there is none. Malformed JSON is PostgreSQL's error.
CREATE OR REPLACE FUNCTION __talon_json_find(doc text, path text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    j jsonb;
    rest text;
    step text[];
    idx bigint;
BEGIN
    IF doc IS NULL OR path IS NULL THEN
        RETURN NULL;
    END IF;
    j := doc::jsonb;
    IF left(path, 1) <> '$' THEN
        IF path ~ '^[0-9]+$' THEN
            RETURN CASE WHEN jsonb_typeof(j) = 'array' THEN j -> path::integer END;
        END IF;
        RETURN CASE WHEN jsonb_typeof(j) = 'object' THEN j -> path END;
    END IF;
    rest := substr(path, 2);
    WHILE rest <> '' LOOP
        step := regexp_match(rest, '^\."((?:[^"\\]|\\.)*)"');
        IF step IS NULL THEN
            step := regexp_match(rest, '^\.([^.[]+)');
        END IF;
        IF step IS NOT NULL THEN
            j := CASE WHEN jsonb_typeof(j) = 'object' THEN j -> step[1] END;
        ELSE
            step := regexp_match(rest, '^\[(#-)?([0-9]+)\]');
            IF step IS NULL THEN
                RAISE EXCEPTION 'bad JSON path: %', path USING ERRCODE = '22023';
            END IF;
            idx := step[2]::bigint;
            IF step[1] IS NOT NULL THEN
                idx := CASE WHEN jsonb_typeof(j) = 'array' THEN jsonb_array_length(j) - idx END;
            END IF;
            j := CASE WHEN jsonb_typeof(j) = 'array' AND idx BETWEEN 0 AND 2147483647 THEN j -> idx::integer END;
        END IF;
        IF j IS NULL THEN
            RETURN NULL;
        END IF;
        rest := substr(rest, length((regexp_match(rest, '^(\."(?:[^"\\]|\\.)*"|\.[^.[]+|\[(?:#-)?[0-9]+\])'))[1]) + 1);
    END LOOP;
    RETURN j;
END
$$;

-- A JSON value as json_extract() gives it: strings without quotes, true and false as 1 and 0,
-- null as NULL, numbers, arrays and objects as their JSON text.
CREATE OR REPLACE FUNCTION __talon_json_sql(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(v)
        WHEN 'string' THEN v #>> '{}'
        WHEN 'boolean' THEN CASE WHEN v = 'true'::jsonb THEN '1' ELSE '0' END
        WHEN 'null' THEN NULL
        ELSE v::text
    END
$$;

CREATE OR REPLACE FUNCTION __talon_json_type(doc text, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(v)
        WHEN 'string' THEN 'text'
        WHEN 'boolean' THEN v::text
        WHEN 'number' THEN CASE WHEN v::text ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END
        ELSE jsonb_typeof(v)
    END
    FROM (SELECT __talon_json_find(doc, path) AS v) AS found
$$;

CREATE OR REPLACE FUNCTION __talon_json_array_length(doc text, path text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'array' THEN jsonb_array_length(v) WHEN v IS NOT NULL THEN 0 END
    FROM (SELECT __talon_json_find(doc, path) AS v) AS found
$$;

CREATE OR REPLACE FUNCTION __talon_json_valid(doc text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF doc IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM doc::jsonb;
    RETURN 1;
EXCEPTION WHEN data_exception THEN
    RETURN 0;
END
$$;
