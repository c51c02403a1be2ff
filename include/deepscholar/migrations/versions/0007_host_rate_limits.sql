-- One row per external host (host[:port] as the circuit breaker names it). A process that wants to send a
-- request reserves the next slot in one UPDATE (the row lock serialises reservations), then sleeps until
-- the slot's time: requests to a host start at least one interval apart across every process.
CREATE TABLE deepscholar.host_rate_limits (
    host        text PRIMARY KEY,
    next_slot   timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
