"""Indexes: locate the file group of each incoming record key (one interface, several implementations)."""
