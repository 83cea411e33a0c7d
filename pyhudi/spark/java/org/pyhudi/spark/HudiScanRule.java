package org.pyhudi.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * An optimizer rule that hands Spark's own parquet reader the scans of pyhudi's Python data source that it can
 * read exactly (pyhudi's planner decides: copy-on-write snapshots and read-optimized queries of tables whose
 * files Spark reads as pyhudi does), with the base files pyhudi's planner prunes from the metadata table. The
 * filters of the query stay in the plan: Spark evaluates them on every row read.
 */
public final class HudiScanRule extends Rule<LogicalPlan> {
  private static final ObjectMapper JSON = new ObjectMapper();
  /**
   * Dates and timestamps as written (proleptic Gregorian, as Avro, parquet-avro and pyarrow write them), never
   * rebased from Spark 2's hybrid calendar nor refused for being old: base files are not Spark-written.
   */
  private static final scala.collection.immutable.Map<String, String> READ_OPTIONS =
      scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(
          java.util.Map.of("datetimeRebaseMode", "CORRECTED", "int96RebaseMode", "CORRECTED")));
  private final SparkSession spark;
  private final HudiPlanner planner;
  private final Set<String> names;

  private HudiScanRule(SparkSession spark, HudiPlanner planner, Set<String> names) {
    this.spark = spark;
    this.planner = planner;
    this.names = names;
  }

  /** Adds the rule to the session's optimizer (replacing one added before), for the sources named {@code names}. */
  public static void install(SparkSession spark, HudiPlanner planner, String[] names) {
    List<Rule<LogicalPlan>> rules = new ArrayList<>();
    for (Rule<LogicalPlan> r : CollectionConverters.asJava(spark.experimental().extraOptimizations())) {
      if (!(r instanceof HudiScanRule)) {
        rules.add(r);
      }
    }
    rules.add(new HudiScanRule(spark, planner, Set.of(names)));
    spark.experimental().extraOptimizations_$eq(CollectionConverters.asScala(rules).toList());
  }

  /** Takes the rule out of the session's optimizer. */
  public static void uninstall(SparkSession spark) {
    List<Rule<LogicalPlan>> rules = new ArrayList<>();
    for (Rule<LogicalPlan> r : CollectionConverters.asJava(spark.experimental().extraOptimizations())) {
      if (!(r instanceof HudiScanRule)) {
        rules.add(r);
      }
    }
    spark.experimental().extraOptimizations_$eq(CollectionConverters.asScala(rules).toList());
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return p instanceof DataSourceV2ScanRelation s && s.relation().table() instanceof PythonTable t
            && names.contains(t.name());
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        return isDefinedAt(p) ? replace((DataSourceV2ScanRelation) p) : p;
      }
    });
  }

  private LogicalPlan replace(DataSourceV2ScanRelation scan) {
    List<AttributeReference> output = CollectionConverters.asJava(scan.output());
    List<StructField> fields = new ArrayList<>();
    for (AttributeReference a : output) {
      fields.add(new StructField(a.name(), a.dataType(), a.nullable(), a.metadata()));
    }
    StructType dataSchema = new StructType(fields.toArray(new StructField[0]));
    String options = JSON.valueToTree(scan.relation().options().asCaseSensitiveMap()).toString();
    JsonNode answer;
    try {
      answer = JSON.readTree(planner.describe(options, dataSchema.json()));
    } catch (java.io.IOException e) {
      throw new IllegalStateException("pyhudi: the planner's answer is not JSON", e);
    }
    if (!answer.path("use").asBoolean(false)) {
      return scan;
    }
    HudiFileIndex index = new HudiFileIndex(planner, options, answer.get("root").asText());
    HadoopFsRelation relation = new HadoopFsRelation(index, new StructType(), dataSchema, Option.empty(),
        new ParquetFileFormat(), READ_OPTIONS, spark);
    Seq<AttributeReference> attrs = scan.output();
    return org.apache.spark.sql.execution.datasources.LogicalRelation$.MODULE$.apply(relation, attrs, Option.empty(), false,
        Option.empty());
  }
}
