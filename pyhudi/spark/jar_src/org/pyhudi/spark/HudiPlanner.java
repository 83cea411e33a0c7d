package org.pyhudi.spark;

/**
 * The planning of a Hudi scan, answered by pyhudi in the driver's Python process (a Py4J callback).
 * Every argument and result is JSON.
 */
public interface HudiPlanner {
  /**
   * Whether Spark's own parquet reader can read this scan exactly: {"use": true, "root": uri} or
   * {"use": false, "why": reason}. {@code optionsJson}: the read's options; {@code schemaJson}: the
   * scan's columns, a Spark schema as JSON.
   */
  String describe(String optionsJson, String schemaJson);

  /**
   * The base files the scan reads, pruned by the predicates: [[uri, length], ...] (URIs percent-encoded). {@code predicatesJson}:
   * [[column, op, value], ...] (conjuncts; see pyhudi.read.filters).
   */
  String files(String optionsJson, String predicatesJson);
}
