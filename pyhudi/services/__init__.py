"""Table services: rollback, clean, archive and compaction, for data and metadata tables alike."""
