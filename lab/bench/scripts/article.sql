-- One ride as the article books it: four SERIALIZABLE transactions (tx1 to tx4) on a schema
-- whose ids come from sequences. As in the article's original, the phases after tx1 update the
-- key by id without re-reading it first (the Go executor's fencing read is its own addition).
-- No Stripe: tx3 records a made-up charge id.
--
-- pgbench retries a script from its first line after a serialization failure, with the same
-- random numbers, so a retry sends the same key: like a client retrying after a 409, it finds
-- the key where the failed try left it and resumes from its recovery point (:step).
\set key random(1, 9223372036854775806)
\set step 0
\set origin_lat 37.7 + random(0, 99999) / 1000000.0
\set origin_lon -122.5 + random(0, 99999) / 1000000.0
\set target_lat 37.3 + random(0, 99999) / 1000000.0
\set target_lon -121.9 + random(0, 99999) / 1000000.0

-- Authentication, as the API does it for every request. Client i is bench rider i.
SELECT id AS user_id, created_at, email, stripe_customer_id
FROM users
WHERE api_token_hash = sha256(convert_to('bench-rider-' || :client_id::text, 'UTF8')) \gset

-- tx1: insert the key, locked, at started; or lock the one a failed try left.
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT id AS key_id,
    CASE recovery_point
        WHEN 'started' THEN 1 WHEN 'ride_created' THEN 2 WHEN 'charge_created' THEN 3 ELSE 4
    END AS step
FROM idempotency_keys
WHERE user_id = :user_id AND idempotency_key = 'bench-' || lpad(:key::text, 19, '0')
FOR UPDATE \aset
\if :step = 0
INSERT INTO idempotency_keys (idempotency_key, locked_at, request_method, request_params,
    request_path, origin_ip, recovery_point, stripe_idempotency_key, user_id)
VALUES ('bench-' || lpad(:key::text, 19, '0'), now(), 'POST',
    jsonb_build_object('origin_lat', :origin_lat::float8, 'origin_lon', :origin_lon::float8,
        'target_lat', :target_lat::float8, 'target_lon', :target_lon::float8),
    '/rides', '127.0.0.1', 'started', 'rocket-rides-' || gen_random_uuid(), :user_id)
RETURNING id AS key_id, 1 AS step \gset
\else
UPDATE idempotency_keys SET last_run_at = now(), locked_at = now() WHERE id = :key_id;
\endif
COMMIT;

-- tx2: the ride and its audit record; recovery point ride_created.
\if :step <= 1
BEGIN ISOLATION LEVEL SERIALIZABLE;
INSERT INTO rides (idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon, user_id)
VALUES (:key_id, :origin_lat, :origin_lon, :target_lat, :target_lon, :user_id)
RETURNING id AS ride_id \gset
INSERT INTO audit_records (action, data, origin_ip, resource_id, resource_type, user_id)
VALUES ('ride.created',
    jsonb_build_object('origin_lat', :origin_lat::float8, 'origin_lon', :origin_lon::float8,
        'target_lat', :target_lat::float8, 'target_lon', :target_lon::float8),
    '127.0.0.1', :ride_id, 'ride', :user_id);
UPDATE idempotency_keys SET recovery_point = 'ride_created' WHERE id = :key_id;
COMMIT;
\endif

-- tx3: what Stripe answered, a charge id; recovery point charge_created.
\if :step <= 2
BEGIN ISOLATION LEVEL SERIALIZABLE;
UPDATE rides SET stripe_charge_id = 'ch_' || md5(random()::text) WHERE idempotency_key_id = :key_id;
UPDATE idempotency_keys SET recovery_point = 'charge_created' WHERE id = :key_id;
COMMIT;
\endif

-- tx4: stage the receipt job and store the response; the key is finished and unlocked.
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT id AS ride_id FROM rides WHERE idempotency_key_id = :key_id \gset
INSERT INTO staged_jobs (job_name, job_args)
VALUES ('send_ride_receipt', jsonb_build_object('ride_id', :ride_id::text, 'user_id', :user_id::bigint,
    'amount', 2000, 'currency', 'usd'));
UPDATE idempotency_keys
SET locked_at = NULL, recovery_point = 'finished', response_code = 201,
    response_body = (
        SELECT jsonb_build_object('message', 'Ride booked and paid.', 'ride', jsonb_build_object(
            'id', id::text, 'origin_lat', origin_lat, 'origin_lon', origin_lon,
            'target_lat', target_lat, 'target_lon', target_lon,
            'stripe_charge_id', stripe_charge_id, 'created_at', created_at))
        FROM rides WHERE id = :ride_id)
WHERE id = :key_id;
COMMIT;
