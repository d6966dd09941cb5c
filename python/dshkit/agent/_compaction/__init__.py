"""What automatic compaction measures and writes: the token meter, the range a summary replaces,
the summary request and pruned results. Private: configured with `dshkit.agent.Compaction`."""
