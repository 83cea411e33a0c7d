"""One transaction per instant: the lock, the heartbeat, conflict checks and the commit of every write."""
