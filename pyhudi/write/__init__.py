"""The write path: prepare -> tag -> plan -> write -> commit, one producer class per operation."""
