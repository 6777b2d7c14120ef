#!/usr/bin/env bash
# Bounds under real parallel load: 50 pgbench clients keep trying to buy seats of 3 excursions limited to 20 paid
# participants each (counters.set_bounds('seats', 'paid', max => 20)), with unpaid bookings, cancellations and moves
# between excursions mixed in. A refused booking is caught in the transaction (check_violation) and counted.
# Afterwards: no excursion has more than 20 paid bookings (recounted from the bookings table), every excursion is
# full (the load kept going long after it could fill them), the counter equals the recount (counters.verify empty),
# some bookings were refused, and no other error happened. Runs inside the suite's cluster (PG* variables).
set -euo pipefail
db=counters_bounds_pgbench
dir=$(mktemp -d)
trap 'rm -rf "$dir"; dropdb --if-exists "$db" >/dev/null 2>&1 || true' EXIT
dropdb --if-exists "$db" >/dev/null
createdb "$db"
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
q <<'SQL'
CREATE EXTENSION counters;
CREATE TABLE bookings (id bigserial PRIMARY KEY, excursion_id int NOT NULL, paid boolean NOT NULL);
CREATE TABLE outcomes (accepted boolean NOT NULL);
SELECT counters.create_counter('seats',
	'SELECT excursion_id, count(*) FILTER (WHERE paid) AS paid, count(*) AS booked FROM bookings GROUP BY excursion_id');
SELECT counters.set_bounds('seats', 'paid', max => 20);
-- What an application does: try to book, and tell the customer when the excursion is full.
CREATE FUNCTION book(excursion int, pay boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO bookings (excursion_id, paid) VALUES (excursion, pay);
	INSERT INTO outcomes VALUES (true);
	RETURN true;
EXCEPTION WHEN check_violation THEN
	INSERT INTO outcomes VALUES (false);
	RETURN false;
END $$;
CREATE FUNCTION pay(excursion int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	UPDATE bookings SET paid = true
	 WHERE id = (SELECT id FROM bookings WHERE excursion_id = excursion AND NOT paid LIMIT 1 FOR UPDATE SKIP LOCKED);
	RETURN true;
EXCEPTION WHEN check_violation THEN
	INSERT INTO outcomes VALUES (false);
	RETURN false;
END $$;
CREATE FUNCTION move(from_excursion int, to_excursion int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	UPDATE bookings SET excursion_id = to_excursion
	 WHERE id = (SELECT id FROM bookings WHERE excursion_id = from_excursion AND paid LIMIT 1 FOR UPDATE SKIP LOCKED);
	RETURN true;
EXCEPTION WHEN check_violation THEN
	INSERT INTO outcomes VALUES (false);
	RETURN false;
END $$;
SQL
cat > "$dir/book.pgbench" <<'EOF2'
\set e random(1, 3)
SELECT book(:e, true);
EOF2
cat > "$dir/mixed.pgbench" <<'EOF2'
\set e random(1, 3)
\set f random(1, 3)
SELECT book(:e, false);
SELECT pay(:e);
SELECT move(:e, :f);
EOF2
cat > "$dir/cancel.pgbench" <<'EOF2'
\set e random(1, 3)
DELETE FROM bookings WHERE id = (SELECT id FROM bookings WHERE excursion_id = :e AND paid ORDER BY id DESC LIMIT 1 FOR UPDATE SKIP LOCKED);
EOF2
out=$(pgbench -n -c 50 -j 4 -t 40 -f "$dir/book.pgbench@6" -f "$dir/mixed.pgbench@3" -f "$dir/cancel.pgbench@1" \
	"$db" 2>&1) || { echo "$out"; echo "bounds_pgbench: pgbench failed"; exit 1; }
failed=$(awk '/^number of failed transactions/ {print $5; exit}' <<<"$out")
aborted=$(grep -c 'aborted' <<<"$out" || true)
echo "$out" | grep -E '^(number of (transactions|failed)|tps)' || true
# One last round of bookings after the load, so that every excursion ends full whatever the cancellations did.
q -c "SELECT book(e, true) FROM generate_series(1, 3) e, generate_series(1, 25)" >/dev/null
result=$(q <<'SQL'
SELECT pg_catalog.format('over=%s full=%s drift=%s refused=%s accepted=%s',
	(SELECT count(*) FROM (SELECT excursion_id FROM bookings WHERE paid GROUP BY 1 HAVING count(*) > 20) o),
	(SELECT count(*) FROM (SELECT excursion_id FROM bookings WHERE paid GROUP BY 1 HAVING count(*) = 20) f),
	(SELECT count(*) FROM counters.verify('seats')),
	(SELECT count(*) FROM outcomes WHERE NOT accepted),
	(SELECT count(*) FROM outcomes WHERE accepted));
SQL
)
echo "bounds_pgbench: $result (pgbench failed transactions: ${failed:-0}, aborted clients: $aborted)"
[[ $result == "over=0 full=3 drift=0 "* ]] || { echo "bounds_pgbench: FAILED: overbooked, not full or drifted"; exit 1; }
[[ $result != *"refused=0 "* ]] || { echo "bounds_pgbench: FAILED: nothing was refused, the test did not test"; exit 1; }
[ "${failed:-0}" = 0 ] && [ "$aborted" = 0 ] || { echo "$out"; echo "bounds_pgbench: FAILED: errors other than check_violation"; exit 1; }
echo "bounds_pgbench: ok"
