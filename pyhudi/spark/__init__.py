"""Spark integration: the session pyhudi runs on, and the Arrow task functions it ships to executors."""
