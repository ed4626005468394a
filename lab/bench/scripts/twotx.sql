-- One ride as two SERIALIZABLE transactions on a schema with random ids, every statement naming
-- the rider as the API's do: the least a ride can commit with the key's promises kept. Transaction A records the key at ride_created with the
-- ride and its audit record; transaction B records a made-up charge id, stages the receipt job
-- and finishes the key, fenced on the lock generation that A took, as the API does with its
-- leased locks (migration 00007).
--
-- pgbench retries a script from its first line after a serialization failure, with the same
-- random numbers, so a retry sends the same key: it finds the key that a failed B left and
-- only takes its lock again (:found).
\set key random(1, 9223372036854775806)
\set found 0
\set origin_lat 37.7 + random(0, 99999) / 1000000.0
\set origin_lon -122.5 + random(0, 99999) / 1000000.0
\set target_lat 37.3 + random(0, 99999) / 1000000.0
\set target_lon -121.9 + random(0, 99999) / 1000000.0
-- The made-up charge id, drawn here and sent as a value, as the API sends the id Stripe returned:
-- Citus refuses a volatile function such as random() in an UPDATE of a distributed table.
\set charge random(1, 9223372036854775806)
-- Client i is bench rider first_rider + i; first_rider (-D) is 0 but for a pgbench that takes
-- over the rider of a client another aborted (pgbench_citus.go).
\set rider :client_id + :first_rider

-- Authentication, as the API does it for every request.
SELECT id AS user_id, created_at, email, stripe_customer_id
FROM users
WHERE api_token_hash = sha256(convert_to('bench-rider-' || :rider::text, 'UTF8')) \gset

-- A: the key at ride_created, its charge about to be attempted, with the ride and its audit record.
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT id AS key_id, 1 AS found
FROM idempotency_keys
WHERE user_id = :user_id AND idempotency_key = 'bench-' || lpad(:key::text, 19, '0')
FOR UPDATE \aset
\if :found = 0
INSERT INTO idempotency_keys (idempotency_key, locked_at, locked_until, lock_generation,
    request_method, request_params, request_path, origin_ip, recovery_point,
    stripe_idempotency_key, charge_attempted_at, user_id)
VALUES ('bench-' || lpad(:key::text, 19, '0'), now(), now() + interval '5 seconds', 1, 'POST',
    jsonb_build_object('origin_lat', :origin_lat::float8, 'origin_lon', :origin_lon::float8,
        'target_lat', :target_lat::float8, 'target_lon', :target_lon::float8),
    '/rides', '127.0.0.1', 'ride_created', 'rocket-rides-' || gen_random_uuid(), now(), :user_id)
RETURNING id AS key_id, lock_generation \gset
INSERT INTO rides (idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon, user_id)
VALUES (:key_id, :origin_lat, :origin_lon, :target_lat, :target_lon, :user_id)
RETURNING id AS ride_id \gset
INSERT INTO audit_records (action, data, origin_ip, resource_id, resource_type, user_id)
VALUES ('ride.created',
    jsonb_build_object('origin_lat', :origin_lat::float8, 'origin_lon', :origin_lon::float8,
        'target_lat', :target_lat::float8, 'target_lon', :target_lon::float8),
    '127.0.0.1', :ride_id, 'ride', :user_id);
\else
UPDATE idempotency_keys
SET last_run_at = now(), locked_at = now(), locked_until = now() + interval '5 seconds',
    lock_generation = lock_generation + 1
WHERE user_id = :user_id AND id = :key_id
RETURNING lock_generation \gset
\endif
COMMIT;

-- B: the charge id, the receipt job and the response; finished and unlocked, if still ours.
BEGIN ISOLATION LEVEL SERIALIZABLE;
UPDATE rides SET stripe_charge_id = 'ch_' || md5(:charge::text)
WHERE user_id = :user_id AND idempotency_key_id = :key_id
RETURNING id AS ride_id \gset
INSERT INTO staged_jobs (job_name, job_args, user_id)
VALUES ('send_ride_receipt', jsonb_build_object('ride_id', :ride_id::text, 'user_id', :user_id::bigint,
    'amount', 2000, 'currency', 'usd'), :user_id);
UPDATE idempotency_keys
SET locked_at = NULL, locked_until = NULL, recovery_point = 'finished', response_code = 201,
    response_body = (
        SELECT jsonb_build_object('message', 'Ride booked and paid.', 'ride', jsonb_build_object(
            'id', id::text, 'origin_lat', origin_lat, 'origin_lon', origin_lon,
            'target_lat', target_lat, 'target_lon', target_lon,
            'stripe_charge_id', stripe_charge_id, 'created_at', created_at))
        FROM rides WHERE user_id = :user_id AND id = :ride_id)
WHERE user_id = :user_id AND id = :key_id AND lock_generation = :lock_generation;
COMMIT;
