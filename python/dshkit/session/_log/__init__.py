"""The log's records: events in memory, their durable encoding and checksums, loading a stored log
and the formats a store's records may be in. Private: reached through `dshkit.session.Session`."""
