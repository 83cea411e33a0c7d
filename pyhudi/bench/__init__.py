"""Benchmarks shipped with the package so that ``pyhudi bench ...`` runs them anywhere."""
