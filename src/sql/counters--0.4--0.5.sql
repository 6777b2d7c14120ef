-- counters 0.4 to 0.5 (complain if this file is sourced in psql rather than through ALTER EXTENSION)
\echo Use "ALTER EXTENSION counters UPDATE TO '0.5'" to load this file. \quit

-- ---- typed top(): counters.top(counter anyelement, ...) returns rows of the counter's own row type ----
CREATE FUNCTION counters.top(counter anyelement, column_name text, k integer, filter text DEFAULT NULL)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'counters_top_rows'
	LANGUAGE C STABLE;
COMMENT ON FUNCTION counters.top(anyelement, text, integer, text) IS
	'the k largest keys of a counter by one value column, exactly, as rows of the counter''s own row type';
-- ---- end of typed top() ----
